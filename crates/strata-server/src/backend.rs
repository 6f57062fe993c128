//! The storage the commands run on, as a small object-safe trait. [`KvBackend`] is implemented
//! for the engine ([`strata::Db`]) and for [`MemoryBackend`], a `BTreeMap` used by unit tests and
//! by anyone embedding the server without a disk. Commands see only this trait, so the protocol
//! and command semantics are tested independently of the engine.
//!
//! Every method may block (the engine may fsync or stall writers); callers run them off the async
//! reactor (see `conn.rs`).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;

use crate::error::Result;

/// What an atomic read-modify-write decides to do with the key it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Leave the key as it is.
    Keep,
    /// Store this value.
    Put(Vec<u8>),
    /// Remove the key.
    Delete,
}

/// One operation of an atomic batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOp {
    /// Store a value.
    Put(Vec<u8>, Vec<u8>),
    /// Remove a key.
    Delete(Vec<u8>),
}

/// A callback of [`KvBackend::update`]: sees the current value, decides the write. Returning an
/// error aborts the update without writing.
pub type UpdateFn<'a> = dyn FnMut(Option<&[u8]>) -> Result<Write> + 'a;

/// How [`KvBackend::update_group`]'s callback reads keys of the group (the newest state).
pub type GroupRead<'a> = dyn Fn(&[u8]) -> Result<Option<Bytes>> + 'a;

/// A callback of [`KvBackend::update_group`]: reads what it needs, returns the writes.
/// Returning an error aborts without writing.
pub type GroupFn<'a> = dyn FnMut(&GroupRead<'_>) -> Result<Vec<BatchOp>> + 'a;

/// A callback of [`KvBackend::scan`]: sees one entry in key order; returns `false` to stop.
pub type VisitFn<'a> = dyn FnMut(&[u8], &[u8]) -> bool + 'a;

/// The key/value operations the server needs.
pub trait KvBackend: Send + Sync {
    /// The value of `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>>;
    /// Stores `value` under `key`.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Removes `key` (absent keys are fine).
    fn delete(&self, key: &[u8]) -> Result<()>;
    /// Applies puts and deletes together (atomic per engine partition).
    fn write(&self, ops: Vec<BatchOp>) -> Result<()>;
    /// Reads `key` and writes what `f` decides, with no other write to `key` in between.
    fn update(&self, key: &[u8], f: &mut UpdateFn<'_>) -> Result<()>;
    /// Reads keys of one routing group (`route`'s partition: a Redis key's record and its
    /// elements, see `collection.rs`) and writes what `f` decides, atomically, with no other
    /// write to that partition in between.
    fn update_group(&self, route: &[u8], f: &mut GroupFn<'_>) -> Result<()>;
    /// The values of `keys`, read at one point in time where the backend can (an engine
    /// snapshot), so a batch written meanwhile is seen whole or not at all.
    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Bytes>>> {
        keys.iter().map(|k| self.get(k)).collect()
    }
    /// Visits the entries in `[start, end)` bounds in key order until `visit` returns false.
    fn scan(
        &self,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()>;
    /// [`KvBackend::scan`] of a range whose keys all route with `route` (a collection's
    /// elements, `collection.rs`): the engine reads only that key's partition.
    fn scan_group(
        &self,
        _route: &[u8],
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        self.scan(start, end, visit)
    }
    /// Makes everything written so far durable in table files (SAVE).
    fn flush(&self) -> Result<()>;
    /// Forces the write-ahead logs to stable storage.
    fn sync(&self) -> Result<()>;
    /// Whether a write now would wait (for an fsync, or for background work that is behind):
    /// then the connection hands its writes to the blocking pool.
    fn writes_would_wait(&self) -> bool;
    /// `name: value` statistics for INFO.
    fn stats_lines(&self) -> Vec<(String, String)>;
}

impl KvBackend for strata::Db {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        Ok(strata::Db::get(self, key)?)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        Ok(strata::Db::put(self, key, value)?)
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        Ok(strata::Db::delete(self, key)?)
    }

    fn write(&self, ops: Vec<BatchOp>) -> Result<()> {
        let mut batch = strata::WriteBatch::new();
        for op in ops {
            match op {
                BatchOp::Put(k, v) => batch.put(k, v),
                BatchOp::Delete(k) => batch.delete(k),
            };
        }
        Ok(strata::Db::write(self, batch)?)
    }

    fn update(&self, key: &[u8], f: &mut UpdateFn<'_>) -> Result<()> {
        // The engine's callback returns engine errors; a command's own error (e.g. "not an
        // integer") is carried out beside it and the engine is told to keep the key.
        let mut failure = None;
        strata::Db::update(self, key, |old| {
            let write = match f(old) {
                Ok(w) => w,
                Err(e) => {
                    failure = Some(e);
                    Write::Keep
                }
            };
            let update = match write {
                Write::Keep => strata::Update::Keep,
                Write::Put(v) => strata::Update::Put(v),
                Write::Delete => strata::Update::Delete,
            };
            Ok((update, ()))
        })?;
        failure.map_or(Ok(()), Err)
    }

    fn update_group(&self, route: &[u8], f: &mut GroupFn<'_>) -> Result<()> {
        // As in `update`: the command's own error travels beside the engine's callback.
        let mut failure = None;
        strata::Db::update_group(self, route, |read| {
            let ops = f(&|k: &[u8]| read(k).map_err(crate::error::Error::Engine));
            let mut batch = strata::WriteBatch::new();
            match ops {
                Ok(ops) => {
                    for op in ops {
                        match op {
                            BatchOp::Put(k, v) => batch.put(k, v),
                            BatchOp::Delete(k) => batch.delete(k),
                        };
                    }
                }
                Err(e) => failure = Some(e),
            }
            Ok((batch, ()))
        })?;
        failure.map_or(Ok(()), Err)
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Bytes>>> {
        if keys.len() > 1 {
            // The log engine keeps one version per key and has no snapshots: it reads key by
            // key (documented in RELIABILITY.md).
            if let Ok(snapshot) = self.snapshot() {
                return keys.iter().map(|k| Ok(snapshot.get(k)?)).collect();
            }
        }
        keys.iter().map(|k| KvBackend::get(self, k)).collect()
    }

    fn scan(
        &self,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        visit_scan(strata::Db::scan(self, (start, end)), visit)
    }

    fn scan_group(
        &self,
        route: &[u8],
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        visit_scan(strata::Db::scan_routed(self, route, (start, end)), visit)
    }

    fn flush(&self) -> Result<()> {
        Ok(strata::Db::flush(self)?)
    }

    fn sync(&self) -> Result<()> {
        Ok(strata::Db::sync(self)?)
    }

    fn writes_would_wait(&self) -> bool {
        strata::Db::writes_would_wait(self)
    }

    fn stats_lines(&self) -> Vec<(String, String)> {
        self.stats().lines()
    }
}

/// An in-memory backend: a sorted map behind one lock. Nothing is durable.
#[derive(Debug, Default)]
pub struct MemoryBackend {
    map: Mutex<BTreeMap<Vec<u8>, Bytes>>,
}

impl MemoryBackend {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<Vec<u8>, Bytes>> {
        // A panic while holding the lock cannot leave the map half-modified (every mutation is a
        // single insert or remove), so a poisoned lock is safe to keep using.
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl KvBackend for MemoryBackend {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        Ok(self.map().get(key).cloned())
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.map()
            .insert(key.to_vec(), Bytes::copy_from_slice(value));
        Ok(())
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.map().remove(key);
        Ok(())
    }

    fn write(&self, ops: Vec<BatchOp>) -> Result<()> {
        apply_ops(&mut self.map(), ops);
        Ok(())
    }

    fn update(&self, key: &[u8], f: &mut UpdateFn<'_>) -> Result<()> {
        let mut map = self.map();
        match f(map.get(key).map(|v| &v[..]))? {
            Write::Keep => {}
            Write::Put(v) => {
                map.insert(key.to_vec(), Bytes::from(v));
            }
            Write::Delete => {
                map.remove(key);
            }
        }
        Ok(())
    }

    fn update_group(&self, _route: &[u8], f: &mut GroupFn<'_>) -> Result<()> {
        let mut map = self.map();
        let ops = {
            let snapshot = &*map;
            f(&|k: &[u8]| Ok(snapshot.get(k).cloned()))?
        };
        apply_ops(&mut map, ops);
        Ok(())
    }

    fn scan(
        &self,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        // BTreeMap::range panics on an inverted or doubly-excluded-equal range; such a range is
        // simply empty here.
        let inverted = match (&start, &end) {
            (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => {
                s > e
                    || (s == e
                        && !matches!((&start, &end), (Bound::Included(_), Bound::Included(_))))
            }
            _ => false,
        };
        if inverted {
            return Ok(());
        }
        // Copy out the entries first so `visit` never runs under the lock.
        let entries: Vec<(Bytes, Bytes)> = self
            .map()
            .range((start, end))
            .map(|(k, v)| (Bytes::copy_from_slice(k), v.clone()))
            .collect();
        for (k, v) in entries {
            if !visit(&k, &v) {
                break;
            }
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn writes_would_wait(&self) -> bool {
        false
    }

    fn stats_lines(&self) -> Vec<(String, String)> {
        vec![("backend".into(), "memory".into())]
    }
}

/// Feeds an engine scan to `visit` until it returns false.
fn visit_scan(scan: strata::Scan, visit: &mut VisitFn<'_>) -> Result<()> {
    for entry in scan {
        let (k, v) = entry?;
        if !visit(&k, &v) {
            break;
        }
    }
    Ok(())
}

fn apply_ops(map: &mut BTreeMap<Vec<u8>, Bytes>, ops: Vec<BatchOp>) {
    for op in ops {
        match op {
            BatchOp::Put(k, v) => {
                map.insert(k, Bytes::from(v));
            }
            BatchOp::Delete(k) => {
                map.remove(&k);
            }
        }
    }
}

/// The exclusive end of the range of keys starting with `prefix` (`Unbounded` when every byte
/// is 0xff).
pub fn prefix_end(prefix: &[u8]) -> Bound<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Bound::Excluded(end);
        }
    }
    Bound::Unbounded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_next_prefix() {
        assert_eq!(prefix_end(b"ab"), Bound::Excluded(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Bound::Excluded(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), Bound::Unbounded);
    }
}
