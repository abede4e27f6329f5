//! Transactions: ids, the commit log, the running set, snapshots and MVCC visibility.
//! Subtransactions (savepoints) have their own ids and a parent in the subtransaction log.
//! Row locks held by several transactions at once are multixacts (`multixact`).

pub mod clog;
pub mod multixact;
pub mod procarray;
pub mod subtrans;

pub use clog::{Clog, ClogError, XidStatus};
pub use multixact::{
    Member, MemberMode, MultiId, MultiPositions, MultiXact, MultiXactError, INVALID_MULTI,
};
pub use procarray::{Deadlock, OwnTree, Snapshot, TxnManager, MAX_CACHED_SUBXIDS};
pub use subtrans::Subtrans;

/// A transaction id (PostgreSQL's TransactionId). 0 is invalid, 1 is reserved for data
/// loaded by bootstrap/bulk load ("frozen"); normal ids start at `FIRST_NORMAL_XID`.
pub type Xid = u32;
/// The invalid transaction id: no transaction (its status reads as aborted).
pub const INVALID_XID: Xid = 0;
/// The frozen transaction id: data loaded by bootstrap or bulk load, always committed.
pub const FROZEN_XID: Xid = 1;
/// The first normal transaction id: the lowest assigned to a transaction.
pub const FIRST_NORMAL_XID: Xid = 3;

/// How many of the last 32-bit transaction ids (and multixact ids) are never handed out.
/// Ids are not frozen or reused yet, so the id space is a budget: past it, every
/// transaction that writes would fail. Assigning stops this far before the end with a
/// named error (PostgreSQL's xidStopLimit margin, 3,000,000 ids), leaving the data
/// readable and every running transaction able to end.
pub const XID_STOP_MARGIN: u32 = 3_000_000;

/// From this many ids before the stop (PostgreSQL's xidWarnLimit margin, 40,000,000 ids
/// before wraparound), every millionth id assigned logs a warning with how many are left.
pub const XID_WARN_MARGIN: u32 = 40_000_000;

/// Whether id `next` (of a 32-bit space of `what`: "transaction", "multixact") may be
/// handed out: false within `XID_STOP_MARGIN` of the end; every millionth id within
/// `XID_WARN_MARGIN` of the stop logs how many are left.
fn id_allowed(next: u32, what: &str) -> bool {
    let Some(left) = (u32::MAX - XID_STOP_MARGIN)
        .checked_sub(next)
        .filter(|&l| l > 0)
    else {
        return false;
    };
    if left <= XID_WARN_MARGIN && left % 1_000_000 == 0 {
        tracing::warn!(
            "{what} id {next}: {left} ids left before new {what}s are refused (ids are not frozen or reused)"
        );
    }
    true
}
