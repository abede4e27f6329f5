//! A file system for tests that calls a hook before every call of the one it wraps
//! ([`HookVfs`]): to hold a call at a gate, check what is written, count, fail a call or
//! cut a transfer short, without writing a delegating `Vfs` each time. `FaultVfs`
//! (`fault.rs`) is one such hook.
//!
//! Owns: the wrapped file system and the hook. Invariants: the hook sees every call that
//! changes or reads data or names (not `exists`, `list_dir`, `create_dir_all`,
//! `read_link`, `len`, locks), with the operation (as [`FaultOp`] names them), the path,
//! and for reads and writes the offset and length (writes: the bytes); a call the hook
//! lets through is passed on unchanged; one it fails never reaches the wrapped file
//! system; a read or write it cuts short moves the first half of its bytes (rounded down
//! to 512) and reports that count.
//! Locks: none of its own; the hook may block (a gate), holding nothing of the engine's
//! but what the caller holds across that file call.

use std::io::{self, IoSlice, IoSliceMut};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{FaultOp, OpenOptions, Vfs, VfsFile};

/// One call, as the hook sees it before it runs.
#[derive(Debug)]
pub struct Call<'a> {
    /// The operation.
    pub op: FaultOp,
    /// The file's path (a rename: the old name; a symlink: the link).
    pub path: &'a Path,
    /// Reads and writes (and writeback, allocate: the range; set_len: the length in `len`).
    pub offset: u64,
    /// The bytes read or written, the range's length, or set_len's new length.
    pub len: u64,
    /// A write's bytes, buffer by buffer (empty for every other call).
    pub data: Vec<&'a [u8]>,
}

impl<'a> Call<'a> {
    fn on(op: FaultOp, path: &'a Path) -> Self {
        Call {
            op,
            path,
            offset: 0,
            len: 0,
            data: Vec::new(),
        }
    }
}

/// What a [`HookVfs`] calls: `Some(error)` fails the call with it, `None` lets it through.
pub type CallHook = Arc<dyn Fn(&Call<'_>) -> Option<io::Error> + Send + Sync>;

/// What a hook decides for a call ([`HookVfs::with_verdicts`]).
#[derive(Debug)]
pub enum Verdict {
    /// The call runs.
    Pass,
    /// The call fails with this error, without reaching the wrapped file system.
    Fail(io::Error),
    /// A read or write moves the first half of its bytes (rounded down to 512; a vectored
    /// read: of its first buffer) and reports that count; any other call fails with EIO.
    Short,
}

/// A hook that decides between passing, failing and cutting short.
pub type VerdictHook = Arc<dyn Fn(&Call<'_>) -> Verdict + Send + Sync>;

/// Wraps a file system, calling a hook before each of its calls (see the module doc).
#[derive(Clone)]
pub struct HookVfs {
    inner: Arc<dyn Vfs>,
    hook: VerdictHook,
}

/// The length a short transfer of `len` bytes moves.
fn short_len(len: usize) -> usize {
    (len / 2) & !511
}

/// A verdict for a call that moves no data: pass or fail (a short one fails with EIO).
fn pass_or_fail(v: Verdict) -> io::Result<()> {
    match v {
        Verdict::Pass => Ok(()),
        Verdict::Fail(e) => Err(e),
        Verdict::Short => Err(io::Error::from_raw_os_error(libc::EIO)),
    }
}

impl std::fmt::Debug for HookVfs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookVfs")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl HookVfs {
    /// A hook that passes or fails each call.
    pub fn new(inner: Arc<dyn Vfs>, hook: CallHook) -> Self {
        Self::with_verdicts(
            inner,
            Arc::new(move |c| match hook(c) {
                Some(e) => Verdict::Fail(e),
                None => Verdict::Pass,
            }),
        )
    }

    /// A hook that may also cut reads and writes short.
    pub fn with_verdicts(inner: Arc<dyn Vfs>, hook: VerdictHook) -> Self {
        HookVfs { inner, hook }
    }

    fn check(&self, call: Call<'_>) -> io::Result<()> {
        pass_or_fail((self.hook)(&call))
    }
}

impl Vfs for HookVfs {
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn VfsFile>> {
        self.check(Call::on(FaultOp::Open, path))?;
        let inner = self.inner.open(path, opts)?;
        Ok(Arc::new(HookFile {
            inner,
            hook: self.hook.clone(),
        }))
    }

    fn unlink(&self, path: &Path) -> io::Result<()> {
        self.check(Call::on(FaultOp::Unlink, path))?;
        self.inner.unlink(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.check(Call::on(FaultOp::Rename, from))?;
        self.inner.rename(from, to)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.check(Call::on(FaultOp::SyncDir, path))?;
        self.inner.sync_dir(path)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        self.inner.exists(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.list_dir(path)
    }

    fn symlink(&self, target: &Path, link: &Path) -> io::Result<()> {
        self.check(Call::on(FaultOp::Symlink, link))?;
        self.inner.symlink(target, link)
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        self.inner.read_link(path)
    }

    fn device_id(&self, path: &Path) -> io::Result<Option<u64>> {
        self.inner.device_id(path)
    }

    fn mode(&self, path: &Path) -> io::Result<Option<u32>> {
        self.inner.mode(path)
    }

    fn file_kind(&self, path: &Path) -> io::Result<super::FileKind> {
        self.inner.file_kind(path)
    }
}

#[derive(Clone)]
struct HookFile {
    inner: Arc<dyn VfsFile>,
    hook: VerdictHook,
}

impl std::fmt::Debug for HookFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookFile")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl HookFile {
    fn verdict(&self, op: FaultOp, offset: u64, len: u64, data: Vec<&[u8]>) -> Verdict {
        (self.hook)(&Call {
            op,
            path: self.inner.path(),
            offset,
            len,
            data,
        })
    }

    fn check(&self, op: FaultOp, offset: u64, len: u64) -> io::Result<()> {
        pass_or_fail(self.verdict(op, offset, len, Vec::new()))
    }
}

impl VfsFile for HookFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        match self.verdict(FaultOp::Read, offset, buf.len() as u64, Vec::new()) {
            Verdict::Pass => self.inner.read_at(buf, offset),
            Verdict::Fail(e) => Err(e),
            Verdict::Short => {
                let n = short_len(buf.len());
                let got = self.inner.read_at(&mut buf[..n], offset)?;
                Ok(got.min(n))
            }
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        match self.verdict(FaultOp::Write, offset, buf.len() as u64, vec![buf]) {
            Verdict::Pass => self.inner.write_at(buf, offset),
            Verdict::Fail(e) => Err(e),
            Verdict::Short => self.inner.write_at(&buf[..short_len(buf.len())], offset),
        }
    }

    fn read_vectored_at(&self, bufs: &mut [IoSliceMut<'_>], offset: u64) -> io::Result<usize> {
        let len = bufs.iter().map(|b| b.len() as u64).sum();
        match self.verdict(FaultOp::Read, offset, len, Vec::new()) {
            Verdict::Pass => self.inner.read_vectored_at(bufs, offset),
            Verdict::Fail(e) => Err(e),
            Verdict::Short => {
                // Read only into the first buffer, and only half of it.
                let first = bufs.first_mut().map(|b| &mut b[..]).unwrap_or(&mut []);
                let n = short_len(first.len());
                self.inner.read_at(&mut first[..n], offset)
            }
        }
    }

    fn write_vectored_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
        let data: Vec<&[u8]> = bufs.iter().map(|b| &**b).collect();
        let len: u64 = data.iter().map(|b| b.len() as u64).sum();
        match self.verdict(FaultOp::Write, offset, len, data) {
            Verdict::Pass => self.inner.write_vectored_at(bufs, offset),
            Verdict::Fail(e) => Err(e),
            Verdict::Short => {
                let want = short_len(len as usize);
                let mut done = 0;
                for b in bufs {
                    if done >= want {
                        break;
                    }
                    let take = b.len().min(want - done);
                    done += self.inner.write_at(&b[..take], offset + done as u64)?;
                }
                Ok(done)
            }
        }
    }

    fn writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check(FaultOp::Writeback, offset, len)?;
        self.inner.writeback(offset, len)
    }

    fn sync_all(&self) -> io::Result<()> {
        self.check(FaultOp::Fsync, 0, 0)?;
        self.inner.sync_all()
    }

    fn sync_data(&self) -> io::Result<()> {
        self.check(FaultOp::Fsync, 0, 0)?;
        self.inner.sync_data()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.check(FaultOp::Truncate, 0, len)?;
        self.inner.set_len(len)
    }

    fn allocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.check(FaultOp::Allocate, offset, len)?;
        self.inner.allocate(offset, len)
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn try_lock_exclusive(&self) -> io::Result<bool> {
        self.inner.try_lock_exclusive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::MemVfs;
    use std::sync::Mutex;

    /// The hook sees each call with its operation, path, range and written bytes, and a
    /// call it fails never reaches the file system below.
    #[test]
    fn the_hook_sees_every_call_and_can_fail_it() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let hook: CallHook = Arc::new(move |c: &Call<'_>| {
            let bytes: usize = c.data.iter().map(|d| d.len()).sum();
            s.lock().unwrap().push((c.op, c.offset, c.len, bytes));
            (c.op == FaultOp::Fsync).then(|| io::Error::from_raw_os_error(libc::EIO))
        });
        let mem = MemVfs::new();
        let vfs = HookVfs::new(Arc::new(mem.clone()), hook);
        vfs.create_dir_all(Path::new("/d")).unwrap();
        let f = vfs.open(Path::new("/d/f"), OpenOptions::create()).unwrap();
        f.write_vectored_at(&[IoSlice::new(b"ab"), IoSlice::new(b"cde")], 10)
            .unwrap();
        let mut b = [0u8; 4];
        f.read_at(&mut b, 10).unwrap();
        assert_eq!(f.sync_data().unwrap_err().raw_os_error(), Some(libc::EIO));
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                (FaultOp::Open, 0, 0, 0),
                (FaultOp::Write, 10, 5, 5),
                (FaultOp::Read, 10, 4, 0),
                (FaultOp::Fsync, 0, 0, 0),
            ]
        );
        assert_eq!(&b, b"abcd");
    }
}
