//! `bufpool experiment outgrow`: YCSB C and TPC-C as their data outgrows the pool, and the
//! memory the process holds meanwhile.
//!
//! For each size of YCSB's usertable (by default 0.5, 0.9, 1.25, 2, 5 and 10 times the
//! pool; `--quick`: 0.5, 0.9, 1.25 and 2) a fresh table is loaded (`init --workload
//! ycsb`, about 1,190 bytes of table and key per record) and YCSB C runs on it for
//! `--seconds` with 2 clients on 2 threads, the pool `--pool` (64 MB) with O_DIRECT
//! (`io_direct = on`, so a miss is a device read, not a page-cache copy). Per size: the
//! transactions per second, the pool's reads per second (misses), the hit ratio, and the
//! bench's resident memory against its budget (`shared_buffers` + `wal_buffers` + the
//! pool's bookkeeping + a fixed allowance: `tpcb::driver::counters::memory_use`).
//!
//! TPC-C (`--tpcc-pool`, default 64 MB and 256 MB, `--quick` 256 MB; `synchronous_commit =
//! off`, so its runs measure reads, not the log's syncs) runs the same way at about the
//! same multiples: one warehouse loads about 119 MB of tables and keys, so a size is the
//! nearest whole number of warehouses (at least one, each number once per pool) and its row
//! says the multiple it made (at 64 MB: about 1.9x, 5.6x and 9.3x); its transactions grow
//! the data while they run. Its 1.25x over 0.9x is a figure (`tpcc_cliff`, at the pools
//! with a size on each side of the pool), not a target: the sizes are whole warehouses.
//! `--no-tpcc` and `--no-ycsb` leave a workload out.
//!
//! Beside the largest size, the raw device: `fio` (Debian's, through
//! `scripts/fio-randread.sh`, which installs it when missing and we are root) reads random
//! 8 KiB blocks of that size's table file with O_DIRECT, one synchronous reader per client
//! (the bench's clients have one read in flight each), for as long as the run, right after
//! each run. The sizes a target reads (0.9x, 1.25x, the largest) run `--repeats` times
//! (once with `--quick`), the others once; the median run stands for the size (at the
//! largest, by its reads over the IOPS of the fio run after it: a shared host's device
//! moved by half within minutes, 2026-12-08), every run's figures in the JSON (`runs_tps`,
//! `runs_reads_over_fio`).
//!
//! Targets: `outgrow_no_cliff` (tps at 1.25x the pool over tps at 0.9x) ≥ 0.5;
//! `rss_over_budget` (the worst, over the sizes, of the peak resident memory sampled each
//! second over the budget) ≤ 1.05; `outgrow_10x_vs_fio_iops` (YCSB C's pool reads per
//! second at 10x the pool over fio's IOPS on its table) ≥ 0.8, when 10x ran and fio could.
//! `rss_over_budget` covers every size of both workloads.
//!
//! `--pool` takes a list (default 64 MB and 256 MB; `--quick` 64 MB): YCSB C's sizes run at
//! each pool, fio beside each pool's largest size; a target over several pools takes the
//! worst. `--peers sqlite,postgres` runs the other engines at every size through `bufpool
//! compare` (the same workload, records or warehouses, pool, clients and seconds; SQLite's
//! cache and PostgreSQL's shared_buffers at the pool, both reading through the OS page
//! cache, which this machine's memory lets hold every size: their figures show what
//! leaving the pool costs when a miss is a copy from memory, not a device read), and
//! bufpool beside them the same way (`bufpool-buffered`: compare's bufpool, `io_direct`
//! off), so each engine's cliff is seen both ways. `--report DIR` draws tps against
//! data/pool, a line per engine, one chart per workload and pool.

use anyhow::{Context, Result};
use serde_json::json;

use super::device::remove_db;
use super::runner::{knobs, Runner, Steps};
use super::{layout, progress, Goal, Report, Samples};

/// `bufpool experiment outgrow` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// YCSB C's pools (shared_buffers), each running every size (default 64MB,256MB;
    /// --quick 64MB).
    #[arg(long = "pool", value_delimiter = ',', value_name = "SIZE,...")]
    pub pools: Vec<String>,
    /// Seconds of each run (default 10; 3 with --quick).
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Data sizes as multiples of the pool (default 0.5,0.9,1.25,2,5,10; --quick
    /// 0.5,0.9,1.25,2).
    #[arg(long, value_delimiter = ',')]
    pub ratios: Vec<f64>,
    /// TPC-C's pools (shared_buffers), each running every size (default 64MB,256MB;
    /// --quick 256MB): a warehouse is about 119 MB, so at 64 MB the smallest size is about
    /// 1.9x.
    #[arg(long = "tpcc-pool", value_delimiter = ',', value_name = "SIZE,...")]
    pub tpcc_pools: Vec<String>,
    /// Leave TPC-C out (YCSB C only).
    #[arg(long, conflicts_with = "no_ycsb")]
    pub no_tpcc: bool,
    /// Leave YCSB C out (TPC-C only; its targets need YCSB C, so only `rss_over_budget`
    /// is reported).
    #[arg(long)]
    pub no_ycsb: bool,
    /// Other engines at every size, through `bufpool compare`: sqlite, postgres (and bufpool
    /// reading through the page cache as they do, `bufpool-buffered`).
    #[arg(long, value_delimiter = ',', value_name = "ENGINE,...", value_enum)]
    pub peers: Vec<Peer>,
    /// PostgreSQL's major versions with --peers postgres (default: compare's, the installed
    /// one and 18).
    #[arg(long, value_delimiter = ',', value_name = "MAJOR,...")]
    pub postgres_version: Vec<String>,
    /// Writes DIR/index.html with the charts: tps against data/pool, a line per engine.
    #[arg(long, value_name = "DIR")]
    pub report: Option<std::path::PathBuf>,
}

/// An engine `--peers` names, run through `bufpool compare` (whose `--engines` takes the
/// same names; bufpool runs every size anyway).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Peer {
    Sqlite,
    #[value(alias = "postgresql", alias = "pg")]
    Postgres,
}

impl Peer {
    /// Its name among compare's `--engines`.
    fn name(self) -> &'static str {
        match self {
            Peer::Sqlite => "sqlite",
            Peer::Postgres => "postgres",
        }
    }
}

const CLIENTS: u32 = 2;
/// Bytes of table and key per record: seven 1,060-byte rows per 8 KiB page, and a
/// 16-byte index entry on pages filled to 90%.
const BYTES_PER_RECORD: f64 = 8192.0 / 7.0 + 16.0 / 0.9;
/// Bytes of TPC-C's tables and keys per warehouse as `init --workload tpcc` loads them
/// (14,561 pages of 8 KiB for one warehouse, 2026-12-07).
const BYTES_PER_WAREHOUSE: f64 = 14_561.0 * 8192.0;

/// The workload a size ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Work {
    #[default]
    YcsbC,
    Tpcc,
}

impl Work {
    fn name(self) -> &'static str {
        match self {
            Work::YcsbC => "ycsb-c",
            Work::Tpcc => "tpcc",
        }
    }
}

/// One size's run.
#[derive(Debug, Clone, Default)]
struct Size {
    work: Work,
    /// The pool, as given.
    pool: String,
    ratio: f64,
    /// YCSB's records, or TPC-C's warehouses.
    records: u64,
    tps: f64,
    reads_per_s: f64,
    hit_ratio: f64,
    peak_rss: u64,
    budget: u64,
    over_budget: f64,
    /// fio's random-read IOPS on this size's table (the largest size only), or why not.
    fio: Option<Result<f64, String>>,
    /// Every run of the size ([`median_run`]): its tps, and its reads per second over the
    /// IOPS of the fio run right after it (where fio ran).
    runs: Vec<(f64, Option<f64>)>,
    /// The other engines' tps at this size (`--peers`), by column name.
    peers: Vec<EngineTps>,
}

/// Runs the experiment (see the module doc).
pub fn run(a: &Args, r: &mut Runner) -> Result<Report> {
    let short = r.common.short();
    let seconds = a.seconds.unwrap_or(if short { 3 } else { 10 });
    anyhow::ensure!(
        (1..=3600).contains(&seconds),
        "--seconds must be within 1..=3600, got {seconds}"
    );
    let (ratios, pools, tpcc_pools) = ratios_and_pools(a, short)?;
    r.set_io("O_DIRECT (io_direct = on)");
    // A run per size of each workload (at most: TPC-C's sizes are whole warehouses, each
    // once), fio beside each pool's largest YCSB size, and the peers' runs (a compare each,
    // its loads untimed).
    let largest = ratios.iter().copied().fold(0.0, f64::max);
    // The sizes a target reads (0.9x, 1.25x, the largest with fio after each run) run
    // `--repeats` times; the others once.
    let reps = r.common.repeats_unless_quick();
    let targeted = |x: f64| x == 0.9 || x == 1.25 || x == largest;
    let ycsb_runs: usize = ratios
        .iter()
        .map(|&x| if targeted(x) { reps } else { 1 })
        .sum();
    let sized = ratios.len() * (pools.len() + tpcc_pools.len());
    let peer_runs = if a.peers.is_empty() { 0 } else { sized };
    r.plan(
        Steps::new()
            .timed(
                (ycsb_runs + reps) * pools.len() + ratios.len() * tpcc_pools.len(),
                seconds as f64,
            )
            .untimed(peer_runs),
    );
    let mut sizes = Vec::new();
    let mut skipped = Vec::new();
    for pool in &pools {
        let mut check = bufpool::Config::default();
        check
            .set("shared_buffers", pool)
            .map_err(crate::knobs::knob_error)?;
        let pool_bytes = (check.nbuffers() * check.block_size) as f64;
        let base = [
            ("shared_buffers", pool.as_str()),
            ("io_direct", "on"),
            ("checkpoint_timeout", "1h"),
            ("log_checkpoints", "off"),
        ];
        for &ratio in &ratios {
            let records = ((ratio * pool_bytes / BYTES_PER_RECORD) as u64).max(100);
            let runs = (ratio == largest, if targeted(ratio) { reps } else { 1 });
            let mut z = measure(r, (pool, ratio, records), &base, seconds, runs)?;
            z.peers = peers(r, a, (Work::YcsbC, records, pool), seconds, &mut skipped)?;
            sizes.push(z);
        }
    }
    for pool in &tpcc_pools {
        sizes.extend(run_tpcc(r, a, (pool, &ratios), seconds, &mut skipped)?);
    }
    if let Some(dir) = &a.report {
        write_charts(dir, &sizes, &r.header("experiment outgrow"))?;
    }
    let mut samples = Samples::default();
    push_targets(&mut samples, &sizes);
    let pools = (pools.join(","), tpcc_pools.join(","));
    let mut rep = report(r, &samples, &sizes, (&pools, seconds));
    rep.notes.extend(skipped);
    Ok(rep)
}

/// The sizes (data over pool), YCSB C's pools and TPC-C's to run: `--ratios`, `--pool` and
/// `--tpcc-pool`, or the defaults (fewer of each with `--quick`); no pools for a workload
/// left out.
fn ratios_and_pools(a: &Args, short: bool) -> Result<(Vec<f64>, Vec<String>, Vec<String>)> {
    let ratios = if a.ratios.is_empty() {
        if short {
            vec![0.5, 0.9, 1.25, 2.0]
        } else {
            vec![0.5, 0.9, 1.25, 2.0, 5.0, 10.0]
        }
    } else {
        a.ratios.clone()
    };
    anyhow::ensure!(
        ratios
            .iter()
            .all(|&x| x.is_finite() && (0.01..=100.0).contains(&x)),
        "--ratios: each within 0.01..=100, got {ratios:?}"
    );
    let pick = |given: &[String], quick: &str, left_out: bool| -> Vec<String> {
        if left_out {
            Vec::new()
        } else if !given.is_empty() {
            given.to_vec()
        } else if short {
            vec![quick.to_string()]
        } else {
            vec!["64MB".to_string(), "256MB".to_string()]
        }
    };
    let pools = pick(&a.pools, "64MB", a.no_ycsb);
    let tpcc_pools = pick(&a.tpcc_pools, "256MB", a.no_tpcc);
    Ok((ratios, pools, tpcc_pools))
}

/// The `--peers` at one size: `bufpool compare` of `work` on `size` records (YCSB) or
/// warehouses (TPC-C) with `pool`, in a child process, each engine's tps by its column
/// name; an engine compare skips (PostgreSQL missing here) goes to `skipped`, once.
fn peers(
    r: &Runner,
    a: &Args,
    (work, size, pool): (Work, u64, &str),
    seconds: u64,
    skipped: &mut Vec<String>,
) -> Result<Vec<EngineTps>> {
    if a.peers.is_empty() {
        return Ok(Vec::new());
    }
    let engines = engine_names(a);
    r.step(format!(
        "{} at {size} {}, pool {pool}: {} through compare, {seconds} s each",
        work.name(),
        if work == Work::Tpcc {
            "warehouses"
        } else {
            "records"
        },
        engines.join(", ")
    ));
    let scratch = r.data_root()?.join("outgrow-compare");
    let logs = r.scratch().join("outgrow-compare");
    let mut cmd = compare_command(a, &engines, (work, size, pool), seconds, (&scratch, &logs))?;
    cmd.stdin(std::process::Stdio::null());
    cmd.stderr(std::process::Stdio::piped());
    let out = cmd.output().context("running bufpool compare")?;
    let _ = std::fs::remove_dir_all(&scratch);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().rev().find(|l| !l.trim().is_empty());
        anyhow::bail!(
            "bufpool compare exited with {}: {}",
            out.status,
            last.unwrap_or("")
        );
    }
    let (tps, skips) = compare_tps(&String::from_utf8_lossy(&out.stdout))?;
    for (name, why) in skips {
        let line = format!("{name} not run: {why}");
        if !skipped.contains(&line) {
            r.progress(&line);
            skipped.push(line);
        }
    }
    for (name, t) in &tps {
        r.progress(format!(
            "{} at {size}, pool {pool}: {name} {t:.0} tps",
            work.name()
        ));
    }
    Ok(tps)
}

/// bufpool and each engine of `--peers`, as compare's `--engines` names them.
fn engine_names(a: &Args) -> Vec<&'static str> {
    std::iter::once("bufpool")
        .chain(a.peers.iter().map(|e| e.name()))
        .collect()
}

/// The child `bufpool compare` of [`peers`]: `engines` ([`engine_names`]), with the
/// experiment's pool, clients and seconds, its databases in `scratch`, its logs in `logs`.
fn compare_command(
    a: &Args,
    engines: &[&str],
    (work, size, pool): (Work, u64, &str),
    seconds: u64,
    (scratch, logs): (&std::path::Path, &std::path::Path),
) -> Result<std::process::Command> {
    let exe = std::env::current_exe().context("finding this program to run compare")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["compare", "--workload", work.name()]);
    match work {
        Work::YcsbC => cmd.args(["--records", &size.to_string()]),
        Work::Tpcc => cmd.args(["--warehouses", &size.to_string()]),
    };
    let n = CLIENTS.to_string();
    cmd.args(["--engines", &engines.join(",")])
        .args(["--pool", pool, "-c", &n, "-j", &n])
        .args(["-T", &seconds.to_string(), "-P", &seconds.to_string()])
        .args(["--sync", "off", "--checkpoint-timeout", "1h", "--json"])
        .arg("--dir")
        .arg(scratch)
        .arg("-o")
        .arg(logs);
    if !a.postgres_version.is_empty() {
        cmd.args(["--postgres-version", &a.postgres_version.join(",")]);
    }
    Ok(cmd)
}

/// bufpool's column through compare: reading through the OS page cache, as the peers do.
const BUFFERED: &str = "bufpool-buffered";

/// An engine compare did not run: its column name and why.
type Skipped = (String, String);
/// An engine's column name and tps.
type EngineTps = (String, f64);

/// Each engine's tps (by column name; compare's bufpool, buffered, as `bufpool-buffered`)
/// and each skipped engine's reason from `compare --json`.
fn compare_tps(json: &str) -> Result<(Vec<EngineTps>, Vec<Skipped>)> {
    let j: serde_json::Value = serde_json::from_str(json).context("compare's --json")?;
    let engines = j["engines"]
        .as_array()
        .context("compare's JSON has no engines")?;
    let tps = engines
        .iter()
        .map(|e| {
            let name = e["name"].as_str().context("an engine without a name")?;
            let tps = e["tps"].as_f64().context("an engine without tps")?;
            let name = if name == "bufpool" { BUFFERED } else { name };
            Ok((name.to_string(), tps))
        })
        .collect::<Result<Vec<_>>>()?;
    let skipped = j["skipped"]
        .as_array()
        .map(|v| {
            v.iter()
                .map(|s| {
                    let f = |k: &str| s[k].as_str().unwrap_or("?").to_string();
                    (f("name"), f("reason"))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok((tps, skipped))
}

/// One size: a fresh table of `records` records (`ratio` times the pool), YCSB C on it for
/// `seconds` with knobs `base` `reps` times, each run followed by `fio` (the device's
/// random reads on the table's file) when `fio` is set; the table removed after. The
/// median run stands for the size ([`median_run`]).
fn measure(
    r: &Runner,
    (pool, ratio, records): (&str, f64, u64),
    base: &[(&str, &str)],
    seconds: u64,
    (fio, reps): (bool, usize),
) -> Result<Size> {
    let t = r.template_ycsb(records, &knobs(base))?;
    let label = format!("{ratio}x pool {pool}, {records} records");
    let mut runs = Vec::new();
    for rep in 1..=reps {
        let of = if reps > 1 {
            format!(" (run {rep} of {reps})")
        } else {
            String::new()
        };
        r.step(format!(
            "{label}: YCSB C, {CLIENTS} clients, {seconds} s{of}"
        ));
        let out = bench_child(r, &t.dir, &knobs(base), "ycsb-c", seconds)
            .with_context(|| label.clone())?;
        let fio = fio.then(|| {
            r.step(format!(
                "{label}: fio, random 8 KiB O_DIRECT reads, {CLIENTS} jobs, {seconds} s{of}"
            ));
            fio_iops(&t.dir, seconds)
        });
        runs.push(Size {
            pool: pool.to_string(),
            ratio,
            records,
            fio,
            ..out
        });
    }
    remove_db(&t.dir);
    let s = median_run(runs);
    match &s.fio {
        Some(Ok(iops)) => r.progress(format!(
            "{label}: fio {iops:.0} IOPS; the pool's reads are {:.3} of it",
            s.reads_per_s / iops.max(1e-9)
        )),
        Some(Err(why)) => r.progress(format!("{label}: fio not run: {why}")),
        None => {}
    }
    r.progress(format!(
        "{label}: {:.0} tps, {:.0} reads/s, hit ratio {:.3}, peak RSS {} MiB of a {} MiB budget ({:.3})",
        s.tps,
        s.reads_per_s,
        s.hit_ratio,
        s.peak_rss >> 20,
        s.budget >> 20,
        s.over_budget
    ));
    Ok(s)
}

/// Of one size's runs, the median: by its reads over fio's IOPS where fio ran after each
/// run (the device's rate moves by half within minutes on a shared host, so each run is
/// set against the fio run right after it), by tps elsewhere; with every run's figures in
/// `runs`. An even count takes the upper of the middle two.
fn median_run(mut runs: Vec<Size>) -> Size {
    let over_fio = |z: &Size| match &z.fio {
        Some(Ok(iops)) => Some(z.reads_per_s / iops.max(1e-9)),
        _ => None,
    };
    let all: Vec<(f64, Option<f64>)> = runs.iter().map(|z| (z.tps, over_fio(z))).collect();
    let key = |z: &Size| over_fio(z).unwrap_or(z.tps);
    runs.sort_by(|a, b| key(a).total_cmp(&key(b)));
    let mid = runs.len() / 2;
    let mut m = runs.swap_remove(mid);
    m.runs = all;
    m
}

/// TPC-C at each of `ratios` times `pool` (whole warehouses, at least one; a number of
/// warehouses once), `seconds` each, on a fresh load.
fn run_tpcc(
    r: &Runner,
    a: &Args,
    (pool, ratios): (&str, &[f64]),
    seconds: u64,
    skipped: &mut Vec<String>,
) -> Result<Vec<Size>> {
    let mut check = bufpool::Config::default();
    check
        .set("shared_buffers", pool)
        .map_err(crate::knobs::knob_error)?;
    let pool_bytes = (check.nbuffers() * check.block_size) as f64;
    // Commits do not wait for their sync: the runs measure the pool and the device's
    // reads, not the log's syncs.
    let base = [
        ("shared_buffers", pool),
        ("io_direct", "on"),
        ("checkpoint_timeout", "1h"),
        ("log_checkpoints", "off"),
        ("synchronous_commit", "off"),
    ];
    let mut sizes: Vec<Size> = Vec::new();
    for &ratio in ratios {
        let w = warehouses_for(ratio, pool_bytes);
        if sizes.iter().any(|z| z.records == u64::from(w)) {
            continue;
        }
        let t = r.template_tpcc(w, &knobs(&base))?;
        let made = f64::from(w) * BYTES_PER_WAREHOUSE / pool_bytes;
        let label = format!("TPC-C, {w} warehouses, about {made:.2}x pool {pool}");
        r.step(format!("{label}: {CLIENTS} clients, {seconds} s"));
        let out = bench_child(r, &t.dir, &knobs(&base), "tpcc", seconds)
            .with_context(|| label.clone())?;
        remove_db(&t.dir);
        let z = Size {
            work: Work::Tpcc,
            pool: pool.to_string(),
            ratio: made,
            records: u64::from(w),
            peers: peers(r, a, (Work::Tpcc, u64::from(w), pool), seconds, skipped)?,
            ..out
        };
        r.progress(format!(
            "{label}: {:.0} tps, {:.0} reads/s, hit ratio {:.3}, RSS/budget {:.3}",
            z.tps, z.reads_per_s, z.hit_ratio, z.over_budget
        ));
        sizes.push(z);
    }
    Ok(sizes)
}

/// `bufpool bench -b SCRIPT` on `dir` with knobs `sets`, `CLIENTS` clients for `seconds`,
/// in a child process: its resident memory is its own, not what the loads before it left
/// in this one (a TPC-C load of 23 warehouses left about 40 MiB, 2026-12-07). Its figures
/// from its `--json` summary; the size's workload, multiple and fio left for the caller.
fn bench_child(
    r: &Runner,
    dir: &std::path::Path,
    sets: &[(String, String)],
    script: &str,
    seconds: u64,
) -> Result<Size> {
    let exe = std::env::current_exe().context("finding this program to run its bench")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("bench").arg("-D").arg(dir);
    for (k, v) in sets {
        cmd.arg("--set").arg(format!("{k}={v}"));
    }
    let n = CLIENTS.to_string();
    cmd.args([
        "-b",
        script,
        "-c",
        &n,
        "-j",
        &n,
        "-T",
        &seconds.to_string(),
        "--json",
    ]);
    cmd.stdin(std::process::Stdio::null());
    cmd.stderr(std::process::Stdio::piped());
    if r.stop().load(std::sync::atomic::Ordering::Relaxed) {
        anyhow::bail!("stopped");
    }
    let out = cmd.output().context("running bufpool bench")?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        anyhow::bail!("bufpool bench exited with {}: {last}", out.status);
    }
    size_of_summary(&String::from_utf8_lossy(&out.stdout))
}

/// A size's figures from `bench --json`'s summary.
fn size_of_summary(json: &str) -> Result<Size> {
    let j: serde_json::Value = serde_json::from_str(json).context("bench's --json summary")?;
    let num = |v: &serde_json::Value, what: &str| {
        v.as_f64()
            .with_context(|| format!("bench's summary has no number {what}"))
    };
    let (hits, reads) = (
        num(&j["buffers"]["hits"], "buffers.hits")?,
        num(&j["buffers"]["reads"], "buffers.reads")?,
    );
    let m = &j["memory"];
    Ok(Size {
        tps: num(&j["tps"], "tps")?,
        reads_per_s: reads / num(&j["duration_s"], "duration_s")?.max(1e-9),
        hit_ratio: hits / (hits + reads).max(1.0),
        peak_rss: num(&m["peak_rss_bytes"], "memory.peak_rss_bytes")? as u64,
        budget: num(&m["budget_bytes"], "memory.budget_bytes")? as u64,
        over_budget: num(&m["rss_over_budget"], "memory.rss_over_budget")?,
        ..Size::default()
    })
}

/// The whole number of warehouses (at least one) nearest `ratio` times a pool of
/// `pool_bytes`.
fn warehouses_for(ratio: f64, pool_bytes: f64) -> u32 {
    ((ratio * pool_bytes / BYTES_PER_WAREHOUSE).round() as u32).max(1)
}

/// TPC-C's tps at its size nearest 1.25x over its size nearest 0.9x, at each of its pools
/// where both ran as different sizes below and above the pool; the worst pool's (None when
/// no pool has both: at 64 MB one warehouse is already about 1.9x).
fn tpcc_cliff(sizes: &[Size]) -> Option<f64> {
    let tpcc = || sizes.iter().filter(|z| z.work == Work::Tpcc);
    let cliff = |pool: &str| {
        let near = |x: f64| {
            tpcc()
                .filter(|z| z.pool == pool)
                .min_by(|a, b| (a.ratio - x).abs().total_cmp(&(b.ratio - x).abs()))
        };
        let (over, under) = (near(1.25)?, near(0.9)?);
        (over.records != under.records && under.ratio < 1.0 && over.ratio > 1.0)
            .then(|| over.tps / under.tps.max(1e-9))
    };
    (pools_of(sizes, Work::Tpcc).into_iter())
        .filter_map(cliff)
        .reduce(f64::min)
}

/// The pools `work` ran at, each once, in the order they ran.
fn pools_of(sizes: &[Size], work: Work) -> Vec<&str> {
    let mut pools: Vec<&str> = Vec::new();
    for z in sizes.iter().filter(|z| z.work == work) {
        if !pools.contains(&z.pool.as_str()) {
            pools.push(&z.pool);
        }
    }
    pools
}

/// fio's random-read IOPS on the largest file under `dir` (the table's heap: a segment of
/// it when it has several), `seconds` long, one job per client; why not, when it cannot
/// run.
fn fio_iops(dir: &std::path::Path, seconds: u64) -> Result<f64, String> {
    let file = largest_file(dir).ok_or_else(|| format!("no file under {}", dir.display()))?;
    let script = crate::helper_scripts::project_script("fio-randread.sh", "BUFPOOL_FIO");
    let out = std::process::Command::new(&script)
        .arg(&file)
        .arg(seconds.to_string())
        .arg(CLIENTS.to_string())
        .output()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let last = err.lines().last().unwrap_or("no message").trim();
        return Err(last.trim_start_matches("skip: ").to_string());
    }
    fio_read_iops(&String::from_utf8_lossy(&out.stdout))
}

/// The read IOPS of fio's JSON report (one group: `--group_reporting`).
fn fio_read_iops(json: &str) -> Result<f64, String> {
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("fio's JSON: {e}"))?;
    v["jobs"][0]["read"]["iops"]
        .as_f64()
        .filter(|x| x.is_finite() && *x > 0.0)
        .ok_or_else(|| "fio's JSON has no read IOPS".to_string())
}

/// The largest regular file under `dir` (the table's heap file at these sizes).
fn largest_file(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let mut best: Option<(u64, std::path::PathBuf)> = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).ok()?.flatten() {
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() && best.as_ref().is_none_or(|b| m.len() > b.0) {
                best = Some((m.len(), e.path()));
            }
        }
    }
    best.map(|b| b.1)
}

/// The targets: tps at 1.25x over 0.9x (when both sizes ran), the worst memory ratio, and
/// at 10x the pool's reads over fio's IOPS (when fio ran there); with several pools, the
/// worst pool's.
fn push_targets(s: &mut Samples, sizes: &[Size]) {
    let pools = pools_of(sizes, Work::YcsbC);
    let find = |pool: &str, x: f64| {
        sizes
            .iter()
            .find(|z| z.work == Work::YcsbC && z.pool == pool && (z.ratio - x).abs() < 1e-9)
    };
    let at = |pool: &str, x: f64| find(pool, x).map(|z| z.tps);
    let worst = |v: Vec<f64>| v.into_iter().reduce(f64::min);
    let cliffs = pools
        .iter()
        .filter_map(|p| Some(at(p, 1.25)? / at(p, 0.9)?.max(1e-9)))
        .collect();
    if let Some(c) = worst(cliffs) {
        s.push("outgrow_no_cliff", c);
    }
    let over = sizes.iter().map(|z| z.over_budget).fold(0.0, f64::max);
    if !sizes.is_empty() {
        s.push("rss_over_budget", over);
    }
    let devices = pools
        .iter()
        .filter_map(|p| {
            let z = find(p, 10.0)?;
            let iops = z.fio.as_ref()?.as_ref().ok()?;
            Some(z.reads_per_s / iops.max(1e-9))
        })
        .collect();
    if let Some(d) = worst(devices) {
        s.push("outgrow_10x_vs_fio_iops", d);
    }
}

/// `--report DIR`: tps against data/pool (log scale), a line per engine, one chart per
/// workload and pool, and DIR/index.html showing them.
fn write_charts(dir: &std::path::Path, sizes: &[Size], header: &str) -> Result<()> {
    use crate::report::charts::{xy_log_chart, MissLine};
    use crate::report::html::escape;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Outgrowing the pool</title></head><body>\n<h1>Throughput as the data outgrows the pool</h1>\n<p>{}</p>\n",
        escape(header)
    );
    let mut groups: Vec<(Work, &str)> = Vec::new();
    for z in sizes {
        if !groups.contains(&(z.work, z.pool.as_str())) {
            groups.push((z.work, &z.pool));
        }
    }
    for (work, pool) in groups {
        let of: Vec<&Size> = sizes
            .iter()
            .filter(|z| z.work == work && z.pool == pool)
            .collect();
        let mut lines = vec![MissLine {
            name: "bufpool (O_DIRECT)".into(),
            points: of.iter().map(|z| (z.ratio, z.tps)).collect(),
        }];
        for z in &of {
            for (name, tps) in &z.peers {
                match lines.iter_mut().find(|l| &l.name == name) {
                    Some(l) => l.points.push((z.ratio, *tps)),
                    None => lines.push(MissLine {
                        name: name.clone(),
                        points: vec![(z.ratio, *tps)],
                    }),
                }
            }
        }
        let title = format!("{}, pool {pool}: tps by data size", work.name());
        let svg = xy_log_chart(&title, ("data / pool (log scale)", "tps"), &lines, false)?;
        let file = format!("outgrow-{}-{}.svg", work.name(), pool);
        let path = dir.join(&file);
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        html.push_str(&format!(
            "<h2>{}</h2>\n<img src=\"{file}\" alt=\"{} against data over pool, a line per engine\">\n",
            escape(&title),
            escape(&title)
        ));
    }
    html.push_str("</body></html>\n");
    let index = dir.join("index.html");
    std::fs::write(&index, html).with_context(|| format!("writing {}", index.display()))?;
    progress(format!("outgrow: charts in {}", index.display()));
    Ok(())
}

/// The report: `pools` are YCSB C's and TPC-C's, each a comma-separated list (empty when
/// the workload was left out).
fn report(
    r: &Runner,
    s: &Samples,
    sizes: &[Size],
    (pools, seconds): (&(String, String), u64),
) -> Report {
    let cells = table_cells(sizes);
    let mut metadata = r.metadata();
    metadata.insert("shared_buffers".into(), json!(pools.0));
    metadata.insert("tpcc_shared_buffers".into(), json!(pools.1));
    metadata.insert("clients".into(), json!(CLIENTS));
    metadata.insert("seconds".into(), json!(seconds));
    let (ycsb, tpcc) = sizes_json(sizes);
    metadata.insert("sizes".into(), ycsb);
    metadata.insert("tpcc_sizes".into(), tpcc);
    metadata.insert("tpcc_cliff".into(), json!(tpcc_cliff(sizes)));
    Report {
        header: r.header(&format!(
            "YCSB C (pool {}) and TPC-C (pool {}) as the data outgrows the pool, io_direct on, \
             c{CLIENTS} j{CLIENTS}, {seconds} s runs{} | {}",
            if pools.0.is_empty() {
                "not run"
            } else {
                &pools.0
            },
            if pools.1.is_empty() {
                "not run"
            } else {
                &pools.1
            },
            if sizes.iter().any(|z| !z.peers.is_empty()) {
                "; peers through compare, buffered"
            } else {
                ""
            },
            r.device_line()
        )),
        figures: vec![],
        // A target whose sizes did not run (`--ratios` without 0.9 and 1.25, or 10) is
        // left out, not reported empty.
        ratios: [
            ("outgrow_no_cliff", Goal::AtLeast, 0.5),
            ("rss_over_budget", Goal::AtMost, 1.05),
            ("outgrow_10x_vs_fio_iops", Goal::AtLeast, 0.8),
        ]
        .into_iter()
        .filter(|(name, _, _)| !s.get(name).is_empty())
        .map(|(name, goal, target)| s.ratio(name, goal, target))
        .collect(),
        metadata,
        notes: fio_notes(sizes),
        tables: vec![layout(&cells, 2)],
    }
}

/// The report's table: one row per size of each workload.
fn table_cells(sizes: &[Size]) -> Vec<Vec<String>> {
    let mut cells = vec![[
        "workload",
        "pool",
        "data/pool",
        "records or W",
        "tps",
        "reads/s",
        "hit ratio",
        "peak RSS MiB",
        "budget MiB",
        "RSS/budget",
        "peers' tps",
    ]
    .map(String::from)
    .to_vec()];
    for z in sizes {
        let peers: Vec<String> = z.peers.iter().map(|(n, t)| format!("{n} {t:.0}")).collect();
        cells.push(vec![
            z.work.name().to_string(),
            z.pool.clone(),
            format!("{:.2}", z.ratio),
            z.records.to_string(),
            format!("{:.0}", z.tps),
            format!("{:.0}", z.reads_per_s),
            format!("{:.3}", z.hit_ratio),
            (z.peak_rss >> 20).to_string(),
            (z.budget >> 20).to_string(),
            format!("{:.3}", z.over_budget),
            if peers.is_empty() {
                "-".into()
            } else {
                peers.join(", ")
            },
        ]);
    }
    cells
}

/// The JSON's `sizes` (YCSB C's, with fio beside the largest) and `tpcc_sizes`.
fn sizes_json(sizes: &[Size]) -> (serde_json::Value, serde_json::Value) {
    let ycsb = sizes
        .iter()
        .filter(|z| z.work == Work::YcsbC)
        .map(|z| {
            json!({
                "pool": z.pool, "data_over_pool": z.ratio, "records": z.records, "tps": z.tps,
                "engines": peers_json(z),
                "reads_per_s": z.reads_per_s, "hit_ratio": z.hit_ratio,
                "peak_rss_bytes": z.peak_rss, "budget_bytes": z.budget,
                "rss_over_budget": z.over_budget,
                "fio_read_iops": z.fio.as_ref().and_then(|f| f.as_ref().ok()),
                "fio_skipped": z.fio.as_ref().and_then(|f| f.as_ref().err()),
                "runs_tps": z.runs.iter().map(|r| r.0).collect::<Vec<_>>(),
                "runs_reads_over_fio": z.runs.iter().filter_map(|r| r.1).collect::<Vec<_>>(),
            })
        })
        .collect::<Vec<_>>();
    let tpcc = sizes
        .iter()
        .filter(|z| z.work == Work::Tpcc)
        .map(|z| {
            json!({
                "pool": z.pool, "data_over_pool": z.ratio, "warehouses": z.records, "tps": z.tps,
                "engines": peers_json(z),
                "reads_per_s": z.reads_per_s, "hit_ratio": z.hit_ratio,
                "peak_rss_bytes": z.peak_rss, "budget_bytes": z.budget,
                "rss_over_budget": z.over_budget,
            })
        })
        .collect::<Vec<_>>();
    (json!(ycsb), json!(tpcc))
}

/// A size's `engines`: bufpool's tps and each peer's, by column name.
fn peers_json(z: &Size) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert("bufpool".into(), json!(z.tps));
    for (n, t) in &z.peers {
        m.insert(n.clone(), json!(t));
    }
    serde_json::Value::Object(m)
}

/// What the notes say of fio and of what is not measured.
fn fio_notes(sizes: &[Size]) -> Vec<String> {
    let mut notes = vec![];
    if let Some(c) = tpcc_cliff(sizes) {
        notes.push(format!(
            "TPC-C: tps at its size nearest 1.25x the pool over its size nearest 0.9x: {c:.3} (a figure: the sizes are whole warehouses)"
        ));
    }
    for z in sizes {
        match &z.fio {
            Some(Ok(iops)) => notes.push(format!(
                "fio at {}x: {iops:.0} random 8 KiB O_DIRECT reads/s with {CLIENTS} jobs; \
                 the pool read {:.0}/s ({:.3} of it){}",
                z.ratio,
                z.reads_per_s,
                z.reads_per_s / iops.max(1e-9),
                if (z.ratio - 10.0).abs() < 1e-9 {
                    ""
                } else {
                    " (outgrow_10x_vs_fio_iops needs the 10x size)"
                }
            )),
            Some(Err(why)) => notes.push(format!("fio not run at {}x: {why}", z.ratio)),
            None => {}
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(ratio: f64, tps: f64, over: f64) -> Size {
        Size {
            work: Work::YcsbC,
            pool: "64MB".into(),
            ratio,
            records: 1,
            tps,
            reads_per_s: 0.0,
            hit_ratio: 1.0,
            peak_rss: 1,
            budget: 1,
            over_budget: over,
            fio: None,
            peers: Vec::new(),
            runs: Vec::new(),
        }
    }

    /// Proves: the median run stands for a size, by its reads over the fio run after it
    /// where fio ran (not by tps, not by the best run), with every run's figures kept.
    #[test]
    fn the_median_run_stands_for_a_size() {
        let run = |tps: f64, reads: f64, iops: f64| Size {
            reads_per_s: reads,
            fio: Some(Ok(iops)),
            ..size(10.0, tps, 0.5)
        };
        // Ratios 0.5, 0.9, 0.7: the middle one is the third run, not the fastest.
        let m = median_run(vec![
            run(300.0, 10.0, 20.0),
            run(100.0, 9.0, 10.0),
            run(200.0, 14.0, 20.0),
        ]);
        assert_eq!((m.tps, m.reads_per_s), (200.0, 14.0));
        assert_eq!(m.runs.len(), 3);
        assert_eq!(m.runs[1], (100.0, Some(0.9)));
        // Without fio, by tps.
        let m = median_run(vec![
            size(1.25, 5.0, 0.5),
            size(1.25, 1.0, 0.5),
            size(1.25, 3.0, 0.5),
        ]);
        assert_eq!(m.tps, 3.0);
        assert_eq!(m.runs, vec![(5.0, None), (1.0, None), (3.0, None)]);
    }

    /// Proves: with two pools each target takes the worse pool's figure.
    #[test]
    fn targets_over_two_pools_take_the_worse() {
        let big = |ratio, tps| Size {
            pool: "256MB".into(),
            ..size(ratio, tps, 0.8)
        };
        let mut s = Samples::default();
        let mut ten = big(10.0, 5.0);
        ten.reads_per_s = 500.0;
        ten.fio = Some(Ok(1000.0));
        let mut ten_small = size(10.0, 5.0, 0.9);
        ten_small.reads_per_s = 900.0;
        ten_small.fio = Some(Ok(1000.0));
        push_targets(
            &mut s,
            &[
                size(0.9, 100.0, 0.9),
                size(1.25, 80.0, 0.9),
                ten_small,
                big(0.9, 100.0),
                big(1.25, 40.0),
                ten,
            ],
        );
        assert_eq!(s.get("outgrow_no_cliff"), [0.4]);
        assert_eq!(s.get("outgrow_10x_vs_fio_iops"), [0.5]);
    }

    /// Proves: compare's JSON gives each engine's tps by column name and each skipped
    /// engine's reason; a JSON without engines is an error.
    #[test]
    fn peers_come_from_compares_json() {
        let (tps, skipped) = compare_tps(
            r#"{"engines": [{"name": "bufpool", "tps": 20.0}, {"name": "sqlite", "tps": 10.5},
                            {"name": "postgresql-18", "tps": 7.0}],
                "skipped": [{"name": "postgresql-15", "reason": "no PostgreSQL here"}]}"#,
        )
        .unwrap();
        assert_eq!(
            tps,
            [
                ("bufpool-buffered".to_string(), 20.0),
                ("sqlite".to_string(), 10.5),
                ("postgresql-18".to_string(), 7.0)
            ]
        );
        assert_eq!(
            skipped,
            [(
                "postgresql-15".to_string(),
                "no PostgreSQL here".to_string()
            )]
        );
        assert!(compare_tps(r#"{"skipped": []}"#).is_err());
        assert!(compare_tps(r#"{"engines": [{"name": "sqlite"}]}"#).is_err());
    }

    /// Proves: the cliff target compares 1.25x with 0.9x, and the memory target takes the
    /// worst size.
    #[test]
    fn targets_take_the_cliff_and_the_worst_memory() {
        let mut s = Samples::default();
        push_targets(
            &mut s,
            &[
                size(0.5, 9.0, 0.7),
                size(0.9, 100.0, 0.9),
                size(1.25, 40.0, 1.2),
            ],
        );
        let cliff = s.ratio("outgrow_no_cliff", Goal::AtLeast, 0.5);
        assert_eq!((cliff.median, cliff.pass), (0.4, false));
        let mem = s.ratio("rss_over_budget", Goal::AtMost, 1.05);
        assert_eq!((mem.median, mem.pass), (1.2, false));
        assert!(
            s.get("outgrow_10x_vs_fio_iops").is_empty(),
            "no 10x size ran"
        );
    }

    /// Proves: TPC-C's sizes are whole warehouses nearest the multiple, and its cliff
    /// figure compares its sizes nearest 1.25x and 0.9x; TPC-C sizes do not enter the
    /// YCSB cliff target but do enter the memory target.
    #[test]
    fn tpcc_sizes_are_whole_warehouses() {
        let pool = 256.0 * 1024.0 * 1024.0;
        let ws: Vec<u32> = [0.5, 0.9, 1.25, 2.0, 5.0, 10.0]
            .iter()
            .map(|&x| warehouses_for(x, pool))
            .collect();
        assert_eq!(ws, [1, 2, 3, 5, 11, 23]);
        assert_eq!(warehouses_for(0.01, pool), 1);
        let t = |ratio: f64, w: u64, tps: f64| Size {
            work: Work::Tpcc,
            records: w,
            ..size(ratio, tps, 1.2)
        };
        let sizes = [size(0.9, 100.0, 0.5), t(0.93, 2, 1000.0), t(1.4, 3, 600.0)];
        assert_eq!(tpcc_cliff(&sizes), Some(0.6));
        assert_eq!(tpcc_cliff(&sizes[..2]), None);
        // At a 64 MB pool every size is past the pool (one warehouse is about 1.9x): that
        // pool gives no cliff, and the other pool's stands; with both pools having one, the
        // worse.
        let small = |ratio: f64, w: u64, tps: f64| Size {
            pool: "64MB".into(),
            ..t(ratio, w, tps)
        };
        let mut two = vec![small(1.86, 1, 900.0), small(5.6, 3, 100.0)];
        two.extend(sizes.iter().skip(1).map(|z| Size {
            pool: "256MB".into(),
            ..z.clone()
        }));
        assert_eq!(tpcc_cliff(&two), Some(0.6));
        two[0] = small(0.8, 1, 1000.0);
        two[1] = small(1.3, 2, 500.0);
        assert_eq!(tpcc_cliff(&two), Some(0.5));
        assert_eq!(warehouses_for(0.9, 64.0 * 1024.0 * 1024.0), 1);
        let mut s = Samples::default();
        push_targets(&mut s, &sizes);
        assert!(s.get("outgrow_no_cliff").is_empty(), "no YCSB 1.25x size");
        assert_eq!(s.ratio("rss_over_budget", Goal::AtMost, 1.05).median, 1.2);
    }

    /// Proves: each workload runs at its own pools (both by default, one with `--quick`),
    /// and a workload left out runs at none; both left out is refused.
    #[test]
    fn each_workload_has_its_pools() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            a: Args,
        }
        let parse = |args: &[&str]| {
            use clap::Parser;
            Cli::try_parse_from(std::iter::once("outgrow").chain(args.iter().copied())).map(|c| c.a)
        };
        let pools = |args: &[&str], short| {
            let (_, y, t) = ratios_and_pools(&parse(args).unwrap(), short).unwrap();
            (y.join(","), t.join(","))
        };
        let both = ("64MB,256MB".to_string(), "64MB,256MB".to_string());
        assert_eq!(pools(&[], false), both);
        assert_eq!(pools(&[], true), ("64MB".into(), "256MB".into()));
        assert_eq!(pools(&["--no-ycsb"], false), ("".into(), both.1.clone()));
        assert_eq!(pools(&["--no-tpcc"], true), ("64MB".into(), "".into()));
        let given = ["--tpcc-pool", "128MB,1GB", "--pool", "32MB"];
        assert_eq!(pools(&given, true), ("32MB".into(), "128MB,1GB".into()));
        assert!(parse(&["--no-ycsb", "--no-tpcc"]).is_err());
    }

    /// Proves: a size's figures come from bench's summary, and a summary without them is
    /// an error, not zeros.
    #[test]
    fn sizes_read_benchs_summary() {
        let z = size_of_summary(
            r#"{"tps": 100.0, "duration_s": 10.0, "buffers": {"hits": 900, "reads": 100},
                "memory": {"peak_rss_bytes": 50, "budget_bytes": 100, "rss_over_budget": 0.5}}"#,
        )
        .unwrap();
        assert_eq!((z.tps, z.reads_per_s, z.hit_ratio), (100.0, 10.0, 0.9));
        assert_eq!((z.peak_rss, z.budget, z.over_budget), (50, 100, 0.5));
        assert!(size_of_summary(r#"{"tps": 1.0}"#).is_err());
        assert!(size_of_summary("not json").is_err());
    }

    /// Proves: at 10x the device target is the pool's reads over fio's IOPS, and a fio
    /// that could not run gives no target.
    #[test]
    fn the_device_target_divides_reads_by_fio_iops() {
        let mut ten = size(10.0, 50.0, 0.9);
        ten.reads_per_s = 18_000.0;
        ten.fio = Some(Ok(20_000.0));
        let mut s = Samples::default();
        push_targets(&mut s, std::slice::from_ref(&ten));
        let t = s.ratio("outgrow_10x_vs_fio_iops", Goal::AtLeast, 0.8);
        assert_eq!((t.median, t.pass), (0.9, true));
        ten.fio = Some(Err("fio is not installed".into()));
        let mut s = Samples::default();
        push_targets(&mut s, &[ten.clone()]);
        assert!(s.get("outgrow_10x_vs_fio_iops").is_empty());
        assert!(fio_notes(&[ten])
            .iter()
            .any(|n| n.contains("fio is not installed")));
        assert_eq!(
            fio_read_iops(r#"{"jobs":[{"read":{"iops":19115.6}}]}"#),
            Ok(19115.6)
        );
        assert!(fio_read_iops("{}").is_err());
        assert!(fio_read_iops("not json").is_err());
    }
}
