//! Opening a hash-engine partition: every segment is read in order, from its hint file when a
//! valid one exists (keys and locations only, no values) or else by replaying its records, to
//! rebuild the in-memory index and the dead-byte counts. A torn tail of a segment is cut and
//! reported; other damage is corruption unless the user opted into salvage.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crossbeam_channel::Sender;
use parking_lot::{Mutex, RwLock};

use super::index::{Index, Loc, SegId};
use super::{hint, parse_seg_name, seg_name, segment_ids_exhausted, LogStore, Segment};
use super::{HINT_SUFFIX, SEGMENT_SUFFIX};
use crate::error::{IoContext, Result};
use crate::journal::counts::KeyCounts;
use crate::journal::{self, Journal, WalWriter};
use crate::options::Options;
use crate::seqno::Sequencer;
use crate::util::fsutil;
use crate::util::work::WorkRequest;

impl LogStore {
    pub(crate) fn open(
        id: usize,
        dir: PathBuf,
        opts: Arc<Options>,
        work_queue: Sender<usize>,
        seqs: Arc<Sequencer>,
    ) -> Result<(LogStore, u64)> {
        let seg_dir = dir.join("log");
        fsutil::create_dir_durably(&*opts.fs, &dir)?;
        fsutil::create_dir_durably(&*opts.fs, &seg_dir)?;
        fsutil::remove_tmp_files(&*opts.fs, &seg_dir)?;
        let mut ids: Vec<SegId> = opts
            .fs
            .list(&seg_dir)
            .at(&seg_dir)?
            .iter()
            .filter_map(|name| parse_seg_name(name))
            .collect();
        ids.sort();
        let mut index = Index::new();
        let mut dead: HashMap<SegId, u64> = HashMap::new();
        let mut segments = BTreeMap::new();
        let mut seq = 0u64;
        // The highest sequence number of the replayed segments (those read through a hint
        // carry theirs in the records, not in the hint; the log engine reads at no sequence
        // number, so a restart that numbers on from a lower one changes no read).
        let mut last_seq = 0u64;
        for &sid in &ids {
            let path = seg_dir.join(format!("{}{SEGMENT_SUFFIX}", seg_name(sid)));
            let hint_path = seg_dir.join(format!("{}{HINT_SUFFIX}", seg_name(sid)));
            let seg_len = fsutil::file_len(&*opts.fs, &path);
            // A hint is used only if every entry parses and lies inside the segment; it is
            // checked whole before the index is touched, then applied without copying keys.
            let hinted = hint::Hint::read(&*opts.fs, &hint_path).and_then(|h| {
                let (mut entries, mut inside) = (0usize, true);
                h.for_each(|_, off, len| {
                    entries += 1;
                    inside &= off.checked_add(len).is_some_and(|end| end <= seg_len)
                        && Loc::new(sid, off, len).is_ok();
                })?;
                inside.then_some((h, entries))
            });
            if let Some((h, entries)) = hinted {
                index.reserve(entries);
                h.for_each(|key, offset, len| {
                    // Checked above: every entry lies inside the segment, whose size is capped.
                    let Ok(loc) = Loc::new(sid, offset, len) else {
                        debug_assert!(false, "hint entry outside a checked range");
                        return;
                    };
                    if let Some(old) = index.insert(key, loc) {
                        *dead.entry(old.seg).or_default() += u64::from(old.len);
                    }
                });
            } else {
                // The newest segment may end torn. So may a merge output without its hint in a
                // store written before merges wrote outputs under a temporary name: such an
                // output may have been cut short by a crash (its records are copies of records
                // still in its inputs, which a merge deletes only after every output is
                // complete). Today an output gets its final name only once complete and fsynced.
                let may_be_torn =
                    ids.last() == Some(&sid) || (sid.sub() > 0 && !opts.fs.exists(&hint_path));
                journal::recover_log(&*opts.fs, &path, may_be_torn, opts.salvage, |batch| {
                    let loc = Loc::new(sid, batch.offset, batch.len)?;
                    index.apply(&mut dead, &batch.entries, loc);
                    seq += 1;
                    last_seq = last_seq.max(batch.header.seq);
                    Ok(())
                })?;
            }
            let sealed_bytes = fsutil::file_len(&*opts.fs, &path);
            segments.insert(sid, Arc::new(Segment::open(&*opts.fs, path, sealed_bytes)?));
        }
        let number = ids.last().map_or(1, |s| s.number() + 1);
        let active = SegId::new(number, 0).ok_or_else(|| segment_ids_exhausted(&seg_dir))?;
        let path = seg_dir.join(format!("{}{SEGMENT_SUFFIX}", seg_name(active)));
        let wal = WalWriter::create(&*opts.fs, path.clone(), seq)?;
        segments.insert(active, Arc::new(Segment::open(&*opts.fs, path, 0)?));
        let store = LogStore {
            id,
            journal: Journal::new(
                opts.fs.clone(),
                id,
                opts.sync,
                wal,
                seq,
                seqs,
                opts.key_classes.as_ref().map(KeyCounts::new),
            ),
            dir,
            opts,
            index: RwLock::new(index),
            segments: RwLock::new(segments),
            active: Mutex::new(active),
            next_number: AtomicU64::new(number + 1),
            dead: Mutex::new(dead),
            merge_lock: Mutex::new(()),
            work: WorkRequest::new(id, work_queue),
            user_bytes: AtomicU64::new(0),
            merge_bytes: AtomicU64::new(0),
            merges: AtomicU64::new(0),
        };
        Ok((store, last_seq))
    }
}
