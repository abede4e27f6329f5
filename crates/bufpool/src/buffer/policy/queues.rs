//! The frame shared by the two-list policies (S3-FIFO, ARC, 2Q, the cooling stage): two
//! lists through the buffers' policy words (`list.rs`), a victim search that visits one
//! list's tail per step, and admission of a new page to one of them; each policy is a
//! [`Rule`] saying which tail to visit, what to do with an unpinned buffer there, and where
//! a new page goes (with its ghost lists, if it keeps any).
//!
//! Owns: [`Queues`]: both lists and the rule's own state behind one mutex, and the step
//! count. A hit takes no lock and calls nothing: each rule reads its hit record (a
//! reference bit, a frequency) from the state word's usage count, which the pin's own
//! compare-and-swap raises. Common to every rule, where the algorithms (stated one request
//! at a time) say nothing: a tail buffer pinned or header-locked by another thread is in
//! use and goes back to its own list's head, and once a pass has found every buffer of the
//! list the rule chose busy it goes on at the other list's tail (else a pool whose only
//! unpinned buffers sit on the other list would be reported all pinned); a victim stays
//! linked, in place, until
//! `retagged` (so a claim that gives it up needs no call), and only then is its identity
//! recorded and the new page linked.
//! Invariants: the buffers on the lists are exactly those that hold a page, each once
//! (`check`).
//! Locks: one leaf mutex per pool (`replacement_lock` counts its waits), on the miss path
//! with no other lock held, and in `drop_buffers` (`freed`) under that buffer's partition
//! and header locks. Under it only state words are touched, by compare-and-swap, and a
//! locked header is passed as busy, never waited for.

use super::list::{check_membership, list_of, lock_counted, DList};
use super::{AllPinned, Frames, BUSY_LAPS_MAX};
use crate::buffer::state::{refcount, usage, LOCKED, REFCOUNT_ONE, USAGE_MASK, USAGE_SHIFT};
use crate::sync::{yield_now, AtomicU64, Mutex, Ordering};

/// What a step does with the unpinned buffer at a list's tail.
pub enum Then {
    /// Take it (pin it) as the victim.
    Evict,
    /// Move it to the head of list `to`, its usage count set to `usage`.
    Move { to: u8, usage: u64 },
}

/// Both lists (numbered 0 and 1 in the link words).
#[derive(Debug)]
pub struct Lists {
    pub lists: [DList; 2],
    steps: u64,
}

impl Lists {
    pub fn len(&self, list: u8) -> u64 {
        self.lists[list as usize].len
    }
}

/// One policy's decisions, given both lists and its own state `X`.
pub trait Rule<X> {
    /// The list whose tail the next step visits; never an empty one while the other holds
    /// buffers.
    fn visit(&self, l: &Lists, x: &X) -> u8;
    /// What to do with an unpinned buffer of usage `usage` at the tail of `list`.
    fn then(&self, list: u8, usage: u64, l: &Lists) -> Then;
    /// A victim left list `was` (None: it came from the free list) and held the page
    /// hashed `old`; the page hashed `new` replaces it: records ghosts and returns the
    /// list the new page enters.
    fn admit(&self, l: &Lists, x: &mut X, was: Option<u8>, old: Option<u64>, new: u64) -> u8;
    /// Checks the rule's own state against the lists (quiescent).
    fn check(&self, l: &Lists, x: &X) -> Result<(), String>;
    /// The highest usage count at which an unpinned buffer on `list` is evicted when the
    /// search reaches it (what the bgwriter may clean as reusable there).
    fn evicts_up_to(&self, _list: u8) -> u64 {
        0
    }
    /// The lists victims come from, in the order the bgwriter should clean them; the
    /// second entry, if any, is the frequent list (`bgwriter_lists = frequent`).
    fn lanes(&self) -> &'static [u8];
}

#[derive(Debug)]
struct Inner<X> {
    l: Lists,
    x: X,
}

/// A two-list policy following `R`.
#[derive(Debug)]
pub(in crate::buffer) struct Queues<R, X> {
    inner: Mutex<Inner<X>>,
    rule: R,
    /// `Lists::steps`, readable without the lock.
    steps: AtomicU64,
}

/// What one step at a tail did.
enum Step {
    Empty,
    Busy,
    Moved,
    Pinned(u32, u64),
}

impl<R, X: super::HeapBytes> Queues<R, X> {
    /// The heap the policy's own state holds beyond the descriptors' policy words (ghost
    /// lists), in bytes.
    pub fn heap_bytes(&self) -> usize {
        self.inner.lock().x.heap_bytes()
    }
}

impl<X, R: Rule<X>> Queues<R, X> {
    pub fn new(rule: R, x: X) -> Self {
        Self {
            inner: Mutex::new(Inner {
                l: Lists {
                    lists: [DList::new(0), DList::new(1)],
                    steps: 0,
                },
                x,
            }),
            rule,
            steps: AtomicU64::new(0),
        }
    }

    pub fn steps(&self) -> u64 {
        self.steps.load(Ordering::Relaxed)
    }

    /// One step; `busy` counts the busy buffers met on each list in this pass.
    fn step<F: Frames + ?Sized>(&self, i: &mut Inner<X>, f: &F, busy: &mut [u64; 2]) -> Step {
        let l = &mut i.l;
        if l.len(0) + l.len(1) == 0 {
            return Step::Empty;
        }
        let mut from = self.rule.visit(l, &i.x);
        if busy[from as usize] >= l.len(from) && l.len(1 - from) > 0 {
            from = 1 - from;
        }
        let id = l.lists[from as usize].tail;
        l.steps += 1;
        let w = f.state(id);
        let s = w.load(Ordering::Relaxed);
        if s & LOCKED != 0 || refcount(s) != 0 {
            l.lists[from as usize].unlink(f, id);
            l.lists[from as usize].push_head(f, id);
            busy[from as usize] += 1;
            return Step::Busy;
        }
        match self.rule.then(from, usage(s), l) {
            Then::Move { to, usage: u } => {
                if u != usage(s) {
                    let new = (s & !USAGE_MASK) | (u << USAGE_SHIFT);
                    // A lost race means a pin came in meanwhile: it keeps its uses.
                    let _ = w.compare_exchange(s, new, Ordering::Relaxed, Ordering::Relaxed);
                }
                l.lists[from as usize].unlink(f, id);
                l.lists[to as usize].push_head(f, id);
                Step::Moved
            }
            Then::Evict => {
                match w.compare_exchange(s, s + REFCOUNT_ONE, Ordering::Acquire, Ordering::Relaxed)
                {
                    Ok(_) => Step::Pinned(id, s + REFCOUNT_ONE),
                    Err(_) => Step::Busy,
                }
            }
        }
    }

    /// Steps until a victim, returned pinned; it stays linked until `retagged`.
    pub fn victim<F: Frames + ?Sized>(&self, f: &F) -> Result<(u32, u64), AllPinned> {
        for lap in 0..BUSY_LAPS_MAX {
            if lap > 0 {
                yield_now();
            }
            let mut i = lock_counted(&self.inner);
            // Moves restart the count: both lists busy in a row end the pass.
            let mut busy = [0u64; 2];
            while busy[0] + busy[1] < i.l.len(0) + i.l.len(1) {
                match self.step(&mut i, f, &mut busy) {
                    Step::Empty => break,
                    Step::Pinned(id, s) => {
                        self.steps.store(i.l.steps, Ordering::Relaxed);
                        return Ok((id, s));
                    }
                    Step::Moved => busy = [0; 2],
                    Step::Busy => {}
                }
            }
            self.steps.store(i.l.steps, Ordering::Relaxed);
        }
        Err(AllPinned)
    }

    /// One step for the bgwriter's victim queue: a victim if it pinned one. The victim
    /// goes to its list's head, as the clock's hand passes the buffer it queues: else the
    /// next step would find it at the tail again and queue it twice.
    pub fn step_once<F: Frames + ?Sized>(&self, f: &F) -> Option<(u32, u64)> {
        let mut i = lock_counted(&self.inner);
        let r = match self.step(&mut i, f, &mut [0; 2]) {
            Step::Pinned(id, s) => {
                if let Some(w) = list_of(f.link(id).load(Ordering::Relaxed)) {
                    i.l.lists[w as usize].unlink(f, id);
                    i.l.lists[w as usize].push_head(f, id);
                }
                Some((id, s))
            }
            _ => None,
        };
        self.steps.store(i.l.steps, Ordering::Relaxed);
        r
    }

    /// Buffer `id` now holds the page hashed `new`; it held the page hashed `old`, if any.
    pub fn retagged<F: Frames + ?Sized>(&self, f: &F, id: u32, old: Option<u64>, new: u64) {
        let mut i = lock_counted(&self.inner);
        let i = &mut *i;
        let was = list_of(f.link(id).load(Ordering::Relaxed));
        if let Some(w) = was {
            i.l.lists[w as usize].unlink(f, id);
        }
        let to = self.rule.admit(&i.l, &mut i.x, was, old, new);
        i.l.lists[to as usize].push_head(f, id);
    }

    /// Buffer `id` is losing its page (its relation was dropped): off its list.
    pub fn freed<F: Frames + ?Sized>(&self, f: &F, id: u32) {
        let mut i = lock_counted(&self.inner);
        if let Some(w) = list_of(f.link(id).load(Ordering::Relaxed)) {
            i.l.lists[w as usize].unlink(f, id);
        }
    }

    /// Up to `max` buffers from the tails of the lanes victims come from (only the
    /// frequent one with `frequent_only`), alternating between them, oldest first: the
    /// order the bgwriter cleans in (PostgreSQL 8.0 walked ARC's T1 and T2 so).
    pub fn lru_order<F: Frames + ?Sized>(
        &self,
        f: &F,
        frequent_only: bool,
        max: usize,
        out: &mut Vec<u32>,
    ) {
        let lanes = self.rule.lanes();
        let lanes = match (frequent_only, lanes) {
            (true, [_, frequent]) => std::slice::from_ref(frequent),
            _ => lanes,
        };
        let i = lock_counted(&self.inner);
        let mut at: Vec<u32> = lanes.iter().map(|&l| i.l.lists[l as usize].tail).collect();
        while out.len() < max {
            let mut any = false;
            for a in at.iter_mut().filter(|a| **a != super::list::NIL) {
                if out.len() < max {
                    out.push(*a);
                }
                *a = super::list::newer(f.link(*a).load(Ordering::Relaxed));
                any = true;
            }
            if !any {
                break;
            }
        }
    }

    /// The highest usage at which buffer `id` is evicted where it stands (0 off the lists).
    pub fn evicts_up_to<F: Frames + ?Sized>(&self, f: &F, id: u32) -> u64 {
        list_of(f.link(id).load(Ordering::Relaxed)).map_or(0, |l| self.rule.evicts_up_to(l))
    }

    /// Checks both lists and the rule's state against the frames (quiescent).
    pub fn check<F: Frames + ?Sized>(&self, f: &F) -> Result<(), String> {
        let i = lock_counted(&self.inner);
        let mut seen = vec![false; f.len()];
        for list in &i.l.lists {
            list.check(f, &mut seen)?;
        }
        self.rule.check(&i.l, &i.x)?;
        check_membership(f, &seen)
    }
}
