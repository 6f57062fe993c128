//! The memtable: the newest writes of one partition, not yet in a table file.
//! Each key's versions sit in one list of entries; a hash map finds a key's entry (point
//! lookups and writes: one hash and one key comparison instead of ~20), and sorted runs of
//! entries give their order (scans, flush). A write of a key already in the memtable touches
//! only its entry; a write of a new key appends its entry to a list of unsorted entries, and
//! the list is sorted into a run of its own when it fills, or for a range scan or a flush;
//! runs are merged with each other in sequential passes (`Maps::push_run`). A B-tree before
//! them took the keys one by one: its comparisons were a fifth of the CPU of a Redis SET or
//! INCR under the partition's write lock, and a tenth to a quarter of the collection writes'.
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

/// A [`Slot`] whose value is borrowed (from a table's block, or a scan's copy buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotRef<'a> {
    Put(&'a [u8]),
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

/// Most entries left out of the key order: the write that reaches it sorts them into a run,
/// so that no scan, and no write, ever sorts more than this many at once.
const UNSORTED_ENTRIES_MAX: usize = 4096;

/// Runs are not merged into one longer than this: the merges a write sets off take a few
/// milliseconds at most. Merging without a bound, the write at which a memtable's entries
/// double merged all of them (20-24 ms at 300 000 keys in a standalone copy of the merge,
/// 50-100 ms at a million); the price is a run to bisect per this many entries at a scan's
/// start (four or five in a full memtable of small entries).
const RUN_ENTRIES_MAX: usize = 1 << 16;

/// Runs a merge keeps without an allocation: a full memtable of small entries holds four or
/// five runs at the bound and a logarithmic number of shorter ones.
const RUNS_INLINE: usize = 16;

/// Where a key's versions sit in [`Maps::entries`].
type EntryIndex = usize;

/// Entries of a run per fence key ([`Fences`]).
const FENCE_STRIDE_ENTRIES: usize = 16;

/// Every [`FENCE_STRIDE_ENTRIES`]th key of a run, copied back to back: a scan's start is
/// bisected among these (contiguous bytes) and then within one stride, instead of looking up an
/// entry and its key at every step (with a dozen runs of a full memtable, those steps' cache
/// misses were a fifth of a short LRANGE's CPU). About two bytes per entry.
#[derive(Default)]
struct Fences {
    bytes: Vec<u8>,
    /// Where fence `m` starts in `bytes`; one more, where the last ends.
    starts: Vec<usize>,
}

impl Fences {
    fn fence(&self, m: usize) -> &[u8] {
        &self.bytes[self.starts[m]..self.starts[m + 1]]
    }

    fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }
}

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
    /// Every entry except those of `unsorted`, in runs each sorted by key, each more than
    /// twice as long as the next up to [`RUN_ENTRIES_MAX`] ([`Maps::push_run`]): one run per
    /// 32 768-65 536 entries, and a logarithmic number of shorter ones.
    runs: Vec<Vec<EntryIndex>>,
    /// Each run's fence keys, in the same order.
    fences: Vec<Fences>,
    /// Counts changes of `runs`: a walk's [`RunsCursor`] stays valid while it is unchanged.
    generation: u64,
    /// Entries added since the runs were last brought up to date, in the order written
    /// (fewer than [`UNSORTED_ENTRIES_MAX`]).
    unsorted: Vec<EntryIndex>,
    /// The chunk keys and values are being copied into (written only by inserts, under the
    /// map's write lock).
    arena: BytesMut,
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

    fn key(&self, i: EntryIndex) -> &[u8] {
        &self.entries[i].0
    }

    /// `indexes` sorted by their entries' keys.
    fn sort_by_key(&self, indexes: &mut [EntryIndex]) {
        indexes.sort_unstable_by(|a, b| self.key(*a).cmp(self.key(*b)));
    }

    /// Adds `run` (sorted by key) to the runs, merging the last two while the one before the
    /// last is at most twice as long as the last and the two fit [`RUN_ENTRIES_MAX`]: each
    /// entry is merged a logarithmic number of times, in sequential passes. A B-tree took the
    /// same entries one by one, each a walk from the root with a key comparison per node slot
    /// (a cache miss each): 1.7-3x the CPU per key in sorted batches of 4096, measured over
    /// 300 000 and a million keys (BENCHMARKS.md).
    /// Emptied entries ([`Memtable::remove_version`]) are dropped by the merges.
    fn push_run(&mut self, run: Vec<EntryIndex>) {
        if run.is_empty() {
            return;
        }
        self.runs.push(run);
        self.generation += 1;
        while let [.., before, last] = &self.runs[..] {
            if before.len() > 2 * last.len() || before.len() + last.len() > RUN_ENTRIES_MAX {
                break;
            }
            let merged = self.merge(before, last);
            self.runs.truncate(self.runs.len() - 2);
            self.fences.truncate(self.runs.len());
            if !merged.is_empty() {
                self.runs.push(merged);
            }
        }
        // The runs before the merged (or pushed) last one kept theirs.
        while self.fences.len() < self.runs.len() {
            let fences = self.fences_of(&self.runs[self.fences.len()]);
            self.fences.push(fences);
        }
    }

    /// The fence keys of `run`.
    fn fences_of(&self, run: &[EntryIndex]) -> Fences {
        let mut f = Fences::default();
        f.starts.push(0);
        for &i in run.iter().step_by(FENCE_STRIDE_ENTRIES) {
            f.bytes.extend_from_slice(self.key(i));
            f.starts.push(f.bytes.len());
        }
        f
    }

    /// How many of `run`'s first entries have keys for which `before` holds (`before` holds
    /// for a prefix of the run: its keys sort), found among its fence keys `fences` first
    /// (or, without them, by bisecting the run alone).
    fn bisect(
        &self,
        run: &[EntryIndex],
        fences: Option<&Fences>,
        before: impl Fn(&[u8]) -> bool,
    ) -> usize {
        let Some(f) = fences else {
            return run.partition_point(|&i| before(self.key(i)));
        };
        // Fences `..passed` hold, so the answer is past entry (passed - 1) * stride, and at
        // or before passed * stride (the first fence that does not hold).
        let (mut lo, mut hi) = (0, f.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(f.fence(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let from = match lo {
            0 => return 0,
            passed => (passed - 1) * FENCE_STRIDE_ENTRIES + 1,
        };
        let to = (lo * FENCE_STRIDE_ENTRIES).min(run.len());
        from + run
            .get(from..to)
            .unwrap_or_default()
            .partition_point(|&i| before(self.key(i)))
    }

    /// `a` and `b` (each sorted by key) as one sorted run, without emptied entries.
    fn merge(&self, a: &[EntryIndex], b: &[EntryIndex]) -> Vec<EntryIndex> {
        let mut out = Vec::with_capacity(a.len() + b.len());
        let live = |i: &EntryIndex| !self.revisions(*i).is_empty();
        let (mut x, mut y) = (0, 0);
        while let (Some(&i), Some(&j)) = (a.get(x), b.get(y)) {
            if self.key(i) <= self.key(j) {
                x += 1;
                if live(&i) {
                    out.push(i);
                }
            } else {
                y += 1;
                if live(&j) {
                    out.push(j);
                }
            }
        }
        out.extend(a[x..].iter().chain(&b[y..]).filter(|i| live(i)));
        out
    }

    /// Sorts the unsorted entries into the runs (the write that fills the list, a range scan,
    /// a flush).
    fn settle(&mut self) {
        let mut pending = std::mem::take(&mut self.unsorted);
        self.sort_by_key(&mut pending);
        self.push_run(pending);
    }

    /// The entries with versions of `(lo, hi)` in key order (`reverse`: from the top), from
    /// the runs and `extra` (sorted by key; a read that does not settle first). Each source
    /// is bisected once, for where the range starts; its end is found as the merge reaches it.
    fn ordered_range<'a>(
        &'a self,
        (lo, hi): (Bound<&'a [u8]>, Bound<&'a [u8]>),
        extra: &'a [EntryIndex],
        reverse: bool,
    ) -> Ordered<'a> {
        let sources: SmallVec<[&'a [EntryIndex]; RUNS_INLINE]> = self
            .runs
            .iter()
            .map(|r| &r[..])
            .chain(std::iter::once(extra))
            .collect();
        let heads = sources
            .iter()
            .enumerate()
            .filter_map(|(source, run)| {
                // `extra` has none.
                let fences = self.fences.get(source);
                let (first, end) = if reverse {
                    let end = match hi {
                        Bound::Included(k) => self.bisect(run, fences, |key| key <= k),
                        Bound::Excluded(k) => self.bisect(run, fences, |key| key < k),
                        Bound::Unbounded => run.len(),
                    };
                    (0, end)
                } else {
                    let first = match lo {
                        Bound::Included(k) => self.bisect(run, fences, |key| key < k),
                        Bound::Excluded(k) => self.bisect(run, fences, |key| key <= k),
                        Bound::Unbounded => 0,
                    };
                    (first, run.len())
                };
                (first < end).then_some(Head { source, first, end })
            })
            .collect();
        Ordered {
            maps: self,
            sources,
            heads,
            stop: if reverse { lo } else { hi },
            reverse,
            current: None,
        }
    }

    /// Where `cursor` (left by a walk of the runs alone, up to `hi`) stopped, if the runs
    /// have not changed since: the walk goes on without bisecting them again. Its heads
    /// number the runs as [`Maps::ordered_range`] does (every run, in order).
    fn resume<'a>(&'a self, cursor: RunsCursor, hi: Bound<&'a [u8]>) -> Option<Ordered<'a>> {
        (cursor.generation == self.generation).then(|| Ordered {
            maps: self,
            sources: self.runs.iter().map(|r| &r[..]).collect(),
            heads: cursor.heads,
            stop: hi,
            reverse: false,
            current: None,
        })
    }
}

/// What is left of one sorted source of an [`Ordered`] merge: positions `first..end` of it.
#[derive(Clone, Copy)]
struct Head {
    source: usize,
    first: usize,
    end: usize,
}

/// Where a forward walk of a memtable's runs stopped: a later step of the same scan resumes
/// there if no run changed in between ([`Maps::resume`]), instead of bisecting every run
/// again (a third of LRANGE's CPU, which copies its range in growing steps).
#[derive(Clone, Default)]
pub(crate) struct RunsCursor {
    generation: u64,
    heads: SmallVec<[Head; RUNS_INLINE]>,
}

/// A merge of sorted runs of entries ([`Maps::ordered_range`]). Keys of one collection,
/// written together, sit together in a run: once a run's next key comes first, the merge
/// finds how many of its keys come before the best of the other runs' (probing 1, 2, 4...
/// ahead, then bisecting) and takes them without comparing each.
struct Ordered<'a> {
    maps: &'a Maps,
    /// Every run, in order, then the reader's extra sorted entries (if any).
    sources: SmallVec<[&'a [EntryIndex]; RUNS_INLINE]>,
    /// What is left of the sources, none empty.
    heads: SmallVec<[Head; RUNS_INLINE]>,
    /// The bound the merge ends at: the range's top, or its bottom from the top.
    stop: Bound<&'a [u8]>,
    reverse: bool,
    /// The head being taken from, and how many more of its entries come first.
    current: Option<(usize, usize)>,
}

impl<'a> Ordered<'a> {
    /// The entry `j` places from the near end of `head`, in the merge's direction.
    fn at(&self, head: Head, j: usize) -> EntryIndex {
        let run = self.sources[head.source];
        let pos = if self.reverse {
            head.end - 1 - j
        } else {
            head.first + j
        };
        run[pos]
    }

    fn key_at(&self, head: Head, j: usize) -> &'a [u8] {
        let maps = self.maps;
        maps.key(self.at(head, j))
    }

    /// Whether key `a` comes before key `b` in the merge's direction.
    fn before(&self, a: &[u8], b: &[u8]) -> bool {
        if self.reverse {
            a > b
        } else {
            a < b
        }
    }

    /// Whether `key` lies within the bound the merge ends at.
    fn within_stop(&self, key: &[u8]) -> bool {
        match (self.stop, self.reverse) {
            (Bound::Unbounded, _) => true,
            (Bound::Included(s), false) => key <= s,
            (Bound::Excluded(s), false) => key < s,
            (Bound::Included(s), true) => key >= s,
            (Bound::Excluded(s), true) => key > s,
        }
    }

    /// The head whose next key comes first, and how many of its keys come before the other
    /// heads' next keys and within the stop bound (`None`: the merge is over).
    fn choose(&self) -> Option<(usize, usize)> {
        let mut best: Option<(usize, &'a [u8])> = None;
        let mut second: Option<&'a [u8]> = None;
        for (h, head) in self.heads.iter().enumerate() {
            let k = self.key_at(*head, 0);
            match best {
                Some((_, b)) if !self.before(k, b) => {
                    if second.is_none_or(|s| self.before(k, s)) {
                        second = Some(k);
                    }
                }
                _ => {
                    second = best.map(|(_, b)| b);
                    best = Some((h, k));
                }
            }
        }
        let (h, k) = best?;
        if !self.within_stop(k) {
            return None;
        }
        let head = self.heads[h];
        // A short scan stops long before a long run of one collection ends: look ahead a
        // bounded stretch at a time.
        let len = (head.end - head.first).min(TAKE_AHEAD_ENTRIES_MAX);
        let take = match second.filter(|s| self.within_stop(s)) {
            // Keys equal to the other head's come first too (an emptied entry and the live
            // one of the same key: readers skip the emptied one).
            Some(s) => gallop(len, |j| !self.before(s, self.key_at(head, j))),
            None => gallop(len, |j| self.within_stop(self.key_at(head, j))),
        };
        Some((h, take))
    }

    /// The head being taken from and how many more of its entries come first, chosen anew
    /// when those are used up (`None`: the merge is over).
    fn turn(&mut self) -> Option<(usize, usize)> {
        match self.current {
            Some(c) if c.1 > 0 => Some(c),
            _ => {
                let chosen = self.choose();
                if chosen.is_none() {
                    self.heads.clear();
                }
                chosen
            }
        }
    }

    /// The next stretch of at most `max` entries (forward merges) that come from one run in a
    /// row, emptied ones included: a reader's loop over a plain slice instead of a step of
    /// the merge per entry.
    fn stretch(&mut self, max: usize) -> Option<&'a [EntryIndex]> {
        debug_assert!(!self.reverse);
        let (h, take) = self.turn()?;
        let head = self.heads[h];
        let n = take.min(max).max(1);
        let run: &'a [EntryIndex] = self.sources[head.source];
        let stretch = run.get(head.first..head.first + n)?;
        if head.first + n == head.end {
            self.heads.swap_remove(h);
            self.current = None;
        } else {
            self.heads[h].first += n;
            self.current = Some((h, take - n));
        }
        Some(stretch)
    }

    /// Where this walk stands, to resume it later ([`Maps::resume`]).
    fn into_cursor(self) -> RunsCursor {
        RunsCursor {
            generation: self.maps.generation,
            heads: self.heads,
        }
    }
}

/// Most entries of one run an [`Ordered`] merge takes before it compares the runs' next keys
/// again.
const TAKE_AHEAD_ENTRIES_MAX: usize = 128;

/// How many of positions `0..len` satisfy `pred`, which holds up to some position and not
/// from there on: probes 0, 1, 3, 7... and bisects the last step (a few comparisons when the
/// answer is small, a bisection's when it is large).
fn gallop(len: usize, mut pred: impl FnMut(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    let mut step = 1;
    while lo < hi {
        let probe = lo + step - 1;
        if probe >= hi {
            break;
        }
        if pred(probe) {
            lo = probe + 1;
            step *= 2;
        } else {
            hi = probe;
            break;
        }
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

impl Iterator for Ordered<'_> {
    type Item = EntryIndex;

    fn next(&mut self) -> Option<EntryIndex> {
        loop {
            let (h, take) = self.turn()?;
            let head = self.heads[h];
            let i = self.at(head, 0);
            let rest = if self.reverse {
                Head {
                    end: head.end - 1,
                    ..head
                }
            } else {
                Head {
                    first: head.first + 1,
                    ..head
                }
            };
            if rest.first == rest.end {
                self.heads.swap_remove(h);
                self.current = None;
            } else {
                self.heads[h] = rest;
                self.current = Some((h, take - 1));
            }
            if !self.maps.revisions(i).is_empty() {
                return Some(i);
            }
        }
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

/// One write of a batch ready for the key map: kind, key, value, the value's place in the log,
/// and the pointer to it there when it stays in the log.
type PreparedEntry<'e> = (Kind, &'e [u8], &'e [u8], u64, Option<ValuePtr>);

pub(crate) struct Memtable {
    map: RwLock<Maps>,
    budget: Arc<MemtableBudget>,
    /// Whether this memtable's bytes still count against the budget (until flushed: a
    /// snapshot may keep a flushed memtable alive, but it no longer holds writers back).
    charged: std::sync::atomic::AtomicBool,
    bytes: AtomicUsize,
    entries: AtomicUsize,
    /// The bytes the entries inserted take in the log ([`crate::batch::entry_bytes`]): what
    /// the flush subtracts the live separated values' entries from to learn how much of the
    /// log is garbage once flushed.
    log_entry_bytes: AtomicU64,
    /// The highest sequence number inserted.
    max_seq: AtomicU64,
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
            bytes: AtomicUsize::new(0),
            entries: AtomicUsize::new(0),
            log_entry_bytes: AtomicU64::new(0),
            max_seq: AtomicU64::new(0),
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
    /// `value_offset` is where the value sits in this memtable's log file.
    #[cfg(test)]
    pub(crate) fn insert(&self, seq: u64, kind: Kind, key: &[u8], value: &[u8], value_offset: u64) {
        self.insert_all(seq, [(kind, key, value, value_offset)]);
    }

    /// Inserts the writes of one batch as version `seq` of their keys, each `(kind, key,
    /// value, value_offset)` as [`Memtable::insert`] would, under one hold of the key map
    /// (which guards the arena too) and with one update of the counters: a pipelined collection write applies
    /// 17 entries a batch, and the per-entry locking was half of the inserts' CPU (the map's
    /// lock word bounces between the connection threads that read it).
    pub(crate) fn insert_all<'e>(
        &self,
        seq: u64,
        entries: impl IntoIterator<Item = (Kind, &'e [u8], &'e [u8], u64)>,
    ) {
        // Value pointers (a checksum of each value left in the log) and charges are worked
        // out before the key map's lock: readers wait for that lock.
        let mut charge = 0usize;
        let mut log_bytes = 0u64;
        let prepared: SmallVec<[PreparedEntry<'e>; 32]> = entries
            .into_iter()
            .map(|(kind, key, value, value_offset)| {
                let pointer = match kind {
                    Kind::Put => self.pointer_for(value, value_offset),
                    Kind::Delete => None,
                };
                let value_charge = if pointer.is_some() {
                    POINTER_CHARGE_BYTES
                } else {
                    value.len()
                };
                charge += key.len() + value_charge + ENTRY_OVERHEAD_BYTES;
                log_bytes += crate::batch::entry_bytes(kind, key.len(), value.len());
                (kind, key, value, value_offset, pointer)
            })
            .collect();
        if prepared.is_empty() {
            return;
        }
        let mut m = self.map.write();
        let maps = &mut *m;
        for &(kind, key, value, value_offset, pointer) in &prepared {
            let slot = match (kind, pointer) {
                (Kind::Put, Some(p)) => Slot::Pointer(p),
                (Kind::Put, None) => Slot::Put(copy_in(&mut maps.arena, value)),
                (Kind::Delete, _) => Slot::Delete,
            };
            let rev = Revision {
                seq,
                slot,
                value_offset,
            };
            let h = KeyHash::of(key);
            if let Some(i) = maps.find(key, h) {
                let revs = &mut maps.entries[i].1;
                match revs.last_mut() {
                    Some(last) if last.seq == seq => *last = rev,
                    _ => revs.push(rev),
                }
            } else {
                let key = copy_in(&mut maps.arena, key);
                let i = maps.entries.len();
                maps.entries.push((key, smallvec![rev]));
                maps.hashed.insert_unique(h.0, (h.0, i), |&(eh, _)| eh);
                maps.unsorted.push(i);
                if maps.unsorted.len() >= UNSORTED_ENTRIES_MAX {
                    maps.settle();
                }
            }
        }
        drop(m);
        self.log_entry_bytes.fetch_add(log_bytes, Ordering::Relaxed);
        self.max_seq.fetch_max(seq, Ordering::Relaxed);
        self.bytes.fetch_add(charge, Ordering::Relaxed);
        if self.charged.load(Ordering::Relaxed) {
            self.budget.used_bytes.fetch_add(charge, Ordering::Relaxed);
        }
        self.entries.fetch_add(prepared.len(), Ordering::Relaxed);
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

    /// Removes every version numbered above `seq` (recovery: batches after the first one a
    /// power cut lost, `db.rs`). Callers hold the partition's write lock.
    pub(crate) fn truncate_after(&self, seq: u64) {
        let mut m = self.map.write();
        for i in 0..m.entries.len() {
            let revs = &mut m.entries[i].1;
            if revs.last().is_none_or(|r| r.seq <= seq) {
                continue;
            }
            revs.retain(|r| r.seq <= seq);
            if revs.is_empty() {
                // As `remove_version` leaves it: an entry without versions, out of the index.
                let key = m.entries[i].0.clone();
                m.forget(&key, KeyHash::of(&key));
            }
        }
        drop(m);
        self.max_seq.fetch_min(seq, Ordering::Relaxed);
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

    /// Calls `f` on the versions of every key in key order: the runs merged with the
    /// unsorted entries, sorted apart (an active memtable's checkpoint; a flush settles first).
    fn for_each_revisions(
        &self,
        mut f: impl FnMut(&Bytes, &Revisions) -> crate::Result<()>,
    ) -> crate::Result<()> {
        let m = self.map.read();
        let mut pending = m.unsorted.clone();
        m.sort_by_key(&mut pending);
        let all = (Bound::Unbounded, Bound::Unbounded);
        for i in m.ordered_range(all, &pending, false) {
            let (key, revs) = &m.entries[i];
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
            .ordered_range((lo, hi), &[], true)
            .nth(back)
            .map(|i| m.entries[i].0.clone());
        key
    }

    /// The map with its runs up to date, read-locked (range scans).
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
    /// Where the last step stopped in the memtable's runs.
    cursor: Option<RunsCursor>,
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
            cursor: None,
            done: false,
        }
    }

    fn refill(&mut self) {
        let want = self.chunk_entries;
        self.chunk_entries = (want * 2).min(SCAN_CHUNK_ENTRIES);
        let lo = as_ref_bound(&self.lower);
        let hi = as_ref_bound(&self.upper);
        if is_empty_range(lo, hi) {
            // A caller's backwards range is simply empty.
            self.done = true;
            return;
        }
        let at = self.at;
        let mut chunk: Vec<(Bytes, Slot)> = Vec::new();
        let (seen, last_key) =
            self.mem
                .walk_chunk((lo, hi), want, &mut self.cursor, &mut |k, revs| {
                    if let Some(v) = visible(revs, at) {
                        chunk.push((k.clone(), v.clone()));
                    }
                });
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
/// ([`MemtableCursor`]): keys and inline values as plain bytes in one buffer, so that a
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

/// Most entries a [`MemtableCursor`] copies per step (under the read lock: a few
/// microseconds).
const COPY_CHUNK_ENTRIES: usize = 256;

/// The largest copy buffer a thread keeps for its next scan (one of larger values is dropped).
const COPIED_BYTES_KEPT_MAX: usize = 1 << 20;

thread_local! {
    /// The copy buffers of this thread's last [`MemtableCursor`], for its next.
    static COPIED_ENTRIES: std::cell::Cell<Option<CopiedEntries>> = const { std::cell::Cell::new(None) };
}

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
        cursor: &mut Option<RunsCursor>,
    ) -> bool {
        out.bytes.clear();
        out.entries.clear();
        out.last_key.clear();
        if is_empty_range(lo, hi) {
            return false;
        }
        let (seen, last) = self.walk_chunk((lo, hi), max_entries, cursor, &mut |k, revs| {
            let value = match visible(revs, at) {
                None => return,
                Some(Slot::Put(v)) => CopiedValue::Inline(out.push_bytes(v)),
                Some(Slot::Pointer(p)) => CopiedValue::Pointer(*p),
                Some(Slot::Delete) => CopiedValue::Delete,
            };
            let key = out.push_bytes(k);
            out.entries.push((key, value));
        });
        if let Some(last) = last {
            out.last_key.extend_from_slice(&last);
        }
        seen == max_entries
    }

    /// One step of a range scan, under the read lock: calls `f` on the key and versions of
    /// each of the first `max_entries` keys of `(lo, hi)` in key order (emptied entries
    /// included), taking the runs' stretches as plain slices. Resumes the walk `cursor` left
    /// where the runs have not changed since (no second bisection of every run) and leaves the
    /// walk's place there. Returns how many keys it passed and the last of them (cloned once
    /// per step: a clone is an atomic count on the key's arena chunk, shared with every other
    /// key in it).
    fn walk_chunk(
        &self,
        (lo, hi): (Bound<&[u8]>, Bound<&[u8]>),
        max_entries: usize,
        cursor: &mut Option<RunsCursor>,
        f: &mut dyn FnMut(&Bytes, &Revisions),
    ) -> (usize, Option<Bytes>) {
        let mut seen = 0;
        let mut last: Option<&Bytes> = None;
        let m = self.ordered();
        let mut walk = match cursor.take().and_then(|c| m.resume(c, hi)) {
            Some(resumed) => resumed,
            None => m.ordered_range((lo, hi), &[], false),
        };
        while let Some(stretch) = walk.stretch(max_entries - seen) {
            seen += stretch.len();
            for &i in stretch {
                let (k, revs) = &m.entries[i];
                last = Some(k);
                f(k, revs);
            }
            if seen == max_entries {
                break;
            }
        }
        let last = last.cloned();
        *cursor = Some(walk.into_cursor());
        (seen, last)
    }

    /// Calls `visit` on the key and value of every key of `(lower, upper)` whose version
    /// visible at `at` is not a tombstone, in key order, until it returns false; `resolve`
    /// reads a value left in a log. Entries are copied out a chunk at a time (the lock is not
    /// held while `visit` runs), as [`MemtableIter`] does, but as plain bytes. (The tree's
    /// visits merge [`MemtableCursor`]s with the tables' cursors; this is one cursor's walk.)
    #[cfg(test)]
    pub(crate) fn visit_range(
        &self,
        at: u64,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        resolve: impl Fn(&ValuePtr) -> Result<Bytes>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let mut cursor = MemtableCursor::new(self, at, lower, upper);
        if cursor.advance() {
            cursor.visit_rest(&resolve, visit)?;
        }
        Ok(())
    }
}

/// Walks the versions visible at `at` of a memtable's keys in a range (tombstones included),
/// copied out a chunk at a time as plain bytes ([`Memtable::copy_range`]): the lock is held
/// only while a chunk is copied, and a reader that only looks at the current entry takes no
/// reference count. The copy buffers are the thread's, kept between scans (growing them again
/// at every scan was a twentieth of a pipelined LRANGE_100's CPU); a cursor opened while
/// another holds them (a scan inside a visitor) takes fresh ones.
pub(crate) struct MemtableCursor<'a> {
    mem: &'a Memtable,
    at: u64,
    lower: Bound<&'a [u8]>,
    upper: Bound<&'a [u8]>,
    copied: CopiedEntries,
    /// The current entry's place in `copied.entries` (when `on_entry`).
    pos: usize,
    on_entry: bool,
    /// Whether a chunk was copied: the next starts after `resume_after`.
    started: bool,
    /// The last key the previous chunk passed, visible or not.
    resume_after: Vec<u8>,
    /// Whether the range may hold keys after the copied chunk.
    more: bool,
    /// Entries the next chunk copies.
    chunk_entries: usize,
    /// Where the last chunk stopped in the memtable's runs.
    runs_cursor: Option<RunsCursor>,
}

impl<'a> MemtableCursor<'a> {
    /// A cursor before the first entry of `(lower, upper)` visible at `at`.
    pub(crate) fn new(
        mem: &'a Memtable,
        at: u64,
        lower: Bound<&'a [u8]>,
        upper: Bound<&'a [u8]>,
    ) -> Self {
        let mut copied = COPIED_ENTRIES.take().unwrap_or_default();
        // What the last scan left there is not this one's.
        copied.entries.clear();
        MemtableCursor {
            mem,
            at,
            lower,
            upper,
            copied,
            pos: 0,
            on_entry: false,
            started: false,
            resume_after: Vec::new(),
            more: !is_empty_range(lower, upper),
            chunk_entries: SCAN_FIRST_CHUNK_ENTRIES,
            runs_cursor: None,
        }
    }

    /// Moves to the next entry: false past the end (and from then on).
    pub(crate) fn advance(&mut self) -> bool {
        if self.on_entry {
            self.pos += 1;
        }
        while self.pos >= self.copied.entries.len() {
            if !self.copy_next_chunk() {
                self.on_entry = false;
                return false;
            }
        }
        self.on_entry = true;
        true
    }

    /// Calls `visit` on the current entry and every later one that is not a tombstone, until
    /// it returns false: the walk over each chunk's copies as a plain loop (a visit's common
    /// case, where the active memtable alone holds the range). The cursor is spent after.
    pub(crate) fn visit_rest(
        &mut self,
        resolve: &dyn Fn(&ValuePtr) -> Result<Bytes>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        if !self.on_entry {
            return Ok(());
        }
        self.on_entry = false;
        let mut from = self.pos;
        loop {
            let copied = &self.copied;
            for (key, value) in copied.entries.get(from..).unwrap_or_default() {
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
            if !self.copy_next_chunk() {
                return Ok(());
            }
            from = 0;
        }
    }

    /// Copies the range's next chunk (replacing the last), the current entry its first:
    /// false when the range holds no more keys.
    fn copy_next_chunk(&mut self) -> bool {
        if !self.more {
            return false;
        }
        let lo = if self.started {
            Bound::Excluded(&self.resume_after[..])
        } else {
            self.lower
        };
        self.more = self.mem.copy_range(
            self.at,
            (lo, self.upper),
            self.chunk_entries,
            &mut self.copied,
            &mut self.runs_cursor,
        );
        self.chunk_entries = (self.chunk_entries * 2).min(COPY_CHUNK_ENTRIES);
        std::mem::swap(&mut self.resume_after, &mut self.copied.last_key);
        self.started = true;
        self.pos = 0;
        true
    }

    /// The current entry's key; `None` before the first entry and past the end.
    pub(crate) fn key(&self) -> Option<&[u8]> {
        let (key, _) = self
            .copied
            .entries
            .get(self.pos)
            .filter(|_| self.on_entry)?;
        self.copied.bytes.get(key.clone())
    }

    /// The current entry's slot (a tombstone before the first entry and past the end).
    pub(crate) fn slot_ref(&self) -> SlotRef<'_> {
        match self.copied.entries.get(self.pos).filter(|_| self.on_entry) {
            Some((_, CopiedValue::Inline(v))) => {
                SlotRef::Put(self.copied.bytes.get(v.clone()).unwrap_or_default())
            }
            Some((_, CopiedValue::Pointer(p))) => SlotRef::Pointer(*p),
            Some((_, CopiedValue::Delete)) | None => SlotRef::Delete,
        }
    }
}

impl Drop for MemtableCursor<'_> {
    fn drop(&mut self) {
        // A visit drops one cursor per memtable: the active one's grown buffers are kept, not
        // replaced by an immutable memtable's cursor that copied nothing.
        let kept = COPIED_ENTRIES.take();
        let ours = std::mem::take(&mut self.copied);
        let larger = match kept {
            Some(k) if k.bytes.capacity() >= ours.bytes.capacity() => k,
            _ if ours.bytes.capacity() <= COPIED_BYTES_KEPT_MAX => ours,
            kept => kept.unwrap_or_default(),
        };
        COPIED_ENTRIES.set(Some(larger));
    }
}

/// Whether no key can lie in `(lo, hi)`: start after end, or one key excluded at both ends
/// (a scan of such a range copies nothing and is done at once).
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
    type Model = std::collections::BTreeMap<Vec<u8>, Vec<(u64, Option<Vec<u8>>)>>;

    #[derive(Debug, Clone)]
    enum Op {
        /// Key index, put (with a value byte) or delete, and whether the write starts a new
        /// sequence number or rewrites the key within the last one (one batch).
        Write(u8, Option<u8>, bool),
        /// A batch of writes under one new sequence number, inserted together
        /// ([`Memtable::insert_all`]); a key written twice in it keeps its last write.
        Batch(Vec<(u8, Option<u8>)>),
        /// Takes the newest version of a key back out (a spanning batch whose other part
        /// failed).
        TakeBack(u8),
        /// Reads a key at `newest - back`.
        Get(u8, u64),
        /// Scans keys from `lo` to `hi` at `newest - back` (brings the runs up to date).
        Scan(u8, u8, u64),
        /// Every key in order, newest versions (flush) or at `newest - back` (checkpoint).
        ForEach,
        ForEachAt(u64),
        /// A flush's sorting of the pending keys into the runs.
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
            2 => proptest::collection::vec(
                (0u8..40, proptest::option::weighted(0.8, any::<u8>())),
                0..20,
            )
            .prop_map(Op::Batch),
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
                        mem.insert(seq, kind, &key(k), &value, 0);
                        let revs = model.entry(key(k)).or_default();
                        let v = v.map(|_| value);
                        match revs.last_mut() {
                            Some(last) if last.0 == seq => last.1 = v,
                            _ => revs.push((seq, v)),
                        }
                    }
                    Op::Batch(writes) => {
                        seq += 1;
                        let writes: Vec<(Kind, Vec<u8>, Vec<u8>)> = writes
                            .into_iter()
                            .map(|(k, v)| match v {
                                Some(b) => (Kind::Put, key(k), vec![b; 3]),
                                None => (Kind::Delete, key(k), Vec::new()),
                            })
                            .collect();
                        mem.insert_all(
                            seq,
                            writes.iter().map(|(kind, k, v)| (*kind, &k[..], &v[..], 0)),
                        );
                        for (kind, k, v) in writes {
                            let v = (kind == Kind::Put).then_some(v);
                            let revs = model.entry(k).or_default();
                            match revs.last_mut() {
                                Some(last) if last.0 == seq => last.1 = v,
                                _ => revs.push((seq, v)),
                            }
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
                        // From the top: keys with any version, tombstones included.
                        for n in 0..3 {
                            let got = mem
                                .key_back(
                                    &Bound::Included(Bytes::from(lo.clone())),
                                    &Bound::Excluded(Bytes::from(hi.clone())),
                                    n,
                                )
                                .map(|k| k.to_vec());
                            let want = if lo < hi {
                                model.range(lo.clone()..hi.clone()).rev().nth(n).map(|(k, _)| k.clone())
                            } else {
                                None
                            };
                            prop_assert_eq!(got, want, "key_back {}", n);
                        }
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

    /// A visit drops a cursor per memtable; one over a memtable with nothing in the range,
    /// dropped last, leaves the thread's kept copy buffers as large as the other's were.
    #[test]
    fn an_empty_cursor_dropped_last_keeps_the_grown_copy_buffers() {
        let budget = Arc::new(MemtableBudget::new(64 << 20, 1));
        let full = Memtable::new(1, budget.clone());
        for i in 0..500u32 {
            full.insert(1, Kind::Put, format!("k{i:04}").as_bytes(), &[b'v'; 100], 0);
        }
        let empty = Memtable::new(2, budget);
        let mut a = MemtableCursor::new(&full, 1, Bound::Unbounded, Bound::Unbounded);
        let mut b = MemtableCursor::new(&empty, 1, Bound::Unbounded, Bound::Unbounded);
        while a.advance() {}
        assert!(!b.advance());
        let grown = a.copied.bytes.capacity();
        assert!(grown > 0);
        drop(a);
        drop(b);
        let kept = COPIED_ENTRIES.take().map_or(0, |c| c.bytes.capacity());
        assert_eq!(kept, grown);
    }

    /// Bisecting a run among its fence keys first finds the same place as bisecting the run
    /// itself (a plain `partition_point`, the expectation), for runs of every length around
    /// the stride and probes equal to, between, below and above their keys.
    #[test]
    fn fenced_bisection_finds_what_a_plain_one_finds() {
        for len in [0usize, 1, 2, 15, 16, 17, 31, 32, 33, 100, 257] {
            let mut m = Maps::default();
            // Keys 10, 20, 30... (as 6-digit text), written out of order.
            let mut run: Vec<EntryIndex> = (0..len)
                .rev()
                .map(|n| {
                    m.entries.push((
                        Bytes::from(format!("{:06}", (n + 1) * 10)),
                        Revisions::new(),
                    ));
                    m.entries.len() - 1
                })
                .collect();
            m.sort_by_key(&mut run);
            let fences = m.fences_of(&run);
            assert_eq!(fences.len(), len.div_ceil(FENCE_STRIDE_ENTRIES));
            for probe in 0..=(len + 2) * 10 {
                let k = format!("{probe:06}").into_bytes();
                let below = |key: &[u8]| key < &k[..];
                let at_or_below = |key: &[u8]| key <= &k[..];
                assert_eq!(
                    m.bisect(&run, Some(&fences), below),
                    run.partition_point(|&i| below(m.key(i))),
                    "len {len} probe {probe} <"
                );
                assert_eq!(
                    m.bisect(&run, Some(&fences), at_or_below),
                    run.partition_point(|&i| at_or_below(m.key(i))),
                    "len {len} probe {probe} <="
                );
            }
        }
    }

    /// A memtable of more keys than one run may hold keeps several long runs, and its
    /// ordered walk and scans still see every key once, in order.
    #[test]
    fn more_keys_than_a_run_holds_walk_in_order() {
        let mem = Arc::new(Memtable::new(1, Arc::new(MemtableBudget::new(1 << 30, 1))));
        let n = 3 * RUN_ENTRIES_MAX as u64 + 12_345;
        // A scattering order: multiplication by an odd constant modulo a power of two.
        let key = |i: u64| format!("k\0set:{:012}", i.wrapping_mul(2_654_435_761) % (1 << 40));
        for i in 0..n {
            mem.insert(1, Kind::Put, key(i).as_bytes(), b"v", 0);
            if i % 50_000 == 0 {
                // Scans settle short runs in between.
                let _ = MemtableIter::new(mem.clone(), 1, Bound::Unbounded, Bound::Unbounded)
                    .take(3)
                    .count();
            }
        }
        {
            let m = mem.map.read();
            assert!(m.runs.len() > 2, "{} runs", m.runs.len());
            assert!(m.runs.iter().all(|r| r.len() <= RUN_ENTRIES_MAX));
        }
        let mut want: Vec<Vec<u8>> = (0..n).map(|i| key(i).into_bytes()).collect();
        want.sort();
        let mut walked = Vec::new();
        mem.for_each_at(1, |k, _| {
            walked.push(k.to_vec());
            Ok(())
        })
        .unwrap();
        assert_eq!(walked, want);
        let from = Bound::Excluded(Bytes::from(want[1000].clone()));
        let scanned: Vec<Vec<u8>> = MemtableIter::new(mem.clone(), 1, from, Bound::Unbounded)
            .take(5000)
            .map(|(k, _)| k.to_vec())
            .collect();
        assert_eq!(scanned, want[1001..6001].to_vec());
    }

    /// A scan that goes on after new keys were sorted into the runs (its cursor into the old
    /// runs no longer applies) sees every key after the last it returned, old and new.
    #[test]
    fn a_scan_continued_after_the_runs_changed_sees_the_new_keys() {
        let mem = Arc::new(Memtable::new(1, Arc::new(MemtableBudget::new(64 << 20, 1))));
        let key = |i: u32| format!("k\0list:{i:05}").into_bytes();
        for i in (0..200).step_by(2) {
            mem.insert(1, Kind::Put, &key(i), b"v", 0);
        }
        let mut scan = MemtableIter::new(mem.clone(), 2, Bound::Unbounded, Bound::Unbounded);
        // The first two steps copy 4 and 8 entries: nothing copied is left unreturned.
        let copied = SCAN_FIRST_CHUNK_ENTRIES * 3;
        let first: Vec<Bytes> = scan.by_ref().take(copied).map(|(k, _)| k).collect();
        let last = first.last().cloned().unwrap();
        // New keys on both sides of the cursor, sorted in by a scan of their own.
        for i in (1..200).step_by(2) {
            mem.insert(2, Kind::Put, &key(i), b"v", 0);
        }
        let _ = MemtableIter::new(mem.clone(), 2, Bound::Unbounded, Bound::Unbounded).count();
        let rest: Vec<Vec<u8>> = scan.map(|(k, _)| k.to_vec()).collect();
        let want: Vec<Vec<u8>> = (0..200).map(key).filter(|k| k[..] > last[..]).collect();
        assert_eq!(rest, want);
        let visited = {
            let mut v = Vec::new();
            mem.visit_range(
                2,
                Bound::Unbounded,
                Bound::Unbounded,
                |_| unreachable!(),
                &mut |k, _| {
                    v.push(k.to_vec());
                    true
                },
            )
            .unwrap();
            v
        };
        assert_eq!(visited, (0..200).map(key).collect::<Vec<_>>());
    }

    /// `visit_range` keeps its copy buffers for the thread's next scan: a scan run inside
    /// another's visitor (which holds the buffers) and the scans after both, over ranges of
    /// other lengths and values of other sizes, each return exactly their range's entries
    /// (a `BTreeMap` of the same writes is the expectation).
    #[test]
    fn scans_inside_scans_and_after_them_each_see_their_own_range() {
        let mem = Memtable::new(1, Arc::new(MemtableBudget::new(256 << 20, 1)));
        let mut model = std::collections::BTreeMap::new();
        for i in 0..3000u32 {
            let k = format!("k{i:05}").into_bytes();
            let v = vec![b'a' + (i % 26) as u8; (i % 300) as usize];
            mem.insert(1, Kind::Put, &k, &v, 0);
            model.insert(k, v);
        }
        let scan = |lo: &[u8], hi: &[u8]| {
            let mut out = Vec::new();
            mem.visit_range(
                1,
                Bound::Included(lo),
                Bound::Excluded(hi),
                |_| unreachable!(),
                &mut |k, v| {
                    out.push((k.to_vec(), v.to_vec()));
                    true
                },
            )
            .unwrap();
            out
        };
        let want = |lo: &[u8], hi: &[u8]| -> Vec<(Vec<u8>, Vec<u8>)> {
            model
                .range(lo.to_vec()..hi.to_vec())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        let mut inner_seen = Vec::new();
        let mut outer = Vec::new();
        mem.visit_range(
            1,
            Bound::Included(&b"k00100"[..]),
            Bound::Excluded(&b"k01100"[..]),
            |_| unreachable!(),
            &mut |k, v| {
                if outer.len() % 250 == 0 {
                    inner_seen.push(scan(b"k02000", b"k02040"));
                }
                outer.push((k.to_vec(), v.to_vec()));
                true
            },
        )
        .unwrap();
        assert_eq!(outer, want(b"k00100", b"k01100"));
        assert_eq!(inner_seen.len(), 4);
        for inner in &inner_seen {
            assert_eq!(*inner, want(b"k02000", b"k02040"));
        }
        for (lo, hi) in [
            (&b"k00000"[..], &b"k03000"[..]),
            (b"k00007", b"k00009"),
            (b"k02990", b"k09999"),
            (b"k01500", b"k01500"),
        ] {
            assert_eq!(scan(lo, hi), want(lo, hi));
        }
    }

    /// An ordered walk that starts while writes and scans go on (a checkpoint of the active
    /// memtable) sees every key written before it started, each once, in order, although a
    /// scan may move the pending keys into the runs between its copy of them and its walk.
    #[test]
    fn an_ordered_walk_beside_writes_and_scans_misses_no_key() {
        let mem = Arc::new(Memtable::new(
            1,
            Arc::new(MemtableBudget::new(256 << 20, 1)),
        ));
        for i in 0..20_000u32 {
            mem.insert(1, Kind::Put, format!("a{i:08}").as_bytes(), b"v", 0);
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let written = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let writer = {
            let (mem, stop, written) = (mem.clone(), stop.clone(), written.clone());
            std::thread::spawn(move || {
                let mut i = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    mem.insert(2, Kind::Put, format!("b{i:08}").as_bytes(), b"v", 0);
                    i += 1;
                    written.store(i, Ordering::Release);
                    if i % 64 == 0 {
                        // A scan moves the pending keys into the runs mid-walk.
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
