//! The log engine's in-memory index: every live key -> where its newest record is.
//!
//! Memory is the engine's stated limit, so the entry is kept small: a key of up to
//! [`INLINE_KEY_BYTES_MAX`] bytes lives inside the entry (no heap allocation, no allocator
//! overhead), a longer one in its own allocation; the location packs segment, offset and length
//! into 16 bytes. An entry is 40 bytes plus one control byte of the hash table, which keeps at
//! least 1/8 of its slots free and grows by doubling; [`Index::bytes`] reports what the table
//! really holds (capacity, not just entries).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use hashbrown::hash_map::EntryRef;

use xxhash_rust::xxh3::Xxh3Builder;

use crate::batch::{Entry, Kind};

/// Longest key stored inside an index entry.
pub(crate) const INLINE_KEY_BYTES_MAX: usize = 22;
/// Bits of a [`SegId`] given to the merge output number (`sub`).
const SUB_BITS: u32 = 20;
/// Largest `sub` a segment id can carry.
pub(crate) const SUB_MAX: u32 = (1 << SUB_BITS) - 1;

/// A segment's place in the order of all segments: `(number, sub)` packed into one `u64`, so
/// that it orders by number, then sub. Merge outputs keep the number of the newest input and
/// take higher subs, so they sort after their inputs and before the active segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SegId(u64);

impl SegId {
    /// `None` if `sub` does not fit (more than a million merge outputs under one number).
    pub(crate) fn new(number: u64, sub: u32) -> Option<SegId> {
        (sub <= SUB_MAX && number < (1 << (64 - SUB_BITS)))
            .then_some(SegId((number << SUB_BITS) | u64::from(sub)))
    }

    pub(crate) fn number(self) -> u64 {
        self.0 >> SUB_BITS
    }

    pub(crate) fn sub(self) -> u32 {
        (self.0 & u64::from(SUB_MAX)) as u32
    }
}

/// Where the newest record of a key is. 16 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Loc {
    pub(crate) seg: SegId,
    pub(crate) offset: u32,
    pub(crate) len: u32,
}

impl Loc {
    /// The record of `len` bytes at `offset` of segment `seg`. Segments are capped at
    /// [`crate::options::LOG_SEGMENT_BYTES_LIMIT`] (plus one record), so both fit in `u32`;
    /// anything else is refused rather than truncated.
    pub(crate) fn new(seg: SegId, offset: u64, len: u64) -> crate::Result<Loc> {
        match (u32::try_from(offset), u32::try_from(len)) {
            (Ok(offset), Ok(len)) => Ok(Loc { seg, offset, len }),
            _ => Err(crate::Error::LimitExceeded {
                what: "record position in a log segment",
                actual: usize::try_from(offset.saturating_add(len)).unwrap_or(usize::MAX),
                max: u32::MAX as usize,
            }),
        }
    }
}

/// A key as the index holds it.
#[derive(Clone)]
pub(crate) enum IKey {
    Inline {
        len: u8,
        bytes: [u8; INLINE_KEY_BYTES_MAX],
    },
    Heap(Box<[u8]>),
}

impl IKey {
    pub(crate) fn new(key: &[u8]) -> IKey {
        if key.len() <= INLINE_KEY_BYTES_MAX {
            let mut bytes = [0u8; INLINE_KEY_BYTES_MAX];
            bytes[..key.len()].copy_from_slice(key);
            IKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            IKey::Heap(key.into())
        }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            IKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            IKey::Heap(b) => b,
        }
    }
}

// Hash and equality are those of the key's bytes, as `Borrow<[u8]>` requires: lookups take a
// plain `&[u8]`.
impl Hash for IKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl PartialEq for IKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for IKey {}

impl From<&[u8]> for IKey {
    fn from(key: &[u8]) -> IKey {
        IKey::new(key)
    }
}

impl Borrow<[u8]> for IKey {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

/// Key -> location of every live key of one partition, plus the dead bytes per segment that
/// updates leave behind (what decides when to merge).
pub(crate) struct Index {
    // hashbrown's own map for `entry_ref`: one probe per insert, and a key is copied into an
    // entry only when it is new.
    map: hashbrown::HashMap<IKey, Loc, Xxh3Builder>,
    heap_key_bytes: usize,
}

impl Index {
    pub(crate) fn new() -> Index {
        Index {
            map: hashbrown::HashMap::with_hasher(Xxh3Builder::new()),
            heap_key_bytes: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Makes room for `additional` more keys at once (opening from hint files knows the count).
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.map.reserve(additional);
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<Loc> {
        self.map.get(key).copied()
    }

    pub(crate) fn get_mut(&mut self, key: &[u8]) -> Option<&mut Loc> {
        self.map.get_mut(key)
    }

    /// Points `key` at `loc`; returns where it pointed before.
    pub(crate) fn insert(&mut self, key: &[u8], loc: Loc) -> Option<Loc> {
        match self.map.entry_ref(key) {
            EntryRef::Occupied(mut o) => Some(std::mem::replace(o.get_mut(), loc)),
            EntryRef::Vacant(v) => {
                if key.len() > INLINE_KEY_BYTES_MAX {
                    self.heap_key_bytes += key.len();
                }
                v.insert(loc);
                None
            }
        }
    }

    pub(crate) fn remove(&mut self, key: &[u8]) -> Option<Loc> {
        let old = self.map.remove(key)?;
        if key.len() > INLINE_KEY_BYTES_MAX {
            self.heap_key_bytes -= key.len();
        }
        Some(old)
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.map.keys().map(IKey::as_slice)
    }

    /// Bytes the index holds: the table's slots (an entry and a control byte each, at its
    /// capacity: a table at 7/8 load has `capacity * 8 / 7` slots) plus keys kept on the heap.
    pub(crate) fn bytes(&self) -> u64 {
        let slot_bytes = std::mem::size_of::<(IKey, Loc)>() + 1;
        let slots = if self.map.capacity() == 0 {
            0
        } else {
            (self.map.capacity() * 8 / 7).next_power_of_two()
        };
        (slots * slot_bytes + self.heap_key_bytes) as u64
    }

    /// Applies one record's entries at `loc`; adds the bytes they make dead to `dead`.
    pub(crate) fn apply(
        &mut self,
        dead: &mut HashMap<SegId, u64>,
        entries: &[Entry<'_>],
        loc: Loc,
    ) {
        for &(kind, key, _) in entries {
            let old = match kind {
                Kind::Put => self.insert(key, loc),
                Kind::Delete => {
                    // The tombstone record itself is garbage as soon as a merge can drop it.
                    *dead.entry(loc.seg).or_default() +=
                        u64::from(loc.len) / entries.len().max(1) as u64;
                    self.remove(key)
                }
            };
            // An earlier entry of this same record is not a dead record: the record stays live
            // while its last entry for a key is.
            if let Some(old) = old.filter(|old| *old != loc) {
                *dead.entry(old.seg).or_default() += u64::from(old.len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_stay_small() {
        assert_eq!(std::mem::size_of::<Loc>(), 16);
        assert_eq!(std::mem::size_of::<IKey>(), 24);
    }

    #[test]
    fn segment_ids_order_by_number_then_sub() {
        let a = SegId::new(5, SUB_MAX).unwrap();
        let b = SegId::new(6, 0).unwrap();
        assert!(a < b);
        assert!(SegId::new(5, 1).unwrap() < SegId::new(5, 2).unwrap());
        assert_eq!((a.number(), a.sub()), (5, SUB_MAX));
        assert!(SegId::new(5, SUB_MAX + 1).is_none());
        assert!(SegId::new(u64::MAX, 0).is_none());
    }

    #[test]
    fn short_and_long_keys_behave_like_their_bytes() {
        let mut index = Index::new();
        let seg = SegId::new(1, 0).unwrap();
        let at = |offset| Loc {
            seg,
            offset,
            len: 10,
        };
        let long = vec![7u8; 100];
        let keys: [&[u8]; 5] = [b"", b"a", &[0u8; 22], &[0u8; 23], &long];
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(index.insert(k, at(i as u32)), None);
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(index.get(k), Some(at(i as u32)), "key of {} bytes", k.len());
        }
        assert_eq!(index.get(&[0u8; 21]), None);
        assert_eq!(index.insert(b"a", at(9)), Some(at(1)));
        assert_eq!(index.remove(&long), Some(at(4)));
        assert_eq!(index.get(&long), None);
        assert_eq!(index.heap_key_bytes, 23);
        let mut got: Vec<Vec<u8>> = index.keys().map(<[u8]>::to_vec).collect();
        got.sort();
        assert_eq!(
            got,
            vec![vec![], vec![0u8; 22], vec![0u8; 23], b"a".to_vec()]
        );
        assert!(index.bytes() >= 4 * 41);
    }
}
