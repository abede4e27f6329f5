//! The engine: a data directory opened with its storage, buffer pool and write-ahead log
//! wired together, crash recovery on open, page logging, commits and checkpoints.
//!
//! Owns: the [`BufferPool`], the [`Wal`], the WAL-writer thread (prepares log segments ahead
//! of need; with asynchronous commit also flushes every `wal_writer_delay`), the
//! bgwriter thread (`bgwriter = on`: started after the opening checkpoint, when the WAL
//! hook is armed; stopped first by [`Engine::shutdown`] and by dropping the engine) and
//! the checkpoint lock. Sits above `buffer` and `wal`, so neither imports the other: the
//! pool reaches the log only through its `WalFlush` hook, implemented here.
//!
//! Opening: smgr (directory lock) → pool with an inert WAL hook → recovery (replay from
//! the control file's redo point; see `recovery.rs`) → log opened at the end of valid log
//! → an EndOfRecovery record naming where the old log ended, flushed → hook armed → an
//! end-of-recovery checkpoint. A directory without a control file and without log
//! segments is new: it gets its first checkpoint.
//!
//! Logging a change: the caller changes pages under exclusive guards, then calls
//! [`Engine::log_pages`] with the byte ranges the change wrote (as its page mutators
//! declared them: `crate::page_delta`) while still holding the guards; the
//! record gets a full-page image of each page whose LSN is at or before the redo point
//! (first change after a checkpoint; `full_page_writes`), and every page's LSN is set to
//! the record's end before the guards are released. [`Engine::commit`] then waits for
//! durability (`synchronous_commit = on`) or returns at once (`off`: the WAL writer
//! flushes every `wal_writer_delay`; a crash may lose the commits of the last few delays).
//!
//! Checkpoints: `checkpointer.rs` (the thread, its triggers and pacing, the steps of a
//! checkpoint, the log line and counters) over `buffer/checkpoint.rs` (the write phase).
//! The checkpointer thread is started after the opening checkpoint and stopped (a spread
//! checkpoint in progress finishing at full speed) before the bgwriter at shutdown.
//! Locks: the checkpoint mutex (one checkpoint at a time), then the pool's and the log's own.

mod builder;
mod checkpointer;
mod handle;
pub mod prewarm;
pub mod recovery;
mod transaction;
mod waldir;

pub use builder::EngineBuilder;
pub use checkpointer::{
    CheckpointReason, CheckpointSummary, CheckpointerOptions, CheckpointerStats,
};
pub use handle::EngineRef;
pub use recovery::RecoveryReport;
pub use transaction::Transaction;
pub use waldir::{create_wal_directory, wal_directory};

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::buffer::PoolConfig;
use crate::buffer::{
    BgwriterHandle, BgwriterStats, BufferError, BufferPool, PageWriteGuard, PoolResize, WalFlush,
    WalFlushError, RESIZE_PIN_WAIT,
};
use crate::config::{Config, ConfigError};
use crate::page;
use crate::page_delta::{PageDelta, Shift};
use crate::scan::{ReadStreamOptions, ScanOptions, ScanPositions};
use crate::smgr::{Smgr, SmgrError};
use crate::sync::{Arc, Mutex};
use crate::txn::{
    Clog, ClogError, Member, MultiId, MultiPositions, MultiXact, Subtrans, TxnManager, Xid,
    FIRST_NORMAL_XID,
};
use crate::types::{Lsn, RelFileId};
use crate::vfs::{IoError, Vfs};
use crate::wal::{
    control, ControlError, RecordBuilder, RecordKind, Wal, WalError, WalWriterWake, FLAG_ABORT,
    FLAG_COMMIT,
};

/// What opening, recovering, committing or checkpointing an engine can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The buffer pool failed (a read, a write, no free buffer).
    #[error(transparent)]
    Buffer(#[from] BufferError),
    /// The storage manager failed (a relation file, the data directory).
    #[error(transparent)]
    Storage(#[from] SmgrError),
    /// The write-ahead log failed (an append, a flush, a segment).
    #[error(transparent)]
    Wal(#[from] WalError),
    /// The control file is unreadable, corrupt or could not be written.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// A knob is out of range or knobs contradict each other.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The commit log (or another SLRU of transaction state) failed.
    #[error(transparent)]
    Clog(#[from] ClogError),
    /// A file operation outside the layers above failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A checkpoint the checkpointer thread ran for a request failed: its error, shared
    /// with every requester that waited for it (the errno survives, see
    /// [`EngineError::raw_os_error`]).
    #[error("checkpoint failed: {0}")]
    Checkpoint(std::sync::Arc<EngineError>),
    /// The checkpointer thread stopped (shutdown) before a requested checkpoint ran.
    #[error("the checkpointer stopped before the requested checkpoint ran")]
    CheckpointerStopped,
    /// A shutdown of a shared engine while other handles still hold it.
    #[error("shutdown: {others} other handles still share the engine; drop them first")]
    StillShared {
        /// Handles other than the one shutting down (`Arc` strong count minus one).
        others: usize,
    },
    /// A savepoint that is not open in the transaction named.
    #[error("savepoint {id} is not open in transaction {xid} (released, rolled back past, or another transaction's)")]
    NoSavepoint {
        /// The transaction asked.
        xid: Xid,
        /// The savepoint id asked for.
        id: u32,
    },
    /// A log record that fails its checks before the log's known end: refused rather than
    /// read as the end of the log.
    #[error("the WAL is corrupt at {lsn} ({path}, offset {offset}): {reason}; refusing to open, since replaying only up to here would silently drop acknowledged commits")]
    Corrupt {
        /// The segment file holding the bad record.
        path: PathBuf,
        /// The record's offset in that file, in bytes.
        offset: u64,
        /// The record's LSN.
        lsn: Lsn,
        /// What check failed.
        reason: String,
    },
    /// The log segment the control file's checkpoint record is in is not there (removed,
    /// or an empty directory or device where the log was): nothing to replay from.
    #[error("the WAL segment {path} holding the checkpoint record at {lsn} is missing (removed, or an empty directory or device where the log was); refusing to open, since a new log would lose every commit in the missing one")]
    WalMissing {
        /// Where the segment should be.
        path: PathBuf,
        /// The checkpoint record's LSN.
        lsn: Lsn,
    },
    /// A WAL directory that cannot be made or is not there: the path and the reason.
    #[error("WAL directory {path}: {problem}")]
    WalDirectory {
        /// The WAL directory.
        path: PathBuf,
        /// Why it cannot be used.
        problem: String,
    },
    /// A saved autoprewarm block list that fails its checks: not used.
    #[error("autoprewarm block list {path} is corrupt ({problem}); not used")]
    PrewarmCorrupt {
        /// The block list file.
        path: PathBuf,
        /// The check it failed.
        problem: String,
    },
}

impl EngineError {
    /// The OS error number behind this error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            EngineError::Buffer(e) => e.raw_os_error(),
            EngineError::Storage(e) => e.raw_os_error(),
            EngineError::Wal(e) => e.raw_os_error(),
            EngineError::Io(e) => e.raw_os_error(),
            EngineError::Clog(e) => e.raw_os_error(),
            EngineError::Checkpoint(e) => e.raw_os_error(),
            _ => None,
        }
    }

    pub(crate) fn io(op: &'static str, path: &Path, source: std::io::Error) -> Self {
        EngineError::Io(IoError::new(op, path, source))
    }
}

/// A test hook (see [`Engine::set_test_hook`]): the engine where the engine itself passes
/// the point (`None` at the points inside the log, the SLRUs and the checkpointer, which
/// do not hold it), and the point's argument (see [`HookPoint`]).
#[cfg(any(test, feature = "testing"))]
pub type TestHook = HookFn;
type HookFn = Box<dyn Fn(Option<&Engine>, u64) + Send + Sync>;

#[cfg(any(test, feature = "testing"))]
pub use crate::hooks::HookPoint;
#[cfg(not(any(test, feature = "testing")))]
pub(crate) use crate::hooks::HookPoint;
use crate::hooks::HOOK_POINTS;

/// The hooks set by [`HookPoint`], shared with the forwarders the engine installs in the
/// log, the SLRUs and the checkpointer; `any` keeps the check off the hot path.
#[derive(Default)]
struct Hooks {
    table: Mutex<[Option<Arc<HookFn>>; HOOK_POINTS]>,
    any: std::sync::atomic::AtomicBool,
}

impl Hooks {
    fn run(&self, e: Option<&Engine>, point: HookPoint, arg: u64) {
        if self.any.load(std::sync::atomic::Ordering::Acquire) {
            // Called without the lock: a hook may pass another hook point.
            let hook = self.table.lock()[point as usize].clone();
            if let Some(h) = hook {
                h(e, arg);
            }
        }
    }
}

/// A structure check of a relation, run by [`Engine::verify`]: `Err` is the check's own
/// error (a B-tree's is an [`crate::index::IndexError`]), kept typed so a caller can
/// downcast it; `verify` reports its message under the check's name.
pub type Verifier = std::sync::Arc<dyn Fn(&Engine) -> Result<(), VerifyError> + Send + Sync>;

/// What a [`Verifier`] found wrong: the check's own error, boxed.
pub type VerifyError = Box<dyn std::error::Error + Send + Sync>;

/// The pool's WAL-before-data hook: inert during recovery (the log being replayed is
/// already durable), the real log afterwards.
#[derive(Default)]
struct WalHook {
    wal: OnceLock<Arc<Wal>>,
    /// The log positions recovery found lost (`RecoveryReport::lost_until`): from the end
    /// of the log to the end of the records after it that nothing vouched for.
    lost: OnceLock<(Lsn, Lsn)>,
}

impl WalFlush for WalHook {
    fn flush(&self, lsn: Lsn) -> Result<(), WalFlushError> {
        match self.wal.get() {
            Some(w) => w.flush_for_page(lsn).map_err(|e| e.into()),
            None => Ok(()),
        }
    }

    /// The log's durable end is below `lsn`; never during recovery (inert hook).
    fn flush_needed(&self, lsn: Lsn) -> bool {
        self.wal.get().is_some_and(|w| w.flushed() < lsn)
    }

    /// The log's insert position; none during recovery (inert hook), when pages on disk
    /// may be ahead of the record being replayed.
    fn end_of_log(&self) -> Option<Lsn> {
        self.wal.get().map(|w| w.insert_position())
    }

    fn lost_range(&self) -> Option<(Lsn, Lsn)> {
        self.lost.get().copied()
    }
}

/// The WAL writer thread: prepares log segments ahead of the flush leader
/// ([`Wal::prepare_ahead`], woken at every segment switch), flushes the log whenever
/// inserts have left `wal_writer_flush_after` of it unwritten (woken by the insert) and,
/// with `synchronous_commit = off`, every `wal_writer_delay`. It runs with
/// either setting: segment preparation must stay off the commit path in both. One thread
/// for both jobs, not a dedicated one: each is a few cheap checks per wake-up, and the
/// thread sleeps between them (PostgreSQL's walwriter likewise always runs).
struct LogWriter {
    wal: Arc<Wal>,
    thread: Option<JoinHandle<()>>,
}

impl LogWriter {
    fn start(wal: Arc<Wal>, synchronous_commit: bool, delay: Duration) -> std::io::Result<Self> {
        let w = wal.clone();
        let thread = std::thread::Builder::new()
            .name("bufpool-walwriter".into())
            .spawn(move || {
                crate::stats::set_thread_writer(crate::stats::IoWriter::WalWriter);
                // Warn once per run of failed preparations, not every delay.
                let mut warned = false;
                loop {
                    let wake = w.wait_for_wal_writer_work(delay);
                    if wake == WalWriterWake::Stop {
                        return;
                    }
                    // Every delay when commits do not flush; and whenever inserts have
                    // left wal_writer_flush_after unwritten, so the ring never fills.
                    // Without synchronous commits its flush is what makes the commits
                    // durable, so it stamps the durable end as a committer would.
                    let end = w.insert_position();
                    let flushed = match (synchronous_commit, wake == WalWriterWake::Flush) {
                        (false, _) => w.flush_acknowledged(end),
                        (true, true) => w.flush(end),
                        (true, false) => Ok(()),
                    };
                    if flushed.is_err() {
                        return; // latched: commits will report it
                    }
                    match w.prepare_ahead() {
                        Ok(_) => warned = false,
                        // Latched (a failed fsync of the WAL directory): commits report it.
                        Err(_) if w.is_failed() => return,
                        Err(e) => {
                            if !warned {
                                tracing::warn!(
                                    "preparing WAL segments ahead: {e}; the flush leader will \
                                     create them when it needs them"
                                );
                                warned = true;
                            }
                        }
                    }
                }
            })?;
        Ok(LogWriter {
            wal,
            thread: Some(thread),
        })
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        self.wal.stop_wal_writer();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An open data directory.
pub struct Engine {
    /// First fields, so that dropping the engine stops the checkpointer (finishing a
    /// checkpoint in progress at full speed) and the bgwriter before anything else.
    checkpointer: Option<checkpointer::CheckpointerHandle>,
    bgwriter: Option<BgwriterHandle>,
    /// The autoprewarm worker (`autoprewarm = on`).
    prewarm: Option<prewarm::Worker>,
    pool: Arc<BufferPool>,
    wal: Arc<Wal>,
    txns: Arc<TxnManager>,
    synchronous_commit: bool,
    /// `early_lock_release` (in effect with synchronous commit; see `commit_transaction`).
    early_lock_release: bool,
    /// The end of the newest commit record whose transaction ended before the record was
    /// durable (early lock release): while the log is not durable up to it, a hint bit
    /// may name a commit a crash would lose, and `log_hint` stamps the page past it.
    released_commits: std::sync::atomic::AtomicU64,
    /// How many times pruning freed heap roots (see `Heap::roots_freed`).
    heap_roots_freed: std::sync::atomic::AtomicU64,
    /// Row counters per relation (pg_stat_user_tables), kept by the heaps above.
    rel_stats: crate::stats::RelStats,
    full_page_writes: bool,
    /// `wal_compression = lz4`.
    wal_compression: bool,
    /// The checkpoint machinery (also the checkpointer thread's).
    ckpt: Arc<checkpointer::Checkpointer>,
    /// Structure checks of relations above this layer (B-trees register theirs), by name.
    verifiers: Mutex<std::collections::BTreeMap<String, Verifier>>,
    /// Serializes creations through the catalog ([`crate::Database`]).
    catalog_lock: Mutex<()>,
    /// Test hooks by [`HookPoint`].
    hooks: Arc<Hooks>,
    recovery: Option<RecoveryReport>,
    /// The sequential-scan knobs, and the synchronized-scan positions all scans share.
    scan: ScanOptions,
    scan_positions: ScanPositions,
    /// How scans, VACUUM and other sequential readers build their read streams.
    read_stream: ReadStreamOptions,
    writer: Option<LogWriter>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("pool", &self.pool)
            .field("wal", &self.wal)
            .finish_non_exhaustive()
    }
}

/// A page change to log: the guard of the page, its declared ranges, and a shift.
trait LoggedPage {
    fn guard(&self) -> &PageWriteGuard<'_>;
    fn set_lsn(&mut self, end: Lsn);
    fn ranges(&self) -> &[Range<usize>];
    fn shift(&self) -> Option<Shift>;
}

impl LoggedPage for (&mut PageWriteGuard<'_>, &[Range<usize>]) {
    fn guard(&self) -> &PageWriteGuard<'_> {
        self.0
    }
    fn set_lsn(&mut self, end: Lsn) {
        self.0.set_lsn(end);
    }
    fn ranges(&self) -> &[Range<usize>] {
        self.1
    }
    fn shift(&self) -> Option<Shift> {
        None
    }
}

impl LoggedPage for (&mut PageWriteGuard<'_>, &PageDelta) {
    fn guard(&self) -> &PageWriteGuard<'_> {
        self.0
    }
    fn set_lsn(&mut self, end: Lsn) {
        self.0.set_lsn(end);
    }
    fn ranges(&self) -> &[Range<usize>] {
        self.1.ranges()
    }
    fn shift(&self) -> Option<Shift> {
        self.1.shift()
    }
}

impl Engine {
    /// Opens the database in directory `path` on the real file system with the default
    /// knobs, creating it if it does not exist, recovering from a crash if needed. The
    /// one-line door; [`Engine::builder`] sets knobs, a custom file system or "open only
    /// if it exists".
    ///
    /// ```no_run
    /// let engine = bufpool::Engine::open("my-db")?;
    /// # Ok::<(), bufpool::EngineError>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Engine, EngineError> {
        Self::builder(path).open()
    }

    /// A builder for opening the database in `path`: typed knobs (every
    /// [`crate::config::ConfigBuilder`] setter), knobs by name, the file system, whether
    /// to create.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let engine = bufpool::Engine::builder("my-db")
    ///     .shared_buffers(256 << 20)
    ///     .synchronous_commit(false)
    ///     .checkpoint_timeout(Duration::from_secs(60))
    ///     .open()?;
    /// # Ok::<(), bufpool::EngineError>(())
    /// ```
    pub fn builder(path: impl AsRef<Path>) -> EngineBuilder {
        EngineBuilder {
            path: path.as_ref().to_path_buf(),
            config: Config::builder(),
            named: Vec::new(),
            vfs: None,
            create: true,
        }
    }

    /// Opens `dir` on file system `vfs` with `config` (creating it with `create`),
    /// recovering from a crash if needed: the form for a custom [`Vfs`] and a [`Config`]
    /// built elsewhere.
    pub fn open_vfs(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        config: &Config,
        create: bool,
    ) -> Result<Engine, EngineError> {
        Self::open_with_progress(vfs, dir, config, create, &mut |_| {})
    }

    /// [`Engine::open_vfs`], reporting recovery progress.
    pub fn open_with_progress(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        config: &Config,
        create: bool,
        progress: &mut dyn FnMut(&RecoveryReport),
    ) -> Result<Engine, EngineError> {
        config.validate()?;
        // A panic in any call of the embedder's file system becomes that call's error.
        let vfs = crate::vfs::fenced(vfs);
        let smgr = Smgr::open(vfs.clone(), dir, config.smgr_options(create)?)?;
        let hook = Arc::new(WalHook::default());
        let pool = Arc::new(BufferPool::new(Arc::new(smgr), config, hook.clone())?);
        let opts = config.wal_options();
        waldir::check_wal_directory(&*vfs, dir)?;
        let (has_control, has_log) = what_the_directory_holds(&*vfs, dir)?;
        let slrus = config.slru_set(pool.nbuffers());
        let clog = Clog::open_with(vfs.clone(), dir, pool.page_size(), slrus.transaction())?
            .with_group_update(config.clog_group_update);
        let multis = MultiXact::open(
            vfs.clone(),
            dir,
            pool.page_size(),
            slrus.multixact_offset(),
            slrus.multixact_member(),
            MultiPositions::default(),
        )
        .map_err(ClogError::from)?;
        // A creation that a crash interrupted before its first control file: its log holds
        // nothing anyone was told is durable, so it starts over (else the directory would
        // never open again: recovery needs the control file).
        let interrupted_creation = !has_control
            && has_log
            && recovery::holds_only_creation(
                &*vfs,
                dir,
                config.wal_segment_size,
                pool.page_size(),
            )?;
        if interrupted_creation {
            discard_the_log(&*vfs, &dir.join("wal"))?;
        }
        let (wal, recovery) = if !has_control && (!has_log || interrupted_creation) {
            (Wal::open(vfs.clone(), dir, opts, Lsn(0), Lsn(0), 0)?, None)
        } else {
            // Replay's I/O is the startup process's in pg_stat_io.
            let role = crate::stats::set_thread_writer(crate::stats::IoWriter::Startup);
            let report = recovery::run(
                &*vfs,
                dir,
                &pool,
                &clog,
                &multis,
                config.wal_segment_size,
                progress,
            );
            crate::stats::set_thread_writer(role);
            let report = report?;
            let wal = Self::open_next_life(vfs.clone(), dir, opts, &report, &hook)?;
            (wal, Some(report))
        };
        let wal = Arc::new(wal);
        let _ = hook.wal.set(wal.clone());
        // Commit-log and multixact pages go out only after the WAL behind them.
        let barrier = || -> crate::slru::WriteBarrier {
            let w = wal.clone();
            Box::new(move || Ok(w.flush_vouched()?))
        };
        clog.set_write_barrier(barrier());
        multis.set_write_barriers(barrier(), barrier());
        let writer = config
            .wal_writer
            .then(|| {
                let delay = Duration::from_millis(config.wal_writer_delay_ms);
                LogWriter::start(wal.clone(), config.synchronous_commit, delay)
                    .map_err(|e| EngineError::io("starting the WAL writer thread for", dir, e))
            })
            .transpose()?;
        pool.set_bgwriter_durable_writes(config.checkpoint_open_datasync);
        let next_xid = recovery.as_ref().map_or(FIRST_NORMAL_XID, |r| r.next_xid);
        let subtrans = Subtrans::open(
            vfs.clone(),
            dir,
            pool.page_size(),
            slrus.subtransaction(),
            next_xid,
        )
        .map_err(ClogError::from)?;
        let txns = Arc::new(TxnManager::new(clog, subtrans, multis, next_xid));
        let ckpt = Arc::new(checkpointer::Checkpointer::new(
            pool.clone(),
            wal.clone(),
            txns.clone(),
            checkpointer::CheckpointerOptions::from_config(config),
        ));
        let engine = Engine::assemble(config, pool, wal, txns, ckpt, recovery, writer);
        engine.ckpt.run(CheckpointReason::Startup, true)?;
        engine.start_threads(config, dir)
    }

    /// The engine of opened parts, before its startup checkpoint and threads.
    fn assemble(
        config: &Config,
        pool: Arc<BufferPool>,
        wal: Arc<Wal>,
        txns: Arc<TxnManager>,
        ckpt: Arc<checkpointer::Checkpointer>,
        recovery: Option<RecoveryReport>,
        writer: Option<LogWriter>,
    ) -> Engine {
        let hooks: Arc<Hooks> = Arc::default();
        let forward: crate::hooks::Forward = {
            let hooks = hooks.clone();
            Arc::new(move |point, arg| hooks.run(None, point, arg))
        };
        wal.install_probe(forward.clone());
        txns.install_probe(forward.clone());
        ckpt.probe.install(forward);
        Engine {
            checkpointer: None,
            bgwriter: None,
            prewarm: None,
            pool,
            wal,
            txns,
            synchronous_commit: config.synchronous_commit,
            early_lock_release: config.early_lock_release,
            released_commits: std::sync::atomic::AtomicU64::new(0),
            heap_roots_freed: std::sync::atomic::AtomicU64::new(0),
            rel_stats: Default::default(),
            full_page_writes: config.full_page_writes,
            wal_compression: config.wal_compression,
            ckpt,
            verifiers: Mutex::new(Default::default()),
            catalog_lock: Mutex::new(()),
            hooks,
            recovery,
            scan: config.scan_options(),
            scan_positions: ScanPositions::default(),
            read_stream: config.read_stream_options(),
            writer,
        }
    }

    /// After recovery: opens the log's next life. Its records carry the next incarnation,
    /// so records an earlier life left beyond `report.end` can never be mistaken for its
    /// own; past records of this life that nothing vouched for (`lost_until`), if any, are
    /// skipped: no new record may take a position a page on storage could already carry.
    /// Logs and flushes the end-of-recovery record.
    fn open_next_life(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        opts: crate::wal::WalOptions,
        report: &RecoveryReport,
        hook: &WalHook,
    ) -> Result<Wal, EngineError> {
        let start = report.lost_until.map_or(report.end, |l| l.max(report.end));
        if start > report.end {
            let _ = hook.lost.set((report.end, start));
        }
        let wal = Wal::open(
            vfs,
            dir,
            opts,
            start,
            report.redo,
            report.incarnation.wrapping_add(1),
        )?;
        let (_, end) = wal.insert(RecordBuilder::new(
            RecordKind::EndOfRecovery,
            0,
            0,
            report.end.0,
        ))?;
        wal.flush(end)?;
        debug_assert!(
            wal.flushed() >= end,
            "the end-of-recovery record is durable"
        );
        Ok(wal)
    }

    /// Starts the checkpointer and bgwriter threads the config asks for: after recovery
    /// and the startup checkpoint, so the pool's WAL hook is armed (WAL before data).
    fn start_threads(mut self, config: &Config, dir: &Path) -> Result<Engine, EngineError> {
        if config.checkpointer {
            self.checkpointer =
                Some(self.ckpt.start().map_err(|e| {
                    EngineError::io("starting the checkpointer thread for", dir, e)
                })?);
        }
        if config.bgwriter {
            self.bgwriter = self
                .pool
                .start_bgwriter()
                .map_err(|e| EngineError::io("starting the bgwriter thread for", dir, e))?;
        }
        if config.autoprewarm {
            let worker = prewarm::Worker::start(
                self.pool.clone(),
                self.pool.smgr().vfs().clone(),
                dir,
                Duration::from_millis(config.autoprewarm_interval_ms),
                self.read_stream,
            )
            .map_err(|e| EngineError::io("starting the autoprewarm thread for", dir, e))?;
            self.prewarm = Some(worker);
        }
        Ok(self)
    }

    /// pg_stat_io as PostgreSQL 18 has it, since open: the pool's relation I/O by backend
    /// type and context, the log's (`wal`: writes and fsyncs, `init`: new segments'
    /// zero-fill), and recovery's reads of the log as the startup row.
    pub fn stat_io(&self) -> Vec<crate::stats::StatIoRow> {
        crate::stats::stat_io_rows(
            &self.pool.stats(),
            &self.wal_io_stats(),
            self.pool.page_size() as u64,
        )
    }

    /// The log's pg_stat_io counters since open, recovery's reads included (for deltas:
    /// [`crate::stats::WalIoSnapshot::since`], with [`crate::stats::stat_io_rows`]).
    pub fn wal_io_stats(&self) -> crate::stats::WalIoSnapshot {
        let mut wal = self.wal.io_stats();
        if let Some(r) = &self.recovery {
            wal.add_reads(
                crate::stats::IoWriter::Startup,
                r.wal_reads,
                r.wal_read_bytes,
                r.wal_read_time,
            );
        }
        wal
    }

    /// The autoprewarm worker's counters (`None` with `autoprewarm = off`).
    pub fn autoprewarm_stats(&self) -> Option<prewarm::PrewarmStats> {
        self.prewarm.as_ref().map(|w| w.stats())
    }

    /// Waits up to `timeout` for autoprewarm's reload to end; its counters then (`None`
    /// with `autoprewarm = off`).
    pub fn autoprewarm_wait(&self, timeout: Duration) -> Option<prewarm::PrewarmStats> {
        self.prewarm.as_ref().map(|w| w.wait_loaded(timeout))
    }

    /// Saves the pool's block list now (pg_prewarm's autoprewarm_dump_now), whatever
    /// `autoprewarm` says; returns the blocks saved.
    pub fn autoprewarm_dump_now(&self) -> Result<u64, EngineError> {
        let smgr = self.pool.smgr();
        prewarm::dump(&self.pool, &**smgr.vfs(), smgr.dir())
    }

    /// Resizes the buffer pool to `bytes` (whole pages) while transactions run: up to
    /// `max_shared_buffers`, down to 16 buffers. Shrinking writes the dirty pages of the
    /// buffers it gives up (WAL first) and waits up to [`RESIZE_PIN_WAIT`] for each one
    /// pinned; growing takes effect at once. On a pinned buffer or a failed write the
    /// pool keeps the size it reached (`pool().nbuffers()`) and the error names the page.
    /// The memory of the buffers given up goes back to the operating system.
    pub fn resize_pool(&self, bytes: u64) -> Result<PoolResize, EngineError> {
        let n = bytes / self.pool.page_size() as u64;
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        Ok(self.pool.resize(n, RESIZE_PIN_WAIT)?)
    }

    /// The shared buffer pool.
    pub fn pool(&self) -> &BufferPool {
        &self.pool
    }

    /// The sequential-scan knobs this engine was opened with.
    pub fn scan_options(&self) -> &ScanOptions {
        &self.scan
    }

    /// The read-stream knobs (`io_method`, `io_combine_limit`, `effective_io_concurrency`)
    /// sequential readers use.
    pub fn read_stream_options(&self) -> &ReadStreamOptions {
        &self.read_stream
    }

    /// Where recent large scans of each relation are (synchronized scans).
    pub fn scan_positions(&self) -> &ScanPositions {
        &self.scan_positions
    }

    /// The pool, shared (for threads of an embedder that outlive a borrow).
    pub fn pool_arc(&self) -> &Arc<BufferPool> {
        &self.pool
    }

    /// The bgwriter's counters (`BgwriterStats`; zero rounds when `bgwriter = off`).
    pub fn bgwriter_stats(&self) -> BgwriterStats {
        self.pool.bgwriter_stats()
    }

    /// Whether the bgwriter thread runs (`bgwriter = on`).
    pub fn bgwriter_running(&self) -> bool {
        self.bgwriter.is_some()
    }

    /// Whether the WAL writer thread runs (`wal_writer = on`).
    pub fn wal_writer_running(&self) -> bool {
        self.writer.as_ref().is_some_and(|w| w.thread.is_some())
    }

    /// The write-ahead log.
    pub fn wal(&self) -> &Wal {
        &self.wal
    }

    /// What recovery did when this engine was opened (None for a new directory).
    pub fn recovery_report(&self) -> Option<&RecoveryReport> {
        self.recovery.as_ref()
    }

    /// Logs changes to pages held under exclusive guards, as one atomic record, and sets
    /// each page's LSN to the record's end. `flags` may carry `wal::FLAG_COMMIT`. Returns
    /// the record's end: pass it to [`Engine::commit`].
    pub fn log_pages(
        &self,
        xid: u32,
        flags: u8,
        pages: &mut [(&mut PageWriteGuard<'_>, &[Range<usize>])],
    ) -> Result<Lsn, EngineError> {
        self.log_changed(xid, flags, pages)
    }

    /// [`Engine::log_pages`] of changes declared as [`PageDelta`]s: their ranges, and a
    /// shift where the delta has one (bytes moved within the page, logged as three numbers
    /// instead of the moved bytes; see `page_delta`).
    pub fn log_deltas(
        &self,
        xid: u32,
        flags: u8,
        pages: &mut [(&mut PageWriteGuard<'_>, &PageDelta)],
    ) -> Result<Lsn, EngineError> {
        self.log_changed(xid, flags, pages)
    }

    fn log_changed<P: LoggedPage>(
        &self,
        xid: u32,
        flags: u8,
        pages: &mut [P],
    ) -> Result<Lsn, EngineError> {
        let fpw = self.full_page_writes;
        let lz4 = self.wal_compression;
        // The caller has already changed the pages: if the record cannot be inserted, the
        // log is latched so that no write path can put the unlogged change on disk.
        let (_, end) = self
            .wal
            .insert_with(|redo| {
                let mut b = RecordBuilder::new(RecordKind::Update, xid, flags, 0);
                for p in pages.iter() {
                    let g = p.guard();
                    let tag = g.tag();
                    if fpw && page::lsn(g) <= redo {
                        if lz4 {
                            b.image_lz4(&tag, g);
                        } else {
                            b.image(&tag, g);
                        }
                    } else if lz4 {
                        // Kilobytes of ranges (a prune's moved tuples) go compressed
                        // when that is smaller.
                        b.shifted_ranges_lz4(&tag, g, p.shift(), p.ranges());
                    } else {
                        b.shifted_ranges(&tag, g, p.shift(), p.ranges());
                    }
                }
                b
            })
            .map_err(|e| self.wal.latch_unlogged(e))?;
        for p in pages.iter_mut() {
            p.set_lsn(end);
        }
        Ok(end)
    }

    /// Makes a hint-bit-only change to the page under `g` safe to write out, without a WAL
    /// record of the hint itself (PostgreSQL's MarkBufferDirtyHint): if the page has not
    /// been logged since the last checkpoint's redo point, a full-page image is logged
    /// first (a torn write of the hinted page must be repairable, because its checksum
    /// covers the hint); with asynchronous commit, the page LSN is raised to the current
    /// insert position, so the commit record behind a committed-hint reaches disk before
    /// the page does (WAL before data). The caller has changed the bytes (marking the
    /// buffer dirty) under the exclusive lock.
    ///
    /// The decision (image or not) and the LSN it stamps come from one reading of the redo
    /// point and the insert position that no checkpoint can split
    /// ([`Wal::redo_and_position`]): the stamped LSN is never past a redo point that moved
    /// after the decision, so the first hint after any checkpoint still logs an image.
    pub fn log_hint(&self, g: &mut PageWriteGuard<'_>) -> Result<(), EngineError> {
        let (redo, pos) = self.wal.redo_and_position();
        if self.full_page_writes && page::lsn(g) <= redo {
            let whole = 0..g.len();
            self.log_pages(
                crate::txn::FROZEN_XID,
                0,
                &mut [(g, std::slice::from_ref(&whole))],
            )?;
        } else if !self.synchronous_commit || self.released_commit_pending() {
            // A hint may name a commit whose record is not durable yet (asynchronous
            // commit, or early lock release): the page goes out only after the log up to
            // the current position, past that record.
            self.run_hook(HookPoint::HintBeforeLsn);
            if page::lsn(g) < pos {
                g.set_lsn(pos);
            }
        }
        Ok(())
    }

    /// Test hook (deterministic interleaving): `hook` runs at `point` in every later call
    /// that passes it. `None` removes it.
    #[doc(hidden)]
    #[cfg(any(test, feature = "testing"))]
    pub fn set_test_hook(&self, point: HookPoint, hook: Option<TestHook>) {
        let mut table = self.hooks.table.lock();
        table[point as usize] = hook.map(Arc::new);
        let any = table.iter().any(Option::is_some);
        self.hooks
            .any
            .store(any, std::sync::atomic::Ordering::Release);
    }

    pub(crate) fn run_hook(&self, point: HookPoint) {
        self.run_hook_at(point, 0);
    }

    /// [`Self::run_hook`] with the point's argument (see [`TestHook`]).
    pub(crate) fn run_hook_at(&self, point: HookPoint, arg: u64) {
        self.hooks.run(Some(self), point, arg);
    }

    /// Makes a commit whose record ends at `end` durable (synchronous_commit = on), or
    /// leaves it to the WAL writer (off).
    pub fn commit(&self, end: Lsn) -> Result<(), EngineError> {
        if self.synchronous_commit {
            self.wal.flush_acknowledged(end)?;
        }
        Ok(())
    }

    /// The transaction manager (ids, commit log, snapshots, visibility).
    pub fn txns(&self) -> &TxnManager {
        &self.txns
    }

    /// Row counters per relation (pg_stat_user_tables: rows inserted, updated, deleted,
    /// live and dead estimates, vacuums), kept by every heap handle of this engine.
    pub fn rel_stats(&self) -> &crate::stats::RelStats {
        &self.rel_stats
    }

    /// The count of heap root frees, shared by every heap handle (see `Heap::roots_freed`).
    pub(crate) fn heap_roots_freed(&self) -> &std::sync::atomic::AtomicU64 {
        &self.heap_roots_freed
    }

    /// Starts a transaction: a handle that aborts it when dropped unless it was committed
    /// (see [`Transaction`]). It gets a transaction id at its first write; one that only
    /// reads writes nothing to the log, not even at its commit.
    pub fn begin(&self) -> Result<Transaction<'_>, EngineError> {
        Ok(Transaction::new(self))
    }

    /// Starts a transaction and returns only its id: the caller must end it with
    /// [`Engine::commit_transaction`] or [`Engine::abort_transaction`] (a forgotten one
    /// stays running and holds back pruning). Prefer [`Engine::begin`].
    pub fn begin_xid(&self) -> Result<Xid, EngineError> {
        Ok(self.txns.begin()?)
    }

    /// Commits `xid`: a commit record, made durable (synchronous_commit = on) before the
    /// outcome goes to the commit log and the transaction leaves the running set
    /// (PostgreSQL's order). Returns the commit record's end.
    ///
    /// With `early_lock_release` (the default; in effect with synchronous commit) the
    /// transaction ends as soon as its commit record is in the log, and the call then
    /// waits for the record to be durable: a transaction queued on one of its row locks
    /// runs during that flush instead of after it (TPC-B's hot branch rows). Safe because
    /// whatever acts on the outcome comes later in the log: a transaction that saw it
    /// commits with a later record, whose flush covers this one; a page whose change
    /// depends on it (pruning, freezing) carries a later LSN; a hint bit about it
    /// stamps its page past it while it is not durable (`log_hint`); commit-log pages go
    /// out after the log. What a crash in the window can take back from someone who saw
    /// it: a reader outside any transaction, a transaction that then aborts, or one that
    /// showed what it read before its own commit returned (ARCHITECTURE, "Early lock
    /// release"). If the flush fails, the call reports it (the outcome was already
    /// visible) and the log stays failed (latched) until reopened, when recovery decides.
    ///
    /// From the commit record to the commit-log update the commit holds `commit_gate`
    /// shared, so a checkpoint cannot choose a redo point past the record and flush the
    /// commit log without the outcome (replay would never set it).
    ///
    /// A transaction with savepoints commits them with it: its record lists their ids
    /// (a transaction tree record), and the commit log marks them sub-committed, then the
    /// transaction committed, then them committed ([`Clog::set_tree`]).
    pub fn commit_transaction(&self, xid: Xid) -> Result<Lsn, EngineError> {
        let subs = self.txns.tree_of_top(xid)?;
        let gate = self.ckpt.commit_gate.read();
        let (_, end) = self.wal.insert(tree_record(xid, FLAG_COMMIT, &subs))?;
        let early = self.synchronous_commit && self.early_lock_release;
        if early {
            // End the transaction now, wait for durability after. Published before the
            // outcome, so whoever sees the outcome sees this too (`log_hint`).
            self.released_commits
                .fetch_max(end.0, std::sync::atomic::Ordering::Release);
        } else {
            self.commit(end)?;
        }
        self.run_hook(HookPoint::CommitBeforeStatus);
        self.txns.end(xid, true)?;
        drop(gate);
        if early {
            self.run_hook(HookPoint::CommitBeforeFlush);
            self.wal.flush_acknowledged(end)?;
        }
        Ok(end)
    }

    /// Whether a transaction ended by early lock release may not be durable yet.
    fn released_commit_pending(&self) -> bool {
        self.early_lock_release
            && self
                .released_commits
                .load(std::sync::atomic::Ordering::Acquire)
                > self.wal.flushed().0
    }

    /// Whether a checkpoint is waiting for commits between their record and their
    /// commit-log update (for tests of that interleaving).
    #[doc(hidden)]
    pub fn checkpoint_waits_for_commits(&self) -> bool {
        self.ckpt
            .waiting_for_commits
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Aborts `xid`: an abort record (not waited for: a crash before it is durable leaves
    /// the transaction undecided, which counts as aborted), then the commit log.
    pub fn abort_transaction(&self, xid: Xid) -> Result<(), EngineError> {
        let subs = self.txns.tree_of_top(xid)?;
        self.wal.insert(tree_record(xid, FLAG_ABORT, &subs))?;
        self.txns.end(xid, false)?;
        Ok(())
    }

    /// Starts a subtransaction of running `parent` (see [`TxnManager::begin_sub`]); a
    /// [`Transaction`]'s savepoints use it.
    pub fn begin_subtransaction(&self, parent: Xid) -> Result<Xid, EngineError> {
        Ok(self.txns.begin_sub(parent)?)
    }

    /// Drops relation `rel` (every fork): a `DropRelation` record, flushed and vouched for
    /// (`Wal::flush_vouched`), then its
    /// buffers discarded and its files unlinked (`BufferPool::drop_relation`), and the
    /// structure checks registered for it forgotten. Not transactional: once it returns,
    /// the relation is gone for good; a crash before it returns leaves it in place or gone.
    /// Why logged: recovery replays the relation's records from the redo point, which
    /// recreated its files and pages after a crash (the dropped rows came back, in a
    /// relation created again under the same number too); replaying the record removes
    /// them again. The record and the unlinks happen under `commit_gate` held shared, so
    /// a checkpoint whose redo point is past the record waits until the files are gone.
    pub fn drop_relation(&self, rel: RelFileId) -> Result<(), EngineError> {
        let _gate = self.ckpt.commit_gate.read();
        self.wal.insert(RecordBuilder::new(
            RecordKind::DropRelation,
            0,
            0,
            crate::wal::record::drop_relation_extra(rel),
        ))?;
        // Durable and vouched for (a later record says so): damage to the record is then
        // refused by recovery, not read as a torn tail that would bring the files back.
        self.wal.flush_vouched()?;
        self.pool.drop_relation(rel)?;
        // Checks are registered by name, the relation last ("index 0/16385").
        let suffix = format!(" {rel}");
        self.verifiers
            .lock()
            .retain(|name, _| !name.ends_with(&suffix));
        Ok(())
    }

    /// Creates a multixact of `members` (2 or more, at most one updater) for transaction
    /// `xid`, which is about to write it into a tuple's xmax in relation `rel`: a WAL record, then the
    /// entry in the multixact SLRUs, both under `commit_gate` held shared (so a checkpoint
    /// whose redo point is past the record flushes the SLRUs with the entry in them;
    /// otherwise replay writes it). The tuple's own change is logged after this record,
    /// so replay always finds the multixact before the tuple naming it.
    pub fn create_multi(
        &self,
        xid: Xid,
        rel: RelFileId,
        members: &[Member],
    ) -> Result<MultiId, EngineError> {
        let multis = self.txns.multis();
        let _gate = self.ckpt.commit_gate.read();
        // Notes `rel`'s bound with the id (the checkpoint's cut stays below it).
        let (m, start) = multis
            .reserve(rel, members.len())
            .map_err(ClogError::from)?;
        let rec = crate::wal::record::MultiCreate {
            multi: m,
            start,
            rel,
            members: members.iter().map(|&(x, mode)| (x, mode as u8)).collect(),
        };
        self.wal.insert(RecordBuilder::multi_create(xid, &rec))?;
        multis.write(m, start, members).map_err(ClogError::from)?;
        Ok(m)
    }

    /// Rolls back the subtransactions `xids` (a savepoint's first, then those begun inside
    /// it): an abort record listing them (not waited for, as for any abort), then the
    /// commit log and the running set ([`TxnManager::end_subs`]).
    pub fn rollback_subtransactions(&self, xids: &[Xid]) -> Result<(), EngineError> {
        let Some((&first, rest)) = xids.split_first() else {
            return Ok(());
        };
        self.txns.check_subs(xids)?;
        self.wal
            .insert(RecordBuilder::xact_tree(first, FLAG_ABORT, rest))?;
        self.txns.end_subs(xids)?;
        Ok(())
    }

    /// Clean shutdown: a checkpoint, so the next open replays (almost) nothing. Dropping
    /// an engine without it is like a crash: nothing acknowledged is lost, but the next
    /// open replays the log since the last checkpoint.
    ///
    /// With the `verify` feature, runs [`Engine::verify`] first (nothing else can be using
    /// the engine: `shutdown` takes it by value) and panics on a violation.
    pub fn shutdown(mut self) -> Result<Lsn, EngineError> {
        // The block list first, while the pool still holds what the run used. Losing it
        // costs only a cold start, so a failed save does not stop the shutdown.
        if let Some(w) = self.prewarm.take() {
            if let Err(e) = w.stop() {
                tracing::warn!("autoprewarm: saving the block list at shutdown: {e}");
            }
        }
        // Stop the bgwriter first (it ends its round at the next buffer), so the final
        // checkpoint is the last writer.
        if let Some(b) = self.bgwriter.take() {
            b.stop();
        }
        // A spread checkpoint in progress finishes at full speed, then the thread ends.
        if let Some(c) = self.checkpointer.take() {
            c.stop();
        }
        #[cfg(feature = "verify")]
        if let Err(problems) = self.verify() {
            panic!("verify: at shutdown: {problems}");
        }
        Ok(self
            .ckpt
            .run(CheckpointReason::Shutdown, true)?
            .expect("a shutdown checkpoint is never skipped"))
    }

    /// Registers a structure check under `name` (a later registration of the same name
    /// replaces it). [`Engine::verify`] runs every registered check; it must only be run
    /// while no thread writes the relation it checks.
    pub fn register_verifier(&self, name: String, check: Verifier) {
        self.verifiers.lock().insert(name, check);
    }

    /// Runs every invariant check: the pool's and the log's (safe under concurrency) and
    /// each registered relation check (B-trees: `BTree::check`), which needs writers kept
    /// away. Returns every violation found.
    pub fn verify(&self) -> Result<(), crate::invariants::Violations> {
        let mut problems = crate::invariants::Violations::default();
        problems.merge(self.pool.check_consistency());
        problems.merge(self.wal.check_invariants());
        // Run outside the registry's lock: a check may open (and so re-register) its
        // relation.
        let checks: Vec<(String, Verifier)> = self
            .verifiers
            .lock()
            .iter()
            .map(|(n, c)| (n.clone(), c.clone()))
            .collect();
        for (name, check) in checks {
            if let Err(p) = check(self) {
                problems.0.push(format!("{name}: {p}"));
            }
        }
        problems.into_result()
    }

    /// The lock [`crate::Database`] holds across one creation through the catalog.
    pub(crate) fn catalog_lock(&self) -> crate::sync::MutexGuard<'_, ()> {
        self.catalog_lock.lock()
    }

    /// An immediate checkpoint, in the calling thread: every change before its redo point
    /// is in the data files, durably. A spread checkpoint in progress first finishes at
    /// full speed. Returns the checkpoint record's LSN.
    pub fn checkpoint(&self) -> Result<Lsn, EngineError> {
        Ok(self
            .ckpt
            .run(CheckpointReason::Requested, true)?
            .expect("a requested checkpoint is never skipped"))
    }

    /// Asks the checkpointer thread for a checkpoint (spread unless `immediate`); with
    /// `wait`, returns when one that started after the request has finished. Without the
    /// thread (`checkpointer = off`) runs it in the calling thread.
    pub fn request_checkpoint(&self, immediate: bool, wait: bool) -> Result<(), EngineError> {
        if self.checkpointer.is_none() {
            self.ckpt.run(CheckpointReason::Requested, immediate)?;
            return Ok(());
        }
        self.ckpt.request(immediate, wait)
    }

    /// Whether the checkpointer thread runs (`checkpointer = on`).
    pub fn checkpointer_running(&self) -> bool {
        self.checkpointer.is_some()
    }

    /// pg_stat_checkpointer's counters.
    pub fn checkpointer_stats(&self) -> CheckpointerStats {
        self.ckpt.stats()
    }

    /// Every finished checkpoint (up to the last 10,000), oldest first.
    pub fn checkpoint_history(&self) -> Vec<CheckpointSummary> {
        self.ckpt.history()
    }

    /// The error of the checkpointer thread's last checkpoint, if it failed.
    pub fn checkpointer_error(&self) -> Option<String> {
        self.ckpt.last_error().map(|e| e.to_string())
    }
}

/// The record ending transaction `xid` (`flags`: FLAG_COMMIT or FLAG_ABORT): a bare no-op
/// record without subtransactions (the common case: no list to read at replay), a
/// transaction tree record with them.
fn tree_record(xid: Xid, flags: u8, subs: &[Xid]) -> RecordBuilder {
    if subs.is_empty() {
        RecordBuilder::new(RecordKind::Noop, xid, flags, 0)
    } else {
        RecordBuilder::xact_tree(xid, flags, subs)
    }
}

/// Whether `dir` holds a control file, and a log (a `wal/` folder with a segment in it).
fn what_the_directory_holds(vfs: &dyn Vfs, dir: &Path) -> Result<(bool, bool), EngineError> {
    let control_path = dir.join(control::CONTROL_FILE);
    let has_control = vfs
        .exists(&control_path)
        .map_err(|e| EngineError::io("checking", &control_path, e))?;
    let wal_dir = dir.join("wal");
    let has_log = vfs
        .exists(&wal_dir)
        .map_err(|e| EngineError::io("checking", &wal_dir, e))?
        && vfs
            .list_dir(&wal_dir)
            .map_err(|e| EngineError::io("listing", &wal_dir, e))?
            .iter()
            .any(|n| n.len() == 16);
    Ok((has_control, has_log))
}

/// Removes every segment of the log in `wal_dir`, durably (a creation that a crash
/// interrupted before its first control file starts over).
fn discard_the_log(vfs: &dyn Vfs, wal_dir: &Path) -> Result<(), EngineError> {
    for name in vfs
        .list_dir(wal_dir)
        .map_err(|e| EngineError::io("listing", wal_dir, e))?
        .into_iter()
        .filter(|n| n.len() == 16)
    {
        let path = wal_dir.join(name);
        vfs.unlink(&path)
            .map_err(|e| EngineError::io("removing", &path, e))?;
    }
    vfs.sync_dir(wal_dir)
        .map_err(|e| EngineError::io("fsync of directory", wal_dir, e))
}
