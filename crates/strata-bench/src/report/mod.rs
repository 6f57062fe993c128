//! `report`: JSONL result files in; PNG charts, `table.md` and an `index.html` showing them out.
//!
//! `reduce` turns parsed lines into what is shown ([`ReportData`]; pure, tested); `plot` draws
//! the charts; `page` writes the HTML page and the Markdown table ([`format_table`]);
//! [`write_report`], what `strata bench report` calls, does all three.
//!
//! Charts: per run, ops/s and bytes on disk over time (two y-axes); Strata's ops/s by partition
//! count per workload (bars, best thread count, each labelled with its change against one
//! partition as the seed reported it); ops/s by thread count (one line per partition
//! count, one panel per workload); engines side by side (ops/s, write amplification, bytes on
//! disk, bytes on disk per byte written).

mod page;
mod plot;
mod reduce;

use std::path::{Path, PathBuf};

pub use page::format_table;
pub(crate) use page::opt;
pub use plot::ensure_font;
pub(crate) use reduce::mib;
pub use reduce::{
    change_against_one_partition, Grid, PeerBar, ReadonlyCell, ReportData, Timeline,
    TimelineSelection, TIMELINES_MAX,
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
        lines.extend(crate::record::read_jsonl(p)?);
    }
    let data = ReportData::from_lines(&lines);
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
    if data.grids.values().any(|g| !g.is_empty()) {
        chart(
            "threads.png".into(),
            "Strata: ops/s by threads".into(),
            &|p| plot::draw_threads(&data.grids, p),
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
    for (workload, runs) in data.engine_timelines() {
        chart(
            format!("timelines-{}.png", sanitize(&workload)),
            format!("{workload}: every engine over time"),
            &|p| plot::draw_engine_timelines(&workload, &runs, p),
        )?;
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
