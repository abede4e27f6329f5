//! `bufpool report`: turns run results (JSON) into a directory holding index.html and its
//! chart images (SVG), readable offline from disk.
//!
//! - `model`: the run result the benchmark writes (the JSON contract);
//! - `charts`: the charts of pgsql-hackers seed 004 (per-second TPS and latency, CDFs);
//! - `html`: the page: each run's headline figures first, then the per-second charts, the
//!   summary table, the other charts, pg_stat_io and the knobs of each run.

pub mod charts;
mod heatmap;
pub mod html;
pub mod model;
mod svg;

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

pub use model::RunResult;

/// The files a report consists of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportFiles {
    pub index: PathBuf,
    pub charts: Vec<PathBuf>,
}

/// Reads one run result (JSON). Errors name the file.
pub fn load_run(path: &Path) -> Result<RunResult> {
    let text = fs::read_to_string(path)
        .with_context(|| format!("cannot read run result {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a valid run result", path.display()))
}

/// Writes index.html and the charts of `runs` into `out_dir` (created if needed; files of
/// an earlier report there are overwritten). Runs are overlaid in the given order.
pub fn write_report(runs: &[RunResult], out_dir: &Path) -> Result<ReportFiles> {
    if runs.is_empty() {
        bail!("no runs to report: give at least one run result");
    }
    let charts = charts::render_all(runs).context("drawing the report's charts")?;
    fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create report directory {}", out_dir.display()))?;
    let mut chart_paths = Vec::with_capacity(charts.len());
    for chart in &charts {
        let path = out_dir.join(chart.file_name);
        fs::write(&path, &chart.svg)
            .with_context(|| format!("cannot write chart {}", path.display()))?;
        chart_paths.push(path);
    }
    let index = out_dir.join("index.html");
    fs::write(&index, html::render_index(runs, &charts))
        .with_context(|| format!("cannot write {}", index.display()))?;
    Ok(ReportFiles {
        index,
        charts: chart_paths,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::charts::{run_colour, BACKEND_COLOUR, BGWRITER_COLOUR, CHECKPOINTER_COLOUR};
    use super::model::{CheckpointSpan, Second};
    use super::*;

    /// The `src` attribute values of every `<img>` in the page.
    fn img_sources(html: &str) -> Vec<String> {
        html.split("<img")
            .skip(1)
            .map(|tag| {
                let tag = &tag[..tag.find('>').expect("unterminated <img")];
                let start = tag.find("src=\"").expect("img without src") + 5;
                let len = tag[start..].find('"').expect("unterminated src");
                tag[start..start + len].to_string()
            })
            .collect()
    }

    /// Rasterizes an SVG document; returns its RGBA pixels.
    fn rasterize(svg: &str) -> Vec<[u8; 4]> {
        let tree = resvg::usvg::Tree::from_str(svg, &resvg::usvg::Options::default())
            .expect("chart is valid SVG");
        let size = tree.size().to_int_size();
        let mut pixmap =
            resvg::tiny_skia::Pixmap::new(size.width(), size.height()).expect("non-empty image");
        resvg::render(
            &tree,
            resvg::tiny_skia::Transform::default(),
            &mut pixmap.as_mut(),
        );
        pixmap
            .pixels()
            .iter()
            .map(|p| {
                let c = p.demultiply();
                [c.red(), c.green(), c.blue(), c.alpha()]
            })
            .collect()
    }

    /// Proves: every chart of the page is a figure with its caption.
    #[test]
    fn every_chart_keeps_its_caption() {
        let runs = [RunResult::example("a", 1), RunResult::example("b", 2)];
        let charts = charts::render_all(&runs).unwrap();
        let html = html::render_index(&runs, &charts);
        assert_eq!(html.matches("<img").count(), charts.len());
        assert_eq!(html.matches("<figcaption>").count(), charts.len());
        for c in &charts {
            assert!(
                !c.caption.trim().is_empty(),
                "{} has no caption",
                c.file_name
            );
            assert!(html.contains(&html::escape(c.caption)), "{}", c.file_name);
        }
    }

    /// Proves: the max-latency chart keeps a run readable beside one whose spikes are 1,000
    /// times higher: its y axis is logarithmic, in whole decades spanning both.
    #[test]
    fn max_latency_is_charted_on_a_log_axis() {
        let mut fast = RunResult::example("fast", 1);
        let mut slow = RunResult::example("slow", 2);
        for s in &mut fast.series {
            s.lat_max_ms = 2.0;
        }
        for s in &mut slow.series {
            s.lat_max_ms = 2_000.0;
        }
        let charts = charts::render_all(&[fast, slow]).unwrap();
        let svg = &charts
            .iter()
            .find(|c| c.file_name == "max-latency.svg")
            .unwrap()
            .svg;
        let texts: Vec<&str> = svg
            .split("</text>")
            .filter_map(|t| t.rsplit('>').next().map(str::trim))
            .collect();
        for tick in ["1", "10", "100", "1000", "10000"] {
            assert!(texts.contains(&tick), "no tick {tick} in {texts:?}");
        }
        assert!(!rasterize(svg).is_empty(), "the chart is valid SVG");
    }

    /// Proves: a run's start reads as a date with its time zone, older results' "unix N"
    /// included, in the page.
    #[test]
    fn start_times_are_rfc3339_in_utc() {
        use super::model::{rfc3339_utc, started_at_shown};
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(1_795_765_817), "2026-11-27T07:50:17Z");
        assert_eq!(started_at_shown("unix 86400"), "1970-01-02T00:00:00Z");
        assert_eq!(started_at_shown("yesterday"), "yesterday");
        let mut run = RunResult::example("old", 1);
        run.started_at = "unix 1795765817".into();
        let html = html::render_index(std::slice::from_ref(&run), &[]);
        assert!(html.contains("2026-11-27T07:50:17Z"), "no date in the page");
        assert!(!html.contains("unix 1795765817"));
    }

    fn distinct_colours(pixels: &[[u8; 4]]) -> usize {
        pixels.iter().collect::<HashSet<_>>().len()
    }

    /// Pixels mostly of this colour: on the white background, an anti-aliased or
    /// translucent pixel is `a * c + (1 - a) * white`; count those with `a >= 0.5` (the same
    /// `a` in every channel, within rounding).
    fn pixels_of(pixels: &[[u8; 4]], c: plotters::style::RGBColor) -> usize {
        let target = [c.0, c.1, c.2];
        pixels
            .iter()
            .filter(|p| {
                let mut coverage = None::<f64>;
                for ch in 0..3 {
                    let (p, t) = (f64::from(p[ch]), f64::from(target[ch]));
                    if t >= 250.0 {
                        if (p - t).abs() > 6.0 {
                            return false;
                        }
                        continue;
                    }
                    let a = (255.0 - p) / (255.0 - t);
                    match coverage {
                        None => coverage = Some(a),
                        Some(b) if (a - b).abs() * (255.0 - t) <= 6.0 => {}
                        Some(_) => return false,
                    }
                }
                p[3] == 255 && coverage.is_some_and(|a| (0.5..=1.05).contains(&a))
            })
            .count()
    }

    /// Asserts an image drew something: several colours, and each expected colour on a
    /// good number of pixels (more than its legend swatch alone covers).
    fn assert_drawn(name: &str, svg: &str, expected: &[plotters::style::RGBColor]) {
        let pixels = rasterize(svg);
        let n = distinct_colours(&pixels);
        assert!(n >= 3, "{name}: only {n} distinct colours");
        for c in expected {
            let count = pixels_of(&pixels, *c);
            assert!(count > 150, "{name}: colour {c:?} on only {count} pixels");
        }
    }

    fn expected_colours(file_name: &str, runs: usize) -> Vec<plotters::style::RGBColor> {
        if file_name == "buffer-writes.svg" {
            vec![BACKEND_COLOUR, BGWRITER_COLOUR, CHECKPOINTER_COLOUR]
        } else if file_name == "pool-heatmap.svg" {
            // An empty category, and the accounts' 70% of a full example pool.
            vec![heatmap::colour(0.0), heatmap::colour(0.7)]
        } else {
            (0..runs).map(run_colour).collect()
        }
    }

    fn check_report(runs: &[RunResult]) {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("bufpool-report");
        let files = write_report(runs, &out).unwrap();
        assert_eq!(files.index, out.join("index.html"));
        let html = fs::read_to_string(&files.index).unwrap();
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<link rel=\"icon\" href=\"data:,\">"));
        for forbidden in ["<script", "http://", "https://", "@import", "url("] {
            assert!(
                !html.contains(forbidden),
                "page is not self-contained: {forbidden}"
            );
        }
        for r in runs {
            assert!(
                html.contains(&html::escape(&r.label)),
                "label {} missing",
                r.label
            );
        }
        let sources = img_sources(&html);
        let n = 7 + usize::from(heatmap::has_data(runs));
        assert_eq!(files.charts.len(), n);
        assert_eq!(sources.len(), files.charts.len());
        for path in &files.charts {
            let name = path.file_name().unwrap().to_str().unwrap();
            assert!(path.is_file(), "{name} not written");
            assert!(sources.iter().any(|s| s == name), "{name} not referenced");
            let svg = fs::read_to_string(path).unwrap();
            assert_drawn(name, &svg, &expected_colours(name, runs.len()));
        }
        for s in &sources {
            assert!(out.join(s).is_file(), "index.html refers to missing {s}");
        }
        assert!(html.matches("<figcaption>").count() == n && html.matches(" alt=\"").count() == n);
    }

    /// How many `<table`s of `html` sit in no box of class "scroll" (`<div>`s counted open
    /// and closed).
    fn tables_outside_a_scroll_box(html: &str) -> usize {
        let mut open: Vec<bool> = Vec::new();
        let mut outside = 0;
        let mut rest = html;
        while let Some(i) = rest.find('<') {
            rest = &rest[i..];
            if rest.starts_with("<div") {
                let tag = &rest[..rest.find('>').expect("unterminated <div")];
                open.push(tag.contains("class=\"scroll\""));
            } else if rest.starts_with("</div>") {
                open.pop().expect("a </div> without its <div>");
            } else if rest.starts_with("<table") && !open.contains(&true) {
                outside += 1;
            }
            rest = &rest[1..];
        }
        outside
    }

    /// Saved runs as `bench --out` writes them (with their provenance and pg_stat_io rows),
    /// read back.
    fn saved_runs(dir: &Path) -> Vec<RunResult> {
        let io = |backend_type: &str, object: &str, context: &str, n: u64| model::StatIo {
            backend_type: backend_type.into(),
            object: object.into(),
            context: context.into(),
            reads: 17 * n,
            read_bytes: 17 * 8192 * n,
            writes: 5 * n,
            write_bytes: 5 * 8192 * n,
            extends: n,
            extend_bytes: 8192 * n,
            hits: 1000 * n,
            evictions: 3 * n,
            fsyncs: n,
            fsync_time_ms: 0.5 * n as f64,
            ..Default::default()
        };
        ["c4 sync", "c4 async"]
            .iter()
            .enumerate()
            .map(|(i, label)| {
                let mut run = RunResult::example(label, i as u64 + 1);
                run.provenance = crate::provenance::Provenance {
                    version: "0.1.0".into(),
                    commit: format!("0123456789a{i}"),
                    cores: 2,
                    cpu: "AMD EPYC 7B13".into(),
                    kernel: "6.1.0-28-cloud-amd64".into(),
                };
                run.stat_io = vec![
                    io("client backend", "relation", "normal", 40_000),
                    io("autovacuum worker", "relation", "vacuum", 900),
                    io("checkpointer", "relation", "normal", 12_000),
                    io("walwriter", "wal", "normal", 3_000),
                ];
                let path = dir.join(format!("run{i}.json"));
                fs::write(&path, serde_json::to_string_pretty(&run).unwrap()).unwrap();
                load_run(&path).unwrap()
            })
            .collect()
    }

    /// Proves: the page opens with what a reader looks at first (each run's headline
    /// figures and where it comes from, then the per-second TPS and maximum-latency
    /// charts), the long tables come after them, and every table sits in a box that
    /// scrolls sideways by itself, so the page never does.
    #[test]
    fn the_first_screen_is_headline_figures_then_charts_and_every_table_scrolls() {
        let dir = tempfile::tempdir().unwrap();
        let runs = saved_runs(dir.path());
        let files = write_report(&runs, &dir.path().join("report")).unwrap();
        let html = fs::read_to_string(&files.index).unwrap();
        let at = |needle: &str| html.find(needle).unwrap_or_else(|| panic!("no {needle}"));
        let (headline, first_table) = (at("<section id=\"headline\""), at("<table"));
        let (tps, max) = (
            at("<img src=\"tps.svg\""),
            at("<img src=\"max-latency.svg\""),
        );
        assert!(
            headline < tps && tps < max && max < first_table,
            "headline {headline}, TPS chart {tps}, max-latency chart {max}, first table \
             {first_table}"
        );
        let block = &html[headline..headline + html[headline..].find("</section>").unwrap()];
        for r in &runs {
            let l = &r.latency_ms;
            for figure in [
                html::escape(&r.label),
                format!("<b>{:.1}</b> TPS", r.tps),
                format!("<b>{:.3}</b> ms average", l.avg),
                format!("<b>{:.3}</b> ms p99", l.p99),
                format!("<b>{:.3}</b> ms max", l.max),
                format!("bufpool 0.1.0, commit {}", r.provenance.commit),
                "2 cores, AMD EPYC 7B13, kernel 6.1.0-28-cloud-amd64".into(),
            ] {
                assert!(
                    block.contains(&figure),
                    "the headline lacks {figure}: {block}"
                );
            }
        }
        // Every table scrolls in its box: the summary, pg_stat_io (split in two per run)
        // and the knobs.
        assert!(html.contains(".scroll{overflow-x:auto"));
        assert_eq!(html.matches("<table").count(), 1 + 2 * runs.len() + 1);
        assert_eq!(tables_outside_a_scroll_box(&html), 0);
        assert_eq!(tables_outside_a_scroll_box("<div><table></table></div>"), 1);
        // Nothing was dropped on the way: each pg_stat_io row's counters, every chart.
        for counter in [
            "<td>680,000</td>",
            "<td>200,000</td>",
            "<td>40,000,000</td>",
        ] {
            assert!(html.contains(counter), "no {counter}");
        }
        assert_eq!(html.matches("<img").count(), files.charts.len());
    }

    #[test]
    fn report_of_one_run() {
        check_report(&[RunResult::example("c4 sync", 1)]);
    }

    /// Runs without pool samples (PostgreSQL's, SQLite's, or saved before the samples
    /// existed) leave the heatmap out; beside one that has them, they get a note.
    #[test]
    fn the_heatmap_needs_pool_samples() {
        let mut bare = RunResult::example("postgres", 2);
        for s in &mut bare.series {
            s.pool = None;
        }
        check_report(std::slice::from_ref(&bare));
        let with = RunResult::example("bufpool", 1);
        let svg = heatmap::pool_heatmap(&[with, bare]).unwrap();
        assert!(svg.contains("no pool samples in this run"), "{svg}");
        assert!(svg.contains("pgbench_accounts") && svg.contains("usage 5"));
    }

    #[test]
    fn report_of_three_runs_overlays_them() {
        let runs = [
            RunResult::example("c4 sync", 1),
            RunResult::example("c4 async", 2),
            RunResult::example("c8 <sync> & co", 3),
        ];
        check_report(&runs);
        let dir = tempfile::tempdir().unwrap();
        write_report(&runs, dir.path()).unwrap();
        let html = fs::read_to_string(dir.path().join("index.html")).unwrap();
        assert!(html.contains("c8 &lt;sync&gt; &amp; co"));
        // One summary column per run, and the legend of an overlaid chart names each run.
        assert!(html.contains("<td>tpcb-like</td><td>tpcb-like</td><td>tpcb-like</td>"));
        let tps = fs::read_to_string(dir.path().join("tps-cdf.svg")).unwrap();
        for r in &runs {
            assert!(
                tps.contains(&html::escape(&r.label)),
                "legend lacks {}",
                r.label
            );
        }
    }

    #[test]
    fn the_blank_check_rejects_a_background_only_image() {
        let blank = r##"<svg width="200" height="100" viewBox="0 0 200 100" xmlns="http://www.w3.org/2000/svg"><rect x="0" y="0" width="200" height="100" fill="#FFFFFF"/></svg>"##;
        let result = std::panic::catch_unwind(|| assert_drawn("blank", blank, &[]));
        assert!(result.is_err(), "a background-only SVG passed the check");
        let line = r##"<svg width="200" height="100" viewBox="0 0 200 100" xmlns="http://www.w3.org/2000/svg"><rect x="0" y="0" width="200" height="100" fill="#FFFFFF"/><rect x="10" y="10" width="50" height="50" fill="#000000"/></svg>"##;
        let result = std::panic::catch_unwind(|| assert_drawn("square", line, &[run_colour(0)]));
        assert!(result.is_err(), "a missing run colour passed the check");
    }

    #[test]
    fn rewriting_a_report_overwrites_it() {
        let dir = tempfile::tempdir().unwrap();
        write_report(&[RunResult::example("old-run", 1)], dir.path()).unwrap();
        let files = write_report(&[RunResult::example("new-run", 2)], dir.path()).unwrap();
        let html = fs::read_to_string(&files.index).unwrap();
        assert!(html.contains("new-run") && !html.contains("old-run"));
        let svg = fs::read_to_string(dir.path().join("tps.svg")).unwrap();
        assert!(svg.contains("new-run") && !svg.contains("old-run"));
    }

    #[test]
    fn load_run_round_trips_json() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunResult::example("round trip", 7);
        let path = dir.path().join("run.json");
        fs::write(&path, serde_json::to_string_pretty(&run).unwrap()).unwrap();
        assert_eq!(load_run(&path).unwrap(), run);
    }

    #[test]
    fn load_run_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing-run.json");
        let err = format!("{:#}", load_run(&missing).unwrap_err());
        assert!(err.contains("missing-run.json"), "{err}");

        let bad = dir.path().join("bad-run.json");
        fs::write(&bad, "{\"label\": \"x\", \"tps\": ").unwrap();
        let err = load_run(&bad).unwrap_err();
        assert!(err.to_string().contains("bad-run.json"), "{err:#}");

        let mut value = serde_json::to_value(RunResult::example("x", 1)).unwrap();
        value.as_object_mut().unwrap().remove("series");
        let incomplete = dir.path().join("incomplete-run.json");
        fs::write(&incomplete, value.to_string()).unwrap();
        let err = format!("{:#}", load_run(&incomplete).unwrap_err());
        assert!(
            err.contains("incomplete-run.json") && err.contains("series"),
            "{err}"
        );
    }

    #[test]
    fn zero_runs_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_report(&[], &dir.path().join("r")).unwrap_err();
        assert!(err.to_string().contains("no runs"), "{err:#}");
        assert!(!dir.path().join("r").exists());
    }

    fn second(t: u32) -> Second {
        Second {
            t,
            transactions: 0,
            tps: 0.0,
            lat_avg_ms: 0.0,
            lat_max_ms: 0.0,
            lat_stddev_ms: 0.0,
            lag_max_ms: 0.0,
            exec_max_ms: 0.0,
            written_backend: 0,
            written_bgwriter: 0,
            written_checkpointer: 0,
            target_tps: None,
            batch_rows: 0,
            rss_bytes: None,
            pool: None,
        }
    }

    #[test]
    fn edge_cases_render() {
        let dir = tempfile::tempdir().unwrap();
        let mut empty = RunResult::example("no seconds", 1);
        empty.series.clear();
        empty.checkpoints.clear();
        empty.latency_histogram.clear();
        empty.config.clear();

        let mut one = RunResult::example("one second", 2);
        one.series.truncate(1);
        one.checkpoints.clear();

        let mut zeros = RunResult::example("all zero", 3);
        zeros.series = (0..5).map(second).collect();
        zeros.latency_histogram = vec![(0.0, 10), (0.0, 5)];
        zeros.checkpoints = vec![CheckpointSpan {
            start_s: 2.0,
            end_s: 1e9,
            buffers_written: 0,
            ..Default::default()
        }];
        zeros.tps = 0.0;

        let mut odd = RunResult::example("non-finite", 4);
        odd.series[3].tps = f64::NAN;
        odd.series[4].lat_max_ms = f64::INFINITY;
        odd.series[5].lat_stddev_ms = -1.0;
        odd.latency_histogram.push((f64::INFINITY, 3));
        odd.tps = f64::NAN;

        let cases: Vec<Vec<RunResult>> = vec![
            vec![empty.clone()],
            vec![one.clone()],
            vec![zeros.clone()],
            vec![odd.clone()],
            vec![empty, one, zeros, odd],
        ];
        for (i, runs) in cases.iter().enumerate() {
            let out = dir.path().join(format!("case{i}"));
            let files = write_report(runs, &out).unwrap();
            assert!(files.index.is_file());
            for c in &files.charts {
                // Still valid SVG with axes and text, even with nothing to plot.
                let svg = fs::read_to_string(c).unwrap();
                assert!(distinct_colours(&rasterize(&svg)) >= 2, "{}", c.display());
            }
        }
    }

    #[test]
    fn a_long_run_makes_small_charts() {
        let mut run = RunResult::example("day", 1);
        let proto = run.series.clone();
        run.series = (0..86_400u32)
            .map(|t| Second {
                t,
                ..proto[(t % 60) as usize].clone()
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let files = write_report(&[run], dir.path()).unwrap();
        for c in &files.charts {
            let len = fs::metadata(c).unwrap().len();
            assert!(len < 1_000_000, "{} is {len} bytes", c.display());
        }
    }

    /// Writes a demonstration report for looking at or for
    /// scripts/check-report-in-chromium.sh: into $BUFPOOL_REPORT_DIR, or the temp directory's
    /// bufpool-report-demo; with $BUFPOOL_REPORT_RUNS_DIR, also the runs as JSON there.
    #[test]
    #[ignore = "writes a report to look at; run by hand"]
    fn write_demo_report() {
        let out = std::env::var_os("BUFPOOL_REPORT_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("bufpool-report-demo"));
        let runs = [
            RunResult::example("c4 sync", 1),
            RunResult::example("c4 async", 2),
            RunResult::example("c8 sync", 3),
        ];
        let files = write_report(&runs, &out).unwrap();
        println!("report written: {}", files.index.display());
        // The same runs as JSON, to try `bufpool report` itself on them.
        if let Some(dir) = std::env::var_os("BUFPOOL_REPORT_RUNS_DIR").map(PathBuf::from) {
            fs::create_dir_all(&dir).unwrap();
            for (i, run) in runs.iter().enumerate() {
                let path = dir.join(format!("run{}.json", i + 1));
                fs::write(&path, serde_json::to_string_pretty(run).unwrap()).unwrap();
                println!("run written: {}", path.display());
            }
        }
    }
}
