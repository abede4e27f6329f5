//! `bufpool`: the benchmark and experiment CLI of the bufpool buffer manager.
//!
//! Owns the command line's shape (the subcommands, each with its module's flags), the
//! dispatch, the exit statuses (a knob error: 2; `check`'s problems: 1) and the library's
//! log lines on stderr in PostgreSQL's form. With no subcommand it runs the main job
//! (`cmd/main_job.rs`: TPC-B, the report, the check).

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
mod tpcc;
mod trace;
mod ycsb;

use anyhow::Result;
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
    Buffercache(buffercache::BuffercacheArgs),
    /// Turns saved runs (`bench --out FILE`) into ./bufpool-report/index.html with charts.
    Report(ReportArgs),
    /// Runs the same TPC-B on bufpool, PostgreSQL and SQLite, one at a time, and prints one
    /// table and writes one report (./bufpool-compare/index.html).
    Compare(compare::cli::CompareArgs),
    /// Replays access traces (`bench --trace FILE`) through the replacement policies.
    Trace(trace::TraceCli),
    /// SQLite's side of `compare` (a child process per phase).
    #[command(hide = true)]
    SqliteTpcb(compare::cli::SqliteTpcbArgs),
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
        Some(Command::Init(a)) => cmd::init::run(&a),
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
        Some(Command::Compare(c)) => compare::cli::run(c, command),
        Some(Command::SqliteTpcb(a)) => compare::cli::sqlite_tpcb(a),
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
