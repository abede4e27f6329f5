//! The autovacuum launcher beside the clients (`autovacuum = on`): the library's
//! [`Autovacuum`] over pgbench's four tables, stopped when the clients are done; and the
//! per-table counters (pg_stat_user_tables, with sizes) every bufpool run reports.

use std::time::Instant;

use anyhow::Result;
use bufpool::table::{Autovacuum, AutovacuumStats, Heap};
use bufpool::ForkNumber;

use super::Db;
use crate::report::model::{AutovacuumCounts, TableCounts, TableRow};

/// pgbench's tables by name, the hot ones first (the launcher's order).
pub(super) fn tables<'a, 'e>(db: &'a Db<'e>) -> [(&'static str, &'a Heap<'e>); 4] {
    [
        ("pgbench_branches", &db.branches),
        ("pgbench_tellers", &db.tellers),
        ("pgbench_accounts", &db.accounts),
        ("pgbench_history", &db.history),
    ]
}

/// The main fork's pages of each of pgbench's tables (0 for one that cannot be sized).
pub(super) fn sizes(db: &Db<'_>) -> Vec<u64> {
    tables(db)
        .iter()
        .map(|(_, h)| {
            let n = db.engine.pool().nblocks(h.rel(), ForkNumber::Main);
            u64::from(n.unwrap_or(0))
        })
        .collect()
}

/// Runs the launcher until [`Autovacuum::stop`]; a failed VACUUM fails the run.
pub(super) fn run(db: &Db<'_>, av: &Autovacuum) -> Result<AutovacuumStats> {
    Ok(av.run(&tables(db))?)
}

/// The run's table counters: each table's row and size, and what `av` did (if it ran),
/// its VACUUMs placed in seconds from `start`.
pub(super) fn counts(
    db: &Db<'_>,
    start: Instant,
    pages_start: &[u64],
    av: Option<&AutovacuumStats>,
) -> TableCounts {
    let pages_end = sizes(db);
    let tables = tables(db)
        .iter()
        .enumerate()
        .map(|(i, (name, h))| {
            let s = h.row_stats();
            TableRow {
                relname: name.to_string(),
                n_tup_ins: s.inserted,
                n_tup_upd: s.updated,
                n_tup_del: s.deleted,
                n_live_tup: s.live,
                n_dead_tup: s.dead,
                vacuum_count: s.vacuums,
                autovacuum_count: s.autovacuums,
                pages_start: pages_start.get(i).copied().unwrap_or(0),
                pages_end: pages_end[i],
            }
        })
        .collect();
    let at = |t: Instant| t.saturating_duration_since(start).as_secs_f64();
    TableCounts {
        tables,
        autovacuum: av.map(|a| AutovacuumCounts {
            rounds: a.rounds,
            vacuums: a.vacuums,
            interrupted: a.interrupted,
            pages: a.pages,
            removed: a.removed,
            cost_naps: a.cost_naps,
            cost_nap_s: a.cost_nap_time.as_secs_f64(),
            vacuum_s: a.vacuum_time.as_secs_f64(),
            spans: (a.history.iter())
                .filter(|r| !r.report.interrupted)
                .map(|r| (at(r.started), at(r.ended), r.table.clone()))
                .collect(),
        }),
    }
}
