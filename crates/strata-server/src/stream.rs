//! Streams as engine keys (docs/format.md): a record under the stream's name (kind stream,
//! payload [`StreamMeta`]: incarnation, length, last ID, first ID, deleted-ID watermark,
//! entries ever added) and one engine key per entry, `element prefix 'E' ms seq` (both u64
//! big-endian, so entries are in ID order) -> the entry's fields and values
//! ([`encode_fields`]). Like a collection's elements, an entry belongs to one incarnation:
//! DEL writes only the record's tombstone and compaction drops the disowned entries
//! (`collection::element_is_dead`). Unlike a collection, an empty stream still exists.

use bytes::Bytes;

use crate::backend::KvBackend;
use crate::collection::element_prefix;
use crate::error::{Error, Result};
use crate::keyspace::{string_key, DbIndex};

/// A stream entry's ID: milliseconds and a sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID up; `None` past the last.
    pub fn next(self) -> Option<StreamId> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(StreamId::new(self.ms, seq)),
            None => self.ms.checked_add(1).map(|ms| StreamId::new(ms, 0)),
        }
    }

    /// The next ID down; `None` below the first.
    pub fn prev(self) -> Option<StreamId> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(StreamId::new(self.ms, seq)),
            None => self.ms.checked_sub(1).map(|ms| StreamId::new(ms, u64::MAX)),
        }
    }

    /// Parses `ms[-seq]` (Redis's `streamParseID`): `missing_seq` when only the milliseconds
    /// are given; `None` for anything else.
    pub fn parse(text: &[u8], missing_seq: u64) -> Option<StreamId> {
        // Redis reads at most 127 bytes of an ID.
        if text.len() > 127 {
            return None;
        }
        let text = std::str::from_utf8(text).ok()?;
        let (ms, seq) = match text.split_once('-') {
            Some((ms, seq)) => (ms, Some(seq)),
            None => (text, None),
        };
        let number = |s: &str| -> Option<u64> {
            // Redis's string2ull: digits only, no sign, no spaces.
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            s.parse().ok()
        };
        Some(StreamId::new(
            number(ms)?,
            match seq {
                Some(s) => number(s)?,
                None => missing_seq,
            },
        ))
    }

    /// `ms-seq`.
    pub fn to_bytes(self) -> Bytes {
        Bytes::from(format!("{}-{}", self.ms, self.seq))
    }

    /// The engine-key suffix: both numbers big-endian.
    fn key_bytes(self) -> [u8; 16] {
        let mut out = [0; 16];
        out[..8].copy_from_slice(&self.ms.to_be_bytes());
        out[8..].copy_from_slice(&self.seq.to_be_bytes());
        out
    }

    fn from_key_bytes(b: &[u8]) -> Option<StreamId> {
        let (ms, seq) = b.split_first_chunk::<8>()?;
        let seq: [u8; 8] = seq.try_into().ok()?;
        Some(StreamId::new(
            u64::from_be_bytes(*ms),
            u64::from_be_bytes(seq),
        ))
    }
}

/// A stream's record payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamMeta {
    /// The incarnation whose entries are live.
    pub version: u64,
    /// Entries in the stream.
    pub length: u64,
    /// The greatest ID ever added or set (XSETID): new IDs are above it.
    pub last_id: StreamId,
    /// No live entry is below this ID (reads start here; trimming raises it).
    pub first_id: StreamId,
    /// The greatest ID deleted (XDEL, trimming), 0-0 when none.
    pub max_deleted_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
}

/// Bytes of an encoded [`StreamMeta`]: a format byte and nine u64.
const STREAM_META_BYTES: usize = 1 + 9 * 8;
/// The format byte of [`StreamMeta`]'s encoding.
const STREAM_META_FORMAT: u8 = 1;

impl StreamMeta {
    /// An empty stream's metadata.
    pub fn new(version: u64) -> StreamMeta {
        StreamMeta {
            version,
            length: 0,
            last_id: StreamId::MIN,
            first_id: StreamId::MIN,
            max_deleted_id: StreamId::MIN,
            entries_added: 0,
        }
    }

    /// The record payload (little-endian words after the format byte).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(STREAM_META_BYTES);
        out.push(STREAM_META_FORMAT);
        for w in [
            self.version,
            self.length,
            self.last_id.ms,
            self.last_id.seq,
            self.first_id.ms,
            self.first_id.seq,
            self.max_deleted_id.ms,
            self.max_deleted_id.seq,
            self.entries_added,
        ] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// Decodes a record payload; names damage.
    pub fn decode(payload: &[u8]) -> Result<StreamMeta> {
        let damaged = || Error::command("stored data is damaged: a stream record");
        if payload.len() != STREAM_META_BYTES || payload[0] != STREAM_META_FORMAT {
            return Err(damaged());
        }
        let word = |i: usize| -> Result<u64> {
            let at = 1 + 8 * i;
            payload
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes)
                .ok_or_else(damaged)
        };
        Ok(StreamMeta {
            version: word(0)?,
            length: word(1)?,
            last_id: StreamId::new(word(2)?, word(3)?),
            first_id: StreamId::new(word(4)?, word(5)?),
            max_deleted_id: StreamId::new(word(6)?, word(7)?),
            entries_added: word(8)?,
        })
    }
}

/// The sub-key byte of entries (after the element prefix).
const ENTRY_TAG: u8 = b'E';

/// The engine key of entry `id` of incarnation `version` of stream `name`.
pub fn entry_key(db: DbIndex, name: &[u8], version: u64, id: StreamId) -> Vec<u8> {
    let mut k = element_prefix(db, name, version);
    k.push(ENTRY_TAG);
    k.extend_from_slice(&id.key_bytes());
    k
}

/// An entry's fields and values: a u32 count of pairs, then each field and value as a u32
/// length (all big-endian) and its bytes.
pub fn encode_fields(pairs: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + pairs.iter().map(|p| p.len() + 4).sum::<usize>());
    out.extend_from_slice(
        &u32::try_from(pairs.len() / 2)
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    for p in pairs {
        out.extend_from_slice(&u32::try_from(p.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(p);
    }
    out
}

/// The fields and values [`encode_fields`] wrote, alternating; names damage.
pub fn decode_fields(bytes: &[u8]) -> Result<Vec<Bytes>> {
    let damaged = || Error::command("stored data is damaged: a stream entry");
    let (count, mut rest) = bytes.split_first_chunk::<4>().ok_or_else(damaged)?;
    let items = usize::try_from(u32::from_be_bytes(*count))
        .map_err(|_| damaged())?
        .checked_mul(2)
        .ok_or_else(damaged)?;
    let mut out = Vec::with_capacity(items.min(1 << 16));
    for _ in 0..items {
        let (len, tail) = rest.split_first_chunk::<4>().ok_or_else(damaged)?;
        let len = usize::try_from(u32::from_be_bytes(*len)).map_err(|_| damaged())?;
        let item = tail.get(..len).ok_or_else(damaged)?;
        out.push(Bytes::copy_from_slice(item));
        rest = &tail[len..];
    }
    if !rest.is_empty() {
        return Err(damaged());
    }
    Ok(out)
}

/// One entry as read: its ID and encoded fields.
pub type Entry = (StreamId, Bytes);

/// Visits the entries of `meta`'s incarnation of `name` with IDs in `from..=to`, in ID order,
/// until `visit` returns false (one scan of the key's partition).
pub fn visit_entries(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &StreamMeta,
    (from, to): (StreamId, StreamId),
    visit: &mut dyn FnMut(StreamId, &[u8]) -> bool,
) -> Result<()> {
    let from = from.max(meta.first_id);
    if from > to {
        return Ok(());
    }
    let lo = entry_key(db, name, meta.version, from);
    let hi = entry_key(db, name, meta.version, to);
    let prefix_len = lo.len() - 16;
    b.scan_group(
        &string_key(db, name),
        std::ops::Bound::Included(lo),
        std::ops::Bound::Included(hi),
        &mut |k, v| match k.get(prefix_len..).and_then(StreamId::from_key_bytes) {
            Some(id) => visit(id, v),
            None => true,
        },
    )
}

/// Up to `limit` entries of `meta`'s incarnation with IDs in `from..=to`; `rev`: the last
/// ones, highest first (read forward: the engine has no reverse scan yet, so this reads the
/// whole range).
pub fn entries(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &StreamMeta,
    range: (StreamId, StreamId),
    rev: bool,
    limit: usize,
) -> Result<Vec<Entry>> {
    let mut out = std::collections::VecDeque::new();
    if limit == 0 {
        return Ok(Vec::new());
    }
    visit_entries(b, db, name, meta, range, &mut |id, v| {
        if rev && out.len() == limit {
            out.pop_front();
        }
        out.push_back((id, Bytes::copy_from_slice(v)));
        rev || out.len() < limit
    })?;
    let mut out: Vec<Entry> = out.into();
    if rev {
        out.reverse();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn ids_parse_like_redis() {
        assert_eq!(StreamId::parse(b"5", 0), Some(StreamId::new(5, 0)));
        assert_eq!(
            StreamId::parse(b"5", u64::MAX),
            Some(StreamId::new(5, u64::MAX))
        );
        assert_eq!(StreamId::parse(b"5-3", 0), Some(StreamId::new(5, 3)));
        assert_eq!(
            StreamId::parse(b"18446744073709551615-18446744073709551615", 0),
            Some(StreamId::MAX)
        );
        for bad in [
            &b""[..],
            b"-",
            b"5-",
            b"-5",
            b"+5",
            b"5-+1",
            b"a-1",
            b" 5",
            b"18446744073709551616",
        ] {
            assert_eq!(StreamId::parse(bad, 0), None, "{bad:?}");
        }
        assert_eq!(StreamId::new(1, u64::MAX).next(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(StreamId::new(2, 0).prev(), Some(StreamId::new(1, u64::MAX)));
        assert_eq!(StreamId::MIN.prev(), None);
    }

    #[test]
    fn meta_and_fields_round_trip_and_damage_is_named() {
        let m = StreamMeta {
            version: 7,
            length: 3,
            last_id: StreamId::new(10, 2),
            first_id: StreamId::new(4, 0),
            max_deleted_id: StreamId::new(9, 9),
            entries_added: 12,
        };
        let bytes = m.encode();
        assert_eq!(StreamMeta::decode(&bytes).unwrap(), m);
        assert!(StreamMeta::decode(&bytes[1..]).is_err());
        let mut other_format = bytes.clone();
        other_format[0] = 2;
        assert!(StreamMeta::decode(&other_format).is_err());
        let pairs = vec![
            Bytes::from("f"),
            Bytes::from(""),
            Bytes::from("g"),
            Bytes::from("v"),
        ];
        let enc = encode_fields(&pairs);
        assert_eq!(decode_fields(&enc).unwrap(), pairs);
        assert!(decode_fields(&enc[..enc.len() - 1]).is_err());
        let mut longer = enc.clone();
        longer.push(0);
        assert!(decode_fields(&longer).is_err());
    }

    #[test]
    fn entry_keys_sort_by_id() {
        let ids = [
            StreamId::new(0, 1),
            StreamId::new(1, 0),
            StreamId::new(1, 255),
            StreamId::new(1, 256),
            StreamId::new(256, 0),
        ];
        let keys: Vec<Vec<u8>> = ids.iter().map(|&i| entry_key(0, b"s", 1, i)).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
    }
}
