//! What MULTI/EXEC/WATCH stand on.
//!
//! - [`Overlay`]: the storage an EXEC runs its queued commands on. Reads see the transaction's
//!   own writes first, then the store; writes are kept in memory and reach the store as one
//!   engine batch at [`Overlay::commit`], which the engine applies atomically across partitions
//!   (LSM engine: all of it or none of it after a crash, and no reader sees part of it).
//! - The *exec lock* (`Shared::exec_lock`): every command that writes holds its shared side;
//!   EXEC, and the few commands that check several keys before writing them (MSETNX, RENAME,
//!   DEL of several keys...), hold it exclusively. So an EXEC's reads and its batch are one
//!   serial step, as in single-threaded Redis. Readers take no lock: single-key reads see a
//!   write whole, and multi-key reads (MGET) read at one engine snapshot.
//! - [`Watches`] and [`Watching`]: WATCH registers the engine keys of the watched names with a
//!   per-connection flag; every write through the server's backend marks the flags of the keys
//!   it touches (one atomic load when nobody watches). EXEC checks the flag under the exec
//!   lock, so no write can slip between the check and the batch.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::backend::{BatchOp, GroupFn, GroupRead, KvBackend, UpdateFn, VisitFn, Write};
use crate::error::Result;
use crate::keyspace::DbIndex;
use crate::state::lock;

thread_local! {
    /// Set by an update's function for a write Redis makes without `signalModifiedKey`
    /// ([`leave_unsignalled`]); [`Watched`] clears it before each call of the function and
    /// reads it after the update, on the same thread.
    static UNSIGNALLED: Cell<bool> = const { Cell::new(false) };
}

/// Called from inside the function of a read-modify-write (`update`, `update_group`): the
/// write it decides on is one Redis makes without telling WATCH or CLIENT TRACKING (a stream's
/// consumer-group bookkeeping, a bit write that changes no bit but makes the string raw). It
/// is written as any other; only watchers and tracking clients are not told.
pub(crate) fn leave_unsignalled() {
    UNSIGNALLED.with(|u| u.set(true));
}

/// Clears the mark before an update's function runs (again).
fn clear_unsignalled() {
    UNSIGNALLED.with(|u| u.set(false));
}

/// Whether the function of the update that just ran asked to leave its write unsignalled.
fn take_unsignalled() -> bool {
    UNSIGNALLED.with(|u| u.replace(false))
}

/// A transaction's writes over the store (see the module comment).
pub(crate) struct Overlay<'a> {
    base: &'a dyn KvBackend,
    /// Key -> new value (`None`: deleted), in key order for scans.
    writes: Mutex<BTreeMap<Vec<u8>, Option<Bytes>>>,
}

impl<'a> Overlay<'a> {
    /// The store's entries in a range (of one routing group's partition with `group`: its
    /// route, and whether to scan in descending key order), with the transaction's own writes
    /// merged in: its puts shown, its deletes hidden.
    fn merged_scan(
        &self,
        group: Option<(&[u8], bool)>,
        (start, end): (Bound<Vec<u8>>, Bound<Vec<u8>>),
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        let rev = group.is_some_and(|(_, rev)| rev);
        let mut mine: Vec<(Vec<u8>, Option<Bytes>)> = lock(&self.writes)
            .iter()
            .filter(|(k, _)| in_range(k, &start, &end))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if rev {
            mine.reverse();
        }
        // Whether key `a` comes before `b` in the scan's order.
        let before = |a: &[u8], b: &[u8]| if rev { a > b } else { a < b };
        let mut next = 0;
        let mut stopped = false;
        let mut each = |k: &[u8], v: &[u8]| {
            while next < mine.len() && before(&mine[next].0, k) {
                if let (key, Some(value)) = &mine[next] {
                    if !visit(key, value) {
                        stopped = true;
                        return false;
                    }
                }
                next += 1;
            }
            if next < mine.len() && mine[next].0.as_slice() == k {
                let keep_going = match &mine[next].1 {
                    Some(value) => visit(k, value),
                    None => true,
                };
                next += 1;
                stopped = !keep_going;
                return keep_going;
            }
            let keep_going = visit(k, v);
            stopped = !keep_going;
            keep_going
        };
        match group {
            None => self.base.scan(start, end, &mut each)?,
            Some((route, false)) => self.base.scan_group(route, start, end, &mut each)?,
            Some((route, true)) => self.base.scan_group_rev(route, start, end, &mut each)?,
        }
        if !stopped {
            for (key, value) in &mine[next..] {
                if let Some(value) = value {
                    if !visit(key, value) {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    pub fn new(base: &'a dyn KvBackend) -> Self {
        Overlay {
            base,
            writes: Mutex::new(BTreeMap::new()),
        }
    }

    /// Writes everything as one batch.
    pub fn commit(self) -> Result<()> {
        let writes = self
            .writes
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if writes.is_empty() {
            return Ok(());
        }
        let ops = writes
            .into_iter()
            .map(|(k, v)| match v {
                Some(v) => BatchOp::Put(k, v.to_vec()),
                None => BatchOp::Delete(k),
            })
            .collect();
        self.base.write(ops)
    }

    fn set(&self, key: &[u8], value: Option<Bytes>) {
        lock(&self.writes).insert(key.to_vec(), value);
    }
}

fn in_range(k: &[u8], start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> bool {
    let above = match start {
        Bound::Included(s) => k >= &s[..],
        Bound::Excluded(s) => k > &s[..],
        Bound::Unbounded => true,
    };
    let below = match end {
        Bound::Included(e) => k <= &e[..],
        Bound::Excluded(e) => k < &e[..],
        Bound::Unbounded => true,
    };
    above && below
}

impl KvBackend for Overlay<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        if let Some(v) = lock(&self.writes).get(key) {
            return Ok(v.clone());
        }
        self.base.get(key)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.set(key, Some(Bytes::copy_from_slice(value)));
        Ok(())
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.set(key, None);
        Ok(())
    }

    fn write(&self, ops: Vec<BatchOp>) -> Result<()> {
        let mut writes = lock(&self.writes);
        for op in ops {
            match op {
                BatchOp::Put(k, v) => writes.insert(k, Some(Bytes::from(v))),
                BatchOp::Delete(k) => writes.insert(k, None),
            };
        }
        Ok(())
    }

    fn update(&self, key: &[u8], f: &mut UpdateFn<'_>) -> Result<()> {
        let old = self.get(key)?;
        match f(old.as_deref())? {
            Write::Keep => {}
            Write::Put(v) => self.set(key, Some(Bytes::from(v))),
            Write::Delete => self.set(key, None),
        }
        Ok(())
    }

    fn update_group(&self, _route: &[u8], f: &mut GroupFn<'_>) -> Result<()> {
        // EXEC holds the exec lock exclusively: nothing else writes while the overlay runs.
        let ops = f(&GroupRead::new(&|k: &[u8]| self.get(k)))?;
        self.write(ops)
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Bytes>>> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    fn scan(
        &self,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        self.merged_scan(None, (start, end), visit)
    }

    fn scan_group(
        &self,
        route: &[u8],
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        self.merged_scan(Some((route, false)), (start, end), visit)
    }

    fn scan_group_rev(
        &self,
        route: &[u8],
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        self.merged_scan(Some((route, true)), (start, end), visit)
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
        self.base.stats_lines()
    }
}

/// One connection's watch: the flag writes set, shared with the registry.
pub(crate) type WatchFlag = Arc<AtomicBool>;

/// What a write did to one engine key, as watchers see it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Change {
    /// A value was written.
    Put,
    /// The key was removed.
    Removal,
}

impl Change {
    fn of(op: &BatchOp) -> (&[u8], Change) {
        match op {
            BatchOp::Put(k, _) => (k, Change::Put),
            BatchOp::Delete(k) => (k, Change::Removal),
        }
    }

    /// The changes `ops` make to watchable keys: each key written, and for a collection's
    /// element (a field's value, a member's score, a list slot) also the collection's record
    /// key, which is what WATCH registers: changing an element changes the collection even when
    /// its record stays as it was (a batch from EXEC's overlay or a script carries elements
    /// without their record).
    fn of_batch(ops: &[BatchOp]) -> Vec<(Vec<u8>, Change)> {
        let mut changes = Vec::with_capacity(ops.len());
        for op in ops {
            let (k, change) = Change::of(op);
            if let Some(e) = crate::collection::parse_element_key(k) {
                changes.push((crate::keyspace::string_key(e.db, e.name), Change::Put));
            }
            changes.push((k.to_vec(), change));
        }
        changes
    }
}

/// One watcher of one engine key.
struct WatchEntry {
    flag: WatchFlag,
    /// The watched key was stored but already past its expiry time at WATCH: removing it (by
    /// expiry, a read, a DEL) changes nothing a client could see, so only a put marks the
    /// flag (Redis's `watchedKey.expired`).
    expired_at_watch: bool,
}

/// Engine keys being watched, and by whom.
#[derive(Default)]
pub(crate) struct Watches {
    /// Registered (key, flag) pairs: zero means writes need not look.
    entries: AtomicUsize,
    by_key: Mutex<HashMap<Vec<u8>, Vec<WatchEntry>>>,
    /// Clients caching keys (CLIENT TRACKING), told of the same changes by name.
    pub tracking: crate::tracking::Tracking,
}

impl Watches {
    /// Whether a write must report its changes (someone WATCHes or tracks keys).
    fn any(&self) -> bool {
        self.entries.load(Ordering::Acquire) != 0 || self.tracking.active()
    }

    /// Marks every flag watching the engine keys changed, and tells tracking clients the
    /// Redis keys they stand for.
    pub fn touch<'k>(&self, changes: impl IntoIterator<Item = (&'k [u8], Change)>) {
        let watching = self.entries.load(Ordering::Acquire) != 0;
        let tracking = self.tracking.active();
        if !watching && !tracking {
            return;
        }
        let by_key = watching.then(|| lock(&self.by_key));
        let mut names = Vec::new();
        for (k, change) in changes {
            if let Some(entries) = by_key.as_ref().and_then(|b| b.get(k)) {
                for e in entries {
                    if e.expired_at_watch && change == Change::Removal {
                        continue;
                    }
                    e.flag.store(true, Ordering::Release);
                }
            }
            if tracking {
                names.extend(crate::keyspace::redis_name(k));
            }
        }
        drop(by_key);
        if !names.is_empty() {
            self.tracking.invalidate(names.iter().map(Vec::as_slice));
        }
    }

    /// Marks every watcher (SWAPDB).
    pub fn touch_all(&self) {
        for entries in lock(&self.by_key).values() {
            for e in entries {
                e.flag.store(true, Ordering::Release);
            }
        }
    }

    /// Registers `flag` on `keys` (the engine keys of one watched key, already expired at
    /// WATCH or not).
    pub fn add(&self, keys: &[Vec<u8>], flag: &WatchFlag, expired_at_watch: bool) {
        let mut by_key = lock(&self.by_key);
        for k in keys {
            by_key.entry(k.clone()).or_default().push(WatchEntry {
                flag: flag.clone(),
                expired_at_watch,
            });
            self.entries.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Removes `flag` from `keys`.
    pub fn remove(&self, keys: &[Vec<u8>], flag: &WatchFlag) {
        let mut by_key = lock(&self.by_key);
        for k in keys {
            if let Some(entries) = by_key.get_mut(k) {
                let before = entries.len();
                entries.retain(|e| !Arc::ptr_eq(&e.flag, flag));
                self.entries
                    .fetch_sub(before - entries.len(), Ordering::AcqRel);
                if entries.is_empty() {
                    by_key.remove(k);
                }
            }
        }
    }
}

/// The server's backend with every write reported to [`Watches`], and every expiry index entry
/// written reported to [`ExpiryDue`] (so active expiry knows when a database next has work).
pub(crate) struct Watching {
    pub inner: Arc<dyn KvBackend + Send + Sync>,
    pub watches: Arc<Watches>,
    pub due: Arc<ExpiryDue>,
}

/// Per physical database, a time before which no expiry index entry is due: active expiry
/// skips the database until then (no engine scan while nothing can be due). Lowered after
/// every index entry written (once it is visible to scans); set by active expiry from the
/// index's first entry, unless an entry was written while it looked (the generation tells).
pub(crate) struct ExpiryDue {
    /// `(next due time, generation)` per database.
    slots: Vec<parking_lot::Mutex<(u64, u64)>>,
}

impl Default for ExpiryDue {
    fn default() -> Self {
        // Unknown at start: every database is looked at once.
        ExpiryDue {
            slots: (0..crate::keyspace::DATABASES_MAX)
                .map(|_| parking_lot::Mutex::new((0, 0)))
                .collect(),
        }
    }
}

impl ExpiryDue {
    /// The time before which nothing in `db` is due, and the generation to settle with.
    pub fn next(&self, db: crate::keyspace::DbIndex) -> (u64, u64) {
        *self.slots[usize::from(db)].lock()
    }

    /// An index entry for `at` was written in `db` and is visible.
    pub fn note(&self, db: crate::keyspace::DbIndex, at: u64) {
        let mut slot = self.slots[usize::from(db)].lock();
        slot.0 = slot.0.min(at);
        slot.1 += 1;
    }

    /// Active expiry found the first entry of `db` at `at` (`u64::MAX`: none), having read
    /// generation `generation` before it looked; kept only if nothing was written since.
    pub fn settle(&self, db: crate::keyspace::DbIndex, generation: u64, at: u64) {
        let mut slot = self.slots[usize::from(db)].lock();
        if slot.1 == generation {
            slot.0 = at;
        }
    }

    fn observe(&self, key: &[u8]) {
        if let Some((db, at)) = crate::keyspace::parse_expiry_index_key(key) {
            self.note(db, at);
        }
    }
}

impl Watching {
    /// The reporting over this backend.
    fn view(&self) -> Watched<'_> {
        Watched {
            inner: self.inner.as_ref(),
            watches: &self.watches,
            due: &self.due,
        }
    }
}

/// What [`Watching`] does, over any backend: the server's, or the one holding a partition's
/// lock during [`KvBackend::hold_group`].
struct Watched<'a> {
    inner: &'a dyn KvBackend,
    watches: &'a Watches,
    due: &'a ExpiryDue,
}

impl KvBackend for Watching {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.view().get(key)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.view().put(key, value)
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.view().delete(key)
    }

    fn write(&self, ops: Vec<BatchOp>) -> Result<()> {
        self.view().write(ops)
    }

    fn update(&self, key: &[u8], f: &mut UpdateFn<'_>) -> Result<()> {
        self.view().update(key, f)
    }

    fn update_group(&self, route: &[u8], f: &mut GroupFn<'_>) -> Result<()> {
        self.view().update_group(route, f)
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Bytes>>> {
        self.view().multi_get(keys)
    }

    fn scan(
        &self,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        self.view().scan(start, end, visit)
    }

    fn scan_group(
        &self,
        route: &[u8],
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        self.view().scan_group(route, start, end, visit)
    }

    fn scan_group_rev(
        &self,
        route: &[u8],
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        self.view().scan_group_rev(route, start, end, visit)
    }

    fn flush(&self) -> Result<()> {
        self.view().flush()
    }

    fn sync(&self) -> Result<()> {
        self.view().sync()
    }

    fn writes_would_wait(&self) -> bool {
        self.view().writes_would_wait()
    }

    fn has_staged_writes(&self) -> bool {
        self.view().has_staged_writes()
    }

    fn stats_lines(&self) -> Vec<(String, String)> {
        self.view().stats_lines()
    }

    fn key_count(&self, db: DbIndex) -> Option<u64> {
        self.view().key_count(db)
    }

    fn key_counts_known(&self) -> bool {
        self.view().key_counts_known()
    }

    fn recount_keys(&self) -> Result<()> {
        self.view().recount_keys()
    }

    fn take_expired(&self, max: usize) -> Vec<Vec<u8>> {
        self.view().take_expired(max)
    }

    fn hold_group(&self, route: &[u8], body: &mut dyn FnMut(&dyn KvBackend)) -> Result<bool> {
        self.view().hold_group(route, body)
    }
}

impl KvBackend for Watched<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.inner.get(key)
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.inner.put(key, value)?;
        self.due.observe(key);
        self.watches.touch([(key, Change::Put)]);
        Ok(())
    }

    fn delete(&self, key: &[u8]) -> Result<()> {
        self.inner.delete(key)?;
        self.watches.touch([(key, Change::Removal)]);
        Ok(())
    }

    fn write(&self, ops: Vec<BatchOp>) -> Result<()> {
        // Index entries are reported once written (visible to active expiry's scans).
        let due: Vec<(crate::keyspace::DbIndex, u64)> = ops
            .iter()
            .filter_map(|op| match op {
                BatchOp::Put(k, _) => crate::keyspace::parse_expiry_index_key(k),
                BatchOp::Delete(_) => None,
            })
            .collect();
        if !self.watches.any() {
            self.inner.write(ops)?;
            for (db, at) in due {
                self.due.note(db, at);
            }
            return Ok(());
        }
        let changes = Change::of_batch(&ops);
        self.inner.write(ops)?;
        for (db, at) in due {
            self.due.note(db, at);
        }
        self.watches
            .touch(changes.iter().map(|(k, c)| (k.as_slice(), *c)));
        Ok(())
    }

    fn update(&self, key: &[u8], f: &mut UpdateFn<'_>) -> Result<()> {
        let mut change = None;
        self.inner.update(key, &mut |old| {
            clear_unsignalled();
            let w = f(old)?;
            change = match w {
                Write::Keep => None,
                Write::Put(_) => Some(Change::Put),
                Write::Delete => Some(Change::Removal),
            };
            Ok(w)
        })?;
        if take_unsignalled() {
            return Ok(());
        }
        if let Some(change) = change {
            self.watches.touch([(key, change)]);
        }
        Ok(())
    }

    fn update_group(&self, route: &[u8], f: &mut GroupFn<'_>) -> Result<()> {
        // A group's writes always include its route key's record or its elements; watchers
        // register the record's key (the Redis key), so that is the key marked: as removed
        // when the group's writes only remove (an expired collection deleted), else as written.
        let watched = self.watches.any();
        let mut changes: Vec<(Vec<u8>, Change)> = Vec::new();
        self.inner.update_group(route, &mut |read| {
            clear_unsignalled();
            let ops = f(read)?;
            changes.clear();
            if watched && !ops.is_empty() {
                changes.extend(ops.iter().map(|op| {
                    let (k, change) = Change::of(op);
                    (k.to_vec(), change)
                }));
                let route_change = if changes.iter().all(|(_, c)| *c == Change::Removal) {
                    Change::Removal
                } else {
                    Change::Put
                };
                changes.push((route.to_vec(), route_change));
            }
            Ok(ops)
        })?;
        if take_unsignalled() {
            return Ok(());
        }
        if !changes.is_empty() {
            self.watches
                .touch(changes.iter().map(|(k, c)| (k.as_slice(), *c)));
        }
        Ok(())
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Bytes>>> {
        self.inner.multi_get(keys)
    }

    fn scan(
        &self,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        self.inner.scan(start, end, visit)
    }

    fn scan_group(
        &self,
        route: &[u8],
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        self.inner.scan_group(route, start, end, visit)
    }

    fn scan_group_rev(
        &self,
        route: &[u8],
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> Result<()> {
        self.inner.scan_group_rev(route, start, end, visit)
    }

    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    fn writes_would_wait(&self) -> bool {
        self.inner.writes_would_wait()
    }

    fn has_staged_writes(&self) -> bool {
        self.inner.has_staged_writes()
    }

    fn stats_lines(&self) -> Vec<(String, String)> {
        self.inner.stats_lines()
    }

    fn key_count(&self, db: DbIndex) -> Option<u64> {
        self.inner.key_count(db)
    }

    fn key_counts_known(&self) -> bool {
        self.inner.key_counts_known()
    }

    fn recount_keys(&self) -> Result<()> {
        self.inner.recount_keys()
    }

    fn take_expired(&self, max: usize) -> Vec<Vec<u8>> {
        self.inner.take_expired(max)
    }

    fn hold_group(&self, route: &[u8], body: &mut dyn FnMut(&dyn KvBackend)) -> Result<bool> {
        let (watches, due) = (self.watches, self.due);
        self.inner.hold_group(route, &mut |held| {
            body(&Watched {
                inner: held,
                watches,
                due,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::backend::MemoryBackend;

    fn scan_all(
        b: &dyn KvBackend,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        limit: usize,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        b.scan(start, end, &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            out.len() < limit
        })
        .unwrap();
        out
    }

    /// The overlay reads like a store that took the same writes directly (the model).
    #[test]
    fn overlay_reads_like_the_store_after_its_writes() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for _ in 0..200 {
            let base = MemoryBackend::new();
            let model = MemoryBackend::new();
            for _ in 0..rng.gen_range(0..12) {
                let k = vec![b'a' + rng.gen_range(0..8u8)];
                base.put(&k, b"base").unwrap();
                model.put(&k, b"base").unwrap();
            }
            let overlay = Overlay::new(&base);
            for i in 0..rng.gen_range(0..12) {
                let k = vec![b'a' + rng.gen_range(0..8u8)];
                if rng.gen_bool(0.5) {
                    let v = format!("v{i}").into_bytes();
                    overlay.put(&k, &v).unwrap();
                    model.put(&k, &v).unwrap();
                } else {
                    overlay.delete(&k).unwrap();
                    model.delete(&k).unwrap();
                }
            }
            for _ in 0..5 {
                let s = vec![b'a' + rng.gen_range(0..9u8)];
                let e = vec![b'a' + rng.gen_range(0..9u8)];
                let limit = rng.gen_range(1..10);
                let bounds = [
                    (Bound::Included(s.clone()), Bound::Excluded(e.clone())),
                    (Bound::Excluded(s.clone()), Bound::Included(e.clone())),
                    (Bound::Unbounded, Bound::Unbounded),
                ];
                for (start, end) in bounds {
                    assert_eq!(
                        scan_all(&overlay, start.clone(), end.clone(), limit),
                        scan_all(&model, start, end, limit)
                    );
                }
            }
            overlay.commit().unwrap();
            assert_eq!(
                scan_all(&base, Bound::Unbounded, Bound::Unbounded, 100),
                scan_all(&model, Bound::Unbounded, Bound::Unbounded, 100)
            );
        }
    }

    #[test]
    fn writes_mark_watchers_of_their_keys_only() {
        let watches = Arc::new(Watches::default());
        let b = Watching {
            inner: Arc::new(MemoryBackend::new()),
            watches: watches.clone(),
            due: Arc::default(),
        };
        let flag: WatchFlag = Arc::default();
        let keys = vec![b"a".to_vec()];
        watches.add(&keys, &flag, false);
        b.put(b"b", b"1").unwrap();
        b.update(b"a", &mut |_| Ok(Write::Keep)).unwrap();
        assert!(!flag.load(Ordering::Acquire));
        b.write(vec![BatchOp::Delete(b"a".to_vec())]).unwrap();
        assert!(flag.load(Ordering::Acquire));
        watches.remove(&keys, &flag);
        assert_eq!(watches.entries.load(Ordering::Acquire), 0);
    }

    /// A key already expired at WATCH: removing it marks nobody, writing it marks its watcher;
    /// a second watcher of the same key that saw it alive is marked by the removal.
    #[test]
    fn removing_a_key_expired_at_watch_marks_only_watchers_that_saw_it_alive() {
        let watches = Arc::new(Watches::default());
        let b = Watching {
            inner: Arc::new(MemoryBackend::new()),
            watches: watches.clone(),
            due: Arc::default(),
        };
        let (expired, alive): (WatchFlag, WatchFlag) = (Arc::default(), Arc::default());
        let keys = vec![b"a".to_vec()];
        watches.add(&keys, &expired, true);
        b.delete(b"a").unwrap();
        b.write(vec![BatchOp::Delete(b"a".to_vec())]).unwrap();
        b.update(b"a", &mut |_| Ok(Write::Delete)).unwrap();
        assert!(!expired.load(Ordering::Acquire));
        watches.add(&keys, &alive, false);
        b.delete(b"a").unwrap();
        assert!(!expired.load(Ordering::Acquire));
        assert!(alive.load(Ordering::Acquire));
        b.update(b"a", &mut |_| Ok(Write::Put(b"1".to_vec())))
            .unwrap();
        assert!(expired.load(Ordering::Acquire));
    }
}
