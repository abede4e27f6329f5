//! WAL segment files: naming, creation (zero-filled, so that fdatasync of a segment never
//! has to journal a size change), recycling, removal.
//!
//! Owns: the open segment files and the list of files that can be recycled.
//! Layout: `<dir>/wal/<segno as 16 hex digits>`; segment `n` holds log bytes
//! `[n * segment_size, (n + 1) * segment_size)`.
//! Invariants: a segment file, once created by this module, has its full size and that
//! size is durable (file and directory fsynced) before any log byte is written to it.
//! Locks: `open` mutex, held while a file is created (rare: once per segment).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::WalError;
use crate::sync::{Arc, Mutex};
use crate::vfs::{IoAt, IoError, OpenOptions, Vfs, VfsFile};

/// Zero-fill chunk when creating a segment.
const FILL_CHUNK: usize = 1 << 20;
/// Old segments kept for recycling (renamed instead of created and zero-filled).
const RECYCLE_MAX: usize = 4;

#[derive(Debug)]
pub(super) struct Segments {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    pub size: u64,
    dsync: bool,
    open: Mutex<BTreeMap<u64, Arc<dyn VfsFile>>>,
    /// Segments released by a checkpoint (wholly before its redo point), oldest first:
    /// the only ones that may be renamed into new segments.
    recyclable: Mutex<Vec<u64>>,
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> WalError + 'a {
    move |source| WalError::Io(IoError::new(op, path, source))
}

impl Segments {
    pub fn new(vfs: Arc<dyn Vfs>, dir: PathBuf, size: u64, dsync: bool) -> Result<Self, WalError> {
        vfs.create_dir_all(&dir).map_err(io("creating", &dir))?;
        Ok(Self {
            vfs,
            dir,
            size,
            dsync,
            open: Mutex::new(BTreeMap::new()),
            recyclable: Mutex::new(Vec::new()),
        })
    }

    pub fn path(&self, segno: u64) -> PathBuf {
        self.dir.join(format!("{segno:016X}"))
    }

    /// Segment numbers present on disk, ascending.
    pub fn list(&self) -> Result<Vec<u64>, WalError> {
        let names = self
            .vfs
            .list_dir(&self.dir)
            .map_err(io("listing", &self.dir))?;
        let mut v: Vec<u64> = names
            .iter()
            .filter(|n| n.len() == 16 && n.bytes().all(|b| b.is_ascii_hexdigit()))
            .filter_map(|n| u64::from_str_radix(n, 16).ok())
            .collect();
        v.sort_unstable();
        Ok(v)
    }

    /// The file of segment `segno`, opened if it exists; with `create`, made if not.
    pub fn file(&self, segno: u64, create: bool) -> Result<Option<Arc<dyn VfsFile>>, WalError> {
        let mut open = self.open.lock();
        if let Some(f) = open.get(&segno) {
            return Ok(Some(f.clone()));
        }
        let path = self.path(segno);
        let opts = OpenOptions {
            dsync: self.dsync,
            ..OpenOptions::read_write()
        };
        let exists = self.vfs.exists(&path).map_err(io("checking", &path))?;
        if !exists {
            if !create {
                return Ok(None);
            }
            self.make(segno, &path)?;
        }
        let f = self.vfs.open(&path, opts).map_err(io("opening", &path))?;
        open.insert(segno, f.clone());
        Ok(Some(f))
    }

    /// Creates segment `segno`: renames a segment a checkpoint released if one is waiting
    /// (its stale records fail the LSN check), else creates and zero-fills a new file.
    fn make(&self, segno: u64, path: &Path) -> Result<(), WalError> {
        let recycled = {
            let mut r = self.recyclable.lock();
            if r.is_empty() {
                None
            } else {
                Some(r.remove(0))
            }
        };
        if let Some(old) = recycled {
            let from = self.path(old);
            self.vfs
                .rename(&from, path)
                .map_err(io("recycling", &from))?;
        } else {
            let tmp = self.dir.join(format!("{segno:016X}.tmp"));
            let f = self
                .vfs
                .open(&tmp, OpenOptions::create())
                .map_err(io("creating", &tmp))?;
            let zeros = vec![0u8; FILL_CHUNK.min(self.size as usize)];
            let mut off = 0u64;
            while off < self.size {
                let n = zeros.len().min((self.size - off) as usize);
                let w = f
                    .write_at(&zeros[..n], off)
                    .map_err(io("zero-filling", &tmp))?;
                if w != n {
                    return Err(WalError::Io(IoError::short(
                        "zero-filling",
                        &tmp,
                        IoAt::Offset(off),
                        w,
                        n,
                    )));
                }
                off += n as u64;
            }
            f.sync_all().map_err(io("fsync of", &tmp))?;
            drop(f);
            self.vfs.rename(&tmp, path).map_err(io("renaming", &tmp))?;
        }
        self.vfs
            .sync_dir(&self.dir)
            .map_err(io("fsync of directory", &self.dir))?;
        Ok(())
    }

    /// Drops segments wholly before `segno` (the redo point's segment): keeps up to
    /// `RECYCLE_MAX` of them for recycling, unlinks the rest.
    pub fn remove_before(&self, segno: u64) -> Result<usize, WalError> {
        let mut open = self.open.lock();
        let mut recyclable = self.recyclable.lock();
        let old: Vec<u64> = self.list()?.into_iter().filter(|&s| s < segno).collect();
        let mut removed = 0;
        for s in &old {
            open.remove(s);
            if !recyclable.contains(s) {
                recyclable.push(*s);
            }
        }
        recyclable.sort_unstable();
        while recyclable.len() > RECYCLE_MAX {
            let s = recyclable.remove(0);
            let p = self.path(s);
            self.vfs.unlink(&p).map_err(io("removing", &p))?;
            removed += 1;
        }
        if removed > 0 {
            self.vfs
                .sync_dir(&self.dir)
                .map_err(io("fsync of directory", &self.dir))?;
        }
        Ok(removed)
    }
}
