//! [`Transaction`]: a transaction as a handle that cannot be forgotten.
//!
//! [`Engine::begin`] returns one; [`Transaction::commit`] and [`Transaction::abort`] end
//! it, and dropping it without either aborts it (an abort record, then the commit log), so
//! an early return or a panic in the caller never leaves a transaction running, which
//! would hold back the pruning horizon (`TxnManager::oldest_xmin`) for good.
//!
//! **An id at the first write** (PostgreSQL's lazy xid assignment, since 8.3): a handle
//! starts without a transaction id. [`Transaction::xid`], which every write, row lock and
//! savepoint's write asks for, assigns one at its first call; [`Transaction::snapshot`]
//! does not. A transaction that only read therefore never had an id: its commit and abort
//! write no record and wait for no flush, it takes no place in the running set (its
//! snapshot's xmin holds the pruning horizon while the snapshot lives) and spends nothing
//! of the id space. A snapshot taken before the first write still sees the rows written
//! after it: it shares the handle's [`OwnTree`], which receives the id when it is
//! assigned. Savepoints are lazy the same way: a savepoint's subtransaction gets its id
//! when something is written inside it (after its parent's), so a savepoint that wrote
//! nothing rolls back and releases without a record. The id-based
//! calls ([`Engine::begin_xid`], [`Engine::commit_transaction`],
//! [`Engine::abort_transaction`]) stay for code that manages ids itself (the benchmark's
//! clients, recovery tests).
//!
//! **Savepoints** (PostgreSQL's SAVEPOINT, ROLLBACK TO SAVEPOINT, RELEASE SAVEPOINT):
//! [`Transaction::savepoint`] begins a subtransaction with its own id (its parent recorded
//! in the subtransaction log) and makes it current: rows written from then on carry its
//! id ([`Transaction::xid`]). [`Transaction::rollback_to`] aborts it and every savepoint
//! begun inside it (one abort record listing them) and begins it anew, as PostgreSQL
//! does; [`Transaction::release`] ends it and those inside it, their changes kept as part
//! of the enclosing level: they commit or abort with it.
//!
//! Invariants: a handle ends its transaction exactly once (commit, abort or drop); after
//! `commit` or `abort` returns, even with an error, the handle is consumed and its drop
//! does nothing more. `levels` lists the open savepoints innermost last; each holds its
//! own subtransaction id first, then the ids of savepoints released into it, so a
//! rollback aborts exactly the ids begun since the savepoint. A level's list is empty
//! until something is written inside it; a level with ids has every enclosing level's
//! own id, and the top-level id, assigned (ids are assigned outermost first). The handle
//! is used by one thread at a time (it is `Send`, not `Sync`).

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Engine, EngineError};
use crate::sync::Arc;
use crate::txn::{OwnTree, Snapshot, Xid, INVALID_XID};
use crate::types::Lsn;

/// Numbers handles, so that a [`Savepoint`] is only accepted by the handle that set it
/// (PostgreSQL's virtual transaction id; a handle has no transaction id until it writes).
/// A handle takes its number at its first savepoint: a shared counter bumped by every
/// `begin` moved one line between the cores per transaction (3.6% of a read-only run's
/// CPU, 2026-12-08).
static NEXT_HANDLE: AtomicU64 = AtomicU64::new(1);

/// A running transaction (see the module doc). Pass [`Transaction::xid`] to the heap and
/// index calls that write or lock rows, and [`Transaction::snapshot`] to those that read.
#[derive(Debug)]
#[must_use = "a transaction left to drop aborts: commit it, or abort it explicitly"]
pub struct Transaction<'e> {
    engine: &'e Engine,
    /// This handle's number (see `NEXT_HANDLE`); 0 until its first savepoint.
    handle: u64,
    /// The top-level id, INVALID_XID until the first write.
    xid: Cell<Xid>,
    /// The tree the transaction's snapshots share (see the module doc).
    tree: Arc<OwnTree>,
    /// Cleared by `commit` and `abort`, so `Drop` does not end it again.
    open: bool,
    /// Open savepoints, innermost last (see the module doc).
    levels: RefCell<Vec<Level>>,
    /// Savepoint numbers handed out so far.
    savepoints: u32,
}

#[derive(Debug)]
struct Level {
    id: u32,
    /// The savepoint's subtransaction first, then those released into it; empty until
    /// something is written inside the savepoint.
    xids: Vec<Xid>,
}

/// A savepoint of a [`Transaction`] (what [`Transaction::savepoint`] returns), to roll
/// back to or release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Savepoint {
    handle: u64,
    id: u32,
}

impl<'e> Transaction<'e> {
    pub(super) fn new(engine: &'e Engine) -> Self {
        Transaction {
            engine,
            handle: 0,
            xid: Cell::new(INVALID_XID),
            tree: Arc::new(OwnTree::default()),
            open: true,
            levels: RefCell::new(Vec::new()),
            savepoints: 0,
        }
    }

    /// The id to write and lock rows with: the innermost open savepoint's subtransaction,
    /// or the transaction's own id. The first call assigns the transaction its id (and
    /// each open savepoint its own, outermost first); later calls return it. Fails only
    /// when ids cannot be assigned (the id space's stop margin, a commit-log I/O error).
    pub fn xid(&self) -> Result<Xid, EngineError> {
        let mut top = self.xid.get();
        if top == INVALID_XID {
            top = self.engine.txns.begin_with(self.tree.clone())?;
            self.xid.set(top);
        }
        let mut levels = self.levels.borrow_mut();
        let mut parent = top;
        for level in levels.iter_mut() {
            if level.xids.is_empty() {
                level.xids.push(self.engine.begin_subtransaction(parent)?);
            }
            parent = level.xids[0];
        }
        Ok(parent)
    }

    /// The transaction's top-level id, if it has one (it gets one at its first write:
    /// see [`Transaction::xid`]); what commits.
    pub fn top_xid(&self) -> Option<Xid> {
        Some(self.xid.get()).filter(|&x| x != INVALID_XID)
    }

    /// A snapshot for this transaction: everything committed before now, and its own
    /// writes, those made after the snapshot was taken included. Assigns no id.
    pub fn snapshot(&self) -> Snapshot {
        match self.top_xid() {
            Some(x) => self.engine.txns.snapshot(x),
            None => self.engine.txns.snapshot_unassigned(&self.tree),
        }
    }

    /// Open savepoints.
    pub fn depth(&self) -> usize {
        self.levels.borrow().len()
    }

    /// Sets a savepoint: a subtransaction of the current level, current from now on (its
    /// id is assigned at its first write).
    pub fn savepoint(&mut self) -> Result<Savepoint, EngineError> {
        if self.handle == 0 {
            self.handle = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
        }
        self.savepoints += 1;
        self.levels.get_mut().push(Level {
            id: self.savepoints,
            xids: Vec::new(),
        });
        Ok(Savepoint {
            handle: self.handle,
            id: self.savepoints,
        })
    }

    fn level_of(&self, sp: Savepoint) -> Result<usize, EngineError> {
        self.levels
            .borrow()
            .iter()
            .position(|l| l.id == sp.id && sp.handle == self.handle)
            .ok_or(EngineError::NoSavepoint {
                xid: self.xid.get(),
                id: sp.id,
            })
    }

    /// Undoes everything since `sp` was set: its subtransaction and every savepoint begun
    /// inside it abort (their rows become invisible, their row locks free), and `sp`
    /// begins again with a new subtransaction (it stays open, as in PostgreSQL). Writes no
    /// record when nothing was written since `sp`.
    pub fn rollback_to(&mut self, sp: Savepoint) -> Result<(), EngineError> {
        let k = self.level_of(sp)?;
        let levels = self.levels.get_mut();
        let gone: Vec<Xid> = levels[k..]
            .iter()
            .flat_map(|l| l.xids.iter().copied())
            .collect();
        self.engine.rollback_subtransactions(&gone)?;
        levels.truncate(k);
        levels.push(Level {
            id: sp.id,
            xids: Vec::new(),
        });
        Ok(())
    }

    /// Ends `sp` and every savepoint begun inside it, keeping their changes as part of
    /// the enclosing level (they commit or roll back with it).
    pub fn release(&mut self, sp: Savepoint) -> Result<(), EngineError> {
        let k = self.level_of(sp)?;
        let levels = self.levels.get_mut();
        let merged: Vec<Xid> = levels.drain(k..).flat_map(|l| l.xids.into_iter()).collect();
        if let Some(outer) = levels.last_mut() {
            debug_assert!(
                merged.is_empty() || !outer.xids.is_empty(),
                "an inner level with ids has an outer one with its own"
            );
            outer.xids.extend(merged);
        }
        Ok(())
    }

    /// Commits (see [`Engine::commit_transaction`]); returns the commit record's end, or
    /// `None` for a transaction that wrote nothing (it never had an id: no record, no
    /// flush).
    pub fn commit(mut self) -> Result<Option<Lsn>, EngineError> {
        self.open = false;
        match self.top_xid() {
            Some(x) => self.engine.commit_transaction(x).map(Some),
            None => Ok(None),
        }
    }

    /// Aborts (see [`Engine::abort_transaction`]); a transaction that wrote nothing has
    /// nothing to abort.
    pub fn abort(mut self) -> Result<(), EngineError> {
        self.open = false;
        match self.top_xid() {
            Some(x) => self.engine.abort_transaction(x),
            None => Ok(()),
        }
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if let (true, Some(x)) = (self.open, self.top_xid()) {
            // Nowhere to report an error from a drop: a failed abort leaves the log
            // failed (latched), and the next call on the engine reports it.
            if let Err(e) = self.engine.abort_transaction(x) {
                tracing::warn!("aborting transaction {x} on drop: {e}");
            }
        }
    }
}
