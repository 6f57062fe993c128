//! Snapshots: the whole database as it was at one sequence number, in every partition, for as
//! long as the handle lives.
//!
//! A snapshot is a sequence number `S` and, per partition, the view (memtables, tables, value
//! logs) current when it was taken. Memtables keep every version of a key with its sequence
//! number, so reading one at `S` skips later writes; tables hold only writes that were visible
//! when they were written (a flush waits for that), so the tables of a view taken together with
//! `S` hold nothing newer than `S`. Holding the views keeps their memtables in memory and their
//! tables and value logs on disk: flushes, compactions and value-log collection proceed, and
//! what they replace is deleted when the last snapshot holding it is dropped.
//!
//! The views and `S` must belong together: they are read while every partition's view lock is
//! held (a memtable switch between the two could otherwise put a write at or below `S` in a
//! memtable the snapshot lacks). An earlier version re-read the views until none had changed,
//! without locks; under constant flushes in many partitions that could go on for long.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use bytes::Bytes;

use crate::db::{range_bounds, Inner, Scan};
use crate::error::{Error, Result};
use crate::lsm::tree::{Tree, View};
use crate::meta;
use crate::util::merge::{EntryIter, MergeIter};

/// A consistent, read-only view of the database at one moment (see [`crate::Db::snapshot`]).
/// Cheap to take; while it lives, the files and memtables it reads stay (memory and disk a
/// long-lived snapshot holds grow with the writes made meanwhile).
pub struct Snapshot {
    inner: Arc<Inner>,
    seq: u64,
    views: Vec<Arc<View>>,
}

impl Snapshot {
    /// Takes a snapshot of an LSM database.
    pub(crate) fn take(inner: &Arc<Inner>) -> Result<Snapshot> {
        let trees = lsm_trees(inner)?;
        // Every partition's view lock, under which alone a view changes, is held while the views
        // and the number are read (microseconds; nothing does I/O under those locks).
        let guards: Vec<_> = trees.iter().map(|t| t.hold_view()).collect();
        let views: Vec<Arc<View>> = trees.iter().map(|t| t.pinned_view()).collect();
        let seq = inner.seqs.visible();
        drop(guards);
        Ok(Snapshot {
            inner: inner.clone(),
            seq,
            views,
        })
    }

    /// The sequence number the snapshot reads at: it sees every write numbered up to it and
    /// none after.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The view of partition `p` the snapshot holds.
    pub(crate) fn view(&self, p: usize) -> &Arc<View> {
        &self.views[p]
    }

    fn tree(&self, p: usize) -> Result<&Tree> {
        self.inner.partitions[p]
            .lsm()
            .ok_or_else(|| Error::InvalidArgument("snapshot of a log-engine partition".into()))
    }

    /// The value of `key` at the snapshot.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        let p = meta::route(&self.inner.opts, key, self.views.len());
        self.tree(p)?.get_at(&self.views[p], key, self.seq)
    }

    /// Keys and values in `range` at the snapshot, in key order across all partitions.
    pub fn scan<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Scan {
        let (lower, upper) = range_bounds(range);
        self.scan_bounds(lower, upper)
    }

    /// Keys starting with `prefix` at the snapshot, in key order.
    pub fn scan_prefix(&self, prefix: &[u8]) -> Scan {
        let (lower, upper) = crate::db::prefix_bounds(prefix);
        self.scan_bounds(lower, upper)
    }

    /// Keys and values in `range` at the snapshot, in descending key order across all
    /// partitions: each partition read from the top of the range down (`lsm/reverse.rs`).
    pub fn scan_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Scan {
        let (lower, upper) = range_bounds(range);
        self.scan_rev_bounds(lower, upper)
    }

    pub(crate) fn scan_bounds(&self, lower: Bound<Bytes>, upper: Bound<Bytes>) -> Scan {
        self.scan_in(lower, upper, false)
    }

    pub(crate) fn scan_rev_bounds(&self, lower: Bound<Bytes>, upper: Bound<Bytes>) -> Scan {
        self.scan_in(lower, upper, true)
    }

    fn scan_in(&self, lower: Bound<Bytes>, upper: Bound<Bytes>, descending: bool) -> Scan {
        let mut sources: Vec<EntryIter> = Vec::with_capacity(self.views.len());
        for (p, view) in self.views.iter().enumerate() {
            let t = match self.tree(p) {
                Ok(t) => t,
                Err(e) => return Scan::failed(e),
            };
            let (v, lo, hi) = (view.clone(), lower.clone(), upper.clone());
            sources.push(if descending {
                t.iter_rev_at(v, self.seq, lo, hi)
            } else {
                t.iter_at(v, self.seq, lo, hi)
            });
        }
        if descending {
            Scan::new(MergeIter::descending(sources))
        } else {
            Scan::new(MergeIter::new(sources))
        }
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("seq", &self.seq).finish()
    }
}

/// The LSM trees of every partition, or an error naming why a log-engine database has no
/// snapshots.
fn lsm_trees(inner: &Inner) -> Result<Vec<&Tree>> {
    inner
        .partitions
        .iter()
        .map(|p| {
            p.lsm().ok_or_else(|| {
                Error::InvalidArgument(
                    "snapshots and transactions need the LSM engine: the log engine keeps one \
                     version per key (see RELIABILITY.md)"
                        .into(),
                )
            })
        })
        .collect()
}
