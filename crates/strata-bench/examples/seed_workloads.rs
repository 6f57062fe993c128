//! The four seed workloads against Strata with the settings, one after another:
//! `cargo run --release -p strata-bench --example seed_workloads -- [seconds] [threads] [partitions]`.
//! (`strata bench` is the full-featured front end; this needs nothing but the library.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use strata_bench::{BenchStore, RunSpec, StrataStore, Workload};

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let seconds = args.first().copied().unwrap_or(60);
    let threads = args.get(1).copied().unwrap_or(2) as usize;
    let partitions = args.get(2).copied().unwrap_or(4) as usize;
    let dir = std::path::PathBuf::from("./bench-data");
    for workload in Workload::ALL {
        let _ = std::fs::remove_dir_all(&dir);
        let opts = strata::Options {
            partitions,
            ..strata::Options::default()
        };
        let store: Arc<dyn BenchStore> = Arc::new(StrataStore::open(&dir, opts).unwrap());
        let spec = RunSpec {
            workload,
            known_key_rate: 0.5,
            key_space: 100_000_000,
            value_bytes: 1024,
            threads,
            duration: Duration::from_secs(seconds),
            interval: Duration::from_secs(10.min(seconds)),
            seed: 42,
        };
        let s = strata_bench::run(store.clone(), &spec, &dir, |l| eprintln!("{l}")).unwrap();
        println!(
            "{:>12}: {:>9.0} ops/s  p99 {:>6} us  intervals {:.0}..{:.0} ops/s  write amp {:.2}",
            workload.name(),
            s.ops_per_sec,
            s.p99_us,
            s.interval_ops_per_sec_min,
            s.interval_ops_per_sec_max,
            store.write_amplification().unwrap_or(0.0)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
