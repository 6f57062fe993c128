//! `Options::compaction_filter`: values the filter declares dead disappear through compaction
//! (table values) and value-log collection (separated values) without any write from the user,
//! older versions below them stay hidden, and everything else is untouched. The model: a
//! `BTreeMap` of what each key should read.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use strata::{CompactionFilter, Db, Options};

mod common;

/// Declares dead every value starting with `dead:`.
#[derive(Debug)]
struct DeadPrefix;

impl CompactionFilter for DeadPrefix {
    fn is_dead(&self, _key: &[u8], value: &[u8], _: &dyn strata::SettledRead) -> bool {
        value.starts_with(b"dead:")
    }
}

fn options(filter: bool) -> Options {
    let mut o = Options::tiny();
    o.partitions = 2;
    if filter {
        o.compaction_filter = Some(Arc::new(DeadPrefix));
    }
    o
}

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, keys: usize) {
    for i in 0..keys {
        let k = format!("key{i:05}").into_bytes();
        let got = db
            .get(&k)
            .unwrap()
            .map(|v| String::from_utf8_lossy(&v).into_owned());
        let want = model
            .get(&k)
            .map(|v| String::from_utf8_lossy(v).into_owned());
        assert_eq!(
            got.map(|g| g[..g.len().min(24)].to_string()),
            want.map(|w| w[..w.len().min(24)].to_string()),
            "key{i:05}"
        );
    }
}

/// Runs the scenario with values of `value_bytes` (small: kept in tables; large: in value
/// logs) and returns what each key reads after a full compaction.
fn scenario(filter: bool, value_bytes: usize) -> (Db, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(filter)).unwrap();
    let pad = "p".repeat(value_bytes);
    // Old versions, flushed below.
    for i in 0..600 {
        db.put(
            format!("key{i:05}").as_bytes(),
            format!("old:{i}:{pad}").as_bytes(),
        )
        .unwrap();
    }
    db.flush().unwrap();
    // Newer versions: every third dead, every third live, the rest untouched.
    for i in 0..600 {
        let v = match i % 3 {
            0 => format!("dead:{i}:{pad}"),
            1 => format!("live:{i}:{pad}"),
            _ => continue,
        };
        db.put(format!("key{i:05}").as_bytes(), v.as_bytes())
            .unwrap();
    }
    db.flush().unwrap();
    // The live keys rewritten, so the value logs of the second round are half dead and get
    // collected by the full compaction below.
    for i in (1..600).step_by(3) {
        db.put(
            format!("key{i:05}").as_bytes(),
            format!("live:{i}:again:{pad}").as_bytes(),
        )
        .unwrap();
    }
    db.compact().unwrap();
    (db, dir)
}

fn model(value_bytes: usize, filter: bool) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let pad = "p".repeat(value_bytes);
    let mut m = BTreeMap::new();
    for i in 0..600 {
        let k = format!("key{i:05}").into_bytes();
        let v = match i % 3 {
            0 if filter => continue,
            0 => format!("dead:{i}:{pad}"),
            1 => format!("live:{i}:again:{pad}"),
            _ => format!("old:{i}:{pad}"),
        };
        m.insert(k, v.into_bytes());
    }
    m
}

#[test]
fn dead_table_values_go_at_compaction_and_hide_older_versions() {
    let (db, _dir) = scenario(true, 10);
    check(&db, &model(10, true), 600);
    // Without the filter everything stays (the filter, not something else, removed them).
    let (plain, _d2) = scenario(false, 10);
    check(&plain, &model(10, false), 600);
    // And their bytes left the tables: about a third fewer entries' worth.
    let (with, without) = (db.stats().disk_bytes(), plain.stats().disk_bytes());
    assert!(
        with < without,
        "{with} bytes on disk with the filter, {without} without"
    );
}

/// Separated values (in value logs) are filtered when their log is collected or a compaction
/// moves its values, which happens when enough of it is dead for other reasons. Each dead value is written in one batch with a
/// value of a junk key that is overwritten later, so every log holding a dead value is at least
/// half dead and the full compaction collects it whatever the rotation points (one partition:
/// a batch is one record in one log).
#[test]
fn dead_values_in_value_logs_go_when_the_log_is_collected() {
    let run = |filter: bool| {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = options(filter);
        opts.partitions = 1;
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        let pad = "p".repeat(1000);
        let mut model = BTreeMap::new();
        for i in 0..300 {
            let k = format!("key{i:05}").into_bytes();
            let v = if i % 2 == 0 {
                format!("dead:{i}:{pad}")
            } else {
                format!("live:{i}:{pad}")
            };
            let mut batch = strata::WriteBatch::new();
            batch.put(k.clone(), v.clone().into_bytes());
            batch.put(format!("junk{i:05}").into_bytes(), pad.clone().into_bytes());
            db.write(batch).unwrap();
            if !(filter && i % 2 == 0) {
                model.insert(k, v.into_bytes());
            }
        }
        for i in 0..300 {
            db.put(format!("junk{i:05}").as_bytes(), b"small").unwrap();
        }
        db.compact().unwrap();
        check(&db, &model, 300);
        if filter {
            // Collected in the background, or emptied by compactions moving its values
            // (which apply the filter to the values they read).
            assert!(
                db.stats()
                    .partitions
                    .iter()
                    .any(|p| p.value_log_gcs > 0 || p.moved_value_files > 0),
                "no value log was collected or moved"
            );
        }
        drop(db);
        // Reopened, the same.
        let db = Db::open(dir.path(), opts).unwrap();
        check(&db, &model, 300);
    };
    run(true);
    // Without the filter the dead values stay (the filter, not something else, removed them).
    run(false);
}

/// A full compaction reads every separated value it keeps for the filter; one that fails its
/// checksum there is left where it is (its reads report the damage) and the compaction goes
/// on: the other values are judged, the dead ones go, the live ones read as written.
#[test]
fn a_full_compaction_leaves_a_damaged_separated_value_and_judges_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(true);
    o.partitions = 1;
    o.sync = strata::SyncMode::Never;
    let value = |i: usize| {
        let head = if i % 2 == 0 { "dead" } else { "live" };
        format!("{head}:{i:05}:").repeat(12).into_bytes()
    };
    let db = Db::open(dir.path(), o.clone()).unwrap();
    for i in 0..200 {
        db.put(format!("key{i:05}").as_bytes(), &value(i)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    // A byte in the middle of key 7's value, in the log the tables point into.
    let marker = value(7);
    let mut flipped = 0;
    for log in common::files_with_suffix(dir.path(), ".log") {
        let mut bytes = std::fs::read(&log).unwrap();
        if let Some(at) = bytes.windows(marker.len()).position(|w| w == &marker[..]) {
            bytes[at + marker.len() / 2] ^= 0x40;
            std::fs::write(&log, bytes).unwrap();
            flipped += 1;
        }
    }
    assert_eq!(flipped, 1, "key 7's value found in {flipped} logs");

    let db = Db::open(dir.path(), o).unwrap();
    db.compact().unwrap();
    for i in 0..200 {
        let k = format!("key{i:05}");
        match db.get(k.as_bytes()) {
            Err(e) if i == 7 => assert!(e.is_corruption(), "{k}: {e}"),
            got if i == 7 => panic!("{k}: damage unnoticed: {got:?}"),
            got if i % 2 == 0 => assert_eq!(got.unwrap(), None, "{k}"),
            got => assert_eq!(got.unwrap().as_deref(), Some(&value(i)[..]), "{k}"),
        }
    }
}
