//! A whole run of a workload of its own tables (YCSB's, TPC-C's): the driver's clients
//! run it beside the monitor, and the run ends in the same result, summary, logs and JSON
//! as a TPC-B run. The workload's own figures come from its clients' sessions, handed
//! back with the outcome. TPC-B's side work (batches, side scripts, VACUUM threads, the
//! acknowledgement log) is not run here (`bench` refuses it for these workloads).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::Result;
use bufpool::{Engine, RelFileId};

use super::driver::batch::BatchStats;
use super::driver::client::{Client, ClientStats};
use super::driver::counters::{checkpoint_spans, Counters};
use super::driver::logs::{write_aggregate_logs, write_transaction_logs};
use super::driver::monitor::{Live, Monitor};
use super::driver::outcome::{mark_targets, Measured, Merged, RunHead};
use super::driver::{unix_micros, Workload};
use super::mix::{outcomes, ScriptTally};
use super::options::{BenchOptions, RunOutcome};
use super::vacuum::VacuumStats;

/// Runs `workload` on `engine` as `opts` says; `names` names the relations for the pool
/// heatmap. The outcome (its `ycsb`/`tpcc` parts left for the caller) and each client's
/// session.
pub fn run_workload<W: Workload>(
    engine: &Engine,
    workload: &W,
    opts: &BenchOptions,
    names: &HashMap<RelFileId, String>,
) -> Result<(RunOutcome, Vec<W::ClientState>)> {
    let list = opts.script_list();
    let pool = engine.pool();
    let counters = Counters::take(engine);
    let live = Live::default();
    let done = AtomicBool::new(false);
    let start = Instant::now();
    let wall_start_us = unix_micros();
    let (clients, samples) = std::thread::scope(|s| {
        let monitor = s.spawn(|| {
            Monitor::new(
                pool,
                &counters.pool,
                start,
                &opts.driver,
                &live,
                &done,
                names,
            )
            .run()
        });
        let handles: Vec<_> = (0..opts.driver.clients.max(1))
            .map(|id| {
                let client = Client::new(id, workload, &opts.driver, start, &live);
                s.spawn(move || client.run())
            })
            .collect();
        // Joined before the monitor is told, so a client's panic is re-raised only after
        // the monitor has been stopped (the scope waits for it).
        let clients: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        done.store(true, Ordering::Relaxed);
        let samples = monitor.join().expect("monitor thread");
        let clients: Vec<Result<ClientStats<W::ClientState>>> = clients
            .into_iter()
            .map(|c| c.unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        (clients, samples)
    });
    let elapsed = start.elapsed().as_secs_f64();
    if let Some(e) = engine.checkpointer_error() {
        anyhow::bail!("checkpoint during the run: {e}");
    }
    let clients: Vec<ClientStats<W::ClientState>> = clients.into_iter().collect::<Result<_>>()?;
    let wall_start = wall_start_us / 1_000_000;
    if let Some(interval) = opts.driver.aggregate_interval {
        write_aggregate_logs(&opts.driver, &clients, interval.max(1), wall_start)?;
    }
    if opts.driver.transaction_log {
        write_transaction_logs(&opts.driver, &clients, start, wall_start_us)?;
    }
    let mut tallies = vec![ScriptTally::default(); list.len()];
    for c in &clients {
        for (t, slot) in tallies.iter_mut().zip(&c.scripts) {
            t.total.merge(slot);
        }
    }
    let after = pool.stats();
    let checkpoints = checkpoint_spans(engine, start);
    let measured = Measured {
        wall_start,
        elapsed,
        before: counters.pool,
        after,
        samples,
        checkpoints,
    };
    let head = RunHead {
        label: opts.label.clone(),
        mode: opts.mode_label(),
        scale: 0,
        config: opts.config.clone(),
    };
    let (mut result, figures) = Merged::new(&clients).outcome(head, &opts.driver, measured);
    counters.fill(engine, &after, &mut result);
    mark_targets(&mut result.series, &opts.driver, &BatchStats::default());
    let scripts = outcomes(&list, tallies, elapsed);
    let out = RunOutcome::new(
        result,
        figures,
        scripts,
        BatchStats::default(),
        VacuumStats::default(),
    );
    Ok((out, clients.into_iter().map(|c| c.session).collect()))
}
