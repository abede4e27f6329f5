//! Heap relations with transactions: MVCC visibility, row locks, recovery.
//!
//! Proves: snapshots see exactly what committed before them (old snapshots keep seeing
//! old versions); aborted and cut-off transactions are never visible; concurrent updaters
//! of one row serialize (the second waits, then follows the update chain) and no update is
//! lost; committed rows survive a crash and uncommitted ones do not appear.

use std::path::Path;
use std::sync::Arc;

use bufpool::table::{Heap, Tid};
use bufpool::txn::INVALID_XID;
use bufpool::{Config, Engine, EngineError, MemVfs, RelFileId, Vfs};

const REL: RelFileId = RelFileId::new(0, 900);

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "32").unwrap();
    c.set("wal_segment_size", "1MB").unwrap();
    c
}

fn open(vfs: &MemVfs) -> Engine {
    Engine::open(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &config(),
        true,
    )
    .unwrap()
}

fn row(id: u64, v: u64) -> Vec<u8> {
    let mut r = id.to_le_bytes().to_vec();
    r.extend_from_slice(&v.to_le_bytes());
    r.extend_from_slice(&[7u8; 84]); // pgbench-like 100-byte rows
    r
}

fn val(r: &[u8]) -> (u64, u64) {
    (
        u64::from_le_bytes(r[0..8].try_into().unwrap()),
        u64::from_le_bytes(r[8..16].try_into().unwrap()),
    )
}

fn visible_rows(e: &Engine, heap: &Heap<'_>) -> Vec<(u64, u64)> {
    let snap = e.txns().snapshot(INVALID_XID);
    let mut out = Vec::new();
    heap.scan(&snap, |_, d| out.push(val(d))).unwrap();
    out.sort_unstable();
    out
}

#[test]
fn snapshots_see_what_committed_before_them() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t1 = e.begin().unwrap();
    let tids: Vec<Tid> = (0..500)
        .map(|i| heap.insert(t1, &row(i, 0)).unwrap())
        .collect();
    assert!(
        tids.iter().any(|t| t.block > 2),
        "500 rows span several pages"
    );
    assert!(
        visible_rows(&e, &heap).is_empty(),
        "uncommitted rows are invisible to others"
    );
    e.commit_transaction(t1).unwrap();
    assert_eq!(visible_rows(&e, &heap).len(), 500);

    let old = e.txns().snapshot(INVALID_XID);
    let t2 = e.begin().unwrap();
    let new_tid = heap
        .update(t2, tids[7], |d| row(val(d).0, 42))
        .unwrap()
        .unwrap();
    assert!(heap.delete(t2, tids[8]).unwrap());
    e.commit_transaction(t2).unwrap();
    assert_eq!(
        heap.fetch(&old, tids[7]).unwrap().map(|d| val(&d)),
        Some((7, 0)),
        "old snapshot, old version"
    );
    assert_eq!(
        heap.fetch(&old, tids[8]).unwrap().map(|d| val(&d)),
        Some((8, 0)),
        "old snapshot sees the deleted row"
    );
    let now = e.txns().snapshot(INVALID_XID);
    assert_eq!(
        heap.fetch(&now, tids[7]).unwrap(),
        None,
        "the old version is gone for new snapshots"
    );
    assert_eq!(
        heap.fetch(&now, new_tid).unwrap().map(|d| val(&d)),
        Some((7, 42))
    );
    assert_eq!(heap.fetch(&now, tids[8]).unwrap(), None);

    let t3 = e.begin().unwrap();
    heap.update(t3, tids[9], |d| row(val(d).0, 99)).unwrap();
    e.abort_transaction(t3).unwrap();
    let rows = visible_rows(&e, &heap);
    assert_eq!(rows.len(), 499);
    assert!(
        rows.contains(&(9, 0)) && !rows.iter().any(|r| r.1 == 99),
        "aborted update invisible"
    );
}

#[test]
fn concurrent_updates_of_one_row_are_never_lost() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t = e.begin().unwrap();
    let tid = heap.insert(t, &row(1, 0)).unwrap();
    e.commit_transaction(t).unwrap();
    const THREADS: u64 = 4;
    const EACH: u64 = 150;
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            let (e, heap) = (&e, &heap);
            s.spawn(move || {
                for _ in 0..EACH {
                    let x = e.begin().unwrap();
                    // Start from the original tid: the update follows the chain.
                    heap.update(x, tid, |d| row(1, val(d).1 + 1))
                        .unwrap()
                        .expect("row exists");
                    e.commit_transaction(x).unwrap();
                }
            });
        }
    });
    assert_eq!(visible_rows(&e, &heap), vec![(1, THREADS * EACH)]);
}

#[test]
fn committed_rows_survive_a_crash_and_others_never_appear() {
    let vfs = MemVfs::new();
    {
        let e = open(&vfs);
        let heap = Heap::create(&e, REL).unwrap();
        let a = e.begin().unwrap();
        let b = e.begin().unwrap();
        let c = e.begin().unwrap();
        for i in 0..300 {
            heap.insert(a, &row(i, 1)).unwrap();
            heap.insert(b, &row(1000 + i, 2)).unwrap();
            heap.insert(c, &row(2000 + i, 3)).unwrap();
        }
        e.commit_transaction(a).unwrap();
        e.abort_transaction(b).unwrap();
        // c is running when the process dies; nothing was checkpointed.
    }
    let e = open(&vfs);
    let heap = Heap::open(&e, REL);
    let rows = visible_rows(&e, &heap);
    assert_eq!(rows.len(), 300, "only the committed transaction's rows");
    assert!(rows.iter().all(|r| r.1 == 1));
    // New transactions work on the recovered table (ids do not collide with a's).
    let d = e.begin().unwrap();
    heap.insert(d, &row(5000, 4)).unwrap();
    e.commit_transaction(d).unwrap();
    assert_eq!(visible_rows(&e, &heap).len(), 301);
}

#[test]
fn updates_move_to_a_new_page_when_the_old_one_is_full() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t = e.begin().unwrap();
    let tids: Vec<Tid> = (0..200)
        .map(|i| heap.insert(t, &row(i, 0)).unwrap())
        .collect();
    e.commit_transaction(t).unwrap();
    // Update every row of the (full) first page several times.
    let first_page: Vec<Tid> = tids.iter().copied().filter(|t| t.block == 0).collect();
    for round in 1..=3u64 {
        let x = e.begin().unwrap();
        for &tid in &first_page {
            heap.update(x, tid, |d| row(val(d).0, round))
                .unwrap()
                .unwrap();
        }
        e.commit_transaction(x).unwrap();
    }
    let rows = visible_rows(&e, &heap);
    assert_eq!(rows.len(), 200);
    for &tid in &first_page {
        assert!(
            rows.contains(&(u64::from(tid.slot) - 1, 3)),
            "row of slot {} at its newest version",
            tid.slot
        );
    }
    // And all of it after a crash.
    drop(e);
    let e = open(&vfs);
    let heap = Heap::open(&e, REL);
    assert_eq!(visible_rows(&e, &heap), rows);
}

#[test]
fn a_tuple_larger_than_a_page_is_refused() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t = e.begin().unwrap();
    let err = heap.insert(t, &vec![0u8; 9000]).unwrap_err();
    assert!(
        matches!(err, EngineError::TupleTooLarge { len: 9000, .. }),
        "{err}"
    );
}

/// VACUUM reclaims: 100 rows updated 30 times (one transaction per round), vacuumed every
/// 5 rounds, stay within 12 pages; without reclaiming, 3,100 versions of ~124 bytes would
/// need about 47 pages. Stated bound: live rows + 5 rounds of dead versions, plus slack.
#[test]
fn vacuum_keeps_a_heavily_updated_table_small() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t = e.begin().unwrap();
    let mut tids: Vec<Tid> = (0..100)
        .map(|i| heap.insert(t, &row(i, 0)).unwrap())
        .collect();
    e.commit_transaction(t).unwrap();
    let mut removed = 0;
    for round in 1..=30u64 {
        let x = e.begin().unwrap();
        for tid in tids.iter_mut() {
            *tid = heap
                .update(x, *tid, |d| row(val(d).0, round))
                .unwrap()
                .unwrap();
        }
        e.commit_transaction(x).unwrap();
        if round % 5 == 0 {
            removed += heap.vacuum(true).unwrap().removed;
        }
    }
    let pages = e.pool().nblocks(REL, bufpool::ForkNumber::Main).unwrap();
    eprintln!(
        "vacuum bound: {pages} pages after 30 rounds of 100 updates, {removed} versions removed"
    );
    assert!(pages <= 12, "table grew to {pages} pages");
    assert!(removed > 0, "vacuum removed nothing");
    let rows = visible_rows(&e, &heap);
    assert_eq!(rows.len(), 100);
    assert!(rows.iter().all(|r| r.1 == 30));
    drop(e);
    let e = open(&vfs);
    assert_eq!(
        visible_rows(&e, &Heap::open(&e, REL)),
        rows,
        "after a crash"
    );
}

#[test]
fn vacuum_keeps_what_a_running_transaction_can_still_see() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t = e.begin().unwrap();
    let tid = heap.insert(t, &row(1, 10)).unwrap();
    e.commit_transaction(t).unwrap();
    let reader = e.begin().unwrap();
    let snap = e.txns().snapshot(reader);
    let w = e.begin().unwrap();
    heap.update(w, tid, |d| row(val(d).0, 20)).unwrap();
    e.commit_transaction(w).unwrap();
    heap.vacuum(false).unwrap();
    assert_eq!(
        heap.fetch(&snap, tid).unwrap().map(|d| val(&d)),
        Some((1, 10)),
        "old version kept for the reader"
    );
    e.commit_transaction(reader).unwrap();
    let r = heap.vacuum(false).unwrap();
    assert_eq!(r.removed, 1, "now nobody can see it");
    assert_eq!(visible_rows(&e, &heap), vec![(1, 20)]);
}

#[test]
fn vacuum_removes_aborted_inserts() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t = e.begin().unwrap();
    for i in 0..50 {
        heap.insert(t, &row(i, 0)).unwrap();
    }
    e.abort_transaction(t).unwrap();
    let r = heap.vacuum(true).unwrap();
    assert_eq!(r.removed, 50);
    assert_eq!(
        e.pool().nblocks(REL, bufpool::ForkNumber::Main).unwrap(),
        0,
        "all pages truncated away"
    );
}

/// Two transactions each hold one row and want the other's: exactly one gets a deadlock
/// error (whichever arrives second at the cycle, whatever the timing), aborts, and the
/// other finishes. Nobody waits forever.
#[test]
fn crossing_row_locks_are_a_deadlock_error_not_a_hang() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t = e.begin().unwrap();
    let a = heap.insert(t, &row(1, 0)).unwrap();
    let b = heap.insert(t, &row(2, 0)).unwrap();
    e.commit_transaction(t).unwrap();
    let barrier = std::sync::Barrier::new(2);
    let outcomes: Vec<Result<(), EngineError>> = std::thread::scope(|s| {
        let run = |first: Tid, second: Tid| {
            let (e, heap, barrier) = (&e, &heap, &barrier);
            s.spawn(move || {
                let x = e.begin().unwrap();
                heap.update(x, first, |d| row(val(d).0, 1)).unwrap();
                barrier.wait(); // both hold their first row
                match heap.update(x, second, |d| row(val(d).0, 1)) {
                    Ok(_) => {
                        e.commit_transaction(x).unwrap();
                        Ok(())
                    }
                    Err(err) => {
                        e.abort_transaction(x).unwrap();
                        Err(err)
                    }
                }
            })
        };
        let h1 = run(a, b);
        let h2 = run(b, a);
        vec![h1.join().unwrap(), h2.join().unwrap()]
    });
    let errors: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert_eq!(errors.len(), 1, "{outcomes:?}");
    assert!(
        matches!(errors[0], EngineError::Deadlock(_)),
        "{}",
        errors[0]
    );
    assert!(errors[0].to_string().contains("deadlock"));
    // The winner updated both rows.
    assert_eq!(visible_rows(&e, &heap), vec![(1, 1), (2, 1)]);
}
