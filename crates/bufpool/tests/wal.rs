//! The WAL through the engine: logging, commit, recovery, checkpoints, group commit.
//!
//! Proves: committed changes survive an unclean stop (pages never written) and a
//! recovery is idempotent; a checkpoint lets old segments go, keeping at most
//! `recycle_segments` for recycling, and segment files added, recycled and removed are
//! counted; segments prepared ahead are used without inline creation; full-page images
//! are logged exactly on the first change after a redo point; many committing threads
//! share syncs.

mod common;

use std::path::Path;
use std::sync::Arc;

use bufpool::wal::{SegmentCounts, DEFAULT_RECYCLE_SEGMENTS, FLAG_COMMIT};
use bufpool::{BufferTag, Config, Engine, ForkNumber, MemVfs, RelFileId, Vfs};
use common::{get_u64, put_u64, BODY};

const REL: RelFileId = RelFileId::new(0, 500);

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "32").unwrap();
    c.set("wal_segment_size", "64kB").unwrap();
    c
}

/// [`config`] keeping five 64 kB segments for recycling, as the default min_wal_size
/// (80MB) keeps of 16MB ones.
fn open_recycling(vfs: &MemVfs) -> Engine {
    let mut c = config();
    c.set("min_wal_size", "320kB").unwrap();
    // max_wal_size bounds the checkpointer's recycle target (its distance estimate would
    // ask for every released segment here), so the floor is what is kept; no checkpoint
    // thread, as this max_wal_size would trigger checkpoints by volume.
    c.set("max_wal_size", "320kB").unwrap();
    c.set("checkpointer", "off").unwrap();
    open_on(Arc::new(vfs.clone()), &c)
}

/// Proves: a checkpoint keeps as many released segments as its distance estimate says
/// the next cycle will fill (PostgreSQL's XLOGfileslop), above the min_wal_size floor, so
/// the next segments are renamed, not created. How: min_wal_size of two 64 kB segments,
/// max_wal_size the default 1 GB, no checkpoint thread; 400 one-change commits fill more
/// than four segments; the segments ahead are prepared before counting (the background
/// thread may still be making them); the checkpoint removes none of the released ones,
/// and 100 more commits fill several new segments, every one a recycled one.
#[test]
fn a_checkpoint_keeps_what_its_distance_estimate_will_need() {
    let vfs = MemVfs::new();
    let (_, e) = open_and_fill_segments(&vfs);
    e.wal().prepare_ahead().unwrap();
    let before = e.wal().segment_counts();
    e.checkpoint().unwrap();
    let redo_seg = e.wal().redo().0 / e.wal().segment_size();
    assert!(redo_seg > 4, "several segments released: {redo_seg}");
    for i in 0..100u64 {
        set(&e, (i % 8) as u32, i);
    }
    e.wal().prepare_ahead().unwrap();
    let after = e.wal().segment_counts();
    let seg = e.wal().insert_position().0 / e.wal().segment_size();
    assert!(
        seg > redo_seg + 2,
        "new segments filled: {redo_seg} -> {seg}"
    );
    assert_eq!(after.removed, before.removed, "{before:?} {after:?}");
    assert_eq!(after.added, before.added, "{before:?} {after:?}");
    assert!(after.recycled >= seg - redo_seg, "{before:?} {after:?}");
}

/// Proves: the startup checkpoint (after a crash here) keeps every released segment
/// within max_wal_size for recycling instead of trimming to the min_wal_size floor: there
/// is no distance estimate yet, and the files exist already; the first later checkpoint
/// sets the target from its estimate. How: min_wal_size of two 64 kB segments, no
/// checkpoint thread; 400 commits fill several segments; the engine is dropped without a
/// shutdown and reopened; the reopening removes no segment file.
#[test]
fn the_startup_checkpoint_keeps_existing_segments_for_recycling() {
    let vfs = MemVfs::new();
    let c = {
        let (c, e) = open_and_fill_segments(&vfs);
        assert!(
            e.wal().insert_position().0 / e.wal().segment_size() > 4,
            "several segments written"
        );
        c
    }; // dropped without a shutdown: a crash
    let e = open_on(Arc::new(vfs.clone()), &c);
    let counts = e.wal().segment_counts();
    assert_eq!(counts.removed, 0, "{counts:?}");
    let kept = vfs.list_dir(std::path::Path::new("/db/wal")).unwrap().len();
    assert!(kept > 5, "only {kept} segment files kept");
}

/// Opens with a min_wal_size of two 64 kB segments and no checkpoint thread, and fills
/// several segments with 400 one-change commits on 8 pages; returns the config too.
fn open_and_fill_segments(vfs: &MemVfs) -> (Config, Engine) {
    let mut c = config();
    c.set("min_wal_size", "128kB").unwrap();
    c.set("checkpointer", "off").unwrap();
    let e = open_on(Arc::new(vfs.clone()), &c);
    create_pages(&e, 8);
    for i in 0..400u64 {
        set(&e, (i % 8) as u32, i);
    }
    (c, e)
}

fn open(vfs: &MemVfs) -> Engine {
    open_on(Arc::new(vfs.clone()), &config())
}

/// Opens (creating) the engine at /db on any vfs with `c`.
fn open_on(vfs: Arc<dyn Vfs>, c: &Config) -> Engine {
    Engine::open_vfs(vfs, Path::new("/db"), c, true).unwrap()
}

fn tag(b: u32) -> BufferTag {
    BufferTag::new(REL, ForkNumber::Main, b)
}

/// Sets the u64 at BODY+8 of page `b` to `v` as one committed, logged change.
fn set(e: &Engine, b: u32, v: u64) {
    let buf = e.pool().read(tag(b)).unwrap();
    let mut g = buf.write();
    put_u64(&mut g, BODY + 8, v);
    let r = BODY + 8..BODY + 16;
    let end = e
        .log_pages(1, FLAG_COMMIT, &mut [(&mut g, std::slice::from_ref(&r))])
        .unwrap();
    drop(g);
    e.commit(end).unwrap();
}

fn create_pages(e: &Engine, n: u32) {
    e.pool().create_relation(REL, ForkNumber::Main).unwrap();
    for b in 0..n {
        let buf = e.pool().extend(REL, ForkNumber::Main).unwrap();
        let mut g = buf.write();
        bufpool::page::init(&mut g, 0);
        put_u64(&mut g, BODY, u64::from(b));
        let all = 0..g.len();
        let end = e
            .log_pages(1, FLAG_COMMIT, &mut [(&mut g, std::slice::from_ref(&all))])
            .unwrap();
        drop(g);
        e.commit(end).unwrap();
    }
}

#[test]
fn committed_changes_survive_an_unclean_stop_and_recovery_is_idempotent() {
    let vfs = MemVfs::new();
    {
        let e = open(&vfs);
        create_pages(&e, 50); // more pages than buffers: some are evicted (WAL flushed first)
        for round in 1..=3u64 {
            for b in 0..50 {
                set(&e, b, round * 1000 + u64::from(b));
            }
        }
        assert!(e.wal().stats().syncs > 0);
        // Dropped without a checkpoint: dirty pages never reach the data files.
    }
    for _ in 0..2 {
        let e = open(&vfs);
        let report = e.recovery_report().expect("recovery ran").clone();
        assert!(report.records > 0, "{report:?}");
        for b in 0..50 {
            let buf = e.pool().read(tag(b)).unwrap();
            let g = buf.read();
            assert_eq!(get_u64(&g, BODY), u64::from(b));
            assert_eq!(get_u64(&g, BODY + 8), 3000 + u64::from(b), "page {b}");
        }
    }
}

#[test]
fn checkpoint_moves_redo_and_releases_old_segments() {
    let vfs = MemVfs::new();
    let e = open_recycling(&vfs);
    create_pages(&e, 8);
    for i in 0..400u64 {
        set(&e, (i % 8) as u32, i);
    }
    let before = e.wal().segment_numbers().unwrap();
    assert!(before.len() > 3, "{before:?}");
    e.checkpoint().unwrap();
    let redo_seg = e.wal().redo().0 / e.wal().segment_size();
    let after = e.wal().segment_numbers().unwrap();
    // At most `recycle_segments` released segments are kept for recycling; none needed
    // ones are gone.
    assert!(
        after.iter().filter(|&&s| s < redo_seg).count() <= DEFAULT_RECYCLE_SEGMENTS,
        "{after:?}"
    );
    assert!(after.contains(&redo_seg));
    drop(e);
    let e = open(&vfs);
    assert_eq!(
        get_u64(&e.pool().read(tag(7)).unwrap().read(), BODY + 8),
        399
    );
}

/// The log counts its segment files like PostgreSQL's log_checkpoints line: while nothing
/// is released every new segment is added (zero-filled); a checkpoint keeps the newest
/// `recycle_segments` (the default, 5) of the segments it releases and removes the rest;
/// the next new segments (made ahead of need) are recycled from the kept ones before any
/// is added again. How: many one-change commits (each pads the log to 4 KiB) fill 64 KiB
/// segments; before each look at the directory, `prepare_ahead` runs in the test thread,
/// which also waits out a preparation the WAL writer thread has in progress (both take
/// the segments' `make` lock), so the files on disk are settled; the counts are checked
/// against the segment files listed (files on disk = added - removed, as recycling only
/// renames).
#[test]
fn checkpoints_keep_at_most_recycle_segments_and_count_segment_files() {
    let vfs = MemVfs::new();
    let e = open_recycling(&vfs);
    // The WAL writer's own preparations would race the test's reads of the directory and
    // the counts (a segment the leader entered wakes it): stop it, so that the test
    // thread's `prepare_ahead` and the flush leader are the only makers.
    e.wal().stop_wal_writer();
    let c = |e: &Engine| e.wal().segment_counts();
    // The WAL writer may start another preparation as soon as ours returns (a rename is
    // visible before its count): read the directory, the counts and the directory again
    // until they agree, so the list and the counts describe the same moment.
    let settled_with_counts = |e: &Engine| {
        for _ in 0..10_000 {
            e.wal().prepare_ahead().unwrap();
            let list = e.wal().segment_numbers().unwrap();
            let counts = c(e);
            if e.wal().segment_numbers().unwrap() == list
                && list.len() as u64 == counts.added - counts.removed
            {
                return (list, counts);
            }
        }
        panic!("the segment files never settled");
    };
    let settled = |e: &Engine| settled_with_counts(e).0;
    create_pages(&e, 8);
    for i in 0..200u64 {
        set(&e, (i % 8) as u32, i);
    }
    let first = settled(&e);
    assert!(first.len() > DEFAULT_RECYCLE_SEGMENTS + 2, "{first:?}");
    assert_eq!(
        c(&e),
        SegmentCounts {
            added: first.len() as u64,
            recycled: 0,
            removed: 0
        }
    );

    e.checkpoint().unwrap();
    let redo_seg = e.wal().redo().0 / e.wal().segment_size();
    let released: Vec<u64> = first.iter().copied().filter(|&s| s < redo_seg).collect();
    let keep = released.len().min(DEFAULT_RECYCLE_SEGMENTS);
    let (after, at_checkpoint) = settled_with_counts(&e);
    // Kept = still waiting under their old names + already renamed ahead of need.
    let waiting: Vec<u64> = after.iter().copied().filter(|&s| s < redo_seg).collect();
    assert_eq!(
        waiting.len() as u64 + at_checkpoint.recycled,
        keep as u64,
        "{after:?} {at_checkpoint:?}"
    );
    assert_eq!(
        waiting,
        released[released.len() - waiting.len()..],
        "the newest released are kept, and the oldest of them recycled first"
    );
    assert_eq!(at_checkpoint.removed, (released.len() - keep) as u64);
    assert_eq!(
        after.len() as u64,
        at_checkpoint.added - at_checkpoint.removed
    );

    for i in 0..200u64 {
        set(&e, (i % 8) as u32, 1000 + i);
    }
    let (later, now) = settled_with_counts(&e);
    let new_segments = later.iter().filter(|s| !after.contains(s)).count();
    assert!(new_segments > keep, "{later:?}");
    assert_eq!(now.recycled, keep as u64, "every kept segment reused");
    assert_eq!(
        now.added - at_checkpoint.added,
        (new_segments - waiting.len()) as u64,
        "then new ones added"
    );
    assert_eq!(now.removed, at_checkpoint.removed);
    assert_eq!(later.len() as u64, now.added - now.removed);
    assert!(
        later.iter().all(|s| !waiting.contains(s)),
        "renamed away: {later:?}"
    );
}

/// Segments prepared ahead are what the flush leader writes into: when preparation keeps
/// up, no commit ever waits for a segment to be created. How: 300 one-change commits
/// (each pads to 4 KiB, so about 19 segments of 64 KiB), with `prepare_ahead` run in the
/// test thread after each (a background thread that is never late); the log counts no
/// inline creation and no wait for one. The WAL writer thread runs too, so a preparation
/// may be made by either; only the leader's own are counted.
#[test]
fn prepared_segments_are_used_without_inline_creation() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    create_pages(&e, 8);
    e.wal().prepare_ahead().unwrap();
    let before = e.wal().stats();
    let segs_before = e.wal().segment_numbers().unwrap().len();
    for i in 0..300u64 {
        set(&e, (i % 8) as u32, i);
        e.wal().prepare_ahead().unwrap();
    }
    let after = e.wal().stats();
    assert!(
        e.wal().segment_numbers().unwrap().len() > segs_before + 10,
        "the commits crossed many segments"
    );
    assert_eq!(
        (after.segments_created_inline, after.segment_waits_inline),
        (before.segments_created_inline, before.segment_waits_inline),
        "{after:?}"
    );
    drop(e);
    let e = open(&vfs);
    assert_eq!(
        get_u64(&e.pool().read(tag(3)).unwrap().read(), BODY + 8),
        299
    );
}

/// Proves: the first change of a page after a checkpoint's redo point logs its image, a
/// later one only its bytes, and the next checkpoint starts over; with `wal_compression`
/// off the image is the whole page, with lz4 (the default) it is counted the same and
/// takes fewer bytes than the page (this page is mostly zeros).
/// Proves: with `wal_compression = lz4`, a change of kilobytes (a prune that moves
/// tuples, say) is logged as the compressed page, in far fewer bytes than the change, and
/// an unclean stop recovers it and the small changes logged after it; with `off` the
/// same change is logged as its bytes. How: one page, a checkpoint and a first change
/// (its full-page image), then 4,000 bytes written as one logged change and an 8-byte
/// change after it; the engine is dropped without a checkpoint and reopened.
#[test]
fn a_large_change_is_logged_compressed_and_recovers() {
    for compression in ["off", "lz4"] {
        let vfs = MemVfs::new();
        let mut c = config();
        c.set("wal_compression", compression).unwrap();
        let pattern = |i: usize| (i % 7) as u8 + b'a';
        {
            let e = open_on(Arc::new(vfs.clone()), &c);
            create_pages(&e, 1);
            e.checkpoint().unwrap();
            set(&e, 0, 1); // the full-page image
            let before = e.wal().stats();
            let buf = e.pool().read(tag(0)).unwrap();
            let mut g = buf.write();
            let r = 2000..6000;
            for i in r.clone() {
                g[i] = pattern(i);
            }
            let end = e
                .log_pages(1, FLAG_COMMIT, &mut [(&mut g, std::slice::from_ref(&r))])
                .unwrap();
            drop(g);
            e.commit(end).unwrap();
            let after = e.wal().stats();
            let logged = after.bytes - before.bytes;
            if compression == "lz4" {
                assert!(
                    logged < 1500,
                    "{compression}: 4,000 bytes logged in {logged}"
                );
            } else {
                assert!(logged > 4000, "{compression}: {logged} bytes");
            }
            assert_eq!(after.images, before.images, "not a full-page write");
            set(&e, 0, 2);
            // Dropped without a checkpoint: the page never reaches its data file.
        }
        let e = open_on(Arc::new(vfs.clone()), &c);
        assert!(e.recovery_report().expect("recovery ran").records > 0);
        let buf = e.pool().read(tag(0)).unwrap();
        let g = buf.read();
        assert!(
            (2000..6000).all(|i| g[i] == pattern(i)),
            "{compression}: the large change recovered"
        );
        assert_eq!(
            get_u64(&g, BODY + 8),
            2,
            "{compression}: and the change after it"
        );
    }
}

#[test]
fn full_page_image_only_on_first_change_after_redo() {
    for compression in ["off", "lz4"] {
        let vfs = MemVfs::new();
        let mut c = config();
        c.set("wal_compression", compression).unwrap();
        let e = open_on(Arc::new(vfs.clone()), &c);
        create_pages(&e, 1);
        e.checkpoint().unwrap();
        let stats = |e: &Engine| {
            let s = e.wal().stats();
            (s.bytes, s.images, s.image_bytes)
        };
        let (b0, i0, ib0) = stats(&e);
        set(&e, 0, 1);
        let (b1, i1, ib1) = stats(&e);
        set(&e, 0, 2);
        let (b2, i2, _) = stats(&e);
        assert_eq!(
            i1 - i0,
            1,
            "{compression}: the first change carries an image"
        );
        assert_eq!(i2, i1, "{compression}: a later change carries none");
        assert!(
            b2 - b1 < 200,
            "{compression}: later changes carry only the bytes: {} bytes",
            b2 - b1
        );
        if compression == "off" {
            assert_eq!(ib1 - ib0, 8192);
            assert!(b1 - b0 > 8192, "the whole page: {} bytes", b1 - b0);
        } else {
            assert!(ib1 - ib0 < 8192 / 4, "compressed to {} bytes", ib1 - ib0);
            assert!(b1 - b0 < 8192 / 4 + 200, "{} bytes", b1 - b0);
        }
        e.checkpoint().unwrap();
        set(&e, 0, 3);
        assert_eq!(
            stats(&e).1,
            i2 + 1,
            "{compression}: again after the next checkpoint"
        );
    }
}

#[test]
fn many_committers_share_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config();
    c.set("wal_segment_size", "16MB").unwrap();
    let e = Engine::open_vfs(Arc::new(bufpool::RealVfs::new()), dir.path(), &c, true).unwrap();
    create_pages(&e, 16);
    let syncs0 = e.wal().stats().syncs;
    std::thread::scope(|s| {
        for t in 0..16u32 {
            let e = &e;
            s.spawn(move || {
                for i in 0..20u64 {
                    set(e, t, i);
                }
            });
        }
    });
    let stats = e.wal().stats();
    let syncs = stats.syncs - syncs0;
    assert!(
        syncs < 16 * 20,
        "320 commits took {syncs} syncs: no sharing at all"
    );
    // Real fsyncs take time, and it is counted; a gap is counted only between syncs.
    assert!(
        stats.sync_ns > 0 && stats.sync_gaps < stats.syncs,
        "{stats:?}"
    );
    for t in 0..16 {
        assert_eq!(
            get_u64(&e.pool().read(tag(t)).unwrap().read(), BODY + 8),
            19
        );
    }
}

#[test]
fn asynchronous_commit_returns_at_once_and_the_writer_makes_it_durable() {
    let vfs = MemVfs::new();
    let mut c = config();
    c.set("synchronous_commit", "off").unwrap();
    c.set("wal_writer_delay", "10ms").unwrap();
    let e = Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &c,
        true,
    )
    .unwrap();
    create_pages(&e, 1);
    let syncs = e.wal().stats().syncs;
    let buf = e.pool().read(tag(0)).unwrap();
    let mut g = buf.write();
    put_u64(&mut g, BODY + 8, 77);
    let r = BODY + 8..BODY + 16;
    let end = e
        .log_pages(1, FLAG_COMMIT, &mut [(&mut g, std::slice::from_ref(&r))])
        .unwrap();
    drop(g);
    drop(buf);
    e.commit(end).unwrap();
    assert_eq!(
        e.wal().stats().syncs,
        syncs,
        "an asynchronous commit does not sync"
    );
    // The WAL writer flushes within a few delays; wait on the observable (bounded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while e.wal().flushed() < end {
        assert!(
            std::time::Instant::now() < deadline,
            "the WAL writer never flushed"
        );
        std::thread::yield_now();
    }
    drop(e);
    let e = open(&vfs);
    assert_eq!(
        get_u64(&e.pool().read(tag(0)).unwrap().read(), BODY + 8),
        77
    );
}

#[test]
fn page_writes_force_wal_flushes_and_are_counted() {
    let vfs = MemVfs::new();
    let mut c = config();
    c.set("synchronous_commit", "off").unwrap();
    c.set("wal_writer_delay", "10s").unwrap(); // the writer stays out of the way
    c.set("wal_buffers", "4MB").unwrap(); // room for every record: no ring-full flushes
    let e = Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &c,
        true,
    )
    .unwrap();
    create_pages(&e, 100); // 100 pages through 32 buffers: evictions write logged pages
    let forced = e.wal().stats().forced_by_pages;
    assert!(
        forced > 0,
        "evicting pages whose records were not yet durable must flush the WAL"
    );
    assert!(e.wal().flushed() > bufpool::Lsn(0));
}

#[test]
fn every_sync_method_commits_durably() {
    for method in ["fdatasync", "fsync", "open_datasync"] {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let mut c = config();
        c.set("wal_sync_method", method).unwrap();
        {
            let e =
                Engine::open_vfs(Arc::new(bufpool::RealVfs::new()), dir.path(), &c, true).unwrap();
            create_pages(&e, 2);
            set(&e, 1, 1234);
            assert!(e.wal().flushed() > bufpool::Lsn(0), "{method}");
        }
        let e = Engine::open_vfs(Arc::new(bufpool::RealVfs::new()), dir.path(), &c, true).unwrap();
        assert_eq!(
            get_u64(&e.pool().read(tag(1)).unwrap().read(), BODY + 8),
            1234,
            "{method}"
        );
    }
}

#[path = "bank/mod.rs"]
mod bank;

#[test]
fn multi_page_records_with_images_fit_at_every_page_size() {
    for size in ["4kB", "8kB", "16kB", "32kB"] {
        let vfs = MemVfs::new();
        let mut c = config();
        c.set("block_size", size).unwrap();
        c.set("wal_segment_size", "1MB").unwrap();
        let mut acked = vec![0u64; bank::MAX_THREADS as usize];
        {
            let e = Engine::open_vfs(
                Arc::new(vfs.clone()) as Arc<dyn Vfs>,
                Path::new("/db"),
                &c,
                true,
            )
            .unwrap();
            bank::init(&e).unwrap();
            // First transfers after the checkpoint carry up to three full-page images.
            for k in 1..=20 {
                bank::run_transfer(&e, 0, k).unwrap_or_else(|err| panic!("{size}: {err}"));
            }
            acked[0] = 20;
        }
        let e = Engine::open_vfs(
            Arc::new(vfs.clone()) as Arc<dyn Vfs>,
            Path::new("/db"),
            &c,
            true,
        )
        .unwrap();
        bank::verify(&e, &acked);
    }
}

#[test]
fn clean_shutdown_leaves_nothing_to_replay() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    create_pages(&e, 10);
    for b in 0..10 {
        set(&e, b, 5);
    }
    e.shutdown().unwrap();
    let e = open(&vfs);
    let r = e.recovery_report().unwrap();
    assert!(
        r.records <= 1,
        "after a clean shutdown recovery replayed {} records",
        r.records
    );
    assert_eq!(get_u64(&e.pool().read(tag(9)).unwrap().read(), BODY + 8), 5);
}

/// A crash that keeps a later block of the log while losing an earlier one leaves valid
/// records of the old life beyond the point where recovery resumes the log. The next
/// recovery reads the new life's records up to its end, finds an old record exactly there
/// (records here are one 4 KiB block each), and must not replay it: it belongs to an
/// earlier incarnation of the log.
#[test]
fn records_of_an_earlier_life_beyond_the_end_are_never_replayed() {
    let vfs = MemVfs::new();
    let mut c = config();
    c.set("synchronous_commit", "off").unwrap();
    c.set("wal_writer_delay", "10s").unwrap();
    c.set("wal_buffers", "1MB").unwrap();
    // Changes logged as their bytes: with lz4, 4 kB of ranges would go as the compressed
    // page, and the records would no longer be one block each.
    c.set("wal_compression", "off").unwrap();
    // One committed change of 4028 bytes = 48 header + 16 block + 4 range table + 4028
    // data = 4096 bytes: exactly one block.
    let change = |e: &Engine, v: u8| {
        let buf = e.pool().read(tag(0)).unwrap();
        let mut g = buf.write();
        g[BODY..BODY + 4028].fill(v);
        let r = BODY..BODY + 4028;
        e.log_pages(1, FLAG_COMMIT, &mut [(&mut g, std::slice::from_ref(&r))])
            .unwrap()
    };
    let positions: Vec<bufpool::Lsn> = {
        let e = Engine::open_vfs(
            Arc::new(vfs.clone()) as Arc<dyn Vfs>,
            Path::new("/db"),
            &c,
            true,
        )
        .unwrap();
        create_pages(&e, 1);
        e.checkpoint().unwrap();
        let first = change(&e, 100); // carries a full-page image
        e.wal().flush(first).unwrap(); // pads: the next record starts on a block boundary
        let mut ends = Vec::new();
        for v in 1..=8 {
            ends.push(change(&e, v));
        }
        e.wal().flush(*ends.last().unwrap()).unwrap();
        ends.iter().map(|end| bufpool::Lsn(end.0 - 4096)).collect()
        // Dropped without a checkpoint.
    };
    assert!(positions.iter().all(|p| p.0 % 4096 == 0), "{positions:?}");
    // The crash: R3's block is lost, R4..R8 (written in the same unsynced batch) survive.
    let seg_size = 64 * 1024;
    let r3 = positions[2].0;
    let seg = Path::new("/db/wal").join(format!("{:016X}", r3 / seg_size));
    let mut bytes = vfs.contents(&seg).unwrap();
    let off = (r3 % seg_size) as usize;
    bytes[off..off + 4096].fill(0);
    vfs.set_contents(&seg, bytes);
    let page_value = |e: &Engine| e.pool().read(tag(0)).unwrap().read()[BODY];
    {
        let e = Engine::open_vfs(
            Arc::new(vfs.clone()) as Arc<dyn Vfs>,
            Path::new("/db"),
            &c,
            true,
        )
        .unwrap();
        assert_eq!(
            page_value(&e),
            2,
            "recovery stops at the lost block: R1, R2 applied"
        );
        // Dropped again: the next open replays the new life's few records.
    }
    let e = Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &c,
        true,
    )
    .unwrap();
    assert_eq!(
        page_value(&e),
        2,
        "records of the old life (R4..R8) must not be replayed"
    );
}

#[test]
fn transaction_outcomes_survive_a_crash_and_ids_never_repeat() {
    use bufpool::txn::XidStatus;
    let vfs = MemVfs::new();
    let (a, b, c) = {
        let e = open(&vfs);
        let a = e.begin_xid().unwrap();
        let b = e.begin_xid().unwrap();
        let c = e.begin_xid().unwrap();
        e.commit_transaction(a).unwrap();
        e.abort_transaction(b).unwrap();
        // c is still running when the process dies; b's abort record is not durable.
        (a, b, c)
    };
    let e = open(&vfs);
    let r = e.recovery_report().unwrap().clone();
    assert!(r.commits >= 1 && r.next_xid > a, "{r:?}");
    assert_eq!(e.txns().status(a).unwrap(), XidStatus::Committed);
    // b's abort record and c's whole life were lost with the process: neither may ever
    // appear committed (they read as cut off, or as ids not yet handed out again).
    assert_ne!(e.txns().status(b).unwrap(), XidStatus::Committed);
    assert_ne!(e.txns().status(c).unwrap(), XidStatus::Committed);
    // Ids that appear in durable log are never handed out again. (b and c appear in none
    // and may be reused, as in PostgreSQL: nothing durable refers to them.)
    let d = e.begin_xid().unwrap();
    assert!(d > a, "id {d} repeats a committed transaction's");
    e.commit_transaction(d).unwrap();
    e.shutdown().unwrap();
    // After a clean shutdown the control file carries next_xid.
    let e = open(&vfs);
    assert_eq!(e.txns().status(d).unwrap(), XidStatus::Committed);
    assert!(e.begin_xid().unwrap() > d);
}

/// Commit records inserted while the WAL ring is full are retried after the flush that
/// makes room; the retry must insert the same record (a lost commit record would make a
/// committed transaction count as aborted after a crash).
#[test]
fn commit_records_survive_ring_full_retries() {
    use bufpool::txn::XidStatus;
    let vfs = MemVfs::new();
    let mut c = config();
    c.set("synchronous_commit", "off").unwrap();
    c.set("wal_writer_delay", "10s").unwrap(); // only ring-full flushes make room
    c.set("wal_buffers", "64kB").unwrap();
    let xids: Vec<u32> = {
        let e = Engine::open_vfs(
            Arc::new(vfs.clone()) as Arc<dyn Vfs>,
            Path::new("/db"),
            &c,
            true,
        )
        .unwrap();
        let xids: Vec<u32> = (0..5000)
            .map(|_| {
                let x = e.begin_xid().unwrap();
                e.commit_transaction(x).unwrap();
                x
            })
            .collect();
        e.wal().flush(e.wal().insert_position()).unwrap();
        xids
    };
    let e = Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &c,
        true,
    )
    .unwrap();
    let lost: Vec<u32> = xids
        .iter()
        .copied()
        .filter(|&x| e.txns().status(x).unwrap() != XidStatus::Committed)
        .collect();
    assert!(
        lost.is_empty(),
        "{} commits lost, first {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
}

/// The pool's WAL hook returns the log's typed error: a failed log fsync reaches the page
/// write that needed it with the OS error intact, and every later write reports the
/// latched failure with the same errno.
#[test]
fn a_failed_log_fsync_reaches_the_page_write_with_its_errno() {
    use bufpool::testing::{FaultKind, FaultOp, FaultRule, FaultVfs};
    use bufpool::BufferError;
    let mem = MemVfs::new();
    let vfs = FaultVfs::new(Arc::new(mem.clone()));
    let e = open_on(Arc::new(vfs.clone()), &config());
    create_pages(&e, 2);
    vfs.add_rule(FaultRule::nth("/wal/", FaultOp::Fsync, 1, FaultKind::Eio));
    // Logged but not committed: only the page write forces the log flush.
    let buf = e.pool().read(tag(1)).unwrap();
    let mut g = buf.write();
    put_u64(&mut g, BODY + 8, 7);
    let r = BODY + 8..BODY + 16;
    e.log_pages(1, 0, &mut [(&mut g, std::slice::from_ref(&r))])
        .unwrap();
    drop(g);
    drop(buf);
    for attempt in 0..2 {
        let err = e.pool().flush_all().unwrap_err();
        assert!(
            matches!(err, BufferError::WalFlush { .. }),
            "attempt {attempt}: {err}"
        );
        assert_eq!(
            err.raw_os_error(),
            Some(libc::EIO),
            "attempt {attempt}: {err}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("flushing the WAL") && msg.contains("fsync of"),
            "{msg}"
        );
        if attempt == 1 {
            assert!(msg.contains("failed earlier"), "{msg}");
        }
    }
}

/// Issue 11, defect 5: the decision in `log_hint` (no full-page image needed: the page was
/// logged after the redo point) and the LSN it then stamps must not straddle a redo-point
/// move. If a checkpoint moves the redo point in between and the page's LSN is raised past
/// it, the next hint after that checkpoint logs no image, and a torn write of the page
/// could not be repaired. How: a hook inside `log_hint` (after the decision, before the
/// LSN is set) starts a checkpoint (moves the redo point, inserts its record); afterwards
/// the page's LSN must not be above the new redo point, so its next hint logs an image.
#[test]
fn a_hint_cannot_straddle_a_redo_point_move() {
    use bufpool::wal::{RecordBuilder, RecordKind};
    let vfs = MemVfs::new();
    let mut c = config();
    c.set("synchronous_commit", "off").unwrap();
    let e = open_on(Arc::new(vfs.clone()), &c);
    create_pages(&e, 1);
    e.checkpoint().unwrap();
    set(&e, 0, 5); // logged after the redo point: the hint needs no image
    e.set_test_hook(
        bufpool::engine::HookPoint::HintBeforeLsn,
        Some(Box::new(|e: Option<&Engine>, _| {
            let e = e.expect("an engine point passes the engine");
            let redo = e.wal().begin_checkpoint();
            e.wal()
                .insert(RecordBuilder::new(RecordKind::Checkpoint, 0, 0, redo.0))
                .unwrap();
        })),
    );
    let buf = e.pool().read(tag(0)).unwrap();
    let mut g = buf.write();
    g[BODY + 40] ^= 1; // a hint bit
    e.log_hint(&mut g).unwrap();
    e.set_test_hook(bufpool::engine::HookPoint::HintBeforeLsn, None);
    let lsn = bufpool::page::lsn(&g);
    let redo = e.wal().redo();
    assert!(
        lsn <= redo,
        "the hinted page's LSN {lsn} is past the redo point {redo} that moved during the \
         hint: its next hint after that checkpoint would log no full-page image"
    );
}

/// A checkpoint that chooses its redo point after a transaction's commit record but
/// flushes the commit log before that transaction's outcome is in it must not lose the
/// commit: replay starts after the record, so only the commit log could hold it.
/// (Found by the power-loss suite; PostgreSQL holds checkpoints off with
/// DELAY_CHKPT_START for this window.) How: a hook between the durable commit record and
/// the commit-log update starts a checkpoint on another thread and waits until that
/// checkpoint has finished or is waiting for in-flight commits; then the engine is
/// dropped without a shutdown (a crash) and reopened.
#[test]
fn a_checkpoint_between_commit_record_and_commit_log_keeps_the_commit() {
    use bufpool::engine::HookPoint;
    use bufpool::table::Heap;
    use bufpool::txn::INVALID_XID;
    let vfs = MemVfs::new();
    let rel = RelFileId::new(0, 530);
    let row = |v: u64| v.to_le_bytes().to_vec();
    let tid = {
        let e = open(&vfs);
        let heap = Heap::create(&e, rel).unwrap();
        let x = e.begin_xid().unwrap();
        let tid = heap.insert(x, &row(100)).unwrap();
        e.commit_transaction(x).unwrap();
        e.checkpoint().unwrap();
        let x = e.begin_xid().unwrap();
        heap.update(x, tid, |_| row(101)).unwrap().unwrap();
        std::thread::scope(|s| {
            let e = &e;
            let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
            let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
            let checkpointer = s.spawn(move || {
                started_rx.recv().unwrap();
                e.checkpoint().unwrap();
                let _ = done_tx.send(()); // the hook may be gone by then
            });
            let started = std::sync::Mutex::new(Some(started_tx));
            let done = std::sync::Mutex::new(done_rx);
            e.set_test_hook(
                HookPoint::CommitBeforeStatus,
                Some(Box::new(move |e: Option<&Engine>, _| {
                    let e = e.expect("an engine point passes the engine");
                    if let Some(tx) = started.lock().unwrap().take() {
                        tx.send(()).unwrap();
                    }
                    // Until the checkpoint is done, or blocked waiting for this commit.
                    let done = done.lock().unwrap();
                    while done.try_recv().is_err() && !e.checkpoint_waits_for_commits() {
                        std::thread::yield_now();
                    }
                })),
            );
            e.commit_transaction(x).unwrap();
            e.set_test_hook(HookPoint::CommitBeforeStatus, None);
            checkpointer.join().unwrap();
        });
        tid
    }; // dropped without shutdown: a crash
    let e = open_on(Arc::new(vfs.clone()), &config());
    let heap = Heap::open(&e, rel);
    let snap = e.txns().snapshot(INVALID_XID);
    let got = heap.fetch(&snap, tid).unwrap().unwrap();
    assert_eq!(
        got,
        row(101),
        "the acknowledged commit was lost; recovery: {:?}",
        e.recovery_report()
    );
}

/// The writer marks its flush padding, and recovery never skips a lost sector to replay
/// a later batch. How: batch A = two small changes flushed together (so A ends inside a
/// block, followed by a pad marker), batch B = one more change flushed; then the sectors
/// holding A's second change are zeroed, as a torn write would leave them. B says A was
/// durable, so the open is refused as corruption, naming the lost position; it used to
/// skip the zeros as padding and replay B over the hole.
#[test]
fn a_lost_sector_before_a_later_batch_is_never_skipped() {
    let vfs = MemVfs::new();
    let small = |e: &Engine, v: u64| {
        let buf = e.pool().read(tag(0)).unwrap();
        let mut g = buf.write();
        put_u64(&mut g, BODY + 8, v);
        let r = BODY + 8..BODY + 16;
        e.log_pages(1, FLAG_COMMIT, &mut [(&mut g, std::slice::from_ref(&r))])
            .unwrap()
    };
    let (a1_end, a2_end) = {
        let e = open(&vfs);
        create_pages(&e, 1);
        e.checkpoint().unwrap();
        let warm = small(&e, 1); // carries the full-page image
        e.wal().flush(warm).unwrap();
        let a1 = small(&e, 2);
        let a2 = small(&e, 3);
        e.wal().flush(a2).unwrap();
        let b = small(&e, 4);
        e.wal().flush(b).unwrap();
        assert!(b.0 > a2.0.div_ceil(4096) * 4096, "B lies in the next block");
        (a1, a2)
        // Dropped without a checkpoint.
    };
    assert_ne!(a2_end.0 % 4096, 0, "batch A ends inside a block");
    let seg_size = 64 * 1024;
    let seg = Path::new("/db/wal").join(format!("{:016X}", a1_end.0 / seg_size));
    let mut bytes = vfs.contents(&seg).unwrap();
    let pad = (a2_end.0 % seg_size) as usize;
    assert_eq!(
        bytes[pad..pad + 4],
        [0; 4],
        "padding reads as a zero length"
    );
    assert_ne!(
        bytes[pad + 4..pad + 8],
        [0; 4],
        "padding starts with a marker"
    );
    let lost = (a1_end.0 % seg_size) as usize;
    bytes[lost..lost.div_ceil(4096) * 4096].fill(0);
    vfs.set_contents(&seg, bytes);
    let Err(err) = Engine::open_vfs(Arc::new(vfs.clone()), Path::new("/db"), &config(), true)
    else {
        panic!("the open should be refused");
    };
    let msg = err.to_string();
    assert!(matches!(err, bufpool::EngineError::Corrupt { .. }), "{msg}");
    assert!(
        msg.contains(&format!("offset {lost}")) && msg.contains("pad marker"),
        "{msg}"
    );
}

/// A copy of every file under `dir` of `vfs` into a new MemVfs: what storage holds at
/// this instant, as a crash would leave it (MemVfs has no page cache).
fn crash_copy(vfs: &MemVfs, dir: &Path) -> MemVfs {
    fn walk(from: &MemVfs, to: &MemVfs, dir: &Path) {
        to.create_dir_all(dir).unwrap();
        for name in from.list_dir(dir).unwrap() {
            let path = dir.join(&name);
            if from.list_dir(&path).is_ok() {
                walk(from, to, &path);
            } else {
                to.set_contents(&path, from.contents(&path).unwrap());
            }
        }
    }
    let copy = MemVfs::new();
    walk(vfs, &copy, dir);
    copy
}

/// Early lock release ends a transaction before its commit record is durable; a hint
/// bit learned in that window must not reach storage ahead of the record. How: A updates
/// a row in each of two relations, the log made durable between the two; between A's end
/// and its flush (hook `CommitBeforeFlush`) a new snapshot reads row 1 (setting
/// XMIN_COMMITTED on A's version) and row 1's page is written (its own change durable, it
/// needs no log flush unless the hint stamped it); storage is copied there (a crash) and
/// opened. Both
/// rows must tell the same story: A committed (its hinted page forced the log past A's
/// commit record) or not; never row 1 by A's hint and row 2 without A. Also: with the
/// knob off, A's end waits for its flush, so the hook never runs.
#[test]
fn early_lock_release_never_lets_a_hint_outrun_the_commit_record() {
    use bufpool::engine::HookPoint;
    use bufpool::table::Heap;
    use bufpool::txn::INVALID_XID;
    let (r1, r2) = (RelFileId::new(0, 540), RelFileId::new(0, 541));
    let row = |v: u64| v.to_le_bytes().to_vec();
    for elr in [true, false] {
        let vfs = MemVfs::new();
        let mut c = config();
        c.set("bgwriter", "off").unwrap();
        c.set("checkpoint_timeout", "1h").unwrap();
        // With full-page writes, replay rebuilds any page changed since the redo point
        // from its image (dropping a hint), and a hint on an older page logs an image
        // after the commit record: the hazard needs them off.
        c.set("full_page_writes", "off").unwrap();
        c.set("early_lock_release", if elr { "on" } else { "off" })
            .unwrap();
        let e = open_on(Arc::new(vfs.clone()), &c);
        let (h1, h2) = (Heap::create(&e, r1).unwrap(), Heap::create(&e, r2).unwrap());
        let x = e.begin_xid().unwrap();
        let (t1, t2) = (
            h1.insert(x, &row(1)).unwrap(),
            h2.insert(x, &row(1)).unwrap(),
        );
        e.commit_transaction(x).unwrap();
        e.checkpoint().unwrap();
        let a = e.begin_xid().unwrap();
        let t1 = h1.update(a, t1, |_| row(2)).unwrap().unwrap();
        // Row 1's page is durable up to A's change of it: written later, it needs no
        // flush of the log (which would carry A's commit record out with it).
        e.wal().flush(e.wal().insert_position()).unwrap();
        let t2 = h2.update(a, t2, |_| row(2)).unwrap().unwrap();
        let crashed = std::sync::Arc::new(std::sync::Mutex::new(None));
        {
            let (crashed, vfs) = (crashed.clone(), vfs.clone());
            e.set_test_hook(
                HookPoint::CommitBeforeFlush,
                Some(Box::new(move |e: Option<&Engine>, _| {
                    let e = e.expect("an engine point passes the engine");
                    let snap = e.txns().snapshot(INVALID_XID);
                    let got = Heap::open(e, r1).fetch(&snap, t1).unwrap();
                    assert_eq!(got, Some(2u64.to_le_bytes().to_vec()), "A has ended");
                    e.pool().flush_relation(r1).unwrap();
                    *crashed.lock().unwrap() = Some(crash_copy(&vfs, Path::new("/db")));
                })),
            );
        }
        e.commit_transaction(a).unwrap();
        e.set_test_hook(HookPoint::CommitBeforeFlush, None);
        let copy = crashed.lock().unwrap().take();
        assert_eq!(
            copy.is_some(),
            elr,
            "the hook runs with early lock release only"
        );
        let Some(copy) = copy else { continue };
        drop(e);
        let e = open_on(Arc::new(copy), &c);
        let snap = e.txns().snapshot(INVALID_XID);
        let v1 = Heap::open(&e, r1).fetch(&snap, t1).unwrap();
        let v2 = Heap::open(&e, r2).fetch(&snap, t2).unwrap();
        assert_eq!(
            v1, v2,
            "row 1 {v1:?}, row 2 {v2:?}: A half committed after the crash"
        );
        assert_eq!(
            v1,
            Some(row(2)),
            "the hinted page forced A's commit record out"
        );
    }
}

/// Proves (F3): the WAL segment size is fixed at creation. Reopening with another
/// `wal_segment_size` is refused with both values named, before any log is read (it read
/// the log with the wrong geometry: "end of log" at the first segment boundary of the
/// wrong size, and everything after silently gone). How: 64 kB segments, commits that
/// fill several of them, an unclean stop; reopen asking for 128 kB; then reopen as
/// created and find every commit.
#[test]
fn the_wal_segment_size_is_fixed_at_creation() {
    let vfs = MemVfs::new();
    {
        let e = open_on(Arc::new(vfs.clone()), &config());
        create_pages(&e, 4);
        for i in 0..300u64 {
            set(&e, (i % 4) as u32, i);
        }
        assert!(e.wal().insert_position().0 > 3 * 65536, "several segments");
    } // dropped without a shutdown: a crash, so recovery must read the whole log
    let mut other = config();
    other.set("wal_segment_size", "128kB").unwrap();
    let err = Engine::open_vfs(Arc::new(vfs.clone()), Path::new("/db"), &other, false)
        .expect_err("a different segment size must be refused")
        .to_string();
    assert!(
        err.contains("wal_segment_size") && err.contains("65536") && err.contains("131072"),
        "{err}"
    );
    let e = Engine::open_vfs(Arc::new(vfs.clone()), Path::new("/db"), &config(), false).unwrap();
    for b in 0..4u32 {
        let buf = e.pool().read(tag(b)).unwrap();
        assert_eq!(
            get_u64(&buf.read(), BODY + 8),
            296 + u64::from(b),
            "page {b}"
        );
    }
}

/// Proves (F1, second part): a flush request past everything inserted is an error naming
/// both positions (PostgreSQL's "xlog flush request not satisfied"), never a success: a
/// page whose LSN lies past the log claims log that does not exist.
#[test]
fn a_flush_request_past_the_inserted_log_is_an_error() {
    let vfs = MemVfs::new();
    let e = open_on(Arc::new(vfs.clone()), &config());
    create_pages(&e, 1);
    set(&e, 0, 1);
    let end = e.wal().insert_position();
    let beyond = bufpool::Lsn(end.0 + (1 << 20));
    let err = e
        .wal()
        .flush(beyond)
        .expect_err("nothing was inserted there")
        .to_string();
    assert!(
        err.contains("not satisfied") && err.contains(&beyond.to_string()),
        "{err}"
    );
    e.wal().flush(end).unwrap();
}

/// Proves (S4, what early lock release guarantees): a transaction that saw an
/// early-released commit and then committed itself depends only on durable log. T's row
/// locks are released before its record is durable; U reads T's change in that window
/// (hook `CommitBeforeFlush`), writes what it read elsewhere and commits; a crash right
/// after U's commit returns keeps both: U's flush covers T's earlier record. (What is not
/// guaranteed, a reader that sees T and aborts, or shows it before its own commit, is
/// written in ARCHITECTURE; a crash in the window loses T for it.)
#[test]
fn a_transaction_that_saw_an_early_released_commit_commits_only_after_it_is_durable() {
    use bufpool::engine::HookPoint;
    use bufpool::table::Heap;
    use bufpool::txn::INVALID_XID;
    use std::sync::atomic::{AtomicBool, Ordering};
    let (r1, r2) = (RelFileId::new(0, 542), RelFileId::new(0, 543));
    let row = |v: u64| v.to_le_bytes().to_vec();
    let vfs = MemVfs::new();
    let mut c = config();
    c.set("early_lock_release", "on").unwrap();
    let e = open_on(Arc::new(vfs.clone()), &c);
    let (h1, h2) = (Heap::create(&e, r1).unwrap(), Heap::create(&e, r2).unwrap());
    let x = e.begin_xid().unwrap();
    let (t1, t2) = (
        h1.insert(x, &row(1)).unwrap(),
        h2.insert(x, &row(0)).unwrap(),
    );
    e.commit_transaction(x).unwrap();
    let t = e.begin_xid().unwrap();
    h1.update(t, t1, |_| row(2)).unwrap().unwrap();
    let crashed = Arc::new(std::sync::Mutex::new(None));
    let armed = Arc::new(AtomicBool::new(true));
    {
        let (crashed, vfs, armed) = (crashed.clone(), vfs.clone(), armed.clone());
        e.set_test_hook(
            HookPoint::CommitBeforeFlush,
            Some(Box::new(move |e: Option<&Engine>, _| {
                let e = e.expect("an engine point passes the engine");
                if !armed.swap(false, Ordering::SeqCst) {
                    return; // U's own commit passes here too
                }
                let u = e.begin_xid().unwrap();
                let seen = Heap::open(e, r1).fetch(&e.txns().snapshot(u), t1).unwrap();
                assert_eq!(seen, Some(row(2)), "T has ended: U sees its change");
                Heap::open(e, r2)
                    .update(u, t2, |_| seen.clone().unwrap())
                    .unwrap()
                    .unwrap();
                e.commit_transaction(u).unwrap();
                *crashed.lock().unwrap() = Some(crash_copy(&vfs, Path::new("/db")));
            })),
        );
    }
    e.commit_transaction(t).unwrap();
    e.set_test_hook(HookPoint::CommitBeforeFlush, None);
    let copy = crashed.lock().unwrap().take().expect("the hook ran");
    drop(e);
    let e = open_on(Arc::new(copy), &c);
    let snap = e.txns().snapshot(INVALID_XID);
    assert_eq!(
        Heap::open(&e, r1).fetch(&snap, t1).unwrap(),
        Some(row(2)),
        "T lost"
    );
    assert_eq!(
        Heap::open(&e, r2).fetch(&snap, t2).unwrap(),
        Some(row(2)),
        "U lost"
    );
}

/// Proves that `wal_writer = off` runs no WAL writer thread and the log still works: the
/// flush leader makes the segments it reaches itself (counted), and commits flush.
/// How: 400 logged changes over several 64 kB segments with the knob off; the same knob
/// on runs the thread.
#[test]
fn without_the_wal_writer_the_flush_leader_makes_the_segments() {
    let vfs = MemVfs::new();
    let mut c = config();
    c.set("checkpointer", "off").unwrap();
    assert!(open_on(Arc::new(MemVfs::new()), &c).wal_writer_running());
    c.set("wal_writer", "off").unwrap();
    let e = open_on(Arc::new(vfs.clone()), &c);
    assert!(!e.wal_writer_running());
    create_pages(&e, 8);
    for i in 0..400u64 {
        set(&e, (i % 8) as u32, i);
    }
    let stats = e.wal().stats();
    assert!(
        stats.segments_created_inline >= 2,
        "segments made by the leader: {stats:?}"
    );
    assert_eq!(e.wal().flushed(), e.wal().insert_position());
}

/// A page whose hint bits were set under asynchronous commit right after a flush padded
/// the log to a block boundary carries that boundary as its LSN (the hint's "flush the log
/// to here first"); the log's last record ends before it, and the padding (with its
/// marker) fills the rest. Recovery took the page for one written after lost log records
/// and refused to open a directory nothing was wrong with (found by the simulator once it
/// drew `full_page_writes = off`, which sends every hint down this path). The marked
/// padding is durable log: the page is not past the end.
#[test]
fn a_page_stamped_at_the_padded_end_of_the_log_opens() {
    use bufpool::table::Heap;
    let vfs = MemVfs::new();
    let mut c = config();
    c.set("synchronous_commit", "off").unwrap();
    c.set("full_page_writes", "off").unwrap();
    c.set("wal_writer", "off").unwrap();
    c.set("checkpointer", "off").unwrap();
    c.set("bgwriter", "off").unwrap();
    let rel = RelFileId::new(0, 16500);
    {
        let e = Engine::open_vfs(Arc::new(vfs.clone()), Path::new("/db"), &c, true).unwrap();
        let heap = Heap::create(&e, rel).unwrap();
        let x = e.begin_xid().unwrap();
        heap.insert(x, &[7u8; 100]).unwrap();
        e.commit_transaction(x).unwrap();
        // The flush pads to the block boundary: the insert position is that boundary now.
        e.wal().flush(e.wal().insert_position()).unwrap();
        let boundary = e.wal().insert_position();
        assert_eq!(boundary.0 % 4096, 0);
        // A reader sets the row's hint bit: the page's LSN becomes the boundary.
        let snap = e.txns().snapshot(bufpool::txn::INVALID_XID);
        let mut rows = 0;
        heap.scan(&snap, |_, _| rows += 1).unwrap();
        assert_eq!(rows, 1);
        e.pool().flush_all().unwrap();
        let tag = BufferTag::new(rel, ForkNumber::Main, 0);
        let b = e.pool().read(tag).unwrap();
        assert_eq!(
            bufpool::page::lsn(&b.read()),
            boundary,
            "the hint stamped the boundary"
        );
    } // dropped without a shutdown checkpoint: recovery runs
    let e = Engine::open_vfs(Arc::new(vfs.clone()), Path::new("/db"), &c, true)
        .unwrap_or_else(|err| panic!("a directory with nothing wrong refused: {err}"));
    let heap = Heap::open(&e, rel);
    let snap = e.txns().snapshot(bufpool::txn::INVALID_XID);
    let mut rows = 0;
    heap.scan(&snap, |_, _| rows += 1).unwrap();
    assert_eq!(rows, 1);
}
