//! The read-only benchmark, after the experiment behind Strata's table files (a read-only store
//! of one sorted file with a sparse index, measured at several index rates): build a data set of
//! a given size, then read random keys from many threads for a while.
//!
//! Keys are random and of a fixed size, as in that experiment, but reproducible: key number `i`
//! starts with `mix(i)` (a bijection of `u64`, so keys never collide) and its remaining bytes and
//! its value are derived from the same number. Known reads ask for `i < keys`, unknown reads for
//! `i >= keys`, which cannot exist.
//!
//! The data set is produced in key order by an external merge sort, as the original built its large
//! sorted files: sorted runs of at most `sort_run_keys` key hashes (8 bytes each; keys and values
//! are derived from them) are written to temporary files next to the data directory and merged with
//! a heap. The sorted stream then goes into the engine's bulk load where it has one (Strata's
//! `Db::ingest` writes table files directly, as the original wrote its sorted file), or through the
//! normal write path followed by a flush and full compaction.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::dir::{copy_dir, dir_bytes, finish_dir, fresh_dir, sibling};
use crate::error::{Error, Result};
use crate::keys::{key_from_hash, mix, ValuePool};
use crate::latency::{latency_histogram, micros_since};
use crate::record::{to_value, unix_ms, ReadonlyRecord, Sink, KIND_READONLY};
use crate::spec::ReadonlySpec;
use crate::store::{open_store, BenchStore};
use crate::sys;

/// The key numbers `0..keys` as their hashes, in sorted order, through an external merge sort
/// whose runs hold at most `run_keys` entries. Temporary run files live in `tmp_dir`.
pub struct SortedHashes {
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    runs: Vec<RunReader>,
    memory: std::vec::IntoIter<u64>,
    tmp_dir: Option<PathBuf>,
}

struct RunReader {
    reader: BufReader<std::fs::File>,
    path: PathBuf,
}

impl RunReader {
    fn next(&mut self) -> Result<Option<u64>> {
        let mut buf = [0u8; 8];
        match self.reader.read_exact(&mut buf) {
            Ok(()) => Ok(Some(u64::from_le_bytes(buf))),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(Error::io("reading sort run", &self.path, e)),
        }
    }
}

impl SortedHashes {
    /// Sorts; with more than `run_keys` keys, writes runs to files in `tmp_dir`.
    pub fn new(keys: u64, run_keys: usize, tmp_dir: &Path) -> Result<Self> {
        let run_keys = run_keys.max(1) as u64;
        if keys <= run_keys {
            let mut all: Vec<u64> = (0..keys).map(mix).collect();
            all.sort_unstable();
            return Ok(SortedHashes {
                heap: BinaryHeap::new(),
                runs: Vec::new(),
                memory: all.into_iter(),
                tmp_dir: None,
            });
        }
        fresh_dir(tmp_dir)?;
        let mut runs = Vec::new();
        let mut start = 0u64;
        while start < keys {
            let end = keys.min(start + run_keys);
            let mut run: Vec<u64> = (start..end).map(mix).collect();
            run.sort_unstable();
            let path = tmp_dir.join(format!("run-{:06}", runs.len()));
            let file = std::fs::File::create(&path).map_err(|e| Error::io("creating", &path, e))?;
            let mut w = BufWriter::with_capacity(1 << 20, file);
            for h in &run {
                w.write_all(&h.to_le_bytes())
                    .map_err(|e| Error::io("writing sort run", &path, e))?;
            }
            w.flush()
                .map_err(|e| Error::io("writing sort run", &path, e))?;
            let file = std::fs::File::open(&path).map_err(|e| Error::io("opening", &path, e))?;
            runs.push(RunReader {
                reader: BufReader::with_capacity(1 << 16, file),
                path,
            });
            start = end;
        }
        let mut heap = BinaryHeap::with_capacity(runs.len());
        for (i, r) in runs.iter_mut().enumerate() {
            if let Some(h) = r.next()? {
                heap.push(Reverse((h, i)));
            }
        }
        Ok(SortedHashes {
            heap,
            runs,
            memory: Vec::new().into_iter(),
            tmp_dir: Some(tmp_dir.to_path_buf()),
        })
    }

    /// Number of sorted runs written to disk (0 when everything fit in one in-memory run).
    pub fn disk_runs(&self) -> usize {
        self.runs.len()
    }

    /// The next hash in ascending order.
    pub fn next_hash(&mut self) -> Result<Option<u64>> {
        if self.runs.is_empty() {
            return Ok(self.memory.next());
        }
        let Some(Reverse((h, i))) = self.heap.pop() else {
            return Ok(None);
        };
        if let Some(next) = self
            .runs
            .get_mut(i)
            .map(RunReader::next)
            .transpose()?
            .flatten()
        {
            self.heap.push(Reverse((next, i)));
        }
        Ok(Some(h))
    }

    /// Removes the temporary run files.
    pub fn cleanup(self) -> Result<()> {
        drop(self.runs);
        match self.tmp_dir {
            Some(d) if d.exists() => {
                std::fs::remove_dir_all(&d).map_err(|e| Error::io("removing", &d, e))
            }
            _ => Ok(()),
        }
    }
}

/// Loads the data set in key order: through the engine's bulk load when `spec.bulk_load` is set
/// and the engine has one, else through the write path. Returns the number of keys.
pub fn load(store: &dyn BenchStore, spec: &ReadonlySpec, tmp_dir: &Path) -> Result<u64> {
    let keys = spec.keys();
    let pool = ValuePool::seeded(spec.value_bytes, spec.seed);
    let mut sorted = SortedHashes::new(keys, spec.sort_run_keys, tmp_dir)?;
    let mut failure = None;
    let mut previous = None;
    let mut stream = std::iter::from_fn(|| match sorted.next_hash() {
        Ok(Some(h)) => {
            debug_assert!(
                previous < Some(h),
                "merge output must be strictly ascending"
            );
            previous = Some(h);
            let mut key = vec![0u8; spec.key_bytes];
            key_from_hash(h, &mut key);
            Some((key, pool.value(h)))
        }
        Ok(None) => None,
        Err(e) => {
            failure = Some(e);
            None
        }
    });
    let loaded = if spec.bulk_load {
        store.bulk_load(&mut stream)?
    } else {
        let mut n = 0;
        for (k, v) in &mut stream {
            store.put(&k, v)?;
            n += 1;
        }
        n
    };
    if let Some(e) = failure {
        return Err(e);
    }
    sorted.cleanup()?;
    if loaded != keys {
        return Err(Error::Invalid(format!(
            "{} loaded {loaded} of {keys} keys",
            store.name()
        )));
    }
    Ok(keys)
}

/// Reads random keys from `spec.threads` threads for `spec.duration`; returns
/// (reads, found, seconds, latency histogram).
pub fn read_phase(
    store: &dyn BenchStore,
    spec: &ReadonlySpec,
    keys: u64,
) -> Result<(u64, u64, f64, hdrhistogram::Histogram<u64>)> {
    let stop = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let found = AtomicU64::new(0);
    let first_error = Mutex::new(None::<Error>);
    let hists: Vec<Mutex<hdrhistogram::Histogram<u64>>> = (0..spec.threads)
        .map(|_| latency_histogram().map(Mutex::new))
        .collect::<Result<_>>()?;
    let started = Instant::now();
    std::thread::scope(|scope| {
        for (t, hist) in hists.iter().enumerate() {
            let (stop, reads, found, first_error) = (&stop, &reads, &found, &first_error);
            scope.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(spec.seed ^ mix(t as u64 + 1));
                let mut key = vec![0u8; spec.key_bytes];
                let mut hist = hist.lock();
                while !stop.load(Ordering::Relaxed) {
                    let i = if rng.gen_bool(spec.known_key_rate) {
                        rng.gen_range(0..keys)
                    } else {
                        rng.gen_range(keys..u64::MAX)
                    };
                    key_from_hash(mix(i), &mut key);
                    let t0 = Instant::now();
                    match store.get(&key) {
                        Ok(hit) => {
                            hist.saturating_record(micros_since(t0));
                            reads.fetch_add(1, Ordering::Relaxed);
                            if hit {
                                found.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Err(e) => {
                            first_error.lock().get_or_insert(e);
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
        while started.elapsed() < spec.duration && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(
                spec.duration
                    .saturating_sub(started.elapsed())
                    .min(Duration::from_millis(50)),
            );
        }
        stop.store(true, Ordering::Relaxed);
    });
    let seconds = started.elapsed().as_secs_f64();
    if let Some(e) = first_error.lock().take() {
        return Err(e);
    }
    let mut all = latency_histogram()?;
    for h in &hists {
        let _ = all.add(&*h.lock());
    }
    Ok((
        reads.load(Ordering::Relaxed),
        found.load(Ordering::Relaxed),
        seconds,
        all,
    ))
}

/// One read phase over a built data set: who asks for what.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadPoint {
    /// Share of reads that ask for a key that exists.
    pub known_key_rate: f64,
    /// Reader threads.
    pub threads: usize,
}

/// Builds the data set of `spec` in a fresh `dir` once, then runs one read phase per entry of
/// `reads` (each `spec.duration` long; an empty list reads once with `spec`'s own rate and
/// threads), writing one record per phase to `sink`.
pub fn run_in_process(
    spec: &ReadonlySpec,
    reads: &[ReadPoint],
    run_id: &str,
    dir: &Path,
    keep_data: bool,
    isolated: bool,
    sink: Sink<'_>,
) -> Result<Vec<ReadonlyRecord>> {
    spec.validate()?;
    check_room(spec, dir)?;
    fresh_dir(dir)?;
    let started_unix_ms = unix_ms();
    sys::reset_peak_rss();
    let store = open_store(&spec.engine, dir)?;
    // The sort runs go next to the engine's directory, which holds only the engine's files.
    let tmp_dir = sibling(dir, "sort-runs");
    let t0 = Instant::now();
    let keys = load(&*store, spec, &tmp_dir)?;
    let load_seconds = t0.elapsed().as_secs_f64();
    // Bulk-loaded tables are already sorted and disjoint; data that came through the write path
    // is flushed and compacted so that reads see a settled tree, as after a batch build.
    let t1 = Instant::now();
    let bulk_loaded = store.has_bulk_load();
    if !(spec.bulk_load && bulk_loaded) {
        store.compact()?;
    }
    let compact_seconds = t1.elapsed().as_secs_f64();
    let disk_bytes = dir_bytes(dir);
    eprintln!(
        "  {} read-only: loaded {keys} keys ({:.2} GiB on disk) in {load_seconds:.1}s ({}) + {compact_seconds:.1}s flush and compaction",
        spec.engine.engine,
        disk_bytes as f64 / (1u64 << 30) as f64,
        if spec.bulk_load && bulk_loaded {
            "bulk load"
        } else {
            "write path"
        },
    );
    let own = [ReadPoint {
        known_key_rate: spec.known_key_rate,
        threads: spec.threads,
    }];
    let reads = if reads.is_empty() { &own[..] } else { reads };
    // (phase, trial) in running order. With trials, the built store is closed and every trial
    // reads a fresh copy of it, trials of all phases shuffled (as the original ran them).
    let trials = spec.trials.max(1);
    let with_copies = trials > 1;
    let mut order: Vec<(usize, u32)> = (0..reads.len())
        .flat_map(|i| (0..trials).map(move |t| (i, t)))
        .collect();
    let mut base = Some(store);
    if with_copies {
        use rand::seq::SliceRandom;
        order.shuffle(&mut SmallRng::seed_from_u64(spec.seed));
        if let Some(store) = base.take() {
            store.close()?;
        }
    }
    let mut records = Vec::with_capacity(order.len());
    // The phase of each record, for the summary.
    let phases: Vec<usize> = order.iter().map(|&(i, _)| i).collect();
    for (i, trial) in order {
        let point = reads[i];
        let spec = ReadonlySpec {
            known_key_rate: point.known_key_rate,
            threads: point.threads,
            ..spec.clone()
        };
        spec.validate()?;
        let (reads, found, seconds, hist, page_cache_dropped) = match &base {
            Some(store) => {
                let dropped = drop_page_cache_if_asked(&spec);
                let (r, f, s, h) = read_phase(&**store, &spec, keys)?;
                (r, f, s, h, dropped)
            }
            None => {
                let copy = sibling(dir, "trial");
                copy_dir(dir, &copy)?;
                let store = open_store(&spec.engine, &copy)?;
                let dropped = drop_page_cache_if_asked(&spec);
                let (r, f, s, h) = read_phase(&*store, &spec, keys)?;
                let phase = (r, f, s, h, dropped);
                store.close()?;
                finish_dir(&copy, false)?;
                phase
            }
        };
        let record = ReadonlyRecord {
            kind: KIND_READONLY.into(),
            run_id: if with_copies {
                format!("{run_id}-r{i}-t{trial}")
            } else {
                format!("{run_id}-r{i}")
            },
            bulk_loaded: spec.bulk_load && bulk_loaded,
            started_unix_ms,
            machine: sys::machine_summary(),
            isolated,
            spec,
            keys,
            load_seconds,
            compact_seconds,
            disk_bytes,
            reads,
            found,
            seconds,
            reads_per_sec: reads as f64 / seconds.max(1e-9),
            p50_us: hist.value_at_quantile(0.5),
            p99_us: hist.value_at_quantile(0.99),
            p999_us: hist.value_at_quantile(0.999),
            peak_rss_bytes: sys::peak_rss_bytes(),
            trial: with_copies.then_some(trial),
            page_cache_dropped,
        };
        eprintln!(
            "  {} read-only: known-key rate {:.2}, {} threads{}: {:.0} reads/s, p99 {} us",
            record.spec.engine.engine,
            record.spec.known_key_rate,
            record.spec.threads,
            record
                .trial
                .map(|t| format!(", trial {t}"))
                .unwrap_or_default(),
            record.reads_per_sec,
            record.p99_us
        );
        sink(&to_value(&record)?)?;
        records.push(record);
    }
    if with_copies {
        for (i, point) in reads.iter().enumerate() {
            let mine = phases.iter().zip(&records).filter(|(&p, _)| p == i);
            let mut rates: Vec<f64> = mine.clone().map(|(_, r)| r.reads_per_sec).collect();
            let mut p99s: Vec<f64> = mine.map(|(_, r)| r.p99_us as f64).collect();
            if let (Some(rate), Some(p99)) = (quartiles(&mut rates), quartiles(&mut p99s)) {
                eprintln!(
                    "  known-key rate {:.2}, {} threads, {trials} trials: median {:.0} reads/s (IQR {:.0}-{:.0}), median p99 {:.0} us (IQR {:.0}-{:.0})",
                    point.known_key_rate, point.threads, rate.1, rate.0, rate.2, p99.1, p99.0, p99.2
                );
            }
        }
    }
    if let Some(store) = base {
        store.close()?;
    }
    finish_dir(dir, keep_data)?;
    Ok(records)
}

/// Refuses a run whose data set cannot fit on the disk holding `dir` (before any of it is
/// written), and says when a run asked to read from the disk has a data set small enough for
/// the page cache to hold most of it.
fn check_room(spec: &ReadonlySpec, dir: &Path) -> Result<()> {
    let needed = spec.disk_bytes_needed();
    if let Some(free) = sys::free_disk_bytes(dir) {
        // What the directory holds now goes when it is made fresh.
        let free = free.saturating_add(if dir.exists() { dir_bytes(dir) } else { 0 });
        if free < needed {
            return Err(Error::Invalid(format!(
                "read-only: a data set of {:.1} GiB needs about {:.1} GiB of free disk next to {} (data, engine overhead, sort runs{}), but only {:.1} GiB is free",
                gib(spec.data_bytes),
                gib(needed),
                dir.display(),
                if spec.trials > 1 { ", one trial copy" } else { "" },
                gib(free),
            )));
        }
    }
    if spec.drop_page_cache {
        if let Some(memory) = sys::memory_bytes() {
            if spec.data_bytes < memory.saturating_mul(2) {
                eprintln!(
                    "  note: the data set ({:.1} GiB) is under twice the machine's memory ({:.1} GiB): reads will fill the page cache and come more and more from memory",
                    gib(spec.data_bytes),
                    gib(memory)
                );
            }
        }
    }
    Ok(())
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

/// Drops the page cache before a read phase when `spec` asks; `None` when it does not ask.
fn drop_page_cache_if_asked(spec: &ReadonlySpec) -> Option<bool> {
    if !spec.drop_page_cache {
        return None;
    }
    let dropped = sys::drop_page_cache();
    if !dropped {
        eprintln!(
            "  could not drop the page cache (writing /proc/sys/vm/drop_caches needs root): this phase may read from memory"
        );
    }
    Some(dropped)
}

/// First quartile, median and third quartile of `values` (sorted in place; linear
/// interpolation between ranks, as numpy's default); `None` when empty.
pub fn quartiles(values: &mut [f64]) -> Option<(f64, f64, f64)> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let pos = q * (values.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        values[lo] + (values[hi] - values[lo]) * (pos - lo as f64)
    };
    Some((at(0.25), at(0.5), at(0.75)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external_merge_sort_yields_every_hash_once_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let runs_dir = tmp.path().join("runs");
        let mut sorted = SortedHashes::new(10_007, 1000, &runs_dir).unwrap();
        assert_eq!(sorted.disk_runs(), 11);
        let mut out = Vec::new();
        while let Some(h) = sorted.next_hash().unwrap() {
            out.push(h);
        }
        sorted.cleanup().unwrap();
        assert!(!runs_dir.exists());
        let mut want: Vec<u64> = (0..10_007).map(mix).collect();
        want.sort_unstable();
        assert_eq!(out, want);
    }

    #[test]
    fn quartiles_interpolate_between_ranks() {
        assert_eq!(quartiles(&mut []), None);
        assert_eq!(quartiles(&mut [5.0]), Some((5.0, 5.0, 5.0)));
        // numpy.percentile([1, 2, 3, 4], [25, 50, 75]) = 1.75, 2.5, 3.25
        assert_eq!(
            quartiles(&mut [4.0, 1.0, 3.0, 2.0]),
            Some((1.75, 2.5, 3.25))
        );
        assert_eq!(
            quartiles(&mut [10.0, 30.0, 20.0, 50.0, 40.0]),
            Some((20.0, 30.0, 40.0))
        );
    }

    #[test]
    fn small_sets_sort_in_memory() {
        let tmp = tempfile::tempdir().unwrap();
        let mut sorted = SortedHashes::new(100, 1000, &tmp.path().join("runs")).unwrap();
        assert_eq!(sorted.disk_runs(), 0);
        let mut n = 0;
        while sorted.next_hash().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 100);
    }
}
