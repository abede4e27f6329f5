//! Online resize of the pool (`BufferPool::resize`, `Engine::resize_pool`).
//!
//! Proves: a shrink writes every dirty page of the buffers it gives up before unmapping
//! them, so every page reads back as last written; the pool reports its new size and its
//! invariants hold (the retired tail pinned by the pool, off every chain); a grow hands
//! the buffers out again; a buffer pinned past the wait stops a shrink where it stands,
//! with the page named and the pool consistent at the size reached; sizes outside 16 to
//! `max_shared_buffers` are refused naming the knob; and threads reading and
//! incrementing pages while the pool is shrunk and grown again and again lose no update.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bufpool::{BufferError, BufferPool, Config, Engine, ForkNumber, IoOp, MemVfs, Vfs};
use common::*;

const WAIT: Duration = Duration::from_secs(10);

fn resizable(shared: &str, max: &str) -> Config {
    let mut c = config(shared);
    c.set("max_shared_buffers", max).unwrap();
    c.set("block_size", "4kB").unwrap();
    c
}

fn pool(shared: &str, max: &str) -> (MemVfs, BufferPool) {
    pool_with(shared, max, "clock")
}

fn pool_with(shared: &str, max: &str, policy: &str) -> (MemVfs, BufferPool) {
    let vfs = MemVfs::new();
    let mut c = resizable(shared, max);
    c.set("buffer_replacement", policy).unwrap();
    let p = open(Arc::new(vfs.clone()) as Arc<dyn Vfs>, Path::new("/db"), &c);
    (vfs, p)
}

/// Overwrites page `b`'s payload with `v`, leaving it dirty in the pool.
fn set(p: &BufferPool, b: u32, v: u64) {
    let buf = p.read(tag(b)).unwrap();
    put_u64(&mut buf.write(), BODY, v);
}

fn value(p: &BufferPool, b: u32) -> u64 {
    get_u64(&p.read(tag(b)).unwrap().read(), BODY)
}

#[test]
fn shrink_writes_what_it_gives_up_and_grow_hands_it_out_again() {
    let (_vfs, p) = pool("64", "256");
    assert_eq!((p.nbuffers(), p.max_nbuffers()), (64, 256));
    fill(&p, 200);
    // 64 dirty pages in the pool, most of them in the buffers a shrink gives up.
    for b in 136..200 {
        set(&p, b, 1000 + u64::from(b));
    }
    let before = p.stats();
    let r = p.resize(16, WAIT).unwrap();
    assert_eq!((r.from_buffers, r.to_buffers), (64, 16));
    assert_eq!(p.nbuffers(), 16);
    assert_eq!(p.memory().buffers, 16);
    assert!(r.written >= 40, "{r:?}: 48 of 64 dirty buffers given up");
    assert!(r.evicted >= r.written, "{r:?}");
    assert!(p.stats().total(IoOp::Write) >= before.total(IoOp::Write) + r.written as u64);
    p.check_invariants().unwrap();
    let used = p.buffercache();
    assert_eq!(used.len(), 16, "only buffers in use are listed");
    assert!(used.iter().all(|row| row.buffer < 16));
    // Nothing lost: every page reads back as last written, through 16 buffers.
    for b in 0..200 {
        let want = if b >= 136 {
            1000 + u64::from(b)
        } else {
            u64::from(b)
        };
        assert_eq!(value(&p, b), want, "page {b}");
    }
    p.check_invariants().unwrap();
    // Grown: all 200 pages fit again, so a second pass reads nothing from storage.
    let r = p.resize(256, WAIT).unwrap();
    assert_eq!((r.from_buffers, r.to_buffers, r.written), (16, 256, 0));
    for b in 0..200 {
        value(&p, b);
    }
    let reads = p.stats().total(IoOp::Read);
    for b in 0..200 {
        value(&p, b);
    }
    assert_eq!(
        p.stats().total(IoOp::Read),
        reads,
        "200 pages stay in 256 buffers"
    );
    assert_eq!(p.buffercache().len(), 256);
    p.check_invariants().unwrap();
}

#[test]
fn a_pinned_buffer_stops_a_shrink_where_it_stands() {
    let (_vfs, p) = pool("64", "64");
    fill(&p, 64);
    for b in 0..64 {
        value(&p, b);
    }
    let rows = p.buffercache();
    let (held, id) = rows
        .iter()
        .find(|r| r.buffer == 40)
        .map(|r| (r.tag.unwrap(), r.buffer))
        .unwrap();
    let pin = p.read(held).unwrap();
    let err = p.resize(16, Duration::from_millis(50)).unwrap_err();
    match &err {
        BufferError::Pinned { tag, .. } => assert_eq!(*tag, held),
        other => panic!("expected Pinned, got {other}"),
    }
    assert_eq!(
        p.nbuffers(),
        id as usize + 1,
        "everything above buffer 40 given up"
    );
    drop(pin);
    p.check_invariants().unwrap();
    assert_eq!(value(&p, held.block), u64::from(held.block));
    let r = p.resize(16, WAIT).unwrap();
    assert_eq!((r.from_buffers, r.to_buffers), (41, 16));
    p.check_invariants().unwrap();
}

/// Proves: a grown pool hands out its lowest new buffers first, so pages pack below any
/// later, smaller size and a shrink back finds the top empty (nothing to write or drop).
#[test]
fn a_grown_pool_fills_from_its_lowest_new_buffer() {
    let (_vfs, p) = pool("16", "64");
    fill(&p, 40);
    p.resize(64, WAIT).unwrap();
    for b in 0..24 {
        value(&p, b);
    }
    let used: Vec<u32> = p
        .buffercache()
        .iter()
        .filter(|r| r.tag.is_some())
        .map(|r| r.buffer)
        .collect();
    assert!(used.iter().all(|&b| b < 40), "buffers in use: {used:?}");
    let r = p.resize(40, WAIT).unwrap();
    assert_eq!((r.written, r.evicted), (0, 0), "{r:?}");
}

#[test]
fn sizes_outside_the_range_are_refused_naming_the_knob() {
    let (_vfs, p) = pool("64", "128");
    for n in [15, 129] {
        match p.resize(n, WAIT).unwrap_err() {
            BufferError::Config(e) => {
                assert_eq!(e.knob, "shared_buffers");
                assert!(e.allowed.contains("16 to 128"), "{e}");
            }
            other => panic!("{n}: {other}"),
        }
    }
    assert_eq!(p.nbuffers(), 64);
    let mut c = config("64");
    let e = c.set("max_shared_buffers", "32").err();
    let e = e
        .or_else(|| c.validate().err())
        .expect("32 < shared_buffers is refused");
    assert_eq!(e.knob, "max_shared_buffers");
    assert!(e.to_string().contains("shared_buffers"), "{e}");
    c.set("max_shared_buffers", "auto").unwrap();
    assert_eq!(c.get("max_shared_buffers").unwrap(), "auto");
    for bad in ["0", "1.5", "-1"] {
        let e = c.set("resize_duty_cycle", bad).unwrap_err();
        assert_eq!(e.knob, "resize_duty_cycle", "{bad}");
    }
    c.set("resize_duty_cycle", "1").unwrap();
}

#[test]
fn updates_survive_resizes_while_threads_run() {
    for policy in ["clock", "sieve", "s3fifo", "car", "2q", "cooling"] {
        updates_survive_resizes(policy);
    }
}

fn updates_survive_resizes(policy: &str) {
    const PAGES: u32 = 300;
    let (_vfs, p) = pool_with("64", "512", policy);
    fill(&p, PAGES);
    let p = Arc::new(p);
    let stop = Arc::new(AtomicBool::new(false));
    let added = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..3u32)
        .map(|t| {
            let (p, stop, added) = (p.clone(), stop.clone(), added.clone());
            std::thread::spawn(move || {
                let mut x = 0x9E37_79B9u32.wrapping_mul(t + 1);
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    let b = x % PAGES;
                    let buf = p.read(tag(b)).unwrap();
                    let mut g = buf.write();
                    let v = get_u64(&g, BODY + 8);
                    put_u64(&mut g, BODY + 8, v + 1);
                    added.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut sizes = 0;
    for n in [16, 512, 100, 300, 16, 40, 512, 64, 200, 17] {
        // Each size is reached while the workers run; some wait for a worker's pin.
        let r = p.resize(n, WAIT).unwrap();
        assert_eq!((r.to_buffers, p.nbuffers()), (n, n));
        sizes += 1;
        std::thread::yield_now();
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(sizes, 10);
    p.check_invariants()
        .unwrap_or_else(|e| panic!("{policy}: {e}"));
    let total: u64 = (0..PAGES)
        .map(|b| get_u64(&p.read(tag(b)).unwrap().read(), BODY + 8))
        .sum();
    assert_eq!(
        total,
        added.load(Ordering::Relaxed),
        "{policy}: an increment was lost"
    );
    // And on storage, after a flush: the pages the shrinks wrote were not stale.
    p.flush_all().unwrap();
    p.resize(16, WAIT).unwrap();
    let p2 = {
        p.drop_buffers(REL, Some(ForkNumber::Main), 0).unwrap();
        p
    };
    let total: u64 = (0..PAGES)
        .map(|b| get_u64(&p2.read(tag(b)).unwrap().read(), BODY + 8))
        .sum();
    assert_eq!(total, added.load(Ordering::Relaxed));
}

#[test]
fn the_engine_resizes_in_bytes_within_max_shared_buffers() {
    let vfs = MemVfs::new();
    let mut c = config("1MB");
    c.set("max_shared_buffers", "4MB").unwrap();
    c.set("wal_segment_size", "1MB").unwrap();
    let e = Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &c,
        true,
    )
    .unwrap();
    let page = e.pool().page_size() as u64;
    assert_eq!(e.pool().nbuffers() as u64 * page, 1 << 20);
    let r = e.resize_pool(4 << 20).unwrap();
    assert_eq!(r.to_buffers as u64 * page, 4 << 20);
    let r = e.resize_pool(256 << 10).unwrap();
    assert_eq!(r.to_buffers as u64 * page, 256 << 10);
    assert!(matches!(
        e.resize_pool(8 << 20),
        Err(bufpool::EngineError::Buffer(BufferError::Config(_)))
    ));
    e.pool().check_invariants().unwrap();
}
