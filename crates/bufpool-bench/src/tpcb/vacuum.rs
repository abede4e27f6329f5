//! The VACUUM side thread of `bench --vacuum-every SECS`: every SECS seconds it VACUUMs
//! pgbench_branches, pgbench_tellers and pgbench_accounts (in that order, the hot tables
//! first) while the clients run, as autovacuum would on a busy PostgreSQL. It exists for
//! stress runs (scripts/stress.sh): VACUUM frees deleted rows' roots and prunes every page,
//! racing the clients' row walks, chain compression and the checkpointer.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::{Context, Result};

use super::driver::pace::Ticks;
use super::Db;

/// What the VACUUM side thread did.
#[derive(Debug, Clone, Default)]
pub struct VacuumStats {
    /// Complete passes over the three tables.
    pub passes: u64,
    /// Dead versions removed, over all passes.
    pub removed: u64,
}

/// Runs a pass every `every_s` seconds (the first after `every_s`) until `done`; stops at
/// the first error, which fails the run.
pub(super) fn run(
    db: &Db<'_>,
    every_s: u64,
    start: Instant,
    done: &AtomicBool,
) -> Result<VacuumStats> {
    let mut stats = VacuumStats::default();
    let mut ticks = Ticks::new(start, every_s, done);
    while ticks.wait() {
        for (name, heap) in [
            ("pgbench_branches", &db.branches),
            ("pgbench_tellers", &db.tellers),
            ("pgbench_accounts", &db.accounts),
        ] {
            let report = heap
                .vacuum(false)
                .with_context(|| format!("VACUUM {name} beside the clients"))?;
            stats.removed += report.removed;
        }
        stats.passes += 1;
    }
    Ok(stats)
}
