//! The embedder's front door: `Engine::open(path)` and `Engine::builder(path)`.
//!
//! Proves: one call creates a database on the real file system and a second reopens it
//! with what committed; the builder's typed knobs, knobs by name and custom file system
//! take effect; a bad knob is an error naming it (nothing created); `create(false)` refuses
//! a directory without a database.

use std::path::Path;
use std::sync::Arc;

use bufpool::table::Heap;
use bufpool::{Engine, EngineError, MemVfs, RelFileId, Vfs};

const REL: RelFileId = RelFileId::new(0, 16384);

fn rows(e: &Engine) -> Vec<Vec<u8>> {
    let r = e.begin().unwrap();
    let mut seen = Vec::new();
    Heap::open(e, REL)
        .scan(&r.snapshot(), |_, d| seen.push(d.to_vec()))
        .unwrap();
    seen
}

#[test]
fn one_call_creates_and_reopens_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let e = Engine::open(&path).unwrap();
        let heap = Heap::create(&e, REL).unwrap();
        let x = e.begin().unwrap();
        heap.insert(x.xid().unwrap(), b"kept").unwrap();
        x.commit().unwrap();
        e.shutdown().unwrap();
    }
    let e = Engine::open(&path).unwrap();
    assert_eq!(rows(&e), vec![b"kept".to_vec()]);
}

#[test]
fn the_builder_applies_typed_and_named_knobs_on_any_file_system() {
    let vfs = MemVfs::new();
    let e = Engine::builder("/db")
        .vfs(Arc::new(vfs.clone()) as Arc<dyn Vfs>)
        .shared_buffers_count(32)
        .wal_writer(false) // so only a commit could sync the log
        .set("synchronous_commit", "off")
        .open()
        .unwrap();
    assert_eq!(e.pool().nbuffers(), 32);
    // Asynchronous commit: a commit returns without waiting for its log to be synced.
    let heap = Heap::create(&e, REL).unwrap();
    let before = e.wal().stats().syncs;
    let x = e.begin().unwrap();
    heap.insert(x.xid().unwrap(), b"async").unwrap();
    x.commit().unwrap();
    assert_eq!(e.wal().stats().syncs, before, "the commit synced the log");
    assert!(vfs.exists(Path::new("/db/bufpool.meta")).unwrap());
}

#[test]
fn a_bad_knob_is_named_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let err = Engine::builder(&path)
        .set("shared_bufers", "64MB")
        .open()
        .unwrap_err();
    assert!(matches!(err, EngineError::Config(_)), "{err}");
    assert!(err.to_string().contains("shared_bufers"), "{err}");
    let err = Engine::builder(&path)
        .set("max_wal_size", "1MB")
        .open()
        .unwrap_err();
    assert!(err.to_string().contains("max_wal_size"), "{err}");
    assert!(!path.exists(), "a refused open created the directory");
}

#[test]
fn create_false_refuses_a_directory_without_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    assert!(Engine::builder(&path).create(false).open().is_err());
    assert!(!path.exists());
    drop(Engine::open(&path).unwrap());
    assert!(Engine::builder(&path).create(false).open().is_ok());
}
