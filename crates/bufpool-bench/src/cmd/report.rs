//! `bufpool report RUN.json...`: saved runs (`bench --out`) into a report directory
//! (index.html and its charts; the drawing is `report/`'s).

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::report;

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Run files written by `bench --out`.
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// Output directory.
    #[arg(short = 'o', long = "output", default_value = "bufpool-report")]
    pub out: PathBuf,
}

/// `bufpool report RUN.json...`.
pub fn report_cmd(runs: &[PathBuf], out: &Path) -> Result<()> {
    let loaded: Vec<_> = runs
        .iter()
        .map(|p| report::load_run(p))
        .collect::<Result<_>>()?;
    let files = report::write_report(&loaded, out)?;
    println!("report: {}", files.index.display());
    Ok(())
}
