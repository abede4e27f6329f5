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
    /// (device number, a path on it, what it has written so far) for each device.
    devs: Vec<(u64, PathBuf, Option<DeviceWrites>)>,
}

/// What a block device has written since it came up: bytes (sectors × 512) and write
/// requests completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeviceWrites {
    pub(crate) bytes: u64,
    pub(crate) ios: u64,
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
        let mut devs: Vec<(u64, PathBuf, Option<DeviceWrites>)> = Vec::new();
        for p in paths {
            // Follows links: the log's and the tablespaces' devices are their targets'.
            let Ok(m) = std::fs::metadata(&p) else {
                continue;
            };
            if devs.iter().all(|(d, _, _)| *d != m.dev()) {
                let now = device_writes(&p);
                devs.push((m.dev(), p, now));
            }
        }
        Devices { devs }
    }

    /// What the devices wrote since [`Devices::start`] (None if any cannot say), and
    /// their names.
    pub(crate) fn since(&self) -> (Option<DeviceWrites>, Vec<String>) {
        let mut total = Some(DeviceWrites { bytes: 0, ios: 0 });
        for (_, p, before) in &self.devs {
            let now = device_writes(p);
            total = match (total, before, now) {
                (Some(t), Some(b), Some(n)) => Some(DeviceWrites {
                    bytes: t.bytes + n.bytes.saturating_sub(b.bytes),
                    ios: t.ios + n.ios.saturating_sub(b.ios),
                }),
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
        device: device.map(|d| d.bytes),
        device_write_ios: device.map(|d| d.ios),
        devices,
    }
}

/// Bytes written so far by the block device that holds `path` (sectors written × 512,
/// field 7 of its stat file), after flushing that file system's dirty pages.
pub(crate) fn device_written(path: &Path) -> Option<u64> {
    device_writes(path).map(|d| d.bytes)
}

/// What the block device that holds `path` has written so far (fields 5 and 7 of its
/// stat file: write requests completed, sectors written), after flushing that file
/// system's dirty pages.
pub(crate) fn device_writes(path: &Path) -> Option<DeviceWrites> {
    let f = std::fs::File::open(path).ok()?;
    let dev = f.metadata().ok()?.dev();
    // SAFETY: syncfs only reads the descriptor, which `f` keeps open for the call.
    unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f)) };
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let stat = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()?;
    parse_stat(&stat)
}

/// Write requests and bytes from a block device's stat line (fields 5 and 7; None if
/// either is missing or not a number).
fn parse_stat(stat: &str) -> Option<DeviceWrites> {
    let fields: Vec<&str> = stat.split_whitespace().collect();
    let ios: u64 = fields.get(4)?.parse().ok()?;
    let sectors: u64 = fields.get(6)?.parse().ok()?;
    Some(DeviceWrites {
        bytes: sectors * 512,
        ios,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stat line's write fields are the 5th (requests) and the 7th (sectors); a short
    /// or garbled line gives none rather than a wrong count.
    #[test]
    fn stat_line_gives_write_requests_and_bytes() {
        let line = "  1529    12  98306   402   7311  2210 331776  9021  0  3510  9423  0 0 0 0  412  86\n";
        assert_eq!(
            parse_stat(line),
            Some(DeviceWrites {
                bytes: 331_776 * 512,
                ios: 7311
            })
        );
        assert_eq!(parse_stat("1 2 3 4 5 6"), None);
        assert_eq!(parse_stat("1 2 3 4 x 6 7"), None);
        assert_eq!(parse_stat(""), None);
    }
}
