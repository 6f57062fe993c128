//! The value logs' space rule (`Options::value_log_space_ratio_max`): under steady overwrites,
//! compactions move the values of more logs while the logs take more than the bound times the
//! bytes their live values need. Measured against the same writes with the rule off (the fixed
//! share alone), and every key's value checked against a model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use strata::{Db, Options, SyncMode};

const KEYS: u64 = 4000;
const VALUE_BYTES: usize = 300;
const ROUNDS: u64 = 12;

struct Outcome {
    /// Value-log bytes over the live values' bytes, averaged over the second half of the rounds.
    ratio: f64,
    moved_bytes: u64,
}

/// Overwrites random keys of a fixed key space (a seeded generator: the same writes for every
/// setting) and measures the value logs after each round.
fn overwrite(space_ratio_max: f64) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            partitions: 1,
            sync: SyncMode::Never,
            value_log_space_ratio_max: space_ratio_max,
            // Every table in level 1, where each compaction from level 0 meets every key's
            // pointer (as in a store whose level 1 holds it all): what is dead is seen at once,
            // as in the bench's stores of 10 M keys.
            level1_bytes_target: 64 << 20,
            ..Options::tiny()
        },
    )
    .unwrap();
    let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut ratios = Vec::new();
    for round in 0..ROUNDS {
        for i in 0..KEYS {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // The first round writes every key once; later ones overwrite at random.
            let k = if round == 0 { i } else { x % KEYS };
            let key = format!("key{k:05}").into_bytes();
            let mut value = format!("r{round}-i{i}-").into_bytes();
            value.resize(VALUE_BYTES, b'.');
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
        if round >= ROUNDS / 2 {
            let s = db.stats();
            let vlog: u64 = s.partitions.iter().map(|p| p.value_log_bytes).sum();
            ratios.push(vlog as f64 / (KEYS as usize * VALUE_BYTES) as f64);
        }
    }
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]), "key {k:?}");
    }
    let s = db.stats();
    Outcome {
        ratio: ratios.iter().sum::<f64>() / ratios.len() as f64,
        moved_bytes: s
            .partitions
            .iter()
            .map(|p| p.moved_value_bytes_written)
            .sum(),
    }
}

/// The rule keeps fewer bytes in value logs than the fixed share alone, by moving more values;
/// the data stays right either way.
#[test]
fn the_space_rule_keeps_less_garbage_than_the_fixed_share_alone() {
    let off = overwrite(f64::INFINITY);
    let on = overwrite(1.05);
    eprintln!(
        "value logs / live values: rule off {:.3} (moved {} B), rule at 1.05 {:.3} (moved {} B)",
        off.ratio, off.moved_bytes, on.ratio, on.moved_bytes
    );
    assert!(
        on.moved_bytes > off.moved_bytes,
        "the rule moved no more values: {} against {} bytes",
        on.moved_bytes,
        off.moved_bytes
    );
    assert!(
        on.ratio < off.ratio * 0.95,
        "the rule kept {:.3}x the live values in value logs, the fixed share alone {:.3}x",
        on.ratio,
        off.ratio
    );
}
