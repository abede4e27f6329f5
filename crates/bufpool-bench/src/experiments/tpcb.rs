//! `bufpool experiment tpcb` (issue 14): whether TPC-B throughput holds over time, how
//! flat a second is, what a transaction costs in CPU, and where the rate stands against
//! the device's commit limit, SQLite and (optionally) an earlier bufpool binary.
//!
//! All runs are in this process (the baseline binary excepted), each on a fresh copy of
//! one template database (scale 10 by default, pool 64 MB, checkpoint_timeout 30 s: the
//! issue's settings), on the local disk, buffered:
//! 1. c4, synchronous commit on, `--minutes` long (default 5): per-second TPS, the median
//!    of the last window over the first full window (`last_vs_first_minute_sync_on`; the
//!    window is a minute, or a third of a shorter run), TPS, CPU per transaction (process
//!    CPU seconds over transactions).
//! 2. the same with synchronous commit off (`last_vs_first_minute_sync_off`).
//! 3. c1 and c4, synchronous commit on, one minute each with no checkpoint due
//!    (checkpoint_timeout 1 h, max_wal_size 64 GB): the p50 of the per-second maximum
//!    latency over the seconds that no checkpoint overlaps (`maxlat_p50_ms_c1`,
//!    `maxlat_p50_ms_c4`).
//! 4. SQLite (WAL mode, synchronous NORMAL, same cache size), c4, one minute:
//!    `sync_off_vs_sqlite_normal` = run 2's TPS over SQLite's.
//! 5. raw fdatasync rate (8 KiB write + fdatasync, one thread): `tpcb_vs_limit` = run 1's
//!    TPS over 4 x that rate. Right after run 3, the same loop for a side run's length:
//!    its per-second maximum latency p50 (`raw_fdatasync_per_second_max_p50_ms`, a row of
//!    the table and a note), the device's floor under run 3's latency figures.
//! 6. with `--baseline BIN`: that binary's `bench` on a fresh copy, c4 sync on, one
//!    minute: `c4_sync_on_vs_baseline` = the c4 sync-on TPS of run 3 over the baseline's
//!    (the "at least 2x today's tps").
//!
//! Every run's `RunResult` goes to `<dir>/tpcb/<label>.json` for `bufpool report`. After
//! runs 1 and 2 the sizes of the four tables are reported (the space a hot table leaks
//! shows there). `--quick`: scale 2, 30 s runs, 10 s windows and 10 s side runs.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use super::device::{copy_db, remove_db};
use super::{layout, progress, Goal, Ratio, Report, RunInfo};
use crate::commands::{run_bench, BenchArgs};
use crate::report::model::RunResult;

/// What `bufpool experiment tpcb` was asked to do.
#[derive(Debug, Clone)]
pub struct TpcbExpOptions {
    pub parent_dir: PathBuf,
    pub command: Vec<String>,
    /// Length of the two long runs.
    pub seconds: u64,
    /// Length of the side runs (c1/c4 latency, SQLite, baseline).
    pub side_seconds: u64,
    pub scale: u32,
    /// An earlier bufpool binary to measure c4 sync-on TPS against.
    pub baseline: Option<PathBuf>,
}

/// The median of `v` (0 for none).
fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// The window the decay ratio compares: a minute, or a third of a shorter run.
pub fn window_s(run_s: u64) -> u64 {
    (run_s / 3).clamp(1, 60)
}

/// Median per-second TPS of the last window over that of the first full window (the
/// first second is left out: it holds the clients' start).
pub fn last_vs_first(r: &RunResult, window: u64) -> (f64, f64, f64) {
    let tps: Vec<f64> = r.series.iter().map(|s| s.tps).collect();
    let w = window as usize;
    if tps.len() < 2 * w + 1 {
        return (0.0, 0.0, 0.0);
    }
    let first = median(&tps[1..1 + w]);
    let last = median(&tps[tps.len() - w..]);
    (first, last, if first > 0.0 { last / first } else { 0.0 })
}

/// The per-second maximum latencies of the seconds no checkpoint overlaps.
pub fn maxlat_outside_checkpoints(r: &RunResult) -> Vec<f64> {
    r.series
        .iter()
        .filter(|s| {
            // Second `t` (from 0) covers [t, t + 1) of the run.
            let (a, b) = (f64::from(s.t), f64::from(s.t) + 1.0);
            !r.checkpoints.iter().any(|c| c.start_s < b && c.end_s > a)
        })
        .map(|s| s.lat_max_ms)
        .collect()
}

/// This process's CPU time (user + system), from /proc/self/stat.
fn process_cpu_s() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz.max(1.0)
}

struct Run {
    label: String,
    result: RunResult,
    cpu_us_per_txn: f64,
}

pub(crate) fn bench_args(
    dir: &Path,
    clients: u32,
    seconds: u64,
    sets: Vec<(String, String)>,
    label: &str,
) -> BenchArgs {
    BenchArgs {
        threads: if clients >= 2 { 2 } else { 1 },
        label: Some(label.to_string()),
        ..BenchArgs::tpcb(dir, clients, seconds, sets)
    }
}

/// Sizes of the four tables' main forks, bytes, by table name (empty if the directory
/// cannot be opened: the figure is informative, the runs' results stand without it).
fn table_sizes(dir: &Path) -> Vec<(String, u64)> {
    let vfs = bufpool::RealVfs::new();
    let Ok((config, _)) = crate::commands::load_config(dir, &[]) else {
        return Vec::new();
    };
    let Ok(engine) = bufpool::Engine::open(Arc::new(vfs), dir, &config, false) else {
        return Vec::new();
    };
    let Ok(db) = crate::tpcb::Db::open(&engine, &vfs, dir) else {
        return Vec::new();
    };
    let page = engine.pool().page_size() as u64;
    [
        ("accounts", &db.accounts),
        ("branches", &db.branches),
        ("tellers", &db.tellers),
        ("history", &db.history),
    ]
    .iter()
    .map(|(name, h)| {
        let blocks = engine
            .pool()
            .nblocks(h.rel(), bufpool::ForkNumber::Main)
            .unwrap_or(0);
        (name.to_string(), u64::from(blocks) * page)
    })
    .collect()
}

pub fn run(o: &TpcbExpOptions) -> Result<Report> {
    std::fs::create_dir_all(&o.parent_dir)
        .with_context(|| format!("creating {}", o.parent_dir.display()))?;
    let out_dir = std::path::absolute(o.parent_dir.join("tpcb"))?;
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let scratch = tempfile::Builder::new()
        .prefix("tpcb-")
        .tempdir_in(&o.parent_dir)?;
    let root = std::path::absolute(scratch.path())?;
    let template = root.join("template");
    progress(format!("tpcb: loading a scale-{} template", o.scale));
    let base: Vec<(String, String)> = [
        ("shared_buffers", "64MB"),
        ("checkpoint_timeout", "30s"),
        ("log_checkpoints", "off"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    crate::commands::init(&template, o.scale, 100, &[], &base)?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut notes = Vec::new();
    let mut runs: Vec<Run> = Vec::new();
    let mut sizes = serde_json::Map::new();
    let mut size_rows: Vec<Vec<String>> = Vec::new();

    let mut one =
        |label: &str, clients: u32, seconds: u64, extra: &[(&str, &str)]| -> Result<usize> {
            let dir = root.join("run");
            remove_db(&dir);
            copy_db(&template, &dir)?;
            let mut sets = base.clone();
            sets.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            let args = bench_args(&dir, clients, seconds, sets, label);
            progress(format!("tpcb: {label}: {clients} clients, {seconds} s"));
            let cpu0 = process_cpu_s();
            let out = run_bench(&args, stop.clone()).with_context(|| label.to_string())?;
            let cpu = process_cpu_s() - cpu0;
            let r = out.result;
            let cpu_us = if r.transactions > 0 {
                cpu * 1e6 / r.transactions as f64
            } else {
                0.0
            };
            progress(format!(
                "tpcb: {label}: {:.0} tps, {cpu_us:.0} us CPU per transaction",
                r.tps
            ));
            let path = out_dir.join(format!("{}.json", label.replace(' ', "-")));
            std::fs::write(&path, serde_json::to_string_pretty(&r)?)
                .with_context(|| format!("writing {}", path.display()))?;
            if seconds >= 20 && (label.starts_with("c4 sync")) {
                let s = table_sizes(&dir);
                let mut row = vec![label.to_string()];
                for (name, bytes) in &s {
                    row.push(format!("{:.1}", *bytes as f64 / 1048576.0));
                    sizes.insert(format!("{label}: {name}"), (*bytes).into());
                }
                if size_rows.is_empty() {
                    let mut h = vec!["table MB after".to_string()];
                    h.extend(s.iter().map(|(n, _)| n.clone()));
                    size_rows.push(h);
                }
                size_rows.push(row);
            }
            remove_db(&dir);
            runs.push(Run {
                label: label.to_string(),
                result: r,
                cpu_us_per_txn: cpu_us,
            });
            Ok(runs.len() - 1)
        };

    let on = one("c4 sync on", 4, o.seconds, &[("synchronous_commit", "on")])?;
    let off = one(
        "c4 sync off",
        4,
        o.seconds,
        &[("synchronous_commit", "off")],
    )?;
    let quiet = [
        ("synchronous_commit", "on"),
        ("checkpoint_timeout", "1h"),
        ("max_wal_size", "64GB"),
    ];
    let c1 = one("c1 no checkpoint", 1, o.side_seconds, &quiet)?;
    let c4 = one("c4 no checkpoint", 4, o.side_seconds, &quiet)?;
    // The device's floor under those two figures, measured right after them: one thread
    // writing 8 KiB and calling fdatasync in a loop, its per-second maximum latency.
    progress(format!(
        "tpcb: raw fdatasync loop, {} s (per-second maximum latency)",
        o.side_seconds
    ));
    let (raw_rate, raw_maxes) =
        super::wal::raw_fdatasync_per_second_max(&root, Duration::from_secs(o.side_seconds))?;
    let raw_maxlat = median(&raw_maxes);
    progress(format!(
        "tpcb: raw fdatasync: {raw_rate:.0}/s, per-second max latency p50 {raw_maxlat:.1} ms"
    ));

    // SQLite, WAL mode, synchronous NORMAL, same cache.
    let sqlite_dir = root.join("sqlite");
    std::fs::create_dir_all(&sqlite_dir)?;
    progress(format!("tpcb: loading SQLite at scale {}", o.scale));
    crate::compare::sqlite::load(&sqlite_dir, o.scale)?;
    progress(format!(
        "tpcb: SQLite NORMAL: 4 clients, {} s",
        o.side_seconds
    ));
    let sq = crate::compare::sqlite::run(
        &crate::compare::sqlite::SqliteOptions {
            dir: sqlite_dir.clone(),
            clients: 4,
            jobs: 2,
            duration: Duration::from_secs(o.side_seconds),
            sync: false,
            cache_bytes: 64 << 20,
            seed: 0x5eed,
            log_prefix: None,
        },
        &stop,
    )?;
    let _ = std::fs::remove_dir_all(&sqlite_dir);
    progress(format!("tpcb: SQLite NORMAL: {:.0} tps", sq.result.tps));

    let fsync_rate = super::wal::raw_fdatasync_per_s(&root, Duration::from_secs(2))?;

    // The baseline binary, on a fresh copy, c4 sync on, as run `c4`.
    let mut baseline_tps = None;
    if let Some(bin) = &o.baseline {
        // Its own load (same scale), by the baseline itself: an older binary may refuse a
        // bufpool.conf that names knobs it does not have.
        let dir = root.join("baseline");
        remove_db(&dir);
        progress(format!(
            "tpcb: baseline {}: loading scale {}",
            bin.display(),
            o.scale
        ));
        let status = std::process::Command::new(bin)
            .arg("init")
            .arg("-D")
            .arg(&dir)
            .args(["-s", &o.scale.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .with_context(|| format!("running {}", bin.display()))?;
        anyhow::ensure!(status.success(), "{} init failed: {status}", bin.display());
        let out = root.join("baseline.json");
        progress(format!(
            "tpcb: baseline {}: 4 clients, {} s",
            bin.display(),
            o.side_seconds
        ));
        let mut cmd = std::process::Command::new(bin);
        cmd.arg("bench")
            .arg("-D")
            .arg(&dir)
            .args(["-c", "4", "-j", "2", "-T"]);
        cmd.arg(o.side_seconds.to_string()).arg("--out").arg(&out);
        for (k, v) in base.iter().chain(
            quiet
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
                .iter(),
        ) {
            cmd.arg("--set").arg(format!("{k}={v}"));
        }
        let status = cmd
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .with_context(|| format!("running {}", bin.display()))?;
        anyhow::ensure!(status.success(), "{} bench failed: {status}", bin.display());
        let r: RunResult = serde_json::from_slice(&std::fs::read(&out)?)
            .with_context(|| format!("reading {}", out.display()))?;
        progress(format!("tpcb: baseline: {:.0} tps", r.tps));
        baseline_tps = Some(r.tps);
        remove_db(&dir);
    } else {
        notes.push(
            "no --baseline binary: c4_sync_on_vs_baseline (the issue's 2x target) not measured"
                .into(),
        );
    }
    remove_db(&template);
    scratch.close()?;
    notes.push(format!(
        "the device's own floor under maxlat_p50_ms_c1/_c4: one thread's write + fdatasync \
         loop, right after those runs, had a per-second maximum latency p50 of \
         {raw_maxlat:.1} ms ({raw_rate:.0} syncs/s)"
    ));

    let w = window_s(o.seconds);
    let (on_first, on_last, on_ratio) = last_vs_first(&runs[on].result, w);
    let (off_first, off_last, off_ratio) = last_vs_first(&runs[off].result, w);
    let ml1 = median(&maxlat_outside_checkpoints(&runs[c1].result));
    let ml4 = median(&maxlat_outside_checkpoints(&runs[c4].result));
    let mut ratios = vec![
        Ratio::new(
            "last_vs_first_minute_sync_on",
            &[on_ratio],
            Goal::AtLeast,
            0.9,
        ),
        Ratio::new(
            "last_vs_first_minute_sync_off",
            &[off_ratio],
            Goal::AtLeast,
            0.9,
        ),
        Ratio::new("maxlat_p50_ms_c1", &[ml1], Goal::AtMost, 5.0),
        Ratio::new("maxlat_p50_ms_c4", &[ml4], Goal::AtMost, 5.0),
        Ratio::new(
            "sync_off_vs_sqlite_normal",
            &[runs[off].result.tps / sq.result.tps.max(1.0)],
            Goal::AtLeast,
            1.0,
        ),
        Ratio::new(
            "tpcb_vs_limit",
            &[runs[on].result.tps / (4.0 * fsync_rate).max(1.0)],
            Goal::AtLeast,
            0.0,
        ),
    ];
    if let Some(b) = baseline_tps {
        ratios.push(Ratio::new(
            "c4_sync_on_vs_baseline",
            &[runs[c4].result.tps / b.max(1.0)],
            Goal::AtLeast,
            2.0,
        ));
    }

    let mut cells: Vec<Vec<String>> = vec![[
        "run",
        "tps",
        "first window tps",
        "last window tps",
        "last/first",
        "maxlat/s p50 ms (no ckpt)",
        "CPU us/txn",
        "checkpoints",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()];
    for (i, r) in runs.iter().enumerate() {
        let (first, last, ratio) = if i == on {
            (on_first, on_last, on_ratio)
        } else if i == off {
            (off_first, off_last, off_ratio)
        } else {
            (0.0, 0.0, 0.0)
        };
        let fmt = |v: f64, p: usize| {
            if v > 0.0 {
                format!("{v:.p$}")
            } else {
                "-".into()
            }
        };
        cells.push(vec![
            r.label.clone(),
            format!("{:.0}", r.result.tps),
            fmt(first, 0),
            fmt(last, 0),
            fmt(ratio, 3),
            format!("{:.1}", median(&maxlat_outside_checkpoints(&r.result))),
            format!("{:.0}", r.cpu_us_per_txn),
            r.result.checkpoints.len().to_string(),
        ]);
    }
    cells.push(vec![
        "SQLite NORMAL c4".into(),
        format!("{:.0}", sq.result.tps),
        "-".into(),
        "-".into(),
        "-".into(),
        format!(
            "{:.1}",
            median(
                &sq.result
                    .series
                    .iter()
                    .map(|s| s.lat_max_ms)
                    .collect::<Vec<_>>()
            )
        ),
        "-".into(),
        "-".into(),
    ]);
    cells.push(vec![
        "raw write + fdatasync, 1 thread".into(),
        format!("{raw_rate:.0}"),
        "-".into(),
        "-".into(),
        "-".into(),
        format!("{raw_maxlat:.1}"),
        "-".into(),
        "-".into(),
    ]);
    if let Some(b) = baseline_tps {
        cells.push(vec![
            format!(
                "baseline c4 no checkpoint ({})",
                o.baseline.as_ref().unwrap().display()
            ),
            format!("{b:.0}"),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ]);
    }
    let mut t1 = format!(
        "TPC-B, scale {}, pool 64 MB, checkpoint_timeout 30 s (runs without a checkpoint: 1 h), {} s long runs, {} s side runs, windows of {w} s, raw fdatasync {fsync_rate:.0}/s, device: local disk, buffered\n",
        o.scale, o.seconds, o.side_seconds
    );
    t1.push_str(&layout(&cells, 1));
    let mut tables = vec![t1];
    if !size_rows.is_empty() {
        tables.push(format!(
            "Table sizes after the long runs (MB)\n{}",
            layout(&size_rows, 1)
        ));
    }

    let run = RunInfo::new(&o.command);
    let mut metadata = run.metadata("tpcb", &o.command);
    metadata.insert(
        "runs".into(),
        runs.iter()
            .map(|r| {
                json!({"label": r.label, "tps": r.result.tps, "transactions": r.result.transactions,
                       "cpu_us_per_txn": r.cpu_us_per_txn, "checkpoints": r.result.checkpoints.len(),
                       "per_second_max_latency_p50_ms_outside_checkpoints": median(&maxlat_outside_checkpoints(&r.result))})
            })
            .collect::<Vec<_>>()
            .into(),
    );
    metadata.insert(
        "cpu_us_per_txn_sync_on".into(),
        runs[on].cpu_us_per_txn.into(),
    );
    metadata.insert(
        "cpu_us_per_txn_sync_off".into(),
        runs[off].cpu_us_per_txn.into(),
    );
    metadata.insert("sqlite_normal_tps".into(), sq.result.tps.into());
    metadata.insert("sqlite_version".into(), sq.version.clone().into());
    metadata.insert("raw_fdatasync_per_s".into(), fsync_rate.into());
    metadata.insert(
        "raw_fdatasync_per_second_max_p50_ms".into(),
        raw_maxlat.into(),
    );
    metadata.insert(
        "raw_fdatasync_per_second_max_ms".into(),
        raw_maxes.clone().into(),
    );
    metadata.insert("baseline_tps".into(), baseline_tps.into());
    metadata.insert("table_bytes".into(), sizes.into());
    metadata.insert("run_files".into(), out_dir.display().to_string().into());
    metadata.insert(
        "settings".into(),
        json!({"scale": o.scale, "seconds": o.seconds, "side_seconds": o.side_seconds,
               "window_s": w, "shared_buffers": "64MB", "checkpoint_timeout": "30s"}),
    );
    Ok(Report {
        header: format!(
            "{} | profile {} | {} cores | device local disk, buffered",
            run.command, run.profile, run.cores
        ),
        figures: Vec::new(),
        ratios,
        metadata,
        notes,
        tables,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::CheckpointSpan;

    fn result(tps: &[f64], maxlat: &[f64], ckpt: &[(f64, f64)]) -> RunResult {
        let mut r = RunResult::example("x", 1);
        r.series = tps
            .iter()
            .zip(maxlat)
            .enumerate()
            .map(|(i, (&t, &m))| {
                let mut s = r.series[0].clone();
                s.t = i as u32;
                s.tps = t;
                s.lat_max_ms = m;
                s
            })
            .collect();
        r.checkpoints = ckpt
            .iter()
            .map(|&(a, b)| CheckpointSpan {
                start_s: a,
                end_s: b,
                ..CheckpointSpan::default()
            })
            .collect();
        r
    }

    #[test]
    fn decay_compares_the_last_window_with_the_first_full_one() {
        // Second 1 (the start) is left out; windows of 3.
        let r = result(
            &[1.0, 100.0, 100.0, 90.0, 70.0, 60.0, 80.0, 80.0, 75.0],
            &[0.0; 9],
            &[],
        );
        let (first, last, ratio) = last_vs_first(&r, 3);
        assert_eq!((first, last), (100.0, 80.0));
        assert!((ratio - 0.8).abs() < 1e-9);
        // Too short for two windows: no verdict rather than a wrong one.
        assert_eq!(last_vs_first(&result(&[1.0; 4], &[0.0; 4], &[]), 3).2, 0.0);
        assert_eq!(window_s(300), 60);
        assert_eq!(window_s(30), 10);
    }

    #[test]
    fn seconds_a_checkpoint_overlaps_are_left_out_of_the_latency_figure() {
        // Seconds 0..5 cover [0,1), [1,2), ...; a checkpoint from 1.5 to 3.2 overlaps
        // seconds 1, 2 and 3.
        let r = result(&[1.0; 5], &[1.0, 50.0, 60.0, 70.0, 2.0], &[(1.5, 3.2)]);
        assert_eq!(maxlat_outside_checkpoints(&r), vec![1.0, 2.0]);
    }
}
