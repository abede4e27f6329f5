//! The one descent, and the reads: [`BTree::get`], [`BTree::lookup`], [`BTree::range`].
//!
//! Owns: `descend`, the walk from the root (or a page already reached) down and right to
//! the page its caller stops at, used by every operation: readers (stopping at the leaf
//! covering the key), writers (`split.rs`: stopping at the first leaf, or early at an
//! internal page whose split is to be finished) and downlink insertion (stopping at a
//! given level); with it, the checks of every page a link leads to (`check_reached`) and
//! the refresh of the cached root (`refresh_root`).
//!
//! Invariants relied on: pages are never deleted, so a key's page is the one reached or
//! one to its right, and moving right while the key is at or above a page's high key
//! finds it; an old root is the leftmost page of its level, so a descent from a stale
//! cached root is still correct (it refreshes the cache when the page it starts at has
//! lost ROOT); a page reached by a link must be an initialized tree page of the level
//! the link promises, else the index is corrupt.
//!
//! Locks: ONE page's shared lock at a time: read the child or right link, release, lock
//! the next page (so no lock order question arises). `refresh_root` takes the meta page
//! shared with no tree page locked. Scans copy up to 64 entries under the leaf's lock and
//! call the caller's closure with no lock held, resuming from the last pair returned (not
//! a snapshot). Pins: one at a time.

use super::page::{BtPage, Meta, OptimisticBtPage, Pair, Step};
use super::{BTree, META_BLOCK};
use crate::index::IndexError;
use crate::stats::IoContext;
use crate::sync::Ordering;

/// Entries a scan copies under one page lock before calling the closure.
const SCAN_BATCH: usize = 64;

/// Where [`BTree::descend`] begins.
#[derive(Debug, Clone, Copy)]
pub(super) enum Start {
    /// The cached root; if that page has lost its ROOT flag (the tree grew since the cache
    /// was filled), the root the meta page names now.
    CachedRoot,
    /// The root the meta page names now (refreshing the cache).
    MetaRoot,
    /// A page reached before, on this level (a scan resuming on a leaf).
    Page(u32, u16),
}

/// What a descent's caller decides at a page (see [`BTree::descend`]).
pub(super) enum Visit<R> {
    /// Stop here: the descent returns this.
    Stop(R),
    /// Go on: right if the key is at or above the page's high key, else down.
    Go,
    /// Move right although the key is below the high key (a reader whose key's values
    /// continue on the next leaf).
    Right,
}

/// Where a scan goes on after a batch.
enum Next {
    Done,
    /// The batch filled up: continue on the same page (block) from this pair.
    Same(u32, Pair),
    /// The page is exhausted: continue on its right sibling (block) from its high key.
    Right(u32, Pair),
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

/// Copies the entries of leaf `p` (block `block`, covering `cursor`) from `cursor` up to
/// `hi` into `batch`, at most a batch; returns how many and where the scan goes on.
fn scan_leaf(
    p: &BtPage<'_>,
    block: u32,
    cursor: Pair,
    hi: Pair,
    batch: &mut [Pair; SCAN_BATCH],
) -> (usize, Next) {
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
            Some(c) => Next::Same(block, c),
            None => Next::Done,
        }
    } else {
        match p.high_key() {
            Some(h) if h <= hi => Next::Right(p.right(), h),
            _ => Next::Done,
        }
    };
    (count, next)
}

impl BTree<'_> {
    /// The descent, for every operation. From `start`, holding one page's shared lock at a
    /// time, it checks each page reached (`check_reached`; a page at the cached root that
    /// is no longer the root sends it to the current root) and calls `at` on it under that
    /// lock; then, as `at` decides, it stops there, or goes on: right along the right link
    /// if `key` is at or above the page's high key (the page split since its downlink was
    /// read), else down to the child covering `key`, pushing the page onto `stack` (when
    /// given: the writer's path, root first; cleared at the start). `at` must stop at a
    /// leaf covering `key`: there is nothing below it.
    ///
    /// With `optimistic` (readers, whose `at` goes on at every internal page) and the
    /// pool's `optimistic_reads` on, internal pages are read with no pin and no lock
    /// ([`OptimisticBtPage::step`]) and `at` sees only the pages the locked path reads:
    /// leaves, and any internal page whose optimistic read failed.
    ///
    /// Takes no lock but the one it holds and allocates nothing (the stack aside): `get`,
    /// the benchmark's hot lookup, runs its leaf search inside `at`, under the same lock.
    #[inline]
    pub(super) fn descend<R>(
        &self,
        key: Pair,
        start: Start,
        mut stack: Option<&mut Vec<u32>>,
        optimistic: bool,
        mut at: impl FnMut(&BtPage<'_>, u32) -> Result<Visit<R>, IndexError>,
    ) -> Result<R, IndexError> {
        let pool = self.engine.pool();
        if let Some(s) = stack.as_deref_mut() {
            s.clear();
        }
        let (mut block, mut level, mut first) = match start {
            Start::CachedRoot => (self.root.load(Ordering::Acquire), None, true),
            Start::MetaRoot => (self.refresh_root()?, None, false),
            Start::Page(block, level) => (block, Some(level), false),
        };
        loop {
            if optimistic && level != Some(0) {
                // An internal page with no pin and no lock (`optimistic_reads`); a leaf,
                // a page that is not in the pool, a read that overlapped a change, or
                // anything unexpected takes the locked path below.
                let step = pool.read_optimistic(self.tag(block), IoContext::Normal, |pg| {
                    OptimisticBtPage(pg).step(key, level, first)
                });
                if let Some(Some(step)) = step {
                    first = false;
                    (block, level) = match step {
                        Step::Down(child, l) => (child, Some(l)),
                        Step::Right(right, l) => (right, Some(l)),
                    };
                    continue;
                }
            }
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
            match at(&p, block)? {
                Visit::Stop(r) => return Ok(r),
                Visit::Go if !p.beyond_high(key) => {
                    debug_assert!(!p.is_leaf(), "a descent went on below leaf {block}");
                    if let Some(s) = stack.as_deref_mut() {
                        s.push(block);
                    }
                    block = self.child_for(&p, block, key)?;
                    level = Some(p.level() - 1);
                }
                Visit::Go | Visit::Right => {
                    block = p.right();
                    level = Some(p.level());
                }
            }
        }
    }

    /// Checks a page reached by a downlink or right link: initialized, at the expected
    /// level (None: any, for the first page of a descent).
    #[inline]
    pub(super) fn check_reached(
        &self,
        p: &BtPage<'_>,
        block: u32,
        level: Option<u16>,
    ) -> Result<(), IndexError> {
        if p.is_new() || level.is_some_and(|l| p.level() != l) || block == META_BLOCK {
            return Err(self.bad_reached(p, block, level));
        }
        Ok(())
    }

    #[cold]
    fn bad_reached(&self, p: &BtPage<'_>, block: u32, level: Option<u16>) -> IndexError {
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
    fn child_for(&self, p: &BtPage<'_>, block: u32, key: Pair) -> Result<u32, IndexError> {
        if p.is_empty() {
            return Err(self.corrupt(format!("internal block {block} has no entries")));
        }
        Ok(p.child(p.child_index(key)))
    }

    /// Reads the root from the meta page into the cache.
    fn refresh_root(&self) -> Result<u32, IndexError> {
        let buf = self.engine.pool().read(self.tag(META_BLOCK))?;
        let g = buf.read();
        let meta = Meta::read(&g).map_err(|e| self.corrupt(format!("block 0: {e}")))?;
        self.root.store(meta.root, Ordering::Release);
        Ok(meta.root)
    }

    /// The first value stored under `key` (the smallest one), if any. Does not allocate.
    pub fn get(&self, key: i64) -> Result<Option<u64>, IndexError> {
        let search = (key, 0);
        self.descend(search, Start::CachedRoot, None, true, |p, _| {
            if !p.is_leaf() || p.beyond_high(search) {
                return Ok(Visit::Go);
            }
            let pos = p.lower_bound(search);
            if pos < p.len() {
                let e = p.entry(pos);
                return Ok(Visit::Stop((e.0 == key).then_some(e.1)));
            }
            // Past the last entry: pairs of this key can follow only if the high key is
            // still one of them (many values of one key spanning pages).
            Ok(match p.high_key() {
                Some(h) if h.0 <= key => Visit::Right,
                _ => Visit::Stop(None),
            })
        })
    }

    /// Calls `f` with every value stored under `key`, in ascending order. `f` runs with no
    /// page lock held. Does not allocate.
    pub fn lookup(&self, key: i64, mut f: impl FnMut(u64)) -> Result<(), IndexError> {
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
    ) -> Result<(), IndexError> {
        self.scan((lo, 0), (hi, u64::MAX), &mut f)
    }

    /// Calls `f` with the pairs in [`lo`, `hi`]: a descent to the leaf covering `lo`, then
    /// batches copied under the leaf's lock and handed to `f` with no lock held, each
    /// resuming (moving right as needed) from the pair after the last one returned.
    fn scan(
        &self,
        lo: Pair,
        hi: Pair,
        f: &mut dyn FnMut(i64, u64) -> bool,
    ) -> Result<(), IndexError> {
        if lo > hi {
            return Ok(());
        }
        let mut cursor = lo;
        let mut start = Start::CachedRoot;
        let mut batch = [(0i64, 0u64); SCAN_BATCH];
        loop {
            let (count, next) = self.descend(cursor, start, None, true, |p, block| {
                if !p.is_leaf() || p.beyond_high(cursor) {
                    return Ok(Visit::Go);
                }
                Ok(Visit::Stop(scan_leaf(p, block, cursor, hi, &mut batch)))
            })?;
            for &(k, v) in &batch[..count] {
                if !f(k, v) {
                    return Ok(());
                }
            }
            let (block, from) = match next {
                Next::Done => return Ok(()),
                Next::Same(block, c) => (block, c),
                Next::Right(right, h) => (right, h),
            };
            cursor = from;
            start = Start::Page(block, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::successor;

    #[test]
    fn successor_steps_the_value_then_the_key() {
        assert_eq!(successor((5, 7)), Some((5, 8)));
        assert_eq!(successor((5, u64::MAX)), Some((6, 0)));
        assert_eq!(successor((-1, u64::MAX)), Some((0, 0)));
        assert_eq!(successor((i64::MAX, 3)), Some((i64::MAX, 4)));
        assert_eq!(successor((i64::MAX, u64::MAX)), None);
    }
}
