//! `bufpool experiment table`: the B+tree and the heap scan against in-memory baselines.
//!
//! All in one process, medians of `repeats` with min and max:
//! - `btree_lookup_ns`: random point lookups in a B+tree of `keys` keys (bulk built, every
//!   page in the pool), one thread; `btreemap_lookup_ns`: the same keys and the same
//!   lookup sequence in a std `BTreeMap` (no durability, no concurrency);
//!   `lookup_vs_btreemap` = ours ÷ theirs.
//! - `btree_scale_2t`: lookups per second with 2 threads ÷ with 1.
//! - `seqscan_tuples_per_s`: a cached table of `keys` pgbench-like rows (100 bytes) scanned
//!   with visibility checks (a committed load, hint bits set by a first scan), summing one
//!   column; `memscan_tuples_per_s`: summing the same column from a `Vec` of structs;
//!   `seqscan_vs_memscan` = theirs ÷ ours.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use bufpool::index::btree::BTree;
use bufpool::table::Heap;
use bufpool::txn::INVALID_XID;
use bufpool::{Config, Engine, RealVfs, RelFileId};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::runner::Runner;
use super::{progress, Goal, Report, Samples};

const INDEX: RelFileId = RelFileId::new(0, 700);
const TABLE: RelFileId = RelFileId::new(0, 701);

/// `bufpool experiment table` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// shared_buffers of the pool that holds the random-hit chain (e.g. 1GB, 256MB).
    #[arg(long, default_value = "1GB")]
    pub pool_size: String,
}

/// Runs the experiment in the runner's scratch folder (smaller in a debug build).
pub fn run(a: &Args, r: &mut Runner) -> Result<Report> {
    let debug = cfg!(debug_assertions);
    let opts = TableExpOptions {
        repeats: r.common.repeats as usize,
        keys: if debug { 50_000 } else { 1_000_000 },
        lookups: if debug { 100_000 } else { 2_000_000 },
        pool_size: a.pool_size.clone(),
    };
    run_with(&opts, r)
}

#[derive(Debug, Clone)]
pub struct TableExpOptions {
    pub repeats: usize,
    /// Keys in the index and rows in the table.
    pub keys: u64,
    /// Lookups per thread per measurement.
    pub lookups: usize,
    pub pool_size: String,
}

/// A pgbench_accounts-like row: aid, abalance, 84 bytes of filler.
#[derive(Clone)]
struct Account {
    aid: u64,
    abalance: i64,
    _filler: [u8; 84],
}

fn row(aid: u64) -> Vec<u8> {
    let mut r = Vec::with_capacity(100);
    r.extend_from_slice(&aid.to_le_bytes());
    r.extend_from_slice(&balance_of(aid).to_le_bytes());
    r.resize(100, b' ');
    r
}

fn balance_of(aid: u64) -> i64 {
    (aid % 1000) as i64 - 500
}

fn lookups_per_s(tree: &BTree<'_>, keys: &[i64], threads: usize) -> Result<(f64, u64)> {
    let start = Instant::now();
    let found: Result<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Result<u64> {
                    let mut found = 0u64;
                    // Each thread walks the sequence from its own offset.
                    let off = t * keys.len() / threads.max(1);
                    for i in 0..keys.len() {
                        let k = keys[(off + i) % keys.len()];
                        if tree.get(k)?.is_some() {
                            found += 1;
                        }
                    }
                    Ok(found)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("lookup thread"))
            .sum()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let found = found?;
    Ok(((keys.len() * threads) as f64 / elapsed, found))
}

/// Runs the experiment as `opts` says.
fn run_with(opts: &TableExpOptions, runner: &Runner) -> Result<Report> {
    ensure!(opts.repeats >= 3, "--repeats must be at least 3");
    let mut c = Config::default();
    c.set("shared_buffers", &opts.pool_size)?;
    c.set("synchronous_commit", "off")?;
    let e = Engine::open(Arc::new(RealVfs::new()), runner.scratch(), &c, true)
        .with_context(|| format!("opening {}", runner.scratch().display()))?;
    let n = opts.keys;

    progress(format!("table: building a B+tree of {n} keys"));
    let t0 = Instant::now();
    let tree = BTree::bulk_build(
        &e,
        INDEX,
        true,
        (0..n as i64).map(|k| (k, k as u64 * 7)),
        90,
        &mut |_| {},
    )?;
    let build_s = t0.elapsed().as_secs_f64();
    let mut map = std::collections::BTreeMap::new();
    for k in 0..n as i64 {
        map.insert(k, k as u64 * 7);
    }
    let mut rng = SmallRng::seed_from_u64(42);
    let keys: Vec<i64> = (0..opts.lookups)
        .map(|_| rng.random_range(0..n as i64))
        .collect();
    // Warm: every index page into the pool.
    lookups_per_s(&tree, &keys, 1)?;

    progress(format!("table: loading a heap of {n} rows"));
    let heap = Heap::create(&e, TABLE)?;
    let x = e.begin_xid()?;
    let t0 = Instant::now();
    heap.bulk_load(x, false, (0..n).map(row), |_| {}, &mut |_| {})?;
    e.commit_transaction(x)?;
    let load_s = t0.elapsed().as_secs_f64();
    let accounts: Vec<Account> = (0..n)
        .map(|aid| Account {
            aid,
            abalance: balance_of(aid),
            _filler: [b' '; 84],
        })
        .collect();
    let expected: i64 = accounts.iter().map(|a| a.abalance).sum();
    let scan_sum = |heap: &Heap<'_>| -> Result<(i64, u64)> {
        let snap = e.txns().snapshot(INVALID_XID);
        let (mut sum, mut rows) = (0i64, 0u64);
        heap.scan(&snap, |_, d| {
            sum += i64::from_le_bytes(d[8..16].try_into().expect("8 bytes"));
            rows += 1;
        })?;
        Ok((sum, rows))
    };
    // First scan: sets hint bits (the commit log is consulted once per row here).
    let (s, r) = scan_sum(&heap)?;
    ensure!(s == expected && r == n, "scan saw {r} rows summing to {s}");

    let mut samples = Samples::default();
    let mut push = |k: &'static str, v: f64| samples.push(k, v);
    for rep in 0..opts.repeats {
        progress(format!("table: rep {}/{}", rep + 1, opts.repeats));
        let (r1, found) = lookups_per_s(&tree, &keys, 1)?;
        ensure!(found == keys.len() as u64, "lookups found {found} keys");
        let (r2, _) = lookups_per_s(&tree, &keys, 2)?;
        let start = Instant::now();
        let mut found = 0u64;
        for k in &keys {
            if map.contains_key(black_box(k)) {
                found += 1;
            }
        }
        let map_ns = start.elapsed().as_nanos() as f64 / keys.len() as f64;
        ensure!(found == keys.len() as u64);
        let ours_ns = 1e9 / r1;
        push("btree_lookup_ns", ours_ns);
        push("btreemap_lookup_ns", map_ns);
        push("lookup_vs_btreemap", ours_ns / map_ns);
        push("btree_lookups_per_s_1t", r1);
        push("btree_lookups_per_s_2t", r2);
        push("btree_scale_2t", r2 / r1);

        let start = Instant::now();
        let (s, r) = scan_sum(&heap)?;
        let scan_rate = r as f64 / start.elapsed().as_secs_f64();
        ensure!(s == expected, "scan sum {s} != {expected}");
        let start = Instant::now();
        let mut sum = 0i64;
        for a in black_box(&accounts) {
            sum += a.abalance;
            black_box(a.aid);
        }
        let mem_rate = n as f64 / start.elapsed().as_secs_f64();
        ensure!(black_box(sum) == expected);
        push("seqscan_tuples_per_s", scan_rate);
        push("memscan_tuples_per_s", mem_rate);
        push("seqscan_vs_memscan", mem_rate / scan_rate);
    }
    let stats = tree.check()?;
    drop(e);

    let fig = |name, unit| samples.figure(name, unit);
    let figures = vec![
        fig("btree_lookup_ns", "ns"),
        fig("btreemap_lookup_ns", "ns"),
        fig("btree_lookups_per_s_1t", "/s"),
        fig("btree_lookups_per_s_2t", "/s"),
        fig("seqscan_tuples_per_s", "/s"),
        fig("memscan_tuples_per_s", "/s"),
    ];
    let ratio = |name, goal, target| samples.ratio(name, goal, target);
    let ratios = vec![
        ratio("lookup_vs_btreemap", Goal::AtMost, 2.0),
        ratio("btree_scale_2t", Goal::AtLeast, 1.8),
        ratio("seqscan_vs_memscan", Goal::AtMost, 5.0),
    ];
    let mut metadata = runner.metadata();
    metadata.insert("repeats".into(), opts.repeats.into());
    metadata.insert("keys".into(), n.into());
    metadata.insert("lookups_per_thread".into(), opts.lookups.into());
    metadata.insert("pool_size".into(), opts.pool_size.clone().into());
    metadata.insert("btree_levels".into(), stats.levels.into());
    metadata.insert("btree_pages".into(), stats.pages.into());
    metadata.insert("btree_build_s".into(), build_s.into());
    metadata.insert("heap_load_s".into(), load_s.into());
    let header = runner.header(&format!(
        "{n} keys, {} lookups a thread | repeats {}",
        opts.lookups, opts.repeats
    ));
    Ok(Report {
        header,
        figures,
        ratios,
        metadata,
        tables: Vec::new(),
        notes: vec![format!(
            "B+tree: {} levels, {} pages, built in {build_s:.2} s; heap of {n} rows loaded in {load_s:.2} s",
            stats.levels, stats.pages
        )],
    })
}
