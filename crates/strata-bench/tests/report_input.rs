//! The report's reduction of JSON lines to plot inputs, on hand-written lines.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use strata_bench::record::parse_line;
use strata_bench::report::ReportData;
use strata_bench::{BenchSpec, Engine, EngineSpec, RunRecord, RunSpec, RunSummary, Workload};

fn summary(
    engine: Engine,
    workload: Workload,
    partitions: usize,
    threads: usize,
    ops: f64,
    at: u64,
) -> String {
    let record = RunRecord {
        kind: "summary".into(),
        run_id: format!("{at}-{engine}"),
        started_unix_ms: at,
        machine: "test".into(),
        isolated: true,
        spec: BenchSpec {
            engine: EngineSpec {
                partitions,
                ..EngineSpec::new(engine)
            },
            run: RunSpec {
                threads,
                ..RunSpec::seed_defaults(workload)
            },
        },
        summary: RunSummary {
            ops_per_sec: ops,
            ..RunSummary::default()
        },
        disk_bytes: 3 << 20,
        write_amplification_engine: None,
        engine_stats: None,
        io_write_bytes: Some(100),
        write_amplification_io: Some(2.5),
        peak_rss_bytes: Some(1 << 20),
        close_seconds: 0.1,
        load_avg_1m: Some(1.0),
        preload_seconds: None,
        page_cache_dropped: None,
    };
    serde_json::to_string(&record).unwrap()
}

#[test]
fn jsonl_lines_become_plot_inputs() {
    let lines = [
        r#"{"kind":"interval","runId":"1-strata","engine":"strata","workload":"balanced","partitions":4,"threads":2,"nanoTime":10000000000,"put":1000,"delete":500,"deleteFound":10,"get":500,"getFound":20,"fileSize":1073741824}"#.to_string(),
        r#"{"kind":"interval","runId":"1-strata","engine":"strata","workload":"balanced","partitions":4,"threads":2,"nanoTime":20000000000,"put":3000,"delete":0,"deleteFound":0,"get":1000,"getFound":20,"fileSize":2147483648}"#.to_string(),
        summary(Engine::Strata, Workload::Balanced, 4, 2, 100.0, 1),
        summary(Engine::Strata, Workload::Balanced, 4, 4, 300.0, 2),
        summary(Engine::Strata, Workload::Balanced, 8, 2, 200.0, 3),
        // A later run of the same cell replaces the earlier one.
        summary(Engine::Strata, Workload::Balanced, 4, 2, 150.0, 4),
        summary(Engine::Rocksdb, Workload::PutHeavy, 4, 2, 80.0, 5),
        summary(Engine::Strata, Workload::PutHeavy, 4, 2, 90.0, 6),
        r#"{"kind":"something-new","x":1}"#.to_string(),
        r#"{"legacy":"line without kind"}"#.to_string(),
    ];
    let parsed: Vec<_> = lines.iter().map(|l| parse_line(l).unwrap()).collect();
    let data = ReportData::from_lines(&parsed);

    assert_eq!(data.timelines.len(), 1);
    let t = &data.timelines[0];
    assert_eq!(t.points, vec![(10.0, 200.0, 1.0), (20.0, 400.0, 2.0)]);
    assert_eq!(t.title, "strata balanced - 4 partitions, 2 threads");

    let grid = &data.grids["balanced"];
    assert_eq!(grid[&(4, 2)], 150.0);
    assert_eq!(grid[&(4, 4)], 300.0);
    assert_eq!(grid[&(8, 2)], 200.0);
    let best = data.best_by_partitions();
    assert_eq!(best["balanced"][&4], 300.0);
    assert_eq!(best["balanced"][&8], 200.0);
    // No one-partition run here: no change to report.
    assert_eq!(
        strata_bench::report::change_against_one_partition(&best["balanced"], 8),
        None
    );
    let seed_like: std::collections::BTreeMap<u64, f64> =
        [(1, 100_000.0), (4, 180_000.0), (16, 270_000.0)].into();
    let change = |p| strata_bench::report::change_against_one_partition(&seed_like, p);
    assert!(change(16).is_some_and(|c| (c - 170.0).abs() < 1e-9));
    assert!(change(4).is_some_and(|c| (c - 80.0).abs() < 1e-9));
    assert_eq!(change(1), None);
    assert_eq!(change(8), None);

    // Only workloads where a peer ran appear side by side.
    assert_eq!(data.peers.len(), 1);
    let put = &data.peers["put-heavy"];
    assert_eq!(put["rocksdb"].ops_per_sec, 80.0);
    assert_eq!(put["strata"].ops_per_sec, 90.0);
    assert_eq!(put["strata"].write_amplification, Some(2.5));
    assert_eq!(put["strata"].disk_mib, 3.0);
    assert_eq!(data.summaries.len(), 6);
}

#[test]
fn a_bad_line_is_an_error_naming_the_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("r.jsonl");
    std::fs::write(&path, "{\"kind\":\"interval\"}\n\nnot json\n").unwrap();
    let err = strata_bench::record::read_jsonl(&path)
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 3"), "{err}");
}

/// The side-by-side timelines: per workload run by several engines, the latest run of each
/// engine; a workload with one engine's runs only gets no combined chart.
#[test]
fn engine_timelines_keep_the_latest_run_of_each_engine_per_workload() {
    let interval = |run: &str, engine: &str, workload: &str, s: u64, ops: u64| {
        format!(
            r#"{{"kind":"interval","runId":"{run}","engine":"{engine}","workload":"{workload}","partitions":4,"threads":2,"nanoTime":{},"put":{ops},"delete":0,"deleteFound":0,"get":0,"getFound":0,"fileSize":1073741824}}"#,
            s * 1_000_000_000
        )
    };
    let lines = [
        interval("1-strata-put-heavy", "strata", "put-heavy", 10, 1000),
        interval("2-rocksdb-put-heavy", "rocksdb", "put-heavy", 10, 500),
        interval("3-strata-put-heavy", "strata", "put-heavy", 10, 2000),
        interval("4-strata-balanced", "strata", "balanced", 10, 700),
    ];
    let parsed: Vec<_> = lines.iter().map(|l| parse_line(l).unwrap()).collect();
    let data = ReportData::from_lines(&parsed);
    let by_workload = data.engine_timelines();
    assert_eq!(by_workload.len(), 1, "balanced has one engine only");
    let runs = &by_workload["put-heavy"];
    let got: Vec<(&str, &str, f64)> = runs
        .iter()
        .map(|t| (t.engine.as_str(), t.run_id.as_str(), t.points[0].1))
        .collect();
    assert_eq!(
        got,
        vec![
            ("rocksdb", "2-rocksdb-put-heavy", 50.0),
            ("strata", "3-strata-put-heavy", 200.0),
        ]
    );
}
