//! The scheduler's floor under a per-second maximum latency: `threads` threads that only
//! read the clock, each second's longest gap between two reads of any of them. With more
//! busy threads than CPUs that gap is a wait for a CPU (a time slice of another thread),
//! which no engine whose clients run their transactions on their own threads can avoid.

use std::time::{Duration, Instant};

/// Runs `threads` busy threads for `duration`; returns each whole second's longest gap
/// between two clock reads of one thread, ms.
pub(crate) fn runqueue_per_second_max(threads: usize, duration: Duration) -> Vec<f64> {
    let secs = duration.as_secs() as usize;
    let start = Instant::now();
    let per_thread: Vec<Vec<f64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1))
            .map(|_| s.spawn(move || busy(start, secs)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a clock-reading thread does not panic"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_figure_per_whole_second_and_none_negative() {
        let v = runqueue_per_second_max(2, Duration::from_secs(1));
        assert_eq!(v.len(), 1);
        assert!(v[0] > 0.0 && v[0].is_finite(), "{v:?}");
    }
}
