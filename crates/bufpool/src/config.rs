//! Engine configuration: every knob with its default, allowed range, unit and description.
//!
//! Owns: [`Config`], the parser for PostgreSQL-style sizes (`kB`, `MB`, `GB`, `TB` are
//! powers of 1024; a bare number of `shared_buffers` counts buffers, as in PostgreSQL), and
//! validation. Invariants: a `Config` that passed [`Config::validate`] describes a pool and a
//! storage layout that can be built; every error names the knob, the value and what is
//! allowed. Locks: none.

use std::fmt;

use crate::page::{DEFAULT_PAGE_SIZE, PAGE_SIZES};

/// A bad configuration value: which knob, what was given, what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid value for {knob}: \"{value}\" (allowed: {allowed})")]
pub struct ConfigError {
    pub knob: &'static str,
    pub value: String,
    pub allowed: String,
}

impl ConfigError {
    pub(crate) fn new(
        knob: &'static str,
        value: impl fmt::Display,
        allowed: impl Into<String>,
    ) -> Self {
        Self {
            knob,
            value: value.to_string(),
            allowed: allowed.into(),
        }
    }
}

/// Size of the buffer pool: in bytes, or as a number of buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolSize {
    Bytes(u64),
    Buffers(u64),
}

/// How the pool's page memory asks for huge pages (PostgreSQL's `huge_pages`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HugePages {
    /// Explicit huge pages (MAP_HUGETLB) if reserved, else transparent huge pages, else none.
    #[default]
    Try,
    /// Explicit huge pages or fail.
    On,
    /// Normal pages only.
    Off,
}

impl HugePages {
    pub fn name(self) -> &'static str {
        match self {
            HugePages::Try => "try",
            HugePages::On => "on",
            HugePages::Off => "off",
        }
    }
}

/// Fewest buffers a pool may have (PostgreSQL's minimum for shared_buffers).
pub const MIN_BUFFERS: u64 = 16;
/// Most buffers a pool may have: buffer ids are u32 and one value is reserved.
pub const MAX_BUFFERS: u64 = (1 << 31) - 1;
/// Default pool: 128 MiB, PostgreSQL's default shared_buffers.
pub const DEFAULT_SHARED_BUFFERS_BYTES: u64 = 128 << 20;
/// Default relation segment: 1 GiB, PostgreSQL's RELSEG_SIZE × BLCKSZ.
pub const DEFAULT_SEGMENT_SIZE_BYTES: u64 = 1 << 30;
/// Largest segment: 64 GiB keeps every block offset within a segment far from overflow.
pub const MAX_SEGMENT_SIZE_BYTES: u64 = 64 << 30;
/// Default number of mapping partitions: PostgreSQL's NUM_BUFFER_PARTITIONS.
pub const DEFAULT_MAPPING_PARTITIONS: usize = 128;
/// Most mapping partitions allowed.
pub const MAX_MAPPING_PARTITIONS: usize = 1 << 16;

/// Every knob this layer knows: name, unit, description. `bufpool config` prints them.
pub const KNOBS: &[(&str, &str, &str)] = &[
    (
        "shared_buffers",
        "buffers or bytes",
        "size of the buffer pool",
    ),
    (
        "block_size",
        "bytes",
        "page size, fixed when a data directory is created",
    ),
    (
        "segment_size",
        "bytes",
        "size of one relation segment file, fixed at creation",
    ),
    (
        "buffer_mapping_partitions",
        "count",
        "lock partitions of the buffer mapping table",
    ),
    (
        "huge_pages",
        "enum",
        "use huge pages for page memory: try, on, off",
    ),
    (
        "io_direct",
        "bool",
        "open data files with O_DIRECT (bypass the OS page cache)",
    ),
    (
        "synchronous_commit",
        "bool",
        "a commit waits until its WAL is durable",
    ),
    (
        "full_page_writes",
        "bool",
        "log a full page image on the first change after a checkpoint",
    ),
    ("wal_segment_size", "bytes", "size of one WAL segment file"),
    (
        "wal_buffers",
        "bytes",
        "in-memory WAL ring; auto = shared_buffers/32 within 64kB..16MB",
    ),
    (
        "wal_sync_method",
        "enum",
        "how the WAL is made durable: fdatasync, fsync, open_datasync",
    ),
    (
        "wal_writer_delay",
        "ms",
        "how often the WAL writer flushes when synchronous_commit is off",
    ),
    (
        "checkpoint_timeout",
        "s",
        "time between automatic checkpoints (30s to 1d)",
    ),
];

/// Default checkpoint_timeout: PostgreSQL's 5 minutes.
pub const DEFAULT_CHECKPOINT_TIMEOUT_MS: u64 = 300_000;

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

/// The engine's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub shared_buffers: PoolSize,
    pub block_size: usize,
    pub segment_size: u64,
    pub buffer_mapping_partitions: usize,
    pub huge_pages: HugePages,
    pub io_direct: bool,
    pub synchronous_commit: bool,
    pub full_page_writes: bool,
    pub wal_segment_size: u64,
    /// None: automatic (shared_buffers / 32 within 64kB..16MB).
    pub wal_buffers: Option<u64>,
    pub wal_sync_method: crate::wal::SyncMethod,
    pub wal_writer_delay_ms: u64,
    /// Time between automatic checkpoints (PostgreSQL's checkpoint_timeout), ms.
    pub checkpoint_timeout_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            shared_buffers: PoolSize::Bytes(DEFAULT_SHARED_BUFFERS_BYTES),
            block_size: DEFAULT_PAGE_SIZE,
            segment_size: DEFAULT_SEGMENT_SIZE_BYTES,
            buffer_mapping_partitions: DEFAULT_MAPPING_PARTITIONS,
            huge_pages: HugePages::Try,
            io_direct: false,
            synchronous_commit: true,
            full_page_writes: true,
            wal_segment_size: DEFAULT_WAL_SEGMENT_SIZE,
            wal_buffers: None,
            wal_sync_method: crate::wal::SyncMethod::Fdatasync,
            wal_writer_delay_ms: DEFAULT_WAL_WRITER_DELAY_MS,
            checkpoint_timeout_ms: DEFAULT_CHECKPOINT_TIMEOUT_MS,
        }
    }
}

impl Config {
    /// Sets one knob from its text form, validating it in isolation (the whole config is
    /// checked again by [`Config::validate`]).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let v = value.trim();
        let Some(&(name, _, _)) = KNOBS.iter().find(|k| k.0 == name) else {
            let names: Vec<&str> = KNOBS.iter().map(|k| k.0).collect();
            return Err(ConfigError {
                knob: "(name)",
                value: name.to_string(),
                allowed: format!("one of {}", names.join(", ")),
            });
        };
        match name {
            "shared_buffers" => {
                self.shared_buffers = if v.bytes().all(|b| b.is_ascii_digit()) && !v.is_empty() {
                    PoolSize::Buffers(v.parse().map_err(|_| self.shared_buffers_error(v))?)
                } else {
                    PoolSize::Bytes(parse_size(v).map_err(|_| self.shared_buffers_error(v))?)
                };
                self.nbuffers_checked()?;
            }
            "block_size" => {
                let size = parse_size(v).ok().and_then(|s| usize::try_from(s).ok());
                match size {
                    Some(s) if PAGE_SIZES.contains(&s) => self.block_size = s,
                    _ => return Err(ConfigError::new(name, v, "4kB, 8kB, 16kB or 32kB")),
                }
            }
            "segment_size" => {
                self.segment_size =
                    parse_size(v).map_err(|_| ConfigError::new(name, v, segment_allowed()))?;
                self.check_segment_size(v)?;
            }
            "buffer_mapping_partitions" => {
                self.buffer_mapping_partitions = v
                    .parse()
                    .map_err(|_| ConfigError::new(name, v, partitions_allowed()))?;
                self.check_partitions(v)?;
            }
            "huge_pages" => {
                self.huge_pages = match v {
                    "try" => HugePages::Try,
                    "on" => HugePages::On,
                    "off" => HugePages::Off,
                    _ => return Err(ConfigError::new(name, v, "try, on or off")),
                }
            }
            "io_direct" => {
                self.io_direct =
                    parse_bool(v).ok_or_else(|| ConfigError::new(name, v, "on or off"))?
            }
            "synchronous_commit" => {
                self.synchronous_commit =
                    parse_bool(v).ok_or_else(|| ConfigError::new(name, v, "on or off"))?
            }
            "full_page_writes" => {
                self.full_page_writes =
                    parse_bool(v).ok_or_else(|| ConfigError::new(name, v, "on or off"))?
            }
            "wal_segment_size" => {
                self.wal_segment_size =
                    parse_size(v).map_err(|_| ConfigError::new(name, v, wal_segment_allowed()))?;
                self.check_wal(v)?;
            }
            "wal_buffers" => {
                self.wal_buffers = if v == "auto" || v == "-1" {
                    None
                } else {
                    Some(
                        parse_size(v)
                            .map_err(|_| ConfigError::new(name, v, wal_buffers_allowed()))?,
                    )
                };
                self.check_wal(v)?;
            }
            "wal_sync_method" => {
                use crate::wal::SyncMethod;
                self.wal_sync_method = match v {
                    "fdatasync" => SyncMethod::Fdatasync,
                    "fsync" => SyncMethod::Fsync,
                    "open_datasync" => SyncMethod::OpenDatasync,
                    _ => {
                        return Err(ConfigError::new(
                            name,
                            v,
                            "fdatasync, fsync or open_datasync",
                        ))
                    }
                }
            }
            "wal_writer_delay" => {
                self.wal_writer_delay_ms = parse_ms(v)
                    .filter(|ms| (1..=MAX_WAL_WRITER_DELAY_MS).contains(ms))
                    .ok_or_else(|| {
                        ConfigError::new(
                            name,
                            v,
                            "1ms to 10s (units ms, s, min; a bare number is ms)",
                        )
                    })?
            }
            "checkpoint_timeout" => {
                // PostgreSQL's unit for a bare number here is seconds.
                let ms = if v.bytes().all(|b| b.is_ascii_digit()) && !v.is_empty() {
                    v.parse::<u64>().ok().map(|s| s.saturating_mul(1000))
                } else {
                    parse_ms(v)
                };
                self.checkpoint_timeout_ms = ms
                    .filter(|ms| (30_000..=86_400_000).contains(ms))
                    .ok_or_else(|| {
                        ConfigError::new(
                            name,
                            v,
                            "30s to 1d (units ms, s, min, h, d; a bare number is seconds)",
                        )
                    })?
            }
            _ => unreachable!("every name in KNOBS is handled"),
        }
        Ok(())
    }

    /// What `name` accepts, as its error message states it (None for an unknown knob).
    pub fn allowed(name: &str) -> Option<String> {
        if !KNOBS.iter().any(|k| k.0 == name) {
            return None;
        }
        // No knob accepts this value, so `set` answers with the knob's allowed range.
        Config::default()
            .set(name, "\u{1}not a value")
            .err()
            .map(|e| e.allowed)
    }

    /// The current value of a knob in text form (as `set` accepts it).
    pub fn get(&self, name: &str) -> Option<String> {
        Some(match name {
            "shared_buffers" => match self.shared_buffers {
                PoolSize::Bytes(b) => format_size(b),
                PoolSize::Buffers(n) => n.to_string(),
            },
            "block_size" => format_size(self.block_size as u64),
            "segment_size" => format_size(self.segment_size),
            "buffer_mapping_partitions" => self.buffer_mapping_partitions.to_string(),
            "huge_pages" => self.huge_pages.name().to_string(),
            "io_direct" => on_off(self.io_direct),
            "synchronous_commit" => on_off(self.synchronous_commit),
            "full_page_writes" => on_off(self.full_page_writes),
            "wal_segment_size" => format_size(self.wal_segment_size),
            "wal_buffers" => self
                .wal_buffers
                .map(format_size)
                .unwrap_or_else(|| "auto".into()),
            "wal_sync_method" => self.wal_sync_method.name().to_string(),
            "wal_writer_delay" => format!("{}ms", self.wal_writer_delay_ms),
            "checkpoint_timeout" => format!("{}s", self.checkpoint_timeout_ms / 1000),
            _ => return None,
        })
    }

    /// Checks every knob and their relations.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !PAGE_SIZES.contains(&self.block_size) {
            return Err(ConfigError::new(
                "block_size",
                self.block_size,
                "4kB, 8kB, 16kB or 32kB",
            ));
        }
        self.nbuffers_checked()?;
        self.check_segment_size(&format_size(self.segment_size))?;
        self.check_partitions(&self.buffer_mapping_partitions.to_string())?;
        self.check_wal("")?;
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

    fn check_wal(&self, v: &str) -> Result<(), ConfigError> {
        let s = self.wal_segment_size;
        if !s.is_power_of_two() || !(MIN_WAL_SEGMENT_SIZE..=MAX_WAL_SEGMENT_SIZE).contains(&s) {
            let v = if v.is_empty() {
                format_size(s)
            } else {
                v.to_string()
            };
            return Err(ConfigError::new(
                "wal_segment_size",
                v,
                wal_segment_allowed(),
            ));
        }
        if let Some(b) = self.wal_buffers {
            let min = MIN_WAL_BUFFERS.max(WAL_BUFFERS_MIN_PAGES * self.block_size as u64);
            if !(min..=MAX_WAL_BUFFERS).contains(&b) {
                let v = if v.is_empty() {
                    format_size(b)
                } else {
                    v.to_string()
                };
                return Err(ConfigError::new("wal_buffers", v, wal_buffers_allowed()));
            }
        }
        Ok(())
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
            PoolSize::Bytes(b) => b / self.block_size as u64,
        };
        if (MIN_BUFFERS..=MAX_BUFFERS).contains(&n) {
            Ok(n)
        } else {
            let v = self.get("shared_buffers").unwrap_or_default();
            Err(self.shared_buffers_error(&v))
        }
    }

    fn shared_buffers_error(&self, v: &str) -> ConfigError {
        ConfigError::new(
            "shared_buffers",
            v,
            format!(
                "{MIN_BUFFERS} to {MAX_BUFFERS} buffers of {}, given as a number of buffers or \
                 a size with unit kB, MB, GB or TB ({} to {})",
                format_size(self.block_size as u64),
                format_size(MIN_BUFFERS * self.block_size as u64),
                format_size(MAX_BUFFERS * self.block_size as u64)
            ),
        )
    }

    fn check_segment_size(&self, v: &str) -> Result<(), ConfigError> {
        let s = self.segment_size;
        if s == 0 || s % self.block_size as u64 != 0 || s > MAX_SEGMENT_SIZE_BYTES {
            return Err(ConfigError::new("segment_size", v, segment_allowed()));
        }
        Ok(())
    }

    fn check_partitions(&self, v: &str) -> Result<(), ConfigError> {
        let p = self.buffer_mapping_partitions;
        if p == 0 || !p.is_power_of_two() || p > MAX_MAPPING_PARTITIONS {
            return Err(ConfigError::new(
                "buffer_mapping_partitions",
                v,
                partitions_allowed(),
            ));
        }
        Ok(())
    }
}

fn on_off(b: bool) -> String {
    if b { "on" } else { "off" }.to_string()
}

fn wal_segment_allowed() -> String {
    format!(
        "a power of two from {} to {}",
        format_size(MIN_WAL_SEGMENT_SIZE),
        format_size(MAX_WAL_SEGMENT_SIZE)
    )
}

fn wal_buffers_allowed() -> String {
    format!(
        "auto, or {} (and at least {WAL_BUFFERS_MIN_PAGES} pages of block_size) to {}",
        format_size(MIN_WAL_BUFFERS),
        format_size(MAX_WAL_BUFFERS)
    )
}

/// Parses a duration in milliseconds: `200ms`, `2s`, `1min`, or a bare number of ms.
pub fn parse_ms(v: &str) -> Option<u64> {
    let v = v.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().ok()?;
    match unit.trim() {
        "" | "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "min" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        _ => None,
    }
}

fn segment_allowed() -> String {
    format!(
        "a multiple of block_size, at most {}",
        format_size(MAX_SEGMENT_SIZE_BYTES)
    )
}

fn partitions_allowed() -> String {
    format!("a power of two from 1 to {MAX_MAPPING_PARTITIONS}")
}

/// Parses a boolean the way PostgreSQL does (on/off, true/false, yes/no, 1/0).
pub fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Some(true),
        "off" | "false" | "no" | "0" => Some(false),
        _ => None,
    }
}

/// Parses a size with PostgreSQL's units: `B`, `kB`, `MB`, `GB`, `TB`, each a power of 1024
/// (units are accepted in any case). A bare number means bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if num.is_empty() {
        return Err(format!("\"{s}\" does not start with a number"));
    }
    let n: u64 = num.parse().map_err(|_| format!("\"{num}\" is too large"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "kb" => 10,
        "mb" => 20,
        "gb" => 30,
        "tb" => 40,
        other => return Err(format!("unknown unit \"{other}\": use B, kB, MB, GB or TB")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("\"{s}\" is too large"))
}

/// Formats a byte count with the largest PostgreSQL unit that divides it exactly.
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "TB"), (30, "GB"), (20, "MB"), (10, "kB")] {
        if bytes != 0 && bytes % (1u64 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_powers_of_1024() {
        assert_eq!(parse_size("128MB"), Ok(128 << 20));
        assert_eq!(parse_size("8kB"), Ok(8192));
        assert_eq!(parse_size("1 GB"), Ok(1 << 30));
        assert_eq!(parse_size("2tb"), Ok(2 << 40));
        assert_eq!(parse_size("512"), Ok(512));
        assert!(parse_size("MB").is_err());
        assert!(parse_size("12XB").unwrap_err().contains("unknown unit"));
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("17179869184TB").is_err());
        assert_eq!(format_size(128 << 20), "128MB");
        assert_eq!(format_size(1536), "1536B");
        assert_eq!(format_size(3 << 10), "3kB");
    }

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
            ("full_page_writes", "2"),
            ("wal_segment_size", "1000kB"),
            ("wal_segment_size", "32kB"),
            ("wal_segment_size", "2GB"),
            ("wal_buffers", "4kB"),
            ("wal_sync_method", "osync"),
            ("wal_writer_delay", "0"),
            ("wal_writer_delay", "11s"),
            ("wal_writer_delay", "5h"),
        ];
        for (knob, value) in cases {
            let err = Config::default().set(knob, value).unwrap_err();
            assert_eq!(err.knob, knob, "{knob}={value}");
            let msg = err.to_string();
            assert!(msg.contains(knob) && msg.contains(value), "{msg}");
            assert!(msg.contains("allowed"), "{msg}");
        }
        let err = Config::default().set("shared_bufers", "1").unwrap_err();
        assert!(err.to_string().contains("shared_buffers"), "{err}");
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
        for (name, _, _) in KNOBS {
            let v = c.get(name).unwrap();
            c.set(name, &v)
                .unwrap_or_else(|e| panic!("{name}={v}: {e}"));
        }
        assert_eq!(c, Config::default());
    }
}
