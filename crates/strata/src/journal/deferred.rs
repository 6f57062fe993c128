//! Deferred hand-off of log records to the OS: inside [`deferring_log_writes`] a write under
//! `EveryMs`/`Never` returns once appended and applied, and its caller completes the hand-off with
//! [`LogWrites::complete`] before acknowledging anything. A server does this for every client its
//! network thread serves in one round, so one `write()` covers the writes of many clients (as
//! Redis writes its append-only file once per event-loop round).

use std::cell::RefCell;
use std::sync::Arc;

use super::Journal;
use crate::error::Result;

thread_local! {
    /// Writes whose hand-off to the OS was deferred on this thread, when deferring.
    static DEFERRED: RefCell<Option<LogWrites>> = const { RefCell::new(None) };
}

/// Notes `seq` of `journal` as deferred if this thread is deferring; false if it is not.
pub(super) fn defer(journal: &Journal, seq: u64) -> bool {
    DEFERRED.with(|d| match d.borrow_mut().as_mut() {
        Some(writes) => {
            writes.note(journal, seq);
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
}

impl LogWrites {
    /// Whether no write is waiting.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Adds `other`'s writes.
    pub fn merge(&mut self, other: LogWrites) {
        for (journal, seq) in &other.pending {
            self.note(journal, *seq);
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
    /// covers whatever other writers appended meanwhile. An error means the writes are not safe
    /// and the journal refuses further writes.
    pub fn complete(&mut self) -> Result<()> {
        for (journal, seq) in self.pending.drain(..) {
            journal.write_to(seq)?;
        }
        Ok(())
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
