//! A full disk (simulated with a file-size limit, `prlimit --fsize`, with SIGXFSZ ignored so a
//! write past the limit fails with EFBIG like ENOSPC would) makes writes fail with a clear I/O
//! error naming the file; the process keeps running; every write acknowledged before the
//! failure is there after reopening without the limit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use strata::{Db, Engine, Options, SyncMode};

fn options(engine: Engine) -> Options {
    Options {
        engine,
        partitions: 2,
        sync: SyncMode::Always,
        // Logs grow past the file-size limit before a memtable fills: the failing write is a
        // log append (the flush and compaction failure paths are hit too, as tables grow).
        memtable_bytes_max: 64 << 10,
        ..Options::tiny()
    }
}

#[test]
fn disk_full_child_entry() {
    let Ok(dir) = std::env::var("STRATA_DISK_FULL_DIR") else {
        return;
    };
    let engine = match std::env::var("STRATA_DISK_FULL_ENGINE").as_deref() {
        Ok("log") => Engine::Log,
        _ => Engine::Lsm,
    };
    let db = Db::open(&dir, options(engine)).unwrap();
    let value = vec![b'v'; 700];
    let mut errors = 0;
    for i in 0..100_000u32 {
        match db.put(format!("key{i:06}").as_bytes(), &value) {
            Ok(()) => println!("ACK {i}"),
            Err(e) => {
                println!("ERR {e}");
                errors += 1;
                if errors >= 4 {
                    break;
                }
            }
        }
    }
    // Reads still work after write errors.
    assert!(db.get(b"key000000").is_ok());
    println!("DONE");
}

#[test]
fn full_disk_gives_an_error_and_loses_no_acknowledged_write_lsm() {
    full_disk(Engine::Lsm);
}

#[test]
fn full_disk_gives_an_error_and_loses_no_acknowledged_write_log() {
    full_disk(Engine::Log);
}

fn full_disk(engine: Engine) {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let script = format!(
        "trap '' XFSZ; exec prlimit --fsize=20000 '{}' disk_full_child_entry --exact --nocapture --test-threads=1",
        exe.display()
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .env("STRATA_DISK_FULL_DIR", dir.path())
        .env(
            "STRATA_DISK_FULL_ENGINE",
            if engine == Engine::Log { "log" } else { "lsm" },
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("DONE"),
        "child did not finish cleanly: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let acked: Vec<u32> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ACK ").map(|n| n.parse().unwrap()))
        .collect();
    let first_err = stdout
        .lines()
        .find_map(|l| l.strip_prefix("ERR "))
        .expect("no write failed");
    assert!(
        first_err.contains("File too large") || first_err.contains("read-only"),
        "unclear error: {first_err}"
    );
    assert!(
        first_err.contains(".log")
            || first_err.contains(".seg")
            || first_err.contains(".sst")
            || first_err.contains("partition"),
        "error names no file: {first_err}"
    );
    assert!(!acked.is_empty());
    // Failed table builds left no temporary files behind (they are removed at once, not only on
    // the next open: on a full disk their bytes matter).
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            assert!(
                !p.to_string_lossy().ends_with(".sst.tmp"),
                "leftover {}",
                p.display()
            );
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    let db = Db::open(dir.path(), options(engine)).unwrap();
    for i in &acked {
        assert!(
            db.get(format!("key{i:06}").as_bytes()).unwrap().is_some(),
            "acknowledged key{i:06} lost"
        );
    }
    // And the store accepts writes again.
    db.put(b"after", b"ok").unwrap();
}
