//! The library's one error type, [`Error`]: each layer's own error converts into it, for
//! an embedder that uses several layers in one function (a transaction that touches heaps
//! and indexes). Messages are the wrapped error's.

use crate::buffer::BufferError;
use crate::config::ConfigError;
use crate::engine::EngineError;
use crate::index::IndexError;
use crate::smgr::SmgrError;
use crate::table::{CatalogError, HeapError};

/// Any error of the library, for an embedder that uses several layers at once (a
/// transaction that touches heaps and indexes). Each layer's own error converts into it;
/// messages are the wrapped error's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The engine's (open, recovery, commit, checkpoint).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A heap table's.
    #[error(transparent)]
    Heap(#[from] HeapError),
    /// A B-tree index's.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// The catalog's (names of tables and indexes).
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A knob's.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The buffer pool's.
    #[error(transparent)]
    Buffer(#[from] BufferError),
    /// The storage manager's (relation files).
    #[error(transparent)]
    Storage(#[from] SmgrError),
}

impl Error {
    /// Whether a row-lock wait refused to close a cycle: abort the transaction and retry.
    pub fn is_deadlock(&self) -> bool {
        matches!(self, Error::Heap(HeapError::Deadlock(_)))
    }

    /// Whether a table or index asked for by name does not exist
    /// ([`Database::table`](crate::Database::table), [`Database::index`](crate::Database::index)).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Catalog(CatalogError::NotFound { .. }))
    }

    /// The OS error number behind this error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Engine(e) => e.raw_os_error(),
            Error::Heap(e) => e.raw_os_error(),
            Error::Index(e) => e.raw_os_error(),
            Error::Buffer(e) => e.raw_os_error(),
            Error::Storage(e) => e.raw_os_error(),
            Error::Catalog(_) | Error::Config(_) => None,
        }
    }
}
