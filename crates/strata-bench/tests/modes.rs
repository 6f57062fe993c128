//! Smoke runs of every harness mode on a temporary directory, a second or two each, with Strata
//! only (no `peers` feature needed): run, compare (in this process and in child processes),
//! matrix, read-only, and the report over the JSON lines they wrote; and the document benchmarks
//! (load, get, partial get, update, atomic increment), checked against the generated JSON.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use strata_bench::docs::prepare_input;
use strata_bench::record::{read_jsonl, DocsOpsRecord, Line};
use strata_bench::{
    compare, matrix, readonly, report, BenchSpec, CompressionSpec, DocsInput, DocsPhase, DocsSpec,
    Engine, EngineSpec, Isolation, ReadonlySpec, RunSpec, Runner, Workload,
};
use strata_doc::{Doc, DocStore};

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
    // Interval lines say where memory goes: the process's RSS, and what the engine holds (its
    // memtables at least: the run puts and does not flush them all), within the RSS.
    let intervals: Vec<serde_json::Value> = std::fs::read_to_string(&results)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v["nanoTime"].is_u64())
        .collect();
    assert!(!intervals.is_empty());
    for v in &intervals {
        let (rss, engine) = (v["rssBytes"].as_u64(), v["engineMemoryBytes"].as_u64());
        assert!(
            matches!((rss, engine), (Some(r), Some(e)) if e > 0 && e < r),
            "{v}"
        );
    }
    assert!(
        !tmp.path().join("data").exists(),
        "data is removed after the run"
    );

    // A preloaded run: every key of the key space exists before the clock starts, so reads
    // of random keys find them unless the run's own deletes (5 % of its operations) removed
    // them, and the store holds the whole key space. (Without the preload, only the keys the
    // run's puts wrote, a small share of 200 000, could be found.)
    let preloaded = RunSpec {
        workload: Workload::GetHeavy,
        known_key_rate: 0.0,
        key_space: 200_000,
        value_bytes: 64,
        preload: true,
        drop_page_cache: true,
        ..quick_run()
    };
    let preload_results = tmp.path().join("preload.jsonl");
    let r = runner(tmp.path(), Isolation::InProcess)
        .run(
            &BenchSpec {
                engine: strata.clone(),
                run: preloaded.clone(),
            },
            &mut jsonl_sink(&preload_results),
        )
        .unwrap();
    assert!(r.preload_seconds.is_some());
    assert!(r.page_cache_dropped.is_some());
    assert!(
        r.disk_bytes >= preloaded.key_space * preloaded.value_bytes as u64,
        "{} bytes on disk after preloading {} keys",
        r.disk_bytes,
        preloaded.key_space
    );
    let wa = r.write_amplification_engine.unwrap();
    // The preload's tables are not the run's writes: the run only logs its puts (no flush in
    // 600 ms), about 1.3 bytes per byte; counting the ingested tables made it about 3.3.
    assert!(wa < 2.5, "write amplification {wa} counts the preload");
    let (mut gets, mut found, mut deleted) = (0u64, 0u64, 0u64);
    for line in std::fs::read_to_string(&preload_results).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if let (Some(g), Some(f), Some(d)) = (
            v["get"].as_u64(),
            v["getFound"].as_u64(),
            v["deleteFound"].as_u64(),
        ) {
            gets += g;
            found += f;
            deleted += d;
        }
    }
    assert!(gets > 0);
    // At least the keys no delete found are present all along.
    let present_share = 1.0 - deleted as f64 / preloaded.key_space as f64;
    let found_share = found as f64 / gets as f64;
    assert!(
        found_share > present_share - 0.05,
        "{found} of {gets} reads found their key; {deleted} deletes found theirs"
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
    let table = report::format_table(&records);
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
        trials: 1,
        drop_page_cache: false,
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

    // Trials: each phase three times, each trial on its own copy of the built data, in a
    // shuffled order.
    let trials = ReadonlySpec {
        trials: 3,
        duration: Duration::from_millis(100),
        ..ro.clone()
    };
    let phases = runner(tmp.path(), Isolation::InProcess)
        .readonly(&trials, &reads, &mut sink)
        .unwrap();
    let mut seen: Vec<(String, Option<u32>)> = phases
        .iter()
        .map(|r| (r.run_id.rsplit('-').nth(1).unwrap().to_string(), r.trial))
        .collect();
    let ran_in = seen.clone();
    seen.sort();
    let want: Vec<(String, Option<u32>)> = ["r0", "r1"]
        .iter()
        .flat_map(|p| (0..3).map(move |t| (p.to_string(), Some(t))))
        .collect();
    assert_eq!(seen, want);
    assert_ne!(ran_in, want, "trials ran in phase order, not shuffled");
    assert!(phases.iter().all(|r| r.reads > 0 && r.keys == ro.keys()));

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
    assert_eq!(phases[0].page_cache_dropped, None, "not asked");

    // Asked to read from the disk: every phase says whether the cache could be dropped (root
    // only); a data set larger than the free disk is refused before anything is written.
    let cold = ReadonlySpec {
        drop_page_cache: true,
        duration: Duration::from_millis(100),
        ..ro.clone()
    };
    let phases = runner(tmp.path(), Isolation::InProcess)
        .readonly(&cold, &reads, &mut sink)
        .unwrap();
    assert!(phases.iter().all(|r| r.page_cache_dropped.is_some()));
    let huge = ReadonlySpec {
        data_bytes: 1 << 60,
        ..ro.clone()
    };
    let err = runner(tmp.path(), Isolation::InProcess)
        .readonly(&huge, &[], &mut sink)
        .unwrap_err()
        .to_string();
    assert!(err.contains("free disk"), "{err}");
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
        2 + 6 + 1 + 2
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
    for name in [
        "partitions.png",
        "threads.png",
        "readonly-trials.png",
        "index.html",
    ] {
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
    // The medians over trials, best first, and their box plots.
    assert!(html.contains("Read-only: top "), "no top table");
    assert!(html.contains("<img src=\"readonly-trials.png\""));
    for p in &written {
        let bytes = std::fs::metadata(p).unwrap().len();
        assert!(bytes > 1000, "{} is only {bytes} bytes", p.display());
    }
}

/// (id, document) of every line of a JSON-lines file, parsed independently of the loader.
fn json_docs(path: &Path) -> Vec<(String, serde_json::Value)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["id"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

fn score_sum(docs: &[(String, serde_json::Value)]) -> i64 {
    docs.iter().map(|(_, v)| v["score"].as_i64().unwrap()).sum()
}

#[test]
fn docs_mode_loads_every_document_and_counts_every_increment() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("docs.jsonl");
    let mut sink = jsonl_sink(&results);
    let docs_n = 2000u64;
    let input_spec = DocsInput::Generated {
        docs: docs_n,
        seed: 7,
    };
    let input = prepare_input(&input_spec, &tmp.path().join("data")).unwrap();
    assert!(
        !input.path.starts_with(tmp.path().join("data")),
        "the input must survive the wipe of the data directory"
    );
    let json = json_docs(&input.path);
    assert_eq!(json.len() as u64, docs_n);
    assert_eq!(
        input.json_bytes,
        std::fs::metadata(&input.path).unwrap().len()
    );
    let json_score_sum = score_sum(&json);

    let spec = DocsSpec {
        engine: EngineSpec::new(Engine::Strata),
        input: input_spec,
        id_field: "id".into(),
        readers: 2,
        writers: 2,
        phases: DocsPhase::ALL.to_vec(),
        threads: vec![1, 2],
        duration: Duration::from_millis(300),
        interval: Duration::from_millis(100),
        seed: 1,
        trials: 1,
    };
    let keep = Runner {
        keep_data: true,
        ..runner(tmp.path(), Isolation::InProcess)
    };
    let r = keep.docs(&spec, &input, &mut sink).unwrap();
    assert_eq!(r.load.docs_loaded, docs_n);
    assert_eq!(r.load.docs_in_store, docs_n);
    assert_eq!(r.load.bad_lines, 0);
    assert_eq!(r.load.json_bytes, input.json_bytes);
    assert!(r.load.disk_bytes_compacted > 0);
    // Everything was flushed out of the memtables before the size was measured.
    assert!(r.load.engine_stats["flushes"].as_u64().unwrap() > 0);
    // The binary codec drops JSON's quotes, colons, commas and number text.
    assert!(
        r.load.encoded_bytes < r.load.json_bytes,
        "{} encoded bytes for {} JSON bytes",
        r.load.encoded_bytes,
        r.load.json_bytes
    );

    // Every phase ran at every thread count, in order.
    let ran: Vec<(DocsPhase, usize)> = r.ops.iter().map(|o| (o.phase, o.threads)).collect();
    let want: Vec<(DocsPhase, usize)> = DocsPhase::ALL
        .iter()
        .flat_map(|&p| [(p, 1), (p, 2)])
        .collect();
    assert_eq!(ran, want);
    assert!(r.ops.iter().all(|o| o.ops > 0 && o.docs == docs_n));
    let writes: Vec<&DocsOpsRecord> = r
        .ops
        .iter()
        .filter(|o| matches!(o.phase, DocsPhase::Update | DocsPhase::Increment))
        .collect();
    // The first write phase starts from the scores of the JSON input...
    assert_eq!(writes[0].score_sum_before, Some(json_score_sum));
    // ...each starts where the previous one ended...
    for pair in writes.windows(2) {
        assert_eq!(pair[1].score_sum_before, pair[0].score_sum_after);
    }
    // ...the non-atomic updates lose at most what they counted, and no increment is lost.
    for o in &writes {
        let grown = (o.score_sum_after.unwrap() - o.score_sum_before.unwrap()) as u64;
        assert_eq!(grown + o.lost_updates.unwrap(), o.ops, "{o:?}");
        if o.phase == DocsPhase::Increment {
            assert_eq!(o.lost_updates, Some(0), "{o:?}");
        }
    }
    assert!(r
        .ops
        .iter()
        .filter(|o| matches!(o.phase, DocsPhase::Get | DocsPhase::GetPath))
        .all(|o| o.score_sum_before.is_none() && o.lost_updates.is_none()));

    // The store left behind holds every document of the input, unchanged apart from its score,
    // and the scores add up to what the last phase reported.
    let store = DocStore::open(
        tmp.path().join("data"),
        EngineSpec::new(Engine::Strata).strata_options(),
    )
    .unwrap();
    let mut stored_sum = 0i64;
    for (i, (id, want)) in json.iter().enumerate() {
        let got = store.get(&Doc::from(id.as_str())).unwrap().unwrap();
        let mut got = strata_doc::to_json_value(&got).unwrap();
        stored_sum += got["score"].as_i64().unwrap();
        if i % 97 == 0 {
            got["score"] = want["score"].clone();
            assert_eq!(&got, want, "document {id}");
        }
    }
    store.close().unwrap();
    assert_eq!(Some(stored_sum), writes.last().unwrap().score_sum_after);

    // Trials: every update and increment trial starts from the loaded store's scores on its own
    // copy, so the store left behind keeps exactly the input's scores.
    let trials = DocsSpec {
        phases: vec![DocsPhase::Get, DocsPhase::Update, DocsPhase::Increment],
        threads: vec![2],
        duration: Duration::from_millis(150),
        trials: 3,
        ..spec.clone()
    };
    let r = keep.docs(&trials, &input, &mut sink).unwrap();
    assert_eq!(r.ops.len(), 9);
    let mut ran: Vec<(DocsPhase, Option<u32>)> = r.ops.iter().map(|o| (o.phase, o.trial)).collect();
    let in_order = ran.clone();
    ran.sort_by_key(|(p, t)| (*p as u8, *t));
    let want: Vec<(DocsPhase, Option<u32>)> =
        [DocsPhase::Get, DocsPhase::Update, DocsPhase::Increment]
            .iter()
            .flat_map(|&p| (0..3).map(move |t| (p, Some(t))))
            .collect();
    assert_eq!(ran, want);
    assert_ne!(in_order, want, "trials ran in order, not shuffled");
    for o in r.ops.iter().filter(|o| o.phase != DocsPhase::Get) {
        assert_eq!(o.score_sum_before, Some(json_score_sum), "{o:?}");
        assert!(o.score_sum_after > o.score_sum_before, "{o:?}");
        if o.phase == DocsPhase::Increment {
            assert_eq!(o.lost_updates, Some(0), "{o:?}");
        }
    }
    let store = DocStore::open(
        tmp.path().join("data"),
        EngineSpec::new(Engine::Strata).strata_options(),
    )
    .unwrap();
    let left: i64 = json
        .iter()
        .map(|(id, _)| {
            let d = store.get(&Doc::from(id.as_str())).unwrap().unwrap();
            strata_doc::to_json_value(&d).unwrap()["score"]
                .as_i64()
                .unwrap()
        })
        .sum();
    store.close().unwrap();
    assert_eq!(left, json_score_sum, "a trial wrote to the loaded store");

    // The same with LZ4 in a child process, increments only.
    let child = Isolation::Child {
        program: PathBuf::from(env!("CARGO_BIN_EXE_strata-bench-child")),
        args: Vec::new(),
    };
    let lz4 = DocsSpec {
        engine: EngineSpec {
            compression: CompressionSpec::Lz4,
            ..EngineSpec::new(Engine::Strata)
        },
        phases: vec![DocsPhase::Increment],
        threads: vec![2],
        ..spec
    };
    let r = runner(tmp.path(), child)
        .docs(&lz4, &input, &mut sink)
        .unwrap();
    assert!(r.load.isolated);
    assert_eq!(r.load.docs_in_store, docs_n);
    assert_eq!(r.ops.len(), 1);
    assert_eq!(r.ops[0].score_sum_before, Some(json_score_sum));
    assert_eq!(
        r.ops[0].score_sum_after,
        Some(json_score_sum + r.ops[0].ops as i64)
    );
    assert!(
        !tmp.path().join("data").exists(),
        "data is removed after the run"
    );
    let input_path = input.path.clone();
    input.remove().unwrap();
    assert!(!input_path.exists());

    // Every line is JSON with a kind; the load's stats lines end at the document count.
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&results)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds = |k: &str| lines.iter().filter(|l| l["kind"] == k).count();
    assert_eq!(kinds("docsLoad"), 3);
    assert_eq!(kinds("docsOps"), 8 + 9 + 1);
    assert_eq!(
        kinds("docsStats") + kinds("docsLoad") + kinds("docsOps"),
        lines.len()
    );
    let last_load_line = lines
        .iter()
        .rev()
        .find(|l| l["kind"] == "docsStats" && l["phase"] == "load")
        .unwrap();
    assert_eq!(last_load_line["writes"].as_u64(), Some(docs_n));
    for field in ["time", "writes", "size"] {
        assert!(
            last_load_line[field].is_u64(),
            "{field} in {last_load_line}"
        );
    }
    // The report reads these files without tripping over the new kinds.
    assert!(read_jsonl(&results)
        .unwrap()
        .iter()
        .all(|l| matches!(l, Line::Other)));
}
