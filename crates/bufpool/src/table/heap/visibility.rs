//! Visibility of tuple versions: how a version looks to a snapshot ([`Heap::vis`]), whether
//! any snapshot, now or later, can still see it ([`Heap::dead_to_all`]), and the hint bits
//! both record ([`Heap::set_hints`]).
//!
//! **Hint bits.** Visibility checks record what they learned from the commit log
//! (XMIN_COMMITTED, XMIN_INVALID, XMAX_COMMITTED, XMAX_INVALID) in a [`Hints`] list, and
//! the caller sets them on the page afterwards, under an exclusive lock taken only if free
//! (never waiting). The change is not WAL-logged;
//! [`Engine::log_hint`](crate::engine::Engine::log_hint) makes writing such a page safe (a
//! full-page image when the page's first change since the checkpoint, the commit record
//! first under asynchronous commit).
//!
//! **Row locks and multixacts.** An xmax marked XMAX_LOCK_ONLY only locks the row: the
//! version stays visible whatever its lockers' fate. An xmax marked XMAX_IS_MULTI is a
//! multixact id; what replaced or deleted the version is its updater member
//! ([`Heap::xmax_link`]), and the rules for a plain xmax apply to that member. Hints are
//! never set about a multixact (a multixact id and a transaction id of the same value must
//! not be confused), nor XMAX_COMMITTED on a lock-only xmax.
//!
//! Invariants: a hint is applied only while the tuple still carries the xid it was learned
//! about, and a hint bit is only ever a cache of the commit log: losing one costs a later
//! commit-log lookup, never a wrong answer. `dead_to_all` answers true only for versions
//! no running or future snapshot can see (creator aborted, or replaced or deleted by a
//! transaction that committed below the horizon), which is what pruning relies on.
//!
//! Locks: `vis` and `dead_to_all` take no page lock of their own; they run under the
//! caller's lock of the page they read (and consult the commit log, which has its own).
//! `set_hints` is called after the caller released its own lock of the page; it takes the
//! page's exclusive lock with a try-lock and gives up (dropping the hints) if it is busy.

use super::page::{
    HeapPage, HeapPageMut, TupleHeader, XMAX_COMMITTED, XMAX_INVALID, XMAX_IS_MULTI,
    XMAX_LOCK_ONLY, XMIN_COMMITTED, XMIN_INVALID,
};
use super::Heap;
use crate::buffer::{BufferRef, PageWriteGuard};
use crate::table::HeapError;
use crate::txn::{ClogError, Snapshot, Xid, XidStatus, INVALID_XID};

/// How a tuple version looks to a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Vis {
    /// Its creator is not visible (still running for the snapshot, or aborted).
    NotYet,
    Visible,
    /// Created and then replaced or deleted, both visible to the snapshot.
    Gone,
}

/// Hint bits learned while a page was read: (slot, the xid they are about, bits).
pub(super) type Hints = Vec<(u16, Xid, u16)>;

impl Heap<'_> {
    /// How `h` looks to `snap`; what the commit log told goes to `hints`.
    pub(super) fn vis(
        &self,
        snap: &Snapshot,
        slot: u16,
        h: &TupleHeader,
        hints: &mut Hints,
    ) -> Result<Vis, HeapError> {
        let txns = self.engine.txns();
        let m = h.infomask;
        if m & XMIN_INVALID != 0 {
            return Ok(Vis::NotYet);
        }
        if !snap.is_own(h.xmin) {
            if txns.xid_in_snapshot(snap, h.xmin)? {
                return Ok(Vis::NotYet);
            }
            if m & XMIN_COMMITTED == 0 {
                match txns.status(h.xmin)? {
                    XidStatus::Committed => hints.push((slot, h.xmin, XMIN_COMMITTED)),
                    XidStatus::Aborted => {
                        hints.push((slot, h.xmin, XMIN_INVALID));
                        return Ok(Vis::NotYet);
                    }
                    XidStatus::InProgress | XidStatus::SubCommitted => return Ok(Vis::NotYet),
                }
            }
        }
        if m & (XMAX_INVALID | XMAX_LOCK_ONLY) != 0 {
            return Ok(Vis::Visible); // nobody replaced it (a locker does not)
        }
        let multi = m & XMAX_IS_MULTI != 0;
        let xmax = if multi { self.xmax_link(h)? } else { h.xmax };
        if xmax == INVALID_XID {
            return Ok(Vis::Visible);
        }
        if snap.is_own(xmax) {
            return Ok(Vis::Gone);
        }
        if txns.xid_in_snapshot(snap, xmax)? {
            return Ok(Vis::Visible);
        }
        if m & XMAX_COMMITTED != 0 {
            return Ok(Vis::Gone);
        }
        Ok(match txns.status(xmax)? {
            XidStatus::Committed => {
                if !multi {
                    hints.push((slot, xmax, XMAX_COMMITTED));
                }
                Vis::Gone
            }
            XidStatus::Aborted => {
                if !multi {
                    hints.push((slot, xmax, XMAX_INVALID));
                }
                Vis::Visible
            }
            XidStatus::InProgress | XidStatus::SubCommitted => Vis::Visible,
        })
    }

    /// The transaction that replaced or deleted `h`: its xmax, or for a multixact xmax its
    /// updater member; INVALID_XID when xmax is invalid or only locks (one multixact read:
    /// an offsets and a members page).
    pub(super) fn xmax_link(&self, h: &TupleHeader) -> Result<Xid, HeapError> {
        let m = h.infomask;
        if m & (XMAX_INVALID | XMAX_LOCK_ONLY) != 0 {
            return Ok(INVALID_XID);
        }
        if m & XMAX_IS_MULTI == 0 {
            return Ok(h.xmax);
        }
        let members = self
            .engine
            .txns()
            .multis()
            .members(h.xmax)
            .map_err(ClogError::from)?;
        Ok(members
            .iter()
            .find(|(_, mode)| mode.is_update())
            .map_or(INVALID_XID, |&(x, _)| x))
    }

    /// Whether no snapshot, now or later, can see `h`: its creator aborted, or it was
    /// replaced or deleted by a transaction that committed below `horizon` (the oldest
    /// xmin of any running transaction's snapshots).
    pub(super) fn dead_to_all(
        &self,
        slot: u16,
        h: &TupleHeader,
        horizon: Xid,
        hints: &mut Hints,
    ) -> Result<bool, HeapError> {
        let txns = self.engine.txns();
        let m = h.infomask;
        if m & XMIN_INVALID != 0 {
            return Ok(true);
        }
        if m & XMIN_COMMITTED == 0 {
            match txns.status(h.xmin)? {
                XidStatus::Aborted => {
                    hints.push((slot, h.xmin, XMIN_INVALID));
                    return Ok(true);
                }
                XidStatus::InProgress | XidStatus::SubCommitted => return Ok(false),
                XidStatus::Committed => hints.push((slot, h.xmin, XMIN_COMMITTED)),
            }
        }
        if m & (XMAX_INVALID | XMAX_LOCK_ONLY) != 0 {
            return Ok(false); // live: nobody replaced it
        }
        let multi = m & XMAX_IS_MULTI != 0;
        let xmax = if multi { self.xmax_link(h)? } else { h.xmax };
        if xmax == INVALID_XID || xmax >= horizon {
            return Ok(false);
        }
        if m & XMAX_COMMITTED != 0 {
            return Ok(true);
        }
        Ok(match txns.status(xmax)? {
            XidStatus::Committed => {
                if !multi {
                    hints.push((slot, xmax, XMAX_COMMITTED));
                }
                true
            }
            XidStatus::Aborted => {
                if !multi {
                    hints.push((slot, xmax, XMAX_INVALID));
                }
                false
            }
            XidStatus::InProgress | XidStatus::SubCommitted => false,
        })
    }

    /// Sets learned hint bits on the page of `buf`, if its lock is free right now (a
    /// missed hint is only a later commit-log lookup). Each hint is applied only if the
    /// tuple still has the xid it was learned about.
    pub(super) fn set_hints(
        &self,
        buf: &BufferRef<'_>,
        hints: &mut Hints,
    ) -> Result<(), HeapError> {
        if hints.is_empty() {
            return Ok(());
        }
        let Some(mut g) = buf.try_write() else {
            hints.clear();
            return Ok(());
        };
        self.set_hints_locked(&mut g, hints)
    }

    /// [`Heap::set_hints`] for a page whose write lock the caller already holds (the
    /// row-lock walk, pruning): sets the hints and makes the page safe to write
    /// ([`Engine::log_hint`](crate::engine::Engine::log_hint)) if any bit changed.
    pub(super) fn set_hints_locked(
        &self,
        g: &mut PageWriteGuard<'_>,
        hints: &mut Hints,
    ) -> Result<(), HeapError> {
        if self.apply_hints(g, hints) {
            self.engine.log_hint(g)?;
        }
        Ok(())
    }

    /// The bits of [`Heap::set_hints_locked`], without making the change safe to write
    /// (never call it alone: a hinted page written with no image since the checkpoint
    /// cannot be repaired if the write tears). Returns whether a bit changed.
    fn apply_hints(&self, g: &mut PageWriteGuard<'_>, hints: &mut Hints) -> bool {
        let mut any = false;
        for &(slot, xid, bits) in hints.iter() {
            let Some((mut h, _)) = HeapPage(g).tuple(slot) else {
                continue;
            };
            let applies = if bits & (XMIN_COMMITTED | XMIN_INVALID) != 0 {
                h.xmin == xid
            } else {
                // Never about a multixact (its id may equal a transaction id), never
                // "committed" for a lock.
                h.xmax == xid
                    && h.infomask & (XMAX_INVALID | XMAX_COMMITTED | XMAX_IS_MULTI) == 0
                    && !(bits & XMAX_COMMITTED != 0 && h.infomask & XMAX_LOCK_ONLY != 0)
            };
            if applies && h.infomask & bits != bits {
                h.infomask |= bits;
                HeapPageMut::new(g).set_header(slot, &h);
                any = true;
            }
        }
        hints.clear();
        any
    }
}
