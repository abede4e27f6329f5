//! A YCSB run (`bufpool bench -b ycsb-a` .. `-b ycsb-f` on a YCSB database): the
//! driver's clients run the workload ([`Ycsb`]) beside its monitor, and the run ends in the
//! same result, summary, logs and JSON as a TPC-B run, with the operations counted
//! ([`YcsbOutcome`]). TPC-B's side work (batches, side scripts, VACUUM threads, the
//! acknowledgement log) has no meaning here and is refused before the run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{ensure, Result};

use super::ops::OpCounts;
use super::ops::YcsbOutcome;
use super::workload::{Core, Session, Ycsb};
use super::YcsbDb;
use crate::tpcb::builtins::Mode;
use crate::tpcb::driver::batch::BatchStats;
use crate::tpcb::driver::client::{Client, ClientStats};
use crate::tpcb::driver::counters::{checkpoint_spans, Counters};
use crate::tpcb::driver::logs::{write_aggregate_logs, write_transaction_logs};
use crate::tpcb::driver::monitor::{Live, Monitor};
use crate::tpcb::driver::outcome::{mark_targets, Measured, Merged, RunHead};
use crate::tpcb::driver::unix_micros;
use crate::tpcb::mix::{outcomes, ScriptTally};
use crate::tpcb::options::{BenchOptions, RunOutcome};
use crate::tpcb::vacuum::VacuumStats;

/// The YCSB workload of built-in script `mode` (None: not one of YCSB's).
pub fn core_of(mode: Mode) -> Option<Core> {
    Some(match mode {
        Mode::YcsbA => Core::A,
        Mode::YcsbB => Core::B,
        Mode::YcsbC => Core::C,
        Mode::YcsbD => Core::D,
        Mode::YcsbE => Core::E,
        Mode::YcsbF => Core::F,
        _ => return None,
    })
}

/// The built-in script of YCSB workload `core`.
pub fn mode_of(core: Core) -> Mode {
    match core {
        Core::A => Mode::YcsbA,
        Core::B => Mode::YcsbB,
        Core::C => Mode::YcsbC,
        Core::D => Mode::YcsbD,
        Core::E => Mode::YcsbE,
        Core::F => Mode::YcsbF,
    }
}

/// Runs `opts`' scripts (all YCSB's) on `db`.
pub fn run(db: &YcsbDb<'_>, opts: &BenchOptions) -> Result<RunOutcome> {
    let list = opts.script_list();
    let scripts = list
        .iter()
        .map(|s| {
            core_of(s.mode).map(|c| (c, s.weight)).ok_or_else(|| {
                anyhow::anyhow!(
                    "script {} is TPC-B's: this database holds YCSB's usertable (run -b ycsb-a .. ycsb-f)",
                    s.name
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    ensure!(
        list.len() == 1 || scripts.iter().any(|s| s.1 > 0),
        "total script weight must not be zero"
    );
    let workload = Ycsb::new(db, scripts, opts.zipf_theta)?;
    let pool = db.engine.pool();
    let counters = Counters::take(db.engine);
    let live = Live::default();
    let done = AtomicBool::new(false);
    let start = Instant::now();
    let wall_start_us = unix_micros();
    let names = db.relation_names();
    let (clients, samples) = std::thread::scope(|s| {
        let monitor = s.spawn(|| {
            Monitor::new(
                pool,
                &counters.pool,
                start,
                &opts.driver,
                &live,
                &done,
                &names,
            )
            .run()
        });
        let handles: Vec<_> = (0..opts.driver.clients.max(1))
            .map(|id| {
                let client = Client::new(id, &workload, &opts.driver, start, &live);
                s.spawn(move || client.run())
            })
            .collect();
        // Joined before the monitor is told, so a client's panic is re-raised only after
        // the monitor has been stopped (the scope waits for it).
        let clients: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        done.store(true, Ordering::Relaxed);
        let samples = monitor.join().expect("monitor thread");
        let clients: Vec<Result<ClientStats<Session>>> = clients
            .into_iter()
            .map(|c| c.unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        (clients, samples)
    });
    let elapsed = start.elapsed().as_secs_f64();
    if let Some(e) = db.engine.checkpointer_error() {
        anyhow::bail!("checkpoint during the run: {e}");
    }
    let clients: Vec<ClientStats<Session>> = clients.into_iter().collect::<Result<_>>()?;
    let wall_start = wall_start_us / 1_000_000;
    if let Some(interval) = opts.driver.aggregate_interval {
        write_aggregate_logs(&opts.driver, &clients, interval.max(1), wall_start)?;
    }
    if opts.driver.transaction_log {
        write_transaction_logs(&opts.driver, &clients, start, wall_start_us)?;
    }
    let mut counts = OpCounts::default();
    let mut tallies = vec![ScriptTally::default(); list.len()];
    for c in &clients {
        counts.merge(&c.session.counts);
        for (t, slot) in tallies.iter_mut().zip(&c.scripts) {
            t.total.merge(slot);
        }
    }
    let after = pool.stats();
    let checkpoints = checkpoint_spans(db.engine, start);
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
    counters.fill(db.engine, &after, &mut result);
    mark_targets(&mut result.series, &opts.driver, &BatchStats::default());
    let scripts = outcomes(&list, tallies, elapsed);
    let mut out = RunOutcome::new(
        result,
        figures,
        scripts,
        BatchStats::default(),
        VacuumStats::default(),
    );
    out.ycsb = Some(YcsbOutcome {
        records_start: db.records,
        records_end: workload.records(),
        counts,
    });
    Ok(out)
}
