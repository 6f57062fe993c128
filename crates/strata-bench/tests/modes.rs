//! Smoke runs of every harness mode on a temporary directory, a second or two each, with Strata
//! only (no `peers` feature needed): run, compare (in this process and in child processes),
//! matrix, read-only, and the report over the JSON lines they wrote.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use strata_bench::record::{read_jsonl, Line};
use strata_bench::{
    compare, matrix, readonly, report, BenchSpec, Engine, EngineSpec, Isolation, ReadonlySpec,
    RunSpec, Runner, Workload,
};

fn quick_run() -> RunSpec {
    RunSpec {
        key_space: 100_000,
        duration: Duration::from_millis(600),
        interval: Duration::from_millis(200),
        ..RunSpec::seed_defaults(Workload::Balanced)
    }
}

fn runner(dir: &Path, isolation: Isolation) -> Runner {
    Runner {
        isolation,
        dir: dir.join("data"),
        keep_data: false,
        progress: false,
    }
}

/// A sink appending to a JSONL file, as the CLI does.
fn jsonl_sink(path: &Path) -> impl FnMut(&serde_json::Value) -> strata_bench::Result<()> + '_ {
    move |v| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        writeln!(f, "{v}").unwrap();
        Ok(())
    }
}

#[test]
fn every_mode_runs_and_the_report_draws_its_output() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results.jsonl");
    let mut sink = jsonl_sink(&results);
    let strata = EngineSpec::new(Engine::Strata);

    // run
    let r = runner(tmp.path(), Isolation::InProcess)
        .run(
            &BenchSpec {
                engine: strata.clone(),
                run: quick_run(),
            },
            &mut sink,
        )
        .unwrap();
    assert!(r.summary.ops > 0);
    assert!(r.summary.user_bytes_written > 0);
    assert!(r.write_amplification_engine.is_some());
    let stats = r.engine_stats.as_ref().unwrap();
    assert!(stats["walBytesWritten"].as_u64().unwrap() > 0, "{stats}");
    assert!(
        !tmp.path().join("data").exists(),
        "data is removed after the run"
    );

    // compare, in child processes (the crate's own child binary)
    let child = Isolation::Child {
        program: PathBuf::from(env!("CARGO_BIN_EXE_strata-bench-child")),
        args: Vec::new(),
    };
    let records = compare::compare(
        &runner(tmp.path(), child),
        std::slice::from_ref(&strata),
        &[Workload::PutHeavy, Workload::GetHeavy],
        &quick_run(),
        &mut sink,
    )
    .unwrap();
    assert_eq!(records.len(), 2);
    assert!(records.iter().all(|r| r.isolated && r.summary.ops > 0));
    if cfg!(target_os = "linux") {
        assert!(records.iter().all(|r| r.peak_rss_bytes.is_some()));
        assert!(records[0].io_write_bytes.is_some());
    }
    let table = compare::format_table(&records);
    assert!(table.contains("| put-heavy | strata |"), "{table}");
    assert!(table.contains("1.00x"), "{table}");

    // matrix: 2 partition counts x 2 thread counts, shorter runs
    let specs = matrix::matrix_specs(
        &strata,
        &RunSpec {
            duration: Duration::from_millis(300),
            interval: Duration::from_millis(100),
            ..quick_run()
        },
        &[Workload::DeleteHeavy],
        &[1, 2],
        &[1, 2],
    );
    let grid =
        matrix::matrix(&runner(tmp.path(), Isolation::InProcess), &specs, &mut sink).unwrap();
    assert_eq!(grid.len(), 4);

    // read-only, with several on-disk sort runs
    let ro = ReadonlySpec {
        engine: strata.clone(),
        data_bytes: 2 << 20,
        key_bytes: 16,
        value_bytes: 256,
        known_key_rate: 0.5,
        threads: 2,
        duration: Duration::from_millis(500),
        sort_run_keys: 1000,
        bulk_load: true,
        seed: 3,
    };
    let reads = [
        readonly::ReadPoint {
            known_key_rate: 0.5,
            threads: 2,
        },
        readonly::ReadPoint {
            known_key_rate: 0.9,
            threads: 1,
        },
    ];
    let phases = runner(tmp.path(), Isolation::InProcess)
        .readonly(&ro, &reads, &mut sink)
        .unwrap();
    assert_eq!(phases.len(), 2);
    assert!(phases[1].found as f64 / phases[1].reads as f64 > 0.8);
    let rr = &phases[0];
    assert!(rr.bulk_loaded);
    assert_eq!(rr.keys, ro.keys());
    assert!(rr.reads > 0);
    let found_share = rr.found as f64 / rr.reads as f64;
    assert!(
        (0.35..=0.65).contains(&found_share),
        "known-key rate 0.5 found {found_share}"
    );

    // The same data through the write path and compaction.
    let through_puts = ReadonlySpec {
        bulk_load: false,
        duration: Duration::from_millis(200),
        ..ro.clone()
    };
    let phases = runner(tmp.path(), Isolation::InProcess)
        .readonly(&through_puts, &[], &mut sink)
        .unwrap();
    assert_eq!(phases.len(), 1);
    assert!(!phases[0].bulk_loaded);
    assert!((0.35..=0.65).contains(&(phases[0].found as f64 / phases[0].reads as f64)));

    // Every line parses; the report draws what they hold.
    let lines = read_jsonl(&results).unwrap();
    let summaries = lines
        .iter()
        .filter(|l| matches!(l, Line::Summary(_)))
        .count();
    assert_eq!(summaries, 1 + 2 + 4);
    assert_eq!(
        lines
            .iter()
            .filter(|l| matches!(l, Line::Readonly(_)))
            .count(),
        3
    );
    assert!(
        lines
            .iter()
            .filter(|l| matches!(l, Line::Interval(_)))
            .count()
            >= 7
    );

    if report::ensure_font().is_err() {
        eprintln!("no TrueType font on this machine: skipping the drawing half of the report test");
        return;
    }
    let out = tmp.path().join("report");
    let written = report::write_report(
        std::slice::from_ref(&results),
        &out,
        &report::TimelineSelection::default(),
    )
    .unwrap();
    for name in ["partitions.png", "threads.png", "index.html"] {
        assert!(out.join(name).exists(), "{name} missing from {written:?}");
    }
    let timelines = written
        .iter()
        .filter(|p| p.to_string_lossy().contains("timeline-"))
        .count();
    assert_eq!(timelines, 7, "one timeline per mixed run");
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("<img src=\"partitions.png\""));
    assert!(html.contains("Read-only"));
    for p in &written {
        let bytes = std::fs::metadata(p).unwrap().len();
        assert!(bytes > 1000, "{} is only {bytes} bytes", p.display());
    }
}
