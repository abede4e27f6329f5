//! TPC-C as the driver runs it ([`Tpcc`], a [`Workload`]): each of the five transactions
//! is a script of the run (`tpcc-new-order@45` .. `tpcc-stock-level@4`), so the driver
//! draws the mix by weight and reports each one's latency. A client is a terminal with a
//! home warehouse (client `i` serves warehouse `i mod W + 1`); a transaction's inputs are
//! drawn as `inputs.rs` says, with the run's NURand constants. A New-Order that asks for
//! the unused item rolls back and counts as done (TPC-C's business outcome), not failed.

use anyhow::Result;
use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::inputs::{self, Constants, CustomerBy, Kind, Terminal};
use super::outcome::TpccCounts;
use super::txns::{Cleanup, NewOrderOut};
use super::TpccDb;
use crate::tpcb::driver::{Done, Workload};
use crate::ycsb::workload::NoAck;

/// TPC-C on an open database: the run's transactions with their weights.
pub struct Tpcc<'a, 'e> {
    db: &'a TpccDb<'e>,
    scripts: Vec<(Kind, u32)>,
    k: Constants,
}

/// One terminal's state.
#[derive(Debug)]
pub struct ClientState {
    terminal: Terminal,
    cleanup: Cleanup,
    /// What its transactions did.
    pub counts: TpccCounts,
}

impl<'a, 'e> Tpcc<'a, 'e> {
    /// Transactions `scripts` (each with its weight) on `db`; the run's NURand constants
    /// are drawn from `seed` beside the load's.
    pub fn new(db: &'a TpccDb<'e>, scripts: Vec<(Kind, u32)>, seed: u64) -> Self {
        let k = Constants::for_run(&db.load_constants, &mut SmallRng::seed_from_u64(seed));
        Tpcc { db, scripts, k }
    }

    /// Runs the body of one `kind` in `t`; whether to commit (false: a New-Order rolled
    /// back on its unused item).
    fn body(
        &self,
        t: &bufpool::engine::Transaction<'_>,
        s: &mut ClientState,
        kind: Kind,
        rng: &mut SmallRng,
    ) -> Result<bool> {
        let db = self.db;
        let now = inputs::now_micros();
        let by_last = |c: CustomerBy| u64::from(matches!(c, CustomerBy::Last(_)));
        match kind {
            Kind::NewOrder => {
                let i = s.terminal.new_order(rng);
                if db.new_order(t, &i, now, &mut s.cleanup)? == NewOrderOut::RolledBack {
                    s.counts.rolled_back += 1;
                    return Ok(false);
                }
            }
            Kind::Payment => {
                let i = s.terminal.payment(rng);
                anyhow::ensure!(
                    db.payment(t, &i, now)?,
                    "Payment: no customer {:?}",
                    i.customer
                );
                s.counts.by_last_name += by_last(i.customer);
            }
            Kind::OrderStatus => {
                let i = s.terminal.order_status(rng);
                db.order_status(t, &i)?
                    .ok_or_else(|| anyhow::anyhow!("Order-Status: no order of {:?}", i.customer))?;
                s.counts.by_last_name += by_last(i.customer);
            }
            Kind::Delivery => {
                let i = s.terminal.delivery(rng);
                let out = db.delivery(t, &i, now, &mut s.cleanup)?;
                s.counts.delivered += u64::from(out.delivered);
                s.counts.districts_empty += u64::from(inputs::DISTRICTS - out.delivered);
            }
            Kind::StockLevel => {
                let i = s.terminal.stock_level(rng);
                db.stock_level(t, &i)?;
            }
        }
        Ok(true)
    }
}

/// Whether `e` is a deadlock the engine broke (the driver may run the transaction again).
pub fn is_deadlock(e: &anyhow::Error) -> bool {
    e.downcast_ref::<bufpool::Error>()
        .is_some_and(|e| e.is_deadlock())
        || matches!(
            e.downcast_ref::<bufpool::HeapError>(),
            Some(bufpool::HeapError::Deadlock(_))
        )
}

impl Workload for Tpcc<'_, '_> {
    type ClientState = ClientState;
    type Ack = NoAck;

    fn weights(&self) -> Vec<u32> {
        self.scripts.iter().map(|s| s.1).collect()
    }

    fn session(&self, client: u32) -> ClientState {
        ClientState {
            terminal: Terminal {
                home: client % self.db.warehouses + 1,
                warehouses: self.db.warehouses,
                k: self.k,
            },
            cleanup: Cleanup::default(),
            counts: TpccCounts::default(),
        }
    }

    fn transaction(
        &self,
        s: &mut ClientState,
        script: usize,
        rng: &mut SmallRng,
    ) -> Result<Done<NoAck>> {
        let kind = self.scripts[script].0;
        let t = self.db.engine.begin()?;
        match self.body(&t, s, kind, rng) {
            Ok(true) => {
                s.cleanup.on_abort.clear();
                t.commit()?;
                self.db.after(&mut s.cleanup, true)?;
            }
            Ok(false) => {
                self.db.after(&mut s.cleanup, false)?;
                t.abort()?;
            }
            Err(e) => {
                // Its inserts' entries go before the abort (see `txns.rs`); an error
                // here is reported after the first one.
                let cleaned = self.db.after(&mut s.cleanup, false);
                drop(t);
                if is_deadlock(&e) {
                    cleaned?;
                    return Ok(Done::Failed { deadlock: true });
                }
                return Err(e);
            }
        }
        s.counts.done[kind.index()] += 1;
        Ok(Done::Committed(None))
    }
}
