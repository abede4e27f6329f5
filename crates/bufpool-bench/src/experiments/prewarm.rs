//! `bufpool experiment prewarm`: a restart with and without autoprewarm (pg_prewarm's
//! worker, knobs `autoprewarm` and `autoprewarm_interval`): how long after the open the
//! clients are back at the steady TPS they had before the restart, and what the first
//! minute gives.
//!
//! Per repetition, each configuration in turn (`off`, `on`; alternated round after round):
//! 1. a fresh copy of one template whose data fits the pool (the pool is 1.5 times the
//!    data), and a warm run of `--warm-seconds` with autoprewarm on, whose clean shutdown
//!    saves the block list; its per-second TPS median is the steady level;
//! 2. the restart from cold storage: every file of the copy dropped from the OS page cache
//!    (posix_fadvise DONTNEED after the shutdown's fsyncs, so no root is needed; the reads
//!    come from the device, as after a reboot), and for `off` the saved list removed;
//! 3. the restart run of `--seconds` with autoprewarm on or off: `steady_s` is the first
//!    second whose TPS reaches 90% of the warm level (the run's length if none does).
//!
//! Targets: `steady_s_on_vs_off` (seconds to steady with the reload over without: the
//! reload's sorted, combined reads should bring the pool back long before the clients'
//! random misses do) and `restart_tps_on_vs_off` (the restart run's TPS: the reload must
//! not cost the clients more than it gives them). The data goes on `--device` (a throttled
//! scripts/slow-device.sh profile, ssd-sata by default: a cold pool is a device's problem,
//! and this machine's own disk hides most of it). Every restart run's `RunResult` goes to
//! `<dir>/prewarm/` for `bufpool report`. pgbench's select-only script by default
//! (`--builtin`: a cold pool slows reads, and a read-only load keeps the device's write
//! limit out of the figure), 4 clients, synchronous commit off, checkpoints only by log
//! volume. `--quick`: scale 2, 5 s warm, 10 s restart, one repetition.

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;

use super::device::remove_db;
use super::runner::{knobs, DeviceArg, Runner, Steps, Template};
use super::{Goal, Report, Samples};
use crate::cmd::bench::run::run_tpcb;
use crate::report::model::RunResult;

/// `bufpool experiment prewarm` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Scale (default 10; 2 with --quick).
    #[arg(long)]
    pub scale: Option<u32>,
    /// Seconds of the restart run (default 60; 10 with --quick).
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Seconds of the warm run before the restart (default 30; 5 with --quick).
    #[arg(long)]
    pub warm_seconds: Option<u64>,
    /// The script the clients run (pgbench's `-b`).
    #[arg(long = "builtin", value_enum, default_value = "select-only")]
    pub builtin: crate::tpcb::builtins::Mode,
    #[command(flatten)]
    pub device: DeviceArg,
}

/// Knobs of every run: checkpoints only by log volume (1 GB, so that a run's log fits
/// the slow device's 4 GB), commits not waiting for the log.
const BASE: &[(&str, &str)] = &[
    ("checkpoint_timeout", "1h"),
    ("max_wal_size", "1GB"),
    ("synchronous_commit", "off"),
    ("autoprewarm_interval", "0"),
];
const CLIENTS: u32 = 4;
/// A second is steady when its TPS reaches this share of the warm run's median.
const STEADY_SHARE: f64 = 0.9;

/// One restart measured.
struct Restart {
    warm_tps: f64,
    steady_s: f64,
    /// Whether some second reached the steady level (else `steady_s` is the run's length).
    reached: bool,
    result: RunResult,
    prewarm: Option<bufpool::engine::prewarm::PrewarmStats>,
}

/// Runs the experiment (see the module doc).
pub fn run(a: &Args, r: &mut Runner) -> Result<Report> {
    let short = r.common.short();
    let scale = a.scale.unwrap_or(if short { 2 } else { 10 });
    let seconds = a.seconds.unwrap_or(if short { 10 } else { 60 });
    let warm = a.warm_seconds.unwrap_or(if short { 5 } else { 30 });
    let repeats = r.common.repeats_unless_quick();
    r.use_device(&a.device)?;
    let template = r.template(scale, false, &knobs(BASE))?;
    let pool_mb = (template.bytes * 3 / 2 / (1 << 20)).max(16);
    let out_dir = r.out_dir()?;
    let mut samples = Samples::default();
    let mut last = Vec::new();
    r.plan(Steps::new().timed(2 * repeats, (warm + seconds) as f64));
    for rep in 0..repeats {
        // Alternated, so that a drift of the shared machine falls on both alike.
        let order = if rep % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        let mut pair: [Option<Restart>; 2] = [None, None];
        for on in order {
            let name = if on { "on" } else { "off" };
            r.step(format!(
                "autoprewarm {name} #{rep}: warm {warm} s, cold restart, {seconds} s"
            ));
            let m = restart(r, &template, pool_mb, (warm, seconds, a.builtin), on)?;
            r.progress(format!(
                "{name} #{rep}: warm {:.0} tps; restart {:.0} tps, steady after {} s",
                m.warm_tps, m.result.tps, m.steady_s
            ));
            let path = out_dir.join(format!("restart-{name}-{rep}.json"));
            std::fs::write(&path, serde_json::to_string_pretty(&m.result)?)
                .with_context(|| format!("writing {}", path.display()))?;
            pair[usize::from(on)] = Some(m);
        }
        let [Some(off), Some(on)] = pair else {
            unreachable!("both configurations ran");
        };
        push_pair(&mut samples, &off, &on);
        last = vec![(false, off), (true, on)];
    }
    remove_db(&template.dir);
    let mut rep = report(r, &samples, &last, (scale, pool_mb, warm, seconds));
    rep.metadata
        .insert("builtin".into(), json!(a.builtin.name()));
    Ok(rep)
}

/// One configuration's warm run, cold restart and restart run.
fn restart(
    r: &Runner,
    template: &Template,
    pool_mb: u64,
    (warm, seconds, mode): (u64, u64, crate::tpcb::builtins::Mode),
    on: bool,
) -> Result<Restart> {
    let dir = r.fresh_copy(template, "run")?;
    let mut sets = knobs(BASE);
    sets.push(("shared_buffers".into(), format!("{pool_mb}MB")));
    sets.push(("autoprewarm".into(), "on".into()));
    let bench = |seconds, label: &str| crate::tpcb::options::BenchOptions {
        mode,
        ..super::tpcb::bench_options(CLIENTS, seconds, label, r.stop())
    };
    let warm_opts = bench(warm, "warm");
    let warm_run = run_tpcb(&dir, &sets, warm_opts).context("the warm run")?;
    let warm_tps = warm_run.result.per_interval.tps_p50;
    let dropped = drop_page_cache(&dir)?;
    if !on {
        let list = dir.join(bufpool::engine::prewarm::BLOCKS_FILE);
        std::fs::remove_file(&list).with_context(|| format!("removing {}", list.display()))?;
    }
    r.progress(format!(
        "dropped {dropped} files from the page cache; restart with autoprewarm {}",
        if on { "on" } else { "off" }
    ));
    sets.retain(|(k, _)| k != "autoprewarm");
    sets.push(("autoprewarm".into(), if on { "on" } else { "off" }.into()));
    let label = format!("restart autoprewarm {}", if on { "on" } else { "off" });
    let opts = bench(seconds, &label);
    let out = run_tpcb(&dir, &sets, opts).context("the restart run")?;
    remove_db(&dir);
    let first = out
        .result
        .series
        .iter()
        .position(|s| s.tps >= STEADY_SHARE * warm_tps);
    Ok(Restart {
        warm_tps,
        steady_s: first.map_or(seconds as f64, |i| (i + 1) as f64),
        reached: first.is_some(),
        prewarm: out.prewarm,
        result: out.result,
    })
}

/// Drops every file under `dir` from the OS page cache (clean pages only: the caller has
/// shut the engine down, which fsynced everything). Returns the files dropped.
fn drop_page_cache(dir: &Path) -> Result<u64> {
    use std::os::fd::AsRawFd;
    let mut n = 0;
    for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let p = e?.path();
        let meta = std::fs::symlink_metadata(&p)?;
        if meta.is_dir() {
            n += drop_page_cache(&p)?;
        } else if meta.is_file() {
            let f = std::fs::File::open(&p).with_context(|| format!("opening {}", p.display()))?;
            // SAFETY: advice on a descriptor this function owns; no memory is involved.
            let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            anyhow::ensure!(rc == 0, "posix_fadvise({}): error {rc}", p.display());
            n += 1;
        }
    }
    Ok(n)
}

/// One repetition's figures and ratios from its `off` and `on` restarts.
fn push_pair(s: &mut Samples, off: &Restart, on: &Restart) {
    s.push("warm_tps", off.warm_tps);
    s.push("warm_tps", on.warm_tps);
    s.push("steady_s_off", off.steady_s);
    s.push("steady_s_on", on.steady_s);
    s.push("restart_tps_off", off.result.tps);
    s.push("restart_tps_on", on.result.tps);
    let first10 = |m: &Restart| {
        let w = &m.result.series[..m.result.series.len().min(10)];
        w.iter().map(|x| x.tps).sum::<f64>() / w.len().max(1) as f64
    };
    s.push("first_10s_tps_off", first10(off));
    s.push("first_10s_tps_on", first10(on));
    if let Some(p) = &on.prewarm {
        s.push("reloaded_blocks", p.loaded as f64);
        s.push("reload_s", p.load_seconds);
    }
    s.push("steady_s_on_vs_off", on.steady_s / off.steady_s.max(1.0));
    s.push(
        "restart_tps_on_vs_off",
        on.result.tps / off.result.tps.max(1e-9),
    );
}

fn report(
    r: &Runner,
    s: &Samples,
    last: &[(bool, Restart)],
    (scale, pool_mb, warm, seconds): (u32, u64, u64, u64),
) -> Report {
    let mut figures = vec![
        s.figure("warm_tps", "tps"),
        s.figure("steady_s_off", "s"),
        s.figure("steady_s_on", "s"),
        s.figure("restart_tps_off", "tps"),
        s.figure("restart_tps_on", "tps"),
        s.figure("first_10s_tps_off", "tps"),
        s.figure("first_10s_tps_on", "tps"),
    ];
    if !s.get("reload_s").is_empty() {
        figures.push(s.figure("reloaded_blocks", "blocks"));
        figures.push(s.figure("reload_s", "s"));
    }
    let mut notes = vec![format!(
        "steady: the first second at {:.0}% of the warm run's median TPS; restart {}",
        STEADY_SHARE * 100.0,
        r.runs_note()
    )];
    for (on, m) in last {
        if !m.reached {
            notes.push(format!(
                "autoprewarm {}: no second reached the steady level; steady_s is the run's \
                 length ({seconds} s)",
                if *on { "on" } else { "off" }
            ));
        }
        if let Some(e) = m.prewarm.as_ref().and_then(|p| p.last_error.as_ref()) {
            notes.push(format!("autoprewarm reported: {e}"));
        }
    }
    let mut metadata = r.metadata();
    metadata.insert("scale".into(), json!(scale));
    metadata.insert("shared_buffers_mb".into(), json!(pool_mb));
    metadata.insert("clients".into(), json!(CLIENTS));
    metadata.insert("warm_seconds".into(), json!(warm));
    metadata.insert("restart_seconds".into(), json!(seconds));
    Report {
        header: r.header(&format!(
            "pgbench scale {scale}, c{CLIENTS}, sync off, pool {pool_mb} MB, warm {warm} s, \
             restart {seconds} s | {}",
            r.device_line()
        )),
        figures,
        ratios: vec![
            s.ratio("steady_s_on_vs_off", Goal::AtMost, 0.5),
            s.ratio("restart_tps_on_vs_off", Goal::AtLeast, 1.0),
        ],
        metadata,
        notes,
        tables: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_page_cache_walks_the_tree_and_skips_links() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("base/0")).unwrap();
        std::fs::write(tmp.path().join("base/0/1"), b"x").unwrap();
        std::fs::write(tmp.path().join("meta"), b"y").unwrap();
        std::os::unix::fs::symlink("/nonexistent", tmp.path().join("wal")).unwrap();
        assert_eq!(drop_page_cache(tmp.path()).unwrap(), 2);
    }

    #[test]
    fn a_pair_gives_both_ratios() {
        let restart = |tps: f64, steady: f64| Restart {
            warm_tps: 100.0,
            steady_s: steady,
            reached: true,
            result: RunResult {
                tps,
                series: Vec::new(),
                ..RunResult::example("x", 1)
            },
            prewarm: None,
        };
        let mut s = Samples::default();
        push_pair(&mut s, &restart(50.0, 8.0), &restart(75.0, 2.0));
        assert_eq!(s.get("steady_s_on_vs_off"), &[0.25]);
        assert_eq!(s.get("restart_tps_on_vs_off"), &[1.5]);
        assert_eq!(s.get("first_10s_tps_on"), &[0.0]);
    }
}
