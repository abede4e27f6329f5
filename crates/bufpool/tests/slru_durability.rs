//! Durability of the commit log (the `xact` SLRU) through the engine.
//!
//! Proves: a failed fsync of a commit-log file is latched (the checkpoint that met it and
//! every later one fail, so no checkpoint releases the WAL the statuses depend on, and a
//! reopen recovers them from that WAL). How: `FaultVfs` over a `MemVfs` fails one fsync of
//! the commit-log segment; the test then plays the kernel that dropped the written pages
//! (puts back the segment's bytes from before) and reopens the engine on the `MemVfs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bufpool::txn::{Xid, XidStatus};
use bufpool::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs, MemVfs, Vfs};
use bufpool::{Config, Engine};

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "32").unwrap();
    c.set("block_size", "8kB").unwrap();
    c.set("wal_segment_size", "64kB").unwrap();
    c
}

fn dir() -> &'static Path {
    Path::new("/db")
}

fn clog_segment() -> PathBuf {
    dir().join("xact").join("0000")
}

fn open(vfs: Arc<dyn Vfs>) -> Engine {
    Engine::open(vfs, dir(), &config(), true).unwrap()
}

/// Runs `n` transactions, committing two in three and aborting the rest; returns each id
/// with whether it committed.
fn decide(e: &Engine, n: usize) -> Vec<(Xid, bool)> {
    (0..n)
        .map(|i| {
            let x = e.begin().unwrap();
            let commit = i % 3 != 0;
            if commit {
                e.commit_transaction(x).unwrap();
            } else {
                e.abort_transaction(x).unwrap();
            }
            (x, commit)
        })
        .collect()
}

/// Every committed id reads as committed, every aborted one as aborted.
fn check_statuses(e: &Engine, outcomes: &[(Xid, bool)], what: &str) {
    for &(x, committed) in outcomes {
        let want = if committed {
            XidStatus::Committed
        } else {
            XidStatus::Aborted
        };
        assert_eq!(e.txns().status(x).unwrap(), want, "{what}: transaction {x}");
    }
}

/// A failed fsync of the commit-log segment fails the checkpoint with an error naming the
/// file and EIO, and is latched: the next checkpoint fails too, and no WAL segment from
/// the last good checkpoint's redo point on is released. Then the written pages are lost
/// (as the kernel may drop them after a failed fsync) and the directory is reopened:
/// recovery replays the statuses from the kept WAL, and every committed transaction reads
/// as committed.
#[test]
fn failed_clog_fsync_is_latched_and_statuses_are_recovered_from_wal() {
    let mem = MemVfs::new();
    let fault = FaultVfs::new(Arc::new(mem.clone()));
    let e = open(Arc::new(fault.clone()));
    let mut outcomes = decide(&e, 20);
    e.checkpoint().unwrap();
    let good_redo = e.wal().redo();
    let durable_clog = mem
        .contents(&clog_segment())
        .expect("the checkpoint wrote it");
    // Each synchronous commit pads the log to 4 KiB: 60 commits span several segments.
    let later = decide(&e, 90);
    outcomes.extend_from_slice(&later);
    let seg_size = e.wal().segment_size();
    let first_needed = good_redo.0 / seg_size;
    let last_needed = e.wal().insert_position().0 / seg_size;
    assert!(
        last_needed >= first_needed + 2,
        "the test needs a few segments"
    );

    fault.add_rule(FaultRule::nth(
        "xact/0000",
        FaultOp::Fsync,
        1,
        FaultKind::Eio,
    ));
    let err = e.checkpoint().expect_err("the commit log's fsync failed");
    let msg = err.to_string();
    assert!(
        msg.contains("xact/0000") && msg.contains("os error 5"),
        "the error names the file and EIO: {msg}"
    );
    let again = e
        .checkpoint()
        .expect_err("a failed commit-log fsync is latched: the next checkpoint fails too");
    assert!(again.to_string().contains("xact/0000"), "{again}");
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{msg}");
    let kept = e.wal().segment_numbers().unwrap();
    for seg in first_needed..=last_needed {
        assert!(
            kept.contains(&seg),
            "WAL segment {seg} holds statuses the commit log may have lost: {kept:?}"
        );
    }
    // The engine keeps working in memory until it is reopened.
    let more = decide(&e, 3);
    outcomes.extend_from_slice(&more);
    check_statuses(&e, &outcomes, "before reopening");
    drop(e);

    // The kernel dropped the pages whose fsync failed.
    mem.set_contents(&clog_segment(), durable_clog);
    let e = open(Arc::new(mem.clone()));
    let report = e.recovery_report().expect("recovery ran").clone();
    assert_eq!(
        report.redo, good_redo,
        "replay starts at the last good redo"
    );
    assert!(
        report.commits >= later.iter().filter(|o| o.1).count() as u64,
        "{report:?}"
    );
    check_statuses(&e, &outcomes, "after reopening");
    e.checkpoint().unwrap();
}
