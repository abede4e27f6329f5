//! `bufpool experiment bgwriter` (issue 12, seed 000): does the background writer keep
//! clean buffers ready, at what cost, and is a round's cost independent of the pool's size?
//!
//! Table 1, TPC-B: one run per configuration and workload, all in this process, each on a
//! fresh copy of one template database (pool a quarter of the data, 8 clients,
//! synchronous_commit off so that buffer writes, not WAL flushes, are what the clients
//! wait on; checkpoint_timeout 1 h so no checkpoint runs inside the measured minute: the
//! bgwriter and the backends are the only writers). Configurations: bgwriter off; the
//! default; PostgreSQL 15's defaults (lru_maxpages 100, multiplier 2.0, delay 200 ms);
//! seed 004's setting (delay 10 ms, lru_maxpages 1000); the three alternatives of seed
//! 000 (dirty-chain, mini-checkpoint, victim-queue). Workloads: max (clients as fast as
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

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::device::{copy_dir, dir_bytes, SlowDevice};
use super::{layout, progress, summarize, Goal, Ratio, Report, RunInfo};
use crate::commands::{run_bench, BenchArgs};
use crate::tpcb::run::RunOutcome;
use bufpool::{BufferPool, BufferTag, Config, ForkNumber, RealVfs, RelFileId, Vfs};

/// The steady workload's rate as a share of what the bgwriter-off configuration can do
/// (the max workload's median): loaded, with headroom for the machine's noise, like a
/// server run at 70% of its capacity.
const STEADY_OF_MAX: f64 = 0.7;

/// What `bufpool experiment bgwriter` was asked to do.
#[derive(Debug, Clone)]
pub struct BgwExpOptions {
    pub parent_dir: PathBuf,
    pub command: Vec<String>,
    /// Seconds per TPC-B run.
    pub seconds: u64,
    pub scale: u32,
    pub clients: u32,
    /// `local`, or a scripts/slow-device.sh profile.
    pub device: String,
    pub io_direct: bool,
    /// Pools of the round-cost table.
    pub round_pools: Vec<String>,
    /// Rounds timed per pool and strategy (after as many warm-up rounds).
    pub rounds: usize,
    /// Only these configurations of table 1 (empty: all), `off` always included.
    pub only: Vec<String>,
    /// Runs of `off` and `default` per workload (interleaved, so drift hits both alike);
    /// the targets are medians over the pairs. The other configurations run once.
    pub repeats: usize,
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
    ]
}

/// One TPC-B run's figures (table 1).
#[derive(Debug, Clone)]
struct Row {
    config: &'static str,
    workload: &'static str,
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
}

impl Row {
    fn new(config: &'static str, workload: &'static str, repeat: usize, o: &RunOutcome) -> Row {
        let r = &o.result;
        let b = r.bgwriter.clone().unwrap_or_default();
        Row {
            config,
            workload,
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
                .map(|w| crate::tpcb::waits::describe(&w.over_10ms))
                .unwrap_or_default(),
            waits: r
                .waits
                .as_ref()
                .and_then(|w| serde_json::to_value(w).ok())
                .unwrap_or(serde_json::Value::Null),
        }
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "config": self.config, "workload": self.workload, "repeat": self.repeat,
            "tps": self.tps,
            "backend_write_share": self.backend_share, "latency_p99_ms": self.lat_p99,
            "latency_max_ms": self.lat_max, "per_second_max_latency_p99_ms": self.maxlat_p99,
            "latency_over_10ms": self.lat_over_10ms,
            "bgwriter_writes_per_s": self.bgw_writes_per_s, "wasted_writes": self.wasted,
            "maxwritten_clean": self.maxwritten, "backend_writes": self.backend_writes,
            "bgwriter_writes": self.bgwriter_writes, "bgwriter": self.why,
            "rate": self.rate, "waits": self.waits,
        })
    }
}

fn bench_args(
    dir: &Path,
    o: &BgwExpOptions,
    sets: Vec<(String, String)>,
    label: &str,
) -> BenchArgs {
    BenchArgs {
        label: Some(label.to_string()),
        ..BenchArgs::tpcb(dir, o.clients, o.seconds, sets)
    }
}

/// Runs the experiment.
pub fn run(o: &BgwExpOptions) -> Result<Report> {
    if let Some(bad) = o
        .only
        .iter()
        .find(|c| !configs().iter().any(|(n, _)| n == c))
    {
        anyhow::bail!(
            "--bgw-configs: no configuration {bad:?} (one of: {})",
            configs()
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    std::fs::create_dir_all(&o.parent_dir)
        .with_context(|| format!("creating {}", o.parent_dir.display()))?;
    let scratch = tempfile::Builder::new()
        .prefix("bgwriter-")
        .tempdir_in(&o.parent_dir)?;
    let mut notes = Vec::new();
    let (device, device_desc) =
        SlowDevice::choose("bgwriter", &o.device, scratch.path(), &mut notes)?;
    let data_root = match &device {
        Some(d) => d.mount.join("bufpool"),
        None => scratch.path().join("data"),
    };
    std::fs::create_dir_all(&data_root)?;
    let io = if o.io_direct { "O_DIRECT" } else { "buffered" };

    // The template: loaded once with buffered I/O (a load through O_DIRECT on a throttled
    // device would cost an I/O per page), copied for every run.
    let template = data_root.join("template");
    progress(format!("bgwriter: loading a scale-{} template", o.scale));
    crate::commands::init(&template, o.scale, 100, &[], &[])?;
    let data = dir_bytes(&template);
    let pool_mb = (data / 4 / (1 << 20)).max(16);
    let base: Vec<(String, String)> = [
        ("shared_buffers", format!("{pool_mb}MB")),
        ("synchronous_commit", "off".to_string()),
        ("checkpoint_timeout", "1h".to_string()),
        (
            "io_direct",
            if o.io_direct { "on" } else { "off" }.to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let mut rows: Vec<Row> = Vec::new();
    let accounts = u64::from(o.scale) * crate::tpcb::ACCOUNTS_PER_SCALE;
    let repeats = o.repeats.max(1);
    for workload in ["max", "steady", "bursty"] {
        // The steady rate and the bursty profile's peak: the max runs' median with the
        // bgwriter off.
        let off: Vec<f64> = rows
            .iter()
            .filter(|r| r.workload == "max" && r.config == "off")
            .map(|r| r.tps)
            .collect();
        let max_off_tps = if off.is_empty() {
            0.0
        } else {
            summarize(&off).median
        };
        for (repeat, (name, knobs)) in
            (0..repeats).flat_map(|i| configs().into_iter().map(move |c| (i, c)))
        {
            if !o.only.is_empty() && name != "off" && !o.only.iter().any(|c| c == name) {
                continue;
            }
            if repeat > 0 && name != "off" && name != "default" {
                continue;
            }
            if workload == "max" && name != "off" && name != "default" {
                continue;
            }
            let dir = data_root.join(format!("{workload}-{name}"));
            copy_dir(&template, &dir)?;
            if let Some(d) = &device {
                d.settle()?;
            }
            let mut sets = base.clone();
            sets.extend(knobs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            let mut args = bench_args(&dir, o, sets, name);
            if workload == "steady" {
                args.rate = Some((STEADY_OF_MAX * max_off_tps).max(10.0).round());
            }
            if workload == "bursty" {
                let peak = max_off_tps.max(10.0);
                args.rate_profile = Some(format!(
                    "period={}s,low={:.0},high={:.0},spike=0.05,spike-factor=1.5",
                    (o.seconds / 3).max(2),
                    0.3 * peak,
                    0.8 * peak
                ));
                args.batch_every = Some((o.seconds / 6).max(1));
                args.batch_rows = Some((accounts / 100).max(100));
            }
            progress(format!(
                "bgwriter: {workload} / {name} (run {} of {}): {} clients, {} s",
                repeat + 1,
                if name == "off" || name == "default" {
                    repeats
                } else {
                    1
                },
                o.clients,
                o.seconds
            ));
            let out =
                run_bench(&args, stop.clone()).with_context(|| format!("{workload} / {name}"))?;
            let mut row = Row::new(name, workload, repeat, &out);
            row.rate = args.rate;
            progress(format!(
                "bgwriter: {workload} / {name}: {:.0} tps, backends wrote {:.1}% of {} buffer writes",
                row.tps,
                100.0 * row.backend_share,
                row.backend_writes + row.bgwriter_writes
            ));
            rows.push(row);
            std::fs::remove_dir_all(&dir).ok();
        }
    }
    drop(device);

    // Table 2: round cost by pool size.
    let mut round_rows = Vec::new();
    for strategy in ["lru", "dirty-chain"] {
        for pool in &o.round_pools {
            progress(format!("bgwriter: round cost, {strategy}, pool {pool}"));
            let r = round_cost(&scratch.path().join("rounds"), pool, strategy, o.rounds)?;
            round_rows.push((strategy, pool.clone(), r));
        }
    }
    scratch.close()?;

    // The targets: one sample per repeat, each the worst workload of that repeat's pairs
    // (default against off): the share and tps over all three workloads, the latency over
    // steady and bursty (at equal work; the max workload's ratio is reported beside).
    let get = |c: &str, w: &str, i: usize| {
        rows.iter()
            .find(|r| r.config == c && r.workload == w && r.repeat == i)
    };
    let (mut share, mut tps, mut maxlat, mut max_maxlat, mut max_tps) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..repeats {
        if let (Some(dm), Some(ds), Some(db), Some(om), Some(os), Some(ob)) = (
            get("default", "max", i),
            get("default", "steady", i),
            get("default", "bursty", i),
            get("off", "max", i),
            get("off", "steady", i),
            get("off", "bursty", i),
        ) {
            share.push(dm.backend_share.max(ds.backend_share).max(db.backend_share));
            tps.push((dm.tps / om.tps).min(ds.tps / os.tps).min(db.tps / ob.tps));
            maxlat.push((ds.maxlat_p99 / os.maxlat_p99).max(db.maxlat_p99 / ob.maxlat_p99));
            max_maxlat.push(dm.maxlat_p99 / om.maxlat_p99);
            max_tps.push(dm.tps / om.tps);
        }
    }
    if !max_maxlat.is_empty() {
        let (l, t) = (summarize(&max_maxlat), summarize(&max_tps));
        notes.push(format!(
            "max workload (clients as fast as they go, not a target): tps {:.3}x off (min {:.3}, max {:.3}), per-second max latency p99 {:.3}x off (min {:.3}, max {:.3})",
            t.median, t.min, t.max, l.median, l.min, l.max
        ));
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
    let lru: Vec<&(&str, String, RoundCost)> = round_rows.iter().filter(|r| r.0 == "lru").collect();
    if let (Some(small), Some(big)) = (lru.first(), lru.last()) {
        ratios.push(Ratio::new(
            "round_8g_vs_64m",
            &[big.2.mean_us / small.2.mean_us.max(1e-9)],
            Goal::AtMost,
            1.5,
        ));
        if !(small.1.eq_ignore_ascii_case("64MB") && big.1.eq_ignore_ascii_case("8GB")) {
            notes.push(format!(
                "round_8g_vs_64m compares {} with {} (--round-pools)",
                big.1, small.1
            ));
        }
    }

    let mut t1 = format!(
        "TPC-B, scale {}, pool {pool_mb} MB (a quarter of {:.0} MB), {} clients, {} s per run, synchronous_commit off, device: {device_desc}, {io}\n",
        o.scale,
        data as f64 / 1048576.0,
        o.clients,
        o.seconds
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
    ];
    let mut cells: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in &rows {
        cells.push(vec![
            r.workload.into(),
            r.config.into(),
            (r.repeat + 1).to_string(),
            format!("{:.0}", r.tps),
            format!("{:.1}%", 100.0 * r.backend_share),
            format!("{:.2}", r.lat_p99),
            format!("{:.1}", r.lat_max),
            format!("{:.1}", r.maxlat_p99),
            format!("{:.0}", r.bgw_writes_per_s),
            r.wasted.to_string(),
            r.maxwritten.to_string(),
        ]);
    }
    t1.push_str(&layout(&cells, 2));
    if let Some(r) = rows.iter().find_map(|r| r.rate) {
        t1.push_str(&format!(
            "steady: -R {r:.0} ({STEADY_OF_MAX} of the max workload's median with the bgwriter off); latency counts from each transaction's scheduled start\n"
        ));
    }
    let mut t3 = String::from(
        "What the transactions over 10 ms (from their start) waited for, by run: shares of their wall time (bufpool's wait totals; on CPU and runnable from the kernel's schedstat)\n",
    );
    let mut cells: Vec<Vec<String>> = vec![["workload", "config", "run", "over 10 ms from start"]
        .iter()
        .map(|s| s.to_string())
        .collect()];
    for r in &rows {
        cells.push(vec![
            r.workload.into(),
            r.config.into(),
            (r.repeat + 1).to_string(),
            r.slow_waits.clone(),
        ]);
    }
    t3.push_str(&layout(&cells, 4));
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
    for (s, pool, r) in &round_rows {
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

    let run = RunInfo::new(&o.command);
    let mut metadata = run.metadata("bgwriter", &o.command);
    metadata.insert("device".into(), json!({"profile": device_desc, "io": io}));
    metadata.insert(
        "runs".into(),
        rows.iter().map(Row::json).collect::<Vec<_>>().into(),
    );
    metadata.insert(
        "round_cost".into(),
        round_rows
            .iter()
            .map(|(s, p, r)| {
                json!({"strategy": s, "pool": p, "nbuffers": r.nbuffers, "round_us_mean": r.mean_us,
                       "round_us_max": r.max_us, "scanned_per_round": r.scanned, "written_per_round": r.written})
            })
            .collect::<Vec<_>>()
            .into(),
    );
    metadata.insert(
        "settings".into(),
        json!({"scale": o.scale, "clients": o.clients, "seconds": o.seconds, "pool_mb": pool_mb,
               "repeats": repeats, "steady_rate_of_max": STEADY_OF_MAX,
               "synchronous_commit": "off", "checkpoint_timeout": "1h"}),
    );
    Ok(Report {
        header: format!(
            "{} | profile {} | {} cores | device {device_desc}, {io}",
            run.command, run.profile, run.cores
        ),
        figures: Vec::new(),
        ratios,
        metadata,
        notes,
        tables: vec![t1, t3, t2],
    })
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

/// Fills a pool of `pool` with zeroed pages (20% dirty), then times `rounds` bgwriter
/// rounds, each after 2,000 allocations and 400 re-dirtied pages.
fn round_cost(dir: &Path, pool: &str, strategy: &str, rounds: usize) -> Result<RoundCost> {
    const ALLOCS: u32 = 2_000;
    const REDIRTY: usize = 400;
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
    let p = BufferPool::open(vfs, dir, &c, true)
        .with_context(|| format!("opening a {pool} pool in {}", dir.display()))?;
    let n = p.nbuffers();
    // Relations of at most one segment (1 GiB of 8 KiB pages), so that writes of any
    // block land in an existing file.
    let per_rel = (1u32 << 30) / p.page_size() as u32;
    let mut rels = Vec::new();
    let tag_of = |i: u64, rels: &mut Vec<RelFileId>| -> Result<BufferTag> {
        let r = (i / u64::from(per_rel)) as usize;
        while rels.len() <= r {
            let rel = RelFileId::new(1, 90_000 + rels.len() as u32);
            p.create_relation(rel, ForkNumber::Main)?;
            rels.push(rel);
        }
        Ok(BufferTag::new(
            rels[r],
            ForkNumber::Main,
            (i % u64::from(per_rel)) as u32,
        ))
    };
    let mut rng = SmallRng::seed_from_u64(0xb9_0000_0001);
    let t = Instant::now();
    let resident = n as u64 - u64::from(ALLOCS);
    for i in 0..resident {
        let tag = tag_of(i, &mut rels)?;
        let b = p.read_zeroed(tag)?;
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
            let tag = tag_of(next, &mut rels)?;
            next += 1;
            let b = p.read_zeroed(tag)?;
            let mut g = b.write();
            bufpool::page::init(&mut g, 0);
            if rng.random_bool(0.2) {
                g.mark_dirty();
            }
        }
        for _ in 0..REDIRTY {
            let i = rng.random_range(next.saturating_sub(resident)..next);
            let b = p.read_zeroed(tag_of(i, &mut rels)?)?;
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
