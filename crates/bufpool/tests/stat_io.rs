//! pg_stat_io as PostgreSQL 18 has it (`Engine::stat_io`) and pg_stat_checkpointer's
//! `slru_written`.
//!
//! Proves: relation rows count blocks with their bytes (block size each), per backend type
//! (client backends, the checkpointer); the log's rows count its writes with their bytes
//! and its fsyncs, `init` rows the zero-fill of new segments, the startup row recovery's
//! reads of the log; the checkpoints count the SLRU pages they write.

mod common;

use std::path::Path;
use std::sync::Arc;

use bufpool::stats::StatIoRow;
use bufpool::{Engine, ForkNumber, MemVfs, Vfs};
use common::*;

fn open(vfs: &MemVfs, wal_writer: bool) -> Engine {
    let mut c = config("64");
    c.set("wal_segment_size", "1MB").unwrap();
    c.set("wal_writer", if wal_writer { "on" } else { "off" })
        .unwrap();
    Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &c,
        true,
    )
    .unwrap()
}

fn row<'a>(rows: &'a [StatIoRow], backend: &str, object: &str, context: &str) -> &'a StatIoRow {
    rows.iter()
        .find(|r| r.backend_type == backend && r.object == object && r.context == context)
        .unwrap_or_else(|| panic!("no {backend}/{object}/{context} row in {rows:#?}"))
}

/// Commits `n` transactions, each logging one page change of REL.
fn commits(e: &Engine, n: u32) {
    for i in 0..n {
        let x = e.begin_xid().unwrap();
        let b = e.pool().read(tag(i % 8)).unwrap();
        {
            let mut g = b.write();
            put_u64(&mut g, BODY + 8, u64::from(i));
            let r = BODY + 8..BODY + 16;
            e.log_pages(x, 0, &mut [(&mut g, std::slice::from_ref(&r))])
                .unwrap();
        }
        drop(b);
        e.commit_transaction(x).unwrap();
    }
}

#[test]
fn relation_and_log_rows_count_blocks_bytes_and_fsyncs() {
    let vfs = MemVfs::new();
    let e = open(&vfs, false);
    fill(e.pool(), 8);
    e.pool().evict_all().unwrap();
    commits(&e, 20);
    e.checkpoint().unwrap();
    let rows = e.stat_io();
    let bs = e.pool().page_size() as u64;
    let backend = row(&rows, "client backend", "relation", "normal");
    assert!(backend.reads >= 8 && backend.hits > 0, "{backend:?}");
    assert_eq!(backend.read_bytes, backend.reads * bs);
    assert_eq!(backend.extend_bytes, backend.extends * bs);
    assert!(backend.extends >= 8, "{backend:?}");
    let ckpt = row(&rows, "checkpointer", "relation", "normal");
    assert!(
        ckpt.writes > 0 && ckpt.write_bytes == ckpt.writes * bs,
        "{ckpt:?}"
    );
    let wal = row(&rows, "client backend", "wal", "normal");
    assert!(wal.writes > 0 && wal.fsyncs >= 20, "{wal:?}");
    assert!(
        wal.write_bytes >= wal.writes * 4096,
        "whole WAL blocks: {wal:?}"
    );
    let all_writes: u64 = rows
        .iter()
        .filter(|r| r.object == "wal" && r.context == "normal")
        .map(|r| r.write_bytes)
        .sum();
    assert_eq!(
        all_writes,
        e.wal().stats().write_bytes,
        "every backend type's writes"
    );
    // Creating the directory zero-filled its first segments.
    let init = rows
        .iter()
        .filter(|r| r.object == "wal" && r.context == "init")
        .map(|r| r.write_bytes)
        .sum::<u64>();
    assert!(init >= 1 << 20, "{rows:#?}");
    let c = e.checkpointer_stats();
    assert!(c.slru_written > 0, "the commits' commit-log page: {c:?}");
    e.shutdown().unwrap();
}

#[test]
fn recovery_reads_are_the_startup_rows() {
    let vfs = MemVfs::new();
    let e = open(&vfs, false);
    fill(e.pool(), 8);
    e.checkpoint().unwrap();
    commits(&e, 30);
    drop(e); // a crash: the next open replays the log
    let e = open(&vfs, true);
    let rows = e.stat_io();
    let startup = row(&rows, "startup", "wal", "normal");
    let replayed = e.recovery_report().expect("a recovery").bytes;
    assert!(startup.reads > 0, "{startup:?}");
    assert!(
        startup.read_bytes >= replayed,
        "{startup:?}, replayed {replayed}"
    );
    // Replay ran as the startup process: nothing it did is a client backend's.
    let backend = row(&rows, "client backend", "relation", "normal");
    assert_eq!(
        (backend.reads, backend.hits, backend.writes),
        (0, 0, 0),
        "{backend:?}"
    );
    assert_eq!(e.pool().nblocks(REL, ForkNumber::Main).unwrap(), 8);
    e.shutdown().unwrap();
}

/// With commits not waiting for the log, the WAL writer thread writes it: its own row.
#[test]
fn the_wal_writer_writes_under_its_own_backend_type() {
    let vfs = MemVfs::new();
    let mut c = config("64");
    c.set("wal_segment_size", "1MB").unwrap();
    c.set("synchronous_commit", "off").unwrap();
    c.set("wal_writer_delay", "10ms").unwrap();
    let e = Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &c,
        true,
    )
    .unwrap();
    fill(e.pool(), 8);
    commits(&e, 10);
    let end = e.wal().insert_position();
    // Waits for the thread's flush (every wal_writer_delay), at most 30 s.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while e.wal().flushed() < end {
        assert!(
            std::time::Instant::now() < deadline,
            "the WAL writer never flushed"
        );
        std::thread::yield_now();
    }
    let rows = e.stat_io();
    let w = row(&rows, "walwriter", "wal", "normal");
    assert!(w.writes > 0 && w.write_bytes > 0 && w.fsyncs > 0, "{w:?}");
    e.shutdown().unwrap();
}
