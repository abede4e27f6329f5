//! What a TPC-C run did beyond the driver's figures: transactions by kind, New-Orders
//! rolled back, orders delivered. A leaf: the run's outcome (`tpcb::options::RunOutcome`)
//! holds it without knowing the tables.

use super::inputs::Kind;

/// A client's (or the run's) TPC-C counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TpccCounts {
    /// Transactions that ended as TPC-C means (committed, or a New-Order rolled back on
    /// its unused item), in [`Kind::ALL`]'s order.
    pub done: [u64; 5],
    /// New-Orders rolled back on the unused item (counted in `done` too).
    pub rolled_back: u64,
    /// Orders Delivery delivered, and districts it found with none to deliver.
    pub delivered: u64,
    pub districts_empty: u64,
    /// Payments and Order-Statuses by last name.
    pub by_last_name: u64,
}

impl TpccCounts {
    /// Adds `o` in.
    pub fn merge(&mut self, o: &TpccCounts) {
        for (a, b) in self.done.iter_mut().zip(o.done) {
            *a += b;
        }
        self.rolled_back += o.rolled_back;
        self.delivered += o.delivered;
        self.districts_empty += o.districts_empty;
        self.by_last_name += o.by_last_name;
    }

    /// Transactions of `k` done.
    pub fn of(&self, k: Kind) -> u64 {
        self.done[k.index()]
    }

    /// New-Orders that placed an order (TPC-C's throughput counts these: tpmC).
    pub fn new_orders_placed(&self) -> u64 {
        self.of(Kind::NewOrder) - self.rolled_back
    }
}

/// A TPC-C run's part of the outcome.
#[derive(Debug, Clone, Copy, Default)]
pub struct TpccOutcome {
    pub warehouses: u32,
    pub counts: TpccCounts,
}
