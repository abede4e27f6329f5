//! The main job (`cargo run --release` with no arguments): a scale-10 TPC-B database in
//! ./bufpool-data (made when absent), 4 clients for 60 s (`BUFPOOL_MAIN_SECONDS`) with a
//! 64 MiB pool and 30 s checkpoints, the report in ./bufpool-report, the consistency
//! check, and pgbench's summary with where everything is.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use bufpool::RealVfs;

use super::bench::args::BenchArgs;
use super::bench::run::run_bench;
use super::bench::summary::print_summary;
use crate::ctrl_c::install_ctrl_c;
use crate::report;
use crate::tpcb;

/// The main job: init scale 10 in ./bufpool-data if absent, bench 4 clients for 60 s
/// with a 64 MiB pool, write the report, run the check, print where everything is.
pub fn main_job(seconds: u64) -> Result<()> {
    let dir = PathBuf::from("bufpool-data");
    // A 64 MiB pool under a ~150 MiB database, and checkpoints every 30 s (PostgreSQL's
    // minimum) so that a one-minute run shows them.
    let sets = vec![
        ("shared_buffers".to_string(), "64MB".to_string()),
        ("checkpoint_timeout".to_string(), "30s".to_string()),
    ];
    let vfs = RealVfs::new();
    if !(dir.join("bufpool.meta").exists() && tpcb::is_initialized(&vfs, &dir)?) {
        eprintln!(
            "main job: initializing a scale-10 TPC-B database in {}",
            dir.display()
        );
        crate::cmd::init::init(&dir, 10, 100, &[], None, &sets)?;
    } else {
        eprintln!("main job: using the database in {}", dir.display());
    }
    let args = BenchArgs {
        progress: Some(5),
        ..BenchArgs::tpcb(&dir, 4, seconds, sets.clone())
    };
    eprintln!(
        "main job: pgbench -c 4 -T {seconds} (Ctrl-C stops early and keeps what was measured)"
    );
    let stop = install_ctrl_c();
    let o = run_bench(&args, stop)?;
    let out_dir = PathBuf::from("bufpool-report");
    std::fs::create_dir_all(&out_dir)?;
    let run_path = out_dir.join("run.json");
    std::fs::write(&run_path, serde_json::to_string_pretty(&o.result)?)
        .with_context(|| format!("writing {}", run_path.display()))?;
    let files = report::write_report(std::slice::from_ref(&o.result), &out_dir)?;
    eprintln!("main job: checking the database");
    let ok = crate::cmd::check::check(&dir, &sets, &[], false)?;
    println!();
    print_summary(&args, &o);
    println!();
    println!("report: {}", files.index.display());
    println!("run data: {}", run_path.display());
    if !ok {
        bail!("the consistency check found problems (listed above)");
    }
    Ok(())
}
