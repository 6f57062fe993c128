//! Value-log sampling: compaction reaches deep levels late, so the live bytes it tracks for a
//! value log are an upper bound. After each flush one value log, the least recently sampled,
//! has a spread of its values looked up, and the estimate chooses garbage-collection victims.

use std::sync::atomic::Ordering;

use crate::batch::{entry_bytes, Kind};
use crate::error::Result;
use crate::journal;
use crate::lsm::tree::{value_is_live, Tree};

/// Values checked when a value log is sampled for liveness.
const VLOG_SAMPLE_VALUES: u64 = 256;

impl Tree {
    /// Estimates how much of the least recently sampled value log is live by looking up
    /// `VLOG_SAMPLE_VALUES` of its values, spread evenly over the file, and keeps the estimate
    /// beside its tracked live bytes. Runs at most once per flush. Returns whether it sampled.
    pub(crate) fn sample_value_log(&self) -> Result<bool> {
        let flushes = self.counters.flushes.load(Ordering::Relaxed);
        if self.sampled_at_flush.swap(flushes, Ordering::AcqRel) == flushes {
            return Ok(false);
        }
        let view = self.view.load_full();
        let Some(log) = view
            .version
            .vlogs
            .values()
            .filter(|f| {
                f.sampled_at_flush.load(Ordering::Relaxed) < flushes
                    && !f.damaged.load(Ordering::Acquire)
            })
            .min_by_key(|f| (f.sampled_at_flush.load(Ordering::Relaxed), f.number))
            .cloned()
        else {
            return Ok(false);
        };
        log.sampled_at_flush.store(flushes, Ordering::Relaxed);
        let stride_bytes = (log.total_bytes / VLOG_SAMPLE_VALUES).max(1);
        let (mut next_mark, mut sampled, mut live) = (0u64, 0u64, 0u64);
        let path = log.path().to_path_buf();
        let replayed = journal::replay_complete_log(&*self.opts.fs, &path, |batch| {
            if batch.offset < next_mark {
                return Ok(());
            }
            next_mark = batch.offset + stride_bytes;
            for &(kind, key, value) in &batch.entries {
                if kind != Kind::Put {
                    continue;
                }
                // Small values count too: a table holds them inline, so their copy here is dead.
                // A write-ahead log's values count with their entries (keys, lengths), the
                // units of its victim share (live keys are no garbage, dead ones are); a value
                // file's alone, as its share counts them.
                let at = batch.value_offset(value);
                let bytes = if log.moved {
                    value.len() as u64
                } else {
                    entry_bytes(Kind::Put, key.len(), value.len())
                };
                sampled += bytes;
                if value_is_live(&view, key, log.number, at)? {
                    live += bytes;
                }
            }
            Ok(())
        });
        match replayed {
            Err(e) if log.mark_damaged_on(&e, "liveness sampling") => return Ok(true),
            other => other?,
        }
        if sampled > 0 {
            let base = log.victim_base_bytes();
            let estimate = (base as f64 * live as f64 / sampled as f64) as u64;
            log.sampled_live_bytes.store(estimate, Ordering::Release);
        }
        Ok(true)
    }
}
