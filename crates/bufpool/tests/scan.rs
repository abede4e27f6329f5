//! Sequential scans: synchronized starts, the cache trail, and the plan's choices.
//!
//! Proves: a synchronized scan (one that starts at another scan's reported position and
//! wraps) returns every visible tuple exactly once, also while other scans of the table run
//! at the same time and move the shared position under it; the cache trail (seed 003's
//! 3A) finds the pages a previous scan left in the pool and still returns every tuple once;
//! the knobs reach each scan's plan; with `seqscan_sync_pacing` every concurrent ring
//! scan joins and leaves its table's group, and still returns every tuple once. How: a bulk-loaded table of known rows larger than the
//! pool, scans compared as sorted multisets against the loaded rows.

use std::path::Path;
use std::sync::Arc;

use bufpool::scan::ScanPlan;
use bufpool::table::{Heap, SeqScanOptions};
use bufpool::txn::INVALID_XID;
use bufpool::{Config, Engine, ForkNumber, IoContext, IoOp, IoWriter, MemVfs, RelFileId, Vfs};

const REL: RelFileId = RelFileId::new(0, 910);
/// Pool pages; the table is about 1.2 pools (59 rows of 124 bytes per 8 KiB page).
const POOL: u64 = 64;
const ROWS: u64 = 59 * 77;

fn open(vfs: &MemVfs, set: &[(&str, &str)]) -> Engine {
    let mut c = Config::default();
    c.set("shared_buffers", &POOL.to_string()).unwrap();
    c.set("wal_segment_size", "1MB").unwrap();
    for (k, v) in set {
        c.set(k, v).unwrap();
    }
    Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &c,
        true,
    )
    .unwrap()
}

fn row(id: u64) -> Vec<u8> {
    let mut r = id.to_le_bytes().to_vec();
    r.extend_from_slice(&[5u8; 92]);
    r
}

fn load(e: &Engine) -> Heap<'_> {
    let heap = Heap::create(e, REL).unwrap().with_fillfactor(90).unwrap();
    let x = e.begin_xid().unwrap();
    heap.bulk_load(x, true, (0..ROWS).map(row), |_| {}, &mut |_| {})
        .unwrap();
    e.commit_transaction(x).unwrap();
    heap
}

/// Row ids a scan returned, in scan order, with its report.
fn scan(
    e: &Engine,
    heap: &Heap<'_>,
    opts: &SeqScanOptions,
) -> (Vec<u64>, bufpool::table::ScanReport) {
    let snap = e.txns().snapshot(INVALID_XID);
    let mut ids = Vec::new();
    let report = heap
        .scan_with(&snap, opts, |_, d| {
            ids.push(u64::from_le_bytes(d[0..8].try_into().unwrap()))
        })
        .unwrap();
    (ids, report)
}

fn assert_every_row_once(mut ids: Vec<u64>) {
    assert_eq!(ids.len() as u64, ROWS, "one tuple per row");
    ids.sort_unstable();
    assert!(ids.iter().copied().eq(0..ROWS), "every row exactly once");
}

#[test]
fn a_synchronized_scan_starts_where_the_last_ended_and_returns_every_row_once() {
    let vfs = MemVfs::new();
    let e = open(&vfs, &[]);
    let heap = load(&e);
    let n = e.pool().nblocks(REL, ForkNumber::Main).unwrap();
    assert!(u64::from(n) > POOL, "the table is larger than the pool");
    let (first, r1) = scan(&e, &heap, &SeqScanOptions::default());
    assert!(r1.plan.synchronized && r1.plan.ring, "quarter rule: {r1:?}");
    assert_eq!(r1.start, 0, "no scan was reported before");
    assert!(
        first.windows(2).all(|w| w[0] < w[1]),
        "a scan from 0 is in load order"
    );
    assert_eq!(
        e.scan_positions().position(REL, ForkNumber::Main),
        Some(n - 1)
    );
    let (second, r2) = scan(&e, &heap, &SeqScanOptions::default());
    assert_eq!(
        r2.start,
        n - 1,
        "starts at the block the last scan ended on"
    );
    assert!(
        !second.windows(2).all(|w| w[0] < w[1]),
        "wrapped: not in load order"
    );
    assert_every_row_once(second);
    // Unsynchronized (the knob off): from 0 again.
    let plain = ScanPlan {
        synchronized: false,
        ring: true,
        trail: false,
    };
    let (third, r3) = scan(
        &e,
        &heap,
        &SeqScanOptions {
            plan: Some(plain),
            ring_bytes: None,
        },
    );
    assert_eq!(r3.start, 0);
    assert_every_row_once(third);
}

#[test]
fn concurrent_synchronized_scans_each_return_every_row_once() {
    for pacing in ["off", "on"] {
        let vfs = MemVfs::new();
        let e = open(&vfs, &[("seqscan_sync_pacing", pacing)]);
        let heap = load(&e);
        let mut starts = Vec::new();
        let mut paced = 0;
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let mut runs = Vec::new();
                        for _ in 0..5 {
                            let (ids, r) = scan(&e, &heap, &SeqScanOptions::default());
                            assert_every_row_once(ids);
                            runs.push(r);
                        }
                        runs
                    })
                })
                .collect();
            for h in handles {
                for r in h.join().unwrap() {
                    starts.push(r.start);
                    paced += usize::from(r.paced);
                }
            }
        });
        assert!(
            starts.iter().any(|&s| s != 0),
            "later scans start where others are: {starts:?}"
        );
        // Paced, every ring scan joins its table's group (4 scans: never full).
        assert_eq!(
            paced,
            if pacing == "on" { 20 } else { 0 },
            "pacing {pacing}"
        );
        let groups = e.scan_positions().group_members(REL, ForkNumber::Main);
        assert_eq!(groups, 0, "every scan left its group");
    }
}

#[test]
fn the_cache_trail_finds_what_the_last_scan_left_and_returns_every_row_once() {
    for trail in [false, true] {
        let vfs = MemVfs::new();
        let on = if trail { "on" } else { "off" };
        let e = open(
            &vfs,
            &[("seqscan_strategy", "seed003"), ("seqscan_cache_trail", on)],
        );
        let heap = load(&e);
        let (_, r1) = scan(&e, &heap, &SeqScanOptions::default());
        assert!(
            r1.plan.synchronized && !r1.plan.ring,
            "1.2 pools: keep in cache"
        );
        assert_eq!(r1.plan.trail, trail);
        let hits = |e: &Engine| {
            e.pool()
                .stats()
                .get(IoWriter::Backend, IoContext::Normal, IoOp::Hit)
        };
        let before = hits(&e);
        let (ids, r2) = scan(&e, &heap, &SeqScanOptions::default());
        let gained = hits(&e) - before;
        assert_every_row_once(ids);
        if trail {
            assert!(
                u64::from(r2.trail_pages) >= POOL / 2,
                "walked back over the pool's share of the table: {r2:?}"
            );
            assert!(gained >= POOL / 2, "the trail pages were hits: {gained}");
        } else {
            assert_eq!(r2.trail_pages, 0);
        }
    }
}

#[test]
fn small_tables_start_at_zero_without_a_ring() {
    let vfs = MemVfs::new();
    let e = open(&vfs, &[]);
    let heap = Heap::create(&e, REL).unwrap();
    let x = e.begin_xid().unwrap();
    heap.bulk_load(x, true, (0..59 * 10).map(row), |_| {}, &mut |_| {})
        .unwrap();
    e.commit_transaction(x).unwrap();
    for _ in 0..2 {
        let snap = e.txns().snapshot(INVALID_XID);
        let r = heap
            .scan_with(&snap, &SeqScanOptions::default(), |_, _| {})
            .unwrap();
        assert_eq!(r.start, 0);
        assert!(!r.plan.synchronized && !r.ring, "{r:?}");
        assert_eq!(r.tuples, 590);
    }
}
