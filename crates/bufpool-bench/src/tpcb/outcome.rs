//! A run's outcome: the clients' statistics merged and, with the monitor's write samples,
//! the checkpoint spans and the pool's counters, turned into the [`RunResult`] (`--json`,
//! `--out`, the report) and pgbench's summary figures (late, skipped, schedule lag).

use bufpool::{IoOp, IoStatsSnapshot};
use hdrhistogram::Histogram;

use super::driver::client::ClientStats;
use super::driver::monitor::Sample;
use super::driver::stats::{latency_histogram, Slot, Writes};
use super::driver::waits::ClientWaits;
use super::options::{BenchOptions, RunOutcome};
use super::workload::Session;
use super::Db;
use crate::report::model::{
    BufferCounts, CheckpointSpan, LatencySummary, PerInterval, RunResult, Second, WaitProfile,
};

/// The clients' statistics merged.
pub(super) struct Merged {
    /// Per second of the run, over all clients.
    secs: Vec<Slot>,
    /// Latencies of all committed transactions, µs.
    hist: Histogram<u64>,
    /// Committed transactions slower than `-L`.
    late: u64,
    /// The whole run (the per-second slots merged).
    total: Slot,
    /// What the transactions waited for.
    waits: WaitProfile,
    /// Per script of the run, over all clients.
    scripts: Vec<super::mix::ScriptTally>,
}

/// What a run measured besides the clients' statistics.
pub(super) struct Measured {
    /// When the run started, unix seconds.
    pub(super) wall_start: u64,
    /// How long the run took, s.
    pub(super) elapsed: f64,
    /// The pool's counters before and after the run.
    pub(super) before: IoStatsSnapshot,
    pub(super) after: IoStatsSnapshot,
    /// Buffers written in each whole second and the pool at its end (the monitor's
    /// samples).
    pub(super) samples: Vec<Sample>,
    pub(super) checkpoints: Vec<CheckpointSpan>,
}

impl Merged {
    /// Merges the clients' per-second statistics, histograms and late counts.
    pub(super) fn new(clients: &[ClientStats<Session>]) -> Merged {
        let nsec = clients.iter().map(|o| o.seconds.len()).max().unwrap_or(0);
        let mut secs = vec![Slot::default(); nsec];
        let mut hist = latency_histogram();
        let mut late = 0;
        let mut scripts = Vec::new();
        for o in clients {
            super::mix::merge(&mut scripts, &super::mix::tallies(&o.scripts, &o.session));
            for (i, s) in o.seconds.iter().enumerate() {
                secs[i].merge(s);
            }
            hist.add(&o.hist).expect("same bounds");
            late += o.late;
        }
        let mut total = Slot::default();
        for s in &secs {
            total.merge(s);
        }
        Merged {
            secs,
            hist,
            late,
            total,
            waits: ClientWaits::profile(clients.iter().map(|c| c.waits.clone())),
            scripts,
        }
    }

    /// The run's result and summary figures.
    pub(super) fn outcome(self, db: &Db<'_>, opts: &BenchOptions, m: Measured) -> RunOutcome {
        let total = &self.total;
        let series = series(&self.secs, &m.samples, m.elapsed);
        let scripts = super::mix::outcomes(&opts.script_list(), self.scripts, m.elapsed);
        let result = RunResult {
            label: opts.label.clone(),
            started_at: crate::report::model::rfc3339_utc(m.wall_start),
            mode: opts.mode_label(),
            scale: db.scale,
            clients: opts.driver.clients.max(1),
            threads: opts.driver.threads,
            duration_s: m.elapsed,
            transactions: total.n,
            failed: total.failed,
            tps: total.n as f64 / m.elapsed,
            latency_ms: latency_summary(total, &self.hist),
            per_interval: per_interval(&series),
            buffers: buffer_counts(&m.before, &m.after),
            checkpoints: m.checkpoints,
            config: opts.config.clone(),
            provenance: crate::provenance::Provenance::here(),
            series,
            latency_histogram: histogram_buckets(&self.hist),
            bgwriter: None,
            checkpointer: None,
            wal: None,
            slru: Vec::new(),
            side_script: None,
            tables: None,
            bytes_written: None,
            stat_io: Vec::new(),
            waits: Some(self.waits),
        };
        RunOutcome {
            result,
            late: self.late,
            skipped: total.skipped,
            retried: total.retried,
            retries: total.retries,
            deadlocks: total.deadlocks,
            // One script: its commands (several: each script's, in `scripts`).
            statements: match scripts.as_slice() {
                [one] => one.statements.clone(),
                _ => Vec::new(),
            },
            scripts,
            lag_avg_ms: avg_ms(total.lag_sum, total.n),
            lag_max_ms: total.lag_max / 1000.0,
            batches: Default::default(),
            vacuums: Default::default(),
            trace: None,
            prewarm: None,
        }
    }
}

/// Mean of `n` values summing to `sum` µs, in ms (0 without values).
fn avg_ms(sum: f64, n: u64) -> f64 {
    if n > 0 {
        sum / n as f64 / 1000.0
    } else {
        0.0
    }
}

/// The per-second series. Whole seconds only: the last, partial one would chart as a
/// drop (its transactions are in the totals).
pub(crate) fn series(secs: &[Slot], samples: &[Sample], elapsed: f64) -> Vec<Second> {
    secs.iter()
        .take(elapsed.floor() as usize)
        .enumerate()
        .map(|(t, s)| {
            let sample = samples.get(t).cloned().unwrap_or_default();
            let w = sample.writes;
            Second {
                t: t as u32,
                transactions: s.n,
                tps: s.n as f64,
                lat_avg_ms: avg_ms(s.sum, s.n),
                lat_max_ms: s.max_with_stalled() / 1000.0,
                lat_stddev_ms: s.stddev() / 1000.0,
                written_backend: w.backend,
                written_bgwriter: w.bgwriter,
                written_checkpointer: w.checkpointer,
                target_tps: None,
                batch_rows: 0,
                pool: sample.pool,
            }
        })
        .collect()
}

/// Percentiles over the series' seconds.
pub(crate) fn per_interval(series: &[Second]) -> PerInterval {
    let mut tps_sorted: Vec<f64> = series.iter().map(|s| s.tps).collect();
    tps_sorted.sort_by(|a, b| a.partial_cmp(b).expect("not NaN"));
    let mut max_sorted: Vec<f64> = series.iter().map(|s| s.lat_max_ms).collect();
    max_sorted.sort_by(|a, b| a.partial_cmp(b).expect("not NaN"));
    PerInterval {
        tps_min: tps_sorted.first().copied().unwrap_or(0.0),
        tps_p5: pct(&tps_sorted, 0.05),
        tps_p50: pct(&tps_sorted, 0.50),
        max_latency_p50: pct(&max_sorted, 0.50),
        max_latency_p99: pct(&max_sorted, 0.99),
    }
}

/// The `p` quantile of sorted `v` (nearest rank; 0 if empty).
fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// The whole run's latency figures, ms.
pub(crate) fn latency_summary(total: &Slot, hist: &Histogram<u64>) -> LatencySummary {
    LatencySummary {
        avg: avg_ms(total.sum, total.n),
        stddev: total.stddev() / 1000.0,
        p50: hist.value_at_quantile(0.50) as f64 / 1000.0,
        p95: hist.value_at_quantile(0.95) as f64 / 1000.0,
        p99: hist.value_at_quantile(0.99) as f64 / 1000.0,
        max: hist.max() as f64 / 1000.0,
        p999: hist.value_at_quantile(0.999) as f64 / 1000.0,
        over_10ms: over(hist, 10_000),
        over_50ms: over(hist, 50_000),
        over_100ms: over(hist, 100_000),
    }
}

/// Transactions that took longer than `us` microseconds (to the histogram's precision).
fn over(hist: &Histogram<u64>, us: u64) -> u64 {
    if hist.max() <= us {
        return 0;
    }
    hist.count_between(us + 1, hist.max())
}

/// The latency histogram's non-empty log buckets: (upper bound ms, count).
pub(crate) fn histogram_buckets(hist: &Histogram<u64>) -> Vec<(f64, u64)> {
    hist.iter_log(1, 1.25)
        .filter(|v| v.count_since_last_iteration() > 0)
        .map(|v| {
            (
                v.value_iterated_to() as f64 / 1000.0,
                v.count_since_last_iteration(),
            )
        })
        .collect()
}

/// The pool's buffer traffic between two snapshots of its counters.
fn buffer_counts(before: &IoStatsSnapshot, after: &IoStatsSnapshot) -> BufferCounts {
    let written = Writes::between(before, after);
    BufferCounts {
        hits: after.total(IoOp::Hit) - before.total(IoOp::Hit),
        reads: after.total(IoOp::Read) - before.total(IoOp::Read),
        written_by_backend: written.backend,
        written_by_bgwriter: written.bgwriter,
        written_by_checkpointer: written.checkpointer,
        allocated: (after.total(IoOp::Read) + after.total(IoOp::Extend))
            - (before.total(IoOp::Read) + before.total(IoOp::Extend)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: the tail counts count transactions strictly above each threshold, and
    /// p99.9 comes from the same histogram.
    #[test]
    fn tail_counts_count_what_is_above_each_threshold() {
        let mut h = latency_histogram();
        for us in [500, 5_000, 9_900, 10_500, 20_000, 60_000, 200_000] {
            h.record(us).unwrap();
        }
        let l = latency_summary(&Slot::default(), &h);
        assert_eq!((l.over_10ms, l.over_50ms, l.over_100ms), (4, 2, 1));
        assert!((199.0..=201.0).contains(&l.p999), "{}", l.p999);
        let mut quiet = latency_histogram();
        quiet.record(9_000).unwrap();
        let q = latency_summary(&Slot::default(), &quiet);
        assert_eq!((q.over_10ms, q.over_50ms, q.over_100ms), (0, 0, 0));
    }
}
