//! Data blocks: sorted entries with the key prefix shared with the previous entry elided.
//!
//! Entry: `kind u8 (1 put, 2 delete, 3 value pointer) | shared varint | unshared varint |
//! value_len varint (not for deletes) | key suffix | value` (for kind 3 the value is an encoded
//! `ValuePtr`). The first entry of a block has `shared = 0`. A block is decoded
//! front to back; the sparse index points at blocks, so a lookup reads one block.

use bytes::Bytes;

use crate::lsm::memtable::Slot;
use crate::lsm::vlog::ValuePtr;
use crate::util::coding::{put_varint, Reader};

/// Accumulates entries of one block.
#[derive(Default)]
pub(crate) struct BlockBuilder {
    pub(crate) buf: Vec<u8>,
    pub(crate) last_key: Vec<u8>,
    pub(crate) entries: usize,
}

impl BlockBuilder {
    pub(crate) fn add(&mut self, key: &[u8], slot: &Slot) {
        let shared = if self.entries == 0 {
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

    pub(crate) fn reset(&mut self) {
        self.buf.clear();
        self.last_key.clear();
        self.entries = 0;
    }
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
    match kind {
        1 => Some(Slot::Put(block.slice(value))),
        3 => ValuePtr::decode(&block[value]).map(Slot::Pointer),
        _ => Some(Slot::Delete),
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
pub(crate) fn find(block: &Bytes, key: &[u8]) -> Result<Option<Slot>, &'static str> {
    match first_at_or_after(block, key)? {
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
fn first_at_or_after<'b>(
    block: &'b [u8],
    key: &[u8],
) -> Result<Option<(usize, RawEntry<'b>)>, &'static str> {
    use std::cmp::Ordering;
    let mut pos = 0usize;
    let mut matched = 0usize;
    let mut prev_len = 0usize;
    while pos < block.len() {
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
    Ok(None)
}

/// Walks the entries of a decoded block. `next` returns `None` at the end and `Some(Err)` on
/// malformed bytes (the caller names the file).
pub(crate) struct BlockIter {
    block: Bytes,
    pos: usize,
    key: Vec<u8>,
}

impl BlockIter {
    pub(crate) fn new(block: Bytes) -> Self {
        BlockIter {
            block,
            pos: 0,
            key: Vec::new(),
        }
    }

    /// Advances to the next entry; the current key is then in [`BlockIter::key`].
    pub(crate) fn advance(&mut self) -> Option<Result<Slot, &'static str>> {
        if self.pos >= self.block.len() {
            return None;
        }
        let parsed = entry_at(&self.block, self.pos, self.key.len()).and_then(|e| {
            self.key.truncate(e.shared);
            self.key.extend_from_slice(e.suffix);
            Some((slot_of(&self.block, e.kind, e.value)?, e.next))
        });
        match parsed {
            Some((slot, next)) => {
                self.pos = next;
                Some(Ok(slot))
            }
            None => {
                self.pos = self.block.len();
                Some(Err(MALFORMED))
            }
        }
    }

    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }

    /// On a fresh iterator: skips the entries whose keys sort before `lower` without building
    /// their keys or values ([`find`]'s search), so the next [`BlockIter::advance`] returns the
    /// first entry at or after it (a range scan's first block; walking there entry by entry
    /// decoded and compared up to a whole block per table per scan).
    pub(crate) fn seek(&mut self, lower: &[u8]) -> Result<(), &'static str> {
        match first_at_or_after(&self.block, lower)? {
            Some((pos, e)) => {
                self.key.clear();
                self.key
                    .extend_from_slice(lower.get(..e.shared).ok_or(MALFORMED)?);
                self.pos = pos;
            }
            None => self.pos = self.block.len(),
        }
        Ok(())
    }
}
