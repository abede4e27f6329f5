//! VACUUM ([`Heap::vacuum`]) and its [`VacuumReport`].
//!
//! VACUUM prunes every page with the horizon of the oldest running snapshot (see
//! [`prune`](super::prune)), and also turns dead line pointers (rows whose chain ended in
//! a committed delete) into unused ones, so their slots can be reused: an index must drop
//! its entries for deleted rows first, or recheck the key of what it fetches. It records
//! each page's free space in the map, points the insertion hint back at the first block
//! (space may now be free anywhere) and, when asked to truncate, cuts off the empty pages
//! at the end of the relation.
//!
//! Invariants: roots of rows that still exist are never freed, so tuple ids held by
//! indexes and callers stay valid. Truncation is not WAL-logged, so it is followed by a
//! checkpoint: replay never goes back across it. It needs the table to itself (nothing
//! else may be inserting).
//!
//! Heap pages are read through a vacuum ring (`buffer/ring.rs`; the pool's
//! `vacuum_buffer_usage_limit`, or the caller's ring with [`Heap::vacuum_with`]), so a
//! VACUUM does not push the rest of the pool out; the free-space map's pages are read
//! normally (they are few and stay hot).
//!
//! Locks: one heap page's write lock at a time, in block order, with the free-space map's
//! page lock taken under it by pruning (heap → fsm). Truncation (flush, truncate both
//! forks, checkpoint) holds no page lock.

use super::Heap;
use crate::buffer::{Ring, RingKind};
use crate::scan::ReadStream;
use crate::sync::Ordering;
use crate::table::heap_page::{HeapPage, ItemId};
use crate::table::HeapError;
use crate::types::ForkNumber;

/// What VACUUM did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VacuumReport {
    pub pages: u32,
    /// Dead versions whose space was reclaimed.
    pub removed: u64,
    pub truncated_pages: u32,
}

impl Heap<'_> {
    /// VACUUM: prunes every page (dead line pointers become reusable, see the module doc)
    /// and records each page's free space; with `truncate`, also cuts off empty pages at
    /// the end (the caller must have the table to itself: nothing else may be inserting)
    /// and takes a checkpoint, so that replay never goes back across the (unlogged)
    /// truncation.
    /// Runs through a vacuum ring sized by the pool's `vacuum_buffer_usage_limit` (see
    /// [`Heap::vacuum_with`]).
    pub fn vacuum(&self, truncate: bool) -> Result<VacuumReport, HeapError> {
        let mut ring = self.engine.pool().ring(RingKind::Vacuum);
        self.vacuum_with(truncate, ring.as_mut())
    }

    /// [`Heap::vacuum`] reading the heap's pages through the caller's `ring` (`None`: the
    /// shared clock), so an experiment can compare ring configurations.
    pub fn vacuum_with(
        &self,
        truncate: bool,
        ring: Option<&mut Ring>,
    ) -> Result<VacuumReport, HeapError> {
        let pool = self.engine.pool();
        let horizon = self.engine.txns().oldest_xmin();
        let n = pool.nblocks(self.rel, ForkNumber::Main)?;
        let mut report = VacuumReport {
            pages: n,
            ..VacuumReport::default()
        };
        let mut last_nonempty = None;
        // Read ahead, pinning no more than the ring starts with (its own look-ahead must
        // not push its members out: PostgreSQL's pin limit for a strategy).
        let mut opts = *self.engine.read_stream_options();
        if let Some(r) = ring.as_deref() {
            opts.max_pins = Some(r.start_len().saturating_sub(1).max(1));
        }
        let stream = ReadStream::range(pool, self.rel, ForkNumber::Main, 0..n, ring, &opts);
        for buf in stream {
            let buf = buf?;
            let block = buf.tag().block;
            let mut g = buf.write();
            report.removed += self.prune_locked(&mut g, horizon, true)?;
            let page = HeapPage(&g);
            if (1..=page.slots()).any(|s| page.item(s) != ItemId::Unused) {
                last_nonempty = Some(block);
            }
        }
        self.hint.store(0, Ordering::Relaxed);
        let keep = last_nonempty.map_or(0, |b| b + 1);
        if truncate && keep < n {
            pool.flush_relation(self.rel)?;
            pool.truncate_relation(self.rel, ForkNumber::Main, keep)?;
            self.fsm.truncate(pool, keep)?;
            report.truncated_pages = n - keep;
            self.engine.checkpoint()?;
        }
        Ok(report)
    }
}
