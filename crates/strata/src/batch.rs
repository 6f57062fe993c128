//! Write batches: an ordered list of puts and deletes applied atomically: across partitions
//! on the LSM engine (no reader sees part of one, and after a crash every part is there or
//! none), per partition on the log engine.

use crate::util::coding::{put_varint, Reader};

/// The kind of an entry: a value or a tombstone. Deletes are an entry kind, never a magic value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Put = 1,
    Delete = 2,
}

impl Kind {
    pub(crate) fn from_u8(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::Put),
            2 => Some(Kind::Delete),
            _ => None,
        }
    }
}

/// A set of writes applied together, all or nothing: readers never see part of a batch, and
/// after a crash either all of it is there or none (with the LSM engine, also across
/// partitions; the log engine is atomic per partition only, see `RELIABILITY.md`). A batch
/// that writes one key twice leaves the key with its last write.
#[derive(Debug, Clone, Default)]
pub struct WriteBatch {
    pub(crate) ops: Vec<(Kind, Vec<u8>, Vec<u8>)>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a put.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.ops
            .push((Kind::Put, key.as_ref().to_vec(), value.as_ref().to_vec()));
        self
    }

    /// Adds a put of owned bytes, without copying them.
    pub fn put_owned(&mut self, key: Vec<u8>, value: Vec<u8>) -> &mut Self {
        self.ops.push((Kind::Put, key, value));
        self
    }

    /// Adds a delete of an owned key, without copying it.
    pub fn delete_owned(&mut self, key: Vec<u8>) -> &mut Self {
        self.ops.push((Kind::Delete, key, Vec::new()));
        self
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.ops
            .push((Kind::Delete, key.as_ref().to_vec(), Vec::new()));
        self
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// An atomic read-modify-write decision (see [`crate::Db::update`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// Leave the key as it is.
    Keep,
    /// Store this value.
    Put(Vec<u8>),
    /// Delete the key.
    Delete,
}

/// One entry of a batch, borrowed: kind, key, value (empty for deletes).
pub(crate) type Entry<'a> = (Kind, &'a [u8], &'a [u8]);

/// What a log record says about its batch besides the entries (log format 2): its sequence
/// number and, for a batch that spans partitions, every partition that holds a part of it
/// (recovery keeps such a batch only if every part survived); since log format 3 also its
/// *claim*: a sequence number up to which every batch of the database was fsynced, in every
/// partition, when this one was appended (`Sequencer::durable`). Recovery never drops a
/// batch at or below the highest claim it finds, and cuts the order at the first batch
/// missing above it, so that a power cut leaves a prefix of the database's writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BatchHeader {
    pub(crate) seq: u64,
    /// Empty for a batch whose keys all lie in one partition.
    pub(crate) parts: Vec<u32>,
    /// At most `seq`; `None` in a record of log format 1 or 2, which had none.
    pub(crate) claim: Option<u64>,
}

/// Encodes a batch as a log record payload. Format 3: `seq: varint | seq - claim: varint |
/// part_count: varint | part ids: varint each`, then the entries: `count: varint`, then per
/// entry `kind: u8, key_len: varint, value_len: varint, key, value` (value absent for
/// deletes). Format 2 had no claim, format 1 the entries only. A header without a claim is
/// written as claiming nothing (0).
pub(crate) fn encode_batch<'a>(
    out: &mut Vec<u8>,
    header: &BatchHeader,
    entries: impl ExactSizeIterator<Item = Entry<'a>>,
    value_offsets: Option<&mut Vec<u32>>,
) {
    put_varint(out, header.seq);
    put_varint(out, header.seq - header.claim.unwrap_or(0).min(header.seq));
    put_varint(out, header.parts.len() as u64);
    for &p in &header.parts {
        put_varint(out, u64::from(p));
    }
    encode_entries_at(out, entries, value_offsets);
}

/// Encodes entries alone (the body of a batch).
#[cfg(test)]
pub(crate) fn encode_entries<'a>(
    out: &mut Vec<u8>,
    entries: impl ExactSizeIterator<Item = Entry<'a>>,
) {
    encode_entries_at(out, entries, None);
}

/// The bytes an entry of `kind` with a `key_bytes` key and a `value_bytes` value takes among a
/// batch's entries in a log (kind, key length, value length for a put, key, value:
/// [`encode_entries_at`]).
pub(crate) fn entry_bytes(kind: Kind, key_bytes: usize, value_bytes: usize) -> u64 {
    let key = 1 + crate::util::varint::len(key_bytes as u64) + key_bytes;
    match kind {
        Kind::Put => (key + crate::util::varint::len(value_bytes as u64) + value_bytes) as u64,
        Kind::Delete => key as u64,
    }
}

/// Encodes entries, also recording where each entry's value starts in `out` (0 for deletes),
/// so that a value can later be read straight from the log file (value log).
fn encode_entries_at<'a>(
    out: &mut Vec<u8>,
    entries: impl ExactSizeIterator<Item = Entry<'a>>,
    mut value_offsets: Option<&mut Vec<u32>>,
) {
    if let Some(v) = value_offsets.as_deref_mut() {
        v.clear();
    }
    put_varint(out, entries.len() as u64);
    for (kind, key, value) in entries {
        out.push(kind as u8);
        put_varint(out, key.len() as u64);
        if kind == Kind::Put {
            put_varint(out, value.len() as u64);
        }
        out.extend_from_slice(key);
        if let Some(v) = value_offsets.as_deref_mut() {
            v.push(if kind == Kind::Put {
                out.len() as u32
            } else {
                0
            });
        }
        if kind == Kind::Put {
            out.extend_from_slice(value);
        }
    }
}

/// Decodes a record payload of log format `format` (1: entries only; 2: header and entries;
/// 3: the header with a claim);
/// `None` if malformed.
pub(crate) fn decode_batch(payload: &[u8], format: u32) -> Option<(BatchHeader, Vec<Entry<'_>>)> {
    let mut r = Reader::new(payload);
    let mut header = BatchHeader::default();
    if format >= 2 {
        header.seq = r.varint()?;
        if format >= 3 {
            header.claim = Some(header.seq.checked_sub(r.varint()?)?);
        }
        let parts = r.varint()?;
        // Every part id takes at least a byte: refuse a count the payload cannot hold.
        if parts > payload.len() as u64 {
            return None;
        }
        for _ in 0..parts {
            header.parts.push(u32::try_from(r.varint()?).ok()?);
        }
    }
    let entries = decode_entries(r.rest())?;
    Some((header, entries))
}

/// Decodes the entries written by [`encode_entries_at`]; `None` if malformed.
fn decode_entries(payload: &[u8]) -> Option<Vec<Entry<'_>>> {
    let mut r = Reader::new(payload);
    let count = r.varint()?;
    // Each entry takes at least 2 bytes, so a count beyond that is a lie: refuse before allocating.
    if count > payload.len() as u64 / 2 {
        return None;
    }
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let kind = Kind::from_u8(r.u8()?)?;
        let klen = r.varint()? as usize;
        let vlen = if kind == Kind::Put {
            r.varint()? as usize
        } else {
            0
        };
        let key = r.bytes(klen)?;
        let value = r.bytes(vlen)?;
        out.push((kind, key, value));
    }
    if !r.is_empty() {
        return None;
    }
    Some(out)
}

/// Whether each entry is the last write of its key in `entries` (a batch may write one key more
/// than once; only its last entry is the key's state after the batch).
pub(crate) fn last_writes(entries: &[Entry<'_>]) -> Vec<bool> {
    if entries.len() <= 1 {
        return vec![true; entries.len()];
    }
    let mut seen = std::collections::HashSet::with_capacity(entries.len());
    let mut last: Vec<bool> = entries
        .iter()
        .rev()
        .map(|(_, k, _)| seen.insert(*k))
        .collect();
    last.reverse();
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`entry_bytes`] is what the encoder writes per entry, across the lengths where the
    /// varints grow.
    #[test]
    fn entry_bytes_are_what_an_entry_takes_in_a_batch() {
        for key_bytes in [0, 1, 127, 128, 300, 16_384] {
            for value_bytes in [0, 5, 127, 128, 1024, 16_384, 70_000] {
                for kind in [Kind::Put, Kind::Delete] {
                    let key = vec![b'k'; key_bytes];
                    let value = if kind == Kind::Put {
                        vec![b'v'; value_bytes]
                    } else {
                        Vec::new()
                    };
                    let (mut one, mut two) = (Vec::new(), Vec::new());
                    encode_entries(&mut one, [(kind, &key[..], &value[..])].into_iter());
                    encode_entries(
                        &mut two,
                        [(kind, &key[..], &value[..]), (kind, &key[..], &value[..])].into_iter(),
                    );
                    assert_eq!(
                        (two.len() - one.len()) as u64,
                        entry_bytes(kind, key_bytes, value.len()),
                        "{kind:?}, {key_bytes} B key, {} B value",
                        value.len()
                    );
                }
            }
        }
    }

    #[test]
    fn entries_round_trip_and_reject_truncation() {
        let mut b = WriteBatch::new();
        b.put(b"k1", b"v1").delete(b"k2").put(b"", b"");
        let mut buf = Vec::new();
        encode_entries(
            &mut buf,
            b.ops.iter().map(|(k, key, v)| (*k, &key[..], &v[..])),
        );
        let got = decode_entries(&buf).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], (Kind::Put, &b"k1"[..], &b"v1"[..]));
        assert_eq!(got[1], (Kind::Delete, &b"k2"[..], &b""[..]));
        for cut in 0..buf.len() {
            assert!(decode_entries(&buf[..cut]).is_none(), "cut at {cut}");
        }
    }

    /// Format 3 carries the claim after the sequence number; format 2 records (no claim) are
    /// still read, as claiming nothing; a claim above its batch is malformed.
    #[test]
    fn headers_round_trip_with_their_claim_and_older_formats_still_read() {
        let entries: Vec<Entry<'_>> = vec![(Kind::Put, b"k", b"v"), (Kind::Delete, b"gone", b"")];
        for (seq, claim, parts) in [
            (1u64, Some(0u64), vec![]),
            (300, Some(299), vec![0u32, 3]),
            (1 << 40, Some(7), vec![2]),
            (9, Some(9), vec![]),
            (5, None, vec![]),
        ] {
            let header = BatchHeader { seq, parts, claim };
            let mut out = Vec::new();
            encode_batch(&mut out, &header, entries.iter().copied(), None);
            let (got, got_entries) = decode_batch(&out, 3).unwrap();
            assert_eq!(got.seq, seq);
            assert_eq!(got.parts, header.parts);
            assert_eq!(got.claim, Some(claim.unwrap_or(0)));
            assert_eq!(got_entries, entries);
        }
        // Format 2, as an older build wrote it: `seq | parts | entries`.
        let mut old = Vec::new();
        put_varint(&mut old, 42);
        put_varint(&mut old, 0);
        encode_entries(&mut old, entries.iter().copied());
        let (got, got_entries) = decode_batch(&old, 2).unwrap();
        assert_eq!((got.seq, got.claim), (42, None));
        assert_eq!(got_entries, entries);
        // `seq - claim` larger than `seq`: a claim below zero.
        let mut bad = Vec::new();
        put_varint(&mut bad, 3);
        put_varint(&mut bad, 4);
        put_varint(&mut bad, 0);
        encode_entries(&mut bad, entries.iter().copied());
        assert!(decode_batch(&bad, 3).is_none());
    }

    #[test]
    fn last_writes_marks_the_final_entry_of_each_key() {
        let e: Vec<Entry<'_>> = vec![
            (Kind::Put, b"k", b"1"),
            (Kind::Put, b"j", b"1"),
            (Kind::Delete, b"k", b""),
            (Kind::Put, b"k", b"2"),
        ];
        assert_eq!(last_writes(&e), [false, true, false, true]);
        assert_eq!(last_writes(&e[..1]), [true]);
        assert!(last_writes(&[]).is_empty());
    }
}
