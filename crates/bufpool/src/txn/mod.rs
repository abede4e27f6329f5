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
pub const INVALID_XID: Xid = 0;
pub const FROZEN_XID: Xid = 1;
pub const FIRST_NORMAL_XID: Xid = 3;
