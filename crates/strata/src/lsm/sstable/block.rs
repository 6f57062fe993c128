//! Data blocks: sorted entries with the key prefix shared with the previous entry elided.
//!
//! Entry: `kind u8 (1 put, 2 delete, 3 value pointer) | shared varint | unshared varint |
//! value_len varint (not for deletes) | key suffix | value` (for kind 3 the value is an encoded
//! `ValuePtr`). The first entry of a block has `shared = 0`. The sparse index points at
//! blocks, so a lookup reads one block.
//!
//! Table format 3 adds *restart points* (LevelDB's block format): every
//! [`RESTART_INTERVAL_ENTRIES`]th entry stores its whole key (`shared = 0`), and the block
//! ends with the offsets of those entries (`u32` LE each) and their count (`u32` LE). A search
//! then bisects the restart keys and walks at most one interval instead of the block from its
//! start: a lookup or a scan's first seek in a 4 KiB block of small entries decoded about half
//! of its ~100 entries before. Formats 1 and 2 have no restart array; readers are told which.

use bytes::Bytes;

use crate::lsm::memtable::{Slot, SlotRef};
use crate::lsm::vlog::ValuePtr;
use crate::util::coding::{put_varint, Reader};

/// Entries from one restart point to the next (format 3): a search walks at most this many.
pub(crate) const RESTART_INTERVAL_ENTRIES: usize = 16;

/// Bytes of a restart offset and of the count at the block's end.
const RESTART_BYTES: usize = 4;

/// Accumulates entries of one block.
#[derive(Default)]
pub(crate) struct BlockBuilder {
    pub(crate) buf: Vec<u8>,
    pub(crate) last_key: Vec<u8>,
    pub(crate) entries: usize,
    /// Whether blocks get restart points (table format 3).
    pub(crate) with_restarts: bool,
    /// Offsets of the restart entries so far.
    restarts: Vec<u32>,
}

impl BlockBuilder {
    /// A builder writing restart points when `with_restarts` (table format 3 and later).
    pub(crate) fn new(with_restarts: bool) -> Self {
        BlockBuilder {
            with_restarts,
            ..BlockBuilder::default()
        }
    }

    pub(crate) fn add(&mut self, key: &[u8], slot: &Slot) {
        let restart = self.with_restarts && self.entries % RESTART_INTERVAL_ENTRIES == 0;
        if restart {
            // A block is far below 4 GiB (`block_bytes` is a few KiB; one entry may exceed
            // it, but entries are bounded by the key and value limits).
            self.restarts
                .push(u32::try_from(self.buf.len()).unwrap_or(u32::MAX));
        }
        let shared = if self.entries == 0 || restart {
            0
        } else {
            key.iter()
                .zip(&self.last_key)
                .take_while(|(a, b)| a == b)
                .count()
        };
        self.buf.push(slot.kind_byte());
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, (key.len() - shared) as u64);
        match slot {
            Slot::Put(v) => {
                put_varint(&mut self.buf, v.len() as u64);
                self.buf.extend_from_slice(&key[shared..]);
                self.buf.extend_from_slice(v);
            }
            Slot::Pointer(p) => {
                let mut enc = Vec::with_capacity(24);
                p.encode(&mut enc);
                put_varint(&mut self.buf, enc.len() as u64);
                self.buf.extend_from_slice(&key[shared..]);
                self.buf.extend_from_slice(&enc);
            }
            Slot::Delete => self.buf.extend_from_slice(&key[shared..]),
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.entries += 1;
    }

    /// Appends the restart array (format 3) after the entries: the block is then complete.
    pub(crate) fn finish_restarts(&mut self) {
        if !self.with_restarts {
            return;
        }
        for r in &self.restarts {
            self.buf.extend_from_slice(&r.to_le_bytes());
        }
        let count = u32::try_from(self.restarts.len()).unwrap_or(u32::MAX);
        self.buf.extend_from_slice(&count.to_le_bytes());
    }

    pub(crate) fn reset(&mut self) {
        self.buf.clear();
        self.last_key.clear();
        self.entries = 0;
        self.restarts.clear();
    }
}

/// Where a block's entries end and, in format 3, where its restart array starts.
#[derive(Clone, Copy)]
struct Layout {
    /// Entries occupy `..entries_end`.
    entries_end: usize,
    /// Restart points (0 for formats without them).
    restarts: usize,
}

impl Layout {
    /// Reads the layout of `block`; `has_restarts` says whether its table format has them.
    fn of(block: &[u8], has_restarts: bool) -> Result<Layout, &'static str> {
        if !has_restarts {
            return Ok(Layout {
                entries_end: block.len(),
                restarts: 0,
            });
        }
        const BAD: &str = "malformed block restart array";
        let count_at = block.len().checked_sub(RESTART_BYTES).ok_or(BAD)?;
        let count = read_u32(block, count_at).ok_or(BAD)? as usize;
        let entries_end = count
            .checked_mul(RESTART_BYTES)
            .and_then(|n| count_at.checked_sub(n))
            .ok_or(BAD)?;
        // Every block with entries starts with a restart.
        if (entries_end > 0) != (count > 0) {
            return Err(BAD);
        }
        Ok(Layout {
            entries_end,
            restarts: count,
        })
    }

    /// Offset of restart `i`'s entry.
    fn restart(&self, block: &[u8], i: usize) -> Result<usize, &'static str> {
        let at = self.entries_end + i * RESTART_BYTES;
        match read_u32(block, at) {
            Some(off) if (off as usize) < self.entries_end => Ok(off as usize),
            _ => Err("restart point outside the block's entries"),
        }
    }
}

fn read_u32(block: &[u8], at: usize) -> Option<u32> {
    let bytes = block.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

const MALFORMED: &str = "malformed block entry";

/// Where one entry's parts lie in a block.
struct RawEntry<'a> {
    kind: u8,
    /// Bytes of the previous key this entry's key starts with.
    shared: usize,
    /// The rest of the key.
    suffix: &'a [u8],
    /// The value's bytes within the block.
    value: std::ops::Range<usize>,
    /// Offset of the next entry.
    next: usize,
}

/// Parses the entry at `pos`; `prev_key_len` bounds its shared prefix. `None` on malformed bytes.
fn entry_at(block: &[u8], pos: usize, prev_key_len: usize) -> Option<RawEntry<'_>> {
    let mut r = Reader::new(block.get(pos..)?);
    let kind = r.u8()?;
    if !(1..=3).contains(&kind) {
        return None;
    }
    let shared = usize::try_from(r.varint()?).ok()?;
    let unshared = usize::try_from(r.varint()?).ok()?;
    let vlen = match kind {
        2 => 0,
        _ => usize::try_from(r.varint()?).ok()?,
    };
    if shared > prev_key_len {
        return None;
    }
    let suffix = r.bytes(unshared)?;
    let vstart = pos + r.position();
    r.bytes(vlen)?;
    Some(RawEntry {
        kind,
        shared,
        suffix,
        value: vstart..vstart + vlen,
        next: pos + r.position(),
    })
}

/// The slot an entry holds (its value a slice of `block`, not a copy).
fn slot_of(block: &Bytes, kind: u8, value: std::ops::Range<usize>) -> Option<Slot> {
    Some(RawSlot::of(block, kind, value)?.owned(block))
}

/// What an entry holds, its value left in the block: a walk that only looks at it (a visit)
/// or passes it (an older version shadowed by a newer) takes no reference count on the block.
#[derive(Clone)]
enum RawSlot {
    /// The value's bytes within the block.
    Put(std::ops::Range<usize>),
    Pointer(ValuePtr),
    Delete,
}

impl RawSlot {
    /// `None` for a value pointer that does not decode.
    fn of(block: &[u8], kind: u8, value: std::ops::Range<usize>) -> Option<RawSlot> {
        match kind {
            1 => Some(RawSlot::Put(value)),
            3 => ValuePtr::decode(block.get(value)?).map(RawSlot::Pointer),
            _ => Some(RawSlot::Delete),
        }
    }

    fn owned(&self, block: &Bytes) -> Slot {
        match self {
            RawSlot::Put(value) => Slot::Put(block.slice(value.clone())),
            RawSlot::Pointer(p) => Slot::Pointer(*p),
            RawSlot::Delete => Slot::Delete,
        }
    }
}

/// Finds `key` in a decoded block without rebuilding keys or decoding values on the way.
///
/// Keys are prefix-compressed and sorted, so a point lookup needs few byte comparisons: with
/// `matched` = the length of the prefix `key` shares with the previous entry (which sorts before
/// `key`), an entry that shares more than `matched` bytes with the previous entry still sorts
/// before `key`, one that shares fewer sorts after it (the search ends), and only one that
/// shares exactly `matched` bytes has its stored suffix compared. Values are skipped, and only
/// the entry found is decoded. (This relies on `shared` being the whole common prefix, which the
/// builder writes; a damaged block may be answered "not found", never with a panic.)
pub(crate) fn find(
    block: &Bytes,
    key: &[u8],
    has_restarts: bool,
) -> Result<Option<Slot>, &'static str> {
    match first_at_or_after(block, key, has_restarts)? {
        // At or after `key`, sharing `key`'s first `e.shared` bytes: it is `key` when its
        // suffix is the rest of `key`.
        Some((_, e)) if key.get(e.shared..) == Some(e.suffix) => {
            slot_of(block, e.kind, e.value).map(Some).ok_or(MALFORMED)
        }
        _ => Ok(None),
    }
}

/// The first entry of `block` whose key sorts at or after `key`, with its offset, found with
/// [`find`]'s few comparisons; `None` when every entry sorts before `key`. Its whole key is
/// `key[..shared]` followed by its suffix (every entry before it shares at least `shared` bytes
/// with `key`).
///
/// With restart points, the restart keys (whole keys) are bisected first: the answer lies
/// after the last restart whose key sorts before `key` and at or before the next one, whose
/// key does not, so the walk starts at the one and stops at the other.
fn first_at_or_after<'b>(
    block: &'b [u8],
    key: &[u8],
    has_restarts: bool,
) -> Result<Option<(usize, RawEntry<'b>)>, &'static str> {
    use std::cmp::Ordering;
    let layout = Layout::of(block, has_restarts)?;
    let mut pos = 0usize;
    let mut stop = layout.entries_end;
    if layout.restarts > 1 {
        // First restart whose key is at or after `key`.
        let (mut lo, mut hi) = (0usize, layout.restarts);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let e = entry_at(block, layout.restart(block, mid)?, 0).ok_or(MALFORMED)?;
            if e.shared != 0 {
                return Err(MALFORMED);
            }
            if e.suffix < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo > 0 {
            pos = layout.restart(block, lo - 1)?;
        }
        if lo < layout.restarts {
            stop = layout.restart(block, lo)?;
        }
    }
    let mut matched = 0usize;
    let mut prev_len = 0usize;
    while pos < stop {
        let e = entry_at(block, pos, prev_len).ok_or(MALFORMED)?;
        prev_len = e.shared + e.suffix.len();
        let order = match e.shared.cmp(&matched) {
            Ordering::Greater => Ordering::Less,
            Ordering::Less => Ordering::Greater,
            Ordering::Equal => {
                let rest = key.get(e.shared..).unwrap_or(&[]);
                matched = e.shared
                    + e.suffix
                        .iter()
                        .zip(rest)
                        .take_while(|(a, b)| a == b)
                        .count();
                e.suffix.cmp(rest)
            }
        };
        match order {
            Ordering::Less => pos = e.next,
            Ordering::Greater | Ordering::Equal => return Ok(Some((pos, e))),
        }
    }
    // Everything before `stop` sorts before `key`; the restart entry at `stop`, if any, does
    // not (whole key: `shared` is 0).
    if stop < layout.entries_end {
        let e = entry_at(block, stop, 0).ok_or(MALFORMED)?;
        return Ok(Some((stop, e)));
    }
    Ok(None)
}

/// Walks the entries of a decoded block. `next` returns `None` at the end and `Some(Err)` on
/// malformed bytes (the caller names the file).
pub(crate) struct BlockIter {
    block: Bytes,
    pos: usize,
    /// Where the entries end (the restart array follows in format 3).
    end: usize,
    has_restarts: bool,
    /// A malformed restart array, reported by the first `advance`.
    bad_layout: Option<&'static str>,
    key: Vec<u8>,
    /// The current entry's slot.
    slot: RawSlot,
}

impl BlockIter {
    pub(crate) fn new(block: Bytes, has_restarts: bool) -> Self {
        let (end, bad_layout) = match Layout::of(&block, has_restarts) {
            Ok(l) => (l.entries_end, None),
            Err(e) => (0, Some(e)),
        };
        BlockIter {
            block,
            pos: 0,
            end,
            has_restarts,
            bad_layout,
            key: Vec::new(),
            slot: RawSlot::Delete,
        }
    }

    /// Advances to the next entry; the current key is then in [`BlockIter::key`].
    #[cfg(test)]
    pub(crate) fn advance(&mut self) -> Option<Result<Slot, &'static str>> {
        Some(self.step()?.map(|()| self.slot.owned(&self.block)))
    }

    /// Advances to the next entry without building its slot: its key is then in
    /// [`BlockIter::key`], its slot in [`BlockIter::slot_ref`] (or [`BlockIter::slot`]).
    pub(crate) fn step(&mut self) -> Option<Result<(), &'static str>> {
        if let Some(e) = self.bad_layout.take() {
            return Some(Err(e));
        }
        if self.pos >= self.end {
            return None;
        }
        let parsed = entry_at(&self.block, self.pos, self.key.len()).and_then(|e| {
            self.key.truncate(e.shared);
            self.key.extend_from_slice(e.suffix);
            Some((RawSlot::of(&self.block, e.kind, e.value)?, e.next))
        });
        match parsed {
            Some((slot, next)) => {
                self.pos = next;
                self.slot = slot;
                Some(Ok(()))
            }
            None => {
                self.pos = self.end;
                Some(Err(MALFORMED))
            }
        }
    }

    /// The current entry's slot, its value borrowed from the block.
    pub(crate) fn slot_ref(&self) -> SlotRef<'_> {
        match &self.slot {
            RawSlot::Put(value) => SlotRef::Put(self.block.get(value.clone()).unwrap_or_default()),
            RawSlot::Pointer(p) => SlotRef::Pointer(*p),
            RawSlot::Delete => SlotRef::Delete,
        }
    }

    /// The current entry's slot, its value a slice of the block.
    pub(crate) fn slot(&self) -> Slot {
        self.slot.owned(&self.block)
    }

    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }

    /// On a fresh iterator: skips the entries whose keys sort before `lower` without building
    /// their keys or values ([`find`]'s search), so the next [`BlockIter::advance`] returns the
    /// first entry at or after it (a range scan's first block; walking there entry by entry
    /// decoded and compared up to a whole block per table per scan).
    pub(crate) fn seek(&mut self, lower: &[u8]) -> Result<(), &'static str> {
        if let Some(e) = self.bad_layout {
            return Err(e);
        }
        match first_at_or_after(&self.block, lower, self.has_restarts)? {
            Some((pos, e)) => {
                self.key.clear();
                self.key
                    .extend_from_slice(lower.get(..e.shared).ok_or(MALFORMED)?);
                self.pos = pos;
            }
            None => self.pos = self.end,
        }
        Ok(())
    }
}
