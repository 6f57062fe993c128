//! Replies and their wire encoding. Commands build a [`Reply`] tree without knowing the protocol
//! version; [`Reply::encode`] writes it as RESP2 or RESP3 (chosen per connection by `HELLO`). The
//! RESP3-only types degrade the way Redis degrades them for RESP2 clients: null -> `$-1`/`*-1`,
//! map -> flat array, set -> array, double -> bulk string, boolean -> integer.

use std::borrow::Cow;

use bytes::{BufMut, Bytes, BytesMut};

/// The protocol version a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// RESP2, the default for new connections.
    #[default]
    Resp2,
    /// RESP3, after `HELLO 3`.
    Resp3,
}

impl Protocol {
    /// The number `HELLO` and `CLIENT INFO` report.
    pub fn version(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// One reply, protocol-independent.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+text`: status replies such as `OK` and `PONG`.
    Simple(Cow<'static, str>),
    /// `-CODE message`: the text includes the code (e.g. `ERR ...`).
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$n` bytes.
    Bulk(Bytes),
    /// The null bulk string (RESP2 `$-1`, RESP3 `_`).
    Nil,
    /// `*n` elements.
    Array(Vec<Reply>),
    /// The null array (RESP2 `*-1`, RESP3 `_`).
    NilArray,
    /// A double (RESP3 `,`; RESP2 a bulk string).
    Double(f64),
    /// A double already written out (Redis's `addReplyHumanLongDouble`: GEOPOS's and
    /// WITHCOORD's `%.17Lf` without trailing zeros): RESP3 `,`, RESP2 a bulk string.
    DoubleText(String),
    /// A boolean (RESP3 `#`; RESP2 the integer 1 or 0).
    Bool(bool),
    /// Key-value pairs (RESP3 `%`; RESP2 a flat array).
    Map(Vec<(Reply, Reply)>),
    /// An unordered collection (RESP3 `~`; RESP2 an array).
    Set(Vec<Reply>),
    /// Out-of-band data: pub/sub messages and subscription confirmations (RESP3 `>`; RESP2 an
    /// array).
    Push(Vec<Reply>),
    /// Text for people (INFO, CLIENT LIST): RESP3's verbatim string `=N\r\ntxt:...`, RESP2's
    /// bulk string.
    Verbatim(String),
    /// Several replies sent one after the other, for commands that answer once per argument
    /// (SUBSCRIBE a b).
    Several(Vec<Reply>),
    /// An array of bulk strings already in wire form: what [`Reply::Array`] of
    /// [`Reply::Bulk`]s encodes to, built without a reply per element.
    Bulks(EncodedBulks),
}

/// An array of bulk strings written straight into one buffer, in the wire form both protocol
/// versions share. A collection read appends its elements as the engine visits them: building
/// a reply per element (an allocation, a copy, an encode step and a drop each) was a third of
/// the CPU of LRANGE of short elements.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EncodedBulks {
    count: usize,
    wire: Vec<u8>,
}

impl EncodedBulks {
    /// An empty array whose buffer holds `bytes` before it grows.
    pub fn with_capacity(bytes: usize) -> EncodedBulks {
        EncodedBulks {
            count: 0,
            wire: Vec::with_capacity(bytes),
        }
    }

    /// Appends one bulk string.
    pub fn push(&mut self, b: &[u8]) {
        let mut len = itoa::Buffer::new();
        let len = len.format(b.len());
        self.wire.reserve(len.len() + b.len() + 5);
        self.wire.push(b'$');
        self.wire.extend_from_slice(len.as_bytes());
        self.wire.extend_from_slice(b"\r\n");
        self.wire.extend_from_slice(b);
        self.wire.extend_from_slice(b"\r\n");
        self.count += 1;
    }

    /// The number of bulk strings.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The bulk strings, read back out of the wire form (scripts, which take them as values).
    pub fn items(&self) -> impl Iterator<Item = &[u8]> {
        let mut rest = &self.wire[..];
        std::iter::from_fn(move || {
            // `$<len>\r\n<bytes>\r\n`, as `push` wrote it.
            let digits_end = rest.iter().position(|&b| b == b'\r')?;
            let len: usize = std::str::from_utf8(rest.get(1..digits_end)?)
                .ok()?
                .parse()
                .ok()?;
            let item = rest.get(digits_end + 2..digits_end + 2 + len)?;
            rest = rest.get(digits_end + 4 + len..)?;
            Some(item)
        })
    }
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Simple(Cow::Borrowed("OK"))
    }

    /// A status reply from a static string.
    pub fn simple(s: &'static str) -> Reply {
        Reply::Simple(Cow::Borrowed(s))
    }

    /// A bulk string.
    pub fn bulk(b: impl Into<Bytes>) -> Reply {
        Reply::Bulk(b.into())
    }

    /// A bulk string, or null when absent.
    pub fn bulk_or_nil(b: Option<Bytes>) -> Reply {
        b.map_or(Reply::Nil, Reply::Bulk)
    }

    /// A bulk string from text.
    pub fn text(s: impl Into<String>) -> Reply {
        Reply::Bulk(Bytes::from(s.into()))
    }

    /// True for error replies.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends the wire form of this reply to `out`.
    pub fn encode(&self, proto: Protocol, out: &mut BytesMut) {
        let resp3 = proto == Protocol::Resp3;
        match self {
            Reply::Simple(s) => line(out, b'+', s),
            Reply::Error(e) => line(out, b'-', e),
            Reply::Int(n) => header(out, b':', *n),
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil if resp3 => out.put_slice(b"_\r\n"),
            Reply::Nil => out.put_slice(b"$-1\r\n"),
            Reply::NilArray if resp3 => out.put_slice(b"_\r\n"),
            Reply::NilArray => out.put_slice(b"*-1\r\n"),
            Reply::Double(d) => {
                // As Redis 7.0's addReplyDouble: `%.17g`.
                let text = crate::num::format_g17(*d);
                if resp3 {
                    line(out, b',', &text);
                } else {
                    bulk(out, text.as_bytes());
                }
            }
            Reply::DoubleText(text) if resp3 => line(out, b',', text),
            Reply::DoubleText(text) => bulk(out, text.as_bytes()),
            Reply::Bool(b) if resp3 => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Reply::Bool(b) => header(out, b':', i64::from(*b)),
            Reply::Array(items) => {
                header(out, b'*', items.len() as i64);
                for item in items {
                    item.encode(proto, out);
                }
            }
            Reply::Verbatim(t) if resp3 => {
                header(out, b'=', t.len() as i64 + 4);
                out.put_slice(b"txt:");
                out.put_slice(t.as_bytes());
                out.put_slice(b"\r\n");
            }
            Reply::Verbatim(t) => bulk(out, t.as_bytes()),
            Reply::Several(items) => {
                for item in items {
                    item.encode(proto, out);
                }
            }
            Reply::Bulks(bulks) => {
                header(out, b'*', bulks.count as i64);
                out.put_slice(&bulks.wire);
            }
            Reply::Push(items) => {
                header(out, if resp3 { b'>' } else { b'*' }, items.len() as i64);
                for item in items {
                    item.encode(proto, out);
                }
            }
            Reply::Set(items) => {
                header(out, if resp3 { b'~' } else { b'*' }, items.len() as i64);
                for item in items {
                    item.encode(proto, out);
                }
            }
            Reply::Map(pairs) => {
                if resp3 {
                    header(out, b'%', pairs.len() as i64);
                } else {
                    header(out, b'*', 2 * pairs.len() as i64);
                }
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
        }
    }

    /// The wire form as a fresh buffer (tests, one-off replies).
    pub fn to_bytes(&self, proto: Protocol) -> Bytes {
        let mut out = BytesMut::new();
        self.encode(proto, &mut out);
        out.freeze()
    }
}

impl From<crate::Error> for Reply {
    fn from(e: crate::Error) -> Reply {
        Reply::Error(e.to_string())
    }
}

fn header(out: &mut BytesMut, kind: u8, n: i64) {
    out.put_u8(kind);
    out.put_slice(itoa::Buffer::new().format(n).as_bytes());
    out.put_slice(b"\r\n");
}

fn bulk(out: &mut BytesMut, b: &[u8]) {
    header(out, b'$', b.len() as i64);
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

/// A one-line reply; CR and LF inside would break framing, so they become spaces (as in Redis).
fn line(out: &mut BytesMut, kind: u8, s: &str) {
    out.put_u8(kind);
    for &b in s.as_bytes() {
        out.put_u8(if b == b'\r' || b == b'\n' { b' ' } else { b });
    }
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(r: &Reply) -> (Bytes, Bytes) {
        (r.to_bytes(Protocol::Resp2), r.to_bytes(Protocol::Resp3))
    }

    /// Bulk strings written straight into wire form encode as an array of bulk replies does,
    /// in both protocol versions, and read back as themselves (CR LF inside, empty, binary).
    #[test]
    fn encoded_bulks_are_an_array_of_bulks() {
        let items: Vec<&[u8]> = vec![
            b"a",
            b"",
            b"line\r\nbreak",
            &[0, 255, b'$', b'\r'],
            b"0123456789",
        ];
        for n in 0..=items.len() {
            let mut bulks = EncodedBulks::default();
            for item in &items[..n] {
                bulks.push(item);
            }
            let array = Reply::Array(
                items[..n]
                    .iter()
                    .map(|b| Reply::Bulk(Bytes::copy_from_slice(b)))
                    .collect(),
            );
            assert_eq!(both(&Reply::Bulks(bulks.clone())), both(&array));
            assert_eq!(bulks.len(), n);
            assert_eq!(bulks.is_empty(), n == 0);
            assert_eq!(bulks.items().collect::<Vec<_>>(), items[..n]);
        }
    }

    #[test]
    fn resp3_types_degrade_for_resp2() {
        assert_eq!(
            both(&Reply::Nil),
            (Bytes::from("$-1\r\n"), Bytes::from("_\r\n"))
        );
        assert_eq!(
            both(&Reply::Double(1.5)),
            (Bytes::from("$3\r\n1.5\r\n"), Bytes::from(",1.5\r\n"))
        );
        assert_eq!(
            both(&Reply::Bool(true)),
            (Bytes::from(":1\r\n"), Bytes::from("#t\r\n"))
        );
        let map = Reply::Map(vec![(Reply::text("a"), Reply::Int(1))]);
        assert_eq!(
            both(&map),
            (
                Bytes::from("*2\r\n$1\r\na\r\n:1\r\n"),
                Bytes::from("%1\r\n$1\r\na\r\n:1\r\n")
            )
        );
    }

    #[test]
    fn errors_stay_on_one_line() {
        let r = Reply::Error("ERR bad\r\nthing".into());
        assert_eq!(
            r.to_bytes(Protocol::Resp2),
            Bytes::from("-ERR bad  thing\r\n")
        );
    }
}
