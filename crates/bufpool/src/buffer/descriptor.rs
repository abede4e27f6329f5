//! Buffer descriptors: per-buffer state word, tag, mapping-chain link and content lock.
//!
//! Owns: one cache-line-sized [`BufferDesc`] per buffer. Invariants: see `state.rs`. The tag
//! words change only under the header lock while the changer holds the only pin, so a
//! thread holding a pin reads a stable tag without locking. `hash_next` belongs to the
//! mapping table and changes only under the partition lock of the chain it is on.
//! Locks: the header lock is the LOCKED bit of the state word; it is held for a few
//! instructions, never across I/O or another lock acquisition except a content lock try.
//! Order: mapping partition → header → content lock.

use super::state::*;
use crate::sync::{AtomicU32, AtomicU64, Ordering, RawContentLock, SpinWait};
use crate::types::BufferTag;

/// "No buffer": the end of a mapping chain.
pub const NIL: u32 = u32::MAX;

#[repr(C, align(64))]
pub struct BufferDesc {
    pub(super) state: AtomicU64,
    tag0: AtomicU64,
    tag1: AtomicU64,
    /// Next buffer on this buffer's mapping chain (owned by `mapping.rs`).
    pub(super) hash_next: AtomicU32,
    pub(super) id: u32,
    pub(super) content_lock: RawContentLock,
    /// The replacement policy's word for this buffer (`policy/`: list links).
    pub(super) link: AtomicU64,
    /// The page's version, for reads that hold no pin and no lock (`optimistic.rs`): odd
    /// while a write guard changes the page's bytes, and moved on (by 2) at a retag and
    /// whenever the buffer stops holding a valid page (a header unlock that clears VALID:
    /// eviction, a drop, a retirement), before anything can write into the frame.
    pub(super) version: AtomicU64,
}

#[cfg(not(shuttle))]
const _: () = assert!(
    std::mem::size_of::<BufferDesc>() == 64,
    "descriptor should fill one cache line"
);

impl std::fmt::Debug for BufferDesc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "buffer {} [{}] {}",
            self.id,
            describe(self.state.load(Ordering::Relaxed)),
            self.tag()
        )
    }
}

impl BufferDesc {
    pub fn new(id: u32) -> Self {
        Self {
            state: AtomicU64::new(0),
            tag0: AtomicU64::new(0),
            tag1: AtomicU64::new(0),
            hash_next: AtomicU32::new(NIL),
            id,
            content_lock: RawContentLock::new(),
            link: AtomicU64::new(0),
            version: AtomicU64::new(0),
        }
    }

    /// The tag. Stable while the caller holds a pin or the header lock; otherwise a hint.
    #[inline]
    pub fn tag(&self) -> BufferTag {
        BufferTag::from_words(
            self.tag0.load(Ordering::Acquire),
            self.tag1.load(Ordering::Acquire),
        )
    }

    #[inline]
    pub fn tag_is(&self, tag: &BufferTag) -> bool {
        self.tag0.load(Ordering::Acquire) == tag.word0()
            && self.tag1.load(Ordering::Acquire) == tag.word1()
    }

    /// Sets the tag; the caller holds the header lock and the only pin.
    pub(super) fn set_tag(&self, tag: &BufferTag) {
        let s = self.state.load(Ordering::Relaxed);
        debug_assert!(s & LOCKED != 0, "set_tag without the header lock: {self:?}");
        debug_assert!(
            refcount(s) == 1,
            "set_tag on buffer {} with {} pins (the retagger's must be the only one)",
            self.id,
            refcount(s)
        );
        // An optimistic reader that finds the buffer under the new tag (it is on the new
        // tag's chain before the header is unlocked) must not take the old page's bytes
        // for it: the version moves first (`optimistic.rs`).
        self.move_version();
        self.tag0.store(tag.word0(), Ordering::Release);
        self.tag1.store(tag.word1(), Ordering::Release);
    }

    /// Moves the version on by 2 (it stays even): every optimistic read that took the
    /// version before fails its check. Release: a reader that sees the new version sees
    /// the header lock this holder took; the fence: one that sees any store after this
    /// one (a tag, a frame's bytes) sees the new version at its check.
    #[inline]
    fn move_version(&self) {
        self.version.fetch_add(2, Ordering::AcqRel);
        crate::sync::fence(Ordering::Release);
    }

    #[inline]
    pub fn load_state(&self) -> u64 {
        self.state.load(Ordering::Acquire)
    }

    /// Spins until the header lock is free; returns the unlocked state seen.
    #[inline]
    fn wait_unlocked(&self) -> u64 {
        let mut spin = SpinWait::new();
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & LOCKED == 0 {
                return s;
            }
            spin.spin();
        }
    }

    /// Takes the header lock; returns the state (with LOCKED set).
    pub fn lock_header(&self) -> u64 {
        let mut spin = SpinWait::new();
        loop {
            let old = self.state.fetch_or(LOCKED, Ordering::Acquire);
            if old & LOCKED == 0 {
                return old | LOCKED;
            }
            while self.state.load(Ordering::Relaxed) & LOCKED != 0 {
                spin.spin();
            }
        }
    }

    /// Releases the header lock, storing `state` (LOCKED cleared).
    pub fn unlock_header(&self, state: u64) {
        debug_assert!(
            self.state.load(Ordering::Relaxed) & LOCKED != 0,
            "header not locked"
        );
        // The state word's invariants (state.rs), checked at every store of the whole word.
        debug_assert!(
            state & DIRTY == 0 || state & VALID != 0,
            "buffer {} left dirty but not valid: {}",
            self.id,
            describe(state)
        );
        debug_assert!(
            usage(state) <= USAGE_COUNT_MAX
                && state & (DIRTY | BGWRITER_CLEANED) != DIRTY | BGWRITER_CLEANED,
            "buffer {} left with usage over {USAGE_COUNT_MAX} or cleaned while dirty: {}",
            self.id,
            describe(state)
        );
        // The state this holder locked (nobody else stores the word while LOCKED is set).
        if state & VALID == 0 && self.state.load(Ordering::Relaxed) & VALID != 0 {
            // The buffer stops holding a valid page: its frame may be written (read into,
            // zeroed, released) from here on, so an optimistic reader that started before
            // must fail its check (`optimistic.rs`). A buffer that was not VALID has no
            // such reader (they check VALID first).
            self.move_version();
        }
        self.state.store(state & !LOCKED, Ordering::Release);
    }

    /// A write guard is about to change the page's bytes: the version turns odd
    /// (optimistic readers fail until [`BufferDesc::end_change`]). The caller holds the
    /// content lock exclusively, so no other thread changes the version's parity meanwhile.
    #[inline]
    pub(super) fn begin_change(&self) {
        self.version.fetch_add(1, Ordering::Relaxed);
        crate::sync::fence(Ordering::Release);
    }

    /// The write guard's changes are done (it still holds the exclusive lock): the
    /// version turns even again, published after the bytes.
    #[inline]
    pub(super) fn end_change(&self) {
        self.version.fetch_add(1, Ordering::Release);
    }

    /// The version as an optimistic reader takes it before reading (Acquire: the bytes
    /// read after are at least as new as this version).
    #[inline]
    pub(super) fn version_before_read(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The version as an optimistic reader takes it after reading: equal to the one before
    /// only if no change and no eviction overlapped the read.
    #[inline]
    pub(super) fn version_after_read(&self) -> u64 {
        crate::sync::fence(Ordering::Acquire);
        self.version.load(Ordering::Relaxed)
    }

    /// Raises the usage count of a page an optimistic reader used, as a pin would, with one
    /// try and no write at all once the count is at its cap (a hot page's usual state), so
    /// optimistic hits keep the clock's and the lists' view of the page without bouncing
    /// its cache line.
    #[inline]
    pub(super) fn touch(&self, seen: u64) {
        if usage(seen) < USAGE_COUNT_MAX && seen & LOCKED == 0 {
            let _ = self.state.compare_exchange(
                seen,
                seen + USAGE_ONE,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// Adds a pin (and usage credit); waits out a held header lock. Returns the new state.
    #[inline]
    pub fn pin(&self) -> u64 {
        self.pin_by(pinned)
    }

    /// Adds a pin for a ring (access strategy): usage goes from 0 to 1, never higher
    /// ([`ring_pinned`]). Returns the new state.
    #[inline]
    pub fn pin_ring(&self) -> u64 {
        self.pin_by(ring_pinned)
    }

    #[inline]
    fn pin_by(&self, next: impl Fn(u64) -> u64) -> u64 {
        let mut old = self.state.load(Ordering::Relaxed);
        loop {
            if old & LOCKED != 0 {
                old = self.wait_unlocked();
            }
            // A refcount carried into the usage bits would corrupt the state word.
            debug_assert!(
                refcount(old) < REFCOUNT_MASK,
                "refcount overflow pinning buffer {}",
                self.id
            );
            let new = next(old);
            match self
                .state
                .compare_exchange_weak(old, new, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return new,
                Err(x) => old = x,
            }
        }
    }

    /// Drops a pin; waits out a held header lock (whose holder stores the whole word).
    #[inline]
    pub fn unpin(&self) {
        let mut old = self.state.load(Ordering::Relaxed);
        loop {
            if old & LOCKED != 0 {
                old = self.wait_unlocked();
            }
            debug_assert!(refcount(old) > 0, "unpin of unpinned {self:?}");
            match self.state.compare_exchange_weak(
                old,
                old - REFCOUNT_ONE,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(x) => old = x,
            }
        }
    }

    /// Sets DIRTY and JUST_DIRTIED (clearing BGWRITER_CLEANED); the caller holds a pin and
    /// the exclusive content lock. Returns the state before: DIRTY clear means the dirty
    /// map (if any) needs the bit; BGWRITER_CLEANED set means a bgwriter write was wasted.
    #[inline]
    pub fn mark_dirty(&self) -> u64 {
        let mut old = self.state.load(Ordering::Relaxed);
        loop {
            debug_assert!(
                refcount(old) > 0 && old & VALID != 0,
                "mark_dirty on {self:?}"
            );
            if old & (DIRTY | JUST_DIRTIED) == (DIRTY | JUST_DIRTIED) {
                return old;
            }
            if old & LOCKED != 0 {
                old = self.wait_unlocked();
            }
            match self.state.compare_exchange_weak(
                old,
                (old | DIRTY | JUST_DIRTIED) & !BGWRITER_CLEANED,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return old,
                Err(x) => old = x,
            }
        }
    }
}
