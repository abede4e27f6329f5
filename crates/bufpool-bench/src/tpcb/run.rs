//! A TPC-B run (`bufpool bench`, and the experiments' runs): pgbench's client loop on the
//! embedded engine.
//!
//! Each client is a thread with its own session (its own transactions on the shared
//! engine); `-j` groups clients for the per-thread log files, as pgbench's threads do.
//! Latency is measured per transaction from its scheduled start (with `-R`, the Poisson
//! schedule pgbench uses; lag = actual start - scheduled start); per-second statistics
//! (count, latency sum, sum of squares, min, max, lag, skipped, failures) are kept per
//! client and merged at the end, and a monitor thread samples the pool's write counters
//! every second and prints `-P` progress lines. The engine's checkpointer thread takes the
//! checkpoints (by `checkpoint_timeout`, WAL volume); their spans come from its history.
//! Failures: a deadlock (the engine's wait-for check) aborts the transaction and counts
//! as a failed transaction (pgbench's deadlock_failures), run again up to `--max-tries`;
//! any other error stops the run with that error.
//!
//! Owns the orchestration: the TPC-B workload (`workload.rs`) run by the driver's clients
//! (`driver/client.rs`) beside its monitor (`driver/monitor.rs`), the batches
//! (`driver/batch.rs`) and the workload's side threads (`side.rs`, `vacuum.rs`,
//! `autovacuum.rs`); then the merge and the result (`driver/outcome.rs`, the scripts'
//! figures `mix.rs`'s), the engine's counters (`driver/counters.rs`) and pgbench's logs
//! (`driver/logs.rs`). The options and the outcome are `options.rs`'s.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::Result;

use bufpool::table::AutovacuumStats;

use super::builtins::Mode;
use super::driver::batch::{BatchRunner, BatchStats};
use super::driver::client::{Client, ClientStats};
use super::driver::counters::{checkpoint_spans, Counters};
use super::driver::logs::{write_aggregate_logs, write_transaction_logs};
use super::driver::monitor::{Live, Monitor, Sample};
use super::driver::outcome::{mark_targets, Measured, Merged, RunHead};
use super::driver::unix_micros;
use super::options::{BenchOptions, RunOutcome};
use super::vacuum::VacuumStats;
use super::workload::{ClientState, Tpcb};
use super::Db;
use crate::report::model::SideCounts;

/// Tells the threads beside the clients that the run is over, when dropped.
struct Finish<'a> {
    done: &'a AtomicBool,
    av: Option<&'a bufpool::table::Autovacuum>,
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(a) = self.av {
            a.stop();
        }
    }
}

/// The run's beginning: its clock and what was read before the first transaction.
struct Began {
    /// The clients' and the monitor's start.
    start: Instant,
    /// The same moment, µs since the Unix epoch.
    wall_start_us: u64,
    /// The engine's counters.
    counters: Counters,
    /// The tables' pages (autovacuum's figures).
    pages_start: Vec<u64>,
}

/// What the run's threads gave back once the clients finished.
struct Ended {
    clients: Vec<Result<ClientStats<ClientState>>>,
    samples: Vec<Sample>,
    batches: Option<Result<BatchStats>>,
    side: Option<Result<SideCounts>>,
    vacuums: Option<Result<VacuumStats>>,
    autovacuum: Option<Result<AutovacuumStats>>,
}

/// Runs the benchmark and returns its result (also writing the aggregate logs).
pub fn run(db: &Db<'_>, opts: &BenchOptions) -> Result<RunOutcome> {
    if opts.runs(Mode::SavepointOverflow) || opts.side.is_some() {
        db.test()?;
    }
    let workload = Tpcb::new(db, opts)?;
    let pool = db.engine.pool();
    let counters = Counters::take(db.engine);
    let live = Live::default();
    let done = AtomicBool::new(false);
    let began = Began {
        start: Instant::now(),
        wall_start_us: unix_micros(),
        pages_start: super::autovacuum::sizes(db),
        counters,
    };
    let (start, before) = (began.start, &began.counters.pool);
    let names = db.relation_names();
    let av = opts.autovacuum.map(bufpool::table::Autovacuum::new);
    let ended = std::thread::scope(|s| {
        // Ends the side threads when the clients are done, or when a client thread's
        // panic unwinds through here (the scope would otherwise wait for them for ever).
        let finish = Finish {
            done: &done,
            av: av.as_ref(),
        };
        let monitor =
            s.spawn(|| Monitor::new(pool, before, start, &opts.driver, &live, &done, &names).run());
        let done_ref = &done;
        let batches = opts.batch.map(|b| {
            s.spawn(move || {
                BatchRunner::new(b, opts.driver.seed, start, done_ref)
                    .run(|rows, rng| super::transactions::batch(db, rows, rng))
            })
        });
        let side = opts.side.map(|(script, wait)| {
            s.spawn(move || super::side::run(db, script, wait, done_ref, &opts.driver.stop))
        });
        let vacuums = opts
            .vacuum_every_s
            .map(|every| s.spawn(move || super::vacuum::run(db, every, start, done_ref)));
        let launcher = av
            .as_ref()
            .map(|a| s.spawn(|| super::autovacuum::run(db, a)));
        let mut handles = Vec::new();
        for id in 0..opts.driver.clients.max(1) {
            let client = Client::new(id, &workload, &opts.driver, start, &live);
            handles.push(s.spawn(move || client.run()));
        }
        let clients: Vec<Result<ClientStats<ClientState>>> = handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect();
        drop(finish);
        let autovacuum = launcher.map(|h| h.join().expect("autovacuum thread"));
        let samples = monitor.join().expect("monitor thread");
        let batches = batches.map(|b| b.join().expect("batch thread"));
        let side = side.map(|h| h.join().expect("side-script thread"));
        let vacuums = vacuums.map(|h| h.join().expect("vacuum thread"));
        Ended {
            clients,
            samples,
            batches,
            side,
            vacuums,
            autovacuum,
        }
    });
    outcome(db, opts, began, ended)
}

/// The run's outcome from what its threads gave back (the first error among them fails
/// it, a failed checkpoint's ahead of any client's); writes pgbench's logs.
fn outcome(db: &Db<'_>, opts: &BenchOptions, began: Began, ended: Ended) -> Result<RunOutcome> {
    let Began {
        start,
        wall_start_us,
        counters,
        pages_start,
    } = began;
    let wall_start = wall_start_us / 1_000_000;
    let av_stats = ended.autovacuum.transpose()?;
    let side = ended.side.transpose()?;
    let vacuums = ended.vacuums.transpose()?.unwrap_or_default();
    let elapsed = start.elapsed().as_secs_f64();
    // A failed checkpoint fails the run with its error, ahead of any client's.
    if let Some(e) = db.engine.checkpointer_error() {
        anyhow::bail!("checkpoint during the run: {e}");
    }
    let checkpoints = checkpoint_spans(db.engine, start);
    let batches: BatchStats = ended.batches.transpose()?.unwrap_or_default();
    let clients: Vec<ClientStats<ClientState>> =
        ended.clients.into_iter().collect::<Result<_>>()?;
    let after = db.engine.pool().stats();
    let merged = Merged::new(&clients);
    let tallies = super::mix::merge_clients(&clients);
    if let Some(interval) = opts.driver.aggregate_interval {
        write_aggregate_logs(&opts.driver, &clients, interval.max(1), wall_start)?;
    }
    if opts.driver.transaction_log {
        write_transaction_logs(&opts.driver, &clients, start, wall_start_us)?;
    }
    let measured = Measured {
        wall_start,
        elapsed,
        before: counters.pool,
        after,
        samples: ended.samples,
        checkpoints,
    };
    let head = RunHead {
        label: opts.label.clone(),
        mode: opts.mode_label(),
        scale: db.scale,
        config: opts.config.clone(),
    };
    let (mut result, figures) = merged.outcome(head, &opts.driver, measured);
    let scripts = super::mix::outcomes(&opts.script_list(), tallies, elapsed);
    counters.fill(db.engine, &after, &mut result);
    result.side_script = side;
    result.tables = Some(super::autovacuum::counts(
        db,
        start,
        &pages_start,
        av_stats.as_ref(),
    ));
    mark_targets(&mut result.series, &opts.driver, &batches);
    Ok(RunOutcome::new(result, figures, scripts, batches, vacuums))
}
