//! `bufpool seeds`: each seed thread's own experiment rerun in the thread's set-up, and its
//! published figures beside ours, one section per seed.
//!
//! Owns: the threads' figures (`figures.toml`, data with the message each comes from,
//! embedded), the plan of each seed (`plans.rs`: which experiments run with which flags,
//! and which of their figures answer which of the thread's), the comparison of shapes, and
//! the page (`bufpool-seeds/index.html`) and JSON (`bufpool-seeds/seeds.json`, or stdout
//! with `--json`).
//! Built on the experiments: a plan runs `bufpool experiment NAME ...` in this process
//! (their runner, device and report), never a copy of them; each row names the command
//! that produced it.
//! A row compares a change the thread measured (its "after" over its "before", e.g. O_SYNC
//! over fsync) with the same change here: `seed_figure` and `our_figure` are the two
//! ratios, and `shape_matches` says whether both go the same way (each is lower, about the
//! same, or higher, with [`SAME_BAND`] around 1).

mod plans;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::experiments;

/// A ratio within this factor of 1 (0.9 to 1.11) counts as "about the same".
pub const SAME_BAND: f64 = 0.9;

/// `bufpool seeds` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Seeds to run (000, 001, 002, 003, 004; default all).
    #[arg(value_parser = ["000", "001", "002", "003", "004"])]
    pub seeds: Vec<String>,
    /// The short version of every experiment (about 10 minutes for all seeds).
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object on stdout (the page and seeds.json are written too).
    #[arg(long)]
    pub json: bool,
    /// The slow-device profile for the seeds whose threads measured a disk (000, 001,
    /// 004): scripts/slow-device.sh's names, or `local`. Default hdd-2007 (slow10 with
    /// --quick). Without root the runs fall back to the local disk and say so.
    #[arg(long)]
    pub device: Option<String>,
    /// Where the page, seeds.json and the experiments' scratch folders go.
    #[arg(long, default_value = "bufpool-seeds")]
    pub out: PathBuf,
    /// Reuse the reports an earlier run left in OUT/reports for the same commands (a run
    /// that was interrupted, or seeds run one at a time and then put on one page; the
    /// scratch folder may differ); a command with no saved report, or a different one,
    /// runs.
    #[arg(long)]
    pub resume: bool,
}

/// The threads' figures (`figures.toml`).
#[derive(Debug, Deserialize)]
pub struct Figures {
    pub seed: Vec<Seed>,
}

#[derive(Debug, Deserialize)]
pub struct Seed {
    pub id: String,
    pub title: String,
    pub year: u32,
    pub shape: String,
    pub message: Vec<Message>,
    pub figure: Vec<Figure>,
}

#[derive(Debug, Deserialize)]
pub struct Message {
    pub key: String,
    pub author: String,
    pub date: String,
    pub message_id: String,
    pub setup: String,
}

#[derive(Debug, Deserialize)]
pub struct Figure {
    pub key: String,
    pub message: String,
    pub table: String,
    pub row: String,
    pub metric: String,
    pub value: f64,
    pub unit: String,
    pub quote: String,
}

/// The embedded figures, parsed.
pub fn figures() -> Result<Figures> {
    toml::from_str(include_str!("figures.toml")).context("parsing seeds/figures.toml")
}

impl Seed {
    fn figure(&self, key: &str) -> Result<&Figure> {
        self.figure
            .iter()
            .find(|f| f.key == key)
            .with_context(|| format!("seed {}: no figure {key} in figures.toml", self.id))
    }

    fn message(&self, key: &str) -> Option<&Message> {
        self.message.iter().find(|m| m.key == key)
    }
}

/// Which way a change went: lower, about the same, or higher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Lower,
    Same,
    Higher,
}

impl Shape {
    pub fn of(ratio: f64) -> Shape {
        if ratio < SAME_BAND {
            Shape::Lower
        } else if ratio > 1.0 / SAME_BAND {
            Shape::Higher
        } else {
            Shape::Same
        }
    }

    fn word(self) -> &'static str {
        match self {
            Shape::Lower => "lower",
            Shape::Same => "about the same",
            Shape::Higher => "higher",
        }
    }
}

/// One row of a seed's table.
#[derive(Debug, Clone)]
pub struct Row {
    pub seed: String,
    pub question: String,
    /// The thread's set-up (its message's) and ours, in one line each.
    pub setup: String,
    pub seed_figure: f64,
    pub seed_detail: Value,
    /// None: not measured here (see `skipped`).
    pub our_figure: Option<f64>,
    pub our_detail: Value,
    pub skipped: Option<String>,
}

impl Row {
    pub fn shape_matches(&self) -> Option<bool> {
        self.our_figure
            .map(|o| Shape::of(o) == Shape::of(self.seed_figure))
    }

    fn json(&self) -> Value {
        json!({
            "seed": self.seed, "question": self.question, "setup": self.setup,
            "seed_figure": self.seed_figure, "our_figure": self.our_figure,
            "ratio": self.our_figure.map(|o| o / self.seed_figure),
            "shape_matches": self.shape_matches(),
            "seed_shape": Shape::of(self.seed_figure).word(),
            "our_shape": self.our_figure.map(|o| Shape::of(o).word()),
            "seed_detail": self.seed_detail, "our_detail": self.our_detail,
            "skipped": self.skipped,
        })
    }
}

/// Runs the chosen seeds' plans and writes the page and JSON.
pub fn run(a: &Args) -> Result<()> {
    let figs = figures()?;
    let chosen: Vec<&Seed> = figs
        .seed
        .iter()
        .filter(|s| a.seeds.is_empty() || a.seeds.contains(&s.id))
        .collect();
    if chosen.is_empty() {
        bail!("no seed chosen");
    }
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let device = a
        .device
        .clone()
        .unwrap_or_else(|| if a.quick { "slow10" } else { "hdd-2007" }.to_string());
    // Every seed's plan first, so the experiments to run are counted: steps k of n.
    let mut planned = Vec::new();
    let mut to_run = 0;
    for seed in chosen {
        let plan = plans::plan(&seed.id, a.quick, &device, &a.out)?;
        let unavailable = device_unavailable(&plan, &device, effective_uid());
        if unavailable.is_none() {
            for (i, argv) in plan.runs.iter().enumerate() {
                if reusable(&saved_path(&a.out, seed, i), argv, a.resume)?.is_none() {
                    to_run += 1;
                }
            }
        }
        planned.push((seed, plan, unavailable));
    }
    let mut clock =
        experiments::runner::StepClock::new(experiments::runner::Steps::new().untimed(to_run));
    let mut sections = Vec::new();
    for (seed, plan, unavailable) in planned {
        experiments::progress(format!("seeds: {} {}", seed.id, seed.title));
        let mut reports = Vec::new();
        if let Some(why) = &unavailable {
            experiments::progress(format!("seeds: {}: skipped: {why}", seed.id));
        } else {
            for (i, argv) in plan.runs.iter().enumerate() {
                let label = format!("seed {} run {} of {}", seed.id, i + 1, plan.runs.len());
                let step = |command: &str| {
                    let line = clock.begin(&format!("{label}: {command}"));
                    experiments::progress(format!("seeds: {line}"));
                };
                let saved = saved_path(&a.out, seed, i);
                reports.push(saved_or_run(&saved, argv, a.resume, step, run_experiment)?);
            }
        }
        let rows = rows(seed, &plan, &reports, unavailable.as_ref())?;
        sections.push((seed, plan, reports, rows));
    }
    if let Some(done) = clock.done_line() {
        experiments::progress(format!("seeds: {done}"));
    }
    let doc = document(&sections, a.quick, &device);
    let text = serde_json::to_string_pretty(&doc)?;
    std::fs::write(a.out.join("seeds.json"), &text)?;
    std::fs::write(a.out.join("index.html"), page(&sections, &doc))?;
    if a.json {
        println!("{text}");
    } else {
        print!("{}", table(&sections));
        println!("page: {}", a.out.join("index.html").display());
    }
    Ok(())
}

/// A seed's rows from its experiments' reports; every row says `unavailable` (why the
/// plan could not run here), if given, instead of a figure.
fn rows(
    seed: &Seed,
    plan: &plans::Plan,
    reports: &[Value],
    unavailable: Option<&String>,
) -> Result<Vec<Row>> {
    plan.compares
        .iter()
        .map(|c| {
            let mut row = c.row(seed, reports, plan)?;
            if let Some(why) = unavailable {
                row.skipped = Some(why.clone());
            }
            Ok(row)
        })
        .collect()
}

/// The report of `argv`: the one saved at `saved` when `resume` is set and it was made by
/// the same command, else `run`'s, saved there (whole or not at all) before it is used,
/// so an interrupted run loses at most the experiment it was in. A saved file that does
/// not parse is an error naming it, never silently run over.
/// Where the report of a seed's run `i` is saved.
fn saved_path(out: &Path, seed: &Seed, i: usize) -> std::path::PathBuf {
    out.join("reports").join(format!("{}-{i}.json", seed.id))
}

/// The saved report of `argv`, when `resume` and `saved` holds one made by this command
/// (a file made by another command is not: its command runs again).
fn reusable(saved: &Path, argv: &[String], resume: bool) -> Result<Option<Value>> {
    if !(resume && saved.exists()) {
        return Ok(None);
    }
    let text = std::fs::read_to_string(saved)
        .with_context(|| format!("reading the saved report {}", saved.display()))?;
    let mut doc: Value = serde_json::from_str(&text).with_context(|| {
        format!(
            "the saved report {} is not JSON (remove it to rerun its command)",
            saved.display()
        )
    })?;
    let saved_argv: Vec<String> = serde_json::from_value(doc["argv"].take()).unwrap_or_default();
    Ok(
        (same_command(&saved_argv, argv) && doc["report"].is_object())
            .then(|| doc["report"].take()),
    )
}

/// `argv`'s report: the saved one (see [`reusable`]), else `step` is told the command,
/// `run` runs it and its report is saved (atomically) for a later `--resume`.
fn saved_or_run(
    saved: &Path,
    argv: &[String],
    resume: bool,
    step: impl FnOnce(&str),
    run: impl FnOnce(&[String]) -> Result<Value>,
) -> Result<Value> {
    let command = argv.join(" ");
    if let Some(report) = reusable(saved, argv, resume)? {
        experiments::progress(format!("seeds: reusing {} for {command}", saved.display()));
        return Ok(report);
    }
    if resume && saved.exists() {
        experiments::progress(format!(
            "seeds: {} was made by another command: running it again",
            saved.display()
        ));
    }
    step(&command);
    let report = run(argv)?;
    let dir = saved.parent().context("a saved report's folder")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = saved.with_extension("json.tmp");
    let text = serde_json::to_string(&json!({"argv": argv, "report": report}))?;
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, saved).with_context(|| format!("renaming to {}", saved.display()))?;
    Ok(report)
}

/// Whether two plan command lines run the same experiment: equal but for the scratch
/// folder (`--dir`), which holds the experiment's databases and changes nothing it
/// measures (so saved reports can move with their page).
fn same_command(a: &[String], b: &[String]) -> bool {
    let key = |v: &[String]| -> Vec<String> {
        let mut out = v.to_vec();
        for i in 1..out.len() {
            if out[i - 1] == "--dir" {
                out[i].clear();
            }
        }
        out
    };
    key(a) == key(b)
}

/// This process's effective user id (from /proc/self/status; None if unreadable).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Why `plan` cannot run in the thread's set-up here: it puts data on the slow device
/// `device`, which scripts/slow-device.sh can make only as root (`uid` 0). None: it can,
/// or the plan needs no slow device. Its rows are then left unmeasured, each saying why,
/// rather than measured on another device than the one the set-up names.
fn device_unavailable(plan: &plans::Plan, device: &str, uid: Option<u32>) -> Option<String> {
    let needs = device != "local"
        && plan
            .runs
            .iter()
            .any(|a| a.windows(2).any(|w| w[0] == "--device" && w[1] == device));
    (needs && uid != Some(0)).then(|| {
        format!(
            "not run: the {device} device needs root (scripts/slow-device.sh makes a \
             throttled loop device); run as root, or with --device local for the \
             local disk"
        )
    })
}

/// Parses `argv` (`bufpool experiment ...`) and runs it here, returning its JSON.
fn run_experiment(argv: &[String]) -> Result<Value> {
    #[derive(clap::Parser)]
    struct One {
        #[command(subcommand)]
        cmd: Sub,
    }
    #[derive(clap::Subcommand)]
    enum Sub {
        Experiment(experiments::ExperimentCli),
    }
    let one = <One as clap::Parser>::try_parse_from(argv)
        .with_context(|| format!("the plan's command {}", argv.join(" ")))?;
    let Sub::Experiment(cli) = one.cmd;
    Ok(experiments::report_of(cli, argv.to_vec())?.to_json())
}

type Section<'a> = (&'a Seed, plans::Plan, Vec<Value>, Vec<Row>);

/// The JSON of the whole run: per seed, its rows and the commands that made them.
fn document(sections: &[Section], quick: bool, device: &str) -> Value {
    let argv: Vec<String> = std::env::args().collect();
    let meta = experiments::RunInfo::new(&argv).metadata("seeds", &argv);
    let seeds: Vec<Value> = sections
        .iter()
        .map(|(seed, plan, reports, rows)| {
            let devices: Vec<Value> = reports.iter().map(|r| r["device"].clone()).collect();
            json!({
                "id": seed.id, "title": seed.title, "year": seed.year, "shape": seed.shape,
                "commands": plan.runs.iter().map(|a| a.join(" ")).collect::<Vec<_>>(),
                "devices": devices,
                "rows": rows.iter().map(Row::json).collect::<Vec<_>>(),
                "matched": rows.iter().filter(|r| r.shape_matches() == Some(true)).count(),
                "measured": rows.iter().filter(|r| r.our_figure.is_some()).count(),
            })
        })
        .collect();
    json!({
        "quick": quick, "device": device,
        "machine": meta["machine"], "cores": meta["cores"], "profile": meta["profile"],
        "command": meta["command"], "seeds": seeds,
        // The issue names no pass/fail target for this comparison: rows say whether each
        // shape matches; the list is here so every report has the same keys.
        "targets": [],
    })
}

fn fmt(x: f64) -> String {
    if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn verdict(r: &Row) -> String {
    match (r.shape_matches(), &r.skipped) {
        (Some(true), _) => "same shape".into(),
        (Some(false), _) => "differs".into(),
        (None, Some(why)) => format!("not run: {why}"),
        (None, None) => "not run".into(),
    }
}

/// The terminal table: per seed, each row's question, the two ratios and the verdict.
fn table(sections: &[Section]) -> String {
    let mut out = String::new();
    for (seed, _, _, rows) in sections {
        let _ = writeln!(
            out,
            "seed {} ({}, {}): {}",
            seed.id, seed.title, seed.year, seed.shape
        );
        let mut cells = vec![["question", "thread", "ours", "shape"]
            .map(String::from)
            .to_vec()];
        for r in rows {
            cells.push(vec![
                r.question.clone(),
                fmt(r.seed_figure),
                r.our_figure.map_or("-".into(), fmt),
                verdict(r),
            ]);
        }
        out.push_str(&experiments::layout(&cells, 2));
        out.push('\n');
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The keys the page shows first in an object, in this order (our after and before; a
/// figure's table, row and metric before its quote and message; a device's profile
/// first); the rest follow alphabetically.
const KEYS_FIRST: [&str; 11] = [
    "after",
    "before",
    "table",
    "row",
    "metric",
    "quote",
    "from",
    "profile",
    "io",
    "wal",
    "tablespaces",
];

/// A JSON number as the page shows it: whole numbers as they are, others through [`fmt`].
fn number(n: &serde_json::Number) -> String {
    match (n.as_i64(), n.as_u64(), n.as_f64()) {
        (Some(i), _, _) => i.to_string(),
        (_, Some(u), _) => u.to_string(),
        (_, _, Some(x)) => fmt(x),
        _ => esc(&n.to_string()),
    }
}

/// A value of seeds.json as the page shows it, never as JSON: numbers through [`fmt`],
/// text as text, a list as a list, an object as one "key: value" line per key (nested
/// ones indented under their key). An object with a numeric `value` (a thread's figure)
/// opens with it and its `unit` in bold.
fn readable(v: &Value) -> String {
    match v {
        Value::Null => "–".into(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        Value::Number(n) => number(n),
        Value::String(s) => esc(s),
        Value::Array(items) if items.is_empty() => "–".into(),
        Value::Array(items) => {
            let items: String = items
                .iter()
                .map(|x| format!("<li>{}</li>", readable(x)))
                .collect();
            format!("<ul class=list>{items}</ul>")
        }
        Value::Object(m) => {
            let mut h = String::new();
            let headline = m.get("value").filter(|x| x.is_number());
            if let Some(x) = headline {
                let _ = match m.get("unit").and_then(Value::as_str) {
                    Some(unit) if !unit.is_empty() => {
                        write!(h, "<b>{} {}</b>", readable(x), esc(unit))
                    }
                    _ => write!(h, "<b>{}</b>", readable(x)),
                };
            }
            let rank = |k: &str| KEYS_FIRST.iter().position(|f| *f == k);
            let mut keys: Vec<&String> = m
                .keys()
                .filter(|k| headline.is_none() || !matches!(k.as_str(), "value" | "unit"))
                .collect();
            keys.sort_by_key(|k| (rank(k).unwrap_or(KEYS_FIRST.len()), k.as_str()));
            for k in keys {
                let _ = write!(
                    h,
                    "<div class=kv><span class=k>{}:</span> {}</div>",
                    // Long keys (a figure's) may break after an underscore.
                    esc(k).replace('_', "_<wbr>"),
                    readable(&m[k])
                );
            }
            h
        }
    }
}

/// The page's style: the rows' tables scroll sideways in their box if they must, never
/// the page; long commands and device lines wrap in their cells.
const PAGE_STYLE: &str = "<style>body{font:14px system-ui;max-width:72em;margin:2em auto;\
     padding:0 1em;overflow-wrap:break-word}.scroll{overflow-x:auto}\
     table{border-collapse:collapse;width:100%;table-layout:fixed}td,th{border:1px solid #ccc;\
     padding:.3em .5em;vertical-align:top;text-align:left}.q{color:#555;font-size:90%}\
     .ok{color:#060}.no{color:#a00}.kv{margin:.1em 0}.kv .kv,li .kv{margin-left:1.2em}\
     .k{color:#555}ul.list{margin:.1em 0;padding-left:1.2em}</style>";

/// The rows' columns and their share of the page: question, set-up, the thread's figures,
/// ours, shape.
const COLUMNS: &str = "<colgroup><col style=width:17%><col style=width:23%>\
     <col style=width:27%><col style=width:23%><col style=width:10%></colgroup>";

/// The page: one section per seed with the thread's shape, the commands, the rows (the
/// thread's figures with their quotes, ours, the verdict), and the machine. Every value
/// of seeds.json it shows reads as text ([`readable`]), never as JSON.
fn page(sections: &[Section], doc: &Value) -> String {
    let mut h = format!(
        "<!doctype html><meta charset=utf-8><title>bufpool: the seed threads' experiments</title>\
         {PAGE_STYLE}"
    );
    let _ =
        write!(
        h,
        "<h1>The seed threads' experiments, rerun</h1><p>Machine: {} ({} cores), {} build, device \
         profile {}{}. A row compares the change a thread measured (its after over its before) \
         with the same change here; the shape matches when both are lower, about the same \
         (within {:.0}%), or higher.</p>",
        esc(doc["machine"]["cpu"].as_str().unwrap_or("")),
        readable(&doc["cores"]),
        esc(doc["profile"].as_str().unwrap_or("")),
        esc(doc["device"].as_str().unwrap_or("")),
        if doc["quick"].as_bool() == Some(true) { ", quick runs" } else { "" },
        (1.0 - SAME_BAND) * 100.0
    );
    for (seed, plan, reports, rows) in sections {
        let _ = write!(
            h,
            "<h2>Seed {}: {} ({})</h2><p><b>The thread:</b> {}</p><p>Commands:</p><ul>",
            seed.id,
            esc(&seed.title),
            seed.year,
            esc(&seed.shape)
        );
        for (i, argv) in plan.runs.iter().enumerate() {
            let device = reports
                .get(i)
                .map_or_else(|| "not run".to_string(), |r| readable(&r["device"]));
            let _ = write!(
                h,
                "<li><code>{}</code><div class=q>device: {device}</div></li>",
                esc(&argv.join(" "))
            );
        }
        let _ = write!(
            h,
            "</ul><div class=scroll><table>{COLUMNS}<tr><th>question</th><th>set-up</th><th>the thread</th>\
             <th>ours</th><th>shape</th></tr>"
        );
        for r in rows {
            let class = match r.shape_matches() {
                Some(true) => "ok",
                Some(false) => "no",
                None => "",
            };
            let _ = write!(
                h,
                "<tr><td>{}</td><td class=q>{}</td><td>{}<div class=q>{}</div></td><td>{}<div class=q>{}</div></td><td class={class}>{}</td></tr>",
                esc(&r.question),
                esc(&r.setup),
                fmt(r.seed_figure),
                readable(&r.seed_detail),
                r.our_figure.map_or("-".into(), fmt),
                readable(&r.our_detail),
                esc(&verdict(r))
            );
        }
        h.push_str("</table></div>");
    }
    h
}

/// Figures of a seed by key, as `{key: value}` with the message's author and date.
fn cite(seed: &Seed, keys: &[&str]) -> Result<Value> {
    let mut m = BTreeMap::new();
    for k in keys {
        let f = seed.figure(k)?;
        let (from, id) = seed
            .message(&f.message)
            .map(|m| (format!("{} {}", m.author, m.date), m.message_id.clone()))
            .unwrap_or_default();
        m.insert(
            k.to_string(),
            json!({"value": f.value, "unit": f.unit, "table": f.table, "row": f.row,
                   "metric": f.metric, "quote": f.quote, "from": from, "message_id": id}),
        );
    }
    Ok(serde_json::to_value(m)?)
}

/// Where a plan's experiments keep their scratch folders.
fn scratch(out: &Path) -> String {
    out.join("runs").display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded figures parse, every figure names a message of its seed, keys are
    /// unique within a seed, and every plan's comparisons name figures that exist.
    #[test]
    fn the_figures_parse_and_every_plan_names_real_figures() {
        let f = figures().unwrap();
        let ids: Vec<&str> = f.seed.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["000", "001", "002", "003", "004"]);
        for s in &f.seed {
            let mut keys: Vec<&str> = s.figure.iter().map(|f| f.key.as_str()).collect();
            keys.sort_unstable();
            let n = keys.len();
            keys.dedup();
            assert_eq!(keys.len(), n, "seed {}: duplicate figure keys", s.id);
            for fig in &s.figure {
                assert!(s.message(&fig.message).is_some(), "{}: {}", s.id, fig.key);
            }
            for quick in [true, false] {
                let plan = plans::plan(&s.id, quick, "slow10", Path::new("/tmp/x")).unwrap();
                assert!(!plan.compares.is_empty(), "seed {}", s.id);
                for c in &plan.compares {
                    for k in c.seed_keys() {
                        s.figure(k).unwrap();
                    }
                }
            }
        }
    }

    /// Without root the seeds whose threads measured a disk are not run on another
    /// device: they say why. Seeds 002 and 003 need no slow device; `--device local`
    /// needs no root.
    #[test]
    fn slow_device_seeds_without_root_say_why_instead_of_running() {
        let plan =
            |id: &str, device: &str| plans::plan(id, true, device, Path::new("/tmp/x")).unwrap();
        for id in ["000", "001", "004"] {
            let why = device_unavailable(&plan(id, "slow10"), "slow10", Some(1000)).unwrap();
            assert!(
                why.contains("slow10") && why.contains("root"),
                "{id}: {why}"
            );
            assert_eq!(
                device_unavailable(&plan(id, "slow10"), "slow10", Some(0)),
                None
            );
            assert_eq!(
                device_unavailable(&plan(id, "local"), "local", Some(1000)),
                None
            );
        }
        for id in ["002", "003"] {
            assert_eq!(
                device_unavailable(&plan(id, "slow10"), "slow10", None),
                None,
                "{id}"
            );
        }
        assert!(effective_uid().is_some());
    }

    /// A run's reports are saved as they come; with `resume` a saved report of the same
    /// command is used instead of running it again, one of another command is not, and
    /// a damaged one is an error naming the file.
    #[test]
    fn saved_reports_are_reused_only_for_the_same_command() {
        let dir = tempfile::tempdir().unwrap();
        let saved = dir.path().join("reports").join("002-0.json");
        let argv = |x: &str| vec!["bufpool".to_string(), "experiment".into(), x.into()];
        let mut runs = 0;
        let mut run = |a: &[String]| {
            runs += 1;
            Ok(json!({"ran": a[2], "n": runs}))
        };
        // Each command run is one step; a reused report is none.
        let steps = std::cell::Cell::new(0);
        let step = |_: &str| steps.set(steps.get() + 1);
        assert_eq!(
            saved_or_run(&saved, &argv("slru"), true, step, &mut run).unwrap()["n"],
            1
        );
        assert_eq!(
            saved_or_run(&saved, &argv("slru"), true, step, &mut run).unwrap()["n"],
            1,
            "resumed: the saved report, nothing run"
        );
        assert_eq!(
            saved_or_run(&saved, &argv("slru"), false, step, &mut run).unwrap()["n"],
            2,
            "not resuming: run again"
        );
        // Another scratch folder is the same command: the saved report is used.
        let moved = |x: &str| {
            let mut a = argv(x);
            a.extend(["--dir".to_string(), "/elsewhere".to_string()]);
            a
        };
        let first = saved_or_run(&saved, &moved("slru"), false, step, &mut run).unwrap();
        assert_eq!(first["n"], 3);
        let mut back = argv("slru");
        back.extend(["--dir".to_string(), "/moved/runs".to_string()]);
        assert_eq!(
            saved_or_run(&saved, &back, true, step, &mut run).unwrap()["n"],
            3
        );
        let other = saved_or_run(&saved, &argv("scans"), true, step, &mut run).unwrap();
        assert_eq!(
            (other["ran"].as_str(), other["n"].as_i64()),
            (Some("scans"), Some(4))
        );
        std::fs::write(&saved, "{\"argv\": [").unwrap();
        let err = saved_or_run(&saved, &argv("scans"), true, step, &mut run).unwrap_err();
        assert!(format!("{err:#}").contains("002-0.json"), "{err:#}");
        assert_eq!(runs, 4);
        assert_eq!(
            steps.get(),
            4,
            "a step per command run, none per reused report"
        );
    }

    /// An experiment's report as the experiments write it: the device as run (what
    /// `Runner::metadata` records), its command, and its tables.
    fn report(tables: &[(&str, Value)]) -> Value {
        let mut r = json!({
            "command": "bufpool experiment --json --dir /tmp/bufpool-seeds/runs ...",
            "device": {"profile": "scripts/slow-device.sh profile hdd-2007 (state=up \
                                   read_iops=100 write_iops=100)",
                       "io": "O_DIRECT", "wal": "shared", "tablespaces": "shared"},
        });
        for (key, rows) in tables {
            r[*key] = rows.clone();
        }
        r
    }

    /// Each seed's reports, with the figures its plan reads (seed 001's slow device needs
    /// root: it has none).
    fn reports_of(id: &str) -> Vec<Value> {
        let mut rows = Vec::new();
        match id {
            "000" => {
                for (i, w) in ["bursty", "max-c1", "max-c2", "max-c4", "max-c8"]
                    .iter()
                    .enumerate()
                {
                    for (c, f) in [("seed000-bg2", 1.0), ("off", 1.25)] {
                        let x = f * (1000.0 + 37.5 * i as f64);
                        rows.push(json!({"config": c, "workload": w, "tps": x,
                                         "latency_max_ms": x / 7.0}));
                    }
                }
                vec![report(&[("runs", Value::Array(rows))])]
            }
            "002" => {
                for (d, tps) in [
                    ("banks_locks_lru", 1858.21),
                    ("banks", 1411.5),
                    ("central", 1200.0),
                ] {
                    rows.push(json!({"design": d, "clients": 32, "tps": {"median": tps}}));
                    rows.push(json!({"design": d, "clients": 1, "tps": {"median": tps / 9.0}}));
                }
                let rows = Value::Array(rows);
                vec![report(&[("exp1", rows.clone()), ("exp2", rows)])]
            }
            "003" => {
                for k in [
                    Value::Null,
                    json!(1),
                    json!(16),
                    json!(32),
                    json!(256),
                    json!(1024),
                ] {
                    let s = 0.36177166 * (1.0 + k.as_f64().unwrap_or(100.0).ln());
                    rows.push(json!({"ring_buffers": k, "seconds_one_block": {"median": s}}));
                }
                vec![report(&[("ring_sweep", Value::Array(rows))])]
            }
            "004" => {
                for (c, throttled, tps) in [
                    ("i", false, 812.4),
                    ("j", false, 903.9),
                    ("i", true, 480.0),
                    ("j", true, 510.0),
                ] {
                    rows.push(
                        json!({"config": c, "throttled": throttled, "checkpoints": 3,
                                     "tps": tps, "tps_p10": tps * 0.8}),
                    );
                }
                vec![report(&[("runs", Value::Array(rows))])]
            }
            _ => Vec::new(),
        }
    }

    /// The text of every `<td>` and `<li>` of `html`.
    fn cells(html: &str) -> Vec<&str> {
        let mut out = Vec::new();
        for (open, close) in [("<td", "</td>"), ("<li>", "</li>")] {
            for part in html.split(open).skip(1) {
                out.push(&part[..part.find(close).expect("an unclosed cell")]);
            }
        }
        out
    }

    /// The page of a run of every seed (rows measured, one seed without its device, rows
    /// whose figure is missing) shows each value of seeds.json as text, never as JSON, and
    /// every figure is still on it: the thread's with its quote and message, ours with
    /// the command that measured it.
    #[test]
    fn the_page_shows_values_as_text_never_json() {
        let figs = figures().unwrap();
        let sections: Vec<Section> = figs
            .seed
            .iter()
            .map(|seed| {
                let plan = plans::plan(&seed.id, false, "hdd-2007", Path::new("/tmp/s")).unwrap();
                let reports = reports_of(&seed.id);
                let why = device_unavailable(&plan, "hdd-2007", Some(1000))
                    .filter(|_| reports.is_empty());
                let rows = rows(seed, &plan, &reports, why.as_ref()).unwrap();
                (seed, plan, reports, rows)
            })
            .collect();
        let doc = document(&sections, false, "hdd-2007");
        // seeds.json keeps its shape: details are objects there.
        assert!(doc["seeds"][0]["rows"][0]["seed_detail"].is_object());
        assert!(doc["seeds"][0]["rows"][0]["our_detail"].is_object());
        let html = page(&sections, &doc);
        let all = cells(&html);
        assert!(all.len() > 5 * 20, "{} cells", all.len());
        for cell in &all {
            for json in ["{\"", "\":", "{&quot;", "&quot;:"] {
                assert!(!cell.contains(json), "JSON ({json}) in a cell: {cell}");
            }
        }
        let body = &html[html.find("</style>").unwrap()..];
        assert!(!body.contains("&quot;:") && !body.contains("\":"), "{body}");
        let (mut measured, mut skipped) = (0, 0);
        for (seed, _, _, rows) in &sections {
            for r in rows {
                let question = esc(&r.question);
                let row = html
                    .split("<tr>")
                    .find(|tr| tr.contains(&format!("<td>{question}</td>")))
                    .unwrap_or_else(|| panic!("no row for {question}"));
                let mut shown = vec![fmt(r.seed_figure)];
                for (key, f) in r.seed_detail.as_object().unwrap() {
                    let fig = seed.figure(key).unwrap();
                    assert_eq!(f["value"], fig.value);
                    let key = key.replace('_', "_<wbr>");
                    shown.push(format!(
                        "{key}:</span> <b>{} {}</b>",
                        fmt(fig.value),
                        fig.unit
                    ));
                    shown.push(format!("quote:</span> {}", esc(&fig.quote)));
                    shown.push(format!("row:</span> {}", esc(&fig.row)));
                }
                match (r.our_figure, &r.skipped) {
                    (Some(ours), _) => {
                        measured += 1;
                        shown.push(fmt(ours));
                        for side in ["after", "before"] {
                            let x = r.our_detail[side].as_f64().unwrap();
                            shown.push(format!("{side}:</span> {}", fmt(x)));
                        }
                        shown.push("source:</span> bufpool experiment --json".into());
                    }
                    (None, why) => {
                        skipped += 1;
                        shown.push(esc(why.as_deref().expect("a reason")));
                    }
                }
                for s in shown {
                    assert!(row.contains(&s), "{question}: no {s} in {row}");
                }
            }
        }
        assert!(
            measured >= 10 && skipped >= 5,
            "{measured} measured, {skipped} skipped"
        );
        assert!(html.contains("device: <div class=kv><span class=k>profile:</span> scripts/"));
        assert!(
            html.contains("device: not run"),
            "seed 001's commands are listed"
        );
    }

    #[test]
    fn shapes_compare_by_direction_with_a_band_around_one() {
        assert_eq!(Shape::of(0.05), Shape::Lower);
        assert_eq!(Shape::of(0.95), Shape::Same);
        assert_eq!(Shape::of(1.05), Shape::Same);
        assert_eq!(Shape::of(1.2), Shape::Higher);
        let row = |seed: f64, ours: Option<f64>| Row {
            seed: "001".into(),
            question: String::new(),
            setup: String::new(),
            seed_figure: seed,
            seed_detail: Value::Null,
            our_figure: ours,
            our_detail: Value::Null,
            skipped: None,
        };
        assert_eq!(row(0.057, Some(0.3)).shape_matches(), Some(true));
        assert_eq!(row(0.057, Some(0.95)).shape_matches(), Some(false));
        assert_eq!(row(1.036, Some(1.5)).shape_matches(), Some(false));
        assert_eq!(row(1.036, None).shape_matches(), None);
    }
}
