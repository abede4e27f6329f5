//! The write-ahead log: records, LSNs, parallel insertion, group commit.
//!
//! Owns: the log buffer (`wal_buffers`, `log_buffer.rs`), the insert position, the write and
//! flush positions, the insertion slots, the flush queue, the segment files (`segment.rs`)
//! and the control file (`control.rs`). It knows nothing of pages or pools: `crate::engine`
//! logs pages, runs checkpoints and recovery, runs the WAL writer that calls
//! [`Wal::prepare_ahead`], and plugs [`Wal::flush`] into the buffer pool's write path.
//!
//! Files: `options.rs` (settings, counters), `error.rs`, `log_buffer.rs` (the ring of log
//! bytes), `insert.rs` (parallel insertion), `flush.rs` (group commit and the sync
//! pipeline), `writer.rs` (segment preparation and the WAL writer's requests),
//! `segment.rs`, `record.rs`, `control.rs`.
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
pub mod durable_end;
mod error;
mod flush;
mod insert;
mod log_buffer;
mod options;
pub mod record;
mod segment;
mod writer;

pub use control::{Control, ControlError};
pub use error::WalError;
pub use options::{
    SegmentCounts, SyncMethod, WalOptions, WalStats, DEFAULT_PREPARE_SEGMENTS,
    DEFAULT_RECYCLE_SEGMENTS,
};
pub use record::{
    BlockChange, BlockRef, Record, RecordBuilder, RecordKind, FLAG_ABORT, FLAG_COMMIT,
};
pub use writer::WalWriterWake;

use std::path::{Path, PathBuf};

use flush::{FlushQueue, SyncPipe};
use insert::{my_slot, Slot, INSERT_SLOTS};
use log_buffer::{LogBuffer, Padded};
use writer::WalWriter;

use crate::sync::{Arc, AtomicBool, AtomicU64, Condvar, Mutex, Ordering};
use crate::types::Lsn;
use crate::vfs::Vfs;

/// Log bytes between padding points: a flush pads to this boundary (the common page and
/// sector size; the power-loss simulator tears writes at it).
pub const WAL_BLOCK: u64 = 4096;

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
    empty_batches: AtomicU64,
    sync_ns: AtomicU64,
    sync_gap_ns: AtomicU64,
    sync_gaps: AtomicU64,
    /// When the last sync ended (ns since the log's `epoch`).
    last_sync_end: AtomicU64,
    /// Leaders that took their place while another leader held one (`WalStats`).
    overlapped_syncs: AtomicU64,
    durable_end_syncs: AtomicU64,
    vouches: AtomicU64,
    /// Bytes written to segment files, and padding inserted to end flushes on a block.
    write_bytes: AtomicU64,
    pad_bytes: AtomicU64,
    /// Threads inside `flush`'s slow path now (commit_siblings' count).
    flushers: AtomicU64,
}

/// An open write-ahead log.
pub struct Wal {
    /// Next free log position; advanced by CAS (inserters, and the flush leader's padding).
    pos: Padded<AtomicU64>,
    progress: Padded<Progress>,
    counters: Padded<Counters>,
    /// The log buffer (`wal_buffers`).
    buffer: LogBuffer,
    slots: Box<[Slot]>,
    queue: Mutex<FlushQueue>,
    /// The sync pipeline: at most `syncs_in_flight` leaders hold a place, from the end of
    /// their write to the publication of their batch; `syncs_cv` wakes leaders waiting
    /// for a place or for the batch before theirs to be published.
    syncs: Mutex<SyncPipe>,
    syncs_cv: Condvar,
    syncs_in_flight: usize,
    wal_writer: WalWriter,
    failed: Mutex<Option<WalError>>,
    /// Set once `failed` holds an error: the insert path checks this, not the mutex.
    has_failed: AtomicBool,
    segments: segment::Segments,
    sync_method: SyncMethod,
    prepare_segments: u64,
    commit_delay: std::time::Duration,
    commit_siblings: u64,
    redo_hint: AtomicU64,
    /// Stamped into every record (see `record.rs`).
    incarnation: u32,
    /// Zero of the sync timings.
    epoch: std::time::Instant,
    control_path: PathBuf,
    vfs: Arc<dyn Vfs>,
    /// `wal_durable_end`: the file the durable end is stamped in.
    durable_end: Option<durable_end::Stamp>,
    /// The end of the newest record [`Wal::flush_vouched`] inserted (0: none yet).
    vouched: AtomicU64,
    /// Test hooks (`HookPoint::ControlReplace`).
    probe: crate::hooks::Probe,
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
        let wal_dir = dir.join("wal");
        if end == Lsn(0) {
            // A new log: an old database's stamp must not speak for it.
            durable_end::remove(&*vfs, &wal_dir)?;
        }
        let durable_end = opts
            .durable_end
            .then(|| durable_end::Stamp::open(&*vfs, &wal_dir))
            .transpose()?;
        let buffer = LogBuffer::new(opts.buffers as usize);
        // The ring's lap bound (`reserved - written <= ring - 4 KiB`) and the flush's
        // padding work in whole blocks, with room for a record past the margin.
        debug_assert!(
            buffer.len() % WAL_BLOCK == 0 && buffer.len() >= 2 * WAL_BLOCK,
            "wal_buffers of {} bytes is not at least two whole {WAL_BLOCK}-byte blocks",
            buffer.len()
        );
        let writer_kick = match opts.writer_flush_after {
            0 => 0,
            n => n.min(buffer.len() / 4).max(WAL_BLOCK),
        };
        let wal = Wal {
            pos: Padded(AtomicU64::new(start)),
            progress: Padded(Progress {
                written: AtomicU64::new(start),
                flushed: AtomicU64::new(start),
            }),
            counters: Padded::default(),
            buffer,
            slots: (0..INSERT_SLOTS).map(|_| Slot::new()).collect(),
            queue: Mutex::new(FlushQueue::default()),
            syncs: Mutex::new(SyncPipe::default()),
            syncs_cv: Condvar::new(),
            syncs_in_flight: opts.syncs_in_flight.max(1),
            wal_writer: WalWriter::new(writer_kick),
            failed: Mutex::new(None),
            has_failed: AtomicBool::new(false),
            segments,
            sync_method: opts.sync_method,
            prepare_segments: opts.prepare_segments,
            commit_delay: std::time::Duration::from_micros(opts.commit_delay_us),
            commit_siblings: opts.commit_siblings,
            redo_hint: AtomicU64::new(redo.0),
            incarnation,
            epoch: std::time::Instant::now(),
            control_path: dir.join(control::CONTROL_FILE),
            vfs,
            durable_end,
            vouched: AtomicU64::new(0),
            probe: Default::default(),
        };
        wal.prepare_now()?;
        Ok(wal)
    }

    /// Size of each segment file, in bytes.
    pub fn segment_size(&self) -> u64 {
        self.segments.size
    }

    /// The path of segment file number `segno`.
    pub fn segment_path(&self, segno: u64) -> PathBuf {
        self.segments.path(segno)
    }

    /// The numbers of the segment files present on disk, ascending.
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

    /// pg_stat_io's WAL rows as counted so far (see [`crate::stats::WalIoStats`]).
    pub fn io_stats(&self) -> crate::stats::WalIoSnapshot {
        self.segments.io.snapshot()
    }

    /// The log's counters, since it was opened.
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
            empty_batches: c.empty_batches.load(Ordering::Relaxed),
            sync_ns: c.sync_ns.load(Ordering::Relaxed),
            sync_gap_ns: c.sync_gap_ns.load(Ordering::Relaxed),
            sync_gaps: c.sync_gaps.load(Ordering::Relaxed),
            overlapped_syncs: c.overlapped_syncs.load(Ordering::Relaxed),
            write_bytes: c.write_bytes.load(Ordering::Relaxed),
            pad_bytes: c.pad_bytes.load(Ordering::Relaxed),
            durable_end_syncs: c.durable_end_syncs.load(Ordering::Relaxed),
            vouches: c.vouches.load(Ordering::Relaxed),
        }
    }

    /// How far the log is durable in the sense recovery holds it to: the stamped durable
    /// end with `wal_durable_end` (what [`Wal::flush_acknowledged`] made durable), the
    /// flushed end without.
    pub fn acknowledged_end(&self) -> Lsn {
        match &self.durable_end {
            Some(stamp) => stamp.end().min(self.flushed()),
            None => self.flushed(),
        }
    }

    /// [`Wal::flush`] for a commit about to be acknowledged: with `wal_durable_end`, also
    /// makes the durable end durable (one write and sync per group of committers, see
    /// `durable_end.rs`), so that recovery refuses damage to this commit's record instead
    /// of reading it as a torn tail. A failure latches the log, as a failed log sync does.
    pub fn flush_acknowledged(&self, lsn: Lsn) -> Result<(), WalError> {
        self.flush(lsn)?;
        let Some(stamp) = &self.durable_end else {
            return Ok(());
        };
        if stamp.covers(lsn) {
            return Ok(());
        }
        let c = &self.counters;
        let synced = || {
            c.durable_end_syncs.fetch_add(1, Ordering::Relaxed);
            self.flushed()
        };
        match stamp.stamp(lsn, synced) {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fail(WalError::Io(e))),
        }
    }

    /// Installs the engine's test-hook forwarder (see `hooks.rs`), here and in the
    /// segment files.
    pub(crate) fn install_probe(&self, forward: crate::hooks::Forward) {
        self.probe.install(forward.clone());
        self.segments.probe.install(forward);
    }

    /// Makes everything inserted so far durable *and vouched for*, before something other
    /// than a page is written that depends on it (the commit log's and the multixacts'
    /// pages: they carry no LSN that recovery could compare with the end of the log).
    /// A flush alone is not enough: damage to the last durable records reads exactly as a
    /// torn tail unless a later valid record's `flushed` field vouches for them, and the
    /// last flush before a crash has no later record. So a small record (a no-op, no
    /// transaction) is inserted after the flush, carrying the flushed end, and flushed in
    /// turn: damage anywhere before it is refused by recovery rather than read as the end
    /// of the log, so a status on storage never outlives the record that decided it. (The
    /// record itself damaged loses nothing: only it lies past what it vouches for.)
    /// Returns at once when nothing but the previous vouching record was inserted since.
    pub fn flush_vouched(&self) -> Result<(), WalError> {
        let at = self.insert_position();
        if at.0 <= self.vouched.load(Ordering::Acquire) {
            return Ok(());
        }
        self.flush(at)?;
        let (_, end) = self.insert(RecordBuilder::new(RecordKind::Noop, 0, 0, 0))?;
        self.flush(end)?;
        self.vouched.fetch_max(end.0, Ordering::AcqRel);
        self.counters.vouches.fetch_add(1, Ordering::Relaxed);
        Ok(())
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

    /// Starts a checkpoint: the redo point becomes the current insert position. Pages last
    /// changed before it get a full-page image with their next change.
    pub fn begin_checkpoint(&self) -> Lsn {
        // Every slot lock, in order: no insertion is between deciding on page images and
        // reserving, so each record either is below the new redo point or saw it.
        let _all: Vec<_> = self.slots.iter().map(|s| s.lock.lock()).collect();
        let redo = self.pos.load(Ordering::Acquire);
        // The insert position only grows, so each redo point is at or past the last one,
        // and at or past everything durable.
        debug_assert!(
            redo >= self.redo_hint.load(Ordering::Acquire)
                && redo >= self.progress.flushed.load(Ordering::Acquire),
            "new redo point {} is below the previous one {} or the durable end {}",
            Lsn(redo),
            self.redo(),
            self.flushed()
        );
        self.redo_hint.store(redo, Ordering::Release);
        Lsn(redo)
    }

    /// Writes the control file atomically.
    pub fn write_control(&self, c: &Control) -> Result<(), ControlError> {
        self.probe
            .fire(crate::hooks::HookPoint::ControlReplace, c.checkpoint.0);
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
            durable_end: true,
        }
    }

    /// `flush_acknowledged` stamps the durable end (one write and sync for what is
    /// flushed, none when a stamp already covers the position); the stamp survives a
    /// reopen; a new log removes it; a failed sync of the stamp latches the log.
    #[test]
    fn acknowledged_flushes_stamp_the_durable_end() {
        use crate::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs};
        let fault = FaultVfs::new(Arc::new(MemVfs::new()));
        let vfs: Arc<dyn Vfs> = Arc::new(fault.clone());
        let open = |end: Lsn, life: u32| {
            Wal::open(vfs.clone(), Path::new("/db"), options(1), end, Lsn(0), life).unwrap()
        };
        let record = |wal: &Wal| {
            wal.insert(RecordBuilder::new(RecordKind::Checkpoint, 0, 0, 0))
                .unwrap()
                .1
        };
        let wal = open(Lsn(0), 0);
        let a = record(&wal);
        wal.flush(a).unwrap();
        assert_eq!(
            wal.stats().durable_end_syncs,
            0,
            "a plain flush stamps nothing"
        );
        assert!(wal.acknowledged_end() < a);
        wal.flush_acknowledged(a).unwrap();
        assert_eq!(wal.stats().durable_end_syncs, 1);
        assert!(wal.acknowledged_end() >= a);
        wal.flush_acknowledged(a).unwrap();
        assert_eq!(wal.stats().durable_end_syncs, 1, "covered already");
        let b = record(&wal);
        wal.flush_acknowledged(b).unwrap();
        assert_eq!(wal.stats().durable_end_syncs, 2);
        let flushed = wal.flushed();
        drop(wal);
        let dir = Path::new("/db/wal");
        assert_eq!(durable_end::read(&*vfs, dir).unwrap().0, Some(flushed));
        // A later life continues the sequence: its stamp wins over the older slot.
        let wal = open(flushed, 1);
        let c = record(&wal);
        fault.add_rule(FaultRule::nth(
            "durable_end",
            FaultOp::Fsync,
            1,
            FaultKind::Eio,
        ));
        let err = wal.flush_acknowledged(c).unwrap_err();
        assert!(err.to_string().contains("durable_end"), "{err}");
        assert!(wal.is_failed(), "a failed stamp latches the log");
        drop(wal);
        fault.clear_rules();
        let wal = open(flushed, 2);
        let d = record(&wal);
        wal.flush_acknowledged(d).unwrap();
        assert!(durable_end::read(&*vfs, dir).unwrap().0.unwrap() >= d);
        drop(wal);
        // A new log (position 0) does not inherit it.
        drop(open(Lsn(0), 0));
        assert_eq!(durable_end::read(&*vfs, dir).unwrap().0, None);
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

    /// Proves: `write_bytes` counts each byte written to the segments once (a flush
    /// writes from where the last one ended) and `pad_bytes` the padding that ends each
    /// flush on a block: records plus padding are what was written. How: three commits,
    /// each flushed alone (each padded), then a flush with nothing new (nothing written).
    #[test]
    fn write_bytes_are_the_records_and_the_padding_each_written_once() {
        let vfs = MemVfs::new();
        let wal = Wal::open(
            Arc::new(vfs.clone()),
            Path::new("/db"),
            options(1),
            Lsn(0),
            Lsn(0),
            1,
        )
        .unwrap();
        let mut end = Lsn(0);
        for xid in 1..=3 {
            (_, end) = wal
                .insert(RecordBuilder::new(RecordKind::Noop, xid, FLAG_COMMIT, 0))
                .unwrap();
            wal.flush(end).unwrap();
        }
        let s = wal.stats();
        assert!(s.pad_bytes > 0 && s.pad_bytes % 8 == 0, "{s:?}");
        assert_eq!(s.write_bytes, s.bytes + s.pad_bytes, "{s:?}");
        assert_eq!(s.write_bytes % WAL_BLOCK, 0, "every flush ends on a block");
        assert_eq!(
            s.write_bytes,
            wal.flushed().0,
            "written from the start, once"
        );
        wal.flush(end).unwrap();
        assert_eq!(wal.stats().write_bytes, s.write_bytes);
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
/// `RUSTFLAGS="--cfg shuttle" cargo test -p pgbufpool --target-dir target/shuttle --lib wal::model`.
#[cfg(all(test, shuttle))]
mod model {
    use super::*;
    use crate::vfs::MemVfs;

    /// A log on MemVfs for the models: small segments and ring, `places` sync places,
    /// the durable end stamped or not.
    fn model_log(places: usize, durable_end: bool) -> Arc<Wal> {
        let options = WalOptions {
            segment_size: 64 << 10,
            buffers: 64 << 10,
            sync_method: SyncMethod::Fdatasync,
            recycle_segments: 1,
            prepare_segments: 1,
            commit_delay_us: 0,
            commit_siblings: 5,
            writer_flush_after: 0,
            syncs_in_flight: places,
            durable_end,
        };
        let vfs = Arc::new(MemVfs::new());
        Arc::new(Wal::open(vfs, Path::new("/db"), options, Lsn(0), Lsn(0), 1).unwrap())
    }

    /// Proves: waking only the waiters a sync covered (plus one new leader) never loses a
    /// wakeup, and every flush returns with its record durable, with `places` leaders
    /// allowed to sync at once (1: serial; 2: overlapping syncs, published in order). How:
    /// three modeled threads each insert two commit records and flush to each end (as a
    /// committer: the durable end stamped after the flush, `wal_durable_end`),
    /// against one log on MemVfs; shuttle explores random and PCT schedules and reports
    /// any schedule in which every thread sleeps (a lost wakeup, or a leader waiting for a
    /// place or a publication that never comes) as a deadlock. After each flush, the log
    /// is durable to it (and `lead_flush` asserts, in these debug builds, that each batch
    /// is published right after the one before); at the end, flushed covers everything
    /// and every place is free.
    fn three_committers(places: usize) {
        let wal = model_log(places, true);
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
                        wal.flush_acknowledged(end).unwrap();
                        assert!(wal.flushed() >= end, "flush returned before {end}");
                        assert!(
                            wal.acknowledged_end() >= end,
                            "acknowledged before the durable end was stamped past {end}"
                        );
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

    /// Proves: a leader with nothing of its own to write (its record went out in the
    /// batch before, still syncing) waits for that batch and publishes nothing, so a later
    /// leader's batch can be published first without breaking the order. How: the first
    /// batch is led by hand (the write role, the write, a sync place; published by hand
    /// later), two modeled threads flush records it wrote and did not write, and shuttle
    /// explores every order of their wakeups after the publication. Before the fix the
    /// empty leader held a sync place and, woken after the later batch was published,
    /// failed `lead_flush`'s "batches are published in write order" (debug builds), as a
    /// 16-thread run with `wal_syncs_in_flight` 2 did.
    fn empty_batch_beside_a_later_one() {
        let wal = model_log(2, false);
        let record = |t| RecordBuilder::new(RecordKind::Noop, t, FLAG_COMMIT, 0);
        let (_, end_a) = wal.insert(record(0)).unwrap();
        let (_, end_b) = wal.insert(record(1)).unwrap();
        // The first batch, led by hand: it writes both records and holds a sync place.
        wal.queue.lock().writing = true;
        let first = wal.pad_insertions();
        wal.write_out(first).unwrap();
        wal.syncs.lock().in_flight += 1;
        wal.release_write_role(first);
        assert!(first >= end_b.0 && end_a.0 <= first);
        let w = wal.clone();
        let b = shuttle::thread::spawn(move || {
            w.flush(end_b).unwrap();
            assert!(w.flushed() >= end_b);
        });
        let (_, end_c) = wal.insert(record(2)).unwrap();
        let w = wal.clone();
        let c = shuttle::thread::spawn(move || {
            w.flush(end_c).unwrap();
            assert!(w.flushed() >= end_c);
        });
        shuttle::thread::yield_now();
        // The first batch's sync ends: published, its place given back, its waiters woken.
        {
            let mut pipe = wal.syncs.lock();
            wal.progress.flushed.store(first, Ordering::Release);
            pipe.in_flight -= 1;
        }
        wal.syncs_cv.notify_all();
        {
            let mut q = wal.queue.lock();
            q.wake_covered(first);
            if !q.writing {
                q.wake_one_beyond(first);
            }
        }
        b.join().unwrap();
        c.join().unwrap();
        assert!(wal.flushed() >= wal.insert_position());
        assert_eq!(wal.syncs.lock().in_flight, 0);
        wal.check_invariants().unwrap();
    }

    #[test]
    fn a_leader_with_nothing_to_write_keeps_the_publication_order() {
        shuttle::check_random(empty_batch_beside_a_later_one, 5000);
        shuttle::check_pct(empty_batch_beside_a_later_one, 5000, 3);
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
