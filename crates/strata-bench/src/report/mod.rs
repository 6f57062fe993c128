//! `report`: JSONL result files in; PNG charts, `table.md` and an `index.html` showing them out.
//!
//! `reduce` turns parsed lines into what is shown ([`ReportData`]; pure, tested); `plot` draws
//! the charts; `page` writes the HTML page and the Markdown table ([`format_table`]);
//! [`write_report`], what `strata bench report` calls, does all three.
//!
//! Charts, each drawn when its lines are there:
//!
//! - engines side by side (ops/s, write amplification, bytes on disk, bytes on disk per byte
//!   written), per workload run by more than one engine;
//! - Strata's ops/s by partition count per workload (bars, best thread count, each labelled with
//!   its change against one partition as the seed reported it);
//! - Strata's ops/s by thread count (one line per partition count, one panel per workload; with
//!   `matrix --trials`, the line goes through the medians in an IQR band);
//! - Strata's grid cells with trials as box plots of ops/s (the page's top-10 table of cells by
//!   median goes with it), and read-only settings with trials the same way;
//! - Strata's ops/s against bytes on disk, one dot per stats interval, one colour per workload
//!   (seed 000's scatter);
//! - the document benchmarks: documents per second and bytes on disk over each load; ops/s by
//!   thread count per phase, one line per setting (documents, compression, partitions), medians
//!   in an IQR band with trials (the page has their tables);
//! - per workload run by several engines, every engine over time (ops/s and bytes on disk), and
//!   the same zoomed into the first tenth of the runs (at least ten samples), where the warm-up
//!   dip is;
//! - per run, ops/s and bytes on disk over time (two y-axes).
//!
//! Startup steps are tabulated on the page, not drawn.

mod page;
mod plot;
mod reduce;

use std::path::{Path, PathBuf};

pub use page::format_table;
pub(crate) use page::opt;
pub use plot::ensure_font;
pub(crate) use reduce::mib;
pub use reduce::{
    change_against_one_partition, docs_label, zoom_end_s, DocsCell, Grid, MatrixCell, PeerBar,
    ReadonlyCell, ReportData, Spread, ThreadsPanel, Timeline, TimelineSelection, TIMELINES_MAX,
};

use crate::error::{Error, Result};

/// Reads `inputs`, draws every chart into `out_dir` and writes `out_dir/index.html` (and
/// `table.md`, the comparison table of every summary, ratios to Strata); returns the files
/// written.
pub fn write_report(
    inputs: &[PathBuf],
    out_dir: &Path,
    timelines: &TimelineSelection,
) -> Result<Vec<PathBuf>> {
    let mut lines = Vec::new();
    for p in inputs {
        lines.extend(crate::record::read_report_jsonl(p)?);
    }
    let data = ReportData::from_report_lines(&lines);
    plot::ensure_font()?;
    std::fs::create_dir_all(out_dir).map_err(|e| Error::io("creating", out_dir, e))?;
    let mut written = Vec::new();
    // (title, file name) of every chart, in page order.
    let mut images: Vec<(String, String)> = Vec::new();
    let mut chart = |file: String, title: String, draw: &dyn Fn(&Path) -> Result<()>| {
        let path = out_dir.join(&file);
        draw(&path)?;
        images.push((title, file));
        written.push(path);
        Ok::<_, Error>(())
    };

    if !data.peers.is_empty() {
        chart("peers.png".into(), "Engines side by side".into(), &|p| {
            plot::draw_peers(&data.peers, p)
        })?;
    }
    let best = data.best_by_partitions();
    if best.values().any(|b| !b.is_empty()) {
        chart(
            "partitions.png".into(),
            "Strata: ops/s by partitions (best thread count)".into(),
            &|p| plot::draw_partitions(&best, p),
        )?;
    }
    let threads = data.threads_panels();
    if !threads.is_empty() {
        chart(
            "threads.png".into(),
            "Strata: ops/s by threads".into(),
            &|p| plot::draw_threads(&threads, p),
        )?;
    }
    let cells = data.cells_with_trials();
    if !cells.is_empty() {
        chart(
            "matrix-trials.png".into(),
            "Strata: ops/s over trials per cell (box: quartiles, bar: median, whiskers: range, \
             dots: trials)"
                .into(),
            &|p| plot::draw_matrix_trials(&cells, p),
        )?;
    }
    // Box plots of the read-only settings that ran several trials (the ten best by median).
    // Numbered by their rank in the page's read-only table.
    let with_trials: Vec<(usize, ReadonlyCell)> = data
        .readonly_cells()
        .into_iter()
        .enumerate()
        .filter(|(_, c)| c.trials > 1)
        .take(10)
        .map(|(i, c)| (i + 1, c))
        .collect();
    if !with_trials.is_empty() {
        chart(
            "readonly-trials.png".into(),
            "Read-only: reads/s over trials".into(),
            &|p| plot::draw_readonly_trials(&with_trials, p),
        )?;
    }
    let scatter = data.disk_scatter();
    if !scatter.is_empty() {
        chart(
            "disk-scatter.png".into(),
            "Strata: ops/s against bytes on disk (every stats interval)".into(),
            &|p| plot::draw_disk_scatter(&scatter, p),
        )?;
    }
    let loads: Vec<Timeline> = data
        .docs_load_timelines
        .iter()
        .filter(|t| !t.points.is_empty())
        .cloned()
        .collect();
    if !loads.is_empty() {
        chart(
            "docs-load.png".into(),
            "Documents: the load over time".into(),
            &|p| plot::draw_docs_load(&loads, p),
        )?;
    }
    let docs_threads = data.docs_threads_panels();
    if !docs_threads.is_empty() {
        chart(
            "docs-threads.png".into(),
            "Documents: ops/s by threads".into(),
            &|p| plot::draw_threads(&docs_threads, p),
        )?;
    }
    for (workload, runs) in data.engine_timelines() {
        let name = sanitize(&workload);
        chart(
            format!("timelines-{name}.png"),
            format!("{workload}: every engine over time"),
            &|p| plot::draw_engine_timelines(&workload, &runs, None, p),
        )?;
        if let Some(end) = zoom_end_s(&runs) {
            chart(
                format!("timelines-{name}-zoom.png"),
                format!("{workload}: every engine over the first {end:.0} s"),
                &|p| plot::draw_engine_timelines(&workload, &runs, Some(end), p),
            )?;
        }
    }
    for t in data.selected_timelines(timelines) {
        chart(
            format!("timeline-{}.png", sanitize(&t.run_id)),
            t.title.clone(),
            &|p| plot::draw_timeline(t, p),
        )?;
    }
    if !data.summaries.is_empty() {
        let path = out_dir.join("table.md");
        std::fs::write(&path, format_table(&data.summaries))
            .map_err(|e| Error::io("writing", &path, e))?;
        written.push(path);
    }
    let index = out_dir.join("index.html");
    std::fs::write(&index, page::index_html(&data, &images, inputs))
        .map_err(|e| Error::io("writing", &index, e))?;
    written.push(index);
    Ok(written)
}

/// `s` with every character but ASCII letters, digits, `-` and `_` replaced by `_`: a file name.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::reduce::tests::{docs_load, docs_ops, summary};
    use super::*;
    use crate::record::{to_value, DocsLine, Line, TrialTagger};
    use crate::spec::{DocsPhase, Workload};

    /// Every chart this module adds is drawn from lines of each kind: trials of a grid, two
    /// engines' long runs, a document run with trials.
    #[test]
    fn every_kind_of_line_gets_its_charts_and_tables() {
        if ensure_font().is_err() {
            eprintln!("no TrueType font on this machine: skipping");
            return;
        }
        let mut json: Vec<serde_json::Value> = Vec::new();
        for engine in ["strata", "rocksdb"] {
            for i in 1..=30u64 {
                json.push(serde_json::json!({
                    "kind": "interval", "runId": format!("1-{engine}-put-heavy-p4-t2"),
                    "engine": engine, "workload": "put-heavy", "partitions": 4, "threads": 2,
                    "nanoTime": i * 1_000_000_000, "put": 1000 * i, "delete": 0, "get": 0,
                    "fileSize": i << 26,
                }));
            }
        }
        let mut tagger = TrialTagger::default();
        for (at, (p, t, ops)) in [(1, 1, 100.0), (4, 2, 300.0), (1, 1, 120.0), (4, 2, 280.0)]
            .into_iter()
            .enumerate()
        {
            let Line::Summary(r) = summary(Workload::Balanced, p, t, ops, at as u64 + 10) else {
                unreachable!()
            };
            json.push(tagger.tag(&to_value(&r).unwrap()));
        }
        for i in 0..3u64 {
            json.push(serde_json::json!({
                "kind": "docsStats", "runId": "5-docs", "phase": "load", "threads": 2,
                "compression": "lz4", "time": i * 1_000_000_000, "writes": i * 5000,
                "size": i << 24,
            }));
        }
        let docs = [
            docs_load("5-docs"),
            docs_ops("5-docs", DocsPhase::Get, 1, 100.0, Some(0)),
            docs_ops("5-docs", DocsPhase::Get, 1, 120.0, Some(1)),
            docs_ops("5-docs", DocsPhase::Get, 2, 180.0, Some(0)),
            docs_ops("5-docs", DocsPhase::Get, 2, 200.0, Some(1)),
        ];
        for d in docs {
            json.push(match d {
                DocsLine::Load(r) => to_value(&r).unwrap(),
                DocsLine::Ops(r) => to_value(&r).unwrap(),
                DocsLine::Stats(_) => unreachable!(),
            });
        }
        let tmp = tempfile::tempdir().unwrap();
        let input = tmp.path().join("all.jsonl");
        let text: Vec<String> = json.iter().map(|v| v.to_string()).collect();
        std::fs::write(&input, text.join("\n")).unwrap();
        let out = tmp.path().join("report");
        let written = write_report(&[input], &out, &TimelineSelection::default()).unwrap();
        for name in [
            "threads.png",
            "matrix-trials.png",
            "disk-scatter.png",
            "docs-load.png",
            "docs-threads.png",
            "timelines-put-heavy.png",
            "timelines-put-heavy-zoom.png",
        ] {
            assert!(
                written.contains(&out.join(name)),
                "{name} missing from {written:?}"
            );
        }
        let html = std::fs::read_to_string(out.join("index.html")).unwrap();
        for heading in [
            "Strata grid: top 2 cells by median ops/s",
            "Documents: loads",
            "Documents: phases",
            "<img src=\"timelines-put-heavy-zoom.png\"",
        ] {
            assert!(html.contains(heading), "no {heading:?} on the page");
        }
    }
}
