//! The TPC-B of `bufpool bench` on SQLite: pgbench's four tables and its built-in
//! transaction, run by `bufpool compare` in a child process (`bufpool sqlite-tpcb`), so
//! that its CPU time, bytes written and peak memory are its own; and the clients' loop,
//! figures and settings that YCSB on SQLite (`sqlite_ycsb.rs`) shares.
//!
//! Settings, as `bufpool compare` documents them: WAL mode; `synchronous=FULL` for
//! synchronous commit on (every commit syncs the WAL) and `NORMAL` for off (the WAL is
//! synced at checkpoints only); `cache_size` = the pool size, per connection (SQLite has
//! no shared cache in WAL mode, so C clients may hold up to C pools); one connection per
//! client; `BEGIN IMMEDIATE` so that writers queue for the lock at the start instead of
//! failing on a read-to-write upgrade; a busy handler with SQLite's own back-off (1, 2, 5,
//! 10, 15, 20, 25, 25, 25, 50, 50, 100 ms, then 100 ms) that counts its waits and gives
//! up after 10 s (the transaction then counts as failed). SQLite checkpoints its WAL
//! every 1000 pages (its default); `checkpoint_timeout` has no SQLite counterpart.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rusqlite::{params, Connection, ErrorCode};
use serde::{Deserialize, Serialize};

use crate::report::model::RunResult;
use crate::tpcb::driver::logs::{log_file_name, write_aggregate_file};
use crate::tpcb::driver::outcome::{histogram_buckets, latency_summary, per_interval, series};
use crate::tpcb::driver::stats::{latency_histogram, slot_at, Slot};
use crate::tpcb::{ACCOUNTS_PER_SCALE, TELLERS_PER_SCALE};

/// The database file in the run's directory.
pub const DB_FILE: &str = "tpcb.sqlite";

/// SQLite's own busy-handler delays, ms (sqliteDefaultBusyCallback).
const DELAYS_MS: [u64; 12] = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100];
/// The busy handler gives up after waiting this long for one lock.
const BUSY_TIMEOUT_MS: u64 = 10_000;

thread_local! {
    /// This thread's busy-handler calls and the time they slept, µs.
    static BUSY: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// The busy handler: sleeps SQLite's back-off for the `count`-th retry of one lock and
/// counts it; false (give up) after [`BUSY_TIMEOUT_MS`].
fn busy_handler(count: i32) -> bool {
    let count = count.max(0) as usize;
    let delay = DELAYS_MS[count.min(DELAYS_MS.len() - 1)];
    let waited: u64 = if count < DELAYS_MS.len() {
        DELAYS_MS[..count].iter().sum()
    } else {
        DELAYS_MS.iter().sum::<u64>() + (count - DELAYS_MS.len()) as u64 * 100
    };
    if waited + delay > BUSY_TIMEOUT_MS {
        return false;
    }
    let t = Instant::now();
    // The lock holder is another connection, maybe in another process: SQLite offers no
    // wake-up, so waiting means sleeping and retrying, as SQLite's own handler does.
    std::thread::sleep(Duration::from_millis(delay));
    let slept = t.elapsed().as_micros() as u64;
    BUSY.with(|b| {
        let (n, us) = b.get();
        b.set((n + 1, us + slept));
    });
    true
}

/// What one SQLite run was asked to do.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    pub dir: PathBuf,
    pub clients: u32,
    pub jobs: u32,
    pub duration: Duration,
    pub sync: bool,
    pub cache_bytes: u64,
    pub seed: u64,
    /// Where to write the per-second log (pgbench's aggregate format), if anywhere.
    pub log_prefix: Option<PathBuf>,
    /// A progress line on stderr every this many seconds (pgbench's `-P`), if any.
    pub progress_s: Option<u32>,
    /// pgbench's `-R`: the clients' total rate, transactions per second (None: flat
    /// out). Each client runs a Poisson schedule of its share; a transaction's latency
    /// counts from its scheduled start, as pgbench's.
    pub rate: Option<f64>,
}

/// A client's schedule under `-R` (pgbench's: exponential gaps at the client's share of
/// the rate, never skipping): when its next transaction is due.
pub(super) struct Schedule {
    per_client: Option<f64>,
    next: Instant,
}

impl Schedule {
    /// The schedule of one of `o.clients` clients, starting at `start`.
    pub(super) fn new(o: &SqliteOptions, start: Instant) -> Schedule {
        Schedule {
            per_client: o.rate.map(|r| r / f64::from(o.clients.max(1))),
            next: start,
        }
    }

    /// Waits until the next transaction is due and returns when it was due (now, flat
    /// out), its latency counting from there, and when the client woke to start it.
    pub(super) fn wait(&mut self, rng: &mut SmallRng) -> Due {
        let Some(rate) = self.per_client.filter(|r| *r > 0.0) else {
            let now = Instant::now();
            return Due {
                at: now,
                began: now,
            };
        };
        let u: f64 = rng.random_range(f64::EPSILON..1.0);
        self.next += Duration::from_secs_f64(-u.ln() / rate);
        let now = Instant::now();
        if self.next > now {
            std::thread::sleep(self.next - now);
        }
        Due {
            at: self.next,
            began: Instant::now().max(self.next),
        }
    }
}

/// A transaction's moment on the schedule and when its client began it: the latency
/// counts from `at`, the schedule lag is `began - at` (0 flat out).
#[derive(Debug, Clone, Copy)]
pub(super) struct Due {
    pub(super) at: Instant,
    pub(super) began: Instant,
}

/// What the clients have done so far, for the progress lines.
#[derive(Default)]
pub(super) struct Running {
    pub(super) commits: AtomicU64,
    pub(super) failed: AtomicU64,
    pub(super) latency_us: AtomicU64,
}

/// Prints pgbench's progress line every `every` until `done`: the interval's rate,
/// average latency and failures.
fn report_progress(running: &Running, every: Duration, start: Instant, done: &AtomicBool) {
    let mut last = (0u64, 0u64, 0u64);
    let mut next = every;
    while !done.load(Ordering::Relaxed) {
        if start.elapsed() < next {
            // Short naps so the end of the run is not held up by a whole interval.
            std::thread::sleep(Duration::from_millis(50).min(next - start.elapsed()));
            continue;
        }
        let now = (
            running.commits.load(Ordering::Relaxed),
            running.failed.load(Ordering::Relaxed),
            running.latency_us.load(Ordering::Relaxed),
        );
        let n = now.0 - last.0;
        let lat_ms = if n > 0 {
            (now.2 - last.2) as f64 / n as f64 / 1000.0
        } else {
            0.0
        };
        eprintln!(
            "progress: {:.1} s, {:.1} tps, lat {lat_ms:.3} ms, {} failed",
            next.as_secs_f64(),
            n as f64 / every.as_secs_f64(),
            now.1 - last.1
        );
        last = now;
        next += every;
    }
}

/// A SQLite run: the common result plus what only SQLite reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SqliteRun {
    pub result: RunResult,
    pub version: String,
    /// Busy-handler calls (each one a sleep while another connection held the lock).
    pub busy_waits: u64,
    /// Time spent in them, s.
    pub busy_wait_s: f64,
}

fn open(dir: &Path) -> Result<Connection> {
    open_file(dir, DB_FILE)
}

/// Opens the SQLite database `file` in `dir`.
pub(super) fn open_file(dir: &Path, file: &str) -> Result<Connection> {
    let path = dir.join(file);
    Connection::open(&path).with_context(|| format!("opening SQLite database {}", path.display()))
}

/// Removes the database `file` from `dir` with its WAL and shared-memory files, if there.
pub(super) fn remove_db_files(dir: &Path, file: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for suffix in ["", "-wal", "-shm"] {
        let p = dir.join(format!("{file}{suffix}"));
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", p.display())),
        }
    }
    Ok(())
}

/// Creates the database like `pgbench -i -s scale`: the four tables with primary keys
/// (each a rowid, SQLite's clustered key), `scale` branches, 10 tellers and 100,000
/// accounts per unit with blank-padded fillers, in one transaction; then a WAL
/// checkpoint. Replaces any database already in `dir`.
pub fn load(dir: &Path, scale: u32) -> Result<()> {
    remove_db_files(dir, DB_FILE)?;
    let mut db = open(dir)?;
    db.pragma_update(None, "journal_mode", "WAL")?;
    db.pragma_update(None, "synchronous", "NORMAL")?;
    db.execute_batch(
        "CREATE TABLE pgbench_branches (bid INTEGER PRIMARY KEY, bbalance INTEGER, filler TEXT);
         CREATE TABLE pgbench_tellers (tid INTEGER PRIMARY KEY, bid INTEGER, tbalance INTEGER, filler TEXT);
         CREATE TABLE pgbench_accounts (aid INTEGER PRIMARY KEY, bid INTEGER, abalance INTEGER, filler TEXT);
         CREATE TABLE pgbench_history (tid INTEGER, bid INTEGER, aid INTEGER, delta INTEGER, mtime TEXT, filler TEXT);",
    )?;
    let tx = db.transaction()?;
    {
        let scale = i64::from(scale);
        let mut b = tx.prepare("INSERT INTO pgbench_branches VALUES (?1, 0, ?2)")?;
        for bid in 1..=scale {
            b.execute(params![bid, " ".repeat(88)])?;
        }
        let mut t = tx.prepare("INSERT INTO pgbench_tellers VALUES (?1, ?2, 0, ?3)")?;
        let tellers = TELLERS_PER_SCALE as i64;
        for tid in 1..=scale * tellers {
            t.execute(params![tid, (tid - 1) / tellers + 1, " ".repeat(84)])?;
        }
        let mut a = tx.prepare("INSERT INTO pgbench_accounts VALUES (?1, ?2, 0, ?3)")?;
        let filler = " ".repeat(84);
        let accounts = ACCOUNTS_PER_SCALE as i64;
        for aid in 1..=scale * accounts {
            a.execute(params![aid, (aid - 1) / accounts + 1, filler])?;
        }
    }
    tx.commit()?;
    db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
    db.close().map_err(|(_, e)| e)?;
    Ok(())
}

/// Runs `clients` connections for `duration` and returns the run in the report's shape.
pub fn run(o: &SqliteOptions, stop: &AtomicBool) -> Result<SqliteRun> {
    let scale: i64 = {
        let db = open(&o.dir)?;
        db.query_row("SELECT count(*) FROM pgbench_branches", [], |r| r.get(0))
            .context("reading the scale (was the SQLite database loaded?)")?
    };
    anyhow::ensure!(
        scale > 0,
        "the SQLite database has no branches: load it first"
    );
    run_clients(
        o,
        DB_FILE,
        ("tpcb-like", scale as u32),
        |id, start, running| client(o, id, scale, start, stop, running),
    )
}

/// Runs `o.clients` clients, each `client(id, start, running)` on a thread of its own,
/// beside the progress lines, on the database `file`; merges their figures into the run's
/// result, which says it ran `mode` at `scale`.
pub(super) fn run_clients(
    o: &SqliteOptions,
    file: &str,
    (mode, scale): (&str, u32),
    client: impl Fn(u32, Instant, &Running) -> Result<ClientOut> + Sync,
) -> Result<SqliteRun> {
    let start = Instant::now();
    let wall_start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let running = Running::default();
    let done = AtomicBool::new(false);
    let per_client: Vec<Result<ClientOut>> = std::thread::scope(|s| {
        let (running, done, client) = (&running, &done, &client);
        if let Some(every) = o.progress_s.filter(|&p| p > 0) {
            let every = Duration::from_secs(every.into());
            s.spawn(move || report_progress(running, every, start, done));
        }
        let handles: Vec<_> = (0..o.clients.max(1))
            .map(|id| s.spawn(move || client(id, start, running)))
            .collect();
        let outs = handles
            .into_iter()
            .map(|h| h.join().expect("sqlite client thread"))
            .collect();
        done.store(true, Ordering::Relaxed);
        outs
    });
    let elapsed = start.elapsed().as_secs_f64();
    let outs: Vec<ClientOut> = per_client.into_iter().collect::<Result<_>>()?;
    let mut secs: Vec<Slot> = Vec::new();
    let mut hist = latency_histogram();
    let (mut busy_waits, mut busy_us) = (0, 0);
    for c in &outs {
        for (i, s) in c.seconds.iter().enumerate() {
            slot_at(&mut secs, i).merge(s);
        }
        hist.add(&c.hist).expect("same bounds");
        busy_waits += c.busy_waits;
        busy_us += c.busy_us;
    }
    if let Some(prefix) = &o.log_prefix {
        let threads = o.jobs.max(1) as usize;
        for t in 0..threads {
            let mut slots: Vec<Slot> = Vec::new();
            for c in outs.iter().enumerate().filter(|(i, _)| i % threads == t) {
                for (i, s) in c.1.seconds.iter().enumerate() {
                    slot_at(&mut slots, i).merge(s);
                }
            }
            let name = prefix
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let path = prefix.with_file_name(log_file_name(&name, t));
            write_aggregate_file(&path, &slots, 1, wall_start)?;
        }
    }
    let mut total = Slot::default();
    for s in &secs {
        total.merge(s);
    }
    let series = series(&secs, &[], elapsed);
    let config = settings_in_effect(o, file)?;
    let result = RunResult {
        provenance: crate::provenance::Provenance::here(),
        label: "sqlite".into(),
        started_at: crate::report::model::rfc3339_utc(wall_start),
        mode: mode.into(),
        scale,
        clients: o.clients.max(1),
        threads: o.jobs.max(1),
        duration_s: elapsed,
        transactions: total.n,
        failed: total.failed,
        tps: total.n as f64 / elapsed,
        latency_ms: latency_summary(&total, &hist),
        per_interval: per_interval(&series),
        buffers: Default::default(),
        checkpoints: Vec::new(),
        config,
        series,
        latency_histogram: histogram_buckets(&hist),
        bgwriter: None,
        checkpointer: None,
        wal: None,
        slru: Vec::new(),
        side_script: None,
        tables: None,
        bytes_written: None,
        resizes: Vec::new(),
        stat_io: Vec::new(),
        waits: None,
        memory: None,
    };
    Ok(SqliteRun {
        result,
        version: format!("SQLite {}", rusqlite::version()),
        busy_waits,
        busy_wait_s: busy_us as f64 / 1e6,
    })
}

/// One client's figures.
pub(super) struct ClientOut {
    pub(super) seconds: Vec<Slot>,
    pub(super) hist: hdrhistogram::Histogram<u64>,
    pub(super) busy_waits: u64,
    pub(super) busy_us: u64,
}

impl ClientOut {
    pub(super) fn new() -> ClientOut {
        ClientOut {
            seconds: Vec::new(),
            hist: latency_histogram(),
            busy_waits: 0,
            busy_us: 0,
        }
    }

    /// Counts a transaction that committed at `end` after `us` µs, of which `lag_us`
    /// before it began (the run began at `start`).
    pub(super) fn committed(
        &mut self,
        start: Instant,
        end: Instant,
        (us, lag_us): (u64, u64),
        running: &Running,
    ) {
        let sec = end.duration_since(start).as_secs() as usize;
        slot_at(&mut self.seconds, sec).add(us as f64, lag_us as f64);
        self.hist.record(us.max(1)).ok();
        running.commits.fetch_add(1, Ordering::Relaxed);
        running.latency_us.fetch_add(us, Ordering::Relaxed);
    }

    /// Counts a transaction that failed at `end` (its busy handler gave up).
    pub(super) fn failed(&mut self, start: Instant, end: Instant, running: &Running) {
        let sec = end.duration_since(start).as_secs() as usize;
        slot_at(&mut self.seconds, sec).failed += 1;
        running.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Books a transaction of `db` due at `t0` that ended now with `r`: committed,
    /// or failed when the busy handler gave up (rolled back and counted, as pgbench counts
    /// a failed transaction); any other error is handed back.
    pub(super) fn book(
        &mut self,
        db: &Connection,
        (start, t0): (Instant, Due),
        r: rusqlite::Result<()>,
        running: &Running,
    ) -> rusqlite::Result<()> {
        let end = Instant::now();
        match r {
            Ok(()) => {
                let us = end.duration_since(t0.at).as_micros() as u64;
                let lag_us = t0.began.duration_since(t0.at).as_micros() as u64;
                self.committed(start, end, (us, lag_us), running);
                Ok(())
            }
            Err(e) if is_busy(&e) => {
                let _ = db.execute_batch("ROLLBACK");
                self.failed(start, end, running);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Takes this thread's busy-handler figures (call at the client's end).
    pub(super) fn take_busy(&mut self) {
        let (n, us) = BUSY.with(|b| b.get());
        self.busy_waits = n;
        self.busy_us = us;
    }
}

/// One client: its own connection, pgbench's TPC-B transaction back to back until the
/// run's time is up or `stop` is set.
fn client(
    o: &SqliteOptions,
    id: u32,
    scale: i64,
    start: Instant,
    stop: &AtomicBool,
    running: &Running,
) -> Result<ClientOut> {
    let db = open(&o.dir)?;
    configure(&db, o)?;
    BUSY.with(|b| b.set((0, 0)));
    let mut rng = SmallRng::seed_from_u64(o.seed ^ (u64::from(id) << 32));
    let mut out = ClientOut::new();
    let mut schedule = Schedule::new(o, start);
    while start.elapsed() < o.duration && !stop.load(Ordering::Relaxed) {
        let aid = rng.random_range(1..=scale * ACCOUNTS_PER_SCALE as i64);
        let bid = rng.random_range(1..=scale);
        let tid = rng.random_range(1..=scale * TELLERS_PER_SCALE as i64);
        let delta: i64 = rng.random_range(-5000..=5000);
        let t0 = schedule.wait(&mut rng);
        let outcome = transaction(&db, aid, bid, tid, delta);
        out.book(&db, (start, t0), outcome, running)
            .context("SQLite TPC-B transaction")?;
    }
    out.take_busy();
    Ok(out)
}

/// A client connection's settings: synchronous by `--sync`, the pool as its cache, the
/// counting busy handler (journal_mode WAL is the database's own, set at load).
pub(super) fn configure(db: &Connection, o: &SqliteOptions) -> Result<()> {
    db.pragma_update(None, "synchronous", if o.sync { "FULL" } else { "NORMAL" })?;
    db.pragma_update(None, "cache_size", -((o.cache_bytes / 1024) as i64))?;
    db.busy_handler(Some(busy_handler))?;
    Ok(())
}

/// The settings a client connection runs with, read back from SQLite itself.
fn settings_in_effect(
    o: &SqliteOptions,
    file: &str,
) -> Result<std::collections::BTreeMap<String, String>> {
    let db = open_file(&o.dir, file)?;
    configure(&db, o)?;
    let mut out = std::collections::BTreeMap::new();
    for name in [
        "journal_mode",
        "synchronous",
        "cache_size",
        "page_size",
        "wal_autocheckpoint",
        "mmap_size",
        "locking_mode",
    ] {
        let v: String = db
            .pragma_query_value(None, name, |r| r.get::<_, rusqlite::types::Value>(0))
            .map(|v| match v {
                rusqlite::types::Value::Integer(i) => i.to_string(),
                rusqlite::types::Value::Text(t) => t,
                other => format!("{other:?}"),
            })
            .with_context(|| format!("reading PRAGMA {name}"))?;
        let v = match (name, v.as_str()) {
            ("synchronous", "0") => "OFF".into(),
            ("synchronous", "1") => "NORMAL".into(),
            ("synchronous", "2") => "FULL".into(),
            ("synchronous", "3") => "EXTRA".into(),
            ("cache_size", _) => format!("{v} (negative: KiB, per connection)"),
            ("wal_autocheckpoint", _) => format!("{v} (pages)"),
            _ => v,
        };
        out.insert(name.to_string(), v);
    }
    out.insert(
        "busy_handler".into(),
        "SQLite's back-off, 10 s limit, counted".into(),
    );
    Ok(out)
}

pub(super) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// pgbench's "TPC-B (sort of)" transaction, with prepared (cached) statements.
fn transaction(db: &Connection, aid: i64, bid: i64, tid: i64, delta: i64) -> rusqlite::Result<()> {
    db.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    db.prepare_cached("UPDATE pgbench_accounts SET abalance = abalance + ?1 WHERE aid = ?2")?
        .execute(params![delta, aid])?;
    let _abalance: i64 = db
        .prepare_cached("SELECT abalance FROM pgbench_accounts WHERE aid = ?1")?
        .query_row(params![aid], |r| r.get(0))?;
    db.prepare_cached("UPDATE pgbench_tellers SET tbalance = tbalance + ?1 WHERE tid = ?2")?
        .execute(params![delta, tid])?;
    db.prepare_cached("UPDATE pgbench_branches SET bbalance = bbalance + ?1 WHERE bid = ?2")?
        .execute(params![delta, bid])?;
    db.prepare_cached(
        "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (?1, ?2, ?3, ?4, CURRENT_TIMESTAMP)",
    )?
    .execute(params![tid, bid, aid, delta])?;
    db.prepare_cached("COMMIT")?.execute([])?;
    Ok(())
}

/// Checks the loaded-and-run database as `bufpool check` checks bufpool's: the three
/// balance sums equal the history's delta sum. Returns (history rows, delta sum).
pub fn check(dir: &Path) -> Result<(i64, i64)> {
    let db = open(dir)?;
    let sum = |sql: &str| -> Result<i64> { Ok(db.query_row(sql, [], |r| r.get(0))?) };
    let a = sum("SELECT coalesce(sum(abalance), 0) FROM pgbench_accounts")?;
    let b = sum("SELECT coalesce(sum(bbalance), 0) FROM pgbench_branches")?;
    let t = sum("SELECT coalesce(sum(tbalance), 0) FROM pgbench_tellers")?;
    let h = sum("SELECT coalesce(sum(delta), 0) FROM pgbench_history")?;
    let rows = sum("SELECT count(*) FROM pgbench_history")?;
    anyhow::ensure!(
        a == h && b == h && t == h,
        "SQLite balances disagree: accounts {a}, branches {b}, tellers {t}, history {h}"
    );
    Ok((rows, h))
}
