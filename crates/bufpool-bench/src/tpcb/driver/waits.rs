//! What a client's transactions waited for: the engine's per-thread wait totals
//! (`bufpool::waits`) and the kernel's per-thread scheduler figures
//! (`/proc/thread-self/schedstat`: time on a CPU, time runnable but waiting for one), taken
//! before and after each transaction and summed over all transactions and over those
//! slower than [`SLOW_US`]. The slow ones say what a stall was made of: a row lock, a
//! buffer's I/O, the WAL, the run queue, or time on the CPU. Each second's slowest
//! transaction is kept with its figures (the per-second trace): what the per-second
//! maximum latency is made of.
//!
//! Cost: a schedstat read is a system call that formats a line (a few µs, as much as a
//! whole in-memory YCSB C read), so a mark reuses the last reading while it is under
//! [`SCHED_MAX_AGE`] old. A transaction that takes longer than that always ends with a
//! fresh reading, and its figures include at most that much of the time before it began
//! (2% of a 5 ms transaction); a faster one may show its neighbours' scheduler time or
//! none, and the sum over all transactions is the client's whole run either way.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use bufpool::waits::{SlruKind, Wait, WaitTimes};

use crate::report::model::{SlruWait, WaitBucket, WaitProfile};

/// A transaction slower than this (µs) counts as slow (the summary's "over 10 ms").
pub(crate) const SLOW_US: f64 = 10_000.0;
/// The latency target's threshold (µs): a per-second maximum latency p50 under 5 ms
/// (issue 14) is made of the transactions over it (the summary's "over 5 ms").
pub(crate) const TARGET_US: f64 = 5_000.0;

/// How long a scheduler reading serves the marks after it (see the module's text).
pub(crate) const SCHED_MAX_AGE: Duration = Duration::from_micros(100);

/// The calling thread's scheduler figures, ns: (on a CPU, runnable but waiting for one).
pub(crate) struct ThreadSched {
    file: Option<File>,
    /// The last reading and when it was taken.
    last: Option<(Instant, (u64, u64))>,
}

impl ThreadSched {
    /// Opens the calling thread's schedstat (None inside: not Linux, or no schedstats);
    /// must be called on the thread it measures.
    pub(crate) fn open() -> ThreadSched {
        ThreadSched {
            file: File::open("/proc/thread-self/schedstat").ok(),
            last: None,
        }
    }

    /// The figures as of `now`: the last reading while it is under [`SCHED_MAX_AGE`]
    /// old, else a fresh one.
    pub(crate) fn recent(&mut self, now: Instant) -> Option<(u64, u64)> {
        if let Some((at, v)) = self.last {
            if now.saturating_duration_since(at) < SCHED_MAX_AGE {
                return Some(v);
            }
        }
        let v = self.read()?;
        self.last = Some((now, v));
        Some(v)
    }

    /// (on-CPU ns, run-queue ns), or None without schedstats.
    pub(crate) fn read(&self) -> Option<(u64, u64)> {
        let f = self.file.as_ref()?;
        let mut buf = [0u8; 96];
        let n = f.read_at(&mut buf, 0).ok()?;
        parse_schedstat(&buf[..n])
    }
}

/// The first two numbers of a schedstat line ("<cpu ns> <runqueue ns> <slices>").
fn parse_schedstat(line: &[u8]) -> Option<(u64, u64)> {
    let s = std::str::from_utf8(line).ok()?;
    let mut it = s.split_ascii_whitespace().map(|v| v.parse::<u64>().ok());
    Some((it.next()??, it.next()??))
}

/// One thread's figures at one moment.
#[derive(Clone, Copy)]
pub(crate) struct Mark {
    waits: WaitTimes,
    sched: Option<(u64, u64)>,
}

impl Mark {
    /// The thread's figures at `now` (the scheduler's as [`ThreadSched::recent`] has
    /// them).
    pub(crate) fn now(sched: &mut ThreadSched, now: Instant) -> Mark {
        Mark {
            waits: bufpool::waits::current(),
            sched: sched.recent(now),
        }
    }
}

/// Sums for a set of transactions.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sums {
    transactions: u64,
    wall_ns: u64,
    waits: WaitTimes,
    cpu_ns: u64,
    runq_ns: u64,
    /// Transactions with scheduler figures (all of them, or none).
    sched_transactions: u64,
}

impl Sums {
    fn add(&mut self, wall_ns: u64, from: &Mark, to: &Mark) {
        self.transactions += 1;
        self.wall_ns += wall_ns;
        self.waits.add(&to.waits.since(&from.waits));
        if let (Some(a), Some(b)) = (from.sched, to.sched) {
            self.cpu_ns += b.0.saturating_sub(a.0);
            self.runq_ns += b.1.saturating_sub(a.1);
            self.sched_transactions += 1;
        }
    }

    fn merge(&mut self, o: &Sums) {
        self.transactions += o.transactions;
        self.wall_ns += o.wall_ns;
        self.waits.add(&o.waits);
        self.cpu_ns += o.cpu_ns;
        self.runq_ns += o.runq_ns;
        self.sched_transactions += o.sched_transactions;
    }

    fn bucket(&self) -> WaitBucket {
        let ms = |ns: u64| ns as f64 / 1e6;
        let waits_ms: BTreeMap<String, f64> = Wait::ALL
            .iter()
            .map(|&w| (w.name().to_string(), ms(self.waits.ns_of(w))))
            .collect();
        let wait_counts: BTreeMap<String, u64> = Wait::ALL
            .iter()
            .map(|&w| (w.name().to_string(), self.waits.count[w as usize]))
            .collect();
        let sched = self.sched_transactions > 0;
        let slru = SlruKind::ALL
            .iter()
            .map(|&k| (k, self.waits.slru[k as usize]))
            .filter(|(_, w)| w.lock_count + w.io_count > 0)
            .map(|(k, w)| {
                let wait = SlruWait {
                    lock_ms: ms(w.lock_ns),
                    lock_count: w.lock_count,
                    io_ms: ms(w.io_ns),
                    io_count: w.io_count,
                };
                (k.name().to_string(), wait)
            })
            .collect();
        WaitBucket {
            transactions: self.transactions,
            wall_ms: ms(self.wall_ns),
            waits_ms,
            wait_counts,
            on_cpu_ms: sched.then(|| ms(self.cpu_ns)),
            runqueue_ms: sched.then(|| ms(self.runq_ns)),
            slru,
        }
    }
}

/// One client's sums: all committed transactions, those over the latency target, the
/// slow ones, and each second's slowest.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientWaits {
    all: Sums,
    over_target: Sums,
    slow: Sums,
    /// By the second a transaction ended in: the slowest one's figures (wall time in
    /// `wall_ns`; `transactions` 0 until the second has one).
    per_second: Vec<Sums>,
}

impl ClientWaits {
    /// Counts a committed transaction that took `wall_us` between the marks `from`, `to`
    /// and ended in second `sec` of the run.
    pub(crate) fn add(&mut self, sec: usize, wall_us: f64, from: &Mark, to: &Mark) {
        let ns = (wall_us * 1000.0) as u64;
        if self.per_second.len() <= sec {
            self.per_second.resize(sec + 1, Sums::default());
        }
        let slowest = &mut self.per_second[sec];
        if slowest.transactions == 0 || ns > slowest.wall_ns {
            *slowest = Sums::default();
            slowest.add(ns, from, to);
        }
        self.all.add(ns, from, to);
        if wall_us > TARGET_US {
            self.over_target.add(ns, from, to);
        }
        if wall_us > SLOW_US {
            self.slow.add(ns, from, to);
        }
    }

    /// The run's profile from all clients' sums.
    pub(crate) fn profile(clients: impl Iterator<Item = ClientWaits>) -> WaitProfile {
        let (mut all, mut over_target, mut slow) =
            (Sums::default(), Sums::default(), Sums::default());
        let mut per_second: Vec<Sums> = Vec::new();
        for c in clients {
            all.merge(&c.all);
            over_target.merge(&c.over_target);
            slow.merge(&c.slow);
            if per_second.len() < c.per_second.len() {
                per_second.resize(c.per_second.len(), Sums::default());
            }
            for (best, theirs) in per_second.iter_mut().zip(&c.per_second) {
                if theirs.transactions > 0
                    && (best.transactions == 0 || theirs.wall_ns > best.wall_ns)
                {
                    *best = theirs.clone();
                }
            }
        }
        let mut each = Sums::default();
        for s in &per_second {
            each.merge(s);
        }
        WaitProfile {
            all: all.bucket(),
            over_5ms: over_target.bucket(),
            over_10ms: slow.bucket(),
            each_seconds_slowest: each.bucket(),
            slowest_per_second: per_second.iter().map(Sums::bucket).collect(),
        }
    }
}

/// The summary's line for a bucket: the named waits' shares of the wall time, largest
/// first, then the rest ("no named wait"), then the scheduler's on-CPU and
/// runnable-without-a-CPU shares, which overlap the waits (a read's system call runs on
/// the CPU; a woken waiter queues for a CPU inside its wait).
pub(crate) fn describe(b: &WaitBucket) -> String {
    if b.transactions == 0 || b.wall_ms <= 0.0 {
        return "none".into();
    }
    let pct = |v: f64| 100.0 * v / b.wall_ms;
    let mut parts: Vec<(&str, f64)> = b
        .waits_ms
        .iter()
        .filter(|(_, &v)| pct(v) >= 0.5)
        .map(|(k, &v)| (k.as_str(), v))
        .collect();
    let waited: f64 = b.waits_ms.values().sum();
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut body: Vec<String> = parts
        .iter()
        .map(|(k, v)| format!("{k} {:.0}%", pct(*v)))
        .collect();
    body.push(format!(
        "no named wait {:.0}%",
        pct((b.wall_ms - waited).max(0.0))
    ));
    let mut line = format!(
        "{} transactions, {:.1} ms each: {}",
        b.transactions,
        b.wall_ms / b.transactions as f64,
        body.join(", ")
    );
    if let (Some(cpu), Some(rq)) = (b.on_cpu_ms, b.runqueue_ms) {
        line.push_str(&format!(
            "; on CPU {:.0}%, runnable without a CPU {:.0}%",
            pct(cpu),
            pct(rq)
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_lines_parse_and_junk_does_not() {
        assert_eq!(parse_schedstat(b"123456 7890 42\n"), Some((123_456, 7_890)));
        assert_eq!(parse_schedstat(b"12 x 3"), None);
        assert_eq!(parse_schedstat(b""), None);
    }

    #[test]
    fn this_threads_schedstat_counts_cpu_time() {
        let s = ThreadSched::open();
        let Some((cpu0, _)) = s.read() else {
            // Kernels without CONFIG_SCHEDSTATS have no file; the profile then leaves
            // the scheduler columns out (checked by the bucket test below).
            assert!(std::fs::metadata("/proc/thread-self/schedstat").is_err());
            return;
        };
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(20) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        let (cpu1, _) = s.read().unwrap();
        assert!(cpu1 > cpu0, "{cpu0} → {cpu1} after spinning ({x})");
    }

    /// Proves: a reading serves the marks for [`SCHED_MAX_AGE`] (the figures stay put
    /// while the thread spins), and the first mark after that reads afresh.
    #[test]
    fn a_scheduler_reading_serves_for_a_tenth_of_a_millisecond() {
        let mut s = ThreadSched::open();
        let t0 = Instant::now();
        let Some(first) = s.recent(t0) else {
            assert!(std::fs::metadata("/proc/thread-self/schedstat").is_err());
            return;
        };
        let spin = |ms: u64| {
            let t = Instant::now();
            let mut x = 0u64;
            while t.elapsed() < Duration::from_millis(ms) {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            x
        };
        spin(5);
        let half = SCHED_MAX_AGE / 2;
        assert_eq!(s.recent(t0 + half), Some(first), "reused within the age");
        let fresh = s.recent(t0 + SCHED_MAX_AGE).unwrap();
        assert!(
            fresh.0 > first.0,
            "{first:?} → {fresh:?} after spinning 5 ms"
        );
        spin(5);
        assert_eq!(s.recent(t0 + SCHED_MAX_AGE + half), Some(fresh));
    }

    /// The SLRU waits go out per SLRU (only those waited for), in milliseconds and counts.
    #[test]
    fn slru_waits_are_reported_per_slru() {
        let m0 = Mark {
            waits: WaitTimes::default(),
            sched: None,
        };
        let mut w = WaitTimes::default();
        w.ns[Wait::SlruIo as usize] = 3_000_000;
        w.count[Wait::SlruIo as usize] = 2;
        w.slru[SlruKind::Subtrans as usize].io_ns = 3_000_000;
        w.slru[SlruKind::Subtrans as usize].io_count = 2;
        let m1 = Mark {
            waits: w,
            sched: None,
        };
        let mut c = ClientWaits::default();
        c.add(0, 4_000.0, &m0, &m1);
        let p = ClientWaits::profile(std::iter::once(c));
        let sub = &p.all.slru["subtrans"];
        assert_eq!((sub.io_count, sub.lock_count), (2, 0), "{:?}", p.all);
        assert!((sub.io_ms - 3.0).abs() < 1e-9, "{:?}", p.all);
        assert_eq!(
            p.all.slru.len(),
            1,
            "only the SLRUs waited for: {:?}",
            p.all.slru
        );
        let json = serde_json::to_value(&p.all).unwrap();
        assert_eq!(json["slru"]["subtrans"]["io_count"], 2);
        // A bucket with no SLRU wait has no `slru` key, as before.
        let none = serde_json::to_value(&p.over_10ms).unwrap();
        assert!(none.get("slru").is_none(), "{none}");
    }

    #[test]
    fn only_slow_transactions_enter_the_slow_bucket() {
        let mut w = WaitTimes::default();
        let m0 = Mark {
            waits: w,
            sched: Some((0, 0)),
        };
        w.ns[Wait::RowLock as usize] = 9_000_000;
        w.count[Wait::RowLock as usize] = 1;
        let m1 = Mark {
            waits: w,
            sched: Some((1_000_000, 500_000)),
        };
        let mut c = ClientWaits::default();
        c.add(0, 12_000.0, &m0, &m1); // slow
        c.add(0, 6_000.0, &m1, &m1); // over the target, not slow
        c.add(0, 500.0, &m1, &m1); // fast, no waits
        let p = ClientWaits::profile(std::iter::once(c));
        assert_eq!(p.all.transactions, 3);
        assert_eq!(p.over_5ms.transactions, 2);
        assert!((p.over_5ms.wall_ms - 18.0).abs() < 1e-9);
        assert_eq!(p.over_10ms.transactions, 1);
        assert!((p.over_10ms.wall_ms - 12.0).abs() < 1e-9);
        assert_eq!(p.over_10ms.waits_ms["row_lock"], 9.0);
        assert_eq!(p.over_10ms.wait_counts["row_lock"], 1);
        assert_eq!(p.over_10ms.on_cpu_ms, Some(1.0));
        assert_eq!(p.over_10ms.runqueue_ms, Some(0.5));
        let line = describe(&p.over_10ms);
        assert_eq!(
            line,
            "1 transactions, 12.0 ms each: row_lock 75%, no named wait 25%; on CPU 8%, runnable without a CPU 4%"
        );
        // Without scheduler figures the columns are absent, not zero.
        let mut c = ClientWaits::default();
        let m = Mark {
            waits: w,
            sched: None,
        };
        c.add(0, 20_000.0, &m, &m);
        let p = ClientWaits::profile(std::iter::once(c));
        assert_eq!(p.over_10ms.on_cpu_ms, None);
    }

    #[test]
    fn each_second_keeps_its_slowest_transaction_over_all_clients() {
        let quiet = Mark {
            waits: WaitTimes::default(),
            sched: Some((0, 0)),
        };
        let mut w = WaitTimes::default();
        w.ns[Wait::ContentLock as usize] = 3_000_000;
        w.count[Wait::ContentLock as usize] = 1;
        let locked = Mark {
            waits: w,
            sched: Some((1_000_000, 4_000_000)),
        };
        // Client a: second 0's slowest is 2 ms; second 2 has a 7 ms one with a lock wait.
        let mut a = ClientWaits::default();
        a.add(0, 1_000.0, &quiet, &quiet);
        a.add(0, 2_000.0, &quiet, &quiet);
        a.add(0, 1_500.0, &quiet, &quiet);
        a.add(2, 7_000.0, &quiet, &locked);
        // Client b: a slower one in second 0; nothing in seconds 1 and 2.
        let mut b = ClientWaits::default();
        b.add(0, 3_000.0, &quiet, &quiet);
        let p = ClientWaits::profile([a, b].into_iter());
        let walls: Vec<f64> = p.slowest_per_second.iter().map(|s| s.wall_ms).collect();
        assert_eq!(walls, vec![3.0, 0.0, 7.0]);
        assert_eq!(p.slowest_per_second[1].transactions, 0);
        assert_eq!(p.slowest_per_second[2].waits_ms["content_lock"], 3.0);
        assert_eq!(p.slowest_per_second[2].runqueue_ms, Some(4.0));
        assert_eq!(p.each_seconds_slowest.transactions, 2);
        assert!((p.each_seconds_slowest.wall_ms - 10.0).abs() < 1e-9);
        assert_eq!(p.each_seconds_slowest.waits_ms["content_lock"], 3.0);
        assert_eq!(p.all.transactions, 5);
    }
}
