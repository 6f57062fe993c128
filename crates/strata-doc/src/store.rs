//! [`DocStore`]: documents keyed by documents, over a `strata::Db`.
//!
//! Engine key = [`DOC_KEY_PREFIX`] (`0xFF 'D'`) followed by the order-preserving key encoding
//! (`key` module), so engine key order is document order and a range scan over documents is one
//! engine range scan. The prefix keeps documents apart from raw key/value entries in the same
//! database: no UTF-8 text key can start with 0xFF, and raw binary keys should avoid `0xFF 'D'`.
//! Engine value = the stored form of the `codec` module (format-version byte, then the encoded
//! document, whose repeated map keys are references into the store's key names, kept under
//! [`NAMES_KEY`](crate::NAMES_KEY): see the `names` module).
//!
//! Read-modify-write operations ([`DocStore::update`], [`DocStore::increment`],
//! [`DocStore::set_path`]) run inside `Db::update`, i.e. under the key's partition write lock, so
//! concurrent increments are never lost (the original document store's update benchmark did GET
//! then PUT, and concurrent updates of one document lost some). This module may call the codecs,
//! the model and the engine; nothing calls back into it except `load`.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use strata::{Db, Options, Update};

use crate::codec::{decode_stored, decode_stored_in, encode_stored};
use crate::doc::{mismatch, Doc};
use crate::error::{Error, Result};
use crate::key::{decode_key, encode_key_into};
use crate::names::{KeyNames, NameStorage, RecordUpdate, NAMES_KEY};
use crate::path::{get_path_stored, Path};

/// First bytes of every engine key that holds a document.
pub const DOC_KEY_PREFIX: [u8; 2] = [0xff, b'D'];

/// What a [`DocStore::update`] closure decides.
#[derive(Clone, Debug, PartialEq)]
pub enum DocUpdate {
    /// Leave the document as it is.
    Keep,
    /// Store this document.
    Put(Doc),
    /// Delete the document.
    Delete,
}

/// A document store over a shared engine handle. `Send + Sync`; clone the `Arc<Db>` to share.
pub struct DocStore {
    db: Arc<Db>,
    names: Arc<KeyNames>,
}

/// The engine as the keeper of the name record.
struct DbNames(Arc<Db>);

impl NameStorage for DbNames {
    fn read(&self) -> Result<Option<Vec<u8>>> {
        Ok(self.0.get(&NAMES_KEY)?.map(|b| b.to_vec()))
    }

    fn update(&self, f: &mut RecordUpdate<'_>) -> Result<()> {
        let outcome: Result<()> = self.0.update(&NAMES_KEY, |old| {
            Ok(match f(old) {
                Ok(Some(new)) => (Update::Put(new), Ok(())),
                Ok(None) => (Update::Keep, Ok(())),
                Err(e) => (Update::Keep, Err(e)),
            })
        })?;
        outcome
    }

    fn sync(&self) -> Result<()> {
        Ok(self.0.sync()?)
    }
}

impl DocStore {
    /// Opens (or creates) the database in `path`.
    pub fn open(path: impl AsRef<std::path::Path>, options: Options) -> Result<Self> {
        DocStore::new(Arc::new(Db::open(path, options)?))
    }

    /// Uses an already open database (which may also hold raw key/value entries); reads its key
    /// names.
    pub fn new(db: Arc<Db>) -> Result<Self> {
        let names = Arc::new(KeyNames::open(Arc::new(DbNames(Arc::clone(&db))))?);
        Ok(DocStore { db, names })
    }

    /// The engine handle.
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    /// The store's key names (what [`encode_stored`] and [`decode_stored`] need for this store's
    /// documents).
    pub fn names(&self) -> &Arc<KeyNames> {
        &self.names
    }

    /// The engine key for document key `key`: [`DOC_KEY_PREFIX`] + order-preserving encoding.
    pub fn engine_key(key: &Doc) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(DOC_KEY_PREFIX.len() + 16);
        out.extend_from_slice(&DOC_KEY_PREFIX);
        encode_key_into(key, &mut out)?;
        Ok(out)
    }

    /// The document key of an engine key produced by [`DocStore::engine_key`].
    pub fn doc_key(engine_key: &[u8]) -> Result<Doc> {
        match engine_key.strip_prefix(&DOC_KEY_PREFIX[..]) {
            Some(rest) => decode_key(rest),
            None => Err(Error::KeyDecode {
                offset: 0,
                reason: "engine key lacks the document prefix",
            }),
        }
    }

    /// Stores `value` under `key` (replacing any previous document).
    pub fn put(&self, key: &Doc, value: &Doc) -> Result<()> {
        self.names.intern_pending()?;
        let k = Self::engine_key(key)?;
        let v = encode_stored(value, &self.names)?;
        self.db.put(&k, &v)?;
        Ok(())
    }

    /// Stores several documents with one engine write batch (atomic per partition).
    pub fn put_many<'a>(&self, docs: impl IntoIterator<Item = (&'a Doc, &'a Doc)>) -> Result<()> {
        self.names.intern_pending()?;
        let mut batch = strata::WriteBatch::new();
        for (key, value) in docs {
            batch.put(Self::engine_key(key)?, encode_stored(value, &self.names)?);
        }
        if !batch.is_empty() {
            self.db.write(batch)?;
        }
        Ok(())
    }

    /// The document under `key`.
    pub fn get(&self, key: &Doc) -> Result<Option<Doc>> {
        match self.db.get(&Self::engine_key(key)?)? {
            Some(bytes) => Ok(Some(decode_stored(&bytes, &self.names)?)),
            None => Ok(None),
        }
    }

    /// The stored bytes (version byte + encoded document) under `key`, undecoded.
    pub fn get_stored(&self, key: &Doc) -> Result<Option<strata::Bytes>> {
        Ok(self.db.get(&Self::engine_key(key)?)?)
    }

    /// Deletes the document under `key` (absent is fine).
    pub fn delete(&self, key: &Doc) -> Result<()> {
        self.db.delete(&Self::engine_key(key)?)?;
        Ok(())
    }

    /// The part of the document under `key` at `path`, found by walking the stored bytes without
    /// decoding the rest. `None` when there is no document or the path leads nowhere.
    pub fn get_path(&self, key: &Doc, path: &Path) -> Result<Option<Doc>> {
        match self.db.get(&Self::engine_key(key)?)? {
            Some(bytes) => get_path_stored(&bytes, path, &self.names),
            None => Ok(None),
        }
    }

    /// Documents with keys in `range`, in document order of their keys.
    pub fn scan<R: RangeBounds<Doc>>(&self, range: R) -> DocScan {
        let bounds = (|| -> Result<EngineRange> {
            let lower = match range.start_bound() {
                Bound::Included(d) => Bound::Included(Self::engine_key(d)?),
                Bound::Excluded(d) => Bound::Excluded(Self::engine_key(d)?),
                Bound::Unbounded => Bound::Included(DOC_KEY_PREFIX.to_vec()),
            };
            let upper = match range.end_bound() {
                Bound::Included(d) => Bound::Included(Self::engine_key(d)?),
                Bound::Excluded(d) => Bound::Excluded(Self::engine_key(d)?),
                Bound::Unbounded => Bound::Excluded(prefix_end()),
            };
            Ok((lower, upper))
        })();
        match bounds {
            Ok(b) => DocScan {
                inner: Some(self.db.scan::<Vec<u8>, _>(b)),
                names: Arc::clone(&self.names),
                error: None,
            },
            Err(e) => DocScan {
                inner: None,
                names: Arc::clone(&self.names),
                error: Some(e),
            },
        }
    }

    /// Atomic read-modify-write of the document under `key`: `f` sees the current document and
    /// decides, while no other write can touch the key. Whatever `f` returns besides the decision
    /// is handed back. An error from `f` leaves the document unchanged.
    pub fn update<T>(
        &self,
        key: &Doc,
        f: impl FnOnce(Option<Doc>) -> Result<(DocUpdate, T)>,
    ) -> Result<T> {
        self.names.intern_pending()?;
        let k = Self::engine_key(key)?;
        // `f` runs once; it is taken out of here on the first attempt that decodes the document.
        let mut f = Some(f);
        for attempt in 0..2 {
            let table = self.names.table();
            let outcome: Result<T> = self.db.update(&k, |old| {
                // The engine holds the partition's write lock here: the name record cannot be
                // read, so a document naming an id past our table ends this attempt (below).
                let old = match old.map(|b| decode_stored_in(b, &table)).transpose() {
                    Ok(old) => old,
                    Err(e) => return Ok((Update::Keep, Err(e))),
                };
                let Some(f) = f.take() else {
                    return Ok((
                        Update::Keep,
                        Err(Error::InvalidArgument("update ran twice".into())),
                    ));
                };
                let step = || -> Result<(Update, T)> {
                    let (decision, out) = f(old)?;
                    let decision = match decision {
                        DocUpdate::Keep => Update::Keep,
                        DocUpdate::Put(d) => Update::Put(encode_stored(&d, &self.names)?),
                        DocUpdate::Delete => Update::Delete,
                    };
                    Ok((decision, out))
                };
                // Our errors travel inside the closure's result so the engine sees a clean "keep".
                Ok(match step() {
                    Ok((decision, out)) => (decision, Ok(out)),
                    Err(e) => (Update::Keep, Err(e)),
                })
            })?;
            match outcome {
                Err(Error::UnknownName { .. }) if attempt == 0 && f.is_some() => {
                    self.names.refresh()?;
                }
                other => return other,
            }
        }
        Err(Error::InvalidArgument(
            "update could not read the key names".into(),
        ))
    }

    /// Atomically adds `delta` to the integer at `path` of the document under `key` and returns
    /// the new value. A missing field counts as 0 (and is created, with any missing maps on the
    /// way); a non-integer field, a missing document or i64 overflow is an error.
    pub fn increment(&self, key: &Doc, path: &Path, delta: i64) -> Result<i64> {
        self.update(key, |old| {
            let mut doc = old.ok_or_else(|| Error::NotFound {
                key: key.to_string(),
            })?;
            let new = match doc.get_path_mut(path) {
                Some(Doc::Int(current)) => {
                    let new = current.checked_add(delta).ok_or(Error::Overflow {
                        path: path.to_string(),
                        current: *current,
                        delta,
                    })?;
                    *current = new;
                    new
                }
                Some(other) => {
                    return Err(mismatch(
                        path,
                        format!("holds a {}, not an integer", other.type_name()),
                    ))
                }
                None => {
                    doc.set_path(path, Doc::Int(delta))?;
                    delta
                }
            };
            Ok((DocUpdate::Put(doc), new))
        })
    }

    /// Atomically sets the value at `path` of the document under `key` (see [`Doc::set_path`];
    /// `$` replaces the document). A missing document is an error.
    pub fn set_path(&self, key: &Doc, path: &Path, value: Doc) -> Result<()> {
        self.update(key, |old| {
            let mut doc = old.ok_or_else(|| Error::NotFound {
                key: key.to_string(),
            })?;
            doc.set_path(path, value)?;
            Ok((DocUpdate::Put(doc), ()))
        })
    }

    /// Closes the database if this store holds the last handle to it (otherwise just drops ours).
    pub fn close(self) -> Result<()> {
        match Arc::try_unwrap(self.db) {
            Ok(db) => Ok(db.close()?),
            Err(_) => Ok(()),
        }
    }
}

/// Lower and upper bound of an engine key range.
type EngineRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// The first engine key after every key starting with [`DOC_KEY_PREFIX`].
fn prefix_end() -> Vec<u8> {
    let [a, b] = DOC_KEY_PREFIX;
    vec![a, b.wrapping_add(1)]
}

/// Iterator over `(key, document)` pairs of a [`DocStore::scan`], in key document order. Yields
/// `Err` once and stops when something is damaged.
pub struct DocScan {
    inner: Option<strata::Scan>,
    names: Arc<KeyNames>,
    error: Option<Error>,
}

impl Iterator for DocScan {
    type Item = Result<(Doc, Doc)>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.error.take() {
            self.inner = None;
            return Some(Err(e));
        }
        let (k, v) = match self.inner.as_mut()?.next()? {
            Ok(kv) => kv,
            Err(e) => {
                self.inner = None;
                return Some(Err(e.into()));
            }
        };
        let item = DocStore::doc_key(&k).and_then(|key| Ok((key, decode_stored(&v, &self.names)?)));
        if item.is_err() {
            self.inner = None;
        }
        Some(item)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, DocStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = DocStore::open(dir.path(), Options::tiny()).unwrap();
        (dir, s)
    }

    fn j(text: &str) -> Doc {
        Doc::from_json(text).unwrap()
    }

    #[test]
    fn put_get_delete() {
        let (_dir, s) = store();
        let key = Doc::from("evn2i5p");
        let doc = j(r#"{"id":"evn2i5p","score":109,"r":99.34901097702962}"#);
        assert_eq!(s.get(&key).unwrap(), None);
        s.put(&key, &doc).unwrap();
        let got = s.get(&key).unwrap().unwrap();
        assert_eq!(got.to_json().unwrap(), doc.to_json().unwrap());
        s.delete(&key).unwrap();
        assert_eq!(s.get(&key).unwrap(), None);
        s.close().unwrap();
    }

    #[test]
    fn numerically_equal_keys_are_the_same_key() {
        let (_dir, s) = store();
        s.put(&Doc::Int(1), &Doc::from("int")).unwrap();
        s.put(&Doc::decimal("1.0").unwrap(), &Doc::from("decimal"))
            .unwrap();
        assert_eq!(s.get(&Doc::Int(1)).unwrap(), Some(Doc::from("decimal")));
    }

    #[test]
    fn documents_coexist_with_raw_keys() {
        let (_dir, s) = store();
        s.db().put(b"a", b"raw").unwrap();
        s.db().put(b"\xff", b"raw").unwrap();
        s.db().put(b"\xffE", b"raw").unwrap();
        s.put(&Doc::from("a"), &Doc::Int(1)).unwrap();
        let all: Vec<_> = s.scan(..).collect::<Result<_>>().unwrap();
        assert_eq!(all, vec![(Doc::from("a"), Doc::Int(1))]);
        assert_eq!(s.db().get(b"a").unwrap().as_deref(), Some(&b"raw"[..]));
    }

    #[test]
    fn scan_returns_documents_in_key_order_across_types() {
        let (_dir, s) = store();
        let keys = [
            j("null"),
            j("false"),
            j("-5"),
            j("-0.5"),
            j("0"),
            j("2"),
            j("2.5"),
            j("10"),
            j(r#""""#),
            j(r#""a""#),
            j(r#""b""#),
            j("[]"),
            j("[1]"),
            j("{}"),
            j(r#"{"a":1}"#),
        ];
        // Insert in a scrambled order.
        for (i, k) in keys.iter().enumerate().rev().filter(|(i, _)| i % 2 == 0) {
            s.put(k, &Doc::Int(i as i64)).unwrap();
        }
        for (i, k) in keys.iter().enumerate().filter(|(i, _)| i % 2 == 1) {
            s.put(k, &Doc::Int(i as i64)).unwrap();
        }
        let got: Vec<_> = s.scan(..).map(|kv| kv.unwrap().0).collect();
        assert_eq!(got, keys);
        let mid: Vec<_> = s
            .scan(Doc::Int(0)..Doc::from("b"))
            .map(|kv| kv.unwrap().1)
            .collect();
        assert_eq!(mid, (4..10).map(Doc::Int).collect::<Vec<_>>());
        let excl: Vec<_> = s
            .scan((
                Bound::Excluded(Doc::Int(10)),
                Bound::Included(Doc::from("b")),
            ))
            .map(|kv| kv.unwrap().1)
            .collect();
        assert_eq!(excl, (8..11).map(Doc::Int).collect::<Vec<_>>());
    }

    #[test]
    fn get_path_walks_stored_bytes() {
        let (_dir, s) = store();
        let key = Doc::from("k");
        s.put(&key, &j(r#"{"a":{"b":[1,2,{"c":"x"}]},"score":7}"#))
            .unwrap();
        let p = |t: &str| Path::parse(t).unwrap();
        assert_eq!(s.get_path(&key, &p("$.score")).unwrap(), Some(Doc::Int(7)));
        assert_eq!(
            s.get_path(&key, &p("$.a.b[2].c")).unwrap(),
            Some(Doc::from("x"))
        );
        assert_eq!(s.get_path(&key, &p("$.nope")).unwrap(), None);
        assert_eq!(s.get_path(&Doc::from("other"), &p("$")).unwrap(), None);
    }

    #[test]
    fn increment_and_set_path() {
        let (_dir, s) = store();
        let key = Doc::from("k");
        let p = |t: &str| Path::parse(t).unwrap();
        assert!(matches!(
            s.increment(&key, &p("$.score"), 1),
            Err(Error::NotFound { .. })
        ));
        s.put(&key, &j(r#"{"score":109,"name":"x"}"#)).unwrap();
        assert_eq!(s.increment(&key, &p("$.score"), 1).unwrap(), 110);
        assert_eq!(s.increment(&key, &p("$.score"), -10).unwrap(), 100);
        assert_eq!(s.increment(&key, &p("$.stats.views"), 5).unwrap(), 5);
        assert!(matches!(
            s.increment(&key, &p("$.name"), 1),
            Err(Error::PathMismatch { .. })
        ));
        s.set_path(&key, &p("$.score"), Doc::Int(i64::MAX)).unwrap();
        assert!(matches!(
            s.increment(&key, &p("$.score"), 1),
            Err(Error::Overflow { .. })
        ));
        s.set_path(&key, &p("$.name"), Doc::from("y")).unwrap();
        assert_eq!(
            s.get(&key).unwrap().unwrap().to_json().unwrap(),
            r#"{"score":9223372036854775807,"name":"y","stats":{"views":5}}"#
        );
    }

    #[test]
    fn concurrent_increments_are_not_lost() {
        let (_dir, s) = store();
        let s = Arc::new(s);
        let keys: Vec<Doc> = (0..3).map(|i| Doc::from(format!("key{i}"))).collect();
        for k in &keys {
            s.put(
                k,
                &j(r#"{"score":0,"body":"some text to make the value bigger"}"#),
            )
            .unwrap();
        }
        let threads_n = 8;
        let increments_per_thread = 1000;
        let path = Path::parse("$.score").unwrap();
        std::thread::scope(|scope| {
            for t in 0..threads_n {
                let (s, keys, path) = (&s, &keys, &path);
                scope.spawn(move || {
                    for i in 0..increments_per_thread {
                        let k = &keys[(t + i) % keys.len()];
                        s.increment(k, path, 1).unwrap();
                    }
                });
            }
        });
        let total: i64 = keys
            .iter()
            .map(|k| s.get_path(k, &path).unwrap().unwrap().as_i64().unwrap())
            .sum();
        assert_eq!(total, (threads_n * increments_per_thread) as i64);
        // Each key got exactly the increments aimed at it.
        for (ki, k) in keys.iter().enumerate() {
            let expected = (0..threads_n)
                .flat_map(|t| (0..increments_per_thread).map(move |i| (t + i) % 3))
                .filter(|&x| x == ki)
                .count() as i64;
            assert_eq!(s.get_path(k, &path).unwrap(), Some(Doc::Int(expected)));
        }
    }

    #[test]
    fn repeated_field_names_are_stored_once_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let doc = |i: i64| {
            j(&format!(
                r#"{{"identifier":{i},"author_flair_text":null,"subreddit_name_prefixed":"r/x","nested":{{"identifier":"n{i}"}}}}"#
            ))
        };
        {
            let s = DocStore::open(dir.path(), Options::tiny()).unwrap();
            for i in 0..50 {
                s.put(&Doc::Int(i), &doc(i)).unwrap();
            }
            let t = s.names().table();
            for name in [
                "identifier",
                "author_flair_text",
                "subreddit_name_prefixed",
                "nested",
            ] {
                assert!(t.id(name).is_some(), "{name} has no id");
            }
            // The first document was written with its names inline, the last with references.
            let first = s.get_stored(&Doc::Int(0)).unwrap().unwrap();
            let last = s.get_stored(&Doc::Int(49)).unwrap().unwrap();
            let names_len = "identifier".len() * 2
                + "author_flair_text".len()
                + "subreddit_name_prefixed".len()
                + "nested".len();
            assert!(
                last.len() + names_len <= first.len() + 5,
                "first {} bytes, last {} bytes",
                first.len(),
                last.len()
            );
            s.close().unwrap();
        }
        let s = DocStore::open(dir.path(), Options::tiny()).unwrap();
        for i in 0..50 {
            assert_eq!(s.get(&Doc::Int(i)).unwrap(), Some(doc(i)));
        }
        let p = Path::parse("$.nested.identifier").unwrap();
        assert_eq!(s.get_path(&Doc::Int(7), &p).unwrap(), Some(Doc::from("n7")));
        let all: Vec<_> = s.scan(..).map(|kv| kv.unwrap().1).collect();
        assert_eq!(all, (0..50).map(doc).collect::<Vec<_>>());
    }

    #[test]
    fn two_handles_on_one_engine_share_names() {
        let (_dir, a) = store();
        let b = DocStore::new(Arc::clone(a.db())).unwrap();
        // `a` gives ids to names `b` has not seen.
        for i in 0..3 {
            a.put(&Doc::Int(i), &j(r#"{"alpha":1,"beta":{"gamma":2}}"#))
                .unwrap();
        }
        assert!(a.names().table().id("alpha").is_some());
        assert!(b.names().table().id("alpha").is_none());
        // `b` reads, walks, scans and updates them all the same.
        assert_eq!(
            b.get(&Doc::Int(2)).unwrap(),
            Some(j(r#"{"alpha":1,"beta":{"gamma":2}}"#))
        );
        let gamma = Path::parse("$.beta.gamma").unwrap();
        assert_eq!(b.increment(&Doc::Int(2), &gamma, 5).unwrap(), 7);
        assert_eq!(a.get_path(&Doc::Int(2), &gamma).unwrap(), Some(Doc::Int(7)));
        // Names `b` then adds get ids after `a`'s, never the same ones.
        for i in 10..13 {
            b.put(&Doc::Int(i), &j(r#"{"delta":1,"alpha":2}"#)).unwrap();
        }
        let (ta, tb) = (a.names().table(), b.names().table());
        assert!(tb.id("delta").is_some());
        assert!(tb.len() > ta.len());
        for (id, name) in ta.names().enumerate() {
            assert_eq!(tb.name(id as u64), Some(name));
        }
        assert_eq!(
            a.get(&Doc::Int(12)).unwrap(),
            Some(j(r#"{"delta":1,"alpha":2}"#))
        );
    }

    #[test]
    fn survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = DocStore::open(dir.path(), Options::tiny()).unwrap();
            for i in 0..500 {
                s.put(
                    &Doc::Int(i),
                    &j(&format!(r#"{{"i":{i},"pad":"{}"}}"#, "x".repeat(100))),
                )
                .unwrap();
            }
            s.close().unwrap();
        }
        let s = DocStore::open(dir.path(), Options::tiny()).unwrap();
        let got: Vec<_> = s.scan(..).map(|kv| kv.unwrap().0).collect();
        assert_eq!(got, (0..500).map(Doc::Int).collect::<Vec<_>>());
    }
}
