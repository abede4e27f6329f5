//! A TPC-B run on a data directory: `bench`'s flags checked and resolved into
//! [`BenchOptions`], and the run itself as `bench` and every experiment make it
//! ([`run_tpcb`]): the configuration in effect, the engine opened, `bufpool buffercache`
//! served on the directory's socket and `--metrics-addr` on its port while it runs,
//! pgbench's VACUUM before it, `--trace` recorded, the engine shut down after it.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use bufpool::{RealVfs, Vfs};

use super::args::BenchArgs;
use super::scripts::bench_scripts;
use crate::cmd::open_engine;
use crate::knobs::{knob_values, load_config, KnobError};
use crate::tpcb::builtins::Mode;
use crate::tpcb::driver::batch::Batch;
use crate::tpcb::driver::rate_profile::RateProfile;
use crate::tpcb::driver::DriverOptions;
use crate::tpcb::mix::WeightedScript;
use crate::tpcb::options::{BenchOptions, RunOutcome};
use crate::tpcb::{self, Db};

/// Runs `bench` as `a` asks: the flags checked against each other (a bad mix is a knob
/// error), resolved into [`BenchOptions`] and run on `a.dir` with `a.sets`; `stop` is
/// Ctrl-C's flag.
pub(crate) fn run_bench(a: &BenchArgs, stop: Arc<AtomicBool>) -> Result<RunOutcome> {
    check_flags(a)?;
    let rate_profile = a
        .rate_profile
        .as_deref()
        .map(|t| RateProfile::parse(t, a.seed))
        .transpose()
        .map_err(|e| KnobError(e.to_string()))?;
    let batch = match (a.batch_every, a.batch_rows) {
        (None, None) => None,
        (Some(every), Some(rows)) if every >= 1 && rows >= 1 => Some(Batch {
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
    let mut scripts = bench_scripts(&a.scripts, a.report_per_command)?;
    // A YCSB database runs YCSB A when no script is named, a TPC-C one TPC-C's mix (a
    // TPC-B one, tpcb-like).
    if a.scripts.none_given() {
        match Workload::of(&RealVfs::new(), &a.dir).unwrap_or(Workload::Tpcb) {
            Workload::Ycsb => scripts = vec![WeightedScript::builtin(Mode::YcsbA, 1, None)],
            Workload::Tpcc => scripts = super::scripts::tpcc_mix(1),
            Workload::Tpcb => {}
        }
    }
    // One script runs as it always has; several are picked per transaction.
    let (mode, script) = match scripts.len() {
        1 => scripts
            .pop()
            .map(|s| (s.mode, s.script))
            .expect("one script"),
        _ => (scripts[0].mode, None),
    };
    let opts = BenchOptions {
        driver: driver_options(a, rate_profile, stop)?,
        mode,
        // Empty: `run_tpcb` names it after the clients and synchronous_commit.
        label: a.label.clone().unwrap_or_default(),
        config: Default::default(),
        abort_fraction: a.abort_fraction,
        no_vacuum: a.no_vacuum,
        vacuum_all: a.vacuum_all,
        script,
        scripts,
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
        resizes: {
            let mut r = a.resize_at.clone();
            r.sort_by_key(|r| r.at);
            r
        },
    };
    run_tpcb_traced(&a.dir, &a.sets, opts, a.trace.as_deref())
}

/// pgbench's checks of `bench`'s flags against each other: each bad mix is a knob error
/// naming the flags.
fn check_flags(a: &BenchArgs) -> Result<()> {
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
    Ok(())
}

/// How the clients run, from `a`: `-T` or `-t` (pgbench's 10 transactions per client
/// without either), the pace (`-R` or `rate_profile`, `-L`), the tries, the progress
/// lines and the logs (into the current directory); `stop` is Ctrl-C's flag.
fn driver_options(
    a: &BenchArgs,
    rate_profile: Option<RateProfile>,
    stop: Arc<AtomicBool>,
) -> Result<DriverOptions> {
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
    Ok(DriverOptions {
        clients: a.clients,
        threads: a.threads,
        duration,
        transactions,
        rate: a.rate,
        rate_profile,
        latency_limit_ms: a.latency_limit,
        max_tries: if a.max_tries == 0 {
            u32::MAX
        } else {
            a.max_tries
        },
        progress_s: a.progress,
        progress_timestamp: a.progress_timestamp,
        // pgbench: -l alone logs every transaction; with --aggregate-interval, intervals.
        aggregate_interval: a.aggregate_interval.filter(|_| a.log),
        transaction_log: a.log && a.aggregate_interval.is_none(),
        sampling_rate: a.sampling_rate.unwrap_or(1.0),
        log_prefix: a.log_prefix.clone(),
        log_dir: std::env::current_dir()?,
        ack_log: a.ack_log.clone(),
        seed: a.seed,
        stop,
    })
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
    let (mut c, _) = load_config(dir, sets)?;
    room_to_resize(&mut c, &opts)?;
    let vfs = RealVfs::new();
    let workload = Workload::of(&vfs, dir)?;
    check_workload(&vfs, dir, workload, &opts)?;
    let engine = open_engine(dir, &c, false)?;
    // `bufpool buffercache -D dir` reaches the pool through this while the run goes.
    let views = crate::buffercache::serve(engine.pool_arc().clone(), dir);
    let db = if workload == Workload::Ycsb {
        Tables::Ycsb(crate::ycsb::YcsbDb::open(&engine, &vfs as &dyn Vfs, dir)?)
    } else if workload == Workload::Tpcc {
        Tables::Tpcc(crate::tpcc::TpccDb::open(&engine, &vfs as &dyn Vfs, dir)?)
    } else {
        if opts.runs(Mode::SavepointOverflow) || opts.side.is_some() {
            tpcb::ensure_test_table(&engine, &vfs as &dyn Vfs, dir)?;
        }
        let db = Db::open(&engine, &vfs as &dyn Vfs, dir)?;
        // As pgbench does before each run: vacuum the small, hot tables, so that space
        // their rows left behind in earlier runs is reused. (pgbench also truncates the
        // history; we keep it, so that `check` can match it against the balances.)
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
        Tables::Tpcb(Box::new(db))
    };
    if opts.label.is_empty() {
        let sync = c.get("synchronous_commit").unwrap_or_default();
        opts.label = format!(
            "c{} {}",
            opts.driver.clients,
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
    let resized = AtomicBool::new(false);
    let mut out = std::thread::scope(|s| -> Result<RunOutcome> {
        let endpoint = opts
            .metrics_addr
            .map(|addr| crate::metrics_http::serve(s, &engine, addr, &stop_metrics))
            .transpose()?;
        let started = std::time::Instant::now();
        let resizer = (!opts.resizes.is_empty()).then(|| {
            let (engine, plan, resized) = (&engine, &opts.resizes, &resized);
            std::thread::Builder::new()
                .name("bufpool-resize".into())
                .spawn_scoped(s, move || {
                    tpcb::driver::resize::run(engine, plan, started, resized)
                })
        });
        let resizer = resizer.transpose()?;
        let out = match &db {
            Tables::Tpcb(db) => tpcb::run::run(db, &opts),
            Tables::Ycsb(db) => crate::ycsb::run::run(db, &opts),
            Tables::Tpcc(db) => crate::tpcc::run::run(db, &opts),
        };
        resized.store(true, std::sync::atomic::Ordering::Relaxed);
        let resizes = resizer.map(|h| h.join().expect("resize thread"));
        if let Some(e) = endpoint {
            e.stop();
        }
        let mut out = out?;
        out.result.resizes = resizes.unwrap_or_default();
        Ok(out)
    })?;
    if let Some(path) = trace {
        out.trace = Some(crate::trace::stop(engine.pool(), path)?);
    }
    out.result.memory = crate::tpcb::driver::counters::memory_use(
        &engine,
        c.wal_buffers_bytes(),
        &out.result.series,
    );
    out.prewarm = engine.autoprewarm_stats();
    drop(db);
    drop(views);
    engine.shutdown()?;
    Ok(out)
}

/// With `--resize-at` and `max_shared_buffers = auto`: room for the largest size named
/// (the pool reserves descriptors and address space for it at open).
fn room_to_resize(c: &mut bufpool::Config, opts: &BenchOptions) -> Result<()> {
    let Some(most) = opts.resizes.iter().map(|r| r.bytes).max() else {
        return Ok(());
    };
    if c.max_shared_buffers.is_none() {
        let shared = c.nbuffers() as u64 * c.block_size as u64;
        let bytes = most.max(shared);
        c.set("max_shared_buffers", &format!("{}kB", bytes.div_ceil(1024)))
            .map_err(|e| KnobError(format!("--resize-at: {e}")))?;
    }
    Ok(())
}

/// The tables a run runs on: the database's workload.
enum Tables<'e> {
    Tpcb(Box<Db<'e>>),
    Ycsb(crate::ycsb::YcsbDb<'e>),
    Tpcc(crate::tpcc::TpccDb<'e>),
}

/// The workload a data directory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workload {
    Tpcb,
    Ycsb,
    Tpcc,
}

impl Workload {
    /// What `dir`'s catalog holds: YCSB's usertable, TPC-C's tables, or (otherwise)
    /// pgbench's.
    pub(crate) fn of(vfs: &dyn Vfs, dir: &Path) -> Result<Workload> {
        Ok(if crate::ycsb::is_initialized(vfs, dir)? {
            Workload::Ycsb
        } else if crate::tpcc::is_initialized(vfs, dir)? {
            Workload::Tpcc
        } else {
            Workload::Tpcb
        })
    }

    /// Its name and what runs on it, for refusals.
    fn describe(self) -> (&'static str, &'static str) {
        match self {
            Workload::Tpcb => ("pgbench's tables", "TPC-B's scripts"),
            Workload::Ycsb => ("YCSB's usertable", "-b ycsb-a .. ycsb-f"),
            Workload::Tpcc => ("TPC-C's tables", "-b tpcc or one of its five"),
        }
    }

    /// Whether built-in script `mode` runs on it (a script file runs on pgbench's).
    fn runs(self, mode: Mode) -> bool {
        match self {
            Workload::Tpcb => !mode.is_ycsb() && !mode.is_tpcc(),
            Workload::Ycsb => mode.is_ycsb(),
            Workload::Tpcc => mode.is_tpcc(),
        }
    }
}

/// Refuses a run whose scripts are not the database's workload (YCSB's or TPC-C's on
/// pgbench's tables, or any other pairing), or TPC-B's side work on another workload's
/// database, naming the fix; and a directory that holds none.
fn check_workload(vfs: &RealVfs, dir: &Path, w: Workload, opts: &BenchOptions) -> Result<()> {
    let list = opts.script_list();
    let (holds, runs) = w.describe();
    if let Some(s) = list.iter().find(|s| !w.runs(s.mode)) {
        let make = if s.mode.is_ycsb() {
            " (make one with `bufpool init --workload ycsb -D DIR`)"
        } else if s.mode.is_tpcc() {
            " (make one with `bufpool init --workload tpcc -D DIR`)"
        } else {
            ""
        };
        if w == Workload::Tpcb {
            tpcb::require_initialized(vfs, dir)?;
        }
        return Err(KnobError(format!(
            "script {}: {} holds {holds}, which run {runs}{make}",
            s.name,
            dir.display()
        ))
        .into());
    }
    if w == Workload::Tpcb {
        tpcb::require_initialized(vfs, dir)?;
        return Ok(());
    }
    let refuse = |what: &str| -> Result<()> {
        Err(KnobError(format!(
            "{what}: {} holds {holds}, and this is TPC-B's (run {runs} here)",
            dir.display()
        ))
        .into())
    };
    for (given, flag) in [
        (opts.batch.is_some(), "--batch-every"),
        (opts.side.is_some(), "--side-script"),
        (opts.vacuum_every_s.is_some(), "--vacuum-every"),
        (opts.abort_fraction > 0.0, "--abort-fraction"),
        (opts.driver.ack_log.is_some(), "--ack-log"),
    ] {
        if given {
            return refuse(flag);
        }
    }
    Ok(())
}
