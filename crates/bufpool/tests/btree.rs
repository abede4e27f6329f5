//! The B-link tree index: model-checked operations, concurrency, crash recovery, bulk
//! build, uniqueness and structure checking.
//!
//! Proves: random insert/delete/get/lookup/range sequences (unique and non-unique, with
//! crashes in between) agree with a `BTreeSet` model and leave a tree that passes
//! `check()`, also after recovery; concurrent inserters, deleters and readers never lose
//! or hide a published entry and scans stay sorted; a crash keeps every committed entry; a
//! split cut short between its two records is repaired; bulk builds honour the fill
//! factor and refuse unsorted input; and `check()` does detect damage.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bufpool::index::btree_page::{entry_offset, BtPage};
use bufpool::index::IndexError;
use bufpool::index::{BTree, BTreeStats};
use bufpool::{BufferTag, Config, Engine, ForkNumber, MemVfs, RelFileId, Vfs};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const REL: RelFileId = RelFileId::new(0, 700);

/// 4 KiB pages (253 leaf entries, 168 downlinks), so that splits happen early.
fn config(buffers: &str) -> Config {
    let mut c = Config::default();
    c.set("block_size", "4096").unwrap();
    c.set("shared_buffers", buffers).unwrap();
    c.set("wal_segment_size", "1MB").unwrap();
    c
}

fn open_with(vfs: &MemVfs, c: &Config) -> Engine {
    Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        c,
        true,
    )
    .unwrap()
}

fn open(vfs: &MemVfs) -> Engine {
    open_with(vfs, &config("256"))
}

/// Every entry, through a full range scan (also checks that it is strictly ascending).
fn contents(t: &BTree<'_>) -> Vec<(i64, u64)> {
    let mut out: Vec<(i64, u64)> = Vec::new();
    t.range(i64::MIN, i64::MAX, |k, v| {
        if let Some(&last) = out.last() {
            assert!(
                last < (k, v),
                "scan not ascending: {last:?} then {:?}",
                (k, v)
            );
        }
        out.push((k, v));
        true
    })
    .unwrap();
    out
}

fn check(t: &BTree<'_>) -> BTreeStats {
    match t.check() {
        Ok(s) => s,
        Err(e) => panic!("check failed: {e}"),
    }
}

// ------------------------------------------------------------ model test

#[derive(Debug, Clone)]
enum Op {
    Insert(i64, u64),
    Delete(i64, u64),
    Get(i64),
    Lookup(i64),
    Range(i64, i64),
    /// Commit (WAL durable), drop the engine without shutdown, recover, reopen the index.
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    // Keys from a small range: duplicates, deletes of present entries and splits happen.
    let key = -20i64..380;
    let val = 0u64..4;
    prop_oneof![
        12 => (key.clone(), val.clone()).prop_map(|(k, v)| Op::Insert(k, v)),
        4 => (key.clone(), val).prop_map(|(k, v)| Op::Delete(k, v)),
        2 => key.clone().prop_map(Op::Get),
        2 => key.clone().prop_map(Op::Lookup),
        1 => (key.clone(), 0i64..60).prop_map(|(lo, w)| Op::Range(lo, lo + w)),
        1 => (key, 0i64..6).prop_map(|(lo, w)| Op::Range(lo, lo - w)),
        1 => Just(Op::Crash),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    // Mostly long runs (up to ~2000 ops), with few crashes.
    proptest::collection::vec(op(), 1..2000).prop_map(|mut v| {
        let mut crashes = 0;
        v.retain(|o| {
            if matches!(o, Op::Crash) {
                crashes += 1;
                crashes <= 2
            } else {
                true
            }
        });
        v
    })
}

fn run_model(unique: bool, ops: &[Op]) -> Result<(), TestCaseError> {
    let vfs = MemVfs::new();
    // Small WAL segments: recovery scans the rest of the last segment for valid records.
    let mut c = config("256");
    c.set("wal_segment_size", "256kB").unwrap();
    let open = |vfs: &MemVfs| open_with(vfs, &c);
    let mut model: BTreeSet<(i64, u64)> = BTreeSet::new();
    let mut created = false;
    for segment in ops.split(|o| matches!(o, Op::Crash)) {
        let e = open(&vfs);
        let t = if created {
            let t = BTree::open(&e, REL).unwrap();
            prop_assert_eq!(t.is_unique(), unique);
            // Recovery restored exactly what was committed.
            prop_assert_eq!(contents(&t), model.iter().copied().collect::<Vec<_>>());
            check(&t);
            t
        } else {
            created = true;
            BTree::create(&e, REL, unique).unwrap()
        };
        let xid = e.begin_xid().unwrap();
        for o in segment {
            match *o {
                Op::Insert(k, v) => {
                    let r = t.insert(xid, k, v);
                    let dup = unique && model.range((k, 0)..=(k, u64::MAX)).next().is_some();
                    if dup {
                        prop_assert!(
                            matches!(r, Err(IndexError::DuplicateKey { key, .. }) if key == k),
                            "insert ({}, {}) into unique: {:?}",
                            k,
                            v,
                            r
                        );
                    } else {
                        r.unwrap();
                        model.insert((k, v));
                    }
                }
                Op::Delete(k, v) => {
                    prop_assert_eq!(t.delete(xid, k, v).unwrap(), model.remove(&(k, v)));
                }
                Op::Get(k) => {
                    let want = model.range((k, 0)..=(k, u64::MAX)).next().map(|e| e.1);
                    prop_assert_eq!(t.get(k).unwrap(), want);
                }
                Op::Lookup(k) => {
                    let mut got = Vec::new();
                    t.lookup(k, |v| got.push(v)).unwrap();
                    let want: Vec<u64> = model.range((k, 0)..=(k, u64::MAX)).map(|e| e.1).collect();
                    prop_assert_eq!(got, want);
                }
                Op::Range(lo, hi) => {
                    let mut got = Vec::new();
                    // Stop early sometimes: `f` returning false ends the scan.
                    let limit = (hi - lo).rem_euclid(7) as usize * 3 + 1;
                    t.range(lo, hi, |k, v| {
                        got.push((k, v));
                        got.len() < limit
                    })
                    .unwrap();
                    let want: Vec<(i64, u64)> = if lo <= hi {
                        model
                            .range((lo, 0)..=(hi, u64::MAX))
                            .take(limit)
                            .copied()
                            .collect()
                    } else {
                        Vec::new()
                    };
                    prop_assert_eq!(got, want);
                }
                Op::Crash => unreachable!(),
            }
        }
        e.commit_transaction(xid).unwrap();
        let stats = check(&t);
        prop_assert_eq!(stats.entries, model.len() as u64);
        prop_assert_eq!(stats.incomplete_splits, 0);
        prop_assert_eq!(contents(&t), model.iter().copied().collect::<Vec<_>>());
        // Dropped without shutdown: the next segment (or the end) recovers.
    }
    // Final crash and recovery.
    let e = open(&vfs);
    let t = BTree::open(&e, REL).unwrap();
    check(&t);
    prop_assert_eq!(contents(&t), model.iter().copied().collect::<Vec<_>>());
    Ok(())
}

proptest! {
    // XorShift: the default ChaCha generator dominates the run time of a debug build.
    #![proptest_config(ProptestConfig {
        cases: 200,
        rng_algorithm: proptest::test_runner::RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    })]

    #[test]
    fn operations_match_a_model_and_survive_crashes(unique in any::<bool>(), ops in ops()) {
        run_model(unique, &ops)?;
    }
}

// ----------------------------------------------------------- single-threaded

#[test]
fn ascending_descending_and_random_inserts_build_deep_valid_trees() {
    let vfs = MemVfs::new();
    let e = open_with(&vfs, &config("4096"));
    for (n, order) in [(0u32, "asc"), (1, "desc"), (2, "random")] {
        let rel = RelFileId::new(0, 800 + n);
        let t = BTree::create(&e, rel, n == 1).unwrap();
        let mut keys: Vec<i64> = (0..40_000).map(|i| i * 3).collect();
        match order {
            "desc" => keys.reverse(),
            "random" => keys.shuffle(&mut SmallRng::seed_from_u64(7)),
            _ => {}
        }
        for &k in &keys {
            t.insert(1, k, k as u64 + 1).unwrap();
        }
        let s = check(&t);
        assert_eq!(s.entries, 40_000, "{order}");
        assert!(s.levels >= 3, "{order}: {s:?}");
        if order == "asc" {
            // Rightmost splits keep 90% on the left.
            assert!(s.min_fill > 0.85, "{order}: {s:?}");
        }
        assert!(s.min_fill >= 0.49 || order == "desc", "{order}: {s:?}");
        for k in [0, 3, 59_997, 119_997] {
            assert_eq!(t.get(k).unwrap(), Some(k as u64 + 1));
        }
        for k in [-1, 1, 119_998, i64::MAX, i64::MIN] {
            assert_eq!(t.get(k).unwrap(), None);
        }
        let mut n = 0;
        t.range(300, 599, |k, v| {
            assert_eq!((k % 3, v), (0, k as u64 + 1));
            n += 1;
            true
        })
        .unwrap();
        assert_eq!(n, 100);
    }
}

#[test]
fn many_values_of_one_key_span_pages() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let t = BTree::create(&e, REL, false).unwrap();
    for v in 0..2000u64 {
        t.insert(1, 5, v * 7 % 2000).unwrap();
        t.insert(1, 4, v).unwrap();
        t.insert(1, 6, v).unwrap();
    }
    let s = check(&t);
    assert!(s.leaf_pages > 20, "{s:?}");
    let mut got = Vec::new();
    t.lookup(5, |v| got.push(v)).unwrap();
    assert_eq!(got, (0..2000).collect::<Vec<u64>>());
    assert_eq!(t.get(5).unwrap(), Some(0));
    assert_eq!(t.get(6).unwrap(), Some(0));
    // Delete all but the largest value of key 5: get must walk across empty pages.
    for v in 0..1999u64 {
        assert!(t.delete(1, 5, v).unwrap());
    }
    assert!(!t.delete(1, 5, 0).unwrap());
    assert_eq!(t.get(5).unwrap(), Some(1999));
    assert_eq!(t.get(7).unwrap(), None);
    check(&t);
}

#[test]
fn unique_index_rejects_duplicates_non_unique_keeps_both() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let u = BTree::create(&e, REL, true).unwrap();
    u.insert(1, 10, 100).unwrap();
    let err = u.insert(1, 10, 200).unwrap_err();
    assert!(
        matches!(&err, IndexError::DuplicateKey { key: 10, index } if index == "0/700"),
        "{err}"
    );
    assert!(err.to_string().contains("duplicate key 10"), "{err}");
    assert!(matches!(
        u.insert(1, 10, 100),
        Err(IndexError::DuplicateKey { .. })
    ));
    assert_eq!(u.get(10).unwrap(), Some(100));
    // Many keys: duplicates are found wherever the key sits, also next to page borders.
    for k in 0..3000i64 {
        if k != 10 {
            u.insert(1, k, (k * 31 % 1000) as u64).unwrap();
        }
    }
    for k in (0..3000i64).step_by(7) {
        assert!(matches!(
            u.insert(1, k, 5000),
            Err(IndexError::DuplicateKey { .. })
        ));
    }
    assert!(u.delete(1, 10, 100).unwrap());
    u.insert(1, 10, 200).unwrap();
    assert_eq!(u.get(10).unwrap(), Some(200));
    assert_eq!(check(&u).entries, 3000);

    let n = BTree::create(&e, RelFileId::new(0, 701), false).unwrap();
    n.insert(1, 10, 100).unwrap();
    n.insert(1, 10, 200).unwrap();
    n.insert(1, 10, 100).unwrap(); // the same pair again: nothing happens
    let mut vals = Vec::new();
    n.lookup(10, |v| vals.push(v)).unwrap();
    assert_eq!(vals, vec![100, 200]);
    assert_eq!(n.get(10).unwrap(), Some(100));
    assert_eq!(check(&n).entries, 2);
}

// ------------------------------------------------------------- concurrency

#[test]
fn concurrent_inserts_deletes_and_readers() {
    run_concurrent("2048", 10_000, 2_500, 3, false);
}

/// The same with a pool far smaller than the tree: pages are evicted and read back while
/// splits are under way.
#[test]
fn concurrent_inserts_deletes_and_readers_with_evictions() {
    run_concurrent("48", 2_500, 600, 2, false);
}

/// Both again with `optimistic_reads = on`: the readers' descents read internal pages with
/// no pin and no lock while splits change them and evictions reuse their buffers.
#[test]
fn concurrent_inserts_deletes_and_optimistic_readers() {
    run_concurrent("2048", 10_000, 2_500, 3, true);
}

#[test]
fn concurrent_inserts_deletes_and_optimistic_readers_with_evictions() {
    run_concurrent("48", 2_500, 600, 2, true);
}

/// 4 inserters (`own` pairs each on disjoint keys, plus `shared` pairs all of them insert),
/// a deleter removing a quarter of the own pairs once published, 2 readers.
fn run_concurrent(buffers: &str, own: usize, shared: usize, min_levels: u32, optimistic: bool) {
    const INSERTERS: usize = 4;
    let vfs = MemVfs::new();
    let mut c = config(buffers);
    c.set("optimistic_reads", if optimistic { "on" } else { "off" })
        .unwrap();
    let e = open_with(&vfs, &c);
    let t = BTree::create(&e, REL, false).unwrap();
    let mut rng = SmallRng::seed_from_u64(42);
    // Shared pairs: all inserters insert them (the second insert of a pair is a no-op);
    // own pairs: disjoint keys, and those with index % 4 == 0 get deleted concurrently.
    let shared: Vec<(i64, u64)> = (0..shared)
        .map(|_| (rng.random_range(0..1_000_000), rng.random_range(0..3)))
        .collect();
    // (pair, deletable)
    let seqs: Vec<Vec<((i64, u64), bool)>> = (0..INSERTERS)
        .map(|th| {
            let mut s: Vec<((i64, u64), bool)> = (0..own)
                .map(|i| {
                    let k = (i * INSERTERS + th) as i64 * 97 % 1_000_003 + 2_000_000;
                    ((k, th as u64), i % 4 == 0)
                })
                .collect();
            s.extend(shared.iter().map(|&p| (p, false)));
            s.shuffle(&mut rng);
            s
        })
        .collect();
    let published: Vec<AtomicUsize> = (0..INSERTERS).map(|_| AtomicUsize::new(0)).collect();
    let done = AtomicBool::new(false);
    let deleted = AtomicUsize::new(0);
    let lookups = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let inserters: Vec<_> = (0..INSERTERS)
            .map(|th| {
                let (t, e, seq, published) = (&t, &e, &seqs[th], &published);
                s.spawn(move || {
                    let xid = e.begin_xid().unwrap();
                    for (i, &((k, v), _)) in seq.iter().enumerate() {
                        t.insert(xid, k, v).unwrap();
                        published[th].store(i + 1, Ordering::Release);
                    }
                    e.commit_transaction(xid).unwrap();
                })
            })
            .collect();
        // The deleter: removes deletable own pairs once published, in each thread's order.
        {
            let (t, e, seqs, published, done, deleted) =
                (&t, &e, &seqs, &published, &done, &deleted);
            s.spawn(move || {
                let xid = e.begin_xid().unwrap();
                let mut next = [0usize; INSERTERS];
                loop {
                    let finished = done.load(Ordering::Acquire);
                    let mut progress = false;
                    for th in 0..INSERTERS {
                        let upto = published[th].load(Ordering::Acquire);
                        while next[th] < upto {
                            let ((k, v), del) = seqs[th][next[th]];
                            if del {
                                assert!(t.delete(xid, k, v).unwrap(), "delete of ({k}, {v})");
                                deleted.fetch_add(1, Ordering::Relaxed);
                            }
                            next[th] += 1;
                            progress = true;
                        }
                    }
                    if finished && !progress {
                        break;
                    }
                    if !progress {
                        std::thread::yield_now();
                    }
                }
                e.commit_transaction(xid).unwrap();
            });
        }
        // Readers: published pairs that are never deleted must always be found.
        for r in 0..2u64 {
            let (t, seqs, published, done, lookups) = (&t, &seqs, &published, &done, &lookups);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(100 + r);
                let mut i = 0u64;
                while !done.load(Ordering::Acquire) {
                    let th = rng.random_range(0..INSERTERS);
                    let upto = published[th].load(Ordering::Acquire);
                    if upto == 0 {
                        std::thread::yield_now();
                        continue;
                    }
                    let ((k, v), del) = seqs[th][rng.random_range(0..upto)];
                    if del {
                        continue;
                    }
                    i += 1;
                    let mut found = false;
                    t.lookup(k, |x| found |= x == v).unwrap();
                    assert!(found, "published ({k}, {v}) not found by lookup");
                    assert!(
                        t.get(k).unwrap().is_some(),
                        "published key {k} not found by get"
                    );
                    if i % 8 == 0 {
                        let mut last: Option<(i64, u64)> = None;
                        let mut seen = false;
                        t.range(k - 3000, k + 3000, |kk, vv| {
                            assert!(last < Some((kk, vv)), "range not sorted");
                            assert!((k - 3000..=k + 3000).contains(&kk));
                            last = Some((kk, vv));
                            seen |= (kk, vv) == (k, v);
                            true
                        })
                        .unwrap();
                        assert!(seen, "published ({k}, {v}) missing from a range scan");
                    }
                }
                lookups.fetch_add(i as usize, Ordering::Relaxed);
            });
        }
        for h in inserters {
            h.join().unwrap();
        }
        done.store(true, Ordering::Release);
    });
    let mut model: BTreeSet<(i64, u64)> = BTreeSet::new();
    for seq in &seqs {
        for &(p, del) in seq {
            if !del {
                model.insert(p);
            }
        }
    }
    assert_eq!(deleted.load(Ordering::Relaxed), INSERTERS * own.div_ceil(4));
    assert!(lookups.load(Ordering::Relaxed) > 100, "readers ran");
    let s = check(&t);
    assert_eq!(s.incomplete_splits, 0);
    assert!(s.levels >= min_levels, "{s:?}");
    assert_eq!(s.entries, model.len() as u64);
    assert_eq!(contents(&t), model.into_iter().collect::<Vec<_>>());
}

#[test]
fn concurrent_unique_inserts_of_the_same_keys_admit_one_each() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let t = BTree::create(&e, REL, true).unwrap();
    let wins = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for th in 0..4u64 {
            let (t, wins) = (&t, &wins);
            s.spawn(move || {
                let mut keys: Vec<i64> = (0..3000).collect();
                keys.shuffle(&mut SmallRng::seed_from_u64(th));
                for k in keys {
                    match t.insert(1, k, th) {
                        Ok(()) => {
                            wins.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(IndexError::DuplicateKey { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            });
        }
    });
    assert_eq!(wins.load(Ordering::Relaxed), 3000);
    assert_eq!(check(&t).entries, 3000);
}

// ------------------------------------------------------------------ crashes

#[test]
fn committed_inserts_survive_a_crash() {
    let vfs = MemVfs::new();
    let mut keys: Vec<i64> = (0..20_000).map(|i| i * 7919 % 1_000_000).collect();
    keys.shuffle(&mut SmallRng::seed_from_u64(3));
    {
        let e = open(&vfs);
        let t = BTree::create(&e, REL, true).unwrap();
        for chunk in keys.chunks(500) {
            let xid = e.begin_xid().unwrap();
            for &k in chunk {
                t.insert(xid, k, k as u64 * 2).unwrap();
            }
            e.commit_transaction(xid).unwrap();
        }
        // A transaction in flight when the process dies: it may or may not survive.
        let xid = e.begin_xid().unwrap();
        for k in 0..300 {
            t.insert(xid, -1 - k, 1).unwrap();
        }
    }
    let e = open(&vfs);
    let report = e.recovery_report().unwrap();
    assert!(report.pages_applied > 0, "{report:?}");
    let t = BTree::open(&e, REL).unwrap();
    assert!(t.is_unique());
    let s = check(&t);
    assert!(s.entries >= 20_000, "{s:?}");
    for &k in &keys {
        assert_eq!(t.get(k).unwrap(), Some(k as u64 * 2), "key {k}");
    }
    let mut extra = 0;
    t.range(i64::MIN, -1, |k, v| {
        assert!((-300..0).contains(&k) && v == 1);
        extra += 1;
        true
    })
    .unwrap();
    assert_eq!(s.entries, 20_000 + extra);
    // The recovered tree takes more inserts.
    t.insert(1, -5000, 9).unwrap();
    check(&t);
}

#[test]
fn crashes_at_arbitrary_points_leave_a_valid_tree() {
    // No commits: whatever reached the log (the WAL ring is written out when it fills)
    // survives, cutting the insert sequence anywhere, splits included.
    let mut rng = SmallRng::seed_from_u64(11);
    for round in 0..6 {
        let vfs = MemVfs::new();
        let mut c = config("256");
        c.set("wal_buffers", "64kB").unwrap();
        let keys: Vec<i64> = (0..6000).map(|_| rng.random_range(0..50_000)).collect();
        {
            let e = open_with(&vfs, &c);
            let t = BTree::create(&e, REL, false).unwrap();
            e.wal().flush(e.wal().insert_position()).unwrap();
            let n = rng.random_range(1000..keys.len());
            for &k in &keys[..n] {
                t.insert(7, k, 1).unwrap();
            }
        }
        let e = open_with(&vfs, &c);
        let t = BTree::open(&e, REL).unwrap();
        let s = check(&t);
        let all: BTreeSet<i64> = keys.iter().copied().collect();
        let got = contents(&t);
        assert_eq!(got.len() as u64, s.entries);
        assert!(
            got.iter().all(|(k, v)| all.contains(k) && *v == 1),
            "round {round}"
        );
        // More inserts on the recovered tree repair whatever split was cut short.
        for &k in &keys {
            t.insert(8, k, 1).unwrap();
        }
        let s = check(&t);
        assert_eq!(s.entries, all.len() as u64, "round {round}");
    }
}

/// A copy of a MemVfs tree (files and directories under `dir`).
fn copy_fs(src: &MemVfs, dst: &MemVfs, dir: &Path) {
    dst.create_dir_all(dir).unwrap();
    for name in src.list_dir(dir).unwrap() {
        let path = dir.join(name);
        match src.contents(&path) {
            Some(data) => dst.set_contents(&path, data),
            None => copy_fs(src, dst, &path),
        }
    }
}

#[test]
fn every_crash_point_inside_a_split_recovers_and_is_repaired() {
    // A bulk-built tree with full pages: every insert splits a leaf, the first one also
    // an internal page. After a checkpoint (and with a pool large enough that nothing is
    // evicted) the data files stay as they were, so cutting the log anywhere after the
    // checkpoint gives a valid crash state: data files + a prefix of the log.
    const SEG: u64 = 256 << 10;
    let vfs = MemVfs::new();
    let mut c = config("1024");
    c.set("wal_segment_size", "256kB").unwrap();
    let inserts = [5i64, 100_005, 200_005, 300_005, 455_005, 499_995];
    let mut spans = Vec::new(); // (start LSN, end LSN) of each insert
    {
        let e = open_with(&vfs, &c);
        let t = BTree::bulk_build(
            &e,
            REL,
            false,
            (0..50_000i64).map(|k| (k * 10, 0)),
            100,
            &mut |_| {},
        )
        .unwrap();
        let s0 = check(&t);
        assert!(s0.levels >= 3 && s0.min_fill == 1.0, "{s0:?}");
        e.checkpoint().unwrap();
        for &k in &inserts {
            let before = e.wal().insert_position();
            t.insert(9, k, 1).unwrap();
            spans.push((before.0, e.wal().insert_position().0));
        }
        let s1 = check(&t);
        assert_eq!(
            s1.internal_pages,
            s0.internal_pages + 1,
            "the first insert split an internal page"
        );
        e.wal().flush(e.wal().insert_position()).unwrap();
    }
    let (mut incomplete, mut unused) = (0, 0);
    for (j, &(start, end)) in spans.iter().enumerate() {
        for cut in [
            start + 8,
            start + (end - start) / 3,
            start + (end - start) * 2 / 3,
            end - 8,
        ] {
            let crashed = MemVfs::new();
            copy_fs(&vfs, &crashed, Path::new("/db"));
            // Cut the log at `cut`: zero the rest of its segment and every later one.
            for segno in cut / SEG..=end / SEG + 1 {
                let path = Path::new("/db/wal").join(format!("{segno:016X}"));
                if let Some(mut data) = crashed.contents(&path) {
                    let from = if segno == cut / SEG {
                        (cut % SEG) as usize
                    } else {
                        0
                    };
                    data[from..].fill(0);
                    crashed.set_contents(&path, data);
                }
            }
            let e = open_with(&crashed, &c);
            let t = BTree::open(&e, REL).unwrap();
            let s = check(&t);
            incomplete += s.incomplete_splits;
            unused += s.unused_pages;
            let got = contents(&t);
            let mine: Vec<i64> = got.iter().filter(|e| e.1 == 1).map(|e| e.0).collect();
            assert_eq!(got.len() - mine.len(), 50_000, "cut at {cut}: bulk entries");
            assert!(
                mine == inserts[..j] || mine == inserts[..=j],
                "cut at {cut} in insert {j}: {mine:?}"
            );
            // Inserting the pair again finishes any split the crash cut short.
            t.insert(10, inserts[j], 1).unwrap();
            let s = check(&t);
            assert_eq!(s.incomplete_splits, 0, "cut at {cut}: {s:?}");
            assert_eq!(s.entries, 50_000 + j as u64 + 1);
            assert_eq!(t.get(inserts[j]).unwrap(), Some(1));
        }
    }
    assert!(
        incomplete >= spans.len() as u32,
        "cuts between split and downlink: {incomplete}"
    );
    assert!(
        unused > 0,
        "cuts before a split's record leave extended, unused blocks"
    );
}

#[test]
fn a_split_cut_short_is_repaired_by_the_next_insert() {
    let vfs = MemVfs::new();
    let keys: Vec<i64> = (0..3000).map(|i| i * 10).collect();
    {
        let e = open(&vfs);
        let t = BTree::create(&e, REL, false).unwrap();
        for &k in &keys[..2000] {
            t.insert(1, k, 0).unwrap();
        }
        // The next split logs its two halves but not the downlink.
        t.interrupt_next_split();
        let mut i = 2000;
        while check(&t).incomplete_splits == 0 {
            t.insert(1, keys[i], 0).unwrap();
            i += 1;
        }
        let s = check(&t);
        assert_eq!(s.incomplete_splits, 1, "{s:?}");
        // Searches move right across the missing downlink.
        for &k in &keys[..i] {
            assert_eq!(t.get(k).unwrap(), Some(0), "key {k}");
        }
        e.wal().flush(e.wal().insert_position()).unwrap();
        // Crash with the split incomplete.
    }
    let e = open(&vfs);
    let t = BTree::open(&e, REL).unwrap();
    let s = check(&t);
    assert_eq!(s.incomplete_splits, 1, "recovery keeps the state: {s:?}");
    // Inserting a key on the flagged page finishes the split first.
    let before: Vec<(i64, u64)> = contents(&t);
    let last = before.last().unwrap().0;
    t.insert(2, last + 1, 0).unwrap();
    for &k in &keys {
        if k <= last {
            assert_eq!(t.get(k).unwrap(), Some(0));
        }
    }
    let mut extra = 0;
    for &k in &keys {
        if k > last {
            t.insert(2, k, 0).unwrap();
            extra += 1;
        }
    }
    let s = check(&t);
    assert_eq!(s.incomplete_splits, 0, "{s:?}");
    assert_eq!(s.entries, before.len() as u64 + 1 + extra);
}

// --------------------------------------------------------------- bulk build

#[test]
fn bulk_build_fills_leaves_to_the_fillfactor() {
    let vfs = MemVfs::new();
    {
        let e = open_with(&vfs, &config("2048"));
        let mut reports = Vec::new();
        let t = BTree::bulk_build(
            &e,
            REL,
            true,
            (0..100_000i64).map(|i| (i * 2, i as u64)),
            90,
            &mut |n| reports.push(n),
        )
        .unwrap();
        assert_eq!(reports, vec![65_536, 100_000]);
        let s = check(&t);
        assert_eq!(s.entries, 100_000);
        assert!(s.levels >= 3, "{s:?}");
        assert!((0.88..=0.91).contains(&s.min_fill), "{s:?}");
        for i in (0..100_000i64).step_by(13) {
            assert_eq!(t.get(i * 2).unwrap(), Some(i as u64));
            assert_eq!(t.get(i * 2 + 1).unwrap(), None);
        }
        // Inserts into the packed tree split pages as usual.
        for i in 0..5000i64 {
            t.insert(1, i * 40 + 1, 7).unwrap();
        }
        assert!(matches!(
            t.insert(1, 400, 1),
            Err(IndexError::DuplicateKey { key: 400, .. })
        ));
        assert_eq!(check(&t).entries, 105_000);
        e.wal().flush(e.wal().insert_position()).unwrap();
    }
    // Crash: the build and the inserts are recovered.
    let e = open_with(&vfs, &config("2048"));
    let t = BTree::open(&e, REL).unwrap();
    assert_eq!(check(&t).entries, 105_000);
    assert_eq!(t.get(199_998).unwrap(), Some(99_999));
    assert_eq!(t.get(41).unwrap(), Some(7));
}

#[test]
fn bulk_build_refuses_bad_input() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let unsorted = [(1i64, 0u64), (5, 0), (3, 0)];
    let err = BTree::bulk_build(&e, REL, false, unsorted.into_iter(), 90, &mut |_| {}).unwrap_err();
    assert!(
        matches!(&err, IndexError::Corrupt { reason, .. } if reason.contains("not sorted")),
        "{err}"
    );
    let dup = [(1i64, 0u64), (2, 0), (2, 1)];
    let err = BTree::bulk_build(
        &e,
        RelFileId::new(0, 702),
        true,
        dup.into_iter(),
        90,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(
        matches!(err, IndexError::DuplicateKey { key: 2, .. }),
        "{err}"
    );
    let err = BTree::bulk_build(
        &e,
        RelFileId::new(0, 703),
        true,
        [].into_iter(),
        5,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(err.to_string().contains("fillfactor"), "{err}");
    // Non-unique: a repeated pair is kept once; an empty input gives an empty tree.
    let rep = [(1i64, 0u64), (1, 0), (1, 1)];
    let t = BTree::bulk_build(
        &e,
        RelFileId::new(0, 704),
        false,
        rep.into_iter(),
        100,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(contents(&t), vec![(1, 0), (1, 1)]);
    let t = BTree::bulk_build(
        &e,
        RelFileId::new(0, 705),
        false,
        [].into_iter(),
        100,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(check(&t).entries, 0);
    t.insert(1, 3, 3).unwrap();
    assert_eq!(t.get(3).unwrap(), Some(3));
}

// ------------------------------------------------------------------- damage

/// A leaf with at least `min` entries (and its block).
fn find_leaf(e: &Engine, min: usize) -> u32 {
    let pool = e.pool();
    let n = pool.nblocks(REL, ForkNumber::Main).unwrap();
    for b in 1..n {
        let buf = pool.read(BufferTag::new(REL, ForkNumber::Main, b)).unwrap();
        let g = buf.read();
        let p = BtPage(&g);
        if !p.is_new() && p.is_leaf() && p.len() >= min && !p.is_rightmost() {
            return b;
        }
    }
    panic!("no leaf with {min} entries");
}

fn corrupt_reason(t: &BTree<'_>) -> String {
    match t.check() {
        Err(IndexError::Corrupt { index, reason }) => {
            assert_eq!(index, "0/700");
            reason
        }
        other => panic!("check passed a damaged tree: {other:?}"),
    }
}

#[test]
fn check_detects_damage() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let t = BTree::create(&e, REL, false).unwrap();
    for k in 0..2000i64 {
        t.insert(1, k * 5 % 2000, 1).unwrap();
    }
    check(&t);
    let leaf = find_leaf(&e, 10);
    let tag = BufferTag::new(REL, ForkNumber::Main, leaf);
    let swap = |i: usize, j: usize| {
        let buf = e.pool().read(tag).unwrap();
        let mut g = buf.write();
        let (a, b) = (entry_offset(0, i), entry_offset(0, j));
        let ei: Vec<u8> = g[a..a + 16].to_vec();
        let ej: Vec<u8> = g[b..b + 16].to_vec();
        g[a..a + 16].copy_from_slice(&ej);
        g[b..b + 16].copy_from_slice(&ei);
    };
    // Entries out of order.
    swap(3, 4);
    let reason = corrupt_reason(&t);
    assert!(
        reason.contains(&format!("block {leaf} entry 4")) && reason.contains("not above"),
        "{reason}"
    );
    swap(3, 4);
    check(&t);
    // A key at or above the high key.
    let (high, n, last_entry) = {
        let buf = e.pool().read(tag).unwrap();
        let g = buf.read();
        let n = BtPage(&g).len();
        let o = entry_offset(0, n - 1);
        (BtPage(&g).high_key().unwrap(), n, g[o..o + 16].to_vec())
    };
    {
        let buf = e.pool().read(tag).unwrap();
        let mut g = buf.write();
        let o = entry_offset(0, n - 1);
        g[o..o + 8].copy_from_slice(&high.0.to_le_bytes());
        g[o + 8..o + 16].copy_from_slice(&high.1.to_le_bytes());
    }
    let reason = corrupt_reason(&t);
    assert!(
        reason.contains(&format!("block {leaf} entry {}", n - 1)) && reason.contains("high key"),
        "{reason}"
    );
    {
        let buf = e.pool().read(tag).unwrap();
        let mut g = buf.write();
        let o = entry_offset(0, n - 1);
        g[o..o + 16].copy_from_slice(&last_entry);
    }
    check(&t);
    // A broken right link (to the meta page).
    let page_size = e.pool().page_size();
    {
        let buf = e.pool().read(tag).unwrap();
        let mut g = buf.write();
        let sp = page_size - 24;
        g[sp + 4..sp + 8].copy_from_slice(&0u32.to_le_bytes());
    }
    let reason = corrupt_reason(&t);
    assert!(
        reason.contains(&format!("right link of block {leaf}")),
        "{reason}"
    );
    // Scans report the damage instead of panicking or looping.
    let err = t.range(i64::MIN, i64::MAX, |_, _| true).unwrap_err();
    assert!(err.to_string().contains("meta page"), "{err}");
}

#[test]
fn open_refuses_a_relation_that_is_not_a_btree() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    e.pool().create_relation(REL, ForkNumber::Main).unwrap();
    let err = BTree::open(&e, REL).unwrap_err();
    assert!(matches!(err, IndexError::Corrupt { .. }), "{err}");
    {
        let buf = e.pool().extend(REL, ForkNumber::Main).unwrap();
        let mut g = buf.write();
        bufpool::page::init(&mut g, 0);
        g[24..28].copy_from_slice(b"HEAP");
    }
    let err = BTree::open(&e, REL).unwrap_err();
    assert!(
        matches!(&err, IndexError::Corrupt { reason, .. } if reason.contains("magic")),
        "{err}"
    );
    assert!(
        err.to_string().contains("index 0/700 is corrupt: block 0"),
        "{err}"
    );
}

// -------------------------------------------------------------- performance

/// Random lookups of 1M keys against std's BTreeMap (release build):
/// `cargo test --release -p pgbufpool --test btree -- --ignored --nocapture lookup_speed`.
#[test]
#[ignore]
fn lookup_speed_vs_btreemap() {
    use std::time::Instant;
    const N: i64 = 1_000_000;
    let vfs = MemVfs::new();
    let mut c = Config::default();
    c.set("shared_buffers", "256MB").unwrap();
    c.set("wal_segment_size", "64MB").unwrap();
    let e = open_with(&vfs, &c);
    let t = BTree::bulk_build(
        &e,
        REL,
        true,
        (0..N).map(|k| (k, k as u64)),
        90,
        &mut |_| {},
    )
    .unwrap();
    let map: std::collections::BTreeMap<i64, u64> = (0..N).map(|k| (k, k as u64)).collect();
    let mut rng = SmallRng::seed_from_u64(1);
    let probes: Vec<i64> = (0..N).map(|_| rng.random_range(0..N)).collect();
    let mut best = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        let start = Instant::now();
        let mut sum = 0u64;
        for &k in &probes {
            sum = sum.wrapping_add(t.get(k).unwrap().unwrap());
        }
        let tree = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let mut sum2 = 0u64;
        for &k in &probes {
            sum2 = sum2.wrapping_add(*map.get(&k).unwrap());
        }
        let std = start.elapsed().as_secs_f64();
        assert_eq!(sum, sum2);
        best = (best.0.min(tree), best.1.min(std));
    }
    let per = |s: f64| s * 1e9 / N as f64;
    println!(
        "1M random lookups: btree {:.0} ns, BTreeMap {:.0} ns, ratio {:.2} ({:?})",
        per(best.0),
        per(best.1),
        best.0 / best.1,
        check(&t)
    );
    assert!(
        best.0 < 2.0 * best.1,
        "the target is within 2x of BTreeMap (all pages in the pool)"
    );
}

/// `Engine::verify` runs the check of every index opened or created on the engine (the
/// `verify` feature runs it at shutdown): an intact tree passes, a damaged one is named.
#[test]
fn engine_verify_runs_each_registered_index_check() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let t = BTree::create(&e, REL, false).unwrap();
    for k in 0..2000i64 {
        t.insert(1, k * 5 % 2000, 1).unwrap();
    }
    e.verify().unwrap();
    let leaf = find_leaf(&e, 10);
    {
        let buf = e
            .pool()
            .read(BufferTag::new(REL, ForkNumber::Main, leaf))
            .unwrap();
        let mut g = buf.write();
        let (a, b) = (entry_offset(0, 3), entry_offset(0, 4));
        let ea: Vec<u8> = g[a..a + 16].to_vec();
        let eb: Vec<u8> = g[b..b + 16].to_vec();
        g[a..a + 16].copy_from_slice(&eb);
        g[b..b + 16].copy_from_slice(&ea);
    }
    let problems = e.verify().unwrap_err().0;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("index 0/700") && problems[0].contains("not above"),
        "{problems:?}"
    );
}
