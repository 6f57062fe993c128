//! Values moved out of old value logs by compaction (RocksDB's integrated BlobDB garbage
//! collection, Titan's level merge). A compaction that writes a pointer into a value log chosen
//! as a victim (its live share below `value_log_gc_live_ratio`) copies the value into a value
//! file of its own and writes a pointer to the copy instead. The compaction already holds the
//! entry its tables keep for the key, so no lookup decides what is live and no dead value is
//! read; the copy adds no entry to the tree (garbage collection's rewrites go through the write
//! path, the memtable, a flush and the compactions after it). A victim leaves the version once
//! compactions have dropped or moved every pointer into it: its live bytes, exact for what
//! compactions have seen, reach zero.
//!
//! A value file, `wal/NNNNNN.vlog`, has the write-ahead log's format (header, then one record per
//! value: a batch of one put with sequence number 0), so reads, garbage collection and sampling
//! treat it like any value log; its own suffix keeps recovery from replaying it as a log. Its
//! number comes from the partition's file counter, like tables and logs. Every value file of a
//! compaction is fsynced, with the directory, before the manifest that lists it is written; one
//! that no manifest lists is removed on open.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::batch::{encode_batch, BatchHeader, Kind};
use crate::error::{IoContext, Result};
use crate::journal::{WalWriter, RECORD_HEADER_BYTES};
use crate::lsm::version::Version;
use crate::util::fsutil;
use crate::vfs::SharedFs;

use super::{ValuePtr, VlogFile};

/// File name suffix of value files written by compaction.
pub(crate) const MOVED_SUFFIX: &str = ".vlog";

/// A value file is closed and the next one started once it holds this many bytes, so that one
/// large compaction does not leave one file that lives until its last value dies.
const MOVED_FILE_BYTES_TARGET: u64 = 64 << 20;

/// The path of value file `number` in the log directory `dir`.
pub(crate) fn moved_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}{MOVED_SUFFIX}"))
}

/// A value file being written: its number, writer, and the value bytes copied into it.
struct ValueFile {
    number: u64,
    writer: WalWriter,
    moved_bytes: u64,
}

/// Copies the values of victim logs that one compaction meets into new value files.
pub(crate) struct ValueMover {
    fs: SharedFs,
    dir: PathBuf,
    /// The version the compaction started from: it keeps the victims open.
    version: Arc<Version>,
    victims: HashSet<u64>,
    /// Files finished so far (written, not yet fsynced), then the one being written.
    done: Vec<ValueFile>,
    current: Option<ValueFile>,
    payload: Vec<u8>,
    offsets: Vec<u32>,
    /// Damaged values met and left in place, and the first one's error: reported once per
    /// compaction (`report_damage`), not once per value.
    damaged_values: u64,
    damaged_logs: Vec<u64>,
    first_damage: Option<crate::error::Error>,
}

impl ValueMover {
    /// A mover for the value logs of `version` whose live share is below `live_ratio_below`;
    /// `None` when there is none.
    pub(crate) fn new(
        fs: SharedFs,
        dir: &Path,
        version: Arc<Version>,
        live_ratio_below: f64,
    ) -> Option<ValueMover> {
        let victims: HashSet<u64> = version
            .vlogs
            .values()
            .filter(|f| f.live_ratio() < live_ratio_below)
            .map(|f| f.number)
            .collect();
        (!victims.is_empty()).then(|| ValueMover {
            fs,
            dir: dir.to_path_buf(),
            version,
            victims,
            done: Vec::new(),
            current: None,
            payload: Vec::new(),
            offsets: Vec::new(),
            damaged_values: 0,
            damaged_logs: Vec::new(),
            first_damage: None,
        })
    }

    /// The value `p` points to when `p` points into a victim (the compaction then writes it
    /// with [`ValueMover::write`] or drops it); `None` when the pointer stays as it is.
    pub(crate) fn read_victim(&mut self, p: &ValuePtr) -> Result<Option<bytes::Bytes>> {
        if !self.victims.contains(&p.file) {
            return Ok(None);
        }
        match self.version.vlogs.get(&p.file) {
            Some(log) => match log.read(p) {
                Ok(value) => Ok(Some(value)),
                // A damaged value stays where it is, pointer and all: reads of that key go on
                // reporting it, and the compaction (and every later one) goes on with the
                // rest instead of failing on it each time.
                Err(e) if e.is_corruption() => {
                    self.damaged_values += 1;
                    if !self.damaged_logs.contains(&p.file) {
                        self.damaged_logs.push(p.file);
                    }
                    self.first_damage.get_or_insert(e);
                    Ok(None)
                }
                Err(e) => Err(e),
            },
            None => Ok(None),
        }
    }

    /// Copies `key`'s value (read at `p` by [`ValueMover::read_victim`]) into the current value
    /// file and returns the pointer to the copy. `new_number` numbers a new file.
    pub(crate) fn write(
        &mut self,
        key: &[u8],
        value: &[u8],
        p: &ValuePtr,
        new_number: &mut dyn FnMut() -> u64,
    ) -> Result<ValuePtr> {
        if self
            .current
            .as_ref()
            .is_some_and(|f| f.writer.len_bytes >= MOVED_FILE_BYTES_TARGET)
        {
            if let Some(full) = self.current.take() {
                self.done.push(full);
            }
        }
        let file = match &mut self.current {
            Some(f) => f,
            None => {
                let number = new_number();
                let writer = WalWriter::create(&*self.fs, moved_path(&self.dir, number), 0)?;
                self.current.insert(ValueFile {
                    number,
                    writer,
                    moved_bytes: 0,
                })
            }
        };
        self.payload.clear();
        encode_batch(
            &mut self.payload,
            &BatchHeader::default(),
            std::iter::once((Kind::Put, key, value)),
            Some(&mut self.offsets),
        );
        let offset = file.writer.len_bytes
            + RECORD_HEADER_BYTES
            + u64::from(self.offsets.first().copied().unwrap_or(0));
        file.writer.append(&self.payload, 0)?;
        file.moved_bytes += value.len() as u64;
        Ok(ValuePtr {
            file: file.number,
            offset,
            len: p.len,
            crc: p.crc,
        })
    }

    /// Logs the damaged values this compaction left in place: one line, an error the first
    /// time a log's damage is met in this process and a debug line after that (every later
    /// compaction over the same keys meets the same values again).
    fn report_damage(&self) {
        let Some(first) = &self.first_damage else {
            return;
        };
        let count = self.damaged_values;
        // Every damaged log is marked reported (no short-circuit).
        let mut first_time = false;
        for log in self
            .damaged_logs
            .iter()
            .filter_map(|n| self.version.vlogs.get(n))
        {
            first_time |= !log.damage_reported.swap(true, Ordering::Relaxed);
        }
        if first_time {
            tracing::error!(count, first = %first, "damaged values left in place by compaction; reads of their keys report the damage");
        } else {
            tracing::debug!(count, first = %first, "damaged values left in place by compaction");
        }
    }

    /// Writes and fsyncs every value file (and the directory) and opens them as value logs,
    /// each with its copied bytes live. `flushes`: the partition's flush count (sampling order).
    pub(crate) fn finish(mut self, flushes: u64) -> Result<Vec<Arc<VlogFile>>> {
        self.report_damage();
        self.done.extend(self.current.take());
        let mut files = Vec::with_capacity(self.done.len());
        for f in &mut self.done {
            f.writer.write_buffer()?;
            f.writer.file().sync_data().at(f.writer.path())?;
            files.push((f.number, f.writer.path().to_path_buf(), f.moved_bytes));
        }
        if !files.is_empty() {
            fsutil::sync_dir(&*self.fs, &self.dir)?;
        }
        let mut out = Vec::with_capacity(files.len());
        for (number, path, moved) in files {
            let log = VlogFile::open(self.fs.clone(), &path, number, moved, flushes);
            match log {
                Ok(log) => out.push(Arc::new(log)),
                Err(e) => {
                    // Not listed anywhere yet: every file of this mover goes.
                    for log in &out {
                        log.obsolete
                            .store(true, std::sync::atomic::Ordering::Release);
                    }
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// Removes the value files written so far (the compaction failed: no manifest lists them).
    pub(crate) fn abandon(mut self) {
        self.report_damage();
        self.done.extend(self.current.take());
        for f in &self.done {
            if let Err(e) = self.fs.remove_file(f.writer.path()) {
                tracing::warn!(path = %f.writer.path().display(), error = %e, "could not delete an abandoned value file");
            }
        }
    }
}
