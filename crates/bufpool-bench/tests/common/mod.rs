//! Helpers the integration tests share: the real binary run in a folder.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs `bufpool ARGS` in `cwd` and returns what it did.
pub fn bufpool(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bufpool"))
        .args(args)
        .current_dir(cwd)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run bufpool")
}

/// Runs `bufpool ARGS` in `cwd`, which must succeed; returns its standard output.
pub fn ok(cwd: &Path, args: &[&str]) -> String {
    let o = bufpool(cwd, args);
    assert!(
        o.status.success(),
        "bufpool {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Keeps reading `r` (a child's stderr) to its end on a thread of its own: a child whose
/// output pipe the test stopped reading would block once it is full, or end by SIGPIPE
/// once the test closed it (the program leaves SIGPIPE at its default).
pub fn drain(mut r: impl std::io::Read + Send + 'static) {
    std::thread::spawn(move || std::io::copy(&mut r, &mut std::io::sink()));
}

/// A folder holding `db`, a scale-1 database with a 16 MB pool made by `bufpool init`.
pub fn small_db() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary folder");
    ok(
        dir.path(),
        &[
            "init",
            "-s",
            "1",
            "-D",
            "db",
            "--set",
            "shared_buffers=16MB",
        ],
    );
    dir
}
