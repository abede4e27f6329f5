//! One pgbench client: a thread with its own session on the shared engine that runs the
//! run's script back to back (or on `-R`'s Poisson schedule) until `-t`, `-T` or Ctrl-C
//! stops it; with several scripts, each transaction runs one picked by weight
//! (`mix.rs`). Owns the client loop, the `-R` schedule and `-L` skipping, failure
//! (deadlock, abort storm) counting, and the client's own per-second and per-script
//! statistics and latency histogram; it bumps the monitor's live counters as it goes.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::builtins::Mode;
use super::driver::monitor::Live;
use super::driver::stats::{latency_histogram, note_running, slot_at, Slot};
use super::driver::waits::{ClientWaits, Mark, ThreadSched};
use super::keys::Keys;
use super::mix::{Pick, ScriptTally};
use super::options::BenchOptions;
use super::script::ScriptState;
use super::{Db, TELLERS_PER_SCALE};

/// YCSB B's share of updates.
const YCSB_B_UPDATES: f64 = 0.05;

/// One client's results.
pub(super) struct ClientStats {
    /// Per second of the run: transactions by the second they ended in, skipped ones by
    /// the second they were scheduled for.
    pub(super) seconds: Vec<Slot>,
    /// Latencies of the committed transactions, µs.
    pub(super) hist: Histogram<u64>,
    /// Committed transactions slower than `-L`.
    pub(super) late: u64,
    /// Every transaction, for pgbench's per-transaction log (`-l` alone); else empty.
    pub(super) log: Vec<TxLine>,
    /// What the committed transactions waited for.
    pub(super) waits: ClientWaits,
    /// Per script of the run (`BenchOptions::script_list`'s order): its transactions and,
    /// interpreted (`-f`, `-r`), its commands' count, time and failures.
    pub(super) scripts: Vec<ScriptTally>,
}

/// One line of pgbench's per-transaction log.
#[derive(Debug, Clone, Copy)]
pub(super) struct TxLine {
    /// The client's transaction number, from 0.
    pub(super) no: u64,
    /// The script it ran (its index in the run's list, from 0).
    pub(super) script: usize,
    pub(super) time: TxTime,
    /// When it ended (a skipped one: when it was due).
    pub(super) end: Instant,
    /// Behind the `-R` schedule, µs (only with `-R`).
    pub(super) lag_us: Option<u64>,
}

/// The log's `time` field.
#[derive(Debug, Clone, Copy)]
pub(super) enum TxTime {
    /// Latency, µs.
    Us(u64),
    Skipped,
    Failed,
}

/// What the `-R` schedule says about the next transaction.
enum Next {
    /// Run it; its latency and lag count from this scheduled start.
    Run(Instant),
    /// Skip it (`-L`): it was due at this instant and could only start too late.
    Skip(Instant),
    /// The run ended while waiting for it.
    Stop,
}

/// A client: runs transactions on its own session until `-t`, `-T` or Ctrl-C.
pub(super) struct Client<'a, 'e> {
    id: u32,
    db: &'a Db<'e>,
    opts: &'a BenchOptions,
    /// The run's start: `-T` and the per-second slots count from it.
    start: Instant,
    live: &'a Live,
    /// This client's share of `-R`, transactions per second; with `--rate-profile`, of
    /// the profile's highest rate (arrivals at it are thinned to the profile's rate).
    rate: Option<f64>,
    /// `-L`, µs.
    limit_us: Option<f64>,
    /// The scripts it picks from, each with the accounts its transactions touch.
    picks: &'a [Pick],
    /// Their weights, and the weights' sum (pgbench's total_weight).
    weights: Vec<u32>,
    total_weight: u64,
}

impl<'a, 'e> Client<'a, 'e> {
    /// Client number `id` of `opts.driver.clients`, for a run that started at `start`.
    pub(super) fn new(
        id: u32,
        db: &'a Db<'e>,
        opts: &'a BenchOptions,
        start: Instant,
        live: &'a Live,
        picks: &'a [Pick],
    ) -> Self {
        let weights: Vec<u32> = picks.iter().map(|p| p.script.weight).collect();
        let clients = opts.driver.clients.max(1);
        Client {
            id,
            db,
            opts,
            start,
            live,
            rate: match &opts.driver.rate_profile {
                Some(p) => Some(p.high * p.spike_factor / clients as f64),
                None => opts.driver.rate.map(|r| r / clients as f64),
            },
            limit_us: opts.driver.latency_limit_ms.map(|ms| ms * 1000.0),
            picks,
            total_weight: weights.iter().map(|&w| u64::from(w)).sum(),
            weights,
        }
    }

    /// Runs transactions until the run ends; stops at the first error other than a
    /// deadlock.
    pub(super) fn run(self) -> Result<ClientStats> {
        let mut rng = SmallRng::seed_from_u64(self.opts.driver.seed ^ (u64::from(self.id) << 32));
        let mut sample =
            SmallRng::seed_from_u64(!self.opts.driver.seed ^ (u64::from(self.id) << 32));
        let mut choose = super::mix::chooser(self.opts.driver.seed, self.id);
        let mut out = ClientStats {
            seconds: Vec::new(),
            hist: latency_histogram(),
            late: 0,
            log: Vec::new(),
            waits: ClientWaits::default(),
            scripts: vec![ScriptTally::default(); self.picks.len()],
        };
        let mut states = self.script_states();
        let sched_stat = ThreadSched::open();
        // Back to back (no -R), one transaction's end mark is the next one's start: one
        // schedstat read per transaction instead of two.
        let mut last_mark: Option<Mark> = None;
        let mut ack = self.open_ack_log()?;
        let mut scheduled = Instant::now();
        let mut count = 0u64;
        while !self.finished(count) {
            // As pgbench: the script first, then its schedule (a skipped one counts to it).
            let k = super::mix::choose(&self.weights, self.total_weight, &mut choose);
            let sched = match self.rate {
                Some(rate) => match self.next_start(rate, &mut rng, &mut scheduled) {
                    Next::Run(at) => at,
                    Next::Skip(at) => {
                        self.skip(&mut out, k, count, at);
                        count += 1;
                        continue;
                    }
                    Next::Stop => break,
                },
                None => Instant::now(),
            };
            let mark = match (self.rate, last_mark.take()) {
                (None, Some(m)) => m,
                _ => Mark::now(&sched_stat),
            };
            let began = Instant::now();
            let (done, tries) = self.attempt(k, &mut rng, states[k].as_mut())?;
            if let (Some(f), Done::Committed(Some(row))) = (ack.as_mut(), done) {
                acknowledge(f, row)?;
            }
            let end = Instant::now();
            let end_mark = Mark::now(&sched_stat);
            if let Done::Committed(_) = done {
                // From its start: what it waited for, not how late it started.
                let took = end.duration_since(began).as_secs_f64() * 1e6;
                let sec = end.duration_since(self.start).as_secs() as usize;
                out.waits.add(sec, took, &mark, &end_mark);
            }
            last_mark = Some(end_mark);
            self.note_tries(&mut out, k, tries, end);
            // `--sampling-rate`: a stream of its own, so sampling changes no transaction.
            if self.opts.driver.transaction_log
                && (self.opts.driver.sampling_rate >= 1.0
                    || sample.random_bool(self.opts.driver.sampling_rate))
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
                        .rate
                        .map(|_| began.duration_since(sched).as_micros() as u64),
                });
            }
            count += 1;
            self.record(&mut out, k, done, sched, began, end);
        }
        for (tally, state) in out.scripts.iter_mut().zip(states) {
            if let Some(st) = state {
                tally.statements = st.stats;
            }
        }
        Ok(out)
    }

    /// An interpreter state for each script run statement by statement (none for those
    /// run as engine calls).
    fn script_states(&self) -> Vec<Option<ScriptState>> {
        self.picks
            .iter()
            .map(|p| {
                p.script
                    .script
                    .as_ref()
                    .map(|s| ScriptState::new(s, self.db.scale, self.id, self.opts.driver.seed))
            })
            .collect()
    }

    /// `--ack-log`'s handle: one append-mode handle per client. Each line is one write(2)
    /// of under 4 KiB, so lines of concurrent clients never interleave, and a line
    /// reaches the OS (and survives a SIGKILL) before the client starts its next
    /// transaction.
    fn open_ack_log(&self) -> Result<Option<std::fs::File>> {
        let Some(p) = &self.opts.driver.ack_log else {
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
        mut state: Option<&mut ScriptState>,
    ) -> Result<(Done, u32)> {
        let mut tries = 1;
        loop {
            let done = one_transaction(
                self.db,
                self.opts,
                &self.picks[k],
                rng,
                state.as_deref_mut(),
            )
            .with_context(|| format!("client {}", self.id))?;
            match done {
                Done::Failed { deadlock: true } if tries < self.opts.driver.max_tries => tries += 1,
                done => return Ok((done, tries)),
            }
        }
    }

    /// Counts a transaction of script `k`, number `count`, due at `at`, as skipped (`-L`).
    fn skip(&self, out: &mut ClientStats, k: usize, count: u64, at: Instant) {
        let sec = at.duration_since(self.start).as_secs() as usize;
        slot_at(&mut out.seconds, sec).skipped += 1;
        out.scripts[k].total.skipped += 1;
        if self.opts.driver.transaction_log {
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
    fn note_tries(&self, out: &mut ClientStats, k: usize, tries: u32, end: Instant) {
        if tries <= 1 {
            return;
        }
        let sec = end.duration_since(self.start).as_secs() as usize;
        for slot in [slot_at(&mut out.seconds, sec), &mut out.scripts[k].total] {
            slot.retried += 1;
            slot.retries += u64::from(tries - 1);
        }
    }

    /// Whether Ctrl-C, `-t` (after `count` transactions) or `-T` has ended the run.
    fn finished(&self, count: u64) -> bool {
        self.opts.driver.stop.load(Ordering::Relaxed)
            || self.opts.driver.transactions.is_some_and(|t| count >= t)
            || self
                .opts
                .driver
                .duration
                .is_some_and(|d| self.start.elapsed() >= d)
    }

    /// Advances the Poisson schedule (`scheduled`) by one exponential gap with mean
    /// 1/`rate` and waits for that moment. With `--rate-profile`, `rate` is the profile's
    /// highest and each arrival is kept with probability (the profile's rate at that
    /// moment) / `rate`: thinning, which makes a Poisson process of the changing rate.
    fn next_start(&self, rate: f64, rng: &mut SmallRng, scheduled: &mut Instant) -> Next {
        loop {
            let u: f64 = rng.random_range(f64::EPSILON..1.0);
            *scheduled += Duration::from_secs_f64(-u.ln() / rate);
            let Some(p) = &self.opts.driver.rate_profile else {
                break;
            };
            let t = scheduled
                .saturating_duration_since(self.start)
                .as_secs_f64();
            let keep = p.rate_at(t) / p.high / p.spike_factor;
            if rng.random_bool(keep.clamp(0.0, 1.0)) {
                break;
            }
            if self
                .opts
                .driver
                .duration
                .is_some_and(|d| t >= d.as_secs_f64())
            {
                break;
            }
        }
        while Instant::now() < *scheduled {
            if self.opts.driver.stop.load(Ordering::Relaxed)
                || self
                    .opts
                    .driver
                    .duration
                    .is_some_and(|d| self.start.elapsed() >= d)
            {
                break;
            }
            std::thread::sleep(
                scheduled
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(50)),
            );
        }
        if Instant::now() < *scheduled {
            return Next::Stop; // stopped while waiting
        }
        // Too late to make the latency limit: skip it (pgbench -L).
        if let Some(l) = self.limit_us {
            let behind = Instant::now().duration_since(*scheduled);
            if behind.as_secs_f64() * 1e6 > l {
                return Next::Skip(*scheduled);
            }
        }
        Next::Run(*scheduled)
    }

    /// Counts a finished transaction of script `k` scheduled for `sched`, started at
    /// `began`, ended at `end`. Without `-R` there is no schedule: the lag is 0, as
    /// pgbench logs it.
    fn record(
        &self,
        out: &mut ClientStats,
        k: usize,
        done: Done,
        sched: Instant,
        began: Instant,
        end: Instant,
    ) {
        let lat_us = end.duration_since(sched).as_secs_f64() * 1e6;
        let lag_us = match self.rate {
            Some(_) => began.duration_since(sched).as_secs_f64() * 1e6,
            None => 0.0,
        };
        // Seconds it was still running at the end of: their maximum latency counts it.
        let since = |t: Instant| t.saturating_duration_since(self.start).as_secs_f64() * 1e6;
        note_running(&mut out.seconds, since(sched), since(end));
        let sec = end.duration_since(self.start).as_secs() as usize;
        let slot = slot_at(&mut out.seconds, sec);
        let tally = &mut out.scripts[k].total;
        if let Done::Committed(_) = done {
            slot.add(lat_us, lag_us);
            tally.add(lat_us, lag_us);
            out.hist.saturating_record(lat_us.max(1.0) as u64);
            if self.limit_us.is_some_and(|l| lat_us > l) {
                out.late += 1;
            }
            self.live.committed(lat_us);
        } else {
            let deadlock = matches!(done, Done::Failed { deadlock: true });
            for s in [slot, tally] {
                s.failed += 1;
                s.deadlocks += u64::from(deadlock);
            }
            self.live.failed();
        }
    }
}

/// How a transaction ended (when it did not fail with an error).
#[derive(Debug, Clone, Copy)]
enum Done {
    /// Committed; the history row it inserted (tid, bid, aid, delta, mtime), if any.
    Committed(Option<[i64; 5]>),
    /// Failed and was aborted: on a deadlock (`true`), or rolled back by the abort storm.
    Failed { deadlock: bool },
}

/// Appends a committed transaction's history row to the ack log (`--ack-log`).
fn acknowledge(f: &mut std::fs::File, [tid, bid, aid, delta, mtime]: [i64; 5]) -> Result<()> {
    use std::io::Write as _;
    let line = format!("{tid} {bid} {aid} {delta} {mtime}\n");
    f.write_all(line.as_bytes())
        .context("appending to the ack log (--ack-log)")
}

/// Runs one transaction of `pick`'s script: interpreted with `state` if it has commands,
/// else by engine calls; Err: any error other than a deadlock.
fn one_transaction(
    db: &Db<'_>,
    opts: &BenchOptions,
    pick: &Pick,
    rng: &mut SmallRng,
    state: Option<&mut ScriptState>,
) -> Result<Done> {
    if let (Some(s), Some(st)) = (pick.script.script.as_deref(), state) {
        return Ok(match super::script_run::run_once(db, s, st, rng)? {
            super::script_run::Ran::Committed => Done::Committed(None),
            super::script_run::Ran::Deadlock => Done::Failed { deadlock: true },
        });
    }
    let mode = pick.script.mode;
    Ok(builtin_transaction(
        db,
        mode,
        opts.abort_fraction,
        &pick.keys,
        rng,
    )?)
}

/// One transaction of a built-in script, by engine calls; Err: any error other than a
/// deadlock.
fn builtin_transaction(
    db: &Db<'_>,
    mode: Mode,
    abort_fraction: f64,
    keys: &Keys,
    rng: &mut SmallRng,
) -> Result<Done, bufpool::Error> {
    if mode == Mode::SavepointOverflow {
        let test = db.test.as_ref().expect("run() checks pgbench_test first");
        super::side::savepoint_overflow(
            db,
            test,
            super::side::SAVEPOINTS,
            super::side::SideScript::SavepointOverflow.default_pause(),
            &|| false,
        )?;
        return Ok(Done::Committed(None));
    }
    let scale = db.scale as i64;
    let aid = keys.next(rng);
    // YCSB B's update: one account, a new row version, the balance as it was (so `check`
    // still balances against the history).
    if mode == Mode::YcsbB && rng.random_bool(YCSB_B_UPDATES) {
        let x = db.engine.begin_xid()?;
        db.touch_accounts(x, &[aid])?;
        db.engine.commit_transaction(x)?;
        return Ok(Done::Committed(None));
    }
    if matches!(mode, Mode::SelectOnly | Mode::YcsbB | Mode::YcsbC) {
        // Reads only: no transaction id, so no commit record and no flush to wait for.
        let t = db.engine.begin()?;
        db.abalance(&t.snapshot(), aid)?;
        t.commit()?;
        return Ok(Done::Committed(None));
    }
    let bid = rng.random_range(1..=scale);
    let tid = rng.random_range(1..=scale * TELLERS_PER_SCALE as i64);
    let delta = rng.random_range(-5000..=5000);
    let mtime = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0);
    let x = db.engine.begin_xid()?;
    let r = if mode == Mode::Multixact {
        db.multixact(x, aid, bid, tid, delta, mtime)
    } else {
        db.tpcb(x, mode == Mode::TpcbLike, aid, bid, tid, delta, mtime)
    };
    match r {
        Ok(()) if abort_fraction > 0.0 && rng.random_bool(abort_fraction.min(1.0)) => {
            db.engine.abort_transaction(x)?;
            Ok(Done::Failed { deadlock: false })
        }
        Ok(()) => {
            db.engine.commit_transaction(x)?;
            Ok(Done::Committed(Some([tid, bid, aid, delta, mtime])))
        }
        Err(e) if e.is_deadlock() => {
            db.engine.abort_transaction(x)?;
            Ok(Done::Failed { deadlock: true })
        }
        Err(e) => {
            let _ = db.engine.abort_transaction(x);
            Err(e)
        }
    }
}
