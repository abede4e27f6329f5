//! Buffer-pool errors.

use std::path::PathBuf;

use crate::page::PageProblem;
use crate::smgr::SmgrError;
use crate::types::{BufferTag, Lsn};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BufferError {
    #[error(transparent)]
    Storage(#[from] SmgrError),
    #[error("invalid page {tag} in {path}: {problem}")]
    Corrupt {
        tag: BufferTag,
        path: PathBuf,
        problem: PageProblem,
    },
    #[error("all {nbuffers} buffers are pinned, none can be evicted to load {tag} (release pins, or raise shared_buffers)")]
    AllPinned { nbuffers: usize, tag: BufferTag },
    #[error("cannot drop the buffer of {tag}: it stays pinned ({state})")]
    Pinned { tag: BufferTag, state: String },
    #[error("flushing the WAL to {lsn} before writing {tag} failed: {source}")]
    WalFlush {
        tag: BufferTag,
        lsn: Lsn,
        #[source]
        source: super::WalFlushError,
    },
    #[error("allocating {bytes} bytes of page memory: {source}")]
    Memory {
        bytes: u64,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Config(#[from] crate::options::ConfigError),
    #[error("no buffer {buffer}: the pool has {nbuffers} (ids 0 to {nbuffers} - 1)")]
    NoSuchBuffer { buffer: u32, nbuffers: usize },
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

pub type BufferResult<T> = Result<T, BufferError>;
