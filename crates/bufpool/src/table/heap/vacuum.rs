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

use super::page::{
    HeapPage, ItemId, XMAX_COMMITTED, XMAX_EXCL_LOCK, XMAX_INVALID, XMAX_IS_MULTI, XMAX_LOCK_ONLY,
};
use super::Heap;
use crate::buffer::{PageWriteGuard, Ring, RingKind};
use crate::scan::ReadStream;
use crate::sync::Ordering;
use crate::table::HeapError;
use crate::txn::{ClogError, MultiId, XidStatus, FROZEN_XID, INVALID_XID};
use crate::types::ForkNumber;

/// What VACUUM did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VacuumReport {
    pub pages: u32,
    /// Dead versions whose space was reclaimed.
    pub removed: u64,
    pub truncated_pages: u32,
    /// Tuples whose multixact xmax (all members ended) became a plain one.
    pub multis_replaced: u64,
    /// The relation's multixact bound afterwards: no tuple names an older multixact.
    pub multi_bound: u32,
}

/// What a VACUUM pass learned of the multixacts in its relation.
struct MultiSweep {
    replaced: u64,
    /// The oldest multixact it had to keep (a member still running).
    kept: Option<MultiId>,
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
        // Any multixact written into the relation behind this pass is at least this (ids
        // are handed out under the page lock the pass also takes, see `txn::multixact`).
        let multis = self.engine.txns().multis();
        let cutoff = multis.positions().next_multi;
        let mut sweep = MultiSweep {
            replaced: 0,
            kept: None,
        };
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
            self.replace_multis_locked(&mut g, &mut sweep)?;
            report.removed += self.prune_locked(&mut g, horizon, true)?;
            let page = HeapPage(&g);
            if (1..=page.slots()).any(|s| page.item(s) != ItemId::Unused) {
                last_nonempty = Some(block);
            }
        }
        self.hint.store(0, Ordering::Relaxed);
        report.multis_replaced = sweep.replaced;
        report.multi_bound = sweep.kept.map_or(cutoff, |k| k.min(cutoff));
        multis.set_rel_bound(self.rel, report.multi_bound);
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

impl Heap<'_> {
    /// Replaces every multixact xmax on the page under `g` whose members have all ended
    /// (PostgreSQL's FreezeMultiXactId, reduced): the updater or deleter, if any, becomes
    /// the plain xmax (hinted committed or invalid by its outcome), a lock-only one becomes
    /// no xmax at all. A logged change, not a hint: redo must reproduce it before the
    /// multixact is truncated. Multixacts with a running member are kept (`sweep.kept`).
    fn replace_multis_locked(
        &self,
        g: &mut PageWriteGuard<'_>,
        sweep: &mut MultiSweep,
    ) -> Result<(), HeapError> {
        let txns = self.engine.txns();
        let page = HeapPage(g);
        let mut changes = Vec::new();
        for slot in 1..=page.slots() {
            let Some((h, _)) = page.tuple(slot) else {
                continue;
            };
            if h.infomask & XMAX_IS_MULTI == 0 {
                continue;
            }
            let members = txns.multis().members(h.xmax).map_err(ClogError::from)?;
            if members.iter().any(|&(x, _)| txns.is_running(x)) {
                sweep.kept = Some(sweep.kept.map_or(h.xmax, |k| k.min(h.xmax)));
                continue;
            }
            let mut nh = h;
            nh.infomask &=
                !(XMAX_IS_MULTI | XMAX_LOCK_ONLY | XMAX_EXCL_LOCK | XMAX_COMMITTED | XMAX_INVALID);
            match members.iter().find(|(_, mode)| mode.is_update()) {
                Some(&(u, _)) => {
                    nh.xmax = u;
                    nh.infomask |= match txns.status(u)? {
                        XidStatus::Committed => XMAX_COMMITTED,
                        _ => XMAX_INVALID, // not running and not committed: aborted
                    };
                }
                None => {
                    nh.xmax = INVALID_XID;
                    nh.infomask |= XMAX_INVALID;
                }
            }
            changes.push((slot, nh));
        }
        if !changes.is_empty() {
            self.change_logged(FROZEN_XID, g, |p| {
                for (slot, nh) in &changes {
                    p.set_header(*slot, nh);
                }
            })?;
            sweep.replaced += changes.len() as u64;
        }
        Ok(())
    }
}
