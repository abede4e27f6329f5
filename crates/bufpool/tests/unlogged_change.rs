//! A change whose WAL record could not be inserted never reaches the data files.
//!
//! Proves (issue 11, defect 1): after a heap update changed a page but its log insert
//! failed (the log had latched an earlier write failure), no path writes that page: not a
//! flush of all buffers, not a checkpoint, not an eviction; the data file keeps only
//! logged contents, and reopening the directory recovers a consistent state without the
//! change. How: a fault-injecting vfs over an in-memory one fails the first write of a log
//! segment after the setup; a marker value in the updated row is searched for in the data
//! file's bytes on the in-memory vfs underneath, after each write attempt.

use std::path::Path;
use std::sync::Arc;

use bufpool::table::{Heap, Tid};
use bufpool::testing::{FaultKind, FaultOp, FaultRule, FaultVfs};
use bufpool::txn::INVALID_XID;
use bufpool::{Config, Engine, ForkNumber, MemVfs, RelFileId, Vfs};

const REL: RelFileId = RelFileId::new(0, 910);
const OTHER: RelFileId = RelFileId::new(0, 911);
const LOG_FAILS_HERE: RelFileId = RelFileId::new(0, 912);
/// A value no logged row holds: if the data file ever contains it, the unlogged change
/// reached disk.
const MARKER: u64 = 0x5eed_0bad_c0de_f00d;

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "16").unwrap();
    c.set("wal_segment_size", "1MB").unwrap();
    c
}

fn row(id: u64, v: u64) -> Vec<u8> {
    let mut r = id.to_le_bytes().to_vec();
    r.extend_from_slice(&v.to_le_bytes());
    r.extend_from_slice(&[7u8; 84]);
    r
}

fn data_file_holds_marker(mem: &MemVfs) -> bool {
    let path = Path::new("/db/base/0/910");
    let bytes = mem.contents(path).unwrap_or_default();
    bytes.windows(8).any(|w| w == MARKER.to_le_bytes())
}

#[test]
fn a_change_that_could_not_be_logged_is_never_written() {
    let mem = MemVfs::new();
    let vfs = FaultVfs::new(Arc::new(mem.clone()));
    let e = Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &config(),
        true,
    )
    .unwrap();
    let heap = Heap::create(&e, REL).unwrap();
    let other = Heap::create(&e, LOG_FAILS_HERE).unwrap();
    let x = e.begin_xid().unwrap();
    let root: Tid = heap.insert(x, &row(1, 100)).unwrap();
    e.commit_transaction(x).unwrap();
    e.checkpoint().unwrap();
    assert!(!data_file_holds_marker(&mem));

    // The log's next write fails: the commit that needs it fails and the log latches.
    // (Another table: the page updated below keeps an LSN the log has made durable, so
    // only a check of the failure itself can stop its write.)
    vfs.add_rule(FaultRule::nth("/wal/", FaultOp::Write, 1, FaultKind::Eio));
    let y = e.begin_xid().unwrap();
    other.insert(y, &row(2, 200)).unwrap();
    let err = e.commit_transaction(y).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");

    // This update changes the page in the pool, then cannot log it.
    let z = e.begin_xid().unwrap();
    let err = heap
        .update(z, root, |_| row(1, MARKER))
        .expect_err("an update must not succeed on a failed log");
    let msg = err.to_string();
    assert!(msg.contains("failed earlier"), "{msg}");

    // No write path may now write a dirty page.
    let err = e.pool().flush_all().unwrap_err();
    assert!(err.to_string().contains("failed earlier"), "{err}");
    assert!(
        !data_file_holds_marker(&mem),
        "flush_all wrote the unlogged change"
    );
    assert!(
        e.checkpoint().is_err(),
        "a checkpoint succeeded after an unlogged change"
    );
    assert!(!data_file_holds_marker(&mem), "the checkpoint wrote it");
    // Eviction: read more pages than the pool holds, from another relation.
    e.pool().create_relation(OTHER, ForkNumber::Main).unwrap();
    for _ in 0..40 {
        match e.pool().extend(OTHER, ForkNumber::Main) {
            Ok(b) => drop(b),
            Err(_) => break, // a victim that must be written refuses: that is correct
        }
    }
    assert!(!data_file_holds_marker(&mem), "an eviction wrote it");

    drop(e);

    // Reopen without faults: the committed row is there, unchanged; nothing of y or z.
    let e = Engine::open_vfs(
        Arc::new(mem.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &config(),
        false,
    )
    .unwrap();
    let heap = Heap::open(&e, REL);
    let snap = e.txns().snapshot(INVALID_XID);
    let mut rows = Vec::new();
    heap.scan(&snap, |_, d| {
        rows.push((
            u64::from_le_bytes(d[0..8].try_into().unwrap()),
            u64::from_le_bytes(d[8..16].try_into().unwrap()),
        ))
    })
    .unwrap();
    assert_eq!(rows, vec![(1, 100)]);
}
