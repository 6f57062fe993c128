//! `compare`: the same workload on Strata and each peer in turn, each on a fresh directory (and,
//! from the CLI, in a process of its own); the CLI then prints the records as one table with every
//! figure also as a ratio to Strata's (`report::format_table`).

use crate::error::Result;
use crate::record::{RunRecord, Sink};
use crate::report::{mib, opt};
use crate::runner::Runner;
use crate::spec::{BenchSpec, EngineSpec, RunSpec, Workload};

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
        "{:<8} {:<12} {:>10.0} ops/s (last 10 min {:>8})  p99 {:>7} us  disk {:>8.1} MiB ({} x live, last 10 min {})  WA engine {}  WA io {}  peak RSS {}  load {}",
        r.spec.engine.engine.name(),
        r.spec.run.workload.name(),
        r.summary.ops_per_sec,
        opt(r.summary.tail_ops_per_sec, 0),
        r.summary.p99_us,
        mib(r.disk_bytes),
        opt(r.summary.per_live(r.disk_bytes as f64), 2),
        opt(
            r.summary
                .tail_disk_bytes
                .and_then(|d| r.summary.per_live(d)),
            2
        ),
        opt(r.write_amplification_engine, 2),
        opt(r.write_amplification_io, 2),
        r.peak_rss_bytes
            .map(|b| format!("{:.0} MiB", mib(b)))
            .unwrap_or_else(|| "-".into()),
        opt(r.load_avg_1m, 1),
    )
}
