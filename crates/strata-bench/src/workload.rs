//! Workload runs: threads draw operations from the seed's mixes and count them per interval.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

use crate::store::BenchStore;

/// The seed's workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// 90 % put, 5 % delete, 5 % get.
    PutHeavy,
    /// 10 % put, 5 % delete, 85 % get.
    GetHeavy,
    /// 45 % put, 45 % delete, 10 % get.
    DeleteHeavy,
    /// 33 % put, 33 % delete, 34 % get.
    Balanced,
}

impl Workload {
    /// (put, delete, get) percentages.
    pub fn percents(self) -> (u32, u32, u32) {
        match self {
            Workload::PutHeavy => (90, 5, 5),
            Workload::GetHeavy => (10, 5, 85),
            Workload::DeleteHeavy => (45, 45, 10),
            Workload::Balanced => (33, 33, 34),
        }
    }

    /// Parses `put-heavy`, `get-heavy`, `delete-heavy`, `balanced`.
    pub fn parse(s: &str) -> Option<Workload> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "put-heavy" => Some(Workload::PutHeavy),
            "get-heavy" => Some(Workload::GetHeavy),
            "delete-heavy" => Some(Workload::DeleteHeavy),
            "balanced" => Some(Workload::Balanced),
            _ => None,
        }
    }

    /// The name `parse` accepts.
    pub fn name(self) -> &'static str {
        match self {
            Workload::PutHeavy => "put-heavy",
            Workload::GetHeavy => "get-heavy",
            Workload::DeleteHeavy => "delete-heavy",
            Workload::Balanced => "balanced",
        }
    }

    /// All four, in the seed's order.
    pub const ALL: [Workload; 4] = [
        Workload::PutHeavy,
        Workload::GetHeavy,
        Workload::DeleteHeavy,
        Workload::Balanced,
    ];
}

/// One run's parameters.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Operation mix.
    pub workload: Workload,
    /// Share of GET/DELETE keys drawn from keys written before.
    pub known_key_rate: f64,
    /// Keys are drawn from `0..key_space`.
    pub key_space: u64,
    /// Bytes per value.
    pub value_bytes: usize,
    /// Client threads.
    pub threads: usize,
    /// How long to run.
    pub duration: Duration,
    /// How often to print a stats line.
    pub interval: Duration,
    /// Seed of the generators.
    pub seed: u64,
}

/// Totals of a run.
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    /// Operations of all kinds.
    pub ops: u64,
    /// Seconds the run took.
    pub seconds: f64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// 99th percentile latency of all operations, microseconds.
    pub p99_us: u64,
    /// Lowest and highest ops/s of any full interval.
    pub interval_ops_per_sec_min: f64,
    /// See `interval_ops_per_sec_min`.
    pub interval_ops_per_sec_max: f64,
}

const RESERVOIR_KEYS_MAX: usize = 100_000;

#[derive(Default)]
struct Counts {
    put: AtomicU64,
    delete: AtomicU64,
    delete_found: AtomicU64,
    get: AtomicU64,
    get_found: AtomicU64,
}

impl Counts {
    fn take(&self) -> [u64; 5] {
        [
            self.put.swap(0, Ordering::Relaxed),
            self.delete.swap(0, Ordering::Relaxed),
            self.delete_found.swap(0, Ordering::Relaxed),
            self.get.swap(0, Ordering::Relaxed),
            self.get_found.swap(0, Ordering::Relaxed),
        ]
    }
}

struct Hists {
    put: Histogram<u64>,
    get: Histogram<u64>,
    delete: Histogram<u64>,
}

impl Hists {
    fn new() -> Result<Self, String> {
        let h = || Histogram::<u64>::new_with_bounds(1, 60_000_000, 2).map_err(|e| e.to_string());
        Ok(Hists {
            put: h()?,
            get: h()?,
            delete: h()?,
        })
    }
}

/// Bytes of all files under `dir`.
pub fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

fn key_of(n: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    let s = format!("{n:016}");
    k.copy_from_slice(&s.as_bytes()[..16]);
    k
}

/// Runs `spec` against `store`, printing one JSON stats line per interval via `emit`.
pub fn run(
    store: Arc<dyn BenchStore>,
    spec: &RunSpec,
    data_dir: &Path,
    mut emit: impl FnMut(&serde_json::Value),
) -> Result<RunSummary, String> {
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let hists: Vec<Arc<Mutex<Hists>>> = (0..spec.threads)
        .map(|_| Hists::new().map(|h| Arc::new(Mutex::new(h))))
        .collect::<Result<_, _>>()?;
    let errors = Arc::new(Mutex::new(None::<String>));
    let started = Instant::now();
    let handles: Vec<_> = (0..spec.threads)
        .map(|t| {
            let (store, counts, stop, hist, errors) = (
                store.clone(),
                counts.clone(),
                stop.clone(),
                hists[t].clone(),
                errors.clone(),
            );
            let spec = spec.clone();
            std::thread::spawn(move || {
                if let Err(e) = client(&*store, &spec, t, &counts, &stop, &hist) {
                    *errors.lock() = Some(e);
                    stop.store(true, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut total_ops = 0u64;
    let mut rates: Vec<f64> = Vec::new();
    let mut last = Instant::now();
    while started.elapsed() < spec.duration && !stop.load(Ordering::Relaxed) {
        let left = spec.duration.saturating_sub(started.elapsed());
        std::thread::sleep(spec.interval.min(left).min(Duration::from_millis(100)));
        let due = last.elapsed() >= spec.interval || started.elapsed() >= spec.duration;
        if !due {
            continue;
        }
        let secs = last.elapsed().as_secs_f64();
        last = Instant::now();
        let [put, delete, delete_found, get, get_found] = counts.take();
        let ops = put + delete + get;
        total_ops += ops;
        rates.push(ops as f64 / secs);
        let mut line = serde_json::json!({
            "nanoTime": started.elapsed().as_nanos() as u64,
            "put": put, "delete": delete, "deleteFound": delete_found,
            "get": get, "getFound": get_found,
            "fileSize": dir_bytes(data_dir),
        });
        let mut merged = Hists::new()?;
        for h in &hists {
            let mut h = h.lock();
            let _ = merged.put.add(&h.put);
            let _ = merged.get.add(&h.get);
            let _ = merged.delete.add(&h.delete);
            h.put.reset();
            h.get.reset();
            h.delete.reset();
        }
        for (name, h) in [
            ("put", &merged.put),
            ("get", &merged.get),
            ("delete", &merged.delete),
        ] {
            if !h.is_empty() {
                line[format!("{name}P50us")] = h.value_at_quantile(0.5).into();
                line[format!("{name}P99us")] = h.value_at_quantile(0.99).into();
                line[format!("{name}P999us")] = h.value_at_quantile(0.999).into();
            }
        }
        emit(&line);
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
    if let Some(e) = errors.lock().take() {
        return Err(e);
    }
    let seconds = started.elapsed().as_secs_f64();
    let p99 = {
        let mut all = Hists::new()?;
        for h in &hists {
            let h = h.lock();
            let _ = all.put.add(&h.put);
            let _ = all.put.add(&h.get);
            let _ = all.put.add(&h.delete);
        }
        all.put.value_at_quantile(0.99)
    };
    Ok(RunSummary {
        ops: total_ops,
        seconds,
        ops_per_sec: total_ops as f64 / seconds,
        p99_us: p99,
        interval_ops_per_sec_min: rates.iter().copied().fold(f64::INFINITY, f64::min),
        interval_ops_per_sec_max: rates.iter().copied().fold(0.0, f64::max),
    })
}

fn client(
    store: &dyn BenchStore,
    spec: &RunSpec,
    thread: usize,
    counts: &Counts,
    stop: &AtomicBool,
    hist: &Mutex<Hists>,
) -> Result<(), String> {
    let mut rng =
        SmallRng::seed_from_u64(spec.seed ^ (thread as u64 + 1).wrapping_mul(0x9E37_79B9));
    // Incompressible values; each put takes a different window of this buffer.
    let mut pool = vec![0u8; spec.value_bytes + 4096];
    rng.fill_bytes(&mut pool);
    let mut reservoir: Vec<u64> = Vec::new();
    let mut seen = 0u64;
    let (put_pct, delete_pct, _) = spec.workload.percents();
    let pick = |rng: &mut SmallRng, reservoir: &Vec<u64>| -> u64 {
        if !reservoir.is_empty() && rng.gen_bool(spec.known_key_rate) {
            reservoir[rng.gen_range(0..reservoir.len())]
        } else {
            rng.gen_range(0..spec.key_space)
        }
    };
    while !stop.load(Ordering::Relaxed) {
        let r = rng.gen_range(0..100);
        let t0 = Instant::now();
        if r < put_pct {
            let k = rng.gen_range(0..spec.key_space);
            let off = rng.gen_range(0..4096);
            store.put(&key_of(k), &pool[off..off + spec.value_bytes])?;
            let us = t0.elapsed().as_micros() as u64;
            let _ = hist.lock().put.record(us.max(1));
            counts.put.fetch_add(1, Ordering::Relaxed);
            // Reservoir sampling keeps a uniform sample of written keys in bounded memory.
            seen += 1;
            if reservoir.len() < RESERVOIR_KEYS_MAX {
                reservoir.push(k);
            } else {
                let j = rng.gen_range(0..seen);
                if (j as usize) < RESERVOIR_KEYS_MAX {
                    reservoir[j as usize] = k;
                }
            }
        } else if r < put_pct + delete_pct {
            let k = key_of(pick(&mut rng, &reservoir));
            // The seed counted deletes that found their key: look first, like it did.
            let found = store.get(&k)?;
            store.delete(&k)?;
            let us = t0.elapsed().as_micros() as u64;
            let _ = hist.lock().delete.record(us.max(1));
            counts.delete.fetch_add(1, Ordering::Relaxed);
            if found {
                counts.delete_found.fetch_add(1, Ordering::Relaxed);
            }
        } else {
            let k = key_of(pick(&mut rng, &reservoir));
            let found = store.get(&k)?;
            let us = t0.elapsed().as_micros() as u64;
            let _ = hist.lock().get.record(us.max(1));
            counts.get.fetch_add(1, Ordering::Relaxed);
            if found {
                counts.get_found.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(())
}
