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
//! Invariants: a handle ends its transaction exactly once (commit, abort or drop); after
//! `commit` or `abort` returns, even with an error, the handle is consumed and its drop
//! does nothing more.
//!
//! Not yet (issue 16, parts 4 and 5): savepoints (`savepoint`, `rollback_to`, `release`)
//! need subtransactions, which need their own xids and the subtransaction SLRU.

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
}

impl<'e> Transaction<'e> {
    pub(super) fn new(engine: &'e Engine, xid: Xid) -> Self {
        Transaction {
            engine,
            xid,
            open: true,
        }
    }

    /// The transaction's id, for row writes, row locks and snapshots.
    pub fn xid(&self) -> Xid {
        self.xid
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
