//! Shared pieces of the engine's integration tests: the benchmark workloads, a deterministic key
//! and value generator, and an in-memory model (`BTreeMap`) that every store is checked against.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The benchmark workloads as (put, delete, get) percentages.
#[derive(Debug, Clone, Copy)]
pub enum Workload {
    PutHeavy,
    GetHeavy,
    DeleteHeavy,
    Balanced,
}

pub const ALL_WORKLOADS: [Workload; 4] = [
    Workload::PutHeavy,
    Workload::GetHeavy,
    Workload::DeleteHeavy,
    Workload::Balanced,
];

/// The known-key rates (share of GETs and DELETEs that hit a written key): low, mid, high.
pub const KNOWN_KEY_RATES: [f64; 3] = [0.1, 0.5, 0.9];

impl Workload {
    pub fn percents(self) -> (u32, u32, u32) {
        match self {
            Workload::PutHeavy => (90, 5, 5),
            Workload::GetHeavy => (10, 5, 85),
            Workload::DeleteHeavy => (45, 45, 10),
            Workload::Balanced => (33, 33, 34),
        }
    }
}

#[derive(Debug, Clone)]
pub enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Get(Vec<u8>),
}

/// Generates operations of a workload; keys of GET/DELETE come from keys written before with
/// probability `known_rate` (the "key find rate").
pub struct OpGen {
    rng: SmallRng,
    workload: Workload,
    known_rate: f64,
    known: Vec<Vec<u8>>,
    prefix: Vec<u8>,
    key_space: u64,
}

impl OpGen {
    pub fn new(seed: u64, workload: Workload, known_rate: f64, prefix: &[u8]) -> Self {
        OpGen {
            rng: SmallRng::seed_from_u64(seed),
            workload,
            known_rate,
            known: Vec::new(),
            prefix: prefix.to_vec(),
            key_space: 1_000_000,
        }
    }

    fn fresh_key(&mut self) -> Vec<u8> {
        let mut k = self.prefix.clone();
        k.extend_from_slice(format!("{:08}", self.rng.gen_range(0..self.key_space)).as_bytes());
        k
    }

    fn some_key(&mut self) -> Vec<u8> {
        if !self.known.is_empty() && self.rng.gen_bool(self.known_rate) {
            let i = self.rng.gen_range(0..self.known.len());
            self.known[i].clone()
        } else {
            self.fresh_key()
        }
    }

    pub fn next_op(&mut self) -> Op {
        let (put, delete, _) = self.workload.percents();
        let r = self.rng.gen_range(0..100);
        if r < put {
            let key = if !self.known.is_empty() && self.rng.gen_bool(0.2) {
                self.some_key()
            } else {
                self.fresh_key()
            };
            let len = self.rng.gen_range(0..300);
            let value: Vec<u8> = (0..len).map(|_| self.rng.gen()).collect();
            // Bounded reservoir of written keys to draw known keys from.
            if self.known.len() < 50_000 {
                self.known.push(key.clone());
            } else {
                let i = self.rng.gen_range(0..self.known.len());
                self.known[i] = key.clone();
            }
            Op::Put(key, value)
        } else if r < put + delete {
            Op::Delete(self.some_key())
        } else {
            Op::Get(self.some_key())
        }
    }

    pub fn rng(&mut self) -> &mut SmallRng {
        &mut self.rng
    }
}

/// The model every store must agree with.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Both engines: every behavioural test runs against each.
pub const ENGINES: [strata::Engine; 2] = [strata::Engine::Lsm, strata::Engine::Log];

/// Options for tests of `engine`: tiny memtables / segments so background work runs constantly.
pub fn tiny(engine: strata::Engine) -> strata::Options {
    strata::Options {
        engine,
        ..strata::Options::tiny()
    }
}

/// Every file under `dir` (recursively) whose name ends with `suffix`, sorted.
pub fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
