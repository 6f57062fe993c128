//! The log-structured hash engine of seed 004 (Bitcask-style), one per partition.
//!
//! Data lives in append-only segments (`log/NNNNNN-SSS.seg`) written through the shared
//! [`Journal`] (same record format and group commit as the LSM write-ahead log: the log *is* the
//! store). An in-memory hash index maps each live key to the record holding its newest value
//! (segment, offset, length), so a GET is one index lookup and one positioned read, whatever the
//! data size; every read verifies the record's CRC32C.
//!
//! Segments roll at `log_segment_bytes_max`. When dead bytes (overwritten or deleted records) of
//! the sealed segments exceed `log_merge_dead_ratio` of their size, a background merge copies the
//! live records of all sealed segments into new segments numbered just below the active one,
//! writes a hint file for each, switches the index over entry by entry (readers never wait),
//! and deletes the old segments. Disk use so stays within about `1 / (1 - ratio)` of live data.
//!
//! Honest limits: the index holds every key in memory (bytes per key reported in stats); scans
//! sort the matching keys first: O(n log n) in the number of keys.

pub(crate) mod hint;
pub(crate) mod index;

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use crate::batch::{decode_entries, Entry, Kind};
use crate::error::{Error, IoContext, Result};
use crate::iter::EntryIter;
use crate::journal::{Journal, JournalState};
use crate::lsm::fsutil;
use crate::lsm::memtable::Slot;
use crate::lsm::tree::{Scheduler, Update};
use crate::options::Options;
use crate::stats::{LevelStats, PartitionStats};
use crate::wal::{self, WalWriter};
use index::{IKey, Index, Loc, SegId};

const SEGMENT_SUFFIX: &str = ".seg";
const HINT_SUFFIX: &str = ".hint";
const RECORD_HEADER_BYTES: u64 = 8;

/// File names of segments and hints: `NNNNNN-SSS` (number, merge output sub).
fn seg_name(sid: SegId) -> String {
    format!("{:06}-{:03}", sid.number(), sid.sub())
}

fn parse_seg_name(name: &str) -> Option<SegId> {
    let stem = name.strip_suffix(SEGMENT_SUFFIX)?;
    let (n, s) = stem.split_once('-')?;
    SegId::new(n.parse().ok()?, s.parse().ok()?)
}

struct Segment {
    path: PathBuf,
    file: File,
    /// Size once sealed (0 while it is the active segment): what `merge_due` weighs dead bytes
    /// against, kept here so that deciding costs no `stat` per segment.
    sealed_bytes: AtomicU64,
}

impl Segment {
    fn open(path: PathBuf, sealed_bytes: u64) -> Result<Segment> {
        let file = File::open(&path).at(&path)?;
        Ok(Segment {
            path,
            file,
            sealed_bytes: AtomicU64::new(sealed_bytes),
        })
    }
}

pub(crate) struct LogStore {
    pub(crate) id: usize,
    dir: PathBuf,
    opts: Arc<Options>,
    journal: Journal,
    index: RwLock<Index>,
    segments: RwLock<BTreeMap<SegId, Arc<Segment>>>,
    /// The segment the journal appends to; changes only under the journal lock.
    active: Mutex<SegId>,
    next_number: AtomicU64,
    /// Dead bytes per segment: records that a newer write or a delete made useless.
    dead: Mutex<HashMap<SegId, u64>>,
    merge_lock: Mutex<()>,
    scheduler: Scheduler,
    pub(crate) work_pending: AtomicBool,
    user_bytes: AtomicU64,
    merge_bytes: AtomicU64,
    merges: AtomicU64,
}

/// A merge output segment being written, and the index moves it will publish.
#[derive(Default)]
struct MergeOutput {
    writer: Option<(WalWriter, hint::HintWriter)>,
    moves: Vec<(IKey, Loc, Loc)>,
}

fn segment_ids_exhausted(dir: &Path) -> Error {
    Error::InvalidArgument(format!(
        "segment numbers in {} are exhausted (more than {} merge outputs under one number)",
        dir.display(),
        index::SUB_MAX
    ))
}

impl LogStore {
    pub(crate) fn open(
        id: usize,
        dir: PathBuf,
        opts: Arc<Options>,
        scheduler: Scheduler,
    ) -> Result<LogStore> {
        let seg_dir = dir.join("log");
        fsutil::create_dir_durably(&dir)?;
        fsutil::create_dir_durably(&seg_dir)?;
        fsutil::remove_tmp_files(&seg_dir)?;
        let mut ids: Vec<SegId> = Vec::new();
        for e in std::fs::read_dir(&seg_dir).at(&seg_dir)? {
            let e = e.at(&seg_dir)?;
            if let Some(s) = e.file_name().to_str().and_then(parse_seg_name) {
                ids.push(s);
            }
        }
        ids.sort();
        let mut index = Index::new();
        let mut dead: HashMap<SegId, u64> = HashMap::new();
        let mut segments = BTreeMap::new();
        let mut seq = 0u64;
        for &sid in &ids {
            let path = seg_dir.join(format!("{}{SEGMENT_SUFFIX}", seg_name(sid)));
            let hint_path = seg_dir.join(format!("{}{HINT_SUFFIX}", seg_name(sid)));
            let seg_len = fsutil::file_len(&path);
            // A hint is used only if every entry parses and lies inside the segment; it is
            // checked whole before the index is touched, then applied without copying keys.
            let hinted = hint::Hint::read(&hint_path).and_then(|h| {
                let (mut entries, mut inside) = (0usize, true);
                h.for_each(|_, off, len| {
                    entries += 1;
                    inside &= off.checked_add(len).is_some_and(|end| end <= seg_len)
                        && u32::try_from(off).is_ok()
                        && u32::try_from(len).is_ok();
                })?;
                inside.then_some((h, entries))
            });
            if let Some((h, entries)) = hinted {
                index.reserve(entries);
                h.for_each(|key, offset, len| {
                    let loc = Loc {
                        seg: sid,
                        offset: offset as u32,
                        len: len as u32,
                    };
                    if let Some(old) = index.insert(key, loc) {
                        *dead.entry(old.seg).or_default() += u64::from(old.len);
                    }
                });
            } else {
                let replay = wal::replay(&path, |payload, offset| {
                    let entries = decode_entries(payload).ok_or_else(|| {
                        Error::corruption(&path, offset, "segment record holds a malformed batch")
                    })?;
                    let loc = Loc {
                        seg: sid,
                        offset: offset as u32,
                        len: (RECORD_HEADER_BYTES + payload.len() as u64) as u32,
                    };
                    index.apply(&mut dead, &entries, loc);
                    seq += 1;
                    Ok(())
                });
                let replay = match replay {
                    Ok(r) => r,
                    Err(Error::Corruption { offset, reason, .. }) if opts.salvage => {
                        // Salvage: keep what precedes the damage, drop the rest of this segment.
                        tracing::warn!(path = %path.display(), offset, %reason, "salvage: truncating damaged segment");
                        wal::Replay {
                            valid_bytes: offset,
                            torn: Some((offset, "damaged record (salvage)")),
                        }
                    }
                    Err(e) => return Err(e),
                };
                if let Some((offset, reason)) = replay.torn {
                    tracing::warn!(path = %path.display(), offset, reason, "truncating torn segment tail");
                    let f = std::fs::OpenOptions::new()
                        .write(true)
                        .open(&path)
                        .at(&path)?;
                    f.set_len(replay.valid_bytes.max(wal::WAL_HEADER_BYTES as u64))
                        .at(&path)?;
                    f.sync_all().at(&path)?;
                }
            }
            let sealed_bytes = fsutil::file_len(&path);
            segments.insert(sid, Arc::new(Segment::open(path, sealed_bytes)?));
        }
        let number = ids.last().map_or(1, |s| s.number() + 1);
        let active = SegId::new(number, 0).ok_or_else(|| segment_ids_exhausted(&seg_dir))?;
        let path = seg_dir.join(format!("{}{SEGMENT_SUFFIX}", seg_name(active)));
        let wal = WalWriter::create(path.clone(), seq)?;
        segments.insert(active, Arc::new(Segment::open(path, 0)?));
        let store = LogStore {
            id,
            journal: Journal::new(id, opts.sync, wal, seq),
            dir,
            opts,
            index: RwLock::new(index),
            segments: RwLock::new(segments),
            active: Mutex::new(active),
            next_number: AtomicU64::new(number + 1),
            dead: Mutex::new(dead),
            merge_lock: Mutex::new(()),
            scheduler,
            work_pending: AtomicBool::new(false),
            user_bytes: AtomicU64::new(0),
            merge_bytes: AtomicU64::new(0),
            merges: AtomicU64::new(0),
        };
        Ok(store)
    }

    fn seg_dir(&self) -> PathBuf {
        self.dir.join("log")
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn request_work(&self) {
        if !self.work_pending.swap(true, Ordering::AcqRel) {
            let _ = self.scheduler.send(self.id);
        }
    }

    fn apply_locked(&self, st: &mut JournalState, entries: &[Entry<'_>]) -> Result<u64> {
        let a = self.journal.append_locked(st, entries, None)?;
        let seg = *self.active.lock();
        let loc = Loc {
            seg,
            offset: a.offset as u32,
            len: a.len as u32,
        };
        {
            let mut index = self.index.write();
            let mut dead = self.dead.lock();
            index.apply(&mut dead, entries, loc);
        }
        let user: usize = entries.iter().map(|(_, k, v)| k.len() + v.len()).sum();
        self.user_bytes.fetch_add(user as u64, Ordering::Relaxed);
        if st.wal.len_bytes >= self.opts.log_segment_bytes_max {
            self.roll_locked(st)?;
        }
        Ok(a.seq)
    }

    /// Seals the active segment and starts a new one.
    fn roll_locked(&self, st: &mut JournalState) -> Result<()> {
        let sid = SegId::new(self.next_number.fetch_add(1, Ordering::AcqRel), 0)
            .ok_or_else(|| segment_ids_exhausted(&self.seg_dir()))?;
        let sealed_bytes = st.wal.len_bytes;
        let path = self
            .seg_dir()
            .join(format!("{}{SEGMENT_SUFFIX}", seg_name(sid)));
        self.journal.rotate_locked(st, path.clone())?;
        let segment = Arc::new(Segment::open(path, 0)?);
        let sealed = {
            let mut segments = self.segments.write();
            let sealed = segments.get(&*self.active.lock()).cloned();
            segments.insert(sid, segment);
            sealed
        };
        if let Some(s) = sealed {
            s.sealed_bytes.store(sealed_bytes, Ordering::Release);
        }
        *self.active.lock() = sid;
        if self.merge_due() {
            self.request_work();
        }
        Ok(())
    }

    pub(crate) fn write(&self, entries: &[Entry<'_>]) -> Result<()> {
        let seq = {
            let mut st = self.journal.lock();
            self.apply_locked(&mut st, entries)?
        };
        self.journal.commit(seq)
    }

    pub(crate) fn update<T>(
        &self,
        key: &[u8],
        f: impl FnOnce(Option<&[u8]>) -> Result<(Update, T)>,
        check: impl Fn(&[u8], &[u8]) -> Result<()>,
    ) -> Result<T> {
        self.journal.read_modify_write(
            key,
            |st| self.get_with(key, Some(st)),
            f,
            check,
            |st, entries| self.apply_locked(st, entries),
        )
    }

    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        self.get_with(key, None)
    }

    /// Reads `key`. `held` is the journal state when the caller already holds its lock.
    fn get_with(&self, key: &[u8], held: Option<&JournalState>) -> Result<Option<Bytes>> {
        // A merge may move the key between the index lookup and the read: look again then.
        for _ in 0..4 {
            let (loc, seg) = {
                let index = self.index.read();
                let Some(loc) = index.get(key) else {
                    return Ok(None);
                };
                let seg = self.segments.read().get(&loc.seg).cloned();
                (loc, seg)
            };
            let Some(seg) = seg else { continue };
            let record = self.read_record(&seg, loc, held)?;
            return find_value(&seg.path, loc, record, key);
        }
        Err(Error::InvalidArgument(
            "key kept moving during reads (merge churn); retry".into(),
        ))
    }

    /// Reads a whole record: from the file, or from the journal's buffer if it is not written
    /// yet.
    fn read_record(&self, seg: &Segment, loc: Loc, held: Option<&JournalState>) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; loc.len as usize];
        match crate::nowait::read_exact_at(&seg.file, &mut buf, loc.offset as u64) {
            Ok(()) => return Ok(buf),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
            Err(e) => return Err(Error::io(&seg.path, e)),
        }
        // Only the active segment has a buffer, and the segment may have been sealed since.
        let buffered = |st: &JournalState| {
            (st.wal.path() == seg.path)
                .then(|| st.wal.read_buffered(loc.offset as u64, loc.len as usize))
                .flatten()
        };
        let from_buffer = match held {
            Some(st) => buffered(st),
            None => buffered(&self.journal.lock()),
        };
        if let Some(b) = from_buffer {
            return Ok(b);
        }
        // Written to the file since the first attempt.
        crate::nowait::read_exact_at(&seg.file, &mut buf, loc.offset as u64).at(&seg.path)?;
        Ok(buf)
    }

    /// Entries in `(lower, upper)` in key order: the matching keys are collected and sorted.
    pub(crate) fn iter(self: &Arc<Self>, lower: Bound<Bytes>, upper: Bound<Bytes>) -> EntryIter {
        let mut keys: Vec<Bytes> = {
            let index = self.index.read();
            index
                .keys()
                .filter(|k| in_bounds(k, &lower, &upper))
                .map(Bytes::copy_from_slice)
                .collect()
        };
        keys.sort_unstable();
        let me = self.clone();
        Box::new(keys.into_iter().filter_map(move |k| match me.get(&k) {
            Ok(Some(v)) => Some(Ok((k, Slot::Put(v)))),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }))
    }

    fn merge_due(&self) -> bool {
        let active = *self.active.lock();
        let segments = self.segments.read();
        let dead = self.dead.lock();
        let (mut sealed, mut dead_bytes) = (0u64, 0u64);
        for (sid, seg) in segments.iter() {
            if *sid < active {
                sealed += seg.sealed_bytes.load(Ordering::Acquire);
                dead_bytes += dead.get(sid).copied().unwrap_or(0);
            }
        }
        sealed > 0 && dead_bytes as f64 >= sealed as f64 * self.opts.log_merge_dead_ratio
    }

    /// Background work: a merge if one is due.
    pub(crate) fn background_step(&self) -> Result<bool> {
        if !self.merge_due() {
            return Ok(false);
        }
        self.merge(false)
    }

    /// Rewrites the live records of all sealed segments. With `all`, seals the active segment
    /// first so that everything is merged.
    pub(crate) fn merge(&self, all: bool) -> Result<bool> {
        let _g = self.merge_lock.lock();
        if all {
            let mut st = self.journal.lock();
            if st.wal.len_bytes > wal::WAL_HEADER_BYTES as u64 {
                self.roll_locked(&mut st)?;
            }
        }
        let active = *self.active.lock();
        let inputs: Vec<(SegId, Arc<Segment>)> = self
            .segments
            .read()
            .iter()
            // Strictly older than the active segment we saw: a segment created by a roll after
            // that moment is the new active one and must not be merged.
            .filter(|(sid, _)| **sid < active)
            .map(|(s, seg)| (*s, seg.clone()))
            .collect();
        let Some(&(last, _)) = inputs.last() else {
            return Ok(false);
        };
        let seg_dir = self.seg_dir();
        let next_sub = |sid: SegId| {
            sid.sub()
                .checked_add(1)
                .and_then(|sub| SegId::new(sid.number(), sub))
                .ok_or_else(|| segment_ids_exhausted(&seg_dir))
        };
        let mut out_sid = next_sub(last)?;
        let mut out = MergeOutput::default();
        let mut written = 0u64;
        let mut dead_out: HashMap<SegId, u64> = HashMap::new();
        for (sid, seg) in &inputs {
            wal::replay(&seg.path, |payload, offset| {
                let entries = decode_entries(payload).ok_or_else(|| {
                    Error::corruption(&seg.path, offset, "segment record holds a malformed batch")
                })?;
                let old = Loc {
                    seg: *sid,
                    offset: offset as u32,
                    len: (RECORD_HEADER_BYTES + payload.len() as u64) as u32,
                };
                // The index points a key at the record, not at an entry: only the key's last
                // entry in the record is its value (a batch may write a key twice).
                let last = crate::batch::last_writes(&entries);
                for ((kind, key, value), last) in entries.into_iter().zip(last) {
                    if !last || kind != Kind::Put || self.index.read().get(key) != Some(old) {
                        continue;
                    }
                    let (w, h) = match &mut out.writer {
                        Some((w, h)) => (w, h),
                        None => {
                            let path =
                                seg_dir.join(format!("{}{SEGMENT_SUFFIX}", seg_name(out_sid)));
                            let w = WalWriter::create(path, 0)?;
                            let (w, h) = out.writer.insert((w, hint::HintWriter::new()));
                            (w, h)
                        }
                    };
                    let mut rec = Vec::with_capacity(key.len() + value.len() + 8);
                    crate::batch::encode_entries(
                        &mut rec,
                        std::iter::once((Kind::Put, key, value)),
                    );
                    let at = w.len_bytes;
                    let n = w.append(&rec, 0)?;
                    written += n;
                    h.add(key, at, n);
                    out.moves.push((
                        IKey::new(key),
                        old,
                        Loc {
                            seg: out_sid,
                            offset: at as u32,
                            len: n as u32,
                        },
                    ));
                    if w.len_bytes >= self.opts.log_segment_bytes_max {
                        self.publish_merge_output(&mut out, out_sid, &mut dead_out)?;
                        out_sid = next_sub(out_sid)?;
                    }
                }
                Ok(())
            })?;
        }
        self.publish_merge_output(&mut out, out_sid, &mut dead_out)?;
        // Every output's directory entry is durable before any input disappears.
        fsutil::sync_dir(&seg_dir)?;
        {
            let mut segs = self.segments.write();
            let mut dead = self.dead.lock();
            for (sid, _) in &inputs {
                segs.remove(sid);
                dead.remove(sid);
            }
            for (sid, d) in dead_out {
                *dead.entry(sid).or_default() += d;
            }
        }
        for (sid, seg) in &inputs {
            // Readers holding the segment keep reading through their open handle.
            std::fs::remove_file(&seg.path).at(&seg.path)?;
            let hint = seg_dir.join(format!("{}{HINT_SUFFIX}", seg_name(*sid)));
            if hint.exists() {
                std::fs::remove_file(&hint).at(&hint)?;
            }
        }
        fsutil::sync_dir(&seg_dir)?;
        self.merge_bytes.fetch_add(written, Ordering::Relaxed);
        self.merges.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// Completes the merge output being written (fsynced, with its hint file), makes it
    /// readable, and points the index at the records it holds, one chunk of keys per index
    /// lock, so that readers and writers never wait long. A key written or deleted while it was
    /// being copied keeps its newer state; its copy counts as dead.
    fn publish_merge_output(
        &self,
        out: &mut MergeOutput,
        sid: SegId,
        dead_out: &mut HashMap<SegId, u64>,
    ) -> Result<()> {
        let Some((mut w, h)) = out.writer.take() else {
            return Ok(());
        };
        w.write_buffer()?;
        w.file().sync_all().at(w.path())?;
        let seg_dir = self.seg_dir();
        h.finish(&seg_dir, &format!("{}{HINT_SUFFIX}", seg_name(sid)))?;
        // Readable before the index points at it.
        let segment = Segment::open(w.path().to_path_buf(), w.len_bytes)?;
        self.segments.write().insert(sid, Arc::new(segment));
        for chunk in out.moves.chunks(1024) {
            let mut index = self.index.write();
            for (key, old, new) in chunk {
                match index.get_mut(key.as_slice()) {
                    Some(loc) if loc == old => *loc = *new,
                    _ => *dead_out.entry(new.seg).or_default() += u64::from(new.len),
                }
            }
        }
        out.moves.clear();
        Ok(())
    }

    pub(crate) fn sync_now(&self, fsync: bool) -> Result<()> {
        self.journal.sync_now(fsync)
    }

    pub(crate) fn stats(&self) -> PartitionStats {
        let (keys, index_bytes) = {
            let index = self.index.read();
            (index.len(), index.bytes())
        };
        let segments = self.segments.read();
        let seg_bytes: u64 = segments.values().map(|s| fsutil::file_len(&s.path)).sum();
        PartitionStats {
            levels: vec![LevelStats {
                tables: segments.len(),
                bytes: seg_bytes,
            }],
            index_keys: keys as u64,
            index_bytes,
            user_bytes_written: self.user_bytes.load(Ordering::Relaxed),
            wal_bytes_written: self.journal.bytes_written(),
            compaction_bytes_written: self.merge_bytes.load(Ordering::Relaxed),
            compactions: self.merges.load(Ordering::Relaxed),
            ..PartitionStats::default()
        }
    }
}

fn in_bounds(key: &[u8], lower: &Bound<Bytes>, upper: &Bound<Bytes>) -> bool {
    let lo = match lower {
        Bound::Included(l) => key >= &l[..],
        Bound::Excluded(l) => key > &l[..],
        Bound::Unbounded => true,
    };
    let hi = match upper {
        Bound::Included(u) => key <= &u[..],
        Bound::Excluded(u) => key < &u[..],
        Bound::Unbounded => true,
    };
    lo && hi
}

/// Verifies a record read from `path` and returns the newest value of `key` in it.
fn find_value(path: &Path, loc: Loc, record: Vec<u8>, key: &[u8]) -> Result<Option<Bytes>> {
    let bad = |why: &str| Error::corruption(path, loc.offset as u64, why);
    if record.len() < RECORD_HEADER_BYTES as usize {
        return Err(bad("short record"));
    }
    let len = u32::from_le_bytes([record[0], record[1], record[2], record[3]]) as usize;
    let crc = u32::from_le_bytes([record[4], record[5], record[6], record[7]]);
    let payload = &record[RECORD_HEADER_BYTES as usize..];
    if len != payload.len() || crc32c::crc32c_append(crc32c::crc32c(&record[..4]), payload) != crc {
        return Err(bad("record checksum mismatch"));
    }
    let entries = decode_entries(payload).ok_or_else(|| bad("malformed batch in record"))?;
    let found = entries.iter().rev().find(|(_, k, _)| *k == key);
    // The value is returned as a slice of the record's buffer: no second copy.
    let value_range = match found {
        Some((Kind::Put, _, v)) => {
            let start = v.as_ptr() as usize - record.as_ptr() as usize;
            start..start + v.len()
        }
        Some((Kind::Delete, _, _)) => return Ok(None),
        None => return Err(bad("index points at a record without the key")),
    };
    drop(entries);
    Ok(Some(Bytes::from(record).slice(value_range)))
}
