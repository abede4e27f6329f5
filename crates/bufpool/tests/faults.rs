//! Faults injected through the fault-injecting I/O layer.
//!
//! Proves: EIO on read reports path and block, wakes the other readers waiting for that
//! read, and a later read succeeds; EIO on write keeps the buffer dirty and a later flush
//! succeeds; ENOSPC on extend fails cleanly and the pool stays usable; short reads and
//! writes are typed errors. How: `FaultVfs` fails the Nth matching call; for the waiting
//! reader a gate in a wrapping `Vfs` holds the failing read until the second reader is
//! observed pinned on the same buffer (no sleeps).

mod common;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use bufpool::testing::{Call, CallHook, FaultKind, FaultOp, FaultRule, FaultVfs, HookVfs};
use bufpool::{BufferError, ForkNumber, IoOp, RealVfs, SmgrError};
use common::*;

fn setup(pages: u32) -> (tempfile::TempDir, FaultVfs, bufpool::BufferPool) {
    let dir = tempfile::tempdir().unwrap();
    let vfs = FaultVfs::new(Arc::new(RealVfs::new()));
    let pool = open(Arc::new(vfs.clone()), dir.path(), &config("16"));
    fill(&pool, pages);
    pool.drop_buffers(REL, None, 0).unwrap();
    (dir, vfs, pool)
}

#[test]
fn eio_on_read_names_path_and_block_and_a_later_read_succeeds() {
    let (_dir, vfs, pool) = setup(4);
    vfs.add_rule(FaultRule::nth("16384", FaultOp::Read, 1, FaultKind::Eio));
    let err = pool.read(tag(3)).unwrap_err();
    let msg = err.to_string();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{msg}");
    assert!(
        msg.contains("base/0/16384") && msg.contains("block 3"),
        "{msg}"
    );
    let b = pool.read(tag(3)).unwrap();
    assert_eq!(get_u64(&b.read(), BODY), 3);
    drop(b);
    pool.check_invariants().unwrap();
}

#[test]
fn failed_read_wakes_the_reader_waiting_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let armed = Arc::new(AtomicBool::new(false));
    let gate = Arc::new((Mutex::new((false, false)), Condvar::new()));
    // The first read once armed blocks at the gate until released, then fails with EIO.
    let (a, g) = (armed.clone(), gate.clone());
    let hook: CallHook = Arc::new(move |c: &Call<'_>| {
        if c.op != FaultOp::Read || !a.swap(false, Ordering::SeqCst) {
            return None;
        }
        let (m, cv) = &*g;
        let mut st = m.lock().unwrap();
        st.0 = true;
        cv.notify_all();
        while !st.1 {
            st = cv.wait(st).unwrap();
        }
        Some(io::Error::from_raw_os_error(libc::EIO))
    });
    let vfs = HookVfs::new(Arc::new(RealVfs::new()), hook);
    let pool = open(Arc::new(vfs), dir.path(), &config("16"));
    fill(&pool, 2);
    pool.drop_buffers(REL, None, 0).unwrap();
    armed.store(true, Ordering::SeqCst);
    std::thread::scope(|s| {
        let first = s.spawn(|| pool.read(tag(1)).map(|b| get_u64(&b.read(), BODY)));
        // Wait until the first reader is inside the (gated) read.
        let (m, cv) = &*gate;
        let mut g = m.lock().unwrap();
        while !g.0 {
            g = cv.wait(g).unwrap();
        }
        drop(g);
        let second = s.spawn(|| pool.read(tag(1)).map(|b| get_u64(&b.read(), BODY)));
        // The second reader has found the buffer and pinned it: it is waiting for the I/O.
        while pool.usage_summary().pins < 2 {
            std::thread::yield_now();
        }
        let mut g = m.lock().unwrap();
        g.1 = true;
        cv.notify_all();
        drop(g);
        let err = first.join().unwrap().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
        // Woken, the second reader retried the read itself and got the page.
        assert_eq!(second.join().unwrap().unwrap(), 1);
    });
    assert_eq!(pool.usage_summary().pinned, 0);
    pool.check_invariants().unwrap();
}

#[test]
fn eio_on_write_keeps_the_buffer_dirty_and_a_later_flush_succeeds() {
    let (dir, vfs, pool) = setup(2);
    {
        let b = pool.read(tag(1)).unwrap();
        put_u64(&mut b.write(), BODY + 8, 777);
    }
    vfs.add_rule(FaultRule::nth("16384", FaultOp::Write, 1, FaultKind::Eio));
    let err = pool.flush_all().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    assert!(err.to_string().contains("block 1"), "{err}");
    assert_eq!(
        pool.usage_summary().dirty,
        1,
        "the failed write must leave the page dirty"
    );
    assert_eq!(pool.flush_all().unwrap(), 1);
    assert_eq!(pool.usage_summary().dirty, 0);
    pool.sync().unwrap();
    drop(pool);
    let pool = open(Arc::new(RealVfs::new()), dir.path(), &config("16"));
    assert_eq!(get_u64(&pool.read(tag(1)).unwrap().read(), BODY + 8), 777);
}

#[test]
fn eio_on_eviction_write_reaches_the_reader_and_the_pool_recovers() {
    let (_dir, vfs, pool) = setup(40);
    // Dirty every page in the pool, then make the next write fail: the read that needs a
    // victim gets the error; the dirty page is not lost.
    for b in 0..16 {
        let buf = pool.read(tag(b)).unwrap();
        put_u64(&mut buf.write(), BODY + 8, 1);
    }
    vfs.add_rule(FaultRule::nth("16384", FaultOp::Write, 1, FaultKind::Eio));
    let err = pool.read(tag(30)).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert_eq!(get_u64(&pool.read(tag(30)).unwrap().read(), BODY), 30);
    pool.flush_all().unwrap();
    for b in 0..16 {
        assert_eq!(
            get_u64(&pool.read(tag(b)).unwrap().read(), BODY + 8),
            1,
            "block {b}"
        );
    }
    pool.check_invariants().unwrap();
}

#[test]
fn enospc_on_extend_fails_cleanly_and_the_pool_stays_usable() {
    let (_dir, vfs, pool) = setup(3);
    vfs.add_rule(FaultRule::nth(
        "16384",
        FaultOp::Allocate,
        1,
        FaultKind::Enospc,
    ));
    let err = pool.extend(REL, ForkNumber::Main).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    assert!(err.to_string().contains("block 3"), "{err}");
    assert_eq!(pool.nblocks(REL, ForkNumber::Main).unwrap(), 3);
    let b = pool.extend(REL, ForkNumber::Main).unwrap();
    assert_eq!(b.tag().block, 3);
    drop(b);
    assert_eq!(pool.nblocks(REL, ForkNumber::Main).unwrap(), 4);
    pool.check_invariants().unwrap();
}

#[test]
fn short_read_is_a_typed_error() {
    let (_dir, vfs, pool) = setup(2);
    vfs.add_rule(FaultRule::nth("16384", FaultOp::Read, 1, FaultKind::Short));
    match pool.read(tag(0)) {
        Err(BufferError::Storage(SmgrError::ShortRead {
            got, want, path, ..
        })) => {
            assert_eq!((got, want), (4096, 8192));
            assert!(path.ends_with("base/0/16384"));
        }
        other => panic!("expected a short read, got {other:?}"),
    }
    assert_eq!(get_u64(&pool.read(tag(0)).unwrap().read(), BODY), 0);
}

#[test]
fn short_write_is_a_typed_error_and_the_page_stays_dirty() {
    let (_dir, vfs, pool) = setup(2);
    {
        let b = pool.read(tag(0)).unwrap();
        put_u64(&mut b.write(), BODY + 8, 5);
    }
    vfs.add_rule(FaultRule::nth("16384", FaultOp::Write, 1, FaultKind::Short));
    let err = pool.flush_all().unwrap_err();
    assert!(
        matches!(
            err,
            BufferError::Storage(SmgrError::ShortWrite {
                got: 4096,
                want: 8192,
                ..
            })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("wrote only 4096 of 8192"), "{err}");
    assert_eq!(pool.usage_summary().dirty, 1);
    assert_eq!(pool.flush_all().unwrap(), 1);
    pool.drop_buffers(REL, None, 0).unwrap();
    assert_eq!(get_u64(&pool.read(tag(0)).unwrap().read(), BODY + 8), 5);
}

#[test]
fn failed_fsync_is_latched_never_retried_as_success() {
    let (_dir, vfs, pool) = setup(2);
    {
        let b = pool.read(tag(0)).unwrap();
        put_u64(&mut b.write(), BODY + 8, 9);
    }
    pool.flush_all().unwrap();
    vfs.add_rule(FaultRule::nth("16384", FaultOp::Fsync, 1, FaultKind::Eio));
    let err = pool.sync().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    let again = pool.sync().unwrap_err().to_string();
    assert!(
        again.contains("earlier fsync") && again.contains("16384"),
        "{again}"
    );
    assert_eq!(
        pool.stats().total(IoOp::Fsync),
        1,
        "only the fill's fsync succeeded"
    );
}

/// Proves (S2, reads): a panic inside a read's I/O (an embedder's file system, or a bug
/// below the pool) fails that read with an error and wakes whoever waits for it: nobody
/// hangs, the pins are given back, and the block reads fine afterwards. Before, an I/O
/// worker that panicked died with the request, and its owner waited for the completion
/// forever (as did every later read once the workers were gone). How: `FaultKind::Panic`
/// on the first read of the relation; the read run is started and consumed on another
/// thread under `catch_unwind`, and its outcome awaited with a deadline (a deadline is the
/// only way to see a hang; it is not a synchronization).
#[test]
fn a_panic_in_a_read_fails_the_read_and_hangs_nobody() {
    use bufpool::IoMethod;
    for method in [IoMethod::Sync, IoMethod::Worker] {
        let (_dir, vfs, pool) = setup(4);
        let pool = Arc::new(pool);
        vfs.add_rule(FaultRule::nth("16384", FaultOp::Read, 1, FaultKind::Panic));
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let pool = pool.clone();
            std::thread::spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let mut run = pool
                        .start_read_run(REL, ForkNumber::Main, 0, 4, None, method)
                        .map_err(|e| e.to_string())?;
                    let mut outcomes = Vec::new();
                    while let Some(r) = run.next() {
                        outcomes.push(r.map(|_| ()).map_err(|e| e.to_string()));
                    }
                    Ok::<_, String>(outcomes)
                }));
                let _ = tx.send(r.is_ok_and(|r| r.is_ok_and(|o| o.iter().any(|r| r.is_err()))));
            });
        }
        let failed_cleanly = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{method:?}: the read run hangs after a panic in its I/O"));
        assert!(
            failed_cleanly,
            "{method:?}: the panic was not turned into a read error"
        );
        vfs.clear_rules();
        assert_eq!(pool.usage_summary().pinned, 0, "{method:?}");
        for b in 0..4 {
            assert_eq!(
                get_u64(&pool.read(tag(b)).unwrap().read(), BODY),
                u64::from(b)
            );
        }
        pool.check_invariants().unwrap();
    }
}

/// Runs `f` on another thread under `catch_unwind` and waits for it with a deadline (the
/// only way to see a hang; not a synchronization): Err if it hangs, Ok(None) if it
/// panicked, Ok(Some(result)) otherwise.
fn within_a_minute<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<Option<T>, ()> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok();
        let _ = tx.send(r);
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .map_err(|_| ())
}

/// Proves (S2, writes): a panic inside a write or fsync of the file system (an embedder's
/// bug; `FaultKind::Panic`) fails that write with an error and hangs nobody: a backend's
/// write (`flush_all`; the bgwriter's writes go through the same call or, without io_uring,
/// the same file calls), the checkpoint's combined write runs (`checkpoint_write`), and the
/// fsync after them. Before the
/// panic fence the panic unwound between the write's claim and its end: the buffer stayed
/// IO_IN_PROGRESS (and a checkpoint run's content locks stayed held), and the next write
/// of the page waited forever. How: for each path, a panic on the first data write (or
/// fsync); the path must return an error (or, for the checkpoint, write the run again page
/// by page), never the panic, and a second pass with the rule gone must write
/// everything, within a deadline.
#[test]
fn a_panic_in_a_write_fails_the_write_and_hangs_nobody() {
    use bufpool::buffer::{CheckpointWriteOptions, Immediate};
    for path in ["backend", "checkpoint", "fsync"] {
        let (_dir, vfs, pool) = setup(4);
        let pool = Arc::new(pool);
        for b in 0..4 {
            let buf = pool.read(tag(b)).unwrap();
            let mut g = buf.write();
            put_u64(&mut g, BODY + 8, 7);
        }
        let op = if path == "fsync" {
            FaultOp::Fsync
        } else {
            FaultOp::Write
        };
        vfs.add_rule(FaultRule::nth("16384", op, 1, FaultKind::Panic));
        let p = pool.clone();
        let first = within_a_minute(move || {
            if path == "checkpoint" {
                let opts = CheckpointWriteOptions::default();
                p.checkpoint_write(&opts, &Immediate)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            } else {
                p.flush_all()
                    .and_then(|_| p.sync())
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
        })
        .unwrap_or_else(|()| panic!("{path}: hangs after a panic in the file system"));
        let first = first.unwrap_or_else(|| panic!("{path}: the panic reached the caller"));
        assert_eq!(vfs.injected(), 1, "{path}: the panic was injected");
        // The checkpoint retries a failed combined write page by page, and those succeed.
        match first {
            Err(err) => assert!(err.contains("panicked"), "{path}: {err}"),
            Ok(()) => assert_eq!(path, "checkpoint", "the write with the panic should fail"),
        }
        vfs.clear_rules();
        let p = pool.clone();
        let second = within_a_minute(move || {
            p.flush_all().map_err(|e| e.to_string())?;
            p.sync().map(|_| ()).map_err(|e| e.to_string())
        });
        let Ok(Some(second)) = second else {
            panic!("{path}: the next write of the page hangs or panics")
        };
        if path == "fsync" {
            // A failed fsync is latched (ARCHITECTURE's rule 4): every later sync reports it.
            let err = second.expect_err("a failed fsync stays failed");
            assert!(err.contains("panicked in fdatasync"), "{err}");
        } else {
            second.unwrap_or_else(|e| panic!("{path}: {e}"));
        }
        pool.drop_buffers(REL, None, 0).unwrap();
        for b in 0..4 {
            assert_eq!(
                get_u64(&pool.read(tag(b)).unwrap().read(), BODY + 8),
                7,
                "{path}"
            );
        }
        assert_eq!(pool.usage_summary().pinned, 0, "{path}");
        pool.check_invariants().unwrap();
    }
}

/// A WAL hook that panics at its first flush: a panic of the engine's own code between a
/// write's claim and its end (the file system cannot panic there, see the panic fence).
struct PanickingWal(AtomicBool);

impl bufpool::WalFlush for PanickingWal {
    fn flush(&self, _: bufpool::Lsn) -> Result<(), bufpool::buffer::WalFlushError> {
        if self.0.swap(false, Ordering::SeqCst) {
            panic!("injected panic in the WAL flush before a page write");
        }
        Ok(())
    }
}

/// Proves (S2, writes, a panic of our own): a panic inside a page write's window (after
/// the write's claim, before its end; here in the WAL flush that must precede the write)
/// ends the claimed write as failed on the way out (`IoClaim`), so the next writer of the
/// page does not wait forever. How: a pool whose WAL hook panics once; `flush_all` panics
/// on another thread; a second `flush_all` must finish within a deadline and the pages
/// reach storage. (The background writer's io_uring pipeline has the same guard, and waits
/// for the kernel's other writes before its slots are freed; no test reaches it.)
#[test]
fn a_panic_inside_a_write_ends_the_write_and_hangs_nobody() {
    use bufpool::buffer::PoolConfig;
    use bufpool::{BufferPool, Smgr};
    {
        let path = "backend";
        let dir = tempfile::tempdir().unwrap();
        let c = config("16");
        let smgr = Smgr::open(
            Arc::new(RealVfs::new()),
            dir.path(),
            c.smgr_options(true).unwrap(),
        )
        .unwrap();
        let wal = Arc::new(PanickingWal(AtomicBool::new(false)));
        let pool = Arc::new(BufferPool::new(Arc::new(smgr), &c, wal.clone()).unwrap());
        fill(&pool, 16);
        pool.flush_all().unwrap();
        for b in 0..16 {
            let buf = pool.read(tag(b)).unwrap();
            let mut g = buf.write();
            put_u64(&mut g, BODY + 8, 9);
        }
        wal.0.store(true, Ordering::SeqCst);
        let p = pool.clone();
        let first = within_a_minute(move || {
            let _ = p.flush_all();
        });
        assert_eq!(
            first,
            Ok(None),
            "{path}: the panic should reach the writer (it is ours, not the file system's)"
        );
        let p = pool.clone();
        let second = within_a_minute(move || p.flush_all().map(|_| ()).map_err(|e| e.to_string()));
        assert_eq!(
            second,
            Ok(Some(Ok(()))),
            "{path}: the next write hangs or fails"
        );
        pool.drop_buffers(REL, None, 0).unwrap();
        for b in 0..16 {
            assert_eq!(
                get_u64(&pool.read(tag(b)).unwrap().read(), BODY + 8),
                9,
                "{path}"
            );
        }
        pool.check_invariants().unwrap();
    }
}
