//! The memory figures of `Db::stats` against what the engine was given: the bytes written into
//! memtables (with the documented 128-byte charge per entry), a filter's size from its bits per
//! key, a block cache's capacity.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use strata::{Db, Options, SyncMode};

const KEYS: usize = 20_000;
const VALUE_BYTES: usize = 100;

fn key(i: usize) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn options(block_cache_bytes: usize) -> Options {
    Options {
        partitions: 2,
        sync: SyncMode::Never,
        memtable_bytes_max: 64 << 20,
        memtable_budget_bytes: 256 << 20,
        block_cache_bytes,
        bloom_bits_per_key: 10,
        block_bytes: 4096,
        index_every_entries: Options::default().index_every_entries,
        // Values stay in the tables: reads go through data blocks and the cache.
        value_log_bytes_min: None,
        memtable_log_bytes_max: 1 << 30,
        ..Options::tiny()
    }
}

fn in_memtables(s: &strata::Stats) -> u64 {
    s.partitions
        .iter()
        .map(|p| p.memtable_bytes + p.immutable_memtable_bytes)
        .sum()
}

#[test]
fn memtables_count_the_keys_and_values_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(1 << 20)).unwrap();
    let mut written = 0u64;
    for i in 0..KEYS {
        let v = vec![b'v'; VALUE_BYTES];
        db.put(&key(i), &v).unwrap();
        // Keys and values, plus the bookkeeping charge per entry (`PartitionStats`).
        written += (key(i).len() + v.len() + 128) as u64;
    }
    let s = db.stats();
    assert_eq!(in_memtables(&s), written, "{s:?}");
    assert!(s.memory_bytes() >= written);
    db.flush().unwrap();
    let s = db.stats();
    assert_eq!(in_memtables(&s), 0, "flushed: {s:?}");
}

/// A value of at least the separation threshold stays in the log: the memtable holds (and is
/// charged for) a 24-byte pointer to it, so a memtable of 1 KiB values holds several times the
/// entries a memtable of copies would in the same memory.
#[test]
fn memtables_count_a_pointer_for_a_value_left_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            value_log_bytes_min: Some(512),
            ..options(1 << 20)
        },
    )
    .unwrap();
    let mut charged = 0u64;
    for i in 0..2_000 {
        let (small, large) = (vec![b's'; 100], vec![b'l'; 1024]);
        db.put(&key(i), if i % 2 == 0 { &small } else { &large })
            .unwrap();
        let value_charge = if i % 2 == 0 { small.len() } else { 24 };
        charged += (key(i).len() + value_charge + 128) as u64;
    }
    let s = db.stats();
    assert_eq!(in_memtables(&s), charged, "{s:?}");
    for i in (0..2_000).step_by(199) {
        let want = if i % 2 == 0 {
            vec![b's'; 100]
        } else {
            vec![b'l'; 1024]
        };
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&want[..]));
    }
}

#[test]
fn tables_report_their_filters_and_indexes_and_the_cache_its_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let cache_bytes = 1 << 20;
    {
        let db = Db::open(dir.path(), options(cache_bytes)).unwrap();
        for i in 0..KEYS {
            db.put(&key(i), &[b'v'; VALUE_BYTES]).unwrap();
        }
        db.flush().unwrap();
        db.compact().unwrap();
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), options(cache_bytes)).unwrap();
    let s = db.stats();
    let table_bytes: u64 = s.partitions.iter().map(|p| p.table_bytes()).sum();
    let table_memory: u64 = s.partitions.iter().map(|p| p.table_memory_bytes).sum();
    // At least the filters (10 bits per key) and one 8-byte search word per 4 KiB block.
    let filters = (KEYS * 10 / 8) as u64;
    let blocks = table_bytes / 4096;
    assert!(
        table_memory >= filters + blocks * 8,
        "{table_memory} < {filters} + {blocks} x 8"
    );
    // A few percent of the data, not a copy of it.
    assert!(
        table_memory < table_bytes / 20,
        "{table_memory} of {table_bytes}"
    );
    assert_eq!(s.block_cache_bytes, 0, "nothing read yet");

    for i in 0..KEYS {
        assert!(db.get(&key(i)).unwrap().is_some());
    }
    let s = db.stats();
    // The tables are larger than the cache: reading all of them fills it, and no further.
    assert!(table_bytes > 2 * cache_bytes as u64);
    assert!(
        s.block_cache_bytes > cache_bytes as u64 / 2 && s.block_cache_bytes <= cache_bytes as u64,
        "{} of {cache_bytes}",
        s.block_cache_bytes
    );
    assert_eq!(
        s.memory_bytes(),
        s.block_cache_bytes + table_memory,
        "no memtable data after reopening a flushed store"
    );
    db.close().unwrap();

    // Without a cache nothing is held.
    let db = Db::open(dir.path(), options(0)).unwrap();
    for i in (0..KEYS).step_by(7) {
        assert!(db.get(&key(i)).unwrap().is_some());
    }
    assert_eq!(db.stats().block_cache_bytes, 0);
}

/// Value-log collection asks the tree whether each value it reads is live: those lookups read
/// table blocks but leave the block cache to the users' reads (before, a write-only load
/// filled the whole cache with blocks no user had read).
#[test]
fn value_log_collection_leaves_the_block_cache_to_users() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            partitions: 2,
            sync: SyncMode::Never,
            ..Options::tiny()
        },
    )
    .unwrap();
    // Values above the separation threshold, overwritten: value logs with garbage.
    for round in 0..30u32 {
        for k in 0..300u32 {
            let value = format!("{round}:{k}:").repeat(40).into_bytes();
            db.put(&key(k as usize), &value).unwrap();
        }
    }
    db.compact().unwrap();
    let s = db.stats();
    let gcs: u64 = s.partitions.iter().map(|p| p.value_log_gcs).sum();
    assert!(gcs > 0, "no value log was collected: {s:?}");
    assert_eq!(s.block_cache_bytes, 0, "no user has read anything yet");
    // (Collection rewrote live values through the memtable: flushed, reads go to tables.)
    db.flush().unwrap();
    assert_eq!(db.stats().block_cache_bytes, 0, "nor has a flush");
    assert!(db.get(&key(7)).unwrap().is_some());
    assert!(db.stats().block_cache_bytes > 0, "a user's read is cached");
}
