//! Read streams: a consumer asks for the blocks of one fork in an order it knows ahead (a
//! sequential scan, VACUUM, a bulk load's reads, a callback's list), and the stream reads
//! them before they are needed, combining adjacent misses into one vectored read.
//!
//! Owns: [`ReadStream`] (its block source, its queue of started runs, its look-ahead
//! distance and counters), [`ReadStreamOptions`] and [`ReadStreamStats`]. It works over the
//! pool's public API only: the multi-block miss itself is `BufferPool::start_read_run`
//! (`buffer/read_run.rs`), which claims, reads and verifies; this module decides which
//! blocks to ask for, how many at once and how far ahead (the readahead argument for 8.3's scans: a
//! 256 kB read beats eight 32 kB ones, and overlapping the read with the scan's own work
//! is where the rest of the gain lies).
//!
//! The distance (how many buffers the stream keeps pinned ahead of the consumer) aims at
//! three access patterns, as PostgreSQL's read_stream.c does:
//! - A. Everything is in the pool: reading ahead buys nothing and pinning ahead costs
//!   pins; the distance decays by one for each hit, down to 1.
//! - B. Misses on adjacent blocks: the distance doubles after each run that needed a read,
//!   so the stream soon asks for whole `io_combine_limit` runs, one vectored read each.
//! - C. Misses that I/O concurrency can hide (several runs in flight on `worker` threads or
//!   in io_uring): the distance keeps doubling up to `effective_io_concurrency` combined
//!   reads, capped by the stream's pin budget.
//!
//! The queue, oldest run first; every buffer in it is pinned by the stream:
//!
//! ```text
//!   consumer <- next()
//!        |
//!   +----v--------------+-----------------+-------------+  . . . . . . . . . . .
//!   | run 17..24        | run 25..40      | hit 41      |  pending 42..45 (not  :
//!   | taking: 19 next   | read in flight  | (no I/O)    |  started: may grow)   :
//!   +-------------------+-----------------+-------------+  . . . . . . . . . . .
//!   |<------------- queued pins (<= distance <= max_pins) ------------>|
//! ```
//!
//! A pending run is held back while it can still grow (the source's next block is adjacent
//! and the distance leaves no room yet) unless the queue is empty; it is started once it
//! reaches `io_combine_limit`, the next block is not adjacent, or the source ends.
//!
//! Invariants: blocks come out in the source's order, each exactly once (a block whose run
//! could not start comes out as its error, in its place); queued pins never exceed
//! `max_pins` (the stream's budget, a share of the pool), and every queued pin is reserved
//! in the pool-wide look-ahead account (`BufferPool::reserve_lookahead_pins`, half the
//! pool for all streams together), so many streams cannot pin the pool between them;
//! dropping the stream waits for its reads in flight and releases every pin it holds
//! (each `ReadRun`'s drop). Locks: none of its own; a stream belongs to one thread.

use std::collections::VecDeque;
use std::ops::Range;

use crate::buffer::{BufferError, BufferPool, BufferRef, BufferResult, ReadRun, Ring};
use crate::types::{BlockNumber, ForkNumber, RelFileId};
use crate::vfs::aio::IoMethod;

/// Default largest combined read: PostgreSQL's io_combine_limit default, 128 kB.
pub const DEFAULT_IO_COMBINE_LIMIT_BYTES: usize = 128 << 10;
/// Default combined reads in flight per stream: PostgreSQL 18's effective_io_concurrency.
pub const DEFAULT_IO_CONCURRENCY: usize = 16;
/// A stream pins at most `nbuffers / PIN_SHARE_DIVISOR` buffers ahead (at least one):
/// PostgreSQL gives each backend `NBuffers / MaxBackends`; an embedded pool serves a few
/// threads, so one stream may take a sixteenth (8 MiB ahead of a 128 MiB pool, four times
/// PostgreSQL's default reach of 16 x 128 kB); all streams together are bounded by the
/// pool-wide account (`buffer::LOOKAHEAD_PINS_POOL_DIVISOR`, half the pool).
pub(crate) const PIN_SHARE_DIVISOR: usize = 16;

/// How a stream reads ahead. `Config::read_stream_options` builds it from the knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadStreamOptions {
    /// Where reads run (`None`: the pool's `io_method`).
    pub io_method: Option<IoMethod>,
    /// Largest combined read in bytes (`io_combine_limit`); one page or less: no combining.
    pub io_combine_limit_bytes: usize,
    /// Combined reads kept in flight (`effective_io_concurrency`); 0: one read at a time,
    /// run inline, nothing ahead of use.
    pub io_concurrency: usize,
    /// Pin budget (`None`: the pool's share, `nbuffers / PIN_SHARE_DIVISOR`).
    pub max_pins: Option<usize>,
}

impl Default for ReadStreamOptions {
    fn default() -> Self {
        Self {
            io_method: None,
            io_combine_limit_bytes: DEFAULT_IO_COMBINE_LIMIT_BYTES,
            io_concurrency: DEFAULT_IO_CONCURRENCY,
            max_pins: None,
        }
    }
}

/// Where a stream's block numbers come from.
pub enum BlockSource<'a> {
    /// Every block of a range, ascending.
    Range(Range<BlockNumber>),
    /// Whatever the callback returns, until it returns `None`. `Send`, so a stream can be
    /// handed to another thread.
    Callback(Box<dyn FnMut() -> Option<BlockNumber> + Send + 'a>),
}

impl std::fmt::Debug for BlockSource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BlockSource::Range(r) => write!(f, "Range({r:?})"),
            BlockSource::Callback(_) => f.write_str("Callback"),
        }
    }
}

impl BlockSource<'_> {
    fn next(&mut self) -> Option<BlockNumber> {
        match self {
            BlockSource::Range(r) => r.next(),
            BlockSource::Callback(f) => f(),
        }
    }
}

/// A stream's counters, for experiments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadStreamStats {
    /// Buffers (or errors) handed to the consumer.
    pub blocks_returned: u64,
    /// Vectored reads issued.
    pub reads: u64,
    /// Blocks those reads covered.
    pub blocks_read: u64,
    /// Blocks found VALID in the pool.
    pub blocks_hit: u64,
    /// Blocks another reader was reading (or had failed to read) when the stream asked.
    pub blocks_elsewhere: u64,
    /// Buffers whose read was still in flight when the consumer reached them.
    pub io_waits: u64,
    /// Runs that could not start at their first block (their error was returned in place).
    pub failed_starts: u64,
    /// `read_sizes[n]`: reads of n pages (index 0 unused).
    pub read_sizes: Vec<u64>,
    /// Largest look-ahead distance reached.
    pub distance_max: usize,
    /// Most buffers pinned by the stream at once (never above the pin budget).
    pub pins_max: usize,
}

/// One entry of the queue.
enum Queued<'a> {
    Run(ReadRun<'a>),
    /// A block whose run could not start: its error, returned in its place.
    Failed(BufferError),
}

/// A stream of pinned buffers of one fork, read ahead of use (see the module doc).
/// `Send`: it may be created on one thread and consumed on another, one at a time.
///
/// ```
/// use std::sync::Arc;
/// use bufpool::{BufferPool, Config, ForkNumber, MemVfs, ReadStream, RelFileId};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let config = Config::builder().shared_buffers(4 << 20).build()?;
/// let pool = BufferPool::open(Arc::new(MemVfs::new()), "/db".as_ref(), &config, true)?;
/// let rel = RelFileId::new(0, 16384);
/// pool.create_relation(rel, ForkNumber::Main)?;
/// for _ in 0..100 {
///     bufpool::page::init(&mut pool.extend(rel, ForkNumber::Main)?.write(), 0);
/// }
/// pool.flush_all()?;
/// pool.drop_buffers(rel, None, 0)?; // nothing cached: every block needs a read
///
/// let n = pool.nblocks(rel, ForkNumber::Main)?;
/// let opts = config.read_stream_options();
/// let mut stream = ReadStream::range(&pool, rel, ForkNumber::Main, 0..n, None, &opts);
/// let mut seen = 0;
/// while let Some(buf) = stream.next() {
///     let buf = buf?; // pinned, verified; its block's own error otherwise
///     assert_eq!(buf.tag().block, seen);
///     seen += 1;
/// }
/// assert_eq!(seen, 100);
/// assert!(stream.stats().reads < 100, "adjacent misses were combined");
/// # Ok(())
/// # }
/// ```
pub struct ReadStream<'a> {
    pool: &'a BufferPool,
    rel: RelFileId,
    fork: ForkNumber,
    source: BlockSource<'a>,
    /// A block taken from the source that did not fit the run being built.
    unget: Option<BlockNumber>,
    /// A run not started yet: first block, length.
    pending: Option<(BlockNumber, usize)>,
    source_done: bool,
    ring: Option<&'a mut Ring>,
    method: IoMethod,
    queue: VecDeque<Queued<'a>>,
    /// Buffers pinned by queued runs plus queued errors: what the distance bounds.
    queued: usize,
    distance: usize,
    max_distance: usize,
    combine: usize,
    stats: ReadStreamStats,
}

impl std::fmt::Debug for ReadStream<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadStream")
            .field("rel", &self.rel)
            .field("fork", &self.fork)
            .field("method", &self.method)
            .field("distance", &self.distance)
            .field("max_distance", &self.max_distance)
            .field("queued", &self.queued)
            .finish_non_exhaustive()
    }
}

impl<'a> ReadStream<'a> {
    /// A stream over the blocks `source` names, reusing `ring`'s buffers when given.
    ///
    /// With a ring, keep `opts.max_pins` at or below the ring's size in buffers (what
    /// PostgreSQL's GetAccessStrategyPinLimit does): pins held ahead keep ring members from
    /// being reused, and the victims then come from the clock. `Ring` does not tell its
    /// size yet, so the caller sets it.
    pub fn new(
        pool: &'a BufferPool,
        rel: RelFileId,
        fork: ForkNumber,
        source: BlockSource<'a>,
        ring: Option<&'a mut Ring>,
        opts: &ReadStreamOptions,
    ) -> Self {
        let combine = (opts.io_combine_limit_bytes / pool.page_size()).max(1);
        let max_pins = opts
            .max_pins
            .unwrap_or(pool.nbuffers() / PIN_SHARE_DIVISOR)
            .max(1);
        let (method, ios) = match opts.io_concurrency {
            0 => (IoMethod::Sync, 1),
            n => (opts.io_method.unwrap_or(pool.io_method()), n),
        };
        let max_distance = ios.saturating_mul(combine).min(max_pins).max(1);
        ReadStream {
            pool,
            rel,
            fork,
            source,
            unget: None,
            pending: None,
            source_done: false,
            ring,
            method,
            queue: VecDeque::new(),
            queued: 0,
            distance: 1,
            max_distance,
            combine: combine.min(max_distance),
            stats: ReadStreamStats {
                read_sizes: vec![0; combine.min(max_distance) + 1],
                distance_max: 1,
                ..ReadStreamStats::default()
            },
        }
    }

    /// A stream over `blocks`, ascending.
    pub fn range(
        pool: &'a BufferPool,
        rel: RelFileId,
        fork: ForkNumber,
        blocks: Range<BlockNumber>,
        ring: Option<&'a mut Ring>,
        opts: &ReadStreamOptions,
    ) -> Self {
        Self::new(pool, rel, fork, BlockSource::Range(blocks), ring, opts)
    }

    /// The current look-ahead distance (buffers).
    pub fn distance(&self) -> usize {
        self.distance
    }

    /// The largest distance allowed (the pin budget, or fewer if the I/O concurrency and
    /// combine limit reach less far).
    pub fn max_distance(&self) -> usize {
        self.max_distance
    }

    /// Buffers the stream holds pinned right now (not counting those it returned).
    pub fn pinned(&self) -> usize {
        self.queue
            .iter()
            .map(|q| match q {
                Queued::Run(r) => r.remaining(),
                Queued::Failed(_) => 0,
            })
            .sum()
    }

    /// The method reads run with.
    pub fn io_method(&self) -> IoMethod {
        self.method
    }

    /// The counters so far.
    pub fn stats(&self) -> &ReadStreamStats {
        &self.stats
    }

    fn next_source_block(&mut self) -> Option<BlockNumber> {
        if let Some(b) = self.unget.take() {
            return Some(b);
        }
        if self.source_done {
            return None;
        }
        let b = self.source.next();
        self.source_done = b.is_none();
        b
    }

    /// Starts runs until the queue holds `distance` buffers or the source ends.
    fn look_ahead(&mut self) {
        loop {
            let room = self.distance.saturating_sub(self.queued);
            if room == 0 {
                return;
            }
            let (start, mut len) = match self.pending.take() {
                Some(p) => p,
                None => match self.next_source_block() {
                    Some(b) => (b, 1),
                    None => return,
                },
            };
            let cap = room.min(self.combine);
            let mut can_grow = false;
            while len < self.combine {
                let Some(b) = self.next_source_block() else {
                    break;
                };
                let adjacent = start.checked_add(len as u32) == Some(b);
                if !adjacent {
                    self.unget = Some(b);
                    break;
                }
                if len == cap {
                    // Adjacent, but no room yet: hold the run back while it can grow.
                    self.unget = Some(b);
                    can_grow = true;
                    break;
                }
                len += 1;
            }
            if can_grow && !self.queue.is_empty() {
                self.pending = Some((start, len));
                return;
            }
            // The pool-wide account may grant fewer (none: wait for pins to come back,
            // unless nothing is queued, when one is always granted).
            let grant = self
                .pool
                .reserve_lookahead_pins(len.min(cap), self.queue.is_empty());
            if grant == 0 {
                self.pending = Some((start, len));
                return;
            }
            let taken = self.start_run(start, grant);
            if taken < len {
                self.pending = Some((start + taken as u32, len - taken));
            }
        }
    }

    /// Starts a run of `len` blocks from `start`, `len` look-ahead pins reserved for it;
    /// returns how many blocks it consumed (a run that could not start consumes its first
    /// block, queued as its error). Pins it does not hold are given back at once.
    fn start_run(&mut self, start: BlockNumber, len: usize) -> usize {
        let ring = self.ring.as_deref_mut();
        match self
            .pool
            .start_read_run(self.rel, self.fork, start, len, ring, self.method)
        {
            Ok(run) => {
                let n = run.len();
                self.pool.release_lookahead_pins(len - n);
                let s = run.stats();
                self.stats.reads += s.reads as u64;
                self.stats.blocks_read += s.blocks_read as u64;
                self.stats.blocks_hit += s.hits as u64;
                self.stats.blocks_elsewhere += s.pending_elsewhere as u64;
                for size in run.read_sizes() {
                    if size >= self.stats.read_sizes.len() {
                        self.stats.read_sizes.resize(size + 1, 0);
                    }
                    self.stats.read_sizes[size] += 1;
                }
                if run.needed_io() {
                    self.distance = (self.distance * 2).min(self.max_distance);
                } else {
                    self.distance = self.distance.saturating_sub(s.hits).max(1);
                }
                self.stats.distance_max = self.stats.distance_max.max(self.distance);
                self.queued += n;
                self.queue.push_back(Queued::Run(run));
                self.note_pins();
                n
            }
            Err(e) => {
                self.pool.release_lookahead_pins(len);
                self.stats.failed_starts += 1;
                self.queued += 1;
                self.queue.push_back(Queued::Failed(e));
                self.note_pins();
                1
            }
        }
    }

    fn note_pins(&mut self) {
        self.stats.pins_max = self.stats.pins_max.max(self.pinned());
        debug_assert!(
            self.queued <= self.max_distance,
            "queued {} over the budget {}",
            self.queued,
            self.max_distance
        );
    }

    /// The next block's buffer, pinned and VALID, or that block's error; `None` when the
    /// source is exhausted. Starts reads ahead first, then waits for this block's read
    /// if it is still in flight.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<BufferResult<BufferRef<'a>>> {
        self.look_ahead();
        loop {
            match self.queue.front_mut()? {
                Queued::Failed(_) => {
                    let Some(Queued::Failed(e)) = self.queue.pop_front() else {
                        unreachable!("the front was an error")
                    };
                    self.queued -= 1;
                    self.stats.blocks_returned += 1;
                    return Some(Err(e));
                }
                Queued::Run(run) => {
                    let waits = run.stats().waits;
                    let Some(r) = run.next() else {
                        self.queue.pop_front();
                        continue;
                    };
                    self.stats.io_waits += (run.stats().waits - waits) as u64;
                    if run.remaining() == 0 {
                        self.queue.pop_front();
                    }
                    // The buffer (or its error) leaves the stream: so does its pin.
                    self.pool.release_lookahead_pins(1);
                    self.queued -= 1;
                    self.stats.blocks_returned += 1;
                    return Some(r);
                }
            }
        }
    }
}

impl Drop for ReadStream<'_> {
    /// Waits for the reads in flight and releases every pin (each run's drop), then gives
    /// the look-ahead pins back to the pool's account.
    fn drop(&mut self) {
        let pinned = self.pinned();
        self.queue.clear();
        self.pool.release_lookahead_pins(pinned);
    }
}

const _: () = {
    const fn send<T: Send>() {}
    send::<ReadStream<'static>>();
};

impl<'a> Iterator for ReadStream<'a> {
    type Item = BufferResult<BufferRef<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        ReadStream::next(self)
    }
}
