//! How Redis keys map to engine keys (keyspace format 6; `docs/format.md` gives every byte).
//!
//! - A Redis string in database `db` is the engine key `'k' db name` whose value is a
//!   [`Record`]: one header byte (kind, and whether an expiry time follows), the expiry time
//!   (unix milliseconds, u64 little-endian) if any, then the string's bytes. The expiry lives in
//!   the value so a GET is one engine read and a SET one blind write.
//! - A JSON document in database 0 is stored exactly where `strata_doc::DocStore` keeps it
//!   (`0xFF 'D'` + strata-doc's key encoding of the name), so documents loaded with
//!   `strata load` are the ones JSON.GET reads; in database `n > 0` under `0xFF 'd' n` + the same
//!   encoding. A document's expiry time is a separate record, `0xFF 'x' db name`.
//! - Every expiry time written also writes an *expiry index* entry, `0xFF 'e' db time name`
//!   (time big-endian, so the index is in time order): active expiry walks it from the start up
//!   to now. Entries may be stale (the key was overwritten or persisted since); whoever reads one
//!   checks the key itself. The key router keeps the index in a partition of its own in stores
//!   made since it could ([`crate::collection::ServerRouter`]), out of the tables GETs search.
//! - `0xFF 'K'` holds the keyspace format version; `0xFF 'N'` strata-doc's key names.
//!
//! A key is *live* when it exists and its expiry time (if any) is in the future: every reader
//! here treats an expired key as absent at once; the bytes go when active expiry, an overwrite
//! or compaction reaches them.
//!
//! Invariant (kept by the write commands): a name exists in at most one of the two kinds per
//! database. Readers check strings first, so if a race ever leaves both, the key is a string.

use std::ops::Bound;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use strata_doc::{Doc, DocStore, NameStorage, NAMES_KEY};

use crate::backend::{prefix_end, BatchOp, KvBackend, Write};
use crate::error::{Error, Result};

/// A database number (`SELECT`). One byte in every engine key.
pub type DbIndex = u8;

/// Most databases a server may have (`databases` setting).
pub const DATABASES_MAX: usize = 256;

/// The keyspace format this build writes (8: format 7 plus a compact hash's field order in its
/// record, `collection::FieldOrder`, flagged by bit 62 of its count; 7: format 6 plus a stream's
/// nodes, stream records of format 2 and node records, `stream_node.rs`; 6: format 5 plus a sorted set's ceiling in its
/// record, `collection::Ceiling`, flagged by bit 63 of its count; 5: format 4 plus streams,
/// records of kind 5 and their entries, `stream.rs`; 4: format 3 plus a floor at the end of a
/// hash's, set's or sorted set's record, `collection::Floor`).
pub const KEYSPACE_FORMAT_VERSION: u8 = 8;
/// Format 2 differs from 7 only in holding no collections, format 3 in records without a
/// floor too (which format 7 reads as "no floor"), format 4 in holding no streams either,
/// format 5 in records without a ceiling (read as "no ceiling"), format 6 only in stream
/// records of format 1 (read as "nodes not known": rebuilt at the stream's next write), format
/// 7 in hash records without a field order (read as "fields added before orders were kept"):
/// all are upgraded by rewriting the version byte. (A build of format 5 refuses a store of format
/// 6: it names the newer format instead of misreading a count with bit 63 set; a build of
/// format 6 likewise refuses format 7 instead of calling its stream records damaged, and one
/// of format 7 refuses format 8 instead of calling its hash records damaged.)
const KEYSPACE_FORMAT_NO_COLLECTIONS: u8 = 2;
const KEYSPACE_FORMAT_NO_FLOORS: u8 = 3;
const KEYSPACE_FORMAT_NO_STREAMS: u8 = 4;
const KEYSPACE_FORMAT_NO_CEILINGS: u8 = 5;
const KEYSPACE_FORMAT_NO_STREAM_NODES: u8 = 6;
const KEYSPACE_FORMAT_NO_FIELD_ORDERS: u8 = 7;

/// Engine key of the keyspace format record.
pub const FORMAT_KEY: [u8; 2] = [0xff, b'K'];

/// Engine-key prefix of Redis keys held in records (strings): `'k' db name`.
pub const KEY_PREFIX: u8 = b'k';

/// Format 1 kept strings at `'s' name` with the raw bytes as the value (database 0 only).
const FORMAT1_STRING_PREFIX: u8 = b's';

/// Documents of databases other than 0: `0xFF 'd' db` + strata-doc's key encoding.
const DOC_DB_PREFIX: [u8; 2] = [0xff, b'd'];
/// A document's expiry time: `0xFF 'x' db name` -> u64 LE unix ms.
const DOC_TTL_PREFIX: [u8; 2] = [0xff, b'x'];
/// The expiry index: `0xFF 'e' db time(u64 BE ms) name` -> empty.
const EXPIRY_INDEX_PREFIX: [u8; 2] = [0xff, b'e'];

pub use strata_doc::DOC_KEY_PREFIX;

/// Tag byte of a string in strata-doc's key encoding (its documented, versioned format:
/// `0x40`, the UTF-8 bytes with each 0x00 written as 0x00 0xFF, then 0x00 0x01). Only the prefix
/// form below depends on it; full keys come from `DocStore::engine_key` itself.
const DOC_STRING_TAG: u8 = 0x40;

/// Header bit: an expiry time follows the header byte.
const HEADER_HAS_EXPIRY: u8 = 0x80;
/// Header bits naming the kind of record.
const HEADER_KIND_MASK: u8 = 0x0f;
/// Header bits recording how a string was made (`Encoding`).
const HEADER_ENCODING_MASK: u8 = 0x30;
/// Kind of a record holding a string.
const KIND_STRING: u8 = 0;
/// Kind of a record holding a hash's metadata (`collection.rs`; its fields are other keys).
const KIND_HASH: u8 = 1;
/// Kind of a record holding a set's metadata (its members are other keys).
const KIND_SET: u8 = 2;
/// Kind of a record holding a list's metadata (its elements are other keys).
const KIND_LIST: u8 = 3;
/// Kind of a record holding a sorted set's metadata (its members and scores are other keys).
const KIND_ZSET: u8 = 4;
/// Kind bits of a stream's record (`collection::StreamMeta`).
const KIND_STREAM: u8 = 5;

/// Current time in unix milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Engine keys the server keeps for itself and FLUSHALL leaves alone: strata-doc's key-name
/// record (stored documents refer to it; it only grows), the keyspace format record and a
/// cluster node's state.
pub fn is_internal(engine_key: &[u8]) -> bool {
    engine_key == NAMES_KEY
        || engine_key == FORMAT_KEY
        || engine_key == crate::cluster::STATE_KEY
        || engine_key.starts_with(&crate::commands::functions::LIBRARY_PREFIX)
}

/// How a string was made, for OBJECT ENCODING (Redis's encoding depends on the command that
/// wrote the value, not only on its bytes). Header bits 4-5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoding {
    /// Written whole (SET and its kin, INCR, RESTORE): `int`, `embstr` or `raw` by content.
    #[default]
    ByContent,
    /// Grown or patched in place (APPEND to an existing key, SETRANGE): `raw`.
    Raw,
    /// Made from a float (INCRBYFLOAT): `embstr` or `raw` by length, never `int`.
    NotInt,
}

impl Encoding {
    fn bits(self) -> u8 {
        match self {
            Encoding::ByContent => 0,
            Encoding::Raw => 1 << 4,
            Encoding::NotInt => 2 << 4,
        }
    }

    fn from_header(header: u8) -> Option<Encoding> {
        match header & HEADER_ENCODING_MASK {
            0 => Some(Encoding::ByContent),
            0x10 => Some(Encoding::Raw),
            0x20 => Some(Encoding::NotInt),
            _ => None,
        }
    }
}

/// A stored record: a string, or a collection's metadata, with its expiry time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// What the record holds: [`KeyType::String`], or a collection's metadata.
    pub kind: KeyType,
    /// Unix milliseconds after which the key is gone; `None`: never.
    pub expire_at_ms: Option<u64>,
    /// The string's bytes (a collection: its metadata, see `collection.rs`).
    pub payload: Bytes,
    /// How it was made (OBJECT ENCODING).
    pub encoding: Encoding,
}

impl Record {
    /// Encodes a string record written whole.
    pub fn encode(payload: &[u8], expire_at_ms: Option<u64>) -> Vec<u8> {
        Self::encode_as(payload, expire_at_ms, Encoding::ByContent)
    }

    /// Encodes a string record made as `encoding` says.
    pub fn encode_as(payload: &[u8], expire_at_ms: Option<u64>, encoding: Encoding) -> Vec<u8> {
        encode_record(KIND_STRING | encoding.bits(), payload, expire_at_ms)
    }

    /// Encodes a collection's metadata record (`kind`: a collection type). `encoding`:
    /// [`Encoding::Raw`] once the collection outgrew Redis's compact encoding (OBJECT ENCODING
    /// `hashtable`), else [`Encoding::ByContent`].
    pub fn encode_collection(
        kind: KeyType,
        meta: &[u8],
        expire_at_ms: Option<u64>,
        encoding: Encoding,
    ) -> Vec<u8> {
        encode_record(kind_bits(kind) | encoding.bits(), meta, expire_at_ms)
    }

    /// This record with another expiry time (same kind, encoding and payload).
    pub fn with_expiry(&self, expire_at_ms: Option<u64>) -> Vec<u8> {
        let header = kind_bits(self.kind) | self.encoding.bits();
        encode_record(header, &self.payload, expire_at_ms)
    }

    /// Decodes a record of any kind without copying the payload.
    pub fn decode(bytes: Bytes) -> Result<Record> {
        let header = *bytes
            .first()
            .ok_or_else(|| corrupt("an empty key record (no header byte)"))?;
        let (kind, encoding) = check_header(header)?;
        if header & HEADER_HAS_EXPIRY == 0 {
            return Ok(Record {
                kind,
                expire_at_ms: None,
                payload: bytes.slice(1..),
                encoding,
            });
        }
        let at: [u8; 8] = bytes
            .get(1..9)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| corrupt("a key record cut inside its expiry time"))?;
        Ok(Record {
            kind,
            expire_at_ms: Some(u64::from_le_bytes(at)),
            payload: bytes.slice(9..),
            encoding,
        })
    }

    /// Whether the key is gone at `now_ms` (counted in [`expired_seen`] when it is).
    pub fn expired(&self, now_ms: u64) -> bool {
        let gone = self.expire_at_ms.is_some_and(|at| is_past(at, now_ms));
        if gone {
            note_expired_seen();
        }
        gone
    }

    /// Whether the key is gone now; reads the clock only for a record with an expiry time
    /// (the common GET of a key without one costs no clock read).
    pub fn expired_now(&self) -> bool {
        self.expire_at_ms.is_some() && self.expired(now_ms())
    }
}

/// Whether a key whose expiry time is `at` is gone at `now` (both Unix ms): Redis's
/// `keyIsExpired`, `now > at`, so a key is still there through its own millisecond. (A new
/// expiry time at or before now deletes the key at once, Redis's `checkAlreadyExpired`: the
/// commands that set one decide that.)
pub fn is_past(at: u64, now: u64) -> bool {
    at < now
}

/// The header's kind bits of a record holding `kind` (documents have no record).
fn kind_bits(kind: KeyType) -> u8 {
    match kind {
        KeyType::Hash => KIND_HASH,
        KeyType::Set => KIND_SET,
        KeyType::List => KIND_LIST,
        KeyType::Zset => KIND_ZSET,
        KeyType::Stream => KIND_STREAM,
        KeyType::String | KeyType::Json => KIND_STRING,
    }
}

fn encode_record(header: u8, payload: &[u8], expire_at_ms: Option<u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 9);
    match expire_at_ms {
        None => out.push(header),
        Some(at) => {
            out.push(header | HEADER_HAS_EXPIRY);
            out.extend_from_slice(&at.to_le_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

/// The kind of a raw record, without decoding the rest (`Err` when damaged).
pub(crate) fn record_kind(bytes: &[u8]) -> Result<KeyType> {
    let header = *bytes
        .first()
        .ok_or_else(|| corrupt("an empty key record (no header byte)"))?;
    Ok(check_header(header)?.0)
}

/// The expiry time in a raw record, without decoding the rest (`Err` when damaged).
pub(crate) fn record_expiry(bytes: &[u8]) -> Result<Option<u64>> {
    // The header alone, without copying the record (compaction's filter calls this per value).
    let header = *bytes
        .first()
        .ok_or_else(|| corrupt("an empty key record (no header byte)"))?;
    check_header(header)?;
    if header & HEADER_HAS_EXPIRY == 0 {
        return Ok(None);
    }
    let at: [u8; 8] = bytes
        .get(1..9)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| corrupt("a key record cut inside its expiry time"))?;
    Ok(Some(u64::from_le_bytes(at)))
}

/// The kind and encoding bits of a valid record's header; names an unknown header.
fn check_header(header: u8) -> Result<(KeyType, Encoding)> {
    let known = HEADER_KIND_MASK | HEADER_HAS_EXPIRY | HEADER_ENCODING_MASK;
    let kind = match header & HEADER_KIND_MASK {
        KIND_STRING => Some(KeyType::String),
        // A collection's encoding bits: ByContent, or Raw once it outgrew the compact encoding.
        KIND_HASH if header & HEADER_ENCODING_MASK <= Encoding::Raw.bits() => Some(KeyType::Hash),
        KIND_SET if header & HEADER_ENCODING_MASK <= Encoding::Raw.bits() => Some(KeyType::Set),
        KIND_LIST if header & HEADER_ENCODING_MASK == 0 => Some(KeyType::List),
        KIND_ZSET if header & HEADER_ENCODING_MASK <= Encoding::Raw.bits() => Some(KeyType::Zset),
        KIND_STREAM if header & HEADER_ENCODING_MASK == 0 => Some(KeyType::Stream),
        _ => None,
    };
    match (kind, Encoding::from_header(header)) {
        (Some(k), Some(e)) if header & !known == 0 => Ok((k, e)),
        _ => Err(corrupt(&format!(
            "a key record with unknown header byte {header:#04x}"
        ))),
    }
}

fn corrupt(what: &str) -> Error {
    Error::command(format!("stored data is damaged: {what}"))
}

/// The engine's compaction filter for a server's store (Kvrocks does the same with RocksDB's):
/// - a string whose expiry time passed [`crate::collection::EXPIRED_ELEMENTS_GRACE_MS`] ago is
///   dead: compaction and value-log collection reclaim its bytes without a write, leaving a
///   *stub*, the record's header and expiry time
///   without the string (which reads as the expired key it is). The key itself stays until
///   active expiry deletes it through a write, so the engine's key counts (DBSIZE, [`KeysByDb`])
///   see every key that goes;
/// - a collection's record is a few bytes and stays likewise;
/// - an element whose Redis key's record (settled) no longer owns it, or whose collection
///   expired [`crate::collection::EXPIRED_ELEMENTS_GRACE_MS`] ago, is dead
///   ([`crate::collection::element_is_dead`]); elements are not counted.
///
/// Documents are left to active expiry (their time is another record). Set by `strata serve`
/// only: raw engine keys that start with `'k'` or `'m'` in a store that is not a server's would
/// be read as records.
///
/// It also remembers the records it finds long expired ([`DeadKeys::take_expired`]): active
/// expiry deletes them even when their expiry-index entry is missing (a crash between the two
/// writes of EXPIRE, whose partitions' logs are written and synced apart), so no expired key
/// stays forever.
#[derive(Debug, Default)]
pub struct DeadKeys {
    expired: std::sync::Mutex<Vec<Vec<u8>>>,
}

/// Most long-expired records [`DeadKeys`] remembers until active expiry takes them; more are
/// found again by a later compaction.
const EXPIRED_SEEN_MAX: usize = 10_000;

impl DeadKeys {
    /// Takes up to `max` of the record keys (`'k' db name`) compactions found expired for
    /// longer than the grace period.
    pub fn take_expired(&self, max: usize) -> Vec<Vec<u8>> {
        let mut seen = self
            .expired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let keep = seen.len().saturating_sub(max);
        seen.split_off(keep)
    }

    fn note_expired(&self, key: &[u8]) {
        let mut seen = self
            .expired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.len() < EXPIRED_SEEN_MAX {
            seen.push(key.to_vec());
        }
    }
}

/// Bytes of a string record's stub: the header byte and the expiry time.
const STUB_BYTES: usize = 9;

impl strata::CompactionFilter for DeadKeys {
    fn is_dead(&self, key: &[u8], value: &[u8], settled: &dyn strata::SettledRead) -> bool {
        match key.first() {
            Some(&KEY_PREFIX) if key.len() >= 2 => {
                // The grace keeps a command that judged the key live by a clock read just
                // before its time (and then waited on a stall) from finding a stub it would
                // take for an empty string.
                let long_expired = record_expiry(value).is_ok_and(|at| {
                    at.is_some_and(|at| {
                        at.saturating_add(crate::collection::EXPIRED_ELEMENTS_GRACE_MS) <= now_ms()
                    })
                });
                if long_expired {
                    self.note_expired(key);
                }
                // Already a stub (or an empty string): nothing to reclaim.
                long_expired
                    && value.len() > STUB_BYTES
                    && matches!(record_kind(value), Ok(KeyType::String))
            }
            Some(&crate::collection::ELEMENT_PREFIX) => {
                crate::collection::element_is_dead(key, settled, now_ms())
            }
            _ => false,
        }
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn stub(&self, key: &[u8], value: &[u8]) -> Option<Vec<u8>> {
        // Only records are given stubs (an element's tombstone is not counted anywhere).
        if key.first() != Some(&KEY_PREFIX) {
            return None;
        }
        value.get(..STUB_BYTES).map(<[u8]>::to_vec)
    }
}

// The document prefixes `KeysByDb` matches byte by byte.
const _: () = assert!(DOC_KEY_PREFIX[0] == 0xff && DOC_KEY_PREFIX[1] == b'D');
const _: () = assert!(DOC_DB_PREFIX[0] == 0xff && DOC_DB_PREFIX[1] == b'd');

/// The engine's key classes for a server's store: one per database, so `strata::Db::key_count`
/// is that database's DBSIZE. A Redis key is one engine key: its record `'k' db name`, or its
/// document (`0xFF 'D'` + a string name in database 0, `0xFF 'd' db` + one elsewhere); elements,
/// expiry records and index entries are not counted.
#[derive(Debug, Default)]
pub struct KeysByDb;

impl strata::KeyClasses for KeysByDb {
    fn classes(&self) -> usize {
        DATABASES_MAX
    }

    fn class_of(&self, key: &[u8]) -> Option<usize> {
        match key {
            [KEY_PREFIX, db, ..] => Some(usize::from(*db)),
            [0xff, b'D', DOC_STRING_TAG, ..] => Some(0),
            [0xff, b'd', db, DOC_STRING_TAG, ..] => Some(usize::from(*db)),
            _ => None,
        }
    }
}

/// The server's backend as the keeper of strata-doc's key-name record (so documents written over
/// the protocol share names with `DocStore`).
pub struct BackendNames(pub Arc<dyn KvBackend + Send + Sync>);

fn to_doc_error(e: Error) -> strata_doc::Error {
    match e {
        Error::Doc(e) => e,
        Error::Engine(e) => strata_doc::Error::Engine(e),
        other => strata_doc::Error::Storage(Box::new(other)),
    }
}

impl NameStorage for BackendNames {
    fn read(&self) -> strata_doc::Result<Option<Vec<u8>>> {
        Ok(self
            .0
            .get(&NAMES_KEY)
            .map_err(to_doc_error)?
            .map(|b| b.to_vec()))
    }

    fn update(&self, f: &mut strata_doc::RecordUpdate<'_>) -> strata_doc::Result<()> {
        let mut failure = None;
        self.0
            .update(&NAMES_KEY, &mut |old| {
                Ok(match f(old) {
                    Ok(Some(new)) => Write::Put(new),
                    Ok(None) => Write::Keep,
                    Err(e) => {
                        failure = Some(e);
                        Write::Keep
                    }
                })
            })
            .map_err(to_doc_error)?;
        failure.map_or(Ok(()), Err)
    }

    fn sync(&self) -> strata_doc::Result<()> {
        self.0.sync().map_err(to_doc_error)
    }
}

/// The kinds of value a key can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    /// A binary-safe string.
    String,
    /// A hash: field -> value (its metadata is a record, each field its own engine key).
    Hash,
    /// A set of members (a record, each member its own engine key).
    Set,
    /// A list (a record, each element its own engine key by position).
    List,
    /// A sorted set (a record; per member a member->score entry and a score-ordered entry).
    Zset,
    /// A stream (a record, each entry its own engine key by ID).
    Stream,
    /// A JSON document (RedisJSON's type).
    Json,
}

impl KeyType {
    /// Every kind.
    pub const ALL: [KeyType; 7] = [
        KeyType::String,
        KeyType::Hash,
        KeyType::Set,
        KeyType::List,
        KeyType::Zset,
        KeyType::Stream,
        KeyType::Json,
    ];

    /// The name TYPE reports.
    pub fn name(self) -> &'static str {
        match self {
            KeyType::String => "string",
            KeyType::Hash => "hash",
            KeyType::Set => "set",
            KeyType::List => "list",
            KeyType::Zset => "zset",
            KeyType::Stream => "stream",
            KeyType::Json => "ReJSON-RL",
        }
    }

    /// The engine-key space holding keys of this kind.
    pub fn space(self) -> Space {
        match self {
            KeyType::String
            | KeyType::Hash
            | KeyType::Set
            | KeyType::List
            | KeyType::Zset
            | KeyType::Stream => Space::Records,
            KeyType::Json => Space::Docs,
        }
    }
}

/// The two places Redis keys live in the engine: records (`'k' db name`: strings and the
/// metadata of collections, so one name holds one of them) and documents (strata-doc's keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    /// `'k' db name` -> [`Record`].
    Records,
    /// Documents where `DocStore` keeps them (database 0) or under `0xFF 'd' db`.
    Docs,
}

impl Space {
    /// Both spaces, in scan order.
    pub const ALL: [Space; 2] = [Space::Records, Space::Docs];

    /// The engine key of a Redis key in this space in `db`; `None` when this space cannot hold
    /// such a name (document names must be UTF-8, as strata-doc keys are text).
    pub fn key(self, db: DbIndex, user_key: &[u8]) -> Option<Vec<u8>> {
        match self {
            Space::Records => Some(string_key(db, user_key)),
            Space::Docs => {
                let name = std::str::from_utf8(user_key).ok()?;
                let key = DocStore::engine_key(&Doc::String(name.to_string())).ok()?;
                Some(doc_key_in(db, key))
            }
        }
    }

    /// The engine-key prefix shared by every key of this space in `db` whose name starts with
    /// `user_prefix`.
    pub fn prefix(self, db: DbIndex, user_prefix: &[u8]) -> Vec<u8> {
        match self {
            Space::Records => string_key(db, user_prefix),
            Space::Docs => {
                let mut p = Vec::with_capacity(user_prefix.len() + 5);
                p.extend_from_slice(&DOC_KEY_PREFIX);
                p.push(DOC_STRING_TAG);
                for &b in user_prefix {
                    p.push(b);
                    if b == 0 {
                        p.push(0xff);
                    }
                }
                doc_key_in(db, p)
            }
        }
    }

    /// The Redis key an engine key of this space in `db` stands for; `None` for entries under
    /// the prefix that are not Redis keys (documents keyed by numbers or arrays, loaded by other
    /// tools).
    pub fn user_key(self, db: DbIndex, engine_key: &[u8]) -> Option<Vec<u8>> {
        match self {
            Space::Records => engine_key
                .strip_prefix(&[KEY_PREFIX, db])
                .map(<[u8]>::to_vec),
            Space::Docs => {
                let docstore_key = if db == 0 {
                    engine_key.to_vec()
                } else {
                    let rest =
                        engine_key.strip_prefix(&[DOC_DB_PREFIX[0], DOC_DB_PREFIX[1], db])?;
                    [&DOC_KEY_PREFIX[..], rest].concat()
                };
                match DocStore::doc_key(&docstore_key) {
                    Ok(Doc::String(name)) => Some(name.into_bytes()),
                    _ => None,
                }
            }
        }
    }
}

/// A DocStore key (database 0's layout) moved into database `db`.
fn doc_key_in(db: DbIndex, docstore_key: Vec<u8>) -> Vec<u8> {
    if db == 0 {
        return docstore_key;
    }
    let rest = docstore_key.get(DOC_KEY_PREFIX.len()..).unwrap_or_default();
    let mut k = Vec::with_capacity(rest.len() + 3);
    k.extend_from_slice(&DOC_DB_PREFIX);
    k.push(db);
    k.extend_from_slice(rest);
    k
}

/// The Redis key (in whichever database) an engine key belongs to: a record's, a document's,
/// a document's expiry time's, or a collection element's; `None` for internal keys.
pub fn redis_name(engine_key: &[u8]) -> Option<Vec<u8>> {
    match engine_key {
        [KEY_PREFIX, _db, name @ ..] => Some(name.to_vec()),
        [a, b, _db, name @ ..] if [*a, *b] == DOC_TTL_PREFIX => Some(name.to_vec()),
        [a, b, ..] if [*a, *b] == DOC_KEY_PREFIX => Space::Docs.user_key(0, engine_key),
        [a, b, db, ..] if [*a, *b] == DOC_DB_PREFIX => Space::Docs.user_key(*db, engine_key),
        _ => crate::collection::parse_element_key(engine_key).map(|e| e.name.to_vec()),
    }
}

/// The engine key of a Redis string.
pub fn string_key(db: DbIndex, user_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + 2);
    k.push(KEY_PREFIX);
    k.push(db);
    k.extend_from_slice(user_key);
    k
}

/// The engine key of a document's expiry time.
pub fn doc_ttl_key(db: DbIndex, user_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + 3);
    k.extend_from_slice(&DOC_TTL_PREFIX);
    k.push(db);
    k.extend_from_slice(user_key);
    k
}

/// The expiry index entry of `user_key` in `db` expiring at `at_ms`.
pub fn expiry_index_key(db: DbIndex, at_ms: u64, user_key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + 11);
    k.extend_from_slice(&EXPIRY_INDEX_PREFIX);
    k.push(db);
    k.extend_from_slice(&at_ms.to_be_bytes());
    k.extend_from_slice(user_key);
    k
}

/// Whether `engine_key` is an expiry index entry (or a prefix of the index).
pub fn is_expiry_index_key(engine_key: &[u8]) -> bool {
    engine_key.starts_with(&EXPIRY_INDEX_PREFIX)
}

/// The database and time of an expiry index entry's engine key, if it is one.
pub fn parse_expiry_index_key(engine_key: &[u8]) -> Option<(DbIndex, u64)> {
    let rest = engine_key.strip_prefix(&EXPIRY_INDEX_PREFIX)?;
    let (&db, rest) = rest.split_first()?;
    let (at, _) = rest.split_first_chunk::<8>()?;
    Some((db, u64::from_be_bytes(*at)))
}

/// The earliest time in `db`'s expiry index (stale entries included), if any.
pub fn first_expiry(b: &dyn KvBackend, db: DbIndex) -> Result<Option<u64>> {
    let prefix = expiry_index_prefix(db);
    let mut first = None;
    b.scan(
        Bound::Included(prefix.clone()),
        prefix_end(&prefix),
        &mut |k, _| {
            first = parse_expiry_index_key(k).map(|(_, at)| at);
            false
        },
    )?;
    Ok(first)
}

/// The prefix of `db`'s expiry index.
fn expiry_index_prefix(db: DbIndex) -> Vec<u8> {
    vec![EXPIRY_INDEX_PREFIX[0], EXPIRY_INDEX_PREFIX[1], db]
}

/// Every engine-key prefix holding `db`'s data (strings, documents, document expiry times,
/// the expiry index).
pub fn db_prefixes(db: DbIndex) -> Vec<Vec<u8>> {
    vec![
        vec![KEY_PREFIX, db],
        Space::Docs.prefix(db, b""),
        vec![DOC_TTL_PREFIX[0], DOC_TTL_PREFIX[1], db],
        expiry_index_prefix(db),
    ]
}

/// The database map: logical database (what SELECT names) -> physical database (the byte in
/// engine keys). SWAPDB swaps two entries; it is stored after the version byte of the format
/// record (absent: the identity).
pub type DbMap = [DbIndex; DATABASES_MAX];

/// The identity map.
pub fn identity_db_map() -> DbMap {
    std::array::from_fn(|i| i as DbIndex)
}

/// Reads the database map (the identity when none was stored).
pub fn read_db_map(b: &dyn KvBackend) -> Result<DbMap> {
    let Some(v) = b.get(&FORMAT_KEY)? else {
        return Ok(identity_db_map());
    };
    match v.len() {
        1 => Ok(identity_db_map()),
        n if n == 1 + DATABASES_MAX => {
            let mut map = [0; DATABASES_MAX];
            map.copy_from_slice(&v[1..]);
            let mut seen = [false; DATABASES_MAX];
            for &p in &map {
                if std::mem::replace(&mut seen[usize::from(p)], true) {
                    return Err(corrupt("the database map (not a permutation)"));
                }
            }
            Ok(map)
        }
        _ => Err(corrupt("the keyspace format record (wrong length)")),
    }
}

/// Stores the database map.
pub fn write_db_map(b: &dyn KvBackend, map: &DbMap) -> Result<()> {
    let mut v = Vec::with_capacity(1 + DATABASES_MAX);
    v.push(KEYSPACE_FORMAT_VERSION);
    v.extend_from_slice(map);
    b.put(&FORMAT_KEY, &v)
}

/// Brings the store's keyspace to the current format before the server uses it: a store without
/// a format record that holds format-1 strings (`'s' name` -> raw bytes, written by earlier
/// builds) has them rewritten as database-0 records, in batches; formats 2 to 7 get their
/// version byte rewritten (everything they hold reads as the current format); a newer format
/// is refused. Safe to interrupt: each batch writes the new keys and syncs before deleting the
/// old ones, and a restart continues with the old keys that are left.
pub fn prepare(b: &dyn KvBackend) -> Result<()> {
    if let Some(v) = b.get(&FORMAT_KEY)? {
        return match v.first() {
            Some(&KEYSPACE_FORMAT_VERSION) => Ok(()),
            Some(
                &old @ (KEYSPACE_FORMAT_NO_COLLECTIONS
                | KEYSPACE_FORMAT_NO_FLOORS
                | KEYSPACE_FORMAT_NO_STREAMS
                | KEYSPACE_FORMAT_NO_CEILINGS
                | KEYSPACE_FORMAT_NO_STREAM_NODES
                | KEYSPACE_FORMAT_NO_FIELD_ORDERS),
            ) => {
                let mut v = v.to_vec();
                v[0] = KEYSPACE_FORMAT_VERSION;
                b.put(&FORMAT_KEY, &v)?;
                b.sync()?;
                tracing::info!("keyspace format {old} -> {KEYSPACE_FORMAT_VERSION}");
                Ok(())
            }
            Some(&other) if other > KEYSPACE_FORMAT_VERSION => Err(Error::command(format!(
                "the store's keyspace format is {other}, newer than this build's \
                 {KEYSPACE_FORMAT_VERSION}: use a newer strata"
            ))),
            _ => Err(corrupt("the keyspace format record")),
        };
    }
    const BATCH_KEYS: usize = 1024;
    let mut migrated = 0u64;
    loop {
        let mut batch: Vec<(Vec<u8>, Bytes)> = Vec::new();
        b.scan(
            Bound::Included(vec![FORMAT1_STRING_PREFIX]),
            prefix_end(&[FORMAT1_STRING_PREFIX]),
            &mut |k, v| {
                batch.push((k.to_vec(), Bytes::copy_from_slice(v)));
                batch.len() < BATCH_KEYS
            },
        )?;
        if batch.is_empty() {
            break;
        }
        let puts = batch
            .iter()
            .map(|(k, v)| BatchOp::Put(string_key(0, &k[1..]), Record::encode(v, None)))
            .collect();
        b.write(puts)?;
        // The new keys are durable before the old ones go (with an engine whose batches across
        // partitions are not atomic after a crash, a lost put must not meet a kept delete).
        b.sync()?;
        migrated += batch.len() as u64;
        b.write(batch.into_iter().map(|(k, _)| BatchOp::Delete(k)).collect())?;
    }
    if migrated > 0 {
        tracing::info!(
            strings = migrated,
            "keyspace format 1 -> 2: strings moved to database 0"
        );
    }
    b.put(&FORMAT_KEY, &[KEYSPACE_FORMAT_VERSION])?;
    b.sync()?;
    Ok(())
}

/// A live string record of `key` in `db`.
pub fn read_record(b: &dyn KvBackend, db: DbIndex, key: &[u8], now: u64) -> Result<Option<Record>> {
    match b.get(&string_key(db, key))? {
        Some(v) => {
            let r = Record::decode(v)?;
            Ok((!r.expired(now)).then_some(r))
        }
        None => Ok(None),
    }
}

/// A document's expiry time, if it has one (whether or not the document exists).
pub fn doc_expiry(b: &dyn KvBackend, db: DbIndex, key: &[u8]) -> Result<Option<u64>> {
    match b.get(&doc_ttl_key(db, key))? {
        Some(v) => {
            let at: [u8; 8] = v[..]
                .try_into()
                .map_err(|_| corrupt("a document expiry record of the wrong length"))?;
            Ok(Some(u64::from_le_bytes(at)))
        }
        None => Ok(None),
    }
}

/// The raw bytes of the live document `key` in `db` (its expiry checked).
pub fn read_doc_bytes(
    b: &dyn KvBackend,
    db: DbIndex,
    key: &[u8],
    now: u64,
) -> Result<Option<Bytes>> {
    let Some(k) = Space::Docs.key(db, key) else {
        return Ok(None);
    };
    let Some(v) = b.get(&k)? else {
        return Ok(None);
    };
    if doc_expiry(b, db, key)?.is_some_and(|at| is_past(at, now)) {
        return Ok(None);
    }
    Ok(Some(v))
}

/// The kind and expiry time of the live key `key` in `db`. `docs` false skips the document
/// lookup (the store holds none).
pub fn lookup(
    b: &dyn KvBackend,
    db: DbIndex,
    key: &[u8],
    now: u64,
    docs: bool,
) -> Result<Option<(KeyType, Option<u64>)>> {
    if let Some(r) = read_record(b, db, key, now)? {
        return Ok(Some((r.kind, r.expire_at_ms)));
    }
    if docs && read_doc_bytes(b, db, key, now)?.is_some() {
        return Ok(Some((KeyType::Json, doc_expiry(b, db, key)?)));
    }
    Ok(None)
}

/// Removes `key` from `db` whatever it holds; true if a live key was removed (an expired one is
/// removed too, but does not count). Each kind is cleared with an atomic read-and-delete, so
/// concurrent DELs of one key count it once.
pub fn remove(b: &dyn KvBackend, db: DbIndex, key: &[u8], now: u64, docs: bool) -> Result<bool> {
    let mut removed = false;
    b.update(&string_key(db, key), &mut |old| {
        let Some(old) = old else {
            return Ok(Write::Keep);
        };
        if record_expiry(old)?.is_none_or(|at| at > now) {
            removed = true;
        }
        Ok(Write::Delete)
    })?;
    if !docs {
        return Ok(removed);
    }
    let Some(doc) = Space::Docs.key(db, key) else {
        return Ok(removed);
    };
    // The caller holds the document's lock (`Shared::doc_locks`): what is read here stays
    // true until the batch, which removes the document and its expiry record together (two
    // writes could leave the record behind, for a later document of the name to inherit).
    let expiry = doc_expiry(b, db, key)?;
    let existed = b.get(&doc)?.is_some();
    if existed || expiry.is_some() {
        let mut ops = vec![BatchOp::Delete(doc)];
        if expiry.is_some() {
            ops.push(BatchOp::Delete(doc_ttl_key(db, key)));
        }
        b.write(ops)?;
    }
    if existed && expiry.is_none_or(|at| at > now) {
        removed = true;
    }
    Ok(removed)
}

/// What [`visit_keys`] calls per key: name, kind, expiry time; false stops the walk.
pub type KeyVisitor<'a> = dyn FnMut(&[u8], KeyType, Option<u64>) -> bool + 'a;

/// Visits the live user keys of space `t` in `db` that start with `prefix` and sort after
/// `after` (exclusive), in engine order, with their kinds and expiry times, until `visit`
/// returns false. Expired keys are passed over.
pub fn visit_keys(
    b: &dyn KvBackend,
    db: DbIndex,
    t: Space,
    prefix: &[u8],
    after: Option<&[u8]>,
    now: u64,
    visit: &mut KeyVisitor<'_>,
) -> Result<()> {
    let lower = t.prefix(db, prefix);
    let start = match after.and_then(|a| t.key(db, a)) {
        Some(a) if a >= lower => Bound::Excluded(a),
        _ => Bound::Included(lower.clone()),
    };
    let mut failure = None;
    let mut docs = Vec::new();
    b.scan(start, prefix_end(&lower), &mut |k, v| {
        let Some(user) = t.user_key(db, k) else {
            return true;
        };
        match t {
            Space::Records => match record_kind(v).and_then(|k| Ok((k, record_expiry(v)?))) {
                Ok((_, expiry)) if expiry.is_some_and(|at| is_past(at, now)) => true,
                Ok((kind, expiry)) => visit(&user, kind, expiry),
                Err(e) => {
                    failure = Some(e);
                    false
                }
            },
            Space::Docs => {
                // Expiry times of documents are other records: collected, read after the scan.
                docs.push(user);
                true
            }
        }
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    for user in docs {
        let expiry = doc_expiry(b, db, &user)?;
        if expiry.is_some_and(|at| is_past(at, now)) {
            continue;
        }
        if !visit(&user, KeyType::Json, expiry) {
            break;
        }
    }
    Ok(())
}

/// Numbers of live keys and of live keys with an expiry time in `db` (a walk: O(keys)).
pub fn count(b: &dyn KvBackend, db: DbIndex, now: u64) -> Result<(u64, u64)> {
    tally(b, db, now).map(|t| (t.keys, t.expires))
}

/// What INFO keyspace reports of a database.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Live keys.
    pub keys: u64,
    /// Live keys with an expiry time.
    pub expires: u64,
    /// Their times left, summed (ms).
    pub ttl_left_ms: u128,
}

/// Counts `db`'s live keys (a walk: O(keys)).
pub fn tally(b: &dyn KvBackend, db: DbIndex, now: u64) -> Result<Tally> {
    let mut t = Tally::default();
    for space in Space::ALL {
        visit_keys(b, db, space, b"", None, now, &mut |_, _, expiry| {
            t.keys += 1;
            if let Some(at) = expiry {
                t.expires += 1;
                t.ttl_left_ms += u128::from(at.saturating_sub(now));
            }
            true
        })?;
    }
    Ok(t)
}

/// Whether the store holds at least one JSON document in any database (one step of a scan
/// per layout).
pub fn any_document(b: &dyn KvBackend) -> Result<bool> {
    let mut found = false;
    for prefix in [&DOC_KEY_PREFIX[..], &DOC_DB_PREFIX[..]] {
        b.scan(
            Bound::Included(prefix.to_vec()),
            prefix_end(prefix),
            &mut |_, _| {
                found = true;
                false
            },
        )?;
    }
    Ok(found)
}

/// An expiry index entry: its engine key, the time, the user key.
pub type DueExpiry = (Vec<u8>, u64, Vec<u8>);

/// Expiry index entries of `db` due at `now`, oldest first, at most `limit`: `(entry's engine
/// key, time, user key)`.
pub fn due_expiries(
    b: &dyn KvBackend,
    db: DbIndex,
    now: u64,
    limit: usize,
) -> Result<Vec<DueExpiry>> {
    let prefix = expiry_index_prefix(db);
    let mut end = prefix.clone();
    // Entries past their time: before `now` (a key is there through its own millisecond).
    end.extend_from_slice(&now.to_be_bytes());
    let mut out = Vec::new();
    b.scan(
        Bound::Included(prefix.clone()),
        Bound::Excluded(end),
        &mut |k, _| {
            if let Some(rest) = k.get(prefix.len()..) {
                if let Some((at, user)) = rest.split_first_chunk::<8>() {
                    out.push((k.to_vec(), u64::from_be_bytes(*at), user.to_vec()));
                }
            }
            out.len() < limit
        },
    )?;
    Ok(out)
}

/// Deletes `key` in `db` if it expired at `now` (checked atomically against the stored record);
/// true when a key was removed.
pub fn expire_if_due(b: &dyn KvBackend, db: DbIndex, key: &[u8], now: u64) -> Result<bool> {
    let mut removed = expire_record_if_due(b, db, key, now)?;
    if let Some(at) = doc_expiry(b, db, key)? {
        if is_past(at, now) {
            let mut ops = vec![BatchOp::Delete(doc_ttl_key(db, key))];
            if let Some(doc) = Space::Docs.key(db, key) {
                removed |= b.get(&doc)?.is_some();
                ops.push(BatchOp::Delete(doc));
            }
            b.write(ops)?;
        }
    }
    Ok(removed)
}

/// Deletes the record (string or collection) of `key` in `db` if it expired at `now`, checked
/// atomically against the stored record; true when it was removed. Documents are left alone:
/// their read-modify-writes are guarded by the document locks that [`expire_if_due`]'s callers
/// take.
pub fn expire_record_if_due(b: &dyn KvBackend, db: DbIndex, key: &[u8], now: u64) -> Result<bool> {
    let mut removed = false;
    b.update(&string_key(db, key), &mut |old| {
        Ok(match old {
            Some(v) if record_expiry(v)?.is_some_and(|at| is_past(at, now)) => {
                removed = true;
                Write::Delete
            }
            _ => Write::Keep,
        })
    })?;
    Ok(removed)
}

thread_local! {
    /// How many times this thread found a stored record past its expiry time
    /// ([`Record::expired`]). The dispatcher compares it around a command: a change, at the cost
    /// of one thread-local read per command, says the command met an expired key, which it then
    /// removes (passive expiry, `commands::passive_expiry`).
    static EXPIRED_SEEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn note_expired_seen() {
    EXPIRED_SEEN.with(|n| n.set(n.get().wrapping_add(1)));
}

/// See [`EXPIRED_SEEN`].
pub(crate) fn expired_seen() -> u64 {
    EXPIRED_SEEN.with(std::cell::Cell::get)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::backend::MemoryBackend;

    #[test]
    fn document_prefixes_agree_with_docstore_keys() {
        let names = ["", "a", "ab", "a\0b", "user:1", "user:10", "üñí", "a\0"];
        for db in [0u8, 1, 15] {
            for name in names {
                let full = Space::Docs.key(db, name.as_bytes()).unwrap();
                assert_eq!(Space::Docs.user_key(db, &full).unwrap(), name.as_bytes());
                for other in names {
                    let p = Space::Docs.prefix(db, other.as_bytes());
                    assert_eq!(
                        full.starts_with(&p),
                        name.as_bytes().starts_with(other.as_bytes()),
                        "db {db} name {name:?} prefix {other:?}"
                    );
                }
            }
        }
        assert_eq!(
            Space::Docs.key(0, b"k").unwrap(),
            DocStore::engine_key(&Doc::String("k".into())).unwrap()
        );
        assert_eq!(Space::Docs.key(0, b"\xff"), None);
        assert_eq!(
            Space::Records.user_key(3, &string_key(3, b"k")).unwrap(),
            b"k"
        );
        assert_eq!(Space::Records.user_key(2, &string_key(3, b"k")), None);
    }

    #[test]
    fn records_round_trip_and_damage_is_named() {
        for expiry in [None, Some(0), Some(1_700_000_000_123)] {
            for payload in [&b""[..], b"v", &[0x80u8; 300]] {
                let r = Record::decode(Bytes::from(Record::encode(payload, expiry))).unwrap();
                assert_eq!(r.expire_at_ms, expiry);
                assert_eq!(&r.payload[..], payload);
            }
        }
        assert!(Record::decode(Bytes::new()).is_err());
        assert!(Record::decode(Bytes::from_static(&[0x80, 1, 2])).is_err());
        // Unknown kinds, and collection kinds with encoding bits they never carry.
        assert!(Record::decode(Bytes::from_static(&[0x0f, 1])).is_err());
        assert!(Record::decode(Bytes::from_static(&[0x06, 1])).is_err());
        assert!(Record::decode(Bytes::from_static(&[0x15, 1])).is_err());
        assert!(Record::decode(Bytes::from_static(&[0x13, 1])).is_err());
        assert!(Record::decode(Bytes::from_static(&[0x21, 1])).is_err());
        for (header, kind) in [
            (0x01, KeyType::Hash),
            (0x12, KeyType::Set),
            (0x03, KeyType::List),
            (0x05, KeyType::Stream),
        ] {
            assert_eq!(
                Record::decode(Bytes::from(vec![header])).unwrap().kind,
                kind
            );
        }
        assert!(Record::decode(Bytes::from_static(&[0x40])).is_err());
        let r = Record::decode(Bytes::from(Record::encode(b"x", Some(10)))).unwrap();
        // Redis's keyIsExpired: gone after its millisecond, not during it.
        assert!(r.expired(11) && !r.expired(10));
        for e in [Encoding::ByContent, Encoding::Raw, Encoding::NotInt] {
            let r = Record::decode(Bytes::from(Record::encode_as(b"v", Some(5), e))).unwrap();
            assert_eq!(
                (r.encoding, r.expire_at_ms, &r.payload[..]),
                (e, Some(5), &b"v"[..])
            );
        }
        assert!(Record::decode(Bytes::from_static(&[0x30, b'v'])).is_err());
        // The header-only reader agrees with the full decoder on every one-byte change.
        let rec = Record::encode(b"payload", Some(1_700_000_000_000));
        for i in 0..rec.len() {
            for bit in 0..8 {
                let mut b = rec.clone();
                b[i] ^= 1 << bit;
                let full = Record::decode(Bytes::from(b.clone())).map(|r| r.expire_at_ms);
                assert_eq!(record_expiry(&b).ok(), full.ok(), "byte {i} bit {bit}");
            }
        }
    }

    #[test]
    fn format_one_strings_move_to_database_zero_once() {
        let b = MemoryBackend::new();
        b.put(b"sname", b"value").unwrap();
        b.put(b"s", b"empty-name").unwrap();
        b.put(b"raw", b"not a redis key").unwrap();
        prepare(&b).unwrap();
        let r = read_record(&b, 0, b"name", 0).unwrap().unwrap();
        assert_eq!(&r.payload[..], b"value");
        assert_eq!(
            &read_record(&b, 0, b"", 0).unwrap().unwrap().payload[..],
            b"empty-name"
        );
        assert_eq!(b.get(b"sname").unwrap(), None);
        assert_eq!(&b.get(b"raw").unwrap().unwrap()[..], b"not a redis key");
        // A second start changes nothing; a newer format is refused.
        b.put(&string_key(0, b"x"), &Record::encode(b"1", None))
            .unwrap();
        prepare(&b).unwrap();
        assert!(read_record(&b, 0, b"x", 0).unwrap().is_some());
        b.put(&FORMAT_KEY, &[KEYSPACE_FORMAT_VERSION + 1]).unwrap();
        assert!(prepare(&b).is_err());
    }

    /// Formats 2 to 7 open as format 8 (version byte rewritten); a format-3 collection
    /// record (no floor) reads with no floor and no ceiling, so nothing it holds is skipped,
    /// and a hash record of format 7 reads with no field order.
    #[test]
    fn older_formats_are_upgraded_in_place() {
        for old in [
            KEYSPACE_FORMAT_NO_COLLECTIONS,
            KEYSPACE_FORMAT_NO_FLOORS,
            KEYSPACE_FORMAT_NO_STREAMS,
            KEYSPACE_FORMAT_NO_CEILINGS,
            KEYSPACE_FORMAT_NO_STREAM_NODES,
            KEYSPACE_FORMAT_NO_FIELD_ORDERS,
        ] {
            let b = MemoryBackend::new();
            b.put(&FORMAT_KEY, &[old]).unwrap();
            let mut meta = Vec::new();
            meta.extend_from_slice(&7u64.to_le_bytes());
            meta.extend_from_slice(&2u64.to_le_bytes());
            let record = Record::encode_collection(KeyType::Set, &meta, None, Encoding::ByContent);
            b.put(&string_key(0, b"set"), &record).unwrap();
            prepare(&b).unwrap();
            assert_eq!(
                &b.get(&FORMAT_KEY).unwrap().unwrap()[..],
                &[KEYSPACE_FORMAT_VERSION]
            );
            let r = read_record(&b, 0, b"set", 0).unwrap().unwrap();
            let m = crate::collection::Meta::decode(&r.payload).unwrap();
            assert_eq!(m, crate::collection::Meta::new(7, 2));
            assert!(m.floor.as_bytes().is_empty());
            assert!(m.ceiling.as_bytes().is_empty());
            let hash = Record::encode_collection(KeyType::Hash, &meta, None, Encoding::ByContent);
            b.put(&string_key(0, b"hash"), &hash).unwrap();
            let r = read_record(&b, 0, b"hash", 0).unwrap().unwrap();
            assert_eq!(
                crate::collection::FieldOrder::of_payload(&r.payload).unwrap(),
                None
            );
        }
    }

    /// Expired strings lose their bytes at compaction (table values) and value-log collection
    /// (separated values) with no write and no index entry (the filter, not active expiry): a
    /// stub of header and expiry time stays, which reads as absent, and the key counts stay
    /// known and exact (the key goes when active expiry deletes it). Live ones and other keys
    /// stay whole.
    #[test]
    fn compaction_reclaims_expired_records() {
        for value_bytes in [5usize, 2000] {
            let dir = tempfile::tempdir().unwrap();
            let mut opts = crate::store_options(strata::Options::tiny(), dir.path());
            opts.key_router = None;
            let db = strata::Db::open(dir.path(), opts).unwrap();
            db.recount_keys().unwrap();
            // Past the grace period (strings are reclaimed a minute after their time).
            let past = now_ms() - 2 * crate::collection::EXPIRED_ELEMENTS_GRACE_MS;
            let future = now_ms() + 3_600_000;
            let value = vec![b'v'; value_bytes];
            // Every key, then the unexpired ones again: the first value logs are then two
            // thirds dead, so the full compaction below collects them (an expired value in a
            // mostly live value log waits for its log to be collected).
            for round in 0..2 {
                for i in 0..300u32 {
                    let at = match i % 3 {
                        0 if round == 0 => Some(past),
                        0 => continue,
                        1 => Some(future),
                        _ => None,
                    };
                    let key = string_key(0, format!("key{i}").as_bytes());
                    db.put(&key, &Record::encode(&value, at)).unwrap();
                }
                db.flush().unwrap();
            }
            // A raw key outside the 'k' namespace whose bytes look like an expired record.
            db.put(b"raw", &Record::encode(b"x", Some(past))).unwrap();
            db.compact().unwrap();
            for i in 0..300u32 {
                let key = string_key(0, format!("key{i}").as_bytes());
                let stored = db.get(&key).unwrap().unwrap();
                let r = Record::decode(stored).unwrap();
                if i % 3 == 0 {
                    assert_eq!((r.expire_at_ms, r.payload.len()), (Some(past), 0), "key{i}");
                } else {
                    assert_eq!(r.payload.len(), value_bytes, "key{i}");
                }
            }
            assert!(db.get(b"raw").unwrap().is_some());
            assert_eq!(db.key_count(0), Some(300), "values of {value_bytes} bytes");
            if value_bytes >= 1000 {
                // 200 live values; the 100 expired ones would make it 300.
                let kept: u64 = db
                    .stats()
                    .partitions
                    .iter()
                    .map(|p| p.table_bytes() + p.value_log_live_bytes)
                    .sum();
                let v = value_bytes as u64;
                assert!(
                    kept < 250 * v,
                    "expired values reclaimed: {kept} bytes kept"
                );
            }
        }
    }

    #[test]
    fn expired_keys_are_absent_and_the_index_finds_them() {
        let b = MemoryBackend::new();
        b.write(vec![
            BatchOp::Put(string_key(0, b"a"), Record::encode(b"1", Some(100))),
            BatchOp::Put(expiry_index_key(0, 100, b"a"), vec![]),
            BatchOp::Put(string_key(0, b"b"), Record::encode(b"2", None)),
        ])
        .unwrap();
        // A key is there through its own millisecond (Redis's keyIsExpired: now > at).
        assert!(lookup(&b, 0, b"a", 100, false).unwrap().is_some());
        assert!(lookup(&b, 0, b"a", 101, false).unwrap().is_none());
        assert_eq!(count(&b, 0, 100).unwrap(), (2, 1));
        assert_eq!(count(&b, 0, 101).unwrap(), (1, 0));
        assert!(due_expiries(&b, 0, 100, 10).unwrap().is_empty());
        assert!(!expire_if_due(&b, 0, b"a", 100).unwrap());
        let due = due_expiries(&b, 0, 101, 10).unwrap();
        assert_eq!(due.len(), 1);
        assert_eq!((due[0].1, &due[0].2[..]), (100, &b"a"[..]));
        assert!(expire_if_due(&b, 0, b"a", 101).unwrap());
        assert!(!expire_if_due(&b, 0, b"b", 101).unwrap());
        assert_eq!(b.get(&string_key(0, b"a")).unwrap(), None);
    }
}
