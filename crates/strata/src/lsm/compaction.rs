//! Leveled compaction: what to merge and how.
//!
//! Level 0 holds flushed tables that may overlap; when it has `l0_compaction_trigger` tables
//! they are merged, with the overlapping tables of level 1, into level 1. Each deeper level `n`
//! may hold `level1_bytes_target * level_size_ratio^(n-1)` bytes; over that, one of its tables
//! (round-robin by key) is merged with the overlapping tables of level `n+1`. The level whose
//! size is furthest over its target goes first. This keeps space amplification near
//! `1 + 1/ratio` and read amplification at one table per level; write amplification grows with
//! the number of levels (measured in BENCHMARKS.md). Tombstones are dropped only when no deeper
//! level holds a table that overlaps the merged range, so they can no longer shadow anything.

use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::iter::{EntryIter, MergeIter};
use crate::lsm::memtable::Slot;
use crate::lsm::sstable::{Table, TableBuilder, TableMeta};
use crate::lsm::version::Version;
use crate::lsm::LEVELS;
use crate::options::Options;

/// A merge to run: `inputs` newest first (level 0 newest to oldest, then shallower levels).
pub(crate) struct Job {
    pub(crate) inputs: Vec<Arc<Table>>,
    pub(crate) output_level: usize,
    pub(crate) drop_tombstones: bool,
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
    })
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
) -> Result<DeadValueBytes> {
    let mut dead = DeadValueBytes::new();
    let mut count = |slot: &Slot| {
        if let Slot::Pointer(p) = slot {
            *dead.entry(p.file).or_default() += p.len as u64;
        }
    };
    let sources: Vec<EntryIter> = job
        .inputs
        .iter()
        .map(|t| {
            Box::new(t.iter(
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                false,
            )) as EntryIter
        })
        .collect();
    let mut builder: Option<TableBuilder> = None;
    let res = (|| {
        let mut merged = MergeIter::new(sources).keeping_shadowed();
        while let Some(item) = merged.next() {
            let (key, slot) = item?;
            for s in merged.take_shadowed() {
                count(&s);
            }
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
