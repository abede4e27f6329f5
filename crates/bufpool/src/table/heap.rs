//! Heap relations: unordered tuples with MVCC headers, on buffer-pool pages, every change
//! WAL-logged through the engine (redo is physical, so recovery needs nothing heap-specific).
//!
//! Owns: the relation id, its free-space map ([`Fsm`]), the fillfactor of this handle and
//! an insertion hint (the last block that had room, where the map search starts).
//!
//! **Row identity.** A row is named by the tuple id of its first version, its *root*; an
//! index stores roots. Updates chain versions through ctid; a same-page update makes a
//! `HEAP_ONLY` version. [`Heap::fetch`] from a root walks the chain (through redirects
//! and ctids, checking that each version's xmin is its predecessor's xmax, PostgreSQL's
//! rule for detecting a chain broken by pruning) to the version the snapshot sees.
//!
//! **Row locks**, the PostgreSQL way: the tuple's xmax. A second writer that finds xmax
//! set by a running transaction waits for it to end (no page lock held while waiting),
//! then: aborted → the row is free again; committed and UPDATED → follow ctid to the newer
//! version and re-apply the change there (READ COMMITTED, like PostgreSQL's EvalPlanQual:
//! the caller's closure recomputes from the newest data); committed delete → the row is
//! gone.
//!
//! **Pruning** (when an update finds its page full, and in VACUUM) works chain by chain
//! from each root, like PostgreSQL's heap_page_prune: the dead prefix of a chain (versions
//! no snapshot can see: inserted by an aborted transaction, or replaced or deleted by one
//! that committed below the oldest running snapshot's xmin) is cut off. The root becomes a
//! redirect to the first live version, or, when the chain went on to another page, a
//! redirect to a header-only stub that carries the ctid there; a chain that ended in a
//! delete leaves a dead line pointer. Heap-only dead versions become unused slots. Roots
//! are never freed by pruning, so a tuple id held by an index or a caller stays valid;
//! VACUUM turns dead line pointers (deleted rows) into unused ones, so an index must drop
//! its entries for deleted rows first, or recheck the key of what it fetches.
//!
//! **Hint bits.** Visibility checks record what they learned from the commit log
//! (XMIN_COMMITTED, XMIN_INVALID, XMAX_COMMITTED, XMAX_INVALID) and set it on the page
//! afterwards, under an exclusive lock taken only if free (never waiting). The change is
//! not WAL-logged; [`Engine::log_hint`] makes writing such a page safe (a full-page image
//! when the page's first change since the checkpoint, the commit record first under
//! asynchronous commit).
//!
//! **Locks.** One page's content lock at a time, except an update moving a row to another
//! page: it holds the old page and takes the target only with a try-lock (skipping pages
//! whose lock is busy), or a newly extended page (nobody else can hold the lock of a page
//! that did not exist a moment ago), so this cannot deadlock; free-space-map pages are
//! taken after heap pages, never the other way round. A row-lock wait that would close a
//! cycle of transactions waiting on each other fails with a deadlock error instead
//! (`TxnManager::wait_for`); the caller aborts that transaction, which frees its rows.

use super::fsm::Fsm;
use super::heap_page::{
    tuple_space, HeapPage, HeapPageMut, ItemId, TupleHeader, HEAP_ONLY, ITEM_ID_SIZE, UPDATED,
    XMAX_COMMITTED, XMAX_INVALID, XMIN_COMMITTED, XMIN_INVALID,
};
use crate::buffer::{BufferRef, PageWriteGuard};
use crate::config::ConfigError;
use crate::engine::{Engine, EngineError};
use crate::sync::{AtomicU32, Ordering};
use crate::txn::{Snapshot, Xid, XidStatus, FROZEN_XID, INVALID_XID};
use crate::types::{BufferTag, ForkNumber, RelFileId};

/// A tuple's address: block and 1-based slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tid {
    pub block: u32,
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
/// Default fillfactor (PostgreSQL's for heaps): inserts fill pages completely.
pub const DEFAULT_FILLFACTOR: u8 = 100;

/// How a tuple version looks to a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Vis {
    /// Its creator is not visible (still running for the snapshot, or aborted).
    NotYet,
    Visible,
    /// Created and then replaced or deleted, both visible to the snapshot.
    Gone,
}

/// Hint bits learned while a page was read: (slot, the xid they are about, bits).
type Hints = Vec<(u16, Xid, u16)>;

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
                Some((next, _)) if next.infomask & HEAP_ONLY != 0 && next.xmin == h.xmax => {
                    cur = h.ctid_slot
                }
                _ => break,
            }
        }
    }
}

fn xmax_of(h: &TupleHeader) -> Xid {
    if h.infomask & XMAX_INVALID != 0 {
        INVALID_XID
    } else {
        h.xmax
    }
}

/// A heap relation.
pub struct Heap<'e> {
    engine: &'e Engine,
    rel: RelFileId,
    fsm: Fsm,
    fillfactor: u8,
    hint: AtomicU32,
}

impl<'e> Heap<'e> {
    /// Creates the relation's main and free-space forks.
    pub fn create(engine: &'e Engine, rel: RelFileId) -> Result<Heap<'e>, EngineError> {
        engine.pool().create_relation(rel, ForkNumber::Main)?;
        engine.pool().create_relation(rel, ForkNumber::FreeSpace)?;
        Ok(Self::open(engine, rel))
    }

    /// Opens an existing relation (its free-space fork is created if missing: the map is
    /// not WAL-logged, so a crash may lose a new one).
    pub fn open(engine: &'e Engine, rel: RelFileId) -> Heap<'e> {
        let pool = engine.pool();
        if pool.nblocks(rel, ForkNumber::FreeSpace).is_err() {
            let _ = pool.create_relation(rel, ForkNumber::FreeSpace);
        }
        Heap {
            engine,
            rel,
            fsm: Fsm::new(rel, pool.page_size()),
            fillfactor: DEFAULT_FILLFACTOR,
            hint: AtomicU32::new(0),
        }
    }

    /// Sets this handle's fillfactor (percent, 10..=100, PostgreSQL's range and meaning):
    /// inserts leave `100 - fillfactor` percent of each page free, so that updates of
    /// its rows can stay on the page.
    pub fn with_fillfactor(mut self, fillfactor: u8) -> Result<Self, EngineError> {
        if !(10..=100).contains(&fillfactor) {
            return Err(ConfigError::new("fillfactor", fillfactor, "10..100 (percent)").into());
        }
        self.fillfactor = fillfactor;
        Ok(self)
    }

    pub fn rel(&self) -> RelFileId {
        self.rel
    }

    /// The free-space map.
    pub fn fsm(&self) -> &Fsm {
        &self.fsm
    }

    fn tag(&self, block: u32) -> BufferTag {
        BufferTag::new(self.rel, ForkNumber::Main, block)
    }

    /// Bytes inserts leave free on a page.
    fn reserve(&self) -> usize {
        self.engine.pool().page_size() * (100 - self.fillfactor as usize) / 100
    }

    /// Applies `change` to a page under its write guard and logs what changed.
    fn change_logged<R>(
        &self,
        xid: Xid,
        g: &mut PageWriteGuard<'_>,
        change: impl FnOnce(&mut HeapPageMut<'_>) -> R,
    ) -> Result<R, EngineError> {
        let before = g.to_vec();
        let r = change(&mut HeapPageMut(g));
        let ranges = crate::engine::changed_ranges(&before, g);
        if !ranges.is_empty() {
            self.engine.log_pages(xid, 0, &mut [(g, &ranges)])?;
        }
        Ok(r)
    }

    /// How `h` looks to `snap`; what the commit log told goes to `hints`.
    fn vis(
        &self,
        snap: &Snapshot,
        slot: u16,
        h: &TupleHeader,
        hints: &mut Hints,
    ) -> Result<Vis, EngineError> {
        let txns = self.engine.txns();
        let m = h.infomask;
        if m & XMIN_INVALID != 0 {
            return Ok(Vis::NotYet);
        }
        if h.xmin != snap.own {
            if snap.in_progress(h.xmin) {
                return Ok(Vis::NotYet);
            }
            if m & XMIN_COMMITTED == 0 {
                match txns.status(h.xmin)? {
                    XidStatus::Committed => hints.push((slot, h.xmin, XMIN_COMMITTED)),
                    XidStatus::Aborted => {
                        hints.push((slot, h.xmin, XMIN_INVALID));
                        return Ok(Vis::NotYet);
                    }
                    XidStatus::InProgress | XidStatus::SubCommitted => return Ok(Vis::NotYet),
                }
            }
        }
        if m & XMAX_INVALID != 0 {
            return Ok(Vis::Visible);
        }
        if h.xmax == snap.own {
            return Ok(Vis::Gone);
        }
        if snap.in_progress(h.xmax) {
            return Ok(Vis::Visible);
        }
        if m & XMAX_COMMITTED != 0 {
            return Ok(Vis::Gone);
        }
        Ok(match txns.status(h.xmax)? {
            XidStatus::Committed => {
                hints.push((slot, h.xmax, XMAX_COMMITTED));
                Vis::Gone
            }
            XidStatus::Aborted => {
                hints.push((slot, h.xmax, XMAX_INVALID));
                Vis::Visible
            }
            XidStatus::InProgress | XidStatus::SubCommitted => Vis::Visible,
        })
    }

    /// Whether no snapshot, now or later, can see `h`: its creator aborted, or it was
    /// replaced or deleted by a transaction that committed below `horizon` (the oldest
    /// xmin of any running transaction's snapshots).
    fn dead_to_all(
        &self,
        slot: u16,
        h: &TupleHeader,
        horizon: Xid,
        hints: &mut Hints,
    ) -> Result<bool, EngineError> {
        let txns = self.engine.txns();
        let m = h.infomask;
        if m & XMIN_INVALID != 0 {
            return Ok(true);
        }
        if m & XMIN_COMMITTED == 0 {
            match txns.status(h.xmin)? {
                XidStatus::Aborted => {
                    hints.push((slot, h.xmin, XMIN_INVALID));
                    return Ok(true);
                }
                XidStatus::InProgress | XidStatus::SubCommitted => return Ok(false),
                XidStatus::Committed => hints.push((slot, h.xmin, XMIN_COMMITTED)),
            }
        }
        if m & XMAX_INVALID != 0 || h.xmax >= horizon {
            return Ok(false);
        }
        if m & XMAX_COMMITTED != 0 {
            return Ok(true);
        }
        Ok(match txns.status(h.xmax)? {
            XidStatus::Committed => {
                hints.push((slot, h.xmax, XMAX_COMMITTED));
                true
            }
            XidStatus::Aborted => {
                hints.push((slot, h.xmax, XMAX_INVALID));
                false
            }
            XidStatus::InProgress | XidStatus::SubCommitted => false,
        })
    }

    /// Sets learned hint bits on the page of `buf`, if its lock is free right now (a
    /// missed hint is only a later commit-log lookup). Each hint is applied only if the
    /// tuple still has the xid it was learned about.
    fn set_hints(&self, buf: &BufferRef<'_>, hints: &mut Hints) -> Result<(), EngineError> {
        if hints.is_empty() {
            return Ok(());
        }
        let Some(mut g) = buf.try_write() else {
            hints.clear();
            return Ok(());
        };
        let mut any = false;
        for &(slot, xid, bits) in hints.iter() {
            let Some((mut h, _)) = HeapPage(&g).tuple(slot) else {
                continue;
            };
            let applies = if bits & (XMIN_COMMITTED | XMIN_INVALID) != 0 {
                h.xmin == xid
            } else {
                h.xmax == xid && h.infomask & (XMAX_INVALID | XMAX_COMMITTED) == 0
            };
            if applies && h.infomask & bits != bits {
                h.infomask |= bits;
                HeapPageMut(&mut g).set_header(slot, &h);
                any = true;
            }
        }
        hints.clear();
        if any {
            self.engine.log_hint(&mut g)?;
        }
        Ok(())
    }

    /// Inserts a tuple created by `xid`: into a page the free-space map says has room
    /// (leaving the fillfactor's reserve), else into a new page.
    pub fn insert(&self, xid: Xid, data: &[u8]) -> Result<Tid, EngineError> {
        let pool = self.engine.pool();
        let max = HeapPage(&vec![0u8; pool.page_size()]).max_tuple_data();
        if data.len() > max {
            return Err(EngineError::TupleTooLarge {
                len: data.len(),
                max,
            });
        }
        let reserve = self.reserve();
        let need = tuple_space(data.len()) + ITEM_ID_SIZE;
        loop {
            let n = pool.nblocks(self.rel, ForkNumber::Main)?;
            let hint = self.hint.load(Ordering::Relaxed);
            let buf = match self.fsm.search(pool, need + reserve, hint, n)? {
                Some(b) => pool.read(self.tag(b))?,
                None => pool.extend(self.rel, ForkNumber::Main)?,
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
                self.fsm.set(pool, block, free)?;
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
    /// Returns the number of rows.
    pub fn bulk_load<R: AsRef<[u8]>>(
        &self,
        xid: Xid,
        frozen: bool,
        rows: impl IntoIterator<Item = R>,
        mut placed: impl FnMut(Tid),
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, EngineError> {
        let pool = self.engine.pool();
        let max = HeapPage(&vec![0u8; pool.page_size()]).max_tuple_data();
        let reserve = self.reserve();
        let (xmin, mask) = if frozen {
            (FROZEN_XID, XMIN_COMMITTED)
        } else {
            (xid, 0)
        };
        let mut rows = rows.into_iter().peekable();
        let mut count = 0u64;
        while rows.peek().is_some() {
            let buf = pool.extend(self.rel, ForkNumber::Main)?;
            let block = buf.tag().block;
            let mut g = buf.write();
            {
                let mut p = HeapPageMut(&mut g);
                p.init_if_new();
                while let Some(row) = rows.peek() {
                    let data = row.as_ref();
                    if data.len() > max {
                        return Err(EngineError::TupleTooLarge {
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
        progress(count);
        Ok(count)
    }

    /// The version of the row rooted at `tid` that `snap` sees (see the module doc).
    pub fn fetch(&self, snap: &Snapshot, tid: Tid) -> Result<Option<Vec<u8>>, EngineError> {
        self.fetch_with(snap, tid, |_, d| d.to_vec())
    }

    /// [`Heap::fetch`], passing the version's tuple id and bytes to `f` under the page's
    /// shared lock instead of copying them.
    pub fn fetch_with<R>(
        &self,
        snap: &Snapshot,
        mut tid: Tid,
        f: impl FnOnce(Tid, &[u8]) -> R,
    ) -> Result<Option<R>, EngineError> {
        let pool = self.engine.pool();
        let mut prev_xmax = INVALID_XID;
        let mut hints = Hints::new();
        // A chain is finite; the bound only guards against a damaged one. Same-page steps
        // happen under one lock, so pruning cannot cut the chain between them; a chain
        // leaving the page leads to a root, which pruning never frees.
        let mut steps = 0u32;
        'page: loop {
            let buf = pool.read(self.tag(tid.block))?;
            let g = buf.read();
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
                        prev_xmax = h.xmax;
                        let same_page = h.ctid_block == tid.block;
                        tid = Tid {
                            block: h.ctid_block,
                            slot: h.ctid_slot,
                        };
                        if !same_page {
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

    /// Every tuple visible to `snap`, in physical order, each with its row's stable tuple
    /// id on this page (the root of its same-page chain: see the module doc), which later
    /// fetches, updates and deletes accept.
    pub fn scan(&self, snap: &Snapshot, mut f: impl FnMut(Tid, &[u8])) -> Result<(), EngineError> {
        let pool = self.engine.pool();
        let n = pool.nblocks(self.rel, ForkNumber::Main)?;
        let mut hints = Hints::new();
        let mut roots: Vec<u16> = Vec::new();
        for block in 0..n {
            let buf = pool.read(self.tag(block))?;
            let g = buf.read();
            let page = HeapPage(&g);
            roots.clear();
            for slot in 1..=page.slots() {
                if let Some((h, data)) = page.tuple(slot) {
                    if self.vis(snap, slot, &h, &mut hints)? == Vis::Visible {
                        let mut id = slot;
                        if h.infomask & HEAP_ONLY != 0 {
                            if roots.is_empty() {
                                chain_roots(page, block, &mut roots);
                            }
                            id = roots[slot as usize];
                        }
                        f(Tid { block, slot: id }, data);
                    }
                }
            }
            drop(g);
            self.set_hints(&buf, &mut hints)?;
        }
        Ok(())
    }

    /// Updates the row at `tid` for `xid`: `f` computes the new data from the newest
    /// committed version (re-run if a concurrent update wins first). Returns the new
    /// version's tid, or None if the row was deleted meanwhile. The row keeps its root
    /// tid: pass the root (or any later tid of the row) to later calls.
    pub fn update(
        &self,
        xid: Xid,
        tid: Tid,
        f: impl FnMut(&[u8]) -> Vec<u8>,
    ) -> Result<Option<Tid>, EngineError> {
        self.modify(xid, tid, Some(f))
    }

    /// Deletes the row at `tid` for `xid`. Returns false if it was already deleted.
    pub fn delete(&self, xid: Xid, tid: Tid) -> Result<bool, EngineError> {
        Ok(self
            .modify(xid, tid, None::<fn(&[u8]) -> Vec<u8>>)?
            .is_some())
    }

    fn modify(
        &self,
        xid: Xid,
        tid: Tid,
        f: Option<impl FnMut(&[u8]) -> Vec<u8>>,
    ) -> Result<Option<Tid>, EngineError> {
        let mut span = Span::default();
        let r = self.modify_walk(xid, tid, f, &mut span)?;
        if r.is_some() {
            self.compress(&span)?;
        }
        Ok(r)
    }

    /// Shortens a row's chain after `modify` walked it across several pages through
    /// versions dead to everyone: the first such cross-page link is pointed straight at
    /// the last one's target, so the next walk from the row's root skips the dead middle
    /// (a hot row that moved page after page under contention otherwise costs one page
    /// visit per move, forever). Safe because no snapshot can see the skipped versions,
    /// and the link keeps the xmin check: its xmax becomes the last link's, which is the
    /// target's xmin. Takes one page lock, none held.
    fn compress(&self, span: &Span) -> Result<(), EngineError> {
        let (Some((src, x1, t1)), Some((xn, tn))) = (span.start, span.end) else {
            return Ok(());
        };
        let buf = self.engine.pool().read(self.tag(src.block))?;
        let mut g = buf.write();
        let Some((mut h, _)) = HeapPage(&g).tuple(src.slot) else {
            return Ok(());
        };
        let unchanged = h.xmax == x1
            && h.infomask & UPDATED != 0
            && h.infomask & XMAX_INVALID == 0
            && h.ctid_block == t1.block
            && h.ctid_slot == t1.slot;
        if !unchanged {
            return Ok(());
        }
        h.xmax = xn;
        h.ctid_block = tn.block;
        h.ctid_slot = tn.slot;
        h.infomask |= XMAX_COMMITTED;
        self.change_logged(FROZEN_XID, &mut g, |p| p.set_header(src.slot, &h))?;
        Ok(())
    }

    fn modify_walk(
        &self,
        xid: Xid,
        mut tid: Tid,
        mut f: Option<impl FnMut(&[u8]) -> Vec<u8>>,
        span: &mut Span,
    ) -> Result<Option<Tid>, EngineError> {
        let pool = self.engine.pool();
        let txns = self.engine.txns();
        let mut prev_xmax = INVALID_XID;
        'page: loop {
            let buf = pool.read(self.tag(tid.block))?;
            let mut g = buf.write();
            // Find the row's newest version, following same-page links under this lock
            // (pruning cannot cut the chain meanwhile); a link to another page, or a wait,
            // starts over there.
            let (slot, h) = loop {
                let Some((slot, h, _, redirected)) = resolve(HeapPage(&g), tid.slot) else {
                    return Ok(None);
                };
                if prev_xmax != INVALID_XID && !redirected && h.xmin != prev_xmax {
                    return Ok(None); // a deleted row's slot, freed by VACUUM and reused
                }
                // From here `tid` names this very version (a redirect resolved), so a
                // re-read after a wait below must find the same xmin there.
                tid.slot = slot;
                prev_xmax = h.xmin;
                // Who holds the row?
                let holder = xmax_of(&h);
                let follow = if holder != INVALID_XID && holder != xid {
                    match txns.status(holder)? {
                        XidStatus::InProgress | XidStatus::SubCommitted => {
                            drop(g);
                            drop(buf);
                            txns.wait_for(xid, holder)?;
                            continue 'page;
                        }
                        XidStatus::Committed if h.infomask & UPDATED != 0 => true,
                        XidStatus::Committed => return Ok(None),
                        XidStatus::Aborted => false, // the row is free again
                    }
                } else if holder == xid {
                    if h.infomask & UPDATED == 0 {
                        return Ok(None); // deleted by this very transaction
                    }
                    true
                } else {
                    false
                };
                if follow {
                    prev_xmax = holder;
                    let same_page = h.ctid_block == tid.block;
                    let target = Tid {
                        block: h.ctid_block,
                        slot: h.ctid_slot,
                    };
                    // Track a stretch of versions dead to all between cross-page links.
                    if !same_page || span.start.is_some() {
                        let horizon = *span.horizon.get_or_insert_with(|| txns.oldest_xmin());
                        let dead = self.dead_to_all(slot, &h, horizon, &mut Hints::new())?;
                        if !dead {
                            span.broken |= span.start.is_some();
                        } else if !same_page && !span.broken {
                            match span.start {
                                None => span.start = Some((tid, h.xmax, target)),
                                Some(_) => span.end = Some((h.xmax, target)),
                            }
                        }
                    }
                    tid = target;
                    if same_page {
                        continue;
                    }
                    continue 'page;
                }
                // Also wait out an uncommitted insert of the row by someone else.
                if h.xmin != xid && txns.is_running(h.xmin) {
                    let inserter = h.xmin;
                    drop(g);
                    drop(buf);
                    txns.wait_for(xid, inserter)?;
                    continue 'page;
                }
                if h.infomask & XMIN_INVALID != 0
                    || (h.xmin != xid && txns.status(h.xmin)? == XidStatus::Aborted)
                {
                    return Ok(None); // its insert was rolled back: there is no row
                }
                break (slot, h);
            };
            let data = HeapPage(&g).tuple(slot).expect("resolved above").1;
            let new_data = f.as_mut().map(|f| f(data));
            let mut old = h;
            old.xmax = xid;
            old.infomask &= !(XMAX_INVALID | XMAX_COMMITTED);
            let Some(new_data) = new_data else {
                self.change_logged(xid, &mut g, |p| p.set_header(tid.slot, &old))?;
                return Ok(Some(tid));
            };
            old.infomask |= UPDATED;
            let block = tid.block;
            // Same page when the new version fits, pruning dead versions first if needed
            // (PostgreSQL's HOT update; this version is live, so pruning keeps its slot).
            if !HeapPage(&g).fits(new_data.len()) {
                let horizon = txns.oldest_xmin();
                self.prune_locked(&mut g, horizon, false)?;
            }
            if HeapPage(&g).fits(new_data.len()) {
                let new_tid = self.change_logged(xid, &mut g, |p| {
                    let slot = p.insert(block, xid, &new_data).expect("fits");
                    let (mut nh, _) = p.view().tuple(slot).expect("just inserted");
                    nh.infomask |= HEAP_ONLY;
                    p.set_header(slot, &nh);
                    old.ctid_block = block;
                    old.ctid_slot = slot;
                    p.set_header(tid.slot, &old);
                    Tid { block, slot }
                })?;
                let free = HeapPage(&g).free_space();
                drop(g);
                self.fsm.set(pool, block, free)?;
                return Ok(Some(new_tid));
            }
            // Otherwise another page with room, from the free-space map, taking each
            // candidate's lock only if it is free (we hold this page's lock: waiting could
            // close a cycle); else a new page at the end (nobody else can hold its lock).
            // The new version is a root on its page (pruning never frees it: this page's
            // chain leads there). Logged as two records, the new version then the old
            // one's header. The pair needs no atomicity of its own: the commit record
            // comes after both; without it, xmax belongs to a transaction that never
            // committed and the row stays free.
            let new_tid = self.place_elsewhere(xid, block, &new_data)?;
            old.ctid_block = new_tid.block;
            old.ctid_slot = new_tid.slot;
            self.change_logged(xid, &mut g, |p| p.set_header(tid.slot, &old))?;
            return Ok(Some(new_tid));
        }
    }

    /// Inserts the new version of a row moving off page `from` (whose lock the caller
    /// holds), never waiting for another page's lock.
    fn place_elsewhere(&self, xid: Xid, from: u32, data: &[u8]) -> Result<Tid, EngineError> {
        let pool = self.engine.pool();
        let need = tuple_space(data.len()) + ITEM_ID_SIZE;
        let n = pool.nblocks(self.rel, ForkNumber::Main)?;
        let mut start = self.hint.load(Ordering::Relaxed);
        // A few map candidates, then give up and extend.
        for _ in 0..8 {
            let Some(candidate) = self.fsm.search(pool, need, start, n)? else {
                break;
            };
            start = candidate + 1;
            if candidate == from {
                continue;
            }
            let cbuf = pool.read(self.tag(candidate))?;
            let Some(mut cg) = cbuf.try_write() else {
                continue;
            };
            if !HeapPage(&cg).fits(data.len()) {
                let free = HeapPage(&cg).free_space();
                drop(cg);
                self.fsm.set(pool, candidate, free)?;
                continue;
            }
            let slot = self
                .change_logged(xid, &mut cg, |p| p.insert(candidate, xid, data))?
                .expect("checked that it fits");
            let free = HeapPage(&cg).free_space();
            drop(cg);
            self.fsm.set(pool, candidate, free)?;
            return Ok(Tid {
                block: candidate,
                slot,
            });
        }
        let nbuf = pool.extend(self.rel, ForkNumber::Main)?;
        let nblock = nbuf.tag().block;
        let mut ng = nbuf.write();
        let slot = self
            .change_logged(xid, &mut ng, |p| p.insert(nblock, xid, data))?
            .expect("an empty page holds any tuple");
        let free = HeapPage(&ng).free_space();
        drop(ng);
        self.fsm.set(pool, nblock, free)?;
        Ok(Tid {
            block: nblock,
            slot,
        })
    }
}

/// A stretch of a row's chain that `modify` walked through versions dead to all.
#[derive(Default)]
struct Span {
    /// The first dead version whose ctid leaves its page: its tid, xmax and target.
    start: Option<(Tid, Xid, Tid)>,
    /// The last cross-page link of the stretch: its xmax and target.
    end: Option<(Xid, Tid)>,
    /// A version that is not dead to all came after `start`: stop extending.
    broken: bool,
    horizon: Option<Xid>,
}

/// What VACUUM did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VacuumReport {
    pub pages: u32,
    /// Dead versions whose space was reclaimed.
    pub removed: u64,
    pub truncated_pages: u32,
}

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

impl Heap<'_> {
    /// Prunes the page under `g`, chain by chain (see the module doc). With `vacuum`, dead
    /// line pointers become unused too. Logs the result as one record and records the
    /// page's free space in the map. Returns how many dead versions were removed.
    fn prune_locked(
        &self,
        g: &mut PageWriteGuard<'_>,
        horizon: Xid,
        vacuum: bool,
    ) -> Result<u64, EngineError> {
        let block = g.tag().block;
        let mut hints = Hints::new();
        let n = HeapPage(g).slots();
        let mut visited = vec![false; n as usize + 1];
        let mut plan: Vec<(u16, ItemId)> = Vec::new();
        let mut shrink: Vec<u16> = Vec::new();
        let mut removed = 0u64;
        for root in 1..=n {
            let page = HeapPage(g);
            let start = match page.item(root) {
                ItemId::Normal { .. } => {
                    let (h, _) = page.tuple(root).expect("normal");
                    if h.infomask & HEAP_ONLY != 0 {
                        continue; // reached through its chain, if at all
                    }
                    root
                }
                ItemId::Redirect { to } => to,
                ItemId::Dead if vacuum => {
                    plan.push((root, ItemId::Unused));
                    continue;
                }
                _ => continue,
            };
            // Walk the chain's dead prefix.
            let mut members: Vec<u16> = Vec::new();
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
                if !self.dead_to_all(cur, &h, horizon, &mut hints)? {
                    break ChainEnd::Live(cur);
                }
                members.push(cur);
                if h.infomask & UPDATED == 0 || h.infomask & XMAX_INVALID != 0 {
                    break ChainEnd::Gone;
                }
                if h.ctid_block != block {
                    break ChainEnd::LeavesPage(cur);
                }
                if h.ctid_slot == cur {
                    break ChainEnd::Unclear;
                }
                prev_xmax = h.xmax;
                cur = h.ctid_slot;
            };
            let keep = match end {
                ChainEnd::Unclear => continue,
                ChainEnd::Live(l) => {
                    if l != root {
                        plan.push((root, ItemId::Redirect { to: l }));
                    }
                    l
                }
                ChainEnd::LeavesPage(m) => {
                    if m != root {
                        plan.push((root, ItemId::Redirect { to: m }));
                    }
                    if HeapPage(g).tuple(m).is_some_and(|(_, d)| !d.is_empty()) {
                        shrink.push(m);
                        removed += 1;
                    }
                    m
                }
                ChainEnd::Gone => {
                    plan.push((root, if vacuum { ItemId::Unused } else { ItemId::Dead }));
                    0
                }
            };
            for &m in &members {
                if m != root && m != keep {
                    plan.push((m, ItemId::Unused));
                }
                if m != keep {
                    removed += 1;
                }
            }
        }
        // Heap-only versions no chain reaches (updates whose transaction aborted, their
        // predecessor's ctid since pointed elsewhere) go when dead. Every version some
        // chain reaches is left to its chain's decision above.
        let mut roots = Vec::new();
        chain_roots(HeapPage(g), block, &mut roots);
        for slot in 1..=n {
            if visited[slot as usize] || roots[slot as usize] != slot {
                continue;
            }
            let page = HeapPage(g);
            if let Some((h, _)) = page.tuple(slot) {
                if h.infomask & HEAP_ONLY != 0 && self.dead_to_all(slot, &h, horizon, &mut hints)? {
                    plan.push((slot, ItemId::Unused));
                    removed += 1;
                }
            }
        }
        if !plan.is_empty() || !shrink.is_empty() {
            self.change_logged(FROZEN_XID, g, |p| {
                for &m in &shrink {
                    p.shrink_to_header(m);
                }
                for &(slot, item) in &plan {
                    p.set_item_state(slot, item);
                }
                p.compact();
            })?;
        }
        let free = HeapPage(g).free_space();
        self.fsm.set(self.engine.pool(), block, free)?;
        Ok(removed)
    }

    /// VACUUM: prunes every page (dead line pointers become reusable, see the module doc)
    /// and records each page's free space; with `truncate`, also cuts off empty pages at
    /// the end (the caller must have the table to itself: nothing else may be inserting)
    /// and takes a checkpoint, so that replay never goes back across the (unlogged)
    /// truncation.
    pub fn vacuum(&self, truncate: bool) -> Result<VacuumReport, EngineError> {
        let pool = self.engine.pool();
        let horizon = self.engine.txns().oldest_xmin();
        let n = pool.nblocks(self.rel, ForkNumber::Main)?;
        let mut report = VacuumReport {
            pages: n,
            ..VacuumReport::default()
        };
        let mut last_nonempty = None;
        for block in 0..n {
            let buf = pool.read(self.tag(block))?;
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
