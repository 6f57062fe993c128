//! Value-log garbage collection: a value log whose live share has fallen low is read through;
//! values that are still the newest version of their key are written again through the write
//! path, the copies are fsynced, and the old log leaves the version (and the disk once no
//! reader holds it).

use std::sync::atomic::Ordering;

use crate::batch::{Entry, Kind};
use crate::error::Result;
use crate::journal;
use crate::lsm::tree::{value_is_live, Tree, View};

/// Live values that value-log garbage collection rewrites under one hold of the write lock.
const GC_REWRITE_CHUNK_ENTRIES: usize = 64;
/// ... or fewer, once they reach this many bytes.
const GC_REWRITE_CHUNK_BYTES: usize = 256 << 10;

impl Tree {
    /// Garbage-collects the value log with the smallest live share, if it is below
    /// `live_ratio_below`: its values that are still the newest version of their key are written
    /// again through the normal write path, the log is fsynced, and the value log leaves the
    /// version. Returns whether one was collected.
    pub(crate) fn gc_value_log(&self, live_ratio_below: f64) -> Result<bool> {
        self.gc_value_log_with(live_ratio_below, false, u64::MAX)
    }

    /// [`Self::gc_value_log`] among the value logs numbered below `logs_below`; with `wait`,
    /// waits for a collection already running (a full compaction must not stop early because
    /// a background worker holds the lock) instead of returning `false`.
    pub(crate) fn gc_value_log_with(
        &self,
        live_ratio_below: f64,
        wait: bool,
        logs_below: u64,
    ) -> Result<bool> {
        let _g = if wait {
            self.gc_lock.lock()
        } else {
            let Some(g) = self.gc_lock.try_lock() else {
                return Ok(false);
            };
            g
        };
        let version = self.view.load().version.clone();
        let victim = version
            .vlogs
            .values()
            .filter(|f| {
                f.number < logs_below
                    && f.victim_share() < live_ratio_below
                    && !f.damaged.load(Ordering::Acquire)
            })
            .min_by(|a, b| a.victim_share().total_cmp(&b.victim_share()))
            .cloned();
        drop(version);
        let Some(victim) = victim else {
            return Ok(false);
        };
        let path = victim.path().to_path_buf();
        let unapplied_at_start = self.unapplied_parts.load(Ordering::Acquire);
        let mut rewritten = 0u64;
        // A value is live only if the newest version of its key still points at it. Once dead it
        // stays dead (nothing new ever points into an old log), so the first check runs without
        // the write lock and filters out the dead majority; the live ones are checked again and
        // rewritten under the lock, a chunk at a time, so writers wait only for short stretches.
        let is_live =
            |view: &View, key: &[u8], at: u64| value_is_live(view, key, victim.number, at);
        // Stubs the filter gives for dead values, kept until the chunk is written.
        let mut stubs: Vec<Vec<u8>> = Vec::new();
        let mut pending: Vec<(Vec<u8>, Vec<u8>, u64)> = Vec::new();
        let mut pending_bytes = 0usize;
        let mut rewrite = |pending: &mut Vec<(Vec<u8>, Vec<u8>, u64)>| -> Result<()> {
            if pending.is_empty() {
                return Ok(());
            }
            let mut st = self.journal.lock();
            let view = self.view.load();
            // A value the filter declares dead is written as its stub or a tombstone instead
            // (through the write path, so key counts see a tombstone). Stubs are made first:
            // the entries borrow them.
            enum Verdict {
                Gone,
                Live,
                Stub(usize),
                Dead,
            }
            stubs.clear();
            let mut verdicts: Vec<Verdict> = Vec::with_capacity(pending.len());
            for (key, value, at) in pending.iter() {
                verdicts.push(if !is_live(&view, key, *at)? {
                    Verdict::Gone
                } else {
                    match &self.opts.compaction_filter {
                        Some(f) if f.is_dead(key, value, self) => match f.stub(key, value) {
                            Some(stub) => {
                                stubs.push(stub);
                                Verdict::Stub(stubs.len() - 1)
                            }
                            None => Verdict::Dead,
                        },
                        _ => Verdict::Live,
                    }
                });
            }
            let mut live: Vec<Entry<'_>> = Vec::with_capacity(pending.len());
            for ((key, value, _), verdict) in pending.iter().zip(&verdicts) {
                match verdict {
                    Verdict::Gone => {}
                    Verdict::Live => {
                        live.push((Kind::Put, key, value));
                        rewritten += value.len() as u64;
                    }
                    Verdict::Stub(i) => live.push((Kind::Put, key, &stubs[*i])),
                    Verdict::Dead => live.push((Kind::Delete, key, &[])),
                }
            }
            drop(view);
            if !live.is_empty() {
                self.apply_rewrite_locked(&mut st, &live)?;
            }
            drop(st);
            pending.clear();
            Ok(())
        };
        let replayed = journal::replay_complete_log(&*self.opts.fs, &path, |batch| {
            let view = self.view.load();
            for &(kind, key, value) in &batch.entries {
                if kind != Kind::Put {
                    continue;
                }
                let at = batch.value_offset(value);
                // Every put is checked, whatever its size: the separation threshold may have
                // changed since it was written.
                if is_live(&view, key, at)? {
                    pending_bytes += key.len() + value.len();
                    pending.push((key.to_vec(), value.to_vec(), at));
                }
            }
            drop(view);
            if pending.len() >= GC_REWRITE_CHUNK_ENTRIES || pending_bytes >= GC_REWRITE_CHUNK_BYTES
            {
                rewrite(&mut pending)?;
                pending_bytes = 0;
            }
            Ok(())
        });
        match replayed {
            // Values before the damage may have been rewritten: harmless copies of live values.
            // The log stays (its damaged values stay readable as errors, the others as
            // values); the caller may go on to the next victim.
            Err(e) if victim.mark_damaged_on(&e, "value-log garbage collection") => {
                return Ok(true)
            }
            other => other?,
        }
        rewrite(&mut pending)?;
        // The copies must be durable before the originals can go, and so must whatever made
        // the other values dead: a newer version may be part of a batch spanning partitions,
        // which recovery drops if another partition's part is lost, so every partition's log
        // is fsynced (the shadowed original would otherwise come back, pointing into a log
        // that is gone). And the copies must be visible: a reader at a sequence number before
        // a copy still reads the original, so a view without the original must come with a
        // sequence number that includes every copy.
        self.sync_peer_logs()?;
        self.journal.sync_now(true)?;
        self.journal
            .seqs
            .wait_visible(self.journal.seqs.last_handed_out());
        // Read under the journal lock: a writer takes a part back out within the same hold of
        // the lock that put it in, so once the lock is ours every part the first pass may have
        // seen is either in for good or counted here.
        let unapplied_now = {
            let _st = self.journal.lock();
            self.unapplied_parts.load(Ordering::Acquire)
        };
        if unapplied_now != unapplied_at_start {
            // A part that shadowed a value may have been taken back out since the first pass
            // judged the value dead: keep the log (the copies made are harmless duplicates of
            // live values); a later round looks again.
            return Ok(false);
        }
        self.install(None, |nv| {
            nv.vlogs.remove(&victim.number);
            Ok(())
        })?;
        // Deleted once no reader holds an older version that still lists it.
        victim.obsolete.store(true, Ordering::Release);
        self.counters
            .gc_bytes
            .fetch_add(rewritten, Ordering::Relaxed);
        self.counters.gcs.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }
}
