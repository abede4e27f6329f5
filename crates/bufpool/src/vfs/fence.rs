//! The panic fence: wraps the file system an embedder gives the engine so that a panic
//! inside any of its calls (a bug in the embedder's `Vfs`, or [`super::FaultKind::Panic`])
//! becomes an `io::Error` of that call, and reaches the engine as a failed I/O like any
//! other: the buffer's I/O ends with an error, its waiters wake and see it, a failed log
//! write latches the log. Without the fence the panic unwound through the pool between an
//! I/O's claim and its end, leaving the buffer IO_IN_PROGRESS (and, on the checkpoint's
//! write runs, content locks held) for good: every later reader of the page hung.
//!
//! Owns: nothing but the wrapped file system. Invariants: a call that does not panic is
//! passed through unchanged (same result, same errno); `raw_fd` is forwarded, so reads and
//! writes the kernel does (io_uring) still bypass it, and those cannot panic. Locks: none.
//! [`fenced`] wraps only once: the storage manager and the engine both ask for it.

use std::io::{self, IoSlice, IoSliceMut};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{OpenOptions, Vfs, VfsFile};

/// `vfs` behind the fence (itself if it is one already).
pub fn fenced(vfs: Arc<dyn Vfs>) -> Arc<dyn Vfs> {
    if vfs.is_fenced() {
        vfs
    } else {
        Arc::new(FencedVfs { inner: vfs })
    }
}

/// A panic's message, if it carried one.
pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// Runs one file-system call, a panic in it becoming its error.
fn call<T>(what: &str, path: &Path, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        Err(io::Error::other(format!(
            "the file system panicked in {what} of {}: {}",
            path.display(),
            panic_text(&*p)
        )))
    })
}

#[derive(Debug)]
struct FencedVfs {
    inner: Arc<dyn Vfs>,
}

impl Vfs for FencedVfs {
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn VfsFile>> {
        let inner = call("open", path, || self.inner.open(path, opts))?;
        Ok(Arc::new(FencedFile { inner }))
    }

    fn unlink(&self, path: &Path) -> io::Result<()> {
        call("unlink", path, || self.inner.unlink(path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        call("rename", from, || self.inner.rename(from, to))
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        call("fsync", path, || self.inner.sync_dir(path))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        call("mkdir", path, || self.inner.create_dir_all(path))
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        call("stat", path, || self.inner.exists(path))
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        call("readdir", path, || self.inner.list_dir(path))
    }

    fn symlink(&self, target: &Path, link: &Path) -> io::Result<()> {
        call("symlink", link, || self.inner.symlink(target, link))
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        call("readlink", path, || self.inner.read_link(path))
    }

    fn device_id(&self, path: &Path) -> io::Result<Option<u64>> {
        call("stat", path, || self.inner.device_id(path))
    }

    fn mode(&self, path: &Path) -> io::Result<Option<u32>> {
        call("stat", path, || self.inner.mode(path))
    }

    fn file_kind(&self, path: &Path) -> io::Result<super::FileKind> {
        call("lstat", path, || self.inner.file_kind(path))
    }

    fn is_fenced(&self) -> bool {
        true
    }
}

#[derive(Debug)]
struct FencedFile {
    inner: Arc<dyn VfsFile>,
}

impl FencedFile {
    fn call<T>(&self, what: &str, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        call(what, self.inner.path(), f)
    }
}

impl VfsFile for FencedFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.call("read", || self.inner.read_at(buf, offset))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.call("write", || self.inner.write_at(buf, offset))
    }

    fn read_vectored_at(&self, bufs: &mut [IoSliceMut<'_>], offset: u64) -> io::Result<usize> {
        self.call("read", || self.inner.read_vectored_at(bufs, offset))
    }

    fn write_vectored_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
        self.call("write", || self.inner.write_vectored_at(bufs, offset))
    }

    fn writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        self.call("writeback", || self.inner.writeback(offset, len))
    }

    fn sync_all(&self) -> io::Result<()> {
        self.call("fsync", || self.inner.sync_all())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.call("fdatasync", || self.inner.sync_data())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.call("ftruncate", || self.inner.set_len(len))
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.call("fallocate", || self.inner.allocate(offset, len))
    }

    fn len(&self) -> io::Result<u64> {
        self.call("stat", || self.inner.len())
    }

    fn try_lock_exclusive(&self) -> io::Result<bool> {
        self.call("flock", || self.inner.try_lock_exclusive())
    }

    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        self.inner.raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs, MemVfs};

    /// A panic in any call becomes that call's error, naming the call and the file; calls
    /// that do not panic pass through; fencing twice wraps once.
    #[test]
    fn a_panicking_call_becomes_its_error() {
        let fault = FaultVfs::new(Arc::new(MemVfs::new()));
        let vfs = fenced(Arc::new(fault.clone()));
        assert!(fenced(vfs.clone()).is_fenced());
        vfs.create_dir_all(Path::new("/d")).unwrap();
        let f = vfs.open(Path::new("/d/f"), OpenOptions::create()).unwrap();
        for op in [
            FaultOp::Write,
            FaultOp::Fsync,
            FaultOp::Read,
            FaultOp::Allocate,
        ] {
            fault.add_rule(FaultRule::nth("/d/f", op, 1, FaultKind::Panic));
        }
        let err = f.write_at(b"x", 0).unwrap_err();
        assert!(
            err.to_string().contains("panicked in write of /d/f"),
            "{err}"
        );
        assert!(f.sync_data().is_err());
        assert!(f.read_at(&mut [0; 1], 0).is_err());
        assert!(f.allocate(0, 4096).is_err());
        // The rules fired once each: the next calls pass.
        f.write_at(b"y", 0).unwrap();
        f.sync_data().unwrap();
        let mut b = [0u8; 1];
        assert_eq!(f.read_at(&mut b, 0).unwrap(), 1);
        assert_eq!(&b, b"y");
    }
}
