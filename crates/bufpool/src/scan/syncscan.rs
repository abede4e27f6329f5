//! Synchronized scans (seed 003 step 2; PostgreSQL's syncscan.c): a small shared table of
//! where recent large sequential scans are, or ended, per relation fork. A new large scan
//! starts at the reported block instead of block 0 and wraps around, so two scans of one
//! table that overlap in time read its pages once between them instead of twice: the
//! second rides just behind the first, finding the pages the first one just read.
//!
//! Owns: [`ScanPositions`], a most-recently-used list of at most
//! [`SYNC_SCAN_ENTRIES`] `(relation fork, block)` pairs.
//!
//! Invariants: at most one entry per relation fork; the list never grows beyond its
//! capacity (the least recently used entry is dropped); nothing is allocated after
//! [`ScanPositions::new`]. A start position is only a hint: a scan started at `s` reads
//! `s..n` then `0..s`, so it returns the same set of tuples as a scan from 0, in a different
//! order. A reported block beyond the relation's current end starts the scan at 0.
//!
//! Locks: one mutex around the list, never held across I/O. [`ScanPositions::start`]
//! waits for it (once per scan); [`ScanPositions::report`] only tries it: a scan that
//! finds it busy skips this report (the next one comes [`REPORT_INTERVAL_BYTES`] later),
//! so scans never queue behind each other here.

use crate::sync::Mutex;
use crate::types::{BlockNumber, ForkNumber, RelFileId};

/// Positions kept (PostgreSQL's SYNC_SCAN_NELEM: enough for the large scans one system
/// runs at once; a relation not scanned recently falls off the end).
pub const SYNC_SCAN_ENTRIES: usize = 20;

/// A scan reports its position once per this many bytes of pages (PostgreSQL's
/// SYNC_SCAN_REPORT_INTERVAL, 128 kB): often enough that a follower starts within a few
/// pages of the leader (the OS's readahead window), rarely enough that the lock is cold.
pub const REPORT_INTERVAL_BYTES: usize = 128 * 1024;

/// Which relation fork an entry is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    rel: RelFileId,
    fork: ForkNumber,
}

/// The shared table of scan positions (see the module doc).
#[derive(Debug)]
pub struct ScanPositions {
    /// Most recently used first; `len() <= capacity` always.
    list: Mutex<Vec<(Key, BlockNumber)>>,
    capacity: usize,
}

impl Default for ScanPositions {
    fn default() -> Self {
        Self::new(SYNC_SCAN_ENTRIES)
    }
}

impl ScanPositions {
    /// A table of at most `capacity` (at least 1) positions.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        ScanPositions {
            list: Mutex::new(Vec::with_capacity(capacity)),
            capacity,
        }
    }

    /// Where a large scan of `rel`'s `fork`, now `nblocks` long, should start: the last
    /// reported block if it is inside the relation, else 0. Marks the fork as most
    /// recently used (a first scan registers it at 0, as PostgreSQL does).
    pub fn start(&self, rel: RelFileId, fork: ForkNumber, nblocks: BlockNumber) -> BlockNumber {
        let mut list = self.list.lock();
        let block = Self::touch(&mut list, self.capacity, Key { rel, fork }, None);
        if block < nblocks {
            block
        } else {
            0
        }
    }

    /// Records that a scan of `rel`'s `fork` is at `block` (about to read it, or ended
    /// there). Skipped when another scan holds the lock; returns whether it was recorded.
    pub fn report(&self, rel: RelFileId, fork: ForkNumber, block: BlockNumber) -> bool {
        match self.list.try_lock() {
            Some(mut list) => {
                Self::touch(&mut list, self.capacity, Key { rel, fork }, Some(block));
                true
            }
            None => false,
        }
    }

    /// The recorded position of `rel`'s `fork`, if any (for tests and reports).
    pub fn position(&self, rel: RelFileId, fork: ForkNumber) -> Option<BlockNumber> {
        let key = Key { rel, fork };
        self.list.lock().iter().find(|e| e.0 == key).map(|e| e.1)
    }

    /// Moves `key` to the front, setting its block to `set` (or keeping it; 0 for a new
    /// entry), and returns the block now recorded. Allocation-free: the vector never grows
    /// beyond the capacity reserved in `new`.
    fn touch(
        list: &mut Vec<(Key, BlockNumber)>,
        capacity: usize,
        key: Key,
        set: Option<BlockNumber>,
    ) -> BlockNumber {
        let at = match list.iter().position(|e| e.0 == key) {
            Some(i) => i,
            None => {
                if list.len() == capacity {
                    list.pop();
                }
                list.push((key, 0));
                list.len() - 1
            }
        };
        list[..=at].rotate_right(1);
        if let Some(b) = set {
            list[0].1 = b;
        }
        debug_assert!(list.len() <= capacity);
        list[0].1
    }

    /// Blocks between reports for pages of `page_size` bytes (at least 1).
    pub fn report_interval(page_size: usize) -> BlockNumber {
        (REPORT_INTERVAL_BYTES / page_size.max(1)).max(1) as BlockNumber
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: RelFileId = RelFileId::new(0, 1);
    const B: RelFileId = RelFileId::new(0, 2);
    const MAIN: ForkNumber = ForkNumber::Main;

    #[test]
    fn a_first_scan_starts_at_zero_and_a_second_where_the_first_is() {
        let p = ScanPositions::default();
        assert_eq!(p.start(A, MAIN, 1000), 0);
        assert_eq!(p.position(A, MAIN), Some(0));
        assert!(p.report(A, MAIN, 480));
        assert_eq!(p.start(A, MAIN, 1000), 480);
        assert_eq!(p.start(B, MAIN, 1000), 0, "positions are per relation");
    }

    #[test]
    fn a_position_past_the_end_starts_at_zero() {
        let p = ScanPositions::default();
        p.report(A, MAIN, 900);
        assert_eq!(p.start(A, MAIN, 500), 0, "the table was truncated since");
        assert_eq!(p.start(A, MAIN, 901), 900);
    }

    #[test]
    fn the_least_recently_used_entry_falls_off() {
        let p = ScanPositions::new(3);
        for i in 1..=3 {
            p.report(RelFileId::new(0, i), MAIN, i * 10);
        }
        // Touch relation 1 so relation 2 becomes the oldest.
        assert_eq!(p.start(RelFileId::new(0, 1), MAIN, 100), 10);
        p.report(RelFileId::new(0, 4), MAIN, 40);
        assert_eq!(p.position(RelFileId::new(0, 2), MAIN), None);
        for (i, b) in [(1, 10), (3, 30), (4, 40)] {
            assert_eq!(p.position(RelFileId::new(0, i), MAIN), Some(b));
        }
        assert!(p.list.lock().len() <= 3);
        assert!(p.list.lock().capacity() <= 3, "never reallocated");
    }

    #[test]
    fn a_report_never_waits_for_the_lock() {
        let p = ScanPositions::default();
        let held = p.list.lock();
        assert!(!p.report(A, MAIN, 7), "skipped while the lock is held");
        drop(held);
        assert!(p.report(A, MAIN, 7));
        assert_eq!(p.position(A, MAIN), Some(7));
    }

    #[test]
    fn the_report_interval_is_128_kb_of_pages() {
        assert_eq!(ScanPositions::report_interval(8192), 16);
        assert_eq!(ScanPositions::report_interval(4096), 32);
        assert_eq!(ScanPositions::report_interval(1 << 20), 1);
    }
}
