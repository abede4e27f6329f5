//! `bufpool experiment scans` (issue 15, seed 003): rings, synchronized scans, the cache
//! trail and read streams, each on and off in one run over one set of tables.
//!
//! The tables (one data directory, loaded once with frozen 100-byte rows, reopened with a
//! fresh pool for every configuration so that no run inherits another's cache):
//! `hot` (a tenth of the pool), `trail` (1.2 pools), `sync` (4 pools), `big` (10 pools)
//! and `vac` (2 pools, for VACUUM).
//! Sections, each a table in the report:
//! 1. Ring-size sweep (seed 003, Heikki's table): seconds per count-style scan of `big`
//!    (in the OS cache: buffered files) with rings of 1, 2, 4, … buffers and no ring, with
//!    the default read streams and again reading one block at a time with no look-ahead
//!    (as PostgreSQL 8.3 did, so the ring's size alone decides what the scan holds).
//! 2. Hot-set survival: `hot` read three times, then `big` scanned with and without a
//!    ring, then `hot` again: its hit ratio.
//! 3. Vacuum and bulk write: forced WAL flushes and seconds per ring configuration.
//! 4. Synchronized scans: 1, 2 and 4 staggered concurrent scans of `sync` (O_DIRECT), on,
//!    off, and on with `seqscan_sync_pacing` (the front scan waits for the last; the
//!    default, which `syncscan_2_reads_vs_one` measures): pages read from storage per page
//!    of the table.
//! 5. The cache trail: `trail` scanned twice (seed003 rule): the second scan's hit ratio
//!    and time, 3A on and off.
//! 6. The scan-plan rules (`quarter`, `seed003`, `seed003` + 3A) on tables of 1.2, 4 and
//!    10 pools: the plan each chose, second-scan hits and what is left of the hot set.
//! 7. Readahead: scan MB/s of `sync` for io_combine_limit × io_method × buffered/O_DIRECT,
//!    against the device's own sequential O_DIRECT rate measured on the same files.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use anyhow::{Context, Result};
use bufpool::scan::ScanPlan;
use bufpool::table::{Heap, SeqScanOptions, Tid};
use bufpool::txn::INVALID_XID;
use bufpool::{
    Config, Engine, ForkNumber, IoContext, IoOp, IoStatsSnapshot, IoWriter, RealVfs, RelFileId, Vfs,
};
use bufpool::{Ring, RingKind};

use super::runner::{Common, DeviceArg, Runner, Steps};
use super::{layout, progress, summarize, Goal, Ratio, Report, Summary};

/// `bufpool experiment scans` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub device: DeviceArg,
    /// The pool of every run in MiB (default 64; 8 with --quick; 2 in a debug build);
    /// the tables are 0.1, 1.2, 4 and 10 pools.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..))]
    pub scan_pool_mb: Option<u64>,
}

const HOT: RelFileId = RelFileId::new(0, 31_001);
const TRAIL: RelFileId = RelFileId::new(0, 31_002);
const SYNC: RelFileId = RelFileId::new(0, 31_003);
const BIG: RelFileId = RelFileId::new(0, 31_004);
/// VACUUM's table: one row deleted per page before each VACUUM.
const VAC: RelFileId = RelFileId::new(0, 31_005);
/// Bulk loads go to a new relation each time (dropped after).
const LOAD_BASE: u32 = 32_000;

/// The tables, in tenths of the pool.
const TABLES: [(RelFileId, &str, u64); 5] = [
    (HOT, "hot", 1),
    (TRAIL, "trail", 12),
    (SYNC, "sync", 40),
    (BIG, "big", 100),
    (VAC, "vac", 20),
];

/// 59 rows of 100 bytes (124 with header and line pointer) fit an 8 KiB page at
/// fillfactor 90.
const ROWS_PER_8K_PAGE: u64 = 59;

/// Rows of 100 bytes (pgbench_accounts' width).
fn row(i: u64) -> [u8; 100] {
    let mut r = [b'x'; 100];
    r[..8].copy_from_slice(&i.to_le_bytes());
    r
}

/// The data directory and what is in it.
struct Bed {
    dir: PathBuf,
    pool_mb: u64,
    page_size: usize,
    /// Pages of each table, by RelFileId.
    pages: Vec<(RelFileId, u32)>,
}

impl Bed {
    fn pages(&self, rel: RelFileId) -> u32 {
        self.pages.iter().find(|p| p.0 == rel).map_or(0, |p| p.1)
    }

    fn pool_pages(&self) -> u64 {
        (self.pool_mb << 20) / self.page_size as u64
    }

    /// Opens the directory with a fresh pool and these knobs on top of the defaults.
    fn open(&self, sets: &[(&str, &str)]) -> Result<Engine> {
        let mut c = Config::default();
        c.set("shared_buffers", &format!("{}MB", self.pool_mb))?;
        c.set("checkpoint_timeout", "1h")?;
        c.set("bgwriter", "off")?;
        // PostgreSQL's default at this pool size (1/32 of it, at most 16 MB): a log
        // buffer small enough to fill on its own would flush the log for the rings.
        c.set(
            "wal_buffers",
            &format!("{}MB", (self.pool_mb / 32).clamp(1, 16)),
        )?;
        for (k, v) in sets {
            c.set(k, v).with_context(|| format!("--set {k}={v}"))?;
        }
        Engine::open_vfs(
            Arc::new(RealVfs::new()) as Arc<dyn Vfs>,
            &self.dir,
            &c,
            false,
        )
        .with_context(|| format!("opening {}", self.dir.display()))
    }
}

/// Creates the directory and loads the tables.
fn load(dir: &Path, pool_mb: u64) -> Result<Bed> {
    let mut c = Config::default();
    c.set("shared_buffers", &format!("{pool_mb}MB"))?;
    c.set("bgwriter", "off")?;
    let e = Engine::open_vfs(Arc::new(RealVfs::new()) as Arc<dyn Vfs>, dir, &c, true)
        .with_context(|| format!("creating {}", dir.display()))?;
    let page_size = e.pool().page_size();
    let pool_pages = (pool_mb << 20) / page_size as u64;
    let rows_per_page = ROWS_PER_8K_PAGE * page_size as u64 / 8192;
    let mut pages = Vec::new();
    for (rel, name, tenths) in TABLES {
        let want = pool_pages * tenths / 10;
        progress(format!("scans: loading {name} ({want} pages)"));
        let heap = Heap::create(&e, rel)?.with_fillfactor(90)?;
        let x = e.begin_xid()?;
        heap.bulk_load(
            x,
            true,
            (0..want * rows_per_page).map(row),
            |_| {},
            &mut |_| {},
        )?;
        e.commit_transaction(x)?;
        pages.push((rel, e.pool().nblocks(rel, ForkNumber::Main)?));
    }
    e.checkpoint()?;
    e.shutdown()?;
    Ok(Bed {
        dir: dir.to_path_buf(),
        pool_mb,
        page_size,
        pages,
    })
}

/// What one scan cost.
#[derive(Debug, Clone, Copy)]
struct ScanRun {
    secs: f64,
    tuples: u64,
    pages: u32,
    io: IoCounts,
}

/// Backend I/O over all contexts.
#[derive(Debug, Clone, Copy, Default)]
struct IoCounts {
    hits: u64,
    reads: u64,
}

impl IoCounts {
    fn of(s: &IoStatsSnapshot) -> IoCounts {
        IoCounts {
            hits: s.by_writer(IoWriter::Backend, IoOp::Hit),
            reads: s.by_writer(IoWriter::Backend, IoOp::Read),
        }
    }

    fn hit_ratio(&self) -> f64 {
        self.hits as f64 / (self.hits + self.reads).max(1) as f64
    }
}

/// The plan of an unsynchronized scan, with or without a ring.
fn plain(ring: bool) -> ScanPlan {
    ScanPlan {
        synchronized: false,
        ring,
        trail: false,
    }
}

/// Options of an unsynchronized scan, with or without a ring of the knob's size.
fn plain_opts(ring: bool) -> SeqScanOptions {
    SeqScanOptions {
        plan: Some(plain(ring)),
        ring_bytes: None,
    }
}

/// Reads `hot` three times through the clock, so its pages are warm (usage counts up).
fn warm_hot(e: &Engine) -> Result<()> {
    for _ in 0..3 {
        scan(e, HOT, &plain_opts(false))?;
    }
    Ok(())
}

/// A scan with the engine's knobs: its report, its hit ratio and its seconds.
fn scan_measured(e: &Engine, rel: RelFileId) -> Result<(bufpool::table::ScanReport, f64, f64)> {
    let heap = Heap::open(e, rel);
    let before = e.pool().stats();
    let start = Instant::now();
    let snap = e.txns().snapshot(INVALID_XID);
    let r = heap.scan_with(&snap, &SeqScanOptions::default(), |_, _| {})?;
    let secs = start.elapsed().as_secs_f64();
    let hits = IoCounts::of(&e.pool().stats().since(&before)).hit_ratio();
    Ok((r, hits, secs))
}

fn scan(e: &Engine, rel: RelFileId, opts: &SeqScanOptions) -> Result<ScanRun> {
    scan_watch(e, rel, opts, |_| {})
}

/// A scan that reports its tuple count to `seen` after every tuple.
fn scan_watch(
    e: &Engine,
    rel: RelFileId,
    opts: &SeqScanOptions,
    mut seen: impl FnMut(u64),
) -> Result<ScanRun> {
    let heap = Heap::open(e, rel);
    let before = e.pool().stats();
    let start = Instant::now();
    let snap = e.txns().snapshot(INVALID_XID);
    let mut n = 0u64;
    let r = heap.scan_with(&snap, opts, |_, _| {
        n += 1;
        seen(n);
    })?;
    let secs = start.elapsed().as_secs_f64();
    Ok(ScanRun {
        secs,
        tuples: r.tuples,
        pages: r.pages,
        io: IoCounts::of(&e.pool().stats().since(&before)),
    })
}

fn mb_per_s(pages: u32, page_size: usize, secs: f64) -> f64 {
    f64::from(pages) * page_size as f64 / secs.max(1e-9) / 1e6
}

fn fmt_summary(v: &[f64], digits: usize) -> [String; 3] {
    let s = summarize(v);
    [s.median, s.min, s.max].map(|x| format!("{x:.digits$}"))
}

/// What the targets are taken from, section by section.
#[derive(Debug, Default)]
struct Outcomes {
    /// The hot set's hit ratio after a scan of `big` through a ring, per repeat.
    hot_after_ring: Vec<f64>,
    /// VACUUM of one dead row per page, per ring configuration: medians of forced WAL
    /// flushes and of seconds.
    vacuum_dead: Vec<(RingConf, f64, f64)>,
    /// Pages of `vac`: the pages VACUUM dirties (one dead row on each).
    vac_pages: f64,
    /// Pages read from storage per page of `sync`, per repeat: one scan alone, and two
    /// synchronized scans.
    sync_one: Vec<f64>,
    sync_two: Vec<f64>,
    /// MB/s of the best O_DIRECT scan (median) and of the device's sequential reads.
    best_direct_mb_s: Option<f64>,
    device_mb_s: f64,
}

/// The targets (each left out if its section measured nothing): the hot set's hit ratio
/// after a ring scan; the one-buffer ring's forced WAL flushes per page VACUUM dirtied
/// (the pathology reproduced) and the growing ring's (default cap) over the one-buffer
/// ring's (removed); the growing vacuum ring's forced WAL flushes over the 256 kB ring's
/// and its time over the best fixed ring's; two synchronized scans'
/// reads over one scan's (per repeat, over the one scan's median); the best O_DIRECT scan
/// over the device.
fn targets(o: &Outcomes) -> Vec<Ratio> {
    let mut out = Vec::new();
    let hot = o.hot_after_ring.clone();
    push_ratio(
        &mut out,
        "hot_set_hit_ratio_after_scan",
        hot,
        Goal::AtLeast,
        0.99,
    );
    ring_targets(o, &mut out);
    if !o.sync_one.is_empty() {
        let base = summarize(&o.sync_one).median.max(1e-9);
        let two = o.sync_two.iter().map(|r| r / base).collect();
        push_ratio(&mut out, "syncscan_2_reads_vs_one", two, Goal::AtMost, 1.2);
    }
    let direct = o.best_direct_mb_s.map(|b| b / o.device_mb_s.max(1e-9));
    push_ratio(
        &mut out,
        "odirect_scan_vs_device",
        direct.into_iter().collect(),
        Goal::AtLeast,
        0.9,
    );
    out
}

/// Adds target `name` over `values` to `out`, unless nothing was measured.
fn push_ratio(out: &mut Vec<Ratio>, name: &'static str, values: Vec<f64>, goal: Goal, target: f64) {
    if !values.is_empty() {
        out.push(Ratio::new(name, &values, goal, target));
    }
}

/// Section 3's targets (see [`targets`]), each left out when its rings did not run.
fn ring_targets(o: &Outcomes, out: &mut Vec<Ratio>) {
    let mut push = |name, values, goal, target| push_ratio(out, name, values, goal, target);
    let dead = |c: RingConf| o.vacuum_dead.iter().find(|v| v.0 == c).map(|v| (v.1, v.2));
    let growing = dead(RingConf::Growing(16 << 20));
    let fixed256 = dead(RingConf::Fixed(256 << 10));
    if let Some(one) = dead(RingConf::OneBuffer) {
        if o.vac_pages > 0.0 {
            let per_page = vec![one.0 / o.vac_pages];
            push(
                "one_buffer_ring_flushes_per_page",
                per_page,
                Goal::AtLeast,
                0.9,
            );
        }
        if let Some(g) = dead(RingConf::Growing(2 << 20)) {
            let left = vec![g.0 / one.0.max(1.0)];
            push(
                "growing_ring_flushes_vs_one_buffer",
                left,
                Goal::AtMost,
                0.01,
            );
        }
    }
    let best_fixed = (o.vacuum_dead.iter())
        .filter(|v| matches!(v.0, RingConf::Fixed(_)))
        .map(|v| v.2)
        .fold(f64::INFINITY, f64::min);
    if let (Some(g), Some(f)) = (growing, fixed256) {
        push(
            "growing_ring_flushes_vs_256k",
            vec![g.0 / f.0.max(1.0)],
            Goal::AtMost,
            0.1,
        );
        let t = vec![g.1 / best_fixed.max(1e-9)];
        push("growing_ring_time_vs_best_fixed", t, Goal::AtMost, 1.0);
    }
    // The same at VACUUM's default cap (vacuum_buffer_usage_limit 2 MB).
    if let (Some(g), Some(f)) = (dead(RingConf::Growing(2 << 20)), fixed256) {
        let flushes = vec![g.0 / f.0.max(1.0)];
        push(
            "growing_ring_default_cap_flushes_vs_256k",
            flushes,
            Goal::AtMost,
            0.1,
        );
        let t = vec![g.1 / best_fixed.max(1e-9)];
        push(
            "growing_ring_default_cap_time_vs_best_fixed",
            t,
            Goal::AtMost,
            1.0,
        );
    }
}

/// Runs the experiment on `--device` (smaller with `--quick` and in a debug build).
pub fn run(a: &Args, r: &mut Runner) -> Result<Report> {
    let c = r.common.clone();
    let pool_mb = a.scan_pool_mb.unwrap_or(if cfg!(debug_assertions) {
        2
    } else if c.short() {
        8
    } else {
        64
    });
    r.use_device(&a.device)?;
    r.set_io("buffered and O_DIRECT (see each table)");
    let mut notes = Vec::new();
    // The load, then the seven sections of the module doc, a step each.
    r.plan(Steps::new().untimed(1 + 7));
    r.step("loading the tables");
    let bed = load(r.data_root()?, pool_mb)?;
    let mut out = Outcomes::default();
    let mut meta = serde_json::Map::new();
    let m = &mut meta;
    let tables = vec![
        section(r, "ring-size sweep (section 1)", || ring_sweep(&bed, &c, m))?,
        section(r, "hot set (section 2)", || hot_set(&bed, &c, &mut out, m))?,
        section(r, "vacuum and bulk-write rings (section 3)", || {
            vacuum_rings(&bed, &c, &mut out, m)
        })?,
        section(r, "synchronized scans (section 4)", || {
            sync_scans(&bed, &c, &mut out, m)
        })?,
        section(r, "cache trail (section 5)", || cache_trail(&bed, &c, m))?,
        section(r, "scan-plan rules (section 6)", || strategy_rules(&bed, m))?,
        section(r, "readahead (section 7)", || {
            readahead(&bed, &c, &mut out, m, &mut notes)
        })?,
    ];
    let mut metadata = r.metadata();
    metadata.insert("pool_mb".into(), pool_mb.into());
    metadata.insert(
        "tables".into(),
        serde_json::Value::Object(
            TABLES
                .iter()
                .map(|(rel, name, _)| (name.to_string(), bed.pages(*rel).into()))
                .collect(),
        ),
    );
    metadata.extend(meta);
    Ok(Report {
        header: format!(
            "experiment scans: pool {} MB, tables hot {} / trail {} / sync {} / big {} pages, device {}",
            pool_mb,
            bed.pages(HOT),
            bed.pages(TRAIL),
            bed.pages(SYNC),
            bed.pages(BIG),
            r.device_desc()
        ),
        figures: Vec::new(),
        ratios: targets(&out),
        metadata,
        notes,
        tables,
    })
}

/// Section `label` of the report (its table from `f`), as a step.
fn section(r: &Runner, label: &str, f: impl FnOnce() -> Result<String>) -> Result<String> {
    r.step(label);
    f()
}

/// How PostgreSQL 8.3 read a table, in Heikki's ring-size test: one block per read, no
/// look-ahead (the OS read ahead for it), so the pages a scan holds do not depend on its
/// ring's size.
const ONE_BLOCK: [(&str, &str); 2] = [
    ("effective_io_concurrency", "0"),
    ("io_combine_limit", "8kB"),
];

/// One pass of the ring-size sweep on an engine opened with `sets`: per ring size (None:
/// no ring), the seconds of each scan and the reads of the last.
fn sweep_pass(
    bed: &Bed,
    c: &Common,
    sizes: &[Option<u64>],
    sets: &[(&str, &str)],
) -> Result<Vec<(Vec<f64>, u64)>> {
    let e = bed.open(sets)?;
    let mut out = Vec::new();
    for &size in sizes {
        let opts = SeqScanOptions {
            plan: Some(plain(size.is_some())),
            ring_bytes: size.map(|k| (k as usize) * bed.page_size),
        };
        let mut secs = Vec::new();
        let mut reads = 0;
        for _ in 0..c.repeats_unless_quick() {
            let r = scan(&e, BIG, &opts)?;
            secs.push(r.secs);
            reads = r.io.reads;
        }
        let label = size.map_or("no ring".to_string(), |k| k.to_string());
        let how = if sets.is_empty() {
            ""
        } else {
            ", one block at a time"
        };
        progress(format!(
            "scans: ring {label}{how}: {:.3} s",
            summarize(&secs).median
        ));
        out.push((secs, reads));
    }
    e.shutdown()?;
    Ok(out)
}

/// Section 1: seconds per scan of `big` for each ring size and no ring, with the default
/// read streams (look-ahead capped at the ring size minus one) and reading one block at a
/// time ([`ONE_BLOCK`]).
fn ring_sweep(
    bed: &Bed,
    c: &Common,
    meta: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<String> {
    let e = bed.open(&[])?;
    progress("scans: ring-size sweep (warming the OS cache)");
    scan(&e, BIG, &plain_opts(true))?;
    e.shutdown()?;
    let cap = (bed.pool_pages() / 8).max(1);
    let mut sizes: Vec<Option<u64>> = std::iter::successors(Some(1u64), |k| Some(k * 2))
        .take_while(|&k| k <= cap.min(1024))
        .map(Some)
        .collect();
    sizes.push(None);
    let streams = sweep_pass(bed, c, &sizes, &[])?;
    let one_block = sweep_pass(bed, c, &sizes, &ONE_BLOCK)?;
    let head = [
        "ring (buffers)",
        "s/scan median",
        "min",
        "max",
        "MB/s",
        "reads",
    ];
    let mut cells = vec![head.map(String::from).to_vec()];
    cells[0].extend(["one block: s/scan", "min", "max"].map(String::from));
    let mut json = Vec::new();
    for ((size, (secs, reads)), (secs1, _)) in sizes.iter().zip(&streams).zip(&one_block) {
        let med = summarize(secs).median;
        let mut row = vec![size.map_or("no ring".to_string(), |k| k.to_string())];
        row.extend(fmt_summary(secs, 3));
        row.push(format!(
            "{:.0}",
            mb_per_s(bed.pages(BIG), bed.page_size, med)
        ));
        row.push(reads.to_string());
        row.extend(fmt_summary(secs1, 3));
        cells.push(row);
        json.push(serde_json::json!({
            "ring_buffers": size,
            "seconds": summarize(secs),
            "seconds_one_block": summarize(secs1),
        }));
    }
    meta.insert("ring_sweep".into(), json.into());
    Ok(format!(
        "Ring-size sweep: count-style scan of big ({} pages, {:.1} pools, OS cache warm, \
         buffered); default read streams (look-ahead at most the ring size minus one) and \
         one block at a time (no look-ahead, as PostgreSQL 8.3 read)\n{}",
        bed.pages(BIG),
        f64::from(bed.pages(BIG)) / bed.pool_pages() as f64,
        layout(&cells, 1)
    ))
}

/// Section 2: the hot set's hit ratio after a scan of `big`, ring on and off.
fn hot_set(
    bed: &Bed,
    c: &Common,
    out: &mut Outcomes,
    meta: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<String> {
    let mut cells = vec![
        ["big scanned", "hot hit ratio after", "median", "min", "max"]
            .map(String::from)
            .to_vec(),
    ];
    let mut json = serde_json::Map::new();
    for ring in [true, false] {
        let mut ratios = Vec::new();
        for _ in 0..c.repeats_unless_quick() {
            let e = bed.open(&[])?;
            warm_hot(&e)?;
            scan(&e, BIG, &plain_opts(ring))?;
            let after = scan(&e, HOT, &plain_opts(false))?;
            ratios.push(after.io.hit_ratio());
            e.shutdown()?;
        }
        if ring {
            out.hot_after_ring = ratios.clone();
        }
        let label = if ring {
            "through a 256 kB ring"
        } else {
            "through the clock (no ring)"
        };
        progress(format!(
            "scans: hot set after a scan {label}: {:.3}",
            summarize(&ratios).median
        ));
        let s = fmt_summary(&ratios, 4);
        cells.push(vec![
            label.to_string(),
            String::new(),
            s[0].clone(),
            s[1].clone(),
            s[2].clone(),
        ]);
        json.insert(
            if ring { "ring" } else { "no_ring" }.into(),
            serde_json::to_value(summarize(&ratios))?,
        );
    }
    meta.insert("hot_set_hit_ratio".into(), json.into());
    Ok(format!(
        "Hot-set survival: hot ({} pages, a tenth of the pool) read 3 times, big ({} pages) scanned, hot read again\n{}",
        bed.pages(HOT),
        bed.pages(BIG),
        layout(&cells, 2)
    ))
}

/// Section 3's ring configurations, in the order they run: a ring of one buffer (the
/// thread's pathology: every page it dirties is written again at the next step, before
/// its WAL record is durable, so a WAL flush per page), fixed sizes, and growing up to
/// VACUUM's default cap (`vacuum_buffer_usage_limit` 2 MB) and up to 16 MB.
const RING_CONFS: [RingConf; 7] = [
    RingConf::None,
    RingConf::OneBuffer,
    RingConf::Fixed(256 << 10),
    RingConf::Fixed(2 << 20),
    RingConf::Fixed(16 << 20),
    RingConf::Growing(2 << 20),
    RingConf::Growing(16 << 20),
];

/// A ring configuration of section 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RingConf {
    None,
    /// One page: below the ring knobs' 128 kB floor, so built through `Ring::with_growth`.
    OneBuffer,
    Fixed(usize),
    Growing(usize),
}

impl RingConf {
    fn label(self) -> String {
        match self {
            RingConf::None => "no ring".into(),
            RingConf::OneBuffer => "fixed 1 buffer".into(),
            RingConf::Fixed(b) => format!("fixed {}", fmt_bytes(b)),
            RingConf::Growing(b) => format!("growing (256 kB up to {})", fmt_bytes(b)),
        }
    }

    fn ring(self, kind: RingKind, e: &Engine) -> Option<Ring> {
        match self {
            RingConf::None => None,
            RingConf::OneBuffer => Ring::with_growth(kind, e.pool().page_size(), false, e.pool()),
            RingConf::Fixed(b) => Ring::with_growth(kind, b, false, e.pool()),
            RingConf::Growing(b) => Ring::with_growth(kind, b, true, e.pool()),
        }
    }
}

fn fmt_bytes(b: usize) -> String {
    if b >= 1 << 20 {
        format!("{} MB", b >> 20)
    } else {
        format!("{} kB", b >> 10)
    }
}

/// WAL flushes forced by writes of dirty pages, over every context.
fn forced_flushes(e: &Engine) -> u64 {
    [
        IoContext::Normal,
        IoContext::BulkRead,
        IoContext::BulkWrite,
        IoContext::Vacuum,
    ]
    .iter()
    .map(|&c| e.pool().wal_flushes_forced(c))
    .sum()
}

/// A workload of section 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RingWork {
    /// VACUUM of `vac` after one committed delete per page.
    VacuumDead,
    /// VACUUM of `trail`, which has nothing to clean.
    VacuumClean,
    /// A bulk load of a pool's worth of rows into a new relation.
    BulkLoad,
}

impl RingWork {
    const ALL: [RingWork; 3] = [
        RingWork::VacuumDead,
        RingWork::VacuumClean,
        RingWork::BulkLoad,
    ];

    fn name(self) -> &'static str {
        match self {
            RingWork::VacuumDead => "vacuum, 1 dead row per page",
            RingWork::VacuumClean => "vacuum, clean table",
            RingWork::BulkLoad => "bulk load",
        }
    }
}

/// Section 3's rounds so far: deletes of `vac` (the slot deleted next) and bulk loads
/// (the relation loaded next).
#[derive(Debug, Default)]
struct RingRounds {
    delete: u16,
    load: u32,
}

/// Section 3: forced WAL flushes and seconds of VACUUM (one dead row per page, and a
/// clean table) and of a bulk load, per ring configuration.
fn vacuum_rings(
    bed: &Bed,
    c: &Common,
    out: &mut Outcomes,
    meta: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<String> {
    let repeats = c.repeats_unless_quick();
    // At least 5 repeats (unless --quick): the time target compares medians a few percent
    // apart.
    let vac_repeats = if c.short() { repeats } else { repeats.max(5) };
    out.vac_pages = f64::from(bed.pages(VAC));
    let mut cells = vec![[
        "workload",
        "ring",
        "forced WAL flushes (median)",
        "min",
        "max",
        "s (median)",
        "ring size at end",
    ]
    .map(String::from)
    .to_vec()];
    let mut json = Vec::new();
    let mut rounds = RingRounds::default();
    for work in RingWork::ALL {
        for conf in RING_CONFS {
            let (flushes, secs, end_len) = ring_runs(bed, work, conf, vac_repeats, &mut rounds)?;
            let (f, t) = (summarize(&flushes).median, summarize(&secs).median);
            let (workload, ring) = (work.name(), conf.label());
            progress(format!(
                "scans: {workload}, {ring}: {f:.0} forced WAL flushes, {t:.3} s"
            ));
            if work == RingWork::VacuumDead {
                out.vacuum_dead.push((conf, f, t));
            }
            let [s0, s1, s2] = fmt_summary(&flushes, 0);
            let end = (end_len > 0).then(|| format!("{end_len} buffers"));
            let end = end.unwrap_or_else(|| "-".into());
            cells.push(vec![
                workload.into(),
                ring.clone(),
                s0,
                s1,
                s2,
                format!("{t:.3}"),
                end,
            ]);
            json.push(serde_json::json!({
                "workload": workload, "ring": ring,
                "forced_wal_flushes": summarize(&flushes), "seconds": summarize(&secs),
                "ring_buffers_at_end": end_len,
            }));
        }
    }
    meta.insert("vacuum_rings".into(), json.into());
    Ok(format!(
        "Vacuum and bulk-write rings: vac ({} pages, 2 pools), trail (clean), bulk load of {} rows (1 pool); wal_buffers = pool/32, synchronous_commit = on\n{}",
        bed.pages(VAC),
        bed.pool_pages() * ROWS_PER_8K_PAGE,
        layout(&cells, 2)
    ))
}

/// `repeats` runs of [`ring_run`]: forced WAL flushes and seconds of each, and the ring's
/// buffers at the end of the last.
fn ring_runs(
    bed: &Bed,
    work: RingWork,
    conf: RingConf,
    repeats: usize,
    rounds: &mut RingRounds,
) -> Result<(Vec<f64>, Vec<f64>, usize)> {
    let (mut flushes, mut secs, mut end_len) = (Vec::new(), Vec::new(), 0usize);
    for _ in 0..repeats {
        let (f, s, len) = ring_run(bed, work, conf, rounds)?;
        flushes.push(f);
        secs.push(s);
        end_len = len;
    }
    Ok((flushes, secs, end_len))
}

/// One run of `work` through the ring `conf`: (forced WAL flushes, seconds, buffers in the
/// ring at the end).
fn ring_run(
    bed: &Bed,
    work: RingWork,
    conf: RingConf,
    rounds: &mut RingRounds,
) -> Result<(f64, f64, usize)> {
    if work == RingWork::VacuumDead {
        rounds.delete += 1;
        delete_one_row_per_page(bed, rounds.delete)?;
    }
    let e = bed.open(&[])?;
    let kind = if work == RingWork::BulkLoad {
        RingKind::BulkWrite
    } else {
        RingKind::Vacuum
    };
    let mut ring = conf.ring(kind, &e);
    let before = forced_flushes(&e);
    let start = Instant::now();
    let loaded = if work == RingWork::BulkLoad {
        rounds.load += 1;
        let rel = RelFileId::new(0, LOAD_BASE + rounds.load);
        let heap = Heap::create(&e, rel)?.with_fillfactor(90)?;
        let x = e.begin_xid()?;
        let rows = (0..bed.pool_pages() * ROWS_PER_8K_PAGE).map(row);
        heap.bulk_load_with(x, true, rows, |_| {}, &mut |_| {}, ring.as_mut())?;
        e.commit_transaction(x)?;
        Some(rel)
    } else {
        let rel = if work == RingWork::VacuumClean {
            TRAIL
        } else {
            VAC
        };
        Heap::open(&e, rel).vacuum_with(false, ring.as_mut())?;
        None
    };
    let secs = start.elapsed().as_secs_f64();
    let flushes = (forced_flushes(&e) - before) as f64;
    if let Some(rel) = loaded {
        e.drop_relation(rel)?;
    }
    let end_len = ring.as_ref().map_or(0, |r| r.len());
    drop(ring);
    e.shutdown()?;
    Ok((flushes, secs, end_len))
}

/// One committed delete per page of `vac` (slot `slot`), then everything clean and durable.
fn delete_one_row_per_page(bed: &Bed, slot: u16) -> Result<()> {
    let e = bed.open(&[])?;
    let heap = Heap::open(&e, VAC);
    let x = e.begin_xid()?;
    for block in 0..bed.pages(VAC) {
        heap.delete(x, Tid { block, slot })?;
    }
    e.commit_transaction(x)?;
    e.checkpoint()?;
    e.shutdown()?;
    Ok(())
}

/// Section 4: how far (in percent of the table) the leader is ahead of the next scan.
const STAGGER_PERCENT: u64 = 5;

/// Section 4's modes: `synchronize_seqscans` off, on, and on with `seqscan_sync_pacing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sync {
    Off,
    On,
    Paced,
}

impl Sync {
    fn name(self) -> &'static str {
        match self {
            Sync::Off => "off",
            Sync::On => "on",
            Sync::Paced => "on + pacing",
        }
    }
}

/// Section 4: staggered concurrent scans of `sync`: pages read per page of the table.
fn sync_scans(
    bed: &Bed,
    c: &Common,
    out: &mut Outcomes,
    meta: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<String> {
    let pages = bed.pages(SYNC);
    let total = {
        let e = bed.open(&[])?;
        let r = scan(&e, SYNC, &SeqScanOptions::default())?;
        e.shutdown()?;
        r.tuples
    };
    let mut cells = vec![[
        "scans",
        "synchronize_seqscans",
        "pages read / table pages (median)",
        "min",
        "max",
        "s (median)",
    ]
    .map(String::from)
    .to_vec()];
    let mut json = Vec::new();
    let modes = [
        (1usize, Sync::On),
        (2, Sync::On),
        (2, Sync::Off),
        (2, Sync::Paced),
    ];
    let modes = modes
        .into_iter()
        .chain([(4, Sync::On), (4, Sync::Off), (4, Sync::Paced)]);
    for (n, sync) in modes {
        let (mut ratios, mut secs) = (Vec::new(), Vec::new());
        for _ in 0..c.repeats_unless_quick() {
            let (s, reads) = staggered_scans(bed, n, sync, total)?;
            secs.push(s);
            ratios.push(reads as f64 / f64::from(pages));
        }
        match (n, sync) {
            (1, _) => out.sync_one = ratios.clone(),
            // The target measures the default: synchronized and paced.
            (2, Sync::Paced) => out.sync_two = ratios.clone(),
            _ => {}
        }
        let on = sync.name();
        progress(format!(
            "scans: {n} concurrent scans, sync {on}: {:.2} pages read per table page",
            summarize(&ratios).median
        ));
        let [s0, s1, s2] = fmt_summary(&ratios, 2);
        let s = format!("{:.3}", summarize(&secs).median);
        cells.push(vec![n.to_string(), on.to_string(), s0, s1, s2, s]);
        json.push(serde_json::json!({
            "scans": n, "synchronized": sync != Sync::Off, "paced": sync == Sync::Paced,
            "reads_per_page": summarize(&ratios), "seconds": summarize(&secs),
        }));
    }
    meta.insert("sync_scans".into(), json.into());
    Ok(format!(
        "Synchronized scans: concurrent scans of sync ({pages} pages, 4 pools, O_DIRECT), each through its ring, scan k starting when the first has passed k × {STAGGER_PERCENT}% of the table (ideal with sync: 1.05 for 2, 1.30 for 4)\n{}",
        layout(&cells, 2)
    ))
}

/// One repeat of section 4: `n` scans of `sync` (`total` rows) on a fresh pool, scan k
/// starting when scan 0 has passed k × 5% of the table: a synchronized follower then
/// shares everything but the part the leader read before it started, so the ideal is 1 +
/// 5% for two scans, 1 + 30% for four. Returns (seconds, pages read from storage).
fn staggered_scans(bed: &Bed, n: usize, sync: Sync, total: u64) -> Result<(f64, u64)> {
    // O_DIRECT: the table is read from the device, not the OS cache, as in the seed (a hit
    // must be cheaper than a read for a follower to catch up).
    let e = bed.open(&[
        (
            "synchronize_seqscans",
            if sync == Sync::Off { "off" } else { "on" },
        ),
        (
            "seqscan_sync_pacing",
            if sync == Sync::Paced { "on" } else { "off" },
        ),
        ("io_direct", "on"),
    ])?;
    let before = e.pool().stats();
    let start = Instant::now();
    // Rows the leader has passed (u64::MAX once it is done).
    let leader = Arc::new((Mutex::new(0u64), Condvar::new()));
    let set = |v: u64| {
        let (m, cv) = &*leader;
        *m.lock().unwrap() = v;
        cv.notify_all();
    };
    std::thread::scope(|s| -> Result<()> {
        let mut handles = Vec::new();
        for k in 0..n {
            let (e, leader, set) = (&e, leader.clone(), &set);
            handles.push(s.spawn(move || -> Result<ScanRun> {
                if k > 0 {
                    let need = total * k as u64 * STAGGER_PERCENT / 100;
                    let (m, cv) = &*leader;
                    let mut g = m.lock().unwrap();
                    while *g < need {
                        g = cv.wait(g).unwrap();
                    }
                }
                scan_watch(e, SYNC, &SeqScanOptions::default(), |t| {
                    if k == 0 && t % 256 == 0 {
                        set(t);
                    }
                })
            }));
        }
        for (k, h) in handles.into_iter().enumerate() {
            let r = h.join().expect("scan thread")?;
            if k == 0 {
                // The leader is done: release any follower still waiting.
                set(u64::MAX);
            }
            anyhow::ensure!(
                r.tuples == total,
                "a synchronized scan returned {} rows, not {total}",
                r.tuples
            );
        }
        Ok(())
    })?;
    let secs = start.elapsed().as_secs_f64();
    let reads = IoCounts::of(&e.pool().stats().since(&before)).reads;
    e.shutdown()?;
    Ok((secs, reads))
}

/// Section 6: the two scan-plan rules side by side (seed 003 step 3 against PostgreSQL's
/// quarter rule): for tables of 1.2, 4 and 10 pools, with a warm hot set, what each rule
/// chose, the second scan's hit ratio and the hot set's hit ratio afterwards. One run each
/// (the outcomes are counts, not timings).
fn strategy_rules(
    bed: &Bed,
    meta: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<String> {
    let mut cells = vec![[
        "seqscan_strategy",
        "table",
        "pools",
        "plan",
        "2nd scan hit ratio",
        "hot set hit ratio after",
        "2nd scan s",
    ]
    .map(String::from)
    .to_vec()];
    let mut json = Vec::new();
    for (rule, trail) in [("quarter", "off"), ("seed003", "off"), ("seed003", "on")] {
        let label = if trail == "on" {
            format!("{rule} + 3A")
        } else {
            rule.to_string()
        };
        for (rel, name) in [(TRAIL, "trail"), (SYNC, "sync"), (BIG, "big")] {
            let e = bed.open(&[("seqscan_strategy", rule), ("seqscan_cache_trail", trail)])?;
            warm_hot(&e)?;
            scan(&e, rel, &SeqScanOptions::default())?;
            let (r, second, secs) = scan_measured(&e, rel)?;
            let hot = scan(&e, HOT, &plain_opts(false))?;
            e.shutdown()?;
            let plan = format!(
                "{}, {}",
                if r.plan.synchronized {
                    "synchronized start"
                } else {
                    "block 0"
                },
                if r.ring { "ring" } else { "clock" }
            ) + if r.trail_pages > 0 { ", trail" } else { "" };
            let pools = f64::from(bed.pages(rel)) / bed.pool_pages() as f64;
            progress(format!(
                "scans: {label} rule, {name}: {plan}; second scan {second:.3} hits, hot set {:.3}",
                hot.io.hit_ratio()
            ));
            cells.push(vec![
                label.clone(),
                name.to_string(),
                format!("{pools:.1}"),
                plan.clone(),
                format!("{second:.3}"),
                format!("{:.3}", hot.io.hit_ratio()),
                format!("{secs:.3}"),
            ]);
            json.push(serde_json::json!({
                "rule": label, "table": name, "pools": pools, "plan": plan,
                "second_scan_hit_ratio": second, "hot_hit_ratio_after": hot.io.hit_ratio(),
                "second_scan_seconds": secs,
            }));
        }
    }
    meta.insert("strategy_rules".into(), json.into());
    Ok(format!(
        "Scan-plan rules: hot (0.1 pool) warm, a table scanned twice, hot read again (buffered)\n{}",
        layout(&cells, 4)
    ))
}

/// Section 5: the second scan of `trail` (1.2 pools, seed003 rule), 3A on and off.
fn cache_trail(
    bed: &Bed,
    c: &Common,
    meta: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<String> {
    let mut cells = vec![[
        "seqscan_cache_trail",
        "2nd scan hit ratio (median)",
        "min",
        "max",
        "2nd scan s (median)",
        "trail pages",
    ]
    .map(String::from)
    .to_vec()];
    let mut json = serde_json::Map::new();
    for trail in [false, true] {
        let on = if trail { "on" } else { "off" };
        let (mut ratios, mut secs, mut trail_pages) = (Vec::new(), Vec::new(), 0u64);
        for _ in 0..c.repeats_unless_quick() {
            let e = bed.open(&[("seqscan_strategy", "seed003"), ("seqscan_cache_trail", on)])?;
            scan(&e, TRAIL, &SeqScanOptions::default())?;
            let (r, hits, s) = scan_measured(&e, TRAIL)?;
            secs.push(s);
            ratios.push(hits);
            trail_pages = u64::from(r.trail_pages);
            e.shutdown()?;
        }
        progress(format!(
            "scans: cache trail {on}: second-scan hit ratio {:.3}",
            summarize(&ratios).median
        ));
        let s = fmt_summary(&ratios, 3);
        cells.push(vec![
            on.to_string(),
            s[0].clone(),
            s[1].clone(),
            s[2].clone(),
            format!("{:.3}", summarize(&secs).median),
            trail_pages.to_string(),
        ]);
        json.insert(
            on.into(),
            serde_json::json!({"hit_ratio": summarize(&ratios), "seconds": summarize(&secs), "trail_pages": trail_pages}),
        );
    }
    meta.insert("cache_trail".into(), json.into());
    Ok(format!(
        "Cache trail (seed 003 step 3A): trail ({} pages, 1.2 pools) scanned twice, seqscan_strategy = seed003\n{}",
        bed.pages(TRAIL),
        layout(&cells, 1)
    ))
}

/// The device's sequential rate: `O_DIRECT` reads of `chunk` bytes over the files of
/// `rel`, by `readers` threads taking the chunks in turn (1: one read at a time; more: as
/// many reads in flight, the most a scan's read-ahead can ask of the device).
fn device_rate(bed: &Bed, rel: RelFileId, chunk: usize, readers: usize) -> Result<f64> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let e = bed.open(&[])?;
    let smgr = e.pool().smgr().clone();
    let segs = bed.pages(rel).div_ceil(smgr.segment_blocks());
    let paths: Vec<PathBuf> = (0..segs)
        .map(|s| smgr.segment_path(rel, ForkNumber::Main, s))
        .collect();
    drop(smgr);
    e.shutdown()?;
    let files = paths
        .iter()
        .map(|p| {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(p)
                .with_context(|| format!("opening {} with O_DIRECT", p.display()))?;
            let len = f.metadata()?.len();
            Ok((f, len, p.clone()))
        })
        .collect::<Result<Vec<_>>>()?;
    // Every (file, offset) chunk in file order; reader r takes chunks r, r + readers, ...
    let chunks: Vec<(usize, u64)> = files
        .iter()
        .enumerate()
        .flat_map(|(i, (_, len, _))| {
            (0..len.div_ceil(chunk as u64)).map(move |c| (i, c * chunk as u64))
        })
        .collect();
    let start = Instant::now();
    let bytes = std::thread::scope(|s| -> Result<u64> {
        let handles: Vec<_> = (0..readers)
            .map(|r| {
                let (files, chunks) = (&files, &chunks);
                s.spawn(move || -> Result<u64> {
                    let mut buf = bufpool::vfs::AlignedBuf::zeroed(chunk);
                    let mut bytes = 0u64;
                    for &(i, off) in chunks.iter().skip(r).step_by(readers) {
                        let (f, _, p) = &files[i];
                        let n = f
                            .read_at(buf.as_mut_slice(), off)
                            .with_context(|| format!("reading {}", p.display()))?;
                        bytes += n as u64;
                    }
                    Ok(bytes)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("reader")).sum()
    })?;
    Ok(bytes as f64 / start.elapsed().as_secs_f64().max(1e-9) / 1e6)
}
/// The device's sequential O_DIRECT rate over `sync`: reads of 256 KiB and 1 MiB, one at
/// a time or four in flight, each the median over the repeats, with its label.
fn device_rates(bed: &Bed, c: &Common) -> Result<Vec<(String, Summary)>> {
    let mut device = Vec::new();
    for (chunk, readers) in [
        (256usize << 10, 1usize),
        (256 << 10, 4),
        (1 << 20, 1),
        (1 << 20, 4),
    ] {
        let mut v = Vec::new();
        for _ in 0..c.repeats_unless_quick() {
            v.push(device_rate(bed, SYNC, chunk, readers)?);
        }
        let label = format!("{} KiB x{readers}", chunk >> 10);
        progress(format!(
            "scans: device sequential O_DIRECT reads of {label}: {:.0} MB/s",
            summarize(&v).median
        ));
        device.push((label, summarize(&v)));
    }
    Ok(device)
}

/// Section 7: scan MB/s per io_combine_limit, io_method and buffered/O_DIRECT.
fn readahead(
    bed: &Bed,
    c: &Common,
    out: &mut Outcomes,
    meta: &mut serde_json::Map<String, serde_json::Value>,
    notes: &mut Vec<String>,
) -> Result<String> {
    // The device's rate: the best of its sequential reads (median over the repeats of each).
    let device = device_rates(bed, c)?;
    let (dev_label, dev, dev_all) = device_summary(&device);
    let mut cells = vec![[
        "io",
        "io_method",
        "io_combine_limit",
        "MB/s (median)",
        "min",
        "max",
        "vs device",
    ]
    .map(String::from)
    .to_vec()];
    let mut json = Vec::new();
    let mut best_direct: Option<(f64, String)> = None;
    for (direct, method, combine) in readahead_configs(c.short()) {
        let rates = readahead_rates(bed, c, direct, method, combine)?;
        let med = summarize(&rates).median;
        let io = if direct { "O_DIRECT" } else { "buffered" };
        progress(format!("scans: {io} {method} {combine}: {med:.0} MB/s"));
        if direct && best_direct.as_ref().is_none_or(|b| med > b.0) {
            best_direct = Some((med, format!("{method}, {combine}")));
        }
        let [s0, s1, s2] = fmt_summary(&rates, 0);
        let vs = format!("{:.2}", med / dev.max(1e-9));
        cells.push(vec![
            io.into(),
            method.into(),
            combine.into(),
            s0,
            s1,
            s2,
            vs,
        ]);
        json.push(serde_json::json!({
            "io": io, "io_method": method, "io_combine_limit": combine,
            "mb_per_s": summarize(&rates),
        }));
    }
    out.device_mb_s = dev;
    if let Some((best, which)) = best_direct {
        out.best_direct_mb_s = Some(best);
        notes.push(format!(
            "odirect_scan_vs_device: the best O_DIRECT scan ({which}, {best:.0} MB/s) over the device's \
             sequential O_DIRECT rate ({dev:.0} MB/s, the best of {dev_all}: {dev_label}), same files, same run"
        ));
    }
    let rates = device
        .iter()
        .map(|(l, s)| Ok((l.clone(), serde_json::to_value(s)?)));
    let rates = rates.collect::<Result<serde_json::Map<_, _>>>()?;
    meta.insert("device_mb_per_s".into(), rates.into());
    meta.insert("readahead".into(), json.into());
    Ok(format!(
        "Readahead: ring scan of sync ({} pages) from block 0; device O_DIRECT sequential reads (MB/s, reads of size x in flight): {dev_all}\n{}",
        bed.pages(SYNC),
        layout(&cells, 3)
    ))
}

/// The best of the device's rates (median MB/s) with its label ("" and 0 if none), and
/// every rate as "label MB/s", comma-separated.
fn device_summary(device: &[(String, Summary)]) -> (String, f64, String) {
    let (label, best) =
        device
            .iter()
            .map(|(l, s)| (l.clone(), s.median))
            .fold(
                (String::new(), 0.0f64),
                |a, b| if b.1 > a.1 { b } else { a },
            );
    let all = device
        .iter()
        .map(|(l, s)| format!("{l} {:.0}", s.median))
        .collect::<Vec<_>>()
        .join(", ");
    (label, best, all)
}

/// Section 7's configurations in order: (O_DIRECT, io_method, io_combine_limit), buffered
/// first (two combine limits with `--quick`, four otherwise).
fn readahead_configs(quick: bool) -> Vec<(bool, &'static str, &'static str)> {
    let combines: &[&'static str] = if quick {
        &["8kB", "128kB"]
    } else {
        &["8kB", "128kB", "256kB", "1MB"]
    };
    let mut configs = Vec::new();
    for direct in [false, true] {
        for method in ["sync", "worker", "io_uring"] {
            for &combine in combines {
                configs.push((direct, method, combine));
            }
        }
    }
    configs
}

/// MB/s of a ring scan of `sync` on a fresh pool with these I/O settings, per repeat.
fn readahead_rates(
    bed: &Bed,
    c: &Common,
    direct: bool,
    method: &str,
    combine: &str,
) -> Result<Vec<f64>> {
    let sets = [
        ("io_direct", if direct { "on" } else { "off" }),
        ("io_method", method),
        ("io_combine_limit", combine),
    ];
    let mut rates = Vec::new();
    for _ in 0..c.repeats_unless_quick() {
        let e = bed.open(&sets)?;
        let r = scan(&e, SYNC, &plain_opts(true))?;
        rates.push(mb_per_s(r.pages, bed.page_size, r.secs));
        e.shutdown()?;
    }
    Ok(rates)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outcomes that meet every target: the one-buffer ring forces a flush for 95% of the
    /// pages, the growing ring flushes 1/20 of the 256 kB ring's
    /// (2/25 at the default cap) and is as fast as the best fixed ring, two synchronized scans read 1.1x one scan's
    /// pages, the best O_DIRECT scan reaches 0.95 of the device.
    fn passing() -> Outcomes {
        Outcomes {
            hot_after_ring: vec![1.0, 0.99, 0.5],
            vacuum_dead: vec![
                (RingConf::None, 0.0, 3.0),
                (RingConf::OneBuffer, 1900.0, 2.0),
                (RingConf::Fixed(256 << 10), 200.0, 1.2),
                (RingConf::Fixed(2 << 20), 20.0, 1.0),
                (RingConf::Fixed(16 << 20), 2.0, 1.1),
                (RingConf::Growing(2 << 20), 16.0, 0.9),
                (RingConf::Growing(16 << 20), 10.0, 1.0),
            ],
            vac_pages: 2000.0,
            sync_one: vec![1.0, 2.0, 1.0],
            sync_two: vec![1.1, 1.0, 1.5],
            best_direct_mb_s: Some(950.0),
            device_mb_s: 1000.0,
        }
    }

    #[test]
    fn targets_come_from_each_section() {
        let t = targets(&passing());
        let got: Vec<(&str, f64, bool)> = t.iter().map(|r| (r.name, r.median, r.pass)).collect();
        assert_eq!(
            got,
            [
                ("hot_set_hit_ratio_after_scan", 0.99, true),
                ("one_buffer_ring_flushes_per_page", 0.95, true),
                ("growing_ring_flushes_vs_one_buffer", 16.0 / 1900.0, true),
                ("growing_ring_flushes_vs_256k", 0.05, true),
                ("growing_ring_time_vs_best_fixed", 1.0, true),
                ("growing_ring_default_cap_flushes_vs_256k", 0.08, true),
                ("growing_ring_default_cap_time_vs_best_fixed", 0.9, true),
                ("syncscan_2_reads_vs_one", 1.1, true),
                ("odirect_scan_vs_device", 0.95, true),
            ]
        );
    }

    #[test]
    fn just_past_each_target_misses() {
        let mut o = passing();
        o.hot_after_ring[1] = 0.989;
        o.vacuum_dead[1] = (RingConf::OneBuffer, 1799.0, 2.0);
        o.vacuum_dead[5] = (RingConf::Growing(2 << 20), 20.1, 1.01);
        o.vacuum_dead[6] = (RingConf::Growing(16 << 20), 20.1, 1.01);
        o.sync_two[0] = 1.21;
        o.best_direct_mb_s = Some(899.0);
        let t = targets(&o);
        assert_eq!(t.len(), 9);
        assert!(t.iter().all(|r| !r.pass), "{t:?}");
        // A section that measured nothing gives no target.
        o.sync_one.clear();
        o.best_direct_mb_s = None;
        assert_eq!(targets(&o).len(), 7);
    }
}
