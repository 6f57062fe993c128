//! One LSM tree (= one partition): write-ahead log, memtables, table files, versions, compaction.

pub(crate) mod compaction;
pub(crate) mod fsutil;
pub(crate) mod memtable;
pub(crate) mod sstable;
pub(crate) mod tree;
pub(crate) mod version;
pub(crate) mod vlog;

/// Levels per partition: level 0 (overlapping flushed tables) and six sorted levels.
pub(crate) const LEVELS: usize = 7;
