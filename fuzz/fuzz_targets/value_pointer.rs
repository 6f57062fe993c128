//! Fuzz target `value_pointer`: value pointers in a table and the value log they point into (the
//! table is re-encoded with the pointers the input chooses; the log is patched).
//! The input is `flags byte | payload`; `strata_fuzz::targets::value_pointer` documents both. An
//! error from the engine is fine; a panic, abort, oversized allocation or hang is a finding.
//!
//! Run in `fuzz/` (see `fuzz/README.md`):
//! `cargo +nightly fuzz run -s none value_pointer -- -max_total_time=300 -rss_limit_mb=2048`
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        strata_fuzz::targets::write_seeds_if_asked("value_pointer");
    },
    |data: &[u8]| {
        strata_fuzz::targets::value_pointer(data);
    }
);
