//! Values a memtable leaves in its own log: a memtable keeps a pointer into its log for values of
//! at least the separation threshold and reads them back from the file or from the log
//! writer's buffer (`LogTail`). These reads must keep working after a failed write, under
//! concurrent writers, after the log is deleted or collected under a snapshot, and after a
//! torn log is replayed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use strata::vfs::{FaultFs, FaultKind, IoKind};
use strata::{deferring_log_writes, Db, Options, SyncMode};

mod common;
use common::files_with_suffix;

fn scan_all(db: &Db) -> strata::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    db.scan::<&[u8], _>(..)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect()
}

/// A failed hand-off of the log's buffer to the OS (ENOSPC, EIO) leaves the records it held
/// in the buffer: the memtable already points at them. (The first form of memtable pointers
/// cleared the buffer anyway, so every later read of such a key, every scan over it and every
/// checkpoint, the way to copy data off a full disk, failed until a restart.) A read of the
/// key may give the old or the new value (the write's outcome is uncertain), not an error, as
/// RELIABILITY.md promises after injected ENOSPC/EIO.
#[test]
fn a_failed_log_write_leaves_the_keys_it_wrote_readable() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(dir.path()).unwrap();
    let db = Db::open(
        dir.path().join("db"),
        Options {
            partitions: 1,
            // Every write is handed to the OS before it returns (no syncer thread).
            sync: SyncMode::Never,
            value_log_bytes_min: Some(64),
            fs: Arc::new(fs.clone()),
            ..Options::default()
        },
    )
    .unwrap();
    let old = vec![b'o'; 1000];
    let new = vec![b'n'; 1000];
    db.put(b"a", &old).unwrap();
    db.put(b"b", &old).unwrap();
    // The next append to any file fails: the hand-off of the record of the put below.
    fs.fail(IoKind::Write, 1, FaultKind::Enospc);
    let e = db.put(b"b", &new).unwrap_err();
    assert!(e.to_string().contains("os error 28"), "{e}");
    // The key of the failed write: its old or its new value, not an error; a scan over the
    // whole store and a checkpoint (the way to get the data off the full disk) keep working.
    let mut failures = Vec::new();
    match db.get(b"b") {
        Ok(Some(v)) if v[..] == old[..] || v[..] == new[..] => {}
        other => failures.push(format!(
            "get of the key whose write failed: {:?}",
            other.map(|v| v.map(|v| v.len()))
        )),
    }
    if let Err(e) = scan_all(&db) {
        failures.push(format!("scan: {e}"));
    }
    if let Err(e) = db.checkpoint(dir.path().join("copy")) {
        failures.push(format!("checkpoint: {e}"));
    }
    // The other key, written before, still reads.
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&old[..]));
    assert!(
        failures.is_empty(),
        "reads after a failed log write: {failures:#?}"
    );
}

/// A snapshot holds an immutable memtable whose pointers go into a log that its flush deleted
/// (every large value in it was shadowed inside the memtable, so the flush kept no value log):
/// the memtable's open handle keeps the unlinked file readable.
#[test]
fn a_snapshot_reads_a_memtable_pointer_into_a_log_its_flush_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            partitions: 1,
            sync: SyncMode::Never,
            value_log_bytes_min: Some(64),
            ..Options::default()
        },
    )
    .unwrap();
    let big = vec![b'B'; 2000];
    db.put(b"k", &big).unwrap();
    let snap = db.snapshot().unwrap();
    db.put(b"k", b"small").unwrap();
    let logs_before = files_with_suffix(dir.path(), ".log");
    db.flush().unwrap();
    db.compact().unwrap();
    let logs_after = files_with_suffix(dir.path(), ".log");
    assert!(
        logs_before.iter().any(|l| !logs_after.contains(l)),
        "the flushed log was deleted: {logs_before:?} -> {logs_after:?}"
    );
    assert_eq!(snap.get(b"k").unwrap().as_deref(), Some(&big[..]));
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"small"[..]));
    let scanned: Vec<_> = snap
        .scan::<&[u8], _>(..)
        .map(|r| r.map(|(_, v)| v.len()))
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(scanned, vec![2000]);
}

/// A snapshot taken while values sat in a memtable keeps reading them after that log became a
/// value log, every value in it was overwritten and compactions and value-log collection
/// removed the log from the manifest and the disk.
#[test]
fn a_snapshot_reads_memtable_pointers_after_their_value_log_is_collected() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            partitions: 1,
            sync: SyncMode::Never,
            ..Options::tiny()
        },
    )
    .unwrap();
    let value = |k: u32, round: u32| {
        let mut v = format!("key{k:04}/round{round}/").into_bytes();
        v.resize(300, b'x');
        v
    };
    for k in 0..40 {
        db.put(format!("key{k:04}").as_bytes(), &value(k, 0))
            .unwrap();
    }
    let snap = db.snapshot().unwrap();
    let logs_at_snapshot = files_with_suffix(dir.path(), ".log");
    for round in 1..6 {
        for k in 0..40 {
            db.put(format!("key{k:04}").as_bytes(), &value(k, round))
                .unwrap();
        }
        db.flush().unwrap();
        db.compact().unwrap();
    }
    let logs_now = files_with_suffix(dir.path(), ".log");
    let gone: Vec<_> = logs_at_snapshot
        .iter()
        .filter(|l| !logs_now.contains(l))
        .collect();
    assert!(
        !gone.is_empty(),
        "no log of the snapshot's memtables was deleted: {logs_now:?}"
    );
    for k in 0..40 {
        assert_eq!(
            snap.get(format!("key{k:04}").as_bytes())
                .unwrap()
                .as_deref(),
            Some(&value(k, 0)[..]),
            "key{k:04}"
        );
    }
}

/// Readers on other threads read large values while a writer appends them (deferred and not,
/// so that records sit in the log's buffer), the memtable switches at its log size and flushes
/// and compactions run. Every value read must be a whole, valid value of its key; no read may
/// fail.
#[test]
fn concurrent_reads_of_values_in_the_log_tail_never_fail() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        Db::open(
            dir.path(),
            Options {
                partitions: 2,
                sync: SyncMode::EveryMs(1),
                memtable_log_bytes_max: 16 << 10,
                ..Options::tiny()
            },
        )
        .unwrap(),
    );
    const KEYS: u64 = 64;
    let value = |k: u64, round: u64| {
        let mut v = format!("key{k:04}/round{round:08}/").into_bytes();
        let len = 150 + ((k * 31 + round * 7) % 700) as usize;
        while v.len() < len {
            v.push(b'a' + (v.len() % 26) as u8);
        }
        v
    };
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for r in 0..2u64 {
        let (db, stop, reads) = (db.clone(), stop.clone(), reads.clone());
        readers.push(std::thread::spawn(move || {
            let mut i = r;
            while !stop.load(Ordering::Relaxed) {
                i = i
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let k = (i >> 33) % KEYS;
                let key = format!("key{k:04}");
                match db.get(key.as_bytes()) {
                    Ok(None) => {}
                    Ok(Some(v)) => {
                        let prefix = format!("{key}/round");
                        assert!(v.starts_with(prefix.as_bytes()), "{key}: wrong value");
                        let round: u64 = std::str::from_utf8(&v[prefix.len()..prefix.len() + 8])
                            .unwrap()
                            .parse()
                            .unwrap();
                        assert_eq!(v[..], value(k, round)[..], "{key}: torn value");
                    }
                    Err(e) => panic!("read of {key} failed: {e}"),
                }
                if k == 0 {
                    for item in db.scan_prefix(b"key000") {
                        let (key, v) = item.unwrap_or_else(|e| panic!("scan failed: {e}"));
                        assert!(v.starts_with(&key), "scan: wrong value");
                    }
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for round in 0..60u64 {
        if round % 2 == 0 {
            let ((), mut w) = deferring_log_writes(|| {
                for k in 0..KEYS {
                    db.put(format!("key{k:04}").as_bytes(), &value(k, round))
                        .unwrap();
                }
            });
            w.complete().unwrap();
        } else {
            for k in 0..KEYS {
                db.put(format!("key{k:04}").as_bytes(), &value(k, round))
                    .unwrap();
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert!(reads.load(Ordering::Relaxed) > 0);
    for k in 0..KEYS {
        assert_eq!(
            db.get(format!("key{k:04}").as_bytes()).unwrap().as_deref(),
            Some(&value(k, 59)[..])
        );
    }
}

/// A power cut that tears the newest log: the reopened store's replayed memtables point only
/// into what the cut kept. Every key reads a whole value of its own, before and after the
/// replayed memtables are flushed (their logs becoming value logs) and compacted, and after
/// another reopen.
#[test]
fn replayed_memtables_after_a_torn_tail_point_only_into_what_was_kept() {
    for seed in 1..6u64 {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultFs::new(dir.path()).unwrap();
        let opts = Options {
            partitions: 1,
            sync: SyncMode::Never,
            memtable_log_bytes_max: 32 << 10,
            fs: Arc::new(fs.clone()),
            ..Options::tiny()
        };
        let value = |k: u32, round: u32| {
            let mut v = format!("key{k:03}/{round:04}/").into_bytes();
            v.resize(200 + (k as usize * 13 % 300), b'v');
            v
        };
        {
            let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
            for round in 0..8u32 {
                for k in 0..30u32 {
                    db.put(format!("key{k:03}").as_bytes(), &value(k, round))
                        .unwrap();
                }
                if round == 3 {
                    db.sync().unwrap();
                }
            }
            // The power goes out now: closing syncs nothing more.
            fs.crash_at(1);
            drop(db);
            fs.tear_writes(seed);
            fs.power_cut().unwrap();
        }
        let check = |db: &Db, what: &str| {
            for k in 0..30u32 {
                let key = format!("key{k:03}");
                let got = db
                    .get(key.as_bytes())
                    .unwrap_or_else(|e| panic!("seed {seed} {what}: {key}: {e}"));
                if let Some(v) = got {
                    let round: u32 = std::str::from_utf8(&v[7..11]).unwrap().parse().unwrap();
                    assert_eq!(v[..], value(k, round)[..], "seed {seed} {what}: {key}");
                }
            }
            scan_all(db).unwrap_or_else(|e| panic!("seed {seed} {what}: scan: {e}"));
        };
        let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
        check(&db, "reopened");
        db.flush().unwrap();
        check(&db, "flushed");
        db.compact().unwrap();
        check(&db, "compacted");
        db.close().unwrap();
        let db = Db::open(dir.path().join("db"), opts.clone()).unwrap();
        check(&db, "reopened again");
    }
}
