//! Fuzz target `table`: a table file: footer, filter, index and data blocks (plain and LZ4). The
//! manifest is rewritten to describe the input (size, entries, key range), so that its blocks are
//! read.
//! The input is `flags byte | payload`; `strata_fuzz::targets::table` documents both. An error from
//! the engine is fine; a panic, abort, oversized allocation or hang is a finding.
//!
//! Run in `fuzz/` (see `fuzz/README.md`):
//! `cargo +nightly fuzz run -s none table -- -max_total_time=300 -rss_limit_mb=2048`
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        strata_fuzz::targets::write_seeds_if_asked("table");
    },
    |data: &[u8]| {
        strata_fuzz::targets::table(data);
    }
);
