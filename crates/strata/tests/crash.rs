//! Crash test: a child process writes with `SyncMode::Always` (and, in a second pair of tests,
//! with `SyncMode::EveryMs` of a period longer than the test, so that nothing is fsynced while it
//! runs: a crash of the process must still lose nothing acknowledged, because every write hands
//! its record to the OS before it returns) and prints each acknowledged operation; the parent SIGKILLs it at a random moment (flushes and compactions run all the
//! time with tiny memtables), reopens the store and checks that every acknowledged write is there
//! with its latest value. The child's operations are a deterministic function of (seed, index),
//! so the parent knows the single operation that may have been in flight when it died.
//!
//! A third pair runs the buffered mode inside `strata::deferring_log_writes`, [`DEFERRED_OPS`]
//! operations per deferral, acknowledged only after `LogWrites::complete` (the server's network
//! threads write this way).
//!
//! A fourth runs the buffered mode with the value logs' space rule alone choosing what
//! compactions move (`space`: every compaction that meets a value log with any garbage moves
//! its live values to a value file of its own), and checks the killed children did move values.
//!
//! Rounds: `STRATA_CRASH_ROUNDS` (default 12); set it to hundreds for the long mode.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Model;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata::{Db, Engine, Options, SyncMode};

const KEYS: u64 = 3_000;
const SEED: u64 = 0x5eed;
/// Operations per deferral in the `deferred` mode: all may be in flight when the child dies.
const DEFERRED_OPS: u64 = 3;

/// Operation `n`: a put of a value that names `n`, or (every 7th) a delete. Writer thread
/// `n % 2` owns the keys with that parity, so each key sees one writer's operations in order.
fn op(n: u64) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut rng = SmallRng::seed_from_u64(SEED ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let key = format!("key{:05}", rng.gen_range(0..KEYS / 2) * 2 + n % 2).into_bytes();
    if n % 7 == 3 {
        (key, None)
    } else {
        let pad = rng.gen_range(0..400);
        let mut v = format!("v{n}:").into_bytes();
        v.resize(v.len() + pad, b'x');
        (key, Some(v))
    }
}

fn options(engine: Engine, sync_name: &str) -> Options {
    let mut o = Options {
        engine,
        partitions: 4,
        sync: sync_mode(sync_name),
        memtable_bytes_max: 4 << 10,
        ..Options::tiny()
    };
    if sync_name == "space" {
        o.value_log_gc_live_ratio = 0.0;
        o.value_log_space_ratio_max = 1.0;
    }
    o
}

/// Lines a child prints every this many acknowledgements: the value files it moved so far.
const MOVED_EVERY_ACKS: u64 = 100;

/// The child: runs only when the parent sets STRATA_CRASH_DIR.
#[test]
fn crash_child_entry() {
    let Ok(dir) = std::env::var("STRATA_CRASH_DIR") else {
        return;
    };
    let start: u64 = std::env::var("STRATA_CRASH_START")
        .unwrap()
        .parse()
        .unwrap();
    let engine = match std::env::var("STRATA_CRASH_ENGINE").as_deref() {
        Ok("log") => Engine::Log,
        _ => Engine::Lsm,
    };
    let sync_name = std::env::var("STRATA_CRASH_SYNC").unwrap_or_default();
    let db = std::sync::Arc::new(Db::open(&dir, options(engine, &sync_name)).unwrap());
    // Two writer threads share the log (group commit); each prints its acknowledgement before
    // it issues its next operation, so at most one operation per thread is in flight.
    let threads: Vec<_> = (0..2u64)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                let mut n = start + t;
                let deferred = std::env::var("STRATA_CRASH_SYNC").as_deref() == Ok("deferred");
                let per_ack = if deferred { DEFERRED_OPS } else { 1 };
                let apply = |n: u64| {
                    let (k, v) = op(n);
                    match v {
                        Some(v) => db.put(&k, &v).unwrap(),
                        None => db.delete(&k).unwrap(),
                    }
                };
                loop {
                    if deferred {
                        let ((), mut writes) = strata::deferring_log_writes(|| {
                            for i in 0..per_ack {
                                apply(n + 2 * i);
                            }
                        });
                        writes.complete().unwrap();
                    } else {
                        apply(n);
                    }
                    let out = std::io::stdout();
                    let mut o = out.lock();
                    for i in 0..per_ack {
                        writeln!(o, "ACK {}", n + 2 * i).unwrap();
                    }
                    if (n / 2) % MOVED_EVERY_ACKS == 0 {
                        writeln!(o, "MOVED {}", db.stats().moved_value_files()).unwrap();
                    }
                    o.flush().unwrap();
                    n += 2 * per_ack;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// `always`, or `buffered`/`deferred`/`space`: fsync every 10 minutes, i.e. never while a round
/// runs.
fn sync_mode(name: &str) -> SyncMode {
    match name {
        "buffered" | "deferred" | "space" => SyncMode::EveryMs(600_000),
        _ => SyncMode::Always,
    }
}

#[test]
fn every_acknowledged_write_survives_sigkill_lsm() {
    crash_rounds(Engine::Lsm, "always");
}

#[test]
fn every_acknowledged_write_survives_sigkill_log() {
    crash_rounds(Engine::Log, "always");
}

/// Without fsync a killed process still loses nothing: the records were in the OS.
#[test]
fn every_acknowledged_write_survives_sigkill_without_fsync_lsm() {
    crash_rounds(Engine::Lsm, "buffered");
}

#[test]
fn every_acknowledged_write_survives_sigkill_without_fsync_log() {
    crash_rounds(Engine::Log, "buffered");
}

/// Deferred hand-off to the OS: what `LogWrites::complete` returned for survives a kill.
#[test]
fn every_completed_deferred_write_survives_sigkill_lsm() {
    crash_rounds(Engine::Lsm, "deferred");
}

#[test]
fn every_completed_deferred_write_survives_sigkill_log() {
    crash_rounds(Engine::Log, "deferred");
}

/// Compactions moving values out of value logs by the space rule, killed at any moment: every
/// acknowledged write survives, through the moved copies.
#[test]
fn every_acknowledged_write_survives_sigkill_while_the_space_rule_moves_values_lsm() {
    crash_rounds(Engine::Lsm, "space");
}

fn crash_rounds(engine: Engine, sync_name: &str) {
    let rounds: usize = std::env::var("STRATA_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = SmallRng::seed_from_u64(7);
    // What the store held when the round started (checked at the end of the previous round).
    let mut before = Model::new();
    let mut start = 0u64;
    // Value files the children moved, per round (the most each reported).
    let mut moved_files = Vec::new();
    for round in 0..rounds {
        let mut child = Command::new(&exe)
            .args([
                "crash_child_entry",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("STRATA_CRASH_DIR", dir.path())
            .env("STRATA_CRASH_START", start.to_string())
            .env(
                "STRATA_CRASH_ENGINE",
                if engine == Engine::Log { "log" } else { "lsm" },
            )
            .env("STRATA_CRASH_SYNC", sync_name)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (first_tx, first_rx) = std::sync::mpsc::channel::<()>();
        let reader = std::thread::spawn(move || {
            let (mut acked, mut moved) = (Vec::new(), 0u64);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(n) = line.strip_prefix("MOVED ") {
                    moved = moved.max(n.parse::<u64>().unwrap());
                }
                if let Some(n) = line.strip_prefix("ACK ") {
                    acked.push(n.parse::<u64>().unwrap());
                    if acked.len() == 1 {
                        let _ = first_tx.send(());
                    }
                }
            }
            (acked, moved)
        });
        // Kill at a random moment once the child is writing (opening may take a while on a
        // loaded machine: it replays logs).
        let _ = first_rx.recv_timeout(Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..700)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let (acked, moved) = reader.join().unwrap();
        moved_files.push(moved);
        assert!(
            !acked.is_empty(),
            "round {round}: child acknowledged nothing"
        );

        // Writer t ran start+t, start+t+2, ... in order: everything up to its last
        // acknowledgement is done, and its next operation may or may not have happened.
        let mut last_acked = [None::<u64>; 2];
        for &n in &acked {
            let t = (n % 2) as usize;
            last_acked[t] = Some(last_acked[t].map_or(n, |m| m.max(n)));
        }
        let mut must = before.clone();
        // Operations of one deferral are acknowledged together, after all of them ran.
        let unacked_may_have_run = if sync_name == "deferred" {
            DEFERRED_OPS
        } else {
            1
        };
        let mut in_flight = Vec::new();
        for t in 0..2u64 {
            let first = start + t;
            let next = match last_acked[t as usize] {
                Some(last) => {
                    let mut n = first;
                    while n <= last {
                        let (k, v) = op(n);
                        match v {
                            Some(v) => must.insert(k, v),
                            None => must.remove(&k),
                        };
                        n += 2;
                    }
                    n
                }
                None => first,
            };
            in_flight.extend((0..unacked_may_have_run).map(|i| next + 2 * i));
        }
        let db = Db::open(dir.path(), options(engine, sync_name)).unwrap();
        let mut after = Model::new();
        for kv in db.scan::<&[u8], _>(..) {
            let (k, v) = kv.unwrap();
            after.insert(k.to_vec(), v.to_vec());
        }
        let keys: std::collections::BTreeSet<&Vec<u8>> = must.keys().chain(after.keys()).collect();
        for key in keys {
            let got = after.get(key);
            let mut ok = got == must.get(key);
            for &n in &in_flight {
                let (k, v) = op(n);
                if k == *key && got == v.as_ref() {
                    ok = true;
                }
            }
            assert!(
                ok,
                "{engine:?} {sync_name} round {round}: key {} holds {:?}, expected {:?}",
                String::from_utf8_lossy(key),
                got.map(|v| String::from_utf8_lossy(&v[..v.len().min(12)]).to_string()),
                must.get(key)
                    .map(|v| String::from_utf8_lossy(&v[..v.len().min(12)]).to_string())
            );
            // Point reads agree with the scan.
            assert_eq!(db.get(key).unwrap().as_deref(), got.map(|v| &v[..]));
        }
        let s = db.stats();
        eprintln!(
            "{engine:?} round {round}: {} acknowledged, {} keys, tables per level {:?}",
            acked.len(),
            before.len(),
            s.partitions[0]
                .levels
                .iter()
                .map(|l| l.tables)
                .collect::<Vec<_>>()
        );
        db.close().unwrap();
        before = after;
        // Start past every operation that was issued, on an even number (thread parity).
        let issued_max = in_flight.iter().copied().max().unwrap_or(start);
        start = (issued_max + 2) & !1;
    }
    if sync_name == "space" {
        eprintln!("value files moved per round: {moved_files:?}");
        assert!(
            moved_files.iter().sum::<u64>() > 0,
            "the space rule moved nothing in any round"
        );
    }
}
