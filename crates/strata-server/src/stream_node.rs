//! Redis's stream nodes, kept beside a stream's entries so that trimming with `~` keeps what
//! Redis keeps. Redis stores a stream as a radix tree of *nodes*, each a listpack of entries in
//! ID order; `XADD` appends to the last node until it holds `stream-node-max-entries` entries
//! (deleted ones included) or `stream-node-max-bytes` bytes, then starts a new one; `~`
//! trimming removes whole nodes only, so applications and tests see Redis keep more than the
//! length asked for, by an amount fixed by where the nodes end. Where they end depends on the
//! listpack's exact byte size, so that is computed here with listpack's encoding rules
//! (integers in 1 to 9 bytes, strings that read as integers stored as integers, each element
//! followed by its length), as Redis 7.0's `streamAppendItem` writes them.
//!
//! The last node, which every XADD changes, lives in the stream's record (`stream::NodeCount`,
//! with the node count and the first node's ID), so an XADD writes no more than before; every
//! other node has a record, `element prefix 'N' ms seq` (the node's first ID, big-endian, so
//! nodes are in ID order) -> [`Node::encode`]. A node's entries are the stream's entries from
//! its first ID up to the next node's. Entries deleted by XDEL or an exact trim stay counted as
//! deleted in their node, as in Redis, until the whole node goes.

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::keyspace::DbIndex;
use crate::stream::StreamId;

/// A listpack's header (total bytes u32, element count u16) and end byte.
const LISTPACK_EMPTY_BYTES: u64 = 7;
/// A listpack's largest size: a node is never allowed past it (Redis's
/// `STREAM_LISTPACK_MAX_SIZE`).
const LISTPACK_BYTES_MAX: u64 = 1 << 30;
/// An entry whose fields are its node's first entry's fields stores only its values
/// (Redis's `STREAM_ITEM_FLAG_SAMEFIELDS`).
const FLAG_SAME_FIELDS: i64 = 2;
/// The format byte of [`Node::encode`].
const NODE_FORMAT: u8 = 1;
/// u64 words of a node ([`Node::words`]).
pub const NODE_WORDS: usize = 8;
/// Bytes of a node record: the format byte and [`NODE_WORDS`] u64.
const NODE_BYTES: usize = 1 + NODE_WORDS * 8;

/// `stream-node-max-bytes` and `stream-node-max-entries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLimits {
    /// A node stops taking entries once its listpack would reach this size (0: no bound but
    /// listpack's own).
    pub bytes_max: u64,
    /// A node stops taking entries once it holds this many, deleted ones included (0: no
    /// bound).
    pub entries_max: u64,
}

impl Default for NodeLimits {
    /// Redis 7.0's defaults.
    fn default() -> Self {
        NodeLimits {
            bytes_max: 4096,
            entries_max: 100,
        }
    }
}

/// Bytes listpack spends after an element's encoding to store its length (`lpEncodeBacklen`).
fn backlen_bytes(encoded: u64) -> u64 {
    match encoded {
        0..=127 => 1,
        128..=16_382 => 2,
        16_383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Bytes of an integer element of a listpack.
fn int_bytes(v: i64) -> u64 {
    let encoded = match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32_768..=32_767 => 3,
        -8_388_608..=8_388_607 => 4,
        -2_147_483_648..=2_147_483_647 => 5,
        _ => 9,
    };
    encoded + backlen_bytes(encoded)
}

/// [`int_bytes`] of a count.
fn count_bytes(n: u64) -> u64 {
    int_bytes(i64::try_from(n).unwrap_or(i64::MAX))
}

/// Bytes of a string element: stored as an integer when it reads as one (Redis's
/// `lpStringToInt64`, the same rules as `string2ll`).
fn str_bytes(s: &[u8]) -> u64 {
    if let Some(v) = crate::num::parse_i64(s) {
        return int_bytes(v);
    }
    let len = s.len() as u64;
    let encoded = match len {
        0..=63 => 1 + len,
        64..=4095 => 2 + len,
        _ => 5 + len,
    };
    encoded + backlen_bytes(encoded)
}

/// Bytes of one entry (`pairs`: fields and values alternating) in a node: flags, the ID's two
/// differences from the node's first ID, the fields (unless `same_fields`), the values, and
/// the count of its elements.
fn entry_bytes(id_delta: (i64, i64), pairs: &[Bytes], same_fields: bool) -> u64 {
    let fields = pairs.len() as u64 / 2;
    let flags = if same_fields { FLAG_SAME_FIELDS } else { 0 };
    let mut bytes = int_bytes(flags) + int_bytes(id_delta.0) + int_bytes(id_delta.1);
    let mut elements = fields + 3;
    if same_fields {
        bytes += pairs
            .iter()
            .skip(1)
            .step_by(2)
            .map(|v| str_bytes(v))
            .sum::<u64>();
    } else {
        bytes += count_bytes(fields) + pairs.iter().map(|p| str_bytes(p)).sum::<u64>();
        elements += fields + 1;
    }
    bytes + count_bytes(elements)
}

/// One node: its first ID, its live and deleted entries, the size of Redis's listpack for it,
/// its last entry's ID (deleted or not) and a hash of its first entry's field names (whether a
/// new entry has the same fields decides whether Redis stores them again; two lists of names
/// with one 64-bit hash would only misjudge a node's size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Node {
    pub first: StreamId,
    pub live: u64,
    pub deleted: u64,
    pub listpack_bytes: u64,
    pub last: StreamId,
    pub fields_hash: u64,
}

/// The hash of the field names of `pairs` (fields and values alternating), in order.
fn fields_hash(pairs: &[Bytes]) -> u64 {
    // Each name hashed with the hash so far and its length as the seed (one-shot hashes of
    // short inputs: no hasher state to set up per XADD).
    pairs.iter().step_by(2).fold(0u64, |h, name| {
        xxhash_rust::xxh3::xxh3_64_with_seed(name, h.wrapping_add(name.len() as u64))
    })
}

impl Node {
    /// The node entry `id` starts: its listpack holds the master entry (the counts and the
    /// entry's field names) and the entry, whose fields are the master's.
    pub fn start(id: StreamId, pairs: &[Bytes]) -> Node {
        let fields = pairs.len() as u64 / 2;
        let master = count_bytes(1)
            + count_bytes(0)
            + count_bytes(fields)
            + pairs.iter().step_by(2).map(|f| str_bytes(f)).sum::<u64>()
            + int_bytes(0);
        Node {
            first: id,
            live: 1,
            deleted: 0,
            listpack_bytes: LISTPACK_EMPTY_BYTES + master + entry_bytes((0, 0), pairs, true),
            last: id,
            fields_hash: fields_hash(pairs),
        }
    }

    /// Whether Redis appends an entry of `pairs` to this node (the last one) rather than
    /// starting a new one: its listpack plus the entry's field and value bytes stay below the
    /// byte bound, and it holds fewer entries than the entry bound.
    pub fn takes(&self, pairs: &[Bytes], limits: NodeLimits) -> bool {
        let bytes_max = match limits.bytes_max {
            0 => LISTPACK_BYTES_MAX,
            n => n.min(LISTPACK_BYTES_MAX),
        };
        let added: u64 = pairs.iter().map(|p| p.len() as u64).sum();
        if self.listpack_bytes.saturating_add(added) >= bytes_max {
            return false;
        }
        limits.entries_max == 0 || self.live + self.deleted < limits.entries_max
    }

    /// Appends entry `id` (above every ID in the node).
    pub fn append(&mut self, id: StreamId, pairs: &[Bytes]) {
        self.set_counts(self.live + 1, self.deleted);
        let same_fields = fields_hash(pairs) == self.fields_hash;
        // Redis stores the differences as 64-bit integers: a sequence below the first's wraps.
        let delta = (
            id.ms.wrapping_sub(self.first.ms) as i64,
            id.seq.wrapping_sub(self.first.seq) as i64,
        );
        self.listpack_bytes += entry_bytes(delta, pairs, same_fields);
        self.last = id;
    }

    /// One live entry of the node is deleted (its flags change in place; the counts change).
    pub fn delete_one(&mut self) {
        self.set_counts(self.live.saturating_sub(1), self.deleted + 1);
    }

    fn set_counts(&mut self, live: u64, deleted: u64) {
        self.listpack_bytes = self.listpack_bytes + count_bytes(live) + count_bytes(deleted)
            - count_bytes(self.live)
            - count_bytes(self.deleted);
        self.live = live;
        self.deleted = deleted;
    }

    /// The node as [`NODE_WORDS`] words: first ID (ms, seq), live, deleted, listpack bytes,
    /// last ID (ms, seq), fields hash.
    pub fn words(&self) -> [u64; NODE_WORDS] {
        [
            self.first.ms,
            self.first.seq,
            self.live,
            self.deleted,
            self.listpack_bytes,
            self.last.ms,
            self.last.seq,
            self.fields_hash,
        ]
    }

    /// The node [`Node::words`] gave.
    pub fn from_words(w: [u64; NODE_WORDS]) -> Node {
        Node {
            first: StreamId::new(w[0], w[1]),
            live: w[2],
            deleted: w[3],
            listpack_bytes: w[4],
            last: StreamId::new(w[5], w[6]),
            fields_hash: w[7],
        }
    }

    /// The record: a format byte, then [`Node::words`] as u64 LE.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(NODE_BYTES);
        out.push(NODE_FORMAT);
        for w in self.words() {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out
    }

    /// Decodes the record of the node whose key names `first`; names damage (a record whose
    /// first ID is not its key's included).
    pub fn decode(first: StreamId, bytes: &[u8]) -> Result<Node> {
        let damaged = || Error::command("stored data is damaged: a stream node record");
        if bytes.len() != NODE_BYTES || bytes[0] != NODE_FORMAT {
            return Err(damaged());
        }
        let mut w = [0u64; NODE_WORDS];
        for (i, chunk) in bytes[1..].chunks_exact(8).enumerate() {
            w[i] = u64::from_le_bytes(chunk.try_into().map_err(|_| damaged())?);
        }
        let node = Node::from_words(w);
        if node.first != first {
            return Err(damaged());
        }
        Ok(node)
    }
}

/// The sub-key byte of node records (after the element prefix).
pub const NODE_TAG: u8 = b'N';

/// The engine key of the node whose first ID is `first`.
pub fn node_key(db: DbIndex, name: &[u8], version: u64, first: StreamId) -> Vec<u8> {
    crate::stream::id_key(db, name, version, NODE_TAG, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn listpack_element_sizes_follow_listpack_c() {
        // Integers: 7-bit unsigned, 13, 16, 24, 32 and 64-bit, each with a one-byte length.
        for (v, bytes) in [
            (0, 2),
            (127, 2),
            (128, 3),
            (-1, 3),
            (-4096, 3),
            (4096, 4),
            (-32_768, 4),
            (32_768, 5),
            (8_388_608, 6),
            (-2_147_483_648, 6),
            (2_147_483_648, 10),
            (i64::MIN, 10),
        ] {
            assert_eq!(int_bytes(v), bytes, "{v}");
        }
        // Strings: 6-bit, 12-bit and 32-bit lengths; the element's own length grows to two
        // bytes past 127 encoded bytes.
        assert_eq!(str_bytes(b""), 2);
        assert_eq!(str_bytes(b"abc"), 5);
        assert_eq!(str_bytes(&[b'x'; 63]), 65);
        assert_eq!(str_bytes(&[b'x'; 64]), 67);
        assert_eq!(str_bytes(&[b'x'; 125]), 128);
        assert_eq!(str_bytes(&[b'x'; 126]), 130);
        assert_eq!(str_bytes(&[b'x'; 4096]), 4103);
        // Strings that read as integers are integers; others (a leading zero, a plus) are not.
        assert_eq!(str_bytes(b"100"), 2);
        assert_eq!(str_bytes(b"-5"), 3);
        assert_eq!(str_bytes(b"007"), 5);
        assert_eq!(str_bytes(b"+5"), 4);
    }

    #[test]
    fn a_node_of_small_entries_matches_redis_listpack_sizes() {
        // Counted by hand from listpack.c and t_stream.c: header 6 + end 1; the master entry:
        // count 1, deleted 0, 1 field (2 bytes each), "a" (3), terminator 0 (2); the entry:
        // flags 2, ms 0, seq 0, value 1, lp-count 4 (2 each).
        let mut n = Node::start(StreamId::new(1, 1), &[b("a"), b("1")]);
        assert_eq!(n.listpack_bytes, 7 + 11 + 10);
        n.append(StreamId::new(1, 2), &[b("a"), b("2")]);
        assert_eq!(n.listpack_bytes, 28 + 10);
        // Other fields: flags 0, ms 2, seq -1 (3), 1 field, "b" (3), "x" (3), lp-count 6.
        n.append(StreamId::new(3, 0), &[b("b"), b("x")]);
        assert_eq!(n.listpack_bytes, 38 + 2 + 2 + 3 + 2 + 3 + 3 + 2);
        assert_eq!((n.live, n.last), (3, StreamId::new(3, 0)));
        // A sequence far below the first's: -9 takes 13 bits (3 bytes).
        let mut m = Node::start(StreamId::new(5, 9), &[b("a"), b("1")]);
        m.append(StreamId::new(6, 0), &[b("a"), b("1")]);
        assert_eq!(m.listpack_bytes, 28 + 2 + 2 + 3 + 2 + 2);
        // Deleting changes only the counts (here within the same sizes).
        n.delete_one();
        assert_eq!((n.live, n.deleted), (2, 1));
        assert_eq!(n.listpack_bytes, 55);
        // A count past 127 takes a byte more.
        let mut c = Node::start(StreamId::new(1, 0), &[b("a"), b("1")]);
        for i in 1..128 {
            c.append(StreamId::new(1, i), &[b("a"), b("1")]);
        }
        assert_eq!(c.live, 128);
        assert_eq!(c.listpack_bytes, 28 + 127 * 10 + 1);
    }

    #[test]
    fn a_node_takes_entries_until_either_bound() {
        let limits = NodeLimits {
            bytes_max: 4096,
            entries_max: 3,
        };
        let pair = [b("f"), b("v")];
        let mut n = Node::start(StreamId::new(1, 0), &pair);
        n.append(StreamId::new(2, 0), &pair);
        assert!(n.takes(&pair, limits));
        n.append(StreamId::new(3, 0), &pair);
        assert!(!n.takes(&pair, limits), "three entries");
        n.delete_one();
        assert!(!n.takes(&pair, limits), "deleted entries still count");
        let unbounded = NodeLimits {
            bytes_max: 4096,
            entries_max: 0,
        };
        assert!(n.takes(&pair, unbounded));
        // Bytes: the listpack so far plus the new entry's field and value bytes stay below
        // the bound.
        let fits = 4096 - 1 - 1 - n.listpack_bytes as usize;
        assert!(n.takes(&[b("f"), Bytes::from(vec![b'v'; fits])], unbounded));
        assert!(!n.takes(&[b("f"), Bytes::from(vec![b'v'; fits + 1])], unbounded));
    }

    #[test]
    fn node_records_round_trip_and_damage_is_named() {
        let mut n = Node::start(StreamId::new(7, 1), &[b("a"), b("1"), b("bb"), b("2")]);
        n.append(StreamId::new(9, 0), &[b("x"), b("y")]);
        n.delete_one();
        let bytes = n.encode();
        assert_eq!(Node::decode(n.first, &bytes).unwrap(), n);
        assert_eq!(Node::from_words(n.words()), n);
        assert!(Node::decode(n.first, &bytes[..bytes.len() - 1]).is_err());
        assert!(Node::decode(StreamId::new(7, 2), &bytes).is_err());
        let mut other = bytes.clone();
        other[0] = 9;
        assert!(Node::decode(n.first, &other).is_err());
        let k = node_key(0, b"s", 3, n.first);
        assert_eq!(k, crate::stream::id_key(0, b"s", 3, b'N', n.first));
    }

    #[test]
    fn same_fields_are_known_by_their_names_in_order() {
        let mut n = Node::start(StreamId::new(1, 0), &[b("a"), b("1"), b("b"), b("2")]);
        let before = n.listpack_bytes;
        n.append(StreamId::new(1, 1), &[b("a"), b("x"), b("b"), b("y")]);
        let same = n.listpack_bytes - before;
        n.append(StreamId::new(1, 2), &[b("b"), b("x"), b("a"), b("y")]);
        let swapped = n.listpack_bytes - before - same;
        // Values only (flags, deltas, 2 values, lp-count) against names too (and their count).
        assert_eq!(same, 2 + 2 + 2 + 3 + 3 + 2);
        assert_eq!(swapped, same + 2 + 3 + 3);
        // "ab" + "" is not "a" + "b".
        assert_ne!(
            fields_hash(&[b("ab"), b("1"), b(""), b("2")]),
            fields_hash(&[b("a"), b("1"), b("b"), b("2")])
        );
    }
}
