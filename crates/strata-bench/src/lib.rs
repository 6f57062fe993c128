//! The benchmark harness: runs the seeds' workloads against any [`BenchStore`] from many
//! threads and reports, every interval, one JSON line with the seed's fields
//! (`nanoTime, put, delete, deleteFound, get, getFound, fileSize`, counts per interval) plus
//! latency percentiles from HDR histograms.
//!
//! Known keys come from a bounded per-thread reservoir of keys that thread wrote (as the seed
//! did), so memory stays flat however long the run.

pub mod store;
pub mod workload;

pub use store::{BenchStore, StrataStore};
pub use workload::{run, RunSpec, RunSummary, Workload};
