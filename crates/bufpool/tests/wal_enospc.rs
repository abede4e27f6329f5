//! The log cannot grow: ENOSPC when a new log segment is created, and when a segment is
//! written.
//!
//! Proves (issue 11): a commit that needs the space fails with a clear error (the
//! operation, the file, "No space left on device", errno ENOSPC); every commit
//! acknowledged before it survives; the engine refuses every later change until the data
//! directory is reopened (like PostgreSQL, which PANICs on a failed log write: the kernel
//! may hold or drop any part of the failed write, so a retry cannot know what reached
//! disk); once space returns, reopening recovers and new commits succeed. How: a
//! fault-injecting vfs over an in-memory one fails every write of a new segment's
//! temporary file (creation), or every write of a segment (append), from some point on.

mod common;

use std::path::Path;
use std::sync::Arc;

use bufpool::testing::{FaultKind, FaultOp, FaultRule, FaultVfs};
use bufpool::wal::FLAG_COMMIT;
use bufpool::{BufferTag, Config, Engine, ForkNumber, MemVfs, RelFileId, Vfs};
use common::{get_u64, put_u64, BODY};

const REL: RelFileId = RelFileId::new(0, 520);
const PAGES: u32 = 8;

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "64").unwrap();
    c.set("wal_segment_size", "64kB").unwrap();
    c
}

fn open(vfs: Arc<dyn Vfs>, create: bool) -> Engine {
    Engine::open_vfs(vfs, Path::new("/db"), &config(), create).unwrap()
}

fn tag(b: u32) -> BufferTag {
    BufferTag::new(REL, ForkNumber::Main, b)
}

/// One committed change: page `n % PAGES` gets counter value `n`.
fn commit(e: &Engine, n: u64) -> Result<(), bufpool::EngineError> {
    let buf = e.pool().read(tag((n % u64::from(PAGES)) as u32))?;
    let mut g = buf.write();
    put_u64(&mut g, BODY + 8, n);
    let r = BODY + 8..BODY + 16;
    let end = e.log_pages(1, FLAG_COMMIT, &mut [(&mut g, std::slice::from_ref(&r))])?;
    drop(g);
    e.commit(end)
}

fn setup(mem: &MemVfs) {
    let e = open(Arc::new(mem.clone()), true);
    e.pool().create_relation(REL, ForkNumber::Main).unwrap();
    for _ in 0..PAGES {
        let buf = e.pool().extend(REL, ForkNumber::Main).unwrap();
        let mut g = buf.write();
        bufpool::page::init(&mut g, 0);
        let all = 0..g.len();
        let end = e
            .log_pages(1, FLAG_COMMIT, &mut [(&mut g, std::slice::from_ref(&all))])
            .unwrap();
        drop(g);
        e.commit(end).unwrap();
    }
    e.shutdown().unwrap();
}

/// Commits until one fails; returns the last acknowledged counter and the error.
fn run_until_failure(e: &Engine) -> (u64, bufpool::EngineError) {
    let mut acked = 0;
    for n in 1..100_000u64 {
        match commit(e, n) {
            Ok(()) => acked = n,
            Err(err) => return (acked, err),
        }
    }
    panic!("the log never ran out of space");
}

/// After reopening without the fault: every acknowledged counter is on its page.
fn verify_and_continue(mem: &MemVfs, acked: u64) {
    let e = open(Arc::new(mem.clone()), false);
    for n in acked.saturating_sub(u64::from(PAGES) - 1).max(1)..=acked {
        let b = (n % u64::from(PAGES)) as u32;
        let got = get_u64(&e.pool().read(tag(b)).unwrap().read(), BODY + 8);
        assert!(
            got >= n,
            "page {b}: acknowledged counter {n} lost (found {got})"
        );
    }
    commit(&e, acked + 1).expect("space returned: commits work again");
}

fn assert_enospc(err: &bufpool::EngineError, what: &str) {
    let msg = err.to_string();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{what}: {msg}");
    assert!(
        msg.contains("/db/wal/"),
        "{what}: the message names the file: {msg}"
    );
}

#[test]
fn enospc_creating_a_log_segment() {
    let mem = MemVfs::new();
    setup(&mem);
    let vfs = FaultVfs::new(Arc::new(mem.clone()));
    let e = open(Arc::new(vfs.clone()), false);
    // From now on every write of a new segment's temporary file fails: the log cannot
    // grow. (Added after the open, whose checkpoint writes the control file's own
    // temporary file.)
    vfs.add_rule(FaultRule {
        times: u64::MAX,
        ..FaultRule::nth(".tmp", FaultOp::Write, 1, FaultKind::Enospc)
    });
    let (acked, err) = run_until_failure(&e);
    assert!(acked > 0, "the first segment had room");
    assert_enospc(&err, "the commit that needed a new segment");
    // Refused from now on, with the reason.
    let again = commit(&e, acked + 1).unwrap_err();
    assert!(again.to_string().contains("failed earlier"), "{again}");
    assert_eq!(again.raw_os_error(), Some(libc::ENOSPC), "{again}");
    drop(e);
    verify_and_continue(&mem, acked);
}

#[test]
fn enospc_writing_a_log_segment() {
    let mem = MemVfs::new();
    setup(&mem);
    let vfs = FaultVfs::new(Arc::new(mem.clone()));
    // The 30th write of a segment and every later one fail.
    vfs.add_rule(FaultRule {
        times: u64::MAX,
        ..FaultRule::nth("/wal/0", FaultOp::Write, 30, FaultKind::Enospc)
    });
    let e = open(Arc::new(vfs.clone()), false);
    let (acked, err) = run_until_failure(&e);
    assert!(acked > 0);
    assert_enospc(&err, "the commit whose log write failed");
    let again = commit(&e, acked + 1).unwrap_err();
    assert!(again.to_string().contains("failed earlier"), "{again}");
    assert!(e.checkpoint().is_err(), "a checkpoint on a failed log");
    drop(e);
    verify_and_continue(&mem, acked);
}
