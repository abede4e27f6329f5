//! Chain-wise pruning of one heap page ([`Heap::prune_locked`]), run by an update that
//! finds its page full and by VACUUM on every page.
//!
//! **Pruning** works chain by chain from each root, like PostgreSQL's heap_page_prune: the
//! dead prefix of a chain (versions no snapshot can see: inserted by an aborted
//! transaction, or replaced or deleted by one that committed below the oldest running
//! snapshot's xmin) is cut off. The root becomes a redirect to the first live version, or,
//! when the chain went on to another page, a redirect to a header-only stub that carries
//! the ctid there; a chain that ended in a delete leaves a dead line pointer (VACUUM's
//! pass makes it unused instead). Heap-only dead versions become unused slots, and so do
//! dead heap-only versions no chain reaches (updates whose transaction aborted).
//!
//! A link from a chain's last version to a root on the same page (chain compression points
//! a link at the chain a row moved back to) ends the chain, like a link to another page.
//! A chain that chain compression names as an orphan ([`Orphan`]: no link reaches it any more)
//! is freed whole, root included, if it is still as named.
//!
//! Invariants: roots are never freed by pruning, except a deleted row's (only by VACUUM)
//! and a named orphan's, so a tuple id held by an index or a caller stays valid; a freed
//! root is counted before the change is applied (`Heap::roots_freed`); a live version
//! keeps its slot; a chain that does not look as pruning expects (a version reached twice,
//! a broken xmin/xmax link) is left alone. The whole page's
//! change is planned first (from the page and which versions are dead to all, nothing
//! else), then applied and logged as one record.
//!
//! Locks: the caller holds the page's write lock throughout; pruning then takes the
//! free-space map's page lock to record the page's free space (heap → fsm, the only
//! order). It reads the commit log but never waits for a transaction.

use super::page::{
    HeapPage, HeapPageMut, ItemId, TupleHeader, HEAP_ONLY, UPDATED, XMAX_INVALID, XMAX_IS_MULTI,
    XMAX_LOCK_ONLY, XMIN_COMMITTED, XMIN_INVALID,
};
use super::{chain_roots, is_chain_root, Heap, Hints};
use crate::buffer::PageWriteGuard;
use crate::sync::Ordering;
use crate::table::HeapError;
use crate::txn::{Xid, FROZEN_XID, INVALID_XID};

/// How one chain from a root ends, for pruning.
enum ChainEnd {
    /// At this live version (the root itself if nothing before it is dead).
    Live(u16),
    /// At this dead version, whose ctid leads to another page.
    LeavesPage(u16),
    /// Deleted (or never committed): nothing of the row is left.
    Gone,
    /// Not as pruning expects (a damaged or concurrently broken chain): left alone.
    Unclear,
}

/// A row's chain on a page that no link reaches any more: chain compression
/// ([`Heap::compress`](super::Heap)) pointed the cross-page link into it past it. Named by
/// its root slot, the xmin its first version has (checked while the root is not a
/// redirect) and the link that leaves the page from its end (xmax and target), which only
/// this chain has. Pruning frees the whole chain, root included, if it is still there,
/// dead to all and leaving the page by that very link; otherwise it is pruned like any
/// other chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Orphan {
    pub root: u16,
    pub xmin: Xid,
    pub out_xmax: Xid,
    pub out: (u32, u16),
}

/// What pruning one page will do, planned before the page changes.
#[derive(Default)]
struct Plan {
    /// Whether a chain walk already went through each slot (index 0 unused).
    visited: Vec<bool>,
    /// New line pointer states, applied in this order.
    items: Vec<(u16, ItemId)>,
    /// Dead versions to cut down to their header (their ctid leaves the page).
    shrink: Vec<u16>,
    /// How many dead versions lose their space.
    removed: u64,
    /// Whether a root's slot becomes unused (a deleted row's, by VACUUM, or an orphan's).
    frees_roots: bool,
}

impl Plan {
    /// Plans pruning `page` (block `block`), chain by chain, then the heap-only versions
    /// no chain reaches. `dead` says whether a version is dead to all (see
    /// [`Heap::dead_to_all`]). With `vacuum`, dead line pointers become unused too. The
    /// chains `orphans` names are freed whole, roots included, if they are as named.
    fn make<D>(
        page: HeapPage<'_>,
        block: u32,
        vacuum: bool,
        orphans: &[Orphan],
        dead: &mut D,
    ) -> Result<Plan, HeapError>
    where
        D: FnMut(u16, &TupleHeader) -> Result<bool, HeapError>,
    {
        let mut plan = Plan {
            visited: vec![false; page.slots() as usize + 1],
            ..Plan::default()
        };
        // One buffer for every chain's dead prefix (a page has up to hundreds of chains).
        let mut members = Vec::new();
        // Every tuple's flags are read below, each from its own cache line of a page that
        // is often cold: read them all first, in loads that nothing waits on, so their
        // misses overlap instead of coming one per branch of the walk.
        let mut flags = 0u16;
        for slot in 1..=page.slots() {
            flags |= page.infomask(slot).unwrap_or(0);
        }
        std::hint::black_box(flags);
        for root in 1..=page.slots() {
            if let Some(live) = live_chain(page, root).filter(|&l| !plan.visited[l as usize]) {
                // Nothing to plan: the chain is one live version (most slots of a page).
                plan.visited[live as usize] = true;
                continue;
            }
            let Some(start) = plan.chain_start(page, root, vacuum) else {
                continue;
            };
            let end = walk_dead_prefix(
                page,
                block,
                (root, start),
                &mut plan.visited,
                &mut members,
                dead,
            )?;
            let orphan = orphans.iter().find(|o| o.root == root);
            if orphan.is_some_and(|o| is_orphan(page, o, &end)) {
                plan.items.push((root, ItemId::Unused));
                plan.frees_roots = true;
                for &m in &members {
                    if m != root {
                        plan.items.push((m, ItemId::Unused));
                    }
                    if page.tuple(m).is_some_and(|(_, d)| !d.is_empty()) {
                        plan.removed += 1;
                    }
                }
                continue;
            }
            plan.settle_chain(page, root, end, &members, vacuum);
        }
        plan.add_unreached(page, block, dead)?;
        Ok(plan)
    }

    /// Where the chain from slot `root` starts: the root's own version, or its redirect's
    /// target. None for slots that start no chain: heap-only versions (reached through
    /// their chain, if at all), unused and dead line pointers (with `vacuum`, a dead one
    /// is planned unused here).
    fn chain_start(&mut self, page: HeapPage<'_>, root: u16, vacuum: bool) -> Option<u16> {
        match page.item(root) {
            ItemId::Normal { .. } => {
                let (h, _) = page.tuple(root).expect("normal");
                (h.infomask & HEAP_ONLY == 0).then_some(root)
            }
            ItemId::Redirect { to } => Some(to),
            ItemId::Dead if vacuum => {
                self.items.push((root, ItemId::Unused));
                self.frees_roots = true;
                None
            }
            _ => None,
        }
    }

    /// Plans the end of the chain from `root`, given how it ends and its dead prefix
    /// `members` (in chain order).
    fn settle_chain(
        &mut self,
        page: HeapPage<'_>,
        root: u16,
        end: ChainEnd,
        members: &[u16],
        vacuum: bool,
    ) {
        let keep = match end {
            ChainEnd::Unclear => return,
            ChainEnd::Live(l) => {
                if l != root {
                    self.items.push((root, ItemId::Redirect { to: l }));
                }
                l
            }
            ChainEnd::LeavesPage(m) => {
                if m != root {
                    self.items.push((root, ItemId::Redirect { to: m }));
                }
                if page.tuple(m).is_some_and(|(_, d)| !d.is_empty()) {
                    self.shrink.push(m);
                    self.removed += 1;
                }
                m
            }
            ChainEnd::Gone => {
                let item = if vacuum { ItemId::Unused } else { ItemId::Dead };
                self.frees_roots |= vacuum;
                self.items.push((root, item));
                0
            }
        };
        for &m in members {
            if m != root && m != keep {
                self.items.push((m, ItemId::Unused));
            }
            if m != keep {
                self.removed += 1;
            }
        }
    }

    /// Plans freeing the heap-only versions no chain reaches (updates whose transaction
    /// aborted, their predecessor's ctid since pointed elsewhere) that are dead. Every
    /// version some chain reaches is left to its chain's decision.
    fn add_unreached<D>(
        &mut self,
        page: HeapPage<'_>,
        block: u32,
        dead: &mut D,
    ) -> Result<(), HeapError>
    where
        D: FnMut(u16, &TupleHeader) -> Result<bool, HeapError>,
    {
        // Most pages have no such version (every chain's versions were visited): the
        // chains' roots are worked out only when one is there.
        let unvisited_heap_only = (1..=page.slots()).any(|slot| {
            !self.visited[slot as usize]
                && page
                    .tuple(slot)
                    .is_some_and(|(h, _)| h.infomask & HEAP_ONLY != 0)
        });
        if !unvisited_heap_only {
            return Ok(());
        }
        let mut roots = Vec::new();
        chain_roots(page, block, &mut roots);
        for slot in 1..=page.slots() {
            if self.visited[slot as usize] || roots[slot as usize] != slot {
                continue;
            }
            if let Some((h, _)) = page.tuple(slot) {
                if h.infomask & HEAP_ONLY != 0 && dead(slot, &h)? {
                    self.items.push((slot, ItemId::Unused));
                    self.removed += 1;
                }
            }
        }
        Ok(())
    }
}

/// The slot of the one version of the chain from slot `root`, if that version is surely
/// live: its creator committed (a hint bit says so) and nobody replaced or deleted it
/// (only, at most, locked it); the chain is the root's own version, or the heap-only
/// version its redirect points at. Such a version is dead to nobody, so
/// [`walk_dead_prefix`] would stop at it as `Live` without asking the commit log, and
/// settling the chain would at most restate the redirect: planning has nothing to do.
fn live_chain(page: HeapPage<'_>, root: u16) -> Option<u16> {
    let (slot, heap_only) = match page.item(root) {
        ItemId::Normal { .. } => (root, 0),
        ItemId::Redirect { to } => (to, HEAP_ONLY),
        _ => return None,
    };
    let m = page.infomask(slot)?;
    (m & (HEAP_ONLY | XMIN_INVALID) == heap_only
        && m & XMIN_COMMITTED != 0
        && m & (XMAX_INVALID | XMAX_LOCK_ONLY) != 0)
        .then_some(slot)
}

/// Whether the chain from `o.root`, which ends as `end` after its dead prefix, is the
/// orphan `o` names: dead to all up to the link that leaves the page, that link `o`'s, and
/// its first version `o`'s xmin if the root still holds it (after a prune the root is a
/// redirect and the first version is gone; the link out identifies the chain alone).
fn is_orphan(page: HeapPage<'_>, o: &Orphan, end: &ChainEnd) -> bool {
    let ChainEnd::LeavesPage(last) = *end else {
        return false;
    };
    let Some((h, _)) = page.tuple(last) else {
        return false;
    };
    let first_matches = match page.item(o.root) {
        ItemId::Normal { .. } => page.tuple(o.root).is_some_and(|(r, _)| r.xmin == o.xmin),
        ItemId::Redirect { .. } => true,
        _ => false,
    };
    first_matches
        && h.infomask & XMAX_IS_MULTI == 0
        && h.xmax == o.out_xmax
        && (h.ctid_block, h.ctid_slot) == o.out
}

/// Walks the chain from `root` (whose first version is at `start`: the root itself or its
/// redirect's target) on page `page` (block `block`) through its dead prefix, marking each
/// version in `visited`. Returns how the chain ends; `members` is left holding the dead
/// prefix, in chain order.
fn walk_dead_prefix<D>(
    page: HeapPage<'_>,
    block: u32,
    (root, start): (u16, u16),
    visited: &mut [bool],
    members: &mut Vec<u16>,
    dead: &mut D,
) -> Result<ChainEnd, HeapError>
where
    D: FnMut(u16, &TupleHeader) -> Result<bool, HeapError>,
{
    members.clear();
    let mut cur = start;
    let mut prev_xmax = INVALID_XID;
    let end = loop {
        let Some((h, _)) = page.tuple(cur) else {
            break ChainEnd::Unclear;
        };
        if cur != root
            && (h.infomask & HEAP_ONLY == 0
                || (prev_xmax != INVALID_XID && h.xmin != prev_xmax)
                || visited[cur as usize])
        {
            break ChainEnd::Unclear;
        }
        visited[cur as usize] = true;
        if !dead(cur, &h)? {
            break ChainEnd::Live(cur);
        }
        members.push(cur);
        if h.infomask & UPDATED == 0 || h.infomask & XMAX_INVALID != 0 {
            break ChainEnd::Gone;
        }
        // A link to another page, or to a root on this one (compression points a link at
        // a chain the row moved back to), leaves the chain: its target is a chain of its
        // own, which pruning keeps unless it is a named orphan.
        if h.ctid_block != block || (h.ctid_slot != cur && is_chain_root(page, h.ctid_slot)) {
            break ChainEnd::LeavesPage(cur);
        }
        if h.ctid_slot == cur {
            break ChainEnd::Unclear;
        }
        // After a multixact xmax the successor's xmin is its updater member, not the id:
        // skip the check for that link. Safe on one page: pruning frees a heap-only
        // version only with the dead prefix that reaches it, or when no chain reaches it
        // (`chain_roots` follows multixact links too), so the link cannot dangle.
        prev_xmax = if h.infomask & XMAX_IS_MULTI != 0 {
            INVALID_XID
        } else {
            h.xmax
        };
        cur = h.ctid_slot;
    };
    Ok(end)
}

impl Heap<'_> {
    /// Opportunistic pruning (PostgreSQL's heap_page_prune_opt), of a page whose write lock
    /// the row-lock walk holds as it leaves for another page: if less than a tenth of the
    /// page is free, prune it now. A page that hot rows moved away from is otherwise never
    /// pruned (no update lands there to find it full), and its dead versions, and the free
    /// space the map does not know of, are lost to the table until a VACUUM.
    pub(super) fn prune_if_full(&self, g: &mut PageWriteGuard<'_>) -> Result<(), HeapError> {
        if HeapPage(g).free_space() >= g.len() / 10 {
            return Ok(());
        }
        let horizon = self.engine.txns().oldest_xmin();
        self.prune_locked(g, horizon, false)?;
        Ok(())
    }

    /// Frees the chains `orphans` names on page `block` (see [`Orphan`]; chain
    /// compression made them unreachable), pruning the rest of the page in the same
    /// record. Takes the page's write lock; the caller holds none.
    pub(super) fn free_orphans(&self, block: u32, orphans: &[Orphan]) -> Result<(), HeapError> {
        let buf = self.engine.pool().read(self.tag(block))?;
        let mut g = buf.write();
        let horizon = self.engine.txns().oldest_xmin();
        self.prune_with(&mut g, horizon, false, orphans)?;
        Ok(())
    }

    /// Prunes the page under `g`, chain by chain (see the module doc). With `vacuum`, dead
    /// line pointers become unused too. Logs the result as one record and records the
    /// page's free space in the map. Returns how many dead versions were removed.
    pub(super) fn prune_locked(
        &self,
        g: &mut PageWriteGuard<'_>,
        horizon: Xid,
        vacuum: bool,
    ) -> Result<u64, HeapError> {
        self.prune_with(g, horizon, vacuum, &[])
    }

    /// [`Self::prune_locked`], freeing `orphans` too.
    fn prune_with(
        &self,
        g: &mut PageWriteGuard<'_>,
        horizon: Xid,
        vacuum: bool,
        orphans: &[Orphan],
    ) -> Result<u64, HeapError> {
        let block = g.tag().block;
        let plan = self.plan_prune_locked(g, horizon, vacuum, orphans)?;
        if let Some(plan) = &plan {
            self.note_freed_roots(plan);
            self.change_logged(FROZEN_XID, g, |p| plan.apply(p))?;
        }
        let free = HeapPage(g).free_space();
        self.fsm.set(self.engine.pool(), block, free)?;
        let removed = plan.map_or(0, |p| p.0.removed);
        self.counters.count_removed(removed);
        Ok(removed)
    }

    /// [`Self::plan_prune_locked`] for an update that finds the page under `g` full,
    /// unless this handle's last such plan was of the same page at the same horizon and
    /// found nothing to do. At one horizon nothing on a page becomes dead to all but the
    /// versions of a transaction that aborts meanwhile (a transaction that ends with an
    /// id below the horizon cannot exist: the horizon is at or below every running one's
    /// id), and pruning is opportunistic, so skipping costs at most a prune that a later
    /// update or VACUUM makes. The plan reads every tuple's flags, a cache miss each on a
    /// cold page: TPC-C's Delivery updates the ten order lines of an order, packed on one
    /// full page with nothing dead, one after the other, and planned each time for
    /// nothing (5% of TPC-C's CPU, 2026-12-07).
    pub(super) fn plan_prune_for_update(
        &self,
        g: &mut PageWriteGuard<'_>,
        horizon: Xid,
    ) -> Result<Option<PrunePlan>, HeapError> {
        let key = u64::from(g.tag().block) << 32 | u64::from(horizon);
        if self.futile_prune.load(Ordering::Relaxed) == key {
            return Ok(None);
        }
        let plan = self.plan_prune_locked(g, horizon, false, &[])?;
        if plan.is_none() {
            self.futile_prune.store(key, Ordering::Relaxed);
        }
        Ok(plan)
    }

    /// Plans pruning the page under `g` (see the module doc) and sets what the commit log
    /// told the plan as hint bits; the page's line pointers and tuples are not changed yet.
    /// Returns the plan if applying it changes the page ([`PrunePlan::apply`], in a
    /// logged change: [`Self::prune_locked`], or an update that logs the prune and its new
    /// version as one record).
    pub(super) fn plan_prune_locked(
        &self,
        g: &mut PageWriteGuard<'_>,
        horizon: Xid,
        vacuum: bool,
        orphans: &[Orphan],
    ) -> Result<Option<PrunePlan>, HeapError> {
        let block = g.tag().block;
        #[cfg(test)]
        self.plans.fetch_add(1, Ordering::Relaxed);
        // What the commit log tells pruning is set as hint bits (on the versions that stay,
        // so later visits of the page need no lookup), made safe to write by themselves
        // (`log_hint`): a plan may change no byte (it restates a redirect), and then no
        // record follows that would image the page; a hinted page written without an
        // image since the checkpoint cannot be repaired if the write tears.
        let mut hints = Hints::new();
        let mut dead = |slot: u16, h: &TupleHeader| self.dead_to_all(slot, h, horizon, &mut hints);
        let plan = Plan::make(HeapPage(g), block, vacuum, orphans, &mut dead)?;
        self.set_hints_locked(g, &mut hints)?;
        Ok((!plan.items.is_empty() || !plan.shrink.is_empty()).then_some(PrunePlan(plan)))
    }
}

/// A pruning plan of one page that changes it ([`Heap::plan_prune_locked`]).
pub(super) struct PrunePlan(Plan);

impl Heap<'_> {
    /// Counts a plan that frees roots in [`Heap::roots_freed`], before it is applied under
    /// the page's lock (so a walk that takes the lock after it sees the count raised).
    pub(super) fn note_freed_roots(&self, plan: &PrunePlan) {
        if plan.0.frees_roots {
            self.engine
                .heap_roots_freed()
                .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
    }
}

impl PrunePlan {
    /// How many dead versions the plan removes.
    pub(super) fn removed(&self) -> u64 {
        self.0.removed
    }

    /// Applies the plan to the page: dead versions leaving the page cut to their header,
    /// the new line pointer states, then the page compacted.
    pub(super) fn apply(&self, p: &mut HeapPageMut<'_>) {
        for &m in &self.0.shrink {
            p.shrink_to_header(m);
        }
        for &(slot, item) in &self.0.items {
            p.set_item_state(slot, item);
        }
        p.compact();
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{page, version, BLOCK};
    use super::*;

    /// Plans pruning `buf` with the versions at `dead` dead to all.
    fn plan(buf: &[u8], vacuum: bool, dead: &[u16]) -> Plan {
        plan_with(buf, vacuum, &[], dead)
    }

    /// [`plan`], with `orphans` named.
    fn plan_with(buf: &[u8], vacuum: bool, orphans: &[Orphan], dead: &[u16]) -> Plan {
        let mut dead = |slot: u16, _: &TupleHeader| Ok(dead.contains(&slot));
        Plan::make(HeapPage(buf), BLOCK, vacuum, orphans, &mut dead).expect("no commit log here")
    }

    fn apply(buf: &mut [u8], plan: &Plan) {
        let mut p = HeapPageMut::new(buf);
        for &m in &plan.shrink {
            p.shrink_to_header(m);
        }
        for &(slot, item) in &plan.items {
            p.set_item_state(slot, item);
        }
        p.compact();
    }

    #[test]
    fn committed_roots_nobody_replaced_are_not_asked_about() {
        let buf = page(&[
            // Live by its hint bits alone: committed, never replaced (or only locked).
            version(1, 10, 0, None, XMIN_COMMITTED | XMAX_INVALID),
            version(2, 10, 12, None, XMIN_COMMITTED | XMAX_LOCK_ONLY),
            // Replaced: its chain is walked, and the commit log decides.
            version(3, 10, 11, Some((BLOCK, 4)), XMIN_COMMITTED | UPDATED),
            version(4, 11, 0, None, XMAX_INVALID | HEAP_ONLY),
            // No hint bit yet: asked.
            version(5, 13, 0, None, XMAX_INVALID),
        ]);
        let mut asked = Vec::new();
        let mut dead = |slot: u16, _: &TupleHeader| {
            asked.push(slot);
            Ok(slot == 3)
        };
        let p = Plan::make(HeapPage(&buf), BLOCK, false, &[], &mut dead).unwrap();
        assert_eq!(asked, vec![3, 4, 5]);
        assert_eq!(p.items, vec![(3, ItemId::Redirect { to: 4 })]);
        assert_eq!(p.removed, 1);
        // After the prune, 3 redirects to 4, which is not asked about once it is hinted
        // committed: then the plan does not restate the redirect, so it is empty.
        let mut buf = buf;
        apply(&mut buf, &p);
        let mut h4 = HeapPage(&buf).tuple(4).unwrap().0;
        let mut asked = Vec::new();
        let mut dead = |slot: u16, _: &TupleHeader| {
            asked.push(slot);
            Ok(false)
        };
        let again = Plan::make(HeapPage(&buf), BLOCK, false, &[], &mut dead).unwrap();
        // Unhinted, 4 is asked about and the walk restates the redirect (no byte changes).
        let restated = vec![(3, ItemId::Redirect { to: 4 })];
        assert_eq!((asked, again.items), (vec![4, 5], restated));
        h4.infomask |= XMIN_COMMITTED;
        HeapPageMut::new(&mut buf).set_header(4, &h4);
        let mut asked = Vec::new();
        let mut dead = |slot: u16, _: &TupleHeader| {
            asked.push(slot);
            Ok(false)
        };
        let again = Plan::make(HeapPage(&buf), BLOCK, false, &[], &mut dead).unwrap();
        assert_eq!((asked, again.items), (vec![5], vec![]));
    }

    #[test]
    fn a_dead_prefix_is_cut_and_the_root_redirects_to_the_first_live_version() {
        let mut buf = page(&[
            version(1, 10, 11, Some((BLOCK, 2)), UPDATED),
            version(2, 11, 12, Some((BLOCK, 3)), UPDATED | HEAP_ONLY),
            version(3, 12, 0, None, XMAX_INVALID | HEAP_ONLY),
        ]);
        let p = plan(&buf, false, &[1, 2]);
        assert_eq!(
            p.items,
            vec![(1, ItemId::Redirect { to: 3 }), (2, ItemId::Unused)]
        );
        assert!(p.shrink.is_empty());
        assert_eq!(p.removed, 2);
        apply(&mut buf, &p);
        let (slot, h, _, redirected) = super::super::resolve(HeapPage(&buf), 1).unwrap();
        assert_eq!((slot, h.xmin, redirected), (3, 12, true));
        // Nothing more to remove: the redirect's chain starts live (the plan only restates
        // the redirect, which changes no byte).
        let again = plan(&buf, false, &[]);
        assert_eq!(again.items, vec![(1, ItemId::Redirect { to: 3 })]);
        assert_eq!(again.removed, 0);
    }

    #[test]
    fn a_deleted_row_leaves_a_dead_line_pointer_that_vacuum_frees() {
        let deleted = [version(1, 10, 11, None, 0)];
        let mut buf = page(&deleted);
        let p = plan(&buf, false, &[1]);
        assert_eq!((p.items.clone(), p.removed), (vec![(1, ItemId::Dead)], 1));
        apply(&mut buf, &p);
        let p = plan(&buf, true, &[]);
        assert_eq!((p.items.clone(), p.removed), (vec![(1, ItemId::Unused)], 0));
        // VACUUM on the same row before pruning frees the root at once.
        let p = plan(&page(&deleted), true, &[1]);
        assert_eq!((p.items, p.removed), (vec![(1, ItemId::Unused)], 1));
    }

    #[test]
    fn a_dead_version_leaving_the_page_shrinks_to_a_header_stub() {
        let mut buf = page(&[
            version(1, 10, 11, Some((BLOCK, 2)), UPDATED),
            version(2, 11, 12, Some((BLOCK + 1, 4)), UPDATED | HEAP_ONLY),
        ]);
        let p = plan(&buf, false, &[1, 2]);
        assert_eq!(p.items, vec![(1, ItemId::Redirect { to: 2 })]);
        assert_eq!(p.shrink, vec![2]);
        assert_eq!(p.removed, 2);
        apply(&mut buf, &p);
        let (slot, h, data, _) = super::super::resolve(HeapPage(&buf), 1).unwrap();
        assert_eq!((slot, h.ctid_block, h.ctid_slot), (2, BLOCK + 1, 4));
        assert!(data.is_empty());
        // The stub is already a stub: pruning again removes nothing.
        assert_eq!(plan(&buf, false, &[2]).removed, 0);
    }

    #[test]
    fn dead_heap_only_versions_no_chain_reaches_are_freed() {
        let buf = page(&[
            version(1, 10, 0, None, XMAX_INVALID),
            version(2, 11, 0, None, XMAX_INVALID | HEAP_ONLY),
        ]);
        let p = plan(&buf, false, &[2]);
        assert_eq!((p.items, p.removed), (vec![(2, ItemId::Unused)], 1));
        let p = plan(&buf, false, &[]);
        assert_eq!((p.items.len(), p.removed), (0, 0));
    }

    #[test]
    fn a_chain_that_loops_is_left_alone() {
        let buf = page(&[version(1, 10, 11, Some((BLOCK, 1)), UPDATED)]);
        let p = plan(&buf, true, &[1]);
        assert!(p.items.is_empty() && p.shrink.is_empty());
        assert_eq!(p.removed, 0);
    }

    /// A chain that moved here and on (root 1, heap-only 2 leaving for BLOCK + 1, 5) once
    /// compression pointed its incoming link past it.
    fn orphan_page() -> Vec<u8> {
        page(&[
            version(1, 20, 21, Some((BLOCK, 2)), UPDATED),
            version(2, 21, 22, Some((BLOCK + 1, 5)), UPDATED | HEAP_ONLY),
            version(3, 30, 0, None, XMAX_INVALID),
        ])
    }

    const ORPHAN: Orphan = Orphan {
        root: 1,
        xmin: 20,
        out_xmax: 22,
        out: (BLOCK + 1, 5),
    };

    #[test]
    fn a_named_orphan_is_freed_root_and_all() {
        let mut buf = orphan_page();
        let p = plan_with(&buf, false, &[ORPHAN], &[1, 2]);
        assert_eq!(p.items, vec![(1, ItemId::Unused), (2, ItemId::Unused)]);
        assert!(p.shrink.is_empty() && p.frees_roots);
        assert_eq!(p.removed, 2);
        apply(&mut buf, &p);
        assert_eq!(HeapPage(&buf).item(1), ItemId::Unused);
        // Row 3 is untouched.
        assert_eq!(HeapPage(&buf).tuple(3).unwrap().0.xmin, 30);
        // After an ordinary prune (root 1 a redirect to its stub) it is found by its link.
        let mut buf = orphan_page();
        let p = plan(&buf, false, &[1, 2]);
        apply(&mut buf, &p);
        assert_eq!(HeapPage(&buf).item(1), ItemId::Redirect { to: 2 });
        let p = plan_with(&buf, false, &[ORPHAN], &[2]);
        assert_eq!(p.items, vec![(1, ItemId::Unused), (2, ItemId::Unused)]);
    }

    #[test]
    fn an_orphan_that_is_not_as_named_is_pruned_like_any_chain() {
        let buf = orphan_page();
        let other_link = Orphan {
            out: (BLOCK + 1, 6),
            ..ORPHAN
        };
        let other_xmax = Orphan {
            out_xmax: 23,
            ..ORPHAN
        };
        let other_xmin = Orphan { xmin: 19, ..ORPHAN };
        for o in [other_link, other_xmax, other_xmin] {
            let p = plan_with(&buf, false, &[o], &[1, 2]);
            assert_eq!(p.items, vec![(1, ItemId::Redirect { to: 2 })], "{o:?}");
            assert_eq!(p.shrink, vec![2]);
            assert!(!p.frees_roots);
        }
        // Not dead to all (2 is still visible to someone): kept.
        let p = plan_with(&buf, false, &[ORPHAN], &[1]);
        assert!(!p.frees_roots);
        assert_eq!(p.items, vec![(1, ItemId::Redirect { to: 2 })]);
    }

    #[test]
    fn a_link_to_a_root_on_the_same_page_leaves_the_chain() {
        // Row at 1 moved away and back: compression pointed 2's link at root 3 here.
        let mut buf = page(&[
            version(1, 10, 11, Some((BLOCK, 2)), UPDATED),
            version(2, 11, 12, Some((BLOCK, 3)), UPDATED | HEAP_ONLY),
            version(3, 12, 0, None, XMAX_INVALID),
        ]);
        let p = plan(&buf, false, &[1, 2]);
        assert_eq!(p.items, vec![(1, ItemId::Redirect { to: 2 })]);
        assert_eq!(p.shrink, vec![2]);
        apply(&mut buf, &p);
        // 3 is a chain of its own (a root, kept); 2 is the stub that links to it.
        let (_, h, _, _) = super::super::resolve(HeapPage(&buf), 1).unwrap();
        assert_eq!((h.ctid_block, h.ctid_slot), (BLOCK, 3));
        assert_eq!(HeapPage(&buf).tuple(3).unwrap().0.xmin, 12);
    }
}
