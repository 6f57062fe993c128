//! Fuzz target `wal_replay`: the newest write-ahead log of an LSM partition: record framing,
//! checksums, batch decoding, the torn-tail rules and salvage.
//! The input is `flags byte | payload`; `strata_fuzz::targets::wal_replay` documents both. An error
//! from the engine is fine; a panic, abort, oversized allocation or hang is a finding.
//!
//! Run in `fuzz/` (see `fuzz/README.md`):
//! `cargo +nightly fuzz run -s none wal_replay -- -max_total_time=300 -rss_limit_mb=2048`
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        strata_fuzz::targets::write_seeds_if_asked("wal_replay");
    },
    |data: &[u8]| {
        strata_fuzz::targets::wal_replay(data);
    }
);
