//! The structure check: [`BTree::check`] and what it finds, [`BTreeStats`].
//!
//! Owns: the walk of the whole tree (`Checker`): the meta page, then each level from the
//! root down, left to right along the right links (`Checker::level`), each page checked
//! on its own (`Checker::page`) and against its neighbours: its left sibling's high key
//! (its low key) and the downlink into it from the level above; then every block the
//! walk did not reach (`Checker::unreached`).
//!
//! Invariants: checks the ones listed in `mod.rs`, and that every initialized block is
//! reached. The first problem found is returned as IndexCorrupt, naming block and entry;
//! checks run in a fixed order, so the same damage is always reported the same way.
//!
//! Locks: one page's shared lock at a time: the meta page, then the tree pages level by
//! level (top down, left to right), then the blocks not reached in block order. Not a
//! snapshot: the caller keeps writers away. Pins: one at a time.

use super::page::{entry_offset, BtPage, Meta, Pair, INCOMPLETE_SPLIT, MIN_PAIR};
use super::{BTree, META_BLOCK};
use crate::index::IndexError;
use crate::page;
use crate::types::ForkNumber;

/// What [`BTree::check`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BTreeStats {
    /// Levels, leaves included (1 for a tree that is a single leaf).
    pub levels: u32,
    /// Tree pages reached (the meta page not counted).
    pub pages: u32,
    /// Leaf pages reached.
    pub leaf_pages: u32,
    /// Internal pages reached.
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

/// A downlink found by `check`: the separator it promises as the child's low key.
struct Downlink {
    sep: Pair,
    child: u32,
    parent: u32,
    entry: usize,
}

/// One `check` under way: what it knows of the whole tree so far.
struct Checker<'t, 'e> {
    tree: &'t BTree<'e>,
    meta: Meta,
    nblocks: u32,
    /// Blocks reached (the meta page included).
    visited: Vec<bool>,
    stats: BTreeStats,
    /// Sum of the leaves' fills, for the average.
    fill_sum: f64,
    /// The rightmost leaf's fill (min_fill when it is the only leaf).
    last_leaf_fill: Option<f64>,
    /// The last leaf entry checked: pair, block, entry number.
    prev_leaf: Option<(Pair, u32, usize)>,
}

/// The walk of one level: where it is and what the page there is checked against.
struct LevelWalk<'d> {
    level: u32,
    /// The page being checked.
    block: u32,
    /// Its low key: the left sibling's high key (None: minus infinity, leftmost page).
    low: Option<Pair>,
    /// The left sibling: block, and whether it is marked INCOMPLETE_SPLIT.
    left: Option<(u32, bool)>,
    /// The downlinks into this level, in separator order (none for the root level).
    downlinks: &'d [Downlink],
    /// The next of them to meet on the chain.
    next: usize,
    /// The downlinks out of this level (into the level below), in order.
    below: Vec<Downlink>,
}

fn describe_low(low: Option<Pair>, left: Option<(u32, bool)>) -> String {
    match (low, left) {
        (Some(l), Some((b, _))) => format!("{l:?} (high key of block {b})"),
        _ => "minus infinity (leftmost page)".into(),
    }
}

impl BTree<'_> {
    /// Checks the whole structure (the caller keeps writers away). For each level, left
    /// to right along the right links: page layout, level, flags; pairs strictly
    /// ascending and within [low key, high key); internal entry 0 storing the low key;
    /// every downlink's separator equal to its child's low key, downlinks in the order of
    /// the chain, a page without a downlink only right of an INCOMPLETE_SPLIT page; one
    /// chain per level ending at a rightmost page; the root alone at the top, named by
    /// the meta page; every initialized block reached. Returns the first problem found,
    /// naming block and entry.
    pub fn check(&self) -> Result<BTreeStats, IndexError> {
        let mut c = Checker::new(self)?;
        let mut level = c.meta.root_level;
        let mut first = c.meta.root;
        let mut downlinks = Vec::new();
        loop {
            let below = c.level(level, first, &downlinks)?;
            if level == 0 {
                break;
            }
            level -= 1;
            first = below[0].child;
            downlinks = below;
        }
        c.unreached()?;
        Ok(c.into_stats())
    }
}

impl<'t, 'e> Checker<'t, 'e> {
    /// Reads the meta page and checks it against the open index and the relation's size.
    fn new(tree: &'t BTree<'e>) -> Result<Self, IndexError> {
        let pool = tree.engine.pool();
        let nblocks = pool.nblocks(tree.rel, ForkNumber::Main)?;
        let meta = {
            let buf = pool.read(tree.tag(META_BLOCK))?;
            let g = buf.read();
            Meta::read(&g).map_err(|e| tree.corrupt(format!("block 0: {e}")))?
        };
        if meta.unique != tree.unique {
            return Err(tree.corrupt(format!(
                "the meta page says unique = {}, the open index unique = {}",
                meta.unique, tree.unique
            )));
        }
        if meta.root == META_BLOCK || meta.root >= nblocks {
            return Err(tree.corrupt(format!(
                "the meta page names block {} as the root; the index has blocks 1..{nblocks}",
                meta.root
            )));
        }
        let mut visited = vec![false; nblocks as usize];
        visited[META_BLOCK as usize] = true;
        Ok(Checker {
            tree,
            meta,
            nblocks,
            visited,
            stats: BTreeStats {
                levels: meta.root_level + 1,
                min_fill: f64::INFINITY,
                ..BTreeStats::default()
            },
            fill_sum: 0.0,
            last_leaf_fill: None,
            prev_leaf: None,
        })
    }

    #[cold]
    fn corrupt(&self, reason: String) -> IndexError {
        self.tree.corrupt(reason)
    }

    /// Walks `level` from its leftmost page `first` along the right links, checking each
    /// page and that every downlink in `downlinks` (from the level above) was met, in
    /// order. Returns the downlinks into the level below.
    fn level(
        &mut self,
        level: u32,
        first: u32,
        downlinks: &[Downlink],
    ) -> Result<Vec<Downlink>, IndexError> {
        let pool = self.tree.engine.pool();
        let mut w = LevelWalk {
            level,
            block: first,
            low: None,
            left: None,
            downlinks,
            next: 0,
            below: Vec::new(),
        };
        loop {
            self.reach(&w)?;
            let buf = pool.read(self.tree.tag(w.block))?;
            let g = buf.read();
            let p = BtPage(&g);
            self.page(&p, &mut w)?;
            w.left = Some((w.block, p.flags() & INCOMPLETE_SPLIT != 0));
            w.low = p.high_key();
            if p.is_rightmost() {
                break;
            }
            w.block = p.right();
        }
        if let Some(dl) = downlinks.get(w.next) {
            return Err(self.corrupt(format!(
                "block {} entry {}: the downlink to block {} (separator {:?}) is not on \
                 level {level}'s right-link chain in separator order",
                dl.parent, dl.entry, dl.child, dl.sep
            )));
        }
        Ok(w.below)
    }

    /// Checks that the walk's next block is one of the tree's and not reached before (a
    /// cycle), and marks it reached.
    fn reach(&mut self, w: &LevelWalk<'_>) -> Result<(), IndexError> {
        let (level, block, nblocks) = (w.level, w.block, self.nblocks);
        if block == META_BLOCK || block >= nblocks {
            let from = match w.left {
                Some((b, _)) => format!("the right link of block {b}"),
                None => format!("the first downlink into level {level}"),
            };
            return Err(self.corrupt(format!(
                "{from} points to block {block}, outside the tree's blocks 1..{nblocks}"
            )));
        }
        if self.visited[block as usize] {
            return Err(self.corrupt(format!(
                "level {level}: block {block} is reached twice (a cycle of right links)"
            )));
        }
        self.visited[block as usize] = true;
        Ok(())
    }

    /// Checks page `p` (the walk's block), in this order: layout, level, flags; the
    /// downlink into it; its high key; its entries; then counts it.
    fn page(&mut self, p: &BtPage<'_>, w: &mut LevelWalk<'_>) -> Result<(), IndexError> {
        self.header(p, w)?;
        if w.level < self.meta.root_level {
            self.downlink(w)?;
        }
        self.high_key(p, w)?;
        let n = p.len();
        if w.level > 0 && n == 0 {
            return Err(self.corrupt(format!("internal block {} has no entries", w.block)));
        }
        for i in 0..n {
            self.entry(p, w, i)?;
        }
        self.count(p, w.level);
        Ok(())
    }

    /// The page on its own: layout, level, ROOT flag (agreeing with the meta page), and
    /// the root without a right sibling.
    fn header(&self, p: &BtPage<'_>, w: &LevelWalk<'_>) -> Result<(), IndexError> {
        let (level, block, root) = (w.level, w.block, self.meta.root);
        p.validate()
            .map_err(|e| self.corrupt(format!("block {block}: {e}")))?;
        if u32::from(p.level()) != level {
            return Err(self.corrupt(format!(
                "block {block} is at level {} but is on the chain of level {level}",
                p.level()
            )));
        }
        if p.is_root() != (block == root) {
            return Err(self.corrupt(format!(
                "block {block}: ROOT flag {} but the meta page names block {root} as root",
                p.is_root(),
            )));
        }
        if level == self.meta.root_level && !p.is_rightmost() {
            return Err(self.corrupt(format!(
                "the root (block {block}) has a right sibling (block {})",
                p.right()
            )));
        }
        Ok(())
    }

    /// The downlink from the level above: either the next one expected, with the page's
    /// low key as its separator and a left sibling not marked INCOMPLETE_SPLIT, or none,
    /// with a left sibling so marked (an incomplete split, counted).
    fn downlink(&mut self, w: &mut LevelWalk<'_>) -> Result<(), IndexError> {
        let (level, block, low, left) = (w.level, w.block, w.low, w.left);
        if let Some(dl) = w.downlinks.get(w.next).filter(|dl| dl.child == block) {
            let expected = low.unwrap_or(MIN_PAIR);
            if dl.sep != expected {
                return Err(self.corrupt(format!(
                    "block {} entry {}: separator {:?} leads to block {block}, whose low key \
                     (high key of its left sibling) is {}",
                    dl.parent,
                    dl.entry,
                    dl.sep,
                    describe_low(low, left)
                )));
            }
            w.next += 1;
            if let Some((lb, true)) = left {
                return Err(self.corrupt(format!(
                    "block {lb} is marked INCOMPLETE_SPLIT but its right sibling {block} has a \
                     downlink (block {} entry {})",
                    dl.parent, dl.entry
                )));
            }
            return Ok(());
        }
        match left {
            Some((_, true)) => {
                self.stats.incomplete_splits += 1;
                Ok(())
            }
            Some((lb, false)) => Err(self.corrupt(format!(
                "block {block} (level {level}) has no downlink in level {} and its left \
                 sibling {lb} is not marked INCOMPLETE_SPLIT",
                level + 1
            ))),
            None => Err(self.corrupt(format!(
                "block {block} starts level {level} without a downlink"
            ))),
        }
    }

    /// The high key: above the low key, and of the form (key, 0) in a unique index.
    fn high_key(&self, p: &BtPage<'_>, w: &LevelWalk<'_>) -> Result<(), IndexError> {
        let (block, low, left) = (w.block, w.low, w.left);
        let high = p.high_key();
        if let (Some(l), Some(h)) = (low, high) {
            if h <= l {
                return Err(self.corrupt(format!(
                    "block {block}: high key {h:?} is not above its low key {}",
                    describe_low(low, left)
                )));
            }
        }
        if let Some(h) = high.filter(|h| self.meta.unique && h.1 != 0) {
            return Err(self.corrupt(format!(
                "block {block}: high key {h:?} of a unique index has a nonzero value \
                 (separators of a unique index are (key, 0))"
            )));
        }
        Ok(())
    }

    /// Entry `i` of page `p`: within [low key, high key) (internal entry 0: the low key
    /// itself), above the entry before it; a leaf entry above the previous leaf's last
    /// (and of another key in a unique index), an internal separator of the form (key, 0)
    /// in a unique index, its downlink recorded for the level below.
    fn entry(&mut self, p: &BtPage<'_>, w: &mut LevelWalk<'_>, i: usize) -> Result<(), IndexError> {
        let (level, block, low, left) = (w.level, w.block, w.low, w.left);
        let unique = self.meta.unique;
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
            return Err(self.corrupt(format!("{}: {e:?} is below the page's low key {l:?}", at())));
        }
        if let Some(h) = p.high_key().filter(|&h| e >= h) {
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
            if let Some((pe, pb, pi)) = self.prev_leaf {
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
            self.prev_leaf = Some((e, block, i));
        } else {
            if unique && i > 0 && e.1 != 0 {
                return Err(self.corrupt(format!(
                    "{}: separator {e:?} of a unique index has a nonzero value",
                    at()
                )));
            }
            w.below.push(Downlink {
                sep: e,
                child: p.child(i),
                parent: block,
                entry: i,
            });
        }
        Ok(())
    }

    /// Adds a checked page to the statistics.
    fn count(&mut self, p: &BtPage<'_>, level: u32) {
        let n = p.len();
        let stats = &mut self.stats;
        stats.pages += 1;
        if level == 0 {
            stats.leaf_pages += 1;
            stats.entries += n as u64;
            let fill = n as f64 / p.capacity() as f64;
            self.fill_sum += fill;
            if p.is_rightmost() {
                self.last_leaf_fill = Some(fill);
            } else {
                stats.min_fill = stats.min_fill.min(fill);
            }
        } else {
            stats.internal_pages += 1;
            stats.max_fanout = stats.max_fanout.max(n);
        }
    }

    /// Checks that every block the walk did not reach is uninitialized (counted unused).
    fn unreached(&mut self) -> Result<(), IndexError> {
        let pool = self.tree.engine.pool();
        for block in 1..self.nblocks {
            if self.visited[block as usize] {
                continue;
            }
            let buf = pool.read(self.tree.tag(block))?;
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
            self.stats.unused_pages += 1;
        }
        Ok(())
    }

    /// The statistics, with the fills summed up.
    fn into_stats(self) -> BTreeStats {
        let mut stats = self.stats;
        if stats.min_fill == f64::INFINITY {
            stats.min_fill = self.last_leaf_fill.unwrap_or(0.0);
        }
        stats.avg_fill = self.fill_sum / f64::from(stats.leaf_pages.max(1));
        stats
    }
}
