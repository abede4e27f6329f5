//! Durability of relation segment files' directory entries (creation by extension, removal
//! by truncation and drop) across a power cut.
//!
//! Proves: a segment file created before a checkpoint survives a power cut with its data
//! (the checkpoint made its name durable, not only its bytes); a VACUUM truncation that
//! unlinked segments before a checkpoint stays done (no deleted row comes back, the
//! relation keeps its new length); a dropped relation stays dropped, so a relation created
//! again under its number starts empty and grows without meeting old pages.
//! How: 4 KiB pages in 32 KiB segments (8 pages each) on `SimVfs`; the workload runs, then
//! `crash(seed)` for many seeds keeps or undoes every create and unlink not covered by a
//! directory fsync (each with probability 1/2) and drops, keeps, tears or garbles every
//! unsynced write; the engine is reopened and the heap scanned.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bufpool::table::{Heap, Tid};
use bufpool::txn::INVALID_XID;
use bufpool::vfs::{SimVfs, Vfs};
use bufpool::{Config, Engine, ForkNumber, RelFileId};

const REL: RelFileId = RelFileId::new(0, 900);
/// Rows of 1,000 bytes: three to a 4 KiB page, so 100 rows fill 34 pages, 5 segments.
const ROWS: u32 = 100;
const ROW_LEN: usize = 1000;
/// Crash seeds per test: each undoes an unsynced create or unlink with probability 1/2.
const SEEDS: u64 = 16;
/// Pages in one segment.
const SEGMENT_PAGES: u32 = 8;

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "64").unwrap();
    c.set("block_size", "4kB").unwrap();
    c.set("segment_size", "32kB").unwrap();
    c.set("wal_segment_size", "64kB").unwrap();
    c
}

fn open(vfs: &SimVfs) -> Engine {
    Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &config(),
        true,
    )
    .unwrap()
}

fn row(i: u32) -> Vec<u8> {
    let mut r = format!("row {i:05} ").into_bytes();
    r.resize(ROW_LEN, (i % 251) as u8);
    r
}

/// Inserts rows `ids` in one committed transaction; returns their tuple ids.
fn insert(e: &Engine, heap: &Heap<'_>, ids: impl Iterator<Item = u32>) -> BTreeMap<u32, Tid> {
    let x = e.begin_xid().unwrap();
    let tids = ids.map(|i| (i, heap.insert(x, &row(i)).unwrap())).collect();
    e.commit_transaction(x).unwrap();
    tids
}

/// Every visible row, by its number, checked against its expected bytes.
fn scan(e: &Engine, heap: &Heap<'_>) -> Vec<u32> {
    let snap = e.txns().snapshot(INVALID_XID);
    let mut seen = Vec::new();
    heap.scan(&snap, |tid, data| {
        let i: u32 = std::str::from_utf8(&data[4..9]).unwrap().parse().unwrap();
        assert_eq!(data, row(i).as_slice(), "row {i} at {tid:?} is damaged");
        seen.push(i);
    })
    .unwrap();
    seen.sort_unstable();
    seen
}

/// Rows inserted (and committed) before a checkpoint fill five segments, four of them
/// created by extension; after a power cut every row is there. Before directory fsyncs
/// were part of the checkpoint, the cut could undo the creation of a segment whose data
/// the checkpoint had fsynced, and replay (from the checkpoint's redo point) had nothing
/// to rebuild it from: the rows in it were silently gone.
#[test]
fn segments_created_before_a_checkpoint_survive_power_loss() {
    for seed in 0..SEEDS {
        let vfs = SimVfs::new();
        {
            let e = open(&vfs);
            let heap = Heap::create(&e, REL).unwrap();
            insert(&e, &heap, 0..ROWS);
            let pages = e.pool().nblocks(REL, ForkNumber::Main).unwrap();
            assert!(pages > 4 * SEGMENT_PAGES, "{pages} pages");
            e.checkpoint().unwrap();
        }
        vfs.crash(seed);
        let e = open(&vfs);
        let heap = Heap::open(&e, REL);
        assert_eq!(
            scan(&e, &heap),
            (0..ROWS).collect::<Vec<_>>(),
            "seed {seed}: rows lost with their segment"
        );
    }
}

/// VACUUM truncates a relation whose rows past its first segment were deleted: the
/// emptied segments are unlinked and a checkpoint follows (truncation is not logged).
/// After a power cut, no deleted row is visible and the relation is one segment long.
/// Before the checkpoint fsynced the directory, the cut could undo the unlinks after the
/// checkpoint: the segments came back holding their last durable pages, from before the
/// deletes, and recovery (replaying from after the truncation) trusted them, so deleted
/// rows were visible again.
#[test]
fn truncated_segments_stay_gone_after_power_loss() {
    for seed in 0..SEEDS {
        let vfs = SimVfs::new();
        let kept: Vec<u32>;
        {
            let e = open(&vfs);
            let heap = Heap::create(&e, REL).unwrap();
            let tids = insert(&e, &heap, 0..ROWS);
            e.checkpoint().unwrap();
            let x = e.begin_xid().unwrap();
            for tid in tids.values().filter(|t| t.block >= SEGMENT_PAGES) {
                assert!(heap.delete(x, *tid).unwrap());
            }
            e.commit_transaction(x).unwrap();
            let report = heap.vacuum(true).unwrap();
            assert_eq!(
                e.pool().nblocks(REL, ForkNumber::Main).unwrap(),
                SEGMENT_PAGES,
                "{report:?}"
            );
            kept = tids
                .iter()
                .filter(|(_, t)| t.block < SEGMENT_PAGES)
                .map(|(&i, _)| i)
                .collect();
            assert_eq!(scan(&e, &heap), kept);
        }
        vfs.crash(seed);
        let e = open(&vfs);
        let heap = Heap::open(&e, REL);
        assert_eq!(
            scan(&e, &heap),
            kept,
            "seed {seed}: deleted rows came back with their segments"
        );
        assert_eq!(
            e.pool().nblocks(REL, ForkNumber::Main).unwrap(),
            SEGMENT_PAGES,
            "seed {seed}"
        );
    }
}

/// A power cut at every I/O of dropping a relation (five segments, all unlinked), under
/// several seeds: afterwards the relation either still exists (the drop did not finish;
/// dropping it again completes it) or is gone, and a relation created again under its
/// number starts empty and, growing into its second and third segments, never picks up
/// pages of the dropped one, before or after another power cut. Before the fix, a cut in
/// the middle of the drop could leave segment 0 unlinked and later segments in place:
/// the new relation grew into those old files, and after the next restart their old
/// pages past its end counted as its own, old rows visible.
#[test]
fn a_dropped_relation_never_comes_back_in_pieces() {
    let setup = |vfs: &SimVfs| {
        let e = open(vfs);
        let heap = Heap::create(&e, REL).unwrap();
        insert(&e, &heap, 0..ROWS);
        e.checkpoint().unwrap();
        e
    };
    let base = SimVfs::new();
    let e = setup(&base);
    let before = base.io_count();
    e.drop_relation(REL).unwrap();
    let drop_ios = base.io_count() - before;
    drop(e);
    let exists = |e: &Engine| {
        ForkNumber::ALL
            .iter()
            .any(|&f| e.pool().smgr().exists(REL, f).unwrap())
    };
    for n in 0..=drop_ios {
        for seed in 0..SEEDS / 4 {
            let vfs = SimVfs::new();
            let e = setup(&vfs);
            vfs.crash_after(n);
            let dropped = e.drop_relation(REL).is_ok();
            drop(e);
            vfs.crash(seed * 31 + n);
            let e = open(&vfs);
            if exists(&e) {
                assert!(
                    !dropped,
                    "crash after {n} I/Os, seed {seed}: the drop returned Ok"
                );
                e.drop_relation(REL).unwrap();
            }
            let heap = Heap::create(&e, REL).unwrap();
            assert!(scan(&e, &heap).is_empty(), "crash after {n}, seed {seed}");
            // Grow into the third segment: only the new rows are there.
            insert(&e, &heap, 1000..1060);
            let pages = e.pool().nblocks(REL, ForkNumber::Main).unwrap();
            assert!(pages > 2 * SEGMENT_PAGES, "{pages} pages");
            assert_eq!(scan(&e, &heap), (1000..1060).collect::<Vec<_>>());
            e.checkpoint().unwrap();
            drop(e);
            vfs.crash(seed + 1000);
            let e = open(&vfs);
            let heap = Heap::open(&e, REL);
            assert_eq!(
                scan(&e, &heap),
                (1000..1060).collect::<Vec<_>>(),
                "crash after {n} I/Os, seed {seed}: pages of the dropped relation came back"
            );
        }
    }
}

/// A relation dropped after rows were logged into it since the last checkpoint, the drop
/// returned, the power cut (every synced change kept): the relation stays dropped, so a
/// relation created again under its number starts empty. Before the drop was logged,
/// recovery replayed the dropped relation's records from the redo point, recreating its
/// files and pages: the "new" relation held the dropped one's rows.
#[test]
fn a_relation_dropped_after_the_last_checkpoint_stays_dropped_through_recovery() {
    for (seed, rows_after_checkpoint) in [(0, 1), (1, ROWS), (2, 7)] {
        let vfs = SimVfs::new();
        {
            let e = open(&vfs);
            let heap = Heap::create(&e, REL).unwrap();
            insert(&e, &heap, 0..10);
            e.checkpoint().unwrap();
            insert(&e, &heap, 10..10 + rows_after_checkpoint);
            e.drop_relation(REL).unwrap();
            // Something else logged and made durable after the drop.
            let other = Heap::create(&e, RelFileId::new(0, 901)).unwrap();
            insert(&e, &other, 0..3);
        }
        vfs.crash(seed);
        let e = open(&vfs);
        let exists = ForkNumber::ALL
            .iter()
            .any(|&f| e.pool().smgr().exists(REL, f).unwrap());
        assert!(
            !exists,
            "seed {seed}: the dropped relation came back in recovery"
        );
        let heap = Heap::create(&e, REL).unwrap();
        assert!(scan(&e, &heap).is_empty(), "seed {seed}");
        assert_eq!(
            scan(&e, &Heap::open(&e, RelFileId::new(0, 901))),
            vec![0, 1, 2]
        );
    }
}
