//! The document commands of the `strata` binary: `gen` (synthetic Reddit comments as JSON lines on
//! stdout), `load` (JSON lines into the document store, with a progress bar on stderr and a stats
//! line `{"time","writes","size"}` on stdout every second, as the original document store's loader
//! printed) and `doc get|put|del|incr|set|scan`. Only glue: the
//! work is done by `strata_doc`.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use strata_doc::load::{LoadEvent, LoadOptions};
use strata_doc::{Doc, DocStore, Path as DocPath};

/// What `strata gen` generates.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum GenKind {
    /// Reddit comments with the fields of pushshift.io's comments and the size distribution of
    /// 147 M real ones.
    Comments,
}

/// `strata gen comments N [--seed S]`: JSON lines on stdout.
#[derive(Args, Debug)]
pub struct GenArgs {
    /// What to generate.
    #[arg(value_enum)]
    pub kind: GenKind,
    /// How many documents.
    pub count: u64,
    /// Seed: the same seed gives the same documents.
    #[arg(long, default_value_t = 2)]
    pub seed: u64,
}

/// `strata load FILE.jsonl[.gz] --id-field id [--strict] [--readers N] [--writers N]`.
#[derive(Args, Debug)]
pub struct LoadArgs {
    /// JSON-lines input; gzip-compressed when it ends in `.gz`.
    pub file: PathBuf,
    /// Top-level field holding each document's key.
    #[arg(long, default_value = "id")]
    pub id_field: String,
    /// Stop at the first bad line instead of skipping it.
    #[arg(long)]
    pub strict: bool,
    /// Reader threads (each reads one byte range; gzip uses one).
    #[arg(long, default_value_t = 1)]
    pub readers: usize,
    /// Parser/writer threads.
    #[arg(long, default_value_t = 2)]
    pub writers: usize,
    /// Do not draw the progress bar (stats lines are still printed).
    #[arg(long)]
    pub quiet: bool,
}

/// `strata doc ...`. Keys are strings unless `--key-json` says the key is JSON (`42`, `[1,"a"]`).
#[derive(Subcommand, Debug)]
pub enum DocCommand {
    /// Print a document, or the part of it at a path such as `$.score`, as JSON.
    Get {
        /// The document key.
        id: String,
        /// Path into the document (`$`, `$.a.b`, `$.arr[2]`, `$["key with space"]`).
        path: Option<String>,
        /// The key is JSON text, not a plain string.
        #[arg(long)]
        key_json: bool,
        /// Indent the output.
        #[arg(long)]
        pretty: bool,
    },
    /// Store a document given as JSON text.
    Put {
        /// The document key.
        id: String,
        /// The document, as JSON.
        json: String,
        /// The key is JSON text, not a plain string.
        #[arg(long)]
        key_json: bool,
    },
    /// Delete a document.
    Del {
        /// The document key.
        id: String,
        /// The key is JSON text, not a plain string.
        #[arg(long)]
        key_json: bool,
    },
    /// Atomically add to an integer field and print the new value.
    Incr {
        /// The document key.
        id: String,
        /// Path of the integer field, e.g. `$.score`.
        path: String,
        /// Amount to add.
        #[arg(default_value_t = 1, allow_negative_numbers = true)]
        delta: i64,
        /// The key is JSON text, not a plain string.
        #[arg(long)]
        key_json: bool,
    },
    /// Atomically set the value at a path (JSON text).
    Set {
        /// The document key.
        id: String,
        /// Path to set, e.g. `$.flair.text`.
        path: String,
        /// The new value, as JSON.
        json: String,
        /// The key is JSON text, not a plain string.
        #[arg(long)]
        key_json: bool,
    },
    /// Print `key<TAB>document` lines in key order.
    Scan {
        /// First key (inclusive), as JSON.
        #[arg(long)]
        start: Option<String>,
        /// Last key (exclusive), as JSON.
        #[arg(long)]
        end: Option<String>,
        /// At most this many documents.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
}

/// `strata gen`.
pub fn gen(args: &GenArgs) -> anyhow::Result<()> {
    match args.kind {
        GenKind::Comments => {
            let stdout = io::stdout();
            let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
            let written = strata_doc::gen::write_comments(&mut out, args.count, args.seed)
                .and_then(|()| out.flush());
            match written {
                // `strata gen comments 1000000 | head` is fine.
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
                other => other.context("writing to stdout"),
            }
        }
    }
}

/// `strata load`.
pub fn load(dir: &Path, opts: strata::Options, args: &LoadArgs) -> anyhow::Result<()> {
    let store = DocStore::open(dir, opts)
        .with_context(|| format!("opening database in {}", dir.display()))?;
    let options = LoadOptions {
        id_field: args.id_field.clone(),
        strict: args.strict,
        readers: args.readers,
        writers: args.writers,
        progress_interval: Duration::from_secs(1),
        ..LoadOptions::default()
    };
    let bytes_total = std::fs::metadata(&args.file)
        .with_context(|| format!("reading {}", args.file.display()))?
        .len();
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(bytes_total)
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {bytes}/{total_bytes} ({eta}) {msg}",
        )
        .context("progress bar template")?
        .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(250));
    let mut last = (Instant::now(), 0u64, 0u64);
    let stdout = io::stdout();
    let result = strata_doc::load::load(&store, &args.file, &options, |event| match event {
        LoadEvent::Progress(p) => {
            let now = Instant::now();
            let secs = now.duration_since(last.0).as_secs_f64().max(1e-3);
            let docs_per_s = (p.docs_written.saturating_sub(last.1)) as f64 / secs;
            let mb_per_s = (p.bytes_read.saturating_sub(last.2)) as f64 / secs / 1e6;
            last = (now, p.docs_written, p.bytes_read);
            bar.set_position(p.bytes_read);
            bar.set_message(format!(
                "{} docs, {docs_per_s:.0} docs/s, {mb_per_s:.1} MB/s, {} bad",
                p.docs_written, p.bad_lines
            ));
            bar.suspend(|| {
                let mut out = stdout.lock();
                let _ = writeln!(out, "{}", p.stats_line());
                let _ = out.flush();
            });
        }
        LoadEvent::BadLine(b) => {
            bar.suspend(|| {
                eprintln!(
                    "skipped line {} (byte {}): {}",
                    b.line, b.byte_offset, b.reason
                )
            });
        }
    });
    bar.finish_and_clear();
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = store.close();
            return Err(e).context("load stopped");
        }
    };
    let p = &report.progress;
    let secs = p.elapsed.as_secs_f64().max(1e-9);
    eprintln!(
        "loaded {} documents from {} lines ({} bad) in {:.1} s: {:.0} docs/s, {:.1} MB/s",
        p.docs_written,
        p.lines_read,
        p.bad_lines,
        secs,
        p.docs_written as f64 / secs,
        p.bytes_read as f64 / secs / 1e6
    );
    store.close().context("closing the database")?;
    Ok(())
}

fn key_of(id: &str, key_json: bool) -> anyhow::Result<Doc> {
    if key_json {
        Doc::from_json(id).with_context(|| format!("key {id:?} is not JSON"))
    } else {
        Ok(Doc::from(id))
    }
}

fn doc_path(text: &str) -> anyhow::Result<DocPath> {
    Ok(DocPath::parse(text)?)
}

fn print_json(doc: &Doc, pretty: bool) -> anyhow::Result<()> {
    let text = if pretty {
        strata_doc::to_json_pretty(doc)?
    } else {
        // Display writes non-string map keys leniently rather than failing.
        doc.to_string()
    };
    println!("{text}");
    Ok(())
}

/// `strata doc ...`.
pub fn doc(dir: &Path, opts: strata::Options, cmd: &DocCommand) -> anyhow::Result<()> {
    let store = DocStore::open(dir, opts)
        .with_context(|| format!("opening database in {}", dir.display()))?;
    let result = run_doc(&store, cmd);
    let closed = store.close().context("closing the database");
    result.and(closed)
}

fn run_doc(store: &DocStore, cmd: &DocCommand) -> anyhow::Result<()> {
    match cmd {
        DocCommand::Get {
            id,
            path,
            key_json,
            pretty,
        } => {
            let key = key_of(id, *key_json)?;
            let found = match path {
                Some(p) => store.get_path(&key, &doc_path(p)?)?,
                None => store.get(&key)?,
            };
            match (found, path) {
                (Some(d), _) => print_json(&d, *pretty),
                (None, None) => bail!("no document with key {key}"),
                (None, Some(p)) => match store.get(&key)? {
                    Some(_) => bail!("document {key} has nothing at {p}"),
                    None => bail!("no document with key {key}"),
                },
            }
        }
        DocCommand::Put { id, json, key_json } => {
            let value = Doc::from_json(json).context("the document is not valid JSON")?;
            store.put(&key_of(id, *key_json)?, &value)?;
            Ok(())
        }
        DocCommand::Del { id, key_json } => {
            store.delete(&key_of(id, *key_json)?)?;
            Ok(())
        }
        DocCommand::Incr {
            id,
            path,
            delta,
            key_json,
        } => {
            let new = store.increment(&key_of(id, *key_json)?, &doc_path(path)?, *delta)?;
            println!("{new}");
            Ok(())
        }
        DocCommand::Set {
            id,
            path,
            json,
            key_json,
        } => {
            let value = Doc::from_json(json).context("the value is not valid JSON")?;
            store.set_path(&key_of(id, *key_json)?, &doc_path(path)?, value)?;
            Ok(())
        }
        DocCommand::Scan { start, end, limit } => {
            use std::ops::Bound;
            let bound = |b: &Option<String>, inclusive: bool| -> anyhow::Result<Bound<Doc>> {
                Ok(match b {
                    None => Bound::Unbounded,
                    Some(text) => {
                        let d = Doc::from_json(text)
                            .with_context(|| format!("scan bound {text:?} is not JSON"))?;
                        if inclusive {
                            Bound::Included(d)
                        } else {
                            Bound::Excluded(d)
                        }
                    }
                })
            };
            let range = (bound(start, true)?, bound(end, false)?);
            let stdout = io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            for item in store.scan(range).take(*limit) {
                let (k, v) = item?;
                writeln!(out, "{k}\t{v}")?;
            }
            out.flush()?;
            Ok(())
        }
    }
}
