//! JSON text straight to the stored form (version byte + value codec), without building a
//! [`Doc`](crate::Doc) on the way: what the loader does with every input line.
//!
//! [`encode_json_stored`] writes exactly the bytes `encode_stored(&from_json_slice(text)?, names)`
//! would (a property test holds the two paths together), but serde_json's tokens go straight into the
//! output buffer: no `String` per key or value, no tree to build, walk and free. A container's
//! count is known only at its end, so one byte is reserved for its header and the header is
//! written (and the bytes after it moved when it needs more than one byte) when the container
//! closes.
//!
//! One thing the document model does is not done here: merging a repeated object key (first
//! position, last value); [`Streamed::RepeatedKey`] tells the caller to take the document path
//! instead. Everything else matches: numbers follow `json::number_from_text`, strings are copied
//! as serde_json unescapes them, and the nesting limit is serde_json's (128, below
//! [`DEPTH_MAX`]).

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use crate::codec::{
    header_len, int_header, len_u64, put_header, type_code as tc, DEPTH_MAX, STORED_FORMAT_VERSION,
};
use crate::error::{Error, Result};
use crate::json::NUMBER_TOKEN;
use crate::names::{KeyNames, NameTable, NAME_BYTES_MAX};
use crate::num::Decimal;

/// How [`encode_json_stored`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streamed {
    /// `out` holds the stored form.
    Done,
    /// An object repeats a key: `out` holds bytes with the repeat, which the document model would
    /// have merged; parse the text into a document instead.
    RepeatedKey,
}

/// Appends the stored form of the JSON text `text` to `out` (see the module comment), object keys
/// that have an id in `names` written as name references. On an error `out` holds a partial
/// encoding.
pub fn encode_json_stored(text: &[u8], out: &mut Vec<u8>, names: &KeyNames) -> Result<Streamed> {
    let mut inline = Vec::new();
    let how = encode_json_stored_in(text, out, &names.table(), &mut inline);
    names.note_inline(&inline.iter().map(String::as_str).collect::<Vec<_>>());
    how
}

/// [`encode_json_stored`] with the ids of `names`; the keys written inline that could get an id
/// are added to `inline`.
pub(crate) fn encode_json_stored_in(
    text: &[u8],
    out: &mut Vec<u8>,
    names: &NameTable,
    inline: &mut Vec<String>,
) -> Result<Streamed> {
    out.push(STORED_FORMAT_VERSION);
    let mut de = serde_json::Deserializer::from_slice(text);
    let mut repeated = false;
    EncodeSeed {
        out,
        depth: 0,
        repeated: &mut repeated,
        names,
        inline,
    }
    .deserialize(&mut de)
    .map_err(|e| Error::from_json(&e))?;
    de.end().map_err(|e| Error::from_json(&e))?;
    Ok(if repeated {
        Streamed::RepeatedKey
    } else {
        Streamed::Done
    })
}

/// Encodes one JSON value at the end of `out`.
struct EncodeSeed<'a> {
    out: &'a mut Vec<u8>,
    /// Containers around this value.
    depth: usize,
    /// Set when some object repeats a key.
    repeated: &'a mut bool,
    /// Key names with ids.
    names: &'a NameTable,
    /// Keys written inline that could get an id.
    inline: &'a mut Vec<String>,
}

impl EncodeSeed<'_> {
    fn child(&mut self) -> EncodeSeed<'_> {
        EncodeSeed {
            out: self.out,
            depth: self.depth + 1,
            repeated: self.repeated,
            names: self.names,
            inline: self.inline,
        }
    }

    fn key_seed(&mut self, number_marker: bool) -> KeySeed<'_> {
        KeySeed {
            out: &mut *self.out,
            number_marker,
            names: self.names,
            inline: &mut *self.inline,
        }
    }

    fn check_depth<E: de::Error>(&self) -> std::result::Result<(), E> {
        if self.depth >= DEPTH_MAX {
            return Err(E::custom(Error::TooDeep {
                depth_max: DEPTH_MAX,
            }));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for EncodeSeed<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

/// Writes the header of a container whose one reserved byte is at `at`, now that its count `n`
/// is known.
fn close_container(out: &mut Vec<u8>, at: usize, code: u8, n: u64) {
    let mut header = Vec::new();
    if header_len(n) == 1 {
        put_header(&mut header, code, n);
        if let (Some(slot), Some(&byte)) = (out.get_mut(at), header.first()) {
            *slot = byte;
        }
    } else {
        put_header(&mut header, code, n);
        out.splice(at..at + 1, header);
    }
}

/// The codec bytes of one JSON number text (the rules of `json::number_from_text`).
fn put_number<E: de::Error>(out: &mut Vec<u8>, text: &str) -> std::result::Result<(), E> {
    if !text.bytes().any(|c| matches!(c, b'.' | b'e' | b'E')) {
        if let Ok(v) = text.parse::<i64>() {
            let (code, n) = int_header(v);
            put_header(out, code, n);
            return Ok(());
        }
    }
    let d = Decimal::parse(text).map_err(E::custom)?;
    put_header(out, tc::DECIMAL, len_u64(d.as_str().len()));
    out.extend_from_slice(d.as_str().as_bytes());
    Ok(())
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    put_header(out, tc::STRING, len_u64(s.len()));
    out.extend_from_slice(s.as_bytes());
}

impl<'de> Visitor<'de> for EncodeSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> std::result::Result<(), E> {
        self.out.push(tc::NULL);
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<(), E> {
        self.out.push(if v { tc::TRUE } else { tc::FALSE });
        Ok(())
    }

    // Numbers arrive through `visit_map` with `arbitrary_precision`; these cover a build without.
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<(), E> {
        let (code, n) = int_header(v);
        put_header(self.out, code, n);
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<(), E> {
        put_number(self.out, &v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<(), E> {
        put_number(self.out, &v.to_string())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<(), E> {
        put_string(self.out, v);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> std::result::Result<(), A::Error> {
        self.check_depth()?;
        let at = self.out.len();
        self.out.push(0);
        let mut n = 0u64;
        while seq.next_element_seed(self.child())?.is_some() {
            n += 1;
        }
        close_container(self.out, at, tc::ARRAY, n);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> std::result::Result<(), A::Error> {
        let at = self.out.len();
        // A number (`arbitrary_precision`) is a map whose only key is the marker: nothing of the
        // map is written before that is known.
        let first = map.next_key_seed(self.key_seed(true))?;
        let first = match first {
            None => {
                self.out.push(tc::MAP);
                return Ok(());
            }
            Some(Key::NumberMarker) => return map.next_value_seed(NumberSeed { out: self.out }),
            Some(Key::Written(range)) => range,
        };
        self.check_depth()?;
        self.out.insert(at, 0);
        // Where each key's bytes are, to find a repeated key at the end. A range recorded before
        // a nested container closes is not moved by it: the nested bytes all come after it.
        let mut keys = vec![(first.0 + 1, first.1)];
        loop {
            map.next_value_seed(self.child())?;
            match map.next_key_seed(self.key_seed(false))? {
                None => break,
                Some(Key::Written(range)) => keys.push(range),
                // Only the first key is checked for the marker.
                Some(Key::NumberMarker) => {}
            }
        }
        if keys.len() > 1 {
            let mut texts: Vec<&[u8]> = keys
                .iter()
                .filter_map(|&(start, len)| self.out.get(start..start + len))
                .collect();
            texts.sort_unstable();
            if texts.windows(2).any(|w| w[0] == w[1]) {
                *self.repeated = true;
            }
        }
        close_container(self.out, at, tc::MAP, len_u64(keys.len()));
        Ok(())
    }
}

/// An object key as written: its bytes' (start, length) in the output, header included (equal
/// keys have equal bytes: a name has either an id or not for the whole document), or the number
/// marker.
enum Key {
    NumberMarker,
    Written((usize, usize)),
}

struct KeySeed<'a> {
    out: &'a mut Vec<u8>,
    /// Whether this key may be serde_json's number marker (only the first key of a map).
    number_marker: bool,
    names: &'a NameTable,
    inline: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed<'_> {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Key, E> {
        if self.number_marker && v == NUMBER_TOKEN {
            return Ok(Key::NumberMarker);
        }
        let start = self.out.len();
        if let Some(id) = self.names.id(v) {
            put_header(self.out, tc::NAME_REF, u64::from(id));
        } else {
            put_header(self.out, tc::STRING, len_u64(v.len()));
            self.out.extend_from_slice(v.as_bytes());
            if v.len() <= NAME_BYTES_MAX {
                self.inline.push(v.to_string());
            }
        }
        Ok(Key::Written((start, self.out.len() - start)))
    }
}

/// The text of a number behind the marker.
struct NumberSeed<'a> {
    out: &'a mut Vec<u8>,
}

impl<'de> DeserializeSeed<'de> for NumberSeed<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for NumberSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number's text")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<(), E> {
        put_number(self.out, v)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::codec::encode_stored;
    use crate::json::from_json_str;

    fn streamed_with(text: &str, names: &KeyNames) -> (Vec<u8>, Streamed) {
        let mut out = Vec::new();
        let how = encode_json_stored(text.as_bytes(), &mut out, names).unwrap();
        (out, how)
    }

    fn streamed(text: &str) -> (Vec<u8>, Streamed) {
        streamed_with(text, &KeyNames::detached())
    }

    #[test]
    fn writes_what_the_document_path_writes() {
        for text in [
            "null",
            "true",
            "[]",
            "{}",
            "-7",
            "12345678901234567890",
            "99.34901097702962",
            "1E5",
            r#""caf\u00e9 \"x\"""#,
            r#"{"id":"evn2i5p","score":109,"a":[1,{"b":null}],"e":{},"f":[]}"#,
            // 15 entries and 200 elements: headers longer than the reserved byte.
            r#"{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":[[],[[]]]}"#,
            &format!("[{}]", vec!["1"; 200].join(",")),
            &crate::gen::comment_json(3, 0),
        ] {
            for names in [
                KeyNames::detached(),
                KeyNames::with_table(NameTable::from_names(["id", "a", "o", "b"]).unwrap()),
            ] {
                let (bytes, how) = streamed_with(text, &names);
                assert_eq!(how, Streamed::Done, "{text}");
                let want = encode_stored(&from_json_str(text).unwrap(), &names).unwrap();
                assert_eq!(bytes, want, "{text}");
            }
        }
    }

    #[test]
    fn a_repeated_key_is_reported_at_any_depth() {
        assert_eq!(streamed(r#"{"a":1,"b":2,"a":3}"#).1, Streamed::RepeatedKey);
        assert_eq!(
            streamed(r#"[{"x":{"y":1,"y":2}}]"#).1,
            Streamed::RepeatedKey
        );
        assert_eq!(streamed(r#"{"a":{"a":1},"b":[{"a":2}]}"#).1, Streamed::Done);
        // The same with "a" as a name reference, and a key whose text equals a reference's bytes.
        let names = KeyNames::with_table(NameTable::from_names(["a", "b"]).unwrap());
        assert_eq!(
            streamed_with(r#"{"a":1,"b":2,"a":3}"#, &names).1,
            Streamed::RepeatedKey
        );
        assert_eq!(
            streamed_with("{\"a\":1,\"\\u001a\":2}", &names).1,
            Streamed::Done
        );
    }

    #[test]
    fn invalid_text_is_an_error_with_its_position() {
        let mut out = Vec::new();
        match encode_json_stored(b"{\"a\": 1,\n \"b\": @}", &mut out, &KeyNames::detached()) {
            Err(Error::Json { line, column, .. }) => assert_eq!((line, column), (2, 7)),
            other => panic!("{other:?}"),
        }
        assert!(encode_json_stored(b"{} x", &mut Vec::new(), &KeyNames::detached()).is_err());
    }
}
