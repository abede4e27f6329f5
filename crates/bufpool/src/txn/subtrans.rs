//! The subtransaction log: each subtransaction's parent id, four bytes per transaction id,
//! in an SLRU (PostgreSQL's pg_subtrans).
//!
//! Owns: the `subtrans` SLRU under the data directory.
//! Read by: visibility checks against a snapshot whose subtransaction cache overflowed
//! (`TxnManager::xid_in_snapshot` looks a running id's topmost parent up here: the hot path
//! once a transaction has more than 64 open subtransactions), and nothing else.
//! Invariants: the parent of a subtransaction is recorded before the id is handed to its
//! caller (so before any row carries it); a top-level id's entry is 0 (its page was zeroed
//! when the id's page was first used, or at startup). Entries are only read for ids that
//! are running, all assigned since the engine opened: the log is not WAL-logged and not
//! needed after a crash (no transaction survives one). At open the engine zeroes the page
//! holding the next id, so entries a previous life left for ids this life hands out again
//! are never read (PostgreSQL's StartupSUBTRANS).
//! Locks: those of the SLRU.

use std::path::Path;

use super::{Xid, INVALID_XID};
use crate::slru::{Slru, SlruError, SlruOptions, SlruStats};
use crate::sync::Arc;
use crate::vfs::Vfs;

/// Bytes per entry.
const ENTRY: u64 = 4;

/// The subtransaction log.
#[derive(Debug)]
pub struct Subtrans {
    slru: Slru,
    xids_per_page: u64,
}

impl Subtrans {
    /// Installs the engine's test-hook forwarder (see `hooks.rs`).
    pub(crate) fn install_probe(&self, forward: crate::hooks::Forward) {
        self.slru.install_probe(forward);
    }

    /// Opens `<dir>/subtrans` with the shape `opts` (the engine's `subtransaction_buffers`
    /// and `slru_design`), and makes the page of `next_xid` a zeroed page.
    pub fn open(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        page_size: usize,
        opts: SlruOptions,
        next_xid: Xid,
    ) -> Result<Subtrans, SlruError> {
        // Nothing here outlives the engine (the page of the next id is made afresh and
        // older segments dropped, below), so pages leave memory without doublewrite copies
        // or fsyncs, on the clients' path at every new page.
        let slru = Slru::open_with(vfs, dir, "subtrans", page_size, opts)?.not_durable();
        let xids_per_page = slru.usable() as u64 / ENTRY;
        let s = Subtrans {
            slru,
            xids_per_page,
        };
        // Nothing before the next id will be asked about again: drop older segments
        // (whatever a crash left in them) and start the next id's page afresh.
        let page = s.locate(next_xid).0;
        s.slru.truncate(page)?;
        s.slru.zero_page(page)?;
        Ok(s)
    }

    fn locate(&self, xid: Xid) -> (u64, usize) {
        let x = u64::from(xid);
        (
            x / self.xids_per_page,
            ((x % self.xids_per_page) * ENTRY) as usize,
        )
    }

    /// Transaction ids per page.
    pub fn xids_per_page(&self) -> u64 {
        self.xids_per_page
    }

    /// The SLRU's counters.
    pub fn stats(&self) -> SlruStats {
        self.slru.stats()
    }

    /// Called when `xid` is assigned (top-level or not): zeroes its page if it is the first
    /// id on it.
    pub fn extend(&self, xid: Xid) -> Result<(), SlruError> {
        let (page, at) = self.locate(xid);
        if at == 0 {
            self.slru.zero_page(page)?;
        }
        Ok(())
    }

    /// Records `parent` as the parent of subtransaction `xid`.
    pub fn set_parent(&self, xid: Xid, parent: Xid) -> Result<(), SlruError> {
        debug_assert!(parent < xid, "a parent is older than its child");
        let (page, at) = self.locate(xid);
        self.slru.write(page, |b| {
            b[at..at + 4].copy_from_slice(&parent.to_le_bytes());
        })
    }

    /// The parent of `xid` (INVALID_XID for a top-level transaction).
    pub fn parent(&self, xid: Xid) -> Result<Xid, SlruError> {
        let (page, at) = self.locate(xid);
        self.slru.read(page, |b| {
            u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
        })
    }

    /// The topmost parent of `xid`, following parents while they are at or above `floor`
    /// (PostgreSQL's SubTransGetTopmostTransaction: below a snapshot's xmin every id has
    /// ended, so the walk can stop there). Returns `xid` itself for a top-level id.
    pub fn topmost(&self, xid: Xid, floor: Xid) -> Result<Xid, SlruError> {
        let mut x = xid;
        loop {
            let p = self.parent(x)?;
            if p == INVALID_XID || p < floor {
                return Ok(x);
            }
            if p >= x {
                // A parent is always older than its child: anything else is a stale entry
                // (a bug, or a page not zeroed). Stop rather than loop.
                debug_assert!(false, "subtrans entry of {x} names {p}");
                return Ok(x);
            }
            x = p;
        }
    }

    /// Writes every changed page (at checkpoints: keeps the log's memory clean, not needed
    /// for durability).
    pub fn flush(&self) -> Result<usize, SlruError> {
        self.slru.flush()
    }

    /// Forgets whole segments holding only ids below `oldest` (no running transaction's
    /// subtransaction is older than the oldest running transaction).
    pub fn truncate(&self, oldest: Xid) -> Result<usize, SlruError> {
        self.slru.truncate(self.locate(oldest).0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slru::SlruDesign;
    use crate::vfs::MemVfs;

    fn open(vfs: &MemVfs, slots: usize, next: Xid) -> Subtrans {
        let opts = SlruOptions {
            buffers: slots,
            design: SlruDesign::default(),
        };
        Subtrans::open(Arc::new(vfs.clone()), Path::new("/db"), 4096, opts, next).unwrap()
    }

    #[test]
    fn parents_and_topmost_across_pages_and_evictions() {
        let vfs = MemVfs::new();
        let s = open(&vfs, 4, 3);
        assert_eq!(s.xids_per_page(), (4096 - 8) / 4);
        // Trees of depth 3 over ~12 pages through 4 slots: x (top), x+1 (child), x+2 (grandchild).
        let n: Xid = 12_000;
        for x in 3..n {
            s.extend(x).unwrap();
            match x % 3 {
                1 => s.set_parent(x, x - 1).unwrap(),
                2 => s.set_parent(x, x - 1).unwrap(),
                _ => {}
            }
        }
        for x in (3..n).step_by(7) {
            let top = x - x % 3;
            assert_eq!(s.topmost(x, 0).unwrap(), top.max(3), "xid {x}");
        }
        // The floor stops the walk: below it everything has ended.
        assert_eq!(s.topmost(11, 10).unwrap(), 10);
        assert_eq!(s.topmost(11, 11).unwrap(), 11);
        assert_eq!(s.parent(9).unwrap(), INVALID_XID);
    }

    /// Evictions and checkpoints write the pages in place without the doublewrite copy or
    /// an fsync (open discards them anyway): no round, no doublewrite file; and the pages
    /// read back intact through their checksums.
    #[test]
    fn pages_leave_memory_without_doublewrite_rounds() {
        let vfs = MemVfs::new();
        let s = open(&vfs, 4, 3);
        let n: Xid = 12_000;
        for x in 3..n {
            s.extend(x).unwrap();
            s.set_parent(x, x - 1).unwrap();
        }
        s.flush().unwrap();
        let st = s.stats();
        assert!(st.writes >= 10, "{st:?}");
        assert_eq!(st.rounds, 0, "{st:?}");
        assert!(vfs.contents(&s.slru.doublewrite_path()).is_none());
        for x in (4..n).step_by(97) {
            assert_eq!(s.parent(x).unwrap(), x - 1, "xid {x}");
        }
    }

    #[test]
    fn open_zeroes_the_page_of_the_next_id() {
        let vfs = MemVfs::new();
        {
            let s = open(&vfs, 4, 3);
            for x in 3..100 {
                s.extend(x).unwrap();
                s.set_parent(x, x - 1).unwrap();
            }
            s.flush().unwrap();
        }
        // A new life hands out 50.. again: the old entries must not be read.
        let s = open(&vfs, 4, 50);
        assert_eq!(s.parent(60).unwrap(), INVALID_XID);
        assert_eq!(s.topmost(60, 0).unwrap(), 60);
    }
}
