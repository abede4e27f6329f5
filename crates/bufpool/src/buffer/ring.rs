//! Buffer access strategies (rings): a small set of buffers private to one operation
//! (a large sequential scan, a bulk load, a VACUUM), reused in turn so that the operation
//! does not push the rest of the pool out (seed 003; PostgreSQL's buffer README, "Buffer
//! Ring Replacement Strategy").
//!
//! Owns: [`Ring`] (one operation's slots: buffer ids with the tag each held when the ring
//! last touched it, a cursor, the growing ring's size and lap state, its counters), the
//! ring's victim choice [`BufferPool::victim_for`], and the pool-wide ring counters
//! ([`RingStats`] per kind, forced WAL flushes per I/O context).
//!
//! Sizes (knobs, [`RingOptions`]): bulk read 256 kB (PostgreSQL's BAS_BULKREAD: small
//! enough to stay in the CPU's L2 cache while a scan streams through it, seed 003's L2
//! argument), bulk write 16 MB (BAS_BULKWRITE: a load dirties every page, and a small ring
//! would force a WAL flush at every turn), vacuum 2 MB (PostgreSQL 17's
//! vacuum_buffer_usage_limit). Each is capped at 1/[`RING_POOL_DIVISOR`] of the pool, as
//! PostgreSQL caps it; 0 is no ring (the operation uses the clock like anyone else).
//!
//! Taking a victim through a ring (`victim_for`), one step:
//! 1. The cursor moves to the next slot. An empty slot, or a member that is pinned, has a
//!    usage count above 1 (someone else used it since), is doing I/O, or no longer holds
//!    the page the ring left in it (evicted and retagged by someone else, or dropped) is
//!    *replaced*: the slot gets a buffer from the clock (PostgreSQL's rule: never wait on a
//!    member). All of this is checked under the member's header lock, then it is pinned.
//! 2. A dirty member whose page LSN the log has not made durable (the hook's
//!    [`WalFlush::flush_needed`](super::WalFlush::flush_needed)) would force a WAL flush:
//!    - bulk read *rejects* it: the member leaves the ring (the clock or the bgwriter will
//!      write it later) and a clock buffer takes its slot (PostgreSQL's
//!      StrategyRejectBuffer);
//!    - a growing ring (vacuum, bulk write with `ring_growth = on`) below its cap *grows*:
//!      the member stays, and a clock buffer is inserted after it as a new slot, so the
//!      member is met again only after one more lap, by which time the log has likely been
//!      flushed by someone else (seed 003 step 1, never built in PostgreSQL);
//!    - otherwise (a fixed ring, or at its cap) it is reused: the load path writes it
//!      through the one write path, which flushes the WAL first and reports that it had
//!      to; the ring counts a forced WAL flush.
//! 3. A growing ring counts the steps of its lap; a lap (as many steps as it has slots)
//!    with neither a grow nor a forced flush *shrinks* it by a quarter of its size above
//!    the start size (at least one slot), dropping the slots the cursor would visit next:
//!    those buffers simply go back to being the clock's.
//!
//! Usage counts: a pin through a ring raises usage only from 0 to 1 (a hit too), so the
//! clock takes ring pages cheaply and a member someone else touched (usage 2) is left to
//! them. Reuse versus eviction is counted in pg_stat_io style under the ring's context:
//! `IoOp::Reuse` for a victim from the ring, `IoOp::Eviction` for one from the clock that
//! held a valid page.
//!
//! Invariants (`Ring::check_invariants`): slots ≤ capacity ≤ `cap`, and for a growing ring
//! start ≤ slots; the slot vector never reallocates (capacity reserved at creation, so no
//! step allocates); the cursor is a valid slot; a ring holds ids, never pins, so a member
//! may change hands at any time and is trusted only after the re-check of step 1.
//!
//! Locks: a ring is owned by one operation (`&mut`), so it needs none of its own. A step
//! takes one member's header lock for a few instructions, then (dirty member) try-locks
//! its content lock shared to read the page LSN, never waiting; the clock's own rules
//! apply to the clock buffer. No mapping partition is taken here. Order: header → content
//! (try only), as everywhere in the pool.
//!
//! A load path (the pool's `load`, a multi-block read) uses the ring in three calls: take
//! a victim with `victim_for(ring)`; if its state is DIRTY, write it with
//! `write_victim(victim, context, ring)` (which counts a forced WAL flush of a reuse); after
//! retagging it to the new page, `note_retagged(ring, victim, tag, old_state, context)`
//! (counts Reuse or Eviction and records the new page in the slot).
//!
//! The pool-wide counters use `std` atomics directly like `stats.rs`: they are statistics,
//! bumped only on slow paths (a grow, a reject, a forced flush), never read to synchronize.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::clock::AllPinned;
use super::state::*;
use super::{BufferPool, BufferResult};
use crate::page;
use crate::stats::{IoContext, IoOp, IoWriter};
use crate::types::BufferTag;

/// Default bulk-read ring (`bulkread_ring_size`): PostgreSQL's 256 kB, small enough to
/// stay in a CPU's L2 cache while a scan streams pages through it (seed 003).
pub const DEFAULT_BULKREAD_RING_BYTES: u64 = 256 << 10;
/// Default bulk-write ring (`bulkwrite_ring_size`): PostgreSQL's 16 MB; every page of a
/// load is dirty and WAL-logged, so a small ring would flush the WAL at every turn.
pub const DEFAULT_BULKWRITE_RING_BYTES: u64 = 16 << 20;
/// Default vacuum ring (`vacuum_buffer_usage_limit`): PostgreSQL 17's 2 MB.
pub const DEFAULT_VACUUM_RING_BYTES: u64 = 2 << 20;
/// Where a growing ring starts (and what it shrinks back to): 256 kB, the bulk-read size,
/// for its L2 argument; seed 003 asks to "start with a small ring".
pub const RING_START_BYTES: u64 = 256 << 10;
/// Smallest ring other than 0 (no ring): PostgreSQL's floor for vacuum_buffer_usage_limit.
pub const MIN_RING_BYTES: u64 = 128 << 10;
/// Largest ring a knob may ask for: PostgreSQL's 16 GB limit of vacuum_buffer_usage_limit
/// (the pool cap below applies anyway).
pub const MAX_RING_BYTES: u64 = 16 << 30;
/// A ring holds at most nbuffers / this (PostgreSQL's GetAccessStrategy caps a ring at
/// 1/8 of shared_buffers), so a few concurrent bulk operations cannot own the pool.
pub const RING_POOL_DIVISOR: usize = 8;
/// A quiet lap removes (slots − start) / this slots, at least one: a quarter of the
/// excess, so a ring grown for a burst of dirty pages halves its excess in under three
/// quiet laps, yet one quiet lap does not undo all of the growth.
pub const RING_SHRINK_DIVISOR: usize = 4;

/// Which operation a ring serves; fixes its I/O context and its reuse rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RingKind {
    /// Large sequential scans (PostgreSQL's BAS_BULKREAD): a dirty member whose reuse would
    /// force a WAL flush is left to the clock and replaced.
    BulkRead,
    /// Bulk loads (BAS_BULKWRITE).
    BulkWrite,
    /// VACUUM (BAS_VACUUM).
    Vacuum,
}

impl RingKind {
    pub const ALL: [RingKind; 3] = [RingKind::BulkRead, RingKind::BulkWrite, RingKind::Vacuum];

    /// The pg_stat_io context the ring's I/O is counted under.
    pub fn context(self) -> IoContext {
        match self {
            RingKind::BulkRead => IoContext::BulkRead,
            RingKind::BulkWrite => IoContext::BulkWrite,
            RingKind::Vacuum => IoContext::Vacuum,
        }
    }

    /// Whether a ring of this kind may grow (with `ring_growth = on`): vacuum and bulk
    /// write do; bulk read rejects instead.
    pub fn can_grow(self) -> bool {
        self != RingKind::BulkRead
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The ring knobs, as the pool takes them (`bulkread_ring_size`, `bulkwrite_ring_size`,
/// `vacuum_buffer_usage_limit`, `ring_growth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingOptions {
    pub bulkread_bytes: u64,
    pub bulkwrite_bytes: u64,
    pub vacuum_bytes: u64,
    /// Vacuum and bulk-write rings start at [`RING_START_BYTES`] and grow to their size
    /// (on), or are fixed at their size (off).
    pub growth: bool,
}

impl Default for RingOptions {
    fn default() -> Self {
        Self {
            bulkread_bytes: DEFAULT_BULKREAD_RING_BYTES,
            bulkwrite_bytes: DEFAULT_BULKWRITE_RING_BYTES,
            vacuum_bytes: DEFAULT_VACUUM_RING_BYTES,
            growth: true,
        }
    }
}

impl RingOptions {
    /// The configured size of a ring of `kind`, in bytes (0: no ring).
    pub fn bytes(&self, kind: RingKind) -> u64 {
        match kind {
            RingKind::BulkRead => self.bulkread_bytes,
            RingKind::BulkWrite => self.bulkwrite_bytes,
            RingKind::Vacuum => self.vacuum_bytes,
        }
    }
}

/// What a ring (or all rings of one kind, [`BufferPool::ring_stats`]) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Victims taken from the ring (pg_stat_io's reuses).
    pub reuses: u64,
    /// Victims taken from the clock for the ring: filling an empty slot, replacing a
    /// member, growing, or after a reject.
    pub clock_takes: u64,
    /// Members found pinned, used by someone else, busy or retagged, and replaced.
    pub replaced: u64,
    /// Reuses whose write had to wait for a WAL flush.
    pub wal_flushes_forced: u64,
    /// Slots added instead of forcing a WAL flush.
    pub grows: u64,
    /// Quiet laps that shrank the ring.
    pub shrinks: u64,
    /// Dirty members a bulk-read ring left to the clock instead of forcing a WAL flush.
    pub rejects: u64,
}

impl RingStats {
    const FIELDS: usize = 7;

    fn to_array(self) -> [u64; Self::FIELDS] {
        [
            self.reuses,
            self.clock_takes,
            self.replaced,
            self.wal_flushes_forced,
            self.grows,
            self.shrinks,
            self.rejects,
        ]
    }

    fn from_array(a: [u64; Self::FIELDS]) -> Self {
        Self {
            reuses: a[0],
            clock_takes: a[1],
            replaced: a[2],
            wal_flushes_forced: a[3],
            grows: a[4],
            shrinks: a[5],
            rejects: a[6],
        }
    }
}

/// The pool's share of the ring machinery: the knobs and the counters over all rings.
#[derive(Debug)]
pub(super) struct RingShared {
    options: RingOptions,
    /// Per ring kind, the [`RingStats`] fields of finished and running rings' events
    /// (`reuses` stays 0 here: pg_stat_io counts them, see `BufferPool::ring_stats`).
    counters: [[AtomicU64; RingStats::FIELDS]; 3],
    /// Per I/O context, writes that had to flush the WAL first.
    forced: [AtomicU64; 4],
}

impl RingShared {
    pub(super) fn new(options: RingOptions) -> Self {
        Self {
            options,
            counters: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            forced: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    pub(super) fn count_forced_wal_flush(&self, context: IoContext) {
        self.forced[context as usize].fetch_add(1, Relaxed);
    }

    /// Adds what one step of `ring` did (`before` → now) to the pool's counters.
    fn publish(&self, kind: RingKind, before: RingStats, now: RingStats) {
        let row = &self.counters[kind.index()];
        for (i, (b, n)) in before
            .to_array()
            .into_iter()
            .zip(now.to_array())
            .enumerate()
        {
            if n != b {
                row[i].fetch_add(n - b, Relaxed);
            }
        }
    }
}

/// One slot: a buffer and the page the ring last left in it.
#[derive(Debug, Clone, Copy)]
struct Slot {
    id: u32,
    tag: BufferTag,
}

/// How the step's member is to be treated (`BufferPool::ring_member`).
enum Member {
    /// Reuse it: pinned, with its state.
    Reuse(u32, u64),
    /// Take a clock buffer into the current slot.
    Replace,
    /// Take a clock buffer as a new slot after the current one.
    Grow,
}

/// One operation's ring. Owned by that operation (not shared between threads); holds buffer
/// ids, never pins.
#[derive(Debug)]
pub struct Ring {
    kind: RingKind,
    growth: bool,
    /// `None`: empty. Capacity reserved for `cap` slots at creation.
    slots: Vec<Option<Slot>>,
    /// Size a growing ring starts at and shrinks back to (== cap for a fixed ring).
    start: usize,
    cap: usize,
    /// The slot of the last step.
    current: usize,
    /// Whether the last `victim_for` answer came from the ring (PostgreSQL's
    /// current_was_in_ring).
    from_ring: bool,
    /// Steps since the lap began, and whether it grew or forced a flush.
    lap_steps: usize,
    lap_pressure: bool,
    stats: RingStats,
}

impl Ring {
    /// A ring of `kind` with room for `bytes` of pages of `pool`; `None` when `bytes` is 0
    /// (no ring: the operation uses the shared clock like any other). Vacuum and bulk-write
    /// rings grow (start at [`RING_START_BYTES`], grow up to `bytes`) when the pool's
    /// `ring_growth` is on; see [`Ring::with_growth`] to choose explicitly.
    pub fn new(kind: RingKind, bytes: usize, pool: &BufferPool) -> Option<Ring> {
        let growth = pool.rings.options.growth && kind.can_grow();
        Self::with_growth(kind, bytes, growth, pool)
    }

    /// [`Ring::new`] with growth chosen by the caller (an experiment comparing fixed and
    /// growing rings on one engine). `growth` is ignored for bulk read, which never grows.
    pub fn with_growth(
        kind: RingKind,
        bytes: usize,
        growth: bool,
        pool: &BufferPool,
    ) -> Option<Ring> {
        if bytes == 0 {
            return None;
        }
        let growth = growth && kind.can_grow();
        let page = pool.page_size();
        let cap = (bytes / page)
            .min(pool.nbuffers() / RING_POOL_DIVISOR)
            .max(1);
        let start = if growth {
            (RING_START_BYTES as usize / page).clamp(1, cap)
        } else {
            cap
        };
        let mut slots = Vec::with_capacity(cap);
        slots.resize(start, None);
        let ring = Ring {
            kind,
            growth,
            slots,
            start,
            cap,
            current: start - 1,
            from_ring: false,
            lap_steps: 0,
            lap_pressure: false,
            stats: RingStats::default(),
        };
        ring.check_invariants();
        Some(ring)
    }

    pub fn kind(&self) -> RingKind {
        self.kind
    }

    /// Whether this ring grows and shrinks (else its size is fixed).
    pub fn is_growing(&self) -> bool {
        self.growth
    }

    /// Slots now (buffers the ring may hold).
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the ring has no slots (never: a ring has at least one).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Most slots this ring may grow to (its knob, capped at 1/8 of the pool).
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Slots it starts at and shrinks back to.
    pub fn start_len(&self) -> usize {
        self.start
    }

    /// What this ring did so far.
    pub fn stats(&self) -> RingStats {
        self.stats
    }

    /// Checks the ring's invariants (debug builds; see the module doc).
    pub fn check_invariants(&self) {
        debug_assert!(
            !self.slots.is_empty() && self.slots.len() <= self.cap,
            "ring has {} slots, cap {}",
            self.slots.len(),
            self.cap
        );
        debug_assert!(
            self.slots.capacity() >= self.cap,
            "the slot vector must never reallocate"
        );
        debug_assert!(self.current < self.slots.len(), "cursor past the ring");
        debug_assert!(
            !self.growth || self.slots.len() >= self.start,
            "a growing ring shrank below its start"
        );
        debug_assert!(
            self.growth || self.slots.len() == self.cap,
            "a fixed ring changed size"
        );
    }

    /// Moves the cursor one slot on; a finished quiet lap of a growing ring shrinks it
    /// first (dropping the slots after the cursor, the next to be visited).
    fn advance(&mut self) {
        self.lap_steps += 1;
        if self.lap_steps >= self.slots.len() {
            if self.growth && !self.lap_pressure && self.slots.len() > self.start {
                self.shrink();
            }
            self.lap_steps = 0;
            self.lap_pressure = false;
        }
        self.current = (self.current + 1) % self.slots.len();
    }

    fn shrink(&mut self) {
        let len = self.slots.len();
        let k = ((len - self.start) / RING_SHRINK_DIVISOR).max(1);
        debug_assert!(k <= len - self.start);
        let after = self.current + 1;
        let tail = k.min(len - after);
        self.slots.drain(after..after + tail);
        let head = k - tail;
        if head > 0 {
            self.slots.drain(..head);
            self.current -= head;
        }
        self.stats.shrinks += 1;
        self.check_invariants();
    }

    /// Puts the clock's buffer `id` (holding `tag`) in the current slot, or, growing, in
    /// a new slot after it (which becomes current).
    fn place(&mut self, id: u32, tag: BufferTag, grow: bool) {
        let slot = Some(Slot { id, tag });
        if grow && self.slots.len() < self.cap {
            self.current += 1;
            self.slots.insert(self.current, slot);
        } else {
            self.slots[self.current] = slot;
        }
        self.check_invariants();
    }

    /// Whether the last victim came from the ring (a reuse) rather than from the clock.
    pub fn last_from_ring(&self) -> bool {
        self.from_ring
    }
}

impl BufferPool {
    /// A ring of `kind` sized by the pool's knobs (`bulkread_ring_size`,
    /// `bulkwrite_ring_size`, `vacuum_buffer_usage_limit`; growth by `ring_growth`);
    /// `None` when that knob is 0.
    pub fn ring(&self, kind: RingKind) -> Option<Ring> {
        let bytes = self.rings.options.bytes(kind);
        Ring::new(kind, usize::try_from(bytes).unwrap_or(usize::MAX), self)
    }

    /// The ring knobs this pool was built with.
    pub fn ring_options(&self) -> RingOptions {
        self.rings.options
    }

    /// What all rings of `kind` did since the pool was built: the events each ring
    /// counts, summed; `reuses` is pg_stat_io's Reuse count of the kind's context (all
    /// writers).
    pub fn ring_stats(&self, kind: RingKind) -> RingStats {
        let row = &self.rings.counters[kind.index()];
        let mut s = RingStats::from_array(std::array::from_fn(|i| row[i].load(Relaxed)));
        let io = self.stats();
        s.reuses = IoWriter::ALL
            .iter()
            .map(|w| io.get(*w, kind.context(), IoOp::Reuse))
            .sum();
        s
    }

    /// Writes under `context` that had to flush the WAL first (counted by the one write
    /// path, whoever wrote: backend, ring reuse, bgwriter, checkpointer).
    pub fn wal_flushes_forced(&self, context: IoContext) -> u64 {
        self.rings.forced[context as usize].load(Relaxed)
    }

    /// A victim for a miss: from `ring` when it has a reusable member, else from the
    /// bgwriter's queue or the clock sweep (and then it joins the ring). Returned pinned,
    /// with its state word.
    pub(super) fn victim_for(&self, ring: Option<&mut Ring>) -> Result<(u32, u64), AllPinned> {
        let Some(ring) = ring else {
            return self.take_victim();
        };
        let before = ring.stats;
        ring.from_ring = false;
        ring.advance();
        let grow = match self.ring_member(ring) {
            Member::Reuse(id, s) => {
                ring.from_ring = true;
                self.rings.publish(ring.kind, before, ring.stats);
                return Ok((id, s));
            }
            Member::Replace => false,
            Member::Grow => true,
        };
        let r = self.take_victim();
        if let Ok((id, _)) = r {
            ring.stats.clock_takes += 1;
            if grow {
                ring.stats.grows += 1;
                ring.lap_pressure = true;
            }
            // Pinned by us: the tag is stable. The load path records the new one.
            ring.place(id, self.descs[id as usize].tag(), grow);
        }
        self.rings.publish(ring.kind, before, ring.stats);
        r
    }

    /// Step 1 and 2 of the module doc for the current slot.
    fn ring_member(&self, ring: &mut Ring) -> Member {
        let Some(slot) = ring.slots[ring.current] else {
            return Member::Replace;
        };
        let d = &self.descs[slot.id as usize];
        let s = d.lock_header();
        let ours = s & TAG_VALID != 0 && d.tag_is(&slot.tag);
        if !ours || refcount(s) != 0 || usage(s) > 1 || s & IO_IN_PROGRESS != 0 {
            d.unlock_header(s);
            ring.stats.replaced += 1;
            return Member::Replace;
        }
        let pinned = (s + REFCOUNT_ONE) & !LOCKED;
        d.unlock_header(pinned);
        if pinned & DIRTY == 0 {
            return Member::Reuse(slot.id, pinned);
        }
        // Dirty: would its write force a WAL flush? The LSN needs the content lock; a busy
        // lock means someone is using the page: leave it to them.
        if !d.content_lock.try_lock_shared() {
            d.unpin();
            ring.stats.replaced += 1;
            return Member::Replace;
        }
        // SAFETY: pinned above and the content lock is held shared (just taken); the slice
        // is dropped before the lock is released below.
        let lsn = page::lsn(unsafe { self.page_slice(slot.id) });
        // SAFETY: taken by the successful try_lock_shared above.
        unsafe { d.content_lock.unlock_shared() };
        if !self.wal.flush_needed(lsn) {
            return Member::Reuse(slot.id, pinned);
        }
        if ring.kind == RingKind::BulkRead {
            d.unpin();
            ring.stats.rejects += 1;
            return Member::Replace;
        }
        if ring.growth && ring.slots.len() < ring.cap {
            d.unpin();
            return Member::Grow;
        }
        Member::Reuse(slot.id, pinned)
    }

    /// Writes the dirty victim `id` (pinned by the caller) through the one write path.
    /// Returns false when its content lock is busy (the caller unpins it and takes another
    /// victim, as PostgreSQL does). A reuse from `ring` whose write forced a WAL flush is
    /// counted in the ring.
    pub(super) fn write_victim(
        &self,
        id: u32,
        context: IoContext,
        ring: Option<&mut Ring>,
    ) -> BufferResult<bool> {
        let d = &self.descs[id as usize];
        if !d.content_lock.try_lock_shared() {
            return Ok(false);
        }
        let r = self.write_locked(id, context);
        // SAFETY: taken by the successful try_lock_shared above.
        unsafe { d.content_lock.unlock_shared() };
        if let (Ok(Some(w)), Some(ring)) = (&r, ring) {
            if w.wal_flush_forced && ring.from_ring {
                let before = ring.stats;
                ring.stats.wal_flushes_forced += 1;
                ring.lap_pressure = true;
                self.rings.publish(ring.kind, before, ring.stats);
            }
        }
        r.map(|_| true)
    }

    /// After the victim `id` was retagged to `tag` (its state before was `old`): counts a
    /// Reuse (from the ring) or an Eviction (from the clock, holding a valid page) under
    /// `context`, and records the new page in the ring's slot.
    pub(super) fn note_retagged(
        &self,
        ring: Option<&mut Ring>,
        id: u32,
        tag: BufferTag,
        old: u64,
        context: IoContext,
    ) {
        let from_ring = ring.as_ref().is_some_and(|r| r.from_ring);
        if old & (TAG_VALID | VALID) == (TAG_VALID | VALID) {
            let op = if from_ring {
                IoOp::Reuse
            } else {
                IoOp::Eviction
            };
            self.smgr.stats().count(context, op, 1);
        }
        if let Some(ring) = ring {
            if from_ring {
                // Per ring only: the pool-wide reuses are pg_stat_io's (striped) count.
                ring.stats.reuses += 1;
            }
            if let Some(slot) = ring.slots[ring.current].as_mut().filter(|s| s.id == id) {
                slot.tag = tag;
            }
        }
    }
}
