//! The scheduler's floor under a per-second maximum latency: `threads` threads that only
//! read the clock, each second's longest gap between two reads of any of them. With more
//! busy threads than CPUs that gap is a wait for a CPU (a time slice of another thread),
//! which no engine whose clients run their transactions on their own threads can avoid.
//!
//! And its floor under a throttled run's (`-R`): `threads` threads that each wait for the
//! next moment of a Poisson schedule of their share of the rate, as a paced client waits
//! for its next transaction, and do nothing then; each second's largest lateness on
//! waking. A throttled client's latency counts from the schedule, so this wake-up lag is
//! in every engine's per-second maximum latency at that rate (pgbench waits the same way).

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::tpcb::driver::pace::sleep_until;

/// Runs `threads` busy threads for `duration`; returns each whole second's longest gap
/// between two clock reads of one thread, ms.
pub(crate) fn runqueue_per_second_max(threads: usize, duration: Duration) -> Vec<f64> {
    per_second_max(threads, duration, |start, secs, _| busy(start, secs))
}

/// Runs `threads` threads of `each(start, seconds, thread index)` for `duration`, each
/// giving its figure per whole second; returns each second's largest over the threads.
fn per_second_max(
    threads: usize,
    duration: Duration,
    each: impl Fn(Instant, usize, u64) -> Vec<f64> + Sync,
) -> Vec<f64> {
    let secs = duration.as_secs() as usize;
    let start = Instant::now();
    let each = &each;
    let per_thread: Vec<Vec<f64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1) as u64)
            .map(|i| s.spawn(move || each(start, secs, i)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a measuring thread does not panic"))
            .collect()
    });
    (0..secs)
        .map(|i| per_thread.iter().map(|v| v[i]).fold(0.0, f64::max))
        .collect()
}

/// One thread's loop: the longest gap of each second since `start`, ms.
fn busy(start: Instant, secs: usize) -> Vec<f64> {
    let mut maxes = vec![0f64; secs];
    let mut last = Instant::now();
    loop {
        let now = Instant::now();
        let i = now.duration_since(start).as_secs() as usize;
        if i >= secs {
            return maxes;
        }
        let gap = now.duration_since(last).as_secs_f64() * 1e3;
        maxes[i] = maxes[i].max(gap);
        last = now;
    }
}

/// Runs `threads` threads for `duration`, each waking on a Poisson schedule of its share
/// of `rate` (per second, over all threads); returns each whole second's largest lateness
/// on waking, ms.
pub(crate) fn wakeup_lag_per_second_max(threads: usize, rate: f64, duration: Duration) -> Vec<f64> {
    let share = rate.max(1.0) / threads.max(1) as f64;
    per_second_max(threads, duration, |start, secs, i| {
        paced(start, secs, share, i)
    })
}

/// One paced thread: the largest lateness of each second since `start`, ms.
fn paced(start: Instant, secs: usize, rate: f64, seed: u64) -> Vec<f64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut maxes = vec![0f64; secs];
    let mut scheduled = start;
    loop {
        let u: f64 = rng.random_range(f64::EPSILON..1.0);
        scheduled += Duration::from_secs_f64(-u.ln() / rate);
        let i = scheduled.duration_since(start).as_secs() as usize;
        if i >= secs {
            return maxes;
        }
        sleep_until(scheduled, || false);
        let late = Instant::now().duration_since(scheduled).as_secs_f64() * 1e3;
        maxes[i] = maxes[i].max(late);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_figure_per_whole_second_and_none_negative() {
        let v = runqueue_per_second_max(2, Duration::from_secs(1));
        assert_eq!(v.len(), 1);
        assert!(v[0] > 0.0 && v[0].is_finite(), "{v:?}");
    }

    /// A paced thread wakes after its moment, never before: one non-negative, finite
    /// lateness per whole second, and at 1,000 wake-ups a second some lateness at all.
    #[test]
    fn wakeup_lag_is_one_figure_per_second_and_never_early() {
        let v = wakeup_lag_per_second_max(2, 1000.0, Duration::from_secs(1));
        assert_eq!(v.len(), 1);
        assert!(v[0] > 0.0 && v[0].is_finite(), "{v:?}");
    }
}
