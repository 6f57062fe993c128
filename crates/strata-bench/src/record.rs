//! The JSON lines the harness writes and the report reads back. Every line is one object with a
//! `kind`:
//!
//! - `interval`: the seed's stats line (`nanoTime, put, delete, deleteFound, get, getFound,
//!   fileSize`, counts per interval, plus latency percentiles) tagged with `runId, engine,
//!   workload, partitions, threads`;
//! - `summary`: one mixed-workload run: its full [`BenchSpec`] and results ([`RunRecord`]);
//! - `readonly`: one read-only run: its [`ReadonlySpec`] and results ([`ReadonlyRecord`]);
//! - `startup`: one step of the startup benchmark ([`crate::startup::StartupRecord`]);
//! - `docsStats`, `docsLoad`, `docsOps`: the document benchmarks (see [`crate::docs`]); the report
//!   does not draw them and reads them as [`Line::Other`].
//!
//! Lines are parsed through `serde_json::Value` first (internally tagged enums and `flatten` do
//! not mix with the workspace's `arbitrary_precision` numbers).

use std::io::BufRead;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::spec::{BenchSpec, Engine, ReadonlySpec};

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
/// `kind` of a document load's results ([`crate::docs::DocsLoadRecord`]).
pub const KIND_DOCS_LOAD: &str = "docsLoad";
/// `kind` of one document phase's results ([`crate::docs::DocsOpsRecord`]).
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
    /// Bytes of keys and values the clients asked to write (puts: key + value; deletes: key).
    pub user_bytes_written: u64,
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
    Startup(Box<crate::startup::StartupRecord>),
    /// A line of another kind (kept for forward compatibility, ignored by the report).
    Other,
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
    let v: serde_json::Value = serde_json::from_str(text)?;
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
    let file = std::fs::File::open(path).map_err(|e| Error::io("opening", path, e))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| Error::io("reading", path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(parse_line(&line).map_err(|e| Error::Json {
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
