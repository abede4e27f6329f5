//! `bufpool bench`: pgbench's client loop on the embedded engine.
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
//! as a failed transaction (pgbench's deadlock_failures; no retries, as pgbench without
//! --max-tries); any other error stops the run with that error.
//!
//! Owns the orchestration; the options and the outcome are `options.rs`'s, the parts
//! `Client` (`client.rs`), `Monitor` (`monitor.rs`), the merge and the result
//! (`outcome.rs`) and the aggregate log (`aggregate_log.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::Result;

use super::aggregate_log::{write_aggregate_logs, write_transaction_logs};
use super::batch::{BatchRunner, BatchStats};
use super::builtins::Mode;
use super::driver::client::{Client, ClientStats};
use super::driver::counters::{checkpoint_spans, Counters};
use super::driver::monitor::{Live, Monitor};
use super::options::{BenchOptions, RunOutcome};
use super::outcome::{Measured, Merged};
use super::workload::{Session, Tpcb};
use super::Db;

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

/// Now, in microseconds since the Unix epoch (0 if the clock is before it).
fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Runs the benchmark and returns its result (also writing the aggregate logs).
pub fn run(db: &Db<'_>, opts: &BenchOptions) -> Result<RunOutcome> {
    if opts.runs(Mode::SavepointOverflow) || opts.side.is_some() {
        db.test()?;
    }
    let workload = Tpcb::new(db, opts)?;
    let pool = db.engine.pool();
    let counters = Counters::take(db.engine);
    let before = &counters.pool;
    let live = Live::default();
    let done = AtomicBool::new(false);
    let start = Instant::now();
    let wall_start_us = unix_micros();
    let wall_start = wall_start_us / 1_000_000;
    let pages_start = super::autovacuum::sizes(db);
    let names = db.relation_names();
    let av = opts.autovacuum.map(bufpool::table::Autovacuum::new);
    let (clients, samples, batches, side, vacuums, av_stats) = std::thread::scope(|s| {
        // Ends the side threads when the clients are done, or when a client thread's
        // panic unwinds through here (the scope would otherwise wait for them for ever).
        let finish = Finish {
            done: &done,
            av: av.as_ref(),
        };
        let monitor = s.spawn(|| {
            Monitor::new(
                pool,
                before,
                start,
                opts.driver.progress_s,
                &live,
                &done,
                &names,
            )
            .with_timestamps(opts.driver.progress_timestamp)
            .run()
        });
        let done_ref = &done;
        let batches = opts.batch.map(|b| {
            s.spawn(move || BatchRunner::new(db, b, opts.driver.seed, start, done_ref).run())
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
        let clients: Vec<Result<ClientStats<Session>>> = handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect();
        drop(finish);
        let av_stats = launcher.map(|h| h.join().expect("autovacuum thread"));
        let samples = monitor.join().expect("monitor thread");
        let batches = batches.map(|b| b.join().expect("batch thread"));
        let side = side.map(|h| h.join().expect("side-script thread"));
        let vacuums = vacuums.map(|h| h.join().expect("vacuum thread"));
        (clients, samples, batches, side, vacuums, av_stats)
    });
    let av_stats = av_stats.transpose()?;
    let side = side.transpose()?;
    let vacuums = vacuums.transpose()?.unwrap_or_default();
    let elapsed = start.elapsed().as_secs_f64();
    // A failed checkpoint fails the run with its error, ahead of any client's.
    if let Some(e) = db.engine.checkpointer_error() {
        anyhow::bail!("checkpoint during the run: {e}");
    }
    let checkpoints = checkpoint_spans(db.engine, start);
    let batches: BatchStats = batches.transpose()?.unwrap_or_default();
    let clients: Vec<ClientStats<Session>> = clients.into_iter().collect::<Result<_>>()?;
    let after = pool.stats();
    let merged = Merged::new(&clients);
    if let Some(interval) = opts.driver.aggregate_interval {
        write_aggregate_logs(opts, &clients, interval.max(1), wall_start)?;
    }
    if opts.driver.transaction_log {
        write_transaction_logs(opts, &clients, start, wall_start_us)?;
    }
    let measured = Measured {
        wall_start,
        elapsed,
        before: *before,
        after,
        samples,
        checkpoints,
    };
    let mut out = merged.outcome(db, opts, measured);
    counters.fill(db.engine, &after, &mut out.result);
    out.result.side_script = side;
    out.result.tables = Some(super::autovacuum::counts(
        db,
        start,
        &pages_start,
        av_stats.as_ref(),
    ));
    for sec in &mut out.result.series {
        sec.target_tps = opts.driver.target_rate(f64::from(sec.t) + 0.5);
        sec.batch_rows = batches
            .rows_by_second
            .get(sec.t as usize)
            .copied()
            .unwrap_or(0);
    }
    out.batches = batches;
    out.vacuums = vacuums;
    Ok(out)
}
