#![deny(missing_docs)]
//! bufpool: an embeddable, PostgreSQL-grade database buffer manager, with the storage
//! manager, write-ahead log, commit log and small transactional tables it needs.
//!
//! Open a data directory as an [`Engine`]: a buffer pool, a write-ahead log and a commit
//! log wired together, recovered on open. Every change is logged before its page can
//! reach disk, and a committed transaction survives a crash at any instant.
//!
//! ```no_run
//! use bufpool::table::{ColumnType, Schema, Tid};
//! use bufpool::{Database, Engine};
//!
//! # fn main() -> Result<(), bufpool::Error> {
//! // `Database::open("db")` with the default knobs; the engine's builder for others.
//! let db = Database::new(Engine::builder("db").shared_buffers(64 << 20).open()?.into());
//! // Tables and indexes by name: the catalog picks their relation numbers.
//! let schema = Schema::new(&[("id", ColumnType::Int8), ("owner", ColumnType::Char(8))]);
//! let accounts = db.create_table("accounts", schema)?;
//! let pkey = db.create_index("accounts_pkey", "accounts", "id", true)?;
//!
//! let x = db.begin()?;
//! let tid = accounts.insert(x.xid()?, b"alice 100")?; // its first write: an id
//! pkey.insert(x.xid()?, 1, tid.to_u64())?;
//! x.commit()?; // durable when this returns (synchronous_commit = on)
//!
//! let y = db.begin()?; // reads only: no id, no log record, no flush
//! let root = Tid::from_u64(pkey.get(1)?.expect("committed above"));
//! assert_eq!(accounts.fetch(&y.snapshot(), root)?.as_deref(), Some(&b"alice 100"[..]));
//! y.commit()?;
//! drop((accounts, pkey)); // handles share the engine: `Heap<'static>` can go to a thread
//! db.shutdown()?; // a checkpoint: the next open replays nothing
//! # Ok(())
//! # }
//! ```
//!
//! Handles borrow the engine (`Heap::open(&engine, rel)`, `Heap<'e>`) or share it
//! (`Heap::open(arc.clone(), rel)`, `Heap<'static>`): see [`EngineRef`]. The B-tree keys on
//! `i64`; [`index::key`] maps byte strings and unsigned integers to order-keeping keys.
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
//! - [`database`]: tables and indexes created and opened by name through the catalog.
//!
//! A pool without a log, for a page cache of your own: [`BufferPool::open`].
//!
//! Examples (`cargo run -p pgbufpool --example NAME`): `kv_store` (a key-value store on a
//! heap and a B-tree, surviving a restart), `page_cache` (the pool alone over a file
//! system of your own), `counter_service` (threads incrementing one transactional
//! counter, row locks and all).

pub mod buffer;
pub mod config;
pub mod database;
pub mod engine;
mod error;
pub(crate) mod hooks;
pub mod index;
pub(crate) mod invariants;
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
    BufferError, BufferPool, BufferRef, NoWal, PageReadGuard, PageWriteGuard, PoolMemory,
    PoolResize, Ring, RingKind, RingStats, WalFlush,
};
pub use config::{Config, ConfigError, HugePages, PoolSize};
pub use database::Database;
pub use engine::{
    create_wal_directory, wal_directory, Engine, EngineBuilder, EngineError, EngineRef,
    RecoveryReport,
};
pub use error::Error;
pub use index::IndexError;
pub use invariants::Violations;
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
