//! The page: `index.html` (the summary tables and every chart) and `table.md`, the Markdown
//! comparison table that `strata bench compare` prints as well.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::reduce::{gib, mib, ReportData};
use crate::record::RunRecord;
use crate::spec::{Engine, Workload};

/// `v` with `digits` decimals, or `-`.
pub fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

/// Bytes as whole MiB, or `-`.
fn opt_mib(v: Option<u64>) -> String {
    opt(v.map(mib), 0)
}

fn ratio(v: f64, base: Option<f64>) -> String {
    match base {
        Some(b) if b > 0.0 => format!("{:.2}x", v / b),
        _ => "-".into(),
    }
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The comparison table in Markdown: per workload, one row per engine with ops/s (over the run,
/// over its last ten minutes or second half: the steady state, and the worst interval's, where
/// write stalls show), p99 latency, bytes on disk (also per byte the user
/// wrote), write amplification (engine-reported and from `/proc/self/io`) and peak RSS, most followed by
/// the ratio to Strata's figure in the same workload.
pub fn format_table(records: &[RunRecord]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| workload | engine | ops/s | x strata | last 10 min (or half) ops/s | x strata | worst interval ops/s | p99 us | x strata | disk MiB | disk / written | disk / live | disk / live, last 10 min (or half) | WA (engine) | WA (io) | x strata | peak RSS MiB | x strata |"
    );
    let _ = writeln!(s, "|{}", " --- |".repeat(18));
    let mut workloads: Vec<Workload> = records.iter().map(|r| r.spec.run.workload).collect();
    workloads.dedup();
    workloads.sort();
    workloads.dedup();
    for w in workloads {
        let rows: Vec<&RunRecord> = records
            .iter()
            .filter(|r| r.spec.run.workload == w)
            .collect();
        let base = rows
            .iter()
            .find(|r| r.spec.engine.engine == Engine::Strata)
            .copied();
        for r in rows {
            let b = |f: fn(&RunRecord) -> Option<f64>| base.and_then(f);
            let ops = |r: &RunRecord| Some(r.summary.ops_per_sec);
            let tail = |r: &RunRecord| r.summary.tail_ops_per_sec;
            let p99 = |r: &RunRecord| Some(r.summary.p99_us as f64);
            let wa = |r: &RunRecord| r.write_amplification_io;
            let rss = |r: &RunRecord| r.peak_rss_bytes.map(|b| b as f64);
            let _ =
                writeln!(
                s,
                "| {} | {} | {:.0} | {} | {} | {} | {:.0} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} |",
                w.name(),
                r.spec.engine.engine.name(),
                r.summary.ops_per_sec,
                ratio(r.summary.ops_per_sec, b(ops)),
                opt(r.summary.tail_ops_per_sec, 0),
                r.summary
                    .tail_ops_per_sec
                    .map(|v| ratio(v, b(tail)))
                    .unwrap_or_else(|| "-".into()),
                r.summary.interval_ops_per_sec_min,
                r.summary.p99_us,
                ratio(r.summary.p99_us as f64, b(p99)),
                mib(r.disk_bytes),
                if r.summary.user_bytes_written > 0 {
                    format!("{:.2}", r.disk_bytes as f64 / r.summary.user_bytes_written as f64)
                } else {
                    "-".into()
                },
                opt(r.summary.per_live(r.disk_bytes as f64), 2),
                opt(
                    r.summary
                        .tail_disk_bytes
                        .and_then(|d| r.summary.per_live(d)),
                    2
                ),
                opt(r.write_amplification_engine, 2),
                opt(r.write_amplification_io, 2),
                r.write_amplification_io
                    .map(|v| ratio(v, b(wa)))
                    .unwrap_or_else(|| "-".into()),
                opt_mib(r.peak_rss_bytes),
                r.peak_rss_bytes
                    .map(|v| ratio(v as f64, b(rss)))
                    .unwrap_or_else(|| "-".into()),
            );
        }
    }
    s
}

/// Rows of the read-only top table (the seed showed its ten best).
const READONLY_TOP_N: usize = 10;

/// The page: summary tables and every image.
pub fn index_html(data: &ReportData, images: &[(String, String)], inputs: &[PathBuf]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Strata benchmark report</title>\
         <style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse;font-size:13px}}\
         td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}}th{{background:#f3f3f3}}\
         td:nth-child(-n+2){{text-align:left}}img{{max-width:100%;border:1px solid #ddd;margin:8px 0}}</style>\
         </head><body>\n<h1>Strata benchmark report</h1>\n"
    );
    let sources: Vec<String> = inputs
        .iter()
        .map(|p| html_escape(&p.display().to_string()))
        .collect();
    let _ = writeln!(h, "<p>From {}.", sources.join(", "));
    if let Some(m) = data
        .summaries
        .first()
        .map(|r| r.machine.clone())
        .or_else(|| data.readonly.first().map(|r| r.machine.clone()))
        .or_else(|| data.docs_loads.first().map(|r| r.machine.clone()))
        .or_else(|| data.startup.first().map(|r| r.machine.clone()))
    {
        let _ = write!(h, " Machine: {}.", html_escape(&m));
    }
    let _ = writeln!(h, "</p>");
    if !data.summaries.is_empty() {
        let _ = writeln!(
            h,
            "<h2>Mixed workloads</h2>\n<table><tr><th>engine</th><th>workload</th><th>partitions</th>\
             <th>threads</th><th>sync</th><th>value B</th><th>seconds</th><th>ops/s</th><th>last 10 min (or half) ops/s</th><th>p99 us</th>\
             <th>min..max interval ops/s</th><th>disk MiB</th><th>WA engine</th><th>WA io</th><th>peak RSS MiB</th><th>load 1m</th></tr>"
        );
        for r in &data.summaries {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td>\
                 <td>{:.0}</td><td>{}</td><td>{}</td><td>{:.0}..{:.0}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td></tr>",
                r.spec.engine.engine,
                r.spec.run.workload.name(),
                r.spec.engine.partitions,
                r.spec.run.threads,
                r.spec.engine.sync,
                r.spec.run.value_bytes,
                r.summary.seconds,
                r.summary.ops_per_sec,
                opt(r.summary.tail_ops_per_sec, 0),
                r.summary.p99_us,
                r.summary.interval_ops_per_sec_min,
                r.summary.interval_ops_per_sec_max,
                mib(r.disk_bytes),
                opt(r.write_amplification_engine, 2),
                opt(r.write_amplification_io, 2),
                opt_mib(r.peak_rss_bytes),
                if r.isolated { "" } else { "*" },
                opt(r.load_avg_1m, 2),
            );
        }
        let _ = writeln!(
            h,
            "</table>\n<p>WA io: bytes the engine's process sent to storage while the workload ran \
             (/proc/self/io write_bytes less cancelled) per byte of keys and values written. \
             * = not run in a process of its own, so peak RSS may include earlier runs.</p>"
        );
    }
    matrix_trials_table(&mut h, data);
    if !data.readonly.is_empty() {
        let _ = writeln!(
            h,
            "<h2>Read-only</h2>\n<table><tr><th>engine</th><th>data GiB</th><th>value B</th><th>keys</th>\
             <th>known-key rate</th><th>threads</th><th>load s</th><th>compact s</th><th>reads/s</th>\
             <th>found</th><th>p50 us</th><th>p99 us</th><th>peak RSS MiB</th></tr>"
        );
        for r in &data.readonly {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td>\
                 <td>{:.1}</td><td>{:.0}</td><td>{:.1}%</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                r.spec.engine.engine,
                gib(r.disk_bytes),
                r.spec.value_bytes,
                r.keys,
                r.spec.known_key_rate,
                r.spec.threads,
                r.load_seconds,
                r.compact_seconds,
                r.reads_per_sec,
                if r.reads > 0 { r.found as f64 * 100.0 / r.reads as f64 } else { 0.0 },
                r.p50_us,
                r.p99_us,
                opt_mib(r.peak_rss_bytes),
            );
        }
        let _ = writeln!(h, "</table>");
        // The seed's summary: medians over trials, best first.
        let cells = data.readonly_cells();
        let _ = writeln!(
            h,
            "<h2>Read-only: top {} settings by median reads/s</h2>\n<table><tr><th>#</th><th>setting</th>\
             <th>trials</th><th>median reads/s</th><th>IQR reads/s</th><th>median p99 us</th><th>IQR p99 us</th></tr>",
            cells.len().min(READONLY_TOP_N)
        );
        for (i, c) in cells.iter().take(READONLY_TOP_N).enumerate() {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{:.0}-{:.0}</td><td>{:.0}</td><td>{:.0}-{:.0}</td></tr>",
                i + 1,
                html_escape(&c.label),
                c.trials,
                c.reads_per_sec.1,
                c.reads_per_sec.0,
                c.reads_per_sec.2,
                c.p99_us.1,
                c.p99_us.0,
                c.p99_us.2,
            );
        }
        let _ = writeln!(h, "</table>");
    }
    docs_tables(&mut h, data);
    startup_table(&mut h, data);
    for (title, file) in images {
        let _ = writeln!(
            h,
            "<h2>{}</h2>\n<img src=\"{}\" alt=\"{}\">",
            html_escape(title),
            html_escape(file),
            html_escape(title)
        );
    }
    let _ = writeln!(h, "</body></html>");
    h
}

/// Rows of the grid's top table (as the read-only one).
const MATRIX_TOP_N: usize = 10;

/// Strata's grid cells with trials, the best [`MATRIX_TOP_N`] by median ops/s (what the
/// read-only settings get); nothing without trials.
fn matrix_trials_table(h: &mut String, data: &ReportData) {
    let cells = data.cells_with_trials();
    if cells.is_empty() {
        return;
    }
    let _ = writeln!(
        h,
        "<h2>Strata grid: top {} cells by median ops/s</h2>\n<table><tr><th>#</th><th>workload</th>\
         <th>partitions</th><th>threads</th><th>trials</th><th>median ops/s</th><th>IQR ops/s</th>\
         <th>median p99 us</th><th>IQR p99 us</th></tr>",
        cells.len().min(MATRIX_TOP_N)
    );
    for (i, c) in cells.iter().take(MATRIX_TOP_N).enumerate() {
        let (o, p) = (&c.ops_per_sec, &c.p99_us);
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td>\
             <td>{:.0}-{:.0}</td><td>{:.0}</td><td>{:.0}-{:.0}</td></tr>",
            i + 1,
            html_escape(&c.workload),
            c.partitions,
            c.threads,
            o.trials(),
            o.median,
            o.q1,
            o.q3,
            p.median,
            p.q1,
            p.q3,
        );
    }
    let _ = writeln!(h, "</table>");
}

/// The document loads, and each phase per setting and thread count (medians over trials).
fn docs_tables(h: &mut String, data: &ReportData) {
    if !data.docs_loads.is_empty() {
        let _ = writeln!(
            h,
            "<h2>Documents: loads</h2>\n<table><tr><th>setting</th><th>docs</th><th>JSON MB</th>\
             <th>load s</th><th>docs/s</th><th>JSON MB/s</th><th>encoded / JSON</th>\
             <th>stored / JSON</th><th>disk MiB</th><th>peak RSS MiB</th><th>load 1m</th></tr>"
        );
        for l in &data.docs_loads {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.0}</td><td>{:.1}</td>\
                 <td>{:.1}%</td><td>{:.1}%</td><td>{:.0}</td><td>{}</td><td>{}</td></tr>",
                html_escape(&super::reduce::docs_label(
                    l.docs_loaded,
                    l.spec.engine.compression.name(),
                    l.spec.engine.partitions
                )),
                l.docs_loaded,
                l.json_bytes as f64 / 1e6,
                l.load_seconds,
                l.docs_per_sec,
                l.json_mb_per_sec,
                l.encoded_to_json_ratio * 100.0,
                l.stored_to_json_ratio * 100.0,
                mib(l.disk_bytes_compacted),
                opt_mib(l.peak_rss_bytes),
                opt(l.load_avg_1m, 2),
            );
        }
        let _ = writeln!(
            h,
            "</table>\n<p>stored / JSON: bytes on disk after the flush and compaction per byte of \
             JSON input; encoded / JSON: the codec's keys and values alone.</p>"
        );
    }
    if !data.docs_cells.is_empty() {
        let _ = writeln!(
            h,
            "<h2>Documents: phases (latest run of each setting)</h2>\n<table><tr><th>setting</th>\
             <th>phase</th><th>threads</th><th>trials</th><th>median ops/s</th><th>IQR ops/s</th>\
             <th>median p99 us</th><th>IQR p99 us</th><th>lost updates</th></tr>"
        );
        for c in &data.docs_cells {
            let (o, p) = (&c.ops_per_sec, &c.p99_us);
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{:.0}-{:.0}</td>\
                 <td>{:.0}</td><td>{:.0}-{:.0}</td><td>{}</td></tr>",
                html_escape(&c.label),
                c.phase.name(),
                c.threads,
                o.trials(),
                o.median,
                o.q1,
                o.q3,
                p.median,
                p.q1,
                p.q3,
                c.lost_updates
                    .map_or_else(|| "-".to_string(), |n| n.to_string()),
            );
        }
        let _ = writeln!(
            h,
            "</table>\n<p>lost updates: over all trials; the update phase (GET, change, PUT) may \
             lose some when threads race on one document, the atomic increment must lose none.</p>"
        );
    }
}

/// The startup benchmark's steps (build, merge, opens) as they ran.
fn startup_table(h: &mut String, data: &ReportData) {
    if data.startup.is_empty() {
        return;
    }
    let _ = writeln!(
        h,
        "<h2>Startup</h2>\n<table><tr><th>engine</th><th>step</th><th>state</th><th>keys</th>\
         <th>cold cache</th><th>seconds</th><th>disk MiB</th><th>hint files</th>\
         <th>RSS bytes / key</th><th>index MiB</th><th>peak RSS MiB</th></tr>"
    );
    for r in &data.startup {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.0}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.spec.engine.engine,
            html_escape(&r.step),
            html_escape(&r.state),
            r.spec.keys,
            if r.cold_cache { "yes" } else { "no" },
            r.seconds,
            mib(r.disk_bytes),
            r.hint_files,
            opt(r.rss_bytes_per_key, 1),
            opt_mib(r.index_bytes),
            opt_mib(r.peak_rss_bytes),
        );
    }
    let _ = writeln!(h, "</table>");
}
