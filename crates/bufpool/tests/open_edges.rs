//! The open's data-directory fsync walk meets things that are not the engine's files.
//!
//! Proves: a dangling symbolic link (an editor's `.#bufpool.conf` lock link), a FIFO, a
//! socket, a file the walk cannot open (mode 000 for a non-root user; an injected EIO on
//! open for root, who can open anything), a link to itself, two links to each other, and a
//! directory link back up the tree: the open succeeds with each of them in the data
//! directory, and nothing that holds data is passed by (every committed row is there after
//! a crash, and the walk counted at least the files the engine wrote). How: a real
//! database in a temporary directory, crashed (dropped without a shutdown) so the next
//! open walks and replays; the open runs on another thread and is waited for with a
//! bound, so a walk that blocks on the FIFO fails the test instead of hanging it.
//!
//! Before the walk looked at each entry with lstat, the dangling link failed the open
//! ("No such file or directory"), the FIFO blocked it for good, the unreadable file and
//! the link loops failed it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use bufpool::table::Heap;
use bufpool::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs};
use bufpool::{Config, Engine, RealVfs, RelFileId, Vfs};

const REL: RelFileId = RelFileId::new(0, 16384);
/// Far longer than any open of this small database takes; a hung open fails at it.
const OPEN_BOUND: Duration = Duration::from_secs(60);

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "64").unwrap();
    c.set("wal_segment_size", "1MB").unwrap();
    c
}

/// Opens `dir` on another thread; the engine (or the error as text) within the bound.
fn open_bounded(vfs: Arc<dyn Vfs>, dir: &Path) -> Result<Engine, String> {
    let (tx, rx) = mpsc::channel();
    let dir = dir.to_path_buf();
    std::thread::spawn(move || {
        let r = Engine::open_vfs(vfs, &dir, &config(), true).map_err(|e| e.to_string());
        let _ = tx.send(r);
    });
    rx.recv_timeout(OPEN_BOUND)
        .unwrap_or_else(|_| panic!("the open did not return within {OPEN_BOUND:?}"))
}

/// A database with `n` committed rows, crashed (no shutdown).
fn crashed_database(dir: &Path, n: u32) {
    let e = Engine::open_vfs(Arc::new(RealVfs::new()), dir, &config(), true).unwrap();
    let heap = Heap::create(&e, REL).unwrap();
    for i in 0..n {
        let t = e.begin().unwrap();
        heap.insert(t.xid().unwrap(), format!("row {i}").as_bytes())
            .unwrap();
        t.commit().unwrap();
    }
    drop(e);
}

fn rows(e: &Engine) -> usize {
    let heap = Heap::open(e, REL);
    let t = e.begin().unwrap();
    let mut n = 0;
    heap.scan(&t.snapshot(), |_, _| n += 1).unwrap();
    n
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo touches no memory of ours.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo {}", path.display());
}

/// Everything that is not an engine file, placed in the data directory and below it.
fn strays(dir: &Path) -> Vec<PathBuf> {
    let link = |target: &str, name: &Path| {
        std::os::unix::fs::symlink(target, name).unwrap();
        name.to_path_buf()
    };
    let fifo = dir.join("stray.fifo");
    mkfifo(&fifo);
    let base_fifo = dir.join("base/0/stray.fifo");
    mkfifo(&base_fifo);
    let sock = dir.join("stray.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let locked = dir.join("mode000");
    std::fs::write(&locked, b"not the engine's").unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    vec![
        fifo,
        base_fifo,
        sock,
        locked,
        link("bufpool.conf.nowhere", &dir.join(".#bufpool.conf")),
        link("self", &dir.join("self")),
        link("pong", &dir.join("ping")),
        link("ping", &dir.join("pong")),
        link("..", &dir.join("sub/up")),
        link("../..", &dir.join("base/0/up")),
    ]
}

#[test]
fn the_open_walks_past_what_is_not_an_engine_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    crashed_database(&dir, 20);
    let placed = strays(&dir);
    let e = open_bounded(Arc::new(RealVfs::new()), &dir).expect("the open succeeds");
    let report = e.recovery_report().expect("a crashed database replays");
    assert!(
        report.files_synced >= 3,
        "the engine's own files were fsynced: {report:?}"
    );
    assert_eq!(rows(&e), 20, "every committed row is there");
    drop(e);
    for p in &placed {
        assert!(
            std::fs::symlink_metadata(p).is_ok(),
            "{} is left as it was",
            p.display()
        );
    }
}

/// A file the walk cannot open is logged and passed by (root opens a mode-000 file, so the
/// refusal is injected: EIO on opening one stray file); a failed fsync of a file it did
/// open still fails the open, naming the file.
#[test]
fn a_file_that_cannot_be_opened_is_passed_by_and_a_failed_fsync_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    crashed_database(&dir, 5);
    std::fs::write(dir.join("unreadable"), b"x").unwrap();
    let vfs = FaultVfs::new(Arc::new(RealVfs::new()));
    vfs.add_rule(FaultRule::nth(
        "unreadable",
        FaultOp::Open,
        1,
        FaultKind::Eio,
    ));
    let e = open_bounded(Arc::new(vfs.clone()), &dir).expect("the open succeeds");
    assert_eq!(vfs.injected(), 1, "the walk tried the file");
    assert_eq!(rows(&e), 5);
    drop(e);

    let vfs = FaultVfs::new(Arc::new(RealVfs::new()));
    vfs.add_rule(FaultRule::nth(
        "unreadable",
        FaultOp::Fsync,
        1,
        FaultKind::Eio,
    ));
    let Err(err) = open_bounded(Arc::new(vfs), &dir) else {
        panic!("a failed fsync fails the open");
    };
    assert!(
        err.contains("unreadable") && err.contains("fsync"),
        "names the file and the operation: {err}"
    );
}

/// The mode bits of `p` (following links).
fn mode_of(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Every file and directory the engine makes is its owner's only (0600 and 0700, under a
/// umask that would allow more), a tablespace's and the log's locations and their missing
/// parents too; an open refuses a data directory that group or others may write to,
/// naming its mode, and opens it again once it is the owner's. Before, the data directory
/// was 0755 and its files 0644 under umask 022, and a world-writable one opened.
#[test]
fn what_the_engine_makes_is_its_owners_and_a_writable_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a/db");
    let wal = tmp.path().join("w/wal");
    let ts = tmp.path().join("t/ts1");
    // SAFETY: umask only sets this process's mask; 002 would let the group write.
    let old = unsafe { libc::umask(0o002) };
    bufpool::create_wal_directory(&RealVfs::new(), &dir, &wal).unwrap();
    crashed_database(&dir, 3);
    let e = open_bounded(Arc::new(RealVfs::new()), &dir).unwrap();
    e.pool().smgr().create_tablespace(1, &ts).unwrap();
    drop(e);
    // SAFETY: restores the mask read above.
    unsafe { libc::umask(old) };
    for d in [
        tmp.path().join("a"),
        dir.clone(),
        dir.join("base"),
        dir.join("base/0"),
        wal.clone(),
        ts.clone(),
    ] {
        assert_eq!(mode_of(&d), bufpool::vfs::DIR_MODE, "{}", d.display());
    }
    let mut files = 0;
    for d in [dir.join("base/0"), wal.clone(), dir.clone()] {
        for f in std::fs::read_dir(&d).unwrap() {
            let p = f.unwrap().path();
            if std::fs::symlink_metadata(&p).unwrap().is_file() {
                assert_eq!(mode_of(&p), bufpool::vfs::FILE_MODE, "{}", p.display());
                files += 1;
            }
        }
    }
    assert!(files >= 5, "data, log and control files checked: {files}");

    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let Err(err) = open_bounded(Arc::new(RealVfs::new()), &dir) else {
        panic!("a world-writable data directory opened");
    };
    assert!(err.contains("mode 0777"), "{err}");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o750)).unwrap();
    let e = open_bounded(Arc::new(RealVfs::new()), &dir).expect("group-readable opens");
    assert_eq!(rows(&e), 3);
}
