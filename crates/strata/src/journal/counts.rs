//! Counts of keys by class ([`crate::Options::key_classes`]), kept exact by the one write shape:
//! before a batch applies ([`super::apply_one`], [`super::write_across`]), under the
//! partition's write lock, each counted key it writes is looked up (present or not; values are
//! not read); once every part of the batch has applied, still under the lock, the partition's
//! counts move by what the batch created and removed. A server's DBSIZE reads them instead of
//! walking its keys.
//!
//! The counts are per partition, so each is changed only under its own write lock; a reader
//! sums the partitions without any lock (a batch being applied may or may not be in the sum,
//! as it may or may not be visible).
//!
//! Keys can also vanish or appear outside the write path: a bulk ingest, or a compaction that
//! turns a counted key's dead value into a tombstone. Those mark the counts *unknown* until the
//! next [`KeyCounts::reset`] (`Db::recount_keys`), so a count is either exact or absent, never
//! quietly wrong. So does a lookup that fails (a damaged table): the write goes on without it.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use crate::batch::{Entry, Kind};
use crate::options::KeyClasses;

use super::{JournalState, Journaled};

/// One partition's counts.
pub(crate) struct KeyCounts {
    classes: Arc<dyn KeyClasses>,
    counts: Box<[AtomicI64]>,
    /// False from open until the first reset, and after anything changed keys unseen.
    known: AtomicBool,
    /// Moves at every [`KeyCounts::forget`]: a recount that began before one (and may have
    /// walked keys an ingest or a compaction was about to change) is not trusted.
    forgotten: AtomicU64,
}

/// Counted keys a batch creates (+1) and removes (-1), by class, worked out before it applies.
#[derive(Default)]
pub(crate) struct CountChanges(Vec<(usize, i64)>);

impl KeyCounts {
    pub(crate) fn new(classes: &Arc<dyn KeyClasses>) -> KeyCounts {
        KeyCounts {
            classes: classes.clone(),
            counts: (0..classes.classes()).map(|_| AtomicI64::new(0)).collect(),
            known: AtomicBool::new(false),
            forgotten: AtomicU64::new(0),
        }
    }

    /// The class `key` is counted in.
    pub(crate) fn class_of(&self, key: &[u8]) -> Option<usize> {
        self.classes
            .class_of(key)
            .filter(|&c| c < self.counts.len())
    }

    /// This partition's count of `class`, or `None` while the counts are unknown.
    pub(crate) fn get(&self, class: usize) -> Option<i64> {
        if !self.known.load(Ordering::Acquire) {
            return None;
        }
        let n = self.counts.get(class)?.load(Ordering::Relaxed);
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

    /// Sets every class's count and marks them known, unless they were forgotten since
    /// `forgotten` was read (before the keys were counted). The caller holds the partition's
    /// write lock and counted its keys under it.
    fn reset(&self, counts: &[i64], forgotten: u64) -> bool {
        for (c, n) in self.counts.iter().zip(counts) {
            c.store(*n, Ordering::Relaxed);
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
    pub(crate) fn apply(&self, changes: &CountChanges) {
        for &(class, delta) in &changes.0 {
            if let Some(c) = self.counts.get(class) {
                c.fetch_add(delta, Ordering::Relaxed);
            }
        }
    }
}

/// Batches with at most this many counted keys find repeated keys by a linear search; larger
/// ones use a hash map.
const LINEAR_SEARCH_KEYS_MAX: usize = 16;

/// The counted keys `entries` create and remove, looked up under the write lock (`st`) before
/// they apply. `None` when the engine counts nothing, or when a lookup failed (the counts are
/// then marked unknown and the write goes on).
pub(crate) fn changes_locked<E: Journaled + ?Sized>(
    engine: &E,
    st: &JournalState,
    entries: &[Entry<'_>],
) -> Option<CountChanges> {
    let counts = engine.journal().counts.as_ref()?;
    let mut counted: Vec<(usize, usize)> = Vec::new();
    for (i, (_, key, _)) in entries.iter().enumerate() {
        if let Some(class) = counts.class_of(key) {
            counted.push((i, class));
        }
    }
    if counted.is_empty() {
        return Some(CountChanges::default());
    }
    // Whether each key exists as the batch goes, for keys the batch writes more than once.
    let mut linear: Vec<(&[u8], bool)> = Vec::new();
    let mut hashed: std::collections::HashMap<&[u8], bool> = std::collections::HashMap::new();
    let use_map = counted.len() > LINEAR_SEARCH_KEYS_MAX;
    let mut changes = CountChanges::default();
    for (i, class) in counted {
        let (kind, key, _) = entries[i];
        let seen = if use_map {
            hashed.get(key).copied()
        } else {
            linear.iter().find(|(k, _)| *k == key).map(|&(_, e)| e)
        };
        let existed = match seen {
            Some(e) => e,
            None => match engine.exists_locked(key, st) {
                Ok(e) => e,
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
            (false, true) => changes.0.push((class, 1)),
            (true, false) => changes.0.push((class, -1)),
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
    let mut n = vec![0i64; counts.counts.len()];
    engine.for_each_key_locked(&st, &mut |key| {
        if let Some(c) = counts.class_of(key) {
            n[c] += 1;
        }
    })?;
    Ok(counts.reset(&n, forgotten))
}
