//! The document model: [`Doc`] and [`DocMap`], their total order, equality and hash.
//!
//! Order across types: `Null < Bool < number < String < Array < Map`. Inside a type:
//! `false < true`; integers and decimals together by exact numeric value (see `num`); strings by
//! their UTF-8 bytes (= Unicode code point order); arrays element by element, a prefix first; maps
//! entry by entry in insertion order (key, then value), a prefix first.
//!
//! Equality is the order's: `a == b` exactly when `a.cmp(b) == Equal`, and `Hash` hashes the same
//! normalized form. Consequences, chosen on purpose:
//! - `Int(1) == Decimal("1.0")` (numbers are equal by value; the decimal still prints as `1.0`);
//! - maps are ordered: `{"a":1,"b":2} != {"b":2,"a":1}` (as in BSON/MongoDB), which keeps the
//!   order-preserving key encoding a simple element-wise one.
//!
//! A [`DocMap`] never holds two equal keys when built through its API or from JSON (`insert`
//! replaces in place); a map decoded from foreign bytes is taken as is. This module owns the model
//! and its path walking; codecs live in `codec` and `key`.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use crate::error::{Error, Result};
use crate::num::{Decimal, Num};
use crate::path::{Path, PathStep};

/// A JSON-like document value.
#[derive(Clone, Debug)]
pub enum Doc {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A whole number in the `i64` range.
    Int(i64),
    /// Any other number, kept as its exact JSON text.
    Decimal(Decimal),
    /// UTF-8 text.
    String(String),
    /// An ordered list.
    Array(Vec<Doc>),
    /// An insertion-ordered map; keys may be any document (JSON gives strings).
    Map(DocMap),
}

/// An insertion-ordered map from documents to documents.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DocMap {
    entries: Vec<(Doc, Doc)>,
}

impl DocMap {
    /// An empty map.
    pub fn new() -> Self {
        DocMap::default()
    }

    /// An empty map with room for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        DocMap {
            entries: Vec::with_capacity(n),
        }
    }

    /// Takes entries as they are, in order, without checking for duplicate keys (decoders).
    pub(crate) fn from_entries_unchecked(entries: Vec<(Doc, Doc)>) -> Self {
        DocMap { entries }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value for `key`.
    pub fn get(&self, key: &Doc) -> Option<&Doc> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The value for the string key `key`.
    pub fn get_str(&self, key: &str) -> Option<&Doc> {
        self.entries
            .iter()
            .find(|(k, _)| matches!(k, Doc::String(s) if s == key))
            .map(|(_, v)| v)
    }

    /// The value for `key`, mutable.
    pub fn get_mut(&mut self, key: &Doc) -> Option<&mut Doc> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    fn get_str_mut(&mut self, key: &str) -> Option<&mut Doc> {
        self.entries
            .iter_mut()
            .find(|(k, _)| matches!(k, Doc::String(s) if s == key))
            .map(|(_, v)| v)
    }

    /// Sets `key` to `value`: replaces in place (keeping the position) when the key exists,
    /// appends otherwise. Returns the old value.
    pub fn insert(&mut self, key: impl Into<Doc>, value: impl Into<Doc>) -> Option<Doc> {
        let key = key.into();
        let value = value.into();
        match self.get_mut(&key) {
            Some(slot) => Some(std::mem::replace(slot, value)),
            None => {
                self.entries.push((key, value));
                None
            }
        }
    }

    /// Removes `key`, keeping the order of the others. Returns its value.
    pub fn remove(&mut self, key: &Doc) -> Option<Doc> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(i).1)
    }

    /// Entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&Doc, &Doc)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Entries in insertion order, as a slice.
    pub fn entries(&self) -> &[(Doc, Doc)] {
        &self.entries
    }

    /// The entries, consuming the map.
    pub fn into_entries(self) -> Vec<(Doc, Doc)> {
        self.entries
    }
}

impl<K: Into<Doc>, V: Into<Doc>> FromIterator<(K, V)> for DocMap {
    /// Collects entries; a repeated key replaces the earlier value in place.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut m = DocMap::new();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}

impl Doc {
    /// Rank of the type in the cross-type order (numbers share one rank).
    fn rank(&self) -> u8 {
        match self {
            Doc::Null => 0,
            Doc::Bool(_) => 1,
            Doc::Int(_) | Doc::Decimal(_) => 2,
            Doc::String(_) => 3,
            Doc::Array(_) => 4,
            Doc::Map(_) => 5,
        }
    }

    /// A short name of the type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Doc::Null => "null",
            Doc::Bool(_) => "bool",
            Doc::Int(_) => "integer",
            Doc::Decimal(_) => "decimal",
            Doc::String(_) => "string",
            Doc::Array(_) => "array",
            Doc::Map(_) => "map",
        }
    }

    /// A decimal from its JSON number text (validated).
    pub fn decimal(text: &str) -> Result<Doc> {
        Ok(Doc::Decimal(Decimal::parse(text)?))
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Doc::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as `i64`: integers, and decimals that are whole and in range.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Doc::Int(v) => Some(*v),
            Doc::Decimal(d) => d.to_i64_exact(),
            _ => None,
        }
    }

    /// The map, if this is one.
    pub fn as_map(&self) -> Option<&DocMap> {
        match self {
            Doc::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&[Doc]> {
        match self {
            Doc::Array(a) => Some(a),
            _ => None,
        }
    }

    /// True when no array or map nests deeper than `depth_max` levels (a scalar has depth 0,
    /// `[]` depth 1). Recursion stops at `depth_max`, so this is safe on any document.
    pub fn depth_within(&self, depth_max: usize) -> bool {
        match self {
            Doc::Array(items) => {
                depth_max > 0 && items.iter().all(|d| d.depth_within(depth_max - 1))
            }
            Doc::Map(m) => {
                depth_max > 0
                    && m.entries.iter().all(|(k, v)| {
                        k.depth_within(depth_max - 1) && v.depth_within(depth_max - 1)
                    })
            }
            _ => true,
        }
    }

    /// The sub-document at `path` (`$` is the document itself).
    pub fn get_path(&self, path: &Path) -> Option<&Doc> {
        let mut cur = self;
        for step in path.steps() {
            cur = match (step, cur) {
                (PathStep::Key(k), Doc::Map(m)) => m.get_str(k)?,
                (PathStep::Index(i), Doc::Array(a)) => a.get(resolve_index(*i, a.len())?)?,
                _ => return None,
            };
        }
        Some(cur)
    }

    /// The sub-document at `path`, mutable.
    pub fn get_path_mut(&mut self, path: &Path) -> Option<&mut Doc> {
        let mut cur = self;
        for step in path.steps() {
            cur = match (step, cur) {
                (PathStep::Key(k), Doc::Map(m)) => m.get_str_mut(k)?,
                (PathStep::Index(i), Doc::Array(a)) => {
                    let len = a.len();
                    a.get_mut(resolve_index(*i, len)?)?
                }
                _ => return None,
            };
        }
        Some(cur)
    }

    /// Puts `value` at `path`. Missing map keys on the way are created as empty maps (the last one
    /// gets `value`); an array index must exist, or equal the length at the last step (append);
    /// negative indexes count from the end. `$` replaces the whole document.
    pub fn set_path(&mut self, path: &Path, value: Doc) -> Result<()> {
        let steps = path.steps();
        let mut cur = self;
        for (n, step) in steps.iter().enumerate() {
            let last = n + 1 == steps.len();
            cur = match (step, cur) {
                (PathStep::Key(k), Doc::Map(m)) => {
                    if m.get_str(k).is_none() {
                        m.entries
                            .push((Doc::String(k.clone()), Doc::Map(DocMap::new())));
                    }
                    match m.get_str_mut(k) {
                        Some(slot) => slot,
                        None => return Err(mismatch(path, "map key vanished".into())),
                    }
                }
                (PathStep::Index(i), Doc::Array(a)) => {
                    let len = a.len();
                    if last && usize::try_from(*i).ok() == Some(len) {
                        a.push(Doc::Null);
                    }
                    let at = resolve_index(*i, a.len()).ok_or_else(|| {
                        mismatch(path, format!("index {i} out of range for length {len}"))
                    })?;
                    match a.get_mut(at) {
                        Some(slot) => slot,
                        None => return Err(mismatch(path, format!("index {i} out of range"))),
                    }
                }
                (step, other) => {
                    return Err(mismatch(
                        path,
                        format!(
                            "{} step {step} met a {}",
                            step_kind(step),
                            other.type_name()
                        ),
                    ))
                }
            };
        }
        *cur = value;
        Ok(())
    }
}

fn step_kind(step: &PathStep) -> &'static str {
    match step {
        PathStep::Key(_) => "key",
        PathStep::Index(_) => "index",
    }
}

pub(crate) fn mismatch(path: &Path, reason: String) -> Error {
    Error::PathMismatch {
        path: path.to_string(),
        reason,
    }
}

/// Maps a possibly negative index onto `0..len`.
pub(crate) fn resolve_index(i: i64, len: usize) -> Option<usize> {
    if i >= 0 {
        let i = usize::try_from(i).ok()?;
        (i < len).then_some(i)
    } else {
        let back = usize::try_from(i.unsigned_abs()).ok()?;
        len.checked_sub(back)
    }
}

/// Compares two numbers (`Int` or `Decimal`) exactly.
fn cmp_numbers(a: &Doc, b: &Doc) -> Ordering {
    match (a, b) {
        (Doc::Int(x), Doc::Int(y)) => x.cmp(y),
        _ => {
            let (mut ba, mut bb) = ([0u8; 20], [0u8; 20]);
            number_view(a, &mut ba).cmp_num(&number_view(b, &mut bb))
        }
    }
}

fn number_view<'a>(d: &'a Doc, buf: &'a mut [u8; 20]) -> Num<'a> {
    match d {
        Doc::Int(v) => Num::from_i64(*v, buf),
        Doc::Decimal(x) => x.num(),
        _ => Num::ZERO,
    }
}

impl Ord for Doc {
    fn cmp(&self, other: &Self) -> Ordering {
        match self.rank().cmp(&other.rank()) {
            Ordering::Equal => {}
            o => return o,
        }
        match (self, other) {
            (Doc::Null, Doc::Null) => Ordering::Equal,
            (Doc::Bool(a), Doc::Bool(b)) => a.cmp(b),
            (Doc::String(a), Doc::String(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Doc::Array(a), Doc::Array(b)) => a.cmp(b),
            (Doc::Map(a), Doc::Map(b)) => a.cmp(b),
            (a, b) => cmp_numbers(a, b),
        }
    }
}

impl PartialOrd for Doc {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Doc {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Doc {}

impl Hash for Doc {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.rank().hash(state);
        match self {
            Doc::Null => {}
            Doc::Bool(b) => b.hash(state),
            Doc::Int(_) | Doc::Decimal(_) => {
                let mut buf = [0u8; 20];
                number_view(self, &mut buf).hash_num(state);
            }
            Doc::String(s) => s.hash(state),
            Doc::Array(a) => a.hash(state),
            Doc::Map(m) => m.hash(state),
        }
    }
}

impl fmt::Display for Doc {
    /// JSON text; a map key that is not a string is written as its own JSON (not valid JSON then;
    /// use [`crate::to_json_string`] to get an error instead).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        crate::json::write_json(self, &mut out, false).map_err(|_| fmt::Error)?;
        f.write_str(&out)
    }
}

impl From<bool> for Doc {
    fn from(v: bool) -> Self {
        Doc::Bool(v)
    }
}
impl From<i64> for Doc {
    fn from(v: i64) -> Self {
        Doc::Int(v)
    }
}
impl From<i32> for Doc {
    fn from(v: i32) -> Self {
        Doc::Int(i64::from(v))
    }
}
impl From<&str> for Doc {
    fn from(v: &str) -> Self {
        Doc::String(v.to_string())
    }
}
impl From<String> for Doc {
    fn from(v: String) -> Self {
        Doc::String(v)
    }
}
impl From<Decimal> for Doc {
    fn from(v: Decimal) -> Self {
        Doc::Decimal(v)
    }
}
impl From<Vec<Doc>> for Doc {
    fn from(v: Vec<Doc>) -> Self {
        Doc::Array(v)
    }
}
impl From<DocMap> for Doc {
    fn from(v: DocMap) -> Self {
        Doc::Map(v)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Doc {
        Doc::decimal(s).unwrap()
    }

    fn map(entries: &[(&str, Doc)]) -> Doc {
        Doc::Map(entries.iter().map(|(k, v)| (*k, v.clone())).collect())
    }

    #[test]
    fn order_across_types_follows_rank() {
        let ladder = [
            Doc::Null,
            Doc::Bool(false),
            Doc::Bool(true),
            Doc::Int(i64::MIN),
            dec("-1.5"),
            Doc::Int(0),
            dec("0.5"),
            Doc::Int(1),
            dec("1e300"),
            Doc::from(""),
            Doc::from("a"),
            Doc::from("b"),
            Doc::Array(vec![]),
            Doc::Array(vec![Doc::Null]),
            Doc::Array(vec![Doc::Int(1)]),
            Doc::Map(DocMap::new()),
            map(&[("a", Doc::Int(1))]),
        ];
        for (i, a) in ladder.iter().enumerate() {
            for (j, b) in ladder.iter().enumerate() {
                assert_eq!(a.cmp(b), i.cmp(&j), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn int_and_decimal_equal_by_value_and_hash() {
        use std::collections::hash_map::DefaultHasher;
        let h = |d: &Doc| {
            let mut s = DefaultHasher::new();
            d.hash(&mut s);
            s.finish()
        };
        assert_eq!(Doc::Int(1), dec("1.0"));
        assert_eq!(h(&Doc::Int(1)), h(&dec("1.0")));
        assert_eq!(Doc::Int(-120), dec("-1.2e2"));
        assert_eq!(h(&Doc::Int(-120)), h(&dec("-1.2e2")));
        assert_ne!(Doc::Int(1), dec("1.0000000000000000000001"));
    }

    #[test]
    fn maps_compare_entry_by_entry_not_by_size() {
        // The original document store compared maps by size only: these two were equal there.
        assert_ne!(map(&[("a", Doc::Int(1))]), map(&[("a", Doc::Int(2))]));
        assert!(map(&[("a", Doc::Int(1))]) < map(&[("a", Doc::Int(2))]));
        assert!(map(&[("a", Doc::Int(9))]) < map(&[("b", Doc::Int(0))]));
        // A prefix comes first, whatever the sizes.
        assert!(map(&[("a", Doc::Int(1))]) < map(&[("a", Doc::Int(1)), ("a2", Doc::Null)]));
        assert!(map(&[("b", Doc::Null)]) > map(&[("a", Doc::Int(1)), ("z", Doc::Null)]));
        // Ordered maps: entry order is part of the value.
        assert_ne!(
            map(&[("a", Doc::Int(1)), ("b", Doc::Int(2))]),
            map(&[("b", Doc::Int(2)), ("a", Doc::Int(1))])
        );
    }

    #[test]
    fn insert_replaces_in_place() {
        let mut m = DocMap::new();
        m.insert("a", 1);
        m.insert("b", 2);
        assert_eq!(m.insert("a", 3), Some(Doc::Int(1)));
        let keys: Vec<_> = m.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(keys, vec![Doc::from("a"), Doc::from("b")]);
        assert_eq!(m.get_str("a"), Some(&Doc::Int(3)));
    }

    #[test]
    fn set_path_creates_maps_and_appends() {
        let mut d = map(&[("arr", Doc::Array(vec![Doc::Int(1)]))]);
        d.set_path(&Path::parse("$.x.y").unwrap(), Doc::Int(5))
            .unwrap();
        d.set_path(&Path::parse("$.arr[1]").unwrap(), Doc::Int(2))
            .unwrap();
        d.set_path(&Path::parse("$.arr[-2]").unwrap(), Doc::Int(0))
            .unwrap();
        assert_eq!(d.to_string(), r#"{"arr":[0,2],"x":{"y":5}}"#);
        assert!(d
            .set_path(&Path::parse("$.arr[5]").unwrap(), Doc::Null)
            .is_err());
        assert!(d
            .set_path(&Path::parse("$.arr.k").unwrap(), Doc::Null)
            .is_err());
        d.set_path(&Path::root(), Doc::Null).unwrap();
        assert_eq!(d, Doc::Null);
    }

    #[test]
    fn depth_within_counts_containers() {
        assert!(Doc::Int(1).depth_within(0));
        assert!(!Doc::Array(vec![]).depth_within(0));
        assert!(Doc::Array(vec![Doc::Array(vec![])]).depth_within(2));
        assert!(!Doc::Array(vec![Doc::Array(vec![])]).depth_within(1));
    }
}
