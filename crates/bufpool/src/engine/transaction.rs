//! [`Transaction`]: a transaction as a handle that cannot be forgotten.
//!
//! [`Engine::begin`] returns one; [`Transaction::commit`] and [`Transaction::abort`] end
//! it, and dropping it without either aborts it (an abort record, then the commit log), so
//! an early return or a panic in the caller never leaves a transaction running, which
//! would hold back the pruning horizon (`TxnManager::oldest_xmin`) for good. The id-based
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
//! rollback aborts exactly the ids begun since the savepoint.

use super::{Engine, EngineError};
use crate::txn::Xid;
use crate::types::Lsn;

/// A running transaction (see the module doc). Pass [`Transaction::xid`] to the heap and
/// index calls that write or lock rows.
#[derive(Debug)]
#[must_use = "a transaction left to drop aborts: commit it, or abort it explicitly"]
pub struct Transaction<'e> {
    engine: &'e Engine,
    xid: Xid,
    /// Cleared by `commit` and `abort`, so `Drop` does not end it again.
    open: bool,
    /// Open savepoints, innermost last (see the module doc).
    levels: Vec<Level>,
    /// Savepoint numbers handed out so far.
    savepoints: u32,
}

#[derive(Debug)]
struct Level {
    id: u32,
    /// The savepoint's subtransaction first, then those released into it.
    xids: Vec<Xid>,
}

/// A savepoint of a [`Transaction`] (what [`Transaction::savepoint`] returns), to roll
/// back to or release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Savepoint {
    top: Xid,
    id: u32,
}

impl<'e> Transaction<'e> {
    pub(super) fn new(engine: &'e Engine, xid: Xid) -> Self {
        Transaction {
            engine,
            xid,
            open: true,
            levels: Vec::new(),
            savepoints: 0,
        }
    }

    /// The id to write rows, lock rows and take snapshots with: the innermost open
    /// savepoint's subtransaction, or the transaction's own id.
    pub fn xid(&self) -> Xid {
        self.levels.last().map_or(self.xid, |l| l.xids[0])
    }

    /// The top-level transaction's id (what commits).
    pub fn top_xid(&self) -> Xid {
        self.xid
    }

    /// Open savepoints.
    pub fn depth(&self) -> usize {
        self.levels.len()
    }

    /// Sets a savepoint: a subtransaction of the current level, current from now on.
    pub fn savepoint(&mut self) -> Result<Savepoint, EngineError> {
        let x = self.engine.begin_subtransaction(self.xid())?;
        self.savepoints += 1;
        self.levels.push(Level {
            id: self.savepoints,
            xids: vec![x],
        });
        Ok(Savepoint {
            top: self.xid,
            id: self.savepoints,
        })
    }

    fn level_of(&self, sp: Savepoint) -> Result<usize, EngineError> {
        self.levels
            .iter()
            .position(|l| l.id == sp.id && sp.top == self.xid)
            .ok_or(EngineError::NoSavepoint {
                xid: self.xid,
                id: sp.id,
            })
    }

    /// Undoes everything since `sp` was set: its subtransaction and every savepoint begun
    /// inside it abort (their rows become invisible, their row locks free), and `sp`
    /// begins again with a new subtransaction (it stays open, as in PostgreSQL).
    pub fn rollback_to(&mut self, sp: Savepoint) -> Result<(), EngineError> {
        let k = self.level_of(sp)?;
        let gone: Vec<Xid> = self.levels[k..]
            .iter()
            .flat_map(|l| l.xids.iter().copied())
            .collect();
        self.engine.rollback_subtransactions(&gone)?;
        self.levels.truncate(k);
        let x = self.engine.begin_subtransaction(self.xid())?;
        self.levels.push(Level {
            id: sp.id,
            xids: vec![x],
        });
        Ok(())
    }

    /// Ends `sp` and every savepoint begun inside it, keeping their changes as part of
    /// the enclosing level (they commit or roll back with it).
    pub fn release(&mut self, sp: Savepoint) -> Result<(), EngineError> {
        let k = self.level_of(sp)?;
        let merged: Vec<Xid> = self
            .levels
            .drain(k..)
            .flat_map(|l| l.xids.into_iter())
            .collect();
        if let Some(outer) = self.levels.last_mut() {
            outer.xids.extend(merged);
        }
        Ok(())
    }

    /// Commits (see [`Engine::commit_transaction`]); returns the commit record's end.
    pub fn commit(mut self) -> Result<Lsn, EngineError> {
        self.open = false;
        self.engine.commit_transaction(self.xid)
    }

    /// Aborts (see [`Engine::abort_transaction`]).
    pub fn abort(mut self) -> Result<(), EngineError> {
        self.open = false;
        self.engine.abort_transaction(self.xid)
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.open {
            // Nowhere to report an error from a drop: a failed abort leaves the log
            // failed (latched), and the next call on the engine reports it.
            if let Err(e) = self.engine.abort_transaction(self.xid) {
                tracing::warn!("aborting transaction {} on drop: {e}", self.xid);
            }
        }
    }
}
