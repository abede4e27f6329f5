//! Kill test on a heap table: transfers as real multi-record transactions (begin, update
//! one account row, update another, commit) in a child process that is SIGKILLed at a
//! random moment. After recovery a fresh snapshot must show every acknowledged transfer,
//! no half-applied one (redo replays uncommitted changes physically; visibility must hide
//! them), and the total conserved.
//!
//! Every other transfer is seed 002's experiment 2 shape: it locks its two account rows FOR
//! UPDATE, updates them in a savepoint (so their xmax becomes a multixact of the lock and
//! the update), and threads other than 0 share-lock thread 0's sequence row before their
//! own (more multixacts, lock-only): after each kill, recovery must be able to read every
//! multixact a surviving tuple names, and the dead lockers must hold nothing.
//!
//! 20 kills by default; BUFPOOL_KILL_LOOPS for more. Accounts are rows (id, balance); each
//! thread also keeps a row (100 + t, last acknowledged sequence) updated in the same
//! transaction, so the verifier knows exactly which transfers committed.

use bufpool::table::{Heap, RowLockMode};
use bufpool::RelFileId;

mod accounts;
mod kill;

use accounts::{check_balances, decode, encode, open, rows, transfer, ACCOUNTS, INITIAL, THREADS};

const REL: RelFileId = RelFileId::new(0, 950);

#[test]
#[ignore = "run as a child process by heap_kill_nine_loop"]
fn heap_child_transfers_until_killed() {
    let dir = std::env::var("BUFPOOL_HEAP_KILL_DIR").expect("run by heap_kill_nine_loop only");
    kill::abort_on_panic();
    let e = open(dir.as_ref());
    let heap = if e
        .pool()
        .smgr()
        .exists(REL, bufpool::ForkNumber::Main)
        .unwrap()
    {
        Heap::open(&e, REL)
    } else {
        let heap = Heap::create(&e, REL).unwrap();
        let x = e.begin_xid().unwrap();
        for id in 0..ACCOUNTS {
            heap.insert(x, &encode(id, INITIAL)).unwrap();
        }
        for t in 0..THREADS {
            heap.insert(x, &encode(100 + t, 0)).unwrap();
        }
        e.commit_transaction(x).unwrap();
        heap
    };
    let start = rows(&e, &heap);
    println!("ready");
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (e, heap, start) = (&e, &heap, &start);
            s.spawn(move || {
                let mut k = start[&(100 + t)].1 as u64;
                // Tids go stale as rows move; updates follow the chain from any old tid.
                let tid_of = |id: u64| start[&id].0;
                loop {
                    k += 1;
                    let (from, to, amount) = transfer(t, k);
                    let x = e.begin_xid().unwrap();
                    // Lock rows in id order so no two transfers wait on each other in a cycle
                    // (every lock and update below goes in ascending id order).
                    let (first, second) = if from < to { (from, to) } else { (to, from) };
                    let locks = k % 2 == 1;
                    let mut w = x;
                    if locks {
                        for id in [first, second] {
                            heap.lock_row(x, tid_of(id), RowLockMode::Exclusive)
                                .unwrap()
                                .expect("account rows are never deleted");
                        }
                        w = e.begin_subtransaction(x).unwrap();
                    }
                    for id in [first, second] {
                        let delta = if id == from { -amount } else { amount };
                        heap.update(w, tid_of(id), |d| {
                            let (i, v) = decode(d);
                            encode(i, v + delta)
                        })
                        .unwrap()
                        .expect("account rows are never deleted");
                    }
                    if locks && t != 0 {
                        heap.lock_row(x, tid_of(100), RowLockMode::Share)
                            .unwrap()
                            .unwrap();
                    }
                    heap.update(x, tid_of(100 + t), |_| encode(100 + t, k as i64))
                        .unwrap()
                        .unwrap();
                    e.commit_transaction(x).unwrap();
                    println!("ack {t} {k}");
                }
            });
        }
    });
}

#[test]
fn heap_kill_nine_loop() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let rounds = kill::loops(20);
    let child = kill::Child {
        test: "heap_child_transfers_until_killed",
        dir_var: "BUFPOOL_HEAP_KILL_DIR",
        dir: dir.path(),
        threads: THREADS as usize,
    };
    let total = kill::kill_loop(&child, rounds, 30, 0x1234_5678, |round, acked| {
        // Verify: sequences cover every ack; balances are exactly the committed transfers.
        let e = open(dir.path());
        let heap = Heap::open(&e, REL);
        check_balances(round, &rows(&e, &heap), acked, |_, _, _| {});
    });
    eprintln!("heap_kill_nine_loop: {rounds} kills, {total} acknowledged multi-record transfers");
    assert!(total >= u64::from(rounds));
}
