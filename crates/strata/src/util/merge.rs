//! K-way merge of sorted entry streams. Sources are ranked: for equal keys the entry of the
//! lowest-ranked (newest) source wins and older ones are skipped. Used for scans (memtables,
//! tables, and then across partitions) and for compaction. Generic over what an entry holds, so
//! the LSM merges its own entry states (value, tombstone, value pointer) and the router merges
//! partitions' visible states (`Option<Bytes>`, `None` a tombstone) with the same code.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use bytes::Bytes;

use crate::error::{Error, Result};

/// A stream of `(key, entry)` in strictly increasing key order.
pub(crate) type SortedIter<V> = Box<dyn Iterator<Item = Result<(Bytes, V)>> + Send>;

/// What a partition yields to a scan: the newest state of each key, `None` for a deletion (the
/// router hides those after merging partitions).
pub(crate) type EntryIter = SortedIter<Option<Bytes>>;

struct Head<V> {
    key: Bytes,
    rank: usize,
    slot: V,
    /// Whether the merge runs in descending key order (the same for every head of a heap).
    descending: bool,
}

impl<V> PartialEq for Head<V> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl<V> Eq for Head<V> {}
impl<V> PartialOrd for Head<V> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<V> Ord for Head<V> {
    // `BinaryHeap` is a max-heap: on top we want the smallest key (the greatest, descending),
    // then the newest source.
    fn cmp(&self, other: &Self) -> Ordering {
        let by_key = if self.descending {
            self.key.cmp(&other.key)
        } else {
            other.key.cmp(&self.key)
        };
        by_key.then_with(|| other.rank.cmp(&self.rank))
    }
}

/// Merges ranked sources; yields each key once, with the newest source's entry (tombstones
/// included: callers decide whether to hide them). Ascending, or descending when every source
/// is ([`MergeIter::descending`]).
pub(crate) struct MergeIter<V> {
    sources: Vec<SortedIter<V>>,
    heap: BinaryHeap<Head<V>>,
    descending: bool,
    started: bool,
    error: Option<Error>,
    /// Older entries shadowed by a newer one that `keep_shadowed` selects (compaction counts
    /// dead value-log bytes here).
    shadowed: Vec<V>,
    keep_shadowed: Option<fn(&V) -> bool>,
}

impl<V> MergeIter<V> {
    /// `sources[0]` is the newest.
    pub(crate) fn new(sources: Vec<SortedIter<V>>) -> Self {
        MergeIter {
            heap: BinaryHeap::with_capacity(sources.len()),
            sources,
            descending: false,
            started: false,
            error: None,
            shadowed: Vec::new(),
            keep_shadowed: None,
        }
    }

    /// Merges sources whose keys strictly decrease (`sources[0]` the newest), greatest first.
    pub(crate) fn descending(sources: Vec<SortedIter<V>>) -> Self {
        MergeIter {
            descending: true,
            ..MergeIter::new(sources)
        }
    }

    /// Keeps the shadowed entries that `which` selects for [`MergeIter::take_shadowed`].
    pub(crate) fn keeping_shadowed(mut self, which: fn(&V) -> bool) -> Self {
        self.keep_shadowed = Some(which);
        self
    }

    /// Shadowed entries kept since the last call.
    pub(crate) fn take_shadowed(&mut self) -> Vec<V> {
        std::mem::take(&mut self.shadowed)
    }

    fn pull(&mut self, rank: usize) {
        match self.sources[rank].next() {
            Some(Ok((key, slot))) => self.heap.push(Head {
                key,
                rank,
                slot,
                descending: self.descending,
            }),
            Some(Err(e)) if self.error.is_none() => self.error = Some(e),
            Some(Err(_)) => {}
            None => {}
        }
    }
}

impl<V> Iterator for MergeIter<V> {
    type Item = Result<(Bytes, V)>;

    fn next(&mut self) -> Option<Self::Item> {
        // One source needs no heap: its entries pass through (a scan of one partition wraps
        // the partition's own merge in this one). An error still ends the stream.
        if let [only] = &mut self.sources[..] {
            if self.started {
                return None;
            }
            let item = only.next();
            if matches!(item, Some(Err(_)) | None) {
                self.started = true;
            }
            return item;
        }
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
        // The winner's source refills its place in the heap: one sift down from the top
        // instead of a pop and a push (a scan's run of entries from one source, a list's
        // elements in the memtable say, costs a comparison or two each).
        let rank = self.heap.peek()?.rank;
        let top = match self.sources[rank].next() {
            Some(Ok((key, slot))) => {
                let descending = self.descending;
                let mut head = self.heap.peek_mut()?;
                std::mem::replace(
                    &mut *head,
                    Head {
                        key,
                        rank,
                        slot,
                        descending,
                    },
                )
            }
            other => {
                if let Some(Err(e)) = other {
                    self.error.get_or_insert(e);
                }
                self.heap.pop()?
            }
        };
        while self.heap.peek().is_some_and(|h| h.key == top.key) {
            if let Some(older) = self.heap.pop() {
                if self.keep_shadowed.is_some_and(|keep| keep(&older.slot)) {
                    self.shadowed.push(older.slot);
                }
                self.pull(older.rank);
            }
        }
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
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Against a model: each key once, in order, with the entry of the newest (lowest
        /// ranked) source that has it; shadowed entries kept exactly when selected.
        #[test]
        fn merge_matches_a_map_model(
            sources in prop::collection::vec(
                prop::collection::btree_map(0u8..40, any::<u8>(), 0..30), 1..6),
        ) {
            let mut model: BTreeMap<u8, u8> = BTreeMap::new();
            let mut shadowed_model = 0usize;
            for source in sources.iter().rev() {
                for (k, v) in source {
                    model.insert(*k, *v);
                }
            }
            for (rank, source) in sources.iter().enumerate() {
                for (k, v) in source {
                    let newer = sources[..rank].iter().any(|s| s.contains_key(k));
                    if newer && v % 2 == 0 {
                        shadowed_model += 1;
                    }
                }
            }
            let iters: Vec<SortedIter<u8>> = sources
                .iter()
                .map(|s| {
                    let items: Vec<Result<(Bytes, u8)>> = s
                        .iter()
                        .map(|(k, v)| Ok((Bytes::from(vec![*k]), *v)))
                        .collect();
                    Box::new(items.into_iter()) as SortedIter<u8>
                })
                .collect();
            let mut it = MergeIter::new(iters).keeping_shadowed(|v| v % 2 == 0);
            let mut got = Vec::new();
            let mut shadowed = 0usize;
            while let Some(item) = it.next() {
                let (k, v) = item.map_err(|e| TestCaseError::fail(e.to_string()))?;
                got.push((k[0], v));
                shadowed += it.take_shadowed().len();
            }
            let want: Vec<(u8, u8)> = model.into_iter().collect();
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(shadowed, shadowed_model);
            // Descending: the same entries, greatest key first.
            let iters: Vec<SortedIter<u8>> = sources
                .iter()
                .map(|s| {
                    let items: Vec<Result<(Bytes, u8)>> = s
                        .iter()
                        .rev()
                        .map(|(k, v)| Ok((Bytes::from(vec![*k]), *v)))
                        .collect();
                    Box::new(items.into_iter()) as SortedIter<u8>
                })
                .collect();
            let down: Vec<(u8, u8)> = MergeIter::descending(iters)
                .map(|r| r.map(|(k, v)| (k[0], v)))
                .collect::<Result<_>>()
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let want_down: Vec<(u8, u8)> = want.into_iter().rev().collect();
            prop_assert_eq!(down, want_down);
        }
    }

    fn src(items: &[(&'static str, Option<&'static str>)]) -> EntryIter {
        let v: Vec<Result<(Bytes, Option<Bytes>)>> = items
            .iter()
            .map(|(k, v)| {
                Ok((
                    Bytes::from_static(k.as_bytes()),
                    v.map(|v| Bytes::from_static(v.as_bytes())),
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
            (Bytes::from("a"), Some(Bytes::from("1"))),
            (Bytes::from("b"), Some(Bytes::from("new"))),
            (Bytes::from("d"), None),
            (Bytes::from("e"), Some(Bytes::from("5"))),
        ];
        assert_eq!(got, want);
    }

    /// The single-source path passes entries through unchanged and, like the heap path, ends
    /// the stream at the first error.
    #[test]
    fn one_source_passes_through_and_stops_at_an_error() {
        let items: Vec<Result<(Bytes, Option<Bytes>)>> = vec![
            Ok((Bytes::from("a"), Some(Bytes::from("1")))),
            Ok((Bytes::from("b"), None)),
            Err(Error::InvalidArgument("broken source".into())),
            Ok((Bytes::from("c"), Some(Bytes::from("3")))),
        ];
        let mut it = MergeIter::new(vec![Box::new(items.into_iter()) as EntryIter]);
        assert_eq!(
            it.next().map(|r| r.ok()),
            Some(Some((Bytes::from("a"), Some(Bytes::from("1")))))
        );
        assert_eq!(
            it.next().map(|r| r.ok()),
            Some(Some((Bytes::from("b"), None)))
        );
        assert!(matches!(it.next(), Some(Err(_))));
        assert!(it.next().is_none());
        assert!(it.next().is_none());
    }
}
