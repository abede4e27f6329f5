//! bufpool: an embeddable, PostgreSQL-grade database buffer manager.
//!
//! Layers, bottom up (nothing imports upward): [`vfs`] (the only door to the OS),
//! [`smgr`] (relation files in segments), [`page`] (header and checksum), [`buffer`] (the
//! shared pool), with [`stats`] counting I/O like pg_stat_io and [`config`] holding knobs.
//! See docs/ARCHITECTURE.md for the map and the rules that hold everywhere.
//!
//! ```no_run
//! use std::sync::Arc;
//! use bufpool::{BufferPool, BufferTag, Config, ForkNumber, RealVfs, RelFileId};
//!
//! let mut config = Config::default();
//! config.set("shared_buffers", "64MB").unwrap();
//! let pool = BufferPool::open(Arc::new(RealVfs::new()), "db".as_ref(), &config, true).unwrap();
//! let rel = RelFileId::new(0, 16384);
//! pool.create_relation(rel, ForkNumber::Main).unwrap();
//! let page = pool.extend(rel, ForkNumber::Main).unwrap();
//! page.write()[100] = 42; // marks the buffer dirty
//! drop(page);
//! let page = pool.read(BufferTag::new(rel, ForkNumber::Main, 0)).unwrap();
//! assert_eq!(page.read()[100], 42);
//! drop(page);
//! pool.flush_all().unwrap();
//! pool.sync().unwrap();
//! ```

pub mod buffer;
pub mod config;
pub mod engine;
pub mod index;
pub mod options;
pub mod page;
pub mod slru;
pub mod smgr;
pub mod stats;
pub mod sync;
pub mod table;
pub mod txn;
pub mod types;
pub mod vfs;
pub mod wal;

pub use buffer::{
    BufferError, BufferPool, BufferRef, NoWal, PageReadGuard, PageWriteGuard, WalFlush,
};
pub use config::{Config, ConfigError, HugePages, PoolSize};
pub use engine::{Engine, EngineError, RecoveryReport};
pub use index::IndexError;
pub use smgr::{Smgr, SmgrError, SmgrOptions};
pub use stats::{IoContext, IoOp, IoStats, IoStatsSnapshot, IoWriter};
pub use table::{CatalogError, HeapError};
pub use types::{BlockNumber, BufferTag, ForkNumber, Lsn, RelFileId};
pub use vfs::{
    CrashChoice, CrashReport, FaultKind, FaultOp, FaultRule, FaultVfs, MemVfs, OpenOptions,
    RealVfs, SimVfs, Vfs, VfsFile,
};

/// Any error of the library, for an embedder that uses several layers at once (a
/// transaction that touches heaps and indexes). Each layer's own error converts into it;
/// messages are the wrapped error's.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Heap(#[from] HeapError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Buffer(#[from] BufferError),
}

impl Error {
    /// Whether a row-lock wait refused to close a cycle: abort the transaction and retry.
    pub fn is_deadlock(&self) -> bool {
        matches!(self, Error::Heap(HeapError::Deadlock(_)))
    }

    /// The OS error number behind this error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Error::Engine(e) => e.raw_os_error(),
            Error::Heap(e) => e.raw_os_error(),
            Error::Index(e) => e.raw_os_error(),
            Error::Buffer(e) => e.raw_os_error(),
            Error::Catalog(_) | Error::Config(_) => None,
        }
    }
}
