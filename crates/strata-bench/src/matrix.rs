//! `matrix`: partitions x threads per workload, the grid the partitioned store was first measured
//! on (by default partitions {1, 4, 8, 16} x threads {1, 4, 16, 32}), one fresh directory per run,
//! every record appended to the sink with the run's full spec.

use crate::error::Result;
use crate::record::{RunRecord, Sink};
use crate::runner::Runner;
use crate::spec::{BenchSpec, EngineSpec, RunSpec, Workload};

/// The partition counts of the original partitioned-store measurements.
pub const SEED_PARTITIONS: [usize; 4] = [1, 4, 8, 16];
/// The thread counts of the original partitioned-store measurements.
pub const SEED_THREADS: [usize; 4] = [1, 4, 16, 32];

/// The specs of the grid, workload-major, then partitions, then threads. Engines without
/// partitions (the peers) get one row per thread count, not one per partition count.
pub fn matrix_specs(
    engine: &EngineSpec,
    base: &RunSpec,
    workloads: &[Workload],
    partitions: &[usize],
    threads: &[usize],
) -> Vec<BenchSpec> {
    let partitions: Vec<usize> = if engine.engine.is_strata() {
        partitions.to_vec()
    } else {
        vec![engine.partitions]
    };
    let mut out = Vec::new();
    for &workload in workloads {
        for &p in &partitions {
            for &t in threads {
                out.push(BenchSpec {
                    engine: EngineSpec {
                        partitions: p,
                        ..engine.clone()
                    },
                    run: RunSpec {
                        workload,
                        threads: t,
                        ..base.clone()
                    },
                });
            }
        }
    }
    out
}

/// The grid with every cell `trials` times, in a random order drawn from `seed` (the original
/// ran its trials in random order, so a slow stretch of the machine does not fall on one cell).
/// Every run starts from an empty directory, so each trial is fresh.
pub fn with_trials(specs: Vec<BenchSpec>, trials: u32, seed: u64) -> Vec<BenchSpec> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    if trials <= 1 {
        return specs;
    }
    let mut out: Vec<BenchSpec> = specs
        .iter()
        .flat_map(|s| std::iter::repeat_n(s.clone(), trials as usize))
        .collect();
    out.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(seed));
    out
}

/// A grid cell: workload name, partitions, threads.
pub type Cell = (String, usize, usize);

/// Per cell of `records`, in grid order: the number of runs and the first quartile, median and
/// third quartile of their ops/s.
pub fn cell_quartiles(records: &[RunRecord]) -> Vec<(Cell, usize, (f64, f64, f64))> {
    let mut cells: std::collections::BTreeMap<Cell, Vec<f64>> = Default::default();
    for r in records {
        cells
            .entry((
                r.spec.run.workload.name().to_string(),
                r.spec.engine.partitions,
                r.spec.run.threads,
            ))
            .or_default()
            .push(r.summary.ops_per_sec);
    }
    cells
        .into_iter()
        .filter_map(|(cell, mut ops)| {
            let n = ops.len();
            Some((cell, n, crate::readonly::quartiles(&mut ops)?))
        })
        .collect()
}

/// Runs every spec of the grid in turn.
pub fn matrix(runner: &Runner, specs: &[BenchSpec], sink: Sink<'_>) -> Result<Vec<RunRecord>> {
    let mut out = Vec::with_capacity(specs.len());
    for (i, spec) in specs.iter().enumerate() {
        eprintln!(
            "matrix run {}/{}: {} {} partitions {} threads {}",
            i + 1,
            specs.len(),
            spec.engine.engine,
            spec.run.workload.name(),
            spec.engine.partitions,
            spec.run.threads
        );
        let record = runner.run(spec, &mut *sink)?;
        eprintln!("{}", crate::compare::one_line(&record));
        out.push(record);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Engine;

    #[test]
    fn grid_covers_every_combination_once() {
        let base = RunSpec::seed_defaults(Workload::Balanced);
        let specs = matrix_specs(
            &EngineSpec::new(Engine::Strata),
            &base,
            &Workload::ALL,
            &SEED_PARTITIONS,
            &SEED_THREADS,
        );
        assert_eq!(specs.len(), 4 * 4 * 4);
        let mut seen: Vec<_> = specs
            .iter()
            .map(|s| (s.run.workload, s.engine.partitions, s.run.threads))
            .collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 64);
    }

    #[test]
    fn trials_repeat_every_cell_in_a_shuffled_order() {
        let base = RunSpec::seed_defaults(Workload::Balanced);
        let specs = matrix_specs(
            &EngineSpec::new(Engine::Strata),
            &base,
            &[Workload::Balanced],
            &[1, 4],
            &[1, 2],
        );
        let cell = |s: &BenchSpec| (s.engine.partitions, s.run.threads);
        let grid: Vec<_> = specs.iter().map(cell).collect();
        let runs = with_trials(specs.clone(), 3, 7);
        assert_eq!(runs.len(), 12);
        let mut seen: Vec<_> = runs.iter().map(cell).collect();
        assert_ne!(seen[..4], grid[..], "not shuffled");
        seen.sort();
        let mut want: Vec<_> = grid.iter().flat_map(|c| [*c, *c, *c]).collect();
        want.sort();
        assert_eq!(seen, want);
        assert_eq!(with_trials(specs.clone(), 1, 7).len(), 4);
    }

    #[test]
    fn peers_get_no_partition_axis() {
        let base = RunSpec::seed_defaults(Workload::Balanced);
        let specs = matrix_specs(
            &EngineSpec::new(Engine::Rocksdb),
            &base,
            &[Workload::Balanced],
            &SEED_PARTITIONS,
            &SEED_THREADS,
        );
        assert_eq!(specs.len(), 4);
    }
}
