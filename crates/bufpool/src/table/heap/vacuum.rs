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
    XMIN_COMMITTED,
};
use super::Heap;
use crate::buffer::{PageWriteGuard, Ring, RingKind};
use crate::scan::{ReadStream, ReadStreamStats};
use crate::sync::Ordering;
use crate::table::HeapError;
use crate::txn::{ClogError, MultiId, XidStatus, FROZEN_XID, INVALID_XID};
use crate::types::ForkNumber;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// What VACUUM did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VacuumReport {
    /// The relation's size in pages when the pass began.
    pub pages: u32,
    /// Dead versions whose space was reclaimed.
    pub removed: u64,
    /// Empty pages cut off the end of the relation.
    pub truncated_pages: u32,
    /// Tuples whose multixact xmax (all members ended) became a plain one.
    pub multis_replaced: u64,
    /// The relation's multixact bound afterwards: no tuple names an older multixact.
    pub multi_bound: u32,
    /// Pages the pass went through (all of them unless interrupted).
    pub pages_scanned: u32,
    /// Tuples left whose insert committed and that no committed update or delete replaced:
    /// the relation's live-row estimate afterwards (`n_live_tup`). An insert still running
    /// counts as neither live nor dead, a delete still running as live (PostgreSQL's
    /// rule).
    pub live_tuples: u64,
    /// Dead versions the pass had to keep (a snapshot may still see them): the dead
    /// estimate afterwards (`n_dead_tup`).
    pub dead_kept: u64,
    /// Pages found in the pool, read from storage, and found clean and dirtied (the cost
    /// accounting's three kinds).
    pub pages_hit: u64,
    /// Pages read from storage.
    pub pages_read: u64,
    /// Pages found clean and dirtied by the pass.
    pub pages_dirtied: u64,
    /// Naps the cost limit imposed, and their total length.
    pub cost_naps: u64,
    /// The naps' total length.
    pub cost_nap_time: Duration,
    /// The pass stopped early when asked to ([`VacuumOptions::interrupt`]); pages it did
    /// not reach are as they were.
    pub interrupted: bool,
}

/// PostgreSQL's `vacuum_cost_page_hit`, `_miss` (its default since 14) and `_dirty`.
pub const VACUUM_COST_PAGE_HIT: u64 = 1;
/// Cost of a page read from storage (`vacuum_cost_page_miss`).
pub const VACUUM_COST_PAGE_MISS: u64 = 2;
/// Cost of a page the pass dirtied (`vacuum_cost_page_dirty`).
pub const VACUUM_COST_PAGE_DIRTY: u64 = 20;

/// Cost-based pacing (PostgreSQL's vacuum_cost_limit and _delay): each page costs
/// [`VACUUM_COST_PAGE_HIT`] found in the pool or [`VACUUM_COST_PAGE_MISS`] read, plus
/// [`VACUUM_COST_PAGE_DIRTY`] if the pass dirtied it; when the balance reaches `limit`
/// the pass naps (holding no page lock; the read stream keeps its pins) `delay` times the
/// balance over the limit, at most four times `delay`, and starts a new balance
/// (PostgreSQL's vacuum_delay_point).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VacuumCost {
    /// The cost balance at which the pass naps.
    pub limit: u64,
    /// The nap for a balance of `limit` (longer past it, at most four times this).
    pub delay: Duration,
}

/// How a VACUUM runs ([`Heap::vacuum_with_options`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct VacuumOptions<'a> {
    /// Cut off empty pages at the end (see [`Heap::vacuum`]).
    pub truncate: bool,
    /// Pace by cost (None: full speed, as a manual VACUUM with PostgreSQL's default
    /// vacuum_cost_delay of 0).
    pub cost: Option<VacuumCost>,
    /// Counted as an autovacuum (`autovacuum_count`) rather than a VACUUM.
    pub autovacuum: bool,
    /// Checked between pages: when set, the pass stops (no truncation, not counted). A
    /// `std` flag, not `crate::sync`'s: a request read with a relaxed load, which no model
    /// test explores (as the statistics counters).
    pub interrupt: Option<&'a AtomicBool>,
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
        self.vacuum_with(truncate, self.vacuum_ring().as_mut())
    }

    /// A new vacuum ring of this heap's pool (`vacuum_buffer_usage_limit`; None: 0, no
    /// ring).
    pub fn vacuum_ring(&self) -> Option<Ring> {
        self.engine.pool().ring(RingKind::Vacuum)
    }

    /// [`Heap::vacuum`] reading the heap's pages through the caller's `ring` (`None`: the
    /// shared clock), so an experiment can compare ring configurations.
    pub fn vacuum_with(
        &self,
        truncate: bool,
        ring: Option<&mut Ring>,
    ) -> Result<VacuumReport, HeapError> {
        let opts = VacuumOptions {
            truncate,
            ..VacuumOptions::default()
        };
        self.vacuum_with_options(&opts, ring)
    }

    /// [`Heap::vacuum_with`] with pacing, interruption and how it is counted (`opts`).
    pub fn vacuum_with_options(
        &self,
        opts: &VacuumOptions<'_>,
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
        let mut stream_opts = *self.engine.read_stream_options();
        if let Some(r) = ring.as_deref() {
            stream_opts.max_pins = Some(r.start_len().saturating_sub(1).max(1));
        }
        let mut stream =
            ReadStream::range(pool, self.rel, ForkNumber::Main, 0..n, ring, &stream_opts);
        let mut pacer = CostPacer::new(opts.cost);
        while let Some(buf) = stream.next() {
            if opts
                .interrupt
                .is_some_and(|i| i.load(std::sync::atomic::Ordering::Relaxed))
            {
                report.interrupted = true;
                break;
            }
            let buf = buf?;
            let block = buf.tag().block;
            let mut g = buf.write();
            self.replace_multis_locked(&mut g, &mut sweep)?;
            report.removed += self.prune_locked(&mut g, horizon, true)?;
            let page = HeapPage(&g);
            if (1..=page.slots()).any(|s| page.item(s) != ItemId::Unused) {
                last_nonempty = Some(block);
            }
            let (live, dead) = self.count_tuples(page, block)?;
            report.live_tuples += live;
            report.dead_kept += dead;
            report.pages_scanned += 1;
            let dirtied = g.dirtied_clean_page();
            drop(g);
            drop(buf);
            report.pages_dirtied += u64::from(dirtied);
            pacer.page(stream.stats(), dirtied, &mut report);
        }
        report.pages_hit = stream.stats().blocks_hit;
        report.pages_read = stream.stats().blocks_read;
        drop(stream);
        self.hint.store(0, Ordering::Relaxed);
        report.multis_replaced = sweep.replaced;
        if report.interrupted {
            return Ok(report);
        }
        report.multi_bound = sweep.kept.map_or(cutoff, |k| k.min(cutoff));
        multis.set_rel_bound(self.rel, report.multi_bound);
        let keep = last_nonempty.map_or(0, |b| b + 1);
        if opts.truncate && keep < n {
            pool.flush_relation(self.rel)?;
            pool.truncate_relation_with(self.rel, ForkNumber::Main, keep, &mut || {
                self.engine
                    .run_hook_at(crate::engine::HookPoint::VacuumTruncate, u64::from(keep))
            })?;
            self.fsm.truncate(pool, keep)?;
            report.truncated_pages = n - keep;
            self.engine.checkpoint()?;
        }
        (self.counters).count_vacuum(report.live_tuples, report.dead_kept, opts.autovacuum);
        Ok(report)
    }
}

impl Heap<'_> {
    /// The live and dead tuples left on `page`, block `block` (see
    /// [`VacuumReport::live_tuples`] and [`VacuumReport::dead_kept`]): by the hint bits,
    /// else by the commit log. A multixact xmax counts as not replaced (its updater, if
    /// any, is left to the next pass). The header-only stub a moved row's root keeps
    /// (pruning cut it down; it is kept for the indexes) is neither: the row is counted
    /// where it lives, and a stub is never a version to remove.
    fn count_tuples(&self, page: HeapPage<'_>, block: u32) -> Result<(u64, u64), HeapError> {
        let txns = self.engine.txns();
        let (mut live, mut dead) = (0, 0);
        for (h, d) in (1..=page.slots()).filter_map(|s| page.tuple(s)) {
            if d.is_empty() && h.ctid_block != block {
                continue;
            }
            let inserted = h.xmin == FROZEN_XID
                || h.infomask & XMIN_COMMITTED != 0
                || txns.status(h.xmin)? == XidStatus::Committed;
            let replaced = h.xmax != INVALID_XID
                && h.infomask & (XMAX_INVALID | XMAX_LOCK_ONLY | XMAX_IS_MULTI) == 0
                && (h.infomask & XMAX_COMMITTED != 0
                    || txns.status(h.xmax)? == XidStatus::Committed);
            match (inserted, replaced) {
                (true, false) => live += 1,
                (true, true) => dead += 1,
                _ => {} // an insert running (neither) or aborted (pruning's to remove)
            }
        }
        Ok((live, dead))
    }
}

/// The cost balance of one VACUUM pass (see [`VacuumCost`]).
struct CostPacer {
    cost: Option<VacuumCost>,
    balance: u64,
    /// The stream's hit and read counts already charged.
    hit: u64,
    read: u64,
}

impl CostPacer {
    fn new(cost: Option<VacuumCost>) -> Self {
        CostPacer {
            cost,
            balance: 0,
            hit: 0,
            read: 0,
        }
    }

    /// Charges the pages the stream found or read since the last call (reads ahead are
    /// charged when made) and one page dirtied if `dirtied`; naps when the limit is
    /// reached. Called with no page locked (the stream's look-ahead keeps its pins, on the
    /// pass's own ring members).
    fn page(&mut self, s: &ReadStreamStats, dirtied: bool, report: &mut VacuumReport) {
        let Some(cost) = self.cost else {
            return;
        };
        self.balance += (s.blocks_hit - self.hit) * VACUUM_COST_PAGE_HIT
            + (s.blocks_read - self.read) * VACUUM_COST_PAGE_MISS
            + u64::from(dirtied) * VACUUM_COST_PAGE_DIRTY;
        (self.hit, self.read) = (s.blocks_hit, s.blocks_read);
        if self.balance >= cost.limit {
            // Pacing by design (PostgreSQL's vacuum_delay_point), not a wait for another
            // thread: the delay scaled by how far the balance went past the limit (read-ahead
            // charges pages in bursts), at most four delays.
            let t = Instant::now();
            let over = (self.balance as f64 / cost.limit as f64).min(4.0);
            std::thread::sleep(cost.delay.mul_f64(over));
            report.cost_naps += 1;
            report.cost_nap_time += t.elapsed();
            self.balance = 0;
        }
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
