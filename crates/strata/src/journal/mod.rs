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

use std::collections::VecDeque;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, MutexGuard};

use bytes::Bytes;

use crate::batch::{encode_batch, BatchHeader, Entry, Kind, Update, WriteBatch};
use crate::error::{Error, IoContext, Result};

use crate::options::SyncMode;
use crate::seqno::{Level, Sequencer, IDLE};
use crate::vfs::SharedFs;
pub(crate) mod counts;
pub(crate) mod deferred;
pub(crate) mod format;
pub(crate) mod replay;
pub(crate) mod writer;

pub use deferred::{deferring_log_writes, LogWrites};
pub(crate) use format::{
    decode_record, wal_path, RECORD_HEADER_BYTES, WAL_HEADER_BYTES, WAL_SUFFIX,
};
pub(crate) use replay::{recover_log, replay_complete_log};
pub(crate) use writer::{LogTail, WalWriter};

/// Mutable state behind the write lock.
pub(crate) struct JournalState {
    pub(crate) wal: WalWriter,
    seq: u64,
    scratch: Vec<u8>,
    failed: Option<String>,
    /// The sequence number of the last batch applied to this partition (what a read under the
    /// lock sees; [`settle`] waits until scans see it too).
    last_applied: u64,
    /// The oldest batch (sequence number) appended but not yet handed to the OS, and the
    /// oldest not yet fsynced (IDLE: none); published as this partition's marks
    /// (`Sequencer::set_mark`). A failed append or write leaves them at that batch for good.
    unwritten_from: u64,
    unsynced_from: u64,
    /// Fsyncs begun and not finished: the last record number each covers and the batch first
    /// appended after it began (IDLE while none), which is the oldest unsynced once it ends.
    sync_points: VecDeque<(u64, u64)>,
}

/// The journals of every partition of a database (set once all are open): what an
/// acknowledgement waits on, [`reach`].
pub(crate) type Peers = Arc<OnceLock<Vec<Journal>>>;

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
    pub(crate) partition: usize,
    /// The database's sequence numbers, shared by every partition.
    pub(crate) seqs: Arc<Sequencer>,
    fs: SharedFs,
    sync: SyncMode,
    state: Mutex<JournalState>,
    synced_seq: AtomicU64,
    /// Every record up to this sequence number has been handed to the OS (a lower bound: the
    /// authority is `WalWriter::written_seq` under the lock; this only spares writers the lock).
    written_seq: AtomicU64,
    sync_lock: Mutex<()>,
    bytes_written: AtomicU64,
    /// Counts of keys by class, when the options ask for them (`counts.rs`).
    pub(crate) counts: Option<counts::KeyCounts>,
}

/// What an engine gives the journal so that writes and read-modify-writes take one shape in
/// both engines: [`write`], [`write_across`] and [`update`] drive it.
pub(crate) trait Journaled {
    /// Whether readers of this engine read at the visible sequence number (the LSM): then a
    /// writer returns only once its write is visible. The hash engine reads its newest state.
    const READS_AT_SNAPSHOTS: bool;
    /// Whether a plain read may take the write lock (the hash engine reads records still in the
    /// log's buffer under it): then [`hold`] cannot keep the lock while its caller reads.
    const READS_TAKE_THE_LOCK: bool = false;
    /// The partition's journal.
    fn journal(&self) -> &Journal;
    /// Waits (or refuses) before a write while background work is behind; the LSM slows
    /// writers here, the hash engine never makes them wait.
    fn admit_write(&self) -> Result<()> {
        Ok(())
    }
    /// Reads the newest state of `key`, applied writes not yet visible included, while the
    /// caller holds the write lock (`st`).
    fn get_locked(&self, key: &[u8], st: &JournalState) -> Result<Option<Bytes>>;
    /// Whether `key` exists in the newest state: [`Journaled::get_locked`] without reading
    /// the value where the engine can tell without it (the LSM's separated values). Caller
    /// holds the write lock.
    fn contains_locked(&self, key: &[u8], st: &JournalState) -> Result<bool> {
        Ok(self.get_locked(key, st)?.is_some())
    }
    /// The journals of the database's partitions, when acknowledgements must wait for earlier
    /// writes of other partitions to reach the same level ([`reach`]; the LSM: its recovery
    /// cuts the order there after a power cut).
    fn peers(&self) -> Option<&Peers> {
        None
    }
    /// Whether `key` exists in the newest state (as [`Journaled::get_locked`] sees it), from
    /// memory only (no table read, no value read): for key counts (`counts.rs`). Caller holds
    /// the write lock.
    fn exists_locked(&self, key: &[u8], st: &JournalState) -> Result<counts::Existence>;
    /// Calls `f` with every key that exists in the newest state, in no particular order, values
    /// unread; for recounting keys. Caller holds the write lock.
    fn for_each_key_locked(&self, st: &JournalState, f: &mut dyn FnMut(&[u8])) -> Result<()>;
    /// Appends the batch to the log and applies it to memory; returns the journal's record
    /// number (for [`Journal::commit`]). Caller holds the write lock.
    fn apply_locked(
        &self,
        st: &mut JournalState,
        header: &BatchHeader,
        entries: &[Entry<'_>],
    ) -> Result<u64>;
    /// Takes an applied part of a batch back out of memory, when another part of the same
    /// batch could not be applied (its record stays in the log; recovery drops it there, since
    /// the failed part is missing). Caller holds the write lock.
    fn unapply_locked(&self, _st: &mut JournalState, _seq: u64, _entries: &[Entry<'_>]) {}
    /// Work after a batch is applied and published, still under the write lock: the LSM
    /// switches a full memtable here (an fsync), after publication, so that writers of other
    /// partitions never wait for it.
    fn after_apply_locked(&self, _st: &mut JournalState) -> Result<()> {
        Ok(())
    }
}

/// A batch applied under the write lock: its journal record number and sequence number.
pub(crate) struct Applied {
    record: u64,
    seq: u64,
}

/// Numbers, appends and applies one batch of one partition; the caller holds the write lock.
/// The engine's own rewrites (value-log garbage collection) come this way too.
pub(crate) fn apply_one<E: Journaled>(
    engine: &E,
    st: &mut JournalState,
    entries: &[Entry<'_>],
) -> Result<Applied> {
    apply_one_known(engine, st, entries, &counts::KnownExistence::default())
}

/// [`apply_one`] of a batch whose keys the caller may have just read under the same hold of
/// the write lock (`known`: what the key counts need not look up again).
fn apply_one_known<E: Journaled>(
    engine: &E,
    st: &mut JournalState,
    entries: &[Entry<'_>],
    known: &counts::KnownExistence,
) -> Result<Applied> {
    let journal = engine.journal();
    journal.check_accepts_batches(st)?;
    let count_changes = counts::changes_locked(engine, st, entries, known);
    let seq = journal.seqs.begin(journal.partition);
    let res = engine.apply_locked(
        st,
        &BatchHeader {
            seq,
            parts: Vec::new(),
            claim: Some(journal.seqs.synced_floor()),
        },
        entries,
    );
    journal.seqs.done(journal.partition);
    let record = match res {
        Ok(record) => record,
        Err(e) => {
            // The engine may have applied part of it (the hash engine's index is updated
            // before a segment roll that can fail): the counts cannot tell.
            if let Some(counts) = &journal.counts {
                counts.forget();
            }
            return Err(e);
        }
    };
    st.last_applied = st.last_applied.max(seq);
    if let (Some(counts), Some(changes)) = (&journal.counts, count_changes) {
        counts.apply(changes);
    }
    engine.after_apply_locked(st)?;
    Ok(Applied { record, seq })
}

/// Under the write lock, before a decision reads: waits until everything applied to this
/// partition is visible, so that the decision's reads under the lock (the newest state) and its
/// scans of the partition (at the visible number) see one state. A write applied here just
/// before may not be visible yet while an earlier write of another partition is still applying
/// (microseconds; such writes never need this lock).
fn settle<E: Journaled>(engine: &E, st: &JournalState) {
    if E::READS_AT_SNAPSHOTS {
        engine.journal().seqs.wait_visible(st.last_applied);
    }
}

/// After the write lock: waits for the batch to be visible (engines that read at snapshots)
/// and commits it (fsync or hand-off to the OS), so concurrent writers share the commit.
fn complete<E: Journaled>(engine: &E, applied: &Applied) -> Result<()> {
    let journal = engine.journal();
    if E::READS_AT_SNAPSHOTS {
        journal.seqs.wait_visible(applied.seq);
    }
    journal.commit(applied.record, applied.seq, engine.peers())
}

/// Writes a batch through an engine: admitted, numbered, appended and applied under the write
/// lock, committed after it.
pub(crate) fn write<E: Journaled>(engine: &E, entries: &[Entry<'_>]) -> Result<()> {
    engine.admit_write()?;
    let applied = apply_one(engine, &mut engine.journal().lock(), entries)?;
    complete(engine, &applied)
}

/// Writes one batch whose parts lie in several partitions (`parts`, ascending by partition),
/// all or nothing: the write locks of every partition are taken in partition order, the batch
/// takes one sequence number, and each part is appended to its partition's log with the list
/// of partitions, so that recovery keeps the batch only if every part is there. Readers see
/// it once every part is applied (the sequence number is published then). A part with no
/// entries is only locked: `validate` runs with every lock held, before anything is written
/// (optimistic transactions check the keys they read there).
pub(crate) fn write_across<E: Journaled>(
    parts: &[(&E, Vec<Entry<'_>>)],
    validate: impl FnOnce() -> Result<()>,
) -> Result<()> {
    debug_assert!(parts
        .windows(2)
        .all(|w| w[0].0.journal().partition < w[1].0.journal().partition));
    let Some((first, _)) = parts.first() else {
        return validate();
    };
    for (engine, entries) in parts {
        if !entries.is_empty() {
            engine.admit_write()?;
        }
    }
    let mut guards: Vec<MutexGuard<'_, JournalState>> =
        parts.iter().map(|(e, _)| e.journal().lock()).collect();
    for ((engine, _), st) in parts.iter().zip(&guards) {
        engine.journal().check_accepts_batches(st)?;
    }
    validate()?;
    let count_changes: Vec<Option<counts::CountChanges>> = parts
        .iter()
        .zip(&guards)
        .map(|((engine, entries), st)| {
            counts::changes_locked(*engine, st, entries, &counts::KnownExistence::default())
        })
        .collect();
    let writing: Vec<u32> = parts
        .iter()
        .filter(|(_, entries)| !entries.is_empty())
        .map(|(e, _)| e.journal().partition as u32)
        .collect();
    let seqs = &first.journal().seqs;
    let slot = first.journal().partition;
    let header = BatchHeader {
        seq: seqs.begin(slot),
        // A batch in one partition is one record: atomic without the list.
        parts: if writing.len() > 1 {
            writing
        } else {
            Vec::new()
        },
        claim: Some(seqs.synced_floor()),
    };
    let mut records = vec![None; parts.len()];
    let mut failed = None;
    for (i, (engine, entries)) in parts.iter().enumerate() {
        if entries.is_empty() {
            continue;
        }
        match engine.apply_locked(&mut guards[i], &header, entries) {
            Ok(record) => {
                records[i] = Some(record);
                guards[i].last_applied = guards[i].last_applied.max(header.seq);
            }
            Err(e) => {
                for (j, (done, entries)) in parts[..i].iter().enumerate() {
                    if records[j].is_some() {
                        done.unapply_locked(&mut guards[j], header.seq, entries);
                    }
                }
                failed = Some(e);
                break;
            }
        }
    }
    seqs.done(slot);
    if let Some(e) = failed {
        // Parts taken back out (the LSM) or left in (the hash engine keeps what it applied,
        // see `RELIABILITY.md`), perhaps half applied: the counts cannot tell.
        for (engine, _) in parts {
            if let Some(counts) = &engine.journal().counts {
                counts.forget();
            }
        }
        return Err(e);
    }
    // Every part applied: the counts move together, still under every lock.
    for ((engine, _), changes) in parts.iter().zip(count_changes) {
        if let (Some(counts), Some(changes)) = (&engine.journal().counts, changes) {
            counts.apply(changes);
        }
    }
    let mut first_err = None;
    for (((engine, _), st), record) in parts.iter().zip(guards.iter_mut()).zip(&records) {
        if record.is_some() {
            if let Err(e) = engine.after_apply_locked(st) {
                first_err.get_or_insert(e);
            }
        }
    }
    drop(guards);
    if E::READS_AT_SNAPSHOTS {
        seqs.wait_visible(header.seq);
    }
    for ((engine, _), record) in parts.iter().zip(records) {
        if let Some(record) = record {
            if let Err(e) = engine.journal().commit(record, header.seq, engine.peers()) {
                first_err.get_or_insert(e);
            }
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// Atomic read-modify-write of one key through an engine, the same for both engines: under
/// the write lock, the current value is read, `decide` chooses an [`Update`], `check` vets a
/// new value, and the write is applied; the commit (fsync or hand-off to the OS) happens after
/// the lock is released, as for plain writes.
pub(crate) fn update<T, E: Journaled>(
    engine: &E,
    key: &[u8],
    decide: impl FnOnce(Option<&[u8]>) -> Result<(Update, T)>,
    check: impl Fn(&[u8], &[u8]) -> Result<()>,
) -> Result<T> {
    engine.admit_write()?;
    let journal = engine.journal();
    let (applied, out) = {
        let mut st = journal.lock();
        journal.check_accepts_batches(&st)?;
        let old = engine.get_locked(key, &st)?;
        let known = counts::KnownExistence::default();
        known.note(key, old.is_some());
        let (update, out) = decide(old.as_deref())?;
        let applied = match update {
            Update::Keep => None,
            Update::Put(v) => {
                check(key, &v)?;
                Some(apply_one_known(
                    engine,
                    &mut st,
                    &[(Kind::Put, key, &v)],
                    &known,
                )?)
            }
            Update::Delete => Some(apply_one_known(
                engine,
                &mut st,
                &[(Kind::Delete, key, &[])],
                &known,
            )?),
        };
        (applied, out)
    };
    if let Some(applied) = applied {
        complete(engine, &applied)?;
    }
    Ok(out)
}

/// What a group update's decision reads keys with, under the partition's write lock (the
/// newest state): [`Db::update_group`](crate::Db::update_group) and
/// [`GroupHold::update_group`](crate::GroupHold::update_group) hand it to their callback.
pub struct GroupRead<'a> {
    get: &'a dyn Fn(&[u8]) -> Result<Option<Bytes>>,
    contains: &'a dyn Fn(&[u8]) -> Result<bool>,
}

impl<'a> GroupRead<'a> {
    /// Reads through `get` and `contains` (which must agree: `contains(k)` is
    /// `get(k)?.is_some()`, found more cheaply).
    pub fn new(
        get: &'a dyn Fn(&[u8]) -> Result<Option<Bytes>>,
        contains: &'a dyn Fn(&[u8]) -> Result<bool>,
    ) -> GroupRead<'a> {
        GroupRead { get, contains }
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        (self.get)(key)
    }

    /// Whether `key` exists: [`GroupRead::get`] without reading the value (a value separated
    /// into a value log is not read), for a caller that needs only to know whether a field is
    /// new.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        (self.contains)(key)
    }
}

/// One group update under the write lock `st` (taken by [`update_group`], or held across
/// several by [`hold`]): settle, decide on the newest state, vet, apply. The caller commits.
fn decide_and_apply<T, E: Journaled>(
    engine: &E,
    st: &mut JournalState,
    decide: impl FnOnce(&GroupRead<'_>) -> Result<(WriteBatch, T)>,
    check: impl Fn(&WriteBatch) -> Result<()>,
) -> Result<(Option<Applied>, T)> {
    engine.journal().check_accepts_batches(st)?;
    settle(engine, st);
    let known = counts::KnownExistence::default();
    let (batch, out) = {
        let locked: &JournalState = st;
        let get = |key: &[u8]| {
            let value = engine.get_locked(key, locked)?;
            known.note(key, value.is_some());
            Ok(value)
        };
        let contains = |key: &[u8]| {
            let exists = engine.contains_locked(key, locked)?;
            known.note(key, exists);
            Ok(exists)
        };
        decide(&GroupRead::new(&get, &contains))?
    };
    check(&batch)?;
    if batch.is_empty() {
        return Ok((None, out));
    }
    let entries: Vec<Entry<'_>> = batch
        .ops
        .iter()
        .map(|(kind, k, v)| (*kind, &k[..], &v[..]))
        .collect();
    Ok((Some(apply_one_known(engine, st, &entries, &known)?), out))
}

/// Atomic read-modify-write of several keys of one partition: under the write lock, `decide`
/// reads any keys it needs (the newest state, as [`update`] does) and returns the batch to apply;
/// `check` vets the batch before it is applied. Commit after the lock, as for plain writes.
pub(crate) fn update_group<T, E: Journaled>(
    engine: &E,
    decide: impl FnOnce(&GroupRead<'_>) -> Result<(WriteBatch, T)>,
    check: impl Fn(&WriteBatch) -> Result<()>,
) -> Result<T> {
    engine.admit_write()?;
    let (applied, out) = decide_and_apply(engine, &mut engine.journal().lock(), decide, check)?;
    if let Some(applied) = applied {
        complete(engine, &applied)?;
    }
    Ok(out)
}

/// Atomic updates of one partition made while its write lock is held across all of them
/// ([`hold`]): each is its own batch, applied and visible before the next decides.
pub(crate) trait HeldUpdates {
    /// One atomic update: `decide` reads keys (the newest state, earlier updates of this hold
    /// included) and returns the batch; `check` vets it before it is applied.
    fn update(
        &mut self,
        decide: &mut dyn FnMut(&GroupRead<'_>) -> Result<WriteBatch>,
        check: &dyn Fn(&WriteBatch) -> Result<()>,
    ) -> Result<()>;
    /// The newest state of `key`, as an update's decision reads it, outside any update (a
    /// caller that decides several updates first and applies them together).
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>>;
    /// Whether `key` exists in the newest state ([`HeldUpdates::get`] without the value where
    /// the engine can tell without it).
    fn contains(&self, key: &[u8]) -> Result<bool>;
}

/// A partition's write lock held by [`hold`].
struct Held<'e, E: Journaled> {
    engine: &'e E,
    st: MutexGuard<'e, JournalState>,
    /// The last batch applied (committing it commits every earlier one of the hold).
    last: Option<Applied>,
}

impl<E: Journaled> HeldUpdates for Held<'_, E> {
    fn update(
        &mut self,
        decide: &mut dyn FnMut(&GroupRead<'_>) -> Result<WriteBatch>,
        check: &dyn Fn(&WriteBatch) -> Result<()>,
    ) -> Result<()> {
        let engine = self.engine;
        let (applied, ()) =
            decide_and_apply(engine, &mut self.st, |read| Ok((decide(read)?, ())), check)?;
        let Some(applied) = applied else {
            return Ok(());
        };
        // Visible before the next update's decision and any read the caller makes in between
        // (a plain update waits for this after the lock; no later sequence number of this
        // partition can be in flight while the lock is held, so only other partitions' earlier
        // writes are waited for, and they never need this lock).
        if E::READS_AT_SNAPSHOTS {
            engine.journal().seqs.wait_visible(applied.seq);
        }
        self.last = Some(applied);
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        settle(self.engine, &self.st);
        self.engine.get_locked(key, &self.st)
    }

    fn contains(&self, key: &[u8]) -> Result<bool> {
        settle(self.engine, &self.st);
        self.engine.contains_locked(key, &self.st)
    }
}

/// [`HeldUpdates`] for an engine whose reads take the write lock: each update takes and
/// releases the lock as a plain [`update_group`] does (the same guarantees, without the
/// saving).
struct Unheld<'e, E: Journaled>(&'e E);

impl<E: Journaled> HeldUpdates for Unheld<'_, E> {
    fn update(
        &mut self,
        decide: &mut dyn FnMut(&GroupRead<'_>) -> Result<WriteBatch>,
        check: &dyn Fn(&WriteBatch) -> Result<()>,
    ) -> Result<()> {
        update_group(self.0, |read| Ok((decide(read)?, ())), check)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        let st = self.0.journal().lock();
        settle(self.0, &st);
        self.0.get_locked(key, &st)
    }

    fn contains(&self, key: &[u8]) -> Result<bool> {
        let st = self.0.journal().lock();
        settle(self.0, &st);
        self.0.contains_locked(key, &st)
    }
}

/// Runs `body` with the partition's write lock held, so that the atomic updates it makes
/// through [`HeldUpdates`] take the lock once between them (a pipeline of commands on one hot
/// key would otherwise hand the lock back and forth between threads at every command). The
/// updates are committed together after the lock, before this returns. Admitted once. An
/// engine whose reads take the lock (the hash engine) gets no hold: each update locks alone,
/// so that `body` may read between them.
pub(crate) fn hold<E: Journaled, T>(
    engine: &E,
    body: impl FnOnce(&mut dyn HeldUpdates) -> T,
) -> Result<T> {
    if E::READS_TAKE_THE_LOCK {
        return Ok(body(&mut Unheld(engine)));
    }
    engine.admit_write()?;
    let (out, last) = {
        let mut held = Held {
            engine,
            st: engine.journal().lock(),
            last: None,
        };
        let out = body(&mut held);
        (out, held.last)
    };
    if let Some(applied) = last {
        complete(engine, &applied)?;
    }
    Ok(out)
}

impl Journal {
    pub(crate) fn new(
        fs: SharedFs,
        partition: usize,
        sync: SyncMode,
        wal: WalWriter,
        seq: u64,
        seqs: Arc<Sequencer>,
        counts: Option<counts::KeyCounts>,
    ) -> Self {
        Journal(Arc::new(JournalInner {
            counts,
            partition,
            fs,
            sync,
            seqs,
            state: Mutex::new(JournalState {
                wal,
                seq,
                scratch: Vec::new(),
                failed: None,
                last_applied: 0,
                unwritten_from: IDLE,
                unsynced_from: IDLE,
                sync_points: VecDeque::new(),
            }),
            synced_seq: AtomicU64::new(seq),
            written_seq: AtomicU64::new(seq),
            sync_lock: Mutex::new(()),
            bytes_written: AtomicU64::new(0),
        }))
    }

    /// Makes the write with record number `record` (batch `seq`) as durable as the sync mode
    /// promises: fsynced with `Always`, otherwise handed to the OS (safe from a crash of the
    /// process), or, inside [`deferring_log_writes`], noted for [`LogWrites::complete`]; and
    /// every earlier batch of the `peers` too ([`reach`]).
    pub(crate) fn commit(&self, record: u64, seq: u64, peers: Option<&Peers>) -> Result<()> {
        match self.sync {
            SyncMode::Always => {
                self.sync_to(record)?;
                reach(peers, seq, Level::Synced)
            }
            SyncMode::EveryMs(_) | SyncMode::Never => {
                if deferred::defer(self, record, seq, peers) {
                    Ok(())
                } else {
                    self.write_to(record)?;
                    reach(peers, seq, Level::Written)
                }
            }
        }
    }
}

/// Returns once every batch numbered up to `seq` (visible already) has reached `level` in every
/// partition of `peers`: a partition still holding one below the level is written or fsynced
/// here, the group write or group commit its own writer would make (usually made already). So
/// nothing is acknowledged while an earlier write, in any partition, could still be lost to the
/// same failure: a killed process leaves a prefix of the acknowledged order on disk, and a
/// power cut under `Always` too, which recovery's cut (`db.rs`) then keeps whole.
pub(crate) fn reach(peers: Option<&Peers>, seq: u64, level: Level) -> Result<()> {
    let Some(peers) = peers.and_then(|p| p.get()) else {
        return Ok(());
    };
    let Some(first) = peers.first() else {
        return Ok(());
    };
    let seqs = &first.seqs;
    if seqs.durable(level) >= seq {
        return Ok(());
    }
    for journal in peers {
        if seqs.mark(journal.partition, level) <= seq {
            match level {
                Level::Written => journal.write_below(seq)?,
                Level::Synced => journal.sync_below(seq)?,
            }
        }
    }
    Ok(())
}

impl Journal {}

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

    /// Fails unless the journal accepts a new batch: it is writable, and no partition's log
    /// failed holding a batch not yet durable (a batch after that one could never be
    /// acknowledged in order: [`reach`] would fail it after applying it).
    pub(crate) fn check_accepts_batches(&self, st: &JournalState) -> Result<()> {
        self.check_writable(st)?;
        match self.seqs.stuck() {
            Some(failed) if failed != self.partition => Err(self.read_only(&format!(
                "the log of partition {failed} failed with writes not yet durable; no later \
                 write can be made durable after them"
            ))),
            _ => Ok(()),
        }
    }

    /// Records `e` as the reason the journal refuses writes from now on, and returns it. A
    /// journal that still holds a batch not written or not fsynced makes every partition
    /// refuse writes ([`Sequencer::stuck`]).
    pub(crate) fn fail(&self, st: &mut JournalState, e: Error) -> Error {
        st.failed.get_or_insert_with(|| e.to_string());
        if st.unwritten_from != IDLE || st.unsynced_from != IDLE {
            self.seqs.set_stuck(self.partition);
        }
        e
    }

    /// Appends one batch as one record. Caller holds the lock.
    /// `value_offsets`, if given, receives each value's offset within the record's payload.
    pub(crate) fn append_locked(
        &self,
        st: &mut JournalState,
        header: &BatchHeader,
        entries: &[Entry<'_>],
        value_offsets: Option<&mut Vec<u32>>,
    ) -> Result<Appended> {
        self.check_writable(st)?;
        let mut payload = std::mem::take(&mut st.scratch);
        payload.clear();
        encode_batch(&mut payload, header, entries.iter().copied(), value_offsets);
        let seq = st.seq + 1;
        let offset = st.wal.len_bytes;
        let res = st.wal.append(&payload, seq);
        st.scratch = payload;
        let len = match res {
            Ok(n) => n,
            Err(e) => {
                // The batch's number will never be durable: the marks stay at it for good.
                st.unwritten_from = st.unwritten_from.min(header.seq);
                st.unsynced_from = st.unsynced_from.min(header.seq);
                self.publish_marks(st);
                return Err(self.fail(st, e));
            }
        };
        st.seq = seq;
        if let Some(point) = st.sync_points.back_mut() {
            if point.1 == IDLE {
                point.1 = header.seq;
            }
        }
        // Published before the batch is reported done (`Sequencer::durable`); a full buffer
        // was written by the append itself.
        let unwritten = if st.wal.written_seq == st.wal.appended_seq {
            IDLE
        } else {
            st.unwritten_from.min(header.seq)
        };
        let unsynced = st.unsynced_from.min(header.seq);
        if (unwritten, unsynced) != (st.unwritten_from, st.unsynced_from) {
            st.unwritten_from = unwritten;
            st.unsynced_from = unsynced;
            self.publish_marks(st);
        }
        self.bytes_written.fetch_add(len, Ordering::Relaxed);
        Ok(Appended { seq, offset, len })
    }

    /// Completes the current log file (written and fsynced) and continues in a new one.
    pub(crate) fn rotate_locked(&self, st: &mut JournalState, path: PathBuf) -> Result<()> {
        // A failed journal's buffer may hold records a failed write left there (readable for
        // memtables, see `WalWriter::write_buffer`): writing them again after a short write
        // would put a second copy behind a torn one.
        self.check_writable(st)?;
        let res = (|| {
            st.wal.write_buffer()?;
            // Durable now, so a later fsync of the new file implies every earlier record is
            // durable too: group commit relies on that order.
            st.wal.file().sync_data().at(st.wal.path())?;
            self.synced_seq.fetch_max(st.seq, Ordering::AcqRel);
            st.sync_points.clear();
            st.unsynced_from = IDLE;
            st.unwritten_from = IDLE;
            self.publish_marks(st);
            st.wal.release_buffer();
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
            return self.write_buffer_locked(&mut st);
        }
        self.written_seq
            .fetch_max(st.wal.written_seq, Ordering::AcqRel);
        Ok(())
    }

    /// Hands the buffer to the OS and notes it (marks, `written_seq`); a failure fails the
    /// journal. Caller holds the lock and has checked the journal writable.
    fn write_buffer_locked(&self, st: &mut JournalState) -> Result<()> {
        if let Err(e) = st.wal.write_buffer() {
            return Err(self.fail(st, e));
        }
        self.note_written(st);
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

    /// Hands buffered records to the OS and, with `fsync`, forces them to disk (unless every
    /// record of the log is forced already: a database-wide sync, WAITAOF, costs an fsync only
    /// in the partitions written since the last one).
    pub(crate) fn sync_now(&self, fsync: bool) -> Result<()> {
        let (file, path, upto) = {
            let mut st = self.state.lock();
            self.check_writable(&st)?;
            self.write_buffer_locked(&mut st)?;
            let upto = st.wal.written_seq;
            if !fsync {
                return Ok(());
            }
            if upto <= self.synced_seq.load(Ordering::Acquire) {
                // Every record is forced already (and nothing was appended since).
                self.note_synced(&mut st, upto);
                return Ok(());
            }
            st.sync_points.push_back((upto, IDLE));
            (st.wal.file(), st.wal.path().to_path_buf(), upto)
        };
        if let Err(e) = file.sync_data() {
            // After a failed fsync the kernel may have dropped the dirty pages: nothing
            // written since the last good fsync can be trusted.
            let e = Error::io(&path, e);
            return Err(self.fail(&mut self.state.lock(), e));
        }
        self.synced_seq.fetch_max(upto, Ordering::AcqRel);
        self.note_synced(&mut self.state.lock(), upto);
        Ok(())
    }

    /// [`reach`]'s group write: hands this log's buffer to the OS if it holds a batch numbered
    /// up to `seq`.
    fn write_below(&self, seq: u64) -> Result<()> {
        let mut st = self.state.lock();
        if st.unwritten_from > seq {
            return Ok(());
        }
        self.check_writable(&st)?;
        self.write_buffer_locked(&mut st)
    }

    /// [`reach`]'s group commit: fsyncs this log if it holds a batch numbered up to `seq`
    /// that is not forced yet (after waiting for a sync in progress, which often covers it).
    fn sync_below(&self, seq: u64) -> Result<()> {
        let _g = self.sync_lock.lock();
        if self.seqs.mark(self.partition, Level::Synced) > seq {
            return Ok(());
        }
        self.sync_now(true)
    }

    /// After the buffer was handed to the OS: nothing is left unwritten unless a record was
    /// appended since (not possible under the lock) or a write failed.
    fn note_written(&self, st: &mut JournalState) {
        if st.wal.written_seq == st.wal.appended_seq && st.unwritten_from != IDLE {
            st.unwritten_from = IDLE;
            self.publish_marks(st);
        }
    }

    /// After an fsync that covered every record up to `upto` (record numbers go on across
    /// files, and a rotation forced the old file whole): the oldest unsynced batch is the
    /// first appended after the last sync it ends, or none.
    fn note_synced(&self, st: &mut JournalState, upto: u64) {
        let mut after = None;
        while let Some(&(covers, first_after)) = st.sync_points.front() {
            if covers > upto {
                break;
            }
            after = Some(first_after);
            st.sync_points.pop_front();
        }
        if st.wal.appended_seq <= upto {
            st.unsynced_from = IDLE;
        } else if let Some(first_after) = after {
            st.unsynced_from = first_after;
        }
        self.publish_marks(st);
    }

    /// Publishes the marks of `st` (`Sequencer::set_mark`), under the write lock.
    fn publish_marks(&self, st: &JournalState) {
        self.seqs
            .set_mark(self.partition, Level::Written, st.unwritten_from);
        self.seqs
            .set_mark(self.partition, Level::Synced, st.unsynced_from);
    }

    /// Bytes appended to log files since open.
    pub(crate) fn bytes_written(&self) -> u64 {
        self.bytes_written.load(Ordering::Relaxed)
    }
}
