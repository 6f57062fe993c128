//! The log file format shared by both engines: the LSM engine's write-ahead log and the log
//! engine's segments. Every write is appended here before it touches memory, so a crash loses
//! nothing that was acknowledged under the configured sync mode.
//!
//! File `wal/NNNNNN.log`: a 16-byte header (magic `b"STRATWAL"`, format version u32, CRC32C of
//! those 12 bytes u32), then records `payload_len u32 | crc32c(payload_len bytes ++ payload) u32 |
//! payload`. A payload is one write batch (see `batch::encode_entries`), so a batch is atomic.
//!
//! Records are collected in a user-space buffer and handed to the OS by the journal before the
//! write that appended them returns (one `write()` for every record appended meanwhile); the
//! journal also decides when to fsync (group commit). Recovery accepts a torn final record —
//! one that runs past the end of the file, or a tail of zeros — truncates it and reports it; any
//! other bad record is corruption, reported with the file and byte offset.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, IoContext, Result};

/// Version of the write-ahead log format.
pub const WAL_FORMAT_VERSION: u32 = 1;
const WAL_MAGIC: &[u8; 8] = b"STRATWAL";
pub(crate) const WAL_HEADER_BYTES: usize = 16;
pub(crate) const RECORD_HEADER_BYTES: usize = 8;
/// The user-space buffer is written to the OS when it reaches this size.
const WAL_BUFFER_BYTES: usize = 256 << 10;
pub(crate) const WAL_SUFFIX: &str = ".log";

pub(crate) fn wal_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}{WAL_SUFFIX}"))
}

fn header() -> [u8; WAL_HEADER_BYTES] {
    let mut h = [0u8; WAL_HEADER_BYTES];
    h[..8].copy_from_slice(WAL_MAGIC);
    h[8..12].copy_from_slice(&WAL_FORMAT_VERSION.to_le_bytes());
    let crc = crc32c::crc32c(&h[..12]);
    h[12..16].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Appends records to one log file.
pub(crate) struct WalWriter {
    path: PathBuf,
    file: Arc<File>,
    buf: Vec<u8>,
    /// Sequence number of the last record appended (buffered or written).
    pub(crate) appended_seq: u64,
    /// Sequence number of the last record handed to the OS.
    pub(crate) written_seq: u64,
    /// Bytes in the file plus the buffer.
    pub(crate) len_bytes: u64,
}

impl WalWriter {
    /// Creates a new, empty log file at `path` and makes its directory entry durable.
    pub(crate) fn create(path: PathBuf, seq: u64) -> Result<Self> {
        let mut file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&path)
            .at(&path)?;
        file.write_all(&header()).at(&path)?;
        file.sync_all().at(&path)?;
        if let Some(dir) = path.parent() {
            crate::lsm::fsutil::sync_dir(dir)?;
        }
        Ok(WalWriter {
            path,
            file: Arc::new(file),
            buf: Vec::with_capacity(WAL_BUFFER_BYTES),
            appended_seq: seq,
            written_seq: seq,
            len_bytes: WAL_HEADER_BYTES as u64,
        })
    }

    /// Appends one record with the given sequence number. Returns the bytes appended.
    pub(crate) fn append(&mut self, payload: &[u8], seq: u64) -> Result<u64> {
        let len = u32::try_from(payload.len()).map_err(|_| Error::LimitExceeded {
            what: "write batch",
            actual: payload.len(),
            max: u32::MAX as usize,
        })?;
        let len_bytes = len.to_le_bytes();
        let mut crc = crc32c::crc32c(&len_bytes);
        crc = crc32c::crc32c_append(crc, payload);
        self.buf.extend_from_slice(&len_bytes);
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.buf.extend_from_slice(payload);
        self.appended_seq = seq;
        let n = (RECORD_HEADER_BYTES + payload.len()) as u64;
        self.len_bytes += n;
        if self.buf.len() >= WAL_BUFFER_BYTES {
            self.write_buffer()?;
        }
        Ok(n)
    }

    /// Hands buffered records to the OS (no fsync).
    pub(crate) fn write_buffer(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            let res = (&*self.file).write_all(&self.buf);
            self.buf.clear();
            res.at(&self.path)?;
        }
        self.written_seq = self.appended_seq;
        Ok(())
    }

    /// Bytes of a record that may still sit in the user-space buffer: `None` if the range is
    /// already in the file (read it there).
    pub(crate) fn read_buffered(&self, offset: u64, len: usize) -> Option<Vec<u8>> {
        let buf_start = self.len_bytes - self.buf.len() as u64;
        if offset < buf_start {
            return None;
        }
        let at = (offset - buf_start) as usize;
        self.buf.get(at..at + len).map(|b| b.to_vec())
    }

    /// The file handle, for fsync outside the write lock.
    pub(crate) fn file(&self) -> Arc<File> {
        self.file.clone()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// What replaying one log file found.
pub(crate) struct Replay {
    /// Bytes of valid header and records.
    pub(crate) valid_bytes: u64,
    /// Set when a torn tail was found: (offset, reason).
    pub(crate) torn: Option<(u64, &'static str)>,
}

/// Reads every record of `path` and hands each payload to `apply`.
pub(crate) fn replay(
    path: &Path,
    mut apply: impl FnMut(&[u8], u64) -> Result<()>,
) -> Result<Replay> {
    let data = std::fs::read(path).at(path)?;
    if data.len() < WAL_HEADER_BYTES {
        // Created but the header never reached the disk: an empty log.
        return Ok(Replay {
            valid_bytes: 0,
            torn: (!data.is_empty()).then_some((0, "incomplete file header")),
        });
    }
    if data[..WAL_HEADER_BYTES] != header() {
        return Err(Error::corruption(
            path,
            0,
            "bad log header (magic, version or checksum)",
        ));
    }
    let mut pos = WAL_HEADER_BYTES;
    loop {
        let rest = &data[pos..];
        if rest.is_empty() {
            return Ok(Replay {
                valid_bytes: pos as u64,
                torn: None,
            });
        }
        let torn = |reason| {
            Ok(Replay {
                valid_bytes: pos as u64,
                torn: Some((pos as u64, reason)),
            })
        };
        if rest.iter().all(|&b| b == 0) {
            return torn("zero-filled tail");
        }
        if rest.len() < RECORD_HEADER_BYTES {
            return torn("partial record header");
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let stored_crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        let end = RECORD_HEADER_BYTES + len;
        if end > rest.len() {
            return torn("record runs past end of file");
        }
        let payload = &rest[RECORD_HEADER_BYTES..end];
        let crc = crc32c::crc32c_append(crc32c::crc32c(&rest[..4]), payload);
        if crc != stored_crc {
            if end == rest.len() {
                return torn("checksum mismatch in final record");
            }
            return Err(Error::corruption(
                path,
                pos as u64,
                "log record checksum mismatch",
            ));
        }
        apply(payload, pos as u64)?;
        pos += end;
    }
}
