//! JSONPath for the JSON commands, as RedisJSON reads it: `$` then steps, each matching zero or
//! more values. `.name` and `["name"]` / `['name']` (a key of an object), `[n]` (an array
//! index, negative from the end), `.*` and `[*]` (every member or element), `[a,b]` (a union of
//! keys or of indexes), `[start:end:step]` (a slice, as Python's), and `..` before any of them
//! (that step applied at every depth: `$..a` is every member named `a` anywhere). Filter
//! expressions (`[?(...)]`) are refused with an error naming them.
//!
//! A match is a concrete location (keys and non-negative indexes, `strata_doc::PathStep`), so
//! the commands read and change documents through strata-doc's own paths. Matches come in
//! document order, a node's own match before those inside it, as RedisJSON lists them.

use strata_doc::{Doc, PathStep};

use crate::error::{Error, Result};

/// Deepest nesting `..` descends (documents are bounded by the decoder's depth limit too).
const DESCENT_DEPTH_MAX: usize = 512;

/// One step of a path: what it matches inside each value the steps before it matched.
#[derive(Debug, Clone, PartialEq)]
enum Selector {
    Key(String),
    Index(i64),
    /// `*`: every member of an object, every element of an array.
    Wildcard,
    /// `[start:end:step]` of an array.
    Slice {
        start: Option<i64>,
        end: Option<i64>,
        step: i64,
    },
    /// `[a,b,...]`: each alternative in turn.
    Union(Vec<Selector>),
    /// `..` then a selector: the selector at the value and at every value inside it.
    Descend(Box<Selector>),
}

/// A parsed JSONPath.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Query {
    selectors: Vec<Selector>,
}

/// A match: the steps from the root to one value.
pub(crate) type Location = Vec<PathStep>;

fn is_name_char(c: char) -> bool {
    !matches!(c, '.' | '[' | ']' | '"' | '\'' | '(' | ')' | ',') && !c.is_whitespace()
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn err(&self, reason: &str) -> Error {
        Error::command(format!(
            "invalid JSONPath '{}' at offset {}: {reason}",
            self.text, self.at
        ))
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(|b| b == b' ') {
            self.at += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// A member name after `.` or `..`, or `*`.
    fn name(&mut self) -> Result<Selector> {
        if self.eat(b'*') {
            return Ok(Selector::Wildcard);
        }
        let rest = &self.text[self.at..];
        let len = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
        if len == 0 {
            return Err(self.err("expected a member name"));
        }
        self.at += len;
        Ok(Selector::Key(rest[..len].to_string()))
    }

    fn integer(&mut self) -> Result<Option<i64>> {
        self.skip_spaces();
        let rest = &self.text[self.at..];
        let len = rest
            .char_indices()
            .take_while(|&(i, c)| c.is_ascii_digit() || (i == 0 && c == '-'))
            .count();
        if len == 0 {
            return Ok(None);
        }
        let n = rest[..len]
            .parse::<i64>()
            .map_err(|_| self.err("expected an integer"))?;
        self.at += len;
        self.skip_spaces();
        Ok(Some(n))
    }

    /// A quoted key: `"..."` as a JSON string literal, `'...'` with backslash escapes of `'`
    /// and `\`.
    fn quoted(&mut self, quote: u8) -> Result<String> {
        let b = self.text.as_bytes();
        let start = self.at;
        let mut i = start + 1;
        while i < b.len() && b[i] != quote {
            i += if b[i] == b'\\' { 2 } else { 1 };
        }
        if i >= b.len() {
            return Err(self.err("unterminated string"));
        }
        let body = &self.text[start + 1..i];
        self.at = i + 1;
        if quote == b'"' {
            serde_json::from_str(&self.text[start..=i]).map_err(|_| self.err("invalid string"))
        } else {
            let mut out = String::with_capacity(body.len());
            let mut chars = body.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => out.extend(chars.next()),
                    c => out.push(c),
                }
            }
            Ok(out)
        }
    }

    /// One alternative inside `[...]`: a quoted key, an index, a slice or `*`.
    fn bracket_item(&mut self) -> Result<Selector> {
        self.skip_spaces();
        match self.peek() {
            Some(q @ (b'"' | b'\'')) => {
                let key = self.quoted(q)?;
                self.skip_spaces();
                Ok(Selector::Key(key))
            }
            Some(b'*') => {
                self.at += 1;
                self.skip_spaces();
                Ok(Selector::Wildcard)
            }
            Some(b'?') => Err(self.err("filter expressions are not supported")),
            _ => {
                let start = self.integer()?;
                if !self.eat(b':') {
                    return start
                        .map(Selector::Index)
                        .ok_or_else(|| self.err("expected an index, a slice or a quoted key"));
                }
                let end = self.integer()?;
                let step = if self.eat(b':') {
                    self.integer()?.unwrap_or(1)
                } else {
                    1
                };
                if step <= 0 {
                    return Err(self.err("a slice's step must be positive"));
                }
                Ok(Selector::Slice { start, end, step })
            }
        }
    }

    /// `[...]`, the opening bracket consumed.
    fn bracket(&mut self) -> Result<Selector> {
        let mut items = vec![self.bracket_item()?];
        while self.eat(b',') {
            items.push(self.bracket_item()?);
        }
        if !self.eat(b']') {
            return Err(self.err("expected ']'"));
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Selector::Union(items)
        })
    }
}

impl Query {
    /// Parses `text`, which starts with `$`.
    pub(crate) fn parse(text: &str) -> Result<Query> {
        let mut p = Parser { text, at: 0 };
        if !p.eat(b'$') {
            return Err(p.err("a path starts with '$'"));
        }
        let mut selectors = Vec::new();
        while let Some(b) = p.peek() {
            p.at += 1;
            let selector = match b {
                b'.' if p.eat(b'.') => {
                    let inner = if p.eat(b'[') { p.bracket()? } else { p.name()? };
                    Selector::Descend(Box::new(inner))
                }
                // `$.[0]`: RedisJSON reads a bracket after a dot as the bracket alone.
                b'.' if p.eat(b'[') => p.bracket()?,
                b'.' => p.name()?,
                b'[' => p.bracket()?,
                _ => {
                    p.at -= 1;
                    return Err(p.err("expected '.' or '['"));
                }
            };
            selectors.push(selector);
        }
        Ok(Query { selectors })
    }

    /// `$`, the whole document.
    pub(crate) fn root() -> Query {
        Query {
            selectors: Vec::new(),
        }
    }

    /// Whether the path is `$` alone.
    pub(crate) fn is_root(&self) -> bool {
        self.selectors.is_empty()
    }

    /// The path without its last step, and that step's key when it is a key (where JSON.SET
    /// may create a member).
    pub(crate) fn parent_and_key(&self) -> Option<(Query, &str)> {
        let (last, init) = self.selectors.split_last()?;
        match last {
            Selector::Key(k) => Some((
                Query {
                    selectors: init.to_vec(),
                },
                k,
            )),
            _ => None,
        }
    }

    /// Every location the path matches in `doc`, in document order.
    pub(crate) fn locate(&self, doc: &Doc) -> Vec<Location> {
        let mut current: Vec<Location> = vec![Vec::new()];
        for selector in &self.selectors {
            let mut next = Vec::new();
            for loc in current {
                if let Some(value) = value_at(doc, &loc) {
                    select(selector, value, &loc, &mut next, 0);
                }
            }
            current = next;
        }
        current
    }
}

/// The value at `loc`, if it is there.
pub(crate) fn value_at<'a>(doc: &'a Doc, loc: &[PathStep]) -> Option<&'a Doc> {
    loc.iter().try_fold(doc, |v, step| match (v, step) {
        (Doc::Map(m), PathStep::Key(k)) => m.get_str(k),
        (Doc::Array(a), PathStep::Index(i)) => usize::try_from(*i).ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn child(loc: &[PathStep], step: PathStep) -> Location {
    let mut out = Vec::with_capacity(loc.len() + 1);
    out.extend_from_slice(loc);
    out.push(step);
    out
}

/// The children of `value` with their steps, in order.
fn children(value: &Doc) -> Vec<(PathStep, &Doc)> {
    match value {
        Doc::Map(m) => m
            .iter()
            .filter_map(|(k, v)| match k {
                Doc::String(s) => Some((PathStep::Key(s.clone()), v)),
                _ => None,
            })
            .collect(),
        Doc::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, v)| (PathStep::Index(i as i64), v))
            .collect(),
        _ => Vec::new(),
    }
}

fn select(
    selector: &Selector,
    value: &Doc,
    loc: &[PathStep],
    out: &mut Vec<Location>,
    depth: usize,
) {
    match (selector, value) {
        (Selector::Key(k), Doc::Map(m)) if m.get_str(k).is_some() => {
            out.push(child(loc, PathStep::Key(k.clone())));
        }
        (Selector::Index(i), Doc::Array(a)) => {
            let len = a.len() as i64;
            let at = if *i < 0 { len + i } else { *i };
            if (0..len).contains(&at) {
                out.push(child(loc, PathStep::Index(at)));
            }
        }
        (Selector::Wildcard, _) => {
            for (step, _) in children(value) {
                out.push(child(loc, step));
            }
        }
        (Selector::Slice { start, end, step }, Doc::Array(a)) => {
            let len = a.len() as i64;
            let clamp = |i: i64| if i < 0 { (len + i).max(0) } else { i.min(len) };
            let from = start.map_or(0, clamp);
            let to = end.map_or(len, clamp);
            let mut i = from;
            while i < to {
                out.push(child(loc, PathStep::Index(i)));
                i += step;
            }
        }
        (Selector::Union(items), _) => {
            for item in items {
                select(item, value, loc, out, depth);
            }
        }
        (Selector::Descend(inner), _) => {
            select(inner, value, loc, out, depth);
            if depth < DESCENT_DEPTH_MAX {
                for (step, v) in children(value) {
                    select(selector, v, &child(loc, step), out, depth + 1);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_doc::from_json_slice;

    fn doc(json: &str) -> Doc {
        from_json_slice(json.as_bytes()).unwrap()
    }

    /// The matches as JSONPath-like text, to compare with what RedisJSON (and the JSONPath
    /// proposal's examples) list.
    fn matches(json: &str, path: &str) -> Vec<String> {
        let d = doc(json);
        Query::parse(path)
            .unwrap()
            .locate(&d)
            .iter()
            .map(|loc| {
                let mut s = "$".to_string();
                for step in loc {
                    match step {
                        PathStep::Key(k) => s.push_str(&format!("['{k}']")),
                        PathStep::Index(i) => s.push_str(&format!("[{i}]")),
                    }
                }
                s
            })
            .collect()
    }

    #[test]
    fn descent_lists_a_value_before_what_is_inside_it() {
        // redis-py's JSON.TOGGLE test: answers [nil, 1, nil, 0] in this order.
        let j = r#"{"a":["foo"],"nested1":{"a":false},"nested2":{"a":31},"nested3":{"a":true}}"#;
        assert_eq!(
            matches(j, "$..a"),
            [
                "$['a']",
                "$['nested1']['a']",
                "$['nested2']['a']",
                "$['nested3']['a']"
            ]
        );
        // A match inside a match is listed after it.
        assert_eq!(
            matches(r#"{"a":{"a":2,"b":3}}"#, "$..a"),
            ["$['a']", "$['a']['a']"]
        );
        assert_eq!(
            matches(
                r#"[{"ciao":1,"n":[{"ciao":2},{"x":{"ciao":3}}]}]"#,
                r#"$.[0]["n"]..ciao"#
            ),
            ["$[0]['n'][0]['ciao']", "$[0]['n'][1]['x']['ciao']"]
        );
    }

    #[test]
    fn wildcards_unions_and_slices_match_like_python() {
        let j = r#"{"x":[0,1,2,3,4,5],"y":{"p":1,"q":2}}"#;
        assert_eq!(matches(j, "$.y.*"), ["$['y']['p']", "$['y']['q']"]);
        assert_eq!(matches(j, "$.x[*]").len(), 6);
        assert_eq!(
            matches(j, "$.x[1:4]"),
            ["$['x'][1]", "$['x'][2]", "$['x'][3]"]
        );
        assert_eq!(
            matches(j, "$.x[::2]"),
            ["$['x'][0]", "$['x'][2]", "$['x'][4]"]
        );
        assert_eq!(matches(j, "$.x[-2:]"), ["$['x'][4]", "$['x'][5]"]);
        assert_eq!(matches(j, "$.x[0,-1,9]"), ["$['x'][0]", "$['x'][5]"]);
        assert_eq!(
            matches(j, "$['y','x'][0]"),
            ["$['x'][0]"],
            "an index step finds nothing in an object"
        );
        assert_eq!(matches(j, "$.y['p','q']"), ["$['y']['p']", "$['y']['q']"]);
        assert_eq!(matches(j, "$..[0]"), ["$['x'][0]"]);
        assert_eq!(matches(j, "$").len(), 1);
        assert!(matches(j, "$.nope.x").is_empty());
    }

    #[test]
    fn bad_paths_are_refused_with_their_offset() {
        for bad in [
            "$.",
            "$[",
            "$[1",
            "$x",
            "$['a",
            "$[?(@.a<1)]",
            "$[::0]",
            "a",
        ] {
            let e = Query::parse(bad).unwrap_err().to_string();
            assert!(e.contains("invalid JSONPath"), "{bad}: {e}");
        }
    }
}
