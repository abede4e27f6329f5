//! The run's checkpoint timer: a thread that takes a checkpoint every
//! `checkpoint_timeout` (PostgreSQL's checkpointer on its timer) while the clients run,
//! and records each checkpoint's span and the buffers it wrote, for the report.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bufpool::stats::{set_thread_writer, IoWriter};

use super::stats::writes;
use super::Db;
use crate::report::model::CheckpointSpan;

/// Takes a checkpoint every `checkpoint_timeout` until the clients are done.
pub(super) struct CheckpointTimer<'a, 'e> {
    db: &'a Db<'e>,
    /// The run's start: the first checkpoint is due `timeout` after it, and spans count
    /// from it.
    start: Instant,
    timeout: Duration,
    /// Set once the clients have finished.
    done: &'a AtomicBool,
}

impl<'a, 'e> CheckpointTimer<'a, 'e> {
    /// A timer for a run that started at `start`.
    pub(super) fn new(
        db: &'a Db<'e>,
        start: Instant,
        timeout: Duration,
        done: &'a AtomicBool,
    ) -> Self {
        CheckpointTimer {
            db,
            start,
            timeout,
            done,
        }
    }

    /// Runs until `done` (on its own thread: its writes count as the checkpointer's);
    /// returns the checkpoints taken, or stops at the first one that fails.
    pub(super) fn run(self) -> Result<Vec<CheckpointSpan>> {
        set_thread_writer(IoWriter::Checkpointer);
        let mut spans = Vec::new();
        let mut next = self.start + self.timeout;
        while !self.done.load(Ordering::Relaxed) {
            if Instant::now() < next {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            spans.push(self.checkpoint()?);
            next = Instant::now() + self.timeout;
        }
        Ok(spans)
    }

    /// Takes one checkpoint and returns its span.
    fn checkpoint(&self) -> Result<CheckpointSpan> {
        let pool = self.db.engine.pool();
        let start_s = self.start.elapsed().as_secs_f64();
        let w0 = writes(&pool.stats(), IoWriter::Checkpointer);
        self.db
            .engine
            .checkpoint()
            .context("checkpoint during the run")?;
        let w1 = writes(&pool.stats(), IoWriter::Checkpointer);
        Ok(CheckpointSpan {
            start_s,
            end_s: self.start.elapsed().as_secs_f64(),
            buffers_written: w1 - w0,
        })
    }
}
