//! Buffer-pool errors.

use std::path::PathBuf;

use crate::page::PageProblem;
use crate::smgr::SmgrError;
use crate::types::{BufferTag, Lsn};

/// A buffer-pool error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BufferError {
    /// The storage manager failed (reading, writing or extending a relation file, ...).
    #[error(transparent)]
    Storage(#[from] SmgrError),
    /// A page read from storage was refused: bad checksum, unknown layout, or an LSN past
    /// the end of the log.
    #[error("invalid page {tag} in {path}: {problem}")]
    Corrupt {
        /// The page.
        tag: BufferTag,
        /// The segment file's path.
        path: PathBuf,
        /// What is wrong with it.
        problem: PageProblem,
    },
    /// Every buffer is pinned, so none can be evicted to load a page.
    #[error("all {nbuffers} buffers are pinned, none can be evicted to load {tag} (release pins, or raise shared_buffers)")]
    AllPinned {
        /// Buffers in the pool.
        nbuffers: usize,
        /// The page to be loaded.
        tag: BufferTag,
    },
    /// A buffer to be dropped stayed pinned or in I/O through every retry.
    #[error("cannot drop the buffer of {tag}: it stays pinned ({state})")]
    Pinned {
        /// The page the buffer holds.
        tag: BufferTag,
        /// The buffer's state word, described (refcount, usage count, flags).
        state: String,
    },
    /// Flushing the WAL before writing a page failed (WAL before data), so the page was not
    /// written.
    #[error("flushing the WAL to {lsn} before writing {tag} failed: {source}")]
    WalFlush {
        /// The page to be written (the first of a run).
        tag: BufferTag,
        /// The LSN the WAL had to be flushed to.
        lsn: Lsn,
        /// The log's error.
        #[source]
        source: super::WalFlushError,
    },
    /// Allocating the pool's page memory failed.
    #[error("allocating {bytes} bytes of page memory: {source}")]
    Memory {
        /// The size asked for, in bytes.
        bytes: u64,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The pool's options are not valid.
    #[error(transparent)]
    Config(#[from] crate::options::ConfigError),
    /// A buffer id past the end of the pool.
    #[error("no buffer {buffer}: the pool has {nbuffers} (ids 0 to {nbuffers} - 1)")]
    NoSuchBuffer {
        /// The buffer id asked for.
        buffer: u32,
        /// Buffers in the pool.
        nbuffers: usize,
    },
}

impl BufferError {
    /// The OS error number behind this error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            BufferError::Storage(e) => e.raw_os_error(),
            BufferError::Memory { source, .. } => source.raw_os_error(),
            // The log's error is opaque here: the OS error is in its source chain.
            BufferError::WalFlush { source, .. } => crate::vfs::os_error_in(&**source),
            _ => None,
        }
    }
}

/// The result of a buffer-pool operation.
pub type BufferResult<T> = Result<T, BufferError>;
