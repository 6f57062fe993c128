//! Key-value separation: large values stay where they were first written, in the write-ahead
//! log, which after its memtable is flushed becomes a *value log*; tables hold a small pointer
//! (file, offset, length, CRC32C of the value) instead of the value. Flushes and compactions then
//! rewrite pointers, not values, which cuts write amplification for large values (WiscKey;
//! RocksDB BlobDB). A value log is deleted when compactions have dropped every pointer to it,
//! or earlier by garbage collection, which re-writes its still-live values through the normal
//! write path once less than `value_log_gc_live_ratio` of it is live.
//!
//! How much of a log is live is tracked as an upper bound (a pointer's bytes are subtracted when
//! a compaction drops it, which for keys in deep levels happens late), and corrected by sampling:
//! after each flush one value log, the least recently sampled, has a few hundred of its values
//! checked against the tree, and the estimate is kept beside the tracked bound. Garbage then shows
//! up within a pass over the logs instead of waiting for compactions.
//!
//! Compactions move the values of logs whose live share has fallen low into new value files as
//! they rewrite the pointers (`relocate`), which empties most logs before garbage collection
//! would look at them; collection remains for logs whose pointers no compaction reaches.
//!
//! This module holds the pointer and the value-log file; `gc` collects a log, `relocate` moves
//! values during compaction, `sample` estimates a log's live share.

mod gc;
pub(crate) mod relocate;
mod sample;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, IoContext, Result};
use crate::util::coding::{put_varint, Reader};
use crate::vfs::{FsFile, SharedFs};

/// Where a separated value lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ValuePtr {
    /// Number of the log file.
    pub(crate) file: u64,
    /// Byte offset of the value in that file.
    pub(crate) offset: u64,
    pub(crate) len: u32,
    /// CRC32C of the value bytes.
    pub(crate) crc: u32,
}

impl ValuePtr {
    /// `file varint | offset varint | len varint | crc u32`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        put_varint(out, self.file);
        put_varint(out, self.offset);
        put_varint(out, self.len as u64);
        out.extend_from_slice(&self.crc.to_le_bytes());
    }

    pub(crate) fn decode(b: &[u8]) -> Option<ValuePtr> {
        let mut r = Reader::new(b);
        let p = ValuePtr {
            file: r.varint()?,
            offset: r.varint()?,
            len: u32::try_from(r.varint()?).ok()?,
            crc: r.u32()?,
        };
        r.is_empty().then_some(p)
    }
}

/// An open value log. Shared by versions through `Arc`; deleted from disk when the last
/// version holding it lets go after it was marked obsolete.
pub(crate) struct VlogFile {
    fs: SharedFs,
    pub(crate) number: u64,
    path: PathBuf,
    file: Arc<dyn FsFile>,
    pub(crate) total_bytes: u64,
    /// Bytes of values still referenced by some table (an upper bound: shadowed pointers are
    /// only subtracted when a compaction drops them).
    pub(crate) live_bytes: AtomicU64,
    /// Live bytes as the last sample estimated them (`u64::MAX` until sampled). Only chooses
    /// what to collect; the log is deleted without collection only when `live_bytes`, the
    /// upper bound, reaches zero.
    pub(crate) sampled_live_bytes: AtomicU64,
    /// Live bytes when the log was written (a flushed log: the bytes of its values that went
    /// to tables as pointers; a compaction's value file: every value it holds), recorded in
    /// the manifest: the victim rules measure how much of a log died against this.
    pub(crate) first_live_bytes: u64,
    /// The bytes of the file that were garbage when it was written: of a flushed write-ahead
    /// log, the entries of values that went into tables inline, of revisions overwritten
    /// within it and of deletes (for a log a manifest before format 4 lists, every byte but
    /// its live values); 0 for a compaction's value file. Its record headers and the keys of
    /// its live values are no garbage: collecting it would write them again.
    pub(crate) first_dead_bytes: u64,
    /// A value file a compaction wrote (`.vlog`), not a flushed write-ahead log: it holds
    /// nothing but values that were live when it was written, each with its record header and
    /// key.
    pub(crate) moved: bool,
    pub(crate) obsolete: AtomicBool,
    /// A record of this log failed its checksum when collection or sampling read the log
    /// whole: both leave it alone from then on (until the next open), so one damaged log
    /// neither stops them nor is chosen again and again. Reads of its values still check
    /// each value and report the damaged ones.
    pub(crate) damaged: AtomicBool,
    /// A compaction has logged, at error level, a damaged value of this log that it left in
    /// place (later compactions meeting the same values log at debug level).
    pub(crate) damage_reported: AtomicBool,
    /// The partition's flush count when this log was last sampled (or created): logs are sampled
    /// least recently first.
    pub(crate) sampled_at_flush: AtomicU64,
}

impl VlogFile {
    pub(crate) fn open(
        fs: SharedFs,
        path: &Path,
        number: u64,
        live_bytes: u64,
        first_live_bytes: u64,
        first_dead_bytes: u64,
        sampled_at_flush: u64,
    ) -> Result<VlogFile> {
        let file = fs.open(path).at(path)?;
        let total_bytes = file.len().at(path)?;
        Ok(VlogFile {
            fs,
            number,
            path: path.to_path_buf(),
            file,
            total_bytes,
            live_bytes: AtomicU64::new(live_bytes),
            sampled_live_bytes: AtomicU64::new(u64::MAX),
            first_live_bytes,
            first_dead_bytes,
            moved: relocate::is_moved_path(path),
            obsolete: AtomicBool::new(false),
            damaged: AtomicBool::new(false),
            damage_reported: AtomicBool::new(false),
            sampled_at_flush: AtomicU64::new(sampled_at_flush),
        })
    }

    /// Reads and verifies a value.
    pub(crate) fn read(&self, ptr: &ValuePtr) -> Result<Bytes> {
        // Checked before allocating: the pointer comes from a table.
        let inside = ptr
            .offset
            .checked_add(u64::from(ptr.len))
            .is_some_and(|end| end <= self.total_bytes);
        if !inside {
            return Err(Error::corruption(
                &self.path,
                ptr.offset,
                "value pointer runs past the end of its value log",
            ));
        }
        let mut buf = vec![0u8; ptr.len as usize];
        self.file
            .read_exact_at(&mut buf, ptr.offset)
            .at(&self.path)?;
        if crc32c::crc32c(&buf) != ptr.crc {
            return Err(Error::corruption(
                &self.path,
                ptr.offset,
                "value checksum mismatch in value log",
            ));
        }
        Ok(Bytes::from(buf))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Marks the log damaged if `e`, met while reading it whole, is corruption *of this log*
    /// (and says so in the log); returns whether it did. Other errors (I/O, or damage in a
    /// table that a liveness lookup read) are for the caller to return.
    pub(crate) fn mark_damaged_on(&self, e: &Error, reading_for: &str) -> bool {
        let ours = matches!(e, Error::Corruption { file, .. } if *file == self.path);
        if !ours {
            return false;
        }
        if !self.damaged.swap(true, Ordering::AcqRel) {
            tracing::error!(
                log = %self.path.display(),
                error = %e,
                "value log damaged; {reading_for} leaves it alone until the next open (reads of its damaged values report corruption)"
            );
        }
        true
    }

    /// The share that decides whether the log's values are moved or collected: of a
    /// write-ahead log, the share of its size that collecting it would keep (what was not
    /// garbage when it was flushed, times the share of its values still live; or the sampled
    /// estimate where that is lower): its small values and the records of overwritten keys are
    /// garbage once flushed, the keys and record headers of live values are not, so a wholly
    /// live log under keys long beside their values does not look dead (collecting it would
    /// write its values into a log just like it, to be collected again). Of a compaction's
    /// value file, the share of its values still live since it was written (the same as
    /// [`Self::surviving_share`]), for the same reason: moving it frees none of its headers
    /// and keys.
    pub(crate) fn victim_share(&self) -> f64 {
        let base = self.victim_base_bytes();
        if base == 0 {
            return 0.0;
        }
        let live = if self.moved {
            self.live_estimate()
        } else {
            self.kept_bytes()
                .min(self.sampled_live_bytes.load(Ordering::Relaxed))
        };
        (live as f64 / base as f64).min(1.0)
    }

    /// The bytes of a write-ahead log that collecting it would keep, by the tracked live
    /// bytes: what was not garbage at flush, scaled by the share of its values still live.
    fn kept_bytes(&self) -> u64 {
        let live = self.live_bytes.load(Ordering::Relaxed);
        if self.first_live_bytes == 0 {
            return live;
        }
        let not_garbage = self.total_bytes.saturating_sub(self.first_dead_bytes);
        let kept = u128::from(not_garbage) * u128::from(live) / u128::from(self.first_live_bytes);
        u64::try_from(kept).unwrap_or(u64::MAX)
    }

    /// What [`Self::victim_share`] divides the live bytes by, and what a sample's live share
    /// scales to: a write-ahead log's size (its small values are dead copies once flushed),
    /// the values a compaction's value file was written with (its headers and keys are not
    /// values at all).
    pub(crate) fn victim_base_bytes(&self) -> u64 {
        if self.moved {
            self.first_live_bytes
        } else {
            self.total_bytes
        }
    }

    /// The share of the live bytes it had when written that is believed live still.
    pub(crate) fn surviving_share(&self) -> f64 {
        if self.first_live_bytes == 0 {
            return 0.0;
        }
        (self.live_estimate() as f64 / self.first_live_bytes as f64).min(1.0)
    }

    /// Live bytes: the tracked upper bound, or the sampled estimate where that is lower.
    fn live_estimate(&self) -> u64 {
        self.live_bytes
            .load(Ordering::Relaxed)
            .min(self.sampled_live_bytes.load(Ordering::Relaxed))
    }
}

impl Drop for VlogFile {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            if let Err(e) = self.fs.remove_file(&self.path) {
                tracing::warn!(path = %self.path.display(), error = %e, "could not delete value log");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pointer from a damaged table may name any length: it is checked against the value log
    /// before anything is allocated (found by fuzzing: a 4 GiB allocation).
    #[test]
    fn a_pointer_past_the_end_of_its_value_log_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        std::fs::write(&path, b"0123456789").unwrap();
        let log = VlogFile::open(crate::vfs::real(), &path, 1, 10, 10, 0, 0).unwrap();
        let ok = ValuePtr {
            file: 1,
            offset: 2,
            len: 3,
            crc: crc32c::crc32c(b"234"),
        };
        assert_eq!(&log.read(&ok).unwrap()[..], b"234");
        for (offset, len) in [(8, 3), (0, u32::MAX), (u64::MAX - 1, 4)] {
            let e = log.read(&ValuePtr { offset, len, ..ok }).unwrap_err();
            assert!(e.is_corruption(), "{offset}+{len}: {e}");
        }
    }

    /// A flushed log is a victim by the share of its size collecting it would keep (its small
    /// values and the records of overwritten keys are garbage once flushed, the keys and
    /// headers of live values are not); a compaction's value file by its live bytes over those
    /// it was written with (its keys are no garbage: moving it would copy them again).
    #[test]
    fn a_value_file_is_a_victim_by_what_died_a_log_by_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let open = |name: &str, number: u64, dead_bytes: u64| {
            let path = dir.path().join(name);
            std::fs::write(&path, vec![0u8; 1000]).unwrap();
            VlogFile::open(crate::vfs::real(), &path, number, 300, 900, dead_bytes, 0).unwrap()
        };
        // 900 value bytes written, 10 bytes of garbage at flush: a third of the values live.
        let log = open("000001.log", 1, 10);
        let moved = open("000002.vlog", 2, 0);
        // A log as a manifest before format 4 reads: all but its values garbage.
        let old = open("000003.log", 3, 100);
        assert!(!log.moved && moved.moved && !old.moved);
        assert!((log.victim_share() - 0.33).abs() < 1e-9);
        assert!((moved.victim_share() - 1.0 / 3.0).abs() < 1e-9);
        assert!((old.victim_share() - 0.3).abs() < 1e-9);
        // Wholly live, the log's share is what is not garbage, not its values' share.
        log.live_bytes.store(900, Ordering::Relaxed);
        assert!((log.victim_share() - 0.99).abs() < 1e-9);
        // A sample lower than the tracked bound counts for all.
        log.sampled_live_bytes.store(100, Ordering::Relaxed);
        moved.sampled_live_bytes.store(90, Ordering::Relaxed);
        old.sampled_live_bytes.store(100, Ordering::Relaxed);
        assert!((log.victim_share() - 0.1).abs() < 1e-9);
        assert!((moved.victim_share() - 0.1).abs() < 1e-9);
        assert!((old.victim_share() - 0.1).abs() < 1e-9);
    }

    /// Only damage of the log itself marks it damaged: a liveness lookup that met a damaged
    /// table, or an I/O error, is returned to the caller, and the log stays collectable (found
    /// by review: a damaged table marked one healthy log after another).
    #[test]
    fn only_damage_of_the_log_itself_marks_it_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        std::fs::write(&path, b"0123456789").unwrap();
        let log = VlogFile::open(crate::vfs::real(), &path, 1, 10, 10, 0, 0).unwrap();
        let table = Error::corruption(dir.path().join("000007.sst"), 0, "block checksum mismatch");
        assert!(!log.mark_damaged_on(&table, "a test"));
        let io = Error::Io {
            path: path.clone(),
            source: std::io::Error::other("disk gone"),
        };
        assert!(!log.mark_damaged_on(&io, "a test"));
        assert!(!log.damaged.load(Ordering::Acquire));
        let own = Error::corruption(&path, 4, "log record checksum mismatch");
        assert!(log.mark_damaged_on(&own, "a test"));
        assert!(log.damaged.load(Ordering::Acquire));
    }
}
