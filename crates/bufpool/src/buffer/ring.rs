//! Buffer access strategies (rings): a small set of buffers private to one operation
//! (a large sequential scan, a bulk load, a VACUUM), reused in turn so that the operation
//! does not push the rest of the pool out (PostgreSQL's buffer README, "Buffer
//! Ring Replacement Strategy").
//!
//! Owns: [`Ring`] (one operation's slots: buffer ids with the tag each held when the ring
//! last touched it, a cursor, the growing ring's size and lap state, its counters), the
//! ring's victim choice `BufferPool::victim_for`, and the pool-wide ring counters
//! ([`RingStats`] per kind, forced WAL flushes per I/O context).
//!
//! Sizes (knobs, [`RingOptions`]): bulk read 256 kB (PostgreSQL's BAS_BULKREAD: small
//! enough to stay in the CPU's L2 cache while a scan streams through it), bulk write 16 MB (BAS_BULKWRITE: a load dirties every page, and a small ring
//! would force a WAL flush at every turn), vacuum 2 MB (PostgreSQL 17's
//! vacuum_buffer_usage_limit). Each is capped at 1/`RING_POOL_DIVISOR` of the pool, as
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
//!      flushed by someone else (a proposal never built in PostgreSQL);
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
//! (counts Reuse or Eviction and records the new page in the slot). A page it finds
//! already mapped it pins with `pin_for(id, ring.is_some())` (usage 0 → 1 only for a
//! ring). A victim it gives up on (pinned meanwhile) it just unpins: the slot keeps it, and
//! the next step re-checks it like any member.
//!
//! The pool-wide counters use `std` atomics directly like `stats.rs`: they are statistics,
//! bumped only on slow paths (a grow, a reject, a forced flush), never read to synchronize.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::policy::AllPinned;
use super::state::*;
use super::{BufferPool, BufferResult};
use crate::invariants::Violations;
use crate::page;
use crate::stats::{IoContext, IoOp, IoWriter};
use crate::types::BufferTag;

/// Default bulk-read ring (`bulkread_ring_size`): PostgreSQL's 256 kB, small enough to
/// stay in a CPU's L2 cache while a scan streams pages through it.
pub const DEFAULT_BULKREAD_RING_BYTES: u64 = 256 << 10;
/// Default bulk-write ring (`bulkwrite_ring_size`): PostgreSQL's 16 MB; every page of a
/// load is dirty and WAL-logged, so a small ring would flush the WAL at every turn.
pub const DEFAULT_BULKWRITE_RING_BYTES: u64 = 16 << 20;
/// Default vacuum ring (`vacuum_buffer_usage_limit`): PostgreSQL 17's 2 MB.
pub const DEFAULT_VACUUM_RING_BYTES: u64 = 2 << 20;
/// Where a growing ring starts (and what it shrinks back to): 256 kB, the bulk-read size,
/// for its L2 argument: a ring starts small and grows only where it must.
pub(crate) const RING_START_BYTES: u64 = 256 << 10;
/// Smallest ring other than 0 (no ring): PostgreSQL's floor for vacuum_buffer_usage_limit.
pub const MIN_RING_BYTES: u64 = 128 << 10;
/// Largest ring a knob may ask for: PostgreSQL's 16 GB limit of vacuum_buffer_usage_limit
/// (the pool cap below applies anyway).
pub const MAX_RING_BYTES: u64 = 16 << 30;
/// A ring holds at most nbuffers / this (PostgreSQL's GetAccessStrategy caps a ring at
/// 1/8 of shared_buffers), so a few concurrent bulk operations cannot own the pool.
pub(crate) const RING_POOL_DIVISOR: usize = 8;
/// A quiet lap removes (slots − start) / this slots, at least one: a quarter of the
/// excess, so a ring grown for a burst of dirty pages halves its excess in under three
/// quiet laps, yet one quiet lap does not undo all of the growth.
pub(crate) const RING_SHRINK_DIVISOR: usize = 4;

// Every default ring size, and the growing ring's start, is one a ring knob accepts.
const _: () = assert!(
    MIN_RING_BYTES <= RING_START_BYTES
        && MIN_RING_BYTES <= DEFAULT_BULKREAD_RING_BYTES
        && MIN_RING_BYTES <= DEFAULT_VACUUM_RING_BYTES
        && DEFAULT_BULKWRITE_RING_BYTES <= MAX_RING_BYTES
        && RING_START_BYTES <= DEFAULT_VACUUM_RING_BYTES,
    "a default ring size lies outside the ring knobs' range"
);

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
    /// Every kind, in the order of their numbers.
    pub const ALL: [RingKind; 3] = [RingKind::BulkRead, RingKind::BulkWrite, RingKind::Vacuum];

    /// The state bits (`RING_MASK`) that record a page loaded through this kind of ring.
    pub(super) fn state_bits(kind: Option<RingKind>) -> u64 {
        let code = match kind {
            None => 0,
            Some(RingKind::BulkRead) => 1,
            Some(RingKind::BulkWrite) => 2,
            Some(RingKind::Vacuum) => 3,
        };
        code << RING_SHIFT
    }

    /// The kind of ring a buffer's state says loaded its page.
    pub(super) fn from_state(s: u64) -> Option<RingKind> {
        match (s & RING_MASK) >> RING_SHIFT {
            1 => Some(RingKind::BulkRead),
            2 => Some(RingKind::BulkWrite),
            3 => Some(RingKind::Vacuum),
            _ => None,
        }
    }

    /// The name used in views and reports: pg_stat_io's context names.
    pub fn name(self) -> &'static str {
        match self {
            RingKind::BulkRead => "bulkread",
            RingKind::BulkWrite => "bulkwrite",
            RingKind::Vacuum => "vacuum",
        }
    }

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
    /// Bulk-read ring size (`bulkread_ring_size`; 0: no ring), in bytes.
    pub bulkread_bytes: u64,
    /// Bulk-write ring size (`bulkwrite_ring_size`; 0: no ring), in bytes.
    pub bulkwrite_bytes: u64,
    /// Vacuum ring size (`vacuum_buffer_usage_limit`; 0: no ring), in bytes.
    pub vacuum_bytes: u64,
    /// Vacuum and bulk-write rings start at `RING_START_BYTES` and grow to their size
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
    /// Victims taken from the ring and retagged. [`BufferPool::ring_stats`] reports
    /// pg_stat_io's Reuse count here instead (reuses of a buffer that held a valid page:
    /// the same but for a member whose read had failed).
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
            debug_assert!(n >= b, "ring counter {i} went down from {b} to {n}");
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
    /// rings grow (start at `RING_START_BYTES`, grow up to `bytes`) when the pool's
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
        ring.check_invariants().unwrap();
        Some(ring)
    }

    /// The operation this ring serves.
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

    /// Checks the ring's invariants (see the module doc); asserted in debug builds after
    /// every change.
    pub fn check_invariants(&self) -> Result<(), Violations> {
        let mut v = Violations::default();
        let (len, cap) = (self.slots.len(), self.cap);
        v.check(len > 0 && len <= cap, || {
            format!("ring has {len} slots, cap {cap}")
        });
        v.check(self.slots.capacity() >= cap, || {
            "the slot vector must never reallocate".into()
        });
        v.check(self.current < len, || "cursor past the ring".into());
        v.check(!self.growth || len >= self.start, || {
            "a growing ring shrank below its start".into()
        });
        v.check(self.growth || len == cap, || {
            "a fixed ring changed size".into()
        });
        v.into_result()
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
        debug_assert!(
            k <= len - self.start,
            "shrinking {k} slots of {len} would go below the start {}",
            self.start
        );
        let after = self.current + 1;
        let tail = k.min(len - after);
        self.slots.drain(after..after + tail);
        let head = k - tail;
        if head > 0 {
            self.slots.drain(..head);
            self.current -= head;
        }
        self.stats.shrinks += 1;
        debug_assert_eq!(
            self.slots.len(),
            len - k,
            "a shrink by {k} removed another count"
        );
        crate::invariants::debug_check(|| self.check_invariants());
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
        crate::invariants::debug_check(|| self.check_invariants());
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

        ring.check_invariants().unwrap();
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
        debug_assert!(
            refcount(d.load_state()) >= 1,
            "writing victim {id} without its pin: {d:?}"
        );
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
        debug_assert!(
            self.descs[id as usize].tag_is(&tag),
            "victim {id} does not hold {tag}, the page it was retagged to"
        );
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
            // The victim came from the current slot (a reuse) or was placed in it (a clock
            // take), and nothing moved the cursor since.
            debug_assert!(
                ring.slots[ring.current].is_some_and(|s| s.id == id),
                "victim {id} is not in the ring's current slot {}: {:?}",
                ring.current,
                ring.slots[ring.current]
            );
            if let Some(slot) = ring.slots[ring.current].as_mut().filter(|s| s.id == id) {
                slot.tag = tag;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Each test opens with what it proves. The pools are small (4 kB pages) and live in
    //! memory; a mock WAL hook stands in for the log, and a checking file system wrapper
    //! sees every page the pool writes, at the moment it is written.
    use super::*;
    use crate::buffer::{WalFlush, WalFlushError};
    use crate::config::Config;
    use crate::types::{ForkNumber, Lsn, RelFileId};
    use crate::vfs::{Call, CallHook, HookVfs, MemVfs, Vfs};
    use std::path::Path;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    const REL: RelFileId = RelFileId::new(0, 7);
    const HOT: RelFileId = RelFileId::new(0, 8);
    const PAGE: usize = 4096;

    /// A log whose durable end moves only when the pool (or the test) flushes it.
    #[derive(Debug, Default)]
    struct MockWal {
        flushed: AtomicU64,
        flushes: AtomicU64,
    }

    impl MockWal {
        fn flush_to(&self, lsn: u64) {
            self.flushed.fetch_max(lsn, Relaxed);
        }
    }

    impl WalFlush for MockWal {
        fn flush(&self, lsn: Lsn) -> Result<(), WalFlushError> {
            if self.flushed.load(Relaxed) < lsn.0 {
                self.flushes.fetch_add(1, Relaxed);
            }
            self.flush_to(lsn.0);
            Ok(())
        }
        fn flush_needed(&self, lsn: Lsn) -> bool {
            self.flushed.load(Relaxed) < lsn.0
        }
    }

    /// Memory file system that checks each written page's LSN against the mock log's
    /// durable end at the moment of the write (WAL before data), counting page writes and
    /// violations.
    fn checking_vfs(
        wal: Arc<MockWal>,
        violations: Arc<AtomicU64>,
        page_writes: Arc<AtomicU64>,
    ) -> HookVfs {
        let hook: CallHook = Arc::new(move |c: &Call<'_>| {
            let pages = c.data.iter().flat_map(|b| b.chunks(PAGE));
            for p in pages.filter(|p| p.len() == PAGE) {
                page_writes.fetch_add(1, Relaxed);
                if page::lsn(p).0 > wal.flushed.load(Relaxed) {
                    violations.fetch_add(1, Relaxed);
                }
            }
            None
        });
        HookVfs::new(Arc::new(MemVfs::new()), hook)
    }

    struct Fixture {
        pool: BufferPool,
        wal: Arc<MockWal>,
        violations: Arc<AtomicU64>,
        page_writes: Arc<AtomicU64>,
    }

    fn fixture(buffers: u64, rings: &[(&str, &str)]) -> Fixture {
        let mut c = Config::default();
        c.set("shared_buffers", &buffers.to_string()).unwrap();
        c.set("block_size", "4kB").unwrap();
        for (k, v) in rings {
            c.set(k, v).unwrap();
        }
        let wal = Arc::new(MockWal::default());
        let violations = Arc::new(AtomicU64::new(0));
        let page_writes = Arc::new(AtomicU64::new(0));
        let vfs = checking_vfs(wal.clone(), violations.clone(), page_writes.clone());
        let smgr = crate::smgr::Smgr::open(
            Arc::new(vfs) as Arc<dyn Vfs>,
            Path::new("/db"),
            crate::buffer::PoolConfig::smgr_options(&c, true).unwrap(),
        )
        .unwrap();
        let pool = BufferPool::new(Arc::new(smgr), &c, wal.clone()).unwrap();
        Fixture {
            pool,
            wal,
            violations,
            page_writes,
        }
    }

    fn tag(rel: RelFileId, block: u32) -> BufferTag {
        BufferTag::new(rel, ForkNumber::Main, block)
    }

    /// Creates `rel` with `n` initialized pages on storage (LSN 0, written, then dropped
    /// from the pool).
    fn fill(pool: &BufferPool, rel: RelFileId, n: u32) {
        pool.create_relation(rel, ForkNumber::Main).unwrap();
        for _ in 0..n {
            let buf = pool.extend(rel, ForkNumber::Main).unwrap();
            page::init(&mut buf.write(), 0);
        }
        pool.flush_all().unwrap();
        pool.drop_buffers(rel, None, 0).unwrap();
    }

    fn usage_of(pool: &BufferPool, id: u32) -> u64 {
        usage(pool.descs[id as usize].load_state())
    }

    /// Reads `block` of REL through `ring`, stamps it with `lsn` (dirtying it, as a VACUUM
    /// that changed the page would) and releases it.
    fn dirty_through(pool: &BufferPool, ring: &mut Ring, block: u32, lsn: u64) {
        let buf = pool.read_with(tag(REL, block), Some(ring)).unwrap();
        let mut g = buf.write();
        g.set_lsn(Lsn(lsn));
    }

    /// Proves: a ring never hands out a buffer someone holds pinned; such a member is
    /// replaced by a clock buffer, not waited on, and the pinned pages stay put. How: a
    /// scan through a 16-buffer ring keeps every fifth page pinned, over several laps.
    #[test]
    fn a_ring_never_hands_out_a_pinned_buffer() {
        let f = fixture(128, &[]);
        fill(&f.pool, REL, 120);
        let mut ring = f.pool.ring(RingKind::BulkRead).unwrap();
        assert_eq!(ring.len(), 16, "128 buffers / 8");
        let mut held = Vec::new();
        for b in 0..80 {
            let buf = f.pool.read_with(tag(REL, b), Some(&mut ring)).unwrap();
            assert!(
                held.iter()
                    .all(|h: &crate::buffer::BufferRef<'_>| h.buffer_id() != buf.buffer_id()),
                "block {b} got a pinned buffer"
            );
            if b % 5 == 0 {
                held.push(buf);
            }
        }
        for (i, h) in held.iter().enumerate() {
            assert_eq!(h.tag(), tag(REL, i as u32 * 5), "a pinned page moved");
        }
        assert!(ring.stats().replaced >= 10, "{:?}", ring.stats());
        ring.check_invariants().unwrap();
    }

    /// Proves: WAL before data through rings: every page a ring reuse writes has its LSN
    /// durable in the log at the moment of the write, for a fixed and a growing ring; a
    /// fixed ring forces flushes (counted by the ring, by the pool per kind and by the
    /// write path per context). How: a VACUUM-like pass dirties every page with a rising
    /// LSN that nobody else flushes; the file system wrapper checks each write.
    #[test]
    fn ring_writes_wait_for_the_wal() {
        for growth in [false, true] {
            let f = fixture(1024, &[]);
            fill(&f.pool, REL, 600);
            let mut ring = Ring::with_growth(RingKind::Vacuum, 512 << 10, growth, &f.pool).unwrap();
            let writes_before = f.page_writes.load(Relaxed);
            for b in 0..600 {
                dirty_through(&f.pool, &mut ring, b, 1000 + u64::from(b));
            }
            assert!(f.page_writes.load(Relaxed) > writes_before + 300);
            assert_eq!(
                f.violations.load(Relaxed),
                0,
                "a page was written before its WAL"
            );
            let s = ring.stats();
            assert!(s.wal_flushes_forced > 0, "{s:?}");
            assert_eq!(
                f.pool.ring_stats(RingKind::Vacuum).wal_flushes_forced,
                s.wal_flushes_forced
            );
            assert!(f.pool.wal_flushes_forced(IoContext::Vacuum) >= s.wal_flushes_forced);
            assert_eq!(f.pool.wal_flushes_forced(IoContext::Normal), 0);
            f.pool.flush_all().unwrap();
            assert_eq!(f.violations.load(Relaxed), 0);
            assert!(f.wal.flushes.load(Relaxed) > 0);
        }
    }

    /// Proves: a growing ring grows instead of forcing a WAL flush, one slot at a time,
    /// never beyond its cap, and forces flushes only once at the cap. How: 512 kB of 4 kB
    /// pages is a cap of 128 slots starting at 64; nobody flushes the log.
    #[test]
    fn a_growing_ring_never_grows_beyond_its_cap() {
        let f = fixture(1024, &[]);
        fill(&f.pool, REL, 700);
        let mut ring = Ring::with_growth(RingKind::Vacuum, 512 << 10, true, &f.pool).unwrap();
        assert_eq!(
            (ring.start_len(), ring.capacity(), ring.len()),
            (64, 128, 64)
        );
        let mut most = 0;
        for b in 0..700 {
            dirty_through(&f.pool, &mut ring, b, 1000 + u64::from(b));
            assert!(ring.len() <= ring.capacity());
            most = most.max(ring.len());
            if ring.len() < ring.capacity() {
                assert_eq!(ring.stats().wal_flushes_forced, 0, "flushed before the cap");
            }
        }
        assert_eq!(most, 128);
        let s = ring.stats();
        assert_eq!(s.grows, 64, "{s:?}");
        assert!(s.wal_flushes_forced > 0, "{s:?}");
        assert_eq!(f.violations.load(Relaxed), 0);
        // A fixed ring of the same knob is its cap from the start and never grows.
        let mut fixed = Ring::with_growth(RingKind::Vacuum, 512 << 10, false, &f.pool).unwrap();
        for b in 0..300 {
            dirty_through(&f.pool, &mut fixed, b, 5000 + u64::from(b));
            assert_eq!(fixed.len(), 128);
        }
        assert_eq!(fixed.stats().grows, 0);
    }

    /// Proves: a lap with neither a grow nor a forced flush shrinks a grown ring, step by
    /// step back to its start size and no further; while the log keeps up (someone else
    /// flushes it), dirty members are reused and the ring does not grow.
    #[test]
    fn a_grown_ring_shrinks_after_quiet_laps() {
        let f = fixture(1024, &[]);
        fill(&f.pool, REL, 2500);
        let mut ring = Ring::with_growth(RingKind::Vacuum, 512 << 10, true, &f.pool).unwrap();
        for b in 0..200 {
            dirty_through(&f.pool, &mut ring, b, 1000 + u64::from(b));
        }
        assert_eq!(ring.len(), 128, "grown to the cap");
        // Quiet: the log is durable past every LSN from now on.
        f.wal.flush_to(u64::MAX / 2);
        let mut sizes = vec![ring.len()];
        for b in 200..2500 {
            dirty_through(&f.pool, &mut ring, b, 1000 + u64::from(b));
            if ring.len() != *sizes.last().unwrap() {
                sizes.push(ring.len());
            }
        }
        assert!(sizes.windows(2).all(|w| w[1] < w[0]), "{sizes:?}");
        assert_eq!(*sizes.last().unwrap(), ring.start_len(), "{sizes:?}");
        let s = ring.stats();
        assert_eq!(s.shrinks as usize, sizes.len() - 1);
        assert_eq!(s.grows, 64, "no growth while the log keeps up: {s:?}");
        assert_eq!(f.pool.ring_stats(RingKind::Vacuum).shrinks, s.shrinks);
        assert_eq!(f.violations.load(Relaxed), 0);
    }

    /// Proves: a bulk-read ring rejects a dirty member whose write would force a WAL flush
    /// (leaves it dirty in the pool, for the clock or the bgwriter, and takes a clock
    /// buffer), and reuses (writes) one whose WAL is already durable.
    #[test]
    fn bulk_read_rejects_a_dirty_member_needing_a_wal_flush() {
        let f = fixture(128, &[]);
        fill(&f.pool, REL, 100);
        let mut ring = f.pool.ring(RingKind::BulkRead).unwrap();
        let n = ring.len() as u32;
        // Block 0 dirtied with an LSN the log has not reached; block 1 with a durable one.
        dirty_through(&f.pool, &mut ring, 0, 500);
        dirty_through(&f.pool, &mut ring, 1, 50);
        f.wal.flush_to(100);
        for b in 2..n + 2 {
            drop(f.pool.read_with(tag(REL, b), Some(&mut ring)).unwrap());
        }
        let s = ring.stats();
        assert_eq!(s.rejects, 1, "{s:?}");
        assert_eq!(s.wal_flushes_forced, 0, "{s:?}");
        assert_eq!(f.pool.ring_stats(RingKind::BulkRead).rejects, 1);
        assert_eq!(f.wal.flushed.load(Relaxed), 100, "a scan flushed the log");
        // Block 0 is still in the pool, still dirty; block 1 was written and reused.
        let b0 = f.pool.read(tag(REL, 0)).unwrap();
        assert!(f.pool.descs[b0.buffer_id() as usize].load_state() & DIRTY != 0);
        let io = f.pool.stats();
        assert_eq!(
            io.get(IoWriter::Backend, IoContext::BulkRead, IoOp::Write),
            1
        );
        assert_eq!(f.violations.load(Relaxed), 0);
    }

    /// Proves: pages a ring brings in or hits keep a usage count of at most 1, however
    /// often the ring touches them; a ring hit never lowers a page others made hot.
    #[test]
    fn ring_pins_keep_usage_at_most_one() {
        let f = fixture(128, &[]);
        fill(&f.pool, REL, 40);
        let mut ring = f.pool.ring(RingKind::BulkRead).unwrap();
        for _ in 0..3 {
            for b in 0..8 {
                let buf = f.pool.read_with(tag(REL, b), Some(&mut ring)).unwrap();
                assert!(usage_of(&f.pool, buf.buffer_id()) <= 1);
            }
        }
        let hot = f.pool.read(tag(REL, 30)).unwrap();
        drop(f.pool.read(tag(REL, 30)).unwrap());
        drop(f.pool.read(tag(REL, 30)).unwrap());
        let before = usage_of(&f.pool, hot.buffer_id());
        assert_eq!(before, 3);
        drop(f.pool.read_with(tag(REL, 30), Some(&mut ring)).unwrap());
        assert_eq!(usage_of(&f.pool, hot.buffer_id()), before);
        // Extending through a ring: the new pages are ring pages too.
        let mut bw = f.pool.ring(RingKind::BulkWrite).unwrap();
        for _ in 0..4 {
            let buf = f
                .pool
                .extend_with(REL, ForkNumber::Main, Some(&mut bw))
                .unwrap();
            assert_eq!(usage_of(&f.pool, buf.buffer_id()), 1);
        }
    }

    /// Proves: the hot set survives a scan through a ring: after a bulk-read scan of four
    /// pools' worth of pages, every hot page is still a hit. The same scan without a ring
    /// pushes hot pages out (so the test can tell).
    #[test]
    fn the_hot_set_survives_a_ring_scan() {
        for with_ring in [true, false] {
            let f = fixture(128, &[]);
            fill(&f.pool, HOT, 32);
            fill(&f.pool, REL, 512);
            for _ in 0..5 {
                for b in 0..32 {
                    drop(f.pool.read(tag(HOT, b)).unwrap());
                }
            }
            let mut ring = f.pool.ring(RingKind::BulkRead);
            for _ in 0..2 {
                for b in 0..512 {
                    let r = if with_ring {
                        f.pool.read_with(tag(REL, b), ring.as_mut())
                    } else {
                        f.pool.read(tag(REL, b))
                    };
                    drop(r.unwrap());
                }
            }
            let before = f.pool.stats();
            for b in 0..32 {
                drop(f.pool.read(tag(HOT, b)).unwrap());
            }
            let after = f.pool.stats();
            let hits = after.get(IoWriter::Backend, IoContext::Normal, IoOp::Hit)
                - before.get(IoWriter::Backend, IoContext::Normal, IoOp::Hit);
            if with_ring {
                assert_eq!(hits, 32, "a hot page was evicted by a ring scan");
            } else {
                assert!(hits < 32, "the scan without a ring should evict hot pages");
            }
        }
    }

    /// Proves: reuse versus eviction is counted under the ring's context: the first lap
    /// takes clock buffers holding valid pages (evictions), later steps reuse ring members
    /// (reuses); nothing is counted under the normal context.
    #[test]
    fn reuse_and_eviction_are_counted_under_the_ring_context() {
        let f = fixture(128, &[]);
        fill(&f.pool, HOT, 128);
        fill(&f.pool, REL, 100);
        // Every buffer holds a valid HOT page.
        for b in 0..128 {
            drop(f.pool.read(tag(HOT, b)).unwrap());
        }
        let before = f.pool.stats();
        let mut ring = f.pool.ring(RingKind::BulkRead).unwrap();
        let n = ring.len() as u64;
        for b in 0..100 {
            drop(f.pool.read_with(tag(REL, b), Some(&mut ring)).unwrap());
        }
        let after = f.pool.stats();
        let d = |c, op| after.get(IoWriter::Backend, c, op) - before.get(IoWriter::Backend, c, op);
        assert_eq!(d(IoContext::BulkRead, IoOp::Eviction), n);
        assert_eq!(d(IoContext::BulkRead, IoOp::Reuse), 100 - n);
        assert_eq!(d(IoContext::BulkRead, IoOp::Read), 100);
        assert_eq!(d(IoContext::Normal, IoOp::Eviction), 0);
        assert_eq!(d(IoContext::Normal, IoOp::Reuse), 0);
        assert_eq!(ring.stats().reuses, 100 - n);
        assert_eq!(ring.stats().clock_takes, n);
        assert_eq!(f.pool.ring_stats(RingKind::BulkRead).reuses, 100 - n);
    }

    /// Proves: a member evicted and retagged by someone else is not reused by the ring (it
    /// holds someone else's page now) but replaced; nor is a member someone else used
    /// (usage 2), nor one whose page was dropped. How: after one lap, the test uses member
    /// 0's page, drops the pages of all other members, and loads another page into one of
    /// their buffers (the free list hands out a former member); a full lap later, both
    /// other pages are still cached, in the same buffers.
    #[test]
    fn a_member_retagged_or_used_by_someone_else_is_replaced() {
        let f = fixture(128, &[]);
        fill(&f.pool, REL, 64);
        let mut ring = f.pool.ring(RingKind::BulkRead).unwrap();
        let n = ring.len() as u32;
        let mut ids = Vec::new();
        for b in 0..n {
            let buf = f.pool.read_with(tag(REL, b), Some(&mut ring)).unwrap();
            ids.push(buf.buffer_id());
        }
        drop(f.pool.read(tag(REL, 0)).unwrap());
        assert_eq!(f.pool.drop_buffers(REL, None, 1).unwrap(), n as usize - 1);
        let other = f.pool.read(tag(REL, 40)).unwrap().buffer_id();
        assert!(
            ids[1..].contains(&other),
            "the free list gave a former member"
        );
        let replaced = ring.stats().replaced;
        for b in 0..n {
            let buf = f.pool.read_with(tag(REL, 41 + b), Some(&mut ring)).unwrap();
            assert_ne!(buf.buffer_id(), ids[0], "reused a page someone else used");
            assert_ne!(
                buf.buffer_id(),
                other,
                "reused a buffer someone else retagged"
            );
        }
        assert_eq!(
            ring.stats().replaced,
            replaced + u64::from(n),
            "{:?}",
            ring.stats()
        );
        for (block, id) in [(0, ids[0]), (40, other)] {
            let b = f.pool.read(tag(REL, block)).unwrap();
            assert_eq!(
                b.buffer_id(),
                id,
                "block {block} was pushed out by the ring"
            );
        }
        f.pool.check_invariants().unwrap();
    }

    /// Proves: `extend_many_with` adds n zeroed pages with one storage call, returns them
    /// pinned in block order, counts the extension under the ring's context, and puts
    /// them in the ring (usage 1).
    #[test]
    fn extend_many_adds_pages_with_one_call_through_the_ring() {
        let f = fixture(128, &[]);
        fill(&f.pool, REL, 3);
        let mut ring = f.pool.ring(RingKind::BulkWrite).unwrap();
        let before = f.pool.stats();
        let bufs = f
            .pool
            .extend_many_with(REL, ForkNumber::Main, 5, Some(&mut ring))
            .unwrap();
        let blocks: Vec<u32> = bufs.iter().map(|b| b.tag().block).collect();
        assert_eq!(blocks, vec![3, 4, 5, 6, 7]);
        assert_eq!(f.pool.nblocks(REL, ForkNumber::Main).unwrap(), 8);
        for b in &bufs {
            assert!(b.read().iter().all(|&x| x == 0));
            assert_eq!(usage_of(&f.pool, b.buffer_id()), 1);
        }
        let after = f.pool.stats();
        let extends =
            |s: &crate::stats::IoStatsSnapshot, c| s.get(IoWriter::Backend, c, IoOp::Extend);
        assert_eq!(
            extends(&after, IoContext::BulkWrite) - extends(&before, IoContext::BulkWrite),
            5
        );
        assert_eq!(
            extends(&after, IoContext::Normal),
            extends(&before, IoContext::Normal)
        );
        assert_eq!(ring.stats().clock_takes, 5);
        drop(bufs);
        assert!(f
            .pool
            .extend_many_with(REL, ForkNumber::Main, 0, None)
            .unwrap()
            .is_empty());
    }

    /// Proves: ring sizes follow the knobs, capped at 1/8 of the pool; 0 is no ring; a
    /// growing ring starts at 256 kB (or its cap, if smaller).
    #[test]
    fn ring_sizes_follow_the_knobs_and_the_pool_cap() {
        let f = fixture(
            4096,
            &[
                ("bulkread_ring_size", "0"),
                ("vacuum_buffer_usage_limit", "1MB"),
            ],
        );
        assert!(f.pool.ring(RingKind::BulkRead).is_none());
        let v = f.pool.ring(RingKind::Vacuum).unwrap();
        assert!(v.is_growing());
        assert_eq!((v.start_len(), v.capacity()), (64, 256));
        let w = f.pool.ring(RingKind::BulkWrite).unwrap();
        assert_eq!(w.capacity(), 512, "16MB capped at 4096 / 8");
        let g = fixture(4096, &[("ring_growth", "off")]);
        let v = g.pool.ring(RingKind::Vacuum).unwrap();
        assert!(!v.is_growing());
        assert_eq!(v.len(), 512);
        let r = Ring::with_growth(RingKind::BulkRead, 1 << 20, true, &g.pool).unwrap();
        assert!(!r.is_growing(), "bulk read never grows");
    }
}
