//! Heap relations: unordered tuples with MVCC headers, on buffer-pool pages, every change
//! WAL-logged through the engine (redo is physical, so recovery needs nothing heap-specific).
//!
//! Owns: nothing but the relation id and an insertion hint (the last block that had room;
//! the free-space map replaces it later).
//! Updates and deletes take row locks the PostgreSQL way: the tuple's xmax. A second
//! writer that finds xmax set by a running transaction waits for it to end (no page lock
//! held while waiting), then: aborted → the row is free again; committed and UPDATED →
//! follow ctid to the newer version and re-apply the change there (READ COMMITTED, like
//! PostgreSQL's EvalPlanQual: the caller's closure recomputes from the newest data);
//! committed delete → the row is gone.
//! Locks: one page's content lock at a time, except an update moving a row to another
//! page: it holds the old page and takes the target only with a try-lock (skipping pages
//! whose lock is busy), or a newly extended page (nobody else can hold the lock of a page
//! that did not exist a moment ago), so this cannot deadlock. A row-lock wait that would close a
//! cycle of transactions waiting on each other fails with a deadlock error instead
//! (`TxnManager::wait_for`); the caller aborts that transaction, which frees its rows.

use std::ops::Range;

use super::heap_page::{HeapPage, HeapPageMut, ItemId, UPDATED, XMAX_COMMITTED, XMAX_INVALID};
use crate::buffer::PageWriteGuard;
use crate::engine::{Engine, EngineError};
use crate::sync::{AtomicU32, Ordering};
use crate::txn::{Snapshot, Xid, XidStatus, INVALID_XID};
use crate::types::{BufferTag, ForkNumber, RelFileId};

/// A tuple's address: block and 1-based slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tid {
    pub block: u32,
    pub slot: u16,
}

/// Gap below which two changed runs of a page are logged as one range.
const RANGE_MERGE_GAP: usize = 16;

/// The byte ranges where `after` differs from `before` (runs closer than
/// `RANGE_MERGE_GAP` merged), so a change is logged without the caller listing them.
pub fn changed_ranges(before: &[u8], after: &[u8]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut i = 0;
    while i < after.len() {
        if before[i] == after[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < after.len() && before[i] != after[i] {
            i += 1;
        }
        match out.last_mut() {
            Some(last) if start - last.end < RANGE_MERGE_GAP => last.end = i,
            _ => out.push(start..i),
        }
    }
    out
}

/// A heap relation.
pub struct Heap<'e> {
    engine: &'e Engine,
    rel: RelFileId,
    hint: AtomicU32,
}

impl<'e> Heap<'e> {
    /// Creates the relation's main fork.
    pub fn create(engine: &'e Engine, rel: RelFileId) -> Result<Heap<'e>, EngineError> {
        engine.pool().create_relation(rel, ForkNumber::Main)?;
        Ok(Self::open(engine, rel))
    }

    pub fn open(engine: &'e Engine, rel: RelFileId) -> Heap<'e> {
        Heap {
            engine,
            rel,
            hint: AtomicU32::new(0),
        }
    }

    fn tag(&self, block: u32) -> BufferTag {
        BufferTag::new(self.rel, ForkNumber::Main, block)
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
        let ranges = changed_ranges(&before, g);
        if !ranges.is_empty() {
            self.engine.log_pages(xid, 0, &mut [(g, &ranges)])?;
        }
        Ok(r)
    }

    /// Inserts a tuple created by `xid`.
    pub fn insert(&self, xid: Xid, data: &[u8]) -> Result<Tid, EngineError> {
        let pool = self.engine.pool();
        let max = HeapPage(&vec![0u8; pool.page_size()]).max_tuple_data();
        if data.len() > max {
            return Err(EngineError::TupleTooLarge {
                len: data.len(),
                max,
            });
        }
        loop {
            let n = pool.nblocks(self.rel, ForkNumber::Main)?;
            let hint = self.hint.load(Ordering::Relaxed);
            let buf = if hint < n {
                pool.read(self.tag(hint))?
            } else {
                pool.extend(self.rel, ForkNumber::Main)?
            };
            let block = buf.tag().block;
            let mut g = buf.write();
            if HeapPage(&g).fits(data.len()) {
                if let Some(slot) =
                    self.change_logged(xid, &mut g, |p| p.insert(block, xid, data))?
                {
                    return Ok(Tid { block, slot });
                }
            }
            // Full: move the hint on (past the end means: extend next time).
            let _ =
                self.hint
                    .compare_exchange(hint, block + 1, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// The tuple at `tid` as `snap` sees it.
    pub fn fetch(&self, snap: &Snapshot, tid: Tid) -> Result<Option<Vec<u8>>, EngineError> {
        if tid.block >= self.engine.pool().nblocks(self.rel, ForkNumber::Main)? {
            return Ok(None);
        }
        let buf = self.engine.pool().read(self.tag(tid.block))?;
        let g = buf.read();
        let Some((h, data)) = HeapPage(&g).tuple(tid.slot) else {
            return Ok(None);
        };
        let xmax = if h.infomask & XMAX_INVALID != 0 {
            INVALID_XID
        } else {
            h.xmax
        };
        if self.engine.txns().visible(snap, h.xmin, xmax)? {
            Ok(Some(data.to_vec()))
        } else {
            Ok(None)
        }
    }

    /// Every tuple visible to `snap`, in physical order.
    pub fn scan(&self, snap: &Snapshot, mut f: impl FnMut(Tid, &[u8])) -> Result<(), EngineError> {
        let n = self.engine.pool().nblocks(self.rel, ForkNumber::Main)?;
        for block in 0..n {
            let buf = self.engine.pool().read(self.tag(block))?;
            let g = buf.read();
            let page = HeapPage(&g);
            for slot in 1..=page.slots() {
                if let Some((h, data)) = page.tuple(slot) {
                    let xmax = if h.infomask & XMAX_INVALID != 0 {
                        INVALID_XID
                    } else {
                        h.xmax
                    };
                    if self.engine.txns().visible(snap, h.xmin, xmax)? {
                        f(Tid { block, slot }, data);
                    }
                }
            }
        }
        Ok(())
    }

    /// Updates the row at `tid` for `xid`: `f` computes the new data from the newest
    /// committed version (re-run if a concurrent update wins first). Returns the new
    /// version's tid, or None if the row was deleted meanwhile.
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
        mut tid: Tid,
        mut f: Option<impl FnMut(&[u8]) -> Vec<u8>>,
    ) -> Result<Option<Tid>, EngineError> {
        let pool = self.engine.pool();
        let txns = self.engine.txns();
        loop {
            let buf = pool.read(self.tag(tid.block))?;
            let mut g = buf.write();
            let Some((h, data)) = HeapPage(&g).tuple(tid.slot) else {
                return Ok(None);
            };
            // Who holds the row?
            let holder = if h.infomask & XMAX_INVALID != 0 {
                INVALID_XID
            } else {
                h.xmax
            };
            if holder != INVALID_XID && holder != xid {
                match txns.status(holder)? {
                    XidStatus::InProgress => {
                        drop(g);
                        drop(buf);
                        txns.wait_for(xid, holder)?;
                        continue;
                    }
                    XidStatus::Committed if h.infomask & UPDATED != 0 => {
                        tid = Tid {
                            block: h.ctid_block,
                            slot: h.ctid_slot,
                        };
                        continue;
                    }
                    XidStatus::Committed => return Ok(None),
                    _ => {} // aborted: the row is free again
                }
            } else if holder == xid {
                if h.infomask & UPDATED != 0 {
                    tid = Tid {
                        block: h.ctid_block,
                        slot: h.ctid_slot,
                    };
                    continue;
                }
                return Ok(None); // deleted by this very transaction
            }
            // Also wait out an uncommitted insert of the row by someone else.
            if h.xmin != xid && txns.is_running(h.xmin) {
                let inserter = h.xmin;
                drop(g);
                drop(buf);
                txns.wait_for(xid, inserter)?;
                continue;
            }
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
            // Same page when the new version fits (PostgreSQL's HOT case, without the index).
            // No opportunistic pruning here: it would free slots that callers following an
            // update chain from an older tid still reach (PostgreSQL keeps redirect line
            // pointers for that; see issue 5's note). VACUUM prunes.
            if HeapPage(&g).fits(new_data.len()) {
                let new_tid = self.change_logged(xid, &mut g, |p| {
                    let slot = p.insert(block, xid, &new_data).expect("fits");
                    old.ctid_block = block;
                    old.ctid_slot = slot;
                    p.set_header(tid.slot, &old);
                    Tid { block, slot }
                })?;
                return Ok(Some(new_tid));
            }
            // Otherwise another page with room: from the insertion hint on, taking each
            // candidate's lock only if it is free (we hold this page's lock: waiting could
            // close a cycle); else a new page at the end (nobody else can hold its lock).
            // Logged as two records, the new version then the old one's header. The pair
            // needs no atomicity of its own: the commit record comes after both; without
            // it, xmax belongs to a transaction that never committed and the row stays free.
            let n = pool.nblocks(self.rel, ForkNumber::Main)?;
            let start = self.hint.load(Ordering::Relaxed).min(n);
            let mut placed = None;
            for candidate in start..n {
                if candidate == block {
                    continue;
                }
                let cbuf = pool.read(self.tag(candidate))?;
                let Some(mut cg) = cbuf.try_write() else {
                    continue;
                };
                if !HeapPage(&cg).fits(new_data.len()) {
                    continue;
                }
                let slot = self
                    .change_logged(xid, &mut cg, |p| p.insert(candidate, xid, &new_data))?
                    .expect("checked that it fits");
                placed = Some(Tid {
                    block: candidate,
                    slot,
                });
                break;
            }
            let new_tid = match placed {
                Some(t) => t,
                None => {
                    let nbuf = pool.extend(self.rel, ForkNumber::Main)?;
                    let nblock = nbuf.tag().block;
                    let mut ng = nbuf.write();
                    let slot = self
                        .change_logged(xid, &mut ng, |p| p.insert(nblock, xid, &new_data))?
                        .expect("an empty page holds any tuple");
                    Tid {
                        block: nblock,
                        slot,
                    }
                }
            };
            old.ctid_block = new_tid.block;
            old.ctid_slot = new_tid.slot;
            self.change_logged(xid, &mut g, |p| p.set_header(tid.slot, &old))?;
            return Ok(Some(new_tid));
        }
    }
}

/// What VACUUM did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VacuumReport {
    pub pages: u32,
    pub removed: u64,
    pub truncated_pages: u32,
}

impl Heap<'_> {
    /// Removes the versions of the page under `g` that no snapshot can see any more
    /// (inserted by an aborted transaction, or deleted by one that committed below
    /// `horizon`), compacts the page and logs the result. Returns how many were removed.
    fn prune_locked(
        &self,
        xid: Xid,
        g: &mut PageWriteGuard<'_>,
        horizon: Xid,
    ) -> Result<u64, EngineError> {
        let txns = self.engine.txns();
        let mut dead = Vec::new();
        {
            let page = HeapPage(g);
            for slot in 1..=page.slots() {
                let Some((h, _)) = page.tuple(slot) else {
                    continue;
                };
                let xmax = if h.infomask & XMAX_INVALID != 0 {
                    INVALID_XID
                } else {
                    h.xmax
                };
                let aborted_insert = txns.status(h.xmin)? == XidStatus::Aborted;
                let deleted_for_all = xmax != INVALID_XID
                    && xmax < horizon
                    && txns.status(xmax)? == XidStatus::Committed;
                if aborted_insert || deleted_for_all {
                    dead.push(slot);
                }
            }
        }
        if dead.is_empty() {
            return Ok(0);
        }
        self.change_logged(xid, g, |p| {
            for &slot in &dead {
                p.set_item_state(slot, ItemId::Unused);
            }
            p.compact();
        })?;
        Ok(dead.len() as u64)
    }

    /// VACUUM: prunes every page; with `truncate`, also cuts off empty pages at the end
    /// (the caller must have the table to itself: nothing else may be inserting) and takes
    /// a checkpoint, so that replay never goes back across the (unlogged) truncation.
    /// Tuple ids of removed versions become free for reuse, as PostgreSQL's do: nobody
    /// may hold a tid across a VACUUM (follow update chains before it, not after).
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
            report.removed += self.prune_locked(crate::txn::FROZEN_XID, &mut g, horizon)?;
            let page = HeapPage(&g);
            if (1..=page.slots()).any(|s| page.tuple(s).is_some()) {
                last_nonempty = Some(block);
            }
        }
        self.hint.store(0, Ordering::Relaxed);
        let keep = last_nonempty.map_or(0, |b| b + 1);
        if truncate && keep < n {
            pool.flush_relation(self.rel)?;
            pool.truncate_relation(self.rel, ForkNumber::Main, keep)?;
            report.truncated_pages = n - keep;
            self.engine.checkpoint()?;
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_ranges_merge_close_runs() {
        let a = vec![0u8; 100];
        let mut b = a.clone();
        b[10] = 1;
        b[20] = 1; // within 16 bytes of the first run: merged
        b[60] = 1;
        b[61] = 1;
        assert_eq!(changed_ranges(&a, &b), vec![10..21, 60..62]);
        assert!(changed_ranges(&a, &a).is_empty());
    }
}
