//! The pool heatmap: for each run, one row per category of buffer (unused, each usage
//! count, dirty, loaded by each kind of ring, each relation) and one column per second (or
//! per few seconds on long runs), coloured by the share of the pool in that category. The
//! seeds' effects show as shapes: a scan without a ring turns the hot set's usage-5 row
//! pale while the table's row darkens; a checkpoint drains the dirty row; the bgwriter
//! keeps the low usage counts clean.

use anyhow::Result;
use plotters::prelude::*;

use super::model::{PoolSecond, RunResult};
use super::svg::{fmt_num, svg_document, FONT};

/// Columns at most per panel: longer runs average neighbouring seconds.
const MAX_COLUMNS: usize = 300;
/// Relations shown by name at most (the largest by peak share); the rest are summed.
const MAX_RELATIONS: usize = 8;
/// Height of one category row, pixels, and the panel's frame around the rows.
const ROW_PX: u32 = 18;
const FRAME_PX: u32 = 110;
/// The colour scale: an empty category to a whole pool (ColorBrewer's Blues ends).
const EMPTY: (f64, f64, f64) = (247.0, 251.0, 255.0);
const FULL: (f64, f64, f64) = (8.0, 48.0, 107.0);

/// Whether any run has pool samples (else the report leaves the chart out).
pub fn has_data(runs: &[RunResult]) -> bool {
    runs.iter()
        .any(|r| r.series.iter().any(|s| s.pool.is_some()))
}

/// The categories of one run, top to bottom: a name and its buffers in each sample.
fn categories(samples: &[&PoolSecond]) -> Vec<(String, Vec<u32>)> {
    let mut rows: Vec<(String, Vec<u32>)> = Vec::new();
    let mut row = |name: String, f: &dyn Fn(&PoolSecond) -> u32| {
        rows.push((name, samples.iter().map(|p| f(p)).collect()));
    };
    row("unused".into(), &|p| p.unused);
    for u in 0..6 {
        row(format!("usage {u}"), &|p| {
            p.usage.get(u).copied().unwrap_or(0)
        });
    }
    row("dirty".into(), &|p| p.dirty);
    for (i, kind) in ["bulkread", "bulkwrite", "vacuum"].into_iter().enumerate() {
        row(format!("ring {kind}"), &|p| {
            p.ring.get(i).copied().unwrap_or(0)
        });
    }
    let mut rels: Vec<(&String, u32)> = Vec::new();
    for p in samples {
        for (name, &n) in &p.relations {
            match rels.iter_mut().find(|(r, _)| *r == name) {
                Some(e) => e.1 = e.1.max(n),
                None => rels.push((name, n)),
            }
        }
    }
    rels.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let named: Vec<&String> = rels.iter().take(MAX_RELATIONS).map(|r| r.0).collect();
    for name in &named {
        row((*name).clone(), &|p| {
            p.relations.get(*name).copied().unwrap_or(0)
        });
    }
    if rels.len() > MAX_RELATIONS {
        row("other relations".into(), &|p| {
            p.relations
                .iter()
                .filter(|(n, _)| !named.contains(n))
                .map(|(_, v)| *v)
                .sum()
        });
    }
    rows
}

/// The colour of a share of the pool (0 to 1).
pub(super) fn colour(share: f64) -> RGBColor {
    let s = share.clamp(0.0, 1.0).sqrt(); // small shares stay visible
    let mix = |a: f64, b: f64| (a + (b - a) * s).round() as u8;
    RGBColor(
        mix(EMPTY.0, FULL.0),
        mix(EMPTY.1, FULL.1),
        mix(EMPTY.2, FULL.2),
    )
}

/// Averages `values` over `columns` equal groups of samples: (first second, share).
fn columns(values: &[u32], nbuffers: &[u32], columns: usize) -> Vec<f64> {
    let n = values.len();
    let per = n.div_ceil(columns.max(1)).max(1);
    (0..n)
        .step_by(per)
        .map(|start| {
            let end = (start + per).min(n);
            let share: f64 = (start..end)
                .map(|i| f64::from(values[i]) / f64::from(nbuffers[i].max(1)))
                .sum();
            share / (end - start) as f64
        })
        .collect()
}

/// The heatmap SVG: one panel per run with pool samples.
pub fn pool_heatmap(runs: &[RunResult]) -> Result<String> {
    let panels: Vec<(&RunResult, Vec<(u32, &PoolSecond)>)> = runs
        .iter()
        .map(|r| {
            let s = r
                .series
                .iter()
                .filter_map(|s| s.pool.as_ref().map(|p| (s.t, p)))
                .collect();
            (r, s)
        })
        .collect();
    let heights: Vec<u32> = panels
        .iter()
        .map(|(_, s)| {
            let rows = if s.is_empty() {
                1
            } else {
                categories(&s.iter().map(|x| x.1).collect::<Vec<_>>()).len() as u32
            };
            FRAME_PX + ROW_PX * rows
        })
        .collect();
    let total: u32 = heights.iter().sum();
    svg_document(total, |root| {
        let mut rest = root.clone();
        for ((run, samples), h) in panels.iter().zip(&heights) {
            let (panel, below) = rest.split_vertically(*h);
            rest = below;
            draw_panel(&panel, run, samples)?;
        }
        Ok(())
    })
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn draw_panel(panel: &Area<'_>, run: &RunResult, samples: &[(u32, &PoolSecond)]) -> Result<()> {
    let title = format!(
        "Pool by second: {} (share of the buffers: white none, darkest all; square-root scale)",
        run.label
    );
    if samples.is_empty() {
        let (w, h) = panel.dim_in_pixel();
        panel.draw(&Text::new(
            format!("{title}: no pool samples in this run"),
            (20, (h / 2) as i32),
            (FONT, 15).into_font(),
        ))?;
        let _ = w;
        return Ok(());
    }
    let pools: Vec<&PoolSecond> = samples.iter().map(|x| x.1).collect();
    let rows = categories(&pools);
    let nbuffers: Vec<u32> = pools.iter().map(|p| p.nbuffers).collect();
    let x_end = f64::from(samples.last().map_or(1, |s| s.0 + 1));
    let ncols = samples.len().min(MAX_COLUMNS);
    let per = samples.len().div_ceil(ncols).max(1);
    let nrows = rows.len();
    let names: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    let mut chart = ChartBuilder::on(panel)
        .caption(title, (FONT, 18))
        .margin(10)
        .margin_right(30)
        .x_label_area_size(40)
        .y_label_area_size(170)
        .build_cartesian_2d(0.0..x_end, 0.0..nrows as f64)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("elapsed time (s)")
        .axis_desc_style((FONT, 14))
        .label_style((FONT, 12))
        .x_label_formatter(&fmt_num)
        .y_labels(nrows * 2 + 1)
        .y_label_formatter(&|y: &f64| {
            // Labels at row centres only: row k (from the top) spans [n-k-1, n-k).
            let k = nrows as f64 - y - 0.5;
            if (k - k.round()).abs() < 1e-6 && k >= 0.0 && (k.round() as usize) < nrows {
                names[k.round() as usize].clone()
            } else {
                String::new()
            }
        })
        .draw()?;
    let mut cells = Vec::with_capacity(nrows * ncols);
    for (k, (_, values)) in rows.iter().enumerate() {
        let y0 = (nrows - k - 1) as f64;
        for (c, share) in columns(values, &nbuffers, ncols).into_iter().enumerate() {
            let x0 = f64::from(samples[c * per].0);
            let x1 = samples.get((c + 1) * per).map_or(x_end, |s| f64::from(s.0));
            cells.push(Rectangle::new(
                [(x0, y0), (x1, y0 + 1.0)],
                colour(share).filled(),
            ));
        }
    }
    chart.draw_series(cells)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_cover_the_pool_and_name_the_largest_relations() {
        let mut p = PoolSecond::example(35, false);
        for i in 0..10 {
            p.relations.insert(format!("r{i}"), i);
        }
        let rows = categories(&[&p]);
        let value = |n: &str| rows.iter().find(|r| r.0 == n).map(|r| r.1[0]);
        let usage: u32 = (0..6).map(|u| value(&format!("usage {u}")).unwrap()).sum();
        assert_eq!(usage + value("unused").unwrap(), p.nbuffers);
        assert_eq!(value("ring bulkread"), Some(120));
        assert_eq!(
            value("pgbench_accounts"),
            Some(p.relations["pgbench_accounts"])
        );
        // 13 relations: the 8 largest by name, the other 5 summed.
        let named = rows
            .iter()
            .filter(|r| p.relations.contains_key(&r.0))
            .count();
        assert_eq!(named, MAX_RELATIONS);
        assert_eq!(value("other relations"), Some(1 + 2 + 3 + 4));
    }

    #[test]
    fn long_runs_are_averaged_into_few_columns() {
        let v: Vec<u32> = (0..1000).map(|i| if i < 500 { 0 } else { 10 }).collect();
        let c = columns(&v, &vec![10; 1000], 4);
        assert_eq!(c, vec![0.0, 0.0, 1.0, 1.0]);
        assert_eq!(columns(&[5], &[10], 300), vec![0.5]);
        assert_eq!(colour(0.0), RGBColor(247, 251, 255));
        assert_eq!(colour(1.0), RGBColor(8, 48, 107));
    }
}
