//! The background writer: cleans buffers just ahead of the clock hand, so that an
//! allocation finds a clean, reusable victim instead of writing a dirty page itself
//! (PostgreSQL's BgBufferSync and bgwriter.c).
//!
//! Owns: the bgwriter's round state (its cursor and estimator, behind `round`, a mutex only
//! rounds take), its counters, the hibernation latch, and, depending on
//! [`BgwriterStrategy`], the dirty map or the victim queue.
//!
//! Files: `estimate.rs` (step 1, the round state), `scan.rs` (steps 2 to 4), `writes.rs`
//! (the write paths), `pace.rs` (the device pace), `mini_checkpoint.rs`, `victims.rs`,
//! `thread.rs` (step 5, the loop), `dirty_map.rs`, `victim_queue.rs`, `writer_crew.rs`.
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
//!    stops (`maxwritten_clean`); with buffered writes, earlier at its device pace
//!    (`rounds_paced`: `bgwriter_device_share` of the slowest fast device's probed
//!    write-back rate, `pace.rs`), so that cleaning far ahead, when the pool first fills,
//!    does not queue seconds of writes ahead of the log on a slow device. Each written
//!    block goes to a writeback context that hints the OS every `bgwriter_flush_after`
//!    bytes and at the round's end, sorted and merged (a hint left pending across a 200 ms
//!    sleep, or a 10 s hibernation, would be stale).
//! 5. **Sleep** `bgwriter_delay`; after two idle rounds (no allocations, nothing written)
//!    hibernate (below).
//!
//! Strategies (`bgwriter_strategy`):
//! - `lru`: the round above.
//! - `dirty-chain`: the same horizon (upcoming − already ahead, times the density, in
//!   buffers), but only buffers whose dirty-map bit is set are visited (`dirty_map.rs`).
//! - `mini-checkpoint`: the `lru` round, plus every `MINI_CHECKPOINT_EVERY_ROUNDS` rounds
//!   an all-scan of `nbuffers /` `MINI_CHECKPOINT_SCAN_DIVISOR` buffers from its own
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
//! timeout, `delay` × `HIBERNATE_DELAY_FACTOR`). Allocator: count the allocation
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

mod dirty_map;
mod estimate;
mod mini_checkpoint;
mod pace;
mod scan;
#[cfg(test)]
mod tests;
mod thread;
pub(super) mod victim_queue;
mod victims;
pub(super) mod writer_crew;
mod writes;

use std::time::{Duration, Instant};

use dirty_map::DirtyMap;
use estimate::RoundState;
use scan::Visited;
use thread::Crew;
use victim_queue::VictimQueue;
use writer_crew::WriterCrew;
use writes::{IoInEffect, UringSetup, WriteDone, WRITE_MS_SAMPLES};

use super::state::*;
use super::{BgwriterIo, Io};
use super::{BgwriterOptions, BgwriterStrategy, BufferError, BufferPool, BufferRef};
use crate::smgr::PageTarget;
use crate::smgr::{Device, HintedOnce, WritebackContext};
use crate::stats::{set_thread_writer, IoContext, IoOp, IoWriter};
use crate::sync::{Arc, AtomicBool, AtomicU64, Condvar, Mutex, Ordering};
use crate::types::BufferTag;
use crate::vfs::uring_writer::{PageWriteResult, UringWriter, WriteSource};
use crate::vfs::VfsFile;

/// Weight of a new sample in the smoothed allocation rate and density: 1/16, PostgreSQL's
/// smoothing_samples (an average over roughly the last 16 rounds, 3.2 s at 200 ms).
pub(crate) const SMOOTHING_SAMPLES: f64 = 16.0;
/// Starting density (buffers the sweep passes per allocation): PostgreSQL's 10.0, a
/// pessimistic guess replaced by measurements within a few rounds.
pub(crate) const INITIAL_DENSITY: f64 = 10.0;
/// The whole pool is examined at least once per this many ms even without demand:
/// PostgreSQL's scan_whole_pool_milliseconds (2 minutes).
pub(crate) const SCAN_WHOLE_POOL_MS: u64 = 120_000;
/// Idle rounds (no allocations, nothing written) before hibernating: PostgreSQL's rule
/// (it hibernates after a second consecutive round that could).
pub(crate) const HIBERNATE_AFTER_IDLE_ROUNDS: u32 = 2;
/// The shortest nap between rounds, ms (PostgreSQL's smallest bgwriter_delay).
pub(crate) const MIN_NAP_MS: u64 = 10;
/// A hibernating bgwriter wakes on its own after `delay` × this: PostgreSQL's
/// HIBERNATE_FACTOR (10 s at the default delay).
pub(crate) const HIBERNATE_DELAY_FACTOR: u64 = 50;
/// Mini-checkpoint: an all-scan every this many rounds (1 s at the default delay), so the
/// hot dirty buffers the LRU scan never reaches are written in the background.
pub(crate) const MINI_CHECKPOINT_EVERY_ROUNDS: u64 = 5;
/// Mini-checkpoint: each all-scan examines `nbuffers /` this, so the whole pool is passed
/// every 60 all-scans (a minute at the default delay); PostgreSQL 8.1's all_percent was
/// 0.333% per round, i.e. the pool every 60 s at its default 200 ms.
pub(crate) const MINI_CHECKPOINT_SCAN_DIVISOR: u64 = 60;
/// Victim queue: stale ids an allocation pops (pinned, used or dirtied since queued)
/// before it gives up on the queue and sweeps; bounds the allocation's extra work.
pub(crate) const VICTIM_QUEUE_POPS_MAX: u32 = 8;
/// Bits of the `bgwriter_flush_once` filter per buffer of the pool: the blocks a bgwriter
/// writes between two syncs are mostly those the pool held (and re-read) in that time, so
/// with 16 bits a buffer fewer than one in 16 of them collide.
pub(crate) const HINTED_BITS_PER_BUFFER: usize = 16;

/// Victim queue: its capacity is the per-round write cap, within these bounds (a buffer id
/// is 4 bytes and a cell 16, so 64 Ki cells are 1 MiB).
pub(crate) const VICTIM_QUEUE_MIN: usize = 64;
/// The victim queue's largest capacity, in cells (1 MiB).
pub(crate) const VICTIM_QUEUE_MAX: usize = 1 << 16;

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
    /// Writes not hinted to the OS because their block was hinted since the last sync of
    /// the data files (`bgwriter_flush_once`).
    pub hints_repeated_skipped: u64,
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
    /// The round stopped earlier, at its device pace (`bgwriter_device_share`).
    pub paced: bool,
    /// Nothing to do: no allocations and nothing written.
    pub idle: bool,
    /// A stop request ended the round early.
    pub stopped: bool,
    /// How long the round took.
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
    /// Rounds that stopped earlier because they wrote what their pace allowed
    /// (`bgwriter_device_share` of the slowest fast device's probed rate).
    pub rounds_paced: u64,
    /// Pages backends wrote themselves (pg_stat_io writes by backend, all contexts).
    pub buffers_backend: u64,
    /// Of `buffers_clean`, pages written by the mini-checkpoint all-scan.
    pub buffers_mini_checkpoint: u64,
    /// Rounds run.
    pub rounds: u64,
    /// Times the bgwriter thread went into hibernation.
    pub hibernations: u64,
    /// Bgwriter writes that failed (pages left dirty).
    pub write_errors: u64,
    /// Buffers examined by all rounds.
    pub buffers_scanned: u64,
    /// Time spent in rounds, and the longest round.
    pub round_time_total: Duration,
    /// The longest round.
    pub round_time_max: Duration,
    /// Victim queue: buffers pushed by the bgwriter, and popped by allocations.
    pub victims_queued: u64,
    /// Queued buffers an allocation took as its victim.
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
    /// Dirty victims handed out behind the bgwriter's cursor (`passed`, see above).
    pub dirty_victims_passed: u64,
    /// Rounds that found the hand past their cursor (the bgwriter was lapped and
    /// restarted at the hand).
    pub rounds_lapped: u64,
    /// Buffers rounds jumped over, unexamined, to keep their lead over the hand.
    pub buffers_skipped: u64,
    /// Writes left unhinted because their block was hinted since the data files' last
    /// sync (`bgwriter_flush_once`): the page cache absorbs them until the fsync.
    pub hints_repeated_skipped: u64,
}

#[derive(Debug, Default)]
struct Counters {
    buffers_clean: AtomicU64,
    maxwritten_clean: AtomicU64,
    rounds_paced: AtomicU64,
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
    hints_repeated_skipped: AtomicU64,
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
    /// The heap its per-buffer structures hold (the dirty map, the victim queue), in
    /// bytes.
    pub(in crate::buffer) fn heap_bytes(&self) -> usize {
        self.dirty_map.as_ref().map_or(0, DirtyMap::heap_bytes)
            + self
                .victim_queue
                .as_ref()
                .map_or(0, VictimQueue::heap_bytes)
    }

    pub(super) fn new(options: BgwriterOptions, nbuffers: usize, page_size: usize) -> Self {
        let maxpages = options.lru_maxpages_for(nbuffers);
        let writeback_pages = (options.flush_after_bytes / page_size as u64) as usize;
        let mut state = RoundState::new(writeback_pages);
        if options.flush_once && writeback_pages > 0 {
            state.hinted = Some(HintedOnce::new(
                nbuffers.saturating_mul(HINTED_BITS_PER_BUFFER),
            ));
        }
        Self {
            options,
            maxpages,
            round: Mutex::new(state),
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

/// One round of the background writer (steps 1 to 4 above): the pool, the round state it
/// holds for the round (under `Bgwriter::round`), the report it fills, and the helpers
/// that keep its writes in flight. Each step is a method of it (`estimate.rs`, `scan.rs`,
/// `writes.rs`, `mini_checkpoint.rs`, `victims.rs`); the writes of single buffers it
/// calls stay on the pool.
pub(super) struct Round<'a> {
    pool: &'a BufferPool,
    state: &'a mut RoundState,
    report: RoundReport,
    crew: Option<&'a Crew>,
    /// The most pages this round writes ([`BufferPool::round_limit`]).
    limit: u64,
}

impl Round<'_> {
    /// The round of the configured strategy.
    fn run(&mut self) {
        self.uring_ready();
        match self.pool.bgwriter.options.strategy {
            BgwriterStrategy::VictimQueue => self.victim_queue(),
            strategy => {
                self.lru(strategy == BgwriterStrategy::DirtyChain);
                if strategy == BgwriterStrategy::MiniCheckpoint
                    && !self.report.stopped
                    && self.state.round_number % MINI_CHECKPOINT_EVERY_ROUNDS == 0
                {
                    self.mini_checkpoint();
                }
            }
        }
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
            buffers_alloc: self.repl.allocations(),
            buffers_clean: get(&c.buffers_clean),
            maxwritten_clean: get(&c.maxwritten_clean),
            rounds_paced: get(&c.rounds_paced),
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
            hints_repeated_skipped: get(&c.hints_repeated_skipped),
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

    /// Runs one bgwriter round now, on the calling thread (its writes are counted as the
    /// bgwriter's), and returns what it did. The thread calls this; so can an experiment
    /// or a test, with or without the thread (rounds take turns).
    pub fn bgwriter_round(&self) -> RoundReport {
        self.bgwriter_round_with(None)
    }

    /// `bgwriter_flush_once`, per device: probes the device of each tablespace first
    /// written to since the last round (once per device: tablespaces on one device share
    /// its probe) and turns a device slow after a slow fsync of a file on it (see
    /// [`HintedOnce`]), saying so in the log.
    fn judge_devices(&self, h: &mut HintedOnce) {
        let smgr = &self.smgr;
        let probe = |ts: u32| match smgr.probe_device_once(ts) {
            Ok((p, Some(first))) => {
                tracing::info!(
                    "bgwriter: tablespace {ts} is on tablespace {first}'s device ({:.0} \
                     pages/s)",
                    p.pages_per_sec()
                );
                Some(p.pages_per_sec())
            }
            Ok((p, None)) => {
                tracing::info!(
                    "bgwriter: tablespace {ts}'s device wrote back {:.0} pages/s ({} pages \
                     per fdatasync, the slowest of {} took {:.1} ms)",
                    p.pages_per_sec(),
                    p.pages,
                    crate::smgr::PROBE_ROUNDS,
                    p.sync.as_secs_f64() * 1e3
                );
                Some(p.pages_per_sec())
            }
            Err(e) => {
                tracing::warn!("bgwriter: probing tablespace {ts}'s device failed: {e}");
                None
            }
        };
        let slowest = h.slowest_rate();
        for (ts, d) in h.refresh_devices(probe, |ts| smgr.slow_sync_in(ts)) {
            let how = match d {
                Device::Fast => "each block once between syncs of the data files",
                _ => "every write",
            };
            tracing::info!("bgwriter: tablespace {ts}: writeback hints for {how}");
        }
        let share = f64::from(self.bgwriter.options.device_share_thousandths) / 1000.0;
        let now = h.slowest_rate();
        if let Some(rate) = now.filter(|_| share > 0.0 && now != slowest) {
            tracing::info!(
                "bgwriter: writes paced to {:.0} pages/s (bgwriter_device_share {share:.2} \
                 of the slowest fast device's {rate:.0})",
                rate * share
            );
        }
    }

    /// The most pages this round may write: `lru_maxpages`, or fewer when the bgwriter's
    /// pace (`bgwriter_device_share` of the slowest fast device's probed rate, a round's
    /// `bgwriter_delay` of it at most held over) has less left. Buffered writes only: an
    /// O_DIRECT write is on the device when it returns, so a round queues at most
    /// `bgwriter_writers` of them ahead of the log, and what it left would cost the
    /// backends a device write each.
    fn round_limit(&self, state: &mut RoundState, now: Instant) -> u64 {
        let max = self.bgwriter.maxpages;
        let share = f64::from(self.bgwriter.options.device_share_thousandths) / 1000.0;
        let rate = state.hinted.as_ref().and_then(HintedOnce::slowest_rate);
        match rate {
            Some(rate) if share > 0.0 && !self.smgr.direct_io() => {
                let hold = Duration::from_millis(self.bgwriter.options.delay_ms);
                state.pace.budget(rate * share, hold, now).min(max)
            }
            _ => max,
        }
    }

    /// [`Self::bgwriter_round`] with the bgwriter thread's helpers (None: a batch starts
    /// its own scoped threads).
    fn bgwriter_round_with(&self, crew: Option<&Crew>) -> RoundReport {
        let start = Instant::now();
        let previous = set_thread_writer(IoWriter::Bgwriter);
        let mut state = self.bgwriter.round.lock();
        if let Some(h) = &mut state.hinted {
            h.start(self.smgr.syncs_done(), start);
            self.judge_devices(h);
        }
        let limit = self.round_limit(&mut state, start);
        let mut round = Round {
            pool: self,
            state: &mut state,
            report: RoundReport::default(),
            crew,
            limit,
        };
        round.run();
        let mut report = round.report;
        state
            .pace
            .spend(report.buffers_written + report.mini_checkpoint_written);
        report.paced = report.hit_maxpages && limit < self.bgwriter.maxpages;
        report.hit_maxpages &= !report.paced;
        state.round_number += 1;
        // A hint; a failure is not a lost write (the checkpoint's fsync reports those).
        let _ = state.writeback.issue(&self.smgr, IoContext::Normal);
        crate::invariants::debug_check(|| {
            let published = self.bgwriter.cursor.load(Ordering::Relaxed);
            state.check_invariants(self.repl.hand(), self.descs.len() as u64, published)
        });
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
        c.hints_repeated_skipped
            .fetch_add(report.hints_repeated_skipped, Ordering::Relaxed);
        c.buffers_clean.fetch_add(
            report.buffers_written + report.mini_checkpoint_written,
            Ordering::Relaxed,
        );
        c.buffers_mini_checkpoint
            .fetch_add(report.mini_checkpoint_written, Ordering::Relaxed);
        c.maxwritten_clean
            .fetch_add(u64::from(report.hit_maxpages), Ordering::Relaxed);
        c.rounds_paced
            .fetch_add(u64::from(report.paced), Ordering::Relaxed);
        c.write_errors
            .fetch_add(report.write_errors, Ordering::Relaxed);
        c.victims_queued
            .fetch_add(report.victims_queued, Ordering::Relaxed);
        c.allocations_seen
            .fetch_max(report.allocations_seen, Ordering::Relaxed);
        report
    }
}
