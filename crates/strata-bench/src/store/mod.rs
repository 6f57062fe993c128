//! What the harness needs of an engine ([`BenchStore`]); implemented for Strata here and for the
//! peers in [`peers`] behind the `peers` feature, so every engine runs the same generator in
//! the same harness. [`open_store`] is the one place that turns an [`EngineSpec`] into a store.

use std::path::Path;

use crate::error::{Error, Result};
use crate::spec::{Engine, EngineSpec};

#[cfg(feature = "peers")]
pub mod peers;

/// An engine under test. All methods may be called from many threads at once.
pub trait BenchStore: Send + Sync {
    /// Short name for reports.
    fn name(&self) -> &'static str;
    /// Stores a value.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Returns whether the key was found.
    fn get(&self, key: &[u8]) -> Result<bool>;
    /// Deletes a key.
    fn delete(&self, key: &[u8]) -> Result<()>;
    /// Writes memtables out and merges everything into as few files as the engine likes (used to
    /// finish building the read-only data set). Engines without such a call do nothing.
    fn compact(&self) -> Result<()> {
        Ok(())
    }
    /// Loads entries given in strictly increasing key order, bypassing the write path where the
    /// engine has a bulk load (Strata's `Db::ingest` writes table files directly). Returns the
    /// number of entries loaded. The default puts them one by one.
    fn bulk_load(&self, sorted: &mut dyn Iterator<Item = (Vec<u8>, &[u8])>) -> Result<u64> {
        let mut n = 0;
        for (k, v) in sorted {
            self.put(&k, v)?;
            n += 1;
        }
        Ok(n)
    }
    /// Whether [`BenchStore::bulk_load`] bypasses the write path.
    fn has_bulk_load(&self) -> bool {
        false
    }
    /// Finishes background work and closes.
    fn close(self: Box<Self>) -> Result<()>;
    /// Write amplification so far, as the engine itself counts it (bytes it wrote to its log and
    /// table files per byte of keys and values written by the user), if it reports one.
    fn write_amplification(&self) -> Option<f64> {
        None
    }
    /// Engine counters worth keeping with the result (flushes, compactions, stalls), if any.
    fn engine_stats(&self) -> Option<serde_json::Value> {
        None
    }
    /// Bytes of memory the engine says it holds (memtables, block cache, indexes), if it says.
    fn memory_bytes(&self) -> Option<u64> {
        None
    }
}

/// Opens the engine `spec` names in `dir` (which should be empty).
pub fn open_store(spec: &EngineSpec, dir: &Path) -> Result<Box<dyn BenchStore>> {
    match spec.engine {
        Engine::Strata | Engine::StrataLog => {
            Ok(Box::new(StrataStore::open(dir, spec.strata_options())?))
        }
        #[cfg(feature = "peers")]
        Engine::Rocksdb | Engine::RocksdbBlob => Ok(Box::new(peers::RocksStore::open(dir, spec)?)),
        #[cfg(feature = "peers")]
        Engine::Fjall | Engine::FjallBlob => Ok(Box::new(peers::FjallStore::open(dir, spec)?)),
        #[cfg(feature = "peers")]
        Engine::Sled => Ok(Box::new(peers::SledStore::open(dir, spec)?)),
        #[cfg(not(feature = "peers"))]
        other => Err(Error::Invalid(format!(
            "{other} is a peer engine: rebuild with the `peers` feature, e.g. \
             `ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu cargo build --release -p strata-cli \
             --features strata-bench/peers` (see BENCHMARKS.md)"
        ))),
    }
}

/// Strata under test, with either of its engines.
pub struct StrataStore {
    db: strata::Db,
    engine: strata::Engine,
    /// (disk bytes written, user bytes written) when the last bulk load finished: write
    /// amplification counts what came after (a preloaded run's own writes), as the peers'
    /// counters, which leave ingested files out, do.
    after_bulk_load: parking_lot::Mutex<(u64, u64)>,
}

/// Wraps Strata's error of operation `op`.
pub(crate) fn strata_err(op: &'static str) -> impl FnOnce(strata::Error) -> Error {
    move |e| Error::engine("strata", op, e)
}

impl StrataStore {
    /// Opens Strata in `dir`.
    pub fn open(dir: &Path, opts: strata::Options) -> Result<Self> {
        Ok(StrataStore {
            engine: opts.engine,
            db: strata::Db::open(dir, opts).map_err(strata_err("open"))?,
            after_bulk_load: parking_lot::Mutex::new((0, 0)),
        })
    }

    /// The database, for measurements beyond the trait.
    pub fn db(&self) -> &strata::Db {
        &self.db
    }
}

impl BenchStore for StrataStore {
    fn name(&self) -> &'static str {
        match self.engine {
            strata::Engine::Lsm => "strata",
            strata::Engine::Log => "strata-log",
        }
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db.put(key, value).map_err(strata_err("put"))
    }
    fn get(&self, key: &[u8]) -> Result<bool> {
        self.db
            .get(key)
            .map(|v| v.is_some())
            .map_err(strata_err("get"))
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        self.db.delete(key).map_err(strata_err("delete"))
    }
    fn compact(&self) -> Result<()> {
        self.db.flush().map_err(strata_err("flush"))?;
        self.db.compact().map_err(strata_err("compact"))
    }
    fn bulk_load(&self, sorted: &mut dyn Iterator<Item = (Vec<u8>, &[u8])>) -> Result<u64> {
        let loaded = self.db.ingest(sorted).map_err(strata_err("ingest"))?;
        let stats = self.db.stats();
        *self.after_bulk_load.lock() = (stats.disk_bytes_written(), stats.user_bytes_written());
        Ok(loaded)
    }
    fn has_bulk_load(&self) -> bool {
        // The log engine has no tables to write directly: its `Db::ingest` writes batches through
        // the log, i.e. the write path.
        self.engine == strata::Engine::Lsm
    }
    fn close(self: Box<Self>) -> Result<()> {
        self.db.close().map_err(strata_err("close"))
    }
    fn write_amplification(&self) -> Option<f64> {
        let stats = self.db.stats();
        let (disk_before, user_before) = *self.after_bulk_load.lock();
        let user = stats.user_bytes_written().saturating_sub(user_before);
        let disk = stats.disk_bytes_written().saturating_sub(disk_before);
        Some(if user == 0 {
            0.0
        } else {
            disk as f64 / user as f64
        })
    }
    fn engine_stats(&self) -> Option<serde_json::Value> {
        Some(strata_engine_stats(&self.db))
    }
    fn memory_bytes(&self) -> Option<u64> {
        Some(self.db.stats().memory_bytes())
    }
}

/// Strata's own counters, summed over partitions (flushes, compactions, write stalls, bytes
/// written by kind, value logs, tables per level per partition): what `engineStats` holds in
/// result lines.
pub fn strata_engine_stats(db: &strata::Db) -> serde_json::Value {
    let stats = db.stats();
    let sum =
        |f: fn(&strata::PartitionStats) -> u64| -> u64 { stats.partitions.iter().map(f).sum() };
    let levels: Vec<String> = stats
        .partitions
        .iter()
        .map(|p| {
            p.levels
                .iter()
                .map(|l| l.tables.to_string())
                .collect::<Vec<_>>()
                .join("/")
        })
        .collect();
    serde_json::json!({
        "flushes": sum(|p| p.flushes),
        "compactions": sum(|p| p.compactions),
        "writeStalls": sum(|p| p.write_stalls),
        "walBytesWritten": sum(|p| p.wal_bytes_written),
        "flushBytesWritten": sum(|p| p.flush_bytes_written),
        "compactionBytesWritten": sum(|p| p.compaction_bytes_written),
        "valueLogBytes": sum(|p| p.value_log_bytes),
        "valueLogGcs": sum(|p| p.value_log_gcs),
        "valueLogGcBytesWritten": sum(|p| p.value_log_gc_bytes_written),
        "movedValueFiles": sum(|p| p.moved_value_files),
        "movedValueBytesWritten": sum(|p| p.moved_value_bytes_written),
        "tablesPerLevelPerPartition": levels,
        "indexKeys": sum(|p| p.index_keys),
        "indexBytes": sum(|p| p.index_bytes),
        "memoryBytes": stats.memory_bytes(),
        "blockCacheBytes": stats.block_cache_bytes,
        "memtableBytes": sum(|p| p.memtable_bytes + p.immutable_memtable_bytes),
        "tableMemoryBytes": sum(|p| p.table_memory_bytes),
    })
}
