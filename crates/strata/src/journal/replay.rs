//! Reads a log file from start to end: every record is checked against its checksum and handed
//! on, in order, from a window of 1 MiB (never the whole file in memory). Every reader goes
//! through one of two policies for a torn tail (a final record that runs past the end of the
//! file, a checksum mismatch in the last record, or a tail of zeros; any other bad record is
//! corruption, with the file and byte offset): [`recover_log`] (recovery and the hash engine's
//! open: the newest log may be torn and is cut there) and [`replay_complete_log`] (value-log
//! garbage collection and sampling, the hash engine's merge: the log was complete, so a torn
//! tail is corruption and the reader must not take the log as read).

use std::path::Path;
use std::sync::Arc;

use super::format::{
    parse_header, parse_record_header, payload_matches, RECORD_HEADER_BYTES, WAL_HEADER_BYTES,
};
use crate::batch::{decode_batch, BatchHeader, Entry};
use crate::error::{Error, IoContext, Result};
use crate::vfs::{FileSystem, FsFile};

/// What replaying one log file found.
pub(crate) struct Replay {
    /// Bytes of valid header and records.
    pub(crate) valid_bytes: u64,
    /// Set when a torn tail was found: (offset, reason).
    pub(crate) torn: Option<(u64, &'static str)>,
    /// What was wrong with a damaged record that salvage cut off.
    detail: Option<String>,
}

/// Replays the log at `path` for recovery and applies the recovery policy for logs as a whole:
///
/// - damage at the end of a log that a crash may have left unfinished (`may_be_torn`: the newest
///   log, or a merge output without its hint) is a torn tail: it is cut off and reported;
/// - damage anywhere else, including the end of an older log, is corruption: every other log was
///   fsynced complete before a newer one existed (at rotation, or here at recovery), so a crash
///   cannot have torn it. It is returned as [`Error::Corruption`] naming the file and
///   offset, unless `salvage` is set: then the log is cut at the damage, keeping everything
///   before it, and what was dropped is reported;
/// - finally the log is fsynced, so that what recovery read from it (possibly from the page
///   cache of a process that was killed) is on the disk before anything newer is written.
///
/// Returns the bytes kept.
pub(crate) fn recover_log(
    fs: &dyn FileSystem,
    path: &Path,
    may_be_torn: bool,
    salvage: bool,
    apply: impl FnMut(Batch<'_>) -> Result<()>,
) -> Result<u64> {
    let replay = match replay_batches(fs, path, apply) {
        Ok(r) => r,
        Err(Error::Corruption { offset, what, .. }) if salvage => Replay {
            valid_bytes: offset,
            torn: Some((offset, "damaged record")),
            detail: Some(what),
        },
        Err(e) => return Err(e),
    };
    let file = fs.open(path).at(path)?;
    let file_len = file.len().at(path)?;
    if let Some((offset, reason)) = replay.torn {
        let dropped_bytes = file_len.saturating_sub(replay.valid_bytes);
        if may_be_torn && replay.detail.is_none() {
            tracing::warn!(path = %path.display(), offset, reason, dropped_bytes, "cutting a torn log tail");
        } else if salvage {
            let detail = replay.detail.as_deref().unwrap_or(reason);
            tracing::warn!(path = %path.display(), offset, detail, dropped_bytes, "salvage: cutting a damaged log at the damage");
        } else {
            return Err(damage_in_a_complete_log(path, offset, reason));
        }
        file.set_len(replay.valid_bytes).at(path)?;
    }
    file.sync_all().at(path)?;
    Ok(replay.valid_bytes)
}

/// Reads every record of a log that was complete when it was last written (an older log, a
/// value log, a sealed segment), as [`replay_batches`] does, under the same policy as
/// [`recover_log`] gives such logs: damage that stops the read before the end, which
/// `replay_batches` reports as a torn tail, is corruption. A caller that reads a log whole in
/// order to delete it (value-log collection, a segment merge) must not take a read that
/// stopped early for the whole log: records after the damage may still be live.
pub(crate) fn replay_complete_log(
    fs: &dyn FileSystem,
    path: &Path,
    apply: impl FnMut(Batch<'_>) -> Result<()>,
) -> Result<()> {
    match replay_batches(fs, path, apply)?.torn {
        None => Ok(()),
        Some((offset, reason)) => Err(damage_in_a_complete_log(path, offset, reason)),
    }
}

fn damage_in_a_complete_log(path: &Path, offset: u64, reason: &str) -> Error {
    Error::corruption(
        path,
        offset,
        format!("{reason} in a log that was complete (only the newest log may end torn)"),
    )
}

/// Bytes read from a log file at a time by [`replay`]: replay holds this much (or one record,
/// if larger) of the file in memory, not the whole file, so startup, value-log GC and sampling
/// stay small whatever the log size.
const REPLAY_CHUNK_BYTES: usize = 1 << 20;

/// One record of a log as its readers see it: the batch it holds, decoded, and where it lies.
pub(crate) struct Batch<'a> {
    /// Offset of the record in its file.
    pub(crate) offset: u64,
    /// Bytes of the record, header included.
    pub(crate) len: u64,
    payload: &'a [u8],
    /// The batch's sequence number and the partitions it spans (log format 2; zero and none
    /// in format 1).
    pub(crate) header: BatchHeader,
    pub(crate) entries: Vec<Entry<'a>>,
}

impl Batch<'_> {
    /// File offset of `value`, the value of one of this batch's entries.
    pub(crate) fn value_offset(&self, value: &[u8]) -> u64 {
        let in_payload = value.as_ptr() as usize - self.payload.as_ptr() as usize;
        debug_assert!(
            in_payload + value.len() <= self.payload.len(),
            "value outside its record"
        );
        self.offset + RECORD_HEADER_BYTES + in_payload as u64
    }
}

/// Reads every record of `path`, decodes its batch and hands it to `apply`; a record whose
/// checksum holds but whose batch does not decode is corruption. Readers outside this module
/// choose a torn-tail policy: [`recover_log`] or [`replay_complete_log`].
fn replay_batches(
    fs: &dyn FileSystem,
    path: &Path,
    mut apply: impl FnMut(Batch<'_>) -> Result<()>,
) -> Result<Replay> {
    replay_in_chunks(fs, path, REPLAY_CHUNK_BYTES, |payload, offset, format| {
        let (header, entries) = decode_batch(payload, format)
            .ok_or_else(|| Error::corruption(path, offset, "log record holds a malformed batch"))?;
        apply(Batch {
            offset,
            len: RECORD_HEADER_BYTES + payload.len() as u64,
            payload,
            header,
            entries,
        })
    })
}

/// A window over a file read forward in chunks with positioned reads.
/// Most payload bytes [`Window::whole_record_from`] checksums before it gives up.
const WHOLE_RECORD_SEARCH_BYTES_MAX: u64 = 256 << 20;

struct Window {
    file: Arc<dyn FsFile>,
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
            let want = (len.max(self.chunk_bytes) as u64).min(self.file_len - at) as usize;
            self.buf.resize(want, 0);
            self.file.read_exact_at(&mut self.buf, at)?;
            self.start = at;
        }
        let from = (at - self.start) as usize;
        Ok(&self.buf[from..from + len])
    }

    /// Whether a whole record (a header whose length fits in the file and whose checksum, over
    /// length and payload, matches) starts anywhere in `[from, file_len)`. A torn final write
    /// leaves nothing whole after the record it cut; damage to a length field leaves the
    /// records that follow it whole. Read only on that rare path, one header per offset, and
    /// at most [`WHOLE_RECORD_SEARCH_BYTES_MAX`] of payloads checked: past it (a long torn tail
    /// full of plausible lengths) the tail is taken as torn, as it was before this search.
    fn whole_record_from(&mut self, from: u64) -> std::io::Result<bool> {
        let mut budget = WHOLE_RECORD_SEARCH_BYTES_MAX;
        let mut at = from;
        while at + RECORD_HEADER_BYTES < self.file_len {
            let head: [u8; RECORD_HEADER_BYTES as usize] = self
                .get(at, RECORD_HEADER_BYTES as usize)?
                .try_into()
                .unwrap_or([0; RECORD_HEADER_BYTES as usize]);
            let (len, crc) = parse_record_header(&head);
            let end = at + RECORD_HEADER_BYTES + u64::from(len);
            if len > 0 && end <= self.file_len {
                budget = match budget.checked_sub(u64::from(len)) {
                    Some(left) => left,
                    None => return Ok(false),
                };
                let payload = self.get(at + RECORD_HEADER_BYTES, len as usize)?;
                if payload_matches(len, crc, payload) {
                    return Ok(true);
                }
            }
            at += 1;
        }
        Ok(false)
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
    fs: &dyn FileSystem,
    path: &Path,
    chunk_bytes: usize,
    mut apply: impl FnMut(&[u8], u64, u32) -> Result<()>,
) -> Result<Replay> {
    let file = fs.open(path).at(path)?;
    let file_len = file.len().at(path)?;
    let mut w = Window {
        file,
        file_len,
        chunk_bytes,
        buf: Vec::new(),
        start: 0,
    };
    if file_len < WAL_HEADER_BYTES {
        // Created but the header never reached the disk: an empty log.
        return Ok(Replay {
            valid_bytes: 0,
            torn: (file_len > 0).then_some((0, "incomplete file header")),
            detail: None,
        });
    }
    let Some(format) = parse_header(w.get(0, WAL_HEADER_BYTES as usize).at(path)?) else {
        return Err(Error::corruption(
            path,
            0,
            "bad log header (magic, version or checksum)",
        ));
    };
    let mut pos = WAL_HEADER_BYTES;
    loop {
        let rest = file_len - pos;
        if rest == 0 {
            return Ok(Replay {
                valid_bytes: pos,
                torn: None,
                detail: None,
            });
        }
        let torn = |reason| {
            Ok(Replay {
                valid_bytes: pos,
                torn: Some((pos, reason)),
                detail: None,
            })
        };
        let head_len = rest.min(RECORD_HEADER_BYTES) as usize;
        let mut head = [0u8; RECORD_HEADER_BYTES as usize];
        head[..head_len].copy_from_slice(w.get(pos, head_len).at(path)?);
        if head.iter().all(|&b| b == 0) && w.zero_from(pos).at(path)? {
            return torn("zero-filled tail");
        }
        if head_len < RECORD_HEADER_BYTES as usize {
            return torn("partial record header");
        }
        let (len, stored_crc) = parse_record_header(&head);
        let end = RECORD_HEADER_BYTES + u64::from(len);
        if end > rest {
            if w.whole_record_from(pos + 1).at(path)? {
                return Err(Error::corruption(
                    path,
                    pos,
                    "log record length runs past the end of the file, but whole records follow it (damage, not a torn write)",
                ));
            }
            return torn("record runs past end of file");
        }
        // `end <= rest`, a length inside the file: the window never grows past the file.
        let record = w.get(pos, end as usize).at(path)?;
        let payload = &record[RECORD_HEADER_BYTES as usize..];
        if !payload_matches(len, stored_crc, payload) {
            if end == rest {
                return torn("checksum mismatch in final record");
            }
            return Err(Error::corruption(path, pos, "log record checksum mismatch"));
        }
        apply(payload, pos, format)?;
        pos += end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::format::wal_path;
    use crate::journal::writer::WalWriter;
    use crate::vfs::RealFs;
    use std::path::PathBuf;

    /// Writes records of the given payload lengths (payload byte = record index) and returns the
    /// file's path and each record's offset.
    fn write_log(dir: &Path, lens: &[usize]) -> (PathBuf, Vec<u64>) {
        let path = wal_path(dir, 1);
        let mut w = WalWriter::create(&RealFs, path.clone(), 0).unwrap();
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
        let replay = replay_in_chunks(&RealFs, path, chunk_bytes, |payload, offset, _| {
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
            bad[offsets[5] as usize + RECORD_HEADER_BYTES as usize + 2500] ^= 0x01;
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
