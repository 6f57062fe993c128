//! A partition runs one engine: an LSM tree or a log-structured hash store. The router (`db`)
//! and the background workers talk to partitions only through this enum, so both engines get
//! the same API, the same tests and the same server.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::batch::{Entry, Update, WriteBatch};
use crate::error::Result;
use crate::hashlog::LogStore;
use crate::journal;
use crate::lsm::tree::Tree;
use crate::stats::PartitionStats;
use crate::util::merge::EntryIter;
use crate::util::work::WorkRequest;

pub(crate) enum Partition {
    Lsm(Box<Tree>),
    Log(Arc<LogStore>),
}

impl Partition {
    pub(crate) fn id(&self) -> usize {
        match self {
            Partition::Lsm(t) => t.id,
            Partition::Log(l) => l.id,
        }
    }

    pub(crate) fn dir(&self) -> &Path {
        match self {
            Partition::Lsm(t) => t.dir(),
            Partition::Log(l) => l.dir(),
        }
    }

    /// The LSM tree of this partition, if it runs that engine.
    pub(crate) fn lsm(&self) -> Option<&Tree> {
        match self {
            Partition::Lsm(t) => Some(t),
            Partition::Log(_) => None,
        }
    }

    pub(crate) fn work_request(&self) -> &WorkRequest {
        match self {
            Partition::Lsm(t) => &t.work,
            Partition::Log(l) => &l.work,
        }
    }

    pub(crate) fn write(&self, entries: &[Entry<'_>]) -> Result<()> {
        match self {
            Partition::Lsm(t) => journal::write(&**t, entries),
            Partition::Log(l) => journal::write(&**l, entries),
        }
    }

    /// Whether a write now would wait for background work (the log engine never makes it wait).
    pub(crate) fn writes_would_wait(&self) -> bool {
        match self {
            Partition::Lsm(t) => t.writes_would_wait(),
            Partition::Log(_) => false,
        }
    }

    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        match self {
            Partition::Lsm(t) => t.get(key),
            Partition::Log(l) => l.get(key),
        }
    }

    pub(crate) fn update<T>(
        &self,
        key: &[u8],
        f: impl FnOnce(Option<&[u8]>) -> Result<(Update, T)>,
        check: impl Fn(&[u8], &[u8]) -> Result<()>,
    ) -> Result<T> {
        match self {
            Partition::Lsm(t) => journal::update(&**t, key, f, check),
            Partition::Log(l) => journal::update(&**l, key, f, check),
        }
    }

    pub(crate) fn update_group<T>(
        &self,
        decide: impl FnOnce(&journal::GroupRead<'_>) -> Result<(WriteBatch, T)>,
        check: impl Fn(&WriteBatch) -> Result<()>,
    ) -> Result<T> {
        match self {
            Partition::Lsm(t) => journal::update_group(&**t, decide, check),
            Partition::Log(l) => journal::update_group(&**l, decide, check),
        }
    }

    /// Runs `body` with this partition's write lock held across the updates it makes
    /// (`journal::hold`).
    pub(crate) fn hold<T>(
        &self,
        body: impl FnOnce(&mut dyn journal::HeldUpdates) -> T,
    ) -> Result<T> {
        match self {
            Partition::Lsm(t) => journal::hold(&**t, body),
            Partition::Log(l) => journal::hold(&**l, body),
        }
    }

    /// Entries in range, key order, of the hash engine (the LSM scans at a snapshot, see
    /// `snapshot.rs`).
    pub(crate) fn iter_log(&self, lower: Bound<Bytes>, upper: Bound<Bytes>) -> Option<EntryIter> {
        match self {
            Partition::Lsm(_) => None,
            Partition::Log(l) => Some(l.iter(lower, upper)),
        }
    }

    /// This partition's key counts, when the options ask for them.
    pub(crate) fn key_counts(&self) -> Option<&journal::counts::KeyCounts> {
        match self {
            Partition::Lsm(t) => journal::Journaled::journal(&**t).counts.as_ref(),
            Partition::Log(l) => journal::Journaled::journal(&**l).counts.as_ref(),
        }
    }

    /// This partition's count of counted keys of `class`, or `None` when unknown.
    pub(crate) fn key_count(&self, class: usize) -> Option<i64> {
        match self {
            Partition::Lsm(t) => t.key_count(class),
            // Nothing is ever pending there: the view is never asked for.
            Partition::Log(l) => journal::Journaled::journal(&**l).counts.as_ref()?.count(
                class,
                || (),
                |_, _| Ok(false),
            ),
        }
    }

    /// Whether this partition's key counts are known now.
    pub(crate) fn key_counts_known(&self) -> bool {
        self.key_counts().is_some_and(|c| c.known())
    }

    /// Counts this partition's keys by class again (`journal::counts::recount`); `false` when
    /// keys changed outside the write path meanwhile (the counts stay unknown).
    pub(crate) fn recount_keys(&self) -> Result<bool> {
        match self {
            Partition::Lsm(t) => journal::counts::recount(&**t),
            Partition::Log(l) => journal::counts::recount(&**l),
        }
    }

    pub(crate) fn background_step(&self) -> Result<bool> {
        match self {
            Partition::Lsm(t) => t.background_step(),
            Partition::Log(l) => l.background_step(),
        }
    }

    /// LSM: all memtables to tables. Log: the log is the store, so a sync.
    pub(crate) fn flush(&self) -> Result<()> {
        match self {
            Partition::Lsm(t) => t.flush_all(),
            Partition::Log(l) => l.sync_now(true),
        }
    }

    /// LSM: merge everything into one level. Log: merge every segment.
    pub(crate) fn compact(&self) -> Result<()> {
        match self {
            Partition::Lsm(t) => t.compact_fully(),
            Partition::Log(l) => l.merge(true).map(|_| ()),
        }
    }

    pub(crate) fn sync_now(&self, fsync: bool) -> Result<()> {
        match self {
            Partition::Lsm(t) => t.sync_now(fsync),
            Partition::Log(l) => l.sync_now(fsync),
        }
    }

    pub(crate) fn stats(&self) -> PartitionStats {
        match self {
            Partition::Lsm(t) => t.stats(),
            Partition::Log(l) => l.stats(),
        }
    }
}
