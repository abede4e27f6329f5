//! The log's error.

use crate::types::Lsn;
use crate::vfs::IoError;

/// An error of the log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    /// A read, write or sync of a log file failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The log failed earlier (the first failure inside) and refuses further writes until the
    /// data directory is reopened.
    #[error("the log failed earlier and refuses further writes until the data directory is reopened: {0}")]
    Failed(#[source] Box<WalError>),
    /// A record too large for the log ring (`wal_buffers`).
    #[error("record of {len} bytes does not fit wal_buffers ({ring} bytes); raise wal_buffers")]
    TooLarge {
        /// The record's length, in bytes.
        len: usize,
        /// The ring's size, in bytes.
        ring: u64,
    },
    /// A flush asked for log past everything inserted (PostgreSQL: "xlog flush request not
    /// satisfied"): whoever asked holds an LSN the log never reached, such as a page
    /// written by a life of the log that recovery cut short.
    #[error(
        "log flush request {lsn} is not satisfied: the log was inserted only up to {inserted}"
    )]
    NotInserted {
        /// The LSN the flush asked for.
        lsn: Lsn,
        /// The insert position: the end of everything inserted.
        inserted: Lsn,
    },
    /// A change was made to shared pages but its record could not be inserted: the pages
    /// hold what the log does not, so none may be written (PostgreSQL PANICs here).
    #[error("a change to shared pages could not be logged ({0}); no dirty page will be written until the data directory is reopened")]
    Unlogged(#[source] Box<WalError>),
}

impl WalError {
    /// A copy, for the latched first failure that every later call reports.
    pub(super) fn duplicate(&self) -> WalError {
        match self {
            WalError::Io(e) => WalError::Io(e.duplicate()),
            WalError::Failed(first) => WalError::Failed(Box::new(first.duplicate())),
            WalError::TooLarge { len, ring } => WalError::TooLarge {
                len: *len,
                ring: *ring,
            },
            WalError::NotInserted { lsn, inserted } => WalError::NotInserted {
                lsn: *lsn,
                inserted: *inserted,
            },
            WalError::Unlogged(why) => WalError::Unlogged(Box::new(why.duplicate())),
        }
    }

    /// The OS error number behind this error (or behind the failure it reports again).
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            WalError::Io(e) => e.raw_os_error(),
            WalError::Failed(first) | WalError::Unlogged(first) => first.raw_os_error(),
            WalError::TooLarge { .. } | WalError::NotInserted { .. } => None,
        }
    }
}
