//! The pool's own options, and the trait through which a higher layer's configuration
//! builds them.
//!
//! Owns: [`PoolOptions`] (how many buffers, huge pages, mapping partitions), its limits, and
//! [`PoolConfig`], implemented by `crate::config::Config` above this layer, so the pool
//! never reads the knob table. Invariants: a [`PoolOptions`] that passed
//! [`PoolOptions::validate`] builds a pool. Locks: none.

use crate::options::{format_size, ConfigError};
use crate::smgr::SmgrOptions;
use crate::vfs::aio::{AioOptions, MAX_IO_WORKERS};

pub use super::arena::HugePages;
use super::policy::ReplacementPolicy;
use super::ring::{RingOptions, MAX_RING_BYTES, MIN_RING_BYTES};

/// Fewest buffers a pool may have (PostgreSQL's minimum for shared_buffers).
pub const MIN_BUFFERS: u64 = 16;
/// Most buffers a pool may have: buffer ids are u32 and one value is reserved.
pub const MAX_BUFFERS: u64 = (1 << 31) - 1;
/// Default `resize_duty_cycle`: a shrink works a tenth of the time, so on a machine the
/// clients keep busy it takes about 5% of two cores.
pub const DEFAULT_RESIZE_DUTY_THOUSANDTHS: u32 = 100;
/// Default number of mapping partitions: PostgreSQL's NUM_BUFFER_PARTITIONS.
pub const DEFAULT_MAPPING_PARTITIONS: usize = 128;
/// Most mapping partitions allowed.
pub const MAX_MAPPING_PARTITIONS: usize = 1 << 16;

// Buffer ids are u32 and u32::MAX ends a mapping chain; the default partition count is
// one `validate` accepts.
const _: () = assert!(
    MIN_BUFFERS <= MAX_BUFFERS && MAX_BUFFERS < u32::MAX as u64,
    "buffer ids must fit a u32 with u32::MAX reserved"
);
const _: () = assert!(
    DEFAULT_MAPPING_PARTITIONS.is_power_of_two()
        && DEFAULT_MAPPING_PARTITIONS <= MAX_MAPPING_PARTITIONS,
    "the default buffer_mapping_partitions is out of its range"
);

/// How to build a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolOptions {
    /// Number of page frames in use when the pool opens (`shared_buffers`).
    pub nbuffers: usize,
    /// Most buffers [`crate::buffer::BufferPool::resize`] may grow the pool to
    /// (`max_shared_buffers`); 0: `nbuffers`. Descriptors and mapping buckets are allocated
    /// for all of them, page memory is only reserved (address space) past `nbuffers`.
    pub max_nbuffers: usize,
    /// The share of wall time a shrinking resize works, in thousandths (1 to 1000,
    /// `resize_duty_cycle`); it sleeps the rest between batches.
    pub resize_duty_thousandths: u32,
    /// Huge pages for page memory (`huge_pages`).
    pub huge_pages: HugePages,
    /// Lock partitions of the mapping table (`buffer_mapping_partitions`), a power of two.
    pub mapping_partitions: usize,
    /// Which buffer a miss takes (`buffer_replacement`).
    pub replacement: ReplacementPolicy,
    /// The background writer (`bgwriter*` knobs).
    pub bgwriter: BgwriterOptions,
    /// Access-strategy rings (`bulkread_ring_size`, `bulkwrite_ring_size`,
    /// `vacuum_buffer_usage_limit`, `ring_growth`).
    pub rings: RingOptions,
    /// How reads run ahead of use go to storage by default (`io_method`, `io_workers`).
    pub aio: AioOptions,
}

impl PoolOptions {
    /// `nbuffers` buffers with the default huge-page policy and partition count.
    pub fn new(nbuffers: usize) -> Self {
        Self {
            nbuffers,
            max_nbuffers: 0,
            resize_duty_thousandths: DEFAULT_RESIZE_DUTY_THOUSANDTHS,
            huge_pages: HugePages::Try,
            mapping_partitions: DEFAULT_MAPPING_PARTITIONS,
            replacement: ReplacementPolicy::Clock,
            bgwriter: BgwriterOptions::default(),
            rings: RingOptions::default(),
            aio: AioOptions::default(),
        }
    }

    /// Checks each field against its limits; the error names the knob that sets it.
    pub fn validate(&self, page_size: usize) -> Result<(), ConfigError> {
        let n = self.nbuffers as u64;
        if !(MIN_BUFFERS..=MAX_BUFFERS).contains(&n) {
            return Err(shared_buffers_error(n.to_string(), page_size));
        }
        let max = self.max_nbuffers as u64;
        if max != 0 && !(n..=MAX_BUFFERS).contains(&max) {
            return Err(max_shared_buffers_error(
                max.to_string(),
                Some(n),
                page_size,
            ));
        }
        if !(1..=1000).contains(&self.resize_duty_thousandths) {
            return Err(ConfigError::new(
                "resize_duty_cycle",
                format!("{}/1000", self.resize_duty_thousandths),
                "0.001 to 1",
            ));
        }
        let p = self.mapping_partitions;
        if p == 0 || !p.is_power_of_two() || p > MAX_MAPPING_PARTITIONS {
            return Err(ConfigError::new(
                "buffer_mapping_partitions",
                p,
                partitions_allowed(),
            ));
        }
        let w = self.aio.workers;
        if !(1..=MAX_IO_WORKERS).contains(&w) {
            return Err(ConfigError::new(
                "io_workers",
                w,
                format!("1 to {MAX_IO_WORKERS}"),
            ));
        }
        self.bgwriter.validate()?;
        for (knob, bytes) in [
            ("bulkread_ring_size", self.rings.bulkread_bytes),
            ("bulkwrite_ring_size", self.rings.bulkwrite_bytes),
            ("vacuum_buffer_usage_limit", self.rings.vacuum_bytes),
        ] {
            if bytes != 0 && !(MIN_RING_BYTES..=MAX_RING_BYTES).contains(&bytes) {
                return Err(ConfigError::new(knob, bytes, ring_size_allowed()));
            }
        }
        Ok(())
    }
}

/// What a ring-size knob accepts, in words.
pub fn ring_size_allowed() -> String {
    format!(
        "0 (no ring) or {} to {}",
        format_size(MIN_RING_BYTES),
        format_size(MAX_RING_BYTES)
    )
}

/// bgwriter_delay bounds: PostgreSQL's 10 ms to 10 s.
pub const MIN_BGWRITER_DELAY_MS: u64 = 10;
/// Largest bgwriter_delay: PostgreSQL's 10 s, in milliseconds.
pub const MAX_BGWRITER_DELAY_MS: u64 = 10_000;
/// Default bgwriter_delay: PostgreSQL's 200 ms.
pub const DEFAULT_BGWRITER_DELAY_MS: u64 = 200;
/// Largest bgwriter_lru_maxpages: PostgreSQL's INT_MAX / 2.
pub const MAX_BGWRITER_LRU_MAXPAGES: u64 = 1_073_741_823;
/// Floor of the automatic bgwriter_lru_maxpages: PostgreSQL's fixed default, so a small
/// pool is never cleaned more timidly than PostgreSQL would.
pub const BGWRITER_LRU_MAXPAGES_FLOOR: u64 = 100;
/// The automatic bgwriter_lru_maxpages lets one round clean this fraction of the pool
/// (1/2) at the default 200 ms delay, i.e. 2.5 pools per second, scaled linearly with the
/// delay in effect so the per-second cap stays the same. 1/8 was tried first and measured
/// too low: TPC-B at scale 5 on a 37 MB pool (local disk, O_DIRECT) turned the pool over
/// 1.4 times a second, the bgwriter stopped at the cap in nearly every round and backends
/// still did 70% of the writes (`bufpool experiment bgwriter --quick --device local`). The
/// "percent" idea of PostgreSQL 8.1's bgwriter: the cap must grow with the pool, because
/// the demand it serves does (TPC-B was measured TPC-B on a 64 MiB pool turning over about half the pool per second, which
/// PostgreSQL's fixed 100 pages per round cannot follow: it stopped at the cap in 283 of
/// ~300 rounds). It is a cap, not a rate: the estimator writes only what upcoming
/// allocations need, so a quiet pool still writes little.
pub const BGWRITER_LRU_MAXPAGES_POOL_DIVISOR: u64 = 2;
/// Default bgwriter_lru_multiplier, PostgreSQL's 2.0, in thousandths.
pub const DEFAULT_BGWRITER_LRU_MULTIPLIER_THOUSANDTHS: u32 = 2000;
/// Largest bgwriter_lru_multiplier, PostgreSQL's 10.0, in thousandths.
pub const MAX_BGWRITER_LRU_MULTIPLIER_THOUSANDTHS: u32 = 10_000;
/// Default bgwriter_flush_after: PostgreSQL's 512 kB on Linux.
pub const DEFAULT_BGWRITER_FLUSH_AFTER_BYTES: u64 = 512 << 10;
/// Largest bgwriter_flush_after: PostgreSQL's 2 MB.
pub const MAX_BGWRITER_FLUSH_AFTER_BYTES: u64 = 2 << 20;

/// What the background writer does each round (`bgwriter_strategy`): the alternatives
/// proposed for PostgreSQL 8.0's bgwriter, each switchable so its effect is measured against the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BgwriterStrategy {
    /// PostgreSQL's BgBufferSync: clean reusable buffers just ahead of the clock hand.
    #[default]
    Lru,
    /// Jan Wieck: the same horizon, but only dirty buffers are visited (a bitmap of dirty
    /// buffers in clock order), so a clean pool costs a word per 64 buffers to pass.
    DirtyChain,
    /// Simon Riggs: the LRU cleaning plus a periodic bounded "mini-checkpoint" that writes
    /// dirty buffers anywhere in the pool (PostgreSQL 8.1's all-scan).
    MiniCheckpoint,
    /// The bgwriter runs the clock sweep itself and hands clean usage-0 buffers to
    /// allocations through a lock-free queue; an allocation pops instead of sweeping.
    VictimQueue,
}

impl BgwriterStrategy {
    /// Every strategy, in the order of their numbers.
    pub const ALL: [BgwriterStrategy; 4] = [
        BgwriterStrategy::Lru,
        BgwriterStrategy::DirtyChain,
        BgwriterStrategy::MiniCheckpoint,
        BgwriterStrategy::VictimQueue,
    ];
    /// The knob's word for it.
    pub fn name(self) -> &'static str {
        ["lru", "dirty-chain", "mini-checkpoint", "victim-queue"][self as usize]
    }
}

// Every bgwriter default passes `BgwriterOptions::validate`, and the automatic
// maxpages' clamp has a floor below its ceiling.
const _: () = assert!(
    MIN_BGWRITER_DELAY_MS <= DEFAULT_BGWRITER_DELAY_MS
        && DEFAULT_BGWRITER_DELAY_MS <= MAX_BGWRITER_DELAY_MS
        && DEFAULT_BGWRITER_LRU_MULTIPLIER_THOUSANDTHS <= MAX_BGWRITER_LRU_MULTIPLIER_THOUSANDTHS
        && DEFAULT_BGWRITER_FLUSH_AFTER_BYTES <= MAX_BGWRITER_FLUSH_AFTER_BYTES
        && BGWRITER_LRU_MAXPAGES_FLOOR <= MAX_BGWRITER_LRU_MAXPAGES,
    "a bgwriter default lies outside its knob's range"
);

/// How the bgwriter keeps several writes in flight (`bgwriter_io_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BgwriterIo {
    /// One thread per write in flight (helper threads kept for the bgwriter thread's life).
    Threads,
    /// One io_uring, from the bgwriter thread alone; `threads` where io_uring is
    /// unavailable (built without the `io-uring` feature, or refused by the kernel).
    #[default]
    IoUring,
}

impl BgwriterIo {
    /// Every method, in the order of their numbers.
    pub const ALL: [BgwriterIo; 2] = [BgwriterIo::Threads, BgwriterIo::IoUring];
    /// The knob's word for it.
    pub fn name(self) -> &'static str {
        ["threads", "io_uring"][self as usize]
    }
}

/// How the background writer works (the `bgwriter*` knobs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BgwriterOptions {
    /// Whether the engine starts the thread (`bgwriter`). A pool without the thread can
    /// still run rounds on demand ([`super::BufferPool::bgwriter_round`]).
    pub enabled: bool,
    /// What each round does (`bgwriter_strategy`).
    pub strategy: BgwriterStrategy,
    /// Sleep between rounds (`bgwriter_delay`), ms.
    pub delay_ms: u64,
    /// Most pages written per round (`bgwriter_lru_maxpages`); `None`: automatic, see
    /// [`BgwriterOptions::lru_maxpages_for`]. 0 disables cleaning.
    pub lru_maxpages: Option<u64>,
    /// Upcoming allocations = smoothed recent allocations × this / 1000
    /// (`bgwriter_lru_multiplier`).
    pub lru_multiplier_thousandths: u32,
    /// Ask the OS to start writeback after this many bytes written (`bgwriter_flush_after`);
    /// 0 disables the hints.
    pub flush_after_bytes: u64,
    /// Hint each block at most once between two complete syncs of the data files, on
    /// tablespaces whose device a probe finds fast (`bgwriter_flush_once`); off: every
    /// write, as PostgreSQL.
    pub flush_once: bool,
    /// Most of the write-back rate of the slowest device a probe measured under the
    /// tablespaces it writes to that the bgwriter's writes take, in thousandths
    /// (`bgwriter_device_share`; 0: no limit): see [`DEFAULT_BGWRITER_DEVICE_SHARE_THOUSANDTHS`].
    pub device_share_thousandths: u32,
    /// Writes a round keeps in flight (`bgwriter_writers`), through one io_uring or on as
    /// many threads (`io`): one synchronous write at a time caps the bgwriter at one device
    /// latency per page.
    pub writers: usize,
    /// How those writes are kept in flight (`bgwriter_io_method`).
    pub io: BgwriterIo,
    /// Nap shorter than `bgwriter_delay` when the clock hand would reach the cursor
    /// sooner (`bgwriter_adaptive_nap`); off: always `bgwriter_delay`, as PostgreSQL.
    pub adaptive_nap: bool,
    /// Keep the cursor the hand's speed × one write's time ahead of the hand
    /// (`bgwriter_lead`); off: clean from wherever the cursor is, as PostgreSQL.
    pub lead: bool,
    /// PostgreSQL 8.1's `bgwriter_lru_percent`, in thousandths of a percent: each round
    /// searches this share of the pool from the clock hand and writes the dirty reusable
    /// buffers it finds (up to the write cap), with no estimate of demand and no cursor
    /// kept between rounds. 0 (the default): the estimator decides how far to scan.
    pub lru_percent_thousandths: u64,
    /// Under a list policy, clean only its frequent list (`bgwriter_frequent_only`: clean
    /// ARC's T2, pages used twice, and leave T1 alone); off: the tails of its lists in
    /// turn, as PostgreSQL 8.0 walked T1 and T2.
    pub frequent_only: bool,
}

/// Largest `bgwriter_lru_percent`: the whole pool, in thousandths of a percent.
pub const MAX_BGWRITER_LRU_PERCENT_THOUSANDTHS: u64 = 100_000;

/// Default `bgwriter_device_share`: the slowest fast device's whole probed write-back
/// rate. When the pool first fills, every buffer the clock reaches is dirty, and a round
/// that cleans ahead of the hand (the estimate times `bgwriter_lru_multiplier`, plus the
/// lead) writes about twice what the backends need: on slow10 (10 MB/s, the log on the same
/// device; TPC-B scale 20 at 490 tps, 2026-11-29, Intel Xeon) 700-1,000 pages a second for
/// three to five seconds, 8 MB/s of hinted writes queued ahead of every commit's log flush:
/// seconds whose worst transaction took 0.8-1.6 s, worse than the checkpoint's. Capped at
/// the probe's 643 pages a second they took 0.35-0.6 s; half of it (322) was below the
/// backends' steady need there (about 450), so backends wrote the rest to the page cache
/// unhinted, 40-60 MB piled up and went to the device at once at the next checkpoint's
/// start (1.2-1.5 s). A fast local disk (probe: 88,000 pages a second or more) is never
/// limited in practice.
pub const DEFAULT_BGWRITER_DEVICE_SHARE_THOUSANDTHS: u32 = 1000;

/// Default `bgwriter_writers`: 16 writes in flight, PostgreSQL 18's
/// effective_io_concurrency. On the ssd-sata profile with O_DIRECT (TPC-B, 8 clients, 30 s
/// runs, once the round kept its lead over the hand; BENCHMARKS.md, issue 12) the
/// backends' share of buffer writes was 10.7-16% with 4, 4.8% with 8 and 1.9% with 16, at
/// the same tps.
pub const DEFAULT_BGWRITER_WRITERS: usize = 16;

impl Default for BgwriterOptions {
    fn default() -> Self {
        Self {
            enabled: true,
            strategy: BgwriterStrategy::Lru,
            delay_ms: DEFAULT_BGWRITER_DELAY_MS,
            lru_maxpages: None,
            lru_multiplier_thousandths: DEFAULT_BGWRITER_LRU_MULTIPLIER_THOUSANDTHS,
            flush_after_bytes: DEFAULT_BGWRITER_FLUSH_AFTER_BYTES,
            flush_once: true,
            device_share_thousandths: DEFAULT_BGWRITER_DEVICE_SHARE_THOUSANDTHS,
            writers: DEFAULT_BGWRITER_WRITERS,
            io: BgwriterIo::IoUring,
            adaptive_nap: true,
            lead: true,
            lru_percent_thousandths: 0,
            frequent_only: false,
        }
    }
}

impl BgwriterOptions {
    /// The per-round write cap in effect for a pool of `nbuffers`: the explicit value, or
    /// `max(100, nbuffers / 2 × delay / 200 ms)` (see [`BGWRITER_LRU_MAXPAGES_POOL_DIVISOR`]).
    pub fn lru_maxpages_for(&self, nbuffers: usize) -> u64 {
        self.lru_maxpages
            .unwrap_or_else(|| auto_lru_maxpages(nbuffers, self.delay_ms))
    }

    /// The multiplier as a number.
    pub fn lru_multiplier(&self) -> f64 {
        f64::from(self.lru_multiplier_thousandths) / 1000.0
    }

    /// Checks each field against its knob's range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(MIN_BGWRITER_DELAY_MS..=MAX_BGWRITER_DELAY_MS).contains(&self.delay_ms) {
            return Err(ConfigError::new(
                "bgwriter_delay",
                format!("{}ms", self.delay_ms),
                "10ms to 10s",
            ));
        }
        if self
            .lru_maxpages
            .is_some_and(|m| m > MAX_BGWRITER_LRU_MAXPAGES)
        {
            return Err(ConfigError::new(
                "bgwriter_lru_maxpages",
                self.lru_maxpages.unwrap_or_default(),
                format!("auto, or 0 to {MAX_BGWRITER_LRU_MAXPAGES}"),
            ));
        }
        if self.lru_multiplier_thousandths > MAX_BGWRITER_LRU_MULTIPLIER_THOUSANDTHS {
            return Err(ConfigError::new(
                "bgwriter_lru_multiplier",
                self.lru_multiplier(),
                "0.0 to 10.0",
            ));
        }
        if self.flush_after_bytes > MAX_BGWRITER_FLUSH_AFTER_BYTES {
            return Err(ConfigError::new(
                "bgwriter_flush_after",
                format_size(self.flush_after_bytes),
                "0 to 2MB",
            ));
        }
        if self.lru_percent_thousandths > MAX_BGWRITER_LRU_PERCENT_THOUSANDTHS {
            return Err(ConfigError::new(
                "bgwriter_lru_percent",
                self.lru_percent_thousandths as f64 / 1000.0,
                "0.0 to 100.0",
            ));
        }
        Ok(())
    }
}

/// The automatic bgwriter_lru_maxpages (see [`BGWRITER_LRU_MAXPAGES_POOL_DIVISOR`]).
pub fn auto_lru_maxpages(nbuffers: usize, delay_ms: u64) -> u64 {
    let scaled = (nbuffers as u64 * delay_ms)
        .div_ceil(BGWRITER_LRU_MAXPAGES_POOL_DIVISOR * DEFAULT_BGWRITER_DELAY_MS);
    scaled.clamp(BGWRITER_LRU_MAXPAGES_FLOOR, MAX_BGWRITER_LRU_MAXPAGES)
}

/// The error for a pool size outside [`MIN_BUFFERS`]..=[`MAX_BUFFERS`] buffers of
/// `page_size` bytes, `given` as the user wrote it.
pub fn shared_buffers_error(given: impl std::fmt::Display, page_size: usize) -> ConfigError {
    let ps = page_size as u64;
    ConfigError::new(
        "shared_buffers",
        given,
        format!(
            "{MIN_BUFFERS} to {MAX_BUFFERS} buffers of {}, given as a number of buffers or \
             a size with unit kB, MB, GB or TB ({} to {})",
            format_size(ps),
            format_size(MIN_BUFFERS * ps),
            format_size(MAX_BUFFERS * ps)
        ),
    )
}

/// The error for a `max_shared_buffers` below `shared_buffers` (`nbuffers`) or past
/// [`MAX_BUFFERS`].
pub fn max_shared_buffers_error(
    given: impl std::fmt::Display,
    nbuffers: Option<u64>,
    page_size: usize,
) -> ConfigError {
    let from = match nbuffers {
        Some(n) => format!(
            "shared_buffers ({n} buffers, {})",
            format_size(n * page_size as u64)
        ),
        None => "shared_buffers".to_string(),
    };
    ConfigError::new(
        "max_shared_buffers",
        given,
        format!(
            "auto (the same as shared_buffers), or {from} to {MAX_BUFFERS} buffers of {}, \
             as a number of buffers or a size with unit kB, MB, GB or TB",
            format_size(page_size as u64)
        ),
    )
}

impl PoolOptions {
    /// The buffer ids the pool is built for: `max_nbuffers`, or `nbuffers` if that is 0.
    pub fn capacity(&self) -> usize {
        if self.max_nbuffers == 0 {
            self.nbuffers
        } else {
            self.max_nbuffers
        }
    }
}

/// What `buffer_mapping_partitions` allows.
pub fn partitions_allowed() -> String {
    format!("a power of two from 1 to {MAX_MAPPING_PARTITIONS}")
}

/// A configuration the pool can be built from: the pool's options for a given page size,
/// and the storage manager's options. `crate::config::Config` implements it (validating
/// every knob first, so its errors are the knob table's); so do the options structs.
pub trait PoolConfig {
    /// The pool's options for pages of `page_size` bytes (the data directory's).
    fn pool_options(&self, page_size: usize) -> Result<PoolOptions, ConfigError>;
    /// How to open the data directory.
    fn smgr_options(&self, create: bool) -> Result<SmgrOptions, ConfigError>;
    /// Whether reads that can take [`crate::buffer::BufferPool::read_optimistic`] do
    /// (`optimistic_reads`); off unless the configuration says so.
    fn optimistic_reads(&self) -> bool {
        false
    }
}

impl PoolConfig for (PoolOptions, SmgrOptions) {
    fn pool_options(&self, page_size: usize) -> Result<PoolOptions, ConfigError> {
        self.0.validate(page_size)?;
        Ok(self.0)
    }
    fn smgr_options(&self, create: bool) -> Result<SmgrOptions, ConfigError> {
        Ok(SmgrOptions { create, ..self.1 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_maxpages_scales_with_the_pool_and_the_delay() {
        // PostgreSQL's 100 is the floor for small pools.
        assert_eq!(auto_lru_maxpages(16, 200), 100);
        assert_eq!(auto_lru_maxpages(200, 200), 100);
        // 64 MiB of 8 KiB pages: half the pool per round.
        assert_eq!(auto_lru_maxpages(8192, 200), 4096);
        // 8 GiB: the cap grows with the pool.
        assert_eq!(auto_lru_maxpages(1 << 20, 200), 524_288);
        // A shorter delay keeps the per-second cap: 1/20 of the per-round pages.
        assert_eq!(auto_lru_maxpages(1 << 20, 10), 26_215);
        let o = BgwriterOptions {
            lru_maxpages: Some(7),
            ..BgwriterOptions::default()
        };
        assert_eq!(o.lru_maxpages_for(1 << 20), 7);
    }

    #[test]
    fn limits_name_their_knob() {
        assert!(PoolOptions::new(16).validate(8192).is_ok());
        assert_eq!(
            PoolOptions::new(15).validate(8192).unwrap_err().knob,
            "shared_buffers"
        );
        let o = PoolOptions {
            max_nbuffers: 63,
            ..PoolOptions::new(64)
        };
        assert_eq!(o.validate(8192).unwrap_err().knob, "max_shared_buffers");
        let o = PoolOptions {
            max_nbuffers: 640,
            ..PoolOptions::new(64)
        };
        assert_eq!((o.validate(8192), o.capacity()), (Ok(()), 640));
        let o = PoolOptions {
            mapping_partitions: 3,
            ..PoolOptions::new(64)
        };
        assert_eq!(
            o.validate(8192).unwrap_err().knob,
            "buffer_mapping_partitions"
        );
        let mut o = PoolOptions::new(64);
        o.rings.vacuum_bytes = 4096;
        assert_eq!(
            o.validate(8192).unwrap_err().knob,
            "vacuum_buffer_usage_limit"
        );
        o.rings.vacuum_bytes = 0;
        assert!(o.validate(8192).is_ok(), "0 is no ring");
    }
}
