//! Pins and content-lock guards: the only way callers touch page memory.
//!
//! [`BufferRef`] is a pin: while it lives the buffer keeps its page (never evicted or
//! retagged). [`PageReadGuard`] and [`PageWriteGuard`] borrow a `BufferRef` and hold its
//! content lock shared or exclusive; only they hand out the page bytes. A write guard marks
//! the buffer dirty the first time the page is borrowed mutably.
//! Invariants: a `BufferRef` exists only for a VALID buffer; page bytes are reachable only
//! through a guard, so every `&[u8]` coexists only with other `&[u8]` (shared lock) and a
//! `&mut [u8]` is unique (exclusive lock).

use std::ops::{Deref, DerefMut};

use super::state::{DIRTY, VALID};
use super::{BufferPool, BufferResult};
use crate::page;
use crate::types::{BufferTag, Lsn};
use crate::waits::{self, Wait};

/// A pinned buffer.
pub struct BufferRef<'a> {
    pub(super) pool: &'a BufferPool,
    pub(super) id: u32,
}

impl std::fmt::Debug for BufferRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BufferRef({:?})", self.pool.descs[self.id as usize])
    }
}

impl<'a> BufferRef<'a> {
    /// The page this buffer holds (stable while pinned).
    pub fn tag(&self) -> BufferTag {
        self.pool.descs[self.id as usize].tag()
    }

    /// The buffer's number in the pool.
    pub fn buffer_id(&self) -> u32 {
        self.id
    }

    /// Takes the content lock shared.
    #[inline]
    pub fn read(&self) -> PageReadGuard<'_> {
        let d = &self.pool.descs[self.id as usize];
        if !d.content_lock.try_lock_shared() {
            waits::timed(Wait::ContentLock, || d.content_lock.lock_shared());
        }
        debug_assert!(
            d.load_state() & VALID != 0,
            "page bytes of a buffer that is not VALID: {d:?}"
        );
        // SAFETY: we hold the pin (self) and now the content lock shared; the slice lives in
        // the guard, which releases the lock only when dropped, after the last use.
        let page = unsafe { self.pool.page_slice(self.id) };
        PageReadGuard { buf: self, page }
    }

    /// Takes the content lock exclusively.
    #[inline]
    pub fn write(&self) -> PageWriteGuard<'_> {
        let d = &self.pool.descs[self.id as usize];
        if !d.content_lock.try_lock_exclusive() {
            waits::timed(Wait::ContentLock, || d.content_lock.lock_exclusive());
        }
        debug_assert!(
            d.load_state() & VALID != 0,
            "page bytes of a buffer that is not VALID: {d:?}"
        );
        PageWriteGuard {
            buf: self,
            dirtied: false,
            dirtied_clean: false,
            changing: false,
        }
    }

    /// Takes the content lock exclusively if it is free right now; never waits (for
    /// callers that already hold another page's lock and must not risk a cycle).
    #[inline]
    pub fn try_write(&self) -> Option<PageWriteGuard<'_>> {
        let d = &self.pool.descs[self.id as usize];
        d.content_lock.try_lock_exclusive().then(|| PageWriteGuard {
            buf: self,
            dirtied: false,
            dirtied_clean: false,
            changing: false,
        })
    }

    /// Writes the page out if it is dirty (taking the content lock shared); returns whether
    /// it wrote. Must not be called while this thread holds a guard on this buffer.
    pub fn flush(&self) -> BufferResult<bool> {
        let _g = self.read();
        self.pool
            .flush_locked(self.id, crate::stats::IoContext::Normal)
    }
}

impl Drop for BufferRef<'_> {
    #[inline]
    fn drop(&mut self) {
        self.pool.descs[self.id as usize].unpin();
    }
}

/// Shared access to a page.
pub struct PageReadGuard<'b> {
    buf: &'b BufferRef<'b>,
    page: &'b [u8],
}

impl PageReadGuard<'_> {
    /// The page's tag.
    pub fn tag(&self) -> BufferTag {
        self.buf.tag()
    }
    /// The page LSN: the WAL record that last changed the page.
    pub fn lsn(&self) -> Lsn {
        page::lsn(self.page)
    }
}

impl Deref for PageReadGuard<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.page
    }
}

impl Drop for PageReadGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: this guard took the lock shared in `BufferRef::read` and gives it up once.
        unsafe {
            self.buf.pool.descs[self.buf.id as usize]
                .content_lock
                .unlock_shared()
        };
    }
}

/// Exclusive access to a page; mutable access marks the buffer dirty.
pub struct PageWriteGuard<'b> {
    buf: &'b BufferRef<'b>,
    dirtied: bool,
    /// This guard found the buffer clean and made it dirty (VACUUM's cost accounting).
    dirtied_clean: bool,
    /// This guard has handed out the bytes mutably, so the page's version is odd until
    /// it drops (optimistic readers, `optimistic.rs`, fail meanwhile).
    changing: bool,
}

impl PageWriteGuard<'_> {
    /// The page's tag.
    pub fn tag(&self) -> BufferTag {
        self.buf.tag()
    }

    /// The page LSN: the WAL record that last changed the page.
    pub fn lsn(&self) -> Lsn {
        page::lsn(self)
    }

    /// Sets the page LSN (the WAL record that changed the page); marks the page dirty.
    pub fn set_lsn(&mut self, lsn: Lsn) {
        page::set_lsn(self, lsn);
    }

    /// Marks the buffer dirty without changing bytes.
    pub fn mark_dirty(&mut self) {
        let before = self.buf.pool.descs[self.buf.id as usize].mark_dirty();
        if before & DIRTY == 0 {
            // Clean before (the dirty map needs the bit), and perhaps cleaned in vain.
            self.buf.pool.bgwriter.note_dirty(self.buf.id, before);
            self.dirtied_clean = true;
        }
        self.dirtied = true;
    }

    /// Whether this guard found the buffer clean and dirtied it (PostgreSQL charges VACUUM
    /// for such pages: `vacuum_cost_page_dirty`).
    pub fn dirtied_clean_page(&self) -> bool {
        self.dirtied_clean
    }

    /// Writes the page out now if dirty, keeping the exclusive lock. The next change
    /// through this guard marks the buffer dirty again (the write cleaned it).
    pub fn flush(&mut self) -> BufferResult<bool> {
        self.dirtied = false;
        self.buf
            .pool
            .flush_locked(self.buf.id, crate::stats::IoContext::Normal)
    }
}

impl Deref for PageWriteGuard<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: this guard holds the pin and the exclusive content lock; the shared borrow
        // of self prevents a simultaneous `deref_mut`.
        unsafe { self.buf.pool.page_slice(self.buf.id) }
    }
}

impl DerefMut for PageWriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        if !self.dirtied {
            self.mark_dirty();
        }
        if !self.changing {
            self.buf.pool.descs[self.buf.id as usize].begin_change();
            self.changing = true;
        }
        // No write can clear DIRTY while this guard holds the exclusive lock (a write takes
        // the content lock before claiming the I/O), so a change made now reaches storage.
        debug_assert!(
            self.buf.pool.descs[self.buf.id as usize].load_state() & DIRTY != 0,
            "a page borrowed mutably is not dirty: {:?}",
            self.buf.pool.descs[self.buf.id as usize]
        );
        // SAFETY: this guard holds the content lock exclusively and the pin (through
        // `buf`), so no other reference to the frame exists, and `&mut self` makes this one
        // unique among the guard's own borrows.
        unsafe { self.buf.pool.page_slice_mut(self.buf.id) }
    }
}

impl Drop for PageWriteGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        let d = &self.buf.pool.descs[self.buf.id as usize];
        if self.changing {
            d.end_change();
        }
        // SAFETY: this guard took the lock exclusively in `BufferRef::write` and gives it up.
        unsafe { d.content_lock.unlock_exclusive() };
    }
}

#[cfg(test)]
mod tests {
    use super::super::checkpoint::tests::{is_dirty, pool, stored};
    use crate::sync::Arc;
    use crate::types::{BufferTag, ForkNumber, RelFileId};
    use crate::vfs::MemVfs;

    /// Proves: a write guard that flushed its page mid-way still marks the buffer dirty on
    /// its next change, so that change reaches storage (it was lost: `flush` cleared the
    /// buffer's dirty bit but not the guard's note that it had set it).
    #[test]
    fn a_change_after_a_guard_flushed_its_page_dirties_it_again() {
        let p = pool(Arc::new(MemVfs::new()), 16);
        let rel = RelFileId::new(0, 12);
        p.create_relation(rel, ForkNumber::Main).unwrap();
        let b = p.extend(rel, ForkNumber::Main).unwrap();
        let tag = BufferTag::new(rel, ForkNumber::Main, 0);
        {
            let mut g = b.write();
            crate::page::init(&mut g, 0);
            g[100] = 1;
            assert!(g.flush().unwrap(), "the first change is written");
            g[100] = 2;
        }
        assert!(is_dirty(&p, tag), "the second change left the buffer clean");
        p.flush_all().unwrap();
        assert_eq!(stored(&p, rel, 0)[100], 2);
    }
}
