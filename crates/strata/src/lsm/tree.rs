//! One partition's LSM tree: its state (`Tree`), the write path (log append, memtable insert,
//! memtable switch), the read path (point lookup and scans over a `View`), the single step that
//! changes the set of tables (`install`), and the choice of background work.
//!
//! The rest of the tree's behaviour lives beside this file, one concept each: `recovery` (open),
//! `throttle` (write stalls), `flush`, `compaction`, `ingest`, `vlog` (value logs, their garbage
//! collection and sampling), `version` (the manifest).
//!
//! Locks, in the order they may be taken (a thread holding one may take only those after it):
//! 1. `gc_lock` (one value-log collection at a time; held across its rewrites; bulk ingest holds
//!    every partition's, taken in partition order, while it flushes, builds and installs),
//! 2. `compaction_lock` (one compaction or ingest install at a time), `flush_lock` (one flush);
//!    never both,
//! 3. the journal's write lock (log append + memtable insert; never held across fsync; group
//!    commit lives in `journal`),
//! 4. `version_lock` (manifest writes; holds the log number),
//! 5. `view_lock` (publishing a new [`View`]; no I/O under it; taking a snapshot holds every
//!    partition's, in partition order, and takes nothing else),
//! 6. `value_offsets`, `cursors`, `background_error`, `stall_lock` (leaf locks: nothing is taken
//!    while one is held, except `stall_cv`'s wait).
//!
//! Readers take no lock: they load the current `View` from an `ArcSwap` and keep it alive while
//! they read.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

use crate::batch::{BatchHeader, Entry};
use crate::error::{Error, Result};
use crate::journal::counts::Existence;
use crate::journal::{self, Journal, JournalState, Journaled, WAL_SUFFIX};
use crate::lsm::memtable::{
    as_ref_bound, Memtable, MemtableBudget, MemtableCursor, MemtableIter, MemtableLog, Slot,
    SlotIter,
};
use crate::lsm::sstable::Table;
use crate::lsm::version::{self, LogState, Version};
use crate::lsm::visit::{visit_merged, Cursor, TablesCursor};
use crate::lsm::vlog::relocate::MOVED_SUFFIX;
use crate::lsm::vlog::ValuePtr;
use crate::lsm::{KeyHash, LEVELS};
use crate::options::Options;
use crate::stats::{LevelStats, PartitionStats};
use crate::util::cache::BlockCache;
use crate::util::fsutil;
use crate::util::merge::{EntryIter, MergeIter};
use crate::util::work::WorkRequest;

/// What readers see: memtables newest first, then the tables of `version`.
pub(crate) struct View {
    pub(crate) active: Arc<Memtable>,
    /// Full memtables waiting for flush, newest first.
    pub(crate) immutables: Vec<Arc<Memtable>>,
    pub(crate) version: Arc<Version>,
}

impl Journaled for Tree {
    const READS_AT_SNAPSHOTS: bool = true;

    fn journal(&self) -> &Journal {
        &self.journal
    }

    fn peers(&self) -> Option<&journal::Peers> {
        Some(&self.peers)
    }

    fn admit_write(&self) -> Result<()> {
        self.throttle()
    }

    fn get_locked(&self, key: &[u8], _: &JournalState) -> Result<Option<Bytes>> {
        // Under the lock no write to this partition can intervene; writes applied but not yet
        // visible (waiting for an earlier batch elsewhere) are this key's state all the same.
        self.get_at(&self.view.load(), key, u64::MAX)
    }

    fn contains_locked(&self, key: &[u8], _: &JournalState) -> Result<bool> {
        // A pointer into a value log says the key exists: the value is not read.
        Ok(names_a_value(lookup(
            &self.view.load(),
            key,
            u64::MAX,
            true,
        )?))
    }

    fn exists_locked(&self, key: &[u8], _: &JournalState) -> Result<Existence> {
        // Memtables only: a table read per overwritten key costs a third of a server's SET
        // throughput, so the tables are asked at flush (`journal/counts.rs`).
        let v = self.view.load();
        let h = KeyHash::of(key);
        for m in std::iter::once(&v.active).chain(v.immutables.iter()) {
            if let Some(live) = m.newest_is_live(key, h) {
                return Ok(Existence::Known(live));
            }
        }
        Ok(Existence::InTables {
            memtable: v.active.wal_number,
        })
    }

    fn for_each_key_locked(&self, _: &JournalState, f: &mut dyn FnMut(&[u8])) -> Result<()> {
        let slots = slots_at(
            &self.view.load_full(),
            u64::MAX,
            Bound::Unbounded,
            Bound::Unbounded,
        );
        for item in slots {
            let (key, slot) = item?;
            if slot != Slot::Delete {
                f(&key);
            }
        }
        Ok(())
    }

    /// Appends a batch to the log and the memtable. Caller holds the journal lock.
    fn apply_locked(
        &self,
        st: &mut JournalState,
        header: &BatchHeader,
        entries: &[Entry<'_>],
    ) -> Result<u64> {
        self.apply_locked_as(st, header, entries, true)
    }

    fn unapply_locked(&self, _st: &mut JournalState, seq: u64, entries: &[Entry<'_>]) {
        self.unapplied_parts.fetch_add(1, Ordering::AcqRel);
        let view = self.view.load();
        for (_, key, _) in entries {
            view.active.remove_version(key, seq);
        }
    }

    /// Switches a full memtable for a new one (and a new log).
    fn after_apply_locked(&self, st: &mut JournalState) -> Result<()> {
        let active = self.view.load().active.clone();
        let full = active.bytes() >= self.opts.memtable_bytes_max
            || st.wal.len_bytes >= self.opts.memtable_log_bytes_max
            || self.memtable_budget.wants_switch(active.bytes())
            || self
                .opts
                .memtable_entries_max
                .is_some_and(|n| active.entries() >= n);
        if full {
            self.rotate_locked(st)?;
        }
        Ok(())
    }
}

/// Work done since open, for [`PartitionStats`].
#[derive(Default)]
pub(super) struct Counters {
    pub(super) user_bytes: AtomicU64,
    pub(super) flush_bytes: AtomicU64,
    pub(super) compaction_bytes: AtomicU64,
    pub(super) flushes: AtomicU64,
    pub(super) compactions: AtomicU64,
    pub(super) stalls: AtomicU64,
    pub(super) gc_bytes: AtomicU64,
    pub(super) gcs: AtomicU64,
    /// Bytes and files of value files compactions wrote (values moved out of victim logs).
    pub(super) moved_bytes: AtomicU64,
    pub(super) moved_files: AtomicU64,
}

/// Background garbage collection takes a value log only once its live share is below this
/// fraction of `value_log_gc_live_ratio`, the share below which compactions start moving its
/// values (`vlog/relocate.rs`): compactions empty most logs on their way, without a lookup per
/// value, and collection is left the logs whose pointers sit in tables no compaction reaches.
/// Measured (PUT_HEAVY, 10 M keys, 240 s, BENCHMARKS.md): with collection at the same share as
/// moving, collection took the logs first and rewrote 11.9 GB through the write path; at a
/// quarter it ran twice and throughput rose from 116 k to 181 k puts/s.
const GC_SHARE_OF_RELOCATION_RATIO: f64 = 0.25;

pub(crate) struct Tree {
    pub(crate) id: usize,
    pub(super) dir: PathBuf,
    pub(super) wal_dir: PathBuf,
    pub(super) sst_dir: PathBuf,
    pub(super) opts: Arc<Options>,
    pub(super) cache: Arc<BlockCache>,
    /// Memtable memory of the whole database, shared with the other partitions.
    pub(super) memtable_budget: Arc<MemtableBudget>,
    pub(crate) journal: Journal,
    pub(super) view: ArcSwap<View>,
    pub(super) view_lock: Mutex<()>,
    /// Guards manifest writes; holds the log number and last flushed sequence number.
    pub(super) version_lock: Mutex<LogState>,
    /// The journals of every partition (set once all are open): an acknowledgement waits for
    /// earlier batches of the others (`journal::reach`), and a flush first makes every batch
    /// up to its memtable's newest durable in all of them.
    pub(super) peers: journal::Peers,
    pub(super) next_file: AtomicU64,
    /// Scratch for the value offsets of a batch (used under the journal lock).
    pub(super) value_offsets: Mutex<Vec<u32>>,
    pub(super) gc_lock: Mutex<()>,
    /// Parts of batches spanning partitions taken back out of the memtable (another
    /// partition's part failed): value-log GC, whose first liveness pass runs without the lock,
    /// may have taken a value for shadowed by such a part, so it gives up a round during which
    /// this moved.
    pub(super) unapplied_parts: AtomicU64,
    /// The flush count at the last value-log sample (one sample per flush at most).
    pub(super) sampled_at_flush: AtomicU64,
    pub(super) flush_lock: Mutex<()>,
    pub(super) compaction_lock: Mutex<()>,
    pub(super) stall_lock: Mutex<()>,
    pub(super) stall_cv: Condvar,
    /// Next key per level where round-robin compaction picks up.
    pub(super) cursors: Mutex<Vec<Bytes>>,
    pub(crate) work: WorkRequest,
    pub(super) background_error: Mutex<Option<String>>,
    pub(super) counters: Counters,
}

impl Tree {
    /// `user`: whether the bytes count as written by the user (not for garbage collection).
    fn apply_locked_as(
        &self,
        st: &mut JournalState,
        header: &BatchHeader,
        entries: &[Entry<'_>],
        user: bool,
    ) -> Result<u64> {
        let mut offsets = std::mem::take(&mut *self.value_offsets.lock());
        let appended = self
            .journal
            .append_locked(st, header, entries, Some(&mut offsets))?;
        let payload_at = appended.offset + journal::RECORD_HEADER_BYTES;
        let view = self.view.load();
        let user_bytes: u64 = entries
            .iter()
            .map(|&(_, key, value)| (key.len() + value.len()) as u64)
            .sum();
        view.active.insert_all(
            header.seq,
            entries
                .iter()
                .zip(offsets.iter())
                .map(|(&(kind, key, value), &at)| (kind, key, value, payload_at + at as u64)),
        );
        *self.value_offsets.lock() = offsets;
        if user {
            self.counters
                .user_bytes
                .fetch_add(user_bytes, Ordering::Relaxed);
        }
        Ok(appended.seq)
    }

    /// Writes the engine's own rewrites (value-log garbage collection) under the journal lock
    /// the caller holds: numbered and published like a user's write, not counted as one.
    pub(super) fn apply_rewrite_locked(
        &self,
        st: &mut JournalState,
        entries: &[Entry<'_>],
    ) -> Result<()> {
        struct Rewrite<'a>(&'a Tree);
        impl Journaled for Rewrite<'_> {
            const READS_AT_SNAPSHOTS: bool = true;
            fn journal(&self) -> &Journal {
                &self.0.journal
            }
            fn get_locked(&self, key: &[u8], st: &JournalState) -> Result<Option<Bytes>> {
                self.0.get_locked(key, st)
            }
            fn exists_locked(&self, key: &[u8], st: &JournalState) -> Result<Existence> {
                self.0.exists_locked(key, st)
            }
            fn for_each_key_locked(
                &self,
                st: &JournalState,
                f: &mut dyn FnMut(&[u8]),
            ) -> Result<()> {
                self.0.for_each_key_locked(st, f)
            }
            fn apply_locked(
                &self,
                st: &mut JournalState,
                header: &BatchHeader,
                entries: &[Entry<'_>],
            ) -> Result<u64> {
                self.0.apply_locked_as(st, header, entries, false)
            }
            fn after_apply_locked(&self, st: &mut JournalState) -> Result<()> {
                self.0.after_apply_locked(st)
            }
        }
        journal::apply_one(&Rewrite(self), st, entries).map(|_| ())
    }

    /// Switches to a new memtable and log; the old memtable waits for flush.
    pub(super) fn rotate_locked(&self, st: &mut JournalState) -> Result<()> {
        let number = self.next_file.fetch_add(1, Ordering::AcqRel);
        self.journal
            .rotate_locked(st, journal::wal_path(&self.wal_dir, number))?;
        let mem = Arc::new(Memtable::with_log(
            number,
            self.memtable_budget.clone(),
            memtable_log(&self.opts, &st.wal),
        ));
        {
            let _g = self.view_lock.lock();
            let v = self.view.load();
            let mut immutables = Vec::with_capacity(v.immutables.len() + 1);
            immutables.push(v.active.clone());
            immutables.extend(v.immutables.iter().cloned());
            self.view.store(Arc::new(View {
                active: mem,
                immutables,
                version: v.version.clone(),
            }));
        }
        self.work.request();
        Ok(())
    }

    /// Hands buffered log records to the OS and, with `fsync`, forces them to disk.
    pub(crate) fn sync_now(&self, fsync: bool) -> Result<()> {
        self.journal.sync_now(fsync)
    }

    /// The newest visible value of `key`. The view is loaded before the visible sequence
    /// number: every write complete before the call is in that view, and everything the view
    /// has stopped listing (a value log collected, a table compacted away) was replaced by
    /// writes that the sequence number read afterwards includes. (A write made while the call
    /// runs may or may not be seen, as with any concurrent read.)
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        let view = self.view.load();
        let at = self.journal.seqs.visible();
        self.get_at(&view, key, at)
    }

    /// The value of `key` at sequence number `at` in view `v` (a snapshot's, or the current).
    pub(crate) fn get_at(&self, v: &View, key: &[u8], at: u64) -> Result<Option<Bytes>> {
        match lookup(v, key, at, true)? {
            None | Some(Slot::Delete) => Ok(None),
            Some(Slot::Put(b)) => Ok(Some(b)),
            Some(Slot::Pointer(p)) => resolve_in_view(&self.wal_dir, v, &p).map(Some),
        }
    }

    /// The value `p` (met in view `v`) points at (checkpoints copying a memtable).
    pub(crate) fn read_pointer(&self, v: &View, p: &ValuePtr) -> Result<Bytes> {
        resolve_in_view(&self.wal_dir, v, p)
    }

    /// The current view, held: its memtables, tables and value logs stay as they are (and on
    /// disk) while the `Arc` lives.
    pub(crate) fn pinned_view(&self) -> Arc<View> {
        self.view.load_full()
    }

    /// Holds off every change of the view while the guard lives (taking a snapshot).
    pub(crate) fn hold_view(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.view_lock.lock()
    }

    /// `key` as the tables hold it when no memtable has a version of it (see
    /// [`crate::SettledRead`]); `Ok(None)` when it is unsettled.
    fn settled_get(&self, key: &[u8]) -> Result<Option<Option<Bytes>>> {
        let v = self.view.load();
        let h = KeyHash::of(key);
        let in_memory = std::iter::once(&v.active)
            .chain(v.immutables.iter())
            .any(|m| m.newest_seq(key, h).is_some());
        if in_memory {
            return Ok(None);
        }
        // Compaction filters read here: background reads leave the block cache to users.
        Ok(Some(
            match lookup_tables_hashed(&v.version, key, h, false)? {
                None | Some(Slot::Delete) => None,
                Some(Slot::Put(b)) => Some(b),
                Some(Slot::Pointer(p)) => Some(resolve_pointer(&self.wal_dir, &v.version, &p)?),
            },
        ))
    }

    /// Whether `key` has a version newer than `seq` in the current memtables (optimistic
    /// transactions; the caller holds the journal lock). Versions flushed into tables since
    /// carry no sequence number: the caller compares values for those.
    pub(crate) fn changed_in_memory_since(&self, key: &[u8], seq: u64) -> bool {
        let v = self.view.load();
        let h = KeyHash::of(key);
        std::iter::once(&v.active)
            .chain(v.immutables.iter())
            .any(|m| m.newest_seq(key, h).is_some_and(|s| s > seq))
    }

    /// This partition's count of counted keys of `class` (`journal/counts.rs`), its pending
    /// keys looked up in the tables.
    pub(crate) fn key_count(&self, class: usize) -> Option<i64> {
        self.journal.counts.as_ref()?.count(
            class,
            || self.view.load_full(),
            |v, key| in_tables(&v.version, key),
        )
    }

    /// Entries (tombstones included) in `(lower, upper)` of view `v` at sequence number `at`,
    /// the newest version at or below it of each key.
    pub(crate) fn iter_at(
        &self,
        v: Arc<View>,
        at: u64,
        lower: Bound<Bytes>,
        upper: Bound<Bytes>,
    ) -> EntryIter {
        // Values behind pointers are read as the scan reaches them, from the value logs of the
        // version the scan started on and the logs of its memtables (which it keeps open).
        let wal_dir = self.wal_dir.clone();
        let slots = slots_at(&v, at, lower, upper);
        Box::new(slots.map(move |r| {
            let (k, slot) = r?;
            Ok((k, value_in_view(&wal_dir, &v, slot)?))
        }))
    }

    /// Calls `visit` on the live entries (tombstones skipped) of `(lower, upper)` of view `v`
    /// at `at`, in key order, until it returns false: the newest version of each key, its
    /// key and value borrowed from a memtable's copy buffer or a table's block (`visit.rs`).
    pub(crate) fn visit_at(
        &self,
        v: Arc<View>,
        at: u64,
        lower: Bound<Bytes>,
        upper: Bound<Bytes>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let (lo, hi) = (as_ref_bound(&lower), as_ref_bound(&upper));
        let mut sources: Vec<Cursor> = std::iter::once(&v.active)
            .chain(v.immutables.iter())
            .map(|m| Cursor::Memtable(MemtableCursor::new(m, at, lo, hi)))
            .collect();
        // Level-0 tables overlap each other, but one whose keys all lie outside the range has
        // nothing to give: a short range scan (a collection's elements) skips it unopened.
        for t in v.version.levels[0]
            .iter()
            .filter(|t| in_range(t, &lower, &upper))
        {
            let one = std::slice::from_ref(t);
            sources.push(Cursor::Tables(TablesCursor::new(one, &lower, &upper)));
        }
        // A sorted level's tables in the range are a run of them, found by bisection.
        for level in 1..LEVELS {
            let tables = &v.version.levels[level][..];
            let first = tables.partition_point(|t| !above_lower(t, &lower));
            let end = tables.partition_point(|t| below_upper(t, &upper));
            if let Some(run) = tables.get(first..end).filter(|r| !r.is_empty()) {
                sources.push(Cursor::Tables(TablesCursor::new(run, &lower, &upper)));
            }
        }
        let resolve = |p: &ValuePtr| resolve_in_view(&self.wal_dir, &v, p);
        visit_merged(sources, &resolve, visit)
    }

    /// Entries (tombstones included) in `(lower, upper)` of view `v` at sequence number `at`,
    /// as [`Tree::iter_at`], in descending key order (`reverse.rs`).
    pub(crate) fn iter_rev_at(
        &self,
        v: Arc<View>,
        at: u64,
        lower: Bound<Bytes>,
        upper: Bound<Bytes>,
    ) -> EntryIter {
        Box::new(super::reverse::RevIter::new(
            self.wal_dir.clone(),
            v,
            at,
            lower,
            upper,
        ))
    }

    /// The one way the tree's tables and value logs change: under `version_lock`, `edit`
    /// changes a copy of the current version, the copy is written as the new `MANIFEST`, and
    /// only then do readers see it. `flushed` is the memtable whose data the edit put in a
    /// table: the manifest's log number moves past its log and it leaves the view in the same
    /// step. Nothing changes if `edit` or the manifest write fails.
    pub(super) fn install<T>(
        &self,
        flushed: Option<&Arc<Memtable>>,
        edit: impl FnOnce(&mut Version) -> Result<T>,
    ) -> Result<T> {
        self.install_or_undo(flushed, edit, || {})
    }

    /// [`Tree::install`] for an edit that changes state it shares with the current version
    /// (the live-byte counts of value logs): when the edit or the manifest write fails, `undo`
    /// puts that state back before `version_lock` is released, so that no other install writes
    /// a manifest with the failed edit's counts.
    pub(super) fn install_or_undo<T>(
        &self,
        flushed: Option<&Arc<Memtable>>,
        edit: impl FnOnce(&mut Version) -> Result<T>,
        undo: impl FnOnce(),
    ) -> Result<T> {
        let mut logs = self.version_lock.lock();
        let mut nv = (*self.view.load().version).clone();
        let out = match edit(&mut nv) {
            Ok(out) => out,
            Err(e) => {
                undo();
                return Err(e);
            }
        };
        let new_logs = match flushed {
            Some(m) => LogState {
                log_number: m.wal_number + 1,
                last_seq: logs.last_seq.max(m.max_seq()),
            },
            None => *logs,
        };
        if let Err(e) = version::write(
            &*self.opts.fs,
            &self.dir,
            &nv,
            self.next_file.load(Ordering::Acquire),
            new_logs,
        ) {
            undo();
            return Err(e);
        }
        *logs = new_logs;
        let _vg = self.view_lock.lock();
        let v = self.view.load();
        let immutables = match flushed {
            Some(mem) => v
                .immutables
                .iter()
                .filter(|m| !Arc::ptr_eq(m, mem))
                .cloned()
                .collect(),
            None => v.immutables.clone(),
        };
        self.view.store(Arc::new(View {
            active: v.active.clone(),
            immutables,
            version: Arc::new(nv),
        }));
        if let Some(mem) = flushed {
            mem.release_budget();
        }
        Ok(out)
    }

    /// One unit of background work: a flush if one waits, else a compaction if one is due,
    /// else a value-log garbage collection if one is due (after sampling one log's liveness
    /// when a flush happened since the last sample).
    pub(crate) fn background_step(&self) -> Result<bool> {
        let res = match self.flush_oldest(false) {
            Ok(true) => Ok(true),
            Ok(false) => match self.compact_once(false) {
                Ok(true) => Ok(true),
                Ok(false) => self.sample_value_log().and_then(|_| {
                    self.gc_value_log(
                        self.opts.value_log_gc_live_ratio * GC_SHARE_OF_RELOCATION_RATIO,
                    )
                }),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        match &res {
            Ok(_) => *self.background_error.lock() = None,
            Err(e) => *self.background_error.lock() = Some(e.to_string()),
        }
        res
    }

    pub(crate) fn stats(&self) -> PartitionStats {
        let v = self.view.load();
        // Statistics are best effort: a log directory that cannot be listed counts as empty.
        let wal_bytes = [WAL_SUFFIX, MOVED_SUFFIX]
            .iter()
            .map(|suffix| {
                fsutil::numbered_files(&*self.opts.fs, &self.wal_dir, suffix)
                    .map(|files| {
                        files
                            .iter()
                            .map(|(_, p)| fsutil::file_len(&*self.opts.fs, p))
                            .sum::<u64>()
                    })
                    .unwrap_or(0)
            })
            .sum();
        let c = &self.counters;
        PartitionStats {
            memtable_bytes: v.active.bytes() as u64,
            immutable_memtables: v.immutables.len(),
            immutable_memtable_bytes: v.immutables.iter().map(|m| m.bytes() as u64).sum(),
            table_memory_bytes: v
                .version
                .levels
                .iter()
                .flatten()
                .map(|t| t.memory_bytes() as u64)
                .sum(),
            levels: v
                .version
                .levels
                .iter()
                .map(|l| LevelStats {
                    tables: l.len(),
                    bytes: l.iter().map(|t| t.size).sum(),
                })
                .collect(),
            wal_bytes,
            user_bytes_written: c.user_bytes.load(Ordering::Relaxed),
            wal_bytes_written: self.journal.bytes_written(),
            flush_bytes_written: c.flush_bytes.load(Ordering::Relaxed),
            compaction_bytes_written: c.compaction_bytes.load(Ordering::Relaxed),
            value_log_files: v.version.vlogs.len(),
            value_log_bytes: v.version.vlogs.values().map(|f| f.total_bytes).sum(),
            value_log_live_bytes: v
                .version
                .vlogs
                .values()
                .map(|f| f.live_bytes.load(Ordering::Relaxed))
                .sum(),
            value_log_gc_bytes_written: c.gc_bytes.load(Ordering::Relaxed),
            value_log_gcs: c.gcs.load(Ordering::Relaxed),
            moved_value_bytes_written: c.moved_bytes.load(Ordering::Relaxed),
            moved_value_files: c.moved_files.load(Ordering::Relaxed),
            flushes: c.flushes.load(Ordering::Relaxed),
            compactions: c.compactions.load(Ordering::Relaxed),
            write_stalls: c.stalls.load(Ordering::Relaxed),
            ..PartitionStats::default()
        }
    }

    /// A file number above every file of the tree so far.
    pub(crate) fn next_file_number(&self) -> u64 {
        self.next_file.load(Ordering::Acquire)
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Whether the newest version of `key` in `view` is the value at `offset` of value log `file`.
/// Once false, false for good: nothing new ever points into an old log. Value-log collection
/// and sampling ask this of every value they read: the blocks they read are not cached (they
/// would push out the blocks users read, as RocksDB's background reads with `fill_cache`
/// off do not).
pub(super) fn value_is_live(view: &View, key: &[u8], file: u64, offset: u64) -> Result<bool> {
    Ok(matches!(lookup(view, key, u64::MAX, false)?,
        Some(Slot::Pointer(p)) if p.file == file && p.offset == offset))
}

/// The newest entry for `key` in a view at sequence number `at`: memtables (versions up to
/// `at`), then level 0 newest first, then one table per deeper level (tables hold only
/// versions that were visible when they were written). Pointers are returned as they are.
/// `fill_cache`: keep a table block read in the block cache (users' reads only).
pub(super) fn lookup(v: &View, key: &[u8], at: u64, fill_cache: bool) -> Result<Option<Slot>> {
    let h = KeyHash::of(key);
    if let Some(s) = v.active.get(key, h, at) {
        return Ok(Some(s));
    }
    for m in &v.immutables {
        if let Some(s) = m.get(key, h, at) {
            return Ok(Some(s));
        }
    }
    lookup_tables_hashed(&v.version, key, h, fill_cache)
}

/// Whether the tables of `version` hold `key` (its newest version there is not a tombstone).
pub(super) fn in_tables(version: &Version, key: &[u8]) -> Result<bool> {
    Ok(names_a_value(lookup_tables(version, key, true)?))
}

/// Whether a lookup's newest version is a value (inline or in a value log), not a tombstone.
fn names_a_value(slot: Option<Slot>) -> bool {
    matches!(slot, Some(Slot::Put(_) | Slot::Pointer(_)))
}

/// The newest version of `key` in the tables of `version` (memtables not consulted).
fn lookup_tables(version: &Version, key: &[u8], fill_cache: bool) -> Result<Option<Slot>> {
    lookup_tables_hashed(version, key, KeyHash::of(key), fill_cache)
}

/// [`lookup_tables`] with the key's hash already computed.
fn lookup_tables_hashed(
    version: &Version,
    key: &[u8],
    h: KeyHash,
    fill_cache: bool,
) -> Result<Option<Slot>> {
    let h = h.0;
    for t in &version.levels[0] {
        if let Some(s) = t.get(key, h, fill_cache)? {
            return Ok(Some(s));
        }
    }
    for level in 1..LEVELS {
        if let Some(t) = version.find_in_level(level, key) {
            if let Some(s) = t.get(key, h, fill_cache)? {
                return Ok(Some(s));
            }
        }
    }
    Ok(None)
}

impl crate::options::SettledRead for Tree {
    fn settled(&self, key: &[u8]) -> Option<Option<Bytes>> {
        // A key of another partition is not in these tables: "absent" would be a lie.
        if crate::meta::route(&self.opts, key, self.opts.partitions) != self.id {
            return None;
        }
        self.settled_get(key).ok().flatten()
    }
}

/// Reads a separated value from the value logs of `version`.
/// The memtable log binding of a memtable whose writes go to `wal`.
pub(super) fn memtable_log(opts: &Options, wal: &journal::WalWriter) -> MemtableLog {
    MemtableLog {
        file: wal.file(),
        path: wal.path().to_path_buf(),
        tail: Some(wal.tail()),
        separate_bytes_min: opts.value_separation_bytes_min(),
    }
}

/// The newest slot at or below `at` of each key in `(lower, upper)` of view `v`: values,
/// unread pointers and tombstones.
pub(super) fn slots_at(
    v: &View,
    at: u64,
    lower: Bound<Bytes>,
    upper: Bound<Bytes>,
) -> MergeIter<Slot> {
    let mut sources = older_sources(v, at, &lower, &upper);
    let active = MemtableIter::new(v.active.clone(), at, lower, upper);
    sources.insert(0, Box::new(active.map(Ok)));
    MergeIter::new(sources)
}

/// The sources of [`slots_at`] but the active memtable, newest first: the immutable memtables
/// and the tables whose keys may lie in the range.
fn older_sources(v: &View, at: u64, lower: &Bound<Bytes>, upper: &Bound<Bytes>) -> Vec<SlotIter> {
    let mut sources: Vec<SlotIter> = Vec::new();
    for m in v.immutables.iter() {
        let it = MemtableIter::new(m.clone(), at, lower.clone(), upper.clone());
        sources.push(Box::new(it.map(Ok)));
    }
    // Level-0 tables overlap each other, but one whose keys all lie outside the range has
    // nothing to give: a short range scan (a collection's elements) skips it unopened.
    for t in v.version.levels[0]
        .iter()
        .filter(|t| in_range(t, lower, upper))
    {
        sources.push(Box::new(t.iter(lower.clone(), upper.clone(), true)));
    }
    for level in 1..LEVELS {
        let tables: Vec<Arc<Table>> = v.version.levels[level]
            .iter()
            .filter(|t| in_range(t, lower, upper))
            .cloned()
            .collect();
        if tables.is_empty() {
            continue;
        }
        let (lo, hi) = (lower.clone(), upper.clone());
        sources.push(Box::new(
            tables
                .into_iter()
                .flat_map(move |t| t.iter(lo.clone(), hi.clone(), true)),
        ));
    }
    sources
}

/// The value `slot` holds in view `v`: its bytes, the value it points at, or `None` for a
/// tombstone.
fn value_in_view(wal_dir: &Path, v: &View, slot: Slot) -> Result<Option<Bytes>> {
    Ok(match slot {
        Slot::Put(b) => Some(b),
        Slot::Delete => None,
        Slot::Pointer(p) => Some(resolve_in_view(wal_dir, v, &p)?),
    })
}

/// The value `p` points at, in view `v`: in a value log of its version, or in the log of one
/// of its memtables (a value the memtable left there: read from the file, or from the log's
/// tail before it reaches the file). It takes no partition lock, so a reader holding one (a
/// read-modify-write, a scan under the partition's lock) may call it.
pub(super) fn resolve_in_view(wal_dir: &Path, v: &View, p: &ValuePtr) -> Result<Bytes> {
    if !v.version.vlogs.contains_key(&p.file) {
        if let Some(m) = std::iter::once(&v.active)
            .chain(v.immutables.iter())
            .find(|m| m.wal_number == p.file)
        {
            return m.read_value(p);
        }
    }
    resolve_pointer(wal_dir, &v.version, p)
}

fn resolve_pointer(wal_dir: &Path, version: &Version, p: &ValuePtr) -> Result<Bytes> {
    match version.vlogs.get(&p.file) {
        Some(f) => f.read(p),
        // Not listed, so whether it was a log (`.log`) or a compaction's value file (`.vlog`)
        // is unknown: the error names the directory and the number.
        None => Err(Error::corruption(
            wal_dir,
            p.offset,
            format!(
                "a table points into value log number {} ({} or its .vlog), which the manifest does not list",
                p.file,
                journal::wal_path(wal_dir, p.file)
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            ),
        )),
    }
}

fn in_range(t: &Table, lower: &Bound<Bytes>, upper: &Bound<Bytes>) -> bool {
    above_lower(t, lower) && below_upper(t, upper)
}

/// Whether `t` holds keys at or above `lower` (its greatest key is not below it).
fn above_lower(t: &Table, lower: &Bound<Bytes>) -> bool {
    match lower {
        Bound::Included(l) => t.max_key >= *l,
        Bound::Excluded(l) => t.max_key > *l,
        Bound::Unbounded => true,
    }
}

/// Whether `t` holds keys at or below `upper` (its least key is not above it).
fn below_upper(t: &Table, upper: &Bound<Bytes>) -> bool {
    match upper {
        Bound::Included(u) => t.min_key <= *u,
        Bound::Excluded(u) => t.min_key < *u,
        Bound::Unbounded => true,
    }
}
