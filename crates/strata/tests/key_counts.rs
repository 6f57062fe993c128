//! `Options::key_classes`: `Db::key_count` against a model (a `BTreeMap` of the keys that
//! exist) through every write shape (put, delete, batches across partitions with a key written
//! twice, read-modify-writes, transactions, value-log collection), flushes and compactions with
//! tiny options, both engines; known after `recount_keys` at reopen; unknown (never wrong)
//! after a bulk ingest or a compaction filter's tombstone, and exact again with a stub.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use strata::{CompactionFilter, Db, Engine, KeyClasses, Options, Update, WriteBatch};

/// Keys `a…` are class 0, `b…` class 1, anything else uncounted.
#[derive(Debug)]
struct ByFirstByte;

impl KeyClasses for ByFirstByte {
    fn classes(&self) -> usize {
        2
    }
    fn class_of(&self, key: &[u8]) -> Option<usize> {
        match key.first() {
            Some(b'a') => Some(0),
            Some(b'b') => Some(1),
            _ => None,
        }
    }
}

fn options(engine: Engine) -> Options {
    let mut o = Options::tiny();
    o.engine = engine;
    o.partitions = 3;
    o.key_classes = Some(Arc::new(ByFirstByte));
    o
}

fn model_count(model: &BTreeMap<Vec<u8>, Vec<u8>>, first: u8) -> u64 {
    model.keys().filter(|k| k.first() == Some(&first)).count() as u64
}

fn assert_counts(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) {
    assert_eq!(db.key_count(0), Some(model_count(model, b'a')), "{what}: a");
    assert_eq!(db.key_count(1), Some(model_count(model, b'b')), "{what}: b");
}

fn random_key(rng: &mut impl Rng) -> Vec<u8> {
    let first = [b'a', b'b', b'c'][rng.gen_range(0..3)];
    let mut k = vec![first];
    k.extend_from_slice(format!("{:03}", rng.gen_range(0..150)).as_bytes());
    k
}

fn random_value(rng: &mut impl Rng) -> Vec<u8> {
    // Some values large enough to be separated into value logs.
    let len = if rng.gen_bool(0.2) { 700 } else { 8 };
    vec![b'v'; len]
}

/// Toggles `k` in the model: removed if present, else `v`.
fn toggle(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, k: Vec<u8>, v: Vec<u8>) {
    if model.remove(&k).is_none() {
        model.insert(k, v);
    }
}

fn run_model(engine: Engine, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Db::open(dir.path(), options(engine)).unwrap();
    assert_eq!(db.key_count(0), None, "unknown until recounted");
    db.recount_keys().unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    assert_counts(&db, &model, "empty");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for step in 0..3000 {
        match rng.gen_range(0..100) {
            0..=39 => {
                let (k, v) = (random_key(&mut rng), random_value(&mut rng));
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            40..=59 => {
                let k = random_key(&mut rng);
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            60..=79 => {
                // A batch over several partitions that may write one key more than once.
                let mut batch = WriteBatch::new();
                let n = rng.gen_range(1..40);
                let mut keys: Vec<Vec<u8>> = Vec::new();
                for _ in 0..n {
                    let k = if !keys.is_empty() && rng.gen_bool(0.3) {
                        keys[rng.gen_range(0..keys.len())].clone()
                    } else {
                        let k = random_key(&mut rng);
                        keys.push(k.clone());
                        k
                    };
                    if rng.gen_bool(0.6) {
                        let v = random_value(&mut rng);
                        batch.put(&k, &v);
                        model.insert(k, v);
                    } else {
                        batch.delete(&k);
                        model.remove(&k);
                    }
                }
                db.write(batch).unwrap();
            }
            80..=83 => {
                // A group read-modify-write that reads its key twice and writes it twice:
                // toggled, then put (the counts take the read's existence, then the batch's).
                let k = random_key(&mut rng);
                let v = random_value(&mut rng);
                let put_again = rng.gen_bool(0.5);
                db.update_group(&k, |read| {
                    // Whether it exists, asked without its value (a value-log pointer is
                    // enough), then read.
                    let exists = read.contains(&k)?;
                    let first = read.get(&k)?;
                    assert_eq!(exists, first.is_some());
                    let mut batch = WriteBatch::new();
                    if first.is_some() {
                        batch.delete(&k);
                    } else {
                        batch.put(&k, &v);
                    }
                    if put_again {
                        batch.put(&k, &v);
                    }
                    Ok((batch, ()))
                })
                .unwrap();
                if put_again {
                    model.insert(k, v);
                } else {
                    toggle(&mut model, k, v);
                }
            }
            84..=85 => {
                // Two toggles of one key under one hold of its partition's lock: the second
                // decides on the first's result.
                let k = random_key(&mut rng);
                let v = random_value(&mut rng);
                db.hold_group(&k, |hold| {
                    for _ in 0..2 {
                        hold.update_group(&k, |read| {
                            let mut batch = WriteBatch::new();
                            if read.contains(&k)? {
                                batch.delete(&k);
                            } else {
                                batch.put(&k, &v);
                            }
                            Ok((batch, ()))
                        })
                        .unwrap();
                    }
                })
                .unwrap();
                // Toggled twice: present again (with `v`) if it was, else still absent.
                if let Some(old) = model.get_mut(&k) {
                    *old = v;
                }
            }
            86..=89 => {
                // Read-modify-write: delete when present, create when absent.
                let k = random_key(&mut rng);
                let v = random_value(&mut rng);
                db.update(&k, |old| {
                    Ok(match old {
                        Some(_) => (Update::Delete, ()),
                        None => (Update::Put(v.clone()), ()),
                    })
                })
                .unwrap();
                toggle(&mut model, k, v);
            }
            // Transactions need the LSM engine.
            90..=94 if engine == Engine::Lsm => {
                let mut t = db.transaction().unwrap();
                let (k1, k2) = (random_key(&mut rng), random_key(&mut rng));
                let v = random_value(&mut rng);
                t.put(&k1, &v).unwrap();
                t.delete(&k2).unwrap();
                t.commit().unwrap();
                model.insert(k1, v);
                model.remove(&k2);
            }
            90..=97 => db.flush().unwrap(),
            _ => db.compact().unwrap(),
        }
        if step % 97 == 0 {
            assert_counts(&db, &model, &format!("step {step}"));
        }
    }
    assert_counts(&db, &model, "end");
    // Reopen: unknown until recounted, then the same.
    drop(db);
    db = Db::open(dir.path(), options(engine)).unwrap();
    assert_eq!(db.key_count(1), None);
    db.recount_keys().unwrap();
    assert_counts(&db, &model, "reopened");
    // The model itself against the store: the counts are of what a scan sees.
    let scanned = db.scan::<&[u8], _>(..).map(|r| r.unwrap().0.to_vec());
    assert_eq!(
        scanned.collect::<Vec<_>>(),
        model.keys().cloned().collect::<Vec<_>>()
    );
}

#[test]
fn counts_follow_a_model_on_the_lsm_engine() {
    for seed in 0..3 {
        run_model(Engine::Lsm, seed);
    }
}

#[test]
fn counts_follow_a_model_on_the_log_engine() {
    for seed in 0..3 {
        run_model(Engine::Log, seed);
    }
}

#[test]
fn an_ingest_makes_the_counts_unknown_until_a_recount() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(Engine::Lsm)).unwrap();
    db.recount_keys().unwrap();
    db.put(b"a1", b"x").unwrap();
    assert_eq!(db.key_count(0), Some(1));
    db.ingest([
        (b"a2".to_vec(), b"y".to_vec()),
        (b"b1".to_vec(), b"z".to_vec()),
    ])
    .unwrap();
    assert_eq!(db.key_count(0), None);
    db.recount_keys().unwrap();
    assert_eq!((db.key_count(0), db.key_count(1)), (Some(2), Some(1)));
}

/// Declares dead every value starting with `dead`; with `stub`, leaves `dead` in its place.
#[derive(Debug)]
struct DeadValues {
    stub: bool,
}

impl CompactionFilter for DeadValues {
    fn is_dead(&self, _: &[u8], value: &[u8], _: &dyn strata::SettledRead) -> bool {
        value.starts_with(b"dead") && value.len() > 4
    }
    fn stub(&self, _: &[u8], _: &[u8]) -> Option<Vec<u8>> {
        self.stub.then(|| b"dead".to_vec())
    }
}

fn filtered(stub: bool, value_bytes: usize) -> (Option<u64>, Option<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(Engine::Lsm);
    o.compaction_filter = Some(Arc::new(DeadValues { stub }));
    let db = Db::open(dir.path(), o).unwrap();
    db.recount_keys().unwrap();
    let pad = "p".repeat(value_bytes);
    for i in 0..200 {
        let v = if i % 2 == 0 { "dead" } else { "live" };
        db.put(
            format!("a{i:04}").as_bytes(),
            format!("{v}{pad}").as_bytes(),
        )
        .unwrap();
    }
    // Overwrite so value logs become mostly dead and get collected too.
    for i in (1..200).step_by(2) {
        db.put(format!("a{i:04}").as_bytes(), b"live again")
            .unwrap();
    }
    db.compact().unwrap();
    (
        db.key_count(0),
        db.get(b"a0000").unwrap().map(|v| v.to_vec()),
    )
}

#[test]
fn a_compaction_filter_with_stubs_keeps_the_counts_exact() {
    for value_bytes in [10, 1000] {
        assert_eq!(
            filtered(true, value_bytes),
            (Some(200), Some(b"dead".to_vec())),
            "values of {value_bytes} bytes"
        );
    }
}

#[test]
fn a_compaction_filter_tombstone_on_a_counted_key_makes_the_counts_unknown() {
    // Table values: the compaction's tombstone removes keys unseen.
    assert_eq!(filtered(false, 10), (None, None));
}

/// A write that fails after the engine applied part of it (the log engine updates its index
/// before a segment roll, which fails here) leaves the counts unknown, never wrong: whatever
/// `key_count` says is what a scan finds.
#[test]
fn a_failed_write_leaves_the_counts_unknown_or_exact() {
    use strata::vfs::{FaultFs, FaultKind, IoKind};
    for (engine, kind) in [(Engine::Log, IoKind::Open), (Engine::Lsm, IoKind::Write)] {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new(dir.path()).unwrap();
        let mut o = options(engine);
        o.partitions = 1;
        o.sync = strata::SyncMode::Always;
        o.fs = Arc::new(fs.clone());
        let db = Db::open(dir.path().join("db"), o).unwrap();
        db.recount_keys().unwrap();
        fs.fail(kind, 0, FaultKind::Eio);
        let mut failed = false;
        for i in 0..600u32 {
            let value = format!("{i}").repeat(50);
            failed |= db
                .put(format!("a{i:04}").as_bytes(), value.as_bytes())
                .is_err();
        }
        assert!(failed, "{engine:?}: the injected failure never happened");
        let scanned = db
            .scan::<&[u8], _>(..)
            .filter(|r| r.as_ref().is_ok_and(|(k, _)| k.starts_with(b"a")))
            .count() as u64;
        if let Some(n) = db.key_count(0) {
            assert_eq!(n, scanned, "{engine:?}: a known count must be exact");
        }
    }
}

/// Writers on one small key space at once, with memtables flushed all the time and readers
/// of the counts beside them (pending keys looked up by readers while flushes settle them);
/// between rounds of writes, while a flush settles what the writers left pending, every read
/// of the count equals a scan, and at the end too, on both engines.
#[test]
fn counts_are_exact_after_concurrent_writers_flushes_and_readers() {
    for engine in [Engine::Lsm, Engine::Log] {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Db::open(dir.path(), options(engine)).unwrap());
        db.recount_keys().unwrap();
        let scanned = |db: &Db, first: u8| {
            db.scan::<&[u8], _>(..)
                .filter(|r| r.as_ref().is_ok_and(|(k, _)| k.first() == Some(&first)))
                .count() as u64
        };
        for round in 0..3u64 {
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let reader = {
                let (db, stop) = (db.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        assert!(db.key_count(0).is_some(), "the counts stay known");
                    }
                })
            };
            let writers: Vec<_> = (0..4u64)
                .map(|w| {
                    let db = db.clone();
                    std::thread::spawn(move || {
                        let mut rng = rand::rngs::StdRng::seed_from_u64(round * 10 + w);
                        for _ in 0..1000 {
                            let k = random_key(&mut rng);
                            if rng.gen_bool(0.6) {
                                db.put(&k, &random_value(&mut rng)).unwrap();
                            } else {
                                db.delete(&k).unwrap();
                            }
                        }
                    })
                })
                .collect();
            for w in writers {
                w.join().unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            reader.join().unwrap();
            // No writes now: the scan is the truth while a flush settles pending keys.
            let (a, b) = (scanned(&db, b'a'), scanned(&db, b'b'));
            let flusher = {
                let db = db.clone();
                std::thread::spawn(move || db.flush().unwrap())
            };
            for _ in 0..200 {
                assert_eq!(
                    db.key_count(0),
                    Some(a),
                    "{engine:?} round {round}, flushing"
                );
                assert_eq!(
                    db.key_count(1),
                    Some(b),
                    "{engine:?} round {round}, flushing"
                );
            }
            flusher.join().unwrap();
            assert_eq!(
                db.key_count(0),
                Some(a),
                "{engine:?} round {round}, flushed"
            );
        }
    }
}
