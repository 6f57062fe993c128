//! Scans in descending key order (a sorted set's highest scores, ZREVRANGE).
//!
//! Memtables and tables are read forwards only (blocks are prefix-compressed from their
//! restart points). A backwards scan reads its range from the top in steps: each step is a
//! forward scan of `(split, upper)`, kept and handed out in reverse, after which `split` is the
//! next step's upper bound. `split` is the greatest of the candidates below `upper`: each
//! table's last key of the block before the one holding its greatest key below `upper` (in a
//! sorted level, only the table holding the keys just below `upper` is asked, found by
//! bisection), and each memtable's key [`MEMTABLE_STEP_KEYS`] below `upper`. The greatest candidate keeps a step
//! small (the top ten of a million keys read about one block of each table), and every step
//! passes a block boundary of some table or that many memtable keys, so a scan of a whole range
//! takes about as many steps as the range has blocks. With no candidate inside the range the
//! step reads down to its lower bound and is the last.
//!
//! Every step reads the same view at the same sequence number, so the scan sees one point in
//! time, as a forward scan does.

use std::ops::Bound;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::lsm::memtable::Slot;
use crate::lsm::sstable::Table;
use crate::lsm::tree::{resolve_in_view, slots_at, View};
use crate::lsm::LEVELS;

/// How many memtable keys below a step's upper bound its split may lie at most.
const MEMTABLE_STEP_KEYS: usize = 64;

/// Entries (tombstones as `None`) of a key range of one view, newest version at or below a
/// sequence number of each key, in descending key order.
pub(crate) struct RevIter {
    wal_dir: PathBuf,
    view: Arc<View>,
    at: u64,
    lower: Bound<Bytes>,
    /// The upper bound of the next step.
    upper: Bound<Bytes>,
    /// The current step's entries in ascending order: handed out from the end.
    step: Vec<(Bytes, Slot)>,
    done: bool,
}

impl RevIter {
    pub(crate) fn new(
        wal_dir: PathBuf,
        view: Arc<View>,
        at: u64,
        lower: Bound<Bytes>,
        upper: Bound<Bytes>,
    ) -> RevIter {
        RevIter {
            wal_dir,
            view,
            at,
            lower,
            upper,
            step: Vec::new(),
            done: false,
        }
    }

    /// Whether `key` lies above the scan's lower bound (so that a step may start after it and
    /// a later step still reads it).
    fn above_lower(&self, key: &[u8]) -> bool {
        match &self.lower {
            Bound::Included(l) | Bound::Excluded(l) => key > &l[..],
            Bound::Unbounded => true,
        }
    }

    /// The greatest split candidate strictly inside the range below the current upper bound.
    fn split(&self) -> Option<Bytes> {
        let v = &self.view;
        let mut best: Option<Bytes> = None;
        let mut offer = |key: &[u8]| {
            if self.above_lower(key) && best.as_ref().is_none_or(|b| key > &b[..]) {
                best = Some(Bytes::copy_from_slice(key));
            }
        };
        for m in std::iter::once(&v.active).chain(v.immutables.iter()) {
            if let Some(k) = m.key_back(&self.lower, &self.upper, MEMTABLE_STEP_KEYS) {
                offer(&k);
            }
        }
        let starts_below_upper = |t: &Table| match &self.upper {
            Bound::Included(u) => t.min_key <= *u,
            Bound::Excluded(u) => t.min_key < *u,
            Bound::Unbounded => true,
        };
        for t in &v.version.levels[0] {
            if starts_below_upper(t) && self.above_lower(&t.max_key) {
                if let Some(k) = t.split_below(&self.upper) {
                    offer(k);
                }
            }
        }
        for tables in &v.version.levels[1..LEVELS] {
            // A sorted level's tables are disjoint: the keys just below `upper` are in the last
            // one that starts below it, or (its first block) the end of the one before.
            let Some(i) = tables
                .partition_point(|t| starts_below_upper(t))
                .checked_sub(1)
            else {
                continue;
            };
            let t = &tables[i];
            if !self.above_lower(&t.max_key) {
                continue;
            }
            match t.split_below(&self.upper) {
                Some(k) => offer(k),
                None => {
                    if let Some(before) = i.checked_sub(1).map(|j| &tables[j]) {
                        offer(&before.max_key);
                    }
                }
            }
        }
        best
    }

    /// Reads the next step; false when the range is done.
    fn read_step(&mut self) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        let (from, next_upper) = match self.split() {
            Some(split) => (Bound::Excluded(split.clone()), Bound::Included(split)),
            None => {
                self.done = true;
                (self.lower.clone(), Bound::Unbounded)
            }
        };
        let upper = std::mem::replace(&mut self.upper, next_upper);
        let mut step = Vec::new();
        for item in slots_at(&self.view, self.at, from, upper) {
            step.push(item?);
        }
        self.step = step;
        Ok(true)
    }
}

impl Iterator for RevIter {
    type Item = Result<(Bytes, Option<Bytes>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((key, slot)) = self.step.pop() {
                // Values behind pointers are read only for the entries handed out.
                return Some(match slot {
                    Slot::Put(b) => Ok((key, Some(b))),
                    Slot::Delete => Ok((key, None)),
                    Slot::Pointer(p) => {
                        resolve_in_view(&self.wal_dir, &self.view, &p).map(|b| (key, Some(b)))
                    }
                });
            }
            match self.read_step() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
