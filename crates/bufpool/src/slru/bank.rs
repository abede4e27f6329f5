//! One bank of SLRU slots: up to [`BANK_SIZE`] page slots with their page states, the
//! bank's lock, its LRU counter and its counters (PostgreSQL 17's SLRU banks).
//!
//! Owns: the slots' page numbers, states, dirty flags and page images (inside `lock`), each
//! slot's last-use stamp and I/O lock (outside it), the bank's LRU counter, a last-hit hint
//! and the bank's hit/read/zeroed counters. The bank is cache-line aligned so two banks'
//! counters never share a line.
//!
//! Page states, each transition with the function in `slru/mod.rs` that makes it (always
//! under the bank lock held exclusively):
//! ```text
//!   Empty ──(read-in starts: slot_for)──▶ ReadInProgress ──(read done: slot_for)──▶ Valid
//!     ▲                                         │ (read failed)                      │ ▲
//!     └─────────────────────────────────────────┘                                   │ │
//!     ▲ (truncate, slot_for victim re-use)        (write-out starts: write_slot, flush)│
//!     └──────────── Valid ◀──(write done or failed: write_slot, flush)── WriteInProgress
//!   Empty/Valid (clean) ──(zero_page)──▶ Valid + dirty, no I/O
//! ```
//! Invariants: a page number is in at most one slot of the SLRU, and only in its bank; a
//! slot in ReadInProgress or WriteInProgress has its I/O lock held by the thread doing the
//! I/O (taken while it held the bank lock, released after it set the next state and before
//! it let the bank lock go); the image of a ReadInProgress slot is never looked at; a
//! WriteInProgress slot may be read and changed (its write uses a copy taken when the state
//! was set; a change sets `dirty` again); the slot holding the SLRU's latest page is never
//! chosen as a victim.
//! Locks: `lock` (shared for a hit, exclusive for everything else) before a slot's `io`
//! lock. A thread waiting for another's I/O lets the bank lock go first, then takes and
//! drops the slot's I/O lock, then takes the bank lock again; a thread doing I/O never
//! holds the bank lock across the I/O.

use crate::sync::{AtomicU64, AtomicUsize, Mutex, Ordering, RwLock};

/// Slots per bank: PostgreSQL 17's SLRU_BANK_SIZE.
pub const BANK_SIZE: usize = 16;

/// The state of a slot's page (PostgreSQL's SlruPageStatus).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageState {
    /// No page.
    Empty,
    /// A thread is reading the page in; its image is not valid yet.
    ReadInProgress,
    /// The image is the page (dirty or clean).
    Valid,
    /// A thread is writing a copy of the image out; the image stays valid.
    WriteInProgress,
}

/// One slot's description, under the bank lock.
#[derive(Debug, Clone, Copy)]
pub(super) struct SlotMeta {
    pub pageno: u64,
    pub state: PageState,
    pub dirty: bool,
}

/// What the bank lock protects.
#[derive(Debug)]
pub(super) struct BankInner {
    pub slots: Vec<SlotMeta>,
    /// Page images, `page_size` bytes per slot.
    pub data: Vec<u8>,
}

impl BankInner {
    /// The slot holding `pageno` (in any state but Empty). Lock held (either mode) at
    /// entry and exit.
    pub fn lookup(&self, pageno: u64, hint: usize) -> Option<usize> {
        if self
            .slots
            .get(hint)
            .is_some_and(|s| s.pageno == pageno && s.state != PageState::Empty)
        {
            return Some(hint);
        }
        self.slots
            .iter()
            .position(|s| s.pageno == pageno && s.state != PageState::Empty)
    }

    /// The image of slot `s`.
    pub fn page(&self, s: usize, page_size: usize) -> &[u8] {
        &self.data[s * page_size..(s + 1) * page_size]
    }

    pub fn page_mut(&mut self, s: usize, page_size: usize) -> &mut [u8] {
        &mut self.data[s * page_size..(s + 1) * page_size]
    }

    /// Checks the invariants a bank can check alone (used by tests).
    pub fn check_invariants(&self) -> Result<(), crate::invariants::Violations> {
        let mut v = crate::invariants::Violations::default();
        for (i, a) in self.slots.iter().enumerate() {
            if a.state == PageState::Empty {
                v.check(!a.dirty, || format!("empty slot {i} is dirty"));
                continue;
            }
            for b in &self.slots[i + 1..] {
                v.check(b.state == PageState::Empty || b.pageno != a.pageno, || {
                    format!("page {} in two slots", a.pageno)
                });
            }
        }
        v.into_result()
    }
}

/// Where a miss puts its page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Victim {
    /// An empty slot, or a clean valid one: usable at once.
    Free(usize),
    /// The least recently used page is dirty: write it first.
    Dirty(usize),
    /// Every candidate is in I/O: wait for this one.
    Busy(usize),
}

/// One bank.
#[derive(Debug)]
#[repr(align(128))]
pub(super) struct Bank {
    pub lock: RwLock<BankInner>,
    /// Held by the thread doing a slot's I/O (see the module doc).
    pub io: Vec<Mutex<()>>,
    /// Last-use stamps, from the LRU counter in force (the bank's or the SLRU's).
    pub lru: Vec<AtomicU64>,
    /// This bank's LRU counter (design `banks_locks_lru`).
    pub counter: AtomicU64,
    /// The slot of the last hit: checked first.
    pub last_hit: AtomicUsize,
    pub hits: AtomicU64,
    pub reads: AtomicU64,
    pub zeroed: AtomicU64,
}

impl Bank {
    pub fn new(nslots: usize, page_size: usize) -> Bank {
        assert!(nslots >= 2, "a bank needs at least two slots");
        Bank {
            lock: RwLock::new(BankInner {
                slots: vec![
                    SlotMeta {
                        pageno: 0,
                        state: PageState::Empty,
                        dirty: false,
                    };
                    nslots
                ],
                data: vec![0u8; nslots * page_size],
            }),
            io: (0..nslots).map(|_| Mutex::new(())).collect(),
            lru: (0..nslots).map(|_| AtomicU64::new(0)).collect(),
            counter: AtomicU64::new(0),
            last_hit: AtomicUsize::new(0),
            hits: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            zeroed: AtomicU64::new(0),
        }
    }

    pub fn nslots(&self) -> usize {
        self.io.len()
    }

    /// Stamps slot `s` as just used from `counter` (PostgreSQL's SlruRecentlyUsed: the
    /// stamp is only written when it changes, to spare the cache line). Bank lock held
    /// (either mode) at entry and exit.
    pub fn used(&self, s: usize, counter: &AtomicU64) {
        let now = counter.fetch_add(1, Ordering::Relaxed) + 1;
        if self.lru[s].load(Ordering::Relaxed) != now {
            self.lru[s].store(now, Ordering::Relaxed);
        }
        if self.last_hit.load(Ordering::Relaxed) != s {
            self.last_hit.store(s, Ordering::Relaxed);
        }
    }

    /// The slot a miss should use: an empty slot, else the least recently used slot not
    /// in I/O and not holding `latest` (clean: Free, dirty: Dirty), else a slot in I/O to
    /// wait for. Bank lock held exclusively at entry and exit.
    pub fn victim(&self, inner: &BankInner, latest: u64) -> Victim {
        if let Some(s) = inner.slots.iter().position(|s| s.state == PageState::Empty) {
            return Victim::Free(s);
        }
        let best = (0..inner.slots.len())
            .filter(|&s| {
                inner.slots[s].state == PageState::Valid && inner.slots[s].pageno != latest
            })
            .min_by_key(|&s| self.lru[s].load(Ordering::Relaxed));
        match best {
            Some(s) if inner.slots[s].dirty => Victim::Dirty(s),
            Some(s) => Victim::Free(s),
            None => Victim::Busy(
                (0..inner.slots.len())
                    .find(|&s| inner.slots[s].state != PageState::Valid)
                    .unwrap_or(0),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn victim_prefers_empty_then_lru_and_spares_the_latest_page() {
        let b = Bank::new(3, 64);
        let c = AtomicU64::new(0);
        let mut g = b.lock.write();
        assert_eq!(b.victim(&g, 0), Victim::Free(0));
        for (s, p) in [(0, 10u64), (1, 11), (2, 12)] {
            g.slots[s] = SlotMeta {
                pageno: p,
                state: PageState::Valid,
                dirty: s == 1,
            };
            b.used(s, &c);
        }
        g.check_invariants().unwrap();
        assert_eq!(b.victim(&g, 99), Victim::Free(0));
        assert_eq!(b.victim(&g, 10), Victim::Dirty(1), "page 10 is the latest");
        b.used(1, &c);
        assert_eq!(b.victim(&g, 10), Victim::Free(2));
        for s in 0..3 {
            g.slots[s].state = PageState::ReadInProgress;
        }
        assert!(matches!(b.victim(&g, 10), Victim::Busy(_)));
        assert_eq!(g.lookup(11, 0), Some(1));
        assert_eq!(g.lookup(13, 0), None);
    }
}
