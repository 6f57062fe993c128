//! Strata's benchmark harness: the seeds' workloads and read-only benchmark, run against Strata
//! and (feature `peers`) RocksDB, fjall and sled through one [`BenchStore`] trait, with results
//! as JSON lines and plots.
//!
//! The data path of a benchmark: a [`spec`] says what to run; the [`runner`] opens the engine
//! ([`store`], with the peers in `store::peers`) on a fresh directory, in this process or a child of its own, and drives
//! a [`workload`] (seed 000: mixed put/delete/get, one stats line per interval) or the
//! [`readonly`] benchmark (seed 003), the document benchmarks of seed 002 ([`docs`]: load,
//! get, partial get, update, atomic increment), or the [`startup`] benchmark (open time and
//! memory per key of Strata's engines); [`sys`] reads peak memory and bytes written from the
//! kernel; [`record`] defines the JSON lines; [`compare`] and [`matrix`] sequence runs; [`report`]
//! turns JSONL files into PNG plots and an index.html.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod compare;
pub mod docs;
pub mod error;
pub mod matrix;
pub mod readonly;
pub mod record;
pub mod report;
pub mod runner;
pub mod spec;
pub mod startup;
pub mod store;
pub mod sys;
pub mod workload;

pub use docs::{DocsInput, DocsPhase, DocsSpec};
pub use error::{Error, Result};
pub use record::{ReadonlyRecord, RunRecord, RunSummary};
pub use runner::{Isolation, Runner};
pub use spec::{
    BenchSpec, CompressionSpec, Engine, EngineSpec, ReadonlySpec, RunSpec, SyncSpec, Workload,
};
pub use store::{open_store, BenchStore, StrataStore};
pub use workload::run;
