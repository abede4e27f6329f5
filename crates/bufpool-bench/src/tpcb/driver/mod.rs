//! The client driver: what runs a workload's transactions and measures them, knowing no
//! table of it. Its face is here: its options ([`DriverOptions`]: clients, length, pace,
//! tries, logs) and the interface it calls a workload through ([`Workload`]: the scripts'
//! weights, a client's session, one transaction; [`Done`]: how it ended). The parts: the
//! thread-per-client loop (`client.rs`), the script draw (`choose.rs`), the pace
//! (`pace.rs`, `rate_profile.rs`), the batches beside the clients (`batch.rs`), the
//! monitor's per-second samples and `-P` lines (`monitor.rs`), the per-second slots and
//! the latency histogram (`stats.rs`), what transactions waited for (`waits.rs`), the
//! merge into the run's result (`outcome.rs`), pgbench's logs (`logs.rs`), the engine's
//! counters over the run (`counters.rs`), what the run wrote (`written.rs`) and the
//! pool resized beside the clients (`resize.rs`).
//!
//! Invariant: nothing here imports the workload's modules (the tables, the scripts, the
//! transactions); the workload imports the driver. A next workload (TPC-C, YCSB's own
//! tables) implements [`Workload`] and runs its clients with this, beside TPC-B.

pub mod batch;
pub(crate) mod choose;
pub(crate) mod client;
pub(crate) mod counters;
pub(crate) mod logs;
pub(crate) mod monitor;
pub(crate) mod outcome;
pub(crate) mod pace;
pub mod rate_profile;
pub mod resize;
pub(crate) mod stats;
pub(crate) mod waits;
pub(crate) mod written;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use rand::rngs::SmallRng;
use rate_profile::RateProfile;

/// What the clients run: a workload's scripts, one transaction at a time. The driver
/// knows a script by its index in the run's list and by its weight; what a transaction
/// reads and writes is the workload's.
pub trait Workload: Sync {
    /// One client's own state (its scripts' variables, say): made for it before its first
    /// transaction, handed back with its figures.
    type ClientState: Send;
    /// What a committed transaction acknowledges: its line of `--ack-log`.
    type Ack: Copy + std::fmt::Display;
    /// The scripts' weights, in the run's order.
    fn weights(&self) -> Vec<u32>;
    /// Client `client`'s session.
    fn session(&self, client: u32) -> Self::ClientState;
    /// Runs one transaction of script `script` in `session`, drawing from `rng`; Err: any
    /// error other than a deadlock (a deadlock is [`Done::Failed`]).
    fn transaction(
        &self,
        session: &mut Self::ClientState,
        script: usize,
        rng: &mut SmallRng,
    ) -> Result<Done<Self::Ack>>;
}

/// How a transaction ended (when it did not fail with an error).
#[derive(Debug, Clone, Copy)]
pub enum Done<A> {
    /// Committed; what it acknowledges (`--ack-log`), if anything.
    Committed(Option<A>),
    /// Failed and was aborted: on a deadlock (`true`: `--max-tries` may run it again), or
    /// rolled back on purpose (the abort storm).
    Failed { deadlock: bool },
}

/// How the clients run: how many, for how long, at what pace, with how many tries, and
/// what they log; pgbench's flags by their meaning.
#[derive(Debug, Clone)]
pub struct DriverOptions {
    /// Clients, a thread each (`-c`).
    pub clients: u32,
    /// pgbench's threads (`-j`): they group the clients' log files.
    pub threads: u32,
    /// Run for this long (`-T`), or ...
    pub duration: Option<Duration>,
    /// ... this many transactions per client (`-t`).
    pub transactions: Option<u64>,
    /// Target rate in transactions per second over all clients (`-R`).
    pub rate: Option<f64>,
    /// `--rate-profile`: a sine-wave target rate with spikes instead of `-R`'s constant.
    pub rate_profile: Option<RateProfile>,
    /// Latency limit (`-L`), ms: later transactions count as late; with `-R`, ones that
    /// could only start later than this are skipped.
    pub latency_limit_ms: Option<f64>,
    /// pgbench's `--max-tries`: a transaction that failed on a deadlock is run again, up
    /// to this many tries in all (1: never again).
    pub max_tries: u32,
    /// Progress line every N seconds (`-P`).
    pub progress_s: Option<u32>,
    /// pgbench's `--progress-timestamp`: progress lines carry the Unix time, not the
    /// seconds since the start.
    pub progress_timestamp: bool,
    /// Aggregate log (`-l --aggregate-interval N`): N seconds per line.
    pub aggregate_interval: Option<u32>,
    /// `-l` without `--aggregate-interval`: pgbench's per-transaction log.
    pub transaction_log: bool,
    /// pgbench's `--sampling-rate`: the share of transactions the per-transaction log
    /// keeps (1.0: all).
    pub sampling_rate: f64,
    /// The log files' name prefix (`--log-prefix`).
    pub log_prefix: String,
    /// Where the log files go.
    pub log_dir: PathBuf,
    /// `--ack-log`: each client appends a line per committed transaction to this file.
    pub ack_log: Option<PathBuf>,
    /// `--random-seed`: every random stream of the run derives from it.
    pub seed: u64,
    /// Set by Ctrl-C: clients finish their transaction and stop.
    pub stop: Arc<AtomicBool>,
}

/// Now, in microseconds since the Unix epoch (0 if the clock is before it): a run's wall
/// start, for pgbench's logs.
pub(crate) fn unix_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

impl DriverOptions {
    /// `clients` clients (one thread, pgbench's `-j 1`) for `seconds`, stopped early by
    /// `stop`: no rate, log or progress lines, one try, the default seed.
    pub fn new(clients: u32, seconds: u64, stop: Arc<AtomicBool>) -> DriverOptions {
        DriverOptions {
            clients,
            threads: 1,
            duration: Some(Duration::from_secs(seconds)),
            transactions: None,
            rate: None,
            rate_profile: None,
            latency_limit_ms: None,
            max_tries: 1,
            progress_s: None,
            progress_timestamp: false,
            aggregate_interval: None,
            transaction_log: false,
            sampling_rate: 1.0,
            log_prefix: "pgbench_log".into(),
            log_dir: std::env::current_dir().unwrap_or_default(),
            ack_log: None,
            seed: 0x5eed,
            stop,
        }
    }

    /// The target rate at `t` seconds into the run, over all clients, if there is one.
    pub fn target_rate(&self, t: f64) -> Option<f64> {
        match &self.rate_profile {
            Some(p) => Some(p.rate_at(t)),
            None => self.rate,
        }
    }
}
