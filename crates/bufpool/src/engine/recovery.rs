//! Crash recovery: replay the log from the last checkpoint's redo point.
//!
//! Steps: (1) fsync every file of the data directory, so replay trusts only durable data;
//! (2) read the control file; (3) replay from its redo point to the end of valid log, each
//! page change applied only if the page's LSN is older than the record (so a second
//! recovery after a crash during the first gives the same result); full-page images are
//! restored without reading the (possibly torn) page from storage.
//!
//! End of log: the first position that is not a valid record. Flush padding is skipped: a
//! pad marker mid-block sends the reader to the next 4 KiB boundary (tried once). Bare
//! zeros mid-block after a record whose writer marks its padding (CRC layout 2) are log
//! that never reached the disk, a lost sector of a torn write: the log stops being valid
//! there, even if a later batch written before the crash survived past the block (it is
//! never replayed over the hole). After an older writer's record (layouts 0 and 1: bare
//! zero padding) bare zeros still mean padding. At an invalid record the
//! reader scans the rest of the log (8-byte steps) for the first valid record R after it:
//! - none: a torn or short tail, the normal end of the log;
//! - R is the EndOfRecovery record naming this position: the junk left by an earlier crash
//!   before an earlier recovery resumed; skip to R;
//! - otherwise, if R's header, or that of any valid record after R in this life of the log,
//!   says the log was durable past the bad position when it was written, the bad record
//!   was acknowledged log: corruption in the middle of the log. Recovery refuses, naming
//!   segment file, offset, LSN and reason, and never cuts acknowledged commits off
//!   silently. (Every record of one flush batch carries the durable position from before
//!   the batch, so R alone may be the bad record's batch-mate and vouch for nothing.)
//! - otherwise no record after it was acknowledged (written after the bad block but not
//!   fsynced): normal end.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::EngineError;
use crate::buffer::BufferPool;
use crate::page;
use crate::txn::{
    Clog, ClogError, Member, MemberMode, MultiPositions, MultiXact, XidStatus, FIRST_NORMAL_XID,
};
use crate::types::{ForkNumber, Lsn, RelFileId};
use crate::vfs::{FileKind, OpenOptions, Vfs};
use crate::wal::record::{self, BlockChange, Invalid, Record, RecordKind, FLAG_ABORT, FLAG_COMMIT};
use crate::wal::{control, WAL_BLOCK};

/// What recovery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The redo point replay started from (the control file's).
    pub redo: Lsn,
    /// The end of the recovered log: where replay stopped.
    pub end: Lsn,
    /// The durable end stamped before the crash (`wal_durable_end`; None: no stamp): the
    /// log was not allowed to end before it.
    pub durable_end: Option<Lsn>,
    /// Incarnation of the last record replayed (the log continues with the next one).
    pub incarnation: u32,
    /// The next transaction id: above the control file's and every id replayed.
    pub next_xid: u32,
    /// Transaction outcomes replayed into the commit log.
    pub commits: u64,
    /// Transaction aborts replayed into the commit log.
    pub aborts: u64,
    /// Multixact creations replayed into the multixact SLRUs.
    pub multis: u64,
    /// Records replayed.
    pub records: u64,
    /// Page changes applied (full-page images included).
    pub pages_applied: u64,
    /// Page changes skipped: the page's LSN was already at or past the record's end.
    pub pages_skipped: u64,
    /// Full-page images applied.
    pub images: u64,
    /// Bytes of the records replayed (their lengths before alignment).
    pub bytes: u64,
    /// Files under the data directory fsynced before replay.
    pub files_synced: u64,
    /// Whole recovery, including the fsync of the data directory.
    pub elapsed: Duration,
    /// Replay alone (reading, decoding and applying records).
    pub replay_elapsed: Duration,
    /// Why replay stopped where it did.
    pub stop: String,
    /// Where the last valid record of this life past `end` ends, when the log stopped at a
    /// bad record and such records follow it (none says the bad one was durable, so the
    /// log ends at `end`): no page on storage may carry an LSN in `end..lost_until` (it
    /// would have been written after records the log lost), and the next life of the log
    /// starts after it, so none of its records lands there.
    pub lost_until: Option<Lsn>,
    /// The newest page LSN replay found on a page it read (before applying to it), and
    /// which page: every page was written after the log was durable up to its LSN, so one
    /// past the end of the recovered log proves the log lost durable records.
    pub newest_page: Option<(Lsn, crate::types::BufferTag)>,
    /// The log read by replay: segment reads, bytes, time (pg_stat_io's startup/wal row).
    pub wal_reads: u64,
    /// Bytes of log read.
    pub wal_read_bytes: u64,
    /// Time spent reading the log.
    pub wal_read_time: Duration,
}

/// Reads log bytes by position across segment files.
struct LogReader<'a> {
    vfs: &'a dyn Vfs,
    wal_dir: PathBuf,
    seg_size: u64,
    cache: Option<(u64, Vec<u8>)>,
    /// Segment reads, bytes and time (the report's `wal_read*`).
    reads: u64,
    read_bytes: u64,
    read_time: Duration,
}

impl<'a> LogReader<'a> {
    fn new(vfs: &'a dyn Vfs, wal_dir: PathBuf, seg_size: u64) -> Self {
        LogReader {
            vfs,
            wal_dir,
            seg_size,
            cache: None,
            reads: 0,
            read_bytes: 0,
            read_time: Duration::ZERO,
        }
    }

    /// Hands the segment reads to the report (pg_stat_io's startup/wal row).
    fn report_reads(&self, report: &mut RecoveryReport) {
        report.wal_reads = self.reads;
        report.wal_read_bytes = self.read_bytes;
        report.wal_read_time = self.read_time;
    }

    fn seg_path(&self, segno: u64) -> PathBuf {
        self.wal_dir.join(format!("{segno:016X}"))
    }

    fn segment(&mut self, segno: u64) -> Result<Option<&[u8]>, EngineError> {
        if self.cache.as_ref().map(|c| c.0) != Some(segno) {
            let path = self.seg_path(segno);
            if !self
                .vfs
                .exists(&path)
                .map_err(|e| EngineError::io("checking", &path, e))?
            {
                self.cache = None;
                return Ok(None);
            }
            let f = self
                .vfs
                .open(&path, OpenOptions::read_only())
                .map_err(|e| EngineError::io("opening", &path, e))?;
            let len = f
                .len()
                .map_err(|e| EngineError::io("reading size of", &path, e))?;
            let mut buf = vec![0u8; len.min(self.seg_size) as usize];
            let started = Instant::now();
            let n = f
                .read_at(&mut buf, 0)
                .map_err(|e| EngineError::io("reading", &path, e))?;
            self.reads += 1;
            self.read_bytes += n as u64;
            self.read_time += started.elapsed();
            buf.truncate(n);
            self.cache = Some((segno, buf));
        }
        Ok(self.cache.as_ref().map(|c| c.1.as_slice()))
    }

    /// Up to `len` bytes at `pos` (fewer where the log's files end).
    fn bytes(&mut self, pos: u64, len: usize) -> Result<Vec<u8>, EngineError> {
        let mut out = Vec::with_capacity(len);
        let mut p = pos;
        while out.len() < len {
            let segno = p / self.seg_size;
            let off = (p % self.seg_size) as usize;
            let Some(seg) = self.segment(segno)? else {
                break;
            };
            if off >= seg.len() {
                break;
            }
            let k = (len - out.len()).min(seg.len() - off);
            out.extend_from_slice(&seg[off..off + k]);
            p += k as u64;
        }
        Ok(out)
    }

    fn record_at(
        &mut self,
        pos: u64,
        page_size: usize,
    ) -> Result<Result<Record, Invalid>, EngineError> {
        let head = self.bytes(pos, record::HEADER_SIZE)?;
        let len = match record::peek_len(&head) {
            Ok(len) => len,
            Err(e) => return Ok(Err(e)),
        };
        let bytes = self.bytes(pos, len)?;
        Ok(record::decode(&bytes, Lsn(pos), page_size))
    }

    /// The first valid record after `pos`, if any (scans every 8-byte position, with a
    /// cheap check of the self-LSN field before decoding).
    fn next_valid_after(
        &mut self,
        pos: u64,
        page_size: usize,
        incarnation: u32,
    ) -> Result<Option<Record>, EngineError> {
        let mut p = record::align(pos + 1);
        loop {
            let segno = p / self.seg_size;
            let base = segno * self.seg_size;
            let next_segment = base + self.seg_size;
            let candidate = {
                let Some(seg) = self.segment(segno)? else {
                    return Ok(None);
                };
                let end = base + seg.len() as u64;
                let mut q = p;
                let mut found = None;
                while q + 16 <= end {
                    let off = (q - base) as usize;
                    // A block of zeros holds no record start: skip it whole (segments
                    // prepared ahead of need are zero-filled, and this scan past the end
                    // of the log reads every one of them).
                    if off % 4096 == 0 && seg.len() >= off + 4096 {
                        let block = &seg[off..off + 4096];
                        if block.iter().all(|&b| b == 0) {
                            q += 4096;
                            continue;
                        }
                    }
                    if u64::from_le_bytes(seg[off + 8..off + 16].try_into().expect("8 bytes")) == q
                    {
                        found = Some(q);
                        break;
                    }
                    q += record::ALIGN;
                }
                found
            };
            match candidate {
                Some(q) => {
                    if let Ok(r) = self.record_at(q, page_size)? {
                        if belongs(&r, incarnation) {
                            return Ok(Some(r));
                        }
                    }
                    p = q + record::ALIGN;
                }
                None => p = next_segment,
            }
        }
    }
}

/// Whether `r` belongs to the log being read: the current incarnation, or the
/// EndOfRecovery record that starts the next one.
fn belongs(r: &Record, incarnation: u32) -> bool {
    r.incarnation == incarnation
        || (r.kind == RecordKind::EndOfRecovery && r.incarnation == incarnation.wrapping_add(1))
}

/// Why there is no record to replay at a position.
enum NoRecord {
    /// Zeros: flush padding, or never-written log.
    Zero,
    /// Anything else, in words.
    Bad(String),
}

impl NoRecord {
    fn describe(self) -> String {
        match self {
            NoRecord::Zero => "zero length (end of log)".to_string(),
            NoRecord::Bad(why) => why,
        }
    }
}

/// The record at `pos` if it is valid and belongs to this life of the log.
fn valid_at(
    reader: &mut LogReader<'_>,
    pos: u64,
    page_size: usize,
    incarnation: u32,
) -> Result<Result<Record, NoRecord>, EngineError> {
    Ok(match reader.record_at(pos, page_size)? {
        Ok(r) if belongs(&r, incarnation) => Ok(r),
        Ok(r) => Err(NoRecord::Bad(format!(
            "record of incarnation {} where {incarnation} was expected (left by an earlier life of the log)",
            r.incarnation
        ))),
        Err(Invalid::Zero) => Err(NoRecord::Zero),
        Err(why) => Err(NoRecord::Bad(why.to_string())),
    })
}

/// Walks the log record by record from a redo point, deciding where it stops being valid
/// (flush padding, lost sectors, torn tails, an earlier recovery's junk: see the module
/// doc).
struct LogWalk<'r, 'v> {
    reader: &'r mut LogReader<'v>,
    /// Where the next record should start (the end of the last one returned).
    pos: u64,
    page_size: usize,
    /// The life of the log being read (an EndOfRecovery record starts the next).
    incarnation: u32,
    /// Whether the writer of the last record returned marked its padding (None: no record
    /// returned yet).
    marks_padding: Option<bool>,
    /// Set when the walk ends at a bad record with valid ones of this life after it: where
    /// the last of them ends (see [`RecoveryReport::lost_until`]).
    lost_until: Option<u64>,
    /// The durable end stamped in `wal/durable_end` and the file (`wal_durable_end`): the
    /// log up to there was synced and commits up to there acknowledged, so it cannot end
    /// before it.
    durable_end: Option<(Lsn, PathBuf)>,
    /// The block boundary that marked padding after the last record returned reaches:
    /// a flush wrote that padding, so the durable log reaches the boundary, and a page
    /// stamped with it (a hint's "flush the log to here first", see `Engine::log_hint`)
    /// is not past the end of the log.
    padded_to: Option<u64>,
}

impl LogWalk<'_, '_> {
    /// The next record to replay, or (inner Err) why the log ends at `pos`; an error for
    /// corruption of acknowledged log.
    fn next(&mut self) -> Result<Result<Record, String>, EngineError> {
        let pos = self.pos;
        let (reader, page_size, incarnation) =
            (&mut *self.reader, self.page_size, self.incarnation);
        let found = match valid_at(reader, pos, page_size, incarnation)? {
            Ok(r) => Ok(r),
            // No record inside a block: flush padding up to the block boundary, or lost log.
            Err(NoRecord::Zero) if pos % WAL_BLOCK != 0 => {
                let marked = record::is_pad_marker(
                    &reader.bytes(pos, record::PAD_MARKER_LEN)?,
                    pos,
                    incarnation,
                );
                if marked || self.marks_padding != Some(true) {
                    // Marked padding, or an older writer's bare-zero padding (at the redo
                    // point, with no record read yet, the log up to the checkpoint record
                    // is durable: no sector of it can be lost).
                    let next = pos.div_ceil(WAL_BLOCK) * WAL_BLOCK;
                    if marked {
                        self.padded_to = Some(next);
                    }
                    valid_at(reader, next, page_size, incarnation)?.map_err(|w| (next, w))
                } else {
                    Err((
                        pos,
                        NoRecord::Bad(
                            "zeros without a pad marker after a record whose writer marks its \
                             padding (log lost before it reached the disk)"
                                .to_string(),
                        ),
                    ))
                }
            }
            Err(why) => Err((pos, why)),
        };
        let rec = match found {
            Ok(r) => r,
            Err((at, why)) => {
                let why = why.describe();
                let durable_end = self.durable_end.as_ref();
                match check_tail(reader, pos, at, page_size, incarnation, &why, durable_end)? {
                    Tail::Continue(r) => r,
                    Tail::End { lost_until } => {
                        self.lost_until = lost_until;
                        return Ok(Err(format!("end of log at {}: {why}", Lsn(pos))));
                    }
                }
            }
        };
        // Progress: each record starts at or after the end of the one before it (at most
        // past flush padding) and ends after it starts, so replay always moves forward.
        debug_assert!(
            rec.lsn.0 >= pos && rec.lsn.0 < pos.div_ceil(WAL_BLOCK) * WAL_BLOCK + WAL_BLOCK,
            "record at {} does not follow {}",
            rec.lsn,
            Lsn(pos)
        );
        debug_assert!(rec.end().0 > rec.lsn.0, "empty record at {}", rec.lsn);
        if rec.kind == RecordKind::EndOfRecovery {
            self.incarnation = rec.incarnation;
        }
        self.pos = rec.end().0;
        self.marks_padding = Some(rec.marks_padding);
        Ok(Ok(rec))
    }
}

/// Deepest nesting of directories the open's fsync walk descends below the data
/// directory. The engine's own tree is three deep (`base/<id>/<file>`); the bound keeps a
/// link arrangement or a runaway tree from making the walk recurse without end.
const SYNC_DEPTH_MAX: usize = 16;

/// fsyncs every regular file under the data directory `dir` and each directory on the
/// way (PostgreSQL's data-directory sync at startup, with its rules): each entry is looked
/// at without following a link it ends in (lstat); regular files are opened and fsynced,
/// directories walked; a symbolic link is followed only where the engine makes one (the
/// log's `wal` and a tablespace's `base/<id>`), so an editor's dangling lock link or a
/// link loop is passed by; FIFOs, sockets (a killed run's `bufpool.sock`) and devices are
/// never opened (opening a FIFO would block the open for good). A file that cannot be
/// opened (no permission, gone meanwhile) is logged and passed by, as PostgreSQL does: if
/// it held data the engine needs, reading it reports the error where it matters. A failed
/// fsync of a file or directory that was opened fails the open: its writes may be lost.
fn sync_tree(vfs: &dyn Vfs, dir: &Path, count: &mut u64) -> Result<(), EngineError> {
    sync_walk(vfs, dir, dir, 0, count)
}

fn sync_walk(
    vfs: &dyn Vfs,
    data: &Path,
    dir: &Path,
    depth: usize,
    count: &mut u64,
) -> Result<(), EngineError> {
    let names = match vfs.list_dir(dir) {
        Ok(n) => n,
        // The data directory itself must be listable; below it, a directory that
        // cannot be read is passed by like a file that cannot be opened.
        Err(e) if depth > 0 => {
            tracing::warn!("recovery: fsync walk: cannot list {}: {e}", dir.display());
            return Ok(());
        }
        Err(e) => return Err(EngineError::io("listing", dir, e)),
    };
    for name in names {
        let path = dir.join(&name);
        let kind = match vfs.file_kind(&path) {
            Ok(k) => k,
            Err(e) => {
                tracing::warn!("recovery: fsync walk: cannot stat {}: {e}", path.display());
                continue;
            }
        };
        let engine_link = (dir == data && name == super::waldir::WAL_DIR)
            || (depth == 1 && dir == data.join("base"));
        match kind {
            FileKind::Directory => {}
            FileKind::Symlink if engine_link => {}
            FileKind::Symlink | FileKind::Other => continue,
            FileKind::File => {
                if depth == 0 && name == "bufpool.lock" {
                    continue;
                }
                let f = match vfs.open(&path, OpenOptions::read_only()) {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::warn!("recovery: fsync walk: cannot open {}: {e}", path.display());
                        continue;
                    }
                };
                f.sync_all()
                    .map_err(|e| EngineError::io("fsync of", &path, e))?;
                *count += 1;
                continue;
            }
        }
        if depth + 1 > SYNC_DEPTH_MAX {
            tracing::warn!(
                "recovery: fsync walk: {} is more than {SYNC_DEPTH_MAX} directories deep; \
                 not descending",
                path.display()
            );
            continue;
        }
        sync_walk(vfs, data, &path, depth + 1, count)?;
    }
    vfs.sync_dir(dir)
        .map_err(|e| EngineError::io("fsync of directory", dir, e))?;
    Ok(())
}

/// Progress report every this many bytes of replayed log.
const PROGRESS_EVERY: u64 = 64 << 20;

/// Replays the log into `pool`. The pool's WAL hook must be inert (the log being
/// replayed is already durable).
pub(super) fn run(
    vfs: &dyn Vfs,
    dir: &Path,
    pool: &BufferPool,
    clog: &Clog,
    multis: &MultiXact,
    seg_size: u64,
    progress: &mut dyn FnMut(&RecoveryReport),
) -> Result<RecoveryReport, EngineError> {
    let start = Instant::now();
    let mut report = RecoveryReport::default();
    sync_tree(vfs, dir, &mut report.files_synced)?;
    let ctl = control::read(vfs, &dir.join(control::CONTROL_FILE))?;
    report.redo = ctl.redo;
    let page_size = pool.page_size();
    let mut reader = LogReader::new(vfs, dir.join("wal"), seg_size);
    check_checkpoint_record(vfs, dir, &mut reader, &ctl, seg_size, page_size)?;
    report.next_xid = ctl.next_xid;
    multis.restore(
        MultiPositions {
            next_multi: ctl.next_multi,
            next_member: ctl.next_member,
            oldest_multi: ctl.oldest_multi,
        },
        &ctl.multi_rels,
    );
    report.incarnation = ctl.incarnation;
    let mut next_progress = PROGRESS_EVERY;
    let replay_start = Instant::now();
    let mut known_forks = HashSet::new();
    // Transactions whose changes replay applied and whose outcome it has not seen yet.
    let mut open_xids: HashSet<u32> = HashSet::new();
    let (stamped, stamp_file) = crate::wal::durable_end::read(vfs, &dir.join("wal"))?;
    report.durable_end = stamped;
    let mut walk = LogWalk {
        reader: &mut reader,
        pos: ctl.redo.0,
        page_size,
        incarnation: ctl.incarnation,
        marks_padding: None,
        lost_until: None,
        durable_end: stamped.map(|s| (s, stamp_file)),
        padded_to: None,
    };
    loop {
        let rec = match walk.next()? {
            Ok(r) => r,
            Err(stop) => {
                report.stop = stop;
                report.lost_until = walk.lost_until.map(Lsn);
                break;
            }
        };
        apply(pool, &rec, &mut known_forks, &mut report)?;
        apply_drop(pool, &rec, &mut known_forks)?;
        apply_outcome(clog, &rec, &mut report)?;
        track_open(&mut open_xids, &rec);
        apply_multi(multis, &rec, &mut report)?;
        report.records += 1;
        report.bytes += rec.len as u64;
        report.incarnation = walk.incarnation;
        report.end = Lsn(walk.pos);
        if report.bytes >= next_progress {
            next_progress += PROGRESS_EVERY;
            report.elapsed = start.elapsed();
            progress(&report);
        }
    }
    if report.end.0 < walk.pos {
        report.end = Lsn(walk.pos);
    }
    end_of_replay(clog, &walk, &report, &open_xids)?;
    reader.report_reads(&mut report);
    debug_assert!(report.end >= ctl.redo, "replay ended before the redo point");
    report.replay_elapsed = replay_start.elapsed();
    report.elapsed = start.elapsed();
    Ok(report)
}

/// Whether the log of `dir` holds nothing but what creating the directory writes before
/// its first control file (the startup checkpoint's record, in the log's first life): a
/// creation that a crash interrupted, which nobody was ever told had finished. Any other
/// record means a real log whose control file is gone (recovery refuses that).
pub(super) fn holds_only_creation(
    vfs: &dyn Vfs,
    dir: &Path,
    seg_size: u64,
    page_size: usize,
) -> Result<bool, EngineError> {
    let mut reader = LogReader::new(vfs, dir.join("wal"), seg_size);
    let mut walk = LogWalk {
        reader: &mut reader,
        pos: 0,
        page_size,
        incarnation: 0,
        marks_padding: None,
        lost_until: None,
        durable_end: None,
        padded_to: None,
    };
    loop {
        match walk.next()? {
            Ok(r) if r.kind == RecordKind::Checkpoint => {}
            Ok(_) => return Ok(false),
            Err(_end_of_log) => return Ok(true),
        }
    }
}

/// Notes what `rec` says of its transaction: changes replayed (open) or an outcome
/// (closed, with the subtransactions it lists).
fn track_open(open_xids: &mut HashSet<u32>, rec: &Record) {
    if rec.xid < FIRST_NORMAL_XID {
        return;
    }
    if rec.flags & (FLAG_COMMIT | FLAG_ABORT) != 0 {
        open_xids.remove(&rec.xid);
        for x in &rec.subxids {
            open_xids.remove(x);
        }
    } else if rec.kind == RecordKind::Update {
        open_xids.insert(rec.xid);
    }
}

/// What recovery settles once replay has stopped: the transactions it replayed without
/// an outcome, and the pages it read that are newer than the log it has.
fn end_of_replay(
    clog: &Clog,
    walk: &LogWalk<'_, '_>,
    report: &RecoveryReport,
    open_xids: &HashSet<u32>,
) -> Result<(), EngineError> {
    // Transactions replayed without an outcome did not commit as far as the recovered log
    // knows; the commit log on storage may say otherwise (a commit record lost with a
    // corrupt tail), which would show the changes replay kept without those it lost.
    for &x in open_xids {
        clog.forget_outcome(x).map_err(EngineError::from)?;
    }
    // A page replay read carries changes of records past the end of the log: the log lost
    // records that were durable (a corrupt one in its last stretch read as its end).
    // Replay skipped its older records on it, so it would answer with them applied.
    // Marked padding right after the last record is durable log too (a flush wrote it).
    let reach = match walk.padded_to {
        Some(p) if p > report.end.0 && p - report.end.0 < WAL_BLOCK => Lsn(p),
        _ => report.end,
    };
    if let Some((lsn, tag)) = report.newest_page.filter(|&(l, _)| l > reach) {
        let at = report.end.0;
        return Err(EngineError::Corrupt {
            path: walk.reader.seg_path(at / walk.reader.seg_size),
            offset: at % walk.reader.seg_size,
            lsn: report.end,
            reason: format!(
                "{}; yet {tag} on storage has LSN {lsn}, past it: the page was written after \
                 log records that are no longer readable",
                report.stop
            ),
        });
    }
    Ok(())
}

/// The control file's checkpoint record must be there and be a checkpoint naming the
/// control file's redo point: without it the redo point cannot be trusted. Its segment
/// missing altogether is not damage but a log that is not there ([`EngineError::WalMissing`]).
fn check_checkpoint_record(
    vfs: &dyn Vfs,
    dir: &Path,
    reader: &mut LogReader<'_>,
    ctl: &control::Control,
    seg_size: u64,
    page_size: usize,
) -> Result<(), EngineError> {
    // The checkpoint record must be there: without it the redo point cannot be trusted.
    // Its segment missing altogether is not damage but a log that is not there (named
    // where it lives, through the WAL directory's link).
    let segment = reader.seg_path(ctl.checkpoint.0 / seg_size);
    if !vfs
        .exists(&segment)
        .map_err(|e| EngineError::io("checking", &segment, e))?
    {
        let path = match super::waldir::wal_directory(vfs, dir)? {
            Some(location) => location.join(segment.file_name().unwrap_or_default()),
            None => segment,
        };
        return Err(EngineError::WalMissing {
            path,
            lsn: ctl.checkpoint,
        });
    }
    let reason = match reader.record_at(ctl.checkpoint.0, page_size)? {
        Ok(r) if r.kind == RecordKind::Checkpoint && r.extra == ctl.redo.0 => return Ok(()),
        Ok(r) => format!(
            "the control file's checkpoint record is a {:?} record",
            r.kind
        ),
        Err(why) => format!("the control file's checkpoint record is unreadable: {why}"),
    };
    Err(EngineError::Corrupt {
        path: reader.seg_path(ctl.checkpoint.0 / seg_size),
        offset: ctl.checkpoint.0 % seg_size,
        lsn: ctl.checkpoint,
        reason,
    })
}

/// How the log goes on after a bad record ([`check_tail`]).
enum Tail {
    /// With this record (an earlier recovery's EndOfRecovery, past that life's junk).
    Continue(Record),
    /// It ends at the bad record; `lost_until`: where the last valid record of this life
    /// after it ends, if any (records nothing vouches for: written, maybe lost).
    End { lost_until: Option<u64> },
}

/// The log stops being valid at `at` (`end` is where the last valid record ended; the two
/// differ when padding came between). Looks at every valid record after it: the
/// EndOfRecovery record of a recovery that ended here before continues the log; one
/// saying the log was durable past `at` makes `at` corruption of acknowledged log (an
/// error); otherwise the log ends at `at`.
fn check_tail(
    reader: &mut LogReader<'_>,
    end: u64,
    at: u64,
    page_size: usize,
    incarnation: u32,
    why: &str,
    durable_end: Option<&(Lsn, PathBuf)>,
) -> Result<Tail, EngineError> {
    let mut lost_until: Option<u64> = None;
    let mut next = reader.next_valid_after(at, page_size, incarnation)?;
    // Any valid record after the bad position may vouch for it, not only the first: the
    // records of one flush batch all carry the durable position from before the batch, so
    // the first one after a bad record may be its batch-mate, which vouches for nothing,
    // while a later batch's records say the bad one was durable. Records of this life that
    // vouch for nothing may come before the EndOfRecovery record of a recovery that ended
    // here (it started the next life past them, see `RecoveryReport::lost_until`).
    while let Some(r) = next {
        if r.kind == RecordKind::EndOfRecovery
            && (r.extra == end || r.extra == at)
            && r.incarnation == incarnation.wrapping_add(1)
        {
            return Ok(Tail::Continue(r));
        }
        if r.flushed.0 > at {
            return Err(EngineError::Corrupt {
                path: reader.seg_path(at / reader.seg_size),
                offset: at % reader.seg_size,
                lsn: Lsn(at),
                reason: format!(
                    "{why}; yet a valid record at {} says the log was durable up to {}, so \
                     this record had been acknowledged",
                    r.lsn, r.flushed
                ),
            });
        }
        lost_until = Some(lost_until.unwrap_or(0).max(r.end().0));
        // Records never overlap: the next one starts after this one's last byte.
        let last_byte = r.lsn.0 + r.len.max(1) as u64 - 1;
        next = reader.next_valid_after(last_byte, page_size, incarnation)?;
    }
    // Nothing after it vouches for it (the last flush before the crash has no later
    // record): the stamped durable end tells a torn tail from damage to synced log.
    if let Some((stamped, file)) = durable_end.filter(|(s, _)| s.0 > at) {
        return Err(EngineError::Corrupt {
            path: reader.seg_path(at / reader.seg_size),
            offset: at % reader.seg_size,
            lsn: Lsn(at),
            reason: format!(
                "{why}; yet the log was synced up to {stamped} before commits were \
                 acknowledged ({}), so this record had been acknowledged",
                file.display()
            ),
        });
    }
    Ok(Tail::End { lost_until })
}

/// Replays a multixact's creation into the multixact SLRUs (idempotent: the same bytes
/// again), and raises the next positions past it.
fn apply_multi(
    multis: &MultiXact,
    rec: &Record,
    report: &mut RecoveryReport,
) -> Result<(), EngineError> {
    let Some(m) = &rec.multi else {
        return Ok(());
    };
    if m.multi < multis.positions().oldest_multi {
        return Ok(()); // truncated after this record: no tuple names it any more
    }
    let members: Vec<Member> = m
        .members
        .iter()
        .map(|&(x, mode)| (x, MemberMode::from_u8(mode).expect("checked at decode")))
        .collect();
    for &(x, _) in &members {
        report.next_xid = report.next_xid.max(x.saturating_add(1));
    }
    multis
        .write(m.multi, m.start, &members)
        .map_err(ClogError::from)?;
    multis.observe(m.multi, m.start, members.len());
    multis.note_rel(m.rel, m.multi);
    report.multis += 1;
    Ok(())
}

/// Replays a transaction's outcome into the commit log (idempotent: a second recovery
/// sets the same status again).
fn apply_outcome(
    clog: &Clog,
    rec: &Record,
    report: &mut RecoveryReport,
) -> Result<(), EngineError> {
    if rec.xid < FIRST_NORMAL_XID {
        return Ok(());
    }
    report.next_xid = report.next_xid.max(rec.xid.saturating_add(1));
    if let Some(&newest) = rec.subxids.iter().max() {
        report.next_xid = report.next_xid.max(newest.saturating_add(1));
    }
    let status = if rec.flags & FLAG_COMMIT != 0 {
        report.commits += 1;
        XidStatus::Committed
    } else if rec.flags & FLAG_ABORT != 0 {
        report.aborts += 1;
        XidStatus::Aborted
    } else {
        return Ok(());
    };
    // The page holding this id may never have been extended on disk before the crash.
    // A transaction tree record also decides the subtransactions it lists (a commit's
    // may have reached disk sub-committed: this finishes them).
    if rec.subxids.is_empty() {
        clog.set(rec.xid, status).map_err(EngineError::from)
    } else {
        clog.set_tree(rec.xid, &rec.subxids, status)
            .map_err(EngineError::from)
    }
}

/// A dropped relation: whatever the records before this one recreated (or a crash in the
/// middle of the drop left) is removed again, and a later record finds its forks missing
/// (a relation created again under the number).
fn apply_drop(
    pool: &BufferPool,
    rec: &Record,
    known_forks: &mut HashSet<(RelFileId, ForkNumber)>,
) -> Result<(), EngineError> {
    if rec.kind != RecordKind::DropRelation {
        return Ok(());
    }
    let rel = record::dropped_relation(rec.extra);
    pool.drop_relation(rel)?;
    known_forks.retain(|(r, _)| *r != rel);
    Ok(())
}

fn apply(
    pool: &BufferPool,
    rec: &Record,
    known_forks: &mut HashSet<(RelFileId, ForkNumber)>,
    report: &mut RecoveryReport,
) -> Result<(), EngineError> {
    if rec.kind != RecordKind::Update {
        return Ok(());
    }
    let end = rec.end();
    for b in &rec.blocks {
        // A fork missing on disk (its creation is not logged) is created; each fork is
        // checked once per recovery, not once per record.
        if known_forks.insert((b.tag.rel, b.tag.fork)) {
            let smgr = pool.smgr();
            if !smgr.exists(b.tag.rel, b.tag.fork)? {
                smgr.create(b.tag.rel, b.tag.fork)?;
            }
        }
        while pool.nblocks(b.tag.rel, b.tag.fork)? <= b.tag.block {
            drop(pool.extend(b.tag.rel, b.tag.fork)?);
        }
        let buf = match &b.change {
            BlockChange::Image(_) => pool.read_zeroed(b.tag)?,
            _ => pool.read(b.tag)?,
        };
        let mut g = buf.write();
        if !matches!(b.change, BlockChange::Image(_))
            && report.newest_page.is_none_or(|(l, _)| page::lsn(&g) > l)
        {
            report.newest_page = Some((page::lsn(&g), b.tag));
        }
        if page::lsn(&g) >= end && !matches!(b.change, BlockChange::Image(_)) {
            report.pages_skipped += 1;
            continue;
        }
        match &b.change {
            BlockChange::Image(img) => {
                g.copy_from_slice(img);
                report.images += 1;
            }
            BlockChange::Ranges(ranges) => write_ranges(&mut g, ranges),
            BlockChange::Shifted { shift, ranges } => {
                // Decoding checked that it stays inside the page.
                shift.apply(&mut g);
                write_ranges(&mut g, ranges);
            }
        }
        page::set_lsn(&mut g, end);
        report.pages_applied += 1;
    }
    Ok(())
}

/// Writes `ranges`' bytes into `page` (decoding checked that each stays inside it).
fn write_ranges(page: &mut [u8], ranges: &[(u16, Vec<u8>)]) {
    for (off, bytes) in ranges {
        page[*off as usize..*off as usize + bytes.len()].copy_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::BufferTag;
    use crate::vfs::MemVfs;
    use crate::wal::record::{rewrite_as_layout, RecordBuilder};

    const SEG: u64 = 64 << 10;

    /// A log of two flushed batches, as a writer of CRC layout `layout` leaves it:
    /// batch A = r1, r2 then padding to 4096, batch B = r3 at 4096 then padding. Every
    /// record says the log was durable up to `flushed`. Returns the log and the records'
    /// positions.
    fn two_batches(layout: u8, flushed: u64) -> (Vec<u8>, [u64; 3]) {
        let page = vec![7u8; 4096];
        let tag = BufferTag::new(RelFileId::new(0, 9), ForkNumber::Main, 0);
        let mut log = vec![0u8; SEG as usize];
        let mut at = 0u64;
        let mut starts = [0u64; 3];
        for (i, start) in starts.iter_mut().enumerate() {
            if i == 2 {
                at = WAL_BLOCK; // batch B
            }
            let mut b = RecordBuilder::new(RecordKind::Update, 10 + i as u32, FLAG_COMMIT, 0);
            // 1 KiB of change: each record spans sectors of its own
            b.ranges(&tag, &page, std::slice::from_ref(&(1024..2048)));
            let mut bytes = b.finish(Lsn(at), Lsn(flushed), 1).to_vec();
            if layout < 2 {
                rewrite_as_layout(&mut bytes, layout);
            }
            log[at as usize..at as usize + bytes.len()].copy_from_slice(&bytes);
            *start = at;
            at = record::align(at + bytes.len() as u64);
            if (i == 1 || i == 2) && layout >= 2 {
                // the flush's padding starts with a marker
                log[at as usize..at as usize + record::PAD_MARKER_LEN]
                    .copy_from_slice(&record::pad_marker(at, 1));
            }
        }
        (log, starts)
    }

    /// Walks `log` (one segment) from 0: the positions of the records returned, and why
    /// the walk stopped (or the error).
    fn walk(log: Vec<u8>) -> Result<(Vec<u64>, String), EngineError> {
        let vfs = MemVfs::new();
        let wal_dir = PathBuf::from("/db/wal");
        vfs.create_dir_all(&wal_dir).unwrap();
        vfs.set_contents(&wal_dir.join(format!("{:016X}", 0)), log);
        let mut reader = LogReader::new(&vfs, wal_dir, SEG);
        let mut walk = LogWalk {
            reader: &mut reader,
            pos: 0,
            page_size: 8192,
            incarnation: 1,
            marks_padding: None,
            lost_until: None,
            durable_end: None,
            padded_to: None,
        };
        let mut seen = Vec::new();
        loop {
            match walk.next()? {
                Ok(r) => seen.push(r.lsn.0),
                Err(stop) => return Ok((seen, stop)),
            }
        }
    }

    /// Zeros from `from` to the end of its 4 KiB block: the lost sectors of a torn write.
    fn lose_block_tail(log: &mut [u8], from: u64) {
        let end = from.div_ceil(WAL_BLOCK) * WAL_BLOCK;
        log[from as usize..end as usize].fill(0);
    }

    #[test]
    fn marked_padding_is_skipped() {
        let (log, starts) = two_batches(2, 0);
        let (seen, stop) = walk(log).unwrap();
        assert_eq!(seen, starts);
        assert!(stop.contains("zero length"), "{stop}");
    }

    /// The hole CI found (crash_power_heap, seed 4): batch A's last sectors lost, batch B
    /// (written before the crash, never synced) survived past the block. Replay stops at
    /// the hole: r3 is never applied over it.
    #[test]
    fn lost_sectors_before_a_later_batch_end_the_log() {
        let (mut log, starts) = two_batches(2, 0);
        lose_block_tail(&mut log, starts[1]);
        let (seen, stop) = walk(log).unwrap();
        assert_eq!(seen, [starts[0]], "{stop}");
        assert!(stop.contains("without a pad marker"), "{stop}");
    }

    /// The same loss where batch B says batch A was durable: acknowledged log is gone, and
    /// recovery refuses, naming the position.
    #[test]
    fn lost_sectors_of_acknowledged_log_are_corruption() {
        let (mut log, starts) = two_batches(2, WAL_BLOCK);
        lose_block_tail(&mut log, starts[1]);
        match walk(log) {
            Err(EngineError::Corrupt { offset, reason, .. }) => {
                assert_eq!(offset, starts[1]);
                assert!(reason.contains("acknowledged"), "{reason}");
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    /// A marker of another position or another life of the log is not padding.
    #[test]
    fn a_stale_pad_marker_is_not_padding() {
        let (mut log, starts) = two_batches(2, 0);
        let pad = record::align(starts[1] + 1024 + 48 + 16 + 4) as usize;
        assert_eq!(&log[pad..pad + 8], &record::pad_marker(pad as u64, 1));
        log[pad..pad + 8].copy_from_slice(&record::pad_marker(pad as u64, 0));
        let (seen, stop) = walk(log).unwrap();
        assert_eq!(seen, starts[..2], "{stop}");
    }

    /// Logs of older writers (layouts 0 and 1) padded with bare zeros: still skipped.
    #[test]
    fn bare_zero_padding_of_older_writers_is_skipped() {
        for layout in [0, 1] {
            let (log, starts) = two_batches(layout, 0);
            let (seen, stop) = walk(log).unwrap();
            assert_eq!(seen, starts, "layout {layout}: {stop}");
        }
    }
}
