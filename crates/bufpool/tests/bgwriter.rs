//! The background writer racing real backends, and the engine's handling of its thread.
//!
//! Proves: with every `bgwriter_strategy`, rounds running back to back against backends
//! that update pages of a relation four times the pool's size lose no update (after a
//! flush, storage holds every increment), leave the pool consistent, and count every
//! write as the bgwriter's; the engine starts the thread when `bgwriter = on` (not when off) and
//! `shutdown` stops it. How: the rounds run on their own thread through the synchronous
//! API (`BufferPool::bgwriter_round`) until the backends are done, so the test depends on
//! no timing; every increment is counted by the backend that made it.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bufpool::config::BgwriterStrategy;
use bufpool::table::Heap;
use bufpool::{Config, Engine, ForkNumber, IoOp, IoWriter, MemVfs, RelFileId, Vfs};
use common::*;

const PAGES: u32 = 256;
const WORKERS: u64 = 3;
const UPDATES: u64 = 1500;

fn race(strategy: BgwriterStrategy) {
    let mut c = config("64");
    c.bgwriter_strategy = strategy;
    let pool = Arc::new(open(
        Arc::new(MemVfs::new()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &c,
    ));
    fill(&pool, PAGES);
    let expected: Arc<Vec<AtomicU64>> = Arc::new((0..PAGES).map(|_| AtomicU64::new(0)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let rounds = {
        let (pool, done) = (pool.clone(), done.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !done.load(Ordering::Acquire) {
                let r = pool.bgwriter_round();
                assert_eq!(r.write_errors, 0, "{r:?}");
                n += 1;
            }
            n
        })
    };
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (pool, expected) = (pool.clone(), expected.clone());
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ w;
                for _ in 0..UPDATES {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let block = (x % u64::from(PAGES)) as u32;
                    let buf = pool.read(tag(block)).unwrap();
                    let mut g = buf.write();
                    let v = get_u64(&g, BODY + 8);
                    put_u64(&mut g, BODY + 8, v + 1);
                    expected[block as usize].fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    let n = rounds.join().unwrap();
    assert!(n > 0);
    pool.check_consistency().unwrap();
    let stats = pool.bgwriter_stats();
    assert_eq!(stats.rounds, n);
    assert_eq!(
        stats.buffers_clean,
        pool.stats().by_writer(IoWriter::Bgwriter, IoOp::Write),
        "{strategy:?}: every bgwriter write is counted as the bgwriter's"
    );
    pool.flush_all().unwrap();
    pool.drop_buffers(REL, None, 0).unwrap();
    for b in 0..PAGES {
        let buf = pool.read(tag(b)).unwrap();
        let g = buf.read();
        assert_eq!(get_u64(&g, BODY), u64::from(b));
        assert_eq!(
            get_u64(&g, BODY + 8),
            expected[b as usize].load(Ordering::Relaxed),
            "{strategy:?}: block {b} lost an update"
        );
    }
}

#[test]
fn rounds_racing_backends_lose_no_update_lru() {
    race(BgwriterStrategy::Lru);
}

#[test]
fn rounds_racing_backends_lose_no_update_dirty_chain() {
    race(BgwriterStrategy::DirtyChain);
}

#[test]
fn rounds_racing_backends_lose_no_update_mini_checkpoint() {
    race(BgwriterStrategy::MiniCheckpoint);
}

#[test]
fn rounds_racing_backends_lose_no_update_victim_queue() {
    race(BgwriterStrategy::VictimQueue);
}

#[test]
fn the_engine_runs_the_thread_only_when_switched_on() {
    let rel = RelFileId::new(0, 16384);
    for on in [true, false] {
        let vfs: Arc<dyn Vfs> = Arc::new(MemVfs::new());
        let c = Config::builder()
            .shared_buffers_count(64)
            .bgwriter(on)
            .bgwriter_delay(std::time::Duration::from_millis(10))
            .build()
            .unwrap();
        let e = Engine::open_vfs(vfs.clone(), Path::new("/db"), &c, true).unwrap();
        assert_eq!(e.bgwriter_running(), on);
        let heap = Heap::create(&e, rel).unwrap();
        let x = e.begin_xid().unwrap();
        for i in 0..2000u32 {
            heap.insert(x, &i.to_le_bytes().repeat(20)).unwrap();
        }
        e.commit_transaction(x).unwrap();
        e.shutdown().unwrap();
        let e = Engine::open_vfs(vfs, Path::new("/db"), &c, false).unwrap();
        assert!(e.pool().nblocks(rel, ForkNumber::Main).unwrap() > 20);
        if !on {
            assert_eq!(e.bgwriter_stats().rounds, 0);
        }
        drop(e); // like a crash: the thread is stopped by the drop
    }
}
