//! The JSON lines the harness writes and the report reads back. Every line is one object with a
//! `kind`:
//!
//! - `interval`: a mixed workload's stats line (the original benchmark's `nanoTime, put, delete,
//!   deleteFound, get, getFound, fileSize`, counts per interval, plus latency percentiles) tagged
//!   with `runId, engine, workload, partitions, threads`;
//! - `summary`: one mixed-workload run: its full [`BenchSpec`] and results ([`RunRecord`]); with
//!   `strata bench matrix --trials N`, also `trial` (which run of its spec this was, from 0:
//!   [`TrialTagger`]), which [`parse_report_line`] reads;
//! - `readonly`: one read-only run: its [`ReadonlySpec`] and results ([`ReadonlyRecord`]);
//! - `startup`: one step of the startup benchmark ([`StartupRecord`]);
//! - `docsStats`, `docsLoad`, `docsOps`: the document benchmarks: a stats line per interval of
//!   the load and of each phase, the load's results ([`DocsLoadRecord`]) and each phase's
//!   ([`DocsOpsRecord`]). [`parse_line`] reads them as [`Line::Other`] (the runner has no use for
//!   them); the report reads them through [`parse_report_line`] as [`DocsLine`]s.
//!
//! Where lines go ([`Sink`]) and how a record becomes one ([`to_value`]) are defined here too:
//! this module imports only the specs, so every benchmark writes its records without depending
//! on the runner or on another benchmark.
//!
//! Lines are parsed through `serde_json::Value` first (internally tagged enums and `flatten` do
//! not mix with the workspace's `arbitrary_precision` numbers).

use std::io::BufRead;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::spec::{
    BenchSpec, CompressionSpec, DocsPhase, DocsSpec, Engine, ReadonlySpec, StartupSpec,
};

/// `kind` of interval lines.
pub const KIND_INTERVAL: &str = "interval";
/// `kind` of mixed-workload summaries.
pub const KIND_SUMMARY: &str = "summary";
/// `kind` of read-only results.
pub const KIND_READONLY: &str = "readonly";
/// `kind` of startup benchmark steps.
pub const KIND_STARTUP: &str = "startup";
/// `kind` of the document benchmarks' stats lines (one per interval of the load and each phase).
pub const KIND_DOCS_STATS: &str = "docsStats";
/// `kind` of a document load's results ([`DocsLoadRecord`]).
pub const KIND_DOCS_LOAD: &str = "docsLoad";
/// `kind` of one document phase's results ([`DocsOpsRecord`]).
pub const KIND_DOCS_OPS: &str = "docsOps";

/// Totals of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSummary {
    /// Operations of all kinds.
    pub ops: u64,
    /// Seconds the run took.
    pub seconds: f64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Median latency of all operations, microseconds.
    pub p50_us: u64,
    /// 99th percentile latency of all operations, microseconds.
    pub p99_us: u64,
    /// 99.9th percentile latency of all operations, microseconds.
    pub p999_us: u64,
    /// Highest latency seen, microseconds.
    pub max_us: u64,
    /// Lowest ops/s of any interval.
    pub interval_ops_per_sec_min: f64,
    /// Highest ops/s of any interval.
    pub interval_ops_per_sec_max: f64,
    /// Mean ops/s of the run's last ten minutes, or of its second half when it is shorter
    /// than twenty (`workload::tail_mean`); `None` for runs recorded before it (the
    /// report computes it from their interval lines).
    #[serde(default)]
    pub tail_ops_per_sec: Option<f64>,
    /// Mean bytes on disk over the same window, from the interval lines (a compaction's
    /// moved values exist twice until it installs, so the figure at the end alone swings);
    /// `None` for runs recorded before it (the report computes it from their intervals).
    #[serde(default)]
    pub tail_disk_bytes: Option<f64>,
    /// Bytes of keys and values the clients asked to write (puts: key + value; deletes: key).
    pub user_bytes_written: u64,
    /// Keys whose last write was a put when the workload stopped, counted by the clients
    /// (`workload::LiveKeys`), not asked of the engine; `None` for runs recorded before it.
    #[serde(default)]
    pub live_keys: Option<u64>,
    /// `live_keys` x (key + value bytes): the live data the bytes on disk are compared with.
    #[serde(default)]
    pub live_bytes: Option<u64>,
}

impl RunSummary {
    /// `bytes` over the live data, where the run counted it.
    pub fn per_live(&self, bytes: f64) -> Option<f64> {
        self.live_bytes.filter(|&l| l > 0).map(|l| bytes / l as f64)
    }
}

/// The results of one mixed-workload run, with the spec that produced them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// Always [`KIND_SUMMARY`].
    pub kind: String,
    /// Unique id of the run; its interval lines carry the same id.
    pub run_id: String,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// Cores, memory and kernel of the machine.
    pub machine: String,
    /// Whether the run had a process to itself (so peak RSS and I/O are the engine's alone).
    pub isolated: bool,
    /// What ran.
    pub spec: BenchSpec,
    /// Throughput and latency.
    pub summary: RunSummary,
    /// Bytes of files in the data directory when the workload stopped.
    pub disk_bytes: u64,
    /// Write amplification as the engine counts it, when the workload stopped.
    pub write_amplification_engine: Option<f64>,
    /// The engine's own counters when the workload stopped (Strata: flushes, compactions, write
    /// stalls, bytes written by kind, tables per level).
    #[serde(default)]
    pub engine_stats: Option<serde_json::Value>,
    /// Bytes the process sent to storage while the workload ran (`/proc/self/io`).
    pub io_write_bytes: Option<u64>,
    /// `io_write_bytes` / bytes the user wrote: the same measure for every engine.
    pub write_amplification_io: Option<f64>,
    /// Peak resident memory of the process during the run (`VmHWM`).
    pub peak_rss_bytes: Option<u64>,
    /// Seconds the engine took to close.
    pub close_seconds: f64,
    /// The machine's 1-minute load average when the workload stopped (this machine is shared;
    /// above its core count, other processes competed for the CPU).
    #[serde(default)]
    pub load_avg_1m: Option<f64>,
    /// Seconds the preload took (`RunSpec::preload`), before the timed run.
    #[serde(default)]
    pub preload_seconds: Option<f64>,
    /// Whether the page cache was dropped before the timed run: `None` when not asked
    /// (`RunSpec::drop_page_cache`), `Some(false)` when asked but not allowed.
    #[serde(default)]
    pub page_cache_dropped: Option<bool>,
}

/// The results of one read-only run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadonlyRecord {
    /// Always [`KIND_READONLY`].
    pub kind: String,
    /// Unique id of the run.
    pub run_id: String,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// Cores, memory and kernel of the machine.
    pub machine: String,
    /// Whether the run had a process to itself.
    pub isolated: bool,
    /// What ran.
    pub spec: ReadonlySpec,
    /// Whether the data went in through the engine's bulk load (else the write path).
    #[serde(default)]
    pub bulk_loaded: bool,
    /// Keys loaded.
    pub keys: u64,
    /// Seconds spent generating, sorting and writing the data.
    pub load_seconds: f64,
    /// Seconds spent in the final flush and compaction.
    pub compact_seconds: f64,
    /// Bytes of files once built.
    pub disk_bytes: u64,
    /// Reads done.
    pub reads: u64,
    /// Reads that found their key.
    pub found: u64,
    /// Seconds of reading.
    pub seconds: f64,
    /// Reads per second.
    pub reads_per_sec: f64,
    /// Median read latency, microseconds.
    pub p50_us: u64,
    /// 99th percentile read latency, microseconds.
    pub p99_us: u64,
    /// 99.9th percentile read latency, microseconds.
    pub p999_us: u64,
    /// Peak resident memory of the process during the run.
    pub peak_rss_bytes: Option<u64>,
    /// Which trial of its read phase this was (`ReadonlySpec::trials` above 1), from 0.
    #[serde(default)]
    pub trial: Option<u32>,
    /// Whether the page cache was dropped before this phase: `None` when not asked
    /// (`ReadonlySpec::drop_page_cache`), `Some(false)` when asked but not allowed (not root).
    #[serde(default)]
    pub page_cache_dropped: Option<bool>,
}

/// The result of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartupRecord {
    /// Always [`KIND_STARTUP`].
    pub kind: String,
    /// Id of the whole benchmark (all steps share it).
    pub run_id: String,
    /// Wall-clock start of the step, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// Cores, memory and kernel of the machine.
    pub machine: String,
    /// Whether the step had a process to itself.
    pub isolated: bool,
    /// What was built.
    pub spec: StartupSpec,
    /// `build`, `merge` or `open`.
    pub step: String,
    /// For opens: the directory's state (`after-load`, `after-merge`, `hints-removed`).
    pub state: String,
    /// For opens: whether the page cache was dropped first (asked for and allowed).
    pub cold_cache: bool,
    /// Seconds the step's main action took: loading, compacting, or `Db::open`.
    pub seconds: f64,
    /// Bytes of files in the directory after the step.
    pub disk_bytes: u64,
    /// Hint files in the directory after the step.
    pub hint_files: u64,
    /// Resident memory just before the open (opens only).
    pub rss_before_bytes: Option<u64>,
    /// Resident memory just after the open, before any read.
    pub rss_after_bytes: Option<u64>,
    /// `(rss_after - rss_before) / keys`: memory the opened store holds per key.
    pub rss_bytes_per_key: Option<f64>,
    /// The engine's own estimate of its in-memory index (log engine), bytes.
    pub index_bytes: Option<u64>,
    /// Keys in the in-memory index (log engine).
    pub index_keys: Option<u64>,
    /// Keys read back after the open.
    pub sample_reads: u64,
    /// Of those, found (must equal `sample_reads`).
    pub sample_found: u64,
    /// Peak resident memory of the process.
    pub peak_rss_bytes: Option<u64>,
    /// The machine's 1-minute load average at the end of the step.
    pub load_avg_1m: Option<f64>,
}

/// The results of the load of one run: the `docsLoad` line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocsLoadRecord {
    /// Always [`KIND_DOCS_LOAD`].
    pub kind: String,
    /// Unique id of the run; its stats and phase lines carry it too.
    pub run_id: String,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// Cores, memory and kernel of the machine.
    pub machine: String,
    /// Whether the run had a process to itself.
    pub isolated: bool,
    /// What ran.
    pub spec: DocsSpec,
    /// Seconds spent generating the input (not part of the load), if it was generated.
    pub generate_seconds: Option<f64>,
    /// Documents the loader wrote.
    pub docs_loaded: u64,
    /// Documents a scan of the store found afterwards (must equal `docs_loaded`: ids are unique).
    pub docs_in_store: u64,
    /// Lines the loader skipped.
    pub bad_lines: u64,
    /// Bytes of the JSON input.
    pub json_bytes: u64,
    /// Seconds from the loader's start to its last write.
    pub load_seconds: f64,
    /// Documents per second of the load.
    pub docs_per_sec: f64,
    /// JSON input megabytes (10^6 bytes) per second of the load.
    pub json_mb_per_sec: f64,
    /// Bytes of files in the data directory when the loader finished.
    pub disk_bytes_loaded: u64,
    /// Seconds `Db::flush` took.
    pub flush_seconds: f64,
    /// Bytes on disk after the flush (every document in a table or value log, no memtable).
    pub disk_bytes_flushed: u64,
    /// Seconds `Db::compact` took.
    pub compact_seconds: f64,
    /// Bytes on disk after the compaction: the settled store the phases run on.
    pub disk_bytes_compacted: u64,
    /// `disk_bytes_flushed / json_bytes`.
    pub flushed_to_json_ratio: f64,
    /// `disk_bytes_compacted / json_bytes`: the issue's stored-size figure.
    pub stored_to_json_ratio: f64,
    /// Bytes of the engine keys and stored values of every document (codec output before the
    /// engine adds blocks, indexes, compression or logs).
    pub encoded_bytes: u64,
    /// `encoded_bytes / json_bytes`: what the binary codec alone saves.
    pub encoded_to_json_ratio: f64,
    /// Peak resident memory of the process during the load.
    pub peak_rss_bytes: Option<u64>,
    /// The machine's 1-minute load average when the load finished.
    pub load_avg_1m: Option<f64>,
    /// Strata's counters after the compaction (see `strata_engine_stats`).
    pub engine_stats: serde_json::Value,
}

/// The results of one timed phase at one thread count: the `docsOps` line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocsOpsRecord {
    /// Always [`KIND_DOCS_OPS`].
    pub kind: String,
    /// The run's id (shared with its `docsLoad` line).
    pub run_id: String,
    /// Which phase.
    pub phase: DocsPhase,
    /// Client threads.
    pub threads: usize,
    /// Block compression of the store.
    pub compression: CompressionSpec,
    /// Partitions of the store.
    pub partitions: usize,
    /// Documents in the store (ids are drawn uniformly from all of them).
    pub docs: u64,
    /// Operations completed.
    pub ops: u64,
    /// Seconds the phase ran.
    pub seconds: f64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Median latency, microseconds.
    pub p50_us: u64,
    /// 99th percentile latency, microseconds.
    pub p99_us: u64,
    /// 99.9th percentile latency, microseconds.
    pub p999_us: u64,
    /// Highest latency, microseconds.
    pub max_us: u64,
    /// Lowest ops/s of any interval.
    pub interval_ops_per_sec_min: f64,
    /// Highest ops/s of any interval.
    pub interval_ops_per_sec_max: f64,
    /// Update phases: sum of `$.score` over the store before the phase.
    pub score_sum_before: Option<i64>,
    /// Update phases: the same sum after.
    pub score_sum_after: Option<i64>,
    /// Update phases: updates counted minus the growth of the score sum. `update` (not atomic)
    /// may lose some when threads race on one document; `increment` must lose none.
    pub lost_updates: Option<u64>,
    /// Bytes on disk when the phase ended.
    pub disk_bytes: u64,
    /// The machine's 1-minute load average when the phase ended (this machine is shared: above
    /// its core count, other processes competed for the CPU).
    pub load_avg_1m: Option<f64>,
    /// Strata's counters when the phase ended, counted since the store was opened (write stalls
    /// explain a high p99 of the write phases).
    pub engine_stats: serde_json::Value,
    /// Which trial of its phase and thread count this was (`DocsSpec::trials` above 1), from 0;
    /// a write phase's trial ran on its own fresh copy of the loaded store.
    #[serde(default)]
    pub trial: Option<u32>,
}

/// One interval line, reduced to what plots need.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalPoint {
    /// Run the line belongs to.
    pub run_id: String,
    /// Engine name.
    pub engine: String,
    /// Workload name.
    pub workload: String,
    /// Partitions of the run.
    pub partitions: u64,
    /// Client threads of the run.
    pub threads: u64,
    /// Seconds since the run started.
    pub elapsed_s: f64,
    /// Operations in the interval.
    pub ops: u64,
    /// Bytes of files at the end of the interval.
    pub file_size_bytes: u64,
}

/// A parsed line.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// A stats line.
    Interval(IntervalPoint),
    /// A mixed-workload result.
    Summary(Box<RunRecord>),
    /// A read-only result.
    Readonly(Box<ReadonlyRecord>),
    /// A step of the startup benchmark.
    Startup(Box<StartupRecord>),
    /// A line of another kind (kept for forward compatibility, ignored by the report).
    Other,
}

/// One stats line of the document benchmarks (`docsStats`), reduced to what plots need.
#[derive(Debug, Clone, PartialEq)]
pub struct DocsStatsPoint {
    /// Run the line belongs to.
    pub run_id: String,
    /// `load`, or the phase's name (`get`, `get-path`, `update`, `increment`).
    pub phase: String,
    /// Client threads of the phase (the load: its writer threads).
    pub threads: u64,
    /// Block compression of the store (`none`, `lz4`).
    pub compression: String,
    /// Seconds since the load or phase started.
    pub elapsed_s: f64,
    /// Documents written (load) or operations done (phases) since it started.
    pub count: u64,
    /// Bytes the store occupied on disk.
    pub size_bytes: u64,
}

/// A line of the document benchmarks, as the report reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum DocsLine {
    /// A stats line of the load or of a phase.
    Stats(DocsStatsPoint),
    /// A load's results.
    Load(Box<DocsLoadRecord>),
    /// One phase's results at one thread count.
    Ops(Box<DocsOpsRecord>),
}

/// A line as the report reads it: the [`Line`] every reader sees, and what `Line` leaves out.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportLine {
    /// The line.
    pub line: Line,
    /// A summary's `trial`: which run of its spec this was, from 0 (`strata bench matrix
    /// --trials`); `None` for other lines and for runs without trials.
    pub trial: Option<u32>,
    /// A document benchmark line (`line` is then [`Line::Other`]).
    pub docs: Option<DocsLine>,
}

/// Numbers the summary lines of repeated specs, for `strata bench matrix --trials`: the first
/// summary of a spec gets `"trial": 0`, the next of the same spec 1, and so on; other lines pass
/// unchanged.
#[derive(Debug, Default)]
pub struct TrialTagger {
    /// Each spec seen (as JSON) and the summaries of it so far.
    seen: Vec<(serde_json::Value, u32)>,
}

impl TrialTagger {
    /// `line`, with `trial` added when it is a summary.
    pub fn tag(&mut self, line: &serde_json::Value) -> serde_json::Value {
        let mut l = line.clone();
        if line.get("kind").and_then(|k| k.as_str()) != Some(KIND_SUMMARY) {
            return l;
        }
        let spec = line.get("spec").cloned().unwrap_or_default();
        let trial = match self.seen.iter_mut().find(|(s, _)| *s == spec) {
            Some((_, n)) => {
                *n += 1;
                *n - 1
            }
            None => {
                self.seen.push((spec, 1));
                0
            }
        };
        l["trial"] = trial.into();
        l
    }
}

/// Where a run's JSON lines go (a JSONL file, stdout, a test's vector).
pub type Sink<'a> = &'a mut dyn FnMut(&serde_json::Value) -> Result<()>;

/// Serialises a record for a sink.
pub fn to_value<T: Serialize>(record: &T) -> Result<serde_json::Value> {
    serde_json::to_value(record).map_err(|e| Error::Json {
        context: "encoding a result".into(),
        source: e,
    })
}

/// Tags a stats line with its run so it can be told apart in a shared file.
pub fn tag_interval(line: &serde_json::Value, run_id: &str, spec: &BenchSpec) -> serde_json::Value {
    let mut l = line.clone();
    l["kind"] = KIND_INTERVAL.into();
    l["runId"] = run_id.into();
    l["engine"] = spec.engine.engine.name().into();
    l["workload"] = spec.run.workload.name().into();
    l["partitions"] = (spec.engine.partitions as u64).into();
    l["threads"] = (spec.run.threads as u64).into();
    l
}

/// Parses one JSON line.
pub fn parse_line(text: &str) -> std::result::Result<Line, serde_json::Error> {
    line_of(serde_json::from_str(text)?)
}

/// Parses one JSON line as the report reads it: also a summary's trial and the document
/// benchmarks' lines.
pub fn parse_report_line(text: &str) -> std::result::Result<ReportLine, serde_json::Error> {
    let v: serde_json::Value = serde_json::from_str(text)?;
    let u = |k: &str| v.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
    let s = |k: &str| {
        v.get(k)
            .and_then(|x| x.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let kind = v.get("kind").and_then(|k| k.as_str());
    let trial = match kind {
        Some(KIND_SUMMARY) => v
            .get("trial")
            .and_then(|t| t.as_u64())
            .and_then(|t| u32::try_from(t).ok()),
        _ => None,
    };
    let docs = match kind {
        Some(KIND_DOCS_STATS) => Some(DocsLine::Stats(DocsStatsPoint {
            run_id: s("runId"),
            phase: s("phase"),
            threads: u("threads"),
            compression: s("compression"),
            elapsed_s: u("time") as f64 / 1e9,
            // The load counts documents written, the phases operations.
            count: if s("phase") == "load" {
                u("writes")
            } else {
                u("ops")
            },
            size_bytes: u("size"),
        })),
        Some(KIND_DOCS_LOAD) => Some(DocsLine::Load(Box::new(serde_json::from_value(v.clone())?))),
        Some(KIND_DOCS_OPS) => Some(DocsLine::Ops(Box::new(serde_json::from_value(v.clone())?))),
        _ => None,
    };
    Ok(ReportLine {
        line: line_of(v)?,
        trial,
        docs,
    })
}

/// The [`Line`] of a parsed JSON value.
fn line_of(v: serde_json::Value) -> std::result::Result<Line, serde_json::Error> {
    Ok(match v.get("kind").and_then(|k| k.as_str()) {
        Some(KIND_SUMMARY) => Line::Summary(Box::new(serde_json::from_value(v)?)),
        Some(KIND_READONLY) => Line::Readonly(Box::new(serde_json::from_value(v)?)),
        Some(KIND_STARTUP) => Line::Startup(Box::new(serde_json::from_value(v)?)),
        Some(KIND_INTERVAL) => {
            let u = |k: &str| v.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
            let s = |k: &str| {
                v.get(k)
                    .and_then(|x| x.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            Line::Interval(IntervalPoint {
                run_id: s("runId"),
                engine: s("engine"),
                workload: s("workload"),
                partitions: u("partitions"),
                threads: u("threads"),
                elapsed_s: u("nanoTime") as f64 / 1e9,
                ops: u("put") + u("delete") + u("get"),
                file_size_bytes: u("fileSize"),
            })
        }
        _ => Line::Other,
    })
}

/// Reads every line of a JSONL file; a bad line is an error naming the file and line number.
pub fn read_jsonl(path: &Path) -> Result<Vec<Line>> {
    read_lines(path, parse_line)
}

/// Reads every line of a JSONL file as the report reads it ([`parse_report_line`]); a bad line
/// is an error naming the file and line number.
pub fn read_report_jsonl(path: &Path) -> Result<Vec<ReportLine>> {
    read_lines(path, parse_report_line)
}

fn read_lines<T>(
    path: &Path,
    parse: fn(&str) -> std::result::Result<T, serde_json::Error>,
) -> Result<Vec<T>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io("opening", path, e))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| Error::io("reading", path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(parse(&line).map_err(|e| Error::Json {
            context: format!("{} line {}", path.display(), i + 1),
            source: e,
        })?);
    }
    Ok(out)
}

/// A run id that sorts by time and says what ran: `1700000000000-strata-balanced-p4-t2`.
pub fn run_id(
    started_unix_ms: u64,
    engine: Engine,
    what: &str,
    partitions: usize,
    threads: usize,
) -> String {
    format!("{started_unix_ms}-{engine}-{what}-p{partitions}-t{threads}")
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn trials_number_the_summaries_of_each_spec() {
        let summary = |threads: u64| serde_json::json!({"kind": "summary", "runId": "r", "spec": {"threads": threads}});
        let mut tagger = TrialTagger::default();
        let interval = serde_json::json!({"kind": "interval", "runId": "r"});
        assert_eq!(
            tagger.tag(&interval),
            interval,
            "only summaries are numbered"
        );
        let trials: Vec<serde_json::Value> = [1, 2, 1, 1, 2]
            .into_iter()
            .map(|t| tagger.tag(&summary(t))["trial"].clone())
            .collect();
        assert_eq!(trials, [0, 0, 1, 2, 1].map(serde_json::Value::from));
    }

    #[test]
    fn report_lines_carry_trials_and_document_lines() {
        let l = parse_report_line(r#"{"kind":"docsStats","runId":"r","phase":"load","threads":2,"compression":"none","time":2000000000,"writes":77,"size":5}"#).unwrap();
        assert_eq!(l.line, Line::Other);
        assert_eq!(
            l.docs,
            Some(DocsLine::Stats(DocsStatsPoint {
                run_id: "r".into(),
                phase: "load".into(),
                threads: 2,
                compression: "none".into(),
                elapsed_s: 2.0,
                count: 77,
                size_bytes: 5,
            }))
        );
        let l = parse_report_line(r#"{"kind":"docsStats","runId":"r","phase":"get","threads":2,"compression":"none","time":1000000000,"ops":9,"size":5}"#).unwrap();
        assert!(matches!(l.docs, Some(DocsLine::Stats(p)) if p.count == 9));
    }

    #[test]
    fn a_summary_trial_reaches_the_report_and_other_readers_ignore_it() {
        let record = RunRecord {
            kind: KIND_SUMMARY.into(),
            run_id: "1-strata-balanced-p4-t2".into(),
            started_unix_ms: 1,
            machine: "test".into(),
            isolated: true,
            spec: BenchSpec {
                engine: crate::spec::EngineSpec::new(Engine::Strata),
                run: crate::spec::RunSpec::seed_defaults(crate::spec::Workload::Balanced),
            },
            summary: RunSummary::default(),
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
        let tagged = TrialTagger::default().tag(&to_value(&record).unwrap());
        let text = tagged.to_string();
        let l = parse_report_line(&text).unwrap();
        assert_eq!(l.trial, Some(0));
        assert_eq!(l.line, Line::Summary(Box::new(record.clone())));
        assert_eq!(l.docs, None);
        assert_eq!(parse_line(&text).unwrap(), Line::Summary(Box::new(record)));
    }
}
