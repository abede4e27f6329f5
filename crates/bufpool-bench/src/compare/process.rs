//! Runs one engine's phase as a child process and measures what the child cost: wall
//! time, CPU time and peak resident memory (from `wait4`'s rusage) and bytes it caused to
//! be written to storage (`write_bytes` of `/proc/self/io`, which takes in the I/O of
//! children when they are reaped, read before the spawn and after the reap; this process
//! does no I/O of its own meanwhile), and bytes the data directory's block device wrote
//! (its `/sys/dev/block/M:m/stat`, after a `syncfs` of that file system).
//!
//! Why the device's count: `write_bytes` counts a page-cache folio's whole size each time
//! a write dirties a clean one, and Linux 6.x ext4 uses large folios, so an 8 KiB write
//! after an fdatasync can count 1 MiB or more (seen here: 22 GB of `write_bytes` for
//! 228 MB passed to write(2) in 5 s). The device's sector count is what reached storage;
//! its catch is that it also counts anything else writing to that device meanwhile.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::tpcb::driver::written::device_written;

/// What a finished child cost.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub wall_s: f64,
    /// User plus system CPU time, s.
    pub cpu_s: f64,
    /// Its largest resident set, bytes.
    pub max_rss_bytes: u64,
    /// `write_bytes` of /proc: page-cache folios it dirtied, whole (see the module doc).
    pub write_bytes: u64,
    /// Bytes it passed to write(2) and friends (`wchar`).
    pub wchar: u64,
    /// Bytes the data directory's device wrote meanwhile, if its counters were found.
    pub device_write_bytes: Option<u64>,
}

/// A field of this process's /proc/self/io (reaped children included), or 0 where /proc
/// has no I/O accounting.
fn io_self(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// `write_bytes` of this process (reaped children included), or 0 where /proc has no
/// I/O accounting.
pub fn write_bytes_self() -> u64 {
    io_self("write_bytes")
}

/// Where [`run_measured`] keeps a child's stderr: beside its stdout file, `NAME.stderr.log`.
pub fn stderr_log(stdout_file: &Path) -> std::path::PathBuf {
    stdout_file.with_extension("stderr.log")
}

/// Copies the child's stderr, line by line as it comes, to ours (each line after
/// `label`, so the progress lines of a long run show live) and to `log`.
fn tee_stderr(
    child_err: std::process::ChildStderr,
    label: String,
    log: std::fs::File,
) -> std::sync::mpsc::Receiver<()> {
    let (done, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::{BufRead, Write};
        let mut log = std::io::BufWriter::new(log);
        for line in std::io::BufReader::new(child_err).split(b'\n') {
            let Ok(line) = line else { break };
            let text = String::from_utf8_lossy(&line);
            eprintln!("  {label} | {text}");
            let _ = writeln!(log, "{text}");
        }
        let _ = log.flush();
        let _ = done.send(());
    });
    rx
}

/// Runs `cmd` with stdout to `stdout_file` and stderr both shown live (each line after
/// `label`) and kept in [`stderr_log`], and returns its usage; an exit other than 0 is an
/// error that quotes the last lines of both.
pub fn run_measured(
    cmd: &mut Command,
    label: &str,
    stdout_file: &Path,
    data_dir: &Path,
) -> Result<Usage> {
    let out = std::fs::File::create(stdout_file)
        .with_context(|| format!("creating {}", stdout_file.display()))?;
    let err_path = stderr_log(stdout_file);
    let err_log = std::fs::File::create(&err_path)
        .with_context(|| format!("creating {}", err_path.display()))?;
    let io_before = write_bytes_self();
    let wchar_before = io_self("wchar");
    let dev_before = device_written(data_dir);
    let started = Instant::now();
    let mut child = cmd
        .stdout(Stdio::from(out))
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {cmd:?}"))?;
    let tee = child
        .stderr
        .take()
        .map(|e| tee_stderr(e, label.to_string(), err_log));
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own unreaped child (std's `Child` is never waited on, so
        // nothing else reaps it); `status` and `ru` are valid for writes.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("waiting for the child process");
        }
    }
    drop(child);
    if let Some(t) = tee {
        // The pipe ends with the child, unless a process it left running holds its
        // stderr (a server it started): then the copy goes on in the background rather
        // than hold the comparison up.
        let _ = t.recv_timeout(std::time::Duration::from_secs(2));
    }
    let wall_s = started.elapsed().as_secs_f64();
    let io_after = write_bytes_self();
    let wchar_after = io_self("wchar");
    let dev_after = device_written(data_dir);
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let usage = Usage {
        wall_s,
        cpu_s: tv(ru.ru_utime) + tv(ru.ru_stime),
        max_rss_bytes: ru.ru_maxrss.max(0) as u64 * 1024,
        write_bytes: io_after.saturating_sub(io_before),
        wchar: wchar_after.saturating_sub(wchar_before),
        device_write_bytes: dev_before.zip(dev_after).map(|(b, a)| a.saturating_sub(b)),
    };
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let mut text = std::fs::read_to_string(stdout_file).unwrap_or_default();
        text.push_str(&std::fs::read_to_string(&err_path).unwrap_or_default());
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        let how = if libc::WIFSIGNALED(status) {
            format!("killed by signal {}", libc::WTERMSIG(status))
        } else {
            format!("exit status {}", libc::WEXITSTATUS(status))
        };
        bail!(
            "{cmd:?} failed ({how}); its last output:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_that_writes_and_spins_is_charged_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("f");
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!(
            "dd if=/dev/zero of={} bs=1M count=4 conv=fsync 2>/dev/null; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo done",
            target.display()
        ));
        let u = run_measured(&mut cmd, "sh", &dir.path().join("out"), dir.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("out")).unwrap(),
            "done\n"
        );
        assert!(u.cpu_s > 0.0, "{u:?}");
        assert!(u.max_rss_bytes > 0, "{u:?}");
        // The 4 MiB reached the device (conv=fsync), if its counters are readable.
        if let Some(d) = u.device_write_bytes {
            assert!(d >= 4 << 20, "{u:?}");
        }
        if std::fs::read_to_string("/proc/self/io").is_ok() {
            assert!(u.write_bytes >= 4 << 20 && u.wchar >= 4 << 20, "{u:?}");
        }
    }

    #[test]
    fn a_failing_child_is_an_error_with_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg("echo something broke; echo on stderr too >&2; exit 3");
        let e = run_measured(&mut cmd, "sh", &dir.path().join("out"), dir.path()).unwrap_err();
        let msg = format!("{e:#}");
        assert!(
            msg.contains("exit status 3")
                && msg.contains("something broke")
                && msg.contains("on stderr too"),
            "{msg}"
        );
    }

    #[test]
    fn the_childs_progress_lines_are_kept_as_they_come() {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg("echo summary; for i in 1 2 3; do echo progress: $i >&2; done");
        let out = dir.path().join("run.out");
        run_measured(&mut cmd, "sh", &out, dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "summary\n");
        assert_eq!(
            std::fs::read_to_string(stderr_log(&out)).unwrap(),
            "progress: 1\nprogress: 2\nprogress: 3\n"
        );
    }
}
