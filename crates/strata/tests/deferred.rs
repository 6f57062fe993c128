//! `deferring_log_writes`: inside it a write under a buffered sync mode is applied (readable) but
//! its record stays in the process until `LogWrites::complete`; nested deferrals hand their
//! writes to the outermost one; `Always` is never deferred. The file length on disk is the
//! independent witness of what was handed to the OS. (That completed writes survive SIGKILL is
//! `crash.rs`'s `deferred` rounds.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use strata::{deferring_log_writes, Db, Options, SyncMode};

fn open(dir: &Path, sync: SyncMode) -> Db {
    Db::open(
        dir,
        Options {
            partitions: 1,
            sync,
            ..Options::default()
        },
    )
    .unwrap()
}

/// Bytes in the partition's log files, as the OS has them.
fn log_bytes(dir: &Path) -> u64 {
    partition_log_bytes(dir, 0)
}

#[test]
fn deferred_writes_reach_the_os_only_when_completed() {
    let dir = tempfile::tempdir().unwrap();
    // An fsync period longer than the test: the syncer thread never writes the buffer meanwhile.
    let db = open(dir.path(), SyncMode::EveryMs(600_000));
    let before = log_bytes(dir.path());
    let ((), mut writes) = deferring_log_writes(|| {
        db.put(b"a", b"1").unwrap();
        db.put(b"b", b"2").unwrap();
    });
    assert!(!writes.is_empty());
    assert_eq!(log_bytes(dir.path()), before, "nothing handed over yet");
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]), "applied");
    writes.complete().unwrap();
    let after = log_bytes(dir.path());
    // Two 8-byte record headers plus the keys and values.
    assert!(
        after >= before + 2 * 8 + 4,
        "both records written: {before} -> {after}"
    );
    assert!(writes.is_empty());

    // Outside a deferral each write is handed over before it returns.
    db.put(b"c", b"3").unwrap();
    assert!(log_bytes(dir.path()) > after);
}

#[test]
fn nested_deferrals_hand_their_writes_to_the_outermost() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), SyncMode::Never);
    let before = log_bytes(dir.path());
    let (inner, mut outer) = deferring_log_writes(|| {
        let ((), inner) = deferring_log_writes(|| db.put(b"k", b"v").unwrap());
        inner
    });
    assert!(inner.is_empty(), "the outer deferral owns the write");
    assert!(!outer.is_empty());
    assert_eq!(log_bytes(dir.path()), before);
    outer.complete().unwrap();
    assert!(log_bytes(dir.path()) > before);
}

#[test]
fn writes_under_always_are_not_deferred() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), SyncMode::Always);
    let before = log_bytes(dir.path());
    let ((), writes) = deferring_log_writes(|| db.put(b"k", b"v").unwrap());
    assert!(writes.is_empty());
    assert!(
        log_bytes(dir.path()) > before,
        "fsynced before put returned"
    );
}

/// A memtable keeps a pointer, not a copy, for a value of at least the separation threshold
/// (`memtable.rs`): while its record is still in the journal's buffer (deferred, not handed to
/// the OS: the file length says so), every kind of read finds it there: a plain read, a
/// snapshot, a scan, a scan and a read-modify-write under the partition's lock, and a
/// transaction's validation under the locks of its parts (none of which may take a lock the
/// reader holds). Afterwards the same reads come from the file.
#[test]
fn values_left_in_the_log_are_read_from_its_buffer_before_they_reach_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            partitions: 1,
            sync: SyncMode::EveryMs(600_000),
            value_log_bytes_min: Some(64),
            ..Options::default()
        },
    )
    .unwrap();
    let big = |i: u8| vec![i; 1000];
    let before = log_bytes(dir.path());
    let ((), mut writes) = deferring_log_writes(|| {
        db.put(b"a", &big(1)).unwrap();
        db.put(b"b", &big(2)).unwrap();
        assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&big(1)[..]));
        let snap = db.snapshot().unwrap();
        assert_eq!(snap.get(b"b").unwrap().as_deref(), Some(&big(2)[..]));
        let scanned: Vec<(Vec<u8>, Vec<u8>)> = db
            .scan::<&[u8], _>(..)
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            scanned,
            vec![(b"a".to_vec(), big(1)), (b"b".to_vec(), big(2))]
        );
        // A scan made while the partition's lock is held (a group update; the server's list
        // commands read their elements so): it must not wait for that lock.
        let n = db
            .update_group(b"a", |read| {
                assert_eq!(read.get(b"b")?.as_deref(), Some(&big(2)[..]));
                let n = db.scan::<&[u8], _>(..).filter(|r| r.is_ok()).count();
                Ok((strata::WriteBatch::new(), n))
            })
            .unwrap();
        assert_eq!(n, 2);
        // Read under the partition's write lock, then written back longer.
        db.update(b"a", |v| {
            let mut v = v.unwrap().to_vec();
            v.push(9);
            Ok((strata::Update::Put(v), ()))
        })
        .unwrap();
        let mut t = db.transaction().unwrap();
        let a = t.get(b"a").unwrap().unwrap();
        assert_eq!(a.len(), 1001);
        t.put(b"c", &a).unwrap();
        t.commit().unwrap();
        assert_eq!(db.get(b"c").unwrap().as_deref(), Some(&a[..]));
    });
    assert_eq!(
        log_bytes(dir.path()),
        before,
        "every read above came from the buffer"
    );
    writes.complete().unwrap();
    assert!(log_bytes(dir.path()) > before + 3000);
    let mut expected_a = big(1);
    expected_a.push(9);
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&expected_a[..]));
    assert_eq!(db.get(b"c").unwrap().as_deref(), Some(&expected_a[..]));
    assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&big(2)[..]));
    // And after a restart, from the replayed log; after a flush, from the value log.
    db.close().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            partitions: 1,
            value_log_bytes_min: Some(64),
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&expected_a[..]));
    db.flush().unwrap();
    assert_eq!(db.get(b"c").unwrap().as_deref(), Some(&expected_a[..]));
    assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&big(2)[..]));
}

/// Bytes in partition `p`'s log files, as the OS has them.
fn partition_log_bytes(dir: &Path, p: usize) -> u64 {
    std::fs::read_dir(dir.join(format!("p{p:04}")).join("wal"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

/// A write is acknowledged only once every earlier write of every partition has reached the
/// OS too (`journal::reach`): a write of one partition left deferred by one caller is handed to
/// the OS by a later write of another partition before that one returns. Otherwise a killed
/// process could keep the later write and lose the earlier one, and recovery's cut at the
/// first lost write would drop an acknowledged one.
#[test]
fn a_write_returns_only_once_earlier_writes_of_other_partitions_reached_the_os() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            partitions: 2,
            sync: SyncMode::EveryMs(600_000),
            ..Options::default()
        },
    )
    .unwrap();
    let first = b"first".to_vec();
    let second = (0..)
        .map(|i| format!("second{i}").into_bytes())
        .find(|k| db.partition_of(k) != db.partition_of(&first))
        .unwrap();
    let p = db.partition_of(&first);
    let before = partition_log_bytes(dir.path(), p);
    let ((), writes) = deferring_log_writes(|| db.put(&first, b"1").unwrap());
    assert!(!writes.is_empty());
    assert_eq!(
        partition_log_bytes(dir.path(), p),
        before,
        "deferred, not written"
    );
    // Another caller's write, not deferred, of the other partition.
    db.put(&second, b"2").unwrap();
    assert!(
        partition_log_bytes(dir.path(), p) > before,
        "the later write returned while the earlier one was still in the process"
    );
    drop(writes);
}
