//! S3-FIFO (Yang et al., SOSP 2023): new pages enter a small FIFO S (a tenth of the pool);
//! at S's tail a page used twice while there moves to the main FIFO M, else it is evicted
//! and its identity goes to a ghost queue G; a page whose identity is in G enters M
//! directly. M is a FIFO with reinsertion: a used tail page goes back to the head with one
//! use fewer. Evictions come from S while it holds at least its tenth, else from M.
//!
//! Owns: the rule over S (list 0) and M (list 1) of `queues.rs`, and the ghost queue G
//! (tag hashes, as many as M holds, `ghost.rs`). The frequency is the state word's usage
//! count read as min(usage, 3). Where it departs from the paper's Algorithm 1, which runs
//! one request at a time: as every `queues.rs` rule (busy tails, victims recorded at
//! `retagged`), and each miss evicts exactly one page (the pool's frames are fixed), so a promotion into a full M does not
//! evict from M at once: M gives a page up when S is below its share. G ages by
//! insertions: an entry taken by a re-admission keeps its slot until it would have left
//! (the authors' fingerprint-and-insertion-time table behaves so). A replay matches a
//! plain sequential statement of this miss for miss (`replay.rs` tests).
//! Invariants and locks: those of `queues.rs`.

use super::ghost::Ghosts;
use super::queues::{Lists, Queues, Rule, Then};

/// S's share of the pool, percent (the paper's 10%).
const SMALL_PERCENT: u64 = 10;
/// A page at S's tail moves to M if used at least this often while in S (Algorithm 1's
/// `freq > 1`).
const PROMOTE_USAGE: u64 = 2;
/// The paper's frequency counts to 3 (two bits).
const FREQ_MAX: u64 = 3;
const SMALL: u8 = 0;
const MAIN: u8 = 1;

#[derive(Debug)]
pub(in crate::buffer) struct S3FifoRule {
    small_target: u64,
    ghost_cap: usize,
}

/// S3-FIFO over `nbuffers` frames.
pub(in crate::buffer) type S3Fifo = Queues<S3FifoRule, Ghosts>;

pub(in crate::buffer) fn s3fifo(nbuffers: usize) -> S3Fifo {
    let n = nbuffers as u64;
    let small_target = (n * SMALL_PERCENT / 100).max(1);
    let ghost_cap = (n - small_target.min(n)) as usize;
    Queues::new(
        S3FifoRule {
            small_target,
            ghost_cap,
        },
        Ghosts::by_slots(ghost_cap),
    )
}

impl Rule<Ghosts> for S3FifoRule {
    fn visit(&self, l: &Lists, _: &Ghosts) -> u8 {
        let s = l.len(SMALL);
        if s > 0 && (s >= self.small_target || l.len(MAIN) == 0) {
            SMALL
        } else {
            MAIN
        }
    }

    fn then(&self, list: u8, usage: u64, _: &Lists) -> Then {
        match (list, usage) {
            (SMALL, u) if u >= PROMOTE_USAGE => Then::Move { to: MAIN, usage: u },
            (MAIN, u) if u > 0 => Then::Move {
                to: MAIN,
                usage: u.min(FREQ_MAX) - 1,
            },
            _ => Then::Evict,
        }
    }

    fn admit(&self, _: &Lists, g: &mut Ghosts, was: Option<u8>, old: Option<u64>, new: u64) -> u8 {
        if let (Some(SMALL), Some(h)) = (was, old) {
            // G ages by insertions: a taken entry keeps its slot until it would have left.
            if self.ghost_cap > 0 {
                if g.slots() == self.ghost_cap {
                    g.pop_oldest_slot();
                }
                g.push(h);
            }
        }
        if g.take(new) {
            MAIN
        } else {
            SMALL
        }
    }

    fn check(&self, _: &Lists, g: &Ghosts) -> Result<(), String> {
        g.check("G", self.ghost_cap)
    }

    fn evicts_up_to(&self, list: u8) -> u64 {
        if list == SMALL {
            PROMOTE_USAGE - 1
        } else {
            0
        }
    }

    fn lanes(&self) -> &'static [u8] {
        &[SMALL, MAIN]
    }
}
