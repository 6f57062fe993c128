//! Latency histograms: one shape (microseconds, 1 us to 10 minutes, 2 significant digits) for
//! every benchmark, so histograms of different threads and intervals can always be added.

use std::time::Instant;

use hdrhistogram::Histogram;

use crate::error::{Error, Result};

/// A histogram of microseconds from 1 us to 10 minutes with 2 significant digits.
pub fn latency_histogram() -> Result<Histogram<u64>> {
    Histogram::<u64>::new_with_bounds(1, 600_000_000, 2)
        .map_err(|e| Error::Invalid(format!("histogram: {e}")))
}

/// Microseconds since `t0`, at least 1 (histograms start at 1).
pub fn micros_since(t0: Instant) -> u64 {
    u64::try_from(t0.elapsed().as_micros())
        .unwrap_or(u64::MAX)
        .max(1)
}
