//! The dirty map (`bgwriter_strategy = dirty-chain`, Jan Wieck's proposal for 8.0): one
//! bit per buffer, in buffer (clock) order, set when the buffer turns dirty, so the bgwriter
//! can walk only the dirty buffers ahead of the clock hand and pass a clean stretch of the
//! pool at one word load per 64 buffers. A bitmap rather than an intrusive list: setting a
//! bit is one `fetch_or` on the clean → dirty transition (which is followed by a page write
//! anyway), with no list lock and no ordering to maintain.
//!
//! Owns: the bit words. Invariants: a buffer whose DIRTY flag is set has its bit set, except
//! for the instant between the state change and the `fetch_or` in
//! `PageWriteGuard::mark_dirty` (the buffer is then pinned and exclusively locked, so the
//! bgwriter could not clean it anyway). A bit is cleared only under the buffer's header
//! lock while DIRTY is clear (`terminate_io` after a write, or the bgwriter finding a stale
//! bit), and a marker's CAS of DIRTY waits for that lock, so its `fetch_or` comes after
//! the clear: no dirty buffer loses its bit. A set bit on a clean buffer (dropped, or
//! cleaned between the marker's CAS and its `fetch_or`) is harmless: the bgwriter finds
//! the buffer clean and clears it. Locks: none of its own.

use crate::sync::{AtomicU64, Ordering};

#[derive(Debug)]
pub struct DirtyMap {
    words: Box<[AtomicU64]>,
    nbuffers: u64,
}

impl DirtyMap {
    /// The map's words, in bytes (one bit per buffer).
    pub fn heap_bytes(&self) -> usize {
        self.words.len() * std::mem::size_of::<AtomicU64>()
    }

    pub fn new(nbuffers: usize) -> Self {
        Self {
            words: (0..nbuffers.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            nbuffers: nbuffers as u64,
        }
    }

    /// Sets buffer `id`'s bit (after its DIRTY flag was set).
    #[inline]
    pub fn set(&self, id: u32) {
        self.words[id as usize / 64].fetch_or(1 << (id % 64), Ordering::Release);
    }

    /// Clears buffer `id`'s bit; the caller holds its header lock and DIRTY is clear.
    #[inline]
    pub fn clear(&self, id: u32) {
        self.words[id as usize / 64].fetch_and(!(1 << (id % 64)), Ordering::AcqRel);
    }

    /// The first clock position in `from..end` (positions are monotonic; the buffer is
    /// `position % nbuffers`) whose bit is set, and the number of words loaded to find it.
    pub fn next_set(&self, from: u64, end: u64) -> (Option<u64>, u64) {
        let mut pos = from;
        let mut loads = 0;
        while pos < end {
            let id = pos % self.nbuffers;
            let bit = id % 64;
            loads += 1;
            let word = self.words[(id / 64) as usize].load(Ordering::Acquire) >> bit;
            if word != 0 {
                let found = pos + u64::from(word.trailing_zeros());
                // Bits past nbuffers are never set, so `found` is in this lap.
                return (if found < end { Some(found) } else { None }, loads);
            }
            // Skip to the next word, or to the start of the next lap.
            pos += (64 - bit).min(self.nbuffers - id);
        }
        (None, loads)
    }

    /// Buffers whose bit is set (a snapshot).
    #[cfg(test)]
    pub fn count(&self) -> u64 {
        self.words
            .iter()
            .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_set_walks_in_clock_order_across_the_wrap() {
        let m = DirtyMap::new(100);
        for id in [3, 64, 70, 99] {
            m.set(id);
        }
        assert_eq!(m.count(), 4);
        assert_eq!(m.next_set(0, 100).0, Some(3));
        assert_eq!(m.next_set(4, 100).0, Some(64));
        assert_eq!(m.next_set(71, 99).0, None);
        assert_eq!(m.next_set(71, 100).0, Some(99));
        // Positions past the first lap map back to the buffers: 103 is buffer 3.
        assert_eq!(m.next_set(100, 200).0, Some(103));
        assert_eq!(m.next_set(104, 200).0, Some(164));
        m.clear(64);
        assert_eq!(m.next_set(104, 200).0, Some(170));
        // A clean pool is passed a word at a time.
        let clean = DirtyMap::new(6400);
        let (found, loads) = clean.next_set(0, 6400);
        assert_eq!((found, loads), (None, 100));
    }
}
