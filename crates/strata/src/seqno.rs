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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Condvar, Mutex};

/// Hands out sequence numbers and publishes them in order.
pub(crate) struct Sequencer {
    pending: Mutex<Pending>,
    visible: AtomicU64,
    published: Condvar,
}

struct Pending {
    /// The next number to hand out.
    next: u64,
    /// Numbers handed out whose writes are not done yet, ascending and contiguous (every
    /// number handed out is pushed here until it and every number before it are done).
    in_flight: VecDeque<(u64, bool)>,
    /// Threads waiting in [`Sequencer::wait_visible`].
    waiters: usize,
}

impl Sequencer {
    /// A sequencer whose writes up to `last` are visible.
    pub(crate) fn new(last: u64) -> Sequencer {
        Sequencer {
            pending: Mutex::new(Pending {
                next: last + 1,
                in_flight: VecDeque::new(),
                waiters: 0,
            }),
            visible: AtomicU64::new(last),
            published: Condvar::new(),
        }
    }

    /// Continues after `last` (at open, once recovery knows the highest number on disk).
    /// Numbers already handed out stay as they are.
    pub(crate) fn continue_after(&self, last: u64) {
        let mut p = self.pending.lock();
        if p.in_flight.is_empty() && p.next <= last {
            p.next = last + 1;
            self.visible.store(last, Ordering::Release);
        }
    }

    /// Takes the next number for a write. The caller must call [`Sequencer::done`] with it,
    /// whether the write succeeded or not.
    pub(crate) fn begin(&self) -> u64 {
        let mut p = self.pending.lock();
        let seq = p.next;
        p.next += 1;
        p.in_flight.push_back((seq, false));
        seq
    }

    /// Reports the write of `seq` applied (or abandoned) and publishes every number up to the
    /// first one still in flight.
    pub(crate) fn done(&self, seq: u64) {
        let mut p = self.pending.lock();
        let Some(&(first, _)) = p.in_flight.front() else {
            debug_assert!(false, "sequence number {seq} reported done twice");
            return;
        };
        match p.in_flight.get_mut((seq - first) as usize) {
            Some(entry) if entry.0 == seq => entry.1 = true,
            _ => {
                debug_assert!(false, "sequence number {seq} was not in flight");
                return;
            }
        }
        let mut advanced = false;
        while p.in_flight.front().is_some_and(|&(_, done)| done) {
            p.in_flight.pop_front();
            advanced = true;
        }
        if advanced {
            let visible = p.in_flight.front().map_or(p.next - 1, |&(s, _)| s - 1);
            self.visible.store(visible, Ordering::Release);
            if p.waiters > 0 {
                self.published.notify_all();
            }
        }
    }

    /// The last number handed out (its write may still be applying).
    pub(crate) fn last_handed_out(&self) -> u64 {
        self.pending.lock().next - 1
    }

    /// Every write numbered up to this is applied and visible.
    pub(crate) fn visible(&self) -> u64 {
        self.visible.load(Ordering::Acquire)
    }

    /// Waits until `seq` is visible (writes before it in other partitions may still be
    /// applying; that takes microseconds, nothing waits for the disk while in flight).
    pub(crate) fn wait_visible(&self, seq: u64) {
        if self.visible() >= seq {
            return;
        }
        let mut p = self.pending.lock();
        p.waiters += 1;
        while self.visible() < seq {
            self.published.wait(&mut p);
        }
        p.waiters -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn numbers_become_visible_only_once_every_earlier_one_is_done() {
        let s = Sequencer::new(10);
        assert_eq!(s.visible(), 10);
        let (a, b, c) = (s.begin(), s.begin(), s.begin());
        assert_eq!((a, b, c), (11, 12, 13));
        s.done(b);
        assert_eq!(s.visible(), 10, "12 is done but 11 is not");
        s.done(c);
        assert_eq!(s.visible(), 10);
        s.done(a);
        assert_eq!(s.visible(), 13);
        let d = s.begin();
        s.done(d);
        assert_eq!(s.visible(), 14);
    }

    #[test]
    fn continue_after_moves_past_recovered_numbers() {
        let s = Sequencer::new(0);
        s.continue_after(41);
        assert_eq!(s.visible(), 41);
        assert_eq!(s.begin(), 42);
    }

    #[test]
    fn waiters_wake_when_their_number_is_published() {
        let s = Arc::new(Sequencer::new(0));
        let first = s.begin();
        let second = s.begin();
        s.done(second);
        let waiter = {
            let s = s.clone();
            std::thread::spawn(move || {
                s.wait_visible(second);
                s.visible()
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!waiter.is_finished(), "returned before {first} was done");
        s.done(first);
        assert_eq!(waiter.join().unwrap(), second);
    }

    /// Against a model: visible is always the largest n such that every number up to n is done.
    #[test]
    fn visible_matches_a_model_under_random_completion_order() {
        use rand::{seq::SliceRandom, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let s = Sequencer::new(0);
        let mut seqs: Vec<u64> = (0..200).map(|_| s.begin()).collect();
        seqs.shuffle(&mut rng);
        let mut done = std::collections::BTreeSet::new();
        for seq in seqs {
            s.done(seq);
            done.insert(seq);
            let model = (1..).take_while(|n| done.contains(n)).last().unwrap_or(0);
            assert_eq!(s.visible(), model);
        }
    }
}
