//! A concurrent, WAL-logged B+tree: Lehman and Yao's B-link tree on (i64 key, u64 value)
//! pairs, in buffer-pool pages of one relation (main fork). Page layout: `page.rs`.
//!
//! Owns: the relation id, the unique flag and a cached root block number. Block 0 is the
//! meta page (root block and level); every other block is a tree page.
//!
//! Files:
//! - `mod.rs` (this one): the [`BTree`] handle; creating and opening an index.
//! - `search.rs`: the one descent every operation uses, and the reads ([`BTree::get`],
//!   [`BTree::lookup`], [`BTree::range`]).
//! - `split.rs`: the writes ([`BTree::insert`], [`BTree::delete`]): page and root splits,
//!   downlink insertion, and the repair of splits cut short.
//! - `build.rs`: the bottom-up bulk build ([`BTree::bulk_build`]).
//! - `check.rs`: the structure check ([`BTree::check`], [`BTreeStats`]).
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
//! Algorithm: every operation descends from the root holding one page's shared lock at a
//! time (`search.rs`); if the search pair is at or above a page's high key, the page split
//! since its downlink was read, and the descent moves right along the right link. A full
//! page splits in two records: both halves (the left one marked INCOMPLETE_SPLIT), then
//! the downlink into the parent, which clears the flag; a root split is one record
//! (`split.rs`). A crash or an error between the two records leaves a valid B-link tree
//! with one missing downlink, which the next insert passing the flagged page inserts.
//! Every change is logged by [`Engine::log_pages`] while its pages are held, so physical
//! redo restores the tree.
//!
//! Lock order (content locks of the buffers; every file keeps it): lower level before
//! higher level, left before right at one level, the meta page after every tree page it
//! is combined with, and fresh pages last. A thread holding a lock only ever waits for a
//! page to the right on the same level, a page on a higher level, the meta page, or a
//! fresh page; readers and descents hold one lock at a time; so no cycle of waits can
//! form (the argument of PostgreSQL's nbtree README). Each file says which locks it takes.
//!
//! The cached root ([`BTree`] keeps it in an atomic) may be stale: an old root is the
//! leftmost page of its level, whose right-link chain covers every key, so descending
//! from it is still correct. The descent refreshes the cache from the meta page when the
//! page it starts at has lost its ROOT flag; a root split stores the new root.
//!
//! Locks taken here: [`BTree::create`] holds its two fresh pages exclusively (meta page,
//! then root leaf) while it logs them; [`BTree::open`] holds the meta page shared while it
//! reads it.

mod build;
mod check;
pub mod page;
mod search;
mod split;

pub use check::BTreeStats;

use crate::engine::{Engine, EngineRef};
use crate::index::IndexError;
use crate::sync::{AtomicBool, AtomicU32, Ordering};
use crate::types::{BufferTag, ForkNumber, RelFileId};
use page::{BtPageMut, Meta, ROOT};

/// The meta page's block.
const META_BLOCK: u32 = 0;
/// Transaction id of structural records outside any transaction (create, bulk build).
const NO_XID: u32 = 0;

/// A B-link tree index. Share it by reference between threads.
pub struct BTree<'e> {
    engine: EngineRef<'e>,
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

/// Registers this index's structure check with the engine, so [`Engine::verify`] (and
/// the `verify` feature, at shutdown) checks it.
fn register_check(engine: &Engine, rel: RelFileId) {
    engine.register_verifier(
        format!("index {rel}"),
        std::sync::Arc::new(move |e: &Engine| {
            BTree::open(e, rel)
                .and_then(|t| t.check())
                .map(|_| ())
                .map_err(|err| Box::new(err) as crate::engine::VerifyError)
        }),
    );
}

fn corrupt_error(rel: RelFileId, reason: String) -> IndexError {
    IndexError::Corrupt {
        index: rel.to_string(),
        reason,
    }
}

impl<'e> BTree<'e> {
    /// Creates the index relation: block 0 the meta page, block 1 an empty root leaf,
    /// logged as one record.
    pub fn create(
        engine: impl Into<EngineRef<'e>>,
        rel: RelFileId,
        unique: bool,
    ) -> Result<Self, IndexError> {
        let engine = engine.into();
        Self::create_pages(&engine, rel, unique)?;
        register_check(&engine, rel);
        Ok(BTree {
            engine,
            rel,
            unique,
            root: AtomicU32::new(1),
            interrupt_split: AtomicBool::new(false),
        })
    }

    /// Creates the relation's meta page and empty root leaf, logged as one record.
    fn create_pages(engine: &Engine, rel: RelFileId, unique: bool) -> Result<(), IndexError> {
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
        BtPageMut::new(&mut rg).init(0, ROOT);
        engine.log_pages(NO_XID, 0, &mut [(&mut mg, whole), (&mut rg, whole)])?;
        Ok(())
    }

    /// Opens an existing index: reads the meta page.
    pub fn open(engine: impl Into<EngineRef<'e>>, rel: RelFileId) -> Result<Self, IndexError> {
        let engine = engine.into();
        let meta = Self::read_meta(&engine, rel)?;
        register_check(&engine, rel);
        Ok(BTree {
            engine,
            rel,
            unique: meta.unique,
            root: AtomicU32::new(meta.root),
            interrupt_split: AtomicBool::new(false),
        })
    }

    /// Reads the meta page of an existing index.
    fn read_meta(engine: &Engine, rel: RelFileId) -> Result<Meta, IndexError> {
        let pool = engine.pool();
        if pool.nblocks(rel, ForkNumber::Main)? == 0 {
            return Err(corrupt_error(
                rel,
                "the relation has no blocks (no meta page)".into(),
            ));
        }
        let buf = pool.read(BufferTag::new(rel, ForkNumber::Main, META_BLOCK))?;
        let g = buf.read();
        Meta::read(&g).map_err(|e| corrupt_error(rel, format!("block 0: {e}")))
    }

    /// Test hook (fault injection): the next split of a non-root page returns right after
    /// logging the two halves, without inserting the downlink, leaving exactly the state a
    /// crash between the two records leaves. The next insert passing the page repairs it.
    #[cfg(any(test, feature = "testing"))]
    pub fn interrupt_next_split(&self) {
        self.interrupt_split.store(true, Ordering::Relaxed);
    }

    /// The index's relation.
    pub fn rel(&self) -> RelFileId {
        self.rel
    }

    /// The engine this handle works on.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Whether the index refuses a second entry of one key.
    pub fn is_unique(&self) -> bool {
        self.unique
    }

    #[inline]
    fn tag(&self, block: u32) -> BufferTag {
        BufferTag::new(self.rel, ForkNumber::Main, block)
    }

    #[cold]
    fn corrupt(&self, reason: String) -> IndexError {
        corrupt_error(self.rel, reason)
    }
}
