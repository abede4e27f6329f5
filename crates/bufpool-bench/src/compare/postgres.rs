//! PostgreSQL's side of `bufpool compare`: `scripts/postgres-peer.sh` runs a throw-away
//! server and pgbench and leaves its figures in a folder; this module finds the script,
//! runs it and turns that folder into the report's [`RunResult`] and the compare table's
//! figures.
//!
//! pgbench runs with `-l` alone (its per-transaction log), not `--aggregate-interval 1`:
//! only the per-transaction log gives latency percentiles. The per-second figures are
//! regrouped from it here, and written next to it in the aggregate format
//! (`pgbench_agg.log`), so both logs are there to read.
//!
//! The report's buffer and checkpoint rows come from the server's own views, read before
//! and after the run: buffer hits and reads are `pg_stat_database`'s `blks_hit` and
//! `blks_read` for pgbench's database; the checkpointer's counters are
//! `pg_stat_checkpointer`'s (17 and later) or `pg_stat_bgwriter`'s; the checkpoints drawn
//! on the charts are the server log's `log_checkpoints` lines ([`super::pg_log`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::report::model::{BufferCounts, CheckpointerCounts, RunResult};
use crate::tpcb::driver::logs::write_aggregate_file;
use crate::tpcb::driver::outcome::{histogram_buckets, latency_summary, per_interval, series};
use crate::tpcb::driver::stats::{latency_histogram, slot_at, Slot};
use crate::ycsb::run::mode_of;
use crate::ycsb::workload::Core;

/// Where the script is: `$BUFPOOL_PG_PEER`, else `scripts/postgres-peer.sh` under the
/// current directory, else in the source tree this binary was built from.
pub fn script_path() -> PathBuf {
    crate::helper_scripts::project_script("postgres-peer.sh", "BUFPOOL_PG_PEER")
}

/// Finds (or, as root, installs) PostgreSQL: its version line, or why it is unavailable.
pub fn probe(version: Option<&str>) -> std::result::Result<String, String> {
    let script = script_path();
    let mut cmd = Command::new("bash");
    cmd.arg(&script).arg("--probe");
    if let Some(v) = version {
        cmd.args(["--postgres-version", v]);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.success() {
        Ok(stdout
            .lines()
            .find_map(|l| l.strip_prefix("version="))
            .unwrap_or("PostgreSQL")
            .to_string())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let reason = stderr
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("skip: "))
            .map(str::to_string)
            .unwrap_or_else(|| format!("{} --probe failed: {}", script.display(), stderr.trim()));
        Err(reason)
    }
}

/// What `postgres-peer.sh` is asked to run.
#[derive(Debug, Clone)]
pub struct PgOptions {
    pub scale: u32,
    pub clients: u32,
    pub jobs: u32,
    pub time_s: u64,
    pub shared_buffers: String,
    pub checkpoint_timeout: String,
    pub sync: bool,
    /// pgbench's -M: "prepared" or "simple".
    pub mode: String,
    pub version: Option<String>,
    /// Seconds between pgbench's progress lines (`-P`).
    pub progress_s: u32,
    /// pgbench's `-R`: the clients' total rate, transactions per second (None: flat out).
    pub rate: Option<f64>,
    /// What the script loads and pgbench runs.
    pub workload: PgWorkload,
}

/// The script's `--workload`: pgbench's TPC-B at `PgOptions::scale`, or one of the
/// others, each loaded by its own SQL and run by its own pgbench scripts, with the same
/// output files as TPC-B's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgWorkload {
    Tpcb,
    /// TPC-C with this many warehouses (`--workload tpcc --warehouses W`: pgbench runs its
    /// five transactions as script files weighted 45/43/4/4/4).
    Tpcc {
        warehouses: u32,
    },
    /// YCSB's workload `core` on this many records (`--workload ycsb-X --records N`).
    Ycsb {
        core: Core,
        records: u64,
    },
}

/// The script's command line, writing into `out`.
pub fn command(o: &PgOptions, out: &Path) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(script_path())
        .arg("--out")
        .arg(out)
        .args(["--scale", &o.scale.to_string()])
        .args(["--clients", &o.clients.to_string()])
        .args(["--jobs", &o.jobs.to_string()])
        .args(["--time", &o.time_s.to_string()])
        .args(["--shared-buffers", &o.shared_buffers])
        .args(["--checkpoint-timeout", &o.checkpoint_timeout])
        .args(["--sync", if o.sync { "on" } else { "off" }])
        .args(["--mode", &o.mode])
        .args(["--progress", &o.progress_s.to_string()]);
    if let Some(v) = &o.version {
        cmd.args(["--postgres-version", v]);
    }
    if let Some(r) = o.rate {
        cmd.args(["--rate", &format!("{r:.0}")]);
    }
    match o.workload {
        PgWorkload::Tpcb => {}
        PgWorkload::Tpcc { warehouses } => {
            cmd.args([
                "--workload",
                "tpcc",
                "--warehouses",
                &warehouses.to_string(),
            ]);
        }
        PgWorkload::Ycsb { core, records } => {
            cmd.args(["--workload", mode_of(core).name()])
                .args(["--records", &records.to_string()]);
        }
    }
    cmd
}

/// A PostgreSQL run, read back from the script's folder.
#[derive(Debug, Clone)]
pub struct PgRun {
    pub result: RunResult,
    pub version: String,
    pub load_s: f64,
    /// Server processes (the postmaster, its live children and its reaped backends) plus
    /// pgbench, s.
    pub cpu_s: f64,
    /// `write_bytes` of the server's processes over the run and the CHECKPOINT after it.
    pub write_bytes: u64,
    /// What the cluster's device wrote meanwhile, if the script could read it.
    pub device_write_bytes: Option<u64>,
    /// Bytes the server's processes passed to write(2) meanwhile (`wchar`).
    pub wchar: Option<u64>,
    /// Largest sum of the server processes' PSS plus pgbench's RSS seen, sampled each second.
    pub peak_bytes: u64,
    /// Buffer writes by backends ÷ all buffer writes (pg_stat_io on 16+, else
    /// pg_stat_bgwriter).
    pub backend_write_share: Option<f64>,
    /// pg_stat_bgwriter (and friends) after minus before.
    pub stats: BTreeMap<String, i64>,
    pub settings: BTreeMap<String, String>,
}

/// `key=value` pairs, whitespace or newline separated.
fn key_values(text: &str) -> BTreeMap<String, String> {
    text.split_whitespace()
        .filter_map(|t| t.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn read(dir: &Path, name: &str) -> Result<String> {
    let p = dir.join(name);
    std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))
}

fn number<T: std::str::FromStr>(
    map: &BTreeMap<String, String>,
    key: &str,
    file: &str,
) -> Result<T> {
    map.get(key)
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("{file}: no number for {key}"))
}

/// Reads the script's folder `dir` (pgbench ran `clients`/`jobs` at `scale` for `time_s`).
pub fn read_run(dir: &Path, o: &PgOptions, label: &str) -> Result<PgRun> {
    let version = read(dir, "version.txt")?.trim().to_string();
    let load_s: f64 = read(dir, "load_s.txt")?
        .trim()
        .parse()
        .context("load_s.txt: not a number")?;
    let pgbench_out = read(dir, "pgbench.out")?;
    let proc_before = key_values(&read(dir, "proc_before.txt")?);
    let proc_after = key_values(&read(dir, "proc_after.txt")?);
    let tck: f64 = number(&proc_after, "clk_tck", "proc_after.txt").unwrap_or(100.0);
    let ticks = |m: &BTreeMap<String, String>, f: &str| number::<u64>(m, "cpu_ticks", f);
    let server_cpu = ticks(&proc_after, "proc_after.txt")?
        .saturating_sub(ticks(&proc_before, "proc_before.txt")?) as f64
        / tck;
    let bytes = |m: &BTreeMap<String, String>, f: &str| number::<u64>(m, "write_bytes", f);
    let write_bytes = bytes(&proc_after, "proc_after.txt")?
        .saturating_sub(bytes(&proc_before, "proc_before.txt")?);
    let dev =
        |m: &BTreeMap<String, String>| m.get("dev_write_bytes").and_then(|v| v.parse::<u64>().ok());
    let wc = |m: &BTreeMap<String, String>| m.get("wchar").and_then(|v| v.parse::<u64>().ok());
    let wchar = wc(&proc_before)
        .zip(wc(&proc_after))
        .map(|(b, a)| a.saturating_sub(b));
    let device_write_bytes = dev(&proc_before)
        .zip(dev(&proc_after))
        .map(|(b, a)| a.saturating_sub(b));
    let pgbench_cpu: f64 = read(dir, "pgbench_cpu.txt")?
        .split_whitespace()
        .filter_map(|v| v.parse::<f64>().ok())
        .sum();
    let peak_bytes: u64 = read(dir, "peak_pss_bytes.txt")?
        .trim()
        .parse()
        .context("peak_pss_bytes.txt: not a number")?;
    let parse_stats = |name: &str| -> Result<BTreeMap<String, i64>> {
        Ok(key_values(&read(dir, name)?)
            .into_iter()
            .filter_map(|(k, v)| v.parse::<f64>().ok().map(|v| (k, v as i64)))
            .collect())
    };
    let before = parse_stats("stats_before.txt")?;
    let after = parse_stats("stats_after.txt")?;
    let stats: BTreeMap<String, i64> = after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .collect();
    let settings = key_values(&read(dir, "settings.txt")?);
    let (secs, hist, start_us, elapsed) = read_transaction_logs(dir, o.time_s)?;
    let wall_start = start_us / 1_000_000;
    write_aggregate_file(&dir.join("pgbench_agg.log"), &secs, 1, wall_start)?;
    let (checkpoints, completed) =
        super::pg_log::checkpoints(&read(dir, "server.log")?, start_us, elapsed);
    let mut total = Slot::default();
    for s in &secs {
        total.merge(s);
    }
    let tps = pgbench_out
        .lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(total.n as f64 / elapsed.max(1e-9));
    let failed = pgbench_out
        .lines()
        .find_map(|l| l.strip_prefix("number of failed transactions: "))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(total.failed);
    let series = series(&secs, &[], elapsed);
    let get = |k: &str| stats.get(k).copied().unwrap_or(0).max(0) as u64;
    // pg_stat_io (16+) names the writer exactly; before 16, pg_stat_bgwriter's
    // buffers_backend, buffers_clean and buffers_checkpoint.
    let (backend, bgwriter, checkpointer) = if stats.contains_key("io_backend_writes") {
        (
            get("io_backend_writes"),
            get("io_bgwriter_writes"),
            get("io_checkpointer_writes"),
        )
    } else {
        (
            get("buffers_backend"),
            get("buffers_clean"),
            get("buffers_checkpoint"),
        )
    };
    let mut config: BTreeMap<String, String> = settings.clone();
    config.insert("pgbench -M".into(), o.mode.clone());
    let result = RunResult {
        provenance: crate::provenance::Provenance::here(),
        label: label.to_string(),
        started_at: crate::report::model::rfc3339_utc(wall_start),
        mode: match o.workload {
            PgWorkload::Tpcc { .. } => super::sqlite_tpcc::mix_label(),
            PgWorkload::Ycsb { core, .. } => mode_of(core).name().into(),
            PgWorkload::Tpcb => "tpcb-like".into(),
        },
        scale: match o.workload {
            PgWorkload::Tpcc { warehouses } => warehouses,
            PgWorkload::Ycsb { .. } => 0,
            PgWorkload::Tpcb => o.scale,
        },
        clients: o.clients,
        threads: o.jobs,
        duration_s: elapsed,
        transactions: total.n,
        failed,
        tps,
        latency_ms: latency_summary(&total, &hist),
        per_interval: per_interval(&series),
        buffers: BufferCounts {
            hits: get("db_blks_hit"),
            reads: get("db_blks_read"),
            written_by_backend: backend,
            written_by_bgwriter: bgwriter,
            written_by_checkpointer: checkpointer,
            allocated: get("buffers_alloc"),
        },
        checkpoints,
        config,
        series,
        latency_histogram: histogram_buckets(&hist),
        bgwriter: None,
        checkpointer: Some(checkpointer_counts(&stats, completed)),
        wal: None,
        slru: Vec::new(),
        side_script: None,
        tables: None,
        bytes_written: None,
        resizes: Vec::new(),
        stat_io: Vec::new(),
        waits: None,
        memory: None,
    };
    let backend_write_share = result.backend_write_share();
    Ok(PgRun {
        result,
        version,
        load_s,
        cpu_s: server_cpu + pgbench_cpu,
        write_bytes,
        device_write_bytes,
        wchar,
        peak_bytes,
        backend_write_share,
        stats,
        settings,
    })
}

/// pg_stat_checkpointer's figures over the run and the CHECKPOINT after it, from the
/// counters' differences (`stats`): its own columns on 17 and later (`ckpt_*`), else
/// pg_stat_bgwriter's checkpoint columns. `num_done` is 18's column; before 18 it is the
/// checkpoints the server log shows completed over the same span (`completed`), since
/// the timed count there includes timed checkpoints skipped on an idle server.
fn checkpointer_counts(stats: &BTreeMap<String, i64>, completed: u64) -> CheckpointerCounts {
    let get = |k: &str| stats.get(k).map(|&v| v.max(0) as u64);
    let ckpt = stats.contains_key("ckpt_num_timed");
    let pick = |new: &str, old: &str| if ckpt { get(new) } else { get(old) }.unwrap_or(0);
    CheckpointerCounts {
        num_timed: pick("ckpt_num_timed", "checkpoints_timed"),
        num_requested: pick("ckpt_num_requested", "checkpoints_req"),
        num_done: get("ckpt_num_done").unwrap_or(completed),
        write_time_ms: pick("ckpt_write_time", "checkpoint_write_time"),
        sync_time_ms: pick("ckpt_sync_time", "checkpoint_sync_time"),
        buffers_written: pick("ckpt_buffers_written", "buffers_checkpoint"),
        slru_written: get("ckpt_slru_written").unwrap_or(0),
    }
}

/// Reads every `pgbench_log.*` per-transaction log in `dir` into per-second slots
/// (counted from the earliest transaction start), a latency histogram, the run's start
/// (µs since the epoch) and its length, s (`time_s` when the log ends within it).
fn read_transaction_logs(
    dir: &Path,
    time_s: u64,
) -> Result<(Vec<Slot>, hdrhistogram::Histogram<u64>, u64, f64)> {
    // (end µs since the epoch, (latency µs, schedule lag µs) or None for a failed one)
    let mut txs: Vec<(u64, Option<(u64, u64)>)> = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("pgbench_log.") {
            continue;
        }
        files += 1;
        let text = std::fs::read_to_string(entry.path())
            .with_context(|| format!("reading {}", entry.path().display()))?;
        for (i, line) in text.lines().enumerate() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 6 {
                bail!(
                    "{name}:{}: not a pgbench transaction log line: {line:?}",
                    i + 1
                );
            }
            let epoch: u64 = f[4].parse().with_context(|| format!("{name}:{}", i + 1))?;
            let us: u64 = f[5].parse().with_context(|| format!("{name}:{}", i + 1))?;
            let lat: Option<u64> = match f[2] {
                "failed" => None,
                "skipped" => continue,
                v => Some(v.parse().with_context(|| format!("{name}:{}", i + 1))?),
            };
            // With -R, a 7th field: the schedule lag, µs (part of the latency).
            let lag: u64 = match f.get(6) {
                Some(v) => v.parse().with_context(|| format!("{name}:{}", i + 1))?,
                None => 0,
            };
            txs.push((epoch * 1_000_000 + us, lat.map(|l| (l, lag))));
        }
    }
    if files == 0 {
        bail!("no pgbench_log.* file in {}", dir.display());
    }
    let start_us = txs
        .iter()
        .map(|&(end, lat)| end - lat.map_or(0, |(l, _)| l).min(end))
        .min()
        .unwrap_or(0);
    let mut secs: Vec<Slot> = Vec::new();
    let mut hist = latency_histogram();
    let mut last_end = start_us;
    for &(end, lat) in &txs {
        let sec = ((end - start_us) / 1_000_000) as usize;
        last_end = last_end.max(end);
        match lat {
            Some((l, lag)) => {
                slot_at(&mut secs, sec).add(l as f64, lag.min(l) as f64);
                hist.record(l.max(1)).ok();
            }
            None => slot_at(&mut secs, sec).failed += 1,
        }
    }
    let measured = (last_end - start_us) as f64 / 1e6;
    let elapsed = if measured <= time_s as f64 + 1.0 {
        (time_s as f64).max(measured)
    } else {
        measured
    };
    Ok((secs, hist, start_us, elapsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_logs_become_seconds_and_a_histogram() {
        let dir = tempfile::tempdir().unwrap();
        // Two threads' logs; the run starts at 1000.000000 - 0.002 s (the first
        // transaction's start).
        std::fs::write(
            dir.path().join("pgbench_log.77"),
            "0 0 2000 0 1000 0\n0 1 1500 0 1000 900000\n0 2 failed 0 1001 100000\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("pgbench_log.77.1"),
            "1 0 3000 0 1001 500000\n1 1 skipped 0 1002 0\n",
        )
        .unwrap();
        let (secs, hist, start, elapsed) = read_transaction_logs(dir.path(), 2).unwrap();
        assert_eq!(start, 999_998_000);
        assert_eq!(secs.len(), 2);
        assert_eq!((secs[0].n, secs[0].failed), (2, 0));
        assert_eq!((secs[1].n, secs[1].failed), (1, 1));
        assert_eq!(secs[0].max, 2000.0);
        assert_eq!(hist.len(), 3);
        assert_eq!(elapsed, 2.0);
    }

    #[test]
    fn checkpointer_counts_from_either_view() {
        let m = |kv: &[(&str, i64)]| -> BTreeMap<String, i64> {
            kv.iter().map(|&(k, v)| (k.to_string(), v)).collect()
        };
        // PostgreSQL 18: pg_stat_checkpointer with num_done and slru_written.
        let c = checkpointer_counts(
            &m(&[
                ("ckpt_num_timed", 2),
                ("ckpt_num_requested", 1),
                ("ckpt_num_done", 2),
                ("ckpt_buffers_written", 900),
                ("ckpt_slru_written", 14),
                ("ckpt_write_time", 27_000),
                ("ckpt_sync_time", 12),
                ("checkpoints_timed", 99),
            ]),
            7,
        );
        assert_eq!(
            (c.num_timed, c.num_requested, c.num_done, c.buffers_written),
            (2, 1, 2, 900)
        );
        assert_eq!(
            (c.slru_written, c.write_time_ms, c.sync_time_ms),
            (14, 27_000, 12)
        );
        // PostgreSQL 15: pg_stat_bgwriter's columns; num_done from the log.
        let c = checkpointer_counts(
            &m(&[
                ("checkpoints_timed", 3),
                ("checkpoints_req", 1),
                ("buffers_checkpoint", 500),
                ("checkpoint_write_time", 100),
            ]),
            2,
        );
        assert_eq!(
            (c.num_timed, c.num_requested, c.num_done, c.buffers_written),
            (3, 1, 2, 500)
        );
        assert_eq!((c.slru_written, c.write_time_ms), (0, 100));
    }

    #[test]
    fn a_malformed_log_line_is_reported_with_its_place() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pgbench_log.5"), "0 0 12 0\n").unwrap();
        let e = read_transaction_logs(dir.path(), 1).unwrap_err();
        assert!(format!("{e:#}").contains("pgbench_log.5:1"), "{e:#}");
        // A schedule lag that is not a number is an error too, not a lag of 0.
        std::fs::write(dir.path().join("pgbench_log.5"), "0 0 12 0 1000 0 x\n").unwrap();
        assert!(read_transaction_logs(dir.path(), 1).is_err());
    }

    /// With `-R` pgbench logs a 7th field, the schedule lag (part of the latency): each
    /// second keeps its largest lag and its longest execution (latency less lag).
    #[test]
    fn throttled_logs_give_each_second_its_lag_and_execution() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("pgbench_log.9"),
            "0 0 900 0 1000 500000 850\n0 1 400 0 1000 700000 10\n",
        )
        .unwrap();
        let (secs, _, _, _) = read_transaction_logs(dir.path(), 1).unwrap();
        assert_eq!(secs.len(), 1);
        assert_eq!(
            (secs[0].max, secs[0].lag_max, secs[0].exec_max),
            (900.0, 850.0, 390.0)
        );
    }
}
