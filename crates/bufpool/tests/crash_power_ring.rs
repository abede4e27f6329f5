//! Power-loss test of the ring users: a bulk load through a growing bulk-write ring (many
//! pages added per storage call, ring members reused and written while the load runs),
//! then a delete of every third row and a VACUUM through a small fixed vacuum ring, on a
//! pool large enough that the rings really cycle; crashed after every k-th I/O, and each
//! crash resolved under several seeds by the simulator (unsynced writes kept, dropped,
//! torn or garbaged).
//!
//! Proves: after recovery a fresh snapshot sees exactly one of the states the
//! acknowledged commits allow (nothing before the load's commit returned, all rows once
//! it did, the rows without the deleted ones once the delete's commit returned; a commit
//! that reached the log without being acknowledged may show up too), fetched by tuple id
//! and by a full scan. Pages a ring wrote early (before the WAL was flushed by a commit)
//! are written only after their WAL, so the log restores them; pages added in one
//! storage call but never logged hold nothing committed: a scan may meet one (a failed
//! checksum on a page the load added) only while the load's commit is not acknowledged.
//! How: `power/mod.rs`'s `explore`, as the other power tests.

mod power;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use bufpool::table::{Heap, Tid};
use bufpool::testing::SimVfs;
use bufpool::txn::INVALID_XID;
use bufpool::{
    BufferError, Config, Engine, EngineError, ForkNumber, HeapError, RelFileId, Ring, RingKind,
    RingStats, Vfs,
};

const REL: RelFileId = RelFileId::new(0, 970);
/// Rows of the load: about 36 a 4 kB page, so about 170 pages: beyond the bulk-write
/// ring's start (64 slots) and cap (128: a 1024-buffer pool / 8).
const ROWS: u64 = 6000;

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "1024").unwrap();
    c.set("block_size", "4kB").unwrap();
    c.set("wal_segment_size", "1MB").unwrap();
    // Room for the whole load's log in memory: otherwise a full WAL ring flushes the log
    // before the bulk-write ring comes round, and the ring never meets an unflushed page.
    c.set("wal_buffers", "4MB").unwrap();
    c
}

fn open(vfs: &SimVfs) -> Result<Engine, EngineError> {
    Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &config(),
        true,
    )
}

fn row(id: u64) -> Vec<u8> {
    let mut r = id.to_le_bytes().to_vec();
    r.resize(96, (id % 251) as u8);
    r
}

/// An empty table, committed and checkpointed.
fn new_table() -> SimVfs {
    let vfs = SimVfs::new();
    let e = open(&vfs).unwrap();
    Heap::create(&e, REL).unwrap();
    e.checkpoint().unwrap();
    vfs
}

/// What a run acknowledged: the load's commit, the delete's commit.
#[derive(Debug, Clone, Copy, Default)]
struct Acked {
    load: bool,
    delete: bool,
    /// What the rings did (to show the run exercised them).
    bulkwrite: RingStats,
    vacuum: RingStats,
}

/// Load, delete every third row, vacuum; stops at the first failure (the power cut).
fn workload(vfs: &SimVfs, n: u64) -> Acked {
    let mut acked = Acked::default();
    let Ok(e) = open(vfs) else { return acked };
    let heap = Heap::open(&e, REL);
    vfs.crash_after(n);
    let pool = e.pool();
    let mut tids = Vec::new();
    let loaded = (|| -> Result<(), bufpool::Error> {
        let x = e.begin_xid()?;
        let mut ring = Ring::with_growth(RingKind::BulkWrite, 1 << 20, true, pool);
        heap.bulk_load_with(
            x,
            false,
            (0..ROWS).map(row),
            |t| tids.push(t),
            &mut |_| {},
            ring.as_mut(),
        )?;
        e.commit_transaction(x)?;
        Ok(())
    })();
    if loaded.is_err() {
        return acked;
    }
    acked.load = true;
    let deleted = (|| -> Result<(), bufpool::Error> {
        let x = e.begin_xid()?;
        for (id, tid) in tids.iter().enumerate() {
            if id % 3 == 0 {
                heap.delete(x, *tid)?;
            }
        }
        e.commit_transaction(x)?;
        Ok(())
    })();
    if deleted.is_err() {
        return acked;
    }
    acked.delete = true;
    acked.bulkwrite = pool.ring_stats(RingKind::BulkWrite);
    // VACUUM on a cold table (checkpointed, its pages dropped from the pool), so it
    // misses and its ring cycles.
    if e.checkpoint().is_err() || pool.drop_buffers(REL, Some(ForkNumber::Main), 0).is_err() {
        return acked;
    }
    let mut ring = Ring::with_growth(RingKind::Vacuum, 128 << 10, false, pool);
    let _ = heap.vacuum_with(false, ring.as_mut());
    acked.vacuum = pool.ring_stats(RingKind::Vacuum);
    acked
}

/// The ids a fresh snapshot sees by a full scan, or `None` if the scan met a page that
/// fails its checksum (allowed only while the load is unacknowledged).
fn visible(e: &Engine, heap: &Heap<'_>) -> Option<BTreeSet<u64>> {
    let snap = e.txns().snapshot(INVALID_XID);
    let mut ids = BTreeSet::new();
    let scan = heap.scan(&snap, |_, d| {
        let id = u64::from_le_bytes(d[..8].try_into().unwrap());
        assert_eq!(d, &row(id)[..], "row {id} has the wrong bytes");
        assert!(ids.insert(id), "row {id} visible twice");
    });
    match scan {
        Ok(()) => Some(ids),
        Err(HeapError::Engine(EngineError::Buffer(BufferError::Corrupt { tag, .. })))
            if tag.rel == REL =>
        {
            None
        }
        Err(err) => panic!("scanning the table: {err}"),
    }
}

#[test]
fn power_loss_during_ring_bulk_load_and_vacuum() {
    let base = new_table();
    let total = {
        let vfs = base.duplicate();
        let before = vfs.io_count();
        let acked = workload(&vfs, u64::MAX);
        assert!(acked.load && acked.delete, "the run without a crash failed");
        // The rings cycled: the load's grew, then reused members whose WAL it had to
        // flush; VACUUM's reused its members.
        let (w, v) = (acked.bulkwrite, acked.vacuum);
        assert!(
            w.grows > 0 && w.reuses > 0 && w.wal_flushes_forced > 0,
            "{w:?}"
        );
        assert!(v.reuses > 0 && v.wal_flushes_forced > 0, "{v:?}");
        vfs.io_count() - before
    };
    let none = BTreeSet::new();
    let all: BTreeSet<u64> = (0..ROWS).collect();
    let kept: BTreeSet<u64> = (0..ROWS).filter(|id| id % 3 != 0).collect();
    let step = (total / 30).max(1);
    let tally = power::explore(
        "power_loss_during_ring_bulk_load_and_vacuum",
        (0..=total).step_by(step as usize),
        1,
        power::seeds(3),
        &base,
        workload,
        |vfs, acked, _report, _ctx| {
            let e = open(vfs).unwrap_or_else(|err| panic!("reopen failed: {err}"));
            let heap = Heap::open(&e, REL);
            match visible(&e, &heap) {
                None => assert!(!acked.load, "a failed checksum after the load's commit"),
                Some(ids) => {
                    let allowed: &[&BTreeSet<u64>] = match (acked.load, acked.delete) {
                        (_, true) => &[&kept],
                        (true, false) => &[&all, &kept],
                        (false, _) => &[&none, &all, &kept],
                    };
                    assert!(
                        allowed.contains(&&ids),
                        "{} rows visible, acknowledged {acked:?}",
                        ids.len()
                    );
                    if acked.load {
                        // Fetched by tuple id too (as an index would): the same rows.
                        let snap = e.txns().snapshot(INVALID_XID);
                        let blocks = e.pool().nblocks(REL, ForkNumber::Main).unwrap();
                        let mut n = 0;
                        for block in 0..blocks {
                            for slot in 1..=64u16 {
                                if let Ok(Some(d)) = heap.fetch(&snap, Tid { block, slot }) {
                                    assert_eq!(
                                        d[..],
                                        row(u64::from_le_bytes(d[..8].try_into().unwrap()))[..]
                                    );
                                    n += 1;
                                }
                            }
                        }
                        assert_eq!(n, ids.len(), "fetches and the scan disagree");
                    }
                }
            }
        },
    );
    tally.print("power_loss_during_ring_bulk_load_and_vacuum", "");
    assert!(tally.states > 30, "{} states", tally.states);
}
