//! pgbench's aggregate log (`-l --aggregate-interval N`): the clients' per-second
//! statistics regrouped by `-j` thread and by interval, one file per thread, in
//! pgbench's names and line format.

use std::io::Write as _;

use anyhow::{Context, Result};

use super::client::ClientStats;
use super::run::BenchOptions;
use super::stats::{slot_at, Slot};

/// pgbench's aggregate log: one line per interval, 15 fields (PostgreSQL 15 to 18 with
/// --aggregate-interval and no --failures-detail: interval_start num_transactions
/// sum_latency sum_latency_2 min_latency max_latency sum_lag sum_lag_2 min_lag max_lag
/// skipped retried retries serialization_failures deadlock_failures), latencies in
/// microseconds, one file per thread: <prefix>.<pid> for thread 0, <prefix>.<pid>.<n>.
/// Client c belongs to thread c % threads; intervals start at `wall_start` (unix s).
pub(super) fn write_aggregate_logs(
    opts: &BenchOptions,
    clients: &[ClientStats],
    interval: u32,
    wall_start: u64,
) -> Result<()> {
    let threads = opts.threads.max(1) as usize;
    let pid = std::process::id();
    for t in 0..threads {
        let name = if t == 0 {
            format!("{}.{pid}", opts.log_prefix)
        } else {
            format!("{}.{pid}.{t}", opts.log_prefix)
        };
        let path = opts.log_dir.join(name);
        let mut slots: Vec<Slot> = Vec::new();
        for (c, o) in clients.iter().enumerate() {
            if c % threads != t {
                continue;
            }
            for (sec, s) in o.seconds.iter().enumerate() {
                slot_at(&mut slots, sec / interval as usize).merge(s);
            }
        }
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(&path)
                .with_context(|| format!("creating log file {}", path.display()))?,
        );
        for (i, s) in slots.iter().enumerate() {
            writeln!(
                f,
                "{} {} {:.0} {:.0} {:.0} {:.0} {:.0} {:.0} {:.0} {:.0} {} 0 0 0 {}",
                wall_start + i as u64 * u64::from(interval),
                s.n,
                s.sum,
                s.sum2,
                s.min,
                s.max,
                s.lag_sum,
                s.lag_sum2,
                s.lag_min,
                s.lag_max,
                s.skipped,
                s.deadlocks
            )
            .with_context(|| format!("writing {}", path.display()))?;
        }
        f.flush()
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
