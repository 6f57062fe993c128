//! Fuzz target `meta`: the `STRATA` metadata file: magic, version, partition count, hash and engine
//! ids.
//! The input is `flags byte | payload`; `strata_fuzz::targets::meta` documents both. An error from
//! the engine is fine; a panic, abort, oversized allocation or hang is a finding.
//!
//! Run in `fuzz/` (see `fuzz/README.md`):
//! `cargo +nightly fuzz run -s none meta -- -max_total_time=300 -rss_limit_mb=2048`
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        strata_fuzz::targets::write_seeds_if_asked("meta");
    },
    |data: &[u8]| {
        strata_fuzz::targets::meta(data);
    }
);
