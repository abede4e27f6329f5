//! The accounts workload shared by the heap and table kill tests: 40 account rows of
//! (id, balance) plus one sequence row per thread (id 100 + t), transfers drawn as a pure
//! function of (thread, sequence number), and the helpers to open, read and check them.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bufpool::table::{Heap, Tid};
use bufpool::txn::INVALID_XID;
use bufpool::{Config, Engine, RealVfs};

pub const ACCOUNTS: u64 = 40;
pub const THREADS: u64 = 4;
pub const INITIAL: i64 = 1000;

/// A 16-buffer pool, so pages are evicted, and small WAL segments.
pub fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "16").unwrap();
    c.set("wal_segment_size", "1MB").unwrap();
    c
}

pub fn open(dir: &Path) -> Engine {
    Engine::open_vfs(Arc::new(RealVfs::new()), dir, &config(), true).unwrap()
}

/// A pgbench-like 100-byte row: id, value, filler.
pub fn encode(id: u64, v: i64) -> Vec<u8> {
    let mut r = id.to_le_bytes().to_vec();
    r.extend_from_slice(&v.to_le_bytes());
    r.extend_from_slice(&[0u8; 84]);
    r
}

pub fn decode(d: &[u8]) -> (u64, i64) {
    (
        u64::from_le_bytes(d[0..8].try_into().unwrap()),
        i64::from_le_bytes(d[8..16].try_into().unwrap()),
    )
}

/// Transfer k of thread t: (from, to, amount), a pure function.
pub fn transfer(t: u64, k: u64) -> (u64, u64, i64) {
    let h = crate::kill::mix((t << 40) ^ k);
    let from = h % ACCOUNTS;
    let to = (from + 1 + (h >> 20) % (ACCOUNTS - 1)) % ACCOUNTS;
    (from, to, ((h >> 40) % 50) as i64 + 1)
}

/// Visible rows of a heap for a fresh snapshot, by id: (stable tid, value). A row visible
/// twice fails the test.
pub fn rows(e: &Engine, heap: &Heap<'_>) -> BTreeMap<u64, (Tid, i64)> {
    let snap = e.txns().snapshot(INVALID_XID);
    let mut m = BTreeMap::new();
    heap.scan(&snap, |tid, d| {
        let (id, v) = decode(d);
        assert!(m.insert(id, (tid, v)).is_none(), "row {id} visible twice");
    })
    .unwrap();
    m
}

/// Checks the recovered rows after a kill: each thread's sequence row covers every ack,
/// and every balance is exactly the initial one plus the transfers up to those sequence
/// numbers (so the total is conserved). Calls `each(t, k, amount)` for every transfer that
/// committed.
pub fn check_balances(
    round: u32,
    now: &BTreeMap<u64, (Tid, i64)>,
    acked: &[u64],
    mut each: impl FnMut(u64, u64, i64),
) {
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
            each(t, k, amount);
        }
    }
    for id in 0..ACCOUNTS {
        assert_eq!(
            now[&id].1, expect[id as usize],
            "round {round}: account {id}"
        );
    }
    assert_eq!(expect.iter().sum::<i64>(), INITIAL * ACCOUNTS as i64);
}
