//! `bufpool experiment checkpoint` (issue 13, seeds 001 and 004): what sorting, combining,
//! writeback hints, O_DSYNC and several writers do to a checkpoint's effect on TPC-B.
//!
//! Table 1: one TPC-B run per configuration, all in this process, each on a fresh copy of
//! one template database (loaded once with buffered I/O, then copied, its tablespace
//! locations with it): data about four times the pool, 8 clients, checkpoint_timeout 30 s
//! (`--seconds`, default 100: three cycles plus margin), on `--device` (a profile of
//! scripts/slow-device.sh, default ssd-sata, or `local`), buffered data files by default
//! (`--io-direct off`: writeback hints and the final fsync act on the page cache; with
//! O_DIRECT they have nothing to do), `pgbench_accounts` on one tablespace and history/branches on another
//! (`--tablespaces on`, both on the data's device; `--ts-devices PROFILE` puts each on a
//! throttled device of its own). Configurations (`--configs`):
//! (a) 2007: unsorted, one page per write, no writeback hints, fsync at the end;
//! (b) sorted and combined (io_combine_limit 128 kB); (c) (b) plus writeback hints every
//! 256 kB, one context per tablespace; (d) (c) with one shared context; (e) (c) with the
//! data files opened O_DSYNC; (f) (c) with 4 checkpoint writers; (g) seed 001's 8.2.1
//! baseline (as (a) but not spread: checkpoint_completion_target 0); (h) (g) with O_DSYNC,
//! the thread's O_SYNC patch. `--wal-device` puts the log on a device of its own, as the
//! thread's runs had it. Every configuration runs
//! twice: unthrottled, then throttled with `-R` at 60% of (c)'s unthrottled TPS (seed
//! 004's throttled run); `--rate TPS` runs each only throttled, at that rate (for devices
//! that cannot absorb 60% of an unthrottled run's writes).
//!
//! Repeats: (a) and (c), the two the targets compare, run `--repeats` times (default 3),
//! alternated (a, c, a, c, ...) so that a drift of the shared machine falls on both; each
//! target is the median of the per-repeat ratios (min and max beside it), and the
//! throttled rate is 60% of (c)'s median unthrottled TPS. The other configurations run
//! once (the issue's "one run"), `--quick` runs everything once. On a device-bound run
//! (a) and (c) reach the same TPS within a percent or two, so one pair cannot tell
//! `tps_vs_2007` from noise. With the tablespaces on devices of their own (`--ts-devices`),
//! (d) repeats too, and the figures `shared_vs_per_ts_*` give (d) over (c) (one writeback
//! context shared against one per tablespace, seed 004's question), repeat by repeat.
//!
//! Latency best / worst / 10th-worst (seed 001's yardstick) come from pgbench's
//! per-transaction log: each run writes it into its own directory (`-l`, an absolute log
//! prefix) and the experiment reads the latency column back. That costs one line in memory
//! per transaction, which the clients keep anyway for `-l`, and no change to the clients;
//! the histogram would only give bucket bounds. Per-second TPS p5/p10/p50 and per-second
//! max latency p50/p99 are taken from the run's series (nearest rank).
//!
//! Table 2 (seed 001's bulk figures), per configuration on a fresh database: the load
//! (`init`: COPY FREEZE, keys, then its CHECKPOINT), then an update of every account row
//! (`abalance + 0`, in transactions of 100,000 rows so that no transaction holds millions
//! of row locks), then a CHECKPOINT.
//!
//! Every TPC-B run's `RunResult` goes to `<dir>/checkpoint/<label>.json`, so that
//! `bufpool report` overlays the configurations (the report already draws the CDFs of
//! per-second TPS and per-second maximum latency).
//!
//! `--quick`: scale 2, 8 s runs, and (checkpoint_timeout cannot go below 30 s) WAL volume
//! triggers the checkpoints instead: max_wal_size 32 MB (two default segments).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::json;

use super::device::remove_db;
use super::runner::{knobs, schedule, Common, DeviceArg, Runner, Steps, Template};
use super::{layout, Figure, Goal, Ratio, Report};
use crate::cmd::bench::run::run_tpcb;
use crate::knobs::load_config;
use crate::report::model::{RunResult, WriteBytes};
use crate::tpcb::driver::logs::log_file_name;
use crate::tpcb::options::BenchOptions;
use crate::tpcb::{Db, ACCOUNTS_PER_SCALE};
use bufpool::{Engine, RealVfs, Vfs};

/// `bufpool experiment checkpoint` flags (`--quick`: 8 s runs at scale 2, checkpoints
/// triggered by a 32 MB max_wal_size, one run of each configuration).
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub device: DeviceArg,
    /// io_direct for the TPC-B runs (default off: writeback hints and the final fsync
    /// act on the page cache).
    #[arg(long, value_parser = ["on", "off"])]
    pub io_direct: Option<String>,
    /// Seconds per TPC-B run (default 100: three 30 s checkpoint cycles plus margin; 8
    /// with --quick).
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Scale (default 20, about four times the pool; 2 with --quick).
    #[arg(long)]
    pub scale: Option<u32>,
    /// Clients.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub clients: u32,
    /// pgbench_accounts on one tablespace, history and branches on another (two
    /// directories on the data's device, or each on its own with `--ts-devices`).
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    pub tablespaces: String,
    /// Which configurations to run (letters a to k; default a to f).
    #[arg(long, value_delimiter = ',', value_parser = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"])]
    pub configs: Vec<String>,
    /// The pool: a quarter of the data (seed 004's regime and issue 13's: evictions write
    /// too), or twice the data (`whole`: seed 001's regime, whose 2 GB pool held its
    /// 750 MB database, so only checkpoints write).
    #[arg(long, default_value = "quarter", value_parser = ["quarter", "whole"])]
    pub pool: String,
    /// synchronous_commit of the TPC-B runs.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    pub sync: String,
    /// The throttled runs (at 60% of (c)'s TPS) after the unthrottled ones.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    pub throttled: String,
    /// Run every configuration at this rate only (pgbench's `-R`, transactions per
    /// second), with no unthrottled pass: for devices that cannot absorb 60% of an
    /// unthrottled run's writes (tablespaces each on a 10 MB/s device with the log
    /// elsewhere, where no checkpoint would ever finish).
    #[arg(long, value_name = "TPS", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// The bulk table (load + CHECKPOINT, update of every account, CHECKPOINT).
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    pub bulk: String,
    /// A knob for every run on top of the configurations' own (repeatable), e.g. --set
    /// bgwriter=off to take the bgwriter's writes out of the device's traffic.
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = crate::knobs::parse_set)]
    pub set: Vec<(String, String)>,
}

/// The flags resolved: what this run of the experiment does.
#[derive(Debug, Clone)]
struct Settings {
    /// Seconds per TPC-B run.
    seconds: u64,
    scale: u32,
    clients: u32,
    io_direct: bool,
    /// Two tablespaces (accounts on one, history and branches on the other).
    tablespaces: bool,
    sync_commit: bool,
    /// WAL volume triggers checkpoints (small segments and max_wal_size).
    quick: bool,
    /// The configurations to run, in letter order.
    chosen: Vec<CkptConfig>,
    /// Runs of (a) and (c) each, unthrottled and throttled (the others run once).
    repeats: usize,
    /// Run the bulk table.
    bulk: bool,
    /// Run the throttled pass.
    throttled: bool,
    /// `--rate`: only throttled runs, at this rate.
    rate: Option<f64>,
    /// The tablespaces are on devices of their own (`--ts-devices`): (d) repeats beside
    /// (c), the pair that answers seed 004's question.
    ts_devices: bool,
    /// Knobs set for every run after the base settings (`--set`); a configuration's own
    /// knobs still win.
    extra: Vec<(String, String)>,
    /// `--pool whole`: the pool holds the data twice over (else a quarter of it).
    pool_whole: bool,
}

impl Settings {
    fn new(a: &Args, c: &Common) -> Result<Settings> {
        let all = configs();
        if let Some(l) = a
            .configs
            .iter()
            .find(|l| !all.iter().any(|c| c.letter == *l))
        {
            bail!("unknown configuration {l:?} in --configs (allowed: a to k)");
        }
        let chosen = all
            .into_iter()
            .filter(|c| {
                if a.configs.is_empty() {
                    by_default(c)
                } else {
                    a.configs.iter().any(|l| l == c.letter)
                }
            })
            .collect();
        for (k, v) in &a.set {
            bufpool::Config::default()
                .set(k, v)
                .with_context(|| format!("--set {k}={v}"))?;
        }
        Ok(Settings {
            seconds: a.seconds.unwrap_or(if c.quick { 8 } else { 100 }),
            scale: a.scale.unwrap_or(if c.quick { 2 } else { 20 }),
            clients: a.clients,
            io_direct: a.io_direct.as_deref() == Some("on"),
            tablespaces: a.tablespaces == "on",
            sync_commit: a.sync == "on",
            quick: c.quick,
            chosen,
            repeats: c.repeats_unless_quick(),
            bulk: a.bulk == "on",
            throttled: a.throttled == "on" || a.rate.is_some(),
            rate: a.rate,
            ts_devices: a.tablespaces == "on" && a.device.ts_devices != "shared",
            extra: a.set.clone(),
            pool_whole: a.pool == "whole",
        })
    }

    /// The pool for data of `bytes`, MB: a quarter of it (at least 16 MB), or with
    /// `--pool whole` twice it, rounded up.
    fn pool_mb(&self, bytes: u64) -> u64 {
        if self.pool_whole {
            (2 * bytes).div_ceil(1 << 20).max(16)
        } else {
            Template::quarter_pool_mb_of(bytes)
        }
    }

    /// The pool against the data, for titles.
    fn pool_note(&self, bytes: u64) -> String {
        let what = if self.pool_whole {
            "twice"
        } else {
            "a quarter of"
        };
        format!(
            "pool {} MB ({what} {:.0} MB of data)",
            self.pool_mb(bytes),
            bytes as f64 / 1048576.0
        )
    }
}

/// A configuration of the experiment: letter, label, knobs.
#[derive(Debug, Clone)]
pub struct CkptConfig {
    pub letter: &'static str,
    pub label: &'static str,
    pub knobs: Vec<(&'static str, &'static str)>,
}

impl CkptConfig {
    /// The metadata's entry: letter, label, knobs.
    fn json(&self) -> serde_json::Value {
        let knobs: serde_json::Map<_, _> = self
            .knobs
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        json!({"config": self.letter, "label": self.label, "knobs": knobs})
    }
}

/// PostgreSQL 8.2.1's checkpoint (seed 001's "before"): not spread, unsorted, one page a
/// write, no writeback hints.
const PG_821: [(&str, &str); 4] = [
    ("checkpoint_sort", "off"),
    ("io_combine_limit", "8kB"),
    ("checkpoint_flush_after", "0"),
    ("checkpoint_completion_target", "0"),
];

/// PostgreSQL 9.5's background writer as seed 004's runs set it (bgwriter_delay 10 ms,
/// bgwriter_lru_maxpages 1000) with PostgreSQL's behaviour: a fixed nap, no lead, one
/// write at a time, no writeback hints (9.5 had no bgwriter_flush_after).
const PG_95_BGWRITER: [(&str, &str); 7] = [
    ("bgwriter_delay", "10ms"),
    ("bgwriter_lru_maxpages", "1000"),
    ("bgwriter_lru_multiplier", "2.0"),
    ("bgwriter_adaptive_nap", "off"),
    ("bgwriter_lead", "off"),
    ("bgwriter_writers", "1"),
    ("bgwriter_flush_after", "0"),
];

/// Seed 004's checkpointer before the patch (master a298a1e06, 9.5's behaviour): spread
/// over checkpoint_completion_target 0.5 (its default then), unsorted, one page a write,
/// no writeback hints, fsync at the end.
const PG_95: [(&str, &str); 4] = [
    ("checkpoint_sort", "off"),
    ("io_combine_limit", "8kB"),
    ("checkpoint_flush_after", "0"),
    ("checkpoint_completion_target", "0.5"),
];

/// The (before, after) pairs the targets compare: issue 13's (a) and (c), and seed 004's
/// 9.5 and 9.6.
const PAIRS: [(&str, &str); 2] = [("a", "c"), ("i", "j")];

/// Whether a configuration runs without `--configs`: issue 13's six do; seed 001's
/// baselines, (g), (h) and (k), and seed 004's, (i) and (j), run when named (`bufpool
/// seeds` names them).
fn by_default(c: &CkptConfig) -> bool {
    !matches!(c.letter, "g" | "h" | "i" | "j" | "k")
}

/// A configuration: every knob the experiment varies at (c)'s value unless `over` sets
/// it, then the knobs of `extra`.
fn config(
    letter: &'static str,
    label: &'static str,
    over: &[(&'static str, &'static str)],
    extra: &[(&'static str, &'static str)],
) -> CkptConfig {
    let mut knobs = vec![
        ("checkpoint_sort", "on"),
        ("io_combine_limit", "128kB"),
        ("checkpoint_flush_after", "256kB"),
        ("checkpoint_writeback_context", "tablespace"),
        ("checkpoint_sync_method", "fsync"),
        ("checkpoint_writers", "1"),
        ("checkpoint_completion_target", "0.9"),
    ];
    for (k, v) in over {
        knobs
            .iter_mut()
            .find(|(n, _)| n == k)
            .expect("a varied knob")
            .1 = v;
    }
    knobs.extend_from_slice(extra);
    CkptConfig {
        letter,
        label,
        knobs,
    }
}

/// The configurations: issue 13's six, seed 001's two baselines and seed 004's two. Every
/// knob the experiment varies is set in every configuration, so none inherits a default
/// that might change.
pub fn configs() -> Vec<CkptConfig> {
    let mut pg_821_o_sync = PG_821.to_vec();
    pg_821_o_sync.push(("checkpoint_sync_method", "open_datasync"));
    let mut pg_821_o_sync_sorted = pg_821_o_sync.clone();
    pg_821_o_sync_sorted.retain(|(k, _)| !matches!(*k, "checkpoint_sort" | "io_combine_limit"));
    pg_821_o_sync_sorted.extend([("checkpoint_sort", "on"), ("io_combine_limit", "128kB")]);
    let c = |letter, label, over: &[(&'static str, &'static str)]| config(letter, label, over, &[]);
    let mut pg_96_bgwriter = PG_95_BGWRITER.to_vec();
    pg_96_bgwriter.retain(|(k, _)| *k != "bgwriter_flush_after");
    pg_96_bgwriter.push(("bgwriter_flush_after", "512kB"));
    pg_96_bgwriter.push(("bgwriter_flush_once", "off"));
    vec![
        c(
            "a",
            "(a) 2007",
            &[
                ("checkpoint_sort", "off"),
                ("io_combine_limit", "8kB"),
                ("checkpoint_flush_after", "0"),
            ],
        ),
        c(
            "b",
            "(b) sorted+combined",
            &[("checkpoint_flush_after", "0")],
        ),
        c("c", "(c) flush per ts", &[]),
        c(
            "d",
            "(d) flush shared",
            &[("checkpoint_writeback_context", "shared")],
        ),
        c(
            "e",
            "(e) O_DSYNC",
            &[("checkpoint_sync_method", "open_datasync")],
        ),
        c("f", "(f) 4 writers", &[("checkpoint_writers", "4")]),
        // Seed 001's baseline as the thread ran it: PostgreSQL 8.2.1's checkpoint, before
        // load distribution: every dirty page at once, unsorted, page by page, fsync at
        // the end.
        c("g", "(g) 8.2.1", &PG_821),
        // Seed 001's O_SYNC patch exactly: (g) with the data files opened O_DSYNC for the
        // checkpoint's and the bgwriter's writes, nothing else changed.
        c("h", "(h) 8.2.1 O_SYNC", &pg_821_o_sync),
        // Seed 001's mitigation: (h) with the dirty buffers sorted by file and block and
        // adjacent pages written together (one write of up to 128 kB; the thread's patch
        // also needed them adjacent in memory, a vectored write does not).
        c("k", "(k) 8.2.1 sorted O_SYNC", &pg_821_o_sync_sorted),
        // Seed 004's "master": 9.5's checkpointer and bgwriter as its runs set them.
        config("i", "(i) 9.5", &PG_95, &PG_95_BGWRITER),
        // Seed 004's patch (23a27b039, 9.6): sorted writes, still one page a write,
        // writeback hints every 256 kB per tablespace, and the bgwriter's own every 512
        // kB, the defaults the thread's runs kept.
        config(
            "j",
            "(j) 9.6 sorted+flush",
            &[
                ("io_combine_limit", "8kB"),
                ("checkpoint_completion_target", "0.5"),
            ],
            &pg_96_bgwriter,
        ),
    ]
}

/// The value at quantile `q` of `v` (nearest rank; 0 for none).
/// Mean and (population) standard deviation of `v`; zeros when it is empty.
fn mean_sd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

/// One TPC-B run's figures (table 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub letter: String,
    pub label: String,
    pub throttled: bool,
    /// Which repeat of its configuration (0 for the first).
    pub repeat: usize,
    pub rate: Option<f64>,
    pub tps: f64,
    pub tps_p5: f64,
    pub tps_p10: f64,
    pub tps_p50: f64,
    /// Standard deviation of the per-second tps (the thread tabulates it beside the
    /// mean); population, as pgbench's.
    pub tps_sd: f64,
    pub maxlat_p50: f64,
    pub maxlat_p99: f64,
    /// Mean and standard deviation of the per-second maximum latency, ms.
    pub maxlat_mean: f64,
    pub maxlat_sd: f64,
    pub lat_best: f64,
    pub lat_worst: f64,
    pub lat_10th_worst: f64,
    pub checkpoints: usize,
    pub write_s: f64,
    pub sync_s: f64,
    pub longest_sync_s: f64,
    /// What the run wrote, by source and as the devices saw it (None where the run did
    /// not count it).
    pub written: Option<WriteBytes>,
}

impl Row {
    /// The row of run `r`; `latencies_ms` are its transactions' latencies (any order).
    pub fn new(
        letter: &str,
        throttled: bool,
        repeat: usize,
        rate: Option<f64>,
        r: &RunResult,
        latencies_ms: &[f64],
    ) -> Row {
        let tps: Vec<f64> = r.series.iter().map(|s| s.tps).collect();
        let maxlat: Vec<f64> = r.series.iter().map(|s| s.lat_max_ms).collect();
        let mut lat = latencies_ms.to_vec();
        lat.sort_by(|a, b| b.total_cmp(a));
        let ck = &r.checkpoints;
        let (maxlat_mean, maxlat_sd) = mean_sd(&maxlat);
        Row {
            letter: letter.to_string(),
            label: r.label.clone(),
            throttled,
            repeat,
            rate,
            tps: r.tps,
            tps_p5: quantile(&tps, 0.05),
            tps_p10: quantile(&tps, 0.10),
            tps_p50: quantile(&tps, 0.50),
            tps_sd: mean_sd(&tps).1,
            maxlat_p50: quantile(&maxlat, 0.50),
            maxlat_p99: quantile(&maxlat, 0.99),
            maxlat_mean,
            maxlat_sd,
            lat_best: lat.last().copied().unwrap_or(0.0),
            lat_worst: lat.first().copied().unwrap_or(0.0),
            lat_10th_worst: lat.get(9).or(lat.last()).copied().unwrap_or(0.0),
            checkpoints: ck.len(),
            write_s: ck.iter().map(|c| c.write_s).sum(),
            sync_s: ck.iter().map(|c| c.sync_s).sum(),
            longest_sync_s: ck.iter().map(|c| c.longest_sync_s).fold(0.0, f64::max),
            written: r.bytes_written.clone(),
        }
    }

    /// The devices' bytes written per transaction, if known.
    fn device_per_tx(&self) -> Option<f64> {
        let w = self.written.as_ref()?;
        w.device.map(|d| w.per_tx(d))
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "config": self.letter, "label": self.label, "throttled": self.throttled,
            "repeat": self.repeat, "rate": self.rate, "tps": self.tps, "tps_p5": self.tps_p5, "tps_p10": self.tps_p10,
            "tps_p50": self.tps_p50, "tps_stddev": self.tps_sd,
            "per_second_max_latency_mean_ms": self.maxlat_mean,
            "per_second_max_latency_stddev_ms": self.maxlat_sd,
            "per_second_max_latency_p50_ms": self.maxlat_p50,
            "per_second_max_latency_p99_ms": self.maxlat_p99, "latency_best_ms": self.lat_best,
            "latency_worst_ms": self.lat_worst, "latency_10th_worst_ms": self.lat_10th_worst,
            "checkpoints": self.checkpoints, "checkpoint_write_s": self.write_s,
            "checkpoint_sync_s": self.sync_s, "longest_sync_s": self.longest_sync_s,
            "bytes_written_per_tx": self.written.as_ref().map(WriteBytes::per_tx_json),
        })
    }
}

/// The three targets of issue 13 from the rows (those whose runs are missing are left
/// out): throttled (c) per-second TPS p5 over the rate; throttled (c) per-second max
/// latency p99 over (a)'s; unthrottled (c) TPS over (a)'s. With repeats, each is the
/// median of its per-repeat values, (c)'s repeat `i` paired with (a)'s repeat `i`.
pub fn targets(rows: &[Row]) -> Vec<Ratio> {
    let mut out = pair_targets(
        rows,
        PAIRS[0],
        [
            "throttled_tps_p5_vs_rate",
            "throttled_maxlat_p99_vs_2007",
            "tps_vs_2007",
        ],
    );
    out.extend(pair_targets(
        rows,
        PAIRS[1],
        [
            "throttled_tps_p5_vs_rate_96",
            "throttled_maxlat_p99_96_vs_95",
            "tps_96_vs_95",
        ],
    ));
    out
}

/// [`targets`] of one (before, after) pair, under `names` (p5 over the rate, max latency
/// p99, tps).
fn pair_targets(
    rows: &[Row],
    (before, after): (&str, &str),
    names: [&'static str; 3],
) -> Vec<Ratio> {
    let get = |l: &str, t: bool, i: usize| {
        rows.iter()
            .find(|r| r.letter == l && r.throttled == t && r.repeat == i)
    };
    fn of<'a>(rows: &'a [Row], l: &'a str, t: bool) -> impl Iterator<Item = &'a Row> + 'a {
        rows.iter()
            .filter(move |r| r.letter == l && r.throttled == t)
    }
    let mut out = Vec::new();
    let mut push = |name, values: Vec<f64>, goal, target| {
        if !values.is_empty() {
            out.push(Ratio::new(name, &values, goal, target));
        }
    };
    let paired = |t: bool, f: &dyn Fn(&Row, &Row) -> f64| -> Vec<f64> {
        of(rows, after, t)
            .filter_map(|c| get(before, t, c.repeat).map(|a| f(c, a)))
            .collect()
    };
    let p5 = of(rows, after, true)
        .filter_map(|c| c.rate.filter(|r| *r > 0.0).map(|rate| c.tps_p5 / rate))
        .collect();
    push(names[0], p5, Goal::AtLeast, 0.9);
    let lat = paired(true, &|c, a| c.maxlat_p99 / a.maxlat_p99.max(1e-9));
    push(names[1], lat, Goal::AtMost, 0.5);
    let tps = paired(false, &|c, a| c.tps / a.tps.max(1e-9));
    push(names[2], tps, Goal::AtLeast, 1.0);
    out
}

/// Seed 004's question, one writeback context per tablespace or one shared, as (d)'s
/// figures over (c)'s, repeat paired with repeat (the throttled runs where they ran, else
/// the unthrottled): per-second max latency p99, per-second TPS p5, checkpoint sync time.
/// Empty unless both ran.
fn shared_vs_per_ts(rows: &[Row]) -> Vec<Figure> {
    let throttled = rows.iter().any(|r| r.letter == "d" && r.throttled);
    let pairs: Vec<(&Row, &Row)> = rows
        .iter()
        .filter(|d| d.letter == "d" && d.throttled == throttled)
        .filter_map(|d| {
            rows.iter()
                .find(|c| c.letter == "c" && c.throttled == throttled && c.repeat == d.repeat)
                .map(|c| (d, c))
        })
        .collect();
    if pairs.is_empty() {
        return Vec::new();
    }
    let figure = |name, f: &dyn Fn(&Row) -> f64| Figure {
        name,
        unit: "x",
        summary: super::summarize(
            &pairs
                .iter()
                .map(|(d, c)| f(d) / f(c).max(1e-9))
                .collect::<Vec<_>>(),
        ),
    };
    vec![
        figure("shared_vs_per_ts_maxlat_p99", &|r| r.maxlat_p99),
        figure("shared_vs_per_ts_tps_p5", &|r| r.tps_p5),
        figure("shared_vs_per_ts_sync_s", &|r| r.sync_s),
    ]
}

/// The configurations that run `--repeats` times, alternated: the two the targets compare,
/// and (d) when the tablespaces have devices of their own (`ts_devices`), to set against
/// (c).
fn repeated(c: &CkptConfig, ts_devices: bool) -> bool {
    PAIRS.iter().any(|&(a, b)| c.letter == a || c.letter == b) || (ts_devices && c.letter == "d")
}

/// `--rate`: a positive number of transactions per second.
fn parse_rate(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a rate: a number of transactions per second above 0"
        )),
    }
}

/// Table 1 laid out.
pub fn run_table(rows: &[Row]) -> String {
    let header = [
        "run",
        "config",
        "tps",
        "tps/s p5",
        "p10",
        "p50",
        "sd",
        "max-lat/s mean ms",
        "sd ms",
        "p50 ms",
        "p99 ms",
        "lat best ms",
        "worst ms",
        "10th-worst ms",
        "ckpts",
        "ckpt write s",
        "sync s",
        "longest fsync s",
    ];
    let mut cells: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in rows {
        cells.push(vec![
            run_name(r),
            r.label.trim_end_matches(" throttled").to_string(),
            format!("{:.0}", r.tps),
            format!("{:.0}", r.tps_p5),
            format!("{:.0}", r.tps_p10),
            format!("{:.0}", r.tps_p50),
            format!("{:.0}", r.tps_sd),
            format!("{:.1}", r.maxlat_mean),
            format!("{:.1}", r.maxlat_sd),
            format!("{:.1}", r.maxlat_p50),
            format!("{:.1}", r.maxlat_p99),
            format!("{:.2}", r.lat_best),
            format!("{:.1}", r.lat_worst),
            format!("{:.1}", r.lat_10th_worst),
            r.checkpoints.to_string(),
            format!("{:.2}", r.write_s),
            format!("{:.2}", r.sync_s),
            format!("{:.3}", r.longest_sync_s),
        ]);
    }
    layout(&cells, 2)
}

/// Table 3: what each run wrote per transaction, by source and as the devices saw it
/// (bytes; the devices' write requests and their mean size). Empty when no run counted it.
pub fn written_table(rows: &[Row]) -> String {
    if rows.iter().all(|r| r.written.is_none()) {
        return String::new();
    }
    let header = [
        "run",
        "config",
        "tps",
        "wal B/tx",
        "of which images",
        "checkpointer",
        "bgwriter",
        "backends",
        "extensions",
        "engine total",
        "hinted",
        "device B/tx",
        "device writes/tx",
        "kB a write",
    ];
    let mut cells: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    let dash = || "–".to_string();
    for r in rows {
        let Some(w) = &r.written else { continue };
        let b = |v: u64| format!("{:.0}", w.per_tx(v));
        let ios = w.device_write_ios;
        cells.push(vec![
            run_name(r),
            r.label.trim_end_matches(" throttled").to_string(),
            format!("{:.0}", r.tps),
            b(w.wal),
            b(w.wal_fpi),
            b(w.checkpointer),
            b(w.bgwriter),
            b(w.backend),
            b(w.extend),
            b(w.engine_total()),
            b(w.writeback_hinted),
            w.device.map_or_else(dash, b),
            ios.map_or_else(dash, |n| format!("{:.2}", w.per_tx(n))),
            match (w.device, ios) {
                (Some(d), Some(n)) if n > 0 => format!("{:.1}", d as f64 / n as f64 / 1024.0),
                _ => dash(),
            },
        ]);
    }
    format!(
        "What each run wrote per transaction, bytes (the sources as passed to the OS; the devices between a syncfs before the first transaction and one after the last)\n{}",
        layout(&cells, 2)
    )
}

/// The devices' bytes per transaction of each pair's later configuration over its
/// earlier one's, repeat paired with repeat, unthrottled and throttled: how much more
/// (or less) the later one made the devices write for the same work. Empty where a pair
/// did not run or the devices were not counted.
fn written_figures(rows: &[Row]) -> Vec<Figure> {
    const NAMES: [[&str; 2]; 2] = [
        [
            "device_bytes_per_tx_vs_2007",
            "throttled_device_bytes_per_tx_vs_2007",
        ],
        [
            "device_bytes_per_tx_96_vs_95",
            "throttled_device_bytes_per_tx_96_vs_95",
        ],
    ];
    let mut out = Vec::new();
    for ((before, after), names) in PAIRS.iter().zip(NAMES) {
        for (throttled, name) in [(false, names[0]), (true, names[1])] {
            let ratios: Vec<f64> = rows
                .iter()
                .filter(|c| c.letter == *after && c.throttled == throttled)
                .filter_map(|c| {
                    let a = rows.iter().find(|a| {
                        a.letter == *before && a.throttled == throttled && a.repeat == c.repeat
                    })?;
                    Some(c.device_per_tx()? / a.device_per_tx()?.max(1e-9))
                })
                .collect();
            if !ratios.is_empty() {
                out.push(Figure {
                    name,
                    unit: "x",
                    summary: super::summarize(&ratios),
                });
            }
        }
    }
    out
}

/// A run's name in the tables: its rate, or "unthrottled".
fn run_name(r: &Row) -> String {
    match r.rate {
        Some(rate) if r.throttled => format!("-R {rate:.0}"),
        _ => "unthrottled".into(),
    }
}

/// Table 2's figures for one configuration, seconds.
#[derive(Debug, Clone, Copy)]
struct Bulk {
    load_s: f64,
    update_s: f64,
    checkpoint_s: f64,
}

/// Reads the latency column (µs) of a per-transaction log, in ms; failed and skipped
/// transactions are left out.
fn read_latencies(path: &Path) -> Result<Vec<f64>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2)?.parse::<f64>().ok())
        .map(|us| us / 1000.0)
        .collect())
}

fn slug(label: &str) -> String {
    let mut s = String::new();
    for ch in label.chars() {
        if ch.is_ascii_alphanumeric() {
            s.push(ch.to_ascii_lowercase());
        } else if !s.ends_with('-') && !s.is_empty() {
            s.push('-');
        }
    }
    s.trim_end_matches('-').to_string()
}

/// Written by `init` into every database's bufpool.conf.
const INIT_KNOBS: &[(&str, &str)] = &[("log_checkpoints", "off")];

/// The knobs of the runs.
struct Knobs {
    /// Every TPC-B run's, on top of the template's (`--set` last).
    base: Vec<(String, String)>,
    /// Given at open only, never to `init` (see [`Knobs::new`]).
    wal: Vec<(String, String)>,
    /// What the metadata shows as the settings: init, base (without `--set`) and wal.
    shown: Vec<(String, String)>,
}

impl Knobs {
    /// Knobs every run shares. Quick: WAL volume triggers checkpoints (the timeout cannot
    /// go below 30 s): max_wal_size two 16 MB segments. Those two are given at open only,
    /// never written by `init` into bufpool.conf: the file is read back in name order,
    /// max_wal_size before min_wal_size, and a max below the default min is refused there.
    fn new(o: &Settings, pool_mb: u64) -> Knobs {
        let wal = if o.quick {
            knobs(&[("min_wal_size", "32MB"), ("max_wal_size", "32MB")])
        } else {
            Vec::new()
        };
        let on_off = |b: bool| if b { "on" } else { "off" };
        let mut shown = knobs(INIT_KNOBS);
        shown.extend(knobs(&[
            ("shared_buffers", format!("{pool_mb}MB").as_str()),
            ("checkpoint_timeout", "30s"),
            ("synchronous_commit", on_off(o.sync_commit)),
            ("io_direct", on_off(o.io_direct)),
        ]));
        let mut base = shown.clone();
        base.extend(o.extra.iter().cloned());
        shown.extend(wal.iter().cloned());
        Knobs { base, wal, shown }
    }

    /// `base` with configuration `cfg`'s knobs after it.
    fn with(&self, cfg: &CkptConfig) -> Vec<(String, String)> {
        let mut sets = self.base.clone();
        sets.extend(knobs(&cfg.knobs));
        sets
    }
}

/// The bulk figures of one configuration on a fresh database at `dir`.
/// `sets` go to `init` (and its bufpool.conf), `wal` only to the reopened engine;
/// `waldir`: the log's own directory (`--wal-device`), None: in the data directory.
fn bulk(
    dir: &Path,
    ts: &[PathBuf],
    waldir: Option<&Path>,
    o: &Settings,
    sets: &[(String, String)],
    wal: &[(String, String)],
) -> Result<Bulk> {
    remove_db(dir);
    let t = Instant::now();
    crate::cmd::init::init(dir, o.scale, 100, ts, waldir, sets)?;
    let load_s = t.elapsed().as_secs_f64();
    let (c, _) = load_config(dir, wal)?;
    let vfs: Arc<dyn Vfs> = Arc::new(RealVfs::new());
    let engine = Engine::open_vfs(vfs.clone(), dir, &c, false)
        .with_context(|| format!("opening {}", dir.display()))?;
    let (update_s, checkpoint_s) = {
        let db = Db::open(&engine, vfs.as_ref(), dir)?;
        let accounts = i64::from(o.scale) * ACCOUNTS_PER_SCALE as i64;
        let t = Instant::now();
        let all: Vec<i64> = (1..=accounts).collect();
        for chunk in all.chunks(100_000) {
            let x = engine.begin_xid().context("bulk update: begin")?;
            db.touch_accounts(x, chunk).context("bulk update")?;
            engine
                .commit_transaction(x)
                .context("bulk update: commit")?;
        }
        let update_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        engine.checkpoint().context("bulk update: checkpoint")?;
        (update_s, t.elapsed().as_secs_f64())
    };
    engine.shutdown()?;
    remove_db(dir);
    Ok(Bulk {
        load_s,
        update_s,
        checkpoint_s,
    })
}

/// What the runs of one experiment share.
struct Bed<'a> {
    o: &'a Settings,
    template: &'a Template,
    knobs: &'a Knobs,
    /// Where every run's `RunResult` goes (`<dir>/checkpoint`).
    out_dir: PathBuf,
}

/// Runs the experiment: table 1 (TPC-B per configuration, unthrottled then throttled),
/// table 2 (bulk), the targets.
pub fn run(a: &Args, r: &mut Runner) -> Result<Report> {
    let o = Settings::new(a, &r.common)?;
    let out_dir = r.out_dir()?;
    r.use_device(&a.device)?;
    r.set_io(if o.io_direct { "O_DIRECT" } else { "buffered" });
    let template = r.template(o.scale, o.tablespaces, &knobs(INIT_KNOBS))?;
    let knobs = Knobs::new(&o, o.pool_mb(template.bytes));
    let bed = Bed {
        o: &o,
        template: &template,
        knobs: &knobs,
        out_dir,
    };
    let mut rows: Vec<Row> = Vec::new();
    let mut rate: Option<f64> = None;
    let passes: Vec<bool> = [false, true]
        .into_iter()
        .filter(|t| {
            if o.rate.is_some() {
                *t
            } else {
                !t || o.throttled
            }
        })
        .collect();
    r.plan(steps(&o, passes.len()));
    for throttled in passes {
        if throttled {
            rate = Some(
                o.rate
                    .unwrap_or_else(|| throttled_rate(&rows, &mut r.notes)),
            );
        }
        for (cfg, repeat) in schedule(&o.chosen, o.repeats, |c| repeated(c, o.ts_devices)) {
            rows.push(measure(r, &bed, cfg, repeat, rate)?);
        }
    }
    let mut bulk_rows = Vec::new();
    for cfg in o.chosen.iter().filter(|_| o.bulk) {
        r.step(format!(
            "bulk {}: load + CHECKPOINT, update of every account, CHECKPOINT",
            cfg.label
        ));
        let dir = r.data_root()?.join(format!("bulk-{}", cfg.letter));
        let name = format!("bulk-{}", cfg.letter);
        let ts = r.ts_dirs(&name, o.tablespaces)?;
        let b = bulk(
            &dir,
            &ts,
            r.waldir(&name).as_deref(),
            &o,
            &knobs.with(cfg),
            &knobs.wal,
        )
        .with_context(|| format!("bulk {}", cfg.label))?;
        bulk_rows.push((cfg.label, b));
    }
    remove_db(&template.dir);
    r.release_device();
    Ok(report(r, &bed, &rows, &bulk_rows, rate))
}

/// The steps of a run: table 1's TPC-B runs (the schedule once per pass), `--seconds`
/// each, then table 2's bulk runs (one per configuration).
fn steps(o: &Settings, passes: usize) -> Steps {
    let runs = schedule(&o.chosen, o.repeats, |c| repeated(c, o.ts_devices)).len();
    let bulk = if o.bulk { o.chosen.len() } else { 0 };
    Steps::new()
        .timed(passes * runs, o.seconds as f64)
        .untimed(bulk)
}

/// The throttled runs' rate: 60% of the median unthrottled TPS (of its repeats) of (c),
/// else of (j) (seed 004's patched build, whose runs set the thread's 60%), else of the
/// first run's (with a note saying so).
fn throttled_rate(rows: &[Row], notes: &mut Vec<String>) -> f64 {
    let tps_of = |l: &str| -> Vec<f64> {
        rows.iter()
            .filter(|r| r.letter == l)
            .map(|r| r.tps)
            .collect()
    };
    let chosen = PAIRS
        .iter()
        .map(|&(_, after)| (after, tps_of(after)))
        .find(|(_, t)| !t.is_empty());
    let tps = match chosen {
        Some((_, t)) => super::summarize(&t).median,
        None => {
            let (from, tps) = rows
                .first()
                .map(|r| (r.label.clone(), r.tps))
                .unwrap_or_default();
            notes.push(format!(
                "neither (c) nor (j) ran: the throttled rate is 60% of {from}'s TPS"
            ));
            tps
        }
    };
    (0.6 * tps).max(1.0)
}

/// One TPC-B run of `cfg` on a fresh copy of the template, throttled to `rate` if given;
/// its `RunResult` saved to the run files.
fn measure(
    r: &mut Runner,
    bed: &Bed,
    cfg: &CkptConfig,
    repeat: usize,
    rate: Option<f64>,
) -> Result<Row> {
    let (o, throttled) = (bed.o, rate.is_some());
    let again = if repeat > 0 {
        format!(" #{}", repeat + 1)
    } else {
        String::new()
    };
    let suffix = if throttled { " throttled" } else { "" };
    let label = format!("{}{again}{suffix}", cfg.label);
    let name = format!("run-{}{}", cfg.letter, if throttled { "-r" } else { "" });
    let dir = r.fresh_copy(bed.template, &name)?;
    let mut sets = bed.knobs.with(cfg);
    sets.extend(bed.knobs.wal.iter().cloned());
    let mut opts = BenchOptions::tpcb(o.clients, o.seconds, &label, r.stop());
    opts.driver.rate = rate;
    // The per-transaction log, into the run's own directory (an absolute prefix).
    opts.driver.transaction_log = true;
    opts.driver.log_prefix = dir.join("txlog").to_string_lossy().into_owned();
    let log = PathBuf::from(log_file_name(&opts.driver.log_prefix, 0));
    let rate_note = rate.map(|r| format!(", -R {r:.0}")).unwrap_or_default();
    r.step(format!(
        "{label}: {} clients, {} s{rate_note}",
        o.clients, o.seconds
    ));
    let out = run_tpcb(&dir, &sets, opts).with_context(|| label.clone())?;
    let row = Row::new(
        cfg.letter,
        throttled,
        repeat,
        rate,
        &out.result,
        &read_latencies(&log)?,
    );
    let json_path = bed.out_dir.join(format!("{}.json", slug(&label)));
    std::fs::write(&json_path, serde_json::to_string_pretty(&out.result)?)
        .with_context(|| format!("writing {}", json_path.display()))?;
    r.progress(format!(
        "{label}: {:.0} tps, per-second p5 {:.0}, max-latency/s p99 {:.1} ms, {} checkpoints",
        row.tps, row.tps_p5, row.maxlat_p99, row.checkpoints
    ));
    if row.checkpoints < 3 {
        r.notes.push(format!(
            "{label}: {} checkpoint(s) in {} s (the issue asks for at least 3 cycles)",
            row.checkpoints, o.seconds
        ));
    }
    remove_db(&dir);
    Ok(row)
}

/// Table 1's title line.
fn run_title(r: &Runner, bed: &Bed) -> String {
    let o = bed.o;
    let repeats = if o.repeats > 1 {
        format!(
            ", (a) and (c) {} times each, alternated (#2.. mark the repeats)",
            o.repeats
        )
    } else {
        String::new()
    };
    format!(
        "TPC-B, scale {}, {}, {} clients, {} s per run{repeats}, checkpoint_timeout 30 s{}, synchronous_commit {}, {}, device: {}, {}\n",
        o.scale,
        o.pool_note(bed.template.bytes),
        o.clients,
        o.seconds,
        if o.quick { ", max_wal_size 32 MB" } else { "" },
        if o.sync_commit { "on" } else { "off" },
        if o.tablespaces { "accounts and history/branches on two tablespaces" } else { "one tablespace" },
        r.device_desc(),
        r.io(),
    )
}

/// Table 2 laid out.
fn bulk_table(scale: u32, pool: &str, bulk_rows: &[(&str, Bulk)]) -> String {
    let mut t2 = format!(
        "Bulk (seed 001), scale {scale}, {pool}: load with its CHECKPOINT; UPDATE of every account (100,000 rows a transaction); CHECKPOINT\n",
    );
    let mut cells: Vec<Vec<String>> =
        vec![["config", "load + ckpt s", "update s", "ckpt s", "total s"]
            .iter()
            .map(|s| s.to_string())
            .collect()];
    for (label, b) in bulk_rows {
        cells.push(vec![
            label.to_string(),
            format!("{:.1}", b.load_s),
            format!("{:.1}", b.update_s),
            format!("{:.1}", b.checkpoint_s),
            format!("{:.1}", b.load_s + b.update_s + b.checkpoint_s),
        ]);
    }
    t2.push_str(&layout(&cells, 1));
    t2
}

/// The report: tables 1 and 2, the targets, the command that overlays the runs.
fn report(
    r: &mut Runner,
    bed: &Bed,
    rows: &[Row],
    bulk_rows: &[(&str, Bulk)],
    rate: Option<f64>,
) -> Report {
    let mut tables = vec![run_title(r, bed) + &run_table(rows)];
    let written = written_table(rows);
    if !written.is_empty() {
        tables.push(written);
    }
    if !bulk_rows.is_empty() {
        let pool = bed.o.pool_note(bed.template.bytes);
        tables.push(bulk_table(bed.o.scale, &pool, bulk_rows));
    }
    let mut report_cmd = String::from("bufpool report");
    for row in rows {
        let path = bed.out_dir.join(format!("{}.json", slug(&row.label)));
        report_cmd.push_str(&format!(" {}", path.display()));
    }
    r.notes.push(format!("runs overlaid: {report_cmd}"));
    let mut metadata = r.metadata();
    metadata.insert(
        "runs".into(),
        rows.iter().map(Row::json).collect::<Vec<_>>().into(),
    );
    metadata.insert(
        "bulk".into(),
        bulk_rows
            .iter()
            .map(|(l, b)| json!({"config": l, "load_s": b.load_s, "update_s": b.update_s, "checkpoint_s": b.checkpoint_s}))
            .collect::<Vec<_>>()
            .into(),
    );
    metadata.insert(
        "configs".into(),
        bed.o
            .chosen
            .iter()
            .map(CkptConfig::json)
            .collect::<Vec<_>>()
            .into(),
    );
    metadata.insert("throttled_rate".into(), rate.into());
    metadata.insert("run_files".into(), bed.out_dir.display().to_string().into());
    metadata.insert("report_command".into(), report_cmd.into());
    metadata.insert("settings".into(), settings_json(bed));
    Report {
        header: r.header(&r.device_line()),
        figures: shared_vs_per_ts(rows)
            .into_iter()
            .chain(written_figures(rows))
            .collect(),
        ratios: targets(rows),
        metadata,
        notes: Vec::new(),
        tables,
    }
}

/// The metadata's `settings`.
fn settings_json(bed: &Bed) -> serde_json::Value {
    let o = bed.o;
    let map = |kv: &[(String, String)]| {
        kv.iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect::<serde_json::Map<_, _>>()
    };
    json!({"scale": o.scale, "clients": o.clients, "seconds": o.seconds,
           "pool_mb": o.pool_mb(bed.template.bytes), "pool": if o.pool_whole { "whole" } else { "quarter" },
           "synchronous_commit": o.sync_commit,
           "checkpoint_timeout": "30s", "quick": o.quick, "repeats": o.repeats,
           "tablespaces": o.tablespaces, "settings": map(&bed.knobs.shown),
           "extra_settings": map(&o.extra)})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(letter: &str, throttled: bool, tps: f64, p5: f64, maxlat: f64) -> Row {
        Row {
            letter: letter.into(),
            label: format!("({letter}) x"),
            throttled,
            repeat: 0,
            rate: throttled.then_some(100.0),
            tps,
            tps_p5: p5,
            tps_p10: p5,
            tps_p50: tps,
            tps_sd: 0.0,
            maxlat_p50: maxlat / 2.0,
            maxlat_p99: maxlat,
            maxlat_mean: maxlat / 2.0,
            maxlat_sd: 0.0,
            lat_best: 1.0,
            lat_worst: maxlat,
            lat_10th_worst: maxlat,
            checkpoints: 3,
            write_s: 1.0,
            sync_s: 1.0,
            longest_sync_s: 0.5,
            written: None,
        }
    }

    #[test]
    fn targets_compare_c_with_a_and_the_rate() {
        let rows = vec![
            row("a", false, 1000.0, 500.0, 800.0),
            row("c", false, 1200.0, 900.0, 100.0),
            row("a", true, 100.0, 60.0, 400.0),
            row("c", true, 100.0, 95.0, 100.0),
        ];
        let t = targets(&rows);
        let names: Vec<_> = t.iter().map(|r| r.name).collect();
        assert_eq!(
            names,
            [
                "throttled_tps_p5_vs_rate",
                "throttled_maxlat_p99_vs_2007",
                "tps_vs_2007"
            ]
        );
        assert!((t[0].median - 0.95).abs() < 1e-9 && t[0].pass);
        assert!((t[1].median - 0.25).abs() < 1e-9 && t[1].pass);
        assert!((t[2].median - 1.2).abs() < 1e-9 && t[2].pass);
        assert_eq!(t[1].goal, Goal::AtMost);
        // Without (a), only the rate target remains.
        assert_eq!(targets(&rows[1..2]).len(), 0);
        assert_eq!(targets(&rows[3..]).len(), 1);
        // Seed 004's pair, (j) over (i), under its own names; (c) over (a) left out.
        let seed004 = vec![
            row("i", false, 1000.0, 500.0, 800.0),
            row("j", false, 900.0, 900.0, 100.0),
            row("i", true, 100.0, 60.0, 400.0),
            row("j", true, 100.0, 80.0, 300.0),
        ];
        let t = targets(&seed004);
        let got: Vec<_> = t.iter().map(|r| (r.name, r.pass)).collect();
        assert_eq!(
            got,
            [
                ("throttled_tps_p5_vs_rate_96", false),
                ("throttled_maxlat_p99_96_vs_95", false),
                ("tps_96_vs_95", false)
            ]
        );
        assert!((t[1].median - 0.75).abs() < 1e-9);
    }

    /// Repeats pair (c)'s repeat i with (a)'s repeat i and report the median of the
    /// per-repeat ratios with min and max; an unpaired repeat is left out.
    /// Table 3 and its figures: each run's bytes per transaction by source, the devices'
    /// requests and their size, and (c)'s device bytes over (a)'s repeat by repeat; a
    /// run without counts is left out, and no pair gives no figure.
    #[test]
    fn written_bytes_are_per_transaction_and_paired() {
        let written = |tx: u64, device: u64| WriteBytes {
            transactions: tx,
            wal: 3_000 * tx,
            wal_fpi: 1_000 * tx,
            checkpointer: 8_192 * tx,
            writeback_hinted: 4_096 * tx,
            device: Some(device * tx),
            device_write_ios: Some(tx / 2),
            ..WriteBytes::default()
        };
        let mut rows = Vec::new();
        for (i, (a, c)) in [(10_000, 10_500), (10_000, 9_000), (12_000, 12_600)]
            .into_iter()
            .enumerate()
        {
            let mut ra = row("a", false, 100.0, 0.0, 1.0);
            let mut rc = row("c", false, 100.0, 0.0, 1.0);
            (ra.repeat, rc.repeat) = (i, i);
            (ra.written, rc.written) = (Some(written(1_000, a)), Some(written(1_000, c)));
            rows.extend([ra, rc]);
        }
        rows.push(row("a", true, 100.0, 0.0, 1.0)); // no counts: left out
        let figures = written_figures(&rows);
        assert_eq!(
            figures.len(),
            1,
            "only the unthrottled pair ran with counts"
        );
        assert_eq!(figures[0].name, "device_bytes_per_tx_vs_2007");
        let s = &figures[0].summary;
        assert!((s.median - 1.05).abs() < 1e-9, "{s:?}");
        assert!(
            (s.min - 0.9).abs() < 1e-9 && (s.max - 1.05).abs() < 1e-9,
            "{s:?}"
        );
        let table = written_table(&rows);
        let first = table
            .lines()
            .find(|l| l.contains("(a) x") && l.contains("unthrottled"))
            .expect("(a)'s row");
        for cell in [
            "3000", "1000", "8192", "11192", "4096", "10000", "0.50", "19.5",
        ] {
            assert!(
                first.split_whitespace().any(|c| c == cell),
                "{cell}: {first}"
            );
        }
        assert_eq!(table.lines().filter(|l| l.contains("(a) x")).count(), 3);
        assert!(written_table(&[row("a", false, 1.0, 0.0, 1.0)]).is_empty());
        let json = rows[0].json();
        assert_eq!(json["bytes_written_per_tx"]["device"], 10_000.0);
        assert_eq!(json["bytes_written_per_tx"]["device_write_ios"], 0.5);
        assert_eq!(
            json["bytes_written_per_tx"]["of_which_full-page_images"],
            1_000.0
        );
    }

    #[test]
    fn repeated_targets_are_medians_of_paired_ratios() {
        let mut rows = Vec::new();
        for (i, (a, c)) in [(1000.0, 990.0), (1000.0, 1030.0), (900.0, 918.0)]
            .into_iter()
            .enumerate()
        {
            let mut ra = row("a", false, a, 0.0, 1.0);
            let mut rc = row("c", false, c, 0.0, 1.0);
            (ra.repeat, rc.repeat) = (i, i);
            rows.extend([ra, rc]);
        }
        let mut lonely = row("c", false, 5000.0, 0.0, 1.0);
        lonely.repeat = 3;
        rows.push(lonely);
        for (i, p5) in [80.0, 95.0, 92.0].into_iter().enumerate() {
            let mut r = row("c", true, 100.0, p5, 1.0);
            r.repeat = i;
            rows.push(r);
        }
        let t = targets(&rows);
        let names: Vec<_> = t.iter().map(|r| r.name).collect();
        assert_eq!(names, ["throttled_tps_p5_vs_rate", "tps_vs_2007"]);
        assert!((t[0].median - 0.92).abs() < 1e-9 && t[0].pass);
        assert!((t[0].min - 0.80).abs() < 1e-9 && (t[0].max - 0.95).abs() < 1e-9);
        assert!((t[1].median - 1.02).abs() < 1e-9 && t[1].pass);
        assert!((t[1].min - 0.99).abs() < 1e-9 && (t[1].max - 1.03).abs() < 1e-9);
    }

    /// (a) and (c) repeat, alternated; the others run once, in the first round.
    #[test]
    fn shared_vs_per_ts_pairs_d_with_c_repeat_by_repeat() {
        assert!(shared_vs_per_ts(&[row("c", true, 100.0, 90.0, 50.0)]).is_empty());
        let mut rows = vec![
            row("c", false, 100.0, 90.0, 50.0),
            row("d", false, 100.0, 90.0, 500.0),
            row("c", true, 100.0, 90.0, 50.0),
            row("d", true, 100.0, 45.0, 100.0),
        ];
        let mut again = row("c", true, 100.0, 90.0, 100.0);
        again.repeat = 1;
        rows.push(again);
        let mut again = row("d", true, 100.0, 90.0, 100.0);
        again.repeat = 1;
        rows.push(again);
        let f = shared_vs_per_ts(&rows);
        let get = |n: &str| f.iter().find(|x| x.name == n).unwrap().summary;
        // Throttled rows only: ratios 2.0 and 1.0 (repeat 0, repeat 1), not the
        // unthrottled 10.
        assert_eq!(get("shared_vs_per_ts_maxlat_p99").max, 2.0);
        assert_eq!(get("shared_vs_per_ts_maxlat_p99").min, 1.0);
        assert_eq!(get("shared_vs_per_ts_tps_p5").min, 0.5);
    }

    #[test]
    fn the_schedule_repeats_a_and_c_only() {
        let all: Vec<CkptConfig> = configs().into_iter().filter(by_default).collect();
        let order: Vec<String> = schedule(&all, 3, |c| repeated(c, false))
            .into_iter()
            .map(|(c, i)| format!("{}{}", c.letter, i))
            .collect();
        assert_eq!(
            order,
            ["a0", "b0", "c0", "d0", "e0", "f0", "a1", "c1", "a2", "c2"]
        );
        assert_eq!(
            schedule(&all[1..2], 3, |c| repeated(c, false)).len(),
            1,
            "(b) alone runs once"
        );
        assert_eq!(
            schedule(&all, 0, |c| repeated(c, false)).len(),
            6,
            "no repeats still runs each once"
        );
        let with_ts: Vec<String> = schedule(&all, 2, |c| repeated(c, true))
            .into_iter()
            .map(|(c, i)| format!("{}{}", c.letter, i))
            .collect();
        assert_eq!(
            with_ts,
            ["a0", "b0", "c0", "d0", "e0", "f0", "a1", "c1", "d1"],
            "tablespaces on devices of their own: (d) repeats beside (c)"
        );
    }

    #[test]
    fn row_takes_quantiles_and_the_worst_latencies() {
        let mut r = RunResult::example("(c) flush per ts", 3);
        r.checkpoints[0].write_s = 2.0;
        r.checkpoints[1].write_s = 3.0;
        r.checkpoints[1].longest_sync_s = 0.25;
        let lat: Vec<f64> = (1..=100).map(f64::from).collect();
        let row = Row::new("c", false, 0, None, &r, &lat);
        assert_eq!(
            (row.lat_best, row.lat_worst, row.lat_10th_worst),
            (1.0, 100.0, 91.0)
        );
        assert_eq!(row.checkpoints, 2);
        assert_eq!(row.write_s, 5.0);
        assert_eq!(row.longest_sync_s, 0.25);
        let mut tps: Vec<f64> = r.series.iter().map(|s| s.tps).collect();
        tps.sort_by(f64::total_cmp);
        assert_eq!(row.tps_p5, tps[2]); // nearest rank: ceil(0.05 * 60) = 3
        assert_eq!(row.tps_p50, tps[29]);
        assert!(row.tps_p5 <= row.tps_p10 && row.tps_p10 <= row.tps_p50);
        // The per-second series' spread, as the thread tabulates it beside the mean.
        let n = tps.len() as f64;
        let mean = tps.iter().sum::<f64>() / n;
        let sd = (tps.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / n).sqrt();
        assert!(
            (row.tps_sd - sd).abs() < 1e-9 && sd > 0.0,
            "{} vs {sd}",
            row.tps_sd
        );
        let maxlat: Vec<f64> = r.series.iter().map(|s| s.lat_max_ms).collect();
        assert_eq!(mean_sd(&maxlat).0, row.maxlat_mean);
        assert_eq!(
            mean_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]),
            (5.0, 2.0)
        );
        assert_eq!(mean_sd(&[]), (0.0, 0.0));
        let table = run_table(&[row]);
        assert!(table.contains("(c) flush per ts") && table.contains("unthrottled"));
    }

    /// The pool is a quarter of the data (at least 16 MB) unless `--pool whole` asks for
    /// seed 001's regime, twice the data rounded up; the titles say which.
    #[test]
    fn pool_is_a_quarter_or_twice_the_data() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            a: Args,
        }
        let args = |pool: &str| Cli::try_parse_from(["x", "--pool", pool]).map(|c| c.a);
        let common = Common {
            json: false,
            repeats: 3,
            dir: None,
            quick: false,
        };
        let quarter = Settings::new(&args("quarter").unwrap(), &common).unwrap();
        let whole = Settings::new(&args("whole").unwrap(), &common).unwrap();
        let mb = 1u64 << 20;
        assert_eq!(quarter.pool_mb(400 * mb), 100);
        assert_eq!(quarter.pool_mb(20 * mb), 16);
        assert_eq!(whole.pool_mb(400 * mb), 800);
        assert_eq!(whole.pool_mb(400 * mb + 1), 801);
        assert!(whole
            .pool_note(400 * mb)
            .contains("pool 800 MB (twice 400 MB of data)"));
        assert!(quarter.pool_note(400 * mb).contains("a quarter of 400 MB"));
        assert!(args("half").is_err());
    }

    #[test]
    fn configurations_are_the_issues() {
        let c = configs();
        assert_eq!(c.len(), 11);
        assert_eq!(c.iter().filter(|c| by_default(c)).count(), 6);
        let knob = |l: &str, k: &str| {
            c.iter()
                .find(|x| x.letter == l)
                .unwrap()
                .knobs
                .iter()
                .find(|(n, _)| *n == k)
                .unwrap()
                .1
        };
        assert_eq!(knob("a", "checkpoint_sort"), "off");
        assert_eq!(knob("a", "io_combine_limit"), "8kB");
        assert_eq!(knob("b", "checkpoint_flush_after"), "0");
        assert_eq!(knob("c", "checkpoint_flush_after"), "256kB");
        assert_eq!(knob("d", "checkpoint_writeback_context"), "shared");
        assert_eq!(knob("e", "checkpoint_sync_method"), "open_datasync");
        assert_eq!(knob("f", "checkpoint_writers"), "4");
        // Seed 001's 8.2.1: not spread, unsorted, page by page, no hints, fsync; (h) the
        // same through O_DSYNC.
        for l in ["g", "h"] {
            assert_eq!(knob(l, "checkpoint_completion_target"), "0");
            assert_eq!(knob(l, "checkpoint_sort"), "off");
            assert_eq!(knob(l, "io_combine_limit"), "8kB");
            assert_eq!(knob(l, "checkpoint_flush_after"), "0");
        }
        assert_eq!(knob("g", "checkpoint_sync_method"), "fsync");
        assert_eq!(knob("h", "checkpoint_sync_method"), "open_datasync");
        // Seed 001's mitigation: (h) sorted, adjacent pages in one write, still unspread,
        // unhinted and through O_DSYNC.
        assert_eq!(knob("k", "checkpoint_sort"), "on");
        assert_eq!(knob("k", "io_combine_limit"), "128kB");
        assert_eq!(knob("k", "checkpoint_sync_method"), "open_datasync");
        assert_eq!(knob("k", "checkpoint_completion_target"), "0");
        assert_eq!(knob("k", "checkpoint_flush_after"), "0");
        assert_eq!(knob("a", "checkpoint_completion_target"), "0.9");
        // Seed 004's pair: 9.5 (spread over 0.5, unsorted, no hints anywhere) and 9.6
        // (sorted, hints every 256 kB, the bgwriter's every 512 kB), both page by page
        // with 9.5's bgwriter at the thread's 10 ms and 1000 pages.
        for l in ["i", "j"] {
            assert_eq!(knob(l, "checkpoint_completion_target"), "0.5");
            assert_eq!(knob(l, "io_combine_limit"), "8kB");
            assert_eq!(knob(l, "bgwriter_delay"), "10ms");
            assert_eq!(knob(l, "bgwriter_lru_maxpages"), "1000");
            assert_eq!(knob(l, "bgwriter_lead"), "off");
        }
        assert_eq!(knob("i", "checkpoint_sort"), "off");
        assert_eq!(knob("i", "checkpoint_flush_after"), "0");
        assert_eq!(knob("i", "bgwriter_flush_after"), "0");
        assert_eq!(knob("j", "checkpoint_sort"), "on");
        assert_eq!(knob("j", "checkpoint_flush_after"), "256kB");
        assert_eq!(knob("j", "bgwriter_flush_after"), "512kB");
        // Every configuration's knobs are valid.
        for cfg in &c {
            let mut conf = bufpool::Config::default();
            for (k, v) in &cfg.knobs {
                conf.set(k, v).unwrap();
            }
            conf.validate().unwrap();
        }
    }

    #[test]
    fn latencies_parse_and_labels_slug() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("log");
        std::fs::write(&log, "0 0 1500 0 1 2\n1 0 failed 0 1 3\n2 0 250 0 1 4 10\n").unwrap();
        assert_eq!(read_latencies(&log).unwrap(), vec![1.5, 0.25]);
        assert_eq!(slug("(a) 2007 throttled"), "a-2007-throttled");
    }
}
