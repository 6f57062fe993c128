//! `compare`: the same workload on Strata and each peer in turn, each on a fresh directory (and,
//! from the CLI, in a process of its own), then one table with every figure also as a ratio to
//! Strata's.

use std::fmt::Write as _;

use crate::error::Result;
use crate::record::{RunRecord, Sink};
use crate::runner::Runner;
use crate::spec::{BenchSpec, Engine, EngineSpec, RunSpec, Workload};

/// Runs every workload on every engine (engine order within a workload as given) and returns
/// the records in run order.
pub fn compare(
    runner: &Runner,
    engines: &[EngineSpec],
    workloads: &[Workload],
    base: &RunSpec,
    sink: Sink<'_>,
) -> Result<Vec<RunRecord>> {
    let mut out = Vec::new();
    for &workload in workloads {
        for engine in engines {
            let spec = BenchSpec {
                engine: engine.clone(),
                run: RunSpec {
                    workload,
                    ..base.clone()
                },
            };
            let record = runner.run(&spec, &mut *sink)?;
            eprintln!("{}", one_line(&record));
            out.push(record);
        }
    }
    Ok(out)
}

/// A one-line summary of a run for progress output.
pub fn one_line(r: &RunRecord) -> String {
    format!(
        "{:<8} {:<12} {:>10.0} ops/s  p99 {:>7} us  disk {:>8.1} MiB  WA engine {}  WA io {}  peak RSS {}  load {}",
        r.spec.engine.engine.name(),
        r.spec.run.workload.name(),
        r.summary.ops_per_sec,
        r.summary.p99_us,
        mib(r.disk_bytes),
        opt(r.write_amplification_engine, 2),
        opt(r.write_amplification_io, 2),
        r.peak_rss_bytes
            .map(|b| format!("{:.0} MiB", mib(b)))
            .unwrap_or_else(|| "-".into()),
        opt(r.load_avg_1m, 1),
    )
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

fn ratio(v: f64, base: Option<f64>) -> String {
    match base {
        Some(b) if b > 0.0 => format!("{:.2}x", v / b),
        _ => "-".into(),
    }
}

/// The comparison table in Markdown: per workload, one row per engine with ops/s (and the worst
/// interval's, where write stalls show), p99 latency, bytes on disk (also per byte the user
/// wrote), write amplification (engine-reported and from `/proc/self/io`) and peak RSS, most followed by
/// the ratio to Strata's figure in the same workload.
pub fn format_table(records: &[RunRecord]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| workload | engine | ops/s | x strata | worst interval ops/s | p99 us | x strata | disk MiB | disk / written | WA (engine) | WA (io) | x strata | peak RSS MiB | x strata |"
    );
    let _ = writeln!(s, "|{}", " --- |".repeat(14));
    let mut workloads: Vec<Workload> = records.iter().map(|r| r.spec.run.workload).collect();
    workloads.dedup();
    workloads.sort();
    workloads.dedup();
    for w in workloads {
        let rows: Vec<&RunRecord> = records
            .iter()
            .filter(|r| r.spec.run.workload == w)
            .collect();
        let base = rows
            .iter()
            .find(|r| r.spec.engine.engine == Engine::Strata)
            .copied();
        for r in rows {
            let b = |f: fn(&RunRecord) -> Option<f64>| base.and_then(f);
            let ops = |r: &RunRecord| Some(r.summary.ops_per_sec);
            let p99 = |r: &RunRecord| Some(r.summary.p99_us as f64);
            let wa = |r: &RunRecord| r.write_amplification_io;
            let rss = |r: &RunRecord| r.peak_rss_bytes.map(|b| b as f64);
            let _ =
                writeln!(
                s,
                "| {} | {} | {:.0} | {} | {:.0} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} |",
                w.name(),
                r.spec.engine.engine.name(),
                r.summary.ops_per_sec,
                ratio(r.summary.ops_per_sec, b(ops)),
                r.summary.interval_ops_per_sec_min,
                r.summary.p99_us,
                ratio(r.summary.p99_us as f64, b(p99)),
                mib(r.disk_bytes),
                if r.summary.user_bytes_written > 0 {
                    format!("{:.2}", r.disk_bytes as f64 / r.summary.user_bytes_written as f64)
                } else {
                    "-".into()
                },
                opt(r.write_amplification_engine, 2),
                opt(r.write_amplification_io, 2),
                r.write_amplification_io
                    .map(|v| ratio(v, b(wa)))
                    .unwrap_or_else(|| "-".into()),
                r.peak_rss_bytes
                    .map(|v| format!("{:.0}", mib(v)))
                    .unwrap_or_else(|| "-".into()),
                r.peak_rss_bytes
                    .map(|v| ratio(v as f64, b(rss)))
                    .unwrap_or_else(|| "-".into()),
            );
        }
    }
    s
}
