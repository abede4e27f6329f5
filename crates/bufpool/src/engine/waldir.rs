//! The write-ahead log in a directory of its own (PostgreSQL's `initdb --waldir`).
//!
//! Owns: the link `<dir>/wal` → `<location>` that places the log's segment files on
//! another directory (another device), made once, before the data directory's first
//! open, and the check at every open that the link still leads to a directory.
//! Layout: without a WAL directory, `<dir>/wal` is a plain directory made by the first
//! open. With one, it is a symbolic link to an absolute directory that was empty (or
//! missing, then created) when the link was made; every path of the log goes through
//! `<dir>/wal`, so nothing else in the engine knows about it (as a tablespace's link).
//! Durability: [`create_wal_directory`] creates the data directory and the location with
//! their missing parents, fsyncing the parent of each directory it created, then makes the
//! link and fsyncs the data directory: once it returns, a power cut loses neither.
//! Invariants: the link is made only where no log exists yet (no `<dir>/wal`, no control
//! file), so a log is never split across two places; an open that finds the link leading
//! nowhere fails naming both, instead of starting a new log (which would lose every
//! commit in the missing one).

use std::io;
use std::path::{Path, PathBuf};

use super::EngineError;
use crate::vfs::Vfs;

/// The log's directory inside a data directory (a link when it lives elsewhere).
pub(crate) const WAL_DIR: &str = "wal";

/// Places the write-ahead log of the data directory `dir`, which must not hold a log or a
/// control file yet, in `location` (absolute, outside `dir`, empty or missing): creates
/// both directories as needed and the link `<dir>/wal` → `location`, durably. Open the
/// engine on `dir` afterwards as usual.
pub fn create_wal_directory(vfs: &dyn Vfs, dir: &Path, location: &Path) -> Result<(), EngineError> {
    let invalid = |path: &Path, problem: String| EngineError::WalDirectory {
        path: path.to_path_buf(),
        problem,
    };
    if !location.is_absolute() {
        return Err(invalid(
            location,
            "the location must be an absolute path".into(),
        ));
    }
    // Decided on where both really lead (links followed, `..` applied), not on how
    // they are spelled.
    let real = |p: &Path| {
        std::path::absolute(p)
            .and_then(|p| crate::vfs::resolve_path(vfs, &p))
            .map_err(|e| EngineError::io("resolving", p, e))
    };
    let (real_dir, real_location) = (real(dir)?, real(location)?);
    if real_location.starts_with(&real_dir) {
        return Err(invalid(
            location,
            format!(
                "the location lies inside the data directory {}{}; the log belongs \
                 elsewhere (another directory or device)",
                dir.display(),
                if real_location != location {
                    format!(" (it leads to {})", real_location.display())
                } else {
                    String::new()
                }
            ),
        ));
    }
    let link = dir.join(WAL_DIR);
    for held in [link.clone(), dir.join(super::control::CONTROL_FILE)] {
        let exists = vfs
            .exists(&held)
            .map_err(|e| EngineError::io("checking", &held, e))?;
        let is_link = vfs.read_link(&held).is_ok();
        if exists || is_link {
            return Err(invalid(
                &held,
                "already exists: the WAL directory is chosen when the data directory is \
                 created, before its first open"
                    .into(),
            ));
        }
    }
    crate::vfs::create_dir_durably(vfs, dir)?;
    crate::vfs::create_dir_durably(vfs, location)?;
    let entries = vfs
        .list_dir(location)
        .map_err(|e| EngineError::io("listing", location, e))?;
    if !entries.is_empty() {
        let mut named = entries.clone();
        named.sort();
        named.truncate(4);
        return Err(invalid(
            location,
            format!(
                "the location must be empty, but holds {} {} ({}{})",
                entries.len(),
                if entries.len() == 1 {
                    "entry"
                } else {
                    "entries"
                },
                named.join(", "),
                if entries.len() > named.len() {
                    ", ..."
                } else {
                    ""
                }
            ),
        ));
    }
    vfs.symlink(location, &link)
        .map_err(|e| EngineError::io("creating the link", &link, e))?;
    vfs.sync_dir(dir)
        .map_err(|e| EngineError::io("fsync of directory", dir, e))?;
    Ok(())
}

/// Where the log of `dir` lives when it has a directory of its own (the link's target,
/// taken from `dir` when relative); None when `<dir>/wal` is a plain directory or absent.
pub fn wal_directory(vfs: &dyn Vfs, dir: &Path) -> Result<Option<PathBuf>, EngineError> {
    let link = dir.join(WAL_DIR);
    match vfs.read_link(&link) {
        Ok(target) => Ok(Some(dir.join(target))),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::InvalidInput
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(EngineError::io("reading the link", &link, e)),
    }
}

/// At open: fails if `<dir>/wal` is a link whose target is missing (an unmounted device,
/// a removed directory): the log is not there, and a new one must not start in its place.
pub(crate) fn check_wal_directory(vfs: &dyn Vfs, dir: &Path) -> Result<(), EngineError> {
    let Some(location) = wal_directory(vfs, dir)? else {
        return Ok(());
    };
    let there = vfs
        .exists(&location)
        .map_err(|e| EngineError::io("checking", &location, e))?;
    if there {
        return Ok(());
    }
    Err(EngineError::WalDirectory {
        path: location,
        problem: format!(
            "the WAL directory that {} leads to is missing (an unmounted device or a \
             removed directory?); refusing to open, since a new log there would lose the \
             commits in the missing one",
            dir.join(WAL_DIR).display()
        ),
    })
}
