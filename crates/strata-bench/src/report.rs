//! `report`: JSONL result files in, PNG plots and an `index.html` showing them out.
//!
//! [`ReportData::from_lines`] reduces parsed lines to plot inputs (pure, tested); the `draw_*`
//! functions render them with `plotters`' bitmap backend. Text is drawn with `ab_glyph` from a
//! TrueType file found on the machine (DejaVu Sans from Debian's `fonts-dejavu-core`, or the file
//! named by `STRATA_BENCH_FONT`), so nothing is fetched and no fontconfig is needed.
//!
//! Plots: per run, ops/s and bytes on disk over time (two y-axes); Strata's ops/s by partition
//! count per workload (bars, best thread count, as the seed plotted it); ops/s by thread count
//! (one line per partition count, one panel per workload); engines side by side (ops/s, write
//! amplification, bytes on disk, bytes on disk per byte written).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::error::{Error, Result};
use crate::record::{IntervalPoint, Line, ReadonlyRecord, RunRecord};
use crate::spec::Engine;

/// Font files tried in order (after `STRATA_BENCH_FONT`).
pub const FONT_CANDIDATES: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Default for the most timelines drawn (the latest runs), so a large matrix file makes a
/// readable report.
pub const TIMELINES_MAX: usize = 48;

const FONT: &str = "sans-serif";
const WIDTH_PX: u32 = 1000;
const HEIGHT_PX: u32 = 520;
const GIB: f64 = (1u64 << 30) as f64;
const MIB: f64 = (1u64 << 20) as f64;

/// One run's stats lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// Run id.
    pub run_id: String,
    /// Engine, workload, partitions and threads, for the title.
    pub title: String,
    /// (seconds since start, ops/s, GiB on disk) per interval.
    pub points: Vec<(f64, f64, f64)>,
}

/// Strata's ops/s for one workload, keyed by (partitions, threads).
pub type Grid = BTreeMap<(u64, u64), f64>;

/// One engine's figures in one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerBar {
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Write amplification from `/proc/self/io`, else the engine's own.
    pub write_amplification: Option<f64>,
    /// MiB on disk at the end.
    pub disk_mib: f64,
    /// Bytes on disk at the end per byte of keys and values written (space used relative to
    /// work done: engines that ran faster wrote more).
    pub disk_per_user_byte: Option<f64>,
}

/// Everything the plots and the page need.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReportData {
    /// Per-run timelines, oldest first.
    pub timelines: Vec<Timeline>,
    /// Strata's results per workload name (latest run per cell).
    pub grids: BTreeMap<String, Grid>,
    /// Engines side by side: workload name -> engine name -> figures (latest run), present only
    /// for workloads in which a peer ran.
    pub peers: BTreeMap<String, BTreeMap<String, PeerBar>>,
    /// Every mixed-workload summary, in file order.
    pub summaries: Vec<RunRecord>,
    /// Every read-only result, in file order.
    pub readonly: Vec<ReadonlyRecord>,
}

impl ReportData {
    /// Reduces parsed lines to plot inputs.
    pub fn from_lines(lines: &[Line]) -> Self {
        let mut data = ReportData::default();
        let mut by_run: BTreeMap<String, Vec<&IntervalPoint>> = BTreeMap::new();
        for line in lines {
            match line {
                Line::Interval(p) => by_run.entry(p.run_id.clone()).or_default().push(p),
                Line::Summary(r) => data.summaries.push((**r).clone()),
                Line::Readonly(r) => data.readonly.push((**r).clone()),
                // Startup results are tabulated in BENCHMARKS.md, not plotted.
                Line::Startup(_) | Line::Other => {}
            }
        }
        for (run_id, points) in by_run {
            let Some(first) = points.first() else {
                continue;
            };
            let title = format!(
                "{} {} - {} partitions, {} threads",
                first.engine, first.workload, first.partitions, first.threads
            );
            let mut prev_s = 0.0;
            let mut pts = Vec::with_capacity(points.len());
            for p in &points {
                let dt = p.elapsed_s - prev_s;
                prev_s = p.elapsed_s;
                if dt > 0.0 {
                    pts.push((
                        p.elapsed_s,
                        p.ops as f64 / dt,
                        p.file_size_bytes as f64 / GIB,
                    ));
                }
            }
            data.timelines.push(Timeline {
                run_id,
                title,
                points: pts,
            });
        }
        // Run ids start with the start time in ms, so this is oldest first.
        data.timelines.sort_by(|a, b| a.run_id.cmp(&b.run_id));

        let mut latest: Vec<&RunRecord> = data.summaries.iter().collect();
        latest.sort_by_key(|r| r.started_unix_ms);
        for r in &latest {
            if r.spec.engine.engine == Engine::Strata {
                data.grids
                    .entry(r.spec.run.workload.name().to_string())
                    .or_default()
                    .insert(
                        (r.spec.engine.partitions as u64, r.spec.run.threads as u64),
                        r.summary.ops_per_sec,
                    );
            }
        }
        let with_peers: BTreeSet<&str> = latest
            .iter()
            .filter(|r| r.spec.engine.engine != Engine::Strata)
            .map(|r| r.spec.run.workload.name())
            .collect();
        for r in &latest {
            let w = r.spec.run.workload.name();
            if with_peers.contains(w) {
                data.peers.entry(w.to_string()).or_default().insert(
                    r.spec.engine.engine.name().to_string(),
                    PeerBar {
                        ops_per_sec: r.summary.ops_per_sec,
                        write_amplification: r
                            .write_amplification_io
                            .or(r.write_amplification_engine),
                        disk_mib: r.disk_bytes as f64 / MIB,
                        disk_per_user_byte: (r.summary.user_bytes_written > 0)
                            .then(|| r.disk_bytes as f64 / r.summary.user_bytes_written as f64),
                    },
                );
            }
        }
        data
    }

    /// For each workload, the best ops/s over thread counts per partition count (the seed's
    /// "partitions" plot).
    pub fn best_by_partitions(&self) -> BTreeMap<String, BTreeMap<u64, f64>> {
        self.grids
            .iter()
            .map(|(w, grid)| {
                let mut best: BTreeMap<u64, f64> = BTreeMap::new();
                for (&(p, _), &ops) in grid {
                    let e = best.entry(p).or_insert(0.0);
                    *e = e.max(ops);
                }
                (w.clone(), best)
            })
            .collect()
    }
}

/// Registers a TrueType font for plot text once per process; returns the file used.
pub fn ensure_font() -> Result<PathBuf> {
    static FONT_PATH: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    FONT_PATH
        .get_or_init(|| {
            let from_env = std::env::var_os("STRATA_BENCH_FONT").map(PathBuf::from);
            let candidates = from_env
                .into_iter()
                .chain(FONT_CANDIDATES.iter().map(PathBuf::from));
            for path in candidates {
                let Ok(bytes) = std::fs::read(&path) else {
                    continue;
                };
                // The font table wants `'static` bytes; one font per process is leaked on purpose.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok() {
                    return Ok(path);
                }
            }
            Err(format!(
                "no usable TrueType font: set STRATA_BENCH_FONT to a .ttf file or install \
                 fonts-dejavu-core (tried {})",
                FONT_CANDIDATES.join(", ")
            ))
        })
        .clone()
        .map_err(Error::Invalid)
}

/// Which runs get a timeline plot.
#[derive(Debug, Clone)]
pub struct TimelineSelection {
    /// At most this many (the latest).
    pub max: usize,
    /// Only runs whose id contains this text (ids read `START-ENGINE-WORKLOAD-pP-tT`).
    pub matching: Option<String>,
}

impl Default for TimelineSelection {
    fn default() -> Self {
        TimelineSelection {
            max: TIMELINES_MAX,
            matching: None,
        }
    }
}

/// Reads `inputs`, draws every plot into `out_dir` and writes `out_dir/index.html` (and
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
    ensure_font()?;
    std::fs::create_dir_all(out_dir).map_err(|e| Error::io("creating", out_dir, e))?;
    let mut written = Vec::new();
    let mut images: Vec<(String, String)> = Vec::new();

    if !data.peers.is_empty() {
        let path = out_dir.join("peers.png");
        draw_peers(&data.peers, &path)?;
        images.push(("Engines side by side".into(), file_name(&path)));
        written.push(path);
    }
    let best = data.best_by_partitions();
    if best.values().any(|b| !b.is_empty()) {
        let path = out_dir.join("partitions.png");
        draw_partitions(&best, &path)?;
        images.push((
            "Strata: ops/s by partitions (best thread count)".into(),
            file_name(&path),
        ));
        written.push(path);
    }
    if data.grids.values().any(|g| !g.is_empty()) {
        let path = out_dir.join("threads.png");
        draw_threads(&data.grids, &path)?;
        images.push(("Strata: ops/s by threads".into(), file_name(&path)));
        written.push(path);
    }
    let chosen: Vec<&Timeline> = data
        .timelines
        .iter()
        .filter(|t| {
            timelines
                .matching
                .as_deref()
                .is_none_or(|m| t.run_id.contains(m))
        })
        .collect();
    let skip = chosen.len().saturating_sub(timelines.max);
    for t in chosen.into_iter().skip(skip) {
        if t.points.is_empty() {
            continue;
        }
        let path = out_dir.join(format!("timeline-{}.png", sanitize(&t.run_id)));
        draw_timeline(t, &path)?;
        images.push((t.title.clone(), file_name(&path)));
        written.push(path);
    }
    if !data.summaries.is_empty() {
        let path = out_dir.join("table.md");
        std::fs::write(&path, crate::compare::format_table(&data.summaries))
            .map_err(|e| Error::io("writing", &path, e))?;
        written.push(path);
    }
    let html = index_html(&data, &images, inputs);
    let index = out_dir.join("index.html");
    std::fs::write(&index, html).map_err(|e| Error::io("writing", &index, e))?;
    written.push(index);
    Ok(written)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

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

fn plot_err<E: std::fmt::Debug>(path: &Path) -> impl Fn(E) -> Error + '_ {
    move |e| Error::Plot {
        path: path.to_path_buf(),
        message: format!("{e:?}"),
    }
}

fn palette(i: usize) -> RGBColor {
    const COLORS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    COLORS[i % COLORS.len()]
}

/// Human-friendly axis numbers: 1.2k, 35k, 1.1M.
fn si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn nice_max(v: f64) -> f64 {
    headroom(v, 1.12)
}

/// `v` times `factor`, or 1 when there is nothing to show.
fn headroom(v: f64, factor: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        1.0
    } else {
        v * factor
    }
}

/// Workload names in the seed's order (put-heavy, get-heavy, delete-heavy, balanced), others
/// after them alphabetically.
fn seed_order<'a>(names: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let mut v: Vec<String> = names.into_iter().cloned().collect();
    v.sort_by_key(|n| {
        let rank = crate::spec::Workload::ALL
            .iter()
            .position(|w| Some(*w) == crate::spec::Workload::parse(n))
            .unwrap_or(usize::MAX);
        (rank, n.clone())
    });
    v
}

/// Ops/s (left axis, blue line) and GiB on disk (right axis, orange line) over time.
pub fn draw_timeline(t: &Timeline, path: &Path) -> Result<()> {
    let err = plot_err(path);
    let root = BitMapBackend::new(path, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let x_max = t.points.iter().map(|p| p.0).fold(1.0, f64::max);
    let ops_max = nice_max(t.points.iter().map(|p| p.1).fold(0.0, f64::max));
    let gib_max = nice_max(t.points.iter().map(|p| p.2).fold(0.0, f64::max));
    let mut chart = ChartBuilder::on(&root)
        .caption(&t.title, (FONT, 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .right_y_label_area_size(70)
        .build_cartesian_2d(0f64..x_max, 0f64..ops_max)
        .map_err(&err)?
        .set_secondary_coord(0f64..x_max, 0f64..gib_max);
    chart
        .configure_mesh()
        .x_desc("seconds since start")
        .max_light_lines(0)
        .y_desc("ops/s")
        .y_label_formatter(&|v| si(*v))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(&err)?;
    chart
        .configure_secondary_axes()
        .y_desc("GiB on disk")
        .y_label_formatter(&|v| format!("{v:.2}"))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(&err)?;
    let blue = palette(0);
    let orange = palette(1);
    chart
        .draw_series(LineSeries::new(
            t.points.iter().map(|p| (p.0, p.1)),
            blue.stroke_width(2),
        ))
        .map_err(&err)?
        .label("ops/s (left)")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], blue.stroke_width(2)));
    chart
        .draw_series(
            t.points
                .iter()
                .map(|p| Circle::new((p.0, p.1), 3, blue.filled())),
        )
        .map_err(&err)?;
    chart
        .draw_secondary_series(LineSeries::new(
            t.points.iter().map(|p| (p.0, p.2)),
            orange.stroke_width(2),
        ))
        .map_err(&err)?
        .label("GiB on disk (right)")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], orange.stroke_width(2)));
    chart
        .draw_secondary_series(
            t.points
                .iter()
                .map(|p| Circle::new((p.0, p.2), 3, orange.filled())),
        )
        .map_err(&err)?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 14))
        .draw()
        .map_err(&err)?;
    root.present().map_err(&err)?;
    Ok(())
}

/// Grouped bars: one group per `groups` key, one bar per series key, with a legend.
fn draw_grouped_bars(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    path: &Path,
    title: &str,
    y_desc: &str,
    groups: &[String],
    series: &[String],
    value: &dyn Fn(&str, &str) -> Option<f64>,
) -> Result<()> {
    let err = plot_err(path);
    // Room above the bars for the value labels and the legend in the upper right corner.
    let y_max = headroom(
        groups
            .iter()
            .flat_map(|g| series.iter().filter_map(move |s| value(g, s)))
            .fold(0.0, f64::max),
        1.35 + 0.1 * series.len() as f64,
    );
    let n = groups.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n, 0f64..y_max)
        .map_err(&err)?;
    let labels: Vec<String> = groups.to_vec();
    let fmt = move |x: &f64| -> String {
        let i = x.floor();
        if (x - i - 0.5).abs() < 1e-6 {
            labels.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .max_light_lines(0)
        .x_labels(groups.len() * 2 + 1)
        .x_label_formatter(&fmt)
        .y_desc(y_desc)
        .y_label_formatter(&|v| si(*v))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(&err)?;
    let width = 0.8 / series.len().max(1) as f64;
    for (j, s) in series.iter().enumerate() {
        let color = palette(j);
        let bars: Vec<Rectangle<(f64, f64)>> = groups
            .iter()
            .enumerate()
            .filter_map(|(i, g)| {
                let v = value(g, s)?;
                let x0 = i as f64 + 0.1 + j as f64 * width;
                Some(Rectangle::new(
                    [(x0, 0.0), (x0 + width * 0.92, v)],
                    color.filled(),
                ))
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(&err)?
            .label(s.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
        // Value labels above the bars.
        let texts: Vec<Text<'_, (f64, f64), String>> = groups
            .iter()
            .enumerate()
            .filter_map(|(i, g)| {
                let v = value(g, s)?;
                let x_mid = i as f64 + 0.1 + (j as f64 + 0.46) * width;
                let style = TextStyle::from((FONT, 12).into_font())
                    .pos(Pos::new(HPos::Center, VPos::Bottom));
                Some(Text::new(si(v), (x_mid, v + y_max * 0.005), style))
            })
            .collect();
        chart.draw_series(texts).map_err(&err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 14))
        .draw()
        .map_err(&err)?;
    Ok(())
}

/// Engines side by side: ops/s, write amplification and MiB on disk per workload.
pub fn draw_peers(peers: &BTreeMap<String, BTreeMap<String, PeerBar>>, path: &Path) -> Result<()> {
    let err = plot_err(path);
    let root = BitMapBackend::new(path, (WIDTH_PX, HEIGHT_PX * 5 / 2)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let groups = seed_order(peers.keys());
    let mut engines: Vec<String> = Vec::new();
    for e in Engine::ALL {
        if peers.values().any(|m| m.contains_key(e.name())) {
            engines.push(e.name().to_string());
        }
    }
    let panels = root.split_evenly((4, 1));
    let get = |w: &str, e: &str| peers.get(w).and_then(|m| m.get(e));
    draw_grouped_bars(
        &panels[0],
        path,
        "ops/s (higher is better)",
        "ops/s",
        &groups,
        &engines,
        &|w, e| get(w, e).map(|b| b.ops_per_sec),
    )?;
    draw_grouped_bars(
        &panels[1],
        path,
        "write amplification: bytes written to disk / user bytes (lower is better)",
        "x",
        &groups,
        &engines,
        &|w, e| get(w, e).and_then(|b| b.write_amplification),
    )?;
    draw_grouped_bars(
        &panels[2],
        path,
        "MiB on disk at the end",
        "MiB",
        &groups,
        &engines,
        &|w, e| get(w, e).map(|b| b.disk_mib),
    )?;
    draw_grouped_bars(
        &panels[3],
        path,
        "bytes on disk at the end / bytes written by the user (lower is better)",
        "x",
        &groups,
        &engines,
        &|w, e| get(w, e).and_then(|b| b.disk_per_user_byte),
    )?;
    root.present().map_err(&err)?;
    Ok(())
}

/// Strata's best ops/s per partition count, grouped by workload.
pub fn draw_partitions(best: &BTreeMap<String, BTreeMap<u64, f64>>, path: &Path) -> Result<()> {
    let err = plot_err(path);
    let root = BitMapBackend::new(path, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let groups = seed_order(best.keys());
    let parts: BTreeSet<u64> = best.values().flat_map(|m| m.keys().copied()).collect();
    let series: Vec<String> = parts.iter().map(|&p| partitions_label(p)).collect();
    let parts: Vec<u64> = parts.into_iter().collect();
    draw_grouped_bars(
        &root,
        path,
        "Strata ops/s by partitions (best thread count per bar)",
        "ops/s",
        &groups,
        &series,
        &|w, s| {
            let i = series.iter().position(|x| x == s)?;
            best.get(w)?.get(parts.get(i)?).copied()
        },
    )?;
    root.present().map_err(&err)?;
    Ok(())
}

/// Strata's ops/s by thread count: one panel per workload, one line per partition count.
pub fn draw_threads(grids: &BTreeMap<String, Grid>, path: &Path) -> Result<()> {
    let err = plot_err(path);
    let rows = grids.len().div_ceil(2).max(1);
    let root = BitMapBackend::new(path, (WIDTH_PX, 380 * rows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    let panels = root.split_evenly((rows, 2));
    let ordered = seed_order(grids.keys());
    let ordered = ordered.iter().filter_map(|w| grids.get(w).map(|g| (w, g)));
    for ((workload, grid), panel) in ordered.zip(panels.iter()) {
        let threads: Vec<u64> = grid
            .keys()
            .map(|k| k.1)
            .collect::<BTreeSet<u64>>()
            .into_iter()
            .collect();
        let parts: BTreeSet<u64> = grid.keys().map(|k| k.0).collect();
        // Thread counts are evenly spaced (the seed's 1, 4, 16, 32 are roughly logarithmic).
        let x_of = |t: u64| threads.iter().position(|&x| x == t).unwrap_or(0) as f64;
        let x_max = threads.len().max(1) as f64 - 0.5;
        let y_max = nice_max(grid.values().copied().fold(0.0, f64::max));
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("{workload}: ops/s by threads"), (FONT, 18))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..x_max, 0f64..y_max)
            .map_err(&err)?;
        let label_threads = |x: &f64| -> String {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                threads
                    .get(i as usize)
                    .map(|t| t.to_string())
                    .unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .x_desc("threads")
            .x_labels(threads.len() * 2 + 2)
            .x_label_formatter(&label_threads)
            .y_label_formatter(&|v| si(*v))
            .max_light_lines(0)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 14))
            .draw()
            .map_err(&err)?;
        for (j, p) in parts.iter().enumerate() {
            let color = palette(j);
            let pts: Vec<(f64, f64)> = grid
                .iter()
                .filter(|((pp, _), _)| pp == p)
                .map(|((_, t), v)| (x_of(*t), *v))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(&err)?
                .label(partitions_label(*p))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(pts.into_iter().map(|pt| Circle::new(pt, 4, color.filled())))
                .map_err(&err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FONT, 12))
            .draw()
            .map_err(&err)?;
    }
    root.present().map_err(&err)?;
    Ok(())
}

fn partitions_label(p: u64) -> String {
    format!("{p} partition{}", if p == 1 { "" } else { "s" })
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn opt2(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into())
}

fn opt_mib(v: Option<u64>) -> String {
    v.map(|x| format!("{:.0}", x as f64 / MIB))
        .unwrap_or_else(|| "-".into())
}

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
    {
        let _ = write!(h, " Machine: {}.", html_escape(&m));
    }
    let _ = writeln!(h, "</p>");
    if !data.summaries.is_empty() {
        let _ = writeln!(
            h,
            "<h2>Mixed workloads</h2>\n<table><tr><th>engine</th><th>workload</th><th>partitions</th>\
             <th>threads</th><th>sync</th><th>value B</th><th>seconds</th><th>ops/s</th><th>p99 us</th>\
             <th>min..max interval ops/s</th><th>disk MiB</th><th>WA engine</th><th>WA io</th><th>peak RSS MiB</th><th>load 1m</th></tr>"
        );
        for r in &data.summaries {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td>\
                 <td>{:.0}</td><td>{}</td><td>{:.0}..{:.0}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td></tr>",
                r.spec.engine.engine,
                r.spec.run.workload.name(),
                r.spec.engine.partitions,
                r.spec.run.threads,
                r.spec.engine.sync,
                r.spec.run.value_bytes,
                r.summary.seconds,
                r.summary.ops_per_sec,
                r.summary.p99_us,
                r.summary.interval_ops_per_sec_min,
                r.summary.interval_ops_per_sec_max,
                r.disk_bytes as f64 / MIB,
                opt2(r.write_amplification_engine),
                opt2(r.write_amplification_io),
                opt_mib(r.peak_rss_bytes),
                if r.isolated { "" } else { "*" },
                opt2(r.load_avg_1m),
            );
        }
        let _ = writeln!(
            h,
            "</table>\n<p>WA io: bytes the engine's process sent to storage while the workload ran \
             (/proc/self/io write_bytes less cancelled) per byte of keys and values written. \
             * = not run in a process of its own, so peak RSS may include earlier runs.</p>"
        );
    }
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
                r.disk_bytes as f64 / GIB,
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
    }
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
