//! S3-FIFO (Yang et al., SOSP 2023): new pages enter a small FIFO S (a tenth of the pool);
//! at S's tail a page used twice while there moves to the main FIFO M, else it is evicted
//! and its identity goes to a ghost queue G; a page whose identity is in G enters M
//! directly. M is a FIFO with reinsertion: a used tail page goes back to the head with one
//! use fewer. Evictions come from S while it holds at least its tenth, else from M.
//!
//! Owns: S and M (lists through each buffer's policy word, `list.rs`), the ghost queue
//! (tag hashes in a FIFO of M's size, with a map from hash to its latest entry), behind one
//! mutex. The frequency is the state word's usage count read as min(usage, 3), raised by
//! the pin's own compare-and-swap, so a hit takes no lock. Where it departs from the
//! paper's Algorithm 1, which runs one request at a time: a tail buffer pinned by another
//! thread goes back to its list's head (it is in use); a victim stays linked, in place,
//! until `retagged` (so a claim that gives its victim up needs no call), and only then does
//! its identity enter G (it left S) and the new page enter S or M; and each miss evicts
//! exactly one page (the pool's frames are fixed), so a promotion into a full M does not
//! evict from M at once: M gives a page up when S is below its share. G ages by
//! insertions: an entry taken by a re-admission keeps its slot until it would have left
//! (the authors' fingerprint-and-insertion-time table behaves so). A replay matches a
//! plain sequential statement of this miss for miss (`replay.rs` tests).
//! Invariants: as `sieve.rs`: the buffers on S and M are those that hold a page, each once.
//! Locks: as `sieve.rs` (a leaf mutex; `drop_buffers` takes it under a header lock).

use std::collections::{HashMap, VecDeque};

use super::list::{check_membership, list_of, lock_counted, DList};
use super::{AllPinned, Frames, BUSY_LAPS_MAX};
use crate::buffer::state::{refcount, usage, LOCKED, REFCOUNT_ONE, USAGE_MASK, USAGE_SHIFT};
use crate::sync::{yield_now, AtomicU64, Mutex, Ordering};

/// S's share of the pool, percent (the paper's 10%).
const SMALL_PERCENT: u64 = 10;
/// A page at S's tail moves to M if used at least this often while in S (Algorithm 1's
/// `freq > 1`).
const PROMOTE_USAGE: u64 = 2;
/// The paper's frequency counts to 3 (two bits).
const FREQ_MAX: u64 = 3;
const SMALL: u8 = 0;
const MAIN: u8 = 1;

/// The ghost queue: hashes of pages evicted from S, oldest first, at most `cap`.
#[derive(Debug)]
struct Ghost {
    fifo: VecDeque<(u64, u64)>,
    /// Hash → sequence number of its latest entry in `fifo`.
    live: HashMap<u64, u64>,
    next: u64,
    cap: usize,
}

impl Ghost {
    fn new(cap: usize) -> Self {
        Self {
            fifo: VecDeque::with_capacity(cap),
            live: HashMap::with_capacity(cap),
            next: 0,
            cap,
        }
    }

    fn insert(&mut self, hash: u64) {
        if self.cap == 0 {
            return;
        }
        if self.fifo.len() == self.cap {
            let (old, seq) = self.fifo.pop_front().expect("full");
            if self.live.get(&old) == Some(&seq) {
                self.live.remove(&old);
            }
        }
        self.fifo.push_back((hash, self.next));
        self.live.insert(hash, self.next);
        self.next += 1;
    }

    /// Whether `hash` was in the queue (it leaves it).
    fn take(&mut self, hash: u64) -> bool {
        self.live.remove(&hash).is_some()
    }
}

#[derive(Debug)]
struct Lists {
    small: DList,
    main: DList,
    ghost: Ghost,
    steps: u64,
}

#[derive(Debug)]
pub(in crate::buffer) struct S3Fifo {
    lists: Mutex<Lists>,
    small_target: u64,
    steps: AtomicU64,
}

/// What one step at a tail did.
enum Step {
    /// Nothing to look at (both lists empty).
    Empty,
    /// The tail was busy, or moved (promoted, or reinserted with a use fewer).
    Busy,
    Moved,
    Pinned(u32, u64),
}

impl S3Fifo {
    pub fn new(nbuffers: usize) -> Self {
        let n = nbuffers as u64;
        let small_target = (n * SMALL_PERCENT / 100).max(1);
        Self {
            lists: Mutex::new(Lists {
                small: DList::new(SMALL),
                main: DList::new(MAIN),
                ghost: Ghost::new((n - small_target.min(n)) as usize),
                steps: 0,
            }),
            small_target,
            steps: AtomicU64::new(0),
        }
    }

    pub fn steps(&self) -> u64 {
        self.steps.load(Ordering::Relaxed)
    }

    /// One step at the tail of S (while it holds its share) or M.
    fn step<F: Frames + ?Sized>(&self, l: &mut Lists, f: &F) -> Step {
        if l.small.len + l.main.len == 0 {
            return Step::Empty;
        }
        let small = l.small.len > 0 && (l.small.len >= self.small_target || l.main.len == 0);
        let id = if small { l.small.tail } else { l.main.tail };
        l.steps += 1;
        let list = if small { &mut l.small } else { &mut l.main };
        let w = f.state(id);
        let s = w.load(Ordering::Relaxed);
        if s & LOCKED != 0 || refcount(s) != 0 {
            list.unlink(f, id);
            list.push_head(f, id);
            return Step::Busy;
        }
        let u = usage(s);
        if small && u >= PROMOTE_USAGE {
            l.small.unlink(f, id);
            l.main.push_head(f, id);
            return Step::Moved;
        }
        if !small && u > 0 {
            let less = (s & !USAGE_MASK) | ((u.min(FREQ_MAX) - 1) << USAGE_SHIFT);
            // A lost race means a pin came in meanwhile: it keeps its uses this time.
            let _ = w.compare_exchange(s, less, Ordering::Relaxed, Ordering::Relaxed);
            list.unlink(f, id);
            list.push_head(f, id);
            return Step::Moved;
        }
        match w.compare_exchange(s, s + REFCOUNT_ONE, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => Step::Pinned(id, s + REFCOUNT_ONE),
            Err(_) => Step::Busy,
        }
    }

    /// Evicts by Algorithm 1 and returns the victim pinned; it stays linked until
    /// `retagged`.
    pub fn victim<F: Frames + ?Sized>(&self, f: &F) -> Result<(u32, u64), AllPinned> {
        for lap in 0..BUSY_LAPS_MAX {
            if lap > 0 {
                yield_now();
            }
            let mut l = lock_counted(&self.lists);
            let mut busy_left = l.small.len + l.main.len;
            while busy_left > 0 {
                match self.step(&mut l, f) {
                    Step::Empty => break,
                    Step::Pinned(id, s) => {
                        self.steps.store(l.steps, Ordering::Relaxed);
                        return Ok((id, s));
                    }
                    Step::Moved => busy_left = l.small.len + l.main.len,
                    Step::Busy => busy_left -= 1,
                }
            }
            self.steps.store(l.steps, Ordering::Relaxed);
        }
        Err(AllPinned)
    }

    /// One step for the bgwriter's victim queue: a victim if it pinned one.
    pub fn step_once<F: Frames + ?Sized>(&self, f: &F) -> Option<(u32, u64)> {
        let mut l = lock_counted(&self.lists);
        let r = match self.step(&mut l, f) {
            Step::Pinned(id, s) => Some((id, s)),
            _ => None,
        };
        self.steps.store(l.steps, Ordering::Relaxed);
        r
    }

    /// Buffer `id` now holds the page hashed `new`; it held the page hashed `old` (if
    /// any): the old page's identity goes to G if it left S, and the new page enters M if
    /// G held its identity, else S.
    pub fn retagged<F: Frames + ?Sized>(&self, f: &F, id: u32, old: Option<u64>, new: u64) {
        let mut l = lock_counted(&self.lists);
        match list_of(f.link(id).load(Ordering::Relaxed)) {
            Some(SMALL) => {
                l.small.unlink(f, id);
                if let Some(h) = old {
                    l.ghost.insert(h);
                }
            }
            Some(_) => l.main.unlink(f, id),
            None => {}
        }
        if l.ghost.take(new) {
            l.main.push_head(f, id);
        } else {
            l.small.push_head(f, id);
        }
    }

    /// Buffer `id` is losing its page (its relation was dropped): off its list.
    pub fn freed<F: Frames + ?Sized>(&self, f: &F, id: u32) {
        let mut l = lock_counted(&self.lists);
        match list_of(f.link(id).load(Ordering::Relaxed)) {
            Some(SMALL) => l.small.unlink(f, id),
            Some(_) => l.main.unlink(f, id),
            None => {}
        }
    }

    /// Checks S, M and G against the frames (quiescent).
    pub fn check<F: Frames + ?Sized>(&self, f: &F) -> Result<(), String> {
        let l = lock_counted(&self.lists);
        let mut seen = vec![false; f.len()];
        l.small.check(f, &mut seen)?;
        l.main.check(f, &mut seen)?;
        if l.ghost.fifo.len() > l.ghost.cap || l.ghost.live.len() > l.ghost.fifo.len() {
            return Err(format!(
                "ghost queue: {} entries ({} live) over its {}",
                l.ghost.fifo.len(),
                l.ghost.live.len(),
                l.ghost.cap
            ));
        }
        check_membership(f, &seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ghost_queue_forgets_its_oldest_and_what_was_taken() {
        let mut g = Ghost::new(2);
        g.insert(1);
        g.insert(2);
        g.insert(1); // 1 again: its newer entry is live
        g.insert(3); // pushes out 2 (the old entry of 1 went at the last insert)
        assert!(g.take(1));
        assert!(!g.take(1), "taken once");
        assert!(!g.take(2), "pushed out");
        assert!(g.take(3));
    }
}
