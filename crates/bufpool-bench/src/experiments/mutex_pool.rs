//! Baseline for `mutex_pool_ratio_2t`: the simplest correct buffer pool, one
//! `std::sync::Mutex` around a `HashMap<BufferTag, (frame, refcount)>`, over page memory
//! it does not own (the real pool's arena, so both read the very same bytes).
//!
//! A "hit" is: lock, look up, refcount += 1, unlock, read one u64 from the frame, lock,
//! refcount -= 1, unlock. There is no replacement: every page is resident.

use std::collections::HashMap;
use std::sync::Mutex;

use bufpool::BufferTag;

/// The global-mutex pool.
pub struct MutexPool {
    table: Mutex<HashMap<BufferTag, (usize, u32)>>,
    base: *const u8,
    page_size: usize,
    nframes: usize,
}

// SAFETY: the raw pointer only addresses memory that `new`'s contract keeps readable and
// unwritten while the pool lives; the table is behind a Mutex. Sharing `&MutexPool` across threads thus
// only ever performs concurrent reads of immutable bytes and mutex-guarded map updates.
unsafe impl Sync for MutexPool {}

impl MutexPool {
    /// A pool over `nframes` frames of `page_size` bytes starting at `base`, with `entries`
    /// (tag, frame) resident.
    ///
    /// # Safety
    /// `base .. base + nframes * page_size` must stay allocated and readable, and no thread
    /// may write it, for as long as the returned pool lives.
    pub unsafe fn new(
        base: *const u8,
        page_size: usize,
        nframes: usize,
        entries: impl IntoIterator<Item = (BufferTag, usize)>,
    ) -> Self {
        let mut map = HashMap::new();
        for (tag, frame) in entries {
            assert!(
                frame < nframes,
                "frame {frame} out of range ({nframes} frames)"
            );
            map.insert(tag, (frame, 0u32));
        }
        Self {
            table: Mutex::new(map),
            base,
            page_size,
            nframes,
        }
    }

    /// Pins `tag`, reads the little-endian u64 at `offset` of its page, unpins. None if the
    /// page is not resident.
    #[inline]
    pub fn read_u64(&self, tag: &BufferTag, offset: usize) -> Option<u64> {
        assert!(offset + 8 <= self.page_size, "read past the page");
        let frame = {
            let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
            let entry = t.get_mut(tag)?;
            entry.1 += 1;
            entry.0
        };
        debug_assert!(frame < self.nframes);
        // SAFETY: frame < nframes (checked in `new`) and offset + 8 <= page_size, so the
        // 8 bytes lie inside the region `new`'s contract keeps readable and unwritten.
        let raw = unsafe {
            std::ptr::read_unaligned(self.base.add(frame * self.page_size + offset).cast::<u64>())
        };
        {
            let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
            let entry = t.get_mut(tag).expect("a pinned entry stays in the table");
            entry.1 -= 1;
        }
        Some(u64::from_le(raw))
    }

    /// Sum of all refcounts (0 when nobody holds a pin).
    pub fn pinned(&self) -> u64 {
        let t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        t.values().map(|e| u64::from(e.1)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bufpool::{ForkNumber, RelFileId};

    #[test]
    fn reads_the_frame_and_balances_refcounts() {
        let page_size = 64;
        let mut mem = vec![0u8; 4 * page_size];
        mem[2 * page_size + 24..2 * page_size + 32].copy_from_slice(&77u64.to_le_bytes());
        let rel = RelFileId::new(0, 1);
        let tag = BufferTag::new(rel, ForkNumber::Main, 5);
        // SAFETY: `mem` outlives `pool` and is not written while `pool` lives.
        let pool = unsafe { MutexPool::new(mem.as_ptr(), page_size, 4, [(tag, 2)]) };
        assert_eq!(pool.read_u64(&tag, 24), Some(77));
        assert_eq!(
            pool.read_u64(&BufferTag::new(rel, ForkNumber::Main, 6), 24),
            None
        );
        assert_eq!(pool.pinned(), 0);
    }
}
