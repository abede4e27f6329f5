//! The client driver: what runs a workload's transactions and measures them, knowing no
//! table of it. The monitor's per-second samples and `-P` lines (`monitor.rs`), the
//! per-second slots and the latency histogram (`stats.rs`), what transactions waited for
//! (`waits.rs`), the engine's counters over the run (`counters.rs`) and what the run
//! wrote (`written.rs`).
//!
//! Invariant: nothing here imports the workload's modules (the tables, the scripts, the
//! transactions); the workload imports the driver.

pub(crate) mod counters;
pub(crate) mod monitor;
pub(crate) mod stats;
pub(crate) mod waits;
pub(crate) mod written;
