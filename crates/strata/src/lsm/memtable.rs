//! The memtable (the seed's "pending writes"): a sorted, concurrent skip list of the newest
//! writes of one partition. Writers insert under the partition's write lock; readers never lock.
//! A memtable is bound to the write-ahead log file that holds the same writes (`wal_number`).

use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use crossbeam_skiplist::SkipMap;

use crate::batch::Kind;

/// A value or a tombstone, as stored in memtables and tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Slot {
    Put(Bytes),
    Delete,
}

impl Slot {
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Slot::Put(_) => Kind::Put,
            Slot::Delete => Kind::Delete,
        }
    }
}

/// Bookkeeping bytes charged per entry on top of key and value, so that many tiny entries
/// still count against `memtable_bytes_max`.
const ENTRY_OVERHEAD_BYTES: usize = 48;

pub(crate) struct Memtable {
    map: SkipMap<Bytes, Slot>,
    bytes: AtomicUsize,
    entries: AtomicUsize,
    /// Number of the write-ahead log file holding these writes.
    pub(crate) wal_number: u64,
}

impl Memtable {
    pub(crate) fn new(wal_number: u64) -> Self {
        Memtable {
            map: SkipMap::new(),
            bytes: AtomicUsize::new(0),
            entries: AtomicUsize::new(0),
            wal_number,
        }
    }

    /// Inserts or replaces; callers hold the partition's write lock.
    pub(crate) fn insert(&self, key: &[u8], slot: Slot) {
        let charge = key.len()
            + match &slot {
                Slot::Put(v) => v.len(),
                Slot::Delete => 0,
            }
            + ENTRY_OVERHEAD_BYTES;
        self.map.insert(Bytes::copy_from_slice(key), slot);
        self.bytes.fetch_add(charge, Ordering::Relaxed);
        self.entries.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<Slot> {
        self.map.get(key).map(|e| e.value().clone())
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn entries(&self) -> usize {
        self.entries.load(Ordering::Relaxed)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// All entries in key order (used by flush; the memtable is immutable by then).
    pub(crate) fn iter_all(&self) -> impl Iterator<Item = (Bytes, Slot)> + '_ {
        self.map
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
    }
}

/// Chunk of entries copied per step by [`MemtableIter`].
const SCAN_CHUNK_ENTRIES: usize = 64;

/// An owning iterator over a key range of a memtable. It copies a chunk of entries at a time and
/// re-seeks after the last key, so it holds no borrow and sees concurrent inserts past its cursor.
pub(crate) struct MemtableIter {
    mem: Arc<Memtable>,
    lower: Bound<Bytes>,
    upper: Bound<Bytes>,
    chunk: std::vec::IntoIter<(Bytes, Slot)>,
    done: bool,
}

impl MemtableIter {
    pub(crate) fn new(mem: Arc<Memtable>, lower: Bound<Bytes>, upper: Bound<Bytes>) -> Self {
        MemtableIter {
            mem,
            lower,
            upper,
            chunk: Vec::new().into_iter(),
            done: false,
        }
    }

    fn refill(&mut self) {
        let lo = as_ref_bound(&self.lower);
        let hi = as_ref_bound(&self.upper);
        let chunk: Vec<(Bytes, Slot)> = self
            .mem
            .map
            .range::<[u8], _>((lo, hi))
            .take(SCAN_CHUNK_ENTRIES)
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect();
        if chunk.len() < SCAN_CHUNK_ENTRIES {
            self.done = true;
        }
        if let Some((last, _)) = chunk.last() {
            self.lower = Bound::Excluded(last.clone());
        }
        self.chunk = chunk.into_iter();
    }
}

fn as_ref_bound(b: &Bound<Bytes>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(&k[..]),
        Bound::Excluded(k) => Bound::Excluded(&k[..]),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Iterator for MemtableIter {
    type Item = (Bytes, Slot);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(kv) = self.chunk.next() {
                return Some(kv);
            }
            if self.done {
                return None;
            }
            self.refill();
        }
    }
}
