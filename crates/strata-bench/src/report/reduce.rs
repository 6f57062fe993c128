//! JSON lines in, what the plots and the page show out: per-run timelines, Strata's results per
//! (partitions, threads) cell, engines side by side, the order workloads and engines are shown
//! in, and which timelines are drawn. Pure: nothing here reads files or draws.

use std::collections::{BTreeMap, BTreeSet};

use crate::record::{IntervalPoint, Line, ReadonlyRecord, RunRecord};
use crate::spec::{Engine, Workload};

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

/// Everything the plots and the page need.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportData {
    /// Per-run timelines, oldest first.
    pub timelines: Vec<Timeline>,
    /// Strata's results per workload name (latest run per cell).
    pub grids: BTreeMap<String, Grid>,
    /// Engines side by side: workload name -> engine name -> figures (latest run), present only
    /// for workloads in which a peer ran.
    pub peers: BTreeMap<String, BTreeMap<String, PeerBar>>,
    /// Every mixed-workload summary, in file order.
    pub summaries: Vec<RunRecord>,
    /// Every read-only result, in file order.
    pub readonly: Vec<ReadonlyRecord>,
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

impl ReportData {
    /// Reduces parsed lines to plot inputs.
    pub fn from_lines(lines: &[Line]) -> Self {
        let mut data = ReportData::default();
        let mut by_run: BTreeMap<String, Vec<&IntervalPoint>> = BTreeMap::new();
        for line in lines {
            match line {
                Line::Interval(p) => by_run.entry(p.run_id.clone()).or_default().push(p),
                Line::Summary(r) => data.summaries.push((**r).clone()),
                Line::Readonly(r) => data.readonly.push((**r).clone()),
                // Startup results are tabulated in BENCHMARKS.md, not plotted.
                Line::Startup(_) | Line::Other => {}
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

        let mut latest: Vec<&RunRecord> = data.summaries.iter().collect();
        latest.sort_by_key(|r| r.started_unix_ms);
        for r in &latest {
            if r.spec.engine.engine == Engine::Strata {
                data.grids
                    .entry(r.spec.run.workload.name().to_string())
                    .or_default()
                    .insert(
                        (r.spec.engine.partitions as u64, r.spec.run.threads as u64),
                        r.summary.ops_per_sec,
                    );
            }
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
        data
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

/// One read-only setting (engine, data size, value size, index rate, known-key rate, threads)
/// over all its trials: the seed's medians, with quartiles.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadonlyCell {
    /// `engine, data, value B, index rate, known-key rate, threads`, as the table shows it.
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
            let label = format!(
                "{}, {:.2} GiB, {} B values, index every {}, known-key rate {:.2}, {} threads",
                r.spec.engine.engine,
                r.spec.data_bytes as f64 / (1u64 << 30) as f64,
                r.spec.value_bytes,
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
