//! `bufpool experiment resize`: the pool grown and shrunk while TPC-B runs
//! (`Engine::resize_pool`, as `bench --resize-at` does it), what each resize costs the
//! second it happens in, and that nothing is lost.
//!
//! Per repetition, on a fresh copy of a scale-S template (default 8, about 120 MB of
//! tables and indexes; 2 with `--quick`): one run of `--seconds` (default 40; 25 with
//! `--quick`) with 2 clients on 2 threads, synchronous commit off, `shared_buffers` 128MB
//! and `max_shared_buffers` 1GB, resized at a fifth, two fifths, three and four fifths of
//! the run to 512MB (grow), 64MB (shrink below the data: hot and dirty pages are written
//! and dropped), 1GB (grow) and 128MB (shrink), with the default `resize_duty_cycle`
//! (a shrink works a tenth of the time). For each resize: the lowest tps of the seconds
//! it ran in over the steady tps beside it (the lower of the medians of the seconds at the
//! old size before it and at the new size after it, see [`dips`]), its time, and the
//! pages it wrote. Target `resize_dip`: the lowest such ratio
//! of the run, ≥ 0.95 (PostgreSQL 19's online `shared_buffers` proposal makes its
//! backends wait through a resize). After the run the tables are checked (`bufpool
//! check`'s TPC-B conditions, every page's checksum), and every committed transaction
//! must have its history row: target `resize_lost_transactions` = 0. On the local disk;
//! with `--device`, as the runner sets it up.

use std::path::Path;

use anyhow::{Context, Result};
use bufpool::{RealVfs, Vfs};
use serde_json::json;

use super::device::remove_db;
use super::runner::{knobs, Runner, Steps};
use super::{layout, summarize, Goal, Report, Samples};
use crate::cmd::bench::run::run_tpcb;
use crate::report::model::RunResult;
use crate::tpcb::driver::resize::ResizeAt;
use crate::tpcb::options::BenchOptions;

/// `bufpool experiment resize` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Scale (default 8; 2 with --quick).
    #[arg(long)]
    pub scale: Option<u32>,
    /// Seconds of each run (default 40; 25 with --quick; at least 20).
    #[arg(long)]
    pub seconds: Option<u64>,
}

const CLIENTS: u32 = 2;
/// The sizes resized to, in order, at a fifth of the run apart.
const SIZES_MB: [u64; 4] = [512, 64, 1024, 128];
const BASE: &[(&str, &str)] = &[
    ("shared_buffers", "128MB"),
    ("max_shared_buffers", "1GB"),
    ("synchronous_commit", "off"),
    // No checkpoint inside the run: its writes move a second's tps by 10-20% here, which
    // would be read as (or hide) a resize's dip. 40 s at ~100,000 tps writes ~4.5 GB of log.
    ("checkpoint_timeout", "1h"),
    ("max_wal_size", "8GB"),
    ("log_checkpoints", "off"),
];

/// The knobs of a run: [`BASE`], with `--quick` (and debug builds) a log of at most 1 GB,
/// so a short run's disk use stays bounded (a checkpoint may then land in it).
fn sets(short: bool) -> Vec<(String, String)> {
    let mut sets = knobs(BASE);
    if short {
        for (k, v) in &mut sets {
            if k == "max_wal_size" {
                *v = "1GB".into();
            }
        }
    }
    sets
}

/// One resize as the run saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Dip {
    pub from_mb: u64,
    pub to_mb: u64,
    pub at_s: f64,
    pub took_ms: f64,
    pub written: u64,
    /// The lowest tps of the seconds it ran in, and the steady tps it is held against
    /// (see [`dips`]).
    pub second_tps: f64,
    pub steady_tps: f64,
}

impl Dip {
    pub fn ratio(&self) -> f64 {
        self.second_tps / self.steady_tps.max(1e-9)
    }
}

/// Each resize of `r` with the lowest tps of the seconds it ran in (a paced shrink spans
/// several) against the steady seconds on either side: the median of the seconds at the
/// old size since the previous resize (the run's first second left out) and of those at
/// the new size up to the next resize (or the run's end), the lower of the two. A dip is a
/// second below both: a grow's seconds are not held against the faster pool after it,
/// nor a shrink's against the larger one before. A resize with no whole second after it
/// is left out.
pub fn dips(r: &RunResult) -> Vec<Dip> {
    let tps: Vec<f64> = r.series.iter().map(|s| s.tps).collect();
    // The last second is partial (the clients stop in it).
    let end = tps.len().saturating_sub(1);
    let mut out = Vec::new();
    let mut since = 1;
    for (i, z) in r.resizes.iter().enumerate() {
        let first = z.at_s as usize;
        let last = (z.at_s + z.took_ms / 1e3) as usize;
        let next = r
            .resizes
            .get(i + 1)
            .map_or(end, |n| (n.at_s as usize).min(end));
        if z.error.is_some() || last + 1 >= next {
            since = last + 1;
            continue;
        }
        let after = summarize(&tps[last + 1..next]).median;
        let before = (since < first).then(|| summarize(&tps[since..first]).median);
        out.push(Dip {
            from_mb: z.from_bytes >> 20,
            to_mb: z.to_bytes >> 20,
            at_s: z.at_s,
            took_ms: z.took_ms,
            written: z.pages_written,
            second_tps: tps[first..=last].iter().copied().fold(f64::MAX, f64::min),
            steady_tps: before.map_or(after, |b| b.min(after)),
        });
        since = last + 1;
    }
    out
}

/// Runs the experiment (see the module doc).
pub fn run(a: &Args, r: &mut Runner) -> Result<Report> {
    let short = r.common.short();
    let scale = a.scale.unwrap_or(if short { 2 } else { 8 });
    let seconds = a.seconds.unwrap_or(if short { 25 } else { 40 });
    anyhow::ensure!(
        (20..=3600).contains(&seconds),
        "--seconds must be within 20..=3600 (a paced shrink takes seconds), got {seconds}"
    );
    let repeats = r.common.repeats_unless_quick();
    let template = r.template(scale, false, &sets(short))?;
    let out_dir = r.out_dir()?;
    let mut samples = Samples::default();
    let mut all = Vec::new();
    r.plan(Steps::new().timed(repeats, seconds as f64));
    for rep in 0..repeats {
        let dir = r.fresh_copy(&template, "run")?;
        let (result, lost) = measure(r, &dir, seconds, rep)?;
        let path = out_dir.join(format!("resize-{rep}.json"));
        std::fs::write(&path, serde_json::to_string_pretty(&result)?)
            .with_context(|| format!("writing {}", path.display()))?;
        let d = dips(&result);
        anyhow::ensure!(
            d.len() == SIZES_MB.len(),
            "{} of {} resizes measured: {:?}",
            d.len(),
            SIZES_MB.len(),
            result.resizes
        );
        samples.push(
            "resize_dip",
            d.iter().map(Dip::ratio).fold(f64::MAX, f64::min),
        );
        samples.push("resize_lost_transactions", lost as f64);
        for x in &d {
            let kind = if x.to_mb > x.from_mb {
                "grow"
            } else {
                "shrink"
            };
            samples.push(
                if kind == "grow" {
                    "grow_ms"
                } else {
                    "shrink_ms"
                },
                x.took_ms,
            );
        }
        all.push((rep, d));
        remove_db(&dir);
    }
    remove_db(&template.dir);
    Ok(report(r, &samples, &all, (scale, seconds)))
}

/// One run with the four resizes on the copy at `dir`; its result and the committed
/// transactions whose history row is missing afterwards (a failed check is an error).
fn measure(r: &Runner, dir: &Path, seconds: u64, rep: usize) -> Result<(RunResult, u64)> {
    let label = format!("resize run {}", rep + 1);
    r.step(format!(
        "{label}: {CLIENTS} clients, {seconds} s, four resizes"
    ));
    let fifth = seconds as f64 / 5.0;
    let mut opts = BenchOptions {
        resizes: SIZES_MB
            .iter()
            .enumerate()
            .map(|(i, mb)| ResizeAt {
                at: std::time::Duration::from_secs_f64(fifth * (i + 1) as f64),
                bytes: mb << 20,
            })
            .collect(),
        ..BenchOptions::tpcb(CLIENTS, seconds, &label, r.stop())
    };
    opts.driver.threads = CLIENTS;
    let out = run_tpcb(dir, &sets(r.common.short()), opts).with_context(|| label.clone())?;
    let result = out.result;
    let check = check(dir)?;
    anyhow::ensure!(
        check.problems.is_empty(),
        "after the run: {}",
        check.problems.join("; ")
    );
    let lost = result.transactions.saturating_sub(check.history_rows);
    r.progress(format!(
        "{label}: {:.0} tps, {} history rows for {} transactions",
        result.tps, check.history_rows, result.transactions
    ));
    Ok((result, lost))
}

/// `bufpool check`'s TPC-B conditions on `dir`, opened with its own bufpool.conf (the
/// template's knobs).
fn check(dir: &Path) -> Result<crate::tpcb::CheckReport> {
    let (c, _) = crate::knobs::load_config(dir, &[])?;
    let vfs = RealVfs::new();
    let engine = crate::cmd::open_engine(dir, &c, false)?;
    let db = crate::tpcb::Db::open(&engine, &vfs as &dyn Vfs, dir)?;
    let report = crate::tpcb::check(&db, &vfs, dir, false)?;
    drop(db);
    engine.shutdown()?;
    Ok(report)
}

fn report(r: &Runner, s: &Samples, all: &[(usize, Vec<Dip>)], (scale, secs): (u32, u64)) -> Report {
    let mut cells = vec![[
        "run",
        "resize",
        "at s",
        "took ms",
        "pages written",
        "tps, lowest second",
        "tps steady (median)",
        "ratio",
    ]
    .map(String::from)
    .to_vec()];
    for (rep, d) in all {
        for x in d {
            cells.push(vec![
                (rep + 1).to_string(),
                format!("{} -> {} MB", x.from_mb, x.to_mb),
                format!("{:.1}", x.at_s),
                format!("{:.1}", x.took_ms),
                x.written.to_string(),
                format!("{:.0}", x.second_tps),
                format!("{:.0}", x.steady_tps),
                format!("{:.3}", x.ratio()),
            ]);
        }
    }
    let mut metadata = r.metadata();
    for (k, v) in [
        ("scale", json!(scale)),
        ("seconds", json!(secs)),
        ("clients", json!(CLIENTS)),
    ] {
        metadata.insert(k.into(), v);
    }
    metadata.insert("sizes_mb".into(), json!(SIZES_MB));
    let rows: Vec<_> = all
        .iter()
        .flat_map(|(rep, d)| d.iter().map(move |x| (rep, x)))
        .map(|(rep, x)| {
            json!({
                "run": rep + 1, "from_mb": x.from_mb, "to_mb": x.to_mb, "at_s": x.at_s,
                "took_ms": x.took_ms, "pages_written": x.written,
                "lowest_second_tps": x.second_tps, "steady_tps": x.steady_tps,
                "ratio": x.ratio(),
            })
        })
        .collect();
    metadata.insert("resizes".into(), json!(rows));
    metadata.insert("knobs".into(), json!(sets(r.common.short())));
    Report {
        header: r.header(&format!(
            "online resize, TPC-B scale {scale}, c{CLIENTS} j{CLIENTS}, sync off, 128MB -> \
             512MB -> 64MB -> 1GB -> 128MB over {secs} s | {}",
            r.device_line()
        )),
        figures: vec![s.figure("grow_ms", "ms"), s.figure("shrink_ms", "ms")],
        ratios: vec![
            s.ratio("resize_dip", Goal::AtLeast, 0.95),
            s.ratio("resize_lost_transactions", Goal::Exactly, 0.0),
        ],
        metadata,
        notes: vec![r.runs_note()],
        tables: vec![layout(&cells, 2)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::PoolResizeRecord;

    fn resize(at_s: f64, from: u64, to: u64) -> PoolResizeRecord {
        PoolResizeRecord {
            at_s,
            from_bytes: from << 20,
            to_bytes: to << 20,
            took_ms: 1.0,
            pages_written: 0,
            pages_evicted: 0,
            error: None,
        }
    }

    /// Proves: each resize's slowest second (of those it ran in) is set against the slower
    /// of the steady seconds before and after it (the run's first and partial last second
    /// left out), and a failed resize, or one with no whole second after it, is not
    /// measured.
    #[test]
    fn a_dip_is_the_resize_seconds_against_the_slower_side() {
        let mut r = RunResult::example("x", 1);
        let tps = [
            100.0, 100.0, 120.0, 50.0, 200.0, 200.0, 80.0, 90.0, 150.0, 150.0, 10.0,
        ];
        r.series.truncate(tps.len());
        for (s, t) in r.series.iter_mut().zip(tps) {
            s.tps = t;
        }
        r.resizes = vec![resize(3.3, 128, 512), resize(6.0, 512, 64)];
        // The shrink ran from 6.0 s to 7.5 s: seconds 6 and 7 are its.
        r.resizes[1].took_ms = 1500.0;
        let d = dips(&r);
        assert_eq!(d.len(), 2);
        // The grow against the slower side, before it (seconds 1 and 2, not 0).
        assert_eq!((d[0].second_tps, d[0].steady_tps), (50.0, 110.0));
        // The shrink against the slower side, after it (seconds 8 and 9).
        assert_eq!((d[1].second_tps, d[1].steady_tps), (80.0, 150.0));
        assert!((d[0].ratio() - 50.0 / 110.0).abs() < 1e-12);
        r.resizes[1].took_ms = 3500.0;
        assert_eq!(dips(&r).len(), 1, "no whole second after it");
        r.resizes[1].took_ms = 1500.0;
        r.resizes[1].error = Some("pinned".into());
        assert_eq!(dips(&r).len(), 1);
    }
}
