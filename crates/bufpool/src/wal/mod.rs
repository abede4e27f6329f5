//! The write-ahead log: records, LSNs, parallel insertion, group commit.
//!
//! Owns: the in-memory ring of log bytes (`wal_buffers`), the insert position, the write and
//! flush positions, the insertion slots, the flush queue, the segment files (`segment.rs`)
//! and the control file (`control.rs`). It knows nothing of pages or pools: `crate::engine`
//! logs pages, runs checkpoints and recovery, runs the WAL writer that calls
//! [`Wal::prepare_ahead`], and plugs [`Wal::flush`] into the buffer pool's write path.
//!
//! Insertion (many threads at once, PostgreSQL's WAL insertion locks): a thread seals its
//! record first (the body's CRC, `record.rs`), then takes one of `INSERT_SLOTS` slot locks
//! (by thread), publishes its candidate start in the slot and reserves `align8(len)` bytes
//! with one CAS on `pos`, stamps the position fields (a 20-byte CRC fold), copies the
//! record into the ring holding only its slot, and clears the slot. A writer that wants
//! bytes up to X waits until no slot holds a start below X. The redo point changes only
//! while a checkpoint holds every slot lock, so an inserter's full-page-image decision
//! cannot go stale. `pos` sits alone on its cache line: it is the one word every inserter
//! writes; `written`/`flushed` (written by the flush leader, read by inserters and
//! committers) and the counters each have their own.
//!
//! Flush and group commit (`flush(lsn)`): return at once if the log is durable to `lsn`.
//! Otherwise, in the flush queue: if nobody holds the *write role*, take it and lead;
//! else register `(lsn, own condition variable)` and sleep. The leader takes everything
//! inserted so far (optionally after `commit_delay`), pads it, writes it, then takes a
//! *place in the sync pipeline* (`wal_syncs_in_flight` places, default 1; it waits while
//! all are taken), writes what was inserted while it waited (a *top-up*, so its sync
//! covers those commits too) and only then gives up the write role, so a new leader can
//! write the next batch while this one syncs. With one place, syncs run one after another
//! (a leader's sync starts when the previous one ends). With two, the next leader's
//! fdatasync starts while the previous one still runs (on Linux it also waits for the
//! earlier pages' writeback, and the device sees the second flush queued behind the
//! first instead of after a wake-up and a write). On this machine's disk that made
//! commits slower (`bufpool experiment wal`: `sync_overlap_gain_16` 0.85, smaller groups,
//! longer syncs), hence the default; `scripts/raw-fsync-overlap.py` measures a device's
//! answer. A sync's return says nothing of an earlier batch in another
//! segment, so each leader *publishes* (`flushed = its end`) only once the batch before
//! its own is published: `flushed` only grows, in write order, and a failed earlier sync
//! (latched) means no later batch is ever published. Two unsynced writes back to back
//! are therefore common; a power cut that loses the first one's last sectors and keeps
//! the second is read as the end of the log, thanks to pad markers (see `record.rs`).
//! Handing over the write role wakes one waiter whose LSN is past this batch, to lead the
//! next; after publishing, the leader wakes exactly the waiters at or below its end, and
//! (if the write role is free and waiters remain) one more to lead. A woken waiter whose
//! LSN is durable returns without touching the queue lock. Why no wakeup is lost: see
//! [`Wal::flush`].
//!
//! Segments: the flush leader writes only into segments prepared ahead of it (zero-filled
//! or recycled, file and name durable): [`Wal::prepare_ahead`] makes the current segment
//! and the next `prepare_segments`, called at open, after each checkpoint's release of old
//! segments, and by the engine's WAL writer, which the leader wakes whenever it
//! starts writing into a new segment. If the WAL writer fell behind, the leader makes the
//! segment itself and counts it (`WalStats::segments_created_inline`; waiting for a
//! creation in progress counts as `segment_waits_inline`).
//!
//! The last partial block: a flush pads the log with zeros to the next 4 KiB boundary and
//! the next record starts there, so a 4 KiB block that holds fsynced (acknowledged) bytes
//! is never written again. The torn-write argument: rewriting the partial block in place
//! (PostgreSQL does: it rewrites the last page and relies on each record's CRC) means a
//! crash during the rewrite can leave that block torn. If the device tears at 512-byte
//! sectors but writes each sector atomically, the acknowledged prefix of the block is
//! rewritten with the same bytes and survives. If a sector caught mid-write can come back
//! as garbage (our power-loss simulator, `vfs/sim.rs`, models this; so do drives without
//! power-loss protection), the acknowledged records in that sector are destroyed, and
//! recovery then sees corruption before records it was told were durable. Padding makes
//! that impossible on any device, at the cost of at most 4 KiB of log per flush (and more
//! frequent segment switches, which is why segments are prepared ahead). We keep padding
//! and offer no rewrite-in-place mode: it would be safe only on devices with atomic sector
//! writes, which we cannot detect. The padding starts with a pad marker (a zero length and
//! a CRC of its position and incarnation, `record::pad_marker`): to the reader, a marker
//! means "padding: skip to the next 4 KiB", and bare zeros mid-block mean log that never
//! reached the disk (a lost sector: stop there, see `engine/recovery.rs`).
//!
//! Failure: a failed write or fsync of the log is latched (PostgreSQL PANICs): every later
//! insert and flush fails until the log is reopened, because the kernel may have dropped
//! the dirty log pages and a retry could report success for bytes that are gone. A failed
//! preparation ahead is not latched unless it failed an fsync of the directory after a
//! rename (the file's name may not be durable); the leader retries inline, where any
//! failure latches as before.
//!
//! Invariants: `flushed <= written <= inserted-and-complete <= reserved`; all of them are
//! record boundaries or 4 KiB boundaries (`flushed` and `written` always 4 KiB ones); a
//! byte of the ring is rewritten only after its previous lap was written to the segment
//! (`reserved - written <= ring - 4 KiB`); at most one thread holds the write role, and
//! only it moves `written`; `flushed` is moved only under `syncs`, by the leader whose
//! batch starts where `flushed` is, to that batch's end, after its sync; at most
//! `syncs_in_flight` leaders are between taking a place and publishing.
//! Locks, in order: slot locks (ascending when a checkpoint takes them all) → `queue` →
//! a waiter's own mutex; separately `syncs` (the pipeline's places and the in-order
//! publication; taken by the write-role holder and by leaders after their sync, never
//! while holding `queue`) → `queue`; segment locks (`segment.rs`) last. An inserter never
//! flushes while its slot is published (it gives the slot up before waiting for ring
//! space), so a leader waiting for insertions cannot deadlock with one.

pub mod control;
pub mod record;
mod segment;

pub use control::{Control, ControlError};
pub use record::{
    BlockChange, BlockRef, Record, RecordBuilder, RecordKind, FLAG_ABORT, FLAG_COMMIT,
};

use std::path::{Path, PathBuf};

use crate::sync::{Arc, AtomicBool, AtomicU64, Condvar, Mutex, Ordering};
use crate::types::Lsn;
use crate::vfs::{AlignedBuf, IoAt, IoError};
use crate::vfs::{Vfs, VfsFile};

/// Log bytes between padding points: a flush pads to this boundary (the common page and
/// sector size; the power-loss simulator tears writes at it).
pub const WAL_BLOCK: u64 = 4096;
/// Insertion slots (PostgreSQL's NUM_XLOGINSERT_LOCKS).
const INSERT_SLOTS: usize = 8;
const SLOT_IDLE: u64 = u64::MAX;

/// How the log is made durable (PostgreSQL's `wal_sync_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMethod {
    #[default]
    Fdatasync,
    Fsync,
    /// Segments opened with O_DSYNC: every write is durable when it returns.
    OpenDatasync,
}

impl SyncMethod {
    pub fn name(self) -> &'static str {
        match self {
            SyncMethod::Fdatasync => "fdatasync",
            SyncMethod::Fsync => "fsync",
            SyncMethod::OpenDatasync => "open_datasync",
        }
    }
}

/// Default of [`WalOptions::recycle_segments`]: PostgreSQL's `min_wal_size` (80 MB) over
/// its `wal_segment_size` (16 MB). The engine derives the real value from its own
/// `min_wal_size` and segment size; more kept segments trade disk space for fewer
/// zero-filled creations after a checkpoint.
pub const DEFAULT_RECYCLE_SEGMENTS: usize = 5;

/// Log settings (validated by `Config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalOptions {
    pub segment_size: u64,
    pub buffers: u64,
    pub sync_method: SyncMethod,
    /// How many segments released by checkpoints are kept to be renamed into new ones
    /// (instead of creating and zero-filling a file); the rest are unlinked. 0 keeps none.
    pub recycle_segments: usize,
    /// Segments past the current one that [`Wal::prepare_ahead`] keeps ready.
    pub prepare_segments: u64,
    /// PostgreSQL's commit_delay, in microseconds: a flush leader waits this long before
    /// taking its batch when at least `commit_siblings` other threads are flushing. 0: off.
    pub commit_delay_us: u64,
    /// PostgreSQL's commit_siblings, counted as other threads inside [`Wal::flush`].
    pub commit_siblings: u64,
    /// PostgreSQL's wal_writer_flush_after, bytes: an insert that leaves this much log
    /// unwritten (or a quarter of the ring, if less) wakes the WAL writer to write
    /// and sync it, so the ring is drained before it fills and inserters never have to.
    /// 0: only the thread's own delay (and the segment switches) wake it.
    pub writer_flush_after: u64,
    /// How many leaders may sync at once (at least 1): with 1, a leader's sync waits for
    /// the previous one to end; with more, the next leader syncs its batch while the
    /// previous sync is still running. Either way `flushed` moves in write order.
    pub syncs_in_flight: usize,
}

/// Default of [`WalOptions::prepare_segments`]: four segments ahead. PostgreSQL prepares
/// one (PreallocXlogFiles, at checkpoints, once the current one is 75% full); we prepare
/// continuously from a thread woken at each segment switch. Padding every flush to 4 KiB
/// makes small commits fill a 16 MiB segment in under half a second at 10k syncs/s, and
/// `bufpool experiment wal` on a busy disk (300 fsyncs/s) saw the thread miss with 2 ahead
/// (a zero-fill took longer than a segment lasted); 4 leave three segments of slack for
/// 64 MiB of extra disk, within the default min_wal_size (80 MB).
pub const DEFAULT_PREPARE_SEGMENTS: u64 = 4;

/// Segment files the log added (created and zero-filled), recycled (renamed from a segment
/// a checkpoint released) and removed (unlinked), since it was opened: PostgreSQL's "WAL
/// file(s) added, removed, recycled" of `log_checkpoints`; the checkpointer reports the
/// difference across a checkpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentCounts {
    pub added: u64,
    pub recycled: u64,
    pub removed: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("the log failed earlier and refuses further writes until the data directory is reopened: {0}")]
    Failed(#[source] Box<WalError>),
    #[error("record of {len} bytes does not fit wal_buffers ({ring} bytes); raise wal_buffers")]
    TooLarge { len: usize, ring: u64 },
    /// A flush asked for log past everything inserted (PostgreSQL: "xlog flush request not
    /// satisfied"): whoever asked holds an LSN the log never reached, such as a page
    /// written by a life of the log that recovery cut short.
    #[error(
        "log flush request {lsn} is not satisfied: the log was inserted only up to {inserted}"
    )]
    NotInserted { lsn: Lsn, inserted: Lsn },
    /// A change was made to shared pages but its record could not be inserted: the pages
    /// hold what the log does not, so none may be written (PostgreSQL PANICs here).
    #[error("a change to shared pages could not be logged ({0}); no dirty page will be written until the data directory is reopened")]
    Unlogged(#[source] Box<WalError>),
}

impl WalError {
    /// A copy, for the latched first failure that every later call reports.
    fn duplicate(&self) -> WalError {
        match self {
            WalError::Io(e) => WalError::Io(e.duplicate()),
            WalError::Failed(first) => WalError::Failed(Box::new(first.duplicate())),
            WalError::TooLarge { len, ring } => WalError::TooLarge {
                len: *len,
                ring: *ring,
            },
            WalError::NotInserted { lsn, inserted } => WalError::NotInserted {
                lsn: *lsn,
                inserted: *inserted,
            },
            WalError::Unlogged(why) => WalError::Unlogged(Box::new(why.duplicate())),
        }
    }

    /// The OS error number behind this error (or behind the failure it reports again).
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            WalError::Io(e) => e.raw_os_error(),
            WalError::Failed(first) | WalError::Unlogged(first) => first.raw_os_error(),
            WalError::TooLarge { .. } | WalError::NotInserted { .. } => None,
        }
    }
}

/// Counters of the log (all since open).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    pub records: u64,
    pub bytes: u64,
    /// Full-page images logged (pg_stat_wal's wal_fpi), and the bytes they took in the
    /// log (compressed, with `wal_compression = lz4`).
    pub images: u64,
    pub image_bytes: u64,
    /// Flushes that wrote and synced.
    pub syncs: u64,
    /// `flush` calls that found the log already durable (someone else's sync covered them).
    pub flush_free: u64,
    /// Flushes forced by the buffer pool writing a page whose record was not yet durable.
    pub forced_by_pages: u64,
    /// Segments the flush leader had to make itself, every committer waiting, because
    /// none was prepared ahead (the WAL writer fell behind). 0 when it keeps up.
    pub segments_created_inline: u64,
    /// Times the flush leader found its next segment not yet prepared and waited for a
    /// preparation in progress to finish it.
    pub segment_waits_inline: u64,
    /// Flush leaders that slept `commit_delay` before taking their batch.
    pub commit_delays: u64,
    /// Inserts that found the ring full and had to write (and sync) the log themselves
    /// before they could copy their record (pg_stat_wal's wal_buffers_full).
    pub buffers_full: u64,
    /// Times an insert woke the WAL writer to write the log
    /// (`writer_flush_after`).
    pub writer_kicks: u64,
    /// Flush leaders that, on getting their turn to sync, wrote the commits that had
    /// arrived while they waited for the previous sync, so their sync covered them too.
    pub top_ups: u64,
    /// Time spent in the flush leader's fsyncs (pg_stat_wal's wal_sync_time), ns.
    pub sync_ns: u64,
    /// Time from a leader's end of sync to the next leader's start of sync, summed over
    /// back-to-back syncs (the next was waiting for a place in the pipeline): the handoff
    /// gap of the sync pipeline, ns.
    pub sync_gap_ns: u64,
    /// Syncs whose gap is in `sync_gap_ns` (the next leader was already waiting).
    pub sync_gaps: u64,
    /// Syncs started while another leader held a place in the pipeline (its sync running,
    /// or its batch not yet published); only with `syncs_in_flight` above 1.
    pub overlapped_syncs: u64,
}

struct Ring {
    /// Keeps the allocation alive; all access goes through `base`.
    _mem: AlignedBuf,
    base: *mut u8,
    len: usize,
}

// SAFETY: `base` points into `_mem`, owned by the ring and freed only when it drops; ring
// bytes are written only inside the range a thread reserved (disjoint from
// every other thread's) or, for padding, by the flusher inside the range it reserved; they
// are read by the writer only below the insertion-complete point, after the inserting
// threads' slot stores (Release) were observed (Acquire). No two threads touch a byte at
// once.
unsafe impl Sync for Ring {}
// SAFETY: the ring owns its memory (like a Box); moving it between threads is fine.
unsafe impl Send for Ring {}

impl Ring {
    fn new(len: usize) -> Self {
        let mut mem = AlignedBuf::zeroed(len);
        let base = mem.as_mut_slice().as_mut_ptr();
        Ring {
            _mem: mem,
            base,
            len,
        }
    }

    fn len(&self) -> u64 {
        self.len as u64
    }

    /// Copies `src` into the ring at log position `pos` (wrapping).
    ///
    /// # Safety
    /// The caller owns `[pos, pos + src.len())`: reserved by it and not yet handed out for
    /// writing, with the previous lap of those ring bytes already written to the segment.
    unsafe fn put(&self, pos: u64, src: &[u8]) {
        let n = self.len();
        let mut done = 0;
        while done < src.len() {
            let at = ((pos + done as u64) % n) as usize;
            let k = (src.len() - done).min(n as usize - at);
            // SAFETY: per the contract the caller exclusively owns these bytes; `at + k`
            // stays within the ring's `len` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(src[done..].as_ptr(), self.base.add(at), k);
            }
            done += k;
        }
    }

    /// The longest run of log bytes from `pos` (at most `len`) that is contiguous in the
    /// ring, borrowed in place: the flush leader hands it straight to the segment write
    /// (no copy, no allocation).
    ///
    /// # Safety
    /// Every byte in `[pos, pos + len)` was completely inserted and none is rewritten
    /// while the slice lives (the caller holds the write role: inserters only rewrite ring
    /// bytes below `written`, which only the caller moves, after the write).
    unsafe fn contiguous(&self, pos: u64, len: u64) -> &[u8] {
        let at = (pos % self.len()) as usize;
        let k = (len as usize).min(self.len - at);
        // SAFETY: `at + k <= len` bytes of the live allocation; per the contract nobody
        // writes them while the returned borrow lives.
        unsafe { std::slice::from_raw_parts(self.base.add(at), k) }
    }
}

/// A value alone on its cache line: 128 bytes, because x86's adjacent-line prefetcher
/// pulls 64-byte lines in pairs, so two hot words 64 bytes apart still contend
/// (crossbeam's `CachePadded` uses 128 on x86_64 for the same reason).
#[repr(align(128))]
#[derive(Default)]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

#[repr(align(128))]
struct Slot {
    lock: Mutex<()>,
    at: AtomicU64,
    /// Records and bytes inserted through this slot, and the full-page images among them
    /// and the bytes those take (written under its lock).
    records: AtomicU64,
    bytes: AtomicU64,
    images: AtomicU64,
    image_bytes: AtomicU64,
}

/// What the flush leader writes and inserters and committers read.
#[derive(Default)]
struct Progress {
    written: AtomicU64,
    flushed: AtomicU64,
}

/// Counters off the insert path.
#[derive(Default)]
struct Counters {
    syncs: AtomicU64,
    flush_free: AtomicU64,
    forced_by_pages: AtomicU64,
    segments_created_inline: AtomicU64,
    segment_waits_inline: AtomicU64,
    commit_delays: AtomicU64,
    buffers_full: AtomicU64,
    writer_kicks: AtomicU64,
    top_ups: AtomicU64,
    sync_ns: AtomicU64,
    sync_gap_ns: AtomicU64,
    sync_gaps: AtomicU64,
    /// When the last sync ended (ns since the log's `epoch`).
    last_sync_end: AtomicU64,
    /// Leaders that took their place while another leader held one (`WalStats`).
    overlapped_syncs: AtomicU64,
    /// Threads inside `flush`'s slow path now (commit_siblings' count).
    flushers: AtomicU64,
}

/// One sleeping `flush` caller: the LSN it needs and its own wake-up, so a leader wakes
/// exactly the callers its sync covered.
struct Waiter {
    lsn: u64,
    /// Set (under this mutex) by whoever wakes the waiter.
    woken: Mutex<bool>,
    cv: Condvar,
}

impl Waiter {
    fn wake(&self) {
        *self.woken.lock() = true;
        // One thread ever waits on `cv`.
        self.cv.notify_all();
    }
}

/// The flush queue (under `Wal::queue`).
#[derive(Default)]
struct FlushQueue {
    /// Someone holds the write role (is or will be writing the next batch).
    writing: bool,
    /// Sleeping `flush` callers, in arrival order.
    waiters: Vec<Arc<Waiter>>,
}

impl FlushQueue {
    /// Wakes every waiter whose LSN is at or below `flushed`.
    fn wake_covered(&mut self, flushed: u64) {
        self.waiters.retain(|w| {
            if w.lsn <= flushed {
                w.wake();
                false
            } else {
                true
            }
        });
    }

    /// Wakes one waiter whose LSN is past `beyond` (the longest-waiting one), to lead.
    fn wake_one_beyond(&mut self, beyond: u64) {
        if let Some(i) = self.waiters.iter().position(|w| w.lsn > beyond) {
            self.waiters.remove(i).wake();
        }
    }

    fn wake_all(&mut self) {
        for w in self.waiters.drain(..) {
            w.wake();
        }
    }
}

/// Leaders between taking a sync place and publishing their batch (under `Wal::syncs`).
#[derive(Default)]
struct SyncPipe {
    in_flight: usize,
}

/// A leader's place in the sync pipeline: given back (and the waiters for a place or for
/// the in-order publication told) on drop, on every path including failures.
struct SyncPlace<'a>(&'a Wal);

impl Drop for SyncPlace<'_> {
    fn drop(&mut self) {
        self.0.syncs.lock().in_flight -= 1;
        self.0.syncs_cv.notify_all();
    }
}

/// Requests to the WAL writer (see [`Wal::wait_for_wal_writer_work`]).
#[derive(Default)]
struct WalWriterRequests {
    /// The leader entered a new segment: prepare the next ones now.
    kicked: bool,
    /// An insert left `writer_kick` bytes unwritten: write and sync the log now.
    flush: bool,
    stop: bool,
}

/// Why [`Wal::wait_for_wal_writer_work`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalWriterWake {
    /// The flush leader started a new segment.
    Kicked,
    /// Inserts left `writer_flush_after` bytes of log unwritten: write and sync it.
    Flush,
    /// The timeout passed.
    Timeout,
    /// [`Wal::stop_wal_writer`] was called: the thread should end.
    Stop,
}

/// Decrements the flusher count when a slow-path `flush` returns.
struct FlusherGuard<'a>(&'a AtomicU64);

impl Drop for FlusherGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An open write-ahead log.
pub struct Wal {
    /// Next free log position; advanced by CAS (inserters, and the flush leader's padding).
    pos: Padded<AtomicU64>,
    progress: Padded<Progress>,
    counters: Padded<Counters>,
    ring: Ring,
    slots: Box<[Slot]>,
    queue: Mutex<FlushQueue>,
    /// The sync pipeline: at most `syncs_in_flight` leaders hold a place, from the end of
    /// their write to the publication of their batch; `syncs_cv` wakes leaders waiting
    /// for a place or for the batch before theirs to be published.
    syncs: Mutex<SyncPipe>,
    syncs_cv: Condvar,
    syncs_in_flight: usize,
    wal_writer: Mutex<WalWriterRequests>,
    wal_writer_cv: Condvar,
    failed: Mutex<Option<WalError>>,
    /// Set once `failed` holds an error: the insert path checks this, not the mutex.
    has_failed: AtomicBool,
    segments: segment::Segments,
    sync_method: SyncMethod,
    prepare_segments: u64,
    commit_delay: std::time::Duration,
    commit_siblings: u64,
    /// Unwritten bytes at which an insert wakes the WAL writer (0: never).
    writer_kick: u64,
    /// The insert position past which the next such wake-up may happen (one per
    /// `writer_kick` bytes, not one per insert while the thread works).
    next_writer_kick: AtomicU64,
    redo_hint: AtomicU64,
    /// Stamped into every record (see `record.rs`).
    incarnation: u32,
    /// Zero of the sync timings.
    epoch: std::time::Instant,
    control_path: PathBuf,
    vfs: Arc<dyn Vfs>,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field(
                "written",
                &Lsn(self.progress.written.load(Ordering::Relaxed)),
            )
            .field(
                "flushed",
                &Lsn(self.progress.flushed.load(Ordering::Relaxed)),
            )
            .finish_non_exhaustive()
    }
}

thread_local! {
    static SLOT_HINT: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

static NEXT_SLOT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn my_slot() -> usize {
    SLOT_HINT.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT_SLOT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % INSERT_SLOTS);
        }
        s.get()
    })
}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

impl Wal {
    /// Opens the log of data directory `dir` for appending at `end` (where recovery found
    /// the end of valid log; rounded up to a 4 KiB boundary so no durable block is
    /// rewritten), with `redo` as the current redo point. Prepares the current segment
    /// and the next `prepare_segments` before returning.
    pub fn open(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        opts: WalOptions,
        end: Lsn,
        redo: Lsn,
        incarnation: u32,
    ) -> Result<Wal, WalError> {
        let dsync = opts.sync_method == SyncMethod::OpenDatasync;
        let segments = segment::Segments::new(
            vfs.clone(),
            dir.join("wal"),
            opts.segment_size,
            dsync,
            opts.recycle_segments,
        )?;
        let start = round_up(end.0, WAL_BLOCK);
        let ring = Ring::new(opts.buffers as usize);
        let writer_kick = match opts.writer_flush_after {
            0 => 0,
            n => n.min(ring.len() / 4).max(WAL_BLOCK),
        };
        let wal = Wal {
            pos: Padded(AtomicU64::new(start)),
            progress: Padded(Progress {
                written: AtomicU64::new(start),
                flushed: AtomicU64::new(start),
            }),
            counters: Padded::default(),
            ring,
            slots: (0..INSERT_SLOTS)
                .map(|_| Slot {
                    lock: Mutex::new(()),
                    at: AtomicU64::new(SLOT_IDLE),
                    records: AtomicU64::new(0),
                    bytes: AtomicU64::new(0),
                    images: AtomicU64::new(0),
                    image_bytes: AtomicU64::new(0),
                })
                .collect(),
            queue: Mutex::new(FlushQueue::default()),
            syncs: Mutex::new(SyncPipe::default()),
            syncs_cv: Condvar::new(),
            syncs_in_flight: opts.syncs_in_flight.max(1),
            wal_writer: Mutex::new(WalWriterRequests::default()),
            wal_writer_cv: Condvar::new(),
            failed: Mutex::new(None),
            has_failed: AtomicBool::new(false),
            segments,
            sync_method: opts.sync_method,
            prepare_segments: opts.prepare_segments,
            commit_delay: std::time::Duration::from_micros(opts.commit_delay_us),
            commit_siblings: opts.commit_siblings,
            writer_kick,
            next_writer_kick: AtomicU64::new(0),
            redo_hint: AtomicU64::new(redo.0),
            incarnation,
            epoch: std::time::Instant::now(),
            control_path: dir.join(control::CONTROL_FILE),
            vfs,
        };
        wal.prepare_now()?;
        Ok(wal)
    }

    pub fn segment_size(&self) -> u64 {
        self.segments.size
    }

    pub fn segment_path(&self, segno: u64) -> PathBuf {
        self.segments.path(segno)
    }

    pub fn segment_numbers(&self) -> Result<Vec<u64>, WalError> {
        self.segments.list()
    }

    /// Durable end of the log.
    pub fn flushed(&self) -> Lsn {
        Lsn(self.progress.flushed.load(Ordering::Acquire))
    }

    /// Next insert position (everything reserved so far ends here).
    pub fn insert_position(&self) -> Lsn {
        Lsn(self.pos.load(Ordering::Acquire))
    }

    /// The redo point of the latest checkpoint. It changes only while `begin_checkpoint`
    /// holds every slot lock, so an inserter holding its slot lock sees it stable.
    pub fn redo(&self) -> Lsn {
        Lsn(self.redo_hint.load(Ordering::Acquire))
    }

    /// The redo point and the insert position, read together while no checkpoint can
    /// move the redo point (under this thread's insertion slot lock, which
    /// [`Wal::begin_checkpoint`] must also take). The position is then at or below every
    /// later redo point, so an LSN set to it can never claim an image that a later
    /// checkpoint requires (PostgreSQL holds checkpoints off with DELAY_CHKPT_START for the
    /// same window in MarkBufferDirtyHint).
    pub fn redo_and_position(&self) -> (Lsn, Lsn) {
        let _slot = self.slots[my_slot()].lock.lock();
        (
            Lsn(self.redo_hint.load(Ordering::Acquire)),
            Lsn(self.pos.load(Ordering::Acquire)),
        )
    }

    /// The incarnation stamped into this log's records.
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    pub fn stats(&self) -> WalStats {
        let c = &self.counters;
        WalStats {
            records: self
                .slots
                .iter()
                .map(|s| s.records.load(Ordering::Relaxed))
                .sum(),
            bytes: self
                .slots
                .iter()
                .map(|s| s.bytes.load(Ordering::Relaxed))
                .sum(),
            images: self
                .slots
                .iter()
                .map(|s| s.images.load(Ordering::Relaxed))
                .sum(),
            image_bytes: self
                .slots
                .iter()
                .map(|s| s.image_bytes.load(Ordering::Relaxed))
                .sum(),
            syncs: c.syncs.load(Ordering::Relaxed),
            flush_free: c.flush_free.load(Ordering::Relaxed),
            forced_by_pages: c.forced_by_pages.load(Ordering::Relaxed),
            segments_created_inline: c.segments_created_inline.load(Ordering::Relaxed),
            segment_waits_inline: c.segment_waits_inline.load(Ordering::Relaxed),
            commit_delays: c.commit_delays.load(Ordering::Relaxed),
            buffers_full: c.buffers_full.load(Ordering::Relaxed),
            writer_kicks: c.writer_kicks.load(Ordering::Relaxed),
            top_ups: c.top_ups.load(Ordering::Relaxed),
            sync_ns: c.sync_ns.load(Ordering::Relaxed),
            sync_gap_ns: c.sync_gap_ns.load(Ordering::Relaxed),
            sync_gaps: c.sync_gaps.load(Ordering::Relaxed),
            overlapped_syncs: c.overlapped_syncs.load(Ordering::Relaxed),
        }
    }

    /// Whether the log is latched after a failure (every insert and flush fails).
    pub fn is_failed(&self) -> bool {
        self.has_failed.load(Ordering::Acquire)
    }

    fn check_failed(&self) -> Result<(), WalError> {
        if !self.has_failed.load(Ordering::Acquire) {
            return Ok(());
        }
        match &*self.failed.lock() {
            Some(first) => Err(WalError::Failed(Box::new(first.duplicate()))),
            None => Ok(()),
        }
    }

    /// Latches the log after a change to shared pages could not be logged (`why`): from
    /// now on every insert and every flush fails, so no page holding the change can be
    /// written. Returns the error to report.
    pub fn latch_unlogged(&self, why: WalError) -> WalError {
        let e = match why {
            already @ WalError::Unlogged(_) => already,
            other => WalError::Unlogged(Box::new(other)),
        };
        self.fail(e)
    }

    fn fail(&self, e: WalError) -> WalError {
        let mut f = self.failed.lock();
        if f.is_none() {
            *f = Some(e.duplicate());
        }
        self.has_failed.store(true, Ordering::Release);
        drop(f);
        // Sleeping flushers must see the failure rather than wait for a sync that will
        // never come.
        self.queue.lock().wake_all();
        e
    }

    /// Inserts a record built by `build(redo)`, where `redo` is the redo point the builder
    /// must use to decide on full-page images; rebuilt if a checkpoint moves the redo
    /// point meanwhile. Returns (start, end) of the record.
    pub fn insert_with(
        &self,
        mut build: impl FnMut(Lsn) -> RecordBuilder,
    ) -> Result<(Lsn, Lsn), WalError> {
        loop {
            let redo = self.redo_hint.load(Ordering::Acquire);
            let mut rec = build(Lsn(redo));
            if let Some(range) = self.insert_built(&mut rec, Some(redo))? {
                return Ok(range);
            }
            // A checkpoint moved the redo point: decide on page images again.
        }
    }

    /// Inserts a ready record (one that holds no page images, or whose images do not
    /// depend on the redo point).
    pub fn insert(&self, mut rec: RecordBuilder) -> Result<(Lsn, Lsn), WalError> {
        Ok(self
            .insert_built(&mut rec, None)?
            .expect("no redo point to go stale"))
    }

    /// Reserves room for `rec` and copies it into the ring, retrying (with the same record)
    /// while the ring is full. With `redo = Some(r)`, returns None if the redo point is no
    /// longer `r` (the caller rebuilds: its page-image decisions may be stale).
    fn insert_built(
        &self,
        rec: &mut RecordBuilder,
        redo: Option<u64>,
    ) -> Result<Option<(Lsn, Lsn)>, WalError> {
        self.check_failed()?;
        let margin = WAL_BLOCK;
        let alen = record::align(rec.len() as u64);
        if alen + 2 * WAL_BLOCK > self.ring.len() {
            return Err(WalError::TooLarge {
                len: rec.len(),
                ring: self.ring.len(),
            });
        }
        // The body's CRC, before any reservation: the window between reserving and
        // clearing the slot (which a flush leader may wait on) is a stamp and a copy.
        rec.seal(self.incarnation);
        loop {
            let slot = &self.slots[my_slot()];
            let _slot_guard = slot.lock.lock();
            if redo.is_some_and(|r| self.redo_hint.load(Ordering::Acquire) != r) {
                return Ok(None);
            }
            // Reserve by CAS. Ordering argument (the leader's side is `lead_flush` and
            // `wait_insertions`): the candidate start is stored in the slot (Relaxed)
            // before the CAS, which is Release; a leader loads `pos` with Acquire. If that
            // load sees this reservation (reads this CAS or any later read-modify-write of
            // `pos`, all in this CAS's release sequence), the slot store happens-before the
            // leader's scan, which therefore sees this start (or the IDLE stored after the
            // copy, or a later candidate) and waits. If it does not see the reservation,
            // the record lies beyond the leader's batch. `at` only ever under-states the
            // real start (a failed CAS leaves an older candidate until the next store),
            // which only makes a leader wait longer. No SeqCst is needed: nothing here is
            // a store-then-load on two different words by both sides.
            let mut p = self.pos.load(Ordering::Relaxed);
            let start = loop {
                if p + alen + margin
                    > self.progress.written.load(Ordering::Acquire) + self.ring.len()
                {
                    break None;
                }
                slot.at.store(p, Ordering::Relaxed);
                match self.pos.compare_exchange_weak(
                    p,
                    p + alen,
                    Ordering::Release,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break Some(p),
                    Err(now) => p = now,
                }
            };
            let Some(start) = start else {
                slot.at.store(SLOT_IDLE, Ordering::Release);
                drop(_slot_guard);
                self.counters.buffers_full.fetch_add(1, Ordering::Relaxed);
                // Ring full: write and sync what is there (rare with a ring of a segment's
                // size; a plain write would leave a partial block to rewrite), then retry
                // with the same record.
                self.flush(Lsn(p + alen + margin - self.ring.len()))?;
                continue;
            };
            debug_assert_eq!(start % 8, 0, "records start 8-byte aligned");
            debug_assert!(
                start + alen <= self.progress.written.load(Ordering::Acquire) + self.ring.len(),
                "a reservation laps unwritten ring bytes"
            );
            let flushed = Lsn(self.progress.flushed.load(Ordering::Acquire));
            let bytes = rec.stamp(Lsn(start), flushed);
            let pad = [0u8; record::ALIGN as usize];
            // SAFETY: [start, start + alen) was reserved by this thread above, and the
            // reservation check kept it at least one lap ahead of unwritten ring bytes.
            unsafe {
                self.ring.put(start, bytes);
                self.ring.put(
                    start + bytes.len() as u64,
                    &pad[..(alen as usize - bytes.len())],
                );
            }
            // Release: the copy above happens-before a leader's Acquire load that sees
            // the slot idle.
            slot.at.store(SLOT_IDLE, Ordering::Release);
            // Single writer (the slot lock holder): plain load and store.
            slot.records
                .store(slot.records.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            slot.bytes
                .store(slot.bytes.load(Ordering::Relaxed) + alen, Ordering::Relaxed);
            let (images, image_bytes) = rec.images();
            if images > 0 {
                slot.images.store(
                    slot.images.load(Ordering::Relaxed) + u64::from(images),
                    Ordering::Relaxed,
                );
                slot.image_bytes.store(
                    slot.image_bytes.load(Ordering::Relaxed) + image_bytes,
                    Ordering::Relaxed,
                );
            }
            drop(_slot_guard);
            self.maybe_kick_writer(start + alen);
            return Ok(Some((Lsn(start), Lsn(start + alen))));
        }
    }

    /// Waits until every insertion that started below `upto` has finished copying. The
    /// caller loaded `pos` (Acquire) at or past `upto` before calling (see
    /// `insert_built` for why that makes every such insertion visible in its slot).
    fn wait_insertions(&self, upto: u64) {
        for slot in self.slots.iter() {
            let mut spin = crate::sync::SpinWait::new();
            loop {
                let at = slot.at.load(Ordering::Acquire);
                if at == SLOT_IDLE || at >= upto {
                    break;
                }
                spin.spin();
            }
        }
    }

    /// Writes ring bytes `[written, upto)` to the segments, straight from the ring.
    /// Caller holds the write role. Wakes the WAL writer when the write enters a
    /// new segment, so it prepares the next ones.
    fn write_out(&self, upto: u64) -> Result<(), WalError> {
        self.wait_insertions(upto);
        let mut pos = self.progress.written.load(Ordering::Relaxed);
        debug_assert!(
            pos <= upto && upto <= self.pos.load(Ordering::Relaxed),
            "write_out: written {pos} <= upto {upto} <= reserved must hold"
        );
        let from = pos;
        while pos < upto {
            let segno = pos / self.segments.size;
            let seg_end = (segno + 1) * self.segments.size;
            // SAFETY: bytes below `upto` were completely inserted (wait_insertions), and
            // the ring cannot lap them until `written` moves past them, which only the
            // write role's holder (this thread) does, after this write.
            let chunk = unsafe { self.ring.contiguous(pos, upto.min(seg_end) - pos) };
            let n = chunk.len();
            let file = self.segment(segno)?;
            let w = file
                .write_at(chunk, pos % self.segments.size)
                .map_err(|source| {
                    self.fail(WalError::Io(IoError::at_offset(
                        "writing",
                        &self.segments.path(segno),
                        pos % self.segments.size,
                        source,
                    )))
                })?;
            if w != n {
                return Err(self.fail(WalError::Io(IoError::short(
                    "writing",
                    &self.segments.path(segno),
                    IoAt::Offset(pos % self.segments.size),
                    w,
                    n,
                ))));
            }
            pos += n as u64;
            // Release: the write above (the leader's reads of the ring) happens-before an
            // inserter's Acquire load that lets it overwrite these ring bytes.
            self.progress.written.store(pos, Ordering::Release);
        }
        // Entered a new segment (the last byte written before was in an earlier one):
        // the WAL writer prepares the next ones now.
        if upto > from
            && (upto - 1) / self.segments.size != from.max(1).saturating_sub(1) / self.segments.size
        {
            self.kick_wal_writer();
        }
        Ok(())
    }

    /// The open file of a segment the leader writes or syncs: prepared ahead normally;
    /// made here (counted) if the WAL writer fell behind. Any failure latches.
    fn segment(&self, segno: u64) -> Result<Arc<dyn VfsFile>, WalError> {
        if let Some(f) = self.segments.open_file(segno) {
            return Ok(f);
        }
        match self.segments.file(segno, segment::Make::Inline) {
            Ok(Some((f, found))) => {
                let counter = match found {
                    segment::Found::Made => Some(&self.counters.segments_created_inline),
                    segment::Found::Waited => Some(&self.counters.segment_waits_inline),
                    segment::Found::Open | segment::Found::OnDisk => None,
                };
                if let Some(c) = counter {
                    c.fetch_add(1, Ordering::Relaxed);
                }
                Ok(f)
            }
            Ok(None) => unreachable!("made on demand"),
            Err(e) => Err(self.fail(e.error)),
        }
    }

    /// Makes sure the segment of the insert position and the next `prepare_segments` exist
    /// (recycled from released ones where possible, else created zero-filled), with file
    /// and name durable, and open: PostgreSQL's PreallocXlogFiles. Called at open, after a
    /// checkpoint released segments, and by the engine's WAL writer; never by the
    /// flush leader. Returns how many segments it made.
    ///
    /// A failure is returned, and latches the log only if it failed an fsync of the
    /// directory after a rename (see `segment.rs`); otherwise the leader retries inline.
    ///
    /// A zero-fill it does is paced (`segment.rs`, `Segments::fill`) while the segment is
    /// not needed soon; at open (`prepare_now`) it is not.
    pub fn prepare_ahead(&self) -> Result<usize, WalError> {
        self.prepare(true)
    }

    /// [`Self::prepare_ahead`] without pacing: nothing else is running yet.
    fn prepare_now(&self) -> Result<usize, WalError> {
        self.prepare(false)
    }

    fn prepare(&self, paced: bool) -> Result<usize, WalError> {
        let first = self.pos.load(Ordering::Relaxed) / self.segments.size;
        let mut made = 0;
        for segno in first..=first + self.prepare_segments {
            // Needed soon: the insert position is in the segment before it (or past).
            let urgent = || self.pos.load(Ordering::Relaxed) / self.segments.size + 1 >= segno;
            match self.segments.file_paced(
                segno,
                segment::Make::Ahead,
                paced.then_some(&urgent as _),
            ) {
                Ok(Some((_, segment::Found::Made))) => made += 1,
                Ok(_) => {}
                Err(e) if e.after_rename => return Err(self.fail(e.error)),
                Err(e) => return Err(e.error),
            }
        }
        Ok(made)
    }

    /// After an insert ending at `end`: wakes the WAL writer to write the log if
    /// `writer_kick` bytes are unwritten, at most once per `writer_kick` bytes inserted.
    #[inline]
    fn maybe_kick_writer(&self, end: u64) {
        if self.writer_kick == 0 {
            return;
        }
        let next = self.next_writer_kick.load(Ordering::Relaxed);
        if end < next
            || end.saturating_sub(self.progress.written.load(Ordering::Relaxed)) < self.writer_kick
        {
            return;
        }
        if self
            .next_writer_kick
            .compare_exchange(
                next,
                end + self.writer_kick,
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            self.counters.writer_kicks.fetch_add(1, Ordering::Relaxed);
            self.wal_writer.lock().flush = true;
            self.wal_writer_cv.notify_all();
        }
    }

    /// Wakes the WAL writer to prepare segments (the leader entered a new one).
    fn kick_wal_writer(&self) {
        self.wal_writer.lock().kicked = true;
        self.wal_writer_cv.notify_all();
    }

    /// The WAL writer's wait: returns when the flush leader entered a new segment
    /// (prepare more), when `timeout` passed, or when [`Wal::stop_wal_writer`] was called.
    pub fn wait_for_wal_writer_work(&self, timeout: std::time::Duration) -> WalWriterWake {
        let mut b = self.wal_writer.lock();
        if !b.kicked && !b.flush && !b.stop {
            b = self.wal_writer_cv.wait_for(b, timeout).0;
        }
        if b.stop {
            WalWriterWake::Stop
        } else if std::mem::take(&mut b.flush) {
            // A segment kick stays set: the next wait returns at once to serve it.
            WalWriterWake::Flush
        } else if std::mem::take(&mut b.kicked) {
            WalWriterWake::Kicked
        } else {
            WalWriterWake::Timeout
        }
    }

    /// Tells the WAL writer to end (its next wait returns `Stop`).
    pub fn stop_wal_writer(&self) {
        self.wal_writer.lock().stop = true;
        self.wal_writer_cv.notify_all();
    }

    /// Makes the log durable at least up to `lsn`; shares the sync with every thread that
    /// waits meanwhile (group commit).
    ///
    /// The protocol (state under `queue`: `writing`, the waiters with their LSNs):
    /// 1. `flushed >= lsn`: return (no lock).
    /// 2. Under `queue`: if `!writing`, set it and lead (`lead_flush`); else register as a
    ///    waiter and sleep on the own condition variable until woken; then go to 1.
    /// 3. A leader, after writing its batch `[F, U)` and taking a place in the sync
    ///    pipeline, clears `writing` and wakes one waiter with LSN > U (to lead the next
    ///    batch); after its sync and once `flushed` = F (the batch before is published) it
    ///    stores `flushed = U`, then wakes every waiter with LSN <= U and, if `writing` is
    ///    clear and waiters remain, one more. A failure wakes all (and a leader whose
    ///    earlier batch failed returns the failure instead of publishing).
    ///
    /// No lost wakeup: a waiter W with LSN L registered while some leader X held the
    /// write role. If X's batch covers L, X's sync ends by waking W (or a failure wakes
    /// everyone). If not, L > U_X and X, on giving up the role, wakes some waiter whose
    /// LSN is past U_X (W qualifies, so one exists). Every leader after X took the role after W
    /// registered, hence after W's record was inserted, so its batch covers L. The woken
    /// one either leads (a leader after X), finds another thread leading (likewise), or
    /// finds its own LSN durable (a leader after X finished, and that leader's sync woke
    /// W). Waking happens under W's own mutex after W registered under `queue`, so a wake
    /// that comes before W sleeps is seen by W's check. `flushed` is stored before the
    /// leader takes `queue` to wake, and W checks it after its wake-up.
    ///
    /// A failed log refuses even a flush that has nothing to do: the pool calls this
    /// before every page write, and after a failure (or an unlogged change, see
    /// [`Wal::latch_unlogged`]) no page may be written.
    pub fn flush(&self, lsn: Lsn) -> Result<(), WalError> {
        self.check_failed()?;
        if self.progress.flushed.load(Ordering::Acquire) >= lsn.0 {
            self.counters.flush_free.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        crate::waits::timed(crate::waits::Wait::WalFlush, || self.flush_slow(lsn))
    }

    /// [`Wal::flush`] when the log is not yet durable at `lsn`: join or lead a group.
    fn flush_slow(&self, lsn: Lsn) -> Result<(), WalError> {
        let inserted = self.insert_position();
        if lsn > inserted {
            return Err(WalError::NotInserted { lsn, inserted });
        }
        self.counters.flushers.fetch_add(1, Ordering::Relaxed);
        let _flusher = FlusherGuard(&self.counters.flushers);
        loop {
            let me = {
                let mut q = self.queue.lock();
                self.check_failed()?;
                if self.progress.flushed.load(Ordering::Acquire) >= lsn.0 {
                    self.counters.flush_free.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                if !q.writing {
                    q.writing = true;
                    break;
                }
                let me = Arc::new(Waiter {
                    lsn: lsn.0,
                    woken: Mutex::new(false),
                    cv: Condvar::new(),
                });
                q.waiters.push(me.clone());
                me
            };
            let mut woken = me.woken.lock();
            while !*woken {
                woken = me.cv.wait(woken);
            }
            drop(woken);
            self.check_failed()?;
            if self.progress.flushed.load(Ordering::Acquire) >= lsn.0 {
                self.counters.flush_free.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            // Woken to lead (or the leader found others leading): try again.
        }
        self.lead_flush()
    }

    /// Gives up the write role after a batch ending at `upto`, handing it to one waiter
    /// beyond the batch.
    fn release_write_role(&self, upto: u64) {
        let mut q = self.queue.lock();
        debug_assert!(q.writing, "releasing a write role nobody holds");
        q.writing = false;
        q.wake_one_beyond(upto);
    }

    /// The leader's work (the caller holds the write role): optionally wait
    /// `commit_delay`, pad, write everything inserted so far, take a place in the sync
    /// pipeline, hand the write role on, sync, and publish the batch after the one before
    /// it.
    fn lead_flush(&self) -> Result<(), WalError> {
        if !self.commit_delay.is_zero()
            && self.counters.flushers.load(Ordering::Relaxed) > self.commit_siblings
        {
            // PostgreSQL's commit_delay: let more commits join this batch.
            self.counters.commit_delays.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(self.commit_delay);
        }
        let from = self.progress.written.load(Ordering::Relaxed);
        let mut upto = self.pad_insertions();
        if let Err(e) = self.write_out(upto) {
            self.abandon_write_role();
            return Err(e);
        }
        // A place in the sync pipeline, taken while holding the write role: places are
        // taken in write order. With one place (`syncs_in_flight` 1) this waits for the
        // previous leader's sync to end; with more, only when that many are running.
        let sync_wait_start = self.epoch.elapsed().as_nanos() as u64;
        let overlapping = {
            let mut pipe = self.syncs.lock();
            while pipe.in_flight >= self.syncs_in_flight {
                pipe = self.syncs_cv.wait(pipe);
            }
            pipe.in_flight += 1;
            pipe.in_flight > 1
        };
        let _place = SyncPlace(self);
        // While this leader waited for a place, more commits arrived: write them too, so
        // this sync covers them (PostgreSQL's leader, which waits for the previous write
        // and sync before taking its batch, gets them the same way). Else they would wait
        // for the next leader's write, which waits for a place: one more sync of latency
        // each, and smaller groups.
        if self.pos.load(Ordering::Acquire) > upto {
            let more = self.pad_insertions();
            if let Err(e) = self.write_out(more) {
                self.abandon_write_role();
                return Err(e);
            }
            self.counters.top_ups.fetch_add(1, Ordering::Relaxed);
            upto = more;
        }
        self.release_write_role(upto);
        self.check_failed()?;
        if upto > from {
            let c = &self.counters;
            let start = self.epoch.elapsed().as_nanos() as u64;
            // The gap since the previous sync ended, if this leader was already queued
            // for its place then (its write came first): the pipeline's handoff.
            let last = c.last_sync_end.load(Ordering::Relaxed);
            if last >= sync_wait_start && start >= last {
                c.sync_gap_ns.fetch_add(start - last, Ordering::Relaxed);
                c.sync_gaps.fetch_add(1, Ordering::Relaxed);
            }
            if overlapping {
                c.overlapped_syncs.fetch_add(1, Ordering::Relaxed);
            }
            // Without the pipeline's lock: syncs of several leaders may run at once. A
            // sync's return says nothing about an earlier batch still being synced (it
            // may sit in another segment), hence the in-order publication below.
            self.sync_range(from, upto)?;
            let end = self.epoch.elapsed().as_nanos() as u64;
            c.sync_ns.fetch_add(end - start, Ordering::Relaxed);
            c.last_sync_end.fetch_max(end, Ordering::Relaxed);
            c.syncs.fetch_add(1, Ordering::Relaxed);
        }
        // Publish in write order: the batch before this one ends at `from`; its leader
        // took its place before this one and publishes, or fails (latched) and gives its
        // place back, which wakes this wait.
        {
            let mut pipe = self.syncs.lock();
            loop {
                self.check_failed()?;
                let flushed = self.progress.flushed.load(Ordering::Acquire);
                if flushed >= from {
                    debug_assert_eq!(flushed, from, "batches are published in write order");
                    break;
                }
                pipe = self.syncs_cv.wait(pipe);
            }
            if upto > from {
                self.progress.flushed.store(upto, Ordering::Release);
            }
        }
        drop(_place);
        {
            let mut q = self.queue.lock();
            q.wake_covered(upto);
            if !q.writing {
                q.wake_one_beyond(upto);
            }
        }
        crate::invariants::debug_check(|| self.check_invariants());
        Ok(())
    }

    /// Everything inserted so far, padded to a block boundary (the caller holds the write
    /// role): returns the padded end. Acquire: see the ordering argument in
    /// `insert_built`.
    fn pad_insertions(&self) -> u64 {
        let upto = loop {
            let end = self.pos.load(Ordering::Acquire);
            let padded = round_up(end, WAL_BLOCK);
            if padded == end {
                break end;
            }
            if self
                .pos
                .compare_exchange(end, padded, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // The pad marker, then zeros (records are 8-byte aligned, so the padding
                // has room for the marker): bare zeros mid-block mean lost log to the
                // reader (see `record.rs`).
                let mut pad = [0u8; WAL_BLOCK as usize];
                pad[..record::PAD_MARKER_LEN]
                    .copy_from_slice(&record::pad_marker(end, self.incarnation));
                // SAFETY: the CAS made [end, padded) ours (no inserter can reserve it), and
                // the reservation margin of one block keeps the ring lap ahead of it.
                unsafe { self.ring.put(end, &pad[..(padded - end) as usize]) };
                break padded;
            }
        };
        debug_assert_eq!(upto % WAL_BLOCK, 0, "a flush ends on a block boundary");
        upto
    }

    /// After a failed write (latched: every failure here latches, and `fail` woke the
    /// waiters): frees the write role for the next caller, who will see the failure.
    fn abandon_write_role(&self) {
        let mut q = self.queue.lock();
        q.writing = false;
        q.wake_all();
    }

    /// Syncs the segments that log bytes `[from, upto)` went to. The caller holds a place
    /// in the sync pipeline (not its lock: other leaders may sync meanwhile).
    fn sync_range(&self, from: u64, upto: u64) -> Result<(), WalError> {
        if self.sync_method == SyncMethod::OpenDatasync {
            return Ok(()); // every write was durable when it returned
        }
        for segno in from / self.segments.size..=(upto - 1) / self.segments.size {
            let file = self.segment(segno)?;
            let r = match self.sync_method {
                SyncMethod::Fsync => file.sync_all(),
                _ => file.sync_data(),
            };
            r.map_err(|source| {
                self.fail(WalError::Io(IoError::new(
                    "fsync of",
                    &self.segments.path(segno),
                    source,
                )))
            })?;
        }
        Ok(())
    }

    /// Checks `flushed <= written <= reserved` and the ring's lap bound; safe while other
    /// threads use the log (each position only grows, and they are read in that order).
    pub fn check_invariants(&self) -> Result<(), crate::invariants::Violations> {
        let flushed = self.progress.flushed.load(Ordering::Acquire);
        let written = self.progress.written.load(Ordering::Acquire);
        let reserved = self.pos.load(Ordering::Acquire);
        let mut v = crate::invariants::Violations::default();
        v.check(flushed <= written && written <= reserved, || {
            format!(
                "the log's positions are out of order: flushed {} written {} reserved {}",
                Lsn(flushed),
                Lsn(written),
                Lsn(reserved)
            )
        });
        v.check(flushed % WAL_BLOCK == 0, || {
            format!("flushed {} is not on a block boundary", Lsn(flushed))
        });
        v.into_result()
    }

    /// The buffer pool's WAL-before-data hook: flushes to `lsn`, counting the flushes a
    /// page write forced.
    pub fn flush_for_page(&self, lsn: Lsn) -> Result<(), WalError> {
        if self.progress.flushed.load(Ordering::Acquire) < lsn.0 {
            self.counters
                .forced_by_pages
                .fetch_add(1, Ordering::Relaxed);
        }
        self.flush(lsn)
    }

    /// Starts a checkpoint: the redo point becomes the current insert position. Pages last
    /// changed before it get a full-page image with their next change.
    pub fn begin_checkpoint(&self) -> Lsn {
        // Every slot lock, in order: no insertion is between deciding on page images and
        // reserving, so each record either is below the new redo point or saw it.
        let _all: Vec<_> = self.slots.iter().map(|s| s.lock.lock()).collect();
        let redo = self.pos.load(Ordering::Acquire);
        self.redo_hint.store(redo, Ordering::Release);
        Lsn(redo)
    }

    /// Writes the control file atomically.
    pub fn write_control(&self, c: &Control) -> Result<(), ControlError> {
        control::write(&*self.vfs, &self.control_path, c)
    }

    /// How many released segments the next releases keep for recycling: `segments`, but
    /// never fewer than `recycle_segments` (the min_wal_size floor). The checkpointer
    /// sets it from its distance estimate, so a log that fills many segments per
    /// checkpoint renames old ones instead of creating and zero-filling new ones.
    pub fn set_recycle_target(&self, segments: usize) {
        self.segments.set_recycle_target(segments);
    }

    /// Releases segments wholly before `redo`: keeps up to `recycle_segments` (or the
    /// target of [`Wal::set_recycle_target`]) for
    /// recycling, unlinks the others; then prepares the next segments (recycling the kept
    /// ones first, as PostgreSQL's RemoveOldXlogFiles does). Returns how many it unlinked.
    /// A failed preparation is only reported if it latched the log (the WAL writer
    /// or the leader retries).
    pub fn remove_segments_before(&self, redo: Lsn) -> Result<usize, WalError> {
        let removed = self.segments.remove_before(redo.0 / self.segments.size)?;
        if let Err(e) = self.prepare_ahead() {
            if self.has_failed.load(Ordering::Acquire) {
                return Err(e);
            }
            tracing::warn!("preparing WAL segments ahead after a checkpoint: {e}");
        }
        Ok(removed)
    }

    /// Segment files added, recycled and removed since the log was opened.
    pub fn segment_counts(&self) -> SegmentCounts {
        self.segments.counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::MemVfs;

    const SEGMENT: u64 = 64 << 10;

    fn options(prepare_segments: u64) -> WalOptions {
        WalOptions {
            segment_size: SEGMENT,
            buffers: 256 << 10,
            sync_method: SyncMethod::Fdatasync,
            recycle_segments: 2,
            prepare_segments,
            commit_delay_us: 0,
            commit_siblings: 5,
            writer_flush_after: 0,
            syncs_in_flight: 2,
        }
    }

    fn open(vfs: &MemVfs, prepare_segments: u64) -> Wal {
        Wal::open(
            Arc::new(vfs.clone()),
            Path::new("/db"),
            options(prepare_segments),
            Lsn(0),
            Lsn(0),
            1,
        )
        .unwrap()
    }

    fn commit(wal: &Wal, xid: u32) -> Lsn {
        let (_, end) = wal
            .insert(RecordBuilder::new(RecordKind::Noop, xid, FLAG_COMMIT, 0))
            .unwrap();
        wal.flush(end).unwrap();
        end
    }

    /// Proves: the flush leader counts the segments it had to make itself (none prepared),
    /// and makes none when they were prepared. How: one log with `prepare_segments` 0 and
    /// nobody preparing, one with 2 and `prepare_ahead` after every commit; 40 commits
    /// (each padded to 4 KiB) cross two 64 KiB segments.
    #[test]
    fn inline_creations_are_counted_and_preparation_avoids_them() {
        let vfs = MemVfs::new();
        let wal = open(&vfs, 0);
        for x in 0..40 {
            commit(&wal, x);
        }
        assert_eq!(wal.flushed().0 / SEGMENT, 2, "{:?}", wal.flushed());
        assert_eq!(wal.stats().segments_created_inline, 2, "{:?}", wal.stats());
        assert_eq!(wal.segment_counts().added, 3, "one at open, two inline");

        let vfs = MemVfs::new();
        let wal = open(&vfs, 2);
        assert_eq!(wal.segment_counts().added, 3, "prepared at open: 0, 1, 2");
        for x in 0..40 {
            commit(&wal, x);
            wal.prepare_ahead().unwrap();
        }
        assert_eq!(wal.stats().segments_created_inline, 0);
        assert_eq!(wal.stats().segment_waits_inline, 0);
        assert_eq!(wal.segment_counts().added, 5, "segments 0 to 4");
    }

    /// Proves: inserts wake the WAL writer to write the log once per
    /// `writer_flush_after` bytes (capped at a quarter of the ring), not once per insert,
    /// and not at all when it is 0; without a writer, a ring that fills is counted in
    /// `buffers_full`. How: 8 KiB page images into a 256 KiB ring with nobody flushing,
    /// with writer_flush_after 32 KiB, 1 MiB (capped to 64 KiB) and 0.
    #[test]
    fn inserts_kick_the_writer_per_flush_after_bytes_and_a_full_ring_is_counted() {
        let page = vec![7u8; 8192];
        use crate::types::{BufferTag, ForkNumber, RelFileId};
        let tag = BufferTag::new(RelFileId::new(1, 1), ForkNumber::Main, 0);
        let run = |flush_after: u64, images: usize| {
            let vfs = MemVfs::new();
            let wal = Wal::open(
                Arc::new(vfs.clone()),
                Path::new("/db"),
                WalOptions {
                    writer_flush_after: flush_after,
                    ..options(1)
                },
                Lsn(0),
                Lsn(0),
                1,
            )
            .unwrap();
            let mut wakes = Vec::new();
            for i in 0..images {
                let mut r = RecordBuilder::new(RecordKind::Noop, i as u32, 0, 0);
                r.image(&tag, &page);
                wal.insert(r).unwrap();
                let w = wal.wait_for_wal_writer_work(std::time::Duration::ZERO);
                if w == WalWriterWake::Flush {
                    wakes.push(i);
                }
            }
            (wakes, wal.stats())
        };
        // 32 KiB: the first kick once four images are unwritten, then one per four more.
        let (wakes, stats) = run(32 << 10, 24);
        assert!(wakes.len() >= 5 && wakes.len() <= 6, "{wakes:?}");
        assert_eq!(stats.writer_kicks as usize, wakes.len());
        assert!(
            wakes.windows(2).all(|w| w[1] - w[0] >= 3),
            "one kick per 32 KiB: {wakes:?}"
        );
        // 1 MiB is more than a quarter of the 256 KiB ring: kicks every 64 KiB instead.
        let (wakes, _) = run(1 << 20, 24);
        assert!(wakes.len() >= 2 && wakes.len() <= 3, "{wakes:?}");
        // Off: no kick; nobody writes, so 40 images (320 KiB) fill the ring and the
        // inserts write the log themselves.
        let (wakes, stats) = run(0, 40);
        assert!(wakes.is_empty(), "{wakes:?}");
        assert_eq!(stats.writer_kicks, 0);
        assert!(stats.buffers_full > 0, "{stats:?}");
    }

    /// Proves: a flush leader that had to wait for a place in the sync pipeline writes
    /// the commits that arrived meanwhile before it syncs, so one sync covers them (a
    /// top-up). How: the test takes every place (standing in for previous leaders'
    /// syncs); a thread commits and, as leader, writes its record and waits for a place;
    /// a second record is inserted once that write is done; the places are given back.
    /// The leader's flush then made the second record durable too, with one sync and one
    /// top-up.
    #[test]
    fn a_leader_tops_up_its_batch_with_commits_that_arrived_during_the_previous_sync() {
        let vfs = MemVfs::new();
        let wal = Arc::new(open(&vfs, 1));
        let syncs0 = wal.stats().syncs;
        wal.syncs.lock().in_flight = wal.syncs_in_flight;
        let (_, end1) = wal
            .insert(RecordBuilder::new(RecordKind::Noop, 1, FLAG_COMMIT, 0))
            .unwrap();
        let leader = {
            let wal = wal.clone();
            std::thread::spawn(move || wal.flush(end1).unwrap())
        };
        // The leader's write of the first record is done: it now waits for the lock.
        let mut spin = crate::sync::SpinWait::new();
        while wal.progress.written.load(Ordering::Acquire) < end1.0 {
            spin.spin();
        }
        let (_, end2) = wal
            .insert(RecordBuilder::new(RecordKind::Noop, 2, FLAG_COMMIT, 0))
            .unwrap();
        assert!(wal.flushed() < end2);
        wal.syncs.lock().in_flight = 0;
        wal.syncs_cv.notify_all();
        leader.join().unwrap();
        assert!(wal.flushed() >= end2, "{:?} < {end2:?}", wal.flushed());
        let s = wal.stats();
        assert_eq!((s.syncs - syncs0, s.top_ups), (1, 1), "{s:?}");
    }

    /// A log on a FaultVfs whose first file sync is held in the sync hook until the
    /// returned gate opens (`open_gate`); `wait_entered` returns once it is held.
    fn log_with_a_held_first_sync(
        places: usize,
    ) -> (Arc<Wal>, crate::vfs::FaultVfs, Arc<HeldSync>) {
        use crate::vfs::FaultVfs;
        let fault = FaultVfs::new(Arc::new(MemVfs::new()));
        let wal = Arc::new(
            Wal::open(
                Arc::new(fault.clone()),
                Path::new("/db"),
                WalOptions {
                    syncs_in_flight: places,
                    ..options(1)
                },
                Lsn(0),
                Lsn(0),
                1,
            )
            .unwrap(),
        );
        let held = Arc::new(HeldSync::default());
        let h = held.clone();
        // Installed after `open` prepared the segments: the first file sync from here on
        // is the first leader's.
        fault.set_sync_hook(Some(Arc::new(move |_: &Path| {
            let mut st = h.state.lock();
            st.calls += 1;
            if st.calls == 1 {
                st.entered = true;
                h.cv.notify_all();
                while !st.open {
                    st = h.cv.wait(st);
                }
            }
        })));
        (wal, fault, held)
    }

    #[derive(Default)]
    struct HeldState {
        calls: u32,
        entered: bool,
        open: bool,
    }

    #[derive(Default)]
    struct HeldSync {
        state: Mutex<HeldState>,
        cv: Condvar,
    }

    impl HeldSync {
        fn wait_entered(&self) {
            let mut st = self.state.lock();
            while !st.entered {
                st = self.cv.wait(st);
            }
        }

        fn open_gate(&self) {
            self.state.lock().open = true;
            self.cv.notify_all();
        }
    }

    type Flushing = std::thread::JoinHandle<Result<(), WalError>>;

    /// Two commits on a log from [`log_with_a_held_first_sync`]: the first one's flush
    /// leads and is held in its sync; then the second's flush leads the next batch, and
    /// this returns once that second sync has returned. Gives both flush threads and the
    /// second record's end.
    fn two_flushes_the_first_held(wal: &Arc<Wal>, held: &HeldSync) -> (Flushing, Flushing, Lsn) {
        let flush_one = |xid: u32| {
            let (_, end) = wal
                .insert(RecordBuilder::new(RecordKind::Noop, xid, FLAG_COMMIT, 0))
                .unwrap();
            let wal = wal.clone();
            (std::thread::spawn(move || wal.flush(end)), end)
        };
        let (first, _) = flush_one(1);
        held.wait_entered();
        let (second, end2) = flush_one(2);
        let mut spin = crate::sync::SpinWait::new();
        while wal.stats().syncs < 1 {
            spin.spin();
        }
        (first, second, end2)
    }

    /// Proves: with two places in the sync pipeline, the next leader syncs its batch while
    /// the previous sync still runs, and the durable end does not move past the earlier
    /// batch until that sync is done. How: the first leader's sync is held in a FaultVfs
    /// sync hook; a second commit's flush leads, writes and syncs its own batch (counted
    /// as overlapped) while the first is held; `flushed` stays at 0 until the hold is
    /// released, then both flushes return with everything durable.
    #[test]
    fn a_second_sync_overlaps_the_first_and_publishes_after_it() {
        let (wal, _fault, held) = log_with_a_held_first_sync(2);
        let (first, second, end2) = two_flushes_the_first_held(&wal, &held);
        // The second leader's sync returned while the first is held...
        let s = wal.stats();
        assert_eq!(s.overlapped_syncs, 1, "{s:?}");
        // ...but its batch is not published before the first one's.
        assert_eq!(wal.flushed(), Lsn(0), "published past a sync still running");
        assert!(!second.is_finished());
        held.open_gate();
        first.join().unwrap().unwrap();
        second.join().unwrap().unwrap();
        assert!(wal.flushed() >= end2);
        assert_eq!(wal.stats().syncs, 2);
        wal.check_invariants().unwrap();
    }

    /// Proves: when an earlier sync fails, a later batch whose own sync succeeded is never
    /// published (its bytes may follow lost ones), and both flushes fail. How: as above,
    /// but the held sync then fails with EIO (a FaultVfs rule on the second sync checked:
    /// the hook runs before the rules, so the second leader's sync is checked first).
    #[test]
    fn a_later_sync_never_publishes_past_a_failed_earlier_one() {
        use crate::vfs::{FaultKind, FaultOp, FaultRule};
        let (wal, fault, held) = log_with_a_held_first_sync(2);
        fault.add_rule(FaultRule::nth("/wal/", FaultOp::Fsync, 2, FaultKind::Eio));
        let (first, second, _) = two_flushes_the_first_held(&wal, &held);
        held.open_gate();
        assert!(first.join().unwrap().is_err());
        assert!(second.join().unwrap().is_err());
        assert_eq!(wal.flushed(), Lsn(0));
        assert!(wal.is_failed());
    }

    /// Proves: a leader that finds the failure latched wakes every waiter, and nobody
    /// waits forever on a failed log. How: the first segment's fsync fails (FaultVfs);
    /// four threads commit at once; every one returns (with the error) and the log stays
    /// latched.
    #[test]
    fn a_failed_sync_wakes_every_waiter() {
        use crate::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs};
        let mem = MemVfs::new();
        let fault = FaultVfs::new(Arc::new(mem.clone()));
        let wal = Wal::open(
            Arc::new(fault.clone()),
            Path::new("/db"),
            options(1),
            Lsn(0),
            Lsn(0),
            1,
        )
        .unwrap();
        fault.add_rule(FaultRule {
            times: u64::MAX,
            ..FaultRule::nth("/wal/0", FaultOp::Fsync, 1, FaultKind::Eio)
        });
        std::thread::scope(|s| {
            for t in 0..4 {
                let wal = &wal;
                s.spawn(move || {
                    // The insert itself fails once another thread latched the log.
                    if let Ok((_, end)) =
                        wal.insert(RecordBuilder::new(RecordKind::Noop, t, FLAG_COMMIT, 0))
                    {
                        assert!(wal.flush(end).is_err());
                    }
                });
            }
        });
        assert!(wal.is_failed());
    }
}

/// Model tests of the flush queue under shuttle: run with
/// `cargo test -p bufpool --features shuttle --lib wal::model`.
#[cfg(all(test, feature = "shuttle"))]
mod model {
    use super::*;
    use crate::vfs::MemVfs;

    /// Proves: waking only the waiters a sync covered (plus one new leader) never loses a
    /// wakeup, and every flush returns with its record durable, with `places` leaders
    /// allowed to sync at once (1: serial; 2: overlapping syncs, published in order). How:
    /// three modeled threads each insert two commit records and flush to each end,
    /// against one log on MemVfs; shuttle explores random and PCT schedules and reports
    /// any schedule in which every thread sleeps (a lost wakeup, or a leader waiting for a
    /// place or a publication that never comes) as a deadlock. After each flush, the log
    /// is durable to it (and `lead_flush` asserts, in these debug builds, that each batch
    /// is published right after the one before); at the end, flushed covers everything
    /// and every place is free.
    fn three_committers(places: usize) {
        let vfs = MemVfs::new();
        let wal = Arc::new(
            Wal::open(
                Arc::new(vfs),
                Path::new("/db"),
                WalOptions {
                    segment_size: 64 << 10,
                    buffers: 64 << 10,
                    sync_method: SyncMethod::Fdatasync,
                    recycle_segments: 1,
                    prepare_segments: 1,
                    commit_delay_us: 0,
                    commit_siblings: 5,
                    writer_flush_after: 0,
                    syncs_in_flight: places,
                },
                Lsn(0),
                Lsn(0),
                1,
            )
            .unwrap(),
        );
        let threads: Vec<_> = (0..3u32)
            .map(|t| {
                let wal = wal.clone();
                shuttle::thread::spawn(move || {
                    for i in 0..2 {
                        let (_, end) = wal
                            .insert(RecordBuilder::new(
                                RecordKind::Noop,
                                t * 10 + i,
                                FLAG_COMMIT,
                                0,
                            ))
                            .unwrap();
                        wal.flush(end).unwrap();
                        assert!(wal.flushed() >= end, "flush returned before {end}");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(wal.flushed() >= wal.insert_position());
        assert!(wal.queue.lock().waiters.is_empty());
        assert!(!wal.queue.lock().writing);
        assert_eq!(wal.syncs.lock().in_flight, 0);
        wal.check_invariants().unwrap();
        OVERLAPPED.fetch_add(
            wal.stats().overlapped_syncs,
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Overlapped syncs over every schedule run so far (outside shuttle's model: a plain
    /// counter, so the test can check the schedules did overlap syncs).
    static OVERLAPPED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    #[test]
    fn flush_queue_random() {
        shuttle::check_random(|| three_committers(1), 3000);
    }

    #[test]
    fn flush_queue_pct() {
        shuttle::check_pct(|| three_committers(1), 3000, 3);
    }

    /// With two places, the explored schedules do overlap syncs (else the model would not
    /// test the pipeline). Both schedulers in one test: `OVERLAPPED` is shared.
    #[test]
    fn overlapping_syncs_random_and_pct() {
        let before = OVERLAPPED.load(std::sync::atomic::Ordering::Relaxed);
        shuttle::check_random(|| three_committers(2), 3000);
        shuttle::check_pct(|| three_committers(2), 3000, 3);
        let overlapped = OVERLAPPED.load(std::sync::atomic::Ordering::Relaxed) - before;
        assert!(overlapped > 0, "no schedule overlapped two syncs");
    }
}
