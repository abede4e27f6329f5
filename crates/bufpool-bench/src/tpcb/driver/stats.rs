//! The figures a `bufpool bench` run collects: per-second transaction statistics
//! ([`Slot`]), the latency histogram's shape, and buffers written per writer ([`Writes`])
//! read off the pool's I/O counters (also `compare`'s engines' slots). The clients and the
//! monitor fill them in; `outcome.rs` merges them.

use bufpool::stats::{IoContext, IoOp, IoStatsSnapshot, IoWriter};
use hdrhistogram::Histogram;

/// Per-second (or per-interval) statistics, in microseconds.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Slot {
    pub(crate) n: u64,
    pub(crate) sum: f64,
    pub(crate) sum2: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) lag_sum: f64,
    pub(crate) lag_sum2: f64,
    pub(crate) lag_min: f64,
    pub(crate) lag_max: f64,
    /// The longest execution, µs: latency less schedule lag (from when the transaction
    /// actually started to its end), of the committed transactions.
    pub(crate) exec_max: f64,
    pub(crate) skipped: u64,
    /// Failed transactions, of any kind (the summary's "failed").
    pub(crate) failed: u64,
    /// Those of them that failed on a deadlock (the aggregate log's deadlock_failures).
    pub(crate) deadlocks: u64,
    /// Transactions that ended here after more than one try, and the tries beyond the
    /// first (`--max-tries`; the aggregate log's retried and retries).
    pub(crate) retried: u64,
    pub(crate) retries: u64,
    /// The longest any transaction still running at the end of this second had been
    /// running by then (its latency so far, µs): a second in which the clients stall
    /// completes nothing, and `max` alone would record no latency for it.
    pub(crate) stalled: f64,
}

impl Slot {
    /// Counts a committed transaction.
    pub(crate) fn add(&mut self, lat_us: f64, lag_us: f64) {
        if self.n == 0 {
            self.min = lat_us;
            self.max = lat_us;
            self.lag_min = lag_us;
            self.lag_max = lag_us;
        }
        self.n += 1;
        self.sum += lat_us;
        self.sum2 += lat_us * lat_us;
        self.min = self.min.min(lat_us);
        self.max = self.max.max(lat_us);
        self.lag_sum += lag_us;
        self.lag_sum2 += lag_us * lag_us;
        self.lag_min = self.lag_min.min(lag_us);
        self.lag_max = self.lag_max.max(lag_us);
        self.exec_max = self.exec_max.max((lat_us - lag_us).max(0.0));
    }

    /// Adds another slot's figures to this one's.
    pub(crate) fn merge(&mut self, o: &Slot) {
        if o.n > 0 {
            if self.n == 0 {
                self.min = o.min;
                self.max = o.max;
                self.lag_min = o.lag_min;
                self.lag_max = o.lag_max;
            } else {
                self.min = self.min.min(o.min);
                self.max = self.max.max(o.max);
                self.lag_min = self.lag_min.min(o.lag_min);
                self.lag_max = self.lag_max.max(o.lag_max);
            }
        }
        self.n += o.n;
        self.sum += o.sum;
        self.sum2 += o.sum2;
        self.lag_sum += o.lag_sum;
        self.lag_sum2 += o.lag_sum2;
        self.exec_max = self.exec_max.max(o.exec_max);
        self.skipped += o.skipped;
        self.failed += o.failed;
        self.deadlocks += o.deadlocks;
        self.retried += o.retried;
        self.retries += o.retries;
        self.stalled = self.stalled.max(o.stalled);
    }

    /// The second's maximum latency, µs: of the transactions that ended in it, and of
    /// those still running at its end ([`Slot::stalled`]).
    pub(crate) fn max_with_stalled(&self) -> f64 {
        let ended = if self.n > 0 { self.max } else { 0.0 };
        ended.max(self.stalled)
    }

    /// Latency standard deviation, µs.
    pub(crate) fn stddev(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let mean = self.sum / self.n as f64;
        (self.sum2 / self.n as f64 - mean * mean).max(0.0).sqrt()
    }
}

/// Records, in the seconds of `secs` (counted from the run's start) that a transaction
/// scheduled at `from_us` and ended at `end_us` (µs since the start) spanned before the one
/// it ended in, how long it had been running at each one's end.
pub(crate) fn note_running(secs: &mut Vec<Slot>, from_us: f64, end_us: f64) {
    let first = (from_us.max(0.0) / 1e6) as usize;
    let last = (end_us.max(0.0) / 1e6) as usize;
    for sec in first..last {
        let age = (sec + 1) as f64 * 1e6 - from_us;
        let slot = slot_at(secs, sec);
        slot.stalled = slot.stalled.max(age);
    }
}

/// The slot at index `i`, growing `v` with empty (default) slots to reach it.
pub(crate) fn slot_at<T: Clone + Default>(v: &mut Vec<T>, i: usize) -> &mut T {
    if v.len() <= i {
        v.resize(i + 1, T::default());
    }
    &mut v[i]
}

/// An empty latency histogram, µs (1 µs to an hour, 3 significant digits).
pub(crate) fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("histogram bounds")
}

/// Buffers `w` has written, over all I/O contexts.
pub(crate) fn writes(s: &IoStatsSnapshot, w: IoWriter) -> u64 {
    [
        IoContext::Normal,
        IoContext::BulkRead,
        IoContext::BulkWrite,
        IoContext::Vacuum,
    ]
    .iter()
    .map(|&c| s.get(w, c, IoOp::Write))
    .sum()
}

/// Buffers written by each writer over some span of the run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Writes {
    pub(crate) backend: u64,
    pub(crate) bgwriter: u64,
    pub(crate) checkpointer: u64,
}

impl Writes {
    /// Buffers written between two snapshots of the pool's counters.
    pub(crate) fn between(before: &IoStatsSnapshot, after: &IoStatsSnapshot) -> Writes {
        Writes {
            backend: writes(after, IoWriter::Backend) - writes(before, IoWriter::Backend),
            bgwriter: writes(after, IoWriter::Bgwriter) - writes(before, IoWriter::Bgwriter),
            checkpointer: writes(after, IoWriter::Checkpointer)
                - writes(before, IoWriter::Checkpointer),
        }
    }

    /// Buffers written since `earlier`, both counted from the same point.
    pub(crate) fn since(self, earlier: Writes) -> Writes {
        Writes {
            backend: self.backend - earlier.backend,
            bgwriter: self.bgwriter - earlier.bgwriter,
            checkpointer: self.checkpointer - earlier.checkpointer,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transaction that runs from 0.5 s to 3.2 s stalls seconds 0, 1 and 2 (none of
    /// which completes it): each records how long it had been running at its end, and the
    /// second it ended in records its latency as before.
    #[test]
    fn a_stalled_second_records_the_running_transactions_age() {
        let mut secs: Vec<Slot> = Vec::new();
        let (from, end) = (0.5e6, 3.2e6);
        note_running(&mut secs, from, end);
        slot_at(&mut secs, 3).add(end - from, 0.0);
        let max: Vec<f64> = secs.iter().map(|s| s.max_with_stalled() / 1e6).collect();
        assert_eq!(max.len(), 4);
        for (got, want) in max.iter().zip([0.5, 1.5, 2.5, 2.7]) {
            assert!((got - want).abs() < 1e-9, "{max:?}");
        }
        assert_eq!(secs[1].n, 0, "a stalled second completes nothing");
        // A transaction inside one second touches no other.
        let mut one: Vec<Slot> = Vec::new();
        note_running(&mut one, 1.1e6, 1.9e6);
        assert!(one.iter().all(|s| s.stalled == 0.0));
        // Merged, the longer stall wins.
        let mut a = secs[2];
        a.merge(&Slot {
            stalled: 9e6,
            ..Slot::default()
        });
        assert_eq!(a.max_with_stalled(), 9e6);
    }

    /// A throttled second's largest latency splits into its largest schedule lag and its
    /// longest execution (latency less lag), which need not be the same transaction's;
    /// merging keeps the larger of each.
    #[test]
    fn a_second_keeps_its_largest_lag_and_longest_execution() {
        let mut s = Slot::default();
        s.add(900.0, 850.0); // late to start, quick once started
        s.add(400.0, 10.0); // on time, slow
        assert_eq!((s.max, s.lag_max, s.exec_max), (900.0, 850.0, 390.0));
        let mut other = Slot::default();
        other.add(700.0, 100.0);
        s.merge(&other);
        assert_eq!((s.max, s.lag_max, s.exec_max), (900.0, 850.0, 600.0));
        let secs = super::super::outcome::series(&[s], &[], 1.0);
        assert_eq!((secs[0].lag_max_ms, secs[0].exec_max_ms), (0.85, 0.6));
    }
}
