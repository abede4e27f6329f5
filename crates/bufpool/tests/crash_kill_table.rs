//! Kill test on tables with indexes (issue 5): transfers between accounts as real
//! multi-record transactions (look the two accounts up in a unique B+tree, update both
//! rows, insert a history row and its entry in a second, non-unique B+tree, update the
//! thread's sequence row, commit) in a child process SIGKILLed at a random moment. After
//! recovery: every acknowledged transfer is there and no other; the total is conserved;
//! both trees pass their structure check; index and heap agree both ways (every visible
//! row is found through the index under its key, every index entry leads to a row with
//! that key or to an invisible version of a transaction that never committed).
//!
//! 60 kills by default, BUFPOOL_KILL_LOOPS for more. (A waiter that re-read a redirect
//! target with a stale expected xmin and lost the row showed up at round 25 and, after
//! chain compression changed the paths, at round 124: soak with 200+ after heap changes.)

use std::collections::BTreeMap;

use bufpool::index::btree::BTree;
use bufpool::table::{Heap, Tid};
use bufpool::txn::INVALID_XID;
use bufpool::{Engine, RelFileId};

mod accounts;
mod kill;

use accounts::{check_balances, decode, encode, open, rows, transfer, ACCOUNTS, INITIAL, THREADS};

const REL: RelFileId = RelFileId::new(0, 960);
const IDX: RelFileId = RelFileId::new(0, 961);
const HIST: RelFileId = RelFileId::new(0, 962);
const HIST_IDX: RelFileId = RelFileId::new(0, 963);

fn history_key(t: u64, k: u64) -> u64 {
    (t << 32) | k
}

#[test]
#[ignore = "run as a child process by table_kill_nine_loop"]
fn table_child_transfers_until_killed() {
    let dir = std::env::var("BUFPOOL_TABLE_KILL_DIR").expect("run by table_kill_nine_loop only");
    kill::abort_on_panic();
    let e = open(dir.as_ref());
    let exists = e
        .pool()
        .smgr()
        .exists(HIST_IDX, bufpool::ForkNumber::Main)
        .unwrap();
    let (heap, idx, hist, hist_idx) = if exists {
        (
            Heap::open(&e, REL),
            BTree::open(&e, IDX).unwrap(),
            Heap::open(&e, HIST),
            BTree::open(&e, HIST_IDX).unwrap(),
        )
    } else {
        let heap = Heap::create(&e, REL).unwrap();
        let idx = BTree::create(&e, IDX, true).unwrap();
        let x = e.begin_xid().unwrap();
        for id in (0..ACCOUNTS).chain(100..100 + THREADS) {
            let v = if id < ACCOUNTS { INITIAL } else { 0 };
            let tid = heap.insert(x, &encode(id, v)).unwrap();
            idx.insert(x, id as i64, tid.to_u64()).unwrap();
        }
        let hist = Heap::create(&e, HIST).unwrap();
        let hist_idx = BTree::create(&e, HIST_IDX, false).unwrap();
        e.commit_transaction(x).unwrap();
        // The set-up is durable before the first transfer (creation is not logged).
        e.checkpoint().unwrap();
        (heap, idx, hist, hist_idx)
    };
    let snap = e.txns().snapshot(INVALID_XID);
    let start_seq: Vec<u64> = (0..THREADS)
        .map(|t| {
            let tid = Tid::from_u64(idx.get((100 + t) as i64).unwrap().unwrap());
            decode(&heap.fetch(&snap, tid).unwrap().unwrap()).1 as u64
        })
        .collect();
    println!("ready");
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (e, heap, idx, hist, hist_idx) = (&e, &heap, &idx, &hist, &hist_idx);
            let mut k = start_seq[t as usize];
            s.spawn(move || loop {
                k += 1;
                let (from, to, amount) = transfer(t, k);
                let x = e.begin_xid().unwrap();
                let (first, second) = if from < to { (from, to) } else { (to, from) };
                for id in [first, second] {
                    let delta = if id == from { -amount } else { amount };
                    let tid = Tid::from_u64(idx.get(id as i64).unwrap().expect("indexed"));
                    heap.update(x, tid, |d| {
                        let (i, v) = decode(d);
                        encode(i, v + delta)
                    })
                    .unwrap()
                    .expect("account rows are never deleted");
                }
                let hk = history_key(t, k);
                let htid = hist.insert(x, &encode(hk, amount)).unwrap();
                hist_idx.insert(x, hk as i64, htid.to_u64()).unwrap();
                let tid = Tid::from_u64(idx.get((100 + t) as i64).unwrap().unwrap());
                heap.update(x, tid, |_| encode(100 + t, k as i64))
                    .unwrap()
                    .unwrap();
                e.commit_transaction(x).unwrap();
                println!("ack {t} {k}");
            });
        }
    });
}

/// Index and heap agree: every visible row is found through the index under its key
/// (exactly once: the entry holds the row's root, from which the chain leads to the
/// version the scan saw), and every entry leads to a row with its key, or to nothing
/// visible (an insert that never committed).
fn agree(e: &Engine, heap: &Heap<'_>, idx: &BTree<'_>, visible: &BTreeMap<u64, (Tid, i64)>) {
    idx.check().unwrap();
    let snap = e.txns().snapshot(INVALID_XID);
    for (&id, &(_, v)) in visible {
        let mut hits = Vec::new();
        idx.lookup(id as i64, |val| hits.push(Tid::from_u64(val)))
            .unwrap();
        let through_index: Vec<(u64, i64)> = hits
            .iter()
            .filter_map(|&t| heap.fetch(&snap, t).unwrap().map(|d| decode(&d)))
            .collect();
        assert_eq!(through_index, vec![(id, v)], "key {id} through the index");
    }
    idx.range(i64::MIN, i64::MAX, |key, val| {
        if let Some(d) = heap.fetch(&snap, Tid::from_u64(val)).unwrap() {
            assert_eq!(decode(&d).0 as i64, key, "entry {key} leads to another row");
            assert!(visible.contains_key(&(key as u64)));
        }
        true
    })
    .unwrap();
}

#[test]
fn table_kill_nine_loop() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let rounds = kill::loops(60);
    let child = kill::Child {
        test: "table_child_transfers_until_killed",
        dir_var: "BUFPOOL_TABLE_KILL_DIR",
        dir: dir.path(),
        threads: THREADS as usize,
    };
    let total = kill::kill_loop(&child, rounds, 30, 0x8765_4321, |round, acked| {
        let e = open(dir.path());
        let heap = Heap::open(&e, REL);
        let idx = BTree::open(&e, IDX).unwrap();
        let hist = Heap::open(&e, HIST);
        let hist_idx = BTree::open(&e, HIST_IDX).unwrap();
        let now = rows(&e, &heap);
        let mut expect_hist = BTreeMap::new();
        check_balances(round, &now, acked, |t, k, amount| {
            expect_hist.insert(history_key(t, k), amount);
        });
        let hist_rows = rows(&e, &hist);
        let got: BTreeMap<u64, i64> = hist_rows.iter().map(|(&k, &(_, v))| (k, v)).collect();
        assert_eq!(
            got, expect_hist,
            "round {round}: history is exactly the committed transfers"
        );
        agree(&e, &heap, &idx, &now);
        agree(&e, &hist, &hist_idx, &hist_rows);
    });
    eprintln!("table_kill_nine_loop: {rounds} kills, {total} acknowledged transfers");
    assert!(total >= u64::from(rounds));
}
