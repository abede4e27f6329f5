//! Where an experiment's data lives: the device (the local disk, or a throttled one
//! brought up by scripts/slow-device.sh for the run and taken down after) and copies of
//! data directories on it.
//!
//! Owns: [`SlowDevice`] (up, settle, down on drop), and folder helpers:
//! [`copy_db`] (tablespace links followed), [`remove_db`], [`dir_bytes`].
//!
//! A run that dies (SIGINT, SIGTERM, SIGKILL, a panic that aborts) runs no drop: each
//! device brought up gets a watchdog, a `bash` in its own process group blocked reading a
//! pipe whose only writer is this process. The kernel closes the pipe when the process
//! ends, however it ends; the watchdog then runs `slow-device.sh down --force --owner
//! TOKEN`, which takes the device down only if it is still the one this run brought up
//! (the token is this process's; a later run's device at the same folder is left alone).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};

use super::progress;

/// scripts/slow-device.sh: `$BUFPOOL_SLOW_DEVICE`, else under the current directory,
/// else in the source tree this binary was built from.
fn slow_device_script() -> PathBuf {
    crate::helper_scripts::project_script("slow-device.sh", "BUFPOOL_SLOW_DEVICE")
}

/// A throttled device brought up for the experiment and taken down when dropped.
pub struct SlowDevice {
    /// The script's `--name` (None: its unnamed device).
    pub name: Option<String>,
    pub mount: PathBuf,
    pub status: String,
    /// The profile it was brought up with.
    pub profile: String,
}

impl SlowDevice {
    /// The device an experiment runs on: `local`, or the profile `name` of
    /// scripts/slow-device.sh mounted under `scratch` when possible (else the local disk,
    /// with a note saying why). Returns the device (None: local) and its description.
    /// `role`: None for the data's device, Some(name) for another one at the same time
    /// (the script's `--name`, e.g. "wal").
    pub fn choose(
        experiment: &str,
        role: Option<&str>,
        name: &str,
        scratch: &Path,
        notes: &mut Vec<String>,
    ) -> Result<(Option<SlowDevice>, String)> {
        if name == "local" {
            return Ok((None, "local disk (not throttled)".to_string()));
        }
        let mount = std::path::absolute(scratch.join(match role {
            None => "slow".to_string(),
            Some(r) => format!("slow-{r}"),
        }))?;
        let what = role.map_or(String::new(), |r| format!(" for the {r}"));
        progress(format!(
            "{experiment}: bringing up the slow device{what} ({name})"
        ));
        Ok(match SlowDevice::up(name, role, &mount)? {
            Ok(d) => {
                let desc = format!("scripts/slow-device.sh profile {name} ({})", d.status);
                (Some(d), desc)
            }
            Err(why) => {
                notes.push(format!(
                    "the slow device{what} ({name}) is unavailable ({why}): ran on the local disk"
                ));
                (None, "local disk (not throttled)".to_string())
            }
        })
    }

    /// Ok(Err(reason)) when the script says it cannot work here (exit 3).
    pub fn up(
        profile: &str,
        name: Option<&str>,
        mount: &Path,
    ) -> Result<std::result::Result<SlowDevice, String>> {
        let script = slow_device_script();
        let named: Vec<&str> = name.map_or(Vec::new(), |n| vec!["--name", n]);
        // Armed before the device exists: a run killed while `up` runs is covered too.
        watch(&script, &named, mount)?;
        let out = Command::new("bash")
            .arg(&script)
            .args(["up", "--profile", profile, "--fresh", "--owner", &owner()])
            .args(&named)
            .arg("--mount")
            .arg(mount)
            .output()
            .with_context(|| format!("running {}", script.display()))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(3) {
            let why = stderr
                .lines()
                .find_map(|l| l.strip_prefix("skip: "))
                .unwrap_or("unavailable")
                .to_string();
            return Ok(Err(why));
        }
        if !out.status.success() {
            bail!("{} up failed: {}", script.display(), stderr.trim());
        }
        let status = Command::new("bash")
            .arg(&script)
            .arg("status")
            .args(&named)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        Ok(Ok(SlowDevice {
            name: name.map(str::to_string),
            mount: mount.to_path_buf(),
            status,
            profile: profile.to_string(),
        }))
    }

    /// Writes every dirty page of the device's file system out with the throttle lifted,
    /// then throttles again: a database copied onto the device just before a run would
    /// otherwise still be going to disk (at the throttled rate, for tens of seconds)
    /// while the run measures, and its writeback would count against the run.
    pub fn settle(&self) -> Result<()> {
        let script = slow_device_script();
        let named: Vec<&str> = self
            .name
            .as_deref()
            .map_or(Vec::new(), |n| vec!["--name", n]);
        let set = |profile: &str| -> Result<()> {
            let out = Command::new("bash")
                .arg(&script)
                .args(["set-profile", profile])
                .args(&named)
                .output()
                .with_context(|| format!("running {}", script.display()))?;
            if !out.status.success() {
                bail!(
                    "{} set-profile {profile} failed: {}",
                    script.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            Ok(())
        };
        set("ssd-nvme")?;
        let synced = Command::new("sync")
            .arg("-f")
            .arg(&self.mount)
            .status()
            .context("running sync -f");
        set(&self.profile)?;
        if !synced?.success() {
            bail!("sync -f {} failed", self.mount.display());
        }
        Ok(())
    }
}

/// This process's token for the devices it brings up: its pid and start time (a pid
/// alone can be reused by a later run).
fn owner() -> String {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN
        .get_or_init(|| {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            format!("{}-{nanos}", std::process::id())
        })
        .clone()
}

/// The write ends of the watchdogs' pipes: held until the process ends (never closed
/// before, so a watchdog fires only when this process is gone).
static WATCHDOGS: Mutex<Vec<std::process::ChildStdin>> = Mutex::new(Vec::new());

/// Starts the watchdog that takes the device `named` at `mount` down once this process
/// has ended (see the module doc). Its output goes nowhere: it must not hold a pipe a
/// caller waits on (a test reading the bench's output would wait for it).
fn watch(script: &Path, named: &[&str], mount: &Path) -> Result<()> {
    use std::os::unix::process::CommandExt as _;
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(r#"cat >/dev/null; exec bash "$0" down --force "$@""#)
        .arg(script)
        .args(named)
        .arg("--mount")
        .arg(mount)
        .args(["--owner", &owner()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .context("starting the slow device's watchdog")?;
    let pipe = child.stdin.take().context("the watchdog's pipe")?;
    WATCHDOGS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(pipe);
    Ok(())
}

impl Drop for SlowDevice {
    fn drop(&mut self) {
        let named: Vec<&str> = self
            .name
            .as_deref()
            .map_or(Vec::new(), |n| vec!["--name", n]);
        let _ = Command::new("bash")
            .arg(slow_device_script())
            .arg("down")
            .args(&named)
            .arg("--mount")
            .arg(&self.mount)
            .args(["--owner", &owner()])
            .status();
    }
}

/// The bytes of every file under `p` (0 for what cannot be read).
pub fn dir_bytes(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|it| {
            it.filter_map(|e| e.ok())
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_bytes(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Where a copy's linked directories go (the log's, `<dir>/wal`, and tablespace `id`'s,
/// `<dir>/base/<id>`, at `ts[id - 1]`); what is not given goes beside the copy, at
/// `<to>-tswal` and `<to>-ts<id>`.
#[derive(Debug, Clone, Default)]
pub struct Places {
    pub wal: Option<PathBuf>,
    pub ts: Vec<PathBuf>,
}

impl Places {
    /// The copy's location for link `name` found in `dir` of the original (`parent`:
    /// the data directory itself, or its `base`).
    fn of(&self, name: &str, in_base: bool, root_to: &Path) -> Result<PathBuf> {
        let given = match (name, in_base) {
            ("wal", false) => self.wal.clone(),
            (id, true) => id
                .parse::<usize>()
                .ok()
                .and_then(|i| self.ts.get(i.checked_sub(1)?).cloned()),
            _ => None,
        };
        let beside = || PathBuf::from(format!("{}-ts{name}", root_to.display()));
        Ok(std::path::absolute(given.unwrap_or_else(beside))?)
    }
}

/// Copies a data directory; a symbolic link (a tablespace, `<dir>/base/<id>`, or the WAL
/// directory, `<dir>/wal`) is replaced by a link to a copy of its location, placed by
/// `places`.
pub fn copy_db(from: &Path, to: &Path, places: &Places) -> Result<()> {
    fn walk(from: &Path, to: &Path, root: Option<(&Path, &Places)>, in_base: bool) -> Result<()> {
        std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
        for e in std::fs::read_dir(from).with_context(|| format!("listing {}", from.display()))? {
            let e = e?;
            let (src, dst) = (e.path(), to.join(e.file_name()));
            let ft = e.file_type()?;
            let name = e.file_name().to_string_lossy().into_owned();
            if let (true, Some((root_to, places))) = (ft.is_symlink(), root) {
                let target = from.join(std::fs::read_link(&src)?);
                let loc = places.of(&name, in_base, root_to)?;
                let _ = std::fs::remove_dir_all(&loc);
                walk(&target, &loc, None, false)?;
                std::os::unix::fs::symlink(&loc, &dst)
                    .with_context(|| format!("linking {} to {}", dst.display(), loc.display()))?;
            } else if ft.is_dir() {
                // Links matter in the data directory and its `base` only.
                let below = root.filter(|_| !in_base && name == "base");
                walk(&src, &dst, below, below.is_some())?;
            } else {
                std::fs::copy(&src, &dst)
                    .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
            }
        }
        Ok(())
    }
    walk(from, to, Some((to, places)), false)
}

/// Removes a copy made by [`copy_db`]: the directory, and the log's and tablespaces'
/// locations wherever its links lead (and the old `<dir>-ts*` places beside it).
pub fn remove_db(dir: &Path) {
    let mut links = vec![dir.join("wal")];
    if let Ok(it) = std::fs::read_dir(dir.join("base")) {
        links.extend(it.filter_map(|e| e.ok()).map(|e| e.path()));
    }
    for link in links {
        if let Ok(target) = std::fs::read_link(&link) {
            let _ = std::fs::remove_dir_all(link.parent().unwrap_or(dir).join(target));
        }
    }
    for id in ["1", "2", "wal"] {
        let _ = std::fs::remove_dir_all(format!("{}-ts{id}", dir.display()));
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_follow_tablespace_links() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        let loc = d.path().join("elsewhere");
        std::fs::create_dir_all(src.join("base/0")).unwrap();
        std::fs::create_dir_all(&loc).unwrap();
        std::fs::write(src.join("base/0/1"), b"x").unwrap();
        std::fs::write(loc.join("2"), b"y").unwrap();
        std::os::unix::fs::symlink(&loc, src.join("base/1")).unwrap();
        let dst = d.path().join("dst");
        copy_db(&src, &dst, &Places::default()).unwrap();
        assert_eq!(std::fs::read(dst.join("base/0/1")).unwrap(), b"x");
        assert_eq!(std::fs::read(dst.join("base/1/2")).unwrap(), b"y");
        let target = std::fs::read_link(dst.join("base/1")).unwrap();
        assert_eq!(
            target,
            std::path::absolute(d.path().join("dst-ts1")).unwrap()
        );
        remove_db(&dst);
        assert!(!dst.exists() && !d.path().join("dst-ts1").exists() && loc.join("2").exists());
    }

    /// The log's link (`<dir>/wal`) and a tablespace's (`<dir>/base/1`) are copied where
    /// `Places` says (their own devices), else beside the copy; `remove_db` removes them
    /// wherever they went, never the originals.
    #[test]
    fn copies_put_the_log_where_asked_and_removal_follows_it() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        let log = d.path().join("log");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::create_dir_all(&log).unwrap();
        std::fs::write(log.join("0000000000000001"), b"w").unwrap();
        std::os::unix::fs::symlink(&log, src.join("wal")).unwrap();
        let ts = d.path().join("ts");
        std::fs::create_dir_all(src.join("base")).unwrap();
        std::fs::create_dir_all(&ts).unwrap();
        std::fs::write(ts.join("16384"), b"t").unwrap();
        std::os::unix::fs::symlink(&ts, src.join("base/1")).unwrap();
        let wal_to = d.path().join("waldev/run-wal");
        let ts_to = d.path().join("tsdev/run-ts1");
        let dst = d.path().join("dst");
        let places = Places {
            wal: Some(wal_to.clone()),
            ts: vec![ts_to.clone()],
        };
        copy_db(&src, &dst, &places).unwrap();
        assert_eq!(std::fs::read_link(dst.join("wal")).unwrap(), wal_to);
        assert_eq!(
            std::fs::read(wal_to.join("0000000000000001")).unwrap(),
            b"w"
        );
        assert_eq!(std::fs::read_link(dst.join("base/1")).unwrap(), ts_to);
        assert_eq!(std::fs::read(ts_to.join("16384")).unwrap(), b"t");
        remove_db(&dst);
        assert!(!dst.exists() && !wal_to.exists() && !ts_to.exists());
        assert!(log.join("0000000000000001").exists() && ts.join("16384").exists());
        let beside = d.path().join("beside");
        copy_db(&src, &beside, &Places::default()).unwrap();
        let tswal = d.path().join("beside-tswal");
        assert_eq!(std::fs::read_link(beside.join("wal")).unwrap(), tswal);
        remove_db(&beside);
        assert!(!tswal.exists());
    }
}
