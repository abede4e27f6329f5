//! Free-space map: one byte per heap page saying how much room it has, kept in the
//! relation's `_fsm` fork so that inserts find a page with room without reading heap pages
//! (PostgreSQL's freespace.c, flattened: one level of byte arrays instead of a tree of them).
//!
//! ```text
//! fsm page k: [page header 24 B][entry for heap block k*E][k*E+1]...[k*E+E-1]
//!   E = page size - 24; entry v means "at least v * (page size / 256) bytes free"
//! ```
//! Invariants: an entry never promises more room than the page had when it was recorded
//! (it is rounded down); a heap page with no entry (beyond the fork's end, or a page read
//! back as zeros) counts as full. Entries are hints: a stale one costs the inserter one
//! page visit, after which it corrects the entry; they are never trusted for correctness.
//! Durability: like PostgreSQL's, the map is not WAL-logged. Its pages carry no WAL
//! position (LSN 0) and go to disk with checkpoints and evictions; a page that fails its
//! checksum after a crash (a torn write) is read back as zeros (no free space known) and
//! rebuilt as VACUUM and inserts visit heap pages.
//! Locks: an fsm page's content lock, shared to search and exclusive to set, one at a time
//! and never while holding a heap page's lock in a way that waits: callers update entries
//! after releasing the heap page, or while holding it (heap → fsm is the only order).
//! `extend_lock` serializes growing the fork. The bounds' lock is a leaf: taken under a
//! content lock (or none) and released before any other lock is taken.
//!
//! Bounds (PostgreSQL's tree keeps, in each upper page, the largest entry below it, so a
//! search descends only where there is room; ours is one flat level): per fsm page, in
//! memory only, an upper bound of its entries (`bounds`; unknown, i.e. 255, until a search
//! has read the whole page). A search skips a page whose bound is below what it needs, so
//! looking for room in a table whose pages are all full (an append-only table such as
//! pgbench_history, every time its last page fills) reads no fsm page instead of every
//! one. Why the bound stays an upper bound: `set` raises it while holding the page's
//! content lock exclusively, and a search lowers it to the page's maximum while holding
//! the shared lock under which it computed that maximum, so no raise falls between the
//! two; entries only ever drop without lowering the bound (truncation, a torn page read
//! back as zeros), which leaves it an upper bound.

use crate::buffer::BufferError;
use crate::buffer::BufferPool;
use crate::page::{self, PAGE_HEADER_SIZE};
use crate::stats::FsmBounds;
use crate::sync::{Arc, AtomicU32, Mutex, Ordering};
use crate::types::{BufferTag, ForkNumber, RelFileId};

/// The free-space map of one heap relation.
pub struct Fsm {
    rel: RelFileId,
    page_size: usize,
    extend_lock: Mutex<()>,
    /// Per fsm page, an upper bound of its entries, shared by every handle of the
    /// relation (see the module doc).
    bounds: Arc<FsmBounds>,
}

/// The bound of an fsm page no search has read whole yet.
const UNKNOWN: u32 = 255;

impl Fsm {
    /// A map handle with bounds of its own: only for a relation no other handle uses
    /// (tests, tools); a table's handles use [`Fsm::shared`].
    pub fn new(rel: RelFileId, page_size: usize) -> Fsm {
        Self::shared(rel, page_size, Arc::default())
    }

    /// A map handle whose bounds every handle of `rel` shares (a heap handle passes its
    /// relation's, kept with the relation's counters). Every handle of a relation must use
    /// the same bounds: a handle that lowered a bound must see another's raise. A relation
    /// dropped and made again under the same id may keep its old bounds: they stay upper
    /// bounds (the new map starts empty), so nothing is skipped wrongly.
    pub fn shared(rel: RelFileId, page_size: usize, bounds: Arc<FsmBounds>) -> Fsm {
        Fsm {
            rel,
            page_size,
            extend_lock: Mutex::new(()),
            bounds,
        }
    }

    /// The upper bound of fsm page `fb`'s entries.
    fn bound(&self, fb: u32) -> u32 {
        let bounds = self.bounds.0.read();
        bounds
            .get(fb as usize)
            .map_or(UNKNOWN, |b| b.load(Ordering::Relaxed))
    }

    /// Raises fsm page `fb`'s bound to at least `v`; the caller holds the page's content
    /// lock exclusively.
    fn raise_bound(&self, fb: u32, v: u8) {
        let bounds = self.bounds.0.read();
        if let Some(b) = bounds.get(fb as usize) {
            b.fetch_max(u32::from(v), Ordering::Relaxed);
        }
    }

    /// Sets fsm page `fb`'s bound to `max`, the largest of its entries, read under the
    /// page's shared content lock, which the caller still holds.
    fn settle_bound(&self, fb: u32, max: u8) {
        {
            let bounds = self.bounds.0.read();
            if let Some(b) = bounds.get(fb as usize) {
                b.store(u32::from(max), Ordering::Relaxed);
                return;
            }
        }
        let mut bounds = self.bounds.0.write();
        while bounds.len() <= fb as usize {
            bounds.push(AtomicU32::new(UNKNOWN));
        }
        bounds[fb as usize].store(u32::from(max), Ordering::Relaxed);
    }

    fn per_page(&self) -> u32 {
        (self.page_size - PAGE_HEADER_SIZE) as u32
    }

    fn step(&self) -> usize {
        self.page_size / 256
    }

    /// The entry value recorded for `free` bytes (rounded down).
    pub fn category(&self, free: usize) -> u8 {
        (free / self.step()).min(255) as u8
    }

    /// The smallest entry value that guarantees `need` bytes (rounded up).
    pub fn needed(&self, need: usize) -> u8 {
        need.div_ceil(self.step()).min(255) as u8
    }

    fn tag(&self, fsm_block: u32) -> BufferTag {
        BufferTag::new(self.rel, ForkNumber::FreeSpace, fsm_block)
    }

    /// Reads an fsm page; one that fails verification (a torn write: the map is not
    /// WAL-logged) comes back zeroed, as PostgreSQL's RBM_ZERO_ON_ERROR does for its map.
    fn read<'p>(
        &self,
        pool: &'p BufferPool,
        fsm_block: u32,
    ) -> Result<crate::buffer::BufferRef<'p>, BufferError> {
        match pool.read(self.tag(fsm_block)) {
            Err(BufferError::Corrupt { .. }) => {
                let buf = pool.read_zeroed(self.tag(fsm_block))?;
                buf.write().fill(0);
                Ok(buf)
            }
            r => r,
        }
    }

    /// Records that heap block `block` has `free` bytes of room.
    pub fn set(&self, pool: &BufferPool, block: u32, free: usize) -> Result<(), BufferError> {
        let v = self.category(free);
        let (fb, i) = (block / self.per_page(), (block % self.per_page()) as usize);
        if fb >= pool.nblocks(self.rel, ForkNumber::FreeSpace)? {
            if v == 0 {
                return Ok(()); // absent entries already read as "full"
            }
            let _ext = self.extend_lock.lock();
            while fb >= pool.nblocks(self.rel, ForkNumber::FreeSpace)? {
                drop(pool.extend(self.rel, ForkNumber::FreeSpace)?);
            }
        }
        let buf = self.read(pool, fb)?;
        if buf.read()[PAGE_HEADER_SIZE + i] == v {
            return Ok(());
        }
        let mut g = buf.write();
        if page::is_new(&g) {
            page::init(&mut g, 0);
        }
        g[PAGE_HEADER_SIZE + i] = v;
        self.raise_bound(fb, v);
        Ok(())
    }

    /// The recorded entry of heap block `block` (0 if none).
    pub fn get(&self, pool: &BufferPool, block: u32) -> Result<u8, BufferError> {
        let (fb, i) = (block / self.per_page(), (block % self.per_page()) as usize);
        if fb >= pool.nblocks(self.rel, ForkNumber::FreeSpace)? {
            return Ok(0);
        }
        let buf = self.read(pool, fb)?;
        let v = buf.read()[PAGE_HEADER_SIZE + i];
        Ok(v)
    }

    /// A heap block below `nblocks` recorded with at least `need` bytes free, searching
    /// from `start` to the end and then from 0 (so concurrent inserters spread out and a
    /// hint keeps one inserter on its page), or None.
    pub fn search(
        &self,
        pool: &BufferPool,
        need: usize,
        start: u32,
        nblocks: u32,
    ) -> Result<Option<u32>, BufferError> {
        let want = self.needed(need).max(1);
        let per = self.per_page();
        let fsm_pages = pool.nblocks(self.rel, ForkNumber::FreeSpace)?;
        let start = if start >= nblocks { 0 } else { start };
        for (lo, hi) in [(start, nblocks), (0, start)] {
            let mut b = lo;
            while b < hi {
                let fb = b / per;
                if fb >= fsm_pages {
                    break;
                }
                let page_end = ((fb + 1) * per).min(hi);
                if self.bound(fb) < u32::from(want) {
                    b = page_end;
                    continue;
                }
                let buf = self.read(pool, fb)?;
                let g = buf.read();
                let base = fb * per;
                let from = PAGE_HEADER_SIZE + (b - base) as usize;
                let to = PAGE_HEADER_SIZE + (page_end - base) as usize;
                if let Some(i) = g[from..to].iter().position(|&v| v >= want) {
                    return Ok(Some(b + i as u32));
                }
                // Nothing here: learn the page's largest entry, under the same lock.
                let max = g[PAGE_HEADER_SIZE..].iter().copied().max().unwrap_or(0);
                self.settle_bound(fb, max);
                b = page_end;
            }
        }
        Ok(None)
    }

    /// Forgets the entries of heap blocks at and after `nblocks` (after a truncation).
    pub fn truncate(&self, pool: &BufferPool, nblocks: u32) -> Result<(), BufferError> {
        let per = self.per_page();
        let fsm_pages = pool.nblocks(self.rel, ForkNumber::FreeSpace)?;
        for fb in nblocks / per..fsm_pages {
            let buf = self.read(pool, fb)?;
            let mut g = buf.write();
            if page::is_new(&g) {
                continue;
            }
            let from = PAGE_HEADER_SIZE + nblocks.saturating_sub(fb * per) as usize;
            g[from..].fill(0);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::sync::Arc;
    use crate::vfs::MemVfs;
    use std::path::Path;

    fn pool() -> BufferPool {
        let mut c = Config::default();
        c.set("shared_buffers", "16").unwrap();
        c.set("block_size", "4kB").unwrap();
        let pool = BufferPool::open(Arc::new(MemVfs::new()), Path::new("/db"), &c, true).unwrap();
        pool.create_relation(REL, ForkNumber::FreeSpace).unwrap();
        pool
    }

    const REL: RelFileId = RelFileId::new(0, 77);

    #[test]
    fn entries_round_down_and_search_finds_room() {
        let pool = pool();
        let fsm = Fsm::new(REL, 4096);
        assert_eq!(fsm.category(15), 0); // 4 KiB pages: steps of 16 bytes
        assert_eq!(fsm.category(31), 1);
        assert_eq!(fsm.category(4096), 255);
        assert_eq!(fsm.needed(17), 2);
        // Nothing recorded: nothing found, and no fork page was written for it.
        assert_eq!(fsm.search(&pool, 100, 0, 50).unwrap(), None);
        fsm.set(&pool, 3, 0).unwrap();
        assert_eq!(pool.nblocks(REL, ForkNumber::FreeSpace).unwrap(), 0);
        // Entries spanning two fsm pages (4072 per page).
        fsm.set(&pool, 10, 500).unwrap();
        fsm.set(&pool, 5000, 3000).unwrap();
        assert_eq!(fsm.get(&pool, 10).unwrap(), 31);
        assert_eq!(fsm.search(&pool, 400, 0, 6000).unwrap(), Some(10));
        assert_eq!(fsm.search(&pool, 490, 0, 6000).unwrap(), Some(10));
        assert_eq!(fsm.search(&pool, 500, 0, 6000).unwrap(), Some(5000));
        assert_eq!(fsm.search(&pool, 400, 11, 6000).unwrap(), Some(5000));
        assert_eq!(
            fsm.search(&pool, 400, 5001, 6000).unwrap(),
            Some(10),
            "wraps"
        );
        assert_eq!(fsm.search(&pool, 400, 0, 5000).unwrap(), Some(10));
        assert_eq!(fsm.search(&pool, 3500, 0, 6000).unwrap(), None);
        fsm.truncate(&pool, 11).unwrap();
        assert_eq!(fsm.get(&pool, 10).unwrap(), 31);
        assert_eq!(fsm.get(&pool, 5000).unwrap(), 0);
    }

    /// Proves (bounds): with every heap page full, a search that finds nothing reads
    /// each fsm page once, learning its bound, and none after (it read all of them every
    /// time before); room recorded later is found at once, and a smaller need still finds
    /// the nearly full pages. Reads counted by the pool's statistics (hits and reads).
    #[test]
    fn a_full_map_is_searched_without_reading_its_pages() {
        use crate::stats::IoOp;
        let pool = pool();
        let fsm = Fsm::new(REL, 4096);
        let n = 3 * 4072; // three fsm pages
        for b in 0..n {
            fsm.set(&pool, b, 20).unwrap();
        }
        let accesses = || {
            let s = pool.stats();
            s.total(IoOp::Hit) + s.total(IoOp::Read)
        };
        let before = accesses();
        assert_eq!(fsm.search(&pool, 400, n - 1, n).unwrap(), None);
        assert_eq!(accesses() - before, 3, "the first search learns the bounds");
        let before = accesses();
        for _ in 0..10 {
            assert_eq!(fsm.search(&pool, 400, n - 1, n).unwrap(), None);
        }
        assert_eq!(accesses() - before, 0, "later searches read no fsm page");
        fsm.set(&pool, 5000, 1000).unwrap();
        assert_eq!(fsm.search(&pool, 400, n - 1, n).unwrap(), Some(5000));
        assert_eq!(fsm.search(&pool, 10, 0, n).unwrap(), Some(0));
        // Truncation only lowers entries: the bounds stay upper bounds.
        fsm.truncate(&pool, 4072).unwrap();
        assert_eq!(fsm.search(&pool, 400, 0, n).unwrap(), None);
        fsm.set(&pool, 9000, 1000).unwrap();
        assert_eq!(fsm.search(&pool, 400, 0, n).unwrap(), Some(9000));
    }

    /// Proves: handles of one relation share its bounds, so room one handle records is
    /// found by another that had learned the page was full.
    #[test]
    fn handles_of_one_relation_share_the_bounds() {
        let pool = pool();
        let shared = Arc::new(FsmBounds::default());
        let a = Fsm::shared(REL, 4096, shared.clone());
        let b = Fsm::shared(REL, 4096, shared);
        for blk in 0..100 {
            a.set(&pool, blk, 20).unwrap();
        }
        assert_eq!(
            a.search(&pool, 400, 0, 100).unwrap(),
            None,
            "a learns: full"
        );
        b.set(&pool, 42, 1000).unwrap();
        assert_eq!(a.search(&pool, 400, 0, 100).unwrap(), Some(42));
    }

    #[test]
    fn a_torn_fsm_page_reads_as_zeros() {
        let pool = pool();
        let fsm = Fsm::new(REL, 4096);
        fsm.set(&pool, 1, 1000).unwrap();
        pool.flush_all().unwrap();
        pool.drop_buffers(REL, Some(ForkNumber::FreeSpace), 0)
            .unwrap();
        // Damage the page on disk.
        let smgr = pool.smgr();
        let tag = BufferTag::new(REL, ForkNumber::FreeSpace, 0);
        let mut page = vec![0u8; 4096];
        smgr.read(&tag, &mut page, crate::stats::IoContext::Normal)
            .unwrap();
        page[100] ^= 0xFF;
        smgr.write(&tag, &page, crate::stats::IoContext::Normal)
            .unwrap();
        assert_eq!(
            fsm.get(&pool, 1).unwrap(),
            0,
            "damaged map page reads as empty"
        );
        fsm.set(&pool, 1, 1000).unwrap();
        assert_eq!(fsm.get(&pool, 1).unwrap(), 62);
    }
}
