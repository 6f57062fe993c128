//! Leveled compaction: what to merge, how, and installing the result.
//!
//! Level 0 holds flushed tables that may overlap; when it has `l0_compaction_trigger` tables
//! they are merged, with the overlapping tables of level 1, into level 1. Each deeper level `n`
//! may hold `level1_bytes_target * level_size_ratio^(n-1)` bytes; over that, one of its tables
//! (round-robin by key) is merged with the overlapping tables of level `n+1`. The level whose
//! size is furthest over its target goes first. This keeps space amplification near
//! `1 + 1/ratio` and read amplification at one table per level; write amplification grows with
//! the number of levels (measured in BENCHMARKS.md). Tombstones are dropped only when no deeper
//! level holds a table that overlaps the merged range, so they can no longer shadow anything.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::journal::counts::KeyCounts;
use crate::lsm::memtable::{Slot, SlotIter};
use crate::lsm::sstable::{table_path, Table, TableBuilder, TableMeta};
use crate::lsm::tree::Tree;
use crate::lsm::version::Version;
use crate::lsm::vlog::relocate::ValueMover;
use crate::lsm::vlog::{ValuePtr, VlogFile};
use crate::lsm::LEVELS;
use crate::options::Options;
use crate::util::merge::MergeIter;

/// A merge to run: `inputs` newest first (level 0 newest to oldest, then shallower levels).
pub(crate) struct Job {
    pub(crate) inputs: Vec<Arc<Table>>,
    pub(crate) output_level: usize,
    pub(crate) drop_tombstones: bool,
    /// Read every separated value the merge meets and let the compaction filter judge it (a
    /// full compaction, asked for to get space back: other merges judge only the values
    /// they read anyway, those they move out of a victim log, and leave the rest to the
    /// log's collection).
    pub(crate) judge_separated: bool,
}

fn level_target_bytes(opts: &Options, level: usize) -> u64 {
    let mut t = opts.level1_bytes_target;
    for _ in 1..level {
        t = t.saturating_mul(opts.level_size_ratio);
    }
    t
}

fn key_range(tables: &[Arc<Table>]) -> Option<(Bytes, Bytes)> {
    let lo = tables.iter().map(|t| &t.min_key).min()?.clone();
    let hi = tables.iter().map(|t| &t.max_key).max()?.clone();
    Some((lo, hi))
}

fn nothing_below(v: &Version, output_level: usize, lo: &[u8], hi: &[u8]) -> bool {
    (output_level + 1..LEVELS).all(|l| v.overlapping(l, lo, hi).is_empty())
}

/// Picks the most urgent compaction, if any is due.
pub(crate) fn pick(v: &Version, opts: &Options, cursors: &mut [Bytes]) -> Option<Job> {
    let l0_score = v.levels[0].len() as f64 / opts.l0_compaction_trigger as f64;
    let mut best: Option<(f64, usize)> = (l0_score >= 1.0).then_some((l0_score, 0));
    for level in 1..LEVELS - 1 {
        let score = v.level_bytes(level) as f64 / level_target_bytes(opts, level) as f64;
        if score > 1.0 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, level));
        }
    }
    let (_, level) = best?;
    if level == 0 {
        let mut inputs = v.levels[0].clone();
        let (lo, hi) = key_range(&inputs)?;
        inputs.extend(v.overlapping(1, &lo, &hi));
        let (lo, hi) = key_range(&inputs)?;
        return Some(Job {
            drop_tombstones: nothing_below(v, 1, &lo, &hi),
            inputs,
            output_level: 1,
            judge_separated: false,
        });
    }
    let tables = &v.levels[level];
    let cursor = &cursors[level];
    let t = tables
        .iter()
        .find(|t| t.min_key > *cursor)
        .or_else(|| tables.first())?
        .clone();
    cursors[level] = t.max_key.clone();
    let mut inputs = vec![t.clone()];
    inputs.extend(v.overlapping(level + 1, &t.min_key, &t.max_key));
    let (lo, hi) = key_range(&inputs)?;
    Some(Job {
        drop_tombstones: nothing_below(v, level + 1, &lo, &hi),
        inputs,
        output_level: level + 1,
        judge_separated: false,
    })
}

/// Merges every table into the deepest non-empty level (at least level 1), dropping tombstones.
pub(crate) fn pick_full(v: &Version) -> Option<Job> {
    let inputs: Vec<Arc<Table>> = v.levels.iter().flatten().cloned().collect();
    if inputs.is_empty() {
        return None;
    }
    let deepest = (1..LEVELS)
        .rev()
        .find(|&l| !v.levels[l].is_empty())
        .unwrap_or(1);
    Some(Job {
        inputs,
        output_level: deepest,
        drop_tombstones: true,
        judge_separated: true,
    })
}

/// What the compaction filter makes of `key`'s `value`: `None` keeps it; a dead value becomes
/// the filter's stub or a tombstone. A tombstone on a counted key removes it where no write
/// sees it, so the partition's key counts become unknown.
pub(crate) fn judged(
    opts: &Options,
    key: &[u8],
    value: &[u8],
    settled: &dyn crate::options::SettledRead,
    counts: Option<&KeyCounts>,
) -> Option<Slot> {
    let f = opts.compaction_filter.as_ref()?;
    if !f.is_dead(key, value, settled) {
        return None;
    }
    Some(match f.stub(key, value) {
        Some(stub) => Slot::Put(Bytes::from(stub)),
        None => {
            if let Some(c) = counts.filter(|c| c.class_of(key).is_some()) {
                c.forget();
            }
            Slot::Delete
        }
    })
}

/// What a merge's compaction filter reads: settled keys (the tree), the key counts a tombstone
/// it writes makes unknown, and the separated values of the version the merge began from
/// (`None`: the value's log was collected since, so a newer version of its key lives
/// elsewhere).
pub(crate) struct FilterReads<'a> {
    pub(crate) settled: &'a dyn crate::options::SettledRead,
    pub(crate) counts: Option<&'a KeyCounts>,
    pub(crate) separated: &'a dyn Fn(&ValuePtr) -> Option<Result<Bytes>>,
    /// Whether a damaged separated value was reported (once per merge).
    pub(crate) damage_reported: std::cell::Cell<bool>,
}

impl FilterReads<'_> {
    /// [`judged`] for `value`.
    fn judged(&self, opts: &Options, key: &[u8], value: &[u8]) -> Option<Slot> {
        judged(opts, key, value, self.settled, self.counts)
    }

    /// [`judged`] for the separated value `p` points at. A value that fails its checksum
    /// stays where it is, as a merge leaves damaged values it moves (reads of it report the
    /// damage).
    fn judged_separated(&self, opts: &Options, key: &[u8], p: &ValuePtr) -> Result<Option<Slot>> {
        match (self.separated)(p) {
            None => Ok(None),
            Some(Ok(value)) => Ok(self.judged(opts, key, &value)),
            Some(Err(e)) if e.is_corruption() => {
                if !self.damage_reported.replace(true) {
                    tracing::warn!(error = %e, "a full compaction left a damaged value it could not judge (the first of this compaction)");
                }
                Ok(None)
            }
            Some(Err(e)) => Err(e),
        }
    }
}

/// Runs the merge of `job`, cutting output tables at `table_bytes_target`. `new_table` creates
/// a builder; `finished` receives each completed table.
/// Value-log bytes, per log file, whose pointers a compaction dropped.
pub(crate) type DeadValueBytes = std::collections::HashMap<u64, u64>;

pub(crate) fn merge(
    job: &Job,
    opts: &Options,
    mut new_table: impl FnMut() -> Result<TableBuilder>,
    mut finished: impl FnMut(TableMeta) -> Result<()>,
    reads: &FilterReads<'_>,
    mut mover: Option<(&mut ValueMover, &mut dyn FnMut() -> u64)>,
) -> Result<DeadValueBytes> {
    // Separated values are read for the filter only in a merge that judges them all.
    let judge_separated = job.judge_separated && opts.compaction_filter.is_some();
    let mut dead = DeadValueBytes::new();
    let sources: Vec<SlotIter> = job
        .inputs
        .iter()
        .map(|t| {
            Box::new(t.iter(
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                false,
            )) as SlotIter
        })
        .collect();
    let mut builder: Option<TableBuilder> = None;
    let res = (|| {
        let mut merged =
            MergeIter::new(sources).keeping_shadowed(|s| matches!(s, Slot::Pointer(_)));
        while let Some(item) = merged.next() {
            let (key, slot) = item?;
            for s in merged.take_shadowed() {
                if let Slot::Pointer(p) = s {
                    *dead.entry(p.file).or_default() += p.len as u64;
                }
            }
            // A pointer into a victim log is written to a copy of the value (or, when the
            // filter declares the value dead, becomes a tombstone): either way the victim
            // loses the bytes as if the pointer had been dropped.
            let slot = match (slot, mover.as_mut()) {
                (Slot::Pointer(p), Some((m, number))) => match m.read_victim(&p)? {
                    Some(value) => {
                        *dead.entry(p.file).or_default() += p.len as u64;
                        match reads.judged(opts, &key, &value) {
                            Some(slot) => slot,
                            None => Slot::Pointer(m.write(&key, &value, &p, *number)?),
                        }
                    }
                    None => Slot::Pointer(p),
                },
                (slot, _) => slot,
            };
            let slot = match slot {
                Slot::Pointer(p) if judge_separated => {
                    match reads.judged_separated(opts, &key, &p)? {
                        Some(slot) => {
                            *dead.entry(p.file).or_default() += p.len as u64;
                            slot
                        }
                        None => Slot::Pointer(p),
                    }
                }
                slot => slot,
            };
            // A value the filter declares dead becomes its stub or a tombstone (older versions
            // below stay hidden).
            let slot = match &slot {
                Slot::Put(v) => reads.judged(opts, &key, v).unwrap_or(slot),
                _ => slot,
            };
            if job.drop_tombstones && slot == Slot::Delete {
                continue;
            }
            let b = match builder.as_mut() {
                Some(b) => b,
                None => builder.insert(new_table()?),
            };
            b.add(&key, &slot)?;
            if b.size_estimate() >= opts.table_bytes_target as u64 {
                if let Some(b) = builder.take() {
                    finished(b.finish()?)?;
                }
            }
        }
        if let Some(b) = builder.take() {
            if !b.is_empty() {
                finished(b.finish()?)?;
            } else {
                b.abandon();
            }
        }
        Ok(())
    })();
    if res.is_err() {
        if let Some(b) = builder.take() {
            b.abandon();
        }
    }
    res.map(|()| dead)
}

/// A full compaction collects value logs whose live share is below this.
const FULL_COMPACTION_GC_LIVE_RATIO: f64 = 0.9;

impl Tree {
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
            pick_full(&version)
        } else {
            pick(&version, &self.opts, &mut self.cursors.lock())
        };
        let Some(job) = job else { return Ok(false) };
        self.run_compaction(job)?;
        self.counters.compactions.fetch_add(1, Ordering::Relaxed);
        self.wake_stalled();
        Ok(true)
    }

    pub(super) fn run_compaction(&self, job: Job) -> Result<()> {
        // A tombstone the filter writes on a counted key forgets the counts as the merge
        // makes it, and again once readers see it (a recount in between counted the key).
        let forgotten_before = self.journal.counts.as_ref().map(|c| c.forgotten());
        let res = self.run_compaction_counted(job);
        if let (Some(c), Some(before)) = (self.journal.counts.as_ref(), forgotten_before) {
            if c.forgotten() != before {
                c.forget();
            }
        }
        res
    }

    fn run_compaction_counted(&self, job: Job) -> Result<()> {
        let mut outputs: Vec<Arc<Table>> = Vec::new();
        // Holds the value logs it lists open for the reads of the merge.
        let version = self.view.load().version.clone();
        let mut mover = ValueMover::new(
            self.opts.fs.clone(),
            &self.wal_dir,
            version.clone(),
            self.opts.value_log_gc_live_ratio,
            self.opts.value_log_space_ratio_max,
        );
        let mut new_number = || self.next_file.fetch_add(1, Ordering::AcqRel);
        let written = merge(
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
                    self.opts.fs.clone(),
                    &table_path(&self.sst_dir, meta.id),
                    meta.id,
                    self.cache.clone(),
                )?;
                outputs.push(Arc::new(t));
                Ok(())
            },
            &FilterReads {
                settled: self,
                counts: self.journal.counts.as_ref(),
                separated: &|p: &ValuePtr| version.vlogs.get(&p.file).map(|log| log.read(p)),
                damage_reported: std::cell::Cell::new(false),
            },
            mover
                .as_mut()
                .map(|m| (m, &mut new_number as &mut dyn FnMut() -> u64)),
        )
        .and_then(|dead| {
            crate::util::fsutil::sync_dir(&*self.opts.fs, &self.sst_dir).map(|()| dead)
        });
        let flushes = self.counters.flushes.load(Ordering::Relaxed);
        let moved = match (written, mover) {
            (Ok(dead), Some(m)) => m.finish(flushes).map(|files| (dead, files)),
            (Ok(dead), None) => Ok((dead, Vec::new())),
            (Err(e), m) => {
                if let Some(m) = m {
                    m.abandon();
                }
                Err(e)
            }
        };
        let (dead, moved) = match moved {
            Ok(x) => x,
            Err(e) => {
                // No manifest names the outputs yet: they go (value files a failed finish
                // left are removed on the next open).
                for t in &outputs {
                    t.obsolete.store(true, Ordering::Release);
                }
                return Err(e);
            }
        };
        let moved_bytes: u64 = moved.iter().map(|f| f.total_bytes).sum();
        // Value logs lose the bytes whose pointers this merge dropped; one that no table
        // points into any more leaves the version (and the disk, once unused). The live
        // counts are shared with the current version: put back, under the manifest lock, if
        // the manifest write fails.
        let undo: parking_lot::Mutex<Vec<(Arc<VlogFile>, u64)>> =
            parking_lot::Mutex::new(Vec::new());
        let put_back = || {
            for (v, old) in undo.lock().drain(..).rev() {
                v.live_bytes.store(old, Ordering::Release);
            }
        };
        let installed = self.install_or_undo(
            None,
            |nv| {
                let gone: HashSet<u64> = job.inputs.iter().map(|t| t.id).collect();
                for level in nv.levels.iter_mut() {
                    level.retain(|t| !gone.contains(&t.id));
                }
                let out = &mut nv.levels[job.output_level];
                out.extend(outputs.iter().cloned());
                out.sort_by(|a, b| a.min_key.cmp(&b.min_key));
                for f in &moved {
                    nv.vlogs.insert(f.number, f.clone());
                }
                for (file, bytes) in dead {
                    if let Some(vlog) = nv.vlogs.get(&file) {
                        let old = vlog.live_bytes.load(Ordering::Acquire);
                        vlog.live_bytes
                            .store(old.saturating_sub(bytes), Ordering::Release);
                        undo.lock().push((vlog.clone(), old));
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
                Ok(emptied)
            },
            put_back,
        );
        match installed {
            Ok(emptied) => {
                for v in &emptied {
                    v.obsolete.store(true, Ordering::Release);
                }
                self.counters
                    .moved_bytes
                    .fetch_add(moved_bytes, Ordering::Relaxed);
                self.counters
                    .moved_files
                    .fetch_add(moved.len() as u64, Ordering::Relaxed);
                for t in &job.inputs {
                    t.obsolete.store(true, Ordering::Release);
                }
                Ok(())
            }
            Err(e) => {
                // (The live counts were put back inside the install.) The outputs stay on disk: the manifest naming them may have landed (a failed
                // directory fsync comes after the rename). If it did not, they are tables no
                // manifest lists, which the next open removes; the inputs stay live either way.
                Err(e)
            }
        }
    }

    /// Merges every level into one and collects the value logs that leaves garbage in. Live
    /// counts are exact after a full merge. A full compaction is asked for to get space back, so
    /// it also collects value logs that background collection leaves alone: any with a tenth or
    /// more dead, such as a log whose small values went into tables at flush.
    /// Only logs that existed when it started are collected: the copies of live values go to
    /// new logs, and a call that collected those too would run on as long as writers keep
    /// adding garbage.
    pub(crate) fn compact_fully(&self) -> Result<()> {
        let logs_below = self.next_file_number();
        self.compact_once(true)?;
        let ratio = self
            .opts
            .value_log_gc_live_ratio
            .max(FULL_COMPACTION_GC_LIVE_RATIO);
        while self.gc_value_log_with(ratio, true, logs_below)? {}
        Ok(())
    }
}
