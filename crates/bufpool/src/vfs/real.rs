//! The real I/O layer: Linux system calls on real files.
//!
//! Owns: file descriptors (through `std::fs::File`). Invariants: every call is one system
//! call (no hidden retry loops), so a short transfer reaches the caller as a short count.
//! EINTR is retried, as PostgreSQL's fd.c does. Locks: none.

use std::fs::{self, File};
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{OpenOptions, Vfs, VfsFile};

/// Mode of every file the engine creates: the owner's only (PostgreSQL's
/// `pg_file_create_mode`, 0600): a database is readable by nobody else on the machine.
pub const FILE_MODE: u32 = 0o600;
/// Mode of every directory the engine creates (data directory, tablespace and log
/// locations, their missing parents): 0700, PostgreSQL's `pg_dir_create_mode`.
pub const DIR_MODE: u32 = 0o700;

/// Files on the machine's real file systems.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealVfs;

impl RealVfs {
    /// The real file systems.
    pub fn new() -> Self {
        Self
    }
}

#[derive(Debug)]
struct RealFile {
    file: File,
    path: PathBuf,
}

fn retry_eintr<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Buffers one `preadv`/`pwritev` may take: Linux's `UIO_MAXIOV`, and the same 1,024
/// elsewhere (macOS's and the BSDs' `IOV_MAX`).
#[cfg(target_os = "linux")]
const IOV_MAX: usize = libc::UIO_MAXIOV as usize;
#[cfg(not(target_os = "linux"))]
const IOV_MAX: usize = 1024;

/// `open`'s flag for `io_direct`: Linux's `O_DIRECT`; elsewhere the open is refused
/// (`Unsupported`, naming the knob) rather than silently cached.
fn o_direct() -> io::Result<libc::c_int> {
    #[cfg(target_os = "linux")]
    {
        Ok(libc::O_DIRECT)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "io_direct = on needs Linux's O_DIRECT",
        ))
    }
}

impl Vfs for RealVfs {
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn VfsFile>> {
        let mut o = fs::OpenOptions::new();
        o.read(true)
            .write(opts.write)
            .create(opts.create)
            .create_new(opts.create_new);
        let mut flags = libc::O_CLOEXEC;
        if opts.direct {
            flags |= o_direct()?;
        }
        if opts.dsync {
            flags |= libc::O_DSYNC;
        }
        o.custom_flags(flags);
        // A file the engine creates is its owner's only (PostgreSQL's default
        // pg_file_create_mode); the umask may take more away, never give more.
        o.mode(FILE_MODE);
        let file = retry_eintr(|| o.open(path))?;
        Ok(Arc::new(RealFile {
            file,
            path: path.to_path_buf(),
        }))
    }

    fn unlink(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let dir = File::open(path)?;
        retry_eintr(|| dir.sync_all())
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        use std::os::unix::fs::DirBuilderExt as _;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(path)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        path.try_exists()
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn symlink(&self, target: &Path, link: &Path) -> io::Result<()> {
        std::os::unix::fs::symlink(target, link)
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        fs::read_link(path)
    }

    fn device_id(&self, path: &Path) -> io::Result<Option<u64>> {
        use std::os::unix::fs::MetadataExt as _;
        Ok(Some(fs::metadata(path)?.dev()))
    }

    fn mode(&self, path: &Path) -> io::Result<Option<u32>> {
        use std::os::unix::fs::PermissionsExt as _;
        Ok(Some(fs::metadata(path)?.permissions().mode() & 0o7777))
    }

    fn file_kind(&self, path: &Path) -> io::Result<super::FileKind> {
        let t = fs::symlink_metadata(path)?.file_type();
        Ok(if t.is_symlink() {
            super::FileKind::Symlink
        } else if t.is_dir() {
            super::FileKind::Directory
        } else if t.is_file() {
            super::FileKind::File
        } else {
            super::FileKind::Other
        })
    }
}

impl VfsFile for RealFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        retry_eintr(|| self.file.read_at(buf, offset))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        retry_eintr(|| self.file.write_at(buf, offset))
    }

    fn read_vectored_at(&self, bufs: &mut [IoSliceMut<'_>], offset: u64) -> io::Result<usize> {
        let iovcnt = bufs.len().min(IOV_MAX) as libc::c_int;
        retry_eintr(|| {
            // SAFETY: `IoSliceMut` is guaranteed ABI-compatible with `struct iovec` on Unix;
            // the pointer and count describe `iovcnt` live, writable buffers borrowed
            // mutably for the duration of the call; the fd is open for the life of `self`.
            let n = unsafe {
                libc::preadv(
                    self.file.as_raw_fd(),
                    bufs.as_mut_ptr().cast::<libc::iovec>(),
                    iovcnt,
                    offset as libc::off_t,
                )
            };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        })
    }

    fn write_vectored_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
        let iovcnt = bufs.len().min(IOV_MAX) as libc::c_int;
        retry_eintr(|| {
            // SAFETY: `IoSlice` is ABI-compatible with `struct iovec` on Unix; the buffers
            // are live and borrowed for the call; the kernel only reads them.
            let n = unsafe {
                libc::pwritev(
                    self.file.as_raw_fd(),
                    bufs.as_ptr().cast::<libc::iovec>(),
                    iovcnt,
                    offset as libc::off_t,
                )
            };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        })
    }

    /// Linux's `sync_file_range(SYNC_FILE_RANGE_WRITE)`: start writing the range back
    /// now, wait for nothing. A hint only; elsewhere nothing (the fsync that follows does
    /// the work, as PostgreSQL's `pg_flush_data` falls back to doing).
    #[cfg(not(target_os = "linux"))]
    fn writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }

    #[cfg(target_os = "linux")]
    fn writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        retry_eintr(|| {
            // SAFETY: plain system call on an fd owned by `self`; no memory is passed.
            let rc = unsafe {
                libc::sync_file_range(
                    self.file.as_raw_fd(),
                    offset as libc::off64_t,
                    len as libc::off64_t,
                    libc::SYNC_FILE_RANGE_WRITE,
                )
            };
            if rc < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        })
    }

    fn sync_all(&self) -> io::Result<()> {
        retry_eintr(|| self.file.sync_all())
    }

    fn sync_data(&self) -> io::Result<()> {
        retry_eintr(|| self.file.sync_data())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        retry_eintr(|| self.file.set_len(len))
    }

    /// Elsewhere than Linux: the file is extended to cover the range (`set_len`, blocks
    /// not reserved; macOS has no `posix_fallocate`).
    #[cfg(not(target_os = "linux"))]
    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        let end = offset.saturating_add(len);
        if self.file.metadata()?.len() < end {
            retry_eintr(|| self.file.set_len(end))?;
        }
        Ok(())
    }

    #[cfg(target_os = "linux")]
    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        retry_eintr(|| {
            // SAFETY: plain system call on an fd owned by `self`; no memory is passed.
            let rc = unsafe {
                libc::posix_fallocate(
                    self.file.as_raw_fd(),
                    offset as libc::off_t,
                    len as libc::off_t,
                )
            };
            // posix_fallocate returns the error number instead of setting errno.
            if rc == 0 {
                Ok(())
            } else {
                Err(io::Error::from_raw_os_error(rc))
            }
        })
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.file.as_raw_fd())
    }

    fn try_lock_exclusive(&self) -> io::Result<bool> {
        // SAFETY: plain system call on an fd owned by `self`.
        let rc = unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            Ok(false)
        } else {
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `allocate` grows a file to cover the range with zeros (blocks reserved on disk),
    /// never shrinks it, and keeps what was written.
    #[test]
    fn allocate_grows_with_zeros_and_never_shrinks() {
        let dir = tempfile::tempdir().unwrap();
        let f = RealVfs::new()
            .open(&dir.path().join("f"), OpenOptions::create())
            .unwrap();
        f.write_at(&[7u8; 100], 0).unwrap();
        f.allocate(4096, 8192).unwrap();
        assert_eq!(f.len().unwrap(), 12288);
        let mut buf = vec![1u8; 12288];
        assert_eq!(f.read_at(&mut buf, 0).unwrap(), 12288);
        assert!(buf[..100].iter().all(|&b| b == 7));
        assert!(buf[100..].iter().all(|&b| b == 0));
        f.allocate(0, 4096).unwrap();
        assert_eq!(
            f.len().unwrap(),
            12288,
            "allocation inside the file keeps its length"
        );
        let meta = std::fs::metadata(dir.path().join("f")).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert!(
            meta.blocks() * 512 >= 12288,
            "the range is allocated, not a hole"
        );
    }

    #[test]
    fn vectored_io_and_writeback_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let vfs = RealVfs::new();
        let f = vfs
            .open(&dir.path().join("f"), OpenOptions::create())
            .unwrap();
        let a = [1u8; 4096];
        let b = [2u8; 4096];
        assert_eq!(
            f.write_vectored_at(&[IoSlice::new(&a), IoSlice::new(&b)], 4096)
                .unwrap(),
            8192
        );
        f.writeback(0, 0).unwrap();
        f.sync_data().unwrap();
        assert_eq!(f.len().unwrap(), 12288);
        let (mut x, mut y) = ([0u8; 4096], [0u8; 4096]);
        let n = f
            .read_vectored_at(
                &mut [IoSliceMut::new(&mut x), IoSliceMut::new(&mut y)],
                4096,
            )
            .unwrap();
        assert_eq!(n, 8192);
        assert!(x.iter().all(|&v| v == 1) && y.iter().all(|&v| v == 2));
        // Reading past the end is a short count, not an error.
        assert_eq!(f.read_at(&mut x, 8192).unwrap(), 4096);
        assert_eq!(f.read_at(&mut x, 12288).unwrap(), 0);
    }

    /// A link made through the trait is a real symbolic link: files created through it
    /// land in the target, `read_link` gives the target back, and a plain directory is
    /// told apart (EINVAL).
    #[test]
    fn symlinks_lead_to_their_target() {
        let dir = tempfile::tempdir().unwrap();
        let vfs = RealVfs::new();
        let target = dir.path().join("target");
        let link = dir.path().join("link");
        vfs.create_dir_all(&target).unwrap();
        vfs.symlink(&target, &link).unwrap();
        let e = vfs.symlink(&target, &link).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        vfs.open(&link.join("f"), OpenOptions::create()).unwrap();
        vfs.sync_dir(&link).unwrap();
        assert!(target.join("f").exists());
        assert_eq!(vfs.list_dir(&link).unwrap(), vec!["f".to_string()]);
        assert_eq!(vfs.read_link(&link).unwrap(), target);
        let e = vfs.read_link(&target).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        let mut names = vfs.list_dir(dir.path()).unwrap();
        names.sort();
        assert_eq!(names, ["link", "target"]);
    }

    #[test]
    fn flock_excludes_a_second_handle() {
        let dir = tempfile::tempdir().unwrap();
        let vfs = RealVfs::new();
        let p = dir.path().join("lock");
        let a = vfs.open(&p, OpenOptions::create()).unwrap();
        let b = vfs.open(&p, OpenOptions::create()).unwrap();
        assert!(a.try_lock_exclusive().unwrap());
        assert!(!b.try_lock_exclusive().unwrap());
        drop(a);
        assert!(b.try_lock_exclusive().unwrap());
    }

    #[test]
    fn direct_io_reads_aligned_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let vfs = RealVfs::new();
        let p = dir.path().join("d");
        let opts = OpenOptions {
            direct: true,
            ..OpenOptions::create()
        };
        let f = match vfs.open(&p, opts) {
            Ok(f) => f,
            // tmpfs refuses O_DIRECT with EINVAL; that refusal is itself the tested behaviour.
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
                return;
            }
        };
        let mut buf = crate::vfs::AlignedBuf::zeroed(8192);
        buf.as_mut_slice()[0] = 42;
        assert_eq!(f.write_at(buf.as_slice(), 0).unwrap(), 8192);
        let mut back = crate::vfs::AlignedBuf::zeroed(8192);
        assert_eq!(f.read_at(back.as_mut_slice(), 0).unwrap(), 8192);
        assert_eq!(back.as_slice()[0], 42);
    }
}
