//! A TPC-C run (`bufpool bench` on a TPC-C database): the transactions as scripts
//! ([`Tpcc`]) through `tpcb::workload_run`, with their counts ([`TpccOutcome`]).

use anyhow::{ensure, Result};

use super::inputs::Kind;
use super::outcome::{TpccCounts, TpccOutcome};
use super::workload::Tpcc;
use super::TpccDb;
use crate::tpcb::builtins::Mode;
use crate::tpcb::options::{BenchOptions, RunOutcome};
use crate::tpcb::workload_run::run_workload;

/// The TPC-C transaction of built-in script `mode` (None: not one, or the whole mix).
pub fn kind_of(mode: Mode) -> Option<Kind> {
    Some(match mode {
        Mode::TpccNewOrder => Kind::NewOrder,
        Mode::TpccPayment => Kind::Payment,
        Mode::TpccOrderStatus => Kind::OrderStatus,
        Mode::TpccDelivery => Kind::Delivery,
        Mode::TpccStockLevel => Kind::StockLevel,
        _ => return None,
    })
}

/// The built-in script of transaction `k`.
pub fn mode_of(k: Kind) -> Mode {
    match k {
        Kind::NewOrder => Mode::TpccNewOrder,
        Kind::Payment => Mode::TpccPayment,
        Kind::OrderStatus => Mode::TpccOrderStatus,
        Kind::Delivery => Mode::TpccDelivery,
        Kind::StockLevel => Mode::TpccStockLevel,
    }
}

/// Runs `opts`' scripts (all TPC-C's, the mix already split into its five) on `db`.
pub fn run(db: &TpccDb<'_>, opts: &BenchOptions) -> Result<RunOutcome> {
    let list = opts.script_list();
    let scripts = list
        .iter()
        .map(|s| {
            kind_of(s.mode).map(|k| (k, s.weight)).ok_or_else(|| {
                anyhow::anyhow!(
                    "script {} is not one of TPC-C's: this database holds TPC-C's tables (run -b tpcc)",
                    s.name
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    ensure!(
        list.len() == 1 || scripts.iter().any(|s| s.1 > 0),
        "total script weight must not be zero"
    );
    let workload = Tpcc::new(db, scripts, opts.driver.seed ^ 0x7cc);
    let (mut out, sessions) = run_workload(db.engine, &workload, opts, &db.relation_names())?;
    let mut counts = TpccCounts::default();
    for s in &sessions {
        counts.merge(&s.counts);
    }
    out.tpcc = Some(TpccOutcome {
        warehouses: db.warehouses,
        counts,
    });
    Ok(out)
}
