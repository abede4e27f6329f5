//! 2Q (Johnson and Shasha, VLDB 1994), which PostgreSQL 8.0.2 put in place of ARC: new
//! pages enter a FIFO A1in; a page reaching A1in's tail is evicted whatever its uses there
//! (they are taken as correlated, one burst of use), and its identity goes to the ghost
//! FIFO A1out; a page whose identity is in A1out is admitted to Am, the list of pages
//! wanted again after a while. Evictions come from A1in while it holds more than Kin
//! pages, else from Am. This is the paper's full version with its suggested sizes (Kin a
//! quarter of the pool, Kout half of it). The paper keeps Am in LRU order, which moves a
//! page on every hit and would put a lock on the hit path; here Am is a clock (the
//! substitution CAR makes for ARC's lists): a used page at Am's tail has its use cleared
//! and goes back to the head, an unused one is the victim.
//!
//! Owns: the rule over A1in (list 0) and Am (list 1) of `queues.rs`, and A1out
//! (`ghost.rs`). A replay matches the page-at-a-time statement of the same on vectors
//! miss for miss (`replay.rs` tests).
//! Invariants and locks: those of `queues.rs`; A1out holds at most Kout entries.

use super::ghost::Ghosts;
use super::queues::{Lists, Queues, Rule, Then};

/// Kin, A1in's share of the pool, percent (the paper's suggested 25%).
const KIN_PERCENT: u64 = 25;
/// Kout, A1out's size as a share of the pool, percent (the paper's suggested 50%).
const KOUT_PERCENT: u64 = 50;
const A1IN: u8 = 0;
const AM: u8 = 1;

#[derive(Debug)]
pub(in crate::buffer) struct TwoQRule {
    kin: u64,
    kout: usize,
}

/// 2Q over `nbuffers` frames.
pub(in crate::buffer) type TwoQ = Queues<TwoQRule, Ghosts>;

pub(in crate::buffer) fn two_q(nbuffers: usize) -> TwoQ {
    let n = nbuffers as u64;
    let kout = (n * KOUT_PERCENT / 100) as usize;
    Queues::new(
        TwoQRule {
            kin: (n * KIN_PERCENT / 100).max(1),
            kout,
        },
        Ghosts::by_live(kout),
    )
}

impl Rule<Ghosts> for TwoQRule {
    fn visit(&self, l: &Lists, _: &Ghosts) -> u8 {
        if l.len(A1IN) > self.kin || l.len(AM) == 0 {
            A1IN
        } else {
            AM
        }
    }

    fn then(&self, list: u8, usage: u64, _: &Lists) -> Then {
        if list == AM && usage > 0 {
            Then::Move { to: AM, usage: 0 }
        } else {
            Then::Evict
        }
    }

    fn admit(
        &self,
        _: &Lists,
        out: &mut Ghosts,
        was: Option<u8>,
        old: Option<u64>,
        new: u64,
    ) -> u8 {
        if let (Some(A1IN), Some(h)) = (was, old) {
            out.push(h);
            if out.len() > self.kout {
                out.pop_oldest_live();
            }
        }
        if out.take(new) {
            AM
        } else {
            A1IN
        }
    }

    fn check(&self, _: &Lists, out: &Ghosts) -> Result<(), String> {
        out.check("A1out", self.kout)
    }

    fn evicts_up_to(&self, list: u8) -> u64 {
        // A1in's tail goes whatever its uses there.
        if list == A1IN {
            u64::MAX
        } else {
            0
        }
    }

    fn lanes(&self) -> &'static [u8] {
        &[A1IN, AM]
    }
}
