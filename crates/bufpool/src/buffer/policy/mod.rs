//! Replacement: which buffer a miss takes (`buffer_replacement`).
//!
//! Owns: [`Replacement`], the free list of buffers that hold no page, the count of
//! allocations (the bgwriter's demand estimate and hibernation handshake), and the chosen
//! policy. Every policy keeps its hit record in the state word's usage bits, set by the
//! pin's own compare-and-swap (`state::pinned`), so the hit path never calls a policy and
//! costs the same whichever is chosen; a policy runs only on a miss (`victim`, `retagged`),
//! when a buffer is freed (`forget`), and in the bgwriter. A policy reaches buffers only through
//! [`Frames`] (their state words), so the same code runs on the pool's descriptors and on a
//! trace replay's frames.
//! Invariants: a victim is returned pinned (refcount includes the caller's pin); the free
//! list is taken before the policy; no policy waits forever: one that meets only busy
//! buffers for [`BUSY_LAPS_MAX`] passes over the pool reports [`AllPinned`].
//! Locks: the free list's mutex (only when non-empty); the clock takes none.

mod car;
mod clock;
mod cooling;
mod free_list;
mod ghost;
mod list;
mod queues;
mod s3fifo;
mod sieve;
mod twoq;

use super::descriptor::BufferDesc;
use super::state::{sweep_visit, Visit, USAGE_ONE};
use crate::sync::{AtomicU64, Ordering};
use car::Car;
use clock::Clock;
use cooling::Cooling;
use free_list::FreeList;
use s3fifo::S3Fifo;
use sieve::Sieve;
use twoq::TwoQ;

/// Consecutive all-busy passes before a policy reports that every buffer is pinned. Three
/// passes with a yield between them outlast any transient pin; a pool that is really all
/// pinned costs 3 x nbuffers cheap visits to report.
pub const BUSY_LAPS_MAX: u32 = 3;

/// Every buffer was pinned (or header-locked) for [`BUSY_LAPS_MAX`] passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllPinned;

/// The buffers a policy chooses among, by id: the pool's descriptors, or a replay's frames.
pub(crate) trait Frames {
    /// Buffer `id`'s state word (see `state.rs`).
    fn state(&self, id: u32) -> &AtomicU64;
    /// Buffer `id`'s policy word (list links), owned by the policy.
    fn link(&self, id: u32) -> &AtomicU64;
    fn len(&self) -> usize;
}

impl Frames for [BufferDesc] {
    #[inline]
    fn state(&self, id: u32) -> &AtomicU64 {
        &self[id as usize].state
    }
    #[inline]
    fn link(&self, id: u32) -> &AtomicU64 {
        &self[id as usize].link
    }
    fn len(&self) -> usize {
        <[BufferDesc]>::len(self)
    }
}

/// The replacement policies `buffer_replacement` chooses among.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplacementPolicy {
    /// The clock sweep over usage counts (PostgreSQL 8.1 and later).
    #[default]
    Clock,
    /// SIEVE (NSDI 2024): one list, a visited mark, new pages at the head.
    Sieve,
    /// S3-FIFO (SOSP 2023): a small FIFO for new pages, a main FIFO, a ghost queue.
    S3Fifo,
    /// CAR (Bansal and Modha, FAST 2004), the clock form of ARC (PostgreSQL 8.0's policy):
    /// ARC's lists for pages seen once and twice, their ghost lists and adaptive target,
    /// with a hit marked by a bit as a clock does instead of a move to a list's head (which
    /// would put a list lock on the hit path). Named CAR, not ARC, for that difference
    /// (the knob said `arc` before 2026-12-07).
    Car,
    /// 2Q (PostgreSQL 8.0.2): a FIFO for new pages, a ghost FIFO, a clock for pages
    /// wanted again.
    TwoQ,
    /// A cooling stage (LeanStore): pages admitted cool, evicted unless used while cooling.
    Cooling,
}

impl ReplacementPolicy {
    /// Every policy, in the knob's word order.
    pub const ALL: [ReplacementPolicy; 6] = [
        ReplacementPolicy::Clock,
        ReplacementPolicy::Sieve,
        ReplacementPolicy::S3Fifo,
        ReplacementPolicy::Car,
        ReplacementPolicy::TwoQ,
        ReplacementPolicy::Cooling,
    ];

    /// The knob's word for it.
    pub fn name(self) -> &'static str {
        match self {
            ReplacementPolicy::Clock => "clock",
            ReplacementPolicy::Sieve => "sieve",
            ReplacementPolicy::S3Fifo => "s3fifo",
            ReplacementPolicy::Car => "car",
            ReplacementPolicy::TwoQ => "2q",
            ReplacementPolicy::Cooling => "cooling",
        }
    }

    /// Whether the policy keeps a list of frequently used pages apart from new ones (the
    /// list `bgwriter_lists = frequent` cleans alone).
    pub fn has_frequent_list(self) -> bool {
        matches!(
            self,
            ReplacementPolicy::S3Fifo | ReplacementPolicy::Car | ReplacementPolicy::TwoQ
        )
    }
}

/// Heap memory a policy's own state holds (its ghost lists), beyond the policy word each
/// descriptor carries.
pub(in crate::buffer) trait HeapBytes {
    /// Bytes allocated now.
    fn heap_bytes(&self) -> usize;
}

impl HeapBytes for () {
    fn heap_bytes(&self) -> usize {
        0
    }
}

/// An allocation count on a cache line of its own (every miss adds to it).
#[repr(align(64))]
#[derive(Debug)]
struct Allocations(AtomicU64);

enum Policy {
    Clock(Clock),
    Sieve(Sieve),
    S3Fifo(S3Fifo),
    Car(Car),
    TwoQ(TwoQ),
    Cooling(Cooling),
}

/// A match on the policy with one arm for the four two-list policies (`queues.rs`), whose
/// types differ only in their rule.
macro_rules! dispatch {
    ($policy:expr, clock $c:pat => $ce:expr, sieve $s:pat => $se:expr, lists $q:ident => $qe:expr) => {
        match $policy {
            Policy::Clock($c) => $ce,
            Policy::Sieve($s) => $se,
            Policy::S3Fifo($q) => $qe,
            Policy::Car($q) => $qe,
            Policy::TwoQ($q) => $qe,
            Policy::Cooling($q) => $qe,
        }
    };
}

/// The free list, the allocation count and the chosen policy.
pub(crate) struct Replacement {
    free: FreeList,
    allocs: Allocations,
    policy: Policy,
    nbuffers: u64,
    /// Buffers in use (`buffer/resize.rs`): ids from here on are retired. The pool's size.
    active: AtomicU64,
}

impl std::fmt::Debug for Replacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replacement")
            .field("policy", &self.kind())
            .field("allocations", &self.allocations())
            .finish_non_exhaustive()
    }
}

impl Replacement {
    /// `kind` over `nbuffers` buffers, all of them on the free list.
    pub fn new(kind: ReplacementPolicy, nbuffers: usize) -> Self {
        Self::with_active(kind, nbuffers, nbuffers)
    }

    /// `kind` over `nbuffers` buffer ids of which the first `active` are in use and on the
    /// free list; the rest are retired (`buffer/resize.rs`).
    pub fn with_active(kind: ReplacementPolicy, nbuffers: usize, active: usize) -> Self {
        assert!(active <= nbuffers, "{active} buffers in use of {nbuffers}");
        // Ids are u32, and the clock's hand is taken modulo nbuffers.
        assert!(
            nbuffers > 0 && nbuffers <= u32::MAX as usize,
            "replacement over {nbuffers} buffers"
        );
        let policy = match kind {
            ReplacementPolicy::Clock => Policy::Clock(Clock::new(nbuffers)),
            ReplacementPolicy::Sieve => Policy::Sieve(Sieve::new()),
            ReplacementPolicy::S3Fifo => Policy::S3Fifo(s3fifo::s3fifo(nbuffers)),
            ReplacementPolicy::Car => Policy::Car(car::car(nbuffers)),
            ReplacementPolicy::TwoQ => Policy::TwoQ(twoq::two_q(nbuffers)),
            ReplacementPolicy::Cooling => Policy::Cooling(cooling::cooling(nbuffers)),
        };
        Self {
            free: FreeList::first(active, nbuffers),
            allocs: Allocations(AtomicU64::new(0)),
            policy,
            nbuffers: nbuffers as u64,
            active: AtomicU64::new(active as u64),
        }
    }

    pub fn kind(&self) -> ReplacementPolicy {
        match self.policy {
            Policy::Clock(_) => ReplacementPolicy::Clock,
            Policy::Sieve(_) => ReplacementPolicy::Sieve,
            Policy::S3Fifo(_) => ReplacementPolicy::S3Fifo,
            Policy::Car(_) => ReplacementPolicy::Car,
            Policy::TwoQ(_) => ReplacementPolicy::TwoQ,
            Policy::Cooling(_) => ReplacementPolicy::Cooling,
        }
    }

    /// Finds a victim for an allocation and returns it pinned (refcount includes the
    /// caller's pin) with its state after pinning: the free list first, then the policy.
    #[inline]
    pub fn victim<F: Frames + ?Sized>(&self, frames: &F) -> Result<(u32, u64), AllPinned> {
        // SeqCst (the same `lock xadd` on x86 as Relaxed): the allocation must be ordered
        // before the caller's check of the bgwriter's hibernation flag.
        self.count_allocation();
        while let Some(id) = self.free.pop() {
            // A free buffer may have been pinned meanwhile by a stale lookup; then skip it.
            if let Visit::Pinned(s) = sweep_visit(frames.state(id)) {
                return Ok((id, s));
            }
        }
        dispatch!(&self.policy,
            clock c => c.victim(frames, &self.active),
            sieve s => s.victim(frames),
            lists q => q.victim(frames))
    }

    /// The usage bits a retagged victim starts with: the clock's is PostgreSQL's usage 1
    /// on load; the others' new page is unmarked (unused, unreferenced, cool).
    #[inline]
    pub fn admit_usage(&self) -> u64 {
        match self.policy {
            Policy::Clock(_) => USAGE_ONE,
            _ => 0,
        }
    }

    /// Buffer `id`, a victim, now holds the page whose tag hashes to `new`; before, the
    /// page hashed `old`, if it held one. Called once the tag is set, with no partition or
    /// header lock held.
    #[inline]
    pub fn retagged<F: Frames + ?Sized>(&self, frames: &F, id: u32, old: Option<u64>, new: u64) {
        dispatch!(&self.policy,
            clock _ => {},
            sieve s => s.retagged(frames, id),
            lists q => q.retagged(frames, id, old, new))
    }

    /// Buffer `id` is losing its page (`drop_buffers`, which holds its header lock): off
    /// the policy's lists. Under the header lock, so no victim search takes the buffer
    /// between this and the invalidation (a locked buffer is passed as busy).
    pub fn forget<F: Frames + ?Sized>(&self, frames: &F, id: u32) {
        dispatch!(&self.policy,
            clock _ => {},
            sieve s => s.freed(frames, id),
            lists q => q.freed(frames, id))
    }

    /// Ids from `active` on are retired (`buffer/resize.rs`): the clock's hand skips
    /// them; the list policies never see them (they are on no list).
    pub fn set_active(&self, active: usize) {
        self.active.store(active as u64, Ordering::Release);
    }

    /// Buffers in use: the pool's size (ids from here on are retired).
    #[inline]
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed) as usize
    }

    /// Returns a buffer to the free list (after invalidation and [`Replacement::forget`]).
    pub fn push_free(&self, id: u32) {
        self.free.push(id);
    }

    /// Checks the policy's own structures against the frames (quiescent pool).
    pub fn check_invariants<F: Frames + ?Sized>(&self, frames: &F) -> Result<(), String> {
        dispatch!(&self.policy,
            clock _ => Ok(()),
            sieve s => s.check(frames),
            lists q => q.check(frames))
    }

    /// The highest usage count at which buffer `id` would be evicted where it stands: what
    /// the bgwriter's LRU scan may clean as reusable. 0 (unused since the search passed)
    /// but for S3-FIFO's small queue (used once) and 2Q's A1in (any use).
    pub fn evicts_up_to<F: Frames + ?Sized>(&self, frames: &F, id: u32) -> u64 {
        dispatch!(&self.policy,
            clock _ => 0,
            sieve _ => 0,
            lists q => q.evicts_up_to(frames, id))
    }

    /// Whether the free list holds buffers (an allocation should take those first).
    pub fn has_free(&self) -> bool {
        !self.free.is_empty()
    }

    /// Heap the replacement state holds beyond the descriptors, in bytes: the free list's
    /// stack and the policy's ghost lists (their capacity now). The clock and the list
    /// policies keep everything else in each descriptor's state and policy words.
    pub fn heap_bytes(&self) -> (usize, usize) {
        let policy = dispatch!(&self.policy, clock _ => 0, sieve _ => 0, lists q => q.heap_bytes());
        (self.free.heap_bytes(), policy)
    }

    /// Buffers allocated so far. SeqCst: the bgwriter's hibernation re-check reads it after
    /// raising its flag (see `bgwriter/mod.rs`, "Hibernation").
    pub fn allocations(&self) -> u64 {
        self.allocs.0.load(Ordering::SeqCst)
    }

    /// Counts an allocation served outside [`Replacement::victim`] (the victim queue).
    /// SeqCst for the hibernation handshake, like the count in `victim`.
    pub fn count_allocation(&self) {
        self.allocs.0.fetch_add(1, Ordering::SeqCst);
    }

    /// The position the bgwriter scans ahead of: buffers the clock's hand has passed. A
    /// list policy's search walks its lists, not the ids: there it is the count of its
    /// steps, and the bgwriter cleans in the order [`Replacement::lru_order`] gives.
    pub fn hand(&self) -> u64 {
        dispatch!(&self.policy,
            clock c => c.hand(),
            sieve s => s.steps(),
            lists q => q.steps())
    }

    /// (completed passes, next buffer) of the clock's hand (for a list policy, of its
    /// steps).
    pub fn position(&self) -> (u64, u64) {
        match &self.policy {
            Policy::Clock(c) => c.position(),
            _ => (self.hand() / self.nbuffers, self.hand() % self.nbuffers),
        }
    }

    /// For a list policy, up to `max` buffers in the order its search will come to them
    /// (the tails of its lists, taken in turn; with `frequent_only`, the frequent list's
    /// alone): what the bgwriter cleans, as PostgreSQL 8.0's did from the LRU ends of
    /// ARC's T1 and T2. None for the clock, whose order is the ids from its hand.
    pub fn lru_order<F: Frames + ?Sized>(
        &self,
        frames: &F,
        frequent_only: bool,
        max: usize,
    ) -> Option<Vec<u32>> {
        let mut out = Vec::with_capacity(max.min(frames.len()));
        dispatch!(&self.policy,
            clock _ => return None,
            sieve s => s.lru_order(frames, max, &mut out),
            lists q => q.lru_order(frames, frequent_only, max, &mut out));
        Some(out)
    }

    /// One step of the victim search on behalf of the bgwriter's victim queue: a victim
    /// if the step took one (pinned, with its state). Not an allocation (not counted).
    pub fn sweep_step<F: Frames + ?Sized>(&self, frames: &F) -> Option<(u32, u64)> {
        dispatch!(&self.policy,
            clock c => match c.step(frames, &self.active) {
                (id, Visit::Pinned(s)) => Some((id, s)),
                _ => None,
            },
            sieve s => s.step_once(frames),
            lists q => q.step_once(frames))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::state::{refcount, usage, REFCOUNT_ONE, TAG_VALID};

    /// State words (index 0..n) and link words (n..2n).
    pub(crate) struct Words(pub Vec<AtomicU64>);

    impl std::ops::Index<usize> for Words {
        type Output = AtomicU64;
        fn index(&self, i: usize) -> &AtomicU64 {
            &self.0[i]
        }
    }

    impl Words {
        fn iter(&self) -> impl Iterator<Item = &AtomicU64> {
            self.0[..self.0.len() / 2].iter()
        }
    }

    impl Frames for Words {
        fn state(&self, id: u32) -> &AtomicU64 {
            &self.0[id as usize]
        }
        fn link(&self, id: u32) -> &AtomicU64 {
            &self.0[self.0.len() / 2 + id as usize]
        }
        fn len(&self) -> usize {
            self.0.len() / 2
        }
    }

    fn frames(n: u32) -> Words {
        Words((0..2 * n).map(|_| AtomicU64::new(0)).collect())
    }

    #[test]
    fn free_list_first_then_the_sweep_takes_credit_before_it_evicts() {
        let f = frames(3);
        let r = Replacement::new(ReplacementPolicy::Clock, 3);
        for want in 0..3 {
            let (id, s) = r.victim(&f).unwrap();
            assert_eq!((id, refcount(s)), (want, 1));
            f[id as usize].store(r.admit_usage(), Ordering::Relaxed);
        }
        assert!(!r.has_free());
        // Buffer 1 hot (usage 3): one lap takes a unit from each, the next evicts 0.
        f[1].store(3 * USAGE_ONE, Ordering::Relaxed);
        assert_eq!(r.victim(&f).unwrap().0, 0);
        let usages = f.iter().map(|w| usage(w.load(Ordering::Relaxed)));
        assert_eq!(usages.collect::<Vec<_>>(), [0, 2, 0]);
        assert_eq!(r.position(), (1, 1));
        assert_eq!(r.allocations(), 4);
    }

    #[test]
    fn an_all_pinned_pool_is_reported_not_spun_on() {
        let f = frames(4);
        let r = Replacement::new(ReplacementPolicy::Clock, 4);
        for _ in 0..4 {
            r.victim(&f).unwrap();
        }
        for w in f.iter() {
            assert_eq!(w.load(Ordering::Relaxed), REFCOUNT_ONE);
        }
        assert_eq!(r.victim(&f), Err(AllPinned));
    }

    /// Loads `page`s through `r` like the pool's miss path (victim, retag, unpin), returning
    /// the buffer each went to; `resident[id]` is the page buffer id holds.
    fn load(r: &Replacement, f: &Words, resident: &mut [Option<u32>], page: u32) -> u32 {
        if let Some(id) = resident.iter().position(|p| *p == Some(page)) {
            let w = f.state(id as u32);
            w.store(
                crate::buffer::state::pinned(w.load(Ordering::Relaxed)) - REFCOUNT_ONE,
                Ordering::Relaxed,
            );
            return id as u32;
        }
        let (id, _) = r.victim(f).unwrap();
        resident[id as usize] = Some(page);
        f.state(id)
            .store(r.admit_usage() | TAG_VALID, Ordering::Relaxed);
        r.retagged(f, id, None, u64::from(page));
        r.check_invariants(f).unwrap();
        id
    }

    #[test]
    fn a_busy_list_sends_the_search_to_the_other_one() {
        // ARC: pages 0-3 on T1; page 3 used, so the search moves it to T2; the other three
        // pinned. T1 stays the list CAR chooses (|T1| >= p), all busy: the search must go
        // on at T2's tail, not report all pinned. The cooling stage the same way round:
        // the cooling FIFO all pinned, the unpinned page hot.
        for policy in [ReplacementPolicy::Car, ReplacementPolicy::Cooling] {
            let f = frames(4);
            let r = Replacement::new(policy, 4);
            let mut res = vec![None; 4];
            for p in 0..4 {
                load(&r, &f, &mut res, p);
            }
            load(&r, &f, &mut res, 3);
            for id in 0..3 {
                f.state(id).fetch_add(REFCOUNT_ONE, Ordering::Relaxed);
            }
            assert_eq!(r.victim(&f).map(|v| v.0), Ok(3), "{policy:?}");
        }
    }

    #[test]
    fn sieve_keeps_survivors_in_place_and_takes_new_pages_first() {
        let f = frames(4);
        let r = Replacement::new(ReplacementPolicy::Sieve, 4);
        let mut res = vec![None; 4];
        for p in 0..4 {
            load(&r, &f, &mut res, p);
        }
        // Pages 0 and 2 used again: marked. The hand (at the tail, page 0) clears 0, takes 1.
        load(&r, &f, &mut res, 0);
        load(&r, &f, &mut res, 2);
        let id = load(&r, &f, &mut res, 10);
        assert_eq!(id, 1, "{res:?}");
        // The hand went on from 1's place: 2 cleared, 3 taken; page 0 (cleared, older)
        // survives a second miss where the clock would have come back to it.
        assert_eq!(load(&r, &f, &mut res, 11), 3);
        assert_eq!(res, [Some(0), Some(10), Some(2), Some(11)]);
        // The hand reaches page 10, loaded since and never used: it goes before the older
        // page 0 (quick demotion), and so does page 11 after it.
        assert_eq!(load(&r, &f, &mut res, 12), 1);
        assert_eq!(load(&r, &f, &mut res, 13), 3);
        assert_eq!(res, [Some(0), Some(12), Some(2), Some(13)]);
        // Freed buffers leave the list and come back from the free list.
        r.forget(&f, 2);
        f.state(2).store(0, Ordering::Relaxed);
        r.push_free(2);
        r.check_invariants(&f).unwrap();
        res[2] = None;
        assert_eq!(load(&r, &f, &mut res, 15), 2);
    }
}
