//! Transactions as handles ([`bufpool::engine::Transaction`]).
//!
//! Proves: a handle that is committed makes its rows visible; one that is dropped without
//! a commit (a forgotten handle, an early `?` return, a panic) is aborted: its rows are
//! never visible, it leaves the running set, and it no longer holds back the pruning
//! horizon; an explicit abort does the same. Savepoints: rows written in a savepoint that
//! is rolled back are gone (to the owner too), those of released savepoints commit with
//! the transaction, a row updated by the transaction and again in a savepoint needs no
//! wait, a row a rolled-back savepoint updated is free for others at once, and all of it
//! holds after a crash and recovery. How: rows inserted under each handle, then
//! snapshots, the running set, the commit log's status and `oldest_xmin` checked.

use bufpool::table::Heap;
use bufpool::txn::{XidStatus, INVALID_XID};
use bufpool::{Engine, HeapError, MemVfs, RelFileId};

const REL: RelFileId = RelFileId::new(0, 920);

mod common;

fn open(vfs: &MemVfs) -> Engine {
    common::small_engine(vfs)
}

fn visible(e: &Engine, heap: &Heap<'_>) -> Vec<Vec<u8>> {
    let snap = e.txns().snapshot(INVALID_XID);
    let mut rows = Vec::new();
    heap.scan(&snap, |_, d| rows.push(d.to_vec())).unwrap();
    rows.sort();
    rows
}

#[test]
fn committed_handles_are_visible_and_dropped_ones_are_aborted() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();

    let t = e.begin().unwrap();
    heap.insert(t.xid().unwrap(), b"kept").unwrap();
    let committed = t.xid().unwrap();
    t.commit().unwrap();

    let forgotten = {
        let t = e.begin().unwrap();
        heap.insert(t.xid().unwrap(), b"forgotten").unwrap();
        assert!(e.txns().is_running(t.xid().unwrap()));
        t.xid().unwrap()
    }; // dropped here
    let explicit = {
        let t = e.begin().unwrap();
        heap.insert(t.xid().unwrap(), b"aborted").unwrap();
        let x = t.xid().unwrap();
        t.abort().unwrap();
        x
    };
    assert_eq!(visible(&e, &heap), vec![b"kept".to_vec()]);
    for x in [forgotten, explicit] {
        assert!(!e.txns().is_running(x), "transaction {x} still running");
        assert_eq!(e.txns().status(x).unwrap(), XidStatus::Aborted);
    }
    assert_eq!(e.txns().status(committed).unwrap(), XidStatus::Committed);
    assert!(
        e.txns().oldest_xmin() > explicit,
        "nothing holds back the horizon: {}",
        e.txns().oldest_xmin()
    );
}

#[test]
fn an_early_return_or_a_panic_aborts_the_transaction() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();

    // `?` leaves the function with the handle still open.
    fn fails_half_way(e: &Engine, heap: &Heap<'_>) -> Result<(), HeapError> {
        let t = e.begin()?;
        heap.insert(t.xid().unwrap(), b"half")?;
        heap.insert(t.xid().unwrap(), &vec![0u8; 1 << 20])?; // too large: an error
        t.commit()?;
        Ok(())
    }
    assert!(fails_half_way(&e, &heap).is_err());

    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let t = e.begin().unwrap();
        heap.insert(t.xid().unwrap(), b"panicked").unwrap();
        panic!("the caller fails with the transaction open");
    }));
    assert!(r.is_err());
    assert!(visible(&e, &heap).is_empty(), "neither row is visible");
    let next = e.begin().unwrap();
    assert_eq!(
        e.txns().oldest_xmin(),
        next.xid().unwrap(),
        "the only running transaction is the newest"
    );
    next.commit().unwrap();
}

fn own_rows(e: &Engine, heap: &Heap<'_>, xid: u32) -> Vec<Vec<u8>> {
    let snap = e.txns().snapshot(xid);
    let mut rows = Vec::new();
    heap.scan(&snap, |_, d| rows.push(d.to_vec())).unwrap();
    rows.sort();
    rows
}

fn rows_of(names: &[&str]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = names.iter().map(|n| n.as_bytes().to_vec()).collect();
    v.sort();
    v
}

#[test]
fn savepoints_roll_back_release_and_commit() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let mut t = e.begin().unwrap();
    let top = t.xid().unwrap();
    heap.insert(t.xid().unwrap(), b"a").unwrap();
    let sp1 = t.savepoint().unwrap();
    assert_ne!(t.xid().unwrap(), top, "a savepoint has its own id");
    heap.insert(t.xid().unwrap(), b"b").unwrap();
    let sp2 = t.savepoint().unwrap();
    heap.insert(t.xid().unwrap(), b"c").unwrap();
    // The owner sees all three, through a snapshot taken from its top-level id.
    assert_eq!(own_rows(&e, &heap, top), rows_of(&["a", "b", "c"]));
    let c_xid = t.xid().unwrap();
    t.rollback_to(sp2).unwrap();
    assert_eq!(t.depth(), 2, "the savepoint stays open");
    assert_ne!(t.xid().unwrap(), c_xid, "and begins again with a new id");
    assert_eq!(e.txns().status(c_xid).unwrap(), XidStatus::Aborted);
    assert_eq!(own_rows(&e, &heap, top), rows_of(&["a", "b"]));
    heap.insert(t.xid().unwrap(), b"d").unwrap();
    t.release(sp1).unwrap();
    assert_eq!((t.depth(), t.xid().unwrap()), (0, top));
    assert!(t.rollback_to(sp1).is_err(), "a released savepoint is gone");
    let sp3 = t.savepoint().unwrap();
    heap.insert(t.xid().unwrap(), b"e").unwrap();
    t.rollback_to(sp3).unwrap();
    assert_eq!(
        own_rows(&e, &heap, t.xid().unwrap()),
        rows_of(&["a", "b", "d"])
    );
    assert!(visible(&e, &heap).is_empty(), "nothing before the commit");
    t.commit().unwrap();
    assert_eq!(visible(&e, &heap), rows_of(&["a", "b", "d"]));
}

#[test]
fn savepoint_rows_and_row_locks_belong_to_the_tree() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t = e.begin().unwrap();
    let r = heap.insert(t.xid().unwrap(), b"0").unwrap();
    let s = heap.insert(t.xid().unwrap(), b"s0").unwrap();
    t.commit().unwrap();

    let mut t = e.begin().unwrap();
    heap.update(t.xid().unwrap(), r, |_| b"1".to_vec()).unwrap();
    let sp = t.savepoint().unwrap();
    // The row the transaction itself updated: no wait for its own top-level id.
    heap.update(t.xid().unwrap(), r, |d| [d, b"+2"].concat())
        .unwrap();
    // A row updated only in a savepoint that is then rolled back...
    heap.update(t.xid().unwrap(), s, |_| b"s1".to_vec())
        .unwrap();
    t.rollback_to(sp).unwrap();
    // ...is free for another transaction at once (it would wait otherwise).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let u = e.begin().unwrap();
            let got = heap
                .update(u.xid().unwrap(), s, |_| b"s2".to_vec())
                .unwrap();
            u.commit().unwrap();
            tx.send(got.is_some()).unwrap();
        });
        let updated = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the other transaction waited on a rolled-back savepoint's row lock");
        assert!(updated);
    });
    assert_eq!(own_rows(&e, &heap, t.xid().unwrap()), rows_of(&["1", "s2"]));
    t.commit().unwrap();
    assert_eq!(visible(&e, &heap), rows_of(&["1", "s2"]));
}

#[test]
fn savepoints_survive_a_crash_as_their_transactions_do() {
    let vfs = MemVfs::new();
    let (committed_subs, rolled_back, running_subs) = {
        let e = open(&vfs);
        let heap = Heap::create(&e, REL).unwrap();
        let mut t = e.begin().unwrap();
        let mut committed_subs = Vec::new();
        let mut rolled_back = Vec::new();
        // 70 nested savepoints, as seed 002's script: past the 64-id cache.
        for i in 0..70 {
            let sp = t.savepoint().unwrap();
            heap.insert(t.xid().unwrap(), format!("row{i:02}").as_bytes())
                .unwrap();
            if i % 10 == 9 {
                rolled_back.push(t.xid().unwrap());
                t.rollback_to(sp).unwrap();
            }
            committed_subs.push(t.xid().unwrap());
        }
        t.commit().unwrap();
        let mut u = e.begin().unwrap();
        u.savepoint().unwrap();
        heap.insert(u.xid().unwrap(), b"uncommitted").unwrap();
        let running = vec![u.top_xid().unwrap(), u.xid().unwrap()];
        std::mem::forget(u); // the crash comes before it ends
        drop(e); // a crash: no shutdown checkpoint
        (committed_subs, rolled_back, running)
    };
    let e = open(&vfs);
    let heap = Heap::open(&e, REL);
    let want: Vec<Vec<u8>> = (0..70)
        .filter(|i| i % 10 != 9)
        .map(|i| format!("row{i:02}").into_bytes())
        .collect();
    assert_eq!(visible(&e, &heap), want);
    for &x in &committed_subs {
        if !rolled_back.contains(&x) {
            assert_eq!(e.txns().status(x).unwrap(), XidStatus::Committed, "{x}");
        }
    }
    for x in &rolled_back {
        assert_eq!(e.txns().status(*x).unwrap(), XidStatus::Aborted, "{x}");
    }
    // The running transaction left no durable trace (its row's record was never flushed,
    // and no page goes out before its record): its ids may be handed out again, and until
    // then count as not yet started. Never as committed.
    for x in &running_subs {
        assert_ne!(e.txns().status(*x).unwrap(), XidStatus::Committed, "{x}");
    }
    let next = e.begin().unwrap();
    assert!(
        next.xid().unwrap() > *committed_subs.iter().max().unwrap(),
        "ids of a durable commit are never handed out again"
    );
}

/// The log's insert position and the id the next transaction would get.
fn log_and_ids(e: &Engine) -> (bufpool::Lsn, u32) {
    (e.wal().insert_position(), e.txns().next_xid())
}

/// A transaction that only reads gets no id: its commit, its abort and its drop write
/// nothing to the log and wait for no flush, and it spends no id. Before ids were assigned
/// at the first write, each of these wrote a commit or abort record (one per read-only
/// transaction: `bench -b select-only` wrote one record and one flush per transaction).
#[test]
fn a_transaction_that_only_reads_writes_nothing() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t = e.begin().unwrap();
    let r = heap.insert(t.xid().unwrap(), b"row").unwrap();
    assert!(t.commit().unwrap().is_some(), "a writer commits a record");

    let before = log_and_ids(&e);
    let flushes = e.wal().stats().syncs;
    let t = e.begin().unwrap();
    assert_eq!(heap.fetch(&t.snapshot(), r).unwrap().unwrap(), b"row");
    assert_eq!(t.top_xid(), None, "reading assigns no id");
    assert_eq!(t.commit().unwrap(), None, "no commit record");
    let t = e.begin().unwrap();
    let _ = heap.fetch(&t.snapshot(), r).unwrap();
    t.abort().unwrap();
    {
        let t = e.begin().unwrap();
        let _ = heap.fetch(&t.snapshot(), r).unwrap();
        // dropped: nothing to abort
    }
    // Savepoints that write nothing roll back and release without a record.
    let mut t = e.begin().unwrap();
    let sp = t.savepoint().unwrap();
    let inner = t.savepoint().unwrap();
    t.rollback_to(inner).unwrap();
    t.release(sp).unwrap();
    assert_eq!(t.commit().unwrap(), None);
    assert_eq!(log_and_ids(&e), before, "no record, no id spent");
    assert_eq!(e.wal().stats().syncs, flushes, "no flush");
    assert!(e.txns().snapshot(INVALID_XID).running.is_empty());
}

/// A snapshot taken before the transaction's first write sees the rows the transaction
/// writes after it (its id, assigned later, reaches the snapshot through the shared tree),
/// and no one else's that committed after it was taken; while it lives it holds the
/// pruning horizon, though its transaction has no id.
#[test]
fn a_snapshot_taken_before_the_first_write_sees_the_writes_after_it() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let t = e.begin().unwrap();
    let snap = t.snapshot();
    assert!(
        e.txns().oldest_xmin() <= snap.xmin,
        "the snapshot holds the horizon"
    );
    let other = e.begin().unwrap();
    heap.insert(other.xid().unwrap(), b"theirs").unwrap();
    other.commit().unwrap();
    let r = heap.insert(t.xid().unwrap(), b"mine").unwrap();
    assert!(
        t.top_xid().unwrap() >= snap.xmax,
        "assigned after the snapshot"
    );
    let mut rows = Vec::new();
    heap.scan(&snap, |_, d| rows.push(d.to_vec())).unwrap();
    assert_eq!(
        rows,
        rows_of(&["mine"]),
        "its own write, not the later commit"
    );
    assert_eq!(heap.fetch(&snap, r).unwrap().unwrap(), b"mine");
    assert!(
        visible(&e, &heap) == rows_of(&["theirs"]),
        "not yet committed"
    );
    assert!(t.commit().unwrap().is_some());
    assert_eq!(visible(&e, &heap), rows_of(&["mine", "theirs"]));
}

/// Ids are assigned outermost first at the first write, whatever the depth: a write in a
/// savepoint set before any write gives the transaction its id, then the savepoint its
/// own (a child of it); rolling that savepoint back aborts exactly its row, and the
/// transaction commits the rest.
#[test]
fn a_savepoint_before_the_first_write_gets_its_id_after_its_parent() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let mut t = e.begin().unwrap();
    let sp1 = t.savepoint().unwrap();
    let sp2 = t.savepoint().unwrap();
    assert_eq!(t.top_xid(), None);
    let inner = t.xid().unwrap();
    heap.insert(inner, b"inner").unwrap();
    let top = t.top_xid().unwrap();
    assert!(inner > top, "the top-level id first");
    assert_eq!(e.txns().top_of(inner), top);
    t.rollback_to(sp2).unwrap();
    assert_eq!(e.txns().status(inner).unwrap(), XidStatus::Aborted);
    heap.insert(t.xid().unwrap(), b"kept").unwrap();
    t.release(sp1).unwrap();
    assert_eq!(t.xid().unwrap(), top);
    t.commit().unwrap();
    assert_eq!(visible(&e, &heap), rows_of(&["kept"]));
    // A savepoint of another handle is refused, with or without ids.
    let mut a = e.begin().unwrap();
    let b = e.begin().unwrap();
    let sp = a.savepoint().unwrap();
    let mut b = b;
    assert!(b.rollback_to(sp).is_err());
    assert!(b.release(sp).is_err());
    // ...also by a handle with a savepoint of the same number of its own.
    let own = b.savepoint().unwrap();
    assert!(b.rollback_to(sp).is_err());
    assert!(b.release(sp).is_err());
    b.release(own).unwrap();
    a.rollback_to(sp).unwrap();
}
