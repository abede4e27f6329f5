//! The experiment runner: the skeleton every `bufpool experiment NAME` shares, so that an
//! experiment declares only its arguments, its configurations, how to measure one and a
//! pure `targets(rows)`.
//!
//! Owns: the flags every experiment takes ([`Common`]); the scratch folder (a fresh
//! `NAME-*` folder under `--dir`, removed by [`Runner::finish`]); the device the data
//! lives on (the local disk, or a [`SlowDevice`] brought up by [`Runner::use_device`] and
//! taken down when the runner is done with it); the template database (loaded once by
//! [`Runner::template`], copied fresh for every run by [`Runner::fresh_copy`]); progress
//! lines and steps (an experiment declares its [`Steps`] with [`Runner::plan`] before its
//! main loop, then each [`Runner::step`] prints `step k of n (elapsed, about ... left):
//! label`, the estimate from [`estimate`]); the order of repeated runs ([`schedule`]);
//! and the report's header and common metadata (`experiment`, `command`, `argv`,
//! `profile`, `cores`, `machine`, `device`).
//! Invariants: every run's data lives under [`Runner::data_root`], on the device once one
//! is up; nothing of the scratch folder outlives `finish`; a step line never shows k > n.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::{json, Map, Value};

use super::device::{copy_db, dir_bytes, remove_db, Places, SlowDevice};
use super::{progress, Report, RunInfo};

/// What the device is when none was brought up (also `RunInfo::metadata`'s default).
const LOCAL_DISK: &str = "local disk (not throttled)";

/// Flags every experiment takes (before or after its name).
/// `--device`, for the experiments whose data can go on a throttled device.
#[derive(Debug, Clone, clap::Args)]
pub struct DeviceArg {
    /// Where the data goes: `local`, or a scripts/slow-device.sh profile (ssd-nvme,
    /// ssd-sata, hdd, hdd-2007, slow10; root only, else the local disk with a note).
    #[arg(long, default_value = "ssd-sata")]
    pub device: String,
    /// Where the write-ahead log goes: `shared` (in the data directory, on `--device`),
    /// `local` (the local disk, not throttled), or a scripts/slow-device.sh profile (a
    /// second throttled device: the log on its own device, as the seed threads ran).
    #[arg(long, default_value = "shared")]
    pub wal_device: String,
    /// Where the two tablespaces of the experiments that make them go: `shared` (beside
    /// the data, on `--device`), `local`, or a profile: two more throttled devices, one
    /// per tablespace (seed 004's question: one writeback context per device or shared).
    #[arg(long, default_value = "shared")]
    pub ts_devices: String,
}

/// A device beside the data's: the log's (`wal`) or a tablespace's (`ts1`, `ts2`).
struct Other {
    role: &'static str,
    /// None: the local disk (a folder in the scratch directory).
    device: Option<SlowDevice>,
    root: PathBuf,
    desc: String,
}

#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// Print one JSON object instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    /// Repetitions of each measurement (the report gives median, min and max).
    #[arg(long, global = true, default_value_t = 3, value_parser = clap::value_parser!(u32).range(3..))]
    pub repeats: u32,
    /// Where to make the scratch data directory (a fresh subdirectory, removed afterwards).
    /// Default: ./bufpool-data/experiments, or the system temp directory if that cannot be
    /// created.
    #[arg(long, global = true, value_name = "PATH")]
    pub dir: Option<PathBuf>,
    /// A short version (each experiment's help says what it shortens).
    #[arg(long, global = true)]
    pub quick: bool,
}

impl Common {
    /// The folder the scratch folder goes in.
    pub fn parent_dir(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(default_scratch_parent)
    }

    /// `--quick`, or a debug build (too slow for the full sizes).
    pub fn short(&self) -> bool {
        self.quick || cfg!(debug_assertions)
    }

    /// `--repeats`, or 1 with `--quick` (experiments whose runs last seconds each).
    pub fn repeats_unless_quick(&self) -> usize {
        if self.quick {
            1
        } else {
            self.repeats as usize
        }
    }
}

fn default_scratch_parent() -> PathBuf {
    let local = PathBuf::from("bufpool-data").join("experiments");
    if std::fs::create_dir_all(&local).is_ok() {
        local
    } else {
        std::env::temp_dir()
    }
}

/// A template database: loaded once, copied for every run.
#[derive(Debug, Clone)]
pub struct Template {
    pub dir: PathBuf,
    /// Bytes of its files, tablespaces included.
    pub bytes: u64,
}

impl Template {
    /// A pool of a quarter of the data (at least 16 MB), in MB.
    pub fn quarter_pool_mb(&self) -> u64 {
        Template::quarter_pool_mb_of(self.bytes)
    }

    /// A pool of a quarter of `bytes` of data (at least 16 MB), in MB.
    pub fn quarter_pool_mb_of(bytes: u64) -> u64 {
        (bytes / 4 / (1 << 20)).max(16)
    }
}

/// Tablespace locations for a database at `dir` (none unless `on`).
pub fn ts_dirs(dir: &Path, on: bool) -> Vec<PathBuf> {
    if on {
        (1..=2)
            .map(|id| PathBuf::from(format!("{}-ts{id}", dir.display())))
            .collect()
    } else {
        Vec::new()
    }
}

/// One experiment's run: scratch folder, device, notes, and what the report needs.
pub struct Runner {
    name: &'static str,
    pub common: Common,
    command: Vec<String>,
    scratch: tempfile::TempDir,
    device: Option<SlowDevice>,
    device_desc: String,
    /// The log's and the tablespaces' own devices (`--wal-device`, `--ts-devices`).
    others: Vec<Other>,
    io: String,
    data_root: PathBuf,
    /// Lines printed under the report's table.
    pub notes: Vec<String>,
    stop: Arc<AtomicBool>,
    /// The declared steps and how far they got ([`Runner::plan`], [`Runner::step`]).
    steps: Mutex<StepClock>,
}

impl Runner {
    /// Makes the scratch folder `NAME-*` under `--dir`; data goes to `<scratch>/data`
    /// until [`Runner::use_device`] says otherwise.
    pub fn new(name: &'static str, common: Common, command: Vec<String>) -> Result<Runner> {
        let parent = common.parent_dir();
        std::fs::create_dir_all(&parent)
            .with_context(|| format!("creating {}", parent.display()))?;
        let scratch = tempfile::Builder::new()
            .prefix(&format!("{name}-"))
            .tempdir_in(&parent)
            .with_context(|| format!("creating a scratch directory in {}", parent.display()))?;
        let data_root = std::path::absolute(scratch.path().join("data"))?;
        Ok(Runner {
            name,
            common,
            command,
            scratch,
            device: None,
            device_desc: LOCAL_DISK.to_string(),
            others: Vec::new(),
            io: "buffered".to_string(),
            data_root,
            notes: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            steps: Mutex::new(StepClock::default()),
        })
    }

    /// Puts the data on `profile` (`local`, or a scripts/slow-device.sh profile mounted
    /// under the scratch folder; the local disk with a note when that cannot be had).
    pub fn use_device(&mut self, arg: &DeviceArg) -> Result<()> {
        let profile = arg.device.as_str();
        let (device, desc) = SlowDevice::choose(
            self.name,
            None,
            profile,
            self.scratch.path(),
            &mut self.notes,
        )?;
        if let Some(d) = &device {
            self.data_root = std::path::absolute(d.mount.join("bufpool"))?;
        }
        (self.device, self.device_desc) = (device, desc);
        let mut roles: Vec<(&'static str, &str)> = Vec::new();
        if arg.wal_device != "shared" {
            roles.push(("wal", &arg.wal_device));
        }
        if arg.ts_devices != "shared" {
            roles.extend([("ts1", arg.ts_devices.as_str()), ("ts2", &arg.ts_devices)]);
        }
        for (role, profile) in roles {
            let (device, desc) = SlowDevice::choose(
                self.name,
                Some(role),
                profile,
                self.scratch.path(),
                &mut self.notes,
            )?;
            let root = match &device {
                Some(d) => d.mount.join(format!("bufpool-{role}")),
                None => self.scratch.path().join(role),
            };
            let root = std::path::absolute(root)?;
            self.others.push(Other {
                role,
                device,
                root,
                desc,
            });
        }
        Ok(())
    }

    fn other(&self, role: &str) -> Option<&Other> {
        self.others.iter().find(|o| o.role == role)
    }

    /// Where the data directory `name` keeps its log: on the log's own device when
    /// `--wal-device` gave one (for `cmd::init::init`'s `waldir`), else None (shared).
    pub fn waldir(&self, name: &str) -> Option<PathBuf> {
        self.other("wal")
            .map(|o| o.root.join(format!("{name}-wal")))
    }

    /// The two tablespace locations of the data directory `name` (none unless `on`): on
    /// their own devices with `--ts-devices`, else beside it on the data's device.
    pub fn ts_dirs(&self, name: &str, on: bool) -> Result<Vec<PathBuf>> {
        let beside = ts_dirs(&self.data_root()?.join(name), on);
        Ok((1..=2)
            .zip(beside)
            .map(|(id, b)| {
                self.other(&format!("ts{id}"))
                    .map_or(b, |o| o.root.join(format!("{name}-ts{id}")))
            })
            .collect())
    }

    /// Where a copy named `name` puts its linked directories ([`copy_db`]).
    fn places(&self, name: &str) -> Result<Places> {
        let ts = if self.other("ts1").is_some() {
            self.ts_dirs(name, true)?
        } else {
            Vec::new()
        };
        Ok(Places {
            wal: self.waldir(name),
            ts,
        })
    }

    /// How the runs do their I/O, for the header and `device.io` ("buffered" unless set).
    pub fn set_io(&mut self, io: impl Into<String>) {
        self.io = io.into();
    }

    /// Takes the device down (the runs on it are done); the scratch folder stays.
    pub fn release_device(&mut self) {
        self.device = None;
        // The log's and tablespaces' devices go down too; what they were stays for the
        // report's header and `device`.
        for o in &mut self.others {
            o.device = None;
        }
    }

    pub fn scratch(&self) -> &Path {
        self.scratch.path()
    }

    /// Where the runs' data directories go (on the device once one is up), made.
    pub fn data_root(&self) -> Result<&Path> {
        std::fs::create_dir_all(&self.data_root)
            .with_context(|| format!("creating {}", self.data_root.display()))?;
        Ok(&self.data_root)
    }

    pub fn device_desc(&self) -> &str {
        &self.device_desc
    }

    pub fn io(&self) -> &str {
        &self.io
    }

    /// Set by nobody: experiments run to their end (the bench's Ctrl-C flag).
    pub fn stop(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// A progress line to stderr, prefixed with the experiment's name.
    pub fn progress(&self, msg: impl AsRef<str>) {
        progress(format!("{}: {}", self.name, msg.as_ref()));
    }

    /// Declares the steps to come (before the main loop; a later plan starts over).
    pub fn plan(&self, steps: Steps) {
        *self.step_clock() = StepClock::new(steps);
    }

    /// Begins the next step (the one before it ends now) and prints its line:
    /// `step k of n (m:ss elapsed, about m:ss left): label`, elapsed since the first step
    /// (see [`step_line`]).
    pub fn step(&self, label: impl AsRef<str>) {
        let line = self.step_clock().begin(label.as_ref());
        self.progress(line);
    }

    fn step_clock(&self) -> std::sync::MutexGuard<'_, StepClock> {
        self.steps.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The report's note on where the experiment's runs were kept: `runs in <--dir>/NAME/
    /// (bufpool report charts them)`.
    pub fn runs_note(&self) -> String {
        format!(
            "runs in {}/{}/ (bufpool report charts them)",
            self.common.parent_dir().display(),
            self.name
        )
    }

    /// `<--dir>/NAME`, made: where run files that outlive the scratch folder go.
    pub fn out_dir(&self) -> Result<PathBuf> {
        let dir = std::path::absolute(self.common.parent_dir().join(self.name))?;
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(dir)
    }

    /// Loads a scale-`scale` pgbench template under the data root (with two tablespaces
    /// if `tablespaces`), writing `sets` into its bufpool.conf.
    pub fn template(
        &self,
        scale: u32,
        tablespaces: bool,
        sets: &[(String, String)],
    ) -> Result<Template> {
        let dir = self.data_root()?.join("template");
        self.progress(format!("loading a scale-{scale} template"));
        let ts = self.ts_dirs("template", tablespaces)?;
        let waldir = self.waldir("template");
        crate::cmd::init::init(&dir, scale, 100, &ts, waldir.as_deref(), sets)?;
        let bytes = dir_bytes(&dir) + ts.iter().map(|d| dir_bytes(d)).sum::<u64>();
        Ok(Template { dir, bytes })
    }

    /// A YCSB template of `records` records (`init --workload ycsb`) at `<data
    /// root>/template-ycsb`, the log beside it as the TPC-B template's.
    pub fn template_ycsb(&self, records: u64, sets: &[(String, String)]) -> Result<Template> {
        self.progress(format!("loading a YCSB template of {records} records"));
        self.template_of(
            "template-ycsb",
            crate::cmd::init::Load::Ycsb { records },
            sets,
        )
    }

    /// A TPC-C template of `warehouses` warehouses (`init --workload tpcc`) at `<data
    /// root>/template-tpcc`, the log beside it as the TPC-B template's.
    pub fn template_tpcc(&self, warehouses: u32, sets: &[(String, String)]) -> Result<Template> {
        self.progress(format!(
            "loading a TPC-C template of {warehouses} warehouses"
        ));
        self.template_of(
            "template-tpcc",
            crate::cmd::init::Load::Tpcc { warehouses },
            sets,
        )
    }

    fn template_of(
        &self,
        name: &str,
        load: crate::cmd::init::Load,
        sets: &[(String, String)],
    ) -> Result<Template> {
        let dir = self.data_root()?.join(name);
        let waldir = self.waldir(name);
        crate::cmd::init::init_load(&dir, load, &[], waldir.as_deref(), sets)?;
        Ok(Template {
            bytes: dir_bytes(&dir),
            dir,
        })
    }

    /// A fresh copy of `template` at `<data root>/name` (an old one removed first),
    /// written out to the device before it is returned (see [`SlowDevice::settle`]).
    pub fn fresh_copy(&self, template: &Template, name: &str) -> Result<PathBuf> {
        let dir = self.data_root()?.join(name);
        remove_db(&dir);
        copy_db(&template.dir, &dir, &self.places(name)?)?;
        let others = self.others.iter().filter_map(|o| o.device.as_ref());
        for d in self.device.iter().chain(others) {
            d.settle()?;
        }
        Ok(dir)
    }

    /// The report header: command, build profile, cores, then `what`.
    pub fn header(&self, what: &str) -> String {
        let run = RunInfo::new(&self.command);
        format!(
            "{} | profile {} | {} cores | {what}",
            run.command, run.profile, run.cores
        )
    }

    /// The header's usual ending: the device and its I/O (and the log's device when it
    /// has its own).
    pub fn device_line(&self) -> String {
        let mut line = format!("device {}, {}", self.device_desc, self.io);
        for o in &self.others {
            line.push_str(&format!("; {} on {}", o.role, o.desc));
        }
        line
    }

    /// The metadata every report carries (see [`RunInfo::metadata`]), `device` as run.
    pub fn metadata(&self) -> Map<String, Value> {
        let mut m = RunInfo::new(&self.command).metadata(self.name, &self.command);
        m.insert(
            "device".into(),
            json!({"profile": self.device_desc, "io": self.io,
                   "wal": self.other("wal").map_or("shared", |o| &o.desc),
                   "tablespaces": self.other("ts1").map_or("shared", |o| &o.desc)}),
        );
        m
    }

    /// Takes the device down, removes the scratch folder and returns the report, the
    /// runner's notes after `report`'s own.
    pub fn finish(self, mut report: Report) -> Result<Report> {
        if let Some(line) = self.step_clock().done_line() {
            self.progress(line);
        }
        drop(self.device);
        drop(self.others);
        let path = self.scratch.path().to_path_buf();
        self.scratch
            .close()
            .with_context(|| format!("removing {}", path.display()))?;
        let mut notes = self.notes;
        notes.append(&mut report.notes);
        report.notes = notes;
        Ok(report)
    }
}

/// Runs experiment `name` in a fresh [`Runner`]: `f` measures and makes the report, then
/// the runner takes the device down and removes the scratch folder (also on an error).
pub fn run(
    name: &'static str,
    common: Common,
    command: Vec<String>,
    f: impl FnOnce(&mut Runner) -> Result<Report>,
) -> Result<Report> {
    let mut r = Runner::new(name, common, command)?;
    let report = f(&mut r)?;
    r.finish(report)
}

/// The order of repeated runs: every configuration once in the first round, then those
/// `repeated` picks again round after round (alternated, so that a drift of the shared
/// machine falls on all of them alike). Each with its repeat (0 for the first).
pub fn schedule<C>(
    configs: &[C],
    repeats: usize,
    repeated: impl Fn(&C) -> bool,
) -> Vec<(&C, usize)> {
    let mut out = Vec::new();
    for repeat in 0..repeats.max(1) {
        for c in configs {
            if repeat == 0 || repeated(c) {
                out.push((c, repeat));
            }
        }
    }
    out
}

/// The steps an experiment plans, in order: each with its expected seconds when the
/// experiment knows its length (a run of `--seconds`), else None.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Steps(Vec<Option<f64>>);

impl Steps {
    pub fn new() -> Steps {
        Steps::default()
    }

    /// `n` more steps of unknown length.
    pub fn untimed(mut self, n: usize) -> Steps {
        self.0.extend(std::iter::repeat_n(None, n));
        self
    }

    /// `n` more steps of about `seconds` each.
    pub fn timed(mut self, n: usize, seconds: f64) -> Steps {
        self.0.extend(std::iter::repeat_n(Some(seconds), n));
        self
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// Where the declared steps stand: when the first and the current step began, and how
/// long each finished one took. [`Runner`] keeps one per experiment; `bufpool seeds` one
/// over all the experiments it runs.
#[derive(Debug, Default)]
pub struct StepClock {
    plan: Steps,
    first: Option<Instant>,
    current: Option<Instant>,
    took: Vec<f64>,
}

impl StepClock {
    /// A clock for `plan`, no step begun.
    pub fn new(plan: Steps) -> StepClock {
        StepClock {
            plan,
            ..StepClock::default()
        }
    }

    /// Begins the next step (the one before it ends now): its line (see [`step_line`]).
    pub fn begin(&mut self, label: &str) -> String {
        let now = Instant::now();
        if let Some(began) = self.current {
            self.took.push((now - began).as_secs_f64());
        }
        let first = *self.first.get_or_insert(now);
        self.current = Some(now);
        step_line(&self.plan, &self.took, (now - first).as_secs_f64(), label)
    }

    /// The line [`Runner::finish`] prints: the steps taken (of the plan, when fewer) and
    /// the time since the first; None if no step began.
    pub fn done_line(&self) -> Option<String> {
        let seconds = self.first?.elapsed().as_secs_f64();
        let k = self.took.len() + 1;
        let of = if k < self.plan.len() {
            format!(" of {} planned", self.plan.len())
        } else {
            String::new()
        };
        Some(format!("done: {k}{of} steps in {}", clock(seconds.floor())))
    }
}

/// Step `took.len() + 1` begins, `took` the seconds of the steps before it: the count to
/// show (the plan's, grown to k once k passes it) and the seconds left, the step beginning
/// included. A planned step's seconds count scaled by what the finished planned steps
/// took over what they declared (as declared before any finished); a step of unknown
/// length counts as the mean of the finished ones of unknown length, else of all finished
/// ones. None when a step left has no basis (none finished, none declared), and past the
/// plan (how many more come is unknown).
pub fn estimate(plan: &Steps, took: &[f64]) -> (usize, Option<f64>) {
    let k = took.len() + 1;
    if k > plan.len() {
        return (k, None);
    }
    let done = plan.0.iter().zip(took);
    let (declared, actual) = done
        .clone()
        .filter_map(|(d, t)| d.map(|d| (d, *t)))
        .fold((0.0, 0.0), |(d0, t0), (d, t)| (d0 + d, t0 + t));
    let scale = if declared > 0.0 {
        actual / declared
    } else {
        1.0
    };
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let unknown: Vec<f64> = done.filter(|(d, _)| d.is_none()).map(|(_, t)| *t).collect();
    let per_step = mean(&unknown).or_else(|| mean(took));
    let left = plan.0[k - 1..]
        .iter()
        .map(|d| d.map(|d| d * scale).or(per_step))
        .sum();
    (plan.len(), left)
}

/// The text of a step line (after the experiment's name): `step k of n (m:ss elapsed,
/// about m:ss left): label`. The time left is left out when [`estimate`] has none; past
/// the plan, n is k and the line says how many were planned instead.
pub fn step_line(plan: &Steps, took: &[f64], elapsed: f64, label: &str) -> String {
    let k = took.len() + 1;
    let (n, left) = estimate(plan, took);
    let mut when = format!("{} elapsed", clock(elapsed.floor()));
    if k > plan.len() {
        match plan.len() {
            0 => when.push_str(", none planned"),
            p => when.push_str(&format!(", more than the {p} planned")),
        }
    } else if let Some(left) = left {
        when.push_str(&format!(", about {} left", clock(left.ceil())));
    }
    format!("step {k} of {n} ({when}): {label}")
}

/// Whole seconds as `m:ss`, or `h:mm:ss` from an hour on (0 for a negative or NaN).
pub fn clock(seconds: f64) -> String {
    let s = if seconds.is_finite() && seconds > 0.0 {
        seconds as u64
    } else {
        0
    };
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// `(name, value)` pairs as owned knob settings.
pub fn knobs<K: AsRef<str>, V: AsRef<str>>(kv: &[(K, V)]) -> Vec<(String, String)> {
    kv.iter()
        .map(|(k, v)| (k.as_ref().to_string(), v.as_ref().to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_repeats_only_the_chosen_alternated() {
        let order: Vec<String> = schedule(&["a", "b", "c"], 3, |c| *c != "b")
            .into_iter()
            .map(|(c, i)| format!("{c}{i}"))
            .collect();
        assert_eq!(order, ["a0", "b0", "c0", "a1", "c1", "a2", "c2"]);
        assert_eq!(
            schedule(&["a"], 0, |_| true).len(),
            1,
            "no repeats runs once"
        );
    }

    #[test]
    fn a_clock_reads_m_ss_then_h_mm_ss() {
        let cases = [
            (0.0, "0:00"),
            (42.9, "0:42"),
            (130.0, "2:10"),
            (3599.0, "59:59"),
            (3600.0, "1:00:00"),
            (3725.0, "1:02:05"),
            (36_061.0, "10:01:01"),
            (-5.0, "0:00"),
            (f64::NAN, "0:00"),
        ];
        for (seconds, text) in cases {
            assert_eq!(clock(seconds), text, "{seconds} s");
        }
    }

    #[test]
    fn the_time_left_is_the_mean_of_finished_steps_when_none_is_declared() {
        let plan = Steps::new().untimed(4);
        assert_eq!(
            estimate(&plan, &[]),
            (4, None),
            "no basis before a step ends"
        );
        assert_eq!(estimate(&plan, &[10.0]), (4, Some(30.0)));
        assert_eq!(estimate(&plan, &[10.0, 20.0]), (4, Some(30.0)));
        assert_eq!(estimate(&plan, &[1.0, 2.0, 3.0]), (4, Some(2.0)));
    }

    #[test]
    fn declared_seconds_give_the_time_left_scaled_by_what_the_finished_took() {
        let plan = Steps::new().timed(3, 10.0);
        assert_eq!(
            estimate(&plan, &[]),
            (3, Some(30.0)),
            "as declared at first"
        );
        assert_eq!(estimate(&plan, &[20.0]), (3, Some(40.0)), "runs take twice");
        // Two declared steps, then two of unknown length.
        let mixed = Steps::new().timed(2, 10.0).untimed(2);
        assert_eq!(mixed.len(), 4);
        assert_eq!(
            estimate(&mixed, &[]),
            (4, None),
            "the unknown ones have no basis"
        );
        // 15 s for the first: the second counts 15, the unknown ones the mean, 15.
        assert_eq!(estimate(&mixed, &[15.0]), (4, Some(45.0)));
        // Once one of unknown length finished, the others count as it did.
        assert_eq!(estimate(&mixed, &[15.0, 15.0, 4.0]), (4, Some(4.0)));
    }

    #[test]
    fn past_the_plan_n_grows_with_k_and_no_time_left_is_claimed() {
        let plan = Steps::new().untimed(2);
        assert_eq!(estimate(&plan, &[5.0]), (2, Some(5.0)));
        assert_eq!(estimate(&plan, &[5.0, 5.0]), (3, None));
        assert_eq!(estimate(&plan, &[5.0, 5.0, 5.0]), (4, None));
        assert_eq!(
            step_line(&plan, &[5.0, 5.0], 10.2, "x"),
            "step 3 of 3 (0:10 elapsed, more than the 2 planned): x"
        );
        assert_eq!(
            step_line(&Steps::new(), &[], 0.0, "x"),
            "step 1 of 1 (0:00 elapsed, none planned): x"
        );
    }

    #[test]
    fn a_step_line_says_k_of_n_elapsed_and_about_what_is_left() {
        let plan = Steps::new().untimed(12);
        assert_eq!(
            step_line(&plan, &[], 0.0, "lru, round 1"),
            "step 1 of 12 (0:00 elapsed): lru, round 1"
        );
        assert_eq!(
            step_line(&plan, &[21.0, 21.0], 42.3, "lru, round 1"),
            "step 3 of 12 (0:42 elapsed, about 3:30 left): lru, round 1"
        );
        // The time left is rounded up: a last step of 0.2 s is "about 0:01 left".
        assert_eq!(
            step_line(&Steps::new().untimed(2), &[0.2], 0.2, "b"),
            "step 2 of 2 (0:00 elapsed, about 0:01 left): b"
        );
        let timed = Steps::new().timed(2, 3600.0);
        assert_eq!(
            step_line(&timed, &[], 0.0, "c4"),
            "step 1 of 2 (0:00 elapsed, about 2:00:00 left): c4"
        );
    }

    #[test]
    fn the_done_line_says_when_fewer_steps_ran_than_planned() {
        let parent = tempfile::tempdir().unwrap();
        let r = runner_in(parent.path(), "shared");
        assert!(r.step_clock().done_line().is_none(), "no step, no line");
        r.plan(Steps::new().untimed(3));
        r.step("a");
        r.step("b");
        let done = r.step_clock().done_line().unwrap();
        assert!(
            done.starts_with("done: 2 of 3 planned steps in 0:0"),
            "{done}"
        );
        r.step("c");
        r.step("d");
        let done = r.step_clock().done_line().unwrap();
        assert!(done.starts_with("done: 4 steps in"), "{done}");
        assert_eq!(r.step_clock().took.len(), 3);
    }

    /// A quick runner with its scratch folder under `parent`, on the local disk, its log
    /// and tablespaces on `others` (`shared` or `local`).
    fn runner_in(parent: &Path, others: &str) -> Runner {
        let common = Common {
            json: true,
            repeats: 3,
            dir: Some(parent.to_path_buf()),
            quick: true,
        };
        let mut r = Runner::new("t", common, vec!["bufpool".into()]).unwrap();
        r.use_device(&DeviceArg {
            device: "local".into(),
            wal_device: others.into(),
            ts_devices: others.into(),
        })
        .unwrap();
        r
    }

    #[test]
    fn the_runner_keeps_its_data_in_the_scratch_folder_and_removes_it() {
        let parent = tempfile::tempdir().unwrap();
        let mut r = runner_in(parent.path(), "shared");
        let root = r.data_root().unwrap().to_path_buf();
        assert!(root.starts_with(std::path::absolute(r.scratch()).unwrap()));
        let m = r.metadata();
        assert_eq!(m["device"]["profile"], LOCAL_DISK);
        assert_eq!(m["experiment"], "t");
        r.notes.push("runner".into());
        let report = Report {
            header: r.header(&r.device_line()),
            figures: Vec::new(),
            ratios: Vec::new(),
            metadata: m,
            notes: vec!["own".into()],
            tables: Vec::new(),
        };
        let report = r.finish(report).unwrap();
        assert_eq!(report.notes, ["runner", "own"]);
        assert!(!root.exists());
    }

    /// `--wal-device` and `--ts-devices` give a copy its log and tablespaces elsewhere
    /// (here the local disk: folders in the scratch directory), and the report still
    /// names them after the devices are released (the report is made after).
    #[test]
    fn the_log_and_tablespaces_go_where_asked_and_the_report_says_so() {
        let parent = tempfile::tempdir().unwrap();
        let mut r = runner_in(parent.path(), "local");
        let scratch = std::path::absolute(r.scratch()).unwrap();
        assert_eq!(r.waldir("run"), Some(scratch.join("wal/run-wal")));
        assert_eq!(
            r.ts_dirs("run", true).unwrap(),
            [scratch.join("ts1/run-ts1"), scratch.join("ts2/run-ts2")]
        );
        assert!(r.ts_dirs("run", false).unwrap().is_empty());
        r.release_device();
        let m = r.metadata();
        assert_eq!(m["device"]["wal"], LOCAL_DISK);
        assert_eq!(m["device"]["tablespaces"], LOCAL_DISK);
        assert!(r.device_line().contains("wal on local disk"));
        let shared = runner_in(parent.path(), "shared");
        assert_eq!(shared.waldir("run"), None);
        assert_eq!(shared.metadata()["device"]["wal"], "shared");
    }
}
