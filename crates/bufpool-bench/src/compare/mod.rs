//! `bufpool compare`: the same workload (TPC-B, a YCSB core workload, or TPC-C) on
//! bufpool, PostgreSQL and SQLite, one engine at a time, at the same size, clients,
//! duration, pool size and durability, and one table, one JSON object and one report out
//! of it.
//!
//! Each engine's load and run are child processes ([`process::run_measured`]), so each
//! one's CPU time, bytes written and peak memory are its own: bufpool's `init` and
//! `bench`; SQLite's `sqlite-tpcb load` and `run` ([`sqlite`], [`sqlite_ycsb`],
//! [`sqlite_tpcc`]); PostgreSQL's `scripts/postgres-peer.sh` ([`postgres`]), which
//! measures the server's processes itself. Engines run in turn within a round, rounds
//! repeat the turn (`--rounds`), and the raw fdatasync rate of the data directory's
//! device is measured before and after, so drift shows and hits every engine alike.
//! Before the rounds, as many busy threads as clients measure the scheduler's own floor
//! under the per-second maximum latency ([`crate::experiments::floor`]).
//!
//! Fairness, stated in the table: bufpool and SQLite are embedded (a transaction is a
//! function call); PostgreSQL is client/server (each statement a round trip through a
//! unix socket, pgbench's CPU counted with the server's). Bytes written include each
//! engine's flush of what the run left dirty: bufpool's shutdown checkpoint, SQLite's
//! checkpoint at close, a CHECKPOINT after pgbench.

pub mod cli;
pub mod pg_log;
pub mod postgres;
pub mod process;
pub mod sqlite;
pub mod sqlite_tpcc;
pub mod sqlite_ycsb;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;

use anyhow::{Context, Result};
use serde_json::json;

use crate::experiments::{summarize, Goal, Ratio};
use crate::knobs::KnobError;
use crate::report::model::{RunResult, Second};

/// The engines `bufpool compare` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum EngineKind {
    Bufpool,
    #[value(alias = "postgresql", alias = "pg")]
    Postgres,
    Sqlite,
}

impl EngineKind {
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Bufpool => "bufpool",
            EngineKind::Postgres => "postgresql",
            EngineKind::Sqlite => "sqlite",
        }
    }

    fn kind(self) -> &'static str {
        match self {
            EngineKind::Postgres => "client/server",
            _ => "embedded",
        }
    }
}

/// One column of the table: an engine and, for PostgreSQL, its major version (each
/// version a column of its own: `postgresql-15`, `postgresql-18`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entrant {
    pub kind: EngineKind,
    pub pg_major: Option<String>,
}

impl Entrant {
    fn of(kind: EngineKind) -> Entrant {
        Entrant {
            kind,
            pg_major: None,
        }
    }

    fn postgres(major: &str) -> Entrant {
        Entrant {
            kind: EngineKind::Postgres,
            pg_major: Some(major.to_string()),
        }
    }

    /// The column's name: the engine's, with PostgreSQL's major version.
    pub fn name(&self) -> String {
        match &self.pg_major {
            Some(v) => format!("{}-{v}", self.kind.name()),
            None => self.kind.name().to_string(),
        }
    }
}

/// pgbench's query mode for the PostgreSQL run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PgMode {
    Prepared,
    Simple,
}

/// What `bufpool compare` was asked to do.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    pub engines: Vec<EngineKind>,
    /// TPC-B, or one of YCSB's core workloads.
    pub workload: cli::Workload,
    pub scale: u32,
    /// YCSB's records.
    pub records: u64,
    /// TPC-C's warehouses.
    pub warehouses: u32,
    pub clients: u32,
    pub jobs: u32,
    pub time_s: u64,
    pub sync: bool,
    /// bufpool's shared_buffers, PostgreSQL's shared_buffers, SQLite's cache_size.
    pub pool: String,
    pub checkpoint_timeout: String,
    pub rounds: u32,
    pub pg_mode: PgMode,
    /// PostgreSQL's major versions, a column each; empty: the installed one (else
    /// Debian's) and 18 where it can be had.
    pub postgres_versions: Vec<String>,
    /// Where the databases go (a fresh subfolder per engine and round, removed after).
    pub work_dir: PathBuf,
    /// Where the report, the JSON and the logs go.
    pub out_dir: PathBuf,
    pub json: bool,
    pub command: Vec<String>,
    /// Seconds between each engine's progress lines (pgbench's `-P`), shown as they come
    /// and kept in the engine's `*.stderr.log`.
    pub progress_s: u32,
    /// `--rate`: throttle every engine (a fixed rate for every round, or one more round
    /// at the slowest engine's rate).
    pub rate: Option<cli::Rate>,
}

/// One engine's run in one round and what it cost.
#[derive(Debug, Clone)]
pub struct EngineRun {
    pub engine: EngineKind,
    /// The column's name ([`Entrant::name`]).
    pub name: String,
    pub round: u32,
    pub version: String,
    pub load_s: f64,
    pub cpu_s: f64,
    /// What the data directory's device wrote during the run (after a syncfs), if known.
    pub device_write_bytes: Option<u64>,
    /// `write_bytes` of /proc (whole page-cache folios dirtied; see `process`).
    pub proc_write_bytes: u64,
    /// Bytes passed to write(2), where known.
    pub wchar: Option<u64>,
    pub peak_bytes: u64,
    pub backend_write_share: Option<f64>,
    pub result: RunResult,
    /// Engine-specific figures (SQLite's busy waits, PostgreSQL's counters).
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl EngineRun {
    /// A run of an embedded engine measured as a child process (`run`), loaded in `load`.
    fn measured(
        engine: EngineKind,
        version: String,
        load: &process::Usage,
        run: &process::Usage,
        result: RunResult,
        extra: BTreeMap<String, serde_json::Value>,
    ) -> EngineRun {
        EngineRun {
            engine,
            name: engine.name().to_string(),
            round: 0,
            version,
            load_s: load.wall_s,
            cpu_s: run.cpu_s,
            device_write_bytes: run.device_write_bytes,
            proc_write_bytes: run.write_bytes,
            wchar: Some(run.wchar),
            peak_bytes: run.max_rss_bytes,
            backend_write_share: result.backend_write_share(),
            result,
            extra,
        }
    }

    fn per_tx(&self, v: f64) -> f64 {
        v / self.result.transactions.max(1) as f64
    }

    /// The median over the run's seconds of each second's largest latency, ms.
    fn max_latency_p50(&self) -> f64 {
        self.per_second_p50(|s| s.lat_max_ms)
    }

    /// The (lower) median over the run's seconds of `f` of each second (0 for none).
    fn per_second_p50(&self, f: fn(&Second) -> f64) -> f64 {
        let mut v: Vec<f64> = self.result.series.iter().map(f).collect();
        if v.is_empty() {
            return 0.0;
        }
        v.sort_by(f64::total_cmp);
        v[(v.len() - 1) / 2]
    }

    /// Every figure of the table and the JSON, by name. SQLite keeps no buffer or
    /// checkpoint counters: those figures are NaN for it.
    fn figures(&self) -> BTreeMap<&'static str, f64> {
        let r = &self.result;
        let counted = |v: f64| {
            if self.engine == EngineKind::Sqlite {
                f64::NAN
            } else {
                v
            }
        };
        BTreeMap::from([
            ("hits_per_tx", counted(self.per_tx(r.buffers.hits as f64))),
            ("reads_per_tx", counted(self.per_tx(r.buffers.reads as f64))),
            ("checkpoints", counted(r.checkpoints.len() as f64)),
            ("tps", r.tps),
            ("lat_avg", r.latency_ms.avg),
            ("lat_p50", r.latency_ms.p50),
            ("lat_p99", r.latency_ms.p99),
            ("lat_max", r.latency_ms.max),
            ("tps_p5", r.per_interval.tps_p5),
            ("tps_p50", r.per_interval.tps_p50),
            ("max_latency_p50", self.max_latency_p50()),
            // Split of it for throttled runs: how late the slowest start was, and the
            // longest a transaction took once started.
            ("max_lag_p50", self.per_second_p50(|s| s.lag_max_ms)),
            ("max_exec_p50", self.per_second_p50(|s| s.exec_max_ms)),
            ("max_latency_p99", r.per_interval.max_latency_p99),
            ("cpu_us_per_tx", self.per_tx(self.cpu_s * 1e6)),
            (
                "write_bytes_per_tx",
                self.per_tx(self.device_write_bytes.unwrap_or(self.proc_write_bytes) as f64),
            ),
            (
                "proc_write_bytes_per_tx",
                self.per_tx(self.proc_write_bytes as f64),
            ),
            (
                "wchar_per_tx",
                self.wchar.map_or(f64::NAN, |w| self.per_tx(w as f64)),
            ),
            ("peak_rss_bytes", self.peak_bytes as f64),
            ("load_s", self.load_s),
            (
                "backend_write_share",
                self.backend_write_share.unwrap_or(f64::NAN),
            ),
        ])
    }
}

/// One engine over all rounds: the median of each figure.
struct EngineSummary {
    engine: EngineKind,
    name: String,
    version: String,
    figures: BTreeMap<&'static str, f64>,
    tps_rounds: Vec<f64>,
    transactions: u64,
    failed: u64,
    extra: BTreeMap<String, serde_json::Value>,
    /// "device" (its sector count) or "proc" (/proc write_bytes, where the device's
    /// count was not available).
    write_source: &'static str,
}

fn summarize_engine(runs: &[&EngineRun]) -> EngineSummary {
    let first = runs[0];
    let names: Vec<&'static str> = first.figures().keys().copied().collect();
    let per_run: Vec<BTreeMap<&'static str, f64>> = runs.iter().map(|r| r.figures()).collect();
    let figures = names
        .into_iter()
        .map(|n| {
            let v: Vec<f64> = per_run
                .iter()
                .map(|f| f[n])
                .filter(|v| !v.is_nan())
                .collect();
            (
                n,
                if v.is_empty() {
                    f64::NAN
                } else {
                    summarize(&v).median
                },
            )
        })
        .collect();
    EngineSummary {
        engine: first.engine,
        name: first.name.clone(),
        version: first.version.clone(),
        figures,
        tps_rounds: runs.iter().map(|r| r.result.tps).collect(),
        transactions: runs.iter().map(|r| r.result.transactions).sum(),
        failed: runs.iter().map(|r| r.result.failed).sum(),
        extra: runs.last().map(|r| r.extra.clone()).unwrap_or_default(),
        write_source: if runs.iter().all(|r| r.device_write_bytes.is_some()) {
            "device"
        } else {
            "proc"
        },
    }
}

fn sets(o: &CompareOptions) -> Vec<String> {
    [
        format!("shared_buffers={}", o.pool),
        format!("checkpoint_timeout={}", o.checkpoint_timeout),
        format!("synchronous_commit={}", if o.sync { "on" } else { "off" }),
    ]
    .into_iter()
    .flat_map(|s| ["--set".to_string(), s])
    .collect()
}

fn note(msg: impl AsRef<str>) {
    eprintln!("compare: {}", msg.as_ref());
}

fn exe() -> Result<PathBuf> {
    std::env::current_exe().context("finding this program's path to run its engines")
}

fn fresh_dir(p: &Path) -> Result<()> {
    if p.exists() {
        std::fs::remove_dir_all(p).with_context(|| format!("removing {}", p.display()))?;
    }
    std::fs::create_dir_all(p).with_context(|| format!("creating {}", p.display()))
}

fn run_bufpool(
    o: &CompareOptions,
    data: &Path,
    logs: &Path,
    rate: Option<f64>,
) -> Result<EngineRun> {
    let exe = exe()?;
    let size = load_size(o);
    note(format!("bufpool: init {} (loading)", size.join(" ")));
    let load = process::run_measured(
        Command::new(&exe)
            .arg("init")
            .args(&size)
            .arg("-D")
            .arg(data)
            .args(sets(o)),
        "bufpool",
        &logs.join("init.out"),
        data,
    )?;
    note(format!(
        "bufpool: bench -c {} -j {} -T {}",
        o.clients, o.jobs, o.time_s
    ));
    let run_json = logs.join("run.json");
    let tpcc = o.workload == cli::Workload::Tpcc;
    let run = process::run_measured(
        Command::new(&exe)
            .arg("bench")
            .args(["-c", &o.clients.to_string()])
            .args(["-j", &o.jobs.to_string()])
            .args(["-T", &o.time_s.to_string()])
            .args(
                (o.workload != cli::Workload::Tpcb)
                    .then_some(["-b", o.workload.name()])
                    .into_iter()
                    .flatten(),
            )
            // TPC-C's counts are in the summary's JSON only.
            .args(tpcc.then_some("--json"))
            .args(rate_flag(rate))
            .args([
                "-P",
                &o.progress_s.to_string(),
                "--label",
                "bufpool",
                "--out",
            ])
            .arg(&run_json)
            .arg("-D")
            .arg(data)
            .args(sets(o)),
        "bufpool",
        &logs.join("bench.out"),
        data,
    )?;
    let result = crate::report::load_run(&run_json)?;
    let mut extra = BTreeMap::new();
    if tpcc {
        extra.insert("tpcc".into(), bench_tpcc(&logs.join("bench.out"))?);
    }
    Ok(EngineRun::measured(
        EngineKind::Bufpool,
        format!("bufpool {}", env!("CARGO_PKG_VERSION")),
        &load,
        &run,
        result,
        extra,
    ))
}

/// The `tpcc` object of the summary `bench --json` printed into `path`.
fn bench_tpcc(path: &Path) -> Result<serde_json::Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let summary: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    summary
        .get("tpcc")
        .cloned()
        .with_context(|| format!("{}: no tpcc object in the summary", path.display()))
}

/// `init`'s size flags for the workload: `-s SCALE`, `--workload ycsb --records N`, or
/// `--workload tpcc -w W`.
fn load_size(o: &CompareOptions) -> Vec<String> {
    let (workload, flag, size) = match o.workload {
        cli::Workload::Tpcb => return vec!["-s".into(), o.scale.to_string()],
        cli::Workload::Ycsb(_) => ("ycsb", "--records", o.records.to_string()),
        cli::Workload::Tpcc => ("tpcc", "-w", o.warehouses.to_string()),
    };
    vec!["--workload".into(), workload.into(), flag.into(), size]
}

fn run_sqlite(
    o: &CompareOptions,
    data: &Path,
    logs: &Path,
    rate: Option<f64>,
) -> Result<EngineRun> {
    let exe = exe()?;
    note(format!("sqlite: load {}", o.workload.name()));
    let load = process::run_measured(
        Command::new(&exe)
            .args(["sqlite-tpcb", "load", "--workload", o.workload.name()])
            .args(["--scale", &o.scale.to_string()])
            .args(["--records", &o.records.to_string()])
            .args(["--warehouses", &o.warehouses.to_string()])
            .arg("--dir")
            .arg(data),
        "sqlite",
        &logs.join("load.out"),
        data,
    )?;
    note(format!(
        "sqlite: run -c {} -T {} (synchronous={})",
        o.clients,
        o.time_s,
        if o.sync { "FULL" } else { "NORMAL" }
    ));
    let out = logs.join("run.json");
    let run = process::run_measured(
        Command::new(&exe)
            .args(["sqlite-tpcb", "run", "--workload", o.workload.name()])
            .args(["--clients", &o.clients.to_string()])
            .args(["--jobs", &o.jobs.to_string()])
            .args(["--time", &o.time_s.to_string()])
            .args(["--sync", if o.sync { "on" } else { "off" }])
            .args(["--cache-size", &o.pool])
            .args(rate_flag(rate))
            .args(["-P", &o.progress_s.to_string()])
            .arg("--log-prefix")
            .arg(logs.join("sqlite_log"))
            .arg("--out")
            .arg(&out)
            .arg("--dir")
            .arg(data),
        "sqlite",
        &logs.join("run.out"),
        data,
    )?;
    let text =
        std::fs::read_to_string(&out).with_context(|| format!("reading {}", out.display()))?;
    let s: sqlite::SqliteRun =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", out.display()))?;
    let mut extra = BTreeMap::new();
    extra.insert("busy_waits".into(), json!(s.busy_waits));
    extra.insert("busy_wait_s".into(), json!(s.busy_wait_s));
    match o.workload {
        cli::Workload::Ycsb(_) => {
            let rows =
                sqlite_ycsb::check(data).context("checking the SQLite usertable after its run")?;
            extra.insert("usertable_rows_checked".into(), json!(rows));
        }
        cli::Workload::Tpcc => {
            let checked = sqlite_tpcc::check(data)
                .context("checking the SQLite TPC-C database after its run")?;
            extra.insert("tpcc_checked".into(), json!(checked));
            // The run's own counts, beside the common figures in the same file.
            let v: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", out.display()))?;
            extra.insert("tpcc".into(), v["tpcc"].clone());
        }
        cli::Workload::Tpcb => {
            let (rows, _) =
                sqlite::check(data).context("checking the SQLite database after its run")?;
            extra.insert("history_rows_checked".into(), json!(rows));
        }
    }
    extra.insert("settings".into(), json!(s.result.config));
    // SQLite has no buffer-write counters: its share stays None.
    Ok(EngineRun::measured(
        EngineKind::Sqlite,
        s.version,
        &load,
        &run,
        s.result,
        extra,
    ))
}

fn pg_options(o: &CompareOptions, major: Option<&str>) -> postgres::PgOptions {
    postgres::PgOptions {
        scale: o.scale,
        clients: o.clients,
        jobs: o.jobs,
        time_s: o.time_s,
        shared_buffers: o.pool.clone(),
        checkpoint_timeout: o.checkpoint_timeout.clone(),
        sync: o.sync,
        mode: match o.pg_mode {
            PgMode::Prepared => "prepared".into(),
            PgMode::Simple => "simple".into(),
        },
        version: major.map(str::to_string),
        progress_s: o.progress_s,
        rate: None,
        workload: match o.workload {
            cli::Workload::Tpcb => postgres::PgWorkload::Tpcb,
            cli::Workload::Tpcc => postgres::PgWorkload::Tpcc {
                warehouses: o.warehouses,
            },
            cli::Workload::Ycsb(core) => postgres::PgWorkload::Ycsb {
                core,
                records: o.records,
            },
        },
    }
}

fn run_postgres(
    o: &CompareOptions,
    who: &Entrant,
    logs: &Path,
    rate: Option<f64>,
) -> Result<EngineRun> {
    let p = postgres::PgOptions {
        rate,
        ..pg_options(o, who.pg_major.as_deref())
    };
    let load = match p.workload {
        postgres::PgWorkload::Tpcc { warehouses } => {
            format!("TPC-C's load of {warehouses} warehouse(s)")
        }
        postgres::PgWorkload::Ycsb { records, .. } => format!("YCSB's load of {records} records"),
        postgres::PgWorkload::Tpcb => format!("pgbench -i -s {}", o.scale),
    };
    note(format!(
        "{}: postgres-peer.sh (initdb, {load}, pgbench -c {} -j {} -T {} -M {})",
        who.name(),
        o.clients,
        o.jobs,
        o.time_s,
        p.mode
    ));
    // The script reports its own figures; its rusage (pgbench, psql) is not needed.
    process::run_measured(
        &mut postgres::command(&p, logs),
        &who.name(),
        &logs.join("peer.out"),
        logs,
    )?;
    let r = postgres::read_run(logs, &p, &who.name())?;
    let mut extra: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    extra.insert("stats".into(), json!(r.stats));
    extra.insert("settings".into(), json!(r.settings));
    Ok(EngineRun {
        engine: EngineKind::Postgres,
        name: who.name(),
        round: 0,
        version: r.version,
        load_s: r.load_s,
        cpu_s: r.cpu_s,
        device_write_bytes: r.device_write_bytes,
        proc_write_bytes: r.write_bytes,
        wchar: r.wchar,
        peak_bytes: r.peak_bytes,
        backend_write_share: r.backend_write_share,
        result: r.result,
        extra,
    })
}

/// `compare`'s flags, each a knob error naming it: an engine at least, rounds, scale,
/// clients and jobs at least 1 (clients a multiple of jobs), warehouses in TPC-C's range,
/// the pool and checkpoint_timeout as bufpool takes them, PostgreSQL's versions.
fn check_knobs(o: &CompareOptions) -> Result<()> {
    if o.engines.is_empty() {
        return Err(
            KnobError("--engines: name at least one of bufpool, postgres, sqlite".into()).into(),
        );
    }
    if o.rounds == 0
        || o.clients == 0
        || o.jobs == 0
        || !o.clients.is_multiple_of(o.jobs)
        || o.scale == 0
    {
        return Err(KnobError(format!(
            "invalid --rounds {} / -s {} / -c {} / -j {}: each at least 1, clients a multiple of jobs",
            o.rounds, o.scale, o.clients, o.jobs
        ))
        .into());
    }
    let max_warehouses = crate::tpcc::load::MAX_WAREHOUSES;
    if !(1..=max_warehouses).contains(&o.warehouses) {
        return Err(KnobError(format!(
            "--warehouses {}: allowed 1 to {max_warehouses}",
            o.warehouses
        ))
        .into());
    }
    for (knob, v) in [
        ("shared_buffers", &o.pool),
        ("checkpoint_timeout", &o.checkpoint_timeout),
    ] {
        bufpool::Config::default().set(knob, v).map_err(|e| {
            KnobError(format!(
                "--{}: {e}",
                if knob == "shared_buffers" {
                    "pool"
                } else {
                    "checkpoint-timeout"
                }
            ))
        })?;
    }
    check_postgres_versions(o)
}

/// `--postgres-version`'s list: each a major version; a list only with PostgreSQL among
/// the engines.
fn check_postgres_versions(o: &CompareOptions) -> Result<()> {
    if let Some(v) = o
        .postgres_versions
        .iter()
        .find(|v| v.is_empty() || v.starts_with('0') || !v.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(KnobError(format!(
            "--postgres-version: '{v}' is not a major version such as 15 or 18"
        ))
        .into());
    }
    if !o.postgres_versions.is_empty() && !o.engines.contains(&EngineKind::Postgres) {
        return Err(KnobError(
            "--postgres-version: PostgreSQL is not among --engines (add postgres)".into(),
        )
        .into());
    }
    Ok(())
}

/// The table's columns in run order, PostgreSQL's versions in place of `postgres`, and
/// those that cannot run here with the reason. PostgreSQL's versions are each probed
/// (found or installed by its script): those of `--postgres-version`, else the installed
/// one (or Debian's) and 18 when it can be had.
fn entrants(o: &CompareOptions) -> (Vec<Entrant>, Vec<(String, String)>) {
    let mut skipped: Vec<(String, String)> = Vec::new();
    let mut pg: Vec<Entrant> = Vec::new();
    let mut engines = o.engines.clone();
    engines.dedup();
    if engines.contains(&EngineKind::Postgres) {
        if o.postgres_versions.is_empty() {
            probe_postgres(None, &mut pg, &mut skipped);
            if !pg.iter().any(|e| e.pg_major.as_deref() == Some("18")) {
                probe_postgres(Some("18"), &mut pg, &mut skipped);
            }
        } else {
            for v in &o.postgres_versions {
                probe_postgres(Some(v), &mut pg, &mut skipped);
            }
        }
    }
    let mut out = Vec::new();
    for e in engines {
        match e {
            EngineKind::Postgres => out.append(&mut pg),
            _ => out.push(Entrant::of(e)),
        }
    }
    (out, skipped)
}

/// Finds PostgreSQL `want` (a major version; None: the installed one or Debian's) and
/// adds its column to `pg`, once per major version, or its reason to `skipped`.
fn probe_postgres(want: Option<&str>, pg: &mut Vec<Entrant>, skipped: &mut Vec<(String, String)>) {
    let name = want.map_or("postgresql".to_string(), |v| format!("postgresql-{v}"));
    if want.is_some_and(|v| pg.iter().any(|e| e.pg_major.as_deref() == Some(v))) {
        return;
    }
    match postgres::probe(want) {
        Ok(v) => {
            note(format!("{name}: found {v}"));
            let major = want.map_or_else(|| major_of(&v), str::to_string);
            if !pg.iter().any(|e| e.pg_major.as_deref() == Some(&*major)) {
                pg.push(Entrant::postgres(&major));
            }
        }
        Err(reason) => {
            note(format!("{name}: skipped: {reason}"));
            skipped.push((name, reason));
        }
    }
}

/// "PostgreSQL 15.18" -> "15".
fn major_of(version: &str) -> String {
    let v = version.rsplit(' ').next().unwrap_or(version);
    v.split('.').next().unwrap_or(v).to_string()
}

/// `bufpool compare`.
pub fn compare(o: &CompareOptions) -> Result<()> {
    check_knobs(o)?;
    let (engines, skipped) = entrants(o);
    let stop = crate::ctrl_c::install_ctrl_c();
    std::fs::create_dir_all(&o.work_dir)
        .with_context(|| format!("creating {}", o.work_dir.display()))?;
    std::fs::create_dir_all(&o.out_dir)
        .with_context(|| format!("creating {}", o.out_dir.display()))?;
    note(format!(
        "raw fdatasync rate of {} (before)",
        o.work_dir.display()
    ));
    let sync_before = crate::experiments::fdatasync::raw_fdatasync_per_s(
        &o.work_dir,
        std::time::Duration::from_secs(1),
    )?;
    note(format!("the scheduler's floor: {} busy threads", o.clients));
    let runqueue_ms = crate::experiments::floor::runqueue_per_second_max(
        o.clients as usize,
        std::time::Duration::from_secs(3),
    );
    let mut runs: Vec<EngineRun> = Vec::new();
    let fixed = match o.rate {
        Some(cli::Rate::Fixed(r)) => Some(r),
        _ => None,
    };
    let mut wakeup = fixed.map(|r| wakeup_floor(o, r));
    let mut stopped = false;
    'rounds: for round in 1..=o.rounds {
        for who in &engines {
            if stop.load(Ordering::SeqCst) {
                stopped = true;
                break 'rounds;
            }
            runs.push(run_one(o, who, (round, o.rounds), fixed)?);
        }
    }
    if o.rate == Some(cli::Rate::Auto) && !stopped {
        if let Some(slowest) = slowest_rate(&runs) {
            let rate = (AUTO_RATE_SHARE * slowest).max(1.0);
            note(format!(
                "one more round with every engine at {rate:.0} tps ({:.0}% of the slowest one's {slowest:.0})",
                AUTO_RATE_SHARE * 100.0
            ));
            wakeup = Some(wakeup_floor(o, rate));
            for who in &engines {
                if stop.load(Ordering::SeqCst) {
                    stopped = true;
                    break;
                }
                runs.push(run_one(o, who, (o.rounds + 1, o.rounds + 1), Some(rate))?);
            }
        }
    }
    if stopped {
        note("stopped by Ctrl-C: the table covers the runs that finished");
    }
    note("raw fdatasync rate (after)");
    let sync_after = crate::experiments::fdatasync::raw_fdatasync_per_s(
        &o.work_dir,
        std::time::Duration::from_secs(1),
    )?;
    // A column per name, in the order they first ran (throttled runs are columns of
    // their own: `bufpool@R`).
    let mut names: Vec<&str> = Vec::new();
    for r in &runs {
        if !names.contains(&r.name.as_str()) {
            names.push(&r.name);
        }
    }
    let summaries: Vec<EngineSummary> = names
        .iter()
        .map(|name| {
            let rs: Vec<&EngineRun> = runs.iter().filter(|r| r.name == *name).collect();
            summarize_engine(&rs)
        })
        .collect();
    let targets = targets(o.workload, (o.sync, o.clients), &runs);
    let floors = Floors {
        fdatasync: [sync_before, sync_after],
        runqueue_ms,
        wakeup,
    };
    let doc = to_json(o, &summaries, &skipped, &floors, &targets);
    let json_path = o.out_dir.join("compare.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc)?)
        .with_context(|| format!("writing {}", json_path.display()))?;
    let results: Vec<RunResult> = runs.iter().map(|r| r.result.clone()).collect();
    let files = if results.is_empty() {
        None
    } else {
        Some(crate::report::write_report(&results, &o.out_dir)?)
    };
    if o.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", to_table(o, &summaries, &skipped, &floors));
        for t in &targets {
            println!(
                "target {}: {:.3} (rounds {:.3}-{:.3}) {} {} {}",
                t.name,
                t.median,
                t.min,
                t.max,
                t.goal.symbol(),
                t.target,
                if t.pass { "met" } else { "MISSED" }
            );
        }
        if let Some(f) = &files {
            println!("report: {}", f.index.display());
        }
        println!("json: {}", json_path.display());
    }
    Ok(())
}

/// One engine's run in round `round` of `rounds` (at `rate` transactions per second if
/// given: its column is then `NAME@RATE`), its data folder removed after.
fn run_one(
    o: &CompareOptions,
    who: &Entrant,
    (round, rounds): (u32, u32),
    rate: Option<f64>,
) -> Result<EngineRun> {
    let name = match rate {
        Some(r) => format!("{}@{r:.0}", who.name()),
        None => who.name(),
    };
    note(format!("round {round}/{rounds}: {name}"));
    let tag = format!("{name}-r{round}");
    let logs = o.out_dir.join("logs").join(&tag);
    fresh_dir(&logs)?;
    let data = o.work_dir.join(&tag);
    fresh_dir(&data)?;
    let r = match who.kind {
        EngineKind::Bufpool => run_bufpool(o, &data, &logs, rate),
        EngineKind::Sqlite => run_sqlite(o, &data, &logs, rate),
        EngineKind::Postgres => run_postgres(o, who, &logs, rate),
    };
    let _ = std::fs::remove_dir_all(&data);
    let mut r = r.with_context(|| format!("{name} (round {round})"))?;
    r.round = round;
    r.name = name.clone();
    r.result.label = if rounds > 1 {
        format!("{name} r{round}")
    } else {
        name.clone()
    };
    note(format!(
        "{name}: {:.0} tps, latency avg {:.3} ms, p99 {:.3} ms",
        r.result.tps, r.result.latency_ms.avg, r.result.latency_ms.p99
    ));
    Ok(r)
}

/// `--rate auto`'s share of the slowest engine's rate: below it, so that no engine runs
/// saturated (at its own full rate a schedule's backlog, and so its latency counted from
/// the schedule, grows for as long as the run lasts).
const AUTO_RATE_SHARE: f64 = 0.6;

/// `-R R` for a throttled run, nothing for one at full speed.
fn rate_flag(rate: Option<f64>) -> Vec<String> {
    rate.map_or(Vec::new(), |r| vec!["-R".into(), format!("{r:.0}")])
}

/// The slowest column's rate among `runs` at full speed: the least, over columns, of each
/// one's median tps over its rounds (None when nothing ran).
fn slowest_rate(runs: &[EngineRun]) -> Option<f64> {
    let mut names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names
        .iter()
        .filter_map(|n| {
            let mut tps: Vec<f64> = runs
                .iter()
                .filter(|r| r.name == *n)
                .map(|r| r.result.tps)
                .collect();
            tps.sort_by(f64::total_cmp);
            tps.get(tps.len() / 2).copied()
        })
        .filter(|t| *t >= 1.0)
        .min_by(f64::total_cmp)
}

/// The targets of the race on one machine, from the engines that ran (a target whose
/// engines did not both run is left out). Each is taken per round (the engines of a round
/// ran back to back) and judged on the median over rounds:
/// - bufpool's tps over SQLite's: `sync_off_vs_sqlite_normal` >= 1.3 with synchronous
///   commit off (SQLite NORMAL), `sync_on_vs_sqlite_full` >= 2.0 with it on (FULL);
/// - `maxlat_p50_ms_off` / `maxlat_p50_ms_on` <= 5: bufpool's typical second's largest
///   latency (the median over the run's seconds), ms;
/// - `device_bytes_per_tx_vs_postgres` <= 1.0: bufpool's device bytes written per
///   transaction over PostgreSQL's (the first PostgreSQL column's, where several ran);
/// - `cpu_per_tx_vs_sqlite` <= 1.0 with synchronous commit off: CPU per transaction.
///
/// YCSB's and TPC-C's runs have targets of their own ([`ycsb_targets`], [`tpcc_targets`]);
/// `clients` bounds the cores TPC-C's per-core figure divides by.
fn targets(
    workload: cli::Workload,
    (sync, clients): (bool, u32),
    runs: &[EngineRun],
) -> Vec<Ratio> {
    let of = |name: &str, round: u32| {
        runs.iter()
            .find(|r| r.name == name && r.round == round)
            .map(EngineRun::figures)
    };
    let first_pg = runs
        .iter()
        .find(|r| r.engine == EngineKind::Postgres)
        .map(|r| r.name.as_str());
    let rounds: Vec<u32> = {
        let mut v: Vec<u32> = runs.iter().map(|r| r.round).collect();
        v.dedup();
        v
    };
    // Per round, bufpool's figure `key` over `other`'s (or alone, with `other` None).
    let per_round = |other: Option<&str>, key: &str| -> Vec<f64> {
        rounds
            .iter()
            .filter_map(|&n| {
                let ours = of("bufpool", n)?[key];
                let theirs = match other {
                    Some(e) => of(e, n)?[key],
                    None => 1.0,
                };
                let v = ours / theirs;
                v.is_finite().then_some(v)
            })
            .collect()
    };
    let sqlite = Some("sqlite");
    let mut out = match workload {
        cli::Workload::Tpcb => targets_of(&per_round, sync, first_pg, sqlite),
        cli::Workload::Ycsb(core) => ycsb_targets(&per_round, sync, core),
        cli::Workload::Tpcc => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
            tpcc_targets(&per_round, sync, clients.min(cores))
        }
    };
    if workload == cli::Workload::Tpcb && !sync {
        out.extend(equal_rate_target(runs));
    }
    out
}

/// TPC-C's targets, each from bufpool's tps per round (`per_round`), left out when the
/// other column did not run:
/// - `tpcc_sync_on_vs_sqlite_full` >= 2.0 with synchronous commit on: over SQLite FULL's;
/// - `tpcc_sync_off_vs_pg18` >= 5.0 with it off: over PostgreSQL 18's (its column
///   `postgresql-18`);
/// - `tpcc_in_memory_tx_per_s_per_core` >= 10,000 with it off: over `cores`, those its
///   clients can use (the fewer of the clients and the machine's cores).
fn tpcc_targets(
    per_round: &dyn Fn(Option<&str>, &str) -> Vec<f64>,
    sync: bool,
    cores: u32,
) -> Vec<Ratio> {
    let wanted: Vec<(&'static str, Option<&str>, f64)> = if sync {
        vec![("tpcc_sync_on_vs_sqlite_full", Some("sqlite"), 2.0)]
    } else {
        vec![
            ("tpcc_sync_off_vs_pg18", Some("postgresql-18"), 5.0),
            ("tpcc_in_memory_tx_per_s_per_core", None, 10_000.0),
        ]
    };
    wanted
        .into_iter()
        .filter_map(|(name, other, target)| {
            let mut v = per_round(other, "tps");
            if other.is_none() {
                v.iter_mut().for_each(|t| *t /= f64::from(cores.max(1)));
            }
            (!v.is_empty()).then(|| Ratio::new(name, &v, Goal::AtLeast, target))
        })
        .collect()
}

/// `maxlat_p50_equal_rate_vs_pg` <= 1.0: with every engine throttled to one rate
/// (`--rate`), bufpool's typical second's largest latency (the median over the run's
/// seconds) over PostgreSQL's (PostgreSQL 18's column where it ran, else the first
/// PostgreSQL column), per round of throttled runs; none without throttled runs of both.
fn equal_rate_target(runs: &[EngineRun]) -> Option<Ratio> {
    let rated = |r: &&EngineRun| r.name.contains('@');
    let pg_of = |round: u32| {
        let pgs = || {
            runs.iter()
                .filter(rated)
                .filter(move |r| r.round == round && r.engine == EngineKind::Postgres)
        };
        pgs()
            .find(|r| r.name.starts_with("postgresql-18@"))
            .or_else(|| pgs().next())
    };
    let v: Vec<f64> = runs
        .iter()
        .filter(rated)
        .filter(|r| r.engine == EngineKind::Bufpool)
        .filter_map(|b| {
            let pg = pg_of(b.round)?;
            let v = b.figures()["max_latency_p50"] / pg.figures()["max_latency_p50"];
            v.is_finite().then_some(v)
        })
        .collect();
    (!v.is_empty()).then(|| Ratio::new("maxlat_p50_equal_rate_vs_pg", &v, Goal::AtMost, 1.0))
}

/// A YCSB run's target: bufpool's tps over SQLite's, `ycsb_X_vs_sqlite_normal` (sync off)
/// or `_full` (on); at least 1.5 for YCSB A with NORMAL (the field issue's), at least 1.0
/// (our bound) for the others.
fn ycsb_targets(
    per_round: &dyn Fn(Option<&str>, &str) -> Vec<f64>,
    sync: bool,
    core: crate::ycsb::workload::Core,
) -> Vec<Ratio> {
    use crate::ycsb::workload::Core;
    let name: &'static str = match (core, sync) {
        (Core::A, false) => "ycsb_a_vs_sqlite_normal",
        (Core::A, true) => "ycsb_a_vs_sqlite_full",
        (Core::B, false) => "ycsb_b_vs_sqlite_normal",
        (Core::B, true) => "ycsb_b_vs_sqlite_full",
        (Core::C, false) => "ycsb_c_vs_sqlite_normal",
        (Core::C, true) => "ycsb_c_vs_sqlite_full",
        (Core::D, false) => "ycsb_d_vs_sqlite_normal",
        (Core::D, true) => "ycsb_d_vs_sqlite_full",
        (Core::E, false) => "ycsb_e_vs_sqlite_normal",
        (Core::E, true) => "ycsb_e_vs_sqlite_full",
        (Core::F, false) => "ycsb_f_vs_sqlite_normal",
        (Core::F, true) => "ycsb_f_vs_sqlite_full",
    };
    let target = if (core, sync) == (Core::A, false) {
        1.5
    } else {
        1.0
    };
    let v = per_round(Some("sqlite"), "tps");
    if v.is_empty() {
        return Vec::new();
    }
    vec![Ratio::new(name, &v, Goal::AtLeast, target)]
}

/// [`targets`]' list, from `per_round` (bufpool's figure over another column's, per
/// round); a target whose other column did not run is left out.
fn targets_of(
    per_round: &dyn Fn(Option<&str>, &str) -> Vec<f64>,
    sync: bool,
    pg: Option<&str>,
    sqlite: Option<&str>,
) -> Vec<Ratio> {
    let mut wanted = vec![
        if sync {
            ("sync_on_vs_sqlite_full", sqlite, "tps", Goal::AtLeast, 2.0)
        } else {
            (
                "sync_off_vs_sqlite_normal",
                sqlite,
                "tps",
                Goal::AtLeast,
                1.3,
            )
        },
        if sync {
            (
                "maxlat_p50_ms_on",
                None,
                "max_latency_p50",
                Goal::AtMost,
                5.0,
            )
        } else {
            (
                "maxlat_p50_ms_off",
                None,
                "max_latency_p50",
                Goal::AtMost,
                5.0,
            )
        },
    ];
    if pg.is_some() {
        wanted.push((
            "device_bytes_per_tx_vs_postgres",
            pg,
            "write_bytes_per_tx",
            Goal::AtMost,
            1.0,
        ));
    }
    if !sync {
        wanted.push((
            "cpu_per_tx_vs_sqlite",
            sqlite,
            "cpu_us_per_tx",
            Goal::AtMost,
            1.0,
        ));
    }
    wanted
        .into_iter()
        .filter_map(|(name, other, key, goal, target)| {
            let v = per_round(other, key);
            (!v.is_empty()).then(|| Ratio::new(name, &v, goal, target))
        })
        .collect()
}

/// The shared settings, as the table and the JSON print them.
fn settings(o: &CompareOptions) -> serde_json::Value {
    json!({
        "workload": o.workload.name(),
        "scale": o.scale,
        "records": o.workload.ycsb().map(|_| o.records),
        "warehouses": (o.workload == cli::Workload::Tpcc).then_some(o.warehouses),
        "clients": o.clients,
        "jobs": o.jobs,
        "duration_s": o.time_s,
        "rounds": o.rounds,
        "synchronous_commit": if o.sync { "on" } else { "off" },
        "shared_buffers": o.pool,
        "checkpoint_timeout": o.checkpoint_timeout,
        "postgres_versions": o.postgres_versions,
        "postgresql": {
            "shared_buffers": o.pool,
            "checkpoint_timeout": o.checkpoint_timeout,
            "max_wal_size": "1GB",
            "synchronous_commit": if o.sync { "on" } else { "off" },
            "pgbench_mode": match o.pg_mode { PgMode::Prepared => "prepared", PgMode::Simple => "simple" },
        },
        "sqlite": {
            "journal_mode": "wal",
            "synchronous": if o.sync { "FULL" } else { "NORMAL" },
            "cache_size": format!("{} per connection", o.pool),
            "connections": o.clients,
            "begin": "IMMEDIATE",
        },
    })
}

fn num(v: f64) -> serde_json::Value {
    if v.is_finite() {
        json!(v)
    } else {
        serde_json::Value::Null
    }
}

/// The machine's own figures around the rounds.
struct Floors {
    /// Raw write + fdatasync per second of the data directory, before and after.
    fdatasync: [f64; 2],
    /// Each second's longest wait for a CPU of as many busy threads as clients, ms.
    runqueue_ms: Vec<f64>,
    /// With a rate: the rate, and each second's largest lateness of as many threads as
    /// clients waking on its schedule with nothing to do, ms ([`wakeup_floor`]).
    wakeup: Option<(f64, Vec<f64>)>,
}

impl Floors {
    /// The median second's longest wait for a CPU, ms.
    fn runqueue_p50_ms(&self) -> f64 {
        median(&self.runqueue_ms)
    }

    /// The median second's largest wake-up lateness at the rate, ms (None without one).
    fn wakeup_p50_ms(&self) -> Option<f64> {
        self.wakeup.as_ref().map(|(_, v)| median(v))
    }
}

/// The upper median of `v` (0 for none).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Seconds the wake-up floor runs: enough seconds for a median.
const WAKEUP_FLOOR_S: u64 = 10;

/// The throttled runs' floor: as many threads as clients, each waiting for the moments
/// of its share of `rate` as a paced client does and doing nothing then, for
/// [`WAKEUP_FLOOR_S`]; each second's largest lateness, ms. Every engine's throttled
/// latency counts from the schedule, so this is in all of them.
fn wakeup_floor(o: &CompareOptions, rate: f64) -> (f64, Vec<f64>) {
    note(format!(
        "the wake-up floor: {} threads waking at {rate:.0} a second in all, {WAKEUP_FLOOR_S} s",
        o.clients
    ));
    let v = crate::experiments::floor::wakeup_lag_per_second_max(
        o.clients as usize,
        rate,
        std::time::Duration::from_secs(WAKEUP_FLOOR_S),
    );
    (rate, v)
}

fn to_json(
    o: &CompareOptions,
    engines: &[EngineSummary],
    skipped: &[(String, String)],
    floors: &Floors,
    targets: &[Ratio],
) -> serde_json::Value {
    let base = engines.iter().find(|e| e.engine == EngineKind::Bufpool);
    let list: Vec<serde_json::Value> = engines
        .iter()
        .map(|e| {
            let f = |k: &str| e.figures[k];
            let mut vs = serde_json::Map::new();
            if let Some(b) = base {
                for k in [
                    "tps",
                    "lat_avg",
                    "lat_p99",
                    "cpu_us_per_tx",
                    "write_bytes_per_tx",
                    "peak_rss_bytes",
                ] {
                    vs.insert(k.into(), num(f(k) / b.figures[k]));
                }
            }
            json!({
                "name": e.name,
                "engine": e.engine.name(),
                "version": e.version,
                "kind": e.engine.kind(),
                "tps": num(f("tps")),
                "tps_rounds": e.tps_rounds,
                "transactions": e.transactions,
                "failed": e.failed,
                "latency_ms": {
                    "avg": num(f("lat_avg")), "p50": num(f("lat_p50")),
                    "p99": num(f("lat_p99")), "max": num(f("lat_max")),
                },
                "per_interval": {
                    "tps_p5": num(f("tps_p5")), "tps_p50": num(f("tps_p50")),
                    "max_latency_p50": num(f("max_latency_p50")),
                    "max_latency_p99": num(f("max_latency_p99")),
                },
                "per_second_max_lag_p50_ms": num(f("max_lag_p50")),
                "per_second_max_execution_p50_ms": num(f("max_exec_p50")),
                "cpu_us_per_tx": num(f("cpu_us_per_tx")),
                "write_bytes_per_tx": num(f("write_bytes_per_tx")),
                "write_bytes_source": e.write_source,
                "proc_write_bytes_per_tx": num(f("proc_write_bytes_per_tx")),
                "wchar_per_tx": num(f("wchar_per_tx")),
                "peak_rss_bytes": num(f("peak_rss_bytes")),
                "backend_write_share": num(f("backend_write_share")),
                "load_s": num(f("load_s")),
                "buffer_hits_per_tx": num(f("hits_per_tx")),
                "buffer_reads_per_tx": num(f("reads_per_tx")),
                "checkpoints": num(f("checkpoints")),
                "settings": e.extra.get("settings"),
                "vs_bufpool": vs,
                "extra": e.extra,
            })
        })
        .collect();
    let info = crate::experiments::RunInfo::new(&o.command);
    let meta = info.metadata("compare", &o.command);
    json!({
        "engines": list,
        "skipped": skipped.iter().map(|(e, why)| json!({"name": e, "reason": why})).collect::<Vec<_>>(),
        "fdatasync_per_s": floors.fdatasync,
        "scheduler_floor": {
            "threads": o.clients,
            "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
            "max_gap_ms_per_second": floors.runqueue_ms.iter().map(|&v| num(v)).collect::<Vec<_>>(),
            "max_gap_p50_ms": num(floors.runqueue_p50_ms()),
            "wakeup_rate": floors.wakeup.as_ref().map(|(r, _)| *r),
            "wakeup_lag_ms_per_second": floors.wakeup.as_ref().map(|(_, v)| v.iter().map(|&x| num(x)).collect::<Vec<_>>()),
            "wakeup_lag_p50_ms": floors.wakeup_p50_ms().map(num),
        },
        "settings": settings(o),
        "machine": meta.get("machine"),
        "device": meta.get("device"),
        "command": info.command,
        "profile": info.profile,
        "targets": targets.iter().map(|t| json!({
            "name": t.name, "value": num(t.median), "min": num(t.min), "max": num(t.max),
            "op": t.goal.symbol(), "target": t.target, "pass": t.pass,
        })).collect::<Vec<_>>(),
    })
}

/// A table row: its label, the figure's name, how to print it.
type Row = (&'static str, &'static str, fn(f64) -> String);

/// Figures printed without a ratio to bufpool.
const NO_RATIO: [&str; 4] = [
    "backend_write_share",
    "hits_per_tx",
    "reads_per_tx",
    "checkpoints",
];

/// The settings printed under the table for PostgreSQL and SQLite (all of them are in
/// the JSON): those that differ between versions or engines.
const SETTINGS_SHOWN: [&str; 11] = [
    "io_method",
    "io_workers",
    "data_checksums",
    "effective_io_concurrency",
    "full_page_writes",
    "wal_sync_method",
    "journal_mode",
    "synchronous",
    "cache_size",
    "page_size",
    "wal_autocheckpoint",
];

/// `v` with `decimals`, or "n/a" for an engine that does not count it.
fn or_na(v: f64, decimals: usize) -> String {
    if v.is_nan() {
        "n/a".into()
    } else {
        format!("{v:.decimals$}")
    }
}

/// The table's rows, in order: label, figure, format.
fn table_rows() -> [Row; 20] {
    [
        ("load s", "load_s", |v| format!("{v:.1}")),
        ("tps", "tps", |v| format!("{v:.0}")),
        ("latency avg ms", "lat_avg", |v| format!("{v:.3}")),
        ("latency p50 ms", "lat_p50", |v| format!("{v:.3}")),
        ("latency p99 ms", "lat_p99", |v| format!("{v:.3}")),
        ("latency max ms", "lat_max", |v| format!("{v:.1}")),
        ("per-second tps p5", "tps_p5", |v| format!("{v:.0}")),
        ("per-second tps p50", "tps_p50", |v| format!("{v:.0}")),
        ("per-second max latency p50 ms", "max_latency_p50", |v| {
            format!("{v:.1}")
        }),
        ("per-second max latency p99 ms", "max_latency_p99", |v| {
            format!("{v:.1}")
        }),
        ("per-second max schedule lag p50 ms", "max_lag_p50", |v| {
            format!("{v:.2}")
        }),
        ("per-second max execution p50 ms", "max_exec_p50", |v| {
            format!("{v:.2}")
        }),
        ("CPU µs per transaction", "cpu_us_per_tx", |v| {
            format!("{v:.0}")
        }),
        ("bytes written per tx (device)", "write_bytes_per_tx", |v| {
            format!("{v:.0}")
        }),
        ("bytes passed to write(2) per tx", "wchar_per_tx", |v| {
            if v.is_nan() {
                "n/a".into()
            } else {
                format!("{v:.0}")
            }
        }),
        ("peak memory MiB", "peak_rss_bytes", |v| {
            format!("{:.0}", v / 1048576.0)
        }),
        ("buffer writes by backends", "backend_write_share", |v| {
            if v.is_nan() {
                "n/a".into()
            } else {
                format!("{:.0}%", v * 100.0)
            }
        }),
        ("buffer hits per tx", "hits_per_tx", |v| or_na(v, 1)),
        ("buffer reads per tx", "reads_per_tx", |v| or_na(v, 3)),
        ("checkpoints in the run", "checkpoints", |v| or_na(v, 0)),
    ]
}

fn to_table(
    o: &CompareOptions,
    engines: &[EngineSummary],
    skipped: &[(String, String)],
    floors: &Floors,
) -> String {
    let mut t = String::new();
    let size = match o.workload {
        cli::Workload::Tpcb => format!("TPC-B, scale {}", o.scale),
        cli::Workload::Ycsb(_) => format!("{}, {} records", o.workload.name(), o.records),
        cli::Workload::Tpcc => format!("TPC-C, {} warehouse(s)", o.warehouses),
    };
    let _ = writeln!(
        t,
        "{size}, {} clients, {} s, synchronous commit {}, pool {}, checkpoint_timeout {}{}",
        o.clients,
        o.time_s,
        if o.sync { "on" } else { "off" },
        o.pool,
        o.checkpoint_timeout,
        if o.rounds > 1 {
            format!(", median of {} rounds", o.rounds)
        } else {
            String::new()
        }
    );
    let base = engines.iter().find(|e| e.engine == EngineKind::Bufpool);
    let ratio = |e: &EngineSummary, k: &str| match base {
        Some(b) if e.engine != EngineKind::Bufpool && b.figures[k] > 0.0 => {
            format!(" ({:.2}x)", e.figures[k] / b.figures[k])
        }
        _ => String::new(),
    };
    let rows = table_rows();
    let mut table: Vec<Vec<String>> = Vec::new();
    let mut header = vec![String::new()];
    header.extend(engines.iter().map(|e| e.name.clone()));
    table.push(header);
    let mut kind = vec!["kind".to_string()];
    kind.extend(engines.iter().map(|e| e.engine.kind().to_string()));
    table.push(kind);
    let mut version = vec!["version".to_string()];
    version.extend(engines.iter().map(|e| e.version.clone()));
    table.push(version);
    for (label, key, fmt) in rows {
        let mut row = vec![label.to_string()];
        for e in engines {
            let v = e.figures[key];
            let r = if NO_RATIO.contains(&key) || v.is_nan() {
                String::new()
            } else {
                ratio(e, key)
            };
            row.push(format!("{}{r}", fmt(v)));
        }
        table.push(row);
    }
    t.push_str(&crate::experiments::layout(&table, 1));
    for e in engines {
        if let (Some(w), Some(s)) = (e.extra.get("busy_waits"), e.extra.get("busy_wait_s")) {
            let _ = writeln!(
                t,
                "sqlite: {w} busy waits ({s} s asleep waiting for the write lock)"
            );
        }
        if o.rounds > 1 {
            let v: Vec<String> = e.tps_rounds.iter().map(|x| format!("{x:.0}")).collect();
            let _ = writeln!(t, "{}: tps by round {}", e.name, v.join(", "));
        }
    }
    for e in engines {
        if let Some(serde_json::Value::Object(m)) = e.extra.get("settings") {
            let kv: Vec<String> = m
                .iter()
                .filter(|(k, _)| SETTINGS_SHOWN.contains(&k.as_str()))
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect();
            let _ = writeln!(t, "{} ({}): {}", e.name, e.version, kv.join(", "));
        }
    }
    for (e, why) in skipped {
        let _ = writeln!(t, "{e}: skipped: {why}");
    }
    let _ = writeln!(
        t,
        "raw fdatasync of the data directory: {:.0}/s before, {:.0}/s after",
        floors.fdatasync[0], floors.fdatasync[1]
    );
    let _ = writeln!(
        t,
        "the scheduler's floor: {} busy threads on {} CPUs wait up to {:.1} ms for a CPU in the median second",
        o.clients,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        floors.runqueue_p50_ms()
    );
    if let (Some((rate, _)), Some(p50)) = (&floors.wakeup, floors.wakeup_p50_ms()) {
        let _ = writeln!(
            t,
            "the wake-up floor at {rate:.0} tps: {} threads waking on their schedule with nothing to do start up to {p50:.2} ms late in the median second (in every throttled column's latency)",
            o.clients
        );
    }
    let _ = writeln!(
        t,
        "(x) = ratio to bufpool. Embedded engines run transactions as function calls; PostgreSQL is client/server (CPU = server processes + pgbench). Bytes written: the data directory's device's sector count over the run after a syncfs (other writers on that device count too), each engine's flush of what the run left dirty included. SQLite: WAL mode, synchronous={}, cache_size = pool per connection, BEGIN IMMEDIATE{}.",
        if o.sync { "FULL" } else { "NORMAL" },
        if o.workload == cli::Workload::Tpcc {
            " (TPC-C's read-only Order-Status and Stock-Level: BEGIN)"
        } else {
            ""
        }
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of column `name` (engine `engine`) in `round` at `tps`, each second's largest
    /// latency `max_ms`.
    fn run(engine: EngineKind, name: &str, round: u32, tps: f64, max_ms: f64) -> EngineRun {
        let mut result = RunResult::example(name, 1);
        result.tps = tps;
        for s in &mut result.series {
            s.lat_max_ms = max_ms;
        }
        let mut r = EngineRun::measured(
            engine,
            String::new(),
            &process::Usage::default(),
            &process::Usage::default(),
            result,
            BTreeMap::new(),
        );
        (r.name, r.round) = (name.to_string(), round);
        r
    }

    /// A throttled column's typical second splits into the slowest start against the
    /// schedule and the longest execution, each the median over the seconds of its own
    /// per-second maximum; the wake-up floor is the median second of its threads.
    #[test]
    fn throttled_seconds_split_into_lag_and_execution() {
        let mut r = run(EngineKind::Bufpool, "bufpool@100", 1, 100.0, 5.0);
        for (i, s) in r.result.series.iter_mut().enumerate() {
            (s.lag_max_ms, s.exec_max_ms) = (i as f64, 0.5);
        }
        let n = r.result.series.len();
        let f = r.figures();
        assert_eq!(f["max_lag_p50"], ((n - 1) / 2) as f64);
        assert_eq!((f["max_exec_p50"], f["max_latency_p50"]), (0.5, 5.0));
        let floors = Floors {
            fdatasync: [1.0, 1.0],
            runqueue_ms: vec![3.0, 1.0, 2.0],
            wakeup: Some((100.0, vec![0.9, 0.2, 1.4, 0.3])),
        };
        assert_eq!(floors.runqueue_p50_ms(), 2.0);
        assert_eq!(floors.wakeup_p50_ms(), Some(0.9));
        let none = Floors {
            wakeup: None,
            ..floors
        };
        assert_eq!(none.wakeup_p50_ms(), None);
    }

    /// Proves: `--rate auto` takes the slowest column's median tps over its rounds.
    #[test]
    fn the_slowest_rate_is_the_least_median() {
        let runs = [
            run(EngineKind::Bufpool, "bufpool", 1, 100.0, 1.0),
            run(EngineKind::Bufpool, "bufpool", 2, 300.0, 1.0),
            run(EngineKind::Bufpool, "bufpool", 3, 200.0, 1.0),
            run(EngineKind::Sqlite, "sqlite", 1, 90.0, 1.0),
            run(EngineKind::Sqlite, "sqlite", 2, 10.0, 1.0),
            run(EngineKind::Sqlite, "sqlite", 3, 50.0, 1.0),
        ];
        assert_eq!(slowest_rate(&runs), Some(50.0));
        assert_eq!(slowest_rate(&[]), None);
    }

    /// Proves: the equal-rate target compares the throttled columns only, each round's
    /// bufpool with that round's PostgreSQL 18 when it ran, and is absent without one.
    #[test]
    fn the_equal_rate_target_takes_postgresql_18_of_the_same_round() {
        let pg = EngineKind::Postgres;
        let runs = [
            run(EngineKind::Bufpool, "bufpool", 1, 100.0, 50.0),
            run(pg, "postgresql-15", 1, 10.0, 1.0),
            run(EngineKind::Bufpool, "bufpool@6", 2, 6.0, 2.0),
            run(pg, "postgresql-15@6", 2, 6.0, 1.0),
            run(pg, "postgresql-18@6", 2, 6.0, 4.0),
        ];
        let t = equal_rate_target(&runs).expect("a target");
        assert_eq!(
            (t.name, t.median, t.pass),
            ("maxlat_p50_equal_rate_vs_pg", 0.5, true)
        );
        assert!(equal_rate_target(&runs[..2]).is_none(), "no throttled runs");
        let without_18 = [&runs[..4]].concat();
        let t = equal_rate_target(&without_18).unwrap();
        assert_eq!((t.median, t.pass), (2.0, false));
    }

    /// Proves: TPC-C's targets are its own, by their names, ops and bounds: with
    /// synchronous commit on, bufpool's tps over SQLite FULL's; off, over PostgreSQL 18's
    /// (absent without its column; PostgreSQL 15's does not stand in) and per core its
    /// clients can use; TPC-B's are not among them.
    #[test]
    fn tpcc_targets_name_sqlite_full_postgresql_18_and_the_per_core_rate() {
        let tpcc = cli::Workload::Tpcc;
        let on = [
            run(EngineKind::Bufpool, "bufpool", 1, 900.0, 1.0),
            run(EngineKind::Sqlite, "sqlite", 1, 300.0, 1.0),
        ];
        let t = targets(tpcc, (true, 1), &on);
        let got: Vec<_> = t
            .iter()
            .map(|r| (r.name, r.goal.symbol(), r.target))
            .collect();
        assert_eq!(got, [("tpcc_sync_on_vs_sqlite_full", ">=", 2.0)]);
        assert_eq!((t[0].median, t[0].pass), (3.0, true));

        let pg = EngineKind::Postgres;
        let off = [
            run(EngineKind::Bufpool, "bufpool", 1, 12_000.0, 1.0),
            run(pg, "postgresql-15", 1, 1000.0, 1.0),
            run(pg, "postgresql-18", 1, 4000.0, 1.0),
            run(EngineKind::Sqlite, "sqlite", 1, 3000.0, 1.0),
        ];
        let t = targets(tpcc, (false, 1), &off);
        let got: Vec<_> = t
            .iter()
            .map(|r| (r.name, r.goal.symbol(), r.target, r.median, r.pass))
            .collect();
        assert_eq!(
            got,
            [
                ("tpcc_sync_off_vs_pg18", ">=", 5.0, 3.0, false),
                (
                    "tpcc_in_memory_tx_per_s_per_core",
                    ">=",
                    10_000.0,
                    12_000.0,
                    true
                ),
            ]
        );
        let without_18 = [&off[..2], &off[3..]].concat();
        let t = targets(tpcc, (false, 1), &without_18);
        let names: Vec<_> = t.iter().map(|r| r.name).collect();
        assert_eq!(names, ["tpcc_in_memory_tx_per_s_per_core"]);
    }
}
