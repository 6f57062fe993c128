//! JSONPath for the JSON commands, as RedisJSON reads it: `$` then steps, each matching zero or
//! more values. `.name` and `["name"]` / `['name']` (a key of an object), `[n]` (an array
//! index, negative from the end), `.*` and `[*]` (every member or element), `[a,b]` (a union of
//! keys or of indexes), `[start:end:step]` (a slice, as Python's), and `..` before any of them
//! (that step applied at every depth: `$..a` is every member named `a` anywhere), and filters
//! `[?(expr)]`: the members or elements for which `expr` holds, where `expr` compares paths
//! from the candidate (`@.price`, `@`) or the root (`$.limit`) and literals (numbers,
//! quoted strings, `true`, `false`, `null`) with `==`, `!=`, `<`, `<=`, `>`, `>=` or `=~` (a
//! regular expression), tests that a path exists (`@.isbn`), and joins tests with `&&`, `||`,
//! `!` and parentheses.
//!
//! A match is a concrete location (keys and non-negative indexes, `strata_doc::PathStep`), so
//! the commands read and change documents through strata-doc's own paths. Matches come in
//! document order, a node's own match before those inside it, as RedisJSON lists them.

use strata_doc::{Doc, PathStep};

use crate::error::{Error, Result};

/// Deepest nesting `..` descends (documents are bounded by the decoder's depth limit too).
const DESCENT_DEPTH_MAX: usize = 512;

/// One step of a path: what it matches inside each value the steps before it matched.
#[derive(Debug, Clone)]
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
    /// `[?(expr)]`: the members or elements for which the expression holds.
    Filter(Box<Expr>),
}

/// A filter expression.
#[derive(Debug, Clone)]
enum Expr {
    Or(Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    /// A path alone: true when it matches something.
    Exists(Operand),
    Compare(Operand, CompareOp, Operand),
    /// `=~`: the value is a string the expression matches.
    Matches(Operand, regex::Regex),
}

/// One side of a comparison.
#[derive(Debug, Clone)]
enum Operand {
    /// `@...`: a path from the candidate.
    Current(Vec<Selector>),
    /// `$...`: a path from the document's root.
    Root(Vec<Selector>),
    Literal(Doc),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Longest regular expression a filter may carry, in bytes.
const FILTER_REGEX_BYTES_MAX: usize = 1024;

/// A parsed JSONPath.
#[derive(Debug, Clone)]
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
    /// Filters, parentheses and `!` open around the current point.
    nesting: usize,
}

/// Deepest nesting of filters, parentheses and `!` a path may have (the parser recurses).
const FILTER_NESTING_MAX: usize = 64;

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
        // Inside a filter a name also ends at an operator (`@.price<10`).
        let in_filter = self.nesting > 0;
        let len = rest
            .find(|c: char| {
                !is_name_char(c) || (in_filter && matches!(c, '<' | '>' | '=' | '!' | '&' | '|'))
            })
            .unwrap_or(rest.len());
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
            Some(b'?') => Err(self.err("a filter cannot be part of a union")),
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
        self.skip_spaces();
        if self.eat(b'?') {
            let expr = self.or_expr()?;
            self.skip_spaces();
            if !self.eat(b']') {
                return Err(self.err("expected ']' after the filter"));
            }
            return Ok(Selector::Filter(Box::new(expr)));
        }
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

impl Parser<'_> {
    fn starts_with(&self, token: &str) -> bool {
        self.text[self.at..].starts_with(token)
    }

    fn or_expr(&mut self) -> Result<Expr> {
        self.nesting += 1;
        if self.nesting > FILTER_NESTING_MAX {
            return Err(self.err("filters nested too deeply"));
        }
        let expr = self.or_expr_inner();
        self.nesting -= 1;
        expr
    }

    fn or_expr_inner(&mut self) -> Result<Expr> {
        let mut left = self.and_expr()?;
        loop {
            self.skip_spaces();
            if !self.starts_with("||") {
                return Ok(left);
            }
            self.at += 2;
            let right = self.and_expr()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
    }

    fn and_expr(&mut self) -> Result<Expr> {
        let mut left = self.unary_expr()?;
        loop {
            self.skip_spaces();
            if !self.starts_with("&&") {
                return Ok(left);
            }
            self.at += 2;
            let right = self.unary_expr()?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
    }

    fn unary_expr(&mut self) -> Result<Expr> {
        self.skip_spaces();
        if self.peek() == Some(b'!') && !self.starts_with("!=") {
            self.at += 1;
            self.nesting += 1;
            if self.nesting > FILTER_NESTING_MAX {
                return Err(self.err("filters nested too deeply"));
            }
            let inner = self.unary_expr();
            self.nesting -= 1;
            return Ok(Expr::Not(Box::new(inner?)));
        }
        if self.eat(b'(') {
            let inner = self.or_expr()?;
            self.skip_spaces();
            if !self.eat(b')') {
                return Err(self.err("expected ')'"));
            }
            return Ok(inner);
        }
        let left = self.operand()?;
        self.skip_spaces();
        let op = [
            ("==", Some(CompareOp::Eq)),
            ("!=", Some(CompareOp::Ne)),
            ("<=", Some(CompareOp::Le)),
            (">=", Some(CompareOp::Ge)),
            ("=~", None),
            ("<", Some(CompareOp::Lt)),
            (">", Some(CompareOp::Gt)),
        ]
        .into_iter()
        .find(|(token, _)| self.starts_with(token));
        let Some((token, op)) = op else {
            return match left {
                Operand::Literal(_) => Err(self.err("expected a comparison")),
                path => Ok(Expr::Exists(path)),
            };
        };
        self.at += token.len();
        self.skip_spaces();
        let right = self.operand()?;
        match (op, right) {
            (Some(op), right) => Ok(Expr::Compare(left, op, right)),
            (None, Operand::Literal(Doc::String(pattern))) => {
                if pattern.len() > FILTER_REGEX_BYTES_MAX {
                    return Err(self.err("regular expression too long"));
                }
                let re = regex::Regex::new(&pattern)
                    .map_err(|_| self.err("invalid regular expression"))?;
                Ok(Expr::Matches(left, re))
            }
            (None, _) => Err(self.err("=~ takes a string (a regular expression)")),
        }
    }

    /// `@...`, `$...` or a literal.
    fn operand(&mut self) -> Result<Operand> {
        self.skip_spaces();
        match self.peek() {
            Some(b'@') => {
                self.at += 1;
                Ok(Operand::Current(self.steps(true)?))
            }
            Some(b'$') => {
                self.at += 1;
                Ok(Operand::Root(self.steps(true)?))
            }
            Some(q @ (b'"' | b'\'')) => Ok(Operand::Literal(Doc::String(self.quoted(q)?))),
            _ => {
                let rest = &self.text[self.at..];
                let len = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.')))
                    .unwrap_or(rest.len());
                let word = &rest[..len];
                let literal = match word {
                    "true" => Doc::Bool(true),
                    "false" => Doc::Bool(false),
                    "null" => Doc::Null,
                    _ => strata_doc::from_json_slice(word.as_bytes())
                        .ok()
                        .filter(|d| matches!(d, Doc::Int(_) | Doc::Decimal(_)))
                        .ok_or_else(|| {
                            self.err("expected a path, a string, a number, true, false or null")
                        })?,
                };
                self.at += len;
                Ok(Operand::Literal(literal))
            }
        }
    }

    /// Steps after `$` or `@`; inside a filter they end where a path cannot continue (at an
    /// operator, a closing parenthesis or bracket).
    fn steps(&mut self, in_filter: bool) -> Result<Vec<Selector>> {
        let mut selectors = Vec::new();
        while let Some(b) = self.peek() {
            let selector = match b {
                b'.' if self.starts_with("..") => {
                    self.at += 2;
                    let inner = if self.eat(b'[') {
                        self.bracket()?
                    } else {
                        self.name()?
                    };
                    Selector::Descend(Box::new(inner))
                }
                b'.' => {
                    self.at += 1;
                    // `$.[0]`: RedisJSON reads a bracket after a dot as the bracket alone.
                    if self.eat(b'[') {
                        self.bracket()?
                    } else {
                        self.name()?
                    }
                }
                b'[' => {
                    self.at += 1;
                    self.bracket()?
                }
                _ if in_filter => break,
                _ => return Err(self.err("expected '.' or '['")),
            };
            selectors.push(selector);
        }
        Ok(selectors)
    }
}

impl Query {
    /// Parses `text`, which starts with `$`.
    pub(crate) fn parse(text: &str) -> Result<Query> {
        let mut p = Parser {
            text,
            at: 0,
            nesting: 0,
        };
        if !p.eat(b'$') {
            return Err(p.err("a path starts with '$'"));
        }
        let selectors = p.steps(false)?;
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

    /// strata-doc's path for a path of keys and indexes only (at most one match), which
    /// strata-doc can find by walking a stored document's bytes.
    pub(crate) fn definite_path(&self) -> Option<strata_doc::Path> {
        self.selectors
            .iter()
            .try_fold(strata_doc::Path::root(), |p, s| match s {
                Selector::Key(k) => Some(p.key(k.clone())),
                Selector::Index(i) => Some(p.index(*i)),
                _ => None,
            })
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
                    select(selector, value, &loc, &mut next, doc, 0);
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
    root: &Doc,
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
                i = i.saturating_add(*step);
            }
        }
        (Selector::Union(items), _) => {
            for item in items {
                select(item, value, loc, out, root, depth);
            }
        }
        (Selector::Descend(inner), _) => {
            select(inner, value, loc, out, root, depth);
            if depth < DESCENT_DEPTH_MAX {
                for (step, v) in children(value) {
                    select(selector, v, &child(loc, step), out, root, depth + 1);
                }
            }
        }
        (Selector::Filter(expr), _) => {
            for (step, v) in children(value) {
                if holds(expr, v, root) {
                    out.push(child(loc, step));
                }
            }
        }
        _ => {}
    }
}

/// The values `selectors` match from `start`.
fn values_from<'a>(selectors: &[Selector], start: &'a Doc, root: &Doc) -> Vec<&'a Doc> {
    let mut locations = vec![Vec::new()];
    for selector in selectors {
        let mut next = Vec::new();
        for loc in locations {
            if let Some(v) = value_at(start, &loc) {
                select(selector, v, &loc, &mut next, root, 0);
            }
        }
        locations = next;
    }
    locations
        .iter()
        .filter_map(|loc| value_at(start, loc))
        .collect()
}

/// The value an operand stands for at `current` (a path's first match).
fn operand_value<'a>(operand: &'a Operand, current: &'a Doc, root: &'a Doc) -> Option<&'a Doc> {
    match operand {
        Operand::Current(steps) => values_from(steps, current, root).into_iter().next(),
        Operand::Root(steps) => values_from(steps, root, root).into_iter().next(),
        Operand::Literal(d) => Some(d),
    }
}

/// A number as `f64`, for comparing integers with floats.
fn number(d: &Doc) -> Option<f64> {
    match d {
        Doc::Int(i) => Some(*i as f64),
        Doc::Decimal(x) => x.as_str().parse().ok(),
        _ => None,
    }
}

fn compare(a: &Doc, op: CompareOp, b: &Doc) -> bool {
    use std::cmp::Ordering;
    let order = match (a, b) {
        (Doc::String(x), Doc::String(y)) => Some(x.cmp(y)),
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => x.partial_cmp(&y),
            _ => (a == b).then_some(Ordering::Equal),
        },
    };
    match op {
        CompareOp::Eq => order == Some(Ordering::Equal),
        CompareOp::Ne => order != Some(Ordering::Equal),
        CompareOp::Lt => order == Some(Ordering::Less),
        CompareOp::Le => matches!(order, Some(Ordering::Less | Ordering::Equal)),
        CompareOp::Gt => order == Some(Ordering::Greater),
        CompareOp::Ge => matches!(order, Some(Ordering::Greater | Ordering::Equal)),
    }
}

/// Whether the filter expression holds for the candidate `current`.
fn holds(expr: &Expr, current: &Doc, root: &Doc) -> bool {
    match expr {
        Expr::Or(a, b) => holds(a, current, root) || holds(b, current, root),
        Expr::And(a, b) => holds(a, current, root) && holds(b, current, root),
        Expr::Not(a) => !holds(a, current, root),
        Expr::Exists(path) => operand_value(path, current, root).is_some(),
        Expr::Compare(a, op, b) => {
            match (
                operand_value(a, current, root),
                operand_value(b, current, root),
            ) {
                (Some(x), Some(y)) => compare(x, *op, y),
                // A missing value equals nothing.
                _ => *op == CompareOp::Ne,
            }
        }
        Expr::Matches(a, re) => matches!(
            operand_value(a, current, root),
            Some(Doc::String(s)) if re.is_match(s)
        ),
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
        // Bounds and steps at the ends of i64 neither overflow nor loop.
        assert_eq!(matches(j, "$.x[1::9223372036854775807]"), ["$['x'][1]"]);
        assert_eq!(
            matches(j, "$.x[-9223372036854775808:9223372036854775807:2]"),
            ["$['x'][0]", "$['x'][2]", "$['x'][4]"]
        );
        assert!(matches(j, "$.x[-9223372036854775808]").is_empty());
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

    /// The JSONPath proposal's bookstore (Goessner), as redis-py's JSON tests use it.
    const STORE: &str = r#"{"store":{"book":[
        {"category":"reference","author":"Nigel Rees","price":8.95,"size":[10,20,30,40]},
        {"category":"fiction","author":"Evelyn Waugh","price":12.99,"size":[50,60,70,80]},
        {"category":"fiction","author":"Herman Melville","isbn":"0-553-21311-3","price":8.99,"size":[5,10,20,30]},
        {"category":"fiction","author":"J. R. R. Tolkien","isbn":"0-395-19395-8","price":22.99,"size":[5,6,7,8]}],
        "bicycle":{"color":"red","price":19.95}},"limit":10}"#;

    #[test]
    fn filters_select_the_members_they_hold_for() {
        let book = |i: usize| format!("$['store']['book'][{i}]");
        assert_eq!(
            matches(STORE, "$.store.book[?(@.price<10)].size"),
            [
                format!("{}['size']", book(0)),
                format!("{}['size']", book(2))
            ]
        );
        assert_eq!(matches(STORE, "$..book[?(@.isbn)]"), [book(2), book(3)]);
        assert_eq!(matches(STORE, "$..book[?(!@.isbn)]"), [book(0), book(1)]);
        assert_eq!(
            matches(STORE, "$..book[?(@.price < $.limit)]"),
            [book(0), book(2)],
            "a path from the root"
        );
        assert_eq!(
            matches(
                STORE,
                r#"$..book[?(@.category == "fiction" && (@.price > 20 || @.price <= 8.99))]"#
            ),
            [book(2), book(3)]
        );
        assert_eq!(
            matches(STORE, "$..book[?(@.author =~ '^J')].price"),
            [format!("{}['price']", book(3))]
        );
        assert_eq!(
            matches(STORE, "$..book[?(@.category != 'fiction')]"),
            [book(0)]
        );
        // Elements of arrays themselves, and members of an object.
        assert_eq!(
            matches(STORE, "$.store.book[0].size[?(@ >= 30)]"),
            [
                format!("{}['size'][2]", book(0)),
                format!("{}['size'][3]", book(0))
            ]
        );
        assert_eq!(
            matches(STORE, "$.store[?(@.color == 'red')]"),
            ["$['store']['bicycle']"]
        );
        // A missing value equals nothing; strings and numbers never compare.
        assert!(matches(STORE, "$..book[?(@.nope == null)]").is_empty());
        assert!(matches(STORE, "$..book[?(@.price < '10')]").is_empty());
        assert_eq!(matches(STORE, "$..book[?(@.nope != 1)]").len(), 4);
    }

    fn arb_doc() -> impl proptest::strategy::Strategy<Value = Doc> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Doc::Null),
            any::<bool>().prop_map(Doc::Bool),
            (-5i64..5).prop_map(Doc::Int),
            "[a-c]{0,2}".prop_map(Doc::String),
        ];
        leaf.prop_recursive(4, 40, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Doc::Array),
                proptest::collection::vec(("[a-c]", inner), 0..4).prop_map(|members| {
                    let mut m = strata_doc::DocMap::new();
                    for (k, v) in members {
                        m.insert(Doc::String(k), v);
                    }
                    Doc::Map(m)
                }),
            ]
        })
    }

    /// Every location in `doc`, each node before the nodes inside it.
    fn preorder(doc: &Doc, loc: Location, out: &mut Vec<Location>) {
        out.push(loc.clone());
        for (step, v) in children(doc) {
            preorder(v, child(&loc, step), out);
        }
    }

    proptest::proptest! {
        /// `$..a` against a model written another way: walk every node in document order
        /// and take its member `a`; `$..*` is every location but the root; `$.*` the root's
        /// children.
        #[test]
        fn descent_matches_a_walk_of_every_node(doc in arb_doc()) {
            let mut nodes = Vec::new();
            preorder(&doc, Vec::new(), &mut nodes);
            let named_a: Vec<Location> = nodes
                .iter()
                .filter(|loc| matches!(value_at(&doc, loc), Some(Doc::Map(m)) if m.get_str("a").is_some()))
                .map(|loc| child(loc, PathStep::Key("a".into())))
                .collect();
            proptest::prop_assert_eq!(Query::parse("$..a").unwrap().locate(&doc), named_a);
            let mut all = Query::parse("$..*").unwrap().locate(&doc);
            all.sort_by(|x, y| format!("{x:?}").cmp(&format!("{y:?}")));
            let mut every: Vec<Location> = nodes.into_iter().skip(1).collect();
            every.sort_by(|x, y| format!("{x:?}").cmp(&format!("{y:?}")));
            proptest::prop_assert_eq!(all, every);
            let top: Vec<Location> = children(&doc).into_iter().map(|(s, _)| vec![s]).collect();
            proptest::prop_assert_eq!(Query::parse("$.*").unwrap().locate(&doc), top);
        }

        /// Any text: an error or a path, never a panic, and a path's matches are all there.
        #[test]
        fn any_text_parses_or_fails_cleanly(
            text in "\\$[.\\[\\]()?@'\"*,:0-9ab<>=!&| ~-]{0,24}",
            doc in arb_doc(),
        ) {
            if let Ok(q) = Query::parse(&text) {
                for loc in q.locate(&doc) {
                    proptest::prop_assert!(value_at(&doc, &loc).is_some(), "{text}: {loc:?}");
                }
            }
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_recursed() {
        let deep = format!("$[?({}@.a{})]", "(".repeat(10_000), ")".repeat(10_000));
        assert!(Query::parse(&deep).is_err());
        let nots = format!("$[?({}@.a)]", "!".repeat(10_000));
        assert!(Query::parse(&nots).is_err());
        let nested = "$[?(@[?(@[?(@.a)])])]";
        assert!(Query::parse(nested).is_ok());
    }

    #[test]
    fn bad_paths_are_refused_with_their_offset() {
        for bad in [
            "$.",
            "$[",
            "$[1",
            "$x",
            "$['a",
            "$[::0]",
            "a",
            "$[?(@.a<)]",
            "$[?(@.a<1]",
            "$[?(@.a<1)",
            "$[?(@.a =~ 3)]",
            "$[?(@.a =~ '(')]",
            "$[?(1)]",
            "$[0,?(@.a)]",
        ] {
            let e = Query::parse(bad).unwrap_err().to_string();
            assert!(e.contains("invalid JSONPath"), "{bad}: {e}");
        }
    }
}
