//! Optimistic reads: a page read with no pin and no content lock, then validated by the
//! page's version (vmcache's and LeanStore's optimistic latches; a seqlock per buffer).
//!
//! Owns: [`BufferPool::read_optimistic`] and [`OptimisticPage`], the view it hands its
//! closure. Why: a read hit otherwise writes the buffer's descriptor four times (pin,
//! shared lock, unlock, unpin); on the pages every reader passes (a B-tree's root and
//! inner pages) those writes bounce one cache line between the cores. An optimistic read
//! writes nothing (bar a usage count below its cap).
//!
//! Protocol (the descriptor's `version`, `descriptor.rs`): a write guard makes the
//! version odd when it first hands out the bytes mutably and even again when it drops;
//! a retag (before it stores the new tag) and every header unlock that clears VALID move
//! it on by 2, before anything can write into the frame (a read into it, zeroing,
//! releasing its memory). A reader takes the version (even, else it gives up), checks
//! that the buffer holds `tag`, is VALID and its header unlocked, reads, and takes the
//! version again after an acquire fence: equal, nothing
//! overlapped its reads and what it computed stands; else it is thrown away and the
//! caller takes the locked path. The frame's memory stays mapped and readable for the
//! pool's life (a released frame reads as zeros), so a read that will fail its check still
//! reads memory it may read.
//!
//! What a reader may read meanwhile: bytes a writer is changing. [`OptimisticPage`] reads
//! them only as aligned 8-byte relaxed atomic loads, each value once, so no bound is
//! checked on one load and used from another; out-of-range or unaligned offsets read as
//! zero. The closure must treat every value as possibly torn: no panic, no unbounded loop,
//! no allocation sized by one. Rust's memory model counts an atomic load racing a
//! non-atomic store as a data race, as it does for every seqlock written in Rust (the
//! language has no atomic memcpy); the loads are plain machine loads on every
//! target the crate builds for, and nothing computed from a read that overlapped a write
//! is used. That is why it is a knob (`optimistic_reads`), measured on and off.
//!
//! Not covered: bytes changed under a shared lock (heap tuples' hint bits): callers read
//! only pages whose bytes change under the exclusive lock (B-tree pages). A read while
//! the pool is being traced takes the locked path, so traces stay complete.

use super::state::{LOCKED, TAG_VALID, VALID};
use super::BufferPool;
use crate::stats::{IoContext, IoOp};
use crate::types::BufferTag;

/// A page's bytes as an optimistic reader sees them (see the module's text).
#[derive(Clone, Copy)]
pub struct OptimisticPage<'a> {
    base: *const u8,
    len: usize,
    _frame: std::marker::PhantomData<&'a [u8]>,
}

impl std::fmt::Debug for OptimisticPage<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OptimisticPage({} bytes)", self.len)
    }
}

impl OptimisticPage<'_> {
    /// The page size.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the page has no bytes (never, for a pool's page).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The little-endian word at byte `off` (a multiple of 8), read once; 0 when `off` is
    /// unaligned or the word does not fit in the page.
    #[inline]
    pub fn u64_at(&self, off: usize) -> u64 {
        if off % 8 != 0 || off.checked_add(8).is_none_or(|end| end > self.len) {
            return 0;
        }
        // SAFETY: `off + 8 <= len`, so the word lies in this page's frame, which stays
        // mapped and readable while the pool lives (the `'a` borrow of the pool); frames
        // are page-aligned, so an offset that is a multiple of 8 is an 8-aligned address.
        // A writer may be changing these bytes (see the module's text): the load is
        // atomic, so the value is read once and whole, and the caller's version check
        // throws away whatever a racing write produced.
        let word = unsafe {
            std::sync::atomic::AtomicU64::from_ptr(self.base.add(off).cast_mut().cast())
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        u64::from_le(word)
    }
}

impl BufferPool {
    /// Reads page `tag` with no pin and no lock: calls `f` on the page's bytes if the page
    /// is in the pool and valid, and returns what `f` computed if no write and no eviction
    /// overlapped the call; `None` otherwise, and always with `optimistic_reads` off or
    /// while the pool is traced (the caller then takes the locked path). A hit is counted
    /// under `context`, as a pinned one is, and raises the page's usage count as a pin
    /// would. `f` must take every value it reads as possibly torn (see the module's text)
    /// and may run more than once for one call of the caller's (never here).
    #[inline]
    pub fn read_optimistic<R>(
        &self,
        tag: BufferTag,
        context: IoContext,
        f: impl FnOnce(OptimisticPage<'_>) -> R,
    ) -> Option<R> {
        if !self.optimistic_reads || self.trace.on() {
            return None;
        }
        let id = self
            .mapping
            .lookup_optimistic(&self.descs, &tag, tag.hash64())?;
        let d = &self.descs[id as usize];
        let before = d.version_before_read();
        if before & 1 != 0 {
            return None;
        }
        // Not while the header is locked: a retag puts the buffer on the new tag's chain
        // and sets the new tag before it clears VALID.
        let s = d.load_state();
        if s & (TAG_VALID | VALID | LOCKED) != (TAG_VALID | VALID) || !d.tag_is(&tag) {
            return None;
        }
        let page = OptimisticPage {
            // The frame's address only: nothing is read until `f` reads.
            base: self.arena.frame(id).cast_const(),
            len: self.page_size,
            _frame: std::marker::PhantomData,
        };
        let r = f(page);
        if d.version_after_read() != before {
            return None;
        }
        d.touch(s);
        self.smgr.stats().count(context, IoOp::Hit, 1);
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use crate::buffer::BufferPool;
    use crate::config::Config;
    use crate::stats::IoContext;
    use crate::sync::Arc;
    use crate::types::{BufferTag, ForkNumber, RelFileId};
    use crate::vfs::{MemVfs, Vfs};

    const REL: RelFileId = RelFileId::new(0, 7);

    fn pool(optimistic: bool) -> BufferPool {
        let mut c = Config::default();
        c.set("shared_buffers", "16").unwrap();
        c.set("block_size", "4kB").unwrap();
        c.set("optimistic_reads", if optimistic { "on" } else { "off" })
            .unwrap();
        let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
        let p = BufferPool::open(vfs, std::path::Path::new("/d"), &c, true).unwrap();
        p.create_relation(REL, ForkNumber::Main).unwrap();
        p
    }

    fn tag(block: u32) -> BufferTag {
        BufferTag::new(REL, ForkNumber::Main, block)
    }

    /// The word at byte 64 of block `b`, read optimistically.
    fn word(p: &BufferPool, b: u32) -> Option<u64> {
        p.read_optimistic(tag(b), IoContext::Normal, |pg| pg.u64_at(64))
    }

    /// Proves: an optimistic read sees what the last write guard left, fails while a
    /// write guard has changed the bytes and not yet dropped, fails for a page that is not
    /// in the pool or was evicted, never hands out a word past the page or unaligned, and
    /// does nothing with the knob off.
    #[test]
    fn an_optimistic_read_sees_only_finished_writes_of_the_page_it_asked_for() {
        let p = pool(true);
        let b = p.extend(REL, ForkNumber::Main).unwrap();
        b.write()[64..72].copy_from_slice(&41u64.to_le_bytes());
        assert_eq!(word(&p, 0), Some(41));
        {
            let mut g = b.write();
            // Locked but unchanged: readers go on.
            assert_eq!(word(&p, 0), Some(41));
            g[64..72].copy_from_slice(&42u64.to_le_bytes());
            assert_eq!(
                word(&p, 0),
                None,
                "a change in progress must fail the check"
            );
        }
        assert_eq!(word(&p, 0), Some(42));
        // A read that overlaps a change fails even if it read before the change began.
        let overlapped = p.read_optimistic(tag(0), IoContext::Normal, |pg| {
            let w = pg.u64_at(64);
            b.write()[64..72].copy_from_slice(&43u64.to_le_bytes());
            w
        });
        assert_eq!(overlapped, None);
        assert_eq!(word(&p, 0), Some(43));
        let edges = p.read_optimistic(tag(0), IoContext::Normal, |pg| {
            (
                pg.u64_at(4096 - 8),
                pg.u64_at(4096),
                pg.u64_at(usize::MAX - 3),
                pg.u64_at(65),
            )
        });
        assert_eq!(edges, Some((0, 0, 0, 0)));
        assert_eq!(word(&p, 1), None, "block 1 is not in the pool");
        p.flush_all().unwrap();
        drop(b);
        p.drop_buffers(REL, None, 0).unwrap();
        assert_eq!(word(&p, 0), None, "dropped from the pool");
        let off = pool(false);
        let b = off.extend(REL, ForkNumber::Main).unwrap();
        drop(b);
        assert_eq!(word(&off, 0), None, "optimistic_reads = off");
    }

    /// Proves: a read that overlaps the buffer's eviction and reuse for another page fails,
    /// even when the page it asked for is back in the same buffer by the time it checks.
    #[test]
    fn a_read_overlapping_an_eviction_fails() {
        let p = pool(true);
        for _ in 0..40 {
            let b = p.extend(REL, ForkNumber::Main).unwrap();
            let blk = b.tag().block;
            b.write()[64..72].copy_from_slice(&u64::from(blk).to_le_bytes());
        }
        p.flush_all().unwrap();
        let last = 39;
        let got = p.read_optimistic(tag(last), IoContext::Normal, |pg| {
            let w = pg.u64_at(64);
            // Cycle every other page through the 16 buffers, then read ours back in.
            for b in 0..last {
                drop(p.read(tag(b)).unwrap());
            }
            drop(p.read(tag(last)).unwrap());
            w
        });
        assert_eq!(got, None);
        assert_eq!(word(&p, last), Some(u64::from(last)));
    }
}
