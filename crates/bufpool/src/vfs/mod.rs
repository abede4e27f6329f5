//! The I/O layer: the only door from the library to the operating system's files.
//!
//! Owns: the [`Vfs`] and [`VfsFile`] traits and their implementations: [`RealVfs`] (Linux
//! system calls), [`MemVfs`] (in memory, for model tests), [`FaultVfs`] (wraps another and
//! fails chosen calls with EIO, ENOSPC or a short transfer) and [`SimVfs`] (power loss).
//! Invariants: every file operation of the library goes through these traits, so faults can
//! be injected anywhere and counted in one place. [`SimVfs`] keeps written and durable bytes
//! apart and simulates a power cut (dropped, kept, torn or garbage writes; undone renames). Errors are the OS's `io::Error` (errno
//! kept); the storage manager adds path and block. Symbolic links (the storage manager's
//! tablespaces) are made through the trait too; the in-memory implementations resolve
//! every path through theirs, so a test sees the same aliasing as a real file system.
//! Reads run ahead of use go through [`aio`] (`sync`, a pool of I/O worker threads, or
//! io_uring behind the `io-uring` cargo feature): still through these traits' files.
//! Locks: implementations may lock internally; no lock is held across calls.

pub mod aio;
mod aligned;
mod error;
mod fault;
mod fence;
mod hook;
mod mem;
mod real;
mod sim;
pub mod uring_writer;

pub use aligned::{AlignedBuf, IO_ALIGN};
pub use error::{os_error_in, IoAt, IoError};
pub use fault::{FaultKind, FaultOp, FaultRule, FaultVfs};
pub use fence::fenced;
pub(crate) use fence::panic_text;
pub use hook::{Call, CallHook, HookVfs, Verdict, VerdictHook};
pub use mem::MemVfs;
pub use real::{RealVfs, DIR_MODE, FILE_MODE};
pub use sim::{CrashChoice, CrashReport, SimVfs, SyncPoint};

use std::fmt;
use std::io::{self, IoSlice, IoSliceMut};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// How to open a file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Open for writing as well as reading.
    pub write: bool,
    /// Create the file if it does not exist.
    pub create: bool,
    /// Fail if the file exists (implies create).
    pub create_new: bool,
    /// Bypass the OS page cache (O_DIRECT): buffers and offsets must be aligned.
    pub direct: bool,
    /// Every write is durable on return (O_DSYNC).
    pub dsync: bool,
}

impl OpenOptions {
    /// Open an existing file for reading only.
    pub fn read_only() -> Self {
        Self::default()
    }
    /// Open an existing file for reading and writing.
    pub fn read_write() -> Self {
        Self {
            write: true,
            ..Self::default()
        }
    }
    /// Open for reading and writing, creating the file if it does not exist.
    pub fn create() -> Self {
        Self {
            write: true,
            create: true,
            ..Self::default()
        }
    }
    /// Create the file and open it for reading and writing; fail if it exists.
    pub fn create_new() -> Self {
        Self {
            write: true,
            create: true,
            create_new: true,
            ..Self::default()
        }
    }
}

/// File-system level operations.
pub trait Vfs: Send + Sync + fmt::Debug {
    /// Opens the file at `path` as `opts` says.
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn VfsFile>>;
    /// Removes the file (or the symbolic link) at `path` (unlink(2)).
    fn unlink(&self, path: &Path) -> io::Result<()>;
    /// Renames the file `from` to `to`, replacing `to` if it exists (rename(2)).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// fsync of a directory, making creations, renames and unlinks in it durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Creates the directory `path` and any missing parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// Names of the entries of a directory, unsorted (symbolic links included).
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Whether this is the panic fence ([`fenced`]), which turns a panic in any call of the
    /// file system it wraps into that call's error.
    fn is_fenced(&self) -> bool {
        false
    }
    /// Creates a symbolic link named `link` that points at `target` (symlink(2)); fails
    /// with `AlreadyExists` if `link` exists. Like a file's creation, the new name is
    /// durable only once `link`'s directory is fsynced. Every other operation follows
    /// links in the paths it is given (a `sync_dir` of the link fsyncs the target).
    fn symlink(&self, target: &Path, link: &Path) -> io::Result<()>;
    /// The target of the symbolic link `path` (readlink(2)), as it was created; an error
    /// of kind `InvalidInput` (EINVAL) when `path` exists but is not a symbolic link.
    fn read_link(&self, path: &Path) -> io::Result<PathBuf>;
    /// The device that holds `path` (following links; st_dev on a real file system), or
    /// None where the file system cannot tell (in memory, simulated): two paths with the
    /// same `Some` share a device's bandwidth and its fsyncs.
    fn device_id(&self, path: &Path) -> io::Result<Option<u64>>;
    /// The permission bits of `path` (st_mode & 0o7777, following links), or None where
    /// the file system has none (in memory, simulated).
    fn mode(&self, _path: &Path) -> io::Result<Option<u32>> {
        Ok(None)
    }
    /// What `path` itself is, without following a link it ends in (lstat(2)). The
    /// default, for file systems that hold only files, directories and links, asks
    /// `read_link` and `list_dir`; the real file system also tells FIFOs, sockets and
    /// devices apart ([`FileKind::Other`]), which must never be opened as data.
    fn file_kind(&self, path: &Path) -> io::Result<FileKind> {
        match self.read_link(path) {
            Ok(_) => return Ok(FileKind::Symlink),
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
            Err(e) => return Err(e),
        }
        Ok(if self.list_dir(path).is_ok() {
            FileKind::Directory
        } else {
            FileKind::File
        })
    }
}

/// What a path is ([`Vfs::file_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A FIFO, a socket, a device: nothing the engine writes, never opened.
    Other,
}

/// Operations on one open file. Offsets are absolute (pread/pwrite style), so one handle is
/// shared by all threads without a seek position.
pub trait VfsFile: Send + Sync + fmt::Debug {
    /// The path the file was opened with.
    fn path(&self) -> &Path;
    /// One pread; may return fewer bytes than asked at end of file.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// One pwrite; a short count is returned as is.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// One preadv into consecutive buffers.
    fn read_vectored_at(&self, bufs: &mut [IoSliceMut<'_>], offset: u64) -> io::Result<usize>;
    /// One pwritev from consecutive buffers.
    fn write_vectored_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize>;
    /// Asks the OS to start writing back a range (sync_file_range with WRITE); a hint, not
    /// a durability guarantee.
    fn writeback(&self, offset: u64, len: u64) -> io::Result<()>;
    /// fsync.
    fn sync_all(&self) -> io::Result<()>;
    /// fdatasync.
    fn sync_data(&self) -> io::Result<()>;
    /// ftruncate (shrink or extend with zeros).
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Reserves disk space for `offset..offset + len`, growing the file to cover it
    /// (posix_fallocate): the range reads as zeros where nothing was written, a full disk
    /// is reported now (ENOSPC) rather than by a later write, and no data is written, so a
    /// power cut can keep the new length (zeros) or lose it, never leave garbage there.
    /// The default grows the file with [`VfsFile::set_len`] (no space reserved).
    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        let end = offset.saturating_add(len);
        if self.len()? < end {
            self.set_len(end)?;
        }
        Ok(())
    }
    /// The file's length, in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the file's length is 0.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Takes an advisory exclusive lock for the life of this handle without waiting;
    /// `Ok(false)` when another handle holds it.
    fn try_lock_exclusive(&self) -> io::Result<bool>;
    /// The OS file descriptor, for an asynchronous read submitted to the kernel
    /// (`aio.rs`, io_uring). `None` (the default: in-memory, fault-injecting and simulated
    /// files) makes such a read go through [`VfsFile::read_vectored_at`] instead, so that
    /// every fault these implementations inject is still seen.
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
}

/// Most symbolic links one path resolution follows before failing with ELOOP (Linux's
/// `MAXSYMLINKS`), for the in-memory file systems; a cycle of links must not hang them.
const SYMLINK_HOPS_MAX: usize = 40;

/// Resolves the symbolic links in `path` for an in-memory file system whose link targets
/// `link_of` returns (`None`: not a link): every component is followed, the last one only
/// with `follow_last` (`unlink`, `rename`, `symlink` and `read_link` act on the link
/// itself). A relative target is taken from the link's directory, as the kernel does;
/// `.` and `..` are applied as they come.
pub(crate) fn resolve_links(
    path: &Path,
    follow_last: bool,
    link_of: impl Fn(&Path) -> Option<PathBuf>,
) -> io::Result<PathBuf> {
    let mut path = path.to_path_buf();
    for _ in 0..=SYMLINK_HOPS_MAX {
        let components: Vec<_> = path.components().collect();
        let mut resolved = PathBuf::new();
        let mut restart = None;
        for (i, c) in components.iter().enumerate() {
            match c {
                // `resolved` holds no link (each prefix was followed), so `..` is its
                // parent, as the kernel finds it.
                Component::ParentDir => {
                    resolved.pop();
                    continue;
                }
                Component::CurDir => continue,
                _ => resolved.push(c),
            }
            if i + 1 == components.len() && !follow_last {
                break;
            }
            if let Some(target) = link_of(&resolved) {
                let dir = resolved.parent().unwrap_or(Path::new("/"));
                let rest: PathBuf = components[i + 1..].iter().collect();
                restart = Some(dir.join(target).join(rest));
                break;
            }
        }
        match restart {
            None => return Ok(resolved),
            Some(next) => path = next,
        }
    }
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

/// `path` (absolute) with every symbolic link in it followed through `vfs` and `.` and
/// `..` applied as the kernel applies them: where it really leads, so that whether one
/// location lies inside another is decided on the real directories, not on spelling
/// (`/other/../db/x`, or `/link/x` with `/link` → `/db`, are inside `/db`). The part that
/// does not exist yet is taken as written (it holds no link). A cycle of links is `ELOOP`.
pub fn resolve_path(vfs: &dyn Vfs, path: &Path) -> io::Result<PathBuf> {
    resolve_links(path, true, |p| vfs.read_link(p).ok())
}

/// Replaces the file at `path` with `bytes` so that after a crash it holds the old or the
/// new contents, never a mix: writes `<name>.tmp` beside it, fsyncs it, renames it over
/// `path`, fsyncs the directory. (The temporary name keeps the whole file name, so two
/// files of one directory never share a temporary file.)
pub fn write_atomic(vfs: &dyn Vfs, path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let err = IoError::with;
    let f = vfs
        .open(&tmp, OpenOptions::create())
        .map_err(err("creating", &tmp))?;
    f.set_len(0).map_err(err("truncating", &tmp))?;
    let n = f.write_at(bytes, 0).map_err(err("writing", &tmp))?;
    if n != bytes.len() {
        return Err(IoError::short("writing", &tmp, IoAt::File, n, bytes.len()));
    }
    f.sync_all().map_err(err("fsync of", &tmp))?;
    drop(f);
    vfs.rename(&tmp, path).map_err(err("renaming", &tmp))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    vfs.sync_dir(dir)
        .map_err(err("fsync of directory of", path))?;
    Ok(())
}

/// Creates `dir` and its missing parents so that their names survive a power cut: after
/// creating them, fsyncs the parent of each directory created, top down. Returns how many
/// directories it created (0: `dir` existed).
pub fn create_dir_durably(vfs: &dyn Vfs, dir: &Path) -> Result<usize, IoError> {
    let err = IoError::with;
    let mut missing = Vec::new();
    for d in dir.ancestors() {
        if d.as_os_str().is_empty() || vfs.exists(d).map_err(err("checking", d))? {
            break;
        }
        missing.push(d);
    }
    if missing.is_empty() {
        return Ok(0);
    }
    vfs.create_dir_all(dir).map_err(err("creating", dir))?;
    for d in missing.iter().rev() {
        let parent = match d.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        vfs.sync_dir(parent).map_err(err("fsync of", parent))?;
    }
    Ok(missing.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_atomic_replaces_whole_files_through_their_own_temporaries() {
        let vfs = MemVfs::new();
        let dir = Path::new("/d");
        vfs.create_dir_all(dir).unwrap();
        // Two files whose names differ only after the first dot (bufpool.control and
        // bufpool.catalog once shared "bufpool.tmp").
        write_atomic(&vfs, &dir.join("a.one"), b"first").unwrap();
        write_atomic(&vfs, &dir.join("a.two"), b"second").unwrap();
        write_atomic(&vfs, &dir.join("a.one"), b"1").unwrap();
        let read = |name: &str| {
            let f = vfs.open(&dir.join(name), OpenOptions::read_only()).unwrap();
            let mut b = vec![0u8; f.len().unwrap() as usize];
            f.read_at(&mut b, 0).unwrap();
            b
        };
        assert_eq!(
            read("a.one"),
            b"1",
            "shorter contents replace longer ones whole"
        );
        assert_eq!(read("a.two"), b"second");
        assert!(!vfs.exists(&dir.join("a.one.tmp")).unwrap());
        // An error names the step and the file.
        let e = write_atomic(&vfs, Path::new("/missing/x"), b"z").unwrap_err();
        assert_eq!(e.op, "creating");
        assert_eq!(e.path, Path::new("/missing/x.tmp"));
    }
}
