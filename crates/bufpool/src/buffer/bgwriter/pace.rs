//! The bgwriter's pace (`bgwriter_device_share`): a token bucket that lets its rounds write
//! at most a share of the slowest probed device's write-back rate, so that a burst of
//! cleaning (the pool's first fill, a catch-up after a stall) does not queue seconds of
//! hinted writes ahead of the log's flushes on a slow device shared with it.
//!
//! Owns: its token count and when it was last refilled. Invariants: tokens never exceed a
//! round's hold (rate × `bgwriter_delay`, at least one page); they may go below zero when a
//! round wrote more than its budget (the mini-checkpoint's writes), and the debt is paid
//! before the next writes. Locks: none; the round state that holds it is behind the
//! round mutex.

use std::time::{Duration, Instant};

/// Pages the bgwriter may still write at its pace.
#[derive(Debug, Default)]
pub(super) struct Pace {
    tokens: f64,
    at: Option<Instant>,
}

impl Pace {
    /// The pages a round starting at `now` may write at `rate` pages a second, holding at
    /// most `hold` of that rate over from quiet time (the first call starts with a full
    /// hold).
    pub(super) fn budget(&mut self, rate: f64, hold: Duration, now: Instant) -> u64 {
        let cap = (rate * hold.as_secs_f64()).max(1.0);
        let elapsed = self
            .at
            .map_or(hold, |t| now.saturating_duration_since(t))
            .as_secs_f64();
        self.tokens = (self.tokens + rate * elapsed).min(cap);
        self.at = Some(now);
        self.tokens.max(0.0) as u64
    }

    /// Takes `pages` written off the budget (nothing before the first [`Self::budget`]:
    /// writes before the pace was known are not a debt).
    pub(super) fn spend(&mut self, pages: u64) {
        if self.at.is_some() {
            self.tokens -= pages as f64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Over a stretch of rounds the pages written never pass rate × time plus one hold,
    /// whatever the rounds ask for; quiet time refills at most one hold; a debt is paid
    /// before more is allowed.
    #[test]
    fn rounds_write_at_most_the_rate() {
        let (rate, hold) = (320.0, Duration::from_millis(200));
        let t0 = Instant::now();
        let mut p = Pace::default();
        p.spend(1000);
        assert_eq!(
            p.budget(rate, hold, t0),
            64,
            "the first round: one hold, no debt"
        );
        p.spend(64);
        // Rounds every 10 ms for 10 s, each writing all it may.
        let mut written = 64;
        for i in 1..=1000 {
            let b = p.budget(rate, hold, t0 + Duration::from_millis(10 * i));
            assert!(b <= 64, "never more than one hold: {b}");
            p.spend(b);
            written += b;
        }
        let allowed = rate * 10.0 + 64.0;
        assert!(
            (written as f64) <= allowed && (written as f64) >= rate * 10.0 - 64.0,
            "{written} pages in 10 s at {rate}/s"
        );
        // A minute of quiet refills one hold, not a minute's worth.
        assert_eq!(p.budget(rate, hold, t0 + Duration::from_secs(70)), 64);
        // A round that overspent (the mini-checkpoint) leaves a debt.
        p.spend(64 + 128);
        let t1 = t0 + Duration::from_secs(70);
        assert_eq!(p.budget(rate, hold, t1 + Duration::from_millis(100)), 0);
        assert_eq!(p.budget(rate, hold, t1 + Duration::from_millis(500)), 32);
        // A rate under one page a hold still lets a page through once it has accrued.
        let mut slow = Pace::default();
        assert_eq!(slow.budget(1.0, hold, t0), 0);
        assert_eq!(slow.budget(1.0, hold, t0 + Duration::from_secs(1)), 1);
    }
}
