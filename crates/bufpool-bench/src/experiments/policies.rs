//! `bufpool experiment policies`: the replacement policies (`buffer_replacement`) on
//! recorded traces beside Belady's optimum, and live.
//!
//! - Traces: a scale-`--scale` TPC-B template; three runs of `--seconds` with 2 clients,
//!   synchronous commit off, the pool a quarter of the data (the relations' files, the log
//!   not counted), each recorded with
//!   `bench --trace` under the clock: `tpcb` (TPC-B alone), `tpcb+scan` (a side thread
//!   scanning `pgbench_accounts`, larger than the pool, over and over, rings off:
//!   `bulkread_ring_size = 0`) and `tpcb+scan-ring` (the same scans through the bulk-read
//!   ring). Each trace is replayed at a quarter and a tenth of the data through every
//!   policy's own code and Belady's OPT (`bufpool trace replay`).
//! - `scan`: a synthetic trace: a hot set of half the pool, touched 20 times, then a
//!   sequential scan of 4x the pool with one hot-set request per 4 scanned pages; the
//!   share of the hot set still resident after the scan (probes), per policy.
//! - Live: each policy's TPC-B tps at the quarter pool (runs alternate policies,
//!   `--repeats` each) and its hot-hit ns (64 resident pages read in a loop).
//!
//! Targets: `default_miss_vs_best` (the worst, over traces and sizes, of the clock's misses
//! over the best policy's) ≤ 1.02; `best_miss_vs_opt` (the worst over traces and sizes of
//! the best policy's misses over OPT's; per trace in the JSON) ≤ 2.0, a bound of ours;
//! `scan_hot_set_kept_no_ring` (the best policy's kept share) ≥ 0.95;
//! `hot_hit_ns_vs_clock` (the worst policy's) ≤ 1.1; `tpcb_quarter_pool_vs_clock` (the
//! best other policy's tps over the clock's, median of the repeats) reported against 1.0.

use std::hint::black_box;
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

use super::runner::{Runner, Template};
use super::{progress, Goal, Ratio, Report, Samples};
use crate::tpcb::side::SideScript;

/// `bufpool experiment policies` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Policies to compare (`buffer_replacement`'s words), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "clock,sieve,s3fifo")]
    pub policies: Vec<String>,
    /// TPC-B scale of the template (default 10; 2 with --quick).
    #[arg(long)]
    pub scale: Option<u32>,
    /// Seconds of each traced and each live run (default 20; 3 with --quick).
    #[arg(long)]
    pub seconds: Option<u64>,
}

/// A traced workload: name, whether the full-scan side script runs, extra knobs.
type Workload = (&'static str, bool, &'static [(&'static str, &'static str)]);

const WORKLOADS: [Workload; 3] = [
    ("tpcb", false, &[]),
    ("tpcb+scan", true, &[("bulkread_ring_size", "0")]),
    ("tpcb+scan-ring", true, &[]),
];

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
    let sizes = [
        ("quarter", (data_pages / 4).max(16) as usize),
        ("tenth", (data_pages / 10).max(16) as usize),
    ];
    let mut replayed = Vec::new();
    let mut traced = Vec::new();
    for (name, scan, extra) in WORKLOADS {
        let records = record(r, &tpl, sizes[0].1, &p, (name, scan, extra))?;
        traced.push(json!({"workload": name, "requests": records.len(),
            "distinct_pages": replay::distinct_pages(&records)}));
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
        live: live_tps(r, &tpl, sizes[0].1, &p)?,
        hits: hot_hits(r, &p)?,
        traced,
    };
    Ok(report(r, &p, &m))
}

/// Records one workload's trace under the clock, the pool `pool` buffers, and reads it
/// back.
fn record(
    r: &Runner,
    tpl: &Template,
    pool: usize,
    p: &Plan,
    (name, scan, extra): Workload,
) -> Result<Vec<TraceRecord>> {
    progress(format!("policies: tracing {name} ({} s)", p.seconds));
    let dir = r.fresh_copy(tpl, "trace")?;
    let mut sets = base_sets(pool);
    sets.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let mut opts = super::tpcb::bench_options(2, p.seconds, name, stop_flag());
    if scan {
        opts.side = Some((SideScript::FullScan, SideScript::FullScan.default_pause()));
    }
    let path = r.scratch().join("trace.bin");
    crate::commands::run_tpcb_traced(&dir, &sets, opts, Some(&path))?;
    let (_, records) = crate::trace::read_trace_file(&path)?;
    std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    Ok(records)
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
            progress(format!(
                "policies: live {} rep {}/{}",
                pol.name(),
                rep + 1,
                p.repeats
            ));
            let dir = r.fresh_copy(tpl, "live")?;
            let mut sets = base_sets(pool);
            sets.push(("buffer_replacement".into(), pol.name().into()));
            let opts = super::tpcb::bench_options(2, p.seconds, pol.name(), stop_flag());
            let out = crate::commands::run_tpcb(&dir, &sets, opts)?;
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

/// One (trace, size): its names, the clock's misses over the best policy's, and the best
/// policy's over OPT's.
type Case = (&'static str, &'static str, f64, f64);

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
        let best = case
            .iter()
            .filter(|x| x.policy.is_some())
            .map(|x| x.counts.misses.max(1) as f64)
            .fold(f64::INFINITY, f64::min);
        out.push((
            case[0].workload,
            case[0].size,
            misses(Some(ReplacementPolicy::Clock)) / best,
            best / misses(None),
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

fn report(r: &Runner, p: &Plan, m: &Measured) -> Report {
    let cases = replay_ratios(&m.replayed, p.policies.len() + 1);
    Report {
        header: r.header(&format!(
            "scale {} | {} s runs, 2 clients, synchronous_commit off | repeats {}",
            p.scale, p.seconds, p.repeats
        )),
        figures: Vec::new(),
        ratios: targets(m, &cases),
        metadata: metadata(r, p, m, &cases),
        tables: vec![replay_table(&m.replayed), live_table(p, m)],
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
