//! Transactions as handles ([`bufpool::engine::Transaction`]).
//!
//! Proves: a handle that is committed makes its rows visible; one that is dropped without
//! a commit (a forgotten handle, an early `?` return, a panic) is aborted: its rows are
//! never visible, it leaves the running set, and it no longer holds back the pruning
//! horizon; an explicit abort does the same. How: rows inserted under each handle, then
//! snapshots, the running set, the commit log's status and `oldest_xmin` checked.

use std::path::Path;
use std::sync::Arc;

use bufpool::table::Heap;
use bufpool::txn::{XidStatus, INVALID_XID};
use bufpool::{Config, Engine, HeapError, MemVfs, RelFileId, Vfs};

const REL: RelFileId = RelFileId::new(0, 920);

fn open(vfs: &MemVfs) -> Engine {
    let mut c = Config::default();
    c.set("shared_buffers", "32").unwrap();
    c.set("wal_segment_size", "1MB").unwrap();
    Engine::open(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &c,
        true,
    )
    .unwrap()
}

fn visible(e: &Engine, heap: &Heap<'_>) -> Vec<Vec<u8>> {
    let snap = e.txns().snapshot(INVALID_XID);
    let mut rows = Vec::new();
    heap.scan(&snap, |_, d| rows.push(d.to_vec())).unwrap();
    rows.sort();
    rows
}

#[test]
fn committed_handles_are_visible_and_dropped_ones_are_aborted() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();

    let t = e.begin().unwrap();
    heap.insert(t.xid(), b"kept").unwrap();
    let committed = t.xid();
    t.commit().unwrap();

    let forgotten = {
        let t = e.begin().unwrap();
        heap.insert(t.xid(), b"forgotten").unwrap();
        assert!(e.txns().is_running(t.xid()));
        t.xid()
    }; // dropped here
    let explicit = {
        let t = e.begin().unwrap();
        heap.insert(t.xid(), b"aborted").unwrap();
        let x = t.xid();
        t.abort().unwrap();
        x
    };
    assert_eq!(visible(&e, &heap), vec![b"kept".to_vec()]);
    for x in [forgotten, explicit] {
        assert!(!e.txns().is_running(x), "transaction {x} still running");
        assert_eq!(e.txns().status(x).unwrap(), XidStatus::Aborted);
    }
    assert_eq!(e.txns().status(committed).unwrap(), XidStatus::Committed);
    assert!(
        e.txns().oldest_xmin() > explicit,
        "nothing holds back the horizon: {}",
        e.txns().oldest_xmin()
    );
}

#[test]
fn an_early_return_or_a_panic_aborts_the_transaction() {
    let vfs = MemVfs::new();
    let e = open(&vfs);
    let heap = Heap::create(&e, REL).unwrap();

    // `?` leaves the function with the handle still open.
    fn fails_half_way(e: &Engine, heap: &Heap<'_>) -> Result<(), HeapError> {
        let t = e.begin()?;
        heap.insert(t.xid(), b"half")?;
        heap.insert(t.xid(), &vec![0u8; 1 << 20])?; // too large: an error
        t.commit()?;
        Ok(())
    }
    assert!(fails_half_way(&e, &heap).is_err());

    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let t = e.begin().unwrap();
        heap.insert(t.xid(), b"panicked").unwrap();
        panic!("the caller fails with the transaction open");
    }));
    assert!(r.is_err());
    assert!(visible(&e, &heap).is_empty(), "neither row is visible");
    let next = e.begin().unwrap();
    assert_eq!(
        e.txns().oldest_xmin(),
        next.xid(),
        "the only running transaction is the newest"
    );
    next.commit().unwrap();
}
