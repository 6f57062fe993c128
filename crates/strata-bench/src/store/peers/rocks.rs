//! RocksDB as a peer, through the `rocksdb` crate and the system librocksdb. Configured as the
//! RocksDB tuning guide suggests for point reads: bloom filters of 10 bits per key (full filters),
//! index and filter blocks in the block cache with level-0 ones pinned, an LRU block cache of the
//! same budget as Strata's, `max_background_jobs` = the spec's background threads, default 64 MiB
//! write buffers, WAL on. Statistics are on so that write amplification can be read from RocksDB's
//! own tickers: (`rocksdb.wal.bytes` + `rocksdb.flush.write.bytes` + `rocksdb.compact.write.bytes`)
//! / `rocksdb.bytes.written`. `rocksdb-blob` is the same with the integrated BlobDB on.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, IngestExternalFileOptions, Options, SstFileWriter,
    WriteOptions, DB,
};

use super::PeriodicSync;
use crate::error::{Error, Result};
use crate::spec::{CompressionSpec, Engine, EngineSpec, SyncSpec};
use crate::store::BenchStore;

const NAME: &str = "rocksdb";

/// Values of at least this many bytes go to blob files in `rocksdb-blob`: Strata's default
/// separation threshold without compression.
const SEPARATION_BYTES_MIN: u64 = 512;

/// A bulk load cuts its table files at about this size (RocksDB's `target_file_size_base` is
/// 64 MiB; bulk-loaded data is never compacted, so larger files only mean fewer of them).
const BULK_FILE_BYTES: u64 = 256 << 20;

/// RocksDB under test.
pub struct RocksStore {
    db: Arc<DB>,
    dir: std::path::PathBuf,
    opts: Options,
    write_opts: WriteOptions,
    syncer: Option<PeriodicSync>,
}

fn err(op: &'static str) -> impl FnOnce(rocksdb::Error) -> Error {
    move |e| Error::engine(NAME, op, e)
}

impl RocksStore {
    /// Opens (creates) a database in `dir` with the settings in `spec`.
    pub fn open(dir: &Path, spec: &EngineSpec) -> Result<Self> {
        let cache_bytes = usize::try_from(spec.block_cache_bytes).unwrap_or(usize::MAX);
        let cache = Cache::new_lru_cache(cache_bytes).map_err(err("block cache"))?;
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_bloom_filter(10.0, false);
        table.set_cache_index_and_filter_blocks(true);
        table.set_pin_l0_filter_and_index_blocks_in_cache(true);

        let threads = i32::try_from(spec.background_threads.max(1)).unwrap_or(i32::MAX);
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.increase_parallelism(threads);
        opts.set_max_background_jobs(threads);
        opts.set_block_based_table_factory(&table);
        opts.set_level_compaction_dynamic_level_bytes(true);
        opts.set_bytes_per_sync(1 << 20);
        opts.set_compression_type(match spec.compression {
            CompressionSpec::None => DBCompressionType::None,
            CompressionSpec::Lz4 => DBCompressionType::Lz4,
        });
        opts.enable_statistics();
        if spec.engine == Engine::RocksdbBlob {
            // Integrated BlobDB with Strata's separation threshold and garbage collection in
            // compaction: values in the oldest quarter of blob files are moved as compactions
            // meet them (RocksDB's defaults for the cutoff and force threshold).
            opts.set_enable_blob_files(true);
            opts.set_min_blob_size(SEPARATION_BYTES_MIN);
            opts.set_blob_file_size(64 << 20);
            opts.set_enable_blob_gc(true);
            opts.set_blob_gc_age_cutoff(0.25);
            opts.set_blob_gc_force_threshold(1.0);
        }

        let db = Arc::new(DB::open(&opts, dir).map_err(err("open"))?);
        let mut write_opts = WriteOptions::default();
        write_opts.set_sync(spec.sync == SyncSpec::Always);
        let syncer = match spec.sync {
            SyncSpec::EveryMs(ms) => {
                let db = db.clone();
                Some(PeriodicSync::start(Duration::from_millis(ms), move || {
                    db.flush_wal(true).map_err(err("flush_wal"))
                }))
            }
            SyncSpec::Always | SyncSpec::Never => None,
        };
        Ok(RocksStore {
            db,
            dir: dir.to_path_buf(),
            opts,
            write_opts,
            syncer,
        })
    }

    fn ticker(stats: &str, name: &str) -> Option<u64> {
        stats.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?;
            let rest = rest.trim_start().strip_prefix("COUNT :")?;
            rest.trim().parse().ok()
        })
    }
}

impl BenchStore for RocksStore {
    fn name(&self) -> &'static str {
        NAME
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db
            .put_opt(key, value, &self.write_opts)
            .map_err(err("put"))
    }
    fn get(&self, key: &[u8]) -> Result<bool> {
        self.db
            .get_pinned(key)
            .map(|v| v.is_some())
            .map_err(err("get"))
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        self.db
            .delete_opt(key, &self.write_opts)
            .map_err(err("delete"))
    }
    fn compact(&self) -> Result<()> {
        self.db.flush().map_err(err("flush"))?;
        self.db.compact_range(None::<&[u8]>, None::<&[u8]>);
        Ok(())
    }
    /// RocksDB's own bulk load: table files written with `SstFileWriter` into a staging
    /// directory inside the database's, then ingested (moved, not copied) into the bottom level.
    fn bulk_load(&self, sorted: &mut dyn Iterator<Item = (Vec<u8>, &[u8])>) -> Result<u64> {
        let staging = self.dir.join("bulk-load");
        std::fs::create_dir_all(&staging).map_err(|e| Error::io("creating", &staging, e))?;
        let mut files = Vec::new();
        let mut loaded = 0u64;
        let mut writer: Option<SstFileWriter<'_>> = None;
        for (key, value) in sorted {
            let w = match writer.as_mut() {
                Some(w) => w,
                None => {
                    let path = staging.join(format!("{:06}.sst", files.len()));
                    let w = SstFileWriter::create(&self.opts);
                    w.open(&path).map_err(err("open table writer"))?;
                    files.push(path);
                    writer.insert(w)
                }
            };
            w.put(&key, value).map_err(err("table writer put"))?;
            loaded += 1;
            if w.file_size() >= BULK_FILE_BYTES {
                if let Some(mut full) = writer.take() {
                    full.finish().map_err(err("finish table"))?;
                }
            }
        }
        if let Some(mut last) = writer.take() {
            last.finish().map_err(err("finish table"))?;
        }
        if !files.is_empty() {
            let mut ingest = IngestExternalFileOptions::default();
            ingest.set_move_files(true);
            self.db
                .ingest_external_file_opts(&ingest, files)
                .map_err(err("ingest"))?;
        }
        std::fs::remove_dir_all(&staging).map_err(|e| Error::io("removing", &staging, e))?;
        Ok(loaded)
    }
    fn has_bulk_load(&self) -> bool {
        true
    }
    fn close(mut self: Box<Self>) -> Result<()> {
        if let Some(s) = self.syncer.take() {
            s.stop()?;
        }
        self.db.flush_wal(true).map_err(err("flush_wal"))?;
        Ok(())
    }
    fn write_amplification(&self) -> Option<f64> {
        let stats = self.opts.get_statistics()?;
        let user = Self::ticker(&stats, "rocksdb.bytes.written")?;
        let disk = Self::ticker(&stats, "rocksdb.wal.bytes")?
            + Self::ticker(&stats, "rocksdb.flush.write.bytes")?
            + Self::ticker(&stats, "rocksdb.compact.write.bytes")?;
        (user > 0).then(|| disk as f64 / user as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickers_parse_from_the_statistics_text() {
        let text = "rocksdb.block.cache.miss COUNT : 7\nrocksdb.bytes.written COUNT : 1234\n\
                    rocksdb.wal.bytes COUNT : 99\n";
        assert_eq!(
            RocksStore::ticker(text, "rocksdb.bytes.written"),
            Some(1234)
        );
        assert_eq!(RocksStore::ticker(text, "rocksdb.wal.bytes"), Some(99));
        assert_eq!(RocksStore::ticker(text, "rocksdb.flush.write.bytes"), None);
    }
}
