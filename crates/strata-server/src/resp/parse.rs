//! The incremental request parser. It reads commands out of a connection's byte buffer as they
//! arrive: RESP multibulk (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) and inline lines (`GET k\n`, with or
//! without `\r`, with Redis's quoting rules). It never panics and never trusts a declared length:
//! memory grows only with bytes that actually arrived, because an argument is taken out of the
//! buffer only when all of it is there, and the argument vector grows as arguments complete.
//!
//! State survives between calls, so a half-received command is not parsed again from its start
//! when more bytes come (a 1M-argument command costs O(bytes), not O(bytes x reads)).

use bytes::{Buf, Bytes, BytesMut};

use crate::num::parse_i64;

/// Longest inline command line, and longest `*N`/`$N` header line (Redis's `PROTO_INLINE_MAX_SIZE`).
pub const INLINE_BYTES_MAX: usize = 64 * 1024;
/// Most arguments in one multibulk command (1M, Redis's absolute limit).
pub const MULTIBULK_ARGS_MAX: usize = 1024 * 1024;
/// Most arguments, and largest bulk argument, from a client that has not authenticated while a
/// password is required (Redis 7's limits, from its fix of CVE-2021-32675: without them a
/// client with no password could make the server hold gigabytes).
pub const UNAUTHENTICATED_ARGS_MAX: usize = 10;
/// See [`UNAUTHENTICATED_ARGS_MAX`].
pub const UNAUTHENTICATED_BULK_BYTES_MAX: usize = 16 * 1024;
/// Default largest bulk argument (Redis's `proto-max-bulk-len`).
pub const BULK_BYTES_MAX_DEFAULT: usize = 512 * 1024 * 1024;

/// Bounds a parser enforces on what a client may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest bulk argument.
    pub bulk_bytes_max: usize,
    /// Longest inline line and header line.
    pub inline_bytes_max: usize,
    /// Most arguments in one command.
    pub multibulk_args_max: usize,
    /// The client must still authenticate: [`UNAUTHENTICATED_ARGS_MAX`] and
    /// [`UNAUTHENTICATED_BULK_BYTES_MAX`] apply, with Redis's errors.
    pub unauthenticated: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            bulk_bytes_max: BULK_BYTES_MAX_DEFAULT,
            inline_bytes_max: INLINE_BYTES_MAX,
            multibulk_args_max: MULTIBULK_ARGS_MAX,
            unauthenticated: false,
        }
    }
}

/// What one call to [`RequestParser::parse`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// A complete command: name and arguments (never empty).
    Command(Vec<Bytes>),
    /// More bytes are needed; everything usable so far has been consumed.
    Incomplete,
    /// The stream broke the protocol (the text follows `Protocol error: `). The connection must
    /// be answered with an error and closed; the parser is not usable afterwards.
    Error(String),
}

/// A multibulk command whose arguments are still arriving.
#[derive(Debug)]
struct Pending {
    /// Arguments still to come.
    args_left: usize,
    /// Arguments complete so far.
    args: Vec<Bytes>,
    /// Length of the bulk whose `$N` header was consumed but whose data has not fully arrived.
    bulk_len: Option<usize>,
}

/// Parses requests out of a growing buffer; one per connection.
#[derive(Debug, Default)]
pub struct RequestParser {
    pending: Option<Pending>,
}

/// Capacity reserved up front for a command's argument vector; larger commands grow as their
/// arguments arrive instead of trusting the declared count.
const ARGS_PREALLOC_MAX: usize = 64;

impl RequestParser {
    /// A parser with no command in progress.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when part of a command has been consumed from the buffer and the rest is awaited.
    pub fn in_progress(&self) -> bool {
        self.pending.is_some()
    }

    /// Takes the next complete command out of `buf`, consuming its bytes.
    pub fn parse(&mut self, buf: &mut BytesMut, limits: &Limits) -> Parsed {
        loop {
            if self.pending.is_some() {
                return self.parse_multibulk_args(buf, limits);
            }
            let Some(&first) = buf.first() else {
                return Parsed::Incomplete;
            };
            if first == b'*' {
                let line = match header_line(buf, limits, "too big mbulk count string") {
                    Ok(Some(line)) => line,
                    Ok(None) => return Parsed::Incomplete,
                    Err(e) => return Parsed::Error(e),
                };
                let count = parse_i64(&buf[1..line]);
                let consumed = line + 2;
                match count {
                    // `*0` and `*-1` are empty requests: Redis skips them silently.
                    Some(n) if n <= 0 => {
                        buf.advance(consumed);
                        continue;
                    }
                    Some(n)
                        if limits.unauthenticated && n as u64 > UNAUTHENTICATED_ARGS_MAX as u64 =>
                    {
                        return Parsed::Error("unauthenticated multibulk length".into())
                    }
                    Some(n) if (n as u64) <= limits.multibulk_args_max as u64 => {
                        buf.advance(consumed);
                        let n = n as usize;
                        self.pending = Some(Pending {
                            args_left: n,
                            args: Vec::with_capacity(n.min(ARGS_PREALLOC_MAX)),
                            bulk_len: None,
                        });
                    }
                    _ => return Parsed::Error("invalid multibulk length".into()),
                }
            } else {
                match parse_inline(buf, limits) {
                    Inline::Command(args) => return Parsed::Command(args),
                    Inline::Empty => continue,
                    Inline::Incomplete => return Parsed::Incomplete,
                    Inline::Error(e) => return Parsed::Error(e),
                }
            }
        }
    }

    fn parse_multibulk_args(&mut self, buf: &mut BytesMut, limits: &Limits) -> Parsed {
        let Some(pending) = self.pending.as_mut() else {
            return Parsed::Incomplete;
        };
        while pending.args_left > 0 {
            let len = match pending.bulk_len {
                Some(len) => len,
                None => {
                    let Some(&first) = buf.first() else {
                        return Parsed::Incomplete;
                    };
                    if first != b'$' {
                        return Parsed::Error(format!("expected '$', got '{}'", show_byte(first)));
                    }
                    let line = match header_line(buf, limits, "too big bulk count string") {
                        Ok(Some(line)) => line,
                        Ok(None) => return Parsed::Incomplete,
                        Err(e) => return Parsed::Error(e),
                    };
                    let len = match parse_i64(&buf[1..line]) {
                        Some(n)
                            if limits.unauthenticated
                                && n as u64 > UNAUTHENTICATED_BULK_BYTES_MAX as u64 =>
                        {
                            return Parsed::Error("unauthenticated bulk length".into())
                        }
                        Some(n) if n >= 0 && (n as u64) <= limits.bulk_bytes_max as u64 => {
                            n as usize
                        }
                        _ => return Parsed::Error("invalid bulk length".into()),
                    };
                    buf.advance(line + 2);
                    pending.bulk_len = Some(len);
                    len
                }
            };
            // `len + 2` cannot overflow: len <= bulk_bytes_max, a usize well below usize::MAX.
            let needed = len.saturating_add(2);
            if buf.len() < needed {
                return Parsed::Incomplete;
            }
            if &buf[len..needed] != b"\r\n" {
                return Parsed::Error("expected CRLF after bulk data".into());
            }
            let arg = buf.split_to(len).freeze();
            buf.advance(2);
            pending.args.push(arg);
            pending.bulk_len = None;
            pending.args_left -= 1;
        }
        match self.pending.take() {
            Some(done) => Parsed::Command(done.args),
            None => Parsed::Incomplete,
        }
    }
}

/// Finds the `\r\n` ending a `*N` or `$N` header at the start of `buf`. `Ok(Some(i))`: the line
/// is `buf[..i]` and `buf[i..i + 2]` is CRLF; `Ok(None)`: not all there yet.
fn header_line(buf: &[u8], limits: &Limits, too_big: &str) -> Result<Option<usize>, String> {
    // Search only as far as a legal header can reach, so hostile input costs bounded work.
    let window = &buf[..buf.len().min(limits.inline_bytes_max.saturating_add(2))];
    // A bare LF (or CR followed by anything but LF) can never become a valid header: fail now
    // instead of waiting for bytes that will not fix it.
    match window.iter().position(|&b| b == b'\r' || b == b'\n') {
        Some(i) if buf[i] == b'\n' => Err("expected CRLF after a length".into()),
        Some(i) if i + 1 < buf.len() => {
            if buf[i + 1] == b'\n' {
                Ok(Some(i))
            } else {
                Err("expected CRLF after a length".into())
            }
        }
        Some(_) => Ok(None),
        None if buf.len() > limits.inline_bytes_max => Err(too_big.into()),
        None => Ok(None),
    }
}

/// Printable form of a byte for error messages (errors must stay one printable line).
fn show_byte(b: u8) -> String {
    if b.is_ascii_graphic() || b == b' ' {
        (b as char).to_string()
    } else {
        format!("\\x{b:02x}")
    }
}

enum Inline {
    Command(Vec<Bytes>),
    Empty,
    Incomplete,
    Error(String),
}

fn parse_inline(buf: &mut BytesMut, limits: &Limits) -> Inline {
    // A request that starts with a control or non-ASCII byte is not a human typing a command:
    // it is a binary client on the wrong port (TLS hello, HTTP/2, random bytes). Redis would
    // treat it as an unknown inline command; we close the connection instead of guessing.
    if let Some(&first) = buf.first() {
        let text_like = first.is_ascii_graphic() || matches!(first, b' ' | b'\t' | b'\r' | b'\n');
        if !text_like {
            return Inline::Error(format!(
                "unexpected byte '{}' at the start of a request",
                show_byte(first)
            ));
        }
    }
    let window = &buf[..buf.len().min(limits.inline_bytes_max.saturating_add(1))];
    let Some(newline) = window.iter().position(|&b| b == b'\n') else {
        if buf.len() > limits.inline_bytes_max {
            return Inline::Error("too big inline request".into());
        }
        return Inline::Incomplete;
    };
    let line = buf.split_to(newline + 1);
    let mut text = &line[..newline];
    if let Some(stripped) = text.strip_suffix(b"\r") {
        text = stripped;
    }
    match split_args(text) {
        Some(args) if args.is_empty() => Inline::Empty,
        Some(args) => Inline::Command(args.into_iter().map(Bytes::from).collect()),
        None => Inline::Error("unbalanced quotes in request".into()),
    }
}

/// Splits an inline line into arguments with Redis's `sdssplitargs` rules: whitespace separates,
/// `"..."` understands `\n \r \t \b \a \\ \" \xHH`, `'...'` understands `\'`, and a closing quote
/// must be followed by whitespace or the end. `None` on unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    // Every byte that ends an unquoted argument below must also be skipped here, or the loop
    // would stop making progress (NUL included: Redis sees it as the end of the C string).
    let is_space = |c: u8| matches!(c, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c | 0);
    let mut args = Vec::new();
    let mut p = 0;
    loop {
        while p < line.len() && is_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Some(args);
        }
        let mut current = Vec::new();
        let (mut in_double, mut in_single) = (false, false);
        loop {
            let c = line.get(p).copied();
            if in_double {
                let c = c?;
                let next = line.get(p + 1).copied();
                if c == b'\\' && next == Some(b'x') {
                    let hex = (line.get(p + 2).copied(), line.get(p + 3).copied());
                    if let (Some(h), Some(l)) = hex {
                        if let (Some(h), Some(l)) = (hex_val(h), hex_val(l)) {
                            current.push(h * 16 + l);
                            p += 4;
                            continue;
                        }
                    }
                }
                if c == b'\\' && next.is_some() {
                    let escaped = next.unwrap_or(b'\\');
                    current.push(match escaped {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                    p += 2;
                    continue;
                }
                if c == b'"' {
                    if line.get(p + 1).is_some_and(|&n| !is_space(n)) {
                        return None;
                    }
                    p += 1;
                    break;
                }
                current.push(c);
                p += 1;
            } else if in_single {
                let c = c?;
                if c == b'\\' && line.get(p + 1) == Some(&b'\'') {
                    current.push(b'\'');
                    p += 2;
                    continue;
                }
                if c == b'\'' {
                    if line.get(p + 1).is_some_and(|&n| !is_space(n)) {
                        return None;
                    }
                    p += 1;
                    break;
                }
                current.push(c);
                p += 1;
            } else {
                match c {
                    None | Some(b' ' | b'\n' | b'\r' | b'\t' | 0) => break,
                    Some(b'"') => in_double = true,
                    Some(b'\'') => in_single = true,
                    Some(other) => current.push(other),
                }
                p += 1;
            }
        }
        args.push(current);
    }
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Encodes a command as a RESP multibulk request (what clients send). Used by tests, the fuzz
/// target and benchmarks.
pub fn encode_command(args: &[impl AsRef<[u8]>], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Parses everything in `input` at once: the commands found and, if the stream broke the
/// protocol, the error. Trailing incomplete bytes are ignored. For tests and fuzzing.
pub fn parse_all(input: &[u8], limits: &Limits) -> (Vec<Vec<Bytes>>, Option<String>) {
    let mut buf = BytesMut::from(input);
    let mut parser = RequestParser::new();
    let mut commands = Vec::new();
    loop {
        match parser.parse(&mut buf, limits) {
            Parsed::Command(c) => commands.push(c),
            Parsed::Incomplete => return (commands, None),
            Parsed::Error(e) => return (commands, Some(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn args(cmd: &[&str]) -> Vec<Bytes> {
        cmd.iter().map(|s| Bytes::from(s.to_string())).collect()
    }

    fn limits() -> Limits {
        Limits::default()
    }

    #[test]
    fn parses_pipelined_multibulk_and_inline() {
        let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\nSET a 'b c'\nECHO \"x\\ty\"\r\n";
        let (cmds, err) = parse_all(input, &limits());
        assert_eq!(err, None);
        assert_eq!(
            cmds,
            vec![
                args(&["GET", "k"]),
                args(&["PING"]),
                args(&["SET", "a", "b c"]),
                args(&["ECHO", "x\ty"]),
            ]
        );
    }

    #[test]
    fn byte_by_byte_feeding_gives_the_same_commands() {
        let mut input = Vec::new();
        encode_command(&["SET", "key", "a\r\nb"], &mut input);
        input.extend_from_slice(b"INCR n\r\n*0\r\n\r\n");
        encode_command(&["MGET", "a", "b"], &mut input);
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for &b in &input {
            buf.extend_from_slice(&[b]);
            loop {
                match parser.parse(&mut buf, &limits()) {
                    Parsed::Command(c) => got.push(c),
                    Parsed::Incomplete => break,
                    Parsed::Error(e) => panic!("{e}"),
                }
            }
        }
        assert_eq!(got, parse_all(&input, &limits()).0);
        assert_eq!(got.len(), 3);
        assert!(buf.is_empty());
    }

    #[test]
    fn malformed_input_is_a_protocol_error() {
        let cases: &[(&[u8], &str)] = &[
            (b"*2\r\n+3\r\n", "expected '$', got '+'"),
            (b"*1\r\n$-5\r\n", "invalid bulk length"),
            (b"*1\r\n$abc\r\n", "invalid bulk length"),
            (b"*abc\r\n", "invalid multibulk length"),
            (b"*99999999999\r\n", "invalid multibulk length"),
            (b"*1\r\n$3\r\nGETxx", "expected CRLF after bulk data"),
            (b"*1\n", "expected CRLF after a length"),
            (
                b"\x16\x03\x01\x02\x00",
                "unexpected byte '\\x16' at the start of a request",
            ),
            (b"SET a \"b\n", "unbalanced quotes in request"),
            (b"SET a 'b'c\n", "unbalanced quotes in request"),
        ];
        for (input, want) in cases {
            let (_, err) = parse_all(input, &limits());
            assert_eq!(
                err.as_deref(),
                Some(*want),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn declared_lengths_are_not_trusted() {
        let small = Limits {
            bulk_bytes_max: 10,
            inline_bytes_max: 16,
            multibulk_args_max: 4,
            unauthenticated: false,
        };
        assert_eq!(
            parse_all(b"*1\r\n$11\r\n", &small).1.as_deref(),
            Some("invalid bulk length")
        );
        assert_eq!(
            parse_all(b"*5\r\n", &small).1.as_deref(),
            Some("invalid multibulk length")
        );
        assert_eq!(
            parse_all(&[b'a'; 17], &small).1.as_deref(),
            Some("too big inline request")
        );
        assert_eq!(
            parse_all(&[b'*'; 17], &small).1.as_deref(),
            Some("too big mbulk count string")
        );
        // A huge declared count reserves nothing beyond a small constant.
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::from(&b"*1048576\r\n"[..]);
        assert_eq!(parser.parse(&mut buf, &limits()), Parsed::Incomplete);
        let pending = parser.pending.as_ref().unwrap();
        assert!(pending.args.capacity() <= ARGS_PREALLOC_MAX);
    }

    #[test]
    fn split_args_follows_redis_quoting() {
        let s = |l: &str| {
            split_args(l.as_bytes()).map(|v| {
                v.into_iter()
                    .map(|a| String::from_utf8_lossy(&a).into_owned())
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(
            s("  a  b\tc "),
            Some(vec!["a".into(), "b".into(), "c".into()])
        );
        assert_eq!(
            s(r#""\x41\x4a" 'it\'s'"#),
            Some(vec!["AJ".into(), "it's".into()])
        );
        assert_eq!(s(r#"a"b c"d"#), None);
        assert_eq!(s(r#"pre"fix x""#), Some(vec!["prefix x".into()]));
        assert_eq!(s(""), Some(vec![]));
        assert_eq!(s("a\0b"), Some(vec!["a".into(), "b".into()]));
        assert_eq!(s("\0"), Some(vec![]));
    }
}
