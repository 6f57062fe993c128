//! Opening a partition's LSM tree: read the manifest, open its tables and value logs, check
//! them against it, remove what a crash left behind (temporary files, tables no manifest lists,
//! logs already flushed), and replay the write-ahead logs that were not flushed into memtables
//! that wait for flush. A torn final record of a log is cut and reported; any other damage is
//! corruption naming the file and offset.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use bytes::Bytes;
use crossbeam_channel::Sender;
use parking_lot::{Condvar, Mutex};

use super::memtable::{Memtable, MemtableBudget, MemtableLog};
use super::sstable::{table_path, Table, TABLE_SUFFIX};
use super::tree::{Counters, Tree, View};
use super::version::{self, LogState, Version};
use super::vlog::relocate::{moved_path, MOVED_SUFFIX};
use super::vlog::VlogFile;
use super::LEVELS;
use crate::error::{Error, IoContext, Result};
use crate::journal::counts::KeyCounts;
use crate::journal::{self, Journal, WalWriter, WAL_SUFFIX};
use crate::options::Options;
use crate::seqno::Sequencer;
use crate::util::cache::BlockCache;
use crate::util::fsutil;
use crate::util::work::WorkRequest;

impl Tree {
    /// Opens (or creates) the partition in `dir`, replaying its write-ahead logs.
    pub(crate) fn open(
        id: usize,
        dir: PathBuf,
        opts: Arc<Options>,
        shared: &Shared,
    ) -> Result<(Tree, Recovered)> {
        let Shared {
            cache,
            memtable_budget,
            work_queue,
            seqs,
            peers,
        } = shared.clone();
        let wal_dir = dir.join("wal");
        let sst_dir = dir.join("sst");
        for d in [&dir, &wal_dir, &sst_dir] {
            fsutil::create_dir_durably(&*opts.fs, d)?;
        }
        let mut cleaned = fsutil::remove_tmp_files(&*opts.fs, &dir)?;
        cleaned += fsutil::remove_tmp_files(&*opts.fs, &sst_dir)?;
        if cleaned > 0 {
            tracing::info!(
                partition = id,
                files = cleaned,
                "removed leftover temporary files"
            );
        }
        let manifest = version::read(&*opts.fs, &dir)?;
        let (mut next_file, log_state, metas, vlog_metas) = match manifest {
            Some(m) => (
                m.next_file_number,
                LogState {
                    log_number: m.log_number,
                    last_seq: m.last_seq,
                },
                m.levels,
                m.vlogs,
            ),
            None => (1, LogState::default(), vec![Vec::new(); LEVELS], Vec::new()),
        };
        let log_number = log_state.log_number;
        let mut recovered = Recovered {
            flushed_seq: log_state.last_seq,
            last_seq: log_state.last_seq,
            spanning: Vec::new(),
            // A flush made every batch up to its memtable's newest durable in every partition
            // before its manifest edit (`flush.rs`).
            claim: log_state.last_seq,
            unclaimed: false,
            above_claim: Vec::new(),
            replayed_seq_max: 0,
            prune_at: 1024,
        };
        let mut version = Version::empty();
        let mut live = std::collections::HashSet::new();
        for (level, tables) in metas.iter().enumerate() {
            for meta in tables {
                let path = table_path(&sst_dir, meta.id);
                if !opts.fs.exists(&path) {
                    return Err(Error::corruption(
                        &path,
                        0,
                        "table listed in the manifest is missing",
                    ));
                }
                let table = Table::open(opts.fs.clone(), &path, meta.id, cache.clone())?;
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
        for (num, path) in fsutil::numbered_files(&*opts.fs, &sst_dir, TABLE_SUFFIX)? {
            next_file = next_file.max(num + 1);
            if !live.contains(&num) {
                // Written by a flush or compaction that crashed before its manifest edit.
                tracing::info!(path = %path.display(), "removing table not in the manifest");
                opts.fs.remove_file(&path).at(&path)?;
            }
        }
        // A value log is a flushed write-ahead log (`.log`) or a value file a compaction wrote
        // (`.vlog`); numbers are unique across both.
        let listed: std::collections::HashSet<u64> = vlog_metas.iter().map(|m| m.number).collect();
        for (num, path) in fsutil::numbered_files(&*opts.fs, &wal_dir, MOVED_SUFFIX)? {
            next_file = next_file.max(num + 1);
            if !listed.contains(&num) {
                // Written by a compaction that crashed before its manifest edit, or emptied.
                tracing::info!(path = %path.display(), "removing value file not in the manifest");
                opts.fs.remove_file(&path).at(&path)?;
            }
        }
        for meta in &vlog_metas {
            let num = meta.number;
            let moved = moved_path(&wal_dir, num);
            let path = if opts.fs.exists(&moved) {
                moved
            } else {
                journal::wal_path(&wal_dir, num)
            };
            if !opts.fs.exists(&path) {
                return Err(Error::corruption(
                    &path,
                    0,
                    "value log listed in the manifest is missing",
                ));
            }
            version.vlogs.insert(
                num,
                Arc::new(VlogFile::open(
                    opts.fs.clone(),
                    &path,
                    num,
                    meta.live_bytes,
                    meta.first_live_bytes,
                    meta.first_dead_bytes,
                    0,
                )?),
            );
        }
        let mut immutables = Vec::new();
        let mut seq = 0u64;
        let mut replayed_bytes = 0u64;
        let logs = fsutil::numbered_files(&*opts.fs, &wal_dir, WAL_SUFFIX)?;
        let newest = logs.last().map(|(num, _)| *num);
        for (num, path) in logs {
            next_file = next_file.max(num + 1);
            if num < log_number {
                if !version.vlogs.contains_key(&num) {
                    opts.fs.remove_file(&path).at(&path)?;
                }
                continue;
            }
            // Values stay in the replayed log, as they did while it was written.
            let mem = Memtable::with_log(
                num,
                memtable_budget.clone(),
                MemtableLog {
                    file: opts.fs.open(&path).at(&path)?,
                    path: path.clone(),
                    tail: None,
                    separate_bytes_min: opts.value_separation_bytes_min(),
                },
            );
            // Only the newest log can have been cut short by a crash.
            let may_be_torn = Some(num) == newest;
            replayed_bytes +=
                journal::recover_log(&*opts.fs, &path, may_be_torn, opts.salvage, |batch| {
                    let h = &batch.header;
                    let spanning = !h.parts.is_empty();
                    recovered.note_claim(h.seq, h.claim, spanning);
                    // Where each value sits in the file: a value log's pointers point there.
                    mem.insert_all(
                        h.seq,
                        batch.entries.iter().map(|&(kind, key, value)| {
                            (kind, key, value, batch.value_offset(value))
                        }),
                    );
                    if spanning {
                        recovered.spanning.push(SpanningPart {
                            seq: h.seq,
                            parts: h.parts.clone(),
                            keys: batch
                                .entries
                                .iter()
                                .map(|(_, k, _)| Bytes::copy_from_slice(k))
                                .collect(),
                            wal_number: num,
                        });
                    }
                    recovered.last_seq = recovered.last_seq.max(h.seq);
                    seq += 1;
                    Ok(())
                })?;
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
        let wal = WalWriter::create(&*opts.fs, journal::wal_path(&wal_dir, wal_number), seq)?;
        let sync = opts.sync;
        let fs = opts.fs.clone();
        let view = View {
            active: Arc::new(Memtable::with_log(
                wal_number,
                memtable_budget.clone(),
                super::tree::memtable_log(&opts, &wal),
            )),
            immutables,
            version: Arc::new(version),
        };
        let counts = opts.key_classes.as_ref().map(KeyCounts::new);
        let tree = Tree {
            id,
            dir,
            wal_dir,
            sst_dir,
            opts,
            cache,
            memtable_budget,
            journal: Journal::new(fs, id, sync, wal, seq, seqs, counts),
            peers,
            view: ArcSwap::from_pointee(view),
            view_lock: Mutex::new(()),
            version_lock: Mutex::new(log_state),
            next_file: AtomicU64::new(next_file),
            value_offsets: Mutex::new(Vec::new()),
            gc_lock: Mutex::new(()),
            unapplied_parts: AtomicU64::new(0),
            sampled_at_flush: AtomicU64::new(0),
            flush_lock: Mutex::new(()),
            compaction_lock: Mutex::new(()),
            stall_lock: Mutex::new(()),
            stall_cv: Condvar::new(),
            cursors: Mutex::new(vec![Bytes::new(); LEVELS]),
            work: WorkRequest::new(id, work_queue),
            background_error: Mutex::new(None),
            counters: Counters::default(),
        };
        Ok((tree, recovered))
    }

    /// Takes every recovered batch numbered above `seq` back out of the recovered memtables
    /// (a power cut lost an earlier batch, `db.rs`).
    pub(crate) fn drop_recovered_after(&self, seq: u64) {
        for mem in &self.view.load().immutables {
            mem.truncate_after(seq);
        }
    }

    /// Takes the recovered part of a batch spanning partitions back out of the recovered
    /// memtables (another part did not survive the crash).
    pub(crate) fn drop_recovered_part(&self, part: &SpanningPart) {
        let view = self.view.load();
        for mem in view
            .immutables
            .iter()
            .filter(|m| m.wal_number == part.wal_number)
        {
            for key in &part.keys {
                mem.remove_version(key, part.seq);
            }
        }
    }
}

/// What every partition of a database shares.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) cache: Arc<BlockCache>,
    pub(crate) memtable_budget: Arc<MemtableBudget>,
    pub(crate) work_queue: Sender<usize>,
    pub(crate) seqs: Arc<Sequencer>,
    /// Every partition's journal, set once all are open.
    pub(crate) peers: Arc<OnceLock<Vec<Journal>>>,
}

/// What opening a tree found that the database decides on.
pub(crate) struct Recovered {
    /// The highest claim found (`batch::BatchHeader`): every batch of the database numbered up
    /// to it was durable in every partition when a record or manifest that survived was
    /// written.
    pub(crate) claim: u64,
    /// Whether a replayed record had no claim (log format 1 or 2): then recovery cannot cut.
    pub(crate) unclaimed: bool,
    /// The replayed batches of this partition alone numbered above the claim (those spanning
    /// partitions are in `spanning`), for the cut (`db.rs`).
    pub(crate) above_claim: Vec<u64>,
    /// The highest batch replayed from a log (0: none).
    pub(crate) replayed_seq_max: u64,
    /// The length of `above_claim` at which it is pruned next.
    prune_at: usize,
    /// Every write of this partition up to this sequence number is in a table.
    pub(crate) flushed_seq: u64,
    /// The highest sequence number on disk (tables and logs).
    pub(crate) last_seq: u64,
    /// Parts of batches spanning partitions replayed from the logs.
    pub(crate) spanning: Vec<SpanningPart>,
}

/// One partition's part of a batch spanning partitions, as replayed from its log.
pub(crate) struct SpanningPart {
    pub(crate) seq: u64,
    /// Every partition holding a part of the batch.
    pub(crate) parts: Vec<u32>,
    pub(crate) keys: Vec<Bytes>,
    /// The log (and recovered memtable) it was replayed from.
    wal_number: u64,
}

impl Recovered {
    /// Takes note of a replayed batch and its claim.
    fn note_claim(&mut self, seq: u64, claim: Option<u64>, spanning: bool) {
        match claim {
            Some(c) if c > self.claim => {
                self.claim = c;
                // Pruned once it has doubled since the last time, so that replay stays linear.
                if self.above_claim.len() >= self.prune_at {
                    self.above_claim.retain(|&s| s > c);
                    self.prune_at = (2 * self.above_claim.len()).max(1024);
                }
            }
            Some(_) => {}
            None => self.unclaimed = true,
        }
        if !spanning && seq > self.claim {
            self.above_claim.push(seq);
        }
        self.replayed_seq_max = self.replayed_seq_max.max(seq);
    }

    /// Whether this partition holds its part of batch `seq`: replayed from a log, or already
    /// in a table (every write up to `flushed_seq` is; a part that was never written cannot be
    /// below it, since the partition's later writes all have higher numbers).
    pub(crate) fn holds_part(&self, seq: u64) -> bool {
        seq <= self.flushed_seq || self.spanning.iter().any(|p| p.seq == seq)
    }
}
