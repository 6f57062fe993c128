//! The order-preserving key codec: [`encode_key`] / [`decode_key`], such that for any documents
//! `a`, `b`: `encode_key(a).cmp(&encode_key(b)) == a.cmp(b)`, and `decode_key(encode_key(a)) == a`.
//!
//! Byte layout (every encoding is self-delimiting and none is a prefix of another):
//!
//! | tag  | value          | then                                                            |
//! |------|----------------|-----------------------------------------------------------------|
//! | 0x10 | null           | -                                                               |
//! | 0x20 | false          | -                                                               |
//! | 0x21 | true           | -                                                               |
//! | 0x30 | negative number| the positive form below with every byte inverted (`!b`), end 0xFF|
//! | 0x31 | zero           | -                                                               |
//! | 0x32 | positive number| point: 8 bytes big-endian of `point ^ 1<<63`; digit pairs; 0x00 |
//! | 0x40 | string         | UTF-8 bytes, 0x00 written as 0x00 0xFF; end 0x00 0x01           |
//! | 0x50 | array          | elements; end 0x00                                              |
//! | 0x60 | map            | key, value, key, value, ...; end 0x00                           |
//!
//! Numbers (integers and decimals alike) are written normalized: value = 0.d1d2...dn x 10^point
//! with d1 != 0 and dn != 0. Digits go two per byte as `10*d1 + d2 + 1` (1..=100; an odd last digit
//! is padded with 0), so a longer digit string sorts after its prefix. Numerically equal documents
//! (`1`, `1.0`, `1e0`) therefore get the same key, and decoding yields the canonical form: an `Int`
//! when whole and within `i64`, otherwise a `Decimal` with canonical text. Container ends (0x00) sort
//! below every tag, so a prefix sorts first. Decoding hostile bytes returns errors (never panics),
//! accepts only canonical encodings, and stops at [`crate::DEPTH_MAX`] nesting.

use crate::codec::DEPTH_MAX;
use crate::doc::{Doc, DocMap};
use crate::error::{Error, Result};
use crate::num::{canonical_number, Num, DECIMAL_POINT_ABS_MAX};

const TAG_NULL: u8 = 0x10;
const TAG_FALSE: u8 = 0x20;
const TAG_TRUE: u8 = 0x21;
const TAG_NEG: u8 = 0x30;
const TAG_ZERO: u8 = 0x31;
const TAG_POS: u8 = 0x32;
const TAG_STRING: u8 = 0x40;
const TAG_ARRAY: u8 = 0x50;
const TAG_MAP: u8 = 0x60;
const END: u8 = 0x00;
const STRING_ESCAPE: u8 = 0xff;
const STRING_END: u8 = 0x01;

/// Encodes `doc` as an order-preserving key; fails only beyond [`DEPTH_MAX`] nesting.
pub fn encode_key(doc: &Doc) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(32);
    encode_key_into(doc, &mut out)?;
    Ok(out)
}

/// Appends the key encoding of `doc` to `out`.
pub fn encode_key_into(doc: &Doc, out: &mut Vec<u8>) -> Result<()> {
    encode_depth(doc, out, 0)
}

fn encode_depth(doc: &Doc, out: &mut Vec<u8>, depth: usize) -> Result<()> {
    match doc {
        Doc::Null => out.push(TAG_NULL),
        Doc::Bool(false) => out.push(TAG_FALSE),
        Doc::Bool(true) => out.push(TAG_TRUE),
        Doc::Int(v) => {
            let mut buf = [0u8; 20];
            encode_num(&Num::from_i64(*v, &mut buf), out);
        }
        Doc::Decimal(d) => encode_num(&d.num(), out),
        Doc::String(s) => {
            out.push(TAG_STRING);
            for &b in s.as_bytes() {
                out.push(b);
                if b == 0 {
                    out.push(STRING_ESCAPE);
                }
            }
            out.push(END);
            out.push(STRING_END);
        }
        Doc::Array(items) => {
            check_depth_encode(depth)?;
            out.push(TAG_ARRAY);
            for item in items {
                encode_depth(item, out, depth + 1)?;
            }
            out.push(END);
        }
        Doc::Map(m) => {
            check_depth_encode(depth)?;
            out.push(TAG_MAP);
            for (k, v) in m.iter() {
                encode_depth(k, out, depth + 1)?;
                encode_depth(v, out, depth + 1)?;
            }
            out.push(END);
        }
    }
    Ok(())
}

fn check_depth_encode(depth: usize) -> Result<()> {
    if depth >= DEPTH_MAX {
        return Err(Error::TooDeep {
            depth_max: DEPTH_MAX,
        });
    }
    Ok(())
}

fn encode_num(n: &Num<'_>, out: &mut Vec<u8>) {
    if n.is_zero() {
        out.push(TAG_ZERO);
        return;
    }
    let invert: u8 = if n.neg { 0xff } else { 0x00 };
    out.push(if n.neg { TAG_NEG } else { TAG_POS });
    let point = (n.point as u64) ^ (1u64 << 63);
    for b in point.to_be_bytes() {
        out.push(b ^ invert);
    }
    let mut digits = n.digits.iter();
    while let Some(hi) = digits.next() {
        let lo = digits.next().unwrap_or(0);
        out.push((hi * 10 + lo + 1) ^ invert);
    }
    out.push(END ^ invert);
}

/// Decodes a key produced by [`encode_key`] (all of `bytes`).
pub fn decode_key(bytes: &[u8]) -> Result<Doc> {
    let mut r = KeyReader { bytes, pos: 0 };
    let doc = r.value(0)?;
    if r.pos != bytes.len() {
        return Err(r.err("trailing bytes after the key"));
    }
    Ok(doc)
}

struct KeyReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl KeyReader<'_> {
    fn err(&self, reason: &'static str) -> Error {
        Error::KeyDecode {
            offset: self.pos,
            reason,
        }
    }

    fn byte(&mut self) -> Result<u8> {
        let b = *self
            .bytes
            .get(self.pos)
            .ok_or_else(|| self.err("unexpected end of key"))?;
        self.pos += 1;
        Ok(b)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn value(&mut self, depth: usize) -> Result<Doc> {
        let start = self.pos;
        let tag = self.byte()?;
        Ok(match tag {
            TAG_NULL => Doc::Null,
            TAG_FALSE => Doc::Bool(false),
            TAG_TRUE => Doc::Bool(true),
            TAG_ZERO => Doc::Int(0),
            TAG_POS | TAG_NEG => self.number(tag == TAG_NEG)?,
            TAG_STRING => self.string()?,
            TAG_ARRAY | TAG_MAP => {
                if depth >= DEPTH_MAX {
                    self.pos = start;
                    return Err(self.err("nesting deeper than DEPTH_MAX"));
                }
                let mut items = Vec::new();
                while self.peek() != Some(END) {
                    if self.peek().is_none() {
                        return Err(self.err("unexpected end of key"));
                    }
                    items.push(self.value(depth + 1)?);
                }
                self.pos += 1;
                if tag == TAG_ARRAY {
                    Doc::Array(items)
                } else {
                    if items.len() % 2 != 0 {
                        return Err(self.err("map with a key but no value"));
                    }
                    let mut entries = Vec::with_capacity(items.len() / 2);
                    let mut it = items.into_iter();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        entries.push((k, v));
                    }
                    Doc::Map(DocMap::from_entries_unchecked(entries))
                }
            }
            _ => {
                self.pos = start;
                return Err(self.err("unknown key tag"));
            }
        })
    }

    fn number(&mut self, neg: bool) -> Result<Doc> {
        let invert: u8 = if neg { 0xff } else { 0x00 };
        let mut point_bytes = [0u8; 8];
        for b in &mut point_bytes {
            *b = self.byte()? ^ invert;
        }
        let point = (u64::from_be_bytes(point_bytes) ^ (1u64 << 63)) as i64;
        if !(-DECIMAL_POINT_ABS_MAX..=DECIMAL_POINT_ABS_MAX).contains(&point) {
            return Err(self.err("number exponent out of range"));
        }
        let mut digits: Vec<u8> = Vec::new();
        loop {
            let b = self.byte()? ^ invert;
            if b == END {
                break;
            }
            if b > 100 {
                return Err(self.err("invalid digit pair"));
            }
            let pair = b - 1;
            digits.push(pair / 10);
            digits.push(pair % 10);
        }
        if digits.last() == Some(&0) {
            digits.pop();
        }
        if !matches!(digits.first(), Some(&d) if d != 0) || digits.last() == Some(&0) {
            return Err(self.err("number digits are not normalized"));
        }
        canonical_number(neg, &digits, point).map_err(|_| self.err("number out of range"))
    }

    fn string(&mut self) -> Result<Doc> {
        let start = self.pos;
        let mut bytes = Vec::new();
        loop {
            let b = self.byte()?;
            if b != 0 {
                bytes.push(b);
                continue;
            }
            match self.byte()? {
                STRING_ESCAPE => bytes.push(0),
                STRING_END => break,
                _ => return Err(self.err("bad escape in key string")),
            }
        }
        String::from_utf8(bytes)
            .map(Doc::String)
            .map_err(|_| Error::KeyDecode {
                offset: start,
                reason: "key string is not UTF-8",
            })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn k(d: &Doc) -> Vec<u8> {
        encode_key(d).unwrap()
    }

    #[test]
    fn known_bytes() {
        assert_eq!(k(&Doc::Null), [0x10]);
        assert_eq!(k(&Doc::Int(0)), [0x31]);
        // 5 = 0.5 x 10^1: point 1, digit pair "50" -> 51.
        assert_eq!(k(&Doc::Int(5)), [0x32, 0x80, 0, 0, 0, 0, 0, 0, 1, 51, 0x00]);
        assert_eq!(k(&Doc::from("a\0b")), [0x40, b'a', 0, 0xff, b'b', 0, 1]);
        assert_eq!(k(&Doc::Array(vec![])), [0x50, 0]);
    }

    #[test]
    fn numerically_equal_docs_share_a_key() {
        assert_eq!(k(&Doc::Int(100)), k(&Doc::decimal("1e2").unwrap()));
        assert_eq!(k(&Doc::Int(-7)), k(&Doc::decimal("-7.000").unwrap()));
        assert_eq!(
            decode_key(&k(&Doc::decimal("1.50").unwrap()))
                .unwrap()
                .to_string(),
            "1.5"
        );
        assert_eq!(
            decode_key(&k(&Doc::decimal("2.0").unwrap())).unwrap(),
            Doc::Int(2)
        );
    }

    #[test]
    fn order_examples() {
        let docs = [
            Doc::Null,
            Doc::Bool(false),
            Doc::Bool(true),
            Doc::decimal("-1e20").unwrap(),
            Doc::Int(-100),
            Doc::Int(-99),
            Doc::decimal("-0.5").unwrap(),
            Doc::Int(0),
            Doc::decimal("0.001").unwrap(),
            Doc::decimal("0.5").unwrap(),
            Doc::Int(1),
            Doc::decimal("1.01").unwrap(),
            Doc::Int(9),
            Doc::Int(10),
            Doc::Int(i64::MAX),
            Doc::decimal("1e19").unwrap(),
            Doc::from(""),
            Doc::from("\0"),
            Doc::from("a"),
            Doc::from("a\0"),
            Doc::from("ab"),
            Doc::Array(vec![]),
            Doc::Array(vec![Doc::Null]),
            Doc::Array(vec![Doc::Null, Doc::Null]),
            Doc::Array(vec![Doc::Int(0)]),
            Doc::Map(DocMap::new()),
        ];
        for w in docs.windows(2) {
            assert!(w[0] < w[1], "{} < {}", w[0], w[1]);
            assert!(k(&w[0]) < k(&w[1]), "key({}) < key({})", w[0], w[1]);
        }
        for d in &docs {
            assert_eq!(&decode_key(&k(d)).unwrap(), d);
        }
    }

    #[test]
    fn extreme_magnitudes_round_trip() {
        for text in [
            "1e999999999999999",
            "123456e999999999999994",
            "-0.1e1000000000000000",
            "1e-999999999999999",
            "0.5e-1000000000000000",
            "-12.5e-999999999999998",
        ] {
            let d = Doc::decimal(text).unwrap();
            let back = decode_key(&k(&d)).unwrap();
            assert_eq!(back, d, "{text}");
            // The canonical text is itself an acceptable decimal.
            assert_eq!(Doc::decimal(&back.to_string()).unwrap(), d);
        }
    }

    #[test]
    fn hostile_keys_are_errors() {
        let cases: &[&[u8]] = &[
            &[],
            &[0x11],
            &[0x40, b'a'],
            &[0x40, 0, 7],
            &[0x40, 0xff, 0, 1],
            &[0x32, 0x80, 0, 0],
            &[0x32, 0x80, 0, 0, 0, 0, 0, 0, 1, 0],
            &[0x32, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 0],
            &[0x32, 0x80, 0, 0, 0, 0, 0, 0, 1, 200, 0],
            &[0x32, 0x80, 0, 0, 0, 0, 0, 0, 1, 51, 1, 0],
            &[0x32, 0xff, 0, 0, 0, 0, 0, 0, 1, 51, 0],
            &[0x50, 0x10],
            &[0x60, 0x10, 0],
            &[0x10, 0x10],
        ];
        for bytes in cases {
            assert!(decode_key(bytes).is_err(), "{bytes:02x?} accepted");
        }
        let mut deep = vec![TAG_ARRAY; 10_000];
        deep.extend(vec![END; 10_000]);
        assert!(decode_key(&deep).is_err());
    }
}
