//! Sequence numbers: one order for every write of a database, across all partitions, and the
//! watermark up to which writes are visible to readers.
//!
//! A write (a whole batch, whichever partitions it touches) takes one sequence number under the
//! write locks of its partitions, applies itself (log append, memtable insert) and then reports
//! that it is done. The *visible* sequence number only moves past a number once every write
//! that took a number up to it is done, so a reader that reads at the visible number never sees
//! part of a batch, and never sees a later write without an earlier one (RocksDB's "last
//! published sequence"). A writer returns to its caller only once its own number is visible,
//! so a thread always reads what it wrote.
//!
//! The same slot-and-minimum idea tells how far the database is *durable*: each partition
//! publishes the oldest number it holds that has not yet been handed to the OS, and the oldest
//! not yet fsynced (its journal keeps them, under its write lock); every number up to
//! [`Sequencer::durable`] is at that level in every partition. Acknowledgements wait for it
//! (`journal::reach`), so a write is never acknowledged while an earlier one could still be lost
//! to the same failure, and log records carry it as their claim, from which recovery cuts the
//! order after a power cut (`batch::BatchHeader`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::{Condvar, Mutex};

/// Checks of the visible number before a waiting writer sleeps (a few microseconds).
const SPINS_BEFORE_SLEEP: u32 = 2_000;

/// A slot that holds no write in flight; a mark with nothing below the level.
pub(crate) const IDLE: u64 = u64::MAX;

/// How far a write has gone toward the disk: what a process crash spares (`Written`: handed
/// to the OS) or what a power cut spares too (`Synced`: fsynced).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    Written = 0,
    Synced = 1,
}

/// One partition's marks, one [`Level`] each, alone on their cache lines (128 bytes: two
/// lines, which adjacent-line prefetchers fetch together).
#[repr(align(128))]
struct Marks([AtomicU64; 2]);

/// Hands out sequence numbers and publishes them in order, without a lock on the write path:
/// each partition has a slot (its writes are serialized by its write lock) that holds a lower
/// bound of the number its write in flight takes, stored before the number is taken. The
/// visible number is one less than the smallest of the next number and every occupied slot;
/// every writer that finishes computes it and raises `visible` to it.
pub(crate) struct Sequencer {
    next: AtomicU64,
    visible: AtomicU64,
    slots: Vec<AtomicU64>,
    /// Per partition, per [`Level`]: the oldest number that partition holds below the level
    /// (IDLE: none). Written by the partition's journal under its write lock, before the
    /// number is reported done. One cache line each: they change at every group write.
    marks: Vec<Marks>,
    /// A recent value of [`Sequencer::durable`] at `Synced` (never above it): what records
    /// claim, refreshed whenever a partition's unsynced mark moves up.
    synced_floor: AtomicU64,
    /// One more than a partition whose log failed while holding a batch below a level (0:
    /// none): no later batch of any partition could be made durable after it, in order.
    stuck: AtomicUsize,
    waiters: AtomicUsize,
    sleep: Mutex<()>,
    published: Condvar,
}

impl Sequencer {
    /// A sequencer for `partitions` partitions whose writes up to `last` are visible.
    pub(crate) fn new(partitions: usize, last: u64) -> Sequencer {
        Sequencer {
            next: AtomicU64::new(last + 1),
            visible: AtomicU64::new(last),
            slots: (0..partitions.max(1))
                .map(|_| AtomicU64::new(IDLE))
                .collect(),
            marks: (0..partitions.max(1))
                .map(|_| Marks([AtomicU64::new(IDLE), AtomicU64::new(IDLE)]))
                .collect(),
            synced_floor: AtomicU64::new(last),
            stuck: AtomicUsize::new(0),
            waiters: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            published: Condvar::new(),
        }
    }

    /// Continues after `last` (at open, before any write, once recovery knows the highest
    /// number on disk).
    pub(crate) fn continue_after(&self, last: u64) {
        if self.next.load(Ordering::SeqCst) <= last {
            self.next.store(last + 1, Ordering::SeqCst);
            self.visible.fetch_max(last, Ordering::SeqCst);
            // Recovery made what it kept durable (replayed logs are fsynced) and removes what it
            // dropped before any write.
            self.synced_floor.fetch_max(last, Ordering::SeqCst);
        }
    }

    /// Sets `partition`'s mark at `level` (its journal, under its write lock): the oldest
    /// number it holds below the level, or IDLE.
    pub(crate) fn set_mark(&self, partition: usize, level: Level, oldest: u64) {
        let mark = &self.marks[partition % self.marks.len()].0[level as usize];
        let before = mark.swap(oldest, Ordering::SeqCst);
        if level == Level::Synced && oldest > before {
            self.refresh_synced_floor();
        }
    }

    /// Records that `partition`'s log failed while holding a batch below a level.
    pub(crate) fn set_stuck(&self, partition: usize) {
        let _ = self
            .stuck
            .compare_exchange(0, partition + 1, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// The first partition whose log failed while holding a batch below a level: every
    /// partition refuses writes from then on (each would be acknowledged after a batch that
    /// may be lost).
    pub(crate) fn stuck(&self) -> Option<usize> {
        self.stuck.load(Ordering::SeqCst).checked_sub(1)
    }

    /// `partition`'s mark at `level`.
    pub(crate) fn mark(&self, partition: usize, level: Level) -> u64 {
        self.marks[partition % self.marks.len()].0[level as usize].load(Ordering::SeqCst)
    }

    /// Every write numbered up to this has reached `level` in every partition (or was
    /// abandoned before its record existed: a failed write leaves its partition's mark at its
    /// number, so this stops below it for good). Visible numbers only: one still applying
    /// may not have set its mark yet.
    pub(crate) fn durable(&self, level: Level) -> u64 {
        // Visible first: every number up to it set its mark before it was reported done, so
        // the marks read after it show each one that is still below the level.
        let visible = self.visible();
        let oldest = self
            .marks
            .iter()
            .map(|m| m.0[level as usize].load(Ordering::SeqCst))
            .min()
            .unwrap_or(IDLE);
        visible.min(oldest.saturating_sub(1))
    }

    /// A recent [`Sequencer::durable`] at `Synced`, read without visiting every partition
    /// (what a record claims; lower than the true value at times, never higher).
    pub(crate) fn synced_floor(&self) -> u64 {
        self.synced_floor.load(Ordering::SeqCst)
    }

    /// Raises [`Sequencer::synced_floor`] to the current [`Sequencer::durable`].
    pub(crate) fn refresh_synced_floor(&self) {
        self.synced_floor
            .fetch_max(self.durable(Level::Synced), Ordering::SeqCst);
    }

    /// Takes the next number for a write of `partition`, whose write lock the caller holds
    /// (a batch spanning partitions uses the slot of its first). The caller must call
    /// [`Sequencer::done`] with the same partition, whether the write succeeded or not.
    pub(crate) fn begin(&self, partition: usize) -> u64 {
        let slot = &self.slots[partition % self.slots.len()];
        // The slot first: a writer computing the visible number either sees this slot or
        // read `next` before this number was taken.
        slot.store(self.next.load(Ordering::SeqCst), Ordering::SeqCst);
        self.next.fetch_add(1, Ordering::SeqCst)
    }

    /// Reports the write in flight in `partition` applied (or abandoned) and publishes what
    /// can be published.
    pub(crate) fn done(&self, partition: usize) {
        self.slots[partition % self.slots.len()].store(IDLE, Ordering::SeqCst);
        self.publish();
    }

    /// Raises the visible number to one below the oldest write still in flight.
    fn publish(&self) {
        let next = self.next.load(Ordering::SeqCst);
        let oldest = self
            .slots
            .iter()
            .map(|s| s.load(Ordering::SeqCst))
            .min()
            .unwrap_or(IDLE)
            .min(next);
        let before = self.visible.fetch_max(oldest - 1, Ordering::SeqCst);
        if before < oldest - 1 && self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.sleep.lock();
            self.published.notify_all();
        }
    }

    /// The last number handed out (its write may still be applying).
    pub(crate) fn last_handed_out(&self) -> u64 {
        self.next.load(Ordering::SeqCst) - 1
    }

    /// Every write numbered up to this is applied and visible.
    pub(crate) fn visible(&self) -> u64 {
        self.visible.load(Ordering::SeqCst)
    }

    /// Waits until `seq` is visible (writes before it in other partitions may still be
    /// applying; that takes microseconds, nothing waits for the disk while in flight).
    pub(crate) fn wait_visible(&self, seq: u64) {
        // Spinning briefly usually outlasts the writes waited for, and costs less than
        // sleeping on the condition variable and being woken.
        for _ in 0..SPINS_BEFORE_SLEEP {
            if self.visible() >= seq {
                return;
            }
            std::hint::spin_loop();
        }
        let mut g = self.sleep.lock();
        self.waiters.fetch_add(1, Ordering::SeqCst);
        while self.visible() < seq {
            // Bounded: a publication between the check and the wait is seen at the next one.
            self.published
                .wait_for(&mut g, std::time::Duration::from_millis(1));
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn numbers_become_visible_only_once_every_earlier_one_is_done() {
        let s = Sequencer::new(3, 10);
        assert_eq!(s.visible(), 10);
        let (a, b, c) = (s.begin(0), s.begin(1), s.begin(2));
        assert_eq!((a, b, c), (11, 12, 13));
        s.done(1);
        assert_eq!(s.visible(), 10, "12 is done but 11 is not");
        s.done(2);
        assert_eq!(s.visible(), 10);
        s.done(0);
        assert_eq!(s.visible(), 13);
        s.begin(1);
        s.done(1);
        assert_eq!(s.visible(), 14);
    }

    #[test]
    fn continue_after_moves_past_recovered_numbers() {
        let s = Sequencer::new(2, 0);
        s.continue_after(41);
        assert_eq!(s.visible(), 41);
        assert_eq!(s.begin(0), 42);
    }

    #[test]
    fn waiters_wake_when_their_number_is_published() {
        let s = Arc::new(Sequencer::new(2, 0));
        let first = s.begin(0);
        let second = s.begin(1);
        s.done(1);
        let waiter = {
            let s = s.clone();
            std::thread::spawn(move || {
                s.wait_visible(second);
                s.visible()
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!waiter.is_finished(), "returned before {first} was done");
        s.done(0);
        assert_eq!(waiter.join().unwrap(), second);
    }

    /// `durable` is bounded by the visible number and by every partition's mark at its level;
    /// a mark left at a failed write's number holds it below that number for good; the synced
    /// floor follows the synced marks up.
    #[test]
    fn durable_is_bounded_by_visible_and_every_partition_mark() {
        use Level::{Synced, Written};
        let s = Sequencer::new(3, 0);
        let mark_both = |p: usize, seq: u64| {
            s.set_mark(p, Written, seq);
            s.set_mark(p, Synced, seq);
        };
        let a = s.begin(0);
        mark_both(0, a);
        s.done(0);
        let b = s.begin(1);
        mark_both(1, b);
        s.done(1);
        assert_eq!((s.durable(Written), s.durable(Synced)), (0, 0));
        s.set_mark(0, Written, IDLE);
        assert_eq!((s.durable(Written), s.durable(Synced)), (a, 0));
        let c = s.begin(2);
        s.set_mark(1, Written, IDLE);
        assert_eq!(s.durable(Written), b, "{c} is not visible yet");
        s.done(2);
        assert_eq!(s.durable(Written), c);
        assert_eq!(s.synced_floor(), 0);
        s.set_mark(0, Synced, IDLE);
        assert_eq!(s.synced_floor(), 1, "partition 1 still holds {b} unsynced");
        s.set_mark(1, Synced, IDLE);
        assert_eq!(s.synced_floor(), c);
        // A write that failed leaves its partition's mark at its number.
        let failed = s.begin(0);
        s.set_mark(0, Written, failed);
        s.done(0);
        s.begin(1);
        s.done(1);
        assert_eq!(s.durable(Written), failed - 1);
    }

    /// Against a model: visible is always the largest n such that every number up to n is done
    /// (one write in flight per partition, finished in random order).
    #[test]
    fn visible_matches_a_model_under_random_completion_order() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        const PARTITIONS: usize = 8;
        let s = Sequencer::new(PARTITIONS, 0);
        let mut in_flight: Vec<Option<u64>> = vec![None; PARTITIONS];
        let mut done = std::collections::BTreeSet::new();
        for _ in 0..2000 {
            let p = rng.gen_range(0..PARTITIONS);
            match in_flight[p] {
                None => in_flight[p] = Some(s.begin(p)),
                Some(seq) => {
                    s.done(p);
                    done.insert(seq);
                    in_flight[p] = None;
                }
            }
            let model = (1..).take_while(|n| done.contains(n)).last().unwrap_or(0);
            assert_eq!(s.visible(), model);
        }
    }
}
