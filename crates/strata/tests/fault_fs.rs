//! The fault-injecting file system against what a power cut does to a real one: only fsynced
//! bytes survive, only directory-fsynced creates, renames and unlinks survive, a crash point
//! stops every later change, injected errors fire once on the call they name.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use strata::vfs::{FaultFs, FaultKind, FileSystem, IoKind};

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

#[test]
fn only_fsynced_bytes_and_directory_fsynced_entries_survive_a_power_cut() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(dir.path()).unwrap();
    let d = dir.path();
    // Durable file and entry.
    let a = fs.create_new(&d.join("a")).unwrap();
    a.append(b"synced").unwrap();
    a.sync_data().unwrap();
    fs.sync_dir(d).unwrap();
    a.append(b" and not").unwrap();
    // A file whose entry was never made durable.
    let b = fs.create_new(&d.join("b")).unwrap();
    b.append(b"lost").unwrap();
    b.sync_all().unwrap();
    assert_eq!(read(&d.join("a")), b"synced and not");
    fs.power_cut().unwrap();
    assert_eq!(read(&d.join("a")), b"synced");
    assert!(
        !d.join("b").exists(),
        "create without a directory fsync survived"
    );
}

#[test]
fn renames_and_unlinks_without_a_directory_fsync_are_undone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("old"), b"old contents").unwrap();
    std::fs::write(d.join("gone"), b"still here").unwrap();
    let fs = FaultFs::new(d).unwrap();
    let tmp = fs.create(&d.join("new.tmp")).unwrap();
    tmp.append(b"new contents").unwrap();
    tmp.sync_all().unwrap();
    fs.rename(&d.join("new.tmp"), &d.join("old")).unwrap();
    fs.remove_file(&d.join("gone")).unwrap();
    assert_eq!(read(&d.join("old")), b"new contents");
    fs.power_cut().unwrap();
    assert_eq!(read(&d.join("old")), b"old contents", "rename survived");
    assert_eq!(read(&d.join("gone")), b"still here", "unlink survived");
    assert!(!d.join("new.tmp").exists());

    // The same steps with the directory fsynced are durable.
    let tmp = fs.create(&d.join("new.tmp")).unwrap();
    tmp.append(b"new contents").unwrap();
    tmp.sync_all().unwrap();
    fs.rename(&d.join("new.tmp"), &d.join("old")).unwrap();
    fs.remove_file(&d.join("gone")).unwrap();
    fs.sync_dir(d).unwrap();
    fs.power_cut().unwrap();
    assert_eq!(read(&d.join("old")), b"new contents");
    assert!(!d.join("gone").exists());
}

#[test]
fn a_crash_point_fails_that_call_and_every_later_change() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fs = FaultFs::new(d).unwrap();
    let f = fs.create_new(&d.join("f")).unwrap(); // call 1
    fs.sync_dir(d).unwrap(); // call 2
    fs.crash_at(2);
    f.append(b"one").unwrap(); // call 1 after crash_at
    f.sync_data().unwrap_err(); // call 2: the power goes
    assert!(fs.crashed());
    f.append(b"two").unwrap_err();
    fs.create_new(&d.join("g")).unwrap_err();
    fs.power_cut().unwrap();
    assert_eq!(read(&d.join("f")), b"", "an unsynced append survived");
    // After the cut, calls work again.
    let f = fs.open(&d.join("f")).unwrap();
    f.append(b"three").unwrap();
    f.sync_data().unwrap();
    fs.power_cut().unwrap();
    assert_eq!(read(&d.join("f")), b"three");
}

#[test]
fn injected_errors_fire_once_on_the_named_call() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fs = FaultFs::new(d).unwrap();
    let f = fs.create_new(&d.join("f")).unwrap();
    fs.fail(IoKind::Write, 2, FaultKind::Enospc);
    f.append(b"a").unwrap();
    let e = f.append(b"b").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(28), "{e}");
    f.append(b"c").unwrap();
    fs.fail(IoKind::Sync, 1, FaultKind::Eio);
    f.sync_data().unwrap_err();
    f.sync_data().unwrap();
    fs.fail(IoKind::Read, 1, FaultKind::FlipBit);
    let mut buf = [0u8; 2];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, &[b'a' ^ 0x10, b'c']);
    f.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"ac");
}

#[test]
fn torn_writes_keep_a_prefix_of_whole_sectors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fs = FaultFs::new(d).unwrap();
    let f = fs.create_new(&d.join("f")).unwrap();
    fs.sync_dir(d).unwrap();
    f.append(&[1u8; 100]).unwrap();
    f.sync_data().unwrap();
    let unsynced: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
    f.append(&unsynced).unwrap();
    let mut kept = std::collections::BTreeSet::new();
    for seed in 0..20 {
        fs.tear_writes(seed);
        let bytes_before = read(&d.join("f"));
        fs.power_cut().unwrap();
        let after = read(&d.join("f"));
        assert!(
            after.len() >= 100 && (after.len() - 100) % 512 == 0,
            "{}",
            after.len()
        );
        assert_eq!(&after[..], &bytes_before[..after.len()]);
        kept.insert(after.len());
        // Put the unsynced tail back for the next round.
        let f = fs.open(&d.join("f")).unwrap();
        f.set_len(100).unwrap();
        f.sync_data().unwrap();
        f.append(&unsynced).unwrap();
    }
    assert!(
        kept.len() > 1,
        "every torn write kept the same prefix: {kept:?}"
    );
}

/// Log engine: a merge whose removal of an input segment fails leaves that segment on disk; a
/// later merge must still take it, or after a restart its old records come back to life (here:
/// a deleted key with its old value).
#[test]
fn a_merge_input_left_by_a_failed_removal_cannot_bring_a_deleted_key_back() {
    use strata::{Db, Engine, Options, SyncMode};
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(dir.path()).unwrap();
    let opts = Options {
        engine: Engine::Log,
        partitions: 1,
        sync: SyncMode::Always,
        fs: std::sync::Arc::new(fs.clone()),
        ..Options::tiny()
    };
    let path = dir.path().join("db");
    let db = Db::open(&path, opts.clone()).unwrap();
    let filler = |db: &Db, tag: &str| {
        for i in 0..400 {
            db.put(format!("fill{tag}{i:04}").as_bytes(), &[b'x'; 200])
                .unwrap();
        }
    };
    db.put(b"victim", b"old value").unwrap();
    filler(&db, "a");
    fs.fail(IoKind::Remove, 0, FaultKind::Eio);
    // The merge copies the victim into an output, then fails to remove an input.
    assert!(
        db.compact().is_err(),
        "the injected removal failure was not reported"
    );
    db.delete(b"victim").unwrap();
    filler(&db, "b");
    db.compact().unwrap();
    assert_eq!(db.get(b"victim").unwrap(), None);
    db.close().unwrap();
    let db = Db::open(&path, opts).unwrap();
    assert_eq!(
        db.get(b"victim").unwrap(),
        None,
        "a deleted key came back after a restart"
    );
}

/// Log engine: when the new segment cannot be opened after the roll switched the log to it,
/// nothing written afterwards may be acknowledged under the old segment's id (reads of those
/// keys then hit the sealed file: damage, or an older record of the key). Every write the
/// engine acknowledges reads back.
#[test]
fn a_failed_segment_roll_acknowledges_no_write_it_cannot_read_back() {
    use strata::{Db, Engine, Options, SyncMode};
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(dir.path()).unwrap();
    let opts = Options {
        engine: Engine::Log,
        partitions: 1,
        sync: SyncMode::Always,
        fs: std::sync::Arc::new(fs.clone()),
        ..Options::tiny()
    };
    let db = Db::open(dir.path().join("db"), opts).unwrap();
    fs.fail(IoKind::Open, 0, FaultKind::Eio);
    let mut failed = false;
    let mut acknowledged = Vec::new();
    for i in 0..600u32 {
        let key = format!("k{i:04}");
        let value = format!("{i}").repeat(50);
        match db.put(key.as_bytes(), value.as_bytes()) {
            Ok(()) => acknowledged.push((key, value)),
            Err(_) => failed = true,
        }
    }
    assert!(
        failed,
        "the injected open failure never happened (no segment roll?)"
    );
    for (key, value) in &acknowledged {
        let got = db.get(key.as_bytes());
        assert!(
            matches!(&got, Ok(Some(v)) if v == value.as_bytes()),
            "{key}: acknowledged, reads back {got:?}"
        );
    }
}
