//! The batch of `bench --batch-every SECS --batch-rows N` (seed 000's bursty load: a large
//! write dirties many pages at once, which the background writer has to absorb): a thread
//! beside the clients that every SECS seconds runs the workload's batch of N rows in one
//! transaction. It counts as a client for the engine (its own session, its own locks);
//! its rows go to the per-second series (`batch_rows`), not to the transaction counts.
//! What a batch writes is the workload's; this owns its clock and its figures.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::Result;
use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::pace::Ticks;
use super::stats::slot_at;

/// `--batch-every SECS --batch-rows N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    pub every_s: u64,
    pub rows: u64,
}

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

/// How one batch ended.
pub(crate) enum Batched {
    /// Committed: the rows it changed, and when its transaction began (its duration ends
    /// when the batch is counted).
    Committed { rows: u64, began: Instant },
    /// A deadlock rolled it back.
    Deadlock,
}

/// The batch thread of a run that started at `start`.
pub(crate) struct BatchRunner<'a> {
    batch: Batch,
    seed: u64,
    start: Instant,
    done: &'a AtomicBool,
}

impl<'a> BatchRunner<'a> {
    pub(crate) fn new(batch: Batch, seed: u64, start: Instant, done: &'a AtomicBool) -> Self {
        BatchRunner {
            batch,
            seed,
            start,
            done,
        }
    }

    /// Runs a batch (`one`, given the rows asked for and the batches' own random stream)
    /// every `every_s` seconds (the first after `every_s`) until the run is done; stops at
    /// the first error, which fails the run.
    pub(crate) fn run(
        self,
        mut one: impl FnMut(u64, &mut SmallRng) -> Result<Batched>,
    ) -> Result<BatchStats> {
        let mut rng = SmallRng::seed_from_u64(self.seed ^ 0xba7c_0000_0000_0001);
        let mut stats = BatchStats::default();
        let mut ticks = Ticks::new(self.start, self.batch.every_s, self.done);
        while ticks.wait() {
            match one(self.batch.rows, &mut rng)? {
                Batched::Committed { rows, began } => {
                    let sec = self.start.elapsed().as_secs() as usize;
                    *slot_at(&mut stats.rows_by_second, sec) += rows;
                    stats.committed += 1;
                    stats.durations_ms.push(began.elapsed().as_secs_f64() * 1e3);
                }
                Batched::Deadlock => stats.deadlocks += 1,
            }
        }
        Ok(stats)
    }
}
