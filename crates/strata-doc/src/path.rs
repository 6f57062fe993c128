//! Paths into documents (`$`, `$.a.b`, `$.arr[2]`, `$.arr[-1]`, `$["key with space"]`) and the
//! walk over ENCODED bytes ([`get_path_bytes`]) that finds a sub-value by skipping siblings with
//! the allocation-free `skip`, without decoding the rest of the document.
//!
//! Grammar: `$` then any number of steps; `.name` where name is one or more characters other than
//! `.`, `[`, `]`, `"`, `'` and whitespace; `[N]` an array index (negative counts from the end);
//! `["text"]` a map key written as a JSON string literal (escapes allowed). Key steps match string
//! map keys only; an index step applies to arrays only. A path that leads nowhere (missing key,
//! index out of range, wrong type on the way) finds nothing, which is not an error.

use std::fmt;
use std::str::FromStr;

use crate::codec::{decode_in, stored_body, type_code, Reader};
use crate::doc::{resolve_index, Doc};
use crate::error::{Error, Result};
use crate::names::{KeyNames, NameTable};

/// One step of a [`Path`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PathStep {
    /// A string key of a map.
    Key(String),
    /// An array index; negative counts from the end (`-1` is the last element).
    Index(i64),
}

/// A parsed path: the steps from the document root.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Path {
    steps: Vec<PathStep>,
}

impl Path {
    /// `$`, the whole document.
    pub fn root() -> Self {
        Path::default()
    }

    /// Parses a path expression.
    pub fn parse(text: &str) -> Result<Self> {
        let err = |offset: usize, reason: &'static str| Error::InvalidPath {
            path: text.to_string(),
            offset,
            reason,
        };
        let b = text.as_bytes();
        if b.first() != Some(&b'$') {
            return Err(err(0, "a path starts with '$'"));
        }
        let mut steps = Vec::new();
        let mut i = 1;
        while i < b.len() {
            match b[i] {
                b'.' => {
                    let start = i + 1;
                    let end = text[start..]
                        .find(|c: char| !is_name_char(c))
                        .map_or(text.len(), |n| start + n);
                    if end == start {
                        return Err(err(start, "expected a key name after '.'"));
                    }
                    steps.push(PathStep::Key(text[start..end].to_string()));
                    i = end;
                }
                b'[' => match b.get(i + 1) {
                    Some(b'"') => {
                        let start = i + 1;
                        let end = closing_quote(b, start + 1)
                            .ok_or_else(|| err(start, "unterminated string"))?;
                        let key: String = serde_json::from_str(&text[start..=end])
                            .map_err(|_| err(start, "invalid string literal"))?;
                        if b.get(end + 1) != Some(&b']') {
                            return Err(err(end + 1, "expected ']'"));
                        }
                        steps.push(PathStep::Key(key));
                        i = end + 2;
                    }
                    _ => {
                        let start = i + 1;
                        let close = text[start..]
                            .find(']')
                            .map(|n| start + n)
                            .ok_or_else(|| err(start, "expected ']'"))?;
                        let index: i64 = text[start..close]
                            .parse()
                            .map_err(|_| err(start, "expected an integer index or a string"))?;
                        steps.push(PathStep::Index(index));
                        i = close + 1;
                    }
                },
                _ => return Err(err(i, "expected '.' or '['")),
            }
        }
        Ok(Path { steps })
    }

    /// The steps, root first.
    pub fn steps(&self) -> &[PathStep] {
        &self.steps
    }

    /// True for `$`.
    pub fn is_root(&self) -> bool {
        self.steps.is_empty()
    }

    /// This path extended by a key step.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.steps.push(PathStep::Key(key.into()));
        self
    }

    /// This path extended by an index step.
    pub fn index(mut self, index: i64) -> Self {
        self.steps.push(PathStep::Index(index));
        self
    }
}

fn is_name_char(c: char) -> bool {
    !matches!(c, '.' | '[' | ']' | '"' | '\'') && !c.is_whitespace()
}

/// Index of the `"` closing a string literal whose content starts at `from`.
fn closing_quote(b: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(&c) = b.get(i) {
        match c {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

impl FromStr for Path {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Path::parse(s)
    }
}

impl fmt::Display for PathStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathStep::Key(k) if !k.is_empty() && k.chars().all(is_name_char) => write!(f, ".{k}"),
            PathStep::Key(k) => {
                let mut quoted = String::new();
                crate::json::write_json_string(k, &mut quoted);
                write!(f, "[{quoted}]")
            }
            PathStep::Index(i) => write!(f, "[{i}]"),
        }
    }
}

impl fmt::Display for Path {
    /// The canonical text, which parses back to the same path.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("$")?;
        for s in &self.steps {
            write!(f, "{s}")?;
        }
        Ok(())
    }
}

/// Finds the encoded sub-value at `path` inside the encoded value `encoded` (the codec's bytes, no
/// version byte) by walking headers and skipping siblings; nothing is decoded or allocated.
/// `Ok(None)` when the path leads nowhere; an error when the bytes on the way are malformed.
pub fn get_path_bytes<'a>(encoded: &'a [u8], path: &Path) -> Result<Option<&'a [u8]>> {
    walk(encoded, path, None)
}

/// [`get_path_bytes`] over the body of a stored document (see [`stored_body`]), whose map keys
/// may be name references into `names`. The sub-value found may hold references too: decode it
/// with [`decode_in`].
pub fn get_path_bytes_in<'a>(
    body: &'a [u8],
    path: &Path,
    names: &NameTable,
) -> Result<Option<&'a [u8]>> {
    walk(body, path, Some(names))
}

/// The part at `path` of a stored document (version byte, then the value), found by walking the
/// bytes; reads the store's names again if the part refers to a name this handle lacks.
pub fn get_path_stored(stored: &[u8], path: &Path, names: &KeyNames) -> Result<Option<Doc>> {
    let body = stored_body(stored)?;
    names.with_refresh(|table| match walk(body, path, Some(table))? {
        Some(sub) => Ok(Some(decode_in(sub, table)?)),
        None => Ok(None),
    })
}

fn walk<'a>(encoded: &'a [u8], path: &Path, names: Option<&NameTable>) -> Result<Option<&'a [u8]>> {
    let mut start = 0usize;
    for step in path.steps() {
        let mut r = Reader::with_names(encoded, start, names);
        let (code, n) = r.header()?;
        match (step, code) {
            (PathStep::Key(want), type_code::MAP) => {
                // A key with an id may be stored either way: as a reference (written after it
                // got its id) or inline (written before).
                let want_id = names.and_then(|t| t.id(want)).map(u64::from);
                let mut found = None;
                for _ in 0..n {
                    let key_start = r.pos;
                    let (key_code, key_len) = r.header()?;
                    if key_code == type_code::NAME_REF {
                        if want_id == Some(key_len) {
                            found = Some(r.pos);
                            break;
                        }
                        // Check the id exists, so damage is not mistaken for "not found".
                        r.name(key_len, key_start)?;
                    } else if key_code == type_code::STRING {
                        let key = r.take(key_len)?;
                        if key == want.as_bytes() {
                            found = Some(r.pos);
                            break;
                        }
                    } else {
                        r.pos = key_start;
                        r.skip_value()?;
                    }
                    r.skip_value()?;
                }
                match found {
                    Some(at) => start = at,
                    None => return Ok(None),
                }
            }
            (PathStep::Index(i), type_code::ARRAY) => {
                let len = usize::try_from(n).unwrap_or(usize::MAX);
                let Some(at) = resolve_index(*i, len) else {
                    return Ok(None);
                };
                for _ in 0..at {
                    r.skip_value()?;
                }
                start = r.pos;
            }
            _ => return Ok(None),
        }
    }
    let mut r = Reader::with_names(encoded, start, names);
    r.skip_value()?;
    Ok(encoded.get(start..r.pos))
}

/// Decodes the sub-document at `path` of the encoded value `encoded` (see [`get_path_bytes`]).
pub fn get_path_encoded(encoded: &[u8], path: &Path) -> Result<Option<Doc>> {
    match get_path_bytes(encoded, path)? {
        Some(sub) => Ok(Some(crate::codec::decode(sub)?)),
        None => Ok(None),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::codec::encode;

    fn p(s: &str) -> Path {
        Path::parse(s).unwrap()
    }

    #[test]
    fn parses_the_documented_forms() {
        assert!(p("$").is_root());
        assert_eq!(
            p("$.a.b").steps(),
            [PathStep::Key("a".into()), PathStep::Key("b".into())]
        );
        assert_eq!(
            p("$.arr[2]").steps(),
            [PathStep::Key("arr".into()), PathStep::Index(2)]
        );
        assert_eq!(p("$[-1]").steps(), [PathStep::Index(-1)]);
        assert_eq!(
            p(r#"$["key with space"]["q\"uote"].x"#).steps(),
            [
                PathStep::Key("key with space".into()),
                PathStep::Key("q\"uote".into()),
                PathStep::Key("x".into())
            ]
        );
        assert_eq!(p("$.é_ü-1").steps(), [PathStep::Key("é_ü-1".into())]);
    }

    #[test]
    fn rejects_malformed_paths() {
        for bad in [
            "",
            "a",
            "$.",
            "$..a",
            "$[",
            "$[x]",
            "$[1",
            r#"$["a"#,
            r#"$["a"x"#,
            "$ .a",
            "$a",
        ] {
            assert!(Path::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "$",
            "$.a.b",
            "$.arr[2][-3]",
            r#"$["key with space"].x"#,
            r#"$[""]"#,
        ] {
            assert_eq!(p(text).to_string(), text);
            assert_eq!(p(&p(text).to_string()), p(text));
        }
    }

    #[test]
    fn walks_encoded_bytes() {
        let doc =
            Doc::from_json(r#"{"a":{"b":[10,{"c":"deep"},30]},"key with space":true,"n":null}"#)
                .unwrap();
        let bytes = encode(&doc).unwrap();
        let get = |s: &str| get_path_encoded(&bytes, &p(s)).unwrap();
        assert_eq!(get("$"), Some(doc.clone()));
        assert_eq!(get("$.a.b[0]"), Some(Doc::Int(10)));
        assert_eq!(get("$.a.b[1].c"), Some(Doc::from("deep")));
        assert_eq!(get("$.a.b[-1]"), Some(Doc::Int(30)));
        assert_eq!(get(r#"$["key with space"]"#), Some(Doc::Bool(true)));
        assert_eq!(get("$.n"), Some(Doc::Null));
        assert_eq!(get("$.missing"), None);
        assert_eq!(get("$.a.b[3]"), None);
        assert_eq!(get("$.a.b[-4]"), None);
        assert_eq!(get("$.a[0]"), None);
        assert_eq!(get("$.n.x"), None);
        // The sub-slice is exactly the encoding of the sub-value.
        let sub = get_path_bytes(&bytes, &p("$.a.b[1]")).unwrap().unwrap();
        assert_eq!(
            sub,
            encode(&Doc::from_json(r#"{"c":"deep"}"#).unwrap()).unwrap()
        );
    }

    #[test]
    fn walks_stored_documents_with_name_references() {
        // "a" has an id, "b" does not.
        let names = KeyNames::with_table(NameTable::from_names(["a"]).unwrap());
        let doc = Doc::from_json(r#"{"a":{"b":[1,{"a":"x"}]},"b":2}"#).unwrap();
        let stored = crate::codec::encode_stored(&doc, &names).unwrap();
        let get = |stored: &[u8], s: &str| get_path_stored(stored, &p(s), &names).unwrap();
        assert_eq!(get(&stored, "$"), Some(doc.clone()));
        assert_eq!(
            get(&stored, "$.a.b[1]"),
            Some(Doc::from_json(r#"{"a":"x"}"#).unwrap())
        );
        assert_eq!(get(&stored, "$.a.b[1].a"), Some(Doc::from("x")));
        assert_eq!(get(&stored, "$.b"), Some(Doc::Int(2)));
        assert_eq!(get(&stored, "$.c"), None);
        // A document written before "a" had an id holds it inline and is walked the same way.
        let before = crate::codec::encode_stored(&doc, &KeyNames::detached()).unwrap();
        assert!(before.len() > stored.len());
        assert_eq!(get(&before, "$.a.b[1].a"), Some(Doc::from("x")));
        assert_eq!(get(&before, "$.b"), Some(Doc::Int(2)));
        // Without the table the references are an error, not "not found".
        assert!(matches!(
            get_path_stored(&stored, &p("$.b"), &KeyNames::detached()),
            Err(Error::UnknownName { .. })
        ));
    }

    #[test]
    fn walk_skips_non_string_keys() {
        let m: crate::DocMap = [
            (Doc::Int(1), Doc::from("one")),
            (Doc::from("1"), Doc::from("string one")),
        ]
        .into_iter()
        .collect();
        let bytes = encode(&Doc::Map(m)).unwrap();
        assert_eq!(
            get_path_encoded(&bytes, &p(r#"$["1"]"#)).unwrap(),
            Some(Doc::from("string one"))
        );
    }

    #[test]
    fn walk_over_malformed_bytes_is_an_error() {
        // A map claiming 3 entries with only one present.
        let bytes = [0x39, 0x17, b'a', 0x01];
        assert!(get_path_bytes(&bytes, &p("$.b")).is_err());
        assert_eq!(
            get_path_bytes(&bytes, &p("$.a")).unwrap(),
            Some(&[0x01][..])
        );
    }
}
