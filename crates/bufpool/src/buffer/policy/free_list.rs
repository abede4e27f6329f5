//! The free list: buffers that hold no page (never used, or dropped with their relation).
//!
//! Owns: a stack of buffer ids and its length as an atomic. Invariants: an id on the list had
//! TAG_VALID clear when it was pushed; a taker re-checks it (a stale lookup may have pinned
//! it meanwhile). Locks: one mutex, taken only when the atomic length says the list is
//! non-empty, so the steady state (empty list) takes no lock.

use crate::sync::{AtomicUsize, Mutex, Ordering};

#[derive(Debug)]
pub(in crate::buffer) struct FreeList {
    ids: Mutex<Vec<u32>>,
    len: AtomicUsize,
}

impl FreeList {
    /// Every buffer of a pool of `nbuffers`, handed out from buffer 0 up.
    #[cfg(test)]
    pub fn full(nbuffers: usize) -> Self {
        Self::first(nbuffers, nbuffers)
    }

    /// Buffers `0..n` of a pool of `capacity` ids, handed out from buffer 0 up; room for
    /// all `capacity` (a pool that grows puts the rest here).
    pub fn first(n: usize, capacity: usize) -> Self {
        // Popped from the end: hand out buffer 0 first.
        let mut ids: Vec<u32> = Vec::with_capacity(capacity);
        ids.extend((0..n as u32).rev());
        Self {
            len: AtomicUsize::new(ids.len()),
            ids: Mutex::new(ids),
        }
    }

    /// The stack's allocation, in bytes (it is allocated full, for every buffer).
    pub fn heap_bytes(&self) -> usize {
        self.ids.lock().capacity() * std::mem::size_of::<u32>()
    }

    pub fn push(&self, id: u32) {
        let mut f = self.ids.lock();
        f.push(id);
        self.len.store(f.len(), Ordering::Release);
    }

    /// A buffer from the list, or `None` when it is empty. Lock-free when it is empty.
    #[inline]
    pub fn pop(&self) -> Option<u32> {
        if self.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut f = self.ids.lock();
        let id = f.pop();
        self.len.store(f.len(), Ordering::Release);
        id
    }

    pub fn is_empty(&self) -> bool {
        self.len.load(Ordering::Acquire) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_from_buffer_zero_and_takes_returns() {
        let f = FreeList::full(3);
        assert_eq!([f.pop(), f.pop()], [Some(0), Some(1)]);
        f.push(0);
        assert_eq!([f.pop(), f.pop(), f.pop()], [Some(0), Some(2), None]);
        assert!(f.is_empty());
    }
}
