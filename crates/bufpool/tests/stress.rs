//! Many threads on a pool four times smaller than the data.
//!
//! Proves: no reader sees a wrong tag, a torn page or a lost update, and after flush-all and
//! reopen every page holds its last version. How: each page stores its own tag and a
//! version; the rest of the page is a pattern derived from (block, version), so a torn or
//! misplaced page fails the check. Writers bump the version under the exclusive lock and
//! count their bumps per page in atomics; at the end version == bumps for every page.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bufpool::{IoOp, RealVfs};
use common::*;
use rand::{Rng, SeedableRng};

const THREADS: usize = 8;
const POOL_BUFFERS: u32 = 64;
const PAGES: u32 = POOL_BUFFERS * 4;
const OPS_PER_THREAD: usize = 6_000;

fn stamp(page: &mut [u8], block: u32, version: u64) {
    put_u64(page, BODY, u64::from(block));
    put_u64(page, BODY + 8, version);
    let seed = (u64::from(block) << 32) ^ version;
    for (i, b) in page[BODY + 16..].iter_mut().enumerate() {
        *b = (seed
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left((i % 61) as u32)
            >> 56) as u8
            ^ i as u8;
    }
}

fn check(page: &[u8], block: u32) -> u64 {
    assert_eq!(
        get_u64(page, BODY),
        u64::from(block),
        "page holds another block's contents"
    );
    let version = get_u64(page, BODY + 8);
    let mut expect = page.to_vec();
    stamp(&mut expect, block, version);
    assert!(
        expect[BODY..] == page[BODY..],
        "torn page: block {block} version {version}"
    );
    version
}

#[test]
fn eight_threads_read_and_update_a_relation_four_times_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(&POOL_BUFFERS.to_string());
    let bumps: Arc<Vec<AtomicU64>> = Arc::new((0..PAGES).map(|_| AtomicU64::new(0)).collect());
    {
        let pool = Arc::new(open(Arc::new(RealVfs::new()), dir.path(), &c));
        pool.create_relation(REL, bufpool::ForkNumber::Main)
            .unwrap();
        for b in 0..PAGES {
            let buf = pool.extend(REL, bufpool::ForkNumber::Main).unwrap();
            let mut g = buf.write();
            bufpool::page::init(&mut g, 0);
            stamp(&mut g, b, 0);
        }
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (pool, bumps) = (pool.clone(), bumps.clone());
                s.spawn(move || {
                    let mut rng = rand::rngs::SmallRng::seed_from_u64(t as u64);
                    for _ in 0..OPS_PER_THREAD {
                        let block = rng.random_range(0..PAGES);
                        let buf = pool.read(tag(block)).unwrap();
                        assert_eq!(buf.tag(), tag(block));
                        if rng.random_bool(0.3) {
                            let mut g = buf.write();
                            let v = check(&g, block);
                            stamp(&mut g, block, v + 1);
                            bumps[block as usize].fetch_add(1, Ordering::Relaxed);
                        } else {
                            let g = buf.read();
                            let v = check(&g, block);
                            // Versions only grow: a lost update would show as a lower one later.
                            assert!(v <= bumps[block as usize].load(Ordering::Relaxed));
                        }
                    }
                });
            }
        });
        for b in 0..PAGES {
            let buf = pool.read(tag(b)).unwrap();
            assert_eq!(
                check(&buf.read(), b),
                bumps[b as usize].load(Ordering::Relaxed)
            );
        }
        let stats = pool.stats();
        assert!(
            stats.total(IoOp::Eviction) > 1000,
            "the pool should have been under pressure"
        );
        assert!(stats.total(IoOp::Write) > 0);
        pool.flush_all().unwrap();
        pool.sync().unwrap();
        pool.check_invariants().unwrap();
    }
    let pool = open(Arc::new(RealVfs::new()), dir.path(), &c);
    for b in 0..PAGES {
        let buf = pool.read(tag(b)).unwrap();
        assert_eq!(
            check(&buf.read(), b),
            bumps[b as usize].load(Ordering::Relaxed),
            "block {b} after reopen"
        );
    }
    assert_eq!(pool.stats().total(IoOp::Read), u64::from(PAGES));
}

/// Many readers of one page that is not in the pool: exactly one read reaches storage.
#[test]
fn concurrent_readers_of_a_missing_page_share_one_read() {
    let dir = tempfile::tempdir().unwrap();
    let c = config("16");
    let pool = open(Arc::new(RealVfs::new()), dir.path(), &c);
    fill(&pool, 4);
    for round in 0..50 {
        pool.drop_buffers(REL, None, 0).unwrap();
        let before = pool.stats().total(IoOp::Read);
        let barrier = std::sync::Barrier::new(4);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    barrier.wait();
                    let b = pool.read(tag(2)).unwrap();
                    assert_eq!(get_u64(&b.read(), BODY), 2);
                });
            }
        });
        assert_eq!(pool.stats().total(IoOp::Read) - before, 1, "round {round}");
    }
}
