//! Heap relations: unordered tuples with MVCC headers, on buffer-pool pages, every change
//! WAL-logged through the engine (redo is physical, so recovery needs nothing heap-specific).
//!
//! Owns: the relation id, its free-space map ([`Fsm`]), the fillfactor of this handle and
//! an insertion hint (the last block that had room, where the map search starts). This
//! file has the [`Heap`] handle, [`Tid`], create/open, insert, fetch and bulk load,
//! and the helpers the parts share; the parts are:
//! - `visibility.rs`: how a version looks to a snapshot, whether it is dead to all, and
//!   hint bits;
//! - `update.rs`: update and delete, the row-lock walk, placing a row on another page,
//!   chain compression;
//! - `prune.rs`: chain-wise pruning of a page;
//! - `scan.rs`: sequential scans (where they start, ring or clock, the cache trail);
//! - `vacuum.rs`: VACUUM and its report.
//!
//! **Row identity.** A row is named by the tuple id of its first version, its *root*; an
//! index stores roots. Updates chain versions through ctid; a same-page update makes a
//! `HEAP_ONLY` version (a HOT chain: the row's root, then heap-only versions on the same
//! page, possibly then a link to a root on another page). [`Heap::fetch`] from a root
//! walks the chain (through redirects and ctids, checking that each version's xmin is its
//! predecessor's xmax, PostgreSQL's rule for detecting a chain broken by pruning) to the
//! version the snapshot sees. Pruning keeps a row's first root (a pruned chain's root
//! becomes a redirect), so a tuple id held by an index or a caller stays valid; only
//! VACUUM frees the root of a deleted row. The root a move made on another page is freed
//! once the row's versions there are dead to all and chain compression has pointed the
//! link into it past it (see `update.rs`); a walk that was on its way there starts over
//! (`roots_freed`). [`Heap::scan`] reports each visible version under the root of its
//! same-page chain.
//!
//! **Locks**, for the whole heap: one page's content lock at a time, except an update
//! moving a row to another page: it holds the old page and takes the target only with a
//! try-lock (skipping pages whose lock is busy), or a newly extended page (nobody else can
//! hold the lock of a page that did not exist a moment ago), so this cannot deadlock;
//! free-space-map pages are taken after heap pages, never the other way round. Hint bits
//! are set after the reader released its lock, with a try-lock. A row-lock wait holds no
//! page lock, and one that would close a cycle of transactions waiting on each other fails
//! with a deadlock error instead (`TxnManager::wait_for`); the caller aborts that
//! transaction, which frees its rows. In this file: insert searches the map, then takes
//! one heap page's write lock (updating the map after releasing it); fetch and scan take
//! one page's shared lock at a time; bulk load writes each new page under its own lock.

pub mod page;
mod prune;
mod scan;
mod update;
mod vacuum;
mod visibility;

pub use scan::{ScanReport, SeqScanOptions};
pub use update::RowLockMode;
pub use vacuum::{
    VacuumCost, VacuumOptions, VacuumReport, VACUUM_COST_PAGE_DIRTY, VACUUM_COST_PAGE_HIT,
    VACUUM_COST_PAGE_MISS,
};
use visibility::{Hints, Vis};

use super::fsm::Fsm;
use crate::buffer::{PageWriteGuard, Ring, RingKind, RING_POOL_DIVISOR};
use crate::config::ConfigError;
use crate::engine::{Engine, EngineRef, HookPoint};
use crate::page::PAGE_HEADER_SIZE;
use crate::page_delta::BeforeImage;
use crate::stats::RelCounters;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::table::HeapError;
use crate::txn::{Snapshot, Xid, FROZEN_XID, INVALID_XID};
use crate::types::{BufferTag, ForkNumber, RelFileId};
use page::{
    tuple_space, HeapPage, HeapPageMut, ItemId, TupleHeader, HEAP_ONLY, ITEM_ID_SIZE, UPDATED,
    XMAX_IS_MULTI, XMIN_COMMITTED,
};

/// A tuple's address: block and 1-based slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tid {
    /// The block number in the table's main fork.
    pub block: u32,
    /// The line pointer's number on that page, from 1.
    pub slot: u16,
}

impl Tid {
    /// Packs the tuple id into an index value.
    pub fn to_u64(self) -> u64 {
        (u64::from(self.block) << 16) | u64::from(self.slot)
    }

    /// Unpacks an index value made by [`Tid::to_u64`].
    pub fn from_u64(v: u64) -> Tid {
        Tid {
            block: (v >> 16) as u32,
            slot: v as u16,
        }
    }
}
/// Most pages a bulk load adds with one storage call: 16 (128 kB of 8 kB pages,
/// io_combine_limit's default), also held pinned at once while they are filled; at most
/// half of the load's ring, so the ring never meets its own pinned pages.
pub(crate) const BULK_EXTEND_PAGES: usize = 16;

/// Default fillfactor (PostgreSQL's for heaps): inserts fill pages completely.
pub const DEFAULT_FILLFACTOR: u8 = 100;

/// Whether `slot` starts a chain: a redirect (a pruned root) or a version that is not
/// heap-only (a row's first version, or one a move placed on this page).
fn is_chain_root(page: HeapPage<'_>, slot: u16) -> bool {
    match page.item(slot) {
        ItemId::Redirect { .. } => true,
        ItemId::Normal { .. } => page
            .tuple(slot)
            .is_some_and(|(h, _)| h.infomask & HEAP_ONLY == 0),
        ItemId::Dead | ItemId::Unused => false,
    }
}

/// The tuple a line pointer leads to: a normal slot itself, or a redirect's target. The
/// flag says whether a redirect was followed (the slot was a pruned chain's root, so the
/// tuple's xmin need not match whatever led here).
fn resolve(page: HeapPage<'_>, slot: u16) -> Option<(u16, TupleHeader, &[u8], bool)> {
    match page.item(slot) {
        ItemId::Normal { .. } => page.tuple(slot).map(|(h, d)| (slot, h, d, false)),
        ItemId::Redirect { to } => page.tuple(to).map(|(h, d)| (to, h, d, true)),
        _ => None,
    }
}

/// Fills `roots[slot]` with the root of the same-page chain each slot belongs to (the
/// slot itself for roots and for versions no chain reaches).
fn chain_roots(page: HeapPage<'_>, block: u32, roots: &mut Vec<u16>) {
    let n = page.slots();
    roots.clear();
    roots.extend(0..=n);
    for root in 1..=n {
        let mut cur = match page.item(root) {
            ItemId::Redirect { to } => to,
            ItemId::Normal { .. } => match page.tuple(root) {
                Some((h, _)) if h.infomask & HEAP_ONLY == 0 => root,
                _ => continue,
            },
            _ => continue,
        };
        // Bounded: a chain visits each slot at most once.
        for _ in 0..n {
            if cur != root {
                roots[cur as usize] = root;
            }
            let Some((h, _)) = page.tuple(cur) else {
                break;
            };
            if h.infomask & UPDATED == 0 || h.ctid_block != block || h.ctid_slot == cur {
                break;
            }
            match page.tuple(h.ctid_slot) {
                // A multixact xmax is not the successor's xmin (its updater member is):
                // the link is trusted as is (see `walk_dead_prefix`).
                Some((next, _))
                    if next.infomask & HEAP_ONLY != 0
                        && (next.xmin == h.xmax || h.infomask & XMAX_IS_MULTI != 0) =>
                {
                    cur = h.ctid_slot
                }
                _ => break,
            }
        }
    }
}

/// A heap relation.
pub struct Heap<'e> {
    engine: EngineRef<'e>,
    rel: RelFileId,
    fsm: Fsm,
    fillfactor: u8,
    hint: AtomicU32,
    /// This relation's row counters (the engine's [`crate::stats::RelStats`]).
    counters: std::sync::Arc<RelCounters>,
    /// The page and horizon of this handle's last update-time pruning plan that found
    /// nothing to do (block << 32 | horizon; `u64::MAX`: none): see
    /// [`Heap::plan_prune_for_update`].
    futile_prune: AtomicU64,
    /// Pruning plans made (tests only: that a futile one is not repeated).
    #[cfg(test)]
    plans: AtomicU64,
}

impl std::fmt::Debug for Heap<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heap")
            .field("rel", &self.rel)
            .field("fillfactor", &self.fillfactor)
            .finish_non_exhaustive()
    }
}

impl<'e> Heap<'e> {
    /// Creates the relation's main and free-space forks.
    pub fn create(engine: impl Into<EngineRef<'e>>, rel: RelFileId) -> Result<Heap<'e>, HeapError> {
        let engine = engine.into();
        // A free-space map without its table is debris: of a creation a power cut undid
        // in part (the table's directory entry lost, the map's kept; creation is not
        // logged). It holds nothing of value: removed, so the creation can succeed.
        let pool = engine.pool();
        if !pool.smgr().exists(rel, ForkNumber::Main)?
            && pool.smgr().exists(rel, ForkNumber::FreeSpace)?
        {
            pool.drop_relation(rel)?;
        }
        engine.pool().create_relation(rel, ForkNumber::Main)?;
        engine.pool().create_relation(rel, ForkNumber::FreeSpace)?;
        Ok(Self::open(engine, rel))
    }

    /// Opens an existing relation (its free-space fork is created if missing: the map is
    /// not WAL-logged, so a crash may lose a new one).
    pub fn open(engine: impl Into<EngineRef<'e>>, rel: RelFileId) -> Heap<'e> {
        let engine = engine.into();
        let pool = engine.pool();
        if pool.nblocks(rel, ForkNumber::FreeSpace).is_err() {
            let _ = pool.create_relation(rel, ForkNumber::FreeSpace);
        }
        let counters = engine.rel_stats().of(rel);
        let fsm = Fsm::shared(rel, pool.page_size(), counters.fsm_bounds.clone());
        Heap {
            engine,
            rel,
            fsm,
            fillfactor: DEFAULT_FILLFACTOR,
            hint: AtomicU32::new(0),
            counters,
            futile_prune: AtomicU64::new(u64::MAX),
            #[cfg(test)]
            plans: AtomicU64::new(0),
        }
    }

    /// Sets this handle's fillfactor (percent, 10..=100, PostgreSQL's range and meaning):
    /// inserts leave `100 - fillfactor` percent of each page free, so that updates of
    /// its rows can stay on the page.
    pub fn with_fillfactor(mut self, fillfactor: u8) -> Result<Self, HeapError> {
        if !(10..=100).contains(&fillfactor) {
            return Err(ConfigError::new("fillfactor", fillfactor, "10..100 (percent)").into());
        }
        self.fillfactor = fillfactor;
        Ok(self)
    }

    /// Sets the live-row estimate to `rows` if nothing has yet (no VACUUM since open):
    /// PostgreSQL keeps its estimate (reltuples) in the catalog across restarts; here the
    /// caller that knows the table's size says it, or autovacuum's threshold starts from
    /// the rows inserted since open.
    pub fn seed_live_estimate(&self, rows: u64) {
        let s = self.counters.snapshot();
        if s.vacuums + s.autovacuums == 0 && s.live == 0 {
            self.counters
                .live
                .store(rows, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// This relation's row counters now (pg_stat_user_tables' row).
    pub fn row_stats(&self) -> crate::stats::RelCountersSnapshot {
        self.counters.snapshot()
    }

    /// The table's relation.
    pub fn rel(&self) -> RelFileId {
        self.rel
    }

    /// The engine this handle works on (to begin transactions where only the handle was
    /// passed along).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The free-space map.
    pub fn fsm(&self) -> &Fsm {
        &self.fsm
    }

    fn tag(&self, block: u32) -> BufferTag {
        BufferTag::new(self.rel, ForkNumber::Main, block)
    }

    /// How many times pruning has freed a heap root, in any relation of the engine. A root
    /// is freed only when no link leads to it any more (chain compression pointed the
    /// link past it: [`Orphan`](prune::Orphan)), or for a deleted row (VACUUM); but a walk
    /// that read a link just before may still be on its way there, and find the slot free
    /// or holding another row's version. So a walk following a link to another page reads
    /// this count under the lock of the link's page and again under the target's, and
    /// starts over from its first tid if it changed: a free is counted before it is
    /// applied, under the target page's lock, after the link moved away (under its own).
    fn roots_freed(&self) -> u64 {
        self.engine
            .heap_roots_freed()
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Reads the page of `block` where a walk starts (`first`) or goes on. A walk that
    /// starts past the table's end is at no row: an index may keep entries of rows that
    /// never committed (see the module doc), and VACUUM's truncation may have cut their
    /// page off; the read then fails short, and the table's size says why. Checked only
    /// on that error, so a read that succeeds costs nothing more.
    fn read_walk_page(
        &self,
        block: u32,
        first: bool,
    ) -> Result<Option<crate::buffer::BufferRef<'_>>, HeapError> {
        let pool = self.engine.pool();
        match pool.read(self.tag(block)) {
            Ok(buf) => Ok(Some(buf)),
            Err(crate::buffer::BufferError::Storage(crate::smgr::SmgrError::ShortRead {
                ..
            })) if first && block >= pool.nblocks(self.rel, ForkNumber::Main)? => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Bytes inserts leave free on a page.
    fn reserve(&self) -> usize {
        self.engine.pool().page_size() * (100 - self.fillfactor as usize) / 100
    }

    /// Applies `change` to a page under its write guard and logs the byte ranges it
    /// declares it wrote (see `page_delta`): no copy of the page, no diff. Nothing is logged
    /// if it wrote nothing. Debug builds keep the page's before-image and check that every
    /// changed byte was declared.
    fn change_logged<R>(
        &self,
        xid: Xid,
        g: &mut PageWriteGuard<'_>,
        change: impl FnOnce(&mut HeapPageMut<'_>) -> R,
    ) -> Result<R, HeapError> {
        let before = BeforeImage::take(g);
        let mut p = HeapPageMut::new(g);
        let r = change(&mut p);
        let delta = p.into_delta();
        before.assert_declared(g, &delta);
        if !delta.is_empty() {
            self.engine.log_deltas(xid, 0, &mut [(g, &delta)])?;
        } else {
            // Nothing changed, but the page was opened for writing and is now dirty (a
            // pruning plan that restates a redirect): written without an image since the
            // checkpoint, a torn write of it could not be repaired. Treat it as a hint.
            self.engine.log_hint(g)?;
        }
        Ok(r)
    }

    /// Inserts a tuple created by `xid`: into a page the free-space map says has room
    /// (leaving the fillfactor's reserve), else into a new page.
    pub fn insert(&self, xid: Xid, data: &[u8]) -> Result<Tid, HeapError> {
        let pool = self.engine.pool();
        let max = HeapPage::max_tuple_data_in(pool.page_size());
        if data.len() > max {
            return Err(HeapError::TupleTooLarge {
                len: data.len(),
                max,
            });
        }
        let reserve = self.reserve();
        let need = tuple_space(data.len()) + ITEM_ID_SIZE;
        loop {
            let n = pool.nblocks(self.rel, ForkNumber::Main)?;
            let hint = self.hint.load(Ordering::Relaxed);
            let (buf, extended) = match self.fsm.search(pool, need + reserve, hint, n)? {
                Some(b) => (pool.read(self.tag(b))?, false),
                None => (pool.extend(self.rel, ForkNumber::Main)?, true),
            };
            let block = buf.tag().block;
            let mut g = buf.write();
            // An empty page takes any tuple, whatever the fillfactor.
            let empty = HeapPage(&g).slots() == 0;
            let fits = if empty {
                HeapPage(&g).fits(data.len())
            } else {
                HeapPage(&g).fits_leaving(data.len(), reserve)
            };
            if fits {
                let slot = self
                    .change_logged(xid, &mut g, |p| p.insert(block, xid, data))?
                    .expect("checked that it fits");
                let free = HeapPage(&g).free_space();
                drop(g);
                self.counters.count_insert();
                // A new page enters the map. A page the map offered keeps its entry,
                // which now promises a tuple's room too much: corrected below by the
                // insert that finds the page full (PostgreSQL's
                // RecordAndGetPageWithFreeSpace), one map lookup per insert saved.
                if extended {
                    self.fsm.set(pool, block, free)?;
                }
                self.hint.store(block, Ordering::Relaxed);
                return Ok(Tid { block, slot });
            }
            // The map promised too much (it is a hint): correct it and look again.
            let free = HeapPage(&g).free_space();
            drop(g);
            self.fsm.set(pool, block, free)?;
        }
    }

    /// Bulk load (pgbench's initialization, PostgreSQL's COPY): appends `rows` in order
    /// on new pages, each filled to the fillfactor and logged as one full-page image, and
    /// passes each row's tuple id to `placed`. With `frozen` the rows are visible to every
    /// snapshot at once (COPY FREEZE: only for a table created by the same load, which
    /// nobody else can see yet); otherwise they belong to `xid` like inserts.
    /// `progress` gets the number of rows loaded so far, every 65,536 rows and at the end.
    /// Returns the number of rows. Runs through a bulk-write ring sized by the pool's
    /// `bulkwrite_ring_size` (see [`Heap::bulk_load_with`]).
    pub fn bulk_load<R: AsRef<[u8]>>(
        &self,
        xid: Xid,
        frozen: bool,
        rows: impl IntoIterator<Item = R>,
        placed: impl FnMut(Tid),
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, HeapError> {
        let mut ring = self.engine.pool().ring(RingKind::BulkWrite);
        self.bulk_load_with(xid, frozen, rows, placed, progress, ring.as_mut())
    }

    /// [`Heap::bulk_load`] through the caller's `ring` (`None`: the shared clock), so an
    /// experiment can compare ring configurations. Pages are added
    /// `BULK_EXTEND_PAGES` at a time (at most half the ring) with one storage call, as
    /// many as the rows still to come surely fill (by the iterator's lower size bound and
    /// the most rows a page can hold), so no page is left empty; an iterator without a
    /// size bound extends one page at a time.
    pub fn bulk_load_with<R: AsRef<[u8]>>(
        &self,
        xid: Xid,
        frozen: bool,
        rows: impl IntoIterator<Item = R>,
        mut placed: impl FnMut(Tid),
        progress: &mut dyn FnMut(u64),
        mut ring: Option<&mut Ring>,
    ) -> Result<u64, HeapError> {
        let pool = self.engine.pool();
        let page_size = pool.page_size();
        let max = HeapPage::max_tuple_data_in(page_size);
        // No page holds more rows than this (each takes at least an empty tuple and its
        // line pointer), so `rows left / this` pages are surely filled.
        let rows_per_page_max =
            (page_size - PAGE_HEADER_SIZE) / (tuple_space(0) + ITEM_ID_SIZE) + 1;
        let reserve = self.reserve();
        let (xmin, mask) = if frozen {
            (FROZEN_XID, XMIN_COMMITTED)
        } else {
            (xid, 0)
        };
        let mut rows = rows.into_iter().peekable();
        let mut count = 0u64;
        while rows.peek().is_some() {
            let limit = ring
                .as_ref()
                .map_or(pool.nbuffers() / RING_POOL_DIVISOR, |r| r.len() / 2);
            let batch = (rows.size_hint().0 / rows_per_page_max)
                .min(limit)
                .clamp(1, BULK_EXTEND_PAGES);
            let bufs =
                pool.extend_many_with(self.rel, ForkNumber::Main, batch, ring.as_deref_mut())?;
            for buf in bufs {
                debug_assert!(rows.peek().is_some(), "an extended page would stay empty");
                let block = buf.tag().block;
                let mut g = buf.write();
                {
                    let mut p = HeapPageMut::new(&mut g);
                    p.init_if_new();
                    while let Some(row) = rows.peek() {
                        let data = row.as_ref();
                        if data.len() > max {
                            return Err(HeapError::TupleTooLarge {
                                len: data.len(),
                                max,
                            });
                        }
                        let first = p.view().slots() == 0;
                        if !first && !p.view().fits_leaving(data.len(), reserve) {
                            break;
                        }
                        let slot = p.insert(block, xmin, data).expect("checked that it fits");
                        if mask != 0 {
                            let (mut h, _) = p.view().tuple(slot).expect("just inserted");
                            h.infomask |= mask;
                            p.set_header(slot, &h);
                        }
                        placed(Tid { block, slot });
                        rows.next();
                        count += 1;
                        self.counters.count_insert();
                        if count % 65_536 == 0 {
                            progress(count);
                        }
                    }
                }
                let whole = 0..g.len();
                self.engine
                    .log_pages(xid, 0, &mut [(&mut g, std::slice::from_ref(&whole))])?;
                let free = HeapPage(&g).free_space();
                drop(g);
                self.fsm.set(pool, block, free)?;
            }
        }
        progress(count);
        Ok(count)
    }

    /// The version of the row rooted at `tid` that `snap` sees (see the module doc).
    pub fn fetch(&self, snap: &Snapshot, tid: Tid) -> Result<Option<Vec<u8>>, HeapError> {
        self.fetch_with(snap, tid, |_, d| d.to_vec())
    }

    /// [`Heap::fetch`], passing the version's tuple id and bytes to `f` under the page's
    /// shared lock instead of copying them.
    pub fn fetch_with<R>(
        &self,
        snap: &Snapshot,
        mut tid: Tid,
        f: impl FnOnce(Tid, &[u8]) -> R,
    ) -> Result<Option<R>, HeapError> {
        let origin = tid;
        let mut prev_xmax = INVALID_XID;
        let mut hints = Hints::new();
        // A chain is finite; the bound only guards against a damaged one. Same-page steps
        // happen under one lock, so pruning cannot cut the chain between them; a chain
        // leaving the page leads to a root, which is freed only once no link leads there
        // (a walk on its way is told by `roots_freed`, read when it took the page it leaves
        // and compared at the next, and starts over).
        let mut steps = 0u32;
        let mut hop: Option<u64> = None;
        'page: loop {
            if hop.is_some() {
                self.engine
                    .run_hook_at(HookPoint::HeapHop, u64::from(tid.block));
            }
            let Some(buf) = self.read_walk_page(tid.block, tid == origin)? else {
                return Ok(None);
            };
            let g = buf.read();
            let here = self.roots_freed();
            if hop.take().is_some_and(|seen| seen != here) {
                (tid, prev_xmax) = (origin, INVALID_XID);
                continue 'page;
            }
            loop {
                steps += 1;
                if steps > u32::from(u16::MAX) {
                    return Ok(None);
                }
                let Some((slot, h, data, redirected)) = resolve(HeapPage(&g), tid.slot) else {
                    return Ok(None);
                };
                if prev_xmax != INVALID_XID && !redirected && h.xmin != prev_xmax {
                    return Ok(None); // a deleted row's slot, freed by VACUUM and reused
                }
                match self.vis(snap, slot, &h, &mut hints)? {
                    Vis::Visible => {
                        let r = f(
                            Tid {
                                block: tid.block,
                                slot,
                            },
                            data,
                        );
                        drop(g);
                        self.set_hints(&buf, &mut hints)?;
                        return Ok(Some(r));
                    }
                    Vis::Gone if h.infomask & UPDATED != 0 => {
                        prev_xmax = self.xmax_link(&h)?;
                        let same_page = h.ctid_block == tid.block;
                        tid = Tid {
                            block: h.ctid_block,
                            slot: h.ctid_slot,
                        };
                        if !same_page {
                            self.engine
                                .run_hook_at(HookPoint::HeapLink, u64::from(g.tag().block));
                            hop = Some(here);
                            drop(g);
                            self.set_hints(&buf, &mut hints)?;
                            continue 'page;
                        }
                    }
                    _ => {
                        drop(g);
                        self.set_hints(&buf, &mut hints)?;
                        return Ok(None);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::page::XMAX_INVALID;
    use super::*;

    /// Proves: an update that finds its page full with nothing to prune does not plan the
    /// page again while the horizon stands still (TPC-C's Delivery: an order's lines, one
    /// full page, updated one after the other), and plans it again once the horizon has
    /// moved, when the prune then makes room. How: a full page of committed rows; one
    /// transaction updates two of them (the first plan finds nothing, the second is not
    /// made: each new version goes to another page); after it commits, an update of a third
    /// row plans again and prunes the first two rows' old versions.
    #[test]
    fn a_futile_prune_is_not_planned_again_at_the_same_horizon() {
        let vfs = std::sync::Arc::new(crate::MemVfs::new()) as std::sync::Arc<dyn crate::Vfs>;
        let mut config = crate::Config::default();
        config.set("shared_buffers", "32").unwrap();
        let e = Engine::open_vfs(vfs, std::path::Path::new("/db"), &config, true).unwrap();
        let heap = Heap::create(&e, RelFileId::new(0, 900)).unwrap();
        let t = e.begin_xid().unwrap();
        let mut tids = Vec::new();
        loop {
            let tid = heap.insert(t, &[3u8; 100]).unwrap();
            if tid.block > 0 {
                break;
            }
            tids.push(tid);
        }
        e.commit_transaction(t).unwrap();
        let x = e.begin_xid().unwrap();
        for (n, &tid) in tids[..2].iter().enumerate() {
            let new = heap.update(x, tid, |d| d.to_vec()).unwrap().unwrap();
            assert_ne!(
                new.block, 0,
                "nothing to prune: the new version goes elsewhere"
            );
            assert_eq!(
                heap.plans.load(Ordering::Relaxed),
                1,
                "plans after update {n}"
            );
        }
        e.commit_transaction(x).unwrap();
        let y = e.begin_xid().unwrap();
        let new = heap.update(y, tids[2], |d| d.to_vec()).unwrap().unwrap();
        assert_eq!(
            heap.plans.load(Ordering::Relaxed),
            2,
            "planned at the new horizon"
        );
        assert_eq!(new.block, 0, "the prune made room on the page");
        e.commit_transaction(y).unwrap();
    }

    /// The block number of the pages built here.
    pub(super) const BLOCK: u32 = 7;

    /// A version header: `next` is the ctid (None: points at itself, as a fresh insert's).
    pub(super) fn version(
        slot: u16,
        xmin: Xid,
        xmax: Xid,
        next: Option<(u32, u16)>,
        infomask: u16,
    ) -> TupleHeader {
        let (ctid_block, ctid_slot) = next.unwrap_or((BLOCK, slot));
        TupleHeader {
            xmin,
            xmax,
            ctid_block,
            ctid_slot,
            infomask,
        }
    }

    /// A heap page of block [`BLOCK`] whose slot i + 1 holds a version with header
    /// `headers[i]` and 8 data bytes.
    pub(super) fn page(headers: &[TupleHeader]) -> Vec<u8> {
        let mut buf = vec![0u8; 8192];
        let mut p = HeapPageMut::new(&mut buf);
        for h in headers {
            let slot = p.insert(BLOCK, h.xmin, &[1; 8]).expect("fits");
            p.set_header(slot, h);
        }
        buf
    }

    #[test]
    fn tid_round_trips_through_u64() {
        for tid in [
            Tid { block: 0, slot: 1 },
            Tid {
                block: u32::MAX,
                slot: u16::MAX,
            },
            Tid {
                block: 12_345,
                slot: 678,
            },
        ] {
            assert_eq!(Tid::from_u64(tid.to_u64()), tid);
        }
    }

    #[test]
    fn chain_roots_follow_same_page_links_with_matching_xmin() {
        let buf = page(&[
            // Root 1 → 2 → 3, all on this page.
            version(1, 10, 11, Some((BLOCK, 2)), UPDATED),
            version(2, 11, 12, Some((BLOCK, 3)), UPDATED | HEAP_ONLY),
            version(3, 12, 0, None, XMAX_INVALID | HEAP_ONLY),
            // Root 4, whose ctid leads to another page.
            version(4, 10, 13, Some((BLOCK + 1, 1)), UPDATED),
            // A heap-only version no chain reaches (its update aborted).
            version(5, 14, 0, None, XMAX_INVALID | HEAP_ONLY),
            // Root 6 → 7 with a broken link (7's xmin is not 6's xmax).
            version(6, 10, 15, Some((BLOCK, 7)), UPDATED),
            version(7, 99, 0, None, XMAX_INVALID | HEAP_ONLY),
        ]);
        let mut roots = Vec::new();
        chain_roots(HeapPage(&buf), BLOCK, &mut roots);
        assert_eq!(roots, vec![0, 1, 1, 1, 4, 5, 6, 7]);
    }

    #[test]
    fn resolve_follows_one_redirect() {
        let mut buf = page(&[
            version(1, 10, 11, Some((BLOCK, 2)), UPDATED),
            version(2, 11, 0, None, XMAX_INVALID | HEAP_ONLY),
        ]);
        let at = |buf: &[u8], slot| resolve(HeapPage(buf), slot).map(|(s, h, _, r)| (s, h.xmin, r));
        assert_eq!(at(&buf, 1), Some((1, 10, false)));
        assert_eq!(at(&buf, 2), Some((2, 11, false)));
        assert_eq!(at(&buf, 3), None);
        HeapPageMut::new(&mut buf).set_item_state(1, ItemId::Redirect { to: 2 });
        assert_eq!(at(&buf, 1), Some((2, 11, true)));
        HeapPageMut::new(&mut buf).set_item_state(1, ItemId::Dead);
        assert_eq!(at(&buf, 1), None);
    }
}
