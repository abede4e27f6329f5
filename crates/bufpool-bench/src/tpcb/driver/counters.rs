//! The engine's counters over a run: read before the first transaction ([`Counters`]),
//! their differences after the last into the run's result (pg_stat_bgwriter,
//! pg_stat_checkpointer, pg_stat_io, pg_stat_wal, pg_stat_slru, bytes written by source and
//! by device), and the checkpoints the engine finished meanwhile. Engine-wide: it knows no
//! table.

use std::time::Instant;

use bufpool::buffer::BgwriterStats;
use bufpool::engine::CheckpointerStats;
use bufpool::slru::SlruStats;
use bufpool::stats::WalIoSnapshot;
use bufpool::txn::clog::ClogStats;
use bufpool::wal::WalStats;
use bufpool::{BufferPool, Engine, IoStatsSnapshot};

use super::written::{bytes_written, Devices};
use crate::report::model::{
    BgwriterCounts, CheckpointSpan, CheckpointerCounts, MemoryUse, RunResult, Second, SlruCounts,
    StatIo, WalCounts,
};

/// The engine's counters when a run started, read in this order (the devices last: each
/// is synced first).
pub(crate) struct Counters {
    /// The pool's I/O counters (pg_stat_io's, the writes per writer).
    pub(crate) pool: IoStatsSnapshot,
    bgwriter: BgwriterStats,
    clog: ClogStats,
    subtrans: SlruStats,
    multixact_offset: SlruStats,
    multixact_member: SlruStats,
    checkpointer: CheckpointerStats,
    wal: WalStats,
    wal_io: WalIoSnapshot,
    devices: Devices,
}

impl Counters {
    /// Reads `engine`'s counters now.
    pub(crate) fn take(engine: &Engine) -> Counters {
        let pool = engine.pool();
        Counters {
            pool: pool.stats(),
            bgwriter: pool.bgwriter_stats(),
            clog: engine.txns().clog().clog_stats(),
            subtrans: engine.txns().subtrans().stats(),
            multixact_offset: engine.txns().multis().offset_stats(),
            multixact_member: engine.txns().multis().member_stats(),
            checkpointer: engine.checkpointer_stats(),
            wal: engine.wal().stats(),
            wal_io: engine.wal_io_stats(),
            devices: Devices::start(pool.smgr()),
        }
    }

    /// Fills in `result`'s engine counters over the run: each the difference between now
    /// and [`Counters::take`] (the pool's I/O counters read at the run's end, `after`);
    /// `result.transactions` must be set (the log's commits per sync, bytes per
    /// transaction).
    pub(crate) fn fill(&self, engine: &Engine, after: &IoStatsSnapshot, result: &mut RunResult) {
        let pool = engine.pool();
        result.bgwriter = Some(bgwriter_counts(pool, &self.bgwriter));
        result.checkpointer = Some(checkpointer_counts(engine, &self.checkpointer));
        result.stat_io = stat_io_over(engine, &after.since(&self.pool), &self.wal_io);
        let wal = wal_counts(engine, &self.wal, result.transactions);
        let clog_after = engine.txns().clog().clog_stats();
        let subtrans_after = engine.txns().subtrans().stats();
        result.slru = vec![
            SlruCounts::clog_between(&self.clog, &clog_after),
            SlruCounts::between("subtransaction", &self.subtrans, &subtrans_after),
            SlruCounts::between(
                "multixact_offset",
                &self.multixact_offset,
                &engine.txns().multis().offset_stats(),
            ),
            SlruCounts::between(
                "multixact_member",
                &self.multixact_member,
                &engine.txns().multis().member_stats(),
            ),
        ];
        result.bytes_written = Some(bytes_written(
            pool.page_size(),
            (&self.pool, after),
            &wal,
            &result.slru,
            result.transactions,
            &self.devices,
        ));
        result.wal = Some(wal);
    }
}

/// The checkpoints the engine finished since `start`, in seconds from it.
pub(crate) fn checkpoint_spans(engine: &Engine, start: Instant) -> Vec<CheckpointSpan> {
    let at = |t: Instant| t.saturating_duration_since(start).as_secs_f64();
    engine
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
fn checkpointer_counts(engine: &Engine, before: &CheckpointerStats) -> CheckpointerCounts {
    let a = engine.checkpointer_stats();
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
    engine: &Engine,
    pool: &IoStatsSnapshot,
    wal_before: &WalIoSnapshot,
) -> Vec<StatIo> {
    let wal = engine.wal_io_stats().since(wal_before);
    let block = engine.pool().page_size() as u64;
    bufpool::stats::stat_io_rows(pool, &wal, block)
        .iter()
        .map(StatIo::from)
        .collect()
}

/// The log's counters between `before` and now; `transactions` of the run per sync.
fn wal_counts(engine: &Engine, before: &WalStats, transactions: u64) -> WalCounts {
    let a = engine.wal().stats();
    let syncs = a.syncs - before.syncs;
    WalCounts {
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
fn bgwriter_counts(pool: &BufferPool, before: &BgwriterStats) -> BgwriterCounts {
    let a = pool.bgwriter_stats();
    let rounds = a.rounds - before.rounds;
    let time = a.round_time_total.saturating_sub(before.round_time_total);
    BgwriterCounts {
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

/// The fixed part of a run's memory budget: everything the process holds beside the
/// pool's frames and bookkeeping and the log's buffers (the code and its libraries, the
/// threads' stacks as far as they were touched, the allocator's arenas, the bench's own
/// per-second series and histograms). An allowance, set from the resident memory of runs
/// on a pool too small to matter (see ARCHITECTURE, "What a pool holds in memory").
pub(crate) const FIXED_MEMORY_BYTES: u64 = 16 << 20;

/// The run's resident memory against its budget, from the per-second samples of `series`
/// and one now, at its end (None where none can be read): `shared_buffers` (`engine`'s frames), `wal_buffers_bytes`,
/// the pool's bookkeeping and [`FIXED_MEMORY_BYTES`].
pub(crate) fn memory_use(
    engine: &Engine,
    wal_buffers_bytes: u64,
    series: &[Second],
) -> Option<MemoryUse> {
    let now = super::monitor::rss_bytes();
    let peak = series.iter().filter_map(|s| s.rss_bytes).chain(now).max()?;
    let m = engine.pool().memory();
    let budget = m.frames + wal_buffers_bytes + m.overhead() + FIXED_MEMORY_BYTES;
    Some(MemoryUse {
        peak_rss_bytes: peak,
        shared_buffers_bytes: m.frames,
        wal_buffers_bytes,
        pool_overhead_bytes: m.overhead(),
        fixed_bytes: FIXED_MEMORY_BYTES,
        budget_bytes: budget,
        rss_over_budget: peak as f64 / budget as f64,
    })
}
