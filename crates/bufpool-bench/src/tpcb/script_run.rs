//! Runs a parsed pgbench script (`script.rs`) on the engine, one client's transaction at a
//! time, timing each command for `-r`.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Result};
use rand::rngs::SmallRng;

use super::col;
use super::script::{Command, Op, Script, ScriptState};
use super::Db;

/// How one run of a script ended.
pub enum Ran {
    Committed,
    /// A deadlock aborted it.
    Deadlock,
}

/// Runs `script` once for one client: its commands in order, timing each into `st`.
pub fn run_once(
    db: &Db<'_>,
    script: &Script,
    st: &mut ScriptState,
    rng: &mut SmallRng,
) -> Result<Ran> {
    let mut open: Option<bufpool::engine::Transaction<'_>> = None;
    for (i, c) in script.commands.iter().enumerate() {
        let began = Instant::now();
        let r = step(db, c, st, rng, &mut open);
        st.stats[i].count += 1;
        st.stats[i].sum_us += began.elapsed().as_secs_f64() * 1e6;
        match r {
            Ok(()) => {}
            Err(e) => {
                st.stats[i].failures += 1;
                let deadlock = e
                    .downcast_ref::<bufpool::Error>()
                    .is_some_and(bufpool::Error::is_deadlock);
                drop(open.take()); // rolled back
                if deadlock {
                    return Ok(Ran::Deadlock);
                }
                return Err(e.context(format!("{}, line {}: {}", script.name, c.line, c.text)));
            }
        }
    }
    if let Some(t) = open.take() {
        t.commit()?;
    }
    Ok(Ran::Committed)
}

fn step<'e>(
    db: &Db<'e>,
    c: &Command,
    st: &mut ScriptState,
    rng: &mut SmallRng,
    open: &mut Option<bufpool::engine::Transaction<'e>>,
) -> Result<()> {
    match &c.op {
        Op::Set(var, e) => {
            let v = st.eval(e, rng)?;
            st.vars.insert(var.clone(), v);
        }
        Op::Sleep(e, unit) => {
            let n = st.eval(e, rng)?.int()?;
            std::thread::sleep(unit.saturating_mul(n.max(0) as u32));
        }
        Op::Begin => {
            if open.is_some() {
                bail!("BEGIN inside a transaction");
            }
            *open = Some(db.engine.begin()?);
        }
        Op::Commit => {
            if let Some(t) = open.take() {
                t.commit()?;
            }
        }
        Op::Rollback => {
            if let Some(t) = open.take() {
                t.abort()?;
            }
        }
        op => {
            // Outside BEGIN: a transaction of its own.
            let alone = open.is_none();
            if alone {
                *open = Some(db.engine.begin()?);
            }
            let t = open.as_ref().expect("opened above");
            match op {
                Op::SelectBalance { aid } => {
                    db.abalance(&t.snapshot(), st.arg(aid)?)?;
                }
                Op::UpdateAccounts { delta, aid } => {
                    let (d, k) = (st.arg(delta)?, st.arg(aid)?);
                    db.add(
                        t.xid()?,
                        &db.accounts,
                        &db.accounts_pkey,
                        &db.sa,
                        col::ABALANCE,
                        k,
                        d,
                    )?;
                }
                Op::UpdateTellers { delta, tid } => {
                    let (d, k) = (st.arg(delta)?, st.arg(tid)?);
                    db.add(
                        t.xid()?,
                        &db.tellers,
                        &db.tellers_pkey,
                        &db.st,
                        col::TBALANCE,
                        k,
                        d,
                    )?;
                }
                Op::UpdateBranches { delta, bid } => {
                    let (d, k) = (st.arg(delta)?, st.arg(bid)?);
                    db.add(
                        t.xid()?,
                        &db.branches,
                        &db.branches_pkey,
                        &db.sb,
                        col::BBALANCE,
                        k,
                        d,
                    )?;
                }
                Op::InsertHistory {
                    tid,
                    bid,
                    aid,
                    delta,
                } => {
                    let mtime = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.as_micros() as i64);
                    let row = [
                        st.arg(tid)?,
                        st.arg(bid)?,
                        st.arg(aid)?,
                        st.arg(delta)?,
                        mtime,
                    ];
                    db.insert_history(t.xid()?, row)?;
                }
                _ => unreachable!("handled above"),
            }
            if alone {
                open.take().expect("opened above").commit()?;
            }
        }
    }
    Ok(())
}
