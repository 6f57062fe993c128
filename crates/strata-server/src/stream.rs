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
use crate::stream_node::{Node, NODE_WORDS};

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
        // Redis works on it as a C string (to its first NUL byte), split at the first `-`,
        // each side read by `string2ull`.
        let text = &text[..text.iter().position(|&c| c == 0).unwrap_or(text.len())];
        let (ms, seq) = match text.iter().position(|&c| c == b'-') {
            Some(dash) => (&text[..dash], Some(&text[dash + 1..])),
            None => (text, None),
        };
        Some(StreamId::new(
            crate::num::parse_u64_c(ms)?,
            match seq {
                Some(s) => crate::num::parse_u64_c(s)?,
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
    /// Its nodes (`stream_node.rs`): how many, the first one's ID and the last one; `None` for
    /// a stream written before nodes were kept (format 1), whose nodes are rebuilt at its next
    /// write.
    pub nodes: Option<NodeCount>,
}

/// A stream's nodes as its record keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeCount {
    /// Nodes the stream has.
    pub count: u64,
    /// The first node's first ID (meaningless when `count` is 0): node scans start there, past
    /// the deleted records of the nodes trimmed before it.
    pub head: StreamId,
    /// The last node, the one XADD appends to (meaningless when `count` is 0); it has no
    /// record of its own.
    pub tail: Node,
}

/// Bytes of an encoded [`StreamMeta`] of format 1: a format byte and nine u64.
const STREAM_META_V1_BYTES: usize = 1 + 9 * 8;
/// Words of an encoded [`StreamMeta`] of format 2 (varints).
const STREAM_META_WORDS: usize = 9 + 3 + NODE_WORDS;
/// The format byte of [`StreamMeta`]'s encoding: 2 adds the node count, the first node's ID
/// and the last node to format 1.
const STREAM_META_FORMAT: u8 = 2;
/// Format 1: no nodes kept.
const STREAM_META_FORMAT_NO_NODES: u8 = 1;

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
            nodes: Some(NodeCount::default()),
        }
    }

    /// The words of the record payload after its format byte: nine, and with nodes
    /// [`STREAM_META_WORDS`].
    fn words(&self) -> Vec<u64> {
        let mut w = vec![
            self.version,
            self.length,
            self.last_id.ms,
            self.last_id.seq,
            self.first_id.ms,
            self.first_id.seq,
            self.max_deleted_id.ms,
            self.max_deleted_id.seq,
            self.entries_added,
        ];
        if let Some(n) = self.nodes {
            w.extend([n.count, n.head.ms, n.head.seq]);
            w.extend(n.tail.words());
        }
        w
    }

    /// The record payload: the format byte, then the words, as varints in format 2 (every
    /// XADD rewrites the record: most words are small), as u64 little-endian in format 1 (a
    /// stream whose nodes are not known).
    pub fn encode(&self) -> Vec<u8> {
        let words = self.words();
        let mut out = Vec::with_capacity(STREAM_META_V1_BYTES);
        match self.nodes {
            Some(_) => {
                out.push(STREAM_META_FORMAT);
                for w in words {
                    strata::varint::put(&mut out, w);
                }
            }
            None => {
                out.push(STREAM_META_FORMAT_NO_NODES);
                for w in words {
                    out.extend_from_slice(&w.to_le_bytes());
                }
            }
        }
        out
    }

    /// Decodes a record payload; names damage.
    pub fn decode(payload: &[u8]) -> Result<StreamMeta> {
        let damaged = || Error::command("stored data is damaged: a stream record");
        let mut w = [0u64; STREAM_META_WORDS];
        let with_nodes = match (payload.first(), payload.len()) {
            (Some(&STREAM_META_FORMAT), _) => {
                let mut rest = &payload[1..];
                for word in w.iter_mut() {
                    let (v, used) = strata::varint::decode(rest).map_err(|_| damaged())?;
                    *word = v;
                    rest = &rest[used..];
                }
                if !rest.is_empty() {
                    return Err(damaged());
                }
                true
            }
            (Some(&STREAM_META_FORMAT_NO_NODES), STREAM_META_V1_BYTES) => {
                for (word, b) in w.iter_mut().zip(payload[1..].chunks_exact(8)) {
                    *word = u64::from_le_bytes(b.try_into().map_err(|_| damaged())?);
                }
                false
            }
            _ => return Err(damaged()),
        };
        Ok(StreamMeta {
            version: w[0],
            length: w[1],
            last_id: StreamId::new(w[2], w[3]),
            first_id: StreamId::new(w[4], w[5]),
            max_deleted_id: StreamId::new(w[6], w[7]),
            entries_added: w[8],
            nodes: if with_nodes {
                let mut tail = [0u64; NODE_WORDS];
                tail.copy_from_slice(&w[12..]);
                Some(NodeCount {
                    count: w[9],
                    head: StreamId::new(w[10], w[11]),
                    tail: Node::from_words(tail),
                })
            } else {
                None
            },
        })
    }
}

/// The sub-key byte of entries (after the element prefix).
const ENTRY_TAG: u8 = b'E';

/// The engine key of entry `id` of incarnation `version` of stream `name`.
pub fn entry_key(db: DbIndex, name: &[u8], version: u64, id: StreamId) -> Vec<u8> {
    id_key(db, name, version, ENTRY_TAG, id)
}

/// The engine key of the record tagged `tag` (an entry, a node) named by `id` in incarnation
/// `version` of stream `name`: the element prefix, the tag, both numbers big-endian (so the
/// records of one tag are in ID order).
pub fn id_key(db: DbIndex, name: &[u8], version: u64, tag: u8, id: StreamId) -> Vec<u8> {
    let mut k = element_prefix(db, name, version);
    k.push(tag);
    k.extend_from_slice(&id.key_bytes());
    k
}

/// Visits the records tagged `tag` of incarnation `version` of stream `name` with IDs in
/// `from..=to` (`rev`: from `to` down, one scan from the top), until `visit` returns false.
pub fn visit_ids(
    b: &dyn KvBackend,
    db: DbIndex,
    (name, version, tag): (&[u8], u64, u8),
    (from, to): (StreamId, StreamId),
    rev: bool,
    visit: &mut dyn FnMut(StreamId, &[u8]) -> bool,
) -> Result<()> {
    if from > to {
        return Ok(());
    }
    let lo = id_key(db, name, version, tag, from);
    let hi = id_key(db, name, version, tag, to);
    let prefix_len = lo.len() - 16;
    let (lo, hi) = (std::ops::Bound::Included(lo), std::ops::Bound::Included(hi));
    let mut each = |k: &[u8], v: &[u8]| match k.get(prefix_len..).and_then(StreamId::from_key_bytes)
    {
        Some(id) => visit(id, v),
        None => true,
    };
    if rev {
        b.scan_group_rev(&string_key(db, name), lo, hi, &mut each)
    } else {
        b.scan_group(&string_key(db, name), lo, hi, &mut each)
    }
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
    range: (StreamId, StreamId),
    visit: &mut dyn FnMut(StreamId, &[u8]) -> bool,
) -> Result<()> {
    visit_entries_in(b, db, name, meta, range, false, visit)
}

/// [`visit_entries`] in either order (`rev`: from `to` down, one scan from the top).
fn visit_entries_in(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &StreamMeta,
    (from, to): (StreamId, StreamId),
    rev: bool,
    visit: &mut dyn FnMut(StreamId, &[u8]) -> bool,
) -> Result<()> {
    let from = from.max(meta.first_id);
    visit_ids(
        b,
        db,
        (name, meta.version, ENTRY_TAG),
        (from, to),
        rev,
        visit,
    )
}

/// Up to `limit` entries of `meta`'s incarnation with IDs in `from..=to`; `rev`: the last
/// ones, highest first (one scan from the top, which stops after them).
pub fn entries(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &StreamMeta,
    range: (StreamId, StreamId),
    rev: bool,
    limit: usize,
) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    // The last entry (XREVRANGE + - COUNT 1, XINFO STREAM): the last ID's entry, unless it
    // was deleted, is one read.
    let (from, to) = range;
    if rev && limit == 1 && meta.length > 0 && from <= meta.last_id && meta.last_id <= to {
        if let Some(v) = b.get(&entry_key(db, name, meta.version, meta.last_id))? {
            return Ok(vec![(meta.last_id, v)]);
        }
    }
    visit_entries_in(b, db, name, meta, range, rev, &mut |id, v| {
        out.push((id, Bytes::copy_from_slice(v)));
        out.len() < limit
    })?;
    Ok(out)
}

/// The sub-key bytes of a stream's consumer groups, their pending entries and consumers.
const GROUP_TAG: u8 = b'G';
const PEL_TAG: u8 = b'P';
const CONSUMER_TAG: u8 = b'C';

/// A consumer group: the last ID delivered, and how many entries it has read (`None`: not
/// known, Redis's `SCG_INVALID_ENTRIES_READ`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    pub last_id: StreamId,
    pub entries_read: Option<u64>,
}

/// Bytes of an encoded [`Group`]: a format byte, the ID and the counter (-1: unknown).
const GROUP_BYTES: usize = 1 + 3 * 8;

impl Group {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(GROUP_BYTES);
        out.push(1);
        out.extend_from_slice(&self.last_id.ms.to_le_bytes());
        out.extend_from_slice(&self.last_id.seq.to_le_bytes());
        let read = self
            .entries_read
            .and_then(|n| i64::try_from(n).ok())
            .unwrap_or(-1);
        out.extend_from_slice(&read.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Group> {
        let damaged = || Error::command("stored data is damaged: a stream consumer group");
        if bytes.len() != GROUP_BYTES || bytes[0] != 1 {
            return Err(damaged());
        }
        let word = |i: usize| -> Result<[u8; 8]> {
            bytes
                .get(1 + 8 * i..9 + 8 * i)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(damaged)
        };
        let read = i64::from_le_bytes(word(2)?);
        Ok(Group {
            last_id: StreamId::new(u64::from_le_bytes(word(0)?), u64::from_le_bytes(word(1)?)),
            entries_read: u64::try_from(read).ok(),
        })
    }
}

/// A pending entry of a group (delivered, not acknowledged): to whom, when last, how often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nack {
    pub consumer: Bytes,
    pub delivery_ms: u64,
    pub deliveries: u64,
}

impl Nack {
    /// The delivery time and count (u64 LE each), then the consumer's name.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.consumer.len());
        out.extend_from_slice(&self.delivery_ms.to_le_bytes());
        out.extend_from_slice(&self.deliveries.to_le_bytes());
        out.extend_from_slice(&self.consumer);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Nack> {
        let damaged = || Error::command("stored data is damaged: a stream pending entry");
        let (time, rest) = bytes.split_first_chunk::<8>().ok_or_else(damaged)?;
        let (count, name) = rest.split_first_chunk::<8>().ok_or_else(damaged)?;
        Ok(Nack {
            consumer: Bytes::copy_from_slice(name),
            delivery_ms: u64::from_le_bytes(*time),
            deliveries: u64::from_le_bytes(*count),
        })
    }
}

/// `prefix tag len(group) group`: where one group's pending entries or consumers start.
fn group_part(db: DbIndex, name: &[u8], version: u64, tag: u8, group: &[u8]) -> Vec<u8> {
    let mut k = element_prefix(db, name, version);
    k.push(tag);
    k.extend_from_slice(&u32::try_from(group.len()).unwrap_or(u32::MAX).to_be_bytes());
    k.extend_from_slice(group);
    k
}

/// The engine key of consumer group `group`.
pub fn group_key(db: DbIndex, name: &[u8], version: u64, group: &[u8]) -> Vec<u8> {
    let mut k = element_prefix(db, name, version);
    k.push(GROUP_TAG);
    k.extend_from_slice(group);
    k
}

/// The engine key of `group`'s pending entry `id`.
pub fn pel_key(db: DbIndex, name: &[u8], version: u64, group: &[u8], id: StreamId) -> Vec<u8> {
    let mut k = group_part(db, name, version, PEL_TAG, group);
    k.extend_from_slice(&id.key_bytes());
    k
}

/// The engine key of `group`'s consumer `consumer` (value: [`ConsumerTimes`]).
pub fn consumer_key(
    db: DbIndex,
    name: &[u8],
    version: u64,
    group: &[u8],
    consumer: &[u8],
) -> Vec<u8> {
    let mut k = group_part(db, name, version, CONSUMER_TAG, group);
    k.extend_from_slice(consumer);
    k
}

/// Visits the engine keys that start with `prefix` (one scan of the stream's partition):
/// each key's rest after the prefix and its value.
fn visit_prefix(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    prefix: Vec<u8>,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> Result<()> {
    let end = crate::backend::prefix_end(&prefix);
    let n = prefix.len();
    b.scan_group(
        &string_key(db, name),
        std::ops::Bound::Included(prefix),
        end,
        &mut |k, v| visit(&k[n..], v),
    )
}

/// The stream's consumer groups, in name order.
pub fn groups(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &StreamMeta,
) -> Result<Vec<(Bytes, Group)>> {
    let mut prefix = element_prefix(db, name, meta.version);
    prefix.push(GROUP_TAG);
    let mut out = Vec::new();
    let mut damage = None;
    visit_prefix(
        b,
        db,
        name,
        prefix,
        &mut |group, v| match Group::decode(v) {
            Ok(g) => {
                out.push((Bytes::copy_from_slice(group), g));
                true
            }
            Err(e) => {
                damage = Some(e);
                false
            }
        },
    )?;
    damage.map_or(Ok(out), Err)
}

/// `group`'s pending entries with IDs in `from..=to`, in ID order.
pub fn pending(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &StreamMeta,
    group: &[u8],
    range: (StreamId, StreamId),
) -> Result<Vec<(StreamId, Nack)>> {
    let mut out = Vec::new();
    visit_pending(b, db, name, meta, group, range, &mut |id, nack| {
        out.push((id, nack));
        true
    })?;
    Ok(out)
}

/// Visits `group`'s pending entries with IDs in `from..=to`, in ID order, until `visit`
/// returns false (the scan stops there).
pub fn visit_pending(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &StreamMeta,
    group: &[u8],
    (from, to): (StreamId, StreamId),
    visit: &mut dyn FnMut(StreamId, Nack) -> bool,
) -> Result<()> {
    if from > to {
        return Ok(());
    }
    let prefix = group_part(db, name, meta.version, PEL_TAG, group);
    let mut damage = None;
    let mut lo = prefix.clone();
    lo.extend_from_slice(&from.key_bytes());
    let mut hi = prefix.clone();
    hi.extend_from_slice(&to.key_bytes());
    let n = prefix.len();
    b.scan_group(
        &string_key(db, name),
        std::ops::Bound::Included(lo),
        std::ops::Bound::Included(hi),
        &mut |k, v| {
            let id = k.get(n..).and_then(StreamId::from_key_bytes);
            match (id, Nack::decode(v)) {
                (Some(id), Ok(nack)) => visit(id, nack),
                (_, Err(e)) => {
                    damage = Some(e);
                    false
                }
                (None, _) => true,
            }
        },
    )?;
    damage.map_or(Ok(()), Err)
}

/// What a consumer's record holds: when it was last seen (any XREADGROUP, XCLAIM or
/// XAUTOCLAIM naming it) and when it last read or claimed an entry (Redis 7.2's `seen_time`
/// and `active_time`; unix ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsumerTimes {
    pub seen_ms: u64,
    /// `None`: it never read or claimed anything.
    pub active_ms: Option<u64>,
}

impl ConsumerTimes {
    /// A consumer made now, which has read nothing yet.
    pub fn new(now_ms: u64) -> Self {
        ConsumerTimes {
            seen_ms: now_ms,
            active_ms: None,
        }
    }

    /// The record: `seen` (u64 LE), then `active` (i64 LE, -1: never).
    pub fn encode(&self) -> Vec<u8> {
        let active = self
            .active_ms
            .map_or(-1, |t| i64::try_from(t).unwrap_or(i64::MAX));
        let mut v = self.seen_ms.to_le_bytes().to_vec();
        v.extend_from_slice(&active.to_le_bytes());
        v
    }

    /// Reads a record; one of 8 bytes (written before active times were kept) has none.
    pub fn decode(v: &[u8]) -> Self {
        let word = |at: usize| -> Option<[u8; 8]> { v.get(at..at + 8)?.try_into().ok() };
        ConsumerTimes {
            seen_ms: word(0).map_or(0, u64::from_le_bytes),
            active_ms: word(8)
                .map(i64::from_le_bytes)
                .and_then(|t| u64::try_from(t).ok()),
        }
    }
}

/// `group`'s consumers in name order, with their times.
pub fn consumers(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &StreamMeta,
    group: &[u8],
) -> Result<Vec<(Bytes, ConsumerTimes)>> {
    let prefix = group_part(db, name, meta.version, CONSUMER_TAG, group);
    let mut out = Vec::new();
    visit_prefix(b, db, name, prefix, &mut |consumer, v| {
        out.push((Bytes::copy_from_slice(consumer), ConsumerTimes::decode(v)));
        true
    })?;
    Ok(out)
}

/// Every engine key of `group` (its record, pending entries and consumers), for DESTROY.
pub fn group_keys(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &StreamMeta,
    group: &[u8],
) -> Result<Vec<Vec<u8>>> {
    let mut keys = vec![group_key(db, name, meta.version, group)];
    for tag in [PEL_TAG, CONSUMER_TAG] {
        let prefix = group_part(db, name, meta.version, tag, group);
        let start = prefix.clone();
        visit_prefix(b, db, name, prefix, &mut |rest, _| {
            let mut k = start.clone();
            k.extend_from_slice(rest);
            keys.push(k);
            true
        })?;
    }
    Ok(keys)
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
            b"5-+",
            b"a-1",
            b"5 ",
            b"5--1",
            b"18446744073709551616",
        ] {
            assert_eq!(StreamId::parse(bad, 0), None, "{bad:?}");
        }
        // Redis's string2ull falls back to strtoull: leading spaces, a `+`, and a `-` after
        // spaces (negated modulo 2^64) pass; a NUL byte ends the ID.
        for (good, id) in [
            (&b"+5"[..], StreamId::new(5, 0)),
            (b"5-+1", StreamId::new(5, 1)),
            (b" 5", StreamId::new(5, 0)),
            (b"5- -1", StreamId::new(5, u64::MAX)),
            (b"5-2\0junk", StreamId::new(5, 2)),
        ] {
            assert_eq!(StreamId::parse(good, 0), Some(id), "{good:?}");
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
            nodes: Some(NodeCount {
                count: 2,
                head: StreamId::new(4, 0),
                tail: crate::stream_node::Node::start(
                    StreamId::new(8, 1),
                    &[Bytes::from("f"), Bytes::from("v")],
                ),
            }),
        };
        let bytes = m.encode();
        assert_eq!(bytes[0], 2);
        assert_eq!(StreamMeta::decode(&bytes).unwrap(), m);
        assert!(StreamMeta::decode(&bytes[1..]).is_err());
        assert!(StreamMeta::decode(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(StreamMeta::decode(&longer).is_err());
        // Varints: with a millisecond clock's IDs, the last node and the counts, smaller than
        // format 1's fixed words without them.
        let clock = StreamMeta {
            last_id: StreamId::new(1_764_500_000_000, 3),
            first_id: StreamId::new(1_764_400_000_000, 0),
            ..m
        };
        assert!(clock.encode().len() < 73, "{}", clock.encode().len());
        let mut other_format = bytes.clone();
        other_format[0] = 3;
        assert!(StreamMeta::decode(&other_format).is_err());
        // Format 1 (no nodes) reads as "nodes not known"; a format byte that does not match
        // the length is damage.
        let old = StreamMeta { nodes: None, ..m };
        let old_bytes = old.encode();
        assert_eq!((old_bytes[0], old_bytes.len()), (1, 73));
        assert_eq!(StreamMeta::decode(&old_bytes).unwrap(), old);
        other_format[0] = 1;
        assert!(StreamMeta::decode(&other_format).is_err());
        let mut short = old_bytes.clone();
        short[0] = 2;
        assert!(StreamMeta::decode(&short).is_err());
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
    fn groups_and_pending_entries_round_trip() {
        for g in [
            Group {
                last_id: StreamId::new(5, 1),
                entries_read: Some(9),
            },
            Group {
                last_id: StreamId::MAX,
                entries_read: None,
            },
        ] {
            let bytes = g.encode();
            assert_eq!(Group::decode(&bytes).unwrap(), g);
            assert!(Group::decode(&bytes[..bytes.len() - 1]).is_err());
        }
        let n = Nack {
            consumer: Bytes::from("alice"),
            delivery_ms: 1_700_000_000_000,
            deliveries: 3,
        };
        assert_eq!(Nack::decode(&n.encode()).unwrap(), n);
        assert!(Nack::decode(&n.encode()[..15]).is_err());
        // One group's pending entries never run into another's whose name extends it.
        let a = pel_key(0, b"s", 1, b"g", StreamId::MAX);
        let b = pel_key(0, b"s", 1, b"g2", StreamId::MIN);
        assert!(!b.starts_with(&group_part(0, b"s", 1, PEL_TAG, b"g")));
        assert!(a.starts_with(&group_part(0, b"s", 1, PEL_TAG, b"g")));
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
