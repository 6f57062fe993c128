//! # Strata
//!
//! An embeddable, durable, hash-partitioned LSM-tree key/value engine.
//!
//! Keys are routed by a stable hash (xxh3-64, seed 0, modulo the partition count) to one of
//! `Options::partitions` independent LSM trees. Each tree has its own write-ahead log, memtables,
//! table files and manifest; a shared pool of background threads flushes and compacts them.
//! Range and prefix scans merge all partitions in key order.
//!
//! ```
//! use strata::{Db, Options, WriteBatch};
//! # fn main() -> strata::Result<()> {
//! let dir = tempfile::tempdir().map_err(|e| strata::Error::io("tempdir", e))?;
//! let db = Db::open(dir.path(), Options::default())?;
//! db.put(b"apple", b"red")?;
//! let mut batch = WriteBatch::new();
//! batch.put(b"banana", b"yellow");
//! batch.delete(b"apple");
//! db.write(batch)?;
//! assert_eq!(db.get(b"banana")?.as_deref(), Some(&b"yellow"[..]));
//! assert_eq!(db.get(b"apple")?, None);
//! let keys: Vec<_> = db.scan_prefix(b"b").map(|kv| kv.map(|(k, _)| k)).collect::<Result<_, _>>()?;
//! assert_eq!(keys, vec![bytes::Bytes::from_static(b"banana")]);
//! db.put(b"cherry", b"dark red")?;
//! // Greatest key first, read from the top of the range down.
//! let last = db.scan_rev(&b"a"[..]..&b"z"[..]).next().transpose()?;
//! assert_eq!(last.map(|(k, _)| k), Some(bytes::Bytes::from_static(b"cherry")));
//! db.close()?;
//! # Ok(())
//! # }
//! ```
//!
//! Module map (data flows top to bottom): [`db`] routes each key to a partition (`partition`),
//! which runs one of two engines: `lsm` (an LSM tree: memtables, tables, compaction, value logs)
//! or `hashlog` (a log-structured hash store). Both write through `journal` (log format, group
//! commit, replay) and stand on `util`; neither imports the other. `background` runs their
//! flushes, compactions and merges. ARCHITECTURE.md has the full table.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod background;
mod batch;
mod checkpoint;
pub mod db;
mod error;
pub mod extsort;
mod hashlog;
mod journal;
mod lsm;
mod meta;
mod options;
mod partition;
mod seqno;
mod snapshot;
mod stats;
mod txn;
mod util;
pub mod vfs;

pub use batch::Update;
pub use batch::WriteBatch;
pub use bytes::Bytes;
pub use db::{Db, GroupHold, Scan};
pub use error::{Error, Result};
pub use journal::{deferring_log_writes, GroupRead, LogWrites};
pub use meta::StoreLayout;
pub use options::{
    CompactionFilter, Compression, Engine, KeyClasses, KeyRouter, Options, SettledRead, SyncMode,
    KEY_CLASSES_MAX, PARTITIONS_MAX,
};
pub use snapshot::Snapshot;
pub use stats::{LevelStats, PartitionStats, Stats};
pub use txn::Transaction;
pub use util::nowait::{waiting_forbidden, without_waiting};
pub use util::varint;

/// Format details shared with tests and tools that decode files independently.
pub mod format {
    pub use crate::hashlog::hint::HINT_FORMAT_VERSION;
    pub use crate::journal::format::WAL_FORMAT_VERSION;
    pub use crate::lsm::sstable::{TABLE_FORMAT_VERSION, TABLE_MAGIC};
    pub use crate::lsm::version::MANIFEST_FORMAT_VERSION;
    pub use crate::meta::{partition_of, META_FORMAT_VERSION};
}
