//! The startup benchmark: how long opening a store of N keys takes, and how much memory the
//! opened store holds per key, for Strata's two engines. It answers the log engine's two costs:
//! every key lives in an in-memory index (bytes per key), and that index is rebuilt at every
//! open, from hint files where a merge wrote them, else by reading every segment.
//!
//! Steps, each in a process of its own when the runner isolates runs (so resident memory is the
//! store's alone): `build` loads `keys` random keys from `load_threads` threads and closes;
//! `open after-load` reopens (log engine: every segment is scanned, none has a hint yet; LSM: the
//! write-ahead logs of unflushed memtables are replayed); `merge` runs a full compaction (log
//! engine: a merge that writes a hint file per segment); `open after-merge` reopens from hints;
//! then, for the log engine, the hint files are deleted and `open hints-removed` reopens by
//! scanning the merged segments. Every open is measured with a cold page cache first (when the
//! kernel lets this process drop it) and then warm, and checks a sample of keys by reading them.
//!
//! This module runs one step ([`step_in_process`]); the runner (`Runner::startup`) runs them in
//! order, each where the runner's isolation says.

use std::path::Path;
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::dir::{dir_bytes, fresh_dir};
use crate::error::{Error, Result};
use crate::keys::{key_from_hash, mix, ValuePool};
use crate::record::{to_value, unix_ms, Sink, StartupRecord, KIND_STARTUP};
use crate::spec::StartupSpec;
use crate::store::{open_store, BenchStore};
use crate::sys;

/// File suffix of the log engine's hint files (`strata::log`), deleted for `hints-removed`.
const HINT_SUFFIX: &str = ".hint";

/// One step of the startup benchmark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StartupStep {
    /// Load the keys into a fresh directory and close.
    Build,
    /// Open, compact (log engine: merge, writing hint files) and close.
    Merge,
    /// Open the directory as it is, measure, read a sample, close.
    Open {
        /// What state the directory is in: `after-load`, `after-merge`, `hints-removed`.
        state: String,
        /// Drop the page cache first.
        cold: bool,
    },
}

/// A one-line description of a record for the terminal.
pub fn one_line(r: &StartupRecord) -> String {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    match r.step.as_str() {
        "open" => format!(
            "{} open {} ({}): {:.2} s, +{:.0} MiB resident ({} B/key), index estimate {} B/key, {}/{} sampled keys found",
            r.spec.engine.engine,
            r.state,
            if r.cold_cache { "cold cache" } else { "warm cache" },
            r.seconds,
            r.rss_after_bytes
                .zip(r.rss_before_bytes)
                .map_or(0.0, |(a, b)| mib(a.saturating_sub(b))),
            r.rss_bytes_per_key
                .map_or_else(|| "-".into(), |v| format!("{v:.0}")),
            r.index_bytes
                .filter(|_| r.spec.keys > 0)
                .map_or_else(|| "-".into(), |b| format!("{:.0}", b as f64 / r.spec.keys as f64)),
            r.sample_found,
            r.sample_reads
        ),
        _ => format!(
            "{} {}: {:.1} s, {:.0} MiB on disk, {} hint files",
            r.spec.engine.engine,
            r.step,
            r.seconds,
            mib(r.disk_bytes),
            r.hint_files
        ),
    }
}

/// Runs one step in this process.
pub fn step_in_process(
    spec: &StartupSpec,
    step: &StartupStep,
    run_id: &str,
    dir: &Path,
    isolated: bool,
    sink: Sink<'_>,
) -> Result<StartupRecord> {
    spec.validate()?;
    let started_unix_ms = unix_ms();
    let mut record = StartupRecord {
        kind: KIND_STARTUP.into(),
        run_id: run_id.to_string(),
        started_unix_ms,
        machine: sys::machine_summary(),
        isolated,
        spec: spec.clone(),
        step: String::new(),
        state: String::new(),
        cold_cache: false,
        seconds: 0.0,
        disk_bytes: 0,
        hint_files: 0,
        rss_before_bytes: None,
        rss_after_bytes: None,
        rss_bytes_per_key: None,
        index_bytes: None,
        index_keys: None,
        sample_reads: 0,
        sample_found: 0,
        peak_rss_bytes: None,
        load_avg_1m: None,
    };
    match step {
        StartupStep::Build => {
            record.step = "build".into();
            fresh_dir(dir)?;
            let store = open_store(&spec.engine, dir)?;
            let t0 = Instant::now();
            load(&*store, spec)?;
            record.seconds = t0.elapsed().as_secs_f64();
            store.close()?;
        }
        StartupStep::Merge => {
            record.step = "merge".into();
            let store = open_store(&spec.engine, dir)?;
            let t0 = Instant::now();
            store.compact()?;
            record.seconds = t0.elapsed().as_secs_f64();
            store.close()?;
        }
        StartupStep::Open { state, cold } => {
            record.step = "open".into();
            record.state = state.clone();
            record.cold_cache = *cold && sys::drop_page_cache();
            record.rss_before_bytes = sys::rss_bytes();
            let t0 = Instant::now();
            let store = open_store(&spec.engine, dir)?;
            record.seconds = t0.elapsed().as_secs_f64();
            record.rss_after_bytes = sys::rss_bytes();
            record.rss_bytes_per_key = record
                .rss_after_bytes
                .zip(record.rss_before_bytes)
                .map(|(a, b)| a.saturating_sub(b) as f64 / spec.keys as f64);
            if let Some(stats) = store.engine_stats() {
                let field = |k: &str| stats.get(k).and_then(|v| v.as_u64());
                record.index_keys = field("indexKeys").filter(|&n| n > 0);
                record.index_bytes = field("indexBytes").filter(|_| record.index_keys.is_some());
            }
            let mut rng = SmallRng::seed_from_u64(spec.seed ^ 0x5a5a);
            let mut key = vec![0u8; spec.key_bytes];
            for _ in 0..spec.sample_reads {
                key_from_hash(mix(rng.gen_range(0..spec.keys)), &mut key);
                record.sample_reads += 1;
                if store.get(&key)? {
                    record.sample_found += 1;
                }
            }
            store.close()?;
            if record.sample_found != record.sample_reads {
                return Err(Error::Invalid(format!(
                    "{} after {state}: only {} of {} sampled keys were found",
                    spec.engine.engine, record.sample_found, record.sample_reads
                )));
            }
        }
    }
    record.disk_bytes = dir_bytes(dir);
    record.hint_files = count_hint_files(dir)?;
    record.peak_rss_bytes = sys::peak_rss_bytes();
    record.load_avg_1m = sys::load_avg_1m();
    sink(&to_value(&record)?)?;
    Ok(record)
}

/// Loads keys `0..spec.keys` (in hash order, i.e. random) from `spec.load_threads` threads.
fn load(store: &dyn BenchStore, spec: &StartupSpec) -> Result<()> {
    let pool = ValuePool::seeded(spec.value_bytes, spec.seed);
    let threads = spec.load_threads as u64;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let pool = &pool;
                scope.spawn(move || -> Result<()> {
                    let mut key = vec![0u8; spec.key_bytes];
                    let mut i = t;
                    while i < spec.keys {
                        let h = mix(i);
                        key_from_hash(h, &mut key);
                        store.put(&key, pool.value(h))?;
                        i += threads;
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .map_err(|_| Error::Invalid("a loader thread panicked".into()))?
        })
    })
}

/// Files under `dir` (recursively) whose name ends in `.hint`.
fn hint_files(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("listing", &d, e)),
        };
        for e in entries {
            let e = e.map_err(|e| Error::io("listing", &d, e))?;
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(HINT_SUFFIX))
            {
                out.push(path);
            }
        }
    }
    Ok(out)
}

fn count_hint_files(dir: &Path) -> Result<u64> {
    Ok(hint_files(dir)?.len() as u64)
}

/// Deletes every hint file under `dir`; returns how many there were.
pub fn remove_hint_files(dir: &Path) -> Result<u64> {
    let files = hint_files(dir)?;
    for f in &files {
        std::fs::remove_file(f).map_err(|e| Error::io("removing", f, e))?;
    }
    Ok(files.len() as u64)
}
