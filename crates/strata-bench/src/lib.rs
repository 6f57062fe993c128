//! Strata's benchmark harness: the workloads, read-only, startup and document benchmarks, run
//! against Strata and (feature `peers`) RocksDB, fjall and sled through one [`BenchStore`] trait,
//! with results as JSON lines and plots.
//!
//! The workloads reproduce the experiments Strata was designed from: a hash-partitioned LSM
//! store measured with PUT-, GET- and DELETE-heavy mixes across partition counts ([`workload`],
//! [`matrix`]); a read-only sorted-file store with a sparse index, measured at several index
//! rates ([`readonly`]); and a JSON document store measured loading Reddit comments, then getting
//! and updating them by id ([`docs`]).
//!
//! Modules import each other one way, from the bottom of this list up:
//!
//! - [`error`], [`sys`] (peak memory, bytes written and cores, from the kernel), [`keys`] (the
//!   generated keys and values), [`latency`] (histograms), [`dir`] (a run's data directory);
//! - [`spec`]: what to run (engines, workloads, the benchmarks' settings);
//! - [`record`]: the JSON lines every benchmark writes and the report reads, and the [`Sink`]
//!   they go to;
//! - [`store`]: the engines under test (the peers in `store::peers`);
//! - the benchmarks, each a run in this process on a fresh directory: [`workload`] (mixed
//!   put/delete/get, one stats line per interval), [`readonly`], [`startup`] (open time and
//!   memory per key of Strata's engines), [`docs`];
//! - [`runner`]: runs a benchmark in this process or in a child process of its own;
//! - [`compare`] and [`matrix`]: sequences of runs;
//! - [`report`] (which needs only [`record`] and [`spec`]): JSONL files in, PNG charts, a
//!   Markdown table and an index.html out.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod compare;
pub mod dir;
pub mod docs;
pub mod error;
pub mod keys;
pub mod latency;
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

pub use error::{Error, Result};
pub use record::{ReadonlyRecord, RunRecord, RunSummary, Sink};
pub use runner::{Isolation, Runner};
pub use spec::{
    BenchSpec, CompressionSpec, DocsInput, DocsPhase, DocsSpec, Engine, EngineSpec, ReadonlySpec,
    RunSpec, StartupSpec, SyncSpec, Workload,
};
pub use store::{open_store, BenchStore, StrataStore};
pub use workload::run;
