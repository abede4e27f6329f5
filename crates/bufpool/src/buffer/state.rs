//! The buffer state word: reference count, usage count and flags packed in one `u64`, so a
//! pin is one compare-and-swap.
//!
//! ```text
//! bits  0..32  reference count (pins, all threads)
//! bits 32..36  usage count, 0..=USAGE_COUNT_MAX (clock-sweep "recently used" credit)
//! bit  40      LOCKED            buffer header lock (short critical sections, spun on)
//! bit  41      DIRTY             page differs from storage
//! bit  42      VALID             page contents are loaded and usable
//! bit  43      TAG_VALID         the tag names a page and the mapping table points here
//! bit  44      IO_IN_PROGRESS    a read or write of this page is under way
//! bit  45      IO_ERROR          the last I/O failed
//! bit  46      JUST_DIRTIED      dirtied since the current write started
//! bit  47      CHECKPOINT_NEEDED must be written by the checkpoint in progress
//! bit  48      BGWRITER_CLEANED  last made clean by a bgwriter write, not reused or
//!                                dirtied since (so a later dirtying marks a wasted write)
//! bits 49..51  ring kind         which kind of ring loaded the page (RING_MASK)
//! bit  51      RETIRED           past the pool's active size (`resize.rs`): holds no page
//!                                and one pin of its own, so no victim search takes it
//! ```
//!
//! States and transitions (function in `buffer/mod.rs` or `descriptor.rs` that performs
//! each):
//! - free: TAG_VALID clear, refcount 0 → (`BufferPool::load` retags a victim) mapped with
//!   IO_IN_PROGRESS, pinned by the loader, who owns the read.
//! - mapped, !VALID, no I/O (a failed read left IO_ERROR) → (`start_io`, read) IO_IN_PROGRESS.
//! - IO_IN_PROGRESS for a read → (`terminate_io` ok) VALID | (`terminate_io` failed)
//!   IO_ERROR; waiters wake and re-check. A read run's claims (`read_run.rs`) end the same
//!   way in `terminate_read`, on the I/O engine's thread, one page at a time.
//! - VALID → (`BufferDesc::mark_dirty`, exclusive content lock held) DIRTY | JUST_DIRTIED.
//! - DIRTY → (`start_io`, write) IO_IN_PROGRESS, JUST_DIRTIED cleared → (`terminate_io` ok)
//!   DIRTY cleared unless JUST_DIRTIED was set again | (failed) IO_ERROR, still DIRTY.
//! - refcount 0 → (`BufferDesc::pin`) refcount + 1, usage + 1 (capped); → (`unpin`) back.
//!   Through a ring (`BufferDesc::pin_ring`): refcount + 1, usage 0 → 1 only.
//! - refcount 0, usage > 0 → (`sweep_visit`) usage − 1; usage 0 → pinned as a
//!   victim, written if DIRTY, retagged by `load` only if still refcount 1 and clean.
//! - mapped, refcount 0 → (`BufferPool::drop_buffers`) free (state word 0, on the free list).
//! - free or mapped, refcount 0 → (`BufferPool::resize` shrinking, `resize.rs`) pinned,
//!   written if DIRTY, unmapped: RETIRED with one pin (stale lock-free lookups add and
//!   drop pins of their own); → (`resize` growing) state 0, on the free list.
//! - clean after a bgwriter write → (`bgwriter/writes.rs`, `mark_cleaned`) BGWRITER_CLEANED; cleared
//!   by `mark_dirty` (counted as a wasted write) or by the retag in `load`.
//!
//! Invariants: a buffer with refcount > 0 is never retagged or invalidated (retag needs
//! refcount == 1, the evictor's own pin, checked under the header lock); IO_IN_PROGRESS is
//! only set by a thread holding a pin; a !VALID buffer is never DIRTY; the usage count
//! never exceeds `USAGE_COUNT_MAX`; BGWRITER_CLEANED is never set on a DIRTY buffer.

use crate::sync::{AtomicU64, Ordering};

/// One pin.
pub const REFCOUNT_ONE: u64 = 1;
pub const REFCOUNT_MASK: u64 = 0xFFFF_FFFF;
/// One unit of usage count.
pub const USAGE_ONE: u64 = 1 << 32;
pub const USAGE_SHIFT: u32 = 32;
pub const USAGE_MASK: u64 = 0xF << USAGE_SHIFT;
/// Usage count cap: PostgreSQL's BM_MAX_USAGE_COUNT. Higher values let hot pages survive
/// more sweep passes, but make the sweep slower to find victims when all pages are hot.
pub const USAGE_COUNT_MAX: u64 = 5;

pub const LOCKED: u64 = 1 << 40;
pub const DIRTY: u64 = 1 << 41;
pub const VALID: u64 = 1 << 42;
pub const TAG_VALID: u64 = 1 << 43;
pub const IO_IN_PROGRESS: u64 = 1 << 44;
pub const IO_ERROR: u64 = 1 << 45;
pub const JUST_DIRTIED: u64 = 1 << 46;
pub const CHECKPOINT_NEEDED: u64 = 1 << 47;
pub const BGWRITER_CLEANED: u64 = 1 << 48;
/// Which kind of ring loaded the page the buffer holds (0: none; `RingKind::state_bits`),
/// set when the buffer is retagged and cleared with the tag. Read only by the buffer-cache
/// views and the report's pool heatmap, never to decide anything.
pub const RING_SHIFT: u32 = 49;
pub const RING_MASK: u64 = 0b11 << RING_SHIFT;
/// Past the pool's active size (`resize.rs`): no page, one pin held by the pool itself.
pub const RETIRED: u64 = 1 << 51;

const _: () = assert!(USAGE_COUNT_MAX < 16, "usage count must fit its 4 bits");
const _: () = assert!(REFCOUNT_MASK & USAGE_MASK == 0 && USAGE_MASK & LOCKED == 0);

#[inline]
pub fn refcount(s: u64) -> u64 {
    s & REFCOUNT_MASK
}

#[inline]
pub fn usage(s: u64) -> u64 {
    (s & USAGE_MASK) >> USAGE_SHIFT
}

/// The state after one more pin: refcount + 1 and usage + 1 up to the cap.
#[inline]
pub fn pinned(s: u64) -> u64 {
    let s = s + REFCOUNT_ONE;
    if usage(s) < USAGE_COUNT_MAX {
        s + USAGE_ONE
    } else {
        s
    }
}

/// The state after one more pin taken through a ring (an access strategy): refcount + 1,
/// and usage raised from 0 to 1 but never above (PostgreSQL's rule for strategy pins, so a
/// page one bulk operation touched stays cheap for the clock to take).
#[inline]
pub fn ring_pinned(s: u64) -> u64 {
    let s = s + REFCOUNT_ONE;
    if usage(s) == 0 {
        s + USAGE_ONE
    } else {
        s
    }
}

/// What a sweep did at one buffer ([`sweep_visit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    Busy,
    Decremented,
    /// Pinned as a victim; carries the new state.
    Pinned(u64),
}

/// The clock sweep's visit to the buffer whose state word is `word`: if unpinned with usage
/// credit left, takes one unit and returns `Visit::Decremented`; if unpinned with none, pins
/// it (refcount 0 → 1) and returns `Visit::Pinned`; if pinned or header-locked,
/// `Visit::Busy`. A free function over the word, so a replacement policy runs the same code
/// on the pool's descriptors and on a trace replay's frames.
#[inline]
pub fn sweep_visit(word: &AtomicU64) -> Visit {
    let s = word.load(Ordering::Relaxed);
    if s & LOCKED != 0 || refcount(s) != 0 {
        return Visit::Busy;
    }
    if usage(s) > 0 {
        // A lost race just means someone pinned it meanwhile: it stays hot.
        let _ = word.compare_exchange(s, s - USAGE_ONE, Ordering::Relaxed, Ordering::Relaxed);
        Visit::Decremented
    } else if word
        .compare_exchange(s, s + REFCOUNT_ONE, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
    {
        Visit::Pinned(s + REFCOUNT_ONE)
    } else {
        Visit::Busy
    }
}

/// Human-readable flags, for errors and `check_invariants` messages.
pub fn describe(s: u64) -> String {
    let mut out = format!("refcount={} usage={}", refcount(s), usage(s));
    for (bit, name) in [
        (LOCKED, "LOCKED"),
        (DIRTY, "DIRTY"),
        (VALID, "VALID"),
        (TAG_VALID, "TAG_VALID"),
        (IO_IN_PROGRESS, "IO_IN_PROGRESS"),
        (IO_ERROR, "IO_ERROR"),
        (JUST_DIRTIED, "JUST_DIRTIED"),
        (CHECKPOINT_NEEDED, "CHECKPOINT_NEEDED"),
        (BGWRITER_CLEANED, "BGWRITER_CLEANED"),
        (1 << RING_SHIFT, "RING_BIT0"),
        (2 << RING_SHIFT, "RING_BIT1"),
        (RETIRED, "RETIRED"),
    ] {
        if s & bit != 0 {
            out.push(' ');
            out.push_str(name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_caps_usage_and_counts_refs() {
        let mut s = 0;
        for _ in 0..10 {
            s = pinned(s);
        }
        assert_eq!(refcount(s), 10);
        assert_eq!(usage(s), USAGE_COUNT_MAX);
        assert_eq!(usage(ring_pinned(0)), 1);
        assert_eq!(usage(ring_pinned(USAGE_ONE)), 1);
        assert_eq!(
            usage(ring_pinned(3 * USAGE_ONE)),
            3,
            "a ring pin never lowers"
        );
        assert_eq!(
            describe(s | DIRTY | VALID),
            "refcount=10 usage=5 DIRTY VALID"
        );
    }
}
