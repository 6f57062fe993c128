//! JSON lines in, what the plots and the page show out: per-run timelines, Strata's results per
//! (partitions, threads) cell (over trials), engines side by side, the document benchmarks, the
//! order workloads and engines are shown in, and which timelines are drawn. Pure: nothing here
//! reads files or draws.

use std::collections::{BTreeMap, BTreeSet};

use crate::record::{
    DocsLine, DocsLoadRecord, DocsOpsRecord, IntervalPoint, Line, ReadonlyRecord, ReportLine,
    RunRecord, StartupRecord,
};
use crate::spec::{BenchSpec, DocsPhase, Engine, Workload};

/// Default for the most timelines drawn (the latest runs), so a large matrix file makes a
/// readable report.
pub const TIMELINES_MAX: usize = 48;

/// Bytes in MiB.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// Bytes in GiB.
pub fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

/// One run's stats lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// Run id.
    pub run_id: String,
    /// Engine of the run.
    pub engine: String,
    /// Workload of the run.
    pub workload: String,
    /// Engine, workload, partitions and threads, for the title.
    pub title: String,
    /// (seconds since start, ops/s, GiB on disk) per interval.
    pub points: Vec<(f64, f64, f64)>,
}

/// Strata's ops/s for one workload, keyed by (partitions, threads).
pub type Grid = BTreeMap<(u64, u64), f64>;

/// One engine's figures in one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerBar {
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Write amplification from `/proc/self/io`, else the engine's own.
    pub write_amplification: Option<f64>,
    /// MiB on disk at the end.
    pub disk_mib: f64,
    /// Bytes on disk at the end per byte of keys and values written (space used relative to
    /// work done: engines that ran faster wrote more).
    pub disk_per_user_byte: Option<f64>,
}

/// Some samples (the trials of one setting) with their quartiles.
#[derive(Debug, Clone, PartialEq)]
pub struct Spread {
    /// The samples, lowest first.
    pub samples: Vec<f64>,
    /// First quartile (interpolated between ranks, as `numpy.percentile`).
    pub q1: f64,
    /// Median.
    pub median: f64,
    /// Third quartile.
    pub q3: f64,
}

impl Spread {
    /// The spread of `samples`; `None` without any.
    pub fn of(samples: &[f64]) -> Option<Spread> {
        let mut sorted = samples.to_vec();
        let (q1, median, q3) = crate::readonly::quartiles(&mut sorted)?;
        Some(Spread {
            samples: sorted,
            q1,
            median,
            q3,
        })
    }

    /// How many samples (trials).
    pub fn trials(&self) -> usize {
        self.samples.len()
    }

    /// The lowest sample.
    pub fn min(&self) -> f64 {
        self.samples.first().copied().unwrap_or(0.0)
    }

    /// The highest sample.
    pub fn max(&self) -> f64 {
        self.samples.last().copied().unwrap_or(0.0)
    }
}

/// One cell of Strata's grid (workload, partitions, threads): the ops/s and p99 of its latest
/// set of trials (one run without `--trials`).
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixCell {
    /// Workload name.
    pub workload: String,
    /// Partitions.
    pub partitions: u64,
    /// Client threads.
    pub threads: u64,
    /// Operations per second of each trial.
    pub ops_per_sec: Spread,
    /// p99 latency of each trial, microseconds.
    pub p99_us: Spread,
}

/// One panel of a by-threads chart: a line per series through its thread counts (the median,
/// with an IQR band where a point has several trials).
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadsPanel {
    /// Caption.
    pub title: String,
    /// Series name and its value per thread count.
    pub series: Vec<(String, BTreeMap<u64, Spread>)>,
}

/// One document phase at one thread count, in one setting (documents, compression,
/// partitions): its trials.
#[derive(Debug, Clone, PartialEq)]
pub struct DocsCell {
    /// The setting, as series are labelled ([`docs_label`]).
    pub label: String,
    /// The phase.
    pub phase: DocsPhase,
    /// Client threads.
    pub threads: u64,
    /// Operations per second of each trial.
    pub ops_per_sec: Spread,
    /// p99 latency of each trial, microseconds.
    pub p99_us: Spread,
    /// Update phases: updates lost over all trials.
    pub lost_updates: Option<u64>,
}

/// Everything the plots and the page need.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportData {
    /// Per-run timelines, oldest first.
    pub timelines: Vec<Timeline>,
    /// Strata's ops/s per workload name: per cell, the median of its latest set of trials (the
    /// latest run, for runs without trials).
    pub grids: BTreeMap<String, Grid>,
    /// Strata's grid cells with their trials, by workload name, partitions, threads.
    pub cells: Vec<MatrixCell>,
    /// Engines side by side: workload name -> engine name -> figures (latest run), present only
    /// for workloads in which a peer ran.
    pub peers: BTreeMap<String, BTreeMap<String, PeerBar>>,
    /// Every mixed-workload summary, in file order.
    pub summaries: Vec<RunRecord>,
    /// Every read-only result, in file order.
    pub readonly: Vec<ReadonlyRecord>,
    /// Every startup benchmark step, in file order.
    pub startup: Vec<StartupRecord>,
    /// Every document load, in file order.
    pub docs_loads: Vec<DocsLoadRecord>,
    /// Document loads over time (documents per second and GiB on disk), oldest first, titled
    /// with their [`docs_label`].
    pub docs_load_timelines: Vec<Timeline>,
    /// The document phases of the latest run of each setting, by setting, phase and threads.
    pub docs_cells: Vec<DocsCell>,
}

/// Which runs get a timeline plot.
#[derive(Debug, Clone)]
pub struct TimelineSelection {
    /// At most this many (the latest).
    pub max: usize,
    /// Only runs whose id contains this text (ids read `START-ENGINE-WORKLOAD-pP-tT`).
    pub matching: Option<String>,
}

impl Default for TimelineSelection {
    fn default() -> Self {
        TimelineSelection {
            max: TIMELINES_MAX,
            matching: None,
        }
    }
}

/// Bounds of the zoomed timelines: the first tenth of the run...
const ZOOM_SHARE: f64 = 0.1;
/// ...but at least this many samples of every run.
const ZOOM_SAMPLES_MIN: usize = 10;

impl ReportData {
    /// Reduces parsed lines to plot inputs (no trials, no document benchmarks: see
    /// [`ReportData::from_report_lines`]).
    pub fn from_lines(lines: &[Line]) -> Self {
        Self::reduce(lines.iter().map(|l| (l, None)), &[])
    }

    /// Reduces lines read by [`crate::record::read_report_jsonl`] to plot inputs.
    pub fn from_report_lines(lines: &[ReportLine]) -> Self {
        let docs: Vec<&DocsLine> = lines.iter().filter_map(|l| l.docs.as_ref()).collect();
        Self::reduce(lines.iter().map(|l| (&l.line, l.trial)), &docs)
    }

    fn reduce<'a>(
        lines: impl Iterator<Item = (&'a Line, Option<u32>)>,
        docs: &[&DocsLine],
    ) -> Self {
        let mut data = ReportData::default();
        let mut by_run: BTreeMap<String, Vec<&IntervalPoint>> = BTreeMap::new();
        // Trial of each summary that has one, by run id.
        let mut trials: BTreeMap<String, u32> = BTreeMap::new();
        for (line, trial) in lines {
            match line {
                Line::Interval(p) => by_run.entry(p.run_id.clone()).or_default().push(p),
                Line::Summary(r) => {
                    if let Some(t) = trial {
                        trials.insert(r.run_id.clone(), t);
                    }
                    data.summaries.push((**r).clone());
                }
                Line::Readonly(r) => data.readonly.push((**r).clone()),
                Line::Startup(r) => data.startup.push((**r).clone()),
                Line::Other => {}
            }
        }
        for (run_id, points) in by_run {
            let Some(first) = points.first() else {
                continue;
            };
            let title = format!(
                "{} {} - {} partitions, {} threads",
                first.engine, first.workload, first.partitions, first.threads
            );
            let mut prev_s = 0.0;
            let mut pts = Vec::with_capacity(points.len());
            for p in &points {
                let dt = p.elapsed_s - prev_s;
                prev_s = p.elapsed_s;
                if dt > 0.0 {
                    pts.push((p.elapsed_s, p.ops as f64 / dt, gib(p.file_size_bytes)));
                }
            }
            data.timelines.push(Timeline {
                run_id,
                engine: first.engine.clone(),
                workload: first.workload.clone(),
                title,
                points: pts,
            });
        }
        // Run ids start with the start time in ms, so this is oldest first.
        data.timelines.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        // Runs recorded before summaries carried their last ten minutes (and the mean bytes
        // on disk over them): from their intervals.
        for r in data.summaries.iter_mut() {
            let Some(t) = data.timelines.iter().find(|t| t.run_id == r.run_id) else {
                continue;
            };
            if r.summary.tail_ops_per_sec.is_none() {
                let rates: Vec<(f64, f64)> = t.points.iter().map(|p| (p.0, p.1)).collect();
                r.summary.tail_ops_per_sec = crate::workload::tail_mean(&rates);
            }
            if r.summary.tail_disk_bytes.is_none() {
                let disk: Vec<(f64, f64)> = t
                    .points
                    .iter()
                    .map(|p| (p.0, p.2 * (1u64 << 30) as f64))
                    .collect();
                r.summary.tail_disk_bytes = crate::workload::tail_mean(&disk);
            }
        }

        let mut latest: Vec<&RunRecord> = data.summaries.iter().collect();
        latest.sort_by_key(|r| r.started_unix_ms);
        data.cells = matrix_cells(&latest, &trials);
        for c in &data.cells {
            data.grids
                .entry(c.workload.clone())
                .or_default()
                .insert((c.partitions, c.threads), c.ops_per_sec.median);
        }
        let with_peers: BTreeSet<&str> = latest
            .iter()
            .filter(|r| r.spec.engine.engine != Engine::Strata)
            .map(|r| r.spec.run.workload.name())
            .collect();
        for r in &latest {
            let w = r.spec.run.workload.name();
            if with_peers.contains(w) {
                data.peers.entry(w.to_string()).or_default().insert(
                    r.spec.engine.engine.name().to_string(),
                    PeerBar {
                        ops_per_sec: r.summary.ops_per_sec,
                        write_amplification: r
                            .write_amplification_io
                            .or(r.write_amplification_engine),
                        disk_mib: mib(r.disk_bytes),
                        disk_per_user_byte: (r.summary.user_bytes_written > 0)
                            .then(|| r.disk_bytes as f64 / r.summary.user_bytes_written as f64),
                    },
                );
            }
        }
        data.reduce_docs(docs);
        data
    }

    /// The document benchmarks' part of [`ReportData::reduce`].
    fn reduce_docs(&mut self, docs: &[&DocsLine]) {
        let mut stats: BTreeMap<&str, Vec<&crate::record::DocsStatsPoint>> = BTreeMap::new();
        let mut ops: Vec<&DocsOpsRecord> = Vec::new();
        for line in docs {
            match line {
                DocsLine::Stats(p) if p.phase == "load" => {
                    stats.entry(p.run_id.as_str()).or_default().push(p)
                }
                DocsLine::Stats(_) => {}
                DocsLine::Load(r) => self.docs_loads.push((**r).clone()),
                DocsLine::Ops(r) => ops.push(r),
            }
        }
        // Run ids start with the start time in ms: oldest first.
        for (run_id, points) in stats {
            let label = self
                .docs_loads
                .iter()
                .find(|l| l.run_id == run_id)
                .map(|l| {
                    docs_label(
                        l.docs_loaded,
                        l.spec.engine.compression.name(),
                        l.spec.engine.partitions,
                    )
                })
                .unwrap_or_else(|| run_id.to_string());
            let samples: Vec<(f64, u64, u64)> = points
                .iter()
                .map(|p| (p.elapsed_s, p.count, p.size_bytes))
                .collect();
            self.docs_load_timelines.push(Timeline {
                run_id: run_id.to_string(),
                engine: Engine::Strata.name().to_string(),
                workload: "docs-load".into(),
                title: label,
                points: rates(&samples),
            });
        }
        // The latest load of each setting, as for the phases.
        let mut seen = BTreeSet::new();
        self.docs_load_timelines.reverse();
        self.docs_load_timelines
            .retain(|t| seen.insert(t.title.clone()));
        self.docs_load_timelines.reverse();
        self.docs_cells = docs_cells(&ops);
    }

    /// For each workload, the best ops/s over thread counts per partition count (the
    /// "partitions" plot: how throughput grows with partitions).
    pub fn best_by_partitions(&self) -> BTreeMap<String, BTreeMap<u64, f64>> {
        self.grids
            .iter()
            .map(|(w, grid)| {
                let mut best: BTreeMap<u64, f64> = BTreeMap::new();
                for (&(p, _), &ops) in grid {
                    let e = best.entry(p).or_insert(0.0);
                    *e = e.max(ops);
                }
                (w.clone(), best)
            })
            .collect()
    }

    /// The timelines to draw: of those `selection` matches, the latest `selection.max`, less
    /// any without points.
    pub fn selected_timelines(&self, selection: &TimelineSelection) -> Vec<&Timeline> {
        let chosen: Vec<&Timeline> = self
            .timelines
            .iter()
            .filter(|t| {
                selection
                    .matching
                    .as_deref()
                    .is_none_or(|m| t.run_id.contains(m))
            })
            .collect();
        let skip = chosen.len().saturating_sub(selection.max);
        chosen
            .into_iter()
            .skip(skip)
            .filter(|t| !t.points.is_empty())
            .collect()
    }
}

impl ReportData {
    /// Strata's ops/s by thread count: one panel per workload (in [`workload_order`]), one
    /// series per partition count.
    pub fn threads_panels(&self) -> Vec<ThreadsPanel> {
        let workloads: BTreeSet<&String> = self.cells.iter().map(|c| &c.workload).collect();
        workload_order(workloads)
            .into_iter()
            .map(|w| {
                let mut series: BTreeMap<u64, BTreeMap<u64, Spread>> = BTreeMap::new();
                for c in self.cells.iter().filter(|c| c.workload == w) {
                    series
                        .entry(c.partitions)
                        .or_default()
                        .insert(c.threads, c.ops_per_sec.clone());
                }
                ThreadsPanel {
                    title: format!("{w}: ops/s by threads"),
                    series: series
                        .into_iter()
                        .map(|(p, by_threads)| (partitions_label(p), by_threads))
                        .collect(),
                }
            })
            .collect()
    }

    /// The documents' ops/s by thread count: one panel per phase (in [`DocsPhase::ALL`]'s
    /// order), one series per setting (oldest run first).
    pub fn docs_threads_panels(&self) -> Vec<ThreadsPanel> {
        DocsPhase::ALL
            .into_iter()
            .filter_map(|phase| {
                // Series in the order of their runs, as in the load chart.
                let mut series: Vec<(String, BTreeMap<u64, Spread>)> = Vec::new();
                for c in self.docs_cells.iter().filter(|c| c.phase == phase) {
                    let i = match series.iter().position(|(l, _)| *l == c.label) {
                        Some(i) => i,
                        None => {
                            series.push((c.label.clone(), BTreeMap::new()));
                            series.len() - 1
                        }
                    };
                    if let Some((_, by_threads)) = series.get_mut(i) {
                        by_threads.insert(c.threads, c.ops_per_sec.clone());
                    }
                }
                (!series.is_empty()).then(|| ThreadsPanel {
                    title: format!("{}: ops/s by threads", phase.name()),
                    series,
                })
            })
            .collect()
    }

    /// The grid cells with several trials, best median ops/s first (the page's top table reads
    /// from the head of it).
    pub fn cells_with_trials(&self) -> Vec<&MatrixCell> {
        let mut cells: Vec<&MatrixCell> = self
            .cells
            .iter()
            .filter(|c| c.ops_per_sec.trials() > 1)
            .collect();
        cells.sort_by(|a, b| b.ops_per_sec.median.total_cmp(&a.ops_per_sec.median));
        cells
    }

    /// Every interval of every Strata run as (GiB on disk at its end, ops/s in it), one series
    /// per workload in [`workload_order`]: how throughput falls as the files grow (seed 000's
    /// scatter).
    pub fn disk_scatter(&self) -> Vec<(String, Vec<(f64, f64)>)> {
        let mut by_workload: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for t in self
            .timelines
            .iter()
            .filter(|t| t.engine == Engine::Strata.name() && !t.points.is_empty())
        {
            by_workload
                .entry(t.workload.clone())
                .or_default()
                .extend(t.points.iter().map(|p| (p.2, p.1)));
        }
        workload_order(by_workload.keys())
            .into_iter()
            .filter_map(|w| by_workload.remove(&w).map(|pts| (w, pts)))
            .collect()
    }

    /// Per workload run by more than one engine, the latest timeline of each engine (engines
    /// in name order): the side-by-side timeline charts.
    pub fn engine_timelines(&self) -> BTreeMap<String, Vec<&Timeline>> {
        let mut latest: BTreeMap<&str, BTreeMap<&str, &Timeline>> = BTreeMap::new();
        // Oldest first: later runs replace earlier ones.
        for t in self.timelines.iter().filter(|t| !t.points.is_empty()) {
            latest.entry(&t.workload).or_default().insert(&t.engine, t);
        }
        latest
            .into_iter()
            .filter(|(_, by_engine)| by_engine.len() > 1)
            .map(|(w, by_engine)| (w.to_string(), by_engine.into_values().collect()))
            .collect()
    }
}

/// Where a zoomed view of `runs` ends, in seconds: a tenth of the longest run, or more to show
/// at least [`ZOOM_SAMPLES_MIN`] samples of every run; `None` when that is the whole of every
/// run (nothing to zoom into).
pub fn zoom_end_s(runs: &[&Timeline]) -> Option<f64> {
    let last = |t: &&Timeline| t.points.last().map_or(0.0, |p| p.0);
    let run_end = runs.iter().map(last).fold(0.0, f64::max);
    let end = runs
        .iter()
        .filter_map(|t| {
            t.points
                .get(ZOOM_SAMPLES_MIN - 1)
                .or(t.points.last())
                .map(|p| p.0)
        })
        .fold(run_end * ZOOM_SHARE, f64::max);
    (end < run_end).then_some(end)
}

/// Rates per interval from cumulative samples (seconds, count so far, bytes on disk): (seconds,
/// count per second since the previous sample, GiB on disk). Intervals shorter than a
/// millisecond (a sample taken as the run starts) give no point.
fn rates(samples: &[(f64, u64, u64)]) -> Vec<(f64, f64, f64)> {
    let mut prev = (0.0, 0u64);
    let mut out = Vec::with_capacity(samples.len());
    for &(s, count, bytes) in samples {
        let dt = s - prev.0;
        if dt >= 1e-3 {
            out.push((s, count.saturating_sub(prev.1) as f64 / dt, gib(bytes)));
        }
        prev = (s, count);
    }
    out
}

/// Strata's grid cells, each from its latest set of trials. `runs` are oldest first; `trials`
/// holds the trial number of the runs that have one. A run with a trial number joins the set of
/// its cell when that set is of the same spec, has trial numbers too and not yet this one;
/// any other run starts a new set (so without trials, the latest run of a cell replaces the
/// earlier ones).
fn matrix_cells(runs: &[&RunRecord], trials: &BTreeMap<String, u32>) -> Vec<MatrixCell> {
    struct TrialSet<'a> {
        spec: &'a BenchSpec,
        /// Trial numbers seen; empty for a run without one (no other run joins it).
        trials: BTreeSet<u32>,
        runs: Vec<&'a RunRecord>,
    }
    let mut sets: BTreeMap<(String, u64, u64), TrialSet<'_>> = BTreeMap::new();
    for &r in runs
        .iter()
        .filter(|r| r.spec.engine.engine == Engine::Strata)
    {
        let key = (
            r.spec.run.workload.name().to_string(),
            r.spec.engine.partitions as u64,
            r.spec.run.threads as u64,
        );
        let trial = trials.get(&r.run_id).copied();
        let joined = match (sets.get_mut(&key), trial) {
            (Some(set), Some(t))
                if !set.trials.is_empty() && set.spec == &r.spec && !set.trials.contains(&t) =>
            {
                set.trials.insert(t);
                set.runs.push(r);
                true
            }
            _ => false,
        };
        if !joined {
            sets.insert(
                key,
                TrialSet {
                    spec: &r.spec,
                    trials: trial.into_iter().collect(),
                    runs: vec![r],
                },
            );
        }
    }
    sets.into_iter()
        .filter_map(|((workload, partitions, threads), set)| {
            let ops: Vec<f64> = set.runs.iter().map(|r| r.summary.ops_per_sec).collect();
            let p99: Vec<f64> = set.runs.iter().map(|r| r.summary.p99_us as f64).collect();
            Some(MatrixCell {
                workload,
                partitions,
                threads,
                ops_per_sec: Spread::of(&ops)?,
                p99_us: Spread::of(&p99)?,
            })
        })
        .collect()
}

/// The setting of a document run as its series are labelled: `1M docs, lz4, 4 partitions`.
pub fn docs_label(docs: u64, compression: &str, partitions: usize) -> String {
    let docs = if docs >= 1_000_000 && docs % 100_000 == 0 {
        format!("{}M", docs as f64 / 1e6)
    } else if docs >= 1_000 && docs % 1_000 == 0 {
        format!("{}k", docs / 1_000)
    } else {
        docs.to_string()
    };
    format!(
        "{docs} docs, {compression}, {}",
        partitions_label(partitions as u64)
    )
}

/// The document phases per setting, phase and thread count, of the latest run (by run id) of
/// each setting, oldest run first; the records of one run at one phase and thread count are its
/// trials.
fn docs_cells(ops: &[&DocsOpsRecord]) -> Vec<DocsCell> {
    let label = |r: &DocsOpsRecord| docs_label(r.docs, r.compression.name(), r.partitions);
    let mut latest_run: BTreeMap<String, &str> = BTreeMap::new();
    for r in ops {
        let run = latest_run.entry(label(r)).or_insert(r.run_id.as_str());
        if r.run_id.as_str() > *run {
            *run = &r.run_id;
        }
    }
    // Oldest run first (run ids start with the start time), then by the phase's place in
    // `DocsPhase::ALL` (phases are not `Ord`).
    let rank = |p: DocsPhase| DocsPhase::ALL.iter().position(|x| *x == p);
    let mut groups: BTreeMap<(&str, Option<usize>, u64), Vec<&DocsOpsRecord>> = BTreeMap::new();
    for &r in ops {
        if latest_run
            .get(&label(r))
            .is_some_and(|run| *run == r.run_id)
        {
            groups
                .entry((&r.run_id, rank(r.phase), r.threads as u64))
                .or_default()
                .push(r);
        }
    }
    groups
        .into_iter()
        .filter_map(|((_, _, threads), rs)| {
            let first = rs.first()?;
            let (label, phase) = (label(first), first.phase);
            let ops: Vec<f64> = rs.iter().map(|r| r.ops_per_sec).collect();
            let p99: Vec<f64> = rs.iter().map(|r| r.p99_us as f64).collect();
            let lost: Vec<u64> = rs.iter().filter_map(|r| r.lost_updates).collect();
            Some(DocsCell {
                label,
                phase,
                threads,
                ops_per_sec: Spread::of(&ops)?,
                p99_us: Spread::of(&p99)?,
                lost_updates: (!lost.is_empty()).then(|| lost.iter().sum()),
            })
        })
        .collect()
}

/// `1 partition`, `4 partitions`.
pub fn partitions_label(p: u64) -> String {
    format!("{p} partition{}", if p == 1 { "" } else { "s" })
}

/// Workload names in [`Workload::ALL`]'s order (put-heavy, get-heavy, delete-heavy, balanced),
/// others after them alphabetically.
pub fn workload_order<'a>(names: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let mut v: Vec<String> = names.into_iter().cloned().collect();
    v.sort_by_key(|n| {
        let rank = Workload::ALL
            .iter()
            .position(|w| Some(*w) == Workload::parse(n))
            .unwrap_or(usize::MAX);
        (rank, n.clone())
    });
    v
}

/// The engines that appear side by side, in [`Engine::ALL`]'s order (Strata first).
pub fn peer_engines(peers: &BTreeMap<String, BTreeMap<String, PeerBar>>) -> Vec<String> {
    Engine::ALL
        .into_iter()
        .filter(|e| peers.values().any(|m| m.contains_key(e.name())))
        .map(|e| e.name().to_string())
        .collect()
}

/// The change of `best[partitions]` against the one-partition figure, in percent (the seed's
/// "+170 % with 16 partitions"): `None` for one partition itself or without a one-partition
/// figure.
pub fn change_against_one_partition(best: &BTreeMap<u64, f64>, partitions: u64) -> Option<f64> {
    let one = *best.get(&1)?;
    let this = *best.get(&partitions)?;
    (partitions != 1 && one > 0.0).then(|| (this / one - 1.0) * 100.0)
}

/// One read-only setting (engine, data size, value size, load method, index rate, known-key
/// rate, threads) over all its trials: the seed's medians, with quartiles.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadonlyCell {
    /// `engine, data, value B, load, index rate, known-key rate, threads`, as the table shows it.
    pub label: String,
    /// Trials (records) of this setting.
    pub trials: usize,
    /// Reads/s: first quartile, median, third quartile.
    pub reads_per_sec: (f64, f64, f64),
    /// p99 latency in microseconds: first quartile, median, third quartile.
    pub p99_us: (f64, f64, f64),
    /// Every trial's reads/s (for box plots).
    pub samples: Vec<f64>,
}

impl ReportData {
    /// The read-only records grouped by setting, best median reads/s first (the seed's top-N
    /// table reads from the head of it).
    pub fn readonly_cells(&self) -> Vec<ReadonlyCell> {
        let mut groups: BTreeMap<String, Vec<&crate::record::ReadonlyRecord>> = BTreeMap::new();
        for r in &self.readonly {
            let label =
                format!(
                "{}, {:.2} GiB, {} B values, {}, index every {}, known-key rate {:.2}, {} threads",
                r.spec.engine.engine,
                r.spec.data_bytes as f64 / (1u64 << 30) as f64,
                r.spec.value_bytes,
                if r.bulk_loaded { "bulk load" } else { "write path" },
                r.spec
                    .engine
                    .index_every_entries
                    .map_or_else(|| "default".to_string(), |n| n.to_string()),
                r.spec.known_key_rate,
                r.spec.threads
            );
            groups.entry(label).or_default().push(r);
        }
        let mut cells: Vec<ReadonlyCell> = groups
            .into_iter()
            .filter_map(|(label, rs)| {
                let mut rates: Vec<f64> = rs.iter().map(|r| r.reads_per_sec).collect();
                let mut p99s: Vec<f64> = rs.iter().map(|r| r.p99_us as f64).collect();
                let samples = rates.clone();
                Some(ReadonlyCell {
                    label,
                    trials: rs.len(),
                    reads_per_sec: crate::readonly::quartiles(&mut rates)?,
                    p99_us: crate::readonly::quartiles(&mut p99s)?,
                    samples,
                })
            })
            .collect();
        cells.sort_by(|a, b| b.reads_per_sec.1.total_cmp(&a.reads_per_sec.1));
        cells
    }
}

#[cfg(test)]
pub(super) mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use super::*;
    use crate::record::{DocsStatsPoint, RunSummary};
    use crate::spec::{CompressionSpec, DocsInput, DocsSpec, EngineSpec, RunSpec};

    pub(in crate::report) fn summary(
        workload: Workload,
        partitions: usize,
        threads: usize,
        ops: f64,
        at: u64,
    ) -> Line {
        let record = RunRecord {
            kind: "summary".into(),
            run_id: format!("{at}-strata-{}-p{partitions}-t{threads}", workload.name()),
            started_unix_ms: at,
            machine: "test".into(),
            isolated: true,
            spec: BenchSpec {
                engine: EngineSpec {
                    partitions,
                    ..EngineSpec::new(Engine::Strata)
                },
                run: RunSpec {
                    threads,
                    ..RunSpec::seed_defaults(workload)
                },
            },
            summary: RunSummary {
                ops_per_sec: ops,
                p99_us: ops as u64 / 10,
                ..RunSummary::default()
            },
            disk_bytes: 0,
            write_amplification_engine: None,
            engine_stats: None,
            io_write_bytes: None,
            write_amplification_io: None,
            peak_rss_bytes: None,
            close_seconds: 0.0,
            load_avg_1m: None,
            preload_seconds: None,
            page_cache_dropped: None,
        };
        Line::Summary(Box::new(record))
    }

    fn report_line(line: Line, trial: Option<u32>) -> ReportLine {
        ReportLine {
            line,
            trial,
            docs: None,
        }
    }

    fn timeline(points: usize, every_s: f64) -> Timeline {
        Timeline {
            run_id: "1-strata".into(),
            engine: "strata".into(),
            workload: "balanced".into(),
            title: String::new(),
            points: (1..=points)
                .map(|i| (i as f64 * every_s, 1.0, 1.0))
                .collect(),
        }
    }

    #[test]
    fn spread_has_numpy_quartiles_and_the_range() {
        // numpy.percentile([1, 2, 3, 4], [25, 50, 75]) = 1.75, 2.5, 3.25
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.q1, s.median, s.q3), (1.75, 2.5, 3.25));
        assert_eq!((s.min(), s.max(), s.trials()), (1.0, 4.0, 4));
        assert_eq!(s.samples, vec![1.0, 2.0, 3.0, 4.0]);
        let s = Spread::of(&[10.0, 30.0, 20.0, 50.0, 40.0]).unwrap();
        assert_eq!((s.q1, s.median, s.q3), (20.0, 30.0, 40.0));
        let s = Spread::of(&[7.0]).unwrap();
        assert_eq!((s.q1, s.median, s.q3), (7.0, 7.0, 7.0));
        assert_eq!(Spread::of(&[]), None);
    }

    /// Trials of one matrix make one cell (median, IQR); runs without trial numbers replace
    /// each other; a second matrix's trials replace the first's.
    #[test]
    fn a_cell_is_its_latest_set_of_trials() {
        use Workload::{Balanced, PutHeavy};
        let lines = [
            // One matrix with three trials of balanced p4 t2, out of order among other cells.
            report_line(summary(Balanced, 4, 2, 100.0, 1), Some(0)),
            report_line(summary(Balanced, 1, 2, 50.0, 2), None),
            report_line(summary(Balanced, 4, 2, 300.0, 3), Some(1)),
            report_line(summary(Balanced, 1, 2, 70.0, 4), None),
            report_line(summary(Balanced, 4, 2, 200.0, 5), Some(2)),
            // Two matrices of put-heavy p8 t2 with two trials each.
            report_line(summary(PutHeavy, 8, 2, 10.0, 6), Some(0)),
            report_line(summary(PutHeavy, 8, 2, 20.0, 7), Some(1)),
            report_line(summary(PutHeavy, 8, 2, 30.0, 8), Some(0)),
            report_line(summary(PutHeavy, 8, 2, 50.0, 9), Some(1)),
        ];
        let data = ReportData::from_report_lines(&lines);
        let cell = |w: &str, p: u64, t: u64| {
            data.cells
                .iter()
                .find(|c| c.workload == w && c.partitions == p && c.threads == t)
                .unwrap()
        };
        let c = cell("balanced", 4, 2);
        assert_eq!(c.ops_per_sec.samples, vec![100.0, 200.0, 300.0]);
        assert_eq!(
            (c.ops_per_sec.q1, c.ops_per_sec.median, c.ops_per_sec.q3),
            (150.0, 200.0, 250.0)
        );
        assert_eq!(c.p99_us.median, 20.0);
        assert_eq!(cell("balanced", 1, 2).ops_per_sec.samples, vec![70.0]);
        assert_eq!(
            cell("put-heavy", 8, 2).ops_per_sec.samples,
            vec![30.0, 50.0]
        );
        assert_eq!(data.grids["balanced"][&(4, 2)], 200.0);
        assert_eq!(data.grids["balanced"][&(1, 2)], 70.0);
        assert_eq!(data.grids["put-heavy"][&(8, 2)], 40.0);

        // The top table: cells with trials, best median first.
        let top: Vec<(&str, f64)> = data
            .cells_with_trials()
            .iter()
            .map(|c| (c.workload.as_str(), c.ops_per_sec.median))
            .collect();
        assert_eq!(top, vec![("balanced", 200.0), ("put-heavy", 40.0)]);

        // By threads: put-heavy first (workload order), a series per partition count.
        let panels = data.threads_panels();
        assert_eq!(panels.len(), 2);
        assert_eq!(panels[0].title, "put-heavy: ops/s by threads");
        assert_eq!(panels[1].series.len(), 2);
        assert_eq!(panels[1].series[0].0, "1 partition");
        assert_eq!(panels[1].series[1].0, "4 partitions");
        assert_eq!(panels[1].series[1].1[&2].median, 200.0);

        // Without trial numbers the same runs replace each other, as before.
        let plain: Vec<Line> = lines.iter().map(|l| l.line.clone()).collect();
        let data = ReportData::from_lines(&plain);
        assert_eq!(data.grids["balanced"][&(4, 2)], 200.0);
        assert_eq!(data.grids["put-heavy"][&(8, 2)], 50.0);
        assert!(data.cells_with_trials().is_empty());
    }

    #[test]
    fn scatter_has_every_strata_interval_per_workload() {
        let interval = |run: &str, engine: &str, workload: &str, s: u64, ops: u64, gib: u64| {
            format!(
                r#"{{"kind":"interval","runId":"{run}","engine":"{engine}","workload":"{workload}","partitions":4,"threads":2,"nanoTime":{},"put":{ops},"delete":0,"deleteFound":0,"get":0,"getFound":0,"fileSize":{}}}"#,
                s * 1_000_000_000,
                gib << 30
            )
        };
        let lines: Vec<Line> = [
            interval("1-strata-balanced", "strata", "balanced", 10, 1000, 1),
            interval("1-strata-balanced", "strata", "balanced", 20, 3000, 2),
            interval("2-strata-put-heavy", "strata", "put-heavy", 5, 500, 3),
            interval("3-rocksdb-put-heavy", "rocksdb", "put-heavy", 5, 900, 4),
        ]
        .iter()
        .map(|l| crate::record::parse_line(l).unwrap())
        .collect();
        let data = ReportData::from_lines(&lines);
        assert_eq!(
            data.disk_scatter(),
            vec![
                ("put-heavy".to_string(), vec![(3.0, 100.0)]),
                ("balanced".to_string(), vec![(1.0, 100.0), (2.0, 300.0)]),
            ]
        );
    }

    /// A summary recorded before summaries carried their last ten minutes gets them from its
    /// interval lines; one that carries them keeps its own.
    #[test]
    fn older_summaries_get_their_tail_from_their_intervals() {
        // Each interval's bytes on disk at its end: 1 GiB per thousand ops of the interval.
        let interval = |run: &str, s: u64, ops: u64| {
            format!(
                r#"{{"kind":"interval","runId":"{run}","engine":"strata","workload":"balanced","partitions":4,"threads":2,"nanoTime":{},"put":{ops},"delete":0,"deleteFound":0,"get":0,"getFound":0,"fileSize":{}}}"#,
                s * 1_000_000_000,
                (ops / 1000) << 30,
            )
        };
        let mut lines: Vec<Line> = [
            interval("1-strata-balanced-p4-t2", 10, 1000),
            interval("1-strata-balanced-p4-t2", 20, 1000),
            interval("1-strata-balanced-p4-t2", 30, 4000),
            interval("1-strata-balanced-p4-t2", 40, 6000),
            interval("2-strata-balanced-p4-t2", 10, 1000),
        ]
        .iter()
        .map(|l| crate::record::parse_line(l).unwrap())
        .collect();
        lines.push(summary(Workload::Balanced, 4, 2, 300.0, 1));
        lines.push(summary(Workload::Balanced, 4, 2, 100.0, 2));
        if let Some(Line::Summary(r)) = lines.last_mut() {
            r.summary.tail_ops_per_sec = Some(77.0);
        }
        let data = ReportData::from_lines(&lines);
        // The last half of 40 s: the intervals ending at 30 and 40 s, 10 s each.
        assert_eq!(data.summaries[0].summary.tail_ops_per_sec, Some(500.0));
        assert_eq!(data.summaries[1].summary.tail_ops_per_sec, Some(77.0));
        // Bytes on disk over the same window: 4 and 6 GiB.
        assert_eq!(
            data.summaries[0].summary.tail_disk_bytes,
            Some(5.0 * (1u64 << 30) as f64)
        );
    }

    #[test]
    fn zoom_shows_a_tenth_of_the_run_and_at_least_ten_samples() {
        // 300 samples a second apart: a tenth is 30 s.
        assert_eq!(zoom_end_s(&[&timeline(300, 1.0)]), Some(30.0));
        // 30 samples 10 s apart: a tenth is 3 samples, so the first ten (100 s).
        assert_eq!(zoom_end_s(&[&timeline(30, 10.0)]), Some(100.0));
        // A 300 s run beside a 60 s one: ten samples of each, a tenth of the longer.
        assert_eq!(
            zoom_end_s(&[&timeline(30, 10.0), &timeline(6, 10.0)]),
            Some(100.0)
        );
        // Ten samples or fewer: the zoom would be the whole run.
        assert_eq!(zoom_end_s(&[&timeline(10, 1.0)]), None);
        assert_eq!(zoom_end_s(&[&timeline(6, 10.0)]), None);
        assert_eq!(zoom_end_s(&[]), None);
    }

    #[test]
    fn rates_come_from_cumulative_counts() {
        let gib = 1u64 << 30;
        // The first sample, as the load starts, is too short an interval to give a rate.
        let samples = [(0.0001, 0, 64), (1.0, 1000, gib), (2.5, 4000, 2 * gib)];
        assert_eq!(
            rates(&samples),
            vec![(1.0, 1000.0 / 0.9999, 1.0), (2.5, 2000.0, 2.0)]
        );
    }

    #[test]
    fn docs_labels_say_documents_compression_and_partitions() {
        assert_eq!(
            docs_label(1_000_000, "lz4", 4),
            "1M docs, lz4, 4 partitions"
        );
        assert_eq!(
            docs_label(1_500_000, "none", 4),
            "1.5M docs, none, 4 partitions"
        );
        assert_eq!(
            docs_label(200_000, "none", 1),
            "200k docs, none, 1 partition"
        );
        assert_eq!(docs_label(1234, "none", 2), "1234 docs, none, 2 partitions");
    }

    pub(in crate::report) fn docs_ops(
        run_id: &str,
        phase: DocsPhase,
        threads: usize,
        ops_per_sec: f64,
        trial: Option<u32>,
    ) -> DocsLine {
        DocsLine::Ops(Box::new(DocsOpsRecord {
            kind: "docsOps".into(),
            run_id: run_id.into(),
            phase,
            threads,
            compression: CompressionSpec::Lz4,
            partitions: 4,
            docs: 200_000,
            ops: 0,
            seconds: 1.0,
            ops_per_sec,
            p50_us: 1,
            p99_us: 10,
            p999_us: 20,
            max_us: 30,
            interval_ops_per_sec_min: 0.0,
            interval_ops_per_sec_max: 0.0,
            score_sum_before: None,
            score_sum_after: None,
            lost_updates: (phase == DocsPhase::Update).then_some(2),
            disk_bytes: 0,
            load_avg_1m: None,
            engine_stats: serde_json::Value::Null,
            trial,
        }))
    }

    pub(in crate::report) fn docs_load(run_id: &str) -> DocsLine {
        DocsLine::Load(Box::new(DocsLoadRecord {
            kind: "docsLoad".into(),
            run_id: run_id.into(),
            started_unix_ms: 0,
            machine: "test".into(),
            isolated: true,
            spec: DocsSpec {
                engine: EngineSpec {
                    compression: CompressionSpec::Lz4,
                    ..EngineSpec::new(Engine::Strata)
                },
                input: DocsInput::Generated {
                    docs: 200_000,
                    seed: 1,
                },
                id_field: "id".into(),
                readers: 1,
                writers: 2,
                phases: DocsPhase::ALL.to_vec(),
                threads: vec![1, 2],
                duration: Duration::from_secs(1),
                interval: Duration::from_secs(1),
                seed: 1,
                trials: 3,
            },
            generate_seconds: None,
            docs_loaded: 200_000,
            docs_in_store: 200_000,
            bad_lines: 0,
            json_bytes: 1,
            load_seconds: 1.0,
            docs_per_sec: 1.0,
            json_mb_per_sec: 1.0,
            disk_bytes_loaded: 0,
            flush_seconds: 0.0,
            disk_bytes_flushed: 0,
            compact_seconds: 0.0,
            disk_bytes_compacted: 0,
            flushed_to_json_ratio: 0.0,
            stored_to_json_ratio: 0.0,
            encoded_bytes: 0,
            encoded_to_json_ratio: 0.0,
            peak_rss_bytes: None,
            load_avg_1m: None,
            engine_stats: serde_json::Value::Null,
        }))
    }

    fn docs_stats(run_id: &str, phase: &str, s: f64, count: u64) -> DocsLine {
        DocsLine::Stats(DocsStatsPoint {
            run_id: run_id.into(),
            phase: phase.into(),
            threads: 2,
            compression: "lz4".into(),
            elapsed_s: s,
            count,
            size_bytes: 1 << 30,
        })
    }

    /// The latest run of a setting counts; within it, the records of one phase and thread count
    /// are trials.
    #[test]
    fn docs_phases_are_the_trials_of_the_latest_run_of_a_setting() {
        let docs = [
            docs_stats("1-old", "load", 1.0, 100),
            docs_load("1-old"),
            docs_ops("1-old", DocsPhase::Get, 2, 999.0, None),
            docs_stats("2-new", "load", 1.0, 1000),
            docs_stats("2-new", "load", 2.0, 3000),
            // Phase stats lines are not part of the load timeline.
            docs_stats("2-new", "get", 1.0, 50),
            docs_load("2-new"),
            docs_ops("2-new", DocsPhase::Update, 2, 30.0, Some(0)),
            docs_ops("2-new", DocsPhase::Get, 2, 300.0, Some(0)),
            docs_ops("2-new", DocsPhase::Get, 2, 100.0, Some(1)),
            docs_ops("2-new", DocsPhase::Update, 2, 10.0, Some(1)),
            docs_ops("2-new", DocsPhase::Get, 1, 150.0, Some(0)),
            docs_ops("2-new", DocsPhase::Get, 2, 200.0, Some(2)),
            docs_ops("2-new", DocsPhase::Update, 2, 20.0, Some(2)),
        ];
        let lines: Vec<ReportLine> = docs
            .into_iter()
            .map(|d| ReportLine {
                line: Line::Other,
                trial: None,
                docs: Some(d),
            })
            .collect();
        let data = ReportData::from_report_lines(&lines);
        assert_eq!(data.docs_loads.len(), 2);

        let label = "200k docs, lz4, 4 partitions";
        assert_eq!(data.docs_load_timelines.len(), 1, "the latest load only");
        let t = &data.docs_load_timelines[0];
        assert_eq!((t.run_id.as_str(), t.title.as_str()), ("2-new", label));
        assert_eq!(t.points, vec![(1.0, 1000.0, 1.0), (2.0, 2000.0, 1.0)]);

        // (phase, threads, trials' ops/s, median, lost updates)
        type Row = (DocsPhase, u64, Vec<f64>, f64, Option<u64>);
        let got: Vec<Row> = data
            .docs_cells
            .iter()
            .map(|c| {
                assert_eq!(c.label, label);
                (
                    c.phase,
                    c.threads,
                    c.ops_per_sec.samples.clone(),
                    c.ops_per_sec.median,
                    c.lost_updates,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (DocsPhase::Get, 1, vec![150.0], 150.0, None),
                (DocsPhase::Get, 2, vec![100.0, 200.0, 300.0], 200.0, None),
                (DocsPhase::Update, 2, vec![10.0, 20.0, 30.0], 20.0, Some(6)),
            ]
        );
        let panels = data.docs_threads_panels();
        let titles: Vec<&str> = panels.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(
            titles,
            ["get: ops/s by threads", "update: ops/s by threads"]
        );
        assert_eq!(panels[0].series[0].0, label);
        let q = &panels[0].series[0].1[&2];
        assert_eq!((q.q1, q.median, q.q3), (150.0, 200.0, 250.0));
    }
}
