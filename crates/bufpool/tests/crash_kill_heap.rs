//! Kill test on a heap table: transfers as real multi-record transactions (begin, update
//! one account row, update another, commit) in a child process that is SIGKILLed at a
//! random moment. After recovery a fresh snapshot must show every acknowledged transfer,
//! no half-applied one (redo replays uncommitted changes physically; visibility must hide
//! them), and the total conserved.
//!
//! 20 kills by default; BUFPOOL_KILL_LOOPS for more. Accounts are rows (id, balance); each
//! thread also keeps a row (100 + t, last acknowledged sequence) updated in the same
//! transaction, so the verifier knows exactly which transfers committed.

use std::path::Path;
use std::sync::Arc;

use bufpool::table::{Heap, Tid};
use bufpool::txn::INVALID_XID;
use bufpool::{Config, Engine, RealVfs, RelFileId};

mod kill;

const REL: RelFileId = RelFileId::new(0, 950);
const ACCOUNTS: u64 = 40;
const THREADS: u64 = 4;
const INITIAL: i64 = 1000;

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "16").unwrap();
    c.set("wal_segment_size", "1MB").unwrap();
    c
}

fn encode(id: u64, v: i64) -> Vec<u8> {
    let mut r = id.to_le_bytes().to_vec();
    r.extend_from_slice(&v.to_le_bytes());
    r.extend_from_slice(&[0u8; 84]);
    r
}

fn decode(d: &[u8]) -> (u64, i64) {
    (
        u64::from_le_bytes(d[0..8].try_into().unwrap()),
        i64::from_le_bytes(d[8..16].try_into().unwrap()),
    )
}

/// Transfer k of thread t: (from, to, amount), a pure function.
fn transfer(t: u64, k: u64) -> (u64, u64, i64) {
    let h = kill::mix((t << 40) ^ k);
    let from = h % ACCOUNTS;
    let to = (from + 1 + (h >> 20) % (ACCOUNTS - 1)) % ACCOUNTS;
    (from, to, ((h >> 40) % 50) as i64 + 1)
}

/// Current rows visible to a fresh snapshot: id -> (tid, value).
fn rows(e: &Engine, heap: &Heap<'_>) -> std::collections::BTreeMap<u64, (Tid, i64)> {
    let snap = e.txns().snapshot(INVALID_XID);
    let mut m = std::collections::BTreeMap::new();
    heap.scan(&snap, |tid, d| {
        let (id, v) = decode(d);
        assert!(m.insert(id, (tid, v)).is_none(), "row {id} visible twice");
    })
    .unwrap();
    m
}

fn open(dir: &Path) -> Engine {
    Engine::open(Arc::new(RealVfs::new()), dir, &config(), true).unwrap()
}

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
        let x = e.begin().unwrap();
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
                    let x = e.begin().unwrap();
                    // Lock rows in id order so no two transfers wait on each other in a cycle.
                    let (first, second) = if from < to { (from, to) } else { (to, from) };
                    for id in [first, second] {
                        let delta = if id == from { -amount } else { amount };
                        heap.update(x, tid_of(id), |d| {
                            let (i, v) = decode(d);
                            encode(i, v + delta)
                        })
                        .unwrap()
                        .expect("account rows are never deleted");
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
        let now = rows(&e, &heap);
        let mut expect = vec![INITIAL; ACCOUNTS as usize];
        for t in 0..THREADS {
            let seq = now[&(100 + t)].1 as u64;
            assert!(
                seq >= acked[t as usize],
                "round {round}: thread {t} acked {} but recovered {seq}",
                acked[t as usize]
            );
            for k in 1..=seq {
                let (from, to, amount) = transfer(t, k);
                expect[from as usize] -= amount;
                expect[to as usize] += amount;
            }
        }
        for id in 0..ACCOUNTS {
            assert_eq!(
                now[&id].1, expect[id as usize],
                "round {round}: account {id}"
            );
        }
        assert_eq!(expect.iter().sum::<i64>(), INITIAL * ACCOUNTS as i64);
    });
    eprintln!("heap_kill_nine_loop: {rounds} kills, {total} acknowledged multi-record transfers");
    assert!(total >= u64::from(rounds));
}
