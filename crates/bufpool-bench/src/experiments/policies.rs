//! `bufpool experiment policies`: the replacement policies (`buffer_replacement`) on
//! recorded traces beside Belady's optimum, and live.
//!
//! - Traces: a scale-`--scale` TPC-B template; eight runs of `--seconds` with 2 clients,
//!   synchronous commit off, the pool a quarter of the data (the relations' files, the log
//!   not counted), each recorded with `bench --trace` under the clock: `tpcb` (TPC-B
//!   alone), `tpcb+scan` (a side thread scanning `pgbench_accounts`, larger than the pool,
//!   over and over, rings off: `bulkread_ring_size = 0`), `tpcb+scan-ring` (the same scans
//!   through the bulk-read ring), `bursty` (seed 000's bursty load: a rate wave from 0.3
//!   to 0.8 of the `tpcb` run's tps with spikes, and a batch updating a hundredth of the
//!   accounts every sixth of the run), and YCSB B's mix (95% reads, 5% updates:
//!   `zipf-read-update`) and C's (reads: `zipf-select`) on the accounts through their
//!   B-tree, with Zipfian keys of constant 0.99 and 0.7 (`bench -b zipf-read-update
//!   --zipf-theta 0.7`). Each trace is replayed at a twentieth, a tenth,
//!   a quarter and a half of the data through every policy's own code and Belady's OPT
//!   (`bufpool trace replay`); `--report DIR` draws one chart per trace (miss ratio
//!   against pool size, a line per policy, OPT dashed as the floor) into DIR/index.html.
//! - `scan`: a synthetic trace: a hot set of half the pool, touched 20 times, then a
//!   sequential scan of 4x the pool with one hot-set request per 4 scanned pages; the
//!   share of the hot set still resident after the scan (probes), per policy.
//! - Live: each policy's TPC-B tps at the quarter pool (runs alternate policies,
//!   `--repeats` each) and its hot-hit ns (64 resident pages read in a loop).
//!
//! Targets: `default_miss_vs_best` (the worst, over traces and sizes, of the clock's misses
//! over the best policy's; the JSON's `cases` name the best policy of each) ≤ 1.02; `best_miss_vs_opt` (the worst over traces and sizes of
//! the best policy's misses over OPT's; per trace in the JSON) ≤ 2.0, a bound of ours;
//! `scan_hot_set_kept_no_ring` (the best policy's kept share) ≥ 0.95;
//! `hot_hit_ns_vs_clock` (the worst policy's) ≤ 1.1; `tpcb_quarter_pool_vs_clock` (the
//! best other policy's tps over the clock's, median of the repeats) reported against 1.0.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use bufpool::buffer::replay::{self, ReplayCounts};
use bufpool::buffer::trace::{TraceRecord, PROBE};
use bufpool::buffer::{BufferPool, ReplacementPolicy};
use bufpool::{BufferTag, Config, ForkNumber, RealVfs, RelFileId};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::runner::{Runner, Steps, Template};
use super::{progress, Goal, Ratio, Report, Samples};
use crate::tpcb::builtins::Mode;
use crate::tpcb::side::SideScript;

/// `bufpool experiment policies` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Policies to compare (`buffer_replacement`'s words), comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "clock,sieve,s3fifo,car,2q,cooling"
    )]
    pub policies: Vec<String>,
    /// TPC-B scale of the template (default 10; 2 with --quick).
    #[arg(long)]
    pub scale: Option<u32>,
    /// Seconds of each traced and each live run (default 20; 3 with --quick).
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Writes DIR/index.html with one chart per trace (miss ratio against pool size).
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
}

/// A traced workload.
#[derive(Debug, Clone, Copy)]
struct Workload {
    name: &'static str,
    mode: Mode,
    /// `--zipf-theta` (None: the mode's keys).
    theta: Option<f64>,
    /// The full-scan side script runs beside the clients.
    scan: bool,
    /// Seed 000's bursty load (a rate wave and batches) instead of full speed.
    bursty: bool,
    knobs: &'static [(&'static str, &'static str)],
}

const fn workload(name: &'static str, mode: Mode, theta: Option<f64>) -> Workload {
    Workload {
        name,
        mode,
        theta,
        scan: false,
        bursty: false,
        knobs: &[],
    }
}

const TPCB: Workload = workload("tpcb", Mode::TpcbLike, None);

const WORKLOADS: [Workload; 8] = [
    TPCB,
    Workload {
        name: "tpcb+scan",
        scan: true,
        knobs: &[("bulkread_ring_size", "0")],
        ..TPCB
    },
    Workload {
        name: "tpcb+scan-ring",
        scan: true,
        ..TPCB
    },
    Workload {
        name: "bursty",
        bursty: true,
        ..TPCB
    },
    workload("zipf-read-update 0.99", Mode::ZipfReadUpdate, Some(0.99)),
    workload("zipf-select 0.99", Mode::ZipfSelect, Some(0.99)),
    workload("zipf-read-update 0.7", Mode::ZipfReadUpdate, Some(0.7)),
    workload("zipf-select 0.7", Mode::ZipfSelect, Some(0.7)),
];

/// The replayed pool sizes: name and divisor of the data's pages. Traces are recorded
/// with the quarter.
const SIZES: [(&str, u64); 4] = [
    ("twentieth", 20),
    ("tenth", 10),
    ("quarter", 4),
    ("half", 2),
];
const RECORDED_AT: usize = 2;

/// Pages of the synthetic scan trace's pool.
const SCAN_POOL: u32 = 1024;

struct Plan {
    policies: Vec<ReplacementPolicy>,
    scale: u32,
    seconds: u64,
    repeats: usize,
}

fn plan(a: &Args, r: &Runner) -> Result<Plan> {
    let mut policies = Vec::new();
    for w in &a.policies {
        let p = ReplacementPolicy::ALL
            .into_iter()
            .find(|p| p.name() == w)
            .with_context(|| format!("--policies: no policy {w:?}"))?;
        if !policies.contains(&p) {
            policies.push(p);
        }
    }
    ensure!(
        policies.first() == Some(&ReplacementPolicy::Clock),
        "--policies must start with clock (the default every ratio is taken against)"
    );
    let short = r.common.short();
    Ok(Plan {
        policies,
        scale: a.scale.unwrap_or(if short { 2 } else { 10 }),
        seconds: a.seconds.unwrap_or(if short { 3 } else { 20 }),
        repeats: r.common.repeats_unless_quick(),
    })
}

/// The steps of a run: per workload its traced run (`--seconds`) and its replays; the
/// live runs (a policy and repeat each, `--seconds`); the hot-hit loop.
fn steps(p: &Plan) -> Steps {
    let seconds = p.seconds as f64;
    let traces = WORKLOADS
        .iter()
        .fold(Steps::new(), |s, _| s.timed(1, seconds).untimed(1));
    traces
        .timed(p.repeats * p.policies.len(), seconds)
        .untimed(1)
}

/// One replay: trace, pool size, policy (None: OPT), counts.
struct Replayed {
    workload: &'static str,
    size: &'static str,
    policy: Option<ReplacementPolicy>,
    counts: ReplayCounts,
}

/// Runs the experiment in the runner's scratch folder.
pub fn run(a: &Args, r: &mut Runner) -> Result<Report> {
    let p = plan(a, r)?;
    let tpl = r.template(p.scale, false, &[])?;
    // The relations only (`base/`): the log is not data the pool caches.
    let data_pages = super::device::dir_bytes(&tpl.dir.join("base")) / 8192;
    let sizes = SIZES.map(|(name, div)| (name, (data_pages / div).max(16) as usize));
    let mut replayed = Vec::new();
    let mut traced = Vec::new();
    let mut tpcb_tps = 0.0;
    r.plan(steps(&p));
    for w in WORKLOADS {
        let name = w.name;
        let (records, tps) = record(r, &tpl, sizes[RECORDED_AT].1, &p, w, tpcb_tps)?;
        if w.name == TPCB.name {
            tpcb_tps = tps;
        }
        traced.push(
            json!({"workload": name, "requests": records.len(), "tps": tps,
            "distinct_pages": replay::distinct_pages(&records)}),
        );
        r.step(format!("replaying {name} at {} pool sizes", sizes.len()));
        for (size, n) in sizes {
            progress(format!("policies: replaying {name} at {n} buffers"));
            let opt = replay::optimal(&records, n);
            for &pol in &p.policies {
                let counts = replay::replay(&records, pol, n);
                replayed.push(Replayed {
                    workload: name,
                    size,
                    policy: Some(pol),
                    counts,
                });
            }
            replayed.push(Replayed {
                workload: name,
                size,
                policy: None,
                counts: opt,
            });
        }
    }
    let m = Measured {
        replayed,
        kept: p.policies.iter().map(|&pol| scan_kept(pol)).collect(),
        live: live_tps(r, &tpl, sizes[RECORDED_AT].1, &p)?,
        hits: hot_hits(r, &p)?,
        traced,
    };
    if let Some(dir) = &a.report {
        write_charts(dir, &m.replayed, &r.header(&header(&p)))?;
    }
    Ok(report(r, &p, &m))
}

/// Records one workload's trace under the clock, the pool `pool` buffers, and reads it
/// back, with the run's tps. A bursty run's peak is `tpcb_tps`, the `tpcb` run's.
fn record(
    r: &Runner,
    tpl: &Template,
    pool: usize,
    p: &Plan,
    w: Workload,
    tpcb_tps: f64,
) -> Result<(Vec<TraceRecord>, f64)> {
    r.step(format!("tracing {} ({} s)", w.name, p.seconds));
    let dir = r.fresh_copy(tpl, "trace")?;
    let mut sets = base_sets(pool);
    sets.extend(w.knobs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let mut opts = super::tpcb::bench_options(2, p.seconds, w.name, stop_flag());
    opts.mode = w.mode;
    opts.zipf_theta = w.theta;
    if w.scan {
        opts.side = Some((SideScript::FullScan, SideScript::FullScan.default_pause()));
    }
    if w.bursty {
        let peak = tpcb_tps.max(10.0);
        opts = opts.seed000_bursty(peak, p.seconds, p.scale);
    }
    let path = r.scratch().join("trace.bin");
    let out = crate::cmd::bench::run::run_tpcb_traced(&dir, &sets, opts, Some(&path))?;
    ensure!(
        out.result.failed == 0,
        "{}: {} transactions failed",
        w.name,
        out.result.failed
    );
    let (_, records) = crate::trace::read_trace_file(&path)?;
    std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    Ok((records, out.result.tps))
}

/// A pool of `pool` 8 kB buffers, synchronous commit off.
fn base_sets(pool: usize) -> Vec<(String, String)> {
    vec![
        ("shared_buffers".into(), format!("{}kB", pool * 8)),
        ("synchronous_commit".into(), "off".into()),
    ]
}

fn stop_flag() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}

/// The synthetic scan trace (module doc), replayed through `pol`: the share of the hot
/// set resident after the scan.
fn scan_kept(pol: ReplacementPolicy) -> f64 {
    fn push(t: &mut Vec<TraceRecord>, rel: u32, block: u32, flags: u8) {
        let tag = BufferTag::new(RelFileId::new(0, rel), ForkNumber::Main, block);
        let time_ns = t.len() as u64;
        t.push(TraceRecord {
            tag,
            flags,
            time_ns,
        });
    }
    let hot = SCAN_POOL / 2;
    let mut rng = SmallRng::seed_from_u64(3);
    let mut t = Vec::new();
    for _ in 0..20 * hot {
        push(&mut t, 1, rng.random_range(0..hot), 0);
    }
    for b in 0..4 * SCAN_POOL {
        push(&mut t, 2, b, 0);
        if b % 4 == 3 {
            push(&mut t, 1, rng.random_range(0..hot), 0);
        }
    }
    let without = replay::replay(&t, pol, SCAN_POOL as usize).hits;
    for b in 0..hot {
        push(&mut t, 1, b, PROBE);
    }
    let with = replay::replay(&t, pol, SCAN_POOL as usize).hits;
    (with - without) as f64 / f64::from(hot)
}

/// Each policy's TPC-B tps at the quarter pool, runs alternating policies.
fn live_tps(r: &Runner, tpl: &Template, pool: usize, p: &Plan) -> Result<Vec<Vec<f64>>> {
    let mut tps = vec![Vec::new(); p.policies.len()];
    for rep in 0..p.repeats {
        for (i, pol) in p.policies.iter().enumerate() {
            r.step(format!(
                "live {} rep {}/{} ({} s)",
                pol.name(),
                rep + 1,
                p.repeats,
                p.seconds
            ));
            let dir = r.fresh_copy(tpl, "live")?;
            let mut sets = base_sets(pool);
            sets.push(("buffer_replacement".into(), pol.name().into()));
            let opts = super::tpcb::bench_options(2, p.seconds, pol.name(), stop_flag());
            let out = crate::cmd::bench::run::run_tpcb(&dir, &sets, opts)?;
            ensure!(
                out.result.failed == 0,
                "{}: {} transactions failed",
                pol.name(),
                out.result.failed
            );
            tps[i].push(out.result.tps);
        }
    }
    Ok(tps)
}

/// Each policy's hot-hit ns: 64 resident pages read in a loop (medians of the repeats).
fn hot_hits(r: &Runner, p: &Plan) -> Result<Vec<Vec<f64>>> {
    let ops = if r.common.short() { 200_000 } else { 4_000_000 };
    r.step(format!("hot-hit ns, {ops} reads per policy and repeat"));
    let rel = RelFileId::new(0, 900);
    let mut out = vec![Vec::new(); p.policies.len()];
    let pools = p
        .policies
        .iter()
        .map(|pol| {
            let dir = r.scratch().join(format!("hits-{}", pol.name()));
            let mut c = Config::default();
            c.set("shared_buffers", "8MB")?;
            c.set("buffer_replacement", pol.name())?;
            let pool = BufferPool::open(Arc::new(RealVfs::new()), &dir, &c, true)?;
            pool.create_relation(rel, ForkNumber::Main)?;
            for _ in 0..64 {
                drop(pool.extend(rel, ForkNumber::Main)?);
            }
            Ok(pool)
        })
        .collect::<Result<Vec<_>>>()?;
    let tags: Vec<BufferTag> = (0..64)
        .map(|b| BufferTag::new(rel, ForkNumber::Main, b))
        .collect();
    for _ in 0..p.repeats {
        for (i, pool) in pools.iter().enumerate() {
            let start = Instant::now();
            let mut sum = 0u64;
            for k in 0..ops {
                let buf = pool.read(black_box(tags[k & 63]))?;
                sum = sum.wrapping_add(u64::from(buf.read()[0]));
            }
            black_box(sum);
            out[i].push(start.elapsed().as_nanos() as f64 / ops as f64);
        }
    }
    Ok(out)
}

/// A ratio whose value is the worst of `cases` (the verdict is on it), min and max their
/// range.
fn worst(name: &'static str, cases: &[f64], goal: Goal, target: f64) -> Ratio {
    let (min, max) = cases
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let value = if goal == Goal::AtMost { max } else { min };
    Ratio {
        name,
        median: value,
        min,
        max,
        goal,
        target,
        pass: goal.passes(value, target),
    }
}

/// One (trace, size): its names, the clock's misses over the best policy's, the best
/// policy's over OPT's, and the best policy.
type Case = (&'static str, &'static str, f64, f64, &'static str);

/// The cases of `replayed`, whose replays come `per_case` at a time (the policies, then
/// OPT).
fn replay_ratios(replayed: &[Replayed], per_case: usize) -> Vec<Case> {
    let mut out = Vec::new();
    for case in replayed.chunks(per_case) {
        let misses = |p: Option<ReplacementPolicy>| {
            case.iter()
                .find(|x| x.policy == p)
                .map_or(0, |x| x.counts.misses)
                .max(1) as f64
        };
        let winner = case
            .iter()
            .filter_map(|x| x.policy.map(|p| (p, x.counts.misses)))
            .min_by_key(|&(_, m)| m)
            .map_or(ReplacementPolicy::Clock, |(p, _)| p);
        let best = misses(Some(winner));
        out.push((
            case[0].workload,
            case[0].size,
            misses(Some(ReplacementPolicy::Clock)) / best,
            best / misses(None),
            winner.name(),
        ));
    }
    out
}

fn replay_table(replayed: &[Replayed]) -> String {
    let mut t = String::from("| trace | pool | buffers | policy | requests | miss ratio | misses vs OPT |\n|---|---|---|---|---|---|---|\n");
    for x in replayed {
        let opt = replayed
            .iter()
            .find(|o| o.workload == x.workload && o.size == x.size && o.policy.is_none())
            .map_or(1, |o| o.counts.misses.max(1));
        t.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.4} | {:.3} |\n",
            x.workload,
            x.size,
            x.counts.nbuffers,
            x.policy.map_or("opt", |p| p.name()),
            x.counts.requests(),
            x.counts.miss_ratio(),
            x.counts.misses as f64 / opt as f64
        ));
    }
    t
}

/// Everything measured.
struct Measured {
    replayed: Vec<Replayed>,
    /// Per policy: the synthetic scan's kept share.
    kept: Vec<f64>,
    /// Per policy: live tps and hot-hit ns, one per repeat.
    live: Vec<Vec<f64>>,
    hits: Vec<Vec<f64>>,
    traced: Vec<serde_json::Value>,
}

/// Policy `i`'s per-repeat values over the clock's (policy 0).
fn vs_clock(v: &[Vec<f64>], i: usize) -> Vec<f64> {
    v[i].iter().zip(&v[0]).map(|(a, b)| a / b).collect()
}

/// The live table (tps, hot-hit ns, kept share, each against the clock).
fn live_table(p: &Plan, m: &Measured) -> String {
    let mut t = String::from(
        "| policy | tps median (min-max) | tps vs clock | hot hit ns | vs clock | scan: hot set kept |\n|---|---|---|---|---|---|\n",
    );
    for (i, pol) in p.policies.iter().enumerate() {
        let (tps, h) = (super::summarize(&m.live[i]), super::summarize(&m.hits[i]));
        let tv = super::summarize(&vs_clock(&m.live, i)).median;
        let hv = super::summarize(&vs_clock(&m.hits, i)).median;
        t.push_str(&format!(
            "| {} | {:.0} ({:.0}-{:.0}) | {tv:.3} | {:.2} | {hv:.3} | {:.3} |\n",
            pol.name(),
            tps.median,
            tps.min,
            tps.max,
            h.median,
            m.kept[i]
        ));
    }
    t
}

/// The five targets (module doc).
fn targets(m: &Measured, cases: &[Case]) -> Vec<Ratio> {
    let hit_worst: Vec<f64> = (0..m.hits.len())
        .map(|i| super::summarize(&vs_clock(&m.hits, i)).median)
        .collect();
    let mut s = Samples::default();
    for v in vs_clock(&m.live, 0) {
        s.push("tpcb_quarter_pool_vs_clock", v);
    }
    let col = |f: fn(&Case) -> f64| cases.iter().map(f).collect::<Vec<_>>();
    vec![
        worst("default_miss_vs_best", &col(|c| c.2), Goal::AtMost, 1.02),
        worst("best_miss_vs_opt", &col(|c| c.3), Goal::AtMost, 2.0),
        worst(
            "scan_hot_set_kept_no_ring",
            &[m.kept.iter().copied().fold(0.0, f64::max)],
            Goal::AtLeast,
            0.95,
        ),
        worst("hot_hit_ns_vs_clock", &hit_worst, Goal::AtMost, 1.1),
        s.ratio("tpcb_quarter_pool_vs_clock", Goal::AtLeast, 1.0),
    ]
}

fn metadata(
    r: &Runner,
    p: &Plan,
    m: &Measured,
    cases: &[Case],
) -> serde_json::Map<String, serde_json::Value> {
    let mut md = r.metadata();
    let names: Vec<&str> = p.policies.iter().map(|x| x.name()).collect();
    md.insert("policies".into(), json!(names));
    md.insert("scale".into(), p.scale.into());
    md.insert("seconds".into(), p.seconds.into());
    md.insert("repeats".into(), p.repeats.into());
    md.insert("traces".into(), json!(m.traced));
    let replays: Vec<_> = m
        .replayed
        .iter()
        .map(|x| {
            json!({
                "trace": x.workload, "pool": x.size, "nbuffers": x.counts.nbuffers,
                "policy": x.policy.map_or("opt", |p| p.name()), "hits": x.counts.hits,
                "misses": x.counts.misses, "miss_ratio": x.counts.miss_ratio(),
            })
        })
        .collect();
    md.insert("replays".into(), json!(replays));
    let cases: Vec<_> = cases
        .iter()
        .map(|c| {
            json!({
                "trace": c.0, "pool": c.1, "default_miss_vs_best": c.2, "best_miss_vs_opt": c.3,
                "best_policy": c.4,
            })
        })
        .collect();
    md.insert("cases".into(), json!(cases));
    let live: Vec<_> = names.iter().enumerate().map(|(i, x)| json!({
        "policy": x, "tps": m.live[i], "hot_hit_ns": m.hits[i], "scan_hot_set_kept": m.kept[i],
    })).collect();
    md.insert("live".into(), json!(live));
    md
}

fn header(p: &Plan) -> String {
    format!(
        "scale {} | {} s runs, 2 clients, synchronous_commit off | repeats {}",
        p.scale, p.seconds, p.repeats
    )
}

/// `--report DIR`: one chart per trace (miss ratio against pool size, a line per policy,
/// OPT dashed) and DIR/index.html showing them.
fn write_charts(dir: &std::path::Path, replayed: &[Replayed], header: &str) -> Result<()> {
    use crate::report::charts::{miss_ratio_chart, MissLine};
    use crate::report::html::escape;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Replacement policies</title></head><body>\n<h1>Replacement policies: miss ratio against pool size</h1>\n<p>{}</p>\n",
        escape(header)
    );
    for w in WORKLOADS {
        let of_trace: Vec<&Replayed> = replayed.iter().filter(|x| x.workload == w.name).collect();
        let mut names: Vec<Option<ReplacementPolicy>> = Vec::new();
        for x in &of_trace {
            if !names.contains(&x.policy) {
                names.push(x.policy);
            }
        }
        // OPT last (drawn as the floor).
        names.sort_by_key(Option::is_none);
        let lines: Vec<MissLine> = names
            .iter()
            .map(|&pol| MissLine {
                name: pol.map_or("OPT", |p| p.name()).to_string(),
                points: of_trace
                    .iter()
                    .filter(|x| x.policy == pol)
                    .map(|x| (x.counts.nbuffers as f64, x.counts.miss_ratio()))
                    .collect(),
            })
            .collect();
        let svg = miss_ratio_chart(&format!("{}: miss ratio by pool size", w.name), &lines)?;
        let file = format!("policies-{}.svg", w.name.replace([' ', '+', '.'], "-"));
        let path = dir.join(&file);
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
        html.push_str(&format!(
            "<h2>{}</h2>\n<img src=\"{file}\" alt=\"Miss ratio of each policy and of OPT against pool size, trace {}\">\n",
            escape(w.name),
            escape(w.name)
        ));
    }
    html.push_str("</body></html>\n");
    let index = dir.join("index.html");
    std::fs::write(&index, html).with_context(|| format!("writing {}", index.display()))?;
    progress(format!("policies: charts in {}", index.display()));
    Ok(())
}

/// Which policy has the fewest misses in each (trace, pool size).
fn winners_table(cases: &[Case]) -> String {
    let mut t = String::from(
        "| trace | pool | best policy | clock vs best | best vs OPT |\n|---|---|---|---|---|\n",
    );
    for c in cases {
        t.push_str(&format!(
            "| {} | {} | {} | {:.3} | {:.3} |\n",
            c.0, c.1, c.4, c.2, c.3
        ));
    }
    t
}

fn report(r: &Runner, p: &Plan, m: &Measured) -> Report {
    let cases = replay_ratios(&m.replayed, p.policies.len() + 1);
    Report {
        header: r.header(&header(p)),
        figures: Vec::new(),
        ratios: targets(m, &cases),
        metadata: metadata(r, p, m, &cases),
        tables: vec![
            replay_table(&m.replayed),
            winners_table(&cases),
            live_table(p, m),
        ],
        notes: vec![
            "traces recorded under the clock with the pool a quarter of the data; replays \
             model one shared ring, no overlapping pins, dirtiness or bgwriter"
                .into(),
            "default_miss_vs_best, best_miss_vs_opt, hot_hit_ns_vs_clock: the worst case is \
             the value; scan_hot_set_kept_no_ring: the best policy's"
                .into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_resistance_is_measured_by_probes_after_the_scan() {
        for pol in ReplacementPolicy::ALL {
            let k = scan_kept(pol);
            assert!((0.0..=1.0).contains(&k), "{pol:?}: {k}");
        }
        let r = worst("x", &[1.0, 1.5, 1.2], Goal::AtMost, 1.4);
        assert_eq!((r.median, r.min, r.pass), (1.5, 1.0, false));
        let r = worst("y", &[0.97, 0.99], Goal::AtLeast, 0.95);
        assert_eq!((r.median, r.pass), (0.97, true));
    }
}
