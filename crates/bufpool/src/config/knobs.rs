//! The knob table ([`KNOBS`]): one row per knob with its name, unit, default, bounds,
//! parser, description and when a change takes effect, and the constants its rows use.
//! It is the only source of defaults: `Config::default()` starts from a blank config and
//! stores every row's default.

use super::*;

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
/// Largest checkpoint_timeout: PostgreSQL's 1 day, in milliseconds.
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
/// Largest WAL segment: 1 GiB, in bytes.
pub const MAX_WAL_SEGMENT_SIZE: u64 = 1 << 30;
/// wal_buffers bounds (the automatic size is shared_buffers / 32 clamped to 64kB..16MB,
/// as PostgreSQL does).
pub const MIN_WAL_BUFFERS: u64 = 64 << 10;
/// Largest wal_buffers: 1 GiB, in bytes.
pub const MAX_WAL_BUFFERS: u64 = 1 << 30;
/// wal_buffers must hold this many pages (a record may carry several full-page images and
/// must fit the ring with a margin); the automatic size holds twice as many.
pub const WAL_BUFFERS_MIN_PAGES: u64 = 8;
/// Default WAL writer delay: PostgreSQL's 200 ms. It is also the loss window of an
/// asynchronous commit: a crash loses the commits of at most about three delays (the
/// writer flushes every delay; PostgreSQL documents the same bound).
pub const DEFAULT_WAL_WRITER_DELAY_MS: u64 = 200;
/// Largest wal_writer_delay: PostgreSQL's 10 s, in milliseconds.
pub const MAX_WAL_WRITER_DELAY_MS: u64 = 10_000;
/// commit_delay bounds: PostgreSQL's 0 to 100000 microseconds (default 0, off).
pub const MAX_COMMIT_DELAY_US: u64 = 100_000;
/// commit_siblings bounds: PostgreSQL's 0 to 1000 (default 5).
pub const MAX_COMMIT_SIBLINGS: u64 = 1000;
/// Largest wal_syncs_in_flight: past a few, each leader's batch only gets smaller.
pub const MAX_WAL_SYNCS_IN_FLIGHT: u64 = 8;
/// Largest autovacuum_naptime: PostgreSQL's 2,147,483 s (about 24 days).
pub const MAX_AUTOVACUUM_NAPTIME_MS: u64 = 2_147_483_000;
/// Largest autoprewarm_interval: PostgreSQL's INT_MAX / 1000 s (about 24 days).
pub const MAX_AUTOPREWARM_INTERVAL_MS: u64 = 2_147_483_000;
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
    /// The effect as `bufpool config` prints it.
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
    /// An on/off value.
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
    /// The knob's name, as `set` takes it.
    pub name: &'static str,
    /// The unit of its value.
    pub unit: Unit,
    /// The default, as `set` accepts it ("auto" where it is derived from the pool).
    pub default: &'static str,
    /// Inclusive bounds of an integer value, in the unit's base (count, bytes, ms).
    pub min: u64,
    /// Inclusive upper bound of an integer value, in the unit's base (count, bytes, ms).
    pub max: u64,
    /// The words of an [`Unit::Enum`] knob.
    pub words: &'static [&'static str],
    /// The value must be a power of two.
    pub pow2: bool,
    /// "auto" (or -1) is accepted.
    pub auto: bool,
    /// One line for `bufpool config` and the docs.
    pub description: &'static str,
    /// When a changed value takes effect.
    pub effect: Effect,
    /// Extra rule checked against the whole config (relations between knobs); the second
    /// field is its text in "allowed".
    pub(super) check: Option<Rule>,
    pub(super) store: fn(&mut Config, Value),
    pub(super) load: fn(&Config) -> Value,
}

impl std::fmt::Debug for Knob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Knob").field("name", &self.name).finish()
    }
}

pub(super) const fn row(
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

pub(super) fn int(v: Value) -> u64 {
    match v {
        Value::Int(n) | Value::Buffers(n) => n,
        other => unreachable!("an integer knob got {other:?}"),
    }
}
pub(super) fn flag(v: Value) -> bool {
    matches!(v, Value::Bool(true))
}
pub(super) fn word(v: Value) -> usize {
    match v {
        Value::Word(i) => i,
        other => unreachable!("an enum knob got {other:?}"),
    }
}

pub(super) const SLRU_DESIGNS: [SlruDesign; 3] = SlruDesign::ALL;
/// The rule text of the SLRU size knobs.
pub(super) const WHOLE_BANKS: &str = "a multiple of 16 (whole SLRU banks)";
pub(super) const REPLACEMENT_POLICIES: [ReplacementPolicy; 6] = ReplacementPolicy::ALL;
pub(super) const HUGE_PAGES: [HugePages; 3] = [HugePages::Try, HugePages::On, HugePages::Off];
pub(super) const BGWRITER_STRATEGIES: [BgwriterStrategy; 4] = BgwriterStrategy::ALL;
pub(super) const BGWRITER_IOS: [BgwriterIo; 2] = BgwriterIo::ALL;
pub(super) const IO_METHODS: [IoMethod; 3] = IoMethod::ALL;
pub(super) const SYNC_METHODS: [SyncMethod; 3] = [
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
        auto: true,
        check: Some((
            |c| c.nbuffers_checked().is_err() || c.max_nbuffers_checked().is_ok(),
            "",
        )),
        ..row(
            "max_shared_buffers",
            Unit::BuffersOrBytes,
            "auto",
            "most the pool may be resized to while open (Engine::resize_pool, bench \
             --resize-at); descriptors and the mapping are sized for it, its page memory \
             is only reserved; auto = shared_buffers",
            |c, v| {
                c.max_shared_buffers = match v {
                    Value::Auto => None,
                    Value::Buffers(n) => Some(PoolSize::Buffers(n)),
                    v => Some(PoolSize::Bytes(int(v))),
                }
            },
            |c| match c.max_shared_buffers {
                None => Value::Auto,
                Some(PoolSize::Bytes(b)) => Value::Int(b),
                Some(PoolSize::Buffers(n)) => Value::Buffers(n),
            },
        )
    },
    Knob {
        min: 1,
        max: 1000,
        ..row(
            "resize_duty_cycle",
            Unit::Decimal,
            "0.1",
            "share of the time a shrinking Engine::resize_pool works; it sleeps the rest \
             between batches of 256 buffers, leaving the CPU to transactions (1: no pause)",
            |c, v| c.resize_duty_cycle_thousandths = int(v) as u32,
            |c| Value::Int(u64::from(c.resize_duty_cycle_thousandths)),
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
        words: &["clock", "sieve", "s3fifo", "car", "2q", "cooling"],
        ..row(
            "buffer_replacement",
            Unit::Enum,
            "clock",
            "which buffer a miss evicts: clock (the sweep over usage counts), sieve (SIEVE), \
             s3fifo (S3-FIFO), car (CAR: PostgreSQL 8.0's ARC in clock form), 2q (2Q), cooling (a cooling stage)",
            |c, v| c.buffer_replacement = REPLACEMENT_POLICIES[word(v)],
            |c| Value::Word(c.buffer_replacement as usize),
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
        "optimistic_reads",
        Unit::Bool,
        "off",
        "B-tree lookups and range scans read the inner pages of their descent with no pin and no lock, checking each page's version after reading (a seqlock; vmcache's optimistic latches); a read that overlapped a change or an eviction takes the locked path",
        |c, v| c.optimistic_reads = flag(v),
        |c| Value::Bool(c.optimistic_reads),
    ),
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
    row(
        "clog_group_update",
        Unit::Bool,
        "on",
        "a transaction ending while its commit-log page's bank lock is busy joins a group whose leader records every member's status under one lock acquisition (PostgreSQL's group update); off: each waits for the lock itself",
        |c, v| c.clog_group_update = flag(v),
        |c| Value::Bool(c.clog_group_update),
    ),
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
    row(
        "wal_durable_end",
        Unit::Bool,
        "off",
        "after the log's flush and before commits are acknowledged, write and sync how far the log is durable (wal/durable_end), so recovery refuses damage to acknowledged log at its very end instead of reading it as a torn tail; off, as in PostgreSQL, that damage loses the commits silently. Costs one small write and sync per group of commits: about half the synchronous commit rate on a saturated device",
        |c, v| c.wal_durable_end = flag(v),
        |c| Value::Bool(c.wal_durable_end),
    ),
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
    row(
        "bgwriter_flush_once",
        Unit::Bool,
        "on",
        "on a tablespace whose device a probe finds fast, hint each block at most once \
         between two checkpoints' fsyncs (a block written again stays in the OS cache \
         until the fsync) until an fsync there takes 500 ms or more; slow devices and off: \
         every write, as PostgreSQL",
        |c, v| c.bgwriter_flush_once = flag(v),
        |c| Value::Bool(c.bgwriter_flush_once),
    ),
    Knob {
        min: 0,
        max: 1000,
        ..row(
            "bgwriter_device_share",
            Unit::Decimal,
            "1.0",
            "most of the write-back rate a probe measured for the slowest fast device \
             that the bgwriter's buffered writes take per second (needs \
             bgwriter_flush_once's probe; 0: no limit)",
            |c, v| c.bgwriter_device_share_thousandths = int(v) as u32,
            |c| Value::Int(u64::from(c.bgwriter_device_share_thousandths)),
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
        "bgwriter_adaptive_nap",
        Unit::Bool,
        "on",
        "nap less than bgwriter_delay when the clock hand would reach the cleaned buffers \
         sooner (off: always bgwriter_delay, as PostgreSQL)",
        |c, v| c.bgwriter_adaptive_nap = flag(v),
        |c| Value::Bool(c.bgwriter_adaptive_nap),
    ),
    row(
        "bgwriter_lead",
        Unit::Bool,
        "on",
        "start cleaning where the clock hand cannot arrive before the writes end (off: at \
         the cursor, as PostgreSQL)",
        |c, v| c.bgwriter_lead = flag(v),
        |c| Value::Bool(c.bgwriter_lead),
    ),
    Knob {
        check: Some((
            |c| !c.bgwriter_frequent_only || c.buffer_replacement.has_frequent_list(),
            "off unless buffer_replacement keeps a frequent list (s3fifo, car, 2q)",
        )),
        ..row(
            "bgwriter_frequent_only",
            Unit::Bool,
            "off",
            "clean only the policy's list of frequently used pages (ARC's T2, 2Q's Am, \
             S3-FIFO's M), never the list of new ones (off: both in turn, as PostgreSQL 8.0)",
            |c, v| c.bgwriter_frequent_only = flag(v),
            |c| Value::Bool(c.bgwriter_frequent_only),
        )
    },
    Knob {
        min: 0,
        max: MAX_BGWRITER_LRU_PERCENT_THOUSANDTHS,
        ..row(
            "bgwriter_lru_percent",
            Unit::Decimal,
            "0",
            "PostgreSQL 8.1's search window: each round scans this percent of the pool from \
             the clock hand, no demand estimate (0: the estimator decides)",
            |c, v| c.bgwriter_lru_percent_thousandths = int(v),
            |c| Value::Int(c.bgwriter_lru_percent_thousandths),
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
         still cached (the cache trail)",
        |c, v| c.seqscan_cache_trail = flag(v),
        |c| Value::Bool(c.seqscan_cache_trail),
    ),
    row(
        "seqscan_sync_pacing",
        Unit::Bool,
        "on",
        "synchronized scans through rings stay together: the front one waits (at most 50 ms \
         at a time) while it is more than half a ring ahead of its table's last scan",
        |c, v| c.seqscan_sync_pacing = flag(v),
        |c| Value::Bool(c.seqscan_sync_pacing),
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
    row(
        "autovacuum",
        Unit::Bool,
        "off",
        "run the autovacuum launcher beside the clients (bufpool bench; embedders run \
         table::Autovacuum on a thread of their own)",
        |c, v| c.autovacuum = flag(v),
        |c| Value::Bool(c.autovacuum),
    ),
    Knob {
        min: 1_000,
        max: MAX_AUTOVACUUM_NAPTIME_MS,
        ..row(
            "autovacuum_naptime",
            Unit::S,
            "1min",
            "time between the autovacuum launcher's looks at the tables (1s to 24d)",
            |c, v| c.autovacuum_naptime_ms = int(v),
            |c| Value::Int(c.autovacuum_naptime_ms),
        )
    },
    Knob {
        min: 0,
        max: i32::MAX as u64,
        ..row(
            "autovacuum_vacuum_threshold",
            Unit::Count,
            "50",
            "dead versions that, beyond the scale factor's share, make a table due for \
             autovacuum",
            |c, v| c.autovacuum_vacuum_threshold = int(v),
            |c| Value::Int(c.autovacuum_vacuum_threshold),
        )
    },
    Knob {
        min: 0,
        max: 100_000,
        ..row(
            "autovacuum_vacuum_scale_factor",
            Unit::Decimal,
            "0.2",
            "share of a table's live rows that, dead, make it due for autovacuum (0 to 100)",
            |c, v| c.autovacuum_vacuum_scale_factor_thousandths = int(v),
            |c| Value::Int(c.autovacuum_vacuum_scale_factor_thousandths),
        )
    },
    Knob {
        min: 1,
        max: 10_000,
        ..row(
            "autovacuum_vacuum_cost_limit",
            Unit::Count,
            "200",
            "cost an autovacuum spends before it naps (page hit 1, read 2, dirtied 20: \
             PostgreSQL's vacuum_cost_page_* defaults)",
            |c, v| c.autovacuum_vacuum_cost_limit = int(v),
            |c| Value::Int(c.autovacuum_vacuum_cost_limit),
        )
    },
    Knob {
        min: 0,
        max: 100,
        ..row(
            "autovacuum_vacuum_cost_delay",
            Unit::Ms,
            "2ms",
            "an autovacuum's nap each time it has spent the cost limit (0: no pacing; \
             at most 100ms)",
            |c, v| c.autovacuum_vacuum_cost_delay_ms = int(v),
            |c| Value::Int(c.autovacuum_vacuum_cost_delay_ms),
        )
    },
    row(
        "autoprewarm",
        Unit::Bool,
        "off",
        "pg_prewarm's autoprewarm: save the pool's block list (autoprewarm.blocks) every \
         autoprewarm_interval and at shutdown, and read it back in the background after \
         open",
        |c, v| c.autoprewarm = flag(v),
        |c| Value::Bool(c.autoprewarm),
    ),
    Knob {
        min: 0,
        max: MAX_AUTOPREWARM_INTERVAL_MS,
        ..row(
            "autoprewarm_interval",
            Unit::S,
            "300s",
            "time between saves of the block list (0: only at shutdown; at most 24d)",
            |c, v| c.autoprewarm_interval_ms = int(v),
            |c| Value::Int(c.autoprewarm_interval_ms),
        )
    },
];

/// The `seqscan_strategy` words, in table order.
pub(super) const SEQSCAN_STRATEGIES: [SeqscanStrategy; 2] =
    [SeqscanStrategy::Quarter, SeqscanStrategy::Seed003];

/// Largest `seqscan_sync_threshold` / `seqscan_ring_threshold`: 1000 pools.
pub const MAX_SEQSCAN_THRESHOLD_THOUSANDTHS: u64 = 1_000_000;

/// A ring size knob's rule: 0 (no ring) or at least [`MIN_RING_BYTES`].
pub(super) fn ring_size_ok(bytes: u64) -> bool {
    bytes == 0 || bytes >= MIN_RING_BYTES
}

/// The row of the knob called `name`.
pub fn knob(name: &str) -> Option<&'static Knob> {
    KNOBS.iter().find(|k| k.name == name)
}

impl Knob {
    /// Parses `text` by the row's unit, without range checks (`None`: not a value of this
    /// kind at all).
    pub(super) fn parse(&self, text: &str) -> Option<Value> {
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
    pub(super) fn in_range(&self, value: Value) -> bool {
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
            Unit::BuffersOrBytes if self.auto => {
                return max_shared_buffers_error("", None, block_size).allowed
            }
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

    pub(super) fn error(&self, value: &str, block_size: usize) -> ConfigError {
        ConfigError::new(self.name, value, self.allowed(block_size))
    }
}

/// Parses a decimal number with at most three fractional digits into thousandths.
pub(super) fn parse_thousandths(v: &str) -> Option<u64> {
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
pub(super) fn format_thousandths(n: u64) -> String {
    let frac = format!("{:03}", n % 1000);
    let frac = frac.trim_end_matches('0');
    format!("{}.{}", n / 1000, if frac.is_empty() { "0" } else { frac })
}

/// A duration in the largest unit that divides it exactly.
pub(super) fn format_ms(ms: u64) -> String {
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
