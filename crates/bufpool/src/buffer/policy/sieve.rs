//! SIEVE (Zhang et al., NSDI 2024): one list, newest at the head; a hit sets a "visited"
//! mark; the hand walks from the tail toward the head, clearing marks, and evicts the first
//! unmarked buffer, which leaves the list; a new page enters at the head. Unlike the clock,
//! a survivor keeps its place and a new page is examined only when the hand reaches the
//! head, so pages used once leave quickly ("quick demotion").
//!
//! Owns: the list's ends and the hand, behind one mutex; the links live in each buffer's
//! link word (`Frames::link`: newer id, older id, and a linked bit), changed only under that
//! mutex. The visited mark is the state word's usage count (> 0), set by the pin's own
//! compare-and-swap, so a hit takes no lock and calls nothing: this is exact SIEVE, not an
//! approximation, except that the mark is cleared to 0 from any usage (one pass clears it).
//! Invariants: a buffer holding a page is linked exactly once (after its first `retagged`),
//! a free buffer is not; a victim stays linked, in place, until `retagged` moves it to the
//! head (so a claim that gives its victim up needs no call); `freed` unlinks.
//! Locks: the list mutex, on the miss path (victim search, admission) with no other lock
//! held, and in `drop_buffers` (`freed`) under that buffer's partition and header locks.
//! Under it only the buffers' state words are touched, by compare-and-swap, and a locked
//! header is passed as busy, never waited for: so the list mutex is a leaf and the order
//! is deadlock-free. It is the policy's one global lock: `waits` counts its waits
//! (`replacement_lock`).

use super::list::{check_membership, lock_counted, newer, DList, NIL};
use super::{AllPinned, Frames, BUSY_LAPS_MAX};
use crate::buffer::state::{refcount, usage, LOCKED, REFCOUNT_ONE, USAGE_MASK};
use crate::sync::{yield_now, AtomicU64, Mutex, Ordering};

#[derive(Debug)]
struct List {
    list: DList,
    hand: u32,
    /// Hand steps since the pool was built (the position the bgwriter scans ahead of).
    steps: u64,
}

#[derive(Debug)]
pub(in crate::buffer) struct Sieve {
    list: Mutex<List>,
    /// `List::steps`, readable without the lock.
    steps: AtomicU64,
}

/// What one visit of the hand did.
pub(super) enum Seen {
    Busy,
    Cleared,
    Pinned(u64),
}

/// A list hand's visit to one buffer: busy if pinned or header-locked; a visited mark
/// (usage > 0) is cleared; an unmarked buffer is pinned (refcount 0 → 1).
#[inline]
pub(super) fn visit(word: &AtomicU64) -> Seen {
    let s = word.load(Ordering::Relaxed);
    if s & LOCKED != 0 || refcount(s) != 0 {
        return Seen::Busy;
    }
    if usage(s) > 0 {
        // A lost race means a pin came in meanwhile: it stays marked.
        let _ = word.compare_exchange(s, s & !USAGE_MASK, Ordering::Relaxed, Ordering::Relaxed);
        return Seen::Cleared;
    }
    match word.compare_exchange(s, s + REFCOUNT_ONE, Ordering::Acquire, Ordering::Relaxed) {
        Ok(_) => Seen::Pinned(s + REFCOUNT_ONE),
        Err(_) => Seen::Busy,
    }
}

impl Sieve {
    pub fn new() -> Self {
        Self {
            list: Mutex::new(List {
                list: DList::new(0),
                hand: NIL,
                steps: 0,
            }),
            steps: AtomicU64::new(0),
        }
    }

    pub fn steps(&self) -> u64 {
        self.steps.load(Ordering::Relaxed)
    }

    /// One step of the hand: the buffer it visits and what it did there; `None` on an
    /// empty list.
    fn step<F: Frames + ?Sized>(&self, l: &mut List, f: &F) -> Option<(u32, Seen)> {
        let at = if l.hand == NIL { l.list.tail } else { l.hand };
        if at == NIL {
            return None;
        }
        l.steps += 1;
        let seen = visit(f.state(at));
        // Toward the head; past it, back to the tail.
        l.hand = newer(f.link(at).load(Ordering::Relaxed));
        Some((at, seen))
    }

    /// Walks the hand to the first unmarked, unpinned buffer and returns it pinned; it
    /// stays linked until `retagged`.
    pub fn victim<F: Frames + ?Sized>(&self, f: &F) -> Result<(u32, u64), AllPinned> {
        for lap in 0..BUSY_LAPS_MAX {
            if lap > 0 {
                yield_now();
            }
            let mut l = lock_counted(&self.list);
            // Marks cleared plus a lap of busy buffers: every one was passed busy.
            let mut busy_left = l.list.len;
            while busy_left > 0 {
                match self.step(&mut l, f) {
                    None => break,
                    Some((id, Seen::Pinned(s))) => {
                        self.steps.store(l.steps, Ordering::Relaxed);
                        return Ok((id, s));
                    }
                    Some((_, Seen::Cleared)) => busy_left = l.list.len,
                    Some((_, Seen::Busy)) => busy_left -= 1,
                }
            }
            self.steps.store(l.steps, Ordering::Relaxed);
        }
        Err(AllPinned)
    }

    /// One step of the hand for the bgwriter's victim queue: `Some((id, state))` if it
    /// pinned a victim there.
    pub fn step_once<F: Frames + ?Sized>(&self, f: &F) -> Option<(u32, u64)> {
        let mut l = lock_counted(&self.list);
        let r = match self.step(&mut l, f) {
            Some((id, Seen::Pinned(s))) => Some((id, s)),
            _ => None,
        };
        self.steps.store(l.steps, Ordering::Relaxed);
        r
    }

    /// Buffer `id` now holds a new page: it moves to the head (linked there if it came
    /// from the free list).
    pub fn retagged<F: Frames + ?Sized>(&self, f: &F, id: u32) {
        let mut l = lock_counted(&self.list);
        Self::unlink(&mut l, f, id);
        l.list.push_head(f, id);
    }

    /// Up to `max` buffers in the order the hand will come to them: from the hand toward
    /// the head, then from the tail.
    pub fn lru_order<F: Frames + ?Sized>(&self, f: &F, max: usize, out: &mut Vec<u32>) {
        let l = lock_counted(&self.list);
        let mut at = if l.hand == NIL { l.list.tail } else { l.hand };
        let max = max.min(l.list.len as usize);
        while out.len() < max && at != NIL {
            out.push(at);
            at = match newer(f.link(at).load(Ordering::Relaxed)) {
                NIL => l.list.tail,
                n => n,
            };
        }
    }

    /// Buffer `id` is losing its page (its relation was dropped): off the list.
    pub fn freed<F: Frames + ?Sized>(&self, f: &F, id: u32) {
        let mut l = lock_counted(&self.list);
        Self::unlink(&mut l, f, id);
    }

    fn unlink<F: Frames + ?Sized>(l: &mut List, f: &F, id: u32) {
        if super::list::list_of(f.link(id).load(Ordering::Relaxed)).is_none() {
            return;
        }
        if l.hand == id {
            l.hand = newer(f.link(id).load(Ordering::Relaxed));
        }
        l.list.unlink(f, id);
    }

    /// Checks the list against the frames (quiescent): the buffers on it are those that
    /// hold a page, each once, links agree both ways, and its length is right.
    pub fn check<F: Frames + ?Sized>(&self, f: &F) -> Result<(), String> {
        let l = lock_counted(&self.list);
        let mut seen = vec![false; f.len()];
        l.list.check(f, &mut seen)?;
        check_membership(f, &seen)
    }
}
