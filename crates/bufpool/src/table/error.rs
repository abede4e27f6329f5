//! [`HeapError`]: what a heap operation can fail with.
//!
//! Owns: the heap's own failures (a tuple too large for a page, a row-lock wait that would
//! deadlock) and, wrapped unchanged, every failure of the layers below ([`EngineError`]:
//! pool, storage, log, commit log). Messages are those of the wrapped errors.

use crate::buffer::BufferError;
use crate::engine::EngineError;
use crate::options::ConfigError;
use crate::txn::{ClogError, Deadlock};

/// An error of a heap operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HeapError {
    /// A failure below the heap.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A tuple too large for a page.
    #[error("a tuple of {len} bytes does not fit a page (at most {max} bytes)")]
    TupleTooLarge {
        /// The tuple's data length, in bytes.
        len: usize,
        /// The most data a tuple may hold on a page of this size, in bytes.
        max: usize,
    },
    /// A row-lock wait would close a cycle of waiting transactions; abort this one.
    #[error(transparent)]
    Deadlock(#[from] Deadlock),
    /// `Heap::try_lock_row` (NOWAIT) found the row held against the lock asked for.
    #[error("could not lock the row: transaction {holder} holds it (NOWAIT)")]
    WouldBlock {
        /// The transaction holding the row.
        holder: u32,
    },
}

impl HeapError {
    /// The OS error number behind this error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            HeapError::Engine(e) => e.raw_os_error(),
            _ => None,
        }
    }
}

/// Lower-layer errors reach the heap's callers through [`EngineError`].
macro_rules! through_engine {
    ($($t:ty),*) => {$(
        impl From<$t> for HeapError {
            fn from(e: $t) -> Self {
                HeapError::Engine(e.into())
            }
        }
    )*};
}
through_engine!(BufferError, ClogError, ConfigError, crate::smgr::SmgrError);
