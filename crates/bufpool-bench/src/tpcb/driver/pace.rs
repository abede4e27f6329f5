//! How fast a client goes: its `-R` schedule ([`Pace`]: a Poisson process of its share of
//! the target rate, `-R`'s or `--rate-profile`'s, thinned to the profile's rate of the
//! moment) and `-L`'s skipping of a transaction that could only start too late; and the
//! clock of a thread beside the clients that works every few seconds ([`Ticks`]: the
//! batches, the workload's VACUUM thread).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::Rng;

use super::DriverOptions;

/// What the `-R` schedule says about a client's next transaction.
pub(crate) enum Next {
    /// Run it; its latency and lag count from this scheduled start.
    Run(Instant),
    /// Skip it (`-L`): it was due at this instant and could only start too late.
    Skip(Instant),
    /// The run ended while waiting for it.
    Stop,
}

/// One client's pace: its share of `-R` (or of `--rate-profile`'s highest rate) and `-L`.
pub(crate) struct Pace<'a> {
    opts: &'a DriverOptions,
    /// The run's start: the profile's time and `-T` count from it.
    start: Instant,
    /// This client's share of `-R`, transactions per second; with `--rate-profile`, of
    /// the profile's highest rate (arrivals at it are thinned to the profile's rate).
    /// None: back to back.
    pub(crate) rate: Option<f64>,
    /// `-L`, µs.
    pub(crate) limit_us: Option<f64>,
}

impl<'a> Pace<'a> {
    /// A client's pace in a run of `opts.clients` clients that started at `start`.
    pub(crate) fn new(opts: &'a DriverOptions, start: Instant) -> Pace<'a> {
        let clients = opts.clients.max(1);
        Pace {
            opts,
            start,
            rate: match &opts.rate_profile {
                Some(p) => Some(p.high * p.spike_factor / clients as f64),
                None => opts.rate.map(|r| r / clients as f64),
            },
            limit_us: opts.latency_limit_ms.map(|ms| ms * 1000.0),
        }
    }

    /// Advances the Poisson schedule (`scheduled`) by one exponential gap with mean
    /// 1/`rate` (this pace's [`Pace::rate`]) and waits for that moment. With
    /// `--rate-profile`, `rate` is the profile's highest and each arrival is kept with
    /// probability (the profile's rate at that moment) / `rate`: thinning, which makes a
    /// Poisson process of the changing rate.
    pub(crate) fn next(&self, rate: f64, rng: &mut SmallRng, scheduled: &mut Instant) -> Next {
        loop {
            let u: f64 = rng.random_range(f64::EPSILON..1.0);
            *scheduled += Duration::from_secs_f64(-u.ln() / rate);
            let Some(p) = &self.opts.rate_profile else {
                break;
            };
            let t = scheduled
                .saturating_duration_since(self.start)
                .as_secs_f64();
            let keep = p.rate_at(t) / p.high / p.spike_factor;
            if rng.random_bool(keep.clamp(0.0, 1.0)) {
                break;
            }
            if self.opts.duration.is_some_and(|d| t >= d.as_secs_f64()) {
                break;
            }
        }
        let stopped = || {
            self.opts.stop.load(Ordering::Relaxed)
                || self
                    .opts
                    .duration
                    .is_some_and(|d| self.start.elapsed() >= d)
        };
        if !sleep_until(*scheduled, stopped) {
            return Next::Stop; // stopped while waiting
        }
        // Too late to make the latency limit: skip it (pgbench -L).
        if let Some(l) = self.limit_us {
            let behind = Instant::now().duration_since(*scheduled);
            if behind.as_secs_f64() * 1e6 > l {
                return Next::Skip(*scheduled);
            }
        }
        Next::Run(*scheduled)
    }
}

/// Sleeps until `at`, in naps of at most 50 ms so that `stopped` is noticed; true once
/// `at` has come, false if `stopped` said so first. How a paced client waits for its next
/// transaction (and the compare's wake-up floor, which measures what that wait costs).
pub(crate) fn sleep_until(at: Instant, stopped: impl Fn() -> bool) -> bool {
    while Instant::now() < at {
        if stopped() {
            return false;
        }
        std::thread::sleep(
            at.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(50)),
        );
    }
    true
}

/// The clock of a thread beside the clients: a tick every `every` seconds from the run's
/// start (the first after one period) until the run is done.
pub(crate) struct Ticks<'a> {
    next: Instant,
    every: Duration,
    done: &'a AtomicBool,
}

impl<'a> Ticks<'a> {
    /// Ticks every `every_s` seconds (at least 1) of a run that started at `start` and
    /// ends when `done` is set.
    pub(crate) fn new(start: Instant, every_s: u64, done: &'a AtomicBool) -> Ticks<'a> {
        let every = Duration::from_secs(every_s.max(1));
        Ticks {
            next: start + every,
            every,
            done,
        }
    }

    /// Waits for the next tick: true then, false once the run is done.
    pub(crate) fn wait(&mut self) -> bool {
        // Waiting for a moment of the run's schedule, not for another thread: short naps
        // so that the end of the run is noticed quickly.
        while Instant::now() < self.next && !self.done.load(Ordering::Relaxed) {
            std::thread::sleep(
                self.next
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(50)),
            );
        }
        if self.done.load(Ordering::Relaxed) {
            return false;
        }
        self.next += self.every;
        true
    }
}
