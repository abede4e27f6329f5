//! The log buffer (`wal_buffers`): the in-memory ring that inserters copy records into
//! and the flush leader writes to the segments from, in place.

use crate::vfs::AlignedBuf;

/// The ring of log bytes: a log position `p` lives at byte `p % len`.
pub(super) struct LogBuffer {
    /// Keeps the allocation alive; all access goes through `base`.
    _mem: AlignedBuf,
    base: *mut u8,
    len: usize,
}

// SAFETY: `base` points into `_mem`, owned by the ring and freed only when it drops; ring
// bytes are written only inside the range a thread reserved (disjoint from
// every other thread's) or, for padding, by the flusher inside the range it reserved; they
// are read by the writer only below the insertion-complete point, after the inserting
// threads' slot stores (Release) were observed (Acquire). No two threads touch a byte at
// once.
unsafe impl Sync for LogBuffer {}

// SAFETY: the ring owns its memory (like a Box); moving it between threads is fine.
unsafe impl Send for LogBuffer {}

impl LogBuffer {
    pub(super) fn new(len: usize) -> Self {
        let mut mem = AlignedBuf::zeroed(len);
        let base = mem.as_mut_slice().as_mut_ptr();
        LogBuffer {
            _mem: mem,
            base,
            len,
        }
    }

    pub(super) fn len(&self) -> u64 {
        self.len as u64
    }

    /// Copies `src` into the ring at log position `pos` (wrapping).
    ///
    /// # Safety
    /// The caller owns `[pos, pos + src.len())`: reserved by it and not yet handed out for
    /// writing, with the previous lap of those ring bytes already written to the segment.
    pub(super) unsafe fn put(&self, pos: u64, src: &[u8]) {
        let n = self.len();
        let mut done = 0;
        while done < src.len() {
            let at = ((pos + done as u64) % n) as usize;
            let k = (src.len() - done).min(n as usize - at);
            // SAFETY: per the contract the caller exclusively owns these bytes; `at + k`
            // stays within the ring's `len` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(src[done..].as_ptr(), self.base.add(at), k);
            }
            done += k;
        }
    }

    /// The longest run of log bytes from `pos` (at most `len`) that is contiguous in the
    /// ring, borrowed in place: the flush leader hands it straight to the segment write
    /// (no copy, no allocation).
    ///
    /// # Safety
    /// Every byte in `[pos, pos + len)` was completely inserted and none is rewritten
    /// while the slice lives (the caller holds the write role: inserters only rewrite ring
    /// bytes below `written`, which only the caller moves, after the write).
    pub(super) unsafe fn contiguous(&self, pos: u64, len: u64) -> &[u8] {
        let at = (pos % self.len()) as usize;
        let k = (len as usize).min(self.len - at);
        // SAFETY: `at + k <= len` bytes of the live allocation; per the contract nobody
        // writes them while the returned borrow lives.
        unsafe { std::slice::from_raw_parts(self.base.add(at), k) }
    }
}

/// A value alone on its cache line: 128 bytes, because x86's adjacent-line prefetcher
/// pulls 64-byte lines in pairs, so two hot words 64 bytes apart still contend
/// (crossbeam's `CachePadded` uses 128 on x86_64 for the same reason).
#[repr(align(128))]
#[derive(Default)]
pub(super) struct Padded<T>(pub(super) T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
