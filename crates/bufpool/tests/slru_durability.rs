//! Durability of the commit log (the `xact` SLRU) through the engine.
//!
//! Proves: a failed fsync of a commit-log file is latched (the checkpoint that met it and
//! every later one fail, so no checkpoint releases the WAL the statuses depend on, and a
//! reopen recovers them from that WAL); a commit-log page torn by a power cut (old and new
//! 512-byte sectors or 4 KiB halves mixed, or sectors left as garbage) neither stops the
//! directory from opening nor loses a status; and a power cut at any I/O of a workload of
//! commits, aborts and checkpoints keeps every acknowledged outcome.
//! How: `FaultVfs` over a `MemVfs` fails one fsync of the commit-log segment; the test then
//! plays the kernel that dropped the written pages, or the power cut that tore them (puts
//! back the segment's bytes from before, whole or sector by sector), and reopens the engine
//! on the `MemVfs`. The every-I/O test runs on `SimVfs` with `crash_after` and `crash`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bufpool::txn::{Xid, XidStatus};
use bufpool::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs, MemVfs, SimVfs, Vfs};
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
    Engine::open_vfs(vfs, dir(), &config(), true).unwrap()
}

/// Runs `n` transactions, committing two in three and aborting the rest; returns each id
/// with whether it committed.
fn decide(e: &Engine, n: usize) -> Vec<(Xid, bool)> {
    (0..n)
        .map(|i| {
            let x = e.begin_xid().unwrap();
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

/// Ids begun for the torn-page tests: they spread over the whole first 8 KiB commit-log
/// page (32,736 ids), so every 512-byte sector (2,048 ids) holds statuses.
const SPAN: usize = 32_000;
/// Every STEP-th id is decided before the checkpoint, every STEP-th from STEP/2 after it.
const STEP: usize = 250;

/// Commits (two in three) or aborts the given, already begun, transactions.
fn decide_ids(e: &Engine, ids: impl Iterator<Item = Xid>) -> Vec<(Xid, bool)> {
    ids.enumerate()
        .map(|(i, x)| {
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

/// A copy of every file and directory of `from` (the directory state at one instant).
fn copy_tree(from: &MemVfs) -> MemVfs {
    fn walk(from: &MemVfs, to: &MemVfs, dir: &Path) {
        to.create_dir_all(dir).unwrap();
        for name in from.list_dir(dir).unwrap() {
            let path = dir.join(name);
            match from.contents(&path) {
                Some(bytes) => to.set_contents(&path, bytes),
                None => walk(from, to, &path),
            }
        }
    }
    let to = MemVfs::new();
    walk(from, &to, dir());
    to
}

/// The state a power cut leaves when it strikes while the first commit-log page is being
/// rewritten after a checkpoint: statuses spread over the page, half decided before the
/// checkpoint and half after; then a checkpoint writes the page again and its fsync fails
/// (FaultVfs), i.e. the write was issued and never confirmed durable. Returns the
/// directory, the outcomes, and the segment's bytes after the checkpoint (old) and after
/// the rewrite (new).
fn rewritten_page() -> Rewritten {
    let mem = MemVfs::new();
    let fault = FaultVfs::new(Arc::new(mem.clone()));
    let e = open(Arc::new(fault.clone()));
    let ids: Vec<Xid> = (0..SPAN).map(|_| e.begin_xid().unwrap()).collect();
    let mut outcomes = decide_ids(&e, ids.iter().copied().step_by(STEP));
    e.checkpoint().unwrap();
    let old = mem.contents(&clog_segment()).unwrap();
    outcomes.extend(decide_ids(
        &e,
        ids.iter().copied().skip(STEP / 2).step_by(STEP),
    ));
    fault.add_rule(FaultRule::nth(
        "xact/0000",
        FaultOp::Fsync,
        1,
        FaultKind::Eio,
    ));
    e.checkpoint()
        .expect_err("the rewrite's fsync fails: it was never confirmed durable");
    let new = mem.contents(&clog_segment()).unwrap();
    assert_eq!(old.len(), 8192, "one 8 KiB page");
    assert_eq!(new.len(), old.len());
    assert_ne!(old, new);
    drop(e);
    Rewritten {
        mem,
        outcomes,
        old,
        new,
    }
}

/// See [`rewritten_page`].
struct Rewritten {
    mem: MemVfs,
    outcomes: Vec<(Xid, bool)>,
    old: Vec<u8>,
    new: Vec<u8>,
}

/// Which piece of the page unit `i` holds.
type Pick = Box<dyn Fn(usize) -> Piece>;

/// What a torn write can leave in one piece of the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    Old,
    New,
    /// A sector whose write was interrupted midway: unreadable, here pseudo-random bytes.
    Garbage,
}

/// The page of `old` and `new` mixed in units of `unit` bytes as `pick` says.
fn torn(old: &[u8], new: &[u8], unit: usize, pick: impl Fn(usize) -> Piece) -> Vec<u8> {
    let mut out = old.to_vec();
    let mut noise = 0x9E37_79B9_7F4A_7C15u64;
    for (i, chunk) in out.chunks_mut(unit).enumerate() {
        let at = i * unit;
        match pick(i) {
            Piece::Old => {}
            Piece::New => chunk.copy_from_slice(&new[at..at + chunk.len()]),
            Piece::Garbage => {
                for b in chunk.iter_mut() {
                    noise = noise.rotate_left(7).wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x55;
                    *b = (noise >> 56) as u8;
                }
            }
        }
    }
    out
}

/// A commit-log page rewritten after a checkpoint and torn by a power cut, in 512-byte
/// sectors (new sectors first, last, alternating, one alone) and at 4 KiB (either half
/// new), or with sectors left as garbage: the directory opens, and every transaction
/// decided before or after the checkpoint reads as it ended. How: `rewritten_page` leaves
/// the state of a rewrite that was issued but never confirmed; each case copies it, puts
/// the torn page in place of the segment and reopens the engine.
#[test]
fn torn_clog_page_opens_and_keeps_every_status() {
    use Piece::*;
    let Rewritten {
        mem,
        outcomes,
        old,
        new,
    } = rewritten_page();
    let sectors = old.len() / 512;
    let cases: Vec<(&str, usize, Pick)> = vec![
        (
            "512 B: first half new",
            512,
            Box::new(move |i| if i < sectors / 2 { New } else { Old }),
        ),
        (
            "512 B: last half new",
            512,
            Box::new(move |i| if i >= sectors / 2 { New } else { Old }),
        ),
        (
            "512 B: odd sectors new",
            512,
            Box::new(|i| if i % 2 == 1 { New } else { Old }),
        ),
        (
            "512 B: even sectors new",
            512,
            Box::new(|i| if i % 2 == 0 { New } else { Old }),
        ),
        (
            "512 B: one sector new",
            512,
            Box::new(|i| if i == 5 { New } else { Old }),
        ),
        (
            "512 B: all but one new",
            512,
            Box::new(|i| if i == 5 { Old } else { New }),
        ),
        (
            "4 KiB: first half new",
            4096,
            Box::new(|i| if i == 0 { New } else { Old }),
        ),
        (
            "4 KiB: second half new",
            4096,
            Box::new(|i| if i == 1 { New } else { Old }),
        ),
        (
            "512 B: one sector garbage",
            512,
            Box::new(|i| if i == 3 { Garbage } else { New }),
        ),
        (
            "512 B: garbage after new",
            512,
            Box::new(|i| match i {
                0..=3 => New,
                4 => Garbage,
                _ => Old,
            }),
        ),
        (
            "4 KiB: second half garbage",
            4096,
            Box::new(|i| if i == 0 { New } else { Garbage }),
        ),
    ];
    for (what, unit, pick) in cases {
        let vfs = copy_tree(&mem);
        vfs.set_contents(&clog_segment(), torn(&old, &new, unit, pick));
        let e = Engine::open_vfs(Arc::new(vfs.clone()), dir(), &config(), true)
            .unwrap_or_else(|err| panic!("{what}: reopening failed: {err}"));
        check_statuses(&e, &outcomes, what);
        e.checkpoint().unwrap();
        drop(e);
        // And again, from the repaired state.
        let e = open(Arc::new(vfs));
        check_statuses(&e, &outcomes, what);
    }
}

/// How often each crash point is tried (different fates for the unsynced writes).
const SEEDS: u64 = 6;

/// Ids the every-I/O workload begins, and how many it decides in each of its three phases.
const BEGUN: usize = 8_000;
const PER_PHASE: usize = 4;

/// What the every-I/O workload acknowledged.
#[derive(Default)]
struct Acked {
    committed: Vec<Xid>,
    aborted: Vec<Xid>,
}

/// Three phases of commits and aborts spread over the first commit-log page, with a
/// checkpoint after the first two; stops at the first error (the I/O budget ran out).
fn clog_workload(e: &Engine, ids: &[Xid]) -> Acked {
    let mut acked = Acked::default();
    for phase in 0..3 {
        for k in 0..PER_PHASE {
            let x = ids[(k * 4_999 + phase * 1_667) % ids.len()];
            if (k + phase) % 3 == 0 {
                if e.abort_transaction(x).is_err() {
                    return acked;
                }
                acked.aborted.push(x);
            } else {
                if e.commit_transaction(x).is_err() {
                    return acked;
                }
                acked.committed.push(x);
            }
        }
        if phase < 2 && e.checkpoint().is_err() {
            return acked;
        }
    }
    acked
}

/// A power cut at every I/O of a workload of commits, aborts and checkpoints (with every
/// fate for each unsynced write: dropped, kept, torn at 4 KiB, garbage; and for each
/// unsynced create, rename and unlink): the directory always opens, every acknowledged
/// commit reads as committed and no abort as committed. How: a failure-free run counts
/// the workload's I/Os; then for each count n, a fresh `SimVfs` runs it with
/// `crash_after(n)`, `crash(seed)` cuts the power, and the engine is reopened and checked.
#[test]
fn clog_survives_power_loss_at_every_io() {
    let setup = |vfs: &SimVfs| {
        let e = open(Arc::new(vfs.clone()));
        let ids: Vec<Xid> = (0..BEGUN).map(|_| e.begin_xid().unwrap()).collect();
        (e, ids)
    };
    let base = SimVfs::new();
    let (e, ids) = setup(&base);
    let before = base.io_count();
    clog_workload(&e, &ids);
    let total = base.io_count() - before;
    drop(e);
    assert!(total > 20, "workload too small: {total} I/Os");
    let mut states = 0;
    let mut repaired = 0;
    for n in 0..=total {
        for seed in 0..SEEDS {
            let vfs = SimVfs::new();
            let (e, ids) = setup(&vfs);
            vfs.crash_after(n);
            let acked = clog_workload(&e, &ids);
            drop(e);
            vfs.crash(seed * 7_919 + n);
            let e = Engine::open_vfs(Arc::new(vfs.clone()), dir(), &config(), true).unwrap_or_else(
                |err| panic!("crash after {n} I/Os, seed {seed}: reopening failed: {err}"),
            );
            repaired += e.txns().clog().stats().repaired;
            for &x in &acked.committed {
                assert_eq!(
                    e.txns().status(x).unwrap(),
                    XidStatus::Committed,
                    "crash after {n} I/Os, seed {seed}: acknowledged commit {x}"
                );
            }
            for &x in &acked.aborted {
                assert_ne!(
                    e.txns().status(x).unwrap(),
                    XidStatus::Committed,
                    "crash after {n} I/Os, seed {seed}: aborted {x}"
                );
            }
            for &x in ids.iter().step_by(97) {
                if !acked.committed.contains(&x)
                    && e.txns().status(x).unwrap() == XidStatus::Committed
                {
                    // Only a commit that was attempted (and failed on the budget) may have
                    // reached the log.
                    let attempted = (0..3).any(|phase| {
                        (0..PER_PHASE).any(|k| ids[(k * 4_999 + phase * 1_667) % ids.len()] == x)
                    });
                    assert!(
                        attempted,
                        "crash after {n} I/Os, seed {seed}: {x} never committed"
                    );
                }
            }
            states += 1;
        }
    }
    eprintln!(
        "commit log: {states} crash states over {total} I/O points x {SEEDS} seeds; \
         {repaired} pages rewritten from the doublewrite copy"
    );
    assert!(
        repaired > 0,
        "some crash should interrupt a commit-log write"
    );
}
