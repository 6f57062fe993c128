//! The memtable: the newest writes of one partition, not yet in a table file.
//! Each key's versions sit in one list of entries; a hash map finds a key's entry (point
//! lookups and writes: one hash and one key comparison instead of ~20), and a B-tree of keys
//! gives their order (scans, flush). A write of a key already in the memtable touches only
//! its entry; a write of a new key appends its entry to a list of unsorted entries instead of
//! walking the B-tree, and the B-tree takes them in batches, sorted (the write that fills the
//! batch, a range scan, or a flush): the B-tree's comparisons on every write were a fifth of
//! the CPU of a Redis SET or INCR, under the partition's write lock.
//! Everything sits behind one reader-writer lock; writers are serialized by the journal lock
//! anyway. Measured with `examples/point_ops.rs` on 2 cores: GETs 3-4x faster than with the
//! lock-free skip list this replaced (BENCHMARKS.md).
//! A memtable is bound to the write-ahead log file that holds the same writes (`wal_number`).
//! Values of at least the separation threshold are not copied in: the memtable keeps a pointer
//! to where the value sits in that log (the pointer the flush writes into the table anyway), so
//! a memtable of 1 KiB values takes a seventh of the memory (the log's size then decides when it
//! flushes: `Options::memtable_log_bytes_max`). A read of such a value reads the log: from the
//! file, or from the log's tail while the value is not handed to the OS yet
//! (`journal::LogTail`, a leaf lock: readers never take the journal's).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use hashbrown::HashTable;
use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use smallvec::{smallvec, SmallVec};

use std::path::PathBuf;

use crate::batch::Kind;
use crate::error::{Error, IoContext, Result};
use crate::journal::LogTail;
use crate::lsm::vlog::ValuePtr;
use crate::lsm::KeyHash;
use crate::vfs::FsFile;

/// A sorted stream of one partition's entry states (memtables, tables, merges of them).
pub(crate) type SlotIter = crate::util::merge::SortedIter<Slot>;

/// A value, a pointer to a value in a log (a value log, or a memtable's own log), or a
/// tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Slot {
    Put(Bytes),
    Pointer(ValuePtr),
    Delete,
}

impl Slot {
    /// The entry kind byte in a table block: 1 put, 2 delete, 3 value pointer.
    pub(crate) fn kind_byte(&self) -> u8 {
        match self {
            Slot::Put(_) => Kind::Put as u8,
            Slot::Delete => Kind::Delete as u8,
            Slot::Pointer(_) => 3,
        }
    }
}

/// Bookkeeping bytes charged per entry on top of key and value, so that many tiny entries
/// still count against `memtable_bytes_max`.
const ENTRY_OVERHEAD_BYTES: usize = 128;

/// Bytes charged for a value left in the log: the pointer (file, offset, length, checksum).
const POINTER_CHARGE_BYTES: usize = 24;

/// The log file a memtable's writes go to, for the values it leaves there.
pub(crate) struct MemtableLog {
    pub(crate) file: Arc<dyn FsFile>,
    pub(crate) path: PathBuf,
    /// Its records not yet handed to the OS, while it is being written (`None`: a replayed
    /// log, complete in the file).
    pub(crate) tail: Option<Arc<Mutex<LogTail>>>,
    /// Values of at least this many bytes stay in the log; the memtable holds a pointer.
    pub(crate) separate_bytes_min: usize,
}

/// Keys and values are copied into chunks of this size: one allocation per chunk instead of two
/// per write (malloc and free were a fifth of a put's CPU), all freed together after flush.
const ARENA_CHUNK_BYTES: usize = 1 << 20;
/// Larger keys and values get an allocation of their own rather than a mostly empty chunk.
const ARENA_ITEM_BYTES_MAX: usize = 64 << 10;

/// One version of a key: the write's sequence number, its state, and the offset of its value
/// in the memtable's log file (0 for deletes).
#[derive(Clone)]
struct Revision {
    seq: u64,
    slot: Slot,
    value_offset: u64,
}

/// Every version of a key in this memtable, oldest first. Most keys have one; older versions
/// stay (readers at a snapshot may need them) until the memtable is flushed, which writes
/// only the newest.
type Revisions = SmallVec<[Revision; 1]>;

/// Most entries left out of the key order: the write that reaches it sorts them in (in key
/// order, the B-tree's insertion path stays in the cache), so that no scan, and no write, ever
/// sorts more than this many at once (a pause of about a millisecond on the network thread).
const UNSORTED_ENTRIES_MAX: usize = 4096;

/// Where a key's versions sit in [`Maps::entries`].
type EntryIndex = usize;

/// Entries per segment of [`Segmented`].
const SEGMENT_ENTRIES: usize = 4096;

/// A vector that grows by whole segments instead of by reallocation: a memtable's millions of
/// entries are never copied to a new buffer as it fills (the copies, and the page faults of
/// each new buffer, were a twentieth of a pipelined LPUSH's CPU).
struct Segmented<T> {
    /// Full segments of [`SEGMENT_ENTRIES`], then the one being filled.
    segments: Vec<Vec<T>>,
}

impl<T> Default for Segmented<T> {
    fn default() -> Self {
        Segmented {
            segments: Vec::new(),
        }
    }
}

impl<T> Segmented<T> {
    fn len(&self) -> usize {
        self.segments.last().map_or(0, |last| {
            (self.segments.len() - 1) * SEGMENT_ENTRIES + last.len()
        })
    }

    fn push(&mut self, item: T) {
        match self.segments.last_mut() {
            Some(last) if last.len() < SEGMENT_ENTRIES => last.push(item),
            _ => {
                let mut segment = Vec::with_capacity(SEGMENT_ENTRIES);
                segment.push(item);
                self.segments.push(segment);
            }
        }
    }
}

impl<T> std::ops::Index<usize> for Segmented<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        &self.segments[i / SEGMENT_ENTRIES][i % SEGMENT_ENTRIES]
    }
}

impl<T> std::ops::IndexMut<usize> for Segmented<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.segments[i / SEGMENT_ENTRIES][i % SEGMENT_ENTRIES]
    }
}

#[derive(Default)]
struct Maps {
    /// Every key written, with its versions; a key whose versions were all taken back out
    /// ([`Memtable::remove_version`]) keeps an entry with none, which readers skip, and a later
    /// write of it starts a new entry. So a key has at most one entry with versions.
    entries: Segmented<(Bytes, Revisions)>,
    /// The entry with versions of each key, by the key's [`KeyHash`]: the hash a lookup
    /// computes once for every memtable and table filter it asks. Kept beside the index so
    /// that growing the table rehashes no key.
    hashed: HashTable<(u64, EntryIndex)>,
    /// Keys in order, except those of `unsorted`.
    sorted: BTreeMap<Bytes, EntryIndex>,
    /// Entries added since the B-tree was last brought up to date, in the order written
    /// (fewer than [`UNSORTED_ENTRIES_MAX`]).
    unsorted: Vec<EntryIndex>,
}

impl Maps {
    fn revisions(&self, i: EntryIndex) -> &Revisions {
        &self.entries[i].1
    }

    /// The entry with versions of `key`.
    fn find(&self, key: &[u8], h: KeyHash) -> Option<EntryIndex> {
        let entries = &self.entries;
        self.hashed
            .find(h.0, |&(eh, i)| eh == h.0 && entries[i].0[..] == *key)
            .map(|&(_, i)| i)
    }

    /// Forgets `key`'s entry with versions (it has none left).
    fn forget(&mut self, key: &[u8], h: KeyHash) {
        let entries = &self.entries;
        if let Ok(found) = self
            .hashed
            .find_entry(h.0, |&(eh, i)| eh == h.0 && entries[i].0[..] == *key)
        {
            found.remove();
        }
    }

    /// `indexes` sorted by their entries' keys.
    fn sort_by_key(&self, indexes: &mut [EntryIndex]) {
        indexes.sort_unstable_by(|a, b| self.entries[*a].0.cmp(&self.entries[*b].0));
    }

    /// Puts `indexes` (sorted by key) into the B-tree. A key's new entry replaces an emptied
    /// one (a key written again after its versions were taken back out).
    fn insert_sorted(&mut self, indexes: &[EntryIndex]) {
        for &i in indexes {
            let key = self.entries[i].0.clone();
            match self.sorted.entry(key) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(i);
                }
                std::collections::btree_map::Entry::Occupied(mut o) => {
                    if self.entries[*o.get()].1.is_empty() {
                        o.insert(i);
                    }
                }
            }
        }
    }

    /// Sorts the unsorted entries into the B-tree (the write that fills the list, a range
    /// scan, a flush).
    fn settle(&mut self) {
        let mut pending = std::mem::take(&mut self.unsorted);
        self.sort_by_key(&mut pending);
        // In key order the B-tree's insertion path stays in the cache.
        self.insert_sorted(&pending);
    }
}

/// Memory of all memtables of a database together (active and waiting for flush), against one
/// budget: RocksDB's write-buffer manager. Partitions share it, so a store of many partitions
/// holds no more memtable memory than one of few.
pub(crate) struct MemtableBudget {
    used_bytes: AtomicUsize,
    limit_bytes: usize,
    /// Over budget, a partition switches memtables once its active one holds this much, so that
    /// switches are not triggered by nearly empty memtables.
    switch_bytes_min: usize,
}

impl MemtableBudget {
    pub(crate) fn new(limit_bytes: usize, partitions: usize) -> MemtableBudget {
        MemtableBudget {
            used_bytes: AtomicUsize::new(0),
            limit_bytes,
            switch_bytes_min: limit_bytes / (2 * partitions.max(1)),
        }
    }

    /// Whether an active memtable of `active_bytes` should be switched for a new one to keep the
    /// budget.
    pub(crate) fn wants_switch(&self, active_bytes: usize) -> bool {
        active_bytes >= self.switch_bytes_min
            && self.used_bytes.load(Ordering::Relaxed) > self.limit_bytes
    }
}

pub(crate) struct Memtable {
    map: RwLock<Maps>,
    budget: Arc<MemtableBudget>,
    /// Whether this memtable's bytes still count against the budget (until flushed: a
    /// snapshot may keep a flushed memtable alive, but it no longer holds writers back).
    charged: std::sync::atomic::AtomicBool,
    /// The chunk keys and values are being copied into. Writers are serialized by the journal
    /// lock, so this lock is never contended.
    arena: Mutex<BytesMut>,
    bytes: AtomicUsize,
    entries: AtomicUsize,
    /// The bytes the entries inserted take in the log ([`crate::batch::entry_bytes`]): what
    /// the flush subtracts the live separated values' entries from to learn how much of the
    /// log is garbage once flushed.
    log_entry_bytes: AtomicU64,
    /// The highest sequence number inserted.
    max_seq: AtomicU64,
    /// The highest sequence number of a batch spanning partitions inserted (0: none).
    max_spanning_seq: AtomicU64,
    /// Number of the write-ahead log file holding these writes.
    pub(crate) wal_number: u64,
    /// That file, when large values stay in it (`None`: every value is copied in).
    log: Option<MemtableLog>,
}

impl Memtable {
    /// A memtable that copies every value in.
    #[cfg(test)]
    pub(crate) fn new(wal_number: u64, budget: Arc<MemtableBudget>) -> Self {
        Memtable::build(wal_number, budget, None)
    }

    /// A memtable whose values of at least `log.separate_bytes_min` stay in its log.
    pub(crate) fn with_log(wal_number: u64, budget: Arc<MemtableBudget>, log: MemtableLog) -> Self {
        Memtable::build(wal_number, budget, Some(log))
    }

    fn build(wal_number: u64, budget: Arc<MemtableBudget>, log: Option<MemtableLog>) -> Self {
        Memtable {
            map: RwLock::new(Maps::default()),
            budget,
            charged: std::sync::atomic::AtomicBool::new(true),
            arena: Mutex::new(BytesMut::new()),
            bytes: AtomicUsize::new(0),
            entries: AtomicUsize::new(0),
            log_entry_bytes: AtomicU64::new(0),
            max_seq: AtomicU64::new(0),
            max_spanning_seq: AtomicU64::new(0),
            wal_number,
            log,
        }
    }

    /// The pointer to `value`, written at `value_offset` of this memtable's log, when the value
    /// stays there (at least the separation threshold); `None` when it is copied in.
    fn pointer_for(&self, value: &[u8], value_offset: u64) -> Option<ValuePtr> {
        let log = self.log.as_ref()?;
        if value.len() < log.separate_bytes_min || value_offset == 0 {
            return None;
        }
        Some(ValuePtr {
            file: self.wal_number,
            offset: value_offset,
            len: u32::try_from(value.len()).ok()?,
            crc: crc32c::crc32c(value),
        })
    }

    /// Reads a value this memtable left in its log (`p.file` is its `wal_number`): from the
    /// file or, while the record has not reached the file, from the log's tail.
    pub(crate) fn read_value(&self, p: &ValuePtr) -> Result<Bytes> {
        let Some(log) = &self.log else {
            return Err(Error::InvalidArgument(format!(
                "memtable of log {} holds no values in its log",
                self.wal_number
            )));
        };
        let mut buf = vec![0u8; p.len as usize];
        match log.file.read_exact_at(&mut buf, p.offset) {
            Ok(()) if crc32c::crc32c(&buf) == p.crc => return Ok(Bytes::from(buf)),
            // Not in the file yet, or only partly (the tail being handed over).
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
            Err(e) => return Err(Error::io(&log.path, e)),
        }
        if let Some(tail) = &log.tail {
            if let Some(b) = tail.lock().read(p.offset, p.len as usize) {
                if crc32c::crc32c(&b) == p.crc {
                    return Ok(Bytes::from(b));
                }
            }
        }
        // The tail is written to the file under its lock, and leaves the tail only once the
        // file took it (a failed write leaves it there): gone from the tail, the bytes are in
        // the file now.
        log.file.read_exact_at(&mut buf, p.offset).at(&log.path)?;
        if crc32c::crc32c(&buf) != p.crc {
            return Err(Error::corruption(
                &log.path,
                p.offset,
                "value checksum mismatch in a memtable's log",
            ));
        }
        Ok(Bytes::from(buf))
    }

    /// Inserts a put or a delete as the version `seq` of `key`; callers hold the partition's
    /// write lock. A second write of a key within one batch (same `seq`) replaces the first.
    /// `value_offset` is where the value sits in this memtable's log file; `spanning` whether
    /// the batch spans partitions.
    pub(crate) fn insert(
        &self,
        seq: u64,
        spanning: bool,
        kind: Kind,
        key: &[u8],
        value: &[u8],
        value_offset: u64,
    ) {
        let pointer = match kind {
            Kind::Put => self.pointer_for(value, value_offset),
            Kind::Delete => None,
        };
        let value_charge = if pointer.is_some() {
            POINTER_CHARGE_BYTES
        } else {
            value.len()
        };
        let charge = key.len() + value_charge + ENTRY_OVERHEAD_BYTES;
        self.log_entry_bytes.fetch_add(
            crate::batch::entry_bytes(kind, key.len(), value.len()),
            Ordering::Relaxed,
        );
        let mut m = self.map.write();
        let maps = &mut *m;
        let slot_of = |arena: &mut BytesMut| match (kind, pointer) {
            (Kind::Put, Some(p)) => Slot::Pointer(p),
            (Kind::Put, None) => Slot::Put(copy_in(arena, value)),
            (Kind::Delete, _) => Slot::Delete,
        };
        let h = KeyHash::of(key);
        if let Some(i) = maps.find(key, h) {
            let rev = Revision {
                seq,
                slot: slot_of(&mut self.arena.lock()),
                value_offset,
            };
            let revs = &mut maps.entries[i].1;
            match revs.last_mut() {
                Some(last) if last.seq == seq => *last = rev,
                _ => revs.push(rev),
            }
        } else {
            let (key, slot) = {
                let mut arena = self.arena.lock();
                (copy_in(&mut arena, key), slot_of(&mut arena))
            };
            let i = maps.entries.len();
            maps.entries.push((
                key,
                smallvec![Revision {
                    seq,
                    slot,
                    value_offset,
                }],
            ));
            maps.hashed.insert_unique(h.0, (h.0, i), |&(eh, _)| eh);
            maps.unsorted.push(i);
            if maps.unsorted.len() >= UNSORTED_ENTRIES_MAX {
                maps.settle();
            }
        }
        drop(m);
        self.max_seq.fetch_max(seq, Ordering::Relaxed);
        if spanning {
            self.max_spanning_seq.fetch_max(seq, Ordering::Relaxed);
        }
        self.bytes.fetch_add(charge, Ordering::Relaxed);
        if self.charged.load(Ordering::Relaxed) {
            self.budget.used_bytes.fetch_add(charge, Ordering::Relaxed);
        }
        self.entries.fetch_add(1, Ordering::Relaxed);
    }

    /// Removes version `seq` of `key` again (a batch spanning partitions whose other part
    /// failed). Callers hold the partition's write lock.
    pub(crate) fn remove_version(&self, key: &[u8], seq: u64) {
        let mut m = self.map.write();
        let h = KeyHash::of(key);
        let Some(i) = m.find(key, h) else {
            return;
        };
        let revs = &mut m.entries[i].1;
        revs.retain(|r| r.seq != seq);
        if revs.is_empty() {
            // The emptied entry stays in the key order: ordered readers skip it.
            m.forget(key, h);
        }
    }

    /// The newest version of `key` (whose hash is `h`) with a sequence number at most `at`.
    pub(crate) fn get(&self, key: &[u8], h: KeyHash, at: u64) -> Option<Slot> {
        let m = self.map.read();
        let i = m.find(key, h)?;
        visible(m.revisions(i), at).cloned()
    }

    /// Whether the newest version of `key` (whose hash is `h`) is a value rather than a
    /// tombstone, if this memtable has one (key counts: no copy of the slot).
    pub(crate) fn newest_is_live(&self, key: &[u8], h: KeyHash) -> Option<bool> {
        let m = self.map.read();
        let i = m.find(key, h)?;
        m.revisions(i).last().map(|r| r.slot != Slot::Delete)
    }

    /// The sequence number of the newest version of `key` (whose hash is `h`), if this
    /// memtable has one.
    pub(crate) fn newest_seq(&self, key: &[u8], h: KeyHash) -> Option<u64> {
        let m = self.map.read();
        let i = m.find(key, h)?;
        m.revisions(i).last().map(|r| r.seq)
    }

    /// The highest sequence number inserted (0 for none).
    pub(crate) fn max_seq(&self) -> u64 {
        self.max_seq.load(Ordering::Relaxed)
    }

    /// The highest sequence number of a batch spanning partitions (0 for none).
    pub(crate) fn max_spanning_seq(&self) -> u64 {
        self.max_spanning_seq.load(Ordering::Relaxed)
    }

    /// Gives this memtable's bytes back to the budget (after flush; a snapshot may keep the
    /// memtable itself alive longer).
    pub(crate) fn release_budget(&self) {
        if self.charged.swap(false, Ordering::AcqRel) {
            self.budget
                .used_bytes
                .fetch_sub(self.bytes.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn entries(&self) -> usize {
        self.entries.load(Ordering::Relaxed)
    }

    /// The bytes of the entries inserted, as their log holds them.
    pub(crate) fn log_entry_bytes(&self) -> u64 {
        self.log_entry_bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.read().hashed.is_empty()
    }

    /// Calls `f` on the newest version of every key in key order (flush: the memtable is
    /// immutable by then and every version in it visible, so the read lock held meanwhile
    /// blocks nobody).
    pub(crate) fn for_each(
        &self,
        mut f: impl FnMut(&Bytes, &Slot, u64) -> crate::Result<()>,
    ) -> crate::Result<()> {
        self.for_each_revisions(|k, revs| match revs.last() {
            Some(r) => f(k, &r.slot, r.value_offset),
            None => Ok(()),
        })
    }

    /// The newest version at or below `at` of every key in key order, with its sequence number
    /// (checkpoints).
    pub(crate) fn for_each_at(
        &self,
        at: u64,
        mut f: impl FnMut(&Bytes, &Slot) -> crate::Result<()>,
    ) -> crate::Result<()> {
        self.for_each_revisions(|k, revs| match visible(revs, at) {
            Some(slot) => f(k, slot),
            None => Ok(()),
        })
    }

    /// Brings the key order up to date (a flush, before it walks an immutable memtable). The
    /// unsorted list is bounded, so readers wait for at most one batch.
    pub(crate) fn settle(&self) {
        self.map.write().settle();
    }

    /// Calls `f` on the versions of every key in key order: the B-tree's keys merged with the
    /// unsorted ones, sorted apart (an active memtable's checkpoint; a flush settles first).
    fn for_each_revisions(
        &self,
        mut f: impl FnMut(&Bytes, &Revisions) -> crate::Result<()>,
    ) -> crate::Result<()> {
        let m = self.map.read();
        let mut pending = m.unsorted.clone();
        m.sort_by_key(&mut pending);
        let mut tree = m.sorted.iter().map(|(k, i)| (k, *i)).peekable();
        let mut loose = pending.iter().map(|&i| (&m.entries[i].0, i)).peekable();
        let mut last_key: Option<&Bytes> = None;
        loop {
            let next = match (tree.peek(), loose.peek()) {
                (Some(a), Some(b)) if a.0 <= b.0 => tree.next(),
                (Some(_), Some(_)) | (None, Some(_)) => loose.next(),
                (Some(_), None) => tree.next(),
                (None, None) => break,
            };
            let Some((key, i)) = next else { break };
            // A key's entries come together: emptied ones, and at most one with versions. An
            // entry both in the B-tree and still unsorted (a settling cut between its steps;
            // none does that today) is visited once.
            let revs = m.revisions(i);
            if revs.is_empty() || last_key == Some(key) {
                continue;
            }
            last_key = Some(key);
            f(key, revs)?;
        }
        Ok(())
    }

    /// The key `back` places below the top of `(lower, upper)` in this memtable's key order
    /// (keys of any version, tombstones included): where a backwards scan's next forward step
    /// may start (`reverse.rs`). `None` when fewer keys lie in the range.
    pub(crate) fn key_back(
        &self,
        lower: &Bound<Bytes>,
        upper: &Bound<Bytes>,
        back: usize,
    ) -> Option<Bytes> {
        let (lo, hi) = (as_ref_bound(lower), as_ref_bound(upper));
        if is_empty_range(lo, hi) {
            return None;
        }
        let m = self.ordered();
        let key = m
            .sorted
            .range::<[u8], _>((lo, hi))
            .nth_back(back)
            .map(|(k, _)| k.clone());
        key
    }

    /// The map with its B-tree up to date, read-locked (range scans).
    fn ordered(&self) -> RwLockReadGuard<'_, Maps> {
        {
            let m = self.map.read();
            if m.unsorted.is_empty() {
                return m;
            }
        }
        let mut w = self.map.write();
        w.settle();
        RwLockWriteGuard::downgrade(w)
    }
}

/// The newest of `revs` (oldest first) with a sequence number at most `at`.
fn visible(revs: &Revisions, at: u64) -> Option<&Slot> {
    // Most reads want the newest version: a key written over and over (a collection's
    // metadata, a counter) holds one revision per write until the flush, and a bisection
    // of those is a cache miss per step.
    match revs.last() {
        Some(last) if last.seq <= at => return Some(&last.slot),
        None => return None,
        Some(_) => {}
    }
    let n = revs.partition_point(|r| r.seq <= at);
    n.checked_sub(1).map(|i| &revs[i].slot)
}

impl Drop for Memtable {
    fn drop(&mut self) {
        // Dropped without a flush (the database closed): its memory goes back to the budget.
        self.release_budget();
    }
}

/// Copies `bytes` into the current arena chunk (starting a new chunk when it is full) and returns
/// them as a slice of it: no allocation of its own.
fn copy_in(arena: &mut BytesMut, bytes: &[u8]) -> Bytes {
    if bytes.len() > ARENA_ITEM_BYTES_MAX {
        return Bytes::copy_from_slice(bytes);
    }
    if arena.capacity() - arena.len() < bytes.len() {
        *arena = BytesMut::with_capacity(ARENA_CHUNK_BYTES);
    }
    arena.extend_from_slice(bytes);
    arena.split().freeze()
}

/// Most entries copied per step by [`MemtableIter`].
const SCAN_CHUNK_ENTRIES: usize = 64;
/// Entries copied by its first step: short scans (a collection's next few elements) copy little,
/// long ones double the chunk up to [`SCAN_CHUNK_ENTRIES`].
const SCAN_FIRST_CHUNK_ENTRIES: usize = 4;

/// An owning iterator over a key range of a memtable. It copies a chunk of entries at a time and
/// re-seeks after the last key, so it holds no borrow and sees concurrent inserts past its cursor.
pub(crate) struct MemtableIter {
    mem: Arc<Memtable>,
    /// The sequence number the scan reads at.
    at: u64,
    lower: Bound<Bytes>,
    upper: Bound<Bytes>,
    chunk: std::vec::IntoIter<(Bytes, Slot)>,
    /// Entries the next step copies.
    chunk_entries: usize,
    done: bool,
}

impl MemtableIter {
    pub(crate) fn new(
        mem: Arc<Memtable>,
        at: u64,
        lower: Bound<Bytes>,
        upper: Bound<Bytes>,
    ) -> Self {
        MemtableIter {
            mem,
            at,
            lower,
            upper,
            chunk: Vec::new().into_iter(),
            chunk_entries: SCAN_FIRST_CHUNK_ENTRIES,
            done: false,
        }
    }

    fn refill(&mut self) {
        let want = self.chunk_entries;
        self.chunk_entries = (want * 2).min(SCAN_CHUNK_ENTRIES);
        let lo = as_ref_bound(&self.lower);
        let hi = as_ref_bound(&self.upper);
        if is_empty_range(lo, hi) {
            // B-tree ranges panic on these; a caller's backwards range is simply empty.
            self.done = true;
            return;
        }
        let at = self.at;
        let mut last_key: Option<&Bytes> = None;
        let mut seen = 0;
        let m = self.mem.ordered();
        let chunk: Vec<(Bytes, Slot)> = m
            .sorted
            .range::<[u8], _>((lo, hi))
            .take(want)
            .inspect(|(k, _)| {
                seen += 1;
                // Borrowed: cloned once below (a clone is an atomic count on the key's arena
                // chunk, shared with every other key in it).
                last_key = Some(*k);
            })
            .filter_map(|(k, &i)| visible(m.revisions(i), at).map(|v| (k.clone(), v.clone())))
            .collect();
        let last_key = last_key.cloned();
        drop(m);
        if seen < want {
            self.done = true;
        }
        if let Some(last) = last_key {
            self.lower = Bound::Excluded(last);
        }
        self.chunk = chunk.into_iter();
    }
}

/// Entries of a key range copied out of a memtable in one step under its read lock
/// ([`Memtable::visit_range`]): keys and inline values as plain bytes in one buffer, so that a
/// reader that only looks at them takes no reference count per entry (the counts of cloned
/// keys and values, and their drops, were a quarter of LRANGE's CPU).
#[derive(Default)]
struct CopiedEntries {
    bytes: Vec<u8>,
    entries: Vec<(std::ops::Range<usize>, CopiedValue)>,
    /// The last key the step passed (visible or not): where the next step starts, excluded.
    last_key: Vec<u8>,
}

/// The visible version of a copied entry.
enum CopiedValue {
    /// A range of [`CopiedEntries::bytes`].
    Inline(std::ops::Range<usize>),
    /// The value stays in a log.
    Pointer(ValuePtr),
    Delete,
}

impl CopiedEntries {
    fn push_bytes(&mut self, b: &[u8]) -> std::ops::Range<usize> {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(b);
        start..self.bytes.len()
    }
}

/// Most entries [`Memtable::visit_range`] copies per step (under the read lock: a few
/// microseconds).
const COPY_CHUNK_ENTRIES: usize = 256;

impl Memtable {
    /// Copies the versions visible at `at` of the first `max_entries` keys of `(lo, hi)` into
    /// `out` (replacing what it held), in key order, tombstones included. Returns whether the
    /// range may hold more keys after `out.last_key`.
    fn copy_range(
        &self,
        at: u64,
        (lo, hi): (Bound<&[u8]>, Bound<&[u8]>),
        max_entries: usize,
        out: &mut CopiedEntries,
    ) -> bool {
        out.bytes.clear();
        out.entries.clear();
        out.last_key.clear();
        if is_empty_range(lo, hi) {
            return false;
        }
        let mut seen = 0;
        let mut last: Option<&Bytes> = None;
        let m = self.ordered();
        for (k, &i) in m.sorted.range::<[u8], _>((lo, hi)).take(max_entries) {
            seen += 1;
            last = Some(k);
            let value = match visible(m.revisions(i), at) {
                None => continue,
                Some(Slot::Put(v)) => CopiedValue::Inline(out.push_bytes(v)),
                Some(Slot::Pointer(p)) => CopiedValue::Pointer(*p),
                Some(Slot::Delete) => CopiedValue::Delete,
            };
            let key = out.push_bytes(k);
            out.entries.push((key, value));
        }
        if let Some(last) = last {
            out.last_key.extend_from_slice(last);
        }
        seen == max_entries
    }

    /// Calls `visit` on the key and value of every key of `(lower, upper)` whose version
    /// visible at `at` is not a tombstone, in key order, until it returns false; `resolve`
    /// reads a value left in a log. Entries are copied out a chunk at a time (the lock is not
    /// held while `visit` runs), as [`MemtableIter`] does, but as plain bytes.
    pub(crate) fn visit_range(
        &self,
        at: u64,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        resolve: impl Fn(&ValuePtr) -> Result<Bytes>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let mut copied = CopiedEntries::default();
        let mut cursor: Vec<u8> = Vec::new();
        let mut started = false;
        let mut chunk = SCAN_FIRST_CHUNK_ENTRIES;
        loop {
            let lo = if started {
                Bound::Excluded(&cursor[..])
            } else {
                lower
            };
            let more = self.copy_range(at, (lo, upper), chunk, &mut copied);
            chunk = (chunk * 2).min(COPY_CHUNK_ENTRIES);
            for (key, value) in &copied.entries {
                let k = &copied.bytes[key.clone()];
                let keep = match value {
                    CopiedValue::Inline(v) => visit(k, &copied.bytes[v.clone()]),
                    CopiedValue::Pointer(p) => visit(k, &resolve(p)?),
                    CopiedValue::Delete => true,
                };
                if !keep {
                    return Ok(());
                }
            }
            if !more {
                return Ok(());
            }
            std::mem::swap(&mut cursor, &mut copied.last_key);
            started = true;
        }
    }
}

/// Whether no key can lie in `(lo, hi)`: start after end, or one key excluded at both ends
/// (the bounds `BTreeMap::range` refuses with a panic).
fn is_empty_range(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    match (lo, hi) {
        (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => a > b,
        _ => false,
    }
}

pub(crate) fn as_ref_bound(b: &Bound<Bytes>) -> Bound<&[u8]> {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn segmented_entries_index_like_a_vec() {
        let mut seg = Segmented::default();
        let mut model = Vec::new();
        for i in 0..(3 * SEGMENT_ENTRIES + 7) {
            seg.push(i * 3);
            model.push(i * 3);
            assert_eq!(seg.len(), model.len());
        }
        for (i, v) in model.iter().enumerate() {
            assert_eq!(seg[i], *v);
        }
        seg[SEGMENT_ENTRIES] = 1;
        assert_eq!(seg[SEGMENT_ENTRIES], 1);
        assert_eq!(seg[SEGMENT_ENTRIES - 1], (SEGMENT_ENTRIES - 1) * 3);
        assert_eq!(seg[SEGMENT_ENTRIES + 1], (SEGMENT_ENTRIES + 1) * 3);
    }

    /// What the memtable must hold: every version of each key, oldest first (`None`: a
    /// tombstone), by a plain B-tree map.
    type Model = BTreeMap<Vec<u8>, Vec<(u64, Option<Vec<u8>>)>>;

    #[derive(Debug, Clone)]
    enum Op {
        /// Key index, put (with a value byte) or delete, and whether the write starts a new
        /// sequence number or rewrites the key within the last one (one batch).
        Write(u8, Option<u8>, bool),
        /// Takes the newest version of a key back out (a spanning batch whose other part
        /// failed).
        TakeBack(u8),
        /// Reads a key at `newest - back`.
        Get(u8, u64),
        /// Scans keys from `lo` to `hi` at `newest - back` (brings the B-tree up to date).
        Scan(u8, u8, u64),
        /// Every key in order, newest versions (flush) or at `newest - back` (checkpoint).
        ForEach,
        ForEachAt(u64),
        /// A flush's sorting of the pending keys into the B-tree.
        Settle,
    }

    fn key(i: u8) -> Vec<u8> {
        // Long shared prefixes, as Redis keys in the server's keyspace have.
        format!("k\0counter:{:06}", u32::from(i) * 7919 % 1000).into_bytes()
    }

    fn slot_value(slot: &Slot) -> Option<Vec<u8>> {
        match slot {
            Slot::Put(b) => Some(b.to_vec()),
            Slot::Delete => None,
            Slot::Pointer(_) => panic!("memtables hold no pointers"),
        }
    }

    fn model_at(model: &Model, k: &[u8], at: u64) -> Option<Option<Vec<u8>>> {
        model
            .get(k)?
            .iter()
            .rev()
            .find(|(s, _)| *s <= at)
            .map(|(_, v)| v.clone())
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u8..40, proptest::option::weighted(0.8, any::<u8>()), any::<bool>())
                .prop_map(|(k, v, same)| Op::Write(k, v, same)),
            1 => (0u8..40).prop_map(Op::TakeBack),
            3 => (0u8..40, 0u64..4).prop_map(|(k, b)| Op::Get(k, b)),
            2 => (0u8..40, 0u8..40, 0u64..4).prop_map(|(a, b, back)| Op::Scan(a, b, back)),
            1 => Just(Op::ForEach),
            1 => (0u64..4).prop_map(Op::ForEachAt),
            1 => Just(Op::Settle),
        ]
    }

    proptest! {
        /// Point reads, range scans and ordered walks at any sequence number equal the model,
        /// whatever mix of writes, rewrites within a batch, versions taken back out and ordered
        /// reads (which sort the pending keys in at different moments) came before.
        #[test]
        fn memtable_equals_a_model(ops in proptest::collection::vec(op(), 1..300)) {
            let mem = Arc::new(Memtable::new(1, Arc::new(MemtableBudget::new(64 << 20, 1))));
            let mut model = Model::new();
            let mut seq = 0u64;
            for op in ops {
                match op {
                    Op::Write(k, v, same) => {
                        if !same || seq == 0 {
                            seq += 1;
                        }
                        let kind = if v.is_some() { Kind::Put } else { Kind::Delete };
                        let value = v.map(|b| vec![b; 3]).unwrap_or_default();
                        mem.insert(seq, false, kind, &key(k), &value, 0);
                        let revs = model.entry(key(k)).or_default();
                        let v = v.map(|_| value);
                        match revs.last_mut() {
                            Some(last) if last.0 == seq => last.1 = v,
                            _ => revs.push((seq, v)),
                        }
                    }
                    Op::TakeBack(k) => {
                        if let Some(revs) = model.get_mut(&key(k)) {
                            if let Some((s, _)) = revs.pop() {
                                mem.remove_version(&key(k), s);
                            }
                            if revs.is_empty() {
                                model.remove(&key(k));
                            }
                        }
                    }
                    Op::Get(k, back) => {
                        let at = seq.saturating_sub(back);
                        let got = mem.get(&key(k), KeyHash::of(&key(k)), at).map(|s| slot_value(&s));
                        prop_assert_eq!(got, model_at(&model, &key(k), at), "get {} at {}", k, at);
                        let newest = model.get(&key(k)).and_then(|r| r.last()).map(|r| r.0);
                        prop_assert_eq!(mem.newest_seq(&key(k), KeyHash::of(&key(k))), newest);
                        let live = model.get(&key(k)).and_then(|r| r.last()).map(|r| r.1.is_some());
                        prop_assert_eq!(mem.newest_is_live(&key(k), KeyHash::of(&key(k))), live);
                    }
                    Op::Scan(a, b, back) => {
                        let at = seq.saturating_sub(back);
                        let (lo, hi) = (key(a), key(b));
                        let got: Vec<(Vec<u8>, Option<Vec<u8>>)> = MemtableIter::new(
                            mem.clone(),
                            at,
                            Bound::Included(Bytes::from(lo.clone())),
                            Bound::Excluded(Bytes::from(hi.clone())),
                        )
                        .map(|(k, s)| (k.to_vec(), slot_value(&s)))
                        .collect();
                        let want: Vec<(Vec<u8>, Option<Vec<u8>>)> = if lo < hi {
                            model
                                .range(lo.clone()..hi.clone())
                                .filter_map(|(k, _)| model_at(&model, k, at).map(|v| (k.clone(), v)))
                                .collect()
                        } else {
                            Vec::new()
                        };
                        prop_assert_eq!(&got, &want);
                        // The same range visited from plain copies: live entries only, in
                        // chunks of 4, 8, 16... entries, stopped by the visitor or not.
                        let live: Vec<(Vec<u8>, Vec<u8>)> = want
                            .into_iter()
                            .filter_map(|(k, v)| v.map(|v| (k, v)))
                            .collect();
                        for stop in [usize::MAX, usize::from(a % 7) + 1] {
                            let mut visited = Vec::new();
                            mem.visit_range(
                                at,
                                Bound::Included(&lo[..]),
                                Bound::Excluded(&hi[..]),
                                |_| Err(Error::InvalidArgument("memtables hold no pointers".into())),
                                &mut |k, v| {
                                    visited.push((k.to_vec(), v.to_vec()));
                                    visited.len() < stop
                                },
                            )
                            .unwrap();
                            prop_assert_eq!(&visited[..], &live[..live.len().min(stop)]);
                        }
                    }
                    Op::ForEach => {
                        let mut got = Vec::new();
                        mem.for_each(|k, s, _| {
                            got.push((k.to_vec(), slot_value(s)));
                            Ok(())
                        })
                        .unwrap();
                        let want: Vec<(Vec<u8>, Option<Vec<u8>>)> = model
                            .iter()
                            .filter_map(|(k, r)| r.last().map(|(_, v)| (k.clone(), v.clone())))
                            .collect();
                        prop_assert_eq!(got, want);
                    }
                    Op::Settle => mem.settle(),
                    Op::ForEachAt(back) => {
                        let at = seq.saturating_sub(back);
                        let mut got = Vec::new();
                        mem.for_each_at(at, |k, s| {
                            got.push((k.to_vec(), slot_value(s)));
                            Ok(())
                        })
                        .unwrap();
                        let want: Vec<(Vec<u8>, Option<Vec<u8>>)> = model
                            .keys()
                            .filter_map(|k| model_at(&model, k, at).map(|v| (k.clone(), v)))
                            .collect();
                        prop_assert_eq!(got, want);
                    }
                }
                prop_assert_eq!(mem.is_empty(), model.is_empty());
            }
        }
    }

    /// An entry in the B-tree and still in the unsorted list (a settling cut between its two
    /// steps) is walked once.
    #[test]
    fn an_ordered_walk_between_settling_steps_sees_each_key_once() {
        let mem = Memtable::new(1, Arc::new(MemtableBudget::new(64 << 20, 1)));
        for k in [&b"b"[..], b"a", b"c"] {
            mem.insert(1, false, Kind::Put, k, b"v", 0);
        }
        {
            // The state between putting entries into the B-tree and emptying the list.
            let mut m = mem.map.write();
            let mut pending = m.unsorted.clone();
            m.sort_by_key(&mut pending);
            m.insert_sorted(&pending);
        }
        let mut seen = Vec::new();
        mem.for_each_at(u64::MAX, |k, _| {
            seen.push(k.to_vec());
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    }

    /// An ordered walk that starts while writes and scans go on (a checkpoint of the active
    /// memtable) sees every key written before it started, each once, in order, although a
    /// scan may move the pending keys into the B-tree between its copy of them and its walk.
    #[test]
    fn an_ordered_walk_beside_writes_and_scans_misses_no_key() {
        let mem = Arc::new(Memtable::new(
            1,
            Arc::new(MemtableBudget::new(256 << 20, 1)),
        ));
        for i in 0..20_000u32 {
            mem.insert(1, false, Kind::Put, format!("a{i:08}").as_bytes(), b"v", 0);
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let written = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let writer = {
            let (mem, stop, written) = (mem.clone(), stop.clone(), written.clone());
            std::thread::spawn(move || {
                let mut i = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    mem.insert(2, false, Kind::Put, format!("b{i:08}").as_bytes(), b"v", 0);
                    i += 1;
                    written.store(i, Ordering::Release);
                    if i % 64 == 0 {
                        // A scan moves the pending keys into the B-tree mid-walk.
                        let _ =
                            MemtableIter::new(mem.clone(), 2, Bound::Unbounded, Bound::Unbounded)
                                .take(1)
                                .count();
                    }
                }
            })
        };
        for round in 0..20 {
            if round % 2 == 1 {
                // A flush's settling, racing the writer's scans and new keys.
                mem.settle();
            }
            let before = written.load(Ordering::Acquire) as usize;
            let mut seen = Vec::new();
            mem.for_each_at(u64::MAX, |k, _| {
                seen.push(k.clone());
                Ok(())
            })
            .unwrap();
            assert!(
                seen.windows(2).all(|w| w[0] < w[1]),
                "out of order or repeated"
            );
            assert!(
                seen.len() >= 20_000 + before,
                "{} < {}",
                seen.len(),
                20_000 + before
            );
            for i in 0..before {
                assert_eq!(&seen[20_000 + i][..], format!("b{i:08}").as_bytes());
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
    }
}
