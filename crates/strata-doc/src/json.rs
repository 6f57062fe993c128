//! JSON text <-> [`Doc`], through serde_json with `arbitrary_precision` (numbers arrive as their
//! exact text) and `preserve_order` (object keys keep their order).
//!
//! A number without `.`/`e`/`E` that fits `i64` becomes `Doc::Int`; every other number becomes a
//! `Doc::Decimal` holding the exact text, so it is written back byte for byte (one exception:
//! serde_json hands over an exponent as `e+N` / `e-N`, so `1E5` comes back as `1e+5` — the same
//! value; integer and fraction digits are never touched). Writing is done here
//! (not by serde_json) so that decimals are emitted verbatim and no intermediate tree is built.
//! A duplicate key in a JSON object keeps its first position and its last value (serde_json).
//!
//! Text is parsed straight into a [`Doc`] by a serde visitor ([`DocSeed`]): serde_json does the
//! lexing, and no `serde_json::Value` tree (an insertion-ordered hash map per object, then a copy
//! into the document) is built on the way. That tree was half the CPU of `strata load`.

use std::fmt::{self, Write as _};

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::doc::{Doc, DocMap};
use crate::error::{Error, Result};
use crate::num::Decimal;

/// Parses JSON text into a document; errors carry line and column.
pub fn from_json_str(text: &str) -> Result<Doc> {
    let mut de = serde_json::Deserializer::from_str(text);
    parse_whole(&mut de)
}

/// Parses JSON bytes (UTF-8) into a document; errors carry line and column.
pub fn from_json_slice(bytes: &[u8]) -> Result<Doc> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    parse_whole(&mut de)
}

/// One document, then nothing but whitespace (what `serde_json::from_slice` checks too).
fn parse_whole<'de, R: serde_json::de::Read<'de>>(
    de: &mut serde_json::Deserializer<R>,
) -> Result<Doc> {
    let doc = DocSeed
        .deserialize(&mut *de)
        .map_err(|e| Error::from_json(&e))?;
    de.end().map_err(|e| Error::from_json(&e))?;
    Ok(doc)
}

/// With `arbitrary_precision`, serde_json hands a number to a visitor as a one-entry map whose
/// key is this marker and whose value is the number's text (`serde_json::Value` recognizes
/// numbers the same way, so an object whose first key is this text reads as a number there too).
pub(crate) const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Deserializes one JSON value into a [`Doc`].
struct DocSeed;

impl<'de> DeserializeSeed<'de> for DocSeed {
    type Value = Doc;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<Doc, D::Error> {
        d.deserialize_any(DocVisitor)
    }
}

struct DocVisitor;

fn number<E: de::Error>(text: &str) -> std::result::Result<Doc, E> {
    number_from_text(text).map_err(E::custom)
}

impl<'de> Visitor<'de> for DocVisitor {
    type Value = Doc;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> std::result::Result<Doc, E> {
        Ok(Doc::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<Doc, E> {
        Ok(Doc::Bool(v))
    }

    // Numbers arrive through `visit_map` with `arbitrary_precision`; these cover a build without.
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Doc, E> {
        Ok(Doc::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Doc, E> {
        number(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Doc, E> {
        number(&v.to_string())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Doc, E> {
        Ok(Doc::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> std::result::Result<Doc, E> {
        Ok(Doc::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Doc, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element_seed(DocSeed)? {
            items.push(item);
        }
        Ok(Doc::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Doc, A::Error> {
        let first = match map.next_key_seed(KeySeed)? {
            None => return Ok(Doc::Map(DocMap::new())),
            Some(Key::Number) => {
                let text: String = map.next_value()?;
                return number(&text);
            }
            Some(Key::Text(k)) => k,
        };
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(16).min(4096));
        entries.push((Doc::String(first), map.next_value_seed(DocSeed)?));
        while let Some(k) = map.next_key::<String>()? {
            entries.push((Doc::String(k), map.next_value_seed(DocSeed)?));
        }
        Ok(Doc::Map(map_from_json_entries(entries)))
    }
}

/// An object key, or the marker of a number.
enum Key {
    Number,
    Text(String),
}

struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<Key, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Key, E> {
        Ok(if v == NUMBER_TOKEN {
            Key::Number
        } else {
            Key::Text(v.to_owned())
        })
    }

    fn visit_string<E: de::Error>(self, v: String) -> std::result::Result<Key, E> {
        Ok(if v == NUMBER_TOKEN {
            Key::Number
        } else {
            Key::Text(v)
        })
    }
}

/// The map of a JSON object's entries (all keys strings, in text order). A repeated key keeps the
/// position of its first occurrence and the value of its last, as serde_json's ordered map does.
fn map_from_json_entries(entries: Vec<(Doc, Doc)>) -> DocMap {
    let mut keys: Vec<&str> = entries.iter().filter_map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    if keys.windows(2).all(|w| w[0] != w[1]) {
        return DocMap::from_entries_unchecked(entries);
    }
    // Rare: merge, each key's first position found through a hash map (a linear search per key,
    // as `DocMap::insert` does, made one object of a million keys with one repeat quadratic).
    let mut first: std::collections::HashMap<String, usize> =
        std::collections::HashMap::with_capacity(entries.len());
    let mut out: Vec<(Doc, Doc)> = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        let name = k.as_str().unwrap_or_default().to_owned();
        match first.get(&name) {
            Some(&i) => out[i].1 = v,
            None => {
                first.insert(name, out.len());
                out.push((k, v));
            }
        }
    }
    DocMap::from_entries_unchecked(out)
}

/// Converts a serde_json value (consumed, so strings move rather than copy).
pub fn from_json_value(v: Value) -> Result<Doc> {
    Ok(match v {
        Value::Null => Doc::Null,
        Value::Bool(b) => Doc::Bool(b),
        Value::Number(n) => number_from_text(n.as_str())?,
        Value::String(s) => Doc::String(s),
        Value::Array(items) => Doc::Array(
            items
                .into_iter()
                .map(from_json_value)
                .collect::<Result<Vec<_>>>()?,
        ),
        Value::Object(obj) => {
            let mut entries = Vec::with_capacity(obj.len());
            for (k, v) in obj {
                entries.push((Doc::String(k), from_json_value(v)?));
            }
            // serde_json already merged duplicate keys, so the entries are unique.
            Doc::Map(DocMap::from_entries_unchecked(entries))
        }
    })
}

/// The document for one JSON number text.
pub(crate) fn number_from_text(text: &str) -> Result<Doc> {
    if !text.bytes().any(|c| matches!(c, b'.' | b'e' | b'E')) {
        if let Ok(v) = text.parse::<i64>() {
            return Ok(Doc::Int(v));
        }
    }
    Ok(Doc::Decimal(Decimal::parse(text)?))
}

/// Converts to a serde_json value (decimals keep their text). Fails on a non-string map key.
pub fn to_json_value(doc: &Doc) -> Result<Value> {
    Ok(match doc {
        Doc::Null => Value::Null,
        Doc::Bool(b) => Value::Bool(*b),
        Doc::Int(v) => Value::Number((*v).into()),
        Doc::Decimal(d) => Value::Number(serde_json::Number::from_string_unchecked(
            d.as_str().to_string(),
        )),
        Doc::String(s) => Value::String(s.clone()),
        Doc::Array(items) => Value::Array(items.iter().map(to_json_value).collect::<Result<_>>()?),
        Doc::Map(m) => {
            let mut obj = serde_json::Map::with_capacity(m.len());
            for (k, v) in m.iter() {
                let Doc::String(k) = k else {
                    return Err(non_string_key(k));
                };
                obj.insert(k.clone(), to_json_value(v)?);
            }
            Value::Object(obj)
        }
    })
}

/// Compact JSON text. Fails on a non-string map key.
pub fn to_json_string(doc: &Doc) -> Result<String> {
    let mut out = String::new();
    write_json(doc, &mut out, true)?;
    Ok(out)
}

/// Indented JSON text (two spaces), for people. Fails on a non-string map key.
pub fn to_json_pretty(doc: &Doc) -> Result<String> {
    let v = to_json_value(doc)?;
    serde_json::to_string_pretty(&v).map_err(|e| Error::from_json(&e))
}

fn non_string_key(k: &Doc) -> Error {
    let mut key = String::new();
    // A lenient rendering of the key for the message.
    let _ = write_json(k, &mut key, false);
    Error::NonStringKey { key }
}

/// Appends compact JSON for `doc` to `out`. With `strict_keys`, a non-string map key is an error;
/// without, it is written as its own JSON text (for `Display`).
pub(crate) fn write_json(doc: &Doc, out: &mut String, strict_keys: bool) -> Result<()> {
    match doc {
        Doc::Null => out.push_str("null"),
        Doc::Bool(true) => out.push_str("true"),
        Doc::Bool(false) => out.push_str("false"),
        Doc::Int(v) => {
            let _ = write!(out, "{v}");
        }
        Doc::Decimal(d) => out.push_str(d.as_str()),
        Doc::String(s) => write_json_string(s, out),
        Doc::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out, strict_keys)?;
            }
            out.push(']');
        }
        Doc::Map(m) => {
            out.push('{');
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match k {
                    Doc::String(s) => write_json_string(s, out),
                    other if strict_keys => return Err(non_string_key(other)),
                    other => write_json(other, out, strict_keys)?,
                }
                out.push(':');
                write_json(v, out, strict_keys)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// Appends `s` as a JSON string literal (escapes `"`, `\` and control characters).
pub(crate) fn write_json_string(s: &str, out: &mut String) {
    out.push('"');
    let mut plain_from = 0;
    for (i, c) in s.char_indices() {
        let escape = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            '\u{08}' => "\\b",
            '\u{0c}' => "\\f",
            c if (c as u32) < 0x20 => "",
            _ => continue,
        };
        out.push_str(&s[plain_from..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push_str(escape);
        }
        plain_from = i + c.len_utf8();
    }
    out.push_str(&s[plain_from..]);
    out.push('"');
}

impl Doc {
    /// Parses JSON text (see [`from_json_str`]).
    pub fn from_json(text: &str) -> Result<Doc> {
        from_json_str(text)
    }

    /// Compact JSON text (see [`to_json_string`]).
    pub fn to_json(&self) -> Result<String> {
        to_json_string(self)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn decimal_text_round_trips_byte_for_byte() {
        for text in [
            "99.34901097702962",
            "1.0",
            "-0.000",
            "1e+2",
            "-2.5e-3",
            "6.02214076e+23",
            "123456789012345678901234567890",
            "-9223372036854775809",
        ] {
            let doc = from_json_str(text).unwrap();
            assert!(matches!(doc, Doc::Decimal(_)), "{text} -> {doc:?}");
            assert_eq!(to_json_string(&doc).unwrap(), text);
        }
        assert_eq!(
            from_json_str("-9223372036854775808").unwrap(),
            Doc::Int(i64::MIN)
        );
        assert!(matches!(from_json_str("42").unwrap(), Doc::Int(42)));
    }

    #[test]
    fn exponents_come_back_in_serde_json_form() {
        for (text, back) in [("1E5", "1e+5"), ("2.5E-3", "2.5e-3"), ("7e0", "7e+0")] {
            let doc = from_json_str(text).unwrap();
            assert_eq!(to_json_string(&doc).unwrap(), back);
            assert_eq!(doc, Doc::decimal(text).unwrap());
        }
    }

    #[test]
    fn duplicate_keys_keep_the_first_position_and_the_last_value() {
        let doc = from_json_str(r#"{"a":1,"b":2,"a":3,"c":{"x":1,"x":[2]}}"#).unwrap();
        assert_eq!(
            to_json_string(&doc).unwrap(),
            r#"{"a":3,"b":2,"c":{"x":[2]}}"#
        );
    }

    #[test]
    fn trailing_text_is_an_error() {
        assert!(from_json_str("{} x").is_err());
        assert!(from_json_slice(b"1 2").is_err());
        assert_eq!(
            from_json_str(" [1] \n").unwrap(),
            Doc::Array(vec![Doc::Int(1)])
        );
    }

    #[test]
    fn object_order_is_kept() {
        let text = r#"{"z":1,"a":[true,null,"x"],"m":{"b":2,"a":1}}"#;
        assert_eq!(to_json_string(&from_json_str(text).unwrap()).unwrap(), text);
    }

    #[test]
    fn invalid_json_reports_line_and_column() {
        let err = from_json_str("{\n  \"a\": 1,\n  \"b\": @\n}").unwrap_err();
        match err {
            Error::Json { line, column, .. } => {
                assert_eq!(line, 3);
                assert_eq!(column, 8);
            }
            other => panic!("{other:?}"),
        }
        let msg = from_json_str("[1,").unwrap_err().to_string();
        assert!(msg.contains("line 1"), "{msg}");
    }

    #[test]
    fn strings_are_escaped_like_serde_json() {
        let s = "quote\" back\\ nl\n tab\t nul\u{0} bell\u{7} é 😀 \u{7f}";
        let mut out = String::new();
        write_json_string(s, &mut out);
        assert_eq!(out, serde_json::to_string(s).unwrap());
    }

    #[test]
    fn non_string_keys_cannot_become_json() {
        let m: DocMap = [(Doc::Int(1), Doc::Int(2))].into_iter().collect();
        let doc = Doc::Map(m);
        assert!(matches!(
            to_json_string(&doc),
            Err(Error::NonStringKey { .. })
        ));
        assert!(to_json_value(&doc).is_err());
        assert_eq!(doc.to_string(), "{1:2}");
    }
}
