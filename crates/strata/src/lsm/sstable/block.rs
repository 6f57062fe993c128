//! Data blocks: sorted entries with the key prefix shared with the previous entry elided.
//!
//! Entry: `kind u8 (1 put, 2 delete, 3 value pointer) | shared varint | unshared varint |
//! value_len varint (not for deletes) | key suffix | value` (for kind 3 the value is an encoded
//! `ValuePtr`). The first entry of a block has `shared = 0`. A block is decoded
//! front to back; the sparse index points at blocks, so a lookup reads one block.

use bytes::Bytes;

use crate::coding::{put_varint, Reader};
use crate::lsm::memtable::Slot;
use crate::lsm::vlog::ValuePtr;

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
        let mut r = Reader::new(&self.block[self.pos..]);
        let res = (|| {
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
            if shared > self.key.len() {
                return None;
            }
            let suffix = r.bytes(unshared)?;
            self.key.truncate(shared);
            self.key.extend_from_slice(suffix);
            let vstart = self.pos + r.position();
            r.bytes(vlen)?;
            match kind {
                1 => Some(Slot::Put(self.block.slice(vstart..vstart + vlen))),
                3 => ValuePtr::decode(&self.block[vstart..vstart + vlen]).map(Slot::Pointer),
                _ => Some(Slot::Delete),
            }
        })();
        match res {
            Some(slot) => {
                self.pos += r.position();
                Some(Ok(slot))
            }
            None => {
                self.pos = self.block.len();
                Some(Err("malformed block entry"))
            }
        }
    }

    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }
}
