//! The four benchmark workloads (PUT-, GET-, DELETE-heavy and balanced mixes) in their simplest
//! form, for quick A/B runs of engine changes:
//! `workloads SECONDS THREADS PARTITIONS [value_log_bytes_min]` prints ops/s, disk bytes and
//! write amplification per workload (1 KiB values, known-key rate 0.5, 100 M key space, WAL
//! synced every 100 ms). The full harness with peers and plots is `strata bench`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn key(n: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k.copy_from_slice(format!("{n:016}").as_bytes());
    k
}

fn main() {
    let a: Vec<u64> = std::env::args()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    let (secs, threads, partitions) = (
        a.first().copied().unwrap_or(20),
        a.get(1).copied().unwrap_or(2),
        a.get(2).copied().unwrap_or(4),
    );
    let sep = a.get(3).map(|&v| v as usize);
    for (name, put, del) in [
        ("put-heavy", 90, 5),
        ("get-heavy", 10, 5),
        ("delete-heavy", 45, 45),
        ("balanced", 33, 33),
    ] {
        let dir = std::path::PathBuf::from(format!("./wl-data-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        let mut opts = strata::Options {
            partitions: partitions as usize,
            ..strata::Options::default()
        };
        if let Some(s) = sep {
            opts.value_log_bytes_min = Some(s);
        }
        let db = Arc::new(strata::Db::open(&dir, opts).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let ops = Arc::new(AtomicU64::new(0));
        let t0 = Instant::now();
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (db, stop, ops) = (db.clone(), stop.clone(), ops.clone());
                std::thread::spawn(move || {
                    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (t + 1);
                    let mut rnd = move || {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x
                    };
                    let value: Vec<u8> = (0..1024 + 64)
                        .map(|i| (i * 31 + t as usize) as u8)
                        .collect();
                    let mut known: Vec<u64> = Vec::new();
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let r = rnd() % 100;
                        let pick = |rnd: &mut dyn FnMut() -> u64, known: &Vec<u64>| {
                            if !known.is_empty() && rnd() % 2 == 0 {
                                known[(rnd() % known.len() as u64) as usize]
                            } else {
                                rnd() % 100_000_000
                            }
                        };
                        if r < put {
                            let k = rnd() % 100_000_000;
                            let off = (rnd() % 64) as usize;
                            db.put(&key(k), &value[off..off + 1024]).unwrap();
                            if known.len() < 100_000 {
                                known.push(k);
                            } else {
                                let i = (rnd() % known.len() as u64) as usize;
                                known[i] = k;
                            }
                        } else if r < put + del {
                            let k = pick(&mut rnd, &known);
                            let _ = db.get(&key(k)).unwrap();
                            db.delete(&key(k)).unwrap();
                        } else {
                            let k = pick(&mut rnd, &known);
                            let _ = db.get(&key(k)).unwrap();
                        }
                        n += 1;
                        if n % 256 == 0 {
                            ops.fetch_add(256, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
        for h in hs {
            h.join().unwrap();
        }
        let el = t0.elapsed().as_secs_f64();
        let s = db.stats();
        println!(
            "{name:>12}: {:>9.0} ops/s  disk {:>6} MiB  write amp {:.2}  stalls {}",
            ops.load(Ordering::Relaxed) as f64 / el,
            s.disk_bytes() / (1 << 20),
            s.write_amplification(),
            s.partitions.iter().map(|p| p.write_stalls).sum::<u64>()
        );
        drop(db);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
