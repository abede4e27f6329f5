//! The run's monitor thread: once a second it samples the pool's write counters (the
//! per-second series' written_* figures) and what the pool holds (pg_buffercache's rows
//! summed: the report's pool heatmap), and every `-P` seconds it prints pgbench's progress
//! line from the live counters the clients bump. Owns those live counters.
//!
//! The pool sample reads every buffer's header under its lock once a second (the cost per
//! million buffers is `experiment pool`'s `buffercache_ms_per_mbuf`), on this thread,
//! into one vector kept for the run.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bufpool::buffer::BufferCacheRow;
use bufpool::{BufferPool, IoStatsSnapshot, RelFileId};

use super::stats::Writes;
use super::DriverOptions;
use crate::report::model::PoolSecond;

/// One second of the monitor: buffers written, and the pool at its end.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sample {
    pub(crate) writes: Writes,
    pub(crate) pool: Option<PoolSecond>,
    /// The process's resident memory, bytes (None where `/proc` does not say).
    pub(crate) rss: Option<u64>,
}

/// This process's resident memory now, bytes, from `/proc/self/statm` (None off Linux or
/// when it cannot be read).
pub(crate) fn rss_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf reads a constant of the system; no memory is passed.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok().filter(|&p| p > 0)?)
}

/// The pool summed from its pg_buffercache rows, relations named by `names`.
pub(crate) fn pool_second(
    rows: &[BufferCacheRow],
    names: &HashMap<RelFileId, String>,
) -> PoolSecond {
    let mut s = PoolSecond {
        nbuffers: rows.len() as u32,
        usage: vec![0; 6],
        ring: vec![0; 3],
        ..PoolSecond::default()
    };
    let mut relations: BTreeMap<&str, u32> = BTreeMap::new();
    for r in rows {
        let Some(tag) = r.tag else {
            s.unused += 1;
            continue;
        };
        s.usage[usize::from(r.usagecount).min(5)] += 1;
        s.dirty += u32::from(r.isdirty);
        if let Some(k) = r.ring {
            s.ring[k as usize] += 1;
        }
        let name = names.get(&tag.rel).map_or("other", String::as_str);
        *relations.entry(name).or_default() += 1;
    }
    s.relations = relations
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    s
}

/// Running totals the clients bump after each transaction, for the progress lines: a
/// shard per client (client `id` modulo [`LIVE_SHARDS`]), each on lines of its own, so the
/// clients' bumps do not bounce one line between the cores (one shared set cost a
/// read-only run 3.7% of its CPU, 2026-12-08); the monitor sums the shards.
pub(crate) struct Live {
    shards: Box<[LiveShard]>,
}

/// Shards of [`Live`]: clients beyond this many share them.
const LIVE_SHARDS: usize = 64;

#[derive(Default)]
#[repr(align(128))]
struct LiveShard {
    n: AtomicU64,
    sum_us: AtomicU64,
    sum2_us: AtomicU64,
    failed: AtomicU64,
}

impl Default for Live {
    fn default() -> Self {
        Live {
            shards: (0..LIVE_SHARDS).map(|_| LiveShard::default()).collect(),
        }
    }
}

impl Live {
    fn shard(&self, client: u32) -> &LiveShard {
        &self.shards[client as usize % LIVE_SHARDS]
    }

    /// Counts a committed transaction of `lat_us` µs by client `client`.
    pub(crate) fn committed(&self, client: u32, lat_us: f64) {
        let s = self.shard(client);
        s.n.fetch_add(1, Ordering::Relaxed);
        s.sum_us.fetch_add(lat_us as u64, Ordering::Relaxed);
        s.sum2_us
            .fetch_add((lat_us * lat_us) as u64, Ordering::Relaxed);
    }

    /// Counts a failed transaction of client `client`.
    pub(crate) fn failed(&self, client: u32) {
        self.shard(client).failed.fetch_add(1, Ordering::Relaxed);
    }

    fn read(&self) -> LiveTotals {
        let mut t = LiveTotals::default();
        for s in self.shards.iter() {
            t.n += s.n.load(Ordering::Relaxed);
            t.sum_us += s.sum_us.load(Ordering::Relaxed);
            t.sum2_us += s.sum2_us.load(Ordering::Relaxed);
            t.failed += s.failed.load(Ordering::Relaxed);
        }
        t
    }
}

/// One reading of [`Live`].
#[derive(Debug, Clone, Copy, Default)]
struct LiveTotals {
    n: u64,
    sum_us: u64,
    sum2_us: u64,
    failed: u64,
}

/// The monitor: write counters each second, a progress line every `-P` seconds.
pub(crate) struct Monitor<'a> {
    pool: &'a BufferPool,
    /// The pool's counters when the run started.
    before: &'a IoStatsSnapshot,
    /// The run's start: seconds count from it.
    start: Instant,
    /// `-P`, seconds.
    progress_s: Option<u32>,
    live: &'a Live,
    /// Set once the clients have finished.
    done: &'a AtomicBool,
    /// The run's relations by name, for the pool samples.
    names: &'a HashMap<RelFileId, String>,
    /// `--progress-timestamp`: progress lines carry the Unix time.
    timestamps: bool,
}

impl<'a> Monitor<'a> {
    /// A monitor for a run of `opts` that started at `start`, with the pool's counters
    /// `before`: its progress lines every `opts.progress_s` seconds, stamped with the Unix
    /// time with `opts.progress_timestamp` (pgbench's `--progress-timestamp`).
    pub(crate) fn new(
        pool: &'a BufferPool,
        before: &'a IoStatsSnapshot,
        start: Instant,
        opts: &DriverOptions,
        live: &'a Live,
        done: &'a AtomicBool,
        names: &'a HashMap<RelFileId, String>,
    ) -> Self {
        Monitor {
            pool,
            before,
            start,
            progress_s: opts.progress_s,
            live,
            done,
            names,
            timestamps: opts.progress_timestamp,
        }
    }

    /// Runs until `done`; returns each whole second's buffer writes and the pool at its
    /// end.
    pub(crate) fn run(self) -> Vec<Sample> {
        let mut samples = Vec::new();
        let mut rows = Vec::with_capacity(self.pool.nbuffers());
        let mut last = Writes::default();
        let mut last_progress = LiveTotals::default();
        let mut sec = 0u64;
        while !self.done.load(Ordering::Relaxed) {
            sec += 1;
            if !self.wait_until(self.start + Duration::from_secs(sec)) {
                break; // a partial last second: the clients' own figures cover it
            }
            let now = Writes::between(self.before, &self.pool.stats());
            self.pool.buffercache_into(&mut rows);
            samples.push(Sample {
                writes: now.since(last),
                pool: Some(pool_second(&rows, self.names)),
                rss: rss_bytes(),
            });
            last = now;
            if let Some(p) = self.progress_s {
                if sec.is_multiple_of(u64::from(p.max(1))) {
                    last_progress = self.progress(p.max(1), last_progress);
                }
            }
        }
        samples
    }

    /// Sleeps until `target`; false if the clients finished first.
    fn wait_until(&self, target: Instant) -> bool {
        while Instant::now() < target && !self.done.load(Ordering::Relaxed) {
            std::thread::sleep(
                Duration::from_millis(20).min(target.saturating_duration_since(Instant::now())),
            );
        }
        !self.done.load(Ordering::Relaxed)
    }

    /// Prints a progress line for the `p` seconds since `last` was read; returns the new
    /// reading.
    fn progress(&self, p: u32, last: LiveTotals) -> LiveTotals {
        let now = self.live.read();
        let dn = now.n - last.n;
        let (avg, sd) = if dn > 0 {
            let m = (now.sum_us - last.sum_us) as f64 / dn as f64;
            let v = (now.sum2_us - last.sum2_us) as f64 / dn as f64 - m * m;
            (m / 1000.0, v.max(0.0).sqrt() / 1000.0)
        } else {
            (0.0, 0.0)
        };
        let at = if self.timestamps {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        } else {
            self.start.elapsed().as_secs_f64()
        };
        eprintln!(
            "progress: {:.1} s, {:.1} tps, lat {:.3} ms stddev {:.3}, {} failed",
            at,
            dn as f64 / f64::from(p),
            avg,
            sd,
            now.failed - last.failed
        );
        now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_totals_sum_every_clients_shard() {
        let live = Live::default();
        // Clients 1 and 65 share a shard; 0 and 2 have their own.
        for (client, lat) in [(0, 10.0), (1, 20.0), (2, 30.0), (65, 40.0)] {
            live.committed(client, lat);
        }
        live.failed(1);
        live.failed(130);
        let t = live.read();
        assert_eq!((t.n, t.sum_us, t.failed), (4, 100, 2));
        assert_eq!(t.sum2_us, 100 + 400 + 900 + 1600);
    }
}
