//! Buffer-pool behaviour that the stress and fault tests do not pin down.
//!
//! Proves: the WAL hook sees each page's LSN before the page reaches storage, and a failing
//! hook blocks the write; the counters count what happened; every page size works; a page
//! extended but never written reads back as a valid zero page; dropping and truncating
//! relations discard their buffers; the clock hand and free list behave as documented.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use bufpool::buffer::PoolConfig;
use bufpool::{
    BufferError, BufferPool, Config, ForkNumber, IoContext, IoOp, IoWriter, Lsn, MemVfs, RealVfs,
    Smgr, Vfs, WalFlush,
};
use common::*;

/// Records every flush request and, at that moment, what storage holds for block 0.
struct RecordingWal {
    vfs: MemVfs,
    file: std::path::PathBuf,
    seen: Mutex<Vec<(Lsn, Option<u64>)>>,
    fail_at: Option<Lsn>,
}

impl WalFlush for RecordingWal {
    fn flush(&self, lsn: Lsn) -> Result<(), bufpool::buffer::WalFlushError> {
        let on_disk = self
            .vfs
            .contents(&self.file)
            .map(|d| get_u64(&d[..8192], BODY + 8));
        self.seen.lock().unwrap().push((lsn, on_disk));
        match self.fail_at {
            Some(l) if l == lsn => Err("disk full in the log".into()),
            _ => Ok(()),
        }
    }
}

fn mem_pool(fail_at: Option<Lsn>) -> (Arc<RecordingWal>, BufferPool) {
    let vfs = MemVfs::new();
    let c = config("16");
    let smgr = Smgr::open(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        c.smgr_options(true).unwrap(),
    )
    .unwrap();
    let wal = Arc::new(RecordingWal {
        file: smgr.segment_path(REL, ForkNumber::Main, 0),
        vfs,
        seen: Mutex::new(Vec::new()),
        fail_at,
    });
    let pool = BufferPool::new(Arc::new(smgr), &c, wal.clone()).unwrap();
    (wal, pool)
}

#[test]
fn wal_is_flushed_to_the_page_lsn_before_the_page_is_written() {
    let (wal, pool) = mem_pool(None);
    fill(&pool, 1);
    wal.seen.lock().unwrap().clear();
    let b = pool.read(tag(0)).unwrap();
    {
        let mut g = b.write();
        put_u64(&mut g, BODY + 8, 41);
        g.set_lsn(Lsn(0x1234));
    }
    assert!(b.flush().unwrap(), "the dirty page is written");
    assert!(!b.flush().unwrap(), "a clean page is not written again");
    // The hook ran with the page's LSN while storage still held the old contents.
    assert_eq!(*wal.seen.lock().unwrap(), vec![(Lsn(0x1234), Some(0))]);
    drop(b);
    pool.drop_buffers(REL, None, 0).unwrap();
    assert_eq!(get_u64(&pool.read(tag(0)).unwrap().read(), BODY + 8), 41);
}

#[test]
fn failed_wal_flush_blocks_the_write_and_keeps_the_page_dirty() {
    let (_wal, pool) = mem_pool(Some(Lsn(77)));
    fill(&pool, 1);
    let b = pool.read(tag(0)).unwrap();
    {
        let mut g = b.write();
        put_u64(&mut g, BODY + 8, 5);
        g.set_lsn(Lsn(77));
    }
    let err = b.flush().unwrap_err();
    assert!(
        matches!(err, BufferError::WalFlush { lsn: Lsn(77), .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("0/4D") && err.to_string().contains("block 0"),
        "{err}"
    );
    assert_eq!(pool.usage_summary().dirty, 1);
}

#[test]
fn counters_count_hits_reads_writes_extends_evictions_and_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let pool = open(Arc::new(RealVfs::new()), dir.path(), &config("16"));
    let s0 = pool.stats();
    fill(&pool, 20); // 20 extends; 4 evictions of dirty pages; 20 writes; 1 fsync
    let s1 = pool.stats().since(&s0);
    assert_eq!(s1.total(IoOp::Extend), 20);
    assert_eq!(s1.total(IoOp::Eviction), 4);
    assert_eq!(s1.total(IoOp::Write), 20);
    assert_eq!(s1.total(IoOp::Fsync), 1);
    assert_eq!(s1.total(IoOp::Read), 0);
    // Blocks 4..19 are resident: 16 hits. Blocks 0..3 were evicted: 4 reads, 4 evictions.
    for b in (4..20).chain(0..4) {
        drop(pool.read(tag(b)).unwrap());
    }
    let s2 = pool.stats().since(&s0).since(&s1);
    assert_eq!(s2.get(IoWriter::Backend, IoContext::Normal, IoOp::Hit), 16);
    assert_eq!(s2.total(IoOp::Read), 4);
    assert_eq!(s2.total(IoOp::Eviction), 4);
    assert!(s2.time(IoWriter::Backend, IoContext::Normal, IoOp::Read) > std::time::Duration::ZERO);
    // A bgwriter thread's writes are counted under its own role and context.
    std::thread::scope(|s| {
        s.spawn(|| {
            bufpool::stats::set_thread_writer(IoWriter::Bgwriter);
            let b = pool.read_in(tag(0), IoContext::Vacuum).unwrap();
            put_u64(&mut b.write(), BODY + 8, 1);
            assert!(b.flush().unwrap());
            pool.smgr()
                .writeback(REL, ForkNumber::Main, 0, 1, IoContext::Vacuum)
                .unwrap();
        });
    });
    let s3 = pool.stats();
    assert_eq!(s3.get(IoWriter::Bgwriter, IoContext::Vacuum, IoOp::Hit), 1);
    assert_eq!(s3.by_writer(IoWriter::Bgwriter, IoOp::Write), 1);
    assert_eq!(
        s3.get(IoWriter::Bgwriter, IoContext::Vacuum, IoOp::Writeback),
        1
    );
}

#[test]
fn every_page_size_round_trips_through_storage() {
    for size in ["4kB", "8kB", "16kB", "32kB"] {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config("16");
        c.set("block_size", size).unwrap();
        {
            let pool = open(Arc::new(RealVfs::new()), dir.path(), &c);
            assert_eq!(pool.page_size(), c.block_size);
            fill(&pool, 40);
        }
        let pool = open(Arc::new(RealVfs::new()), dir.path(), &c);
        for b in 0..40 {
            let buf = pool.read(tag(b)).unwrap();
            let g = buf.read();
            assert_eq!(g.len(), c.block_size);
            assert_eq!(get_u64(&g, BODY), u64::from(b), "{size} block {b}");
        }
    }
}

#[test]
fn extended_but_never_written_page_reads_back_as_zeros() {
    let dir = tempfile::tempdir().unwrap();
    {
        let pool = open(Arc::new(RealVfs::new()), dir.path(), &config("16"));
        pool.create_relation(REL, ForkNumber::Main).unwrap();
        drop(pool.extend(REL, ForkNumber::Main).unwrap());
        assert_eq!(
            pool.flush_all().unwrap(),
            0,
            "an untouched new page is clean"
        );
    }
    let pool = open(Arc::new(RealVfs::new()), dir.path(), &config("16"));
    let b = pool.read(tag(0)).unwrap();
    let g = b.read();
    assert!(g.iter().all(|&x| x == 0));
    assert!(bufpool::page::is_new(&g));
}

#[test]
fn drop_and_truncate_discard_buffers_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let pool = open(Arc::new(RealVfs::new()), dir.path(), &config("16"));
    fill(&pool, 10);
    let b = pool.read(tag(9)).unwrap();
    put_u64(&mut b.write(), BODY + 8, 3);
    drop(b);
    pool.truncate_relation(REL, ForkNumber::Main, 5).unwrap();
    assert_eq!(pool.nblocks(REL, ForkNumber::Main).unwrap(), 5);
    assert_eq!(
        pool.usage_summary().dirty,
        0,
        "the dirty page past the end was discarded"
    );
    assert!(pool.read(tag(7)).is_err());
    let held = pool.read(tag(2)).unwrap();
    let err = pool.drop_relation(REL).unwrap_err();
    assert!(matches!(err, BufferError::Pinned { .. }), "{err}");
    drop(held);
    pool.drop_relation(REL).unwrap();
    assert!(!dir.path().join("base/0/16384").exists());
    assert_eq!(pool.usage_summary().valid, 0);
    pool.check_invariants().unwrap();
    // Freed buffers are reused before the clock has to sweep.
    fill(&pool, 3);
    assert_eq!(pool.stats().total(IoOp::Eviction), 0);
}

#[test]
fn clock_hand_counts_completed_passes() {
    let dir = tempfile::tempdir().unwrap();
    let pool = open(Arc::new(RealVfs::new()), dir.path(), &config("16"));
    assert_eq!(pool.clock_position(), (0, 0));
    fill(&pool, 16); // served by the free list: the hand does not move
    assert_eq!(pool.clock_position(), (0, 0));
    for b in 0..16 {
        drop(
            pool.extend(REL, ForkNumber::Main)
                .unwrap_or_else(|e| panic!("extend {b}: {e}")),
        );
    }
    let (passes, _) = pool.clock_position();
    assert!(
        passes >= 1,
        "16 evictions from a full 16-buffer pool need at least one pass"
    );
    assert_eq!(pool.allocations(), 32);
}

#[test]
fn huge_page_choice_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut c: Config = config("16MB");
    c.set("huge_pages", "off").unwrap();
    let pool = open(Arc::new(RealVfs::new()), dir.path(), &c);
    assert_eq!(pool.huge_pages(), bufpool::buffer::HugePageUse::None);
    drop(pool);
    c.set("huge_pages", "on").unwrap();
    // This machine reserves no explicit huge pages (vm.nr_hugepages = 0) in CI; where it
    // does, "on" succeeds and must report them.
    match BufferPool::open(Arc::new(RealVfs::new()), dir.path(), &c, true) {
        Ok(p) => assert_eq!(p.huge_pages(), bufpool::buffer::HugePageUse::Explicit),
        Err(e) => assert!(e.to_string().contains("huge_pages=on"), "{e}"),
    }
}

#[test]
fn io_direct_round_trips_pages_through_aligned_buffers() {
    // ext4 and xfs accept O_DIRECT; tmpfs refuses it with EINVAL at open. Use the build
    // directory, which is on the project's file system, not /tmp.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut c = config("16");
    c.set("io_direct", "on").unwrap();
    {
        let pool = open(Arc::new(RealVfs::new()), dir.path(), &c);
        fill(&pool, 40); // extends, evictions and flushes all go through O_DIRECT
    }
    let pool = open(Arc::new(RealVfs::new()), dir.path(), &c);
    for b in 0..40 {
        assert_eq!(
            get_u64(&pool.read(tag(b)).unwrap().read(), BODY),
            u64::from(b)
        );
    }
    assert_eq!(pool.stats().total(IoOp::Read), 40);
}
