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
    Engine::open_vfs(
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
        let e = Engine::open_vfs(Arc::new(fault.clone()), dir.path(), &c, true).unwrap();
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
    let e = Engine::open_vfs(Arc::new(RealVfs::new()), dir.path(), &c, true).unwrap();
    let seqs = bank::verify(&e, &acked);
    assert!(seqs[0] <= 2 && seqs[1] == 0, "{seqs:?}");
    bank::run_transfer(&e, 1, 1).unwrap();
}

/// Every valid record in `seg` (starting `base` bytes into the log): found like recovery's
/// scan, by the self-LSN field at each 8-byte position, then decoded whole.
fn records_in(seg: &[u8], base: u64) -> Vec<bufpool::wal::record::Record> {
    use bufpool::wal::record;
    let mut out = Vec::new();
    let mut off = 0usize;
    while off + record::HEADER_SIZE <= seg.len() {
        let self_lsn = u64::from_le_bytes(seg[off + 8..off + 16].try_into().unwrap());
        if self_lsn == base + off as u64 {
            if let Ok(len) = record::peek_len(&seg[off..]) {
                if off + len <= seg.len() {
                    if let Ok(r) =
                        record::decode(&seg[off..off + len], bufpool::Lsn(self_lsn), 8192)
                    {
                        off += record::align(len as u64) as usize;
                        out.push(r);
                        continue;
                    }
                }
            }
        }
        off += record::ALIGN as usize;
    }
    out
}

/// Proves (F1): a damaged record that is not the last of its flush batch is refused when
/// any later record says the log was durable past it. Every record of one batch carries
/// the durable position from before the batch, so the record right after the damaged one
/// (same batch) vouches for nothing; recovery took that as the normal end of the log and
/// silently dropped every acknowledged commit after it. How: transfers of four clients
/// committed with synchronous commit off and no WAL writer, the log flushed after every
/// round of a few transfers each, so every batch holds several commits whatever the
/// machine's load (the WAL writer's timing once decided it, and a loaded machine could
/// leave no such record); a record whose successor belongs to the same batch (same
/// `flushed`, at or before the record) is damaged; a later batch's records say the log
/// was durable past it.
#[test]
fn a_damaged_record_inside_a_flush_batch_is_refused() {
    let vfs = MemVfs::new();
    let mut c = config();
    c.set("synchronous_commit", "off").unwrap();
    c.set("wal_writer", "off").unwrap();
    let per_thread = 150u64;
    {
        let e = open(&vfs, &c).unwrap();
        bank::init(&e).unwrap();
        for round in (1..=per_thread).step_by(5) {
            for k in round..round + 5 {
                for t in 0..4 {
                    bank::run_transfer(&e, t, k).unwrap();
                }
            }
            e.wal().flush(e.wal().insert_position()).unwrap();
        }
    } // dropped without a checkpoint: recovery replays the transfers
    let acked = [per_thread; 4];
    let mut recs = Vec::new();
    for seg in wal_segments(&vfs) {
        let segno = u64::from_str_radix(seg.file_name().unwrap().to_str().unwrap(), 16).unwrap();
        let base = segno * 65536;
        recs.extend(
            records_in(&vfs.contents(&seg).unwrap(), base)
                .into_iter()
                .map(|r| (seg.clone(), base, r)),
        );
    }
    // The last such record: past the checkpoint's redo point.
    let (seg, base, victim) = (0..recs.len().saturating_sub(1))
        .rev()
        .find(|&i| {
            let (a, b) = (&recs[i].2, &recs[i + 1].2);
            a.flushed == b.flushed
                && b.flushed <= a.lsn
                && recs[i + 2..].iter().any(|r| r.2.flushed > a.lsn)
        })
        .map(|i| (recs[i].0.clone(), recs[i].1, recs[i].2.lsn.0))
        .expect("a record inside a batch, vouched for by a later one");
    let mut bytes = vfs.contents(&seg).unwrap();
    let at = (victim - base) as usize + 20;
    bytes[at] ^= 0x55;
    vfs.set_contents(&seg, bytes.clone());
    let err = open(&vfs, &c).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, EngineError::Corrupt { .. }), "{msg}");
    assert!(msg.contains("acknowledged"), "{msg}");
    bytes[at] ^= 0x55;
    vfs.set_contents(&seg, bytes);
    let e = open(&vfs, &c).unwrap();
    let mut want = vec![0; bank::MAX_THREADS as usize];
    want[..4].copy_from_slice(&acked);
    bank::verify(&e, &want);
}

/// Proves (F2): a creation interrupted before its control file existed opens again. The
/// first open writes the log's first segments and the startup checkpoint record before
/// the control file; a crash in between left a directory that never opened again
/// ("control file missing"). How: a creation whose control file is removed afterwards
/// (the crash after the checkpoint record reached the log), and one whose log is zeros
/// besides (the crash before it); each opens, and works. A log that holds anything but
/// the creation's checkpoint is still refused without its control file (the test above).
#[test]
fn a_creation_interrupted_before_its_control_file_opens_again() {
    let ctl = Path::new("/db/bufpool.control");
    for zero_log in [false, true] {
        let vfs = MemVfs::new();
        let c = config();
        drop(open(&vfs, &c).unwrap());
        vfs.unlink(ctl).unwrap();
        if zero_log {
            for seg in wal_segments(&vfs) {
                let n = vfs.contents(&seg).unwrap().len();
                vfs.set_contents(&seg, vec![0; n]);
            }
        }
        let e = open(&vfs, &c).unwrap_or_else(|err| panic!("zero_log={zero_log}: {err}"));
        bank::init(&e).unwrap();
        bank::run_transfer(&e, 0, 1).unwrap();
        drop(e); // a crash: recovery replays the transfer
        let e = open(&vfs, &c).unwrap();
        let mut acked = vec![0; bank::MAX_THREADS as usize];
        acked[0] = 1;
        bank::verify(&e, &acked);
    }
}

/// Proves (item 9 of the safety issue): damage to the log's last flush, whose commits
/// were synced and acknowledged, is refused naming the LSN and segment, not read as a
/// torn tail. No later record vouches for that flush (each record carries the durable end
/// from before its own flush), so without the stamped durable end
/// (`wal_durable_end = off`, PostgreSQL's behaviour) recovery ends the log at the damaged
/// commit record and the acknowledged transfer is silently gone: the test shows that too.
/// How: transfers committed one by one (each flushed and acknowledged), the engine dropped
/// without a checkpoint, one byte flipped inside the last commit's records; then restored,
/// and everything acknowledged is recovered.
#[test]
fn damage_to_the_last_acknowledged_flush_is_refused_not_read_as_a_torn_tail() {
    for stamped in [true, false] {
        let vfs = MemVfs::new();
        let mut c = config();
        c.set("wal_durable_end", if stamped { "on" } else { "off" })
            .unwrap();
        let acked = bank_with_transfers(&vfs, &c, 40);
        let seg = tail_segment(&vfs);
        let segno = u64::from_str_radix(seg.file_name().unwrap().to_str().unwrap(), 16).unwrap();
        let base = segno * 65536;
        let recs = records_in(&vfs.contents(&seg).unwrap(), base);
        let last = recs.last().expect("records in the tail segment");
        // Nothing vouches for the last record: the last flush before the crash.
        assert!(
            recs.iter().all(|r| r.flushed <= last.lsn),
            "stamped={stamped}"
        );
        let victim = last.lsn.0;
        let mut bytes = vfs.contents(&seg).unwrap();
        let at = (victim - base) as usize + 20;
        bytes[at] ^= 0x55;
        vfs.set_contents(&seg, bytes.clone());
        match open(&vfs, &c) {
            Err(err) => {
                let msg = err.to_string();
                assert!(stamped, "refused without the stamp: {msg}");
                assert!(matches!(err, EngineError::Corrupt { .. }), "{msg}");
                assert!(
                    msg.contains(&bufpool::Lsn(victim).to_string())
                        && msg.contains(&seg.display().to_string())
                        && msg.contains("durable_end")
                        && msg.contains("acknowledged"),
                    "{msg}"
                );
            }
            Ok(e) => {
                assert!(!stamped, "damage to acknowledged log read as a torn tail");
                let end = e.recovery_report().unwrap().end;
                assert!(end.0 <= victim, "the log ends at the damage: {end}");
                drop(e);
                // That open started the log's next life past the damage; the original
                // log is gone, so this case stops here.
                continue;
            }
        }
        bytes[at] ^= 0x55;
        vfs.set_contents(&seg, bytes);
        let e = open(&vfs, &c).unwrap();
        let mut want = vec![0; bank::MAX_THREADS as usize];
        want[..2].copy_from_slice(&acked[..2]);
        bank::verify(&e, &want);
    }
}

/// Proves: a commit-log page on storage never outlives the commit record that decided it.
/// A transaction changes a row, a checkpoint writes that page, then the transaction
/// changes a row of another table and commits (asynchronously); the log is flushed and
/// the commit-log page written (saying "committed"), nothing else. One byte is flipped in
/// the record of the second change, so the log read from the redo point ends there. No
/// record after the flush vouched for it, so recovery took the damage for a torn tail and
/// the commit log answered "committed" for a transaction of which only the first change
/// survived: half a transaction, no error (the simulator's seed 17208124, 2026-12-06).
/// Now a commit-log write first inserts a record vouching for the flushed log
/// (`Wal::flush_vouched`), so the damage is refused naming where it is, with or without
/// the stamped durable end.
#[test]
fn a_commit_log_page_never_outlives_the_commit_record_that_decided_it() {
    use bufpool::table::Heap;
    use bufpool::txn::INVALID_XID;
    use bufpool::RelFileId;
    for stamped in [false, true] {
        let vfs = MemVfs::new();
        let mut c = config();
        for (k, v) in [
            ("synchronous_commit", "off"),
            ("wal_writer", "off"),
            ("bgwriter", "off"),
            ("checkpointer", "off"),
            ("wal_durable_end", if stamped { "on" } else { "off" }),
        ] {
            c.set(k, v).unwrap();
        }
        let (first, second) = (RelFileId::new(0, 16384), RelFileId::new(0, 16385));
        let e = open(&vfs, &c).unwrap();
        let (a, b) = (
            Heap::create(&e, first).unwrap(),
            Heap::create(&e, second).unwrap(),
        );
        e.checkpoint().unwrap();
        let x = e.begin_xid().unwrap();
        a.insert(x, b"first half").unwrap();
        e.checkpoint().unwrap();
        let before = e.wal().insert_position();
        b.insert(x, b"second half").unwrap();
        e.commit_transaction(x).unwrap();
        e.wal().flush(e.wal().insert_position()).unwrap();
        e.txns().clog().flush().unwrap();
        drop(e);
        // The first record at or after `before`: the second change.
        let seg_size = 65536;
        let segno = before.0 / seg_size;
        let seg = Path::new("/db/wal").join(format!("{segno:016X}"));
        let mut bytes = vfs.contents(&seg).unwrap();
        let victim = records_in(&bytes, segno * seg_size)
            .into_iter()
            .find(|r| r.lsn >= before)
            .expect("the second change's record")
            .lsn;
        bytes[(victim.0 - segno * seg_size) as usize + 20] ^= 0x55;
        vfs.set_contents(&seg, bytes);
        match open(&vfs, &c) {
            Err(err) => {
                let msg = err.to_string();
                assert!(matches!(err, EngineError::Corrupt { .. }), "{msg}");
                assert!(
                    msg.contains(&victim.to_string()) && msg.contains(&seg.display().to_string()),
                    "{msg}"
                );
            }
            Ok(e) => {
                let snap = e.txns().snapshot(INVALID_XID);
                let mut seen = Vec::new();
                for rel in [first, second] {
                    Heap::open(&e, rel)
                        .scan(&snap, |_, d| seen.push(d.to_vec()))
                        .unwrap();
                }
                panic!(
                    "stamped={stamped}: the damage read as the end of the log; visible: {:?}",
                    seen.iter()
                        .map(|d| String::from_utf8_lossy(d))
                        .collect::<Vec<_>>()
                );
            }
        }
    }
}

/// Proves: damage to a relation's drop record is refused, not read as the end of the log.
/// The drop unlinks the files once its record is flushed; if nothing after the record
/// vouched for it, a byte flipped in it read as a torn tail, replay recreated the relation
/// from its records since the checkpoint and the dropped rows came back, no error (the
/// simulator's seed 19300233, 2026-12-06). Now the drop flushes through
/// `Wal::flush_vouched`.
#[test]
fn damage_to_a_drop_record_is_refused_not_read_as_a_torn_tail() {
    use bufpool::table::Heap;
    use bufpool::wal::record::RecordKind;
    use bufpool::RelFileId;
    let vfs = MemVfs::new();
    let mut c = config();
    for (k, v) in [
        ("wal_writer", "off"),
        ("bgwriter", "off"),
        ("checkpointer", "off"),
    ] {
        c.set(k, v).unwrap();
    }
    let rel = RelFileId::new(0, 16384);
    let e = open(&vfs, &c).unwrap();
    let heap = Heap::create(&e, rel).unwrap();
    e.checkpoint().unwrap();
    let x = e.begin_xid().unwrap();
    heap.insert(x, b"dropped row").unwrap();
    e.commit_transaction(x).unwrap();
    e.drop_relation(rel).unwrap();
    drop(e);
    let seg_size = 65536;
    let (seg, victim) = wal_segments(&vfs)
        .into_iter()
        .find_map(|seg| {
            let segno =
                u64::from_str_radix(seg.file_name().unwrap().to_str().unwrap(), 16).unwrap();
            let recs = records_in(&vfs.contents(&seg).unwrap(), segno * seg_size);
            recs.into_iter()
                .find(|r| r.kind == RecordKind::DropRelation)
                .map(|r| (seg, r.lsn))
        })
        .expect("the drop record");
    let mut bytes = vfs.contents(&seg).unwrap();
    bytes[(victim.0 % seg_size) as usize + 20] ^= 0x55;
    vfs.set_contents(&seg, bytes);
    match open(&vfs, &c) {
        Err(err) => {
            let msg = err.to_string();
            assert!(matches!(err, EngineError::Corrupt { .. }), "{msg}");
            assert!(
                msg.contains(&victim.to_string()) && msg.contains(&seg.display().to_string()),
                "{msg}"
            );
        }
        Ok(e) => {
            let back = e
                .pool()
                .smgr()
                .exists(rel, bufpool::ForkNumber::Main)
                .unwrap();
            panic!("the damaged drop record read as the end of the log; relation back: {back}");
        }
    }
}
