//! fjall as a peer: one keyspace with fjall's default leveled compaction and bloom filters, the
//! same block cache budget and worker thread count as Strata, and its journal (WAL) on. With
//! compression `none` data blocks and the journal are stored uncompressed; with `lz4` fjall's own
//! default policy applies (LZ4 from level 2 down). fjall has no timed journal sync, so `everyms:N`
//! is a harness thread calling `persist(SyncAll)` every N ms. fjall does not report write
//! amplification; the harness's `/proc/self/io` figure is the one to compare. `fjall-blob` is
//! the same with key-value separation on.

use std::path::Path;
use std::time::Duration;

use fjall::config::CompressionPolicy;
use fjall::{
    CompressionType, Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions, PersistMode,
};

use super::PeriodicSync;
use crate::error::{Error, Result};
use crate::spec::{CompressionSpec, Engine, EngineSpec, SyncSpec};
use crate::store::BenchStore;

const NAME: &str = "fjall";

/// Values of at least this many bytes go to blob files in `fjall-blob`: Strata's default
/// separation threshold without compression.
const SEPARATION_BYTES_MIN: u32 = 512;

/// fjall under test.
pub struct FjallStore {
    db: Database,
    keyspace: Keyspace,
    sync_each_write: bool,
    syncer: Option<PeriodicSync>,
}

fn err(op: &'static str) -> impl FnOnce(fjall::Error) -> Error {
    move |e| Error::engine(NAME, op, e)
}

impl FjallStore {
    /// Opens (creates) a database in `dir` with the settings in `spec`.
    pub fn open(dir: &Path, spec: &EngineSpec) -> Result<Self> {
        let mut builder = Database::builder(dir)
            .cache_size(spec.block_cache_bytes)
            .worker_threads(spec.background_threads.max(1));
        if spec.compression == CompressionSpec::None {
            builder = builder.journal_compression(CompressionType::None);
        }
        let db = builder.open().map_err(err("open"))?;
        let compression = spec.compression;
        let separate = spec.engine == Engine::FjallBlob;
        let keyspace = db
            .keyspace("bench", move || {
                let opts = KeyspaceCreateOptions::default();
                let opts = match compression {
                    CompressionSpec::None => opts.data_block_compression_policy(
                        CompressionPolicy::all(CompressionType::None),
                    ),
                    CompressionSpec::Lz4 => opts,
                };
                // Key-value separation with Strata's threshold; fjall's defaults otherwise
                // (64 MiB blob files, staleness 0.25, age cutoff 0.25).
                let blobs = KvSeparationOptions::default()
                    .separation_threshold(SEPARATION_BYTES_MIN)
                    .compression(match compression {
                        CompressionSpec::None => CompressionType::None,
                        CompressionSpec::Lz4 => CompressionType::Lz4,
                    });
                opts.with_kv_separation(separate.then_some(blobs))
            })
            .map_err(err("open keyspace"))?;
        let syncer = match spec.sync {
            SyncSpec::EveryMs(ms) => {
                let db = db.clone();
                Some(PeriodicSync::start(Duration::from_millis(ms), move || {
                    db.persist(PersistMode::SyncAll).map_err(err("persist"))
                }))
            }
            SyncSpec::Always | SyncSpec::Never => None,
        };
        Ok(FjallStore {
            db,
            keyspace,
            sync_each_write: spec.sync == SyncSpec::Always,
            syncer,
        })
    }

    fn after_write(&self) -> Result<()> {
        if self.sync_each_write {
            self.db
                .persist(PersistMode::SyncAll)
                .map_err(err("persist"))?;
        }
        Ok(())
    }
}

impl BenchStore for FjallStore {
    fn name(&self) -> &'static str {
        NAME
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.keyspace.insert(key, value).map_err(err("insert"))?;
        self.after_write()
    }
    fn get(&self, key: &[u8]) -> Result<bool> {
        self.keyspace
            .get(key)
            .map(|v| v.is_some())
            .map_err(err("get"))
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        self.keyspace.remove(key).map_err(err("remove"))?;
        self.after_write()
    }
    /// fjall's own bulk load (`Keyspace::start_ingestion`: table files written directly).
    fn bulk_load(&self, sorted: &mut dyn Iterator<Item = (Vec<u8>, &[u8])>) -> Result<u64> {
        let mut ingestion = self
            .keyspace
            .start_ingestion()
            .map_err(err("start ingestion"))?;
        let mut loaded = 0u64;
        for (key, value) in sorted {
            ingestion.write(key, value).map_err(err("ingest"))?;
            loaded += 1;
        }
        ingestion.finish().map_err(err("finish ingestion"))?;
        Ok(loaded)
    }
    fn has_bulk_load(&self) -> bool {
        true
    }
    fn compact(&self) -> Result<()> {
        self.keyspace
            .rotate_memtable_and_wait()
            .map_err(err("rotate memtable"))?;
        self.keyspace.major_compact().map_err(err("major compact"))
    }
    fn close(mut self: Box<Self>) -> Result<()> {
        if let Some(s) = self.syncer.take() {
            s.stop()?;
        }
        self.db
            .persist(PersistMode::SyncAll)
            .map_err(err("persist"))
    }
}
