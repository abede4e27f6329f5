//! The device's own limit for one synchronous writer: 8 KiB written and fdatasync'ed in a
//! loop on a preallocated 16 MiB file, its rate and each second's longest write + sync.
//! `experiment wal` and `experiment tpcb` put their commit rates and latencies beside it;
//! `compare` measures it before and after its runs. A leaf: engine-free, the standard
//! library only.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;

/// The raw rate: 8 KiB written and fdatasync'ed in a loop for `duration` on a preallocated
/// 16 MiB file in `dir` (the device's limit for one synchronous writer).
pub(crate) fn raw_fdatasync_per_s(dir: &Path, duration: Duration) -> Result<f64> {
    Ok(raw_fdatasync_per_second_max(dir, duration)?.0)
}

/// The raw loop of [`raw_fdatasync_per_s`], timing each write + fdatasync: the rate and
/// the maximum latency (ms) of each whole second. The device's own floor under a
/// per-second maximum latency of synchronous commits.
pub(crate) fn raw_fdatasync_per_second_max(
    dir: &Path,
    duration: Duration,
) -> Result<(f64, Vec<f64>)> {
    let path = dir.join("raw_fdatasync.dat");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)?;
    let size = 16u64 << 20;
    f.write_all_at(&vec![0u8; size as usize], 0)?;
    f.sync_all()?;
    let page = vec![7u8; 8192];
    let start = Instant::now();
    let mut n = 0u64;
    let mut maxes = vec![0f64; duration.as_secs() as usize];
    while start.elapsed() < duration {
        let t0 = Instant::now();
        f.write_all_at(&page, (n * 8192) % size)?;
        f.sync_data()?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        if let Some(m) = maxes.get_mut((t0 - start).as_secs() as usize) {
            *m = m.max(ms);
        }
        n += 1;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    std::fs::remove_file(&path)?;
    maxes.retain(|&m| m > 0.0);
    Ok((rate, maxes))
}
