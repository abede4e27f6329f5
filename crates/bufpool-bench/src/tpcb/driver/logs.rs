//! pgbench's logs, one file per `-j` thread in pgbench's names: the aggregate log (`-l
//! --aggregate-interval N`: the clients' per-second statistics regrouped by interval) and
//! the per-transaction log (`-l` alone), in pgbench's line formats.

use std::io::Write as _;

use anyhow::{Context, Result};

use super::client::{ClientStats, TxLine, TxTime};
use super::stats::{slot_at, Slot};
use super::DriverOptions;

/// The log file of `-j` thread `t`: `<prefix>.<pid>` for thread 0, `<prefix>.<pid>.<t>`.
fn log_path(opts: &DriverOptions, t: usize) -> std::path::PathBuf {
    opts.log_dir.join(log_file_name(&opts.log_prefix, t))
}

/// pgbench's name for thread `t`'s log file: `<prefix>.<pid>`, or `<prefix>.<pid>.<t>`
/// for threads after the first.
pub(crate) fn log_file_name(prefix: &str, t: usize) -> String {
    let pid = std::process::id();
    if t == 0 {
        format!("{prefix}.{pid}")
    } else {
        format!("{prefix}.{pid}.{t}")
    }
}

/// pgbench's per-transaction log (PostgreSQL 15 to 18, without --max-tries):
/// `client_id transaction_no time script_no time_epoch time_us [schedule_lag]`, where
/// `time` is the latency in µs, or `skipped` (`-L` with `-R`) or `failed`; `script_no`
/// the script's index from 0 (several scripts: `-b`/`-f` repeated); `time_epoch`
/// and `time_us` say when it ended (seconds and the µs within them); `schedule_lag` only
/// with `-R`. Client c belongs to thread c % threads; lines in order of their end.
pub(crate) fn write_transaction_logs<S>(
    opts: &DriverOptions,
    clients: &[ClientStats<S>],
    start: std::time::Instant,
    wall_start_us: u64,
) -> Result<()> {
    let threads = opts.threads.max(1) as usize;
    for t in 0..threads {
        let path = log_path(opts, t);
        let mut lines: Vec<(u64, usize, &TxLine)> = clients
            .iter()
            .enumerate()
            .filter(|(c, _)| c % threads == t)
            .flat_map(|(c, o)| {
                o.log.iter().map(move |l| {
                    let at =
                        wall_start_us + l.end.saturating_duration_since(start).as_micros() as u64;
                    (at, c, l)
                })
            })
            .collect();
        lines.sort_by_key(|&(at, c, l)| (at, c, l.no));
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(&path)
                .with_context(|| format!("creating log file {}", path.display()))?,
        );
        for (at, c, l) in lines {
            let time = match l.time {
                TxTime::Us(us) => us.to_string(),
                TxTime::Skipped => "skipped".into(),
                TxTime::Failed => "failed".into(),
            };
            let lag = l.lag_us.map(|g| format!(" {g}")).unwrap_or_default();
            writeln!(
                f,
                "{c} {} {time} {} {} {}{lag}",
                l.no,
                l.script,
                at / 1_000_000,
                at % 1_000_000
            )
            .with_context(|| format!("writing {}", path.display()))?;
        }
        f.flush()
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// pgbench's aggregate log: one line per interval, 15 fields (PostgreSQL 15 to 18 with
/// --aggregate-interval and no --failures-detail: interval_start num_transactions
/// sum_latency sum_latency_2 min_latency max_latency sum_lag sum_lag_2 min_lag max_lag
/// skipped retried retries serialization_failures deadlock_failures), latencies in
/// microseconds, one file per thread: <prefix>.<pid> for thread 0, <prefix>.<pid>.<n>.
/// Client c belongs to thread c % threads; intervals start at `wall_start` (unix s).
pub(crate) fn write_aggregate_logs<S>(
    opts: &DriverOptions,
    clients: &[ClientStats<S>],
    interval: u32,
    wall_start: u64,
) -> Result<()> {
    let threads = opts.threads.max(1) as usize;
    for t in 0..threads {
        let path = log_path(opts, t);
        let mut slots: Vec<Slot> = Vec::new();
        for (c, o) in clients.iter().enumerate() {
            if c % threads != t {
                continue;
            }
            for (sec, s) in o.seconds.iter().enumerate() {
                slot_at(&mut slots, sec / interval as usize).merge(s);
            }
        }
        write_aggregate_file(&path, &slots, interval, wall_start)?;
    }
    Ok(())
}

/// Writes `slots` (one per `interval` seconds from `wall_start`, unix s) as one pgbench
/// aggregate log file (the format of [`write_aggregate_logs`]).
pub(crate) fn write_aggregate_file(
    path: &std::path::Path,
    slots: &[Slot],
    interval: u32,
    wall_start: u64,
) -> Result<()> {
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path)
            .with_context(|| format!("creating log file {}", path.display()))?,
    );
    for (i, s) in slots.iter().enumerate() {
        writeln!(
            f,
            "{} {} {:.0} {:.0} {:.0} {:.0} {:.0} {:.0} {:.0} {:.0} {} {} {} 0 {}",
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
            s.retried,
            s.retries,
            s.deadlocks
        )
        .with_context(|| format!("writing {}", path.display()))?;
    }
    f.flush()
        .with_context(|| format!("writing {}", path.display()))
}
