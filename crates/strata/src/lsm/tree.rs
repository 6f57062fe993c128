//! One partition: an LSM tree with its own write-ahead log, memtables, tables and manifest.
//!
//! Locks, in the order they may be taken: the journal's write lock (log append + memtable
//! insert; never held across fsync; group commit lives in `journal`), `flush_lock` /
//! `compaction_lock` (one job of each kind), `version_lock` (manifest writes), `view_lock`
//! (publishing a new [`View`]; no I/O under it). Readers take no lock: they load the current
//! `View` from an `ArcSwap` and keep it alive while they read.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

use crate::batch::{decode_entries, Entry, Kind};
use crate::cache::BlockCache;
use crate::error::{Error, IoContext, Result};
use crate::iter::{EntryIter, MergeIter};
use crate::journal::{Journal, JournalState};
use crate::lsm::compaction::{self, Job};
use crate::lsm::memtable::{Memtable, MemtableBudget, MemtableIter, Slot};
use crate::lsm::sstable::{bloom, table_path, Table, TableBuilder, TableMeta, TABLE_SUFFIX};
use crate::lsm::version::{self, Version};
use crate::lsm::vlog::{ValuePtr, VlogFile};
use crate::lsm::{fsutil, LEVELS};
use crate::options::Options;
use crate::stats::{LevelStats, PartitionStats};
use crate::wal::{self, WalWriter, WAL_SUFFIX};

/// What readers see: memtables newest first, then the tables of `version`.
pub(crate) struct View {
    pub(crate) active: Arc<Memtable>,
    /// Full memtables waiting for flush, newest first.
    pub(crate) immutables: Vec<Arc<Memtable>>,
    pub(crate) version: Arc<Version>,
}

#[derive(Default)]
struct Counters {
    user_bytes: AtomicU64,
    flush_bytes: AtomicU64,
    compaction_bytes: AtomicU64,
    flushes: AtomicU64,
    compactions: AtomicU64,
    stalls: AtomicU64,
    gc_bytes: AtomicU64,
    gcs: AtomicU64,
}

/// Live values that value-log garbage collection rewrites under one hold of the write lock.
const GC_REWRITE_CHUNK_ENTRIES: usize = 64;
/// ... or fewer, once they reach this many bytes.
const GC_REWRITE_CHUNK_BYTES: usize = 256 << 10;

/// Values checked when a value log is sampled for liveness.
const VLOG_SAMPLE_VALUES: u64 = 256;

/// An atomic read-modify-write decision (see [`crate::Db::update`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// Leave the key as it is.
    Keep,
    /// Store this value.
    Put(Vec<u8>),
    /// Delete the key.
    Delete,
}

/// Hands a partition index to the background workers.
pub(crate) type Scheduler = crossbeam_channel::Sender<usize>;

pub(crate) struct Tree {
    pub(crate) id: usize,
    dir: PathBuf,
    wal_dir: PathBuf,
    sst_dir: PathBuf,
    opts: Arc<Options>,
    cache: Arc<BlockCache>,
    /// Memtable memory of the whole database, shared with the other partitions.
    memtable_budget: Arc<MemtableBudget>,
    journal: Journal,
    view: ArcSwap<View>,
    view_lock: Mutex<()>,
    /// Guards manifest writes; holds the current log number.
    version_lock: Mutex<u64>,
    next_file: AtomicU64,
    /// Scratch for the value offsets of a batch (used under the journal lock).
    value_offsets: Mutex<Vec<u32>>,
    gc_lock: Mutex<()>,
    /// The flush count at the last value-log sample (one sample per flush at most).
    sampled_at_flush: AtomicU64,
    flush_lock: Mutex<()>,
    compaction_lock: Mutex<()>,
    stall_lock: Mutex<()>,
    stall_cv: Condvar,
    /// Next key per level where round-robin compaction picks up.
    cursors: Mutex<Vec<Bytes>>,
    scheduler: Scheduler,
    pub(crate) work_pending: AtomicBool,
    background_error: Mutex<Option<String>>,
    counters: Counters,
}

/// A full compaction collects value logs whose live share is below this.
const FULL_COMPACTION_GC_LIVE_RATIO: f64 = 0.9;

/// What [`Tree::throttle`] does to a writer.
enum Pace {
    Go,
    /// Sleep 100 us per step.
    Slow(u64),
    /// Wait for background work.
    Stop,
}

impl Tree {
    /// Opens (or creates) the partition in `dir`, replaying its write-ahead logs.
    pub(crate) fn open(
        id: usize,
        dir: PathBuf,
        opts: Arc<Options>,
        cache: Arc<BlockCache>,
        memtable_budget: Arc<MemtableBudget>,
        scheduler: Scheduler,
    ) -> Result<Tree> {
        let wal_dir = dir.join("wal");
        let sst_dir = dir.join("sst");
        for d in [&dir, &wal_dir, &sst_dir] {
            fsutil::create_dir_durably(d)?;
        }
        let mut cleaned = fsutil::remove_tmp_files(&dir)?;
        cleaned += fsutil::remove_tmp_files(&sst_dir)?;
        if cleaned > 0 {
            tracing::info!(
                partition = id,
                files = cleaned,
                "removed leftover temporary files"
            );
        }
        let manifest = version::read(&dir)?;
        let (mut next_file, log_number, metas, vlog_metas) = match manifest {
            Some(m) => (m.next_file_number, m.log_number, m.levels, m.vlogs),
            None => (1, 0, vec![Vec::new(); LEVELS], Vec::new()),
        };
        let mut version = Version::empty();
        let mut live = std::collections::HashSet::new();
        for (level, tables) in metas.iter().enumerate() {
            for meta in tables {
                let path = table_path(&sst_dir, meta.id);
                if !path.exists() {
                    return Err(Error::corruption(
                        &path,
                        0,
                        "table listed in the manifest is missing",
                    ));
                }
                let table = Table::open(&path, meta.id, cache.clone())?;
                if table.size != meta.size
                    || table.entries != meta.entries
                    || table.min_key != meta.min_key
                    || table.max_key != meta.max_key
                {
                    return Err(Error::corruption(
                        &path,
                        0,
                        "table does not match its manifest entry (size, entry count or key range)",
                    ));
                }
                version.levels[level].push(Arc::new(table));
                live.insert(meta.id);
                next_file = next_file.max(meta.id + 1);
            }
        }
        for (num, path) in fsutil::numbered_files(&sst_dir, TABLE_SUFFIX)? {
            next_file = next_file.max(num + 1);
            if !live.contains(&num) {
                // Written by a flush or compaction that crashed before its manifest edit.
                tracing::info!(path = %path.display(), "removing table not in the manifest");
                std::fs::remove_file(&path).at(&path)?;
            }
        }
        for &(num, _total, live) in &vlog_metas {
            let path = wal::wal_path(&wal_dir, num);
            if !path.exists() {
                return Err(Error::corruption(
                    &path,
                    0,
                    "value log listed in the manifest is missing",
                ));
            }
            version
                .vlogs
                .insert(num, Arc::new(VlogFile::open(&path, num, live, 0)?));
        }
        let mut immutables = Vec::new();
        let mut seq = 0u64;
        let mut replayed_bytes = 0u64;
        for (num, path) in fsutil::numbered_files(&wal_dir, WAL_SUFFIX)? {
            next_file = next_file.max(num + 1);
            if num < log_number {
                if !version.vlogs.contains_key(&num) {
                    std::fs::remove_file(&path).at(&path)?;
                }
                continue;
            }
            let mem = Memtable::new(num, memtable_budget.clone());
            let replay = wal::replay(&path, |payload, offset| {
                let entries = decode_entries(payload).ok_or_else(|| {
                    Error::corruption(&path, offset, "log record holds a malformed batch")
                })?;
                // Where each value sits in the file: record offset, record header, then its
                // position inside the payload.
                let payload_at = offset + wal::RECORD_HEADER_BYTES as u64;
                for (kind, key, value) in entries {
                    let in_payload = value.as_ptr() as usize - payload.as_ptr() as usize;
                    mem.insert(kind, key, value, payload_at + in_payload as u64);
                }
                seq += 1;
                Ok(())
            })?;
            replayed_bytes += replay.valid_bytes;
            if let Some((offset, reason)) = replay.torn {
                tracing::warn!(path = %path.display(), offset, reason, "truncating torn write-ahead log tail");
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .at(&path)?;
                f.set_len(replay.valid_bytes).at(&path)?;
                f.sync_all().at(&path)?;
            }
            immutables.insert(0, Arc::new(mem));
        }
        if replayed_bytes > 0 {
            tracing::debug!(
                partition = id,
                logs = immutables.len(),
                bytes = replayed_bytes,
                "replayed write-ahead logs"
            );
        }
        let wal_number = next_file;
        next_file += 1;
        let wal = WalWriter::create(wal::wal_path(&wal_dir, wal_number), seq)?;
        let sync = opts.sync;
        let view = View {
            active: Arc::new(Memtable::new(wal_number, memtable_budget.clone())),
            immutables,
            version: Arc::new(version),
        };
        let tree = Tree {
            id,
            dir,
            wal_dir,
            sst_dir,
            opts,
            cache,
            memtable_budget,
            journal: Journal::new(id, sync, wal, seq),
            view: ArcSwap::from_pointee(view),
            view_lock: Mutex::new(()),
            version_lock: Mutex::new(log_number),
            next_file: AtomicU64::new(next_file),
            value_offsets: Mutex::new(Vec::new()),
            gc_lock: Mutex::new(()),
            sampled_at_flush: AtomicU64::new(0),
            flush_lock: Mutex::new(()),
            compaction_lock: Mutex::new(()),
            stall_lock: Mutex::new(()),
            stall_cv: Condvar::new(),
            cursors: Mutex::new(vec![Bytes::new(); LEVELS]),
            scheduler,
            work_pending: AtomicBool::new(false),
            background_error: Mutex::new(None),
            counters: Counters::default(),
        };
        Ok(tree)
    }

    /// Asks the background workers to look at this partition (once until they do).
    pub(crate) fn request_work(&self) {
        if !self.work_pending.swap(true, Ordering::AcqRel) {
            let _ = self.scheduler.send(self.id);
        }
    }

    fn read_only_error(&self, reason: &str) -> Error {
        Error::ReadOnly {
            partition: self.id,
            reason: reason.to_string(),
        }
    }

    /// How far background work is behind, as seen by a writer now.
    fn pace(&self, v: &View) -> Pace {
        let l0 = v.version.levels[0].len();
        if v.immutables.len() >= self.opts.max_immutable_memtables || l0 >= self.opts.l0_stop_tables
        {
            Pace::Stop
        } else if l0 >= self.opts.l0_slowdown_tables {
            // Gradual: the further behind compaction is, the longer each write waits.
            Pace::Slow((l0 - self.opts.l0_slowdown_tables + 1) as u64)
        } else {
            Pace::Go
        }
    }

    /// Whether a write now would be slowed or stopped by [`Tree::throttle`].
    pub(crate) fn writes_would_wait(&self) -> bool {
        !matches!(self.pace(&self.view.load()), Pace::Go)
    }

    /// Slows writers down, then stops them, while flushes or level-0 compactions are behind,
    /// so memory and read amplification stay bounded.
    fn throttle(&self) -> Result<()> {
        let mut waited_ms = 0u64;
        loop {
            let v = self.view.load();
            match self.pace(&v) {
                Pace::Go => return Ok(()),
                Pace::Slow(steps) => {
                    self.counters.stalls.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_micros(100 * steps));
                    return Ok(());
                }
                Pace::Stop => {}
            }
            drop(v);
            if waited_ms == 0 {
                self.counters.stalls.fetch_add(1, Ordering::Relaxed);
            }
            if let Some(e) = self.background_error.lock().clone() {
                if waited_ms >= 1_000 {
                    return Err(self.read_only_error(&format!(
                        "background work is failing, writes cannot proceed: {e}"
                    )));
                }
            }
            self.request_work();
            let mut g = self.stall_lock.lock();
            self.stall_cv.wait_for(&mut g, Duration::from_millis(20));
            waited_ms += 20;
        }
    }

    fn wake_stalled(&self) {
        let _g = self.stall_lock.lock();
        self.stall_cv.notify_all();
    }

    /// Appends a batch to the log and the memtable. Caller holds the journal lock.
    fn apply_locked(&self, st: &mut JournalState, entries: &[Entry<'_>]) -> Result<u64> {
        self.apply_locked_as(st, entries, true)
    }

    /// `user`: whether the bytes count as written by the user (not for garbage collection).
    fn apply_locked_as(
        &self,
        st: &mut JournalState,
        entries: &[Entry<'_>],
        user: bool,
    ) -> Result<u64> {
        let mut offsets = std::mem::take(&mut *self.value_offsets.lock());
        let appended = self
            .journal
            .append_locked(st, entries, Some(&mut offsets))?;
        let payload_at = appended.offset + wal::RECORD_HEADER_BYTES as u64;
        let view = self.view.load();
        let mut user_bytes = 0u64;
        for (&(kind, key, value), &at) in entries.iter().zip(offsets.iter()) {
            user_bytes += (key.len() + value.len()) as u64;
            view.active.insert(kind, key, value, payload_at + at as u64);
        }
        *self.value_offsets.lock() = offsets;
        if user {
            self.counters
                .user_bytes
                .fetch_add(user_bytes, Ordering::Relaxed);
        }
        let full = view.active.bytes() >= self.opts.memtable_bytes_max
            || self.memtable_budget.wants_switch(view.active.bytes())
            || self
                .opts
                .memtable_entries_max
                .is_some_and(|n| view.active.entries() >= n);
        drop(view);
        if full {
            self.rotate_locked(st)?;
        }
        Ok(appended.seq)
    }

    /// Switches to a new memtable and log; the old memtable waits for flush.
    fn rotate_locked(&self, st: &mut JournalState) -> Result<()> {
        let number = self.next_file.fetch_add(1, Ordering::AcqRel);
        self.journal
            .rotate_locked(st, wal::wal_path(&self.wal_dir, number))?;
        let mem = Arc::new(Memtable::new(number, self.memtable_budget.clone()));
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
        self.request_work();
        Ok(())
    }

    pub(crate) fn write(&self, entries: &[Entry<'_>]) -> Result<()> {
        self.throttle()?;
        let seq = {
            let mut st = self.journal.lock();
            self.apply_locked(&mut st, entries)?
        };
        self.journal.commit(seq)
    }

    /// Atomic read-modify-write of one key under the write lock.
    pub(crate) fn update<T>(
        &self,
        key: &[u8],
        f: impl FnOnce(Option<&[u8]>) -> Result<(Update, T)>,
        check: impl Fn(&[u8], &[u8]) -> Result<()>,
    ) -> Result<T> {
        self.throttle()?;
        self.journal.read_modify_write(
            key,
            |_| self.get(key),
            f,
            check,
            |st, entries| self.apply_locked(st, entries),
        )
    }

    /// Hands buffered log records to the OS and, with `fsync`, forces them to disk.
    pub(crate) fn sync_now(&self, fsync: bool) -> Result<()> {
        self.journal.sync_now(fsync)
    }

    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        let v = self.view.load();
        match lookup(&v, key)? {
            None | Some(Slot::Delete) => Ok(None),
            Some(Slot::Put(b)) => Ok(Some(b)),
            Some(Slot::Pointer(p)) => resolve_pointer(&v.version, &p).map(Some),
        }
    }

    /// Entries (tombstones included) in `(lower, upper)`, newest version of each key.
    pub(crate) fn iter(&self, lower: Bound<Bytes>, upper: Bound<Bytes>) -> EntryIter {
        let v = self.view.load_full();
        let mut sources: Vec<EntryIter> = Vec::new();
        for m in std::iter::once(&v.active).chain(v.immutables.iter()) {
            let it = MemtableIter::new(m.clone(), lower.clone(), upper.clone());
            sources.push(Box::new(it.map(Ok)));
        }
        for t in &v.version.levels[0] {
            sources.push(Box::new(t.iter(lower.clone(), upper.clone(), true)));
        }
        for level in 1..LEVELS {
            let tables: Vec<Arc<Table>> = v.version.levels[level]
                .iter()
                .filter(|t| in_range(t, &lower, &upper))
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
        // Values behind pointers are read as the scan reaches them, from the value logs of the
        // version the scan started on (which keeps them open).
        Box::new(MergeIter::new(sources).map(move |r| match r {
            Ok((k, Slot::Pointer(p))) => resolve_pointer(&v.version, &p).map(|b| (k, Slot::Put(b))),
            other => other,
        }))
    }

    /// Flushes the oldest immutable memtable. With `wait`, waits for a running flush instead of
    /// returning. Returns whether a memtable was flushed.
    pub(crate) fn flush_oldest(&self, wait: bool) -> Result<bool> {
        let _g = if wait {
            self.flush_lock.lock()
        } else {
            match self.flush_lock.try_lock() {
                Some(g) => g,
                None => return Ok(false),
            }
        };
        let Some(mem) = self.view.load().immutables.last().cloned() else {
            return Ok(false);
        };
        let mut separated = 0u64;
        let table = if mem.is_empty() {
            None
        } else {
            let id = self.next_file.fetch_add(1, Ordering::AcqRel);
            let mut b = TableBuilder::create(&self.sst_dir, id, &self.opts)?;
            let sep = self.opts.value_separation_bytes_min();
            mem.for_each(|k, s, value_offset| match s {
                Slot::Put(v) if v.len() >= sep => {
                    separated += v.len() as u64;
                    b.add(
                        k,
                        &Slot::Pointer(ValuePtr {
                            file: mem.wal_number,
                            offset: value_offset,
                            len: v.len() as u32,
                            crc: crc32c::crc32c(v),
                        }),
                    )
                }
                _ => b.add(k, s),
            })?;
            let meta = b.finish()?;
            fsutil::sync_dir(&self.sst_dir)?;
            self.counters
                .flush_bytes
                .fetch_add(meta.size, Ordering::Relaxed);
            Some(Arc::new(Table::open(
                &table_path(&self.sst_dir, id),
                id,
                self.cache.clone(),
            )?))
        };
        {
            let mut log_number = self.version_lock.lock();
            let mut nv = (*self.view.load().version).clone();
            if let Some(t) = table {
                nv.levels[0].insert(0, t);
            }
            if separated > 0 {
                // The log keeps living as a value log: the new table points into it.
                let path = wal::wal_path(&self.wal_dir, mem.wal_number);
                nv.vlogs.insert(
                    mem.wal_number,
                    Arc::new(VlogFile::open(
                        &path,
                        mem.wal_number,
                        separated,
                        self.counters.flushes.load(Ordering::Relaxed),
                    )?),
                );
            }
            let new_log_number = mem.wal_number + 1;
            version::write(
                &self.dir,
                &nv,
                self.next_file.load(Ordering::Acquire),
                new_log_number,
            )?;
            *log_number = new_log_number;
            let _vg = self.view_lock.lock();
            let v = self.view.load();
            self.view.store(Arc::new(View {
                active: v.active.clone(),
                immutables: v
                    .immutables
                    .iter()
                    .filter(|m| !Arc::ptr_eq(m, &mem))
                    .cloned()
                    .collect(),
                version: Arc::new(nv),
            }));
        }
        // The manifest edit is durable: unless it became a value log, the log of this memtable
        // holds nothing that is not in a table any more.
        if separated == 0 {
            let path = wal::wal_path(&self.wal_dir, mem.wal_number);
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), error = %e, "could not delete flushed log");
            }
        }
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        self.wake_stalled();
        Ok(true)
    }

    /// Makes `nv` the version readers see (memtables unchanged). Caller holds `version_lock`.
    fn publish_version(&self, nv: Version) {
        let _vg = self.view_lock.lock();
        let v = self.view.load();
        self.view.store(Arc::new(View {
            active: v.active.clone(),
            immutables: v.immutables.clone(),
            version: Arc::new(nv),
        }));
    }

    /// A builder for a table of this partition (bulk ingest writes tables directly).
    pub(crate) fn new_table(&self) -> Result<TableBuilder> {
        let id = self.next_file.fetch_add(1, Ordering::AcqRel);
        TableBuilder::create(&self.sst_dir, id, &self.opts)
    }

    /// Installs tables written by bulk ingest. Their data counts as newer than everything in
    /// the tree (the caller flushed memtables first), so they go to the deepest level where no
    /// table of that level or above overlaps them; with level-0 overlap, to level 0.
    pub(crate) fn install_ingested(&self, metas: Vec<TableMeta>) -> Result<usize> {
        if metas.is_empty() {
            return Ok(0);
        }
        fsutil::sync_dir(&self.sst_dir)?;
        let mut tables = Vec::with_capacity(metas.len());
        for m in &metas {
            self.counters
                .flush_bytes
                .fetch_add(m.size, Ordering::Relaxed);
            tables.push(Arc::new(Table::open(
                &table_path(&self.sst_dir, m.id),
                m.id,
                self.cache.clone(),
            )?));
        }
        let lo = tables
            .iter()
            .map(|t| t.min_key.clone())
            .min()
            .unwrap_or_default();
        let hi = tables
            .iter()
            .map(|t| t.max_key.clone())
            .max()
            .unwrap_or_default();
        // No compaction may move tables while we pick the level.
        let _c = self.compaction_lock.lock();
        let log_number = self.version_lock.lock();
        let mut nv = (*self.view.load().version).clone();
        let l0_overlaps = nv.levels[0]
            .iter()
            .any(|t| t.max_key >= lo && t.min_key <= hi);
        let mut level = 0;
        if !l0_overlaps {
            for l in 1..LEVELS {
                if !nv.overlapping(l, &lo, &hi).is_empty() {
                    break;
                }
                level = l;
            }
        }
        let target = &mut nv.levels[level];
        if level == 0 {
            for t in tables {
                target.insert(0, t);
            }
        } else {
            target.extend(tables);
            target.sort_by(|a, b| a.min_key.cmp(&b.min_key));
        }
        version::write(
            &self.dir,
            &nv,
            self.next_file.load(Ordering::Acquire),
            *log_number,
        )?;
        self.publish_version(nv);
        Ok(level)
    }

    /// Runs one compaction if one is due (or a full one with `full`). Returns whether it ran.
    pub(crate) fn compact_once(&self, full: bool) -> Result<bool> {
        let _g = if full {
            self.compaction_lock.lock()
        } else {
            match self.compaction_lock.try_lock() {
                Some(g) => g,
                None => return Ok(false),
            }
        };
        let version = self.view.load().version.clone();
        let job = if full {
            compaction::pick_full(&version)
        } else {
            compaction::pick(&version, &self.opts, &mut self.cursors.lock())
        };
        let Some(job) = job else { return Ok(false) };
        self.run_compaction(job)?;
        self.counters.compactions.fetch_add(1, Ordering::Relaxed);
        self.wake_stalled();
        Ok(true)
    }

    fn run_compaction(&self, job: Job) -> Result<()> {
        let mut outputs: Vec<Arc<Table>> = Vec::new();
        let result = compaction::merge(
            &job,
            &self.opts,
            || {
                let id = self.next_file.fetch_add(1, Ordering::AcqRel);
                TableBuilder::create(&self.sst_dir, id, &self.opts)
            },
            |meta| {
                self.counters
                    .compaction_bytes
                    .fetch_add(meta.size, Ordering::Relaxed);
                let t = Table::open(
                    &table_path(&self.sst_dir, meta.id),
                    meta.id,
                    self.cache.clone(),
                )?;
                outputs.push(Arc::new(t));
                Ok(())
            },
        )
        .and_then(|dead| fsutil::sync_dir(&self.sst_dir).map(|()| dead))
        .and_then(|dead| {
            let _log = self.version_lock.lock();
            let mut nv = (*self.view.load().version).clone();
            let gone: std::collections::HashSet<u64> = job.inputs.iter().map(|t| t.id).collect();
            for level in nv.levels.iter_mut() {
                level.retain(|t| !gone.contains(&t.id));
            }
            let out = &mut nv.levels[job.output_level];
            out.extend(outputs.iter().cloned());
            out.sort_by(|a, b| a.min_key.cmp(&b.min_key));
            // Value logs lose the bytes whose pointers this merge dropped; one that no table
            // points into any more leaves the version (and the disk, once unused).
            let mut undo: Vec<(Arc<VlogFile>, u64)> = Vec::new();
            for (file, bytes) in dead {
                if let Some(vlog) = nv.vlogs.get(&file) {
                    let old = vlog.live_bytes.load(Ordering::Acquire);
                    vlog.live_bytes
                        .store(old.saturating_sub(bytes), Ordering::Release);
                    undo.push((vlog.clone(), old));
                }
            }
            let emptied: Vec<Arc<VlogFile>> = nv
                .vlogs
                .values()
                .filter(|v| v.live_bytes.load(Ordering::Acquire) == 0)
                .cloned()
                .collect();
            for v in &emptied {
                nv.vlogs.remove(&v.number);
            }
            if let Err(e) = version::write(
                &self.dir,
                &nv,
                self.next_file.load(Ordering::Acquire),
                *_log,
            ) {
                for (v, old) in undo {
                    v.live_bytes.store(old, Ordering::Release);
                }
                return Err(e);
            }
            for v in &emptied {
                v.obsolete.store(true, Ordering::Release);
            }
            self.publish_version(nv);
            Ok(())
        });
        match result {
            Ok(()) => {
                for t in &job.inputs {
                    t.obsolete.store(true, Ordering::Release);
                }
                Ok(())
            }
            Err(e) => {
                for t in &outputs {
                    t.obsolete.store(true, Ordering::Release);
                }
                Err(e)
            }
        }
    }

    /// Merges every level into one and collects the value logs that leaves garbage in. Live
    /// counts are exact after a full merge. A full compaction is asked for to get space back, so
    /// it also collects value logs that background collection leaves alone: any with a tenth or
    /// more dead, such as a log whose small values went into tables at flush.
    pub(crate) fn compact_fully(&self) -> Result<()> {
        self.compact_once(true)?;
        let ratio = self
            .opts
            .value_log_gc_live_ratio
            .max(FULL_COMPACTION_GC_LIVE_RATIO);
        while self.gc_value_log(ratio)? {}
        Ok(())
    }

    /// Garbage-collects the value log with the smallest live share, if it is below
    /// `live_ratio_below`: its values that are still the newest version of their key are written
    /// again through the normal write path, the log is fsynced, and the value log leaves the
    /// version. Returns whether one was collected.
    pub(crate) fn gc_value_log(&self, live_ratio_below: f64) -> Result<bool> {
        let Some(_g) = self.gc_lock.try_lock() else {
            return Ok(false);
        };
        let version = self.view.load().version.clone();
        let victim = version
            .vlogs
            .values()
            .filter(|f| f.live_ratio() < live_ratio_below)
            .min_by(|a, b| a.live_ratio().total_cmp(&b.live_ratio()))
            .cloned();
        drop(version);
        let Some(victim) = victim else {
            return Ok(false);
        };
        let path = victim.path().to_path_buf();
        let mut rewritten = 0u64;
        // A value is live only if the newest version of its key still points at it. Once dead it
        // stays dead (nothing new ever points into an old log), so the first check runs without
        // the write lock and filters out the dead majority; the live ones are checked again and
        // rewritten under the lock, a chunk at a time, so writers wait only for short stretches.
        let is_live =
            |view: &View, key: &[u8], at: u64| value_is_live(view, key, victim.number, at);
        let mut pending: Vec<(Vec<u8>, Vec<u8>, u64)> = Vec::new();
        let mut pending_bytes = 0usize;
        let mut rewrite = |pending: &mut Vec<(Vec<u8>, Vec<u8>, u64)>| -> Result<()> {
            if pending.is_empty() {
                return Ok(());
            }
            let mut st = self.journal.lock();
            let view = self.view.load();
            let mut live: Vec<Entry<'_>> = Vec::with_capacity(pending.len());
            for (key, value, at) in pending.iter() {
                if is_live(&view, key, *at)? {
                    live.push((Kind::Put, key, value));
                    rewritten += value.len() as u64;
                }
            }
            drop(view);
            if !live.is_empty() {
                self.apply_locked_as(&mut st, &live, false)?;
            }
            drop(st);
            pending.clear();
            Ok(())
        };
        wal::replay(&path, |payload, offset| {
            let entries = decode_entries(payload).ok_or_else(|| {
                Error::corruption(&path, offset, "value log record holds a malformed batch")
            })?;
            let payload_at = offset + wal::RECORD_HEADER_BYTES as u64;
            let view = self.view.load();
            for &(kind, key, value) in &entries {
                if kind != Kind::Put {
                    continue;
                }
                let at = payload_at + (value.as_ptr() as usize - payload.as_ptr() as usize) as u64;
                // Every put is checked, whatever its size: the separation threshold may have
                // changed since it was written.
                if is_live(&view, key, at)? {
                    pending_bytes += key.len() + value.len();
                    pending.push((key.to_vec(), value.to_vec(), at));
                }
            }
            drop(view);
            if pending.len() >= GC_REWRITE_CHUNK_ENTRIES || pending_bytes >= GC_REWRITE_CHUNK_BYTES
            {
                rewrite(&mut pending)?;
                pending_bytes = 0;
            }
            Ok(())
        })?;
        rewrite(&mut pending)?;
        // The copies must be durable before the originals can go.
        self.journal.sync_now(true)?;
        {
            let log_number = self.version_lock.lock();
            let mut nv = (*self.view.load().version).clone();
            nv.vlogs.remove(&victim.number);
            version::write(
                &self.dir,
                &nv,
                self.next_file.load(Ordering::Acquire),
                *log_number,
            )?;
            self.publish_version(nv);
        }
        // Deleted once no reader holds an older version that still lists it.
        victim.obsolete.store(true, Ordering::Release);
        self.counters
            .gc_bytes
            .fetch_add(rewritten, Ordering::Relaxed);
        self.counters.gcs.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// Estimates how much of the least recently sampled value log is live by looking up
    /// `VLOG_SAMPLE_VALUES` of its values, spread evenly over the file, and keeps the estimate
    /// beside its tracked live bytes. Runs at most once per flush. Returns whether it sampled.
    pub(crate) fn sample_value_log(&self) -> Result<bool> {
        let flushes = self.counters.flushes.load(Ordering::Relaxed);
        if self.sampled_at_flush.swap(flushes, Ordering::AcqRel) == flushes {
            return Ok(false);
        }
        let view = self.view.load_full();
        let Some(log) = view
            .version
            .vlogs
            .values()
            .filter(|f| f.sampled_at_flush.load(Ordering::Relaxed) < flushes)
            .min_by_key(|f| (f.sampled_at_flush.load(Ordering::Relaxed), f.number))
            .cloned()
        else {
            return Ok(false);
        };
        log.sampled_at_flush.store(flushes, Ordering::Relaxed);
        let stride_bytes = (log.total_bytes / VLOG_SAMPLE_VALUES).max(1);
        let (mut next_mark, mut sampled, mut live) = (0u64, 0u64, 0u64);
        let path = log.path().to_path_buf();
        wal::replay(&path, |payload, offset| {
            if offset < next_mark {
                return Ok(());
            }
            next_mark = offset + stride_bytes;
            let entries = decode_entries(payload).ok_or_else(|| {
                Error::corruption(&path, offset, "value log record holds a malformed batch")
            })?;
            let payload_at = offset + wal::RECORD_HEADER_BYTES as u64;
            for &(kind, key, value) in &entries {
                if kind != Kind::Put {
                    continue;
                }
                // Small values count too: a table holds them inline, so their copy here is dead.
                let at = payload_at + (value.as_ptr() as usize - payload.as_ptr() as usize) as u64;
                sampled += value.len() as u64;
                if value_is_live(&view, key, log.number, at)? {
                    live += value.len() as u64;
                }
            }
            Ok(())
        })?;
        if sampled > 0 {
            let estimate = (log.total_bytes as f64 * live as f64 / sampled as f64) as u64;
            log.sampled_live_bytes.store(estimate, Ordering::Release);
        }
        Ok(true)
    }

    /// One unit of background work: a flush if one waits, else a compaction if one is due,
    /// else a value-log garbage collection if one is due (after sampling one log's liveness
    /// when a flush happened since the last sample).
    pub(crate) fn background_step(&self) -> Result<bool> {
        let res = match self.flush_oldest(false) {
            Ok(true) => Ok(true),
            Ok(false) => match self.compact_once(false) {
                Ok(true) => Ok(true),
                Ok(false) => self
                    .sample_value_log()
                    .and_then(|_| self.gc_value_log(self.opts.value_log_gc_live_ratio)),
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

    /// Makes the active memtable immutable (if it holds anything) and flushes all memtables.
    pub(crate) fn flush_all(&self) -> Result<()> {
        {
            let mut st = self.journal.lock();
            self.journal.check_writable(&st)?;
            if !self.view.load().active.is_empty() {
                self.rotate_locked(&mut st)?;
            }
        }
        while self.flush_oldest(true)? {}
        Ok(())
    }

    pub(crate) fn stats(&self) -> PartitionStats {
        let v = self.view.load();
        let wal_bytes = fsutil::numbered_files(&self.wal_dir, WAL_SUFFIX)
            .map(|files| files.iter().map(|(_, p)| fsutil::file_len(p)).sum())
            .unwrap_or(0);
        let c = &self.counters;
        PartitionStats {
            memtable_bytes: v.active.bytes() as u64,
            immutable_memtables: v.immutables.len(),
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
            flushes: c.flushes.load(Ordering::Relaxed),
            compactions: c.compactions.load(Ordering::Relaxed),
            write_stalls: c.stalls.load(Ordering::Relaxed),
            ..PartitionStats::default()
        }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The newest entry for `key` in a view: memtables, then level 0 newest first, then one table
/// per deeper level. Pointers are returned as they are.
/// Whether the newest version of `key` is the value at `offset` of value log `file`. Once false,
/// false for good: nothing new ever points into an old log.
fn value_is_live(view: &View, key: &[u8], file: u64, offset: u64) -> Result<bool> {
    Ok(matches!(lookup(view, key)?,
        Some(Slot::Pointer(p)) if p.file == file && p.offset == offset))
}

fn lookup(v: &View, key: &[u8]) -> Result<Option<Slot>> {
    if let Some(s) = v.active.get(key) {
        return Ok(Some(s));
    }
    for m in &v.immutables {
        if let Some(s) = m.get(key) {
            return Ok(Some(s));
        }
    }
    let h = bloom::hash(key);
    for t in &v.version.levels[0] {
        if let Some(s) = t.get(key, h)? {
            return Ok(Some(s));
        }
    }
    for level in 1..LEVELS {
        if let Some(t) = v.version.find_in_level(level, key) {
            if let Some(s) = t.get(key, h)? {
                return Ok(Some(s));
            }
        }
    }
    Ok(None)
}

/// Reads a separated value from the value logs of `version`.
fn resolve_pointer(version: &Version, p: &ValuePtr) -> Result<Bytes> {
    match version.vlogs.get(&p.file) {
        Some(f) => f.read(p),
        None => Err(Error::InvalidArgument(format!(
            "value log {} referenced by a table is not in the manifest",
            p.file
        ))),
    }
}

fn in_range(t: &Table, lower: &Bound<Bytes>, upper: &Bound<Bytes>) -> bool {
    let above_lower = match lower {
        Bound::Included(l) => t.max_key >= *l,
        Bound::Excluded(l) => t.max_key > *l,
        Bound::Unbounded => true,
    };
    let below_upper = match upper {
        Bound::Included(u) => t.min_key <= *u,
        Bound::Excluded(u) => t.min_key < *u,
        Bound::Unbounded => true,
    };
    above_lower && below_upper
}
