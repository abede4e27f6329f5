//! Device probe: how fast the device under a tablespace writes back pages that the page
//! cache holds for it, measured the way the bgwriter's unhinted rewrites reach it
//! (scattered pages of an allocated file, one fdatasync), once per device
//! ([`Smgr::probe_device_once`]). `bgwriter_flush_once` uses it to decide, per device and
//! before any checkpoint, whether the page cache may keep rewrites of a block until the
//! fsync (a fast device drains them in milliseconds) or every write must be hinted (a
//! slow one turns them into a long fsync that stalls the log sharing it), and the
//! bgwriter paces its writes by the rate measured (`bgwriter_device_share`).
//!
//! Owns: nothing between calls; a probe makes [`PROBE_FILE`] and unlinks it: for the
//! default tablespace in the data directory itself (the same file system as `base/0`;
//! kept out of `base/`, where only relation files live), for a created one in its
//! location. A probe file a crash left behind is not a relation file (no relation's name
//! starts with a letter), is never read, and is removed when the directory is opened
//! ([`Smgr::open`]). Locks: none.

use std::time::{Duration, Instant};

use super::{file_err, Smgr, SmgrResult};
use crate::vfs::OpenOptions;

/// The probe's file, in the directory of the tablespace it measures.
pub const PROBE_FILE: &str = "bufpool_device_probe.tmp";

/// Pages the probe file holds (1 MiB of 8 kB pages); every other one is rewritten and
/// timed.
pub(crate) const PROBE_PAGES: u64 = 128;

/// Rounds of rewriting and syncing; the slowest counts: a device's burst budget or write
/// cache can absorb one round (a throttled slow10 device, idle before, synced one in
/// 3.4 ms, at 18,800 pages a second, and the next ones in about 60 ms).
pub(crate) const PROBE_ROUNDS: u32 = 3;

/// A device that writes the probe's scattered pages back at this rate or faster is fast
/// enough for the page cache to keep rewrites until the fsync: 300 pages a second, about
/// the geometric mean of the two classes measured on 2026-11-28 (Intel Xeon host, the
/// profiles of `scripts/slow-device.sh`): the local disk 88,000-103,000, ssd-sata 37,000
/// and slow10 (10 MB/s, 1,000 IOPS) 650 above it; hdd (150 IOPS) 107-128 and hdd-2007
/// 80-92 below it. Why slow10 is on the fast side: throttled checkpoint runs there (a rate
/// the device sustains) had a per-second max latency p99 of 0.26 of the 2007
/// configuration's hinting once per cycle (1b17e80) and 0.63 hinting every write (b7065a7,
/// another sitting): the rewrites it was spared left the log more of the device. When it
/// is driven past what it absorbs, a checkpoint's fsync passes [`super::SLOW_SYNC`] and
/// the tablespace turns slow. On an hdd a cycle's rewrites take seconds to drain (a
/// checkpoint's unhinted fsyncs there: up to 28 s).
pub(crate) const FAST_PAGES_PER_SEC: f64 = 300.0;

/// What one probe measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceProbe {
    /// Scattered pages rewritten and then synced by one fdatasync, in each round.
    pub pages: u64,
    /// The longest of the rounds' fdatasyncs.
    pub sync: Duration,
}

impl DeviceProbe {
    /// Pages written back per second.
    pub fn pages_per_sec(&self) -> f64 {
        self.pages as f64 / self.sync.as_secs_f64().max(1e-9)
    }

    /// Whether the device drains rewrites left in the page cache quickly
    /// (`FAST_PAGES_PER_SEC`).
    pub fn is_fast(&self) -> bool {
        self.pages_per_sec() >= FAST_PAGES_PER_SEC
    }
}

impl Smgr {
    /// Measures the device under `tablespace`'s directory (which must exist): writes
    /// `PROBE_PAGES` pages to [`PROBE_FILE`] and syncs them (allocation, untimed), then
    /// `PROBE_ROUNDS` times rewrites every other page and times one fdatasync, then
    /// unlinks the file. Costs 2.5 MiB of writes: on a 10 MB/s device about 0.3 s.
    pub fn probe_device(&self, tablespace: u32) -> SmgrResult<DeviceProbe> {
        let path = self.probe_path(tablespace);
        let file = self
            .vfs
            .open(&path, OpenOptions::create())
            .map_err(file_err("creating", &path))?;
        let page = vec![0xa5u8; self.block_size];
        let bs = self.block_size as u64;
        let result = (|| -> SmgrResult<DeviceProbe> {
            file.set_len(0).map_err(file_err("truncating", &path))?;
            for p in 0..PROBE_PAGES {
                self.probe_write(&*file, &page, p * bs, &path)?;
            }
            file.sync_data().map_err(file_err("fsync of", &path))?;
            let mut probe = DeviceProbe {
                pages: 0,
                sync: Duration::ZERO,
            };
            for _ in 0..PROBE_ROUNDS {
                probe.pages = 0;
                for p in (0..PROBE_PAGES).step_by(2) {
                    self.probe_write(&*file, &page, p * bs, &path)?;
                    probe.pages += 1;
                }
                let start = Instant::now();
                file.sync_data().map_err(file_err("fsync of", &path))?;
                probe.sync = probe.sync.max(start.elapsed());
                if !probe.is_fast() {
                    break; // the slowest round decides: this one already says slow
                }
            }
            Ok(probe)
        })();
        drop(file);
        let unlinked = self.vfs.unlink(&path).map_err(file_err("unlinking", &path));
        let probe = result?;
        unlinked?;
        Ok(probe)
    }

    /// [`Self::probe_device`] once per device: a tablespace on a device probed before
    /// (the same [`Smgr::device_of`]) gets that probe back, with the tablespace it was
    /// taken for; tablespaces whose device cannot be told are probed each. A failed probe
    /// is not remembered.
    pub fn probe_device_once(&self, tablespace: u32) -> SmgrResult<(DeviceProbe, Option<u32>)> {
        let dev = self.device_of(tablespace);
        if let Some(d) = dev {
            let probes = self.probes.lock();
            if let Some(&(_, ts, p)) = probes.iter().find(|&&(pd, _, _)| pd == d) {
                return Ok((p, Some(ts)));
            }
        }
        let p = self.probe_device(tablespace)?;
        if let Some(d) = dev {
            self.probes.lock().push((d, tablespace, p));
        }
        Ok((p, None))
    }

    /// Where the probe of `tablespace` writes.
    fn probe_path(&self, tablespace: u32) -> std::path::PathBuf {
        if tablespace == super::DEFAULT_TABLESPACE {
            self.dir.join(PROBE_FILE)
        } else {
            self.tablespace_dir(tablespace).join(PROBE_FILE)
        }
    }

    /// Removes the probe files a crash may have left (the data directory's and each
    /// created tablespace's).
    pub(super) fn remove_probe_leftovers(&self) -> SmgrResult<()> {
        let mut paths = vec![self.dir.join(PROBE_FILE)];
        if self.vfs.exists(&self.dir.join("base")).unwrap_or(false) {
            for (id, _) in self.tablespaces()? {
                paths.push(self.probe_path(id));
            }
        }
        for path in paths {
            match self.vfs.unlink(&path) {
                Ok(()) => tracing::info!(
                    "removed a device probe file left by a crash: {}",
                    path.display()
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(file_err("unlinking", &path)(e)),
            }
        }
        Ok(())
    }

    fn probe_write(
        &self,
        file: &dyn crate::vfs::VfsFile,
        page: &[u8],
        offset: u64,
        path: &std::path::Path,
    ) -> SmgrResult<()> {
        let n = file
            .write_at(page, offset)
            .map_err(file_err("writing", path))?;
        if n != page.len() {
            return Err(crate::vfs::IoError::short(
                "writing",
                path,
                crate::vfs::IoAt::Offset(offset),
                n,
                page.len(),
            )
            .into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::{MemVfs, Vfs};
    use std::path::Path;
    use std::sync::Arc;

    fn opts() -> crate::smgr::SmgrOptions {
        crate::smgr::SmgrOptions {
            wal_segment_size: None,
            block_size: 8192,
            segment_size: 1 << 30,
            create: true,
            direct: false,
            dsync: false,
        }
    }

    fn smgr(vfs: Arc<dyn Vfs>, dir: &Path) -> Smgr {
        let smgr = Smgr::open(vfs.clone(), dir, opts()).unwrap();
        vfs.create_dir_all(&smgr.tablespace_dir(0)).unwrap();
        smgr
    }

    /// The probe rewrites half its pages per round and leaves no file behind; a probe
    /// file a crash left is removed when the directory is opened.
    #[test]
    fn a_probe_measures_one_sync_and_cleans_up() {
        let vfs = Arc::new(MemVfs::new());
        let smgr = smgr(vfs.clone(), Path::new("/db"));
        let path = Path::new("/db").join(PROBE_FILE);
        let p = smgr.probe_device(0).unwrap();
        assert_eq!(p.pages, PROBE_PAGES / 2);
        assert!(!vfs.exists(&path).unwrap(), "the probe file is unlinked");
        assert!(p.pages_per_sec() > 0.0);
        drop(smgr);
        let f = vfs.open(&path, OpenOptions::create()).unwrap();
        f.write_at(&[1u8; 100_000], 0).unwrap();
        drop(f);
        let _smgr = Smgr::open(vfs.clone(), Path::new("/db"), opts()).unwrap();
        assert!(!vfs.exists(&path).unwrap(), "a leftover is removed at open");
    }

    /// The verdict is the rate against `FAST_PAGES_PER_SEC`.
    #[test]
    fn fast_means_three_hundred_pages_a_second() {
        let at = |ms| DeviceProbe {
            pages: 64,
            sync: Duration::from_millis(ms),
        };
        assert!(at(1).is_fast(), "64,000 pages/s: a local disk");
        assert!(at(98).is_fast(), "653 pages/s: slow10");
        assert!(at(210).is_fast(), "305 pages/s");
        assert!(!at(215).is_fast(), "298 pages/s");
        assert!(!at(500).is_fast(), "128 pages/s: hdd");
    }

    /// A real directory: the probe works through the OS (the figure is the disk's).
    #[test]
    fn a_probe_runs_on_the_real_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let smgr = smgr(Arc::new(crate::vfs::RealVfs), dir.path());
        let p = smgr.probe_device(0).unwrap();
        assert_eq!(p.pages, PROBE_PAGES / 2);
        assert!(!dir.path().join(PROBE_FILE).exists());
    }

    /// Tablespaces on one device share its probe and its slow fsyncs (two directories of
    /// one file system); where the file system cannot tell devices apart (in memory), each
    /// tablespace is probed and judged alone.
    #[test]
    fn tablespaces_on_one_device_share_its_verdict() {
        let dir = tempfile::tempdir().unwrap();
        let loc = tempfile::tempdir().unwrap();
        let real = smgr(Arc::new(crate::vfs::RealVfs), dir.path());
        real.create_tablespace(1, loc.path()).unwrap();
        assert!(real.device_of(0).is_some());
        assert_eq!(real.device_of(0), real.device_of(1));
        let (p0, first) = real.probe_device_once(0).unwrap();
        assert_eq!(first, None, "the first tablespace of a device is probed");
        assert_eq!(real.probe_device_once(1).unwrap(), (p0, Some(0)));
        assert!(!real.slow_sync_in(1));
        real.note_slow_sync(0);
        assert!(real.slow_sync_in(0) && real.slow_sync_in(1), "one device");

        let vfs = Arc::new(MemVfs::new());
        let mem = smgr(vfs.clone(), Path::new("/db"));
        vfs.create_dir_all(Path::new("/ts1")).unwrap();
        mem.create_tablespace(1, Path::new("/ts1")).unwrap();
        assert_eq!(mem.device_of(1), None);
        assert_eq!(mem.probe_device_once(0).unwrap().1, None);
        assert_eq!(mem.probe_device_once(1).unwrap().1, None, "probed again");
        mem.note_slow_sync(0);
        assert!(mem.slow_sync_in(0) && !mem.slow_sync_in(1), "judged alone");
    }
}
