//! The binary value codec (the prefix-byte encoding of the JSON document store Strata's documents
//! reimplement): [`encode`], [`decode`], [`skip`], [`encoded_len`], and the versioned stored form
//! ([`encode_stored`], [`decode_stored`]).
//!
//! Every value starts with one prefix byte: the low nibble is the type code, the high nibble an
//! inline number 0-14, or 15 meaning "an unsigned LEB128 varint with the full number follows".
//!
//! | code | type    | the number is            | then                                   |
//! |------|---------|--------------------------|----------------------------------------|
//! | 1    | NULL    | 0                        | -                                      |
//! | 2    | TRUE    | 0                        | -                                      |
//! | 3    | FALSE   | 0                        | -                                      |
//! | 4    | POS_INT | the value v >= 0         | -                                      |
//! | 5    | NEG_INT | -1 - v for v < 0         | -   (so `i64::MIN` is 0x7fff_ffff_ffff_ffff) |
//! | 6    | DECIMAL | byte length of the text  | the exact JSON number text (ASCII)     |
//! | 7    | STRING  | byte length              | UTF-8 bytes                            |
//! | 8    | ARRAY   | element count            | the elements                           |
//! | 9    | MAP     | entry count              | key, value, key, value, ...            |
//!
//! Sizes: `null`, `true`, `0`, `3`, `""`, `[]`, `{}` take 1 byte; `"a"` and `[1]` 2; `{1:2}` 3.
//!
//! The encoding is canonical and the decoder accepts only canonical bytes (a number that fits the
//! nibble must use it, varints are minimal, scalars have a zero nibble), so for every accepted
//! input `encode(decode(b)) == b`. Decoding hostile bytes never panics: unknown codes, truncation,
//! lengths past the end, integers past `i64`, invalid UTF-8 or decimal text, and nesting deeper than
//! [`DEPTH_MAX`] are errors with the byte offset; a count is checked against the bytes left before
//! anything is allocated, so allocation is bounded by the input size.
//!
//! Stored values (what `DocStore` writes to the engine) are one format-version byte
//! ([`STORED_FORMAT_VERSION`]) followed by one encoded value. Version 2 adds one type code, used
//! only there and only for a map key: 10, `NAME_REF`, whose number is the id of a key name in the
//! store's name table (`names` module), so a field name the store has seen before takes one or
//! two bytes. Version 1 (no name references) is still read.

use crate::doc::{Doc, DocMap};
use crate::error::{Error, Result};
use crate::names::{KeyNames, NameTable, NAME_BYTES_MAX};
use crate::num::Decimal;

/// Most elements reserved up front for an array or map being decoded (as `json.rs` does).
const RESERVED_ITEMS_MAX: usize = 4096;

/// Deepest nesting of arrays/maps that is encoded or decoded (`[]` has depth 1).
pub const DEPTH_MAX: usize = 512;

/// First byte of every stored document value written by this build.
pub const STORED_FORMAT_VERSION: u8 = 2;
/// The earlier stored form (no name references), still read.
pub const STORED_FORMAT_VERSION_V1: u8 = 1;

/// Type codes (the low nibble of the prefix byte).
pub mod type_code {
    /// `null`.
    pub const NULL: u8 = 1;
    /// `true`.
    pub const TRUE: u8 = 2;
    /// `false`.
    pub const FALSE: u8 = 3;
    /// Integer >= 0; the number is the value.
    pub const POS_INT: u8 = 4;
    /// Integer < 0; the number is `-1 - value`.
    pub const NEG_INT: u8 = 5;
    /// Decimal; the number is the text length.
    pub const DECIMAL: u8 = 6;
    /// String; the number is the UTF-8 length.
    pub const STRING: u8 = 7;
    /// Array; the number is the element count.
    pub const ARRAY: u8 = 8;
    /// Map; the number is the entry count.
    pub const MAP: u8 = 9;
    /// Stored form version 2, map keys only: the key is the name with this id in the store's
    /// name table.
    pub const NAME_REF: u8 = 10;
}
use type_code as tc;

/// Largest number stored in the nibble itself.
const NIBBLE_INLINE_MAX: u64 = 14;
/// Nibble value meaning "a varint follows".
const NIBBLE_VARINT: u8 = 15;
pub(crate) fn header_len(n: u64) -> usize {
    if n <= NIBBLE_INLINE_MAX {
        1
    } else {
        1 + strata::varint::len(n)
    }
}

pub(crate) fn put_header(out: &mut Vec<u8>, code: u8, n: u64) {
    if n <= NIBBLE_INLINE_MAX {
        out.push(code | ((n as u8) << 4));
    } else {
        out.push(code | (NIBBLE_VARINT << 4));
        strata::varint::put(out, n);
    }
}

pub(crate) fn len_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Type code and number of an integer.
pub(crate) fn int_header(v: i64) -> (u8, u64) {
    if v >= 0 {
        (tc::POS_INT, v.unsigned_abs())
    } else {
        // -1 - v is in 0..=i64::MAX for every negative v.
        (tc::NEG_INT, (-1 - v).unsigned_abs())
    }
}

/// The name [`Doc::type_name`] gives a value whose prefix byte has type code `code`.
pub(crate) fn type_name_of_code(code: u8) -> &'static str {
    match code {
        tc::NULL => "null",
        tc::TRUE | tc::FALSE => "bool",
        tc::POS_INT | tc::NEG_INT => "integer",
        tc::DECIMAL => "decimal",
        tc::STRING => "string",
        tc::ARRAY => "array",
        tc::MAP => "map",
        tc::NAME_REF => "name reference",
        _ => "unknown",
    }
}

/// Exact size in bytes of `encode(doc)` (for documents within [`DEPTH_MAX`]).
pub fn encoded_len(doc: &Doc) -> usize {
    match doc {
        Doc::Null | Doc::Bool(_) => 1,
        Doc::Int(v) => header_len(int_header(*v).1),
        Doc::Decimal(d) => header_len(len_u64(d.as_str().len())) + d.as_str().len(),
        Doc::String(s) => header_len(len_u64(s.len())) + s.len(),
        Doc::Array(items) => {
            header_len(len_u64(items.len())) + items.iter().map(encoded_len).sum::<usize>()
        }
        Doc::Map(m) => {
            header_len(len_u64(m.len()))
                + m.iter()
                    .map(|(k, v)| encoded_len(k) + encoded_len(v))
                    .sum::<usize>()
        }
    }
}

/// Encodes `doc`; fails only when it nests deeper than [`DEPTH_MAX`].
pub fn encode(doc: &Doc) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    encode_into(doc, &mut out)?;
    Ok(out)
}

/// Appends the encoding of `doc` to `out`; fails only when it nests deeper than [`DEPTH_MAX`]
/// (then `out` holds a partial encoding).
pub fn encode_into(doc: &Doc, out: &mut Vec<u8>) -> Result<()> {
    Encoder {
        out,
        names: None,
        inline: None,
    }
    .value(doc, 0)
}

/// Writes values; with a name table, string map keys that have an id become name references
/// and the names written inline are collected.
struct Encoder<'o, 'd> {
    out: &'o mut Vec<u8>,
    names: Option<&'o NameTable>,
    inline: Option<&'o mut Vec<&'d str>>,
}

impl<'d> Encoder<'_, 'd> {
    fn key(&mut self, key: &'d Doc, depth: usize) -> Result<()> {
        if let (Doc::String(name), Some(names)) = (key, self.names) {
            if let Some(id) = names.id(name) {
                put_header(self.out, tc::NAME_REF, u64::from(id));
                return Ok(());
            }
            if let Some(inline) = self.inline.as_deref_mut() {
                if name.len() <= NAME_BYTES_MAX {
                    inline.push(name);
                }
            }
        }
        self.value(key, depth)
    }

    fn value(&mut self, doc: &'d Doc, depth: usize) -> Result<()> {
        let out = &mut *self.out;
        match doc {
            Doc::Null => out.push(tc::NULL),
            Doc::Bool(true) => out.push(tc::TRUE),
            Doc::Bool(false) => out.push(tc::FALSE),
            Doc::Int(v) => {
                let (code, n) = int_header(*v);
                put_header(out, code, n);
            }
            Doc::Decimal(d) => {
                put_header(out, tc::DECIMAL, len_u64(d.as_str().len()));
                out.extend_from_slice(d.as_str().as_bytes());
            }
            Doc::String(s) => {
                put_header(out, tc::STRING, len_u64(s.len()));
                out.extend_from_slice(s.as_bytes());
            }
            Doc::Array(items) => {
                if depth >= DEPTH_MAX {
                    return Err(Error::TooDeep {
                        depth_max: DEPTH_MAX,
                    });
                }
                put_header(out, tc::ARRAY, len_u64(items.len()));
                for item in items {
                    self.value(item, depth + 1)?;
                }
            }
            Doc::Map(m) => {
                if depth >= DEPTH_MAX {
                    return Err(Error::TooDeep {
                        depth_max: DEPTH_MAX,
                    });
                }
                put_header(out, tc::MAP, len_u64(m.len()));
                for (k, v) in m.iter() {
                    self.key(k, depth + 1)?;
                    self.value(v, depth + 1)?;
                }
            }
        }
        Ok(())
    }
}

/// A cursor over encoded bytes; every read is bounds-checked. With a name table (stored form
/// version 2) it also accepts name references.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pub(crate) pos: usize,
    names: Option<&'a NameTable>,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], pos: usize) -> Self {
        Reader {
            bytes,
            pos,
            names: None,
        }
    }

    pub(crate) fn with_names(bytes: &'a [u8], pos: usize, names: Option<&'a NameTable>) -> Self {
        Reader { bytes, pos, names }
    }

    /// The name of a name reference with id `id` found at `offset`.
    pub(crate) fn name(&self, id: u64, offset: usize) -> Result<&'a str> {
        self.names
            .and_then(|n| n.name(id))
            .ok_or(Error::UnknownName { id, offset })
    }

    pub(crate) fn err(&self, reason: &'static str) -> Error {
        Error::Decode {
            offset: self.pos,
            reason,
        }
    }

    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    fn byte(&mut self) -> Result<u8> {
        let b = *self
            .bytes
            .get(self.pos)
            .ok_or_else(|| self.err("unexpected end of input"))?;
        self.pos += 1;
        Ok(b)
    }

    /// Takes `n` bytes, failing when fewer are left.
    pub(crate) fn take(&mut self, n: u64) -> Result<&'a [u8]> {
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.remaining())
            .ok_or_else(|| self.err("length runs past the end of input"))?;
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn varint(&mut self) -> Result<u64> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        let (v, n) = strata::varint::decode(rest).map_err(|e| self.err(e.reason()))?;
        self.pos += n;
        Ok(v)
    }

    /// Reads a prefix byte and its number: `(type code, number)`.
    pub(crate) fn header(&mut self) -> Result<(u8, u64)> {
        let start = self.pos;
        let b = self.byte()?;
        let code = b & 0x0f;
        let nibble = b >> 4;
        let last = if self.names.is_some() {
            tc::NAME_REF
        } else {
            tc::MAP
        };
        if !(tc::NULL..=last).contains(&code) {
            self.pos = start;
            return Err(self.err("unknown type code"));
        }
        if matches!(code, tc::NULL | tc::TRUE | tc::FALSE) && nibble != 0 {
            self.pos = start;
            return Err(self.err("null/true/false with a non-zero nibble"));
        }
        if nibble != NIBBLE_VARINT {
            return Ok((code, u64::from(nibble)));
        }
        let n = self.varint()?;
        if n <= NIBBLE_INLINE_MAX {
            self.pos = start;
            return Err(self.err("number that fits the nibble written as a varint"));
        }
        Ok((code, n))
    }

    /// Checks that a container of `items` elements can fit in the bytes left (each takes >= 1).
    fn check_count(&self, items: u64) -> Result<usize> {
        usize::try_from(items)
            .ok()
            .filter(|&n| n <= self.remaining())
            .ok_or_else(|| self.err("element count exceeds the bytes left"))
    }

    fn value(&mut self, depth: usize) -> Result<Doc> {
        let start = self.pos;
        let (code, n) = self.header()?;
        Ok(match code {
            tc::NULL => Doc::Null,
            tc::TRUE => Doc::Bool(true),
            tc::FALSE => Doc::Bool(false),
            tc::POS_INT | tc::NEG_INT => {
                let v = i64::try_from(n).map_err(|_| Error::Decode {
                    offset: start,
                    reason: "integer beyond i64",
                })?;
                Doc::Int(if code == tc::POS_INT { v } else { -1 - v })
            }
            tc::DECIMAL => {
                let text = self.take(n)?;
                let text = std::str::from_utf8(text)
                    .ok()
                    .and_then(|t| Decimal::parse(t).ok())
                    .ok_or(Error::Decode {
                        offset: start,
                        reason: "invalid decimal text",
                    })?;
                Doc::Decimal(text)
            }
            tc::STRING => {
                let bytes = self.take(n)?;
                let s = std::str::from_utf8(bytes).map_err(|_| Error::Decode {
                    offset: start,
                    reason: "string is not UTF-8",
                })?;
                Doc::String(s.to_string())
            }
            tc::ARRAY => {
                let count = self.check_count(n)?;
                self.check_depth(depth, start)?;
                // Reserved up to a bound: `count` is checked against the bytes left, not the
                // memory each element takes, and nested levels would multiply it.
                let mut items = Vec::with_capacity(count.min(RESERVED_ITEMS_MAX));
                for _ in 0..count {
                    items.push(self.value(depth + 1)?);
                }
                Doc::Array(items)
            }
            tc::MAP => {
                let count = self.check_count(n.saturating_mul(2))? / 2;
                self.check_depth(depth, start)?;
                let mut entries = Vec::with_capacity(count.min(RESERVED_ITEMS_MAX));
                for _ in 0..count {
                    let k = self.map_key(depth + 1)?;
                    let v = self.value(depth + 1)?;
                    entries.push((k, v));
                }
                Doc::Map(DocMap::from_entries_unchecked(entries))
            }
            _ => {
                // tc::NAME_REF (header() admits it only with a name table).
                return Err(Error::Decode {
                    offset: start,
                    reason: "name reference outside a map key",
                });
            }
        })
    }

    /// A map key: a value, or (stored form 2) a name reference.
    fn map_key(&mut self, depth: usize) -> Result<Doc> {
        let start = self.pos;
        if self.names.is_some() && self.bytes.get(start).map(|b| b & 0x0f) == Some(tc::NAME_REF) {
            let (_, id) = self.header()?;
            return Ok(Doc::String(self.name(id, start)?.to_string()));
        }
        self.value(depth)
    }

    fn check_depth(&self, depth: usize, start: usize) -> Result<()> {
        if depth >= DEPTH_MAX {
            return Err(Error::Decode {
                offset: start,
                reason: "nesting deeper than DEPTH_MAX",
            });
        }
        Ok(())
    }

    /// Moves past one value (and everything inside it) without allocating or recursing. Checks
    /// structure and bounds, not UTF-8, decimal text or integer range.
    pub(crate) fn skip_value(&mut self) -> Result<()> {
        let mut pending: u64 = 1;
        while pending > 0 {
            pending -= 1;
            let (code, n) = self.header()?;
            match code {
                tc::DECIMAL | tc::STRING => {
                    self.take(n)?;
                }
                tc::ARRAY => {
                    let count = self.check_count(n)?;
                    pending = pending.saturating_add(len_u64(count));
                }
                tc::MAP => {
                    let count = self.check_count(n.saturating_mul(2))?;
                    pending = pending.saturating_add(len_u64(count));
                }
                _ => {}
            }
            // Each pending value needs at least one byte.
            if pending > len_u64(self.remaining()) {
                return Err(self.err("element count exceeds the bytes left"));
            }
        }
        Ok(())
    }
}

/// Decodes exactly one value spanning all of `bytes`.
pub fn decode(bytes: &[u8]) -> Result<Doc> {
    decode_at(bytes, 0, None)
}

/// Decodes exactly one value of a stored body (which may hold name references into `names`):
/// for example a sub-value found by [`crate::get_path_bytes_in`].
pub fn decode_in(bytes: &[u8], names: &NameTable) -> Result<Doc> {
    decode_at(bytes, 0, Some(names))
}

fn decode_at(bytes: &[u8], start: usize, names: Option<&NameTable>) -> Result<Doc> {
    let mut r = Reader::with_names(bytes, start, names);
    let doc = r.value(0)?;
    if r.pos != bytes.len() {
        return Err(r.err("trailing bytes after the value"));
    }
    Ok(doc)
}

/// Decodes the value at the start of `bytes`; returns it and the number of bytes it took.
pub fn decode_prefix(bytes: &[u8]) -> Result<(Doc, usize)> {
    let mut r = Reader::new(bytes, 0);
    let doc = r.value(0)?;
    Ok((doc, r.pos))
}

/// Length in bytes of the value at the start of `bytes`, found without allocating.
pub fn skip(bytes: &[u8]) -> Result<usize> {
    let mut r = Reader::new(bytes, 0);
    r.skip_value()?;
    Ok(r.pos)
}

/// The stored form: [`STORED_FORMAT_VERSION`] then the encoded value, string map keys that have
/// an id in `names` written as name references. Names written inline are counted towards an id
/// ([`KeyNames::note_inline`]); [`KeyNames::intern_pending`] gives them one later.
pub fn encode_stored(doc: &Doc, names: &KeyNames) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    let table = names.table();
    let mut inline = Vec::new();
    encode_stored_in(doc, &table, &mut inline, &mut out)?;
    names.note_inline(&inline);
    Ok(out)
}

/// Appends the stored form of `doc` with the ids of `names` to `out`, and the names it had to
/// write inline to `inline`.
pub fn encode_stored_in<'d>(
    doc: &'d Doc,
    names: &NameTable,
    inline: &mut Vec<&'d str>,
    out: &mut Vec<u8>,
) -> Result<()> {
    out.push(STORED_FORMAT_VERSION);
    Encoder {
        out,
        names: Some(names),
        inline: Some(inline),
    }
    .value(doc, 0)
}

/// Checks the version byte of a stored value and returns the encoded value after it.
pub fn stored_body(bytes: &[u8]) -> Result<&[u8]> {
    match bytes.split_first() {
        Some((&(STORED_FORMAT_VERSION | STORED_FORMAT_VERSION_V1), body)) => Ok(body),
        Some((&version, _)) => Err(Error::UnsupportedFormatVersion {
            what: "stored document",
            version,
            supported: STORED_FORMAT_VERSION,
        }),
        None => Err(Error::Decode {
            offset: 0,
            reason: "empty stored value",
        }),
    }
}

/// Decodes a stored value (version byte, then one value), reading the store's names again if it
/// refers to a name this handle has not seen yet. Offsets in errors count the version byte.
pub fn decode_stored(bytes: &[u8], names: &KeyNames) -> Result<Doc> {
    names.with_refresh(|table| decode_stored_in(bytes, table))
}

/// Decodes a stored value with the name table `names` (no refresh: for use where the store
/// cannot be read, such as inside an engine read-modify-write).
pub fn decode_stored_in(bytes: &[u8], names: &NameTable) -> Result<Doc> {
    stored_body(bytes)?;
    let refs = (bytes.first() == Some(&STORED_FORMAT_VERSION)).then_some(names);
    decode_at(bytes, 1, refs)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn round_trip(doc: Doc, expected_bytes: Option<&[u8]>) {
        let bytes = encode(&doc).unwrap();
        if let Some(expected) = expected_bytes {
            assert_eq!(bytes, expected, "{doc}");
        }
        assert_eq!(bytes.len(), encoded_len(&doc), "{doc}");
        assert_eq!(decode(&bytes).unwrap(), doc);
        assert_eq!(skip(&bytes).unwrap(), bytes.len());
    }

    fn map(entries: Vec<(Doc, Doc)>) -> Doc {
        Doc::Map(entries.into_iter().collect())
    }

    #[test]
    fn seed_test_vectors() {
        // The encoded sizes the original encoding's serialization test expects, plus the exact
        // bytes.
        round_trip(Doc::Null, Some(&[0x01]));
        round_trip(Doc::Bool(true), Some(&[0x02]));
        round_trip(Doc::Bool(false), Some(&[0x03]));
        round_trip(Doc::Int(0), Some(&[0x04]));
        round_trip(Doc::Int(3), Some(&[0x34]));
        round_trip(Doc::Int(547), Some(&[0xf4, 0xa3, 0x04]));
        round_trip(Doc::Int(35_695_382_269_897), None);
        round_trip(Doc::from(""), Some(&[0x07]));
        round_trip(Doc::from("a"), Some(&[0x17, b'a']));
        round_trip(Doc::from("hI5liFv5Nh2HvPJH"), None);
        round_trip(Doc::decimal("0").unwrap(), Some(&[0x16, b'0']));
        round_trip(Doc::decimal("99.34901097702962").unwrap(), None);
        round_trip(Doc::Array(vec![]), Some(&[0x08]));
        round_trip(Doc::Array(vec![Doc::Int(1)]), Some(&[0x18, 0x14]));
        round_trip(map(vec![]), Some(&[0x09]));
        round_trip(
            map(vec![(Doc::Int(1), Doc::Int(2))]),
            Some(&[0x19, 0x14, 0x24]),
        );
    }

    #[test]
    fn integer_edges() {
        round_trip(Doc::Int(-1), Some(&[0x05]));
        round_trip(Doc::Int(-15), Some(&[0xe5]));
        round_trip(Doc::Int(14), Some(&[0xe4]));
        round_trip(Doc::Int(15), Some(&[0xf4, 0x0f]));
        round_trip(Doc::Int(-16), Some(&[0xf5, 0x0f]));
        round_trip(Doc::Int(i64::MAX), None);
        round_trip(Doc::Int(i64::MIN), None);
        let min = encode(&Doc::Int(i64::MIN)).unwrap();
        assert_eq!(min.len(), 1 + 9);
        assert_eq!(min[0], 0xf5);
    }

    #[test]
    fn decimal_keeps_its_text() {
        let d = Doc::decimal("99.34901097702962").unwrap();
        let bytes = encode(&d).unwrap();
        assert_eq!(bytes[0], 0xf6);
        assert_eq!(bytes[1], 17);
        assert_eq!(&bytes[2..], b"99.34901097702962");
        match decode(&bytes).unwrap() {
            Doc::Decimal(x) => assert_eq!(x.as_str(), "99.34901097702962"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hostile_bytes_are_errors() {
        let cases: &[(&[u8], &str)] = &[
            (&[], "unexpected end"),
            (&[0x00], "unknown type code"),
            (&[0x0a], "unknown type code"),
            (&[0x11], "non-zero nibble"),
            (&[0x27], "past the end"),
            (&[0xf7], "unexpected end"),
            (&[0xf7, 0x80], "unexpected end"),
            (&[0xf7, 0x05], "fits the nibble"),
            (&[0xf7, 0x8f, 0x00], "non-minimal varint"),
            (
                &[
                    0xf7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
                ],
                "overflows",
            ),
            (
                &[
                    0xf4, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
                ],
                "beyond i64",
            ),
            (&[0x17, 0xff], "not UTF-8"),
            (&[0x26, b'1', b'.'], "invalid decimal"),
            (&[0x28, 0x01], "exceeds the bytes left"),
            (
                &[0xf8, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01],
                "exceeds the bytes left",
            ),
            (&[0x19, 0x01], "exceeds the bytes left"),
            (&[0x01, 0x01], "trailing bytes"),
        ];
        for (bytes, want) in cases {
            let err = decode(bytes).unwrap_err().to_string();
            assert!(err.contains(want), "{bytes:02x?}: {err}");
        }
    }

    #[test]
    fn nesting_10000_deep_is_an_error_not_a_crash() {
        let mut bytes = vec![0x18u8; 10_000];
        bytes.push(0x01);
        let err = decode(&bytes).unwrap_err().to_string();
        assert!(err.contains("DEPTH_MAX"), "{err}");
        // Skip does not recurse, so it walks the whole thing.
        assert_eq!(skip(&bytes).unwrap(), bytes.len());
        // Exactly DEPTH_MAX levels decode.
        let mut ok = vec![0x18u8; DEPTH_MAX - 1];
        ok.push(0x08);
        assert!(decode(&ok).is_ok());
        let mut too_deep = vec![0x18u8; DEPTH_MAX];
        too_deep.push(0x08);
        assert!(decode(&too_deep).is_err());
    }

    #[test]
    fn encode_refuses_documents_deeper_than_depth_max() {
        let mut doc = Doc::Array(vec![]);
        for _ in 1..DEPTH_MAX {
            doc = Doc::Array(vec![doc]);
        }
        assert!(encode(&doc).is_ok());
        let deeper = Doc::Array(vec![doc]);
        assert!(matches!(encode(&deeper), Err(Error::TooDeep { .. })));
    }

    #[test]
    fn stored_form_has_a_version_byte() {
        let names = KeyNames::detached();
        let doc = Doc::from("x");
        let stored = encode_stored(&doc, &names).unwrap();
        assert_eq!(stored, [STORED_FORMAT_VERSION, 0x17, b'x']);
        assert_eq!(decode_stored(&stored, &names).unwrap(), doc);
        // Version 1, written before name references, still reads.
        assert_eq!(decode_stored(&[1, 0x17, b'x'], &names).unwrap(), doc);
        assert!(matches!(
            decode_stored(&[9, 0x01], &names),
            Err(Error::UnsupportedFormatVersion { version: 9, .. })
        ));
        assert!(decode_stored(&[], &names).is_err());
    }

    fn table(names: &[&str]) -> NameTable {
        NameTable::from_names(names.iter().copied()).unwrap()
    }

    #[test]
    fn map_keys_with_ids_are_name_references() {
        let t = table(&["id", "score"]);
        let names = KeyNames::with_table(t.clone());
        let doc =
            Doc::from_json(r#"{"id":"a","score":3,"other":{"score":1},"s":["score"]}"#).unwrap();
        let stored = encode_stored(&doc, &names).unwrap();
        #[rustfmt::skip]
        let want = [
            STORED_FORMAT_VERSION,
            0x49,                         // map of 4
            0x0a, 0x17, b'a',             // ref 0 ("id"): "a"
            0x1a, 0x34,                   // ref 1 ("score"): 3
            0x57, b'o', b't', b'h', b'e', b'r', 0x19, 0x1a, 0x14, // "other": {ref 1: 1}
            0x17, b's', 0x18, 0x57, b's', b'c', b'o', b'r', b'e', // "s": ["score"] (a value, not a key)
        ];
        assert_eq!(stored, want);
        assert_eq!(decode_stored(&stored, &names).unwrap(), doc);
        // The example of docs/documents.md.
        let small = Doc::from_json(r#"{"id":"a","score":3}"#).unwrap();
        assert_eq!(
            encode_stored(&small, &names).unwrap(),
            [2, 0x29, 0x0a, 0x17, 0x61, 0x1a, 0x34]
        );
        assert_eq!(
            encode_stored(&small, &KeyNames::detached()).unwrap(),
            [2, 0x29, 0x27, 0x69, 0x64, 0x17, 0x61, 0x57, 0x73, 0x63, 0x6f, 0x72, 0x65, 0x34]
        );
        assert!(
            skip(&stored[1..]).is_err(),
            "the plain codec has no name references"
        );
        // Without the names the references cannot be read: an error, not a wrong document.
        assert!(matches!(
            decode_stored(&stored, &KeyNames::detached()),
            Err(Error::UnknownName { id: 0, offset: 2 })
        ));
        // The same bytes under version 1 are not valid: version 1 has no references.
        let mut v1 = stored.clone();
        v1[0] = STORED_FORMAT_VERSION_V1;
        assert!(decode_stored(&v1, &names).is_err());
        // A reference where a value belongs, and one past the table, are errors.
        assert!(matches!(
            decode_stored(&[STORED_FORMAT_VERSION, 0x0a], &names),
            Err(Error::Decode { offset: 1, .. })
        ));
        assert!(matches!(
            decode_stored(&[STORED_FORMAT_VERSION, 0x19, 0x2a, 0x01], &names),
            Err(Error::UnknownName { id: 2, offset: 2 })
        ));
        // A table that lacks a name just writes it inline, as the original encoding wrote every
        // map key.
        let plain = encode_stored(&doc, &KeyNames::detached()).unwrap();
        assert_eq!(&plain[1..], &encode(&doc).unwrap()[..]);
        assert!(plain.len() > stored.len());
    }
}
