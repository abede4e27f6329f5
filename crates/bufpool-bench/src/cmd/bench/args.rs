//! `bench`'s flags: pgbench's, by pgbench's names and defaults (`-c`, `-j`, `-T`, `-t`,
//! `-R`, `-L`, `-P`, `-M`, `-l`, ...), bufpool's own beside them (`--json`, `--out`,
//! `--rate-profile`, `--batch-every`, `--side-script`, `--trace`, `--metrics-addr`, ...),
//! and their value parsers. The script flags are `scripts.rs`'s; checking the flags
//! against each other and resolving them into a run is `run.rs`'s.

use std::path::{Path, PathBuf};

use super::scripts::{parse_builtin, ScriptFlags};
use crate::tpcb;
use crate::tpcb::builtins::Mode;

/// pgbench's `-M`: accepted, with no effect on an embedded engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum QueryMode {
    Simple,
    Extended,
    Prepared,
}

impl QueryMode {
    pub fn name(self) -> &'static str {
        match self {
            QueryMode::Simple => "simple",
            QueryMode::Extended => "extended",
            QueryMode::Prepared => "prepared",
        }
    }
}

/// `bufpool bench`'s arguments, pgbench's flags by pgbench's names; experiments build one
/// with [`BenchArgs::tpcb`] and struct update syntax.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Number of clients (concurrent sessions, one thread each).
    #[arg(short = 'c', long = "client", default_value_t = 1)]
    pub clients: u32,
    /// Number of threads: clients are grouped for the per-thread log files.
    #[arg(short = 'j', long = "jobs", default_value_t = 1)]
    pub threads: u32,
    /// Duration in seconds.
    #[arg(short = 'T', long = "time")]
    pub time: Option<u64>,
    /// Transactions per client (default 10 when -T is not given).
    #[arg(short = 't', long = "transactions")]
    pub transactions: Option<u64>,
    /// Target rate, transactions per second (Poisson schedule; latency from schedule).
    #[arg(short = 'R', long = "rate")]
    pub rate: Option<f64>,
    /// Latency limit in ms: count later ones; with -R, skip those that start too late.
    #[arg(short = 'L', long = "latency-limit")]
    pub latency_limit: Option<f64>,
    /// Progress report every N seconds.
    #[arg(short = 'P', long = "progress")]
    pub progress: Option<u32>,
    /// pgbench's query protocol (simple, extended, prepared). Accepted for pgbench's
    /// command lines and has no effect: an embedded engine parses no SQL (the summary's
    /// "query mode" line says so).
    #[arg(short = 'M', long = "protocol", value_enum, default_value = "simple")]
    pub protocol: QueryMode,
    /// Write pgbench's aggregate log (one file per thread).
    #[arg(short = 'l', long = "log")]
    pub log: bool,
    /// Seconds per aggregate-log line.
    #[arg(long = "aggregate-interval")]
    pub aggregate_interval: Option<u32>,
    /// Log file name prefix.
    #[arg(long = "log-prefix", default_value = "pgbench_log")]
    pub log_prefix: String,
    /// The scripts: `-b`, `-S`, `-N`, `-f` (boxed: `Command` stays small).
    #[command(flatten)]
    pub scripts: Box<ScriptFlags>,
    /// pgbench's -n: no VACUUM of branches and tellers before the run.
    #[arg(short = 'n', long = "no-vacuum", conflicts_with = "vacuum_all")]
    pub no_vacuum: bool,
    /// pgbench's -v: VACUUM all four tables before the run (accounts and history too).
    #[arg(short = 'v', long = "vacuum-all")]
    pub vacuum_all: bool,
    /// pgbench's -C (a new connection per transaction): accepted, no effect (an embedded
    /// engine has no connections; the summary says so).
    #[arg(short = 'C', long = "connect")]
    pub connect: bool,
    /// pgbench's -r: each command's average latency and failures, per script with several;
    /// the tpcb-like, simple-update and select-only built-ins then run from their text,
    /// statement by statement (the others run as engine calls: the summary says so).
    #[arg(short = 'r', long = "report-per-command", alias = "report-latencies")]
    pub report_per_command: bool,
    /// With -l: the share of transactions the per-transaction log keeps (0 < RATE <= 1).
    #[arg(long = "sampling-rate", value_name = "RATE", value_parser = parse_rate)]
    pub sampling_rate: Option<f64>,
    /// Progress lines (-P) carry the Unix time instead of the seconds since the start.
    #[arg(long = "progress-timestamp")]
    pub progress_timestamp: bool,
    /// A transaction that fails on a deadlock runs again, up to N tries in all (pgbench's
    /// retry of serialization and deadlock failures; 0: unlimited within -T).
    #[arg(long = "max-tries", value_name = "N", default_value_t = 1)]
    pub max_tries: u32,
    /// The summary counts failures by kind (serialization, deadlock).
    #[arg(long = "failures-detailed")]
    pub failures_detailed: bool,
    /// Prints a built-in script (by name or unique prefix) and ends, as pgbench does.
    #[arg(long = "show-script", value_name = "NAME", value_parser = parse_builtin)]
    pub show_script: Option<Mode>,
    /// A second script run by one thread beside the clients, as seed 002's second pgbench
    /// instance: savepoint-overflow (70 nested savepoints, pause, commit) or long-running
    /// (one insert, pause, commit). Its transactions are reported apart (`side_script`).
    #[arg(long = "side-script", value_enum)]
    pub side_script: Option<tpcb::side::SideScript>,
    /// The side script's pause before its commit, ms (default: 1000 for
    /// savepoint-overflow, 10000 for long-running, the seed's pg_sleep).
    #[arg(long = "side-pause-ms")]
    pub side_pause_ms: Option<u64>,
    /// Random seed: a number, `time` (the current time) or `rand` (from the OS); default
    /// fixed, so runs repeat (pgbench's default is `time`).
    #[arg(long = "random-seed", default_value = "24301", value_parser = parse_seed)]
    pub seed: u64,
    /// Machine-readable summary on stdout.
    #[arg(long)]
    pub json: bool,
    /// Legend label in reports.
    #[arg(long)]
    pub label: Option<String>,
    /// Saves the whole run (per-second series included) for `bufpool report`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Rolls back this fraction of transactions after their work (testing aid).
    #[arg(long, default_value_t = 0.0, hide = true)]
    pub abort_fraction: f64,
    /// Appends one line per committed transaction (tid bid aid delta mtime) as soon as its
    /// commit returns, written to the OS before the client goes on: a line means
    /// acknowledged. For crash tests (`check --acked`, scripts/crash-loop.sh).
    #[arg(long = "ack-log", value_name = "FILE")]
    pub ack_log: Option<PathBuf>,
    /// Bursty target rate instead of -R: a sine wave with random spikes, e.g.
    /// period=60s,low=500,high=3000,spike=0.05[,spike-factor=3] (transactions/s over all
    /// clients; a spike second runs at spike-factor times the wave).
    #[arg(long = "rate-profile", value_name = "SPEC")]
    pub rate_profile: Option<String>,
    /// Every SECS seconds, a batch transaction updates --batch-rows accounts spread over the
    /// table (a large write, in the per-second charts).
    #[arg(long = "batch-every", value_name = "SECS")]
    pub batch_every: Option<u64>,
    /// Rows per batch (with --batch-every).
    #[arg(long = "batch-rows", value_name = "N")]
    pub batch_rows: Option<u64>,
    /// Every SECS seconds (at least 1), a thread beside the clients VACUUMs
    /// pgbench_branches, pgbench_tellers and pgbench_accounts (for stress runs).
    #[arg(long = "vacuum-every", value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub vacuum_every: Option<u64>,
    /// Zipfian account keys with this constant (YCSB's request distribution; YCSB uses
    /// 0.99), for any script; the zipf-read-update, zipf-select and ycsb-a .. ycsb-f scripts default to 0.99, the others
    /// to uniform keys, as pgbench.
    #[arg(long = "zipf-theta", value_name = "THETA")]
    pub zipf_theta: Option<f64>,
    /// Records every buffer request of the run (page, hit or miss, ring, time; 24 bytes
    /// each) to FILE, for `bufpool trace replay`.
    #[arg(long = "trace", value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Serves the engine's counters (pg_stat_io, pg_buffercache_summary,
    /// pg_stat_bgwriter, pg_stat_checkpointer, pg_stat_wal) as OpenMetrics text at
    /// http://ADDR/metrics while the run goes; loopback addresses only, port 0 for a free
    /// port (the address is printed on stderr).
    #[arg(long = "metrics-addr", value_name = "127.0.0.1:PORT", value_parser = crate::metrics_http::parse_loopback)]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Resizes the pool while the clients run: at TIME (seconds, or 500ms, 1min) to SIZE
    /// (256MB), growing or shrinking (`Engine::resize_pool`); repeat it, or give several
    /// separated by commas. `max_shared_buffers` defaults to the largest size named.
    #[arg(long = "resize-at", value_name = "TIME:SIZE", value_delimiter = ',', value_parser = crate::tpcb::driver::resize::ResizeAt::parse)]
    pub resize_at: Vec<crate::tpcb::driver::resize::ResizeAt>,
    /// Data directory.
    #[arg(short = 'D', long = "pgdata", default_value = "bufpool-data")]
    pub dir: PathBuf,
    /// Overrides a knob for this run (repeatable), e.g. --set shared_buffers=64MB.
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = crate::knobs::parse_set)]
    pub sets: Vec<(String, String)>,
}

impl BenchArgs {
    /// A plain TPC-B run of `clients` clients (one thread) for `seconds` on `dir` with
    /// knobs `sets`: no rate, log, progress or label. Callers change what they need with
    /// struct update syntax.
    pub fn tpcb(dir: &Path, clients: u32, seconds: u64, sets: Vec<(String, String)>) -> Self {
        BenchArgs {
            dir: dir.to_path_buf(),
            protocol: QueryMode::Simple,
            clients,
            threads: 1,
            time: Some(seconds),
            transactions: None,
            rate: None,
            latency_limit: None,
            progress: None,
            log: false,
            aggregate_interval: None,
            log_prefix: "pgbench_log".into(),
            scripts: Box::default(),
            no_vacuum: false,
            vacuum_all: false,
            connect: false,
            report_per_command: false,
            sampling_rate: None,
            progress_timestamp: false,
            max_tries: 1,
            failures_detailed: false,
            show_script: None,
            seed: 0x5eed,
            sets,
            json: false,
            label: None,
            out: None,
            abort_fraction: 0.0,
            ack_log: None,
            rate_profile: None,
            batch_every: None,
            batch_rows: None,
            side_script: None,
            side_pause_ms: None,
            vacuum_every: None,
            trace: None,
            zipf_theta: None,
            metrics_addr: None,
            resize_at: Vec::new(),
        }
    }
}

/// `--sampling-rate`: a share in (0, 1].
fn parse_rate(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
        _ => Err(format!(
            "invalid sampling rate {text:?} (more than 0, at most 1)"
        )),
    }
}

/// `--random-seed`: a number, `time` (seconds and microseconds of now, mixed) or `rand`
/// (the OS's randomness), as pgbench takes it.
fn parse_seed(text: &str) -> std::result::Result<u64, String> {
    match text.trim() {
        "time" => Ok(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64)),
        "rand" => {
            use rand::TryRngCore as _;
            rand::rngs::OsRng
                .try_next_u64()
                .map_err(|e| format!("--random-seed rand: {e}"))
        }
        n => n
            .parse::<u64>()
            .map_err(|_| format!("invalid random seed {text:?} (a number, time or rand)")),
    }
}
