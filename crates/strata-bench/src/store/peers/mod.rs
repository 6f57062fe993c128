//! Peer engines for `strata bench compare` (feature `peers`), each configured the way a competent
//! user would for this workload, with the same block cache budget, background thread count, WAL
//! and compression as Strata. How each maps [`SyncSpec`](crate::spec::SyncSpec):
//!
//! | spec | Strata | RocksDB | fjall | sled |
//! | --- | --- | --- | --- | --- |
//! | `always` | fsync per write (group commit) | `WriteOptions::set_sync(true)` | `persist(SyncAll)` after each write | `flush()` after each write |
//! | `everyms:N` | log thread fsyncs every N ms | `flush_wal(true)` every N ms from a harness thread | `persist(SyncAll)` every N ms from a harness thread | `flush_every_ms(Some(N))` |
//! | `never` | no fsync | no WAL sync | no persist (journal reaches the OS per write) | `flush_every_ms(None)` |
//!
//! In every mode each engine's write reaches the operating system (page cache) before it returns,
//! except Strata's `everyms` and `never`, which buffer in user space for up to 100 ms.

mod fjall_store;
mod rocks;
mod sled_store;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;

use crate::error::{Error, Result};
#[cfg(test)]
use crate::spec::SyncSpec;

pub use fjall_store::FjallStore;
pub use rocks::RocksStore;
pub use sled_store::SledStore;

/// A harness thread that calls `sync` every `period` until stopped (for engines without a timed
/// log sync of their own). The first failure is kept and returned by [`PeriodicSync::stop`].
pub(crate) struct PeriodicSync {
    stop: Arc<AtomicBool>,
    first_error: Arc<Mutex<Option<Error>>>,
    handle: Option<JoinHandle<()>>,
}

impl PeriodicSync {
    pub(crate) fn start(period: Duration, sync: impl Fn() -> Result<()> + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let first_error = Arc::new(Mutex::new(None));
        let (flag, errors) = (stop.clone(), first_error.clone());
        let handle = std::thread::spawn(move || {
            let tick = period.clamp(Duration::from_millis(1), Duration::from_millis(10));
            let mut since_sync = Duration::ZERO;
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(tick);
                since_sync += tick;
                if since_sync >= period {
                    since_sync = Duration::ZERO;
                    if let Err(e) = sync() {
                        errors.lock().get_or_insert(e);
                    }
                }
            }
        });
        PeriodicSync {
            stop,
            first_error,
            handle: Some(handle),
        }
    }

    /// Stops the thread and returns the first sync failure, if any.
    pub(crate) fn stop(mut self) -> Result<()> {
        self.halt();
        match self.first_error.lock().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for PeriodicSync {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Shared checks for the peer adapters' tests.
#[cfg(test)]
pub(crate) fn check_store_basics(store: Box<dyn crate::store::BenchStore>) {
    store.put(b"k", b"v").unwrap();
    assert!(store.get(b"k").unwrap());
    store.delete(b"k").unwrap();
    assert!(!store.get(b"k").unwrap());
    let mut entries = (0..100u32).map(|i| (format!("key{i:04}").into_bytes(), &b"value"[..]));
    assert_eq!(store.bulk_load(&mut entries).unwrap(), 100);
    store.compact().unwrap();
    assert!(store.get(b"key0042").unwrap());
    store.close().unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Engine, EngineSpec};

    fn every_sync() -> [SyncSpec; 3] {
        [SyncSpec::Always, SyncSpec::EveryMs(5), SyncSpec::Never]
    }

    #[test]
    fn every_peer_stores_reads_deletes_and_bulk_loads_in_every_sync_mode() {
        for engine in [
            Engine::Rocksdb,
            Engine::RocksdbBlob,
            Engine::Fjall,
            Engine::FjallBlob,
            Engine::Sled,
        ] {
            for sync in every_sync() {
                let dir = tempfile::tempdir().unwrap();
                let spec = EngineSpec {
                    sync,
                    ..EngineSpec::new(engine)
                };
                let store = crate::store::open_store(&spec, dir.path()).unwrap();
                check_store_basics(store);
            }
        }
    }

    #[test]
    fn periodic_sync_reports_its_first_failure() {
        let calls = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let seen = calls.clone();
        let s = PeriodicSync::start(Duration::from_millis(1), move || {
            seen.fetch_add(1, Ordering::Relaxed);
            Err(Error::Invalid("disk on fire".into()))
        });
        std::thread::sleep(Duration::from_millis(30));
        let err = s.stop().unwrap_err().to_string();
        assert!(err.contains("disk on fire"), "{err}");
        assert!(calls.load(Ordering::Relaxed) >= 1);
    }
}
