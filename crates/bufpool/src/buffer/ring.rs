//! Buffer access strategies (rings): a small set of buffers private to one operation
//! (a large sequential scan, a bulk load, a VACUUM), reused in turn so that the operation
//! does not push the rest of the pool out (seed 003; PostgreSQL's buffer README, "Buffer
//! Ring Replacement Strategy").
//!
//! STATUS: contract only. The pool threads `Option<&mut Ring>` through its load path
//! ([`BufferPool::read_with`], [`BufferPool::extend_with`], and the victim choice
//! `BufferPool::victim_for`); the ring itself does not hold buffers yet, so every victim
//! still comes from the shared clock.

use super::clock::AllPinned;
use super::BufferPool;
use crate::stats::IoContext;

/// Which operation a ring serves; fixes its I/O context and its reuse rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RingKind {
    /// Large sequential scans (PostgreSQL's BAS_BULKREAD): a dirty member whose reuse would
    /// force a WAL flush is left to the clock and replaced.
    BulkRead,
    /// Bulk loads (BAS_BULKWRITE).
    BulkWrite,
    /// VACUUM (BAS_VACUUM).
    Vacuum,
}

impl RingKind {
    /// The pg_stat_io context the ring's I/O is counted under.
    pub fn context(self) -> IoContext {
        match self {
            RingKind::BulkRead => IoContext::BulkRead,
            RingKind::BulkWrite => IoContext::BulkWrite,
            RingKind::Vacuum => IoContext::Vacuum,
        }
    }
}

/// One operation's ring. Owned by that operation (not shared between threads); holds buffer
/// ids, never pins.
#[derive(Debug)]
pub struct Ring {
    kind: RingKind,
}

impl Ring {
    /// A ring of `kind` with room for `bytes` of pages of `pool`; `None` when `bytes` is 0
    /// (no ring: the operation uses the shared clock like any other).
    pub fn new(kind: RingKind, bytes: usize, pool: &BufferPool) -> Option<Ring> {
        let _ = pool;
        (bytes > 0).then_some(Ring { kind })
    }

    pub fn kind(&self) -> RingKind {
        self.kind
    }
}

impl BufferPool {
    /// A victim for a miss: from `ring` when it has a reusable member, else from the
    /// bgwriter's queue or the clock sweep. Returned pinned, with its state word.
    pub(super) fn victim_for(&self, ring: Option<&mut Ring>) -> Result<(u32, u64), AllPinned> {
        let _ = ring;
        self.take_victim()
    }
}
