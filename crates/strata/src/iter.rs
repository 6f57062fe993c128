//! K-way merge of sorted entry streams. Sources are ranked: for equal keys the entry of the
//! lowest-ranked (newest) source wins and older ones are skipped. Used for scans (memtables,
//! tables, and then across partitions) and for compaction.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::lsm::memtable::Slot;

/// A sorted stream of entries.
pub(crate) type EntryIter = Box<dyn Iterator<Item = Result<(Bytes, Slot)>> + Send>;

struct Head {
    key: Bytes,
    rank: usize,
    slot: Slot,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    // Reversed: `BinaryHeap` is a max-heap and we want the smallest key, then the newest source.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .key
            .cmp(&self.key)
            .then_with(|| other.rank.cmp(&self.rank))
    }
}

/// Merges ranked sources; yields each key once, with the newest source's entry (tombstones
/// included: callers decide whether to hide them).
pub(crate) struct MergeIter {
    sources: Vec<EntryIter>,
    heap: BinaryHeap<Head>,
    started: bool,
    error: Option<Error>,
    /// Older entries shadowed by a newer one (compaction counts dead value-log bytes here).
    shadowed: Vec<Slot>,
    keep_shadowed: bool,
}

impl MergeIter {
    /// `sources[0]` is the newest.
    pub(crate) fn new(sources: Vec<EntryIter>) -> Self {
        MergeIter {
            heap: BinaryHeap::with_capacity(sources.len()),
            sources,
            started: false,
            error: None,
            shadowed: Vec::new(),
            keep_shadowed: false,
        }
    }

    /// Keeps the pointers of shadowed entries for [`MergeIter::take_shadowed`].
    pub(crate) fn keeping_shadowed(mut self) -> Self {
        self.keep_shadowed = true;
        self
    }

    /// Shadowed value pointers seen since the last call.
    pub(crate) fn take_shadowed(&mut self) -> Vec<Slot> {
        std::mem::take(&mut self.shadowed)
    }

    fn pull(&mut self, rank: usize) {
        match self.sources[rank].next() {
            Some(Ok((key, slot))) => self.heap.push(Head { key, rank, slot }),
            Some(Err(e)) if self.error.is_none() => self.error = Some(e),
            Some(Err(_)) => {}
            None => {}
        }
    }
}

impl Iterator for MergeIter {
    type Item = Result<(Bytes, Slot)>;

    fn next(&mut self) -> Option<Self::Item> {
        if !self.started {
            self.started = true;
            for rank in 0..self.sources.len() {
                self.pull(rank);
            }
        }
        if let Some(e) = self.error.take() {
            self.heap.clear();
            return Some(Err(e));
        }
        let top = self.heap.pop()?;
        while self.heap.peek().is_some_and(|h| h.key == top.key) {
            if let Some(older) = self.heap.pop() {
                if self.keep_shadowed && matches!(older.slot, Slot::Pointer(_)) {
                    self.shadowed.push(older.slot);
                }
                self.pull(older.rank);
            }
        }
        self.pull(top.rank);
        if let Some(e) = self.error.take() {
            self.heap.clear();
            return Some(Err(e));
        }
        Some(Ok((top.key, top.slot)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(items: &[(&'static str, Option<&'static str>)]) -> EntryIter {
        let v: Vec<Result<(Bytes, Slot)>> = items
            .iter()
            .map(|(k, v)| {
                Ok((
                    Bytes::from_static(k.as_bytes()),
                    v.map_or(Slot::Delete, |v| {
                        Slot::Put(Bytes::from_static(v.as_bytes()))
                    }),
                ))
            })
            .collect();
        Box::new(v.into_iter())
    }

    #[test]
    fn newest_source_wins_and_keys_come_once_in_order() {
        let newer = src(&[("b", Some("new")), ("d", None)]);
        let older = src(&[
            ("a", Some("1")),
            ("b", Some("old")),
            ("d", Some("4")),
            ("e", Some("5")),
        ]);
        let got: Vec<_> = MergeIter::new(vec![newer, older])
            .map(|r| r.unwrap())
            .collect();
        let want = vec![
            (Bytes::from("a"), Slot::Put(Bytes::from("1"))),
            (Bytes::from("b"), Slot::Put(Bytes::from("new"))),
            (Bytes::from("d"), Slot::Delete),
            (Bytes::from("e"), Slot::Put(Bytes::from("5"))),
        ];
        assert_eq!(got, want);
    }
}
