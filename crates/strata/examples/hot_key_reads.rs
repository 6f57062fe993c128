//! CPU cost of reading a key that was written over and over (a collection's metadata, a
//! counter): the memtable holds one version per write until its flush, and a read wants the
//! newest. `cargo run --release -p strata --example hot_key_reads -- [writes] [reads]`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let writes: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let reads: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let dir = tempfile::tempdir().unwrap();
    let db = strata::Db::open(
        dir.path(),
        strata::Options {
            sync: strata::SyncMode::Never,
            // Every version stays in the one memtable.
            memtable_bytes_max: 256 << 20,
            ..strata::Options::default()
        },
    )
    .unwrap();
    for i in 0..writes {
        db.put(b"hot", &i.to_le_bytes()).unwrap();
    }
    let t = Instant::now();
    let mut bytes = 0u64;
    for _ in 0..reads {
        bytes += db.get(b"hot").unwrap().map_or(0, |v| v.len() as u64);
    }
    println!(
        "{:.0} ns per read of a key written {writes} times ({bytes} bytes read)",
        t.elapsed().as_secs_f64() * 1e9 / reads as f64
    );
}
