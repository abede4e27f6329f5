//! The multi-block miss: up to N consecutive blocks of one fork started together, each run
//! of adjacent misses filled by one vectored read into its (non-contiguous) pool frames.
//!
//! Owns: [`ReadRun`] (one started run: its pinned buffers in block order and its reads in
//! flight), the completion step of those reads, and the pool's read-ahead state
//! (`ReadAhead`): its I/O engines (one `vfs::aio::Aio` per method, built on first use;
//! a `std` `OnceLock` each, so under shuttle only one modeled thread may build an engine)
//! and the pool-wide account of look-ahead pins ([`BufferPool::reserve_lookahead_pins`]).
//!
//! Two steps, so the I/O can finish on another thread ([`BufferPool::start_read_run`]):
//! 1. Start (caller's thread): for each block, a hit is pinned and kept as it is; a block
//!    mapped but not VALID (another reader's I/O, or a failed one) is pinned and resolved
//!    later like any read of it; a miss is claimed exactly as a single read claims it
//!    (`BufferPool::claim`: victim from `victim_for(ring)`, retagged with IO_IN_PROGRESS,
//!    so a concurrent reader of that block pins it and waits instead of reading it twice).
//!    Its content lock is not taken (PostgreSQL's rule: IO_IN_PROGRESS alone guards a
//!    read; see the invariants). Each maximal run of adjacent claimed blocks within one segment becomes
//!    one `ReadvRequest` submitted to the engine before `start_read_run` returns, so a
//!    claimed buffer's I/O never waits for its owner to come back.
//! 2. Completion (engine thread; inline for `sync`): per page, verify its checksum
//!    (`page::verify`); end its I/O (VALID, or IO_ERROR) and wake
//!    its waiters; record its own error (`BufferError::Corrupt`, `SmgrError::Read` or
//!    `SmgrError::ShortRead` with its block). A bad page fails alone: the others of the
//!    same read become VALID and usable.
//!
//! The owner then takes the buffers in order ([`ReadRun::next`]), waiting for a read's
//! completion if it is not in yet. Dropping a run waits for its reads in flight and
//! releases every pin it still holds.
//!
//! Invariants: every claimed buffer is pinned by the run, has IO_IN_PROGRESS from its claim
//! to its completion, and its frame is written only by its read; a completion touches
//! only the shared parts of the pool (`descs`, `io_wait`, `smgr`, all `Arc`s) and page
//! memory, which outlives it because the pool drops its engines (finishing every read)
//! before its arena. Nobody else touches a claimed frame, with no content lock held: the
//! claim leaves only TAG_VALID, IO_IN_PROGRESS and the run's pin; a `BufferRef` is handed
//! out only for a VALID buffer (a reader of the block pins it and waits out the I/O); the
//! writers (eviction, ring reuse, bgwriter, checkpointer) start a write only on a DIRTY
//! and VALID or CHECKPOINT_NEEDED buffer, flags the claim cleared, and wait out
//! IO_IN_PROGRESS first. Taking the content lock here would be worse than useless: it
//! would be released by the engine thread that completes the read, which a lock's
//! contract forbids (with parking_lot's deadlock detection on, such a release is lost
//! and the holder's thread keeps the lock on its books forever).
//! Locks: start takes what `claim` takes (mapping partitions, header); a completion takes
//! one header lock at a time and the run's outcome mutex last. Nothing here waits for I/O
//! while holding a lock.

use std::collections::VecDeque;
use std::io;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use super::descriptor::BufferDesc;
use super::io_wait::IoWait;
use super::state::*;
use super::{BufferError, BufferPool, BufferRef, BufferResult, Claim, Fill, Ring, WalFlush};
use crate::smgr::{Smgr, SmgrError};
use crate::stats::{IoContext, IoOp};
use crate::sync::{Arc, AtomicUsize, Condvar, Mutex, Ordering};
use crate::types::{BlockNumber, BufferTag, ForkNumber, RelFileId};
use crate::vfs::aio::{Aio, AioOptions, IoMethod, ReadvRequest};

/// All read streams together hold at most `nbuffers / LOOKAHEAD_PINS_POOL_DIVISOR` pins
/// ahead of their consumers (half the pool), however many streams there are: each stream's
/// own budget (`scan::read_stream::PIN_SHARE_DIVISOR`) keeps one stream modest, this keeps
/// many from pinning the pool between them (PostgreSQL bounds the sum through
/// `MaxBackends`; an embedded pool has no such bound). A stream with nothing queued is
/// always granted one pin, so every stream makes progress.
pub(crate) const LOOKAHEAD_PINS_POOL_DIVISOR: usize = 2;

/// The pool's read-ahead state: I/O engines, one per method, each built the first time a
/// run asks for it; the look-ahead pin account.
#[derive(Debug)]
pub(super) struct ReadAhead {
    opts: AioOptions,
    engines: [OnceLock<Aio>; 3],
    /// Look-ahead pins reserved by all streams.
    pins: AtomicUsize,
    pin_limit: usize,
}

impl ReadAhead {
    pub(super) fn new(opts: AioOptions, nbuffers: usize) -> Self {
        Self {
            opts,
            engines: Default::default(),
            pins: AtomicUsize::new(0),
            pin_limit: (nbuffers / LOOKAHEAD_PINS_POOL_DIVISOR).max(1),
        }
    }

    fn get(&self, method: IoMethod) -> &Aio {
        let i = IoMethod::ALL.iter().position(|m| *m == method).unwrap_or(0);
        self.engines[i].get_or_init(|| {
            Aio::new(AioOptions {
                method,
                ..self.opts
            })
        })
    }

    /// Finishes every read in flight and stops the engines' threads.
    pub(super) fn shutdown(&mut self) {
        for e in &mut self.engines {
            drop(e.take());
        }
    }
}

/// What a run did, for a read stream's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadRunStats {
    /// Blocks the run covers.
    pub blocks: usize,
    /// Blocks found VALID in the pool.
    pub hits: usize,
    /// Blocks found in the pool but not VALID yet (another reader's I/O, or a failed
    /// one): resolved when taken, like a single read of them.
    pub pending_elsewhere: usize,
    /// Blocks this run read from storage.
    pub blocks_read: usize,
    /// Vectored reads issued (one per run of adjacent misses within a segment).
    pub reads: usize,
    /// Buffers whose read had not completed when they were taken (the taker waited).
    pub waits: usize,
}

/// One block of a run, in block order.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// Pinned and VALID.
    Ready(u32),
    /// Pinned, mapped, not VALID when the run started.
    Elsewhere(u32),
    /// Pinned and claimed by this run: page `index` of read `io`.
    Claimed { id: u32, io: usize, index: usize },
}

/// A started run of consecutive blocks (see the module doc). Take its buffers in order
/// with [`ReadRun::next`]; dropping it waits for its reads and releases its pins.
pub struct ReadRun<'a> {
    pool: &'a BufferPool,
    rel: RelFileId,
    fork: ForkNumber,
    /// Block of the front slot.
    next_block: BlockNumber,
    slots: VecDeque<Slot>,
    ios: Vec<Arc<RunIo>>,
    context: IoContext,
    stats: ReadRunStats,
}

impl std::fmt::Debug for ReadRun<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadRun")
            .field("rel", &self.rel)
            .field("fork", &self.fork)
            .field("next_block", &self.next_block)
            .field("left", &self.slots.len())
            .field("stats", &self.stats)
            .finish()
    }
}

/// One vectored read of a run, shared by the run and the engine thread that completes it.
struct RunIo {
    descs: Arc<[BufferDesc]>,
    wal: Arc<dyn WalFlush>,
    io_wait: Arc<IoWait>,
    smgr: Arc<Smgr>,
    context: IoContext,
    rel: RelFileId,
    fork: ForkNumber,
    first: BlockNumber,
    ids: Vec<u32>,
    /// Frame addresses (in the pool's arena) of `ids`, as integers so the struct is Send.
    frames: Vec<usize>,
    page_size: usize,
    started: Instant,
    /// The submitting thread's role: the read is its in pg_stat_io, whichever thread
    /// completes it (an I/O worker, the io_uring reaper).
    writer: crate::stats::IoWriter,
    /// Per page, its error (None: VALID); `None` until the read has completed.
    outcome: Mutex<Option<Vec<Option<BufferError>>>>,
    completed: Condvar,
    /// How many pages the completion has ended (for a completion that panics midway).
    ended: AtomicUsize,
}

/// A copy of an OS error for each page of a failed read (`io::Error` is not `Clone`); the
/// errno survives.
fn copy_io_error(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// Ends a read's I/O on `d` (the read half of `BufferPool::terminate_io`, for completions
/// that run without the pool): VALID on success, IO_ERROR on failure; wakes the waiters.
fn terminate_read(d: &BufferDesc, io_wait: &IoWait, ok: bool) {
    let s = d.lock_header();
    debug_assert!(
        s & IO_IN_PROGRESS != 0 && refcount(s) >= 1,
        "completing a read that is not in progress: {}",
        describe(s)
    );
    let new = if ok {
        (s & !(IO_IN_PROGRESS | IO_ERROR)) | VALID
    } else {
        (s & !IO_IN_PROGRESS) | IO_ERROR
    };
    d.unlock_header(new);
    io_wait.wake(d);
}

impl RunIo {
    fn tag(&self, index: usize) -> BufferTag {
        BufferTag::new(self.rel, self.fork, self.first + index as u32)
    }

    /// The completion step: `result` is the read's outcome (bytes moved, or the OS error)
    /// from the file at `path`, or an error that kept it from being issued at all.
    fn complete(&self, path: &Path, result: Result<usize, SmgrError>) {
        let ps = self.page_size;
        // A read moves at most what it asked for: one page per claimed buffer.
        debug_assert!(
            result
                .as_ref()
                .ok()
                .is_none_or(|&got| got <= self.ids.len() * ps),
            "a read of {} pages from block {} returned {result:?} bytes",
            self.ids.len(),
            self.first
        );
        if let Ok(got) = result {
            self.smgr.stats().count_timed_as(
                self.writer,
                self.context,
                IoOp::Read,
                (got / ps) as u64,
                self.started.elapsed(),
            );
        }
        let (got, mut original) = match result {
            Ok(n) => (n, None),
            Err(e) => (0, Some(e)),
        };
        // Pages after the first of a failed read get a copy naming their own block.
        let copy = |tag: BufferTag, e: &SmgrError| match e {
            SmgrError::Read { path, source, .. } => SmgrError::Read {
                tag,
                path: path.clone(),
                source: copy_io_error(source),
            },
            other => SmgrError::Read {
                tag,
                path: path.to_path_buf(),
                source: io::Error::other(other.to_string()),
            },
        };
        let shadow = original.as_ref().map(|e| copy(self.tag(0), e));
        let mut errors = Vec::with_capacity(self.ids.len());
        // If anything below panics midway, the pages not yet ended fail and the outcome
        // is published anyway, so neither the owner nor a reader waiting for one of them
        // hangs (the panic then goes on).
        let guard = PanicGuard { io: self, path };
        for (i, &id) in self.ids.iter().enumerate() {
            let tag = self.tag(i);
            let err: Option<BufferError> = match (&shadow, original.take()) {
                (_, Some(e)) => Some(e.into()),
                (Some(e), None) => Some(copy(tag, e).into()),
                (None, None) if got >= (i + 1) * ps => {
                    // SAFETY: the frame is `page_size` bytes of the arena, which outlives
                    // every read (the pool drops its engines first); the run pins the
                    // buffer, whose IO_IN_PROGRESS (set at its claim, cleared below) keeps
                    // everyone else off the frame (module doc), and the read that wrote it
                    // has returned.
                    let frame =
                        unsafe { std::slice::from_raw_parts(self.frames[i] as *const u8, ps) };
                    super::verify_read(&self.smgr, frame, &tag, &*self.wal).err()
                }
                (None, None) => Some(
                    SmgrError::ShortRead {
                        tag,
                        path: path.to_path_buf(),
                        got: got.saturating_sub(i * ps).min(ps),
                        want: ps,
                    }
                    .into(),
                ),
            };
            let d = &self.descs[id as usize];
            terminate_read(d, &self.io_wait, err.is_none());
            errors.push(err);
            guard.io.ended.store(i + 1, Ordering::Release);
        }
        std::mem::forget(guard);
        *self.outcome.lock() = Some(errors);
        self.completed.notify_all();
    }

    /// Ends the pages a panicking completion had not ended yet (failed, with their
    /// waiters woken) and publishes the outcome, every page an error.
    fn fail_after_panic(&self, path: &Path) {
        for i in self.ended.load(Ordering::Acquire)..self.ids.len() {
            terminate_read(&self.descs[self.ids[i] as usize], &self.io_wait, false);
        }
        let errors = (0..self.ids.len())
            .map(|i| {
                Some(
                    SmgrError::Read {
                        tag: self.tag(i),
                        path: path.to_path_buf(),
                        source: io::Error::other("the read's completion panicked"),
                    }
                    .into(),
                )
            })
            .collect();
        *self.outcome.lock() = Some(errors);
        self.completed.notify_all();
    }

    /// Waits for the completion; returns whether it had to wait.
    fn wait(&self) -> bool {
        let mut g = self.outcome.lock();
        let waited = g.is_none();
        if waited {
            g = crate::waits::timed(crate::waits::Wait::DataRead, move || {
                while g.is_none() {
                    g = self.completed.wait(g);
                }
                g
            });
        }
        drop(g);
        waited
    }

    /// Page `index`'s error (None: VALID), after the completion; and whether it waited.
    fn take(&self, index: usize) -> (Option<BufferError>, bool) {
        let waited = self.wait();
        let mut g = self.outcome.lock();
        let e = g.as_mut().and_then(|v| v[index].take());
        (e, waited)
    }
}

/// Fails the rest of a read's pages if its completion unwinds (see `RunIo::complete`).
struct PanicGuard<'a> {
    io: &'a RunIo,
    path: &'a Path,
}

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        self.io.fail_after_panic(self.path);
    }
}

impl BufferPool {
    /// The `io_method` reads run ahead of use take by default (the pool's options).
    pub fn io_method(&self) -> IoMethod {
        self.aio.opts.method
    }

    /// The I/O engine of `method` (built on first use; the one in effect may be a fallback:
    /// see [`Aio::method`]).
    pub fn aio(&self, method: IoMethod) -> &Aio {
        self.aio.get(method)
    }

    /// Reserves up to `want` look-ahead pins from the pool-wide account (see
    /// `LOOKAHEAD_PINS_POOL_DIVISOR`); returns how many were granted, at least one if
    /// `at_least_one` (a stream with nothing queued) and `want > 0`. Give them back with
    /// [`BufferPool::release_lookahead_pins`] as the pinned buffers leave the stream.
    pub fn reserve_lookahead_pins(&self, want: usize, at_least_one: bool) -> usize {
        let a = &self.aio;
        let mut cur = a.pins.load(Ordering::Relaxed);
        loop {
            let free = a.pin_limit.saturating_sub(cur);
            let grant = want.min(free.max(usize::from(at_least_one)));
            if grant == 0 {
                return 0;
            }
            match a.pins.compare_exchange_weak(
                cur,
                cur + grant,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return grant,
                Err(x) => cur = x,
            }
        }
    }

    /// Gives back `n` look-ahead pins reserved with [`BufferPool::reserve_lookahead_pins`].
    pub fn release_lookahead_pins(&self, n: usize) {
        let before = self.aio.pins.fetch_sub(n, Ordering::Relaxed);
        debug_assert!(before >= n, "released {n} look-ahead pins of {before}");
    }

    /// (reserved, limit) of the pool-wide look-ahead pin account.
    pub fn lookahead_pins(&self) -> (usize, usize) {
        (self.aio.pins.load(Ordering::Relaxed), self.aio.pin_limit)
    }

    /// Starts reading blocks `first..first + nblocks` of one fork (the multi-block miss; see
    /// `read_run.rs`'s module doc): hits are pinned as they are, misses claimed and read
    /// with one vectored read per run of adjacent misses, through the engine of `method`,
    /// reusing buffers of `ring` when given. Returns once every read is submitted (`sync`:
    /// done). If a block cannot be claimed (every buffer pinned, a victim's write failed),
    /// the run ends before it ([`ReadRun::len`] tells), and the error is returned only
    /// when that is the first block: asking for that block again reports it.
    pub fn start_read_run(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        first: BlockNumber,
        nblocks: usize,
        mut ring: Option<&mut Ring>,
        method: IoMethod,
    ) -> BufferResult<ReadRun<'_>> {
        debug_assert!(nblocks >= 1, "an empty read run");
        debug_assert!(
            u64::from(first) + nblocks as u64 <= u64::from(crate::types::MAX_BLOCK_NUMBER) + 1,
            "a read run of {nblocks} blocks from {first} passes the largest block number"
        );
        let context = ring
            .as_ref()
            .map_or(IoContext::Normal, |r| r.kind().context());
        let mut run = ReadRun {
            pool: self,
            rel,
            fork,
            next_block: first,
            slots: VecDeque::with_capacity(nblocks),
            ios: Vec::new(),
            context,
            stats: ReadRunStats::default(),
        };
        for i in 0..nblocks {
            let tag = BufferTag::new(rel, fork, first + i as u32);
            match self.pin_or_claim(tag, context, ring.as_deref_mut()) {
                Ok(slot) => {
                    match slot {
                        Slot::Ready(_) => run.stats.hits += 1,
                        Slot::Elsewhere(_) => run.stats.pending_elsewhere += 1,
                        Slot::Claimed { .. } => run.stats.blocks_read += 1,
                    }
                    run.slots.push_back(slot);
                }
                Err(e) if i == 0 => return Err(e),
                Err(_) => break,
            }
        }
        run.stats.blocks = run.slots.len();
        run.submit(method);
        Ok(run)
    }

    /// Pins `tag` if it is in the pool, else claims a buffer for it (IO_IN_PROGRESS set).
    fn pin_or_claim(
        &self,
        tag: BufferTag,
        context: IoContext,
        ring: Option<&mut Ring>,
    ) -> BufferResult<Slot> {
        let hash = tag.hash64();
        let found = |id: u32| {
            if self.descs[id as usize].load_state() & VALID != 0 {
                self.smgr.stats().count(context, IoOp::Hit, 1);
                Slot::Ready(id)
            } else {
                Slot::Elsewhere(id)
            }
        };
        if let Some(id) = self.mapping.lookup_optimistic(&self.descs, &tag, hash) {
            let d = &self.descs[id as usize];
            // A ring's hit raises usage only from 0 to 1 (see ring.rs), as a single read does.
            let s = if ring.is_some() {
                d.pin_ring()
            } else {
                d.pin()
            };
            if s & TAG_VALID != 0 && d.tag_is(&tag) {
                if self.trace.on() {
                    self.trace
                        .record(&tag, super::trace::HIT | super::ring_flag(ring.is_some()));
                }
                return Ok(found(id));
            }
            d.unpin();
        }
        match self.claim(tag, hash, context, ring)? {
            Claim::Mapped(id) => Ok(found(id)),
            Claim::Retagged(id) => {
                // The claim leaves only TAG_VALID, IO_IN_PROGRESS and our pin (module doc).
                debug_assert!(
                    {
                        let s = self.descs[id as usize].load_state();
                        s & (IO_IN_PROGRESS | TAG_VALID) == (IO_IN_PROGRESS | TAG_VALID)
                            && s & (VALID | DIRTY) == 0
                            && refcount(s) >= 1
                    },
                    "claimed buffer {id} for {tag} is not a pinned, in-progress, empty frame: {:?}",
                    self.descs[id as usize]
                );
                // No content lock: IO_IN_PROGRESS guards the frame (module doc).
                Ok(Slot::Claimed {
                    id,
                    io: usize::MAX,
                    index: 0,
                })
            }
        }
    }
}

impl<'a> ReadRun<'a> {
    /// Groups the claimed slots into reads (adjacent, one segment each) and submits them.
    fn submit(&mut self, method: IoMethod) {
        let pool = self.pool;
        let mut i = 0;
        while i < self.slots.len() {
            if !matches!(self.slots[i], Slot::Claimed { .. }) {
                i += 1;
                continue;
            }
            let first = self.next_block + i as u32;
            let target = pool.smgr.read_target(self.rel, self.fork, first);
            let room = target.as_ref().map_or(1, |t| t.2 as usize);
            let mut ids = Vec::new();
            while i < self.slots.len() && ids.len() < room {
                let Slot::Claimed { id, .. } = self.slots[i] else {
                    break;
                };
                self.slots[i] = Slot::Claimed {
                    id,
                    io: self.ios.len(),
                    index: ids.len(),
                };
                ids.push(id);
                i += 1;
            }
            let io = Arc::new(RunIo {
                descs: pool.descs.clone(),
                wal: pool.wal.clone(),
                io_wait: pool.io_wait.clone(),
                smgr: pool.smgr.clone(),
                context: self.context,
                rel: self.rel,
                fork: self.fork,
                first,
                frames: ids
                    .iter()
                    .map(|&id| pool.arena.frame(id) as usize)
                    .collect(),
                ids,
                page_size: pool.page_size,
                started: Instant::now(),
                writer: crate::stats::thread_writer(),
                outcome: Mutex::new(None),
                completed: Condvar::new(),
                ended: AtomicUsize::new(0),
            });
            self.ios.push(io.clone());
            self.stats.reads += 1;
            match target {
                Err(e) => {
                    let path = pool.smgr.segment_path(
                        self.rel,
                        self.fork,
                        first / pool.smgr.segment_blocks(),
                    );
                    io.complete(&path, Err(e));
                }
                Ok((file, offset, _)) => {
                    let bufs: Vec<(*mut u8, usize)> = io
                        .frames
                        .iter()
                        .map(|&f| (f as *mut u8, io.page_size))
                        .collect();
                    let f = file.clone();
                    let done = io.clone();
                    // SAFETY: each frame is a claimed buffer's: pinned by this run, !VALID
                    // with IO_IN_PROGRESS (so nobody else reads or writes it), its content
                    // lock held exclusively until the completion releases it; the arena
                    // outlives the engine. Frames are page-aligned (O_DIRECT works).
                    let req = unsafe {
                        ReadvRequest::new(
                            file,
                            offset,
                            &bufs,
                            Box::new(move |r| {
                                let r = r.map_err(|source| SmgrError::Read {
                                    tag: done.tag(0),
                                    path: f.path().to_path_buf(),
                                    source,
                                });
                                done.complete(f.path(), r)
                            }),
                        )
                    };
                    pool.aio(method).submit(req);
                }
            }
        }
    }

    /// Blocks the run covers (fewer than asked if it ended at a block it could not claim).
    pub fn len(&self) -> usize {
        self.stats.blocks
    }

    /// Whether the run covers no block (never, for a run `start_read_run` returned).
    pub fn is_empty(&self) -> bool {
        self.stats.blocks == 0
    }

    /// Buffers not taken yet.
    pub fn remaining(&self) -> usize {
        self.slots.len()
    }

    /// The block [`ReadRun::next`] returns next.
    pub fn next_block(&self) -> BlockNumber {
        self.next_block
    }

    /// Whether the run issued any read.
    pub fn needed_io(&self) -> bool {
        !self.ios.is_empty()
    }

    /// Pages of each read the run issued, in order.
    pub fn read_sizes(&self) -> impl Iterator<Item = usize> + '_ {
        self.ios.iter().map(|io| io.ids.len())
    }

    /// What the run did so far.
    pub fn stats(&self) -> ReadRunStats {
        self.stats
    }

    /// The next block's buffer, pinned and VALID, or its own error; waits for its read if
    /// needed. `None` once every block was taken.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<BufferResult<BufferRef<'a>>> {
        let slot = self.slots.pop_front()?;
        let tag = BufferTag::new(self.rel, self.fork, self.next_block);
        self.next_block += 1;
        let pool = self.pool;
        // The run's pin has kept each slot's buffer on its block since the run started.
        debug_assert!(
            {
                let (Slot::Ready(id) | Slot::Elsewhere(id) | Slot::Claimed { id, .. }) = slot;
                pool.descs[id as usize].tag_is(&tag)
            },
            "slot {slot:?} of the run no longer holds {tag}"
        );
        Some(match slot {
            Slot::Ready(id) => Ok(BufferRef { pool, id }),
            Slot::Elsewhere(id) => pool.finish_load(id, tag, self.context, Fill::Read),
            Slot::Claimed { id, io, index } => {
                let (err, waited) = self.ios[io].take(index);
                self.stats.waits += usize::from(waited);
                match err {
                    None => Ok(BufferRef { pool, id }),
                    Some(e) => {
                        pool.descs[id as usize].unpin();
                        Err(e)
                    }
                }
            }
        })
    }
}

impl Drop for ReadRun<'_> {
    /// Waits for the run's reads in flight, then releases the pins of untaken buffers.
    fn drop(&mut self) {
        for io in &self.ios {
            io.wait();
        }
        for slot in self.slots.drain(..) {
            let (Slot::Ready(id) | Slot::Elsewhere(id) | Slot::Claimed { id, .. }) = slot;
            self.pool.descs[id as usize].unpin();
        }
    }
}
