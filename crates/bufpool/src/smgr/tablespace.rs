//! Tablespaces: relation directories outside the data directory, PostgreSQL's pg_tblspc
//! links.
//!
//! Owns: the symbolic links `<dir>/base/<id>` → `<location>` that place tablespace `id`'s
//! relation files on another directory (another device), and their creation and listing.
//! Every path of a relation goes through `<dir>/base/<id>` (`Smgr::segment_path`), so
//! once the link exists nothing else in the storage manager knows about it: files are
//! created, fsynced, listed and unlinked through the link, and a `sync_dir` of the
//! tablespace directory fsyncs the location.
//! Layout: tablespace 0, the default, is the plain directory `<dir>/base/0`, made by the
//! first relation created in it, as is the directory of any other id that was never
//! created here (those are not listed by [`Smgr::tablespaces`]). A created tablespace is a
//! link to an absolute directory that was empty (or missing, then created) at creation.
//! Invariants: id 0 is never a link; an id names at most one tablespace (the link's name
//! is the id); a location is absolute, held no file when its tablespace was created, and
//! is no other tablespace's (compared as given), so no two tablespaces share a relation
//! file; it is refused inside the data directory when that one's path is absolute (a
//! lexical check: the storage manager cannot resolve real paths through the vfs).
//! Durability: `create_tablespace` creates a missing location and fsyncs the parent of
//! each directory it created, creates the link, then fsyncs `<dir>/base`: once it returns,
//! a power cut loses neither the link nor the location. A failed fsync of `<dir>/base` is
//! latched like any directory fsync (every later `Smgr::sync` reports it). The files of
//! relations in the tablespace follow the rules of `smgr/mod.rs` (their directory is the
//! location, reached through the link).
//! Locks: none of the storage manager's: no open fork is touched. Two creations of one id
//! race on `symlink(2)`, which lets one win; the other fails with "already exists".

use std::io;
use std::path::{Path, PathBuf};

use super::error::{file_err, SmgrResult, TablespaceError};
use super::Smgr;

/// The default tablespace: the plain directory `<dir>/base/0`, never a link.
pub const DEFAULT_TABLESPACE: u32 = 0;

/// How many entries of a non-empty location an error names.
const ENTRIES_NAMED_MAX: usize = 3;

impl Smgr {
    /// Creates tablespace `id` at `location`: an absolute directory outside the data
    /// directory that is empty, or missing (then created, with its missing parents). The
    /// link `<dir>/base/<id>` → `location` is durable when this returns. Relations of
    /// tablespace `id` created afterwards live in `location`.
    ///
    /// Errors name the tablespace and the path: id 0 (the default tablespace, which is
    /// the data directory's own), an id that exists (a link, or a plain directory made for
    /// relations of that id), a relative location, one inside the data directory (when
    /// its path is absolute), another tablespace's location, one that is not a directory
    /// or not empty, and every failed system call with its OS error.
    pub fn create_tablespace(&self, id: u32, location: &Path) -> SmgrResult<()> {
        let link = self.tablespace_dir(id);
        let invalid = |path: &Path, problem: String| TablespaceError::Invalid {
            id,
            path: path.to_path_buf(),
            problem,
        };
        let io_err = |op: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| TablespaceError::Io {
                id,
                op,
                path,
                source,
            }
        };
        if id == DEFAULT_TABLESPACE {
            return Err(invalid(
                &link,
                "tablespace 0 is the default tablespace, inside the data directory; it cannot \
                 be created"
                    .into(),
            )
            .into());
        }
        if !location.is_absolute() {
            return Err(invalid(location, "the location must be an absolute path".into()).into());
        }
        if self.dir.is_absolute() && location.starts_with(&self.dir) {
            return Err(invalid(
                location,
                format!(
                    "the location lies inside the data directory {}; a tablespace belongs \
                     elsewhere (another directory or device)",
                    self.dir.display()
                ),
            )
            .into());
        }
        match self.vfs.read_link(&link) {
            Ok(target) => {
                return Err(invalid(
                    &link,
                    format!("already exists (a link to {})", target.display()),
                )
                .into())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                return Err(invalid(
                    &link,
                    "already exists, as a directory inside the data directory (made for \
                     relations of this tablespace id)"
                        .into(),
                )
                .into())
            }
            Err(e) => return Err(io_err("reading the link", &link)(e).into()),
        }
        if let Some((other, _)) = self
            .tablespaces()?
            .into_iter()
            .find(|(_, used)| used == location)
        {
            return Err(invalid(
                location,
                format!("the location is already tablespace {other}'s"),
            )
            .into());
        }
        self.create_location(id, location)?;
        self.check_location_empty(id, location)?;
        self.vfs
            .symlink(location, &link)
            .map_err(io_err("creating the link", &link))?;
        let base = self.dir.join("base");
        self.vfs.sync_dir(&base).map_err(|source| {
            self.sync_queue.latch(base.clone(), source.to_string());
            io_err("fsync of", &base)(source)
        })?;
        Ok(())
    }

    /// Fails unless `location` (a directory) holds no entry; the error names the first
    /// few entries it holds.
    fn check_location_empty(&self, id: u32, location: &Path) -> SmgrResult<()> {
        let entries = self
            .vfs
            .list_dir(location)
            .map_err(|source| TablespaceError::Io {
                id,
                op: "listing the location",
                path: location.to_path_buf(),
                source,
            })?;
        if entries.is_empty() {
            return Ok(());
        }
        let mut named = entries.clone();
        named.sort();
        named.truncate(ENTRIES_NAMED_MAX);
        let noun = if entries.len() == 1 {
            "entry"
        } else {
            "entries"
        };
        let more = if entries.len() > named.len() {
            ", ..."
        } else {
            ""
        };
        Err(TablespaceError::Invalid {
            id,
            path: location.to_path_buf(),
            problem: format!(
                "the location must be empty, but holds {} {noun} ({}{more})",
                entries.len(),
                named.join(", "),
            ),
        }
        .into())
    }

    /// Creates `location` and its missing parents, fsyncing the parent of each directory
    /// created (top down), so their names are durable before the link points at them.
    fn create_location(&self, id: u32, location: &Path) -> SmgrResult<()> {
        crate::vfs::create_dir_durably(&*self.vfs, location).map_err(|e| TablespaceError::Io {
            id,
            op: match e.op {
                "checking" => "checking the location",
                "creating" => "creating the location",
                _ => "fsync of the location's parent",
            },
            path: e.path,
            source: e.source,
        })?;
        Ok(())
    }

    /// The created tablespaces, by id: each with its location (the link's target; a
    /// relative target is taken from `<dir>/base`). Tablespace 0 and plain directories of
    /// `<dir>/base` are not links and not listed.
    pub fn tablespaces(&self) -> SmgrResult<Vec<(u32, PathBuf)>> {
        let base = self.dir.join("base");
        let names = self
            .vfs
            .list_dir(&base)
            .map_err(file_err("listing", &base))?;
        let mut out = Vec::new();
        for name in names {
            let Some(id) = name.parse::<u32>().ok().filter(|id| id.to_string() == name) else {
                continue;
            };
            let link = base.join(&name);
            match self.vfs.read_link(&link) {
                Ok(target) => out.push((id, base.join(target))),
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
                Err(source) => {
                    return Err(TablespaceError::Io {
                        id,
                        op: "reading the link",
                        path: link,
                        source,
                    }
                    .into())
                }
            }
        }
        out.sort_unstable_by_key(|&(id, _)| id);
        debug_assert!(
            out.iter().all(|&(id, _)| id != DEFAULT_TABLESPACE),
            "the default tablespace is listed as a link: {out:?}"
        );
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smgr::{SmgrError, SmgrOptions};
    use crate::stats::IoContext;
    use crate::types::{ForkNumber, RelFileId};
    use crate::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs, MemVfs, RealVfs, SimVfs, Vfs};
    use std::sync::Arc;

    const BLOCK: usize = 4096;

    fn options(create: bool) -> SmgrOptions {
        SmgrOptions {
            wal_segment_size: None,
            block_size: BLOCK,
            segment_size: 4 * BLOCK as u64,
            create,
            direct: false,
            dsync: false,
        }
    }

    fn open(vfs: Arc<dyn Vfs>, dir: &Path, create: bool) -> Smgr {
        Smgr::open(vfs, dir, options(create)).unwrap()
    }

    /// Creates `rel`'s main fork with `pages` pages and fsyncs it.
    fn fill(s: &Smgr, rel: RelFileId, pages: usize) {
        s.create(rel, ForkNumber::Main).unwrap();
        let page = vec![7u8; BLOCK];
        let refs: Vec<&[u8]> = (0..pages).map(|_| page.as_slice()).collect();
        s.extend(rel, ForkNumber::Main, &refs, IoContext::Normal)
            .unwrap();
        s.sync().unwrap();
    }

    /// On a real file system: one location created with a missing parent, one that
    /// existed empty; the links are symbolic links, a relation's segments land in its
    /// tablespace's location, and both the listing and the relation's size survive a
    /// reopen.
    #[test]
    fn relations_of_a_tablespace_live_in_its_location() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("db");
        let created = root.path().join("dev1").join("ts");
        let existing = root.path().join("dev2");
        std::fs::create_dir(&existing).unwrap();
        let vfs: Arc<dyn Vfs> = Arc::new(RealVfs::new());
        let s = open(vfs.clone(), &dir, true);
        assert_eq!(s.tablespaces().unwrap(), []);
        s.create_tablespace(1, &created).unwrap();
        s.create_tablespace(2, &existing).unwrap();
        let link = dir.join("base").join("1");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        let rel = RelFileId::new(1, 16384);
        fill(&s, rel, 6);
        fill(&s, RelFileId::new(0, 16385), 1);
        assert_eq!(
            std::fs::metadata(created.join("16384")).unwrap().len(),
            4 * BLOCK as u64
        );
        assert_eq!(
            std::fs::metadata(created.join("16384.1")).unwrap().len(),
            2 * BLOCK as u64
        );
        assert!(dir.join("base").join("0").join("16385").is_file());
        let want = vec![(1, created.clone()), (2, existing.clone())];
        assert_eq!(s.tablespaces().unwrap(), want);
        drop(s);
        let s = open(vfs, &dir, false);
        assert_eq!(s.tablespaces().unwrap(), want);
        assert_eq!(s.nblocks(rel, ForkNumber::Main).unwrap(), 6);
    }

    /// Each refusal names the tablespace and the path, and creates nothing.
    #[test]
    fn refusals_name_the_tablespace_and_the_path() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("db");
        let s = open(Arc::new(RealVfs::new()), &dir, true);
        let loc = root.path().join("ts");
        s.create_tablespace(1, &loc).unwrap();
        // A plain directory made for relations of tablespace 5.
        fill(&s, RelFileId::new(5, 16384), 1);
        let full = root.path().join("full");
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("PG_VERSION"), "16\n").unwrap();
        let file = root.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let inside = dir.join("ts");
        let text = |e: SmgrError| e.to_string();
        let cases: Vec<(u32, &Path, &str)> = vec![
            (0, &loc, "default tablespace"),
            (1, &loc, "already exists (a link to"),
            (5, &loc, "as a directory inside the data directory"),
            (3, Path::new("relative/ts"), "absolute"),
            (3, &full, "must be empty, but holds 1 entry (PG_VERSION)"),
            (3, &inside, "inside the data directory"),
            (3, &loc, "the location is already tablespace 1's"),
        ];
        for (id, location, problem) in cases {
            let e = text(s.create_tablespace(id, location).unwrap_err());
            assert!(
                e.starts_with(&format!("tablespace {id}: ")) && e.contains(problem),
                "{e}"
            );
            assert!(
                e.contains(&location.display().to_string())
                    || e.contains(&dir.join("base").join(id.to_string()).display().to_string()),
                "{e}"
            );
        }
        let e = s.create_tablespace(3, &file).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOTDIR), "{e}");
        assert!(e.to_string().contains(&file.display().to_string()), "{e}");
        assert_eq!(s.tablespaces().unwrap(), vec![(1, loc)]);
        assert!(!dir.join("base").join("3").exists());
    }

    /// A failed symlink leaves no tablespace and names it, the link and the OS error; a
    /// failed fsync of `<dir>/base` after it is reported the same way and latched, so
    /// the next checkpoint's `sync` fails too. How: `FaultVfs` over `MemVfs` (whose links
    /// are aliases), failing the first symlink, then the first fsync of `/db/base`.
    #[test]
    fn faults_name_the_tablespace_and_a_failed_fsync_is_latched() {
        let fault = FaultVfs::new(Arc::new(MemVfs::new()));
        let s = open(Arc::new(fault.clone()), Path::new("/db"), true);
        fault.create_dir_all(Path::new("/dev1")).unwrap();
        fault.add_rule(FaultRule::nth(
            "/db/base/1",
            FaultOp::Symlink,
            1,
            FaultKind::Eio,
        ));
        let e = s.create_tablespace(1, Path::new("/dev1")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        let m = e.to_string();
        assert!(
            m.starts_with("tablespace 1: creating the link /db/base/1: "),
            "{m}"
        );
        assert_eq!(s.tablespaces().unwrap(), []);
        fault.add_rule(FaultRule::nth(
            "/db/base",
            FaultOp::SyncDir,
            1,
            FaultKind::Eio,
        ));
        let e = s.create_tablespace(1, Path::new("/dev1")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        assert!(
            e.to_string()
                .starts_with("tablespace 1: fsync of /db/base: "),
            "{e}"
        );
        let again = s.sync().unwrap_err();
        assert!(matches!(again, SmgrError::FsyncLatched { .. }), "{again}");
    }

    /// A tablespace, and a relation in it, survive a power cut once `create_tablespace`
    /// and the relation's `sync` have returned. How: `SimVfs` keeps or undoes every
    /// namespace change not covered by a directory fsync; many seeds.
    #[test]
    fn a_created_tablespace_survives_a_power_cut() {
        let rel = RelFileId::new(1, 16384);
        for seed in 0..32 {
            let vfs = SimVfs::new();
            {
                let s = open(Arc::new(vfs.clone()), Path::new("/db"), true);
                s.create_tablespace(1, Path::new("/dev1/ts")).unwrap();
                fill(&s, rel, 5);
            }
            vfs.crash(seed);
            let s = open(Arc::new(vfs.clone()), Path::new("/db"), false);
            assert_eq!(
                s.tablespaces().unwrap(),
                vec![(1, PathBuf::from("/dev1/ts"))],
                "seed {seed}"
            );
            assert_eq!(s.nblocks(rel, ForkNumber::Main).unwrap(), 5, "seed {seed}");
            assert_eq!(
                vfs.contents(Path::new("/dev1/ts/16384.1")).unwrap().len(),
                BLOCK,
                "seed {seed}"
            );
        }
    }
}
