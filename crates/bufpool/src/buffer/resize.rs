//! Online resize: the pool grows or shrinks while other threads read and write
//! ([`BufferPool::resize`]; `Engine::resize_pool` above it).
//!
//! Owns: the resize lock (the size in use is kept by `policy::Replacement`, whose clock
//! reads it). The pool is built for `max_shared_buffers` ids: descriptors, mapping
//! buckets, the checkpoint's array and the replacement state for all of them, page memory
//! mapped (address space, no memory until touched) for all of them. Ids from the active size on are *retired*: state word RETIRED with one pin of the
//! pool's own, no page, on no policy list, their frames' memory given back to the kernel.
//! The pin makes every victim source pass a retired buffer as busy (free list, clock,
//! rings, the victim queue); the clock's hand jumps over the retired tail; a stale
//! lock-free lookup that lands on one pins it, sees no TAG_VALID and lets go.
//!
//! Shrinking to `n`: lower the active size (the clock stops handing out the tail), then
//! retire each buffer from the top down: wait for its pins to go, pin it as a victim
//! search does (refcount 0 → 1), write it if dirty (WAL first, as every write), then under
//! its partition lock and its header lock unmap it and take it off the policy's lists if
//! it is still ours alone and clean, and store RETIRED with the pin. A buffer that stays
//! pinned past the wait stops the shrink there: the pool keeps the size reached (every
//! buffer above the stuck one retired, it and all below in use) and the error says which
//! page is held. Growing to `n`: revive each buffer (state 0, onto the free list), then
//! raise the active size.
//!
//! Invariants: once a resize returns, ids at or past `nbuffers()` are retired and all
//! below are not; a retired buffer is never mapped, dirty, valid or on a policy list, and
//! holds at least its one pin. Nothing is lost: a dirty page is written before its buffer
//! is unmapped, under the same pin. Locks: the resize mutex (one resize at a time, never
//! taken by readers); per buffer the documented order, partition → header.

use std::time::{Duration, Instant};

use super::state::*;
use super::{BufferError, BufferPool, BufferResult, IoContext};
use crate::sync::Ordering;

/// How long a shrink waits for one pinned buffer by default before giving up
/// (`Engine::resize_pool`): a pin held longer belongs to a long scan or a leaked guard.
pub const RESIZE_PIN_WAIT: Duration = Duration::from_secs(10);

/// Busy yields before a shrink waiting on a pinned buffer starts sleeping between looks.
const YIELDS_BEFORE_SLEEP: u32 = 64;

/// Buffers a shrink retires between two pauses (`resize_duty_cycle`); the first dirty
/// one of each batch flushes the log ahead of the batch's writes.
const RESIZE_BATCH: usize = 256;

/// Longest pause between two batches of a shrink, whatever the batch took.
const RESIZE_PAUSE_MAX: Duration = Duration::from_secs(1);

/// A shrink's pace: after each batch it sleeps so that it works `duty` of the time.
struct Pace {
    duty: f64,
    batch_start: Instant,
}

impl Pace {
    fn new(duty_thousandths: u32) -> Pace {
        Pace {
            duty: f64::from(duty_thousandths.clamp(1, 1000)) / 1000.0,
            batch_start: Instant::now(),
        }
    }

    /// Between two batches: sleeps for the batch's work time x (1 - duty) / duty.
    fn pause(&mut self) {
        if self.duty < 1.0 {
            let worked = self.batch_start.elapsed().as_secs_f64();
            let rest = worked * (1.0 - self.duty) / self.duty;
            crate::sync::sleep(Duration::from_secs_f64(rest).min(RESIZE_PAUSE_MAX));
        }
        self.batch_start = Instant::now();
    }
}

/// What a resize did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolResize {
    /// Buffers in use before.
    pub from_buffers: usize,
    /// Buffers in use after.
    pub to_buffers: usize,
    /// Dirty pages a shrink wrote before retiring their buffers.
    pub written: usize,
    /// Valid pages a shrink dropped from memory (clean, or written first).
    pub evicted: usize,
    /// Wall time of the resize.
    pub took: Duration,
}

/// What retiring one buffer found.
enum Retired {
    Free,
    Evicted { written: bool },
}

impl BufferPool {
    /// Marks ids `from..` retired in a pool just built (nobody else sees it yet).
    pub(super) fn retire_tail_at_start(&self, from: usize) {
        for d in &self.descs[from..] {
            d.state.store(RETIRED | REFCOUNT_ONE, Ordering::Relaxed);
        }
    }

    /// Most buffers the pool may be resized to (`max_shared_buffers`).
    pub fn max_nbuffers(&self) -> usize {
        self.descs.len()
    }

    /// Resizes the pool to `nbuffers` buffers while it is in use. Growing never waits;
    /// shrinking writes each dirty page of the buffers it retires and waits up to
    /// `pin_wait` for each pinned one, in batches with pauses between them so that it
    /// works `resize_duty_cycle` of the time (the rest is left to the running threads).
    /// Fails with a `ConfigError` naming `shared_buffers` for a size outside
    /// 16..=[`BufferPool::max_nbuffers`], with [`BufferError::Pinned`] if a buffer stays
    /// pinned (the pool then keeps the size it reached, [`BufferPool::nbuffers`]), or with
    /// a write's error (likewise).
    pub fn resize(&self, nbuffers: usize, pin_wait: Duration) -> BufferResult<PoolResize> {
        let start = Instant::now();
        let max = self.descs.len();
        if !(super::MIN_BUFFERS as usize..=max).contains(&nbuffers) {
            return Err(BufferError::Config(crate::options::ConfigError::new(
                "shared_buffers",
                nbuffers,
                format!(
                    "{} to {max} buffers (max_shared_buffers) when resizing",
                    super::MIN_BUFFERS
                ),
            )));
        }
        let _one = self.resize_lock.lock();
        let from = self.repl.active();
        let mut done = PoolResize {
            from_buffers: from,
            to_buffers: from,
            written: 0,
            evicted: 0,
            took: Duration::ZERO,
        };
        if nbuffers > from {
            // From the top down, so the free list hands out the lowest first: pages fill
            // the buffers a later shrink gives up last.
            for id in (from..nbuffers).rev() {
                self.revive(id as u32);
            }
            self.repl.set_active(nbuffers);
        } else if nbuffers < from {
            self.repl.set_active(nbuffers);
            let mut pace = Pace::new(self.resize_duty);
            let mut log_flushed = false;
            // Frames from here up have gone back to the kernel.
            let mut released = from;
            for id in (nbuffers..from).rev() {
                if (from - 1 - id) % RESIZE_BATCH == 0 && id + 1 != from {
                    // The batch's frames go back to the kernel inside the pace too.
                    self.arena.release(id as u32 + 1, released as u32);
                    released = id + 1;
                    pace.pause();
                    log_flushed = false;
                }
                if !log_flushed && self.descs[id].load_state() & DIRTY != 0 {
                    self.flush_log_ahead();
                    log_flushed = true;
                }
                match self.retire(id as u32, pin_wait) {
                    Ok(Retired::Free) => {}
                    Ok(Retired::Evicted { written }) => {
                        done.evicted += 1;
                        done.written += usize::from(written);
                    }
                    Err(e) => {
                        // Every id above `id` is retired, `id` and below are in use.
                        self.repl.set_active(id + 1);
                        self.arena.release(id as u32 + 1, released as u32);
                        return Err(e);
                    }
                }
            }
            // The whole range once more: with explicit huge pages a batch's frames are
            // released only in whole 2 MiB pages, so edges between batches are left.
            self.arena.release(nbuffers as u32, from as u32);
        }
        done.to_buffers = nbuffers;
        done.took = start.elapsed();
        Ok(done)
    }

    /// Makes the whole log inserted so far durable (one flush) so that the batch's page
    /// writes need none of their own. A failure is left to those writes, which flush
    /// again and report it with the page.
    fn flush_log_ahead(&self) {
        if let Some(end) = self.wal.end_of_log() {
            if self.wal.flush_needed(end) {
                let _ = self.wal.flush(end);
            }
        }
    }

    /// Puts retired buffer `id` back in use: state 0, on the free list. Waits out a stale
    /// lookup's transient pin.
    fn revive(&self, id: u32) {
        let d = &self.descs[id as usize];
        loop {
            let s = d.lock_header();
            debug_assert!(s & RETIRED != 0, "reviving buffer {id} in use: {d:?}");
            if refcount(s) == 1 {
                d.unlock_header(0);
                self.repl.push_free(id);
                return;
            }
            d.unlock_header(s);
            crate::sync::yield_now();
        }
    }

    /// Retires buffer `id`, which no victim search hands out any more but which may still
    /// be pinned, dirty or mapped; waits up to `pin_wait` for its pins to go.
    fn retire(&self, id: u32, pin_wait: Duration) -> BufferResult<Retired> {
        let d = &self.descs[id as usize];
        let mut waits = 0u32;
        let mut deadline = None;
        loop {
            let s = d.load_state();
            debug_assert!(s & RETIRED == 0, "buffer {id} retired twice: {d:?}");
            if refcount(s) != 0 || s & (LOCKED | IO_IN_PROGRESS) != 0 {
                let until = *deadline.get_or_insert_with(|| Instant::now() + pin_wait);
                if Instant::now() >= until {
                    return Err(BufferError::Pinned {
                        tag: d.tag(),
                        state: describe(s),
                    });
                }
                waits += 1;
                if waits < YIELDS_BEFORE_SLEEP {
                    crate::sync::yield_now();
                } else {
                    crate::sync::sleep(Duration::from_millis(1));
                }
                continue;
            }
            // Pinned as a victim search pins (only from refcount 0, so nobody holds it).
            if d.state
                .compare_exchange(s, s + REFCOUNT_ONE, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            let mut written = false;
            if s & DIRTY != 0 {
                d.content_lock.lock_shared();
                let r = self.flush_locked(id, IoContext::Normal);
                // SAFETY: taken just above by this thread.
                unsafe { d.content_lock.unlock_shared() };
                match r {
                    Ok(w) => written = w,
                    Err(e) => {
                        d.unpin();
                        return Err(e);
                    }
                }
            }
            if let Some(out) = self.unmap_retired(id, written) {
                return Ok(out);
            }
            // Pinned or dirtied by someone who found it meanwhile: look again.
            d.unpin();
        }
    }

    /// The last step of [`BufferPool::retire`]: with our pin on `id`, unmaps it and
    /// stores RETIRED (keeping the pin as the pool's) if the pin is the only one and the
    /// page is clean; None otherwise.
    fn unmap_retired(&self, id: u32, written: bool) -> Option<Retired> {
        let d = &self.descs[id as usize];
        let s = d.load_state();
        if s & TAG_VALID != 0 {
            // Our pin keeps the tag: only the holder of the only pin retags (state.rs).
            let tag = d.tag();
            // A page that never loaded (a failed read) was not in memory to drop.
            let evicted = if s & VALID != 0 {
                Retired::Evicted { written }
            } else {
                Retired::Free
            };
            return self
                .unmap_only_pin(id, &tag, RETIRED | REFCOUNT_ONE)
                .then_some(evicted);
        }
        let s = d.lock_header();
        if refcount(s) != 1 || s & (TAG_VALID | DIRTY | IO_IN_PROGRESS) != 0 {
            d.unlock_header(s);
            return None;
        }
        d.unlock_header(RETIRED | REFCOUNT_ONE);
        Some(Retired::Free)
    }
}
