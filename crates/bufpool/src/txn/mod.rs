//! Transactions: ids and their commit status. (Issue 5 builds snapshots, visibility and row
//! locks on this; so far it holds the commit log.)

pub mod clog;

pub use clog::{Clog, XidStatus};

/// A transaction id (PostgreSQL's TransactionId). 0 is invalid, 1 is reserved for data
/// loaded by bootstrap/bulk load ("frozen"); normal ids start at `FIRST_NORMAL_XID`.
pub type Xid = u32;
pub const INVALID_XID: Xid = 0;
pub const FROZEN_XID: Xid = 1;
pub const FIRST_NORMAL_XID: Xid = 3;
