//! Storage-manager errors: each names the file, the block where there is one, and keeps the
//! OS error (errno) as its source.

use std::io;
use std::path::PathBuf;

use crate::types::{BlockNumber, BufferTag};
use crate::vfs::IoError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SmgrError {
    #[error("data directory {dir} is in use by process {pid} (lock file {lock}); stop that process first")]
    DirectoryLocked {
        dir: PathBuf,
        lock: PathBuf,
        pid: String,
    },
    #[error("data directory {dir}: {problem}")]
    Directory { dir: PathBuf, problem: String },
    #[error(transparent)]
    Tablespace(#[from] TablespaceError),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("reading {tag} from {path}: {source}")]
    Read {
        tag: BufferTag,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("reading {tag} from {path}: read only {got} of {want} bytes (file truncated or block beyond its end)")]
    ShortRead {
        tag: BufferTag,
        path: PathBuf,
        got: usize,
        want: usize,
    },
    #[error("writing {tag} to {path}: {source}")]
    Write {
        tag: BufferTag,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("writing {tag} to {path}: wrote only {got} of {want} bytes (check free disk space)")]
    ShortWrite {
        tag: BufferTag,
        path: PathBuf,
        got: usize,
        want: usize,
    },
    #[error("fsync of {path} failed: {source}; data written since the last checkpoint must be recovered from the WAL")]
    Fsync {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("an earlier fsync of {path} failed ({first}); durability can no longer be promised: reopen the data directory to recover")]
    FsyncLatched { path: PathBuf, first: String },
    #[error("block {block} is beyond the largest block number a relation may have")]
    BlockOutOfRange { block: BlockNumber },
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
    #[error("tablespace {id}: {path}: {problem}")]
    Invalid {
        id: u32,
        path: PathBuf,
        problem: String,
    },
    #[error("tablespace {id}: {op} {path}: {source}")]
    Io {
        id: u32,
        op: &'static str,
        path: PathBuf,
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
