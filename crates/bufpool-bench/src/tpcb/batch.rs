//! The batch of `bench --batch-every SECS --batch-rows N`: a thread beside the clients
//! that every SECS seconds updates N accounts spread over the table in one transaction
//! (seed 000's bursty load: a large write dirties many pages at once, which the
//! background writer has to absorb). It counts as a client for the engine (its own
//! session, its own locks); its rows go to the per-second series (`batch_rows`), not to
//! the transaction counts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::burst::Batch;
use super::driver::stats::slot_at;
use super::{Db, ACCOUNTS_PER_SCALE};

/// What the batches did.
#[derive(Debug, Clone, Default)]
pub struct BatchStats {
    /// Batches that committed.
    pub committed: u64,
    /// Batches that failed on a deadlock (rolled back; the next one runs on time).
    pub deadlocks: u64,
    /// Their durations, ms.
    pub durations_ms: Vec<f64>,
    /// Rows updated by the batches that committed in each second.
    pub rows_by_second: Vec<u64>,
}

pub(super) struct BatchRunner<'a, 'e> {
    db: &'a Db<'e>,
    batch: Batch,
    seed: u64,
    start: Instant,
    done: &'a AtomicBool,
}

impl<'a, 'e> BatchRunner<'a, 'e> {
    pub(super) fn new(
        db: &'a Db<'e>,
        batch: Batch,
        seed: u64,
        start: Instant,
        done: &'a AtomicBool,
    ) -> Self {
        BatchRunner {
            db,
            batch,
            seed,
            start,
            done,
        }
    }

    /// Runs a batch every `every_s` seconds (the first after `every_s`) until the run is
    /// done; stops at the first error other than a deadlock.
    pub(super) fn run(self) -> Result<BatchStats> {
        let mut rng = SmallRng::seed_from_u64(self.seed ^ 0xba7c_0000_0000_0001);
        let accounts = i64::from(self.db.scale) * ACCOUNTS_PER_SCALE as i64;
        let rows = (self.batch.rows as i64).clamp(1, accounts) as usize;
        let every = Duration::from_secs(self.batch.every_s.max(1));
        let mut stats = BatchStats::default();
        let mut next = self.start + every;
        loop {
            // Waiting for a moment of the workload's schedule, not for another thread:
            // short naps so that the end of the run is noticed quickly.
            while Instant::now() < next && !self.done.load(Ordering::Relaxed) {
                std::thread::sleep(
                    next.saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(50)),
                );
            }
            if self.done.load(Ordering::Relaxed) {
                return Ok(stats);
            }
            let mut aids: Vec<i64> = (0..rows).map(|_| rng.random_range(1..=accounts)).collect();
            aids.sort_unstable();
            aids.dedup();
            let began = Instant::now();
            let x = self.db.engine.begin_xid().context("batch: begin")?;
            match self.db.touch_accounts(x, &aids) {
                Ok(()) => {
                    self.db
                        .engine
                        .commit_transaction(x)
                        .context("batch: commit")?;
                    let sec = self.start.elapsed().as_secs() as usize;
                    *slot_at(&mut stats.rows_by_second, sec) += aids.len() as u64;
                    stats.committed += 1;
                    stats.durations_ms.push(began.elapsed().as_secs_f64() * 1e3);
                }
                Err(e) if e.is_deadlock() => {
                    self.db.engine.abort_transaction(x)?;
                    stats.deadlocks += 1;
                }
                Err(e) => {
                    let _ = self.db.engine.abort_transaction(x);
                    return Err(e).context("batch update");
                }
            }
            next += every;
        }
    }
}
