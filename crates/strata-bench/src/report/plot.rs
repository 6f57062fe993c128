//! The charts, drawn with `plotters`' bitmap backend into PNG files. Text is drawn with
//! `ab_glyph` from a TrueType file found on the machine (DejaVu Sans from Debian's
//! `fonts-dejavu-core`, or the file named by `STRATA_BENCH_FONT`), so nothing is fetched and no
//! fontconfig is needed.
//!
//! Every line is drawn by [`draw_line`] (a line through the points, a dot on each, a legend
//! entry), every box plot by [`draw_box`], every legend by [`draw_legend`], every file by
//! [`canvas`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::chart::SeriesAnno;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DynElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::reduce::{
    partitions_label, peer_engines, workload_order, MatrixCell, PeerBar, Spread, ThreadsPanel,
    Timeline,
};
use crate::error::{Error, Result};

/// Font files tried in order (after `STRATA_BENCH_FONT`).
const FONT_CANDIDATES: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

const FONT: &str = "sans-serif";
const WIDTH_PX: u32 = 1000;
const HEIGHT_PX: u32 = 520;

/// A drawing area of a PNG being drawn.
type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;
/// A chart with `f64` axes on such an area.
type Chart<'a, 'b> =
    ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

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

fn plot_err<E: std::fmt::Debug>(path: &Path) -> impl Fn(E) -> Error + '_ {
    move |e| Error::Plot {
        path: path.to_path_buf(),
        message: format!("{e:?}"),
    }
}

/// Draws one PNG of `size` pixels at `path`: a white canvas, what `draw` puts on it, written out.
fn canvas(path: &Path, size: (u32, u32), draw: impl FnOnce(&Area<'_>) -> Result<()>) -> Result<()> {
    let err = plot_err(path);
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(&err)?;
    draw(&root)?;
    root.present().map_err(&err)?;
    Ok(())
}

/// Draws one series: a line through `points`, a dot of `dot_px` on each point, and its legend
/// entry. `draw` is the chart's `draw_series`, or `draw_secondary_series` for the right axis.
fn draw_line<'a, 'c, E: std::fmt::Debug>(
    draw: impl FnOnce(
        Vec<DynElement<'static, BitMapBackend<'a>, (f64, f64)>>,
    ) -> std::result::Result<&'c mut SeriesAnno<'a, BitMapBackend<'a>>, E>,
    points: &[(f64, f64)],
    color: RGBColor,
    dot_px: u32,
    label: &str,
    path: &Path,
) -> Result<()>
where
    'a: 'c,
{
    let mut elements = vec![PathElement::new(points.to_vec(), color.stroke_width(2)).into_dyn()];
    elements.extend(
        points
            .iter()
            .map(|&p| Circle::new(p, dot_px, color.filled()).into_dyn()),
    );
    draw(elements)
        .map_err(plot_err(path))?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    Ok(())
}

/// Draws the legend of `chart`'s labelled series at `position`.
fn draw_legend<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    position: SeriesLabelPosition,
    font_px: u32,
    path: &Path,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, font_px))
        .draw()
        .map_err(plot_err(path))
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

/// Ops/s (left axis, blue line) and GiB on disk (right axis, orange line) over time.
pub fn draw_timeline(t: &Timeline, path: &Path) -> Result<()> {
    canvas(path, (WIDTH_PX, HEIGHT_PX), |root| {
        let err = plot_err(path);
        let x_max = t.points.iter().map(|p| p.0).fold(1.0, f64::max);
        let ops_max = nice_max(t.points.iter().map(|p| p.1).fold(0.0, f64::max));
        let gib_max = nice_max(t.points.iter().map(|p| p.2).fold(0.0, f64::max));
        let mut chart = ChartBuilder::on(root)
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
        let ops: Vec<(f64, f64)> = t.points.iter().map(|p| (p.0, p.1)).collect();
        let gib: Vec<(f64, f64)> = t.points.iter().map(|p| (p.0, p.2)).collect();
        draw_line(
            |s| chart.draw_series(s),
            &ops,
            palette(0),
            3,
            "ops/s (left)",
            path,
        )?;
        draw_line(
            |s| chart.draw_secondary_series(s),
            &gib,
            palette(1),
            3,
            "GiB on disk (right)",
            path,
        )?;
        draw_legend(&mut chart, SeriesLabelPosition::LowerRight, 14, path)
    })
}

/// A timeline point: seconds, ops/s (or docs/s), GiB on disk.
type TimelinePoint = (f64, f64, f64);

/// Picks one value of a timeline point.
type PointValue = fn(&TimelinePoint) -> f64;

/// Several engines' runs of one workload over time: ops/s (top panel) and GiB on disk (bottom
/// panel), one line per engine, on shared time axes; with `end_s`, only the first `end_s`
/// seconds (the zoomed view of the warm-up).
pub fn draw_engine_timelines(
    workload: &str,
    runs: &[&Timeline],
    end_s: Option<f64>,
    path: &Path,
) -> Result<()> {
    let labelled: Vec<(&str, &Timeline)> = runs.iter().map(|t| (t.engine.as_str(), *t)).collect();
    let heading = match end_s {
        Some(end) => format!("{workload}, first {end:.0} s"),
        None => workload.to_string(),
    };
    draw_timelines(
        &heading,
        &labelled,
        ("ops/s", "ops/s every interval"),
        end_s,
        path,
    )
}

/// Document loads over time: documents per second (top panel) and GiB on disk (bottom panel),
/// one line per load, titled with its setting.
pub fn draw_docs_load(runs: &[Timeline], path: &Path) -> Result<()> {
    let labelled: Vec<(&str, &Timeline)> = runs.iter().map(|t| (t.title.as_str(), t)).collect();
    draw_timelines(
        "document load",
        &labelled,
        ("docs/s", "documents written per second, every interval"),
        None,
        path,
    )
}

/// Runs over time, one line per (label, run): the rate (`rate`: axis name and what it is) in the
/// top panel, GiB on disk in the bottom one, on shared time axes up to `end_s` (else the
/// longest run's end); each panel's y axis fits the points shown.
fn draw_timelines(
    heading: &str,
    runs: &[(&str, &Timeline)],
    rate: (&str, &str),
    end_s: Option<f64>,
    path: &Path,
) -> Result<()> {
    canvas(path, (WIDTH_PX, 2 * HEIGHT_PX), |root| {
        let err = plot_err(path);
        let shown = |t: &Timeline| -> Vec<TimelinePoint> {
            t.points
                .iter()
                .filter(|p| end_s.is_none_or(|end| p.0 <= end))
                .copied()
                .collect()
        };
        let runs: Vec<(&str, Vec<TimelinePoint>)> =
            runs.iter().map(|(label, t)| (*label, shown(t))).collect();
        let x_max = end_s.unwrap_or_else(|| {
            runs.iter()
                .flat_map(|(_, pts)| pts.iter().map(|p| p.0))
                .fold(1.0, f64::max)
        });
        let panels = root.split_evenly((2, 1));
        let series: [(&str, &str, PointValue); 2] = [
            (rate.0, rate.1, |p| p.1),
            ("GiB on disk", "GiB on disk", |p| p.2),
        ];
        for ((y_desc, what, pick), panel) in series.iter().zip(panels.iter()) {
            let y_max = nice_max(
                runs.iter()
                    .flat_map(|(_, pts)| pts.iter().map(pick))
                    .fold(0.0, f64::max),
            );
            let mut chart = ChartBuilder::on(panel)
                .caption(format!("{heading}: {what}"), (FONT, 20))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(0f64..x_max, 0f64..y_max)
                .map_err(&err)?;
            chart
                .configure_mesh()
                .x_desc("seconds since start")
                .max_light_lines(0)
                .y_desc(*y_desc)
                .y_label_formatter(&|v| si(*v))
                .label_style((FONT, 14))
                .axis_desc_style((FONT, 16))
                .draw()
                .map_err(&err)?;
            for (i, (label, pts)) in runs.iter().enumerate() {
                let pts: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, pick(p))).collect();
                draw_line(|s| chart.draw_series(s), &pts, palette(i), 2, label, path)?;
            }
            draw_legend(&mut chart, SeriesLabelPosition::LowerRight, 14, path)?;
        }
        Ok(())
    })
}

/// Every stats interval of Strata's runs as a dot at (GiB on disk, ops/s), one colour per
/// workload: throughput against the size of the files (seed 000's scatter).
pub fn draw_disk_scatter(series: &[(String, Vec<(f64, f64)>)], path: &Path) -> Result<()> {
    canvas(path, (WIDTH_PX, HEIGHT_PX), |root| {
        let err = plot_err(path);
        let all = || series.iter().flat_map(|(_, pts)| pts.iter());
        let x_max = nice_max(all().map(|p| p.0).fold(0.0, f64::max));
        let y_max = nice_max(all().map(|p| p.1).fold(0.0, f64::max));
        let mut chart = ChartBuilder::on(root)
            .caption(
                "Strata: ops/s against bytes on disk, one dot per stats interval",
                (FONT, 20),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)
            .map_err(&err)?;
        chart
            .configure_mesh()
            .x_desc("GiB on disk at the end of the interval")
            .y_desc("ops/s in the interval")
            .max_light_lines(0)
            .x_label_formatter(&|v| format!("{v:.*}", if x_max >= 10.0 { 0 } else { 1 }))
            .y_label_formatter(&|v| si(*v))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .draw()
            .map_err(&err)?;
        for (i, (workload, pts)) in series.iter().enumerate() {
            let color = palette(i);
            chart
                .draw_series(
                    pts.iter()
                        .map(|&p| Circle::new(p, 3, color.mix(0.7).filled())),
                )
                .map_err(&err)?
                .label(workload.clone())
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, color.filled()));
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperRight, 14, path)
    })
}

/// A chart with one slot per group along x (labelled in its middle) and `y_desc` over `y`, its
/// mesh drawn.
fn grouped_chart<'a, 'b>(
    area: &'a Area<'b>,
    path: &Path,
    title: &str,
    y_desc: &str,
    groups: &[String],
    y: std::ops::Range<f64>,
) -> Result<ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>> {
    let err = plot_err(path);
    let n = groups.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..n, y)
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
    Ok(chart)
}

/// A bar's value in a group and series, and text to show after the value above the bar.
type BarValue<'a> = dyn Fn(&str, &str) -> Option<(f64, Option<String>)> + 'a;

/// Grouped bars: one group per `groups` key, one bar per series key, with a legend.
fn draw_grouped_bars(
    area: &Area<'_>,
    path: &Path,
    title: &str,
    y_desc: &str,
    groups: &[String],
    series: &[String],
    value: &BarValue<'_>,
) -> Result<()> {
    let err = plot_err(path);
    // Room above the bars for the value labels and the legend in the upper right corner.
    let y_max = headroom(
        groups
            .iter()
            .flat_map(|g| {
                series
                    .iter()
                    .filter_map(move |s| value(g, s).map(|(v, _)| v))
            })
            .fold(0.0, f64::max),
        1.35 + 0.1 * series.len() as f64,
    );
    let mut chart = grouped_chart(area, path, title, y_desc, groups, 0.0..y_max)?;
    let width = 0.8 / series.len().max(1) as f64;
    for (j, s) in series.iter().enumerate() {
        let color = palette(j);
        let bars: Vec<Rectangle<(f64, f64)>> = groups
            .iter()
            .enumerate()
            .filter_map(|(i, g)| {
                let (v, _) = value(g, s)?;
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
        // The value just above each bar, its extra text (if any) on a line above that.
        let texts: Vec<Text<'_, (f64, f64), String>> = groups
            .iter()
            .enumerate()
            .filter_map(|(i, g)| {
                let (v, extra) = value(g, s)?;
                let x_mid = i as f64 + 0.1 + (j as f64 + 0.46) * width;
                let style = TextStyle::from((FONT, 12).into_font())
                    .pos(Pos::new(HPos::Center, VPos::Bottom));
                let mut lines = vec![Text::new(si(v), (x_mid, v + y_max * 0.005), style.clone())];
                if let Some(extra) = extra {
                    lines.push(Text::new(extra, (x_mid, v + y_max * 0.04), style));
                }
                Some(lines)
            })
            .flatten()
            .collect();
        chart.draw_series(texts).map_err(&err)?;
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight, 14, path)
}

/// Engines side by side: ops/s, write amplification and MiB on disk per workload.
pub fn draw_peers(peers: &BTreeMap<String, BTreeMap<String, PeerBar>>, path: &Path) -> Result<()> {
    canvas(path, (WIDTH_PX, HEIGHT_PX * 5 / 2), |root| {
        let groups = workload_order(peers.keys());
        let engines = peer_engines(peers);
        let panels = root.split_evenly((4, 1));
        let get = |w: &str, e: &str| peers.get(w).and_then(|m| m.get(e));
        draw_grouped_bars(
            &panels[0],
            path,
            "ops/s (higher is better)",
            "ops/s",
            &groups,
            &engines,
            &|w, e| get(w, e).map(|b| (b.ops_per_sec, None)),
        )?;
        draw_grouped_bars(
            &panels[1],
            path,
            "write amplification: bytes written to disk / user bytes (lower is better)",
            "x",
            &groups,
            &engines,
            &|w, e| {
                get(w, e)
                    .and_then(|b| b.write_amplification)
                    .map(|v| (v, None))
            },
        )?;
        draw_grouped_bars(
            &panels[2],
            path,
            "MiB on disk at the end",
            "MiB",
            &groups,
            &engines,
            &|w, e| get(w, e).map(|b| (b.disk_mib, None)),
        )?;
        draw_grouped_bars(
            &panels[3],
            path,
            "bytes on disk at the end / bytes written by the user (lower is better)",
            "x",
            &groups,
            &engines,
            &|w, e| {
                get(w, e)
                    .and_then(|b| b.disk_per_user_byte)
                    .map(|v| (v, None))
            },
        )
    })
}

/// Strata's best ops/s per partition count, grouped by workload.
pub fn draw_partitions(best: &BTreeMap<String, BTreeMap<u64, f64>>, path: &Path) -> Result<()> {
    canvas(path, (WIDTH_PX, HEIGHT_PX), |root| {
        let groups = workload_order(best.keys());
        let parts: BTreeSet<u64> = best.values().flat_map(|m| m.keys().copied()).collect();
        let series: Vec<String> = parts.iter().map(|&p| partitions_label(p)).collect();
        let parts: Vec<u64> = parts.into_iter().collect();
        draw_grouped_bars(
            root,
            path,
            "Strata ops/s by partitions (best thread count per bar)",
            "ops/s",
            &groups,
            &series,
            // Each bar with its change against one partition (the seed's figure).
            &|w, s| {
                let i = series.iter().position(|x| x == s)?;
                let (best, p) = (best.get(w)?, *parts.get(i)?);
                let pct = super::reduce::change_against_one_partition(best, p)
                    .map(|pct| format!("({pct:+.0}%)"));
                Some((*best.get(&p)?, pct))
            },
        )
    })
}

/// Ops/s by thread count, two panels a row (Strata: one per workload, one line per partition
/// count; documents: one per phase, one line per setting). A line goes through the medians; where
/// points have several trials, a band in its colour spans their first to third quartiles.
pub fn draw_threads(panels: &[ThreadsPanel], path: &Path) -> Result<()> {
    let rows = panels.len().div_ceil(2).max(1);
    canvas(path, (WIDTH_PX, 380 * rows as u32), |root| {
        let err = plot_err(path);
        let areas = root.split_evenly((rows, 2));
        for (panel, area) in panels.iter().zip(areas.iter()) {
            let spreads = || panel.series.iter().flat_map(|(_, by)| by.values());
            let threads: Vec<u64> = panel
                .series
                .iter()
                .flat_map(|(_, by)| by.keys().copied())
                .collect::<BTreeSet<u64>>()
                .into_iter()
                .collect();
            let banded = spreads().any(|s| s.trials() > 1);
            // Thread counts are evenly spaced (the default 1, 4, 16, 32 are roughly logarithmic).
            let x_of = |t: u64| threads.iter().position(|&x| x == t).unwrap_or(0) as f64;
            let x_max = threads.len().max(1) as f64 - 0.5;
            let y_max = nice_max(spreads().map(|s| s.q3.max(s.median)).fold(0.0, f64::max));
            let title = if banded {
                format!("{} (median, band: IQR)", panel.title)
            } else {
                panel.title.clone()
            };
            let mut chart = ChartBuilder::on(area)
                .caption(title, (FONT, 18))
                .margin(10)
                .x_label_area_size(36)
                .y_label_area_size(70)
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
                .y_desc("ops/s")
                .x_labels(threads.len() * 2 + 2)
                .x_label_formatter(&label_threads)
                .y_label_formatter(&|v| si(*v))
                .max_light_lines(0)
                .label_style((FONT, 12))
                .axis_desc_style((FONT, 14))
                .draw()
                .map_err(&err)?;
            for (j, (label, by_threads)) in panel.series.iter().enumerate() {
                let color = palette(j);
                if by_threads.values().any(|s| s.trials() > 1) {
                    let upper = by_threads.iter().map(|(&t, s)| (x_of(t), s.q3));
                    let lower = by_threads.iter().rev().map(|(&t, s)| (x_of(t), s.q1));
                    chart
                        .draw_series([Polygon::new(
                            upper.chain(lower).collect::<Vec<_>>(),
                            color.mix(0.2).filled(),
                        )])
                        .map_err(&err)?;
                }
                let pts: Vec<(f64, f64)> = by_threads
                    .iter()
                    .map(|(&t, s)| (x_of(t), s.median))
                    .collect();
                draw_line(|s| chart.draw_series(s), &pts, color, 4, label, path)?;
            }
            draw_legend(&mut chart, SeriesLabelPosition::LowerRight, 12, path)?;
        }
        Ok(())
    })
}

/// The y range of box plots of `samples`: the samples with a margin, from 0 only when they come
/// near it, so that a box spanning a few percent of its value still shows as a box.
fn box_y_range<'a>(samples: impl Iterator<Item = &'a f64>) -> std::ops::Range<f64> {
    let (low, high) = samples.fold((f64::INFINITY, 0.0f64), |(lo, hi), &v| {
        (lo.min(v), hi.max(v))
    });
    if !(high > 0.0 && low.is_finite()) {
        return 0.0..1.0;
    }
    let pad = ((high - low) * 0.3).max(high * 0.03);
    let from = if low - pad < high * 0.25 {
        0.0
    } else {
        low - pad
    };
    from..high + pad
}

/// Draws a box plot in the slot `x..x + 1` of `chart`: a box from the first to the third
/// quartile, a bar at the median, whiskers to the lowest and highest sample, a dot per sample.
fn draw_box(
    chart: &mut Chart<'_, '_>,
    x: f64,
    (q1, median, q3): (f64, f64, f64),
    samples: &[f64],
    color: RGBColor,
    path: &Path,
) -> Result<()> {
    let err = plot_err(path);
    let low = samples.iter().copied().fold(q1, f64::min);
    let high = samples.iter().copied().fold(q3, f64::max);
    chart
        .draw_series([Rectangle::new(
            [(x + 0.25, q1), (x + 0.75, q3)],
            color.mix(0.35).filled(),
        )])
        .map_err(&err)?;
    chart
        .draw_series([
            PathElement::new(
                vec![(x + 0.25, median), (x + 0.75, median)],
                color.stroke_width(3),
            ),
            PathElement::new(vec![(x + 0.5, low), (x + 0.5, q1)], color.stroke_width(1)),
            PathElement::new(vec![(x + 0.5, q3), (x + 0.5, high)], color.stroke_width(1)),
            PathElement::new(vec![(x + 0.4, low), (x + 0.6, low)], color.stroke_width(1)),
            PathElement::new(
                vec![(x + 0.4, high), (x + 0.6, high)],
                color.stroke_width(1),
            ),
        ])
        .map_err(&err)?;
    chart
        .draw_series(
            samples
                .iter()
                .map(|&v| Circle::new((x + 0.5, v), 3, BLACK.mix(0.6).filled())),
        )
        .map_err(&err)?;
    Ok(())
}

/// Strata's grid cells with several trials as box plots of ops/s ([`draw_box`]), one panel per
/// workload, each box labelled with its partitions and threads and coloured by partitions.
pub fn draw_matrix_trials(cells: &[&MatrixCell], path: &Path) -> Result<()> {
    let workloads = workload_order(cells.iter().map(|c| &c.workload).collect::<BTreeSet<_>>());
    let parts: Vec<u64> = cells
        .iter()
        .map(|c| c.partitions)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let rows = workloads.len().max(1);
    canvas(path, (WIDTH_PX, 380 * rows as u32), |root| {
        let panels = root.split_evenly((rows, 1));
        for (workload, panel) in workloads.iter().zip(panels.iter()) {
            let mut these: Vec<&MatrixCell> = cells
                .iter()
                .copied()
                .filter(|c| &c.workload == workload)
                .collect();
            these.sort_by_key(|c| (c.partitions, c.threads));
            let labels: Vec<String> = these
                .iter()
                .map(|c| format!("p{} t{}", c.partitions, c.threads))
                .collect();
            let y = box_y_range(these.iter().flat_map(|c| c.ops_per_sec.samples.iter()));
            let mut chart = grouped_chart(
                panel,
                path,
                &format!("{workload}: ops/s over trials per cell (p: partitions, t: threads)"),
                "ops/s",
                &labels,
                y,
            )?;
            for (i, c) in these.iter().enumerate() {
                let color = palette(parts.iter().position(|&p| p == c.partitions).unwrap_or(0));
                let s: &Spread = &c.ops_per_sec;
                draw_box(
                    &mut chart,
                    i as f64,
                    (s.q1, s.median, s.q3),
                    &s.samples,
                    color,
                    path,
                )?;
            }
        }
        Ok(())
    })
}

/// Read-only settings with several trials, as box plots of reads/s ([`draw_box`]), each `#rank`
/// as in the page's read-only table.
pub fn draw_readonly_trials(cells: &[(usize, super::ReadonlyCell)], path: &Path) -> Result<()> {
    canvas(path, (WIDTH_PX, HEIGHT_PX), |root| {
        let y = box_y_range(cells.iter().flat_map(|(_, c)| c.samples.iter()));
        let labels: Vec<String> = cells.iter().map(|(rank, _)| format!("#{rank}")).collect();
        let mut chart = grouped_chart(
            root,
            path,
            "Read-only: reads/s over trials (box: quartiles, bar: median, whiskers: range, dots: trials)",
            "reads/s",
            &labels,
            y,
        )?;
        for (i, (_, c)) in cells.iter().enumerate() {
            draw_box(
                &mut chart,
                i as f64,
                c.reads_per_sec,
                &c.samples,
                palette(i),
                path,
            )?;
        }
        Ok(())
    })
}
