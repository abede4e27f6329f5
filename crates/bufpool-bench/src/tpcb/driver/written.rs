//! What a run wrote, in bytes (`RunResult::bytes_written`): by source from the engine's
//! counters, and as the block devices under the database saw it.
//!
//! Owns: the devices of a database (its data directory, its log's directory and its
//! tablespaces' locations, each device once) and their written sectors before and after
//! the run (after a syncfs of each, so what the OS cache held is counted where it was
//! written; `compare` reads a device so too); the sum of the sources.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use bufpool::smgr::Smgr;
use bufpool::stats::{IoOp, IoStatsSnapshot};

use super::stats::Writes;
use crate::report::model::{SlruCounts, WalCounts, WriteBytes};

/// The devices of a database and what each had written when the run started.
pub(crate) struct Devices {
    /// (device number, a path on it, sectors written so far × 512) for each device.
    devs: Vec<(u64, PathBuf, Option<u64>)>,
}

impl Devices {
    /// Flushes each device under `smgr`'s data directory (log and tablespaces included)
    /// and reads what it has written so far.
    pub(crate) fn start(smgr: &Smgr) -> Devices {
        let dir = smgr.dir().to_path_buf();
        let mut paths = vec![dir.join("wal"), dir.clone()];
        paths.extend(
            smgr.tablespaces()
                .unwrap_or_default()
                .into_iter()
                .map(|(_, p)| p),
        );
        let mut devs: Vec<(u64, PathBuf, Option<u64>)> = Vec::new();
        for p in paths {
            // Follows links: the log's and the tablespaces' devices are their targets'.
            let Ok(m) = std::fs::metadata(&p) else {
                continue;
            };
            if devs.iter().all(|(d, _, _)| *d != m.dev()) {
                let now = device_written(&p);
                devs.push((m.dev(), p, now));
            }
        }
        Devices { devs }
    }

    /// Bytes written by the devices since [`Devices::start`] (None if any cannot say),
    /// and their names.
    pub(crate) fn since(&self) -> (Option<u64>, Vec<String>) {
        let mut total = Some(0u64);
        for (_, p, before) in &self.devs {
            let now = device_written(p);
            total = match (total, before, now) {
                (Some(t), Some(b), Some(n)) => Some(t + n.saturating_sub(*b)),
                _ => None,
            };
        }
        let names = self
            .devs
            .iter()
            .map(|(d, _, _)| format!("{}:{}", libc::major(*d), libc::minor(*d)))
            .collect();
        (total, names)
    }
}

/// The run's bytes by source: the pool's page writes between `before` and `after`
/// (pages of `page_size` bytes), the log's and the SLRUs' counters over the run, and the
/// devices' count.
pub(crate) fn bytes_written(
    page_size: usize,
    (before, after): (&IoStatsSnapshot, &IoStatsSnapshot),
    wal: &WalCounts,
    slru: &[SlruCounts],
    transactions: u64,
    devices: &Devices,
) -> WriteBytes {
    let page = page_size as u64;
    let op = |o: IoOp| after.total(o) - before.total(o);
    let (device, devices) = devices.since();
    let pages = Writes::between(before, after);
    WriteBytes {
        transactions,
        wal: wal.write_bytes,
        wal_fpi: wal.fpi_bytes,
        wal_padding: wal.pad_bytes,
        checkpointer: pages.checkpointer * page,
        bgwriter: pages.bgwriter * page,
        backend: pages.backend * page,
        extend: op(IoOp::Extend) * page,
        slru: slru.iter().map(|s| s.blks_written).sum::<u64>() * page,
        writeback_hinted: op(IoOp::Writeback) * page,
        device,
        devices,
    }
}

/// Bytes written so far by the block device that holds `path` (sectors written × 512,
/// field 7 of its stat file), after flushing that file system's dirty pages.
pub(crate) fn device_written(path: &Path) -> Option<u64> {
    let f = std::fs::File::open(path).ok()?;
    let dev = f.metadata().ok()?.dev();
    // SAFETY: syncfs only reads the descriptor, which `f` keeps open for the call.
    unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f)) };
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let stat = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()?;
    let sectors: u64 = stat.split_whitespace().nth(6)?.parse().ok()?;
    Some(sectors * 512)
}
