//! The write-ahead log in a directory of its own (`create_wal_directory`), across power
//! cuts, and its errors.
//!
//! Proves: with the log placed in another directory before the data directory's first
//! open, its segment files are made there (nothing under the data directory), every
//! committed row survives a power cut whether a checkpoint wrote it or only the log holds
//! it, and the link itself survives a cut right after it was made; a location that is
//! relative, inside the data directory, not empty, or chosen for a directory that already
//! has a log is refused naming it; an open whose link leads nowhere fails instead of
//! starting a new log.
//! How: `SimVfs` (a link is durable only once its directory is fsynced, like any name),
//! 4 KiB pages, 64 KiB WAL segments; rows committed before and after a checkpoint;
//! `crash(seed)` for many seeds; reopen and scan.

use std::path::Path;
use std::sync::Arc;

use bufpool::table::Heap;
use bufpool::txn::INVALID_XID;
use bufpool::vfs::{SimVfs, Vfs};
use bufpool::{create_wal_directory, wal_directory, Config, Engine, EngineError, RelFileId};

const SEEDS: u64 = 12;
const ROWS: u32 = 400;
const DIR: &str = "/db";
const LOCATION: &str = "/dev2/pg_wal";
const REL: RelFileId = RelFileId::new(0, 16384);

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "64").unwrap();
    c.set("block_size", "4kB").unwrap();
    c.set("wal_segment_size", "64kB").unwrap();
    c
}

fn open(vfs: &SimVfs) -> Result<Engine, EngineError> {
    Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new(DIR),
        &config(),
        true,
    )
}

fn row(i: u32) -> Vec<u8> {
    let mut r = vec![(i % 251) as u8; 100];
    r[..4].copy_from_slice(&i.to_le_bytes());
    r
}

fn insert(e: &Engine, heap: &Heap<'_>, ids: std::ops::Range<u32>) {
    let x = e.begin_xid().unwrap();
    for i in ids {
        heap.insert(x, &row(i)).unwrap();
    }
    e.commit_transaction(x).unwrap();
}

fn segments(vfs: &SimVfs, dir: &str) -> usize {
    vfs.list_dir(Path::new(dir))
        .map(|names| names.iter().filter(|n| n.len() == 16).count())
        .unwrap_or(0)
}

#[test]
fn committed_rows_survive_a_power_cut_with_the_log_elsewhere() {
    for seed in 0..SEEDS {
        let vfs = SimVfs::new();
        create_wal_directory(&vfs, Path::new(DIR), Path::new(LOCATION)).unwrap();
        {
            let e = open(&vfs).unwrap();
            let heap = Heap::create(&e, REL).unwrap();
            insert(&e, &heap, 0..ROWS / 2);
            e.checkpoint().unwrap();
            for chunk in (ROWS / 2..ROWS).step_by(20) {
                insert(&e, &heap, chunk..chunk + 20);
            }
            assert!(
                segments(&vfs, LOCATION) >= 1,
                "the log's segments are in the location"
            );
        }
        vfs.crash(seed);
        let e = open(&vfs).unwrap_or_else(|err| panic!("seed {seed}: {err}"));
        assert_eq!(
            wal_directory(&vfs, Path::new(DIR)).unwrap().as_deref(),
            Some(Path::new(LOCATION)),
            "seed {seed}"
        );
        let heap = Heap::open(&e, REL);
        let snap = e.txns().snapshot(INVALID_XID);
        let mut seen = Vec::new();
        heap.scan(&snap, |_, data| {
            let i = u32::from_le_bytes(data[..4].try_into().unwrap());
            assert_eq!(data, row(i).as_slice(), "seed {seed}: row {i} damaged");
            seen.push(i);
        })
        .unwrap();
        seen.sort_unstable();
        assert_eq!(seen, (0..ROWS).collect::<Vec<_>>(), "seed {seed}");
        e.shutdown().unwrap();
    }
}

/// A power cut right after `create_wal_directory` returns keeps the link: the first open
/// puts the log in the location, never in a plain `<dir>/wal`.
#[test]
fn the_link_is_durable_when_create_returns() {
    for seed in 0..SEEDS {
        let vfs = SimVfs::new();
        create_wal_directory(&vfs, Path::new(DIR), Path::new(LOCATION)).unwrap();
        vfs.crash(seed);
        let e = open(&vfs).unwrap();
        e.shutdown().unwrap();
        assert!(segments(&vfs, LOCATION) >= 1, "seed {seed}");
        assert_eq!(
            wal_directory(&vfs, Path::new(DIR)).unwrap().as_deref(),
            Some(Path::new(LOCATION)),
            "seed {seed}"
        );
    }
}

fn problem(r: Result<(), EngineError>) -> (String, String) {
    match r {
        Err(EngineError::WalDirectory { path, problem }) => (path.display().to_string(), problem),
        other => panic!("expected a WalDirectory error, got {other:?}"),
    }
}

#[test]
fn bad_locations_are_refused_naming_them() {
    let vfs = SimVfs::new();
    let (path, why) = problem(create_wal_directory(
        &vfs,
        Path::new(DIR),
        Path::new("rel/wal"),
    ));
    assert_eq!(path, "rel/wal");
    assert!(why.contains("absolute"), "{why}");
    let (path, why) = problem(create_wal_directory(
        &vfs,
        Path::new(DIR),
        Path::new("/db/inner"),
    ));
    assert_eq!(path, "/db/inner");
    assert!(why.contains("inside the data directory"), "{why}");
    // However it is spelled: through `..`, or through a link that leads into the data
    // directory.
    vfs.create_dir_all(Path::new("/other")).unwrap();
    vfs.create_dir_all(Path::new(DIR)).unwrap();
    vfs.symlink(Path::new(DIR), Path::new("/alias")).unwrap();
    for spelled in ["/other/../db/inner", "/alias/inner"] {
        let (path, why) = problem(create_wal_directory(
            &vfs,
            Path::new(DIR),
            Path::new(spelled),
        ));
        assert_eq!(path, spelled);
        assert!(
            why.contains("inside the data directory") && why.contains("/db/inner"),
            "{why}"
        );
    }
    vfs.create_dir_all(Path::new("/used")).unwrap();
    vfs.open(
        Path::new("/used/000000010000"),
        bufpool::OpenOptions::create(),
    )
    .unwrap();
    let (path, why) = problem(create_wal_directory(
        &vfs,
        Path::new(DIR),
        Path::new("/used"),
    ));
    assert_eq!(path, "/used");
    assert!(
        why.contains("must be empty") && why.contains("000000010000"),
        "{why}"
    );
    // A data directory that has been opened has its log already.
    let fresh = SimVfs::new();
    open(&fresh).unwrap().shutdown().unwrap();
    let (path, why) = problem(create_wal_directory(
        &fresh,
        Path::new(DIR),
        Path::new(LOCATION),
    ));
    assert_eq!(path, "/db/wal");
    assert!(why.contains("already exists"), "{why}");
    assert!(wal_directory(&fresh, Path::new(DIR)).unwrap().is_none());
}

/// A link whose target is gone (an unmounted device) fails the open naming both; no new
/// log is started in its place.
#[test]
fn an_open_whose_log_is_missing_fails() {
    let vfs = SimVfs::new();
    vfs.create_dir_all(Path::new(DIR)).unwrap();
    vfs.symlink(Path::new(LOCATION), &Path::new(DIR).join("wal"))
        .unwrap();
    let err = open(&vfs).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, EngineError::WalDirectory { .. })
            && text.contains(LOCATION)
            && text.contains("/db/wal"),
        "{text}"
    );
    assert!(!vfs.exists(Path::new(LOCATION)).unwrap());
}

/// A WAL location that is there but emptied (its segment files removed by hand, or a
/// fresh, empty device mounted in its place) fails the open naming the missing segment as
/// missing, not as a corrupt log: nothing in it was damaged, it is not there.
#[test]
fn an_emptied_wal_location_is_reported_missing() {
    let vfs = SimVfs::new();
    create_wal_directory(&vfs, Path::new(DIR), Path::new(LOCATION)).unwrap();
    {
        let e = open(&vfs).unwrap();
        let heap = Heap::create(&e, REL).unwrap();
        insert(&e, &heap, 0..ROWS);
        e.shutdown().unwrap();
    }
    for name in vfs.list_dir(Path::new(LOCATION)).unwrap() {
        vfs.unlink(&Path::new(LOCATION).join(name)).unwrap();
    }
    let err = open(&vfs).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("missing") && !text.contains("corrupt") && text.contains(LOCATION),
        "{text}"
    );
    assert!(
        vfs.list_dir(Path::new(LOCATION)).unwrap().is_empty(),
        "no new log was started in the emptied location"
    );
}
