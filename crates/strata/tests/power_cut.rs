//! Crash points through every background job, with the power cut: a deterministic workload
//! (puts and deletes with every write fsynced, explicit compactions) runs on tiny memtables,
//! tables and segments, so that flush, compaction (moving values out of value logs), value-log
//! GC, hash-engine merge and hint writing all run, on a file system that cuts the power at its
//! Nth changing call. The store is
//! then reopened with the real recovery code and checked against a model of what was
//! acknowledged:
//! - every acknowledged write is there with its newest value;
//! - no key holds a value it never had, and no deleted key comes back;
//! - the store opens (a power cut corrupts nothing that was made durable), and is writable.
//!
//! The default run covers a spread of crash points per engine; `STRATA_CRASH_POINTS=N` runs N
//! per engine (the long mode).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata::vfs::FaultFs;
use strata::{Db, Engine, Options, SyncMode};

const KEYS: u32 = 40;
const OPS: usize = 400;
/// Crash points per engine in the default run.
const DEFAULT_POINTS: u64 = 40;

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Compact,
    /// Bulk load of sorted entries (tables written directly in the LSM).
    Ingest(Vec<(Vec<u8>, Vec<u8>)>),
}

/// The workload: the same for every crash point, so that a failure names a reproducible run.
fn workload() -> Vec<Op> {
    let mut rng = SmallRng::seed_from_u64(0x5eed_c0de);
    let mut ops = Vec::with_capacity(OPS);
    for i in 0..OPS {
        let key = format!("key{:03}", rng.gen_range(0..KEYS)).into_bytes();
        let roll = rng.gen_range(0..100);
        let op = if roll < 2 {
            Op::Compact
        } else if roll < 4 {
            let mut keys: Vec<u32> = (0..5).map(|_| rng.gen_range(0..KEYS)).collect();
            keys.sort_unstable();
            keys.dedup();
            Op::Ingest(
                keys.into_iter()
                    .map(|k| {
                        let key = format!("key{k:03}").into_bytes();
                        let v = format!("key{k:03}#{i}:ingested").into_bytes();
                        (key, v)
                    })
                    .collect(),
            )
        } else if roll < 25 {
            Op::Delete(key)
        } else {
            // Values carry their key and op number, so a value that was never written is
            // recognisable; sizes straddle the value-separation threshold (100 bytes).
            let len = rng.gen_range(0..400);
            let mut v = format!("{}#{i}:", String::from_utf8_lossy(&key)).into_bytes();
            v.resize(v.len() + len, b'a' + (i % 26) as u8);
            Op::Put(key, v)
        };
        ops.push(op);
    }
    ops
}

fn options(engine: Engine, fs: &FaultFs) -> Options {
    Options {
        engine,
        partitions: 2,
        sync: SyncMode::Always,
        fs: std::sync::Arc::new(fs.clone()),
        ..Options::tiny()
    }
}

/// The value logs' space rule alone, at its most eager: compactions move values while the
/// logs hold more than the bytes their live values need, and never for the fixed share.
fn space_rule_alone(o: Options) -> Options {
    Options {
        value_log_gc_live_ratio: 0.0,
        value_log_space_ratio_max: 1.0,
        ..o
    }
}

/// Neither victim rule: compactions move no values.
fn no_victim_rule(o: Options) -> Options {
    Options {
        value_log_gc_live_ratio: 0.0,
        value_log_space_ratio_max: f64::INFINITY,
        ..o
    }
}

/// What one run without a crash did: the changing calls it made (to size the crash points)
/// and the value bytes compactions moved.
struct Run {
    calls: u64,
    moved_bytes: u64,
}

type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Runs the workload until an operation fails; returns what was acknowledged and the operation
/// that failed (it may or may not have been applied).
fn run_until_failure(db: &Db, ops: &[Op]) -> (Model, Option<Op>) {
    let mut acked = Model::new();
    for op in ops {
        let res = match op {
            Op::Put(k, v) => db.put(k, v),
            Op::Delete(k) => db.delete(k),
            Op::Compact => db.compact(),
            Op::Ingest(entries) => db.ingest(entries.iter().cloned()).map(|_| ()),
        };
        if res.is_err() {
            return (acked, Some(op.clone()));
        }
        match op {
            Op::Put(k, v) => {
                acked.insert(k.clone(), Some(v.clone()));
            }
            Op::Delete(k) => {
                acked.insert(k.clone(), None);
            }
            Op::Compact => {}
            Op::Ingest(entries) => {
                for (k, v) in entries {
                    acked.insert(k.clone(), Some(v.clone()));
                }
            }
        }
    }
    (acked, None)
}

/// One crash point, the options `tune`d: returns what the run did.
fn crash_at(engine: Engine, tune: fn(Options) -> Options, point: Option<u64>, tear: bool) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(dir.path()).unwrap();
    let ops = workload();
    let options = |engine, fs: &FaultFs| tune(options(engine, fs));
    let db = Db::open(dir.path().join("db"), options(engine, &fs)).unwrap();
    if let Some(n) = point {
        fs.crash_at(n);
    }
    let (acked, in_flight) = run_until_failure(&db, &ops);
    let calls = fs.mutations();
    let moved_bytes = db
        .stats()
        .partitions
        .iter()
        .map(|p| p.moved_value_bytes_written)
        .sum();
    // The process goes on until it is dropped; the power is already out.
    drop(db);
    if tear {
        fs.tear_writes(point.unwrap_or(0));
    }
    fs.power_cut().unwrap();
    let ctx = format!("{engine:?}, crash at call {point:?} of {calls}, torn writes {tear}, in flight {in_flight:?}");
    let db = Db::open(dir.path().join("db"), options(engine, &fs))
        .unwrap_or_else(|e| panic!("{ctx}: the store does not open after a power cut: {e}"));
    for k in 0..KEYS {
        let key = format!("key{k:03}").into_bytes();
        let got = db
            .get(&key)
            .unwrap_or_else(|e| panic!("{ctx}: reading {k}: {e}"))
            .map(|v| v.to_vec());
        let want = acked.get(&key).cloned().unwrap_or(None);
        let in_flight_state = match &in_flight {
            Some(Op::Put(ik, iv)) if *ik == key => Some(Some(iv.clone())),
            Some(Op::Delete(ik)) if *ik == key => Some(None),
            Some(Op::Ingest(entries)) => entries
                .iter()
                .find(|(ik, _)| *ik == key)
                .map(|(_, iv)| Some(iv.clone())),
            _ => None,
        };
        let allowed = got == want || in_flight_state.as_ref() == Some(&got);
        assert!(
            allowed,
            "{ctx}: key {k} holds {:?}, acknowledged {:?}",
            got.as_deref().map(String::from_utf8_lossy),
            want.as_deref().map(String::from_utf8_lossy),
        );
    }
    // Scans agree with point reads.
    let scanned = db.scan::<&[u8], _>(..).count();
    let present = (0..KEYS)
        .filter(|k| db.get(format!("key{k:03}").as_bytes()).unwrap().is_some())
        .count();
    assert_eq!(scanned, present, "{ctx}: scan and point reads disagree");
    // Writable again, and what is written now survives the next cut.
    db.put(b"after", b"the cut")
        .unwrap_or_else(|e| panic!("{ctx}: not writable after reopening: {e}"));
    drop(db);
    fs.power_cut().unwrap();
    let db = Db::open(dir.path().join("db"), options(engine, &fs)).unwrap();
    assert_eq!(
        db.get(b"after").unwrap().as_deref(),
        Some(&b"the cut"[..]),
        "{ctx}"
    );
    Run { calls, moved_bytes }
}

/// Crash points per engine and mode: `STRATA_CRASH_POINTS`, or the default.
fn points_to_run() -> u64 {
    std::env::var("STRATA_CRASH_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_POINTS)
}

/// The `i`th of `points` crash points spread over a run of `total` changing calls, shifted on
/// each pass over the run so that long runs cover every call.
fn nth_point(i: u64, points: u64, total: u64) -> u64 {
    1 + (i * total / points.max(1) + i / total.max(1)) % total.max(1)
}

fn crash_points(engine: Engine, tune: fn(Options) -> Options, points: u64) {
    // A run without a crash counts the changing calls; crash points spread over them.
    let run = crash_at(engine, tune, None, false);
    if engine == Engine::Lsm {
        // The crash points cover compactions that move values into value files.
        assert!(
            run.moved_bytes > 0,
            "the workload moved no values out of value logs"
        );
    }
    let total = run.calls;
    assert!(
        total > 100,
        "{engine:?}: the workload made only {total} changing calls"
    );
    let mut ran = 0u64;
    for i in 0..points {
        crash_at(engine, tune, Some(nth_point(i, points, total)), i % 2 == 1);
        ran += 1;
    }
    eprintln!("{engine:?}: {ran} crash points over {total} changing calls, none lost an acknowledged write");
}

/// The same crash points with the value logs' space rule alone choosing what compactions
/// move, at its most eager: a cut while they copy values into new value files and drop the
/// old logs loses nothing acknowledged. The rule is shown to act first: without it (and
/// without the fixed share) the workload moves nothing.
#[test]
fn lsm_survives_power_cuts_while_the_space_rule_moves_values() {
    let none = crash_at(Engine::Lsm, no_victim_rule, None, false).moved_bytes;
    assert_eq!(none, 0, "values moved with neither victim rule");
    let rule = crash_at(Engine::Lsm, space_rule_alone, None, false).moved_bytes;
    assert!(rule > 0, "the space rule moved no values");
    eprintln!("value bytes moved without a crash by the space rule alone: {rule}");
    // A quarter of the crash points: the other LSM runs cover the rest of the path.
    crash_points(Engine::Lsm, space_rule_alone, (points_to_run() / 4).max(1));
}

#[test]
fn lsm_survives_power_cuts_at_crash_points_through_flush_compaction_and_gc() {
    crash_points(Engine::Lsm, std::convert::identity, points_to_run());
}

#[test]
fn log_engine_survives_power_cuts_at_crash_points_through_merges_and_hints() {
    crash_points(Engine::Log, std::convert::identity, points_to_run());
}

/// Under `SyncMode::Never` a power cut may lose writes made since the last `Db::sync`, but each
/// key must come back in a state it really had at or after that sync: an older, durable value
/// must never vanish because something newer that shadowed it was lost (a merge or compaction
/// that dropped the old value before the new one was durable).
fn unsynced_crash_at(engine: Engine, point: Option<u64>) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(dir.path()).unwrap();
    let opts = Options {
        sync: SyncMode::Never,
        ..options(engine, &fs)
    };
    let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
    if let Some(n) = point {
        fs.crash_at(n);
    }
    // Per key, every state it had since the last successful sync (the first is the state at
    // that sync).
    let mut since_sync: BTreeMap<Vec<u8>, Vec<Option<Vec<u8>>>> = BTreeMap::new();
    let mut state: Model = Model::new();
    let keys: Vec<Vec<u8>> = (0..KEYS)
        .map(|k| format!("key{k:03}").into_bytes())
        .collect();
    let reset = |since: &mut BTreeMap<Vec<u8>, Vec<Option<Vec<u8>>>>, state: &Model| {
        since.clear();
        for k in &keys {
            since.insert(k.clone(), vec![state.get(k).cloned().unwrap_or(None)]);
        }
    };
    reset(&mut since_sync, &state);
    for (i, op) in workload().iter().enumerate() {
        let (key, new_state) = match op {
            Op::Put(k, v) => (k, Some(v.clone())),
            Op::Delete(k) => (k, None),
            Op::Compact => {
                if db.compact().is_err() {
                    break;
                }
                continue;
            }
            // Covered by the fsync-per-write runs.
            Op::Ingest(_) => continue,
        };
        // Recorded before the call: a failed write may still have been applied.
        since_sync.get_mut(key).unwrap().push(new_state.clone());
        let res = match op {
            Op::Put(k, v) => db.put(k, v),
            _ => db.delete(key),
        };
        if res.is_err() {
            break;
        }
        state.insert(key.clone(), new_state);
        if i % 50 == 49 {
            if db.sync().is_err() {
                break;
            }
            reset(&mut since_sync, &state);
        }
    }
    let calls = fs.mutations();
    drop(db);
    fs.power_cut().unwrap();
    let ctx = format!("{engine:?} unsynced, crash at call {point:?} of {calls}");
    let db = Db::open(dir.path().join("db"), opts)
        .unwrap_or_else(|e| panic!("{ctx}: the store does not open after a power cut: {e}"));
    for k in &keys {
        let got = db
            .get(k)
            .unwrap_or_else(|e| panic!("{ctx}: reading {:?}: {e}", String::from_utf8_lossy(k)))
            .map(|v| v.to_vec());
        let allowed = &since_sync[k];
        assert!(
            allowed.contains(&got),
            "{ctx}: {} holds {:?}, which it did not have at or after the last sync ({} states)",
            String::from_utf8_lossy(k),
            got.as_deref().map(String::from_utf8_lossy),
            allowed.len()
        );
    }
    calls
}

fn unsynced_crash_points(engine: Engine) {
    let points = points_to_run();
    let total = unsynced_crash_at(engine, None);
    for i in 0..points {
        unsynced_crash_at(engine, Some(nth_point(i, points, total)));
    }
    // And the end of the run, where nothing after the last sync was fsynced.
    unsynced_crash_at(engine, Some(total + 1));
    eprintln!(
        "{engine:?} unsynced: {} crash points over {total} changing calls",
        points + 1
    );
}

#[test]
fn lsm_keeps_a_state_each_key_had_since_the_last_sync_after_a_power_cut() {
    unsynced_crash_points(Engine::Lsm);
}

#[test]
fn log_engine_keeps_a_state_each_key_had_since_the_last_sync_after_a_power_cut() {
    unsynced_crash_points(Engine::Log);
}

/// A killed process leaves its log in the page cache only; the next process replays it, and a
/// flush then points tables (and, in the LSM, value pointers) into it. Recovery must make the
/// replayed log durable before that, or a power cut afterwards leaves pointers into bytes that
/// never reached the disk.
#[test]
fn a_log_replayed_after_a_kill_is_durable_before_anything_points_into_it() {
    for engine in [Engine::Lsm, Engine::Log] {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new(dir.path()).unwrap();
        let opts = Options {
            sync: SyncMode::Never,
            // Large memtables: nothing is flushed before the kill.
            memtable_bytes_max: 4 << 20,
            ..options(engine, &fs)
        };
        let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
        for i in 0..200u32 {
            db.put(format!("key{i:03}").as_bytes(), &[b'v'; 300])
                .unwrap();
        }
        // SIGKILL: every later call of the process fails, what it wrote stays in the page cache.
        fs.crash_at(1);
        drop(db);
        fs.revive();
        // The next process replays the logs and flushes them into tables.
        let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
        db.flush().unwrap();
        drop(db);
        fs.power_cut().unwrap();
        let db = Db::open(dir.path().join("db"), opts)
            .unwrap_or_else(|e| panic!("{engine:?}: does not open: {e}"));
        for i in 0..200u32 {
            let got = db
                .get(format!("key{i:03}").as_bytes())
                .unwrap_or_else(|e| panic!("{engine:?}: key {i}: {e}"));
            assert_eq!(
                got.as_deref(),
                Some(&[b'v'; 300][..]),
                "{engine:?}: key {i} replayed and flushed, then lost to a power cut"
            );
        }
    }
}

/// `Db::sync` (the server's WAITAOF) forces only the logs that hold records not yet forced:
/// with nothing written since the last sync it calls no fsync, after a write to one partition
/// one; what it forced survives a power cut, on both engines.
#[test]
fn sync_forces_only_the_logs_written_since_the_last_one() {
    for engine in [Engine::Lsm, Engine::Log] {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new(dir.path()).unwrap();
        let opts = Options {
            sync: SyncMode::Never,
            partitions: 4,
            memtable_bytes_max: 4 << 20,
            ..options(engine, &fs)
        };
        let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
        db.sync().unwrap();
        let before = fs.mutations();
        db.sync().unwrap();
        assert_eq!(fs.mutations() - before, 0, "{engine:?}: nothing to force");
        db.put(b"acknowledged", b"1").unwrap();
        let before = fs.mutations();
        db.sync().unwrap();
        assert_eq!(fs.mutations() - before, 1, "{engine:?}: one log to force");
        drop(db);
        fs.power_cut().unwrap();
        let db = Db::open(dir.path().join("db"), opts).unwrap();
        assert_eq!(
            db.get(b"acknowledged").unwrap().as_deref(),
            Some(&b"1"[..]),
            "{engine:?}: the synced write was lost"
        );
    }
}

/// When the directory fsync after a manifest rename fails, the new manifest may still be on disk:
/// a compaction must not delete its output tables then, or the store will not open.
#[test]
fn a_failed_manifest_directory_fsync_leaves_a_store_that_opens() {
    for n in 1..=12u64 {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new(dir.path()).unwrap();
        let opts = options(Engine::Lsm, &fs);
        let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
        let (acked, _) = run_until_failure(&db, &workload());
        fs.fail(strata::vfs::IoKind::SyncDir, n, strata::vfs::FaultKind::Eio);
        let compacted = db.compact();
        // The process dies right after the failure, before any retry could mend it.
        fs.crash_at(1);
        drop(db);
        fs.revive();
        let db = Db::open(dir.path().join("db"), opts).unwrap_or_else(|e| {
            panic!("directory fsync {n} failed (compaction: {compacted:?}); then: {e}")
        });
        for (k, v) in &acked {
            assert_eq!(
                db.get(k).unwrap().map(|b| b.to_vec()),
                *v,
                "directory fsync {n} failed"
            );
        }
    }
}

/// Hash engine: a background merge drops old values that newer records shadow. Under
/// `SyncMode::Never` those newer records may sit in the active segment, not yet fsynced: the
/// merge must make them durable before it deletes its inputs, or a power cut loses both the old
/// value and the new one, and a key that was present at every moment is gone.
#[test]
fn log_engine_merge_makes_shadowing_records_durable_before_deleting_its_inputs() {
    for round in 0..8u32 {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new(dir.path()).unwrap();
        let opts = Options {
            sync: SyncMode::Never,
            partitions: 1,
            log_segment_bytes_max: 4096,
            ..options(Engine::Log, &fs)
        };
        let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
        let keys = 30u32;
        for k in 0..keys {
            db.put(format!("key{k:03}").as_bytes(), &[b'1'; 200])
                .unwrap();
        }
        db.sync().unwrap();
        // Overwrites: the segments holding the first values become dead and get merged in the
        // background while the newest overwrites wait, unsynced, in the active segment.
        for pass in 0..(2 + round) {
            for k in 0..keys {
                db.put(format!("key{k:03}").as_bytes(), &[b'2' + pass as u8; 200])
                    .unwrap();
            }
        }
        let merged = |db: &Db| {
            db.stats()
                .partitions
                .iter()
                .map(|p| p.compactions)
                .sum::<u64>()
        };
        for _ in 0..500 {
            if merged(&db) > 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(merged(&db) > 0, "no merge ran");
        // The power goes before anyone syncs.
        fs.crash_at(1);
        drop(db);
        fs.power_cut().unwrap();
        let db = Db::open(dir.path().join("db"), opts).unwrap();
        for k in 0..keys {
            let got = db.get(format!("key{k:03}").as_bytes()).unwrap();
            assert!(
                got.is_some(),
                "round {round}: key {k} was present at every moment and is gone"
            );
        }
    }
}

/// Errors from the disk: the Nth write, fsync, rename or directory fsync fails once with EIO or
/// ENOSPC. The caller gets a clear error, reads keep working, nothing acknowledged is lost, and
/// a reopen recovers (on both engines).
#[test]
fn injected_disk_errors_reach_the_caller_and_lose_nothing_acknowledged() {
    use strata::vfs::{FaultKind, IoKind};
    let mut failed_calls = 0u32;
    for engine in [Engine::Lsm, Engine::Log] {
        for (kind, fault) in [
            (IoKind::Write, FaultKind::Enospc),
            (IoKind::Sync, FaultKind::Eio),
            (IoKind::Rename, FaultKind::Enospc),
            (IoKind::SyncDir, FaultKind::Eio),
        ] {
            for nth in [1u64, 3, 10, 40, 150] {
                let dir = tempfile::tempdir().unwrap();
                let fs = FaultFs::new(dir.path()).unwrap();
                let opts = options(engine, &fs);
                let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
                fs.fail(kind, nth, fault);
                let ctx = format!("{engine:?}, {fault:?} on {kind:?} call {nth}");
                // Keep going past errors: a failed write may or may not have been applied.
                let mut acked = Model::new();
                let mut uncertain: BTreeMap<Vec<u8>, Vec<Option<Vec<u8>>>> = BTreeMap::new();
                let mut saw_error = false;
                for op in workload() {
                    let (key, state, res) = match &op {
                        Op::Put(k, v) => (k.clone(), Some(v.clone()), db.put(k, v)),
                        Op::Delete(k) => (k.clone(), None, db.delete(k)),
                        Op::Compact => {
                            saw_error |= db.compact().is_err();
                            continue;
                        }
                        Op::Ingest(_) => continue,
                    };
                    match res {
                        Ok(()) => {
                            acked.insert(key.clone(), state);
                            uncertain.remove(&key);
                        }
                        Err(e) => {
                            saw_error = true;
                            let text = e.to_string();
                            assert!(
                                text.contains("injected")
                                    || text.contains("os error 28")
                                    || text.contains("read-only")
                                    || text.contains("stalled"),
                                "{ctx}: unclear error: {text}"
                            );
                            uncertain.entry(key.clone()).or_default().push(state);
                            // Reads keep working after a failed write.
                            for (k, v) in acked.iter().take(5) {
                                if !uncertain.contains_key(k) {
                                    assert_eq!(
                                        db.get(k).unwrap().map(|b| b.to_vec()),
                                        *v,
                                        "{ctx}: read after a failed write"
                                    );
                                }
                            }
                        }
                    }
                }
                failed_calls += u32::from(saw_error);
                drop(db);
                let db = Db::open(dir.path().join("db"), opts)
                    .unwrap_or_else(|e| panic!("{ctx}: reopen failed: {e}"));
                for k in 0..KEYS {
                    let key = format!("key{k:03}").into_bytes();
                    let got = db.get(&key).unwrap().map(|b| b.to_vec());
                    let want = acked.get(&key).cloned().unwrap_or(None);
                    let maybe = uncertain.get(&key).is_some_and(|s| s.contains(&got));
                    assert!(
                        got == want || maybe,
                        "{ctx}: key {k} holds {:?}, acknowledged {:?}",
                        got.as_deref().map(String::from_utf8_lossy),
                        want.as_deref().map(String::from_utf8_lossy)
                    );
                }
                // Writable after the reopen.
                db.put(b"after", b"reopen").unwrap();
            }
        }
    }
    assert!(failed_calls > 0, "no injected error ever reached a caller");
}

/// A bit flipped in what a read returns (table footer, index, filter or block, value log, log
/// record, segment, hint, manifest) is caught by a checksum: opening or reading reports
/// corruption naming a file, and never returns a wrong value.
#[test]
fn a_flipped_bit_in_any_read_is_reported_never_returned() {
    use strata::vfs::{FaultKind, IoKind};
    for engine in [Engine::Lsm, Engine::Log] {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new(dir.path()).unwrap();
        let opts = options(engine, &fs);
        let (acked, _) = {
            let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
            let r = run_until_failure(&db, &workload());
            db.compact().unwrap();
            db.close().unwrap();
            r
        };
        let mut reported = 0;
        for nth in 1..=40u64 {
            fs.fail(IoKind::Read, nth, FaultKind::FlipBit);
            let ctx = format!("{engine:?}, bit flipped in read {nth}");
            let db = match Db::open(dir.path().join("db"), opts.clone()) {
                Ok(db) => db,
                Err(e) => {
                    assert!(e.is_corruption(), "{ctx}: open failed otherwise: {e}");
                    reported += 1;
                    fs.power_cut().unwrap(); // clears the pending fault
                    continue;
                }
            };
            for (k, v) in &acked {
                match db.get(k) {
                    Ok(got) => assert_eq!(got.map(|b| b.to_vec()), *v, "{ctx}: wrong value"),
                    Err(e) => {
                        assert!(e.is_corruption(), "{ctx}: {e}");
                        reported += 1;
                    }
                }
            }
            db.close().unwrap();
            fs.power_cut().unwrap();
        }
        assert!(reported > 0, "{engine:?}: no flipped bit was ever reported");
    }
}

/// One run of [`a_power_cut_keeps_a_prefix_of_the_writes_across_partitions`]: one writer puts
/// keys `0..WRITES` in order, spread over four partitions by their hash, syncing by `sync`
/// (and, with `SyncMode::Never`, calling `Db::sync` every 100 writes); the power is cut at
/// changing call `point`. Returns the calls the run made.
fn prefix_run(sync: SyncMode, point: Option<u64>) -> u64 {
    const WRITES: u32 = 600;
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(dir.path()).unwrap();
    let opts = Options {
        partitions: 4,
        sync,
        ..options(Engine::Lsm, &fs)
    };
    let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
    if let Some(n) = point {
        fs.crash_at(n);
    }
    let key = |i: u32| format!("write{i:05}").into_bytes();
    // Values straddle the separation threshold (100 bytes): some stay in the logs.
    let value = |i: u32| {
        format!("{i}:")
            .repeat(1 + (i as usize * 7) % 60)
            .into_bytes()
    };
    // Writes every sync mode promises to keep: acknowledged under `Always`, acknowledged
    // before a successful `Db::sync` otherwise.
    let mut promised = 0u32;
    for i in 0..WRITES {
        if db.put(&key(i), &value(i)).is_err() {
            break;
        }
        if sync == SyncMode::Always {
            promised = i + 1;
        } else if i % 100 == 99 {
            if db.sync().is_err() {
                break;
            }
            promised = i + 1;
        }
    }
    let calls = fs.mutations();
    drop(db);
    fs.power_cut().unwrap();
    let ctx = format!("{sync:?}, power cut at call {point:?} of {calls}");
    let db = Db::open(dir.path().join("db"), opts)
        .unwrap_or_else(|e| panic!("{ctx}: the store does not open: {e}"));
    let kept: Vec<u32> = (0..WRITES)
        .filter(|&i| {
            let got = db
                .get(&key(i))
                .unwrap_or_else(|e| panic!("{ctx}: write {i}: {e}"));
            if let Some(v) = &got {
                assert_eq!(v[..], value(i)[..], "{ctx}: write {i} reads another value");
            }
            got.is_some()
        })
        .collect();
    let prefix = kept.iter().zip(0..).take_while(|(i, n)| *i == n).count() as u32;
    assert_eq!(
        kept.len() as u32,
        prefix,
        "{ctx}: kept {} writes but only the first {prefix} in order (e.g. write {} without write {prefix})",
        kept.len(),
        kept.get(prefix as usize).copied().unwrap_or(0)
    );
    assert!(
        prefix >= promised,
        "{ctx}: {promised} writes were promised durable, {prefix} survived"
    );
    calls
}

/// Each partition fsyncs its own log, and a flush makes one partition's writes permanent, so a
/// power cut can keep a write in one partition and lose an earlier one in another; recovery
/// cuts the order at the first write missing (`db.rs`, `cut_point`), so what survives is a
/// prefix of the writes, as from Redis's one append-only file, and never less than the sync
/// mode promised. Checked against one writer's order under `Never` (with `Db::sync`),
/// `EveryMs` and `Always`, at spread crash points through flushes and compactions (tiny
/// memtables).
#[test]
fn a_power_cut_keeps_a_prefix_of_the_writes_across_partitions() {
    let points = points_to_run() / 2;
    for sync in [SyncMode::Never, SyncMode::EveryMs(2), SyncMode::Always] {
        let total = prefix_run(sync, None);
        for i in 0..points {
            prefix_run(sync, Some(nth_point(i, points, total)));
        }
        prefix_run(sync, Some(total + 1));
    }
}

/// A log that fails while holding a batch not yet durable makes every partition refuse new
/// batches at once, naming it (a later batch could never be acknowledged in order after one
/// that may be lost), instead of applying writes it must then fail and stalling flushes that
/// cannot make their batches durable everywhere; reads go on, and a reopen accepts writes.
#[test]
fn a_failed_log_makes_every_partition_refuse_new_writes_at_once() {
    use strata::vfs::{FaultKind, IoKind};
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(dir.path()).unwrap();
    let opts = Options {
        partitions: 4,
        ..options(Engine::Lsm, &fs)
    };
    let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
    db.put(b"before", b"1").unwrap();
    fs.fail(IoKind::Sync, 1, FaultKind::Eio);
    let failed = db.put(b"failing", b"2").unwrap_err().to_string();
    assert!(failed.contains("injected"), "{failed}");
    let p = db.partition_of(b"failing");
    for i in 0..40 {
        let key = format!("later{i}").into_bytes();
        let e = db.put(&key, b"3").unwrap_err().to_string();
        assert!(e.contains("read-only"), "{e}");
        if db.partition_of(&key) != p {
            assert!(
                e.contains(&format!("the log of partition {p} failed")),
                "{e}"
            );
        }
        assert_eq!(db.get(&key).unwrap(), None, "a refused write was applied");
    }
    assert_eq!(db.get(b"before").unwrap().as_deref(), Some(&b"1"[..]));
    drop(db);
    let db = Db::open(dir.path().join("db"), opts).unwrap();
    assert_eq!(db.get(b"before").unwrap().as_deref(), Some(&b"1"[..]));
    db.put(b"after", b"4").unwrap();
}
