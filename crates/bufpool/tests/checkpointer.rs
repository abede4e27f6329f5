//! The engine's checkpointer: requests, the WAL-volume trigger, spreading, shutdown in the
//! middle of a spread checkpoint, and a failed fsync.
//!
//! Proves: a requested checkpoint runs on the checkpointer thread and is counted and logged
//! in the history; enough WAL triggers a checkpoint by itself; a spread checkpoint that
//! would take an hour finishes at full speed when the engine shuts down, and every page it
//! marked is written; a failed fsync fails the checkpoint, leaves the control file at the
//! previous checkpoint (so recovery replays what the data files may have lost), and keeps
//! failing until the directory is reopened.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bufpool::engine::CheckpointReason;
use bufpool::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs};
use bufpool::wal::FLAG_COMMIT;
use bufpool::{BufferTag, Config, Engine, ForkNumber, MemVfs, RelFileId, Vfs};
use common::{get_u64, put_u64, BODY};

const REL: RelFileId = RelFileId::new(0, 600);

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "256").unwrap();
    c.set("block_size", "4kB").unwrap();
    c.set("wal_segment_size", "64kB").unwrap();
    c.set("min_wal_size", "128kB").unwrap();
    c
}

fn open_on(vfs: Arc<dyn Vfs>, c: &Config) -> Engine {
    Engine::open_vfs(vfs, Path::new("/db"), c, true).unwrap()
}

fn tag(b: u32) -> BufferTag {
    BufferTag::new(REL, ForkNumber::Main, b)
}

/// Adds `n` pages, page b holding b at BODY, each a committed, logged change.
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

/// Sets the u64 at BODY+8 of every page in `0..n` to `v`, one committed change each.
fn update_all(e: &Engine, n: u32, v: u64) {
    for b in 0..n {
        let buf = e.pool().read(tag(b)).unwrap();
        let mut g = buf.write();
        put_u64(&mut g, BODY + 8, v + u64::from(b));
        let r = BODY + 8..BODY + 16;
        let end = e
            .log_pages(1, FLAG_COMMIT, &mut [(&mut g, std::slice::from_ref(&r))])
            .unwrap();
        drop(g);
        e.commit(end).unwrap();
    }
}

fn check_all(e: &Engine, n: u32, v: u64) {
    for b in 0..n {
        let buf = e.pool().read(tag(b)).unwrap();
        let g = buf.read();
        assert_eq!(get_u64(&g, BODY), u64::from(b));
        assert_eq!(get_u64(&g, BODY + 8), v + u64::from(b), "page {b}");
    }
}

/// Waits (polling, with a deadline) until `cond` holds.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_requested_checkpoint_runs_on_the_thread_and_is_counted_and_logged() {
    let e = open_on(Arc::new(MemVfs::new()), &config());
    assert!(e.checkpointer_running());
    create_pages(&e, 100);
    let before = e.checkpointer_stats();
    e.request_checkpoint(true, true).unwrap();
    let after = e.checkpointer_stats();
    assert_eq!(after.num_requested, before.num_requested + 1);
    assert_eq!(after.num_done, before.num_done + 1);
    assert!(after.buffers_written >= before.buffers_written + 100);
    let last = *e.checkpoint_history().last().unwrap();
    assert_eq!(last.reason, CheckpointReason::Requested);
    assert!(last.immediate);
    assert_eq!(last.buffers_written, 100, "{last}");
    assert!(last.write_calls < 100, "adjacent pages combined: {last}");
    assert!(last.sync_files >= 1, "{last}");
    let line = last.to_string();
    assert!(
        line.starts_with("checkpoint complete: wrote 100 buffers (39.1%);")
            && line.contains("WAL file(s) added")
            && line.contains("sync files=")
            && line.contains("redo lsn="),
        "{line}"
    );
    assert_eq!(e.pool().usage_summary().dirty, 0);
    e.shutdown().unwrap();
}

#[test]
fn enough_wal_triggers_a_checkpoint_by_itself() {
    let mut c = config();
    c.set("max_wal_size", "256kB").unwrap();
    let e = open_on(Arc::new(MemVfs::new()), &c);
    create_pages(&e, 50);
    let mut round = 0;
    // Each round logs ~50 records; the trigger is 256 kB / 1.9 of WAL since the redo point.
    wait_until("a checkpoint for WAL volume", || {
        round += 1;
        update_all(&e, 50, round * 1000);
        e.checkpoint_history()
            .iter()
            .any(|s| s.reason == CheckpointReason::Wal)
    });
    let s = e.checkpointer_stats();
    assert!(s.num_requested >= 2 && s.num_done >= 2, "{s:?}");
    e.shutdown().unwrap();
}

#[test]
fn shutdown_in_the_middle_of_a_spread_checkpoint_finishes_it_at_full_speed() {
    let mut c = config();
    c.set("checkpoint_timeout", "1h").unwrap();
    c.set("io_combine_limit", "4kB").unwrap(); // one page per pace call
    let vfs = MemVfs::new();
    let e = open_on(Arc::new(vfs.clone()), &c);
    create_pages(&e, 200);
    update_all(&e, 200, 7);
    let done = e.checkpointer_stats().num_done;
    // Spread over 0.9 h: after the first page the pacer sleeps.
    e.request_checkpoint(false, false).unwrap();
    wait_until("the spread checkpoint to start writing", || {
        let d = e.pool().usage_summary().dirty;
        d > 0 && d < 200
    });
    assert_eq!(e.checkpointer_stats().num_done, done, "still spreading");
    let t = Instant::now();
    e.shutdown().unwrap();
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    let e = open_on(Arc::new(vfs), &c);
    let h = e.checkpoint_history();
    assert_eq!(h.len(), 1, "a fresh history after reopening");
    assert!(
        e.recovery_report().is_none_or(|r| r.records <= 2),
        "a clean shutdown leaves (almost) nothing to replay: {:?}",
        e.recovery_report()
    );
    check_all(&e, 200, 7);
}

#[test]
fn a_failed_fsync_fails_the_checkpoint_keeps_the_old_redo_point_and_stays_failed() {
    let mem = MemVfs::new();
    let fault = FaultVfs::new(Arc::new(mem.clone()));
    let mut c = config();
    c.set("checkpointer", "off").unwrap();
    let e = open_on(Arc::new(fault.clone()), &c);
    create_pages(&e, 20);
    e.checkpoint().unwrap();
    let redo = e.wal().redo();
    update_all(&e, 20, 500);
    fault.add_rule(FaultRule::nth(
        "base/0/600",
        FaultOp::Fsync,
        1,
        FaultKind::Eio,
    ));
    let err = e.checkpoint().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert_eq!(e.checkpointer_stats().num_failed, 1);
    // Latched: the next one fails too, even though the fault was one-shot.
    let again = e.checkpoint().unwrap_err().to_string();
    assert!(again.contains("earlier fsync"), "{again}");
    let control = bufpool::wal::control::read(
        &mem,
        &Path::new("/db").join(bufpool::wal::control::CONTROL_FILE),
    )
    .unwrap();
    assert_eq!(
        control.redo, redo,
        "the control file still names the old redo point"
    );
    drop(e); // like a crash
    let e = open_on(Arc::new(mem), &c);
    assert!(e.recovery_report().unwrap().records > 0);
    check_all(&e, 20, 500);
}

/// Proves that a checkpoint the thread runs for a request, failing on a data file's fsync,
/// reports to the requester a typed error whose errno survives (`raw_os_error`), as the
/// same checkpoint run by the caller does; before, the thread's error reached the
/// requester as text (`EngineError::Checkpoint(String)`) and the errno was lost.
#[test]
fn a_failed_requested_checkpoint_keeps_its_errno() {
    let fault = FaultVfs::new(Arc::new(MemVfs::new()));
    let e = open_on(Arc::new(fault.clone()), &config());
    assert!(e.checkpointer_running());
    create_pages(&e, 4);
    update_all(&e, 4, 7);
    fault.add_rule(FaultRule::nth("/base/", FaultOp::Fsync, 1, FaultKind::Eio));
    let err = e.request_checkpoint(true, true).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert!(e.checkpointer_error().is_some());
}
