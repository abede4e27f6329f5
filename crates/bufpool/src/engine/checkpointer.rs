//! The checkpointer: the thread that takes checkpoints by time, by WAL volume and on
//! request, spreads their writes, and logs what each did (PostgreSQL's checkpointer.c).
//!
//! Owns: everything a checkpoint needs besides the pool and the log themselves: the
//! checkpoint lock (one checkpoint at a time), the commit gate, the request state, the
//! counters (pg_stat_checkpointer) and the history of finished checkpoints.
//!
//! A checkpoint, in order (`Checkpointer::run`):
//! 1. Take the checkpoint lock. A caller that wants speed (a request marked immediate,
//!    shutdown) registers as hurrying first, so a spread checkpoint in progress stops
//!    sleeping and finishes at full speed.
//! 2. Redo point: the insert position, taken with every insertion slot held; then wait
//!    for commits between their record and their commit-log update (the commit gate).
//! 3. Flush the WAL once, so the write phase does not force a WAL flush per page.
//! 4. Write phase: `BufferPool::checkpoint_write` (mark, sort, balance, combine, hint),
//!    paced by [`Pacer`]: it sleeps while progress × `checkpoint_completion_target` is
//!    ahead of both the elapsed fraction of `checkpoint_timeout` and the WAL written since
//!    the redo point as a fraction of the WAL trigger distance.
//! 5. Sync phase: fsync every segment in the request queue; after each fsync of a spread
//!    checkpoint still inside its interval, pause as long as that fsync took (at most 1 s),
//!    so foreground I/O gets at least half the device while the fsyncs drain.
//! 6. Commit log flushed (after the WAL behind it), checkpoint record, control file,
//!    released WAL segments recycled or removed; a log line and the counters.
//!
//! Requests: time (`checkpoint_timeout` after the last start), WAL volume (the distance
//! since the last redo point reaches `max_wal_size / (1 + completion_target)`, PostgreSQL's
//! CheckPointSegments), or [`Checkpointer::request`]. A failed checkpoint (a write or fsync
//! error) leaves the control file at the previous checkpoint, so recovery replays from
//! there and keeps the WAL it needs; a failed fsync is latched by the storage manager, so
//! every later checkpoint fails too until the directory is reopened (PostgreSQL's PANIC).
//!
//! Locks, in order: `lock` (the checkpoint) → `commit_gate` (briefly, exclusive) → the
//! pool's and the log's own. `requests` is taken alone, never across a checkpoint.

use std::fmt;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::EngineError;
use crate::buffer::{BufferPool, CheckpointPacer, CheckpointWriteOptions};
use crate::stats::{set_thread_writer, IoWriter};
use crate::sync::{Arc, AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering, RwLock};
use crate::txn::{ClogError, TxnManager};
use crate::types::Lsn;
use crate::wal::{Control, RecordBuilder, RecordKind, Wal};

/// Longest single pacing sleep, so a hurry request is noticed quickly.
const PACE_SLEEP_MAX: Duration = Duration::from_millis(100);
/// How often the idle thread looks at the WAL volume.
const WAL_POLL: Duration = Duration::from_millis(100);
/// Longest pause after one fsync of a spread checkpoint.
const SYNC_PAUSE_MAX: Duration = Duration::from_secs(1);
/// Finished checkpoints kept in the history.
const HISTORY_MAX: usize = 10_000;

/// Why a checkpoint ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointReason {
    /// Opening the directory (new, or after recovery: PostgreSQL's end-of-recovery).
    Startup,
    /// `checkpoint_timeout` passed.
    Timed,
    /// `max_wal_size` worth of WAL since the last redo point.
    Wal,
    /// Asked for through the API or `bufpool checkpoint`.
    Requested,
    /// [`super::Engine::shutdown`].
    Shutdown,
}

impl CheckpointReason {
    /// PostgreSQL's word for it in the log line.
    pub fn name(self) -> &'static str {
        match self {
            CheckpointReason::Startup => "startup",
            CheckpointReason::Timed => "time",
            CheckpointReason::Wal => "wal",
            CheckpointReason::Requested => "force",
            CheckpointReason::Shutdown => "shutdown",
        }
    }
}

/// The checkpointer's settings (from the knob table).
#[derive(Debug, Clone, Copy)]
pub struct CheckpointerOptions {
    /// Time between automatic checkpoints (`checkpoint_timeout`).
    pub timeout: Duration,
    /// Fraction of the interval a checkpoint's writes are spread over
    /// (`checkpoint_completion_target`).
    pub completion_target: f64,
    /// WAL bytes since the last redo point that trigger a checkpoint.
    pub max_wal_size: u64,
    /// How the checkpoint writes its pages.
    pub write: CheckpointWriteOptions,
    /// Log a line when a checkpoint starts and when it completes (`log_checkpoints`).
    pub log: bool,
}

impl CheckpointerOptions {
    /// The checkpointer's knobs.
    pub fn from_config(c: &crate::config::Config) -> Self {
        CheckpointerOptions {
            timeout: Duration::from_millis(c.checkpoint_timeout_ms),
            completion_target: c.checkpoint_completion_target(),
            max_wal_size: c.max_wal_size,
            write: c.checkpoint_write_options(),
            log: c.log_checkpoints,
        }
    }

    /// PostgreSQL's trigger distance: max_wal_size / (1 + completion_target).
    pub fn wal_trigger(&self) -> u64 {
        (self.max_wal_size as f64 / (1.0 + self.completion_target)) as u64
    }
}

/// What one checkpoint did: PostgreSQL 17's log_checkpoints line, as numbers.
#[derive(Debug, Clone, Copy)]
pub struct CheckpointSummary {
    /// Why the checkpoint ran.
    pub reason: CheckpointReason,
    /// Whether it ran without pacing.
    pub immediate: bool,
    /// When it started.
    pub started: Instant,
    /// When it ended.
    pub ended: Instant,
    /// Buffers dirty at the start, and of those written by the checkpoint.
    pub buffers_marked: u64,
    /// Of the buffers dirty at the start, those the checkpoint wrote.
    pub buffers_written: u64,
    /// Pool size when the dirty buffers were marked, in buffers.
    pub nbuffers: u64,
    /// Write calls (a combined run is one).
    pub write_calls: u64,
    /// Writeback hint calls (merged ranges).
    pub writeback_calls: u64,
    /// Tablespaces among the dirty buffers.
    pub tablespaces: u64,
    /// WAL segment files added (created and zero-filled) while the checkpoint ran.
    pub wal_added: u64,
    /// WAL segment files removed (unlinked) while the checkpoint ran.
    pub wal_removed: u64,
    /// WAL segment files recycled (renamed from released ones) while the checkpoint ran.
    pub wal_recycled: u64,
    /// Time from the start to the end of the write phase.
    pub write_time: Duration,
    /// Time of the sync phase (fsyncs of the data files).
    pub sync_time: Duration,
    /// Data files fsynced.
    pub sync_files: usize,
    /// The longest single fsync.
    pub longest_sync: Duration,
    /// The fsyncs' total time.
    pub total_sync: Duration,
    /// WAL bytes between the previous redo point and this one, and the running estimate.
    pub distance: u64,
    /// The running estimate of the distance between redo points, in bytes.
    pub estimate: u64,
    /// The checkpoint record's LSN.
    pub lsn: Lsn,
    /// Its redo point.
    pub redo: Lsn,
}

impl CheckpointSummary {
    /// Time from the start to the end.
    pub fn total_time(&self) -> Duration {
        self.ended - self.started
    }
    /// The fsyncs' average time (zero if there were none).
    pub fn average_sync(&self) -> Duration {
        self.total_sync
            .checked_div(self.sync_files as u32)
            .unwrap_or_default()
    }
}

fn secs(d: Duration) -> String {
    format!("{}.{:03} s", d.as_secs(), d.subsec_millis())
}

fn lsn_text(l: Lsn) -> String {
    format!("{:X}/{:X}", l.0 >> 32, l.0 & 0xFFFF_FFFF)
}

impl fmt::Display for CheckpointSummary {
    /// PostgreSQL 17's "checkpoint complete" line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "checkpoint complete: wrote {} buffers ({:.1}%); {} WAL file(s) added, {} removed, \
             {} recycled; write={}, sync={}, total={}; sync files={}, longest={}, \
             average={}; distance={} kB, estimate={} kB; lsn={}, redo lsn={}",
            self.buffers_written,
            100.0 * self.buffers_written as f64 / self.nbuffers.max(1) as f64,
            self.wal_added,
            self.wal_removed,
            self.wal_recycled,
            secs(self.write_time),
            secs(self.sync_time),
            secs(self.total_time()),
            self.sync_files,
            secs(self.longest_sync),
            secs(self.average_sync()),
            self.distance / 1024,
            self.estimate / 1024,
            lsn_text(self.lsn),
            lsn_text(self.redo),
        )
    }
}

/// pg_stat_checkpointer's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckpointerStats {
    /// Checkpoints due to time (including ones skipped because nothing was logged).
    pub num_timed: u64,
    /// Checkpoints asked for (WAL volume, API, shutdown, startup).
    pub num_requested: u64,
    /// Checkpoints completed.
    pub num_done: u64,
    /// Checkpoints that failed.
    pub num_failed: u64,
    /// Time completed checkpoints spent writing, in milliseconds.
    pub write_time_ms: u64,
    /// Time completed checkpoints spent syncing, in milliseconds.
    pub sync_time_ms: u64,
    /// Buffers completed checkpoints wrote.
    pub buffers_written: u64,
    /// SLRU pages (commit log, subtransactions, multixacts) the checkpoints wrote
    /// (PostgreSQL 18's pg_stat_checkpointer.slru_written).
    pub slru_written: u64,
}

#[derive(Debug, Default)]
struct Requests {
    /// A checkpoint was asked for and has not started yet.
    pending: bool,
    immediate: bool,
    stop: bool,
    /// Checkpoints started and finished by the thread (a waiter compares them).
    started: u64,
    finished: u64,
}

/// The checkpoint machinery shared by the engine and its checkpointer thread.
pub(crate) struct Checkpointer {
    pub(super) pool: Arc<BufferPool>,
    pub(super) wal: Arc<Wal>,
    pub(super) txns: Arc<TxnManager>,
    pub(super) opts: CheckpointerOptions,
    /// One checkpoint at a time.
    lock: Mutex<()>,
    /// See `Engine::commit_transaction`.
    pub(super) commit_gate: RwLock<()>,
    /// Set while a checkpoint waits for in-flight commits.
    pub(super) waiting_for_commits: AtomicBool,
    /// Callers waiting for the lock that want the running checkpoint to finish fast.
    hurrying: AtomicUsize,
    requests: Mutex<Requests>,
    wake: Condvar,
    /// Redo point of the last completed checkpoint, and the log's end just after it.
    last_redo: AtomicU64,
    last_end: AtomicU64,
    /// PostgreSQL's CheckPointDistanceEstimate.
    estimate: AtomicU64,
    num_timed: AtomicU64,
    num_requested: AtomicU64,
    num_done: AtomicU64,
    num_failed: AtomicU64,
    write_time_us: AtomicU64,
    sync_time_us: AtomicU64,
    buffers_written: AtomicU64,
    slru_written: AtomicU64,
    history: Mutex<Vec<CheckpointSummary>>,
    last_error: Mutex<Option<Arc<EngineError>>>,
    /// Test hooks (`HookPoint::CheckpointAfterWrites`).
    pub(super) probe: crate::hooks::Probe,
}

impl Checkpointer {
    pub(super) fn new(
        pool: Arc<BufferPool>,
        wal: Arc<Wal>,
        txns: Arc<TxnManager>,
        opts: CheckpointerOptions,
    ) -> Self {
        let last_redo = wal.redo().0;
        Checkpointer {
            pool,
            wal,
            txns,
            opts,
            lock: Mutex::new(()),
            commit_gate: RwLock::new(()),
            waiting_for_commits: AtomicBool::new(false),
            hurrying: AtomicUsize::new(0),
            requests: Mutex::new(Requests::default()),
            wake: Condvar::new(),
            last_redo: AtomicU64::new(last_redo),
            last_end: AtomicU64::new(u64::MAX),
            estimate: AtomicU64::new(0),
            num_timed: AtomicU64::new(0),
            num_requested: AtomicU64::new(0),
            num_done: AtomicU64::new(0),
            num_failed: AtomicU64::new(0),
            write_time_us: AtomicU64::new(0),
            sync_time_us: AtomicU64::new(0),
            buffers_written: AtomicU64::new(0),
            slru_written: AtomicU64::new(0),
            history: Mutex::new(Vec::new()),
            last_error: Mutex::new(None),
            probe: Default::default(),
        }
    }

    /// The counters.
    pub(super) fn stats(&self) -> CheckpointerStats {
        CheckpointerStats {
            num_timed: self.num_timed.load(Ordering::Relaxed),
            num_requested: self.num_requested.load(Ordering::Relaxed),
            num_done: self.num_done.load(Ordering::Relaxed),
            num_failed: self.num_failed.load(Ordering::Relaxed),
            write_time_ms: self.write_time_us.load(Ordering::Relaxed) / 1000,
            sync_time_ms: self.sync_time_us.load(Ordering::Relaxed) / 1000,
            buffers_written: self.buffers_written.load(Ordering::Relaxed),
            slru_written: self.slru_written.load(Ordering::Relaxed),
        }
    }

    /// Finished checkpoints, oldest first.
    pub(super) fn history(&self) -> Vec<CheckpointSummary> {
        self.history.lock().clone()
    }

    /// The last failure of a checkpoint the thread ran, if any.
    pub(super) fn last_error(&self) -> Option<Arc<EngineError>> {
        self.last_error.lock().clone()
    }

    /// Takes a checkpoint now, in the calling thread. `immediate`: no pacing; also makes a
    /// spread checkpoint in progress finish at full speed before this one starts.
    pub(super) fn run(
        &self,
        reason: CheckpointReason,
        immediate: bool,
    ) -> Result<Option<Lsn>, EngineError> {
        if immediate {
            self.hurrying.fetch_add(1, Ordering::SeqCst);
        }
        let one = self.lock.lock();
        if immediate {
            self.hurrying.fetch_sub(1, Ordering::SeqCst);
        }
        match reason {
            CheckpointReason::Timed => self.num_timed.fetch_add(1, Ordering::Relaxed),
            _ => self.num_requested.fetch_add(1, Ordering::Relaxed),
        };
        // Nothing logged since the last checkpoint: a timed one has nothing to do.
        if reason == CheckpointReason::Timed
            && self.wal.insert_position().0 == self.last_end.load(Ordering::Acquire)
        {
            return Ok(None);
        }
        let previous = set_thread_writer(IoWriter::Checkpointer);
        let r = self.run_locked(reason, immediate);
        set_thread_writer(previous);
        drop(one);
        match r {
            Ok(s) => Ok(Some(s.lsn)),
            Err(e) => {
                self.num_failed.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    fn run_locked(
        &self,
        reason: CheckpointReason,
        immediate: bool,
    ) -> Result<CheckpointSummary, EngineError> {
        let started = Instant::now();
        #[cfg(feature = "verify")]
        self.verify_concurrent("checkpoint start");
        let seg_before = self.wal.segment_counts();
        let redo = self.wal.begin_checkpoint();
        if self.opts.log {
            tracing::info!(
                target: "bufpool::checkpoint",
                "checkpoint starting: {}{}",
                reason.name(),
                if immediate { " immediate" } else { "" }
            );
        }
        // Wait for the commits whose record lies before `redo` to put their outcome in the
        // commit log (any later commit's record is after `redo` and will be replayed).
        self.waiting_for_commits.store(true, Ordering::Release);
        drop(self.commit_gate.write());
        self.waiting_for_commits.store(false, Ordering::Release);
        // One WAL flush before the writes: pages changed before `redo` need no more.
        self.wal.flush(self.wal.insert_position())?;
        let pacer = Pacer {
            checkpointer: self,
            start: started,
            redo,
            immediate,
        };
        let write = self.pool.checkpoint_write(&self.opts.write, &pacer)?;
        let write_time = started.elapsed();
        let sync_start = Instant::now();
        let sync = self.pool.smgr().sync_each(&mut |took| {
            if !pacer.hurry() && started.elapsed() < self.opts.timeout {
                std::thread::sleep(took.min(SYNC_PAUSE_MAX));
            }
        })?;
        let sync_time = sync_start.elapsed();
        self.probe
            .fire(crate::hooks::HookPoint::CheckpointAfterWrites, redo.0);
        self.flush_slrus()?;
        let (lsn, end) = self.log_checkpoint(redo)?;
        let (distance, estimate) = self.release_segments(reason, redo)?;
        let seg_after = self.wal.segment_counts();
        self.last_end.store(end.0, Ordering::Release);
        let summary = CheckpointSummary {
            reason,
            immediate,
            started,
            ended: Instant::now(),
            buffers_marked: write.marked,
            buffers_written: write.written,
            nbuffers: write.nbuffers,
            write_calls: write.write_calls,
            writeback_calls: write.writeback_calls,
            tablespaces: write.tablespaces,
            wal_added: seg_after.added - seg_before.added,
            wal_removed: seg_after.removed - seg_before.removed,
            wal_recycled: seg_after.recycled - seg_before.recycled,
            write_time,
            sync_time,
            sync_files: sync.files,
            longest_sync: sync.longest,
            total_sync: sync.total,
            distance,
            estimate,
            lsn,
            redo,
        };
        self.count_done(&summary);
        #[cfg(feature = "verify")]
        self.verify_concurrent("checkpoint end");
        Ok(summary)
    }

    /// The SLRUs' part of a checkpoint. Commit-log pages go out only after the WAL behind
    /// every status in them is durable; the multixact SLRUs likewise (their creators held
    /// the gate from record to entry, so every multixact created before the redo point is
    /// in them). The subtransaction log needs no durability (no transaction survives a
    /// crash): written to keep its slots clean, and cut below the oldest running
    /// transaction (no subtransaction it could be asked about is older).
    fn flush_slrus(&self) -> Result<(), EngineError> {
        self.wal.flush(self.wal.insert_position())?;
        let mut written = self.txns.clog().flush()?;
        written += self.txns.multis().flush().map_err(ClogError::from)?;
        let subtrans = self.txns.subtrans();
        written += subtrans.flush().map_err(ClogError::from)?;
        self.slru_written
            .fetch_add(written as u64, Ordering::Relaxed);
        subtrans
            .truncate(self.txns.oldest_xmin())
            .map_err(ClogError::from)?;
        Ok(())
    }

    /// Logs the checkpoint record for `redo`, flushes it, writes the control file that
    /// points at it, then cuts the multixact SLRUs: below every relation's bound, read
    /// after every VACUUM it counts on has logged its replacements (the flush makes them
    /// durable). Returns the record's start and end.
    fn log_checkpoint(&self, redo: Lsn) -> Result<(Lsn, Lsn), EngineError> {
        let multis = self.txns.multis();
        let oldest_multi = multis.oldest_needed();
        let multi = multis.positions();
        let multi_rels = multis.rel_bounds();
        let (lsn, end) =
            self.wal
                .insert(RecordBuilder::new(RecordKind::Checkpoint, 0, 0, redo.0))?;
        self.wal.flush(end)?;
        debug_assert!(
            lsn >= redo,
            "the checkpoint record {lsn} precedes its redo {redo}"
        );
        self.wal.write_control(&Control {
            checkpoint: lsn,
            redo,
            incarnation: self.wal.incarnation(),
            next_xid: self.txns.next_xid(),
            next_multi: multi.next_multi,
            next_member: multi.next_member,
            oldest_multi: oldest_multi.max(multi.oldest_multi),
            multi_rels,
        })?;
        multis.truncate(oldest_multi).map_err(ClogError::from)?;
        Ok((lsn, end))
    }

    /// Updates the distance estimate with this cycle's distance and releases the segments
    /// before `redo`. Keeps as many released segments as the next cycle will fill
    /// (PostgreSQL's XLOGfileslop: the estimate times 1 + completion target, plus 10%),
    /// within max_wal_size; the log keeps at least its min_wal_size floor. At startup there
    /// is no estimate yet: keep every released segment within max_wal_size (they exist
    /// already, so keeping them costs no write; unlinking them would have the first cycles
    /// zero-fill new ones); the first later checkpoint trims the rest. Returns (distance,
    /// estimate).
    fn release_segments(
        &self,
        reason: CheckpointReason,
        redo: Lsn,
    ) -> Result<(u64, u64), EngineError> {
        let distance = redo
            .0
            .saturating_sub(self.last_redo.swap(redo.0, Ordering::AcqRel));
        let old = self.estimate.load(Ordering::Relaxed);
        let estimate = if distance > old {
            distance
        } else {
            (0.90 * old as f64 + 0.10 * distance as f64) as u64
        };
        self.estimate.store(estimate, Ordering::Relaxed);
        let seg = self.wal.segment_size().max(1);
        let slop = if reason == CheckpointReason::Startup {
            self.opts.max_wal_size
        } else {
            (estimate as f64 * (1.0 + self.opts.completion_target) * 1.1) as u64
        };
        let target = slop.min(self.opts.max_wal_size).div_ceil(seg);
        self.wal.set_recycle_target(target as usize);
        self.wal.remove_segments_before(redo)?;
        Ok((distance, estimate))
    }

    /// Counts a finished checkpoint, keeps its summary in the history, and logs it.
    fn count_done(&self, summary: &CheckpointSummary) {
        self.num_done.fetch_add(1, Ordering::Relaxed);
        self.write_time_us
            .fetch_add(summary.write_time.as_micros() as u64, Ordering::Relaxed);
        self.sync_time_us
            .fetch_add(summary.sync_time.as_micros() as u64, Ordering::Relaxed);
        self.buffers_written
            .fetch_add(summary.buffers_written, Ordering::Relaxed);
        {
            let mut h = self.history.lock();
            if h.len() == HISTORY_MAX {
                h.remove(0);
            }
            h.push(*summary);
        }
        if self.opts.log {
            tracing::info!(target: "bufpool::checkpoint", "{summary}");
        }
    }

    /// The checks that hold while other threads work (pool and log); panics on a
    /// violation. Run at each checkpoint with the `verify` feature.
    #[cfg(feature = "verify")]
    fn verify_concurrent(&self, at: &str) {
        let mut problems = crate::invariants::Violations::default();
        problems.merge(self.pool.check_consistency());
        problems.merge(self.wal.check_invariants());
        if let Err(problems) = problems.into_result() {
            panic!("verify: at {at}: {problems}");
        }
    }

    /// Asks the thread for a checkpoint; with `wait`, returns once one that started after
    /// the request has finished (its error is the thread's `last_error`).
    pub(super) fn request(&self, immediate: bool, wait: bool) -> Result<(), EngineError> {
        let mut r = self.requests.lock();
        r.pending = true;
        if immediate && !r.immediate {
            // Speeds up a checkpoint in progress; given back when the request is taken.
            self.hurrying.fetch_add(1, Ordering::SeqCst);
            r.immediate = true;
        }
        let target = r.started + 1;
        self.wake.notify_all();
        if !wait {
            return Ok(());
        }
        while r.finished < target && !r.stop {
            r = self.wake.wait(r);
        }
        if r.stop && r.finished < target {
            return Err(EngineError::CheckpointerStopped);
        }
        drop(r);
        match self.last_error() {
            Some(e) => Err(EngineError::Checkpoint(e)),
            None => Ok(()),
        }
    }

    /// The thread's loop: waits for the next reason to checkpoint, runs it, repeats until
    /// stopped.
    fn thread_main(&self) {
        set_thread_writer(IoWriter::Checkpointer);
        let mut last_start = Instant::now();
        loop {
            let (reason, immediate) = {
                let mut r = self.requests.lock();
                loop {
                    if r.stop {
                        return;
                    }
                    if r.pending {
                        r.pending = false;
                        let immediate = std::mem::take(&mut r.immediate);
                        if immediate {
                            // The request's hurry flag: this checkpoint is immediate anyway.
                            self.hurrying.fetch_sub(1, Ordering::SeqCst);
                        }
                        break (CheckpointReason::Requested, immediate);
                    }
                    let due = last_start + self.opts.timeout;
                    let now = Instant::now();
                    if now >= due {
                        break (CheckpointReason::Timed, false);
                    }
                    let since_redo = self
                        .wal
                        .insert_position()
                        .0
                        .saturating_sub(self.last_redo.load(Ordering::Acquire));
                    if since_redo >= self.opts.wal_trigger() {
                        break (CheckpointReason::Wal, false);
                    }
                    let (g, _) = self.wake.wait_for(r, (due - now).min(WAL_POLL));
                    r = g;
                }
            };
            last_start = Instant::now();
            self.requests.lock().started += 1;
            let result = self.run(reason, immediate);
            {
                let mut last = self.last_error.lock();
                match result {
                    Ok(_) => *last = None,
                    Err(e) => {
                        tracing::error!(target: "bufpool::checkpoint", "checkpoint failed: {e}");
                        *last = Some(Arc::new(e));
                    }
                }
            }
            let mut r = self.requests.lock();
            r.finished += 1;
            self.wake.notify_all();
        }
    }

    /// Starts the thread.
    pub(super) fn start(self: &Arc<Self>) -> std::io::Result<CheckpointerHandle> {
        let me = self.clone();
        let thread = std::thread::Builder::new()
            .name("bufpool-checkpointer".into())
            .spawn(move || me.thread_main())?;
        Ok(CheckpointerHandle {
            checkpointer: self.clone(),
            thread: Some(thread),
        })
    }

    /// Whether a checkpoint in progress should stop sleeping.
    fn hurrying(&self) -> bool {
        self.hurrying.load(Ordering::SeqCst) > 0 || self.requests.lock().stop
    }
}

/// The running checkpointer thread; dropping it finishes a checkpoint in progress at full
/// speed and stops the thread.
pub(crate) struct CheckpointerHandle {
    checkpointer: Arc<Checkpointer>,
    thread: Option<JoinHandle<()>>,
}

impl CheckpointerHandle {
    pub(super) fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        {
            let mut r = self.checkpointer.requests.lock();
            r.stop = true;
            self.checkpointer.wake.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for CheckpointerHandle {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Spreads the write phase (see the module doc).
struct Pacer<'a> {
    checkpointer: &'a Checkpointer,
    start: Instant,
    redo: Lsn,
    immediate: bool,
}

impl Pacer<'_> {
    fn hurry(&self) -> bool {
        self.immediate || self.checkpointer.hurrying()
    }
}

impl CheckpointPacer for Pacer<'_> {
    fn pace(&self, done: usize, total: usize) {
        let opts = &self.checkpointer.opts;
        if total == 0 || opts.completion_target <= 0.0 {
            return;
        }
        let progress = opts.completion_target * done as f64 / total as f64;
        let interval = opts.timeout.as_secs_f64();
        let trigger = opts.wal_trigger().max(1) as f64;
        loop {
            if self.hurry() {
                return;
            }
            let wal = self.checkpointer.wal.insert_position().0;
            let wal_fraction = wal.saturating_sub(self.redo.0) as f64 / trigger;
            let time_fraction = self.start.elapsed().as_secs_f64() / interval;
            if progress <= wal_fraction || progress <= time_fraction {
                return; // behind schedule (or on it): write on
            }
            let ahead = Duration::from_secs_f64((progress - time_fraction) * interval);
            std::thread::sleep(ahead.min(PACE_SLEEP_MAX));
        }
    }
}
