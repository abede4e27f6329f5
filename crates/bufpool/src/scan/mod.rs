//! Sequential access over the buffer pool's public API: read streams (look-ahead, I/O
//! combining into vectored reads, reads run ahead of use) and synchronized-scan positions.
//! The multi-block miss itself (several pool buffers filled by one read) lives
//! in `buffer/`; this module decides which blocks to ask for and when.
//!
//! [`plan`] is the choice every large sequential scan makes first: where
//! to start and whether to read through a ring. Two rules, selected by the
//! `seqscan_strategy` knob:
//! - [`SeqscanStrategy::Quarter`] (PostgreSQL since 8.3): a table larger than a quarter of
//!   the pool is read through a bulk-read ring, starting at the synchronized position;
//!   smaller ones start at block 0 through the shared clock.
//! - [`SeqscanStrategy::Seed003`] (Heikki's heuristic): below `sync_threshold` × pool start
//!   at 0 and keep in cache; below `ring_threshold` × pool start at the synchronized
//!   position and keep in cache (the table may mostly fit, so its pages are worth keeping);
//!   above, start there and use the ring (keeping a tenth of a huge table is not worth the
//!   hot set it would push out).
//!
//! The cache trail (`seqscan_cache_trail`) applies only to scans that keep their
//! pages in cache and start at a reported position: such a scan first walks backwards from
//! that position over the pages still resident, then continues forwards. With a ring there
//! is no trail to follow.

pub mod read_stream;
pub mod syncscan;

pub use read_stream::{BlockSource, ReadStream, ReadStreamOptions, ReadStreamStats};
pub(crate) use syncscan::GROUP_WAIT_MAX;
pub use syncscan::{GroupMember, ScanPositions};

use crate::types::BlockNumber;

/// Which rule picks a scan's start and ring (the `seqscan_strategy` knob).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SeqscanStrategy {
    /// Ring and synchronized start above a quarter of the pool (PostgreSQL's rule).
    #[default]
    Quarter,
    /// Three bands by table size, Heikki Linnakangas's heuristic (see the module doc;
    /// the knob's word is `seed003`).
    Seed003,
}

/// What the scan knobs say (built by `Config::scan_options`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanOptions {
    /// Which rule picks a scan's start and ring (`seqscan_strategy`).
    pub strategy: SeqscanStrategy,
    /// `synchronize_seqscans`: large scans start at the shared reported position.
    pub synchronize: bool,
    /// Seed003 rule: tables below this many thousandths of the pool start at block 0.
    pub sync_threshold_thousandths: u64,
    /// Seed003 rule: tables above this many thousandths of the pool use a ring.
    pub ring_threshold_thousandths: u64,
    /// `seqscan_cache_trail`: the cache trail (see the module doc).
    pub cache_trail: bool,
    /// `seqscan_sync_pacing`: synchronized scans through rings join their table's group
    /// and the front one waits for the last (see `syncscan.rs`).
    pub sync_pacing: bool,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            strategy: SeqscanStrategy::Quarter,
            synchronize: true,
            sync_threshold_thousandths: 100,
            ring_threshold_thousandths: 5_000,
            cache_trail: false,
            sync_pacing: true,
        }
    }
}

/// A scan's choice: where it starts and how it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanPlan {
    /// Start at the synchronized position (and report progress) instead of block 0.
    pub synchronized: bool,
    /// Read through a bulk-read ring instead of the shared clock.
    pub ring: bool,
    /// Walk the cache trail backwards first.
    pub trail: bool,
}

/// The plan for a scan of `nblocks` pages in a pool of `nbuffers` (see the module doc).
pub fn plan(nblocks: BlockNumber, nbuffers: usize, opts: &ScanOptions) -> ScanPlan {
    // Sizes in thousandths of the pool, in u128 so no product overflows.
    let size = nblocks as u128 * 1000;
    let pool = nbuffers.max(1) as u128;
    let (large, ring) = match opts.strategy {
        SeqscanStrategy::Quarter => {
            let large = size > pool * 250;
            (large, large)
        }
        SeqscanStrategy::Seed003 => (
            size >= pool * opts.sync_threshold_thousandths as u128,
            size >= pool * opts.ring_threshold_thousandths as u128,
        ),
    };
    let synchronized = large && opts.synchronize;
    ScanPlan {
        synchronized,
        ring,
        trail: opts.cache_trail && synchronized && !ring,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed003() -> ScanOptions {
        ScanOptions {
            strategy: SeqscanStrategy::Seed003,
            ..ScanOptions::default()
        }
    }

    #[test]
    fn the_quarter_rule_rings_and_synchronizes_above_a_quarter_of_the_pool() {
        let o = ScanOptions::default();
        let small = plan(250, 1000, &o);
        assert!(!small.ring && !small.synchronized);
        let big = plan(251, 1000, &o);
        assert!(big.ring && big.synchronized && !big.trail);
        let off = ScanOptions {
            synchronize: false,
            ..o
        };
        let big = plan(251, 1000, &off);
        assert!(big.ring && !big.synchronized);
    }

    #[test]
    fn seed003_has_three_bands() {
        let o = seed003();
        assert_eq!(
            plan(99, 1000, &o),
            ScanPlan {
                synchronized: false,
                ring: false,
                trail: false
            }
        );
        let mid = plan(1200, 1000, &o);
        assert!(mid.synchronized && !mid.ring && !mid.trail);
        let huge = plan(5000, 1000, &o);
        assert!(huge.synchronized && huge.ring);
    }

    #[test]
    fn the_trail_needs_a_synchronized_scan_that_keeps_its_pages() {
        let o = ScanOptions {
            cache_trail: true,
            ..seed003()
        };
        assert!(plan(1200, 1000, &o).trail);
        assert!(!plan(50, 1000, &o).trail, "starts at 0: no trail to follow");
        assert!(!plan(6000, 1000, &o).trail, "through a ring: nothing kept");
        let quarter = ScanOptions {
            cache_trail: true,
            ..ScanOptions::default()
        };
        assert!(
            !plan(1200, 1000, &quarter).trail,
            "the quarter rule rings it"
        );
    }

    #[test]
    fn no_overflow_at_the_limits() {
        let o = seed003();
        let p = plan(u32::MAX, usize::MAX, &o);
        assert!(!p.ring);
        assert!(plan(u32::MAX, 1, &o).ring);
    }
}
