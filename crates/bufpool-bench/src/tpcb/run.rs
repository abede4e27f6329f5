//! `bufpool bench`: pgbench's client loop on the embedded engine.
//!
//! Each client is a thread with its own session (its own transactions on the shared
//! engine); `-j` groups clients for the per-thread log files, as pgbench's threads do.
//! Latency is measured per transaction from its scheduled start (with `-R`, the Poisson
//! schedule pgbench uses; lag = actual start - scheduled start); per-second statistics
//! (count, latency sum, sum of squares, min, max, lag, skipped, failures) are kept per
//! client and merged at the end, and a monitor thread samples the pool's write counters
//! every second and prints `-P` progress lines. A checkpointer thread takes a checkpoint
//! every `checkpoint_timeout` and records its span.
//! Failures: a deadlock (the engine's wait-for check) aborts the transaction and counts
//! as a failed transaction (pgbench's deadlock_failures; no retries, as pgbench without
//! --max-tries); any other error stops the run with that error.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use bufpool::stats::{set_thread_writer, IoContext, IoOp, IoStatsSnapshot, IoWriter};
use bufpool::EngineError;
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::{Db, ACCOUNTS_PER_SCALE, TELLERS_PER_SCALE};
use crate::report::model::{
    BufferCounts, CheckpointSpan, LatencySummary, PerInterval, RunResult, Second,
};

/// pgbench's built-in scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    #[value(name = "tpcb-like")]
    TpcbLike,
    #[value(name = "simple-update")]
    SimpleUpdate,
    #[value(name = "select-only")]
    SelectOnly,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::TpcbLike => "tpcb-like",
            Mode::SimpleUpdate => "simple-update",
            Mode::SelectOnly => "select-only",
        }
    }
}

#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub clients: u32,
    pub threads: u32,
    /// Run for this long (`-T`), or ...
    pub duration: Option<Duration>,
    /// ... this many transactions per client (`-t`).
    pub transactions: Option<u64>,
    /// Target rate in transactions per second over all clients (`-R`).
    pub rate: Option<f64>,
    /// Latency limit (`-L`), ms: later transactions count as late; with `-R`, ones that
    /// could only start later than this are skipped.
    pub latency_limit_ms: Option<f64>,
    /// Progress line every N seconds (`-P`).
    pub progress_s: Option<u32>,
    /// Aggregate log (`-l --aggregate-interval N`): N seconds per line.
    pub aggregate_interval: Option<u32>,
    pub log_prefix: String,
    pub log_dir: PathBuf,
    pub mode: Mode,
    pub seed: u64,
    pub checkpoint_timeout: Duration,
    pub label: String,
    /// Set by Ctrl-C: clients finish their transaction and stop.
    pub stop: Arc<AtomicBool>,
    /// Knobs in effect, for the summary.
    pub config: std::collections::BTreeMap<String, String>,
    /// Fraction of transactions rolled back after doing all their work (an "abort
    /// storm" for tests: their changes must vanish; they count as failed).
    pub abort_fraction: f64,
}

/// Per-second (or per-interval) statistics, in microseconds.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    n: u64,
    sum: f64,
    sum2: f64,
    min: f64,
    max: f64,
    lag_sum: f64,
    lag_sum2: f64,
    lag_min: f64,
    lag_max: f64,
    skipped: u64,
    failed: u64,
}

impl Slot {
    fn add(&mut self, lat_us: f64, lag_us: f64) {
        if self.n == 0 {
            self.min = lat_us;
            self.max = lat_us;
            self.lag_min = lag_us;
            self.lag_max = lag_us;
        }
        self.n += 1;
        self.sum += lat_us;
        self.sum2 += lat_us * lat_us;
        self.min = self.min.min(lat_us);
        self.max = self.max.max(lat_us);
        self.lag_sum += lag_us;
        self.lag_sum2 += lag_us * lag_us;
        self.lag_min = self.lag_min.min(lag_us);
        self.lag_max = self.lag_max.max(lag_us);
    }

    fn merge(&mut self, o: &Slot) {
        if o.n > 0 {
            if self.n == 0 {
                self.min = o.min;
                self.max = o.max;
                self.lag_min = o.lag_min;
                self.lag_max = o.lag_max;
            } else {
                self.min = self.min.min(o.min);
                self.max = self.max.max(o.max);
                self.lag_min = self.lag_min.min(o.lag_min);
                self.lag_max = self.lag_max.max(o.lag_max);
            }
        }
        self.n += o.n;
        self.sum += o.sum;
        self.sum2 += o.sum2;
        self.lag_sum += o.lag_sum;
        self.lag_sum2 += o.lag_sum2;
        self.skipped += o.skipped;
        self.failed += o.failed;
    }

    fn stddev(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let mean = self.sum / self.n as f64;
        (self.sum2 / self.n as f64 - mean * mean).max(0.0).sqrt()
    }
}

/// One client's results.
struct ClientOut {
    seconds: Vec<Slot>,
    hist: Histogram<u64>,
    late: u64,
}

fn slot_at(v: &mut Vec<Slot>, i: usize) -> &mut Slot {
    if v.len() <= i {
        v.resize(i + 1, Slot::default());
    }
    &mut v[i]
}

/// Live counters for progress lines.
#[derive(Default)]
struct Live {
    n: AtomicU64,
    sum_us: AtomicU64,
    sum2_us: AtomicU64,
    failed: AtomicU64,
}

fn writes(s: &IoStatsSnapshot, w: IoWriter) -> u64 {
    [
        IoContext::Normal,
        IoContext::BulkRead,
        IoContext::BulkWrite,
        IoContext::Vacuum,
    ]
    .iter()
    .map(|&c| s.get(w, c, IoOp::Write))
    .sum()
}

fn one_transaction(
    db: &Db<'_>,
    mode: Mode,
    abort_fraction: f64,
    rng: &mut SmallRng,
) -> Result<bool, EngineError> {
    let scale = db.scale as i64;
    let aid = rng.random_range(1..=scale * ACCOUNTS_PER_SCALE as i64);
    if mode == Mode::SelectOnly {
        let x = db.engine.begin()?;
        let snap = db.engine.txns().snapshot(x);
        db.abalance(&snap, aid)?;
        db.engine.commit_transaction(x)?;
        return Ok(true);
    }
    let bid = rng.random_range(1..=scale);
    let tid = rng.random_range(1..=scale * TELLERS_PER_SCALE as i64);
    let delta = rng.random_range(-5000..=5000);
    let mtime = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0);
    let x = db.engine.begin()?;
    match db.tpcb(x, mode == Mode::TpcbLike, aid, bid, tid, delta, mtime) {
        Ok(()) if abort_fraction > 0.0 && rng.random_bool(abort_fraction.min(1.0)) => {
            db.engine.abort_transaction(x)?;
            Ok(false)
        }
        Ok(()) => {
            db.engine.commit_transaction(x)?;
            Ok(true)
        }
        Err(EngineError::Deadlock(_)) => {
            db.engine.abort_transaction(x)?;
            Ok(false)
        }
        Err(e) => {
            let _ = db.engine.abort_transaction(x);
            Err(e)
        }
    }
}

/// A run's result, plus the pgbench summary lines that the report does not chart.
pub struct RunOutcome {
    pub result: RunResult,
    /// Transactions slower than `-L` (completed, counted in `result`).
    pub late: u64,
    /// Transactions skipped because they could not start within `-L` (with `-R`).
    pub skipped: u64,
    /// Average lag behind the `-R` schedule, ms.
    pub lag_avg_ms: f64,
    pub lag_max_ms: f64,
}

/// Runs the benchmark and returns its result (also writing the aggregate logs).
pub fn run(db: &Db<'_>, opts: &BenchOptions) -> Result<RunOutcome> {
    let clients = opts.clients.max(1);
    let pool = db.engine.pool();
    let before = pool.stats();
    let live = Live::default();
    let done = AtomicBool::new(false);
    let start = Instant::now();
    let wall_start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let checkpoints: Mutex<Vec<CheckpointSpan>> = Mutex::new(Vec::new());
    let samples: Mutex<Vec<(u64, u64, u64)>> = Mutex::new(Vec::new());
    let per_client_rate = opts.rate.map(|r| r / clients as f64);
    let limit_us = opts.latency_limit_ms.map(|ms| ms * 1000.0);
    let outs: Vec<Result<ClientOut>> = std::thread::scope(|s| {
        // Monitor: write counters each second, progress lines every -P seconds.
        let monitor = s.spawn(|| {
            let mut last = (0u64, 0u64, 0u64);
            let mut last_n = 0u64;
            let mut last_sum = 0u64;
            let mut last_sum2 = 0u64;
            let mut last_failed = 0u64;
            let mut sec = 0u64;
            while !done.load(Ordering::Relaxed) {
                sec += 1;
                let target = start + Duration::from_secs(sec);
                while Instant::now() < target && !done.load(Ordering::Relaxed) {
                    std::thread::sleep(
                        Duration::from_millis(20)
                            .min(target.saturating_duration_since(Instant::now())),
                    );
                }
                if done.load(Ordering::Relaxed) {
                    break; // a partial last second: the clients' own figures cover it
                }
                let st = pool.stats();
                let now = (
                    writes(&st, IoWriter::Backend) - writes(&before, IoWriter::Backend),
                    writes(&st, IoWriter::Bgwriter) - writes(&before, IoWriter::Bgwriter),
                    writes(&st, IoWriter::Checkpointer) - writes(&before, IoWriter::Checkpointer),
                );
                samples.lock().expect("samples").push((
                    now.0 - last.0,
                    now.1 - last.1,
                    now.2 - last.2,
                ));
                last = now;
                if let Some(p) = opts.progress_s {
                    if sec % u64::from(p.max(1)) == 0 {
                        let n = live.n.load(Ordering::Relaxed);
                        let sum = live.sum_us.load(Ordering::Relaxed);
                        let sum2 = live.sum2_us.load(Ordering::Relaxed);
                        let failed = live.failed.load(Ordering::Relaxed);
                        let dn = n - last_n;
                        let (avg, sd) = if dn > 0 {
                            let m = (sum - last_sum) as f64 / dn as f64;
                            let v = (sum2 - last_sum2) as f64 / dn as f64 - m * m;
                            (m / 1000.0, v.max(0.0).sqrt() / 1000.0)
                        } else {
                            (0.0, 0.0)
                        };
                        eprintln!(
                            "progress: {:.1} s, {:.1} tps, lat {:.3} ms stddev {:.3}, {} failed",
                            start.elapsed().as_secs_f64(),
                            dn as f64 / f64::from(p.max(1)),
                            avg,
                            sd,
                            failed - last_failed
                        );
                        (last_n, last_sum, last_sum2, last_failed) = (n, sum, sum2, failed);
                    }
                }
            }
        });
        // Checkpointer.
        let checkpointer = s.spawn(|| -> Result<()> {
            set_thread_writer(IoWriter::Checkpointer);
            let mut next = start + opts.checkpoint_timeout;
            while !done.load(Ordering::Relaxed) {
                if Instant::now() < next {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                let a = start.elapsed().as_secs_f64();
                let w0 = writes(&pool.stats(), IoWriter::Checkpointer);
                db.engine
                    .checkpoint()
                    .context("checkpoint during the run")?;
                let w1 = writes(&pool.stats(), IoWriter::Checkpointer);
                checkpoints
                    .lock()
                    .expect("checkpoints")
                    .push(CheckpointSpan {
                        start_s: a,
                        end_s: start.elapsed().as_secs_f64(),
                        buffers_written: w1 - w0,
                    });
                next = Instant::now() + opts.checkpoint_timeout;
            }
            Ok(())
        });
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let live = &live;
                s.spawn(move || -> Result<ClientOut> {
                    let mut rng = SmallRng::seed_from_u64(opts.seed ^ (u64::from(c) << 32));
                    let mut out = ClientOut {
                        seconds: Vec::new(),
                        hist: Histogram::new_with_bounds(1, 3_600_000_000, 3)
                            .expect("histogram bounds"),
                        late: 0,
                    };
                    let mut scheduled = Instant::now();
                    let mut count = 0u64;
                    loop {
                        if opts.stop.load(Ordering::Relaxed) {
                            break;
                        }
                        if let Some(t) = opts.transactions {
                            if count >= t {
                                break;
                            }
                        }
                        if let Some(d) = opts.duration {
                            if start.elapsed() >= d {
                                break;
                            }
                        }
                        let sched = if let Some(rate) = per_client_rate {
                            // Poisson arrivals: exponential gaps with mean 1/rate.
                            let u: f64 = rng.random_range(f64::EPSILON..1.0);
                            scheduled += Duration::from_secs_f64(-u.ln() / rate);
                            while Instant::now() < scheduled {
                                if opts.stop.load(Ordering::Relaxed)
                                    || opts.duration.is_some_and(|d| start.elapsed() >= d)
                                {
                                    break;
                                }
                                std::thread::sleep(
                                    scheduled
                                        .saturating_duration_since(Instant::now())
                                        .min(Duration::from_millis(50)),
                                );
                            }
                            if Instant::now() < scheduled {
                                break; // stopped while waiting
                            }
                            // Too late to make the latency limit: skip it (pgbench -L).
                            if let Some(l) = limit_us {
                                let behind = Instant::now().duration_since(scheduled);
                                if behind.as_secs_f64() * 1e6 > l {
                                    let sec = scheduled.duration_since(start).as_secs() as usize;
                                    slot_at(&mut out.seconds, sec).skipped += 1;
                                    count += 1;
                                    continue;
                                }
                            }
                            scheduled
                        } else {
                            Instant::now()
                        };
                        let began = Instant::now();
                        let ok = one_transaction(db, opts.mode, opts.abort_fraction, &mut rng)
                            .with_context(|| format!("client {c}"))?;
                        let end = Instant::now();
                        count += 1;
                        let lat_us = end.duration_since(sched).as_secs_f64() * 1e6;
                        let lag_us = began.duration_since(sched).as_secs_f64() * 1e6;
                        let sec = end.duration_since(start).as_secs() as usize;
                        let slot = slot_at(&mut out.seconds, sec);
                        if ok {
                            slot.add(lat_us, lag_us);
                            out.hist.saturating_record(lat_us.max(1.0) as u64);
                            if limit_us.is_some_and(|l| lat_us > l) {
                                out.late += 1;
                            }
                            live.n.fetch_add(1, Ordering::Relaxed);
                            live.sum_us.fetch_add(lat_us as u64, Ordering::Relaxed);
                            live.sum2_us
                                .fetch_add((lat_us * lat_us) as u64, Ordering::Relaxed);
                        } else {
                            slot.failed += 1;
                            live.failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Ok(out)
                })
            })
            .collect();
        let outs: Vec<Result<ClientOut>> = handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect();
        done.store(true, Ordering::Relaxed);
        monitor.join().expect("monitor thread");
        if let Err(e) = checkpointer.join().expect("checkpointer thread") {
            return vec![Err(e)];
        }
        outs
    });
    let elapsed = start.elapsed().as_secs_f64();
    let outs: Vec<ClientOut> = outs.into_iter().collect::<Result<_>>()?;
    let after = pool.stats();

    // Merge.
    let nsec = outs.iter().map(|o| o.seconds.len()).max().unwrap_or(0);
    let mut secs = vec![Slot::default(); nsec];
    let mut hist: Histogram<u64> =
        Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("histogram bounds");
    let mut late = 0;
    for o in &outs {
        for (i, s) in o.seconds.iter().enumerate() {
            secs[i].merge(s);
        }
        hist.add(&o.hist).expect("same bounds");
        late += o.late;
    }
    let mut total = Slot::default();
    for s in &secs {
        total.merge(s);
    }

    // Aggregate logs, one file per -j thread, as pgbench names them.
    if let Some(interval) = opts.aggregate_interval {
        write_aggregate_logs(opts, &outs, interval.max(1), wall_start)?;
    }

    let samples = samples.into_inner().expect("samples");
    // Whole seconds only: the last, partial one would chart as a drop (its transactions
    // are in the totals).
    let series: Vec<Second> = secs
        .iter()
        .take(elapsed.floor() as usize)
        .enumerate()
        .map(|(t, s)| {
            let w = samples.get(t).copied().unwrap_or((0, 0, 0));
            Second {
                t: t as u32,
                transactions: s.n,
                tps: s.n as f64,
                lat_avg_ms: if s.n > 0 {
                    s.sum / s.n as f64 / 1000.0
                } else {
                    0.0
                },
                lat_max_ms: s.max / 1000.0,
                lat_stddev_ms: s.stddev() / 1000.0,
                written_backend: w.0,
                written_bgwriter: w.1,
                written_checkpointer: w.2,
            }
        })
        .collect();
    let full: Vec<&Second> = series.iter().collect();
    let mut tps_sorted: Vec<f64> = full.iter().map(|s| s.tps).collect();
    tps_sorted.sort_by(|a, b| a.partial_cmp(b).expect("not NaN"));
    let mut max_sorted: Vec<f64> = full.iter().map(|s| s.lat_max_ms).collect();
    max_sorted.sort_by(|a, b| a.partial_cmp(b).expect("not NaN"));
    let pct = |v: &[f64], p: f64| -> f64 {
        if v.is_empty() {
            return 0.0;
        }
        v[((v.len() - 1) as f64 * p).round() as usize]
    };
    let latency_histogram = hist
        .iter_log(1, 1.25)
        .filter(|v| v.count_since_last_iteration() > 0)
        .map(|v| {
            (
                v.value_iterated_to() as f64 / 1000.0,
                v.count_since_last_iteration(),
            )
        })
        .collect();
    let w = |s: &IoStatsSnapshot, wr| writes(s, wr);
    let all = |s: &IoStatsSnapshot, op| s.total(op);
    let result = RunResult {
        label: opts.label.clone(),
        started_at: format!("unix {wall_start}"),
        mode: opts.mode.name().into(),
        scale: db.scale,
        clients,
        threads: opts.threads,
        duration_s: elapsed,
        transactions: total.n,
        failed: total.failed,
        tps: total.n as f64 / elapsed,
        latency_ms: LatencySummary {
            avg: if total.n > 0 {
                total.sum / total.n as f64 / 1000.0
            } else {
                0.0
            },
            stddev: total.stddev() / 1000.0,
            p50: hist.value_at_quantile(0.50) as f64 / 1000.0,
            p95: hist.value_at_quantile(0.95) as f64 / 1000.0,
            p99: hist.value_at_quantile(0.99) as f64 / 1000.0,
            max: hist.max() as f64 / 1000.0,
        },
        per_interval: PerInterval {
            tps_min: tps_sorted.first().copied().unwrap_or(0.0),
            tps_p5: pct(&tps_sorted, 0.05),
            tps_p50: pct(&tps_sorted, 0.50),
            max_latency_p99: pct(&max_sorted, 0.99),
        },
        buffers: BufferCounts {
            hits: all(&after, IoOp::Hit) - all(&before, IoOp::Hit),
            reads: all(&after, IoOp::Read) - all(&before, IoOp::Read),
            written_by_backend: w(&after, IoWriter::Backend) - w(&before, IoWriter::Backend),
            written_by_bgwriter: w(&after, IoWriter::Bgwriter) - w(&before, IoWriter::Bgwriter),
            written_by_checkpointer: w(&after, IoWriter::Checkpointer)
                - w(&before, IoWriter::Checkpointer),
            allocated: (all(&after, IoOp::Read) + all(&after, IoOp::Extend))
                - (all(&before, IoOp::Read) + all(&before, IoOp::Extend)),
        },
        checkpoints: checkpoints.into_inner().expect("checkpoints"),
        config: opts.config.clone(),
        series,
        latency_histogram,
    };
    Ok(RunOutcome {
        result,
        late,
        skipped: total.skipped,
        lag_avg_ms: if total.n > 0 {
            total.lag_sum / total.n as f64 / 1000.0
        } else {
            0.0
        },
        lag_max_ms: total.lag_max / 1000.0,
    })
}

/// pgbench's aggregate log: one line per interval, 15 fields (PostgreSQL 15 to 18 with
/// --aggregate-interval and no --failures-detail: interval_start num_transactions
/// sum_latency sum_latency_2 min_latency max_latency sum_lag sum_lag_2 min_lag max_lag
/// skipped retried retries serialization_failures deadlock_failures), latencies in
/// microseconds, one file per thread: <prefix>.<pid> for thread 0, <prefix>.<pid>.<n>.
fn write_aggregate_logs(
    opts: &BenchOptions,
    outs: &[ClientOut],
    interval: u32,
    wall_start: u64,
) -> Result<()> {
    let threads = opts.threads.max(1) as usize;
    let pid = std::process::id();
    for t in 0..threads {
        let name = if t == 0 {
            format!("{}.{pid}", opts.log_prefix)
        } else {
            format!("{}.{pid}.{t}", opts.log_prefix)
        };
        let path = opts.log_dir.join(name);
        let mut slots: Vec<Slot> = Vec::new();
        for (c, o) in outs.iter().enumerate() {
            if c % threads != t {
                continue;
            }
            for (sec, s) in o.seconds.iter().enumerate() {
                slot_at(&mut slots, sec / interval as usize).merge(s);
            }
        }
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(&path)
                .with_context(|| format!("creating log file {}", path.display()))?,
        );
        for (i, s) in slots.iter().enumerate() {
            writeln!(
                f,
                "{} {} {:.0} {:.0} {:.0} {:.0} {:.0} {:.0} {:.0} {:.0} {} 0 0 0 {}",
                wall_start + i as u64 * u64::from(interval),
                s.n,
                s.sum,
                s.sum2,
                s.min,
                s.max,
                s.lag_sum,
                s.lag_sum2,
                s.lag_min,
                s.lag_max,
                s.skipped,
                s.failed
            )
            .with_context(|| format!("writing {}", path.display()))?;
        }
        f.flush()
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
