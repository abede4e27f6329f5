//! `bufpool config`: every knob with its value, default, unit, source and description, the
//! values it allows and when a change takes effect, as pg_settings shows them; bufpool's
//! own knobs (PostgreSQL has none of that name and meaning) are marked.

use std::path::Path;

use anyhow::Result;
use bufpool::config::KNOBS;
use bufpool::Config;

use crate::knobs::load_config;

/// `bufpool config`: every knob with its value, default, unit, source and description,
/// and under it the values it allows (like pg_settings' min_val, max_val, enumvals).
/// The knobs PostgreSQL 18 has under the same name and meaning (`autoprewarm` and
/// `autoprewarm_interval` are pg_prewarm's, `io_direct` PostgreSQL's `debug_io_direct`);
/// every other knob is bufpool's own, and `bufpool config` marks it so.
const POSTGRESQL_KNOBS: &[&str] = &[
    "shared_buffers",
    "block_size",
    "segment_size",
    "huge_pages",
    "io_direct",
    "synchronous_commit",
    "full_page_writes",
    "wal_compression",
    "wal_segment_size",
    "wal_buffers",
    "wal_sync_method",
    "wal_writer_delay",
    "wal_writer_flush_after",
    "commit_delay",
    "commit_siblings",
    "checkpoint_timeout",
    "checkpoint_completion_target",
    "max_wal_size",
    "min_wal_size",
    "checkpoint_flush_after",
    "io_combine_limit",
    "io_method",
    "io_workers",
    "effective_io_concurrency",
    "log_checkpoints",
    "bgwriter_delay",
    "bgwriter_lru_maxpages",
    "bgwriter_lru_multiplier",
    "bgwriter_flush_after",
    "transaction_buffers",
    "subtransaction_buffers",
    "multixact_offset_buffers",
    "multixact_member_buffers",
    "synchronize_seqscans",
    "vacuum_buffer_usage_limit",
    "autovacuum",
    "autovacuum_naptime",
    "autovacuum_vacuum_threshold",
    "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_cost_limit",
    "autovacuum_vacuum_cost_delay",
    "autoprewarm",
    "autoprewarm_interval",
];

pub fn config(dir: &Path, sets: &[(String, String)]) -> Result<()> {
    let (c, sources) = load_config(dir, sets)?;
    let d = Config::default();
    println!(
        "{:<26} {:<14} {:<14} {:<18} {:<20} description",
        "name", "setting", "default", "unit", "source"
    );
    for k in KNOBS {
        println!(
            "{:<26} {:<14} {:<14} {:<18} {:<20} {}",
            k.name,
            k.get(&c),
            k.get(&d),
            k.unit.name(),
            sources[k.name].name(),
            k.description
        );
        println!(
            "{:<26} allowed: {}; takes effect {}{}",
            "",
            k.allowed(c.block_size),
            k.effect.name(),
            if POSTGRESQL_KNOBS.contains(&k.name) {
                ""
            } else {
                "; bufpool's own (PostgreSQL has no such setting)"
            }
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `bufpool config` marks bufpool's own knobs: every name listed as PostgreSQL's is a
    /// knob (a renamed knob cannot leave a stale entry), and the switches PostgreSQL lacks
    /// are not among them.
    #[test]
    fn postgresqls_knobs_are_knobs_and_bufpools_own_are_not_listed() {
        for name in POSTGRESQL_KNOBS {
            assert!(KNOBS.iter().any(|k| k.name == *name), "{name} is no knob");
        }
        for own in [
            "buffer_replacement",
            "wal_durable_end",
            "slru_design",
            "bgwriter_strategy",
        ] {
            assert!(!POSTGRESQL_KNOBS.contains(&own), "{own}");
        }
    }
}
