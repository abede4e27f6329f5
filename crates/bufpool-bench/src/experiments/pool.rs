//! `bufpool experiment pool`: what the buffer pool's hit and miss paths cost next to
//! baselines that do the same work without it, all in one process, side by side.
//!
//! Phases (each repetition measures a figure and its baseline back to back):
//! 1. Hit phase, a pool of `--pool-size` (1 GiB) holding a relation of `nbuffers - 16`
//!    pages, all resident and pinned by the experiment for the whole phase (so buffer ids
//!    are stable). Every page stores at offset 24 the block number of the next page of one
//!    random cycle through all pages (Sattolo), and at offset 32 the buffer id of that page.
//!    - `hot_hit_ns` vs `hashmap_get_ns`: 64 hot pages, pin + shared lock + read a u64
//!      versus a SipHash `HashMap<BufferTag, usize>` lookup + read a u64 from a page copy.
//!    - `random_hit_ns` vs `raw_random_ns` vs `raw_plain_ns`: the random chain through the
//!      pool, through the arena memory by buffer id (no lookup, pin or lock), and through a
//!      plain heap allocation of the same size and stride.
//!    - `scale_2t`: the chain with 2 threads (same cycle, starts half a cycle apart).
//!    - `mutex_pool_ratio_2t`: the 2-thread chain through the pool vs through
//!      [`MutexPool`] (one global mutex) over the same arena memory.
//! 2. Miss phase, a small pool (32 MiB) and a relation 4x its size, written, flushed and
//!    pre-read into the OS page cache: `miss_ns` (`pool.read` of a random permutation of
//!    all blocks, walked cyclically so that every step misses and evicts; the miss fraction
//!    is checked) vs `pread_ns` (`read_at` of the same blocks).
//!
//! Ratios are taken per repetition from the two adjacent measurements, then summarized.

use std::collections::HashMap;
use std::hint::black_box;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context, Result};
use bufpool::page::PAGE_HEADER_SIZE;
use bufpool::{
    BufferPool, BufferRef, BufferTag, Config, ForkNumber, IoOp, RealVfs, RelFileId, Vfs,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};

use super::mutex_pool::MutexPool;
use super::runner::{Runner, Steps};
use super::{progress, sattolo_cycle, summarize, Figure, Goal, Ratio, Report, Summary};

/// Offset of the next block number (u64 LE) in every page.
const NEXT_BLOCK_OFF: usize = PAGE_HEADER_SIZE;
/// Offset of the next page's buffer id (u64 LE) in every page of the hit phase.
const NEXT_ID_OFF: usize = PAGE_HEADER_SIZE + 8;
/// Pages of the hot set (a power of two).
const HOT_SET: usize = 64;
/// Buffers left unused in the hit-phase pool, so that loading never evicts.
const HEADROOM: usize = 16;
/// Threads of the multi-threaded figures.
const THREADS: usize = 2;

const HIT_REL: RelFileId = RelFileId::new(0, 16384);
const MISS_REL: RelFileId = RelFileId::new(0, 16385);

/// How much work each measurement does.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Hit-path operations per repetition of `hot_hit_ns` / `hashmap_get_ns`.
    pub hot_ops: usize,
    /// Chain steps per repetition (per thread for the 2-thread figures).
    pub chain_steps: usize,
    /// Random reads per repetition of `miss_ns` / `pread_ns`.
    pub miss_steps: usize,
    /// `shared_buffers` of the miss-phase pool.
    pub miss_pool_size: String,
    /// Relation size of the miss phase, in multiples of that pool.
    pub miss_factor: usize,
}

impl Plan {
    /// Sizes for the build profile: full work in release, a tenth in debug builds.
    pub fn for_profile() -> Self {
        let div = if cfg!(debug_assertions) { 10 } else { 1 };
        Self {
            hot_ops: 5_000_000 / div,
            chain_steps: 2_000_000 / div,
            miss_steps: 100_000 / div,
            miss_pool_size: "32MB".into(),
            miss_factor: 4,
        }
    }
}

/// `bufpool experiment pool` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// shared_buffers of the pool that holds the random-hit chain (e.g. 1GB, 256MB).
    #[arg(long, default_value = "1GB")]
    pub pool_size: String,
}

/// Runs the experiment: the hit phase, then the miss phase, in the runner's scratch folder.
pub fn run(a: &Args, r: &mut Runner) -> Result<Report> {
    run_with(a, &Plan::for_profile(), r)
}

/// Runs the experiment with the work sizes of `plan`.
fn run_with(a: &Args, plan: &Plan, r: &Runner) -> Result<Report> {
    let repeats = r.common.repeats as usize;
    ensure!(
        repeats >= 3,
        "--repeats must be at least 3 (got {})",
        repeats
    );
    r.progress(format!("scratch directory {}", r.scratch().display()));
    // Per phase: its set-up, then a step per repetition of each of its measurements.
    r.plan(Steps::new().untimed(1 + 2 * repeats).untimed(1 + repeats));
    let hit = hit_phase(r, a, plan, repeats)?;
    let miss = miss_phase(r, plan, repeats)?;
    Ok(report(a, plan, r, &hit, &miss))
}

/// One repetition of the hot set: ns per hit through the pool, per HashMap lookup.
#[derive(Debug, Clone, Copy)]
struct HotRep {
    hit_ns: f64,
    map_ns: f64,
}

/// One repetition of the random chain, `steps` steps per thread: the time through the
/// pool, the arena by buffer id and plain memory (1 thread), and through the pool, the
/// arena and the mutex pool (2 threads).
#[derive(Debug, Clone, Copy)]
struct ChainRep {
    steps: usize,
    pool: Duration,
    raw: Duration,
    plain: Duration,
    pool_2t: Duration,
    raw_2t: Duration,
    mutex_2t: Duration,
}

impl ChainRep {
    fn random_hit_ns(&self) -> f64 {
        ns_per(self.pool, self.steps)
    }

    fn raw_random_ns(&self) -> f64 {
        ns_per(self.raw, self.steps)
    }

    /// Throughput with 2 threads over 1: (THREADS * steps / pool_2t) / (steps / pool).
    fn scale_2t(&self) -> f64 {
        THREADS as f64 * self.pool.as_secs_f64() / self.pool_2t.as_secs_f64()
    }

    /// The same for the bare memory chain: how it scales on this machine.
    fn raw_scale_2t(&self) -> f64 {
        THREADS as f64 * self.raw.as_secs_f64() / self.raw_2t.as_secs_f64()
    }

    /// 2-thread throughput of the pool over the mutex pool's.
    fn mutex_pool_ratio_2t(&self) -> f64 {
        self.mutex_2t.as_secs_f64() / self.pool_2t.as_secs_f64()
    }
}

/// One repetition of the miss phase: ns per read through the pool, with `pread`, with
/// `pread` into rotating frames, of a checksum check; and the share of reads that missed.
#[derive(Debug, Clone, Copy)]
struct MissRep {
    miss_ns: f64,
    pread_ns: f64,
    pread_cold_ns: f64,
    verify_ns: f64,
    miss_fraction: f64,
}

impl MissRep {
    /// The part of a miss the pool itself adds: over a cold pread plus a checksum check.
    fn miss_vs_floor(&self) -> f64 {
        self.miss_ns / (self.pread_cold_ns + self.verify_ns)
    }
}

/// The five targets, each the median of its per-repetition ratios (a figure and its
/// baseline measured back to back).
fn targets(hot: &[HotRep], chain: &[ChainRep], miss: &[MissRep]) -> Vec<Ratio> {
    fn per<T>(rows: &[T], f: impl Fn(&T) -> f64) -> Vec<f64> {
        rows.iter().map(f).collect()
    }
    vec![
        Ratio::new(
            "hot_vs_hashmap",
            &per(hot, |h| h.hit_ns / h.map_ns),
            Goal::AtMost,
            3.0,
        ),
        Ratio::new(
            "hit_vs_raw",
            &per(chain, |c| c.random_hit_ns() / c.raw_random_ns()),
            Goal::AtMost,
            2.0,
        ),
        Ratio::new(
            "scale_2t",
            &per(chain, ChainRep::scale_2t),
            Goal::AtLeast,
            1.8,
        ),
        Ratio::new(
            "mutex_pool_ratio_2t",
            &per(chain, ChainRep::mutex_pool_ratio_2t),
            Goal::AtLeast,
            2.0,
        ),
        Ratio::new(
            "miss_vs_pread",
            &per(miss, |m| m.miss_ns / m.pread_ns),
            Goal::AtMost,
            1.3,
        ),
    ]
}

/// Every figure of the report over the repetitions, by name, in the report's order.
fn figures(hit: &HitPhase, miss: &MissPhase) -> Vec<Figure> {
    fn fig<T>(name: &'static str, unit: &'static str, rows: &[T], f: impl Fn(&T) -> f64) -> Figure {
        Figure {
            name,
            unit,
            summary: summarize(&rows.iter().map(f).collect::<Vec<f64>>()),
        }
    }
    let (h, c, m) = (&hit.hot, &hit.chain, &miss.reps);
    let t = THREADS;
    vec![
        fig("hot_hit_ns", "ns", h, |r| r.hit_ns),
        fig("hashmap_get_ns", "ns", h, |r| r.map_ns),
        fig("random_hit_ns", "ns", c, ChainRep::random_hit_ns),
        fig("raw_random_ns", "ns", c, ChainRep::raw_random_ns),
        fig("raw_plain_ns", "ns", c, |r| ns_per(r.plain, r.steps)),
        fig("random_hit_2t_ns", "ns", c, |r| {
            ns_per(r.pool_2t, t * r.steps)
        }),
        fig("mutex_pool_2t_ns", "ns", c, |r| {
            ns_per(r.mutex_2t, t * r.steps)
        }),
        fig("raw_random_2t_ns", "ns", c, |r| {
            ns_per(r.raw_2t, t * r.steps)
        }),
        fig("raw_scale_2t", "x", c, ChainRep::raw_scale_2t),
        fig("miss_ns", "ns", m, |r| r.miss_ns),
        fig("pread_ns", "ns", m, |r| r.pread_ns),
        fig("pread_cold_ns", "ns", m, |r| r.pread_cold_ns),
        fig("verify_ns", "ns", m, |r| r.verify_ns),
        fig("miss_vs_floor", "x", m, MissRep::miss_vs_floor),
        fig("buffercache_ms_per_mbuf", "ms", &hit.views, |r| r.rows_ms),
        fig("buffercache_summary_ms_per_mbuf", "ms", &hit.views, |r| {
            r.summary_ms
        }),
    ]
}

/// The report: header, figures, targets, notes and metadata.
fn report(a: &Args, plan: &Plan, r: &Runner, hit: &HitPhase, miss: &MissPhase) -> Report {
    let repeats = hit.hot.len();
    let miss_fraction = summarize(
        &miss
            .reps
            .iter()
            .map(|m| m.miss_fraction)
            .collect::<Vec<_>>(),
    );
    let mut notes = vec![
        "pread_cold_ns: pread into as many rotating aligned frames as the miss pool has; \
         verify_ns: checksum check of one page; miss_vs_floor = miss_ns / (pread_cold_ns + \
         verify_ns), the part of a miss the pool itself adds"
            .to_string(),
        "*_2t_ns = wall time / total steps of both threads (aggregate cost per step)".to_string(),
        "buffercache_ms_per_mbuf: every pg_buffercache row of the full hit pool (each \
         under its buffer's header lock), scaled to a million buffers; \
         buffercache_summary_ms_per_mbuf: pg_buffercache_summary (lock-free)"
            .to_string(),
        format!(
            "miss_ns: {:.1}% of steps missed the pool (median; by construction every step \
             should), each evicting a clean page",
            100.0 * miss_fraction.median
        ),
    ];
    if hit.reads != 0 || hit.evictions != 0 {
        notes.push(format!(
            "WARNING: the hit phase read {} and evicted {} pages; hit figures include misses",
            hit.reads, hit.evictions
        ));
    }
    let header = r.header(&format!(
        "pool {} ({} x {} B pages) | huge pages: {} | repeats {}",
        format_bytes(hit.size_bytes),
        hit.nbuffers,
        hit.page_size,
        hit.huge_pages,
        repeats
    ));
    Report {
        header,
        figures: figures(hit, miss),
        ratios: targets(&hit.hot, &hit.chain, &miss.reps),
        metadata: metadata(a, plan, r, hit, miss, miss_fraction),
        notes,
        tables: Vec::new(),
    }
}

/// The report's fields beside the figures: sizes of both pools, threads and work per
/// figure, and the checks that the hit phase hit and the miss phase missed.
fn metadata(
    a: &Args,
    plan: &Plan,
    r: &Runner,
    hit: &HitPhase,
    miss: &MissPhase,
    miss_fraction: Summary,
) -> Map<String, Value> {
    let mut meta = r.metadata();
    meta.insert("repeats".into(), hit.hot.len().into());
    meta.insert("pool_size_bytes".into(), hit.size_bytes.into());
    meta.insert("page_size".into(), hit.page_size.into());
    meta.insert("nbuffers".into(), hit.nbuffers.into());
    meta.insert("huge_pages".into(), hit.huge_pages.clone().into());
    meta.insert(
        "hit_pool".into(),
        json!({
            "shared_buffers": a.pool_size,
            "size_bytes": hit.size_bytes,
            "page_size": hit.page_size,
            "nbuffers": hit.nbuffers,
            "relation_pages": hit.relation_pages,
            "huge_pages": hit.huge_pages,
            "load_seconds": hit.load_seconds,
        }),
    );
    meta.insert(
        "miss_pool".into(),
        json!({
            "shared_buffers": plan.miss_pool_size,
            "size_bytes": miss.size_bytes,
            "page_size": miss.page_size,
            "nbuffers": miss.nbuffers,
            "relation_pages": miss.relation_pages,
            "relation_file": miss.file.display().to_string(),
            "huge_pages": miss.huge_pages,
        }),
    );
    meta.insert("threads".into(), threads_per_figure());
    meta.insert(
        "work_per_repetition".into(),
        json!({
            "hot_ops": plan.hot_ops,
            "hot_set_pages": HOT_SET,
            "chain_steps_per_thread": plan.chain_steps,
            "miss_steps": plan.miss_steps,
        }),
    );
    meta.insert("checks".into(), checks(hit, miss_fraction));
    meta.insert(
        "ratio_method".into(),
        "each repetition measures a figure and its baseline back to back; ratios are taken per \
         repetition, then median/min/max; verdicts use the median"
            .into(),
    );
    meta
}

/// The threads of each figure and ratio (`[1, 2]`: a ratio of 2 threads over 1).
fn threads_per_figure() -> Value {
    json!({
        "hot_hit_ns": 1, "hashmap_get_ns": 1, "random_hit_ns": 1, "raw_random_ns": 1,
        "raw_plain_ns": 1, "random_hit_2t_ns": THREADS, "mutex_pool_2t_ns": THREADS,
        "raw_random_2t_ns": THREADS, "raw_scale_2t": [1, THREADS],
        "scale_2t": [1, THREADS], "mutex_pool_ratio_2t": THREADS, "miss_ns": 1, "pread_ns": 1, "pread_cold_ns": 1, "verify_ns": 1,
    })
}

/// The checks: the hit phase neither read nor evicted, the miss phase missed.
fn checks(hit: &HitPhase, miss_fraction: Summary) -> Value {
    json!({
        "hit_phase_reads": hit.reads,
        "hit_phase_evictions": hit.evictions,
        "miss_fraction": miss_fraction,
        "hit_fraction": {
            "median": 1.0 - miss_fraction.median,
            "min": 1.0 - miss_fraction.max,
            "max": 1.0 - miss_fraction.min,
        },
        "miss_ns_is": "total time / steps; every step reads a block evicted since its last read (miss_fraction = reads / steps)",
    })
}

struct HitPhase {
    size_bytes: u64,
    page_size: usize,
    nbuffers: usize,
    relation_pages: usize,
    huge_pages: String,
    load_seconds: f64,
    reads: u64,
    evictions: u64,
    hot: Vec<HotRep>,
    chain: Vec<ChainRep>,
    views: Vec<ViewRep>,
}

/// One repetition of the buffer-cache views over the full hit-phase pool, in ms per
/// million buffers: every row (each under its header lock), and the lock-free summary.
#[derive(Debug, Clone, Copy)]
struct ViewRep {
    rows_ms: f64,
    summary_ms: f64,
}

/// Times the views `repeats` times on `pool` (rows into one reused vector).
fn view_reps(pool: &BufferPool, repeats: usize) -> Vec<ViewRep> {
    let per_million = 1e6 / pool.nbuffers() as f64;
    let mut rows = Vec::with_capacity(pool.nbuffers());
    (0..repeats)
        .map(|_| {
            let t = Instant::now();
            pool.buffercache_into(&mut rows);
            let rows_ms = t.elapsed().as_secs_f64() * 1e3 * per_million;
            let t = Instant::now();
            black_box(pool.buffercache_summary());
            let summary_ms = t.elapsed().as_secs_f64() * 1e3 * per_million;
            ViewRep {
                rows_ms,
                summary_ms,
            }
        })
        .collect()
}

struct MissPhase {
    size_bytes: u64,
    page_size: usize,
    nbuffers: usize,
    relation_pages: usize,
    huge_pages: String,
    file: PathBuf,
    reps: Vec<MissRep>,
}

fn open_pool(dir: &Path, shared_buffers: &str) -> Result<BufferPool> {
    let mut config = Config::default();
    config.set("shared_buffers", shared_buffers)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let vfs: Arc<dyn Vfs> = Arc::new(RealVfs::new());
    BufferPool::open(vfs, dir, &config, true)
        .with_context(|| format!("opening a pool in {}", dir.display()))
}

/// Phase 1: the hot set and the random chain, on a pool holding the whole relation.
fn hit_phase(r: &Runner, a: &Args, plan: &Plan, repeats: usize) -> Result<HitPhase> {
    r.step(format!("hit phase: loading a pool of {}", a.pool_size));
    let pool = open_pool(&r.scratch().join("hit"), &a.pool_size)?;
    let (nbuffers, page_size) = (pool.nbuffers(), pool.page_size());
    ensure!(
        nbuffers >= 2 * HOT_SET + HEADROOM,
        "--pool-size {} gives {nbuffers} buffers; need at least {}",
        a.pool_size,
        2 * HOT_SET + HEADROOM
    );
    let npages = nbuffers - HEADROOM;
    pool.create_relation(HIT_REL, ForkNumber::Main)?;
    let mut rng = SmallRng::seed_from_u64(0x0062_7566_706f_6f6c);
    let next = sattolo_cycle(npages, &mut rng);
    let (pins, ids, load_seconds) = load_chain(&pool, &next)?;

    // From here on nobody writes any page of this pool until it is dropped.
    let stats_before = pool.stats();
    let hot = hot_set(r, &pool, &pins, plan, repeats)?;
    let chain = Chain::new(&pool, pins, ids, &next);
    chain.warm_up(plan.chain_steps / 10)?;
    let mut reps = Vec::with_capacity(repeats);
    for rep in 0..repeats {
        r.step(format!(
            "rep {}/{repeats} random chain, 1 and {THREADS} threads",
            rep + 1
        ));
        let pos = rng.random_range(0..npages);
        reps.push(chain.measure(pos, plan.chain_steps, (rep, repeats))?);
    }
    let during = pool.stats().since(&stats_before);
    let views = view_reps(&pool, repeats);
    let (reads, evictions) = (during.total(IoOp::Read), during.total(IoOp::Eviction));
    if reads != 0 || evictions != 0 {
        progress(format!(
            "pool: WARNING: {reads} reads and {evictions} evictions during the hit phase"
        ));
    }
    let huge_pages = pool.huge_pages().name().to_string();
    drop(chain);
    progress("pool: hit phase done; dropping the pool");
    Ok(HitPhase {
        size_bytes: (nbuffers * page_size) as u64,
        page_size,
        nbuffers,
        relation_pages: npages,
        huge_pages,
        load_seconds,
        reads,
        evictions,
        hot,
        chain: reps,
        views,
    })
}

/// Loads the relation: page `i` stores `next[i]` and the buffer id of page `next[i]`.
/// Every page stays pinned (the returned pins), so buffer ids stay put. Returns the pins,
/// the buffer id of every page and the load's seconds.
fn load_chain<'p>(
    pool: &'p BufferPool,
    next: &[u32],
) -> Result<(Vec<BufferRef<'p>>, Vec<u32>, f64)> {
    let npages = next.len();
    progress(format!(
        "pool: loading {npages} pages ({}) into a pool of {} buffers",
        format_bytes((npages * pool.page_size()) as u64),
        pool.nbuffers()
    ));
    let load_start = Instant::now();
    let before_load = pool.stats();
    let mut pins = Vec::with_capacity(npages);
    for (i, &nb) in next.iter().enumerate() {
        let buf = pool.extend(HIT_REL, ForkNumber::Main)?;
        ensure!(
            buf.tag().block as usize == i,
            "extend returned block {} for page {i}",
            buf.tag().block
        );
        {
            let mut g = buf.write();
            bufpool::page::init(&mut g, 0);
            put_u64(&mut g, NEXT_BLOCK_OFF, u64::from(nb));
        }
        pins.push(buf);
        if (i + 1) % 32768 == 0 {
            progress(format!("pool: loaded {} / {npages} pages", i + 1));
        }
    }
    let ids: Vec<u32> = pins.iter().map(|b| b.buffer_id()).collect();
    for (i, buf) in pins.iter().enumerate() {
        let mut g = buf.write();
        put_u64(&mut g, NEXT_ID_OFF, u64::from(ids[next[i] as usize]));
    }
    let load = pool.stats().since(&before_load);
    ensure!(
        load.total(IoOp::Eviction) == 0,
        "loading evicted {} pages: the pool does not hold the relation",
        load.total(IoOp::Eviction)
    );
    let load_seconds = load_start.elapsed().as_secs_f64();
    progress(format!("pool: loaded in {load_seconds:.1} s"));
    Ok((pins, ids, load_seconds))
}

/// The hot set: 64 pages, pool vs HashMap over copies of the same pages, per repetition.
fn hot_set(
    r: &Runner,
    pool: &BufferPool,
    pins: &[BufferRef<'_>],
    plan: &Plan,
    repeats: usize,
) -> Result<Vec<HotRep>> {
    let hot_tags: Vec<BufferTag> = (0..HOT_SET as u32)
        .map(|b| BufferTag::new(HIT_REL, ForkNumber::Main, b))
        .collect();
    let hot_pages: Vec<Box<[u8]>> = pins[..HOT_SET]
        .iter()
        .map(|b| b.read().to_vec().into_boxed_slice())
        .collect();
    let hot_map: HashMap<BufferTag, usize> =
        hot_tags.iter().enumerate().map(|(i, t)| (*t, i)).collect();
    ensure!(
        hot_loop_pool(pool, &hot_tags, HOT_SET)?.1
            == hot_loop_map(&hot_map, &hot_pages, &hot_tags, HOT_SET).1,
        "hot set: pool and HashMap read different values"
    );
    hot_loop_pool(pool, &hot_tags, plan.hot_ops / 10)?;
    hot_loop_map(&hot_map, &hot_pages, &hot_tags, plan.hot_ops / 10);
    let mut reps = Vec::with_capacity(repeats);
    for rep in 0..repeats {
        r.step(format!(
            "rep {}/{} hot_hit_ns, hashmap_get_ns ({} ops each)",
            rep + 1,
            repeats,
            plan.hot_ops
        ));
        let (hit_ns, _) = hot_loop_pool(pool, &hot_tags, plan.hot_ops)?;
        let (map_ns, _) = hot_loop_map(&hot_map, &hot_pages, &hot_tags, plan.hot_ops);
        reps.push(HotRep { hit_ns, map_ns });
    }
    Ok(reps)
}

/// The random chain and its three baselines: the relation's pages pinned in the pool, the
/// arena's frames, the same frames in plain heap memory, and a [`MutexPool`] over the arena.
struct Chain<'p> {
    pool: &'p BufferPool,
    /// The buffer id of every page.
    ids: Vec<u32>,
    /// The pages in the chain's order, to start threads half a cycle apart.
    order: Vec<u32>,
    /// Plain heap memory laid out like the arena (same stride, same frame ids), 8-aligned.
    plain: Vec<u64>,
    arena: *const u8,
    /// Declared before `pins`, so dropped while every page is still pinned.
    mutex_pool: MutexPool,
    /// Every page of the relation, pinned: no frame changes page while the chain lives.
    pins: Vec<BufferRef<'p>>,
}

impl<'p> Chain<'p> {
    fn new(pool: &'p BufferPool, pins: Vec<BufferRef<'p>>, ids: Vec<u32>, next: &[u32]) -> Self {
        let (nbuffers, page_size) = (pool.nbuffers(), pool.page_size());
        let mut order = Vec::with_capacity(next.len());
        let mut cur = 0u32;
        for _ in 0..next.len() {
            order.push(cur);
            cur = next[cur as usize];
        }
        let mut plain = vec![0u64; nbuffers * page_size / 8];
        for (i, &id) in ids.iter().enumerate() {
            plain[(id as usize * page_size + NEXT_ID_OFF) / 8] =
                u64::from(ids[next[i] as usize]).to_le();
        }
        let arena = pool.arena_base();
        // SAFETY: the arena (nbuffers frames of page_size bytes at `arena`) lives as long as
        // `pool`, which the chain borrows and so outlives `mutex_pool`; nothing writes a
        // page of this pool from here on (the load is done; the pool only reads).
        let mutex_pool = unsafe {
            MutexPool::new(
                arena,
                page_size,
                nbuffers,
                ids.iter().enumerate().map(|(b, &id)| {
                    (
                        BufferTag::new(HIT_REL, ForkNumber::Main, b as u32),
                        id as usize,
                    )
                }),
            )
        };
        Chain {
            pool,
            ids,
            order,
            plain,
            arena,
            mutex_pool,
            pins,
        }
    }

    /// The buffer id of the page at block `block`.
    fn id(&self, block: u32) -> usize {
        self.ids[block as usize] as usize
    }

    /// Follows the chain through the arena from frame `start_id`.
    fn arena_chain(&self, start_id: usize, steps: usize) -> usize {
        debug_assert_eq!(self.pins.len(), self.ids.len());
        // SAFETY: `arena` addresses nbuffers frames of page_size bytes that live as long
        // as `pool`; every page of the chain is pinned (`pins`), so it keeps its frame, and
        // stores at NEXT_ID_OFF the buffer id of the next page (written during the load from
        // `buffer_id()`, so < nbuffers); nothing writes the pages during the phase.
        unsafe {
            raw_chain(
                self.arena,
                self.pool.page_size(),
                NEXT_ID_OFF,
                start_id,
                steps,
            )
        }
    }

    /// Follows the chain through the plain copy from frame `start_id`.
    fn plain_chain(&self, start_id: usize, steps: usize) -> usize {
        // SAFETY: `plain` holds nbuffers frames of page_size bytes; every frame on the chain
        // stores the id of another frame < nbuffers (written in `new`); nothing writes it now.
        unsafe {
            raw_chain(
                self.plain.as_ptr().cast(),
                self.pool.page_size(),
                NEXT_ID_OFF,
                start_id,
                steps,
            )
        }
    }

    /// Walks every path once (page tables, TLB, caches) without measuring.
    fn warm_up(&self, steps: usize) -> Result<()> {
        let start_block = self.order[0];
        pool_chain(self.pool, HIT_REL, start_block, steps)?;
        self.arena_chain(self.id(start_block), steps);
        self.plain_chain(self.id(start_block), steps);
        mutex_chain(&self.mutex_pool, HIT_REL, start_block, steps)?;
        Ok(())
    }

    /// One repetition from chain position `pos` (the second thread half a cycle on).
    fn measure(
        &self,
        pos: usize,
        steps: usize,
        (rep, repeats): (usize, usize),
    ) -> Result<ChainRep> {
        let npages = self.order.len();
        let start = self.order[pos];
        let starts: Vec<u32> = (0..THREADS)
            .map(|t| self.order[(pos + t * npages / THREADS) % npages])
            .collect();
        let tag = |name: &str| format!("pool: rep {}/{repeats} {name} ({steps} steps)", rep + 1);

        progress(tag("random_hit_ns"));
        let t = Instant::now();
        black_box(pool_chain(self.pool, HIT_REL, start, steps)?);
        let pool = t.elapsed();

        progress(tag("raw_random_ns"));
        let t = Instant::now();
        let end = self.arena_chain(self.id(start), steps);
        let raw = t.elapsed();
        black_box(end);

        progress(tag("raw_plain_ns"));
        let t = Instant::now();
        let end_plain = self.plain_chain(self.id(start), steps);
        let plain = t.elapsed();
        black_box(end_plain);
        ensure!(end == end_plain, "arena and plain chains diverged");
        let (pool_2t, raw_2t, mutex_2t) = self.two_threads(&starts, steps, &tag)?;
        Ok(ChainRep {
            steps,
            pool,
            raw,
            plain,
            pool_2t,
            raw_2t,
            mutex_2t,
        })
    }

    /// The chain with [`THREADS`] threads from `starts`: wall time through the pool, the
    /// arena and the mutex pool.
    fn two_threads(
        &self,
        starts: &[u32],
        steps: usize,
        tag: &dyn Fn(&str) -> String,
    ) -> Result<(Duration, Duration, Duration)> {
        let pool = self.pool;
        progress(tag(&format!("random_hit_2t_ns, {THREADS} threads")));
        let t2 = run_threads(THREADS, |i| {
            pool_chain(pool, HIT_REL, starts[i], steps).map(drop)
        })?;

        progress(tag(&format!("raw_random_2t_ns, {THREADS} threads")));
        let start_ids: Vec<usize> = starts.iter().map(|&b| self.id(b)).collect();
        // Raw pointers are not Sync; the address is.
        let (arena_addr, page_size) = (self.arena as usize, pool.page_size());
        let tr = run_threads(THREADS, |i| {
            let base = arena_addr as *const u8;
            // SAFETY: as in `arena_chain`: pinned pages, ids < nbuffers, no writers.
            black_box(unsafe { raw_chain(base, page_size, NEXT_ID_OFF, start_ids[i], steps) });
            Ok(())
        })?;

        progress(tag(&format!("mutex_pool_2t_ns, {THREADS} threads")));
        let mutex_pool = &self.mutex_pool;
        let tm = run_threads(THREADS, |i| {
            mutex_chain(mutex_pool, HIT_REL, starts[i], steps).map(drop)
        })?;
        ensure!(mutex_pool.pinned() == 0, "mutex pool leaked pins");
        Ok((t2, tr, tm))
    }
}

/// Phase 2: random reads of a relation 4x the pool, every one a miss, against `pread`.
fn miss_phase(r: &Runner, plan: &Plan, repeats: usize) -> Result<MissPhase> {
    r.step(format!(
        "miss phase: a relation {}x a pool of {}",
        plan.miss_factor, plan.miss_pool_size
    ));
    let pool = open_pool(&r.scratch().join("miss"), &plan.miss_pool_size)?;
    let (nbuffers, page_size) = (pool.nbuffers(), pool.page_size());
    let npages = nbuffers * plan.miss_factor;
    let file = write_relation(&pool, npages)?;
    // Bring the whole file into the OS page cache.
    let mut f =
        std::fs::File::open(&file).with_context(|| format!("opening {}", file.display()))?;
    let mut chunk = vec![0u8; 1 << 20];
    while f.read(&mut chunk)? > 0 {}
    drop(chunk);

    let mut walk = MissWalk::new(npages);
    let warm = walk.next(npages);
    miss_loop(&pool, MISS_REL, &warm)?;
    pread_loop(&f, page_size, &warm)?;
    pread_cold_loop(&f, page_size, nbuffers, &warm)?;
    let samples = checksummed_samples(&f, page_size)?;
    let mut reps = Vec::with_capacity(repeats);
    for rep in 0..repeats {
        let seq = walk.next(plan.miss_steps);
        r.step(format!(
            "rep {}/{} miss_ns, pread_ns ({} reads each)",
            rep + 1,
            repeats,
            seq.len()
        ));
        let before = pool.stats();
        let t_miss = miss_loop(&pool, MISS_REL, &seq)?;
        let reads = pool.stats().since(&before).total(IoOp::Read);
        let t_pread = pread_loop(&f, page_size, &seq)?;
        let t_cold = pread_cold_loop(&f, page_size, nbuffers, &seq)?;
        let t_verify = verify_loop(&samples.1, &samples.0, seq.len())?;
        reps.push(MissRep {
            miss_ns: ns_per(t_miss, seq.len()),
            pread_ns: ns_per(t_pread, seq.len()),
            pread_cold_ns: ns_per(t_cold, seq.len()),
            verify_ns: ns_per(t_verify, seq.len()),
            miss_fraction: reads as f64 / seq.len() as f64,
        });
    }
    Ok(MissPhase {
        size_bytes: (nbuffers * page_size) as u64,
        page_size,
        nbuffers,
        relation_pages: npages,
        huge_pages: pool.huge_pages().name().to_string(),
        file,
        reps,
    })
}

/// Writes `npages` pages of the miss relation through `pool` and flushes them; returns
/// its one segment file.
fn write_relation(pool: &BufferPool, npages: usize) -> Result<PathBuf> {
    let (rel, page_size) = (MISS_REL, pool.page_size());
    pool.create_relation(rel, ForkNumber::Main)?;
    progress(format!(
        "pool: miss phase: writing {npages} pages ({}) through a pool of {} buffers",
        format_bytes((npages * page_size) as u64),
        pool.nbuffers()
    ));
    for i in 0..npages {
        let buf = pool.extend(rel, ForkNumber::Main)?;
        let mut g = buf.write();
        bufpool::page::init(&mut g, 0);
        put_u64(&mut g, NEXT_BLOCK_OFF, i as u64);
    }
    pool.flush_all()?;
    let file = pool.smgr().segment_path(rel, ForkNumber::Main, 0);
    let len = std::fs::metadata(&file)
        .with_context(|| format!("stat {}", file.display()))?
        .len();
    ensure!(
        len == (npages * page_size) as u64,
        "{} is {len} bytes, expected {} (one segment holding the relation)",
        file.display(),
        npages * page_size
    );
    Ok(file)
}

/// The miss phase's order of reads. Every step must miss: one random permutation of all
/// blocks, walked cyclically. The pool holds a quarter of them, so a block comes round
/// again only after every other block was read since, and has always been evicted by then.
struct MissWalk {
    perm: Vec<u32>,
    cursor: usize,
}

impl MissWalk {
    fn new(npages: usize) -> Self {
        let mut rng = SmallRng::seed_from_u64(0x6d69_7373);
        let mut perm: Vec<u32> = (0..npages as u32).collect();
        for i in (1..perm.len()).rev() {
            perm.swap(i, rng.random_range(0..=i));
        }
        MissWalk { perm, cursor: 0 }
    }

    /// The next `n` blocks of the walk.
    fn next(&mut self, n: usize) -> Vec<u32> {
        (0..n)
            .map(|_| {
                self.cursor = (self.cursor + 1) % self.perm.len();
                self.perm[self.cursor]
            })
            .collect()
    }
}

/// Checksummed copies of the first 64 pages of `f`, for the verification baseline.
fn checksummed_samples(
    f: &std::fs::File,
    page_size: usize,
) -> Result<(Vec<BufferTag>, Vec<Vec<u8>>)> {
    let sample_tags: Vec<BufferTag> = (0..64u32)
        .map(|b| BufferTag::new(MISS_REL, ForkNumber::Main, b))
        .collect();
    let mut sample_pages = Vec::new();
    for t in &sample_tags {
        let mut p = vec![0u8; page_size];
        f.read_exact_at(&mut p, u64::from(t.block) * page_size as u64)?;
        sample_pages.push(p);
    }
    Ok((sample_tags, sample_pages))
}

/// `ops` hits cycling over `tags` (length a power of two): pin, shared lock, read a u64,
/// release. Returns (ns per op, sum of the values read).
fn hot_loop_pool(pool: &BufferPool, tags: &[BufferTag], ops: usize) -> Result<(f64, u64)> {
    debug_assert!(tags.len().is_power_of_two());
    let mask = tags.len() - 1;
    let mut sum = 0u64;
    let start = Instant::now();
    for i in 0..ops {
        let buf = pool.read(black_box(tags[i & mask]))?;
        let g = buf.read();
        sum = sum.wrapping_add(get_u64(&g, NEXT_BLOCK_OFF));
    }
    let elapsed = start.elapsed();
    Ok((ns_per(elapsed, ops), black_box(sum)))
}

/// Baseline of [`hot_loop_pool`]: a SipHash `HashMap` lookup and a u64 read from the page.
fn hot_loop_map(
    map: &HashMap<BufferTag, usize>,
    pages: &[Box<[u8]>],
    tags: &[BufferTag],
    ops: usize,
) -> (f64, u64) {
    debug_assert!(tags.len().is_power_of_two());
    let mask = tags.len() - 1;
    let mut sum = 0u64;
    let start = Instant::now();
    for i in 0..ops {
        let idx = map[&black_box(tags[i & mask])];
        sum = sum.wrapping_add(get_u64(&pages[idx], NEXT_BLOCK_OFF));
    }
    let elapsed = start.elapsed();
    (ns_per(elapsed, ops), black_box(sum))
}

/// Follows the chain through the pool: read, shared lock, next block, unlock, unpin.
fn pool_chain(pool: &BufferPool, rel: RelFileId, start: u32, steps: usize) -> Result<u32> {
    let mut cur = start;
    for _ in 0..steps {
        let buf = pool.read(BufferTag::new(rel, ForkNumber::Main, cur))?;
        let g = buf.read();
        cur = get_u64(&g, NEXT_BLOCK_OFF) as u32;
    }
    Ok(black_box(cur))
}

/// Follows the chain through the global-mutex baseline.
fn mutex_chain(pool: &MutexPool, rel: RelFileId, start: u32, steps: usize) -> Result<u32> {
    let mut cur = start;
    for _ in 0..steps {
        let tag = BufferTag::new(rel, ForkNumber::Main, cur);
        cur = pool
            .read_u64(&tag, NEXT_BLOCK_OFF)
            .ok_or_else(|| anyhow!("{tag} is not resident"))? as u32;
    }
    Ok(black_box(cur))
}

/// A pure dependent-load chain: frame `cur` (at `base + cur * stride`) holds at `off` the
/// little-endian index of the next frame. Returns the frame reached after `steps` steps.
///
/// # Safety
/// `base` is 8-aligned and `stride` and `off` are multiples of 8; every frame visited from
/// `start` within `steps` steps lies in allocated, readable memory and holds at `off` the
/// index of such a frame; nobody writes those bytes during the call.
unsafe fn raw_chain(
    base: *const u8,
    stride: usize,
    off: usize,
    start: usize,
    steps: usize,
) -> usize {
    let mut cur = start;
    for _ in 0..steps {
        // SAFETY: by the function's contract, frame `cur` is readable and 8-aligned at `off`
        // and not written concurrently.
        let raw = unsafe { std::ptr::read_volatile(base.add(cur * stride + off).cast::<u64>()) };
        cur = u64::from_le(raw) as usize;
    }
    cur
}

/// Random reads through the pool. Checks every page holds its own block number.
fn miss_loop(pool: &BufferPool, rel: RelFileId, blocks: &[u32]) -> Result<Duration> {
    let mut bad = 0usize;
    let start = Instant::now();
    for &b in blocks {
        let buf = pool.read(BufferTag::new(rel, ForkNumber::Main, b))?;
        let g = buf.read();
        bad += usize::from(get_u64(&g, NEXT_BLOCK_OFF) != u64::from(b));
    }
    let elapsed = start.elapsed();
    ensure!(
        bad == 0,
        "{bad} pages read through the pool held the wrong block number"
    );
    Ok(elapsed)
}

/// The same random reads straight from the file with `pread`.
/// Like [`pread_loop`], but into `frames` rotating 4 KiB-aligned buffers, as a pool reads
/// into the frame it just evicted (cold in the CPU caches once the pool outgrows them).
fn pread_cold_loop(
    file: &std::fs::File,
    page_size: usize,
    frames: usize,
    blocks: &[u32],
) -> Result<Duration> {
    let mut arena = bufpool::vfs::AlignedBuf::zeroed(frames * page_size);
    let arena = arena.as_mut_slice();
    let start = Instant::now();
    for (i, &b) in blocks.iter().enumerate() {
        let frame = &mut arena[(i % frames) * page_size..][..page_size];
        let n = file.read_at(frame, u64::from(b) * page_size as u64)?;
        ensure!(n == page_size, "short read of block {b}: {n} bytes");
    }
    Ok(start.elapsed())
}

/// Verifies the checksum of `pages` (copies of pool pages) `n` times in turn.
fn verify_loop(pages: &[Vec<u8>], tags: &[BufferTag], n: usize) -> Result<Duration> {
    let start = Instant::now();
    for i in 0..n {
        let k = i % pages.len();
        bufpool::page::verify(black_box(&pages[k]), &tags[k])
            .map_err(|p| anyhow!("{}: {p}", tags[k]))?;
    }
    Ok(start.elapsed())
}

fn pread_loop(file: &std::fs::File, page_size: usize, blocks: &[u32]) -> Result<Duration> {
    let mut buf = vec![0u8; page_size];
    let mut bad = 0usize;
    let start = Instant::now();
    for &b in blocks {
        let n = file.read_at(&mut buf, u64::from(b) * page_size as u64)?;
        ensure!(n == page_size, "short read of block {b}: {n} bytes");
        bad += usize::from(get_u64(&buf, NEXT_BLOCK_OFF) != u64::from(b));
    }
    let elapsed = start.elapsed();
    ensure!(
        bad == 0,
        "{bad} pages read with pread held the wrong block number"
    );
    Ok(elapsed)
}

/// Runs `f(thread index)` on `n` threads released together; returns the wall time from the
/// first start to the last finish.
fn run_threads<F>(n: usize, f: F) -> Result<Duration>
where
    F: Fn(usize) -> Result<()> + Sync,
{
    let barrier = Barrier::new(n);
    let spans: Vec<Result<(Instant, Instant)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (f, barrier) = (&f, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    f(i)?;
                    Ok((start, Instant::now()))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("worker thread panicked")))
            })
            .collect()
    });
    let spans = spans.into_iter().collect::<Result<Vec<_>>>()?;
    let first = spans.iter().map(|s| s.0).min().expect("n > 0");
    let last = spans.iter().map(|s| s.1).max().expect("n > 0");
    Ok(last - first)
}

#[inline]
fn get_u64(page: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(page[off..off + 8].try_into().expect("8 bytes"))
}

#[inline]
fn put_u64(page: &mut [u8], off: usize, v: u64) {
    page[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

fn ns_per(d: Duration, ops: usize) -> f64 {
    d.as_nanos() as f64 / ops.max(1) as f64
}

fn format_bytes(b: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if b >= GIB && b.is_multiple_of(GIB) {
        format!("{} GiB", b / GIB)
    } else if b >= MIB {
        format!("{:.0} MiB", b as f64 / MIB as f64)
    } else {
        format!("{b} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: f64) -> Duration {
        Duration::from_secs_f64(v / 1e3)
    }

    /// Three repetitions with these ratios: hot over HashMap; (hit over raw, scale with 2
    /// threads, mutex pool over pool) of the chain; miss over pread.
    fn reps(
        hot: [f64; 3],
        chain: [(f64, f64, f64); 3],
        miss: [f64; 3],
    ) -> (Vec<HotRep>, Vec<ChainRep>, Vec<MissRep>) {
        let hot = hot.map(|r| HotRep {
            hit_ns: 10.0 * r,
            map_ns: 10.0,
        });
        let chain = chain.map(|(hit, scale, mutex)| ChainRep {
            steps: 1000,
            pool: ms(100.0 * hit),
            raw: ms(100.0),
            plain: ms(90.0),
            pool_2t: ms(2.0 * 100.0 * hit / scale),
            raw_2t: ms(100.0),
            mutex_2t: ms(mutex * 2.0 * 100.0 * hit / scale),
        });
        let miss = miss.map(|r| MissRep {
            miss_ns: 1000.0 * r,
            pread_ns: 1000.0,
            pread_cold_ns: 800.0,
            verify_ns: 100.0,
            miss_fraction: 1.0,
        });
        (hot.to_vec(), chain.to_vec(), miss.to_vec())
    }

    #[test]
    fn targets_are_medians_of_per_repetition_ratios() {
        let (hot, chain, miss) = reps(
            [2.5, 2.0, 2.9],
            [(1.5, 1.9, 2.5), (1.0, 2.0, 3.0), (1.9, 1.5, 2.1)],
            [1.2, 1.1, 1.25],
        );
        let t = targets(&hot, &chain, &miss);
        let names: Vec<&str> = t.iter().map(|r| r.name).collect();
        assert_eq!(
            names,
            [
                "hot_vs_hashmap",
                "hit_vs_raw",
                "scale_2t",
                "mutex_pool_ratio_2t",
                "miss_vs_pread"
            ]
        );
        for (r, m) in t.iter().zip([2.5, 1.5, 1.9, 2.5, 1.2]) {
            assert!((r.median - m).abs() < 1e-6 && r.pass, "{r:?}");
        }
    }

    #[test]
    fn a_median_just_past_its_target_misses() {
        let (hot, chain, miss) = reps(
            [3.01, 2.0, 3.1],
            [(2.01, 1.79, 1.99), (1.0, 2.0, 3.0), (2.2, 1.5, 1.5)],
            [1.31, 1.1, 1.4],
        );
        let t = targets(&hot, &chain, &miss);
        assert!(t.iter().all(|r| !r.pass), "{t:?}");
    }

    #[test]
    fn raw_chain_follows_a_cycle_over_plain_memory() {
        let (n, stride) = (50usize, 64usize);
        let mut rng = SmallRng::seed_from_u64(1);
        let next = sattolo_cycle(n, &mut rng);
        let mut mem = vec![0u64; n * stride / 8];
        for (i, &j) in next.iter().enumerate() {
            mem[(i * stride + NEXT_ID_OFF) / 8] = u64::from(j).to_le();
        }
        // SAFETY: `mem` holds n frames of `stride` bytes, 8-aligned; each stores a frame
        // index < n; nothing writes it during the call.
        let end = unsafe { raw_chain(mem.as_ptr().cast(), stride, NEXT_ID_OFF, 3, n) };
        assert_eq!(
            end, 3,
            "a single cycle of n returns to the start after n steps"
        );
        // SAFETY: as above.
        let one = unsafe { raw_chain(mem.as_ptr().cast(), stride, NEXT_ID_OFF, 3, 1) };
        assert_eq!(one, next[3] as usize);
    }

    /// The whole experiment on tiny pools, so every path (including the pool API calls and
    /// the report) runs under `cargo test`.
    #[test]
    fn tiny_experiment_runs_end_to_end() {
        let parent = tempfile::tempdir().unwrap();
        let args = Args {
            pool_size: "2MB".into(),
        };
        let plan = Plan {
            hot_ops: 2_000,
            chain_steps: 2_000,
            miss_steps: 500,
            miss_pool_size: "1MB".into(),
            miss_factor: 4,
        };
        let common = super::super::runner::Common {
            json: true,
            repeats: 3,
            dir: Some(parent.path().to_path_buf()),
            quick: false,
        };
        let command = vec!["bufpool".into(), "experiment".into(), "pool".into()];
        let report =
            super::super::runner::run("pool", common, command, |r| run_with(&args, &plan, r))
                .unwrap();
        let json = report.to_json();
        for name in [
            "hot_hit_ns",
            "hashmap_get_ns",
            "random_hit_ns",
            "raw_random_ns",
            "raw_plain_ns",
            "miss_ns",
            "pread_ns",
            "hot_vs_hashmap",
            "hit_vs_raw",
            "scale_2t",
            "mutex_pool_ratio_2t",
            "miss_vs_pread",
        ] {
            assert!(
                json["figures"][name]["median"].as_f64().unwrap() > 0.0,
                "{name}"
            );
        }
        assert_eq!(json["checks"]["hit_phase_reads"], 0);
        assert_eq!(json["nbuffers"], 256);
        let miss = json["checks"]["miss_fraction"]["median"].as_f64().unwrap();
        assert!(
            miss > 0.5,
            "a relation 4x the pool should mostly miss, got {miss}"
        );
        assert!(
            std::fs::read_dir(parent.path()).unwrap().next().is_none(),
            "scratch dir left behind"
        );
    }
}
