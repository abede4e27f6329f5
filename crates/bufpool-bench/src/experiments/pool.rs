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
use bufpool::{BufferPool, BufferTag, Config, ForkNumber, IoOp, RealVfs, RelFileId, Vfs};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map};

use super::mutex_pool::MutexPool;
use super::runner::Runner;
use super::{progress, sattolo_cycle, summarize, Goal, Report, Samples};

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
    let opts = PoolOptions {
        repeats: r.common.repeats as usize,
        pool_size: a.pool_size.clone(),
        plan: Plan::for_profile(),
    };
    run_with(&opts, r)
}

/// Options of `bufpool experiment pool`.
#[derive(Debug, Clone)]
pub struct PoolOptions {
    pub repeats: usize,
    /// `shared_buffers` of the hit-phase pool.
    pub pool_size: String,
    pub plan: Plan,
}

/// Runs the experiment as `opts` says.
fn run_with(opts: &PoolOptions, r: &Runner) -> Result<Report> {
    ensure!(
        opts.repeats >= 3,
        "--repeats must be at least 3 (got {})",
        opts.repeats
    );
    r.progress(format!("scratch directory {}", r.scratch().display()));

    let mut samples = Samples::default();
    let mut meta = Map::new();
    let hit = hit_phase(opts, &r.scratch().join("hit"), &mut samples)?;
    let miss = miss_phase(opts, &r.scratch().join("miss"), &mut samples)?;
    meta.extend(r.metadata());
    meta.insert("repeats".into(), opts.repeats.into());
    meta.insert("pool_size_bytes".into(), hit.size_bytes.into());
    meta.insert("page_size".into(), hit.page_size.into());
    meta.insert("nbuffers".into(), hit.nbuffers.into());
    meta.insert("huge_pages".into(), hit.huge_pages.clone().into());
    meta.insert(
        "hit_pool".into(),
        json!({
            "shared_buffers": opts.pool_size,
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
            "shared_buffers": opts.plan.miss_pool_size,
            "size_bytes": miss.size_bytes,
            "page_size": miss.page_size,
            "nbuffers": miss.nbuffers,
            "relation_pages": miss.relation_pages,
            "relation_file": miss.file.display().to_string(),
            "huge_pages": miss.huge_pages,
        }),
    );
    meta.insert(
        "threads".into(),
        json!({
            "hot_hit_ns": 1, "hashmap_get_ns": 1, "random_hit_ns": 1, "raw_random_ns": 1,
            "raw_plain_ns": 1, "random_hit_2t_ns": THREADS, "mutex_pool_2t_ns": THREADS,
            "raw_random_2t_ns": THREADS, "raw_scale_2t": [1, THREADS],
            "scale_2t": [1, THREADS], "mutex_pool_ratio_2t": THREADS, "miss_ns": 1, "pread_ns": 1, "pread_cold_ns": 1, "verify_ns": 1,
        }),
    );
    meta.insert(
        "work_per_repetition".into(),
        json!({
            "hot_ops": opts.plan.hot_ops,
            "hot_set_pages": HOT_SET,
            "chain_steps_per_thread": opts.plan.chain_steps,
            "miss_steps": opts.plan.miss_steps,
        }),
    );
    let miss_fraction = summarize(samples.get("miss_fraction"));
    meta.insert(
        "checks".into(),
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
        }),
    );
    meta.insert(
        "ratio_method".into(),
        "each repetition measures a figure and its baseline back to back; ratios are taken per \
         repetition, then median/min/max; verdicts use the median"
            .into(),
    );

    let fig = |name, unit| samples.figure(name, unit);
    let figures = vec![
        fig("hot_hit_ns", "ns"),
        fig("hashmap_get_ns", "ns"),
        fig("random_hit_ns", "ns"),
        fig("raw_random_ns", "ns"),
        fig("raw_plain_ns", "ns"),
        fig("random_hit_2t_ns", "ns"),
        fig("mutex_pool_2t_ns", "ns"),
        fig("raw_random_2t_ns", "ns"),
        fig("raw_scale_2t", "x"),
        fig("miss_ns", "ns"),
        fig("pread_ns", "ns"),
        fig("pread_cold_ns", "ns"),
        fig("verify_ns", "ns"),
        fig("miss_vs_floor", "x"),
    ];
    let ratio = |name, goal, target| samples.ratio(name, goal, target);
    let ratios = vec![
        ratio("hot_vs_hashmap", Goal::AtMost, 3.0),
        ratio("hit_vs_raw", Goal::AtMost, 2.0),
        ratio("scale_2t", Goal::AtLeast, 1.8),
        ratio("mutex_pool_ratio_2t", Goal::AtLeast, 2.0),
        ratio("miss_vs_pread", Goal::AtMost, 1.3),
    ];

    let mut notes = vec![
        "pread_cold_ns: pread into as many rotating aligned frames as the miss pool has; \
         verify_ns: checksum check of one page; miss_vs_floor = miss_ns / (pread_cold_ns + \
         verify_ns), the part of a miss the pool itself adds"
            .to_string(),
        "*_2t_ns = wall time / total steps of both threads (aggregate cost per step)".to_string(),
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
        opts.repeats
    ));
    Ok(Report {
        header,
        figures,
        ratios,
        metadata: meta,
        notes,
        tables: Vec::new(),
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
}

struct MissPhase {
    size_bytes: u64,
    page_size: usize,
    nbuffers: usize,
    relation_pages: usize,
    huge_pages: String,
    file: PathBuf,
}

fn open_pool(dir: &Path, shared_buffers: &str) -> Result<BufferPool> {
    let mut config = Config::default();
    config.set("shared_buffers", shared_buffers)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let vfs: Arc<dyn Vfs> = Arc::new(RealVfs::new());
    BufferPool::open(vfs, dir, &config, true)
        .with_context(|| format!("opening a pool in {}", dir.display()))
}

fn hit_phase(opts: &PoolOptions, dir: &Path, samples: &mut Samples) -> Result<HitPhase> {
    let plan = &opts.plan;
    let pool = open_pool(dir, &opts.pool_size)?;
    let nbuffers = pool.nbuffers();
    let page_size = pool.page_size();
    ensure!(
        nbuffers >= 2 * HOT_SET + HEADROOM,
        "--pool-size {} gives {nbuffers} buffers; need at least {}",
        opts.pool_size,
        2 * HOT_SET + HEADROOM
    );
    let npages = nbuffers - HEADROOM;
    let rel = HIT_REL;
    pool.create_relation(rel, ForkNumber::Main)?;
    let mut rng = SmallRng::seed_from_u64(0x0062_7566_706f_6f6c);
    let next = sattolo_cycle(npages, &mut rng);

    // Load: every page pinned and kept pinned for the phase, so buffer ids stay put.
    progress(format!(
        "pool: loading {npages} pages ({}) into a pool of {nbuffers} buffers",
        format_bytes((npages * page_size) as u64)
    ));
    let load_start = Instant::now();
    let before_load = pool.stats();
    let mut pins = Vec::with_capacity(npages);
    for (i, &nb) in next.iter().enumerate() {
        let buf = pool.extend(rel, ForkNumber::Main)?;
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

    // From here on nobody writes any page of this pool until it is dropped.
    let stats_before = pool.stats();

    // Hot set: 64 pages, pool vs HashMap over copies of the same pages.
    let hot_tags: Vec<BufferTag> = (0..HOT_SET as u32)
        .map(|b| BufferTag::new(rel, ForkNumber::Main, b))
        .collect();
    let hot_pages: Vec<Box<[u8]>> = pins[..HOT_SET]
        .iter()
        .map(|b| b.read().to_vec().into_boxed_slice())
        .collect();
    let hot_map: HashMap<BufferTag, usize> =
        hot_tags.iter().enumerate().map(|(i, t)| (*t, i)).collect();
    ensure!(
        hot_loop_pool(&pool, &hot_tags, HOT_SET)?.1
            == hot_loop_map(&hot_map, &hot_pages, &hot_tags, HOT_SET).1,
        "hot set: pool and HashMap read different values"
    );
    hot_loop_pool(&pool, &hot_tags, plan.hot_ops / 10)?;
    hot_loop_map(&hot_map, &hot_pages, &hot_tags, plan.hot_ops / 10);
    for rep in 0..opts.repeats {
        progress(format!(
            "pool: rep {}/{} hot_hit_ns, hashmap_get_ns ({} ops each)",
            rep + 1,
            opts.repeats,
            plan.hot_ops
        ));
        let (hit, _) = hot_loop_pool(&pool, &hot_tags, plan.hot_ops)?;
        let (map, _) = hot_loop_map(&hot_map, &hot_pages, &hot_tags, plan.hot_ops);
        samples.push("hot_hit_ns", hit);
        samples.push("hashmap_get_ns", map);
        samples.push("hot_vs_hashmap", hit / map);
    }
    drop((hot_pages, hot_map));

    // The chain's order, to start threads half a cycle apart.
    let mut order = Vec::with_capacity(npages);
    let mut cur = 0u32;
    for _ in 0..npages {
        order.push(cur);
        cur = next[cur as usize];
    }

    // Plain heap memory laid out like the arena (same stride, same frame ids), 8-aligned.
    let mut plain = vec![0u64; nbuffers * page_size / 8];
    for (i, &id) in ids.iter().enumerate() {
        plain[(id as usize * page_size + NEXT_ID_OFF) / 8] =
            u64::from(ids[next[i] as usize]).to_le();
    }
    let arena = pool.arena_base();

    // SAFETY: the arena (nbuffers frames of page_size bytes at `arena`) lives as long as
    // `pool`, which outlives `mutex_pool` (declared later, dropped first); nothing writes a
    // page of this pool from here on (the load is done; the pool only reads).
    let mutex_pool = unsafe {
        MutexPool::new(
            arena,
            page_size,
            nbuffers,
            ids.iter()
                .enumerate()
                .map(|(b, &id)| (BufferTag::new(rel, ForkNumber::Main, b as u32), id as usize)),
        )
    };

    // Warm up every path once (page tables, TLB, caches) without measuring.
    let warm = plan.chain_steps / 10;
    let start_block = order[0];
    pool_chain(&pool, rel, start_block, warm)?;
    // SAFETY: see `raw_chain_arena` below; same region, same invariants.
    unsafe {
        raw_chain(
            arena,
            page_size,
            NEXT_ID_OFF,
            ids[start_block as usize] as usize,
            warm,
        )
    };
    // SAFETY: `plain` holds nbuffers frames of page_size bytes; every frame on the chain
    // stores the id of another frame < nbuffers (written just above); nothing writes it now.
    unsafe {
        raw_chain(
            plain.as_ptr().cast(),
            page_size,
            NEXT_ID_OFF,
            ids[start_block as usize] as usize,
            warm,
        )
    };
    mutex_chain(&mutex_pool, rel, start_block, warm)?;

    let steps = plan.chain_steps;
    for rep in 0..opts.repeats {
        let pos = rng.random_range(0..npages);
        let start = order[pos];
        let start_id = ids[start as usize] as usize;
        let starts: Vec<u32> = (0..THREADS)
            .map(|t| order[(pos + t * npages / THREADS) % npages])
            .collect();
        let tag = |name: &str| {
            format!(
                "pool: rep {}/{} {name} ({steps} steps)",
                rep + 1,
                opts.repeats
            )
        };

        progress(tag("random_hit_ns"));
        let t = Instant::now();
        black_box(pool_chain(&pool, rel, start, steps)?);
        let t1 = t.elapsed();

        progress(tag("raw_random_ns"));
        let t = Instant::now();
        // SAFETY: `arena` addresses nbuffers frames of page_size bytes that live as long
        // as `pool`; every page of the chain is pinned (`pins`), so it keeps its frame, and
        // stores at NEXT_ID_OFF the buffer id of the next page (written during the load from
        // `buffer_id()`, so < nbuffers); nothing writes the pages during the phase.
        let end = unsafe { raw_chain(arena, page_size, NEXT_ID_OFF, start_id, steps) };
        let t_raw = t.elapsed();
        black_box(end);

        progress(tag("raw_plain_ns"));
        let t = Instant::now();
        // SAFETY: as for the warm-up above: `plain` is nbuffers frames of page_size bytes,
        // each chain frame holds a frame id < nbuffers, and nothing writes it meanwhile.
        let end_plain = unsafe {
            raw_chain(
                plain.as_ptr().cast(),
                page_size,
                NEXT_ID_OFF,
                start_id,
                steps,
            )
        };
        let t_plain = t.elapsed();
        black_box(end_plain);
        ensure!(end == end_plain, "arena and plain chains diverged");

        progress(tag(&format!("random_hit_2t_ns, {THREADS} threads")));
        let t2 = run_threads(THREADS, |i| {
            pool_chain(&pool, rel, starts[i], steps).map(drop)
        })?;

        progress(tag(&format!("raw_random_2t_ns, {THREADS} threads")));
        let start_ids: Vec<usize> = starts.iter().map(|&b| ids[b as usize] as usize).collect();
        let arena_addr = arena as usize; // raw pointers are not Sync; the address is
        let tr = run_threads(THREADS, |i| {
            let base = arena_addr as *const u8;
            // SAFETY: as for `raw_random_ns` above: pinned pages, ids < nbuffers, no writers.
            black_box(unsafe { raw_chain(base, page_size, NEXT_ID_OFF, start_ids[i], steps) });
            Ok(())
        })?;

        progress(tag(&format!("mutex_pool_2t_ns, {THREADS} threads")));
        let tm = run_threads(THREADS, |i| {
            mutex_chain(&mutex_pool, rel, starts[i], steps).map(drop)
        })?;
        ensure!(mutex_pool.pinned() == 0, "mutex pool leaked pins");

        let hit_ns = ns_per(t1, steps);
        let raw_ns = ns_per(t_raw, steps);
        samples.push("random_hit_ns", hit_ns);
        samples.push("raw_random_ns", raw_ns);
        samples.push("raw_plain_ns", ns_per(t_plain, steps));
        samples.push("hit_vs_raw", hit_ns / raw_ns);
        samples.push("random_hit_2t_ns", ns_per(t2, THREADS * steps));
        samples.push("mutex_pool_2t_ns", ns_per(tm, THREADS * steps));
        samples.push("raw_random_2t_ns", ns_per(tr, THREADS * steps));
        // Context for scale_2t: how the bare memory chain scales on this machine.
        samples.push(
            "raw_scale_2t",
            THREADS as f64 * t_raw.as_secs_f64() / tr.as_secs_f64(),
        );
        // Throughput ratios: (THREADS * steps / t2) / (steps / t1), and pool / mutex pool.
        samples.push(
            "scale_2t",
            THREADS as f64 * t1.as_secs_f64() / t2.as_secs_f64(),
        );
        samples.push("mutex_pool_ratio_2t", tm.as_secs_f64() / t2.as_secs_f64());
    }
    let during = pool.stats().since(&stats_before);
    let (reads, evictions) = (during.total(IoOp::Read), during.total(IoOp::Eviction));
    if reads != 0 || evictions != 0 {
        progress(format!(
            "pool: WARNING: {reads} reads and {evictions} evictions during the hit phase"
        ));
    }
    let huge_pages = pool.huge_pages().name().to_string();
    drop(mutex_pool);
    drop(pins);
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
    })
}

fn miss_phase(opts: &PoolOptions, dir: &Path, samples: &mut Samples) -> Result<MissPhase> {
    let plan = &opts.plan;
    let pool = open_pool(dir, &plan.miss_pool_size)?;
    let nbuffers = pool.nbuffers();
    let page_size = pool.page_size();
    let npages = nbuffers * plan.miss_factor;
    let rel = MISS_REL;
    pool.create_relation(rel, ForkNumber::Main)?;
    progress(format!(
        "pool: miss phase: writing {npages} pages ({}) through a pool of {nbuffers} buffers",
        format_bytes((npages * page_size) as u64)
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
    // Bring the whole file into the OS page cache.
    let mut f =
        std::fs::File::open(&file).with_context(|| format!("opening {}", file.display()))?;
    let mut chunk = vec![0u8; 1 << 20];
    while f.read(&mut chunk)? > 0 {}
    drop(chunk);

    // Every step must miss: walk one random permutation of all blocks cyclically. The pool
    // holds a quarter of them, so a block comes round again only after every other block
    // was read since, and has always been evicted by then.
    let mut rng = SmallRng::seed_from_u64(0x6d69_7373);
    let mut perm: Vec<u32> = (0..npages as u32).collect();
    for i in (1..perm.len()).rev() {
        perm.swap(i, rng.random_range(0..=i));
    }
    let mut cursor = 0usize;
    let mut blocks = |n: usize| -> Vec<u32> {
        (0..n)
            .map(|_| {
                cursor = (cursor + 1) % perm.len();
                perm[cursor]
            })
            .collect()
    };
    let warm = blocks(npages);
    miss_loop(&pool, rel, &warm)?;
    pread_loop(&f, page_size, &warm)?;
    pread_cold_loop(&f, page_size, nbuffers, &warm)?;
    // Checksummed copies of a few pages, for the verification baseline.
    let sample_tags: Vec<BufferTag> = (0..64u32)
        .map(|b| BufferTag::new(rel, ForkNumber::Main, b))
        .collect();
    let mut sample_pages = Vec::new();
    for t in &sample_tags {
        let mut p = vec![0u8; page_size];
        f.read_exact_at(&mut p, u64::from(t.block) * page_size as u64)?;
        sample_pages.push(p);
    }
    for rep in 0..opts.repeats {
        let seq = blocks(plan.miss_steps);
        progress(format!(
            "pool: rep {}/{} miss_ns, pread_ns ({} reads each)",
            rep + 1,
            opts.repeats,
            seq.len()
        ));
        let before = pool.stats();
        let t_miss = miss_loop(&pool, rel, &seq)?;
        let reads = pool.stats().since(&before).total(IoOp::Read);
        let t_pread = pread_loop(&f, page_size, &seq)?;
        let t_cold = pread_cold_loop(&f, page_size, nbuffers, &seq)?;
        let t_verify = verify_loop(&sample_pages, &sample_tags, seq.len())?;
        let miss_ns = ns_per(t_miss, seq.len());
        let pread_ns = ns_per(t_pread, seq.len());
        let pread_cold_ns = ns_per(t_cold, seq.len());
        let verify_ns = ns_per(t_verify, seq.len());
        samples.push("miss_ns", miss_ns);
        samples.push("pread_ns", pread_ns);
        samples.push("pread_cold_ns", pread_cold_ns);
        samples.push("verify_ns", verify_ns);
        samples.push("miss_vs_floor", miss_ns / (pread_cold_ns + verify_ns));
        samples.push("miss_vs_pread", miss_ns / pread_ns);
        samples.push("miss_fraction", reads as f64 / seq.len() as f64);
    }
    Ok(MissPhase {
        size_bytes: (nbuffers * page_size) as u64,
        page_size,
        nbuffers,
        relation_pages: npages,
        huge_pages: pool.huge_pages().name().to_string(),
        file,
    })
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
    if b >= GIB && b % GIB == 0 {
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
        let opts = PoolOptions {
            repeats: 3,
            pool_size: "2MB".into(),
            plan: Plan {
                hot_ops: 2_000,
                chain_steps: 2_000,
                miss_steps: 500,
                miss_pool_size: "1MB".into(),
                miss_factor: 4,
            },
        };
        let common = super::super::runner::Common {
            json: true,
            repeats: 3,
            dir: Some(parent.path().to_path_buf()),
            quick: false,
        };
        let command = vec!["bufpool".into(), "experiment".into(), "pool".into()];
        let report =
            super::super::runner::run("pool", common, command, |r| run_with(&opts, r)).unwrap();
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
