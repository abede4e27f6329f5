//! The built-in scripts' transactions as engine calls (pgbench's tpcb-like,
//! simple-update and select-only; seed 002's savepoint-overflow and multixact; YCSB's B and
//! C): each statement of the script's text (`builtins.rs`) as the heap and index calls
//! that have its effect, in one transaction; a deadlock aborts it and is a failed
//! transaction, any other error fails the run. What a committed one acknowledges
//! (`--ack-log`): the history row it inserted. And the batch of `--batch-every`: rows
//! accounts spread over the table, each given a new version in one transaction.
//!
//! Invariant: every transaction keeps sum(abalance) = sum(bbalance) = sum(tbalance) =
//! sum(history.delta) (the scripts that change accounts alone keep the first and the
//! last, `check --accounts-only`), or rolls back whole.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use rand::rngs::SmallRng;
use rand::Rng;

use super::builtins::Mode;
use super::driver::batch::Batched;
use super::driver::Done;
use super::keys::Keys;
use super::{Db, ACCOUNTS_PER_SCALE, TELLERS_PER_SCALE};

/// zipf-read-update's share of updates (YCSB B's).
const YCSB_B_UPDATES: f64 = 0.05;

/// The history row a committed transaction inserted (tid, bid, aid, delta, mtime): its
/// `--ack-log` line, which `check --acked` looks for in pgbench_history.
#[derive(Debug, Clone, Copy)]
pub(super) struct HistoryRow(pub(super) [i64; 5]);

impl std::fmt::Display for HistoryRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [tid, bid, aid, delta, mtime] = self.0;
        write!(f, "{tid} {bid} {aid} {delta} {mtime}")
    }
}

/// One transaction of a built-in script, by engine calls; Err: any error other than a
/// deadlock.
pub(super) fn builtin_transaction(
    db: &Db<'_>,
    mode: Mode,
    abort_fraction: f64,
    keys: &Keys,
    rng: &mut SmallRng,
) -> Result<Done<HistoryRow>, bufpool::Error> {
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
    if mode == Mode::ZipfReadUpdate && rng.random_bool(YCSB_B_UPDATES) {
        let x = db.engine.begin_xid()?;
        db.touch_accounts(x, &[aid])?;
        db.engine.commit_transaction(x)?;
        return Ok(Done::Committed(None));
    }
    if matches!(
        mode,
        Mode::SelectOnly | Mode::ZipfReadUpdate | Mode::ZipfSelect
    ) {
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
            Ok(Done::Committed(Some(HistoryRow([
                tid, bid, aid, delta, mtime,
            ]))))
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

/// One batch (`--batch-every`): `rows` accounts (at least 1, at most the table) drawn from
/// `rng` over the whole table, in ascending aid, each updated to a new version with its
/// balance as it was (`abalance + 0`, so `check` still balances) in one transaction; a
/// deadlock rolls it back, any other error fails the run.
pub(super) fn batch(db: &Db<'_>, rows: u64, rng: &mut SmallRng) -> Result<Batched> {
    let accounts = i64::from(db.scale) * ACCOUNTS_PER_SCALE as i64;
    let rows = (rows as i64).clamp(1, accounts) as usize;
    let mut aids: Vec<i64> = (0..rows).map(|_| rng.random_range(1..=accounts)).collect();
    aids.sort_unstable();
    aids.dedup();
    let began = Instant::now();
    let x = db.engine.begin_xid().context("batch: begin")?;
    match db.touch_accounts(x, &aids) {
        Ok(()) => {
            db.engine.commit_transaction(x).context("batch: commit")?;
            Ok(Batched::Committed {
                rows: aids.len() as u64,
                began,
            })
        }
        Err(e) if e.is_deadlock() => {
            db.engine.abort_transaction(x)?;
            Ok(Batched::Deadlock)
        }
        Err(e) => {
            let _ = db.engine.abort_transaction(x);
            Err(e).context("batch update")
        }
    }
}
