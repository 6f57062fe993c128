//! Requests for background work: a partition asks the worker pool (`background`) for a turn by
//! sending its id on a shared queue, once until a worker takes the request, so a busy partition
//! never floods the queue. Kept below the engines so that they need not know the pool.

use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::{Receiver, Sender};

/// The queue of partitions that want a worker: partition ids.
pub(crate) fn work_queue() -> (Sender<usize>, Receiver<usize>) {
    crossbeam_channel::unbounded()
}

/// One partition's way to ask the workers for a turn.
pub(crate) struct WorkRequest {
    partition: usize,
    queue: Sender<usize>,
    pending: AtomicBool,
}

impl WorkRequest {
    pub(crate) fn new(partition: usize, queue: Sender<usize>) -> Self {
        WorkRequest {
            partition,
            queue,
            pending: AtomicBool::new(false),
        }
    }

    /// Asks for a worker (once until a worker takes the request).
    pub(crate) fn request(&self) {
        if !self.pending.swap(true, Ordering::AcqRel) {
            // Sending fails only once the database is closing and the workers are gone.
            let _ = self.queue.send(self.partition);
        }
    }

    /// Called by the worker that took the request, before it works.
    pub(crate) fn taken(&self) {
        self.pending.store(false, Ordering::Release);
    }
}
