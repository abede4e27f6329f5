//! The writes: [`BTree::insert`] and [`BTree::delete`], page and root splits, downlink
//! insertion, and the repair of splits cut short.
//!
//! Owns: the writers' use of the descent (`descend_for_write`: to the first leaf, the path
//! remembered as a stack of block numbers), their move right with exclusive locks
//! (`lock_covering`), and the logging of every change to a tree page.
//!
//! Invariants kept: a split logs both halves (and the page one level down whose split it
//! completes, clearing that page's flag) in one record, marking the left half
//! INCOMPLETE_SPLIT; the downlink goes into the parent in a second record that also
//! clears the flag. So INCOMPLETE_SPLIT always means "my right sibling has no downlink":
//! a page that splits while still flagged (a parent receiving a downlink after a crash)
//! hands the flag on to its new right half, whose right sibling is then the page lacking
//! the downlink. A crash between the records leaves a valid B-link tree with one missing
//! downlink: searches move right across it, and the next insert that passes the flagged
//! page (descending, or moving right on the leaf level) inserts the downlink first
//! ("finishing the split", as PostgreSQL does), then starts over. An error between the
//! records (a failed WAL write) leaves the same state; a failed `log_pages` itself
//! latches the log, which refuses everything until the engine is reopened and recovered
//! (as for heap pages). A root split is ONE record (old root, new right page, new root,
//! meta page, and the child whose downlink it inserts): there is no intermediate state.
//!
//! Logging: every change is logged by [`crate::engine::Engine::log_pages`] while the pages
//! are held, so physical redo restores the tree. The byte ranges logged are the ones the
//! page mutator ([`BtPageMut`]) declares it wrote (`page_delta`): for a leaf insert or
//! removal the `lower` field and the shifted tail of the entry array (half a page on
//! average, since the array is sorted and fixed-width); for a split the left page's
//! entries from the insert position on and the right page's entries, with both special
//! areas; for a downlink the parent's shifted tail and the child's flags. Debug builds
//! check each declaration against a before-image of the page ([`BeforeImage`]).
//!
//! Locks, in this order:
//! - The descent (`search.rs`): shared locks, one at a time, remembering the path.
//! - The leaf, exclusively; moving right exclusively, releasing the left page before
//!   locking the right one (safe because nothing is ever deleted, so the right page still
//!   covers the keys to the right of the left high key).
//! - A split holds the page being split (exclusively) while it takes the new right page
//!   (a fresh block from `pool.extend`: nobody else can hold it), and then keeps holding
//!   the left page while it takes the parent exclusively to insert the downlink (and the
//!   parent's right siblings, releasing each before the next), as Lehman and Yao and
//!   PostgreSQL do. Holding the child makes the downlink insertion and the clearing of the
//!   child's INCOMPLETE_SPLIT flag one atomic record, and keeps the missing-downlink state
//!   invisible to every other thread (it only survives a crash or an error in between).
//! - Root split: the root page carries ROOT; a writer about to split a ROOT page takes the
//!   meta page exclusively while holding it (the flag cannot change under our lock, so the
//!   meta page must agree), then the two fresh pages (new right page, new root). A writer
//!   that must insert a downlink above the top of its remembered path (the tree grew
//!   since it descended: a concurrent root split) reads the meta page (no lock held but
//!   the child's) and descends from the current root to the parent level.
//!
//! Pins: at most five (root split: old root, new right page, new root, meta page, and the
//! child whose downlink goes into the old root).

use super::page::{BtPage, BtPageMut, Meta, Pair, INCOMPLETE_SPLIT, MIN_PAIR, ROOT};
use super::search::{Start, Visit};
use super::{BTree, META_BLOCK};
use crate::buffer::PageWriteGuard;
use crate::index::IndexError;
use crate::page_delta::{BeforeImage, PageDelta};
use crate::sync::Ordering;
use crate::types::ForkNumber;

/// Where a writer's descent stopped.
enum Descent {
    /// The leaf that covered the key when it was read (not locked).
    Leaf(u32),
    /// An internal page marked INCOMPLETE_SPLIT: finish that split first. The stack holds
    /// the path above it.
    Repair(u32),
}

/// A page of a change about to be logged: its guard, its before-image (debug builds only)
/// and the ranges its mutators declared.
type Changed<'a, 'g> = (&'a mut PageWriteGuard<'g>, BeforeImage, PageDelta);

/// Clears the page's INCOMPLETE_SPLIT flag; returns what it wrote.
fn clear_incomplete(g: &mut PageWriteGuard<'_>) -> PageDelta {
    let f = BtPage(g).flags();
    let mut p = BtPageMut::new(g);
    if f & INCOMPLETE_SPLIT != 0 {
        p.set_flags(f & !INCOMPLETE_SPLIT);
    }
    p.into_delta()
}

impl BTree<'_> {
    /// The writers' descent: to the leaf covering `key` when read (returned unlocked),
    /// recording the internal pages passed in `stack` (root first). An internal page
    /// marked INCOMPLETE_SPLIT on the way has its split finished first, and the descent
    /// starts over.
    fn descend_for_write(
        &self,
        xid: u32,
        key: Pair,
        stack: &mut Vec<u32>,
    ) -> Result<u32, IndexError> {
        loop {
            let reached =
                self.descend(key, Start::CachedRoot, Some(stack), false, |p, block| {
                    Ok(if p.is_leaf() {
                        Visit::Stop(Descent::Leaf(block))
                    } else if p.flags() & INCOMPLETE_SPLIT != 0 {
                        Visit::Stop(Descent::Repair(block))
                    } else {
                        Visit::Go
                    })
                })?;
            match reached {
                Descent::Leaf(block) => return Ok(block),
                Descent::Repair(block) => self.repair(xid, block, stack)?,
            }
        }
    }

    /// Descends from the current root (read from the meta page) to the page of `level`
    /// covering `key`, filling `stack` with the path above it.
    fn find_level(&self, key: Pair, level: u16, stack: &mut Vec<u32>) -> Result<u32, IndexError> {
        self.descend(key, Start::MetaRoot, Some(stack), false, |p, block| {
            if p.level() < level {
                return Err(self.corrupt(format!(
                    "the root (block {block}) is at level {}, below level {level} where a \
                     downlink must go",
                    p.level()
                )));
            }
            Ok(if p.level() == level && !p.beyond_high(key) {
                Visit::Stop(block)
            } else {
                Visit::Go
            })
        })
    }

    /// The writers' move right on one level: locks `block` (on `level`) exclusively and,
    /// while `key` is at or above the page's high key, releases it and locks its right
    /// sibling; then calls `at` with the page covering `key` still locked. `stop_flagged`:
    /// stop at the first page marked INCOMPLETE_SPLIT instead (its split must be finished
    /// before an insert goes on, as PostgreSQL's _bt_moveright does for writers).
    fn lock_covering<R>(
        &self,
        block: u32,
        level: u16,
        key: Pair,
        stop_flagged: bool,
        at: impl for<'g> FnOnce(PageWriteGuard<'g>) -> Result<R, IndexError>,
    ) -> Result<R, IndexError> {
        let pool = self.engine.pool();
        let mut block = block;
        let mut buf = pool.read(self.tag(block))?;
        let mut g = buf.write();
        loop {
            let p = BtPage(&g);
            self.check_reached(&p, block, Some(level))?;
            if (stop_flagged && p.flags() & INCOMPLETE_SPLIT != 0) || !p.beyond_high(key) {
                break;
            }
            block = p.right();
            drop(g);
            buf = pool.read(self.tag(block))?;
            g = buf.write();
        }
        at(g)
    }

    /// Inserts (`key`, `value`). Unique index: an existing entry with `key` (any value)
    /// fails with DuplicateKey and changes nothing. Non-unique: inserting a pair that is
    /// already there does nothing.
    pub fn insert(&self, xid: u32, key: i64, value: u64) -> Result<(), IndexError> {
        let item = (key, value);
        let mut stack = Vec::with_capacity(8);
        loop {
            let leaf = self.descend_for_write(xid, item, &mut stack)?;
            let done = self.lock_covering(leaf, 0, item, true, |g| {
                self.insert_into_leaf(xid, &mut stack, g, item)
            })?;
            if done {
                return Ok(());
            }
        }
    }

    /// Inserts `item` into the leaf under `g`, which covers it, splitting it if full.
    /// Returns false, to start over, if the page is marked INCOMPLETE_SPLIT instead: a
    /// split that a crash (or an error) cut short, on the page we insert into or pass on
    /// the way right, which it finishes first.
    fn insert_into_leaf(
        &self,
        xid: u32,
        stack: &mut Vec<u32>,
        mut g: PageWriteGuard<'_>,
        item: Pair,
    ) -> Result<bool, IndexError> {
        let p = BtPage(&g);
        if p.flags() & INCOMPLETE_SPLIT != 0 {
            self.finish_split(xid, stack, g)?;
            return Ok(false);
        }
        let key = item.0;
        let pos = p.lower_bound(item);
        if self.unique {
            // Every pair of this key is on this page (separators are (key, 0)).
            let first = p.lower_bound((key, 0));
            if first < p.len() && p.entry(first).0 == key {
                return Err(IndexError::DuplicateKey {
                    index: self.rel.to_string(),
                    key,
                });
            }
        } else if pos < p.len() && p.entry(pos) == item {
            return Ok(true);
        }
        if !p.is_full() {
            self.insert_logged(xid, &mut g, pos, item)?;
        } else {
            self.split(xid, stack, g, pos, (item, 0), None)?;
        }
        Ok(true)
    }

    /// Removes (`key`, `value`); returns whether it was there. Pages are never merged.
    pub fn delete(&self, xid: u32, key: i64, value: u64) -> Result<bool, IndexError> {
        let item = (key, value);
        let mut stack = Vec::with_capacity(8);
        let leaf = self.descend_for_write(xid, item, &mut stack)?;
        self.lock_covering(leaf, 0, item, false, |mut g| {
            self.remove_logged(xid, &mut g, item)
        })
    }

    /// Inserts a leaf entry into a page with room, logging the exact ranges.
    fn insert_logged(
        &self,
        xid: u32,
        g: &mut PageWriteGuard<'_>,
        pos: usize,
        item: Pair,
    ) -> Result<(), IndexError> {
        let before = BeforeImage::take(g);
        let mut p = BtPageMut::new(g);
        let done = p.insert(pos, item, 0);
        debug_assert!(done);
        let delta = p.into_delta();
        self.log_changes(xid, &mut [(g, before, delta)])
    }

    /// Removes `item` from the leaf under `g` if it is there, logging the exact ranges;
    /// returns whether it was.
    fn remove_logged(
        &self,
        xid: u32,
        g: &mut PageWriteGuard<'_>,
        item: Pair,
    ) -> Result<bool, IndexError> {
        let p = BtPage(g);
        let pos = p.lower_bound(item);
        if pos >= p.len() || p.entry(pos) != item {
            return Ok(false);
        }
        let before = BeforeImage::take(g);
        let mut p = BtPageMut::new(g);
        p.remove(pos);
        let delta = p.into_delta();
        self.log_changes(xid, &mut [(g, before, delta)])?;
        Ok(true)
    }

    /// Logs the changes of several pages as one record: the ranges each page's mutators
    /// declared (debug builds check them against the page's before-image). Pages with
    /// nothing declared are left out; nothing at all logs nothing.
    fn log_changes(&self, xid: u32, pages: &mut [Changed<'_, '_>]) -> Result<(), IndexError> {
        for (g, before, delta) in pages.iter() {
            before.assert_declared(g, delta);
        }
        match pages {
            [] => {}
            // The common case (a leaf insert or removal): no vector.
            [(g, _, delta)] => {
                if !delta.is_empty() {
                    self.engine.log_deltas(xid, 0, &mut [(g, delta)])?;
                } else {
                    // Opened for writing, so dirty, yet unchanged: made safe as a hint
                    // (an image if first since the checkpoint), or a torn write of it
                    // could not be repaired.
                    self.engine.log_hint(g)?;
                }
            }
            _ => {
                let mut refs: Vec<_> = pages
                    .iter_mut()
                    .filter(|(_, _, d)| !d.is_empty())
                    .map(|(g, _, d)| (&mut **g, &*d))
                    .collect();
                if !refs.is_empty() {
                    self.engine.log_deltas(xid, 0, &mut refs)?;
                }
                for (g, _, d) in pages.iter_mut() {
                    if d.is_empty() {
                        self.engine.log_hint(g)?;
                    }
                }
            }
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
    ) -> Result<(), IndexError> {
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
        let (before_g, before_r) = (BeforeImage::take(&g), BeforeImage::take(&rg));
        let (mut left, mut right) = (BtPageMut::new(&mut g), BtPageMut::new(&mut rg));
        let sep = left.split_insert(&mut right, rblock, pos, item, true);
        let (delta_g, delta_r) = (left.into_delta(), right.into_delta());
        let mut pages = vec![(&mut g, before_g, delta_g), (&mut rg, before_r, delta_r)];
        if let Some(c) = child.as_mut() {
            let before = BeforeImage::take(c);
            let delta = clear_incomplete(c);
            pages.push((c, before, delta));
        }
        self.log_changes(xid, &mut pages)?;
        drop(pages);
        drop(rg);
        drop(child);
        self.engine
            .run_hook_at(crate::engine::HookPoint::BtreeSplit, u64::from(rblock));
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
    ) -> Result<(), IndexError> {
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
        let before_g = BeforeImage::take(&g);
        let before_r = BeforeImage::take(&rg);
        let before_n = BeforeImage::take(&ng);
        let before_m = BeforeImage::take(&mg);
        let (mut left, mut right) = (BtPageMut::new(&mut g), BtPageMut::new(&mut rg));
        let sep = left.split_insert(&mut right, rblock, pos, item, false);
        let (delta_g, delta_r) = (left.into_delta(), right.into_delta());
        let delta_n = {
            let mut n = BtPageMut::new(&mut ng);
            n.init(level + 1, ROOT);
            n.push(MIN_PAIR, block);
            n.push(sep, rblock);
            n.into_delta()
        };
        let mut delta_m = PageDelta::new(mg.len());
        delta_m.touch(
            Meta {
                root: nblock,
                root_level: meta.root_level + 1,
                ..meta
            }
            .write(&mut mg),
        );
        let mut pages = vec![
            (&mut g, before_g, delta_g),
            (&mut rg, before_r, delta_r),
            (&mut ng, before_n, delta_n),
            (&mut mg, before_m, delta_m),
        ];
        if let Some(c) = child.as_mut() {
            let before = BeforeImage::take(c);
            let delta = clear_incomplete(c);
            pages.push((c, before, delta));
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
    ) -> Result<(), IndexError> {
        let start = match stack.pop() {
            Some(b) => b,
            // The tree grew above the path we remembered (a concurrent root split).
            None => self.find_level(sep, plevel, stack)?,
        };
        self.lock_covering(start, plevel, sep, false, |pg| {
            self.add_downlink(xid, stack, pg, child, sep, right)
        })
    }

    /// Inserts the downlink (`sep`, `right`) into the page under `pg` (which covers `sep`)
    /// and clears `child`'s INCOMPLETE_SPLIT flag in the same record; splits the page if
    /// it is full. A downlink already there leaves only the flag to clear. (One lifetime
    /// for both guards: they go into one record; see `split`.)
    fn add_downlink<'g>(
        &self,
        xid: u32,
        stack: &mut Vec<u32>,
        mut pg: PageWriteGuard<'g>,
        mut child: PageWriteGuard<'g>,
        sep: Pair,
        right: u32,
    ) -> Result<(), IndexError> {
        let p = BtPage(&pg);
        let pos = p.lower_bound(sep);
        if pos < p.len() && p.entry(pos) == sep {
            if p.child(pos) != right {
                return Err(self.corrupt(format!(
                    "block {} entry {pos}: separator {sep:?} leads to block {}, but the \
                     split of block {} needs it to lead to block {right}",
                    pg.tag().block,
                    p.child(pos),
                    child.tag().block
                )));
            }
            // Already there: only the flag is left to clear.
            let before = BeforeImage::take(&child);
            let delta = clear_incomplete(&mut child);
            return self.log_changes(xid, &mut [(&mut child, before, delta)]);
        }
        if p.is_full() {
            return self.split(xid, stack, pg, pos, (sep, right), Some(child));
        }
        let (before_p, before_c) = (BeforeImage::take(&pg), BeforeImage::take(&child));
        let mut p = BtPageMut::new(&mut pg);
        let done = p.insert(pos, sep, right);
        debug_assert!(done);
        let delta_p = p.into_delta();
        let delta_c = clear_incomplete(&mut child);
        self.log_changes(
            xid,
            &mut [
                (&mut pg, before_p, delta_p),
                (&mut child, before_c, delta_c),
            ],
        )
    }

    /// Finishes the split of internal page `block` if it is still marked incomplete.
    fn repair(&self, xid: u32, block: u32, stack: &mut Vec<u32>) -> Result<(), IndexError> {
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
    ) -> Result<(), IndexError> {
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
}
