//! `Options::background_nice`: the background threads run at the process's niceness plus the
//! option, read back from `/proc` (the kernel's view, not the engine's). Its own test binary, so
//! no other test's database adds threads of the same name.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use strata::{Db, Options};

/// Niceness of each thread of this process whose name starts with `prefix`.
fn nice_of_threads(prefix: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let Ok(name) = std::fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        if !name.starts_with(prefix) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else {
            continue;
        };
        // Fields after the parenthesised name: state is field 3, nice is field 19.
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let nice: i64 = after_name.split(' ').nth(16).unwrap().parse().unwrap();
        out.push(nice);
    }
    out
}

fn own_nice() -> i64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    after_name.split(' ').nth(16).unwrap().parse().unwrap()
}

#[test]
fn background_threads_run_at_the_niceness_asked_for() {
    let base = own_nice();
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        background_threads: 2,
        background_nice: 5,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let want = (base + 5).min(19);
    // Each thread lowers its own priority as it starts.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let nices = nice_of_threads("strata-bg-");
        if nices.len() == 2 && nices.iter().all(|&n| n == want) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "background threads at {nices:?}, expected two at {want}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The caller's thread is untouched.
    assert_eq!(own_nice(), base);
    db.close().unwrap();

    let bad = Options {
        background_nice: 20,
        ..Options::default()
    };
    let err = Db::open(tempfile::tempdir().unwrap().path(), bad)
        .err()
        .expect("niceness 20 is refused");
    assert!(err.to_string().contains("background_nice"), "{err}");
}
