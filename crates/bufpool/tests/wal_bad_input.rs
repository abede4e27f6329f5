//! Bad input for the log: a flipped byte in the middle of the log, a missing or corrupt
//! control file, a data-page checksum failure met during redo, a failed WAL fsync.
//!
//! Proves: each is refused with an error naming the file and position (and why), never a
//! panic and never a silent cut of acknowledged commits; nothing is changed by the refusal;
//! a failed log fsync is never acknowledged and the engine refuses writes until reopened.

mod bank;

use std::path::Path;
use std::sync::Arc;

use bufpool::testing::{FaultKind, FaultOp, FaultRule, FaultVfs};
use bufpool::{Config, Engine, EngineError, MemVfs, RealVfs, Vfs};

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "16").unwrap();
    c.set("wal_segment_size", "64kB").unwrap();
    c
}

fn open(vfs: &MemVfs, c: &Config) -> Result<Engine, EngineError> {
    Engine::open(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        c,
        true,
    )
}

/// A bank with `n` transfers per thread (2 threads) committed after its last checkpoint.
fn bank_with_transfers(vfs: &MemVfs, c: &Config, n: u64) -> Vec<u64> {
    let e = open(vfs, c).unwrap();
    bank::init(&e).unwrap();
    for k in 1..=n {
        for t in 0..2 {
            bank::run_transfer(&e, t, k).unwrap();
        }
    }
    let mut acked = vec![0; bank::MAX_THREADS as usize];
    acked[0] = n;
    acked[1] = n;
    acked
    // Dropped without a checkpoint: recovery must replay the transfers.
}

fn wal_segments(vfs: &MemVfs) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = vfs
        .list_dir(Path::new("/db/wal"))
        .unwrap()
        .into_iter()
        .filter(|n| n.len() == 16)
        .map(|n| Path::new("/db/wal").join(n))
        .collect();
    v.sort();
    v
}

/// The segment holding the end of the log: the last one with any nonzero byte (the
/// segments after it are prepared ahead of need, zero-filled).
fn tail_segment(vfs: &MemVfs) -> std::path::PathBuf {
    wal_segments(vfs)
        .into_iter()
        .rev()
        .find(|s| vfs.contents(s).unwrap().iter().any(|&b| b != 0))
        .expect("a segment holding log bytes")
}

#[test]
fn flipped_byte_in_the_middle_of_the_log_is_refused_with_where_and_why() {
    let vfs = MemVfs::new();
    let c = config();
    let acked = bank_with_transfers(&vfs, &c, 40);
    // Damage a record early in the replayed range: later records (each commit flushed)
    // prove it had been durable.
    let seg = tail_segment(&vfs);
    let mut bytes = vfs.contents(&seg).unwrap();
    // Find a record start past the checkpoint: the first nonzero byte after 8 KiB in.
    let at = (8192..bytes.len())
        .find(|&i| bytes[i] != 0)
        .expect("log bytes")
        + 50;
    bytes[at] ^= 0x55;
    vfs.set_contents(&seg, bytes.clone());
    let err = open(&vfs, &c).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, EngineError::Corrupt { .. }), "{msg}");
    assert!(
        msg.contains(&seg.display().to_string())
            && msg.contains("offset")
            && msg.contains("checksum"),
        "{msg}"
    );
    assert!(msg.contains("refusing to open"), "{msg}");
    // The refusal changed nothing: with the byte restored, everything is there.
    bytes[at] ^= 0x55;
    vfs.set_contents(&seg, bytes);
    let e = open(&vfs, &c).unwrap();
    bank::verify(&e, &acked);
}

#[test]
fn torn_tail_is_the_normal_end_of_the_log() {
    let vfs = MemVfs::new();
    let c = config();
    let acked = bank_with_transfers(&vfs, &c, 10);
    // Garbage after the last flushed byte (never acknowledged) is just the end of the log.
    let seg = tail_segment(&vfs);
    let mut bytes = vfs.contents(&seg).unwrap();
    let end = bytes.iter().rposition(|&b| b != 0).unwrap() + 1;
    let end = end.div_ceil(4096) * 4096;
    for b in &mut bytes[end..(end + 100).min(65536)] {
        *b = 0xA5;
    }
    vfs.set_contents(&seg, bytes);
    let e = open(&vfs, &c).unwrap();
    bank::verify(&e, &acked);
    assert!(e.recovery_report().unwrap().stop.contains("end of log"));
}

#[test]
fn missing_or_corrupt_control_file_is_named() {
    let vfs = MemVfs::new();
    let c = config();
    bank_with_transfers(&vfs, &c, 2);
    let ctl = Path::new("/db/bufpool.control");
    let good = vfs.contents(ctl).unwrap();
    let mut bad = good.clone();
    bad[25] ^= 1;
    vfs.set_contents(ctl, bad);
    let msg = open(&vfs, &c).unwrap_err().to_string();
    assert!(
        msg.contains("bufpool.control") && msg.contains("checksum"),
        "{msg}"
    );
    vfs.unlink(ctl).unwrap();
    let msg = open(&vfs, &c).unwrap_err().to_string();
    assert!(
        msg.contains("bufpool.control") && msg.contains("missing"),
        "{msg}"
    );
    vfs.set_contents(ctl, good);
    assert!(open(&vfs, &c).is_ok());
}

#[test]
fn data_page_checksum_failure_during_redo_is_reported() {
    let vfs = MemVfs::new();
    let mut c = config();
    // Without full-page images, replay must read the damaged page.
    c.set("full_page_writes", "off").unwrap();
    bank_with_transfers(&vfs, &c, 3);
    let file = Path::new("/db/base/0/700");
    let mut bytes = vfs.contents(file).unwrap();
    // The META page: every transfer changes it, so replay must read it.
    bytes[bank::META as usize * 8192 + 3000] ^= 0xFF;
    vfs.set_contents(file, bytes);
    let msg = open(&vfs, &c).unwrap_err().to_string();
    assert!(
        msg.contains("base/0/700") && msg.contains("block 8") && msg.contains("checksum"),
        "{msg}"
    );
}

#[test]
fn failed_wal_fsync_is_never_acknowledged_and_blocks_writes_until_reopen() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let fault = FaultVfs::new(Arc::new(RealVfs::new()));
    let c = config();
    let acked = {
        let e = Engine::open(Arc::new(fault.clone()), dir.path(), &c, true).unwrap();
        bank::init(&e).unwrap();
        bank::run_transfer(&e, 0, 1).unwrap();
        fault.add_rule(FaultRule {
            times: 1,
            ..FaultRule::nth("/wal/", FaultOp::Fsync, 1, FaultKind::Eio)
        });
        let err = bank::run_transfer(&e, 0, 2).unwrap_err().to_string();
        assert!(err.contains("wal") && err.contains("fsync"), "{err}");
        // Latched: even though the next fsync would succeed, nothing more is accepted.
        let again = bank::run_transfer(&e, 1, 1).unwrap_err().to_string();
        assert!(again.contains("refuses further writes"), "{again}");
        let mut acked = vec![0; bank::MAX_THREADS as usize];
        acked[0] = 1;
        acked
    };
    let e = Engine::open(Arc::new(RealVfs::new()), dir.path(), &c, true).unwrap();
    let seqs = bank::verify(&e, &acked);
    assert!(seqs[0] <= 2 && seqs[1] == 0, "{seqs:?}");
    bank::run_transfer(&e, 1, 1).unwrap();
}
