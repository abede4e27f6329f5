//! An in-memory file system for model tests and fast unit tests.
//!
//! Owns: a map from path to file contents. Invariants: behaves like a POSIX file system for
//! the operations the library uses (pread past the end is short, writes past the end extend
//! with zeros, rename replaces). Everything is "durable" at once: the power-loss simulating
//! layer (WAL issue) keeps durable and written bytes apart; this one does not.
//! Locks: the directory mutex, then one file's mutex; never two files at once.

use std::collections::{HashMap, HashSet};
use std::io::{self, IoSlice, IoSliceMut};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{OpenOptions, Vfs, VfsFile};
use crate::sync::Mutex;

#[derive(Debug, Default)]
struct Node {
    data: Mutex<Vec<u8>>,
    locked: Mutex<bool>,
}

#[derive(Debug, Default)]
struct Tree {
    files: HashMap<PathBuf, Arc<Node>>,
    dirs: HashSet<PathBuf>,
}

/// In-memory files. Clones share the same tree.
#[derive(Debug, Default, Clone)]
pub struct MemVfs {
    tree: Arc<Mutex<Tree>>,
}

impl MemVfs {
    pub fn new() -> Self {
        let vfs = Self::default();
        vfs.tree.lock().dirs.insert(PathBuf::from("/"));
        vfs
    }

    /// The current contents of a file (for tests that inspect or damage storage).
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let node = self.tree.lock().files.get(path).cloned()?;
        let data = node.data.lock().clone();
        Some(data)
    }

    /// Replaces the contents of a file.
    pub fn set_contents(&self, path: &Path, data: Vec<u8>) {
        let node = self
            .tree
            .lock()
            .files
            .entry(path.to_path_buf())
            .or_default()
            .clone();
        *node.data.lock() = data;
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

#[derive(Debug)]
struct MemFile {
    node: Arc<Node>,
    path: PathBuf,
    holds_lock: Mutex<bool>,
}

impl Drop for MemFile {
    fn drop(&mut self) {
        if *self.holds_lock.lock() {
            *self.node.locked.lock() = false;
        }
    }
}

impl Vfs for MemVfs {
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn VfsFile>> {
        let mut tree = self.tree.lock();
        let parent = path.parent().map(Path::to_path_buf).unwrap_or_default();
        if !tree.dirs.contains(&parent) && parent != Path::new("") {
            return Err(not_found(&parent));
        }
        let node = match tree.files.get(path) {
            Some(_) if opts.create_new => {
                return Err(io::Error::new(io::ErrorKind::AlreadyExists, "file exists"))
            }
            Some(n) => n.clone(),
            None if opts.create || opts.create_new => {
                let n = Arc::new(Node::default());
                tree.files.insert(path.to_path_buf(), n.clone());
                n
            }
            None => return Err(not_found(path)),
        };
        Ok(Arc::new(MemFile {
            node,
            path: path.to_path_buf(),
            holds_lock: Mutex::new(false),
        }))
    }

    fn unlink(&self, path: &Path) -> io::Result<()> {
        self.tree
            .lock()
            .files
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut tree = self.tree.lock();
        let node = tree.files.remove(from).ok_or_else(|| not_found(from))?;
        tree.files.insert(to.to_path_buf(), node);
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        if self.tree.lock().dirs.contains(path) {
            Ok(())
        } else {
            Err(not_found(path))
        }
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut tree = self.tree.lock();
        for anc in path.ancestors() {
            if !anc.as_os_str().is_empty() {
                tree.dirs.insert(anc.to_path_buf());
            }
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        let tree = self.tree.lock();
        Ok(tree.files.contains_key(path) || tree.dirs.contains(path))
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let tree = self.tree.lock();
        if !tree.dirs.contains(path) {
            return Err(not_found(path));
        }
        let children = tree.files.keys().chain(tree.dirs.iter());
        Ok(children
            .filter(|p| p.parent() == Some(path))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }
}

impl VfsFile for MemFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let data = self.node.data.lock();
        let start = (offset as usize).min(data.len());
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        let mut data = self.node.data.lock();
        let end = offset as usize + buf.len();
        if data.len() < end {
            data.resize(end, 0);
        }
        data[offset as usize..end].copy_from_slice(buf);
        Ok(buf.len())
    }

    fn read_vectored_at(&self, bufs: &mut [IoSliceMut<'_>], offset: u64) -> io::Result<usize> {
        let mut total = 0;
        for b in bufs.iter_mut() {
            let n = self.read_at(b, offset + total as u64)?;
            total += n;
            if n < b.len() {
                break;
            }
        }
        Ok(total)
    }

    fn write_vectored_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
        let mut total = 0;
        for b in bufs {
            total += self.write_at(b, offset + total as u64)?;
        }
        Ok(total)
    }

    fn writeback(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }

    fn sync_all(&self) -> io::Result<()> {
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.node.data.lock().resize(len as usize, 0);
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.node.data.lock().len() as u64)
    }

    fn try_lock_exclusive(&self) -> io::Result<bool> {
        let mut mine = self.holds_lock.lock();
        if *mine {
            return Ok(true);
        }
        let mut locked = self.node.locked.lock();
        if *locked {
            return Ok(false);
        }
        *locked = true;
        *mine = true;
        Ok(true)
    }
}
