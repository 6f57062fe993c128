//! The log-structured hash engine (Bitcask-style: an append-only log plus an in-memory hash
//! index of every key), one per partition; the second engine beside the LSM.
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
mod merge;
mod recovery;

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use crate::batch::{decode_batch, BatchHeader, Entry, Kind};
use crate::error::{Error, IoContext, Result};
use crate::journal::counts::Existence;
use crate::journal::{self, Journal, JournalState, Journaled};
use crate::options::Options;
use crate::stats::{LevelStats, PartitionStats};
use crate::util::fsutil;
use crate::util::merge::EntryIter;
use crate::util::work::WorkRequest;
use crate::vfs::{FileSystem, FsFile};
use index::{Index, Loc, SegId};

const SEGMENT_SUFFIX: &str = ".seg";
const HINT_SUFFIX: &str = ".hint";

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
    file: Arc<dyn FsFile>,
    /// Size once sealed (0 while it is the active segment): what `merge_due` weighs dead bytes
    /// against, kept here so that deciding costs no `stat` per segment.
    sealed_bytes: AtomicU64,
    /// Log format of the segment's records (segments of older stores are format 1).
    format: u32,
}

impl Segment {
    fn open(fs: &dyn FileSystem, path: PathBuf, sealed_bytes: u64) -> Result<Segment> {
        let file = fs.open(&path).at(&path)?;
        let mut head = [0u8; journal::WAL_HEADER_BYTES as usize];
        // A segment whose header cannot be read or parsed was refused by recovery already
        // unless it is empty; its records (none) are then read as the current format.
        let format = file
            .read_exact_at(&mut head, 0)
            .ok()
            .and_then(|()| journal::format::parse_header(&head))
            .unwrap_or(journal::format::WAL_FORMAT_VERSION);
        Ok(Segment {
            path,
            file,
            sealed_bytes: AtomicU64::new(sealed_bytes),
            format,
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
    pub(crate) work: WorkRequest,
    user_bytes: AtomicU64,
    merge_bytes: AtomicU64,
    merges: AtomicU64,
}

fn segment_ids_exhausted(dir: &Path) -> Error {
    tracing::error!(dir = %dir.display(), "segment numbers exhausted");
    Error::LimitExceeded {
        what: "merge output segments under one segment number",
        actual: index::SUB_MAX as usize + 1,
        max: index::SUB_MAX as usize,
    }
}

impl Journaled for LogStore {
    const READS_AT_SNAPSHOTS: bool = false;
    const READS_TAKE_THE_LOCK: bool = true;

    fn journal(&self) -> &Journal {
        &self.journal
    }

    fn get_locked(&self, key: &[u8], st: &JournalState) -> Result<Option<Bytes>> {
        self.get_with(key, Some(st))
    }

    fn contains_locked(&self, key: &[u8], _: &JournalState) -> Result<bool> {
        // The index holds exactly the live keys (a delete removes its entry): no record is
        // read.
        Ok(self.index.read().get(key).is_some())
    }

    fn exists_locked(&self, key: &[u8], st: &JournalState) -> Result<Existence> {
        // Exact from the index alone (a delete removes its entry).
        Ok(Existence::Known(self.contains_locked(key, st)?))
    }

    fn for_each_key_locked(&self, _: &JournalState, f: &mut dyn FnMut(&[u8])) -> Result<()> {
        for key in self.index.read().keys() {
            f(key);
        }
        Ok(())
    }

    /// Appends the batch to the active segment and points the index at its record.
    fn apply_locked(
        &self,
        st: &mut JournalState,
        header: &BatchHeader,
        entries: &[Entry<'_>],
    ) -> Result<u64> {
        let a = self.journal.append_locked(st, header, entries, None)?;
        let seg = *self.active.lock();
        let loc = Loc::new(seg, a.offset, a.len)?;
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
}

impl LogStore {
    /// Holds off merges (which delete segments) while the guard lives.
    pub(crate) fn hold_merges(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.merge_lock.lock()
    }

    /// The files that make up the store at this moment, for a checkpoint: every segment and
    /// hint file, with the number of bytes to take (`None`: all; the active segment: what has
    /// been appended so far). The caller holds the journal lock (`st`) and [`Self::hold_merges`].
    pub(crate) fn checkpoint_files(
        &self,
        st: &mut JournalState,
    ) -> Result<Vec<(PathBuf, Option<u64>)>> {
        self.journal.check_writable(st)?;
        if let Err(e) = st.wal.write_buffer() {
            return Err(self.journal.fail(st, e));
        }
        let active = *self.active.lock();
        let mut files = Vec::new();
        for (sid, seg) in self.segments.read().iter() {
            if *sid == active {
                files.push((seg.path.clone(), Some(st.wal.len_bytes)));
                continue;
            }
            files.push((seg.path.clone(), None));
            let hint = self
                .seg_dir()
                .join(format!("{}{HINT_SUFFIX}", seg_name(*sid)));
            if self.opts.fs.exists(&hint) {
                files.push((hint, None));
            }
        }
        Ok(files)
    }

    fn seg_dir(&self) -> PathBuf {
        self.dir.join("log")
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
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
        // The log now writes to the new file: if it cannot be opened for reading, later writes
        // would be indexed under the sealed segment's id. The partition stops taking writes.
        let segment = match Segment::open(&*self.opts.fs, path, 0) {
            Ok(s) => Arc::new(s),
            Err(e) => return Err(self.journal.fail(st, e)),
        };
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
            self.work.request();
        }
        Ok(())
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
            return find_value(&seg, loc, record, key);
        }
        Err(Error::Busy(
            "a merge kept moving the key while it was read; retry".into(),
        ))
    }

    /// Reads a whole record: from the file, or from the journal's buffer if it is not written
    /// yet.
    fn read_record(&self, seg: &Segment, loc: Loc, held: Option<&JournalState>) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; loc.len as usize];
        match seg.file.read_exact_at(&mut buf, u64::from(loc.offset)) {
            Ok(()) => return Ok(buf),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
            Err(e) => return Err(Error::io(&seg.path, e)),
        }
        // Only the active segment has a buffer, and the segment may have been sealed since.
        let buffered = |st: &JournalState| {
            (st.wal.path() == seg.path)
                .then(|| {
                    st.wal
                        .read_buffered(u64::from(loc.offset), loc.len as usize)
                })
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
        seg.file
            .read_exact_at(&mut buf, u64::from(loc.offset))
            .at(&seg.path)?;
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
            Ok(Some(v)) => Some(Ok((k, Some(v)))),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }))
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
        let seg_bytes: u64 = segments
            .values()
            .map(|s| fsutil::file_len(&*self.opts.fs, &s.path))
            .sum();
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
fn find_value(seg: &Segment, loc: Loc, record: Vec<u8>, key: &[u8]) -> Result<Option<Bytes>> {
    let bad = |why: &str| Error::corruption(&seg.path, u64::from(loc.offset), why);
    let payload = journal::decode_record(&record).map_err(bad)?;
    let (_, entries) =
        decode_batch(payload, seg.format).ok_or_else(|| bad("malformed batch in record"))?;
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
