//! sled 0.34 as a peer: `HighThroughput` mode, page cache of the same budget as Strata's block
//! cache, its own timed flush for `everyms:N` (`flush_every_ms`), `flush()` per write for `always`.
//! sled has no LZ4 (only zstd behind a feature), so it always runs uncompressed, and it does not
//! report write amplification.

use std::path::Path;

use sled::{Config, Db, Mode};

use crate::error::{Error, Result};
use crate::spec::{EngineSpec, SyncSpec};
use crate::store::BenchStore;

const NAME: &str = "sled";

/// sled under test.
pub struct SledStore {
    db: Db,
    sync_each_write: bool,
}

fn err(op: &'static str) -> impl FnOnce(sled::Error) -> Error {
    move |e| Error::engine(NAME, op, e)
}

impl SledStore {
    /// Opens (creates) a database in `dir` with the settings in `spec`.
    pub fn open(dir: &Path, spec: &EngineSpec) -> Result<Self> {
        let db = Config::new()
            .path(dir)
            .mode(Mode::HighThroughput)
            .cache_capacity(spec.block_cache_bytes)
            .flush_every_ms(match spec.sync {
                SyncSpec::EveryMs(ms) => Some(ms),
                SyncSpec::Always | SyncSpec::Never => None,
            })
            .open()
            .map_err(err("open"))?;
        Ok(SledStore {
            db,
            sync_each_write: spec.sync == SyncSpec::Always,
        })
    }

    fn after_write(&self) -> Result<()> {
        if self.sync_each_write {
            self.db.flush().map_err(err("flush"))?;
        }
        Ok(())
    }
}

impl BenchStore for SledStore {
    fn name(&self) -> &'static str {
        NAME
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db.insert(key, value).map_err(err("insert"))?;
        self.after_write()
    }
    fn get(&self, key: &[u8]) -> Result<bool> {
        self.db.get(key).map(|v| v.is_some()).map_err(err("get"))
    }
    fn delete(&self, key: &[u8]) -> Result<()> {
        self.db.remove(key).map_err(err("remove"))?;
        self.after_write()
    }
    fn compact(&self) -> Result<()> {
        self.db.flush().map(|_| ()).map_err(err("flush"))
    }
    fn close(self: Box<Self>) -> Result<()> {
        self.db.flush().map(|_| ()).map_err(err("flush"))
    }
}
