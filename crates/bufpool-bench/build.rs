//! Stamps the binary with the commit it was built from (`BUFPOOL_COMMIT`), for the
//! provenance every report records: `git rev-parse --short=12 HEAD` in the source tree,
//! with `-dirty` if it has changes; "unknown" without git (a packaged build).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{c}-dirty")
            } else {
                c
            }
        }
        _ => "unknown".to_string(),
    };
    println!("cargo:rustc-env=BUFPOOL_COMMIT={commit}");
    // A new commit or checkout moves HEAD or a ref: rebuild the stamp then.
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={git_dir}/HEAD");
        println!("cargo:rerun-if-changed={git_dir}/refs/heads");
        println!("cargo:rerun-if-changed={git_dir}/index");
    }
}
