//! bufpool: an embeddable, PostgreSQL-grade database buffer manager, with the storage
//! manager, write-ahead log, commit log and small transactional tables it needs.
//!
//! Open a data directory as an [`Engine`]: a buffer pool, a write-ahead log and a commit
//! log wired together, recovered on open. Every change is logged before its page can
//! reach disk, and a committed transaction survives a crash at any instant.
//!
//! ```no_run
//! use bufpool::index::BTree;
//! use bufpool::table::{Heap, Tid};
//! use bufpool::{Engine, RelFileId};
//!
//! # fn main() -> Result<(), bufpool::Error> {
//! // `Engine::open("db")` with the default knobs; a builder for others.
//! let engine = Engine::builder("db").shared_buffers(64 << 20).open()?;
//! let accounts = Heap::create(&engine, RelFileId::new(0, 16384))?;
//! let pkey = BTree::create(&engine, RelFileId::new(0, 16385), true)?;
//!
//! let x = engine.begin()?;
//! let tid = accounts.insert(x.xid()?, b"alice 100")?; // its first write: an id
//! pkey.insert(x.xid()?, 1, tid.to_u64())?;
//! x.commit()?; // durable when this returns (synchronous_commit = on)
//!
//! let y = engine.begin()?; // reads only: no id, no log record, no flush
//! let root = Tid::from_u64(pkey.get(1)?.expect("committed above"));
//! assert_eq!(accounts.fetch(&y.snapshot(), root)?.as_deref(), Some(&b"alice 100"[..]));
//! y.commit()?;
//! engine.shutdown()?; // a checkpoint: the next open replays nothing
//! # Ok(())
//! # }
//! ```
//!
//! The layers, bottom up (nothing imports upward; `tests/layering.rs` checks it against
//! docs/ARCHITECTURE.md):
//! - `sync` (crate-private): the facade: std/parking_lot, or shuttle for model tests.
//! - [`options`] and [`types`]: sizes and durations in PostgreSQL units, the error for a
//!   bad option; identities ([`RelFileId`], [`BufferTag`], [`Lsn`]).
//! - [`vfs`]: the only door to the OS (real files, in memory; fault-injecting and
//!   power-loss-simulating ones are in [`testing`]).
//! - [`stats`]: I/O counters per writer, context and operation, like pg_stat_io.
//! - [`page`]: the page header and its CRC32C checksum; [`page_delta`]: the byte ranges a
//!   page change declares it wrote, which is what its WAL record carries.
//! - [`smgr`]: relation files in segments, the data directory, the fsync queue.
//! - [`slru`]: banked caches of checksummed pages of small flat files (the commit log's store).
//! - [`txn`]: transaction ids, the commit log, snapshots, MVCC visibility, row-lock waits.
//! - [`buffer`] and [`wal`]: the shared buffer pool and the write-ahead log (peers: the
//!   pool reaches the log only through its [`WalFlush`] hook).
//! - [`scan`]: read streams ([`ReadStream`]): blocks asked for in a known order, read
//!   ahead of use with adjacent misses combined into one vectored read.
//! - [`config`]: the knob table; builds every lower layer's options.
//! - [`engine`]: opens a directory, recovery, page logging, commits, checkpoints.
//! - [`table`] and [`index`]: heap relations (MVCC rows, HOT chains, VACUUM) and the B-link
//!   tree.
//!
//! A pool without a log, for a page cache of your own: [`BufferPool::open`].
//!
//! Examples (`cargo run -p pgbufpool --example NAME`): `kv_store` (a key-value store on a
//! heap and a B-tree, surviving a restart), `page_cache` (the pool alone over a file
//! system of your own), `counter_service` (threads incrementing one transactional
//! counter, row locks and all).

pub mod buffer;
pub mod config;
pub mod engine;
pub(crate) mod hooks;
pub mod index;
pub mod invariants;
pub mod metrics;
pub mod options;
pub mod page;
pub mod page_delta;
pub mod scan;
pub mod slru;
pub mod smgr;
pub mod stats;
pub(crate) mod sync;
pub mod table;
pub mod txn;
pub mod types;
pub mod vfs;
pub mod waits;
pub mod wal;

pub use buffer::{
    BufferError, BufferPool, BufferRef, NoWal, PageReadGuard, PageWriteGuard, Ring, RingKind,
    RingStats, WalFlush,
};
pub use config::{Config, ConfigError, HugePages, PoolSize};
pub use engine::{
    create_wal_directory, wal_directory, Engine, EngineBuilder, EngineError, RecoveryReport,
};
pub use index::IndexError;
pub use scan::{BlockSource, ReadStream, ReadStreamOptions, ReadStreamStats};
pub use smgr::{Smgr, SmgrError, SmgrOptions};
pub use stats::{IoContext, IoOp, IoStats, IoStatsSnapshot, IoWriter};
pub use table::{CatalogError, HeapError};
pub use types::{BlockNumber, BufferTag, ForkNumber, Lsn, RelFileId};
pub use vfs::aio::IoMethod;
pub use vfs::{IoError, MemVfs, OpenOptions, RealVfs, Vfs, VfsFile};

/// Test tools: I/O layers that fail chosen calls ([`FaultVfs`](testing::FaultVfs)) or
/// simulate a power cut ([`SimVfs`](testing::SimVfs)), for the crash and fault tests of
/// an engine built on bufpool.
pub mod testing {
    pub use crate::vfs::{
        Call, CallHook, CrashChoice, CrashReport, FaultKind, FaultOp, FaultRule, FaultVfs, HookVfs,
        SimVfs, SyncPoint, Verdict, VerdictHook,
    };
}

/// Any error of the library, for an embedder that uses several layers at once (a
/// transaction that touches heaps and indexes). Each layer's own error converts into it;
/// messages are the wrapped error's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    #[error(transparent)]
    Storage(#[from] SmgrError),
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
            Error::Storage(e) => e.raw_os_error(),
            Error::Catalog(_) | Error::Config(_) => None,
        }
    }
}
