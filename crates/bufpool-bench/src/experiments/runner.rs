//! The experiment runner: the skeleton every `bufpool experiment NAME` shares, so that an
//! experiment declares only its arguments, its configurations, how to measure one and a
//! pure `targets(rows)`.
//!
//! Owns: the flags every experiment takes ([`Common`]); the scratch folder (a fresh
//! `NAME-*` folder under `--dir`, removed by [`Runner::finish`]); the device the data
//! lives on (the local disk, or a [`SlowDevice`] brought up by [`Runner::use_device`] and
//! taken down when the runner is done with it); the template database (loaded once by
//! [`Runner::template`], copied fresh for every run by [`Runner::fresh_copy`]); progress
//! lines; the order of repeated runs ([`schedule`]); and the report's header and common
//! metadata (`experiment`, `command`, `argv`, `profile`, `cores`, `machine`, `device`).
//! Invariants: every run's data lives under [`Runner::data_root`], on the device once one
//! is up; nothing of the scratch folder outlives `finish`.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

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
        (self.bytes / 4 / (1 << 20)).max(16)
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
    /// `--wal-device` gave one (for `commands::init`'s `waldir`), else None (shared).
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
        crate::commands::init(&dir, scale, 100, &ts, waldir.as_deref(), sets)?;
        let bytes = dir_bytes(&dir) + ts.iter().map(|d| dir_bytes(d)).sum::<u64>();
        Ok(Template { dir, bytes })
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
