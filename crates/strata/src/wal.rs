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

/// Bytes read from a log file at a time by [`replay`]: replay holds this much (or one record,
/// if larger) of the file in memory, not the whole file, so startup, value-log GC and sampling
/// stay small whatever the log size.
const REPLAY_CHUNK_BYTES: usize = 1 << 20;

/// Reads every record of `path` and hands each payload to `apply`.
pub(crate) fn replay(path: &Path, apply: impl FnMut(&[u8], u64) -> Result<()>) -> Result<Replay> {
    replay_in_chunks(path, REPLAY_CHUNK_BYTES, apply)
}

/// A window over a file read forward in chunks with positioned reads.
struct Window {
    file: File,
    file_len: u64,
    chunk_bytes: usize,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    start: u64,
}

impl Window {
    /// The bytes `[at, at + len)`, which the caller has checked lie inside the file.
    fn get(&mut self, at: u64, len: usize) -> std::io::Result<&[u8]> {
        let end = at + len as u64;
        if at < self.start || end > self.start + self.buf.len() as u64 {
            use std::os::unix::fs::FileExt;
            let want = (len.max(self.chunk_bytes) as u64).min(self.file_len - at) as usize;
            self.buf.resize(want, 0);
            self.file.read_exact_at(&mut self.buf, at)?;
            self.start = at;
        }
        let from = (at - self.start) as usize;
        Ok(&self.buf[from..from + len])
    }

    /// Whether every byte from `at` to the end of the file is zero.
    fn zero_from(&mut self, mut at: u64) -> std::io::Result<bool> {
        while at < self.file_len {
            let n = (self.file_len - at).min(self.chunk_bytes as u64) as usize;
            if self.get(at, n)?.iter().any(|&b| b != 0) {
                return Ok(false);
            }
            at += n as u64;
        }
        Ok(true)
    }
}

fn replay_in_chunks(
    path: &Path,
    chunk_bytes: usize,
    mut apply: impl FnMut(&[u8], u64) -> Result<()>,
) -> Result<Replay> {
    let file = File::open(path).at(path)?;
    let file_len = file.metadata().at(path)?.len();
    let mut w = Window {
        file,
        file_len,
        chunk_bytes,
        buf: Vec::new(),
        start: 0,
    };
    if file_len < WAL_HEADER_BYTES as u64 {
        // Created but the header never reached the disk: an empty log.
        return Ok(Replay {
            valid_bytes: 0,
            torn: (file_len > 0).then_some((0, "incomplete file header")),
        });
    }
    if w.get(0, WAL_HEADER_BYTES).at(path)? != header() {
        return Err(Error::corruption(
            path,
            0,
            "bad log header (magic, version or checksum)",
        ));
    }
    let mut pos = WAL_HEADER_BYTES as u64;
    loop {
        let rest = file_len - pos;
        if rest == 0 {
            return Ok(Replay {
                valid_bytes: pos,
                torn: None,
            });
        }
        let torn = |reason| {
            Ok(Replay {
                valid_bytes: pos,
                torn: Some((pos, reason)),
            })
        };
        let head_len = rest.min(RECORD_HEADER_BYTES as u64) as usize;
        let mut head = [0u8; RECORD_HEADER_BYTES];
        head[..head_len].copy_from_slice(w.get(pos, head_len).at(path)?);
        if head.iter().all(|&b| b == 0) && w.zero_from(pos).at(path)? {
            return torn("zero-filled tail");
        }
        if head_len < RECORD_HEADER_BYTES {
            return torn("partial record header");
        }
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let stored_crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let end = RECORD_HEADER_BYTES as u64 + u64::from(len);
        if end > rest {
            return torn("record runs past end of file");
        }
        // `end <= rest`, a length inside the file: the window never grows past the file.
        let record = w.get(pos, end as usize).at(path)?;
        let payload = &record[RECORD_HEADER_BYTES..];
        let crc = crc32c::crc32c_append(crc32c::crc32c(&record[..4]), payload);
        if crc != stored_crc {
            if end == rest {
                return torn("checksum mismatch in final record");
            }
            return Err(Error::corruption(path, pos, "log record checksum mismatch"));
        }
        apply(payload, pos)?;
        pos += end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes records of the given payload lengths (payload byte = record index) and returns the
    /// file's path and each record's offset.
    fn write_log(dir: &Path, lens: &[usize]) -> (PathBuf, Vec<u64>) {
        let path = wal_path(dir, 1);
        let mut w = WalWriter::create(path.clone(), 0).unwrap();
        let mut offsets = Vec::new();
        for (i, &len) in lens.iter().enumerate() {
            offsets.push(w.len_bytes);
            w.append(&vec![i as u8; len], i as u64 + 1).unwrap();
        }
        w.write_buffer().unwrap();
        (path, offsets)
    }

    /// Each record's offset and payload.
    type Records = Vec<(u64, Vec<u8>)>;

    fn read_all(path: &Path, chunk_bytes: usize) -> Result<(Records, Replay)> {
        let mut seen = Vec::new();
        let replay = replay_in_chunks(path, chunk_bytes, |payload, offset| {
            seen.push((offset, payload.to_vec()));
            Ok(())
        })?;
        Ok((seen, replay))
    }

    const LENS: &[usize] = &[0, 1, 7, 100, 3, 5000, 64, 65, 2, 300];

    #[test]
    fn replay_in_small_chunks_sees_every_record_once_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (path, offsets) = write_log(dir.path(), LENS);
        let file_len = std::fs::metadata(&path).unwrap().len();
        // Chunks smaller than a record header, smaller than most records, and larger than the file.
        for chunk in [1, 5, 64, 1000, 1 << 20] {
            let (seen, replay) = read_all(&path, chunk).unwrap();
            assert_eq!(replay.valid_bytes, file_len, "chunk {chunk}");
            assert!(replay.torn.is_none(), "chunk {chunk}");
            let expected: Records = LENS
                .iter()
                .enumerate()
                .map(|(i, &len)| (offsets[i], vec![i as u8; len]))
                .collect();
            assert_eq!(seen, expected, "chunk {chunk}");
        }
    }

    #[test]
    fn torn_tails_and_damage_are_told_apart_in_small_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let (path, offsets) = write_log(dir.path(), LENS);
        let full = std::fs::read(&path).unwrap();
        let last = *offsets.last().unwrap();
        for chunk in [3, 64, 1 << 20] {
            // Cut inside the last record: torn at its start, earlier records all replayed.
            std::fs::write(&path, &full[..full.len() - 10]).unwrap();
            let (seen, replay) = read_all(&path, chunk).unwrap();
            assert_eq!(replay.torn, Some((last, "record runs past end of file")));
            assert_eq!(replay.valid_bytes, last);
            assert_eq!(seen.len(), LENS.len() - 1);

            // A zero-filled tail (preallocated, never written).
            let mut zeros = full.clone();
            zeros.extend(std::iter::repeat_n(0u8, 5000));
            std::fs::write(&path, &zeros).unwrap();
            let (seen, replay) = read_all(&path, chunk).unwrap();
            assert_eq!(replay.torn, Some((full.len() as u64, "zero-filled tail")));
            assert_eq!(seen.len(), LENS.len());

            // A flipped byte in the final record is a torn write; in an earlier one, corruption
            // reported at that record's offset.
            let mut bad = full.clone();
            bad[full.len() - 1] ^= 0x40;
            std::fs::write(&path, &bad).unwrap();
            let (_, replay) = read_all(&path, chunk).unwrap();
            assert_eq!(
                replay.torn,
                Some((last, "checksum mismatch in final record"))
            );

            let mut bad = full.clone();
            bad[offsets[5] as usize + RECORD_HEADER_BYTES + 2500] ^= 0x01;
            std::fs::write(&path, &bad).unwrap();
            let err = read_all(&path, chunk).err().expect("damage is an error");
            let text = err.to_string();
            assert!(
                text.contains(&offsets[5].to_string()) && text.contains("checksum"),
                "{text}"
            );

            // A record length far past the end of the file is a torn tail, not an allocation.
            let mut bad = full.clone();
            let at = last as usize;
            bad[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            std::fs::write(&path, &bad).unwrap();
            let (_, replay) = read_all(&path, chunk).unwrap();
            assert_eq!(replay.torn, Some((last, "record runs past end of file")));
        }
    }
}
