//! `bufpool checkpoint`: an immediate checkpoint of a data directory (recovering it first
//! when it was not shut down cleanly), its log line printed.

use std::path::Path;

use anyhow::{Context, Result};
use bufpool::RealVfs;

use super::open_engine;
use crate::knobs::load_config;
use crate::tpcb;

/// `bufpool checkpoint`: opens the directory (recovering it if needed), takes an
/// immediate checkpoint, prints its log line and shuts down cleanly.
pub fn checkpoint(dir: &Path, sets: &[(String, String)]) -> Result<()> {
    let (c, _) = load_config(dir, sets)?;
    tpcb::require_initialized(&RealVfs::new(), dir)?;
    let engine = open_engine(dir, &c, false)?;
    engine
        .checkpoint()
        .with_context(|| format!("checkpoint of {}", dir.display()))?;
    if let Some(s) = engine.checkpoint_history().last() {
        println!("{s}");
    }
    engine
        .shutdown()
        .with_context(|| format!("shutting down {}", dir.display()))?;
    Ok(())
}
