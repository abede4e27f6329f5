//! Crash recovery: replay the log from the last checkpoint's redo point.
//!
//! Steps: (1) fsync every file of the data directory, so replay trusts only durable data;
//! (2) read the control file; (3) replay from its redo point to the end of valid log, each
//! page change applied only if the page's LSN is older than the record (so a second
//! recovery after a crash during the first gives the same result); full-page images are
//! restored without reading the (possibly torn) page from storage.
//!
//! End of log: the first position that is not a valid record. Zeros mean padding or never
//! written log: the reader tries the next 4 KiB boundary once. At an invalid record the
//! reader scans the rest of the log (8-byte steps) for the first valid record R after it:
//! - none: a torn or short tail, the normal end of the log;
//! - R is the EndOfRecovery record naming this position: the junk left by an earlier crash
//!   before an earlier recovery resumed; skip to R;
//! - otherwise, if R's header says the log was durable past the bad position when R was
//!   written, the bad record was acknowledged log: corruption in the middle of the log.
//!   Recovery refuses, naming segment file, offset, LSN and reason, and never cuts
//!   acknowledged commits off silently;
//! - otherwise R was never acknowledged (written after the bad block but not fsynced):
//!   normal end.

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
use crate::vfs::{OpenOptions, Vfs};
use crate::wal::record::{self, BlockChange, Invalid, Record, RecordKind, FLAG_ABORT, FLAG_COMMIT};
use crate::wal::{control, WAL_BLOCK};

/// What recovery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub redo: Lsn,
    pub end: Lsn,
    /// Incarnation of the last record replayed (the log continues with the next one).
    pub incarnation: u32,
    /// The next transaction id: above the control file's and every id replayed.
    pub next_xid: u32,
    /// Transaction outcomes replayed into the commit log.
    pub commits: u64,
    pub aborts: u64,
    /// Multixact creations replayed into the multixact SLRUs.
    pub multis: u64,
    pub records: u64,
    pub pages_applied: u64,
    pub pages_skipped: u64,
    pub images: u64,
    pub bytes: u64,
    pub files_synced: u64,
    /// Whole recovery, including the fsync of the data directory.
    pub elapsed: Duration,
    /// Replay alone (reading, decoding and applying records).
    pub replay_elapsed: Duration,
    /// Why replay stopped where it did.
    pub stop: String,
}

/// Reads log bytes by position across segment files.
struct LogReader<'a> {
    vfs: &'a dyn Vfs,
    wal_dir: PathBuf,
    seg_size: u64,
    cache: Option<(u64, Vec<u8>)>,
}

impl LogReader<'_> {
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
            let n = f
                .read_at(&mut buf, 0)
                .map_err(|e| EngineError::io("reading", &path, e))?;
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

/// The record at `pos` if it is valid and belongs to this life of the log.
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

/// fsyncs every file under `dir` (recursively).
fn sync_tree(vfs: &dyn Vfs, dir: &Path, count: &mut u64) -> Result<(), EngineError> {
    for name in vfs
        .list_dir(dir)
        .map_err(|e| EngineError::io("listing", dir, e))?
    {
        let path = dir.join(&name);
        if vfs.list_dir(&path).is_ok() {
            sync_tree(vfs, &path, count)?;
        } else if name != "bufpool.lock" {
            let f = vfs
                .open(&path, OpenOptions::read_only())
                .map_err(|e| EngineError::io("opening", &path, e))?;
            f.sync_all()
                .map_err(|e| EngineError::io("fsync of", &path, e))?;
            *count += 1;
        }
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
    let mut reader = LogReader {
        vfs,
        wal_dir: dir.join("wal"),
        seg_size,
        cache: None,
    };
    // The checkpoint record must be there: without it the redo point cannot be trusted.
    match reader.record_at(ctl.checkpoint.0, page_size)? {
        Ok(r) if r.kind == RecordKind::Checkpoint && r.extra == ctl.redo.0 => {}
        Ok(r) => {
            return Err(EngineError::Corrupt {
                path: reader.seg_path(ctl.checkpoint.0 / seg_size),
                offset: ctl.checkpoint.0 % seg_size,
                lsn: ctl.checkpoint,
                reason: format!(
                    "the control file's checkpoint record is a {:?} record",
                    r.kind
                ),
            })
        }
        Err(why) => {
            return Err(EngineError::Corrupt {
                path: reader.seg_path(ctl.checkpoint.0 / seg_size),
                offset: ctl.checkpoint.0 % seg_size,
                lsn: ctl.checkpoint,
                reason: format!("the control file's checkpoint record is unreadable: {why}"),
            })
        }
    }
    let mut pos = ctl.redo.0;
    report.next_xid = ctl.next_xid;
    multis.restore(
        MultiPositions {
            next_multi: ctl.next_multi,
            next_member: ctl.next_member,
            oldest_multi: ctl.oldest_multi,
        },
        &ctl.multi_rels,
    );
    let mut incarnation = ctl.incarnation;
    report.incarnation = incarnation;
    let mut next_progress = PROGRESS_EVERY;
    let replay_start = Instant::now();
    let mut known_forks = HashSet::new();
    loop {
        // The record to replay, or where and why the log stops being valid.
        let found = match valid_at(&mut reader, pos, page_size, incarnation)? {
            Ok(r) => Ok(r),
            // Zeros inside a block: flush padding up to the block boundary, or the end.
            Err(NoRecord::Zero) if pos % WAL_BLOCK != 0 => {
                let next = pos.div_ceil(WAL_BLOCK) * WAL_BLOCK;
                valid_at(&mut reader, next, page_size, incarnation)?.map_err(|w| (next, w))
            }
            Err(why) => Err((pos, why)),
        };
        let rec = match found {
            Ok(r) => r,
            Err((at, why)) => {
                let why = why.describe();
                match check_tail(&mut reader, pos, at, page_size, incarnation, &why)? {
                    Some(r) => r,
                    None => {
                        report.stop = format!("end of log at {}: {why}", Lsn(pos));
                        break;
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
            incarnation = rec.incarnation;
        }
        apply(pool, &rec, &mut known_forks, &mut report)?;
        apply_outcome(clog, &rec, &mut report)?;
        apply_multi(multis, &rec, &mut report)?;
        report.records += 1;
        report.bytes += rec.len as u64;
        report.incarnation = incarnation;
        pos = rec.end().0;
        report.end = Lsn(pos);
        if report.bytes >= next_progress {
            next_progress += PROGRESS_EVERY;
            report.elapsed = start.elapsed();
            progress(&report);
        }
    }
    if report.end.0 < pos {
        report.end = Lsn(pos);
    }
    debug_assert!(report.end >= ctl.redo, "replay ended before the redo point");
    report.replay_elapsed = replay_start.elapsed();
    report.elapsed = start.elapsed();
    Ok(report)
}

/// The log stops being valid at `at` (`end` is where the last valid record ended; the two
/// differ when padding came between). Returns the record to continue with (after an
/// earlier recovery's junk), None for the normal end of log, or an error for corruption.
fn check_tail(
    reader: &mut LogReader<'_>,
    end: u64,
    at: u64,
    page_size: usize,
    incarnation: u32,
    why: &str,
) -> Result<Option<Record>, EngineError> {
    let Some(r) = reader.next_valid_after(at, page_size, incarnation)? else {
        return Ok(None);
    };
    if r.kind == RecordKind::EndOfRecovery
        && (r.extra == end || r.extra == at)
        && r.incarnation == incarnation.wrapping_add(1)
    {
        return Ok(Some(r));
    }
    let pos = at;
    if r.flushed.0 > pos {
        return Err(EngineError::Corrupt {
            path: reader.seg_path(pos / reader.seg_size),
            offset: pos % reader.seg_size,
            lsn: Lsn(pos),
            reason: format!(
                "{why}; yet a valid record at {} says the log was durable up to {}, so this \
                 record had been acknowledged",
                r.lsn, r.flushed
            ),
        });
    }
    Ok(None)
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
            BlockChange::Ranges(_) => pool.read(b.tag)?,
        };
        let mut g = buf.write();
        if page::lsn(&g) >= end && !matches!(b.change, BlockChange::Image(_)) {
            report.pages_skipped += 1;
            continue;
        }
        match &b.change {
            BlockChange::Image(img) => {
                g.copy_from_slice(img);
                report.images += 1;
            }
            BlockChange::Ranges(ranges) => {
                for (off, bytes) in ranges {
                    g[*off as usize..*off as usize + bytes.len()].copy_from_slice(bytes);
                }
            }
        }
        page::set_lsn(&mut g, end);
        report.pages_applied += 1;
    }
    Ok(())
}
