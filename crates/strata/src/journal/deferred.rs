//! Deferred hand-off of log records to the OS: inside [`deferring_log_writes`] a write under
//! `EveryMs`/`Never` returns once appended and applied, and its caller completes the hand-off with
//! [`LogWrites::complete`] before acknowledging anything. A server does this for every client its
//! network thread serves in one round, so one `write()` covers the writes of many clients (as
//! Redis writes its append-only file once per event-loop round).

use std::cell::RefCell;
use std::sync::Arc;

use super::{reach, Journal, Peers};
use crate::error::Result;
use crate::seqno::Level;

thread_local! {
    /// Writes whose hand-off to the OS was deferred on this thread, when deferring.
    static DEFERRED: RefCell<Option<LogWrites>> = const { RefCell::new(None) };
}

/// Notes record `record` (batch `seq`) of `journal` as deferred if this thread is deferring;
/// false if it is not. `peers`: whose earlier batches the completion must see written too.
pub(super) fn defer(journal: &Journal, record: u64, seq: u64, peers: Option<&Peers>) -> bool {
    DEFERRED.with(|d| match d.borrow_mut().as_mut() {
        Some(writes) => {
            writes.note(journal, record);
            if let Some(peers) = peers {
                writes.note_batch(peers, seq);
            }
            true
        }
        None => false,
    })
}

/// Writes made under `EveryMs`/`Never` sync whose records are appended and applied (visible to
/// readers) but not yet handed to the OS. Nothing may be acknowledged until
/// [`LogWrites::complete`] has succeeded; dropping them unfinished leaves the records for the
/// next writer or the syncer thread to write, like any buffered record.
#[must_use = "writes are not safe from a process crash until completed"]
#[derive(Default)]
pub struct LogWrites {
    pending: Vec<(Journal, u64)>,
    /// The highest batch noted and the partitions whose earlier batches must be written
    /// before it is acknowledged ([`reach`]).
    newest: Option<(Peers, u64)>,
}

impl LogWrites {
    /// Whether no write is waiting.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.newest.is_none()
    }

    /// Adds `other`'s writes.
    pub fn merge(&mut self, other: LogWrites) {
        for (journal, seq) in &other.pending {
            self.note(journal, *seq);
        }
        if let Some((peers, seq)) = &other.newest {
            self.note_batch(peers, *seq);
        }
    }

    /// Records that batch `seq` is among these writes.
    fn note_batch(&mut self, peers: &Peers, seq: u64) {
        match &mut self.newest {
            Some((_, newest)) => *newest = (*newest).max(seq),
            None => self.newest = Some((peers.clone(), seq)),
        }
    }

    /// Records that `journal` must be handed to the OS up to `seq` (one entry per journal).
    fn note(&mut self, journal: &Journal, seq: u64) {
        match self
            .pending
            .iter_mut()
            .find(|(j, _)| Arc::ptr_eq(&j.0, &journal.0))
        {
            Some((_, upto)) => *upto = (*upto).max(seq),
            None => self.pending.push((journal.clone(), seq)),
        }
    }

    /// Hands every record of these writes to the OS: one `write()` per journal, which also
    /// covers whatever other writers appended meanwhile, and every earlier batch of any
    /// partition still in a buffer (`journal::reach`). An error means the writes are not safe
    /// and the journal refuses further writes.
    pub fn complete(&mut self) -> Result<()> {
        for (journal, seq) in self.pending.drain(..) {
            journal.write_to(seq)?;
        }
        match self.newest.take() {
            Some((peers, seq)) => reach(Some(&peers), seq, Level::Written),
            None => Ok(()),
        }
    }
}

/// Runs `f`; its writes under `EveryMs`/`Never` sync return once appended and applied, without
/// handing their records to the OS, and are returned as [`LogWrites`] to complete before their
/// results are acknowledged to anyone. Writes under `Always` are fsynced as usual.
pub fn deferring_log_writes<T>(f: impl FnOnce() -> T) -> (T, LogWrites) {
    /// Ends the deferral, also when `f` panics.
    struct Restore(Option<LogWrites>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            DEFERRED.with(|d| *d.borrow_mut() = previous);
        }
    }
    let mut restore = Restore(DEFERRED.with(|d| d.borrow_mut().replace(LogWrites::default())));
    let out = f();
    let writes = DEFERRED.with(|d| d.borrow_mut().take()).unwrap_or_default();
    // Nested inside another deferral: the outer one completes these too.
    match restore.0.as_mut() {
        Some(outer) => {
            outer.merge(writes);
            (out, LogWrites::default())
        }
        None => (out, writes),
    }
}
