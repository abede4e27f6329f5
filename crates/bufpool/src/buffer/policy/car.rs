//! ARC as PostgreSQL 8.0 used it, made concurrent as CAR (Bansal and Modha, "CAR: Clock
//! with Adaptive Replacement", FAST 2004): T1 holds pages seen once recently, T2 pages seen
//! at least twice; B1 and B2 remember the identities of pages evicted from T1 and T2; a
//! target `p` for T1's size grows on a hit in B1 (recency was too short) and shrinks on a
//! hit in B2. ARC keeps T1 and T2 in LRU order and moves a page on every hit, which would
//! put a lock on the hit path; CAR replaces each LRU list by a clock whose hit record is a
//! reference bit, and is the approximation used here: the bit is the state word's usage
//! count (> 0), set by the pin's own compare-and-swap, and the victim search clears it.
//!
//! Owns: the rule over T1 (list 0) and T2 (list 1) of `queues.rs`, B1 and B2 (`ghost.rs`)
//! and `p`. The search (CAR's `replace`): from T1's tail while |T1| ≥ max(1, p), else
//! T2's; a referenced page there has its bit cleared and moves to T2's head; an
//! unreferenced one is the victim. At `retagged`, the victim's identity enters B1 or B2
//! (the list it left); the new page enters T2 if either ghost list held it (adapting `p`),
//! else T1, after CAR's directory trim keeps |T1| + |B1| ≤ c and the four lists ≤ 2c.
//! The paper's page-at-a-time statement, on vectors, is what a replay must match miss for
//! miss (`replay.rs` tests).
//! Invariants and locks: those of `queues.rs`; B1 and B2 hold at most c entries together
//! with their lists as above.

use super::ghost::Ghosts;
use super::queues::{Lists, Queues, Rule, Then};

const T1: u8 = 0;
const T2: u8 = 1;

/// B1, B2 and the target size of T1.
#[derive(Debug)]
pub(in crate::buffer) struct Directory {
    b1: Ghosts,
    b2: Ghosts,
    p: u64,
}

#[derive(Debug)]
pub(in crate::buffer) struct CarRule {
    c: u64,
}

impl super::HeapBytes for Directory {
    fn heap_bytes(&self) -> usize {
        self.b1.heap_bytes() + self.b2.heap_bytes()
    }
}

/// CAR over `nbuffers` frames.
pub(in crate::buffer) type Car = Queues<CarRule, Directory>;

pub(in crate::buffer) fn car(nbuffers: usize) -> Car {
    Queues::new(
        CarRule { c: nbuffers as u64 },
        Directory {
            b1: Ghosts::by_live(nbuffers),
            b2: Ghosts::by_live(nbuffers),
            p: 0,
        },
    )
}

impl Rule<Directory> for CarRule {
    fn visit(&self, l: &Lists, d: &Directory) -> u8 {
        if l.len(T1) > 0 && (l.len(T1) >= d.p.max(1) || l.len(T2) == 0) {
            T1
        } else {
            T2
        }
    }

    fn then(&self, _: u8, usage: u64, _: &Lists) -> Then {
        if usage > 0 {
            Then::Move { to: T2, usage: 0 }
        } else {
            Then::Evict
        }
    }

    fn admit(
        &self,
        l: &Lists,
        d: &mut Directory,
        was: Option<u8>,
        old: Option<u64>,
        new: u64,
    ) -> u8 {
        match (was, old) {
            (Some(T1), Some(h)) => d.b1.push(h),
            (Some(_), Some(h)) => d.b2.push(h),
            _ => {}
        }
        let (b1, b2) = (d.b1.len() as u64, d.b2.len() as u64);
        if d.b1.take(new) {
            d.p = (d.p + (b2 / b1).max(1)).min(self.c);
            return T2;
        }
        if d.b2.take(new) {
            d.p = d.p.saturating_sub((b1 / b2).max(1));
            return T2;
        }
        // CAR's directory trim. The paper trims only when the cache was full; ghosts exist
        // only once it has been, so trimming on every miss is the same there, and it keeps
        // the bounds after `drop_buffers` has emptied frames too.
        if l.len(T1) + b1 >= self.c {
            d.b1.pop_oldest_live();
        } else if l.len(T1) + l.len(T2) + b1 + b2 >= 2 * self.c {
            d.b2.pop_oldest_live();
        }
        T1
    }

    fn check(&self, l: &Lists, d: &Directory) -> Result<(), String> {
        let c = self.c as usize;
        d.b1.check("B1", c)?;
        d.b2.check("B2", c)?;
        let (t1, t2, b1, b2) = (l.len(T1), l.len(T2), d.b1.len() as u64, d.b2.len() as u64);
        if t1 + b1 > self.c || t1 + t2 + b1 + b2 > 2 * self.c || d.p > self.c {
            return Err(format!(
                "ARC's directory over c = {c}: |T1| {t1} |T2| {t2} |B1| {b1} |B2| {b2} p {}",
                d.p
            ));
        }
        Ok(())
    }

    fn lanes(&self) -> &'static [u8] {
        &[T1, T2]
    }
}
