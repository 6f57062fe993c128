//! Inputs that reach a finding already reported, recognised so that a run can go on exploring
//! past it: with `STRATA_FUZZ_SKIP_KNOWN=1` a target returns early on them. Without it (the
//! default) they run, so that a fix can be checked by running the reproducers and fuzzing.
//! Each check matches the finding exactly (the conditions under which the engine would make the
//! oversized allocation), so nothing else is skipped. See `fuzz/README.md`, "Findings".

use std::sync::OnceLock;

use crate::alloc_guard::ALLOC_BYTES_MAX;
use crate::format::{self, TRAILER_BYTES};

/// Whether known findings are skipped (`STRATA_FUZZ_SKIP_KNOWN` set).
pub fn skipping() -> bool {
    static S: OnceLock<bool> = OnceLock::new();
    *S.get_or_init(|| std::env::var_os("STRATA_FUZZ_SKIP_KNOWN").is_some())
}

/// Finding 1: `Table::read_raw` allocates `size + 5` bytes for a block before it checks the
/// block against the file's size, with `size` (up to 4 GiB) from the footer (filter, index) or
/// from an index entry.
pub fn table_block_over_limit(table: &[u8]) -> bool {
    let over = |size: u32| size as usize + TRAILER_BYTES > ALLOC_BYTES_MAX;
    let Some(f) = format::footer(table) else {
        return false;
    };
    if over(f.filter_size) || over(f.index_size) {
        return true;
    }
    format::table_index(table).is_some_and(|ix| ix.blocks.iter().any(|b| over(b.2)))
}

/// Finding 2: a table whose entries are not in strictly increasing key order (as its iterator
/// yields them) is merged by a compaction into a new table; `TableBuilder::add` then fails its
/// `debug_assert!` of increasing keys (in a release build the new table is written out of
/// order). Only the compaction is skipped for such a table.
pub fn table_out_of_order(table: &[u8]) -> bool {
    let entries = format::table_entries(table);
    entries.windows(2).any(|w| w[0].0 >= w[1].0)
}

/// Finding 3: `Table::read_raw` computes `offset + size + 5` in `u64` without checking for
/// overflow, with `offset` from the footer: an offset near `u64::MAX` panics (overflow checks)
/// or wraps past the bounds check (release).
pub fn table_offset_overflows(table: &[u8]) -> bool {
    let overflows = |offset: u64, size: u32| {
        offset
            .checked_add(u64::from(size) + TRAILER_BYTES as u64)
            .is_none()
    };
    format::footer(table).is_some_and(|f| {
        overflows(f.filter_offset, f.filter_size) || overflows(f.index_offset, f.index_size)
    })
}

/// Finding 4: a block whose compression byte says LZ4 is decompressed with
/// `lz4_flex::decompress_size_prepended`, which allocates the uncompressed size its first 4
/// bytes claim (up to 4 GiB) before decompressing anything. Any block can say LZ4: filter and
/// index blocks too.
pub fn table_lz4_over_limit(table: &[u8]) -> bool {
    let over = |offset: u64, size: u32| {
        format::block_at(table, offset, size).is_some_and(|(body, ctype)| {
            ctype == 1
                && body.len() >= 4
                && u32::from_le_bytes([body[0], body[1], body[2], body[3]]) as usize
                    > ALLOC_BYTES_MAX
        })
    };
    let Some(f) = format::footer(table) else {
        return false;
    };
    over(f.filter_offset, f.filter_size)
        || over(f.index_offset, f.index_size)
        || format::table_index(table).is_some_and(|ix| ix.blocks.iter().any(|b| over(b.1, b.2)))
}

/// Finding 6: `VlogFile::read` allocates a value pointer's `len` (up to 4 GiB) before reading,
/// without checking it against the value log's size.
pub fn pointer_over_limit(entries: &[format::BlockEntry]) -> bool {
    entries.iter().any(|(_, kind, value)| {
        *kind == 3 && format::decode_pointer(value).is_some_and(|p| p.2 as usize > ALLOC_BYTES_MAX)
    })
}
