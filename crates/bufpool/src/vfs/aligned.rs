//! [`AlignedBuf`]: a zeroed heap buffer aligned for O_DIRECT.
//!
//! Owns: one allocation, like a `Box<[u8]>`, aligned to [`IO_ALIGN`]. It lives in the vfs
//! because alignment is a requirement of direct I/O, which only the vfs knows about; the
//! pool's scratch pages and the WAL's ring use it. Locks: none.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// O_DIRECT needs buffers aligned to the logical block size; 4096 covers every device here.
pub const IO_ALIGN: usize = 4096;

/// A zeroed heap buffer aligned to [`IO_ALIGN`], usable with O_DIRECT.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf uniquely owns its allocation, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A buffer of `len` zero bytes (`len` must not be 0).
    pub fn zeroed(len: usize) -> Self {
        assert!(len > 0);
        let layout = Layout::from_size_align(len, IO_ALIGN).expect("valid layout");
        // SAFETY: layout has non-zero size.
        let p = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(p).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        Self { ptr, len }
    }

    /// The buffer's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is a live allocation of len initialized (zeroed) bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The buffer's bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len, IO_ALIGN).expect("valid layout");
        // SAFETY: allocated in `zeroed` with this same layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buf_is_aligned_and_zeroed() {
        let b = AlignedBuf::zeroed(32768);
        assert_eq!(b.as_slice().as_ptr() as usize % IO_ALIGN, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
    }
}
