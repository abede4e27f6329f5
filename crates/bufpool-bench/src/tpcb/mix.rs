//! Several scripts in one run, as pgbench mixes them (`-b NAME@W`, `-f FILE@W`, `-S`,
//! `-N`, each repeatable): the list with its weights ([`WeightedScript`]), each with the
//! accounts it touches ([`Pick`]), and the figures per script (pgbench's "SQL script N"
//! blocks, `--json`'s `scripts`). Each transaction's pick is the driver's
//! (`driver/choose.rs`).
//!
//! Invariants: the total weight is above 0 (checked before the clients start). Each
//! client keeps one interpreter state per interpreted script (pgbench shares a client's
//! variables between its scripts).

use std::sync::Arc;

use anyhow::{ensure, Result};

use super::builtins::Mode;
use super::driver::client::ClientStats;
use super::driver::stats::Slot;
use super::keys::Keys;
use super::script::{Script, ScriptState, StatementStat};
use super::Db;

/// pgbench's largest weight (INT_MAX).
pub const WEIGHT_MAX: u32 = i32::MAX as u32;

/// One script of a run, with its weight.
#[derive(Debug, Clone)]
pub struct WeightedScript {
    /// The built-in's name (`tpcb-like`), or the file's name.
    pub name: String,
    /// pgbench's description of it: `<builtin: TPC-B (sort of)>`, or the file's name.
    pub desc: String,
    /// 0 to [`WEIGHT_MAX`]; it runs in weight / (the weights' sum) of the transactions.
    pub weight: u32,
    /// The built-in script, run by engine calls unless `script` is set; [`Mode::Script`]
    /// for a file.
    pub mode: Mode,
    /// The commands interpreted one by one: a file's, or a built-in's text for `-r`.
    pub script: Option<Arc<Script>>,
}

impl WeightedScript {
    /// Built-in script `mode` of weight `weight`, interpreted from `script` if given.
    pub fn builtin(mode: Mode, weight: u32, script: Option<Arc<Script>>) -> WeightedScript {
        WeightedScript {
            name: mode.name().to_string(),
            desc: mode.desc().to_string(),
            weight,
            mode,
            script,
        }
    }

    /// A script file, parsed, of weight `weight`.
    pub fn file(script: Script, weight: u32) -> WeightedScript {
        WeightedScript {
            name: script.name.clone(),
            desc: script.name.clone(),
            weight,
            mode: Mode::Script,
            script: Some(Arc::new(script)),
        }
    }
}

/// A script as the clients run it, with the chooser of the accounts it touches.
#[derive(Debug, Clone)]
pub(super) struct Pick {
    pub(super) script: WeightedScript,
    pub(super) keys: Keys,
}

/// The run's scripts `list`, each with its keys: Zipfian with `zipf_theta`
/// (`--zipf-theta`), else the script's default (YCSB's for zipf-read-update and zipf-select).
pub(super) fn picks(
    db: &Db<'_>,
    list: Vec<WeightedScript>,
    zipf_theta: Option<f64>,
) -> Result<Vec<Pick>> {
    let accounts = i64::from(db.scale) * super::ACCOUNTS_PER_SCALE as i64;
    let total: u64 = list.iter().map(|s| u64::from(s.weight)).sum();
    ensure!(
        list.len() == 1 || total > 0,
        "total script weight must not be zero"
    );
    list.into_iter()
        .map(|script| {
            let theta = zipf_theta.or(script.mode.default_theta());
            let keys = Keys::new(accounts, theta)?;
            Ok(Pick { script, keys })
        })
        .collect()
}

/// One client's (or the run's) figures for one script.
#[derive(Debug, Clone, Default)]
pub(crate) struct ScriptTally {
    /// Its transactions: committed (latency, lag), failed, skipped, retried.
    pub(crate) total: Slot,
    /// Per command of an interpreted script (`-r`); empty otherwise.
    pub(crate) statements: Vec<StatementStat>,
}

/// One client's tallies: its transactions per script (`totals`, the driver's) with the
/// per-command figures of its interpreter states (`states`, the client's session).
pub(super) fn tallies(totals: &[Slot], states: &[Option<ScriptState>]) -> Vec<ScriptTally> {
    totals
        .iter()
        .zip(states)
        .map(|(total, state)| ScriptTally {
            total: *total,
            statements: state.as_ref().map(|s| s.stats.clone()).unwrap_or_default(),
        })
        .collect()
}

/// The clients' tallies merged, script by script (each client's session holds its
/// interpreter states).
pub(super) fn merge_clients(clients: &[ClientStats<Vec<Option<ScriptState>>>]) -> Vec<ScriptTally> {
    let mut merged = Vec::new();
    for c in clients {
        merge(&mut merged, &tallies(&c.scripts, &c.session));
    }
    merged
}

/// Adds the clients' tallies `from` into `into`, script by script.
pub(super) fn merge(into: &mut Vec<ScriptTally>, from: &[ScriptTally]) {
    if into.len() < from.len() {
        into.resize(from.len(), ScriptTally::default());
    }
    for (a, b) in into.iter_mut().zip(from) {
        a.total.merge(&b.total);
        if a.statements.len() < b.statements.len() {
            a.statements
                .resize(b.statements.len(), StatementStat::default());
        }
        for (x, y) in a.statements.iter_mut().zip(&b.statements) {
            x.count += y.count;
            x.sum_us += y.sum_us;
            x.failures += y.failures;
        }
    }
}

/// What one script of a run did: pgbench's "SQL script N" block.
#[derive(Debug, Clone)]
pub struct ScriptOutcome {
    /// The built-in's name or the file's.
    pub name: String,
    /// pgbench's description (`<builtin: TPC-B (sort of)>`, or the file's name).
    pub desc: String,
    pub weight: u32,
    /// Committed transactions.
    pub transactions: u64,
    pub failed: u64,
    /// Of the failed: those that failed on a deadlock.
    pub deadlocks: u64,
    /// Skipped (`-L` with `-R`).
    pub skipped: u64,
    /// Transactions that took more than one try, and the tries beyond the first.
    pub retried: u64,
    pub retries: u64,
    /// Committed transactions per second of the run.
    pub tps: f64,
    pub latency_avg_ms: f64,
    pub latency_stddev_ms: f64,
    /// Per command (text, figures) when its commands were interpreted; empty when it ran
    /// as engine calls.
    pub statements: Vec<(String, StatementStat)>,
    /// Whether its commands were interpreted one by one (a file, or a built-in for `-r`).
    pub interpreted: bool,
}

/// The scripts of `list`, each with its merged tally (none: nothing ran), over a run of
/// `elapsed` seconds.
pub(crate) fn outcomes(
    list: &[WeightedScript],
    tallies: Vec<ScriptTally>,
    elapsed: f64,
) -> Vec<ScriptOutcome> {
    let mut tallies = tallies.into_iter();
    list.iter()
        .map(|s| {
            let t = tallies.next().unwrap_or_default();
            let n = t.total.n;
            let texts = s.script.iter().flat_map(|c| c.commands.iter());
            ScriptOutcome {
                name: s.name.clone(),
                desc: s.desc.clone(),
                weight: s.weight,
                transactions: n,
                failed: t.total.failed,
                deadlocks: t.total.deadlocks,
                skipped: t.total.skipped,
                retried: t.total.retried,
                retries: t.total.retries,
                tps: if elapsed > 0.0 {
                    n as f64 / elapsed
                } else {
                    0.0
                },
                latency_avg_ms: if n > 0 {
                    t.total.sum / n as f64 / 1000.0
                } else {
                    0.0
                },
                latency_stddev_ms: t.total.stddev() / 1000.0,
                statements: texts.map(|c| c.text.clone()).zip(t.statements).collect(),
                interpreted: s.script.is_some(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: merging adds the clients' tallies script by script, their per-command
    /// figures too, and the outcomes name each script with its share of the figures.
    #[test]
    fn tallies_merge_per_script_into_outcomes() {
        let mut one = ScriptTally::default();
        one.total.add(1000.0, 0.0);
        one.total.add(3000.0, 0.0);
        let stat = StatementStat {
            count: 2,
            sum_us: 10.0,
            failures: 1,
        };
        one.statements = vec![stat; 2];
        let mut other = ScriptTally::default();
        other.total.failed = 1;
        let mut merged = Vec::new();
        merge(&mut merged, &[one.clone(), other.clone()]);
        merge(&mut merged, &[one, other]);
        assert_eq!(merged[0].total.n, 4);
        assert_eq!(merged[0].statements[0].count, 4);
        assert_eq!(merged[1].total.failed, 2);
        let text =
            "\\set aid random(1, 10)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;";
        let list = [
            WeightedScript::file(Script::parse("a.sql", text).unwrap(), 3),
            WeightedScript::builtin(Mode::SelectOnly, 1, None),
        ];
        let o = outcomes(&list, merged, 2.0);
        assert_eq!(
            (o[0].name.as_str(), o[0].weight, o[0].transactions),
            ("a.sql", 3, 4)
        );
        assert_eq!((o[0].tps, o[0].latency_avg_ms), (2.0, 2.0));
        assert!(
            (o[0].latency_stddev_ms - 1.0).abs() < 1e-9,
            "{}",
            o[0].latency_stddev_ms
        );
        assert_eq!(o[0].statements.len(), 2, "texts zip with what ran");
        assert_eq!(o[1].desc, "<builtin: select only>");
        assert!(!o[1].interpreted && o[1].statements.is_empty());
        assert_eq!(o[1].failed, 2);
    }
}
