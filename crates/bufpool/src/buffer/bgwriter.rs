//! The background writer: cleans buffers just ahead of the clock hand, so that an
//! allocation finds a clean, reusable victim instead of writing a dirty page itself
//! (PostgreSQL's BgBufferSync and bgwriter.c; seed 000).
//!
//! Owns: the bgwriter's round state (its cursor and estimator, behind `round`, a mutex only
//! rounds take), its counters, the hibernation latch, and, depending on
//! [`BgwriterStrategy`], the dirty map or the victim queue.
//!
//! A round (`BufferPool::bgwriter_round`):
//! 1. **Estimate.** Allocations since the last round (`Clock::allocations`) feed a
//!    fast-attack, slow-decay average: a higher count replaces it at once, a lower one
//!    pulls it down by 1/16 of the gap per round. Upcoming allocations = that average ×
//!    `bgwriter_lru_multiplier`. A second average, the density, is the clock-hand
//!    advance per allocation (buffers the sweep passes to find one victim), from the hand's
//!    movement and from this writer's own scans.
//! 2. **Cursor.** The bgwriter keeps its own position `next_to_clean` on the same monotonic
//!    scale as the hand. If the hand has overtaken it, it restarts at the hand; if it is
//!    ahead, the buffers between the hand and the cursor were already examined in this lap
//!    and are not scanned again: they count as `ahead / density` reusable buffers already,
//!    and at most `nbuffers - ahead` buffers remain before the cursor would lap the hand.
//!    **Lead:** the cursor is then moved to at least `hand + hand speed × batch time`
//!    (`RoundState::keep_lead`; again between batches of a long round): a buffer nearer
//!    the hand is reached while the bgwriter still pins it for its write, the sweep skips
//!    it and takes a dirty one beyond, so cleaning it buys nothing in this lap. The
//!    buffers jumped are left to the backends (`buffers_skipped`).
//! 3. **Minimum progress.** The target is at least `nbuffers × delay / 120 s` buffers
//!    beyond what is already ahead, so an idle pool is still covered every two minutes
//!    (PostgreSQL's scan_whole_pool_milliseconds).
//! 4. **Scan.** From the cursor forward until the reusable count reaches the target or the
//!    lap is done: an unpinned usage-0 buffer is reusable; if it is also dirty it is pinned
//!    (without usage credit), its content lock try-locked shared, and written through the
//!    pool's one write path `flush_locked` (WAL first). At `lru_maxpages` writes the round
//!    stops (`maxwritten_clean`). Each written block goes to a writeback context that hints
//!    the OS every `bgwriter_flush_after` bytes and at the round's end, sorted and merged
//!    (a hint left pending across a 200 ms sleep, or a 10 s hibernation, would be stale).
//! 5. **Sleep** `bgwriter_delay`; after two idle rounds (no allocations, nothing written)
//!    hibernate (below).
//!
//! Strategies (`bgwriter_strategy`):
//! - `lru`: the round above.
//! - `dirty-chain`: the same horizon (upcoming − already ahead, times the density, in
//!   buffers), but only buffers whose dirty-map bit is set are visited (`dirty_map.rs`).
//! - `mini-checkpoint`: the `lru` round, plus every [`MINI_CHECKPOINT_EVERY_ROUNDS`] rounds
//!   an all-scan of `nbuffers /` [`MINI_CHECKPOINT_SCAN_DIVISOR`] buffers from its own
//!   cursor that writes unpinned dirty buffers at any usage count, at most a quarter of
//!   `lru_maxpages` (PostgreSQL 8.1's bgwriter_all_percent / all_maxpages).
//! - `victim-queue`: the bgwriter runs the clock sweep itself for the upcoming allocations,
//!   writes dirty victims, and pushes clean usage-0 buffers to a lock-free queue
//!   (`victim_queue.rs`); an allocation pops one, re-checks it under its header lock
//!   (unpinned, usage 0, clean, no I/O) and falls back to the sweep otherwise.
//!
//! Hibernation (the handshake that cannot lose a wake-up; `tests/bgwriter_model.rs` checks
//! it with shuttle). Bgwriter: under the latch mutex, clear `wake`, store `hibernating =
//! true` (SeqCst), re-read the allocation count (SeqCst); if it moved since the round read
//! it, do not sleep; else wait on the condition variable until `wake` or stop (or the long
//! timeout, `delay` × [`HIBERNATE_DELAY_FACTOR`]). Allocator: count the allocation
//! (SeqCst `fetch_add`), then load `hibernating` (SeqCst; on x86 the same plain load a
//! Relaxed one is); only if set, take the mutex, set `wake`, clear the flag and notify.
//! Either the allocator's load sees the flag (and its notify, under the mutex, reaches a
//! waiter that checks `wake` under that mutex), or the flag store came after the load in
//! the single SeqCst order, so the count came before it and the bgwriter's re-check sees
//! the allocation. Relaxed would allow both to miss (store buffering). The common path is
//! the one extra load: no lock, no store.
//!
//! Invariants: the bgwriter (LRU scan) writes only buffers that were unpinned with usage
//! 0 when it chose them, and only through `flush_locked`, so never before the WAL is
//! durable up to the page's LSN; a failed write leaves the page dirty (the write path's
//! rule), is counted in `write_errors` and handed to the error hook, and the round goes on.
//! Locks: per buffer, the header lock for a few instructions (to pin), then a try of the
//! content lock shared, held only while the page is copied out for the write (the WAL
//! flush and the device write run on the copy, under the pin and IO_IN_PROGRESS; a
//! change meanwhile sets JUST_DIRTIED and keeps the page dirty, see
//! `BufferPool::write_locked_then`); never more than one buffer's locks at a time, never
//! a mapping partition. `round` (the round state) is held for a round but only rounds take
//! it; no backend path does. The latch mutex is held only to set or test `wake`.

use std::time::{Duration, Instant};

use super::dirty_map::DirtyMap;
use super::state::*;
use super::victim_queue::VictimQueue;
use super::writer_crew::WriterCrew;
use super::{BgwriterIo, Io};
use super::{BgwriterOptions, BgwriterStrategy, BufferError, BufferPool, BufferRef};
use crate::smgr::PageTarget;
use crate::smgr::WritebackContext;
use crate::stats::{set_thread_writer, IoContext, IoOp, IoWriter};
use crate::sync::{Arc, AtomicBool, AtomicU64, Condvar, Mutex, Ordering};
use crate::types::BufferTag;
use crate::vfs::write_ring::{PageWriteResult, WriteRing, WriteSource};
use crate::vfs::VfsFile;

/// Weight of a new sample in the smoothed allocation rate and density: 1/16, PostgreSQL's
/// smoothing_samples (an average over roughly the last 16 rounds, 3.2 s at 200 ms).
pub const SMOOTHING_SAMPLES: f64 = 16.0;
/// Starting density (buffers the sweep passes per allocation): PostgreSQL's 10.0, a
/// pessimistic guess replaced by measurements within a few rounds.
pub const INITIAL_DENSITY: f64 = 10.0;
/// The whole pool is examined at least once per this many ms even without demand:
/// PostgreSQL's scan_whole_pool_milliseconds (2 minutes).
pub const SCAN_WHOLE_POOL_MS: u64 = 120_000;
/// Idle rounds (no allocations, nothing written) before hibernating: PostgreSQL's rule
/// (it hibernates after a second consecutive round that could).
pub const HIBERNATE_AFTER_IDLE_ROUNDS: u32 = 2;
/// The shortest nap between rounds, ms (PostgreSQL's smallest bgwriter_delay).
pub const MIN_NAP_MS: u64 = 10;
/// A hibernating bgwriter wakes on its own after `delay` × this: PostgreSQL's
/// HIBERNATE_FACTOR (10 s at the default delay).
pub const HIBERNATE_DELAY_FACTOR: u64 = 50;
/// Mini-checkpoint: an all-scan every this many rounds (1 s at the default delay), so the
/// hot dirty buffers the LRU scan never reaches are written in the background.
pub const MINI_CHECKPOINT_EVERY_ROUNDS: u64 = 5;
/// Mini-checkpoint: each all-scan examines `nbuffers /` this, so the whole pool is passed
/// every 60 all-scans (a minute at the default delay); PostgreSQL 8.1's all_percent was
/// 0.333% per round, i.e. the pool every 60 s at its default 200 ms.
pub const MINI_CHECKPOINT_SCAN_DIVISOR: u64 = 60;
/// Victim queue: stale ids an allocation pops (pinned, used or dirtied since queued)
/// before it gives up on the queue and sweeps; bounds the allocation's extra work.
pub const VICTIM_QUEUE_POPS_MAX: u32 = 8;
/// Victim queue: its capacity is the per-round write cap, within these bounds (a buffer id
/// is 4 bytes and a cell 16, so 64 Ki cells are 1 MiB).
pub const VICTIM_QUEUE_MIN: usize = 64;
pub const VICTIM_QUEUE_MAX: usize = 1 << 16;

/// Called with every error of a bgwriter write (the page stays dirty; the bgwriter goes
/// on). Without a hook, the thread prints the error to stderr.
pub type BgwriterErrorHook = Arc<dyn Fn(&BufferError) + Send + Sync>;

/// What one round did (returned by [`BufferPool::bgwriter_round`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RoundReport {
    /// Allocations since the previous round.
    pub recent_allocations: u64,
    /// The round's target: reusable buffers it wanted ahead of the hand.
    pub upcoming_estimate: u64,
    /// Buffers examined (descriptors read; for dirty-chain, dirty-map hits).
    pub buffers_scanned: u64,
    /// Buffers passed over unexamined because the hand would reach them before a write
    /// of them could end (see `RoundState::min_lead`).
    pub buffers_skipped: u64,
    /// Reusable buffers found or made by this round's scan.
    pub reusable_found: u64,
    /// Pages written by the LRU scan (or the victim-queue sweep).
    pub buffers_written: u64,
    /// Pages written by the mini-checkpoint all-scan.
    pub mini_checkpoint_written: u64,
    /// Buffers pushed to the victim queue.
    pub victims_queued: u64,
    /// Writes that failed (pages left dirty).
    pub write_errors: u64,
    /// The round stopped at `lru_maxpages`.
    pub hit_maxpages: bool,
    /// Nothing to do: no allocations and nothing written.
    pub idle: bool,
    /// A stop request ended the round early.
    pub stopped: bool,
    pub elapsed: Duration,
    /// The allocation count the round read (for the hibernation re-check).
    allocations_seen: u64,
}

/// The bgwriter's counters (pg_stat_bgwriter and pg_stat_io names), a snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BgwriterStats {
    /// Buffers handed out by replacement (sweep, free list or victim queue).
    pub buffers_alloc: u64,
    /// Pages the bgwriter wrote (all its scans).
    pub buffers_clean: u64,
    /// Rounds that stopped because they wrote `lru_maxpages` pages.
    pub maxwritten_clean: u64,
    /// Pages backends wrote themselves (pg_stat_io writes by backend, all contexts).
    pub buffers_backend: u64,
    /// Of `buffers_clean`, pages written by the mini-checkpoint all-scan.
    pub buffers_mini_checkpoint: u64,
    pub rounds: u64,
    pub hibernations: u64,
    /// Bgwriter writes that failed (pages left dirty).
    pub write_errors: u64,
    /// Buffers examined by all rounds.
    pub buffers_scanned: u64,
    /// Time spent in rounds, and the longest round.
    pub round_time_total: Duration,
    pub round_time_max: Duration,
    /// Victim queue: buffers pushed by the bgwriter, and popped by allocations.
    pub victims_queued: u64,
    pub victims_popped: u64,
    /// The allocation count the latest round read: how far the bgwriter has caught up
    /// with demand (`buffers_alloc - buffers_alloc_seen` allocations it has not seen yet).
    pub buffers_alloc_seen: u64,
    /// Wasted writes: pages the bgwriter cleaned that were dirtied again before any
    /// allocation reused their buffer (the write bought no clean victim).
    pub buffers_redirtied: u64,
    /// Dirty victims the clock sweep handed to an allocation (a backend or ring write
    /// follows), split by where the hand was against the bgwriter's cursor: beyond it
    /// (`unreached`: the bgwriter had not looked there yet this lap) or behind it
    /// (`passed`: it looked and the buffer was not reusable then, or was dirtied again).
    pub dirty_victims_unreached: u64,
    pub dirty_victims_passed: u64,
    /// Rounds that found the hand past their cursor (the bgwriter was lapped and
    /// restarted at the hand).
    pub rounds_lapped: u64,
    /// Buffers rounds jumped over, unexamined, to keep their lead over the hand.
    pub buffers_skipped: u64,
}

/// The cursor and the estimator: owned by whoever runs a round.
#[derive(Debug)]
struct RoundState {
    /// Whether `prev_hand` holds a previous round's reading (PostgreSQL's
    /// saved_info_valid): only then is the hand's movement a density sample.
    saved: bool,
    prev_hand: u64,
    prev_allocations: u64,
    /// The next clock position to examine, on the hand's monotonic scale.
    next_to_clean: u64,
    smoothed_allocations: f64,
    smoothed_density: f64,
    round_number: u64,
    /// The mini-checkpoint's own cursor (buffer index).
    all_scan_next: u64,
    writeback: WritebackContext,
    /// The hand's speed, buffers per ms (smoothed; 0 until measured), and when `prev_hand`
    /// was read.
    hand_speed: f64,
    prev_hand_at: Option<Instant>,
    /// How long writing one batch takes, ms (smoothed; 0 until measured).
    batch_ms: f64,
    /// The io_uring batches are written through (`bgwriter_io_method = io_uring`), set up
    /// at the first batch.
    ring: RingSetup,
}

/// The bgwriter's io_uring, once tried.
enum RingSetup {
    Untried,
    Ready(Box<WriteRing>),
    /// io_uring is unavailable (or not asked for): batches go to threads.
    Unavailable,
}

impl std::fmt::Debug for RingSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RingSetup::Untried => "Untried",
            RingSetup::Ready(_) => "Ready",
            RingSetup::Unavailable => "Unavailable",
        })
    }
}

/// One batch going through the bgwriter's io_uring: the [`WriteSource`] that claims,
/// copies, WAL-flushes and checksums each page as the ring asks for it (the same steps as
/// `write_locked_then`, content lock held for the copy only), and ends each page's I/O as
/// its write completes.
struct RingBatch<'a> {
    pool: &'a BufferPool,
    ids: &'a [u32],
    next: usize,
    /// The pages handed to the ring, by their number in it: buffer, target, and whether
    /// its write was reported done.
    in_kernel: Vec<(u32, PageTarget, bool)>,
    out: Vec<WriteDone>,
}

impl Drop for RingBatch<'_> {
    /// After a panic in the pipeline (which first waited for the kernel's writes, see
    /// `write_ring`), ends the write I/O of every page handed to the ring and not reported
    /// done as failed, so nobody waits on those buffers forever; they stay dirty.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for (id, _, done) in &self.in_kernel {
            if !done {
                self.pool
                    .terminate_io(&self.pool.descs[*id as usize], Io::Write, false);
            }
        }
    }
}

impl WriteSource for RingBatch<'_> {
    fn next(&mut self, buf: &mut [u8]) -> Option<(Arc<dyn VfsFile>, u64)> {
        loop {
            if self.pool.bgwriter.stop.load(Ordering::Relaxed) {
                return None;
            }
            let &id = self.ids.get(self.next)?;
            self.next += 1;
            match self.pool.claim_copy_for_ring(id, buf) {
                Ok(target) => {
                    let at = (target.file.clone(), target.offset);
                    self.in_kernel.push((id, target, false));
                    return Some(at);
                }
                Err(done) => self.out.push(done),
            }
        }
    }

    fn done(&mut self, n: usize, (result, took): PageWriteResult) {
        let (id, target, done) = &mut self.in_kernel[n];
        *done = true;
        self.out
            .push(self.pool.finish_ring_write(*id, target, result, took));
    }
}

impl RoundState {
    fn new(writeback_pages: usize) -> Self {
        Self {
            saved: false,
            prev_hand: 0,
            prev_allocations: 0,
            next_to_clean: 0,
            smoothed_allocations: 0.0,
            smoothed_density: INITIAL_DENSITY,
            round_number: 0,
            all_scan_next: 0,
            writeback: WritebackContext::new(writeback_pages),
            hand_speed: 0.0,
            prev_hand_at: None,
            batch_ms: 0.0,
            ring: RingSetup::Untried,
        }
    }

    /// The least lead over the hand worth cleaning at: the buffers the hand passes while
    /// one batch is written. A buffer closer to the hand than this is reached before the
    /// bgwriter's write of it ends: the sweep skips it while pinned (and takes a dirty one
    /// beyond), so the write buys no victim in this lap. Capped at a quarter of the pool.
    fn min_lead(&self, nbuffers: u64) -> u64 {
        ((self.hand_speed * self.batch_ms).ceil() as u64).min(nbuffers / 4)
    }

    /// Moves the cursor to at least `hand + min_lead` (the buffers it skips are left to
    /// the backends: they get there first). Returns how many it skipped.
    fn keep_lead(&mut self, hand: u64, nbuffers: u64) -> u64 {
        let target = hand + self.min_lead(nbuffers);
        let skipped = target.saturating_sub(self.next_to_clean.max(hand));
        self.next_to_clean = self.next_to_clean.max(target);
        skipped
    }
}

#[derive(Debug, Default)]
struct Counters {
    buffers_clean: AtomicU64,
    maxwritten_clean: AtomicU64,
    buffers_mini_checkpoint: AtomicU64,
    rounds: AtomicU64,
    hibernations: AtomicU64,
    write_errors: AtomicU64,
    buffers_scanned: AtomicU64,
    round_ns_total: AtomicU64,
    round_ns_max: AtomicU64,
    victims_queued: AtomicU64,
    victims_popped: AtomicU64,
    allocations_seen: AtomicU64,
    buffers_redirtied: AtomicU64,
    dirty_victims_unreached: AtomicU64,
    dirty_victims_passed: AtomicU64,
    rounds_lapped: AtomicU64,
    buffers_skipped: AtomicU64,
}

/// The pool's bgwriter part.
pub(super) struct Bgwriter {
    options: BgwriterOptions,
    maxpages: u64,
    round: Mutex<RoundState>,
    /// The round's cursor (`next_to_clean`), published at each batch and round end for
    /// the allocations' dirty-victim counters (0: no round yet).
    cursor: AtomicU64,
    /// How batches are written, once the first round decided (an [`IoInEffect`] as u64).
    io_in_effect: AtomicU64,
    counters: Counters,
    /// Raised by a hibernating bgwriter; an allocation that sees it wakes the bgwriter.
    hibernating: AtomicBool,
    /// Set by an allocation that saw `hibernating` (under the latch mutex).
    latch: Mutex<bool>,
    latch_cond: Condvar,
    /// Asks the running round and the thread to stop.
    stop: AtomicBool,
    /// A thread is running (at most one).
    running: AtomicBool,
    error_hook: Mutex<Option<BgwriterErrorHook>>,
    dirty_map: Option<DirtyMap>,
    victim_queue: Option<VictimQueue>,
}

impl std::fmt::Debug for Bgwriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bgwriter")
            .field("options", &self.options)
            .field("maxpages", &self.maxpages)
            .finish_non_exhaustive()
    }
}

impl Bgwriter {
    pub(super) fn new(options: BgwriterOptions, nbuffers: usize, page_size: usize) -> Self {
        let maxpages = options.lru_maxpages_for(nbuffers);
        let writeback_pages = (options.flush_after_bytes / page_size as u64) as usize;
        Self {
            options,
            maxpages,
            round: Mutex::new(RoundState::new(writeback_pages)),
            cursor: AtomicU64::new(0),
            io_in_effect: AtomicU64::new(IoInEffect::Undecided as u64),
            counters: Counters::default(),
            hibernating: AtomicBool::new(false),
            latch: Mutex::new(false),
            latch_cond: Condvar::new(),
            stop: AtomicBool::new(false),
            running: AtomicBool::new(false),
            error_hook: Mutex::new(None),
            dirty_map: (options.strategy == BgwriterStrategy::DirtyChain)
                .then(|| DirtyMap::new(nbuffers)),
            victim_queue: (options.strategy == BgwriterStrategy::VictimQueue).then(|| {
                VictimQueue::new((maxpages as usize).clamp(VICTIM_QUEUE_MIN, VICTIM_QUEUE_MAX))
            }),
        }
    }

    /// A buffer turned dirty (`PageWriteGuard::mark_dirty`); `before` is its state before.
    #[inline]
    pub(super) fn note_dirty(&self, id: u32, before: u64) {
        if before & BGWRITER_CLEANED != 0 {
            self.counters
                .buffers_redirtied
                .fetch_add(1, Ordering::Relaxed);
        }
        debug_assert_eq!(before & DIRTY, 0, "called on the clean -> dirty transition");
        if let Some(m) = &self.dirty_map {
            m.set(id);
        }
    }

    /// A write cleaned buffer `id`; the caller holds its header lock.
    #[inline]
    pub(super) fn note_clean(&self, id: u32) {
        if let Some(m) = &self.dirty_map {
            m.clear(id);
        }
    }

    /// Called by every allocation after it is counted: wakes a hibernating bgwriter. The
    /// common path is one load.
    #[inline]
    pub(super) fn note_allocation(&self) {
        if self.hibernating.load(Ordering::SeqCst) {
            self.wake();
        }
    }

    #[cold]
    fn wake(&self) {
        let mut woken = self.latch.lock();
        *woken = true;
        self.hibernating.store(false, Ordering::SeqCst);
        self.latch_cond.notify_all();
    }

    /// An allocation took a dirty victim with the hand at `hand`: counts it against the
    /// published cursor (see [`BgwriterStats::dirty_victims_unreached`]). Off the hot path:
    /// only dirty victims get here, and they are about to cost a write.
    fn note_dirty_victim(&self, hand: u64) {
        let cursor = self.cursor.load(Ordering::Relaxed);
        if cursor == 0 || !self.options.enabled {
            return;
        }
        let c = if hand > cursor {
            &self.counters.dirty_victims_unreached
        } else {
            &self.counters.dirty_victims_passed
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn victim_queue(&self) -> Option<&VictimQueue> {
        self.victim_queue.as_ref()
    }

    pub(super) fn count_victim_popped(&self) {
        self.counters.victims_popped.fetch_add(1, Ordering::Relaxed);
    }
}

/// The bgwriter thread's helpers, as the rounds see them.
type Crew = WriterCrew<WriteDone>;

/// What a write of a pinned buffer did.
enum WriteDone {
    Written(BufferTag),
    /// Clean by the time the write looked (someone else wrote it).
    Clean,
    /// Held exclusively: not written, not reusable now.
    Busy,
    Failed(BufferError),
}

/// Pinned candidates per writer thread before a round writes them (`bgwriter_writers` >
/// 1): enough to keep each thread busy for a few device latencies per spawn.
const BATCH_PER_WRITER: usize = 16;
/// Weight of a new sample (one per round) in the hand's smoothed speed: 1/4, so a change
/// of pace is followed within a few rounds.
const HAND_SPEED_SAMPLES: f64 = 4.0;
/// How the bgwriter keeps its writes in flight (`Bgwriter::io_in_effect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
enum IoInEffect {
    /// No round has decided yet.
    Undecided = 0,
    /// Through its io_uring (`bgwriter_io_method = io_uring`).
    Uring = 1,
    /// On writer threads (`bgwriter_io_method = threads`, or io_uring unavailable).
    Threads = 2,
    /// One write at a time (`bgwriter_writers = 1`, or the victim queue).
    Single = 3,
}

impl IoInEffect {
    fn from_u64(v: u64) -> IoInEffect {
        match v {
            1 => IoInEffect::Uring,
            2 => IoInEffect::Threads,
            3 => IoInEffect::Single,
            _ => IoInEffect::Undecided,
        }
    }

    fn name(self) -> &'static str {
        match self {
            IoInEffect::Uring => "io_uring",
            IoInEffect::Threads => "threads",
            IoInEffect::Single => "single",
            IoInEffect::Undecided => "undecided",
        }
    }
}
/// Weight of one write's time in the streaming scan's smoothed write time (one sample
/// per page, so a longer average than the batches' one per batch).
const WRITE_MS_SAMPLES: f64 = 64.0;
/// The LRU scan re-checks its lead over the hand every this many buffers (between batches).
const LEAD_CHECK_EVERY: u64 = 64;

enum Visited {
    /// Pinned, used recently, or busy: not reusable now.
    NotReusable,
    /// Unpinned, usage 0, clean.
    Reusable,
    /// Unpinned, usage 0, was dirty and is now written.
    Written,
    /// The write failed; the page stays dirty.
    Failed,
}

/// An LRU scan whose writes go through the bgwriter's io_uring (`bgwriter_io_method =
/// io_uring`): the ring asks for a page whenever a write slot is free, and [`LruStream::
/// next`] scans on from the cursor to the next dirty reusable buffer, pins it, claims its
/// write and copies it (as [`RingBatch`] does). So a buffer is pinned only while its own
/// write is in flight, not for a whole batch, and the lead over the hand (`min_lead`) is
/// the hand's speed × one write's time. The scan stops where the thread path stops: the
/// lap is done, enough reusable buffers are ahead, or `lru_maxpages` pages are written.
struct LruStream<'a> {
    pool: &'a BufferPool,
    state: &'a mut RoundState,
    report: &'a mut RoundReport,
    to_scan: u64,
    reusable: u64,
    upcoming: u64,
    nbuffers: u64,
    /// The pages handed to the ring, by their number in it: pin and target (taken when
    /// the write completes: the pin is dropped then).
    in_kernel: Vec<Option<(BufferRef<'a>, PageTarget)>>,
}

impl WriteSource for LruStream<'_> {
    fn next(&mut self, buf: &mut [u8]) -> Option<(Arc<dyn VfsFile>, u64)> {
        let pool = self.pool;
        loop {
            if self.to_scan == 0
                || self.reusable >= self.upcoming
                || self.report.buffers_written >= pool.bgwriter.maxpages
            {
                self.report.hit_maxpages |= self.report.buffers_written >= pool.bgwriter.maxpages;
                return None;
            }
            if pool.bgwriter.stop.load(Ordering::Relaxed) {
                self.report.stopped = true;
                return None;
            }
            if self.report.buffers_scanned % LEAD_CHECK_EVERY == 0 {
                // The hand may have come close meanwhile.
                let skipped = self.state.keep_lead(pool.clock.hand(), self.nbuffers);
                self.report.buffers_skipped += skipped;
                self.to_scan = self.to_scan.saturating_sub(skipped);
                pool.bgwriter
                    .cursor
                    .store(self.state.next_to_clean, Ordering::Relaxed);
                if self.to_scan == 0 {
                    return None;
                }
            }
            let id = (self.state.next_to_clean % self.nbuffers) as u32;
            self.state.next_to_clean += 1;
            self.to_scan -= 1;
            self.report.buffers_scanned += 1;
            let pinned = match pool.pin_for_write(id, true) {
                Err(Visited::Reusable) => {
                    self.reusable += 1;
                    continue;
                }
                Err(_) => continue,
                Ok(p) => p,
            };
            match pool.claim_copy_for_ring(id, buf) {
                Ok(target) => {
                    // Counted as written now (so the round's caps see it), corrected in
                    // `done` if the write fails.
                    self.reusable += 1;
                    self.report.buffers_written += 1;
                    let at = (target.file.clone(), target.offset);
                    self.in_kernel.push(Some((pinned, target)));
                    return Some(at);
                }
                Err(done) => {
                    drop(pinned);
                    match pool.account_write(self.state, self.report, done) {
                        Visited::Reusable => self.reusable += 1,
                        Visited::Written | Visited::NotReusable | Visited::Failed => {}
                    }
                }
            }
        }
    }

    fn done(&mut self, n: usize, (result, took): PageWriteResult) {
        let pool = self.pool;
        let (pinned, target) = self.in_kernel[n].take().expect("each page completes once");
        let done = pool.finish_ring_write(pinned.id, &target, result, took);
        // Clean (or failed) now: the buffer may be reused.
        drop(pinned);
        let state = &mut *self.state;
        // How long a picked buffer stays pinned: one write's time (the lead's factor).
        let ms = took.as_secs_f64() * 1e3;
        if state.batch_ms == 0.0 {
            state.batch_ms = ms;
        } else {
            state.batch_ms += (ms - state.batch_ms) / WRITE_MS_SAMPLES;
        }
        if !matches!(
            pool.account_write(state, self.report, done),
            Visited::Written
        ) {
            self.report.buffers_written = self.report.buffers_written.saturating_sub(1);
        }
    }
}

/// Stops and joins the bgwriter thread when dropped (or by [`BgwriterHandle::stop`]).
#[derive(Debug)]
pub struct BgwriterHandle {
    pool: Arc<BufferPool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BgwriterHandle {
    /// Asks the thread to stop without waiting: a round in progress ends at its next
    /// buffer, a sleep ends at once.
    pub fn request_stop(&self) {
        self.pool.bgwriter_request_stop();
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(t) = self.thread.take() {
            self.pool.bgwriter_request_stop();
            let _ = t.join();
            let b = &self.pool.bgwriter;
            b.stop.store(false, Ordering::SeqCst);
            b.running.store(false, Ordering::SeqCst);
        }
    }
}

impl Drop for BgwriterHandle {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

impl BufferPool {
    /// Starts the bgwriter thread (named `bufpool-bgwriter`). Returns None if one is
    /// already running for this pool. The thread stops when the handle is dropped.
    pub fn start_bgwriter(self: &Arc<Self>) -> std::io::Result<Option<BgwriterHandle>> {
        if self.bgwriter.running.swap(true, Ordering::SeqCst) {
            return Ok(None);
        }
        let pool = self.clone();
        let thread = std::thread::Builder::new()
            .name("bufpool-bgwriter".into())
            .spawn(move || pool.bgwriter_run())
            .inspect_err(|_| self.bgwriter.running.store(false, Ordering::SeqCst))?;
        Ok(Some(BgwriterHandle {
            pool: self.clone(),
            thread: Some(thread),
        }))
    }

    /// The bgwriter's options in effect (`lru_maxpages` resolved in
    /// [`BufferPool::bgwriter_maxpages`]).
    pub fn bgwriter_options(&self) -> BgwriterOptions {
        self.bgwriter.options
    }

    /// The per-round write cap in effect (the automatic value if not set).
    pub fn bgwriter_maxpages(&self) -> u64 {
        self.bgwriter.maxpages
    }

    /// Sets (or with None removes) the hook that receives every failed bgwriter write.
    pub fn set_bgwriter_error_hook(&self, hook: Option<BgwriterErrorHook>) {
        *self.bgwriter.error_hook.lock() = hook;
    }

    /// The bgwriter's counters.
    pub fn bgwriter_stats(&self) -> BgwriterStats {
        let c = &self.bgwriter.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        BgwriterStats {
            buffers_alloc: self.clock.allocations(),
            buffers_clean: get(&c.buffers_clean),
            maxwritten_clean: get(&c.maxwritten_clean),
            buffers_backend: self.stats().by_writer(IoWriter::Backend, IoOp::Write),
            buffers_mini_checkpoint: get(&c.buffers_mini_checkpoint),
            rounds: get(&c.rounds),
            hibernations: get(&c.hibernations),
            write_errors: get(&c.write_errors),
            buffers_scanned: get(&c.buffers_scanned),
            round_time_total: Duration::from_nanos(get(&c.round_ns_total)),
            round_time_max: Duration::from_nanos(get(&c.round_ns_max)),
            victims_queued: get(&c.victims_queued),
            victims_popped: get(&c.victims_popped),
            buffers_alloc_seen: get(&c.allocations_seen),
            buffers_redirtied: get(&c.buffers_redirtied),
            dirty_victims_unreached: get(&c.dirty_victims_unreached),
            dirty_victims_passed: get(&c.dirty_victims_passed),
            rounds_lapped: get(&c.rounds_lapped),
            buffers_skipped: get(&c.buffers_skipped),
        }
    }

    /// Whether the bgwriter is hibernating (for tests and monitoring).
    pub fn bgwriter_hibernating(&self) -> bool {
        self.bgwriter.hibernating.load(Ordering::SeqCst)
    }

    /// Asks a running bgwriter loop (and a round in progress) to stop.
    pub fn bgwriter_request_stop(&self) {
        let b = &self.bgwriter;
        b.stop.store(true, Ordering::SeqCst);
        // Under the latch mutex, so a thread about to sleep sees the flag or the notify.
        let _latch = b.latch.lock();
        b.latch_cond.notify_all();
    }

    /// The bgwriter thread's body: rounds, naps and hibernation until a stop request.
    /// [`BufferPool::start_bgwriter`] runs it on its own thread; a model test runs it on a
    /// modeled one. I/O is counted as the bgwriter's.
    #[doc(hidden)]
    pub fn bgwriter_run(&self) {
        let helpers = self.bgwriter_helpers();
        if helpers == 0 {
            return self.bgwriter_loop(None);
        }
        // The writers that help the rounds' batches live as long as this loop (a thread
        // per batch cost a quarter of the bgwriter's CPU: see `writer_crew.rs`).
        let crew = WriterCrew::new(helpers);
        let stop = &self.bgwriter.stop;
        std::thread::scope(|scope| {
            for n in 1..=helpers {
                let crew = &crew;
                // A helper that cannot start only means fewer writes in flight: `run`
                // never waits for a helper that does not join.
                let _ = std::thread::Builder::new()
                    .name(format!("bufpool-bgw-{n}"))
                    .spawn_scoped(scope, move || {
                        set_thread_writer(IoWriter::Bgwriter);
                        crew.serve(|id| self.write_pinned(id), stop);
                    });
            }
            self.bgwriter_loop(Some(&crew));
            crew.shutdown();
        });
    }

    /// Helper threads the bgwriter thread keeps for its rounds' batches: one fewer than
    /// the writes a batch can have in flight (the round's own thread is the last writer),
    /// none with one writer, a pool too small for batches, or under shuttle (whose model
    /// threads cannot be served by plain ones).
    fn bgwriter_helpers(&self) -> usize {
        if cfg!(feature = "shuttle")
            || self.bgwriter.options.strategy == BgwriterStrategy::VictimQueue
            || self.bgwriter_ring_ready(&mut self.bgwriter.round.lock())
        {
            return 0;
        }
        self.bgwriter
            .options
            .writers
            .min(self.batch_cap())
            .saturating_sub(1)
    }

    /// Sets up the bgwriter's io_uring if `bgwriter_io_method = io_uring` asks for one and
    /// none was tried yet; returns whether batches go through it. Where io_uring is
    /// unavailable, says why once and leaves batches to threads.
    fn bgwriter_ring_ready(&self, state: &mut RoundState) -> bool {
        if matches!(state.ring, RingSetup::Untried) {
            let o = &self.bgwriter.options;
            let single = o.writers <= 1 || o.strategy == BgwriterStrategy::VictimQueue;
            state.ring = if single || o.io != BgwriterIo::IoUring || cfg!(feature = "shuttle") {
                RingSetup::Unavailable
            } else {
                let ring = WriteRing::new();
                match ring.fallback_reason() {
                    None => RingSetup::Ready(Box::new(ring)),
                    Some(why) => {
                        tracing::warn!(
                            target: "bufpool::bgwriter",
                            "bgwriter_io_method = io_uring unavailable ({why}); using threads"
                        );
                        RingSetup::Unavailable
                    }
                }
            };
            let io = match state.ring {
                RingSetup::Ready(_) => IoInEffect::Uring,
                _ if single => IoInEffect::Single,
                _ => IoInEffect::Threads,
            };
            self.bgwriter
                .io_in_effect
                .store(io as u64, Ordering::Relaxed);
        }
        matches!(state.ring, RingSetup::Ready(_))
    }
    /// How the bgwriter keeps its writes in flight, as decided at its first round (or
    /// thread start): "io_uring", "threads" (`bgwriter_io_method = threads`, or io_uring
    /// unavailable), "single" (`bgwriter_writers = 1` or the victim queue: one write at a
    /// time), or "undecided" before that.
    pub fn bgwriter_io_in_effect(&self) -> &'static str {
        IoInEffect::from_u64(self.bgwriter.io_in_effect.load(Ordering::Relaxed)).name()
    }

    /// The most dirty candidates a round pins before writing them as one batch.
    fn batch_cap(&self) -> usize {
        // Never pin more than a sliver of a small pool.
        (self.bgwriter.options.writers * BATCH_PER_WRITER).min((self.descs.len() / 16).max(1))
    }

    fn bgwriter_loop(&self, crew: Option<&Crew>) {
        let previous = set_thread_writer(IoWriter::Bgwriter);
        let mut idle_rounds = 0;
        let mut last = (self.clock.hand(), Instant::now());
        while !self.bgwriter.stop.load(Ordering::SeqCst) {
            let report = self.bgwriter_round_with(crew);
            if report.stopped {
                break;
            }
            if report.write_errors > 0 && self.bgwriter.error_hook.lock().is_none() {
                eprintln!(
                    "bufpool bgwriter: {} page write(s) failed this round; the pages stay dirty",
                    report.write_errors
                );
            }
            idle_rounds = if report.idle { idle_rounds + 1 } else { 0 };
            if idle_rounds >= HIBERNATE_AFTER_IDLE_ROUNDS {
                self.bgwriter_hibernate(report.allocations_seen);
                idle_rounds = 0;
            } else {
                let nap = self.bgwriter_nap_ms(&mut last);
                self.bgwriter_nap(nap);
            }
        }
        set_thread_writer(previous);
    }

    /// How long to nap after a round: `bgwriter_delay`, unless the clock hand, at the
    /// speed it moved since the last nap (`last`: the hand and when it was read), would
    /// reach the end of what the bgwriter has looked at (its cursor) sooner; then half the
    /// time the lead lasts, at least [`MIN_NAP_MS`]. So a busy pool gets rounds as often
    /// as its hand needs them, each still bounded by `bgwriter_lru_maxpages`, and a quiet
    /// one the full delay; `bgwriter_delay` is the longest nap, not a fixed one.
    fn bgwriter_nap_ms(&self, last: &mut (u64, Instant)) -> u64 {
        let delay = self.bgwriter.options.delay_ms;
        let hand = self.clock.hand();
        let now = Instant::now();
        let moved = hand.saturating_sub(last.0) as f64;
        let ms = now.duration_since(last.1).as_secs_f64() * 1e3;
        *last = (hand, now);
        if moved <= 0.0 || ms <= 0.0 {
            return delay;
        }
        let cursor = self.bgwriter.round.lock().next_to_clean;
        let lead = cursor.saturating_sub(hand) as f64;
        let lasts_ms = lead / (moved / ms);
        ((lasts_ms / 2.0) as u64).clamp(MIN_NAP_MS.min(delay), delay)
    }

    /// Sleeps `ms` or until a stop request. Under shuttle, time does not pass:
    /// a nap is a yield, so the model explores rounds racing allocations.
    fn bgwriter_nap(&self, ms: u64) {
        #[cfg(feature = "shuttle")]
        {
            let _ = ms;
            crate::sync::yield_now();
        }
        #[cfg(not(feature = "shuttle"))]
        {
            let b = &self.bgwriter;
            let latch = b.latch.lock();
            if !b.stop.load(Ordering::SeqCst) {
                let delay = Duration::from_millis(ms);
                drop(b.latch_cond.wait_for(latch, delay));
            }
        }
    }

    /// Hibernates until an allocation after `allocations_seen` wakes it, a stop request,
    /// or the long timeout (see the module doc, "Hibernation").
    fn bgwriter_hibernate(&self, allocations_seen: u64) {
        let b = &self.bgwriter;
        let mut woken = b.latch.lock();
        *woken = false;
        b.hibernating.store(true, Ordering::SeqCst);
        if self.clock.allocations() != allocations_seen || b.stop.load(Ordering::SeqCst) {
            b.hibernating.store(false, Ordering::SeqCst);
            return;
        }
        b.counters.hibernations.fetch_add(1, Ordering::Relaxed);
        let long = Duration::from_millis(b.options.delay_ms * HIBERNATE_DELAY_FACTOR);
        while !*woken && !b.stop.load(Ordering::SeqCst) {
            let (latch, timed_out) = b.latch_cond.wait_for(woken, long);
            woken = latch;
            if timed_out {
                break;
            }
        }
        *woken = false;
        b.hibernating.store(false, Ordering::SeqCst);
    }

    /// Runs one bgwriter round now, on the calling thread (its writes are counted as the
    /// bgwriter's), and returns what it did. The thread calls this; so can an experiment
    /// or a test, with or without the thread (rounds take turns).
    pub fn bgwriter_round(&self) -> RoundReport {
        self.bgwriter_round_with(None)
    }

    /// [`Self::bgwriter_round`] with the bgwriter thread's helpers (None: a batch starts
    /// its own scoped threads).
    fn bgwriter_round_with(&self, crew: Option<&Crew>) -> RoundReport {
        let start = Instant::now();
        let previous = set_thread_writer(IoWriter::Bgwriter);
        let mut state = self.bgwriter.round.lock();
        self.bgwriter_ring_ready(&mut state);
        let mut report = match self.bgwriter.options.strategy {
            BgwriterStrategy::VictimQueue => self.victim_queue_round(&mut state),
            strategy => {
                let dirty_only = strategy == BgwriterStrategy::DirtyChain;
                let mut r = self.lru_round(&mut state, dirty_only, crew);
                if strategy == BgwriterStrategy::MiniCheckpoint
                    && !r.stopped
                    && state.round_number % MINI_CHECKPOINT_EVERY_ROUNDS == 0
                {
                    self.mini_checkpoint(&mut state, &mut r);
                }
                r
            }
        };
        state.round_number += 1;
        // A hint; a failure is not a lost write (the checkpoint's fsync reports those).
        let _ = state.writeback.issue(&self.smgr, IoContext::Normal);
        drop(state);
        set_thread_writer(previous);
        report.idle = report.recent_allocations == 0
            && report.buffers_written == 0
            && report.mini_checkpoint_written == 0;
        report.elapsed = start.elapsed();
        let c = &self.bgwriter.counters;
        let ns = report.elapsed.as_nanos().min(u128::from(u64::MAX)) as u64;
        c.rounds.fetch_add(1, Ordering::Relaxed);
        c.round_ns_total.fetch_add(ns, Ordering::Relaxed);
        c.round_ns_max.fetch_max(ns, Ordering::Relaxed);
        c.buffers_scanned
            .fetch_add(report.buffers_scanned, Ordering::Relaxed);
        c.buffers_skipped
            .fetch_add(report.buffers_skipped, Ordering::Relaxed);
        c.buffers_clean.fetch_add(
            report.buffers_written + report.mini_checkpoint_written,
            Ordering::Relaxed,
        );
        c.buffers_mini_checkpoint
            .fetch_add(report.mini_checkpoint_written, Ordering::Relaxed);
        c.maxwritten_clean
            .fetch_add(u64::from(report.hit_maxpages), Ordering::Relaxed);
        c.write_errors
            .fetch_add(report.write_errors, Ordering::Relaxed);
        c.victims_queued
            .fetch_add(report.victims_queued, Ordering::Relaxed);
        c.allocations_seen
            .fetch_max(report.allocations_seen, Ordering::Relaxed);
        report
    }

    /// Step 1 of a round: reads the hand and the allocation count, updates the smoothed
    /// allocation rate and density, and returns (recent allocations, upcoming estimate
    /// before the minimum-progress floor).
    fn bgwriter_estimate(&self, state: &mut RoundState, report: &mut RoundReport) -> (u64, f64) {
        let hand = self.clock.hand();
        let allocations = self.clock.allocations();
        report.allocations_seen = allocations;
        // Counted from the pool's creation for the first round (allocations made during
        // recovery are demand too), from the previous round after that.
        let recent = allocations.wrapping_sub(state.prev_allocations);
        let now = Instant::now();
        if state.saved {
            let hand_moved = hand.wrapping_sub(state.prev_hand);
            if recent > 0 && hand_moved > 0 {
                let sample = hand_moved as f64 / recent as f64;
                state.smoothed_density += (sample - state.smoothed_density) / SMOOTHING_SAMPLES;
            }
            if let Some(at) = state.prev_hand_at {
                let ms = now.duration_since(at).as_secs_f64() * 1e3;
                if ms > 0.0 {
                    // A short average both ways: a lead too short wastes writes (the hand
                    // passes them pinned), one too long leaves buffers to the backends.
                    let sample = hand_moved as f64 / ms;
                    state.hand_speed += (sample - state.hand_speed) / HAND_SPEED_SAMPLES;
                }
            }
        }
        state.prev_hand_at = Some(now);
        state.prev_hand = hand;
        state.prev_allocations = allocations;
        state.saved = true;
        let recent_f = recent as f64;
        if recent_f > state.smoothed_allocations {
            state.smoothed_allocations = recent_f; // fast attack
        } else {
            state.smoothed_allocations +=
                (recent_f - state.smoothed_allocations) / SMOOTHING_SAMPLES; // slow decay
        }
        report.recent_allocations = recent;
        (
            hand,
            state.smoothed_allocations * self.bgwriter.options.lru_multiplier(),
        )
    }

    /// The LRU round (and, with `dirty_only`, the dirty-chain round).
    fn lru_round(
        &self,
        state: &mut RoundState,
        dirty_only: bool,
        crew: Option<&Crew>,
    ) -> RoundReport {
        let mut report = RoundReport::default();
        let nbuffers = self.descs.len() as u64;
        let (hand, upcoming_raw) = self.bgwriter_estimate(state, &mut report);
        if self.bgwriter.maxpages == 0 {
            // Cleaning disabled: nothing to scan, and the next round re-reads the hand.
            state.saved = false;
            return report;
        }
        // Step 2: the cursor. Behind (or level with) the hand: restart there.
        // Buffers between the hand and the cursor were examined in this lap.
        let examined = if state.next_to_clean > hand {
            (state.next_to_clean - hand).min(nbuffers)
        } else {
            if state.next_to_clean < hand && state.round_number > 0 {
                self.bgwriter
                    .counters
                    .rounds_lapped
                    .fetch_add(1, Ordering::Relaxed);
            }
            state.next_to_clean = hand;
            0
        };
        // Too close to the hand to be cleaned in time: start further on.
        let skipped = state.keep_lead(hand, nbuffers);
        report.buffers_skipped += skipped;
        let ahead = examined + skipped;
        let bufs_to_lap = nbuffers.saturating_sub(ahead);
        let density = state.smoothed_density.max(1.0);
        let reusable_ahead = (examined as f64 / density) as u64;
        // Step 3: minimum progress.
        let min_scan = (nbuffers * self.bgwriter.options.delay_ms).div_ceil(SCAN_WHOLE_POOL_MS);
        let upcoming = (upcoming_raw as u64).max(min_scan + reusable_ahead);
        report.upcoming_estimate = upcoming;
        let mut reusable = reusable_ahead;
        let stop = &self.bgwriter.stop;
        // Dirty candidates pinned for the writers (`bgwriter_writers` > 1).
        let mut batch = Vec::new();
        if dirty_only {
            // Dirty-chain: the horizon in buffers that the estimate asks for, visiting
            // only dirty-map hits in it.
            let want = upcoming.saturating_sub(reusable_ahead);
            let horizon = ((want as f64 * density).ceil() as u64).min(bufs_to_lap);
            let map = self
                .bgwriter
                .dirty_map
                .as_ref()
                .expect("dirty-chain has a map");
            let end = state.next_to_clean + horizon;
            let mut pos = state.next_to_clean;
            while pos < end {
                if stop.load(Ordering::Relaxed) {
                    report.stopped = true;
                    break;
                }
                let (found, _) = map.next_set(pos, end);
                let Some(at) = found else {
                    pos = end;
                    break;
                };
                pos = at + 1;
                report.buffers_scanned += 1;
                match self.visit_lru(state, (at % nbuffers) as u32, &mut batch, &mut report, crew) {
                    Visited::Written => {
                        report.buffers_written += 1;
                        report.reusable_found += 1;
                        if report.buffers_written >= self.bgwriter.maxpages {
                            report.hit_maxpages = true;
                            break;
                        }
                    }
                    Visited::Reusable => report.reusable_found += 1,
                    Visited::NotReusable | Visited::Failed => {}
                }
            }
            self.write_batch(state, &mut batch, &mut report, crew);
            state.next_to_clean = pos;
            return report;
        }
        // Step 4: the scan.
        if self.bgwriter.options.writers > 1
            && !self.bgwriter_durable.load(Ordering::Relaxed)
            && self.bgwriter_ring_ready(state)
        {
            // Through the ring: the scan runs as the ring asks for pages (see `LruStream`).
            let RingSetup::Ready(mut ring) = std::mem::replace(&mut state.ring, RingSetup::Untried)
            else {
                unreachable!("the ring is ready")
            };
            let mut stream = LruStream {
                pool: self,
                state,
                report: &mut report,
                to_scan: bufs_to_lap,
                reusable,
                upcoming,
                nbuffers,
                in_kernel: Vec::new(),
            };
            ring.pipeline(self.bgwriter.options.writers, self.page_size, &mut stream);
            reusable = stream.reusable;
            drop(stream);
            state.ring = RingSetup::Ready(ring);
            self.bgwriter
                .cursor
                .store(state.next_to_clean, Ordering::Relaxed);
            return self.finish_lru_scan(state, report, reusable, reusable_ahead);
        }
        let mut to_scan = bufs_to_lap;
        while to_scan > 0 && reusable < upcoming {
            if stop.load(Ordering::Relaxed) {
                report.stopped = true;
                break;
            }
            if batch.is_empty() && report.buffers_scanned % LEAD_CHECK_EVERY == 0 {
                // A long round: the hand may have come close meanwhile.
                let skipped = state.keep_lead(self.clock.hand(), nbuffers);
                report.buffers_skipped += skipped;
                to_scan = to_scan.saturating_sub(skipped);
                if to_scan == 0 {
                    break;
                }
            }
            let id = (state.next_to_clean % nbuffers) as u32;
            state.next_to_clean += 1;
            to_scan -= 1;
            report.buffers_scanned += 1;
            match self.visit_lru(state, id, &mut batch, &mut report, crew) {
                Visited::Written => {
                    reusable += 1;
                    report.buffers_written += 1;
                    if report.buffers_written >= self.bgwriter.maxpages {
                        report.hit_maxpages = true;
                        break;
                    }
                }
                Visited::Reusable => reusable += 1,
                Visited::NotReusable | Visited::Failed => {}
            }
        }
        self.write_batch(state, &mut batch, &mut report, crew);
        self.finish_lru_scan(state, report, reusable, reusable_ahead)
    }

    /// The end of an LRU scan: what it found, and its density sample.
    fn finish_lru_scan(
        &self,
        state: &mut RoundState,
        mut report: RoundReport,
        reusable: u64,
        reusable_ahead: u64,
    ) -> RoundReport {
        report.reusable_found = reusable.saturating_sub(reusable_ahead);
        // This scan is a density sample too: buffers passed per reusable one found.
        let scanned = report.buffers_scanned;
        if scanned > 0 && report.reusable_found > 0 {
            let sample = scanned as f64 / report.reusable_found as f64;
            state.smoothed_density += (sample - state.smoothed_density) / SMOOTHING_SAMPLES;
        }
        report
    }

    /// Examines buffer `id` (PostgreSQL's SyncOneBuffer): with `lru`, only an unpinned
    /// usage-0 buffer counts and is written if dirty; without (the all-scan), any unpinned
    /// dirty buffer is written. Holds this buffer's locks only; writes through
    /// `flush_locked`.
    fn sync_one_buffer(
        &self,
        state: &mut RoundState,
        id: u32,
        lru: bool,
        report: &mut RoundReport,
    ) -> Visited {
        match self.pin_for_write(id, lru) {
            Err(v) => v,
            Ok(pinned) => {
                let done = self.write_pinned(pinned.id);
                drop(pinned);
                self.account_write(state, report, done)
            }
        }
    }

    /// The first half of [`Self::sync_one_buffer`]: whether buffer `id` is reusable, and
    /// if it is dirty, the buffer pinned (without usage credit) for a write.
    fn pin_for_write(&self, id: u32, lru: bool) -> Result<BufferRef<'_>, Visited> {
        let d = &self.descs[id as usize];
        let wanted = |s: u64| refcount(s) == 0 && (!lru || usage(s) == 0);
        let hint = d.load_state();
        if !wanted(hint) {
            return Err(Visited::NotReusable);
        }
        if hint & (DIRTY | VALID) != (DIRTY | VALID) && self.bgwriter.dirty_map.is_none() {
            return Err(Visited::Reusable);
        }
        // Pin without usage credit, re-checking under the header lock.
        let s = d.lock_header();
        if !wanted(s) {
            d.unlock_header(s);
            return Err(Visited::NotReusable);
        }
        if s & (DIRTY | VALID) != (DIRTY | VALID) {
            // Clean after all; a dirty-map bit left on it is stale (see dirty_map.rs).
            self.bgwriter.note_clean(id);
            d.unlock_header(s);
            return Err(Visited::Reusable);
        }
        d.unlock_header(s + REFCOUNT_ONE);
        Ok(BufferRef { pool: self, id })
    }

    /// The second half: writes the pinned buffer if it is still dirty and nobody holds it
    /// exclusively. Any thread may run it (a round's writers do) while the round holds
    /// the pin; the round drops it afterwards.
    fn write_pinned(&self, id: u32) -> WriteDone {
        let d = &self.descs[id as usize];
        if !d.content_lock.try_lock_shared() {
            // Someone holds it exclusively right now: in use, not reusable.
            return WriteDone::Busy;
        }
        // The content lock is released once the page is copied: a backend that wants to
        // change the page waits for an 8 KiB copy, not for the WAL flush and the write.
        let result = self.write_locked_then(id, IoContext::Normal, || {
            // SAFETY: taken by the successful try_lock_shared above; released once.
            unsafe { d.content_lock.unlock_shared() }
        });
        match result.map(|w| w.is_some()) {
            Ok(true) => {
                self.mark_cleaned(id);
                WriteDone::Written(d.tag())
            }
            Ok(false) => WriteDone::Clean,
            Err(e) => WriteDone::Failed(e),
        }
    }

    /// Counts a write's outcome in the round (writeback hint, errors and their hook).
    fn account_write(
        &self,
        state: &mut RoundState,
        report: &mut RoundReport,
        done: WriteDone,
    ) -> Visited {
        match done {
            WriteDone::Written(tag) => {
                let _ = state.writeback.add(&self.smgr, tag, IoContext::Normal);
                Visited::Written
            }
            WriteDone::Clean => Visited::Reusable,
            WriteDone::Busy => Visited::NotReusable,
            WriteDone::Failed(e) => {
                report.write_errors += 1;
                let hook = self.bgwriter.error_hook.lock().clone();
                if let Some(h) = hook {
                    h(&e);
                }
                Visited::Failed
            }
        }
    }

    /// Visits buffer `id` for an LRU scan: with one writer, as [`Self::sync_one_buffer`];
    /// with several, a dirty candidate is pinned and queued in `batch` (counted as
    /// written now, corrected by [`Self::write_batch`]), and a full batch is written.
    fn visit_lru<'p>(
        &'p self,
        state: &mut RoundState,
        id: u32,
        batch: &mut Vec<BufferRef<'p>>,
        report: &mut RoundReport,
        crew: Option<&Crew>,
    ) -> Visited {
        let writers = self.bgwriter.options.writers;
        if writers <= 1 {
            return self.sync_one_buffer(state, id, true, report);
        }
        match self.pin_for_write(id, true) {
            Err(v) => v,
            Ok(pinned) => {
                batch.push(pinned);
                if batch.len() >= self.batch_cap() {
                    self.write_batch(state, batch, report, crew);
                }
                Visited::Written
            }
        }
    }

    /// Writes the pinned buffers of `batch` on `bgwriter_writers` threads at once (so the
    /// round keeps that many writes in flight), then counts what happened: buffers that
    /// turned out clean, busy or failed were counted as written by [`Self::visit_lru`]
    /// and are taken off `buffers_written` again. Empties `batch`, dropping the pins.
    fn write_batch(
        &self,
        state: &mut RoundState,
        batch: &mut Vec<BufferRef<'_>>,
        report: &mut RoundReport,
        crew: Option<&Crew>,
    ) {
        self.bgwriter
            .cursor
            .store(state.next_to_clean, Ordering::Relaxed);
        if batch.is_empty() {
            return;
        }
        let writers = self.bgwriter.options.writers.min(batch.len());
        let stop = &self.bgwriter.stop;
        let started = Instant::now();
        // O_DSYNC writes (`set_bgwriter_durable_writes`) take the one-page path.
        let durable = self.bgwriter_durable.load(Ordering::Relaxed);
        let results = if !durable && self.bgwriter_ring_ready(state) {
            let RingSetup::Ready(ring) = &mut state.ring else {
                unreachable!("the ring is ready")
            };
            let ids: Vec<u32> = batch.iter().map(|b| b.id).collect();
            self.write_on_ring(&ids, ring, writers)
        } else {
            match crew {
                Some(crew) => {
                    let ids: Vec<u32> = batch.iter().map(|b| b.id).collect();
                    crew.run(&ids, writers - 1, |id| self.write_pinned(id), stop)
                }
                None => self.write_on_scoped_threads(batch, writers),
            }
        };
        let ms = started.elapsed().as_secs_f64() * 1e3;
        if state.batch_ms == 0.0 {
            state.batch_ms = ms;
        } else {
            state.batch_ms += (ms - state.batch_ms) / SMOOTHING_SAMPLES;
        }
        let skipped = batch.len() - results.len();
        report.buffers_written = report.buffers_written.saturating_sub(skipped as u64);
        if skipped > 0 {
            report.stopped = true;
        }
        batch.clear();
        for done in results {
            if !matches!(self.account_write(state, report, done), Visited::Written) {
                report.buffers_written = report.buffers_written.saturating_sub(1);
            }
        }
    }

    /// The first half of a write through the bgwriter's io_uring, for a buffer the caller
    /// pins: the steps of `write_locked_then` up to the write itself. Claims the write
    /// (content lock shared, held for the copy only), copies the page into `buf`, makes
    /// the log durable to its LSN (ARCHITECTURE's rule 1, WAL before data), checksums the copy and finds where it
    /// goes. Err: not written, and why (busy, clean already, or failed with the page left
    /// dirty and its I/O ended).
    fn claim_copy_for_ring(&self, id: u32, buf: &mut [u8]) -> Result<PageTarget, WriteDone> {
        let d = &self.descs[id as usize];
        if !d.content_lock.try_lock_shared() {
            // Someone holds it exclusively right now: in use, not reusable.
            return Err(WriteDone::Busy);
        }
        // SAFETY: taken by the successful try_lock_shared above; released once, either
        // here or by `copy_for_write` right after its copy.
        let unlock = || unsafe { d.content_lock.unlock_shared() };
        if !self.start_io(d, Io::Write) {
            unlock();
            return Err(WriteDone::Clean);
        }
        // Ends the write as failed on an error, or on a panic below (see `IoClaim`); a
        // page handed to the ring is ended by its completion (or `RingBatch`'s drop).
        let claim = super::IoClaim {
            pool: self,
            id,
            io: Io::Write,
        };
        let forced = self
            .copy_for_write(id, buf, unlock)
            .map_err(WriteDone::Failed)?;
        if forced {
            self.rings.count_forced_wal_flush(IoContext::Normal);
        }
        let target = self
            .smgr
            .page_target(&d.tag())
            .map_err(|e| WriteDone::Failed(BufferError::from(e)))?;
        std::mem::forget(claim);
        Ok(target)
    }

    /// The second half: counts the write and registers its segment for the next sync
    /// (before the I/O ends, as `Smgr::write` does before `terminate_io`, so a checkpoint
    /// that waits for this I/O sees the registration), then ends the I/O.
    fn finish_ring_write(
        &self,
        id: u32,
        target: &PageTarget,
        result: std::io::Result<()>,
        took: Duration,
    ) -> WriteDone {
        let d = &self.descs[id as usize];
        let result = match result {
            Ok(()) => {
                self.smgr.page_written(target, IoContext::Normal, took);
                Ok(())
            }
            Err(source) => Err(self.smgr.page_write_failed(target, source)),
        };
        self.terminate_io(d, Io::Write, result.is_ok());
        match result {
            Ok(()) => {
                self.mark_cleaned(id);
                WriteDone::Written(d.tag())
            }
            Err(e) => WriteDone::Failed(BufferError::from(e)),
        }
    }

    /// Writes the pinned buffers `ids` through the bgwriter's io_uring, up to `in_flight`
    /// at a time: each page is claimed and copied only when a slot is free (see
    /// [`RingBatch`]). A stop request ends the batch at its next page (fewer results than
    /// ids).
    fn write_on_ring(&self, ids: &[u32], ring: &mut WriteRing, in_flight: usize) -> Vec<WriteDone> {
        let mut batch = RingBatch {
            pool: self,
            ids,
            next: 0,
            in_kernel: Vec::with_capacity(in_flight),
            out: Vec::with_capacity(ids.len()),
        };
        ring.pipeline(in_flight, self.page_size, &mut batch);
        std::mem::take(&mut batch.out)
    }

    /// Writes `batch` on `writers` threads started for it (the calling one included):
    /// rounds run outside the bgwriter thread (tests, experiments) have no crew.
    fn write_on_scoped_threads(&self, batch: &[BufferRef<'_>], writers: usize) -> Vec<WriteDone> {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let stop = &self.bgwriter.stop;
        let work = |out: &mut Vec<WriteDone>| {
            let previous = set_thread_writer(IoWriter::Bgwriter);
            // A stop request ends the batch at each thread's next buffer: the writes in
            // flight finish, the rest stay dirty (and unpinned with the batch).
            while !stop.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(p) = batch.get(i) else { break };
                out.push(self.write_pinned(p.id));
            }
            set_thread_writer(previous);
        };
        let mut results = Vec::with_capacity(batch.len());
        // std, not the `sync` facade: these are plain std threads (scoped), outside any
        // shuttle execution.
        std::thread::scope(|scope| {
            let helpers: Vec<_> = (1..writers)
                .map(|_| {
                    scope.spawn(|| {
                        let mut out = Vec::new();
                        work(&mut out);
                        out
                    })
                })
                .collect();
            work(&mut results);
            for h in helpers {
                results.extend(h.join().expect("a bgwriter writer panicked"));
            }
        });
        results
    }

    /// Marks a buffer this bgwriter just wrote (and still pins) BGWRITER_CLEANED if it is
    /// still clean, so a dirtying before its reuse counts as a wasted write.
    fn mark_cleaned(&self, id: u32) {
        let d = &self.descs[id as usize];
        let s = d.lock_header();
        let s = if s & DIRTY == 0 {
            s | BGWRITER_CLEANED
        } else {
            s
        };
        d.unlock_header(s);
    }

    /// Simon Riggs' second activity: a bounded all-scan that writes unpinned dirty buffers
    /// at any usage count.
    fn mini_checkpoint(&self, state: &mut RoundState, report: &mut RoundReport) {
        let nbuffers = self.descs.len() as u64;
        let to_scan = nbuffers.div_ceil(MINI_CHECKPOINT_SCAN_DIVISOR);
        let max_writes = (self.bgwriter.maxpages / 4).max(1);
        for _ in 0..to_scan {
            if self.bgwriter.stop.load(Ordering::Relaxed) {
                report.stopped = true;
                return;
            }
            let id = (state.all_scan_next % nbuffers) as u32;
            state.all_scan_next += 1;
            report.buffers_scanned += 1;
            if let Visited::Written = self.sync_one_buffer(state, id, false, report) {
                report.mini_checkpoint_written += 1;
                if report.mini_checkpoint_written >= max_writes {
                    return;
                }
            }
        }
    }

    /// The victim-queue round: sweep for the upcoming allocations not already queued,
    /// write dirty victims, queue clean ones.
    fn victim_queue_round(&self, state: &mut RoundState) -> RoundReport {
        let mut report = RoundReport::default();
        let nbuffers = self.descs.len() as u64;
        let (_, upcoming_raw) = self.bgwriter_estimate(state, &mut report);
        let queue = self.bgwriter.victim_queue.as_ref().expect("victim queue");
        if self.bgwriter.maxpages == 0 {
            return report;
        }
        let room = (queue.capacity() - queue.len().min(queue.capacity())) as u64;
        let want = (upcoming_raw.ceil() as u64)
            .saturating_sub(queue.len() as u64)
            .min(room);
        report.upcoming_estimate = want;
        // At most one lap of the hand per round: bounds a round on a pool that is all hot.
        let mut budget = nbuffers;
        while report.victims_queued < want && budget > 0 {
            if self.bgwriter.stop.load(Ordering::Relaxed) {
                report.stopped = true;
                break;
            }
            budget -= 1;
            report.buffers_scanned += 1;
            let (id, visit) = self.clock.sweep_step(&self.descs);
            let super::descriptor::Visit::Pinned(s) = visit else {
                continue;
            };
            // We hold the sweep's pin on an unpinned usage-0 buffer.
            let d = &self.descs[id as usize];
            let pinned = BufferRef { pool: self, id };
            if s & DIRTY != 0 {
                if report.buffers_written >= self.bgwriter.maxpages {
                    report.hit_maxpages = true;
                    break;
                }
                if !d.content_lock.try_lock_shared() {
                    continue;
                }
                let result = self.flush_locked(id, IoContext::Normal);
                // SAFETY: taken by the successful try_lock_shared above.
                unsafe { d.content_lock.unlock_shared() };
                match result {
                    Ok(true) => {
                        report.buffers_written += 1;
                        self.mark_cleaned(id);
                        let _ = state
                            .writeback
                            .add(&self.smgr, pinned.tag(), IoContext::Normal);
                    }
                    Ok(false) => {}
                    Err(e) => {
                        report.write_errors += 1;
                        let hook = self.bgwriter.error_hook.lock().clone();
                        if let Some(h) = hook {
                            h(&e);
                        }
                        continue;
                    }
                }
            }
            drop(pinned);
            if queue.push(id) {
                report.victims_queued += 1;
                report.reusable_found += 1;
            } else {
                break;
            }
        }
        report
    }

    /// Takes a victim for an allocation, pinned, with its state: the free list first, then
    /// (victim-queue strategy) a queued buffer that is still unpinned, usage 0, clean and
    /// idle, else the clock sweep. Wakes a hibernating bgwriter.
    pub(super) fn take_victim(&self) -> Result<(u32, u64), super::clock::AllPinned> {
        if let Some(queue) = self.bgwriter.victim_queue() {
            if !self.clock.has_free() {
                for _ in 0..VICTIM_QUEUE_POPS_MAX {
                    let Some(id) = queue.pop() else { break };
                    let d = &self.descs[id as usize];
                    let s = d.lock_header();
                    if refcount(s) == 0 && usage(s) == 0 && s & (DIRTY | IO_IN_PROGRESS) == 0 {
                        let pinned = (s + REFCOUNT_ONE) & !LOCKED;
                        d.unlock_header(pinned);
                        self.clock.count_allocation();
                        self.bgwriter.count_victim_popped();
                        self.bgwriter.note_allocation();
                        return Ok((id, pinned));
                    }
                    d.unlock_header(s);
                }
            }
        }
        let r = self.clock.victim(&self.descs);
        self.bgwriter.note_allocation();
        if let Ok((_, s)) = r {
            if s & DIRTY != 0 {
                self.bgwriter.note_dirty_victim(self.clock.hand());
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::types::{ForkNumber, Lsn, RelFileId};
    use crate::vfs::{MemVfs, Vfs};
    use crate::WalFlush;
    use std::path::Path;

    const REL: RelFileId = RelFileId::new(0, 7);

    fn pool_with(config: &Config, wal: Arc<dyn WalFlush>) -> (MemVfs, BufferPool) {
        let vfs = MemVfs::new();
        let smgr = crate::smgr::Smgr::open(
            Arc::new(vfs.clone()) as Arc<dyn Vfs>,
            Path::new("/db"),
            crate::buffer::PoolConfig::smgr_options(config, true).unwrap(),
        )
        .unwrap();
        let pool = BufferPool::new(Arc::new(smgr), config, wal).unwrap();
        (vfs, pool)
    }

    fn config(buffers: u64, strategy: &str) -> Config {
        let mut c = Config::default();
        c.set("shared_buffers", &buffers.to_string()).unwrap();
        c.set("block_size", "4kB").unwrap();
        c.set("bgwriter_strategy", strategy).unwrap();
        c
    }

    /// Fills the whole pool with dirty pages of REL, page b with LSN b + 1, and makes every
    /// buffer unpinned with usage 0.
    fn dirty_pool(pool: &BufferPool) {
        pool.create_relation(REL, ForkNumber::Main).unwrap();
        for b in 0..pool.nbuffers() as u64 {
            let buf = pool.extend(REL, ForkNumber::Main).unwrap();
            let mut g = buf.write();
            crate::page::init(&mut g, 0);
            g.set_lsn(Lsn(b + 1));
        }
        for d in pool.descs.iter() {
            set_usage(d, 0);
        }
    }

    fn set_usage(d: &super::super::descriptor::BufferDesc, u: u64) {
        let s = d.lock_header();
        d.unlock_header((s & !USAGE_MASK) | (u << USAGE_SHIFT));
    }

    fn dirty(pool: &BufferPool, id: usize) -> bool {
        pool.descs[id].load_state() & DIRTY != 0
    }

    /// Proves: the nap is `bgwriter_delay` when the hand stands still, and shortens (but
    /// not below [`MIN_NAP_MS`]) when the hand, at its measured speed, would reach the
    /// bgwriter's cursor sooner. How: the cursor set a known distance ahead of the hand,
    /// the previous reading of the hand placed in the past.
    #[test]
    fn the_nap_shortens_when_the_hand_would_overtake_the_cursor() {
        let (_vfs, pool) = pool_with(&config(64, "lru"), Arc::new(crate::NoWal));
        dirty_pool(&pool);
        // Allocations move the hand past 1,000.
        for _ in 0..1100 {
            drop(pool.extend(REL, ForkNumber::Main).unwrap());
        }
        let hand = pool.clock.hand();
        assert!(hand >= 1000, "{hand}");
        // Hand still: the full delay (200 ms).
        let mut last = (hand, Instant::now() - Duration::from_millis(100));
        assert_eq!(pool.bgwriter_nap_ms(&mut last), 200);
        // The hand moved 1,000 buffers in (at least) 100 ms, the cursor is 100 ahead: the
        // lead lasts at most ~10 ms, so the nap is the 10 ms floor.
        pool.bgwriter.round.lock().next_to_clean = hand + 100;
        let mut last = (
            hand.wrapping_sub(1000),
            Instant::now() - Duration::from_millis(100),
        );
        assert_eq!(pool.bgwriter_nap_ms(&mut last), MIN_NAP_MS);
        // 1,000 buffers in 1 s with the cursor 400 ahead: the lead lasts ~400 ms, beyond
        // twice the delay, so the full delay again.
        pool.bgwriter.round.lock().next_to_clean = hand + 400;
        let mut last = (
            hand.wrapping_sub(1000),
            Instant::now() - Duration::from_secs(1),
        );
        assert_eq!(pool.bgwriter_nap_ms(&mut last), 200);
        // 1,000 buffers in 1 s with the cursor 200 ahead: the lead lasts ~200 ms; half of
        // it, ~100 ms (a little less, as the test's own time passes).
        pool.bgwriter.round.lock().next_to_clean = hand + 200;
        let mut last = (
            hand.wrapping_sub(1000),
            Instant::now() - Duration::from_secs(1),
        );
        let nap = pool.bgwriter_nap_ms(&mut last);
        assert!((80..=100).contains(&nap), "{nap}");
    }

    /// Proves: the LRU round writes only unpinned usage-0 buffers, and counts each write
    /// as the bgwriter's. How: a dirty pool where some buffers are pinned by the test and
    /// some have usage credit; one round with a target beyond the pool.
    #[test]
    fn never_writes_a_pinned_or_recently_used_buffer() {
        // One writer, and several (`bgwriter_writers`: the LRU scan streaming its writes
        // through the io_uring path, dirty-chain batches written through it, or both on
        // threads), whose writes must still count as the bgwriter's. (MemVfs files have no
        // descriptor: the io_uring path's logic runs, its writes are blocking.)
        for (writers, strategy, io) in [
            ("1", "lru", "io_uring"),
            ("4", "lru", "io_uring"),
            ("4", "lru", "threads"),
            ("3", "dirty-chain", "io_uring"),
            ("3", "dirty-chain", "threads"),
        ] {
            spares_pinned_and_recent(writers, strategy, io);
        }
    }

    fn spares_pinned_and_recent(writers: &str, strategy: &str, io: &str) {
        let mut c = config(1024, strategy);
        c.set("bgwriter_writers", writers).unwrap();
        c.set("bgwriter_io_method", io).unwrap();
        let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
        dirty_pool(&pool);
        let pinned: Vec<_> = (0..4)
            .map(|b| {
                pool.read(crate::BufferTag::new(REL, ForkNumber::Main, b))
                    .unwrap()
            })
            .collect();
        let pinned_ids: Vec<u32> = pinned.iter().map(|b| b.buffer_id()).collect();
        for d in pool.descs.iter() {
            if !pinned_ids.contains(&d.id) {
                set_usage(d, 0);
            }
        }
        let used: Vec<usize> = (10..16).chain(500..540).collect();
        for &id in &used {
            set_usage(&pool.descs[id], 2);
        }
        // Rounds until the pool is clean but for what must be spared.
        let mut written = 0;
        for _ in 0..64 {
            let r = pool.bgwriter_round();
            written += r.buffers_written;
            if r.buffers_written == 0 {
                break;
            }
        }
        let n = pool.nbuffers();
        for id in 0..n {
            let spared = pinned_ids.contains(&(id as u32)) || used.contains(&id);
            assert_eq!(dirty(&pool, id), spared, "buffer {id}, {writers} writers");
        }
        let want = (n - 4 - used.len()) as u64;
        assert_eq!(written, want, "{writers} writers, {io}");
        let ring = io == "io_uring" && WriteRing::new().is_uring();
        let want_io = match (writers, ring) {
            ("1", _) => "single",
            (_, true) => "io_uring",
            (_, false) => "threads",
        };
        assert_eq!(
            pool.bgwriter_io_in_effect(),
            want_io,
            "{writers} writers, {io}"
        );
        let io = pool.stats();
        assert_eq!(io.by_writer(IoWriter::Bgwriter, IoOp::Write), want);
        assert_eq!(io.by_writer(IoWriter::Backend, IoOp::Write), 0);
        assert_eq!(pool.bgwriter_stats().buffers_clean, want);
        // Dirtying a page the bgwriter cleaned counts one wasted write; a second change
        // before the next write does not count again.
        let some = pool
            .descs
            .iter()
            .find(|d| !dirty(&pool, d.id as usize))
            .unwrap();
        let b = pool.read(some.tag()).unwrap();
        b.write().mark_dirty();
        b.write().mark_dirty();
        assert_eq!(pool.bgwriter_stats().buffers_redirtied, 1);
    }

    /// Proves: the write waits for the WAL. How: a WAL hook that is durable only up to LSN
    /// 10 and fails beyond: pages with LSN <= 10 are written, the others stay dirty with
    /// storage untouched, and every write was preceded by a flush request covering it.
    #[test]
    fn never_writes_a_page_before_its_wal() {
        struct Wal {
            durable: Lsn,
            asked: crate::sync::Mutex<Vec<Lsn>>,
        }
        impl WalFlush for Wal {
            fn flush(&self, lsn: Lsn) -> Result<(), crate::buffer::WalFlushError> {
                self.asked.lock().push(lsn);
                if lsn <= self.durable {
                    Ok(())
                } else {
                    Err(format!("log not durable past {}", self.durable).into())
                }
            }
        }
        let wal = Arc::new(Wal {
            durable: Lsn(10),
            asked: Default::default(),
        });
        let (_vfs, pool) = pool_with(&config(32, "lru"), wal.clone());
        dirty_pool(&pool);
        let r = pool.bgwriter_round();
        assert_eq!(r.buffers_written, 10, "{r:?}");
        assert_eq!(r.write_errors, 22);
        for d in pool.descs.iter() {
            // SAFETY: no other thread uses the pool, and the slice lives for this line.
            let lsn = crate::page::lsn(unsafe { pool.page_slice(d.id) });
            assert_eq!(d.load_state() & DIRTY != 0, lsn > Lsn(10), "{d:?} at {lsn}");
        }
        // Every page reached storage only with its LSN covered: nblocks on storage were
        // extended with zero pages, and only the written ones carry a header now.
        let mut page = vec![0u8; 4096];
        for b in 0..32u32 {
            let tag = crate::BufferTag::new(REL, ForkNumber::Main, b);
            pool.smgr.read(&tag, &mut page, IoContext::Normal).unwrap();
            let on_disk = crate::page::lsn(&page);
            assert!(on_disk <= Lsn(10), "block {b} reached storage at {on_disk}");
        }
        let asked = wal.asked.lock();
        assert_eq!(
            asked.len(),
            32,
            "one flush request per page written or tried"
        );
    }

    /// Proves: the bgwriter holds a page's content lock only while it copies the page: a
    /// backend can lock it exclusively while the write is under way (here, inside the WAL
    /// flush that precedes it), and the change it makes then is not lost: the page stays
    /// dirty after the write, which put the image from before the change on storage, and
    /// the next flush writes the change.
    #[test]
    fn a_page_changed_during_its_write_stays_dirty() {
        type Hook = Box<dyn FnOnce(Lsn) + Send>;
        struct Wal {
            hook: crate::sync::Mutex<Option<Hook>>,
        }
        impl WalFlush for Wal {
            fn flush(&self, lsn: Lsn) -> Result<(), crate::buffer::WalFlushError> {
                let hook = self.hook.lock().take();
                if let Some(h) = hook {
                    h(lsn);
                }
                Ok(())
            }
        }
        const MARK_AT: usize = 2000;
        let wal = Arc::new(Wal {
            hook: crate::sync::Mutex::new(None),
        });
        let (_vfs, pool) = pool_with(&config(32, "lru"), wal.clone());
        let pool = Arc::new(pool);
        dirty_pool(&pool);
        let changed = Arc::new(crate::sync::Mutex::new(None));
        {
            let (pool, changed) = (pool.clone(), changed.clone());
            // Block b carries LSN b + 1 (dirty_pool): the first page whose write asks the
            // WAL to flush is changed by "a backend" at that moment.
            *wal.hook.lock() = Some(Box::new(move |lsn: Lsn| {
                let block = (lsn.0 - 1) as u32;
                let buf = pool
                    .read(crate::BufferTag::new(REL, ForkNumber::Main, block))
                    .unwrap();
                let mut g = buf
                    .try_write()
                    .expect("the content lock is free once the page is copied");
                g[MARK_AT] = 0xAB;
                g.mark_dirty();
                *changed.lock() = Some((buf.buffer_id(), block));
            }));
        }
        let r = pool.bgwriter_round();
        assert!(r.buffers_written >= 1, "{r:?}");
        let (id, block) = changed.lock().expect("the hook ran");
        assert!(
            dirty(&pool, id as usize),
            "the change made during the write is kept"
        );
        let tag = crate::BufferTag::new(REL, ForkNumber::Main, block);
        let mut page = vec![0u8; 4096];
        pool.smgr.read(&tag, &mut page, IoContext::Normal).unwrap();
        assert_eq!(
            page[MARK_AT], 0,
            "the write put the copy from before the change"
        );
        assert!(
            crate::page::lsn(&page) > Lsn(0),
            "and that copy was written"
        );
        pool.flush_all().unwrap();
        pool.smgr.read(&tag, &mut page, IoContext::Normal).unwrap();
        assert_eq!(page[MARK_AT], 0xAB, "the next flush writes the change");
        assert!(!dirty(&pool, id as usize));
    }

    /// Proves: a failed write leaves the page dirty, is counted and reaches the hook, and
    /// the round goes on with the next buffers.
    #[test]
    fn a_failed_write_leaves_the_page_dirty_and_is_reported() {
        use crate::testing::{FaultKind, FaultOp, FaultRule, FaultVfs};
        let mem = MemVfs::new();
        let fault = FaultVfs::new(Arc::new(mem) as Arc<dyn Vfs>);
        let c = config(32, "lru");
        let smgr = crate::smgr::Smgr::open(
            Arc::new(fault.clone()) as Arc<dyn Vfs>,
            Path::new("/db"),
            crate::buffer::PoolConfig::smgr_options(&c, true).unwrap(),
        )
        .unwrap();
        let pool = BufferPool::new(Arc::new(smgr), &c, Arc::new(crate::NoWal)).unwrap();
        dirty_pool(&pool);
        let seen = Arc::new(crate::sync::Mutex::new(Vec::new()));
        let s2 = seen.clone();
        pool.set_bgwriter_error_hook(Some(Arc::new(move |e: &BufferError| {
            s2.lock().push(e.raw_os_error());
        })));
        fault.add_rule(FaultRule::nth("base", FaultOp::Write, 3, FaultKind::Eio));
        let r = pool.bgwriter_round();
        assert_eq!(r.write_errors, 1, "{r:?}");
        assert_eq!(r.buffers_written, 31);
        assert_eq!(pool.usage_summary().dirty, 1);
        assert_eq!(pool.bgwriter_stats().write_errors, 1);
        assert_eq!(*seen.lock(), vec![Some(libc::EIO)]);
        // The page still holds its change: the next write of it succeeds.
        assert_eq!(pool.flush_all().unwrap(), 1);
        assert_eq!(pool.usage_summary().dirty, 0);
    }

    /// Proves: a round writes at most lru_maxpages pages and counts maxwritten_clean.
    #[test]
    fn a_round_writes_at_most_maxpages() {
        let mut c = config(64, "lru");
        c.set("bgwriter_lru_maxpages", "5").unwrap();
        let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
        dirty_pool(&pool);
        let r = pool.bgwriter_round();
        assert_eq!(r.buffers_written, 5, "{r:?}");
        assert!(r.hit_maxpages);
        assert_eq!(pool.bgwriter_stats().maxwritten_clean, 1);
        // The next round goes on from its cursor, not from the hand again.
        let r2 = pool.bgwriter_round();
        assert_eq!(r2.buffers_written, 5, "{r2:?}");
        assert_eq!(pool.usage_summary().dirty, 64 - 10);
        c.set("bgwriter_lru_maxpages", "0").unwrap();
        let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
        dirty_pool(&pool);
        assert_eq!(pool.bgwriter_round().buffers_written, 0);
    }

    /// Proves: the cursor never re-scans buffers it passed in this lap. How: a clean,
    /// reusable pool and an allocation estimate of 20 buffers: the first round scans 20
    /// from the hand, the second (no new allocations, so a lower target) finds them ahead
    /// already and scans fewer, never past one lap.
    /// Proves: the cursor keeps a lead of hand speed × batch time over the hand (capped at
    /// a quarter of the pool), jumping forward when behind or too close and never back.
    #[test]
    fn the_cursor_keeps_a_lead_worth_a_batch() {
        let mut st = RoundState::new(0);
        // Unmeasured: no lead asked.
        st.next_to_clean = 90;
        assert_eq!(st.keep_lead(100, 1000), 0);
        assert_eq!(st.next_to_clean, 100);
        st.hand_speed = 2.0; // buffers per ms
        st.batch_ms = 10.0;
        assert_eq!(st.min_lead(1000), 20);
        // Too close: jumps to hand + 20, skipping what it had not examined.
        st.next_to_clean = 105;
        assert_eq!(st.keep_lead(100, 1000), 15);
        assert_eq!(st.next_to_clean, 120);
        // Lapped: hand + 20, the 20 buffers after the hand skipped.
        st.next_to_clean = 50;
        assert_eq!(st.keep_lead(100, 1000), 20);
        assert_eq!(st.next_to_clean, 120);
        // Far enough ahead: unchanged.
        st.next_to_clean = 500;
        assert_eq!(st.keep_lead(100, 1000), 0);
        assert_eq!(st.next_to_clean, 500);
        // A quarter of the pool at most.
        st.batch_ms = 1e6;
        assert_eq!(st.min_lead(1000), 250);
    }

    #[test]
    fn the_cursor_stays_ahead_and_does_not_rescan() {
        let (_vfs, pool) = pool_with(&config(64, "lru"), Arc::new(crate::NoWal));
        pool.create_relation(REL, ForkNumber::Main).unwrap();
        for _ in 0..10 {
            drop(pool.extend(REL, ForkNumber::Main).unwrap());
        }
        pool.flush_all().unwrap();
        for d in pool.descs.iter() {
            set_usage(d, 0);
        }
        // 10 allocations x multiplier 2.0 = 20 upcoming.
        let r1 = pool.bgwriter_round();
        assert_eq!(r1.upcoming_estimate, 20, "{r1:?}");
        assert_eq!(r1.buffers_scanned, 20);
        let mut total = r1.buffers_scanned;
        for _ in 0..20 {
            total += pool.bgwriter_round().buffers_scanned;
        }
        assert!(
            total <= 64,
            "scanned {total} buffers of 64 without the hand moving"
        );
    }

    /// Proves: the dirty-chain round writes the same buffers the LRU round would, while
    /// examining only dirty ones; and the dirty map tracks cleaning.
    #[test]
    fn dirty_chain_visits_only_dirty_buffers() {
        let (_vfs, pool) = pool_with(&config(64, "dirty-chain"), Arc::new(crate::NoWal));
        dirty_pool(&pool);
        let map = pool.bgwriter.dirty_map.as_ref().unwrap();
        assert_eq!(map.count(), 64);
        // Clean all but 8 spread buffers.
        pool.flush_all().unwrap();
        assert_eq!(map.count(), 0, "a write clears the bit");
        for b in (0..64).step_by(8) {
            let buf = pool
                .read(crate::BufferTag::new(REL, ForkNumber::Main, b))
                .unwrap();
            buf.write().mark_dirty();
        }
        for d in pool.descs.iter() {
            set_usage(d, 0);
        }
        assert_eq!(map.count(), 8);
        let r = pool.bgwriter_round();
        assert_eq!(r.buffers_written, 8, "{r:?}");
        assert_eq!(r.buffers_scanned, 8);
        assert_eq!(map.count(), 0);
        assert_eq!(pool.usage_summary().dirty, 0);
    }

    /// Proves: the mini-checkpoint writes dirty buffers with usage credit, which the LRU
    /// scan leaves alone, and never a pinned one.
    #[test]
    fn mini_checkpoint_writes_hot_dirty_buffers_but_not_pinned_ones() {
        let mut c = config(120, "mini-checkpoint");
        c.set("bgwriter_lru_maxpages", "400").unwrap();
        let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
        dirty_pool(&pool);
        // Block 1 sits in buffer 1 (the free list hands out buffer 0 first), which the
        // first all-scan of 120 / 60 = 2 buffers reaches.
        let held = pool
            .read(crate::BufferTag::new(REL, ForkNumber::Main, 1))
            .unwrap();
        assert_eq!(held.buffer_id(), 1);
        for d in pool.descs.iter() {
            set_usage(d, 3);
        }
        let r = pool.bgwriter_round();
        assert_eq!(r.buffers_written, 0, "all hot: no LRU writes");
        assert_eq!(r.mini_checkpoint_written, 1, "{r:?}");
        assert!(!dirty(&pool, 0));
        assert!(dirty(&pool, 1), "pinned: not written");
        assert_eq!(pool.bgwriter_stats().buffers_mini_checkpoint, 1);
        // The next all-scan is MINI_CHECKPOINT_EVERY_ROUNDS rounds later.
        for _ in 1..MINI_CHECKPOINT_EVERY_ROUNDS {
            assert_eq!(pool.bgwriter_round().mini_checkpoint_written, 0);
        }
        assert_eq!(pool.bgwriter_round().mini_checkpoint_written, 2);
    }

    /// Proves: the victim queue hands out only buffers that are unpinned, usage 0 and
    /// clean at the moment they are taken; stale entries are skipped.
    #[test]
    fn victim_queue_never_hands_out_a_pinned_or_dirty_buffer() {
        let (_vfs, pool) = pool_with(&config(32, "victim-queue"), Arc::new(crate::NoWal));
        dirty_pool(&pool);
        let r = pool.bgwriter_round();
        assert!(r.victims_queued >= 8, "{r:?}");
        assert_eq!(r.buffers_written, r.victims_queued);
        let queue = pool.bgwriter.victim_queue().unwrap();
        assert_eq!(queue.len() as u64, r.victims_queued);
        // Spoil some queued entries: pin one, dirty one, give one usage credit.
        let ids: Vec<u32> = (0..queue.len()).map(|_| queue.pop().unwrap()).collect();
        for &id in &ids {
            assert!(queue.push(id));
        }
        let tag_of = |id: u32| pool.descs[id as usize].tag();
        let held = pool.read(tag_of(ids[0])).unwrap();
        set_usage(&pool.descs[ids[0] as usize], 0);
        {
            let b = pool.read(tag_of(ids[1])).unwrap();
            b.write().mark_dirty();
        }
        set_usage(&pool.descs[ids[1] as usize], 0);
        set_usage(&pool.descs[ids[2] as usize], 1);
        let spoiled = [ids[0], ids[1], ids[2]];
        for n in 1..=ids.len() as u64 - 3 {
            let (id, s) = pool.take_victim().unwrap();
            assert_eq!(
                pool.bgwriter_stats().victims_popped,
                n,
                "served by the queue"
            );
            assert!(!spoiled.contains(&id), "stale entry {id} handed out");
            assert_eq!(refcount(s), 1, "only the taker's pin");
            assert_eq!(usage(s), 0);
            assert_eq!(s & DIRTY, 0, "a queued victim is clean");
            assert_eq!(pool.descs[id as usize].load_state(), s);
            pool.descs[id as usize].unpin();
        }
        assert!(queue.is_empty(), "the stale entries were dropped");
        drop(held);
    }

    /// Proves: a stop request ends a round at its next buffer (with several writers, at
    /// each writer's next buffer: only the writes in flight finish). How: a WAL hook that
    /// parks the round inside its first write until the test has asked it to stop.
    #[test]
    fn a_stop_request_ends_the_round_mid_way() {
        stop_mid_way("1", "io_uring");
        stop_mid_way("4", "io_uring");
        // The bgwriter thread's persistent helper threads.
        stop_mid_way("4", "threads");
    }

    fn stop_mid_way(writers: &str, io: &str) {
        use std::sync::mpsc;
        struct Gate {
            entered: Mutex<Option<mpsc::Sender<()>>>,
            open: Mutex<Option<mpsc::Receiver<()>>>,
        }
        impl WalFlush for Gate {
            fn flush(&self, _lsn: Lsn) -> Result<(), crate::buffer::WalFlushError> {
                if let Some(tx) = self.entered.lock().take() {
                    tx.send(()).unwrap();
                    let rx = self.open.lock().take().unwrap();
                    rx.recv().unwrap();
                }
                Ok(())
            }
        }
        let (entered_tx, entered_rx) = mpsc::channel();
        let (open_tx, open_rx) = mpsc::channel();
        let gate = Arc::new(Gate {
            entered: Mutex::new(None),
            open: Mutex::new(Some(open_rx)),
        });
        let mut c = config(64, "lru");
        c.set("bgwriter_writers", writers).unwrap();
        c.set("bgwriter_io_method", io).unwrap();
        let (_vfs, pool) = pool_with(&c, gate.clone());
        dirty_pool(&pool);
        *gate.entered.lock() = Some(entered_tx);
        let pool = Arc::new(pool);
        let handle = pool.start_bgwriter().unwrap().unwrap();
        assert!(
            pool.start_bgwriter().unwrap().is_none(),
            "one thread per pool"
        );
        entered_rx.recv().unwrap(); // the first round is inside its first write
        handle.request_stop();
        open_tx.send(()).unwrap();
        handle.stop();
        let s = pool.bgwriter_stats();
        assert_eq!(s.rounds, 1);
        // Stopped after the writes in progress: one per writer at most (a batch of this
        // 64-buffer pool is 4 buffers).
        let most: u64 = writers.parse().unwrap();
        assert!(
            (1..=most).contains(&s.buffers_clean),
            "{writers} writers ({io}): {} written",
            s.buffers_clean
        );
        assert_eq!(pool.usage_summary().dirty as u64, 64 - s.buffers_clean);
        // A stopped pool still runs rounds on demand.
        assert!(pool.bgwriter_round().buffers_written > 0);
    }

    /// Proves: an idle bgwriter hibernates after two idle rounds and an allocation wakes
    /// it. How: the real thread; the test waits on the pool's state, polling with a
    /// yield (no sleep stands in for a happens-before).
    #[test]
    fn hibernates_when_idle_and_an_allocation_wakes_it() {
        let mut c = config(32, "lru");
        c.set("bgwriter_delay", "10ms").unwrap();
        let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
        let pool = Arc::new(pool);
        pool.create_relation(REL, ForkNumber::Main).unwrap();
        let handle = pool.start_bgwriter().unwrap().unwrap();
        let wait_until = |what: &str, f: &dyn Fn() -> bool| {
            let deadline = Instant::now() + Duration::from_secs(20);
            while !f() {
                assert!(Instant::now() < deadline, "timed out waiting until {what}");
                std::thread::yield_now();
            }
        };
        wait_until("it hibernates", &|| pool.bgwriter_hibernating());
        let rounds = pool.bgwriter_stats().rounds;
        drop(pool.extend(REL, ForkNumber::Main).unwrap());
        wait_until("the allocation wakes it", &|| {
            pool.bgwriter_stats().rounds > rounds
        });
        assert!(pool.bgwriter_stats().hibernations >= 1);
        handle.stop();
    }
}
