//! Counts of keys by class ([`crate::Options::key_classes`]), kept exact by the one write shape:
//! before a batch applies ([`super::apply_one`], [`super::write_across`]), under the
//! partition's write lock, each counted key it writes is looked up in memory; once every part of
//! the batch has applied, still under the lock, the partition's counts move by what the batch
//! created and removed. A server's DBSIZE reads them instead of walking its keys.
//!
//! A lookup in memory is cheap; one in the tables is not (a block read for every overwritten
//! key: a third of a server's SET throughput, measured). So a key that no memtable holds is
//! counted as if it were absent, and noted *pending* on the memtable its write went to: the
//! count is then one too high for each pending key that a table holds. What the tables hold of
//! such a key cannot change until that memtable is flushed (older memtables do not hold it, a
//! compaction keeps what exists, and every write goes to a memtable first), so the flush looks
//! the pending keys up in the tables, sorted, in the background, and corrects the count just
//! before its table becomes visible. A reader ([`KeyCounts::count`]) looks up the pending keys of
//! its class not yet flushed: O(writes not yet flushed), never O(keys).
//!
//! The engine with an index in memory (the hash engine) knows every key's existence at once and
//! never leaves a key pending.
//!
//! Keys can also vanish or appear outside the write path: a bulk ingest, or a compaction that
//! turns a counted key's dead value into a tombstone. Those mark the counts *unknown* until the
//! next recount (`Db::recount_keys`), so a count is either exact or absent, never quietly
//! wrong. So does a write that fails after the engine applied part of it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::batch::{Entry, Kind};
use crate::options::KeyClasses;

use super::{JournalState, Journaled};

/// What an engine knows of a key's existence under the write lock, without reading a table.
pub(crate) enum Existence {
    /// Known from memory.
    Known(bool),
    /// Only the tables know; a write now goes to the memtable with this number.
    InTables { memtable: u64 },
}

/// One partition's counts.
pub(crate) struct KeyCounts {
    classes: Arc<dyn KeyClasses>,
    state: Mutex<CountState>,
    /// False from open until the first recount, and after anything changed keys unseen.
    known: AtomicBool,
    /// Moves at every [`KeyCounts::forget`]: a recount that began before one (and may have
    /// walked keys an ingest or a compaction was about to change) is not trusted.
    forgotten: AtomicU64,
}

struct CountState {
    /// Per class, counting pending keys as absent before their write.
    counts: Vec<i64>,
    /// Per memtable (its log number): keys whose first write in it found no version in
    /// memory, with their class.
    pending: HashMap<u64, Vec<(Bytes, usize)>>,
    /// Moves at every recount, which settles every pending key at once.
    recounts: u64,
}

/// What a batch changes, worked out before it applies: count moves by class, and keys left
/// pending on the memtable they go to.
#[derive(Default)]
pub(crate) struct CountChanges {
    deltas: Vec<(usize, i64)>,
    pending: Vec<(u64, Bytes, usize)>,
}

/// The pending keys of one memtable, read for settling at its flush.
pub(crate) struct Unsettled {
    memtable: u64,
    recounts: u64,
    pub(crate) keys: Vec<Bytes>,
    classes: Vec<usize>,
}

impl KeyCounts {
    pub(crate) fn new(classes: &Arc<dyn KeyClasses>) -> KeyCounts {
        KeyCounts {
            classes: classes.clone(),
            state: Mutex::new(CountState {
                counts: vec![0; classes.classes()],
                pending: HashMap::new(),
                recounts: 0,
            }),
            known: AtomicBool::new(false),
            forgotten: AtomicU64::new(0),
        }
    }

    /// The class `key` is counted in.
    pub(crate) fn class_of(&self, key: &[u8]) -> Option<usize> {
        self.classes.class_of(key).filter(|&c| c < self.classes())
    }

    fn classes(&self) -> usize {
        self.classes.classes()
    }

    /// This partition's count of `class`, or `None` while the counts are unknown. `view` is
    /// called under the counts' lock and gives what to look pending keys up in; `in_tables`
    /// says whether a table of it holds a key. An engine that never leaves keys pending
    /// passes a `view` that is never used.
    pub(crate) fn count<V>(
        &self,
        class: usize,
        view: impl FnOnce() -> V,
        in_tables: impl Fn(&V, &[u8]) -> crate::Result<bool>,
    ) -> Option<i64> {
        if !self.known.load(Ordering::Acquire) {
            return None;
        }
        let (n, keys, v) = {
            let st = self.state.lock();
            let keys: Vec<Bytes> = st
                .pending
                .values()
                .flatten()
                .filter(|(_, c)| *c == class)
                .map(|(k, _)| k.clone())
                .collect();
            // Under the lock: a memtable's pending keys leave it before its table is visible,
            // so a view read here has none of the tables holding these writes.
            let v = (!keys.is_empty()).then(view);
            (*st.counts.get(class)?, keys, v)
        };
        let mut n = n;
        if let Some(v) = v {
            for k in &keys {
                match in_tables(&v, k) {
                    Ok(true) => n -= 1,
                    Ok(false) => {}
                    // Unreadable (a damaged table): no answer rather than a wrong one.
                    Err(e) => {
                        tracing::warn!(error = %e, "key counts: a pending key could not be read");
                        return None;
                    }
                }
            }
        }
        // Checked again: a count read just as the counts became unknown is not trusted.
        self.known.load(Ordering::Acquire).then_some(n)
    }

    /// Marks the counts unknown (keys changed where no write could count them).
    pub(crate) fn forget(&self) {
        self.forgotten.fetch_add(1, Ordering::AcqRel);
        if self.known.swap(false, Ordering::AcqRel) {
            tracing::warn!("key counts are unknown until the next recount");
        }
    }

    /// How many times the counts were forgotten so far.
    pub(crate) fn forgotten(&self) -> u64 {
        self.forgotten.load(Ordering::Acquire)
    }

    /// Sets every class's count, with nothing pending, and marks them known, unless they were
    /// forgotten since `forgotten` was read (before the keys were counted). The caller holds
    /// the partition's write lock and counted its keys under it.
    fn reset(&self, counts: Vec<i64>, forgotten: u64) -> bool {
        {
            let mut st = self.state.lock();
            st.counts = counts;
            st.pending.clear();
            st.recounts += 1;
        }
        if self.forgotten() != forgotten {
            return false;
        }
        self.known.store(true, Ordering::Release);
        // A forget between the check and the store above undoes it.
        if self.forgotten() != forgotten {
            self.known.store(false, Ordering::Release);
            return false;
        }
        true
    }

    /// Applies what a batch changed; the caller still holds the write lock the changes were
    /// worked out under.
    pub(crate) fn apply(&self, changes: CountChanges) {
        if changes.deltas.is_empty() && changes.pending.is_empty() {
            return;
        }
        let mut st = self.state.lock();
        for (class, delta) in changes.deltas {
            if let Some(c) = st.counts.get_mut(class) {
                *c += delta;
            }
        }
        for (memtable, key, class) in changes.pending {
            st.pending.entry(memtable).or_default().push((key, class));
        }
    }

    /// Whether [`KeyCounts::count`] can answer now.
    pub(crate) fn known(&self) -> bool {
        self.known.load(Ordering::Acquire)
    }

    /// The pending keys of `memtable` (being flushed), sorted, for [`KeyCounts::settle`].
    pub(crate) fn unsettled(&self, memtable: u64) -> Option<Unsettled> {
        // Copied under the lock (writers of the partition wait on it), sorted after.
        let (mut keys, recounts) = {
            let st = self.state.lock();
            (st.pending.get(&memtable)?.clone(), st.recounts)
        };
        keys.sort_unstable();
        let (keys, classes) = keys.into_iter().unzip();
        Some(Unsettled {
            memtable,
            recounts,
            keys,
            classes,
        })
    }

    /// Settles a flushing memtable's pending keys: `in_tables[i]` says whether the tables
    /// (without that memtable) hold `u.keys[i]`; each that they hold was counted once too
    /// often. Called before the memtable's table becomes visible. A recount since
    /// [`KeyCounts::unsettled`] settled them already.
    pub(crate) fn settle(&self, u: Unsettled, in_tables: &[bool]) {
        let mut st = self.state.lock();
        if st.recounts == u.recounts {
            for (&class, &held) in u.classes.iter().zip(in_tables) {
                if held {
                    if let Some(c) = st.counts.get_mut(class) {
                        *c -= 1;
                    }
                }
            }
        }
        st.pending.remove(&u.memtable);
    }
}

/// Most keys whose existence a [`KnownExistence`] remembers: a read-modify-write reads few keys
/// (INCR one, HSET a record and its fields), and a lookup beyond these is only a memtable probe.
const KNOWN_KEYS_MAX: usize = 8;

/// The existence of keys read under the write lock before a batch applies (by the read of a
/// read-modify-write), so that the counts need not look them up again: the read already went
/// through every memtable and table, so it is exact where a memory-only lookup would leave a
/// key held only by tables pending until the flush.
#[derive(Default)]
pub(crate) struct KnownExistence {
    keys: std::cell::RefCell<Vec<(Vec<u8>, bool)>>,
}

impl KnownExistence {
    /// Remembers that `key` exists or not (the newest state under the write lock); keys past
    /// the first [`KNOWN_KEYS_MAX`] are not remembered.
    pub(crate) fn note(&self, key: &[u8], exists: bool) {
        let mut keys = self.keys.borrow_mut();
        if let Some(slot) = keys.iter_mut().find(|(k, _)| k == key) {
            slot.1 = exists;
        } else if keys.len() < KNOWN_KEYS_MAX {
            keys.push((key.to_vec(), exists));
        }
    }

    fn get(&self, key: &[u8]) -> Option<bool> {
        let keys = self.keys.borrow();
        keys.iter().find(|(k, _)| k == key).map(|&(_, e)| e)
    }
}

/// Batches with at most this many counted keys find repeated keys by a linear search; larger
/// ones use a hash map.
const LINEAR_SEARCH_KEYS_MAX: usize = 16;

/// The counted keys `entries` create and remove, looked up in memory under the write lock
/// (`st`) before they apply. `known` is what the caller read under the same hold of the lock
/// just before (a read-modify-write's reads: exact, tables included), used instead of a lookup.
/// `None` when the engine counts nothing, or when a lookup failed (the counts are then marked
/// unknown and the write goes on).
pub(crate) fn changes_locked<E: Journaled + ?Sized>(
    engine: &E,
    st: &JournalState,
    entries: &[Entry<'_>],
    known: &KnownExistence,
) -> Option<CountChanges> {
    let counts = engine.journal().counts.as_ref()?;
    // Unknown counts are not kept (a library that never recounts pays nothing): only a
    // recount makes them known, under the write lock, and it counts everything afresh.
    if !counts.known() {
        return None;
    }
    let mut counted: Vec<(usize, usize)> = Vec::new();
    for (i, (_, key, _)) in entries.iter().enumerate() {
        if let Some(class) = counts.class_of(key) {
            counted.push((i, class));
        }
    }
    let mut changes = CountChanges::default();
    if counted.is_empty() {
        return Some(changes);
    }
    // Whether each key exists as the batch goes, for keys the batch writes more than once.
    let mut linear: Vec<(&[u8], bool)> = Vec::new();
    let mut hashed: HashMap<&[u8], bool> = HashMap::new();
    let use_map = counted.len() > LINEAR_SEARCH_KEYS_MAX;
    for (i, class) in counted {
        let (kind, key, _) = entries[i];
        let seen = if use_map {
            hashed.get(key).copied()
        } else {
            linear.iter().find(|(k, _)| *k == key).map(|&(_, e)| e)
        };
        let existed = match seen.or_else(|| known.get(key)) {
            Some(e) => e,
            None => match engine.exists_locked(key, st) {
                Ok(Existence::Known(e)) => e,
                Ok(Existence::InTables { memtable }) => {
                    // Counted as absent until the flush of `memtable` looks.
                    changes
                        .pending
                        .push((memtable, Bytes::copy_from_slice(key), class));
                    false
                }
                Err(e) => {
                    tracing::warn!(error = %e, "key counts: a lookup failed");
                    counts.forget();
                    return None;
                }
            },
        };
        let exists = kind == Kind::Put;
        if use_map {
            hashed.insert(key, exists);
        } else if let Some(slot) = linear.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = exists;
        } else {
            linear.push((key, exists));
        }
        match (existed, exists) {
            (false, true) => changes.deltas.push((class, 1)),
            (true, false) => changes.deltas.push((class, -1)),
            _ => {}
        }
    }
    Some(changes)
}

/// Counts the engine's keys by class again under its write lock (its writers wait meanwhile)
/// and makes the counts known, unless something changed keys outside the write path while it
/// counted (an ingest, a compaction's tombstone: then they stay unknown, and `false`). Does
/// nothing when nothing is counted.
pub(crate) fn recount<E: Journaled + ?Sized>(engine: &E) -> crate::Result<bool> {
    let journal = engine.journal();
    let Some(counts) = journal.counts.as_ref() else {
        return Ok(true);
    };
    let st = journal.lock();
    let forgotten = counts.forgotten();
    let mut n = vec![0i64; counts.classes()];
    engine.for_each_key_locked(&st, &mut |key| {
        if let Some(c) = counts.class_of(key) {
            n[c] += 1;
        }
    })?;
    Ok(counts.reset(n, forgotten))
}
