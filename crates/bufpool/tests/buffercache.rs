//! The buffer-cache views (pg_buffercache's rows, summary and usage counts) and the evict
//! and mark-dirty functions.
//!
//! Proves: each row shows the page, dirtiness, usage count, pins and loading ring the
//! buffer has; the summaries add up to the pool; eviction writes a dirty page before
//! unmapping it (nothing lost), leaves a page someone else pins, and counts what it did;
//! mark-dirty dirties without changing bytes; and views and evictions running beside
//! writers lose no update and leave the pool consistent.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bufpool::buffer::ring::{Ring, RingKind};
use bufpool::{BufferError, BufferPool, ForkNumber, IoContext, IoOp, IoWriter, MemVfs, Vfs};
use common::*;

fn pool(buffers: &str, pages: u32) -> BufferPool {
    let vfs = Arc::new(MemVfs::new()) as Arc<dyn Vfs>;
    let p = open(vfs, Path::new("/db"), &config(buffers));
    fill(&p, pages);
    p
}

fn reads(p: &BufferPool) -> u64 {
    p.stats()
        .get(IoWriter::Backend, IoContext::Normal, IoOp::Read)
}

#[test]
fn rows_show_each_buffers_page_dirtiness_usage_and_pins() {
    let p = pool("32", 8);
    p.evict_all().unwrap();
    let pinned = p.read(tag(3)).unwrap();
    {
        let b = p.read(tag(5)).unwrap();
        put_u64(&mut b.write(), BODY + 8, 7);
    }
    let _again = p.read(tag(5)).unwrap();
    let rows = p.buffercache();
    assert_eq!(rows.len(), 32);
    let row_of = |block| {
        rows.iter()
            .find(|r| r.tag.is_some_and(|t| t.block == block))
            .unwrap_or_else(|| panic!("block {block} has no row"))
    };
    let r3 = row_of(3);
    assert_eq!(r3.buffer, pinned.buffer_id());
    assert_eq!((r3.pinning_backends, r3.isdirty), (1, false));
    let r5 = row_of(5);
    assert!(r5.isdirty);
    assert_eq!(r5.usagecount, 2, "read twice");
    assert_eq!(r5.pinning_backends, 1);
    assert_eq!(r5.ring, None);
    assert_eq!(rows.iter().filter(|r| r.tag.is_some()).count(), 2);
    let unused = rows.iter().find(|r| r.tag.is_none()).unwrap();
    assert_eq!((unused.isdirty, unused.pinning_backends), (false, 0));

    let s = p.buffercache_summary();
    assert_eq!((s.buffers_used, s.buffers_unused), (2, 30));
    assert_eq!((s.buffers_dirty, s.buffers_pinned), (1, 2));
    assert!(
        (s.usagecount_avg - 1.5).abs() < 1e-9,
        "{}",
        s.usagecount_avg
    );
    let counts = p.buffercache_usage_counts();
    assert_eq!(counts.iter().map(|r| r.buffers).sum::<u64>(), 32);
    assert_eq!(
        (counts[0].buffers, counts[1].buffers, counts[2].buffers),
        (30, 1, 1)
    );
    assert_eq!((counts[2].dirty, counts[2].pinned), (1, 1));
}

#[test]
fn rows_name_the_ring_that_loaded_a_page() {
    let p = pool("128", 40);
    p.evict_all().unwrap();
    let mut ring = Ring::new(RingKind::BulkRead, 256 * 1024, &p).expect("a ring");
    for b in 0..20 {
        drop(p.read_with(tag(b), Some(&mut ring)).unwrap());
    }
    drop(p.read(tag(30)).unwrap());
    let rows = p.buffercache();
    let by_ring = rows
        .iter()
        .filter(|r| r.ring == Some(RingKind::BulkRead))
        .count();
    assert!(
        by_ring > 0 && by_ring <= 20,
        "{by_ring} rows loaded by the ring"
    );
    let plain = rows.iter().find(|r| r.tag == Some(tag(30))).unwrap();
    assert_eq!(plain.ring, None);
    assert_eq!(
        p.pool_shape().by_ring[RingKind::BulkRead as usize],
        by_ring as u64
    );
    // Once the ring's pages are evicted and their buffers reloaded without a ring, the
    // mark has gone with the old pages.
    p.evict_all().unwrap();
    for b in 0..40 {
        drop(p.read(tag(b)).unwrap());
    }
    let rows = p.buffercache();
    assert_eq!(rows.iter().filter(|r| r.tag.is_some()).count(), 40);
    assert!(rows.iter().all(|r| r.ring.is_none()));
}

#[test]
fn eviction_writes_a_dirty_page_first_and_counts_what_it_did() {
    let p = pool("32", 8);
    p.evict_all().unwrap();
    let id = {
        let b = p.read(tag(2)).unwrap();
        put_u64(&mut b.write(), BODY, 99);
        b.buffer_id()
    };
    let clean = p.read(tag(4)).unwrap().buffer_id();
    let o = p.evict_buffer(id).unwrap();
    assert!(o.buffer_evicted && o.buffer_flushed, "{o:?}");
    let o = p.evict_buffer(clean).unwrap();
    assert!(o.buffer_evicted && !o.buffer_flushed, "{o:?}");
    let o = p.evict_buffer(clean).unwrap();
    assert!(!o.buffer_evicted, "an unused buffer: {o:?}");
    assert_eq!(p.buffercache_summary().buffers_used, 0);
    let before = reads(&p);
    assert_eq!(get_u64(&p.read(tag(2)).unwrap().read(), BODY), 99);
    assert_eq!(
        reads(&p),
        before + 1,
        "the evicted page came back from storage"
    );
    p.check_invariants().unwrap();
}

#[test]
fn a_page_someone_else_pins_is_not_evicted() {
    let p = pool("32", 8);
    let held = p.read(tag(1)).unwrap();
    let o = p.evict_buffer(held.buffer_id()).unwrap();
    assert!(!o.buffer_evicted, "{o:?}");
    let c = p.evict_relation(REL).unwrap();
    assert_eq!((c.buffers_evicted, c.buffers_skipped), (7, 1), "{c:?}");
    assert_eq!(held.tag(), tag(1));
    assert_eq!(get_u64(&held.read(), BODY), 1);
    drop(held);
    let c = p.evict_all().unwrap();
    assert_eq!((c.buffers_evicted, c.buffers_skipped), (1, 0), "{c:?}");
    p.check_invariants().unwrap();
}

#[test]
fn a_buffer_id_past_the_pool_is_an_error() {
    let p = pool("16", 1);
    let e = p.evict_buffer(16).unwrap_err();
    assert!(
        matches!(
            e,
            BufferError::NoSuchBuffer {
                buffer: 16,
                nbuffers: 16
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("16"), "{e}");
    assert!(p.mark_dirty_buffer(99).is_err());
}

#[test]
fn mark_dirty_dirties_without_changing_a_byte() {
    let p = pool("32", 6);
    p.evict_all().unwrap();
    let b = p.read(tag(0)).unwrap();
    let id = b.buffer_id();
    let image = b.read().to_vec();
    drop(b);
    let o = p.mark_dirty_buffer(id).unwrap();
    assert!(o.buffer_dirtied && !o.buffer_already_dirty, "{o:?}");
    let o = p.mark_dirty_buffer(id).unwrap();
    assert!(!o.buffer_dirtied && o.buffer_already_dirty, "{o:?}");
    for b in 1..4 {
        drop(p.read(tag(b)).unwrap());
    }
    let c = p.mark_dirty_relation(REL);
    assert_eq!(
        (c.buffers_dirtied, c.buffers_already_dirty),
        (3, 1),
        "{c:?}"
    );
    assert_eq!(p.mark_dirty_all().buffers_already_dirty, 4);
    assert_eq!(p.evict_all().unwrap().buffers_flushed, 4);
    assert_eq!(&p.read(tag(0)).unwrap().read()[..], &image[..]);
}

/// Writers increment counters on their own pages while another thread reads the views
/// and evicts everything over and over: no increment is lost and the pool stays
/// consistent.
#[test]
fn views_and_evictions_beside_writers_lose_nothing() {
    const PAGES: u32 = 24;
    const ROUNDS: u64 = 2_000;
    let p = pool("16", PAGES);
    let stop = AtomicBool::new(false);
    let evicted = std::thread::scope(|s| {
        let writers: Vec<_> = (0..2u32)
            .map(|w| {
                let p = &p;
                s.spawn(move || {
                    for _ in 0..ROUNDS {
                        for b in (w..PAGES).step_by(2) {
                            let buf = p.read(tag(b)).unwrap();
                            let mut g = buf.write();
                            let v = get_u64(&g, BODY + 8);
                            put_u64(&mut g, BODY + 8, v + 1);
                        }
                    }
                })
            })
            .collect();
        let viewer = s.spawn(|| {
            let mut evicted = 0;
            while !stop.load(Ordering::Relaxed) {
                let rows = p.buffercache();
                assert_eq!(rows.len(), 16);
                p.check_consistency().unwrap();
                evicted += p.evict_all().unwrap().buffers_evicted;
                let _ = p.mark_dirty_all();
            }
            evicted
        });
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        viewer.join().unwrap()
    });
    assert!(
        evicted > 0,
        "the viewer evicted nothing while the writers ran"
    );
    p.evict_all().unwrap();
    for b in 0..PAGES {
        assert_eq!(
            get_u64(&p.read(tag(b)).unwrap().read(), BODY + 8),
            ROUNDS,
            "block {b}"
        );
    }
    p.check_invariants().unwrap();
    assert_eq!(p.nblocks(REL, ForkNumber::Main).unwrap(), PAGES);
}
