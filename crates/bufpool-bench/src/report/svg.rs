//! What every chart of the report draws with: the SVG document (a white page, the charts'
//! common width), the font and the axis labels' numbers. A leaf under `charts.rs` and
//! `heatmap.rs`.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Width of every chart, pixels.
pub(super) const WIDTH: u32 = 960;
/// The charts' font family.
pub(super) const FONT: &str = "sans-serif";

/// Renders into an SVG string on a white background.
pub(super) fn svg_document(
    height: u32,
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<()>,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root)?;
        root.present()?;
    }
    Ok(svg)
}

/// A number for an axis label: no trailing zeros, few decimals.
pub(super) fn fmt_num(v: &f64) -> String {
    let v = *v;
    let a = v.abs();
    let s = if a == 0.0 || a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}
