//! The bottom-up bulk build: [`BTree::bulk_build`].
//!
//! Owns: building a whole index from sorted pairs in private page images, one open page
//! per level (the rightmost one so far), each finished page written to its buffer and
//! logged as a full image once.
//!
//! Invariants: the input is strictly ascending (a repeated pair in a non-unique index is
//! skipped, a repeated key in a unique index fails, anything else unsorted fails): so
//! every level is built left to right as one right-link chain, each page's high key the
//! next page's low key (a truncated separator on the leaf level, as splits make them);
//! a page's downlink goes into the level above when the page is started (a new top level
//! starts with the downlink to the leftmost page below it). The meta page is written last, so a crash during the build leaves a relation
//! that `open` refuses; an error leaves it half-built for the caller to drop.
//!
//! Locks: the relation is new and not yet shared, so no other thread can wait for its
//! pages: each page is locked exclusively only while its finished image is copied in and
//! logged, one page at a time, the meta page last. Pins: the meta page and the open page
//! of every level, for the whole build (plus the page being finished).

use super::page::{
    capacity_for, leaf_separator, BtPage, BtPageMut, Meta, Pair, MIN_PAIR, NO_BLOCK, ROOT,
};
use super::{corrupt_error, BTree, META_BLOCK, NO_XID};
use crate::buffer::BufferRef;
use crate::config::ConfigError;
use crate::engine::EngineRef;
use crate::index::IndexError;
use crate::sync::{AtomicBool, AtomicU32, Ordering};
use crate::types::{ForkNumber, RelFileId};

/// Entries between two progress reports of a bulk build.
const PROGRESS_EVERY: u64 = 1 << 16;

impl<'e> BTree<'e> {
    /// Builds an index bottom-up from pairs in ascending order: leaves filled to
    /// `fillfactor` percent (10..=100), internal pages too (at least two entries), every
    /// page logged as a full image once finished, the meta page last (so a crash during
    /// the build leaves a relation that `open` refuses). Unsorted input fails with
    /// IndexCorrupt, a repeated key in a unique index with DuplicateKey (a repeated pair
    /// in a non-unique index is skipped, as `insert` would); the relation is then left
    /// half-built for the caller to drop. `progress` gets the number of entries every
    /// 65536 entries and at the end.
    pub fn bulk_build(
        engine: impl Into<EngineRef<'e>>,
        rel: RelFileId,
        unique: bool,
        sorted: impl Iterator<Item = (i64, u64)>,
        fillfactor: u8,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Self, IndexError> {
        if !(10..=100).contains(&fillfactor) {
            return Err(ConfigError::new("fillfactor", fillfactor, "10..100 (percent)").into());
        }
        let engine = engine.into();
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
            engine: engine.clone(),
            rel,
            unique,
            root: AtomicU32::new(NO_BLOCK),
            interrupt_split: AtomicBool::new(false),
        };
        let target = |level: usize| {
            let cap = capacity_for(page_size, level.min(1) as u16);
            (cap * usize::from(fillfactor) / 100).max(2).min(cap)
        };
        let mut levels = vec![tree.bulk_page(0)?];
        let mut prev: Option<Pair> = None;
        let mut count = 0u64;
        for e in sorted {
            if let Some(p) = prev {
                if unique && e.0 == p.0 {
                    return Err(IndexError::DuplicateKey {
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
                BtPageMut::new(image).set_flags(f | ROOT);
            }
            tree.bulk_write(buf, image)?;
        }
        let root = levels[top].0.tag().block;
        drop(levels); // its pins borrow `tree`, returned below
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
    fn bulk_page(&self, level: u16) -> Result<(BufferRef<'_>, Vec<u8>), IndexError> {
        let buf = self.engine.pool().extend(self.rel, ForkNumber::Main)?;
        let mut image = vec![0u8; self.engine.pool().page_size()];
        BtPageMut::new(&mut image).init(level, 0);
        Ok((buf, image))
    }

    /// Copies a finished page into its buffer and logs it whole.
    fn bulk_write(&self, buf: &BufferRef<'_>, image: &[u8]) -> Result<(), IndexError> {
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
    fn bulk_add<'t>(
        &'t self,
        levels: &mut Vec<(BufferRef<'t>, Vec<u8>)>,
        level: usize,
        key: Pair,
        child: u32,
        target: &dyn Fn(usize) -> usize,
    ) -> Result<(), IndexError> {
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
            BtPageMut::new(&mut done).set_right(Some((next_block, sep)));
            self.bulk_write(&done_buf, &done)?;
            if level + 1 == levels.len() {
                let mut parent = self.bulk_page(level as u16 + 1)?;
                BtPageMut::new(&mut parent.1).push(MIN_PAIR, done_buf.tag().block);
                levels.push(parent);
            }
            self.bulk_add(levels, level + 1, sep, next_block, target)?;
        }
        let pushed = BtPageMut::new(&mut levels[level].1).push(key, child);
        debug_assert!(pushed);
        Ok(())
    }
}
