//! The report's charts, drawn with plotters into SVG strings.
//!
//! Following pgsql-hackers "checkpointer continuous flushing" (seed 004): per-second TPS and
//! latency over time, and CDFs (P(X <= x) on the y axis) of per-second TPS, per-second
//! maximum latency and per-second latency stddev, with log-scaled x axes for latencies.
//! Several runs are overlaid, one colour per run, named in each chart's legend.

use anyhow::{bail, Result};
use plotters::coord::combinators::LogCoord;
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::model::{RunResult, Second};
use super::svg::{fmt_num, svg_document, FONT};

/// One chart of the report: its file name (next to index.html), texts for the page, and
/// the SVG document.
#[derive(Debug, Clone)]
pub struct Chart {
    pub file_name: &'static str,
    pub title: String,
    /// Alternative text of the image: what it plots.
    pub alt: String,
    /// Shown under the image: what to look for.
    pub caption: &'static str,
    pub svg: String,
}

const HEIGHT: u32 = 480;
/// Height of one run's panel in the buffer-writes chart when there are several runs.
const PANEL_HEIGHT: u32 = 320;
/// Latencies are clamped to this floor (ms) on log axes, which cannot show zero.
pub const LOG_FLOOR_MS: f64 = 0.01;
/// Per-second series longer than this are reduced to min/max pairs per bucket (spikes
/// survive) so SVG files stay small for day-long runs.
const MAX_LINE_POINTS: usize = 2400;

/// One colour per run (Tableau 10), cycled past ten runs.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The colour of run number `index` in every overlaid chart.
pub fn run_colour(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// Colours of the writers in the buffer-writes chart.
pub const BACKEND_COLOUR: RGBColor = RGBColor(214, 39, 40);
pub const BGWRITER_COLOUR: RGBColor = RGBColor(31, 119, 180);
pub const CHECKPOINTER_COLOUR: RGBColor = RGBColor(44, 160, 44);
const CHECKPOINT_SHADE: RGBColor = RGBColor(150, 150, 150);

/// Draws every chart of the report. `runs` must not be empty.
pub fn render_all(runs: &[RunResult]) -> Result<Vec<Chart>> {
    if runs.is_empty() {
        bail!("no runs to chart");
    }
    let labels = runs
        .iter()
        .map(|r| r.label.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let mut charts = Vec::new();

    charts.push(Chart {
        file_name: "tps.svg",
        title: "Throughput per second".into(),
        alt: format!("Line chart of transactions per second against elapsed seconds, checkpoints shaded, for {labels}"),
        caption: "Per-second TPS; shaded bands are checkpoints in the run's colour, dotted lines \
                  the pool's resizes (`--resize-at`, the new size on top). Look for dips and \
                  wobble during checkpoints and after resizes: a flat line is consistent \
                  throughput.",
        svg: time_series(
            runs,
            "Throughput per second",
            "TPS (transactions/s)",
            |s| s.tps,
            true,
        )?,
    });
    charts.push(Chart {
        file_name: "max-latency.svg",
        title: "Maximum latency per second".into(),
        alt: format!("Line chart of each second's maximum transaction latency in milliseconds against elapsed seconds, for {labels}"),
        caption: "The slowest transaction of each second (log scale: equal distances are equal \
                  ratios, so a run whose spikes are 100 times another's leaves both readable). \
                  Look for spikes, and whether they line up with the checkpoints in the TPS chart.",
        svg: log_time_series(
            runs,
            "Maximum latency per second",
            "max latency (ms, log scale)",
            |s| s.lat_max_ms,
        )?,
    });

    let tps: Vec<Vec<(f64, f64)>> = runs
        .iter()
        .map(|r| cdf_points(r.series.iter().map(|s| s.tps).collect()))
        .collect();
    charts.push(Chart {
        file_name: "tps-cdf.svg",
        title: "CDF of per-second TPS".into(),
        alt: format!("Cumulative distribution of per-second TPS: fraction of seconds at or below each TPS, for {labels}"),
        caption: "Fraction of seconds with at most x TPS. Steeper is more consistent; a curve \
                  further right (lower at a given x) is faster. A long left tail means slow seconds.",
        svg: cdf_chart(
            runs,
            "CDF of per-second TPS",
            "TPS (transactions/s)",
            "fraction of seconds",
            &tps,
            false,
        )?,
    });

    let per_second_log = |f: fn(&Second) -> f64| -> Vec<Vec<(f64, f64)>> {
        runs.iter()
            .map(|r| cdf_points(r.series.iter().map(|s| log_clamp(f(s))).collect()))
            .collect()
    };
    charts.push(Chart {
        file_name: "max-latency-cdf.svg",
        title: "CDF of per-second maximum latency".into(),
        alt: format!("Cumulative distribution of each second's maximum latency, log-scaled milliseconds, for {labels}"),
        caption: "Fraction of seconds whose slowest transaction took at most x ms (log scale: \
                  equal distances are equal ratios). Left and steep is better; watch the top tail.",
        svg: cdf_chart(
            runs,
            "CDF of per-second maximum latency",
            "max latency (ms, log scale)",
            "fraction of seconds",
            &per_second_log(|s| s.lat_max_ms),
            true,
        )?,
    });
    charts.push(Chart {
        file_name: "latency-stddev-cdf.svg",
        title: "CDF of per-second latency standard deviation".into(),
        alt: format!("Cumulative distribution of each second's latency standard deviation, log-scaled milliseconds, for {labels}"),
        caption: "Fraction of seconds whose latency spread (stddev) was at most x ms (log scale). \
                  Left and steep means steady latency within and across seconds.",
        svg: cdf_chart(
            runs,
            "CDF of per-second latency stddev",
            "latency stddev (ms, log scale)",
            "fraction of seconds",
            &per_second_log(|s| s.lat_stddev_ms),
            true,
        )?,
    });

    let txn: Vec<Vec<(f64, f64)>> = runs
        .iter()
        .map(|r| histogram_cdf(&r.latency_histogram))
        .collect();
    charts.push(Chart {
        file_name: "latency-cdf.svg",
        title: "CDF of transaction latency".into(),
        alt: format!("Cumulative distribution of transaction latency from the latency histogram, log-scaled milliseconds, for {labels}"),
        caption: "Fraction of all transactions that finished within x ms (log scale), from the \
                  latency histogram. Compare medians where curves cross 0.5 and the tail near 1.",
        svg: cdf_chart(
            runs,
            "CDF of transaction latency",
            "latency (ms, log scale)",
            "fraction of transactions",
            &txn,
            true,
        )?,
    });

    charts.push(Chart {
        file_name: "buffer-writes.svg",
        title: "Buffer writes by source".into(),
        alt: format!("Buffers written per second by backends, the background writer and the checkpointer, one panel per run, for {labels}"),
        caption: "Buffers written per second by who wrote them, one panel per run (grey bands: \
                  checkpoints). Backend writes mean clients waited on evictions: the bgwriter \
                  and checkpointer should do the writing.",
        svg: buffer_writes(runs)?,
    });
    if super::heatmap::has_data(runs) {
        charts.push(Chart {
            file_name: "pool-heatmap.svg",
            title: "The pool over time".into(),
            alt: format!("Heatmap per run: rows are buffer categories (unused, usage counts 0 to 5, dirty, loaded by each kind of ring, each relation), columns are seconds, darker cells hold more of the pool, for {labels}"),
            caption: "What the pool held each second, as pg_buffercache would show it: darker cells \
                      are a larger share of the buffers. A scan without a ring pales the high \
                      usage counts while its table's row darkens; a checkpoint drains the dirty \
                      row; the bgwriter keeps low usage counts clean.",
            svg: super::heatmap::pool_heatmap(runs)?,
        });
    }
    Ok(charts)
}

/// Clamps a latency to the log axes' floor; non-finite values stay as they are (and are
/// dropped later).
fn log_clamp(ms: f64) -> f64 {
    if ms.is_nan() {
        ms
    } else {
        ms.max(LOG_FLOOR_MS)
    }
}

/// Highest finite value, or `None`.
fn finite_max(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.filter(|v| v.is_finite()).reduce(f64::max)
}

/// Reduces a long line to the first, min and max point of each bucket, in time order.
fn decimate(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    if points.len() <= MAX_LINE_POINTS {
        return points;
    }
    let per_bucket = points.len().div_ceil(MAX_LINE_POINTS / 3);
    let mut out = Vec::with_capacity(MAX_LINE_POINTS + 3);
    for chunk in points.chunks(per_bucket) {
        let mut min = 0;
        let mut max = 0;
        for (i, p) in chunk.iter().enumerate() {
            if p.1 < chunk[min].1 {
                min = i;
            }
            if p.1 > chunk[max].1 {
                max = i;
            }
        }
        let mut picks = vec![0, min, max];
        picks.sort_unstable();
        picks.dedup();
        out.extend(picks.into_iter().map(|i| chunk[i]));
    }
    out.push(*points.last().expect("non-empty"));
    out
}

/// The legend's entries take about this fraction of the plot's height; the y axis gets that
/// much headroom above the data so the legend (upper right) does not hide it.
fn legend_headroom(entries: usize, plot_height: u32) -> f64 {
    let legend_px = 24.0 + 20.0 * entries as f64;
    (legend_px / f64::from(plot_height)).min(0.6)
}

/// One line per run (a dot where a run has a single point), in the run's colour, named in
/// the legend.
fn run_lines<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    runs: &[RunResult],
    lines: &[Vec<(f64, f64)>],
) -> Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, (run, line)) in runs.iter().zip(lines).enumerate() {
        let colour = run_colour(i);
        if line.len() == 1 {
            chart.draw_series(std::iter::once(Circle::new(line[0], 4, colour.filled())))?;
        }
        chart
            .draw_series(LineSeries::new(
                decimate(line.clone()),
                colour.stroke_width(2),
            ))?
            .label(run.label.as_str())
            .legend(legend_line(colour));
    }
    Ok(())
}

/// The legend box every chart draws, at `position`.
fn legend<'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    position: SeriesLabelPosition,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(160, 160, 160))
        .draw()?;
    Ok(())
}

fn legend_line(colour: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(3))
}

fn legend_box(colour: RGBColor, alpha: f64) -> impl Fn((i32, i32)) -> Rectangle<(i32, i32)> {
    move |(x, y)| Rectangle::new([(x, y - 6), (x + 20, y + 6)], colour.mix(alpha).filled())
}

fn no_data_note<X, Y>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, Y>>,
    at: (f64, f64),
    what: &str,
) -> Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    chart.draw_series(std::iter::once(Text::new(
        format!("no {what}"),
        at,
        (FONT, 18).into_font().color(&RGBColor(90, 90, 90)),
    )))?;
    Ok(())
}

/// End of the time axis (s): the longest run's last second, else its duration, else its
/// last checkpoint's end; at least 1. Checkpoints past it are cut off (a run that
/// recorded a checkpoint span beyond its series must not squash the chart).
fn time_axis_end(runs: &[RunResult]) -> f64 {
    let plausible = |v: f64| v.is_finite() && v > 0.0;
    let series_end = runs
        .iter()
        .filter_map(|r| r.series.iter().map(|s| s.t).max())
        .max()
        .map(|t| f64::from(t) + 1.0);
    let end = series_end
        .or_else(|| finite_max(runs.iter().map(|r| r.duration_s).filter(|v| plausible(*v))))
        .or_else(|| {
            finite_max(
                runs.iter()
                    .flat_map(|r| r.checkpoints.iter().map(|c| c.end_s))
                    .filter(|v| plausible(*v)),
            )
        })
        .unwrap_or(1.0);
    end.max(1.0)
}

/// Per-second values over elapsed time, one line per run; optionally each run's
/// checkpoints shaded in its colour.
fn time_series(
    runs: &[RunResult],
    title: &str,
    y_desc: &str,
    value: fn(&Second) -> f64,
    shade_checkpoints: bool,
) -> Result<String> {
    let lines: Vec<Vec<(f64, f64)>> = runs
        .iter()
        .map(|r| {
            r.series
                .iter()
                .map(|s| (f64::from(s.t), value(s)))
                .filter(|p| p.1.is_finite())
                .collect()
        })
        .collect();
    let x_end = time_axis_end(runs);
    let data_max = finite_max(lines.iter().flatten().map(|p| p.1))
        .unwrap_or(0.0)
        .max(0.0);
    let data_max = if data_max > 0.0 { data_max } else { 1.0 };
    let shaded_runs = if shade_checkpoints {
        runs.iter().filter(|r| !r.checkpoints.is_empty()).count()
            + runs.iter().filter(|r| !r.resizes.is_empty()).count()
    } else {
        0
    };
    let headroom = legend_headroom(runs.len() + shaded_runs, HEIGHT - 110);
    let y_top = data_max * 1.05 / (1.0 - headroom);
    let has_data = lines.iter().any(|l| !l.is_empty());

    svg_document(HEIGHT, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 22))
            .margin(14)
            .margin_right(30)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(0.0..x_end, 0.0..y_top)?;
        chart
            .configure_mesh()
            .x_desc("elapsed time (s)")
            .y_desc(y_desc)
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 13))
            .light_line_style(RGBColor(240, 240, 240))
            .max_light_lines(4)
            .x_label_formatter(&fmt_num)
            .y_label_formatter(&fmt_num)
            .draw()?;

        if shade_checkpoints {
            // Overlapping spans of several runs add up; keep each one lighter.
            let shade_alpha = if runs.len() == 1 { 0.15 } else { 0.1 };
            for (i, run) in runs.iter().enumerate() {
                let colour = run_colour(i);
                let spans = run
                    .checkpoints
                    .iter()
                    .filter(|c| c.start_s.is_finite() && c.end_s.is_finite())
                    .map(|c| {
                        let a = c.start_s.clamp(0.0, x_end);
                        let b = c.end_s.clamp(a, x_end);
                        Rectangle::new([(a, 0.0), (b, y_top)], colour.mix(shade_alpha).filled())
                    })
                    .collect::<Vec<_>>();
                if spans.is_empty() {
                    continue;
                }
                let name = if runs.len() == 1 {
                    "checkpoint".to_string()
                } else {
                    format!("{} checkpoint", run.label)
                };
                chart
                    .draw_series(spans)?
                    .label(name)
                    .legend(legend_box(colour, 0.3));
            }
        }
        if shade_checkpoints {
            // The target rate (-R or --rate-profile), dashed, and the seconds in which a
            // --batch-every batch committed, as triangles on the line.
            for (i, run) in runs.iter().enumerate() {
                let colour = run_colour(i);
                let target: Vec<(f64, f64)> = run
                    .series
                    .iter()
                    .filter_map(|s| s.target_tps.map(|r| (f64::from(s.t), r.min(y_top))))
                    .collect();
                if !target.is_empty() {
                    chart
                        .draw_series(DashedLineSeries::new(
                            target,
                            6,
                            4,
                            colour.mix(0.6).stroke_width(1),
                        ))?
                        .label(format!("{} target rate", run.label))
                        .legend(legend_line(colour));
                }
                let batches: Vec<_> = run
                    .series
                    .iter()
                    .filter(|s| s.batch_rows > 0)
                    .map(|s| TriangleMarker::new((f64::from(s.t), value(s)), 7, colour.filled()))
                    .collect();
                if !batches.is_empty() {
                    chart
                        .draw_series(batches)?
                        .label(format!("{} batch committed", run.label))
                        .legend(move |(x, y)| TriangleMarker::new((x + 8, y), 6, colour.filled()));
                }
            }
        }
        if shade_checkpoints {
            resize_marks(&mut chart, runs, y_top)?;
        }
        run_lines(&mut chart, runs, &lines)?;
        if !has_data {
            no_data_note(&mut chart, (x_end * 0.4, y_top * 0.5), "per-second data")?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        Ok(())
    })
}

/// Each `--resize-at` of each run as a dotted vertical line in the run's colour at the
/// moment it began, with the size it went to at the top (a shrink's dip lies just right of
/// it).
fn resize_marks<X, Y>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, Y>>,
    runs: &[RunResult],
    y_top: f64,
) -> Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, run) in runs.iter().enumerate() {
        let colour = run_colour(i);
        let marks: Vec<_> = run.resizes.iter().filter(|z| z.at_s.is_finite()).collect();
        for (k, z) in marks.iter().enumerate() {
            let line = DashedLineSeries::new(
                [(z.at_s, 0.0), (z.at_s, y_top)],
                2,
                3,
                colour.mix(0.8).stroke_width(1),
            );
            let drawn = chart.draw_series(line)?;
            if k == 0 {
                let name = if runs.len() == 1 {
                    "pool resized".to_string()
                } else {
                    format!("{} pool resized", run.label)
                };
                drawn.label(name).legend(legend_line(colour));
            }
            chart.draw_series(std::iter::once(Text::new(
                format!(" {}", bufpool::options::format_size(z.to_bytes)),
                (z.at_s, y_top * 0.97),
                (FONT, 12).into_font().color(&colour),
            )))?;
        }
    }
    Ok(())
}

/// One line of a miss-ratio chart: its name, and (pool buffers, miss ratio) points.
pub struct MissLine {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// `experiment policies`' chart of one workload: miss ratio against pool size (log
/// scale), one line per policy, and OPT (the last line, dashed black) as the floor.
pub fn miss_ratio_chart(title: &str, lines: &[MissLine]) -> Result<String> {
    xy_log_chart(
        title,
        ("pool size (buffers, log scale)", "miss ratio"),
        lines,
        true,
    )
}

/// Lines of (x, y) points on a log x axis and a linear y axis from 0, with their legend
/// above them; with `last_is_floor` the last line is drawn dashed black (a bound, as OPT
/// in a miss-ratio chart) and y stops at 1.
pub fn xy_log_chart(
    title: &str,
    (x_desc, y_desc): (&str, &str),
    lines: &[MissLine],
    last_is_floor: bool,
) -> Result<String> {
    let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let (lo, hi) = xs.fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
    if !(lo.is_finite() && lo > 0.0 && hi > 0.0) {
        bail!("a chart on a log axis needs points above 0");
    }
    let y_max = finite_max(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)))
        .unwrap_or(1.0)
        .max(1e-3);
    let headroom = legend_headroom(lines.len(), HEIGHT - 110);
    let mut y_top = y_max * 1.05 / (1.0 - headroom);
    if last_is_floor {
        y_top = y_top.min(1.0);
    }
    svg_document(HEIGHT, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 22))
            .margin(14)
            .margin_right(30)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d((lo * 0.8..hi * 1.25).log_scale(), 0.0..y_top)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 13))
            .light_line_style(RGBColor(240, 240, 240))
            .x_label_formatter(&fmt_num)
            .y_label_formatter(&fmt_num)
            .draw()?;
        for (i, line) in lines.iter().enumerate() {
            let opt = last_is_floor && i + 1 == lines.len();
            let colour = if opt { BLACK_LINE } else { run_colour(i) };
            let style = colour.stroke_width(2);
            let points = line.points.iter().copied();
            if opt {
                chart
                    .draw_series(DashedLineSeries::new(points, 8, 5, style))?
                    .label(line.name.as_str())
                    .legend(legend_line(colour));
            } else {
                chart
                    .draw_series(LineSeries::new(points, style))?
                    .label(line.name.as_str())
                    .legend(legend_line(colour));
            }
            chart.draw_series(
                line.points
                    .iter()
                    .map(|&p| Circle::new(p, 3, colour.filled())),
            )?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        Ok(())
    })
}

/// The optimum's line in a miss-ratio chart.
const BLACK_LINE: RGBColor = RGBColor(30, 30, 30);

/// Per-second lines of each run on a log y axis (whole decades; values clamped to the
/// floor), for latencies whose runs differ by orders of magnitude.
fn log_time_series(
    runs: &[RunResult],
    title: &str,
    y_desc: &str,
    value: fn(&Second) -> f64,
) -> Result<String> {
    let lines: Vec<Vec<(f64, f64)>> = runs
        .iter()
        .map(|r| {
            r.series
                .iter()
                .map(|s| (f64::from(s.t), log_clamp(value(s))))
                .filter(|p| p.1.is_finite())
                .collect()
        })
        .collect();
    let ys = || lines.iter().flatten().map(|p| p.1);
    let lo = ys().reduce(f64::min).unwrap_or(1.0);
    let hi = finite_max(ys()).unwrap_or(lo).max(lo);
    // A decade above the data for the legend.
    let (y_lo, y_hi) = decade_range(lo, hi * 10.0);
    let x_end = time_axis_end(runs);
    svg_document(HEIGHT, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 22))
            .margin(14)
            .margin_right(30)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(0.0..x_end, (y_lo..y_hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("elapsed time (s)")
            .y_desc(y_desc)
            .axis_desc_style((FONT, 16))
            .label_style((FONT, 13))
            .light_line_style(RGBColor(240, 240, 240))
            .x_label_formatter(&fmt_num)
            .y_label_formatter(&fmt_num)
            .draw()?;
        run_lines(&mut chart, runs, &lines)?;
        if lines.iter().all(Vec::is_empty) {
            no_data_note(
                &mut chart,
                (x_end * 0.4, (y_lo * y_hi).sqrt()),
                "per-second data",
            )?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        Ok(())
    })
}

/// Points of the empirical CDF of `values` (non-finite values dropped): a staircase for
/// short inputs, evenly spaced ranks for long ones.
fn cdf_points(mut values: Vec<f64>) -> Vec<(f64, f64)> {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let nf = n as f64;
    if n <= MAX_LINE_POINTS / 2 {
        let mut out = Vec::with_capacity(2 * n);
        for (i, &v) in values.iter().enumerate() {
            out.push((v, i as f64 / nf));
            out.push((v, (i + 1) as f64 / nf));
        }
        return out;
    }
    let samples = MAX_LINE_POINTS / 2;
    let mut out = vec![(values[0], 0.0)];
    for k in 0..=samples {
        let rank = (k * (n - 1)) / samples;
        out.push((values[rank], (rank + 1) as f64 / nf));
    }
    out
}

/// Points of the CDF a latency histogram describes: (bucket upper bound, fraction of
/// transactions at or below it), starting from zero at the first bound. Buckets with a
/// non-finite bound count in the total but get no point.
fn histogram_cdf(histogram: &[(f64, u64)]) -> Vec<(f64, f64)> {
    let total: u64 = histogram.iter().map(|b| b.1).sum();
    if total == 0 {
        return Vec::new();
    }
    let mut buckets: Vec<(f64, u64)> = histogram.to_vec();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out = Vec::with_capacity(buckets.len() + 1);
    let mut cumulative = 0u64;
    for (bound, count) in buckets {
        cumulative += count;
        if !bound.is_finite() {
            continue;
        }
        let x = log_clamp(bound);
        if out.is_empty() {
            out.push((x, 0.0));
        }
        out.push((x, cumulative as f64 / total as f64));
    }
    out
}

/// Whole decades around [lo, hi] (both > 0), so a log axis has labelled ticks.
fn decade_range(lo: f64, hi: f64) -> (f64, f64) {
    let a = 10f64.powf(lo.log10().floor());
    let mut b = 10f64.powf(hi.log10().ceil());
    if b <= a {
        b = a * 10.0;
    }
    (a, b)
}

/// CDFs of several runs overlaid; `log_x` puts the x axis on a log scale.
fn cdf_chart(
    runs: &[RunResult],
    title: &str,
    x_desc: &str,
    y_desc: &str,
    curves: &[Vec<(f64, f64)>],
    log_x: bool,
) -> Result<String> {
    let xs = || curves.iter().flatten().map(|p| p.0);
    let lo = xs().filter(|v| v.is_finite()).reduce(f64::min);
    let hi = finite_max(xs());
    // Median x of all points, to put the legend where the curves are not.
    let mut all: Vec<f64> = xs().filter(|v| v.is_finite()).collect();
    all.sort_by(f64::total_cmp);
    let median = all.get(all.len() / 2).copied();
    svg_document(HEIGHT, |root| {
        if log_x {
            let lo = lo.unwrap_or(1.0).max(LOG_FLOOR_MS);
            let hi = hi.unwrap_or(lo).max(lo);
            let (a, b) = decade_range(lo, hi);
            let right = median.is_some_and(|m| (m / a).ln() / (b / a).ln() > 0.5);
            let x: LogCoord<f64> = (a..b).log_scale().into();
            draw_cdf(root, x, runs, title, x_desc, y_desc, curves, right)
        } else {
            let hi = hi.unwrap_or(1.0).max(0.0);
            let hi = if hi > 0.0 { hi * 1.05 } else { 1.0 };
            let lo = lo.unwrap_or(0.0).min(0.0);
            let right = median.is_some_and(|m| (m - lo) / (hi - lo) > 0.5);
            let x: RangedCoordf64 = (lo..hi).into();
            draw_cdf(root, x, runs, title, x_desc, y_desc, curves, right)
        }
    })
}

#[allow(clippy::too_many_arguments)]
fn draw_cdf<X>(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    x: X,
    runs: &[RunResult],
    title: &str,
    x_desc: &str,
    y_desc: &str,
    curves: &[Vec<(f64, f64)>],
    data_on_right: bool,
) -> Result<()>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let (x_lo, x_hi) = {
        let r = x.range();
        (r.start, r.end)
    };
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 22))
        .margin(14)
        .margin_right(30)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x, 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 13))
        .light_line_style(RGBColor(240, 240, 240))
        .x_label_formatter(&fmt_num)
        .y_label_formatter(&fmt_num)
        .draw()?;
    for (i, (run, curve)) in runs.iter().zip(curves).enumerate() {
        let colour = run_colour(i);
        if curve.len() == 1 {
            chart.draw_series(std::iter::once(Circle::new(curve[0], 4, colour.filled())))?;
        }
        chart
            .draw_series(LineSeries::new(curve.clone(), colour.stroke_width(2)))?
            .label(run.label.as_str())
            .legend(legend_line(colour));
    }
    if curves.iter().all(|c| c.is_empty()) {
        // Near the left quarter of the axis, whatever its scale.
        let at = if x_lo > 0.0 {
            x_lo * (x_hi / x_lo).powf(0.35)
        } else {
            x_lo + (x_hi - x_lo) * 0.35
        };
        no_data_note(&mut chart, (at, 0.5), "data")?;
    }
    chart
        .configure_series_labels()
        .position(if data_on_right {
            SeriesLabelPosition::UpperLeft
        } else {
            SeriesLabelPosition::LowerRight
        })
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(160, 160, 160))
        .draw()?;
    Ok(())
}

/// A writer of buffers: name, colour, and its count in a second.
type WriteSource = (&'static str, RGBColor, fn(&Second) -> u64);

/// Buffers written per second by backends, bgwriter and checkpointer: one panel per run
/// (three overlaid sources times several runs would not read at a glance), sharing the y
/// scale so panels compare.
fn buffer_writes(runs: &[RunResult]) -> Result<String> {
    let sources: [WriteSource; 3] = [
        ("backend", BACKEND_COLOUR, |s| s.written_backend),
        ("bgwriter", BGWRITER_COLOUR, |s| s.written_bgwriter),
        ("checkpointer", CHECKPOINTER_COLOUR, |s| {
            s.written_checkpointer
        }),
    ];
    let panel_height = if runs.len() == 1 {
        HEIGHT
    } else {
        PANEL_HEIGHT
    };
    let x_end = time_axis_end(runs);
    let data_max = runs
        .iter()
        .flat_map(|r| r.series.iter())
        .flat_map(|s| sources.iter().map(move |src| (src.2)(s)))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let headroom = legend_headroom(4, panel_height - 100);
    let y_top = data_max * 1.05 / (1.0 - headroom);
    let height = panel_height * runs.len() as u32;

    svg_document(height, |root| {
        let panels = root.split_evenly((runs.len(), 1));
        for (run, panel) in runs.iter().zip(&panels) {
            let title = format!("Buffer writes by source: {}", run.label);
            let mut chart = ChartBuilder::on(panel)
                .caption(title, (FONT, 20))
                .margin(12)
                .margin_right(30)
                .x_label_area_size(44)
                .y_label_area_size(72)
                .build_cartesian_2d(0.0..x_end, 0.0..y_top)?;
            chart
                .configure_mesh()
                .x_desc("elapsed time (s)")
                .y_desc("buffers written per second")
                .axis_desc_style((FONT, 15))
                .label_style((FONT, 13))
                .light_line_style(RGBColor(240, 240, 240))
                .max_light_lines(4)
                .x_label_formatter(&fmt_num)
                .y_label_formatter(&fmt_num)
                .draw()?;
            let spans = run
                .checkpoints
                .iter()
                .filter(|c| c.start_s.is_finite() && c.end_s.is_finite())
                .map(|c| {
                    let a = c.start_s.clamp(0.0, x_end);
                    let b = c.end_s.clamp(a, x_end);
                    Rectangle::new([(a, 0.0), (b, y_top)], CHECKPOINT_SHADE.mix(0.18).filled())
                })
                .collect::<Vec<_>>();
            if !spans.is_empty() {
                chart
                    .draw_series(spans)?
                    .label("checkpoint")
                    .legend(legend_box(CHECKPOINT_SHADE, 0.4));
            }
            for (name, colour, get) in sources {
                let line: Vec<(f64, f64)> = run
                    .series
                    .iter()
                    .map(|s| (f64::from(s.t), get(s) as f64))
                    .collect();
                if line.len() == 1 {
                    chart.draw_series(std::iter::once(Circle::new(line[0], 4, colour.filled())))?;
                }
                chart
                    .draw_series(LineSeries::new(decimate(line), colour.stroke_width(2)))?
                    .label(name)
                    .legend(legend_line(colour));
            }
            if run.series.is_empty() {
                no_data_note(&mut chart, (x_end * 0.4, y_top * 0.5), "per-second data")?;
            }
            legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_points_are_a_staircase_to_one() {
        let p = cdf_points(vec![3.0, f64::NAN, 1.0, 2.0]);
        assert_eq!(
            p,
            vec![
                (1.0, 0.0),
                (1.0, 1.0 / 3.0),
                (2.0, 1.0 / 3.0),
                (2.0, 2.0 / 3.0),
                (3.0, 2.0 / 3.0),
                (3.0, 1.0)
            ]
        );
        assert!(cdf_points(Vec::new()).is_empty());
        let long = cdf_points((0..100_000).map(f64::from).collect());
        assert!(long.len() <= MAX_LINE_POINTS + 2);
        assert_eq!(long.last(), Some(&(99_999.0, 1.0)));
        assert!(long
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
    }

    #[test]
    fn histogram_cdf_clamps_and_accumulates() {
        let p = histogram_cdf(&[(0.0, 1), (1.0, 2), (f64::INFINITY, 1)]);
        assert_eq!(
            p,
            vec![(LOG_FLOOR_MS, 0.0), (LOG_FLOOR_MS, 0.25), (1.0, 0.75)]
        );
        assert!(histogram_cdf(&[(1.0, 0)]).is_empty());
    }

    #[test]
    fn decimation_keeps_spikes_and_ends() {
        let mut pts: Vec<(f64, f64)> = (0..100_000).map(|t| (f64::from(t), 1.0)).collect();
        pts[51_234].1 = 1000.0;
        pts[70_000].1 = -5.0;
        let d = decimate(pts);
        assert!(d.len() <= MAX_LINE_POINTS + 1);
        assert!(d.contains(&(51_234.0, 1000.0)) && d.contains(&(70_000.0, -5.0)));
        assert_eq!(d.first(), Some(&(0.0, 1.0)));
        assert_eq!(d.last(), Some(&(99_999.0, 1.0)));
        assert!(d.windows(2).all(|w| w[0].0 <= w[1].0));
    }

    /// Proves: a run's resizes are drawn on the TPS chart, named in its legend and
    /// labelled with the size each went to; a run without them draws no such mark.
    #[test]
    fn resizes_are_marked_on_the_tps_chart() {
        let mut run = RunResult::example("a", 1);
        let plain = render_all(std::slice::from_ref(&run)).unwrap();
        assert!(!plain[0].svg.contains("pool resized"));
        run.resizes = vec![crate::report::model::PoolResizeRecord {
            at_s: 12.5,
            from_bytes: 128 << 20,
            to_bytes: 256 << 20,
            took_ms: 3.0,
            pages_written: 0,
            pages_evicted: 0,
            error: None,
        }];
        let charts = render_all(&[run]).unwrap();
        assert_eq!(charts[0].file_name, "tps.svg");
        let svg = &charts[0].svg;
        assert!(
            svg.contains("pool resized") && svg.contains("256MB"),
            "{svg}"
        );
    }

    #[test]
    fn time_axis_follows_the_series_then_the_duration() {
        let mut run = RunResult::example("a", 1);
        run.checkpoints[1].end_s = 1e9;
        assert_eq!(time_axis_end(std::slice::from_ref(&run)), 60.0);
        run.series.clear();
        run.duration_s = 30.0;
        assert_eq!(time_axis_end(std::slice::from_ref(&run)), 30.0);
        run.duration_s = f64::NAN;
        assert_eq!(time_axis_end(std::slice::from_ref(&run)), 1e9);
        run.checkpoints.clear();
        assert_eq!(time_axis_end(&[run]), 1.0);
    }

    #[test]
    fn log_axes_span_whole_decades() {
        assert_eq!(decade_range(0.01, 0.01), (0.01, 0.1));
        let (a, b) = decade_range(2.0, 300.0);
        assert!((a - 1.0).abs() < 1e-12 && (b - 1000.0).abs() < 1e-9);
        assert_eq!(fmt_num(&0.01), "0.01");
        assert_eq!(fmt_num(&1000.0), "1000");
        assert_eq!(fmt_num(&2.5), "2.5");
        assert_eq!(fmt_num(&0.0), "0");
    }
}
