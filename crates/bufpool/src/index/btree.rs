//! A concurrent, WAL-logged B+tree: Lehman and Yao's B-link tree on (i64 key, u64 value)
//! pairs, in buffer-pool pages of one relation (main fork). Page layout: `btree_page.rs`.
//!
//! Owns: the relation id, the unique flag and a cached root block number. Block 0 is the
//! meta page (root block and level); every other block is a tree page.
//!
//! Invariants (checked by [`BTree::check`]):
//! - Entries are (key, value) pairs, unique and strictly ascending along each level, and
//!   every page holds only pairs in [low key, high key): the low key is the left sibling's
//!   high key (minus infinity for the leftmost page), the rightmost page has no high key.
//! - Each level is one chain of right links from its leftmost page to a RIGHTMOST page.
//!   The root is the only page of the top level; it alone carries ROOT, and the meta page
//!   names it. Root block and ROOT flag change together (one record, both locks held).
//! - An internal entry (separator, child) leads to the child whose low key is the
//!   separator (entry 0: minus infinity). A page may lack its downlink only while its left
//!   sibling is marked INCOMPLETE_SPLIT; searches reach it by moving right anyway.
//! - Separators are "suffix truncated": between leaf entries with different keys the
//!   separator is (key, 0). So in a unique index every separator has value 0 and all pairs
//!   of one key lie on one leaf: the duplicate check looks at that leaf only.
//! - Pages are never deleted or merged (as PostgreSQL's nbtree without VACUUM's page
//!   deletion): empty pages stay, so a block reached once stays a page of its level, and
//!   a key's page can only be the one reached or one to its right.
//!
//! Locks (content locks of the buffers):
//! - Readers ([`BTree::get`], [`BTree::lookup`], [`BTree::range`]) hold ONE page's shared
//!   lock at a time: read the child or right link, release, lock the next page. If the
//!   search pair is at or above the page's high key, the page split since its downlink
//!   was read, and the reader moves right. Scans copy up to 64 entries under the lock and
//!   call the caller's closure with no lock held, resuming from the last pair returned.
//! - Writers descend the same way (shared locks, one at a time), remembering the path
//!   (stack of block numbers), lock the leaf exclusively and move right exclusively
//!   (releasing the left page before locking the right one: safe because nothing is ever
//!   deleted, so the right page still covers the keys to the right of the left high key).
//! - A split holds the page being split (exclusively) while it takes the new right page
//!   (a fresh block from `pool.extend`: nobody else can hold it), and then keeps holding
//!   the left page while it takes the parent exclusively to insert the downlink (and the
//!   parent's right siblings, releasing each before the next), as Lehman and Yao and
//!   PostgreSQL do. Holding the child makes the downlink insertion and the clearing of the
//!   child's INCOMPLETE_SPLIT flag one atomic record, and keeps the missing-downlink state
//!   invisible to every other thread (it only survives a crash or an error in between).
//! - Lock order: lower level before higher level, left before right at one level, the
//!   meta page after every tree page it is combined with, and fresh pages last. A thread
//!   holding a lock only ever waits for a page to the right on the same level, a page on
//!   a higher level, the meta page, or a fresh page; readers and descents hold one lock
//!   at a time; so no cycle of waits can form (the argument of PostgreSQL's nbtree README).
//! - Root split: the root page carries ROOT; a writer about to split a ROOT page takes the
//!   meta page exclusively while holding it (the flag cannot change under our lock, so the
//!   meta page must agree), creates the new root, and logs old root, new right page, new
//!   root, meta page (and the child whose downlink it inserts) as ONE record: there is no
//!   intermediate state for a root split. A writer that must insert a downlink above the
//!   top of its remembered path (the tree grew since it descended: a concurrent root
//!   split) reads the meta page and descends from the current root to the parent level.
//! - The cached root ([`BTree`] keeps it in an atomic) may be stale: an old root is the
//!   leftmost page of its level, whose right-link chain covers every key, so descending
//!   from it is still correct. Readers refresh the cache from the meta page when the page
//!   they start at has lost its ROOT flag.
//!
//! Logging: every change is logged by [`Engine::log_pages`] while the pages are held, so
//! physical redo restores the tree. Inserting or removing a leaf entry logs the exact
//! byte ranges (the `lower` field and the shifted tail of the entry array: half a page on
//! average, since the array is sorted and fixed-width); splits and downlink insertions
//! log the diff of each page's before-image (`changed_ranges`). A split logs both halves
//! (and the page one level down whose split it completes, clearing that page's flag) in
//! one record, marking the left half INCOMPLETE_SPLIT; the downlink goes into the parent
//! in a second record that also clears the flag. A crash between the two leaves a valid
//! B-link tree with one missing downlink: searches move right across it, and the next
//! insert that passes the flagged page (descending, or moving right on the leaf level)
//! inserts the downlink first ("finishing the split", as PostgreSQL does), then starts
//! over. A page that splits while still flagged (a parent receiving a downlink after a
//! crash) hands the flag on to its new right half, whose right sibling is then the page
//! lacking the downlink, so the flag always means "my right sibling has no downlink".
//! An error between the records (a failed WAL write) leaves the same state; a failed
//! `log_pages` itself latches the log, which refuses everything until the engine is
//! reopened and recovered (as for heap pages).
//!
//! Pins: a reader holds one; a writer at most five (root split: old root, new right
//! page, new root, meta page, and the child whose downlink goes into the old root).

use std::ops::Range;

use super::btree_page::{
    entry_offset, leaf_separator, BtPage, BtPageMut, Meta, Pair, INCOMPLETE_SPLIT, MIN_PAIR,
    NO_BLOCK, ROOT,
};
use crate::buffer::{BufferRef, PageWriteGuard};
use crate::config::ConfigError;
use crate::engine::changed_ranges;
use crate::engine::{Engine, EngineError};
use crate::page;
use crate::sync::{AtomicBool, AtomicU32, Ordering};
use crate::types::{BufferTag, ForkNumber, RelFileId};

/// The meta page's block.
const META_BLOCK: u32 = 0;
/// Transaction id of structural records outside any transaction (create, bulk build).
const NO_XID: u32 = 0;
/// Entries a scan copies under one page lock before calling the closure.
const SCAN_BATCH: usize = 64;
/// Entries between two progress reports of a bulk build.
const PROGRESS_EVERY: u64 = 1 << 16;
/// Byte range of the page header's `lower` field.
const LOWER_FIELD: Range<usize> = 16..18;

/// A B-link tree index. Share it by reference between threads.
pub struct BTree<'e> {
    engine: &'e Engine,
    rel: RelFileId,
    unique: bool,
    root: AtomicU32,
    /// Test hook: the next non-root split stops after its first record.
    interrupt_split: AtomicBool,
}

impl std::fmt::Debug for BTree<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BTree")
            .field("rel", &self.rel)
            .field("unique", &self.unique)
            .field("root", &self.root.load(Ordering::Relaxed))
            .finish()
    }
}

/// What [`BTree::check`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BTreeStats {
    /// Levels, leaves included (1 for a tree that is a single leaf).
    pub levels: u32,
    /// Tree pages reached (the meta page not counted).
    pub pages: u32,
    pub leaf_pages: u32,
    pub internal_pages: u32,
    /// Leaf entries.
    pub entries: u64,
    /// Lowest fill (entries / capacity) of a leaf other than the rightmost one (which
    /// takes what is left over); the only leaf's fill when there is one leaf.
    pub min_fill: f64,
    /// Average leaf fill.
    pub avg_fill: f64,
    /// Most entries on an internal page.
    pub max_fanout: usize,
    /// Pages whose downlink is missing (left sibling marked INCOMPLETE_SPLIT; only after
    /// a crash or an error between a split and its downlink insertion).
    pub incomplete_splits: u32,
    /// Blocks never initialized (extended for a split that a crash cut short).
    pub unused_pages: u32,
}

/// Where a writer's descent ended.
enum Descent {
    /// The leaf that covered the key when it was read (not locked).
    Leaf(u32),
    /// An internal page marked INCOMPLETE_SPLIT: finish that split first. The stack holds
    /// the path above it.
    Repair(u32),
}

/// A downlink found by `check`: the separator it promises as the child's low key.
struct Downlink {
    sep: Pair,
    child: u32,
    parent: u32,
    entry: usize,
}

fn corrupt_error(rel: RelFileId, reason: String) -> EngineError {
    EngineError::IndexCorrupt {
        index: rel.to_string(),
        reason,
    }
}

/// The pair right after `p` (None for the largest pair).
fn successor(p: Pair) -> Option<Pair> {
    if p.1 < u64::MAX {
        Some((p.0, p.1 + 1))
    } else if p.0 < i64::MAX {
        Some((p.0 + 1, 0))
    } else {
        None
    }
}

/// In debug builds: panics unless `ranges` cover every byte that differs.
#[cfg(debug_assertions)]
fn assert_ranges_cover(before: &[u8], after: &[u8], ranges: &[Range<usize>]) {
    // `ranges` are ascending and disjoint: every gap between them must be unchanged.
    let mut from = 0;
    for r in ranges
        .iter()
        .chain(std::iter::once(&(after.len()..after.len())))
    {
        assert!(
            before[from..r.start] == after[from..r.start],
            "bytes in {from}..{} changed but are not in the logged ranges {ranges:?}",
            r.start
        );
        from = r.end;
    }
}

impl<'e> BTree<'e> {
    /// Creates the index relation: block 0 the meta page, block 1 an empty root leaf,
    /// logged as one record.
    pub fn create(engine: &'e Engine, rel: RelFileId, unique: bool) -> Result<Self, EngineError> {
        let pool = engine.pool();
        pool.create_relation(rel, ForkNumber::Main)?;
        let mbuf = pool.extend(rel, ForkNumber::Main)?;
        let rbuf = pool.extend(rel, ForkNumber::Main)?;
        if (mbuf.tag().block, rbuf.tag().block) != (META_BLOCK, 1) {
            return Err(corrupt_error(
                rel,
                format!(
                    "create: the relation already had blocks (new pages at {} and {})",
                    mbuf.tag().block,
                    rbuf.tag().block
                ),
            ));
        }
        let page = 0..pool.page_size();
        let whole = std::slice::from_ref(&page);
        let mut mg = mbuf.write();
        let mut rg = rbuf.write();
        Meta {
            unique,
            root: 1,
            root_level: 0,
        }
        .init(&mut mg);
        BtPageMut(&mut rg).init(0, ROOT);
        engine.log_pages(NO_XID, 0, &mut [(&mut mg, whole), (&mut rg, whole)])?;
        Ok(BTree {
            engine,
            rel,
            unique,
            root: AtomicU32::new(1),
            interrupt_split: AtomicBool::new(false),
        })
    }

    /// Opens an existing index: reads the meta page.
    pub fn open(engine: &'e Engine, rel: RelFileId) -> Result<Self, EngineError> {
        let pool = engine.pool();
        if pool.nblocks(rel, ForkNumber::Main)? == 0 {
            return Err(corrupt_error(
                rel,
                "the relation has no blocks (no meta page)".into(),
            ));
        }
        let buf = pool.read(BufferTag::new(rel, ForkNumber::Main, META_BLOCK))?;
        let g = buf.read();
        let meta = Meta::read(&g).map_err(|e| corrupt_error(rel, format!("block 0: {e}")))?;
        Ok(BTree {
            engine,
            rel,
            unique: meta.unique,
            root: AtomicU32::new(meta.root),
            interrupt_split: AtomicBool::new(false),
        })
    }

    /// Test hook (fault injection): the next split of a non-root page returns right after
    /// logging the two halves, without inserting the downlink, leaving exactly the state a
    /// crash between the two records leaves. The next insert passing the page repairs it.
    #[doc(hidden)]
    pub fn interrupt_next_split(&self) {
        self.interrupt_split.store(true, Ordering::Relaxed);
    }

    pub fn rel(&self) -> RelFileId {
        self.rel
    }

    pub fn is_unique(&self) -> bool {
        self.unique
    }

    #[inline]
    fn tag(&self, block: u32) -> BufferTag {
        BufferTag::new(self.rel, ForkNumber::Main, block)
    }

    #[cold]
    fn corrupt(&self, reason: String) -> EngineError {
        corrupt_error(self.rel, reason)
    }

    /// Checks a page reached by a downlink or right link: initialized, at the expected
    /// level (None: any, for the first page of a descent).
    #[inline]
    fn check_reached(
        &self,
        p: &BtPage<'_>,
        block: u32,
        level: Option<u16>,
    ) -> Result<(), EngineError> {
        if p.is_new() || level.is_some_and(|l| p.level() != l) || block == META_BLOCK {
            return Err(self.bad_reached(p, block, level));
        }
        Ok(())
    }

    #[cold]
    fn bad_reached(&self, p: &BtPage<'_>, block: u32, level: Option<u16>) -> EngineError {
        if block == META_BLOCK {
            self.corrupt("a downlink or right link points to block 0, the meta page".into())
        } else if p.is_new() {
            self.corrupt(format!(
                "block {block} was reached by a downlink or right link but is not initialized \
                 (all zeros)"
            ))
        } else {
            self.corrupt(format!(
                "block {block} is at level {} but was reached where level {} was expected",
                p.level(),
                level.unwrap_or(0)
            ))
        }
    }

    /// Internal page: the child for `key`, checked to be a block that can be a tree page.
    #[inline]
    fn child_for(&self, p: &BtPage<'_>, block: u32, key: Pair) -> Result<u32, EngineError> {
        if p.is_empty() {
            return Err(self.corrupt(format!("internal block {block} has no entries")));
        }
        Ok(p.child(p.child_index(key)))
    }

    /// Reads the root from the meta page into the cache.
    fn refresh_root(&self) -> Result<u32, EngineError> {
        let buf = self.engine.pool().read(self.tag(META_BLOCK))?;
        let g = buf.read();
        let meta = Meta::read(&g).map_err(|e| self.corrupt(format!("block 0: {e}")))?;
        self.root.store(meta.root, Ordering::Release);
        Ok(meta.root)
    }

    // ------------------------------------------------------------------ reads

    /// The first value stored under `key` (the smallest one), if any. Does not allocate.
    pub fn get(&self, key: i64) -> Result<Option<u64>, EngineError> {
        let pool = self.engine.pool();
        let search = (key, 0);
        let mut block = self.root.load(Ordering::Acquire);
        let mut level = None;
        let mut first = true;
        loop {
            let buf = pool.read(self.tag(block))?;
            let g = buf.read();
            let p = BtPage(&g);
            self.check_reached(&p, block, level)?;
            if first && !p.is_root() {
                // The tree grew since the cache was filled: start at the current root.
                drop(g);
                drop(buf);
                block = self.refresh_root()?;
                first = false;
                continue;
            }
            first = false;
            if p.beyond_high(search) {
                block = p.right();
                level = Some(p.level());
                continue;
            }
            if !p.is_leaf() {
                block = self.child_for(&p, block, search)?;
                level = Some(p.level() - 1);
                continue;
            }
            let pos = p.lower_bound(search);
            if pos < p.len() {
                let e = p.entry(pos);
                return Ok((e.0 == key).then_some(e.1));
            }
            // Past the last entry: pairs of this key can follow only if the high key is
            // still one of them (many values of one key spanning pages).
            match p.high_key() {
                Some(h) if h.0 <= key => {
                    block = p.right();
                    level = Some(0);
                }
                _ => return Ok(None),
            }
        }
    }

    /// Calls `f` with every value stored under `key`, in ascending order. `f` runs with no
    /// page lock held. Does not allocate.
    pub fn lookup(&self, key: i64, mut f: impl FnMut(u64)) -> Result<(), EngineError> {
        self.scan((key, 0), (key, u64::MAX), &mut |_, v| {
            f(v);
            true
        })
    }

    /// Calls `f` with every (key, value) whose key is in `[lo, hi]`, ascending, until `f`
    /// returns false. `f` runs with no page lock held. Does not allocate. Not a snapshot:
    /// concurrent inserts above the scan position may or may not be seen.
    pub fn range(
        &self,
        lo: i64,
        hi: i64,
        mut f: impl FnMut(i64, u64) -> bool,
    ) -> Result<(), EngineError> {
        self.scan((lo, 0), (hi, u64::MAX), &mut f)
    }

    fn scan(
        &self,
        lo: Pair,
        hi: Pair,
        f: &mut dyn FnMut(i64, u64) -> bool,
    ) -> Result<(), EngineError> {
        enum Next {
            Done,
            /// The batch filled up: continue on the same page from this pair.
            Same(Pair),
            /// The page is exhausted: continue on its right sibling from its high key.
            Right(u32, Pair),
        }
        if lo > hi {
            return Ok(());
        }
        let pool = self.engine.pool();
        let mut cursor = lo;
        let mut block = self.root.load(Ordering::Acquire);
        let mut level = None;
        let mut first = true;
        let mut batch = [(0i64, 0u64); SCAN_BATCH];
        loop {
            let (count, next) = {
                let buf = pool.read(self.tag(block))?;
                let g = buf.read();
                let p = BtPage(&g);
                self.check_reached(&p, block, level)?;
                if first && !p.is_root() {
                    drop(g);
                    drop(buf);
                    block = self.refresh_root()?;
                    first = false;
                    continue;
                }
                first = false;
                if p.beyond_high(cursor) {
                    block = p.right();
                    level = Some(p.level());
                    continue;
                }
                if !p.is_leaf() {
                    block = self.child_for(&p, block, cursor)?;
                    level = Some(p.level() - 1);
                    continue;
                }
                let n = p.len();
                let mut pos = p.lower_bound(cursor);
                let mut count = 0;
                let mut above = false;
                while pos < n && count < SCAN_BATCH {
                    let e = p.entry(pos);
                    if e > hi {
                        above = true;
                        break;
                    }
                    batch[count] = e;
                    count += 1;
                    pos += 1;
                }
                let next = if above {
                    Next::Done
                } else if pos < n {
                    match successor(batch[count - 1]) {
                        Some(c) => Next::Same(c),
                        None => Next::Done,
                    }
                } else {
                    match p.high_key() {
                        Some(h) if h <= hi => Next::Right(p.right(), h),
                        _ => Next::Done,
                    }
                };
                (count, next)
            };
            for &(k, v) in &batch[..count] {
                if !f(k, v) {
                    return Ok(());
                }
            }
            match next {
                Next::Done => return Ok(()),
                Next::Same(c) => cursor = c,
                Next::Right(r, h) => {
                    cursor = h;
                    block = r;
                }
            }
            level = Some(0);
        }
    }

    // ----------------------------------------------------------------- writes

    /// Descends to the leaf covering `key` with shared locks, one page at a time,
    /// recording the internal pages passed in `stack` (root first).
    fn descend_for_write(&self, key: Pair, stack: &mut Vec<u32>) -> Result<Descent, EngineError> {
        let pool = self.engine.pool();
        stack.clear();
        let mut block = self.root.load(Ordering::Acquire);
        let mut level = None;
        let mut first = true;
        loop {
            let buf = pool.read(self.tag(block))?;
            let g = buf.read();
            let p = BtPage(&g);
            self.check_reached(&p, block, level)?;
            if first && !p.is_root() {
                drop(g);
                drop(buf);
                block = self.refresh_root()?;
                first = false;
                continue;
            }
            first = false;
            if p.is_leaf() {
                return Ok(Descent::Leaf(block));
            }
            if p.flags() & INCOMPLETE_SPLIT != 0 {
                return Ok(Descent::Repair(block));
            }
            if p.beyond_high(key) {
                block = p.right();
                level = Some(p.level());
                continue;
            }
            stack.push(block);
            block = self.child_for(&p, block, key)?;
            level = Some(p.level() - 1);
        }
    }

    /// Inserts (`key`, `value`). Unique index: an existing entry with `key` (any value)
    /// fails with DuplicateKey and changes nothing. Non-unique: inserting a pair that is
    /// already there does nothing.
    pub fn insert(&self, xid: u32, key: i64, value: u64) -> Result<(), EngineError> {
        let item = (key, value);
        let pool = self.engine.pool();
        let mut stack = Vec::with_capacity(8);
        loop {
            let leaf = match self.descend_for_write(item, &mut stack)? {
                Descent::Leaf(b) => b,
                Descent::Repair(b) => {
                    self.repair(xid, b, &mut stack)?;
                    continue;
                }
            };
            let mut block = leaf;
            let mut buf = pool.read(self.tag(block))?;
            let mut g = buf.write();
            let mut incomplete = false;
            loop {
                let p = BtPage(&g);
                self.check_reached(&p, block, Some(0))?;
                if p.flags() & INCOMPLETE_SPLIT != 0 {
                    incomplete = true;
                    break;
                }
                if !p.beyond_high(item) {
                    break;
                }
                block = p.right();
                drop(g);
                buf = pool.read(self.tag(block))?;
                g = buf.write();
            }
            if incomplete {
                // A split that a crash (or an error) cut short, on the page we insert
                // into or pass on the way right: finish it, then start over (as
                // PostgreSQL's _bt_moveright does for writers).
                self.finish_split(xid, &mut stack, g)?;
                continue;
            }
            let p = BtPage(&g);
            let pos = p.lower_bound(item);
            if self.unique {
                // Every pair of this key is on this page (separators are (key, 0)).
                let first = p.lower_bound((key, 0));
                if first < p.len() && p.entry(first).0 == key {
                    return Err(EngineError::DuplicateKey {
                        index: self.rel.to_string(),
                        key,
                    });
                }
            } else if pos < p.len() && p.entry(pos) == item {
                return Ok(());
            }
            if !p.is_full() {
                return self.insert_logged(xid, &mut g, pos, item);
            }
            return self.split(xid, &mut stack, g, pos, (item, 0), None);
        }
    }

    /// Removes (`key`, `value`); returns whether it was there. Pages are never merged.
    pub fn delete(&self, xid: u32, key: i64, value: u64) -> Result<bool, EngineError> {
        let item = (key, value);
        let pool = self.engine.pool();
        let mut stack = Vec::with_capacity(8);
        loop {
            let leaf = match self.descend_for_write(item, &mut stack)? {
                Descent::Leaf(b) => b,
                Descent::Repair(b) => {
                    self.repair(xid, b, &mut stack)?;
                    continue;
                }
            };
            let mut block = leaf;
            let mut buf = pool.read(self.tag(block))?;
            let mut g = buf.write();
            loop {
                let p = BtPage(&g);
                self.check_reached(&p, block, Some(0))?;
                if !p.beyond_high(item) {
                    break;
                }
                block = p.right();
                drop(g);
                buf = pool.read(self.tag(block))?;
                g = buf.write();
            }
            let p = BtPage(&g);
            let pos = p.lower_bound(item);
            if pos >= p.len() || p.entry(pos) != item {
                return Ok(false);
            }
            let n = p.len();
            #[cfg(debug_assertions)]
            let before = g.to_vec();
            BtPageMut(&mut g).remove(pos);
            let ranges = [LOWER_FIELD, entry_offset(0, pos)..entry_offset(0, n)];
            #[cfg(debug_assertions)]
            assert_ranges_cover(&before, &g, &ranges);
            self.engine.log_pages(xid, 0, &mut [(&mut g, &ranges)])?;
            return Ok(true);
        }
    }

    /// Inserts a leaf entry into a page with room, logging the exact ranges.
    fn insert_logged(
        &self,
        xid: u32,
        g: &mut PageWriteGuard<'_>,
        pos: usize,
        item: Pair,
    ) -> Result<(), EngineError> {
        let n = BtPage(g).len();
        #[cfg(debug_assertions)]
        let before = g.to_vec();
        let done = BtPageMut(g).insert(pos, item, 0);
        debug_assert!(done);
        let ranges = [LOWER_FIELD, entry_offset(0, pos)..entry_offset(0, n + 1)];
        #[cfg(debug_assertions)]
        assert_ranges_cover(&before, g, &ranges);
        self.engine.log_pages(xid, 0, &mut [(g, &ranges)])?;
        Ok(())
    }

    /// Logs the changes of several pages (each with its before-image) as one record.
    fn log_changes(
        &self,
        xid: u32,
        pages: &mut [(&mut PageWriteGuard<'_>, Vec<u8>)],
    ) -> Result<(), EngineError> {
        let ranges: Vec<Vec<Range<usize>>> = pages
            .iter()
            .map(|(g, before)| changed_ranges(before, g))
            .collect();
        let mut refs: Vec<(&mut PageWriteGuard<'_>, &[Range<usize>])> = pages
            .iter_mut()
            .zip(&ranges)
            .filter(|(_, r)| !r.is_empty())
            .map(|((g, _), r)| (&mut **g, &r[..]))
            .collect();
        if !refs.is_empty() {
            self.engine.log_pages(xid, 0, &mut refs)?;
        }
        Ok(())
    }

    /// Splits the full page under `g` while inserting (`key`, `child`) at `pos`, then
    /// inserts the downlink for the new right page into the parent level. `child`: the
    /// page one level down whose split this insertion completes; its INCOMPLETE_SPLIT
    /// flag is cleared in the split's record, and its lock released after it.
    fn split(
        &self,
        xid: u32,
        stack: &mut Vec<u32>,
        g: PageWriteGuard<'_>,
        pos: usize,
        item: (Pair, u32),
        child: Option<PageWriteGuard<'_>>,
    ) -> Result<(), EngineError> {
        if BtPage(&g).is_root() {
            return self.split_root(xid, g, pos, item, child);
        }
        let level = BtPage(&g).level();
        let pool = self.engine.pool();
        let rbuf = pool.extend(self.rel, ForkNumber::Main)?;
        let rblock = rbuf.tag().block;
        // Guards rebound after every buffer they may borrow: they go into one record, so
        // they share one lifetime, which must end before any of the buffers is dropped.
        let mut g = g;
        let mut child = child;
        let mut rg = rbuf.write();
        let before_g = g.to_vec();
        let before_r = rg.to_vec();
        let before_c = child.as_ref().map(|c| c.to_vec());
        let sep = BtPageMut(&mut g).split_insert(&mut BtPageMut(&mut rg), rblock, pos, item, true);
        let mut pages = vec![(&mut g, before_g), (&mut rg, before_r)];
        if let (Some(c), Some(before)) = (child.as_mut(), before_c) {
            clear_incomplete(c);
            pages.push((c, before));
        }
        self.log_changes(xid, &mut pages)?;
        drop(pages);
        drop(rg);
        drop(child);
        if self.interrupt_split.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        self.insert_downlink(xid, stack, g, level + 1, sep, rblock)
    }

    /// Splits the root under `g`: new right page and new root, meta page updated, all in
    /// one record.
    fn split_root(
        &self,
        xid: u32,
        g: PageWriteGuard<'_>,
        pos: usize,
        item: (Pair, u32),
        child: Option<PageWriteGuard<'_>>,
    ) -> Result<(), EngineError> {
        let pool = self.engine.pool();
        let mbuf = pool.read(self.tag(META_BLOCK))?;
        // Buffers declared before the guards (see `split`).
        let (rbuf, nbuf);
        let mut g = g;
        let mut child = child;
        let block = g.tag().block;
        let level = BtPage(&g).level();
        let mut mg = mbuf.write();
        let meta = Meta::read(&mg).map_err(|e| self.corrupt(format!("block 0: {e}")))?;
        if meta.root != block || meta.root_level != u32::from(level) {
            return Err(self.corrupt(format!(
                "block {block} (level {level}) is marked ROOT but the meta page names block {} \
                 (level {}) as the root",
                meta.root, meta.root_level
            )));
        }
        rbuf = pool.extend(self.rel, ForkNumber::Main)?;
        let rblock = rbuf.tag().block;
        let mut rg = rbuf.write();
        nbuf = pool.extend(self.rel, ForkNumber::Main)?;
        let nblock = nbuf.tag().block;
        let mut ng = nbuf.write();
        let before_g = g.to_vec();
        let before_r = rg.to_vec();
        let before_n = ng.to_vec();
        let before_m = mg.to_vec();
        let before_c = child.as_ref().map(|c| c.to_vec());
        let sep = BtPageMut(&mut g).split_insert(&mut BtPageMut(&mut rg), rblock, pos, item, false);
        {
            let mut n = BtPageMut(&mut ng);
            n.init(level + 1, ROOT);
            n.push(MIN_PAIR, block);
            n.push(sep, rblock);
        }
        Meta {
            root: nblock,
            root_level: meta.root_level + 1,
            ..meta
        }
        .write(&mut mg);
        let mut pages = vec![
            (&mut g, before_g),
            (&mut rg, before_r),
            (&mut ng, before_n),
            (&mut mg, before_m),
        ];
        if let (Some(c), Some(before)) = (child.as_mut(), before_c) {
            clear_incomplete(c);
            pages.push((c, before));
        }
        self.log_changes(xid, &mut pages)?;
        self.root.store(nblock, Ordering::Release);
        Ok(())
    }

    /// Inserts the downlink (`sep`, `right`) into level `plevel`, holding `child` (the
    /// split page, marked INCOMPLETE_SPLIT) until the record that clears its flag.
    fn insert_downlink(
        &self,
        xid: u32,
        stack: &mut Vec<u32>,
        child: PageWriteGuard<'_>,
        plevel: u16,
        sep: Pair,
        right: u32,
    ) -> Result<(), EngineError> {
        let child_block = child.tag().block;
        let start = match stack.pop() {
            Some(b) => b,
            // The tree grew above the path we remembered (a concurrent root split).
            None => self.find_level(sep, plevel, stack)?,
        };
        let pool = self.engine.pool();
        let mut block = start;
        let mut buf = pool.read(self.tag(block))?;
        let mut pg = buf.write();
        loop {
            let p = BtPage(&pg);
            self.check_reached(&p, block, Some(plevel))?;
            if !p.beyond_high(sep) {
                break;
            }
            block = p.right();
            drop(pg);
            buf = pool.read(self.tag(block))?;
            pg = buf.write();
        }
        let mut child = child;
        let p = BtPage(&pg);
        let pos = p.lower_bound(sep);
        if pos < p.len() && p.entry(pos) == sep {
            if p.child(pos) != right {
                return Err(self.corrupt(format!(
                    "block {block} entry {pos}: separator {sep:?} leads to block {}, but the \
                     split of block {child_block} needs it to lead to block {right}",
                    p.child(pos)
                )));
            }
            // Already there: only the flag is left to clear.
            let before = child.to_vec();
            clear_incomplete(&mut child);
            return self.log_changes(xid, &mut [(&mut child, before)]);
        }
        if p.is_full() {
            return self.split(xid, stack, pg, pos, (sep, right), Some(child));
        }
        let before_p = pg.to_vec();
        let before_c = child.to_vec();
        let done = BtPageMut(&mut pg).insert(pos, sep, right);
        debug_assert!(done);
        clear_incomplete(&mut child);
        self.log_changes(xid, &mut [(&mut pg, before_p), (&mut child, before_c)])
    }

    /// Descends from the current root (read from the meta page) to the page of `level`
    /// covering `key`, filling `stack` with the path above it.
    fn find_level(&self, key: Pair, level: u16, stack: &mut Vec<u32>) -> Result<u32, EngineError> {
        let pool = self.engine.pool();
        stack.clear();
        let mut block = self.refresh_root()?;
        let mut expect = None;
        loop {
            let buf = pool.read(self.tag(block))?;
            let g = buf.read();
            let p = BtPage(&g);
            self.check_reached(&p, block, expect)?;
            if p.level() < level {
                return Err(self.corrupt(format!(
                    "the root (block {block}) is at level {}, below level {level} where a \
                     downlink must go",
                    p.level()
                )));
            }
            if p.beyond_high(key) {
                block = p.right();
                expect = Some(p.level());
                continue;
            }
            if p.level() == level {
                return Ok(block);
            }
            stack.push(block);
            block = self.child_for(&p, block, key)?;
            expect = Some(p.level() - 1);
        }
    }

    /// Finishes the split of internal page `block` if it is still marked incomplete.
    fn repair(&self, xid: u32, block: u32, stack: &mut Vec<u32>) -> Result<(), EngineError> {
        let buf = self.engine.pool().read(self.tag(block))?;
        let g = buf.write();
        if BtPage(&g).flags() & INCOMPLETE_SPLIT == 0 {
            return Ok(()); // someone else finished it
        }
        self.finish_split(xid, stack, g)
    }

    /// Inserts the missing downlink for the right sibling of the page under `g` (marked
    /// INCOMPLETE_SPLIT) and clears the flag.
    fn finish_split(
        &self,
        xid: u32,
        stack: &mut Vec<u32>,
        g: PageWriteGuard<'_>,
    ) -> Result<(), EngineError> {
        let p = BtPage(&g);
        let block = g.tag().block;
        let Some(sep) = p.high_key() else {
            return Err(self.corrupt(format!(
                "block {block} is rightmost but marked INCOMPLETE_SPLIT"
            )));
        };
        let (level, right) = (p.level(), p.right());
        self.insert_downlink(xid, stack, g, level + 1, sep, right)
    }

    // ------------------------------------------------------------ bulk build

    /// Builds an index bottom-up from pairs in ascending order: leaves filled to
    /// `fillfactor` percent (10..=100), internal pages too (at least two entries), every
    /// page logged as a full image once finished, the meta page last (so a crash during
    /// the build leaves a relation that `open` refuses). Unsorted input fails with
    /// IndexCorrupt, a repeated key in a unique index with DuplicateKey (a repeated pair
    /// in a non-unique index is skipped, as `insert` would); the relation is then left
    /// half-built for the caller to drop. `progress` gets the number of entries every
    /// 65536 entries and at the end.
    pub fn bulk_build(
        engine: &'e Engine,
        rel: RelFileId,
        unique: bool,
        sorted: impl Iterator<Item = (i64, u64)>,
        fillfactor: u8,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Self, EngineError> {
        if !(10..=100).contains(&fillfactor) {
            return Err(ConfigError::new("fillfactor", fillfactor, "10..100 (percent)").into());
        }
        let pool = engine.pool();
        let page_size = pool.page_size();
        pool.create_relation(rel, ForkNumber::Main)?;
        let mbuf = pool.extend(rel, ForkNumber::Main)?;
        if mbuf.tag().block != META_BLOCK {
            return Err(corrupt_error(
                rel,
                format!(
                    "bulk build: the relation already had blocks (new page at {})",
                    mbuf.tag().block
                ),
            ));
        }
        let tree = BTree {
            engine,
            rel,
            unique,
            root: AtomicU32::new(NO_BLOCK),
            interrupt_split: AtomicBool::new(false),
        };
        let target = |level: usize| {
            let cap = super::btree_page::capacity_for(page_size, level.min(1) as u16);
            (cap * usize::from(fillfactor) / 100).max(2).min(cap)
        };
        let mut levels = vec![tree.bulk_page(0)?];
        let mut prev: Option<Pair> = None;
        let mut count = 0u64;
        for e in sorted {
            if let Some(p) = prev {
                if unique && e.0 == p.0 {
                    return Err(EngineError::DuplicateKey {
                        index: rel.to_string(),
                        key: e.0,
                    });
                }
                if e == p {
                    continue;
                }
                if e < p {
                    return Err(corrupt_error(
                        rel,
                        format!(
                            "bulk build input is not sorted: {e:?} after {p:?} (input entry \
                             {count})"
                        ),
                    ));
                }
            }
            prev = Some(e);
            tree.bulk_add(&mut levels, 0, e, 0, &target)?;
            count += 1;
            if count % PROGRESS_EVERY == 0 {
                progress(count);
            }
        }
        // The last page of every level is rightmost; the top level's only page is the root.
        let top = levels.len() - 1;
        for (i, (buf, image)) in levels.iter_mut().enumerate() {
            if i == top {
                let f = BtPage(image).flags();
                BtPageMut(image).set_flags(f | ROOT);
            }
            tree.bulk_write(buf, image)?;
        }
        let root = levels[top].0.tag().block;
        {
            let mut mg = mbuf.write();
            Meta {
                unique,
                root,
                root_level: top as u32,
            }
            .init(&mut mg);
            engine.log_pages(
                NO_XID,
                0,
                &mut [(&mut mg, std::slice::from_ref(&(0..page_size)))],
            )?;
        }
        progress(count);
        tree.root.store(root, Ordering::Release);
        Ok(tree)
    }

    /// A new page for the bulk build: a block extended now, built in private memory.
    fn bulk_page(&self, level: u16) -> Result<(BufferRef<'e>, Vec<u8>), EngineError> {
        let buf = self.engine.pool().extend(self.rel, ForkNumber::Main)?;
        let mut image = vec![0u8; self.engine.pool().page_size()];
        BtPageMut(&mut image).init(level, 0);
        Ok((buf, image))
    }

    /// Copies a finished page into its buffer and logs it whole.
    fn bulk_write(&self, buf: &BufferRef<'_>, image: &[u8]) -> Result<(), EngineError> {
        let mut g = buf.write();
        g.copy_from_slice(image);
        self.engine.log_pages(
            NO_XID,
            0,
            &mut [(&mut g, std::slice::from_ref(&(0..image.len())))],
        )?;
        Ok(())
    }

    /// Appends an entry to `level`'s current page; a page at its target moves on to a new
    /// page first, whose downlink goes into the level above (created on demand).
    fn bulk_add(
        &self,
        levels: &mut Vec<(BufferRef<'e>, Vec<u8>)>,
        level: usize,
        key: Pair,
        child: u32,
        target: &dyn Fn(usize) -> usize,
    ) -> Result<(), EngineError> {
        let cur = BtPage(&levels[level].1);
        if cur.len() >= target(level) {
            let last = cur.entry(cur.len() - 1);
            // The new page's low key: for a leaf the truncated separator, for an internal
            // page the separator of its first entry (stored there as entry 0).
            let sep = if level == 0 {
                leaf_separator(last, key)
            } else {
                key
            };
            let next = self.bulk_page(level as u16)?;
            let next_block = next.0.tag().block;
            let (done_buf, mut done) = std::mem::replace(&mut levels[level], next);
            BtPageMut(&mut done).set_right(Some((next_block, sep)));
            self.bulk_write(&done_buf, &done)?;
            if level + 1 == levels.len() {
                let mut parent = self.bulk_page(level as u16 + 1)?;
                BtPageMut(&mut parent.1).push(MIN_PAIR, done_buf.tag().block);
                levels.push(parent);
            }
            self.bulk_add(levels, level + 1, sep, next_block, target)?;
        }
        let pushed = BtPageMut(&mut levels[level].1).push(key, child);
        debug_assert!(pushed);
        Ok(())
    }

    // ----------------------------------------------------------------- check

    /// Checks the whole structure (the caller keeps writers away). For each level, left
    /// to right along the right links: page layout, level, flags; pairs strictly
    /// ascending and within [low key, high key); internal entry 0 storing the low key;
    /// every downlink's separator equal to its child's low key, downlinks in the order of
    /// the chain, a page without a downlink only right of an INCOMPLETE_SPLIT page; one
    /// chain per level ending at a rightmost page; the root alone at the top, named by
    /// the meta page; every initialized block reached. Returns the first problem found,
    /// naming block and entry.
    pub fn check(&self) -> Result<BTreeStats, EngineError> {
        let pool = self.engine.pool();
        let nblocks = pool.nblocks(self.rel, ForkNumber::Main)?;
        let meta = {
            let buf = pool.read(self.tag(META_BLOCK))?;
            let g = buf.read();
            Meta::read(&g).map_err(|e| self.corrupt(format!("block 0: {e}")))?
        };
        if meta.unique != self.unique {
            return Err(self.corrupt(format!(
                "the meta page says unique = {}, the open index unique = {}",
                meta.unique, self.unique
            )));
        }
        if meta.root == META_BLOCK || meta.root >= nblocks {
            return Err(self.corrupt(format!(
                "the meta page names block {} as the root; the index has blocks 1..{nblocks}",
                meta.root
            )));
        }
        let unique = meta.unique;
        let mut visited = vec![false; nblocks as usize];
        visited[META_BLOCK as usize] = true;
        let mut stats = BTreeStats {
            levels: meta.root_level + 1,
            min_fill: f64::INFINITY,
            ..BTreeStats::default()
        };
        let mut fill_sum = 0.0;
        let mut last_leaf_fill = None;
        let mut level = meta.root_level;
        let mut first = meta.root;
        let mut downlinks: Vec<Downlink> = Vec::new();
        let mut prev_leaf: Option<(Pair, u32, usize)> = None;
        loop {
            let mut below: Vec<Downlink> = Vec::new();
            let mut block = first;
            let mut low: Option<Pair> = None;
            let mut left: Option<(u32, bool)> = None;
            let mut d = 0;
            loop {
                if block == META_BLOCK || block >= nblocks {
                    let from = match left {
                        Some((b, _)) => format!("the right link of block {b}"),
                        None => format!("the first downlink into level {level}"),
                    };
                    return Err(self.corrupt(format!(
                        "{from} points to block {block}, outside the tree's blocks 1..{nblocks}"
                    )));
                }
                if visited[block as usize] {
                    return Err(self.corrupt(format!(
                        "level {level}: block {block} is reached twice (a cycle of right links)"
                    )));
                }
                visited[block as usize] = true;
                let buf = pool.read(self.tag(block))?;
                let g = buf.read();
                let p = BtPage(&g);
                p.validate()
                    .map_err(|e| self.corrupt(format!("block {block}: {e}")))?;
                if u32::from(p.level()) != level {
                    return Err(self.corrupt(format!(
                        "block {block} is at level {} but is on the chain of level {level}",
                        p.level()
                    )));
                }
                if p.is_root() != (block == meta.root) {
                    return Err(self.corrupt(format!(
                        "block {block}: ROOT flag {} but the meta page names block {} as root",
                        p.is_root(),
                        meta.root
                    )));
                }
                if level == meta.root_level && !p.is_rightmost() {
                    return Err(self.corrupt(format!(
                        "the root (block {block}) has a right sibling (block {})",
                        p.right()
                    )));
                }
                // The downlink from the level above.
                if level < meta.root_level {
                    let has_downlink = downlinks.get(d).is_some_and(|dl| dl.child == block);
                    if has_downlink {
                        let dl = &downlinks[d];
                        let expected = low.unwrap_or(MIN_PAIR);
                        if dl.sep != expected {
                            return Err(self.corrupt(format!(
                                "block {} entry {}: separator {:?} leads to block {block}, \
                                 whose low key (high key of its left sibling) is {}",
                                dl.parent,
                                dl.entry,
                                dl.sep,
                                describe_low(low, left)
                            )));
                        }
                        d += 1;
                        if let Some((lb, true)) = left {
                            return Err(self.corrupt(format!(
                                "block {lb} is marked INCOMPLETE_SPLIT but its right sibling \
                                 {block} has a downlink (block {} entry {})",
                                dl.parent, dl.entry
                            )));
                        }
                    } else {
                        match left {
                            Some((_, true)) => stats.incomplete_splits += 1,
                            Some((lb, false)) => {
                                return Err(self.corrupt(format!(
                                    "block {block} (level {level}) has no downlink in level {} \
                                     and its left sibling {lb} is not marked INCOMPLETE_SPLIT",
                                    level + 1
                                )))
                            }
                            None => {
                                return Err(self.corrupt(format!(
                                    "block {block} starts level {level} without a downlink"
                                )))
                            }
                        }
                    }
                }
                let high = p.high_key();
                if let (Some(l), Some(h)) = (low, high) {
                    if h <= l {
                        return Err(self.corrupt(format!(
                            "block {block}: high key {h:?} is not above its low key {}",
                            describe_low(low, left)
                        )));
                    }
                }
                if let Some(h) = high.filter(|h| unique && h.1 != 0) {
                    return Err(self.corrupt(format!(
                        "block {block}: high key {h:?} of a unique index has a nonzero value \
                         (separators of a unique index are (key, 0))"
                    )));
                }
                let n = p.len();
                if level > 0 && n == 0 {
                    return Err(self.corrupt(format!("internal block {block} has no entries")));
                }
                for i in 0..n {
                    let e = p.entry(i);
                    let at = || {
                        format!(
                            "block {block} entry {i} (byte {})",
                            entry_offset(level as u16, i)
                        )
                    };
                    if level > 0 && i == 0 {
                        if e != low.unwrap_or(MIN_PAIR) {
                            return Err(self.corrupt(format!(
                                "{}: stored separator {e:?} is not the page's low key {}",
                                at(),
                                describe_low(low, left)
                            )));
                        }
                    } else if let Some(l) = low.filter(|&l| e < l) {
                        return Err(self.corrupt(format!(
                            "{}: {e:?} is below the page's low key {l:?}",
                            at()
                        )));
                    }
                    if let Some(h) = high.filter(|&h| e >= h) {
                        return Err(self.corrupt(format!(
                            "{}: {e:?} is not below the page's high key {h:?}",
                            at()
                        )));
                    }
                    if i > 0 && e <= p.entry(i - 1) {
                        return Err(self.corrupt(format!(
                            "{}: {e:?} is not above the previous entry {:?}",
                            at(),
                            p.entry(i - 1)
                        )));
                    }
                    if level == 0 {
                        if let Some((pe, pb, pi)) = prev_leaf {
                            if e <= pe || (unique && e.0 == pe.0) {
                                return Err(self.corrupt(format!(
                                    "{}: {e:?} does not follow {pe:?} (block {pb} entry {pi}){}",
                                    at(),
                                    if unique && e.0 == pe.0 {
                                        ": key repeated in a unique index"
                                    } else {
                                        ""
                                    }
                                )));
                            }
                        }
                        prev_leaf = Some((e, block, i));
                    } else {
                        if unique && i > 0 && e.1 != 0 {
                            return Err(self.corrupt(format!(
                                "{}: separator {e:?} of a unique index has a nonzero value",
                                at()
                            )));
                        }
                        below.push(Downlink {
                            sep: e,
                            child: p.child(i),
                            parent: block,
                            entry: i,
                        });
                    }
                }
                stats.pages += 1;
                if level == 0 {
                    stats.leaf_pages += 1;
                    stats.entries += n as u64;
                    let fill = n as f64 / p.capacity() as f64;
                    fill_sum += fill;
                    if p.is_rightmost() {
                        last_leaf_fill = Some(fill);
                    } else {
                        stats.min_fill = stats.min_fill.min(fill);
                    }
                } else {
                    stats.internal_pages += 1;
                    stats.max_fanout = stats.max_fanout.max(n);
                }
                left = Some((block, p.flags() & INCOMPLETE_SPLIT != 0));
                low = high;
                if p.is_rightmost() {
                    break;
                }
                block = p.right();
            }
            if let Some(dl) = downlinks.get(d) {
                return Err(self.corrupt(format!(
                    "block {} entry {}: the downlink to block {} (separator {:?}) is not on \
                     level {level}'s right-link chain in separator order",
                    dl.parent, dl.entry, dl.child, dl.sep
                )));
            }
            if level == 0 {
                break;
            }
            level -= 1;
            first = below[0].child;
            downlinks = below;
        }
        if stats.min_fill == f64::INFINITY {
            stats.min_fill = last_leaf_fill.unwrap_or(0.0);
        }
        stats.avg_fill = fill_sum / f64::from(stats.leaf_pages.max(1));
        for block in 1..nblocks {
            if visited[block as usize] {
                continue;
            }
            let buf = pool.read(self.tag(block))?;
            let g = buf.read();
            if !page::is_new(&g) {
                let p = BtPage(&g);
                return Err(self.corrupt(format!(
                    "block {block} (level {}, {} entries) is initialized but not reachable \
                     from the root",
                    p.level(),
                    p.len()
                )));
            }
            stats.unused_pages += 1;
        }
        Ok(stats)
    }
}

fn clear_incomplete(g: &mut PageWriteGuard<'_>) {
    let f = BtPage(g).flags();
    if f & INCOMPLETE_SPLIT != 0 {
        BtPageMut(g).set_flags(f & !INCOMPLETE_SPLIT);
    }
}

fn describe_low(low: Option<Pair>, left: Option<(u32, bool)>) -> String {
    match (low, left) {
        (Some(l), Some((b, _))) => format!("{l:?} (high key of block {b})"),
        _ => "minus infinity (leftmost page)".into(),
    }
}
