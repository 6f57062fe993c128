//! The LSM engine, one tree per partition. Data flows down this list: `tree` (write and read
//! paths, `install`) -> `memtable` -> `flush` -> `sstable` files listed by `version` (the
//! manifest) -> `compaction`; beside them `recovery` (open), `throttle` (write stalls), `ingest`
//! (bulk load into tables), `reverse` (scans in descending key order) and `vlog` (value logs:
//! key-value separation, their GC and sampling).
//! The LSM stands on `journal` and `util`; it never imports the hash engine.

pub(crate) mod compaction;
mod flush;
pub(crate) mod ingest;
pub(crate) mod memtable;
pub(crate) mod recovery;
mod reverse;
pub(crate) mod sstable;
mod throttle;
pub(crate) mod tree;
pub(crate) mod version;
mod visit;
pub(crate) mod vlog;

/// Levels per partition: level 0 (overlapping flushed tables) and six sorted levels.
pub(crate) const LEVELS: usize = 7;

/// A key's 64-bit hash (xxh3): the memtables' hash maps and the tables' filters both use it,
/// so a point lookup hashes its key once however many memtables and tables it asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KeyHash(pub(crate) u64);

impl KeyHash {
    pub(crate) fn of(key: &[u8]) -> KeyHash {
        KeyHash(sstable::bloom::hash(key))
    }
}
