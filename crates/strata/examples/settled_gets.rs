//! CPU cost of a point read on a settled store, as `GET` on the server sees it after
//! `redis-benchmark -t set -r 1000000 -d 1024`: random puts of 1 KiB values (separated into
//! value logs), background work left to settle, then GETs of random written keys from one
//! thread with the default block cache (table blocks cached, values read from the page cache).
//! `cargo run --release -p strata --example settled_gets -- [keys] [value_bytes] [gets]`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

fn key(i: u64) -> Vec<u8> {
    format!("key:{:012}", i).into_bytes()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let value_bytes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1024);
    let gets: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let dir = tempfile::tempdir().unwrap();
    let db = strata::Db::open(
        dir.path(),
        strata::Options {
            sync: strata::SyncMode::Never,
            ..strata::Options::default()
        },
    )
    .unwrap();
    let value = vec![7u8; value_bytes];
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..n {
        db.put(&key(next() % n), &value).unwrap();
    }
    std::thread::sleep(Duration::from_secs(15));
    let keys: Vec<Vec<u8>> = (0..gets).map(|_| key(next() % n)).collect();
    for k in keys.iter().take(200_000) {
        db.get(k).unwrap();
    }
    eprintln!("reading");
    let t = Instant::now();
    let mut found = 0u64;
    for k in &keys {
        found += db.get(k).unwrap().is_some() as u64;
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "{:.0} ns per get ({} found of {}), {} keys, {} B values",
        s * 1e9 / gets as f64,
        found,
        gets,
        n,
        value_bytes
    );
}
