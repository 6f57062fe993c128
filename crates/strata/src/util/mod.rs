//! Small generic pieces that both engines stand on and that know nothing of either: file-system
//! helpers, byte coding and varints, the block cache, the k-way merge of sorted streams, and
//! reads that refuse to wait for the disk. Nothing here imports an engine module.

pub(crate) mod cache;
pub(crate) mod coding;
pub(crate) mod fsutil;
pub(crate) mod merge;
pub(crate) mod nowait;
pub mod varint;
pub(crate) mod work;
