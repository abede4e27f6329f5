//! `bufpool experiment scans` (issue 15, seed 003): rings, synchronized scans, the cache
//! trail and read streams, each on and off in one run over one set of tables.
//!
//! The tables (one data directory, loaded once with frozen 100-byte rows, reopened with a
//! fresh pool for every configuration so that no run inherits another's cache):
//! `hot` (a tenth of the pool), `trail` (1.2 pools), `sync` (4 pools), `big` (10 pools)
//! and `vac` (2 pools, for VACUUM).
//! Sections, each a table in the report:
//! 1. Ring-size sweep (seed 003, Heikki's table): seconds per count-style scan of `big`
//!    (in the OS cache: buffered files) with rings of 1, 2, 4, … buffers and no ring.
//! 2. Hot-set survival: `hot` read three times, then `big` scanned with and without a
//!    ring, then `hot` again: its hit ratio.
//! 3. Vacuum and bulk write: forced WAL flushes and seconds per ring configuration.
//! 4. Synchronized scans: 1, 2 and 4 staggered concurrent scans of `sync` (O_DIRECT), on
//!    and off: pages read from storage per page of the table.
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

use super::runner::Runner;
use super::{layout, progress, summarize, Goal, Ratio, Report, Samples};

/// What `bufpool experiment scans` was asked for.
/// `bufpool experiment scans` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Where the data goes: `local`, or a scripts/slow-device.sh profile (ssd-nvme,
    /// ssd-sata, hdd, hdd-2007, slow10; root only, else the local disk with a note).
    #[arg(long, default_value = "ssd-sata")]
    pub device: String,
    /// The pool of every run in MiB (default 64; 8 with --quick; 2 in a debug build);
    /// the tables are 0.1, 1.2, 4 and 10 pools.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..))]
    pub scan_pool_mb: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct ScanExpOptions {
    pub repeats: usize,
    /// The pool of every run, in MiB.
    pub pool_mb: u64,
    pub quick: bool,
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
        Engine::open(
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
    let e = Engine::open(Arc::new(RealVfs::new()) as Arc<dyn Vfs>, dir, &c, true)
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

/// Runs the experiment on `--device` (smaller with `--quick` and in a debug build).
pub fn run(a: &Args, r: &mut Runner) -> Result<Report> {
    let quick = r.common.short();
    let o = &ScanExpOptions {
        repeats: r.common.repeats_unless_quick(),
        pool_mb: a.scan_pool_mb.unwrap_or(if cfg!(debug_assertions) {
            2
        } else if quick {
            8
        } else {
            64
        }),
        quick,
    };
    r.use_device(&a.device)?;
    r.set_io("buffered and O_DIRECT (see each table)");
    let mut notes = Vec::new();
    let bed = load(r.data_root()?, o.pool_mb)?;
    let mut samples = Samples::default();
    let mut tables = Vec::new();
    let mut meta = serde_json::Map::new();

    tables.push(ring_sweep(&bed, o, &mut meta)?);
    tables.push(hot_set(&bed, o, &mut samples, &mut meta)?);
    tables.push(vacuum_rings(&bed, o, &mut samples, &mut meta)?);
    tables.push(sync_scans(&bed, o, &mut samples, &mut meta)?);
    tables.push(cache_trail(&bed, o, &mut meta)?);
    tables.push(strategy_rules(&bed, &mut meta)?);
    tables.push(readahead(&bed, o, &mut samples, &mut meta, &mut notes)?);

    let ratios = vec![
        Ratio::new(
            "hot_set_hit_ratio_after_scan",
            samples.get("hot_set_hit_ratio_after_scan"),
            Goal::AtLeast,
            0.99,
        ),
        Ratio::new(
            "growing_ring_flushes_vs_256k",
            samples.get("growing_ring_flushes_vs_256k"),
            Goal::AtMost,
            0.1,
        ),
        Ratio::new(
            "growing_ring_time_vs_best_fixed",
            samples.get("growing_ring_time_vs_best_fixed"),
            Goal::AtMost,
            1.0,
        ),
        Ratio::new(
            "syncscan_2_reads_vs_one",
            samples.get("syncscan_2_reads_vs_one"),
            Goal::AtMost,
            1.2,
        ),
        Ratio::new(
            "odirect_scan_vs_device",
            samples.get("odirect_scan_vs_device"),
            Goal::AtLeast,
            0.9,
        ),
    ];
    let mut metadata = r.metadata();
    metadata.insert("pool_mb".into(), o.pool_mb.into());
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
            o.pool_mb,
            bed.pages(HOT),
            bed.pages(TRAIL),
            bed.pages(SYNC),
            bed.pages(BIG),
            r.device_desc()
        ),
        figures: Vec::new(),
        ratios,
        metadata,
        notes,
        tables,
    })
}

/// Section 1: seconds per scan of `big` for each ring size and no ring.
fn ring_sweep(
    bed: &Bed,
    o: &ScanExpOptions,
    meta: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<String> {
    let e = bed.open(&[])?;
    progress("scans: ring-size sweep (warming the OS cache)");
    scan(&e, BIG, &plain_opts(true))?;
    let cap = (bed.pool_pages() / 8).max(1);
    let mut sizes: Vec<Option<u64>> = std::iter::successors(Some(1u64), |k| Some(k * 2))
        .take_while(|&k| k <= cap.min(1024))
        .map(Some)
        .collect();
    sizes.push(None);
    let mut cells = vec![[
        "ring (buffers)",
        "s/scan median",
        "min",
        "max",
        "MB/s",
        "reads",
    ]
    .map(String::from)
    .to_vec()];
    let mut json = Vec::new();
    for size in sizes {
        let opts = SeqScanOptions {
            plan: Some(plain(size.is_some())),
            ring_bytes: size.map(|k| (k as usize) * bed.page_size),
        };
        let mut secs = Vec::new();
        let mut reads = 0;
        for _ in 0..o.repeats {
            let r = scan(&e, BIG, &opts)?;
            secs.push(r.secs);
            reads = r.io.reads;
        }
        let label = size.map_or("no ring".to_string(), |k| k.to_string());
        progress(format!(
            "scans: ring {label}: {:.3} s",
            summarize(&secs).median
        ));
        let s = fmt_summary(&secs, 3);
        let med = summarize(&secs).median;
        cells.push(vec![
            label.clone(),
            s[0].clone(),
            s[1].clone(),
            s[2].clone(),
            format!("{:.0}", mb_per_s(bed.pages(BIG), bed.page_size, med)),
            reads.to_string(),
        ]);
        json.push(serde_json::json!({"ring_buffers": size, "seconds": summarize(&secs)}));
    }
    e.shutdown()?;
    meta.insert("ring_sweep".into(), json.into());
    Ok(format!(
        "Ring-size sweep: count-style scan of big ({} pages, {:.1} pools, OS cache warm, buffered)\n{}",
        bed.pages(BIG),
        f64::from(bed.pages(BIG)) / bed.pool_pages() as f64,
        layout(&cells, 1)
    ))
}

/// Section 2: the hot set's hit ratio after a scan of `big`, ring on and off.
fn hot_set(
    bed: &Bed,
    o: &ScanExpOptions,
    samples: &mut Samples,
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
        for _ in 0..o.repeats {
            let e = bed.open(&[])?;
            warm_hot(&e)?;
            scan(&e, BIG, &plain_opts(ring))?;
            let after = scan(&e, HOT, &plain_opts(false))?;
            ratios.push(after.io.hit_ratio());
            e.shutdown()?;
        }
        if ring {
            for r in &ratios {
                samples.push("hot_set_hit_ratio_after_scan", *r);
            }
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

/// A ring configuration of section 3.
#[derive(Debug, Clone, Copy)]
enum RingConf {
    None,
    Fixed(usize),
    Growing(usize),
}

impl RingConf {
    fn label(self) -> String {
        match self {
            RingConf::None => "no ring".into(),
            RingConf::Fixed(b) => format!("fixed {}", fmt_bytes(b)),
            RingConf::Growing(b) => format!("growing (256 kB up to {})", fmt_bytes(b)),
        }
    }

    fn ring(self, kind: RingKind, e: &Engine) -> Option<Ring> {
        match self {
            RingConf::None => None,
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

/// Section 3: forced WAL flushes and seconds of VACUUM (one dead row per page, and a
/// clean table) and of a bulk load, per ring configuration.
fn vacuum_rings(
    bed: &Bed,
    o: &ScanExpOptions,
    samples: &mut Samples,
    meta: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<String> {
    let confs = [
        RingConf::None,
        RingConf::Fixed(256 << 10),
        RingConf::Fixed(2 << 20),
        RingConf::Fixed(16 << 20),
        RingConf::Growing(16 << 20),
    ];
    let vac_pages = bed.pages(VAC);
    // At least 5 repeats (unless --quick): the time target compares medians a few percent
    // apart.
    let vac_repeats = if o.quick { o.repeats } else { o.repeats.max(5) };
    let load_rows = bed.pool_pages() * ROWS_PER_8K_PAGE;
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
    // Per workload and configuration: (flushes, seconds) medians, for the targets.
    let mut med: std::collections::HashMap<(&str, String), (f64, f64)> = Default::default();
    let mut round = 0u16;
    let mut load_no = 0u32;
    for workload in [
        "vacuum, 1 dead row per page",
        "vacuum, clean table",
        "bulk load",
    ] {
        for conf in confs {
            let (mut flushes, mut secs, mut end_len) = (Vec::new(), Vec::new(), 0usize);
            for _ in 0..vac_repeats {
                if workload.starts_with("vacuum, 1") {
                    // One committed delete per page, then everything clean and durable.
                    round += 1;
                    let e = bed.open(&[])?;
                    let heap = Heap::open(&e, VAC);
                    let x = e.begin_xid()?;
                    for block in 0..vac_pages {
                        heap.delete(x, Tid { block, slot: round })?;
                    }
                    e.commit_transaction(x)?;
                    e.checkpoint()?;
                    e.shutdown()?;
                }
                let e = bed.open(&[])?;
                let kind = if workload.starts_with("bulk") {
                    RingKind::BulkWrite
                } else {
                    RingKind::Vacuum
                };
                let mut ring = conf.ring(kind, &e);
                let before = forced_flushes(&e);
                let start = Instant::now();
                if workload.starts_with("bulk") {
                    load_no += 1;
                    let rel = RelFileId::new(0, LOAD_BASE + load_no);
                    let heap = Heap::create(&e, rel)?.with_fillfactor(90)?;
                    let x = e.begin_xid()?;
                    heap.bulk_load_with(
                        x,
                        true,
                        (0..load_rows).map(row),
                        |_| {},
                        &mut |_| {},
                        ring.as_mut(),
                    )?;
                    e.commit_transaction(x)?;
                    secs.push(start.elapsed().as_secs_f64());
                    flushes.push((forced_flushes(&e) - before) as f64);
                    e.pool().drop_relation(rel)?;
                } else {
                    let rel = if workload.contains("clean") {
                        TRAIL
                    } else {
                        VAC
                    };
                    Heap::open(&e, rel).vacuum_with(false, ring.as_mut())?;
                    secs.push(start.elapsed().as_secs_f64());
                    flushes.push((forced_flushes(&e) - before) as f64);
                }
                end_len = ring.as_ref().map_or(0, |r| r.len());
                drop(ring);
                e.shutdown()?;
            }
            let (f, t) = (summarize(&flushes).median, summarize(&secs).median);
            progress(format!(
                "scans: {workload}, {}: {f:.0} forced WAL flushes, {t:.3} s",
                conf.label()
            ));
            med.insert((workload, conf.label()), (f, t));
            let s = fmt_summary(&flushes, 0);
            cells.push(vec![
                workload.to_string(),
                conf.label(),
                s[0].clone(),
                s[1].clone(),
                s[2].clone(),
                format!("{t:.3}"),
                if end_len > 0 {
                    format!("{end_len} buffers")
                } else {
                    "-".into()
                },
            ]);
            json.push(serde_json::json!({
                "workload": workload, "ring": conf.label(),
                "forced_wal_flushes": summarize(&flushes), "seconds": summarize(&secs),
                "ring_buffers_at_end": end_len,
            }));
        }
    }
    let dead = "vacuum, 1 dead row per page";
    let growing = med[&(dead, RingConf::Growing(16 << 20).label())];
    let fixed256 = med[&(dead, RingConf::Fixed(256 << 10).label())];
    let best_fixed = [256 << 10, 2 << 20, 16 << 20]
        .iter()
        .map(|&b| med[&(dead, RingConf::Fixed(b).label())].1)
        .fold(f64::INFINITY, f64::min);
    samples.push(
        "growing_ring_flushes_vs_256k",
        growing.0 / fixed256.0.max(1.0),
    );
    samples.push(
        "growing_ring_time_vs_best_fixed",
        growing.1 / best_fixed.max(1e-9),
    );
    meta.insert("vacuum_rings".into(), json.into());
    Ok(format!(
        "Vacuum and bulk-write rings: vac ({vac_pages} pages, 2 pools), trail (clean), bulk load of {load_rows} rows (1 pool); wal_buffers = pool/32\n{}",
        layout(&cells, 2)
    ))
}

/// Section 4: how far (in percent of the table) the leader is ahead of the next scan.
const STAGGER_PERCENT: u64 = 5;

/// Section 4: staggered concurrent scans of `sync`: pages read per page of the table.
fn sync_scans(
    bed: &Bed,
    o: &ScanExpOptions,
    samples: &mut Samples,
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
    let mut one = Vec::new();
    for n in [1usize, 2, 4] {
        for sync in [true, false] {
            if n == 1 && !sync {
                continue;
            }
            let mut ratios = Vec::new();
            let mut secs = Vec::new();
            for _ in 0..o.repeats {
                // O_DIRECT: the table is read from the device, not the OS cache, as in the
                // seed (a hit must be cheaper than a read for a follower to catch up).
                let e = bed.open(&[
                    ("synchronize_seqscans", if sync { "on" } else { "off" }),
                    ("io_direct", "on"),
                ])?;
                let before = e.pool().stats();
                let start = Instant::now();
                // Scan k starts when scan 0 has passed k × 5% of the table (STAGGER): a
                // synchronized follower then shares everything but the part the leader read
                // before it started, so the ideal is 1 + 5% for two scans, 1 + 30% for four.
                let leader = Arc::new((Mutex::new(0u64), Condvar::new()));
                std::thread::scope(|s| -> Result<()> {
                    let mut handles = Vec::new();
                    for k in 0..n {
                        let (e, leader) = (&e, leader.clone());
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
                                    let (m, cv) = &*leader;
                                    *m.lock().unwrap() = t;
                                    cv.notify_all();
                                }
                            })
                        }));
                    }
                    let mut first = true;
                    for h in handles {
                        let r = h.join().expect("scan thread")?;
                        if first {
                            // The leader is done: release any follower still waiting.
                            let (m, cv) = &*leader;
                            *m.lock().unwrap() = u64::MAX;
                            cv.notify_all();
                            first = false;
                        }
                        anyhow::ensure!(
                            r.tuples == total,
                            "a synchronized scan returned {} rows, not {total}",
                            r.tuples
                        );
                    }
                    Ok(())
                })?;
                secs.push(start.elapsed().as_secs_f64());
                let io = IoCounts::of(&e.pool().stats().since(&before));
                ratios.push(io.reads as f64 / f64::from(pages));
                e.shutdown()?;
            }
            if n == 1 {
                one = ratios.clone();
            }
            if n == 2 && sync {
                let base = summarize(&one).median.max(1e-9);
                for r in &ratios {
                    samples.push("syncscan_2_reads_vs_one", r / base);
                }
            }
            progress(format!(
                "scans: {n} concurrent scans, sync {}: {:.2} pages read per table page",
                if sync { "on" } else { "off" },
                summarize(&ratios).median
            ));
            let s = fmt_summary(&ratios, 2);
            cells.push(vec![
                n.to_string(),
                if sync { "on" } else { "off" }.to_string(),
                s[0].clone(),
                s[1].clone(),
                s[2].clone(),
                format!("{:.3}", summarize(&secs).median),
            ]);
            json.push(serde_json::json!({
                "scans": n, "synchronized": sync,
                "reads_per_page": summarize(&ratios), "seconds": summarize(&secs),
            }));
        }
    }
    meta.insert("sync_scans".into(), json.into());
    Ok(format!(
        "Synchronized scans: concurrent scans of sync ({pages} pages, 4 pools, O_DIRECT), each through its ring, scan k starting when the first has passed k × {STAGGER_PERCENT}% of the table (ideal with sync: 1.05 for 2, 1.30 for 4)\n{}",
        layout(&cells, 2)
    ))
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
    o: &ScanExpOptions,
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
        for _ in 0..o.repeats {
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
/// Section 7: scan MB/s per io_combine_limit, io_method and buffered/O_DIRECT.
fn readahead(
    bed: &Bed,
    o: &ScanExpOptions,
    samples: &mut Samples,
    meta: &mut serde_json::Map<String, serde_json::Value>,
    notes: &mut Vec<String>,
) -> Result<String> {
    // The device's rate: the best of 256 KiB and 1 MiB reads, one at a time or four in
    // flight (median over the repeats of each).
    let mut device = Vec::new();
    for (chunk, readers) in [
        (256usize << 10, 1usize),
        (256 << 10, 4),
        (1 << 20, 1),
        (1 << 20, 4),
    ] {
        let mut v = Vec::new();
        for _ in 0..o.repeats {
            v.push(device_rate(bed, SYNC, chunk, readers)?);
        }
        let label = format!("{} KiB x{readers}", chunk >> 10);
        progress(format!(
            "scans: device sequential O_DIRECT reads of {label}: {:.0} MB/s",
            summarize(&v).median
        ));
        device.push((label, summarize(&v)));
    }
    let (dev_label, dev) =
        device
            .iter()
            .map(|(l, s)| (l.clone(), s.median))
            .fold(
                (String::new(), 0.0f64),
                |a, b| if b.1 > a.1 { b } else { a },
            );
    let dev_all = device
        .iter()
        .map(|(l, s)| format!("{l} {:.0}", s.median))
        .collect::<Vec<_>>()
        .join(", ");
    let combines: &[&str] = if o.quick {
        &["8kB", "128kB"]
    } else {
        &["8kB", "128kB", "256kB", "1MB"]
    };
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
    for direct in [false, true] {
        for method in ["sync", "worker", "io_uring"] {
            for combine in combines {
                let sets = [
                    ("io_direct", if direct { "on" } else { "off" }),
                    ("io_method", method),
                    ("io_combine_limit", combine),
                ];
                let mut rates = Vec::new();
                for _ in 0..o.repeats {
                    let e = bed.open(&sets)?;
                    let r = scan(&e, SYNC, &plain_opts(true))?;
                    rates.push(mb_per_s(r.pages, bed.page_size, r.secs));
                    e.shutdown()?;
                }
                let med = summarize(&rates).median;
                let io = if direct { "O_DIRECT" } else { "buffered" };
                progress(format!("scans: {io} {method} {combine}: {med:.0} MB/s"));
                if direct && best_direct.as_ref().is_none_or(|b| med > b.0) {
                    best_direct = Some((med, format!("{method}, {combine}")));
                }
                let s = fmt_summary(&rates, 0);
                cells.push(vec![
                    io.to_string(),
                    method.to_string(),
                    combine.to_string(),
                    s[0].clone(),
                    s[1].clone(),
                    s[2].clone(),
                    format!("{:.2}", med / dev.max(1e-9)),
                ]);
                json.push(serde_json::json!({
                    "io": io, "io_method": method, "io_combine_limit": combine,
                    "mb_per_s": summarize(&rates),
                }));
            }
        }
    }
    if let Some((best, which)) = best_direct {
        samples.push("odirect_scan_vs_device", best / dev.max(1e-9));
        notes.push(format!(
            "odirect_scan_vs_device: the best O_DIRECT scan ({which}, {best:.0} MB/s) over the device's \
             sequential O_DIRECT rate ({dev:.0} MB/s, the best of {dev_all}: {dev_label}), same files, same run"
        ));
    }
    meta.insert(
        "device_mb_per_s".into(),
        serde_json::Value::Object(
            device
                .iter()
                .map(|(l, s)| Ok((l.clone(), serde_json::to_value(s)?)))
                .collect::<Result<_>>()?,
        ),
    );
    meta.insert("readahead".into(), json.into());
    Ok(format!(
        "Readahead: ring scan of sync ({} pages) from block 0; device O_DIRECT sequential reads (MB/s, reads of size x in flight): {dev_all}\n{}",
        bed.pages(SYNC),
        layout(&cells, 3)
    ))
}
