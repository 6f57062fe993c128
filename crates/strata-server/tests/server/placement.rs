//! Where commands run: a read that would wait for the disk leaves the network thread for the
//! blocking pool and still answers in order, as do the commands after it. The backend here
//! pretends keys starting with `cold` are on disk: read without waiting, they fail with the
//! engine's "would block" error.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use redis::Value;
use strata_server::backend::{BatchOp, UpdateFn, VisitFn};
use strata_server::{KvBackend, MemoryBackend, ServerConfig, ServerThread};

use super::{bulk, call};

#[derive(Default)]
struct ColdKeys {
    inner: MemoryBackend,
    /// Reads of cold keys refused because waiting was forbidden.
    refused: AtomicU64,
    /// Reads of cold keys that waited (on the blocking pool).
    waited: AtomicU64,
}

impl KvBackend for ColdKeys {
    fn get(&self, key: &[u8]) -> strata_server::Result<Option<Bytes>> {
        // Engine keys of strings: `k`, the database, the name.
        if key.get(2..6) == Some(b"cold") {
            if strata::waiting_forbidden() {
                self.refused.fetch_add(1, Ordering::Relaxed);
                let e = std::io::Error::new(std::io::ErrorKind::WouldBlock, "on disk");
                return Err(strata::Error::io("cold", e).into());
            }
            self.waited.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.get(key)
    }
    fn put(&self, key: &[u8], value: &[u8]) -> strata_server::Result<()> {
        self.inner.put(key, value)
    }
    fn delete(&self, key: &[u8]) -> strata_server::Result<()> {
        self.inner.delete(key)
    }
    fn write(&self, ops: Vec<BatchOp>) -> strata_server::Result<()> {
        self.inner.write(ops)
    }
    fn update(&self, key: &[u8], f: &mut UpdateFn<'_>) -> strata_server::Result<()> {
        self.inner.update(key, f)
    }
    fn update_group(
        &self,
        route: &[u8],
        f: &mut strata_server::backend::GroupFn<'_>,
    ) -> strata_server::Result<()> {
        self.inner.update_group(route, f)
    }
    fn scan(
        &self,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        visit: &mut VisitFn<'_>,
    ) -> strata_server::Result<()> {
        self.inner.scan(start, end, visit)
    }
    fn flush(&self) -> strata_server::Result<()> {
        self.inner.flush()
    }
    fn sync(&self) -> strata_server::Result<()> {
        self.inner.sync()
    }
    fn writes_would_wait(&self) -> bool {
        false
    }
    fn stats_lines(&self) -> Vec<(String, String)> {
        self.inner.stats_lines()
    }
}

#[test]
fn reads_that_would_wait_move_to_the_pool_and_replies_stay_in_order() {
    let backend = Arc::new(ColdKeys::default());
    let config = ServerConfig {
        bind: "127.0.0.1".into(),
        port: 0,
        ..ServerConfig::default()
    };
    let server = ServerThread::start(config, backend.clone()).unwrap();
    let client = redis::Client::open(format!("redis://{}/", server.local_addr())).unwrap();
    let mut c = client.get_connection().unwrap();
    for k in ["hot1", "cold1", "hot2", "cold2"] {
        assert_eq!(
            call(&mut c, &["SET", k, &format!("v-{k}")]),
            Ok(Value::Okay)
        );
    }
    // One pipeline: hot, cold, hot, cold, a write, a read of it.
    let mut p = redis::pipe();
    p.cmd("GET").arg("hot1");
    p.cmd("GET").arg("cold1");
    p.cmd("GET").arg("hot2");
    p.cmd("MGET").arg("cold2").arg("hot1");
    p.cmd("SET").arg("hot3").arg("v3");
    p.cmd("GET").arg("hot3");
    let replies: Vec<Value> = p.query(&mut c).unwrap();
    assert_eq!(
        replies,
        vec![
            bulk("v-hot1"),
            bulk("v-cold1"),
            bulk("v-hot2"),
            Value::Array(vec![bulk("v-cold2"), bulk("v-hot1")]),
            Value::Okay,
            bulk("v3"),
        ]
    );
    // The first cold read was refused on the network thread; it and the rest of the batch
    // then ran on the pool, where both cold reads waited.
    let (refused, waited) = (
        backend.refused.load(Ordering::Relaxed),
        backend.waited.load(Ordering::Relaxed),
    );
    assert!(
        refused >= 1 && waited >= 2,
        "refused {refused}, waited {waited}"
    );
    // A plain GET of a cold key: refused once, then answered from the pool.
    assert_eq!(call(&mut c, &["GET", "cold1"]), Ok(bulk("v-cold1")));
    assert_eq!(backend.refused.load(Ordering::Relaxed), refused + 1);
    assert_eq!(backend.waited.load(Ordering::Relaxed), waited + 1);
    // A hot read never reaches the pool's path for cold keys.
    assert_eq!(call(&mut c, &["GET", "hot2"]), Ok(bulk("v-hot2")));
    assert_eq!(backend.refused.load(Ordering::Relaxed), refused + 1);
    server.shutdown().unwrap();
}
