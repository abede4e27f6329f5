//! A run's outcome: the clients' statistics merged and, with the monitor's write samples,
//! the checkpoint spans and the pool's counters, turned into the [`RunResult`] (`--json`,
//! `--out`, the report; the workload names it, [`RunHead`]) and pgbench's summary figures
//! ([`Figures`]: late, skipped, retried, schedule lag); the per-second series' targets
//! (`-R`, `--rate-profile`) and batch rows. Also what `compare` builds its engines'
//! results with: the series, the percentiles, the latency summary and histogram.

use bufpool::{IoOp, IoStatsSnapshot};
use hdrhistogram::Histogram;

use std::collections::BTreeMap;

use super::batch::BatchStats;
use super::client::ClientStats;
use super::monitor::Sample;
use super::stats::{latency_histogram, Slot, Writes};
use super::waits::ClientWaits;
use super::DriverOptions;
use crate::report::model::{
    BufferCounts, CheckpointSpan, LatencySummary, PerInterval, RunResult, Second, WaitProfile,
};

/// The clients' statistics merged.
pub(crate) struct Merged {
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
}

/// What a run measured besides the clients' statistics.
pub(crate) struct Measured {
    /// When the run started, unix seconds.
    pub(crate) wall_start: u64,
    /// How long the run took, s.
    pub(crate) elapsed: f64,
    /// The pool's counters before and after the run.
    pub(crate) before: IoStatsSnapshot,
    pub(crate) after: IoStatsSnapshot,
    /// Buffers written in each whole second and the pool at its end (the monitor's
    /// samples).
    pub(crate) samples: Vec<Sample>,
    pub(crate) checkpoints: Vec<CheckpointSpan>,
}

impl Merged {
    /// Merges the clients' per-second statistics, histograms and late counts.
    pub(crate) fn new<S>(clients: &[ClientStats<S>]) -> Merged {
        let nsec = clients.iter().map(|o| o.seconds.len()).max().unwrap_or(0);
        let mut secs = vec![Slot::default(); nsec];
        let mut hist = latency_histogram();
        let mut late = 0;
        for o in clients {
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
        }
    }

    /// The run's result, named by `head`, and pgbench's summary figures; the engine's
    /// counters, the side work and the tables are the caller's to fill in.
    pub(crate) fn outcome(
        self,
        head: RunHead,
        opts: &DriverOptions,
        m: Measured,
    ) -> (RunResult, Figures) {
        let total = &self.total;
        let series = series(&self.secs, &m.samples, m.elapsed);
        let result = RunResult {
            label: head.label,
            started_at: crate::report::model::rfc3339_utc(m.wall_start),
            mode: head.mode,
            scale: head.scale,
            clients: opts.clients.max(1),
            threads: opts.threads,
            duration_s: m.elapsed,
            transactions: total.n,
            failed: total.failed,
            tps: total.n as f64 / m.elapsed,
            latency_ms: latency_summary(total, &self.hist),
            per_interval: per_interval(&series),
            buffers: buffer_counts(&m.before, &m.after),
            checkpoints: m.checkpoints,
            config: head.config,
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
            resizes: Vec::new(),
            stat_io: Vec::new(),
            waits: Some(self.waits),
            memory: None,
        };
        let figures = Figures {
            late: self.late,
            skipped: total.skipped,
            retried: total.retried,
            retries: total.retries,
            deadlocks: total.deadlocks,
            lag_avg_ms: avg_ms(total.lag_sum, total.n),
            lag_max_ms: total.lag_max / 1000.0,
        };
        (result, figures)
    }
}

/// What the workload says of its run in the result: its label, what it ran (the scripts'
/// names), its scale and the knobs in effect.
pub(crate) struct RunHead {
    pub(crate) label: String,
    pub(crate) mode: String,
    pub(crate) scale: u32,
    pub(crate) config: BTreeMap<String, String>,
}

/// pgbench's summary figures that the result does not hold.
pub(crate) struct Figures {
    /// Transactions slower than `-L` (completed, counted in the result).
    pub(crate) late: u64,
    /// Transactions skipped because they could not start within `-L` (with `-R`).
    pub(crate) skipped: u64,
    /// Transactions that took more than one try (`--max-tries`), and the tries beyond
    /// the first, over all of them.
    pub(crate) retried: u64,
    pub(crate) retries: u64,
    /// Failed transactions that failed on a deadlock.
    pub(crate) deadlocks: u64,
    /// Lag behind the `-R` schedule, ms: the mean and the longest.
    pub(crate) lag_avg_ms: f64,
    pub(crate) lag_max_ms: f64,
}

/// Marks each second of `series` with the target rate of its middle (`-R`,
/// `--rate-profile`) and the rows the batches committed in it.
pub(crate) fn mark_targets(series: &mut [Second], opts: &DriverOptions, batches: &BatchStats) {
    for sec in series {
        sec.target_tps = opts.target_rate(f64::from(sec.t) + 0.5);
        sec.batch_rows = batches
            .rows_by_second
            .get(sec.t as usize)
            .copied()
            .unwrap_or(0);
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
                lag_max_ms: s.lag_max / 1000.0,
                exec_max_ms: s.exec_max / 1000.0,
                written_backend: w.backend,
                written_bgwriter: w.bgwriter,
                written_checkpointer: w.checkpointer,
                target_tps: None,
                batch_rows: 0,
                rss_bytes: sample.rss,
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
