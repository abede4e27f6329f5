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
use bufpool::{Config, Engine, HeapError, MemVfs, RelFileId, Vfs};

const REL: RelFileId = RelFileId::new(0, 900);

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "32").unwrap();
    c.set("wal_segment_size", "1MB").unwrap();
    c
}

fn open(vfs: &MemVfs) -> Engine {
    Engine::open_vfs(
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

/// Inserts rows 0..n (value 0) in one committed transaction; returns their tuple ids.
fn insert_committed(e: &Engine, heap: &Heap<'_>, n: u64) -> Vec<Tid> {
    let t = e.begin_xid().unwrap();
    let tids = (0..n)
        .map(|i| heap.insert(t, &row(i, 0)).unwrap())
        .collect();
    e.commit_transaction(t).unwrap();
    tids
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
    let t1 = e.begin_xid().unwrap();
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
    let t2 = e.begin_xid().unwrap();
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
        heap.fetch(&now, tids[7]).unwrap().map(|d| val(&d)),
        Some((7, 42)),
        "from the row's root, a new snapshot reaches the new version"
    );
    assert_eq!(
        heap.fetch(&now, new_tid).unwrap().map(|d| val(&d)),
        Some((7, 42))
    );
    assert_eq!(heap.fetch(&now, tids[8]).unwrap(), None);

    let t3 = e.begin_xid().unwrap();
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
    let t = e.begin_xid().unwrap();
    let tid = heap.insert(t, &row(1, 0)).unwrap();
    e.commit_transaction(t).unwrap();
    const THREADS: u64 = 4;
    const EACH: u64 = 150;
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            let (e, heap) = (&e, &heap);
            s.spawn(move || {
                for _ in 0..EACH {
                    let x = e.begin_xid().unwrap();
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
        let a = e.begin_xid().unwrap();
        let b = e.begin_xid().unwrap();
        let c = e.begin_xid().unwrap();
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
    let d = e.begin_xid().unwrap();
    heap.insert(d, &row(5000, 4)).unwrap();
    e.commit_transaction(d).unwrap();
    assert_eq!(visible_rows(&e, &heap).len(), 301);
}

#[test]
fn updates_move_to_a_new_page_when_the_old_one_is_full() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t = e.begin_xid().unwrap();
    let tids: Vec<Tid> = (0..200)
        .map(|i| heap.insert(t, &row(i, 0)).unwrap())
        .collect();
    e.commit_transaction(t).unwrap();
    // Update every row of the (full) first page several times.
    let first_page: Vec<Tid> = tids.iter().copied().filter(|t| t.block == 0).collect();
    for round in 1..=3u64 {
        let x = e.begin_xid().unwrap();
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
    let t = e.begin_xid().unwrap();
    let err = heap.insert(t, &vec![0u8; 9000]).unwrap_err();
    assert!(
        matches!(err, HeapError::TupleTooLarge { len: 9000, .. }),
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
    let t = e.begin_xid().unwrap();
    let mut tids: Vec<Tid> = (0..100)
        .map(|i| heap.insert(t, &row(i, 0)).unwrap())
        .collect();
    e.commit_transaction(t).unwrap();
    let mut removed = 0;
    for round in 1..=30u64 {
        let x = e.begin_xid().unwrap();
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
    let t = e.begin_xid().unwrap();
    let tid = heap.insert(t, &row(1, 10)).unwrap();
    e.commit_transaction(t).unwrap();
    let reader = e.begin_xid().unwrap();
    let snap = e.txns().snapshot(reader);
    let w = e.begin_xid().unwrap();
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
    let t = e.begin_xid().unwrap();
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
    let t = e.begin_xid().unwrap();
    let a = heap.insert(t, &row(1, 0)).unwrap();
    let b = heap.insert(t, &row(2, 0)).unwrap();
    e.commit_transaction(t).unwrap();
    let barrier = std::sync::Barrier::new(2);
    let outcomes: Vec<Result<(), HeapError>> = std::thread::scope(|s| {
        let run = |first: Tid, second: Tid| {
            let (e, heap, barrier) = (&e, &heap, &barrier);
            s.spawn(move || {
                let x = e.begin_xid().unwrap();
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
    assert!(matches!(errors[0], HeapError::Deadlock(_)), "{}", errors[0]);
    assert!(errors[0].to_string().contains("deadlock"));
    // The winner updated both rows.
    assert_eq!(visible_rows(&e, &heap), vec![(1, 1), (2, 1)]);
}

/// Pruning during updates: with no VACUUM at all, 100 rows updated 30 times stay small,
/// because an update that finds its page full first removes the dead versions there
/// (without pruning they need about 48 pages, see the VACUUM test above).
#[test]
fn updates_prune_full_pages_without_vacuum() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let roots = insert_committed(&e, &heap, 100);
    for round in 1..=30u64 {
        let x = e.begin_xid().unwrap();
        for &root in &roots {
            heap.update(x, root, |d| row(val(d).0, round))
                .unwrap()
                .unwrap();
        }
        e.commit_transaction(x).unwrap();
    }
    let pages = e.pool().nblocks(REL, bufpool::ForkNumber::Main).unwrap();
    eprintln!("pruning bound: {pages} pages after 30 rounds of 100 updates, no VACUUM");
    assert!(pages <= 12, "table grew to {pages} pages");
    // Every root still leads to its row's newest version.
    let snap = e.txns().snapshot(INVALID_XID);
    for (i, &root) in roots.iter().enumerate() {
        assert_eq!(
            heap.fetch(&snap, root).unwrap().map(|d| val(&d)),
            Some((i as u64, 30))
        );
    }
    assert_eq!(visible_rows(&e, &heap).len(), 100);
    drop(e);
    let e = open(&vfs);
    let heap = Heap::open(&e, REL);
    let snap = e.txns().snapshot(INVALID_XID);
    for (i, &root) in roots.iter().enumerate() {
        assert_eq!(
            heap.fetch(&snap, root).unwrap().map(|d| val(&d)),
            Some((i as u64, 30)),
            "after a crash"
        );
    }
}

/// Proves: an update that prunes its full page logs the prune and the new version as one
/// record. How: 100 rows (two full pages), then transactions of one update each, as
/// TPC-B's accounts: once the pages are full, each update finds one dead version (the
/// row's last) to prune. Over the last 200 of 500 such transactions, each adds its update
/// and its commit record, and not a prune record besides (before, about one per update).
#[test]
fn an_update_logs_the_prune_it_needed_in_its_own_record() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let roots = insert_committed(&e, &heap, 100);
    let mut before = 0;
    for n in 0..500u64 {
        if n == 300 {
            before = e.wal().stats().records;
        }
        let x = e.begin_xid().unwrap();
        let root = roots[(n % 100) as usize];
        heap.update(x, root, |d| row(val(d).0, n)).unwrap().unwrap();
        e.commit_transaction(x).unwrap();
    }
    let per_txn = (e.wal().stats().records - before) as f64 / 200.0;
    assert!(
        per_txn < 2.2,
        "{per_txn:.2} records per one-update transaction (update and commit: 2)"
    );
    assert_eq!(visible_rows(&e, &heap).len(), 100);
    drop(e);
    let e = open(&vfs);
    let heap = Heap::open(&e, REL);
    let rows = visible_rows(&e, &heap);
    assert_eq!(rows.len(), 100, "after a crash");
    assert!(
        rows.iter().all(|&(id, v)| v == 400 + id),
        "after a crash: {rows:?}"
    );
}

/// A 700-byte row of `id` at value `v`: its id and value, then bytes that do not
/// compress (so the log's LZ4 cannot hide what a record carries).
fn wide_row(id: u64, v: u64) -> Vec<u8> {
    let mut r = row(id, v)[..16].to_vec();
    let mut x = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ v.wrapping_add(1);
    while r.len() < 700 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r.push(x as u8);
    }
    r
}

/// Proves: an update of a wide row that must prune its full page logs its new version
/// and a few bytes for the compaction, not the tuples the compaction moves: the tuples
/// below the pruned version's hole shift up as the record's `memmove`. Recovery replays
/// that shift: every row reads back after a crash. How: 40 rows of 700 bytes (11 to a
/// page), then one-update transactions round-robin, so each finds its page full with one
/// dead version (the row's last). Before the shift, each such update also logged a moved
/// 720-byte tuple (fill-holes) or the run below the hole.
#[test]
fn a_pruning_update_logs_its_compaction_as_a_shift_and_recovery_replays_it() {
    const ROWS: u64 = 40;
    let vfs = MemVfs::new();
    let roots = {
        let e = open(&vfs);
        let heap = Heap::create(&e, REL).unwrap();
        let t = e.begin_xid().unwrap();
        let roots: Vec<Tid> = (0..ROWS)
            .map(|i| heap.insert(t, &wide_row(i, 0)).unwrap())
            .collect();
        e.commit_transaction(t).unwrap();
        let mut before = (0, 0);
        for n in 0..8 * ROWS {
            if n == 4 * ROWS {
                let s = e.wal().stats();
                before = (s.bytes, s.image_bytes);
            }
            let x = e.begin_xid().unwrap();
            let root = roots[(n % ROWS) as usize];
            heap.update(x, root, |d| wide_row(val(d).0, n + 1))
                .unwrap()
                .unwrap();
            e.commit_transaction(x).unwrap();
        }
        let s = e.wal().stats();
        let per_txn =
            ((s.bytes - before.0) - (s.image_bytes - before.1)) as f64 / (4 * ROWS) as f64;
        // The new version (720 bytes with its header) and its line pointer, the old
        // version's header, the moved tuples' line pointers, record and commit headers.
        assert!(
            per_txn < 1_100.0,
            "{per_txn:.0} log bytes per one-update transaction of a 700-byte row"
        );
        roots
    };
    let e = open(&vfs);
    let heap = Heap::open(&e, REL);
    let snap = e.txns().snapshot(INVALID_XID);
    for (i, &root) in roots.iter().enumerate() {
        let last = 7 * ROWS + i as u64 + 1;
        assert_eq!(
            heap.fetch(&snap, root).unwrap(),
            Some(wide_row(i as u64, last)),
            "row {i} after a crash"
        );
    }
}

/// Fillfactor: inserts leave the stated share of each page free, and the knob's range
/// is checked.
#[test]
fn fillfactor_leaves_room_and_is_validated() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let full = Heap::create(&e, REL).unwrap();
    let half = Heap::create(&e, RelFileId::new(0, 901))
        .unwrap()
        .with_fillfactor(50)
        .unwrap();
    let t = e.begin_xid().unwrap();
    for i in 0..640 {
        full.insert(t, &row(i, 0)).unwrap();
        half.insert(t, &row(i, 0)).unwrap();
    }
    e.commit_transaction(t).unwrap();
    let n_full = e.pool().nblocks(REL, bufpool::ForkNumber::Main).unwrap();
    let n_half = e
        .pool()
        .nblocks(RelFileId::new(0, 901), bufpool::ForkNumber::Main)
        .unwrap();
    // 8 KiB pages hold 65 rows of 124 bytes; at 50 %, 33.
    assert_eq!(n_full, 10);
    assert_eq!(n_half, 20);
    for bad in [0u8, 9, 101] {
        let err = Heap::open(&e, REL)
            .with_fillfactor(bad)
            .expect_err("out of range")
            .to_string();
        assert!(
            err.contains("fillfactor") && err.contains("10..100"),
            "{err}"
        );
    }
}

/// The free-space map: space VACUUM frees is found again by inserts (no extension), and
/// a fresh handle (a reopened database) finds it through the map, not a scan.
#[test]
fn inserts_reuse_space_freed_by_vacuum() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t = e.begin_xid().unwrap();
    let tids: Vec<Tid> = (0..650)
        .map(|i| heap.insert(t, &row(i, 0)).unwrap())
        .collect();
    e.commit_transaction(t).unwrap();
    let pages = e.pool().nblocks(REL, bufpool::ForkNumber::Main).unwrap();
    assert_eq!(pages, 10);
    // Delete every row of page 3 and vacuum.
    let d = e.begin_xid().unwrap();
    for tid in tids.iter().filter(|t| t.block == 3) {
        assert!(heap.delete(d, *tid).unwrap());
    }
    e.commit_transaction(d).unwrap();
    heap.vacuum(false).unwrap();
    let fresh = Heap::open(&e, REL);
    let t = e.begin_xid().unwrap();
    let placed: Vec<Tid> = (0..65)
        .map(|i| fresh.insert(t, &row(1000 + i, 0)).unwrap())
        .collect();
    e.commit_transaction(t).unwrap();
    assert!(placed.iter().all(|t| t.block == 3), "{placed:?}");
    assert_eq!(
        e.pool().nblocks(REL, bufpool::ForkNumber::Main).unwrap(),
        pages,
        "no extension"
    );
    assert_eq!(visible_rows(&e, &heap).len(), 650);
}

/// Hint bits: a scan that learns from the commit log that a row's inserter committed
/// records it on the page (no commit-log lookup next time), dirtying the page; the first
/// such change after a checkpoint logs a full-page image (so a torn write of the hinted
/// page can be repaired), later ones log nothing.
#[test]
fn scans_set_hint_bits_with_a_page_image_after_a_checkpoint() {
    use bufpool::table::heap_page::{HeapPage, XMIN_COMMITTED};
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t = e.begin_xid().unwrap();
    for i in 0..10 {
        heap.insert(t, &row(i, 0)).unwrap();
    }
    e.commit_transaction(t).unwrap();
    e.checkpoint().unwrap();
    let tag = bufpool::BufferTag::new(REL, bufpool::ForkNumber::Main, 0);
    let hinted = |e: &Engine| {
        let b = e.pool().read(tag).unwrap();
        let g = b.read();
        let p = HeapPage(&g);
        (1..=p.slots())
            .filter(|&s| p.tuple(s).unwrap().0.infomask & XMIN_COMMITTED != 0)
            .count()
    };
    assert_eq!(hinted(&e), 0);
    let before = e.wal().insert_position();
    let images = e.wal().stats().images;
    assert_eq!(visible_rows(&e, &heap).len(), 10);
    assert_eq!(hinted(&e), 10, "the scan set the hints");
    let after_first = e.wal().insert_position();
    assert_eq!(
        e.wal().stats().images,
        images + 1,
        "a full-page image was logged: {before} -> {after_first}"
    );
    // More hints on the same page before the next checkpoint: no more WAL.
    let t = e.begin_xid().unwrap();
    heap.insert(t, &row(10, 0)).unwrap();
    e.commit_transaction(t).unwrap();
    let before = e.wal().insert_position();
    assert_eq!(visible_rows(&e, &heap).len(), 11);
    assert_eq!(hinted(&e), 11);
    assert_eq!(
        e.wal().insert_position(),
        before,
        "hint-only change, no WAL"
    );
    // The hinted page survives a crash intact.
    drop(e);
    let e = open(&vfs);
    assert_eq!(visible_rows(&e, &Heap::open(&e, REL)).len(), 11);
}

/// Bulk load: rows land in order on fresh pages filled to the fillfactor, frozen rows are
/// visible to everyone without a commit, progress is reported, and all of it survives a
/// crash (each page is logged as an image).
#[test]
fn bulk_load_fills_pages_in_order_and_survives_a_crash() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap().with_fillfactor(90).unwrap();
    let x = e.begin_xid().unwrap();
    let mut tids = Vec::new();
    let mut reports = Vec::new();
    let n = heap
        .bulk_load(
            x,
            true,
            (0..100_000u64).map(|i| row(i, i)),
            |t| tids.push(t),
            &mut |c| reports.push(c),
        )
        .unwrap();
    assert_eq!(n, 100_000);
    assert_eq!(reports, vec![65_536, 100_000]);
    assert!(tids.windows(2).all(|w| w[0] < w[1]), "physical order");
    // 8 KiB pages, 124 bytes a row, 10 % kept free: 59 rows a page.
    let pages = e.pool().nblocks(REL, bufpool::ForkNumber::Main).unwrap();
    assert_eq!(pages, 100_000u32.div_ceil(59));
    // Frozen: visible before (and without) the loading transaction's commit.
    let rows = visible_rows(&e, &heap);
    assert_eq!(rows.len(), 100_000);
    assert!(rows
        .iter()
        .enumerate()
        .all(|(i, r)| *r == (i as u64, i as u64)));
    e.abort_transaction(x).unwrap();
    // Nothing committed, so nothing promised the load's log durable: make it so (as a
    // later commit would), or the pages still dirty in the pool may be lost with the log
    // tail. (A scan through the shared clock used to write them out by chance; a scan
    // through a ring does not.)
    e.wal().flush(e.wal().insert_position()).unwrap();
    drop(e);
    let e = open(&vfs);
    let heap = Heap::open(&e, REL);
    assert_eq!(visible_rows(&e, &heap).len(), 100_000, "after a crash");
    let snap = e.txns().snapshot(INVALID_XID);
    assert_eq!(
        heap.fetch(&snap, tids[77_777]).unwrap().map(|d| val(&d)),
        Some((77_777, 77_777))
    );
}

/// Visibility against a model, through pruning: interleaved transactions (several open at
/// once, committing or aborting) insert, update (rows of changing length, so versions
/// move between pages and pages fill and get pruned) and delete rows, some of it in
/// savepoints (some rolled back right after their write, which the model then ignores),
/// and take share and exclusive row locks (share locks of two transactions, or a lock
/// beside a savepoint's update, make multixacts), while readers hold snapshots; VACUUM
/// runs now and then (replacing finished multixacts). Every reader's snapshot must see,
/// from each row's root and by a scan, exactly the committed state as of its start,
/// before and after pruning; after a crash, the last committed state.
#[test]
fn interleaved_transactions_match_a_model_through_pruning() {
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    fn data(id: u64, v: u64, len: usize) -> Vec<u8> {
        let mut r = id.to_le_bytes().to_vec();
        r.extend_from_slice(&v.to_le_bytes());
        r.resize(16 + len, (v % 251) as u8);
        r
    }

    let (mut multis_made, mut multis_replaced) = (0u64, 0u64);
    let mut rollbacks = 0u64;
    for seed in 0..60u64 {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let vfs = MemVfs::new();
        let mut c = config();
        c.set("block_size", "4kB").unwrap();
        let e = Engine::open_vfs(
            Arc::new(vfs.clone()) as Arc<dyn Vfs>,
            Path::new("/db"),
            &c,
            true,
        )
        .unwrap();
        let heap = Heap::create(&e, REL).unwrap();
        // Committed state: id -> (root, value, data).
        let mut committed: BTreeMap<u64, (Tid, Vec<u8>)> = BTreeMap::new();
        // Open writers: xid -> pending changes (id -> Some(new data) or None = deleted),
        // plus rows they inserted (id -> root).
        type Pending = (BTreeMap<u64, Option<Vec<u8>>>, BTreeMap<u64, Tid>);
        let mut writers: BTreeMap<u32, Pending> = BTreeMap::new();
        // Open readers: (xid, snapshot, what it must see).
        type Model = BTreeMap<u64, (Tid, Vec<u8>)>;
        let mut readers: Vec<(u32, bufpool::txn::Snapshot, Model)> = Vec::new();
        let mut next_id = 0u64;
        let mut version = 0u64;
        // Row locks held by open writers: id -> (writer -> exclusive).
        let mut row_locks: BTreeMap<u64, BTreeMap<u32, bool>> = BTreeMap::new();
        let check = |heap: &Heap<'_>,
                     snap: &bufpool::txn::Snapshot,
                     want: &BTreeMap<u64, (Tid, Vec<u8>)>,
                     what: &str| {
            for (id, (root, d)) in want {
                let got = heap.fetch(snap, *root).unwrap();
                assert_eq!(
                    got.as_ref(),
                    Some(d),
                    "seed {seed} {what}: row {id} from its root"
                );
            }
            // A scan names each row by a stable tuple id: its root, or the root on the
            // page its chain moved to; either leads back to the same version.
            let mut seen = BTreeMap::new();
            heap.scan(snap, |tid, d| {
                let id = u64::from_le_bytes(d[0..8].try_into().unwrap());
                assert!(
                    seen.insert(id, (tid, d.to_vec())).is_none(),
                    "seed {seed}: row {id} twice"
                );
            })
            .unwrap();
            for (id, (tid, d)) in &seen {
                assert_eq!(
                    heap.fetch(snap, *tid).unwrap().as_ref(),
                    Some(d),
                    "seed {seed} {what}: scanned tid of row {id}"
                );
            }
            let seen: BTreeMap<u64, Vec<u8>> = seen.into_iter().map(|(k, v)| (k, v.1)).collect();
            let want: BTreeMap<u64, Vec<u8>> =
                want.iter().map(|(k, v)| (*k, v.1.clone())).collect();
            assert!(
                seen == want,
                "seed {seed} {what}: scan sees rows {:?}, model {:?}",
                seen.keys().collect::<Vec<_>>(),
                want.keys().collect::<Vec<_>>()
            );
        };
        for _ in 0..400 {
            let locked: std::collections::BTreeSet<u64> = writers
                .values()
                .flat_map(|(p, _)| p.keys().copied())
                .collect();
            match rng.random_range(0..100) {
                0..=9 if writers.len() < 3 => {
                    let x = e.begin_xid().unwrap();
                    writers.insert(x, (BTreeMap::new(), BTreeMap::new()));
                }
                10..=44 if !writers.is_empty() => {
                    // A write by a random open writer to a row no other writer holds.
                    let xs: Vec<u32> = writers.keys().copied().collect();
                    let x = xs[rng.random_range(0..xs.len())];
                    let own: Vec<u64> = writers[&x].0.keys().copied().collect();
                    let free: Vec<u64> = committed
                        .keys()
                        .copied()
                        .filter(|id| !locked.contains(id) || own.contains(id))
                        .filter(|id| {
                            row_locks
                                .get(id)
                                .is_none_or(|h| h.keys().all(|&holder| holder == x))
                        })
                        .collect();
                    // Some writes in a savepoint: rows under a subtransaction id, which
                    // commits or aborts with its tree.
                    let w = if rng.random_bool(0.3) {
                        e.begin_subtransaction(x).unwrap()
                    } else {
                        x
                    };
                    // Some savepoints are rolled back right after their write (SAVEPOINT;
                    // write; ROLLBACK TO): the model keeps the writer's state from before.
                    let rolled_back = w != x && rng.random_bool(0.35);
                    let choice = rng.random_range(0..10);
                    if choice < 2 || free.is_empty() {
                        version += 1;
                        let d = data(next_id, version, rng.random_range(0..200));
                        let tid = heap.insert(w, &d).unwrap();
                        if !rolled_back {
                            let wr = writers.get_mut(&x).unwrap();
                            wr.0.insert(next_id, Some(d));
                            wr.1.insert(next_id, tid);
                        }
                        next_id += 1;
                    } else {
                        let id = free[rng.random_range(0..free.len())];
                        if writers[&x].0.get(&id) == Some(&None) {
                            continue; // already deleted by this writer
                        }
                        let root = committed[&id].0;
                        if choice < 3 {
                            assert!(heap.delete(w, root).unwrap(), "seed {seed}: delete {id}");
                            if !rolled_back {
                                writers.get_mut(&x).unwrap().0.insert(id, None);
                            }
                        } else {
                            version += 1;
                            let d = data(id, version, rng.random_range(0..600));
                            let d2 = d.clone();
                            heap.update(w, root, move |_| d2.clone())
                                .unwrap()
                                .unwrap_or_else(|| panic!("seed {seed}: update {id}"));
                            if !rolled_back {
                                writers.get_mut(&x).unwrap().0.insert(id, Some(d));
                            }
                        }
                    }
                    if rolled_back {
                        e.rollback_subtransactions(&[w]).unwrap();
                        rollbacks += 1;
                    }
                }
                45..=54 if !writers.is_empty() => {
                    let xs: Vec<u32> = writers.keys().copied().collect();
                    let x = xs[rng.random_range(0..xs.len())];
                    let (changes, inserted) = writers.remove(&x).unwrap();
                    for holders in row_locks.values_mut() {
                        holders.remove(&x);
                    }
                    row_locks.retain(|_, h| !h.is_empty());
                    if rng.random_bool(0.7) {
                        e.commit_transaction(x).unwrap();
                        for (id, ch) in changes {
                            match ch {
                                Some(d) => {
                                    let root = committed
                                        .get(&id)
                                        .map(|r| r.0)
                                        .unwrap_or_else(|| inserted[&id]);
                                    committed.insert(id, (root, d));
                                }
                                None => {
                                    committed.remove(&id);
                                }
                            }
                        }
                    } else {
                        e.abort_transaction(x).unwrap();
                    }
                }
                55..=64 if readers.len() < 3 => {
                    let r = e.begin_xid().unwrap();
                    let snap = e.txns().snapshot(r);
                    readers.push((r, snap, committed.clone()));
                }
                65..=79 if !readers.is_empty() => {
                    let i = rng.random_range(0..readers.len());
                    let (_, snap, want) = &readers[i];
                    check(&heap, snap, want, "reader");
                    if rng.random_bool(0.3) {
                        let (r, _, _) = readers.swap_remove(i);
                        e.commit_transaction(r).unwrap();
                    }
                }
                80..=83 => {
                    // VACUUM frees dead line pointers: nobody may hold roots of deleted
                    // rows across it, and the model drops them on delete already.
                    multis_replaced += heap.vacuum(false).unwrap().multis_replaced;
                }
                84..=95 if !writers.is_empty() => {
                    // A row lock by a random open writer, where the model says it is
                    // granted at once (never a wait: this test is one thread).
                    let xs: Vec<u32> = writers.keys().copied().collect();
                    let x = xs[rng.random_range(0..xs.len())];
                    let exclusive = rng.random_bool(0.4);
                    let grantable: Vec<u64> = committed
                        .keys()
                        .copied()
                        .filter(|id| {
                            let written_by_other = writers
                                .iter()
                                .any(|(&y, (p, _))| y != x && p.contains_key(id));
                            let deleted_by_me = writers[&x].0.get(id) == Some(&None);
                            let others = row_locks.get(id).map_or(Vec::new(), |h| {
                                h.iter()
                                    .filter(|(&y, _)| y != x)
                                    .map(|(_, &ex)| ex)
                                    .collect()
                            });
                            !written_by_other
                                && !deleted_by_me
                                && (others.is_empty() || (!exclusive && !others.contains(&true)))
                        })
                        .collect();
                    if grantable.is_empty() {
                        continue;
                    }
                    let id = grantable[rng.random_range(0..grantable.len())];
                    let mode = if exclusive {
                        bufpool::table::RowLockMode::Exclusive
                    } else {
                        bufpool::table::RowLockMode::Share
                    };
                    let got = heap.lock_row(x, committed[&id].0, mode).unwrap();
                    assert!(got.is_some(), "seed {seed}: lock {id}");
                    let held = row_locks.entry(id).or_default().entry(x).or_insert(false);
                    *held |= exclusive;
                }
                _ => {}
            }
        }
        for (_, snap, want) in &readers {
            check(&heap, snap, want, "final reader");
        }
        let fresh = e.txns().snapshot(INVALID_XID);
        check(&heap, &fresh, &committed, "fresh");
        multis_made += u64::from(e.txns().multis().positions().next_multi - 1);
        let _ = heap;
        drop(e);
        let e =
            Engine::open_vfs(Arc::new(vfs) as Arc<dyn Vfs>, Path::new("/db"), &c, true).unwrap();
        let heap = Heap::open(&e, REL);
        check(
            &heap,
            &e.txns().snapshot(INVALID_XID),
            &committed,
            "after a crash",
        );
    }
    // The locks and savepoints did make multixacts, and VACUUM replaced some.
    assert!(multis_made >= 60, "{multis_made} multixacts in 60 seeds");
    assert!(multis_replaced >= 10, "{multis_replaced} replaced");
    assert!(
        rollbacks >= 300,
        "{rollbacks} savepoints rolled back in 60 seeds"
    );
    eprintln!(
        "{multis_made} multixacts made, {multis_replaced} replaced by VACUUM, {rollbacks} savepoints rolled back"
    );
}

/// Hot rows under contention (pgbench's branches): 4 threads move amounts between 10
/// rows, two rows a transaction in id order, committing each. Afterwards every row is
/// visible exactly once and the total is conserved. This caught a race in
/// `TxnManager::status`: a transaction committing between the commit-log read and the
/// running-set check was reported aborted, so a waiter took its row lock and the row
/// forked into two visible versions.
#[test]
fn hot_rows_under_contention_never_fork() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t = e.begin_xid().unwrap();
    let roots: Vec<Tid> = (0..10)
        .map(|i| heap.insert(t, &row(i, 1000)).unwrap())
        .collect();
    e.commit_transaction(t).unwrap();
    std::thread::scope(|s| {
        for th in 0..4u64 {
            let (e, heap, roots) = (&e, &heap, &roots);
            s.spawn(move || {
                let mut x = th.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                for _ in 0..1500 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let a = (x % 10) as usize;
                    let b = ((x >> 8) % 10) as usize;
                    if a == b {
                        continue;
                    }
                    let (lo, hi) = (a.min(b), a.max(b));
                    let xid = e.begin_xid().unwrap();
                    for (i, delta) in [(lo, 7i64), (hi, -7)] {
                        heap.update(xid, roots[i], |d| {
                            let (id, v) = val(d);
                            row(id, (v as i64 + delta) as u64)
                        })
                        .unwrap()
                        .expect("rows are never deleted");
                    }
                    e.commit_transaction(xid).unwrap();
                }
            });
        }
    });
    let rows = visible_rows(&e, &heap);
    assert_eq!(rows.len(), 10, "each row visible once: {rows:?}");
    assert_eq!(rows.iter().map(|r| r.1 as i64).sum::<i64>(), 10_000);
}

/// A hot row that keeps moving to new pages (8 writers queue on its row lock, so the
/// pruning horizon lags and its page fills with versions still visible to someone) is
/// still reached from its root in a few page visits: `modify` points the first dead
/// cross-page link straight past the dead middle of the chain. Without that, every move
/// added a page visit to every later access, forever (seen as pgbench at scale 1 falling
/// from 6,000 to 700 tps).
#[test]
fn a_hot_row_that_moved_many_pages_is_reached_in_few_visits() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let root = insert_committed(&e, &heap, 1)[0];
    hammer_one_row(&e, &heap, root);
    let pages = e.pool().nblocks(REL, bufpool::ForkNumber::Main).unwrap();
    // One more update compresses whatever the last ones left; then count page visits.
    add_one(&e, &heap, root);
    let hits = |e: &Engine| {
        let s = e.pool().stats();
        s.total(bufpool::IoOp::Hit) + s.total(bufpool::IoOp::Read)
    };
    let before = hits(&e);
    let snap = e.txns().snapshot(INVALID_XID);
    assert_eq!(
        heap.fetch(&snap, root).unwrap().map(|d| val(&d)),
        Some((0, 3201))
    );
    let visits = hits(&e) - before;
    eprintln!("hot row: {pages} pages, fetch from the root visited {visits} pages");
    assert!(
        visits <= 3,
        "{visits} page visits for one fetch over {pages} pages"
    );
}

/// Hot rows updated by several transactions at once, two rows per transaction (so row-lock
/// waits hold the horizon back, as in TPC-B): rows move off full pages, walks prune the
/// pages they leave, and still no committed update is lost and the table stays a few
/// pages. (This test cannot show the leak itself at this size: 4-9 pages with or without
/// pruning on leaving; `bufpool experiment tpcb` reports the tables' sizes after a run,
/// where the tellers table grew to 308 pages of 100 rows in 90 s before.)
#[test]
fn hot_rows_updated_concurrently_do_not_leave_full_pages_behind() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let roots = insert_committed(&e, &heap, 100);
    let initial = e.pool().nblocks(REL, bufpool::ForkNumber::Main).unwrap();
    let done = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..4u64 {
            let (e, heap, roots, done) = (&e, &heap, &roots, &done);
            s.spawn(move || {
                let mut x = w.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                for _ in 0..3000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Two rows per transaction (TPC-B's teller and branch): the second
                    // waits for its row lock while the first is held, which holds back
                    // the horizon as TPC-B's row-lock queues do.
                    let a = roots[(x % roots.len() as u64) as usize];
                    let b = roots[((x >> 20) % 10) as usize];
                    let t = e.begin_xid().unwrap();
                    let r = heap
                        .update(t, a, |d| row(val(d).0, val(d).1 + 1))
                        .and_then(|_| heap.update(t, b, |d| row(val(d).0, val(d).1 + 1)));
                    match r {
                        Ok(Some(_)) => {
                            e.commit_transaction(t).unwrap();
                            done.fetch_add(2, std::sync::atomic::Ordering::Relaxed);
                        }
                        Ok(None) => panic!("a row vanished"),
                        Err(HeapError::Deadlock(_)) => e.abort_transaction(t).unwrap(),
                        Err(other) => panic!("{other}"),
                    }
                }
            });
        }
    });
    let pages = e.pool().nblocks(REL, bufpool::ForkNumber::Main).unwrap();
    let done = done.into_inner();
    eprintln!("hot rows: {initial} pages at load, {pages} after {done} concurrent updates");
    let sum: u64 = visible_rows(&e, &heap).iter().map(|r| r.1).sum();
    assert_eq!(sum, done, "every committed update is there exactly once");
    assert!(
        pages <= initial + 14,
        "the table grew from {initial} to {pages} pages"
    );
}

/// Proves: a bulk load and a VACUUM run through their rings: their I/O is counted under
/// the bulk-write and vacuum contexts (and under the normal one when the knobs are 0), the
/// VACUUM of a table larger than its ring reuses ring buffers instead of taking the pool,
/// and a ring passed to `vacuum_with` is the one used (its steps cover every page read).
#[test]
fn vacuum_and_bulk_load_run_through_rings() {
    use bufpool::{ForkNumber, IoContext, IoOp, IoWriter, Ring, RingKind};
    for with_rings in [true, false] {
        let vfs = MemVfs::new();
        let mut c = config();
        c.set("shared_buffers", "256").unwrap();
        if !with_rings {
            c.set("bulkwrite_ring_size", "0").unwrap();
            c.set("vacuum_buffer_usage_limit", "0").unwrap();
        }
        let e = Engine::open_vfs(
            Arc::new(vfs.clone()) as Arc<dyn Vfs>,
            Path::new("/db"),
            &c,
            true,
        )
        .unwrap();
        let heap = Heap::create(&e, REL).unwrap();
        let get = |c, op| e.pool().stats().get(IoWriter::Backend, c, op);
        let x = e.begin_xid().unwrap();
        let extends = get(IoContext::Normal, IoOp::Extend);
        let mut tids = Vec::new();
        heap.bulk_load(
            x,
            false,
            (0..20_000).map(|i| row(i, i)),
            |t| tids.push(t),
            &mut |_| {},
        )
        .unwrap();
        e.commit_transaction(x).unwrap();
        let pages = u64::from(e.pool().nblocks(REL, ForkNumber::Main).unwrap());
        assert!(pages > 200, "{pages}");
        let (ring_ctx, normal) = (
            get(IoContext::BulkWrite, IoOp::Extend),
            get(IoContext::Normal, IoOp::Extend) - extends,
        );
        // The free-space map's few pages are extended normally either way.
        let fsm_pages = u64::from(e.pool().nblocks(REL, ForkNumber::FreeSpace).unwrap());
        if with_rings {
            assert_eq!((ring_ctx, normal), (pages, fsm_pages));
        } else {
            assert_eq!((ring_ctx, normal), (0, pages + fsm_pages));
        }
        // Delete a row a page, then VACUUM the table from storage (a cold pool).
        let x = e.begin_xid().unwrap();
        for t in tids.iter().step_by(70) {
            assert!(heap.delete(x, *t).unwrap());
        }
        e.commit_transaction(x).unwrap();
        e.checkpoint().unwrap();
        e.pool()
            .drop_buffers(REL, Some(ForkNumber::Main), 0)
            .unwrap();
        let reads = get(IoContext::Vacuum, IoOp::Read);
        let report = heap.vacuum(false).unwrap();
        assert_eq!(report.removed, tids.len().div_ceil(70) as u64);
        let vacuum_reads = get(IoContext::Vacuum, IoOp::Read) - reads;
        assert_eq!(vacuum_reads, if with_rings { pages } else { 0 });
        if with_rings {
            assert!(
                get(IoContext::Vacuum, IoOp::Reuse) > 0,
                "the ring was reused"
            );
        }
        // An explicit ring: every page VACUUM reads is a step of it.
        e.pool()
            .drop_buffers(REL, Some(ForkNumber::Main), 0)
            .unwrap();
        let mut ring = Ring::with_growth(RingKind::Vacuum, 256 << 10, false, e.pool()).unwrap();
        heap.vacuum_with(false, Some(&mut ring)).unwrap();
        let s = ring.stats();
        assert_eq!(s.reuses + s.clock_takes, pages, "{s:?}");
    }
}

/// Adds 1 to the value of the row at `root` in a transaction of its own.
fn add_one(e: &Engine, heap: &Heap<'_>, root: Tid) {
    let x = e.begin_xid().unwrap();
    heap.update(x, root, |d| row(val(d).0, val(d).1 + 1))
        .unwrap()
        .expect("the row is there");
    e.commit_transaction(x).unwrap();
}

/// 8 threads add 1 to the row at `root` 400 times each: they queue on its row lock, so
/// the pruning horizon lags and its pages fill with versions someone can still see, and
/// the row moves page after page.
fn hammer_one_row(e: &Engine, heap: &Heap<'_>, root: Tid) {
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(move || {
                for _ in 0..400 {
                    add_one(e, heap, root);
                }
            });
        }
    });
}

/// Chain roots (a row's first version, one placed by a move, or a pruned one's redirect)
/// over the relation's pages, and the page count.
fn chain_roots_in_use(e: &Engine) -> (u32, u64) {
    use bufpool::table::heap_page::HEAP_ONLY;
    use bufpool::table::{HeapPage, ItemId};
    let pages = e.pool().nblocks(REL, bufpool::ForkNumber::Main).unwrap();
    let mut roots = 0;
    for b in 0..pages {
        let tag = bufpool::BufferTag::new(REL, bufpool::ForkNumber::Main, b);
        let buf = e.pool().read(tag).unwrap();
        let g = buf.read();
        let p = HeapPage(&g);
        roots += (1..=p.slots())
            .filter(|&s| match p.item(s) {
                ItemId::Redirect { .. } => true,
                ItemId::Normal { .. } => p.tuple(s).unwrap().0.infomask & HEAP_ONLY == 0,
                _ => false,
            })
            .count() as u64;
    }
    (pages, roots)
}

/// A hot row that keeps moving to other pages (8 writers queue on its row lock, so its
/// pages fill with versions someone can still see) leaves no chain behind once its old
/// versions are dead to all: the walk that points the row's link past them frees the
/// chains it skipped, roots included (dead versions of the chain it is on wait for the
/// next prune of that page, as always). Before, every move left its root (a redirect) and a
/// stub on the page it left, forever; under asynchronous commit TPC-B's branches table
/// grew to 156 pages of 10 rows in 40 s, the junk filling pages until most updates moved.
#[test]
fn a_hot_row_that_moved_leaves_no_chains_behind() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let root = insert_committed(&e, &heap, 1)[0];
    hammer_one_row(&e, &heap, root);
    // Two more updates with nothing running: the first compresses what the run left
    // (its versions are all dead now), the second what the first left.
    add_one(&e, &heap, root);
    add_one(&e, &heap, root);
    assert_eq!(visible_rows(&e, &heap), vec![(0, 3202)]);
    let (pages, roots) = chain_roots_in_use(&e);
    eprintln!("hot row: {pages} pages, {roots} chain roots");
    // Its root (the index's) and the chain it is on now; one more if the last update
    // moved it.
    assert!(
        roots <= 3,
        "{roots} chain roots on {pages} pages for one row"
    );
}

/// The race that freeing skipped chains opens: a walk reads a link, and before it takes
/// the target page's lock, another walk points the link past the target, frees its chain
/// and the slot goes to another row, whose root is a redirect after a prune (a redirect
/// passes the xmin check). The walk on its way must notice (a root was freed meanwhile)
/// and start over from the row's root; read as it was, it would return, or update, the
/// other row. Run for a fetch and for an update, stopping the walk at its first hop with
/// the `HeapHop` test hook.
#[test]
fn a_walk_on_its_way_to_a_freed_chain_starts_over() {
    use bufpool::engine::HookPoint;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Barrier;
    fn big(id: u64, v: u64) -> Vec<u8> {
        let mut r = row(id, v);
        r.resize(3000, 1); // two versions fill a page
        r
    }
    for update in [false, true] {
        let vfs = MemVfs::new();
        let e = open(&vfs);
        let heap = Heap::create(&e, REL).unwrap();
        let t = e.begin_xid().unwrap();
        let root = heap.insert(t, &big(1, 0)).unwrap();
        heap.insert(t, &big(2, 0)).unwrap(); // fills the row's page A
        e.commit_transaction(t).unwrap();
        let bump = |heap: &Heap<'_>, tid: Tid, id: u64| {
            let x = e.begin_xid().unwrap();
            let new = heap
                .update(x, tid, |d| big(id, val(d).1 + 1))
                .unwrap()
                .unwrap();
            e.commit_transaction(x).unwrap();
            new
        };
        // The row moves to B (A is full), then B fills with versions a running
        // transaction can see, so it moves on to C: A -> B (two versions) -> C.
        let on_b = bump(&heap, root, 1);
        let old = e.begin_xid().unwrap(); // holds the horizon back
        bump(&heap, root, 1);
        let on_c = bump(&heap, root, 1);
        e.abort_transaction(old).unwrap();
        assert!(
            root.block != on_b.block && on_b.block != on_c.block && root.block != on_c.block,
            "setup: {root:?} {on_b:?} {on_c:?}"
        );
        // The walk (the one thread other than this one) stops after reading A's link to B.
        let (paused, go) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
        let armed = Arc::new(AtomicBool::new(true));
        let main = std::thread::current().id();
        let (p, g, a) = (paused.clone(), go.clone(), armed.clone());
        e.set_test_hook(
            HookPoint::HeapHop,
            Some(Box::new(move |_, _| {
                if std::thread::current().id() != main && a.swap(false, Ordering::SeqCst) {
                    p.wait();
                    g.wait();
                }
            })),
        );
        std::thread::scope(|s| {
            let walker = s.spawn(|| {
                if update {
                    let x = e.begin_xid().unwrap();
                    let r = heap.update(x, root, |d| big(val(d).0, val(d).1 + 100));
                    e.commit_transaction(x).unwrap();
                    r.unwrap().map(|_| 0)
                } else {
                    let snap = e.txns().snapshot(INVALID_XID);
                    heap.fetch(&snap, root).unwrap().map(|d| val(&d).0)
                }
            });
            paused.wait();
            // Meanwhile: an update walks A -> B -> C, points A's link at C and frees B's
            // chain; another row takes the freed root slot on B and is updated until a
            // prune makes its root a redirect.
            bump(&heap, root, 1);
            let t = e.begin_xid().unwrap();
            let other = heap.insert(t, &big(9, 0)).unwrap();
            e.commit_transaction(t).unwrap();
            assert_eq!(other, on_b, "setup: the other row takes the freed slot");
            for _ in 0..3 {
                bump(&heap, other, 9);
            }
            go.wait();
            let got = walker.join().unwrap();
            e.set_test_hook(HookPoint::HeapHop, None);
            if update {
                assert_eq!(got, Some(0));
            } else {
                assert_eq!(got, Some(1), "the walk read another row");
            }
        });
        let rows = visible_rows(&e, &heap);
        let want_1 = if update { 104 } else { 4 };
        assert_eq!(rows, vec![(1, want_1), (2, 0), (9, 3)], "update={update}");
    }
}

/// A 3000-byte row: two fill a page.
fn big(id: u64, v: u64) -> Vec<u8> {
    let mut r = row(id, v);
    r.resize(3000, 1);
    r
}

/// Where a walker and a compressing update stop in the chain-freeing races, and what they
/// tell the test thread: the walker stops at its first hop and at its first link read on
/// block `link_stop`; the compressor before each page it frees, until `free_run`.
struct Gates {
    tx: std::sync::Mutex<std::sync::mpsc::Sender<Ev>>,
    w_go: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    c_go: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    walker: std::sync::OnceLock<std::thread::ThreadId>,
    compressor: std::sync::OnceLock<std::thread::ThreadId>,
    first_hop: std::sync::atomic::AtomicBool,
    first_link: std::sync::atomic::AtomicBool,
    link_stop: u64,
    free_run: std::sync::atomic::AtomicBool,
}

#[derive(Debug, PartialEq)]
enum Ev {
    Hop(u64),
    Link(u64),
    Free(u64),
    Done,
}

/// The channels of [`Gates`] the test thread keeps: events in, go signals out.
struct Control {
    rx: std::sync::mpsc::Receiver<Ev>,
    tx: std::sync::mpsc::Sender<Ev>,
    w_go: std::sync::mpsc::Sender<()>,
    c_go: std::sync::mpsc::Sender<()>,
}

impl Control {
    /// The next event `want` accepts (others are skipped).
    fn next(&self, want: &dyn Fn(&Ev) -> bool) -> Ev {
        loop {
            let ev = self.rx.recv().unwrap();
            if want(&ev) {
                return ev;
            }
        }
    }
}

impl Gates {
    fn is(id: &std::sync::OnceLock<std::thread::ThreadId>) -> bool {
        id.get() == Some(&std::thread::current().id())
    }

    fn send(&self, ev: Ev) {
        self.tx.lock().unwrap().send(ev).unwrap();
    }

    /// Installs the gates on `e`'s `HeapHop`, `HeapLink` and `HeapFreeOrphans` hooks.
    fn install(e: &Engine, link_stop: u64) -> (Arc<Gates>, Control) {
        use bufpool::engine::HookPoint;
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::mpsc::channel;
        use std::sync::{Mutex, OnceLock};
        let (tx, rx) = channel();
        let (w_go_tx, w_go) = channel::<()>();
        let (c_go_tx, c_go) = channel::<()>();
        let gates = Arc::new(Gates {
            tx: Mutex::new(tx.clone()),
            w_go: Mutex::new(w_go),
            c_go: Mutex::new(c_go),
            walker: OnceLock::new(),
            compressor: OnceLock::new(),
            first_hop: AtomicBool::new(true),
            first_link: AtomicBool::new(true),
            link_stop,
            free_run: AtomicBool::new(false),
        });
        let g = gates.clone();
        e.set_test_hook(
            HookPoint::HeapHop,
            Some(Box::new(move |_, block| {
                if Gates::is(&g.walker) {
                    g.send(Ev::Hop(block));
                    if g.first_hop.swap(false, Ordering::SeqCst) {
                        g.w_go.lock().unwrap().recv().unwrap();
                    }
                }
            })),
        );
        let g = gates.clone();
        e.set_test_hook(
            HookPoint::HeapLink,
            Some(Box::new(move |_, block| {
                if Gates::is(&g.walker) {
                    g.send(Ev::Link(block));
                    if block == g.link_stop && g.first_link.swap(false, Ordering::SeqCst) {
                        g.w_go.lock().unwrap().recv().unwrap();
                    }
                }
            })),
        );
        let g = gates.clone();
        e.set_test_hook(
            HookPoint::HeapFreeOrphans,
            Some(Box::new(move |_, block| {
                if Gates::is(&g.compressor) && !g.free_run.load(Ordering::SeqCst) {
                    g.send(Ev::Free(block));
                    g.c_go.lock().unwrap().recv().unwrap();
                }
            })),
        );
        let control = Control {
            rx,
            tx,
            w_go: w_go_tx,
            c_go: c_go_tx,
        };
        (gates, control)
    }

    fn uninstall(e: &Engine) {
        use bufpool::engine::HookPoint;
        for point in [
            HookPoint::HeapHop,
            HookPoint::HeapLink,
            HookPoint::HeapFreeOrphans,
        ] {
            e.set_test_hook(point, None);
        }
    }
}

/// Deletes the row at `tid` in a transaction of its own.
fn delete_committed(e: &Engine, heap: &Heap<'_>, tid: Tid) {
    let t = e.begin_xid().unwrap();
    assert!(heap.delete(t, tid).unwrap());
    e.commit_transaction(t).unwrap();
}

/// Adds one to row 1 (a [`big`] row) at `tid` in a transaction of its own; returns the new
/// version's tid.
fn bump_row_1(e: &Engine, heap: &Heap<'_>, tid: Tid) -> Tid {
    let x = e.begin_xid().unwrap();
    let new = heap
        .update(x, tid, |d| big(1, val(d).1 + 1))
        .unwrap()
        .unwrap();
    e.commit_transaction(x).unwrap();
    new
}

/// Runs the walker of the chain-freeing races: an update of row 1 (adding 100) or a fetch
/// from `root`; returns what it found (1 for a row updated).
fn walk_row_1(
    e: &Engine,
    heap: &Heap<'_>,
    root: Tid,
    update: bool,
    gates: &Gates,
    tx: &std::sync::mpsc::Sender<Ev>,
) -> Option<u64> {
    gates.walker.set(std::thread::current().id()).unwrap();
    let got = if update {
        let w = e.begin_xid().unwrap();
        let r = heap.update(w, root, |d| big(1, val(d).1 + 100)).unwrap();
        e.commit_transaction(w).unwrap();
        r.map(|_| 1)
    } else {
        let snap = e.txns().snapshot(INVALID_XID);
        heap.fetch(&snap, root).unwrap().map(|d| val(&d).0)
    };
    tx.send(Ev::Done).unwrap();
    got
}

/// Part of the vanished-row defect (a hot row's update returned "no row" under load): chain
/// compression frees the chains its shortened link skips, and a walk that is already inside
/// them is protected only by `roots_freed`, read when it reads each link. That is enough
/// only if the chains are freed in chain order: once chain 2 is freed while chain 1 still
/// leads to it, a walk that holds chain 1's page at that moment reads the raised count
/// with chain 1's link, finds it unchanged at chain 2's page, and meets a freed slot.
/// The row here lives on A, then X (block 2), then Y (block 1), then Z: freed by block
/// number, Y's chain would go before X's. Hooks stop a walk on X while a compressing update
/// frees what it frees without X's lock; then the walk goes on to Y. It must find the row
/// (by the chain, or by starting over), for an update and for a fetch.
#[test]
fn a_walk_inside_compressed_chains_never_meets_a_freed_slot() {
    for update in [true, false] {
        let vfs = MemVfs::new();
        let e = open(&vfs);
        let heap = Heap::create(&e, REL).unwrap();
        let t = e.begin_xid().unwrap();
        let root = heap.insert(t, &big(1, 0)).unwrap();
        let tids: Vec<Tid> = (2..=6)
            .map(|i| heap.insert(t, &big(i, 0)).unwrap())
            .collect();
        e.commit_transaction(t).unwrap();
        let blocks: Vec<u32> = std::iter::once(root)
            .chain(tids.iter().copied())
            .map(|t| t.block)
            .collect();
        assert_eq!(blocks, [0, 0, 1, 1, 2, 2], "setup: two rows a page");
        let delete = |tid: Tid| delete_committed(&e, &heap, tid);
        let bump = |tid: Tid| bump_row_1(&e, &heap, tid);
        // Room for one more version on block 2 (row 6 gone), then on block 1 (row 4);
        // a running transaction keeps every version of row 1 alive while it moves
        // A -> X -> Y -> Z, each page full when the row leaves it.
        delete(tids[4]);
        heap.vacuum(false).unwrap();
        delete(tids[2]);
        let old = e.begin_xid().unwrap();
        let x = bump(root);
        heap.vacuum(false).unwrap();
        let y = bump(root);
        let z = bump(root);
        e.abort_transaction(old).unwrap();
        assert_eq!(
            (x.block, y.block),
            (2, 1),
            "setup: X after Y in block order ({x:?} {y:?} {z:?})"
        );
        assert!(z.block > 2, "setup: {z:?}");

        let (gates, ctl) = Gates::install(&e, 2);
        std::thread::scope(|s| {
            let walker = s.spawn(|| walk_row_1(&e, &heap, root, update, &gates, &ctl.tx));
            // 1. The walk read A's link to X and stops before X.
            assert_eq!(ctl.next(&|ev| matches!(ev, Ev::Hop(_))), Ev::Hop(2));
            // 2. An update walks the whole chain, points A's link at Z, and stops before it
            //    frees its first page.
            let compressor = s.spawn(|| {
                gates.compressor.set(std::thread::current().id()).unwrap();
                bump(root)
            });
            let mut held = ctl.next(&|ev| matches!(ev, Ev::Free(_)));
            // 3. The walk takes X and reads its link to Y; it stops holding X.
            ctl.w_go.send(()).unwrap();
            ctl.next(&|ev| *ev == Ev::Link(2));
            // 4. The update frees every page before X's; it is held before X's (whose lock
            //    the walk has).
            while held != Ev::Free(2) {
                ctl.c_go.send(()).unwrap();
                held = ctl.next(&|ev| matches!(ev, Ev::Free(_)));
            }
            // 5. The walk goes on to Y and past it (or ends there).
            ctl.w_go.send(()).unwrap();
            ctl.next(&|ev| *ev == Ev::Link(1) || *ev == Ev::Done);
            gates
                .free_run
                .store(true, std::sync::atomic::Ordering::SeqCst);
            ctl.c_go.send(()).unwrap();
            let got = walker.join().unwrap();
            compressor.join().unwrap();
            Gates::uninstall(&e);
            assert_eq!(got, Some(1), "update={update}: the walk lost row 1");
        });
        let want = if update { 104 } else { 4 };
        assert_eq!(
            visible_rows(&e, &heap),
            vec![(1, want), (2, 0), (3, 0), (5, 0)]
        );
    }
}

/// The rest of the vanished-row defect: a row whose chain comes back to a page it left
/// (A on block 0, X on block 2, Y on block 1, W on block 2 again, Z on block 3). Chain
/// compression freed a page's skipped chains together, with the first of them: X and W
/// at once, before Y. A walk that had passed X and held Y's page then read the count
/// already raised by that free with Y's link to W, found it unchanged at block 2, and met
/// W's freed slot: "no row". Hooks stop the walk holding Y while the compressing update
/// frees block 2's share; the walk must then find the row, for an update and for a fetch.
#[test]
fn a_walk_inside_a_chain_that_returns_to_a_page_never_meets_a_freed_slot() {
    for update in [true, false] {
        let vfs = MemVfs::new();
        let e = open(&vfs);
        let heap = Heap::create(&e, REL).unwrap();
        let t = e.begin_xid().unwrap();
        let root = heap.insert(t, &big(1, 0)).unwrap();
        let tids: Vec<Tid> = (2..=6)
            .map(|i| heap.insert(t, &big(i, 0)).unwrap())
            .collect();
        e.commit_transaction(t).unwrap();
        let delete = |tid: Tid| delete_committed(&e, &heap, tid);
        let bump = |tid: Tid| bump_row_1(&e, &heap, tid);
        // Block 2 emptied; a filler whose inserter will abort takes one of its slots, so
        // X takes the other. Then room on block 1 (row 4) for Y; the filler's abort makes
        // room on block 2 again for W; Z goes to a new page. A running transaction keeps
        // every version of row 1 alive meanwhile.
        delete(tids[3]);
        delete(tids[4]);
        heap.vacuum(false).unwrap();
        delete(tids[2]);
        let filler_xid = e.begin_xid().unwrap();
        let filler = heap.insert(filler_xid, &big(7, 0)).unwrap();
        let old = e.begin_xid().unwrap();
        let x = bump(root);
        heap.vacuum(false).unwrap();
        let y = bump(root);
        e.abort_transaction(filler_xid).unwrap();
        heap.vacuum(false).unwrap();
        let w = bump(root);
        let z = bump(root);
        e.abort_transaction(old).unwrap();
        assert_eq!(
            (filler.block, x.block, y.block, w.block),
            (2, 2, 1, 2),
            "setup: the chain returns to block 2 ({x:?} {y:?} {w:?} {z:?})"
        );
        assert!(z.block > 2, "setup: {z:?}");

        let (gates, ctl) = Gates::install(&e, 1);
        std::thread::scope(|s| {
            let walker = s.spawn(|| walk_row_1(&e, &heap, root, update, &gates, &ctl.tx));
            // 1. The walk read A's link to X and stops before X.
            assert_eq!(ctl.next(&|ev| matches!(ev, Ev::Hop(_))), Ev::Hop(2));
            // 2. An update walks the whole chain, points A's link at Z, and stops before it
            //    frees its first page (block 2, X's).
            let compressor = s.spawn(|| {
                gates.compressor.set(std::thread::current().id()).unwrap();
                bump(root)
            });
            assert_eq!(ctl.next(&|ev| matches!(ev, Ev::Free(_))), Ev::Free(2));
            // 3. The walk passes X, takes Y and reads its link to W; it stops holding Y.
            ctl.w_go.send(()).unwrap();
            ctl.next(&|ev| *ev == Ev::Link(1));
            // 4. The update frees what it frees of block 2 and stops before block 1
            //    (whose lock the walk has).
            ctl.c_go.send(()).unwrap();
            assert_eq!(ctl.next(&|ev| matches!(ev, Ev::Free(_))), Ev::Free(1));
            // 5. The walk goes on to block 2 and past it (or ends there).
            ctl.w_go.send(()).unwrap();
            ctl.next(&|ev| *ev == Ev::Hop(3) || *ev == Ev::Done);
            gates
                .free_run
                .store(true, std::sync::atomic::Ordering::SeqCst);
            ctl.c_go.send(()).unwrap();
            let got = walker.join().unwrap();
            compressor.join().unwrap();
            Gates::uninstall(&e);
            assert_eq!(got, Some(1), "update={update}: the walk lost row 1");
        });
        let want = if update { 105 } else { 5 };
        assert_eq!(visible_rows(&e, &heap), vec![(1, want), (2, 0), (3, 0)]);
    }
}

/// Proves (S3): an observer's snapshot (outside any transaction, as `bufpool check` and
/// scans take) keeps seeing what it saw while it lives, even across pruning by VACUUM: the
/// version it sees is not dead to all while it is held. Before, such snapshots held the
/// horizon nowhere, and after a concurrent update and a VACUUM the row vanished from them.
#[test]
fn an_observer_snapshot_keeps_its_rows_across_a_vacuum() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let root = insert_committed(&e, &heap, 1)[0];
    let t = e.begin_xid().unwrap();
    let snap = e.txns().snapshot(INVALID_XID);
    heap.update(t, root, |d| row(val(d).0, 1)).unwrap().unwrap();
    e.commit_transaction(t).unwrap();
    heap.vacuum(false).unwrap();
    let seen = heap.fetch(&snap, root).unwrap().map(|d| val(&d));
    assert_eq!(seen, Some((0, 0)), "the observer lost the row it saw");
    let mut scanned = Vec::new();
    heap.scan(&snap, |_, d| scanned.push(val(d))).unwrap();
    assert_eq!(scanned, vec![(0, 0)]);
    drop(snap);
    assert_eq!(visible_rows(&e, &heap), vec![(0, 1)]);
}

/// Found by the simulator (`tests/sim.rs`): an index may keep entries of rows that never
/// committed (the heap's contract: drop them first, or recheck the key of what is
/// fetched), and VACUUM with truncation may cut their page off the end of the table.
/// Following such an entry then failed with an I/O error ("read only 0 of 4096 bytes ...
/// block beyond its end") where it should find no row, as for a freed slot. How: rows of
/// an aborted transaction on a new last page, VACUUM truncates it, then a fetch, an
/// update and a row lock at one of their tids.
#[test]
fn a_tid_on_a_page_vacuum_truncated_away_is_no_row() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t = e.begin_xid().unwrap();
    heap.insert(t, &big(1, 0)).unwrap();
    heap.insert(t, &big(2, 0)).unwrap(); // block 0 full
    e.commit_transaction(t).unwrap();
    let a = e.begin_xid().unwrap();
    let gone = heap.insert(a, &big(3, 0)).unwrap();
    e.abort_transaction(a).unwrap();
    assert_eq!(gone.block, 1, "setup: the aborted row is on a new page");
    let r = heap.vacuum(true).unwrap();
    assert_eq!(r.truncated_pages, 1, "setup: {r:?}");
    let snap = e.txns().snapshot(INVALID_XID);
    assert_eq!(heap.fetch(&snap, gone).unwrap(), None);
    let x = e.begin_xid().unwrap();
    assert_eq!(heap.update(x, gone, |d| d.to_vec()).unwrap(), None);
    assert_eq!(
        heap.lock_row(x, gone, bufpool::table::RowLockMode::Share)
            .unwrap(),
        None
    );
    e.commit_transaction(x).unwrap();
    assert_eq!(visible_rows(&e, &heap), vec![(1, 0), (2, 0)]);
}

/// A free-space map left without its table (a creation that a power cut undid in part:
/// creation is not logged, and the crash kept the map's directory entry, not the
/// table's) does not block creating the table: before, `Heap::create` failed with "file
/// exists" on the map (found by the simulator, seed 9203714). A table that does exist is
/// still refused.
#[test]
fn a_map_left_without_its_table_does_not_block_creating_it() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    e.pool()
        .create_relation(REL, bufpool::ForkNumber::FreeSpace)
        .unwrap();
    let heap = Heap::create(&e, REL).unwrap();
    let x = e.begin_xid().unwrap();
    heap.insert(x, &row(1, 1)).unwrap();
    e.commit_transaction(x).unwrap();
    let mut seen = Vec::new();
    heap.scan(&e.txns().snapshot(INVALID_XID), |_, d| seen.push(val(d).0))
        .unwrap();
    assert_eq!(seen, vec![1]);
    assert!(
        Heap::create(&e, REL).is_err(),
        "a table that exists is refused"
    );
}
