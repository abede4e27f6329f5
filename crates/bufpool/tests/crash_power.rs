//! Power-loss test: crash after every I/O of a small multi-threaded workload, under many
//! seeds, with the simulating I/O layer deciding the fate of every unsynced write (dropped,
//! kept, torn at 4 KiB, garbage) and of every unsynced create/rename/unlink.
//!
//! Proves: recovery always reaches a state holding every acknowledged transfer, with no
//! transfer half applied and money conserved. How: for crash point n = 1, 2, ... the bank
//! is created, `crash_after(n)` makes the (n+1)-th mutating I/O and all later ones fail,
//! two threads transfer (one also runs a checkpoint midway) until they hit the failure,
//! then `crash(seed)` cuts the power and the engine is reopened and verified. BUFPOOL_POWER_SEEDS raises the seed count.

mod bank;

use std::path::Path;
use std::sync::{Arc, Mutex};

use bufpool::testing::{CrashChoice, SimVfs};
use bufpool::{Config, Engine, Vfs};

const THREADS: u32 = 2;
const TRANSFERS_PER_THREAD: u64 = 8;
/// Thread 0 runs a checkpoint after this transfer: data pages are written (and can be torn
/// by the crash), the control file is replaced, old segments are released.
const CHECKPOINT_AFTER: u64 = 3;

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "16").unwrap();
    c.set("block_size", "4kB").unwrap();
    c.set("wal_segment_size", "64kB").unwrap();
    c
}

fn open(vfs: &SimVfs) -> Result<Engine, bufpool::EngineError> {
    Engine::open(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &config(),
        true,
    )
}

/// Runs the workload with the I/O budget `n`; returns the acknowledged sequence numbers.
fn workload(vfs: &SimVfs, n: u64) -> Vec<u64> {
    let e = open(vfs).unwrap();
    workload_on(&e, vfs, n)
}

/// The workload on an open engine; each thread continues after its recovered sequence.
fn workload_on(e: &Engine, vfs: &SimVfs, n: u64) -> Vec<u64> {
    vfs.crash_after(n);
    let acked = Mutex::new(vec![0u64; bank::MAX_THREADS as usize]);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let acked = &acked;
            s.spawn(move || {
                let first = bank::seq(e, t).unwrap() + 1;
                for k in first..first + TRANSFERS_PER_THREAD {
                    if bank::run_transfer(e, t, k).is_err() {
                        return;
                    }
                    acked.lock().unwrap()[t as usize] = k;
                    if t == 0 && k == first + CHECKPOINT_AFTER - 1 && e.checkpoint().is_err() {
                        return;
                    }
                }
            });
        }
    });
    let acked = acked.lock().unwrap().clone();
    acked
}

#[test]
fn recovery_after_power_loss_at_every_io() {
    let seeds: u64 = std::env::var("BUFPOOL_POWER_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    // The I/O count of a full, failure-free run bounds the crash points worth trying.
    let base = SimVfs::new();
    bank::init(&open(&base).unwrap()).unwrap();
    let before = base.io_count();
    workload(&base, u64::MAX);
    let total_ios = base.io_count() - before;
    assert!(total_ios > 20, "workload too small: {total_ios} I/Os");

    let mut states = 0u64;
    let mut outcomes = [0u64; 4];
    let mut namespace_undone = 0u64;
    for n in 0..=total_ios {
        for seed in 0..seeds {
            let vfs = SimVfs::new();
            bank::init(&open(&vfs).unwrap()).unwrap();
            let acked = workload(&vfs, n);
            let report = vfs.crash(seed * 7919 + n);
            namespace_undone += report.namespace_undone;
            for (i, c) in [
                CrashChoice::Drop,
                CrashChoice::Keep,
                CrashChoice::Tear,
                CrashChoice::Garbage,
            ]
            .into_iter()
            .enumerate()
            {
                outcomes[i] += report.writes(c);
            }
            let e = open(&vfs)
                .unwrap_or_else(|err| panic!("crash point {n}, seed {seed}: reopen failed: {err}"));
            bank::verify(&e, &acked);
            states += 1;
        }
    }
    eprintln!(
        "power loss: {states} crash states over {total_ios} I/O points x {seeds} seeds; unsynced writes \
         dropped {}, kept {}, torn {}, garbage {}; creates/renames/unlinks undone {namespace_undone}",
        outcomes[0], outcomes[1], outcomes[2], outcomes[3]
    );
    assert!(
        namespace_undone > 0,
        "some crash should undo an unsynced rename or create"
    );
    assert!(
        outcomes.iter().all(|&c| c > 0),
        "every crash outcome should occur: {outcomes:?}"
    );
}

/// Two power cuts in a row, with recovery and more transfers between them: the second
/// recovery must not mistake records the first life of the log left beyond its end (kept
/// by the first crash while an earlier block was lost) for records of the second life.
#[test]
fn recovery_after_two_power_losses() {
    let seeds: u64 = std::env::var("BUFPOOL_POWER_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
        / 3
        + 1;
    let base = SimVfs::new();
    bank::init(&open(&base).unwrap()).unwrap();
    let before = base.io_count();
    workload(&base, u64::MAX);
    let total_ios = base.io_count() - before;
    let mut states = 0;
    for n in (0..=total_ios).step_by(2) {
        for seed in 0..seeds {
            let vfs = SimVfs::new();
            bank::init(&open(&vfs).unwrap()).unwrap();
            let acked1 = workload(&vfs, n);
            vfs.crash(seed * 31 + n);
            let e = open(&vfs)
                .unwrap_or_else(|err| panic!("first reopen, point {n}, seed {seed}: {err}"));
            bank::verify(&e, &acked1);
            let n2 = (n * 7 + seed) % (total_ios + 1);
            let acked2 = workload_on(&e, &vfs, n2);
            drop(e);
            vfs.crash(seed * 131 + n + 1);
            let e = open(&vfs)
                .unwrap_or_else(|err| panic!("second reopen, points {n}/{n2}, seed {seed}: {err}"));
            let acked: Vec<u64> = acked1.iter().zip(&acked2).map(|(a, b)| *a.max(b)).collect();
            bank::verify(&e, &acked);
            states += 1;
        }
    }
    eprintln!("two power losses: {states} crash pairs");
}
