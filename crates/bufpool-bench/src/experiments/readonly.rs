//! `bufpool experiment readonly`: what a transaction that only reads costs the log.
//!
//! A transaction gets its id at its first write (PostgreSQL's lazy assignment), so one
//! that only reads writes no commit record and waits for no flush, whatever
//! `synchronous_commit` says. This experiment shows it with two read-only workloads:
//! pgbench's select-only (one account by a uniform key, on a TPC-B database) and YCSB C
//! (one record of YCSB's usertable, all ten fields, by a Zipfian key, on a YCSB
//! database), each with synchronous commit on and off, on a copy of a template whose data
//! fits the pool (reads from memory: what remains is the transaction's own cost).
//!
//! Per repetition, for each script, sync on then off (alternated round after round): a
//! run of `--seconds` with 2 clients on 2 threads; its log bytes, records and syncs per
//! transaction and its TPS. Target: `readonly_wal_bytes_per_tx`, the most log bytes per
//! transaction of any run, `=` 0 (PostgreSQL: 0). Figures: each run's TPS and the ratio
//! of sync on over sync off per script (about 1 when a reader waits for no flush; it was
//! 0.02 when every transaction synced the log). Target `ycsb_c_lookups_per_s_per_core`:
//! YCSB C's transactions per second with synchronous commit off over the cores the
//! clients ran on (each a transactional read: index lookup, heap fetch, visibility), ≥
//! 600,000 (vmcache's bare B-tree lookups ran 570,000 a second on one thread of this kind
//! of machine). The targets and the table's other rows are with the defaults; each
//! repetition adds a YCSB C run with synchronous commit off and `optimistic_reads = on`
//! (B-tree descents read internal pages with no pin and no lock), right after the same
//! run with it off: figure `ycsb_c_optimistic_on_vs_off`, the knob measured on and off.
//! `--quick`: scale 2 and 20,000 records, 3 s runs, one repetition;
//! otherwise scale 10 and 200,000 records (about 210 MB). On the local disk: the device
//! only matters if something is written.

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;

use super::device::remove_db;
use super::runner::{knobs, Runner, Steps};
use super::{layout, Goal, Report, Samples};
use crate::cmd::bench::run::run_tpcb;
use crate::report::model::RunResult;
use crate::tpcb::builtins::Mode;
use crate::tpcb::options::BenchOptions;

/// `bufpool experiment readonly` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Scale (default 10; 2 with --quick).
    #[arg(long)]
    pub scale: Option<u32>,
    /// Seconds of each run (default 10; 3 with --quick).
    #[arg(long)]
    pub seconds: Option<u64>,
    /// YCSB's records (default 200,000, about 210 MB; 20,000 with --quick).
    #[arg(long)]
    pub records: Option<u64>,
}

/// The read-only scripts measured.
const SCRIPTS: [Mode; 2] = [Mode::SelectOnly, Mode::YcsbC];
const CLIENTS: u32 = 2;
/// The pool: the scale-10 data (about 150 MB) and its indexes fit with room to spare.
const POOL: &str = "1GB";
/// Checkpoints only by log volume: a timed one inside a run would be the run's only log
/// write, and a read-only run leaves no log to checkpoint.
const BASE: &[(&str, &str)] = &[
    ("shared_buffers", POOL),
    ("checkpoint_timeout", "1h"),
    ("log_checkpoints", "off"),
];

/// What one run cost the log, per transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct LogCost {
    pub script: &'static str,
    pub sync: bool,
    /// `optimistic_reads` was on (off: the default).
    pub optimistic: bool,
    pub tps: f64,
    pub transactions: u64,
    pub wal_bytes_per_tx: f64,
    pub wal_records_per_tx: f64,
    pub wal_syncs_per_tx: f64,
}

impl LogCost {
    fn of(script: Mode, (sync, optimistic): (bool, bool), r: &RunResult) -> LogCost {
        let n = r.transactions.max(1) as f64;
        let w = r.wal.clone().unwrap_or_default();
        LogCost {
            script: script.name(),
            sync,
            optimistic,
            tps: r.tps,
            transactions: r.transactions,
            wal_bytes_per_tx: w.bytes as f64 / n,
            wal_records_per_tx: w.records as f64 / n,
            wal_syncs_per_tx: w.syncs as f64 / n,
        }
    }
}

/// The targets from every run measured: the most log bytes any read-only transaction
/// cost (one sample: a single run that writes fails it), and each YCSB C run's with
/// synchronous commit off and the defaults, per core of the `cores` its clients ran on.
pub fn push_targets(s: &mut Samples, runs: &[LogCost], cores: u32) {
    let worst = runs.iter().map(|c| c.wal_bytes_per_tx).fold(0.0, f64::max);
    s.push("readonly_wal_bytes_per_tx", worst);
    for c in runs
        .iter()
        .filter(|c| c.script == Mode::YcsbC.name() && !c.sync && !c.optimistic)
    {
        s.push(
            "ycsb_c_lookups_per_s_per_core",
            c.tps / f64::from(cores.max(1)),
        );
    }
}

/// The cores the clients run on: one each, as many as the machine has.
fn cores() -> u32 {
    let have = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    CLIENTS.min(have)
}

/// Runs the experiment (see the module doc).
pub fn run(a: &Args, r: &mut Runner) -> Result<Report> {
    let short = r.common.short();
    let scale = a.scale.unwrap_or(if short { 2 } else { 10 });
    let seconds = a.seconds.unwrap_or(if short { 3 } else { 10 });
    anyhow::ensure!(
        (1..=3600).contains(&seconds),
        "--seconds must be within 1..=3600, got {seconds}"
    );
    let records = a.records.unwrap_or(if short { 20_000 } else { 200_000 });
    let repeats = r.common.repeats_unless_quick();
    let template = r.template(scale, false, &knobs(BASE))?;
    let ycsb_template = r.template_ycsb(records, &knobs(BASE))?;
    // Read-only runs change nothing: one copy of each serves them all.
    let dir = r.fresh_copy(&template, "run")?;
    let ycsb_dir = r.fresh_copy(&ycsb_template, "run-ycsb")?;
    let out_dir = r.out_dir()?;
    let mut samples = Samples::default();
    let mut runs = Vec::new();
    r.plan(Steps::new().timed(repeats * (SCRIPTS.len() * 2 + 1), seconds as f64));
    for rep in 0..repeats {
        let order = if rep % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for script in SCRIPTS {
            let on = if script.is_ycsb() { &ycsb_dir } else { &dir };
            for sync in order {
                runs.push(measure(
                    r,
                    on,
                    &out_dir,
                    (script, sync, false, rep),
                    seconds,
                )?);
            }
        }
        // The knob on, after the same run with it off (the last YCSB C run of the
        // repetition alternates between sync on and off: compared with the off one).
        let on = (Mode::YcsbC, false, true, rep);
        runs.push(measure(r, &ycsb_dir, &out_dir, on, seconds)?);
        push_repetition_ratios(&mut samples, &runs);
    }
    remove_db(&dir);
    remove_db(&ycsb_dir);
    remove_db(&template.dir);
    remove_db(&ycsb_template.dir);
    push_targets(&mut samples, &runs, cores());
    let mut rep = report(r, &samples, &runs, (scale, seconds));
    rep.metadata.insert("ycsb_records".into(), json!(records));
    Ok(rep)
}

/// The figures of the repetition that ended `runs`: sync on over off per script (the
/// defaults), and YCSB C with sync off, optimistic reads on over off.
fn push_repetition_ratios(samples: &mut Samples, runs: &[LogCost]) {
    let tps = |script: Mode, sync: bool, optimistic: bool| {
        runs.iter()
            .rev()
            .find(|c| c.script == script.name() && c.sync == sync && c.optimistic == optimistic)
            .map_or(0.0, |c| c.tps)
    };
    for script in SCRIPTS {
        let name = match script {
            Mode::SelectOnly => "select_only_sync_on_vs_off",
            _ => "ycsb_c_sync_on_vs_off",
        };
        samples.push(
            name,
            tps(script, true, false) / tps(script, false, false).max(1e-9),
        );
    }
    let (on, off) = (
        tps(Mode::YcsbC, false, true),
        tps(Mode::YcsbC, false, false),
    );
    samples.push("ycsb_c_optimistic_on_vs_off", on / off.max(1e-9));
}

/// One run of `script` with synchronous commit `sync` (repetition `rep`) on the copy at
/// `dir`: its log cost, its `RunResult` saved under `out_dir`.
fn measure(
    r: &Runner,
    dir: &Path,
    out_dir: &Path,
    (script, sync, optimistic, rep): (Mode, bool, bool, usize),
    seconds: u64,
) -> Result<LogCost> {
    let mut label = format!("{} sync {}", script.name(), if sync { "on" } else { "off" });
    if optimistic {
        label.push_str(" optimistic");
    }
    r.step(format!("{label}: {CLIENTS} clients, {seconds} s"));
    let mut sets = knobs(BASE);
    sets.push((
        "synchronous_commit".into(),
        if sync { "on" } else { "off" }.into(),
    ));
    sets.push((
        "optimistic_reads".into(),
        if optimistic { "on" } else { "off" }.into(),
    ));
    let mut opts = BenchOptions {
        mode: script,
        ..BenchOptions::tpcb(CLIENTS, seconds, &label, r.stop())
    };
    opts.driver.threads = CLIENTS;
    let out = run_tpcb(dir, &sets, opts).with_context(|| label.clone())?;
    let cost = LogCost::of(script, (sync, optimistic), &out.result);
    r.progress(format!(
        "{label}: {:.0} tps, {:.1} log bytes and {:.3} syncs per transaction",
        cost.tps, cost.wal_bytes_per_tx, cost.wal_syncs_per_tx
    ));
    let path = out_dir.join(format!("{}-{rep}.json", label.replace(' ', "-")));
    std::fs::write(&path, serde_json::to_string_pretty(&out.result)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(cost)
}

fn report(r: &Runner, s: &Samples, runs: &[LogCost], (scale, seconds): (u32, u64)) -> Report {
    let mut cells = vec![[
        "script",
        "sync",
        "optimistic reads",
        "tps",
        "transactions",
        "log bytes/tx",
        "records/tx",
        "syncs/tx",
    ]
    .map(String::from)
    .to_vec()];
    for c in runs {
        cells.push(vec![
            c.script.to_string(),
            if c.sync { "on" } else { "off" }.to_string(),
            if c.optimistic { "on" } else { "off" }.to_string(),
            format!("{:.0}", c.tps),
            c.transactions.to_string(),
            format!("{:.2}", c.wal_bytes_per_tx),
            format!("{:.4}", c.wal_records_per_tx),
            format!("{:.4}", c.wal_syncs_per_tx),
        ]);
    }
    let mut metadata = r.metadata();
    metadata.insert("scale".into(), json!(scale));
    metadata.insert("shared_buffers".into(), json!(POOL));
    metadata.insert("clients".into(), json!(CLIENTS));
    metadata.insert("seconds".into(), json!(seconds));
    metadata.insert(
        "runs".into(),
        json!(runs
            .iter()
            .map(|c| json!({
                "script": c.script, "sync": c.sync, "optimistic_reads": c.optimistic,
                "tps": c.tps,
                "transactions": c.transactions, "wal_bytes_per_tx": c.wal_bytes_per_tx,
                "wal_records_per_tx": c.wal_records_per_tx,
                "wal_syncs_per_tx": c.wal_syncs_per_tx,
            }))
            .collect::<Vec<_>>()),
    );
    Report {
        header: r.header(&format!(
            "read-only scripts, scale {scale}, c{CLIENTS} j{CLIENTS}, pool {POOL}, {seconds} s \
             runs | {}",
            r.device_line()
        )),
        figures: vec![
            s.figure("select_only_sync_on_vs_off", "x"),
            s.figure("ycsb_c_sync_on_vs_off", "x"),
            s.figure("ycsb_c_optimistic_on_vs_off", "x"),
        ],
        ratios: vec![
            s.ratio("readonly_wal_bytes_per_tx", Goal::Exactly, 0.0),
            s.ratio("ycsb_c_lookups_per_s_per_core", Goal::AtLeast, 600_000.0),
        ],
        metadata,
        notes: vec![r.runs_note()],
        tables: vec![layout(&cells, 2)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(bytes: f64) -> LogCost {
        LogCost {
            script: "select-only",
            sync: true,
            optimistic: false,
            tps: 1.0,
            transactions: 1,
            wal_bytes_per_tx: bytes,
            wal_records_per_tx: 0.0,
            wal_syncs_per_tx: 0.0,
        }
    }

    #[test]
    fn one_run_that_writes_fails_the_target() {
        let mut s = Samples::default();
        push_targets(&mut s, &[cost(0.0), cost(0.0)], 2);
        assert!(
            s.ratio("readonly_wal_bytes_per_tx", Goal::Exactly, 0.0)
                .pass
        );
        let mut s = Samples::default();
        push_targets(&mut s, &[cost(0.0), cost(12.5), cost(0.0)], 2);
        let r = s.ratio("readonly_wal_bytes_per_tx", Goal::Exactly, 0.0);
        assert!(!r.pass);
        assert_eq!(r.median, 12.5);
    }

    /// Proves: the lookups target takes YCSB C's runs with synchronous commit off and the
    /// defaults only (not the optimistic-reads run), per core.
    #[test]
    fn lookups_per_core_come_from_ycsb_c_without_sync() {
        let run = |script: Mode, sync, tps| LogCost {
            script: script.name(),
            sync,
            tps,
            ..cost(0.0)
        };
        let mut s = Samples::default();
        let runs = [
            run(Mode::YcsbC, true, 9.0),
            run(Mode::YcsbC, false, 1_000_000.0),
            run(Mode::SelectOnly, false, 5.0),
            LogCost {
                optimistic: true,
                ..run(Mode::YcsbC, false, 3_000_000.0)
            },
        ];
        push_targets(&mut s, &runs, 2);
        let r = s.ratio("ycsb_c_lookups_per_s_per_core", Goal::AtLeast, 600_000.0);
        assert_eq!((r.median, r.pass), (500_000.0, false));
    }

    /// Proves: a repetition's figures compare its own runs: sync on over off with the
    /// defaults, and optimistic reads on over off with sync off.
    #[test]
    fn a_repetition_compares_sync_and_optimistic_reads_among_its_runs() {
        let run = |script: Mode, sync, optimistic, tps| LogCost {
            script: script.name(),
            sync,
            optimistic,
            tps,
            ..cost(0.0)
        };
        let runs = [
            run(Mode::SelectOnly, true, false, 90.0),
            run(Mode::SelectOnly, false, false, 100.0),
            run(Mode::YcsbC, false, false, 200.0),
            run(Mode::YcsbC, true, false, 180.0),
            run(Mode::YcsbC, false, true, 250.0),
        ];
        let mut s = Samples::default();
        push_repetition_ratios(&mut s, &runs);
        let f = |name| s.ratio(name, Goal::AtLeast, 0.0).median;
        assert!((f("select_only_sync_on_vs_off") - 0.9).abs() < 1e-9);
        assert!((f("ycsb_c_sync_on_vs_off") - 0.9).abs() < 1e-9);
        assert!((f("ycsb_c_optimistic_on_vs_off") - 1.25).abs() < 1e-9);
    }

    #[test]
    fn costs_are_per_transaction() {
        let mut r = RunResult::example("x", 1);
        r.transactions = 4;
        r.tps = 2.0;
        r.wal = Some(crate::report::model::WalCounts {
            bytes: 400,
            records: 4,
            syncs: 2,
            ..Default::default()
        });
        let c = LogCost::of(Mode::YcsbC, (false, false), &r);
        assert_eq!(
            (c.wal_bytes_per_tx, c.wal_records_per_tx, c.wal_syncs_per_tx),
            (100.0, 1.0, 0.5)
        );
        assert_eq!(c.script, "ycsb-c");
    }
}
