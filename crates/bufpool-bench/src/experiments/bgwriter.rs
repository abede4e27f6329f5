//! `bufpool experiment bgwriter` (issue 12, seed 000): does the background writer keep
//! clean buffers ready, at what cost, and is a round's cost independent of the pool's size?
//!
//! Table 1, TPC-B: one run per configuration and workload, all in this process, each on a
//! fresh copy of one template database (pool a quarter of the data, 8 clients,
//! synchronous_commit off so that buffer writes, not WAL flushes, are what the clients
//! wait on; `--checkpoint-timeout` 1 h by default so no checkpoint runs inside the measured
//! minute: the bgwriter and the backends are the only writers; 30 s puts checkpoints in).
//! Configurations: bgwriter off; the default; `pg15-defaults`, PostgreSQL 15's settings
//! (lru_maxpages 100, multiplier 2.0, delay 200 ms) on our bgwriter, which still naps
//! adaptively, keeps its lead and 16 writes in flight; `pg15-faithful`, those settings
//! with PostgreSQL's behaviour (fixed nap, no lead, one write at a time, every write
//! hinted); `seed000-bg2`, seed 000's bg2.patch (a 2% search window from the clock hand each round,
//! `bgwriter_lru_percent`); seed 004's setting (delay 10 ms, lru_maxpages 1000); the three
//! alternatives of seed 000 (dirty-chain, mini-checkpoint, victim-queue); and seed 000's
//! ARC in its clock form CAR (`car`: `buffer_replacement = car`, the bgwriter cleaning T1's
//! and T2's LRU ends in turn) with Greg Stark's T2-only variant (`car-t2-only`,
//! `bgwriter_frequent_only`) and the dirty chain and mini-checkpoint under it
//! (`car-dirty-chain`, `car-mini-checkpoint`). Workloads: max (clients as fast as
//! they go; `off` and `default` only: it measures the most each can do, and sets the
//! others' rates), steady (a Poisson arrival rate, `-R`, of [`STEADY_OF_MAX`] times the
//! max runs' median with the bgwriter off: the same work for every configuration, so
//! latencies compare at equal load) and bursty (`--rate-profile` from 0.3 to 0.8 times
//! that max with spikes of 1.5x in 5% of the seconds, and a batch updating 1% of the
//! accounts every sixth of the run). Latency counts from each transaction's scheduled
//! start, so falling behind the schedule shows. Data on `--device` (a profile of
//! scripts/slow-device.sh, or `local`), with io_direct on by default so a write costs
//! device time.
//!
//! Table 2, round cost: pools of 64 MiB, 1 GiB and 8 GiB filled with zeroed pages (no
//! reads), 20% of them dirty; each round follows the same number of allocations (2,000)
//! and re-dirtyings (400), with the same write cap (bgwriter_lru_maxpages 1000), so the
//! work a round has to do is the same at every size; the
//! mean and max time of a round, for the default strategy and dirty-chain.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::device::remove_db;
use super::runner::{knobs, schedule, Common, DeviceArg, Runner, Steps, Template};
use super::{layout, progress, summarize, Goal, Ratio, Report};
use crate::cmd::bench::run::run_tpcb;
use crate::tpcb::options::{BenchOptions, RunOutcome};
use bufpool::{BufferPool, BufferTag, Config, ForkNumber, RealVfs, RelFileId, Vfs};

/// The steady workload's rate as a share of what the bgwriter-off configuration can do
/// (the max workload's median): loaded, with headroom for the machine's noise, like a
/// server run at 70% of its capacity.
const STEADY_OF_MAX: f64 = 0.7;

/// `bufpool experiment bgwriter` flags (`--quick`: 10 s runs at scale 5, fewer timed
/// rounds, one run of each configuration).
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub device: DeviceArg,
    /// io_direct for the TPC-B runs (default on: a write costs device time).
    #[arg(long, value_parser = ["on", "off"])]
    pub io_direct: Option<String>,
    /// Pools of the round-cost table.
    #[arg(long, value_delimiter = ',', default_value = "64MB,1GB,8GB")]
    pub round_pools: Vec<String>,
    /// Only these configurations of table 1 (names as in its table; `off` always runs
    /// first, as the baseline the targets compare with).
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    pub bgw_configs: Vec<String>,
    /// Seconds per TPC-B run (default 60, 10 with --quick).
    #[arg(long)]
    pub seconds: Option<u64>,
    /// checkpoint_timeout of the TPC-B runs: 1h keeps checkpoints out of the measured
    /// runs (the bgwriter and the backends are the only writers); 30s puts them in, to
    /// ask seed 000's question whether LRU cleaning smooths checkpoints.
    #[arg(long, default_value = "1h")]
    pub checkpoint_timeout: String,
    /// Seed 000's client sweep: the max workload again at each of these client counts
    /// (1, 2, 4, 8, 16 or 32), for `off` and the `--sweep-configs`; rows `max-c<N>`.
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub sweep_clients: Vec<u32>,
    /// The configurations of the client sweep besides `off` (default: `default`).
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    pub sweep_configs: Vec<String>,
}

/// The client sweep's counts and their workload names.
const SWEEP: [(u32, &str); 6] = [
    (1, "max-c1"),
    (2, "max-c2"),
    (4, "max-c4"),
    (8, "max-c8"),
    (16, "max-c16"),
    (32, "max-c32"),
];

/// The flags resolved: what this run of the experiment does.
#[derive(Debug, Clone)]
struct Settings {
    /// Seconds per TPC-B run.
    seconds: u64,
    scale: u32,
    clients: u32,
    io_direct: bool,
    /// Pools of the round-cost table.
    round_pools: Vec<String>,
    /// Rounds timed per pool and strategy (after as many warm-up rounds).
    rounds: usize,
    /// Only these configurations of table 1 (empty: all), `off` always included.
    only: Vec<String>,
    /// checkpoint_timeout of the TPC-B runs.
    checkpoint_timeout: String,
    /// Runs of `off` and `default` per workload (interleaved, so drift hits both alike);
    /// the targets are medians over the pairs. The other configurations run once.
    repeats: usize,
    /// The client sweep: counts with their workload names, and its configurations.
    sweep: Vec<(u32, &'static str)>,
    sweep_configs: Vec<String>,
}

impl Settings {
    fn new(a: &Args, c: &Common) -> Result<Settings> {
        let names: Vec<&str> = configs().iter().map(|(n, _)| *n).collect();
        for (flag, list) in [
            ("--bgw-configs", &a.bgw_configs),
            ("--sweep-configs", &a.sweep_configs),
        ] {
            if let Some(bad) = list.iter().find(|c| !names.contains(&c.as_str())) {
                bail!(
                    "{flag}: no configuration {bad:?} (one of: {})",
                    names.join(", ")
                );
            }
        }
        let sweep = a
            .sweep_clients
            .iter()
            .map(|n| SWEEP.iter().copied().find(|s| s.0 == *n))
            .collect::<Option<Vec<_>>>()
            .context("--sweep-clients: each count one of 1, 2, 4, 8, 16, 32")?;
        let quick = c.short();
        Ok(Settings {
            seconds: a.seconds.unwrap_or(if quick { 10 } else { 60 }),
            scale: if quick { 5 } else { 10 },
            clients: 8,
            io_direct: a.io_direct.as_deref() != Some("off"),
            round_pools: a.round_pools.clone(),
            rounds: if quick { 10 } else { 30 },
            only: a.bgw_configs.clone(),
            repeats: if quick { 1 } else { c.repeats as usize },
            checkpoint_timeout: a.checkpoint_timeout.clone(),
            sweep,
            sweep_configs: if a.sweep_configs.is_empty() {
                vec!["default".into()]
            } else {
                a.sweep_configs.clone()
            },
        })
    }

    /// Whether configuration `name` runs in the client sweep.
    fn sweeps(&self, name: &str) -> bool {
        name == "off" || self.sweep_configs.iter().any(|c| c == name)
    }

    /// Whether configuration `name` runs in `workload`: `off` always (the baseline), the
    /// others if chosen; the max workload only `off` and `default`.
    fn runs(&self, name: &str, workload: &str) -> bool {
        let chosen = self.only.is_empty() || name == "off" || self.only.iter().any(|c| c == name);
        chosen && (workload != "max" || paired(name))
    }
}

/// The two configurations the targets compare: they run in every workload, `--repeats`
/// times.
fn paired(name: &str) -> bool {
    name == "off" || name == "default"
}

/// The configurations of table 1: name and knobs.
fn configs() -> Vec<(&'static str, Vec<(&'static str, &'static str)>)> {
    vec![
        ("off", vec![("bgwriter", "off")]),
        ("default", vec![]),
        (
            "pg15-defaults",
            vec![
                ("bgwriter_lru_maxpages", "100"),
                ("bgwriter_lru_multiplier", "2.0"),
                ("bgwriter_delay", "200ms"),
            ],
        ),
        (
            "seed004-10ms-1000",
            vec![
                ("bgwriter_delay", "10ms"),
                ("bgwriter_lru_maxpages", "1000"),
            ],
        ),
        ("dirty-chain", vec![("bgwriter_strategy", "dirty-chain")]),
        (
            "mini-checkpoint",
            vec![("bgwriter_strategy", "mini-checkpoint")],
        ),
        ("victim-queue", vec![("bgwriter_strategy", "victim-queue")]),
        // `bgwriter_writers`: the default keeps 16 writes in flight; PostgreSQL's one at a
        // time (whose device latency bounded the bgwriter).
        ("writers-1", vec![("bgwriter_writers", "1")]),
        // The 16 writes on 16 threads instead of one io_uring (the default before).
        ("threads", vec![("bgwriter_io_method", "threads")]),
        // PostgreSQL 15's bgwriter as it behaves, not only its settings: a fixed nap, no
        // lead, one write at a time, a writeback hint for every write (every 512 kB, our
        // default size, but also for blocks hinted since the last checkpoint).
        (
            "pg15-faithful",
            vec![
                ("bgwriter_lru_maxpages", "100"),
                ("bgwriter_lru_multiplier", "2.0"),
                ("bgwriter_delay", "200ms"),
                ("bgwriter_adaptive_nap", "off"),
                ("bgwriter_lead", "off"),
                ("bgwriter_writers", "1"),
                ("bgwriter_flush_once", "off"),
            ],
        ),
    ]
    .into_iter()
    .chain(seed000_configs())
    .collect()
}

/// Seed 000's own configurations of table 1.
fn seed000_configs() -> Vec<(&'static str, Vec<(&'static str, &'static str)>)> {
    vec![
        // Seed 000's bg2.patch (Simon Riggs, 2004-12): every round searches 2% of the
        // pool from the LRU end (our clock hand) and writes its dirty buffers, at most 100,
        // every 200 ms; one write at a time, no writeback hints (2004 had none).
        (
            "seed000-bg2",
            vec![
                ("bgwriter_lru_percent", "2"),
                ("bgwriter_lru_maxpages", "100"),
                ("bgwriter_delay", "200ms"),
                ("bgwriter_adaptive_nap", "off"),
                ("bgwriter_lead", "off"),
                ("bgwriter_writers", "1"),
                ("bgwriter_flush_after", "0"),
            ],
        ),
        // Seed 000's ARC, here in its clock form CAR: the bgwriter cleans from the LRU ends
        // of T1 and T2 in turn, as 8.0's did; Greg Stark's proposal, T2 only; and the
        // thread's two other bgwriters (the dirty chain, the mini-checkpoint) under it.
        ("car", vec![("buffer_replacement", "car")]),
        (
            "car-t2-only",
            vec![
                ("buffer_replacement", "car"),
                ("bgwriter_frequent_only", "on"),
            ],
        ),
        (
            "car-dirty-chain",
            vec![
                ("buffer_replacement", "car"),
                ("bgwriter_strategy", "dirty-chain"),
            ],
        ),
        (
            "car-mini-checkpoint",
            vec![
                ("buffer_replacement", "car"),
                ("bgwriter_strategy", "mini-checkpoint"),
            ],
        ),
    ]
}

/// One TPC-B run's figures (table 1).
#[derive(Debug, Clone)]
struct Row {
    config: &'static str,
    workload: &'static str,
    clients: u32,
    repeat: usize,
    tps: f64,
    backend_share: f64,
    lat_p99: f64,
    lat_max: f64,
    maxlat_p99: f64,
    lat_over_10ms: u64,
    bgw_writes_per_s: f64,
    wasted: u64,
    maxwritten: u64,
    backend_writes: u64,
    bgwriter_writes: u64,
    /// The bgwriter's counters that say why backends still wrote.
    why: serde_json::Value,
    /// The `-R` rate of a steady run, transactions per second.
    rate: Option<f64>,
    /// What the slow (over 10 ms) transactions waited for, as the bench summary says it.
    slow_waits: String,
    waits: serde_json::Value,
    /// Checkpoints that ended in the run, their summed sync seconds and longest fsync.
    checkpoints: usize,
    checkpoint_sync_s: f64,
    longest_sync_s: f64,
}

impl Row {
    fn new(config: &'static str, workload: &'static str, repeat: usize, o: &RunOutcome) -> Row {
        let r = &o.result;
        let b = r.bgwriter.clone().unwrap_or_default();
        Row {
            config,
            workload,
            clients: r.clients,
            repeat,
            tps: r.tps,
            backend_share: r.backend_write_share().unwrap_or(0.0),
            lat_p99: r.latency_ms.p99,
            lat_max: r.latency_ms.max,
            maxlat_p99: r.per_interval.max_latency_p99,
            lat_over_10ms: r.latency_ms.over_10ms,
            bgw_writes_per_s: b.buffers_clean as f64 / r.duration_s.max(1e-9),
            wasted: b.wasted_writes,
            maxwritten: b.maxwritten_clean,
            backend_writes: r.buffers.written_by_backend,
            bgwriter_writes: r.buffers.written_by_bgwriter,
            why: json!({"dirty_victims_unreached": b.dirty_victims_unreached,
                        "dirty_victims_passed": b.dirty_victims_passed,
                        "rounds_lapped": b.rounds_lapped, "rounds": b.rounds,
                        "buffers_skipped": b.buffers_skipped,
                        "io_method": b.io_method}),
            rate: None,
            slow_waits: r
                .waits
                .as_ref()
                .map(|w| crate::tpcb::driver::waits::describe(&w.over_10ms))
                .unwrap_or_default(),
            waits: r
                .waits
                .as_ref()
                .and_then(|w| serde_json::to_value(w).ok())
                .unwrap_or(serde_json::Value::Null),
            checkpoints: r.checkpoints.len(),
            checkpoint_sync_s: r.checkpoints.iter().map(|c| c.sync_s).sum(),
            longest_sync_s: r
                .checkpoints
                .iter()
                .map(|c| c.longest_sync_s)
                .fold(0.0, f64::max),
        }
    }

    /// Its line of table 1.
    fn cells(&self) -> Vec<String> {
        vec![
            self.workload.into(),
            self.config.into(),
            (self.repeat + 1).to_string(),
            format!("{:.0}", self.tps),
            format!("{:.1}%", 100.0 * self.backend_share),
            format!("{:.2}", self.lat_p99),
            format!("{:.1}", self.lat_max),
            format!("{:.1}", self.maxlat_p99),
            format!("{:.0}", self.bgw_writes_per_s),
            self.wasted.to_string(),
            self.maxwritten.to_string(),
            format!("{} / {:.2}", self.checkpoints, self.checkpoint_sync_s),
        ]
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "config": self.config, "workload": self.workload, "repeat": self.repeat,
            "clients": self.clients,
            "tps": self.tps,
            "backend_write_share": self.backend_share, "latency_p99_ms": self.lat_p99,
            "latency_max_ms": self.lat_max, "per_second_max_latency_p99_ms": self.maxlat_p99,
            "latency_over_10ms": self.lat_over_10ms,
            "bgwriter_writes_per_s": self.bgw_writes_per_s, "wasted_writes": self.wasted,
            "maxwritten_clean": self.maxwritten, "backend_writes": self.backend_writes,
            "bgwriter_writes": self.bgwriter_writes, "bgwriter": self.why,
            "rate": self.rate, "waits": self.waits,
            "checkpoints": self.checkpoints, "checkpoint_sync_s": self.checkpoint_sync_s,
            "longest_sync_s": self.longest_sync_s,
        })
    }
}

/// The workloads of table 1, in order (the max runs set the others' rates).
const WORKLOADS: [&str; 3] = ["max", "steady", "bursty"];

/// The bgwriter strategies of table 2 (round cost).
const ROUND_STRATEGIES: [&str; 2] = ["lru", "dirty-chain"];

/// What the TPC-B runs share.
struct Bed<'a> {
    o: &'a Settings,
    template: &'a Template,
    /// Every run's knobs, before its configuration's.
    base: Vec<(String, String)>,
}

/// Runs the experiment: table 1 (TPC-B per workload and configuration), table 2 (round
/// cost per pool), the targets.
pub fn run(a: &Args, r: &mut Runner) -> Result<Report> {
    let o = Settings::new(a, &r.common)?;
    r.use_device(&a.device)?;
    r.set_io(if o.io_direct { "O_DIRECT" } else { "buffered" });
    // The template: loaded once with buffered I/O (a load through O_DIRECT on a throttled
    // device would cost an I/O per page), copied for every run.
    let template = r.template(o.scale, false, &[])?;
    let on_off = if o.io_direct { "on" } else { "off" };
    let bed = Bed {
        o: &o,
        template: &template,
        base: knobs(&[
            (
                "shared_buffers",
                format!("{}MB", template.quarter_pool_mb()).as_str(),
            ),
            ("synchronous_commit", "off"),
            ("checkpoint_timeout", o.checkpoint_timeout.as_str()),
            ("io_direct", on_off),
        ]),
    };
    let mut rows: Vec<Row> = Vec::new();
    r.plan(steps(&o));
    for workload in WORKLOADS {
        let max_off_tps = max_off_tps(&rows);
        let mut chosen = configs();
        chosen.retain(|(name, _)| o.runs(name, workload));
        for ((name, cfg_knobs), repeat) in schedule(&chosen, o.repeats, |(n, _)| paired(n)) {
            let run = Run {
                workload,
                clients: o.clients,
                name,
                knobs: cfg_knobs,
                repeat,
                max_off_tps,
            };
            rows.push(measure(r, &bed, &run)?);
        }
    }
    rows.extend(client_sweep(r, &bed, max_off_tps(&rows))?);
    r.release_device();
    // Table 2: round cost by pool size.
    let mut round_rows = Vec::new();
    for strategy in ROUND_STRATEGIES {
        for pool in &o.round_pools {
            r.step(format!("round cost, {strategy}, pool {pool}"));
            let c = round_cost(&r.scratch().join("rounds"), pool, strategy, o.rounds)?;
            round_rows.push((strategy, pool.clone(), c));
        }
    }
    Ok(report(r, &bed, &rows, &round_rows))
}

/// The steps of a run: table 1's TPC-B runs (each workload's schedule, then the client
/// sweep), `--seconds` each, then table 2's round costs (a strategy and pool each).
fn steps(o: &Settings) -> Steps {
    let configs = configs();
    let table1: usize = WORKLOADS
        .iter()
        .map(|w| {
            let chosen: Vec<_> = configs.iter().filter(|(n, _)| o.runs(n, w)).collect();
            schedule(&chosen, o.repeats, |(n, _)| paired(n)).len()
        })
        .sum();
    let sweep = o.sweep.len() * configs.iter().filter(|(n, _)| o.sweeps(n)).count();
    Steps::new()
        .timed(table1 + sweep, o.seconds as f64)
        .untimed(ROUND_STRATEGIES.len() * o.round_pools.len())
}

/// The max runs' median TPS with the bgwriter off (0 before they ran): the steady rate
/// and the bursty profile's peak follow from it.
fn max_off_tps(rows: &[Row]) -> f64 {
    let off: Vec<f64> = rows
        .iter()
        .filter(|r| r.workload == "max" && r.config == "off")
        .map(|r| r.tps)
        .collect();
    if off.is_empty() {
        0.0
    } else {
        summarize(&off).median
    }
}

/// Seed 000's client sweep: the max workload at each `--sweep-clients` count, `off` and
/// the sweep's configurations, once each.
fn client_sweep(r: &Runner, bed: &Bed, max_off_tps: f64) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &(clients, workload) in &bed.o.sweep {
        for (name, cfg_knobs) in configs().iter().filter(|(n, _)| bed.o.sweeps(n)) {
            let run = Run {
                workload,
                clients,
                name,
                knobs: cfg_knobs,
                repeat: 0,
                max_off_tps,
            };
            rows.push(measure(r, bed, &run)?);
        }
    }
    Ok(rows)
}

/// One TPC-B run of table 1.
struct Run<'a> {
    workload: &'static str,
    clients: u32,
    name: &'static str,
    knobs: &'a [(&'static str, &'static str)],
    repeat: usize,
    max_off_tps: f64,
}

/// What a run of `workload` asks of the clients: steady, a Poisson rate of
/// [`STEADY_OF_MAX`] times `max_off_tps`; bursty, a wave from 0.3 to 0.8 of it with
/// spikes and a batch every sixth of the run; max, as fast as they go.
fn workload_options(o: &Settings, run: &Run, opts: BenchOptions) -> BenchOptions {
    let peak = run.max_off_tps.max(10.0);
    match run.workload {
        "steady" => {
            let mut opts = opts;
            opts.driver.rate = Some((STEADY_OF_MAX * run.max_off_tps).max(10.0).round());
            opts
        }
        "bursty" => opts.seed000_bursty(peak, o.seconds, o.scale),
        _ => opts,
    }
}

/// One run on a fresh copy of the template.
fn measure(r: &Runner, bed: &Bed, run: &Run) -> Result<Row> {
    let (o, workload, name) = (bed.o, run.workload, run.name);
    let dir = r.fresh_copy(bed.template, &format!("{workload}-{name}"))?;
    let mut sets = bed.base.clone();
    sets.extend(knobs(run.knobs));
    let opts = BenchOptions::tpcb(run.clients, o.seconds, name, r.stop());
    let opts = workload_options(o, run, opts);
    let rate = opts.driver.rate;
    let of = if paired(name) { o.repeats.max(1) } else { 1 };
    r.step(format!(
        "{workload} / {name} (run {} of {of}): {} clients, {} s",
        run.repeat + 1,
        run.clients,
        o.seconds
    ));
    let out = run_tpcb(&dir, &sets, opts).with_context(|| format!("{workload} / {name}"))?;
    let mut row = Row::new(name, workload, run.repeat, &out);
    row.rate = rate;
    r.progress(format!(
        "{workload} / {name}: {:.0} tps, backends wrote {:.1}% of {} buffer writes",
        row.tps,
        100.0 * row.backend_share,
        row.backend_writes + row.bgwriter_writes
    ));
    remove_db(&dir);
    Ok(row)
}

/// One row of table 2: strategy, pool, cost.
type RoundRow = (&'static str, String, RoundCost);

/// The targets, from the rows of both tables. One sample per repeat, each the worst
/// workload of that repeat's pairs (default against off): the share and tps over all
/// three workloads, the latency over steady and bursty (at equal work; the max
/// workload's ratio is reported beside, [`max_workload_note`]). The round cost: the last
/// pool's mean round over the first's, for the default strategy.
fn targets(rows: &[Row], round_rows: &[RoundRow]) -> Vec<Ratio> {
    let (mut share, mut tps, mut maxlat) = (Vec::new(), Vec::new(), Vec::new());
    for [dm, ds, db, om, os, ob] in pairs(rows) {
        share.push(dm.backend_share.max(ds.backend_share).max(db.backend_share));
        tps.push((dm.tps / om.tps).min(ds.tps / os.tps).min(db.tps / ob.tps));
        maxlat.push((ds.maxlat_p99 / os.maxlat_p99).max(db.maxlat_p99 / ob.maxlat_p99));
    }
    let mut ratios = Vec::new();
    if !share.is_empty() {
        ratios.push(Ratio::new(
            "backend_write_share",
            &share,
            Goal::AtMost,
            0.05,
        ));
        ratios.push(Ratio::new("tps_vs_off", &tps, Goal::AtLeast, 0.97));
        ratios.push(Ratio::new("maxlat_p99_vs_off", &maxlat, Goal::AtMost, 1.0));
    }
    let lru: Vec<&RoundRow> = round_rows.iter().filter(|r| r.0 == "lru").collect();
    if let (Some(small), Some(big)) = (lru.first(), lru.last()) {
        ratios.push(Ratio::new(
            "round_8g_vs_64m",
            &[big.2.mean_us / small.2.mean_us.max(1e-9)],
            Goal::AtMost,
            1.5,
        ));
    }
    ratios
}

/// Per repeat that has all six, the runs default and off of max, steady and bursty.
fn pairs(rows: &[Row]) -> Vec<[&Row; 6]> {
    let get = |c: &str, w: &str, i: usize| {
        rows.iter()
            .find(|r| r.config == c && r.workload == w && r.repeat == i)
    };
    let repeats = rows.iter().map(|r| r.repeat + 1).max().unwrap_or(0);
    (0..repeats)
        .filter_map(|i| {
            Some([
                get("default", "max", i)?,
                get("default", "steady", i)?,
                get("default", "bursty", i)?,
                get("off", "max", i)?,
                get("off", "steady", i)?,
                get("off", "bursty", i)?,
            ])
        })
        .collect()
}

/// The max workload's ratios (not targets), as a note; None without pairs.
fn max_workload_note(rows: &[Row]) -> Option<String> {
    let pairs = pairs(rows);
    let lat: Vec<f64> = pairs
        .iter()
        .map(|[dm, .., om, _, _]| dm.maxlat_p99 / om.maxlat_p99)
        .collect();
    let tps: Vec<f64> = pairs
        .iter()
        .map(|[dm, .., om, _, _]| dm.tps / om.tps)
        .collect();
    if lat.is_empty() {
        return None;
    }
    let (l, t) = (summarize(&lat), summarize(&tps));
    Some(format!(
        "max workload (clients as fast as they go, not a target): tps {:.3}x off (min {:.3}, max {:.3}), per-second max latency p99 {:.3}x off (min {:.3}, max {:.3})",
        t.median, t.min, t.max, l.median, l.min, l.max
    ))
}

/// The report: tables 1, 3 and 2, the targets, the metadata.
fn report(r: &mut Runner, bed: &Bed, rows: &[Row], round_rows: &[RoundRow]) -> Report {
    let o = bed.o;
    r.notes.extend(max_workload_note(rows));
    let lru: Vec<&RoundRow> = round_rows.iter().filter(|r| r.0 == "lru").collect();
    if let (Some(small), Some(big)) = (lru.first(), lru.last()) {
        if !(small.1.eq_ignore_ascii_case("64MB") && big.1.eq_ignore_ascii_case("8GB")) {
            r.notes.push(format!(
                "round_8g_vs_64m compares {} with {} (--round-pools)",
                big.1, small.1
            ));
        }
    }
    let pool_mb = bed.template.quarter_pool_mb();
    let mut metadata = r.metadata();
    metadata.insert(
        "runs".into(),
        rows.iter().map(Row::json).collect::<Vec<_>>().into(),
    );
    metadata.insert(
        "round_cost".into(),
        round_rows
            .iter()
            .map(|(s, p, c)| c.json(s, p))
            .collect::<Vec<_>>()
            .into(),
    );
    metadata.insert(
        "settings".into(),
        json!({"scale": o.scale, "clients": o.clients, "seconds": o.seconds, "pool_mb": pool_mb,
               "repeats": o.repeats.max(1), "steady_rate_of_max": STEADY_OF_MAX,
               "synchronous_commit": "off", "checkpoint_timeout": o.checkpoint_timeout}),
    );
    Report {
        header: r.header(&r.device_line()),
        figures: Vec::new(),
        ratios: targets(rows, round_rows),
        metadata,
        notes: Vec::new(),
        tables: vec![
            runs_table(r, bed, rows),
            waits_table(rows),
            rounds_table(o, round_rows),
        ],
    }
}

/// Table 1 with its title.
fn runs_table(r: &Runner, bed: &Bed, rows: &[Row]) -> String {
    let o = bed.o;
    let mut t1 = format!(
        "TPC-B, scale {}, pool {} MB (a quarter of {:.0} MB), {} clients, {} s per run, synchronous_commit off, device: {}, {}\n",
        o.scale,
        bed.template.quarter_pool_mb(),
        bed.template.bytes as f64 / 1048576.0,
        o.clients,
        o.seconds,
        r.device_desc(),
        r.io(),
    );
    let header = [
        "workload",
        "config",
        "run",
        "tps",
        "backend share",
        "lat p99 ms",
        "lat max ms",
        "max-lat/s p99 ms",
        "bgw writes/s",
        "wasted",
        "maxwritten",
        "ckpts / sync s",
    ];
    let mut cells: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    cells.extend(rows.iter().map(Row::cells));
    t1.push_str(&layout(&cells, 2));
    if let Some(r) = rows.iter().find_map(|r| r.rate) {
        t1.push_str(&format!(
            "steady: -R {r:.0} ({STEADY_OF_MAX} of the max workload's median with the bgwriter off); latency counts from each transaction's scheduled start\n"
        ));
    }
    t1
}

/// Table 3: what the slow transactions waited for.
fn waits_table(rows: &[Row]) -> String {
    let mut t3 = String::from(
        "What the transactions over 10 ms (from their start) waited for, by run: shares of their wall time (bufpool's wait totals; on CPU and runnable from the kernel's schedstat)\n",
    );
    let mut cells: Vec<Vec<String>> = vec![["workload", "config", "run", "over 10 ms from start"]
        .iter()
        .map(|s| s.to_string())
        .collect()];
    for r in rows {
        cells.push(vec![
            r.workload.into(),
            r.config.into(),
            (r.repeat + 1).to_string(),
            r.slow_waits.clone(),
        ]);
    }
    t3.push_str(&layout(&cells, 4));
    t3
}

/// Table 2: round cost by pool.
fn rounds_table(o: &Settings, round_rows: &[RoundRow]) -> String {
    let mut t2 = format!(
        "Round cost: {} timed rounds after as many warm-up ones, each after 2,000 allocations and 400 re-dirtied pages, bgwriter_lru_maxpages 1000; 20% of the pool dirty at the start\n",
        o.rounds
    );
    let mut cells: Vec<Vec<String>> = vec![[
        "strategy",
        "pool",
        "buffers",
        "round mean µs",
        "round max µs",
        "scanned/round",
        "written/round",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()];
    for (s, pool, r) in round_rows {
        cells.push(vec![
            s.to_string(),
            pool.clone(),
            r.nbuffers.to_string(),
            format!("{:.0}", r.mean_us),
            format!("{:.0}", r.max_us),
            format!("{:.0}", r.scanned),
            format!("{:.0}", r.written),
        ]);
    }
    t2.push_str(&layout(&cells, 2));
    t2
}

/// What table 2 measured for one pool and strategy.
#[derive(Debug, Clone, Copy)]
struct RoundCost {
    nbuffers: usize,
    mean_us: f64,
    max_us: f64,
    scanned: f64,
    written: f64,
}

impl RoundCost {
    /// Its entry in the metadata's `round_cost`.
    fn json(&self, strategy: &str, pool: &str) -> serde_json::Value {
        json!({"strategy": strategy, "pool": pool, "nbuffers": self.nbuffers,
               "round_us_mean": self.mean_us, "round_us_max": self.max_us,
               "scanned_per_round": self.scanned, "written_per_round": self.written})
    }
}

/// Fills a pool of `pool` with zeroed pages (20% dirty), then times `rounds` bgwriter
/// rounds, each after 2,000 allocations and 400 re-dirtied pages.
fn round_cost(dir: &Path, pool: &str, strategy: &str, rounds: usize) -> Result<RoundCost> {
    const ALLOCS: u32 = 2_000;
    const REDIRTY: usize = 400;
    let p = round_pool(dir, pool, strategy)?;
    let n = p.nbuffers();
    let mut blocks = Blocks {
        pool: &p,
        // Relations of at most one segment (1 GiB of 8 KiB pages), so that writes of any
        // block land in an existing file.
        per_rel: (1u32 << 30) / p.page_size() as u32,
        rels: Vec::new(),
    };
    let mut rng = SmallRng::seed_from_u64(0xb9_0000_0001);
    let t = Instant::now();
    let resident = n as u64 - u64::from(ALLOCS);
    for i in 0..resident {
        let b = p.read_zeroed(blocks.tag(i)?)?;
        if rng.random_bool(0.2) {
            let mut g = b.write();
            bufpool::page::init(&mut g, 0);
            g.mark_dirty();
        }
    }
    progress(format!(
        "bgwriter: filled {n} buffers in {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    let mut next = resident;
    let mut samples = Vec::new();
    let (mut scanned, mut written) = (0u64, 0u64);
    for round in 0..2 * rounds {
        for _ in 0..ALLOCS {
            let b = p.read_zeroed(blocks.tag(next)?)?;
            next += 1;
            let mut g = b.write();
            bufpool::page::init(&mut g, 0);
            if rng.random_bool(0.2) {
                g.mark_dirty();
            }
        }
        for _ in 0..REDIRTY {
            let i = rng.random_range(next.saturating_sub(resident)..next);
            let b = p.read_zeroed(blocks.tag(i)?)?;
            let mut g = b.write();
            bufpool::page::init(&mut g, 0);
            g.mark_dirty();
        }
        let r = p.bgwriter_round();
        if round >= rounds {
            samples.push(r.elapsed.as_secs_f64() * 1e6);
            scanned += r.buffers_scanned;
            written += r.buffers_written + r.mini_checkpoint_written;
        }
    }
    drop(p);
    let _ = std::fs::remove_dir_all(dir);
    let k = samples.len().max(1) as f64;
    Ok(RoundCost {
        nbuffers: n,
        mean_us: samples.iter().sum::<f64>() / k,
        max_us: samples.iter().copied().fold(0.0, f64::max),
        scanned: scanned as f64 / k,
        written: written as f64 / k,
    })
}

/// A bare pool of `pool` in a fresh `dir` with the bgwriter's thread off (rounds are run
/// by hand) and strategy `strategy`.
fn round_pool(dir: &Path, pool: &str, strategy: &str) -> Result<BufferPool> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let mut c = Config::default();
    c.set("shared_buffers", pool)?;
    c.set("bgwriter", "off")?;
    c.set("bgwriter_strategy", strategy)?;
    // The same write cap at every size (the automatic one grows with the pool), so that
    // rounds differ only in what finding their work costs.
    c.set("bgwriter_lru_maxpages", "1000")?;
    let vfs: Arc<dyn Vfs> = Arc::new(RealVfs::new());
    BufferPool::open(vfs, dir, &c, true)
        .with_context(|| format!("opening a {pool} pool in {}", dir.display()))
}

/// Blocks numbered across relations of `per_rel` blocks each, made as they are reached.
struct Blocks<'a> {
    pool: &'a BufferPool,
    per_rel: u32,
    rels: Vec<RelFileId>,
}

impl Blocks<'_> {
    /// The tag of block `i` (its relation created if new).
    fn tag(&mut self, i: u64) -> Result<BufferTag> {
        let r = (i / u64::from(self.per_rel)) as usize;
        while self.rels.len() <= r {
            let rel = RelFileId::new(1, 90_000 + self.rels.len() as u32);
            self.pool.create_relation(rel, ForkNumber::Main)?;
            self.rels.push(rel);
        }
        let block = (i % u64::from(self.per_rel)) as u32;
        Ok(BufferTag::new(self.rels[r], ForkNumber::Main, block))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(config: &'static str, workload: &'static str, repeat: usize, tps: f64) -> Row {
        Row {
            config,
            workload,
            clients: 8,
            repeat,
            tps,
            backend_share: if config == "off" { 1.0 } else { 0.01 },
            lat_p99: 1.0,
            lat_max: 2.0,
            maxlat_p99: if config == "off" { 10.0 } else { 8.0 },
            lat_over_10ms: 0,
            bgw_writes_per_s: 0.0,
            wasted: 0,
            maxwritten: 0,
            backend_writes: 0,
            bgwriter_writes: 0,
            why: serde_json::Value::Null,
            rate: None,
            slow_waits: String::new(),
            waits: serde_json::Value::Null,
            checkpoints: 0,
            checkpoint_sync_s: 0.0,
            longest_sync_s: 0.0,
        }
    }

    fn cost(mean_us: f64) -> RoundCost {
        RoundCost {
            nbuffers: 1,
            mean_us,
            max_us: mean_us,
            scanned: 0.0,
            written: 0.0,
        }
    }

    /// Each repeat's sample is its worst workload; a repeat missing a run is left out;
    /// the round cost compares the last lru pool with the first.
    #[test]
    fn targets_take_the_worst_workload_of_each_repeat() {
        let mut rows = Vec::new();
        for (i, default_tps) in [[100.0, 99.0, 95.0], [100.0, 100.0, 100.0]]
            .into_iter()
            .enumerate()
        {
            for (w, tps) in WORKLOADS.into_iter().zip(default_tps) {
                rows.push(row("off", w, i, 100.0));
                rows.push(row("default", w, i, tps));
            }
        }
        rows.push(row("default", "max", 2, 1.0));
        let rounds = [
            ("lru", "64MB".to_string(), cost(10.0)),
            ("dirty-chain", "64MB".to_string(), cost(1.0)),
            ("lru", "8GB".to_string(), cost(12.0)),
        ];
        let t = targets(&rows, &rounds);
        let got: Vec<(&str, f64, f64)> = t.iter().map(|r| (r.name, r.min, r.max)).collect();
        assert_eq!(
            got,
            [
                ("backend_write_share", 0.01, 0.01),
                ("tps_vs_off", 0.95, 1.0),
                ("maxlat_p99_vs_off", 0.8, 0.8),
                ("round_8g_vs_64m", 1.2, 1.2),
            ]
        );
        assert!(t.iter().all(|r| r.pass), "tps median 0.975 >= 0.97");
        assert!(targets(&rows[..6], &[]).len() == 3 && targets(&[], &[]).is_empty());
        assert!(max_workload_note(&rows).is_some() && max_workload_note(&[]).is_none());
    }

    #[test]
    fn only_chosen_configurations_run_and_max_runs_only_the_pair() {
        let mut o = Settings {
            seconds: 1,
            scale: 1,
            clients: 1,
            io_direct: false,
            round_pools: Vec::new(),
            rounds: 1,
            only: vec!["dirty-chain".into()],
            repeats: 1,
            checkpoint_timeout: "1h".into(),
            sweep: vec![SWEEP[0]],
            sweep_configs: vec!["seed000-bg2".into()],
        };
        assert!(o.runs("off", "max") && !o.runs("default", "steady"));
        assert!(o.runs("dirty-chain", "steady") && !o.runs("dirty-chain", "max"));
        o.only.clear();
        assert!(o.runs("default", "max") && o.runs("threads", "bursty"));
        assert!(o.sweeps("off") && o.sweeps("seed000-bg2") && !o.sweeps("default"));
    }

    #[test]
    fn the_client_sweep_takes_the_listed_counts_and_refuses_others() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            a: Args,
        }
        let common = |quick| Common {
            json: false,
            repeats: 3,
            dir: None,
            quick,
        };
        let parse = |s: &str| {
            Cli::try_parse_from(["x"].into_iter().chain(s.split(' ')))
                .unwrap()
                .a
        };
        let o = Settings::new(&parse("--sweep-clients 1,8"), &common(true)).unwrap();
        assert_eq!(o.sweep, vec![(1, "max-c1"), (8, "max-c8")]);
        assert_eq!(o.sweep_configs, vec!["default".to_string()]);
        let err = Settings::new(&parse("--sweep-clients 3"), &common(true)).unwrap_err();
        assert!(err.to_string().contains("--sweep-clients"), "{err}");
        let err = Settings::new(&parse("--sweep-configs nope"), &common(true)).unwrap_err();
        assert!(err.to_string().contains("--sweep-configs"), "{err}");
    }
}
