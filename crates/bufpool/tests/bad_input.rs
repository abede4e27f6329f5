//! Bad input: damaged storage, missing files, exhausted pins, bad configuration, a
//! directory that is already open.
//!
//! Proves: each is a typed error whose message names what is wrong (file, block, knob),
//! never a panic, a hang or a silently used page.

mod common;

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bufpool::{BufferError, BufferPool, Config, ForkNumber, RealVfs, RelFileId, SmgrError};
use common::*;

fn real() -> Arc<RealVfs> {
    Arc::new(RealVfs::new())
}

#[test]
fn corrupted_checksum_on_disk_is_reported_with_file_and_block_never_used() {
    let dir = tempfile::tempdir().unwrap();
    {
        let pool = open(real(), dir.path(), &config("16"));
        fill(&pool, 3);
    }
    let file = dir.path().join("base/0/16384");
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.write_at(&[0xFF], 8192 + 4000).unwrap();
    drop(f);
    let pool = open(real(), dir.path(), &config("16"));
    for _ in 0..2 {
        match pool.read(tag(1)) {
            Err(e @ BufferError::Corrupt { .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("base/0/16384")
                        && msg.contains("block 1")
                        && msg.contains("checksum"),
                    "{msg}"
                );
            }
            other => panic!("expected a checksum error, got {other:?}"),
        }
    }
    // Its neighbours are fine.
    assert_eq!(get_u64(&pool.read(tag(2)).unwrap().read(), BODY), 2);
    assert_eq!(pool.usage_summary().pinned, 0);
}

#[test]
fn page_copied_to_another_block_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    {
        let pool = open(real(), dir.path(), &config("16"));
        fill(&pool, 3);
    }
    let file = dir.path().join("base/0/16384");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&file)
        .unwrap();
    let mut page = vec![0u8; 8192];
    f.read_exact_at(&mut page, 0).unwrap();
    f.write_at(&page, 2 * 8192).unwrap();
    drop(f);
    let pool = open(real(), dir.path(), &config("16"));
    assert!(matches!(
        pool.read(tag(2)),
        Err(BufferError::Corrupt { .. })
    ));
}

#[test]
fn truncated_segment_is_a_short_read_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    {
        let pool = open(real(), dir.path(), &config("16"));
        fill(&pool, 4);
    }
    let file = dir.path().join("base/0/16384");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(2 * 8192 + 100)
        .unwrap();
    let pool = open(real(), dir.path(), &config("16"));
    assert_eq!(pool.nblocks(REL, ForkNumber::Main).unwrap(), 2);
    let err = pool.read(tag(2)).unwrap_err();
    assert!(
        matches!(
            err,
            BufferError::Storage(SmgrError::ShortRead { got: 100, .. })
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("16384") && msg.contains("block 2") && msg.contains("read only 100 of 8192"),
        "{msg}"
    );
    let err = pool.read(tag(3)).unwrap_err().to_string();
    assert!(err.contains("read only 0 of 8192"), "{err}");
}

#[test]
fn missing_relation_file_names_the_path_and_the_os_error() {
    let dir = tempfile::tempdir().unwrap();
    let pool = open(real(), dir.path(), &config("16"));
    let err = pool
        .read(bufpool::BufferTag::new(
            RelFileId::new(0, 999),
            ForkNumber::Main,
            0,
        ))
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{err}");
    assert!(err.to_string().contains("base/0/999"), "{err}");
    let err = pool
        .nblocks(RelFileId::new(0, 999), ForkNumber::Main)
        .unwrap_err();
    assert!(err.to_string().contains("base/0/999"), "{err}");
}

#[test]
fn missing_segment_in_the_middle_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config("16");
    c.set("segment_size", "32kB").unwrap(); // 4 pages per segment
    {
        let pool = open(real(), dir.path(), &c);
        fill(&pool, 10);
    }
    assert!(dir.path().join("base/0/16384.2").exists());
    std::fs::remove_file(dir.path().join("base/0/16384.1")).unwrap();
    let pool = open(real(), dir.path(), &c);
    assert_eq!(get_u64(&pool.read(tag(1)).unwrap().read(), BODY), 1);
    let err = pool.read(tag(9)).unwrap_err();
    assert!(err.to_string().contains("16384.1"), "{err}");
}

#[test]
fn more_pins_than_buffers_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let pool = open(real(), dir.path(), &config("16"));
    fill(&pool, 20);
    let held: Vec<_> = (0..16).map(|b| pool.read(tag(b)).unwrap()).collect();
    match pool.read(tag(17)) {
        Err(e @ BufferError::AllPinned { .. }) => {
            assert!(e.to_string().contains("all 16 buffers are pinned"), "{e}")
        }
        other => panic!("expected AllPinned, got {other:?}"),
    }
    assert!(matches!(
        pool.extend(REL, ForkNumber::Main),
        Err(BufferError::AllPinned { .. })
    ));
    drop(held);
    assert_eq!(get_u64(&pool.read(tag(17)).unwrap().read(), BODY), 17);
}

#[test]
fn invalid_configuration_names_the_knob() {
    let dir = tempfile::tempdir().unwrap();
    // `Config` is non-exhaustive: fields are set on a default, never by a struct literal.
    let mut c = Config::default();
    c.buffer_mapping_partitions = 3;
    let err = BufferPool::open(real(), dir.path(), &c, true).unwrap_err();
    assert!(
        matches!(err, BufferError::Config(ref e) if e.knob == "buffer_mapping_partitions"),
        "{err}"
    );
    let mut c = Config::default();
    c.shared_buffers = bufpool::PoolSize::Buffers(8);
    let err = BufferPool::open(real(), dir.path(), &c, true)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("shared_buffers") && err.contains("16"),
        "{err}"
    );
}

#[test]
fn page_size_is_fixed_at_creation() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(real(), dir.path(), &config("16")));
    let mut c = config("16");
    c.set("block_size", "16kB").unwrap();
    let err = BufferPool::open(real(), dir.path(), &c, false)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("block_size=8192") && err.contains("fixed at creation"),
        "{err}"
    );
}

#[test]
fn opening_a_non_directory_without_create_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let err = BufferPool::open(real(), dir.path(), &config("16"), false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a bufpool data directory"), "{err}");
}

#[test]
fn second_open_of_a_directory_names_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let _first = open(real(), dir.path(), &config("16"));
    let err = BufferPool::open(real(), dir.path(), &config("16"), true).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, BufferError::Storage(SmgrError::DirectoryLocked { .. })),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("process {}", std::process::id())),
        "{msg}"
    );
}

/// Held while this binary forks a child, and by tests that need every lock file
/// descriptor of this process closed: between fork and exec the child shares the parent's
/// open file descriptions (O_CLOEXEC closes them only at exec), flock locks included, so
/// a directory dropped in that window still looks held.
static SPAWN: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn directory_lock_is_released_when_the_pool_is_dropped() {
    let _no_fork = SPAWN.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    drop(open(real(), dir.path(), &config("16")));
    assert!(dir.path().join("bufpool.lock").exists());
    drop(open(real(), dir.path(), &config("16")));
}

/// Child half of the next test, which runs it in a separate process: holds the directory
/// open until its stdin closes.
#[test]
#[ignore = "run as a child process by lock_held_by_another_process_names_its_pid_and_dies_with_it"]
fn child_holding_a_directory() {
    let dir = std::env::var("BUFPOOL_TEST_HOLD_DIR").expect("run by the parent test only");
    let _pool = open(real(), dir.as_ref(), &config("16"));
    println!("holding");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
}

#[test]
fn lock_held_by_another_process_names_its_pid_and_dies_with_it() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let spawning = SPAWN.lock().unwrap_or_else(|e| e.into_inner());
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_holding_a_directory",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("BUFPOOL_TEST_HOLD_DIR", dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    drop(spawning);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("holding") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "child exited before holding the directory"
        );
    }
    let err = BufferPool::open(real(), dir.path(), &config("16"), true)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&format!("process {}", child.id())), "{err}");
    child.kill().unwrap(); // SIGKILL: no destructor runs in the child
    child.wait().unwrap();
    // The kernel released the dead process's flock; the stale lock file does not block us.
    drop(open(real(), dir.path(), &config("16")));
}

#[test]
fn corrupt_metadata_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(real(), dir.path(), &config("16")));
    std::fs::write(
        dir.path().join("bufpool.meta"),
        "bufpool data directory\nformat=1\n",
    )
    .unwrap();
    let err = BufferPool::open(real(), dir.path(), &config("16"), false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("bufpool.meta"), "{err}");
}

/// A misspelt knob is PostgreSQL's "unrecognized configuration parameter", with the
/// closest knob's name when one is close (it listed all 73 names before); a name near
/// nothing gets no guess.
#[test]
fn a_misspelt_knob_is_unrecognized_with_a_suggestion() {
    let mut c = Config::default();
    let err = c.set("shared_bufers", "16MB").unwrap_err();
    assert_eq!(err.knob, bufpool::options::UNKNOWN_KNOB);
    let text = err.to_string();
    assert!(
        text.starts_with("unrecognized configuration parameter \"shared_bufers\"")
            && text.contains("did you mean \"shared_buffers\"?"),
        "{text}"
    );
    assert!(
        !text.contains("checkpoint_timeout"),
        "no list of every knob: {text}"
    );
    let text = c.set("zzzzqqqq", "1").unwrap_err().to_string();
    assert!(
        text.contains("unrecognized") && !text.contains("did you mean"),
        "{text}"
    );
    assert_eq!(c, Config::default(), "nothing changed");
}
