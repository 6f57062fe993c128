//! An open table's sparse index in memory: one entry per data block (the block's last key, its
//! offset and size), packed into a few flat arrays.
//!
//! Packed because the index is the part of a table that stays in memory whatever the block
//! cache holds: with a `Bytes` and a heap allocation per key, an entry cost about 88 bytes (a
//! 48 GiB data set of 4 KiB values kept 1.1 GiB of index), where the arrays below cost the key's
//! own bytes plus 24 (about 40 for 16-byte keys).

/// The sparse index of one table. Blocks are numbered in key order from 0.
pub(crate) struct SparseIndex {
    /// Every block's last key, back to back.
    keys: Vec<u8>,
    /// Where each key ends in `keys` (key `i` starts where key `i - 1` ends). `u32`: the index
    /// block these come from is at most 4 GiB (its size is a `u32` in the footer).
    key_ends: Vec<u32>,
    offsets: Vec<u64>,
    sizes: Vec<u32>,
    /// 8 bytes of each key (after the `skip` bytes every key of the table shares), big-endian,
    /// zero-padded, so the binary search of a point lookup compares integers in a few cache
    /// lines; only equal words compare whole keys.
    words: Vec<u64>,
    skip: usize,
}

impl SparseIndex {
    /// An index with room for `blocks` entries whose keys total about `key_bytes`.
    pub(crate) fn with_capacity(blocks: usize, key_bytes: usize) -> SparseIndex {
        SparseIndex {
            keys: Vec::with_capacity(key_bytes),
            key_ends: Vec::with_capacity(blocks),
            offsets: Vec::with_capacity(blocks),
            sizes: Vec::with_capacity(blocks),
            words: Vec::new(),
            skip: 0,
        }
    }

    /// Appends the next block's entry; `None` when the keys outgrow `u32` offsets.
    pub(crate) fn push(&mut self, last_key: &[u8], offset: u64, size: u32) -> Option<()> {
        self.keys.extend_from_slice(last_key);
        self.key_ends.push(u32::try_from(self.keys.len()).ok()?);
        self.offsets.push(offset);
        self.sizes.push(size);
        Some(())
    }

    /// Finishes building: `skip` is how many leading bytes every key of the table shares (the
    /// first and last key's common prefix). Computes the search words and frees spare room.
    pub(crate) fn seal(&mut self, skip: usize) {
        self.skip = skip;
        self.words = (0..self.len())
            .map(|i| key_word(self.key(i), skip))
            .collect();
        self.keys.shrink_to_fit();
    }

    pub(crate) fn len(&self) -> usize {
        self.key_ends.len()
    }

    /// Bytes of memory this index holds (its arrays' capacity).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.keys.capacity()
            + self.key_ends.capacity() * std::mem::size_of::<u32>()
            + self.offsets.capacity() * std::mem::size_of::<u64>()
            + self.sizes.capacity() * std::mem::size_of::<u32>()
            + self.words.capacity() * std::mem::size_of::<u64>()
    }

    /// Block `i`'s last key.
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        let start = match i {
            0 => 0,
            _ => self.key_ends[i - 1] as usize,
        };
        &self.keys[start..self.key_ends[i] as usize]
    }

    pub(crate) fn offset(&self, i: usize) -> u64 {
        self.offsets[i]
    }

    pub(crate) fn size(&self, i: usize) -> u32 {
        self.sizes[i]
    }

    /// The last block's last key: the table's largest key.
    pub(crate) fn last_key(&self) -> Option<&[u8]> {
        self.len().checked_sub(1).map(|i| self.key(i))
    }

    /// The first block whose last key is `>= key`, for a key within the table's key range
    /// (sharing the table's common prefix); `len()` when there is none.
    pub(crate) fn block_for(&self, key: &[u8]) -> usize {
        let want = key_word(key, self.skip);
        // `word(a) < word(b)` implies `a < b` (and `>` implies `>`): the words are the first
        // 8 bytes after a shared prefix, zero padding sorting before any byte.
        let (mut lo, mut hi) = (0usize, self.words.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let before = match self.words[mid].cmp(&want) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Greater => false,
                std::cmp::Ordering::Equal => self.key(mid) < key,
            };
            if before {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The first block whose last key is `>= key`, for any key (a range scan's lower bound
    /// may lie outside the table's range).
    pub(crate) fn first_at_or_after(&self, key: &[u8]) -> usize {
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.key(mid) < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// 8 bytes of `key` after its first `skip`, big-endian, zero-padded.
fn key_word(key: &[u8], skip: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(rest) = key.get(skip..) {
        let n = rest.len().min(8);
        w[..n].copy_from_slice(&rest[..n]);
    }
    u64::from_be_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index_of(keys: &[&[u8]]) -> SparseIndex {
        let mut ix = SparseIndex::with_capacity(keys.len(), 0);
        for (i, k) in keys.iter().enumerate() {
            ix.push(k, i as u64 * 100, 90 + i as u32).unwrap();
        }
        let skip = match (keys.first(), keys.last()) {
            (Some(a), Some(b)) => a.iter().zip(b.iter()).take_while(|(x, y)| x == y).count(),
            _ => 0,
        };
        ix.seal(skip);
        ix
    }

    #[test]
    fn entries_read_back_as_pushed() {
        let keys: [&[u8]; 4] = [b"", b"apple", b"apricot", b"banana"];
        let ix = index_of(&keys);
        assert_eq!(ix.len(), 4);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(ix.key(i), *k);
            assert_eq!(ix.offset(i), i as u64 * 100);
            assert_eq!(ix.size(i), 90 + i as u32);
        }
        assert_eq!(ix.last_key(), Some(&b"banana"[..]));
        assert_eq!(index_of(&[]).last_key(), None);
    }

    #[test]
    fn searches_agree_with_a_linear_scan() {
        let keys: Vec<Vec<u8>> = (0..200u32)
            .map(|i| format!("user:{:08}", i * 7).into_bytes())
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let ix = index_of(&refs);
        let probes: Vec<Vec<u8>> = (0..1500u32)
            .map(|i| format!("user:{i:08}").into_bytes())
            .chain([
                b"user:".to_vec(),
                b"user:00000000x".to_vec(),
                b"zzz".to_vec(),
            ])
            .collect();
        for p in &probes {
            let want = keys
                .iter()
                .position(|k| k[..] >= p[..])
                .unwrap_or(keys.len());
            assert_eq!(ix.first_at_or_after(p), want, "{p:?}");
            if p[..] >= keys[0][..] && p[..] <= keys[keys.len() - 1][..] {
                assert_eq!(ix.block_for(p), want, "{p:?}");
            }
        }
        // Below and above the table's range.
        assert_eq!(ix.first_at_or_after(b"a"), 0);
        assert_eq!(ix.first_at_or_after(b"zzz"), keys.len());
    }
}
