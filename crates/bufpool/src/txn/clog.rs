//! The commit log: two bits of status per transaction id, in an SLRU (PostgreSQL's pg_xact).
//!
//! Owns: the `xact` SLRU under the data directory. Interface kept narrow on purpose (get,
//! set, extend, truncate, flush) so the SLRU behind it can become banked (seed 002).
//! Invariants: a status only moves from InProgress to Committed, Aborted or SubCommitted
//! (and SubCommitted to Committed or Aborted); `set` refuses anything else. A page is
//! extended (zeroed: all InProgress) before the first id on it is used.
//! Locks: those of the SLRU.

use std::path::Path;

use super::Xid;
use crate::slru::{Slru, SlruDesign, SlruError, SlruOptions, SlruStats};
use crate::sync::Arc;
use crate::vfs::Vfs;

/// Status bits per transaction.
const BITS: u64 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XidStatus {
    InProgress = 0,
    Committed = 1,
    Aborted = 2,
    SubCommitted = 3,
}

impl XidStatus {
    fn from_bits(b: u8) -> Self {
        match b & 3 {
            0 => XidStatus::InProgress,
            1 => XidStatus::Committed,
            2 => XidStatus::Aborted,
            _ => XidStatus::SubCommitted,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClogError {
    #[error(transparent)]
    Slru(#[from] SlruError),
    #[error(transparent)]
    Multi(#[from] super::multixact::MultiXactError),
    #[error("transaction {xid} is not running (a savepoint needs a running parent; a rollback, a running subtransaction)")]
    NotRunning { xid: Xid },
    #[error("transaction {xid} is a subtransaction: end it with a rollback to its savepoint, or end its top-level transaction")]
    NotTopLevel { xid: Xid },
    #[error(
        "database is not accepting commands that assign new transaction ids, to avoid \
         wraparound data loss: the next id would be {next}, within {margin} of the end of the \
         32-bit id space (ids are not frozen or reused yet: copy the data into a new directory)"
    )]
    XidsExhausted { next: Xid, margin: u32 },
    #[error("transaction {xid} cannot go from {from:?} to {to:?}")]
    BadTransition {
        xid: Xid,
        from: XidStatus,
        to: XidStatus,
    },
}

impl ClogError {
    /// The OS error number behind this error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            ClogError::Slru(e) => e.raw_os_error(),
            ClogError::Multi(e) => e.raw_os_error(),
            ClogError::BadTransition { .. }
            | ClogError::XidsExhausted { .. }
            | ClogError::NotRunning { .. }
            | ClogError::NotTopLevel { .. } => None,
        }
    }
}

/// The moves `Clog::set` accepts: from InProgress to anything, SubCommitted onward to an
/// outcome, and any status to itself (redo repeats them).
fn transition_allowed(from: XidStatus, to: XidStatus) -> bool {
    from == to
        || from == XidStatus::InProgress
        || (from == XidStatus::SubCommitted && to != XidStatus::InProgress)
}

/// The commit log.
#[derive(Debug)]
pub struct Clog {
    slru: Slru,
    xids_per_page: u64,
}

impl Clog {
    /// Opens `<dir>/xact` with `nslots` page slots of `page_size` bytes.
    pub fn open(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        nslots: usize,
        page_size: usize,
    ) -> Result<Clog, ClogError> {
        let opts = SlruOptions {
            buffers: nslots,
            design: SlruDesign::default(),
        };
        Clog::open_with(vfs, dir, page_size, opts)
    }

    /// Opens `<dir>/xact` with the shape `opts` (the engine's `transaction_buffers` and
    /// `slru_design`).
    pub fn open_with(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        page_size: usize,
        opts: SlruOptions,
    ) -> Result<Clog, ClogError> {
        let slru = Slru::open_with(vfs, dir, "xact", page_size, opts)?;
        let xids_per_page = (slru.usable() as u64 * 8) / BITS;
        Ok(Clog {
            slru,
            xids_per_page,
        })
    }

    fn locate(&self, xid: Xid) -> (u64, usize, u32) {
        let x = u64::from(xid);
        let pageno = x / self.xids_per_page;
        let within = x % self.xids_per_page;
        (
            (pageno),
            (within * BITS / 8) as usize,
            ((within * BITS) % 8) as u32,
        )
    }

    /// The SLRU's counters (pg_stat_slru's, plus doublewrite rounds and pages repaired).
    pub fn stats(&self) -> SlruStats {
        self.slru.stats()
    }

    /// Transaction ids per page.
    pub fn xids_per_page(&self) -> u64 {
        self.xids_per_page
    }

    pub fn get(&self, xid: Xid) -> Result<XidStatus, ClogError> {
        let (page, byte, shift) = self.locate(xid);
        Ok(self
            .slru
            .read(page, |b| XidStatus::from_bits(b[byte] >> shift))?)
    }

    /// Records the outcome of `xid`.
    pub fn set(&self, xid: Xid, status: XidStatus) -> Result<(), ClogError> {
        let (page, byte, shift) = self.locate(xid);
        self.slru.write(page, |b| {
            let from = XidStatus::from_bits(b[byte] >> shift);
            if !transition_allowed(from, status) {
                return Err(ClogError::BadTransition {
                    xid,
                    from,
                    to: status,
                });
            }
            b[byte] = (b[byte] & !(3 << shift)) | ((status as u8) << shift);
            Ok(())
        })?
    }

    /// Marks `xid` aborted whatever the page holds: for recovery only, for a transaction
    /// whose changes it replayed but whose outcome the recovered log does not have. The
    /// page on storage may say committed (written before the crash, after a commit record
    /// the log has since lost): left so, the changes replay kept would be visible without
    /// those that were lost with the log's tail.
    pub fn forget_outcome(&self, xid: Xid) -> Result<(), ClogError> {
        let (page, byte, shift) = self.locate(xid);
        self.slru.write(page, |b| {
            b[byte] = (b[byte] & !(3 << shift)) | ((XidStatus::Aborted as u8) << shift);
        })?;
        Ok(())
    }

    /// Records the outcome of a transaction tree: `top` and its subtransactions `subs`
    /// (PostgreSQL's TransactionIdSetTreeStatus). Ids on `top`'s page change together with
    /// it, under one page lock; for a commit, ids on other pages are first marked
    /// SubCommitted, then `top`'s page commits, then the others are marked Committed. A
    /// reader meeting SubCommitted asks whether the tree is still running (it is, until
    /// this returns); a crash between the steps leaves SubCommitted only where the commit
    /// record is durable (pages go out after the WAL behind them), and replay finishes it.
    pub fn set_tree(&self, top: Xid, subs: &[Xid], status: XidStatus) -> Result<(), ClogError> {
        if subs.is_empty() {
            return self.set(top, status); // the common case: no list, no allocation
        }
        let top_page = self.locate(top).0;
        let (mut here, mut elsewhere): (Vec<Xid>, Vec<Xid>) =
            subs.iter().partition(|&&x| self.locate(x).0 == top_page);
        elsewhere.sort_unstable();
        let commit = status == XidStatus::Committed;
        if commit {
            // Entries already committed stay so: replay repeating this very commit (its
            // pages may have gone out after it).
            let mut pending = Vec::with_capacity(elsewhere.len());
            for &x in &elsewhere {
                if self.get(x)? != XidStatus::Committed {
                    pending.push(x);
                }
            }
            self.set_many(&pending, XidStatus::SubCommitted)?;
        }
        here.push(top);
        self.set_many(&here, status)?;
        self.set_many(&elsewhere, status)
    }

    /// Sets `status` for `xids`, one page write per run of ids on the same page (sorted
    /// input makes one write per page).
    fn set_many(&self, xids: &[Xid], status: XidStatus) -> Result<(), ClogError> {
        let mut i = 0;
        while i < xids.len() {
            let page = self.locate(xids[i]).0;
            let j = i + xids[i..]
                .iter()
                .take_while(|&&x| self.locate(x).0 == page)
                .count();
            let run = &xids[i..j];
            self.slru.write(page, |b| {
                for &xid in run {
                    let (_, byte, shift) = self.locate(xid);
                    let from = XidStatus::from_bits(b[byte] >> shift);
                    if !transition_allowed(from, status) {
                        return Err(ClogError::BadTransition {
                            xid,
                            from,
                            to: status,
                        });
                    }
                }
                for &xid in run {
                    let (_, byte, shift) = self.locate(xid);
                    b[byte] = (b[byte] & !(3 << shift)) | ((status as u8) << shift);
                }
                Ok(())
            })??;
            i = j;
        }
        Ok(())
    }

    /// Called when `xid` is assigned: zeroes its page if it is the first id on it.
    pub fn extend(&self, xid: Xid) -> Result<(), ClogError> {
        let (page, byte, shift) = self.locate(xid);
        if byte == 0 && shift == 0 {
            self.slru.zero_page(page)?;
        }
        Ok(())
    }

    /// Forgets whole segments holding only ids below `oldest` (all of them long decided
    /// and no longer looked up).
    pub fn truncate(&self, oldest: Xid) -> Result<usize, ClogError> {
        Ok(self.slru.truncate(self.locate(oldest).0)?)
    }

    /// Makes `barrier` run before any commit-log page is written: the engine flushes the
    /// WAL there, so every status on disk is backed by a durable commit or abort record
    /// (PostgreSQL protects clog pages with their records' LSNs for the same reason).
    pub fn set_write_barrier(&self, barrier: crate::slru::WriteBarrier) {
        self.slru.set_write_barrier(barrier);
    }

    /// Writes and fsyncs every changed page (at checkpoints). A failed fsync is latched:
    /// every later flush fails too, so no checkpoint completes (and releases the WAL the
    /// statuses depend on) until the directory is reopened and recovery replays them.
    pub fn flush(&self) -> Result<usize, ClogError> {
        Ok(self.slru.flush()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::MemVfs;

    #[test]
    fn statuses_round_trip_across_pages_evictions_and_reopen() {
        let vfs = MemVfs::new();
        let status_of = |x: Xid| match x % 5 {
            0 => XidStatus::Aborted,
            1 | 2 => XidStatus::Committed,
            3 => XidStatus::SubCommitted,
            _ => XidStatus::InProgress,
        };
        let n: Xid = 200_000; // ~13 pages of 4 KiB through 4 slots
        {
            let c = Clog::open(Arc::new(vfs.clone()), Path::new("/db"), 4, 4096).unwrap();
            assert_eq!(c.xids_per_page(), (4096 - 8) * 4);
            for x in 0..n {
                c.extend(x).unwrap();
                if status_of(x) != XidStatus::InProgress {
                    c.set(x, status_of(x)).unwrap();
                }
            }
            for x in (0..n).step_by(7) {
                assert_eq!(c.get(x).unwrap(), status_of(x), "xid {x}");
            }
            c.flush().unwrap();
        }
        let c = Clog::open(Arc::new(vfs), Path::new("/db"), 4, 4096).unwrap();
        for x in (0..n).step_by(3) {
            assert_eq!(c.get(x).unwrap(), status_of(x), "xid {x} after reopen");
        }
    }

    #[test]
    fn only_forward_transitions_are_allowed() {
        let c = Clog::open(Arc::new(MemVfs::new()), Path::new("/db"), 2, 4096).unwrap();
        c.extend(0).unwrap();
        c.set(10, XidStatus::Committed).unwrap();
        c.set(10, XidStatus::Committed).unwrap(); // idempotent (redo may repeat it)
        let err = c.set(10, XidStatus::Aborted).unwrap_err().to_string();
        assert!(
            err.contains("transaction 10") && err.contains("Committed"),
            "{err}"
        );
        c.set(11, XidStatus::SubCommitted).unwrap();
        c.set(11, XidStatus::Aborted).unwrap();
    }

    #[test]
    fn a_tree_spanning_pages_commits_and_aborts_whole() {
        let c = Clog::open(Arc::new(MemVfs::new()), Path::new("/db"), 4, 4096).unwrap();
        let per = c.xids_per_page() as Xid;
        for x in (0..4 * per).step_by(per as usize) {
            c.extend(x).unwrap();
        }
        let top = per - 2;
        let subs = [per - 1, per + 5, 2 * per + 1, 3 * per];
        c.set_tree(top, &subs, XidStatus::Committed).unwrap();
        for x in std::iter::once(top).chain(subs) {
            assert_eq!(c.get(x).unwrap(), XidStatus::Committed, "{x}");
        }
        // A crash between the steps leaves sub-committed entries; replay finishes them.
        let top2 = 10;
        c.set(per + 9, XidStatus::SubCommitted).unwrap();
        c.set_tree(top2, &[per + 9], XidStatus::Committed).unwrap();
        assert_eq!(c.get(per + 9).unwrap(), XidStatus::Committed);
        // Replay repeats a tree commit whose every page already went out committed (the
        // commit record lies after the checkpoint's redo point, the pages were written
        // after it): the sub-commit step must leave committed entries alone. It refused
        // them ("transaction N cannot go from Committed to SubCommitted"), and the
        // directory did not open again (found by scripts/stress.sh).
        c.set_tree(top, &subs, XidStatus::Committed).unwrap();
        for x in std::iter::once(top).chain(subs) {
            assert_eq!(c.get(x).unwrap(), XidStatus::Committed, "{x} after replay");
        }
        // A refused transition changes nothing on its page.
        c.set(20, XidStatus::Committed).unwrap();
        assert!(c.set_tree(19, &[20, 21], XidStatus::Aborted).is_err());
        assert_eq!(c.get(21).unwrap(), XidStatus::InProgress);
    }

    #[test]
    fn concurrent_setters_and_getters_agree() {
        let c = Clog::open(Arc::new(MemVfs::new()), Path::new("/db"), 3, 4096).unwrap();
        for x in 0..100_000 {
            c.extend(x).unwrap();
        }
        std::thread::scope(|s| {
            for t in 0..8u32 {
                let c = &c;
                s.spawn(move || {
                    for x in (t..100_000).step_by(8) {
                        c.set(
                            x,
                            if x % 2 == 0 {
                                XidStatus::Committed
                            } else {
                                XidStatus::Aborted
                            },
                        )
                        .unwrap();
                    }
                });
            }
        });
        for x in 0..100_000 {
            let want = if x % 2 == 0 {
                XidStatus::Committed
            } else {
                XidStatus::Aborted
            };
            assert_eq!(c.get(x).unwrap(), want);
        }
    }
}
