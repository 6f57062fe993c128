//! The four mixed workloads the partitioned LSM store was originally measured with (PUT-, GET-,
//! DELETE-heavy and balanced; "seed" is what those design experiments were called) against
//! Strata with the settings, one after another:
//! `cargo run --release -p strata-bench --example seed_workloads -- [seconds] [threads] [partitions]`.
//! (`strata bench` is the full-featured front end; this needs nothing but the library.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use strata_bench::runner::run_in_process;
use strata_bench::{BenchSpec, Engine, EngineSpec, RunSpec, Workload};

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
        let spec = BenchSpec {
            engine: EngineSpec {
                partitions,
                ..EngineSpec::new(Engine::Strata)
            },
            run: RunSpec {
                threads,
                duration: Duration::from_secs(seconds),
                interval: Duration::from_secs(10.min(seconds).max(1)),
                ..RunSpec::seed_defaults(workload)
            },
        };
        let mut sink = |l: &serde_json::Value| {
            eprintln!("{l}");
            Ok(())
        };
        let r = run_in_process(&spec, workload.name(), &dir, false, false, &mut sink).unwrap();
        println!("{}", strata_bench::compare::one_line(&r));
    }
}
