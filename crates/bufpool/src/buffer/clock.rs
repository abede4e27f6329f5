//! Replacement: the free list of never-used buffers and the clock sweep.
//!
//! Owns: the clock hand (a monotonically increasing `u64`: buffer = hand mod nbuffers,
//! completed passes = hand / nbuffers) and the free list.
//! Invariants: a buffer on the free list has TAG_VALID clear, or is checked before use; the
//! sweep never takes a pinned buffer and never spins forever: after [`BUSY_LAPS_MAX`] laps
//! of `nbuffers` consecutive busy buffers without usage credit to take, yielding the CPU
//! between laps, it reports that every buffer is pinned. PostgreSQL gives up after one such
//! lap; a single lap can be fooled by transient pins (another sweep's probe, a flush) that
//! come and go as the hand passes, which the model test showed on a small pool.
//! Locks: the free list's mutex, taken only when its atomic length says it is non-empty, so
//! the steady state (empty free list) takes no lock. The hand is an atomic.

use super::descriptor::{BufferDesc, Visit};
use crate::sync::{yield_now, AtomicU64, AtomicUsize, Mutex, Ordering};

/// Consecutive all-busy laps before the sweep reports that every buffer is pinned. Three
/// laps with a yield between them outlast any transient pin; a pool that is really all
/// pinned costs 3 x nbuffers cheap visits to report.
pub const BUSY_LAPS_MAX: u32 = 3;

#[repr(align(64))]
#[derive(Debug)]
struct Hand(AtomicU64);

#[derive(Debug)]
pub struct Clock {
    hand: Hand,
    /// Buffers handed out by the sweep or the free list (bgwriter's allocation estimate).
    allocs: Hand,
    free: Mutex<Vec<u32>>,
    free_len: AtomicUsize,
    nbuffers: u64,
}

/// The sweep found every buffer pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllPinned;

impl Clock {
    pub fn new(nbuffers: usize) -> Self {
        // The hand is taken modulo nbuffers, and ids are u32.
        assert!(
            nbuffers > 0 && nbuffers <= u32::MAX as usize,
            "a clock over {nbuffers} buffers"
        );
        // Popped from the end: hand out buffer 0 first.
        let free: Vec<u32> = (0..nbuffers as u32).rev().collect();
        Self {
            hand: Hand(AtomicU64::new(0)),
            allocs: Hand(AtomicU64::new(0)),
            free_len: AtomicUsize::new(free.len()),
            free: Mutex::new(free),
            nbuffers: nbuffers as u64,
        }
    }

    /// Returns a buffer to the free list (after invalidation).
    pub fn push_free(&self, id: u32) {
        debug_assert!(
            u64::from(id) < self.nbuffers,
            "freeing buffer {id} of a pool of {}",
            self.nbuffers
        );
        let mut f = self.free.lock();
        f.push(id);
        self.free_len.store(f.len(), Ordering::Release);
    }

    /// (completed passes, next buffer) of the hand.
    pub fn position(&self) -> (u64, u64) {
        let h = self.hand.0.load(Ordering::Relaxed);
        (h / self.nbuffers, h % self.nbuffers)
    }

    /// The hand itself: buffers the sweep has passed since the pool was built.
    pub fn hand(&self) -> u64 {
        self.hand.0.load(Ordering::Relaxed)
    }

    /// Buffers allocated so far. SeqCst: the bgwriter's hibernation re-check reads it after
    /// raising its flag (see `bgwriter/mod.rs`, "Hibernation").
    pub fn allocations(&self) -> u64 {
        self.allocs.0.load(Ordering::SeqCst)
    }

    /// Counts an allocation served outside [`Clock::victim`] (the victim queue). SeqCst for
    /// the hibernation handshake, like the count in `victim`.
    pub fn count_allocation(&self) {
        self.allocs.0.fetch_add(1, Ordering::SeqCst);
    }

    /// Whether the free list holds buffers (an allocation should take those first).
    pub fn has_free(&self) -> bool {
        self.free_len.load(Ordering::Acquire) > 0
    }

    /// One step of the sweep on behalf of the bgwriter's victim queue: advances the hand
    /// by one buffer and visits it. Not an allocation (not counted).
    pub fn sweep_step(&self, descs: &[BufferDesc]) -> (u32, Visit) {
        let id = (self.hand.0.fetch_add(1, Ordering::Relaxed) % self.nbuffers) as usize;
        (id as u32, descs[id].sweep_visit())
    }

    /// Finds a victim and returns it pinned (refcount includes the caller's pin) with its
    /// state after pinning.
    pub fn victim(&self, descs: &[BufferDesc]) -> Result<(u32, u64), AllPinned> {
        debug_assert_eq!(
            descs.len() as u64,
            self.nbuffers,
            "the sweep's descriptors are not the pool's"
        );
        // SeqCst (the same `lock xadd` on x86 as Relaxed): the allocation must be ordered
        // before the caller's check of the bgwriter's hibernation flag.
        self.count_allocation();
        while self.free_len.load(Ordering::Acquire) > 0 {
            let id = {
                let mut f = self.free.lock();
                let id = f.pop();
                self.free_len.store(f.len(), Ordering::Release);
                id
            };
            let Some(id) = id else { break };
            // A free buffer may have been pinned meanwhile by a stale lookup; then skip it.
            if let Visit::Pinned(s) = descs[id as usize].sweep_visit() {
                return Ok((id, s));
            }
        }
        let mut busy_left = self.nbuffers;
        let mut busy_laps = 0;
        loop {
            let id = (self.hand.0.fetch_add(1, Ordering::Relaxed) % self.nbuffers) as usize;
            match descs[id].sweep_visit() {
                Visit::Pinned(s) => return Ok((id as u32, s)),
                Visit::Decremented => {
                    busy_left = self.nbuffers;
                    busy_laps = 0;
                }
                Visit::Busy => {
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
