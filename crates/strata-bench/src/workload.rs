//! Mixed-workload runs, as in the experiment Strata's partitioned LSM store comes from (a
//! hash-partitioned LSM store measured with PUT-, GET- and DELETE-heavy mixes across partition
//! counts): client threads draw operations from one of those mixes ([`Workload`]), count them per
//! interval and record latencies in HDR histograms; every interval one stats line with that
//! experiment's fields (`nanoTime, put, delete, deleteFound, get, getFound, fileSize`, counts per
//! interval) plus latency percentiles is handed to the caller.
//!
//! Known keys come from a bounded per-thread [`Reservoir`] of keys that thread wrote (the original
//! benchmark also drew known keys from the keys its thread had written), so memory stays flat
//! however long the run. Values are windows of a per-thread random
//! buffer: incompressible, and no allocation per operation.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::dir::dir_bytes;
use crate::error::{Error, Result};
use crate::keys::{key_of, mix, ValuePool, VALUE_WINDOWS};
use crate::latency::{latency_histogram, micros_since};
use crate::record::RunSummary;
use crate::spec::RunSpec;
use crate::store::BenchStore;

/// At most this many known keys per client thread.
pub const RESERVOIR_KEYS_MAX: usize = 100_000;

/// Key spaces up to this many keys get a live-key count ([`LiveKeys`]: one bit per key, so at
/// most 128 MiB); larger ones report none.
pub const LIVE_KEYS_TRACKED_MAX: u64 = 1 << 30;

/// Which keys' last write was a put, one bit per key of the key space: a put sets the key's
/// bit, a delete clears it. The clients keep it, so the live data the bytes on disk are compared
/// with is known without asking the engine under test. (Two threads writing the same key within
/// the same microsecond may record the two writes in the other order than the engine applied
/// them; at the key spaces measured this is a handful of keys in millions.)
pub struct LiveKeys {
    words: Vec<AtomicU64>,
}

impl LiveKeys {
    /// A count for `key_space` keys, all absent; `None` over [`LIVE_KEYS_TRACKED_MAX`].
    pub fn new(key_space: u64) -> Option<LiveKeys> {
        if key_space > LIVE_KEYS_TRACKED_MAX {
            return None;
        }
        let words = usize::try_from(key_space.div_ceil(64)).ok()?;
        Some(LiveKeys {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    /// Marks keys `0..n` live (a preload wrote them all).
    pub fn put_all_below(&self, n: u64) {
        // Whole words at once: a preload of 100 M keys is 1.6 M stores, not 100 M.
        let full = (n / 64) as usize;
        for w in self.words.iter().take(full) {
            w.store(u64::MAX, Ordering::Relaxed);
        }
        for k in full as u64 * 64..n {
            self.put(k);
        }
    }

    /// Key `k` was put.
    pub fn put(&self, k: u64) {
        if let Some(w) = self.words.get((k / 64) as usize) {
            w.fetch_or(1 << (k % 64), Ordering::Relaxed);
        }
    }

    /// Key `k` was deleted.
    pub fn delete(&self, k: u64) {
        if let Some(w) = self.words.get((k / 64) as usize) {
            w.fetch_and(!(1 << (k % 64)), Ordering::Relaxed);
        }
    }

    /// Keys whose last write was a put.
    pub fn count(&self) -> u64 {
        self.words
            .iter()
            .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
            .sum()
    }
}

/// A uniform sample of at most `capacity` of the keys offered (Vitter's algorithm R).
#[derive(Debug, Clone)]
pub struct Reservoir {
    keys: Vec<u64>,
    seen: u64,
    capacity: usize,
}

impl Reservoir {
    /// An empty reservoir holding at most `capacity` keys.
    pub fn new(capacity: usize) -> Self {
        Reservoir {
            keys: Vec::with_capacity(capacity.min(4096)),
            seen: 0,
            capacity,
        }
    }

    /// Offers a written key.
    pub fn offer(&mut self, key: u64, rng: &mut impl Rng) {
        self.seen += 1;
        if self.keys.len() < self.capacity {
            self.keys.push(key);
        } else if let Ok(j) = usize::try_from(rng.gen_range(0..self.seen)) {
            if let Some(slot) = self.keys.get_mut(j) {
                *slot = key;
            }
        }
    }

    /// A random key from the sample, if any.
    pub fn pick(&self, rng: &mut impl Rng) -> Option<u64> {
        if self.keys.is_empty() {
            None
        } else {
            self.keys.get(rng.gen_range(0..self.keys.len())).copied()
        }
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Operation counts of one interval, the counts of a stats line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntervalCounts {
    /// Puts.
    pub put: u64,
    /// Deletes.
    pub delete: u64,
    /// Deletes whose key existed.
    pub delete_found: u64,
    /// Gets.
    pub get: u64,
    /// Gets that found their key.
    pub get_found: u64,
}

impl IntervalCounts {
    /// All operations.
    pub fn ops(&self) -> u64 {
        self.put + self.delete + self.get
    }
}

/// One interval of a run: seconds since the start at its end, and its ops/s (or another
/// figure of the interval: the bytes on disk at its end).
pub type IntervalRate = (f64, f64);

/// The steady-state window at the end of a run (issue #18's "last ten minutes": users live
/// in the steady state, not in the first minute of a fresh store).
pub const TAIL_WINDOW_SECS: f64 = 600.0;

/// Mean of a per-interval figure (ops/s, or the bytes on disk at the interval's end) over the
/// last [`TAIL_WINDOW_SECS`] of a run, or over its second half when the run is shorter than
/// twice that (so a five-minute run reports its last 150 s). `intervals` are (seconds since
/// the start at the interval's end, the figure), in order; the mean is weighted by each
/// interval's length, and an interval that straddles the window's start counts whole. `None`
/// without intervals.
pub fn tail_mean(intervals: &[IntervalRate]) -> Option<f64> {
    let run_secs = intervals.last()?.0;
    let window = TAIL_WINDOW_SECS.min(run_secs / 2.0);
    let from = run_secs - window;
    let (mut ops, mut secs) = (0.0, 0.0);
    let mut prev_end = 0.0;
    for &(end, rate) in intervals {
        let len = end - prev_end;
        prev_end = end;
        if end > from && len > 0.0 {
            ops += rate * len;
            secs += len;
        }
    }
    (secs > 0.0).then(|| ops / secs)
}

/// Builds one stats line: the original benchmark's fields (`nanoTime`, the counts, `fileSize`)
/// plus `{put,get,delete}{P50,P99,P999}us` for every kind of operation that ran in the interval.
pub fn stats_line(
    elapsed: Duration,
    counts: IntervalCounts,
    file_size_bytes: u64,
    latencies: &[(&str, &Histogram<u64>)],
) -> serde_json::Value {
    let mut line = serde_json::json!({
        "nanoTime": u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
        "put": counts.put, "delete": counts.delete, "deleteFound": counts.delete_found,
        "get": counts.get, "getFound": counts.get_found,
        "fileSize": file_size_bytes,
    });
    for (name, h) in latencies {
        if !h.is_empty() {
            line[format!("{name}P50us")] = h.value_at_quantile(0.5).into();
            line[format!("{name}P99us")] = h.value_at_quantile(0.99).into();
            line[format!("{name}P999us")] = h.value_at_quantile(0.999).into();
        }
    }
    line
}

#[derive(Default)]
struct Counts {
    put: AtomicU64,
    delete: AtomicU64,
    delete_found: AtomicU64,
    get: AtomicU64,
    get_found: AtomicU64,
    user_bytes: AtomicU64,
}

impl Counts {
    fn take(&self) -> IntervalCounts {
        IntervalCounts {
            put: self.put.swap(0, Ordering::Relaxed),
            delete: self.delete.swap(0, Ordering::Relaxed),
            delete_found: self.delete_found.swap(0, Ordering::Relaxed),
            get: self.get.swap(0, Ordering::Relaxed),
            get_found: self.get_found.swap(0, Ordering::Relaxed),
        }
    }
}

/// Latency histograms (microseconds) of one thread or merged.
pub(crate) struct Hists {
    pub(crate) put: Histogram<u64>,
    pub(crate) get: Histogram<u64>,
    pub(crate) delete: Histogram<u64>,
}

impl Hists {
    fn new() -> Result<Self> {
        Ok(Hists {
            put: latency_histogram()?,
            get: latency_histogram()?,
            delete: latency_histogram()?,
        })
    }

    fn add(&mut self, other: &Hists) {
        // Same bounds everywhere, so adding cannot fail.
        let _ = self.put.add(&other.put);
        let _ = self.get.add(&other.get);
        let _ = self.delete.add(&other.delete);
    }

    fn reset(&mut self) {
        self.put.reset();
        self.get.reset();
        self.delete.reset();
    }
}

/// Runs `spec` against `store`, handing one stats line per interval to `emit`.
pub fn run(
    store: &dyn BenchStore,
    spec: &RunSpec,
    data_dir: &Path,
    mut emit: impl FnMut(&serde_json::Value),
) -> Result<RunSummary> {
    spec.validate()?;
    let counts = Counts::default();
    let live = LiveKeys::new(spec.key_space);
    if spec.preload {
        if let Some(l) = &live {
            l.put_all_below(spec.key_space);
        }
    }
    let stop = AtomicBool::new(false);
    let hists: Vec<Mutex<Hists>> = (0..spec.threads)
        .map(|_| Hists::new().map(Mutex::new))
        .collect::<Result<_>>()?;
    let first_error = Mutex::new(None::<Error>);
    let started = Instant::now();
    let (mut total_ops, rates, disk, mut all) = std::thread::scope(|scope| -> Result<_> {
        for (t, hist) in hists.iter().enumerate() {
            let (counts, stop, first_error) = (&counts, &stop, &first_error);
            let live = live.as_ref();
            scope.spawn(move || {
                if let Err(e) = client(store, spec, t, counts, live, stop, hist) {
                    first_error.lock().get_or_insert(e);
                    stop.store(true, Ordering::Relaxed);
                }
            });
        }
        let reported = report_intervals(
            store, spec, data_dir, started, &counts, &stop, &hists, &mut emit,
        );
        stop.store(true, Ordering::Relaxed);
        reported
    })?;
    if let Some(e) = first_error.lock().take() {
        return Err(e);
    }
    // Operations finished after the last stats line still count towards the totals.
    total_ops += counts.take().ops();
    for h in &hists {
        all.add(&h.lock());
    }
    let mut lat = all.put;
    let _ = lat.add(&all.get);
    let _ = lat.add(&all.delete);
    let seconds = started.elapsed().as_secs_f64();
    Ok(RunSummary {
        ops: total_ops,
        seconds,
        ops_per_sec: total_ops as f64 / seconds.max(1e-9),
        p50_us: lat.value_at_quantile(0.5),
        p99_us: lat.value_at_quantile(0.99),
        p999_us: lat.value_at_quantile(0.999),
        max_us: lat.max(),
        interval_ops_per_sec_min: rates.iter().map(|r| r.1).reduce(f64::min).unwrap_or(0.0),
        interval_ops_per_sec_max: rates.iter().map(|r| r.1).fold(0.0, f64::max),
        tail_ops_per_sec: tail_mean(&rates),
        tail_disk_bytes: tail_mean(&disk),
        user_bytes_written: counts.user_bytes.load(Ordering::Relaxed),
        live_keys: live.as_ref().map(LiveKeys::count),
        live_bytes: live
            .as_ref()
            .map(|l| l.count() * (key_of(0).len() as u64 + spec.value_bytes as u64)),
    })
}

/// Loads every key of `0..spec.key_space` with a value of `spec.value_bytes` through the
/// store's bulk load (the keys' decimal form sorts like their numbers, so they go in key order
/// without a sort), as [`RunSpec::preload`] asks. Returns the number of keys loaded.
pub fn preload(store: &dyn BenchStore, spec: &RunSpec) -> Result<u64> {
    let pool = ValuePool::seeded(spec.value_bytes, spec.seed);
    // Neighbouring keys get unrelated windows (window `n` and `n + 1` overlap in all but one
    // byte, which compression would exploit within a block).
    let mut entries = (0..spec.key_space).map(|n| (key_of(n).to_vec(), pool.value(mix(n))));
    let loaded = store.bulk_load(&mut entries)?;
    if loaded != spec.key_space {
        return Err(Error::Invalid(format!(
            "{} preloaded {loaded} of {} keys",
            store.name(),
            spec.key_space
        )));
    }
    Ok(loaded)
}

/// The reporting loop of [`run`]: every interval, takes the counts and latencies, emits a line
/// (with the process's resident memory, `rssBytes`, and the memory the engine says it holds,
/// `engineMemoryBytes`, where it says: where the peak RSS goes). Returns the operations counted,
/// the per-interval rates, the bytes on disk at each interval's end and the merged histograms.
#[allow(clippy::too_many_arguments)]
fn report_intervals(
    store: &dyn BenchStore,
    spec: &RunSpec,
    data_dir: &Path,
    started: Instant,
    counts: &Counts,
    stop: &AtomicBool,
    hists: &[Mutex<Hists>],
    emit: &mut impl FnMut(&serde_json::Value),
) -> Result<(u64, Vec<IntervalRate>, Vec<IntervalRate>, Hists)> {
    let mut total_ops = 0u64;
    let mut rates: Vec<IntervalRate> = Vec::new();
    let mut disk: Vec<IntervalRate> = Vec::new();
    let mut all = Hists::new()?;
    let mut last = Instant::now();
    while started.elapsed() < spec.duration && !stop.load(Ordering::Relaxed) {
        let left = spec.duration.saturating_sub(started.elapsed());
        std::thread::sleep(spec.interval.min(left).min(Duration::from_millis(50)));
        let done = started.elapsed() >= spec.duration || stop.load(Ordering::Relaxed);
        if last.elapsed() < spec.interval && !done {
            continue;
        }
        let secs = last.elapsed().as_secs_f64();
        last = Instant::now();
        let c = counts.take();
        total_ops += c.ops();
        let disk_bytes = dir_bytes(data_dir);
        if secs > 0.0 {
            let end = started.elapsed().as_secs_f64();
            rates.push((end, c.ops() as f64 / secs));
            disk.push((end, disk_bytes as f64));
        }
        let mut merged = Hists::new()?;
        for h in hists {
            let mut h = h.lock();
            merged.add(&h);
            h.reset();
        }
        all.add(&merged);
        let mut line = stats_line(
            started.elapsed(),
            c,
            disk_bytes,
            &[
                ("put", &merged.put),
                ("get", &merged.get),
                ("delete", &merged.delete),
            ],
        );
        if let Some(rss) = crate::sys::rss_bytes() {
            line["rssBytes"] = rss.into();
        }
        if let Some(engine) = store.memory_bytes() {
            line["engineMemoryBytes"] = engine.into();
        }
        emit(&line);
    }
    Ok((total_ops, rates, disk, all))
}

fn client(
    store: &dyn BenchStore,
    spec: &RunSpec,
    thread: usize,
    counts: &Counts,
    live: Option<&LiveKeys>,
    stop: &AtomicBool,
    hist: &Mutex<Hists>,
) -> Result<()> {
    let mut rng =
        SmallRng::seed_from_u64(spec.seed ^ (thread as u64 + 1).wrapping_mul(0x9E37_79B9));
    // Incompressible values; each put takes a different window of one buffer.
    let pool = ValuePool::new(spec.value_bytes, &mut rng);
    let mut reservoir = Reservoir::new(RESERVOIR_KEYS_MAX);
    let (put_pct, delete_pct, _) = spec.workload.percents();
    let pick = |rng: &mut SmallRng, reservoir: &Reservoir| -> u64 {
        if rng.gen_bool(spec.known_key_rate) {
            if let Some(k) = reservoir.pick(rng) {
                return k;
            }
        }
        rng.gen_range(0..spec.key_space)
    };
    while !stop.load(Ordering::Relaxed) {
        let r = rng.gen_range(0..100);
        if r < put_pct {
            let k = rng.gen_range(0..spec.key_space);
            let window = rng.gen_range(0..VALUE_WINDOWS);
            let key = key_of(k);
            let value = pool.value(window as u64);
            let t0 = Instant::now();
            store.put(&key, value)?;
            hist.lock().put.saturating_record(micros_since(t0));
            if let Some(l) = live {
                l.put(k);
            }
            counts.put.fetch_add(1, Ordering::Relaxed);
            counts
                .user_bytes
                .fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
            reservoir.offer(k, &mut rng);
        } else if r < put_pct + delete_pct {
            let k = pick(&mut rng, &reservoir);
            let key = key_of(k);
            let t0 = Instant::now();
            // The original benchmark counted deletes that found their key (`deleteFound`): look
            // first, as it did, and time both.
            let found = store.get(&key)?;
            store.delete(&key)?;
            hist.lock().delete.saturating_record(micros_since(t0));
            if let Some(l) = live {
                l.delete(k);
            }
            counts.delete.fetch_add(1, Ordering::Relaxed);
            counts
                .user_bytes
                .fetch_add(key.len() as u64, Ordering::Relaxed);
            if found {
                counts.delete_found.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            let key = key_of(pick(&mut rng, &reservoir));
            let t0 = Instant::now();
            let found = store.get(&key)?;
            hist.lock().get.saturating_record(micros_since(t0));
            counts.get.fetch_add(1, Ordering::Relaxed);
            if found {
                counts.get_found.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_the_last_ten_minutes_or_the_second_half() {
        assert_eq!(tail_mean(&[]), None);
        // An hour of 10 s intervals: 100 ops/s, then 400 ops/s from 3 000 s on.
        let hour: Vec<(f64, f64)> = (1..=360)
            .map(|i| {
                let end = i as f64 * 10.0;
                (end, if end > 3000.0 { 400.0 } else { 100.0 })
            })
            .collect();
        assert_eq!(tail_mean(&hour), Some(400.0));
        // 300 s: the last 150 s, 15 intervals of which 5 ran at 300 and 10 at 100.
        let short: Vec<(f64, f64)> = (1..=30)
            .map(|i| (i as f64 * 10.0, if i > 25 { 300.0 } else { 100.0 }))
            .collect();
        let expected = (5.0 * 300.0 + 10.0 * 100.0) / 15.0;
        let got = tail_mean(&short).unwrap();
        assert!((got - expected).abs() < 1e-9, "{got} against {expected}");
        // Unequal intervals are weighted by their length: a 1 s interval at 1 000 after
        // 19 s at 0 (the window is the last 10 s, and the 19 s interval straddles it).
        let got = tail_mean(&[(19.0, 0.0), (20.0, 1000.0)]).unwrap();
        assert!((got - 50.0).abs() < 1e-9, "{got}");
    }

    #[test]
    fn live_keys_follow_a_set_model() {
        let mut rng = SmallRng::seed_from_u64(11);
        let live = LiveKeys::new(1000).unwrap();
        let mut model = std::collections::HashSet::new();
        for _ in 0..20_000 {
            let k = rng.gen_range(0..1000u64);
            if rng.gen_bool(0.6) {
                live.put(k);
                model.insert(k);
            } else {
                live.delete(k);
                model.remove(&k);
            }
        }
        assert_eq!(live.count(), model.len() as u64);
        live.put_all_below(1000);
        assert_eq!(live.count(), 1000);
        assert!(LiveKeys::new(LIVE_KEYS_TRACKED_MAX + 1).is_none());
    }

    #[test]
    fn reservoir_stays_bounded_and_uniform_enough() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut r = Reservoir::new(1000);
        assert!(r.pick(&mut rng).is_none());
        for k in 0..100_000u64 {
            r.offer(k, &mut rng);
            assert!(r.len() <= 1000);
        }
        assert_eq!(r.len(), 1000);
        // A uniform sample of 0..100_000 has about half its keys in the upper half.
        let upper = r.keys.iter().filter(|&&k| k >= 50_000).count();
        assert!((350..=650).contains(&upper), "upper half held {upper}");
    }

    #[test]
    fn stats_line_has_the_interval_counts_and_percentiles() {
        let mut h = latency_histogram().unwrap();
        for us in 1..=100 {
            h.record(us).unwrap();
        }
        let empty = latency_histogram().unwrap();
        let counts = IntervalCounts {
            put: 5,
            delete: 3,
            delete_found: 1,
            get: 7,
            get_found: 2,
        };
        let line = stats_line(
            Duration::from_secs(10),
            counts,
            4096,
            &[("put", &h), ("get", &empty)],
        );
        for (field, want) in [
            ("nanoTime", 10_000_000_000u64),
            ("put", 5),
            ("delete", 3),
            ("deleteFound", 1),
            ("get", 7),
            ("getFound", 2),
            ("fileSize", 4096),
            ("putP50us", 50),
            ("putP99us", 99),
            ("putP999us", 100),
        ] {
            assert_eq!(line[field].as_u64(), Some(want), "{field} in {line}");
        }
        assert!(line.get("getP99us").is_none(), "no gets ran: {line}");
    }
}
