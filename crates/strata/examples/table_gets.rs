//! CPU cost of point reads served from table files (block cache warm, no disk waits): puts,
//! a full compaction, then GETs (half of them absent keys) and short scans from 2 threads.
//! `cargo run --release -p strata --example table_gets -- [keys] [value_bytes]`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Instant;

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k.copy_from_slice(
        format!(
            "{:016}",
            i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 100_000_000
        )
        .as_bytes(),
    );
    k
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let value_bytes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(32);
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        strata::Db::open(
            dir.path(),
            strata::Options {
                sync: strata::SyncMode::Never,
                block_cache_bytes: 1 << 30,
                ..strata::Options::default()
            },
        )
        .unwrap(),
    );
    let value = vec![7u8; value_bytes];
    for i in 0..n {
        db.put(&key(i), &value).unwrap();
    }
    db.compact().unwrap();
    // Warm the block cache.
    for i in 0..n {
        db.get(&key(i)).unwrap();
    }
    let t = Instant::now();
    let threads: Vec<_> = (0..2u64)
        .map(|th| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut found = 0u64;
                for i in 0..n * 2 {
                    // Even i: a written key; odd: a key never written.
                    let k = if i % 2 == 0 {
                        key((i * 7 + th) % n)
                    } else {
                        key(n + i)
                    };
                    found += db.get(&k).unwrap().is_some() as u64;
                }
                found
            })
        })
        .collect();
    let found: u64 = threads.into_iter().map(|h| h.join().unwrap()).sum();
    let get_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let scans = n / 4;
    let threads: Vec<_> = (0..2u64)
        .map(|th| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut seen = 0usize;
                for i in 0..scans {
                    let from = key((i * 13 + th) % n);
                    seen += db.scan(&from[..]..).take(4).count();
                }
                seen
            })
        })
        .collect();
    let seen: usize = threads.into_iter().map(|h| h.join().unwrap()).sum();
    let scan_s = t.elapsed().as_secs_f64();
    println!(
        "gets {:.0}/s ({} found of {}), scans of 4 {:.0}/s ({} entries), 2 threads, {} keys, {} B values",
        (n * 4) as f64 / get_s,
        found,
        n * 4,
        (scans * 2) as f64 / scan_s,
        seen,
        n,
        value_bytes
    );
}
