//! Engine configuration: one table of knobs ([`KNOBS`]), like PostgreSQL's guc_tables.c,
//! and the [`Config`] it fills.
//!
//! Owns: the knob table (name, unit, default, minimum, maximum, parser, one-line
//! description, when a change takes effect), [`Config`] with its typed fields and typed
//! builder, and the translation of a `Config` into each lower layer's own options struct
//! ([`PoolOptions`], [`SmgrOptions`], [`WalOptions`], [`SlruSet`]): the layers below never
//! read this table. [`Config::set`], [`Config::get`], [`Config::allowed`], `bufpool config` and the
//! docs all read the same rows; a new knob is one row plus the field it sets.
//!
//! Invariants: every row's default parses and passes its own check; a `Config` that passed
//! [`Config::validate`] describes a pool, a storage layout and a log that can be built;
//! every error names the knob, the value given and what is allowed. Locks: none.

use std::time::Duration;

use crate::buffer::{
    shared_buffers_error, BgwriterOptions, CheckpointWriteOptions, PoolConfig, PoolOptions,
    WritebackScope, DEFAULT_BGWRITER_DELAY_MS, DEFAULT_BGWRITER_FLUSH_AFTER_BYTES,
    DEFAULT_BGWRITER_LRU_MULTIPLIER_THOUSANDTHS, MAX_BGWRITER_DELAY_MS,
    MAX_BGWRITER_FLUSH_AFTER_BYTES, MAX_BGWRITER_LRU_MAXPAGES,
    MAX_BGWRITER_LRU_MULTIPLIER_THOUSANDTHS, MAX_BUFFERS, MAX_COMBINE_PAGES,
    MAX_MAPPING_PARTITIONS, MAX_RING_BYTES, MIN_BGWRITER_DELAY_MS, MIN_BUFFERS, MIN_RING_BYTES,
};
use crate::page::{DEFAULT_PAGE_SIZE, PAGE_SIZES};
use crate::scan::{ReadStreamOptions, ScanOptions};
pub use crate::slru::{SlruDesign, SlruSet};
use crate::smgr::SmgrOptions;
use crate::vfs::aio::{AioOptions, IoMethod, DEFAULT_IO_WORKERS, MAX_IO_WORKERS};
use crate::wal::{SyncMethod, WalOptions, DEFAULT_PREPARE_SEGMENTS};

pub use crate::buffer::{
    BgwriterIo, BgwriterStrategy, HugePages, RingOptions, DEFAULT_MAPPING_PARTITIONS,
};
use crate::buffer::{
    DEFAULT_BULKREAD_RING_BYTES, DEFAULT_BULKWRITE_RING_BYTES, DEFAULT_VACUUM_RING_BYTES,
};
pub use crate::options::{format_size, parse_bool, parse_ms, parse_size, ConfigError};
pub use crate::scan::SeqscanStrategy;

/// Size of the buffer pool: in bytes, or as a number of buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolSize {
    Bytes(u64),
    Buffers(u64),
}

/// Default pool: 128 MiB, PostgreSQL's default shared_buffers.
pub const DEFAULT_SHARED_BUFFERS_BYTES: u64 = 128 << 20;
/// Default relation segment: 1 GiB, PostgreSQL's RELSEG_SIZE × BLCKSZ.
pub const DEFAULT_SEGMENT_SIZE_BYTES: u64 = 1 << 30;
/// Largest segment: 64 GiB keeps every block offset within a segment far from overflow.
pub const MAX_SEGMENT_SIZE_BYTES: u64 = 64 << 30;
/// Default checkpoint_timeout: PostgreSQL's 5 minutes.
pub const DEFAULT_CHECKPOINT_TIMEOUT_MS: u64 = 300_000;
/// checkpoint_timeout bounds: PostgreSQL's 30 s to 1 day.
pub const MIN_CHECKPOINT_TIMEOUT_MS: u64 = 30_000;
pub const MAX_CHECKPOINT_TIMEOUT_MS: u64 = 86_400_000;
/// Largest max_wal_size and min_wal_size (PostgreSQL allows more; 1 TB is plenty here).
pub const MAX_WAL_SIZE: u64 = 1 << 40;
/// Largest checkpoint_flush_after: PostgreSQL's 2 MB.
pub const MAX_CHECKPOINT_FLUSH_AFTER: u64 = 2 << 20;
/// Largest io_combine_limit: 1 MB (PostgreSQL 18's io_max_combine_limit).
pub const MAX_IO_COMBINE_LIMIT: u64 = 1 << 20;
/// Largest effective_io_concurrency: PostgreSQL's 1000.
pub const MAX_EFFECTIVE_IO_CONCURRENCY: u64 = 1000;
/// Default effective_io_concurrency: PostgreSQL 18's 16 combined reads in flight per
/// stream (its default rose from 1 to 16 in 18, measured on SSDs).
pub const DEFAULT_EFFECTIVE_IO_CONCURRENCY: u64 = 16;
/// Most checkpoint writer threads.
pub const MAX_CHECKPOINT_WRITERS: u64 = 64;
/// Most threads writing a bgwriter round's pages (`bgwriter_writers`).
pub const MAX_BGWRITER_WRITERS: u64 = 32;
pub use crate::buffer::DEFAULT_BGWRITER_WRITERS;
/// Most commit-log pages `transaction_buffers` may ask for (PostgreSQL's limit).
pub const MAX_TRANSACTION_BUFFERS: u64 = 131_072;
/// Automatic `transaction_buffers`: shared_buffers / 512 pages, within these bounds.
pub const AUTO_TRANSACTION_BUFFERS: std::ops::RangeInclusive<u64> = 128..=1024;
/// Automatic `subtransaction_buffers`: shared_buffers / 512 pages within PostgreSQL 17's
/// bounds (16..1024).
pub const AUTO_SUBTRANSACTION_BUFFERS: std::ops::RangeInclusive<u64> = 16..=1024;
/// Default `multixact_offset_buffers`: PostgreSQL 17's 16 pages.
pub const DEFAULT_MULTIXACT_OFFSET_BUFFERS: u64 = 16;
/// Default `multixact_member_buffers`: PostgreSQL 17's 32 pages.
pub const DEFAULT_MULTIXACT_MEMBER_BUFFERS: u64 = 32;
/// Slots per SLRU bank: every SLRU size knob is a multiple of it (PostgreSQL 17 rejects
/// other values, and rounds its automatic sizes down to it).
pub const SLRU_BANK_SIZE: u64 = crate::slru::BANK_SIZE as u64;
/// Default WAL segment: PostgreSQL's 16 MiB.
pub const DEFAULT_WAL_SEGMENT_SIZE: u64 = 16 << 20;
/// WAL segment sizes allowed: powers of two in this range (PostgreSQL allows 1 MiB..1 GiB;
/// smaller ones are allowed here for tests that crash after every I/O).
pub const MIN_WAL_SEGMENT_SIZE: u64 = 64 << 10;
pub const MAX_WAL_SEGMENT_SIZE: u64 = 1 << 30;
/// wal_buffers bounds (the automatic size is shared_buffers / 32 clamped to 64kB..16MB,
/// as PostgreSQL does).
pub const MIN_WAL_BUFFERS: u64 = 64 << 10;
pub const MAX_WAL_BUFFERS: u64 = 1 << 30;
/// wal_buffers must hold this many pages (a record may carry several full-page images and
/// must fit the ring with a margin); the automatic size holds twice as many.
pub const WAL_BUFFERS_MIN_PAGES: u64 = 8;
/// Default WAL writer delay: PostgreSQL's 200 ms. It is also the loss window of an
/// asynchronous commit: a crash loses the commits of at most about three delays (the
/// writer flushes every delay; PostgreSQL documents the same bound).
pub const DEFAULT_WAL_WRITER_DELAY_MS: u64 = 200;
pub const MAX_WAL_WRITER_DELAY_MS: u64 = 10_000;
/// commit_delay bounds: PostgreSQL's 0 to 100000 microseconds (default 0, off).
pub const MAX_COMMIT_DELAY_US: u64 = 100_000;
/// commit_siblings bounds: PostgreSQL's 0 to 1000 (default 5).
pub const MAX_COMMIT_SIBLINGS: u64 = 1000;
/// Largest wal_syncs_in_flight: past a few, each leader's batch only gets smaller.
pub const MAX_WAL_SYNCS_IN_FLIGHT: u64 = 8;
/// Largest wal_writer_flush_after (PostgreSQL's bound is larger; past wal_buffers' own
/// largest size it would never trigger before the ring is full).
pub const MAX_WAL_WRITER_FLUSH_AFTER: u64 = 1 << 30;

/// The unit of a knob's value, and how a bare number is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// on/off (also true/false, yes/no, 1/0).
    Bool,
    /// One of a fixed list of words.
    Enum,
    /// A plain count.
    Count,
    /// Bytes, with PostgreSQL's units kB, MB, GB, TB (powers of 1024); bare = bytes.
    Bytes,
    /// A pool size: a bare number counts buffers, a size with a unit is bytes.
    BuffersOrBytes,
    /// A duration in ms, s, min, h or d; a bare number is milliseconds.
    Ms,
    /// A duration in ms, s, min, h or d; a bare number is seconds (PostgreSQL's unit).
    S,
    /// A decimal number with at most three fractional digits (`2.0`, `1.25`), held in
    /// thousandths so the config stays `Eq`.
    Decimal,
}

impl Unit {
    /// The unit as `bufpool config` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Bool => "bool",
            Unit::Enum => "enum",
            Unit::Count => "count",
            Unit::Bytes => "bytes",
            Unit::BuffersOrBytes => "buffers or bytes",
            Unit::Ms => "ms",
            Unit::S => "s",
            Unit::Decimal => "decimal",
        }
    }
}

/// When a changed value takes effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Fixed when a data directory is created; an existing directory keeps its own.
    Creation,
    /// Read when the engine (or pool) is opened.
    Open,
}

impl Effect {
    pub fn name(self) -> &'static str {
        match self {
            Effect::Creation => "at creation",
            Effect::Open => "at open",
        }
    }
}

/// A parsed knob value, before the row stores it in a [`Config`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    Bool(bool),
    /// Index into the row's word list.
    Word(usize),
    /// A count, bytes, milliseconds or thousandths, by the row's unit.
    Int(u64),
    /// A pool size given in buffers (only for [`Unit::BuffersOrBytes`]).
    Buffers(u64),
    /// "auto" (or -1): derived from other knobs.
    Auto,
}

/// A rule over the whole config, with its text for "allowed" (empty: stated elsewhere).
type Rule = (fn(&Config) -> bool, &'static str);

/// One row of the knob table.
pub struct Knob {
    pub name: &'static str,
    pub unit: Unit,
    /// The default, as `set` accepts it ("auto" where it is derived from the pool).
    pub default: &'static str,
    /// Inclusive bounds of an integer value, in the unit's base (count, bytes, ms).
    pub min: u64,
    pub max: u64,
    /// The words of an [`Unit::Enum`] knob.
    pub words: &'static [&'static str],
    /// The value must be a power of two.
    pub pow2: bool,
    /// "auto" (or -1) is accepted.
    pub auto: bool,
    /// One line for `bufpool config` and the docs.
    pub description: &'static str,
    pub effect: Effect,
    /// Extra rule checked against the whole config (relations between knobs); the second
    /// field is its text in "allowed".
    check: Option<Rule>,
    store: fn(&mut Config, Value),
    load: fn(&Config) -> Value,
}

impl std::fmt::Debug for Knob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Knob").field("name", &self.name).finish()
    }
}

const fn row(
    name: &'static str,
    unit: Unit,
    default: &'static str,
    description: &'static str,
    store: fn(&mut Config, Value),
    load: fn(&Config) -> Value,
) -> Knob {
    Knob {
        name,
        unit,
        default,
        min: 0,
        max: u64::MAX,
        words: &[],
        pow2: false,
        auto: false,
        description,
        effect: Effect::Open,
        check: None,
        store,
        load,
    }
}

fn int(v: Value) -> u64 {
    match v {
        Value::Int(n) | Value::Buffers(n) => n,
        other => unreachable!("an integer knob got {other:?}"),
    }
}
fn flag(v: Value) -> bool {
    matches!(v, Value::Bool(true))
}
fn word(v: Value) -> usize {
    match v {
        Value::Word(i) => i,
        other => unreachable!("an enum knob got {other:?}"),
    }
}

const SLRU_DESIGNS: [SlruDesign; 3] = SlruDesign::ALL;
/// The rule text of the SLRU size knobs.
const WHOLE_BANKS: &str = "a multiple of 16 (whole SLRU banks)";
const HUGE_PAGES: [HugePages; 3] = [HugePages::Try, HugePages::On, HugePages::Off];
const BGWRITER_STRATEGIES: [BgwriterStrategy; 4] = BgwriterStrategy::ALL;
const BGWRITER_IOS: [BgwriterIo; 2] = BgwriterIo::ALL;
const IO_METHODS: [IoMethod; 3] = IoMethod::ALL;
const SYNC_METHODS: [SyncMethod; 3] = [
    SyncMethod::Fdatasync,
    SyncMethod::Fsync,
    SyncMethod::OpenDatasync,
];

/// Every knob. Order is the order `bufpool config` prints.
pub static KNOBS: &[Knob] = &[
    Knob {
        min: MIN_BUFFERS,
        max: MAX_BUFFERS,
        check: Some((|c| c.nbuffers_checked().is_ok(), "")),
        ..row(
            "shared_buffers",
            Unit::BuffersOrBytes,
            "128MB",
            "size of the buffer pool",
            |c, v| {
                c.shared_buffers = match v {
                    Value::Buffers(n) => PoolSize::Buffers(n),
                    v => PoolSize::Bytes(int(v)),
                }
            },
            |c| match c.shared_buffers {
                PoolSize::Bytes(b) => Value::Int(b),
                PoolSize::Buffers(n) => Value::Buffers(n),
            },
        )
    },
    Knob {
        min: 4096,
        max: 32768,
        pow2: true,
        effect: Effect::Creation,
        ..row(
            "block_size",
            Unit::Bytes,
            "8kB",
            "page size, fixed when a data directory is created",
            |c, v| c.block_size = int(v) as usize,
            |c| Value::Int(c.block_size as u64),
        )
    },
    Knob {
        min: 4096,
        max: MAX_SEGMENT_SIZE_BYTES,
        effect: Effect::Creation,
        check: Some((
            |c| c.segment_size % c.block_size as u64 == 0,
            "a multiple of block_size",
        )),
        ..row(
            "segment_size",
            Unit::Bytes,
            "1GB",
            "size of one relation segment file, fixed at creation",
            |c, v| c.segment_size = int(v),
            |c| Value::Int(c.segment_size),
        )
    },
    Knob {
        min: 1,
        max: MAX_MAPPING_PARTITIONS as u64,
        pow2: true,
        ..row(
            "buffer_mapping_partitions",
            Unit::Count,
            "128",
            "lock partitions of the buffer mapping table",
            |c, v| c.buffer_mapping_partitions = int(v) as usize,
            |c| Value::Int(c.buffer_mapping_partitions as u64),
        )
    },
    Knob {
        words: &["try", "on", "off"],
        ..row(
            "huge_pages",
            Unit::Enum,
            "try",
            "use huge pages for page memory: try, on, off",
            |c, v| c.huge_pages = HUGE_PAGES[word(v)],
            |c| Value::Word(HUGE_PAGES.iter().position(|h| *h == c.huge_pages).unwrap()),
        )
    },
    row(
        "io_direct",
        Unit::Bool,
        "off",
        "open data files with O_DIRECT (bypass the OS page cache)",
        |c, v| c.io_direct = flag(v),
        |c| Value::Bool(c.io_direct),
    ),
    row(
        "synchronous_commit",
        Unit::Bool,
        "on",
        "a commit waits until its WAL is durable",
        |c, v| c.synchronous_commit = flag(v),
        |c| Value::Bool(c.synchronous_commit),
    ),
    row(
        "early_lock_release",
        Unit::Bool,
        "on",
        "with synchronous_commit on: a committing transaction ends (its row locks free, its outcome visible) once its commit record is in the log, then waits for it to be durable; every later commit flushes past it",
        |c, v| c.early_lock_release = flag(v),
        |c| Value::Bool(c.early_lock_release),
    ),
    Knob {
        words: &["central", "banks", "banks_locks_lru"],
        ..row(
            "slru_design",
            Unit::Enum,
            "banks_locks_lru",
            "SLRU caches: central (one lock, one LRU counter, linear search: the 2023 design), banks (per-bank search under one lock), banks_locks_lru (a lock and an LRU counter per bank)",
            |c, v| c.slru_design = SLRU_DESIGNS[word(v)],
            |c| Value::Word(SLRU_DESIGNS.iter().position(|d| *d == c.slru_design).unwrap()),
        )
    },
    Knob {
        min: SLRU_BANK_SIZE,
        max: MAX_TRANSACTION_BUFFERS,
        auto: true,
        check: Some((
            |c| c.transaction_buffers.is_none_or(|n| n % SLRU_BANK_SIZE == 0),
            WHOLE_BANKS,
        )),
        ..row(
            "transaction_buffers",
            Unit::Count,
            "auto",
            "commit-log pages cached in memory; auto = shared_buffers/512 within 128..1024",
            |c, v| {
                c.transaction_buffers = match v {
                    Value::Auto => None,
                    v => Some(int(v)),
                }
            },
            |c| c.transaction_buffers.map_or(Value::Auto, Value::Int),
        )
    },
    Knob {
        min: SLRU_BANK_SIZE,
        max: MAX_TRANSACTION_BUFFERS,
        auto: true,
        check: Some((
            |c| c.subtransaction_buffers.is_none_or(|n| n % SLRU_BANK_SIZE == 0),
            WHOLE_BANKS,
        )),
        ..row(
            "subtransaction_buffers",
            Unit::Count,
            "auto",
            "subtransaction-parent pages cached in memory (the subtransaction log, read when a snapshot overflowed); auto = shared_buffers/512 within 16..1024",
            |c, v| {
                c.subtransaction_buffers = match v {
                    Value::Auto => None,
                    v => Some(int(v)),
                }
            },
            |c| c.subtransaction_buffers.map_or(Value::Auto, Value::Int),
        )
    },
    Knob {
        min: SLRU_BANK_SIZE,
        max: MAX_TRANSACTION_BUFFERS,
        check: Some((
            |c| c.multixact_offset_buffers % SLRU_BANK_SIZE == 0,
            WHOLE_BANKS,
        )),
        ..row(
            "multixact_offset_buffers",
            Unit::Count,
            "16",
            "multixact-offset pages cached in memory (PostgreSQL 17's default 16)",
            |c, v| c.multixact_offset_buffers = int(v),
            |c| Value::Int(c.multixact_offset_buffers),
        )
    },
    Knob {
        min: SLRU_BANK_SIZE,
        max: MAX_TRANSACTION_BUFFERS,
        check: Some((
            |c| c.multixact_member_buffers % SLRU_BANK_SIZE == 0,
            WHOLE_BANKS,
        )),
        ..row(
            "multixact_member_buffers",
            Unit::Count,
            "32",
            "multixact-member pages cached in memory (PostgreSQL 17's default 32)",
            |c, v| c.multixact_member_buffers = int(v),
            |c| Value::Int(c.multixact_member_buffers),
        )
    },
    row(
        "full_page_writes",
        Unit::Bool,
        "on",
        "log a full page image on the first change after a checkpoint",
        |c, v| c.full_page_writes = flag(v),
        |c| Value::Bool(c.full_page_writes),
    ),
    Knob {
        words: &["off", "lz4"],
        ..row(
            "wal_compression",
            Unit::Enum,
            "lz4",
            "compress full-page images in the WAL, and the bytes of a change of 1 kB or more when that is smaller: off, lz4 (PostgreSQL's wal_compression; its default is off)",
            |c, v| c.wal_compression = word(v) == 1,
            |c| Value::Word(usize::from(c.wal_compression)),
        )
    },
    Knob {
        min: MIN_WAL_SEGMENT_SIZE,
        max: MAX_WAL_SEGMENT_SIZE,
        pow2: true,
        ..row(
            "wal_segment_size",
            Unit::Bytes,
            "16MB",
            "size of one WAL segment file",
            |c, v| c.wal_segment_size = int(v),
            |c| Value::Int(c.wal_segment_size),
        )
    },
    Knob {
        min: MIN_WAL_BUFFERS,
        max: MAX_WAL_BUFFERS,
        auto: true,
        check: Some((
            |c| {
                c.wal_buffers
                    .is_none_or(|b| b >= WAL_BUFFERS_MIN_PAGES * c.block_size as u64)
            },
            "at least 8 pages of block_size",
        )),
        ..row(
            "wal_buffers",
            Unit::Bytes,
            "auto",
            "in-memory WAL ring; auto = shared_buffers/32 within 64kB..16MB",
            |c, v| {
                c.wal_buffers = match v {
                    Value::Auto => None,
                    v => Some(int(v)),
                }
            },
            |c| c.wal_buffers.map_or(Value::Auto, Value::Int),
        )
    },
    Knob {
        words: &["fdatasync", "fsync", "open_datasync"],
        ..row(
            "wal_sync_method",
            Unit::Enum,
            "fdatasync",
            "how the WAL is made durable: fdatasync, fsync, open_datasync",
            |c, v| c.wal_sync_method = SYNC_METHODS[word(v)],
            |c| {
                Value::Word(
                    SYNC_METHODS
                        .iter()
                        .position(|m| *m == c.wal_sync_method)
                        .unwrap(),
                )
            },
        )
    },
    Knob {
        min: 1,
        max: MAX_WAL_WRITER_DELAY_MS,
        ..row(
            "wal_writer_delay",
            Unit::Ms,
            "200ms",
            "how often the WAL writer flushes when synchronous_commit is off",
            |c, v| c.wal_writer_delay_ms = int(v),
            |c| Value::Int(c.wal_writer_delay_ms),
        )
    },
    row(
        "wal_writer",
        Unit::Bool,
        "on",
        "run the WAL writer thread (off: the flush leader prepares log segments itself, and \
         asynchronous commits wait for the next flush: a synchronous commit, a checkpoint, a \
         full log buffer or the caller's)",
        |c, v| c.wal_writer = flag(v),
        |c| Value::Bool(c.wal_writer),
    ),
    Knob {
        min: 0,
        max: MAX_WAL_WRITER_FLUSH_AFTER,
        ..row(
            "wal_writer_flush_after",
            Unit::Bytes,
            "1MB",
            "with synchronous_commit off: unwritten WAL (or a quarter of wal_buffers, if less) at which an insert wakes the WAL writer to write and sync it, so the WAL buffers never fill (0: only wal_writer_delay wakes it)",
            |c, v| c.wal_writer_flush_after = int(v),
            |c| Value::Int(c.wal_writer_flush_after),
        )
    },
    Knob {
        min: 0,
        max: MAX_COMMIT_DELAY_US,
        ..row(
            "commit_delay",
            Unit::Count,
            "0",
            "microseconds a WAL flush leader waits for more commits to join its sync, when at least commit_siblings other threads are flushing (0: off)",
            |c, v| c.commit_delay_us = int(v),
            |c| Value::Int(c.commit_delay_us),
        )
    },
    Knob {
        min: 0,
        max: MAX_COMMIT_SIBLINGS,
        ..row(
            "commit_siblings",
            Unit::Count,
            "5",
            "other threads flushing the WAL needed before a leader waits commit_delay",
            |c, v| c.commit_siblings = int(v),
            |c| Value::Int(c.commit_siblings),
        )
    },
    Knob {
        min: 1,
        max: MAX_WAL_SYNCS_IN_FLIGHT,
        ..row(
            "wal_syncs_in_flight",
            Unit::Count,
            "1",
            "WAL flush leaders that may sync at once (1: each sync starts after the previous one ended; 2 or more: the next leader syncs while the previous sync runs; the durable end moves in log order either way)",
            |c, v| c.wal_syncs_in_flight = int(v),
            |c| Value::Int(c.wal_syncs_in_flight),
        )
    },
    Knob {
        min: MIN_CHECKPOINT_TIMEOUT_MS,
        max: MAX_CHECKPOINT_TIMEOUT_MS,
        ..row(
            "checkpoint_timeout",
            Unit::S,
            "5min",
            "time between automatic checkpoints (30s to 1d)",
            |c, v| c.checkpoint_timeout_ms = int(v),
            |c| Value::Int(c.checkpoint_timeout_ms),
        )
    },
    row(
        "checkpointer",
        Unit::Bool,
        "on",
        "run the checkpointer thread (off: checkpoints only when asked)",
        |c, v| c.checkpointer = flag(v),
        |c| Value::Bool(c.checkpointer),
    ),
    Knob {
        min: 0,
        max: 1000,
        ..row(
            "checkpoint_completion_target",
            Unit::Decimal,
            "0.9",
            "spread a checkpoint's writes over this fraction of the interval (0: at once)",
            |c, v| c.checkpoint_completion_target_thousandths = int(v) as u32,
            |c| Value::Int(u64::from(c.checkpoint_completion_target_thousandths)),
        )
    },
    Knob {
        min: 2 * MIN_WAL_SEGMENT_SIZE,
        max: MAX_WAL_SIZE,
        check: Some((
            |c| c.max_wal_size >= 2 * c.wal_segment_size && c.min_wal_size <= c.max_wal_size,
            "at least two WAL segments and at least min_wal_size",
        )),
        ..row(
            "max_wal_size",
            Unit::Bytes,
            "1GB",
            "WAL written since the last checkpoint's redo point that triggers a checkpoint",
            |c, v| c.max_wal_size = int(v),
            |c| Value::Int(c.max_wal_size),
        )
    },
    Knob {
        min: 2 * MIN_WAL_SEGMENT_SIZE,
        max: MAX_WAL_SIZE,
        check: Some((
            |c| c.min_wal_size >= 2 * c.wal_segment_size && c.min_wal_size <= c.max_wal_size,
            "at least two WAL segments and at most max_wal_size",
        )),
        ..row(
            "min_wal_size",
            Unit::Bytes,
            "80MB",
            "old WAL kept for recycling into new segments instead of removed",
            |c, v| c.min_wal_size = int(v),
            |c| Value::Int(c.min_wal_size),
        )
    },
    row(
        "checkpoint_sort",
        Unit::Bool,
        "on",
        "write checkpoint pages sorted by file and block, balanced across tablespaces",
        |c, v| c.checkpoint_sort = flag(v),
        |c| Value::Bool(c.checkpoint_sort),
    ),
    Knob {
        min: 0,
        max: MAX_CHECKPOINT_FLUSH_AFTER,
        ..row(
            "checkpoint_flush_after",
            Unit::Bytes,
            "256kB",
            "ask the OS to write back after this much checkpoint output (0: never)",
            |c, v| c.checkpoint_flush_after = int(v),
            |c| Value::Int(c.checkpoint_flush_after),
        )
    },
    Knob {
        words: &["tablespace", "shared"],
        ..row(
            "checkpoint_writeback_context",
            Unit::Enum,
            "tablespace",
            "writeback hints collected per tablespace or in one shared context",
            |c, v| c.checkpoint_writeback_shared = word(v) == 1,
            |c| Value::Word(usize::from(c.checkpoint_writeback_shared)),
        )
    },
    Knob {
        min: 4096,
        max: MAX_IO_COMBINE_LIMIT,
        ..row(
            "io_combine_limit",
            Unit::Bytes,
            "128kB",
            "largest run of adjacent pages read or written with one call (one page: no combining)",
            |c, v| c.io_combine_limit = int(v),
            |c| Value::Int(c.io_combine_limit),
        )
    },
    Knob {
        words: &["sync", "worker", "io_uring"],
        ..row(
            "io_method",
            Unit::Enum,
            "worker",
            "how read streams run reads ahead of use: sync (inline), worker (I/O threads), \
             io_uring (falls back to worker where unavailable)",
            |c, v| c.io_method = IO_METHODS[word(v)],
            |c| Value::Word(IO_METHODS.iter().position(|m| *m == c.io_method).unwrap()),
        )
    },
    Knob {
        min: 1,
        max: MAX_IO_WORKERS as u64,
        ..row(
            "io_workers",
            Unit::Count,
            "3",
            "I/O threads of io_method = worker (and of its fallback from io_uring)",
            |c, v| c.io_workers = int(v) as usize,
            |c| Value::Int(c.io_workers as u64),
        )
    },
    Knob {
        min: 0,
        max: MAX_EFFECTIVE_IO_CONCURRENCY,
        ..row(
            "effective_io_concurrency",
            Unit::Count,
            "16",
            "combined reads a read stream keeps in flight (0: one read at a time, no look-ahead)",
            |c, v| c.effective_io_concurrency = int(v),
            |c| Value::Int(c.effective_io_concurrency),
        )
    },
    Knob {
        min: 1,
        max: MAX_CHECKPOINT_WRITERS,
        ..row(
            "checkpoint_writers",
            Unit::Count,
            "1",
            "threads writing a checkpoint's pages",
            |c, v| c.checkpoint_writers = int(v) as usize,
            |c| Value::Int(c.checkpoint_writers as u64),
        )
    },
    Knob {
        words: &["fsync", "open_datasync"],
        ..row(
            "checkpoint_sync_method",
            Unit::Enum,
            "fsync",
            "fsync: buffered writes, fsync at the end; open_datasync: the checkpointer and \
             bgwriter write through O_DSYNC files",
            |c, v| c.checkpoint_open_datasync = word(v) == 1,
            |c| Value::Word(usize::from(c.checkpoint_open_datasync)),
        )
    },
    row(
        "log_checkpoints",
        Unit::Bool,
        "on",
        "log a line per checkpoint (tracing target bufpool::checkpoint)",
        |c, v| c.log_checkpoints = flag(v),
        |c| Value::Bool(c.log_checkpoints),
    ),
    row(
        "bgwriter",
        Unit::Bool,
        "on",
        "run the background writer thread (off: backends clean every buffer they reuse)",
        |c, v| c.bgwriter = flag(v),
        |c| Value::Bool(c.bgwriter),
    ),
    Knob {
        words: &["lru", "dirty-chain", "mini-checkpoint", "victim-queue"],
        ..row(
            "bgwriter_strategy",
            Unit::Enum,
            "lru",
            "what a bgwriter round does: lru, dirty-chain, mini-checkpoint, victim-queue",
            |c, v| c.bgwriter_strategy = BGWRITER_STRATEGIES[word(v)],
            |c| Value::Word(c.bgwriter_strategy as usize),
        )
    },
    Knob {
        min: MIN_BGWRITER_DELAY_MS,
        max: MAX_BGWRITER_DELAY_MS,
        ..row(
            "bgwriter_delay",
            Unit::Ms,
            "200ms",
            "sleep between background writer rounds",
            |c, v| c.bgwriter_delay_ms = int(v),
            |c| Value::Int(c.bgwriter_delay_ms),
        )
    },
    Knob {
        min: 0,
        max: MAX_BGWRITER_LRU_MAXPAGES,
        auto: true,
        ..row(
            "bgwriter_lru_maxpages",
            Unit::Count,
            "auto",
            "most pages one bgwriter round writes; auto = max(100, shared_buffers/2 \
             per 200ms of bgwriter_delay)",
            |c, v| {
                c.bgwriter_lru_maxpages = match v {
                    Value::Auto => None,
                    v => Some(int(v)),
                }
            },
            |c| c.bgwriter_lru_maxpages.map_or(Value::Auto, Value::Int),
        )
    },
    Knob {
        min: 0,
        max: MAX_BGWRITER_LRU_MULTIPLIER_THOUSANDTHS as u64,
        ..row(
            "bgwriter_lru_multiplier",
            Unit::Decimal,
            "2.0",
            "buffers cleaned per round = smoothed recent allocations x this",
            |c, v| c.bgwriter_lru_multiplier_thousandths = int(v) as u32,
            |c| Value::Int(u64::from(c.bgwriter_lru_multiplier_thousandths)),
        )
    },
    Knob {
        min: 0,
        max: MAX_BGWRITER_FLUSH_AFTER_BYTES,
        ..row(
            "bgwriter_flush_after",
            Unit::Bytes,
            "512kB",
            "ask the OS to write back after this much bgwriter output (0: never)",
            |c, v| c.bgwriter_flush_after = int(v),
            |c| Value::Int(c.bgwriter_flush_after),
        )
    },
    Knob {
        min: 1,
        max: MAX_BGWRITER_WRITERS,
        ..row(
            "bgwriter_writers",
            Unit::Count,
            "16",
            "writes a bgwriter round keeps in flight (1: one write at a time, as PostgreSQL)",
            |c, v| c.bgwriter_writers = int(v) as usize,
            |c| Value::Int(c.bgwriter_writers as u64),
        )
    },
    Knob {
        words: &["threads", "io_uring"],
        ..row(
            "bgwriter_io_method",
            Unit::Enum,
            "io_uring",
            "how the bgwriter keeps its writes in flight: io_uring (one thread; threads where unavailable) or threads (one per write)",
            |c, v| c.bgwriter_io_method = BGWRITER_IOS[word(v)],
            |c| Value::Word(c.bgwriter_io_method as usize),
        )
    },
    row(
        "synchronize_seqscans",
        Unit::Bool,
        "on",
        "a large sequential scan starts where another scan of the table is or ended",
        |c, v| c.synchronize_seqscans = flag(v),
        |c| Value::Bool(c.synchronize_seqscans),
    ),
    Knob {
        words: &["quarter", "seed003"],
        ..row(
            "seqscan_strategy",
            Unit::Enum,
            "quarter",
            "when a scan uses a ring and a synchronized start: quarter (above 1/4 of the \
             pool), seed003 (the two thresholds below)",
            |c, v| c.seqscan_strategy = SEQSCAN_STRATEGIES[word(v)],
            |c| Value::Word(c.seqscan_strategy as usize),
        )
    },
    Knob {
        min: 0,
        max: MAX_SEQSCAN_THRESHOLD_THOUSANDTHS,
        ..row(
            "seqscan_sync_threshold",
            Unit::Decimal,
            "0.1",
            "seed003 rule: tables of at least this many pools start at the synchronized \
             position",
            |c, v| c.seqscan_sync_threshold_thousandths = int(v),
            |c| Value::Int(c.seqscan_sync_threshold_thousandths),
        )
    },
    Knob {
        min: 0,
        max: MAX_SEQSCAN_THRESHOLD_THOUSANDTHS,
        ..row(
            "seqscan_ring_threshold",
            Unit::Decimal,
            "5.0",
            "seed003 rule: tables of at least this many pools are read through a ring",
            |c, v| c.seqscan_ring_threshold_thousandths = int(v),
            |c| Value::Int(c.seqscan_ring_threshold_thousandths),
        )
    },
    row(
        "seqscan_cache_trail",
        Unit::Bool,
        "off",
        "a synchronized scan that keeps its pages first reads backwards over the pages \
         still cached (seed 003's 3A)",
        |c, v| c.seqscan_cache_trail = flag(v),
        |c| Value::Bool(c.seqscan_cache_trail),
    ),
    Knob {
        min: 0,
        max: MAX_RING_BYTES,
        check: Some((
            |c| ring_size_ok(c.bulkread_ring_size),
            "0 (no ring) or at least 128kB",
        )),
        ..row(
            "bulkread_ring_size",
            Unit::Bytes,
            "256kB",
            "ring of a large sequential scan (fits the CPU's L2 cache; 0: no ring), at most \
             1/8 of the pool",
            |c, v| c.bulkread_ring_size = int(v),
            |c| Value::Int(c.bulkread_ring_size),
        )
    },
    Knob {
        min: 0,
        max: MAX_RING_BYTES,
        check: Some((
            |c| ring_size_ok(c.bulkwrite_ring_size),
            "0 (no ring) or at least 128kB",
        )),
        ..row(
            "bulkwrite_ring_size",
            Unit::Bytes,
            "16MB",
            "ring of a bulk load (its cap when ring_growth is on; 0: no ring), at most 1/8 \
             of the pool",
            |c, v| c.bulkwrite_ring_size = int(v),
            |c| Value::Int(c.bulkwrite_ring_size),
        )
    },
    Knob {
        min: 0,
        max: MAX_RING_BYTES,
        check: Some((
            |c| ring_size_ok(c.vacuum_buffer_usage_limit),
            "0 (no ring) or at least 128kB",
        )),
        ..row(
            "vacuum_buffer_usage_limit",
            Unit::Bytes,
            "2MB",
            "ring of a VACUUM (its cap when ring_growth is on; 0: no ring), at most 1/8 of \
             the pool",
            |c, v| c.vacuum_buffer_usage_limit = int(v),
            |c| Value::Int(c.vacuum_buffer_usage_limit),
        )
    },
    row(
        "ring_growth",
        Unit::Bool,
        "on",
        "vacuum and bulk-write rings start at 256kB and grow instead of forcing a WAL \
         flush, shrinking after a quiet lap (off: fixed at their size)",
        |c, v| c.ring_growth = flag(v),
        |c| Value::Bool(c.ring_growth),
    ),
];

/// The `seqscan_strategy` words, in table order.
const SEQSCAN_STRATEGIES: [SeqscanStrategy; 2] =
    [SeqscanStrategy::Quarter, SeqscanStrategy::Seed003];

/// Largest `seqscan_sync_threshold` / `seqscan_ring_threshold`: 1000 pools.
pub const MAX_SEQSCAN_THRESHOLD_THOUSANDTHS: u64 = 1_000_000;

/// A ring size knob's rule: 0 (no ring) or at least [`MIN_RING_BYTES`].
fn ring_size_ok(bytes: u64) -> bool {
    bytes == 0 || bytes >= MIN_RING_BYTES
}

/// The row of the knob called `name`.
pub fn knob(name: &str) -> Option<&'static Knob> {
    KNOBS.iter().find(|k| k.name == name)
}

impl Knob {
    /// Parses `text` by the row's unit, without range checks (`None`: not a value of this
    /// kind at all).
    fn parse(&self, text: &str) -> Option<Value> {
        let v = text.trim();
        if self.auto && (v == "auto" || v == "-1") {
            return Some(Value::Auto);
        }
        let bare = !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
        match self.unit {
            Unit::Bool => parse_bool(v).map(Value::Bool),
            Unit::Enum => self.words.iter().position(|w| *w == v).map(Value::Word),
            Unit::Count => v.parse().ok().map(Value::Int),
            Unit::Bytes => parse_size(v).ok().map(Value::Int),
            Unit::BuffersOrBytes if bare => v.parse().ok().map(Value::Buffers),
            Unit::BuffersOrBytes => parse_size(v).ok().map(Value::Int),
            Unit::Ms => parse_ms(v).map(Value::Int),
            Unit::S if bare => v
                .parse::<u64>()
                .ok()
                .map(|s| Value::Int(s.saturating_mul(1000))),
            Unit::S => parse_ms(v).map(Value::Int),
            Unit::Decimal => parse_thousandths(v).map(Value::Int),
        }
    }

    /// Whether `value` is within the row's own bounds (relations to other knobs are the
    /// `check`'s business).
    fn in_range(&self, value: Value) -> bool {
        match (self.unit, value) {
            (Unit::BuffersOrBytes, _) | (_, Value::Auto | Value::Bool(_) | Value::Word(_)) => true,
            (_, v) => {
                let n = int(v);
                (self.min..=self.max).contains(&n) && (!self.pow2 || n.is_power_of_two())
            }
        }
    }

    /// What the knob accepts, in words (the "allowed" of its errors and of `bufpool
    /// config`). `block_size` is the page size the size-dependent limits are read at.
    pub fn allowed(&self, block_size: usize) -> String {
        let mut s = match self.unit {
            Unit::Bool => "on or off".to_string(),
            Unit::Enum => match self.words {
                [a, b] => format!("{a} or {b}"),
                [init @ .., last] => format!("{} or {last}", init.join(", ")),
                [] => String::new(),
            },
            Unit::BuffersOrBytes => return shared_buffers_error("", block_size).allowed,
            Unit::Bytes if self.pow2 => format!(
                "a power of two from {} to {}",
                format_size(self.min),
                format_size(self.max)
            ),
            Unit::Bytes => format!("{} to {}", format_size(self.min), format_size(self.max)),
            Unit::Count if self.pow2 => {
                format!("a power of two from {} to {}", self.min, self.max)
            }
            Unit::Count => format!("{} to {}", self.min, self.max),
            Unit::Ms => format!(
                "{} to {} (units ms, s, min, h, d; a bare number is ms)",
                format_ms(self.min),
                format_ms(self.max)
            ),
            Unit::S => format!(
                "{} to {} (units ms, s, min, h, d; a bare number is seconds)",
                format_ms(self.min),
                format_ms(self.max)
            ),
            Unit::Decimal => format!(
                "{} to {}",
                format_thousandths(self.min),
                format_thousandths(self.max)
            ),
        };
        if let Some((_, rule)) = self.check.filter(|(_, r)| !r.is_empty()) {
            s = format!("{s}, {rule}");
        }
        if self.auto {
            s = format!("auto, or {s}");
        }
        s
    }

    /// The value of this knob in `c`, as `set` accepts it.
    pub fn get(&self, c: &Config) -> String {
        match ((self.load)(c), self.unit) {
            (Value::Bool(b), _) => if b { "on" } else { "off" }.to_string(),
            (Value::Word(i), _) => self.words[i].to_string(),
            (Value::Auto, _) => "auto".to_string(),
            (Value::Buffers(n), _) | (Value::Int(n), Unit::Count) => n.to_string(),
            (Value::Int(n), Unit::Bytes | Unit::BuffersOrBytes) => format_size(n),
            (Value::Int(n), Unit::Ms) => format!("{n}ms"),
            (Value::Int(n), Unit::S) if n % 1000 == 0 => format!("{}s", n / 1000),
            (Value::Int(n), Unit::Decimal) => format_thousandths(n),
            (Value::Int(n), _) => format!("{n}ms"),
        }
    }

    fn error(&self, value: &str, block_size: usize) -> ConfigError {
        ConfigError::new(self.name, value, self.allowed(block_size))
    }
}

/// Parses a decimal number with at most three fractional digits into thousandths.
fn parse_thousandths(v: &str) -> Option<u64> {
    let (whole, frac) = v.split_once('.').unwrap_or((v, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(frac) || frac.len() > 3 {
        return None;
    }
    let frac_thousandths = format!("{frac:0<3}").parse::<u64>().ok()?;
    whole
        .parse::<u64>()
        .ok()?
        .checked_mul(1000)?
        .checked_add(frac_thousandths)
}

/// Thousandths as a decimal number with at least one fractional digit: `2.0`, `1.25`.
fn format_thousandths(n: u64) -> String {
    let frac = format!("{:03}", n % 1000);
    let frac = frac.trim_end_matches('0');
    format!("{}.{}", n / 1000, if frac.is_empty() { "0" } else { frac })
}

/// A duration in the largest unit that divides it exactly.
fn format_ms(ms: u64) -> String {
    for (div, unit) in [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "min"),
        (1000, "s"),
    ] {
        if ms != 0 && ms % div == 0 {
            return format!("{}{unit}", ms / div);
        }
    }
    format!("{ms}ms")
}

/// The engine's configuration. Each field is set by one row of [`KNOBS`]; read the
/// fields directly (they are typed), set them through [`Config::set`] (text, as in a
/// configuration file) or [`Config::builder`] (typed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub shared_buffers: PoolSize,
    pub block_size: usize,
    pub segment_size: u64,
    pub buffer_mapping_partitions: usize,
    pub huge_pages: HugePages,
    pub io_direct: bool,
    pub synchronous_commit: bool,
    /// With synchronous commit: end a transaction at its commit record, before its
    /// flush (see the knob).
    pub early_lock_release: bool,
    pub full_page_writes: bool,
    /// `wal_compression = lz4`: full-page images are logged LZ4-compressed, and so is a
    /// change of 1 kB or more (its bytes), when that is smaller.
    pub wal_compression: bool,
    pub wal_segment_size: u64,
    /// None: automatic (shared_buffers / 32 within 64kB..16MB).
    pub wal_buffers: Option<u64>,
    pub wal_sync_method: SyncMethod,
    pub wal_writer_delay_ms: u64,
    /// Whether the engine runs the WAL writer thread.
    pub wal_writer: bool,
    /// PostgreSQL's commit_delay, microseconds (0: off).
    pub commit_delay_us: u64,
    /// PostgreSQL's commit_siblings, counted as other threads flushing the WAL.
    pub commit_siblings: u64,
    /// WAL flush leaders that may sync at once (1: serial syncs).
    pub wal_syncs_in_flight: u64,
    /// PostgreSQL's wal_writer_flush_after, bytes (0: off).
    pub wal_writer_flush_after: u64,
    /// Time between automatic checkpoints (PostgreSQL's checkpoint_timeout), ms.
    pub checkpoint_timeout_ms: u64,
    /// Whether the engine runs the checkpointer thread.
    pub checkpointer: bool,
    /// checkpoint_completion_target in thousandths (0.9 is 900).
    pub checkpoint_completion_target_thousandths: u32,
    /// Bytes of WAL since the last redo point that trigger a checkpoint (with the
    /// completion target, as PostgreSQL computes it).
    pub max_wal_size: u64,
    /// Bytes of released WAL kept for recycling.
    pub min_wal_size: u64,
    pub checkpoint_sort: bool,
    /// Bytes; 0 disables the checkpoint's writeback hints.
    pub checkpoint_flush_after: u64,
    /// One writeback context for the whole checkpoint instead of one per tablespace.
    pub checkpoint_writeback_shared: bool,
    /// Bytes: the longest run of adjacent pages one read or write carries.
    pub io_combine_limit: u64,
    /// How read streams run reads ahead of use.
    pub io_method: IoMethod,
    /// Threads of `io_method = worker`.
    pub io_workers: usize,
    /// Combined reads a read stream keeps in flight (PostgreSQL's effective_io_concurrency).
    pub effective_io_concurrency: u64,
    pub checkpoint_writers: usize,
    /// checkpoint_sync_method = open_datasync.
    pub checkpoint_open_datasync: bool,
    pub log_checkpoints: bool,
    /// Whether the engine runs the background writer thread.
    pub bgwriter: bool,
    pub bgwriter_strategy: BgwriterStrategy,
    pub bgwriter_delay_ms: u64,
    /// None: automatic (see `BgwriterOptions::lru_maxpages_for`).
    pub bgwriter_lru_maxpages: Option<u64>,
    /// Commit-log SLRU pages; None: automatic (see [`Config::transaction_buffers_for`]).
    pub transaction_buffers: Option<u64>,
    /// Subtransaction SLRU pages; None: automatic (see [`Config::slru_set`]).
    pub subtransaction_buffers: Option<u64>,
    pub multixact_offset_buffers: u64,
    pub multixact_member_buffers: u64,
    /// How every SLRU is searched and locked.
    pub slru_design: SlruDesign,
    /// bgwriter_lru_multiplier in thousandths (2.0 is 2000).
    pub bgwriter_lru_multiplier_thousandths: u32,
    /// Bytes; 0 disables the writeback hints.
    pub bgwriter_flush_after: u64,
    /// Writes a bgwriter round keeps in flight.
    pub bgwriter_writers: usize,
    /// How the bgwriter keeps them in flight.
    pub bgwriter_io_method: BgwriterIo,
    pub synchronize_seqscans: bool,
    pub seqscan_strategy: SeqscanStrategy,
    /// seqscan_sync_threshold in thousandths of the pool.
    pub seqscan_sync_threshold_thousandths: u64,
    /// seqscan_ring_threshold in thousandths of the pool.
    pub seqscan_ring_threshold_thousandths: u64,
    pub seqscan_cache_trail: bool,
    /// Bytes of a bulk-read ring (0: no ring).
    pub bulkread_ring_size: u64,
    /// Bytes of a bulk-write ring, its cap when growing (0: no ring).
    pub bulkwrite_ring_size: u64,
    /// Bytes of a vacuum ring, its cap when growing (0: no ring).
    pub vacuum_buffer_usage_limit: u64,
    /// Vacuum and bulk-write rings grow and shrink (on) or keep their size (off).
    pub ring_growth: bool,
}

impl Default for Config {
    /// Every knob at its table default.
    fn default() -> Self {
        let mut c = Config {
            shared_buffers: PoolSize::Bytes(DEFAULT_SHARED_BUFFERS_BYTES),
            block_size: DEFAULT_PAGE_SIZE,
            segment_size: DEFAULT_SEGMENT_SIZE_BYTES,
            buffer_mapping_partitions: DEFAULT_MAPPING_PARTITIONS,
            huge_pages: HugePages::Try,
            io_direct: false,
            synchronous_commit: true,
            early_lock_release: true,
            full_page_writes: true,
            wal_compression: true,
            wal_segment_size: DEFAULT_WAL_SEGMENT_SIZE,
            wal_buffers: None,
            wal_sync_method: SyncMethod::Fdatasync,
            wal_writer_delay_ms: DEFAULT_WAL_WRITER_DELAY_MS,
            wal_writer: true,
            commit_delay_us: 0,
            commit_siblings: 5,
            wal_syncs_in_flight: 1,
            wal_writer_flush_after: 1 << 20,
            checkpoint_timeout_ms: DEFAULT_CHECKPOINT_TIMEOUT_MS,
            checkpointer: true,
            checkpoint_completion_target_thousandths: 900,
            max_wal_size: 1 << 30,
            min_wal_size: 80 << 20,
            checkpoint_sort: true,
            checkpoint_flush_after: 256 << 10,
            checkpoint_writeback_shared: false,
            io_combine_limit: 128 << 10,
            io_method: IoMethod::Worker,
            io_workers: DEFAULT_IO_WORKERS,
            effective_io_concurrency: DEFAULT_EFFECTIVE_IO_CONCURRENCY,
            checkpoint_writers: 1,
            checkpoint_open_datasync: false,
            log_checkpoints: true,
            bgwriter: true,
            bgwriter_strategy: BgwriterStrategy::Lru,
            bgwriter_delay_ms: DEFAULT_BGWRITER_DELAY_MS,
            bgwriter_lru_maxpages: None,
            transaction_buffers: None,
            subtransaction_buffers: None,
            multixact_offset_buffers: DEFAULT_MULTIXACT_OFFSET_BUFFERS,
            multixact_member_buffers: DEFAULT_MULTIXACT_MEMBER_BUFFERS,
            slru_design: SlruDesign::BanksLocksLru,
            bgwriter_lru_multiplier_thousandths: DEFAULT_BGWRITER_LRU_MULTIPLIER_THOUSANDTHS,
            bgwriter_flush_after: DEFAULT_BGWRITER_FLUSH_AFTER_BYTES,
            bgwriter_writers: DEFAULT_BGWRITER_WRITERS,
            bgwriter_io_method: BgwriterIo::IoUring,
            synchronize_seqscans: true,
            seqscan_strategy: SeqscanStrategy::Quarter,
            seqscan_sync_threshold_thousandths: 100,
            seqscan_ring_threshold_thousandths: 5_000,
            seqscan_cache_trail: false,
            bulkread_ring_size: DEFAULT_BULKREAD_RING_BYTES,
            bulkwrite_ring_size: DEFAULT_BULKWRITE_RING_BYTES,
            vacuum_buffer_usage_limit: DEFAULT_VACUUM_RING_BYTES,
            ring_growth: true,
        };
        for k in KNOBS {
            let v = k.parse(k.default).expect("a knob's default parses");
            (k.store)(&mut c, v);
        }
        c
    }
}

impl Config {
    /// A typed builder, for embedders: `Config::builder().shared_buffers(64 << 20).build()`.
    pub fn builder() -> ConfigBuilder {
        ConfigBuilder(Config::default())
    }

    /// Sets one knob from its text form, validating it against its row and the rest of
    /// the config as it stands (the whole config is checked again by [`Config::validate`]).
    /// On error nothing changes.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let v = value.trim();
        let Some(k) = knob(name) else {
            let names: Vec<&str> = KNOBS.iter().map(|k| k.name).collect();
            return Err(ConfigError::new(
                "(name)",
                name,
                format!("one of {}", names.join(", ")),
            ));
        };
        let parsed = k
            .parse(v)
            .filter(|p| k.in_range(*p))
            .ok_or_else(|| k.error(v, self.block_size))?;
        let mut next = self.clone();
        (k.store)(&mut next, parsed);
        if let Some((check, _)) = k.check {
            if !check(&next) {
                return Err(k.error(v, next.block_size));
            }
        }
        *self = next;
        Ok(())
    }

    /// [`Config::set`] without the rules between knobs: for applying several knobs whose
    /// relations only hold once all are in (a configuration file, `max_wal_size` before
    /// `min_wal_size`). Call [`Config::validate`] after the last one.
    pub fn set_deferred(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let v = value.trim();
        let Some(k) = knob(name) else {
            return self.set(name, value);
        };
        let parsed = k
            .parse(v)
            .filter(|p| k.in_range(*p))
            .ok_or_else(|| k.error(v, self.block_size))?;
        (k.store)(self, parsed);
        Ok(())
    }

    /// What `name` accepts, as its errors state it (None for an unknown knob).
    pub fn allowed(name: &str) -> Option<String> {
        knob(name).map(|k| k.allowed(DEFAULT_PAGE_SIZE))
    }

    /// The current value of a knob in text form (as `set` accepts it).
    pub fn get(&self, name: &str) -> Option<String> {
        knob(name).map(|k| k.get(self))
    }

    /// Checks every knob against its row and the relations between knobs.
    /// Each knob's own range comes first, then the rules between knobs, so a bad value is
    /// blamed on its own knob (a zero block_size, not the pool size it divides).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = KNOBS
            .iter()
            .find(|k| !k.in_range((k.load)(self)))
            .or_else(|| {
                KNOBS
                    .iter()
                    .find(|k| k.check.is_some_and(|(check, _)| !check(self)))
            });
        if let Some(k) = bad {
            return Err(k.error(&k.get(self), self.block_size));
        }
        debug_assert!(PAGE_SIZES.contains(&self.block_size));
        Ok(())
    }

    /// The WAL ring size in effect (bytes, a multiple of 4 KiB).
    pub fn wal_buffers_bytes(&self) -> u64 {
        // At least 2 x WAL_BUFFERS_MIN_PAGES pages: a record holds full-page images of
        // every page it changes and must fit the ring with room to spare.
        let floor = MIN_WAL_BUFFERS.max(2 * WAL_BUFFERS_MIN_PAGES * self.block_size as u64);
        let auto = (self.nbuffers() as u64 * self.block_size as u64 / 32)
            .clamp(floor, floor.max(16 << 20));
        let b = self.wal_buffers.unwrap_or(auto);
        b.div_ceil(4096) * 4096
    }

    /// Number of buffers in the pool (after validation).
    pub fn nbuffers(&self) -> usize {
        self.nbuffers_checked().expect("validated config") as usize
    }

    /// Blocks per relation segment (after validation).
    pub fn segment_blocks(&self) -> u32 {
        (self.segment_size / self.block_size as u64) as u32
    }

    fn nbuffers_checked(&self) -> Result<u64, ConfigError> {
        let n = match self.shared_buffers {
            PoolSize::Buffers(n) => n,
            // A block_size of 0 (set through the public field) is refused, not divided by.
            PoolSize::Bytes(b) => b.checked_div(self.block_size as u64).unwrap_or(0),
        };
        if (MIN_BUFFERS..=MAX_BUFFERS).contains(&n) {
            Ok(n)
        } else {
            let v = self.get("shared_buffers").unwrap_or_default();
            Err(shared_buffers_error(v, self.block_size))
        }
    }

    /// The background writer's options.
    pub fn bgwriter_options(&self) -> BgwriterOptions {
        BgwriterOptions {
            enabled: self.bgwriter,
            strategy: self.bgwriter_strategy,
            delay_ms: self.bgwriter_delay_ms,
            lru_maxpages: self.bgwriter_lru_maxpages,
            lru_multiplier_thousandths: self.bgwriter_lru_multiplier_thousandths,
            flush_after_bytes: self.bgwriter_flush_after,
            writers: self.bgwriter_writers,
            io: self.bgwriter_io_method,
        }
    }

    /// The access-strategy rings' options.
    pub fn ring_options(&self) -> RingOptions {
        RingOptions {
            bulkread_bytes: self.bulkread_ring_size,
            bulkwrite_bytes: self.bulkwrite_ring_size,
            vacuum_bytes: self.vacuum_buffer_usage_limit,
            growth: self.ring_growth,
        }
    }

    /// How a checkpoint writes its pages.
    pub fn checkpoint_write_options(&self) -> CheckpointWriteOptions {
        let page = self.block_size as u64;
        CheckpointWriteOptions {
            sort: self.checkpoint_sort,
            combine_pages: ((self.io_combine_limit / page).max(1) as usize).min(MAX_COMBINE_PAGES),
            flush_after_pages: (self.checkpoint_flush_after / page) as usize,
            writeback: if self.checkpoint_writeback_shared {
                WritebackScope::Shared
            } else {
                WritebackScope::PerTablespace
            },
            writers: self.checkpoint_writers,
            durable: self.checkpoint_open_datasync,
        }
    }

    /// How read streams read ahead (`io_method`, `io_combine_limit`,
    /// `effective_io_concurrency`; the pin budget is the pool's share).
    pub fn read_stream_options(&self) -> ReadStreamOptions {
        ReadStreamOptions {
            io_method: Some(self.io_method),
            io_combine_limit_bytes: self.io_combine_limit as usize,
            io_concurrency: self.effective_io_concurrency as usize,
            max_pins: None,
        }
    }

    /// checkpoint_completion_target as a number.
    pub fn checkpoint_completion_target(&self) -> f64 {
        f64::from(self.checkpoint_completion_target_thousandths) / 1000.0
    }

    /// bgwriter_lru_multiplier as a number.
    pub fn bgwriter_lru_multiplier(&self) -> f64 {
        f64::from(self.bgwriter_lru_multiplier_thousandths) / 1000.0
    }

    /// The sequential-scan knobs (see [`crate::scan::plan`]).
    pub fn scan_options(&self) -> ScanOptions {
        ScanOptions {
            strategy: self.seqscan_strategy,
            synchronize: self.synchronize_seqscans,
            sync_threshold_thousandths: self.seqscan_sync_threshold_thousandths,
            ring_threshold_thousandths: self.seqscan_ring_threshold_thousandths,
            cache_trail: self.seqscan_cache_trail,
        }
    }

    /// Commit-log pages for a pool of `nbuffers` buffers: the knob, or automatically
    /// shared_buffers / 512 within [`AUTO_TRANSACTION_BUFFERS`]. PostgreSQL 17's automatic
    /// value has a floor of 16 pages; ours is 128 (1 MiB of 8 KiB pages, four million
    /// transactions), because what the cache must hold is not a share of the pool but the
    /// statuses a workload looks up: a row revisited a minute after its last update needs
    /// the status of a transaction a minute old, which at 17,000 commits/s is a million
    /// transactions (32 pages) back. Below that, every such lookup is a read.
    /// The automatic value is rounded down to whole banks (of [`SLRU_BANK_SIZE`]), as
    /// PostgreSQL 17 does; a value set by hand must already be a multiple of it.
    pub fn transaction_buffers_for(&self, nbuffers: usize) -> usize {
        match self.transaction_buffers {
            Some(n) => n as usize,
            None => auto_slru_buffers(nbuffers, AUTO_TRANSACTION_BUFFERS),
        }
    }

    /// The size and design of every SLRU for a pool of `nbuffers` buffers. Sizes set by
    /// hand are whole banks (validated, as PostgreSQL 17's check_slru_buffers does);
    /// automatic ones are rounded down to whole banks (its SimpleLruAutotuneBuffers).
    pub fn slru_set(&self, nbuffers: usize) -> SlruSet {
        SlruSet {
            design: self.slru_design,
            transaction_buffers: self.transaction_buffers_for(nbuffers),
            subtransaction_buffers: match self.subtransaction_buffers {
                Some(n) => n as usize,
                None => auto_slru_buffers(nbuffers, AUTO_SUBTRANSACTION_BUFFERS),
            },
            multixact_offset_buffers: self.multixact_offset_buffers as usize,
            multixact_member_buffers: self.multixact_member_buffers as usize,
        }
    }

    /// The log's options.
    pub fn wal_options(&self) -> WalOptions {
        WalOptions {
            segment_size: self.wal_segment_size,
            buffers: self.wal_buffers_bytes(),
            sync_method: self.wal_sync_method,
            recycle_segments: (self.min_wal_size / self.wal_segment_size).max(1) as usize,
            prepare_segments: DEFAULT_PREPARE_SEGMENTS,
            commit_delay_us: self.commit_delay_us,
            commit_siblings: self.commit_siblings,
            syncs_in_flight: self.wal_syncs_in_flight as usize,
            // With synchronous commits every commit flushes the log itself; the WAL writer
            // is woken by volume only when it is the one that flushes.
            writer_flush_after: if self.synchronous_commit {
                0
            } else {
                self.wal_writer_flush_after
            },
        }
    }
}

/// shared_buffers / 512 pages within `bounds`, rounded down to whole banks.
fn auto_slru_buffers(nbuffers: usize, bounds: std::ops::RangeInclusive<u64>) -> usize {
    let n = (nbuffers as u64 / 512).clamp(*bounds.start(), *bounds.end());
    (n - n % SLRU_BANK_SIZE).max(SLRU_BANK_SIZE) as usize
}

impl PoolConfig for Config {
    /// Validates every knob, then builds the pool's options at the directory's page size
    /// (which wins over `block_size` for an existing directory).
    fn pool_options(&self, page_size: usize) -> Result<PoolOptions, ConfigError> {
        self.validate()?;
        let c = Config {
            block_size: page_size,
            ..self.clone()
        };
        Ok(PoolOptions {
            nbuffers: c.nbuffers_checked()? as usize,
            huge_pages: self.huge_pages,
            mapping_partitions: self.buffer_mapping_partitions,
            bgwriter: self.bgwriter_options(),
            rings: self.ring_options(),
            aio: AioOptions {
                method: self.io_method,
                workers: self.io_workers,
            },
        })
    }

    fn smgr_options(&self, create: bool) -> Result<SmgrOptions, ConfigError> {
        self.validate()?;
        Ok(SmgrOptions {
            block_size: self.block_size,
            segment_size: self.segment_size,
            wal_segment_size: Some(self.wal_segment_size),
            create,
            direct: self.io_direct,
            dsync: false,
        })
    }
}

fn millis(d: Duration) -> u64 {
    d.as_millis().min(u128::from(u64::MAX)) as u64
}

/// Builds a [`Config`] with typed setters; [`ConfigBuilder::build`] validates it.
#[derive(Debug, Clone)]
pub struct ConfigBuilder(Config);

/// Typed setters, one per field: `name(value)`.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty => |$c:ident, $v:ident| $set:expr;)*) => {
        $( $(#[$doc])* pub fn $name(mut self, $v: $ty) -> Self {
            let $c = &mut self.0;
            $set;
            self
        } )*
    };
}

impl ConfigBuilder {
    setters! {
        /// Pool size in bytes.
        shared_buffers: u64 => |c, v| c.shared_buffers = PoolSize::Bytes(v);
        /// Pool size as a number of buffers.
        shared_buffers_count: u64 => |c, v| c.shared_buffers = PoolSize::Buffers(v);
        block_size: usize => |c, v| c.block_size = v;
        segment_size: u64 => |c, v| c.segment_size = v;
        buffer_mapping_partitions: usize => |c, v| c.buffer_mapping_partitions = v;
        huge_pages: HugePages => |c, v| c.huge_pages = v;
        io_direct: bool => |c, v| c.io_direct = v;
        synchronous_commit: bool => |c, v| c.synchronous_commit = v;
        early_lock_release: bool => |c, v| c.early_lock_release = v;
        full_page_writes: bool => |c, v| c.full_page_writes = v;
        /// `wal_compression`: true logs full-page images LZ4-compressed.
        wal_compression: bool => |c, v| c.wal_compression = v;
        wal_segment_size: u64 => |c, v| c.wal_segment_size = v;
        /// WAL ring size in bytes; `None` is automatic.
        wal_buffers: Option<u64> => |c, v| c.wal_buffers = v;
        wal_sync_method: SyncMethod => |c, v| c.wal_sync_method = v;
        wal_writer_delay: Duration => |c, v| c.wal_writer_delay_ms = millis(v);
        /// Whether the engine runs the WAL writer thread.
        wal_writer: bool => |c, v| c.wal_writer = v;
        /// PostgreSQL's commit_delay (0 to 100 ms; whole microseconds).
        commit_delay: Duration => |c, v| c.commit_delay_us = v.as_micros().min(u128::from(u64::MAX)) as u64;
        /// PostgreSQL's commit_siblings.
        commit_siblings: u64 => |c, v| c.commit_siblings = v;
        /// WAL flush leaders that may sync at once (1 to 8; 1: serial).
        wal_syncs_in_flight: u64 => |c, v| c.wal_syncs_in_flight = v;
        /// Bytes; 0: only wal_writer_delay wakes the WAL writer.
        wal_writer_flush_after: u64 => |c, v| c.wal_writer_flush_after = v;
        checkpoint_timeout: Duration => |c, v| c.checkpoint_timeout_ms = millis(v);
        /// Whether the engine runs the checkpointer thread.
        checkpointer: bool => |c, v| c.checkpointer = v;
        /// Rounded to thousandths, within 0.0..=1.0.
        checkpoint_completion_target: f64 => |c, v| {
            c.checkpoint_completion_target_thousandths = (v * 1000.0).round().clamp(0.0, 1000.0) as u32
        };
        max_wal_size: u64 => |c, v| c.max_wal_size = v;
        min_wal_size: u64 => |c, v| c.min_wal_size = v;
        checkpoint_sort: bool => |c, v| c.checkpoint_sort = v;
        /// Bytes; 0 disables the checkpoint's writeback hints.
        checkpoint_flush_after: u64 => |c, v| c.checkpoint_flush_after = v;
        /// One shared writeback context instead of one per tablespace.
        checkpoint_writeback_shared: bool => |c, v| c.checkpoint_writeback_shared = v;
        io_combine_limit: u64 => |c, v| c.io_combine_limit = v;
        /// How read streams run reads ahead of use.
        io_method: IoMethod => |c, v| c.io_method = v;
        /// Threads of `io_method = worker`.
        io_workers: usize => |c, v| c.io_workers = v;
        /// Combined reads a read stream keeps in flight.
        effective_io_concurrency: u64 => |c, v| c.effective_io_concurrency = v;
        checkpoint_writers: usize => |c, v| c.checkpoint_writers = v;
        /// checkpoint_sync_method = open_datasync.
        checkpoint_open_datasync: bool => |c, v| c.checkpoint_open_datasync = v;
        log_checkpoints: bool => |c, v| c.log_checkpoints = v;
        /// Whether the engine runs the background writer thread.
        bgwriter: bool => |c, v| c.bgwriter = v;
        bgwriter_strategy: BgwriterStrategy => |c, v| c.bgwriter_strategy = v;
        bgwriter_delay: Duration => |c, v| c.bgwriter_delay_ms = millis(v);
        /// Most pages per round; `None` is automatic.
        bgwriter_lru_maxpages: Option<u64> => |c, v| c.bgwriter_lru_maxpages = v;
        /// Commit-log pages; `None` is automatic.
        transaction_buffers: Option<u64> => |c, v| c.transaction_buffers = v;
        /// Subtransaction SLRU pages; `None` is automatic.
        subtransaction_buffers: Option<u64> => |c, v| c.subtransaction_buffers = v;
        multixact_offset_buffers: u64 => |c, v| c.multixact_offset_buffers = v;
        multixact_member_buffers: u64 => |c, v| c.multixact_member_buffers = v;
        slru_design: SlruDesign => |c, v| c.slru_design = v;
        /// Rounded to thousandths; negative or NaN becomes 0 (and 10.0 is the maximum).
        bgwriter_lru_multiplier: f64 => |c, v| {
            c.bgwriter_lru_multiplier_thousandths = (v * 1000.0).round().clamp(0.0, u32::MAX as f64) as u32
        };
        /// Bytes; 0 disables the writeback hints.
        bgwriter_flush_after: u64 => |c, v| c.bgwriter_flush_after = v;
        bgwriter_writers: usize => |c, v| c.bgwriter_writers = v;
        bgwriter_io_method: BgwriterIo => |c, v| c.bgwriter_io_method = v;
        synchronize_seqscans: bool => |c, v| c.synchronize_seqscans = v;
        seqscan_strategy: SeqscanStrategy => |c, v| c.seqscan_strategy = v;
        /// In pools, rounded to thousandths.
        seqscan_sync_threshold: f64 => |c, v| {
            c.seqscan_sync_threshold_thousandths = (v * 1000.0).round().clamp(0.0, u64::MAX as f64) as u64
        };
        /// In pools, rounded to thousandths.
        seqscan_ring_threshold: f64 => |c, v| {
            c.seqscan_ring_threshold_thousandths = (v * 1000.0).round().clamp(0.0, u64::MAX as f64) as u64
        };
        seqscan_cache_trail: bool => |c, v| c.seqscan_cache_trail = v;
        /// Bytes of a bulk-read ring; 0 is no ring.
        bulkread_ring_size: u64 => |c, v| c.bulkread_ring_size = v;
        /// Bytes of a bulk-write ring (its cap when growing); 0 is no ring.
        bulkwrite_ring_size: u64 => |c, v| c.bulkwrite_ring_size = v;
        /// Bytes of a vacuum ring (its cap when growing); 0 is no ring.
        vacuum_buffer_usage_limit: u64 => |c, v| c.vacuum_buffer_usage_limit = v;
        /// Whether vacuum and bulk-write rings grow and shrink.
        ring_growth: bool => |c, v| c.ring_growth = v;
    }

    /// The config, if every knob is valid; else the first bad one.
    pub fn build(self) -> Result<Config, ConfigError> {
        self.0.validate()?;
        Ok(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_buffers_in_bytes_or_buffers() {
        let mut c = Config::default();
        c.set("shared_buffers", "64MB").unwrap();
        assert_eq!(c.nbuffers(), 8192);
        c.set("shared_buffers", "1000").unwrap();
        assert_eq!(c.nbuffers(), 1000);
        c.set("block_size", "16kB").unwrap();
        c.set("shared_buffers", "64MB").unwrap();
        assert_eq!(c.nbuffers(), 4096);
        c.validate().unwrap();
    }

    /// Proves: the checkpoint knobs reach the write options: pages from bytes at the
    /// page size, the context scope, the O_DSYNC switch.
    #[test]
    fn checkpoint_knobs_build_the_write_options() {
        let mut c = Config::default();
        let o = c.checkpoint_write_options();
        assert_eq!(
            (o.combine_pages, o.flush_after_pages, o.writers),
            (16, 32, 1)
        );
        assert!(o.sort && !o.durable && o.writeback == WritebackScope::PerTablespace);
        for (k, v) in [
            ("block_size", "4kB"),
            ("io_combine_limit", "8kB"),
            ("checkpoint_flush_after", "0B"),
            ("checkpoint_writeback_context", "shared"),
            ("checkpoint_sync_method", "open_datasync"),
            ("checkpoint_sort", "off"),
            ("checkpoint_writers", "4"),
            ("checkpoint_completion_target", "0.5"),
        ] {
            c.set(k, v).unwrap();
            assert_eq!(c.get(k).unwrap(), v, "{k}");
        }
        let o = c.checkpoint_write_options();
        assert_eq!((o.combine_pages, o.flush_after_pages, o.writers), (2, 0, 4));
        assert!(!o.sort && o.durable && o.writeback == WritebackScope::Shared);
        assert_eq!(c.checkpoint_completion_target(), 0.5);
        c.set("io_combine_limit", "1MB").unwrap();
        assert_eq!(
            c.checkpoint_write_options().combine_pages,
            MAX_COMBINE_PAGES
        );
    }

    /// Proves: the read-stream knobs reach the stream's and the pool's options, and the
    /// I/O worker count is checked by the pool's own validation too.
    #[test]
    fn read_stream_knobs_build_the_stream_and_pool_options() {
        let mut c = Config::default();
        let o = c.read_stream_options();
        assert_eq!(o.io_method, Some(IoMethod::Worker));
        assert_eq!(
            (o.io_combine_limit_bytes, o.io_concurrency),
            (128 << 10, 16)
        );
        assert_eq!(o.max_pins, None);
        for (k, v) in [
            ("io_method", "io_uring"),
            ("io_workers", "5"),
            ("effective_io_concurrency", "0"),
            ("io_combine_limit", "1MB"),
        ] {
            c.set(k, v).unwrap();
            assert_eq!(c.get(k).unwrap(), v, "{k}");
        }
        let o = c.read_stream_options();
        assert_eq!(o.io_method, Some(IoMethod::IoUring));
        assert_eq!((o.io_combine_limit_bytes, o.io_concurrency), (1 << 20, 0));
        let p = c.pool_options(8192).unwrap();
        assert_eq!(
            p.aio,
            AioOptions {
                method: IoMethod::IoUring,
                workers: 5
            }
        );
        c.set("io_method", "sync").unwrap();
        assert_eq!(c.pool_options(8192).unwrap().aio.method, IoMethod::Sync);
        let bad = PoolOptions {
            aio: AioOptions {
                workers: 0,
                ..p.aio
            },
            ..p
        };
        assert_eq!(bad.validate(8192).unwrap_err().knob, "io_workers");
    }

    /// Proves: knobs related by a rule can be applied in any order with `set_deferred`, and
    /// `validate` still names the knob that breaks a rule.
    #[test]
    fn deferred_sets_check_relations_only_at_validate() {
        let mut c = Config::default();
        assert!(
            c.set("max_wal_size", "4MB").is_err(),
            "below min_wal_size (80MB)"
        );
        for (k, v) in [
            ("max_wal_size", "4MB"),
            ("min_wal_size", "2MB"),
            ("wal_segment_size", "1MB"),
        ] {
            c.set_deferred(k, v).unwrap();
        }
        c.validate().unwrap();
        assert!(c.set_deferred("max_wal_size", "lots").is_err());
        c.set_deferred("min_wal_size", "8MB").unwrap();
        let err = c.validate().unwrap_err();
        assert!(
            err.knob == "max_wal_size" || err.knob == "min_wal_size",
            "{err}"
        );
    }

    #[test]
    fn every_knob_rejects_out_of_range_values_naming_itself() {
        let cases = [
            ("shared_buffers", "15"),
            ("shared_buffers", "64kB"),
            ("shared_buffers", "lots"),
            ("block_size", "3kB"),
            ("block_size", "65536"),
            ("segment_size", "1000"),
            ("segment_size", "0"),
            ("segment_size", "128GB"),
            ("buffer_mapping_partitions", "0"),
            ("buffer_mapping_partitions", "100"),
            ("buffer_mapping_partitions", "131072"),
            ("huge_pages", "maybe"),
            ("io_direct", "sometimes"),
            ("synchronous_commit", "maybe"),
            ("early_lock_release", "sometimes"),
            ("full_page_writes", "2"),
            ("wal_compression", "zstd"),
            ("wal_segment_size", "1000kB"),
            ("wal_segment_size", "32kB"),
            ("wal_segment_size", "2GB"),
            ("wal_buffers", "4kB"),
            ("wal_sync_method", "osync"),
            ("wal_writer_delay", "0"),
            ("wal_writer_delay", "11s"),
            ("wal_writer_delay", "5h"),
            ("commit_delay", "100001"),
            ("commit_delay", "-1"),
            ("commit_siblings", "1001"),
            ("commit_siblings", "many"),
            ("wal_syncs_in_flight", "0"),
            ("wal_syncs_in_flight", "9"),
            ("wal_writer_flush_after", "2GB"),
            ("wal_writer_flush_after", "-1"),
            ("checkpoint_timeout", "29s"),
            ("checkpoint_timeout", "2d"),
            ("bgwriter", "sometimes"),
            ("bgwriter_strategy", "fifo"),
            ("bgwriter_delay", "5ms"),
            ("bgwriter_delay", "11s"),
            ("bgwriter_lru_maxpages", "1073741824"),
            ("bgwriter_lru_maxpages", "-2"),
            ("transaction_buffers", "1"),
            ("transaction_buffers", "131073"),
            ("transaction_buffers", "15"),
            ("transaction_buffers", "100"),
            ("subtransaction_buffers", "8"),
            ("subtransaction_buffers", "40"),
            ("subtransaction_buffers", "131088"),
            ("multixact_offset_buffers", "0"),
            ("multixact_offset_buffers", "17"),
            ("multixact_offset_buffers", "lots"),
            ("multixact_member_buffers", "1"),
            ("multixact_member_buffers", "48.5"),
            ("multixact_member_buffers", "262144"),
            ("slru_design", "mutex"),
            ("slru_design", "bank"),
            ("bgwriter_lru_multiplier", "10.5"),
            ("bgwriter_lru_multiplier", "-1"),
            ("bgwriter_lru_multiplier", "1.2345"),
            ("bgwriter_lru_multiplier", "two"),
            ("bgwriter_flush_after", "3MB"),
            ("synchronize_seqscans", "sometimes"),
            ("seqscan_strategy", "half"),
            ("seqscan_sync_threshold", "-0.1"),
            ("seqscan_sync_threshold", "1000.001"),
            ("seqscan_ring_threshold", "five"),
            ("seqscan_cache_trail", "2"),
            ("checkpointer", "maybe"),
            ("checkpoint_completion_target", "1.1"),
            ("checkpoint_completion_target", "-0.5"),
            ("max_wal_size", "64kB"),
            ("max_wal_size", "2TB"),
            ("max_wal_size", "16MB"), // less than min_wal_size (80MB)
            ("min_wal_size", "16MB"), // one 16MB WAL segment
            ("min_wal_size", "2GB"),  // more than max_wal_size (1GB)
            ("checkpoint_sort", "2"),
            ("checkpoint_flush_after", "4MB"),
            ("checkpoint_writeback_context", "device"),
            ("io_combine_limit", "2kB"),
            ("io_combine_limit", "2MB"),
            ("io_method", "posix_aio"),
            ("io_method", "uring"),
            ("io_workers", "0"),
            ("io_workers", "33"),
            ("effective_io_concurrency", "1001"),
            ("effective_io_concurrency", "-1"),
            ("checkpoint_writers", "0"),
            ("checkpoint_writers", "65"),
            ("bgwriter_writers", "0"),
            ("bgwriter_writers", "33"),
            ("bgwriter_io_method", "aio"),
            ("checkpoint_sync_method", "osync"),
            ("log_checkpoints", "loud"),
            ("bulkread_ring_size", "64kB"),
            ("bulkread_ring_size", "32GB"),
            ("bulkread_ring_size", "lots"),
            ("bulkwrite_ring_size", "1"),
            ("bulkwrite_ring_size", "17GB"),
            ("vacuum_buffer_usage_limit", "127kB"),
            ("vacuum_buffer_usage_limit", "-1"),
            ("ring_growth", "sometimes"),
        ];
        for (knob, value) in cases {
            let before = Config::default();
            let mut c = before.clone();
            let err = c.set(knob, value).unwrap_err();
            assert_eq!(err.knob, knob, "{knob}={value}");
            let msg = err.to_string();
            assert!(msg.contains(knob) && msg.contains(value), "{msg}");
            assert!(msg.contains("allowed"), "{msg}");
            assert_eq!(c, before, "a rejected {knob} changed the config");
        }
        let err = Config::default().set("shared_bufers", "1").unwrap_err();
        assert!(err.to_string().contains("shared_buffers"), "{err}");
    }

    /// Proves: SLRU sizes are whole banks (set by hand: validated; automatic: rounded
    /// down), and `slru_set` carries every size and the design.
    #[test]
    fn slru_sizes_are_whole_banks() {
        let mut c = Config::default();
        let s = c.slru_set(100_000); // 100000/512 = 195 -> 192
        assert_eq!(
            s,
            SlruSet {
                design: SlruDesign::BanksLocksLru,
                transaction_buffers: 192,
                subtransaction_buffers: 192,
                multixact_offset_buffers: 16,
                multixact_member_buffers: 32,
            }
        );
        let small = c.slru_set(1000);
        assert_eq!(
            (small.transaction_buffers, small.subtransaction_buffers),
            (128, 16)
        );
        for (k, v) in [
            ("transaction_buffers", "48"),
            ("subtransaction_buffers", "32"),
            ("multixact_offset_buffers", "64"),
            ("multixact_member_buffers", "128"),
            ("slru_design", "central"),
        ] {
            c.set(k, v).unwrap();
            assert_eq!(c.get(k).unwrap(), v);
        }
        let s = c.slru_set(100_000);
        assert_eq!(
            s.transaction(),
            crate::slru::SlruOptions {
                buffers: 48,
                design: SlruDesign::Central
            }
        );
        assert_eq!(
            (
                s.subtransaction().buffers,
                s.multixact_offset().buffers,
                s.multixact_member().buffers
            ),
            (32, 64, 128)
        );
        let err = c
            .set("multixact_member_buffers", "40")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("multiple of 16") && err.contains("16 to 131072"),
            "{err}"
        );
        c.set("slru_design", "banks").unwrap();
        assert_eq!(
            Config::builder()
                .slru_design(SlruDesign::Banks)
                .build()
                .unwrap()
                .slru_design,
            SlruDesign::Banks
        );
    }

    #[test]
    fn validate_catches_relations_between_knobs() {
        let c = Config {
            segment_size: 8192 * 3,
            block_size: 16384,
            ..Config::default()
        };
        assert_eq!(c.validate().unwrap_err().knob, "segment_size");
        let c = Config {
            shared_buffers: PoolSize::Bytes(100 << 10),
            ..Config::default()
        };
        assert_eq!(c.validate().unwrap_err().knob, "shared_buffers");
    }

    #[test]
    fn get_round_trips_through_set() {
        let mut c = Config::default();
        for k in KNOBS {
            let v = c.get(k.name).unwrap();
            c.set(k.name, &v)
                .unwrap_or_else(|e| panic!("{}={v}: {e}", k.name));
        }
        assert_eq!(c, Config::default());
    }

    #[test]
    fn every_row_is_complete_and_its_default_is_valid() {
        let d = Config::default();
        d.validate().unwrap();
        for k in KNOBS {
            assert!(!k.description.is_empty(), "{}", k.name);
            assert!(k.min <= k.max, "{}", k.name);
            assert!(!k.allowed(DEFAULT_PAGE_SIZE).is_empty(), "{}", k.name);
            let mut c = d.clone();
            c.set(k.name, k.default)
                .unwrap_or_else(|e| panic!("default of {}: {e}", k.name));
            assert_eq!(c, d, "{}'s default text is not the default", k.name);
            assert_eq!(k.unit == Unit::Enum, !k.words.is_empty(), "{}", k.name);
        }
        let names: std::collections::HashSet<_> = KNOBS.iter().map(|k| k.name).collect();
        assert_eq!(names.len(), KNOBS.len(), "a knob name is repeated");
    }

    #[test]
    fn allowed_texts_state_the_ranges() {
        assert_eq!(
            Config::allowed("checkpoint_timeout").unwrap(),
            "30s to 1d (units ms, s, min, h, d; a bare number is seconds)"
        );
        assert_eq!(
            Config::allowed("wal_sync_method").unwrap(),
            "fdatasync, fsync or open_datasync"
        );
        assert_eq!(
            Config::allowed("buffer_mapping_partitions").unwrap(),
            "a power of two from 1 to 65536"
        );
        assert!(Config::allowed("shared_buffers").unwrap().contains("16 to"));
        assert!(Config::allowed("wal_buffers")
            .unwrap()
            .starts_with("auto, or"));
        assert_eq!(Config::allowed("nope"), None);
    }

    #[test]
    fn units_follow_postgresql() {
        let mut c = Config::default();
        c.set("checkpoint_timeout", "60").unwrap(); // bare = seconds
        assert_eq!(c.checkpoint_timeout_ms, 60_000);
        c.set("checkpoint_timeout", "2min").unwrap();
        assert_eq!(c.get("checkpoint_timeout").unwrap(), "120s");
        c.set("wal_writer_delay", "50").unwrap(); // bare = ms
        assert_eq!(c.wal_writer_delay_ms, 50);
        c.set("commit_delay", "10").unwrap(); // microseconds, as in PostgreSQL
        c.set("commit_siblings", "3").unwrap();
        assert_eq!((c.commit_delay_us, c.commit_siblings), (10, 3));
        assert_eq!(
            Config::default().wal_writer_flush_after,
            1 << 20,
            "wal_writer_flush_after defaults to PostgreSQL's 1MB"
        );
        c.set("wal_writer_flush_after", "256kB").unwrap();
        assert_eq!(
            c.wal_options().writer_flush_after,
            0,
            "commits flush the log themselves"
        );
        c.set("synchronous_commit", "off").unwrap();
        assert_eq!(c.wal_options().writer_flush_after, 256 << 10);
        c.set("wal_writer_flush_after", "0").unwrap();
        assert_eq!(c.get("wal_writer_flush_after").unwrap(), "0B");
        assert!(Config::default().early_lock_release, "on by default");
        assert_eq!(Config::default().wal_options().syncs_in_flight, 1);
        c.set("wal_syncs_in_flight", "2").unwrap();
        assert_eq!(c.wal_options().syncs_in_flight, 2);
        assert_eq!(c.get("wal_syncs_in_flight").unwrap(), "2");
        c.set("early_lock_release", "off").unwrap();
        assert!(!c.early_lock_release);
        assert_eq!(c.get("early_lock_release").unwrap(), "off");
        assert_eq!(
            (
                c.wal_options().commit_delay_us,
                c.wal_options().commit_siblings
            ),
            (10, 3)
        );
        assert_eq!(
            Config::builder()
                .commit_delay(Duration::from_micros(250))
                .build()
                .unwrap()
                .commit_delay_us,
            250
        );
        c.set("wal_buffers", "-1").unwrap();
        assert_eq!(c.wal_buffers, None);
        c.set("wal_buffers", "1MB").unwrap();
        assert_eq!(c.get("wal_buffers").unwrap(), "1MB");
    }

    #[test]
    fn builder_matches_the_text_form_and_validates() {
        let built = Config::builder()
            .shared_buffers(64 << 20)
            .synchronous_commit(false)
            .wal_sync_method(SyncMethod::Fsync)
            .checkpoint_timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let mut text = Config::default();
        text.set("shared_buffers", "64MB").unwrap();
        text.set("synchronous_commit", "off").unwrap();
        text.set("wal_sync_method", "fsync").unwrap();
        text.set("checkpoint_timeout", "30s").unwrap();
        assert_eq!(built, text);
        let err = Config::builder()
            .buffer_mapping_partitions(3)
            .build()
            .unwrap_err();
        assert_eq!(err.knob, "buffer_mapping_partitions");
    }

    #[test]
    fn scan_knobs_reach_the_scan_options() {
        let d = Config::default().scan_options();
        assert_eq!(
            d,
            ScanOptions::default(),
            "table defaults = ScanOptions defaults"
        );
        let mut c = Config::default();
        c.set("seqscan_strategy", "seed003").unwrap();
        c.set("seqscan_sync_threshold", "0.25").unwrap();
        c.set("seqscan_ring_threshold", "12.5").unwrap();
        c.set("seqscan_cache_trail", "on").unwrap();
        c.set("synchronize_seqscans", "off").unwrap();
        let o = c.scan_options();
        assert_eq!(o.strategy, SeqscanStrategy::Seed003);
        assert_eq!(o.sync_threshold_thousandths, 250);
        assert_eq!(o.ring_threshold_thousandths, 12_500);
        assert!(o.cache_trail && !o.synchronize);
        assert_eq!(c.get("seqscan_strategy").unwrap(), "seed003");
        assert_eq!(c.get("seqscan_ring_threshold").unwrap(), "12.5");
        let built = Config::builder()
            .seqscan_strategy(SeqscanStrategy::Seed003)
            .seqscan_ring_threshold(12.5)
            .seqscan_sync_threshold(0.25)
            .seqscan_cache_trail(true)
            .synchronize_seqscans(false)
            .build()
            .unwrap();
        assert_eq!(built.scan_options(), o);
    }

    #[test]
    fn bgwriter_knobs_parse_and_reach_the_pool_options() {
        let mut c = Config::default();
        assert!(c.bgwriter);
        assert_eq!(c.get("bgwriter_lru_multiplier").unwrap(), "2.0");
        assert_eq!(c.get("bgwriter_lru_maxpages").unwrap(), "auto");
        assert_eq!(c.get("bgwriter_flush_after").unwrap(), "512kB");
        c.set("bgwriter", "off").unwrap();
        c.set("bgwriter_strategy", "victim-queue").unwrap();
        c.set("bgwriter_delay", "10").unwrap(); // bare = ms, PostgreSQL's unit
        c.set("bgwriter_lru_maxpages", "0").unwrap();
        c.set("bgwriter_lru_multiplier", "1.25").unwrap();
        c.set("bgwriter_flush_after", "0").unwrap();
        assert_eq!(c.get("bgwriter_io_method").unwrap(), "io_uring");
        c.set("bgwriter_writers", "4").unwrap();
        c.set("bgwriter_io_method", "threads").unwrap();
        assert_eq!(c.get("bgwriter_lru_multiplier").unwrap(), "1.25");
        let o = c.pool_options(8192).unwrap().bgwriter;
        assert_eq!(
            o,
            BgwriterOptions {
                enabled: false,
                strategy: BgwriterStrategy::VictimQueue,
                delay_ms: 10,
                lru_maxpages: Some(0),
                lru_multiplier_thousandths: 1250,
                flush_after_bytes: 0,
                writers: 4,
                io: BgwriterIo::Threads,
            }
        );
        assert_eq!(
            Config::allowed("bgwriter_lru_multiplier").unwrap(),
            "0.0 to 10.0"
        );
        assert_eq!(
            Config::allowed("bgwriter_lru_maxpages").unwrap(),
            "auto, or 0 to 1073741823"
        );
        assert_eq!(
            Config::allowed("bgwriter_delay").unwrap(),
            "10ms to 10s (units ms, s, min, h, d; a bare number is ms)"
        );
        // Automatic maxpages follows the pool: 64 MiB of 8 KiB pages, half per round.
        let c = Config::builder().shared_buffers(64 << 20).build().unwrap();
        assert_eq!(
            c.pool_options(8192)
                .unwrap()
                .bgwriter
                .lru_maxpages_for(8192),
            4096
        );
        let built = Config::builder()
            .bgwriter_lru_multiplier(3.5)
            .bgwriter_strategy(BgwriterStrategy::DirtyChain)
            .bgwriter_delay(Duration::from_millis(50))
            .build()
            .unwrap();
        let mut text = Config::default();
        text.set("bgwriter_lru_multiplier", "3.5").unwrap();
        text.set("bgwriter_strategy", "dirty-chain").unwrap();
        text.set("bgwriter_delay", "50ms").unwrap();
        assert_eq!(built, text);
        assert_eq!(
            Config::builder()
                .bgwriter_lru_multiplier(11.0)
                .build()
                .unwrap_err()
                .knob,
            "bgwriter_lru_multiplier"
        );
    }

    /// Proves: the ring knobs parse, keep their defaults, accept 0 (no ring), name
    /// themselves and their range when refused, and reach the pool's options.
    #[test]
    fn ring_knobs_parse_and_reach_the_pool_options() {
        let mut c = Config::default();
        assert_eq!(c.ring_options(), RingOptions::default());
        assert_eq!(c.get("bulkread_ring_size").unwrap(), "256kB");
        assert_eq!(c.get("bulkwrite_ring_size").unwrap(), "16MB");
        assert_eq!(c.get("vacuum_buffer_usage_limit").unwrap(), "2MB");
        assert_eq!(c.get("ring_growth").unwrap(), "on");
        c.set("bulkread_ring_size", "0").unwrap();
        c.set("bulkwrite_ring_size", "2MB").unwrap();
        c.set("vacuum_buffer_usage_limit", "128kB").unwrap();
        c.set("ring_growth", "off").unwrap();
        assert_eq!(
            c.pool_options(8192).unwrap().rings,
            RingOptions {
                bulkread_bytes: 0,
                bulkwrite_bytes: 2 << 20,
                vacuum_bytes: 128 << 10,
                growth: false,
            }
        );
        let err = c.set("vacuum_buffer_usage_limit", "64kB").unwrap_err();
        assert_eq!(err.knob, "vacuum_buffer_usage_limit");
        assert!(
            err.to_string().contains("0 (no ring) or at least 128kB"),
            "{err}"
        );
        assert_eq!(
            Config::allowed("bulkread_ring_size").unwrap(),
            "0B to 16GB, 0 (no ring) or at least 128kB"
        );
        let built = Config::builder()
            .bulkwrite_ring_size(256 << 10)
            .ring_growth(false)
            .build()
            .unwrap();
        let mut text = Config::default();
        text.set("bulkwrite_ring_size", "256kB").unwrap();
        text.set("ring_growth", "off").unwrap();
        assert_eq!(built, text);
        assert_eq!(
            Config::builder()
                .bulkread_ring_size(1000)
                .build()
                .unwrap_err()
                .knob,
            "bulkread_ring_size"
        );
    }

    #[test]
    fn pool_options_use_the_directory_page_size() {
        let c = Config::builder().shared_buffers(64 << 20).build().unwrap();
        assert_eq!(c.pool_options(16384).unwrap().nbuffers, 4096);
        assert_eq!(c.pool_options(8192).unwrap().nbuffers, 8192);
    }
}
