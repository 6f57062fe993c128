//! Active expiry: keys past their expiry time are invisible at once (every read checks), and
//! this removes them in the background, as Redis's active expiry cycle does, at a bounded rate:
//! every [`TICK`] it walks each database's expiry index (`keyspace`) from the oldest time up to
//! now, at most [`KEYS_PER_TICK_MAX`] entries and [`TICK_BUDGET`] of time, deleting each key
//! whose stored expiry time has passed (checked again atomically against the key itself) and
//! the index entry. Deletes go through the server's backend, so WATCH sees them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::keyspace::{self, DbIndex};
use crate::state::Shared;

/// How often the cycle runs (Redis's `hz` 10).
pub(crate) const TICK: Duration = Duration::from_millis(100);
/// Most index entries one tick examines (10 k keys a second at most).
pub(crate) const KEYS_PER_TICK_MAX: usize = 1000;
/// Most time one tick spends (a quarter of the tick, Redis's slow-cycle share).
const TICK_BUDGET: Duration = Duration::from_millis(25);
/// Index entries read per engine scan.
const SCAN_BATCH: usize = 64;

/// What one sweep may still spend.
struct Budget {
    keys_left: usize,
    deadline: Instant,
}

impl Budget {
    fn spent(&self) -> bool {
        self.keys_left == 0 || Instant::now() >= self.deadline
    }
}

/// One tick over every database; returns how many keys were removed.
pub(crate) fn cycle(shared: &Shared) -> Result<usize> {
    let removed = sweep_all(shared);
    if let Ok(n) = &removed {
        shared
            .counters
            .expired_keys
            .fetch_add(*n as u64, std::sync::atomic::Ordering::Relaxed);
    }
    // Keys this cycle removed, for CLIENT TRACKING BCAST clients (no connection's batch
    // ends after them to send them).
    shared.watches.tracking.broadcast();
    removed
}

fn sweep_all(shared: &Shared) -> Result<usize> {
    let mut budget = Budget {
        keys_left: KEYS_PER_TICK_MAX,
        deadline: Instant::now() + TICK_BUDGET,
    };
    let databases = shared.config().databases;
    let mut removed = 0usize;
    for logical in 0..databases {
        let Ok(logical) = DbIndex::try_from(logical) else {
            break;
        };
        removed += sweep(shared, shared.physical_db(logical), &mut budget)?;
        if budget.spent() {
            return Ok(removed);
        }
    }
    // Records compaction found long expired: usually gone already (the index led here
    // first); one whose index entry a crash lost is deleted only this way.
    let seen = shared.backend.take_expired(budget.keys_left);
    if !seen.is_empty() {
        let now = keyspace::now_ms();
        let _guard = shared.exec_lock.read();
        for record in seen {
            let Some((&db, name)) = record.get(1..).and_then(<[u8]>::split_first) else {
                continue;
            };
            let _doc_guard = shared.doc_lock(db, name);
            if keyspace::expire_if_due(shared.backend.as_ref(), db, name, now)? {
                shared.notify_expired(db, name);
                removed += 1;
            }
        }
    }
    Ok(removed)
}

/// Most due keys DBSIZE removes before it answers, and the most time it spends on them: past
/// either, the count includes the rest (as Redis's DBSIZE includes expired keys its expiry
/// cycle has not reached).
const DBSIZE_SWEEP_KEYS_MAX: usize = 10_000;
const DBSIZE_SWEEP_TIME: Duration = Duration::from_millis(100);

/// Removes the due keys of physical database `db` (within bounds) so that its key count holds
/// live keys only; for DBSIZE, whose caller holds no exec lock.
pub(crate) fn sweep_for_count(shared: &Shared, db: DbIndex) -> Result<()> {
    let mut budget = Budget {
        keys_left: DBSIZE_SWEEP_KEYS_MAX,
        deadline: Instant::now() + DBSIZE_SWEEP_TIME,
    };
    sweep(shared, db, &mut budget).map(|_| ())
}

/// Walks physical database `db`'s expiry index up to now within `budget`, deleting each key
/// whose stored expiry time has passed; returns how many were removed.
fn sweep(shared: &Shared, db: DbIndex, budget: &mut Budget) -> Result<usize> {
    // Nothing can be due before this: no engine read at all.
    let (next_due, generation) = shared.expiry_due.next(db);
    if keyspace::now_ms() < next_due {
        return Ok(0);
    }
    let mut removed = 0usize;
    loop {
        if budget.spent() {
            return Ok(removed);
        }
        let now = keyspace::now_ms();
        let want = SCAN_BATCH.min(budget.keys_left);
        let due = keyspace::due_expiries(shared.backend.as_ref(), db, now, want)?;
        if due.is_empty() {
            // All due entries are gone: the next one decides when to look again.
            let next = keyspace::first_expiry(shared.backend.as_ref(), db)?;
            shared
                .expiry_due
                .settle(db, generation, next.unwrap_or(u64::MAX));
            return Ok(removed);
        }
        let n = due.len();
        // Writes hold the exec lock's shared side, like every command (`txn.rs`).
        let _guard = shared.exec_lock.read();
        for (entry, _, key) in due {
            // (A document and its expiry record go together: `Shared::doc_locks`.)
            let _doc_guard = shared.doc_lock(db, &key);
            if keyspace::expire_if_due(shared.backend.as_ref(), db, &key, now)? {
                shared.notify_expired(db, &key);
                removed += 1;
            }
            shared.backend.delete(&entry)?;
        }
        budget.keys_left -= n;
        if n < want {
            return Ok(removed);
        }
    }
}

/// Runs [`cycle`] every [`TICK`] on the blocking pool until shutdown.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.subscribe();
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        let s = shared.clone();
        let step = move || {
            // OBJECT IDLETIME's clock (`access.rs`) moves with the cycle, as Redis's with its
            // cron, and the touches queued since the last tick are written here, off the
            // connection threads.
            s.access.tick();
            // INFO's instantaneous rates are sampled on the same clock as Redis's (its cron).
            s.rates.sample(&s.counters);
            // As Redis, keys do not expire while clients are paused (a pause freezes the
            // data set, for a failover say).
            if s.pause.current().is_some() {
                return Ok(0);
            }
            cycle(&s)
        };
        match tokio::task::spawn_blocking(step).await {
            Ok(Ok(0)) => {}
            Ok(Ok(n)) => tracing::trace!(removed = n, "active expiry"),
            Ok(Err(e)) => tracing::warn!("active expiry failed (retried next tick): {e}"),
            Err(e) => tracing::warn!("active expiry task failed: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::backend::{BatchOp, KvBackend, MemoryBackend};
    use crate::config::ServerConfig;
    use crate::keyspace::{expiry_index_key, string_key, Record};

    #[test]
    fn due_keys_go_and_stale_index_entries_leave_live_keys_alone() {
        let backend = Arc::new(MemoryBackend::new());
        let shared = Shared::new(backend.clone(), ServerConfig::default()).unwrap();
        let past = keyspace::now_ms() - 1;
        let future = past + 3_600_000;
        backend
            .write(vec![
                // Expired.
                BatchOp::Put(string_key(0, b"gone"), Record::encode(b"1", Some(past))),
                BatchOp::Put(expiry_index_key(0, past, b"gone"), vec![]),
                // Stale entry: the key was given a later time since.
                BatchOp::Put(string_key(3, b"kept"), Record::encode(b"2", Some(future))),
                BatchOp::Put(expiry_index_key(3, past, b"kept"), vec![]),
                BatchOp::Put(expiry_index_key(3, future, b"kept"), vec![]),
                // Stale entry: the key lost its expiry.
                BatchOp::Put(string_key(0, b"persisted"), Record::encode(b"3", None)),
                BatchOp::Put(expiry_index_key(0, past, b"persisted"), vec![]),
            ])
            .unwrap();
        assert_eq!(cycle(&shared).unwrap(), 1);
        assert_eq!(backend.get(&string_key(0, b"gone")).unwrap(), None);
        assert!(backend.get(&string_key(3, b"kept")).unwrap().is_some());
        assert!(backend.get(&string_key(0, b"persisted")).unwrap().is_some());
        assert!(backend
            .get(&expiry_index_key(0, past, b"gone"))
            .unwrap()
            .is_none());
        assert!(backend
            .get(&expiry_index_key(3, past, b"kept"))
            .unwrap()
            .is_none());
        assert!(backend
            .get(&expiry_index_key(3, future, b"kept"))
            .unwrap()
            .is_some());
    }

    /// After a round that found nothing due, a key given an expiry time later is still found
    /// when its time comes (the skip-until time is lowered by the write).
    #[test]
    fn keys_written_after_an_idle_round_are_still_expired() {
        let backend = Arc::new(MemoryBackend::new());
        let shared = Shared::new(backend.clone(), ServerConfig::default()).unwrap();
        assert_eq!(cycle(&shared).unwrap(), 0);
        assert_eq!(shared.expiry_due.next(0).0, u64::MAX);
        let at = keyspace::now_ms() + 30;
        shared
            .backend
            .write(vec![
                BatchOp::Put(string_key(0, b"k"), Record::encode(b"1", Some(at))),
                BatchOp::Put(expiry_index_key(0, at, b"k"), vec![]),
            ])
            .unwrap();
        assert_eq!(shared.expiry_due.next(0).0, at);
        assert_eq!(cycle(&shared).unwrap(), 0);
        std::thread::sleep(std::time::Duration::from_millis(40));
        assert_eq!(cycle(&shared).unwrap(), 1);
        assert_eq!(backend.get(&string_key(0, b"k")).unwrap(), None);
    }

    /// A backend that, on the active expiry thread's first read of a document's expiry record,
    /// returns what it read only after the test says so (or 300 ms pass): the window in which a
    /// JSON.SET of that expired document may run.
    struct PausingBackend {
        inner: MemoryBackend,
        paused: std::sync::Mutex<bool>,
        resume: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl KvBackend for PausingBackend {
        fn get(&self, key: &[u8]) -> crate::error::Result<Option<bytes::Bytes>> {
            let v = self.inner.get(key)?;
            let on_expiry_thread = std::thread::current().name() == Some("expiry-under-test");
            if on_expiry_thread && key == keyspace::doc_ttl_key(0, b"doc").as_slice() {
                let mut paused = self.paused.lock().unwrap();
                if !*paused {
                    *paused = true;
                    let resume = self.resume.lock().unwrap();
                    let _ = resume.recv_timeout(std::time::Duration::from_millis(300));
                }
            }
            Ok(v)
        }
        fn put(&self, k: &[u8], v: &[u8]) -> crate::error::Result<()> {
            self.inner.put(k, v)
        }
        fn delete(&self, k: &[u8]) -> crate::error::Result<()> {
            self.inner.delete(k)
        }
        fn write(&self, ops: Vec<BatchOp>) -> crate::error::Result<()> {
            self.inner.write(ops)
        }
        fn update(
            &self,
            k: &[u8],
            f: &mut crate::backend::UpdateFn<'_>,
        ) -> crate::error::Result<()> {
            self.inner.update(k, f)
        }
        fn update_group(
            &self,
            route: &[u8],
            f: &mut crate::backend::GroupFn<'_>,
        ) -> crate::error::Result<()> {
            self.inner.update_group(route, f)
        }
        fn scan(
            &self,
            start: std::ops::Bound<Vec<u8>>,
            end: std::ops::Bound<Vec<u8>>,
            visit: &mut crate::backend::VisitFn<'_>,
        ) -> crate::error::Result<()> {
            self.inner.scan(start, end, visit)
        }
        fn flush(&self) -> crate::error::Result<()> {
            Ok(())
        }
        fn sync(&self) -> crate::error::Result<()> {
            Ok(())
        }
        fn writes_would_wait(&self) -> bool {
            false
        }
        fn stats_lines(&self) -> Vec<(String, String)> {
            Vec::new()
        }
    }

    /// Found by reading: active expiry read an expired document's time, a JSON.SET then
    /// replaced the document, and active expiry deleted the new one. The document's stripe lock
    /// makes the two take turns; the new document survives.
    #[test]
    fn active_expiry_never_deletes_a_document_written_after_it_looked() {
        let (tx, rx) = std::sync::mpsc::channel();
        let backend = Arc::new(PausingBackend {
            inner: MemoryBackend::new(),
            paused: std::sync::Mutex::new(false),
            resume: std::sync::Mutex::new(rx),
        });
        let shared = Arc::new(Shared::new(backend.clone(), ServerConfig::default()).unwrap());
        let run = |words: &[&str]| {
            let args: Vec<bytes::Bytes> = words
                .iter()
                .map(|w| bytes::Bytes::from(w.to_string()))
                .collect();
            let mut session = crate::state::Session::new(1, &shared);
            let mut ctx =
                crate::commands::Ctx::new(&shared, &mut session, crate::commands::Locking::Wait);
            crate::commands::execute(&mut ctx, &args)
        };
        assert_eq!(
            run(&["JSON.SET", "doc", "$", "1"]),
            crate::resp::Reply::ok()
        );
        assert_eq!(run(&["PEXPIRE", "doc", "20"]), crate::resp::Reply::Int(1));
        std::thread::sleep(std::time::Duration::from_millis(40));
        let expiry = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("expiry-under-test".into())
                .spawn(move || cycle(&shared).unwrap())
                .unwrap()
        };
        // Give active expiry time to reach its pause, then write the document anew.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let writer = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let args: Vec<bytes::Bytes> = ["JSON.SET", "doc", "$", "2"]
                    .iter()
                    .map(|w| bytes::Bytes::from(w.to_string()))
                    .collect();
                let mut session = crate::state::Session::new(2, &shared);
                let mut ctx = crate::commands::Ctx::new(
                    &shared,
                    &mut session,
                    crate::commands::Locking::Wait,
                );
                crate::commands::execute(&mut ctx, &args)
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        let _ = tx.send(());
        expiry.join().unwrap();
        assert_eq!(writer.join().unwrap(), crate::resp::Reply::ok());
        assert_eq!(
            run(&["JSON.GET", "doc"]),
            crate::resp::Reply::Bulk(bytes::Bytes::from_static(b"2"))
        );
        assert_eq!(run(&["TTL", "doc"]), crate::resp::Reply::Int(-1));
    }
}
