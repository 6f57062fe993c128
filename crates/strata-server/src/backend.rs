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

/// A [`GroupRead`]'s read of a value.
pub type GetFn<'a> = dyn Fn(&[u8]) -> Result<Option<Bytes>> + 'a;

/// A [`GroupRead`]'s test of whether a key exists.
pub type ContainsFn<'a> = dyn Fn(&[u8]) -> Result<bool> + 'a;

/// How [`KvBackend::update_group`]'s callback reads keys of the group (the newest state).
pub struct GroupRead<'a> {
    get: &'a GetFn<'a>,
    contains: Option<&'a ContainsFn<'a>>,
}

impl<'a> GroupRead<'a> {
    /// Reads through `get`; whether a key exists too.
    pub fn new(get: &'a GetFn<'a>) -> GroupRead<'a> {
        GroupRead {
            get,
            contains: None,
        }
    }

    /// Reads through `get`, and asks `contains` (which must agree with it) whether a key
    /// exists: the engine answers that without reading a value separated into a value log.
    pub fn with_contains(get: &'a GetFn<'a>, contains: &'a ContainsFn<'a>) -> GroupRead<'a> {
        GroupRead {
            get,
            contains: Some(contains),
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        (self.get)(key)
    }

    /// Whether `key` exists (a hash field, a set member): as [`GroupRead::get`] sees it.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        match self.contains {
            Some(contains) => contains(key),
            None => Ok(self.get(key)?.is_some()),
        }
    }
}

/// A callback of [`KvBackend::update_group`]: reads what it needs, returns the writes.
/// Returning an error aborts without writing.
pub type GroupFn<'a> = dyn FnMut(&GroupRead<'_>) -> Result<Vec<BatchOp>> + 'a;

/// A callback of [`KvBackend::scan`]: sees one entry in key order; returns `false` to stop.
pub type VisitFn<'a> = dyn FnMut(&[u8], &[u8]) -> bool + 'a;

/// The key/value operations the server needs.
pub trait KvBackend {
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
    /// [`KvBackend::scan_group`] in descending key order (a sorted set's highest scores first).
    /// By default the range is read forwards and visited backwards; the engine reads from the
    /// top and stops where `visit` does.
    fn scan_group_rev(
        &self,
        route: &[u8],
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        let mut all: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        self.scan_group(route, start, end, &mut |k, v| {
            all.push((k.to_vec(), v.to_vec()));
            true
        })?;
        for (k, v) in all.iter().rev() {
            if !visit(k, v) {
                break;
            }
        }
        Ok(())
    }
    /// Makes everything written so far durable in table files (SAVE).
    fn flush(&self) -> Result<()>;
    /// Forces the write-ahead logs to stable storage.
    fn sync(&self) -> Result<()>;
    /// Whether a write now would wait (for an fsync, or for background work that is behind):
    /// then the connection hands its writes to the blocking pool.
    fn writes_would_wait(&self) -> bool;
    /// Whether this backend holds writes it has not applied yet, which a scan would apply
    /// first (a held run's staged writes: [`HeldDb`]). A read-ahead is then not worth it.
    fn has_staged_writes(&self) -> bool {
        false
    }
    /// `name: value` statistics for INFO.
    fn stats_lines(&self) -> Vec<(String, String)>;
    /// How many keys database `db` holds, counted by every write (`strata::Db::key_count`,
    /// one class per database: `keyspace::KeysByDb`), expired keys not yet removed included;
    /// `None` when this backend does not count or its counts are unknown (then DBSIZE walks).
    /// A transaction's overlay gives `None`: its pending writes are not in the counts.
    fn key_count(&self, _db: crate::keyspace::DbIndex) -> Option<u64> {
        None
    }
    /// Whether [`KvBackend::key_count`] can answer now (cheaply: no look-ups).
    fn key_counts_known(&self) -> bool {
        false
    }
    /// Counts every database's keys again (at startup: the counts are unknown after open).
    fn recount_keys(&self) -> Result<()> {
        Ok(())
    }
    /// Up to `max` record keys (`'k' db name`) that compaction found expired for a while
    /// (`keyspace::DeadKeys::take_expired`), for active expiry to delete.
    fn take_expired(&self, _max: usize) -> Vec<Vec<u8>> {
        Vec::new()
    }
    /// Runs `body` on a backend that holds the write lock of `route`'s partition across the
    /// writes `body` makes through it (`strata::Db::hold_group`): a pipeline of commands on one
    /// key takes the lock once instead of handing it between threads at every command. Each
    /// write is still atomic and visible to the next. Through that backend, a write of a key
    /// in another partition is refused with [`crate::error::Error::WouldWait`], nothing
    /// written (the caller runs that command again without the hold). `false`, without running
    /// `body`: this backend cannot hold (the caller runs the commands as usual).
    fn hold_group(&self, _route: &[u8], _body: &mut dyn FnMut(&dyn KvBackend)) -> Result<bool> {
        Ok(false)
    }
}

/// The batch of `ops`.
fn engine_batch(ops: Vec<BatchOp>) -> strata::WriteBatch {
    let mut batch = strata::WriteBatch::new();
    for op in ops {
        match op {
            BatchOp::Put(k, v) => batch.put_owned(k, v),
            BatchOp::Delete(k) => batch.delete_owned(k),
        };
    }
    batch
}

/// A [`KvBackend::update_group`] through an engine group update (`run`: `Db::update_group` or
/// `GroupHold::update_group`): the command's own error travels beside the engine's callback,
/// and the engine is told to write nothing.
fn group_update(
    f: &mut GroupFn<'_>,
    run: impl FnOnce(
        &mut dyn FnMut(&strata::GroupRead<'_>) -> strata::Result<(strata::WriteBatch, ())>,
    ) -> strata::Result<()>,
) -> Result<()> {
    let mut failure = None;
    run(&mut |read| {
        let get = |k: &[u8]| read.get(k).map_err(crate::error::Error::Engine);
        let contains = |k: &[u8]| read.contains(k).map_err(crate::error::Error::Engine);
        let ops = f(&GroupRead::with_contains(&get, &contains));
        match ops {
            Ok(ops) => Ok((engine_batch(ops), ())),
            Err(e) => {
                failure = Some(e);
                Ok((strata::WriteBatch::new(), ()))
            }
        }
    })?;
    failure.map_or(Ok(()), Err)
}

/// A [`KvBackend::update`] as a group update of its one key (see [`group_update`]).
fn update_as_group<'a, 'f>(
    key: &'a [u8],
    f: &'a mut UpdateFn<'f>,
) -> impl FnMut(&GroupRead<'_>) -> Result<Vec<BatchOp>> + use<'a, 'f> {
    move |read| {
        let old = read.get(key)?;
        Ok(match f(old.as_deref())? {
            Write::Keep => Vec::new(),
            Write::Put(v) => vec![BatchOp::Put(key.to_vec(), v)],
            Write::Delete => vec![BatchOp::Delete(key.to_vec())],
        })
    }
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
        Ok(strata::Db::write(self, engine_batch(ops))?)
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
        group_update(f, |decide| strata::Db::update_group(self, route, decide))
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
        Ok(strata::Db::visit_routed(self, route, (start, end), visit)?)
    }

    fn scan_group_rev(
        &self,
        route: &[u8],
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        visit_scan(
            strata::Db::scan_routed_rev(self, route, (start, end)),
            visit,
        )
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

    fn key_count(&self, db: crate::keyspace::DbIndex) -> Option<u64> {
        strata::Db::key_count(self, usize::from(db))
    }

    fn key_counts_known(&self) -> bool {
        strata::Db::key_counts_known(self)
    }

    fn recount_keys(&self) -> Result<()> {
        Ok(strata::Db::recount_keys(self)?)
    }

    fn take_expired(&self, max: usize) -> Vec<Vec<u8>> {
        self.compaction_filter()
            .and_then(|f| f.as_any())
            .and_then(|f| f.downcast_ref::<crate::keyspace::DeadKeys>())
            .map(|f| f.take_expired(max))
            .unwrap_or_default()
    }

    fn hold_group(&self, route: &[u8], body: &mut dyn FnMut(&dyn KvBackend)) -> Result<bool> {
        // A run of commands relies on the hold (pop windows read ahead for the next pop): an
        // engine that lets other writers in between gets the commands run one by one.
        if !self.holds_groups() {
            return Ok(false);
        }
        strata::Db::hold_group(self, route, |hold| {
            let held = HeldDb::new(self, hold);
            body(&held);
            // What the run staged, applied before the hold commits it; a batch that failed
            // earlier in the run fails the hold the same way.
            held.apply_staged()
        })??;
        Ok(true)
    }
}

/// The engine with one partition's write lock held (`KvBackend::hold_group`): writes of that
/// partition go through the hold, writes of any other are refused (`WouldWait`), reads go to
/// the engine as usual (the LSM reads without the lock).
///
/// The held partition's writes are decided one command at a time but applied together: each
/// update's decision reads through the writes staged before it ([`Staged`]), and its own are
/// staged in turn; the staged writes go to the engine as one batch (one log record, one
/// memtable insert per key however often the run wrote it: a pipeline of 16 LPOPs writes the
/// list's record once, not 16 times) when the hold ends, when they pass
/// [`STAGED_BYTES_MAX`], or before any read that the overlay cannot answer (a scan, a count).
/// Nobody else sees the partition's newest state before the hold ends anyway (other writers
/// wait for its lock, and the run's replies are sent after it is committed), so a reader on
/// another thread sees all of the run or none of it, as before.
struct HeldDb<'a, 'h> {
    db: &'a strata::Db,
    /// Only the thread running the hold's body uses it: the lock is never contended.
    hold: parking_lot::Mutex<&'a mut strata::GroupHold<'h>>,
    /// Writes decided but not yet applied. Never locked across a decision, which may read
    /// (and scan, applying them first) through this backend.
    staged: parking_lot::Mutex<Staged>,
}

/// Most key and value bytes staged before they are applied (a long pipeline of large values
/// goes to the engine in pieces rather than as one huge batch).
const STAGED_BYTES_MAX: usize = 1 << 20;

/// The writes of a held run not yet applied: the newest write of each key, in the order keys
/// were first written.
#[derive(Default)]
struct Staged {
    /// Key and new value (`None`: deleted).
    ops: Vec<(Vec<u8>, Option<Bytes>)>,
    /// Each key's place in `ops`, by the key's hash (no second copy of the key).
    at: hashbrown::HashTable<usize>,
    bytes: usize,
    /// A batch of this hold failed to apply: its commands' writes are lost, so every later
    /// update of the hold fails too, and the hold ends with this error (no reply of the run
    /// acknowledges a write).
    failed: Option<String>,
}

/// Keys a held run stages room for at once: a pipeline of 16 pushes writes 17 (the list's
/// record and an element each); grown from empty, the key table was rebuilt 4 times a run.
const STAGED_KEYS_EXPECTED: usize = 32;

impl Staged {
    fn with_capacity(keys: usize) -> Staged {
        Staged {
            ops: Vec::with_capacity(keys),
            at: hashbrown::HashTable::with_capacity(keys),
            ..Staged::default()
        }
    }

    fn hash(key: &[u8]) -> u64 {
        xxhash_rust::xxh3::xxh3_64(key)
    }

    /// The staged state of `key`: `Some(None)` when a staged write deleted it, `None` when no
    /// staged write touched it.
    fn lookup(&self, key: &[u8]) -> Option<Option<Bytes>> {
        if self.ops.is_empty() {
            return None;
        }
        let ops = &self.ops;
        self.at
            .find(Self::hash(key), |&i| ops[i].0 == key)
            .map(|&i| ops[i].1.clone())
    }

    fn stage(&mut self, key: Vec<u8>, value: Option<Bytes>) {
        self.bytes += key.len() + value.as_ref().map_or(0, Bytes::len);
        let h = Self::hash(&key);
        let ops = &self.ops;
        match self.at.find(h, |&i| ops[i].0 == key) {
            Some(&i) => self.ops[i].1 = value,
            None => {
                let ops = &self.ops;
                self.at
                    .insert_unique(h, ops.len(), |&i| Self::hash(&ops[i].0));
                self.ops.push((key, value));
            }
        }
    }

    /// The staged writes as one engine batch, leaving nothing staged.
    fn take(&mut self) -> strata::WriteBatch {
        self.at.clear();
        self.bytes = 0;
        let mut batch = strata::WriteBatch::new();
        for (key, value) in self.ops.drain(..) {
            match value {
                Some(v) => batch.put_owned(key, Vec::from(v)),
                None => batch.delete_owned(key),
            };
        }
        batch
    }
}

impl HeldDb<'_, '_> {
    fn new<'a, 'h>(db: &'a strata::Db, hold: &'a mut strata::GroupHold<'h>) -> HeldDb<'a, 'h> {
        HeldDb {
            db,
            hold: parking_lot::Mutex::new(hold),
            staged: parking_lot::Mutex::new(Staged::with_capacity(STAGED_KEYS_EXPECTED)),
        }
    }

    /// The error of a batch of this hold that failed to apply, if one did.
    fn failure(&self) -> Result<()> {
        match &self.staged.lock().failed {
            Some(e) => Err(crate::error::Error::command(e.clone())),
            None => Ok(()),
        }
    }

    /// Applies the staged writes (one engine batch under the hold).
    fn apply_staged(&self) -> Result<()> {
        self.failure()?;
        let (route, batch) = {
            let mut staged = self.staged.lock();
            let Some((route, _)) = staged.ops.first() else {
                return Ok(());
            };
            let route = route.clone();
            (route, staged.take())
        };
        let applied = self.hold.lock().update_group(&route, |_| Ok((batch, ())));
        if let Err(e) = applied {
            let e = crate::error::Error::Engine(e);
            self.staged.lock().failed = Some(e.to_string());
            return Err(e);
        }
        Ok(())
    }

    /// Runs a group update of `route`'s group under the hold, or refuses a key the hold does
    /// not cover: decided now, reading through the staged writes, and staged.
    fn held_update(&self, route: &[u8], f: &mut GroupFn<'_>) -> Result<()> {
        if !self.hold.lock().holds(route) {
            return Err(crate::error::Error::WouldWait);
        }
        self.failure()?;
        let get = |key: &[u8]| -> Result<Option<Bytes>> {
            if let Some(staged) = self.staged.lock().lookup(key) {
                return Ok(staged);
            }
            Ok(self.hold.lock().get(key)?)
        };
        let contains = |key: &[u8]| -> Result<bool> {
            if let Some(staged) = self.staged.lock().lookup(key) {
                return Ok(staged.is_some());
            }
            Ok(self.hold.lock().contains(key)?)
        };
        let ops = f(&GroupRead::with_contains(&get, &contains))?;
        self.stage(ops)
    }

    /// Vets `ops` as the engine would and stages them (applying what was staged first when
    /// they would pass [`STAGED_BYTES_MAX`]). One command's writes larger than that on their
    /// own are applied at once as their own batch, after what was staged: the engine's batch
    /// limit then refuses that command alone, as it would without the hold.
    fn stage(&self, ops: Vec<BatchOp>) -> Result<()> {
        let Some(BatchOp::Put(route, _) | BatchOp::Delete(route)) = ops.first() else {
            return Ok(());
        };
        let total: usize = ops
            .iter()
            .map(|op| match op {
                BatchOp::Put(k, v) => k.len() + v.len(),
                BatchOp::Delete(k) => k.len(),
            })
            .sum();
        if total > STAGED_BYTES_MAX {
            self.apply_staged()?;
            let route = route.clone();
            let batch = engine_batch(ops);
            self.hold.lock().update_group(&route, |_| Ok((batch, ())))?;
            return Ok(());
        }
        {
            let hold = self.hold.lock();
            for op in &ops {
                let (key, value) = match op {
                    BatchOp::Put(k, v) => (k, &v[..]),
                    BatchOp::Delete(k) => (k, &[][..]),
                };
                hold.check_write(key, value)?;
            }
        }
        if self.staged.lock().bytes + total > STAGED_BYTES_MAX {
            self.apply_staged()?;
        }
        let mut staged = self.staged.lock();
        for op in ops {
            match op {
                BatchOp::Put(k, v) => staged.stage(k, Some(Bytes::from(v))),
                BatchOp::Delete(k) => staged.stage(k, None),
            }
        }
        Ok(())
    }
}

impl KvBackend for HeldDb<'_, '_> {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        if let Some(staged) = self.staged.lock().lookup(key) {
            return Ok(staged);
        }
        KvBackend::get(self.db, key)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(vec![BatchOp::Put(key.to_vec(), value.to_vec())])
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.write(vec![BatchOp::Delete(key.to_vec())])
    }

    fn write(&self, ops: Vec<BatchOp>) -> Result<()> {
        // Keys of another partition are refused by the engine's check (InvalidArgument): ask
        // first, so the command can run again without the hold instead.
        {
            let hold = self.hold.lock();
            let all_held = ops.iter().all(|op| match op {
                BatchOp::Put(k, _) | BatchOp::Delete(k) => hold.holds(k),
            });
            if !all_held {
                return Err(crate::error::Error::WouldWait);
            }
        }
        self.failure()?;
        self.stage(ops)
    }

    fn update(&self, key: &[u8], f: &mut UpdateFn<'_>) -> Result<()> {
        self.held_update(key, &mut update_as_group(key, f))
    }

    fn update_group(&self, route: &[u8], f: &mut GroupFn<'_>) -> Result<()> {
        self.held_update(route, f)
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Bytes>>> {
        // One point in time: the staged writes applied first if any of them is asked for.
        let any_staged = {
            let staged = self.staged.lock();
            keys.iter().any(|k| staged.lookup(k).is_some())
        };
        if any_staged {
            self.apply_staged()?;
        }
        KvBackend::multi_get(self.db, keys)
    }

    fn scan(
        &self,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        self.apply_staged()?;
        KvBackend::scan(self.db, start, end, visit)
    }

    fn scan_group(
        &self,
        route: &[u8],
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        self.apply_staged()?;
        KvBackend::scan_group(self.db, route, start, end, visit)
    }

    fn scan_group_rev(
        &self,
        route: &[u8],
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        self.apply_staged()?;
        KvBackend::scan_group_rev(self.db, route, start, end, visit)
    }

    fn flush(&self) -> Result<()> {
        // A flush takes the write lock the hold has.
        Err(crate::error::Error::WouldWait)
    }

    fn sync(&self) -> Result<()> {
        Err(crate::error::Error::WouldWait)
    }

    fn writes_would_wait(&self) -> bool {
        false
    }

    fn has_staged_writes(&self) -> bool {
        !self.staged.lock().ops.is_empty()
    }

    fn stats_lines(&self) -> Vec<(String, String)> {
        self.db.stats().lines()
    }

    fn key_count(&self, db: crate::keyspace::DbIndex) -> Option<u64> {
        // The counts move when a batch applies.
        self.apply_staged().ok()?;
        strata::Db::key_count(self.db, usize::from(db))
    }

    fn key_counts_known(&self) -> bool {
        strata::Db::key_counts_known(self.db)
    }
}

/// An in-memory backend: a sorted map behind one lock. Nothing is durable. Writes and
/// atomic updates are serialized by a second lock that reads do not take, as the engine's
/// partition lock is: an update's `decide` may read other keys (and scan) through the
/// backend while it runs.
#[derive(Debug, Default)]
pub struct MemoryBackend {
    map: Mutex<BTreeMap<Vec<u8>, Bytes>>,
    writes: Mutex<()>,
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

    fn writing(&self) -> std::sync::MutexGuard<'_, ()> {
        self.writes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl KvBackend for MemoryBackend {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        Ok(self.map().get(key).cloned())
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let _writing = self.writing();
        self.map()
            .insert(key.to_vec(), Bytes::copy_from_slice(value));
        Ok(())
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        let _writing = self.writing();
        self.map().remove(key);
        Ok(())
    }

    fn write(&self, ops: Vec<BatchOp>) -> Result<()> {
        let _writing = self.writing();
        apply_ops(&mut self.map(), ops);
        Ok(())
    }

    fn update(&self, key: &[u8], f: &mut UpdateFn<'_>) -> Result<()> {
        let _writing = self.writing();
        let current = self.map().get(key).cloned();
        let write = f(current.as_deref())?;
        let mut map = self.map();
        match write {
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
        let _writing = self.writing();
        let ops = f(&GroupRead::new(&|k: &[u8]| Ok(self.map().get(k).cloned())))?;
        apply_ops(&mut self.map(), ops);
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

    /// Through a hold, writes of the held partition land (and are read back at once, also by
    /// plain reads), a write touching another partition is refused as `WouldWait` with nothing
    /// of it written, and a memory backend cannot hold.
    #[test]
    #[allow(clippy::unwrap_used)]
    fn a_held_partition_takes_its_own_writes_and_refuses_others() {
        let dir = tempfile::tempdir().unwrap();
        let db = strata::Db::open(dir.path(), strata::Options::tiny()).unwrap();
        let own = b"kown".to_vec();
        let other = (0..100)
            .map(|i| format!("kother{i}").into_bytes())
            .find(|k| db.partition_of(k) != db.partition_of(&own))
            .unwrap();
        let mut ran = false;
        let held = KvBackend::hold_group(&db, &own, &mut |store| {
            ran = true;
            store.put(&own, b"1").unwrap();
            assert_eq!(store.get(&own).unwrap().as_deref(), Some(&b"1"[..]));
            let mut bump =
                |old: Option<&[u8]>| Ok(Write::Put([old.unwrap_or_default(), b"2"].concat()));
            store.update(&own, &mut bump).unwrap();
            assert_eq!(store.get(&own).unwrap().as_deref(), Some(&b"12"[..]));
            // Staged: the engine has neither write yet (nobody outside the hold reads the
            // partition's newest state before the hold ends)...
            assert_eq!(KvBackend::get(&db, &own).unwrap(), None);
            // ...until a read the staged writes cannot answer applies them first.
            let mut seen = Vec::new();
            store
                .scan(
                    Bound::Included(own.clone()),
                    Bound::Unbounded,
                    &mut |k, v| {
                        seen.push((k.to_vec(), v.to_vec()));
                        false
                    },
                )
                .unwrap();
            assert_eq!(seen, vec![(own.clone(), b"12".to_vec())]);
            assert_eq!(
                KvBackend::get(&db, &own).unwrap().as_deref(),
                Some(&b"12"[..])
            );
            store.delete(&own).unwrap();
            assert_eq!(store.get(&own).unwrap(), None);
            assert_eq!(
                store.multi_get(&[own.clone(), other.clone()]).unwrap(),
                vec![None, None]
            );
            store.put(&own, b"12").unwrap();
            // One command's writes past the staging bound go to the engine at once, after
            // what was staged before them.
            let big = (0..=255u8)
                .map(|b| [&own[..], b"big", &[b]].concat())
                .find(|k| db.partition_of(k) == db.partition_of(&own))
                .unwrap();
            store.put(&big, &vec![b'b'; STAGED_BYTES_MAX + 1]).unwrap();
            assert_eq!(
                KvBackend::get(&db, &own).unwrap().as_deref(),
                Some(&b"12"[..])
            );
            assert_eq!(
                KvBackend::get(&db, &big).unwrap().map(|v| v.len()),
                Some(STAGED_BYTES_MAX + 1)
            );
            // A write the engine would refuse is refused here, before it is staged.
            let huge = (0..=255u8)
                .map(|b| {
                    let mut k = vec![b'k'; strata::Options::tiny().key_bytes_max];
                    k.push(b);
                    k
                })
                .find(|k| db.partition_of(k) == db.partition_of(&own))
                .unwrap();
            assert!(matches!(
                store.put(&huge, b"x"),
                Err(crate::error::Error::Engine(
                    strata::Error::LimitExceeded { .. }
                ))
            ));
            let both = vec![
                BatchOp::Put(own.clone(), b"x".to_vec()),
                BatchOp::Put(other.clone(), b"x".to_vec()),
            ];
            assert!(matches!(
                store.write(both),
                Err(crate::error::Error::WouldWait)
            ));
            assert!(matches!(
                store.put(&other, b"x"),
                Err(crate::error::Error::WouldWait)
            ));
        })
        .unwrap();
        assert!(held && ran);
        assert_eq!(
            KvBackend::get(&db, &own).unwrap().as_deref(),
            Some(&b"12"[..])
        );
        assert_eq!(KvBackend::get(&db, &other).unwrap(), None);
        let memory = MemoryBackend::new();
        assert!(!memory.hold_group(b"k", &mut |_| panic!("ran")).unwrap());
    }

    /// A staged batch that fails to apply (the memtable switch it triggers cannot write the
    /// log) fails the read that applied it, every later write of the hold, and the hold itself:
    /// no command of the run is acknowledged.
    #[test]
    fn a_staged_batch_that_fails_to_apply_fails_the_rest_of_the_hold() {
        let dir = tempfile::tempdir().unwrap();
        let fs = strata::vfs::FaultFs::new(dir.path()).unwrap();
        let opts = strata::Options {
            fs: std::sync::Arc::new(fs.clone()),
            ..strata::Options::tiny()
        };
        let db = strata::Db::open(dir.path(), opts).unwrap();
        let own = b"kown".to_vec();
        let mut outcomes = Vec::new();
        let held = KvBackend::hold_group(&db, &own, &mut |store| {
            // Past the tiny memtable log's 64 KiB: applying them switches memtables.
            for i in 0..200u32 {
                let key = [&own[..], &i.to_be_bytes()].concat();
                if db.partition_of(&key) == db.partition_of(&own) {
                    store.put(&key, &[b'v'; 3000]).unwrap();
                }
            }
            fs.fail(strata::vfs::IoKind::Write, 1, strata::vfs::FaultKind::Eio);
            fs.fail(strata::vfs::IoKind::Sync, 1, strata::vfs::FaultKind::Eio);
            outcomes.push(
                store
                    .scan(Bound::Unbounded, Bound::Unbounded, &mut |_, _| true)
                    .is_err(),
            );
            outcomes.push(store.put(&own, b"later").is_err());
        });
        assert!(held.is_err(), "the hold must fail: {held:?}");
        assert_eq!(outcomes, vec![true, true]);
    }

    #[test]
    fn prefix_end_is_the_next_prefix() {
        assert_eq!(prefix_end(b"ab"), Bound::Excluded(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Bound::Excluded(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), Bound::Unbounded);
    }
}
