//! The pgbench-like commands: `init`, `bench`, `check`, `config`, `report`, and the main
//! job (`cargo run --release` with no arguments).
//!
//! Owns: the pgbench-style output. The knobs in effect and the configuration file are
//! `knobs.rs`'s.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bufpool::{RealVfs, Vfs};

use crate::cmd::open_engine;
use crate::ctrl_c::install_ctrl_c;
use crate::knobs::{knob_values, load_config, KnobError};
use crate::report;
use crate::tpcb::builtins::{builtin_script_text, Mode};
use crate::tpcb::run::{BenchOptions, RunOutcome};
use crate::tpcb::{self, Db};

/// `bufpool bench` flags.
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
    /// 0.99), for any script; the ycsb-b and ycsb-c scripts default to 0.99, the others
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
    /// Data directory.
    #[arg(short = 'D', long = "pgdata", default_value = "bufpool-data")]
    pub dir: PathBuf,
    /// Overrides a knob for this run (repeatable), e.g. --set shared_buffers=64MB.
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = crate::knobs::parse_set)]
    pub sets: Vec<(String, String)>,
}

/// pgbench's script flags, each repeatable and in any mix: each transaction runs one of
/// the scripts given, picked with probability weight / (the weights' sum) as pgbench picks
/// it; none given: tpcb-like. [`ScriptFlags::in_order`] gives them in command-line order.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ScriptFlags {
    /// Built-in script, as pgbench takes it: its name or a unique prefix of it (`tpcb`),
    /// with an optional weight (`@W`, 0 to 2147483647, default 1), `list` for the names.
    /// Repeatable, and with -f, -S, -N: each transaction runs one of the scripts given,
    /// picked with probability weight / (the weights' sum). None given: tpcb-like.
    #[arg(
        short = 'b',
        long = "builtin",
        value_name = "BUILTIN[@W]",
        value_parser = parse_builtin_arg
    )]
    pub builtins: Vec<ScriptArg>,
    /// pgbench's -S: the select-only built-in script (`-b select-only`).
    #[arg(short = 'S', long = "select-only", num_args = 0, action = clap::ArgAction::Append,
          default_missing_value = "select-only", value_parser = parse_builtin_arg)]
    pub select_only: Vec<ScriptArg>,
    /// pgbench's -N: skip the updates of tellers and branches, the simple-update built-in
    /// script (`-b simple-update`).
    #[arg(short = 'N', long = "skip-some-updates", num_args = 0, action = clap::ArgAction::Append,
          default_missing_value = "simple-update", value_parser = parse_builtin_arg)]
    pub skip_some_updates: Vec<ScriptArg>,
    /// pgbench's -f: runs the script in FILENAME, with an optional weight (`@W`, as -b's);
    /// repeatable, and with -b, -S, -N. Its statements must be ones the engine runs:
    /// `\\set` (with random, random_zipfian, random_exponential, random_gaussian),
    /// `\\sleep`, BEGIN, END, ROLLBACK and the built-in scripts' statements; anything else
    /// is refused before the run, naming its line.
    #[arg(short = 'f', long = "file", value_name = "FILENAME[@W]", value_parser = parse_file_arg)]
    pub files: Vec<ScriptArg>,
}

/// pgbench's `bench -b list` (or `--builtin list`, `--builtin=list`, `-blist`) in
/// `args`: the built-in scripts' names, one per line, as pgbench lists them.
pub fn builtin_list(args: impl Iterator<Item = String>) -> Option<String> {
    use clap::ValueEnum as _;
    let args: Vec<String> = args.collect();
    if args.get(1).map(String::as_str) != Some("bench") {
        return None;
    }
    let asks = args
        .windows(2)
        .any(|w| matches!(w[0].as_str(), "-b" | "--builtin") && w[1] == "list")
        || args.iter().any(|a| a == "--builtin=list" || a == "-blist");
    asks.then(|| {
        let mut out = String::from("Available builtin scripts:");
        for m in Mode::value_variants() {
            out.push_str("\n  ");
            out.push_str(m.name());
        }
        out
    })
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

/// One script of the command line (`-b`, `-f`, `-S`, `-N`): what it names, its weight,
/// and its place among the others (pgbench numbers the scripts in command-line order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptArg {
    /// When clap parsed it ([`SCRIPT_ARG_SEQ`]): the order of the command line across the
    /// four flags, which clap keeps in four lists.
    pub seq: u64,
    pub source: ScriptSource,
    pub weight: u32,
}

/// What a [`ScriptArg`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptSource {
    Builtin(Mode),
    File(String),
}

/// Counts the script flags parsed: clap parses a command line from left to right, calling
/// the value parser at each flag, so the numbers give the flags' order.
static SCRIPT_ARG_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn next_script_seq() -> u64 {
    SCRIPT_ARG_SEQ.fetch_add(1, Ordering::Relaxed)
}

/// `NAME[@WEIGHT]` split as pgbench's parseScriptWeight splits it: at the last `@`; the
/// weight a whole number from 0 to 2147483647 (1 without `@`). `flag` names the option
/// in errors.
fn split_weight<'t>(text: &'t str, flag: &str) -> std::result::Result<(&'t str, u32), String> {
    let Some((name, w)) = text.rsplit_once('@') else {
        return Ok((text, 1));
    };
    let range = format!("0 .. {}", tpcb::mix::WEIGHT_MAX);
    let digits = w.strip_prefix(['+', '-']).unwrap_or(w);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{flag} {text}: invalid weight specification: @{w} (a whole number, {range})"
        ));
    }
    match w.parse::<i64>() {
        Ok(n) if (0..=i64::from(tpcb::mix::WEIGHT_MAX)).contains(&n) => Ok((name, n as u32)),
        _ => Err(format!(
            "{flag} {text}: weight specification out of range ({range}): {w}"
        )),
    }
}

/// `-b NAME[@WEIGHT]` (and `-S`, `-N`): a built-in script and its weight.
fn parse_builtin_arg(text: &str) -> std::result::Result<ScriptArg, String> {
    let (name, weight) = split_weight(text, "-b")?;
    Ok(ScriptArg {
        seq: next_script_seq(),
        source: ScriptSource::Builtin(parse_builtin(name)?),
        weight,
    })
}

/// `-f FILENAME[@WEIGHT]`: a script file and its weight (the file is read before the run).
fn parse_file_arg(text: &str) -> std::result::Result<ScriptArg, String> {
    let (path, weight) = split_weight(text, "-f")?;
    if path.is_empty() {
        return Err(format!("-f {text}: no file name"));
    }
    Ok(ScriptArg {
        seq: next_script_seq(),
        source: ScriptSource::File(path.to_string()),
        weight,
    })
}

/// A built-in script by its name or a unique prefix (pgbench's rule); an `@WEIGHT` after
/// it is ignored (`--show-script`).
fn parse_builtin(text: &str) -> std::result::Result<Mode, String> {
    use clap::ValueEnum as _;
    let name = text.split_once('@').map_or(text, |(n, _)| n);
    let names: Vec<&str> = Mode::value_variants().iter().map(|m| m.name()).collect();
    let list = format!("available built-in scripts: {}", names.join(", "));
    if name == "list" {
        return Err(list);
    }
    let hits: Vec<Mode> = Mode::value_variants()
        .iter()
        .copied()
        .filter(|m| m.name() == name)
        .chain(
            Mode::value_variants()
                .iter()
                .copied()
                .filter(|m| m.name() != name && m.name().starts_with(name)),
        )
        .collect();
    match hits.as_slice() {
        [m, ..] if m.name() == name => Ok(*m),
        [m] if !name.is_empty() => Ok(*m),
        [] | [_] => Err(format!("no built-in script {name:?}; {list}")),
        _ => Err(format!(
            "ambiguous built-in script {name:?}: {}",
            hits.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
        )),
    }
}

impl ScriptFlags {
    /// The scripts of the command line in its order (`-b`, `-f`, and pgbench's shorthands
    /// `-S` and `-N` for `-b select-only` and `-b simple-update`); none: tpcb-like.
    pub fn in_order(&self) -> Vec<ScriptArg> {
        let mut all: Vec<ScriptArg> = [
            &self.builtins,
            &self.files,
            &self.select_only,
            &self.skip_some_updates,
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
        all.sort_by_key(|s| s.seq);
        if all.is_empty() {
            all.push(ScriptArg {
                seq: 0,
                source: ScriptSource::Builtin(Mode::TpcbLike),
                weight: 1,
            });
        }
        all
    }
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
        }
    }
}

/// The scripts the clients run, in the command line's order, each with its weight: a
/// file (`-f`, parsed), or a built-in (engine calls; for `-r`, tpcb-like, simple-update
/// and select-only are run from their text so their statements are timed one by one).
/// Errors: a file that cannot be read or parsed, total weight 0 (exit status 2).
fn bench_scripts(a: &BenchArgs) -> Result<Vec<tpcb::mix::WeightedScript>> {
    let mut out = Vec::new();
    for arg in a.scripts.in_order() {
        out.push(match arg.source {
            ScriptSource::File(path) => {
                tpcb::mix::WeightedScript::file(read_script_file(&path)?, arg.weight)
            }
            ScriptSource::Builtin(mode) => {
                let interpreted = a.report_per_command
                    && matches!(mode, Mode::TpcbLike | Mode::SimpleUpdate | Mode::SelectOnly);
                let script = interpreted
                    .then(|| tpcb::script::Script::parse(mode.name(), builtin_script_text(mode)))
                    .transpose()?
                    .map(Arc::new);
                tpcb::mix::WeightedScript::builtin(mode, arg.weight, script)
            }
        });
    }
    if out.iter().all(|s| s.weight == 0) {
        return Err(KnobError("total script weight must not be zero".into()).into());
    }
    Ok(out)
}

/// A pgbench script file, read (at most 1 MiB) and parsed; a problem names the file and
/// line (exit status 2).
fn read_script_file(path: &str) -> Result<tpcb::script::Script> {
    /// Longest script file read (a bound, whatever the file holds).
    const SCRIPT_MAX: u64 = 1 << 20;
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(
            std::fs::File::open(path).with_context(|| format!("opening script {path}"))?,
            SCRIPT_MAX + 1,
        ),
        &mut text,
    )
    .with_context(|| format!("reading script {path} (text, UTF-8)"))?;
    if text.len() as u64 > SCRIPT_MAX {
        return Err(KnobError(format!("script {path} is over {SCRIPT_MAX} bytes")).into());
    }
    Ok(tpcb::script::Script::parse(path, &text).map_err(|e| KnobError(e.to_string()))?)
}

pub(crate) fn run_bench(a: &BenchArgs, stop: Arc<AtomicBool>) -> Result<RunOutcome> {
    if a.clients == 0 || a.threads == 0 || !a.clients.is_multiple_of(a.threads) {
        return Err(KnobError(format!(
            "invalid number of clients/threads: -c {} -j {} (both at least 1, clients a multiple of threads)",
            a.clients, a.threads
        ))
        .into());
    }
    if a.time.is_some() && a.transactions.is_some() {
        return Err(
            KnobError("specify either -T (seconds) or -t (transactions), not both".into()).into(),
        );
    }
    if a.aggregate_interval.is_some() && !a.log {
        return Err(KnobError("--aggregate-interval needs -l".into()).into());
    }
    if a.sampling_rate.is_some() && (!a.log || a.aggregate_interval.is_some()) {
        return Err(KnobError(
            "--sampling-rate needs -l without --aggregate-interval (the per-transaction log)"
                .into(),
        )
        .into());
    }
    if a.rate_profile.is_some() && a.rate.is_some() {
        return Err(KnobError(
            "specify either -R (a constant rate) or --rate-profile, not both".into(),
        )
        .into());
    }
    let rate_profile = a
        .rate_profile
        .as_deref()
        .map(|t| tpcb::burst::RateProfile::parse(t, a.seed))
        .transpose()
        .map_err(|e| KnobError(e.to_string()))?;
    let batch = match (a.batch_every, a.batch_rows) {
        (None, None) => None,
        (Some(every), Some(rows)) if every >= 1 && rows >= 1 => Some(tpcb::burst::Batch {
            every_s: every,
            rows,
        }),
        _ => {
            return Err(KnobError(
                "--batch-every SECS and --batch-rows N go together, each at least 1".into(),
            )
            .into())
        }
    };
    let duration = match (a.time, a.transactions) {
        (Some(t), _) => Some(Duration::from_secs(t)),
        (None, Some(_)) => None,
        (None, None) => None,
    };
    let transactions = if a.time.is_none() && a.transactions.is_none() {
        Some(10) // pgbench's default: 10 transactions per client
    } else {
        a.transactions
    };
    let mut scripts = bench_scripts(a)?;
    // One script runs as it always has; several are picked per transaction.
    let (mode, script) = match scripts.len() {
        1 => scripts
            .pop()
            .map(|s| (s.mode, s.script))
            .expect("one script"),
        _ => (scripts[0].mode, None),
    };
    let opts = BenchOptions {
        clients: a.clients,
        threads: a.threads,
        duration,
        transactions,
        rate: a.rate,
        latency_limit_ms: a.latency_limit,
        progress_s: a.progress,
        // pgbench: -l alone logs every transaction; with --aggregate-interval, intervals.
        aggregate_interval: a.aggregate_interval.filter(|_| a.log),
        transaction_log: a.log && a.aggregate_interval.is_none(),
        log_prefix: a.log_prefix.clone(),
        log_dir: std::env::current_dir()?,
        mode,
        seed: a.seed,
        // Empty: `run_tpcb` names it after the clients and synchronous_commit.
        label: a.label.clone().unwrap_or_default(),
        stop,
        config: Default::default(),
        abort_fraction: a.abort_fraction,
        no_vacuum: a.no_vacuum,
        vacuum_all: a.vacuum_all,
        sampling_rate: a.sampling_rate.unwrap_or(1.0),
        progress_timestamp: a.progress_timestamp,
        max_tries: if a.max_tries == 0 {
            u32::MAX
        } else {
            a.max_tries
        },
        script,
        scripts,
        ack_log: a.ack_log.clone(),
        rate_profile,
        batch,
        side: a.side_script.map(|s| {
            (
                s,
                a.side_pause_ms
                    .map_or_else(|| s.default_pause(), Duration::from_millis),
            )
        }),
        vacuum_every_s: a.vacuum_every,
        autovacuum: None,
        zipf_theta: a.zipf_theta,
        metrics_addr: a.metrics_addr,
    };
    run_tpcb_traced(&a.dir, &a.sets, opts, a.trace.as_deref())
}

/// Runs `opts` on the database at `dir` with knobs `sets` (over its bufpool.conf): opens
/// the engine, vacuums the hot tables as pgbench does, runs, shuts down. Fills in the
/// knobs in effect and, if `opts.label` is empty, the label `c<clients> sync|async`.
pub(crate) fn run_tpcb(
    dir: &Path,
    sets: &[(String, String)],
    opts: BenchOptions,
) -> Result<RunOutcome> {
    run_tpcb_traced(dir, sets, opts, None)
}

/// [`run_tpcb`], recording every buffer request of the run to `trace` if given.
pub(crate) fn run_tpcb_traced(
    dir: &Path,
    sets: &[(String, String)],
    mut opts: BenchOptions,
    trace: Option<&Path>,
) -> Result<RunOutcome> {
    let (c, _) = load_config(dir, sets)?;
    let vfs = RealVfs::new();
    tpcb::require_initialized(&vfs, dir)?;
    let engine = open_engine(dir, &c, false)?;
    // `bufpool buffercache -D dir` reaches the pool through this while the run goes.
    let views = crate::buffercache::serve(engine.pool_arc().clone(), dir);
    if opts.runs(Mode::SavepointOverflow) || opts.side.is_some() {
        tpcb::ensure_test_table(&engine, &vfs as &dyn Vfs, dir)?;
    }
    let db = Db::open(&engine, &vfs as &dyn Vfs, dir)?;
    // As pgbench does before each run: vacuum the small, hot tables, so that space their
    // rows left behind in earlier runs is reused. (pgbench also truncates the history;
    // we keep it, so that `check` can match it against the balances.)
    if !opts.no_vacuum {
        eprint!("starting vacuum...");
        db.branches.vacuum(false)?;
        db.tellers.vacuum(false)?;
        eprintln!("end.");
    }
    if opts.vacuum_all {
        eprint!("starting vacuum pgbench_accounts...");
        db.accounts.vacuum(false)?;
        db.history.vacuum(false)?;
        eprintln!("end.");
    }
    if opts.label.is_empty() {
        let sync = c.get("synchronous_commit").unwrap_or_default();
        opts.label = format!(
            "c{} {}",
            opts.clients,
            if sync == "on" { "sync" } else { "async" }
        );
    }
    opts.config = knob_values(&c);
    opts.autovacuum = c
        .autovacuum
        .then(|| bufpool::table::AutovacuumOptions::from_config(&c));
    if let Some(path) = trace {
        crate::trace::start(engine.pool(), path)?;
    }
    let stop_metrics = std::sync::atomic::AtomicBool::new(false);
    let mut out = std::thread::scope(|s| -> Result<RunOutcome> {
        let endpoint = opts
            .metrics_addr
            .map(|addr| crate::metrics_http::serve(s, &engine, addr, &stop_metrics))
            .transpose()?;
        let out = tpcb::run::run(&db, &opts);
        if let Some(e) = endpoint {
            e.stop();
        }
        out
    })?;
    if let Some(path) = trace {
        out.trace = Some(crate::trace::stop(engine.pool(), path)?);
    }
    out.prewarm = engine.autoprewarm_stats();
    drop(db);
    drop(views);
    engine.shutdown()?;
    Ok(out)
}

/// The autovacuum line and the tables' dead versions and sizes, when autovacuum ran.
fn print_autovacuum(t: &crate::report::model::TableCounts) {
    let Some(av) = &t.autovacuum else {
        return;
    };
    println!(
        "autovacuum: {} rounds, {} vacuums ({} pages, {} dead versions removed, {:.1} s \
         vacuuming of which {:.1} s in {} cost naps)",
        av.rounds, av.vacuums, av.pages, av.removed, av.vacuum_s, av.cost_nap_s, av.cost_naps
    );
    for r in &t.tables {
        println!(
            "  {}: {} autovacuums, n_live_tup {}, n_dead_tup {}, {} -> {} pages",
            r.relname, r.autovacuum_count, r.n_live_tup, r.n_dead_tup, r.pages_start, r.pages_end
        );
    }
}

/// pgbench's summary head: what ran, how, with how many clients, threads and tries.
fn print_summary_head(a: &BenchArgs, o: &RunOutcome) {
    let r = &o.result;
    match o.scripts.as_slice() {
        [one] => println!("transaction type: {}", one.desc),
        _ => println!("transaction type: multiple scripts"),
    }
    println!("scaling factor: {}", r.scale);
    println!(
        "query mode: embedded (-M {} has no effect: transactions call the engine directly, no SQL is parsed)",
        a.protocol.name()
    );
    if a.connect {
        println!("connection mode: embedded (-C has no effect: there are no connections to open)");
    }
    println!("number of clients: {}", r.clients);
    println!("number of threads: {}", r.threads);
    match a.max_tries {
        0 => println!("maximum number of tries: unlimited"),
        n => println!("maximum number of tries: {n}"),
    }
    match (a.time, a.transactions) {
        (Some(t), _) => println!("duration: {t} s"),
        _ => println!(
            "number of transactions per client: {}",
            a.transactions.unwrap_or(10)
        ),
    }
}

/// Failed, deadlocked, retried transactions and retries beyond the first try: the
/// figures of pgbench's failure lines.
struct Failures {
    failed: u64,
    deadlocks: u64,
    retried: u64,
    retries: u64,
}

/// pgbench's failure and retry lines (`--failures-detailed`, `--max-tries`), each after
/// `prefix` (" - " in a script's block), as shares of `all` transactions.
fn print_failures(prefix: &str, a: &BenchArgs, f: &Failures, all: u64) {
    let share = |n: u64| 100.0 * n as f64 / all as f64;
    println!(
        "{prefix}number of failed transactions: {} ({:.3}%)",
        f.failed,
        share(f.failed)
    );
    if a.failures_detailed {
        println!("{prefix}number of serialization failures: 0 (0.000%)");
        println!(
            "{prefix}number of deadlock failures: {} ({:.3}%)",
            f.deadlocks,
            share(f.deadlocks)
        );
    }
    if a.max_tries != 1 {
        println!(
            "{prefix}number of transactions retried: {} ({:.3}%)",
            f.retried,
            share(f.retried)
        );
        println!("{prefix}total number of retries: {}", f.retries);
    }
}

/// pgbench's per-script blocks (several scripts), after the totals: each script's
/// weight, share, failures and latency, and with `-r` its statements.
fn print_scripts(a: &BenchArgs, o: &RunOutcome) {
    let total_weight: u64 = o.scripts.iter().map(|s| u64::from(s.weight)).sum();
    let total = o.result.transactions.max(1) as f64;
    for (i, s) in o.scripts.iter().enumerate() {
        println!("SQL script {}: {}", i + 1, s.desc);
        println!(
            " - weight: {} (targets {:.1}% of total)",
            s.weight,
            100.0 * f64::from(s.weight) / total_weight.max(1) as f64
        );
        println!(
            " - {} transactions ({:.1}% of total, tps = {:.6})",
            s.transactions,
            100.0 * s.transactions as f64 / total,
            s.tps
        );
        let all = (s.transactions + s.failed).max(1);
        let f = Failures {
            failed: s.failed,
            deadlocks: s.deadlocks,
            retried: s.retried,
            retries: s.retries,
        };
        print_failures(" - ", a, &f, all);
        if a.rate.is_some() && a.latency_limit.is_some() {
            println!(
                " - number of transactions skipped: {} ({:.3}%)",
                s.skipped,
                100.0 * s.skipped as f64 / (all + s.skipped) as f64
            );
        }
        // pgbench's printSimpleStats: only for a script that ran.
        if s.transactions > 0 {
            println!(" - latency average = {:.3} ms", s.latency_avg_ms);
            println!(" - latency stddev = {:.3} ms", s.latency_stddev_ms);
        }
        if a.report_per_command && s.interpreted {
            print_statement_latencies(" - ", &s.statements);
        } else if a.report_per_command {
            println!(
                " - statement latencies: not reported (-r): the {} script runs as engine calls",
                s.name
            );
        }
    }
}

/// pgbench's `-r` block: one line per command of a script, its header after `prefix`.
fn print_statement_latencies(
    prefix: &str,
    statements: &[(String, crate::tpcb::script::StatementStat)],
) {
    println!("{prefix}statement latencies in milliseconds and failures:");
    for (text, st) in statements {
        let ms = if st.count > 0 {
            st.sum_us / st.count as f64 / 1000.0
        } else {
            0.0
        };
        println!("{ms:>14.3}{:>12}  {text}", st.failures);
    }
}

fn print_summary(a: &BenchArgs, o: &RunOutcome) {
    let r = &o.result;
    print_summary_head(a, o);
    println!(
        "number of transactions actually processed: {}",
        r.transactions
    );
    let all = (r.transactions + r.failed).max(1);
    let failures = Failures {
        failed: r.failed,
        deadlocks: o.deadlocks,
        retried: o.retried,
        retries: o.retries,
    };
    print_failures("", a, &failures, all);
    let several = o.scripts.len() > 1;
    if a.rate.is_some() && a.latency_limit.is_some() {
        println!(
            "number of transactions skipped: {} ({:.3}%)",
            o.skipped,
            100.0 * o.skipped as f64 / (all + o.skipped) as f64
        );
    }
    if a.report_per_command && o.statements.is_empty() && !several {
        println!(
            "statement latencies: not reported (-r): the {} script runs as engine calls, not \
             statement by statement; the latency lines below are per transaction",
            r.mode
        );
    }
    if let Some(l) = a.latency_limit {
        println!(
            "number of transactions above the {l:.1} ms latency limit: {}/{} ({:.3}%)",
            o.late,
            r.transactions,
            100.0 * o.late as f64 / r.transactions.max(1) as f64
        );
    }
    println!("latency average = {:.3} ms", r.latency_ms.avg);
    println!("latency stddev = {:.3} ms", r.latency_ms.stddev);
    let l = &r.latency_ms;
    println!(
        "latency tail: p99 {:.3} ms, p99.9 {:.3} ms, max {:.3} ms; over 10 / 50 / 100 ms: {} / {} / {}",
        l.p99, l.p999, l.max, l.over_10ms, l.over_50ms, l.over_100ms
    );
    if let Some(w) = &r.waits {
        println!("waits, all: {}", crate::tpcb::waits::describe(&w.all));
        println!(
            "waits, over 5 ms: {}",
            crate::tpcb::waits::describe(&w.over_5ms)
        );
        println!(
            "waits, over 10 ms: {}",
            crate::tpcb::waits::describe(&w.over_10ms)
        );
        println!(
            "waits, each second's slowest: {}",
            crate::tpcb::waits::describe(&w.each_seconds_slowest)
        );
    }
    if let Some(p) = &o.prewarm {
        println!(
            "autoprewarm: reloaded {} of {} saved blocks ({} skipped{}{}) in {:.2} s{}",
            p.loaded,
            p.listed,
            p.skipped,
            if p.invalid > 0 {
                format!(", {} torn free-space map pages left to the map", p.invalid)
            } else {
                String::new()
            },
            if p.stopped_pool_full {
                ", stopped: no free buffer"
            } else {
                ""
            },
            p.load_seconds,
            p.last_error
                .as_ref()
                .map_or(String::new(), |e| format!("; {e}"))
        );
    }
    if let Some(p) = &a.rate_profile {
        println!("rate profile: {p}");
    }
    if a.batch_every.is_some() {
        let b = &o.batches;
        let mut d = b.durations_ms.clone();
        d.sort_by(f64::total_cmp);
        println!(
            "batches: {} committed, {} deadlocked; duration median {:.1} ms, max {:.1} ms",
            b.committed,
            b.deadlocks,
            d.get(d.len().saturating_sub(1) / 2).copied().unwrap_or(0.0),
            d.last().copied().unwrap_or(0.0)
        );
    }
    if a.vacuum_every.is_some() {
        println!(
            "vacuum side thread: {} passes, {} dead versions removed",
            o.vacuums.passes, o.vacuums.removed
        );
    }
    if let Some(t) = &r.tables {
        print_autovacuum(t);
    }
    if a.rate.is_some() || a.rate_profile.is_some() {
        println!(
            "rate limit schedule lag: avg {:.3} (max {:.3}) ms",
            o.lag_avg_ms, o.lag_max_ms
        );
    }
    println!(
        "latency percentiles: p50 = {:.3} ms, p95 = {:.3} ms, p99 = {:.3} ms, max = {:.3} ms",
        r.latency_ms.p50, r.latency_ms.p95, r.latency_ms.p99, r.latency_ms.max
    );
    println!("initial connection time = 0.000 ms");
    println!("tps = {:.6} (without initial connection time)", r.tps);
    if several {
        print_scripts(a, o);
    } else if a.report_per_command && !o.statements.is_empty() {
        print_statement_latencies("", &o.statements);
    }
    if let Some(w) = &r.bytes_written {
        println!("bytes written per transaction: {}", describe_written(w));
    }
    if let Some(side) = &r.side_script {
        println!(
            "side script {}: {} transactions, {} savepoints, pause {:.0} ms, longest {:.1} ms",
            side.script, side.transactions, side.subtransactions, side.pause_ms, side.longest_ms
        );
    }
}

/// One line: each source's bytes per transaction, the devices' after them.
pub fn describe_written(w: &crate::report::model::WriteBytes) -> String {
    let b = |v: u64| format!("{:.0}", w.per_tx(v));
    let device = match w.device {
        Some(d) => format!("; devices {} ({})", b(d), w.devices.join(", ")),
        None => "; devices: not known".into(),
    };
    format!(
        "wal {} (full-page images {}, padding {}), checkpointer {}, bgwriter {}, backends {}, \
         extensions {}, slru {}: engine {} (writeback-hinted {}){device}",
        b(w.wal),
        b(w.wal_fpi),
        b(w.wal_padding),
        b(w.checkpointer),
        b(w.bgwriter),
        b(w.backend),
        b(w.extend),
        b(w.slru),
        b(w.engine_total()),
        b(w.writeback_hinted),
    )
}

/// `bufpool bench`.
pub fn bench(a: &BenchArgs) -> Result<()> {
    if let Some(m) = a.show_script {
        print!("{}", builtin_script_text(m));
        return Ok(());
    }
    let stop = install_ctrl_c();
    let o = run_bench(a, stop)?;
    if let Some(path) = &a.out {
        std::fs::write(path, serde_json::to_string_pretty(&o.result)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&summary_json(&o, a.report_per_command))?
        );
    } else {
        print_summary(a, &o);
    }
    Ok(())
}

/// The `--json` summary: the fields (tps, latency_ms, per_interval, buffers,
/// checkpoints, config) and a few more.
pub fn summary_json(o: &RunOutcome, per_command: bool) -> serde_json::Value {
    let r = &o.result;
    let mut j = serde_json::json!({
        "label": r.label,
        "provenance": r.provenance,
        "mode": r.mode,
        "scale": r.scale,
        "clients": r.clients,
        "threads": r.threads,
        "duration_s": r.duration_s,
        "transactions": r.transactions,
        "failed": r.failed,
        "skipped": o.skipped,
        "late": o.late,
        "tps": r.tps,
        "latency_ms": r.latency_ms,
        "per_interval": r.per_interval,
        "buffers": r.buffers,
        "checkpoints": r.checkpoints,
        "backend_write_share": r.backend_write_share(),
        "bgwriter": r.bgwriter,
        "checkpointer": r.checkpointer,
        "wal": r.wal,
        "slru": r.slru,
        "bytes_written": r.bytes_written,
        "bytes_written_per_tx": r.bytes_written.as_ref().map(|w| {
            w.per_tx_rows()
                .into_iter()
                .map(|(k, v)| (k.trim().replace(' ', "_"), serde_json::json!(v)))
                .collect::<serde_json::Map<_, _>>()
        }),
        "side_script": r.side_script,
        "autoprewarm": o.prewarm.as_ref().map(|p| serde_json::json!({
            "listed": p.listed,
            "loaded": p.loaded,
            "skipped": p.skipped,
            "invalid": p.invalid,
            "stopped_pool_full": p.stopped_pool_full,
            "load_seconds": p.load_seconds,
            "error": p.last_error,
        })),
        "trace": o.trace.map(|t| serde_json::json!({
            "records": t.records,
            "bytes": t.bytes,
            "dropped": t.dropped,
        })),
        "waits": r.waits.as_ref().map(|w| serde_json::json!({
            "all": w.all,
            "over_5ms": w.over_5ms,
            "over_10ms": w.over_10ms,
            "each_seconds_slowest": w.each_seconds_slowest,
        })),
        "config": r.config,
    });
    if o.scripts.len() > 1 {
        j["scripts"] = o
            .scripts
            .iter()
            .map(|s| script_json(s, per_command))
            .collect();
    }
    j
}

/// One script of several in `--json`: pgbench's per-script figures, and with `-r`
/// (`per_command`) its statements when they were timed (not for engine calls).
fn script_json(s: &tpcb::mix::ScriptOutcome, per_command: bool) -> serde_json::Value {
    let mut j = serde_json::json!({
        "name": s.name,
        "description": s.desc,
        "weight": s.weight,
        "transactions": s.transactions,
        "failed": s.failed,
        "skipped": s.skipped,
        "retried": s.retried,
        "tps": s.tps,
        "latency_avg_ms": s.latency_avg_ms,
        "latency_stddev_ms": s.latency_stddev_ms,
    });
    if per_command && s.interpreted {
        j["statements"] = s
            .statements
            .iter()
            .map(|(text, st)| {
                serde_json::json!({
                    "command": text,
                    "count": st.count,
                    "latency_avg_ms": if st.count > 0 { st.sum_us / st.count as f64 / 1000.0 } else { 0.0 },
                    "failures": st.failures,
                })
            })
            .collect();
    }
    j
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: `-b`, `-f`, `-S` and `-N` keep the command line's order across the four
    /// flags (pgbench numbers its scripts so), each with its weight (1 without `@`, the
    /// last `@` splitting a file's name as pgbench splits it); none given is tpcb-like; a
    /// weight that is empty, not a number or outside 0..=2^31-1 is refused, naming the
    /// flag and the range.
    #[test]
    fn script_flags_keep_their_order_and_weights() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            bench: BenchArgs,
        }
        let parse = |args: &[&str]| {
            let words = std::iter::once("bench").chain(args.iter().copied());
            <Cli as clap::Parser>::try_parse_from(words).map(|c| c.bench.scripts.in_order())
        };
        let got = parse(&["-N", "-f", "x@y.sql@2", "-b", "sel@0", "-S", "-b", "tpcb"]).unwrap();
        let got: Vec<(ScriptSource, u32)> = got.into_iter().map(|s| (s.source, s.weight)).collect();
        use ScriptSource::{Builtin, File};
        assert_eq!(
            got,
            [
                (Builtin(Mode::SimpleUpdate), 1),
                (File("x@y.sql".into()), 2),
                (Builtin(Mode::SelectOnly), 0),
                (Builtin(Mode::SelectOnly), 1),
                (Builtin(Mode::TpcbLike), 1),
            ]
        );
        let none = parse(&[]).unwrap();
        assert_eq!(
            (&none[0].source, none[0].weight),
            (&Builtin(Mode::TpcbLike), 1)
        );
        assert_eq!(
            parse(&["-b", "tpcb@2147483647"]).unwrap()[0].weight,
            i32::MAX as u32
        );
        for (flag, value, says) in [
            (
                "-b",
                "tpcb@",
                "-b tpcb@: invalid weight specification: @ (a whole number, 0 .. 2147483647)",
            ),
            ("-b", "tpcb@1x", "invalid weight specification: @1x"),
            ("-f", "a.sql@", "-f a.sql@: invalid weight specification"),
            (
                "-b",
                "tpcb@2147483648",
                "out of range (0 .. 2147483647): 2147483648",
            ),
            (
                "-f",
                "a.sql@-1",
                "-f a.sql@-1: weight specification out of range",
            ),
        ] {
            let e = parse(&[flag, value]).expect_err(value).to_string();
            assert!(e.contains(says), "{value}: {e}");
        }
    }
}
