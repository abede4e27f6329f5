//! The power-loss harness shared by `crash_power*.rs`: crash a workload after every I/O,
//! let [`SimVfs::crash`] decide the fate of every unsynced change under many seeds, and
//! count what was verified.
//!
//! [`explore`] takes a crashed-at-`n` file system from the caller (a workload run with
//! `crash_after(n)` until its threads stopped), then for each seed cuts the power on a
//! [`SimVfs::duplicate`] of it and hands the result to the caller's verifier. So one
//! workload run is checked under many fates at the cost of one recovery each; `runs`
//! workload runs per crash point vary the threads' interleaving too. Everything is
//! deterministic by (crash point, run, seed) except the interleaving of the workload's
//! threads.
#![allow(dead_code)] // not every power test uses every helper

use std::path::Path;
use std::time::{Duration, Instant};

use bufpool::testing::{CrashChoice, CrashReport, SimVfs, SyncPoint};

/// Seeds (crash fates) per workload run: `BUFPOOL_POWER_SEEDS` if set (soak runs), else
/// `default`.
pub fn seeds(default: u64) -> u64 {
    std::env::var("BUFPOOL_POWER_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The seed of the crash for (point, run, seed): spread over points and runs, so they do
/// not all replay the same fates.
pub fn crash_seed(point: u64, run: u64, seed: u64) -> u64 {
    seed.wrapping_mul(7919)
        .wrapping_add(point)
        .wrapping_add(run.wrapping_mul(0x9E37_79B9))
}

/// Prints which crash state a verifier was checking if it panics (the assertion messages
/// of shared helpers do not know the seed).
pub struct Context {
    pub test: &'static str,
    pub point: u64,
    pub run: u64,
    pub seed: u64,
    /// What the crash did that could lose something (see [`describe`]).
    pub fates: String,
}

/// The crash's undone namespace changes and, per file, its writes that were not simply
/// kept: what to look at first when a verification fails.
pub fn describe(report: &CrashReport) -> String {
    let mut out = String::new();
    for (kind, path, kept) in &report.namespace_fates {
        if !kept {
            out.push_str(&format!("\n  undone {kind} of {}", path.display()));
        }
    }
    let mut per_file: std::collections::BTreeMap<&Path, Vec<CrashChoice>> = Default::default();
    for (path, c) in &report.write_fates {
        per_file.entry(path).or_default().push(*c);
    }
    for (path, fates) in per_file {
        if fates.iter().any(|&c| c != CrashChoice::Keep) {
            out.push_str(&format!("\n  writes to {}: {fates:?}", path.display()));
        }
    }
    out
}

impl Drop for Context {
    fn drop(&mut self) {
        if std::thread::panicking() && self.run == PREFIX_RUN {
            eprintln!(
                "{}: failed at sync point {}, keeping the first {} pending changes; the crash:{}",
                self.test, self.point, self.seed, self.fates,
            );
        } else if std::thread::panicking() {
            eprintln!(
                "{}: failed at crash point {} (I/Os let through before the power cut), run {}, \
                 seed {} (crash seed {}); the crash:{}",
                self.test,
                self.point,
                self.run,
                self.seed,
                crash_seed(self.point, self.run, self.seed),
                self.fates,
            );
        }
    }
}

/// What a power test crashed and verified.
#[derive(Debug, Default)]
pub struct Tally {
    /// Crash states verified: (crash point, run, seed) triples, each one fate of every
    /// pending change, recovered and checked.
    pub states: u64,
    /// Writes per [`CrashChoice`] (in `CrashChoice::ALL` order), over all states.
    pub writes: [u64; 5],
    /// Creates, renames and unlinks undone, over all states.
    pub namespace_undone: u64,
    /// Crash points tried.
    pub points: u64,
    pub elapsed: Duration,
}

impl Tally {
    pub fn add(&mut self, report: &CrashReport) {
        self.states += 1;
        for (i, c) in CrashChoice::ALL.into_iter().enumerate() {
            self.writes[i] += report.writes(c);
        }
        self.namespace_undone += report.namespace_undone;
    }

    pub fn writes(&self, c: CrashChoice) -> u64 {
        let i = CrashChoice::ALL.iter().position(|&x| x == c).unwrap();
        self.writes[i]
    }

    /// Prints the counts (run with `--nocapture` to see them).
    pub fn print(&self, test: &str, extra: &str) {
        eprintln!(
            "{test}: {} crash states verified ({} crash points) in {:.1} s; unsynced writes \
             dropped {}, kept {}, torn at 4 KiB {}, torn at 512 B {}, garbage {}; \
             creates/renames/unlinks undone {}{extra}",
            self.states,
            self.points,
            self.elapsed.as_secs_f64(),
            self.writes[0],
            self.writes[1],
            self.writes[2],
            self.writes[3],
            self.writes[4],
            self.namespace_undone,
        );
    }
}

/// For each crash point `n` in `points` and each of `runs` runs: `workload(vfs, n)` runs
/// on a duplicate of `base` with `crash_after(n)` and returns what was acknowledged (every
/// thread stopped, the engine dropped); then for each of `seeds` seeds, a duplicate
/// of it is crashed and `verify(vfs, acked, report, context)` checks the recovered state.
/// A failed verification fails the test at once, or, with `BUFPOOL_POWER_KEEP_GOING` set
/// (for triage), after every state was tried, with a summary of the kinds of failure.
/// `BUFPOOL_POWER_POINT=n` tries crash point `n` only (to reproduce a failure).
pub fn explore<A>(
    test: &'static str,
    points: impl IntoIterator<Item = u64>,
    runs: u64,
    seeds: u64,
    base: &SimVfs,
    mut workload: impl FnMut(&SimVfs, u64) -> A,
    mut verify: impl FnMut(&SimVfs, &A, &CrashReport, &Context),
) -> Tally {
    let start = Instant::now();
    let mut tally = Tally::default();
    let keep_going = std::env::var_os("BUFPOOL_POWER_KEEP_GOING").is_some();
    let mut failures: Vec<(String, u64, u64, u64, String)> = Vec::new();
    let only: Option<u64> = std::env::var("BUFPOOL_POWER_POINT")
        .ok()
        .and_then(|v| v.parse().ok());
    for point in points {
        if only.is_some_and(|p| p != point) {
            continue;
        }
        tally.points += 1;
        for r in 0..runs {
            let crashed = base.duplicate();
            let acked = workload(&crashed, point);
            for seed in 0..seeds {
                let vfs = crashed.duplicate();
                let report = vfs.crash(crash_seed(point, r, seed));
                let ctx = Context {
                    test,
                    point,
                    run: r,
                    seed,
                    fates: describe(&report),
                };
                if keep_going {
                    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        verify(&vfs, &acked, &report, &ctx)
                    }));
                    if let Err(payload) = checked {
                        let msg = payload
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        failures.push((msg, point, r, seed, ctx.fates.clone()));
                    }
                } else {
                    verify(&vfs, &acked, &report, &ctx);
                }
                tally.add(&report);
            }
        }
    }
    tally.elapsed = start.elapsed();
    if !failures.is_empty() {
        let mut kinds: std::collections::BTreeMap<String, Vec<(u64, u64, u64)>> =
            Default::default();
        let mut first: std::collections::BTreeMap<String, (&str, &str)> = Default::default();
        for (msg, point, r, seed, fates) in &failures {
            let kind = shape(msg);
            kinds
                .entry(kind.clone())
                .or_default()
                .push((*point, *r, *seed));
            first.entry(kind).or_insert((msg, fates));
        }
        for (kind, at) in &kinds {
            let (msg, fates) = first[kind];
            eprintln!(
                "{test}: {} failures like: {kind}\n  at (crash point, run, seed): {:?}\n  \
                 the first: {msg}\n  its crash:{fates}",
                at.len(),
                &at[..at.len().min(8)]
            );
        }
        tally.print(test, " (all tried; failures below)");
        panic!(
            "{test}: {} of {} crash states failed ({} kinds of failure)",
            failures.len(),
            tally.states,
            kinds.len()
        );
    }
    tally
}

/// [`Context::run`] of a prefix state ([`explore_prefixes`]): its `point` is the sync
/// point's index and its `seed` the number of changes kept.
const PREFIX_RUN: u64 = u64::MAX;

/// One acknowledged commit of a prefix workload: its thread, its sequence number and
/// [`SimVfs::io_count`] read just after the commit returned.
#[derive(Debug, Clone, Copy)]
pub struct Ack {
    pub thread: u32,
    pub seq: u64,
    pub io_count: u64,
}

/// Per thread (up to `threads`), the last sequence number acknowledged before the sync of
/// `point` began: an ack whose I/O count is below the point's was read, so its commit
/// returned, before that sync was issued, and every state of the point must hold it. (An
/// ack read at the same count may have come after: not required, not forbidden.)
pub fn acked_before(acks: &[Ack], point: &SyncPoint, threads: usize) -> Vec<u64> {
    let mut acked = vec![0; threads];
    for a in acks.iter().filter(|a| a.io_count < point.io_count) {
        let t = a.thread as usize;
        acked[t] = acked[t].max(a.seq);
    }
    acked
}

/// CrashMonkey's method on one workload run recorded with [`SimVfs::record_sync_points`]:
/// for every recorded sync (each fdatasync, fsync and directory fsync that made something
/// durable) and every prefix of the changes pending there, in program order (0 kept to all
/// kept), a copy is cut with [`SimVfs::crash_prefix`] and handed to `verify(vfs, point,
/// report, context)`. `BUFPOOL_POWER_POINT=n` tries sync point `n` only. Returns the
/// tally: `points` the sync points, `states` the prefixes verified.
pub fn explore_prefixes(
    test: &'static str,
    points: &[SyncPoint],
    mut verify: impl FnMut(&SimVfs, &SyncPoint, &CrashReport, &Context),
) -> Tally {
    let start = Instant::now();
    let mut tally = Tally::default();
    let only: Option<u64> = std::env::var("BUFPOOL_POWER_POINT")
        .ok()
        .and_then(|v| v.parse().ok());
    for (i, point) in points.iter().enumerate() {
        if only.is_some_and(|p| p != i as u64) {
            continue;
        }
        tally.points += 1;
        for keep in 0..=point.changes {
            let vfs = point.vfs.duplicate();
            let report = vfs.crash_prefix(keep);
            let ctx = Context {
                test,
                point: i as u64,
                run: PREFIX_RUN,
                seed: keep,
                fates: format!(
                    " {} of {} pending changes kept, before the {}{}",
                    keep,
                    point.changes,
                    point.what,
                    describe(&report)
                ),
            };
            verify(&vfs, point, &report, &ctx);
            tally.add(&report);
        }
    }
    tally.elapsed = start.elapsed();
    tally
}

/// Whether `p` is a relation segment file other than segment 0 (`<rel>[_fork].<segno>`).
pub fn is_extra_segment(p: &Path) -> bool {
    p.components().any(|c| c.as_os_str() == "base")
        && p.extension()
            .is_some_and(|e| e.to_string_lossy().parse::<u32>().is_ok())
}

/// A failure message with its numbers (decimal, and hexadecimal after `0x`) blanked, so
/// failures of one kind group together.
fn shape(msg: &str) -> String {
    let mut out = String::new();
    let mut chars = msg.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '0' && chars.peek() == Some(&'x') {
            chars.next();
            while chars.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                chars.next();
            }
            out.push_str("0x#");
        } else if c.is_ascii_digit() {
            while chars.peek().is_some_and(|c| c.is_ascii_digit()) {
                chars.next();
            }
            out.push('#');
        } else {
            out.push(c);
        }
    }
    out
}
