//! An in-memory file system for model tests and fast unit tests.
//!
//! Owns: a map from path to file contents. Invariants: behaves like a POSIX file system for
//! the operations the library uses (pread past the end is short, writes past the end extend
//! with zeros, rename replaces). Everything is "durable" at once: the power-loss simulating
//! layer (WAL issue) keeps durable and written bytes apart; this one does not. Symbolic
//! links are aliases: every path is resolved through them ([`super::resolve_links`])
//! before it is looked up, so the tree itself holds only resolved paths and link names.
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
    /// Symbolic links: name -> target as given to `symlink`.
    links: HashMap<PathBuf, PathBuf>,
}

impl Tree {
    /// `path` with its links followed (the last component only with `follow_last`).
    fn resolve(&self, path: &Path, follow_last: bool) -> io::Result<PathBuf> {
        if self.links.is_empty() {
            return Ok(path.to_path_buf());
        }
        super::resolve_links(path, follow_last, |p| self.links.get(p).cloned())
    }

    fn has_entry(&self, path: &Path) -> bool {
        self.files.contains_key(path) || self.dirs.contains(path) || self.links.contains_key(path)
    }
}

/// In-memory files. Clones share the same tree.
#[derive(Debug, Default, Clone)]
pub struct MemVfs {
    tree: Arc<Mutex<Tree>>,
}

impl MemVfs {
    /// An empty file system: only the root directory `/`.
    pub fn new() -> Self {
        let vfs = Self::default();
        vfs.tree.lock().dirs.insert(PathBuf::from("/"));
        vfs
    }

    /// The current contents of a file (for tests that inspect or damage storage).
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let tree = self.tree.lock();
        let path = tree.resolve(path, true).ok()?;
        let node = tree.files.get(&path).cloned()?;
        drop(tree);
        let data = node.data.lock().clone();
        Some(data)
    }

    /// Replaces the contents of a file.
    pub fn set_contents(&self, path: &Path, data: Vec<u8>) {
        let mut tree = self.tree.lock();
        let path = tree
            .resolve(path, true)
            .unwrap_or_else(|_| path.to_path_buf());
        let node = tree.files.entry(path).or_default().clone();
        drop(tree);
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
        let resolved = tree.resolve(path, true)?;
        let parent = resolved.parent().map(Path::to_path_buf).unwrap_or_default();
        if !tree.dirs.contains(&parent) && parent != Path::new("") {
            return Err(not_found(&parent));
        }
        let node = match tree.files.get(&resolved) {
            Some(_) if opts.create_new => {
                return Err(io::Error::new(io::ErrorKind::AlreadyExists, "file exists"))
            }
            Some(n) => n.clone(),
            None if opts.create || opts.create_new => {
                let n = Arc::new(Node::default());
                tree.files.insert(resolved, n.clone());
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
        let mut tree = self.tree.lock();
        let resolved = tree.resolve(path, false)?;
        if tree.links.remove(&resolved).is_some() {
            return Ok(());
        }
        tree.files
            .remove(&resolved)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut tree = self.tree.lock();
        let (from_r, to_r) = (tree.resolve(from, false)?, tree.resolve(to, false)?);
        let node = tree.files.remove(&from_r).ok_or_else(|| not_found(from))?;
        tree.files.insert(to_r, node);
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let tree = self.tree.lock();
        if tree.dirs.contains(&tree.resolve(path, true)?) {
            Ok(())
        } else {
            Err(not_found(path))
        }
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut tree = self.tree.lock();
        let resolved = tree.resolve(path, true)?;
        for anc in resolved.ancestors() {
            if !anc.as_os_str().is_empty() {
                tree.dirs.insert(anc.to_path_buf());
            }
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        let tree = self.tree.lock();
        let resolved = tree.resolve(path, true)?;
        Ok(tree.files.contains_key(&resolved) || tree.dirs.contains(&resolved))
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let tree = self.tree.lock();
        let resolved = tree.resolve(path, true)?;
        if !tree.dirs.contains(&resolved) {
            return Err(not_found(path));
        }
        let children = tree.files.keys().chain(&tree.dirs).chain(tree.links.keys());
        Ok(children
            .filter(|p| p.parent() == Some(resolved.as_path()))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }

    fn symlink(&self, target: &Path, link: &Path) -> io::Result<()> {
        let mut tree = self.tree.lock();
        let resolved = tree.resolve(link, false)?;
        let parent = resolved.parent().unwrap_or(Path::new("/"));
        if !tree.dirs.contains(parent) {
            return Err(not_found(parent));
        }
        if tree.has_entry(&resolved) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, "file exists"));
        }
        tree.links.insert(resolved, target.to_path_buf());
        Ok(())
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        let tree = self.tree.lock();
        let resolved = tree.resolve(path, false)?;
        match tree.links.get(&resolved) {
            Some(target) => Ok(target.clone()),
            None if tree.has_entry(&resolved) => Err(io::Error::from_raw_os_error(libc::EINVAL)),
            None => Err(not_found(path)),
        }
    }

    /// One memory, no devices to tell apart.
    fn device_id(&self, _path: &Path) -> io::Result<Option<u64>> {
        Ok(None)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A link is an alias of its target's directory: files made through it are the
    /// target's, `list_dir` shows the link's name, `read_link` gives the target (EINVAL
    /// for a plain directory), `unlink` removes the link only, and a cycle fails (ELOOP).
    #[test]
    fn symlinks_are_aliases_of_their_target() {
        let vfs = MemVfs::new();
        vfs.create_dir_all(Path::new("/ts")).unwrap();
        vfs.create_dir_all(Path::new("/db/base")).unwrap();
        vfs.symlink(Path::new("/ts"), Path::new("/db/base/1"))
            .unwrap();
        let e = vfs
            .symlink(Path::new("/ts"), Path::new("/db/base/1"))
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        let f = vfs
            .open(Path::new("/db/base/1/77"), OpenOptions::create())
            .unwrap();
        assert_eq!(f.path(), Path::new("/db/base/1/77"));
        f.write_at(b"x", 0).unwrap();
        assert_eq!(vfs.contents(Path::new("/ts/77")).unwrap(), b"x");
        assert!(vfs.exists(Path::new("/db/base/1")).unwrap());
        vfs.sync_dir(Path::new("/db/base/1")).unwrap();
        assert_eq!(vfs.list_dir(Path::new("/db/base/1")).unwrap(), ["77"]);
        assert_eq!(vfs.list_dir(Path::new("/db/base")).unwrap(), ["1"]);
        assert_eq!(
            vfs.read_link(Path::new("/db/base/1")).unwrap(),
            Path::new("/ts")
        );
        let e = vfs.read_link(Path::new("/ts")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        let e = vfs.read_link(Path::new("/db/base/2")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        // A relative target is taken from the link's directory.
        vfs.symlink(Path::new("../../ts"), Path::new("/db/base/2"))
            .unwrap();
        assert_eq!(vfs.list_dir(Path::new("/db/base/2")).unwrap(), ["77"]);
        vfs.unlink(Path::new("/db/base/1")).unwrap();
        assert!(!vfs.exists(Path::new("/db/base/1")).unwrap());
        assert!(vfs.exists(Path::new("/ts/77")).unwrap());
        vfs.symlink(Path::new("/loop/b"), Path::new("/loop"))
            .unwrap();
        let e = vfs
            .open(Path::new("/loop/f"), OpenOptions::create())
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
    }
}
