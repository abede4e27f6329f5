//! What experiment 1 of `experiment slru` would give on many cores: a model fed with this
//! run's own figures, for machines (2 cores) where the thread's 64-core scaling cannot be
//! measured.
//!
//! The model: every subtransaction-log lookup writes [`LINE_WRITES`] shared cache lines
//! (the lock word on acquire and on release, the LRU counter). In `central` every lookup
//! writes the same lines; in `banks_locks_lru` each bank has its own, and the lookups
//! spread over the banks holding the pages of the running window of ids. A line written
//! from several cores moves to each writer in turn, `transfer_ns` per move, so the writes
//! to one set of lines serialize: at most `sets / (lookups per transaction x LINE_WRITES
//! x transfer)` transactions a second. Below that ceiling, clients on their own cores scale
//! linearly from the one-client rate; clients beyond the cores add nothing. The transfer
//! cost is measured here (the micro benchmark's central design with pages that fit: ns per
//! lookup at 2 threads over 1, per line write) and also taken at a multi-socket server's
//! cross-socket figure, [`CROSS_SOCKET_NS`], since the thread's machine had 8 sockets.

use serde::Serialize;

/// Shared cache lines a lookup writes: the lock word twice (acquire, release) and the LRU
/// counter.
pub const LINE_WRITES: f64 = 3.0;
/// A cache-line transfer between sockets of a multi-socket server (an assumption, stated
/// as such in the report).
pub const CROSS_SOCKET_NS: f64 = 200.0;
/// The cores of the thread's machine.
pub const THREAD_CORES: u32 = 64;
/// The thread's experiment 1: one client's tps (head), head's and the banked build's tps
/// at 128 clients, and its scale (300 branch rows).
pub const THREAD_TPS_1: f64 = 457.0;
pub const THREAD_HEAD_128: f64 = 15_957.0;
pub const THREAD_BANKED_128: f64 = 31_731.0;
pub const THREAD_SCALE: f64 = 300.0;
/// Transaction ids on a subtransaction-log page (8 kB, 4 bytes an id, less the trailer).
pub const IDS_PER_PAGE: f64 = (8192.0 - 8.0) / 4.0;

/// What the model is fed.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Inputs {
    /// One client's transaction time, µs (1 / its tps).
    pub txn_us: f64,
    /// Subtransaction-log lookups per transaction.
    pub lookups_per_txn: f64,
    /// Banks the lookups spread over in `banks_locks_lru`.
    pub banks: f64,
}

/// One client count's prediction at one transfer cost.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub clients: u32,
    pub transfer_ns: f64,
    pub central_tps: f64,
    pub banked_tps: f64,
    /// banked over central.
    pub ratio: f64,
}

/// The transfer cost per line write from the micro benchmark: ns per lookup at 2 threads
/// minus at 1 (central, pages that fit), over [`LINE_WRITES`]; None when 2 threads cost no
/// more than 1 (no contention measurable).
pub fn transfer_ns(ns_1_thread: f64, ns_2_threads: f64) -> Option<f64> {
    let extra = ns_2_threads - ns_1_thread;
    (extra > 0.0).then(|| extra / LINE_WRITES)
}

/// Predicted tps of both designs at each of `clients` on `cores` cores.
pub fn predict(i: &Inputs, transfer_ns: f64, clients: &[u32], cores: u32) -> Vec<Row> {
    let ceiling = |sets: f64| {
        let per_txn_s = i.lookups_per_txn * LINE_WRITES * transfer_ns * 1e-9;
        if per_txn_s > 0.0 {
            sets / per_txn_s
        } else {
            f64::INFINITY
        }
    };
    clients
        .iter()
        .map(|&n| {
            let linear = f64::from(n.min(cores)) / (i.txn_us * 1e-6);
            let central_tps = linear.min(ceiling(1.0));
            let banked_tps = linear.min(ceiling(i.banks.max(1.0)));
            Row {
                clients: n,
                transfer_ns,
                central_tps,
                banked_tps,
                ratio: banked_tps / central_tps.max(1e-9),
            }
        })
        .collect()
}

/// The thread's own set-up, modelled: its one-client transaction time; lookups per
/// transaction scaled from ours by the hot rows' versions (lookups grow with the updates
/// per branch row per second that a held horizon keeps: `ours_branch_updates` here, the
/// thread's head at 128 clients over its 300 branches there); the banks that one second
/// of its ids spans (at most `banks`); and the one free parameter, the transfer cost,
/// fitted so that central's ceiling is the thread's head at 128 clients. Returns the
/// inputs and the fitted transfer ns; what the banked build then gets at 128 clients is
/// the model's prediction to set beside the thread's 31,731.
pub fn thread_fit(ours_lookups: f64, ours_branch_updates: f64, banks: f64) -> (Inputs, f64) {
    let their_updates = THREAD_HEAD_128 / THREAD_SCALE;
    let lookups = ours_lookups * their_updates / ours_branch_updates.max(1e-9);
    let window = (THREAD_BANKED_128 / IDS_PER_PAGE).ceil();
    let inputs = Inputs {
        txn_us: 1e6 / THREAD_TPS_1,
        lookups_per_txn: lookups,
        banks: window.clamp(1.0, banks.max(1.0)),
    };
    let transfer = 1e9 / (THREAD_HEAD_128 * lookups.max(1e-9) * LINE_WRITES);
    (inputs, transfer)
}

/// The report's note on the model: its assumptions, the transfer costs used, and the
/// thread's set-up's prediction (`at128`: banked tps at 128 clients) beside the thread's.
pub fn note(
    i: &Inputs,
    measured: Option<f64>,
    branch_updates: f64,
    fitted: f64,
    at128: f64,
) -> String {
    let measured = measured.map_or(
        "none measurable (2 threads cost no more than 1)".into(),
        |t| format!("{t:.1} ns"),
    );
    format!(
        "exp 1 model (not a measurement): each lookup writes {LINE_WRITES} shared cache lines, serialized per set of lines (one set in central, one per bank in banks_locks_lru over the {:.1} banks the window of running ids spans), each write a line transfer; transfer cost measured here (central, 16 slots, pages that fit, 2 threads over 1, per write): {measured}; and {CROSS_SOCKET_NS} ns assumed for a multi-socket server like the thread's (8 sockets, 64 cores). The thread measured 1.99x at 128 clients (31,731 over 15,957 tps). Its set-up modelled: lookups scaled from ours by the branch rows' updates a second ({branch_updates:.0} here, {:.0} there), transfer fitted to its head at 128 clients ({fitted:.0} ns): the banked build is then predicted at {at128:.0} tps at 128 clients (thread: 31,731)",
        i.banks,
        THREAD_HEAD_128 / THREAD_SCALE,
    )
}

/// The table of [`predict`]'s rows.
pub fn table(what: &str, i: &Inputs, rows: &[Row]) -> String {
    let mut t = format!(
        "exp 1 on {THREAD_CORES} cores, modelled, {what} (1 client {:.0} µs/txn, {:.0} subtrans lookups/txn, {:.1} banks)\n{:>8}  {:>11}  {:>12}  {:>11}  {:>7}\n",
        i.txn_us, i.lookups_per_txn, i.banks, "clients", "transfer ns", "central tps", "banked tps", "ratio"
    );
    for r in rows {
        t.push_str(&format!(
            "{:>8}  {:>11.0}  {:>12.0}  {:>11.0}  {:>7.2}\n",
            r.clients, r.transfer_ns, r.central_tps, r.banked_tps, r.ratio
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_central_lines_cap_tps_and_banks_lift_the_cap() {
        let i = Inputs {
            txn_us: 100.0,
            lookups_per_txn: 50.0,
            banks: 4.0,
        };
        // 50 lookups x 3 writes x 200 ns = 30 µs a transaction on one set of lines:
        // 33,333 tps at most centrally, 4x that banked; one client alone does 10,000.
        let rows = predict(&i, 200.0, &[1, 8, 128], 64);
        let tps: Vec<(f64, f64)> = rows
            .iter()
            .map(|r| (r.central_tps.round(), r.banked_tps.round()))
            .collect();
        assert_eq!(
            tps,
            [
                (10_000.0, 10_000.0),
                (33_333.0, 80_000.0),
                (33_333.0, 133_333.0)
            ]
        );
        assert!((rows[2].ratio - 4.0).abs() < 1e-9);
        // The thread's set-up: lookups scale with the hot rows' updates a second; the
        // fitted transfer puts central's ceiling at the thread's head.
        let (t, ns) = thread_fit(1000.0, 1000.0, 16.0);
        assert!((t.lookups_per_txn - 1000.0 * 15_957.0 / 300.0 / 1000.0).abs() < 1e-6);
        assert_eq!(t.banks, 16.0);
        let at128 = &predict(&t, ns, &[128], THREAD_CORES)[0];
        assert!((at128.central_tps - THREAD_HEAD_128).abs() < 1e-6);
        assert!((at128.banked_tps - 64.0 * THREAD_TPS_1).abs() < 1e-6);
        assert_eq!(transfer_ns(40.0, 37.0), None);
        assert_eq!(transfer_ns(40.0, 70.0), Some(10.0));
    }
}
