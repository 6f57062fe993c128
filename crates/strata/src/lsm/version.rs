//! Versions and the manifest. A [`Version`] is the immutable set of live tables of one
//! partition; readers hold an `Arc` of it, so flushes and compactions never block them. Every
//! change writes a complete new `MANIFEST` (write temp, fsync, rename, fsync directory), so a
//! crash at any point leaves the old set or the new set, never a mix.
//!
//! `MANIFEST` layout: magic `b"STRATMAN"` | format version u32 | payload_len u32 |
//! crc32c(version ++ payload_len ++ payload) u32 | payload. Payload: `next_file_number varint |
//! log_number varint | level_count varint`, then per level `table_count varint` and per table
//! `id varint | size varint | entries varint | min_key (varint len + bytes) | max_key (same)`,
//! then `vlog_count varint` and per value log `number varint | total_bytes varint |
//! live_bytes varint` and, from format 3, `first_live_bytes varint` (its live bytes when it
//! was written, which the value logs' victim rules measure its losses against) and, from
//! format 4, `first_dead_bytes varint` (the bytes of it that were garbage when it was written:
//! of a flushed write-ahead log, the entries of values that went into tables inline, of
//! revisions overwritten within it and of deletes; 0 for a compaction's value file);
//! format 2 and later end with `last_seq varint`, the highest sequence number of a write in the tables
//! (every write of the partition up to it is in a table). Write-ahead logs numbered below
//! `log_number` hold nothing that is not in a table, except the value logs listed, which
//! tables point into. Formats 1 (no `last_seq`, no `first_live_bytes`), 2 (no
//! `first_live_bytes`) and 3 (no `first_dead_bytes`) are still read, a missing
//! `first_live_bytes` taken as the live bytes listed, a missing `first_dead_bytes` as every
//! byte but the first live bytes (a write-ahead log's live share is then its live values over
//! its size, as those formats had it).

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, IoContext, Result};
use crate::lsm::sstable::{Table, TableMeta};
use crate::lsm::vlog::VlogFile;
use crate::lsm::LEVELS;
use crate::util::coding::{put_len_prefixed, put_varint, Reader};
use crate::util::fsutil::{self, FILE_NUMBER_LIMIT};
use crate::vfs::FileSystem;
use std::collections::BTreeMap;

/// Version of the manifest format written.
pub const MANIFEST_FORMAT_VERSION: u32 = 4;
const MANIFEST_MAGIC: &[u8; 8] = b"STRATMAN";
pub(crate) const MANIFEST_FILE: &str = "MANIFEST";

/// The live tables of a partition. Level 0 is ordered newest first (tables may overlap);
/// deeper levels are sorted by key and do not overlap.
#[derive(Clone, Default)]
pub(crate) struct Version {
    pub(crate) levels: Vec<Vec<Arc<Table>>>,
    /// Value logs that tables point into, by file number.
    pub(crate) vlogs: BTreeMap<u64, Arc<VlogFile>>,
}

impl Version {
    pub(crate) fn empty() -> Self {
        Version {
            levels: vec![Vec::new(); LEVELS],
            vlogs: BTreeMap::new(),
        }
    }

    pub(crate) fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|t| t.size).sum()
    }

    /// Tables of a sorted level (>= 1) whose key range meets `[lo, hi]`.
    pub(crate) fn overlapping(&self, level: usize, lo: &[u8], hi: &[u8]) -> Vec<Arc<Table>> {
        self.levels[level]
            .iter()
            .filter(|t| &t.max_key[..] >= lo && &t.min_key[..] <= hi)
            .cloned()
            .collect()
    }

    /// The table of sorted level `level` that may hold `key`.
    pub(crate) fn find_in_level(&self, level: usize, key: &[u8]) -> Option<&Arc<Table>> {
        let tables = &self.levels[level];
        let i = tables.partition_point(|t| &t.max_key[..] < key);
        tables.get(i).filter(|t| &t.min_key[..] <= key)
    }
}

/// The decoded manifest.
pub(crate) struct Manifest {
    pub(crate) next_file_number: u64,
    pub(crate) log_number: u64,
    pub(crate) levels: Vec<Vec<TableMeta>>,
    /// Each value log.
    pub(crate) vlogs: Vec<VlogMeta>,
    /// The highest sequence number of a write in the tables (0 in format 1).
    pub(crate) last_seq: u64,
}

/// What a manifest records of a value log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VlogMeta {
    pub(crate) number: u64,
    pub(crate) total_bytes: u64,
    /// Bytes of its values some table still points to (an upper bound).
    pub(crate) live_bytes: u64,
    /// Its live bytes when it was written (for a store written before format 3: when the
    /// manifest was first read).
    pub(crate) first_live_bytes: u64,
    /// The bytes of it that were garbage when it was written (see the module comment).
    pub(crate) first_dead_bytes: u64,
}

/// What a manifest records besides the tables and value logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LogState {
    /// Logs numbered below this are flushed (or are value logs).
    pub(crate) log_number: u64,
    /// Every write of the partition up to this sequence number is in a table.
    pub(crate) last_seq: u64,
}

pub(crate) fn encode(version: &Version, next_file_number: u64, logs: LogState) -> Vec<u8> {
    encode_with_live(version, next_file_number, logs, &|v| {
        v.live_bytes.load(std::sync::atomic::Ordering::Relaxed)
    })
}

/// [`encode`], with each value log's live bytes from `live_of`.
fn encode_with_live(
    version: &Version,
    next_file_number: u64,
    logs: LogState,
    live_of: &dyn Fn(&VlogFile) -> u64,
) -> Vec<u8> {
    let log_number = logs.log_number;
    let mut payload = Vec::new();
    put_varint(&mut payload, next_file_number);
    put_varint(&mut payload, log_number);
    put_varint(&mut payload, version.levels.len() as u64);
    for level in &version.levels {
        put_varint(&mut payload, level.len() as u64);
        for t in level {
            put_varint(&mut payload, t.id);
            put_varint(&mut payload, t.size);
            put_varint(&mut payload, t.entries);
            put_len_prefixed(&mut payload, &t.min_key);
            put_len_prefixed(&mut payload, &t.max_key);
        }
    }
    put_varint(&mut payload, version.vlogs.len() as u64);
    for v in version.vlogs.values() {
        put_varint(&mut payload, v.number);
        put_varint(&mut payload, v.total_bytes);
        put_varint(&mut payload, live_of(v));
        put_varint(&mut payload, v.first_live_bytes);
        put_varint(&mut payload, v.first_dead_bytes);
    }
    put_varint(&mut payload, logs.last_seq);
    let mut out = Vec::with_capacity(payload.len() + 20);
    out.extend_from_slice(MANIFEST_MAGIC);
    out.extend_from_slice(&MANIFEST_FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[8..16]), &payload);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

pub(crate) fn decode(path: &Path, bytes: &[u8]) -> Result<Manifest> {
    let bad = |offset: u64, why: &str| Error::corruption(path, offset, why);
    let mut r = Reader::new(bytes);
    if r.bytes(8) != Some(&MANIFEST_MAGIC[..]) {
        return Err(bad(0, "bad manifest magic"));
    }
    let version = r.u32().ok_or_else(|| bad(8, "short manifest header"))?;
    let len = r.u32().ok_or_else(|| bad(12, "short manifest header"))? as usize;
    let crc = r.u32().ok_or_else(|| bad(16, "short manifest header"))?;
    let payload = r
        .bytes(len)
        .filter(|_| r.is_empty())
        .ok_or_else(|| bad(20, "manifest length does not match the file"))?;
    if crc32c::crc32c_append(crc32c::crc32c(&bytes[8..16]), payload) != crc {
        return Err(bad(16, "manifest checksum mismatch"));
    }
    if !(1..=MANIFEST_FORMAT_VERSION).contains(&version) {
        return Err(bad(8, &format!("unsupported manifest version {version}")));
    }
    let mut r = Reader::new(payload);
    // File numbers count up from 1; one beyond the limit is damage (and would overflow the
    // arithmetic that continues the count).
    let number = |n: u64| (n < FILE_NUMBER_LIMIT).then_some(n);
    let parsed = (|| {
        let next_file_number = number(r.varint()?)?;
        let log_number = number(r.varint()?)?;
        let level_count = r.varint()? as usize;
        if level_count != LEVELS {
            return None;
        }
        let mut levels = Vec::with_capacity(LEVELS);
        for _ in 0..level_count {
            let n = r.varint()?;
            if n > payload.len() as u64 {
                return None;
            }
            let mut tables = Vec::with_capacity(n as usize);
            for _ in 0..n {
                tables.push(TableMeta {
                    id: number(r.varint()?)?,
                    size: r.varint()?,
                    entries: r.varint()?,
                    min_key: Bytes::copy_from_slice(r.len_prefixed()?),
                    max_key: Bytes::copy_from_slice(r.len_prefixed()?),
                });
            }
            levels.push(tables);
        }
        let n = r.varint()?;
        if n > payload.len() as u64 {
            return None;
        }
        let mut vlogs = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let (number, total_bytes, live_bytes) =
                (number(r.varint()?)?, r.varint()?, r.varint()?);
            let first_live_bytes = if version >= 3 {
                r.varint()?
            } else {
                live_bytes
            };
            let first_dead_bytes = if version >= 4 {
                r.varint()?
            } else {
                total_bytes.saturating_sub(first_live_bytes)
            };
            vlogs.push(VlogMeta {
                number,
                total_bytes,
                live_bytes,
                first_live_bytes,
                first_dead_bytes,
            });
        }
        let last_seq = if version >= 2 { r.varint()? } else { 0 };
        r.is_empty().then_some(Manifest {
            next_file_number,
            log_number,
            levels,
            vlogs,
            last_seq,
        })
    })();
    parsed.ok_or_else(|| bad(20, "malformed manifest payload"))
}

/// Reads the manifest of a partition, `None` if there is none yet.
pub(crate) fn read(fs: &dyn FileSystem, dir: &Path) -> Result<Option<Manifest>> {
    let path = dir.join(MANIFEST_FILE);
    match fs.read(&path) {
        Ok(b) => decode(&path, &b).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).at(&path),
    }
}

/// Durably replaces the manifest.
pub(crate) fn write(
    fs: &dyn FileSystem,
    dir: &Path,
    version: &Version,
    next_file_number: u64,
    logs: LogState,
) -> Result<()> {
    fsutil::write_atomically(
        fs,
        dir,
        MANIFEST_FILE,
        &encode(version, next_file_number, logs),
    )
}

/// [`write`] with each value log's live bytes taken from `live` (0 for one it does not name)
/// instead of the log's shared count: a checkpoint writes the counts of its own tables.
pub(crate) fn write_with_live(
    fs: &dyn FileSystem,
    dir: &Path,
    version: &Version,
    next_file_number: u64,
    logs: LogState,
    live: &BTreeMap<u64, u64>,
) -> Result<()> {
    let bytes = encode_with_live(version, next_file_number, logs, &|v| {
        live.get(&v.number).copied().unwrap_or(0)
    });
    fsutil::write_atomically(fs, dir, MANIFEST_FILE, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest of format `version` around `payload`, framed by hand as the format says.
    fn framed(version: u32, payload: &[u8]) -> Vec<u8> {
        let mut bytes = b"STRATMAN".to_vec();
        bytes.extend_from_slice(&version.to_le_bytes());
        bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[8..16]), payload);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes.extend_from_slice(payload);
        bytes
    }

    #[test]
    fn every_flipped_byte_of_a_manifest_is_detected() {
        let logs = LogState {
            log_number: 3,
            last_seq: 300,
        };
        // With a value log, so its fields (first live bytes among them) are flipped too.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000002.log");
        std::fs::write(&path, vec![0u8; 500]).unwrap();
        let mut version = Version::empty();
        let log = VlogFile::open(crate::vfs::real(), &path, 2, 200, 400, 70, 0).unwrap();
        version.vlogs.insert(2, Arc::new(log));
        let bytes = encode(&version, 7, logs);
        let m = decode(Path::new("MANIFEST"), &bytes).unwrap();
        assert_eq!((m.next_file_number, m.log_number, m.last_seq), (7, 3, 300));
        assert_eq!(m.vlogs.len(), 1);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x01;
            let err = decode(Path::new("MANIFEST"), &b).err().unwrap();
            assert!(err.is_corruption(), "flip at {i}: {err}");
            assert!(err.to_string().contains("MANIFEST"));
        }
    }

    /// A value log's first live bytes (format 3) and first dead bytes (format 4) survive the
    /// manifest, so the victim rules measure its losses against what it was written with after
    /// a restart too; a manifest without them reads the first as the live bytes it lists and
    /// the second as every byte but the first live bytes (the shares those formats had).
    #[test]
    fn a_value_logs_first_live_bytes_survive_the_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000009.log");
        std::fs::write(&path, vec![0u8; 1000]).unwrap();
        let log = VlogFile::open(crate::vfs::real(), &path, 9, 600, 900, 40, 0).unwrap();
        let mut version = Version::empty();
        version.vlogs.insert(9, Arc::new(log));
        let logs = LogState {
            log_number: 10,
            last_seq: 55,
        };
        let bytes = encode(&version, 11, logs);
        let m = decode(Path::new("MANIFEST"), &bytes).unwrap();
        let want = VlogMeta {
            number: 9,
            total_bytes: 1000,
            live_bytes: 600,
            first_live_bytes: 900,
            first_dead_bytes: 40,
        };
        assert_eq!(m.vlogs, vec![want]);
        // The same manifest as format 3 wrote it: the last varint of each value log dropped.
        let mut payload = vec![11u8, 10, LEVELS as u8];
        payload.extend(std::iter::repeat_n(0u8, LEVELS));
        payload.extend_from_slice(&[1, 9, 0xE8, 0x07, 0xD8, 0x04, 0x84, 0x07, 55]);
        let m = decode(Path::new("MANIFEST"), &framed(3, &payload)).unwrap();
        assert_eq!(m.last_seq, 55);
        assert_eq!(
            m.vlogs,
            vec![VlogMeta {
                first_dead_bytes: 100,
                ..want
            }]
        );
        // As format 2 wrote it: the last two varints of each value log dropped.
        let mut payload = vec![11u8, 10, LEVELS as u8];
        payload.extend(std::iter::repeat_n(0u8, LEVELS));
        payload.extend_from_slice(&[1, 9, 0xE8, 0x07, 0xD8, 0x04, 55]);
        let m = decode(Path::new("MANIFEST"), &framed(2, &payload)).unwrap();
        assert_eq!(m.last_seq, 55);
        assert_eq!(
            m.vlogs,
            vec![VlogMeta {
                first_live_bytes: 600,
                first_dead_bytes: 400,
                ..want
            }]
        );
    }

    /// A format-1 manifest (no `last_seq`), as written before sequence numbers: byte for byte
    /// what that build wrote for an empty version, next file 7, log number 3.
    #[test]
    fn a_format_1_manifest_is_still_read() {
        let mut payload = vec![7u8, 3, LEVELS as u8];
        payload.extend(std::iter::repeat_n(0u8, LEVELS)); // no tables on any level
        payload.push(0); // no value logs
        let m = decode(Path::new("MANIFEST"), &framed(1, &payload)).unwrap();
        assert_eq!((m.next_file_number, m.log_number, m.last_seq), (7, 3, 0));
    }
}
