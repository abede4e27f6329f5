//! Seed 002's second pgbench instance: a side script run by one thread beside the
//! clients (`bench --side-script NAME`), and the scripts' transactions themselves (also
//! the main clients' with `-b savepoint-overflow`).
//!
//! - `savepoint-overflow` (experiment 1's savepoint.sql): BEGIN; then 70 times SAVEPOINT
//!   and a one-row INSERT into `pgbench_test`, each savepoint nested in the one before;
//!   a pause (1 s); COMMIT. While it pauses its transaction has more subtransactions than
//!   a snapshot caches ([`bufpool::txn::MAX_CACHED_SUBXIDS`]), so every snapshot the
//!   clients take is overflowed and their visibility checks look parents up in the
//!   subtransaction SLRU.
//! - `long-running` (experiment 2's longrunning.sql): BEGIN; one INSERT; a pause (10 s);
//!   COMMIT: holds the oldest running transaction back for 10 s at a time.
//! - `full-scan` (not seed 002's: replacement experiments): a full scan of
//!   `pgbench_accounts` (`SELECT count(*)`), then the pause (none by default), again and
//!   again: a scan larger than the pool beside the clients, through a ring unless
//!   `bulkread_ring_size = 0`.
//!
//! The side thread's transactions are counted apart from the clients' (their tps and
//! latency are the clients' alone, as pgbench's first instance reports them).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use bufpool::table::Heap;

use super::Db;
use crate::report::model::SideCounts;

/// Savepoints per savepoint-overflow transaction (the seed's 70: past the cache of 64).
pub const SAVEPOINTS: u32 = 70;

/// A side script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SideScript {
    #[value(name = "savepoint-overflow")]
    SavepointOverflow,
    #[value(name = "long-running")]
    LongRunning,
    #[value(name = "full-scan")]
    FullScan,
}

impl SideScript {
    pub fn name(self) -> &'static str {
        match self {
            SideScript::SavepointOverflow => "savepoint-overflow",
            SideScript::LongRunning => "long-running",
            SideScript::FullScan => "full-scan",
        }
    }

    /// The script's pause before COMMIT (pg_sleep in the seed's scripts).
    pub fn default_pause(self) -> Duration {
        match self {
            SideScript::SavepointOverflow => Duration::from_secs(1),
            SideScript::LongRunning => Duration::from_secs(10),
            SideScript::FullScan => Duration::ZERO,
        }
    }
}

/// Sleeps for `d`, in short steps, returning early once `stop()` holds.
fn pause(d: Duration, stop: &dyn Fn() -> bool) {
    let until = Instant::now() + d;
    while !stop() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}

/// One row for `pgbench_test` (one int4 column, as the seed's `test` table).
fn test_row(v: i64) -> Vec<u8> {
    let s = super::test_schema();
    let mut r = s.blank_row();
    s.set_int(&mut r, 0, v);
    r
}

/// One savepoint-overflow transaction: `savepoints` nested savepoints with an insert in
/// each, the pause, the commit. Returns the subtransactions it used.
pub fn savepoint_overflow(
    db: &Db<'_>,
    test: &Heap<'_>,
    savepoints: u32,
    wait: Duration,
    stop: &dyn Fn() -> bool,
) -> Result<u64, bufpool::Error> {
    let mut t = db.engine.begin()?;
    for i in 0..savepoints {
        t.savepoint()?;
        test.insert(t.xid()?, &test_row(i64::from(i)))?;
    }
    pause(wait, stop);
    t.commit()?;
    Ok(u64::from(savepoints))
}

/// One long-running transaction: an insert, the pause, the commit.
pub fn long_running(
    db: &Db<'_>,
    test: &Heap<'_>,
    wait: Duration,
    stop: &dyn Fn() -> bool,
) -> Result<(), bufpool::Error> {
    let t = db.engine.begin()?;
    test.insert(t.xid()?, &test_row(1))?;
    pause(wait, stop);
    t.commit()?;
    Ok(())
}

/// One full scan of `pgbench_accounts` under a fresh snapshot, then the pause. Returns
/// the rows it saw.
pub fn full_scan(db: &Db<'_>, wait: Duration, stop: &dyn Fn() -> bool) -> Result<u64> {
    let snap = db.engine.txns().snapshot(bufpool::txn::INVALID_XID);
    let mut rows = 0u64;
    db.accounts.scan(&snap, |_, _| rows += 1)?;
    pause(wait, stop);
    Ok(rows)
}

/// Runs `script` over and over until `done` (the clients finished) or `stop` (Ctrl-C).
pub fn run(
    db: &Db<'_>,
    script: SideScript,
    wait: Duration,
    done: &AtomicBool,
    stop: &AtomicBool,
) -> Result<SideCounts> {
    let test = db.test()?;
    let over = || done.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed);
    let mut out = SideCounts {
        script: script.name().to_string(),
        pause_ms: wait.as_secs_f64() * 1e3,
        ..SideCounts::default()
    };
    while !over() {
        let began = Instant::now();
        match script {
            SideScript::SavepointOverflow => {
                out.subtransactions += savepoint_overflow(db, test, SAVEPOINTS, wait, &over)?;
            }
            SideScript::LongRunning => long_running(db, test, wait, &over)?,
            SideScript::FullScan => {
                full_scan(db, wait, &over)?;
            }
        }
        out.transactions += 1;
        out.longest_ms = out.longest_ms.max(began.elapsed().as_secs_f64() * 1e3);
    }
    Ok(out)
}
