//! Property tests of the table format: whatever is written reads back identically, point reads
//! and range scans agree with a `BTreeMap` model, with and without compression, in the current
//! format and in formats 1 (whole-bitmap filter) and 2 (no restart points) that earlier builds
//! wrote.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;

use super::*;

fn build(
    entries: &BTreeMap<Vec<u8>, Slot>,
    compression: Compression,
    block_bytes: usize,
    index_every_entries: usize,
    format_version: u32,
) -> (tempfile::TempDir, Arc<Table>) {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        compression,
        block_bytes,
        index_every_entries,
        ..Options::default()
    };
    let mut b = TableBuilder::create(dir.path(), 1, &opts).unwrap();
    if format_version != TABLE_FORMAT_VERSION {
        b = b.with_format(format_version);
    }
    for (k, slot) in entries {
        b.add(k, slot).unwrap();
    }
    let meta = b.finish().unwrap();
    assert_eq!(meta.entries, entries.len() as u64);
    let t = Table::open(
        crate::vfs::real(),
        &table_path(dir.path(), 1),
        1,
        Arc::new(BlockCache::new(1 << 20)),
    )
    .unwrap();
    assert_eq!(t.size, meta.size);
    (dir, Arc::new(t))
}

fn slot() -> impl Strategy<Value = Slot> {
    prop_oneof![
        1 => Just(Slot::Delete),
        6 => proptest::collection::vec(any::<u8>(), 0..200).prop_map(|v| Slot::Put(Bytes::from(v))),
        2 => (any::<u64>(), any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(file, offset, len, crc)| {
            Slot::Pointer(crate::lsm::vlog::ValuePtr { file, offset, len, crc })
        }),
    ]
}

fn entries() -> impl Strategy<Value = BTreeMap<Vec<u8>, Slot>> {
    proptest::collection::btree_map(
        proptest::collection::vec(any::<u8>(), 0..24),
        slot(),
        1..300,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn tables_read_back_what_was_written(
        entries in entries(),
        lz4 in any::<bool>(),
        format_version in 1u32..=TABLE_FORMAT_VERSION,
        block_bytes in 64usize..2048,
        index_every in 1usize..64,
        probes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..24), 0..50),
        lo in proptest::collection::vec(any::<u8>(), 0..4),
        hi in proptest::collection::vec(any::<u8>(), 0..4),
    ) {
        let compression = if lz4 { Compression::Lz4 } else { Compression::None };
        let (_dir, t) = build(&entries, compression, block_bytes, index_every, format_version);
        // Full iteration equals the input.
        let all: Vec<(Vec<u8>, Slot)> = t
            .iter(Bound::Unbounded, Bound::Unbounded, true)
            .map(|r| {
                let (k, s) = r.unwrap();
                (k.to_vec(), s)
            })
            .collect();
        let want: Vec<(Vec<u8>, Slot)> = entries.clone().into_iter().collect();
        prop_assert_eq!(all, want);
        // Point reads: present keys and random probes.
        for k in entries.keys().chain(probes.iter()) {
            let got = t.get(k, bloom::hash(k), true).unwrap();
            let want = entries.get(k).cloned();
            prop_assert_eq!(got, want);
        }
        // Range scans equal the model's range.
        let range = (Bound::Included(Bytes::from(lo.clone())), Bound::Excluded(Bytes::from(hi.clone())));
        if lo <= hi {
            let got: Vec<Vec<u8>> = t.iter(range.0, range.1, true).map(|r| r.unwrap().0.to_vec()).collect();
            let want: Vec<Vec<u8>> = entries.range(lo..hi).map(|(k, _)| k.clone()).collect();
            prop_assert_eq!(got, want);
        }
    }
}

/// Keys over a three-letter alphabet share long prefixes (and are often prefixes of each
/// other), which is what the block search's prefix bookkeeping must get right.
fn prefix_heavy_key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'c')], 0..7)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn point_reads_agree_with_the_model_on_keys_sharing_prefixes(
        entries in proptest::collection::btree_map(prefix_heavy_key(), slot(), 1..200),
        block_bytes in 64usize..4096,
        index_every in 1usize..128,
        probes in proptest::collection::vec(prefix_heavy_key(), 0..80),
    ) {
        let (_dir, t) = build(&entries, Compression::None, block_bytes, index_every, TABLE_FORMAT_VERSION);
        for k in entries.keys().chain(probes.iter()) {
            prop_assert_eq!(t.get(k, bloom::hash(k), true).unwrap(), entries.get(k).cloned(), "{:?}", k);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The block search and seek against the model, in blocks with restart points (format 3)
    /// and without (formats 1 and 2), for present and absent keys (no filter or index in front
    /// of it here).
    #[test]
    fn block_search_finds_what_a_walk_finds(
        entries in proptest::collection::btree_map(prefix_heavy_key(), slot(), 1..64),
        probes in proptest::collection::vec(prefix_heavy_key(), 0..64),
        with_restarts in any::<bool>(),
    ) {
        let mut b = block::BlockBuilder::new(with_restarts);
        for (k, s) in &entries {
            b.add(k, s);
        }
        b.finish_restarts();
        let bytes = Bytes::from(b.buf.clone());
        for k in entries.keys().chain(probes.iter()) {
            prop_assert_eq!(
                block::find(&bytes, k, with_restarts).unwrap(),
                entries.get(k).cloned(),
                "{:?}",
                k
            );
        }
        // Seeking to a key then walking yields what a walk yields from that key on.
        let walk_all = |it: &mut block::BlockIter| -> Vec<(Vec<u8>, Slot)> {
            let mut out = Vec::new();
            while let Some(e) = it.advance() {
                out.push((it.key().to_vec(), e.unwrap()));
            }
            out
        };
        let all = walk_all(&mut block::BlockIter::new(bytes.clone(), with_restarts));
        let model: Vec<(Vec<u8>, Slot)> = entries.clone().into_iter().collect();
        prop_assert_eq!(&all, &model);
        for k in entries.keys().chain(probes.iter()) {
            let mut sought = block::BlockIter::new(bytes.clone(), with_restarts);
            sought.seek(k).unwrap();
            let want: Vec<_> = all.iter().filter(|(key, _)| key >= k).cloned().collect();
            prop_assert_eq!(walk_all(&mut sought), want, "seek {:?}", k);
        }
        // Damaged blocks give errors or answers, never panics.
        for cut in [1usize, 2, 5, 9] {
            let short = bytes.slice(..bytes.len().saturating_sub(cut));
            for k in probes.iter().take(8) {
                let _ = block::find(&short, k, with_restarts);
                let mut it = block::BlockIter::new(short.clone(), with_restarts);
                if it.seek(k).is_ok() {
                    while let Some(Ok(_)) = it.advance() {}
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The index search on 8-byte words finds the block a search on whole keys finds, for every
    /// key within the table's range (keys that share long prefixes, some only by their padding).
    #[test]
    fn index_search_on_words_agrees_with_whole_keys(
        entries in proptest::collection::btree_map(
            proptest::collection::vec(prop_oneof![Just(0u8), Just(b'a'), Just(b'b')], 0..14),
            slot(),
            1..300,
        ),
        block_bytes in 64usize..512,
        index_every in 1usize..8,
        probes in proptest::collection::vec(
            proptest::collection::vec(prop_oneof![Just(0u8), Just(b'a'), Just(b'b')], 0..14),
            0..100,
        ),
    ) {
        let (_dir, t) = build(&entries, Compression::None, block_bytes, index_every, TABLE_FORMAT_VERSION);
        for k in entries.keys().chain(probes.iter()) {
            if k[..] < t.min_key[..] || k[..] > t.max_key[..] {
                continue;
            }
            let want = (0..t.index.len()).position(|i| t.index.key(i) >= &k[..]).unwrap_or(t.index.len());
            prop_assert_eq!(t.block_for(k), want, "{:?}", k);
        }
    }
}

/// A footer whose checksum holds but whose block offsets and sizes are absurd (as a fuzzer
/// crafted them) is corruption: no overflow in the bounds arithmetic, no allocation of what the
/// file claims.
#[test]
fn absurd_block_offsets_and_sizes_in_a_footer_are_corruption() {
    let entries: BTreeMap<Vec<u8>, Slot> = (0..50u32)
        .map(|i| (format!("k{i:04}").into_bytes(), Slot::Put(Bytes::from("v"))))
        .collect();
    let (dir, _) = build(&entries, Compression::None, 256, 16, TABLE_FORMAT_VERSION);
    let path = table_path(dir.path(), 1);
    let good = std::fs::read(&path).unwrap();
    let foot = good.len() - FOOTER_BYTES as usize;
    // Footer: filter offset u64 | filter size u32 | index offset u64 | index size u32 |
    // version u32 | crc u32 of bytes 0..28 | magic.
    for (at, bytes) in [
        (12usize, (u64::MAX - 2).to_le_bytes().to_vec()),
        (20, u32::MAX.to_le_bytes().to_vec()),
        (0, (u64::MAX - 2).to_le_bytes().to_vec()),
    ] {
        let mut bad = good.clone();
        bad[foot + at..foot + at + bytes.len()].copy_from_slice(&bytes);
        let crc = crc32c::crc32c(&bad[foot..foot + 28]);
        bad[foot + 28..foot + 32].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&path, &bad).unwrap();
        let e = Table::open(
            crate::vfs::real(),
            &path,
            1,
            Arc::new(BlockCache::new(1 << 20)),
        )
        .err()
        .unwrap();
        assert!(e.is_corruption(), "field at {at}: {e}");
    }
}
