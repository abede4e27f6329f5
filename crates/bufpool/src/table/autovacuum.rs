//! Autovacuum: a launcher that, every `autovacuum_naptime`, looks at each heap it was given
//! and VACUUMs those whose dead versions passed PostgreSQL's threshold
//! (`autovacuum_vacuum_threshold + autovacuum_vacuum_scale_factor × live rows`), through
//! the vacuum ring and paced by cost (`autovacuum_vacuum_cost_limit`/`_delay`).
//!
//! Owns: the launcher's options, its stop flag and its counters ([`AutovacuumStats`]); the
//! row counters it reads are the engine's ([`crate::stats::RelStats`], kept by the heaps).
//!
//! How it differs from PostgreSQL's: the launcher is its own one worker (PostgreSQL starts
//! up to `autovacuum_max_workers`, 3, and balances the cost limit among them), it looks at
//! every table each nap (PostgreSQL divides the nap among databases), it has no insert or
//! anti-wraparound trigger (no freezing here) and no ANALYZE. It runs where the embedder
//! puts it: [`Autovacuum::run`] blocks until [`Autovacuum::stop`], on a thread the caller
//! owns (a scoped thread beside the heaps it borrows: the engine has no catalog of which
//! relations are heaps, nor handles that outlive a borrow). `bufpool bench` runs it when
//! the `autovacuum` knob is on.
//!
//! Invariants: a VACUUM the launcher runs is an ordinary one (see `heap/vacuum.rs`); a stop
//! interrupts it between pages, which leaves every page consistent. Locks: `state` (stop
//! flag and counters) is never held across a VACUUM or a nap; naps wait on `wake`.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::heap::{Heap, VacuumCost, VacuumOptions, VacuumReport};
use super::HeapError;
use crate::config::Config;
use crate::stats::RelCountersSnapshot;
use crate::sync::{Condvar, Mutex, MutexGuard};

/// The launcher's settings (from the knob table).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutovacuumOptions {
    /// Time between the launcher's looks at the tables (`autovacuum_naptime`).
    pub naptime: Duration,
    /// Dead versions beyond the scale factor's share that make a table due.
    pub threshold: u64,
    /// Share of the live rows that, dead, make a table due.
    pub scale_factor: f64,
    /// Cost pacing of each VACUUM (None: full speed).
    pub cost: Option<VacuumCost>,
}

impl AutovacuumOptions {
    /// The `autovacuum_*` knobs.
    pub fn from_config(c: &Config) -> Self {
        let delay = Duration::from_millis(c.autovacuum_vacuum_cost_delay_ms);
        AutovacuumOptions {
            naptime: Duration::from_millis(c.autovacuum_naptime_ms),
            threshold: c.autovacuum_vacuum_threshold,
            scale_factor: c.autovacuum_vacuum_scale_factor_thousandths as f64 / 1000.0,
            cost: (!delay.is_zero()).then_some(VacuumCost {
                limit: c.autovacuum_vacuum_cost_limit,
                delay,
            }),
        }
    }

    /// The dead versions above which a table with these counters is due (PostgreSQL's
    /// vacthresh).
    pub fn dead_limit(&self, c: &RelCountersSnapshot) -> f64 {
        self.threshold as f64 + self.scale_factor * c.live as f64
    }

    /// Whether a table with these counters is due for a VACUUM.
    pub fn due(&self, c: &RelCountersSnapshot) -> bool {
        c.dead as f64 > self.dead_limit(c)
    }
}

/// What the launcher did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AutovacuumStats {
    /// Looks at the tables.
    pub rounds: u64,
    /// VACUUMs finished (each counted in its table's `autovacuum_count`).
    pub vacuums: u64,
    /// VACUUMs a stop interrupted (not counted above nor in the tables' counters).
    pub interrupted: u64,
    /// Over all of them: pages gone through, dead versions removed, cost naps and their
    /// time, and the time spent vacuuming (naps included).
    pub pages: u64,
    /// Dead versions removed.
    pub removed: u64,
    /// Naps the cost limit imposed.
    pub cost_naps: u64,
    /// Those naps' total length.
    pub cost_nap_time: Duration,
    /// Time spent vacuuming, naps included.
    pub vacuum_time: Duration,
    /// Finished VACUUMs per table, by the names the caller gave.
    pub per_table: Vec<(String, u64)>,
    /// The last `HISTORY_MAX` VACUUMs (interrupted ones too), oldest first.
    pub history: Vec<AutovacuumRun>,
}

/// Most VACUUMs kept in [`AutovacuumStats::history`].
pub(crate) const HISTORY_MAX: usize = 10_000;

/// One VACUUM the launcher ran.
#[derive(Debug, Clone, PartialEq)]
pub struct AutovacuumRun {
    /// The name the caller gave the table.
    pub table: String,
    /// When the VACUUM started.
    pub started: Instant,
    /// When it ended.
    pub ended: Instant,
    /// What it did.
    pub report: VacuumReport,
}

/// A VACUUM the launcher ran failed.
#[derive(Debug, thiserror::Error)]
#[error("autovacuum of {table}: {source}")]
pub struct AutovacuumError {
    /// The name the caller gave the table.
    pub table: String,
    /// The VACUUM's error.
    #[source]
    pub source: HeapError,
}

struct State {
    stop: bool,
    /// [`Autovacuum::run`] is in a nap.
    napping: bool,
    stats: AutovacuumStats,
}

/// The autovacuum launcher (see the module doc).
pub struct Autovacuum {
    opts: AutovacuumOptions,
    state: Mutex<State>,
    /// Signalled by [`Autovacuum::stop`] and after every round.
    wake: Condvar,
    /// Set by [`Autovacuum::stop`]: interrupts a VACUUM in progress between pages.
    interrupt: AtomicBool,
}

impl std::fmt::Debug for Autovacuum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Autovacuum")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl Autovacuum {
    /// A launcher with settings `opts`, not yet running.
    pub fn new(opts: AutovacuumOptions) -> Self {
        Autovacuum {
            opts,
            state: Mutex::new(State {
                stop: false,
                napping: false,
                stats: AutovacuumStats::default(),
            }),
            wake: Condvar::new(),
            interrupt: AtomicBool::new(false),
        }
    }

    /// The launcher's settings.
    pub fn options(&self) -> &AutovacuumOptions {
        &self.opts
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    /// What the launcher has done so far.
    pub fn stats(&self) -> AutovacuumStats {
        self.state().stats.clone()
    }

    /// Asks [`Autovacuum::run`] to return: at once if napping, between pages if vacuuming.
    pub fn stop(&self) {
        self.state().stop = true;
        self.interrupt
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.wake.notify_all();
    }

    /// Whether [`Autovacuum::run`] is napping now (for tests).
    pub fn napping(&self) -> bool {
        self.state().napping
    }

    /// Waits until at least `rounds` looks have finished (or `timeout`); returns whether
    /// they have.
    pub fn wait_for_rounds(&self, rounds: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.state();
        while st.stats.rounds < rounds && !st.stop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st = self.wake.wait_for(st, left).0;
        }
        st.stats.rounds >= rounds
    }

    /// One look: VACUUMs every table of `heaps` (name, heap) that is due, in the order
    /// given. Returns the names it vacuumed to the end (not those a stop interrupted).
    pub fn round(&self, heaps: &[(&str, &Heap<'_>)]) -> Result<Vec<String>, AutovacuumError> {
        // Its I/O is the autovacuum worker's in pg_stat_io.
        let _role = crate::stats::as_writer(crate::stats::IoWriter::Autovacuum);
        let mut done = Vec::new();
        for &(name, heap) in heaps {
            if self.state().stop {
                break;
            }
            if !self.opts.due(&heap.row_stats()) {
                continue;
            }
            let opts = VacuumOptions {
                truncate: false,
                cost: self.opts.cost,
                autovacuum: true,
                interrupt: Some(&self.interrupt),
            };
            let t = Instant::now();
            let r = heap
                .vacuum_with_options(&opts, heap.vacuum_ring().as_mut())
                .map_err(|source| AutovacuumError {
                    table: name.to_string(),
                    source,
                })?;
            let mut st = self.state();
            let s = &mut st.stats;
            s.pages += u64::from(r.pages_scanned);
            s.removed += r.removed;
            s.cost_naps += r.cost_naps;
            s.cost_nap_time += r.cost_nap_time;
            s.vacuum_time += t.elapsed();
            if r.interrupted {
                s.interrupted += 1;
            } else {
                s.vacuums += 1;
                match s.per_table.iter_mut().find(|(n, _)| n == name) {
                    Some((_, k)) => *k += 1,
                    None => s.per_table.push((name.to_string(), 1)),
                }
            }
            if s.history.len() == HISTORY_MAX {
                s.history.remove(0);
            }
            s.history.push(AutovacuumRun {
                table: name.to_string(),
                started: t,
                ended: Instant::now(),
                report: r,
            });
            if !r.interrupted {
                done.push(name.to_string());
            }
        }
        self.state().stats.rounds += 1;
        self.wake.notify_all();
        Ok(done)
    }

    /// The launcher: a [`Autovacuum::round`] every naptime (the first after one naptime)
    /// until [`Autovacuum::stop`]; stops at the first failed VACUUM. Returns the counters.
    pub fn run(&self, heaps: &[(&str, &Heap<'_>)]) -> Result<AutovacuumStats, AutovacuumError> {
        loop {
            // A nap of naptime (woken early only by a stop; other wake-ups nap on).
            let deadline = Instant::now() + self.opts.naptime;
            let mut st = self.state();
            st.napping = true;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if st.stop || left.is_zero() {
                    break;
                }
                st = self.wake.wait_for(st, left).0;
            }
            st.napping = false;
            if st.stop {
                return Ok(st.stats.clone());
            }
            drop(st);
            self.round(heaps)?;
        }
    }
}
