//! Several scripts in one run, as pgbench mixes them (`-b NAME@W`, `-f FILE@W`, `-S`,
//! `-N`, each repeatable): the list with its weights ([`WeightedScript`]), each client's
//! pick per transaction ([`choose`], pgbench's chooseScript: a uniform draw in [0, total
//! weight) walked over the weights, from a random stream of the client's own, seeded from
//! `--random-seed`) and the figures per script (pgbench's "SQL script N" blocks, `--json`'s
//! `scripts`).
//!
//! Invariants: with one script there is no draw, so a run of one script is what it was
//! before several could be given; a script of weight 0 is never picked; the total weight
//! is above 0 (checked before the clients start). Each client keeps one interpreter state
//! per interpreted script (pgbench shares a client's variables between its scripts).

use std::sync::Arc;

use anyhow::{ensure, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::builtins::Mode;
use super::driver::stats::Slot;
use super::keys::Keys;
use super::script::{Script, StatementStat};
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
/// (`--zipf-theta`), else the script's default (YCSB's for ycsb-b and ycsb-c).
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

/// A client's stream for its script draws (pgbench's per-thread `ts_choose_rs`): apart
/// from the transactions' own, and repeatable from `--random-seed` and the client's id.
pub(super) fn chooser(seed: u64, client: u32) -> SmallRng {
    SmallRng::seed_from_u64(seed.rotate_left(32) ^ 0x243f_6a88_85a3_08d3 ^ u64::from(client))
}

/// pgbench's chooseScript: the index of the script to run next, drawn with probability
/// weight / `total` (`total` the sum of `weights`, above 0). One script: 0, no draw.
pub(super) fn choose(weights: &[u32], total: u64, rng: &mut SmallRng) -> usize {
    if weights.len() <= 1 {
        return 0;
    }
    let mut w = rng.random_range(0..total) as i64;
    for (i, &weight) in weights.iter().enumerate() {
        w -= i64::from(weight);
        if w < 0 {
            return i;
        }
    }
    weights.len() - 1
}

/// One client's (or the run's) figures for one script.
#[derive(Debug, Clone, Default)]
pub(super) struct ScriptTally {
    /// Its transactions: committed (latency, lag), failed, skipped, retried.
    pub(super) total: Slot,
    /// Per command of an interpreted script (`-r`); empty otherwise.
    pub(super) statements: Vec<StatementStat>,
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
pub(super) fn outcomes(
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

    /// Proves: the draw follows the weights (9:1 within a point over 100,000 draws), a
    /// weight of 0 is never picked wherever it stands, one script takes no draw (the
    /// stream is untouched), and the same seed and client draw the same sequence.
    #[test]
    fn scripts_are_drawn_by_weight_and_repeat_with_the_seed() {
        let mut rng = chooser(7, 1);
        let mut counts = [0u64; 3];
        for _ in 0..100_000 {
            counts[choose(&[9, 0, 1], 10, &mut rng)] += 1;
        }
        assert_eq!(counts[1], 0, "{counts:?}");
        assert!((89_000..=91_000).contains(&counts[0]), "{counts:?}");
        let mut r = chooser(7, 1);
        assert!((0..1_000).all(|_| choose(&[0, 3], 3, &mut r) == 1));
        assert!((0..1_000).all(|_| choose(&[3, 0], 3, &mut r) == 0));
        let (mut a, mut b) = (chooser(7, 1), chooser(7, 1));
        assert_eq!(choose(&[5], 5, &mut a), 0);
        let draw = |r: &mut SmallRng| (0..64).map(|_| choose(&[1, 1], 2, r)).collect::<Vec<_>>();
        assert_eq!(draw(&mut a), draw(&mut b), "one script took no draw");
        assert_ne!(draw(&mut chooser(7, 2)), draw(&mut chooser(7, 1)));
    }

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
