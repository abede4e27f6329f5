//! One client: a thread with its own session on the shared engine that runs the
//! workload's transactions back to back (or on `-R`'s Poisson schedule, `pace.rs`) until
//! `-t`, `-T` or Ctrl-C stops it; with several scripts, each transaction runs one picked
//! by weight (`choose.rs`). Owns the client loop, `--max-tries`' retries, failure
//! (deadlock, abort storm) counting, `--ack-log`'s lines, and the client's own
//! per-second and per-script statistics, per-transaction log lines and latency
//! histogram; it bumps the monitor's live counters as it goes. What a transaction does is
//! the [`Workload`]'s.

use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::choose::{choose, chooser};
use super::monitor::Live;
use super::pace::{Next, Pace};
use super::stats::{latency_histogram, note_running, slot_at, Slot};
use super::waits::{ClientWaits, Mark, ThreadSched};
use super::{Done, DriverOptions, Workload};

/// One client's results, and its session (`S`, the workload's) as the run left it.
pub(crate) struct ClientStats<S> {
    /// Per second of the run: transactions by the second they ended in, skipped ones by
    /// the second they were scheduled for.
    pub(crate) seconds: Vec<Slot>,
    /// Latencies of the committed transactions, µs.
    pub(crate) hist: Histogram<u64>,
    /// Committed transactions slower than `-L`.
    pub(crate) late: u64,
    /// Every transaction, for pgbench's per-transaction log (`-l` alone); else empty.
    pub(crate) log: Vec<TxLine>,
    /// What the committed transactions waited for.
    pub(crate) waits: ClientWaits,
    /// Per script of the run (the workload's order): its transactions (committed with
    /// latency and lag, failed, skipped, retried).
    pub(crate) scripts: Vec<Slot>,
    /// The client's session.
    pub(crate) session: S,
}

/// One line of pgbench's per-transaction log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TxLine {
    /// The client's transaction number, from 0.
    pub(crate) no: u64,
    /// The script it ran (its index in the run's list, from 0).
    pub(crate) script: usize,
    pub(crate) time: TxTime,
    /// When it ended (a skipped one: when it was due).
    pub(crate) end: Instant,
    /// Behind the `-R` schedule, µs (only with `-R`).
    pub(crate) lag_us: Option<u64>,
}

/// The log's `time` field.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TxTime {
    /// Latency, µs.
    Us(u64),
    Skipped,
    Failed,
}

/// A client: runs transactions on its own session until `-t`, `-T` or Ctrl-C.
pub(crate) struct Client<'a, W> {
    id: u32,
    workload: &'a W,
    opts: &'a DriverOptions,
    /// The run's start: `-T` and the per-second slots count from it.
    start: Instant,
    live: &'a Live,
    /// This client's share of `-R` or `--rate-profile`, and `-L`.
    pace: Pace<'a>,
    /// The scripts' weights, and the weights' sum (pgbench's total_weight).
    weights: Vec<u32>,
    total_weight: u64,
}

impl<'a, W: Workload> Client<'a, W> {
    /// Client number `id` of `opts.clients`, running `workload`'s transactions, for a run
    /// that started at `start`.
    pub(crate) fn new(
        id: u32,
        workload: &'a W,
        opts: &'a DriverOptions,
        start: Instant,
        live: &'a Live,
    ) -> Self {
        let weights = workload.weights();
        Client {
            id,
            workload,
            opts,
            start,
            live,
            pace: Pace::new(opts, start),
            total_weight: weights.iter().map(|&w| u64::from(w)).sum(),
            weights,
        }
    }

    /// Runs transactions until the run ends; stops at the first error other than a
    /// deadlock.
    pub(crate) fn run(self) -> Result<ClientStats<W::ClientState>> {
        let mut rng = SmallRng::seed_from_u64(self.opts.seed ^ (u64::from(self.id) << 32));
        let mut sample = SmallRng::seed_from_u64(!self.opts.seed ^ (u64::from(self.id) << 32));
        let mut choose_rng = chooser(self.opts.seed, self.id);
        let mut out = ClientStats {
            seconds: Vec::new(),
            hist: latency_histogram(),
            late: 0,
            log: Vec::new(),
            waits: ClientWaits::default(),
            scripts: vec![Slot::default(); self.weights.len()],
            session: self.workload.session(self.id),
        };
        let mut sched_stat = ThreadSched::open();
        // Back to back (no -R), one transaction's end mark is the next one's start; a
        // mark reads schedstat only when its last reading is 0.1 ms old (`waits.rs`).
        let mut last_mark: Option<Mark> = None;
        let mut ack = self.open_ack_log()?;
        let mut scheduled = Instant::now();
        // The clock's last reading: back to back (no -R), the previous transaction's end
        // is this one's schedule and start, and `-T`'s clock, as pgbench's lazy "now": one
        // clock read a transaction where there were four (`clock_gettime` was 5.7% of a
        // read-only run's CPU, 2026-12-08).
        let mut now = scheduled;
        let mut count = 0u64;
        while !self.finished(count, now) {
            // As pgbench: the script first, then its schedule (a skipped one counts to it).
            let k = choose(&self.weights, self.total_weight, &mut choose_rng);
            let sched = match self.pace.rate {
                Some(rate) => match self.pace.next(rate, &mut rng, &mut scheduled) {
                    Next::Run(at) => at,
                    Next::Skip(at) => {
                        self.skip(&mut out, k, count, at);
                        count += 1;
                        now = Instant::now();
                        continue;
                    }
                    Next::Stop => break,
                },
                None => now,
            };
            let began = match self.pace.rate {
                Some(_) => Instant::now(),
                None => now,
            };
            let mark = match (self.pace.rate, last_mark.take()) {
                (None, Some(m)) => m,
                _ => Mark::now(&mut sched_stat, began),
            };
            let (done, tries) = self.attempt(k, &mut rng, &mut out.session)?;
            if let (Some(f), Done::Committed(Some(line))) = (ack.as_mut(), done) {
                acknowledge(f, line)?;
            }
            let end = Instant::now();
            now = end;
            let end_mark = Mark::now(&mut sched_stat, end);
            if let Done::Committed(_) = done {
                // From its start: what it waited for, not how late it started.
                let took = end.duration_since(began).as_secs_f64() * 1e6;
                let sec = end.duration_since(self.start).as_secs() as usize;
                out.waits.add(sec, took, &mark, &end_mark);
            }
            last_mark = Some(end_mark);
            self.note_tries(&mut out, k, tries, end);
            // `--sampling-rate`: a stream of its own, so sampling changes no transaction.
            if self.opts.transaction_log
                && (self.opts.sampling_rate >= 1.0 || sample.random_bool(self.opts.sampling_rate))
            {
                out.log.push(TxLine {
                    no: count,
                    script: k,
                    time: match done {
                        Done::Committed(_) => {
                            TxTime::Us(end.duration_since(sched).as_micros() as u64)
                        }
                        Done::Failed { .. } => TxTime::Failed,
                    },
                    end,
                    lag_us: self
                        .pace
                        .rate
                        .map(|_| began.duration_since(sched).as_micros() as u64),
                });
            }
            count += 1;
            self.record(&mut out, k, done, sched, began, end);
        }
        Ok(out)
    }

    /// `--ack-log`'s handle: one append-mode handle per client. Each line is one write(2)
    /// of under 4 KiB, so lines of concurrent clients never interleave, and a line
    /// reaches the OS (and survives a SIGKILL) before the client starts its next
    /// transaction.
    fn open_ack_log(&self) -> Result<Option<std::fs::File>> {
        let Some(p) = &self.opts.ack_log else {
            return Ok(None);
        };
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .with_context(|| format!("opening the ack log {}", p.display()))?;
        Ok(Some(f))
    }

    /// Runs script `k` once, and again after a deadlock up to `--max-tries` (from its
    /// start): how it ended and the tries it took.
    fn attempt(
        &self,
        k: usize,
        rng: &mut SmallRng,
        session: &mut W::ClientState,
    ) -> Result<(Done<W::Ack>, u32)> {
        let mut tries = 1;
        loop {
            let done = self
                .workload
                .transaction(session, k, rng)
                .with_context(|| format!("client {}", self.id))?;
            match done {
                Done::Failed { deadlock: true } if tries < self.opts.max_tries => tries += 1,
                done => return Ok((done, tries)),
            }
        }
    }

    /// Counts a transaction of script `k`, number `count`, due at `at`, as skipped (`-L`).
    fn skip(&self, out: &mut ClientStats<W::ClientState>, k: usize, count: u64, at: Instant) {
        let sec = at.duration_since(self.start).as_secs() as usize;
        slot_at(&mut out.seconds, sec).skipped += 1;
        out.scripts[k].skipped += 1;
        if self.opts.transaction_log {
            out.log.push(TxLine {
                no: count,
                script: k,
                time: TxTime::Skipped,
                end: at,
                lag_us: Some(Instant::now().duration_since(at).as_micros() as u64),
            });
        }
    }

    /// Counts the tries beyond the first of a transaction of script `k` that ended at
    /// `end` (`--max-tries`).
    fn note_tries(
        &self,
        out: &mut ClientStats<W::ClientState>,
        k: usize,
        tries: u32,
        end: Instant,
    ) {
        if tries <= 1 {
            return;
        }
        let sec = end.duration_since(self.start).as_secs() as usize;
        for slot in [slot_at(&mut out.seconds, sec), &mut out.scripts[k]] {
            slot.retried += 1;
            slot.retries += u64::from(tries - 1);
        }
    }

    /// Whether Ctrl-C, `-t` (after `count` transactions) or `-T` (at `now`) has ended
    /// the run.
    fn finished(&self, count: u64, now: Instant) -> bool {
        self.opts.stop.load(Ordering::Relaxed)
            || self.opts.transactions.is_some_and(|t| count >= t)
            || self
                .opts
                .duration
                .is_some_and(|d| now.saturating_duration_since(self.start) >= d)
    }

    /// Counts a finished transaction of script `k` scheduled for `sched`, started at
    /// `began`, ended at `end`. Without `-R` there is no schedule: the lag is 0, as
    /// pgbench logs it.
    fn record(
        &self,
        out: &mut ClientStats<W::ClientState>,
        k: usize,
        done: Done<W::Ack>,
        sched: Instant,
        began: Instant,
        end: Instant,
    ) {
        let lat_us = end.duration_since(sched).as_secs_f64() * 1e6;
        let lag_us = match self.pace.rate {
            Some(_) => began.duration_since(sched).as_secs_f64() * 1e6,
            None => 0.0,
        };
        // Seconds it was still running at the end of: their maximum latency counts it.
        let since = |t: Instant| t.saturating_duration_since(self.start).as_secs_f64() * 1e6;
        note_running(&mut out.seconds, since(sched), since(end));
        let sec = end.duration_since(self.start).as_secs() as usize;
        let slot = slot_at(&mut out.seconds, sec);
        let tally = &mut out.scripts[k];
        if let Done::Committed(_) = done {
            slot.add(lat_us, lag_us);
            tally.add(lat_us, lag_us);
            out.hist.saturating_record(lat_us.max(1.0) as u64);
            if self.pace.limit_us.is_some_and(|l| lat_us > l) {
                out.late += 1;
            }
            self.live.committed(self.id, lat_us);
        } else {
            let deadlock = matches!(done, Done::Failed { deadlock: true });
            for s in [slot, tally] {
                s.failed += 1;
                s.deadlocks += u64::from(deadlock);
            }
            self.live.failed(self.id);
        }
    }
}

/// Appends a committed transaction's acknowledgement (the workload's line) to the ack log
/// (`--ack-log`).
fn acknowledge(f: &mut std::fs::File, line: impl std::fmt::Display) -> Result<()> {
    use std::io::Write as _;
    let line = format!("{line}\n");
    f.write_all(line.as_bytes())
        .context("appending to the ack log (--ack-log)")
}
