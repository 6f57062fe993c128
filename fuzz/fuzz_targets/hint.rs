//! Fuzz target `hint`: a hint file of the hash engine (written by a merge): magic, version,
//! entries, checksum; its entries point into a segment that GETs then read.
//! The input is `flags byte | payload`; `strata_fuzz::targets::hint` documents both. An error from
//! the engine is fine; a panic, abort, oversized allocation or hang is a finding.
//!
//! Run in `fuzz/` (see `fuzz/README.md`):
//! `cargo +nightly fuzz run -s none hint -- -max_total_time=300 -rss_limit_mb=2048`
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        strata_fuzz::targets::write_seeds_if_asked("hint");
    },
    |data: &[u8]| {
        strata_fuzz::targets::hint(data);
    }
);
