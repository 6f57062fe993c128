//! Appends records to one log file: a user-space buffer handed to the OS by the journal before
//! the write that appended them returns (one `write()` for every record appended meanwhile).
//! When to fsync is the journal's decision (group commit), not the writer's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::format::{header, put_record_header, RECORD_HEADER_BYTES, WAL_HEADER_BYTES};
use crate::error::{Error, IoContext, Result};
use crate::vfs::{FileSystem, FsFile};

/// The user-space buffer is written to the OS when it reaches this size.
const WAL_BUFFER_BYTES: usize = 256 << 10;

/// Records appended but not yet handed to the OS. Shared with the memtable whose values stay in
/// this log (`lsm/memtable.rs`): a reader that does not find a value in the file looks here,
/// taking this lock alone, never the journal's (it may hold that already, in a read-modify-write
/// or a scan under the partition's lock). A leaf lock: held for a copy or for the `write()`
/// that hands the bytes over, so a reader that finds the bytes gone from here finds them in the
/// file.
pub(crate) struct LogTail {
    /// File offset of `bytes[0]`.
    start: u64,
    bytes: Vec<u8>,
}

impl LogTail {
    /// `len` bytes at `offset` of the file, if they are still here.
    pub(crate) fn read(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        let at = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        self.bytes.get(at..at.checked_add(len)?).map(|b| b.to_vec())
    }
}

/// Appends records to one log file.
pub(crate) struct WalWriter {
    path: PathBuf,
    file: Arc<dyn FsFile>,
    buf: Arc<Mutex<LogTail>>,
    /// Sequence number of the last record appended (buffered or written).
    pub(crate) appended_seq: u64,
    /// Sequence number of the last record handed to the OS.
    pub(crate) written_seq: u64,
    /// Bytes in the file plus the buffer.
    pub(crate) len_bytes: u64,
}

impl WalWriter {
    /// Creates a new, empty log file at `path` and makes its directory entry durable.
    pub(crate) fn create(fs: &dyn FileSystem, path: PathBuf, seq: u64) -> Result<Self> {
        let file = fs.create_new(&path).at(&path)?;
        file.append(&header()).at(&path)?;
        file.sync_all().at(&path)?;
        if let Some(dir) = path.parent() {
            crate::util::fsutil::sync_dir(fs, dir)?;
        }
        Ok(WalWriter {
            path,
            file,
            buf: Arc::new(Mutex::new(LogTail {
                start: WAL_HEADER_BYTES,
                bytes: Vec::with_capacity(WAL_BUFFER_BYTES),
            })),
            appended_seq: seq,
            written_seq: seq,
            len_bytes: WAL_HEADER_BYTES,
        })
    }

    /// Appends one record with the given sequence number. Returns the bytes appended.
    pub(crate) fn append(&mut self, payload: &[u8], seq: u64) -> Result<u64> {
        if u32::try_from(payload.len()).is_err() {
            return Err(Error::LimitExceeded {
                what: "write batch",
                actual: payload.len(),
                max: u32::MAX as usize,
            });
        }
        let full = {
            let mut tail = self.buf.lock();
            put_record_header(&mut tail.bytes, payload);
            tail.bytes.extend_from_slice(payload);
            tail.bytes.len() >= WAL_BUFFER_BYTES
        };
        self.appended_seq = seq;
        let n = RECORD_HEADER_BYTES + payload.len() as u64;
        self.len_bytes += n;
        if full {
            self.write_buffer()?;
        }
        Ok(n)
    }

    /// Hands buffered records to the OS (no fsync). Only records the file took leave the
    /// buffer: after a failed (or short) write they stay readable here for the memtable that
    /// points at them, and the journal, failed, never writes this buffer again.
    pub(crate) fn write_buffer(&mut self) -> Result<()> {
        {
            let mut tail = self.buf.lock();
            if !tail.bytes.is_empty() {
                self.file.append(&tail.bytes).at(&self.path)?;
                tail.start += tail.bytes.len() as u64;
                tail.bytes.clear();
            }
        }
        self.written_seq = self.appended_seq;
        Ok(())
    }

    /// Gives the buffer's memory back once every record is in the file: the writer is being
    /// retired, and a memtable that points into this log keeps its (empty) tail as long as it
    /// lives.
    pub(crate) fn release_buffer(&self) {
        let mut tail = self.buf.lock();
        if tail.bytes.is_empty() {
            tail.bytes = Vec::new();
        }
    }

    /// The records not yet handed to the OS, shared (see [`LogTail`]).
    pub(crate) fn tail(&self) -> Arc<Mutex<LogTail>> {
        self.buf.clone()
    }

    /// Bytes of a record that may still sit in the user-space buffer: `None` if the range is
    /// already in the file (read it there).
    pub(crate) fn read_buffered(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        self.buf.lock().read(offset, len)
    }

    /// The file handle, for fsync outside the write lock.
    pub(crate) fn file(&self) -> Arc<dyn FsFile> {
        self.file.clone()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::{FaultFs, FaultKind, IoKind};

    /// A record stays in the tail until the file has taken it: a failed write leaves it there
    /// (a memtable points at it), a good one moves it to the file; a retired writer gives the
    /// buffer's memory back.
    #[test]
    fn records_leave_the_tail_only_for_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new(dir.path()).unwrap();
        let path = dir.path().join("000001.log");
        let mut w = WalWriter::create(&fs, path.clone(), 0).unwrap();
        let tail = w.tail();
        let payload = vec![7u8; 1000];
        let offset = w.len_bytes + RECORD_HEADER_BYTES;
        w.append(&payload, 1).unwrap();
        assert_eq!(tail.lock().read(offset, 1000), Some(payload.clone()));

        fs.fail(IoKind::Write, 1, FaultKind::Enospc);
        assert!(w.write_buffer().is_err());
        assert_eq!(tail.lock().read(offset, 1000), Some(payload.clone()));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), WAL_HEADER_BYTES);

        w.write_buffer().unwrap();
        assert_eq!(tail.lock().read(offset, 1000), None);
        let mut buf = vec![0u8; 1000];
        w.file().read_exact_at(&mut buf, offset).unwrap();
        assert_eq!(buf, payload);

        assert!(tail.lock().bytes.capacity() >= WAL_BUFFER_BYTES);
        w.release_buffer();
        assert_eq!(tail.lock().bytes.capacity(), 0);
    }
}
