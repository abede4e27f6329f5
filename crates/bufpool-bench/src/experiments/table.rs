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

use std::collections::BTreeMap;
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

use super::runner::{Runner, Steps};
use super::{summarize, Figure, Goal, Ratio, Report};

const INDEX: RelFileId = RelFileId::new(0, 700);
const TABLE: RelFileId = RelFileId::new(0, 701);

/// `bufpool experiment table` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// shared_buffers of the pool that holds the random-hit chain (e.g. 1GB, 256MB).
    #[arg(long, default_value = "1GB")]
    pub pool_size: String,
}

/// Keys in the index and rows in the table (fewer in a debug build).
const KEYS: u64 = if cfg!(debug_assertions) {
    50_000
} else {
    1_000_000
};
/// Lookups per thread per measurement (fewer in a debug build).
const LOOKUPS: usize = if cfg!(debug_assertions) {
    100_000
} else {
    2_000_000
};

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

/// One repetition's measurements.
#[derive(Debug, Clone, Copy)]
struct Rep {
    lookups_per_s_1t: f64,
    lookups_per_s_2t: f64,
    btreemap_lookup_ns: f64,
    seqscan_tuples_per_s: f64,
    memscan_tuples_per_s: f64,
}

impl Rep {
    fn btree_lookup_ns(&self) -> f64 {
        1e9 / self.lookups_per_s_1t
    }
}

/// What the repetitions measure against: the tree, the heap and their in-memory twins.
struct Bed<'e> {
    e: &'e Engine,
    tree: BTree<'e>,
    map: BTreeMap<i64, u64>,
    /// The lookup sequence (the same for the tree and the map).
    keys: Vec<i64>,
    heap: Heap<'e>,
    accounts: Vec<Account>,
    /// The sum of every row's balance.
    expected: i64,
    build_s: f64,
    load_s: f64,
}

/// Runs the experiment in the runner's scratch folder (smaller in a debug build).
pub fn run(a: &Args, r: &mut Runner) -> Result<Report> {
    let repeats = r.common.repeats as usize;
    ensure!(repeats >= 3, "--repeats must be at least 3");
    let mut c = Config::default();
    c.set("shared_buffers", &a.pool_size)?;
    c.set("synchronous_commit", "off")?;
    let e = Engine::open_vfs(Arc::new(RealVfs::new()), r.scratch(), &c, true)
        .with_context(|| format!("opening {}", r.scratch().display()))?;
    // The tree, the heap, then the repetitions.
    r.plan(Steps::new().untimed(2 + repeats));
    r.step(format!("building a B+tree of {KEYS} keys"));
    let (tree, build_s) = build_index(&e)?;
    r.step(format!("loading a heap of {KEYS} rows"));
    let bed = load_heap(&e, tree, build_s)?;
    let mut reps = Vec::with_capacity(repeats);
    for rep in 0..repeats {
        r.step(format!("rep {}/{repeats}", rep + 1));
        reps.push(measure(&bed)?);
    }
    let stats = bed.tree.check()?;
    let (build_s, load_s) = (bed.build_s, bed.load_s);
    drop(bed);
    drop(e);
    let mut report = report(a, r, &reps, repeats);
    report
        .metadata
        .insert("btree_levels".into(), stats.levels.into());
    report
        .metadata
        .insert("btree_pages".into(), stats.pages.into());
    report
        .metadata
        .insert("btree_build_s".into(), build_s.into());
    report.metadata.insert("heap_load_s".into(), load_s.into());
    report.notes.push(format!(
        "B+tree: {} levels, {} pages, built in {build_s:.2} s; heap of {KEYS} rows loaded in {load_s:.2} s",
        stats.levels, stats.pages
    ));
    Ok(report)
}

/// A B+tree of [`KEYS`] keys, bulk built; with its build time in seconds.
fn build_index(e: &Engine) -> Result<(BTree<'_>, f64)> {
    let n = KEYS;
    let t0 = Instant::now();
    let tree = BTree::bulk_build(
        e,
        INDEX,
        true,
        (0..n as i64).map(|k| (k, k as u64 * 7)),
        90,
        &mut |_| {},
    )?;
    Ok((tree, t0.elapsed().as_secs_f64()))
}

/// The map and lookup keys beside `tree` (every index page warmed into the pool), then a
/// committed heap of [`KEYS`] rows, scanned once to set its hint bits.
fn load_heap<'e>(e: &'e Engine, tree: BTree<'e>, build_s: f64) -> Result<Bed<'e>> {
    let n = KEYS;
    let map: BTreeMap<i64, u64> = (0..n as i64).map(|k| (k, k as u64 * 7)).collect();
    let mut rng = SmallRng::seed_from_u64(42);
    let keys: Vec<i64> = (0..LOOKUPS)
        .map(|_| rng.random_range(0..n as i64))
        .collect();
    // Warm: every index page into the pool.
    lookups_per_s(&tree, &keys, 1)?;

    let heap = Heap::create(e, TABLE)?;
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
    // First scan: sets hint bits (the commit log is consulted once per row here).
    let (s, r) = scan_sum(e, &heap)?;
    ensure!(s == expected && r == n, "scan saw {r} rows summing to {s}");
    Ok(Bed {
        e,
        tree,
        map,
        keys,
        heap,
        accounts,
        expected,
        build_s,
        load_s,
    })
}

/// The heap scanned with visibility checks: (sum of the balances, rows).
fn scan_sum(e: &Engine, heap: &Heap<'_>) -> Result<(i64, u64)> {
    let snap = e.txns().snapshot(INVALID_XID);
    let (mut sum, mut rows) = (0i64, 0u64);
    heap.scan(&snap, |_, d| {
        sum += i64::from_le_bytes(d[8..16].try_into().expect("8 bytes"));
        rows += 1;
    })?;
    Ok((sum, rows))
}

/// One repetition: lookups with 1 and 2 threads, the map's, the heap scan and the Vec's.
fn measure(bed: &Bed<'_>) -> Result<Rep> {
    let keys = &bed.keys;
    let (r1, found) = lookups_per_s(&bed.tree, keys, 1)?;
    ensure!(found == keys.len() as u64, "lookups found {found} keys");
    let (r2, _) = lookups_per_s(&bed.tree, keys, 2)?;
    let start = Instant::now();
    let mut found = 0u64;
    for k in keys {
        if bed.map.contains_key(black_box(k)) {
            found += 1;
        }
    }
    let map_ns = start.elapsed().as_nanos() as f64 / keys.len() as f64;
    ensure!(found == keys.len() as u64);

    let start = Instant::now();
    let (s, r) = scan_sum(bed.e, &bed.heap)?;
    let scan_rate = r as f64 / start.elapsed().as_secs_f64();
    ensure!(s == bed.expected, "scan sum {s} != {}", bed.expected);
    let start = Instant::now();
    let mut sum = 0i64;
    for a in black_box(&bed.accounts) {
        sum += a.abalance;
        black_box(a.aid);
    }
    let mem_rate = KEYS as f64 / start.elapsed().as_secs_f64();
    ensure!(black_box(sum) == bed.expected);
    Ok(Rep {
        lookups_per_s_1t: r1,
        lookups_per_s_2t: r2,
        btreemap_lookup_ns: map_ns,
        seqscan_tuples_per_s: scan_rate,
        memscan_tuples_per_s: mem_rate,
    })
}

/// The three targets, each the median of its per-repetition ratios: B+tree lookup ns over
/// the BTreeMap's, lookups/s with 2 threads over 1, the Vec's tuples/s over the heap's.
fn targets(reps: &[Rep]) -> Vec<Ratio> {
    let per = |f: &dyn Fn(&Rep) -> f64| reps.iter().map(f).collect::<Vec<f64>>();
    vec![
        Ratio::new(
            "lookup_vs_btreemap",
            &per(&|r| r.btree_lookup_ns() / r.btreemap_lookup_ns),
            Goal::AtMost,
            2.0,
        ),
        Ratio::new(
            "btree_scale_2t",
            &per(&|r| r.lookups_per_s_2t / r.lookups_per_s_1t),
            Goal::AtLeast,
            1.8,
        ),
        Ratio::new(
            "seqscan_vs_memscan",
            &per(&|r| r.memscan_tuples_per_s / r.seqscan_tuples_per_s),
            Goal::AtMost,
            5.0,
        ),
    ]
}

/// The report: figures over the repetitions, the targets, sizes (the B+tree's shape and
/// the load times are the caller's).
fn report(a: &Args, runner: &Runner, reps: &[Rep], repeats: usize) -> Report {
    let figure = |name, unit, f: &dyn Fn(&Rep) -> f64| Figure {
        name,
        unit,
        summary: summarize(&reps.iter().map(f).collect::<Vec<f64>>()),
    };
    let figures = vec![
        figure("btree_lookup_ns", "ns", &|r| r.btree_lookup_ns()),
        figure("btreemap_lookup_ns", "ns", &|r| r.btreemap_lookup_ns),
        figure("btree_lookups_per_s_1t", "/s", &|r| r.lookups_per_s_1t),
        figure("btree_lookups_per_s_2t", "/s", &|r| r.lookups_per_s_2t),
        figure("seqscan_tuples_per_s", "/s", &|r| r.seqscan_tuples_per_s),
        figure("memscan_tuples_per_s", "/s", &|r| r.memscan_tuples_per_s),
    ];
    let mut metadata = runner.metadata();
    metadata.insert("repeats".into(), repeats.into());
    metadata.insert("keys".into(), KEYS.into());
    metadata.insert("lookups_per_thread".into(), LOOKUPS.into());
    metadata.insert("pool_size".into(), a.pool_size.clone().into());
    let header = runner.header(&format!(
        "{KEYS} keys, {LOOKUPS} lookups a thread | repeats {repeats}"
    ));
    Report {
        header,
        figures,
        ratios: targets(reps),
        metadata,
        tables: Vec::new(),
        notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rep(btree_ns: f64, map_ns: f64, scale: f64, scan: f64, mem: f64) -> Rep {
        Rep {
            lookups_per_s_1t: 1e9 / btree_ns,
            lookups_per_s_2t: scale * 1e9 / btree_ns,
            btreemap_lookup_ns: map_ns,
            seqscan_tuples_per_s: scan,
            memscan_tuples_per_s: mem,
        }
    }

    #[test]
    fn targets_are_medians_of_per_repetition_ratios() {
        let reps = [
            rep(100.0, 50.0, 1.9, 100.0, 400.0),
            rep(90.0, 50.0, 1.7, 100.0, 600.0),
            rep(110.0, 50.0, 1.85, 100.0, 450.0),
        ];
        let t = targets(&reps);
        let names: Vec<&str> = t.iter().map(|r| r.name).collect();
        assert_eq!(
            names,
            ["lookup_vs_btreemap", "btree_scale_2t", "seqscan_vs_memscan"]
        );
        assert!((t[0].median - 2.0).abs() < 1e-9 && t[0].pass, "2.0 <= 2.0");
        assert!((t[1].median - 1.85).abs() < 1e-9 && t[1].pass);
        assert!((t[2].median - 4.5).abs() < 1e-9 && t[2].pass);
        // Just past each target: every verdict turns.
        let reps = reps.map(|r| Rep {
            btreemap_lookup_ns: r.btreemap_lookup_ns * 0.99,
            lookups_per_s_2t: r.lookups_per_s_2t * 0.97,
            memscan_tuples_per_s: r.memscan_tuples_per_s * 1.2,
            ..r
        });
        assert!(
            targets(&reps).iter().all(|r| !r.pass),
            "{:?}",
            targets(&reps)
        );
    }
}
