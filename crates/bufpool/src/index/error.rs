//! [`IndexError`]: what an index operation can fail with.
//!
//! Owns: the index's own failures (a duplicate key in a unique index, a structure that
//! fails its checks) and, wrapped unchanged, every failure of the layers below
//! ([`EngineError`]). Messages are those of the wrapped errors.

use crate::buffer::BufferError;
use crate::engine::EngineError;
use crate::options::ConfigError;

/// An error of an index operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// A failure below the index.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A unique index would hold a key twice.
    #[error("duplicate key {key} in unique index {index}")]
    DuplicateKey {
        /// The index's relation, as `tablespace/relation`.
        index: String,
        /// The key found twice.
        key: i64,
    },
    /// The structure failed a check (order, high keys, links, levels, a page's format).
    #[error("index {index} is corrupt: {reason}")]
    Corrupt {
        /// The index's relation, as `tablespace/relation`.
        index: String,
        /// What is wrong.
        reason: String,
    },
}

impl IndexError {
    /// The OS error number behind this error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            IndexError::Engine(e) => e.raw_os_error(),
            _ => None,
        }
    }
}

impl From<BufferError> for IndexError {
    fn from(e: BufferError) -> Self {
        IndexError::Engine(e.into())
    }
}

impl From<ConfigError> for IndexError {
    fn from(e: ConfigError) -> Self {
        IndexError::Engine(e.into())
    }
}
