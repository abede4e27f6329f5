//! `bufpool scan` and `bufpool vacuum`: one table of a database made by `init`, read
//! (like `SELECT count(*)`) or vacuumed, with what it cost: pages, hits, reads, read time,
//! MB/s, and the plan the scan chose (start block, ring, cache trail), so a user can see
//! the seed-003 mechanisms on their own data.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bufpool::table::{ScanReport, SeqScanOptions};
use bufpool::txn::INVALID_XID;
use bufpool::{IoContext, IoOp, IoStatsSnapshot, IoWriter, RealVfs, Vfs};
use serde::Serialize;

use super::{open_engine, DirArgs};
use crate::knobs::load_config;
use crate::tpcb::{self, Db};

#[derive(Debug, clap::Args)]
pub struct TableArgs {
    /// The table: pgbench_accounts, pgbench_branches, pgbench_tellers or pgbench_history
    /// (the prefix may be left out).
    #[arg(default_value = "pgbench_accounts")]
    pub table: String,
    /// Scan only: how many times to scan (each prints its own line).
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Records every buffer request (as `bench --trace`) to FILE, for `trace replay`.
    #[arg(long = "trace", value_name = "FILE")]
    pub trace: Option<PathBuf>,
    #[command(flatten)]
    pub dir: DirArgs,
}

impl TableArgs {
    pub fn job(&self) -> TableJob<'_> {
        TableJob {
            dir: &self.dir.dir,
            sets: &self.dir.sets,
            table: &self.table,
            json: self.json,
            trace: self.trace.as_deref(),
        }
    }
}

/// What `bufpool scan` and `bufpool vacuum` print (and `--json` emits).
#[derive(Debug, Clone, Serialize)]
pub struct TableRun {
    pub command: &'static str,
    pub table: String,
    pub pages: u64,
    /// Rows counted (scan) or dead versions removed (vacuum).
    pub rows: u64,
    pub hits: u64,
    pub reads: u64,
    /// Pages written to get buffers (evictions of dirty pages, ring reuses).
    pub writes: u64,
    pub evictions: u64,
    pub reuses: u64,
    pub read_time_ms: f64,
    pub elapsed_ms: f64,
    pub mb_per_s: f64,
    /// Scan only: the first block, whether a ring was used, pages from the cache trail.
    pub start_block: Option<u32>,
    pub ring: Option<bool>,
    pub synchronized: Option<bool>,
    pub trail_pages: Option<u32>,
}

impl TableRun {
    fn new(
        command: &'static str,
        table: &str,
        pages: u64,
        rows: u64,
        io: &IoStatsSnapshot,
        page_size: usize,
        elapsed: Duration,
    ) -> TableRun {
        let sum = |op| io.by_writer(IoWriter::Backend, op);
        let read_time: Duration = [
            IoContext::Normal,
            IoContext::BulkRead,
            IoContext::BulkWrite,
            IoContext::Vacuum,
        ]
        .iter()
        .map(|&c| io.time(IoWriter::Backend, c, IoOp::Read))
        .sum();
        let secs = elapsed.as_secs_f64().max(1e-9);
        TableRun {
            command,
            table: table.to_string(),
            pages,
            rows,
            hits: sum(IoOp::Hit),
            reads: sum(IoOp::Read),
            writes: sum(IoOp::Write),
            evictions: sum(IoOp::Eviction),
            reuses: sum(IoOp::Reuse),
            read_time_ms: read_time.as_secs_f64() * 1e3,
            elapsed_ms: secs * 1e3,
            mb_per_s: pages as f64 * page_size as f64 / secs / 1e6,
            start_block: None,
            ring: None,
            synchronized: None,
            trail_pages: None,
        }
    }

    fn print(&self, json: bool) -> Result<()> {
        if json {
            println!("{}", serde_json::to_string_pretty(self)?);
            return Ok(());
        }
        let what = if self.command == "scan" {
            "rows"
        } else {
            "dead versions removed"
        };
        println!(
            "{} {}: {} {what}, {} pages in {:.1} ms ({:.1} MB/s)",
            self.command, self.table, self.rows, self.pages, self.elapsed_ms, self.mb_per_s
        );
        println!(
            "  buffers: {} hits, {} reads ({:.1} ms reading), {} writes, {} evictions, {} ring reuses",
            self.hits, self.reads, self.read_time_ms, self.writes, self.evictions, self.reuses
        );
        if let (Some(start), Some(ring), Some(sync), Some(trail)) = (
            self.start_block,
            self.ring,
            self.synchronized,
            self.trail_pages,
        ) {
            println!(
                "  plan: start at block {start} ({}), {}, {trail} pages from the cache trail",
                if sync { "synchronized" } else { "block 0" },
                if ring {
                    "bulk-read ring"
                } else {
                    "shared clock"
                },
            );
        }
        Ok(())
    }
}

/// `accounts` → `pgbench_accounts`.
fn canonical(table: &str) -> String {
    if table.starts_with("pgbench_") {
        table.to_string()
    } else {
        format!("pgbench_{table}")
    }
}

/// Opens `dir`, runs `f` on its TPC-B tables (recording every buffer request to `trace`
/// if given), shuts down cleanly.
fn with_db<T>(
    dir: &Path,
    sets: &[(String, String)],
    trace: Option<&Path>,
    f: impl FnOnce(&Db<'_>) -> Result<T>,
) -> Result<T> {
    let (c, _) = load_config(dir, sets)?;
    let vfs = RealVfs::new();
    tpcb::require_initialized(&vfs, dir)?;
    let engine = open_engine(dir, &c, false)?;
    let out = {
        let db = Db::open(&engine, &vfs as &dyn Vfs, dir)?;
        if let Some(path) = trace {
            crate::trace::start(engine.pool(), path)?;
        }
        let out = f(&db)?;
        if let Some(path) = trace {
            crate::trace::stop(engine.pool(), path)?;
        }
        out
    };
    engine
        .shutdown()
        .with_context(|| format!("shutting down {}", dir.display()))?;
    Ok(out)
}

/// What `scan` and `vacuum` are asked for.
pub struct TableJob<'a> {
    pub dir: &'a Path,
    pub sets: &'a [(String, String)],
    pub table: &'a str,
    pub json: bool,
    /// Where to record every buffer request (`--trace`).
    pub trace: Option<&'a Path>,
}

/// `bufpool scan TABLE`: counts the rows a new snapshot sees, `repeat` times.
pub fn scan(job: &TableJob<'_>, repeat: u32) -> Result<()> {
    let (table, json) = (&canonical(job.table), job.json);
    with_db(job.dir, job.sets, job.trace, |db| {
        let heap = db.heap(table)?;
        for _ in 0..repeat.max(1) {
            let pool = db.engine.pool();
            let before = pool.stats();
            let start = Instant::now();
            let snap = db.engine.txns().snapshot(INVALID_XID);
            let report: ScanReport = heap
                .scan_with(&snap, &SeqScanOptions::default(), |_, _| {})
                .with_context(|| format!("scanning {table}"))?;
            let elapsed = start.elapsed();
            let io = pool.stats().since(&before);
            let mut run = TableRun::new(
                "scan",
                table,
                u64::from(report.pages),
                report.tuples,
                &io,
                pool.page_size(),
                elapsed,
            );
            run.start_block = Some(report.start);
            run.ring = Some(report.ring);
            run.synchronized = Some(report.plan.synchronized);
            run.trail_pages = Some(report.trail_pages);
            run.print(json)?;
        }
        Ok(())
    })
}

/// `bufpool vacuum TABLE`: VACUUM (no truncation), with its I/O.
pub fn vacuum(job: &TableJob<'_>) -> Result<()> {
    let (table, json) = (&canonical(job.table), job.json);
    with_db(job.dir, job.sets, job.trace, |db| {
        let heap = db.heap(table)?;
        let pool = db.engine.pool();
        let before = pool.stats();
        let start = Instant::now();
        let r = heap
            .vacuum(false)
            .with_context(|| format!("vacuuming {table}"))?;
        let elapsed = start.elapsed();
        let io = pool.stats().since(&before);
        TableRun::new(
            "vacuum",
            table,
            u64::from(r.pages),
            r.removed,
            &io,
            pool.page_size(),
            elapsed,
        )
        .print(json)
    })
}
