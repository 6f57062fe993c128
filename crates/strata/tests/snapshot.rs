//! Consistent reads and atomic writes across partitions: snapshots, batches that span
//! partitions, optimistic transactions and checkpoints, checked against models while
//! flushes, compactions and value-log collection run (tiny memtables and tables).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata::{Db, Engine, Error, Options, SyncMode, WriteBatch};

fn options(partitions: usize) -> Options {
    Options {
        partitions,
        sync: SyncMode::Never,
        memtable_bytes_max: 8 << 10,
        ..Options::tiny()
    }
}

fn account(i: u32) -> Vec<u8> {
    format!("acct{i:04}").into_bytes()
}

fn balance(v: &[u8]) -> i64 {
    std::str::from_utf8(v).unwrap().parse().unwrap()
}

/// The bank test: accounts spread over 8 partitions, threads moving random amounts between
/// random pairs in optimistic transactions, while other threads sum every balance at a
/// snapshot (by point reads and by a scan, forwards and backwards) and a third compacts: the sum
/// never changes.
#[test]
fn transfers_between_accounts_never_change_the_total_seen_at_a_snapshot() {
    const ACCOUNTS: u32 = 64;
    const START: i64 = 1_000;
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), options(8)).unwrap());
    let mut batch = WriteBatch::new();
    for i in 0..ACCOUNTS {
        batch.put(account(i), START.to_string());
    }
    db.write(batch).unwrap();
    let total = START * i64::from(ACCOUNTS);
    let stop = Arc::new(AtomicBool::new(false));
    let (commits, conflicts) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let movers: Vec<_> = (0..3u64)
        .map(|t| {
            let (db, commits, conflicts) = (db.clone(), commits.clone(), conflicts.clone());
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(t);
                for _ in 0..400 {
                    let (a, b) = (rng.gen_range(0..ACCOUNTS), rng.gen_range(0..ACCOUNTS));
                    if a == b {
                        continue;
                    }
                    // A pad makes values large enough to go to value logs sometimes.
                    let amount = rng.gen_range(1..50);
                    loop {
                        let mut tx = db.transaction().unwrap();
                        let from = balance(&tx.get(&account(a)).unwrap().unwrap());
                        let to = balance(&tx.get(&account(b)).unwrap().unwrap());
                        tx.put(&account(a), (from - amount).to_string().as_bytes())
                            .unwrap();
                        tx.put(&account(b), (to + amount).to_string().as_bytes())
                            .unwrap();
                        match tx.commit() {
                            Ok(()) => {
                                commits.fetch_add(1, Ordering::Relaxed);
                                break;
                            }
                            Err(Error::Conflict { .. }) => {
                                conflicts.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("commit failed: {e}"),
                        }
                    }
                }
            })
        })
        .collect();
    let auditors: Vec<_> = (0..2)
        .map(|_| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut audits = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let snap = db.snapshot().unwrap();
                    let by_get: i64 = (0..ACCOUNTS)
                        .map(|i| balance(&snap.get(&account(i)).unwrap().unwrap()))
                        .sum();
                    assert_eq!(by_get, total, "point reads at snapshot {}", snap.seq());
                    let by_scan: i64 = snap
                        .scan_prefix(b"acct")
                        .map(|kv| balance(&kv.unwrap().1))
                        .sum();
                    assert_eq!(by_scan, total, "scan at snapshot {}", snap.seq());
                    // A plain scan reads at an implicit snapshot.
                    let plain: i64 = db
                        .scan_prefix(b"acct")
                        .map(|kv| balance(&kv.unwrap().1))
                        .sum();
                    assert_eq!(plain, total, "plain scan");
                    let backwards: i64 = db
                        .scan_rev(&b"acct"[..]..&b"accu"[..])
                        .map(|kv| balance(&kv.unwrap().1))
                        .sum();
                    assert_eq!(backwards, total, "plain reverse scan");
                    audits += 1;
                }
                audits
            })
        })
        .collect();
    let compactor = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                db.compact().unwrap();
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        })
    };
    for m in movers {
        m.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    compactor.join().unwrap();
    let audits: u64 = auditors.into_iter().map(|a| a.join().unwrap()).sum();
    assert!(audits > 0);
    let final_sum: i64 = (0..ACCOUNTS)
        .map(|i| balance(&db.get(&account(i)).unwrap().unwrap()))
        .sum();
    assert_eq!(final_sum, total);
    assert!(commits.load(Ordering::Relaxed) > 1000);
    let stats = db.stats();
    assert!(stats.partitions.iter().map(|p| p.flushes).sum::<u64>() > 0);
    eprintln!(
        "{} commits, {} conflicts retried, {audits} audits",
        commits.load(Ordering::Relaxed),
        conflicts.load(Ordering::Relaxed)
    );
}

/// A slow scan at a snapshot, forwards and backwards, while writers overwrite and delete every
/// key it covers and the store flushes and compacts: it returns exactly the snapshot's contents
/// (a model taken when the snapshot was), and point reads at the snapshot agree.
#[test]
fn a_long_scan_at_a_snapshot_sees_exactly_its_moment() {
    const KEYS: u32 = 600;
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), options(4)).unwrap());
    let value = |k: u32, round: u32| {
        let mut v = format!("k{k}r{round}:").into_bytes();
        v.resize(v.len() + (k as usize * 7) % 300, b'x');
        v
    };
    let mut model = BTreeMap::new();
    for k in 0..KEYS {
        let key = format!("key{k:05}").into_bytes();
        if k % 5 != 0 {
            db.put(&key, &value(k, 0)).unwrap();
            model.insert(key, value(k, 0));
        }
    }
    let snap = db.snapshot().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut round = 1;
            while !stop.load(Ordering::Relaxed) {
                for k in 0..KEYS {
                    let key = format!("key{k:05}").into_bytes();
                    if (k + round) % 3 == 0 {
                        db.delete(&key).unwrap();
                    } else {
                        db.put(&key, &value(k, round)).unwrap();
                    }
                }
                db.compact().unwrap();
                round += 1;
            }
            round
        })
    };
    let mut seen = BTreeMap::new();
    for kv in snap.scan(&b"key"[..]..&b"kez"[..]) {
        let (k, v) = kv.unwrap();
        seen.insert(k.to_vec(), v.to_vec());
        if seen.len() % 50 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    // Backwards, as slowly, while the writer goes on: the same moment, greatest key first.
    let mut seen_down = Vec::new();
    for kv in snap.scan_rev(&b"key"[..]..&b"kez"[..]) {
        let (k, v) = kv.unwrap();
        seen_down.push((k.to_vec(), v.to_vec()));
        if seen_down.len() % 50 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    let model_down: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .rev()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(
        seen_down == model_down,
        "the reverse scan at the snapshot differs"
    );
    for k in (0..KEYS).step_by(7) {
        let key = format!("key{k:05}").into_bytes();
        assert_eq!(
            snap.get(&key).unwrap().map(|b| b.to_vec()),
            model.get(&key).cloned()
        );
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    assert!(rounds > 1, "the writer overwrote everything at least once");
    assert_eq!(seen, model);
    // The current state moved on.
    assert_ne!(
        db.get(b"key00001").unwrap().map(|b| b.to_vec()),
        model.get(&b"key00001"[..]).cloned()
    );
}

/// Batches spanning every partition, all keys set to the batch's number: readers at a
/// snapshot, plain scans and point reads never see keys from two batches at once.
#[test]
fn readers_never_see_part_of_a_batch_that_spans_partitions() {
    const KEYS: u32 = 24;
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), options(8)).unwrap());
    fn key(k: u32) -> Vec<u8> {
        format!("atom{k:03}").into_bytes()
    }
    fn write(db: &Db, n: u64) {
        let mut b = WriteBatch::new();
        for k in 0..KEYS {
            b.put(key(k), format!("{n:08}").repeat(1 + k as usize % 20));
        }
        db.write(b).unwrap();
    }
    write(&db, 0);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..300 {
                    write(&db, 1 + t + 2 * i);
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut checks = 0;
                while !stop.load(Ordering::Relaxed) {
                    let values: Vec<Vec<u8>> = if r == 0 {
                        let snap = db.snapshot().unwrap();
                        (0..KEYS)
                            .map(|k| snap.get(&key(k)).unwrap().unwrap()[..8].to_vec())
                            .collect()
                    } else {
                        db.scan_prefix(b"atom")
                            .map(|kv| kv.unwrap().1[..8].to_vec())
                            .collect()
                    };
                    assert_eq!(values.len(), KEYS as usize);
                    assert!(
                        values.iter().all(|v| *v == values[0]),
                        "a reader saw two batches at once: {:?}",
                        values
                            .iter()
                            .map(|v| String::from_utf8_lossy(v).into_owned())
                            .collect::<Vec<_>>()
                    );
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
}

#[test]
fn of_two_transactions_writing_a_key_both_read_exactly_one_commits() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(4)).unwrap();
    db.put(b"counter", b"0").unwrap();
    let mut a = db.transaction().unwrap();
    let mut b = db.transaction().unwrap();
    let va = balance(&a.get(b"counter").unwrap().unwrap());
    let vb = balance(&b.get(b"counter").unwrap().unwrap());
    a.put(b"counter", (va + 1).to_string().as_bytes()).unwrap();
    a.put(b"other", b"from a").unwrap();
    b.put(b"counter", (vb + 10).to_string().as_bytes()).unwrap();
    b.put(b"other", b"from b").unwrap();
    a.commit().unwrap();
    let err = b.commit().unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert!(err.to_string().contains("counter"), "{err}");
    assert_eq!(db.get(b"counter").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"other").unwrap().as_deref(), Some(&b"from a"[..]));

    // A change that was flushed into a table (no sequence number there) is caught by value.
    let mut c = db.transaction().unwrap();
    assert_eq!(c.get(b"counter").unwrap().as_deref(), Some(&b"1"[..]));
    db.put(b"counter", b"2").unwrap();
    db.flush().unwrap();
    c.put(b"counter", b"100").unwrap();
    assert!(c.commit().unwrap_err().is_conflict());
    assert_eq!(db.get(b"counter").unwrap().as_deref(), Some(&b"2"[..]));

    // Writes elsewhere, and to keys it only writes, do not conflict; it reads its own writes.
    let mut d = db.transaction().unwrap();
    assert_eq!(d.get(b"counter").unwrap().as_deref(), Some(&b"2"[..]));
    d.put(b"fresh", b"d").unwrap();
    assert_eq!(d.get(b"fresh").unwrap().as_deref(), Some(&b"d"[..]));
    db.put(b"unrelated", b"x").unwrap();
    db.put(b"fresh", b"someone else").unwrap();
    d.put(b"counter", b"3").unwrap();
    d.commit().unwrap();
    assert_eq!(db.get(b"counter").unwrap().as_deref(), Some(&b"3"[..]));
    assert_eq!(db.get(b"fresh").unwrap().as_deref(), Some(&b"d"[..]));

    // A read of an absent key conflicts with its creation.
    let mut e = db.transaction().unwrap();
    assert_eq!(e.get(b"absent").unwrap(), None);
    db.put(b"absent", b"now here").unwrap();
    e.put(b"absent", b"e").unwrap();
    assert!(e.commit().unwrap_err().is_conflict());
}

/// Many threads increment one counter through transactions: every commit is counted exactly
/// once (lost updates would leave the counter short).
#[test]
fn concurrent_transactional_increments_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), options(4)).unwrap());
    db.put(b"n", b"0").unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let db = db.clone();
            std::thread::spawn(move || {
                for _ in 0..200 {
                    loop {
                        let mut tx = db.transaction().unwrap();
                        let n = balance(&tx.get(b"n").unwrap().unwrap());
                        tx.put(b"n", (n + 1).to_string().as_bytes()).unwrap();
                        match tx.commit() {
                            Ok(()) => break,
                            Err(e) if e.is_conflict() => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(db.get(b"n").unwrap().as_deref(), Some(&b"800"[..]));
}

#[test]
fn the_log_engine_refuses_snapshots_and_transactions_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            engine: Engine::Log,
            ..options(2)
        },
    )
    .unwrap();
    let err = db.snapshot().unwrap_err();
    assert!(err.to_string().contains("LSM engine"), "{err}");
    assert!(db.transaction().is_err());
}

/// A checkpoint taken while batches spanning partitions are written opens as an ordinary
/// store holding one whole batch (never parts of two), at least the last one acknowledged
/// before the checkpoint began; the source goes on unaffected.
#[test]
fn a_checkpoint_of_a_live_store_is_consistent_and_opens() {
    for engine in [Engine::Lsm, Engine::Log] {
        const KEYS: u32 = 16;
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            engine,
            ..options(4)
        };
        let db = Arc::new(Db::open(dir.path().join("src"), opts.clone()).unwrap());
        let key = |k: u32| format!("ck{k:03}").into_bytes();
        let acked = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 1u64;
                while !stop.load(Ordering::Relaxed) {
                    let mut b = WriteBatch::new();
                    for k in 0..KEYS {
                        b.put(key(k), format!("{n:08}").repeat(1 + k as usize * 3));
                    }
                    db.write(b).unwrap();
                    acked.store(n, Ordering::Release);
                    n += 1;
                }
            })
        };
        while acked.load(Ordering::Acquire) < 50 {
            std::thread::yield_now();
        }
        let before = acked.load(Ordering::Acquire);
        let dest = dir.path().join("copy");
        db.checkpoint(&dest).unwrap();
        let after = acked.load(Ordering::Acquire) + 1;
        assert!(
            db.checkpoint(&dest).is_err(),
            "an existing destination is refused"
        );
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        let copy = Db::open(&dest, opts.clone()).unwrap();
        let values: Vec<u64> = (0..KEYS)
            .map(|k| {
                let v = copy.get(&key(k)).unwrap().unwrap();
                std::str::from_utf8(&v[..8]).unwrap().parse().unwrap()
            })
            .collect();
        assert!(
            values.iter().all(|v| (before..=after).contains(v)),
            "{engine:?}: {values:?} outside {before}..={after}"
        );
        if engine == Engine::Lsm {
            // Atomic batches and a point in time: every key from one batch.
            assert!(values.iter().all(|v| *v == values[0]), "{values:?}");
        }
        copy.put(b"only in the copy", b"1").unwrap();
        drop(copy);
        assert_eq!(db.get(b"only in the copy").unwrap(), None);
        let copy = Db::open(&dest, opts).unwrap();
        assert!(copy.get(b"only in the copy").unwrap().is_some());
    }
}

/// A checkpoint records, for each value log its tables point into, the value bytes those tables
/// reference. The running store's counts fall as compactions drop or move pointers after the
/// checkpoint's snapshot; written into the copy's manifest, such a count makes the copy delete a
/// value log its own tables still point into at its first compaction (found by review). Here
/// compactions move values while checkpoints are taken; every copy is compacted fully and must
/// still read every key.
#[test]
fn a_checkpoint_taken_while_compactions_move_values_keeps_every_value_log_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let opts = strata::Options {
        partitions: 1,
        ..strata::Options::tiny()
    };
    let db = std::sync::Arc::new(strata::Db::open(dir.path().join("db"), opts.clone()).unwrap());
    let value = |i: u32, k: u32| format!("{i}:{k}:").repeat(30).into_bytes();
    for k in 0..200u32 {
        db.put(format!("k{k:04}").as_bytes(), &value(0, k)).unwrap();
    }
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (db, done) = (db.clone(), done.clone());
        std::thread::spawn(move || {
            let mut i = 1u32;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                // A hot tenth of the keys: logs keep a few cold values among dead hot ones.
                let k = if i % 10 == 0 { i % 200 } else { i % 20 };
                db.put(format!("k{k:04}").as_bytes(), &value(i, k)).unwrap();
                i += 1;
            }
        })
    };
    for c in 0..40 {
        let copy = dir.path().join(format!("copy{c}"));
        db.checkpoint(&copy).unwrap();
        let cdb = strata::Db::open(&copy, opts.clone()).unwrap();
        cdb.compact().unwrap();
        for k in 0..200u32 {
            let got = cdb
                .get(format!("k{k:04}").as_bytes())
                .unwrap_or_else(|e| panic!("checkpoint {c}, key {k}: {e}"));
            assert!(got.is_some(), "checkpoint {c}: key {k} missing");
        }
        cdb.close().unwrap();
        std::fs::remove_dir_all(&copy).unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    let moved: u64 = db.stats().moved_value_files();
    assert!(
        moved > 0,
        "no compaction moved values during the checkpoints"
    );
}
