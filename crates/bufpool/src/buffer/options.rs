//! The pool's own options, and the trait through which a higher layer's configuration
//! builds them.
//!
//! Owns: [`PoolOptions`] (how many buffers, huge pages, mapping partitions), its limits, and
//! [`PoolConfig`], implemented by `crate::config::Config` above this layer, so the pool
//! never reads the knob table. Invariants: a [`PoolOptions`] that passed
//! [`PoolOptions::validate`] builds a pool. Locks: none.

use crate::options::{format_size, ConfigError};
use crate::smgr::SmgrOptions;

pub use super::arena::HugePages;

/// Fewest buffers a pool may have (PostgreSQL's minimum for shared_buffers).
pub const MIN_BUFFERS: u64 = 16;
/// Most buffers a pool may have: buffer ids are u32 and one value is reserved.
pub const MAX_BUFFERS: u64 = (1 << 31) - 1;
/// Default number of mapping partitions: PostgreSQL's NUM_BUFFER_PARTITIONS.
pub const DEFAULT_MAPPING_PARTITIONS: usize = 128;
/// Most mapping partitions allowed.
pub const MAX_MAPPING_PARTITIONS: usize = 1 << 16;

/// How to build a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolOptions {
    /// Number of page frames (`shared_buffers`).
    pub nbuffers: usize,
    /// Huge pages for page memory (`huge_pages`).
    pub huge_pages: HugePages,
    /// Lock partitions of the mapping table (`buffer_mapping_partitions`), a power of two.
    pub mapping_partitions: usize,
}

impl PoolOptions {
    /// `nbuffers` buffers with the default huge-page policy and partition count.
    pub fn new(nbuffers: usize) -> Self {
        Self {
            nbuffers,
            huge_pages: HugePages::Try,
            mapping_partitions: DEFAULT_MAPPING_PARTITIONS,
        }
    }

    /// Checks each field against its limits; the error names the knob that sets it.
    pub fn validate(&self, page_size: usize) -> Result<(), ConfigError> {
        let n = self.nbuffers as u64;
        if !(MIN_BUFFERS..=MAX_BUFFERS).contains(&n) {
            return Err(shared_buffers_error(n.to_string(), page_size));
        }
        let p = self.mapping_partitions;
        if p == 0 || !p.is_power_of_two() || p > MAX_MAPPING_PARTITIONS {
            return Err(ConfigError::new(
                "buffer_mapping_partitions",
                p,
                partitions_allowed(),
            ));
        }
        Ok(())
    }
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
    fn limits_name_their_knob() {
        assert!(PoolOptions::new(16).validate(8192).is_ok());
        assert_eq!(
            PoolOptions::new(15).validate(8192).unwrap_err().knob,
            "shared_buffers"
        );
        let o = PoolOptions {
            mapping_partitions: 3,
            ..PoolOptions::new(64)
        };
        assert_eq!(
            o.validate(8192).unwrap_err().knob,
            "buffer_mapping_partitions"
        );
    }
}
