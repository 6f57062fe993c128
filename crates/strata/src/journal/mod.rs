//! The journal of one partition: the single writer of its log files, with group commit.
//!
//! Writers append under `state` (the partition's write lock), which also orders the in-memory
//! update that follows (memtable insert or index update), so memory and log agree. The lock is
//! never held across fsync: `sync_to` lets one thread write the buffer and fsync while the
//! others wait on `sync_lock`; when they get it, that fsync usually covered them (group commit).
//! After a failed write or fsync the journal refuses further writes: the log may have a hole.
//!
//! Whatever the sync mode, a write returns only after its record has been handed to the OS
//! (`write_to`), so killing the process never loses an acknowledged write; the sync mode decides
//! only when the OS is made to put it on the disk. Concurrent writers share that `write()` the way
//! they share an fsync: whoever takes the lock first writes every record appended so far.
//!
//! One exception, asked for explicitly: inside [`deferring_log_writes`] a write under
//! `EveryMs`/`Never` returns before that hand-off and its caller completes it later with
//! [`LogWrites::complete`], before acknowledging anything. A server does this for every client
//! its network thread serves in one round, so one `write()` covers the writes of many clients
//! (as Redis writes its append-only file once per event-loop round).

use std::ops::Deref;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use bytes::Bytes;

use crate::batch::{encode_entries_at, Entry, Kind, Update};
use crate::error::{Error, IoContext, Result};

use crate::options::SyncMode;
use crate::vfs::SharedFs;
pub(crate) mod deferred;
pub(crate) mod format;
pub(crate) mod replay;
pub(crate) mod writer;

pub use deferred::{deferring_log_writes, LogWrites};
pub(crate) use format::{
    decode_record, wal_path, RECORD_HEADER_BYTES, WAL_HEADER_BYTES, WAL_SUFFIX,
};
pub(crate) use replay::{recover_log, replay_batches};
pub(crate) use writer::WalWriter;

/// Mutable state behind the write lock.
pub(crate) struct JournalState {
    pub(crate) wal: WalWriter,
    seq: u64,
    scratch: Vec<u8>,
    failed: Option<String>,
}

/// Where an appended record landed.
pub(crate) struct Appended {
    pub(crate) seq: u64,
    /// Offset of the record in its file; its payload starts `RECORD_HEADER_BYTES` later.
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

/// A partition's journal; clones share it (a deferred write keeps one until it completes).
#[derive(Clone)]
pub(crate) struct Journal(Arc<JournalInner>);

impl Deref for Journal {
    type Target = JournalInner;
    fn deref(&self) -> &JournalInner {
        &self.0
    }
}

pub(crate) struct JournalInner {
    partition: usize,
    fs: SharedFs,
    sync: SyncMode,
    state: Mutex<JournalState>,
    synced_seq: AtomicU64,
    /// Every record up to this sequence number has been handed to the OS (a lower bound: the
    /// authority is `WalWriter::written_seq` under the lock; this only spares writers the lock).
    written_seq: AtomicU64,
    sync_lock: Mutex<()>,
    bytes_written: AtomicU64,
}

/// What an engine gives the journal so that writes and read-modify-writes take one shape in
/// both engines: [`write`] and [`update`] drive it.
pub(crate) trait Journaled {
    /// The partition's journal.
    fn journal(&self) -> &Journal;
    /// Waits (or refuses) before a write while background work is behind; the LSM slows
    /// writers here, the hash engine never makes them wait.
    fn admit_write(&self) -> Result<()> {
        Ok(())
    }
    /// Reads `key` while the caller holds the write lock (`st`).
    fn get_locked(&self, key: &[u8], st: &JournalState) -> Result<Option<Bytes>>;
    /// Appends the batch to the log and applies it to memory; returns its sequence number.
    /// Caller holds the write lock.
    fn apply_locked(&self, st: &mut JournalState, entries: &[Entry<'_>]) -> Result<u64>;
}

/// Writes a batch through an engine: admitted, appended and applied under the write lock,
/// committed (fsync or hand-off to the OS) after it, so concurrent writers share the commit.
pub(crate) fn write(engine: &impl Journaled, entries: &[Entry<'_>]) -> Result<()> {
    engine.admit_write()?;
    let journal = engine.journal();
    let seq = engine.apply_locked(&mut journal.lock(), entries)?;
    journal.commit(seq)
}

/// Atomic read-modify-write of one key through an engine (see [`Journal::read_modify_write`]).
pub(crate) fn update<T>(
    engine: &impl Journaled,
    key: &[u8],
    decide: impl FnOnce(Option<&[u8]>) -> Result<(Update, T)>,
    check: impl Fn(&[u8], &[u8]) -> Result<()>,
) -> Result<T> {
    engine.admit_write()?;
    engine.journal().read_modify_write(
        key,
        |st| engine.get_locked(key, st),
        decide,
        check,
        |st, entries| engine.apply_locked(st, entries),
    )
}

impl Journal {
    pub(crate) fn new(
        fs: SharedFs,
        partition: usize,
        sync: SyncMode,
        wal: WalWriter,
        seq: u64,
    ) -> Self {
        Journal(Arc::new(JournalInner {
            partition,
            fs,
            sync,
            state: Mutex::new(JournalState {
                wal,
                seq,
                scratch: Vec::new(),
                failed: None,
            }),
            synced_seq: AtomicU64::new(seq),
            written_seq: AtomicU64::new(seq),
            sync_lock: Mutex::new(()),
            bytes_written: AtomicU64::new(0),
        }))
    }

    /// Makes the write with sequence number `seq` as durable as the sync mode promises: fsynced
    /// with `Always`, otherwise handed to the OS (safe from a crash of the process), or, inside
    /// [`deferring_log_writes`], noted for [`LogWrites::complete`].
    pub(crate) fn commit(&self, seq: u64) -> Result<()> {
        match self.sync {
            SyncMode::Always => self.sync_to(seq),
            SyncMode::EveryMs(_) | SyncMode::Never => {
                if deferred::defer(self, seq) {
                    Ok(())
                } else {
                    self.write_to(seq)
                }
            }
        }
    }

    /// Atomic read-modify-write of one key, the same for both engines: under the write lock,
    /// `get` reads the current value, `decide` chooses an [`Update`], `check` vets a new value,
    /// and `apply` appends and applies it (returning its sequence number); the commit (fsync or
    /// hand-off to the OS) happens after the lock is released, as for plain writes.
    pub(crate) fn read_modify_write<T>(
        &self,
        key: &[u8],
        get: impl FnOnce(&JournalState) -> Result<Option<Bytes>>,
        decide: impl FnOnce(Option<&[u8]>) -> Result<(Update, T)>,
        check: impl Fn(&[u8], &[u8]) -> Result<()>,
        apply: impl FnOnce(&mut JournalState, &[Entry<'_>]) -> Result<u64>,
    ) -> Result<T> {
        let (seq, out) = {
            let mut st = self.lock();
            self.check_writable(&st)?;
            let old = get(&st)?;
            let (update, out) = decide(old.as_deref())?;
            let seq = match update {
                Update::Keep => None,
                Update::Put(v) => {
                    check(key, &v)?;
                    Some(apply(&mut st, &[(Kind::Put, key, &v)])?)
                }
                Update::Delete => Some(apply(&mut st, &[(Kind::Delete, key, &[])])?),
            };
            (seq, out)
        };
        if let Some(seq) = seq {
            self.commit(seq)?;
        }
        Ok(out)
    }
}

impl JournalInner {
    /// Takes the write lock.
    pub(crate) fn lock(&self) -> MutexGuard<'_, JournalState> {
        self.state.lock()
    }

    fn read_only(&self, reason: &str) -> Error {
        Error::ReadOnly {
            partition: self.partition,
            reason: reason.to_string(),
        }
    }

    /// Fails unless the journal accepts writes.
    pub(crate) fn check_writable(&self, st: &JournalState) -> Result<()> {
        match &st.failed {
            Some(reason) => Err(self.read_only(reason)),
            None => Ok(()),
        }
    }

    /// Records `e` as the reason the journal refuses writes from now on, and returns it.
    pub(crate) fn fail(&self, st: &mut JournalState, e: Error) -> Error {
        st.failed.get_or_insert_with(|| e.to_string());
        e
    }

    /// Appends one batch as one record. Caller holds the lock.
    /// `value_offsets`, if given, receives each value's offset within the record's payload.
    pub(crate) fn append_locked(
        &self,
        st: &mut JournalState,
        entries: &[Entry<'_>],
        value_offsets: Option<&mut Vec<u32>>,
    ) -> Result<Appended> {
        self.check_writable(st)?;
        let mut payload = std::mem::take(&mut st.scratch);
        payload.clear();
        encode_entries_at(&mut payload, entries.iter().copied(), value_offsets);
        let seq = st.seq + 1;
        let offset = st.wal.len_bytes;
        let res = st.wal.append(&payload, seq);
        st.scratch = payload;
        let len = match res {
            Ok(n) => n,
            Err(e) => return Err(self.fail(st, e)),
        };
        st.seq = seq;
        self.bytes_written.fetch_add(len, Ordering::Relaxed);
        Ok(Appended { seq, offset, len })
    }

    /// Completes the current log file (written and fsynced) and continues in a new one.
    pub(crate) fn rotate_locked(&self, st: &mut JournalState, path: PathBuf) -> Result<()> {
        let res = (|| {
            st.wal.write_buffer()?;
            // Durable now, so a later fsync of the new file implies every earlier record is
            // durable too: group commit relies on that order.
            st.wal.file().sync_data().at(st.wal.path())?;
            self.synced_seq.fetch_max(st.seq, Ordering::AcqRel);
            st.wal = WalWriter::create(&*self.fs, path, st.seq)?;
            Ok(())
        })();
        res.map_err(|e| self.fail(st, e))
    }

    /// Group write: returns once every record up to `seq` has been handed to the OS. One
    /// `write()` covers every record appended by the time its writer takes the lock.
    pub(crate) fn write_to(&self, seq: u64) -> Result<()> {
        if self.written_seq.load(Ordering::Acquire) >= seq {
            return Ok(());
        }
        let mut st = self.state.lock();
        // A rotation since the append wrote the old file whole and starts the new writer at the
        // last sequence number, so this comparison holds across files.
        if st.wal.written_seq < seq {
            self.check_writable(&st)?;
            if let Err(e) = st.wal.write_buffer() {
                return Err(self.fail(&mut st, e));
            }
        }
        self.written_seq
            .fetch_max(st.wal.written_seq, Ordering::AcqRel);
        Ok(())
    }

    /// Group commit: returns once every record up to `seq` is fsynced.
    pub(crate) fn sync_to(&self, seq: u64) -> Result<()> {
        if self.synced_seq.load(Ordering::Acquire) >= seq {
            return Ok(());
        }
        let _g = self.sync_lock.lock();
        if self.synced_seq.load(Ordering::Acquire) >= seq {
            return Ok(());
        }
        self.sync_now(true)
    }

    /// Hands buffered records to the OS and, with `fsync`, forces them to disk.
    pub(crate) fn sync_now(&self, fsync: bool) -> Result<()> {
        let (file, path, upto) = {
            let mut st = self.state.lock();
            self.check_writable(&st)?;
            if let Err(e) = st.wal.write_buffer() {
                return Err(self.fail(&mut st, e));
            }
            self.written_seq
                .fetch_max(st.wal.written_seq, Ordering::AcqRel);
            (
                st.wal.file(),
                st.wal.path().to_path_buf(),
                st.wal.written_seq,
            )
        };
        if fsync {
            if let Err(e) = file.sync_data() {
                // After a failed fsync the kernel may have dropped the dirty pages: nothing
                // written since the last good fsync can be trusted.
                let e = Error::io(&path, e);
                return Err(self.fail(&mut self.state.lock(), e));
            }
            self.synced_seq.fetch_max(upto, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Bytes appended to log files since open.
    pub(crate) fn bytes_written(&self) -> u64 {
        self.bytes_written.load(Ordering::Relaxed)
    }
}
