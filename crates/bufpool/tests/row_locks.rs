//! Row locks (`Heap::lock_row`, PostgreSQL's `SELECT ... FOR SHARE / FOR UPDATE`) and the
//! multixacts they make.
//!
//! Proves: share lockers hold a row together (its xmax becomes a multixact) and a writer
//! or an exclusive locker waits for every one of them, one after the other; two share
//! lockers that both go on to update get exactly one deadlock error; seed 002's
//! experiment 2 pattern (lock FOR UPDATE, savepoint, update) keeps the top-level lock
//! beside the savepoint's update, so rolling the savepoint back leaves the row locked,
//! and committing makes the update visible through the multixact's updater member; a
//! locker that waited for an updater locks the new version; and after a crash every
//! multixact a surviving tuple names can still be read (its creation was logged and is
//! replayed), while locks of transactions the crash ended hold nothing.
//! How: threads block in the engine's own wait (`TxnManager::waiting_for` says on whom),
//! never a sleep; each step checks the running set, the multixact positions and what
//! snapshots see.

use std::time::{Duration, Instant};

use bufpool::table::{Heap, RowLockMode, Tid};
use bufpool::txn::{MemberMode, Xid, INVALID_XID};
use bufpool::{Engine, HeapError, MemVfs, RelFileId};

const REL: RelFileId = RelFileId::new(0, 930);

mod common;

fn open(vfs: &MemVfs) -> Engine {
    common::small_engine(vfs)
}

fn one_row(e: &Engine, heap: &Heap<'_>, data: &[u8]) -> Tid {
    let t = e.begin().unwrap();
    let r = heap.insert(t.xid().unwrap(), data).unwrap();
    t.commit().unwrap();
    r
}

/// What a fresh snapshot (of nobody, or of `own`) sees of the row.
fn seen(e: &Engine, heap: &Heap<'_>, own: Xid, r: Tid) -> Option<Vec<u8>> {
    heap.fetch(&e.txns().snapshot(own), r).unwrap()
}

/// Waits until `waiter`'s tree is blocked on `holder` in the engine's lock wait.
fn until_waiting(e: &Engine, waiter: Xid, holder: Xid) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while e.txns().waiting_for(waiter) != Some(holder) {
        assert!(
            Instant::now() < deadline,
            "{waiter} never waited for {holder} (waits for {:?})",
            e.txns().waiting_for(waiter)
        );
        std::thread::yield_now();
    }
}

fn next_multi(e: &Engine) -> u32 {
    e.txns().multis().positions().next_multi
}

#[test]
fn share_lockers_hold_a_row_together_and_writers_wait_for_each() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let r = one_row(&e, &heap, b"v0");
    let m0 = next_multi(&e);

    let t1 = e.begin().unwrap();
    let t2 = e.begin().unwrap();
    assert_eq!(
        heap.lock_row(t1.xid().unwrap(), r, RowLockMode::Share)
            .unwrap(),
        Some(r)
    );
    // A second share lock does not wait: the row's xmax becomes a multixact of both.
    assert_eq!(
        heap.lock_row(t2.xid().unwrap(), r, RowLockMode::Share)
            .unwrap(),
        Some(r)
    );
    assert_eq!(next_multi(&e), m0 + 1);
    let members = e.txns().multis().members(m0).unwrap();
    assert_eq!(
        members,
        vec![
            (t1.xid().unwrap(), MemberMode::Share),
            (t2.xid().unwrap(), MemberMode::Share)
        ]
    );
    // Asking again for what one already holds writes nothing new.
    assert_eq!(
        heap.lock_row(t1.xid().unwrap(), r, RowLockMode::Share)
            .unwrap(),
        Some(r)
    );
    assert_eq!(next_multi(&e), m0 + 1);
    // A lock hides nothing: everyone, lockers included, still sees the row.
    for own in [INVALID_XID, t1.xid().unwrap(), t2.xid().unwrap()] {
        assert_eq!(seen(&e, &heap, own, r), Some(b"v0".to_vec()));
    }

    std::thread::scope(|s| {
        let (e, heap) = (&e, &heap);
        let t3 = e.begin().unwrap();
        let x3 = t3.xid().unwrap();
        let locker = s.spawn(move || {
            let got = heap.lock_row(x3, r, RowLockMode::Exclusive).unwrap();
            (t3, got)
        });
        until_waiting(e, x3, t1.xid().unwrap());
        t1.commit().unwrap();
        // The exclusive locker then waits for the other share locker.
        until_waiting(e, x3, t2.xid().unwrap());
        t2.commit().unwrap();
        let (t3, got) = locker.join().unwrap();
        assert_eq!(got, Some(r));
        // And a writer waits for the exclusive locker.
        let u = e.begin().unwrap();
        let xu = u.xid().unwrap();
        let writer = s.spawn(move || {
            let got = heap.update(xu, r, |d| [d, b"+u"].concat()).unwrap();
            u.commit().unwrap();
            got
        });
        until_waiting(e, xu, x3);
        assert_eq!(seen(e, heap, INVALID_XID, r), Some(b"v0".to_vec()));
        t3.commit().unwrap();
        assert!(writer.join().unwrap().is_some());
    });
    assert_eq!(seen(&e, &heap, INVALID_XID, r), Some(b"v0+u".to_vec()));
}

#[test]
fn two_share_lockers_that_both_update_get_one_deadlock() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let r = one_row(&e, &heap, b"0");
    let barrier = std::sync::Barrier::new(2);
    let outcomes: Vec<Result<(), HeapError>> = std::thread::scope(|s| {
        let run = || {
            let (e, heap, barrier) = (&e, &heap, &barrier);
            s.spawn(move || {
                let t = e.begin().unwrap();
                heap.lock_row(t.xid().unwrap(), r, RowLockMode::Share)
                    .unwrap();
                barrier.wait(); // both hold the share lock
                let got = heap.update(t.xid().unwrap(), r, |d| [d, b"+1"].concat());
                match got {
                    Ok(_) => {
                        t.commit().unwrap();
                        Ok(())
                    }
                    Err(err) => Err(err), // dropping `t` aborts it
                }
            })
        };
        let (a, b) = (run(), run());
        vec![a.join().unwrap(), b.join().unwrap()]
    });
    let errors: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert_eq!(errors.len(), 1, "{outcomes:?}");
    assert!(matches!(errors[0], HeapError::Deadlock(_)), "{}", errors[0]);
    assert_eq!(seen(&e, &heap, INVALID_XID, r), Some(b"0+1".to_vec()));
}

/// Seed 002's experiment 2: `SELECT ... FOR UPDATE; SAVEPOINT; UPDATE` on one row.
#[test]
fn a_lock_kept_beside_a_savepoint_update_outlives_its_rollback() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let r = one_row(&e, &heap, b"v0");
    let m0 = next_multi(&e);

    // Rolled back: the top-level lock stays.
    let mut t = e.begin().unwrap();
    heap.lock_row(t.xid().unwrap(), r, RowLockMode::Exclusive)
        .unwrap();
    let sp = t.savepoint().unwrap();
    let s_xid = t.xid().unwrap();
    heap.update(s_xid, r, |d| [d, b"+s"].concat()).unwrap();
    assert_eq!(next_multi(&e), m0 + 1, "lock and update: one multixact");
    assert_eq!(
        e.txns().multis().members(m0).unwrap(),
        vec![
            (t.top_xid().unwrap(), MemberMode::Exclusive),
            (s_xid, MemberMode::Update)
        ]
    );
    assert_eq!(seen(&e, &heap, s_xid, r), Some(b"v0+s".to_vec()));
    assert_eq!(seen(&e, &heap, INVALID_XID, r), Some(b"v0".to_vec()));
    t.rollback_to(sp).unwrap();
    assert_eq!(seen(&e, &heap, t.xid().unwrap(), r), Some(b"v0".to_vec()));
    std::thread::scope(|s| {
        let (e, heap) = (&e, &heap);
        let u = e.begin().unwrap();
        let xu = u.xid().unwrap();
        let writer = s.spawn(move || {
            let mut from = Vec::new();
            let got = heap
                .update(xu, r, |d| {
                    from = d.to_vec();
                    [d, b"+u"].concat()
                })
                .unwrap();
            u.commit().unwrap();
            (got, from)
        });
        until_waiting(e, xu, t.top_xid().unwrap());
        t.commit().unwrap();
        let (got, from) = writer.join().unwrap();
        assert!(got.is_some());
        assert_eq!(
            from, b"v0",
            "the rolled-back update is not what the writer sees"
        );
    });
    assert_eq!(seen(&e, &heap, INVALID_XID, r), Some(b"v0+u".to_vec()));

    // Committed: the update is read through the multixact's updater member.
    let mut t = e.begin().unwrap();
    heap.lock_row(t.xid().unwrap(), r, RowLockMode::Exclusive)
        .unwrap();
    t.savepoint().unwrap();
    heap.update(t.xid().unwrap(), r, |d| [d, b"+s"].concat())
        .unwrap();
    t.commit().unwrap();
    assert_eq!(seen(&e, &heap, INVALID_XID, r), Some(b"v0+u+s".to_vec()));
    let snap = e.txns().snapshot(INVALID_XID);
    let mut rows = Vec::new();
    heap.scan(&snap, |tid, d| rows.push((tid, d.to_vec())))
        .unwrap();
    assert_eq!(
        rows,
        vec![(r, b"v0+u+s".to_vec())],
        "one row, under its root"
    );
    // And VACUUM prunes through the multixact link without losing the row.
    heap.vacuum(false).unwrap();
    assert_eq!(seen(&e, &heap, INVALID_XID, r), Some(b"v0+u+s".to_vec()));
}

#[test]
fn a_locker_that_waited_for_an_updater_locks_the_new_version() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let r = one_row(&e, &heap, b"v0");
    let t = e.begin().unwrap();
    let new = heap
        .update(t.xid().unwrap(), r, |_| b"v1".to_vec())
        .unwrap()
        .unwrap();
    std::thread::scope(|s| {
        let (e, heap) = (&e, &heap);
        let l = e.begin().unwrap();
        let xl = l.xid().unwrap();
        let locker = s.spawn(move || (l, heap.lock_row(xl, r, RowLockMode::Share).unwrap()));
        until_waiting(e, xl, t.xid().unwrap());
        t.commit().unwrap();
        let (l, got) = locker.join().unwrap();
        assert_eq!(got, Some(new));
        // Deleted meanwhile: nothing to lock.
        let d = e.begin().unwrap();
        let xd = d.xid().unwrap();
        let deleter = s.spawn(move || {
            let gone = heap.delete(xd, r).unwrap();
            d.commit().unwrap();
            gone
        });
        until_waiting(e, xd, xl);
        l.commit().unwrap();
        assert!(deleter.join().unwrap());
    });
    let x = e.begin().unwrap();
    assert_eq!(
        heap.lock_row(x.xid().unwrap(), r, RowLockMode::Exclusive)
            .unwrap(),
        None
    );
}

#[test]
fn multixacts_survive_a_crash_and_dead_lockers_hold_nothing() {
    let vfs = MemVfs::new();
    let (a, b, c) = {
        let e = open(&vfs);
        let heap = Heap::create(&e, REL).unwrap();
        let a = one_row(&e, &heap, b"a0");
        let b = one_row(&e, &heap, b"b0");
        let c = one_row(&e, &heap, b"c0");
        // a: lock + savepoint update, committed, before a checkpoint.
        let mut t = e.begin().unwrap();
        heap.lock_row(t.xid().unwrap(), a, RowLockMode::Exclusive)
            .unwrap();
        t.savepoint().unwrap();
        heap.update(t.xid().unwrap(), a, |_| b"a1".to_vec())
            .unwrap();
        t.commit().unwrap();
        e.checkpoint().unwrap();
        // b: the same after the checkpoint (replay must recreate its multixact).
        let mut t = e.begin().unwrap();
        heap.lock_row(t.xid().unwrap(), b, RowLockMode::Exclusive)
            .unwrap();
        t.savepoint().unwrap();
        heap.update(t.xid().unwrap(), b, |_| b"b1".to_vec())
            .unwrap();
        t.commit().unwrap();
        // c: two share lockers still running at the crash.
        let l1 = e.begin().unwrap();
        let l2 = e.begin().unwrap();
        heap.lock_row(l1.xid().unwrap(), c, RowLockMode::Share)
            .unwrap();
        heap.lock_row(l2.xid().unwrap(), c, RowLockMode::Share)
            .unwrap();
        // A writer's commit makes everything before it durable (a transaction that
        // writes nothing has no record to flush).
        one_row(&e, &heap, b"d0");
        std::mem::forget((l1, l2));
        drop(e); // a crash
        (a, b, c)
    };
    let e = open(&vfs);
    let heap = Heap::open(&e, REL);
    assert!(e.recovery_report().unwrap().multis >= 1);
    assert_eq!(seen(&e, &heap, INVALID_XID, a), Some(b"a1".to_vec()));
    assert_eq!(seen(&e, &heap, INVALID_XID, b), Some(b"b1".to_vec()));
    assert_eq!(seen(&e, &heap, INVALID_XID, c), Some(b"c0".to_vec()));
    // The crash ended the share lockers: an update needs no wait (it would hang here).
    let u = e.begin().unwrap();
    for r in [a, b, c] {
        assert!(heap
            .update(u.xid().unwrap(), r, |d| [d, b"!"].concat())
            .unwrap()
            .is_some());
    }
    u.commit().unwrap();
    // New multixacts are numbered past every replayed one.
    let before = next_multi(&e);
    let l1 = e.begin().unwrap();
    let l2 = e.begin().unwrap();
    heap.lock_row(l1.xid().unwrap(), a, RowLockMode::Share)
        .unwrap();
    heap.lock_row(l2.xid().unwrap(), a, RowLockMode::Share)
        .unwrap();
    assert_eq!(next_multi(&e), before + 1);
    assert!(
        before >= 4,
        "three multixacts before the crash: next is {before}"
    );
}

/// Lock FOR UPDATE, savepoint, update, commit: one multixact with an updater in `heap`.
fn exp2_transaction(e: &Engine, heap: &Heap<'_>, r: Tid, data: &[u8]) {
    let mut t = e.begin().unwrap();
    heap.lock_row(t.xid().unwrap(), r, RowLockMode::Exclusive)
        .unwrap();
    t.savepoint().unwrap();
    heap.update(t.xid().unwrap(), r, |_| data.to_vec()).unwrap();
    t.commit().unwrap();
}

/// Proves that old multixacts are cut only below what every table may still name: a
/// checkpoint keeps them while any table holds one (an unvacuumed table pins them), VACUUM
/// replaces the finished ones (keeping one whose lockers still run), and once every table
/// is vacuumed the next checkpoint truncates them, rows staying readable and writable,
/// across a crash too.
#[test]
fn vacuum_replaces_finished_multixacts_and_checkpoints_cut_below_every_table() {
    let vfs = MemVfs::new();
    let rel_b = RelFileId::new(0, 931);
    let first_multi;
    {
        let e = open(&vfs);
        let a = Heap::create(&e, REL).unwrap();
        let b = Heap::create(&e, rel_b).unwrap();
        let ra = one_row(&e, &a, b"a0");
        let ra2 = one_row(&e, &a, b"x0");
        let rb = one_row(&e, &b, b"b0");
        first_multi = next_multi(&e);
        exp2_transaction(&e, &a, ra, b"a1");
        exp2_transaction(&e, &b, rb, b"b1");
        // Share lockers of another row of `a`, still running.
        let l1 = e.begin().unwrap();
        let l2 = e.begin().unwrap();
        a.lock_row(l1.xid().unwrap(), ra2, RowLockMode::Share)
            .unwrap();
        a.lock_row(l2.xid().unwrap(), ra2, RowLockMode::Share)
            .unwrap();
        let running_multi = next_multi(&e) - 1;
        let oldest = || e.txns().multis().positions().oldest_multi;
        e.checkpoint().unwrap();
        assert_eq!(oldest(), first_multi, "both tables hold multixacts");

        let rep = a.vacuum(false).unwrap();
        assert!(rep.multis_replaced >= 1, "{rep:?}");
        assert_eq!(
            rep.multi_bound, running_multi,
            "the running lockers' multixact is kept"
        );
        l1.commit().unwrap();
        l2.commit().unwrap();
        let rep = a.vacuum(false).unwrap();
        assert_eq!(rep.multi_bound, next_multi(&e), "{rep:?}");
        e.checkpoint().unwrap();
        assert_eq!(
            oldest(),
            first_multi + 1,
            "b, never vacuumed, pins its multixact"
        );
        let rep = b.vacuum(false).unwrap();
        assert_eq!(rep.multis_replaced, 1, "{rep:?}");
        e.checkpoint().unwrap();
        assert_eq!(
            oldest(),
            next_multi(&e),
            "nothing names an old multixact any more"
        );
        assert!(e.txns().multis().members(first_multi).is_err());
        for (h, r, want) in [(&a, ra, "a1"), (&a, ra2, "x0"), (&b, rb, "b1")] {
            assert_eq!(seen(&e, h, INVALID_XID, r), Some(want.as_bytes().to_vec()));
        }
        // A new multixact after the cut, then a crash.
        exp2_transaction(&e, &a, ra, b"a2");
        let t = e.begin().unwrap();
        t.commit().unwrap();
        drop(e);
    }
    let e = open(&vfs);
    let a = Heap::open(&e, REL);
    let b = Heap::open(&e, rel_b);
    let oldest = e.txns().multis().positions().oldest_multi;
    assert!(
        oldest > first_multi + 1,
        "the cut survives the crash: {oldest}"
    );
    let u = e.begin().unwrap();
    for h in [&a, &b] {
        let snap = e.txns().snapshot(INVALID_XID);
        let mut roots = Vec::new();
        h.scan(&snap, |tid, _| roots.push(tid)).unwrap();
        for r in roots {
            assert!(h
                .update(u.xid().unwrap(), r, |d| [d, b"!"].concat())
                .unwrap()
                .is_some());
        }
    }
    u.commit().unwrap();
    let snap = e.txns().snapshot(INVALID_XID);
    let mut rows = Vec::new();
    a.scan(&snap, |_, d| rows.push(d.to_vec())).unwrap();
    b.scan(&snap, |_, d| rows.push(d.to_vec())).unwrap();
    rows.sort();
    assert_eq!(
        rows,
        vec![b"a2!".to_vec(), b"b1!".to_vec(), b"x0!".to_vec()]
    );
}

/// `try_lock_row` (NOWAIT) fails at once, naming the holder and changing nothing, where
/// `lock_row` would wait; and succeeds where it would not.
#[test]
fn try_lock_row_never_waits() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();
    let r = one_row(&e, &heap, b"v0");
    let t1 = e.begin().unwrap();
    heap.lock_row(t1.xid().unwrap(), r, RowLockMode::Share)
        .unwrap();
    let t2 = e.begin().unwrap();
    let m = next_multi(&e);
    match heap.try_lock_row(t2.xid().unwrap(), r, RowLockMode::Exclusive) {
        Err(HeapError::WouldBlock { holder }) => assert_eq!(holder, t1.xid().unwrap()),
        other => panic!("expected WouldBlock, got {other:?}"),
    }
    assert_eq!(next_multi(&e), m, "a refused lock writes nothing");
    // Share beside share is granted at once.
    assert_eq!(
        heap.try_lock_row(t2.xid().unwrap(), r, RowLockMode::Share)
            .unwrap(),
        Some(r)
    );
    // An uncommitted update blocks even a share lock.
    let t3 = e.begin().unwrap();
    let r2 = one_row(&e, &heap, b"w0");
    heap.update(t3.xid().unwrap(), r2, |_| b"w1".to_vec())
        .unwrap();
    assert!(matches!(
        heap.try_lock_row(t2.xid().unwrap(), r2, RowLockMode::Share),
        Err(HeapError::WouldBlock { .. })
    ));
    t3.commit().unwrap();
    t1.commit().unwrap();
    assert!(heap
        .try_lock_row(t2.xid().unwrap(), r2, RowLockMode::Exclusive)
        .unwrap()
        .is_some());
    assert_eq!(
        heap.try_lock_row(t2.xid().unwrap(), r, RowLockMode::Exclusive)
            .unwrap(),
        Some(r)
    );
    t2.commit().unwrap();
}
