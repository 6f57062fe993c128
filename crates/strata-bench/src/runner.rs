//! Running one benchmark, in this process or in a child process of its own.
//!
//! A run wipes its data directory, opens the engine, runs the workload (or builds and reads the
//! read-only data set), measures what the engine and the operating system report, closes the
//! engine and removes the directory (unless told to keep it). Its JSON lines go to a sink as they
//! happen; the last one is the run's record.
//!
//! With [`Isolation::Child`] the run happens in a child process (`strata bench child JOB` or the
//! `strata-bench-child` binary) that writes those same lines to its stdout, so peak RSS and bytes
//! written belong to one engine alone. The job travels as one JSON argument.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::readonly::ReadPoint;
use crate::record::{
    parse_line, run_id, tag_interval, unix_ms, Line, ReadonlyRecord, RunRecord, KIND_SUMMARY,
};
use crate::spec::{BenchSpec, ReadonlySpec};
use crate::startup::{StartupRecord, StartupSpec, StartupStep};
use crate::store::open_store;
use crate::workload::dir_bytes;
use crate::{readonly, sys, workload};

/// Where runs happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// In this process (peak RSS is reset before each run where the kernel allows, but memory
    /// the allocator kept from earlier runs still counts).
    InProcess,
    /// In a child process per run: `program args... JOB_JSON`.
    Child {
        /// The executable.
        program: PathBuf,
        /// Arguments before the job, e.g. `["bench", "child"]` for the `strata` binary.
        args: Vec<String>,
    },
}

/// One unit of work for a child process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Job {
    /// A mixed-workload run.
    Run {
        /// What to run.
        spec: BenchSpec,
        /// Id for its lines.
        run_id: String,
        /// Data directory (wiped first).
        dir: PathBuf,
        /// Leave the data behind.
        keep_data: bool,
    },
    /// A read-only run.
    Readonly {
        /// What to build (and its default read phase).
        spec: ReadonlySpec,
        /// Read phases over the built data.
        reads: Vec<ReadPoint>,
        /// Id for its lines.
        run_id: String,
        /// Data directory (wiped first).
        dir: PathBuf,
        /// Leave the data behind.
        keep_data: bool,
    },
    /// One step of the startup benchmark (the directory is kept between steps).
    Startup {
        /// What is built and opened.
        spec: StartupSpec,
        /// Which step.
        step: StartupStep,
        /// Id for its line.
        run_id: String,
        /// Data directory.
        dir: PathBuf,
    },
}

/// Where a run's JSON lines go (a JSONL file, stdout, a test's vector).
pub type Sink<'a> = &'a mut dyn FnMut(&serde_json::Value) -> Result<()>;

/// Runs benchmarks one after another with the same isolation and data directory.
#[derive(Debug, Clone)]
pub struct Runner {
    /// In this process or in children.
    pub isolation: Isolation,
    /// Data directory of every run (wiped before each).
    pub dir: PathBuf,
    /// Leave each run's data behind (the next run wipes it anyway).
    pub keep_data: bool,
    /// Print one progress line per interval to stderr.
    pub progress: bool,
}

impl Runner {
    /// Runs one mixed workload.
    pub fn run(&self, spec: &BenchSpec, sink: Sink<'_>) -> Result<RunRecord> {
        let id = run_id(
            unix_ms(),
            spec.engine.engine,
            spec.run.workload.name(),
            spec.engine.partitions,
            spec.run.threads,
        );
        let progress = self.progress;
        let mut sink = |v: &serde_json::Value| {
            if progress {
                print_progress(v);
            }
            sink(v)
        };
        match &self.isolation {
            Isolation::InProcess => {
                run_in_process(spec, &id, &self.dir, self.keep_data, false, &mut sink)
            }
            Isolation::Child { program, args } => {
                let job = Job::Run {
                    spec: spec.clone(),
                    run_id: id.clone(),
                    dir: self.dir.clone(),
                    keep_data: self.keep_data,
                };
                run_child(program, args, &job, &id, &mut sink)?
                    .into_iter()
                    .find_map(|l| match l {
                        Line::Summary(r) => Some(*r),
                        _ => None,
                    })
                    .ok_or_else(|| child_err(&id, "ended without a summary line"))
            }
        }
    }

    /// Builds one read-only data set and runs each read phase of `reads` over it.
    pub fn readonly(
        &self,
        spec: &ReadonlySpec,
        reads: &[ReadPoint],
        sink: Sink<'_>,
    ) -> Result<Vec<ReadonlyRecord>> {
        let id = run_id(
            unix_ms(),
            spec.engine.engine,
            &format!("readonly-v{}", spec.value_bytes),
            spec.engine.partitions,
            spec.threads,
        );
        match &self.isolation {
            Isolation::InProcess => {
                readonly::run_in_process(spec, reads, &id, &self.dir, self.keep_data, false, sink)
            }
            Isolation::Child { program, args } => {
                let job = Job::Readonly {
                    spec: spec.clone(),
                    reads: reads.to_vec(),
                    run_id: id.clone(),
                    dir: self.dir.clone(),
                    keep_data: self.keep_data,
                };
                let records: Vec<ReadonlyRecord> = run_child(program, args, &job, &id, sink)?
                    .into_iter()
                    .filter_map(|l| match l {
                        Line::Readonly(r) => Some(*r),
                        _ => None,
                    })
                    .collect();
                if records.is_empty() {
                    return Err(child_err(&id, "ended without a readonly line"));
                }
                Ok(records)
            }
        }
    }
}

impl Runner {
    /// Runs one step of the startup benchmark on `self.dir` (not wiped, except by `Build`).
    pub fn startup_step(
        &self,
        spec: &StartupSpec,
        step: &StartupStep,
        run_id: &str,
        sink: Sink<'_>,
    ) -> Result<StartupRecord> {
        match &self.isolation {
            Isolation::InProcess => {
                crate::startup::step_in_process(spec, step, run_id, &self.dir, false, sink)
            }
            Isolation::Child { program, args } => {
                let job = Job::Startup {
                    spec: spec.clone(),
                    step: step.clone(),
                    run_id: run_id.to_string(),
                    dir: self.dir.clone(),
                };
                run_child(program, args, &job, run_id, sink)?
                    .into_iter()
                    .find_map(|l| match l {
                        Line::Startup(r) => Some(*r),
                        _ => None,
                    })
                    .ok_or_else(|| child_err(run_id, "ended without a startup line"))
            }
        }
    }
}

fn child_err(run: &str, message: impl Into<String>) -> Error {
    Error::Child {
        run: run.to_string(),
        message: message.into(),
    }
}

fn print_progress(v: &serde_json::Value) {
    if v.get("kind").and_then(|k| k.as_str()) == Some(KIND_SUMMARY) {
        return;
    }
    if let Ok(Line::Interval(p)) = parse_line(&v.to_string()) {
        eprintln!(
            "  {:<8} {:<12} p{:<2} t{:<2} {:>6.1}s {:>9} ops  files {:.2} GiB",
            p.engine,
            p.workload,
            p.partitions,
            p.threads,
            p.elapsed_s,
            p.ops,
            p.file_size_bytes as f64 / (1u64 << 30) as f64
        );
    }
}

/// Removes `dir` and creates it empty.
pub fn fresh_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| Error::io("wiping", dir, e))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io("creating", dir, e))
}

/// Removes a run's data unless it is to be kept.
pub fn finish_dir(dir: &Path, keep_data: bool) -> Result<()> {
    if keep_data || !dir.exists() {
        return Ok(());
    }
    std::fs::remove_dir_all(dir).map_err(|e| Error::io("removing", dir, e))
}

/// Runs one mixed workload in this process.
pub fn run_in_process(
    spec: &BenchSpec,
    run_id: &str,
    dir: &Path,
    keep_data: bool,
    isolated: bool,
    sink: Sink<'_>,
) -> Result<RunRecord> {
    fresh_dir(dir)?;
    let started_unix_ms = unix_ms();
    sys::reset_peak_rss();
    let io_before = sys::io_write_bytes();
    let store = open_store(&spec.engine, dir)?;
    let mut sink_error = None;
    let summary = workload::run(&*store, &spec.run, dir, |line| {
        if sink_error.is_none() {
            if let Err(e) = sink(&tag_interval(line, run_id, spec)) {
                sink_error = Some(e);
            }
        }
    })?;
    if let Some(e) = sink_error {
        return Err(e);
    }
    // Measured when the workload stops, before close: what the user saw during the run.
    let disk_bytes = dir_bytes(dir);
    let write_amplification_engine = store.write_amplification();
    let engine_stats = store.engine_stats();
    let io_write_bytes = match (io_before, sys::io_write_bytes()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let load_avg_1m = sys::load_avg_1m();
    let close_started = Instant::now();
    store.close()?;
    let close_seconds = close_started.elapsed().as_secs_f64();
    let record = RunRecord {
        kind: KIND_SUMMARY.into(),
        run_id: run_id.to_string(),
        started_unix_ms,
        machine: sys::machine_summary(),
        isolated,
        spec: spec.clone(),
        write_amplification_io: io_write_bytes
            .filter(|_| summary.user_bytes_written > 0)
            .map(|b| b as f64 / summary.user_bytes_written as f64),
        summary,
        disk_bytes,
        write_amplification_engine,
        engine_stats,
        io_write_bytes,
        peak_rss_bytes: sys::peak_rss_bytes(),
        close_seconds,
        load_avg_1m,
    };
    sink(&to_value(&record)?)?;
    finish_dir(dir, keep_data)?;
    Ok(record)
}

/// Serialises a record for a sink.
pub fn to_value<T: Serialize>(record: &T) -> Result<serde_json::Value> {
    serde_json::to_value(record).map_err(|e| Error::Json {
        context: "encoding a result".into(),
        source: e,
    })
}

/// Starts `program args... JOB`, passes its lines to `sink`, returns its record lines.
fn run_child(
    program: &Path,
    args: &[String],
    job: &Job,
    run: &str,
    sink: Sink<'_>,
) -> Result<Vec<Line>> {
    let job_json = serde_json::to_string(job).map_err(|e| Error::Json {
        context: format!("encoding job {run}"),
        source: e,
    })?;
    let mut command = Command::new(program);
    if std::env::var_os("RUST_LOG").is_none() {
        // Engines' informational logging would drown the progress lines.
        command.env("RUST_LOG", "warn");
    }
    let mut child = command
        .args(args)
        .arg(job_json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Error::io("starting child benchmark", program, e))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| child_err(run, "no stdout pipe"))?;
    let mut records = Vec::new();
    let mut failure = None;
    for line in BufReader::new(stdout).lines() {
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                failure = Some(child_err(run, format!("reading its output: {e}")));
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let parsed = serde_json::from_str::<serde_json::Value>(&line)
            .map_err(|e| Error::Json {
                context: format!("child {run} wrote {line:?}"),
                source: e,
            })
            .and_then(|v| {
                sink(&v)?;
                parse_line(&line).map_err(|e| Error::Json {
                    context: format!("child {run} line"),
                    source: e,
                })
            });
        match parsed {
            Ok(l @ (Line::Summary(_) | Line::Readonly(_) | Line::Startup(_))) => records.push(l),
            Ok(_) => {}
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if failure.is_some() {
        let _ = child.kill();
    }
    let status = child
        .wait()
        .map_err(|e| Error::io("waiting for child benchmark", program, e))?;
    if let Some(e) = failure {
        return Err(e);
    }
    if !status.success() {
        return Err(child_err(run, format!("exited with {status}")));
    }
    Ok(records)
}

/// The child side: parses the job in `args[0]`, runs it, writes JSON lines to stdout.
pub fn child_main(args: &[String]) -> Result<()> {
    let [job] = args else {
        return Err(Error::Invalid(
            "usage: strata-bench-child JOB_JSON (started by `strata bench compare/matrix`)".into(),
        ));
    };
    let job: Job = serde_json::from_str(job).map_err(|e| Error::Json {
        context: "parsing the job argument".into(),
        source: e,
    })?;
    let stdout = std::io::stdout();
    let mut sink = |v: &serde_json::Value| -> Result<()> {
        let mut out = stdout.lock();
        writeln!(out, "{v}")
            .and_then(|()| out.flush())
            .map_err(|e| Error::io("writing to", "stdout", e))
    };
    match job {
        Job::Run {
            spec,
            run_id,
            dir,
            keep_data,
        } => run_in_process(&spec, &run_id, &dir, keep_data, true, &mut sink).map(|_| ()),
        Job::Readonly {
            spec,
            reads,
            run_id,
            dir,
            keep_data,
        } => readonly::run_in_process(&spec, &reads, &run_id, &dir, keep_data, true, &mut sink)
            .map(|_| ()),
        Job::Startup {
            spec,
            step,
            run_id,
            dir,
        } => crate::startup::step_in_process(&spec, &step, &run_id, &dir, true, &mut sink)
            .map(|_| ()),
    }
}
