//! What a TPC-B run is asked to do and what it gives back: [`BenchOptions`], `bench`'s
//! command line resolved (the experiments build one too), and [`RunOutcome`], the run's
//! result with pgbench's summary figures. A leaf of the run: the clients, the merge and
//! the logs read it; it names the scripts, the side work and the pacing by their own
//! modules' types.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::batch::BatchStats;
use super::builtins::Mode;
use super::burst::{Batch, RateProfile};
use super::side::SideScript;
use super::ACCOUNTS_PER_SCALE;
use crate::report::model::RunResult;

/// What `bufpool bench` was asked to run: its command line, resolved.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub clients: u32,
    pub threads: u32,
    /// Run for this long (`-T`), or ...
    pub duration: Option<Duration>,
    /// ... this many transactions per client (`-t`).
    pub transactions: Option<u64>,
    /// Target rate in transactions per second over all clients (`-R`).
    pub rate: Option<f64>,
    /// Latency limit (`-L`), ms: later transactions count as late; with `-R`, ones that
    /// could only start later than this are skipped.
    pub latency_limit_ms: Option<f64>,
    /// Progress line every N seconds (`-P`).
    pub progress_s: Option<u32>,
    /// Aggregate log (`-l --aggregate-interval N`): N seconds per line.
    pub aggregate_interval: Option<u32>,
    /// `-l` without `--aggregate-interval`: pgbench's per-transaction log.
    pub transaction_log: bool,
    pub log_prefix: String,
    pub log_dir: PathBuf,
    pub mode: Mode,
    pub seed: u64,
    pub label: String,
    /// Set by Ctrl-C: clients finish their transaction and stop.
    pub stop: Arc<AtomicBool>,
    /// Knobs in effect, for the summary.
    pub config: std::collections::BTreeMap<String, String>,
    /// Fraction of transactions rolled back after doing all their work (an "abort
    /// storm" for tests: their changes must vanish; they count as failed).
    pub abort_fraction: f64,
    /// pgbench's `-n`: no VACUUM of branches and tellers before the run.
    pub no_vacuum: bool,
    /// pgbench's `-v`: VACUUM all four tables before the run (accounts and history too).
    pub vacuum_all: bool,
    /// pgbench's `--sampling-rate`: the share of transactions the per-transaction log
    /// keeps (1.0: all).
    pub sampling_rate: f64,
    /// pgbench's `--progress-timestamp`: progress lines carry the Unix time, not the
    /// seconds since the start.
    pub progress_timestamp: bool,
    /// pgbench's `--max-tries`: a transaction that failed on a deadlock is run again, up
    /// to this many tries in all (1: never again).
    pub max_tries: u32,
    /// The script the clients run ([`Mode::Script`]): `-f FILE`, or a built-in script
    /// parsed from its text for `-r`.
    pub script: Option<std::sync::Arc<super::script::Script>>,
    /// Several scripts (pgbench's `-b`/`-f` repeated, `-S`, `-N`): each transaction runs
    /// one, picked by weight (`mix.rs`); `mode` and `script` are then unused. Empty: the
    /// one script of `mode` and `script` runs.
    pub scripts: Vec<super::mix::WeightedScript>,
    /// `--ack-log`: each client appends a line per committed transaction to this file.
    pub ack_log: Option<PathBuf>,
    /// `--rate-profile`: a sine-wave target rate with spikes instead of `-R`'s constant.
    pub rate_profile: Option<RateProfile>,
    /// `--batch-every` / `--batch-rows`: a large write every few seconds.
    pub batch: Option<Batch>,
    /// `--side-script` and its pause (`--side-pause-ms`): seed 002's second pgbench
    /// instance, one thread beside the clients.
    pub side: Option<(SideScript, Duration)>,
    /// `--vacuum-every`: VACUUM the hot tables and accounts every this many seconds.
    pub vacuum_every_s: Option<u64>,
    /// The autovacuum launcher's settings, when the `autovacuum` knob is on (filled in
    /// by the run from the knobs, as `config` is).
    pub autovacuum: Option<bufpool::table::AutovacuumOptions>,
    /// `--zipf-theta`: Zipfian account keys with this constant (None: the mode's default,
    /// [`Mode::default_theta`]).
    pub zipf_theta: Option<f64>,
    /// `--metrics-addr`: where the run serves its counters for a scrape.
    pub metrics_addr: Option<std::net::SocketAddr>,
}

impl BenchOptions {
    /// A plain TPC-B run of `clients` clients (one thread, pgbench's `-j 1`) for
    /// `seconds`: no rate, log, progress or side work; the knobs in effect are filled in
    /// by the run (`cmd::bench::run::run_tpcb`). Callers change what they need with struct
    /// update syntax.
    pub fn tpcb(clients: u32, seconds: u64, label: &str, stop: Arc<AtomicBool>) -> Self {
        BenchOptions {
            clients,
            threads: 1,
            duration: Some(Duration::from_secs(seconds)),
            transactions: None,
            rate: None,
            latency_limit_ms: None,
            progress_s: None,
            aggregate_interval: None,
            transaction_log: false,
            log_prefix: "pgbench_log".into(),
            log_dir: std::env::current_dir().unwrap_or_default(),
            mode: Mode::TpcbLike,
            seed: 0x5eed,
            label: label.to_string(),
            stop,
            config: Default::default(),
            abort_fraction: 0.0,
            no_vacuum: false,
            vacuum_all: false,
            sampling_rate: 1.0,
            progress_timestamp: false,
            max_tries: 1,
            script: None,
            scripts: Vec::new(),
            ack_log: None,
            rate_profile: None,
            batch: None,
            side: None,
            vacuum_every_s: None,
            autovacuum: None,
            zipf_theta: None,
            metrics_addr: None,
        }
    }

    /// The scripts the clients pick from: `scripts`, or the one of `mode` and `script`
    /// (weight 1; a file's name from its script).
    pub fn script_list(&self) -> Vec<super::mix::WeightedScript> {
        if !self.scripts.is_empty() {
            return self.scripts.clone();
        }
        let mut one = super::mix::WeightedScript::builtin(self.mode, 1, self.script.clone());
        if let (Mode::Script, Some(s)) = (self.mode, &self.script) {
            (one.name, one.desc) = (s.name.clone(), s.name.clone());
        }
        vec![one]
    }

    /// What the result's `mode` says: the script's name (`script` for a file), or with
    /// several each one's name and weight (`tpcb-like@9 select-only@1`).
    pub fn mode_label(&self) -> String {
        match self.scripts.as_slice() {
            [] => self.mode.name().to_string(),
            [one] => one.mode.name().to_string(),
            many => many
                .iter()
                .map(|s| format!("{}@{}", s.name, s.weight))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// Whether the run runs built-in script `mode` (alone or among others).
    pub fn runs(&self, mode: Mode) -> bool {
        match self.scripts.as_slice() {
            [] => self.mode == mode,
            many => many.iter().any(|s| s.mode == mode),
        }
    }

    /// The target rate at `t` seconds into the run, over all clients, if there is one.
    pub fn target_rate(&self, t: f64) -> Option<f64> {
        match &self.rate_profile {
            Some(p) => Some(p.rate_at(t)),
            None => self.rate,
        }
    }

    /// Seed 000's bursty load as the experiments run it over `seconds` at `scale`: a wave from
    /// 0.3 to 0.8 of `peak_tps` (the clients' full speed), one period per third of the run,
    /// with 5% of seconds spikes at 1.5 times the wave; and a batch updating a hundredth of the
    /// accounts every sixth of the run.
    pub fn seed000_bursty(self, peak_tps: f64, seconds: u64, scale: u32) -> BenchOptions {
        let accounts = u64::from(scale) * ACCOUNTS_PER_SCALE;
        BenchOptions {
            rate_profile: Some(RateProfile {
                period_s: (seconds / 3).max(2) as f64,
                // Whole transactions per second, as the profile has always been given.
                low: (0.3 * peak_tps).round_ties_even(),
                high: (0.8 * peak_tps).round_ties_even(),
                spike: 0.05,
                spike_factor: 1.5,
                seed: self.seed,
            }),
            batch: Some(Batch {
                every_s: (seconds / 6).max(1),
                rows: (accounts / 100).max(100),
            }),
            ..self
        }
    }
}

/// A run's result, plus the pgbench summary lines that the report does not chart.
pub struct RunOutcome {
    pub result: RunResult,
    /// Transactions slower than `-L` (completed, counted in `result`).
    pub late: u64,
    /// Transactions skipped because they could not start within `-L` (with `-R`).
    pub skipped: u64,
    /// Transactions that took more than one try (`--max-tries`), and the tries beyond
    /// the first, over all of them.
    pub retried: u64,
    pub retries: u64,
    /// Failed transactions that failed on a deadlock (pgbench's deadlock failures).
    pub deadlocks: u64,
    /// Per command of the script run (`-f`, or a built-in one for `-r`): count, total
    /// time, failures; empty otherwise.
    pub statements: Vec<(String, super::script::StatementStat)>,
    /// Per script of the run ([`BenchOptions::script_list`], in its order; one with a
    /// single script): pgbench's "SQL script N" figures.
    pub scripts: Vec<super::mix::ScriptOutcome>,
    /// Average lag behind the `-R` schedule, ms.
    pub lag_avg_ms: f64,
    pub lag_max_ms: f64,
    /// What `--batch-every` did.
    pub batches: BatchStats,
    /// What `--vacuum-every` did.
    pub vacuums: super::vacuum::VacuumStats,
    /// What `--trace` recorded.
    pub trace: Option<bufpool::buffer::trace::TraceSummary>,
    /// What autoprewarm's reload did at this run's open (`autoprewarm = on`).
    pub prewarm: Option<bufpool::engine::prewarm::PrewarmStats>,
}
