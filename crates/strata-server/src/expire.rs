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

/// One tick over every database; returns how many keys were removed.
pub(crate) fn cycle(shared: &Shared) -> Result<usize> {
    let started = Instant::now();
    let databases = shared.config().databases;
    let mut examined = 0usize;
    let mut removed = 0usize;
    for logical in 0..databases {
        let Ok(logical) = DbIndex::try_from(logical) else {
            break;
        };
        let db = shared.physical_db(logical);
        // Nothing can be due before this: no engine read at all.
        let (next_due, generation) = shared.expiry_due.next(db);
        if keyspace::now_ms() < next_due {
            continue;
        }
        loop {
            if examined >= KEYS_PER_TICK_MAX || started.elapsed() >= TICK_BUDGET {
                return Ok(removed);
            }
            let now = keyspace::now_ms();
            let want = SCAN_BATCH.min(KEYS_PER_TICK_MAX - examined);
            let due = keyspace::due_expiries(shared.backend.as_ref(), db, now, want)?;
            if due.is_empty() {
                // All due entries are gone: the next one decides when to look again.
                let next = keyspace::first_expiry(shared.backend.as_ref(), db)?;
                shared
                    .expiry_due
                    .settle(db, generation, next.unwrap_or(u64::MAX));
                break;
            }
            let n = due.len();
            // Writes hold the exec lock's shared side, like every command (`txn.rs`).
            let _guard = shared.exec_lock.read();
            for (entry, _, key) in due {
                if keyspace::expire_if_due(shared.backend.as_ref(), db, &key, now)? {
                    removed += 1;
                }
                shared.backend.delete(&entry)?;
            }
            examined += n;
            if n < want {
                break;
            }
        }
    }
    Ok(removed)
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
        match tokio::task::spawn_blocking(move || cycle(&s)).await {
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
}
