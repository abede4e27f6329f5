//! The buffer pool: a fixed set of page frames shared by all threads, caching the pages of
//! relation files.
//!
//! Owns: the descriptors, the page arena, the mapping table, replacement (`policy/`),
//! access tracing (`trace.rs`), I/O wait stripes, the one write path (`BufferPool::flush_locked`, which counts the WAL flushes it forces),
//! the background writer's state (`bgwriter/`; its lock rules are in its `mod.rs`), and the rings'
//! knobs and counters (`ring.rs`: access strategies, another victim source).
//!
//! Reading a page ([`BufferPool::read`]):
//! 1. Hit path, no lock: walk the mapping chain lock-free, pin the candidate, re-check its
//!    tag (a pinned buffer cannot be retagged). VALID → done: one CAS to pin, one to unpin.
//! 2. Miss: under the shared partition lock, look again (authoritative). Still absent →
//!    take a victim (`victim_for`: the operation's ring if it has one and a member is
//!    reusable, see `ring.rs`; else the free list or the replacement policy; pinned), write it
//!    out if dirty (content lock taken with try-lock, as PostgreSQL does, so a victim locked
//!    by someone waiting on us cannot deadlock), lock the old and new partitions in index
//!    order, re-check that nobody loaded the page meanwhile, lock the victim's header and
//!    retag it only if our pin is the only one and it is still clean. The retag sets
//!    IO_IN_PROGRESS, so the loader owns the read; concurrent readers of the same page pin
//!    it and wait (no duplicate reads). A failed read sets IO_ERROR and wakes them; each then
//!    retries the read itself (PostgreSQL's rule), so nothing stays "in progress".
//! 3. Page frames are written only under the exclusive content lock: the loader takes it
//!    (uncontended: nobody holds a reference to a !VALID buffer) around the read.
//!
//! Reading several consecutive pages at once (`read_run.rs`, for read streams): step 2's
//! claim for each miss, then one vectored read per run of adjacent misses, completed (and
//! each page verified) on an I/O engine's thread; the pool's `Drop` finishes every such
//! read before its page memory goes.
//!
//! Writing (`BufferPool::flush_locked`, the only write path): caller holds a pin and the
//! content lock; under the header lock set IO_IN_PROGRESS and clear JUST_DIRTIED; flush WAL
//! to the page LSN through the [`WalFlush`] hook (asking `flush_needed` first, so a flush
//! the write forced is counted per I/O context); copy the page, stamp its checksum in the
//! copy, write it; clear DIRTY unless JUST_DIRTIED was set again meanwhile. A failed write
//! leaves the buffer DIRTY with IO_ERROR set and returns the error.
//!
//! Invariants: a pinned buffer is never evicted; a tag is mapped to at most one buffer; a
//! dirty buffer is written before it is reused; no thread waits forever for a buffer: a
//! pool with every buffer pinned returns [`BufferError::AllPinned`].
//! Locks, in order: mapping partition (at most two, ascending) → buffer header (spin bit) →
//! content lock (try-lock only, when under a header or partition lock). The hit path takes
//! none of the first two. Nothing is allocated on the hit path.

mod arena;
pub mod bgwriter;
pub mod cache_view;
pub mod checkpoint;
mod descriptor;
mod error;
mod guard;
mod io_wait;
mod mapping;
mod memory;
mod optimistic;
mod options;
mod policy;
mod read_run;
pub mod replay;
mod resize;
pub mod ring;
pub(crate) mod state;
pub mod trace;

pub use arena::{HugePageUse, PageArena};
pub use bgwriter::{BgwriterErrorHook, BgwriterHandle, BgwriterStats, RoundReport};
pub use cache_view::{
    BufferCacheRow, BufferCacheSummary, EvictCounts, EvictOutcome, MarkDirtyCounts,
    MarkDirtyOutcome, PoolShape, RelationRow, UsageCountRow,
};
pub(crate) use checkpoint::MAX_COMBINE_PAGES;
pub use checkpoint::{
    CheckpointPacer, CheckpointWriteOptions, CheckpointWriteReport, Immediate, WritebackScope,
};
pub use error::{BufferError, BufferResult};
pub use guard::{BufferRef, PageReadGuard, PageWriteGuard};
pub use memory::PoolMemory;
pub use optimistic::OptimisticPage;
pub use options::{
    auto_lru_maxpages, max_shared_buffers_error, partitions_allowed, shared_buffers_error,
    BgwriterIo, BgwriterOptions, BgwriterStrategy, HugePages, PoolConfig, PoolOptions,
    BGWRITER_LRU_MAXPAGES_FLOOR, BGWRITER_LRU_MAXPAGES_POOL_DIVISOR, DEFAULT_BGWRITER_DELAY_MS,
    DEFAULT_BGWRITER_DEVICE_SHARE_THOUSANDTHS, DEFAULT_BGWRITER_FLUSH_AFTER_BYTES,
    DEFAULT_BGWRITER_LRU_MULTIPLIER_THOUSANDTHS, DEFAULT_BGWRITER_WRITERS,
    DEFAULT_MAPPING_PARTITIONS, MAX_BGWRITER_DELAY_MS, MAX_BGWRITER_FLUSH_AFTER_BYTES,
    MAX_BGWRITER_LRU_MAXPAGES, MAX_BGWRITER_LRU_MULTIPLIER_THOUSANDTHS,
    MAX_BGWRITER_LRU_PERCENT_THOUSANDTHS, MAX_BUFFERS, MAX_MAPPING_PARTITIONS,
    MIN_BGWRITER_DELAY_MS, MIN_BUFFERS,
};
pub use policy::ReplacementPolicy;
pub use read_run::{ReadRun, ReadRunStats};
pub use resize::{PoolResize, RESIZE_PIN_WAIT};
pub(crate) use ring::RING_POOL_DIVISOR;
pub use ring::{
    Ring, RingKind, RingOptions, RingStats, DEFAULT_BULKREAD_RING_BYTES,
    DEFAULT_BULKWRITE_RING_BYTES, DEFAULT_VACUUM_RING_BYTES, MAX_RING_BYTES, MIN_RING_BYTES,
};

use std::cell::Cell;
use std::path::Path;

use descriptor::BufferDesc;
use mapping::Mapping;
use state::*;

use crate::page::{self, MAX_PAGE_SIZE};
use crate::smgr::Smgr;
use crate::stats::{IoContext, IoOp, IoStatsSnapshot};
use crate::sync::Arc;
use crate::types::{BlockNumber, BufferTag, ForkNumber, Lsn, RelFileId};
use crate::vfs::AlignedBuf;
use crate::vfs::Vfs;

/// Called before a dirty page is written: the WAL must be durable up to the page's LSN
/// (ARCHITECTURE's rule 1). The WAL issue plugs in the real log; until then [`NoWal`].
pub trait WalFlush: Send + Sync {
    /// Makes the log durable up to `lsn`. The error is the log's own (the pool does not
    /// know the log's types; the errno survives in the source chain, see
    /// [`BufferError::raw_os_error`]).
    fn flush(&self, lsn: Lsn) -> Result<(), WalFlushError>;

    /// Whether writing a page with LSN `lsn` now would make [`WalFlush::flush`] wait for
    /// the log (the log is not yet durable up to `lsn`; PostgreSQL's XLogNeedsFlush). A
    /// hint read without locks: the write path still calls `flush`, so a wrong answer only
    /// miscounts or mis-sizes a ring, never breaks WAL-before-data. Rings ask it to grow
    /// or reject instead of forcing a flush; the write path counts the flushes it forced.
    /// The default, for hooks that cannot tell, is `false` (rings then never grow or
    /// reject, and no forced flush is counted).
    fn flush_needed(&self, lsn: Lsn) -> bool {
        let _ = lsn;
        false
    }

    /// Where the log ends now (everything inserted ends at or before it): no page read
    /// from storage may carry a later LSN, since a page is written only after the log is
    /// durable up to its LSN. `None` (the default, and the engine's hook during recovery):
    /// not known, not checked.
    fn end_of_log(&self) -> Option<Lsn> {
        None
    }

    /// Log positions no page may carry although they lie below [`WalFlush::end_of_log`]:
    /// from where recovery ended the log (at a bad record) to the end of the records after
    /// it that nothing vouched for; the log's next life starts past them. A page with an
    /// LSN in `from..to` (after `from`, up to `to`) was written after records the log
    /// lost. None (the default): no such range.
    fn lost_range(&self) -> Option<(Lsn, Lsn)> {
        None
    }
}

/// The error a [`WalFlush`] hook returns: the log's typed error, boxed.
pub type WalFlushError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An I/O this thread claimed (`start_io`) and has not ended: dropped, which only a panic
/// or an early error return between the claim and its end does (the normal path forgets
/// it and ends the I/O itself), it ends the I/O as failed, so its waiters wake and see IO_ERROR instead of
/// waiting forever; the page stays dirty. The file system cannot panic into that window
/// (its calls go through the panic fence, `vfs::fenced`); this covers a panic of ours.
struct IoClaim<'p> {
    pool: &'p BufferPool,
    id: u32,
    io: Io,
}

impl Drop for IoClaim<'_> {
    fn drop(&mut self) {
        let d = &self.pool.descs[self.id as usize];
        self.pool.terminate_io(d, self.io, false);
    }
}

/// A WAL hook for pools without a log: nothing to flush.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoWal;

impl WalFlush for NoWal {
    fn flush(&self, _lsn: Lsn) -> Result<(), WalFlushError> {
        Ok(())
    }
    fn flush_needed(&self, _lsn: Lsn) -> bool {
        false
    }
}

/// What one call of the write path did with a dirty page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Written {
    /// The page's WAL was not yet durable, so the write waited for a log flush (the
    /// hook's [`WalFlush::flush_needed`] said so just before the flush).
    pub wal_flush_forced: bool,
}

/// Which way an I/O moves a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Io {
    Read,
    Write,
}

/// How a page is brought into the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// Read from storage and verify.
    Read,
    /// Zero the frame (a page just added at the end of a relation).
    Zero,
}

/// What [`BufferPool::claim`] found or made for a tag; the buffer is pinned either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    /// Already mapped (perhaps not VALID yet: someone else's read, or a failed one).
    Mapped(u32),
    /// A victim retagged for it, with IO_IN_PROGRESS set by the caller's thread.
    Retagged(u32),
}

/// Tries before `drop_buffers` gives up on a buffer that stays pinned. Transient pins (a
/// sweep's probe, a lock-free lookup's verification) last nanoseconds; a pin that outlives
/// this many yields is held by a caller and is a usage error.
const DROP_PIN_RETRIES: u32 = 100_000;

thread_local! {
    /// Per-thread copy buffer for the write path (checksums are stamped into a stable copy).
    /// Taken out while in use, so a re-entrant or (under shuttle) interleaved use on the same
    /// OS thread allocates its own instead of sharing it.
    static WRITE_SCRATCH: Cell<Option<AlignedBuf>> = const { Cell::new(None) };
}

/// A trace record's ring flag.
#[inline]
fn ring_flag(ring: bool) -> u8 {
    if ring {
        trace::RING
    } else {
        0
    }
}

/// A shared buffer pool over one storage manager.
pub struct BufferPool {
    /// Shared (`Arc`) with the completions of reads run ahead of use (`read_run.rs`),
    /// which finish on I/O threads.
    descs: Arc<[BufferDesc]>,
    arena: PageArena,
    mapping: Mapping,
    repl: policy::Replacement,
    /// Access tracing (`trace.rs`): off unless a recording is under way.
    trace: trace::Tracer,
    io_wait: Arc<io_wait::IoWait>,
    smgr: Arc<Smgr>,
    wal: Arc<dyn WalFlush>,
    page_size: usize,
    bgwriter: bgwriter::Bgwriter,
    /// The checkpoint's snapshot array, allocated with the pool (`checkpoint.rs`).
    ckpt: checkpoint::CkptArray,
    /// `checkpoint_sync_method = open_datasync`: the bgwriter writes through O_DSYNC
    /// handles (the checkpointer's writes take it from their options).
    bgwriter_durable: crate::sync::AtomicBool,
    /// Ring knobs and the counters over all rings (`ring.rs`).
    rings: ring::RingShared,
    /// The I/O engines reads run ahead of use go through, built on first use; dropped
    /// (finishing every read in flight) before the page memory they write into.
    aio: read_run::ReadAhead,
    /// Held exclusively by a truncation or a drop from before it drops the buffers until
    /// the file is cut or removed; shared by a reader that reads blocks it did not reach
    /// through the relation itself (autoprewarm's reload, [`BufferPool::try_hold_sizes`]),
    /// so that such a read cannot land between the two and leave a page past the new end
    /// (PostgreSQL excludes it with the relation's lock).
    sizes: crate::sync::RwLock<()>,
    /// Held by a resize (`resize.rs`): one at a time.
    resize_lock: crate::sync::Mutex<()>,
    /// `resize_duty_cycle` in thousandths: the share of time a shrink works.
    resize_duty: u32,
    /// `optimistic_reads`: whether [`BufferPool::read_optimistic`] reads (`optimistic.rs`).
    optimistic_reads: bool,
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        // A read in flight writes into the arena: finish them all before it is unmapped.
        self.aio.shutdown();
    }
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferPool")
            .field("nbuffers", &self.descs.len())
            .field("page_size", &self.page_size)
            .field("arena", &self.arena)
            .finish_non_exhaustive()
    }
}

impl BufferPool {
    /// Opens (or creates, with `create`) the data directory `dir` and builds a pool for it.
    /// `config` is usually a `crate::config::Config`; its bad knobs are reported first.
    pub fn open(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        config: &impl PoolConfig,
        create: bool,
    ) -> BufferResult<Self> {
        let smgr = Smgr::open(vfs, dir, config.smgr_options(create)?)?;
        Self::new(Arc::new(smgr), config, Arc::new(NoWal))
    }

    /// Builds a pool over `smgr` with `wal` as the WAL hook; the pool's size is taken from
    /// `config` at the directory's page size.
    pub fn new(
        smgr: Arc<Smgr>,
        config: &impl PoolConfig,
        wal: Arc<dyn WalFlush>,
    ) -> BufferResult<Self> {
        let page_size = smgr.block_size();
        let opts = config.pool_options(page_size)?;
        let mut pool = Self::with_options(smgr, &opts, wal)?;
        pool.optimistic_reads = config.optimistic_reads();
        Ok(pool)
    }

    /// Builds a pool from validated options.
    pub fn with_options(
        smgr: Arc<Smgr>,
        opts: &PoolOptions,
        wal: Arc<dyn WalFlush>,
    ) -> BufferResult<Self> {
        let page_size = smgr.block_size();
        opts.validate(page_size)?;
        // The write path's per-thread scratch holds MAX_PAGE_SIZE bytes and checksums are
        // stamped per page: a page size the directory accepted must fit both.
        debug_assert!(
            page_size.is_power_of_two() && page_size <= MAX_PAGE_SIZE,
            "page size {page_size} is not a power of two up to {MAX_PAGE_SIZE}"
        );
        // Everything is built for the most buffers a resize may reach; the ids past
        // `shared_buffers` start retired (`resize.rs`), their frames never touched.
        let nbuffers = opts.capacity();
        let arena = PageArena::new(nbuffers, page_size, opts.huge_pages).map_err(|source| {
            BufferError::Memory {
                bytes: (nbuffers * page_size) as u64,
                source,
            }
        })?;
        let pool = Self {
            descs: (0..nbuffers as u32).map(BufferDesc::new).collect(),
            arena,
            mapping: Mapping::new(nbuffers, opts.mapping_partitions),
            repl: policy::Replacement::with_active(opts.replacement, nbuffers, opts.nbuffers),
            trace: trace::Tracer::default(),
            io_wait: Arc::new(io_wait::IoWait::new()),
            smgr,
            wal,
            page_size,
            bgwriter: bgwriter::Bgwriter::new(opts.bgwriter, nbuffers, page_size),
            ckpt: checkpoint::CkptArray::new(nbuffers),
            bgwriter_durable: crate::sync::AtomicBool::new(false),
            rings: ring::RingShared::new(opts.rings),
            aio: read_run::ReadAhead::new(opts.aio, nbuffers),
            sizes: crate::sync::RwLock::new(()),
            resize_lock: crate::sync::Mutex::new(()),
            resize_duty: opts.resize_duty_thousandths,
            optimistic_reads: false,
        };
        pool.retire_tail_at_start(opts.nbuffers);
        Ok(pool)
    }

    /// Buffers in use (`shared_buffers`, or the size of the last [`BufferPool::resize`]).
    pub fn nbuffers(&self) -> usize {
        self.repl.active()
    }
    /// The page size, in bytes.
    pub fn page_size(&self) -> usize {
        self.page_size
    }
    /// The storage manager the pool reads and writes through.
    pub fn smgr(&self) -> &Arc<Smgr> {
        &self.smgr
    }
    /// What the pool holds in memory, by part: the frames and, per buffer, the
    /// descriptor, the mapping table's share, the replacement state, the checkpoint's
    /// snapshot array and the bgwriter's structures (see [`PoolMemory`]).
    pub fn memory(&self) -> PoolMemory {
        let (free_list, policy) = self.repl.heap_bytes();
        let active = self.nbuffers();
        // Frames past the active size are address space only (`resize.rs`).
        let frames = if active == self.descs.len() {
            self.arena.mapped_bytes()
        } else {
            active * self.page_size
        };
        PoolMemory {
            buffers: active as u64,
            frames: frames as u64,
            descriptors: std::mem::size_of_val(&*self.descs) as u64,
            mapping: self.mapping.heap_bytes() as u64,
            free_list: free_list as u64,
            policy: policy as u64,
            checkpoint: self.ckpt.heap_bytes() as u64,
            bgwriter: self.bgwriter.heap_bytes() as u64,
        }
    }

    /// Which kind of pages back the pool's page memory.
    pub fn huge_pages(&self) -> HugePageUse {
        self.arena.huge_pages()
    }
    /// The I/O counters.
    pub fn stats(&self) -> IoStatsSnapshot {
        self.smgr.stats().snapshot()
    }
    /// (completed passes, next buffer) of the clock hand (under a list policy, of its
    /// step count).
    pub fn clock_position(&self) -> (u64, u64) {
        self.repl.position()
    }
    /// Starts recording every buffer request to `sink` (see `trace.rs`); one recording
    /// at a time.
    pub fn start_trace(&self, sink: trace::TraceSink) -> Result<(), trace::TraceError> {
        self.trace.start(sink, self.descs.len(), self.page_size)
    }

    /// Stops the recording and returns its totals.
    pub fn stop_trace(&self) -> Result<trace::TraceSummary, trace::TraceError> {
        self.trace.stop()
    }

    /// Buffers handed out by replacement so far (the bgwriter's demand estimate).
    pub fn allocations(&self) -> u64 {
        self.repl.allocations()
    }
    /// Makes the bgwriter write through O_DSYNC handles (an O_SYNC bgwriter:
    /// `checkpoint_sync_method = open_datasync`); backends keep buffered writes.
    pub fn set_bgwriter_durable_writes(&self, on: bool) {
        self.bgwriter_durable
            .store(on, crate::sync::Ordering::Relaxed);
    }

    /// Start of page memory; for the raw-memory baseline of `bufpool experiment pool` only.
    pub fn arena_base(&self) -> *const u8 {
        self.arena.base()
    }

    /// Page bytes of buffer `id`.
    ///
    /// # Safety
    /// The caller holds a pin and the content lock (either mode) for as long as the slice
    /// lives, and no `&mut` to the same frame exists meanwhile.
    #[inline]
    unsafe fn page_slice(&self, id: u32) -> &[u8] {
        debug_assert!(
            (id as usize) < self.descs.len(),
            "buffer {id} past the pool's {} frames",
            self.descs.len()
        );
        // SAFETY: buffer ids are below the pool's size, the arena's number of frames, so
        // frame(id) points at page_size bytes inside it; aliasing is excluded by the
        // caller's content lock per this function's contract.
        unsafe { std::slice::from_raw_parts(self.arena.frame_unchecked(id), self.page_size) }
    }

    /// Mutable page bytes of buffer `id`.
    ///
    /// # Safety
    /// The caller holds a pin and the exclusive content lock for as long as the slice lives,
    /// and creates no other reference to the frame meanwhile.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    unsafe fn page_slice_mut(&self, id: u32) -> &mut [u8] {
        debug_assert!(
            (id as usize) < self.descs.len(),
            "buffer {id} past the pool's {} frames",
            self.descs.len()
        );
        // SAFETY: in bounds as above; uniqueness from the exclusive content lock.
        unsafe { std::slice::from_raw_parts_mut(self.arena.frame_unchecked(id), self.page_size) }
    }

    /// Creates a relation fork on storage.
    pub fn create_relation(&self, rel: RelFileId, fork: ForkNumber) -> BufferResult<()> {
        Ok(self.smgr.create(rel, fork)?)
    }

    /// Number of blocks of a relation fork.
    pub fn nblocks(&self, rel: RelFileId, fork: ForkNumber) -> BufferResult<BlockNumber> {
        Ok(self.smgr.nblocks(rel, fork)?)
    }

    /// Reads a page into the pool (or finds it there) and returns it pinned.
    #[inline]
    pub fn read(&self, tag: BufferTag) -> BufferResult<BufferRef<'_>> {
        self.read_in(tag, IoContext::Normal)
    }

    /// [`BufferPool::read`], counting I/O under `context`.
    #[inline]
    pub fn read_in(&self, tag: BufferTag, context: IoContext) -> BufferResult<BufferRef<'_>> {
        self.read_via(tag, context, None)
    }

    /// Reads a page like [`BufferPool::read`], for an operation with its own `ring`
    /// (counted under the ring's I/O context); `None` is a plain read.
    pub fn read_with(
        &self,
        tag: BufferTag,
        ring: Option<&mut Ring>,
    ) -> BufferResult<BufferRef<'_>> {
        let context = ring
            .as_ref()
            .map_or(IoContext::Normal, |r| r.kind().context());
        self.read_via(tag, context, ring)
    }

    /// The read path: the lock-free hit path (a ring's pin raises usage 0 → 1 only), else
    /// `load`. `read_in` passes a constant `None`, so its inlined copy has no ring branch.
    #[inline]
    fn read_via(
        &self,
        tag: BufferTag,
        context: IoContext,
        ring: Option<&mut Ring>,
    ) -> BufferResult<BufferRef<'_>> {
        let hash = tag.hash64();
        if let Some(id) = self.mapping.lookup_optimistic(&self.descs, &tag, hash) {
            let d = &self.descs[id as usize];
            let s = if ring.is_some() {
                d.pin_ring()
            } else {
                d.pin()
            };
            if s & TAG_VALID != 0 && d.tag_is(&tag) {
                if self.trace.on() {
                    self.trace
                        .record(&tag, trace::HIT | ring_flag(ring.is_some()));
                }
                if s & VALID != 0 {
                    self.smgr.stats().count(context, IoOp::Hit, 1);
                    return Ok(BufferRef { pool: self, id });
                }
                return self.finish_load(id, tag, context, Fill::Read);
            }
            d.unpin();
        }
        self.load(tag, hash, context, Fill::Read, ring)
    }

    /// The page `tag` pinned if it is in the pool and valid now, else `None`; never reads
    /// and never waits for another thread's read. A hit is counted under `context`.
    /// (The cache trail of a synchronized scan, `seqscan_cache_trail`, walks back over such
    /// pages.)
    pub fn read_resident(&self, tag: BufferTag, context: IoContext) -> Option<BufferRef<'_>> {
        let found = self.resident(tag, context);
        if self.trace.on() {
            let hit = if found.is_some() { trace::HIT } else { 0 };
            self.trace.record(&tag, trace::PROBE | hit);
        }
        found
    }

    fn resident(&self, tag: BufferTag, context: IoContext) -> Option<BufferRef<'_>> {
        let hash = tag.hash64();
        let id = self.mapping.lookup_optimistic(&self.descs, &tag, hash)?;
        let d = &self.descs[id as usize];
        let s = d.pin();
        if s & (TAG_VALID | VALID) == (TAG_VALID | VALID) && d.tag_is(&tag) {
            self.smgr.stats().count(context, IoOp::Hit, 1);
            return Some(BufferRef { pool: self, id });
        }
        d.unpin();
        None
    }

    /// The page `tag` without reading it from storage: the buffer if it is in the pool,
    /// else a zeroed frame (PostgreSQL's RBM_ZERO). For callers about to overwrite the whole
    /// page, such as recovery restoring a full-page image over a possibly torn page.
    pub fn read_zeroed(&self, tag: BufferTag) -> BufferResult<BufferRef<'_>> {
        self.load(tag, tag.hash64(), IoContext::Normal, Fill::Zero, None)
    }

    /// Adds a zeroed page at the end of a relation fork and returns it pinned; its block
    /// number is `tag().block`.
    pub fn extend(&self, rel: RelFileId, fork: ForkNumber) -> BufferResult<BufferRef<'_>> {
        self.extend_in(rel, fork, IoContext::Normal)
    }

    /// [`BufferPool::extend`], counting I/O under `context`.
    pub fn extend_in(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        context: IoContext,
    ) -> BufferResult<BufferRef<'_>> {
        self.extend_via(rel, fork, context, None)
    }

    /// [`BufferPool::extend`] for an operation with its own `ring` (a bulk load).
    pub fn extend_with(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        ring: Option<&mut Ring>,
    ) -> BufferResult<BufferRef<'_>> {
        let context = ring
            .as_ref()
            .map_or(IoContext::Normal, |r| r.kind().context());
        self.extend_via(rel, fork, context, ring)
    }

    fn extend_via(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        context: IoContext,
        ring: Option<&mut Ring>,
    ) -> BufferResult<BufferRef<'_>> {
        let block = self.smgr.extend_zeroed(rel, fork, 1, context)?;
        let tag = BufferTag::new(rel, fork, block);
        self.load(tag, tag.hash64(), context, Fill::Zero, ring)
    }

    /// Adds `n` zeroed pages at the end of a relation fork with one storage call (one
    /// vectored write, one extension-lock hold; PostgreSQL's ExtendBufferedRelBy) and
    /// returns them pinned, in block order, counted under `ring`'s context (a bulk load).
    /// The caller holds all `n` pins at once, so `n` should stay well below the ring's
    /// size (and the pool's). `n == 0` extends nothing.
    pub fn extend_many_with(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        n: usize,
        mut ring: Option<&mut Ring>,
    ) -> BufferResult<Vec<BufferRef<'_>>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let context = ring
            .as_ref()
            .map_or(IoContext::Normal, |r| r.kind().context());
        let first = self.smgr.extend_zeroed(rel, fork, n as u32, context)?;
        // The storage manager refuses an extension past the largest block number, so the
        // block numbers below cannot wrap.
        debug_assert!(
            u64::from(first) + n as u64 <= u64::from(crate::types::MAX_BLOCK_NUMBER),
            "extension of {n} pages from block {first} passes the largest block number"
        );
        let mut out = Vec::with_capacity(n);
        for i in 0..n as BlockNumber {
            let tag = BufferTag::new(rel, fork, first + i);
            out.push(self.load(tag, tag.hash64(), context, Fill::Zero, ring.as_deref_mut())?);
        }
        Ok(out)
    }

    /// Miss path: find or load `tag`, returning it pinned.
    fn load(
        &self,
        tag: BufferTag,
        hash: u64,
        context: IoContext,
        fill: Fill,
        ring: Option<&mut Ring>,
    ) -> BufferResult<BufferRef<'_>> {
        match self.claim(tag, hash, context, ring)? {
            Claim::Mapped(id) => self.finish_load(id, tag, context, fill),
            Claim::Retagged(id) => self.do_load_io(id, tag, context, fill),
        }
    }

    /// Finds `tag` in the pool or retags a victim for it (step 2 of the module doc), and
    /// returns the buffer pinned. A retagged buffer has IO_IN_PROGRESS set by this thread,
    /// which must fill it and end the I/O (`do_load_io`, or a read run's completion).
    fn claim(
        &self,
        tag: BufferTag,
        hash: u64,
        context: IoContext,
        ring: Option<&mut Ring>,
    ) -> BufferResult<Claim> {
        let ringed = ring.is_some();
        let claim = self.claim_untraced(tag, hash, context, ring)?;
        if self.trace.on() {
            let hit = if matches!(claim, Claim::Mapped(_)) {
                trace::HIT
            } else {
                0
            };
            self.trace.record(&tag, hit | ring_flag(ringed));
        }
        Ok(claim)
    }

    fn claim_untraced(
        &self,
        tag: BufferTag,
        hash: u64,
        context: IoContext,
        mut ring: Option<&mut Ring>,
    ) -> BufferResult<Claim> {
        let partition = self.mapping.partition_of(hash);
        loop {
            {
                let _p = self.mapping.lock_shared(partition);
                if let Some(id) = self.mapping.lookup_locked(&self.descs, &tag, hash) {
                    self.pin_for(id, ring.is_some());
                    drop(_p);
                    return Ok(Claim::Mapped(id));
                }
            }
            let (victim, vstate) =
                self.victim_for(ring.as_deref_mut())
                    .map_err(|_| BufferError::AllPinned {
                        nbuffers: self.nbuffers(),
                        tag,
                    })?;
            let vd = &self.descs[victim as usize];
            if vstate & DIRTY != 0 {
                let written = crate::waits::timed(crate::waits::Wait::DataWrite, || {
                    self.write_victim(victim, context, ring.as_deref_mut())
                });
                match written {
                    Ok(true) => {}
                    Ok(false) => {
                        vd.unpin();
                        continue;
                    }
                    Err(e) => {
                        vd.unpin();
                        return Err(e);
                    }
                }
            }
            // Our pin keeps the victim's tag stable: nobody else can retag it.
            let old_valid = vstate & TAG_VALID != 0;
            let old_tag = vd.tag();
            let old_hash = old_tag.hash64();
            let old_partition = self.mapping.partition_of(old_hash);
            let (_g1, _g2) = if old_valid && old_partition != partition {
                let (lo, hi) = (partition.min(old_partition), partition.max(old_partition));
                let a = self.mapping.lock_exclusive(lo);
                let b = self.mapping.lock_exclusive(hi);
                (a, Some(b))
            } else {
                (self.mapping.lock_exclusive(partition), None)
            };
            if let Some(existing) = self.mapping.lookup_locked(&self.descs, &tag, hash) {
                // Someone loaded the page while we looked for a victim: use theirs.
                self.pin_for(existing, ring.is_some());
                drop((_g1, _g2));
                vd.unpin();
                return Ok(Claim::Mapped(existing));
            }
            let s = vd.lock_header();
            // Our pin kept the tag: only the holder of the only pin retags (see state.rs).
            debug_assert!(
                vd.tag_is(&old_tag),
                "victim {victim} was retagged from {old_tag} under our pin: {}",
                describe(s)
            );
            if refcount(s) != 1 || s & DIRTY != 0 || s & IO_IN_PROGRESS != 0 {
                // Pinned or dirtied by someone who found it under its old tag: try another.
                vd.unlock_header(s);
                drop((_g1, _g2));
                vd.unpin();
                continue;
            }
            if old_valid {
                let removed = self.mapping.remove_locked(&self.descs, victim, old_hash);
                debug_assert!(removed, "victim {victim} was not on its mapping chain");
            }
            vd.set_tag(&tag);
            self.mapping.insert_locked(&self.descs, victim, hash);
            let loaded_by = ring::RingKind::state_bits(ring.as_ref().map(|r| r.kind()));
            vd.unlock_header(
                (s & REFCOUNT_MASK)
                    | self.repl.admit_usage()
                    | loaded_by
                    | TAG_VALID
                    | IO_IN_PROGRESS,
            );
            drop((_g1, _g2));
            self.repl
                .retagged(&*self.descs, victim, old_valid.then_some(old_hash), hash);
            self.note_retagged(ring, victim, tag, s, context);
            return Ok(Claim::Retagged(victim));
        }
    }

    /// Pins buffer `id`, found under its partition lock: the ring's way (usage 0 → 1
    /// only) for a ring's load, else the normal way.
    #[inline]
    fn pin_for(&self, id: u32, ring: bool) {
        let d = &self.descs[id as usize];
        if ring {
            d.pin_ring();
        } else {
            d.pin();
        }
    }

    /// A pinned buffer mapped to `tag` that may not be VALID yet: wait for the loader, or
    /// load it ourselves if the last attempt failed.
    fn finish_load(
        &self,
        id: u32,
        tag: BufferTag,
        context: IoContext,
        fill: Fill,
    ) -> BufferResult<BufferRef<'_>> {
        let d = &self.descs[id as usize];
        if d.load_state() & VALID == 0 && self.start_io(d, Io::Read) {
            return self.do_load_io(id, tag, context, fill);
        }
        // start_io said no read is needed: the page is VALID, and our pin keeps it and
        // its tag (a BufferRef is handed out only for a VALID buffer).
        debug_assert!(
            d.load_state() & VALID != 0 && d.tag_is(&tag),
            "handing out buffer {id} for {tag} that is not VALID or holds another page: {d:?}"
        );
        self.smgr.stats().count(context, IoOp::Hit, 1);
        Ok(BufferRef { pool: self, id })
    }

    /// Claims the I/O of a pinned buffer (PostgreSQL's StartBufferIO). Waits while another
    /// thread's I/O on it is in progress. Returns false if no I/O is needed any more: the
    /// page is VALID (read), or no longer DIRTY (write). A claimed write clears JUST_DIRTIED,
    /// so a change made during the write keeps the buffer dirty.
    fn start_io(&self, d: &BufferDesc, io: Io) -> bool {
        loop {
            let s = d.lock_header();
            let needed = match io {
                Io::Read => s & VALID == 0,
                Io::Write => s & (DIRTY | VALID) == (DIRTY | VALID),
            };
            if !needed {
                d.unlock_header(s);
                return false;
            }
            if s & IO_IN_PROGRESS != 0 {
                d.unlock_header(s);
                crate::waits::timed(crate::waits::Wait::BufferIo, || self.io_wait.wait(d));
                continue;
            }
            let claimed = match io {
                Io::Read => s | IO_IN_PROGRESS,
                Io::Write => (s | IO_IN_PROGRESS) & !JUST_DIRTIED,
            };
            // The claimer holds a pin, so the buffer cannot be retagged under its I/O.
            debug_assert!(
                refcount(claimed) >= 1,
                "I/O on an unpinned buffer: {}",
                describe(s)
            );
            debug_assert!(claimed & TAG_VALID != 0, "I/O on an untagged buffer");
            d.unlock_header(claimed);
            return true;
        }
    }

    /// Ends the I/O this thread claimed (PostgreSQL's TerminateBufferIO) and wakes its
    /// waiters. Success: a read sets VALID; a write clears DIRTY unless JUST_DIRTIED was set
    /// again meanwhile. Failure: IO_ERROR, and a written page stays DIRTY.
    fn terminate_io(&self, d: &BufferDesc, io: Io, ok: bool) {
        let s = d.lock_header();
        debug_assert!(
            s & IO_IN_PROGRESS != 0,
            "terminate_io without I/O: {}",
            describe(s)
        );
        // The I/O's owner holds a pin until the I/O ends, so the buffer cannot have been
        // retagged under it.
        debug_assert!(
            refcount(s) >= 1,
            "ending {io:?} I/O on unpinned buffer {}: {}",
            d.id,
            describe(s)
        );
        let mut new = s & !IO_IN_PROGRESS;
        if !ok {
            new |= IO_ERROR;
        } else {
            new &= !IO_ERROR;
            match io {
                Io::Read => new |= VALID,
                Io::Write if s & JUST_DIRTIED == 0 => {
                    new &= !(DIRTY | CHECKPOINT_NEEDED);
                    // Under the header lock, so a marker's later CAS (and its bit) follows.
                    self.bgwriter.note_clean(d.id);
                }
                Io::Write => {}
            }
        }
        debug_assert!(
            !(ok && io == Io::Write && s & JUST_DIRTIED == 0) || new & DIRTY == 0,
            "a written, unchanged page stays dirty: {}",
            describe(new)
        );
        debug_assert!(new & DIRTY == 0 || new & VALID != 0, "dirty but not valid");
        d.unlock_header(new);
        self.io_wait.wake(d);
    }

    /// Performs the read (or zero fill) of a buffer whose IO_IN_PROGRESS this thread set.
    fn do_load_io(
        &self,
        id: u32,
        tag: BufferTag,
        context: IoContext,
        fill: Fill,
    ) -> BufferResult<BufferRef<'_>> {
        let d = &self.descs[id as usize];
        debug_assert!(
            {
                let s = d.load_state();
                s & IO_IN_PROGRESS != 0 && s & VALID == 0 && refcount(s) >= 1 && d.tag_is(&tag)
            },
            "loading {tag} into buffer {id} without owning its read: {d:?}"
        );
        // Uncontended: no BufferRef to a !VALID buffer exists, so nobody holds this lock.
        d.content_lock.lock_exclusive();
        // SAFETY: pinned by us, content lock held exclusively (just taken), slice dropped
        // before the lock is released below.
        let frame = unsafe { self.page_slice_mut(id) };
        let result = match fill {
            Fill::Zero => {
                frame.fill(0);
                Ok(())
            }
            Fill::Read => crate::waits::timed(crate::waits::Wait::DataRead, || {
                self.smgr.read(&tag, frame, context)
            })
            .map_err(BufferError::from)
            .and_then(|()| verify_read(&self.smgr, frame, &tag, &*self.wal)),
        };
        // SAFETY: taken above; `frame` is not used after this point.
        unsafe { d.content_lock.unlock_exclusive() };
        self.terminate_io(d, Io::Read, result.is_ok());
        match result {
            Ok(()) => Ok(BufferRef { pool: self, id }),
            Err(e) => {
                d.unpin();
                Err(e)
            }
        }
    }

    /// The one write path. The caller holds a pin and the content lock (shared or
    /// exclusive) of buffer `id`. Writes the page if it is dirty; returns whether it wrote.
    pub(crate) fn flush_locked(&self, id: u32, context: IoContext) -> BufferResult<bool> {
        self.write_locked(id, context).map(|w| w.is_some())
    }

    /// [`BufferPool::flush_locked`], telling whether the write had to flush the WAL
    /// (`None`: the page was clean, nothing written). Every forced WAL flush is counted
    /// under `context` ([`BufferPool::wal_flushes_forced`]).
    pub(crate) fn write_locked(
        &self,
        id: u32,
        context: IoContext,
    ) -> BufferResult<Option<Written>> {
        self.write_locked_then(id, context, || {})
    }

    /// [`BufferPool::write_locked`], calling `after_copy` exactly once: as soon as the page
    /// image to write is copied out of the frame (or when there is nothing to write). A
    /// caller may release the content lock there, so that the WAL flush and the device
    /// write do not hold off the page's next modifier: the copy is what is written (its
    /// LSN is what the WAL is flushed to), and a modification after it sets JUST_DIRTIED,
    /// so the page stays dirty after this write (`terminate_io`). The pin stays for the
    /// whole write, so the buffer cannot be retagged under it.
    pub(crate) fn write_locked_then(
        &self,
        id: u32,
        context: IoContext,
        after_copy: impl FnOnce(),
    ) -> BufferResult<Option<Written>> {
        let d = &self.descs[id as usize];
        debug_assert!(refcount(d.load_state()) >= 1, "flush_locked without a pin");
        if !self.start_io(d, Io::Write) {
            after_copy();
            return Ok(None);
        }
        let claim = IoClaim {
            pool: self,
            id,
            io: Io::Write,
        };
        let mut forced = false;
        let tag = d.tag();
        let mut scratch = WRITE_SCRATCH
            .take()
            .unwrap_or_else(|| AlignedBuf::zeroed(MAX_PAGE_SIZE));
        let result = (|| {
            let copy = &mut scratch.as_mut_slice()[..self.page_size];
            forced = self.copy_for_write(id, copy, after_copy)?;
            let durable = self.bgwriter_durable.load(crate::sync::Ordering::Relaxed)
                && crate::stats::thread_writer() == crate::stats::IoWriter::Bgwriter;
            if durable {
                self.smgr.write_durable(&tag, copy, context)
            } else {
                self.smgr.write(&tag, copy, context)
            }
            .map_err(BufferError::from)
        })();
        WRITE_SCRATCH.set(Some(scratch));
        // The pin held for the whole write kept the page the write was for.
        debug_assert!(
            d.tag_is(&tag),
            "buffer {id} was retagged during its write of {tag}: {d:?}"
        );
        std::mem::forget(claim);
        self.terminate_io(d, Io::Write, result.is_ok());
        if forced {
            self.rings.count_forced_wal_flush(context);
        }
        result.map(|()| {
            Some(Written {
                wal_flush_forced: forced,
            })
        })
    }

    /// The part of every page write before the device write, for a buffer whose write
    /// I/O the caller has claimed (`start_io`) while holding its pin and content lock:
    /// copies the page into `copy`, calls `after_copy` (where the caller may release the
    /// content lock), makes the log durable to the copy's LSN (ARCHITECTURE's rule 1: WAL before
    /// data) and checksums the copy. Returns whether the WAL flush was forced by this page.
    /// On error the page must not be written; the caller ends the I/O as failed.
    pub(super) fn copy_for_write(
        &self,
        id: u32,
        copy: &mut [u8],
        after_copy: impl FnOnce(),
    ) -> BufferResult<bool> {
        let d = &self.descs[id as usize];
        let tag = d.tag();
        debug_assert_eq!(
            copy.len(),
            self.page_size,
            "write copy of {tag} is not one page"
        );
        // The caller claimed the write (start_io), which it does only for a DIRTY, VALID
        // page it pins: never write a frame whose read has not completed.
        debug_assert!(
            {
                let s = d.load_state();
                s & (IO_IN_PROGRESS | VALID) == (IO_IN_PROGRESS | VALID) && refcount(s) >= 1
            },
            "writing buffer {id} ({tag}) without a claimed write of a valid page: {d:?}"
        );
        // SAFETY: the caller holds the pin and the content lock, so the frame is not being
        // changed; the shared slice lives only for this copy.
        copy.copy_from_slice(unsafe { self.page_slice(id) });
        after_copy();
        let lsn = page::lsn(copy);
        let needed = self.wal.flush_needed(lsn);
        self.wal
            .flush(lsn)
            .map_err(|source| BufferError::WalFlush { tag, lsn, source })?;
        page::set_checksum(copy, &tag);
        Ok(needed)
    }

    /// Pins buffer `id` if it still holds a page accepted by `want` (checked under the
    /// header lock). Used by scans over all buffers; does not add usage credit.
    fn pin_if(&self, id: u32, want: impl Fn(&BufferTag, u64) -> bool) -> Option<BufferRef<'_>> {
        // `then`, not `then_some`: a BufferRef built eagerly would unpin when dropped.
        self.pin_if_raw(id, want)
            .then(|| BufferRef { pool: self, id })
    }

    /// [`BufferPool::pin_if`] for callers that release the pin themselves (`unpin`).
    fn pin_if_raw(&self, id: u32, want: impl Fn(&BufferTag, u64) -> bool) -> bool {
        let d = &self.descs[id as usize];
        let hint = d.load_state();
        if hint & TAG_VALID == 0 || !want(&d.tag(), hint) {
            return false;
        }
        let s = d.lock_header();
        if s & TAG_VALID == 0 || !want(&d.tag(), s) {
            d.unlock_header(s);
            return false;
        }
        d.unlock_header(s + REFCOUNT_ONE);
        true
    }

    /// Unmaps buffer `id`, which holds `tag` under the caller's pin, if that pin is the
    /// only one and the page is clean: off its chain and the policy's lists, its state
    /// word set to `after` (which drops or keeps the caller's pin). False, with nothing
    /// changed, if someone else pinned or dirtied it meanwhile.
    fn unmap_only_pin(&self, id: u32, tag: &BufferTag, after: u64) -> bool {
        let d = &self.descs[id as usize];
        let hash = tag.hash64();
        let _part = self.mapping.lock_exclusive(self.mapping.partition_of(hash));
        let s = d.lock_header();
        debug_assert!(d.tag_is(tag), "buffer {id} was retagged under our pin");
        if refcount(s) != 1 || s & (DIRTY | IO_IN_PROGRESS) != 0 {
            d.unlock_header(s);
            return false;
        }
        let removed = self.mapping.remove_locked(&self.descs, id, hash);
        debug_assert!(removed, "buffer {id} ({tag}) was not on its mapping chain");
        // Off the policy's lists while the header lock keeps its hand away (as in
        // `drop_buffers`).
        self.repl.forget(&*self.descs, id);
        d.unlock_header(after);
        true
    }

    fn flush_matching(&self, want: impl Fn(&BufferTag) -> bool + Copy) -> BufferResult<usize> {
        let mut written = 0;
        for id in 0..self.descs.len() as u32 {
            let dirty_valid =
                |t: &BufferTag, s: u64| s & (DIRTY | VALID) == (DIRTY | VALID) && want(t);
            if let Some(b) = self.pin_if(id, dirty_valid) {
                let _g = b.read();
                if self.flush_locked(id, IoContext::Normal)? {
                    written += 1;
                }
            }
        }
        Ok(written)
    }

    /// Writes every dirty page of a relation (all forks). Returns the pages written.
    pub fn flush_relation(&self, rel: RelFileId) -> BufferResult<usize> {
        self.flush_matching(|t| t.rel == rel)
    }

    /// Writes every dirty page. Returns the pages written. Holds no lock across buffers.
    /// With the `verify` feature, checks [`BufferPool::check_consistency`] afterwards and
    /// panics on a violation.
    pub fn flush_all(&self) -> BufferResult<usize> {
        let n = self.flush_matching(|_| true)?;
        #[cfg(feature = "verify")]
        if let Err(problems) = self.check_consistency() {
            panic!("verify: the pool after flush_all: {problems}");
        }
        Ok(n)
    }

    /// fsyncs every segment written since its last fsync.
    pub fn sync(&self) -> BufferResult<usize> {
        Ok(self.smgr.sync()?)
    }

    /// Discards the buffers of `rel` (one fork or all) from block `from` on, dirty or not,
    /// and returns them to the free list: for dropping or truncating a relation. Fails if
    /// one of them stays pinned.
    pub fn drop_buffers(
        &self,
        rel: RelFileId,
        fork: Option<ForkNumber>,
        from: BlockNumber,
    ) -> BufferResult<usize> {
        let want =
            |t: &BufferTag| t.rel == rel && fork.is_none_or(|f| f == t.fork) && t.block >= from;
        let mut dropped = 0;
        for id in 0..self.descs.len() as u32 {
            let d = &self.descs[id as usize];
            let mut tries = 0;
            loop {
                let tag = d.tag();
                if d.load_state() & TAG_VALID == 0 || !want(&tag) {
                    break;
                }
                let hash = tag.hash64();
                let _p = self.mapping.lock_exclusive(self.mapping.partition_of(hash));
                let s = d.lock_header();
                if s & TAG_VALID == 0 || !d.tag_is(&tag) {
                    d.unlock_header(s);
                    continue;
                }
                if refcount(s) > 0 || s & IO_IN_PROGRESS != 0 {
                    d.unlock_header(s);
                    drop(_p);
                    tries += 1;
                    if tries > DROP_PIN_RETRIES {
                        return Err(BufferError::Pinned {
                            tag,
                            state: describe(s),
                        });
                    }
                    crate::sync::yield_now();
                    continue;
                }
                let removed = self.mapping.remove_locked(&self.descs, id, hash);
                debug_assert!(removed, "buffer {id} ({tag}) was not on its mapping chain");
                // Off the policy's lists while the header lock keeps its hand away: once
                // unlocked, a victim search may take the buffer and retag it, and a later
                // `forget` would drop that page from the lists.
                self.repl.forget(&*self.descs, id);
                d.unlock_header(0);
                drop(_p);
                self.repl.push_free(id);
                dropped += 1;
                break;
            }
        }
        Ok(dropped)
    }

    /// Drops a relation: discards its buffers and unlinks all its forks. Not logged: a
    /// relation with records since the last checkpoint comes back in recovery, so
    /// callers with a log use `Engine::drop_relation`, which logs the drop first.
    pub fn drop_relation(&self, rel: RelFileId) -> BufferResult<()> {
        self.drop_relation_with(rel, &mut || {})
    }

    /// [`BufferPool::drop_relation`], calling `between` after the buffers are dropped
    /// and before the files are removed (a test's pause point).
    #[doc(hidden)]
    pub fn drop_relation_with(
        &self,
        rel: RelFileId,
        between: &mut dyn FnMut(),
    ) -> BufferResult<()> {
        let _sizes = self.sizes.write();
        self.drop_buffers(rel, None, 0)?;
        between();
        for fork in ForkNumber::ALL {
            if self.smgr.exists(rel, fork)? {
                self.smgr.unlink(rel, fork)?;
            }
        }
        Ok(())
    }

    /// Cuts a fork to `nblocks`, discarding buffers past the new end.
    pub fn truncate_relation(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        nblocks: BlockNumber,
    ) -> BufferResult<()> {
        self.truncate_relation_with(rel, fork, nblocks, &mut || {})
    }

    /// [`BufferPool::truncate_relation`], calling `between` after the buffers past the
    /// new end are dropped and before the file is cut (VACUUM's hook point).
    #[doc(hidden)]
    pub fn truncate_relation_with(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        nblocks: BlockNumber,
        between: &mut dyn FnMut(),
    ) -> BufferResult<()> {
        let _sizes = self.sizes.write();
        self.drop_buffers(rel, Some(fork), nblocks)?;
        between();
        Ok(self.smgr.truncate(rel, fork, nblocks)?)
    }

    /// For a reader of blocks it did not reach through the relation itself (a saved
    /// block list): while the guard lives no truncation or drop runs, so a block below
    /// the size it reads now stays there until it has read it. `None` while one runs (the
    /// reader skips those blocks rather than wait). Never taken on the read path.
    pub fn try_hold_sizes(&self) -> Option<crate::sync::RwLockReadGuard<'_, ()>> {
        self.sizes.try_read()
    }

    /// Whether the free list holds a buffer (PostgreSQL's have_free_buffer): a reader that
    /// must not evict anyone's page (autoprewarm's reload) stops when it is false.
    pub fn has_free_buffer(&self) -> bool {
        self.repl.has_free()
    }

    /// How many buffers are in each state (a snapshot; not atomic across buffers).
    pub fn usage_summary(&self) -> UsageSummary {
        let mut u = UsageSummary::default();
        for d in self.descs.iter() {
            let s = d.load_state();
            if s & RETIRED != 0 {
                continue;
            }
            if s & VALID != 0 {
                u.valid += 1;
            }
            if s & DIRTY != 0 {
                u.dirty += 1;
            }
            if refcount(s) > 0 {
                u.pinned += 1;
                u.pins += refcount(s);
            }
        }
        u
    }

    /// Checks what must hold of every buffer even while other threads use the pool: a
    /// buffer with a valid tag is the one the mapping finds for that tag; a dirty buffer
    /// holds a valid page; usage counts are in range. Takes each tag's partition lock
    /// shared, then the buffer's header lock (the documented order), one buffer at a time.
    /// Returns a description of every violation.
    pub fn check_consistency(&self) -> Result<(), crate::invariants::Violations> {
        let mut problems = Vec::new();
        for d in self.descs.iter() {
            let tag = d.tag();
            let hash = tag.hash64();
            let _part = self.mapping.lock_shared(self.mapping.partition_of(hash));
            let s = d.lock_header();
            let same_tag = d.tag_is(&tag);
            d.unlock_header(s);
            if s & DIRTY != 0 && s & VALID == 0 {
                problems.push(format!("buffer {} is dirty but not valid", d.id));
            }
            if usage(s) > USAGE_COUNT_MAX {
                problems.push(format!("buffer {} has usage count {}", d.id, usage(s)));
            }
            // Under the partition lock a tagged buffer cannot be retagged or unmapped.
            if s & TAG_VALID != 0 && same_tag {
                match self.mapping.lookup_locked(&self.descs, &tag, hash) {
                    Some(id) if id == d.id => {}
                    other => problems.push(format!(
                        "buffer {} holds {tag} but the mapping finds {other:?}",
                        d.id
                    )),
                }
            }
        }
        crate::invariants::Violations(problems).into_result()
    }

    /// Checks the pool's invariants; meant for tests and debugging, with no thread using
    /// the pool (it does not lock). Returns a description of every violation.
    pub fn check_invariants(&self) -> Result<(), crate::invariants::Violations> {
        let mut problems = Vec::new();
        let mut seen_tags = std::collections::HashMap::new();
        let mut on_chain = vec![false; self.descs.len()];
        for (bucket, id) in self.mapping.entries(&self.descs) {
            let d = &self.descs[id as usize];
            let s = d.load_state();
            let tag = d.tag();
            if on_chain[id as usize] {
                problems.push(format!("buffer {id} is on two mapping chains"));
            }
            on_chain[id as usize] = true;
            if s & TAG_VALID == 0 {
                problems.push(format!(
                    "buffer {id} is mapped without TAG_VALID ({})",
                    describe(s)
                ));
            }
            if self.mapping.bucket_of(tag.hash64()) != bucket {
                problems.push(format!("buffer {id} ({tag}) is on the wrong chain"));
            }
            if let Some(other) = seen_tags.insert(tag, id) {
                problems.push(format!("{tag} is mapped to buffers {other} and {id}"));
            }
        }
        let active = self.nbuffers();
        for d in self.descs.iter() {
            let s = d.load_state();
            let past_end = d.id as usize >= active;
            if past_end || s & RETIRED != 0 {
                // A retired buffer (`resize.rs`): the pool's one pin, nothing else.
                if !past_end || s & RETIRED == 0 {
                    problems.push(format!(
                        "buffer {} of {active} in use: {}",
                        d.id,
                        describe(s)
                    ));
                } else if refcount(s) != 1
                    || s & (LOCKED | DIRTY | VALID | TAG_VALID | IO_IN_PROGRESS) != 0
                {
                    problems.push(format!("retired buffer {} holds {}", d.id, describe(s)));
                }
                continue;
            }
            if s & TAG_VALID != 0 && !on_chain[d.id as usize] {
                problems.push(format!("buffer {} has TAG_VALID but is not mapped", d.id));
            }
            if s & (LOCKED | IO_IN_PROGRESS) != 0 || refcount(s) != 0 {
                problems.push(format!("buffer {} is not idle: {}", d.id, describe(s)));
            }
            if s & DIRTY != 0 && s & VALID == 0 {
                problems.push(format!("buffer {} is dirty but not valid", d.id));
            }
            if usage(s) > USAGE_COUNT_MAX {
                problems.push(format!("buffer {} has usage count {}", d.id, usage(s)));
            }
        }
        if let Err(e) = self.repl.check_invariants(&*self.descs) {
            problems.push(format!("{:?} replacement: {e}", self.repl.kind()));
        }
        crate::invariants::Violations(problems).into_result()
    }
}

/// Counts of buffers by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageSummary {
    /// Buffers whose page is valid (loaded).
    pub valid: usize,
    /// Buffers whose page is dirty.
    pub dirty: usize,
    /// Buffers with at least one pin.
    pub pinned: usize,
    /// Pins held, summed over all buffers.
    pub pins: u64,
}

/// Checks a page just read from storage for `tag`: its checksum and identity
/// (`page::verify`); a failure names the segment file it came from.
pub(super) fn verify_read(
    smgr: &Smgr,
    frame: &[u8],
    tag: &BufferTag,
    wal: &dyn WalFlush,
) -> BufferResult<()> {
    debug_assert_eq!(
        frame.len(),
        smgr.block_size(),
        "verifying {tag} from a frame that is not one page"
    );
    let corrupt = |problem| BufferError::Corrupt {
        tag: *tag,
        path: smgr.segment_path(tag.rel, tag.fork, tag.block / smgr.segment_blocks()),
        problem,
    };
    page::verify(frame, tag).map_err(corrupt)?;
    // Asked after the read returned: a page written before it was written after the log
    // was durable up to its LSN, so below the end asked for now.
    let lsn = page::lsn(frame);
    let end = match (wal.end_of_log(), wal.lost_range()) {
        (_, Some((from, to))) if lsn > from && lsn <= to => Some(from),
        (Some(end), _) if lsn > end => Some(end),
        _ => None,
    };
    match end {
        Some(end) => Err(corrupt(page::PageProblem::LsnPastEndOfLog {
            lsn: lsn.0,
            end: end.0,
        })),
        None => Ok(()),
    }
}
