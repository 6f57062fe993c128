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
    std::fs::read_dir(dir.join("p0000").join("wal"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
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
