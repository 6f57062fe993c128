//! `strata bench`: the front end of the `strata-bench` harness.
//!
//! - `run` (also plain `strata bench ...`): the mixed workloads (PUT-, GET-, DELETE-heavy,
//!   balanced) the partitioned LSM store was originally measured with, on one engine, one JSON
//!   line per interval and a summary line per run;
//! - `compare`: the same workloads on Strata and each peer, each in a child process of its own,
//!   then a table with ratios to Strata;
//! - `matrix`: partitions x threads per workload;
//! - `readonly`: the read-only benchmark (after the original read-only sorted-file store with a
//!   sparse index: build a data set, then random reads);
//! - `startup`: open time and memory per key of Strata's engines (log engine with and without
//!   hint files);
//! - `docs`: the document benchmarks, after the original JSON document store's: load synthetic
//!   Reddit comments (once per compression setting), then GET, partial GET, the original's update
//!   (GET, change, PUT) and the atomic increment per thread count;
//! - `report`: PNG plots and an index.html from JSONL results;
//! - `child` (hidden): runs one job for `compare`/`matrix`/`readonly`/`docs` and writes its lines
//!   to stdout.
//!
//! Peers (RocksDB, fjall, sled) exist when the binary is built with
//! `--features strata-bench/peers` (see BENCHMARKS.md).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use strata_bench::docs::{prepare_input, DocsResult};
use strata_bench::readonly::ReadPoint;
use strata_bench::spec::{parse_bytes, parse_list};
use strata_bench::{
    compare, matrix, report, BenchSpec, CompressionSpec, DocsInput, DocsPhase, DocsSpec, Engine,
    EngineSpec, Isolation, ReadonlySpec, RunSpec, Runner, StartupSpec, SyncSpec, Workload,
};

/// `strata bench [run|compare|matrix|readonly|report] ...`
#[derive(clap::Args, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    // Boxed: the options are many, and `BenchArgs` sits in the CLI's command enum.
    #[command(subcommand)]
    command: Option<Box<BenchCommand>>,
    /// Without a subcommand: the same as `strata bench run`.
    #[command(flatten)]
    run: Box<RunArgs>,
}

#[derive(clap::Subcommand, Clone)]
enum BenchCommand {
    /// Run workloads on one engine, one after another (fresh data directory per run).
    Run(RunArgs),
    /// Run the same workloads on Strata and each peer in turn and print a comparison table.
    Compare(CompareArgs),
    /// Run a partitions x threads grid per workload.
    Matrix(MatrixArgs),
    /// Build a read-only data set and read random keys from it.
    Readonly(ReadonlyArgs),
    /// Load N keys, then time reopening (log engine: from segments, from hint files) and
    /// measure resident memory per key.
    Startup(StartupArgs),
    /// Load JSON documents, then GET, partial GET and update them by id.
    Docs(DocsArgs),
    /// Draw PNG plots and an index.html from JSONL result files.
    Report(ReportArgs),
    /// Run one job given as JSON and write its lines to stdout (started by the other modes).
    #[command(hide = true)]
    Child {
        /// The job, as JSON.
        job: String,
    },
}

#[derive(clap::Args, Clone)]
struct WorkloadArgs {
    /// put-heavy, get-heavy, delete-heavy, balanced (comma-separated), or all.
    #[arg(long, default_value = "all")]
    workload: String,
    /// Share of GET/DELETE keys drawn from keys written before.
    #[arg(long, default_value_t = 0.5)]
    known_key_rate: f64,
    /// Keys are drawn from this many possible keys.
    #[arg(long, default_value_t = 100_000_000)]
    key_space: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 1024)]
    value_size: usize,
    /// Client threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Seconds per run.
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// Seconds between stats lines.
    #[arg(long, default_value_t = 10)]
    interval: u64,
    /// Seed of the key and value generators.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Before each timed run, bulk-load every key of the key space (values of --value-size),
    /// so that the store starts at its full size and every GET finds its key.
    #[arg(long)]
    preload: bool,
    /// Drop the kernel's page cache after the preload (needs root; says so when it cannot),
    /// so that a key space larger than memory is read from the disk.
    #[arg(long)]
    drop_page_cache: bool,
}

impl WorkloadArgs {
    fn workloads(&self) -> anyhow::Result<Vec<Workload>> {
        Ok(Workload::parse_list(&self.workload)?)
    }

    fn base(&self) -> RunSpec {
        RunSpec {
            workload: Workload::Balanced,
            known_key_rate: self.known_key_rate,
            key_space: self.key_space,
            value_bytes: self.value_size,
            threads: self.threads,
            duration: Duration::from_secs(self.duration),
            interval: Duration::from_secs(self.interval.max(1)),
            seed: self.seed,
            preload: self.preload,
            drop_page_cache: self.drop_page_cache,
        }
    }
}

#[derive(clap::Args, Clone)]
struct EngineArgs {
    /// Strata's partition count (peers have none).
    #[arg(long = "bench-partitions", default_value_t = 4)]
    bench_partitions: usize,
    /// never | everyms:N | always (how each engine maps it: BENCHMARKS.md).
    #[arg(long, default_value = "everyms:100")]
    sync: String,
    /// none | lz4 (sled has no LZ4 and stays uncompressed). Default none; `bench docs` takes a
    /// list and defaults to none,lz4.
    #[arg(long)]
    compression: Option<String>,
    /// Same as `--compression lz4` (kept for older scripts).
    #[arg(long)]
    lz4: bool,
    /// Block cache budget of every engine, e.g. 64MiB.
    #[arg(long, default_value = "64MiB")]
    cache_size: String,
    /// Background flush/compaction threads (default: one per core).
    #[arg(long)]
    background_threads: Option<usize>,
    /// Strata only: the index rate, at most this many entries per data block (the sparse index
    /// holds one key per block).
    #[arg(long)]
    index_every: Option<usize>,
    /// Strata only: values of at least this many bytes go to the (uncompressed) value log, e.g.
    /// 512 or 4KiB; `off` keeps every value in the (compressible) table blocks. Default: Strata's.
    #[arg(long)]
    value_log_min: Option<String>,
    /// Strata only: also switch a memtable after this many entries (the original partitioned
    /// store flushed at 1000000), e.g. 1000000. Default: bytes only.
    #[arg(long)]
    memtable_entries: Option<usize>,
    /// Strata's log engine only: seal a segment at this size, 4KiB to 2GiB (default 64MiB).
    #[arg(long)]
    log_segment_bytes: Option<String>,
    /// Strata's log engine only: merge when dead bytes reach this share of the sealed segments,
    /// 0.05 to 0.95 (default 0.5).
    #[arg(long)]
    log_merge_dead_ratio: Option<f64>,
    /// Strata's LSM engine only: compactions move the values of a value log less live than
    /// this, 0.0 to 0.95 (default 0.65); higher keeps less garbage on disk for more rewriting.
    #[arg(long)]
    value_log_live_ratio: Option<f64>,
    /// Strata's LSM engine only: compactions also move the least live logs while the value logs
    /// take more than this many times the bytes their live values need, at least 1.0 (default
    /// 1.12; a large number such as 100 turns the rule off).
    #[arg(long)]
    value_log_space_ratio: Option<f64>,
    /// Strata's LSM engine only: the size target of level 1, e.g. 32MiB (default 256MiB); each
    /// deeper level is ten times larger.
    #[arg(long)]
    level1_bytes: Option<String>,
    /// Strata's LSM engine only: level-0 tables that start a compaction into level 1 (default
    /// 4); the write slowdown and stop counts move up with it.
    #[arg(long)]
    l0_trigger: Option<usize>,
    /// Strata's LSM engine only: switch a memtable once its log holds this many bytes, e.g.
    /// 64MiB (default 128MiB; large values stay in the log, so this, not the memtable's
    /// memory, usually decides when it flushes).
    #[arg(long)]
    memtable_log_bytes: Option<String>,
}

impl EngineArgs {
    fn spec(&self, engine: Engine) -> anyhow::Result<EngineSpec> {
        let mut spec = EngineSpec::new(engine);
        spec.partitions = self.bench_partitions;
        spec.sync = self.sync.parse::<SyncSpec>()?;
        spec.compression = if self.lz4 {
            CompressionSpec::Lz4
        } else {
            self.compression.as_deref().unwrap_or("none").parse()?
        };
        spec.block_cache_bytes = parse_bytes(&self.cache_size)?;
        if let Some(t) = self.background_threads {
            spec.background_threads = t;
        }
        spec.index_every_entries = self.index_every;
        spec.value_log_bytes_min = match self.value_log_min.as_deref() {
            None => None,
            Some("off") => Some(usize::MAX),
            Some(bytes) => Some(usize::try_from(parse_bytes(bytes)?).unwrap_or(usize::MAX)),
        };
        if self.memtable_entries == Some(0) {
            anyhow::bail!("--memtable-entries must be at least 1");
        }
        spec.memtable_entries_max = self.memtable_entries;
        spec.log_segment_bytes_max = match self.log_segment_bytes.as_deref() {
            None => None,
            Some(bytes) => Some(parse_bytes(bytes)?),
        };
        // (The engine checks the ranges of both log settings when it opens.)
        spec.log_merge_dead_ratio = self.log_merge_dead_ratio;
        spec.value_log_live_ratio = self.value_log_live_ratio;
        spec.value_log_space_ratio = self.value_log_space_ratio;
        spec.level1_bytes = match self.level1_bytes.as_deref() {
            None => None,
            Some(bytes) => Some(parse_bytes(bytes)?),
        };
        spec.l0_compaction_trigger = self.l0_trigger;
        spec.memtable_log_bytes = match self.memtable_log_bytes.as_deref() {
            None => None,
            Some(bytes) => Some(parse_bytes(bytes)?),
        };
        Ok(spec)
    }
}

#[derive(clap::Args, Clone)]
struct OutputArgs {
    /// Where runs keep their data (wiped before each run, removed after unless --keep-data).
    #[arg(long, default_value = "./bench-data")]
    bench_dir: PathBuf,
    /// Leave the last run's data behind.
    #[arg(long)]
    keep_data: bool,
    /// Run in this process instead of one child process per run (peak RSS then mixes runs).
    #[arg(long)]
    in_process: bool,
    /// Do not print a progress line per interval to stderr.
    #[arg(long)]
    quiet: bool,
}

impl OutputArgs {
    fn runner(&self, default_isolated: bool) -> anyhow::Result<Runner> {
        let isolation = if default_isolated && !self.in_process {
            Isolation::Child {
                program: std::env::current_exe().context("finding the strata executable")?,
                args: vec!["bench".into(), "child".into()],
            }
        } else {
            Isolation::InProcess
        };
        Ok(Runner {
            isolation,
            dir: self.bench_dir.clone(),
            keep_data: self.keep_data,
            progress: !self.quiet,
        })
    }
}

#[derive(clap::Args, Clone)]
struct RunArgs {
    /// strata, rocksdb, fjall or sled.
    #[arg(long, default_value = "strata")]
    engine: String,
    #[command(flatten)]
    workload: WorkloadArgs,
    #[command(flatten)]
    engine_opts: EngineArgs,
    #[command(flatten)]
    output: OutputArgs,
    /// Append JSON lines here instead of writing them to stdout.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(clap::Args, Clone)]
struct CompareArgs {
    /// Engines to run, Strata first (ratios are to Strata).
    #[arg(long, default_value = "strata,rocksdb,fjall,sled")]
    engines: String,
    #[command(flatten)]
    workload: WorkloadArgs,
    #[command(flatten)]
    engine_opts: EngineArgs,
    #[command(flatten)]
    output: OutputArgs,
    /// Append JSON lines here.
    #[arg(long, default_value = "bench-compare.jsonl")]
    out: PathBuf,
    /// Also write the table (Markdown) here.
    #[arg(long)]
    table: Option<PathBuf>,
}

#[derive(clap::Args, Clone)]
struct MatrixArgs {
    /// Engine (peers have no partition axis).
    #[arg(long, default_value = "strata")]
    engine: String,
    /// Partition counts.
    #[arg(long, default_value = "1,4,8,16")]
    partitions_list: String,
    /// Client thread counts.
    #[arg(long, default_value = "1,4,16,32")]
    threads_list: String,
    /// Runs per cell, all cells' runs in random order (each from an empty directory); a table
    /// of medians and IQRs per cell follows.
    #[arg(long, default_value_t = 1)]
    trials: u32,
    #[command(flatten)]
    workload: WorkloadArgs,
    #[command(flatten)]
    engine_opts: EngineArgs,
    #[command(flatten)]
    output: OutputArgs,
    /// Append JSON lines here.
    #[arg(long, default_value = "bench-matrix.jsonl")]
    out: PathBuf,
}

#[derive(clap::Args, Clone)]
struct ReadonlyArgs {
    /// strata, rocksdb, fjall or sled.
    #[arg(long, default_value = "strata")]
    engine: String,
    /// Bytes of keys and values to load, e.g. 1GiB.
    #[arg(long, default_value = "1GiB")]
    data_size: String,
    /// Bytes per key.
    #[arg(long, default_value_t = 16)]
    key_size: usize,
    /// Bytes per value; a list builds one data set per size (the original read-only store was
    /// measured with 16,256,4096).
    #[arg(long, default_value = "256")]
    value_size: String,
    /// Share of reads for keys that exist; a list reads once per rate (the original read-only
    /// store was measured with 0.1,0.5,0.9).
    #[arg(long, default_value = "0.5")]
    known_key_rate: String,
    /// Reader threads; a list reads once per count.
    #[arg(long, default_value = "2")]
    threads: String,
    /// Seconds per read phase.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Keys per in-memory sorted run while generating (external merge sort beyond that).
    #[arg(long, default_value_t = 8_000_000)]
    sort_run_keys: usize,
    /// How the data goes in: ingest (the engine's bulk load, Strata's `Db::ingest`; engines
    /// without one use puts) or put (write path, then flush and full compaction).
    #[arg(long, default_value = "ingest")]
    load: String,
    /// Seed of the generators.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Trials per read phase (the original ran 10): each reads its own fresh copy of the built
    /// data set, trials in random order; a median and IQR line per phase follows.
    #[arg(long, default_value_t = 1)]
    trials: u32,
    /// Drop the kernel's page cache before each read phase (needs root; says so when it
    /// cannot), so that a data set larger than memory is read from the disk.
    #[arg(long)]
    drop_page_cache: bool,
    #[command(flatten)]
    engine_opts: EngineArgs,
    #[command(flatten)]
    output: OutputArgs,
    /// Append JSON lines here.
    #[arg(long, default_value = "bench-readonly.jsonl")]
    out: PathBuf,
}

#[derive(clap::Args, Clone)]
struct DocsArgs {
    /// Generate this many synthetic Reddit comments (`strata gen comments N --seed S`) as input.
    #[arg(long, default_value_t = 200_000, conflicts_with = "input")]
    docs: u64,
    /// Load this JSON-lines file (`.gz` allowed) instead of generated comments.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Top-level field holding each document's id.
    #[arg(long, default_value = "id")]
    id_field: String,
    /// Loader reader threads (each reads one byte range of the file).
    #[arg(long, default_value_t = 1)]
    readers: usize,
    /// Loader parser/writer threads.
    #[arg(long, default_value_t = 2)]
    writers: usize,
    /// Timed phases after the load: get, get-path, update, increment (comma-separated), all, or
    /// none (load only).
    #[arg(long, default_value = "all")]
    phases: String,
    /// Client thread counts; every phase runs once per count.
    #[arg(long, default_value = "1,2,4,8")]
    threads: String,
    /// Seconds per phase and thread count.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Seconds between stats lines (the original document benchmarks: 1).
    #[arg(long, default_value_t = 1)]
    interval: u64,
    /// Seed of the comment generator and of the id pickers.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Trials per phase and thread count, in random order; each update and increment trial
    /// runs on its own fresh copy (checkpoint) of the loaded store, as the original's did.
    #[arg(long, default_value_t = 1)]
    trials: u32,
    /// Keep the generated input file next to --bench-dir (it is removed at the end otherwise).
    #[arg(long)]
    keep_input: bool,
    #[command(flatten)]
    engine_opts: EngineArgs,
    #[command(flatten)]
    output: OutputArgs,
    /// Append JSON lines here.
    #[arg(long, default_value = "bench-docs.jsonl")]
    out: PathBuf,
}

#[derive(clap::Args, Clone)]
struct StartupArgs {
    /// Engines, one after another: strata (LSM) and/or strata-log.
    #[arg(long, default_value = "strata-log,strata")]
    engines: String,
    /// Keys to load.
    #[arg(long, default_value_t = 10_000_000)]
    keys: u64,
    /// Bytes per key.
    #[arg(long, default_value_t = 16)]
    key_size: usize,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Writer threads while loading (default: one per core).
    #[arg(long)]
    load_threads: Option<usize>,
    /// Also open each state with a cold page cache (drops the whole machine's page cache; needs
    /// root).
    #[arg(long)]
    drop_caches: bool,
    /// Keys read back after each open (every one must be found).
    #[arg(long, default_value_t = 10_000)]
    sample_reads: u64,
    /// Seed of the generators.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[command(flatten)]
    engine_opts: EngineArgs,
    #[command(flatten)]
    output: OutputArgs,
    /// Append JSON lines here.
    #[arg(long, default_value = "bench-startup.jsonl")]
    out: PathBuf,
}

#[derive(clap::Args, Clone)]
struct ReportArgs {
    /// JSONL result files.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Directory for the PNGs and index.html.
    #[arg(long, default_value = "bench-report")]
    out: PathBuf,
    /// Draw the timelines of at most this many runs (the latest).
    #[arg(long, default_value_t = report::TIMELINES_MAX)]
    timelines: usize,
    /// Draw timelines only for runs whose id contains this, e.g. `put-heavy` or `strata-`.
    #[arg(long)]
    timelines_matching: Option<String>,
}

/// Runs `strata bench`.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    match args.command.as_deref() {
        None => run_mode(&args.run),
        Some(BenchCommand::Run(a)) => run_mode(a),
        Some(BenchCommand::Compare(a)) => compare_mode(a),
        Some(BenchCommand::Matrix(a)) => matrix_mode(a),
        Some(BenchCommand::Readonly(a)) => readonly_mode(a),
        Some(BenchCommand::Startup(a)) => startup_mode(a),
        Some(BenchCommand::Docs(a)) => docs_mode(a),
        Some(BenchCommand::Report(a)) => report_mode(a),
        Some(BenchCommand::Child { job }) => {
            strata_bench::runner::child_main(std::slice::from_ref(job))?;
            Ok(())
        }
    }
}

/// A sink that appends JSON lines to `path`, or writes them to stdout.
fn jsonl_writer(
    path: Option<&PathBuf>,
) -> anyhow::Result<impl FnMut(&serde_json::Value) -> strata_bench::Result<()>> {
    let (mut out, name): (Box<dyn Write>, PathBuf) = match path {
        Some(p) => (
            Box::new(std::io::BufWriter::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .with_context(|| format!("opening {}", p.display()))?,
            )),
            p.clone(),
        ),
        None => (Box::new(std::io::stdout()), PathBuf::from("stdout")),
    };
    Ok(move |v: &serde_json::Value| {
        writeln!(out, "{v}")
            .and_then(|()| out.flush())
            .map_err(|e| strata_bench::Error::io("writing results to", name.clone(), e))
    })
}

fn run_mode(a: &RunArgs) -> anyhow::Result<()> {
    let engine: Engine = a.engine.parse()?;
    let engine = a.engine_opts.spec(engine)?;
    let runner = a.output.runner(false)?;
    let mut sink = jsonl_writer(a.out.as_ref())?;
    for workload in a.workload.workloads()? {
        let spec = BenchSpec {
            engine: engine.clone(),
            run: RunSpec {
                workload,
                ..a.workload.base()
            },
        };
        let record = runner.run(&spec, &mut sink)?;
        eprintln!("{}", compare::one_line(&record));
    }
    Ok(())
}

fn compare_mode(a: &CompareArgs) -> anyhow::Result<()> {
    let engines: Vec<Engine> = parse_list(&a.engines)?;
    if let Some(missing) = engines.iter().find(|e| !e.compiled_in()) {
        anyhow::bail!(
            "{missing} is not compiled into this binary: build with \
             `ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu cargo build --release -p strata-cli \
             --features strata-bench/peers` (see BENCHMARKS.md), or pass --engines strata"
        );
    }
    let specs: Vec<EngineSpec> = engines
        .iter()
        .map(|&e| a.engine_opts.spec(e))
        .collect::<anyhow::Result<_>>()?;
    let runner = a.output.runner(true)?;
    let mut sink = jsonl_writer(Some(&a.out))?;
    let records = compare::compare(
        &runner,
        &specs,
        &a.workload.workloads()?,
        &a.workload.base(),
        &mut sink,
    )?;
    let table = report::format_table(&records);
    println!("{table}");
    if let Some(p) = &a.table {
        std::fs::write(p, &table).with_context(|| format!("writing {}", p.display()))?;
    }
    eprintln!("results appended to {}", a.out.display());
    Ok(())
}

fn matrix_mode(a: &MatrixArgs) -> anyhow::Result<()> {
    let engine = a.engine_opts.spec(a.engine.parse()?)?;
    let specs = matrix::matrix_specs(
        &engine,
        &a.workload.base(),
        &a.workload.workloads()?,
        &parse_list(&a.partitions_list)?,
        &parse_list(&a.threads_list)?,
    );
    let specs = matrix::with_trials(specs, a.trials, a.workload.seed);
    let runner = a.output.runner(true)?;
    let mut sink = jsonl_writer(Some(&a.out))?;
    // With trials, each summary says which run of its cell it was, so the report tells the
    // trials of one matrix from later runs of the same cell.
    let mut tagger = strata_bench::record::TrialTagger::default();
    let mut tagged = |v: &serde_json::Value| {
        if a.trials > 1 {
            sink(&tagger.tag(v))
        } else {
            sink(v)
        }
    };
    let records = matrix::matrix(&runner, &specs, &mut tagged)?;
    if a.trials > 1 {
        println!("| workload | partitions | threads | runs | median ops/s | IQR ops/s |");
        println!("|---|---:|---:|---:|---:|---:|");
        for ((workload, partitions, threads), n, (q1, median, q3)) in
            matrix::cell_quartiles(&records)
        {
            println!(
                "| {workload} | {partitions} | {threads} | {n} | {median:.0} | {q1:.0}-{q3:.0} |"
            );
        }
    }
    eprintln!("{} runs appended to {}", specs.len(), a.out.display());
    Ok(())
}

fn readonly_mode(a: &ReadonlyArgs) -> anyhow::Result<()> {
    let engine = a.engine_opts.spec(a.engine.parse()?)?;
    let rates: Vec<f64> = parse_list(&a.known_key_rate)?;
    let threads: Vec<usize> = parse_list(&a.threads)?;
    let reads: Vec<ReadPoint> = rates
        .iter()
        .flat_map(|&r| {
            threads.iter().map(move |&t| ReadPoint {
                known_key_rate: r,
                threads: t,
            })
        })
        .collect();
    let runner = a.output.runner(true)?;
    let mut sink = jsonl_writer(Some(&a.out))?;
    for value_bytes in parse_list::<usize>(&a.value_size)? {
        let spec = ReadonlySpec {
            engine: engine.clone(),
            data_bytes: parse_bytes(&a.data_size)?,
            key_bytes: a.key_size,
            value_bytes,
            known_key_rate: rates[0],
            threads: threads[0],
            duration: Duration::from_secs(a.duration),
            sort_run_keys: a.sort_run_keys,
            bulk_load: match a.load.as_str() {
                "ingest" => true,
                "put" => false,
                other => anyhow::bail!("--load must be ingest or put, not {other:?}"),
            },
            seed: a.seed,
            trials: a.trials,
            drop_page_cache: a.drop_page_cache,
        };
        for r in runner.readonly(&spec, &reads, &mut sink)? {
            println!(
                "{} value {} B, {} keys, known-key rate {:.2}, {} threads: {:.0} reads/s, p50 {} us, p99 {} us, found {:.1}%",
                r.spec.engine.engine,
                r.spec.value_bytes,
                r.keys,
                r.spec.known_key_rate,
                r.spec.threads,
                r.reads_per_sec,
                r.p50_us,
                r.p99_us,
                if r.reads > 0 { r.found as f64 * 100.0 / r.reads as f64 } else { 0.0 }
            );
        }
    }
    eprintln!("results appended to {}", a.out.display());
    Ok(())
}

fn startup_mode(a: &StartupArgs) -> anyhow::Result<()> {
    let runner = a.output.runner(true)?;
    let mut sink = jsonl_writer(Some(&a.out))?;
    for engine in parse_list::<Engine>(&a.engines)? {
        let spec = StartupSpec {
            engine: a.engine_opts.spec(engine)?,
            keys: a.keys,
            key_bytes: a.key_size,
            value_bytes: a.value_size,
            load_threads: a.load_threads.unwrap_or_else(strata_bench::sys::cores),
            drop_caches: a.drop_caches,
            sample_reads: a.sample_reads,
            seed: a.seed,
        };
        // Each step prints its line to stderr as it finishes.
        runner.startup(&spec, &mut sink)?;
    }
    eprintln!("results appended to {}", a.out.display());
    Ok(())
}

fn docs_mode(a: &DocsArgs) -> anyhow::Result<()> {
    let compressions: Vec<CompressionSpec> = if a.engine_opts.lz4 {
        vec![CompressionSpec::Lz4]
    } else {
        parse_list(a.engine_opts.compression.as_deref().unwrap_or("none,lz4"))?
    };
    let input = match &a.input {
        Some(path) => DocsInput::File { path: path.clone() },
        None => DocsInput::Generated {
            docs: a.docs,
            seed: a.seed,
        },
    };
    // `--compression` is a list here, one run per entry: the rest of the engine settings are shared.
    let mut engine_opts = a.engine_opts.clone();
    engine_opts.compression = None;
    engine_opts.lz4 = false;
    let base = DocsSpec {
        engine: engine_opts.spec(Engine::Strata)?,
        input: input.clone(),
        id_field: a.id_field.clone(),
        readers: a.readers,
        writers: a.writers,
        phases: DocsPhase::parse_list(&a.phases)?,
        threads: parse_list(&a.threads)?,
        duration: Duration::from_secs(a.duration),
        interval: Duration::from_secs(a.interval.max(1)),
        seed: a.seed,
        trials: a.trials,
    };
    base.validate()?;
    let runner = a.output.runner(true)?;
    if let DocsInput::Generated { docs, seed } = &input {
        eprintln!("generating {docs} comments (seed {seed})");
    }
    let input_file = prepare_input(&input, &a.output.bench_dir)?;
    let mut sink = jsonl_writer(Some(&a.out))?;
    let mut outcome = Ok(());
    for compression in compressions {
        let spec = DocsSpec {
            engine: EngineSpec {
                compression,
                ..base.engine.clone()
            },
            ..base.clone()
        };
        match runner.docs(&spec, &input_file, &mut sink) {
            Ok(result) => print_docs(&result),
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    if !a.keep_input {
        input_file.remove()?;
    }
    outcome?;
    eprintln!("results appended to {}", a.out.display());
    Ok(())
}

fn print_docs(r: &DocsResult) {
    let l = &r.load;
    let compression = l.spec.engine.compression.name();
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "docs, compression {compression}: loaded {} docs in {:.1} s: {:.0} docs/s, {:.1} MB/s; \
         JSON {:.1} MB, encoded {:.1} MB ({:.1} %), on disk {:.1} MB after flush ({:.1} %), \
         {:.1} MB after compaction ({:.1} %)",
        l.docs_loaded,
        l.load_seconds,
        l.docs_per_sec,
        l.json_mb_per_sec,
        mb(l.json_bytes),
        mb(l.encoded_bytes),
        l.encoded_to_json_ratio * 100.0,
        mb(l.disk_bytes_flushed),
        l.flushed_to_json_ratio * 100.0,
        mb(l.disk_bytes_compacted),
        l.stored_to_json_ratio * 100.0,
    );
    for o in &r.ops {
        let check = match (o.phase, o.lost_updates) {
            (DocsPhase::Increment, Some(0)) => format!(
                ", check: {} increments = score sum {} -> {}: exact",
                o.ops,
                o.score_sum_before.unwrap_or_default(),
                o.score_sum_after.unwrap_or_default()
            ),
            (_, Some(lost)) => format!(", {lost} of {} updates lost", o.ops),
            _ => String::new(),
        };
        println!(
            "  {:<9} {:>2} threads: {:>8.0} ops/s, p50 {} us, p99 {} us{check}",
            o.phase.name(),
            o.threads,
            o.ops_per_sec,
            o.p50_us,
            o.p99_us
        );
    }
}

fn report_mode(a: &ReportArgs) -> anyhow::Result<()> {
    let written = report::write_report(
        &a.inputs,
        &a.out,
        &report::TimelineSelection {
            max: a.timelines,
            matching: a.timelines_matching.clone(),
        },
    )?;
    for p in &written {
        println!("{}", p.display());
    }
    Ok(())
}
