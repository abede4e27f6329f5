//! Model test of ring membership with shuttle.
//!
//! Run with `RUSTFLAGS="--cfg shuttle" cargo test -p pgbufpool --target-dir target/shuttle --test ring_model`. Under the feature
//! every atomic, lock and condition variable of the pool comes from shuttle, which runs the
//! real pool code under random and PCT schedules.
//! Proves: a ring owner and another thread that pins, uses and dirties the ring's members
//! never break each other: a ring never takes a buffer someone holds pinned (each thread's
//! pinned page keeps its contents and tag across a yield), a member someone else took or
//! retagged is not reused under them, no dirty change is lost (after the run and a flush,
//! storage holds every update), no page on storage is ahead of the log's durable end (the
//! write-time check is `buffer/ring.rs`'s unit test), and the pool's invariants hold
//! afterwards. Both a bulk-read ring (which rejects dirty
//! members whose WAL is not durable) and a fixed vacuum ring (which forces the flush) are
//! modeled. How: a 16-buffer pool with 12 buffers pinned by the test for the whole run, so
//! 4 buffers are fought over by the ring (2 slots: 16 / 8) and the other thread; the log
//! is a mock whose durable end moves only when the pool flushes it.
#![cfg(shuttle)]

mod shuttle_check;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bufpool::buffer::WalFlushError;
use bufpool::{
    BufferPool, BufferTag, Config, ForkNumber, Lsn, MemVfs, RelFileId, Ring, RingKind, Smgr, Vfs,
    WalFlush,
};

const BODY: usize = bufpool::page::PAGE_HEADER_SIZE;
const FILLER: RelFileId = RelFileId::new(0, 1);
const DATA: RelFileId = RelFileId::new(0, 2);
const PAGES: u32 = 6;

fn get(page: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(page[off..off + 8].try_into().unwrap())
}

fn put(page: &mut [u8], off: usize, v: u64) {
    page[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// A log whose durable end moves only when the pool flushes it; every page the pool
/// writes must be at or below it, which `check` can verify after the write.
#[derive(Debug, Default)]
struct MockWal {
    flushed: AtomicU64,
    next: AtomicU64,
}

impl MockWal {
    fn next_lsn(&self) -> Lsn {
        Lsn(self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

impl WalFlush for MockWal {
    fn flush(&self, lsn: Lsn) -> Result<(), WalFlushError> {
        self.flushed.fetch_max(lsn.0, Ordering::Relaxed);
        Ok(())
    }
    fn flush_needed(&self, lsn: Lsn) -> bool {
        self.flushed.load(Ordering::Relaxed) < lsn.0
    }
}

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "16").unwrap();
    c.set("block_size", "4kB").unwrap();
    c.set("buffer_mapping_partitions", "4").unwrap();
    c
}

fn tag(rel: RelFileId, block: u32) -> BufferTag {
    BufferTag::new(rel, ForkNumber::Main, block)
}

fn new_pool(vfs: &MemVfs, wal: Arc<MockWal>) -> Arc<BufferPool> {
    let c = config();
    let smgr = Smgr::open(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        bufpool::buffer::PoolConfig::smgr_options(&c, true).unwrap(),
    )
    .unwrap();
    Arc::new(BufferPool::new(Arc::new(smgr), &c, wal).unwrap())
}

/// Creates `rel` with `n` pages, page b stamped with b.
fn fill(pool: &BufferPool, rel: RelFileId, n: u32) {
    pool.create_relation(rel, ForkNumber::Main).unwrap();
    for b in 0..n {
        let buf = pool.extend(rel, ForkNumber::Main).unwrap();
        let mut g = buf.write();
        bufpool::page::init(&mut g, 0);
        put(&mut g, BODY, u64::from(b));
    }
    pool.flush_all().unwrap();
    pool.drop_buffers(rel, None, 0).unwrap();
}

/// One visit: pin `b` (through `ring` if given), bump its counter with a new LSN if
/// `dirty`, yield while pinned, and check the page is still ours.
fn visit(
    pool: &BufferPool,
    wal: &MockWal,
    bumps: &[AtomicU64],
    ring: Option<&mut Ring>,
    b: u32,
    dirty: bool,
) {
    let buf = pool.read_with(tag(DATA, b), ring).unwrap();
    {
        let mut g = buf.write();
        assert_eq!(get(&g, BODY), u64::from(b), "wrong page in buffer");
        if dirty {
            let v = get(&g, BODY + 8);
            put(&mut g, BODY + 8, v + 1);
            g.set_lsn(wal.next_lsn());
            bumps[b as usize].fetch_add(1, Ordering::Relaxed);
        }
    }
    shuttle::thread::yield_now();
    assert_eq!(buf.tag(), tag(DATA, b), "pinned buffer was retagged");
    assert_eq!(
        get(&buf.read(), BODY),
        u64::from(b),
        "pinned buffer was evicted"
    );
}

fn ring_members_shared_with_another_thread(kind: RingKind) {
    let vfs = MemVfs::new();
    let wal = Arc::new(MockWal::default());
    let bumps: Arc<Vec<AtomicU64>> = Arc::new((0..PAGES).map(|_| AtomicU64::new(0)).collect());
    {
        let pool = new_pool(&vfs, wal.clone());
        fill(&pool, FILLER, 12);
        fill(&pool, DATA, PAGES);
        let held: Vec<_> = (0..12)
            .map(|b| pool.read(tag(FILLER, b)).unwrap())
            .collect();
        let owner = {
            let (pool, wal, bumps) = (pool.clone(), wal.clone(), bumps.clone());
            shuttle::thread::spawn(move || {
                let mut ring = Ring::with_growth(kind, 1 << 20, false, &pool).unwrap();
                assert_eq!(ring.len(), 2);
                for round in 0..2 {
                    for b in 0..PAGES {
                        visit(
                            &pool,
                            &wal,
                            &bumps,
                            Some(&mut ring),
                            b,
                            (b + round) % 2 == 0,
                        );
                    }
                }
                ring.check_invariants().unwrap();
            })
        };
        let other = {
            let (pool, wal, bumps) = (pool.clone(), wal.clone(), bumps.clone());
            shuttle::thread::spawn(move || {
                for b in [1, 0, 3, 2] {
                    visit(&pool, &wal, &bumps, None, b, true);
                }
            })
        };
        owner.join().unwrap();
        other.join().unwrap();
        drop(held);
        pool.flush_all().unwrap();
        pool.check_invariants().unwrap();
    }
    // A fresh pool over the same storage sees every update, and (WAL before data) no page
    // on storage is beyond the mock log's durable end.
    let flushed = wal.flushed.load(Ordering::Relaxed);
    let pool = new_pool(&vfs, Arc::new(MockWal::default()));
    for b in 0..PAGES {
        let buf = pool.read(tag(DATA, b)).unwrap();
        let g = buf.read();
        assert_eq!(
            get(&g, BODY + 8),
            bumps[b as usize].load(Ordering::Relaxed),
            "lost update on page {b}"
        );
        assert!(g.lsn().0 <= flushed, "page {b} on storage beyond the WAL");
    }
}

#[test]
fn model_bulkread_ring_members_random() {
    shuttle_check::check_random(
        || ring_members_shared_with_another_thread(RingKind::BulkRead),
        1000,
    );
}

#[test]
fn model_bulkread_ring_members_pct() {
    shuttle_check::check_pct(
        || ring_members_shared_with_another_thread(RingKind::BulkRead),
        1000,
        3,
    );
}

#[test]
fn model_vacuum_ring_members_random() {
    shuttle_check::check_random(
        || ring_members_shared_with_another_thread(RingKind::Vacuum),
        1000,
    );
}

#[test]
fn model_vacuum_ring_members_pct() {
    shuttle_check::check_pct(
        || ring_members_shared_with_another_thread(RingKind::Vacuum),
        1000,
        3,
    );
}
