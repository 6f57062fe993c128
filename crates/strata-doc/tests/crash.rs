//! Crash test for documents and their key names: a child process stores documents whose field
//! names keep changing (so names get ids, and the name record is rewritten, all through the run)
//! and increments a counter document, printing each acknowledged operation; the parent SIGKILLs
//! it at a random moment, reopens the store and checks that every acknowledged document is there,
//! decodes (no document refers to a name the record lost) and equals what was written, and that
//! the counter holds every acknowledged increment.
//!
//! Rounds: `STRATA_CRASH_ROUNDS` (default 6).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use strata::{Options, SyncMode};
use strata_doc::{Doc, DocStore, Path};

fn options(sync: SyncMode) -> Options {
    Options {
        partitions: 4,
        sync,
        memtable_bytes_max: 8 << 10,
        ..Options::tiny()
    }
}

/// Document `n`: fields named after `n` in two ways, so new names appear every few documents
/// and old ones repeat (and so get ids).
fn doc(n: u64) -> Doc {
    Doc::from_json(&format!(
        r#"{{"id":{n},"f{a}":"v{n}","g{b}":{{"h{a}":[{n},"x"]}},"score":{n}}}"#,
        a = n % 13,
        b = n / 40
    ))
    .unwrap()
}

fn counter_key() -> Doc {
    Doc::from("counter")
}

/// The child: runs only when the parent sets STRATA_DOC_CRASH_DIR.
#[test]
fn doc_crash_child_entry() {
    let Ok(dir) = std::env::var("STRATA_DOC_CRASH_DIR") else {
        return;
    };
    let start: u64 = std::env::var("STRATA_DOC_CRASH_START")
        .unwrap()
        .parse()
        .unwrap();
    let sync = match std::env::var("STRATA_DOC_CRASH_SYNC").as_deref() {
        Ok("always") => SyncMode::Always,
        _ => SyncMode::EveryMs(60_000),
    };
    let store = DocStore::open(&dir, options(sync)).unwrap();
    if store.get(&counter_key()).unwrap().is_none() {
        store
            .put(&counter_key(), &Doc::from_json(r#"{"n":0}"#).unwrap())
            .unwrap();
    }
    let path = Path::parse("$.n").unwrap();
    let mut out = std::io::stdout().lock();
    let mut n = start;
    loop {
        store.put(&Doc::Int(n as i64), &doc(n)).unwrap();
        writeln!(out, "put {n}").unwrap();
        let now = store.increment(&counter_key(), &path, 1).unwrap();
        writeln!(out, "inc {now}").unwrap();
        out.flush().unwrap();
        n += 1;
    }
}

fn run_round(dir: &std::path::Path, sync: &str, start: u64, kill_after: Duration) -> (u64, i64) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "doc_crash_child_entry",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("STRATA_DOC_CRASH_DIR", dir)
        .env("STRATA_DOC_CRASH_START", start.to_string())
        .env("STRATA_DOC_CRASH_SYNC", sync)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let (mut last_put, mut last_inc) = (None, 0i64);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(n) = line.strip_prefix("put ") {
                last_put = n.parse::<u64>().ok();
            } else if let Some(v) = line.strip_prefix("inc ") {
                last_inc = v.parse().unwrap_or(last_inc);
            }
        }
        (last_put, last_inc)
    });
    std::thread::sleep(kill_after);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let (last_put, last_inc) = reader.join().unwrap();
    (last_put.map_or(start, |n| n + 1), last_inc)
}

fn crash_rounds(sync: &str) {
    let rounds: u64 = std::env::var("STRATA_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(6);
    let dir = tempfile::tempdir().unwrap();
    let mut next = 0u64;
    let mut counter_acked = 0i64;
    // Documents that were in flight when a child died and did not land: never written again.
    let mut absent = std::collections::HashSet::new();
    let path = Path::parse("$.n").unwrap();
    for round in 0..rounds {
        let kill_after = Duration::from_millis(150 + (round * 137) % 400);
        let (acked_end, last_inc) = run_round(dir.path(), sync, next, kill_after);
        counter_acked = counter_acked.max(last_inc);
        let store = DocStore::open(dir.path(), options(SyncMode::Always)).unwrap();
        // Every acknowledged document reads back whole and equal; the one in flight may or
        // may not be there, but if it is, it is whole too.
        for n in 0..=acked_end {
            let got = store.get(&Doc::Int(n as i64)).unwrap();
            match got {
                Some(d) => assert_eq!(d, doc(n), "round {round}: document {n}"),
                None if n == acked_end => {
                    absent.insert(n);
                }
                None => assert!(
                    absent.contains(&n),
                    "round {round}: acknowledged document {n} lost (acked up to {acked_end})"
                ),
            }
        }
        let count = store
            .get_path(&counter_key(), &path)
            .unwrap()
            .and_then(|d| d.as_i64())
            .unwrap_or(0);
        assert!(
            count == counter_acked || count == counter_acked + 1,
            "round {round}: counter {count}, acknowledged {counter_acked}"
        );
        counter_acked = count;
        assert!(
            !store.names().table().is_empty(),
            "round {round}: no key name got an id"
        );
        // The next round goes on after the last acknowledged document (and the one in flight,
        // which may have landed).
        next = acked_end + 1;
        store.close().unwrap();
    }
}

#[test]
fn sigkill_loses_no_acknowledged_document_or_name_under_always() {
    crash_rounds("always");
}

#[test]
fn sigkill_loses_no_acknowledged_document_or_name_without_fsync() {
    crash_rounds("never-in-test");
}
