//! Merge: when dead bytes (overwritten or deleted records) of the sealed segments pass
//! `log_merge_dead_ratio` of their size, the live records of all sealed segments are copied into
//! new segments numbered just below the active one, each with a hint file; the index is switched
//! over entry by entry (compare-and-set, so a write that raced the copy keeps its newer state and
//! readers never wait), and the old segments are deleted.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::index::{IKey, Loc, SegId};
use super::{hint, seg_name, segment_ids_exhausted, LogStore, Segment};
use super::{HINT_SUFFIX, SEGMENT_SUFFIX};
use crate::batch::{encode_batch, last_writes, BatchHeader, Kind};
use crate::error::{IoContext, Result};
use crate::journal::{self, WalWriter};
use crate::util::fsutil::{self, TMP_SUFFIX};

/// A merge output segment being written, and the index moves it will publish.
#[derive(Default)]
struct MergeOutput {
    writer: Option<(WalWriter, hint::HintWriter)>,
    moves: Vec<(IKey, Loc, Loc)>,
    /// Files this merge created that are not yet part of the store.
    unpublished: Vec<PathBuf>,
}

/// Index entries a merge moves under one hold of the index lock: readers and writers wait at
/// most this long.
const INDEX_MOVES_PER_LOCK: usize = 1024;

impl LogStore {
    pub(super) fn merge_due(&self) -> bool {
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

    /// Background work: a merge if one is due. None once the journal refuses writes: a merge
    /// could not finish (it syncs the journal before deleting its inputs), and each try would
    /// leave another copy of the live data until the partition is reopened.
    pub(crate) fn background_step(&self) -> Result<bool> {
        if !self.merge_due() || self.journal.check_writable(&self.journal.lock()).is_err() {
            return Ok(false);
        }
        self.merge(false)
    }

    /// Rewrites the live records of all sealed segments. With `all`, seals the active segment
    /// first so that everything is merged.
    pub(crate) fn merge(&self, all: bool) -> Result<bool> {
        let _g = self.merge_lock.lock();
        self.journal.check_writable(&self.journal.lock())?;
        if all {
            let mut st = self.journal.lock();
            if st.wal.len_bytes > journal::WAL_HEADER_BYTES {
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
        let mut out = MergeOutput::default();
        let res = self.merge_inputs(&inputs, next_sub(last)?, &next_sub, &mut out);
        if let Err(e) = res {
            self.discard_unpublished(&mut out);
            return Err(e);
        }
        Ok(true)
    }

    /// Copies the live records of `inputs` into outputs numbered from `out_sid`, publishes them,
    /// and deletes the inputs.
    fn merge_inputs(
        &self,
        inputs: &[(SegId, Arc<Segment>)],
        mut out_sid: SegId,
        next_sub: &dyn Fn(SegId) -> Result<SegId>,
        out: &mut MergeOutput,
    ) -> Result<()> {
        let seg_dir = self.seg_dir();
        let mut written = 0u64;
        let mut dead_out: HashMap<SegId, u64> = HashMap::new();
        for (sid, seg) in inputs {
            // A segment the read could not finish is not deleted: its later records live.
            journal::replay_complete_log(&*self.opts.fs, &seg.path, |batch| {
                let old = Loc::new(*sid, batch.offset, batch.len)?;
                // The index points a key at the record, not at an entry: only the key's last
                // entry in the record is its value (a batch may write a key twice).
                let last = last_writes(&batch.entries);
                for (&(kind, key, value), last) in batch.entries.iter().zip(last) {
                    if !last || kind != Kind::Put || self.index.read().get(key) != Some(old) {
                        continue;
                    }
                    let (w, h) = match &mut out.writer {
                        Some((w, h)) => (w, h),
                        None => {
                            // Written under a temporary name: a crash leaves nothing that looks
                            // like a segment (open removes `.tmp` files), and a failed merge
                            // removes it (`discard_unpublished`).
                            let path = seg_dir
                                .join(format!("{}{SEGMENT_SUFFIX}{TMP_SUFFIX}", seg_name(out_sid)));
                            out.unpublished.push(path.clone());
                            let w = WalWriter::create(&*self.opts.fs, path, 0)?;
                            let (w, h) = out.writer.insert((w, hint::HintWriter::new()));
                            (w, h)
                        }
                    };
                    let mut rec = Vec::with_capacity(key.len() + value.len() + 8);
                    // The copy keeps the write's sequence number; it is one partition's entry.
                    let header = BatchHeader {
                        seq: batch.header.seq,
                        parts: Vec::new(),
                        claim: batch.header.claim,
                    };
                    encode_batch(
                        &mut rec,
                        &header,
                        std::iter::once((Kind::Put, key, value)),
                        None,
                    );
                    let at = w.len_bytes;
                    let n = w.append(&rec, 0)?;
                    written += n;
                    h.add(key, at, n);
                    out.moves
                        .push((IKey::new(key), old, Loc::new(out_sid, at, n)?));
                    if w.len_bytes >= self.opts.log_segment_bytes_max {
                        self.publish_merge_output(out, out_sid, &mut dead_out)?;
                        out_sid = next_sub(out_sid)?;
                    }
                }
                Ok(())
            })?;
        }
        self.publish_merge_output(out, out_sid, &mut dead_out)?;
        // The records that made the dropped ones dead (newer writes, deletes) may still wait,
        // unsynced, in the active segment: they must be durable before the inputs go, or a power
        // cut would lose the old value and the new one.
        self.journal.sync_now(true)?;
        // Every output's directory entry is durable before any input disappears.
        fsutil::sync_dir(&*self.opts.fs, &seg_dir)?;
        {
            let mut dead = self.dead.lock();
            for (sid, d) in dead_out {
                *dead.entry(sid).or_default() += d;
            }
        }
        // In ascending order: if a removal fails, every newer input is still there, so no older
        // record can outlive the newer one (or the delete) that shadowed it. An input leaves
        // the segment map only once its file is gone: one a failed removal left on disk stays
        // in the map, so the next merge takes it (its records are dead, the index points past
        // them) and removes it; dropped from the map first, it was merged no more, and a
        // restart replayed its old records over the deletes that had shadowed them.
        for (sid, seg) in inputs {
            // Readers holding the segment keep reading through their open handle.
            self.opts.fs.remove_file(&seg.path).at(&seg.path)?;
            self.segments.write().remove(sid);
            self.dead.lock().remove(sid);
            let hint = seg_dir.join(format!("{}{HINT_SUFFIX}", seg_name(*sid)));
            if self.opts.fs.exists(&hint) {
                self.opts.fs.remove_file(&hint).at(&hint)?;
            }
        }
        fsutil::sync_dir(&*self.opts.fs, &seg_dir)?;
        self.merge_bytes.fetch_add(written, Ordering::Relaxed);
        self.merges.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// After a failed merge: removes the outputs it wrote but did not publish. One left behind
    /// would hold copies of records whose deletes a later merge may drop, and bring them back at
    /// the next open; if one cannot be removed, the partition refuses writes (and so merges)
    /// until it is reopened, when the newer records that shadow its copies are still there.
    fn discard_unpublished(&self, out: &mut MergeOutput) {
        out.writer = None;
        for path in out.unpublished.drain(..) {
            match self.opts.fs.remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    let e = crate::Error::io(&path, e);
                    tracing::error!(error = %e, "cannot remove an unpublished merge output");
                    let mut st = self.journal.lock();
                    let _ = self.journal.fail(&mut st, e);
                }
            }
        }
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
        let path = seg_dir.join(format!("{}{SEGMENT_SUFFIX}", seg_name(sid)));
        let hint_name = format!("{}{HINT_SUFFIX}", seg_name(sid));
        out.unpublished.push(path.clone());
        out.unpublished.push(seg_dir.join(&hint_name));
        self.opts.fs.rename(w.path(), &path).at(&path)?;
        h.finish(&*self.opts.fs, &seg_dir, &hint_name)?;
        // Readable before the index points at it.
        let segment = Segment::open(&*self.opts.fs, path, w.len_bytes)?;
        self.segments.write().insert(sid, Arc::new(segment));
        // Published: from here on, the segment belongs to the store.
        out.unpublished.clear();
        for chunk in out.moves.chunks(INDEX_MOVES_PER_LOCK) {
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
}
