//! `bufpool check`: verifies a TPC-B database (the balances, the row counts, each key
//! against its heap, every page's checksum) and, with `--acked`, that every acknowledged
//! transaction is there, or a YCSB one (`ycsb::check`), or a TPC-C one (`tpcc::check`:
//! clause 3.3.2's consistency conditions 1 to 4); recovery's figures when the open
//! replayed the log. Problems are listed and give exit status 1 (`main`).

use std::path::{Path, PathBuf};

use anyhow::Result;
use bufpool::{RealVfs, Vfs};

use super::{open_engine, DirArgs};
use crate::knobs::load_config;
use crate::tpcb::{self, Db};

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Acknowledgment logs written by `bench --ack-log` (repeatable): every line must name
    /// a transaction found in pgbench_history, or the check fails ("lost").
    #[arg(long = "acked", value_name = "FILE", num_args = 1..)]
    pub acked: Vec<PathBuf>,
    /// The database also ran scripts that change accounts alone (-b simple-update,
    /// multixact): require sum(abalance) = sum(history.delta) and sum(bbalance) =
    /// sum(tbalance) instead of all four equal.
    #[arg(long = "accounts-only")]
    pub accounts_only: bool,
    #[command(flatten)]
    pub dir: DirArgs,
}

/// `bufpool check`: exit status 1 with a list of problems if anything is wrong.
pub fn check(
    dir: &Path,
    sets: &[(String, String)],
    acked: &[PathBuf],
    accounts_only: bool,
) -> Result<bool> {
    let (c, _) = load_config(dir, sets)?;
    let vfs = RealVfs::new();
    let workload = super::bench::Workload::of(&vfs, dir)?;
    let ycsb = workload == super::bench::Workload::Ycsb;
    let tpcc = workload == super::bench::Workload::Tpcc;
    if !ycsb && !tpcc {
        tpcb::require_initialized(&vfs, dir)?;
    } else if !acked.is_empty() || accounts_only {
        return Err(crate::knobs::KnobError(format!(
            "--acked and --accounts-only are TPC-B's: this database holds {}",
            if ycsb {
                "YCSB's usertable"
            } else {
                "TPC-C's tables"
            }
        ))
        .into());
    }
    let opened = std::time::Instant::now();
    let engine = open_engine(dir, &c, false)?;
    if let Some(rec) = engine.recovery_report() {
        println!(
            "check: opened in {} ms; recovery replayed {} records ({} bytes, {} commits) from {} to {} in {} ms",
            opened.elapsed().as_millis(),
            rec.records,
            rec.bytes,
            rec.commits,
            rec.redo,
            rec.end,
            rec.elapsed.as_millis()
        );
    }
    if ycsb {
        let db = crate::ycsb::YcsbDb::open(&engine, &vfs as &dyn Vfs, dir)?;
        let r = crate::ycsb::check(&db, &vfs, dir)?;
        drop(db);
        engine.shutdown()?;
        println!(
            "check: {} visible rows in {}, {} index entries, {} pages verified",
            r.rows,
            crate::ycsb::TABLE,
            r.entries,
            r.pages_verified
        );
        return Ok(report_problems(&r.problems));
    }
    if tpcc {
        let db = crate::tpcc::TpccDb::open(&engine, &vfs as &dyn Vfs, dir)?;
        let r = crate::tpcc::check::check(&db, &vfs, dir)?;
        drop(db);
        engine.shutdown()?;
        println!(
            "check: TPC-C, {} warehouses, {} visible rows ({} orders, {} order lines, {} new orders), consistency conditions 1-4 checked, {} pages verified",
            r.warehouses, r.rows, r.orders, r.order_lines, r.new_orders, r.pages_verified
        );
        return Ok(report_problems(&r.problems));
    }
    let db = Db::open(&engine, &vfs as &dyn Vfs, dir)?;
    let mut r = tpcb::check(&db, &vfs, dir, accounts_only)?;
    if !acked.is_empty() {
        let a = tpcb::check_acked(&db, acked)?;
        println!(
            "acked: {} acknowledged, {} found in pgbench_history, {} lost",
            a.acknowledged, a.found, a.lost
        );
        if a.lost > 0 {
            r.problems.push(format!(
                "{} acknowledged transaction(s) missing from pgbench_history, e.g. {}",
                a.lost,
                a.example.unwrap_or_default()
            ));
        }
    }
    drop(db);
    engine.shutdown()?;
    println!(
        "check: scale {}, sum(abalance) = {}, sum(bbalance) = {}, sum(tbalance) = {}, sum(history.delta) = {} over {} rows, {} pages verified",
        r.scale, r.sum_abalance, r.sum_bbalance, r.sum_tbalance, r.sum_delta, r.history_rows, r.pages_verified
    );
    Ok(report_problems(&r.problems))
}

/// Prints `problems` (or OK); whether there were none.
fn report_problems(problems: &[String]) -> bool {
    if problems.is_empty() {
        println!("check: OK");
        return true;
    }
    for p in problems {
        println!("problem: {p}");
    }
    println!("check: {} problem(s)", problems.len());
    false
}
