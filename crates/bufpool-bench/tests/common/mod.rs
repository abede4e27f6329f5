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
