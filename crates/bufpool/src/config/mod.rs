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
    max_shared_buffers_error, shared_buffers_error, BgwriterOptions, CheckpointWriteOptions,
    PoolConfig, PoolOptions, WritebackScope, MAX_BGWRITER_DELAY_MS, MAX_BGWRITER_FLUSH_AFTER_BYTES,
    MAX_BGWRITER_LRU_MAXPAGES, MAX_BGWRITER_LRU_MULTIPLIER_THOUSANDTHS,
    MAX_BGWRITER_LRU_PERCENT_THOUSANDTHS, MAX_BUFFERS, MAX_COMBINE_PAGES, MAX_MAPPING_PARTITIONS,
    MAX_RING_BYTES, MIN_BGWRITER_DELAY_MS, MIN_BUFFERS, MIN_RING_BYTES,
};
use crate::page::{DEFAULT_PAGE_SIZE, PAGE_SIZES};
use crate::scan::{ReadStreamOptions, ScanOptions};
pub use crate::slru::{SlruDesign, SlruSet};
use crate::smgr::SmgrOptions;
use crate::vfs::aio::{AioOptions, IoMethod, MAX_IO_WORKERS};
use crate::wal::{SyncMethod, WalOptions, DEFAULT_PREPARE_SEGMENTS};

pub use crate::buffer::{
    BgwriterIo, BgwriterStrategy, HugePages, ReplacementPolicy, RingOptions,
    DEFAULT_MAPPING_PARTITIONS,
};
pub use crate::options::{format_size, parse_bool, parse_ms, parse_size, ConfigError};
pub use crate::scan::SeqscanStrategy;

mod builder;
mod knobs;
mod layers;
#[cfg(test)]
mod tests;

pub(crate) use builder::with_config_setters;
pub use builder::ConfigBuilder;
pub use knobs::*;

/// Size of the buffer pool: in bytes, or as a number of buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolSize {
    /// A size in bytes.
    Bytes(u64),
    /// A number of buffers.
    Buffers(u64),
}
/// Declares [`Config`] and `Config::blank(placeholder)`, a config whose every field holds
/// a placeholder (one of two, see [`Blank`]) until `Config::default` stores each knob's
/// default over it: the knob table is the only source of defaults, and a test checks that
/// both placeholders give the same `Config::default()` (so every field has a row).
macro_rules! config_struct {
    ($(#[$m:meta])* pub struct Config { $($(#[$fm:meta])* pub $f:ident: $t:ty,)* }) => {
        $(#[$m])* pub struct Config { $($(#[$fm])* pub $f: $t,)* }

        impl Config {
            fn blank(which: bool) -> Self {
                Config { $($f: Blank::blank(which),)* }
            }
        }
    };
}

/// Two placeholder values of a field's type (`which` picks one); never observed outside
/// `Config::default`, which overwrites them all from the knob table.
trait Blank {
    fn blank(which: bool) -> Self;
}

macro_rules! blank {
    ($($t:ty => $a:expr, $b:expr;)*) => {
        $(impl Blank for $t {
            fn blank(which: bool) -> Self {
                if which { $a } else { $b }
            }
        })*
    };
}

blank! {
    u64 => 0, 1;
    u32 => 0, 1;
    usize => 0, 1;
    bool => false, true;
    Option<u64> => None, Some(1);
    PoolSize => PoolSize::Bytes(0), PoolSize::Buffers(1);
    Option<PoolSize> => None, Some(PoolSize::Buffers(1));
    HugePages => HugePages::Off, HugePages::On;
    ReplacementPolicy => ReplacementPolicy::Clock, ReplacementPolicy::Sieve;
    SyncMethod => SyncMethod::Fsync, SyncMethod::OpenDatasync;
    IoMethod => IoMethod::Sync, IoMethod::IoUring;
    BgwriterStrategy => BgwriterStrategy::DirtyChain, BgwriterStrategy::VictimQueue;
    BgwriterIo => BgwriterIo::Threads, BgwriterIo::IoUring;
    SlruDesign => SlruDesign::Central, SlruDesign::Banks;
    SeqscanStrategy => SeqscanStrategy::Seed003, SeqscanStrategy::Quarter;
}

config_struct! {
/// The engine's configuration. Each field is set by one row of [`KNOBS`]; read the
/// fields directly (they are typed), set them through [`Config::set`] (text, as in a
/// configuration file) or [`Config::builder`] (typed).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Size of the buffer pool.
    pub shared_buffers: PoolSize,
    /// Most the pool may be resized to while open (`Engine::resize_pool`); None: the
    /// same as `shared_buffers`.
    pub max_shared_buffers: Option<PoolSize>,
    /// The share of time a shrinking resize works, in thousandths (`resize_duty_cycle`).
    pub resize_duty_cycle_thousandths: u32,
    /// Page size, in bytes; fixed when a data directory is created.
    pub block_size: usize,
    /// Size of one relation segment file, in bytes; fixed at creation.
    pub segment_size: u64,
    /// Lock partitions of the buffer mapping table.
    pub buffer_mapping_partitions: usize,
    /// Which buffer a miss evicts.
    pub buffer_replacement: ReplacementPolicy,
    /// Whether page memory uses huge pages.
    pub huge_pages: HugePages,
    /// B-tree descents read inner pages with no pin and no lock, validated by the page's
    /// version (see the knob).
    pub optimistic_reads: bool,
    /// Data files opened with O_DIRECT (bypassing the OS page cache).
    pub io_direct: bool,
    /// A commit waits until its WAL is durable.
    pub synchronous_commit: bool,
    /// With synchronous commit: end a transaction at its commit record, before its
    /// flush (see the knob).
    pub early_lock_release: bool,
    /// A page's first change after a checkpoint logs a full-page image.
    pub full_page_writes: bool,
    /// `wal_compression = lz4`: full-page images are logged LZ4-compressed, and so is a
    /// change of 1 kB or more (its bytes), when that is smaller.
    pub wal_compression: bool,
    /// Size of one WAL segment file, in bytes.
    pub wal_segment_size: u64,
    /// None: automatic (shared_buffers / 32 within 64kB..16MB).
    pub wal_buffers: Option<u64>,
    /// How the WAL is made durable.
    pub wal_sync_method: SyncMethod,
    /// How often the WAL writer flushes when synchronous commit is off, in milliseconds.
    pub wal_writer_delay_ms: u64,
    /// Whether the engine runs the WAL writer thread.
    pub wal_writer: bool,
    /// PostgreSQL's commit_delay, microseconds (0: off).
    pub commit_delay_us: u64,
    /// PostgreSQL's commit_siblings, counted as other threads flushing the WAL.
    pub commit_siblings: u64,
    /// WAL flush leaders that may sync at once (1: serial syncs).
    pub wal_syncs_in_flight: u64,
    /// Keep the log's durable end in a file of its own, synced before commits are
    /// acknowledged (see the knob).
    pub wal_durable_end: bool,
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
    /// Checkpoint pages written sorted by file and block, balanced across tablespaces.
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
    /// Threads writing a checkpoint's pages.
    pub checkpoint_writers: usize,
    /// checkpoint_sync_method = open_datasync.
    pub checkpoint_open_datasync: bool,
    /// A log line per checkpoint (tracing target `bufpool::checkpoint`).
    pub log_checkpoints: bool,
    /// Whether the engine runs the background writer thread.
    pub bgwriter: bool,
    /// What a bgwriter round does.
    pub bgwriter_strategy: BgwriterStrategy,
    /// Sleep between background writer rounds, in milliseconds.
    pub bgwriter_delay_ms: u64,
    /// None: automatic (see `BgwriterOptions::lru_maxpages_for`).
    pub bgwriter_lru_maxpages: Option<u64>,
    /// Commit-log SLRU pages; None: automatic (see [`Config::transaction_buffers_for`]).
    pub transaction_buffers: Option<u64>,
    /// Subtransaction SLRU pages; None: automatic (see [`Config::slru_set`]).
    pub subtransaction_buffers: Option<u64>,
    /// Multixact offset SLRU pages.
    pub multixact_offset_buffers: u64,
    /// Multixact member SLRU pages.
    pub multixact_member_buffers: u64,
    /// How every SLRU is searched and locked.
    pub slru_design: SlruDesign,
    /// Transaction ends record their commit-log status through a group leader when the
    /// page's bank lock is busy (see the knob).
    pub clog_group_update: bool,
    /// bgwriter_lru_multiplier in thousandths (2.0 is 2000).
    pub bgwriter_lru_multiplier_thousandths: u32,
    /// Bytes; 0 disables the writeback hints.
    pub bgwriter_flush_after: u64,
    /// Each block hinted at most once per checkpoint cycle, on tablespaces whose device a
    /// probe finds fast.
    pub bgwriter_flush_once: bool,
    /// Most of its slowest probed device's write-back rate the bgwriter's writes take, in
    /// thousandths (0: no limit).
    pub bgwriter_device_share_thousandths: u32,
    /// Writes a bgwriter round keeps in flight.
    pub bgwriter_writers: usize,
    /// How the bgwriter keeps them in flight.
    pub bgwriter_io_method: BgwriterIo,
    /// Naps shortened when the clock hand nears the bgwriter's cursor.
    pub bgwriter_adaptive_nap: bool,
    /// The cursor kept ahead of the hand by what the hand passes during one write.
    pub bgwriter_lead: bool,
    /// bgwriter_lru_percent in thousandths (1.0 is 1000); 0: the estimator.
    pub bgwriter_lru_percent_thousandths: u64,
    /// A list policy's bgwriter cleans its frequent list only.
    pub bgwriter_frequent_only: bool,
    /// A large sequential scan starts where another scan of the table is or ended.
    pub synchronize_seqscans: bool,
    /// When a scan uses a ring and a synchronized start.
    pub seqscan_strategy: SeqscanStrategy,
    /// seqscan_sync_threshold in thousandths of the pool.
    pub seqscan_sync_threshold_thousandths: u64,
    /// seqscan_ring_threshold in thousandths of the pool.
    pub seqscan_ring_threshold_thousandths: u64,
    /// A synchronized scan that keeps its pages first reads backwards over the pages
    /// still cached.
    pub seqscan_cache_trail: bool,
    /// Synchronized ring scans of one table wait for each other (see the knob).
    pub seqscan_sync_pacing: bool,
    /// Bytes of a bulk-read ring (0: no ring).
    pub bulkread_ring_size: u64,
    /// Bytes of a bulk-write ring, its cap when growing (0: no ring).
    pub bulkwrite_ring_size: u64,
    /// Bytes of a vacuum ring, its cap when growing (0: no ring).
    pub vacuum_buffer_usage_limit: u64,
    /// Vacuum and bulk-write rings grow and shrink (on) or keep their size (off).
    pub ring_growth: bool,
    /// Whether `bufpool bench` runs the autovacuum launcher.
    pub autovacuum: bool,
    /// Time between the autovacuum launcher's looks at the tables, in milliseconds.
    pub autovacuum_naptime_ms: u64,
    /// Dead versions that, beyond the scale factor's share, make a table due for
    /// autovacuum.
    pub autovacuum_vacuum_threshold: u64,
    /// autovacuum_vacuum_scale_factor in thousandths (0.2 is 200).
    pub autovacuum_vacuum_scale_factor_thousandths: u64,
    /// Cost an autovacuum spends before it naps (page hit 1, read 2, dirtied 20).
    pub autovacuum_vacuum_cost_limit: u64,
    /// An autovacuum's nap each time it has spent the cost limit (0: no pacing), in
    /// milliseconds.
    pub autovacuum_vacuum_cost_delay_ms: u64,
    /// pg_prewarm's autoprewarm: save the pool's block list, reload it after open.
    pub autoprewarm: bool,
    /// Milliseconds between saves of the block list (0: only at shutdown).
    pub autoprewarm_interval_ms: u64,
}
}

/// What to tell someone who named no knob: the closest knob's name when one is close
/// (PostgreSQL's own messages have no such hint; its `\dconfig` lists them), else where the
/// list is.
fn suggestion(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let best = KNOBS
        .iter()
        .map(|k| (strsim::damerau_levenshtein(&lower, k.name), k.name))
        .min();
    match best {
        Some((d, k)) if d <= (k.len() / 3).max(2) => {
            format!("did you mean \"{k}\"? `bufpool config` lists every knob")
        }
        _ => "`bufpool config` lists every knob".to_string(),
    }
}

impl Default for Config {
    /// Every knob at its table default.
    fn default() -> Self {
        Config::from_table(Config::blank(true))
    }
}

impl Config {
    /// `c` with every knob's table default stored over it.
    fn from_table(mut c: Config) -> Config {
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
            return Err(ConfigError::new(
                crate::options::UNKNOWN_KNOB,
                name,
                suggestion(name),
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
}
