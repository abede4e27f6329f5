//! A power-loss simulating in-memory file system, for crash-recovery tests.
//!
//! Owns: for every file node, its *durable* bytes (what survived its last fsync), its
//! *written* bytes (what reads see) and the list of data changes made since that fsync; a
//! *live* namespace (path -> node, what `open` sees) and a *durable* one (what survived the
//! last `sync_dir` of each entry's parent), with the list of namespace changes in between;
//! the set of directories; the count of mutating calls and the [`SimVfs::crash_after`]
//! limit; and the crash epoch that fences handles from before a crash.
//!
//! Invariants: replaying a node's pending data changes, all kept, onto its durable bytes
//! gives its written bytes; replaying the pending namespace changes, all kept, onto the
//! durable namespace gives the live one. [`SimVfs::crash`] picks, with a seeded PRNG, which
//! pending changes survive, replays them in program order, and makes the result both the
//! written and the durable state, with nothing pending. A handle opened before a crash fails
//! every call afterwards. [`SimVfs::duplicate`] copies the whole state, so one workload run
//! can be crashed under many seeds.
//!
//! What a crash can produce (see [`SimVfs::crash`] for the exact rules), for every file
//! alike (relation segments, log segments, commit-log (SLRU) segments, the control file:
//! no path is exempt):
//! - each write made since its file's last fsync dropped, kept, torn at a 4 KiB file offset
//!   (a prefix survives: the kernel's page-sized writeback), torn at a 512-byte file offset
//!   (a prefix survives: a disk with 512-byte sectors loses power mid-write; any sector
//!   boundary inside the write, so a single 4 KiB page can be torn too) or garbaged (every
//!   512-byte sector it touched, including the bytes of those sectors it did not write,
//!   filled with pseudo-random bytes), independently;
//! - each un-synced length change (`set_len`) kept or reverted, independently; a file that
//!   grew by writes shrinks back to the length its surviving changes give;
//! - each create, rename, unlink and symlink not yet covered by a `sync_dir` of its parent
//!   kept or undone, independently (so combinations a journaling file system would never produce,
//!   such as a kept rename of a file whose create was undone, are possible on purpose): a
//!   new file (a relation segment created by extension, say) can vanish with everything
//!   written to it, fsynced or not, and an unlinked one can come back with its old bytes;
//!   an undone symlink leaves its target and what was made through it, unreachable by the
//!   link's name.
//!
//! Symbolic links are namespace entries (a node that holds a target and no data), made
//! durable by a `sync_dir` of their parent like a file's name; every other path is
//! resolved through the live links ([`super::resolve_links`]) before it is looked up, so
//! the namespace holds resolved paths and link names only.
//!
//! What a crash cannot produce: a change to bytes that were durable (fsynced) and that no
//! later un-synced write, truncate or garbaged sector touched; the loss of a write made
//! through an `O_DSYNC` handle; the loss or return of a namespace entry whose parent was
//! `sync_dir`ed after its last change; a tear anywhere but at a 512-byte file offset, or a
//! tear that keeps a suffix of a write without its prefix (sectors reaching the platter out
//! of order); a change inside a sector that no un-synced write touched; a missing directory
//! (directories are durable at once and never removed); a failed read. No call ever fails
//! by itself except through `crash_after` (no ENOSPC, no EIO on reads).
//!
//! Locks: one mutex over the whole state, held for the length of one call and never across
//! calls; a handle's `Drop` takes it briefly to release its advisory lock.
//!
//! Files: `mod.rs` (this one): the state (nodes, namespaces, pending changes) and the
//! [`Vfs`] calls on it; `crash.rs`: what a power cut keeps ([`SimVfs::crash`],
//! [`SimVfs::crash_prefix`]) and its [`CrashReport`]; `file.rs`: a handle's reads, writes,
//! fsyncs and locks; `tests.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use super::{OpenOptions, Vfs, VfsFile};
use crate::sync::{Arc, Mutex, MutexGuard};

mod crash;
mod file;

use crash::{crash_write, Prefix, Rng};
pub use crash::{CrashChoice, CrashReport};
use file::SimFile;

type NodeId = u64;

/// One data change made since the node's last fsync.
#[derive(Debug, Clone)]
enum DataOp {
    /// A write; `forced` when made through an O_DSYNC handle (always survives).
    Write {
        offset: u64,
        data: Vec<u8>,
        forced: bool,
        seq: u64,
    },
    SetLen {
        len: u64,
        seq: u64,
    },
}

impl DataOp {
    /// The change's place in the program order of every change to the file system.
    fn seq(&self) -> u64 {
        match self {
            DataOp::Write { seq, .. } | DataOp::SetLen { seq, .. } => *seq,
        }
    }

    /// Whether a crash may lose it (a write through an O_DSYNC handle never is).
    fn losable(&self) -> bool {
        !matches!(self, DataOp::Write { forced: true, .. })
    }
}

#[derive(Debug, Default, Clone)]
struct Node {
    durable: Vec<u8>,
    written: Vec<u8>,
    pending: Vec<DataOp>,
    /// The handle holding the advisory exclusive lock.
    lock_holder: Option<u64>,
    /// A symbolic link's target (such a node never holds data).
    link: Option<PathBuf>,
}

fn apply_write(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = offset as usize;
    let end = start + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(data);
}

impl Node {
    fn durable_with(data: Vec<u8>) -> Self {
        Self {
            durable: data.clone(),
            written: data,
            pending: Vec::new(),
            lock_holder: None,
            link: None,
        }
    }

    /// What a restart finds in this node (named `path` after the crash): its durable bytes
    /// with each pending change replayed in order as the PRNG chooses.
    fn crash_image(&self, path: &Path, rng: &mut Rng, report: &mut CrashReport) -> Vec<u8> {
        let mut image = self.durable.clone();
        for op in &self.pending {
            match op {
                DataOp::SetLen { len, .. } => {
                    if rng.coin() {
                        image.resize(*len as usize, 0);
                        report.len_changes_kept += 1;
                    } else {
                        report.len_changes_reverted += 1;
                    }
                }
                DataOp::Write {
                    offset,
                    data,
                    forced: true,
                    ..
                } => {
                    apply_write(&mut image, *offset, data);
                    report.kept += 1;
                    report
                        .write_fates
                        .push((path.to_path_buf(), CrashChoice::Keep));
                }
                DataOp::Write {
                    offset,
                    data,
                    forced: false,
                    ..
                } => {
                    let choice = crash_write(&mut image, *offset, data, rng, report);
                    report.write_fates.push((path.to_path_buf(), choice));
                }
            }
        }
        image
    }
}

/// One create, rename, unlink or symlink not yet durable: the entries it set (`None`: removed), less
/// those whose parent has been `sync_dir`ed since; `kind` and `path` (created, renamed to
/// or removed) only name it in a [`CrashReport`].
#[derive(Debug, Clone)]
struct NsOp {
    kind: &'static str,
    path: PathBuf,
    entries: Vec<(PathBuf, Option<NodeId>)>,
    /// Its place in the program order of every change (see [`DataOp::seq`]).
    seq: u64,
}

#[derive(Debug, Clone)]
struct State {
    nodes: BTreeMap<NodeId, Node>,
    live: BTreeMap<PathBuf, NodeId>,
    durable: BTreeMap<PathBuf, NodeId>,
    pending_ns: Vec<NsOp>,
    dirs: BTreeSet<PathBuf>,
    next_node: NodeId,
    next_handle: u64,
    /// Bumped by every crash; handles from an older epoch fail.
    epoch: u64,
    io_count: u64,
    /// Mutating calls fail once `io_count` reaches this.
    fail_at: Option<u64>,
    /// Whether a symbolic link was ever made (until then paths need no resolution).
    has_links: bool,
    /// The program-order number the next change gets.
    next_seq: u64,
    /// While recording ([`SimVfs::record_sync_points`]): the file system as it was at each
    /// sync that made something durable, just before it did.
    /// Shared, so copying the state for a point copies no earlier point.
    sync_points: Option<Arc<Mutex<Vec<SyncPoint>>>>,
}

impl State {
    /// Admits one mutating call, or fails it with EIO past the `crash_after` limit.
    fn begin_mutation(&mut self) -> io::Result<()> {
        if self.fail_at.is_some_and(|limit| self.io_count >= limit) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.io_count += 1;
        Ok(())
    }

    /// The program-order number for a new change.
    fn take_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// While recording, keeps a copy of the whole state as a sync point named `what`.
    fn record_sync_point(&mut self, what: String) {
        if self.sync_points.is_none() {
            return;
        }
        let mut copy = self.clone();
        copy.sync_points = None;
        for node in copy.nodes.values_mut() {
            node.lock_holder = None;
        }
        let point = SyncPoint {
            // Called after the sync's own admission: the calls made before it.
            io_count: self.io_count - 1,
            what,
            changes: copy.losable_changes().len() as u64,
            vfs: SimVfs {
                state: Arc::new(Mutex::new(copy)),
            },
        };
        if let Some(points) = &self.sync_points {
            points.lock().push(point);
        }
    }

    /// The program-order numbers of every pending change a crash may lose (data changes
    /// but O_DSYNC writes, and namespace changes), ascending.
    fn losable_changes(&self) -> Vec<u64> {
        let data = self.nodes.values().flat_map(|n| n.pending.iter());
        let mut seqs: Vec<u64> = data.filter(|op| op.losable()).map(DataOp::seq).collect();
        seqs.extend(self.pending_ns.iter().map(|op| op.seq));
        seqs.sort_unstable();
        seqs
    }

    fn new_node(&mut self, node: Node) -> NodeId {
        let id = self.next_node;
        self.next_node += 1;
        self.nodes.insert(id, node);
        id
    }

    fn node_mut(&mut self, id: NodeId) -> io::Result<&mut Node> {
        self.nodes
            .get_mut(&id)
            .ok_or_else(|| io::Error::other("simulated file node is gone"))
    }

    /// `path` with the live links followed (the last component only with `follow_last`).
    fn resolve(&self, path: &Path, follow_last: bool) -> io::Result<PathBuf> {
        if !self.has_links {
            return Ok(path.to_path_buf());
        }
        super::resolve_links(path, follow_last, |p| {
            let id = self.live.get(p)?;
            self.nodes.get(id)?.link.clone()
        })
    }

    fn check_dir(&self, path: &Path) -> io::Result<()> {
        let parent = path.parent().unwrap_or(Path::new(""));
        if parent.as_os_str().is_empty() || self.dirs.contains(parent) {
            Ok(())
        } else {
            Err(not_found(parent))
        }
    }
}

/// The file system as it was at one sync that made something durable, just before it did
/// (recorded by [`SimVfs::record_sync_points`]): a power cut there can keep any prefix of
/// the changes made since the last syncs, which [`SimVfs::crash_prefix`] on a
/// [`SimVfs::duplicate`] of [`Self::vfs`] produces.
#[derive(Debug)]
pub struct SyncPoint {
    /// Mutating calls made before the sync (compare [`SimVfs::io_count`] read by a
    /// workload: a commit acknowledged when the count was below this was acknowledged
    /// before the sync began).
    pub io_count: u64,
    /// Which sync: `"sync of <path>"` or `"sync_dir of <path>"`.
    pub what: String,
    /// Pending changes a crash could lose there: prefixes 0 to this many are the states.
    pub changes: u64,
    /// The file system at that moment (not recording, no handle open on it).
    pub vfs: SimVfs,
}

/// In-memory files that can lose un-synced changes in a simulated power cut. Clones share
/// the same state.
#[derive(Debug, Clone)]
pub struct SimVfs {
    state: Arc<Mutex<State>>,
}

impl Default for SimVfs {
    fn default() -> Self {
        Self::new()
    }
}

impl SimVfs {
    /// An empty file system with only the directory `/`.
    pub fn new() -> Self {
        let state = State {
            nodes: BTreeMap::new(),
            live: BTreeMap::new(),
            durable: BTreeMap::new(),
            pending_ns: Vec::new(),
            dirs: BTreeSet::from([PathBuf::from("/")]),
            next_node: 0,
            next_handle: 0,
            epoch: 0,
            io_count: 0,
            fail_at: None,
            has_links: false,
            next_seq: 0,
            sync_points: None,
        };
        Self {
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// The written contents of a file (what a read sees now).
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.state.lock();
        let id = st.live.get(&st.resolve(path, true).ok()?)?;
        st.nodes.get(id).map(|n| n.written.clone())
    }

    /// Replaces (or creates) a file with `data`, durable at once, name included: a back
    /// door for tests that set up or damage storage. Not a mutating call: never fails and
    /// does not count in [`Self::io_count`].
    pub fn set_contents(&self, path: &Path, data: Vec<u8>) {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let resolved = st
            .resolve(path, true)
            .unwrap_or_else(|_| path.to_path_buf());
        let path = resolved.as_path();
        let id = match st.live.get(path) {
            Some(&id) => id,
            None => st.new_node(Node::default()),
        };
        if let Some(node) = st.nodes.get_mut(&id) {
            let holder = node.lock_holder;
            *node = Node::durable_with(data);
            node.lock_holder = holder;
        }
        st.live.insert(path.to_path_buf(), id);
        st.durable.insert(path.to_path_buf(), id);
        for op in &mut st.pending_ns {
            op.entries.retain(|(p, _)| p != path);
        }
        st.pending_ns.retain(|op| !op.entries.is_empty());
    }

    /// How many mutating calls were made so far: writes, syncs, `set_len`, creating opens,
    /// renames, unlinks and `sync_dir`s, counted whether or not they then failed for another
    /// reason (a missing file), but not those refused by [`Self::crash_after`]. Never reset.
    pub fn io_count(&self) -> u64 {
        self.state.lock().io_count
    }

    /// Lets the next `n` mutating calls through and fails every later one with EIO (with
    /// no effect) until [`Self::crash`]; reads keep working. Running a workload once to
    /// learn its `io_count`, then again on a fresh `SimVfs` with `crash_after(n)` for each
    /// `n`, crashes it after every I/O.
    pub fn crash_after(&self, n: u64) {
        let mut st = self.state.lock();
        st.fail_at = Some(st.io_count.saturating_add(n));
    }

    /// A copy of the whole file system as it is now (pending changes, crash epoch and
    /// `crash_after` limit included) that shares nothing with this one: crashing copies
    /// under many seeds explores the fates of one workload run without rerunning it. No
    /// handle refers to the copy, so every advisory lock starts free there; handles opened
    /// on `self` keep working on `self` only.
    pub fn duplicate(&self) -> SimVfs {
        let mut st = self.state.lock().clone();
        st.sync_points = None;
        for node in st.nodes.values_mut() {
            node.lock_holder = None;
        }
        SimVfs {
            state: Arc::new(Mutex::new(st)),
        }
    }

    /// Starts recording a [`SyncPoint`] at every later sync (`sync_data`, `sync_all`,
    /// `sync_dir`) that makes a pending change durable, for [`Self::take_sync_points`].
    /// Each holds a copy of the whole file system: record small workloads only.
    pub fn record_sync_points(&self) {
        let mut st = self.state.lock();
        st.sync_points.get_or_insert_with(Default::default);
    }

    /// The sync points recorded so far, in the order of their syncs (recording goes on).
    pub fn take_sync_points(&self) -> Vec<SyncPoint> {
        let points = self.state.lock().sync_points.clone();
        points
            .map(|p| std::mem::take(&mut *p.lock()))
            .unwrap_or_default()
    }

    /// Pending changes a crash could lose now (see [`SyncPoint::changes`]).
    pub fn losable_changes(&self) -> u64 {
        self.state.lock().losable_changes().len() as u64
    }

    /// Simulates a power cut that keeps exactly the first `keep` of the pending changes a
    /// crash could lose (data writes, length changes, creates, renames, unlinks and
    /// symlinks, in the program order they were made across all files) whole and loses
    /// every later one, as a device that persists writes in order would: CrashMonkey's
    /// prefix states. O_DSYNC writes are always kept. Otherwise as [`Self::crash`]: the
    /// result becomes the written and durable state, handles from before fail.
    pub fn crash_prefix(&self, keep: u64) -> CrashReport {
        let mut st = self.state.lock();
        let seqs = st.losable_changes();
        // Changes numbered below `cut` survive.
        let cut = seqs.get(keep as usize).copied().unwrap_or(u64::MAX);
        st.power_cut(&mut Prefix(cut))
    }

    /// Simulates a power cut and restart: decides with a PRNG seeded by `seed` what survives
    /// of every change not yet made durable, and makes the result the new written and
    /// durable state. The same state and seed always give the same result.
    ///
    /// 1. Namespace: starting from the durable namespace, each pending create, rename,
    ///    unlink and symlink (its entries in directories not `sync_dir`ed since) is replayed
    ///    in order or undone, each with probability 1/2. An undone create or symlink leaves
    ///    the name absent (or at its durable node); an undone rename leaves the old name at
    ///    its node and the new name at what it pointed to before (or absent); an undone
    ///    unlink brings the file (or link) back.
    /// 2. Data, for every node that has a name after step 1: starting from its durable
    ///    bytes, each write since its last fsync is replayed in order as one of the
    ///    [`CrashChoice`]s, each with probability 1/5 (a tear with no 4 KiB offset inside
    ///    the write, or a sector tear with no 512-byte offset inside it, becomes a drop or
    ///    a keep; the tear point is uniform among those inside); later writes overlay
    ///    earlier ones. A write through an O_DSYNC handle is always kept. A kept or
    ///    garbaged write extends the file to its end, a torn one to its tear point, a
    ///    dropped one not at all (so a file grown only by dropped writes shrinks back to its
    ///    durable length). Each `set_len` since the last fsync is replayed or skipped with
    ///    probability 1/2.
    /// 3. Nodes without a name are freed; nothing is pending; every advisory lock is
    ///    released; the `crash_after` limit is cleared; handles opened before now fail every
    ///    call with `ErrorKind::Other`.
    pub fn crash(&self, seed: u64) -> CrashReport {
        self.state.lock().power_cut(&mut Rng(seed))
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", path.display()),
    )
}

impl Vfs for SimVfs {
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn VfsFile>> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let resolved = st.resolve(path, true)?;
        st.check_dir(&resolved)?;
        let node = match st.live.get(&resolved) {
            Some(_) if opts.create_new => {
                return Err(io::Error::new(io::ErrorKind::AlreadyExists, "file exists"))
            }
            Some(&id) => id,
            None if opts.create || opts.create_new => {
                st.begin_mutation()?;
                let id = st.new_node(Node::default());
                st.live.insert(resolved.clone(), id);
                let seq = st.take_seq();
                st.pending_ns.push(NsOp {
                    kind: "create",
                    path: resolved.clone(),
                    entries: vec![(resolved, Some(id))],
                    seq,
                });
                id
            }
            None => return Err(not_found(path)),
        };
        let handle = st.next_handle;
        st.next_handle += 1;
        Ok(Arc::new(SimFile {
            state: self.state.clone(),
            node,
            handle,
            epoch: st.epoch,
            path: path.to_path_buf(),
            writable: opts.write || opts.create || opts.create_new,
            dsync: opts.dsync,
        }))
    }

    fn unlink(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.begin_mutation()?;
        let resolved = st.resolve(path, false)?;
        st.live.remove(&resolved).ok_or_else(|| not_found(path))?;
        let seq = st.take_seq();
        st.pending_ns.push(NsOp {
            kind: "unlink",
            path: resolved.clone(),
            entries: vec![(resolved, None)],
            seq,
        });
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.begin_mutation()?;
        let (from, to) = (st.resolve(from, false)?, st.resolve(to, false)?);
        let id = *st.live.get(&from).ok_or_else(|| not_found(&from))?;
        st.check_dir(&to)?;
        if from == to {
            return Ok(());
        }
        st.live.remove(&from);
        st.live.insert(to.clone(), id);
        let seq = st.take_seq();
        st.pending_ns.push(NsOp {
            kind: "rename",
            path: to.clone(),
            entries: vec![(from, None), (to, Some(id))],
            seq,
        });
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        st.begin_mutation()?;
        let resolved = st.resolve(path, true)?;
        let path = resolved.as_path();
        if !st.dirs.contains(path) {
            return Err(not_found(path));
        }
        let covers = |op: &NsOp| op.entries.iter().any(|(p, _)| p.parent() == Some(path));
        if st.pending_ns.iter().any(covers) {
            st.record_sync_point(format!("sync_dir of {}", path.display()));
        }
        let in_dir = |p: &&PathBuf| p.parent() == Some(path);
        let entries: Vec<PathBuf> = (st.live.keys().filter(in_dir))
            .chain(st.durable.keys().filter(in_dir))
            .cloned()
            .collect();
        for p in entries {
            match st.live.get(&p) {
                Some(&id) => st.durable.insert(p, id),
                None => st.durable.remove(&p),
            };
        }
        for op in &mut st.pending_ns {
            op.entries.retain(|(p, _)| p.parent() != Some(path));
        }
        st.pending_ns.retain(|op| !op.entries.is_empty());
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        let resolved = st.resolve(path, true)?;
        for anc in resolved.ancestors() {
            if !anc.as_os_str().is_empty() {
                st.dirs.insert(anc.to_path_buf());
            }
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        let st = self.state.lock();
        let resolved = st.resolve(path, true)?;
        Ok(st.live.contains_key(&resolved) || st.dirs.contains(&resolved))
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let st = self.state.lock();
        let resolved = st.resolve(path, true)?;
        if !st.dirs.contains(&resolved) {
            return Err(not_found(path));
        }
        let children = st.live.keys().chain(st.dirs.iter());
        Ok(children
            .filter(|p| p.parent() == Some(resolved.as_path()))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }

    fn symlink(&self, target: &Path, link: &Path) -> io::Result<()> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        st.begin_mutation()?;
        let resolved = st.resolve(link, false)?;
        st.check_dir(&resolved)?;
        if st.live.contains_key(&resolved) || st.dirs.contains(&resolved) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, "file exists"));
        }
        let id = st.new_node(Node {
            link: Some(target.to_path_buf()),
            ..Node::default()
        });
        st.live.insert(resolved.clone(), id);
        st.has_links = true;
        let seq = st.take_seq();
        st.pending_ns.push(NsOp {
            kind: "symlink",
            path: resolved.clone(),
            entries: vec![(resolved, Some(id))],
            seq,
        });
        Ok(())
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        let st = self.state.lock();
        let resolved = st.resolve(path, false)?;
        if let Some(id) = st.live.get(&resolved) {
            if let Some(target) = st.nodes.get(id).and_then(|n| n.link.clone()) {
                return Ok(target);
            }
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        if st.dirs.contains(&resolved) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        Err(not_found(path))
    }

    /// The simulated disk does not say which device a path is on.
    fn device_id(&self, _path: &Path) -> io::Result<Option<u64>> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests;
