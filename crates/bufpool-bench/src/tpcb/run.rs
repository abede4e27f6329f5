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
use super::client::{Client, ClientStats};
use super::monitor::{Live, Monitor};
use super::options::{BenchOptions, RunOutcome};
use super::outcome::{Measured, Merged};
use super::Db;
use crate::report::model::{CheckpointSpan, CheckpointerCounts};

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
    let picks = super::mix::picks(db, opts.script_list(), opts.zipf_theta)?;
    let pool = db.engine.pool();
    let before = pool.stats();
    let bgw_before = pool.bgwriter_stats();
    let clog_before = db.engine.txns().clog().clog_stats();
    let subtrans_before = db.engine.txns().subtrans().stats();
    let moff_before = db.engine.txns().multis().offset_stats();
    let mmem_before = db.engine.txns().multis().member_stats();
    let ckpt_before = db.engine.checkpointer_stats();
    let wal_before = db.engine.wal().stats();
    let wal_io_before = db.engine.wal_io_stats();
    let devices = super::written::Devices::start(pool.smgr());
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
            Monitor::new(pool, &before, start, opts.progress_s, &live, &done, &names)
                .with_timestamps(opts.progress_timestamp)
                .run()
        });
        let done_ref = &done;
        let batches = opts
            .batch
            .map(|b| s.spawn(move || BatchRunner::new(db, b, opts.seed, start, done_ref).run()));
        let side = opts.side.map(|(script, wait)| {
            s.spawn(move || super::side::run(db, script, wait, done_ref, &opts.stop))
        });
        let vacuums = opts
            .vacuum_every_s
            .map(|every| s.spawn(move || super::vacuum::run(db, every, start, done_ref)));
        let launcher = av
            .as_ref()
            .map(|a| s.spawn(|| super::autovacuum::run(db, a)));
        let mut handles = Vec::new();
        for id in 0..opts.clients.max(1) {
            let client = Client::new(id, db, opts, start, &live, &picks);
            handles.push(s.spawn(move || client.run()));
        }
        let clients: Vec<Result<ClientStats>> = handles
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
    let checkpoints = checkpoint_spans(db, start);
    let batches: BatchStats = batches.transpose()?.unwrap_or_default();
    let clients: Vec<ClientStats> = clients.into_iter().collect::<Result<_>>()?;
    let after = pool.stats();
    let merged = Merged::new(&clients);
    if let Some(interval) = opts.aggregate_interval {
        write_aggregate_logs(opts, &clients, interval.max(1), wall_start)?;
    }
    if opts.transaction_log {
        write_transaction_logs(opts, &clients, start, wall_start_us)?;
    }
    let measured = Measured {
        wall_start,
        elapsed,
        before,
        after,
        samples,
        checkpoints,
    };
    let mut out = merged.outcome(db, opts, measured);
    out.result.bgwriter = Some(bgwriter_counts(pool, &bgw_before));
    out.result.checkpointer = Some(checkpointer_counts(db, &ckpt_before));
    out.result.stat_io = stat_io_over(db, &after.since(&before), &wal_io_before);
    out.result.wal = Some(wal_counts(db, &wal_before, out.result.transactions));
    let clog_after = db.engine.txns().clog().clog_stats();
    let subtrans_after = db.engine.txns().subtrans().stats();
    out.result.slru = vec![
        crate::report::model::SlruCounts::clog_between(&clog_before, &clog_after),
        crate::report::model::SlruCounts::between(
            "subtransaction",
            &subtrans_before,
            &subtrans_after,
        ),
        crate::report::model::SlruCounts::between(
            "multixact_offset",
            &moff_before,
            &db.engine.txns().multis().offset_stats(),
        ),
        crate::report::model::SlruCounts::between(
            "multixact_member",
            &mmem_before,
            &db.engine.txns().multis().member_stats(),
        ),
    ];
    let wal = out.result.wal.as_ref().expect("set above");
    out.result.bytes_written = Some(super::written::bytes_written(
        pool.page_size(),
        (&before, &after),
        wal,
        &out.result.slru,
        out.result.transactions,
        &devices,
    ));
    out.result.side_script = side;
    out.result.tables = Some(super::autovacuum::counts(
        db,
        start,
        &pages_start,
        av_stats.as_ref(),
    ));
    for sec in &mut out.result.series {
        sec.target_tps = opts.target_rate(f64::from(sec.t) + 0.5);
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

/// The checkpoints the engine finished since `start`, in seconds from it.
fn checkpoint_spans(db: &Db<'_>, start: Instant) -> Vec<CheckpointSpan> {
    let at = |t: Instant| t.saturating_duration_since(start).as_secs_f64();
    db.engine
        .checkpoint_history()
        .iter()
        .filter(|c| c.started >= start)
        .map(|c| CheckpointSpan {
            start_s: at(c.started),
            end_s: at(c.ended),
            buffers_written: c.buffers_written,
            reason: c.reason.name().to_string(),
            write_s: c.write_time.as_secs_f64(),
            sync_s: c.sync_time.as_secs_f64(),
            longest_sync_s: c.longest_sync.as_secs_f64(),
            sync_files: c.sync_files as u64,
            write_calls: c.write_calls,
        })
        .collect()
}

/// The checkpointer's counters between `before` and now.
fn checkpointer_counts(
    db: &Db<'_>,
    before: &bufpool::engine::CheckpointerStats,
) -> CheckpointerCounts {
    let a = db.engine.checkpointer_stats();
    CheckpointerCounts {
        num_timed: a.num_timed - before.num_timed,
        num_requested: a.num_requested - before.num_requested,
        num_done: a.num_done - before.num_done,
        write_time_ms: a.write_time_ms - before.write_time_ms,
        sync_time_ms: a.sync_time_ms - before.sync_time_ms,
        buffers_written: a.buffers_written - before.buffers_written,
        slru_written: a.slru_written - before.slru_written,
    }
}

/// pg_stat_io's rows over the run: the pool's counters `pool` (already a difference) and
/// the log's since `wal_before`.
fn stat_io_over(
    db: &Db<'_>,
    pool: &bufpool::IoStatsSnapshot,
    wal_before: &bufpool::stats::WalIoSnapshot,
) -> Vec<crate::report::model::StatIo> {
    let wal = db.engine.wal_io_stats().since(wal_before);
    let block = db.engine.pool().page_size() as u64;
    bufpool::stats::stat_io_rows(pool, &wal, block)
        .iter()
        .map(crate::report::model::StatIo::from)
        .collect()
}

/// The log's counters between `before` and now; `transactions` of the run per sync.
fn wal_counts(
    db: &Db<'_>,
    before: &bufpool::wal::WalStats,
    transactions: u64,
) -> crate::report::model::WalCounts {
    let a = db.engine.wal().stats();
    let syncs = a.syncs - before.syncs;
    crate::report::model::WalCounts {
        records: a.records - before.records,
        bytes: a.bytes - before.bytes,
        syncs,
        flush_free: a.flush_free - before.flush_free,
        forced_by_pages: a.forced_by_pages - before.forced_by_pages,
        segments_created_inline: a.segments_created_inline - before.segments_created_inline,
        commit_delays: a.commit_delays - before.commit_delays,
        buffers_full: a.buffers_full - before.buffers_full,
        writer_kicks: a.writer_kicks - before.writer_kicks,
        top_ups: a.top_ups - before.top_ups,
        overlapped_syncs: a.overlapped_syncs - before.overlapped_syncs,
        fpi: a.images - before.images,
        fpi_bytes: a.image_bytes - before.image_bytes,
        write_bytes: a.write_bytes - before.write_bytes,
        pad_bytes: a.pad_bytes - before.pad_bytes,
        commits_per_sync: transactions as f64 / syncs.max(1) as f64,
        sync_us: (a.sync_ns - before.sync_ns) as f64 / 1e3 / syncs.max(1) as f64,
        sync_gap_us: (a.sync_gap_ns - before.sync_gap_ns) as f64
            / 1e3
            / (a.sync_gaps - before.sync_gaps).max(1) as f64,
    }
}

/// The bgwriter's counters between `before` and now.
fn bgwriter_counts(
    pool: &bufpool::BufferPool,
    before: &bufpool::buffer::BgwriterStats,
) -> crate::report::model::BgwriterCounts {
    let a = pool.bgwriter_stats();
    let rounds = a.rounds - before.rounds;
    let time = a.round_time_total.saturating_sub(before.round_time_total);
    crate::report::model::BgwriterCounts {
        buffers_alloc: a.buffers_alloc - before.buffers_alloc,
        buffers_clean: a.buffers_clean - before.buffers_clean,
        maxwritten_clean: a.maxwritten_clean - before.maxwritten_clean,
        buffers_backend: a.buffers_backend - before.buffers_backend,
        rounds,
        hibernations: a.hibernations - before.hibernations,
        wasted_writes: a.buffers_redirtied - before.buffers_redirtied,
        dirty_victims_unreached: a.dirty_victims_unreached - before.dirty_victims_unreached,
        dirty_victims_passed: a.dirty_victims_passed - before.dirty_victims_passed,
        rounds_lapped: a.rounds_lapped - before.rounds_lapped,
        buffers_skipped: a.buffers_skipped - before.buffers_skipped,
        hints_repeated_skipped: a.hints_repeated_skipped - before.hints_repeated_skipped,
        rounds_paced: a.rounds_paced - before.rounds_paced,
        round_us_mean: if rounds > 0 {
            time.as_secs_f64() * 1e6 / rounds as f64
        } else {
            0.0
        },
        round_us_max: a.round_time_max.as_secs_f64() * 1e6,
        strategy: pool.bgwriter_options().strategy.name().to_string(),
        io_method: pool.bgwriter_io_in_effect().to_string(),
        lru_maxpages: pool.bgwriter_maxpages(),
    }
}
