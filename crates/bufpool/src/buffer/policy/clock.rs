//! The clock sweep (PostgreSQL 8.1 and later): one hand over the buffer ids; a hit adds
//! usage credit (up to `USAGE_COUNT_MAX`), the hand takes one unit per visit and evicts the
//! first unpinned buffer it finds with none.
//!
//! Owns: the hand, a monotonically increasing `u64` (buffer = hand mod nbuffers, completed
//! passes = hand / nbuffers). Invariants: the sweep never takes a pinned buffer and never
//! spins forever: after [`BUSY_LAPS_MAX`] laps of `nbuffers` consecutive busy buffers
//! without usage credit to take, yielding the CPU between laps, it reports that every buffer
//! is pinned. PostgreSQL gives up after one such lap; a single lap can be fooled by
//! transient pins (another sweep's probe, a flush) that come and go as the hand passes,
//! which the model test showed on a small pool. Locks: none; the hand is an atomic.
//! A resized pool (`buffer/resize.rs`) keeps its hand over all `nbuffers` ids; ids at or
//! past the active count are retired (pinned by the pool), and a step that lands among
//! them moves the hand to the next pass's start in one step instead of visiting each.

use super::{AllPinned, Frames, BUSY_LAPS_MAX};
use crate::buffer::state::{sweep_visit, Visit};
use crate::sync::{yield_now, AtomicU64, Ordering};

/// The hand on a cache line of its own: every miss moves it.
#[repr(align(64))]
#[derive(Debug)]
struct Hand(AtomicU64);

#[derive(Debug)]
pub(in crate::buffer) struct Clock {
    hand: Hand,
    nbuffers: u64,
}

impl Clock {
    pub fn new(nbuffers: usize) -> Self {
        Self {
            hand: Hand(AtomicU64::new(0)),
            nbuffers: nbuffers as u64,
        }
    }

    /// The hand itself: buffers the sweep has passed since the pool was built.
    #[inline]
    pub fn hand(&self) -> u64 {
        self.hand.0.load(Ordering::Relaxed)
    }

    /// (completed passes, next buffer) of the hand.
    pub fn position(&self) -> (u64, u64) {
        let h = self.hand();
        (h / self.nbuffers, h % self.nbuffers)
    }

    /// One step: advances the hand by one buffer and visits it; ids from `active` on are
    /// retired (the pool's size in use, `Replacement`'s).
    #[inline]
    pub fn step<F: Frames + ?Sized>(&self, frames: &F, active: &AtomicU64) -> (u32, Visit) {
        let h = self.hand.0.fetch_add(1, Ordering::Relaxed);
        let id = h % self.nbuffers;
        if id >= active.load(Ordering::Relaxed) {
            // The retired tail: on to the next pass's start (a racing step may have moved
            // the hand further already; then this changes nothing).
            self.hand
                .0
                .fetch_max(h - id + self.nbuffers, Ordering::Relaxed);
            return (id as u32, Visit::Busy);
        }
        (id as u32, sweep_visit(frames.state(id as u32)))
    }

    /// Sweeps until a buffer without usage credit is pinned; returns it with its state
    /// after pinning.
    #[inline]
    pub fn victim<F: Frames + ?Sized>(
        &self,
        frames: &F,
        active: &AtomicU64,
    ) -> Result<(u32, u64), AllPinned> {
        let mut busy_left = self.nbuffers;
        let mut busy_laps = 0;
        loop {
            match self.step(frames, active) {
                (id, Visit::Pinned(s)) => return Ok((id, s)),
                (_, Visit::Decremented) => {
                    busy_left = self.nbuffers;
                    busy_laps = 0;
                }
                (_, Visit::Busy) => {
                    busy_left -= 1;
                    if busy_left == 0 {
                        busy_laps += 1;
                        if busy_laps == BUSY_LAPS_MAX {
                            return Err(AllPinned);
                        }
                        yield_now();
                        busy_left = self.nbuffers;
                    }
                }
            }
        }
    }
}
