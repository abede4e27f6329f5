//! The TPC-B workload as the driver runs it ([`Tpcb`], a [`Workload`]): the run's scripts
//! with their weights and keys, one client's session (an interpreter state for each
//! script run statement by statement), and one transaction of a script: interpreted
//! (`script_run.rs`) when it has commands, else the built-in's engine calls
//! (`transactions.rs`).

use anyhow::Result;
use rand::rngs::SmallRng;

use super::driver::{Done, Workload};
use super::mix::{picks, Pick};
use super::options::BenchOptions;
use super::script::ScriptState;
use super::script_run::{run_once, Ran};
use super::transactions::{builtin_transaction, HistoryRow};
use super::Db;

/// pgbench's TPC-B-like database with the run's scripts.
pub(super) struct Tpcb<'a, 'e> {
    db: &'a Db<'e>,
    /// The scripts the clients pick from, each with the accounts its transactions touch.
    picks: Vec<Pick>,
    /// The abort storm's share (a testing aid, `BenchOptions::abort_fraction`).
    abort_fraction: f64,
    /// `--random-seed`: each client's interpreter states derive from it.
    seed: u64,
}

impl<'a, 'e> Tpcb<'a, 'e> {
    /// The workload `opts` asks for on `db`: its scripts ([`BenchOptions::script_list`])
    /// with their keys; the total weight must be above 0.
    pub(super) fn new(db: &'a Db<'e>, opts: &BenchOptions) -> Result<Self> {
        Ok(Tpcb {
            db,
            picks: picks(db, opts.script_list(), opts.zipf_theta)?,
            abort_fraction: opts.abort_fraction,
            seed: opts.driver.seed,
        })
    }
}

/// One client's interpreter state per script (None for those run as engine calls), in
/// the run's order.
pub(super) type ClientState = Vec<Option<ScriptState>>;

impl Workload for Tpcb<'_, '_> {
    type ClientState = ClientState;
    type Ack = HistoryRow;

    fn weights(&self) -> Vec<u32> {
        self.picks.iter().map(|p| p.script.weight).collect()
    }

    fn session(&self, client: u32) -> ClientState {
        self.picks
            .iter()
            .map(|p| {
                p.script
                    .script
                    .as_ref()
                    .map(|s| ScriptState::new(s, self.db.scale, client, self.seed))
            })
            .collect()
    }

    fn transaction(
        &self,
        session: &mut ClientState,
        script: usize,
        rng: &mut SmallRng,
    ) -> Result<Done<HistoryRow>> {
        let pick = &self.picks[script];
        if let (Some(s), Some(st)) = (pick.script.script.as_deref(), session[script].as_mut()) {
            return Ok(match run_once(self.db, s, st, rng)? {
                Ran::Committed => Done::Committed(None),
                Ran::Deadlock => Done::Failed { deadlock: true },
            });
        }
        Ok(builtin_transaction(
            self.db,
            pick.script.mode,
            self.abort_fraction,
            &pick.keys,
            rng,
        )?)
    }
}
