//! Flush: the oldest full memtable becomes a level-0 table. Values of at least
//! `value_separation_bytes_min` stay where they are, in the memtable's write-ahead log, and the
//! table points at them (the memtable already holds those pointers: `memtable.rs`): that log is
//! kept as a value log. A log whose values all went into the table is deleted once the manifest
//! no longer needs it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::memtable::Slot;
use super::sstable::{table_path, Table, TableBuilder};
use super::tree::Tree;
use super::vlog::{ValuePtr, VlogFile};
use crate::batch::{entry_bytes, Kind};
use crate::error::Result;
use crate::journal;
use crate::seqno::Level;
use crate::util::fsutil;

impl Tree {
    /// Flushes the oldest immutable memtable. With `wait`, waits for a running flush instead of
    /// returning. Returns whether a memtable was flushed.
    pub(crate) fn flush_oldest(&self, wait: bool) -> Result<bool> {
        let _g = if wait {
            self.flush_lock.lock()
        } else {
            match self.flush_lock.try_lock() {
                Some(g) => g,
                None => return Ok(false),
            }
        };
        let Some(mem) = self.view.load().immutables.last().cloned() else {
            return Ok(false);
        };
        // A table holds no sequence numbers, so everything in it must be visible already: a
        // batch still being applied in another partition (microseconds) is waited for.
        self.journal.seqs.wait_visible(mem.max_seq());
        // Once in a table, these batches outlive their log, and recovery can no longer drop
        // them: every batch up to the newest of them, in every partition (the other parts of
        // a batch spanning partitions among them), is made durable first, in its partition's
        // log or already in a table there. Then the manifest's `last_seq` is a claim as a log
        // record's is (`batch::BatchHeader`): recovery never drops a batch at or below it.
        journal::reach(Some(&self.peers), mem.max_seq(), Level::Synced)?;
        // The separated values' bytes, and what their entries take in the log (the rest of
        // the entries there is garbage once the table is written).
        let (mut separated, mut separated_entries) = (0u64, 0u64);
        let table = if mem.is_empty() {
            None
        } else {
            let id = self.next_file.fetch_add(1, Ordering::AcqRel);
            let mut b = TableBuilder::create(&self.sst_dir, id, &self.opts)?;
            let sep = self.opts.value_separation_bytes_min();
            // The key order, built here rather than by the writes (`memtable.rs`).
            mem.settle();
            mem.for_each(|k, s, value_offset| match s {
                Slot::Pointer(p) => {
                    separated += u64::from(p.len);
                    separated_entries += entry_bytes(Kind::Put, k.len(), p.len as usize);
                    b.add(k, s)
                }
                // A memtable that copied its values in (none does today outside tests).
                Slot::Put(v) if v.len() >= sep => {
                    separated += v.len() as u64;
                    separated_entries += entry_bytes(Kind::Put, k.len(), v.len());
                    b.add(
                        k,
                        &Slot::Pointer(ValuePtr {
                            file: mem.wal_number,
                            offset: value_offset,
                            len: v.len() as u32,
                            crc: crc32c::crc32c(v),
                        }),
                    )
                }
                _ => b.add(k, s),
            })?;
            let meta = b.finish()?;
            fsutil::sync_dir(&*self.opts.fs, &self.sst_dir)?;
            self.counters
                .flush_bytes
                .fetch_add(meta.size, Ordering::Relaxed);
            Some(Arc::new(Table::open(
                self.opts.fs.clone(),
                &table_path(&self.sst_dir, id),
                id,
                self.cache.clone(),
            )?))
        };
        // Keys the key counts left pending on this memtable are looked up in the tables it
        // is not in yet (sorted, here in the background) and the counts settled, before its
        // table becomes visible (`journal/counts.rs`).
        if let Some(counts) = &self.journal.counts {
            if let Some(u) = counts.unsettled(mem.wal_number) {
                let version = self.view.load().version.clone();
                let held = u
                    .keys
                    .iter()
                    .map(|k| super::tree::in_tables(&version, k))
                    .collect::<Result<Vec<bool>>>();
                match held {
                    Ok(held) => counts.settle(u, &held),
                    Err(e) => {
                        tracing::warn!(error = %e, "key counts: pending keys could not be read");
                        counts.forget();
                        counts.settle(u, &[]);
                    }
                }
            }
        }
        self.install(Some(&mem), |nv| {
            if let Some(t) = table {
                nv.levels[0].insert(0, t);
            }
            if separated > 0 {
                // The log keeps living as a value log: the new table points into it.
                let path = journal::wal_path(&self.wal_dir, mem.wal_number);
                nv.vlogs.insert(
                    mem.wal_number,
                    Arc::new(VlogFile::open(
                        self.opts.fs.clone(),
                        &path,
                        mem.wal_number,
                        separated,
                        separated,
                        mem.log_entry_bytes().saturating_sub(separated_entries),
                        self.counters.flushes.load(Ordering::Relaxed),
                    )?),
                );
            }
            Ok(())
        })?;
        // The manifest edit is durable: unless it became a value log, the log of this memtable
        // holds nothing that is not in a table any more.
        if separated == 0 {
            let path = journal::wal_path(&self.wal_dir, mem.wal_number);
            if let Err(e) = self.opts.fs.remove_file(&path) {
                tracing::warn!(path = %path.display(), error = %e, "could not delete flushed log");
            }
        }
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        self.wake_stalled();
        // A compaction may be due now. A background worker asks for itself anyway; a caller's
        // flush (`Db::flush`) must, or the compaction waits for the next write.
        self.work.request();
        Ok(true)
    }

    /// Writes and fsyncs the log of every partition of the database.
    pub(super) fn sync_peer_logs(&self) -> Result<()> {
        for journal in self.peers.get().into_iter().flatten() {
            journal.sync_now(true)?;
        }
        Ok(())
    }

    /// Makes the active memtable immutable (if it holds anything) and flushes all memtables.
    pub(crate) fn flush_all(&self) -> Result<()> {
        {
            let mut st = self.journal.lock();
            self.journal.check_writable(&st)?;
            if !self.view.load().active.is_empty() {
                self.rotate_locked(&mut st)?;
            }
        }
        while self.flush_oldest(true)? {}
        Ok(())
    }
}
