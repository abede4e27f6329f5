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

use super::device::remove_db;
use super::runner::{knobs, Common, Runner, Steps, Template};
use super::{layout, Goal, Ratio, Report};
use crate::cmd::bench::run::run_tpcb;
use crate::report::model::RunResult;
use crate::tpcb::options::BenchOptions;

/// `bufpool experiment tpcb` flags (`--quick`: scale 2, 30 s runs, 10 s windows and 10 s
/// side runs).
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Minutes of each of the two long runs (default 5; 0.5 with --quick).
    #[arg(long)]
    pub minutes: Option<f64>,
    /// Scale (default 10; 2 with --quick).
    #[arg(long)]
    pub scale: Option<u32>,
    /// An earlier bufpool binary whose c4 sync-on TPS the run is compared with.
    #[arg(long, value_name = "BIN")]
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

/// One TPC-B run in this process.
struct Run {
    label: String,
    result: RunResult,
    cpu_us_per_txn: f64,
}

/// Sizes of the four tables' main forks, bytes, by table name (empty if the directory
/// cannot be opened: the figure is informative, the runs' results stand without it).
fn table_sizes(dir: &Path) -> Vec<(String, u64)> {
    let vfs = bufpool::RealVfs::new();
    let Ok((config, _)) = crate::knobs::load_config(dir, &[]) else {
        return Vec::new();
    };
    let Ok(engine) = bufpool::Engine::open_vfs(Arc::new(vfs), dir, &config, false) else {
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

/// The flags resolved: what this run of the experiment does.
#[derive(Debug, Clone)]
struct Settings {
    /// Length of the two long runs.
    seconds: u64,
    /// Length of the side runs (c1/c4 latency, SQLite, baseline).
    side_seconds: u64,
    scale: u32,
    /// An earlier bufpool binary to measure c4 sync-on TPS against.
    baseline: Option<PathBuf>,
}

impl Settings {
    fn new(a: &Args, c: &Common) -> Result<Settings> {
        let quick = c.short();
        let minutes = a.minutes.unwrap_or(if quick { 0.5 } else { 5.0 });
        anyhow::ensure!(
            minutes > 0.0 && minutes <= 1440.0,
            "--minutes must be within (0, 1440], got {minutes}"
        );
        Ok(Settings {
            seconds: ((minutes * 60.0).round() as u64).max(3),
            side_seconds: if quick { 10 } else { 60 },
            scale: a.scale.unwrap_or(if quick { 2 } else { 10 }),
            baseline: a.baseline.clone(),
        })
    }
}

/// The knobs of every run (the settings).
const BASE: &[(&str, &str)] = &[
    ("shared_buffers", "64MB"),
    ("checkpoint_timeout", "30s"),
    ("log_checkpoints", "off"),
];

/// The knobs of runs 3 (and the baseline's) on top of [`BASE`]: no checkpoint due.
const QUIET: &[(&str, &str)] = &[
    ("synchronous_commit", "on"),
    ("checkpoint_timeout", "1h"),
    ("max_wal_size", "64GB"),
];

/// Knob settings, name and value.
type Knobs = &'static [(&'static str, &'static str)];

/// The runs in this process, in order: runs 1, 2 and 3 of the module doc (label,
/// clients, knobs over [`BASE`]).
const RUNS: [(&str, u32, Knobs); 4] = [
    ("c4 sync on", 4, &[("synchronous_commit", "on")]),
    ("c4 sync off", 4, &[("synchronous_commit", "off")]),
    ("c1 no checkpoint", 1, QUIET),
    ("c4 no checkpoint", 4, QUIET),
];
/// The first `LONG` of [`RUNS`] last `--minutes`, the others a side run's length.
const LONG: usize = 2;
/// Seconds of the raw fdatasync loop that gives the commit limit.
const FSYNC_RATE_S: u64 = 2;
/// Indexes into [`RUNS`].
const ON: usize = 0;
const OFF: usize = 1;
const C1: usize = 2;
const C4: usize = 3;

/// A TPC-B run with the experiment's `-j` (2 from 2 clients).
pub(crate) fn bench_options(
    clients: u32,
    seconds: u64,
    label: &str,
    stop: Arc<AtomicBool>,
) -> BenchOptions {
    let mut opts = BenchOptions::tpcb(clients, seconds, label, stop);
    opts.driver.threads = if clients >= 2 { 2 } else { 1 };
    opts
}

/// Sizes of the four tables' main forks, bytes, by table name.
type TableSizes = Vec<(String, u64)>;

/// Everything measured, for the targets and the report.
struct Measured {
    runs: Vec<Run>,
    /// Table sizes after the long runs: (label, [(table, bytes)]).
    sizes: Vec<(String, TableSizes)>,
    /// The raw fdatasync loop right after run 3: its rate and per-second maxima.
    raw_rate: f64,
    raw_maxes: Vec<f64>,
    sqlite: crate::compare::sqlite::SqliteRun,
    /// Raw fdatasync per second (2 s), the commit limit's basis.
    fsync_rate: f64,
    baseline_tps: Option<f64>,
}

/// Runs the experiment: runs 1 to 6 of the module doc.
pub fn run(a: &Args, r: &mut Runner) -> Result<Report> {
    let o = Settings::new(a, &r.common)?;
    let out_dir = r.out_dir()?;
    let template = r.template(o.scale, false, &knobs(BASE))?;
    let (mut runs, mut sizes) = (Vec::new(), Vec::new());
    r.plan(steps(&o));
    for (label, clients, extra) in RUNS {
        let seconds = if runs.len() < LONG {
            o.seconds
        } else {
            o.side_seconds
        };
        let (run, size) = measure(r, &template, &out_dir, (label, clients, seconds), extra)?;
        runs.push(run);
        sizes.extend(size.map(|s| (label.to_string(), s)));
    }
    let (raw_rate, raw_maxes) = raw_floor(r, o.side_seconds)?;
    let sqlite = sqlite_normal(r, &o)?;
    r.step(format!("raw fdatasync rate, {FSYNC_RATE_S} s"));
    let fsync_rate =
        super::fdatasync::raw_fdatasync_per_s(r.data_root()?, Duration::from_secs(FSYNC_RATE_S))?;
    let baseline_tps = match &o.baseline {
        Some(bin) => Some(baseline(r, &o, bin)?),
        None => {
            r.notes.push(
                "no --baseline binary: c4_sync_on_vs_baseline (the issue's 2x target) not measured"
                    .into(),
            );
            None
        }
    };
    remove_db(&template.dir);
    let m = Measured {
        runs,
        sizes,
        raw_rate,
        raw_maxes,
        sqlite,
        fsync_rate,
        baseline_tps,
    };
    r.notes.push(format!(
        "the device's own floor under maxlat_p50_ms_c1/_c4: one thread's write + fdatasync \
         loop, right after those runs, had a per-second maximum latency p50 of \
         {:.1} ms ({raw_rate:.0} syncs/s)",
        median(&m.raw_maxes)
    ));
    Ok(report(r, &o, &m, &out_dir))
}

/// The steps of a run, each of known length: [`RUNS`], the raw fdatasync loop, SQLite,
/// the commit limit's loop, and the baseline binary's run if there is one.
fn steps(o: &Settings) -> Steps {
    let side = o.side_seconds as f64;
    Steps::new()
        .timed(LONG, o.seconds as f64)
        .timed(RUNS.len() - LONG, side)
        .timed(2, side)
        .timed(1, FSYNC_RATE_S as f64)
        .timed(usize::from(o.baseline.is_some()), side)
}

/// One TPC-B run (`label`, clients, seconds) on a fresh copy, knobs `extra` over
/// [`BASE`]; its `RunResult` saved to the run files. With it, the table sizes after a
/// long c4 run.
fn measure(
    r: &Runner,
    template: &Template,
    out_dir: &Path,
    (label, clients, seconds): (&str, u32, u64),
    extra: &[(&str, &str)],
) -> Result<(Run, Option<TableSizes>)> {
    let dir = r.fresh_copy(template, "run")?;
    let mut sets = knobs(BASE);
    sets.extend(knobs(extra));
    r.step(format!("{label}: {clients} clients, {seconds} s"));
    let cpu0 = process_cpu_s();
    let opts = bench_options(clients, seconds, label, r.stop());
    let out = run_tpcb(&dir, &sets, opts).with_context(|| label.to_string())?;
    let cpu = process_cpu_s() - cpu0;
    let result = out.result;
    let cpu_us = if result.transactions > 0 {
        cpu * 1e6 / result.transactions as f64
    } else {
        0.0
    };
    r.progress(format!(
        "{label}: {:.0} tps, {cpu_us:.0} us CPU per transaction",
        result.tps
    ));
    let path = out_dir.join(format!("{}.json", label.replace(' ', "-")));
    std::fs::write(&path, serde_json::to_string_pretty(&result)?)
        .with_context(|| format!("writing {}", path.display()))?;
    let size = (seconds >= 20 && label.starts_with("c4 sync")).then(|| table_sizes(&dir));
    remove_db(&dir);
    let run = Run {
        label: label.to_string(),
        result,
        cpu_us_per_txn: cpu_us,
    };
    Ok((run, size))
}

/// The device's floor under run 3's latency figures, measured right after them: one
/// thread writing 8 KiB and calling fdatasync in a loop, its per-second maximum latency.
fn raw_floor(r: &Runner, seconds: u64) -> Result<(f64, Vec<f64>)> {
    r.step(format!(
        "raw fdatasync loop, {seconds} s (per-second maximum latency)"
    ));
    let (rate, maxes) = super::fdatasync::raw_fdatasync_per_second_max(
        r.data_root()?,
        Duration::from_secs(seconds),
    )?;
    r.progress(format!(
        "raw fdatasync: {rate:.0}/s, per-second max latency p50 {:.1} ms",
        median(&maxes)
    ));
    Ok((rate, maxes))
}

/// Run 4: SQLite, WAL mode, synchronous NORMAL, same cache, c4.
fn sqlite_normal(r: &Runner, o: &Settings) -> Result<crate::compare::sqlite::SqliteRun> {
    let dir = r.data_root()?.join("sqlite");
    std::fs::create_dir_all(&dir)?;
    r.step(format!("loading SQLite at scale {}", o.scale));
    crate::compare::sqlite::load(&dir, o.scale)?;
    r.progress(format!("SQLite NORMAL: 4 clients, {} s", o.side_seconds));
    let options = crate::compare::sqlite::SqliteOptions {
        dir: dir.clone(),
        clients: 4,
        jobs: 2,
        duration: Duration::from_secs(o.side_seconds),
        sync: false,
        cache_bytes: 64 << 20,
        seed: 0x5eed,
        log_prefix: None,
        progress_s: None,
        rate: None,
    };
    let sq = crate::compare::sqlite::run(&options, &r.stop())?;
    let _ = std::fs::remove_dir_all(&dir);
    r.progress(format!("SQLite NORMAL: {:.0} tps", sq.result.tps));
    Ok(sq)
}

/// Runs `bin` (quietly), failing with its status unless it succeeds.
fn run_quietly(bin: &Path, cmd: &mut std::process::Command, what: &str) -> Result<()> {
    let status = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .with_context(|| format!("running {}", bin.display()))?;
    anyhow::ensure!(
        status.success(),
        "{} {what} failed: {status}",
        bin.display()
    );
    Ok(())
}

/// Run 6: the baseline binary's TPS, on a database of its own load (same scale: an
/// older binary may refuse a bufpool.conf that names knobs it does not have), c4 sync
/// on, no checkpoint due, as run `c4`.
fn baseline(r: &Runner, o: &Settings, bin: &Path) -> Result<f64> {
    let dir = r.data_root()?.join("baseline");
    remove_db(&dir);
    r.step(format!(
        "baseline {}: loading scale {}",
        bin.display(),
        o.scale
    ));
    let mut init = std::process::Command::new(bin);
    init.arg("init").arg("-D").arg(&dir);
    run_quietly(bin, init.args(["-s", &o.scale.to_string()]), "init")?;
    let out = r.data_root()?.join("baseline.json");
    r.progress(format!(
        "baseline {}: 4 clients, {} s",
        bin.display(),
        o.side_seconds
    ));
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("bench")
        .arg("-D")
        .arg(&dir)
        .args(["-c", "4", "-j", "2", "-T"]);
    cmd.arg(o.side_seconds.to_string()).arg("--out").arg(&out);
    for (k, v) in BASE.iter().chain(QUIET) {
        cmd.arg("--set").arg(format!("{k}={v}"));
    }
    run_quietly(bin, &mut cmd, "bench")?;
    let b: RunResult = serde_json::from_slice(&std::fs::read(&out)?)
        .with_context(|| format!("reading {}", out.display()))?;
    r.progress(format!("baseline: {:.0} tps", b.tps));
    remove_db(&dir);
    Ok(b.tps)
}

/// The targets of issue 14 from what was measured (window `w` seconds).
fn targets(m: &Measured, w: u64) -> Vec<Ratio> {
    let result = |i: usize| &m.runs[i].result;
    let ml = |i: usize| median(&maxlat_outside_checkpoints(result(i)));
    let mut ratios = vec![
        Ratio::new(
            "last_vs_first_minute_sync_on",
            &[last_vs_first(result(ON), w).2],
            Goal::AtLeast,
            0.9,
        ),
        Ratio::new(
            "last_vs_first_minute_sync_off",
            &[last_vs_first(result(OFF), w).2],
            Goal::AtLeast,
            0.9,
        ),
        Ratio::new("maxlat_p50_ms_c1", &[ml(C1)], Goal::AtMost, 5.0),
        Ratio::new("maxlat_p50_ms_c4", &[ml(C4)], Goal::AtMost, 5.0),
        Ratio::new(
            "sync_off_vs_sqlite_normal",
            &[result(OFF).tps / m.sqlite.result.tps.max(1.0)],
            Goal::AtLeast,
            1.0,
        ),
        Ratio::new(
            "tpcb_vs_limit",
            &[result(ON).tps / (4.0 * m.fsync_rate).max(1.0)],
            Goal::AtLeast,
            0.0,
        ),
    ];
    if let Some(b) = m.baseline_tps {
        ratios.push(Ratio::new(
            "c4_sync_on_vs_baseline",
            &[result(C4).tps / b.max(1.0)],
            Goal::AtLeast,
            2.0,
        ));
    }
    ratios
}

/// A table row of text cells: `first`, then `rest`, each "-" if None.
fn cells(first: String, rest: [Option<String>; 7]) -> Vec<String> {
    std::iter::once(first)
        .chain(rest.into_iter().map(|c| c.unwrap_or_else(|| "-".into())))
        .collect()
}

/// Table 1: every run, SQLite, the raw loop and the baseline.
fn runs_table(o: &Settings, m: &Measured, w: u64) -> String {
    let mut rows: Vec<Vec<String>> = vec![[
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
    for (i, r) in m.runs.iter().enumerate() {
        let (first, last, ratio) = match i {
            ON | OFF => last_vs_first(&r.result, w),
            _ => (0.0, 0.0, 0.0),
        };
        let fmt = |v: f64, p: usize| (v > 0.0).then(|| format!("{v:.p$}"));
        rows.push(cells(
            r.label.clone(),
            [
                Some(format!("{:.0}", r.result.tps)),
                fmt(first, 0),
                fmt(last, 0),
                fmt(ratio, 3),
                Some(format!(
                    "{:.1}",
                    median(&maxlat_outside_checkpoints(&r.result))
                )),
                Some(format!("{:.0}", r.cpu_us_per_txn)),
                Some(r.result.checkpoints.len().to_string()),
            ],
        ));
    }
    let sq = &m.sqlite.result;
    let sq_maxlat = median(&sq.series.iter().map(|s| s.lat_max_ms).collect::<Vec<_>>());
    let only = |tps: f64, maxlat: Option<f64>| {
        [
            Some(format!("{tps:.0}")),
            None,
            None,
            None,
            maxlat.map(|v| format!("{v:.1}")),
            None,
            None,
        ]
    };
    rows.push(cells(
        "SQLite NORMAL c4".into(),
        only(sq.tps, Some(sq_maxlat)),
    ));
    let raw = median(&m.raw_maxes);
    rows.push(cells(
        "raw write + fdatasync, 1 thread".into(),
        only(m.raw_rate, Some(raw)),
    ));
    if let (Some(b), Some(bin)) = (m.baseline_tps, &o.baseline) {
        let label = format!("baseline c4 no checkpoint ({})", bin.display());
        rows.push(cells(label, only(b, None)));
    }
    format!(
        "TPC-B, scale {}, pool 64 MB, checkpoint_timeout 30 s (runs without a checkpoint: 1 h), {} s long runs, {} s side runs, windows of {w} s, raw fdatasync {:.0}/s, device: local disk, buffered\n{}",
        o.scale, o.seconds, o.side_seconds, m.fsync_rate, layout(&rows, 1)
    )
}

/// The table of table sizes after the long runs (None if none were taken).
fn sizes_table(m: &Measured) -> Option<String> {
    let (_, first) = m.sizes.first()?;
    let mut rows = vec![std::iter::once("table MB after".to_string())
        .chain(first.iter().map(|(n, _)| n.clone()))
        .collect::<Vec<_>>()];
    for (label, s) in &m.sizes {
        let mb = s
            .iter()
            .map(|(_, b)| format!("{:.1}", *b as f64 / 1048576.0));
        rows.push(std::iter::once(label.clone()).chain(mb).collect());
    }
    Some(format!(
        "Table sizes after the long runs (MB)\n{}",
        layout(&rows, 1)
    ))
}

/// The report: the tables, the targets, the metadata.
fn report(r: &Runner, o: &Settings, m: &Measured, out_dir: &Path) -> Report {
    let w = window_s(o.seconds);
    let mut metadata = r.metadata();
    let runs = m.runs.iter().map(|r| {
        json!({"label": r.label, "tps": r.result.tps, "transactions": r.result.transactions,
               "cpu_us_per_txn": r.cpu_us_per_txn, "checkpoints": r.result.checkpoints.len(),
               "per_second_max_latency_p50_ms_outside_checkpoints": median(&maxlat_outside_checkpoints(&r.result))})
    });
    metadata.insert("runs".into(), runs.collect::<Vec<_>>().into());
    metadata.insert(
        "cpu_us_per_txn_sync_on".into(),
        m.runs[ON].cpu_us_per_txn.into(),
    );
    metadata.insert(
        "cpu_us_per_txn_sync_off".into(),
        m.runs[OFF].cpu_us_per_txn.into(),
    );
    metadata.insert("sqlite_normal_tps".into(), m.sqlite.result.tps.into());
    metadata.insert("sqlite_version".into(), m.sqlite.version.clone().into());
    metadata.insert("raw_fdatasync_per_s".into(), m.fsync_rate.into());
    let raw_p50 = median(&m.raw_maxes);
    metadata.insert("raw_fdatasync_per_second_max_p50_ms".into(), raw_p50.into());
    metadata.insert(
        "raw_fdatasync_per_second_max_ms".into(),
        m.raw_maxes.clone().into(),
    );
    metadata.insert("baseline_tps".into(), m.baseline_tps.into());
    let sizes: serde_json::Map<String, serde_json::Value> = m
        .sizes
        .iter()
        .flat_map(|(label, s)| {
            s.iter()
                .map(move |(n, b)| (format!("{label}: {n}"), (*b).into()))
        })
        .collect();
    metadata.insert("table_bytes".into(), sizes.into());
    metadata.insert("run_files".into(), out_dir.display().to_string().into());
    metadata.insert(
        "settings".into(),
        json!({"scale": o.scale, "seconds": o.seconds, "side_seconds": o.side_seconds,
               "window_s": w, "shared_buffers": "64MB", "checkpoint_timeout": "30s"}),
    );
    Report {
        header: r.header("device local disk, buffered"),
        figures: Vec::new(),
        ratios: targets(m, w),
        metadata,
        notes: Vec::new(),
        tables: std::iter::once(runs_table(o, m, w))
            .chain(sizes_table(m))
            .collect(),
    }
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

    /// The targets read the right runs: decay of runs 1 and 2, latency of run 3's two,
    /// TPS against SQLite, the limit and the baseline (only when there is one).
    #[test]
    fn targets_take_each_figure_from_its_run() {
        let decay = [1.0, 100.0, 100.0, 100.0, 90.0, 90.0, 90.0];
        let run = |label: &str, tps: f64, maxlat: f64| {
            let mut result = result(&decay, &[maxlat; 7], &[]);
            result.tps = tps;
            Run {
                label: label.into(),
                result,
                cpu_us_per_txn: 1.0,
            }
        };
        let mut sqlite = RunResult::example("sqlite", 1);
        sqlite.tps = 50.0;
        let mut m = Measured {
            runs: vec![
                run("on", 400.0, 9.0),
                run("off", 100.0, 9.0),
                run("c1", 10.0, 2.0),
                run("c4", 300.0, 6.0),
            ],
            sizes: Vec::new(),
            raw_rate: 100.0,
            raw_maxes: vec![1.0],
            sqlite: crate::compare::sqlite::SqliteRun {
                result: sqlite,
                version: "3".into(),
                busy_waits: 0,
                busy_wait_s: 0.0,
            },
            fsync_rate: 200.0,
            baseline_tps: None,
        };
        let t = targets(&m, 3);
        let got: Vec<(&str, f64)> = t.iter().map(|r| (r.name, r.median)).collect();
        assert_eq!(
            got,
            [
                ("last_vs_first_minute_sync_on", 0.9),
                ("last_vs_first_minute_sync_off", 0.9),
                ("maxlat_p50_ms_c1", 2.0),
                ("maxlat_p50_ms_c4", 6.0),
                ("sync_off_vs_sqlite_normal", 2.0),
                ("tpcb_vs_limit", 0.5),
            ]
        );
        assert!(!t[3].pass && t[2].pass);
        m.baseline_tps = Some(100.0);
        let t = targets(&m, 3);
        assert_eq!((t[6].name, t[6].median), ("c4_sync_on_vs_baseline", 3.0));
    }

    #[test]
    fn seconds_a_checkpoint_overlaps_are_left_out_of_the_latency_figure() {
        // Seconds 0..5 cover [0,1), [1,2), ...; a checkpoint from 1.5 to 3.2 overlaps
        // seconds 1, 2 and 3.
        let r = result(&[1.0; 5], &[1.0, 50.0, 60.0, 70.0, 2.0], &[(1.5, 3.2)]);
        assert_eq!(maxlat_outside_checkpoints(&r), vec![1.0, 2.0]);
    }
}
