//! `strata`: the command-line face of the engine. Every subcommand opens the database in `--dir`
//! (default `./data`), does one job and closes it cleanly.

mod bench_cmd;
mod doc_cmd;
mod kv_cmd;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "strata",
    version,
    about = "Strata: a durable, hash-partitioned LSM key/value and document store"
)]
struct Cli {
    /// Data directory.
    #[arg(long, global = true, default_value = "./data")]
    dir: PathBuf,
    /// Partitions for the data of a new database, which gets one more for the expiry index of
    /// the server's keyspace (an existing one keeps its own count).
    #[arg(long, global = true)]
    partitions: Option<usize>,
    /// Engine for a new database: lsm (ordered, bounded memory) or log (hash index in memory).
    #[arg(long, global = true, value_parser = ["lsm", "log"])]
    engine: Option<String>,
    /// Compression of table blocks written from now on (each block records its own, so a
    /// database may mix them). With lz4, values stay in the compressed tables instead of
    /// value logs.
    #[arg(long, global = true, value_parser = ["none", "lz4"])]
    compression: Option<String>,
    /// Open a store with a damaged log or segment by dropping what follows the damage in that
    /// file (both engines; the warning names file, offset and bytes dropped).
    #[arg(long, global = true)]
    salvage: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Redis protocol (RESP2/RESP3) over TCP.
    Serve(strata_server::ServeArgs),
    /// Store a string (database 0 of the server's keyspace: `redis-cli GET key` reads it).
    Put { key: String, value: String },
    /// Print a string value.
    Get { key: String },
    /// Delete a key (string or document).
    Del { key: String },
    /// Print string keys and values in key order.
    Scan {
        /// Only keys starting with this prefix.
        #[arg(long)]
        prefix: Option<String>,
        /// First key (inclusive).
        #[arg(long)]
        start: Option<String>,
        /// Last key (exclusive).
        #[arg(long)]
        end: Option<String>,
        /// At most this many entries.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Greatest key first (read from the end of the range down).
        #[arg(long)]
        reverse: bool,
    },
    /// Print per-partition statistics.
    Stats,
    /// Bulk-load `key<TAB>value` lines in any order: external merge sort, then table files
    /// written directly (no log, no memtable).
    Ingest {
        /// Input file (`-` for standard input).
        file: PathBuf,
        /// Memory for each sorted run, in MiB.
        #[arg(long, default_value_t = 256)]
        run_mib: usize,
    },
    /// Flush memtables and compact every partition fully.
    Compact,
    /// Write a consistent copy of the store into a new directory (hard links where possible);
    /// it opens as an ordinary store.
    Checkpoint {
        /// Where the copy goes; must not exist yet.
        dest: PathBuf,
    },
    /// Generate synthetic documents as JSON lines.
    Gen(doc_cmd::GenArgs),
    /// Load JSON-lines documents into the document store.
    Load(doc_cmd::LoadArgs),
    /// Run benchmarks: mixed workloads, read-only, startup, documents (fresh data directory per
    /// run).
    Bench(bench_cmd::BenchArgs),
    /// Document store commands.
    Doc {
        #[command(subcommand)]
        command: doc_cmd::DocCommand,
    },
}

/// jemalloc, not glibc's malloc: glibc's dynamic mmap threshold rises to the size of any freed
/// mapped block, so after the first 1 MiB memtable chunk is freed later chunks come from its
/// heaps, which keep flushed memtables' memory resident. Measured with two alternating 120 s
/// PUT_HEAVY runs each (BENCHMARKS.md, "Memory"): peak RSS 359-362 MiB against 450, ops/s
/// 171-172 k against 153-177 k; the server's redis-benchmark lines within noise or faster.
/// The library sets no allocator: an embedding program chooses its own.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = run(Cli::parse()) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

/// Options for the database in `--dir`: an existing database keeps its partition count and
/// engine unless the flags say otherwise (a mismatch is then reported by `Db::open`).
fn options(cli: &Cli) -> strata::Options {
    let mut o = strata::Options::default();
    if let Ok(Some(p)) = strata::Db::existing_partitions(&cli.dir) {
        o.partitions = p;
    }
    if let Ok(Some(e)) = strata::Db::existing_engine(&cli.dir) {
        o.engine = e;
    }
    if let Some(p) = cli.partitions {
        o.partitions = p;
    }
    match cli.engine.as_deref() {
        Some("log") => o.engine = strata::Engine::Log,
        Some("lsm") => o.engine = strata::Engine::Lsm,
        _ => {}
    }
    if cli.compression.as_deref() == Some("lz4") {
        o.compression = strata::Compression::Lz4;
    }
    o.salvage = cli.salvage;
    // Every command works on the server's keyspace (a store that recorded the server's key
    // router refuses to open without it).
    strata_server::store_options(o, &cli.dir)
}

fn open(cli: &Cli) -> anyhow::Result<strata::Db> {
    strata::Db::open(&cli.dir, options(cli))
        .with_context(|| format!("opening database in {}", cli.dir.display()))
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match &cli.command {
        Command::Serve(args) => {
            strata_server::serve_blocking(args.clone(), options(&cli), &cli.dir)
        }
        Command::Put { key, value } => {
            let db = open(&cli)?;
            let dbi = kv_cmd::prepare(&db)?;
            kv_cmd::put(&db, dbi, key, value)?;
            db.close()?;
            Ok(())
        }
        Command::Get { key } => {
            let db = open(&cli)?;
            let dbi = kv_cmd::prepare(&db)?;
            let value = kv_cmd::get(&db, dbi, key);
            db.close()?;
            println!("{}", String::from_utf8_lossy(&value?));
            Ok(())
        }
        Command::Del { key } => {
            let db = open(&cli)?;
            let dbi = kv_cmd::prepare(&db)?;
            kv_cmd::del(&db, dbi, key)?;
            db.close()?;
            Ok(())
        }
        Command::Scan {
            prefix,
            start,
            end,
            limit,
            reverse,
        } => {
            let db = open(&cli)?;
            let dbi = kv_cmd::prepare(&db)?;
            kv_cmd::scan(
                &db,
                dbi,
                (prefix.as_deref(), start.as_deref(), end.as_deref()),
                *limit,
                *reverse,
                &mut |k, v| {
                    println!(
                        "{}\t{}",
                        String::from_utf8_lossy(k),
                        String::from_utf8_lossy(v)
                    )
                },
            )?;
            db.close()?;
            Ok(())
        }
        Command::Stats => {
            let db = open(&cli)?;
            for (k, v) in db.stats().lines() {
                println!("{k}: {v}");
            }
            db.close()?;
            Ok(())
        }
        Command::Ingest { file, run_mib } => ingest(&cli, file, *run_mib),
        Command::Compact => {
            let db = open(&cli)?;
            db.compact()?;
            let s = db.stats();
            println!(
                "compacted: {} bytes on disk, write amplification so far {:.2}",
                s.disk_bytes(),
                s.write_amplification()
            );
            db.close()?;
            Ok(())
        }
        Command::Checkpoint { dest } => {
            let db = open(&cli)?;
            db.checkpoint(dest)?;
            println!("checkpoint written to {}", dest.display());
            db.close()?;
            Ok(())
        }
        Command::Bench(args) => bench_cmd::run(args),
        Command::Gen(args) => doc_cmd::gen(args),
        Command::Load(args) => doc_cmd::load(&cli.dir, options(&cli), args),
        Command::Doc { command } => doc_cmd::doc(&cli.dir, options(&cli), command),
    }
}

/// Longest line `strata ingest` reads: a key (64 KiB) and a string value (512 MiB, as the
/// server's), a tab and the line break.
const INGEST_LINE_BYTES_MAX: u64 = (64 << 10) + (512 << 20) + 3;

fn ingest(cli: &Cli, file: &std::path::Path, run_mib: usize) -> anyhow::Result<()> {
    use std::io::BufRead;
    let input: Box<dyn BufRead> = if file.as_os_str() == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        let f = std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
        Box::new(std::io::BufReader::with_capacity(1 << 20, f))
    };
    let db = open(cli)?;
    let dbi = kv_cmd::prepare(&db)?;
    let sort_dir = cli.dir.join("ingest-sort.tmp");
    let mut sorter = strata::extsort::ExternalSorter::new(&sort_dir, run_mib << 20)?;
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} [{elapsed_precise}] {per_sec}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_message("sorting");
    let mut n = 0u64;
    let mut input = input;
    let mut buf = Vec::new();
    for i in 0usize.. {
        // Bounded: a file without line breaks must not be read into memory whole.
        buf.clear();
        let read = std::io::Read::take(&mut input, INGEST_LINE_BYTES_MAX + 1)
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("reading line {}", i + 1))?;
        if read == 0 {
            break;
        }
        if buf.last() != Some(&b'\n') && read as u64 > INGEST_LINE_BYTES_MAX {
            anyhow::bail!(
                "line {}: longer than {} bytes (a key and a value of a string at most)",
                i + 1,
                INGEST_LINE_BYTES_MAX
            );
        }
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let Some(tab) = line.iter().position(|&b| b == b'\t') else {
            anyhow::bail!("line {}: expected key<TAB>value", i + 1);
        };
        // Stored as strings of database 0, as `strata serve` stores them; the key prefix keeps
        // the sort order.
        let (key, value) = kv_cmd::ingest_entry(dbi, &line[..tab], &line[tab + 1..]);
        sorter.add(&key, &value)?;
        n += 1;
        if n % 100_000 == 0 {
            bar.set_position(n);
        }
    }
    bar.set_message(format!("merging {} sorted runs", sorter.runs().max(1)));
    let sorted = sorter.finish()?;
    // A run that cannot be read stops the ingest before anything is installed (it used to end
    // the input there: everything before it was installed, then the error reported).
    let loaded = db.try_ingest(sorted);
    bar.finish_and_clear();
    let _ = std::fs::remove_dir_all(&sort_dir);
    let loaded = loaded?;
    println!("ingested {loaded} entries ({n} lines)");
    db.close()?;
    Ok(())
}
