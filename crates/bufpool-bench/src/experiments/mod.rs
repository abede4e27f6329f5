//! Experiments run by `bufpool experiment <NAME>`: small, self-contained measurements
//! that put a figure of the pool next to a baseline, in one process, side by side.
//!
//! Owns: the `experiment` subcommands (one per experiment, each with its own `Args`; the
//! flags they share are [`runner::Common`]), the report shape shared by experiments
//! (figures with median/min/max over repetitions, ratios with targets and verdicts,
//! metadata), its table and JSON renderings, and pure helpers (summaries, a single-cycle
//! random permutation). The skeleton every experiment runs in is [`runner::Runner`].

pub mod bgwriter;
pub mod checkpoint;
pub mod device;
pub(crate) mod fdatasync;
pub(crate) mod floor;
pub mod mutex_pool;
pub mod outgrow;
pub mod policies;
pub mod pool;
pub mod prewarm;
pub mod readonly;
pub mod resize;
pub mod runner;
pub mod scans;
pub mod slru;
pub mod slru_scaling;
pub mod table;
pub mod tpcb;
pub mod wal;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{Context, Result};
use rand::Rng;
use serde::Serialize;

/// `bufpool experiment [FLAGS] NAME [FLAGS]`.
#[derive(Debug, clap::Args)]
pub struct ExperimentCli {
    #[command(flatten)]
    pub common: runner::Common,
    #[command(subcommand)]
    pub which: Which,
}

/// The experiments, each with its own flags.
#[derive(Debug, clap::Subcommand)]
pub enum Which {
    /// Hit and miss paths of the pool next to HashMap, raw memory, mutex-pool and pread
    /// baselines.
    Pool(pool::Args),
    /// Commit rates (group commit) against raw fdatasync, WAL insert scaling, redo speed.
    Wal(wal::Args),
    /// B+tree lookups against std BTreeMap, their 2-thread scaling, and a heap scan with
    /// visibility checks against summing a Vec.
    Table(table::Args),
    /// Replacement policies (`buffer_replacement`): recorded TPC-B traces (alone, beside a
    /// scan larger than the pool with rings off and on) replayed through each policy and
    /// Belady's optimum at a quarter and a tenth of the data, scan resistance, live tps
    /// and hit-path cost.
    Policies(policies::Args),
    /// The background writer: TPC-B with it off, on, at PostgreSQL's and seed 004's
    /// settings and with seed 000's alternatives, at full speed, a steady rate and bursty;
    /// what slow transactions waited for; a round's cost at
    /// 64 MiB, 1 GiB and 8 GiB pools.
    Bgwriter(bgwriter::Args),
    /// Checkpoints (issue 13): TPC-B through checkpoints of 2007 (unsorted, page by page,
    /// fsync at the end), sorted and combined, with writeback hints per tablespace or
    /// shared, O_DSYNC, and 4 writers; unthrottled and at 60% of the rate; seed 001's
    /// bulk load, update and CHECKPOINT per configuration.
    Checkpoint(checkpoint::Args),
    /// TPC-B over time (issue 14): c4 synchronous commit on and off for `--minutes`,
    /// per-second max latency of c1 and c4 without checkpoints, CPU per transaction,
    /// SQLite NORMAL, the commit limit, and an earlier binary (`--baseline`).
    Tpcb(tpcb::Args),
    /// Rings, synchronized scans, the cache trail and read streams (issue 15, seed 003):
    /// a ring-size sweep, hot-set survival, vacuum and bulk-write rings, 1/2/4 concurrent
    /// scans, 3A on and off, scan MB/s per io_method and io_combine_limit.
    Scans(scans::Args),
    /// Autoprewarm: seconds to steady TPS and the first minute's TPS after a restart from
    /// cold storage, with the saved block list reloaded and without.
    Prewarm(prewarm::Args),
    /// Transactions that only read: pgbench's select-only script and YCSB C with
    /// synchronous commit on and off, the log bytes and syncs each transaction costs
    /// (none: a reader gets no transaction id and writes no commit record).
    Readonly(readonly::Args),
    /// YCSB C as its data outgrows the pool (0.5x to 10x, O_DIRECT): tps, reads per second,
    /// and the process's resident memory against its budget.
    Outgrow(outgrow::Args),
    /// Online resize: TPC-B while the pool grows and shrinks (128MB -> 512MB -> 64MB ->
    /// 1GB -> 128MB), each resize's second against the seconds after it, and nothing lost.
    Resize(resize::Args),
    /// The banked SLRU (issue 16, seed 002): lookups of random pages per slru_design,
    /// SLRU size (16..4096 slots), spread (fits, 10x) and thread count.
    Slru(slru::Args),
}

/// Runs the chosen experiment and prints its report (a table, or JSON with `--json`).
pub fn run(cli: ExperimentCli, command: Vec<String>) -> Result<()> {
    let json = cli.common.json;
    let report = report_of(cli, command)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report.to_json())?);
    } else {
        print!("{}", report.to_table());
    }
    Ok(())
}

/// Runs the chosen experiment and returns its report (`bufpool seeds` reads the JSON of
/// the experiments it runs).
pub fn report_of(cli: ExperimentCli, command: Vec<String>) -> Result<Report> {
    let c = cli.common;
    Ok(match cli.which {
        Which::Pool(a) => {
            runner::run("pool", c, command, |r| pool::run(&a, r)).context("experiment pool")?
        }
        Which::Wal(a) => {
            runner::run("wal", c, command, |r| wal::run(&a, r)).context("experiment wal")?
        }
        Which::Table(a) => {
            runner::run("table", c, command, |r| table::run(&a, r)).context("experiment table")?
        }
        Which::Policies(a) => runner::run("policies", c, command, |r| policies::run(&a, r))
            .context("experiment policies")?,
        Which::Bgwriter(a) => runner::run("bgwriter", c, command, |r| bgwriter::run(&a, r))
            .context("experiment bgwriter")?,
        Which::Checkpoint(a) => runner::run("checkpoint", c, command, |r| checkpoint::run(&a, r))
            .context("experiment checkpoint")?,
        Which::Tpcb(a) => {
            runner::run("tpcb", c, command, |r| tpcb::run(&a, r)).context("experiment tpcb")?
        }
        Which::Scans(a) => {
            runner::run("scans", c, command, |r| scans::run(&a, r)).context("experiment scans")?
        }
        Which::Prewarm(a) => runner::run("prewarm", c, command, |r| prewarm::run(&a, r))
            .context("experiment prewarm")?,
        Which::Readonly(a) => runner::run("readonly", c, command, |r| readonly::run(&a, r))
            .context("experiment readonly")?,
        Which::Outgrow(a) => runner::run("outgrow", c, command, |r| outgrow::run(&a, r))
            .context("experiment outgrow")?,
        Which::Resize(a) => runner::run("resize", c, command, |r| resize::run(&a, r))
            .context("experiment resize")?,
        Which::Slru(a) => {
            runner::run("slru", c, command, |r| slru::run(&a, r)).context("experiment slru")?
        }
    })
}

/// Median, min and max of one figure over the repetitions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// Summarizes samples: median (mean of the two middle values for an even count), min, max.
///
/// # Panics
/// If `samples` is empty or holds a NaN.
pub fn summarize(samples: &[f64]) -> Summary {
    assert!(!samples.is_empty(), "no samples to summarize");
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).expect("samples are not NaN"));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Summary {
        median,
        min: v[0],
        max: v[n - 1],
    }
}

/// A random permutation of `0..n` that is one single cycle (Sattolo's algorithm):
/// following `next[i]` from any start visits all `n` elements before returning.
pub fn sattolo_cycle<R: Rng + ?Sized>(n: usize, rng: &mut R) -> Vec<u32> {
    assert!(n <= u32::MAX as usize, "cycle too long for u32 elements");
    let mut next: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        let j = rng.random_range(0..i);
        next.swap(i, j);
    }
    next
}

/// Per-repetition samples of every figure and ratio of one experiment, by name.
#[derive(Debug, Default)]
pub struct Samples(std::collections::HashMap<&'static str, Vec<f64>>);

impl Samples {
    pub fn push(&mut self, name: &'static str, v: f64) {
        self.0.entry(name).or_default().push(v);
    }

    /// The samples of `name` (empty if none).
    pub fn get(&self, name: &str) -> &[f64] {
        self.0.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The figure `name` summarized.
    pub fn figure(&self, name: &'static str, unit: &'static str) -> Figure {
        Figure {
            name,
            unit,
            summary: summarize(self.get(name)),
        }
    }

    /// The ratio `name` with its target and verdict.
    pub fn ratio(&self, name: &'static str, goal: Goal, target: f64) -> Ratio {
        Ratio::new(name, self.get(name), goal, target)
    }
}

/// Whether a ratio must stay below or above its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Goal {
    #[serde(rename = "<=")]
    AtMost,
    #[serde(rename = ">=")]
    AtLeast,
    /// The value must be the target itself (a count that must be 0).
    #[serde(rename = "=")]
    Exactly,
}

impl Goal {
    pub fn symbol(self) -> &'static str {
        match self {
            Goal::AtMost => "<=",
            Goal::AtLeast => ">=",
            Goal::Exactly => "=",
        }
    }

    pub fn passes(self, value: f64, target: f64) -> bool {
        match self {
            Goal::AtMost => value <= target,
            Goal::AtLeast => value >= target,
            Goal::Exactly => value == target,
        }
    }
}

/// One measured figure.
#[derive(Debug, Clone)]
pub struct Figure {
    pub name: &'static str,
    pub unit: &'static str,
    pub summary: Summary,
}

/// A ratio with a target; the verdict is taken on the median.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    #[serde(skip)]
    pub name: &'static str,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub goal: Goal,
    pub target: f64,
    pub pass: bool,
}

impl Ratio {
    pub fn new(name: &'static str, samples: &[f64], goal: Goal, target: f64) -> Self {
        let s = summarize(samples);
        Self {
            name,
            median: s.median,
            min: s.min,
            max: s.max,
            goal,
            target,
            pass: goal.passes(s.median, target),
        }
    }
}

/// The result of one experiment.
#[derive(Debug, Clone)]
pub struct Report {
    /// One-line description for the table header.
    pub header: String,
    pub figures: Vec<Figure>,
    pub ratios: Vec<Ratio>,
    /// Everything else (sizes, thread counts, machine, checks), emitted as JSON fields.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// Lines printed under the table (warnings, checks).
    pub notes: Vec<String>,
    /// Further tables, already laid out, printed after the figures (experiments whose
    /// results are a matrix of configurations).
    pub tables: Vec<String>,
}

impl Report {
    /// The JSON object: metadata fields, `figures` {name: {median, min, max}} (measured
    /// figures and ratios) and `ratios` {name: {median, min, max, goal, target, pass}}.
    pub fn to_json(&self) -> serde_json::Value {
        let mut obj = self.metadata.clone();
        // Every named figure, ratios included, as {median, min, max}.
        let mut figures: BTreeMap<&str, Summary> =
            self.figures.iter().map(|f| (f.name, f.summary)).collect();
        for r in &self.ratios {
            figures.insert(
                r.name,
                Summary {
                    median: r.median,
                    min: r.min,
                    max: r.max,
                },
            );
        }
        let ratios: BTreeMap<&str, &Ratio> = self.ratios.iter().map(|r| (r.name, r)).collect();
        obj.insert(
            "figures".into(),
            serde_json::to_value(figures).expect("figures serialize"),
        );
        obj.insert(
            "ratios".into(),
            serde_json::to_value(ratios).expect("ratios serialize"),
        );
        // The contract every experiment's JSON keeps: one entry per target its issue names.
        let targets: Vec<serde_json::Value> = self
            .ratios
            .iter()
            .map(|r| {
                serde_json::json!({
                    "name": r.name,
                    "value": r.median,
                    "op": r.goal.symbol(),
                    "target": r.target,
                    "pass": r.pass,
                })
            })
            .collect();
        obj.insert("targets".into(), targets.into());
        obj.insert("all_pass".into(), self.ratios.iter().all(|r| r.pass).into());
        obj.insert("notes".into(), self.notes.clone().into());
        serde_json::Value::Object(obj)
    }

    /// An aligned table: figure, median, min, max, target, verdict.
    pub fn to_table(&self) -> String {
        let mut rows: Vec<[String; 6]> = Vec::new();
        rows.push(["figure", "median", "min", "max", "target", "verdict"].map(String::from));
        for f in &self.figures {
            let fmt = |v: f64| format_value(v, f.unit);
            let s = f.summary;
            rows.push([
                f.name.to_string(),
                fmt(s.median),
                fmt(s.min),
                fmt(s.max),
                String::new(),
                String::new(),
            ]);
        }
        for r in &self.ratios {
            let fmt = |v: f64| format!("{v:.2}x");
            rows.push([
                r.name.to_string(),
                fmt(r.median),
                fmt(r.min),
                fmt(r.max),
                format!("{} {}", r.goal.symbol(), r.target),
                if r.pass { "PASS" } else { "MISS" }.to_string(),
            ]);
        }
        let mut widths = [0usize; 6];
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.len());
            }
        }
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.header);
        for (i, row) in rows.iter().enumerate() {
            let mut line = format!("{:<w$}", row[0], w = widths[0]);
            for (cell, w) in row.iter().zip(widths).skip(1).take(4) {
                let _ = write!(line, "  {cell:>w$}");
            }
            let _ = write!(line, "  {}", row[5]);
            let _ = writeln!(out, "{}", line.trim_end());
            if i == 0 || i == self.figures.len() {
                let _ = writeln!(out, "{}", "-".repeat(widths.iter().sum::<usize>() + 2 * 5));
            }
        }
        for table in &self.tables {
            let _ = writeln!(out);
            out.push_str(table);
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        out
    }
}

fn format_value(v: f64, unit: &str) -> String {
    match unit {
        "ns" if v >= 10_000.0 => format!("{:.2} us", v / 1000.0),
        "ns" => format!("{v:.1} ns"),
        "x" => format!("{v:.2}x"),
        u => format!("{v:.3} {u}"),
    }
}

/// Lays out a table of text cells: the first row is the header, underlined; the first
/// `left` columns are aligned left, the others right (numbers); two spaces between.
pub fn layout(cells: &[Vec<String>], left: usize) -> String {
    let cols = cells.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            cells
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, row) in cells.iter().enumerate() {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = " ".repeat(widths[c] - cell.chars().count());
            if c < left {
                line.push_str(&format!("{cell}{pad}  "));
            } else {
                line.push_str(&format!("{pad}{cell}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if i == 0 {
            out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * cols.saturating_sub(1)));
            out.push('\n');
        }
    }
    out
}

/// Prints a progress line to stderr.
pub fn progress(msg: impl AsRef<str>) {
    eprintln!("[experiment] {}", msg.as_ref());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_aligns_text_left_and_numbers_right() {
        let cells = vec![
            vec!["name".to_string(), "tps".to_string()],
            vec!["bufpool".to_string(), "5".to_string()],
            vec!["pg".to_string(), "1234".to_string()],
        ];
        assert_eq!(
            layout(&cells, 1),
            "name      tps\n-------------\nbufpool     5\npg       1234\n"
        );
    }
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn summary_of_odd_and_even_counts() {
        assert_eq!(
            summarize(&[3.0, 1.0, 2.0]),
            Summary {
                median: 2.0,
                min: 1.0,
                max: 3.0
            }
        );
        assert_eq!(
            summarize(&[4.0, 1.0, 3.0, 2.0]),
            Summary {
                median: 2.5,
                min: 1.0,
                max: 4.0
            }
        );
        assert_eq!(
            summarize(&[7.0]),
            Summary {
                median: 7.0,
                min: 7.0,
                max: 7.0
            }
        );
    }

    #[test]
    fn sattolo_is_one_cycle_through_everything() {
        let mut rng = SmallRng::seed_from_u64(7);
        for n in [1usize, 2, 3, 10, 1000, 4097] {
            let next = sattolo_cycle(n, &mut rng);
            let mut seen = vec![false; n];
            let mut cur = 0usize;
            for _ in 0..n {
                assert!(!seen[cur], "n={n}: revisited {cur} before covering all");
                seen[cur] = true;
                cur = next[cur] as usize;
            }
            assert_eq!(cur, 0, "n={n}: did not return to the start after n steps");
            assert!(seen.iter().all(|&s| s));
            if n > 1 {
                assert!(
                    next.iter().enumerate().all(|(i, &j)| i != j as usize),
                    "fixed point"
                );
            }
        }
    }

    #[test]
    fn ratio_verdicts_use_the_median() {
        let r = Ratio::new("x", &[1.0, 3.5, 2.0], Goal::AtMost, 2.0);
        assert!(r.pass);
        let r = Ratio::new("y", &[1.0, 1.7, 2.0], Goal::AtLeast, 1.8);
        assert!(!r.pass);
        assert!(Ratio::new("z", &[0.0], Goal::Exactly, 0.0).pass);
        assert!(!Ratio::new("z", &[0.5], Goal::Exactly, 0.0).pass);
    }

    #[test]
    fn table_and_json_carry_every_name() {
        let report = Report {
            header: "h".into(),
            figures: vec![Figure {
                name: "a_ns",
                unit: "ns",
                summary: summarize(&[1.0, 2.0, 3.0]),
            }],
            ratios: vec![Ratio::new("a_vs_b", &[1.0, 1.0, 1.0], Goal::AtMost, 2.0)],
            metadata: serde_json::Map::new(),
            notes: vec![],
            tables: Vec::new(),
        };
        let table = report.to_table();
        assert!(table.contains("a_ns") && table.contains("a_vs_b") && table.contains("PASS"));
        let json = report.to_json();
        assert_eq!(json["figures"]["a_ns"]["median"], 2.0);
        assert_eq!(json["ratios"]["a_vs_b"]["pass"], true);
        assert_eq!(json["ratios"]["a_vs_b"]["goal"], "<=");
        let t = &json["targets"][0];
        assert_eq!(
            (&t["name"], &t["op"], &t["target"], &t["pass"]),
            (
                &serde_json::json!("a_vs_b"),
                &serde_json::json!("<="),
                &serde_json::json!(2.0),
                &serde_json::json!(true)
            )
        );
        assert_eq!(t["value"], 1.0);
    }
}

/// What every experiment report says about its run: the machine's core count, the build
/// profile and the command line.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub cores: usize,
    pub profile: &'static str,
    pub command: String,
}

impl RunInfo {
    pub fn new(command: &[String]) -> Self {
        Self {
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            profile: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
            command: command.join(" "),
        }
    }

    /// The JSON fields `experiment`, `command`, `argv`, `profile`, `cores`, `machine`
    /// (cores, CPU, kernel), `version`, `commit` (the binary's) and `device` (this machine's own disk through the page cache;
    /// an experiment on a throttled device or with O_DIRECT replaces it).
    pub fn metadata(
        &self,
        experiment: &str,
        argv: &[String],
    ) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("experiment".into(), experiment.into());
        m.insert("command".into(), self.command.clone().into());
        m.insert("argv".into(), argv.to_vec().into());
        m.insert("profile".into(), self.profile.into());
        m.insert("cores".into(), self.cores.into());
        let here = crate::provenance::Provenance::here();
        m.insert(
            "machine".into(),
            serde_json::json!({
                "cores": self.cores,
                "cpu": here.cpu,
                "kernel": here.kernel,
            }),
        );
        m.insert("version".into(), here.version.into());
        m.insert("commit".into(), here.commit.into());
        m.insert(
            "device".into(),
            serde_json::json!({
                "profile": "local disk (not throttled)",
                "io": "buffered",
            }),
        );
        m
    }
}
