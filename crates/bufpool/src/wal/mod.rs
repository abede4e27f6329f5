//! The write-ahead log: records, LSNs, parallel insertion, group commit.
//!
//! Owns: the in-memory ring of log bytes (`wal_buffers`), the insert position, the write and
//! flush positions, the insertion slots, the segment files (`segment.rs`) and the control
//! file (`control.rs`). It knows nothing of pages or pools: `crate::engine` logs pages,
//! runs checkpoints and recovery, and plugs [`Wal::flush`] into the buffer pool's write path.
//!
//! Insertion (many threads at once, PostgreSQL's WAL insertion locks): a thread takes one
//! of `INSERT_SLOTS` slot locks (by thread), publishes its candidate start in the slot and
//! reserves `align8(len)` bytes with one CAS on `pos`, copies its record into the ring
//! holding only its slot, and clears the slot. A writer that wants bytes up to X waits
//! until no slot holds a start below X. The redo point changes only while a checkpoint
//! holds every slot lock, so an inserter's full-page-image decision cannot go stale.
//!
//! Flush and group commit: `flush(lsn)` returns at once if the log is durable to `lsn`.
//! Otherwise it takes `flush_lock`; the thread that gets it first writes and syncs
//! everything inserted so far, so the threads queued behind it find their records durable
//! and return without a sync of their own.
//!
//! The last partial block: a flush pads the log with zeros to the next 4 KiB boundary and
//! the next record starts there, so a 4 KiB block that holds fsynced (acknowledged) bytes
//! is never written again and a torn rewrite can never destroy an acknowledged commit. A
//! zero length where a record should start means "padding: skip to the next 4 KiB" to the
//! reader. Cost: at most 4 KiB of log per flush.
//!
//! Failure: a failed write or fsync of the log is latched (PostgreSQL PANICs): every later
//! insert and flush fails until the log is reopened, because the kernel may have dropped
//! the dirty log pages and a retry could report success for bytes that are gone.
//!
//! Invariants: `flushed <= written <= inserted-and-complete <= reserved`; all of them are
//! record boundaries or 4 KiB boundaries; a byte of the ring is rewritten only after its
//! previous lap was written to the segment (`reserved - written <= ring - 4 KiB`).
//! Locks, in order: slot locks (ascending when a checkpoint takes them all) → `leader` →
//! `flush_lock`. An inserter never flushes while its slot is published (it gives the slot
//! up before waiting for ring space), so a leader waiting for insertions cannot deadlock
//! with one.

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
}

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
            WalError::Unlogged(why) => WalError::Unlogged(Box::new(why.duplicate())),
        }
    }

    /// The OS error number behind this error (or behind the failure it reports again).
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            WalError::Io(e) => e.raw_os_error(),
            WalError::Failed(first) | WalError::Unlogged(first) => first.raw_os_error(),
            WalError::TooLarge { .. } => None,
        }
    }
}

/// Counters of the log (all since open).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    pub records: u64,
    pub bytes: u64,
    /// Flushes that wrote and synced.
    pub syncs: u64,
    /// `flush` calls that found the log already durable (someone else's sync covered them).
    pub flush_free: u64,
    /// Flushes forced by the buffer pool writing a page whose record was not yet durable.
    pub forced_by_pages: u64,
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

    /// Copies log bytes `[pos, pos + dst.len())` out of the ring.
    ///
    /// # Safety
    /// Every byte in the range was completely inserted and is not being rewritten.
    unsafe fn get(&self, pos: u64, dst: &mut [u8]) {
        let n = self.len();
        let mut done = 0;
        while done < dst.len() {
            let at = ((pos + done as u64) % n) as usize;
            let k = (dst.len() - done).min(n as usize - at);
            // SAFETY: per the contract nobody writes these bytes now; in bounds as above.
            unsafe {
                std::ptr::copy_nonoverlapping(self.base.add(at), dst[done..].as_mut_ptr(), k);
            }
            done += k;
        }
    }
}

#[repr(align(64))]
struct Slot {
    lock: Mutex<()>,
    at: AtomicU64,
    /// Records and bytes inserted through this slot (written under its lock).
    records: AtomicU64,
    bytes: AtomicU64,
}

#[derive(Default)]
struct FlushState {
    /// Segments written since their last sync.
    unsynced: Vec<u64>,
}

/// Who is flushing: at most one leader; the others wait on `flush_done` and re-check.
#[derive(Default)]
struct Leader {
    busy: bool,
}

/// An open write-ahead log.
pub struct Wal {
    ring: Ring,
    /// Next free log position; advanced by CAS (inserters, and the flush leader's padding).
    pos: AtomicU64,
    slots: Box<[Slot]>,
    written: AtomicU64,
    flushed: AtomicU64,
    flush_lock: Mutex<FlushState>,
    leader: Mutex<Leader>,
    flush_done: Condvar,
    failed: Mutex<Option<WalError>>,
    /// Set once `failed` holds an error: the insert path checks this, not the mutex.
    has_failed: AtomicBool,
    segments: segment::Segments,
    sync_method: SyncMethod,
    redo_hint: AtomicU64,
    /// Stamped into every record (see `record.rs`).
    incarnation: u32,
    syncs: AtomicU64,
    flush_free: AtomicU64,
    forced_by_pages: AtomicU64,
    control_path: PathBuf,
    vfs: Arc<dyn Vfs>,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field("written", &Lsn(self.written.load(Ordering::Relaxed)))
            .field("flushed", &Lsn(self.flushed.load(Ordering::Relaxed)))
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
    /// rewritten), with `redo` as the current redo point.
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
        Ok(Wal {
            ring,
            pos: AtomicU64::new(start),
            slots: (0..INSERT_SLOTS)
                .map(|_| Slot {
                    lock: Mutex::new(()),
                    at: AtomicU64::new(SLOT_IDLE),
                    records: AtomicU64::new(0),
                    bytes: AtomicU64::new(0),
                })
                .collect(),
            written: AtomicU64::new(start),
            flushed: AtomicU64::new(start),
            flush_lock: Mutex::new(FlushState::default()),
            leader: Mutex::new(Leader::default()),
            flush_done: Condvar::new(),
            failed: Mutex::new(None),
            has_failed: AtomicBool::new(false),
            segments,
            sync_method: opts.sync_method,
            redo_hint: AtomicU64::new(redo.0),
            incarnation,
            syncs: AtomicU64::new(0),
            flush_free: AtomicU64::new(0),
            forced_by_pages: AtomicU64::new(0),
            control_path: dir.join(control::CONTROL_FILE),
            vfs,
        })
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
        Lsn(self.flushed.load(Ordering::Acquire))
    }

    /// Next insert position (everything reserved so far ends here).
    pub fn insert_position(&self) -> Lsn {
        Lsn(self.pos.load(Ordering::SeqCst))
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
            Lsn(self.pos.load(Ordering::SeqCst)),
        )
    }

    /// The incarnation stamped into this log's records.
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    pub fn stats(&self) -> WalStats {
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
            syncs: self.syncs.load(Ordering::Relaxed),
            flush_free: self.flush_free.load(Ordering::Relaxed),
            forced_by_pages: self.forced_by_pages.load(Ordering::Relaxed),
        }
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
        loop {
            let slot = &self.slots[my_slot()];
            let _slot_guard = slot.lock.lock();
            if redo.is_some_and(|r| self.redo_hint.load(Ordering::Acquire) != r) {
                return Ok(None);
            }
            // Reserve by CAS. The candidate start is published in the slot before the CAS
            // (SeqCst), so a flush leader that has seen `pos` past it also sees the slot
            // busy; `at` only ever under-states the real start, which is conservative.
            let mut p = self.pos.load(Ordering::SeqCst);
            let start = loop {
                if p + alen + margin > self.written.load(Ordering::Acquire) + self.ring.len() {
                    break None;
                }
                slot.at.store(p, Ordering::SeqCst);
                match self.pos.compare_exchange_weak(
                    p,
                    p + alen,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                ) {
                    Ok(_) => break Some(p),
                    Err(now) => p = now,
                }
            };
            let Some(start) = start else {
                slot.at.store(SLOT_IDLE, Ordering::SeqCst);
                drop(_slot_guard);
                // Ring full: write and sync what is there (rare with a ring of a segment's
                // size; a plain write would leave a partial block to rewrite), then retry
                // with the same record.
                self.flush(Lsn(p + alen + margin - self.ring.len()))?;
                continue;
            };
            debug_assert_eq!(start % 8, 0, "records start 8-byte aligned");
            debug_assert!(
                start + alen <= self.written.load(Ordering::Acquire) + self.ring.len(),
                "a reservation laps unwritten ring bytes"
            );
            let flushed = Lsn(self.flushed.load(Ordering::Acquire));
            let bytes = rec.finish(Lsn(start), flushed, self.incarnation);
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
            slot.at.store(SLOT_IDLE, Ordering::Release);
            // Single writer (the slot lock holder): plain load and store.
            slot.records
                .store(slot.records.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            slot.bytes
                .store(slot.bytes.load(Ordering::Relaxed) + alen, Ordering::Relaxed);
            return Ok(Some((Lsn(start), Lsn(start + alen))));
        }
    }

    /// Waits until every insertion that started below `upto` has finished copying.
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

    /// Writes ring bytes `[written, upto)` to the segments. Holds `flush_lock`.
    fn write_out(&self, st: &mut FlushState, upto: u64) -> Result<(), WalError> {
        self.wait_insertions(upto);
        let mut pos = self.written.load(Ordering::Acquire);
        debug_assert!(
            pos <= upto && upto <= self.pos.load(Ordering::SeqCst),
            "write_out: written {pos} <= upto {upto} <= reserved must hold"
        );
        let mut buf = vec![0u8; (upto - pos).min(1 << 20) as usize];
        while pos < upto {
            let segno = pos / self.segments.size;
            let seg_end = (segno + 1) * self.segments.size;
            let n = (upto.min(seg_end) - pos).min(buf.len() as u64) as usize;
            // SAFETY: bytes below `upto` were completely inserted (wait_insertions) and the
            // ring cannot lap them until `written` moves past them, which only we do.
            unsafe { self.ring.get(pos, &mut buf[..n]) };
            let file = self.segment(segno)?;
            let w = file
                .write_at(&buf[..n], pos % self.segments.size)
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
            if st.unsynced.last() != Some(&segno) {
                st.unsynced.push(segno);
            }
            pos += n as u64;
            self.written.store(pos, Ordering::Release);
        }
        debug_assert_eq!(self.written.load(Ordering::Acquire), upto);
        Ok(())
    }

    fn segment(&self, segno: u64) -> Result<Arc<dyn VfsFile>, WalError> {
        match self.segments.file(segno, true) {
            Ok(Some(f)) => Ok(f),
            Ok(None) => unreachable!("created on demand"),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Makes the log durable at least up to `lsn`; shares the sync with every thread that
    /// waits meanwhile (group commit).
    ///
    /// One thread at a time is the leader: it takes everything inserted so far, writes and
    /// syncs it. The others wait on `flush_done` and are all woken together when it ends
    /// (as PostgreSQL's LWLockAcquireOrWait does), so they find their records durable, or
    /// elect one new leader that flushes everything queued during the last sync. Queuing on
    /// a mutex instead hands the lock over one waiter at a time, and the first thread back
    /// leads a flush of little more than its own record.
    ///
    /// A failed log refuses even a flush that has nothing to do: the pool calls this
    /// before every page write, and after a failure (or an unlogged change, see
    /// [`Wal::latch_unlogged`]) no page may be written.
    pub fn flush(&self, lsn: Lsn) -> Result<(), WalError> {
        self.check_failed()?;
        if self.flushed.load(Ordering::Acquire) >= lsn.0 {
            self.flush_free.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        {
            let mut l = self.leader.lock();
            loop {
                self.check_failed()?;
                if self.flushed.load(Ordering::Acquire) >= lsn.0 {
                    self.flush_free.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                if !l.busy {
                    l.busy = true;
                    break;
                }
                l = self.flush_done.wait(l);
            }
        }
        let result = self.lead_flush();
        self.leader.lock().busy = false;
        self.flush_done.notify_all();
        result
    }

    /// The leader's work: pad, write and sync everything inserted so far.
    fn lead_flush(&self) -> Result<(), WalError> {
        let mut st = self.flush_lock.lock();
        // Take everything inserted so far, padded to a block boundary.
        let upto = loop {
            let end = self.pos.load(Ordering::SeqCst);
            let padded = round_up(end, WAL_BLOCK);
            if padded == end {
                break end;
            }
            if self
                .pos
                .compare_exchange(end, padded, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                let zeros = [0u8; WAL_BLOCK as usize];
                // SAFETY: the CAS made [end, padded) ours (no inserter can reserve it), and
                // the reservation margin of one block keeps the ring lap ahead of it.
                unsafe { self.ring.put(end, &zeros[..(padded - end) as usize]) };
                break padded;
            }
        };
        debug_assert_eq!(upto % WAL_BLOCK, 0, "a flush ends on a block boundary");
        if upto <= self.flushed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.write_out(&mut st, upto)?;
        if self.sync_method != SyncMethod::OpenDatasync {
            for segno in std::mem::take(&mut st.unsynced) {
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
        } else {
            st.unsynced.clear();
        }
        self.syncs.fetch_add(1, Ordering::Relaxed);
        debug_assert!(
            self.flushed.load(Ordering::Acquire) < upto,
            "only the leader moves flushed, forward"
        );
        self.flushed.store(upto, Ordering::Release);
        debug_assert!(
            self.check_invariants().is_ok(),
            "{:?}",
            self.check_invariants()
        );
        Ok(())
    }

    /// Checks `flushed <= written <= reserved` and the ring's lap bound; safe while other
    /// threads use the log (each position only grows, and they are read in that order).
    pub fn check_invariants(&self) -> Result<(), String> {
        let flushed = self.flushed.load(Ordering::Acquire);
        let written = self.written.load(Ordering::Acquire);
        let reserved = self.pos.load(Ordering::SeqCst);
        if !(flushed <= written && written <= reserved) {
            return Err(format!(
                "the log's positions are out of order: flushed {} written {} reserved {}",
                Lsn(flushed),
                Lsn(written),
                Lsn(reserved)
            ));
        }
        if flushed % WAL_BLOCK != 0 {
            return Err(format!(
                "flushed {} is not on a block boundary",
                Lsn(flushed)
            ));
        }
        Ok(())
    }

    /// The buffer pool's WAL-before-data hook: flushes to `lsn`, counting the flushes a
    /// page write forced.
    pub fn flush_for_page(&self, lsn: Lsn) -> Result<(), WalError> {
        if self.flushed.load(Ordering::Acquire) < lsn.0 {
            self.forced_by_pages.fetch_add(1, Ordering::Relaxed);
        }
        self.flush(lsn)
    }

    /// Starts a checkpoint: the redo point becomes the current insert position. Pages last
    /// changed before it get a full-page image with their next change.
    pub fn begin_checkpoint(&self) -> Lsn {
        // Every slot lock, in order: no insertion is between deciding on page images and
        // reserving, so each record either is below the new redo point or saw it.
        let _all: Vec<_> = self.slots.iter().map(|s| s.lock.lock()).collect();
        let redo = self.pos.load(Ordering::SeqCst);
        self.redo_hint.store(redo, Ordering::Release);
        Lsn(redo)
    }

    /// Writes the control file atomically.
    pub fn write_control(&self, c: &Control) -> Result<(), ControlError> {
        control::write(&*self.vfs, &self.control_path, c)
    }

    /// Releases segments wholly before `redo`: keeps up to `recycle_segments` for
    /// recycling, unlinks the others. Returns how many it unlinked.
    pub fn remove_segments_before(&self, redo: Lsn) -> Result<usize, WalError> {
        self.segments.remove_before(redo.0 / self.segments.size)
    }

    /// Segment files added, recycled and removed since the log was opened.
    pub fn segment_counts(&self) -> SegmentCounts {
        self.segments.counts()
    }
}
