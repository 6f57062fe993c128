//! The log file format shared by both engines: the LSM engine's write-ahead logs (which become
//! value logs after flush) and the hash engine's segments. Every write is appended to a log
//! before it touches memory, so a crash loses nothing that was acknowledged under the configured
//! sync mode.
//!
//! File `NNNNNN.log` (or a segment): a 16-byte header (magic `b"STRATWAL"`, format version u32,
//! CRC32C of those 12 bytes u32), then records `payload_len u32 | crc32c(payload_len bytes ++
//! payload) u32 | payload`. A payload is one write batch (see `batch::encode_batch`), so a
//! batch is atomic. Format 3 (written now) starts each payload with the batch's sequence number,
//! its claim (how far every partition was durable when it was appended) and, for a batch
//! spanning partitions, the partitions it spans; format 2 (still read) had no claim, format 1
//! (still read) the entries only. This module is the only place that knows the framing: [`super::writer`]
//! writes it, [`super::replay`] and [`decode_record`] read it.

use std::path::{Path, PathBuf};

/// Version of the log file format written (3: each batch carries its claim, `BatchHeader`).
pub const WAL_FORMAT_VERSION: u32 = 3;
/// The oldest log format still read.
pub(crate) const WAL_FORMAT_VERSION_MIN: u32 = 1;
const WAL_MAGIC: &[u8; 8] = b"STRATWAL";
/// Bytes of the file header.
pub(crate) const WAL_HEADER_BYTES: u64 = 16;
/// Bytes of a record header: payload length and checksum.
pub(crate) const RECORD_HEADER_BYTES: u64 = 8;
/// File name suffix of write-ahead logs and value logs.
pub(crate) const WAL_SUFFIX: &str = ".log";

/// The path of log number `number` in `dir`.
pub(crate) fn wal_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}{WAL_SUFFIX}"))
}

/// The file header every new log starts with.
pub(crate) fn header() -> [u8; WAL_HEADER_BYTES as usize] {
    header_of(WAL_FORMAT_VERSION)
}

/// The file header of a log of format `version`.
pub(crate) fn header_of(version: u32) -> [u8; WAL_HEADER_BYTES as usize] {
    let mut h = [0u8; WAL_HEADER_BYTES as usize];
    h[..8].copy_from_slice(WAL_MAGIC);
    h[8..12].copy_from_slice(&version.to_le_bytes());
    let crc = crc32c::crc32c(&h[..12]);
    h[12..16].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Appends the header of a record holding `payload` to `out` (the caller appends the payload).
pub(crate) fn put_record_header(out: &mut Vec<u8>, payload: &[u8]) {
    debug_assert!(
        u32::try_from(payload.len()).is_ok(),
        "record payload over 4 GiB"
    );
    let len_bytes = (payload.len() as u32).to_le_bytes();
    let crc = crc32c::crc32c_append(crc32c::crc32c(&len_bytes), payload);
    out.extend_from_slice(&len_bytes);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// A record's header, read: the payload length and the stored checksum.
pub(crate) fn parse_record_header(head: &[u8; RECORD_HEADER_BYTES as usize]) -> (u32, u32) {
    (
        u32::from_le_bytes([head[0], head[1], head[2], head[3]]),
        u32::from_le_bytes([head[4], head[5], head[6], head[7]]),
    )
}

/// Whether `payload` matches the checksum stored in its record header.
pub(crate) fn payload_matches(len: u32, stored_crc: u32, payload: &[u8]) -> bool {
    crc32c::crc32c_append(crc32c::crc32c(&len.to_le_bytes()), payload) == stored_crc
}

/// Checks one whole record (header and payload, as read by a point lookup) and returns its
/// payload, or what is wrong with it.
pub(crate) fn decode_record(record: &[u8]) -> Result<&[u8], &'static str> {
    let Some((head, payload)) = record.split_first_chunk::<{ RECORD_HEADER_BYTES as usize }>()
    else {
        return Err("short record");
    };
    let (len, crc) = parse_record_header(head);
    if len as usize != payload.len() || !payload_matches(len, crc, payload) {
        return Err("record checksum mismatch");
    }
    Ok(payload)
}

/// The format version of a log whose file starts with `head`, if it is a valid header of a
/// format this build reads.
pub(crate) fn parse_header(head: &[u8]) -> Option<u32> {
    let version = u32::from_le_bytes(head.get(8..12)?.try_into().ok()?);
    ((WAL_FORMAT_VERSION_MIN..=WAL_FORMAT_VERSION).contains(&version) && head == header_of(version))
        .then_some(version)
}
