//! The block cache: decoded (decompressed, checksum-verified) table blocks shared by all
//! partitions, bounded by a byte budget. Keys are `(table cache id, block offset)`.

use bytes::Bytes;

#[derive(Clone)]
struct BlockWeight;

impl quick_cache::Weighter<(u64, u64), Bytes> for BlockWeight {
    fn weight(&self, _key: &(u64, u64), val: &Bytes) -> u64 {
        // Count the per-entry bookkeeping too, so tiny blocks cannot overrun the budget.
        val.len() as u64 + 64
    }
}

/// A byte-bounded cache of blocks.
pub(crate) struct BlockCache {
    inner: Option<quick_cache::sync::Cache<(u64, u64), Bytes, BlockWeight>>,
}

impl BlockCache {
    pub(crate) fn new(bytes_max: usize) -> Self {
        let inner = (bytes_max > 0).then(|| {
            let items = (bytes_max / 4096).max(16);
            quick_cache::sync::Cache::with_weighter(items, bytes_max as u64, BlockWeight)
        });
        BlockCache { inner }
    }

    /// Bytes of blocks held now (the weights of the entries; 0 without a cache).
    pub(crate) fn used_bytes(&self) -> u64 {
        self.inner.as_ref().map_or(0, |c| c.weight())
    }

    pub(crate) fn get(&self, table: u64, offset: u64) -> Option<Bytes> {
        self.inner.as_ref()?.get(&(table, offset))
    }

    pub(crate) fn insert(&self, table: u64, offset: u64, block: Bytes) {
        if let Some(c) = &self.inner {
            c.insert((table, offset), block);
        }
    }
}
