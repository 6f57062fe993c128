//! Smoke run of the startup benchmark on both of Strata's engines, in this process and in child
//! processes: every step runs, every open finds its sampled keys, and the log engine's states
//! are what the benchmark claims (hint files after the merge, none after they are removed).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use strata_bench::record::{read_jsonl, Line};
use strata_bench::{Engine, EngineSpec, Isolation, Runner, StartupSpec};

fn spec(engine: Engine) -> StartupSpec {
    StartupSpec {
        engine: EngineSpec::new(engine),
        keys: 3_000,
        key_bytes: 16,
        value_bytes: 100,
        load_threads: 2,
        drop_caches: false,
        sample_reads: 500,
        seed: 7,
    }
}

#[test]
fn log_engine_opens_from_segments_from_hints_and_without_hints() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("startup.jsonl");
    let runner = Runner {
        isolation: Isolation::InProcess,
        dir: tmp.path().join("data"),
        keep_data: false,
        progress: false,
    };
    let mut lines = Vec::new();
    let records = runner
        .startup(&spec(Engine::StrataLog), &mut |v| {
            lines.push(v.to_string());
            Ok(())
        })
        .unwrap();
    let steps: Vec<(String, String)> = records
        .iter()
        .map(|r| (r.step.clone(), r.state.clone()))
        .collect();
    let want = [
        ("build", ""),
        ("open", "after-load"),
        ("merge", ""),
        ("open", "after-merge"),
        ("open", "hints-removed"),
    ];
    assert_eq!(
        steps,
        want.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    );
    // No merge ran while loading distinct keys: no hints until the merge writes them.
    assert_eq!(records[1].hint_files, 0);
    assert!(records[2].hint_files > 0, "the merge writes hint files");
    assert_eq!(records[4].hint_files, 0);
    for r in records.iter().filter(|r| r.step == "open") {
        assert_eq!(r.sample_found, 500);
        // The log engine keeps every key in its index.
        assert_eq!(r.index_keys, Some(3_000));
        assert!(r.index_bytes.unwrap() > 3_000 * 16);
    }
    assert!(!runner.dir.exists(), "data removed at the end");
    // The lines parse back as startup records.
    std::fs::write(&out, lines.join("\n")).unwrap();
    let parsed = read_jsonl(&out).unwrap();
    assert_eq!(parsed.len(), 5);
    assert!(parsed.iter().all(|l| matches!(l, Line::Startup(_))));
}

#[test]
fn lsm_engine_startup_runs_in_child_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let runner = Runner {
        isolation: Isolation::Child {
            program: env!("CARGO_BIN_EXE_strata-bench-child").into(),
            args: Vec::new(),
        },
        dir: tmp.path().join("data"),
        keep_data: false,
        progress: false,
    };
    let records = runner
        .startup(&spec(Engine::Strata), &mut |_| Ok(()))
        .unwrap();
    // No hint files in an LSM store: no hints-removed state.
    assert_eq!(records.len(), 4);
    assert!(records.iter().all(|r| r.isolated));
    for r in records.iter().filter(|r| r.step == "open") {
        assert_eq!(r.sample_found, 500);
        assert_eq!(r.index_keys, None, "the LSM keeps no per-key index");
    }
}

#[test]
fn peers_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let runner = Runner {
        isolation: Isolation::InProcess,
        dir: tmp.path().join("data"),
        keep_data: false,
        progress: false,
    };
    let err = runner
        .startup(&spec(Engine::Rocksdb), &mut |_| Ok(()))
        .unwrap_err();
    assert!(err.to_string().contains("Strata's engines"), "{err}");
}
