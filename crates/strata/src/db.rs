//! The database: routes each key to its partition by a stable hash, runs the background
//! workers and the log syncer, and merges partitions for scans.

use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use bytes::Bytes;
use crossbeam_channel::Sender;
use parking_lot::Mutex;

use crate::background;
pub use crate::batch::Update;
use crate::batch::{Entry, Kind, WriteBatch};
use crate::error::{Error, Result};
use crate::hashlog::LogStore;
use crate::journal::{self, GroupRead};
use crate::lsm::ingest;
use crate::lsm::memtable::MemtableBudget;
use crate::lsm::recovery::{Recovered, Shared};
use crate::lsm::tree::Tree;
use crate::meta;
use crate::options::{Engine, Options, SyncMode};
use crate::partition::Partition;
use crate::seqno::Sequencer;
use crate::snapshot::Snapshot;
use crate::stats::Stats;
use crate::txn::Transaction;
use crate::util::cache::BlockCache;
use crate::util::fsutil;
use crate::util::merge::{EntryIter, MergeIter};
use crate::util::work;
use crate::vfs::RealFs;

/// Largest write batch accepted, in bytes of keys and values.
pub const BATCH_BYTES_MAX: usize = 1 << 30;
/// Entries per batch when ingest writes into the log engine (which has no tables to build).
const INGEST_LOG_BATCH_ENTRIES: usize = 1024;
/// Times `Db::recount_keys` counts a partition again when keys changed outside the write path
/// while it counted.
const RECOUNT_TRIES: usize = 3;

/// An open database. `Send + Sync`: share it between threads with an `Arc`.
/// Dropping it closes it (see [`Db::close`] to see errors).
pub struct Db {
    inner: Arc<Inner>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    stop_tx: Sender<()>,
    closed: AtomicBool,
}

pub(crate) struct Inner {
    pub(crate) dir: PathBuf,
    pub(crate) opts: Arc<Options>,
    pub(crate) partitions: Vec<Partition>,
    /// Sequence numbers of every write, across partitions.
    pub(crate) seqs: Arc<Sequencer>,
    /// The block cache every partition's tables share (its size is reported by `Db::stats`).
    cache: Arc<BlockCache>,
}

/// What opening one partition found that the database decides on.
enum Opened {
    Lsm(Box<Tree>, Recovered),
    Log(Arc<LogStore>, u64),
}

impl Db {
    /// Opens the database in `path`, creating it if `options.create_if_missing`. Replays the
    /// write-ahead logs; a torn final log record is truncated (and logged), any other damage is
    /// an error naming the file and offset.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        options.validate()?;
        let dir = path.as_ref().to_path_buf();
        if !options.fs.exists(&dir) && !options.create_if_missing {
            return Err(Error::InvalidArgument(format!(
                "no database in {} and create_if_missing is false",
                dir.display()
            )));
        }
        fsutil::create_dir_durably(&*options.fs, &dir)?;
        let partitions = meta::open_or_create(
            &*options.fs,
            &dir,
            options.partitions,
            options.engine,
            options.create_if_missing,
            options.key_router.as_deref(),
        )?;
        let opts = Arc::new(options);
        let cache = Arc::new(BlockCache::new(opts.block_cache_bytes));
        let memtable_budget = Arc::new(MemtableBudget::new(opts.memtable_budget_bytes, partitions));
        let (work_tx, work_rx) = work::work_queue();
        let seqs = Arc::new(Sequencer::new(partitions, 0));
        let peers = Arc::new(OnceLock::new());
        let shared = Shared {
            cache: cache.clone(),
            memtable_budget,
            work_queue: work_tx.clone(),
            seqs: seqs.clone(),
            peers: peers.clone(),
        };
        // Partitions are independent: open (replay logs, read hints, build indexes) in parallel,
        // at most one thread per core. The log engine's open is CPU-bound (10 M keys: seconds).
        let open_one = |id: usize| -> Result<Opened> {
            let pdir = dir.join(format!("p{id:04}"));
            Ok(match opts.engine {
                Engine::Lsm => {
                    let (tree, recovered) = Tree::open(id, pdir, opts.clone(), &shared)?;
                    Opened::Lsm(Box::new(tree), recovered)
                }
                Engine::Log => {
                    let (store, last_seq) =
                        LogStore::open(id, pdir, opts.clone(), work_tx.clone(), seqs.clone())?;
                    Opened::Log(Arc::new(store), last_seq)
                }
            })
        };
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(partitions)
            .max(1);
        let next = AtomicUsize::new(0);
        let mut opened: Vec<(usize, Result<Opened>)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut out = Vec::new();
                        loop {
                            let id = next.fetch_add(1, Ordering::Relaxed);
                            if id >= partitions {
                                return out;
                            }
                            out.push((id, open_one(id)));
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| {
                    w.join().unwrap_or_else(|_| {
                        let panicked =
                            std::io::Error::other("a thread opening partitions panicked");
                        vec![(usize::MAX, Err(Error::io(&dir, panicked)))]
                    })
                })
                .collect()
        });
        opened.sort_by_key(|(id, _)| *id);
        let opened = opened
            .into_iter()
            .map(|(_, p)| p)
            .collect::<Result<Vec<Opened>>>()?;
        let (partitions, unfinished) = settle_spanning_batches(opened, &seqs);
        let _ = peers.set(
            partitions
                .iter()
                .filter_map(|p| p.lsm().map(|t| t.journal.clone()))
                .collect(),
        );
        // A dropped part is gone from memory but still in its log: flushed now, so that the
        // log is not replayed again (later writes elsewhere could make the batch look complete).
        for &p in &unfinished {
            partitions[p].flush()?;
        }
        let inner = Arc::new(Inner {
            dir,
            opts,
            partitions,
            seqs,
            cache,
        });
        let (stop_tx, stop_rx) = crossbeam_channel::unbounded::<()>();
        let mut workers = Vec::new();
        for n in 0..inner.opts.background_threads {
            let (inner, work_rx, stop_rx) = (inner.clone(), work_rx.clone(), stop_rx.clone());
            workers.push(background::spawn(&format!("strata-bg-{n}"), move || {
                background::lower_priority(inner.opts.background_nice);
                background::run_worker(&inner.partitions, &work_rx, &stop_rx)
            })?);
        }
        if inner.opts.sync != SyncMode::Always {
            let (inner, stop_rx) = (inner.clone(), stop_rx.clone());
            workers.push(background::spawn("strata-sync", move || {
                background::run_log_syncer(&inner.partitions, inner.opts.sync, &stop_rx)
            })?);
        }
        // Memtables recovered from logs wait for flush; the workers pick them up now.
        for p in &inner.partitions {
            p.work_request().request();
        }
        Ok(Db {
            inner,
            workers: Mutex::new(workers),
            stop_tx,
            closed: AtomicBool::new(false),
        })
    }

    /// Reads the partition count of the database in `path`, if one exists there.
    pub fn existing_partitions(path: impl AsRef<Path>) -> Result<Option<usize>> {
        Ok(meta::read_layout(&RealFs, path.as_ref())?.map(|l| l.partitions))
    }

    /// Reads the engine of an existing database in `path`, if one exists there.
    pub fn existing_engine(path: impl AsRef<Path>) -> Result<Option<Engine>> {
        Ok(meta::read_layout(&RealFs, path.as_ref())?.map(|l| l.engine))
    }

    /// Reads the layout (partitions, engine, key router) of an existing database in `path`
    /// through `fs`, if one exists there: what options to open it with.
    pub fn existing_layout(
        path: impl AsRef<Path>,
        fs: &dyn crate::vfs::FileSystem,
    ) -> Result<Option<crate::StoreLayout>> {
        meta::read_layout(fs, path.as_ref())
    }

    fn check(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    pub(crate) fn check_sizes(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let o = &self.inner.opts;
        if key.len() > o.key_bytes_max {
            return Err(Error::LimitExceeded {
                what: "key",
                actual: key.len(),
                max: o.key_bytes_max,
            });
        }
        if value.len() > o.value_bytes_max {
            return Err(Error::LimitExceeded {
                what: "value",
                actual: value.len(),
                max: o.value_bytes_max,
            });
        }
        Ok(())
    }

    fn partition(&self, key: &[u8]) -> &Partition {
        &self.inner.partitions[self.partition_of(key)]
    }

    /// The partition `key` is routed to.
    pub fn partition_of(&self, key: &[u8]) -> usize {
        meta::route(&self.inner.opts, key, self.inner.partitions.len())
    }

    /// Stores `value` under `key`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check()?;
        self.check_sizes(key, value)?;
        self.partition(key).write(&[(Kind::Put, key, value)])
    }

    /// Whether a write now would wait: for its fsync (`SyncMode::Always`), or because background
    /// work is behind and writers are being slowed or stopped. A hint for choosing the thread
    /// that writes (the server writes on its network threads while this is false); it can
    /// change at any moment.
    pub fn writes_would_wait(&self) -> bool {
        self.inner.opts.sync == SyncMode::Always
            || self
                .inner
                .partitions
                .iter()
                .any(Partition::writes_would_wait)
    }

    /// The value of `key`, or `None`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.check()?;
        self.partition(key).get(key)
    }

    /// Deletes `key` (a tombstone; deleting an absent key is not an error).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.check()?;
        self.check_sizes(key, &[])?;
        self.partition(key).write(&[(Kind::Delete, key, &[])])
    }

    /// Applies a batch atomically: across partitions on the LSM engine, per partition on the
    /// log engine (see [`WriteBatch`]).
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.check()?;
        self.check_batch(&batch, None)?;
        let n = self.inner.partitions.len();
        let mut by_part: Vec<Vec<Entry<'_>>> = vec![Vec::new(); n];
        for (kind, k, v) in &batch.ops {
            by_part[meta::route(&self.inner.opts, k, n)].push((*kind, k, v));
        }
        let spanned = by_part.iter().filter(|e| !e.is_empty()).count();
        if spanned > 1 && self.inner.opts.engine == Engine::Lsm {
            let parts: Vec<(&Tree, Vec<Entry<'_>>)> = self
                .inner
                .partitions
                .iter()
                .zip(by_part)
                .filter(|(_, entries)| !entries.is_empty())
                .filter_map(|(p, entries)| p.lsm().map(|t| (t, entries)))
                .collect();
            return journal::write_across(&parts, || Ok(()));
        }
        // One partition (one record: atomic), or the log engine, which applies a batch
        // partition by partition (RELIABILITY.md).
        for (i, entries) in by_part.iter().enumerate() {
            if !entries.is_empty() {
                self.inner.partitions[i].write(entries)?;
            }
        }
        Ok(())
    }

    /// A consistent view of the whole database as it is now: reads through it see every write
    /// that completed before and none that starts after, in every partition, however long it
    /// is kept (LSM engine; the log engine keeps one version per key and refuses).
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.check()?;
        Snapshot::take(&self.inner)
    }

    /// Starts an optimistic transaction: reads at a snapshot taken now, writes applied as one
    /// atomic batch at [`Transaction::commit`], which fails with [`Error::Conflict`] if a key
    /// read was changed by someone else meanwhile (LSM engine).
    pub fn transaction(&self) -> Result<Transaction<'_>> {
        Ok(Transaction::new(self, self.snapshot()?))
    }

    /// Writes a consistent copy of the live database into `dest` (a directory that must not
    /// exist yet), which opens as an ordinary database: tables, value logs and sealed segments
    /// are hard links where the file system allows, so a checkpoint costs little disk until
    /// the source moves on. Everything is fsynced before it returns.
    pub fn checkpoint(&self, dest: impl AsRef<Path>) -> Result<()> {
        self.check()?;
        crate::checkpoint::checkpoint(&self.inner, dest.as_ref())
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// Atomic read-modify-write of one key: `f` sees the current value and decides, while the
    /// key's partition admits no other write. Whatever `f` returns besides the decision is
    /// handed back. Used for counters (`INCR`) and document field updates.
    pub fn update<T>(
        &self,
        key: &[u8],
        f: impl FnOnce(Option<&[u8]>) -> Result<(Update, T)>,
    ) -> Result<T> {
        self.check()?;
        self.check_sizes(key, &[])?;
        self.partition(key)
            .update(key, f, |k, v| self.check_sizes(k, v))
    }

    /// Atomic read-modify-write of a group of keys that share `route_key`'s partition (a
    /// [`crate::KeyRouter`] puts such groups together): `f` reads any of them through the
    /// [`GroupRead`] it is given (the newest state) and returns the batch to apply, while the
    /// partition admits no other write. A read or write of a key of another partition is an
    /// [`Error::InvalidArgument`] and nothing is written. Whatever `f` returns besides the
    /// batch is handed back.
    pub fn update_group<T>(
        &self,
        route_key: &[u8],
        f: impl FnOnce(&GroupRead<'_>) -> Result<(WriteBatch, T)>,
    ) -> Result<T> {
        self.check()?;
        let p = self.partition_of(route_key);
        self.inner.partitions[p].update_group(
            |read| self.with_group_reads(p, read, f),
            |batch| self.check_batch(batch, Some(p)),
        )
    }

    /// Whether [`Db::hold_group`] keeps other writers out of the partition between the updates
    /// of its body (the LSM engine). The log engine's reads take the partition lock, so its
    /// hold takes the lock per update instead, and another writer may come between two.
    pub fn holds_groups(&self) -> bool {
        self.inner
            .partitions
            .first()
            .is_some_and(|p| matches!(p, crate::partition::Partition::Lsm(_)))
    }

    /// Runs `body` with the write lock of `route_key`'s partition held across the
    /// [`GroupHold::update_group`] calls it makes: each is atomic and visible to the next, as
    /// separate [`Db::update_group`] calls would be, but the lock is taken once (a server
    /// running a pipeline of commands on one key serves them without handing the lock to
    /// another thread between commands). They are committed (made as durable as
    /// `Options::sync` promises) together before this returns. `body` must not write through
    /// the `Db` itself meanwhile: a write to this partition would wait for the lock `body`
    /// holds; [`GroupHold::holds`] tells which keys the hold can write.
    pub fn hold_group<T>(
        &self,
        route_key: &[u8],
        body: impl FnOnce(&mut GroupHold<'_>) -> T,
    ) -> Result<T> {
        self.check()?;
        let p = self.partition_of(route_key);
        self.inner.partitions[p].hold(|held| {
            body(&mut GroupHold {
                db: self,
                partition: p,
                held,
            })
        })
    }

    /// Runs `f` with `read` refusing keys outside partition `p`'s group
    /// ([`Db::group_member`]).
    fn with_group_reads<R>(
        &self,
        p: usize,
        read: &GroupRead<'_>,
        f: impl FnOnce(&GroupRead<'_>) -> R,
    ) -> R {
        let get = |key: &[u8]| {
            self.group_member(p, key)?;
            read.get(key)
        };
        let contains = |key: &[u8]| {
            self.group_member(p, key)?;
            read.contains(key)
        };
        f(&GroupRead::new(&get, &contains))
    }

    /// `key` belongs to partition `p`'s group, or the error naming both.
    fn group_member(&self, p: usize, key: &[u8]) -> Result<()> {
        let q = self.partition_of(key);
        if q == p {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "update_group: key {} routes to partition {q}, the group's to {p}",
            key.escape_ascii()
        )))
    }

    /// Vets a batch: sizes within the limits and, for a group update (`group`: its
    /// partition), every key in that partition.
    fn check_batch(&self, batch: &WriteBatch, group: Option<usize>) -> Result<()> {
        let mut total = 0usize;
        for (_, k, v) in &batch.ops {
            if let Some(p) = group {
                self.group_member(p, k)?;
            }
            self.check_sizes(k, v)?;
            total += k.len() + v.len();
        }
        if total > BATCH_BYTES_MAX {
            return Err(Error::LimitExceeded {
                what: "write batch",
                actual: total,
                max: BATCH_BYTES_MAX,
            });
        }
        Ok(())
    }

    /// Keys and values in `range`, in key order across all partitions.
    /// With the LSM engine the scan reads at a snapshot taken when it starts, so it never
    /// mixes states; with the log engine it may see writes made while it runs.
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Scan {
        let (lower, upper) = range_bounds(range);
        self.scan_bounds(lower, upper)
    }

    /// Keys and values in `range`, in descending key order (greatest first) across all
    /// partitions. With the LSM engine it reads at a snapshot as [`Db::scan`] does, each
    /// partition from the top of the range down, in steps of about a block
    /// (`lsm/reverse.rs`), so the first entries cost what a forward scan's do; the log engine,
    /// whose index has no key order, reads the whole range and reverses it.
    pub fn scan_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Scan {
        if let Err(e) = self.check() {
            return Scan::failed(e);
        }
        let (lower, upper) = range_bounds(range);
        if self.inner.opts.engine == Engine::Lsm {
            return match Snapshot::take(&self.inner) {
                Ok(snap) => snap.scan_rev_bounds(lower, upper),
                Err(e) => Scan::failed(e),
            };
        }
        match self.scan_bounds(lower, upper).collect::<Result<Vec<_>>>() {
            Ok(mut all) => {
                all.reverse();
                let entries = all.into_iter().map(|(k, v)| Ok((k, Some(v))));
                Scan::new(MergeIter::new(vec![Box::new(entries)]))
            }
            Err(e) => Scan::failed(e),
        }
    }

    /// Keys starting with `prefix`, in key order (at a snapshot, as [`Db::scan`]).
    pub fn scan_prefix(&self, prefix: &[u8]) -> Scan {
        let (lower, upper) = prefix_bounds(prefix);
        self.scan_bounds(lower, upper)
    }

    /// Keys and values in `range` of `route_key`'s partition only, in key order: for a range
    /// every key of which routes with `route_key` (a [`crate::KeyRouter`] group, such as a
    /// Redis hash's fields), this is [`Db::scan`] without visiting the other partitions. Keys of
    /// the range that route elsewhere are not seen. The LSM engine reads at one point in time,
    /// as [`Db::scan`] does.
    pub fn scan_routed<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        route_key: &[u8],
        range: R,
    ) -> Scan {
        self.scan_routed_bounds(route_key, range_bounds(range), false)
    }

    /// Calls `visit` on each key and value of [`Db::scan_routed`]'s scan, in key order, until
    /// it returns false. The same entries at the same point in time, without an owned copy of
    /// each: a range that only the partition's active memtable holds (a collection's newest
    /// elements) is read out of it as plain bytes, a chunk at a time.
    pub fn visit_routed<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        route_key: &[u8],
        range: R,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.check()?;
        let (lower, upper) = range_bounds(range);
        let partition = &self.inner.partitions[self.partition_of(route_key)];
        let Some(tree) = partition.lsm() else {
            for entry in self.scan_routed_bounds(route_key, (lower, upper), false) {
                let (k, v) = entry?;
                if !visit(&k, &v) {
                    break;
                }
            }
            return Ok(());
        };
        let (view, at) = self.pinned(tree);
        tree.visit_at(view, at, lower, upper, visit)
    }

    /// [`Db::scan_routed`] in descending key order: the top of a range (a sorted set's highest
    /// scores) without reading what lies below it. The LSM engine reads at one point in time,
    /// in steps of about a block (`lsm/reverse.rs`); the log engine, whose index has no key
    /// order, reads the whole range and reverses it.
    pub fn scan_routed_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        route_key: &[u8],
        range: R,
    ) -> Scan {
        self.scan_routed_bounds(route_key, range_bounds(range), true)
    }

    /// `tree`'s current view and the sequence number reads of it see, taken together (a
    /// routed scan's or visit's point in time).
    fn pinned(&self, tree: &Tree) -> (Arc<crate::lsm::tree::View>, u64) {
        let _held = tree.hold_view();
        (tree.pinned_view(), self.inner.seqs.visible())
    }

    fn scan_routed_bounds(
        &self,
        route_key: &[u8],
        (lower, upper): (Bound<Bytes>, Bound<Bytes>),
        reverse: bool,
    ) -> Scan {
        if let Err(e) = self.check() {
            return Scan::failed(e);
        }
        let partition = &self.inner.partitions[self.partition_of(route_key)];
        if let Some(tree) = partition.lsm() {
            let (view, at) = self.pinned(tree);
            let it = if reverse {
                tree.iter_rev_at(view, at, lower, upper)
            } else {
                tree.iter_at(view, at, lower, upper)
            };
            return Scan::new(MergeIter::new(vec![it]));
        }
        match partition.iter_log(lower, upper) {
            Some(it) if reverse => match it.collect::<Result<Vec<_>>>() {
                Ok(mut all) => {
                    all.reverse();
                    Scan::new(MergeIter::new(vec![Box::new(all.into_iter().map(Ok))]))
                }
                Err(e) => Scan::failed(e),
            },
            Some(it) => Scan::new(MergeIter::new(vec![it])),
            None => Scan::failed(Error::InvalidArgument("no engine for the partition".into())),
        }
    }

    fn scan_bounds(&self, lower: Bound<Bytes>, upper: Bound<Bytes>) -> Scan {
        if let Err(e) = self.check() {
            return Scan::failed(e);
        }
        if self.inner.opts.engine == Engine::Lsm {
            return match Snapshot::take(&self.inner) {
                Ok(snap) => snap.scan_bounds(lower, upper),
                Err(e) => Scan::failed(e),
            };
        }
        let sources: Vec<EntryIter> = self
            .inner
            .partitions
            .iter()
            .filter_map(|p| p.iter_log(lower.clone(), upper.clone()))
            .collect();
        Scan::new(MergeIter::new(sources))
    }

    /// Bulk-loads entries given in strictly increasing key order, writing table files directly
    /// (no log, no memtable): the way to build a large store fast, e.g. from an external sort.
    /// Memtables are flushed first; the new data is newer than everything already stored.
    /// The log engine has no tables: there it writes the entries in batches.
    /// Returns the number of entries loaded.
    pub fn ingest<K, V>(&self, sorted: impl IntoIterator<Item = (K, V)>) -> Result<u64>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        self.try_ingest(sorted.into_iter().map(Ok))
    }

    /// [`Db::ingest`] of entries that may fail to arrive (read from an external sort's runs,
    /// say): an error stops the ingest and is returned. On the LSM engine nothing is then
    /// installed (the tables written so far are removed); on the log engine the batches
    /// written before it stay.
    pub fn try_ingest<K, V>(&self, sorted: impl IntoIterator<Item = Result<(K, V)>>) -> Result<u64>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        self.check()?;
        let mut last: Option<Vec<u8>> = None;
        if self.inner.opts.engine == Engine::Log {
            let mut count = 0u64;
            let mut batch = WriteBatch::new();
            for kv in sorted {
                let (k, v) = kv?;
                self.check_sizes(k.as_ref(), v.as_ref())?;
                check_ascending(&mut last, k.as_ref())?;
                batch.put(k, v);
                count += 1;
                if batch.len() >= INGEST_LOG_BATCH_ENTRIES {
                    self.write(std::mem::take(&mut batch))?;
                }
            }
            self.write(batch)?;
            return Ok(count);
        }
        let trees: Vec<&Tree> = self
            .inner
            .partitions
            .iter()
            .filter_map(|p| match p {
                Partition::Lsm(t) => Some(&**t),
                Partition::Log(_) => None,
            })
            .collect();
        // Ingested tables bypass the writes that keep key counts (the log engine's ingest
        // above is plain writes).
        self.forget_key_counts();
        let ingested = ingest::ingest_sorted(
            &trees,
            self.inner.opts.table_bytes_target as u64,
            sorted.into_iter().map(|kv| {
                let (k, v) = kv?;
                self.check_sizes(k.as_ref(), v.as_ref())?;
                check_ascending(&mut last, k.as_ref())?;
                Ok((k, v))
            }),
        );
        // Again: a recount during the ingest may have counted part of it.
        self.forget_key_counts();
        ingested
    }

    /// Forgets every partition's key counts (keys changed outside the write path).
    fn forget_key_counts(&self) {
        for p in &self.inner.partitions {
            if let Some(c) = p.key_counts() {
                c.forget();
            }
        }
    }

    /// The compaction filter this database was opened with ([`Options::compaction_filter`]).
    pub fn compaction_filter(&self) -> Option<&Arc<dyn crate::options::CompactionFilter>> {
        self.inner.opts.compaction_filter.as_ref()
    }

    /// How many keys of `class` ([`Options::key_classes`]) exist: exact, read without a walk or
    /// a lock (a write being applied may or may not be in it, as it may or may not be
    /// visible yet). `None` when nothing is counted, and while the counts are unknown: after
    /// open until [`Db::recount_keys`], and after keys changed where no write counted them (a
    /// bulk ingest, a compaction filter's tombstone on a counted key, a lookup that failed).
    pub fn key_count(&self, class: usize) -> Option<u64> {
        let mut total = 0i64;
        for p in &self.inner.partitions {
            total += p.key_count(class)?;
        }
        Some(total.max(0) as u64)
    }

    /// Whether [`Db::key_count`] can answer now (without the look-ups it makes).
    pub fn key_counts_known(&self) -> bool {
        self.inner.partitions.iter().all(|p| p.key_counts_known())
    }

    /// Counts every key by class ([`Options::key_classes`]) again and makes
    /// [`Db::key_count`] known: O(keys), values unread, one partition at a time under its write
    /// lock (that partition's writers wait meanwhile). A server calls it once after open,
    /// before it serves.
    pub fn recount_keys(&self) -> Result<()> {
        self.check()?;
        for p in &self.inner.partitions {
            // An ingest or a compaction's tombstone meanwhile: once more (they are rare, and
            // an ingest that keeps going leaves the counts unknown rather than wrong).
            for _ in 0..RECOUNT_TRIES {
                if p.recount_keys()? {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Writes every memtable to table files and waits for that to finish.
    pub fn flush(&self) -> Result<()> {
        self.check()?;
        for p in &self.inner.partitions {
            p.flush()?;
        }
        Ok(())
    }

    /// Forces every write-ahead log to disk now, whatever the sync mode.
    pub fn sync(&self) -> Result<()> {
        self.check()?;
        for p in &self.inner.partitions {
            p.sync_now(true)?;
        }
        Ok(())
    }

    /// Flushes, then merges every partition into one sorted level, dropping deleted data.
    pub fn compact(&self) -> Result<()> {
        self.flush()?;
        for p in &self.inner.partitions {
            p.compact()?;
        }
        Ok(())
    }

    /// A snapshot of sizes and counters.
    pub fn stats(&self) -> Stats {
        Stats {
            partitions: self.inner.partitions.iter().map(|p| p.stats()).collect(),
            block_cache_bytes: self.inner.cache.used_bytes(),
        }
    }

    /// The directory of the database.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// The number of partitions.
    pub fn partitions(&self) -> usize {
        self.inner.partitions.len()
    }

    /// Stops background work, writes and fsyncs every log, and closes the database.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        for _ in 0..self.workers.lock().len() {
            let _ = self.stop_tx.send(());
        }
        for h in self.workers.lock().drain(..) {
            let _ = h.join();
        }
        let mut first_err = None;
        for p in &self.inner.partitions {
            if let Err(e) = p.sync_now(true) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "closing the database failed");
        }
    }
}

/// Bulk ingest takes keys in strictly increasing order only.
fn check_ascending(last: &mut Option<Vec<u8>>, key: &[u8]) -> Result<()> {
    if let Some(l) = last.as_deref() {
        if l >= key {
            return Err(Error::InvalidArgument(format!(
                "ingest needs strictly increasing keys; {:?} came after {:?}",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(l)
            )));
        }
    }
    *last = Some(key.to_vec());
    Ok(())
}

/// The bounds of `range` as owned keys.
pub(crate) fn range_bounds<K: AsRef<[u8]>, R: RangeBounds<K>>(
    range: R,
) -> (Bound<Bytes>, Bound<Bytes>) {
    let conv = |b: Bound<&K>| match b {
        Bound::Included(k) => Bound::Included(Bytes::copy_from_slice(k.as_ref())),
        Bound::Excluded(k) => Bound::Excluded(Bytes::copy_from_slice(k.as_ref())),
        Bound::Unbounded => Bound::Unbounded,
    };
    (conv(range.start_bound()), conv(range.end_bound()))
}

/// The bounds of every key starting with `prefix`.
pub(crate) fn prefix_bounds(prefix: &[u8]) -> (Bound<Bytes>, Bound<Bytes>) {
    let upper = prefix_successor(prefix).map_or(Bound::Unbounded, Bound::Excluded);
    (Bound::Included(Bytes::copy_from_slice(prefix)), upper)
}

/// Decides, after a crash, on every batch that spanned partitions: one whose every part
/// survived (in a replayed log, or already in a table) stays; one missing a part is taken out
/// of the partitions that replayed theirs. Then cuts the order of batches (LSM, logs of format
/// 3): a power cut can keep a batch in one partition's log and lose an earlier one in another
/// (each partition fsyncs its own log), so every batch above the first one missing is taken
/// out too ([`cut_point`]). The partitions that lost a batch here are returned, to be flushed
/// before the database accepts writes. Sequence numbers continue after the highest on disk.
fn settle_spanning_batches(opened: Vec<Opened>, seqs: &Sequencer) -> (Vec<Partition>, Vec<usize>) {
    let recovered: Vec<Option<&Recovered>> = opened
        .iter()
        .map(|o| match o {
            Opened::Lsm(_, r) => Some(r),
            Opened::Log(..) => None,
        })
        .collect();
    let mut unfinished = Vec::new();
    let mut drops = Vec::new();
    for (id, r) in recovered.iter().enumerate() {
        let Some(r) = r else { continue };
        for part in &r.spanning {
            let complete = part.parts.iter().all(|&p| {
                recovered
                    .get(p as usize)
                    .and_then(|r| *r)
                    .is_some_and(|r| r.holds_part(part.seq))
            });
            if !complete {
                tracing::warn!(
                    partition = id,
                    seq = part.seq,
                    "dropping a batch whose part in another partition did not survive the crash"
                );
                drops.push((id, part));
                if unfinished.last() != Some(&id) {
                    unfinished.push(id);
                }
            }
        }
    }
    let last_seq = opened
        .iter()
        .map(|o| match o {
            Opened::Lsm(_, r) => r.last_seq,
            Opened::Log(_, s) => *s,
        })
        .max()
        .unwrap_or(0);
    for (id, part) in drops {
        if let Opened::Lsm(t, _) = &opened[id] {
            t.drop_recovered_part(part);
        }
    }
    if let Some(cut) = cut_point(&recovered) {
        for (id, o) in opened.iter().enumerate() {
            let Opened::Lsm(t, r) = o else { continue };
            if r.replayed_seq_max > cut {
                tracing::warn!(
                    partition = id,
                    kept_up_to = cut,
                    dropped_up_to = r.replayed_seq_max,
                    "dropping batches a power cut left after an earlier one it lost"
                );
                t.drop_recovered_after(cut);
                if !unfinished.contains(&id) {
                    unfinished.push(id);
                }
            }
        }
    }
    seqs.continue_after(last_seq);
    let partitions = opened
        .into_iter()
        .map(|o| match o {
            Opened::Lsm(t, _) => Partition::Lsm(t),
            Opened::Log(l, _) => Partition::Log(l),
        })
        .collect();
    (partitions, unfinished)
}

/// Where recovery cuts the order of batches: the highest claim found (every batch up to it was
/// durable everywhere, `batch::BatchHeader`), then on through every number whose batch survived
/// whole, up to the first missing. A batch is missing when a power cut lost it, or a part of
/// it, or when it failed before reaching its log (then nothing after it was acknowledged:
/// `journal::reach`). `None` when there is nothing to decide: the hash engine, or a log
/// written before claims (format 1 or 2).
fn cut_point(recovered: &[Option<&Recovered>]) -> Option<u64> {
    let all: Vec<&Recovered> = recovered.iter().flatten().copied().collect();
    if all.len() != recovered.len() || all.iter().any(|r| r.unclaimed) {
        return None;
    }
    let claim = all.iter().map(|r| r.claim).max()?;
    let mut present: std::collections::HashSet<u64> = std::collections::HashSet::new();
    for r in &all {
        present.extend(r.above_claim.iter().filter(|&&s| s > claim));
        for part in r.spanning.iter().filter(|p| p.seq > claim) {
            let whole = part.parts.iter().all(|&p| {
                recovered
                    .get(p as usize)
                    .and_then(|r| *r)
                    .is_some_and(|r| r.holds_part(part.seq))
            });
            if whole {
                present.insert(part.seq);
            }
        }
    }
    let mut cut = claim;
    while present.contains(&(cut + 1)) {
        cut += 1;
    }
    Some(cut)
}

/// The smallest key greater than every key starting with `prefix`, if any.
fn prefix_successor(prefix: &[u8]) -> Option<Bytes> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xff {
            p.push(last + 1);
            return Some(Bytes::from(p));
        }
    }
    None
}

/// A partition's write lock held by [`Db::hold_group`].
pub struct GroupHold<'a> {
    db: &'a Db,
    partition: usize,
    held: &'a mut dyn crate::journal::HeldUpdates,
}

impl GroupHold<'_> {
    /// Whether `key` is in the held partition (what [`GroupHold::update_group`] may read and
    /// write).
    pub fn holds(&self, key: &[u8]) -> bool {
        self.db.partition_of(key) == self.partition
    }

    /// The newest state of `key` (in the held partition; [`Error::InvalidArgument`] otherwise),
    /// as a [`GroupHold::update_group`] decision reads it: for a caller that decides several
    /// updates first and applies them as one batch.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.db.group_member(self.partition, key)?;
        self.held.get(key)
    }

    /// Whether `key` exists in the newest state: [`GroupHold::get`] without reading a value
    /// separated into a value log.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        self.db.group_member(self.partition, key)?;
        self.held.contains(key)
    }

    /// Vets one write as [`GroupHold::update_group`] vets its batch: the key in the held
    /// partition, key and value within the size limits, the database writable.
    pub fn check_write(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db.check()?;
        self.db.group_member(self.partition, key)?;
        self.db.check_sizes(key, value)
    }

    /// [`Db::update_group`] under the held lock: `route_key` must be in the held partition
    /// ([`Error::InvalidArgument`] otherwise, nothing written).
    pub fn update_group<T>(
        &mut self,
        route_key: &[u8],
        f: impl FnOnce(&GroupRead<'_>) -> Result<(WriteBatch, T)>,
    ) -> Result<T> {
        let (db, p) = (self.db, self.partition);
        db.check()?;
        db.group_member(p, route_key)?;
        let mut f = Some(f);
        let mut out = None;
        self.held.update(
            &mut |read| {
                let f = f.take().ok_or_else(|| {
                    Error::InvalidArgument("a group update decided twice".to_string())
                })?;
                let (batch, o) = db.with_group_reads(p, read, f)?;
                out = Some(o);
                Ok(batch)
            },
            &|batch| db.check_batch(batch, Some(p)),
        )?;
        out.ok_or_else(|| Error::InvalidArgument("a group update did not decide".to_string()))
    }
}

/// Iterator over a key range of the database, in key order. Yields `Err` once and stops if a
/// table turns out to be damaged.
pub struct Scan {
    inner: MergeIter<Option<Bytes>>,
    error: Option<Error>,
}

impl Scan {
    pub(crate) fn new(inner: MergeIter<Option<Bytes>>) -> Scan {
        Scan { inner, error: None }
    }

    pub(crate) fn failed(e: Error) -> Scan {
        Scan {
            inner: MergeIter::new(Vec::new()),
            error: Some(e),
        }
    }
}

impl Iterator for Scan {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(e) = self.error.take() {
            return Some(Err(e));
        }
        loop {
            match self.inner.next()? {
                Ok((k, Some(v))) => return Some(Ok((k, v))),
                Ok((_, None)) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_successor_handles_ff() {
        assert_eq!(prefix_successor(b"ab"), Some(Bytes::from_static(b"ac")));
        assert_eq!(prefix_successor(b"a\xff"), Some(Bytes::from_static(b"b")));
        assert_eq!(prefix_successor(b"\xff\xff"), None);
        assert_eq!(prefix_successor(b""), None);
    }

    /// A group update's reads and the scans it makes of its own partition see one state, even
    /// while an earlier write of another partition is still applying (then a write of this
    /// partition is applied, read by `read`, but not yet visible to scans: an update that
    /// popped from such a scan acted on an older state than its record).
    #[test]
    fn group_updates_read_and_scan_one_state_while_other_partitions_apply() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut o = Options::tiny();
        o.partitions = 2;
        let db = Arc::new(Db::open(dir.path(), o).unwrap_or_else(|e| panic!("{e}")));
        let key = b"member".to_vec();
        let p = db.partition_of(&key);
        let q = 1 - p;
        // A write of partition q in flight: its number taken, not yet done.
        let inner = db.inner().clone();
        let reserved = inner.seqs.begin(q);
        let writer = {
            let (db, key) = (db.clone(), key.clone());
            // Applied at once; returns once visible, after q's write is done.
            std::thread::spawn(move || db.put(&key, b"1"))
        };
        // Once the writer holds its number it is applying under p's lock, which the update
        // below then waits for.
        while inner.seqs.last_handed_out() <= reserved {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            inner.seqs.done(q);
        });
        let (read, scanned) = db
            .update_group(&key, |read| {
                let read = read.get(&key)?.is_some();
                let scanned = db
                    .scan_routed(&key, key.clone()..=key.clone())
                    .filter_map(|e| e.ok())
                    .count();
                Ok((WriteBatch::new(), (read, scanned)))
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(read, "the update reads the applied write");
        assert_eq!(scanned, 1, "and its scan sees the same state");
        release.join().unwrap_or_else(|_| panic!("releaser"));
        writer
            .join()
            .unwrap_or_else(|_| panic!("writer"))
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// What a compaction filter reads through `SettledRead`: a key's table state only while no
    /// memtable holds a version of it, and nothing for a key of another partition.
    #[test]
    fn settled_reads_see_flushed_state_only() {
        use crate::options::SettledRead;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut o = Options::tiny();
        o.partitions = 2;
        let db = Db::open(dir.path(), o).unwrap_or_else(|e| panic!("{e}"));
        let key = b"k";
        let p = db.partition_of(key);
        let other = (0..100u32)
            .map(|i| format!("o{i}").into_bytes())
            .find(|k| db.partition_of(k) != p)
            .unwrap_or_default();
        let tree = |db: &Db| db.inner().partitions[p].lsm().map(|t| t as *const Tree);
        let read = |db: &Db, k: &[u8]| -> Option<Option<Vec<u8>>> {
            let t = db.inner().partitions[p].lsm()?;
            t.settled(k).map(|v| v.map(|b| b.to_vec()))
        };
        assert!(tree(&db).is_some());
        assert_eq!(read(&db, key), Some(None), "never written: settled absent");
        db.put(key, b"v1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&db, key), None, "in the memtable: unsettled");
        db.flush().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&db, key), Some(Some(b"v1".to_vec())));
        db.delete(key).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&db, key), None, "deleted in memory only");
        db.flush().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&db, key), Some(None));
        db.put(&other, b"x").unwrap_or_else(|e| panic!("{e}"));
        db.flush().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&db, &other), None, "another partition's key");
    }
}
