//! CPU cost of point operations with everything in memory (no disk waits): puts into
//! memtables, then GETs (half of them absent keys, as in the benchmark workloads) from 2 threads.
//! `cargo run --release -p strata --example point_ops -- [keys]`
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
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        strata::Db::open(
            dir.path(),
            strata::Options {
                sync: strata::SyncMode::Never,
                memtable_bytes_max: 64 << 20,
                ..strata::Options::default()
            },
        )
        .unwrap(),
    );
    let value = vec![7u8; 1024];
    let t = Instant::now();
    for i in 0..n {
        db.put(&key(i), &value).unwrap();
    }
    let put_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let threads: Vec<_> = (0..2u64)
        .map(|th| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut found = 0u64;
                for i in 0..n * 4 {
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
    println!(
        "puts {:.0}/s, gets {:.0}/s (2 threads, {} found of {})",
        n as f64 / put_s,
        (n * 8) as f64 / get_s,
        found,
        n * 8
    );
}
