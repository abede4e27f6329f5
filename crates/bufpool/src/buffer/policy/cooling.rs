//! A cooling stage (LeanStore, Leis et al., ICDE 2018; proposed for PostgreSQL in 2026):
//! a page is HOT or COOL. A new page is admitted COOL, to the cooling FIFO; a page used
//! while cooling is HOT again; the victim is the first page at the FIFO's tail still
//! COOL. Hot pages are not examined at all until the stage runs short: while the cooling
//! FIFO holds less than its share of the pool, hot pages are cooled (made COOL and put at
//! its head). A scan's pages enter the stage, are not used again and leave from it, so
//! the hot set is kept without rings.
//!
//! Owns: the rule over the cooling FIFO (list 0) and the hot list (list 1) of `queues.rs`.
//! HOT is the state word's usage count > 0, set by the pin's own compare-and-swap, so a
//! hit on a cooling page re-heats it without a lock; the page leaves the FIFO when it
//! reaches the tail (LeanStore takes it out at once, through its hash table), so until
//! then it still counts toward the stage. LeanStore cools pages picked at random; here
//! the hot page cooled is the one hot longest (the hot list's tail), so no random
//! generator sits on the miss path and a replay is deterministic.
//! Invariants and locks: those of `queues.rs`.

use super::queues::{Lists, Queues, Rule, Then};

/// The stage's share of the pool, percent (LeanStore keeps about a tenth of its pages
/// cooling).
const COOLING_PERCENT: u64 = 10;
const COOLING: u8 = 0;
const HOT: u8 = 1;

#[derive(Debug)]
pub(in crate::buffer) struct CoolingRule {
    target: u64,
}

/// The cooling stage over `nbuffers` frames.
pub(in crate::buffer) type Cooling = Queues<CoolingRule, ()>;

pub(in crate::buffer) fn cooling(nbuffers: usize) -> Cooling {
    let target = (nbuffers as u64 * COOLING_PERCENT / 100).max(1);
    Queues::new(CoolingRule { target }, ())
}

impl Rule<()> for CoolingRule {
    fn visit(&self, l: &Lists, _: &()) -> u8 {
        if (l.len(COOLING) < self.target && l.len(HOT) > 0) || l.len(COOLING) == 0 {
            HOT
        } else {
            COOLING
        }
    }

    fn then(&self, list: u8, usage: u64, _: &Lists) -> Then {
        match (list, usage) {
            (HOT, _) => Then::Move {
                to: COOLING,
                usage: 0,
            },
            (_, u) if u > 0 => Then::Move { to: HOT, usage: u },
            _ => Then::Evict,
        }
    }

    fn admit(&self, _: &Lists, _: &mut (), _: Option<u8>, _: Option<u64>, _: u64) -> u8 {
        COOLING
    }

    fn check(&self, _: &Lists, _: &()) -> Result<(), String> {
        Ok(())
    }

    fn lanes(&self) -> &'static [u8] {
        &[COOLING]
    }
}
