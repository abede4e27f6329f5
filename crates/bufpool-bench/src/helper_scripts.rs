//! The helper scripts the binary runs (`postgres-peer.sh` for `compare`, with the TPC-C
//! and YCSB SQL and pgbench scripts it runs from `tpcc/` and `ycsb/` beside it; `slow-device.sh` for the
//! experiments' devices; `fio-randread.sh` for `experiment outgrow`), built in so an
//! installed binary has them: found in the environment, in `scripts/` of a clone, or
//! written out from the built-in copy into a directory of this user's own. A leaf.
//!
//! Invariants: a written copy is the built-in text, mode 0700, in a directory only its
//! owner can write (another user's directory of that name is refused); a changed copy is
//! replaced through a rename, so a script is never seen half-written.

use std::path::{Path, PathBuf};

/// The helper scripts the binary runs, built in so an installed binary has them (the
/// files live in this crate's `scripts/`; the repository's `scripts/` links to them).
const BUILT_IN_SCRIPTS: [(&str, &str); 15] = [
    (
        "postgres-peer.sh",
        include_str!("../scripts/postgres-peer.sh"),
    ),
    ("slow-device.sh", include_str!("../scripts/slow-device.sh")),
    (
        "fio-randread.sh",
        include_str!("../scripts/fio-randread.sh"),
    ),
    (
        "tpcc/pg-tpcc.sql",
        include_str!("../scripts/tpcc/pg-tpcc.sql"),
    ),
    (
        "tpcc/pgbench/new_order.sql",
        include_str!("../scripts/tpcc/pgbench/new_order.sql"),
    ),
    (
        "tpcc/pgbench/payment.sql",
        include_str!("../scripts/tpcc/pgbench/payment.sql"),
    ),
    (
        "tpcc/pgbench/order_status.sql",
        include_str!("../scripts/tpcc/pgbench/order_status.sql"),
    ),
    (
        "tpcc/pgbench/delivery.sql",
        include_str!("../scripts/tpcc/pgbench/delivery.sql"),
    ),
    (
        "tpcc/pgbench/stock_level.sql",
        include_str!("../scripts/tpcc/pgbench/stock_level.sql"),
    ),
    (
        "ycsb/pg-ycsb.sql",
        include_str!("../scripts/ycsb/pg-ycsb.sql"),
    ),
    (
        "ycsb/pgbench/zipfian.sql",
        include_str!("../scripts/ycsb/pgbench/zipfian.sql"),
    ),
    (
        "ycsb/pgbench/latest.sql",
        include_str!("../scripts/ycsb/pgbench/latest.sql"),
    ),
    (
        "ycsb/pgbench/keycheck.sql",
        include_str!("../scripts/ycsb/pgbench/keycheck.sql"),
    ),
    (
        "ycsb/pgbench/read_write.sql",
        include_str!("../scripts/ycsb/pgbench/read_write.sql"),
    ),
    (
        "ycsb/pgbench/read_insert.sql",
        include_str!("../scripts/ycsb/pgbench/read_insert.sql"),
    ),
];

/// The files a script reads from beside itself, written out with it: the peer's TPC-C
/// and YCSB.
fn companions(name: &str) -> impl Iterator<Item = &'static str> + '_ {
    BUILT_IN_SCRIPTS.iter().map(|(n, _)| *n).filter(move |n| {
        name == "postgres-peer.sh" && (n.starts_with("tpcc/") || n.starts_with("ycsb/"))
    })
}

/// A helper script: `$env` if set, else `scripts/<name>` under the current directory (a
/// clone of the repository, edits included), else the built-in copy written to
/// `<temp>/bufpool-scripts-<uid>/<name>` (mode 0700, rewritten when it differs).
pub fn project_script(name: &str, env: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    let local = Path::new("scripts").join(name);
    if local.exists() {
        return local;
    }
    match companions(name)
        .try_for_each(|c| write_built_in_script(c).map(drop))
        .and_then(|()| write_built_in_script(name))
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("bufpool: cannot write the built-in {name}: {e}");
            local
        }
    }
}

/// Writes the built-in script `name` into a directory of this user's own and returns it.
fn write_built_in_script(name: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let Some((_, text)) = BUILT_IN_SCRIPTS.iter().find(|(n, _)| *n == name) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no built-in script {name}"),
        ));
    };
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let dir = std::env::temp_dir().join(format!("bufpool-scripts-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    // Another user's directory of that name (a shared /tmp) is not used.
    let meta = std::fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!("{} is not a private directory of this user", dir.display()),
        ));
    }
    let path = dir.join(name);
    let parent = path.parent().unwrap_or(&dir);
    if parent != dir {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(parent)?;
    }
    if std::fs::read_to_string(&path).ok().as_deref() != Some(*text) {
        let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
        std::fs::write(&tmp, text)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700))?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An installed binary (no `scripts/` beside it, no source tree) still has its helper
    /// scripts: written from the built-in copies, executable, in a directory only this
    /// user can write; a damaged copy is rewritten.
    #[test]
    fn built_in_scripts_are_written_out_executable_and_repaired() {
        use std::os::unix::fs::PermissionsExt;
        for (name, text) in BUILT_IN_SCRIPTS {
            let p = write_built_in_script(name).unwrap();
            assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
            let mode = std::fs::metadata(&p).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{}", p.display());
            let dir_mode = std::fs::metadata(p.parent().unwrap())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(dir_mode & 0o077, 0, "the directory is private");
            std::fs::write(&p, "damaged").unwrap();
            let again = write_built_in_script(name).unwrap();
            assert_eq!(std::fs::read_to_string(&again).unwrap(), text);
        }
        assert!(write_built_in_script("nothing.sh").is_err());
        // The peer's TPC-C and YCSB files land beside it, where it looks for them.
        let peer = write_built_in_script("postgres-peer.sh").unwrap();
        let files: Vec<&str> = companions("postgres-peer.sh").collect();
        assert_eq!(files.len(), 12, "{files:?}");
        for f in files {
            let p = write_built_in_script(f).unwrap();
            assert_eq!(p, peer.parent().unwrap().join(f));
        }
        assert_eq!(companions("slow-device.sh").count(), 0);
    }

    /// Every file of this crate's `scripts/` is built in (a file the peer reads but an
    /// installed binary lacks fails only where no clone is at hand; YCSB's did).
    #[test]
    fn every_file_of_the_scripts_folder_is_built_in() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts");
        let mut stack = vec![root.clone()];
        let mut files = Vec::new();
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    files.push(
                        p.strip_prefix(&root)
                            .unwrap()
                            .to_string_lossy()
                            .into_owned(),
                    );
                }
            }
        }
        files.sort();
        let mut built: Vec<&str> = BUILT_IN_SCRIPTS.iter().map(|(n, _)| *n).collect();
        built.sort_unstable();
        assert_eq!(files, built);
    }
}
