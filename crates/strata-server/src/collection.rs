//! Collections on the LSM (hashes and sets; sorted sets and lists will take the same shape): one
//! metadata record per Redis key and one engine key per element, as Kvrocks lays them out on
//! RocksDB. `docs/format.md` gives every byte.
//!
//! - The metadata is the key's record, `'k' db name` (the same engine key a string has, so a
//!   name holds one or the other, and SET over a hash simply replaces it): record kind 1 (hash)
//!   or 2 (set), the expiry time, then `version` (u64 LE) and `count` (u64 LE, the number of
//!   elements).
//! - An element (hash field, set member) is `'m' db len(u32 BE) name version(u64 BE)
//!   position(u64 BE) element` -> value (empty for a set member), `position` being the
//!   element's xxh3-64. All elements of one incarnation of a key are one prefix, so HGETALL is
//!   one prefix scan, in hash order (Redis promises no order either).
//! - [`ServerRouter`] routes an element key by its Redis key's record key, so a key's record and
//!   all its elements live in one engine partition: HSET reads and writes them in one atomic
//!   [`KvBackend::update_group`], and the compaction filter reads the record beside them.
//! - Deleting, overwriting or expiring a collection touches the record only. A new incarnation
//!   gets a new `version`, so elements of the old one are invisible at once; compaction drops them
//!   ([`element_is_dead`]) once the record that disowns them is settled (flushed and
//!   unchanged since), never a scan at delete time.
//!
//! Versions come from [`Versions`]: the clock in ms shifted left 16 bits, then counting up,
//! so they grow across restarts (a clock that steps back further than the uptime could reuse a
//! version whose fields have not yet been compacted away; Kvrocks takes the same risk).

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use crate::backend::{prefix_end, BatchOp, KvBackend};
use crate::error::{Error, Result};
use crate::keyspace::{now_ms, string_key, DbIndex, KeyType, Record};

/// First byte of an element's engine key.
pub const ELEMENT_PREFIX: u8 = b'm';

/// The key router id of stores made before the expiry index had a partition of its own
/// ([`ServerRouter::SHARED`]): "SR" + rule 1.
pub const SERVER_ROUTER_ID: u32 = 0x5352_0001;
/// The key router id of stores that keep the expiry index in their last partition
/// ([`ServerRouter::EXPIRY_APART`]): "SR" + rule 2.
pub const SERVER_ROUTER_ID_EXPIRY_APART: u32 = 0x5352_0002;

/// An expired collection's elements are dropped by compaction only this long after its
/// expiry time: a command that read the record live just before the time may still be
/// writing it back (EXPIRE extending it), and must not find its elements gone.
pub const EXPIRED_ELEMENTS_GRACE_MS: u64 = 60_000;

/// Routes the server's keys: an element by its Redis key's record key (`'k' db name`), every
/// other key by itself, both with xxh3-64 as the engine's default does, so records, documents
/// and everything written before collections existed stay where they were.
///
/// Rule 2 ([`ServerRouter::EXPIRY_APART`], every store made since) also keeps the expiry index
/// (`0xFF 'e' ...`) in the last partition and spreads every other key over the others. An
/// index entry is a key of its own per key with an expiry time; among the data it doubled the
/// entries of the tables every GET and SET searches (a GET of keys without expiry times on a
/// store also holding a million keys with them was 0.86x as fast, `bench/ttl-overhead.sh`).
/// The index is a hint beside the record: some commands write the entry in the record's batch
/// (a batch across partitions, as it mostly was when entries routed by their own hash), others
/// just before the record's update, and active expiry checks each entry against its key, so a
/// stale entry or one a crash lost (compaction reports expired records) does no harm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerRouter {
    expiry_apart: bool,
}

impl ServerRouter {
    /// Rule 1: every key not an element routes by itself, the expiry index among the data.
    pub const SHARED: ServerRouter = ServerRouter {
        expiry_apart: false,
    };
    /// Rule 2: the expiry index in the last partition, everything else in the others.
    pub const EXPIRY_APART: ServerRouter = ServerRouter { expiry_apart: true };

    /// The router of a store whose `STRATA` file records `router_id` (`None`: a new store).
    /// A store routed by the engine's default rule (the CLI's before the server's keyspace
    /// was shared) adopts rule 1, which places its keys where they are.
    pub fn for_store(router_id: Option<u32>) -> ServerRouter {
        router_id.map_or(ServerRouter::EXPIRY_APART, |id| {
            ServerRouter::from_id(id).unwrap_or(ServerRouter::SHARED)
        })
    }

    /// The rule whose [`strata::KeyRouter::id`] is `id`, if it is one of the server's.
    pub fn from_id(id: u32) -> Option<ServerRouter> {
        match id {
            SERVER_ROUTER_ID => Some(ServerRouter::SHARED),
            SERVER_ROUTER_ID_EXPIRY_APART => Some(ServerRouter::EXPIRY_APART),
            _ => None,
        }
    }

    /// Whether this rule keeps a partition for the expiry index (the store has one more
    /// partition than the data gets).
    pub fn keeps_expiry_apart(self) -> bool {
        self.expiry_apart
    }
}

/// Names up to this long are hashed from a copy on the stack in one call; longer ones
/// through xxh3's streaming state (about 600 bytes to set up, and a digest that costs more
/// than hashing a short name: 2.5 % of the CPU of pipelined LPUSHes, one route per write).
const ROUTE_NAME_ON_STACK_BYTES_MAX: usize = 62;

/// xxh3 of `'k' db name` (a record key's bytes) without building the key on the heap: the
/// same hash either way, so placement never depends on the name's length.
fn route_of_name(db: u8, name: &[u8]) -> u64 {
    if name.len() <= ROUTE_NAME_ON_STACK_BYTES_MAX {
        let mut key = [0u8; ROUTE_NAME_ON_STACK_BYTES_MAX + 2];
        key[0] = crate::keyspace::KEY_PREFIX;
        key[1] = db;
        key[2..2 + name.len()].copy_from_slice(name);
        return xxhash_rust::xxh3::xxh3_64(&key[..2 + name.len()]);
    }
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&[crate::keyspace::KEY_PREFIX, db]);
    h.update(name);
    h.digest()
}

impl strata::KeyRouter for ServerRouter {
    fn id(&self) -> u32 {
        if self.expiry_apart {
            SERVER_ROUTER_ID_EXPIRY_APART
        } else {
            SERVER_ROUTER_ID
        }
    }

    fn route(&self, key: &[u8]) -> u64 {
        match parse_element_key(key) {
            Some(e) => route_of_name(e.db, e.name),
            None => xxhash_rust::xxh3::xxh3_64(key),
        }
    }

    fn partition(&self, key: &[u8], partitions: usize) -> usize {
        if !self.expiry_apart || partitions < 2 {
            return (self.route(key) % partitions as u64) as usize;
        }
        if crate::keyspace::is_expiry_index_key(key) {
            partitions - 1
        } else {
            (self.route(key) % (partitions as u64 - 1)) as usize
        }
    }

    fn keeps_default_placement(&self) -> bool {
        !self.expiry_apart
    }
}

/// A collection's metadata (the payload of its record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// The incarnation whose elements are live.
    pub version: u64,
    /// Number of elements (fields, members).
    pub count: u64,
    /// No live element sits below it (see [`Floor`]).
    pub floor: Floor,
    /// No live score entry of a sorted set sits above it (see [`Ceiling`]).
    pub ceiling: Ceiling,
}

/// Bytes of an encoded [`Meta`] without a floor.
const META_BYTES: usize = 16;

/// Bit of an encoded count saying a ceiling follows the floor (no count reaches it).
const CEILING_FLAG: u64 = 1 << 63;

/// Bit of an encoded count saying a hash's field order follows the floor ([`FieldOrder`];
/// keyspace format 8). Never with [`CEILING_FLAG`] (a ceiling is a sorted set's).
const ORDER_FLAG: u64 = 1 << 62;

impl Meta {
    /// A new incarnation's metadata: no floor, no ceiling.
    pub fn new(version: u64, count: u64) -> Meta {
        Meta {
            version,
            count,
            floor: Floor::default(),
            ceiling: Ceiling::default(),
        }
    }

    /// The record payload: version, count, then the floor's bytes (none for an empty floor,
    /// so a collection that never popped encodes as before floors existed). With a ceiling
    /// (a sorted set ZPOPMAX drained), the count carries [`CEILING_FLAG`] and the floor's
    /// length (one byte), the floor and the ceiling's bytes follow.
    pub fn encode(&self) -> Vec<u8> {
        let (floor, ceiling) = (self.floor.as_bytes(), self.ceiling.as_bytes());
        let mut out = Vec::with_capacity(META_BYTES + 1 + floor.len() + ceiling.len());
        out.extend_from_slice(&self.version.to_le_bytes());
        if ceiling.is_empty() {
            out.extend_from_slice(&self.count.to_le_bytes());
            out.extend_from_slice(floor);
        } else {
            out.extend_from_slice(&(self.count | CEILING_FLAG).to_le_bytes());
            // A floor holds at most FLOOR_BYTES_MAX (40) bytes.
            out.push(floor.len() as u8);
            out.extend_from_slice(floor);
            out.extend_from_slice(ceiling);
        }
        out
    }

    /// The record payload of a hash that keeps its fields' order: as [`Meta::encode`], with
    /// [`ORDER_FLAG`] in the count, the floor's length (one byte) and the floor, then each
    /// listed field's tag (u32 LE, [`order_tag`]) in the order the fields were added.
    pub fn encode_ordered(&self, order: &[u32]) -> Vec<u8> {
        debug_assert!(self.ceiling.as_bytes().is_empty(), "a hash has no ceiling");
        let floor = self.floor.as_bytes();
        let mut out = Vec::with_capacity(META_BYTES + 1 + floor.len() + 4 * order.len());
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.count | ORDER_FLAG).to_le_bytes());
        // A floor holds at most FLOOR_BYTES_MAX (40) bytes.
        out.push(floor.len() as u8);
        out.extend_from_slice(floor);
        for p in order {
            out.extend_from_slice(&p.to_le_bytes());
        }
        out
    }

    /// Decodes a record payload; names damage.
    pub fn decode(payload: &[u8]) -> Result<Meta> {
        Meta::decode_parts(payload).map(|(meta, _)| meta)
    }

    /// Decodes a record payload and says where its field order is (the bytes after the floor,
    /// `None` when the record keeps none); names damage.
    fn decode_parts(payload: &[u8]) -> Result<(Meta, Option<std::ops::Range<usize>>)> {
        let damaged =
            || Error::command("stored data is damaged: a collection record of the wrong length");
        let (v, rest) = payload.split_first_chunk::<8>().ok_or_else(damaged)?;
        let (c, rest) = rest.split_first_chunk::<8>().ok_or_else(damaged)?;
        let count = u64::from_le_bytes(*c);
        let mut order = None;
        let (floor, ceiling) = match count & (CEILING_FLAG | ORDER_FLAG) {
            0 => (rest, &[][..]),
            CEILING_FLAG => {
                let (len, rest) = rest.split_first().ok_or_else(damaged)?;
                let floor = rest.get(..usize::from(*len)).ok_or_else(damaged)?;
                let ceiling = &rest[floor.len()..];
                if ceiling.is_empty() {
                    return Err(damaged());
                }
                (floor, ceiling)
            }
            ORDER_FLAG => {
                let (len, rest) = rest.split_first().ok_or_else(damaged)?;
                let floor = rest.get(..usize::from(*len)).ok_or_else(damaged)?;
                let start = payload.len() - rest.len() + floor.len();
                if (payload.len() - start) % 4 != 0 {
                    return Err(damaged());
                }
                order = Some(start..payload.len());
                (floor, &[][..])
            }
            _ => return Err(damaged()),
        };
        if floor.len() > FLOOR_BYTES_MAX || ceiling.len() > FLOOR_BYTES_MAX {
            return Err(damaged());
        }
        let meta = Meta {
            version: u64::from_le_bytes(*v),
            count: count & !(CEILING_FLAG | ORDER_FLAG),
            floor: Floor::of(floor),
            ceiling: Ceiling(Floor::of(ceiling)),
        };
        Ok((meta, order))
    }
}

/// Most fields whose order a hash keeps ([`FieldOrder`]): past it (a `hash-max-listpack-entries`
/// raised far above Redis's 128) the record stops listing them, so that adding a field does not
/// rewrite a record of ever more kilobytes; fields then come in position order.
pub const ORDER_FIELDS_MAX: usize = 1024;

/// A hash's fields in the order they were added, as their tags ([`order_tag`]): kept
/// in its record while the hash is in Redis's compact encoding, a listpack, which Redis answers
/// in that order (HGETALL, HKEYS, HVALS, HSCAN, HRANDFIELD; a listpack updates a field in
/// place and appends a new one). Fields the order does not list were added before the store
/// kept orders (keyspace format 7), so before every listed one. A hash that outgrew the compact
/// encoding (Redis: a hash table, no order to match) keeps none.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldOrder(Bytes);

impl FieldOrder {
    /// The order kept in a hash's record payload (`None`: it keeps none); names damage.
    pub fn of_payload(payload: &Bytes) -> Result<Option<FieldOrder>> {
        let (_, order) = Meta::decode_parts(payload)?;
        Ok(order.map(|r| FieldOrder(payload.slice(r))))
    }

    /// How many fields it lists.
    pub fn len(&self) -> usize {
        self.0.len() / 4
    }

    /// Whether it lists no field.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The listed tags, first added first.
    pub fn tags(&self) -> Vec<u32> {
        self.0
            .chunks_exact(4)
            .filter_map(|c| <[u8; 4]>::try_from(c).ok().map(u32::from_le_bytes))
            .collect()
    }

    /// Puts `items` (each naming its field through `field`) in this order: unlisted fields first,
    /// keeping their order among themselves, then the listed ones as added (two fields of one
    /// tag, a 32-bit hash collision, about one hash in a million of 128 fields, keep their order
    /// among themselves: position order, where Redis's would be the order added).
    pub fn arrange<T>(&self, items: &mut [T], field: impl Fn(&T) -> &[u8]) {
        let mut ranks: Vec<(u32, usize)> = self
            .tags()
            .into_iter()
            .enumerate()
            .map(|(rank, p)| (p, rank + 1))
            .collect();
        // By tag, the first listing of a tag first: `rank_of` finds that one.
        ranks.sort_unstable();
        let rank_of = |f: &[u8]| {
            let p = order_tag(f);
            let i = ranks.partition_point(|&(q, _)| q < p);
            ranks
                .get(i)
                .filter(|&&(q, _)| q == p)
                .map_or(0, |&(_, r)| r)
        };
        items.sort_by_cached_key(|item| rank_of(field(item)));
    }
}

/// Most bytes a [`Floor`] keeps: a set's position (8), or a sorted set's `'S'`, score (8) and
/// the first 31 bytes of the member.
pub const FLOOR_BYTES_MAX: usize = 40;

/// A lower bound on a collection's live elements, kept in its record so that draining pops
/// do not walk the tombstones of the elements popped before them (an LSM keeps a deleted
/// element's tombstone until compaction reaches the bottom; a scan from the start would step
/// over every one): every live element's key suffix after the version (a set's or hash's
/// `position element`, a sorted set's score entry `'S' score member`) is at or above it.
/// SPOP and ZPOPMIN raise it past what they pop; adding an element below it lowers it to
/// that element; a new incarnation has none (empty: below everything). A prefix of a key is
/// at or below the key, so truncating to [`FLOOR_BYTES_MAX`] keeps the bound true.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Floor {
    len: u8,
    bytes: [u8; FLOOR_BYTES_MAX],
}

impl Default for Floor {
    /// No bound.
    fn default() -> Self {
        Floor::of(&[])
    }
}

impl Floor {
    /// The floor at `suffix` (its first [`FLOOR_BYTES_MAX`] bytes).
    pub fn of(suffix: &[u8]) -> Floor {
        let n = suffix.len().min(FLOOR_BYTES_MAX);
        let mut bytes = [0; FLOOR_BYTES_MAX];
        bytes[..n].copy_from_slice(&suffix[..n]);
        // n <= FLOOR_BYTES_MAX < 256.
        Floor {
            len: n as u8,
            bytes,
        }
    }

    /// The bound's bytes (empty: no bound).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// Keeps the bound true when an element with key suffix `suffix` is added.
    pub fn lower_to(&mut self, suffix: &[u8]) {
        if suffix < self.as_bytes() {
            *self = Floor::of(suffix);
        }
    }

    /// Raises the bound to `suffix`, which the caller knows no live element is below.
    pub fn raise_to(&mut self, suffix: &[u8]) {
        if suffix > self.as_bytes() {
            *self = Floor::of(suffix);
        }
    }
}

/// An upper bound on a sorted set's live score entries, [`Floor`]'s mirror, kept in its record
/// so that draining ZPOPMAX does not walk the tombstones of the members popped before: every
/// live score entry's suffix (`'S' score member`) starts with its bytes or sorts before them
/// (is below their successor), so truncating to [`FLOOR_BYTES_MAX`] keeps the bound true.
/// ZPOPMAX sets it to the lowest member it popped (none is left above); adding an entry it does
/// not cover raises it to that entry; empty: no bound (a new incarnation, or a set never
/// drained from the top).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ceiling(Floor);

impl Ceiling {
    /// The bound's bytes (empty: no bound).
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// Whether an entry of suffix `suffix` is within the bound.
    pub fn covers(&self, suffix: &[u8]) -> bool {
        let c = self.as_bytes();
        c.is_empty() || suffix.starts_with(c) || suffix < c
    }

    /// Keeps the bound true when an entry with suffix `suffix` is added.
    pub fn raise_to(&mut self, suffix: &[u8]) {
        if !self.covers(suffix) {
            self.0 = Floor::of(suffix);
        }
    }

    /// Sets the bound at `suffix`, the highest entry the caller knows may be live.
    pub fn set_to(&mut self, suffix: &[u8]) {
        self.0 = Floor::of(suffix);
    }
}

/// A list's metadata: like [`Meta`], plus the position of its first element. Elements sit at
/// `head .. head + count`; LPUSH takes `head - 1`, RPUSH `head + count`. A new list starts at
/// [`LIST_HEAD_START`], the middle of the u64 range, so both ends have room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListMeta {
    /// The incarnation whose elements are live.
    pub version: u64,
    /// Number of elements.
    pub count: u64,
    /// Position of the first element.
    pub head: u64,
}

/// Where a new list's first element goes.
pub const LIST_HEAD_START: u64 = 1 << 63;

/// Bytes of an encoded [`ListMeta`].
const LIST_META_BYTES: usize = 24;

impl ListMeta {
    /// The record payload.
    pub fn encode(&self) -> [u8; LIST_META_BYTES] {
        let mut out = [0; LIST_META_BYTES];
        out[..8].copy_from_slice(&self.version.to_le_bytes());
        out[8..16].copy_from_slice(&self.count.to_le_bytes());
        out[16..].copy_from_slice(&self.head.to_le_bytes());
        out
    }

    /// Decodes a record payload; names damage.
    pub fn decode(payload: &[u8]) -> Result<ListMeta> {
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_le_bytes(payload.get(i..i + 8)?.try_into().ok()?))
        };
        match (payload.len(), word(0), word(8), word(16)) {
            (LIST_META_BYTES, Some(version), Some(count), Some(head)) => Ok(ListMeta {
                version,
                count,
                head,
            }),
            _ => Err(Error::command(
                "stored data is damaged: a list record of the wrong length",
            )),
        }
    }
}

/// The engine key of the list element at `position` of incarnation `version` of `name`:
/// the element prefix and the position (u64 big-endian), so a list is in order.
pub fn list_key(db: DbIndex, name: &[u8], version: u64, position: u64) -> Vec<u8> {
    let mut k = element_prefix(db, name, version);
    k.extend_from_slice(&position.to_be_bytes());
    k
}

/// The values at positions `from..to` of incarnation `version` of `name`, in order (one scan
/// of the key's partition).
pub fn list_range(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    version: u64,
    from: u64,
    to: u64,
) -> Result<Vec<Bytes>> {
    // `to - from` is exact unless positions were popped or the range runs past the end; the
    // bound keeps a huge range from reserving more than it may ever fill up front.
    let mut out = Vec::with_capacity(
        usize::try_from(to.saturating_sub(from))
            .unwrap_or(usize::MAX)
            .min(1024),
    );
    list_visit(b, db, name, version, from, to, &mut |v| {
        out.push(Bytes::copy_from_slice(v))
    })?;
    Ok(out)
}

/// Calls `visit` on the values at positions `from..to` of incarnation `version` of `name`, in
/// order (one scan of the key's partition), without a copy of its own of each.
pub fn list_visit(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    version: u64,
    from: u64,
    to: u64,
    visit: &mut dyn FnMut(&[u8]),
) -> Result<()> {
    if from >= to {
        return Ok(());
    }
    b.scan_group(
        &string_key(db, name),
        std::ops::Bound::Included(list_key(db, name, version, from)),
        std::ops::Bound::Excluded(list_key(db, name, version, to)),
        &mut |_, v| {
            visit(v);
            true
        },
    )
}

/// A sorted set's member entry: `prefix 'M' member` -> the score (f64 bits, little-endian).
pub fn zset_member_key(db: DbIndex, name: &[u8], version: u64, member: &[u8]) -> Vec<u8> {
    let mut k = element_prefix(db, name, version);
    k.push(b'M');
    k.extend_from_slice(member);
    k
}

/// A sorted set's score entry: `prefix 'S' score member` -> empty, `score` encoded so that
/// byte order is numeric order ([`score_order_bytes`]): the set in ZRANGE order.
pub fn zset_score_key(
    db: DbIndex,
    name: &[u8],
    version: u64,
    score: f64,
    member: &[u8],
) -> Vec<u8> {
    let mut k = zset_score_prefix(db, name, version);
    k.extend_from_slice(&score_order_bytes(score));
    k.extend_from_slice(member);
    k
}

/// The two writes that store member `member` of incarnation `version` of the sorted set `name`
/// with `score`: its member entry and its score entry (every writer of sorted-set members goes
/// through here, so the layout has one home).
pub fn zset_put_ops(
    db: DbIndex,
    name: &[u8],
    version: u64,
    member: &[u8],
    score: f64,
) -> [BatchOp; 2] {
    [
        BatchOp::Put(
            zset_member_key(db, name, version, member),
            score.to_le_bytes().to_vec(),
        ),
        BatchOp::Put(
            zset_score_key(db, name, version, score, member),
            zset_score_value(score),
        ),
    ]
}

/// A sorted set score entry's value: empty, but for a score of -0, its 8 bytes (the entry's
/// key orders -0 as 0, as Redis does, so the sign is kept here; Redis replies `-0`).
fn zset_score_value(score: f64) -> Vec<u8> {
    if score == 0.0 && score.is_sign_negative() {
        score.to_le_bytes().to_vec()
    } else {
        Vec::new()
    }
}

/// The prefix of a sorted set's score entries.
pub fn zset_score_prefix(db: DbIndex, name: &[u8], version: u64) -> Vec<u8> {
    let mut k = element_prefix(db, name, version);
    k.push(b'S');
    k
}

/// A score as 8 bytes whose byte order is the scores' numeric order (-0 sorts as 0, so ties
/// between them order by member as in Redis).
pub fn score_order_bytes(score: f64) -> [u8; 8] {
    let score = if score == 0.0 { 0.0 } else { score };
    let bits = score.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    };
    ordered.to_be_bytes()
}

/// The score of [`score_order_bytes`].
pub fn score_from_order_bytes(b: [u8; 8]) -> f64 {
    let ordered = u64::from_be_bytes(b);
    let bits = if ordered >> 63 == 1 {
        ordered & !(1 << 63)
    } else {
        !ordered
    };
    f64::from_bits(bits)
}

/// Every (member, score) of the sorted set `name` (metadata `meta`), in score order (ties by
/// member), read in one scan of its partition from its floor.
pub fn zset_entries(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &Meta,
) -> Result<Vec<(Bytes, f64)>> {
    zset_first_entries(b, db, name, meta, usize::MAX)
}

/// The first `limit` (member, score) of the sorted set in score order: a scan from its floor
/// that stops there (ZPOPMIN reads what it pops, not the whole set, nor what it popped before).
pub fn zset_first_entries(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &Meta,
    limit: usize,
) -> Result<Vec<(Bytes, f64)>> {
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    visit_zset_from(b, db, name, meta, None, &mut |member, score| {
        out.push((Bytes::copy_from_slice(member), score));
        out.len() < limit
    })?;
    Ok(out)
}

/// The first score entry key of the sorted set (metadata `meta`) that may be live: its floor
/// (what pops left below it is gone). The score prefix `prefix` ends in 'S', the floor's first
/// byte: the floor goes after the rest.
fn zset_floor_key(prefix: &[u8], meta: &Meta) -> Vec<u8> {
    match meta.floor.as_bytes().split_first() {
        Some((b'S', rest)) => [prefix, rest].concat(),
        _ => prefix.to_vec(),
    }
}

/// The bound above every score entry of the sorted set (metadata `meta`) that may be live: the
/// end of its ceiling's keys (what ZPOPMAX left above it is gone), or of all its score entries.
fn zset_top_bound(prefix: &[u8], meta: &Meta) -> Bound<Vec<u8>> {
    match meta.ceiling.as_bytes().split_first() {
        Some((b'S', rest)) => prefix_end(&[prefix, rest].concat()),
        _ => prefix_end(prefix),
    }
}

/// The lower of two upper bounds.
fn lower_upper(a: Bound<Vec<u8>>, b: Bound<Vec<u8>>) -> Bound<Vec<u8>> {
    let key = |x: &Bound<Vec<u8>>| match x {
        Bound::Included(k) | Bound::Excluded(k) => Some(k.clone()),
        Bound::Unbounded => None,
    };
    match (key(&a), key(&b)) {
        (None, _) => b,
        (_, None) => a,
        (Some(x), Some(y)) if x < y => a,
        (Some(x), Some(y)) if y < x => b,
        // Equal keys: the excluding bound is the lower.
        _ => match a {
            Bound::Excluded(_) => a,
            _ => b,
        },
    }
}

/// Visits the (member, score) of the sorted set `name` (metadata `meta`) in score order (ties
/// by member) from the first whose score is at least `from` (`None`: from the first member),
/// until `visit` returns false: one scan from the later of that score's entries and the set's
/// floor (ZRANGE by rank or by score reads what it answers and what it skips, no more).
pub fn visit_zset_from(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &Meta,
    from: Option<f64>,
    visit: &mut dyn FnMut(&[u8], f64) -> bool,
) -> Result<()> {
    let prefix = zset_score_prefix(db, name, meta.version);
    let lower = match from {
        Some(score) => Bound::Included([&prefix[..], &score_order_bytes(score)].concat()),
        None => Bound::Unbounded,
    };
    scan_scores(b, db, name, meta, (lower, Bound::Unbounded), false, visit)
}

/// Visits the (member, score) of the sorted set `name` (metadata `meta`) in descending score
/// order (ties by member, descending) from the last whose score is at most `to` (`None`: from
/// the highest), until `visit` returns false: one scan of its partition from the top down
/// (ZREVRANGE, ZPOPMAX and ranks near the end read what they answer and skip, not what lies
/// below).
pub fn visit_zset_rev_from(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &Meta,
    to: Option<f64>,
    visit: &mut dyn FnMut(&[u8], f64) -> bool,
) -> Result<()> {
    let prefix = zset_score_prefix(db, name, meta.version);
    let upper = match to {
        Some(score) => prefix_end(&[&prefix[..], &score_order_bytes(score)].concat()),
        None => Bound::Unbounded,
    };
    scan_scores(b, db, name, meta, (Bound::Unbounded, upper), true, visit)
}

/// A position in a sorted set's score order: (score, member).
pub type ZsetPosition<'m> = (f64, &'m [u8]);

/// Visits the (member, score) of the sorted set `name` (metadata `meta`) between two bounds in
/// its score order (each a [`ZsetPosition`]), ascending or (`rev`) descending, until `visit`
/// returns false: one scan of its partition between them (lex ranges of a set whose members
/// share one score).
pub fn visit_zset_between(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &Meta,
    (lower, upper): (Bound<ZsetPosition<'_>>, Bound<ZsetPosition<'_>>),
    rev: bool,
    visit: &mut dyn FnMut(&[u8], f64) -> bool,
) -> Result<()> {
    let key = |(score, member): (f64, &[u8])| zset_score_key(db, name, meta.version, score, member);
    let bounds = (lower.map(key), upper.map(key));
    scan_scores(b, db, name, meta, bounds, rev, visit)
}

/// The one scan of a sorted set's score entries between engine-key bounds (`Unbounded`: the
/// set's own ends), kept within its floor and ceiling (nothing live lies beyond them), in
/// either order.
fn scan_scores(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &Meta,
    (lower, upper): (Bound<Vec<u8>>, Bound<Vec<u8>>),
    rev: bool,
    visit: &mut dyn FnMut(&[u8], f64) -> bool,
) -> Result<()> {
    let prefix = zset_score_prefix(db, name, meta.version);
    let skip = prefix.len();
    let floor = zset_floor_key(&prefix, meta);
    let lower = match lower {
        Bound::Included(k) => Bound::Included(k.max(floor)),
        Bound::Excluded(k) if k >= floor => Bound::Excluded(k),
        _ => Bound::Included(floor),
    };
    let upper = lower_upper(upper, zset_top_bound(&prefix, meta));
    let mut each = |k: &[u8], v: &[u8]| match score_entry(k, v, skip) {
        Some((member, score)) => visit(member, score),
        None => true,
    };
    let route = string_key(db, name);
    if rev {
        b.scan_group_rev(&route, lower, upper, &mut each)
    } else {
        b.scan_group(&route, lower, upper, &mut each)
    }
}

/// The (member, score) of a score entry (key, value) whose key has `skip` bytes of prefix.
fn score_entry<'k>(k: &'k [u8], v: &[u8], skip: usize) -> Option<(&'k [u8], f64)> {
    let (order, member) = k.get(skip..)?.split_first_chunk::<8>()?;
    // The exact score is the entry's value (8 bytes); the key's order bytes otherwise.
    let score = match <[u8; 8]>::try_from(v) {
        Ok(exact) => f64::from_le_bytes(exact),
        Err(_) => score_from_order_bytes(*order),
    };
    Some((member, score))
}

/// How many members of the sorted set `name` (metadata `meta`) come before (`before`) or after
/// member `member` of score `score` in score order, if at most `limit`: counted in one scan of
/// the score entries on that side (from the floor, or from the member to the end) that stops
/// past `limit`, nothing copied (`None`: more than `limit`). ZRANK and ZREVRANK count both
/// sides up to a few first, so a member near either end is placed at once.
pub fn zset_count_beside(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &Meta,
    (score, member): (f64, &[u8]),
    before: bool,
    limit: u64,
) -> Result<Option<u64>> {
    let at = Bound::Excluded((score, member));
    let bounds = if before {
        (Bound::Unbounded, at)
    } else {
        (at, Bound::Unbounded)
    };
    let mut counted = 0u64;
    visit_zset_between(b, db, name, meta, bounds, false, &mut |_, _| {
        counted += 1;
        counted <= limit
    })?;
    Ok((counted <= limit).then_some(counted))
}

/// Visits the (member, score) of the sorted set `name` (metadata `meta`) whose scores are at
/// least `min` and below `max`, in score order (ties by member), until `visit` returns false:
/// one scan of its partition from `min` (GEO's box searches).
pub fn visit_zset_scores(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &Meta,
    min: f64,
    max: f64,
    visit: &mut dyn FnMut(&[u8], f64) -> bool,
) -> Result<()> {
    visit_zset_from(b, db, name, meta, Some(min), &mut |member, score| {
        score < max && visit(member, score)
    })
}

/// A sorted set score entry's key suffix after the version (`'S' score member`): what its
/// [`Floor`] bounds.
pub fn zset_score_suffix(score: f64, member: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(9 + member.len());
    s.push(b'S');
    s.extend_from_slice(&score_order_bytes(score));
    s.extend_from_slice(member);
    s
}

/// A hash's or set's element key suffix after the version (`position element`): what its
/// [`Floor`] bounds.
pub fn element_suffix(sub: &[u8]) -> Vec<u8> {
    [&element_position(sub)[..], sub].concat()
}

/// Visits a sorted set's member entries (member, score bytes) in member order after member
/// `after` (exclusive; `None`: from the first) until `visit` returns false: ZSCAN's pages.
pub fn visit_zset_members_from(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    version: u64,
    after: Option<&[u8]>,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> Result<()> {
    let prefix = zset_member_key(db, name, version, b"");
    let skip = prefix.len();
    let lower = match after {
        Some(m) => std::ops::Bound::Excluded(zset_member_key(db, name, version, m)),
        None => std::ops::Bound::Included(prefix.clone()),
    };
    b.scan_group(
        &string_key(db, name),
        lower,
        prefix_end(&prefix),
        &mut |k, v| visit(k.get(skip..).unwrap_or_default(), v),
    )
}

/// Hands out element versions (see the module comment).
#[derive(Debug)]
pub struct Versions(AtomicU64);

impl Default for Versions {
    fn default() -> Self {
        Versions(AtomicU64::new(now_ms() << 16))
    }
}

impl Versions {
    /// A version no earlier call (in this process or an earlier one) returned.
    pub fn next(&self) -> u64 {
        let floor = now_ms() << 16;
        let prev = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                Some(v.max(floor).saturating_add(1))
            })
            .unwrap_or(floor);
        prev.max(floor).saturating_add(1)
    }
}

/// The parts of an element key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElementKey<'a> {
    /// Physical database.
    pub db: DbIndex,
    /// The Redis key.
    pub name: &'a [u8],
    /// The incarnation.
    pub version: u64,
    /// What follows the version: a hash field's or set member's position and bytes, a list
    /// index, a sorted set's member or score entry.
    pub sub: &'a [u8],
}

/// The prefix of every element of incarnation `version` of `name` in `db`.
pub fn element_prefix(db: DbIndex, name: &[u8], version: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(name.len() + 14 + 16);
    k.push(ELEMENT_PREFIX);
    k.push(db);
    // Names are bounded by the engine's key limit (64 KiB) long before u32.
    k.extend_from_slice(&u32::try_from(name.len()).unwrap_or(u32::MAX).to_be_bytes());
    k.extend_from_slice(name);
    k.extend_from_slice(&version.to_be_bytes());
    k
}

/// Where element `sub` sits among its collection's elements: `xxh3_64(sub)`, big-endian, so
/// elements are in hash order. A random position then lands on a uniformly random element
/// (SPOP, SRANDMEMBER, HRANDFIELD need no walk from the start), and removals spread over the
/// range instead of piling tombstones up at its head.
pub fn element_position(sub: &[u8]) -> [u8; 8] {
    field_position(sub).to_be_bytes()
}

/// The position of element `sub` as a number: its xxh3-64.
pub fn field_position(sub: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(sub)
}

/// What a [`FieldOrder`] lists of field `sub`: the top 32 bits of its position (half the bytes
/// of the whole position in a record rewritten at every new field).
pub fn order_tag(sub: &[u8]) -> u32 {
    (field_position(sub) >> 32) as u32
}

/// The engine key of element `sub` of incarnation `version` of `name` in `db`.
pub fn element_key(db: DbIndex, name: &[u8], version: u64, sub: &[u8]) -> Vec<u8> {
    let mut k = element_prefix(db, name, version);
    k.extend_from_slice(&element_position(sub));
    k.extend_from_slice(sub);
    k
}

/// Splits an element key; `None` for any other key.
pub fn parse_element_key(key: &[u8]) -> Option<ElementKey<'_>> {
    let rest = key.strip_prefix(&[ELEMENT_PREFIX])?;
    let (&db, rest) = rest.split_first()?;
    let (len, rest) = rest.split_first_chunk::<4>()?;
    let len = usize::try_from(u32::from_be_bytes(*len)).ok()?;
    let name = rest.get(..len)?;
    let (version, sub) = rest.get(len..)?.split_first_chunk::<8>()?;
    Some(ElementKey {
        db,
        name,
        version: u64::from_be_bytes(*version),
        sub,
    })
}

/// Whether an element is dead (its key's record, settled, disowns it): for the server's
/// compaction filter. Unsettled or unreadable records keep the element.
pub fn element_is_dead(key: &[u8], settled: &dyn strata::SettledRead, now: u64) -> bool {
    let Some(e) = parse_element_key(key) else {
        return false;
    };
    let Some(record) = settled.settled(&string_key(e.db, e.name)) else {
        return false;
    };
    let Some(record) = record else {
        return true;
    };
    let Ok(r) = Record::decode(record) else {
        return false;
    };
    let version = match r.kind {
        KeyType::List => ListMeta::decode(&r.payload).map(|m| m.version),
        KeyType::Hash | KeyType::Set | KeyType::Zset => Meta::decode(&r.payload).map(|m| m.version),
        KeyType::Stream => crate::stream::StreamMeta::decode(&r.payload).map(|m| m.version),
        // The name now holds a string.
        _ => return true,
    };
    match version {
        Ok(version) => {
            version != e.version
                || r.expire_at_ms
                    .is_some_and(|at| at.saturating_add(EXPIRED_ELEMENTS_GRACE_MS) <= now)
        }
        Err(_) => false,
    }
}

/// A live collection's record as read: its expiry and metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Live {
    /// Expiry time, if any.
    pub expire_at_ms: Option<u64>,
    /// Version and count.
    pub meta: Meta,
    /// Whether it outgrew Redis's compact encoding (OBJECT ENCODING).
    pub big: bool,
    /// A hash's field order, if its record keeps one.
    pub order: Option<FieldOrder>,
}

/// Interprets `name`'s record for a command on collections of `kind`: `None` when absent or
/// expired, WRONGTYPE when it holds another kind.
pub fn live(record: Option<Bytes>, now: u64, kind: KeyType) -> Result<Option<Live>> {
    let Some(bytes) = record else {
        return Ok(None);
    };
    let r = Record::decode(bytes)?;
    if r.expired(now) {
        return Ok(None);
    }
    if r.kind != kind {
        return Err(Error::WrongType);
    }
    let (meta, order) = Meta::decode_parts(&r.payload)?;
    let order = match (kind, order) {
        (KeyType::Hash, Some(range)) => Some(FieldOrder(r.payload.slice(range))),
        _ => None,
    };
    Ok(Some(Live {
        expire_at_ms: r.expire_at_ms,
        meta,
        big: r.encoding == crate::keyspace::Encoding::Raw,
        order,
    }))
}

/// Reads the live collection `name` of `kind` in `db` (WRONGTYPE for another kind).
pub fn read_live(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    now: u64,
    kind: KeyType,
) -> Result<Option<Live>> {
    live(b.get(&string_key(db, name))?, now, kind)
}

/// Visits the elements (field and value, or member and nothing) of the collection `name`
/// (metadata `meta`) in `db` in position order, from its floor, until `visit` returns false.
pub fn visit_elements(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &Meta,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> Result<()> {
    visit_elements_from(b, db, name, meta, None, visit)
}

/// [`visit_elements`] after element `after` (exclusive; `None`: from the first): the next page
/// of a scan. Elements come in position order ([`element_position`]).
pub fn visit_elements_from(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &Meta,
    after: Option<&[u8]>,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> Result<()> {
    let floor = [
        &element_prefix(db, name, meta.version)[..],
        meta.floor.as_bytes(),
    ]
    .concat();
    let lower = match after {
        Some(sub) => {
            let after = element_key(db, name, meta.version, sub);
            if after >= floor {
                std::ops::Bound::Excluded(after)
            } else {
                std::ops::Bound::Included(floor)
            }
        }
        None => std::ops::Bound::Included(floor),
    };
    visit_range(b, db, name, meta.version, lower, visit)
}

/// Visits the elements from engine-key bound `lower` to the end of the collection's range.
fn visit_range(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    version: u64,
    lower: std::ops::Bound<Vec<u8>>,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> Result<()> {
    let prefix = element_prefix(db, name, version);
    let skip = prefix.len();
    // Every element routes with the record (`ServerRouter`): one partition to read.
    let route = string_key(db, name);
    b.scan_group(&route, lower, prefix_end(&prefix), &mut |k, v| {
        let rest = k.get(skip..).unwrap_or_default();
        visit(rest.get(8..).unwrap_or_default(), v)
    })
}

/// Elements a pop scans when the pipeline it came in may pop the same collection again (a
/// held run, `conn.rs`): at least a whole run's pops of one (16 in `redis-benchmark -P 16`)
/// plus SPOP's window, so one scan's set-up serves the run.
pub const POP_WINDOW_FILL: usize = 32;

/// What a pop read beyond what it took: the next live elements of one incarnation of a
/// collection from its floor, in scan order. Inside a held run (`conn.rs`) nothing else writes
/// the partition and any other command drops the window, so the run's next pop of the same
/// collection takes from it instead of setting up another scan (a merge over the partition's
/// memtables and tables: most of a pop's CPU when measured).
#[derive(Debug, Clone)]
pub struct PopWindow {
    db: DbIndex,
    name: Bytes,
    version: u64,
    kind: KeyType,
    /// (element, score; 0 for a set member), in scan order from the floor.
    elements: Vec<(Bytes, f64)>,
    /// The scan reached the collection's end: no live element follows `elements`.
    complete: bool,
}

impl PopWindow {
    /// The window of collection `name` (of `kind`, incarnation `version`) in `db`.
    pub fn new(
        db: DbIndex,
        name: &[u8],
        version: u64,
        kind: KeyType,
        elements: Vec<(Bytes, f64)>,
        complete: bool,
    ) -> PopWindow {
        PopWindow {
            db,
            name: Bytes::copy_from_slice(name),
            version,
            kind,
            elements,
            complete,
        }
    }

    /// The first elements of the collection, at least `n` of them unless the collection has
    /// fewer, if this window is of that incarnation and holds them (with whether they are all).
    /// The window is used up: a pop takes its elements instead of copying them (the copies'
    /// reference counts, and dropping them again, were a sixth of a pipelined SPOP's CPU).
    pub fn into_first(
        self,
        db: DbIndex,
        name: &[u8],
        version: u64,
        kind: KeyType,
        n: usize,
    ) -> Option<(Vec<(Bytes, f64)>, bool)> {
        let ours =
            self.db == db && self.version == version && self.kind == kind && self.name == name;
        (ours && (self.elements.len() >= n || self.complete))
            .then_some((self.elements, self.complete))
    }
}

/// Up to `window` elements of the collection `name` (metadata `meta`) for SRANDMEMBER and
/// HRANDFIELD: all of them, uniformly shuffled, when the collection has at most `window`
/// elements; otherwise the `window` elements that follow a random position at or above the
/// floor (wrapping to the floor), shuffled. Positions are hashes, so the window starts at a
/// uniformly random element; the pick is not exactly uniform (an element after a wide gap
/// between positions starts windows more often), but the work is bounded and every element can
/// come up.
pub fn sample_elements(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &Meta,
    window: usize,
) -> Result<Vec<(Bytes, Bytes)>> {
    use rand::seq::SliceRandom;
    use rand::Rng;
    let mut rng = rand::thread_rng();
    let floor = meta.floor.as_bytes();
    let point: Option<[u8; 8]> = (meta.count > window as u64)
        .then(|| rng.gen::<[u8; 8]>())
        .filter(|p| &p[..] > floor);
    let prefix = element_prefix(db, name, meta.version);
    let lower = [&prefix[..], point.as_ref().map_or(floor, |p| &p[..])].concat();
    let mut out: Vec<(Bytes, Bytes)> = Vec::new();
    visit_range(
        b,
        db,
        name,
        meta.version,
        std::ops::Bound::Included(lower),
        &mut |sub, v| {
            out.push((Bytes::copy_from_slice(sub), Bytes::copy_from_slice(v)));
            out.len() < window
        },
    )?;
    if let Some(p) = point {
        if out.len() < window {
            // Wrap around: from the floor up to where the window began.
            visit_elements(b, db, name, meta, &mut |sub, v| {
                if element_position(sub) >= p || out.len() >= window {
                    return false;
                }
                out.push((Bytes::copy_from_slice(sub), Bytes::copy_from_slice(v)));
                true
            })?;
        }
    }
    out.shuffle(&mut rng);
    Ok(out)
}

/// Shuffled candidates for a random pick of `want` distinct elements of `live` (SRANDMEMBER,
/// HRANDFIELD): every element when `want` reaches the size or exceeds the sample window (the
/// reply is that large anyway), else [`sample_elements`].
pub fn random_elements(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    live: &Live,
    want: u64,
) -> Result<Vec<(Bytes, Bytes)>> {
    use rand::seq::SliceRandom;
    if want >= live.meta.count || want > SAMPLE_WINDOW as u64 {
        let mut all = read_elements(b, db, name, &live.meta)?;
        all.shuffle(&mut rand::thread_rng());
        return Ok(all);
    }
    // One element (SRANDMEMBER without a count): a short window is enough to mix.
    let window = if want == 1 {
        SINGLE_PICK_WINDOW
    } else {
        SAMPLE_WINDOW
    };
    sample_elements(b, db, name, &live.meta, window)
}

/// Windows read for draws with repetition from a large collection, at most.
const DRAW_WINDOWS_MAX: usize = 256;

/// `n` elements drawn with repetition (SRANDMEMBER and HRANDFIELD with a negative count): from
/// all of a collection of up to [`SAMPLE_WINDOW`] elements, else from the union of up to
/// [`DRAW_WINDOWS_MAX`] windows of [`SINGLE_PICK_WINDOW`] at random positions (one per draw
/// for small counts), so draws spread over the collection instead of one window's 16.
pub fn draw_with_repetition(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    live: &Live,
    n: usize,
) -> Result<Vec<(Bytes, Bytes)>> {
    use rand::Rng;
    let pool = if live.meta.count <= SAMPLE_WINDOW as u64 {
        read_elements(b, db, name, &live.meta)?
    } else {
        let mut pool = Vec::new();
        for _ in 0..n.clamp(1, DRAW_WINDOWS_MAX) {
            pool.extend(sample_elements(
                b,
                db,
                name,
                &live.meta,
                SINGLE_PICK_WINDOW,
            )?);
        }
        pool
    };
    if pool.is_empty() {
        return Ok(Vec::new());
    }
    let mut rng = rand::thread_rng();
    Ok((0..n)
        .map(|_| pool[rng.gen_range(0..pool.len())].clone())
        .collect())
}

/// Every field and value of the live hash `name` (`live`: its record as read) in the order
/// Redis answers them: its kept [`FieldOrder`]'s, else position order.
pub fn read_fields_in_order(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    live: &Live,
) -> Result<Vec<(Bytes, Bytes)>> {
    let mut fields = read_elements(b, db, name, &live.meta)?;
    if let Some(order) = &live.order {
        order.arrange(&mut fields, |(f, _)| f);
    }
    Ok(fields)
}

/// Elements SPOP, SRANDMEMBER and HRANDFIELD sample from a large collection.
pub const SAMPLE_WINDOW: usize = 1024;
/// Elements read to pick one at random from a large collection.
pub const SINGLE_PICK_WINDOW: usize = 16;

/// All elements of the collection `name` (metadata `meta`) in `db`.
pub fn read_elements(
    b: &dyn KvBackend,
    db: DbIndex,
    name: &[u8],
    meta: &Meta,
) -> Result<Vec<(Bytes, Bytes)>> {
    let mut out = Vec::new();
    visit_elements(b, db, name, meta, &mut |f, v| {
        out.push((Bytes::copy_from_slice(f), Bytes::copy_from_slice(v)));
        true
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use strata::KeyRouter;

    #[test]
    fn element_keys_round_trip_and_route_with_their_record() {
        // Names each side of the longest hashed from the stack (`route_of_name`).
        for name in [
            &b""[..],
            b"h",
            b"\xff\x00name",
            &[7u8; 61],
            &[7u8; 62],
            &[7u8; 63],
            &[7u8; 300],
        ] {
            for sub in [&b""[..], b"f", b"\x00\xff"] {
                let k = element_key(3, name, 0x0102_0304_0506_0708, sub);
                let e = parse_element_key(&k).unwrap();
                assert_eq!((e.db, e.name, e.version), (3, name, 0x0102_0304_0506_0708));
                // After the version: the element's position, then the element.
                assert_eq!(e.sub, [&element_position(sub)[..], sub].concat());
                assert!(k.starts_with(&element_prefix(3, name, e.version)));
                assert_eq!(
                    ServerRouter::SHARED.route(&k),
                    xxhash_rust::xxh3::xxh3_64(&string_key(3, name))
                );
            }
        }
        // List and sorted set entries route with their record too.
        for k in [
            list_key(3, b"l", 9, LIST_HEAD_START),
            zset_member_key(3, b"z", 9, b"m"),
            zset_score_key(3, b"z", 9, -1.5, b"m"),
        ] {
            let e = parse_element_key(&k).unwrap();
            assert_eq!(
                ServerRouter::SHARED.route(&k),
                xxhash_rust::xxh3::xxh3_64(&string_key(3, e.name))
            );
        }
        // Scores keep their order as bytes; -0 sorts as 0.
        let scores = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -1e-300,
            0.0,
            1e-300,
            1.0,
            2.5,
            f64::INFINITY,
        ];
        for w in scores.windows(2) {
            assert!(
                score_order_bytes(w[0]) < score_order_bytes(w[1]),
                "{} < {}",
                w[0],
                w[1]
            );
        }
        for s in scores {
            assert_eq!(score_from_order_bytes(score_order_bytes(s)), s);
        }
        assert_eq!(score_order_bytes(-0.0), score_order_bytes(0.0));
        // Every other key routes as the engine's default would.
        for k in [&b"kname"[..], b"\xff\xffD", b"m", b"m\x00\x00\x00\x00\x09x"] {
            assert_eq!(ServerRouter::SHARED.route(k), xxhash_rust::xxh3::xxh3_64(k));
        }
        // A field prefix of one name never covers another name's elements.
        let a = element_prefix(0, b"ab", 1);
        assert!(!element_key(0, b"a", 1, b"b").starts_with(&a));
    }

    /// Rule 2 keeps the expiry index in the last partition and places everything else as
    /// rule 1 would among the others (elements with their record); rule 1 is the engine's
    /// default for every key not an element. Which rule a store gets.
    #[test]
    fn the_expiry_index_gets_the_last_partition_under_rule_2() {
        use crate::keyspace::{expiry_index_key, string_key};
        for n in [2usize, 5, 16] {
            for i in 0..500u32 {
                let name = format!("key{i}");
                let index = expiry_index_key(3, u64::from(i) * 7919, name.as_bytes());
                let record = string_key(3, name.as_bytes());
                let element = element_key(3, name.as_bytes(), 9, b"f");
                let apart = ServerRouter::EXPIRY_APART;
                assert_eq!(apart.partition(&index, n), n - 1);
                let p = apart.partition(&record, n);
                assert_eq!(
                    p as u64,
                    xxhash_rust::xxh3::xxh3_64(&record) % (n as u64 - 1)
                );
                assert_eq!(apart.partition(&element, n), p);
                for k in [&index, &record] {
                    assert_eq!(
                        ServerRouter::SHARED.partition(k, n),
                        strata::format::partition_of(k, n)
                    );
                }
            }
        }
        assert_eq!(ServerRouter::EXPIRY_APART.partition(b"\xffe", 1), 0);
        assert!(ServerRouter::SHARED.keeps_default_placement());
        assert!(!ServerRouter::EXPIRY_APART.keeps_default_placement());
        assert_eq!(ServerRouter::for_store(None), ServerRouter::EXPIRY_APART);
        assert_eq!(
            ServerRouter::for_store(Some(SERVER_ROUTER_ID_EXPIRY_APART)),
            ServerRouter::EXPIRY_APART
        );
        for old in [1, SERVER_ROUTER_ID] {
            assert_eq!(ServerRouter::for_store(Some(old)), ServerRouter::SHARED);
        }
    }

    /// A ceiling covers exactly the suffixes below its bytes' successor, and stays a true
    /// bound (truncated to FLOOR_BYTES_MAX) as entries are added and the top is popped:
    /// against every live entry of a random model.
    #[test]
    fn a_ceiling_stays_above_every_live_entry() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
        for _ in 0..300 {
            let mut live: std::collections::BTreeSet<Vec<u8>> = Default::default();
            let mut c = Ceiling::default();
            for _ in 0..60 {
                let len = rng.gen_range(1..FLOOR_BYTES_MAX + 8);
                let e: Vec<u8> = (0..len).map(|_| rng.gen_range(b'a'..b'd')).collect();
                if rng.gen_bool(0.3) {
                    if let Some(top) = live.pop_last() {
                        c.set_to(&top);
                        // The popped entry's bytes: a bound its own suffix is within.
                        assert!(c.covers(&top));
                    }
                } else {
                    c.raise_to(&e);
                    live.insert(e);
                }
                for k in &live {
                    assert!(c.covers(k), "{k:?} above {:?}", c.as_bytes());
                    // Covering means sorting below the successor of the bound's bytes.
                    let bytes = c.as_bytes();
                    let below_successor = bytes.is_empty()
                        || match crate::backend::prefix_end(bytes) {
                            std::ops::Bound::Excluded(end) => k[..] < end[..],
                            _ => true,
                        };
                    assert!(below_successor);
                }
            }
        }
    }

    /// A hash's field order: flagged in the count (bit 62), after the floor's length and bytes,
    /// positions to the end; a record without one decodes as having none; damage (a cut
    /// position, both flags, a floor past the end) is named, not misread.
    #[test]
    fn field_orders_round_trip_and_arrange_fields_as_added() {
        let mut m = Meta::new(9, 3);
        m.floor = Floor::of(b"fl");
        let fields: [&[u8]; 3] = [b"zz", b"aa", b"mm"];
        let order: Vec<u32> = fields.iter().map(|f| order_tag(f)).collect();
        let bytes = Bytes::from(m.encode_ordered(&order));
        assert_eq!(bytes.len(), 16 + 1 + 2 + 12);
        assert_eq!(bytes[15] & 0xC0, 0x40);
        assert_eq!(Meta::decode(&bytes).unwrap(), m);
        let kept = FieldOrder::of_payload(&bytes).unwrap().unwrap();
        assert_eq!(kept.tags(), order);
        assert_eq!(
            FieldOrder::of_payload(&Bytes::from(m.encode())).unwrap(),
            None
        );
        // Read in position order, answered as added; unlisted fields (older) first.
        let mut read: Vec<&[u8]> = vec![b"old", b"aa", b"mm", b"zz"];
        read.sort_by_key(|f| element_position(f));
        kept.arrange(&mut read, |f| f);
        assert_eq!(read, vec![&b"old"[..], b"zz", b"aa", b"mm"]);
        // Damage.
        assert!(Meta::decode(&bytes[..bytes.len() - 3]).is_err());
        let mut both = bytes.to_vec();
        both[15] |= 0x80;
        assert!(Meta::decode(&both).is_err());
        let mut long_floor = bytes.to_vec();
        long_floor[16] = 200;
        assert!(Meta::decode(&long_floor).is_err());
        // An empty order: kept, lists nothing.
        let empty = Bytes::from(m.encode_ordered(&[]));
        assert_eq!(Meta::decode(&empty).unwrap(), m);
        assert_eq!(
            FieldOrder::of_payload(&empty).unwrap().unwrap().tags(),
            Vec::<u32>::new()
        );
    }

    #[test]
    fn metadata_round_trips_and_versions_grow() {
        let mut m = Meta::new(42, 7);
        assert_eq!(m.encode().len(), 16);
        assert_eq!(Meta::decode(&m.encode()).unwrap(), m);
        assert!(Meta::decode(&m.encode()[..15]).is_err());
        m.floor = Floor::of(b"floor");
        assert_eq!(Meta::decode(&m.encode()).unwrap(), m);
        assert!(Meta::decode(&[&m.encode()[..], &[0; FLOOR_BYTES_MAX][..]].concat()).is_err());
        // A ceiling: flagged in the count, after the floor's length and bytes; a record without
        // one encodes as before ceilings existed.
        let no_ceiling = m.encode();
        m.ceiling.set_to(b"Sceiling");
        let with = m.encode();
        assert_eq!(with.len(), no_ceiling.len() + 1 + 8);
        assert_eq!(&with[..8], &no_ceiling[..8]);
        assert_eq!(with[15] & 0x80, 0x80);
        assert_eq!(Meta::decode(&with).unwrap(), m);
        assert_eq!(Meta::decode(&with).unwrap().count, 7);
        m.floor = Floor::default();
        assert_eq!(Meta::decode(&m.encode()).unwrap(), m);
        // Damage: a floor length past the end, no ceiling after the flag, an oversized one.
        let mut bad = with.clone();
        bad[16] = 200;
        assert!(Meta::decode(&bad).is_err());
        assert!(Meta::decode(&with[..16 + 1 + 5]).is_err());
        assert!(Meta::decode(&[&with[..], &[0; FLOOR_BYTES_MAX][..]].concat()).is_err());
        let v = Versions::default();
        let mut last = 0;
        for _ in 0..1000 {
            let n = v.next();
            assert!(n > last);
            last = n;
        }
        assert!(last >= now_ms() << 16);
    }
}
