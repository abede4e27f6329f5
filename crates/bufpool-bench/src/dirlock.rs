//! The data directory's lock (`bufpool.lock`, which an open engine holds with an exclusive
//! flock and fills with its pid), seen from outside the engine.
//!
//! Owns: the check whether some process holds it, which takes no lock itself (reading the
//! kernel's table of locks, `/proc/locks`), so that asking never makes a concurrent
//! `Engine::open` fail with `DirectoryLocked`; and [`hold`], which takes it for a command
//! that empties or replaces a directory (`init`), refusing with the holder's pid while a
//! process holds it. A lock file left by a killed process is not held (the kernel released
//! the flock with the process) and is taken over.
//! Locks: `hold` takes the exclusive flock without waiting; nothing else here locks.

use std::io::Read as _;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// The lock file's name in a data directory (the engine's).
pub const LOCK_FILE: &str = "bufpool.lock";

/// Most bytes of the lock file read for the holder's pid (a pid and a newline).
const PID_BYTES_MAX: u64 = 32;

/// Whether a process holds `dir`'s lock right now. Takes no lock: looks for a flock on the
/// lock file's inode in `/proc/locks`.
pub fn in_use(dir: &Path) -> Result<bool> {
    let path = dir.join(LOCK_FILE);
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e).with_context(|| format!("looking at {}", path.display())),
    };
    let locks = std::fs::read_to_string("/proc/locks").context("reading /proc/locks")?;
    Ok(flock_held(&locks, meta.dev(), meta.ino()))
}

/// Whether `locks` (the text of `/proc/locks`) lists a granted FLOCK on inode `ino` of
/// device `dev` (a line such as `1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF`; a
/// waiter's line has `->` after the number and is not a holder).
pub fn flock_held(locks: &str, dev: u64, ino: u64) -> bool {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    locks.lines().any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[1] == "->" || f[1] != "FLOCK" {
            return false;
        }
        let mut id = f[5].split(':');
        let hex = |s: Option<&str>| s.and_then(|s| u64::from_str_radix(s, 16).ok());
        let (Some(ma), Some(mi), Some(i)) = (
            hex(id.next()),
            hex(id.next()),
            id.next().and_then(|s| s.parse::<u64>().ok()),
        ) else {
            return false;
        };
        ma == u64::from(major) && mi == u64::from(minor) && i == ino
    })
}

/// `dir`'s lock, held until dropped.
#[derive(Debug)]
pub struct Held {
    _file: std::fs::File,
}

/// Takes `dir`'s lock for a command that empties or replaces the directory; `None` when
/// the directory has no lock file (no engine ever opened it). Refuses, naming the
/// holder's pid, while another process holds it.
pub fn hold(dir: &Path) -> Result<Option<Held>> {
    let path = dir.join(LOCK_FILE);
    let file = match std::fs::OpenOptions::new().read(true).open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    };
    // SAFETY: flock on a descriptor this function owns; no memory is involved.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(Some(Held { _file: file }));
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
        return Err(e).with_context(|| format!("locking {}", path.display()));
    }
    let mut pid = String::new();
    let _ = (&file).take(PID_BYTES_MAX).read_to_string(&mut pid);
    let pid = match pid.trim() {
        "" => "(unknown)".to_string(),
        p => p.to_string(),
    };
    bail!(
        "{} is in use by process {pid} (it holds {}): stop that process first",
        dir.display(),
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_locks_lines_are_read_by_device_and_inode() {
        let dev = libc::makedev(0xfd, 0x01);
        let text = "1: POSIX  ADVISORY  WRITE 10 fd:01:77 0 EOF\n\
                    2: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF\n\
                    2: -> FLOCK  ADVISORY  WRITE 4243 fd:01:99 0 EOF\n";
        assert!(flock_held(text, dev, 1234));
        assert!(
            !flock_held(text, dev, 77),
            "a POSIX lock is not the engine's"
        );
        assert!(!flock_held(text, dev, 99), "a waiter does not hold");
        assert!(
            !flock_held(text, libc::makedev(8, 1), 1234),
            "another device"
        );
        assert!(!flock_held("garbage\n3: FLOCK x y z q:r:s", dev, 1234));
    }

    #[test]
    fn a_held_lock_is_seen_and_refused_and_a_free_one_taken() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(!in_use(tmp.path()).unwrap(), "no lock file");
        assert!(hold(tmp.path()).unwrap().is_none());
        std::fs::write(tmp.path().join(LOCK_FILE), "4242\n").unwrap();
        assert!(!in_use(tmp.path()).unwrap(), "a stale file is not held");
        let held = hold(tmp.path())
            .unwrap()
            .expect("a stale lock is taken over");
        assert!(in_use(tmp.path()).unwrap());
        let err = hold(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("in use by process 4242"), "{err}");
        drop(held);
        assert!(!in_use(tmp.path()).unwrap());
    }

    /// Asking whether a directory is in use never makes an open fail: a probe in a tight
    /// loop beside 30 opens and closes of the engine. (The probe used to take a shared
    /// flock for a moment, and an open landing in that moment failed with
    /// `DirectoryLocked`.)
    #[test]
    fn probing_never_fails_a_concurrent_open() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let tmp = tempfile::tempdir().unwrap();
        let mut c = bufpool::Config::default();
        c.set("shared_buffers", "16").unwrap();
        let vfs: std::sync::Arc<dyn bufpool::Vfs> = std::sync::Arc::new(bufpool::RealVfs::new());
        drop(bufpool::Engine::open_vfs(vfs.clone(), tmp.path(), &c, true).unwrap());
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let prober = s.spawn(|| {
                let mut probes = 0u64;
                while !done.load(Ordering::Relaxed) {
                    in_use(tmp.path()).unwrap();
                    probes += 1;
                }
                probes
            });
            for i in 0..30 {
                let e = bufpool::Engine::open_vfs(vfs.clone(), tmp.path(), &c, false)
                    .unwrap_or_else(|e| panic!("open {i} beside the probe: {e}"));
                assert!(in_use(tmp.path()).unwrap(), "an open engine holds the lock");
                drop(e);
            }
            done.store(true, Ordering::Relaxed);
            assert!(prober.join().unwrap() > 0);
        });
    }
}
