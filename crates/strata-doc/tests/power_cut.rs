//! Documents and their key names across a power cut: documents whose field names keep changing
//! (so names get ids and the name record is rewritten all through the run) are stored with every
//! write fsynced, on a file system that cuts the power at its Nth changing call
//! (`strata::vfs::FaultFs`). After the cut the store must open, every acknowledged document must
//! be there and decode (no document may refer to a name id the name record lost) and equal what
//! was written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use strata::vfs::FaultFs;
use strata::{Options, SyncMode};
use strata_doc::{Doc, DocStore};

const DOCS: u64 = 120;
const POINTS: u64 = 30;

fn options(fs: &FaultFs) -> Options {
    Options {
        partitions: 2,
        sync: SyncMode::Always,
        memtable_bytes_max: 8 << 10,
        fs: Arc::new(fs.clone()),
        ..Options::tiny()
    }
}

/// Document `n`: fields named after `n` in two ways, so new names appear every few documents
/// and old ones repeat (and so get ids).
fn doc(n: u64) -> Doc {
    Doc::from_json(&format!(
        r#"{{"id":{n},"f{a}":"v{n}","g{b}":{{"h{a}":[{n},"x"]}},"score":{n}}}"#,
        a = n % 13,
        b = n / 20
    ))
    .unwrap()
}

/// Stores documents until a call fails; returns how many were acknowledged and the changing
/// calls made.
fn run(point: Option<u64>) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultFs::new(dir.path()).unwrap();
    let store = DocStore::open(dir.path().join("db"), options(&fs)).unwrap();
    if let Some(n) = point {
        fs.crash_at(n);
    }
    let mut acked = 0u64;
    for n in 0..DOCS {
        if store.put(&Doc::Int(n as i64), &doc(n)).is_err() {
            break;
        }
        acked = n + 1;
    }
    let calls = fs.mutations();
    drop(store);
    fs.power_cut().unwrap();
    let ctx = format!("crash at call {point:?} of {calls}, {acked} documents acknowledged");
    let store = DocStore::open(dir.path().join("db"), options(&fs))
        .unwrap_or_else(|e| panic!("{ctx}: the store does not open: {e}"));
    for n in 0..acked {
        let got = store
            .get(&Doc::Int(n as i64))
            .unwrap_or_else(|e| panic!("{ctx}: document {n} does not decode: {e}"));
        assert_eq!(got, Some(doc(n)), "{ctx}: document {n}");
    }
    // The documents after the acknowledged ones were never acknowledged: any of them that
    // survived must still decode.
    for n in acked..DOCS {
        if let Err(e) = store.get(&Doc::Int(n as i64)) {
            panic!("{ctx}: unacknowledged document {n} does not decode: {e}");
        }
    }
    calls
}

#[test]
fn documents_and_their_key_names_survive_power_cuts() {
    let total = run(None);
    assert!(total > 50, "only {total} changing calls");
    for i in 0..POINTS {
        run(Some(1 + i * total / POINTS));
    }
}
