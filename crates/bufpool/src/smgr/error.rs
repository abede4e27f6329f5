//! Storage-manager errors: each names the file, the block where there is one, and keeps the
//! OS error (errno) as its source.

use std::io;
use std::path::PathBuf;

use crate::types::{BlockNumber, BufferTag};
use crate::vfs::IoError;

/// A storage-manager error: it names the file, and the block where there is one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SmgrError {
    /// Another process holds the data directory's lock file.
    #[error("data directory {dir} is in use by process {pid} (lock file {lock}); stop that process first")]
    DirectoryLocked {
        /// The data directory's path.
        dir: PathBuf,
        /// The lock file's path.
        lock: PathBuf,
        /// The holder's process id as read from the lock file (`(unknown)` if it was
        /// empty).
        pid: String,
    },
    /// The data directory cannot be used as it is.
    #[error("data directory {dir}: {problem}")]
    Directory {
        /// The data directory's path.
        dir: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// A tablespace that cannot be created or read.
    #[error(transparent)]
    Tablespace(#[from] TablespaceError),
    /// An OS error from an operation on a whole file (opening, locking, truncating,
    /// unlinking, ...).
    #[error(transparent)]
    Io(#[from] IoError),
    /// Reading pages from a segment file failed.
    #[error("reading {tag} from {path}: {source}")]
    Read {
        /// The page read (of a multi-page read, the first in that segment file).
        tag: BufferTag,
        /// The segment file's path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A read returned less than a whole page: the file is truncated or the block is beyond
    /// its end.
    #[error("reading {tag} from {path}: read only {got} of {want} bytes (file truncated or block beyond its end)")]
    ShortRead {
        /// The page that was read short.
        tag: BufferTag,
        /// The segment file's path.
        path: PathBuf,
        /// Bytes of that page read.
        got: usize,
        /// Bytes wanted: one page, the block size.
        want: usize,
    },
    /// Writing pages to a segment file failed.
    #[error("writing {tag} to {path}: {source}")]
    Write {
        /// The page written (of a multi-page write, the first in that segment file).
        tag: BufferTag,
        /// The segment file's path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A write wrote less than a whole page (often a full disk).
    #[error("writing {tag} to {path}: wrote only {got} of {want} bytes (check free disk space)")]
    ShortWrite {
        /// The page that was written short.
        tag: BufferTag,
        /// The segment file's path.
        path: PathBuf,
        /// Bytes of that page written.
        got: usize,
        /// Bytes wanted: one page, the block size.
        want: usize,
    },
    /// The fsync of a segment file or a directory failed; the failure is latched.
    #[error("fsync of {path} failed: {source}; data written since the last checkpoint must be recovered from the WAL")]
    Fsync {
        /// The path of the file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// An earlier fsync failed, so durability can no longer be promised until reopening.
    #[error("an earlier fsync of {path} failed ({first}); durability can no longer be promised: reopen the data directory to recover")]
    FsyncLatched {
        /// The path whose fsync failed first.
        path: PathBuf,
        /// The first failure's OS error, as text.
        first: String,
    },
    /// An extension would take a relation fork past the largest block number.
    #[error("block {block} is beyond the largest block number a relation may have")]
    BlockOutOfRange {
        /// The block number at issue (an extension reports the largest block number).
        block: BlockNumber,
    },
}

impl SmgrError {
    /// The OS error number behind this error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            SmgrError::Io(e) => e.raw_os_error(),
            SmgrError::Tablespace(e) => e.raw_os_error(),
            SmgrError::Read { source, .. }
            | SmgrError::Write { source, .. }
            | SmgrError::Fsync { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

/// The result of a storage-manager operation.
pub type SmgrResult<T> = Result<T, SmgrError>;

/// Wraps an OS error from a whole-file operation with the operation and the path.
pub(crate) fn file_err<'a>(
    op: &'static str,
    path: &'a std::path::Path,
) -> impl FnOnce(io::Error) -> SmgrError + 'a {
    move |source| SmgrError::Io(IoError::new(op, path, source))
}

/// A tablespace that cannot be created or read: which one, the path, and the reason or
/// the OS error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TablespaceError {
    /// The tablespace id or location cannot be used.
    #[error("tablespace {id}: {path}: {problem}")]
    Invalid {
        /// The tablespace's id.
        id: u32,
        /// The path at issue (the location, or the tablespace's link in the data
        /// directory).
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// A system call on the tablespace's location or link failed.
    #[error("tablespace {id}: {op} {path}: {source}")]
    Io {
        /// The tablespace's id.
        id: u32,
        /// The operation that failed (e.g. `listing the location`).
        op: &'static str,
        /// The path it acted on.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

impl TablespaceError {
    /// The OS error number behind this error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            TablespaceError::Io { source, .. } => source.raw_os_error(),
            TablespaceError::Invalid { .. } => None,
        }
    }
}
