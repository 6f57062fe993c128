//! What a batch spanning partitions costs against one that stays in one partition:
//! `batch_cost SECONDS THREADS PARTITIONS KEYS_PER_BATCH` writes batches of KEYS_PER_BATCH puts
//! (1 KiB values, WAL synced every 100 ms) for SECONDS each way and prints batches/s:
//! - `one-partition`: every key of a batch routed to the same partition (one log record);
//! - `spanning`: the keys spread over every partition (one record per partition, every
//!   partition's write lock, one sequence number, atomic across a crash).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let a: Vec<u64> = std::env::args()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    let (secs, threads, partitions, per_batch) = (
        a.first().copied().unwrap_or(10),
        a.get(1).copied().unwrap_or(2),
        a.get(2).copied().unwrap_or(4) as usize,
        a.get(3).copied().unwrap_or(8) as usize,
    );
    for mode in ["one-partition", "spanning"] {
        let dir = std::path::PathBuf::from(format!("./batch-cost-{mode}"));
        let _ = std::fs::remove_dir_all(&dir);
        let opts = strata::Options {
            partitions,
            ..strata::Options::default()
        };
        let db = Arc::new(strata::Db::open(&dir, opts).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let batches = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (db, stop, batches) = (db.clone(), stop.clone(), batches.clone());
                std::thread::spawn(move || {
                    let value = vec![b'v'; 1024];
                    let mut n = t << 40;
                    // Candidate keys by partition, so a batch can be built either way.
                    let mut pick = |want: Option<usize>| loop {
                        n += 1;
                        let k = format!("{n:016}").into_bytes();
                        if want.is_none_or(|p| db.partition_of(&k) == p) {
                            return k;
                        }
                    };
                    while !stop.load(Ordering::Relaxed) {
                        let mut b = strata::WriteBatch::new();
                        for i in 0..per_batch {
                            let want = match mode {
                                "one-partition" => Some(t as usize % partitions),
                                _ => Some(i % partitions),
                            };
                            b.put(pick(want), &value);
                        }
                        db.write(b).unwrap();
                        batches.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let start = Instant::now();
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().unwrap();
        }
        let elapsed = start.elapsed().as_secs_f64();
        let n = batches.load(Ordering::Relaxed);
        println!(
            "{mode}: {:.0} batches/s ({} keys each, {} partitions, {threads} threads)",
            n as f64 / elapsed,
            per_batch,
            partitions
        );
        drop(db);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
