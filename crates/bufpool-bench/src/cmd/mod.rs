//! The commands over a data directory and the runs made on it, one module each:
//! `config`, `init`, `bench` (a folder: flags, scripts, the run, the summary), `check`,
//! `checkpoint`, `scan` and `vacuum` (`maintenance.rs`), `report` and the main job
//! (`cargo run --release` with no arguments). Each owns its flags and what it prints; the
//! work itself is the TPC-B workload's (`tpcb/`), the report's (`report/`) and the
//! engine's.
//!
//! Owns what they share: the data directory's flags ([`DirArgs`]: `-D`, `--set`) and
//! opening its engine ([`open_engine`]: recovery's progress on stderr). Nothing below the
//! commands imports them, but the experiments, which run `init` and TPC-B runs as the
//! commands do.

pub mod bench;
pub mod check;
pub mod checkpoint;
pub mod config;
pub mod init;
pub mod main_job;
pub mod maintenance;
pub mod report;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use bufpool::{Config, Engine, RealVfs};

#[derive(Debug, clap::Args)]
pub struct DirArgs {
    /// Data directory.
    #[arg(short = 'D', long = "pgdata", default_value = "bufpool-data")]
    pub dir: PathBuf,
    /// Overrides a knob for this run (repeatable), e.g. --set shared_buffers=64MB.
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = crate::knobs::parse_set)]
    pub sets: Vec<(String, String)>,
}

/// Opens the engine of data directory `dir` with `c` (making it with `create`), printing
/// recovery's progress on stderr.
pub(crate) fn open_engine(dir: &Path, c: &Config, create: bool) -> Result<Engine> {
    Engine::open_with_progress(Arc::new(RealVfs::new()), dir, c, create, &mut |p| {
        eprintln!("recovery: {p:?}")
    })
    .with_context(|| format!("opening {}", dir.display()))
}
