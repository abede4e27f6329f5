//! What a TPC-B run is asked to do and what it gives back: [`BenchOptions`], `bench`'s
//! command line resolved (the experiments build one too), and [`RunOutcome`], the run's
//! result with pgbench's summary figures. A leaf of the run: `run.rs` and `workload.rs`
//! read it, the commands and the experiments build it; it names the scripts, the side
//! work and how the clients run (the driver's [`DriverOptions`]) by their own modules'
//! types.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::builtins::Mode;
use super::driver::batch::{Batch, BatchStats};
use super::driver::outcome::Figures;
use super::driver::rate_profile::RateProfile;
use super::driver::DriverOptions;
use super::mix::{ScriptOutcome, WeightedScript};
use super::script::{Script, StatementStat};
use super::side::SideScript;
use super::vacuum::VacuumStats;
use super::ACCOUNTS_PER_SCALE;
use crate::report::model::RunResult;

/// What `bufpool bench` was asked to run: its command line, resolved.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// How the clients run: how many, how long, at what pace, what they log ([`DriverOptions`]).
    pub driver: DriverOptions,
    pub mode: Mode,
    pub label: String,
    /// Knobs in effect, for the summary.
    pub config: std::collections::BTreeMap<String, String>,
    /// Fraction of transactions rolled back after doing all their work (an "abort
    /// storm" for tests: their changes must vanish; they count as failed).
    pub abort_fraction: f64,
    /// pgbench's `-n`: no VACUUM of branches and tellers before the run.
    pub no_vacuum: bool,
    /// pgbench's `-v`: VACUUM all four tables before the run (accounts and history too).
    pub vacuum_all: bool,
    /// The script the clients run ([`Mode::Script`]): `-f FILE`, or a built-in script
    /// parsed from its text for `-r`.
    pub script: Option<Arc<Script>>,
    /// Several scripts (pgbench's `-b`/`-f` repeated, `-S`, `-N`): each transaction runs
    /// one, picked by weight (`mix.rs`); `mode` and `script` are then unused. Empty: the
    /// one script of `mode` and `script` runs.
    pub scripts: Vec<WeightedScript>,
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
    /// `--resize-at`: the pool resized beside the clients, in time order.
    pub resizes: Vec<super::driver::resize::ResizeAt>,
}

impl BenchOptions {
    /// A plain TPC-B run of `clients` clients (one thread, pgbench's `-j 1`) for
    /// `seconds`: no rate, log, progress or side work; the knobs in effect are filled in
    /// by the run (`cmd::bench::run::run_tpcb`). Callers change what they need with struct
    /// update syntax.
    pub fn tpcb(clients: u32, seconds: u64, label: &str, stop: Arc<AtomicBool>) -> Self {
        BenchOptions {
            driver: DriverOptions::new(clients, seconds, stop),
            mode: Mode::TpcbLike,
            label: label.to_string(),
            config: Default::default(),
            abort_fraction: 0.0,
            no_vacuum: false,
            vacuum_all: false,
            script: None,
            scripts: Vec::new(),
            batch: None,
            side: None,
            vacuum_every_s: None,
            autovacuum: None,
            zipf_theta: None,
            metrics_addr: None,
            resizes: Vec::new(),
        }
    }

    /// The scripts the clients pick from: `scripts`, or the one of `mode` and `script`
    /// (weight 1; a file's name from its script).
    pub fn script_list(&self) -> Vec<WeightedScript> {
        if !self.scripts.is_empty() {
            return self.scripts.clone();
        }
        let mut one = WeightedScript::builtin(self.mode, 1, self.script.clone());
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

    /// Seed 000's bursty load as the experiments run it over `seconds` at `scale`: a wave
    /// from 0.3 to 0.8 of `peak_tps` (the clients' full speed), one period per third of the
    /// run, with 5% of seconds spikes at 1.5 times the wave; and a batch updating a
    /// hundredth of the accounts every sixth of the run.
    pub fn seed000_bursty(mut self, peak_tps: f64, seconds: u64, scale: u32) -> BenchOptions {
        let accounts = u64::from(scale) * ACCOUNTS_PER_SCALE;
        self.driver.rate_profile = Some(RateProfile {
            period_s: (seconds / 3).max(2) as f64,
            // Whole transactions per second, as the profile has always been given.
            low: (0.3 * peak_tps).round_ties_even(),
            high: (0.8 * peak_tps).round_ties_even(),
            spike: 0.05,
            spike_factor: 1.5,
            seed: self.driver.seed,
        });
        self.batch = Some(Batch {
            every_s: (seconds / 6).max(1),
            rows: (accounts / 100).max(100),
        });
        self
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
    pub statements: Vec<(String, StatementStat)>,
    /// Per script of the run ([`BenchOptions::script_list`], in its order; one with a
    /// single script): pgbench's "SQL script N" figures.
    pub scripts: Vec<ScriptOutcome>,
    /// Average lag behind the `-R` schedule, ms.
    pub lag_avg_ms: f64,
    pub lag_max_ms: f64,
    /// What `--batch-every` did.
    pub batches: BatchStats,
    /// What `--vacuum-every` did.
    pub vacuums: VacuumStats,
    /// What `--trace` recorded.
    pub trace: Option<bufpool::buffer::trace::TraceSummary>,
    /// What autoprewarm's reload did at this run's open (`autoprewarm = on`).
    pub prewarm: Option<bufpool::engine::prewarm::PrewarmStats>,
    /// A YCSB run's records and operations (None: a TPC-B run).
    pub ycsb: Option<crate::ycsb::ops::YcsbOutcome>,
    /// A TPC-C run's transactions by kind (None: not a TPC-C run).
    pub tpcc: Option<crate::tpcc::outcome::TpccOutcome>,
}

impl RunOutcome {
    /// The outcome of a run whose result and figures the driver measured, with its
    /// scripts' figures and what its batches and VACUUM thread did.
    pub(crate) fn new(
        result: RunResult,
        f: Figures,
        scripts: Vec<ScriptOutcome>,
        batches: BatchStats,
        vacuums: VacuumStats,
    ) -> RunOutcome {
        RunOutcome {
            result,
            late: f.late,
            skipped: f.skipped,
            retried: f.retried,
            retries: f.retries,
            deadlocks: f.deadlocks,
            // One script: its commands (several: each script's, in `scripts`).
            statements: match scripts.as_slice() {
                [one] => one.statements.clone(),
                _ => Vec::new(),
            },
            scripts,
            lag_avg_ms: f.lag_avg_ms,
            lag_max_ms: f.lag_max_ms,
            batches,
            vacuums,
            trace: None,
            prewarm: None,
            ycsb: None,
            tpcc: None,
        }
    }
}
