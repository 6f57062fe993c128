//! Model-based tests: random operations of every workload
//! and known-key rate, checked one by one against a `BTreeMap`, with tiny memtables so that
//! flushes and compactions run hundreds of times, scans checked against the model, and a close
//! and reopen in the middle.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ops::Bound;

use common::{tiny, Model, Op, OpGen, Workload, ALL_WORKLOADS, ENGINES, KNOWN_KEY_RATES};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata::{Compression, Db, Engine, Options};

fn check_scan(db: &Db, model: &Model, lo: &[u8], hi: &[u8]) {
    let got: Vec<(Vec<u8>, Vec<u8>)> = db
        .scan(lo.to_vec()..hi.to_vec())
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .range::<Vec<u8>, _>((Bound::Included(lo.to_vec()), Bound::Excluded(hi.to_vec())))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(got.len(), want.len(), "scan {lo:?}..{hi:?} length");
    assert!(got == want, "scan {lo:?}..{hi:?} differs from the model");
    // Descending across partitions (`Db::scan_rev`): the same entries backwards, whole and
    // its first ten.
    let down: Vec<(Vec<u8>, Vec<u8>)> = want.into_iter().rev().collect();
    for take in [10, usize::MAX] {
        let got: Vec<(Vec<u8>, Vec<u8>)> = db
            .scan_rev(lo.to_vec()..hi.to_vec())
            .take(take)
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_, _>>()
            .unwrap();
        let want: Vec<_> = down.iter().take(take).cloned().collect();
        assert!(
            got == want,
            "scan_rev {lo:?}..{hi:?} (first {take}) differs"
        );
    }
}

fn run(engine: Engine, workload: Workload, known_rate: f64, seed: u64, ops: usize) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        partitions: 3,
        ..tiny(engine)
    };
    let mut db = Db::open(dir.path(), opts.clone()).unwrap();
    let mut model = Model::new();
    let mut gen = OpGen::new(seed, workload, known_rate, b"");
    let mut flushes = 0;
    let mut merges_before_reopen = 0;
    for i in 0..ops {
        if i == ops / 2 {
            let before = db.stats();
            flushes += before.partitions.iter().map(|p| p.flushes).sum::<u64>();
            merges_before_reopen += before.partitions.iter().map(|p| p.compactions).sum::<u64>();
            db.close().unwrap();
            db = Db::open(dir.path(), opts.clone()).unwrap();
        }
        if i % (ops / 8) == 0 {
            let a = format!("{:08}", gen.rng().gen_range(0..1_000_000));
            let b = format!("{:08}", gen.rng().gen_range(0..1_000_000));
            let (lo, hi) = if a < b { (a, b) } else { (b, a) };
            check_scan(&db, &model, lo.as_bytes(), hi.as_bytes());
        }
        match gen.next_op() {
            Op::Put(k, v) => {
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            Op::Delete(k) => {
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            Op::Get(k) => {
                let got = db.get(&k).unwrap();
                assert_eq!(
                    got.as_deref(),
                    model.get(&k).map(|v| &v[..]),
                    "op {i}: get {:?} ({engine:?}, {workload:?}, rate {known_rate})",
                    String::from_utf8_lossy(&k)
                );
            }
        }
    }
    check_scan(&db, &model, b"", b"\xff");
    // Every key reads back, also after a full compaction that drops tombstones.
    db.compact().unwrap();
    check_scan(&db, &model, b"", b"\xff");
    for (k, v) in model.iter().take(500) {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]));
    }
    let s = db.stats();
    flushes += s.partitions.iter().map(|p| p.flushes).sum::<u64>();
    // Background work of the whole run: before the reopen and after it.
    let compactions =
        merges_before_reopen + s.partitions.iter().map(|p| p.compactions).sum::<u64>();
    db.close().unwrap();
    (flushes, compactions)
}

#[test]
fn every_workload_and_known_key_rate_matches_the_model() {
    let mut seed = 1;
    for engine in ENGINES {
        for workload in ALL_WORKLOADS {
            for rate in KNOWN_KEY_RATES {
                run(engine, workload, rate, seed, 6_000);
                seed += 1;
            }
        }
    }
}

#[test]
fn put_heavy_runs_hundreds_of_flushes_and_still_matches_the_model() {
    let (flushes, compactions) = run(Engine::Lsm, Workload::PutHeavy, 0.5, 99, 40_000);
    assert!(flushes >= 200, "only {flushes} flushes");
    // Background compactions of the whole run plus the final full one.
    assert!(compactions >= 10, "only {compactions} compactions");
}

#[test]
fn log_engine_merges_segments_under_overwrites_and_still_matches_the_model() {
    let (_, merges) = run(Engine::Log, Workload::DeleteHeavy, 0.9, 98, 40_000);
    assert!(merges >= 5, "only {merges} merges");
}

#[test]
fn log_engine_disk_use_stays_within_twice_the_live_data() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            partitions: 2,
            ..tiny(Engine::Log)
        },
    )
    .unwrap();
    let value = [7u8; 200];
    // 500 live keys overwritten 40 times each.
    for round in 0..40 {
        for k in 0..500u32 {
            db.put(format!("k{k:04}").as_bytes(), &value).unwrap();
        }
        if round == 39 {
            break;
        }
    }
    let live = 500 * (5 + 200 + 12) as u64;
    // Twice the live data, plus the active segment of each partition (not merged yet).
    let bound = 2 * live + 2 * 32 * 1024 + 4096;
    // Merges run in the background; give them up to 10 s to get there (a loaded 2-core machine
    // runs many tests at once), then measure.
    let disk_now = || -> u64 {
        let s = db.stats();
        s.partitions.iter().map(|p| p.table_bytes()).sum()
    };
    for _ in 0..500 {
        if disk_now() <= bound {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let disk = disk_now();
    assert!(disk <= bound, "disk {disk} vs live {live}");
    let s = db.stats();
    assert_eq!(s.partitions.iter().map(|p| p.index_keys).sum::<u64>(), 500);
    assert!(
        s.partitions.iter().map(|p| p.compactions).sum::<u64>() >= 4,
        "no background merges ran"
    );
}

#[test]
fn scan_prefix_merges_partitions_in_key_order() {
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(
            dir.path(),
            Options {
                partitions: 8,
                ..tiny(engine)
            },
        )
        .unwrap();
        let mut model = Model::new();
        for i in 0..3000u32 {
            let k = format!(
                "{}/{:05}",
                ["a", "b", "c"][(i % 3) as usize],
                i * 7919 % 3000
            );
            db.put(k.as_bytes(), &i.to_le_bytes()).unwrap();
            model.insert(k.into_bytes(), i.to_le_bytes().to_vec());
        }
        let got: Vec<Vec<u8>> = db
            .scan_prefix(b"b/")
            .map(|r| r.unwrap().0.to_vec())
            .collect();
        let want: Vec<Vec<u8>> = model
            .keys()
            .filter(|k| k.starts_with(b"b/"))
            .cloned()
            .collect();
        assert_eq!(got, want);
    }
}

#[test]
fn a_value_equal_to_any_byte_pattern_is_not_a_tombstone() {
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), tiny(engine)).unwrap();
        for v in [&b""[..], b"\x00", b"\xff", b"TOMBSTONE", b"\x02", b"\x01"] {
            db.put(b"k", v).unwrap();
            assert_eq!(db.get(b"k").unwrap().as_deref(), Some(v));
            db.flush().unwrap();
            db.compact().unwrap();
            assert_eq!(db.get(b"k").unwrap().as_deref(), Some(v));
        }
    }
}

#[test]
fn oversized_keys_and_values_are_refused_with_the_limit_named() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        key_bytes_max: 16,
        value_bytes_max: 100,
        ..Options::tiny()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let e = db.put(&[1u8; 17], b"v").unwrap_err().to_string();
    assert!(
        e.contains("key") && e.contains("17") && e.contains("16"),
        "{e}"
    );
    let e = db.put(b"k", &[0u8; 101]).unwrap_err().to_string();
    assert!(e.contains("value") && e.contains("101"), "{e}");
    db.put(&[1u8; 16], &[0u8; 100]).unwrap();
}

#[test]
fn reopening_with_another_partition_count_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            partitions: 4,
            ..Options::tiny()
        },
    )
    .unwrap();
    db.put(b"a", b"1").unwrap();
    db.close().unwrap();
    let err = Db::open(
        dir.path(),
        Options {
            partitions: 8,
            ..Options::tiny()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("4 partitions") && err.contains("8"), "{err}");
    assert_eq!(Db::existing_partitions(dir.path()).unwrap(), Some(4));
    let err = Db::open(
        dir.path(),
        Options {
            partitions: 4,
            ..tiny(Engine::Log)
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("Lsm") && err.contains("Log"), "{err}");
}

#[test]
fn write_batch_applies_puts_and_deletes_in_order() {
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), tiny(engine)).unwrap();
        db.put(b"x", b"old").unwrap();
        let mut b = strata::WriteBatch::new();
        b.put(b"a", b"1")
            .delete(b"x")
            .put(b"b", b"2")
            .put(b"a", b"3");
        db.write(b).unwrap();
        assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"3"[..]));
        assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
        assert_eq!(db.get(b"x").unwrap(), None);
    }
}

/// A batch that writes one key more than once keeps its last value through merges (log engine)
/// and compactions (LSM), before and after a reopen. Batches like this come from `MSET k a k b`,
/// from pipelined `SET`s the server groups, and from `DocStore::put_many`.
#[test]
fn a_batch_writing_one_key_twice_keeps_the_last_value_through_compactions() {
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let expect = |db: &Db, when: &str| {
            assert_eq!(
                db.get(b"k").unwrap().as_deref(),
                Some(&b"v2"[..]),
                "{engine:?}: {when}"
            );
            assert_eq!(db.get(b"d").unwrap(), None, "{engine:?}: {when}");
            assert_eq!(
                db.get(b"e").unwrap().as_deref(),
                Some(&b"e2"[..]),
                "{engine:?}: {when}"
            );
        };
        {
            let db = Db::open(dir.path(), tiny(engine)).unwrap();
            let mut b = strata::WriteBatch::new();
            b.put(b"k", b"v1")
                .put(b"d", b"d1")
                .put(b"k", b"v2")
                .delete(b"d")
                .delete(b"e")
                .put(b"e", b"e2");
            db.write(b).unwrap();
            expect(&db, "after the write");
            db.compact().unwrap();
            expect(&db, "after one compaction");
            db.compact().unwrap();
            expect(&db, "after two compactions");
            db.close().unwrap();
        }
        let db = Db::open(dir.path(), tiny(engine)).unwrap();
        expect(&db, "after reopening");
        db.compact().unwrap();
        expect(&db, "after reopening and compacting");
    }
}

#[test]
fn update_is_atomic_under_concurrency() {
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let db = std::sync::Arc::new(Db::open(dir.path(), tiny(engine)).unwrap());
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let db = db.clone();
                std::thread::spawn(move || {
                    for i in 0..500 {
                        let key = format!("counter{}", i % 4);
                        db.update(key.as_bytes(), |old| {
                            let n: u64 = old
                                .map(|b| std::str::from_utf8(b).unwrap().parse().unwrap())
                                .unwrap_or(0);
                            Ok((strata::Update::Put((n + 1).to_string().into_bytes()), ()))
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        for c in 0..4 {
            let v = db.get(format!("counter{c}").as_bytes()).unwrap().unwrap();
            assert_eq!(&v[..], b"1000");
        }
    }
}

#[test]
fn ingest_of_sorted_entries_matches_the_model_and_shadows_older_data() {
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            partitions: 3,
            ..tiny(engine)
        };
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        let mut model = Model::new();
        // Older data written normally, partly overlapping the ingested range.
        for i in (0..3000u32).step_by(3) {
            let k = format!("k{i:06}").into_bytes();
            db.put(&k, b"old").unwrap();
            model.insert(k, b"old".to_vec());
        }
        db.delete(b"k000003").unwrap();
        model.remove(b"k000003".as_slice());
        let ingested: Vec<(Vec<u8>, Vec<u8>)> = (1000..5000u32)
            .map(|i| {
                (
                    format!("k{i:06}").into_bytes(),
                    format!("new{i}").into_bytes(),
                )
            })
            .collect();
        assert_eq!(db.ingest(ingested.iter().cloned()).unwrap(), 4000);
        for (k, v) in ingested {
            model.insert(k, v);
        }
        check_scan(&db, &model, b"", b"\xff");
        // Writes after the ingest are newer than it.
        db.put(b"k001500", b"newest").unwrap();
        model.insert(b"k001500".to_vec(), b"newest".to_vec());
        db.close().unwrap();
        let db = Db::open(dir.path(), opts).unwrap();
        check_scan(&db, &model, b"", b"\xff");
        for (k, v) in model.iter().step_by(7) {
            assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]), "{engine:?}");
        }
        // Unsorted input is refused with a clear error.
        let e = db
            .ingest([
                (b"b".to_vec(), b"1".to_vec()),
                (b"a".to_vec(), b"2".to_vec()),
            ])
            .unwrap_err()
            .to_string();
        assert!(e.contains("strictly increasing"), "{e}");
    }
}

#[test]
fn ingest_into_an_empty_store_lands_in_the_bottom_level() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            partitions: 2,
            ..Options::tiny()
        },
    )
    .unwrap();
    db.ingest((0..2000u32).map(|i| (format!("{i:08}"), vec![1u8; 100])))
        .unwrap();
    let s = db.stats();
    for p in &s.partitions {
        assert_eq!(p.levels[0].tables, 0);
        assert!(p.levels[6].tables > 0, "{:?}", p.levels);
    }
    assert_eq!(db.scan::<&[u8], _>(..).count(), 2000);
}

#[test]
fn value_logs_are_collected_under_overwrites_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        partitions: 2,
        ..Options::tiny()
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let mut model = Model::new();
    // 300 keys with values above the separation threshold, overwritten 30 times.
    for round in 0..30u32 {
        for k in 0..300u32 {
            let key = format!("k{k:04}").into_bytes();
            let value = format!("{round}:{k}:").repeat(40).into_bytes();
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
    }
    db.compact().unwrap();
    let s = db.stats();
    let gcs: u64 = s.partitions.iter().map(|p| p.value_log_gcs).sum();
    let vlog_bytes: u64 = s.partitions.iter().map(|p| p.value_log_bytes).sum();
    let live: u64 = model.values().map(|v| v.len() as u64).sum();
    eprintln!("gcs {gcs}, value log bytes {vlog_bytes}, live {live}");
    assert!(gcs > 0, "no value log was collected");
    // Rewritten values go through the log: its bytes hold them besides the user's, so write
    // amplification must not count them a second time.
    for p in &s.partitions {
        assert!(
            p.wal_bytes_written >= p.user_bytes_written + p.value_log_gc_bytes_written,
            "{p:?}"
        );
    }
    assert_write_amplification_counts_every_write(&s);
    // Garbage no longer piles up: value logs hold at most a few times the live data.
    assert!(
        vlog_bytes <= 4 * live + 64 * 1024,
        "value logs {vlog_bytes} vs live {live}"
    );
    check_scan(&db, &model, b"", b"\xff");
    db.close().unwrap();
    let db = Db::open(dir.path(), opts).unwrap();
    check_scan(&db, &model, b"", b"\xff");
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]));
    }
}

/// Write amplification is everything written to disk (logs, with garbage collection's rewrites;
/// tables of flushes and compactions; value files of compactions) over what the user wrote.
fn assert_write_amplification_counts_every_write(s: &strata::Stats) {
    let disk: u64 = s
        .partitions
        .iter()
        .map(|p| {
            p.wal_bytes_written
                + p.flush_bytes_written
                + p.compaction_bytes_written
                + p.moved_value_bytes_written
        })
        .sum();
    let user: u64 = s.partitions.iter().map(|p| p.user_bytes_written).sum();
    assert!((s.write_amplification() - disk as f64 / user as f64).abs() < 1e-9);
}

/// The memtable budget is shared by all partitions: with memtables allowed 32 MiB each but a
/// budget of 1 MiB for all of them, writing 4 MiB makes the partitions switch and flush early,
/// and what the memtables hold afterwards stays near the budget. Nothing is lost on the way.
#[test]
fn memtables_of_all_partitions_share_one_budget() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            partitions: 4,
            memtable_bytes_max: 32 << 20,
            memtable_budget_bytes: 1 << 20,
            // Values copied into the memtables: a value left in the log is charged as its
            // 24-byte pointer, and 4 MiB of those would not reach the budget.
            value_log_bytes_min: Some(usize::MAX),
            ..Options::default()
        },
    )
    .unwrap();
    let mut model = Model::new();
    for i in 0..4096u32 {
        let key = format!("key{i:06}").into_bytes();
        let value = vec![(i % 251) as u8; 1024];
        db.put(&key, &value).unwrap();
        model.insert(key, value);
    }
    db.sync().unwrap();
    let s = db.stats();
    let flushes: u64 = s.partitions.iter().map(|p| p.flushes).sum();
    let memtables: u64 = s.partitions.iter().map(|p| p.memtable_bytes).sum();
    assert!(flushes > 0, "no partition switched its memtable");
    assert!(
        memtables <= 2 << 20,
        "active memtables hold {memtables} bytes with a 1 MiB budget"
    );
    check_scan(&db, &model, b"", b"\xff");
}

/// Garbage that compaction cannot see is found by sampling: the first versions of 300 keys sit
/// in the bottom level, their overwrites in level 0, and level 0 never compacts (its trigger is
/// out of reach), so no compaction ever drops the old pointers. Sampling the old value logs
/// after the flushes finds them dead and garbage collection deletes them.
#[test]
fn value_log_sampling_finds_garbage_compaction_has_not_seen() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        partitions: 1,
        l0_compaction_trigger: 1000,
        l0_slowdown_tables: 2000,
        l0_stop_tables: 3000,
        ..Options::tiny()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let value = |round: u32, k: u32| format!("{round}:{k}:").repeat(40).into_bytes();
    for k in 0..300u32 {
        db.put(format!("k{k:04}").as_bytes(), &value(0, k)).unwrap();
    }
    db.compact().unwrap();
    let before = db.stats().partitions[0].clone();
    assert_eq!(before.levels[0].tables, 0, "everything compacted down");
    for k in 0..300u32 {
        db.put(format!("k{k:04}").as_bytes(), &value(1, k)).unwrap();
    }
    db.flush().unwrap();
    // Background work (flush, then a sample per flush, then collection) runs on its own
    // threads; wait for it, with a generous bound for a loaded machine.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let p = db.stats().partitions[0].clone();
        if p.value_log_gcs > before.value_log_gcs {
            assert_eq!(p.compactions, before.compactions, "no compaction ran");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no value log collected: {} logs, {} bytes, {} live",
            p.value_log_files,
            p.value_log_bytes,
            p.value_log_live_bytes
        );
        // Each flush allows one more sample.
        db.put(b"tick", &value(2, 0)).unwrap();
        db.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for k in 0..300u32 {
        assert_eq!(
            db.get(format!("k{k:04}").as_bytes()).unwrap().as_deref(),
            Some(&value(1, k)[..])
        );
    }
}

/// With LZ4 and no explicit separation threshold, values stay in the (compressed) table blocks:
/// value logs are not compressed, so separating compressible values would store them at full
/// size. Compressible 1 KiB values then take well under half their size on disk, and without
/// compression the same values are separated into value logs.
#[test]
fn lz4_keeps_values_in_compressed_tables_by_default() {
    let write = |compression: Compression| {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(
            dir.path(),
            Options {
                partitions: 2,
                compression,
                ..Options::default()
            },
        )
        .unwrap();
        let mut model = Model::new();
        for i in 0..4000u32 {
            let key = format!("doc{i:06}").into_bytes();
            let value = format!("{{\"id\":{i},\"body\":\"some words repeat\"}}")
                .repeat(30)
                .into_bytes();
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
        db.compact().unwrap();
        let s = db.stats();
        check_scan(&db, &model, b"", b"\xff");
        let user: u64 = model.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
        let vlog_files: usize = s.partitions.iter().map(|p| p.value_log_files).sum();
        (s.disk_bytes(), user, vlog_files)
    };
    let (lz4_disk, user, lz4_vlogs) = write(Compression::Lz4);
    assert_eq!(lz4_vlogs, 0, "LZ4 separated values by default");
    assert!(
        lz4_disk * 2 < user,
        "LZ4: {lz4_disk} bytes on disk for {user} bytes written"
    );
    let (_, _, plain_vlogs) = write(Compression::None);
    assert!(plain_vlogs > 0, "no value log kept without compression");
}

/// A value log also holds, as garbage, the values that were small enough to go into tables at
/// flush. Background collection leaves a log alone until half of it is dead; a full compaction
/// (asked for to get space back) collects it once a tenth is dead, and loses nothing.
#[test]
fn full_compaction_collects_value_logs_holding_small_values_as_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        partitions: 2,
        // The regime this test describes: logs about 60 % live are left to the full compaction
        // (at the default 0.65 the compactions before it move their values instead).
        value_log_gc_live_ratio: 0.5,
        value_log_space_ratio_max: f64::INFINITY,
        ..Options::tiny()
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let mut model = Model::new();
    // Every other value is under the separation threshold (100 bytes in `tiny`).
    for i in 0..3000u32 {
        let key = format!("k{i:05}").into_bytes();
        let len = if i % 2 == 0 { 150 } else { 90 };
        let value = vec![(i % 251) as u8; len];
        db.put(&key, &value).unwrap();
        model.insert(key, value);
    }
    db.flush().unwrap();
    let vlog_bytes = |db: &Db| -> u64 {
        db.stats()
            .partitions
            .iter()
            .map(|p| p.value_log_bytes)
            .sum()
    };
    let before = vlog_bytes(&db);
    db.compact().unwrap();
    let after = vlog_bytes(&db);
    let separated: u64 = model
        .values()
        .filter(|v| v.len() >= 100)
        .map(|v| v.len() as u64)
        .sum();
    eprintln!("value logs {before} -> {after} bytes, separated values {separated}");
    assert!(after * 4 < before * 3, "value logs {before} -> {after}");
    assert!(
        after < separated * 13 / 10,
        "value logs {after}, live {separated}"
    );
    check_scan(&db, &model, b"", b"\xff");
    db.close().unwrap();
    let db = Db::open(dir.path(), opts).unwrap();
    check_scan(&db, &model, b"", b"\xff");
}

/// Compactions move the live values of mostly dead value logs into value files of their own
/// (`.vlog`) instead of leaving them to garbage collection's lookups: under a skewed overwrite
/// workload (a hot tenth of the keys written nine times as often, so that logs hold a few cold
/// values among dead hot ones) values are moved, nothing is lost or changed, the moved bytes
/// count in write amplification, and a reopened store and a checkpoint read the same.
#[test]
fn compactions_move_live_values_out_of_mostly_dead_logs_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        partitions: 2,
        ..Options::tiny()
    };
    let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
    let mut model = Model::new();
    let mut rng = SmallRng::seed_from_u64(7);
    for i in 0..20_000u32 {
        let k = if rng.gen_bool(0.9) {
            rng.gen_range(0..50u32)
        } else {
            rng.gen_range(50..500u32)
        };
        let key = format!("k{k:04}").into_bytes();
        let value = format!("{i}:{k}:").repeat(30).into_bytes();
        db.put(&key, &value).unwrap();
        model.insert(key, value);
    }
    db.flush().unwrap();
    let s = db.stats();
    let moved_files: u64 = s.moved_value_files();
    let moved_bytes: u64 = s
        .partitions
        .iter()
        .map(|p| p.moved_value_bytes_written)
        .sum();
    eprintln!(
        "moved {moved_files} files, {moved_bytes} bytes; gcs {}",
        s.partitions.iter().map(|p| p.value_log_gcs).sum::<u64>()
    );
    assert!(moved_files > 0, "no compaction moved a value");
    assert_write_amplification_counts_every_write(&s);
    let moved_on_disk = std::fs::read_dir(dir.path().join("db/p0000/wal"))
        .unwrap()
        .chain(std::fs::read_dir(dir.path().join("db/p0001/wal")).unwrap())
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".vlog")
        })
        .count();
    assert!(moved_on_disk > 0, "no value file on disk");
    check_scan(&db, &model, b"", b"\xff");
    let copy = dir.path().join("copy");
    db.checkpoint(&copy).unwrap();
    db.close().unwrap();
    for path in [dir.path().join("db"), copy] {
        let db = Db::open(&path, opts.clone()).unwrap();
        check_scan(&db, &model, b"", b"\xff");
        for (k, v) in &model {
            assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]), "{path:?}");
        }
    }
}

/// With every value separated (`value_log_bytes_min: Some(0)`), empty values stay readable
/// through flushes and compactions: a pointer to an empty value counted no live bytes, so the
/// value log it pointed into was dropped at the flush and the key then read as damage.
#[test]
fn empty_values_stay_readable_when_every_value_is_separated() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        partitions: 1,
        value_log_bytes_min: Some(0),
        ..tiny(Engine::Lsm)
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    db.put(b"empty", b"").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(b"empty").unwrap().as_deref(), Some(&b""[..]));
    let mut model = Model::new();
    for round in 0..200u32 {
        for k in 0..20u32 {
            let key = format!("k{k:02}").into_bytes();
            let value = if (k + round) % 3 == 0 {
                Vec::new()
            } else {
                format!("{round}:{k}").into_bytes()
            };
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
        if round % 20 == 0 {
            db.flush().unwrap();
        }
    }
    drop(db);
    let db = Db::open(dir.path(), opts).unwrap();
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]));
    }
    assert_eq!(db.get(b"empty").unwrap().as_deref(), Some(&b""[..]));
}

/// A range whose start comes after its end is empty, on every engine and every way of
/// scanning (it panicked in the memtable's B-tree: `strata scan --start z --end a`).
#[test]
fn a_backwards_range_scans_nothing() {
    use std::ops::Bound::{Excluded, Included};
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), tiny(engine)).unwrap();
        db.put(b"m", b"1").unwrap();
        assert_eq!(db.scan(b"z".to_vec()..b"a".to_vec()).count(), 0);
        assert_eq!(db.scan(b"z".to_vec()..=b"a".to_vec()).count(), 0);
        let both_excluded = (Excluded(b"m".to_vec()), Excluded(b"m".to_vec()));
        assert_eq!(db.scan(both_excluded).count(), 0);
        let equal = (Included(b"m".to_vec()), Included(b"m".to_vec()));
        assert_eq!(db.scan(equal).count(), 1);
        assert_eq!(
            db.scan_routed(b"m", b"z".to_vec()..b"a".to_vec()).count(),
            0
        );
    }
}

/// Sizes that would make a table per entry or a level always over its target are refused when
/// the store opens, with the setting named.
#[test]
fn zero_table_and_level_targets_are_refused() {
    for opts in [
        Options {
            table_bytes_target: 0,
            ..tiny(Engine::Lsm)
        },
        Options {
            level1_bytes_target: 0,
            ..tiny(Engine::Lsm)
        },
    ] {
        let dir = tempfile::tempdir().unwrap();
        match Db::open(dir.path(), opts) {
            Err(strata::Error::InvalidArgument(why)) => assert!(why.contains("target"), "{why}"),
            Err(e) => panic!("other error: {e}"),
            Ok(_) => panic!("opened with a zero target"),
        }
    }
}

/// An ingest that fails (here: a key out of order at the end) leaves no table files behind
/// beside the ones the store lists: its finished tables are removed at once, not at the next
/// open (they held space on a disk that may be full).
#[test]
fn a_failed_ingest_leaves_no_tables_behind() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        partitions: 2,
        ..tiny(Engine::Lsm)
    };
    let db = Db::open(dir.path(), opts).unwrap();
    db.put(b"before", b"1").unwrap();
    db.flush().unwrap();
    let mut entries: Vec<(Vec<u8>, Vec<u8>)> = (0..20_000u32)
        .map(|i| (format!("k{i:06}").into_bytes(), vec![b'v'; 40]))
        .collect();
    entries.push((b"a-out-of-order".to_vec(), b"x".to_vec()));
    assert!(db.ingest(entries).is_err());
    let listed: usize = db
        .stats()
        .partitions
        .iter()
        .flat_map(|p| p.levels.iter())
        .map(|l| l.tables)
        .sum();
    let mut on_disk = 0;
    for p in std::fs::read_dir(dir.path()).unwrap() {
        let sst = p.unwrap().path().join("sst");
        if sst.is_dir() {
            on_disk += std::fs::read_dir(&sst)
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "sst"))
                })
                .count();
        }
    }
    assert_eq!(
        on_disk, listed,
        "table files on disk beside the listed ones"
    );
    assert_eq!(db.get(b"k000001").unwrap(), None);
    assert_eq!(db.get(b"before").unwrap().as_deref(), Some(&b"1"[..]));
}

/// An ingest whose input fails part way (an external sort's run that cannot be read) installs
/// nothing on the LSM engine: `strata ingest` used to end its input at the error, installing
/// everything before it.
#[test]
fn an_ingest_whose_input_fails_installs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            partitions: 2,
            ..tiny(Engine::Lsm)
        },
    )
    .unwrap();
    let input = (0..5_000u32).map(|i| {
        if i == 4_000 {
            Err(strata::Error::InvalidArgument("run damaged".into()))
        } else {
            Ok((format!("k{i:06}").into_bytes(), b"v".to_vec()))
        }
    });
    assert!(db.try_ingest(input).is_err());
    assert_eq!(db.scan::<&[u8], _>(..).count(), 0);
    let complete = (0..100u32).map(|i| Ok((format!("k{i:06}").into_bytes(), b"v".to_vec())));
    assert_eq!(db.try_ingest(complete).unwrap(), 100);
    assert_eq!(db.scan::<&[u8], _>(..).count(), 100);
}

/// One partition with small tables, so that sorted levels hold several.
fn small_tables(engine: Engine) -> Options {
    Options {
        partitions: 1,
        table_bytes_target: 4 << 10,
        level1_bytes_target: 16 << 10,
        ..tiny(engine)
    }
}

/// The model's entries in `(lo, hi)` in key order; none when the bounds cross (where
/// `BTreeMap::range` would panic).
fn model_range(model: &Model, lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let empty = match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
        _ => false,
    };
    if empty {
        return Vec::new();
    }
    model
        .range::<Vec<u8>, _>((lo.clone(), hi.clone()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A random bound over keys `k0000`..`k1999` (or none).
fn random_bound(rng: &mut SmallRng) -> Bound<Vec<u8>> {
    let key = format!("k{:04}", rng.gen_range(0..2_000)).into_bytes();
    match rng.gen_range(0..5) {
        0 => Bound::Unbounded,
        1 | 2 => Bound::Included(key),
        _ => Bound::Excluded(key),
    }
}

/// Descending routed scans (`Db::scan_routed_rev`, ZREVRANGE's read) against the model's
/// range read backwards: random bounds of either kind, whole ranges and their first few
/// entries only, through overwrites, deletes, flushes, compactions, values behind pointers
/// and a reopen, on both engines. A scan that runs while writes go on sees the store as it
/// was when it started.
#[test]
fn reverse_routed_scans_match_the_model_read_backwards() {
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let opts = small_tables(engine);
        let mut db = Db::open(dir.path(), opts.clone()).unwrap();
        let mut model = Model::new();
        let mut rng = SmallRng::seed_from_u64(41);
        // The most tables seen in one sorted level (the scan bisects those).
        let mut sorted_level_tables = 0;
        for round in 0..12_000u32 {
            let key = format!("k{:04}", rng.gen_range(0..2_000)).into_bytes();
            if rng.gen_bool(0.25) {
                db.delete(&key).unwrap();
                model.remove(&key);
            } else {
                // Some values large enough to live in value logs.
                let len = if rng.gen_bool(0.1) { 3_000 } else { 8 };
                let value = vec![(round % 251) as u8; len];
                db.put(&key, &value).unwrap();
                model.insert(key, value);
            }
            if round == 6_000 {
                db.close().unwrap();
                db = Db::open(dir.path(), opts.clone()).unwrap();
            }
            if round % 400 != 0 {
                continue;
            }
            if engine == Engine::Lsm {
                let levels = &db.stats().partitions[0].levels;
                sorted_level_tables = sorted_level_tables
                    .max(levels.iter().skip(1).map(|l| l.tables).max().unwrap_or(0));
            }
            for _ in 0..8 {
                let (lo, hi) = (random_bound(&mut rng), random_bound(&mut rng));
                let want: Vec<(Vec<u8>, Vec<u8>)> =
                    model_range(&model, &lo, &hi).into_iter().rev().collect();
                let take = if rng.gen_bool(0.5) { 10 } else { usize::MAX };
                let got: Vec<(Vec<u8>, Vec<u8>)> = db
                    .scan_routed_rev(b"k", (lo.clone(), hi.clone()))
                    .take(take)
                    .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
                    .collect::<Result<_, _>>()
                    .unwrap();
                let want: Vec<_> = want.into_iter().take(take).collect();
                assert_eq!(
                    got.len(),
                    want.len(),
                    "{engine:?} round {round} {lo:?}..{hi:?}"
                );
                assert!(
                    got == want,
                    "{engine:?} round {round} {lo:?}..{hi:?} differs"
                );
            }
            if engine == Engine::Lsm {
                // A scan begun before writes reads the store as it was.
                let before: Vec<(Vec<u8>, Vec<u8>)> = model
                    .iter()
                    .rev()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let mut scan = db.scan_routed_rev(b"k", ..b"l".to_vec());
                let first = scan.next().transpose().unwrap();
                for i in 0..300 {
                    let k = format!("k{:04}", rng.gen_range(0..2_000)).into_bytes();
                    if i % 3 == 0 {
                        db.delete(&k).unwrap();
                        model.remove(&k);
                    } else {
                        db.put(&k, b"later").unwrap();
                        model.insert(k, b"later".to_vec());
                    }
                }
                let got: Vec<(Vec<u8>, Vec<u8>)> = first
                    .into_iter()
                    .map(Ok)
                    .chain(scan)
                    .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
                    .collect::<Result<_, _>>()
                    .unwrap();
                assert!(
                    got == before,
                    "{engine:?} round {round}: the scan saw later writes"
                );
            }
        }
        let s = db.stats();
        if engine == Engine::Lsm {
            assert!(s.partitions.iter().map(|p| p.compactions).sum::<u64>() > 0);
            assert!(sorted_level_tables >= 2, "{sorted_level_tables} tables");
        }
        db.close().unwrap();
    }
}

/// Routed visits (`Db::visit_routed`, the server's collection reads) against the model: random
/// bounds over keys spread through every level, and the newest of a run of fresh keys (which
/// only the active memtable holds: read out of it as plain copies), visitors that stop early,
/// values behind pointers, flushes, compactions and a reopen, on both engines. Writes made
/// from inside the visitor are not seen: a visit reads the store as it was when it began.
#[test]
fn routed_visits_match_the_model() {
    for engine in ENGINES {
        let dir = tempfile::tempdir().unwrap();
        let opts = small_tables(engine);
        let mut db = Db::open(dir.path(), opts.clone()).unwrap();
        let mut model = Model::new();
        let mut rng = SmallRng::seed_from_u64(43);
        let mut fresh = 0u32;
        for round in 0..8_000u32 {
            let value_len = if rng.gen_bool(0.1) { 3_000 } else { 8 };
            let value = vec![(round % 251) as u8; value_len];
            if rng.gen_bool(0.5) {
                let key = format!("n{fresh:06}").into_bytes();
                fresh += 1;
                db.put(&key, &value).unwrap();
                model.insert(key, value);
            } else {
                let key = format!("k{:04}", rng.gen_range(0..2_000)).into_bytes();
                if rng.gen_bool(0.25) {
                    db.delete(&key).unwrap();
                    model.remove(&key);
                } else {
                    db.put(&key, &value).unwrap();
                    model.insert(key, value);
                }
            }
            if round == 4_000 {
                db.close().unwrap();
                db = Db::open(dir.path(), opts.clone()).unwrap();
            }
            if round % 200 != 0 {
                continue;
            }
            for i in 0..8 {
                let (lo, hi) = if i % 2 == 0 {
                    (random_bound(&mut rng), random_bound(&mut rng))
                } else {
                    let from = fresh.saturating_sub(rng.gen_range(1..40));
                    let to = from + rng.gen_range(0..50);
                    (
                        Bound::Included(format!("n{from:06}").into_bytes()),
                        Bound::Excluded(format!("n{to:06}").into_bytes()),
                    )
                };
                let want = model_range(&model, &lo, &hi);
                let stop = if rng.gen_bool(0.5) { 10 } else { usize::MAX };
                let mut got: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                // The visitor writes over and deletes keys of the range ahead of it (the
                // store only: the model keeps the state the visit began on).
                let mut later = Vec::new();
                db.visit_routed(b"k", (lo.clone(), hi.clone()), &mut |k, v| {
                    got.push((k.to_vec(), v.to_vec()));
                    later.push(k.to_vec());
                    got.len() < stop
                })
                .unwrap();
                let want: Vec<_> = want.into_iter().take(stop).collect();
                assert!(
                    got == want,
                    "{engine:?} round {round} {lo:?}..{hi:?}: {} entries, {} wanted",
                    got.len(),
                    want.len()
                );
                // And with writes made while the visit runs: the later keys of the range
                // changed from inside the visitor are seen as they were.
                if engine == Engine::Lsm && !want.is_empty() {
                    let mut seen = Vec::new();
                    let mut wrote = false;
                    db.visit_routed(b"k", (lo.clone(), hi.clone()), &mut |k, v| {
                        if !wrote {
                            wrote = true;
                            for (n, key) in later.iter().enumerate().skip(1) {
                                if n % 2 == 0 {
                                    db.delete(key).unwrap();
                                } else {
                                    db.put(key, b"later").unwrap();
                                }
                            }
                        }
                        seen.push((k.to_vec(), v.to_vec()));
                        true
                    })
                    .unwrap();
                    assert!(
                        seen.get(..want.len()) == Some(&want[..]),
                        "{engine:?} round {round}: the visit saw later writes"
                    );
                    // The model takes the writes the visitor made.
                    for (n, key) in later.iter().enumerate().skip(1) {
                        if n % 2 == 0 {
                            model.remove(key);
                        } else {
                            model.insert(key.clone(), b"later".to_vec());
                        }
                    }
                }
            }
        }
        if engine == Engine::Lsm {
            let s = db.stats();
            assert!(s.partitions.iter().map(|p| p.compactions).sum::<u64>() > 0);
        }
        db.close().unwrap();
    }
}
