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

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, IoSlice, IoSliceMut};
use std::path::{Path, PathBuf};

use super::{OpenOptions, Vfs, VfsFile};
use crate::sync::{Arc, Mutex, MutexGuard};

/// Granule of a page tear: the page size the kernel writes back, so a power cut in the
/// middle of a large write often leaves it split at a 4 KiB file offset.
const TEAR_UNIT: u64 = 4096;

/// The smallest unit a device writes: a power cut can split a write at any sector boundary
/// (a 4 KiB page included), and a write interrupted mid-sector can leave the whole sector
/// unreadable or random, even the bytes of it the write did not cover.
const SECTOR: u64 = 512;

/// Largest file length accepted. An in-memory file beyond this is surely an offset computed
/// from garbage in the caller; failing with EFBIG is kinder than aborting on allocation.
const MAX_FILE_LEN: u64 = 1 << 32;

/// What became of one un-synced write at a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrashChoice {
    /// The bytes revert to what they were before the write.
    Drop,
    /// The bytes survive.
    Keep,
    /// The bytes up to a 4 KiB file offset inside the write survive; the rest revert.
    Tear,
    /// The bytes up to a 512-byte file offset inside the write survive; the rest revert.
    SectorTear,
    /// Every 512-byte sector the write touched holds pseudo-random bytes.
    Garbage,
}

impl CrashChoice {
    /// Every choice, in the order [`CrashReport`] counts them.
    pub const ALL: [CrashChoice; 5] = [
        CrashChoice::Drop,
        CrashChoice::Keep,
        CrashChoice::Tear,
        CrashChoice::SectorTear,
        CrashChoice::Garbage,
    ];
}

/// What a [`SimVfs::crash`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Un-synced writes dropped.
    pub dropped: u64,
    /// Un-synced writes kept (O_DSYNC writes count here too).
    pub kept: u64,
    /// Un-synced writes torn at a 4 KiB boundary.
    pub torn: u64,
    /// Un-synced writes torn at a 512-byte boundary.
    pub sector_torn: u64,
    /// Un-synced writes whose sectors were filled with garbage.
    pub garbaged: u64,
    /// Un-synced `set_len` calls kept.
    pub len_changes_kept: u64,
    /// Un-synced `set_len` calls reverted.
    pub len_changes_reverted: u64,
    /// Un-synced creates, renames, unlinks and symlinks kept.
    pub namespace_kept: u64,
    /// Un-synced creates, renames, unlinks and symlinks undone.
    pub namespace_undone: u64,
    /// Every un-synced write of a file that has a name after the crash, in the order
    /// replayed: the file's path (after the crash) and what became of the write. O_DSYNC
    /// writes show as kept.
    pub write_fates: Vec<(PathBuf, CrashChoice)>,
    /// Every un-synced namespace change, in program order: `"create"`, `"rename"`,
    /// `"unlink"` or `"symlink"`, the path it created, renamed to, removed or linked, and
    /// whether it was kept.
    pub namespace_fates: Vec<(&'static str, PathBuf, bool)>,
}

impl CrashReport {
    /// How many writes met `choice`.
    pub fn writes(&self, choice: CrashChoice) -> u64 {
        match choice {
            CrashChoice::Drop => self.dropped,
            CrashChoice::Keep => self.kept,
            CrashChoice::Tear => self.torn,
            CrashChoice::SectorTear => self.sector_torn,
            CrashChoice::Garbage => self.garbaged,
        }
    }

    /// How many writes to files whose path satisfies `file` met `choice`.
    pub fn writes_to(&self, file: impl Fn(&Path) -> bool, choice: CrashChoice) -> u64 {
        let n = self.write_fates.iter();
        n.filter(|(p, c)| *c == choice && file(p)).count() as u64
    }

    /// How many namespace changes of `kind` (`"create"`, `"rename"`, `"unlink"`) on paths
    /// satisfying `path` were kept (`kept`) or undone (`!kept`).
    pub fn namespace_changes(&self, kind: &str, path: impl Fn(&Path) -> bool, kept: bool) -> u64 {
        let n = self.namespace_fates.iter();
        n.filter(|(k, p, x)| *k == kind && *x == kept && path(p))
            .count() as u64
    }
}

/// splitmix64: tiny, fast, and good enough to pick crash outcomes reproducibly per seed.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (the modulo bias is negligible for the small `n` used here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn coin(&mut self) -> bool {
        self.next() >> 63 == 1
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let bytes = self.next().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

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

/// The file offsets that are multiples of `unit` strictly inside `offset..end`, as
/// (first, count); count 0 when there is none.
fn tear_points(offset: u64, end: u64, unit: u64) -> (u64, u64) {
    let first = (offset / unit + 1) * unit;
    let last = (end - 1) / unit * unit;
    if last < first {
        (first, 0)
    } else {
        (first, (last - first) / unit + 1)
    }
}

/// Applies one un-synced write to `image` as the PRNG chooses, counts the choice and
/// returns it.
fn crash_write(
    image: &mut Vec<u8>,
    offset: u64,
    data: &[u8],
    rng: &mut Rng,
    report: &mut CrashReport,
) -> CrashChoice {
    let end = offset + data.len() as u64;
    let mut choice = CrashChoice::ALL[rng.below(CrashChoice::ALL.len() as u64) as usize];
    // A tear needs a tear point strictly inside the write; without one it becomes a drop
    // or a keep.
    let unit = match choice {
        CrashChoice::Tear => TEAR_UNIT,
        _ => SECTOR,
    };
    let (first, points) = tear_points(offset, end, unit);
    if matches!(choice, CrashChoice::Tear | CrashChoice::SectorTear) && points == 0 {
        choice = if rng.coin() {
            CrashChoice::Keep
        } else {
            CrashChoice::Drop
        };
    }
    match choice {
        CrashChoice::Drop => report.dropped += 1,
        CrashChoice::Keep => {
            apply_write(image, offset, data);
            report.kept += 1;
        }
        CrashChoice::Tear | CrashChoice::SectorTear => {
            let cut = first + rng.below(points) * unit;
            apply_write(image, offset, &data[..(cut - offset) as usize]);
            if choice == CrashChoice::Tear {
                report.torn += 1;
            } else {
                report.sector_torn += 1;
            }
        }
        CrashChoice::Garbage => {
            if (image.len() as u64) < end {
                image.resize(end as usize, 0);
            }
            let from = (offset / SECTOR * SECTOR) as usize;
            let to = (end.div_ceil(SECTOR) * SECTOR).min(image.len() as u64) as usize;
            rng.fill(&mut image[from..to]);
            report.garbaged += 1;
        }
    }
    choice
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

/// Decides what a power cut keeps: at random ([`Rng`], [`SimVfs::crash`]) or a prefix in
/// program order ([`Prefix`], [`SimVfs::crash_prefix`]).
trait Fates {
    /// Whether the pending namespace change `op` survives.
    fn keep_ns(&mut self, op: &NsOp) -> bool;
    /// What a restart finds in `node` (named `path` after the crash), counted in `report`.
    fn image(&mut self, node: &Node, path: &Path, report: &mut CrashReport) -> Vec<u8>;
}

impl Fates for Rng {
    fn keep_ns(&mut self, _: &NsOp) -> bool {
        !self.coin()
    }

    fn image(&mut self, node: &Node, path: &Path, report: &mut CrashReport) -> Vec<u8> {
        node.crash_image(path, self, report)
    }
}

/// Keeps, whole, the changes numbered below its bound; loses the rest.
struct Prefix(u64);

impl Fates for Prefix {
    fn keep_ns(&mut self, op: &NsOp) -> bool {
        op.seq < self.0
    }

    fn image(&mut self, node: &Node, path: &Path, report: &mut CrashReport) -> Vec<u8> {
        let mut image = node.durable.clone();
        for op in &node.pending {
            let kept = !op.losable() || op.seq() < self.0;
            match op {
                DataOp::SetLen { len, .. } if kept => {
                    image.resize(*len as usize, 0);
                    report.len_changes_kept += 1;
                }
                DataOp::SetLen { .. } => report.len_changes_reverted += 1,
                DataOp::Write { offset, data, .. } => {
                    let fate = if kept {
                        apply_write(&mut image, *offset, data);
                        report.kept += 1;
                        CrashChoice::Keep
                    } else {
                        report.dropped += 1;
                        CrashChoice::Drop
                    };
                    report.write_fates.push((path.to_path_buf(), fate));
                }
            }
        }
        image
    }
}

impl State {
    /// The power cut and restart of [`SimVfs::crash`], with `fates` deciding what survives.
    fn power_cut(&mut self, fates: &mut dyn Fates) -> CrashReport {
        let mut report = CrashReport::default();
        let mut names = self.durable.clone();
        for op in std::mem::take(&mut self.pending_ns) {
            let kept = fates.keep_ns(&op);
            report.namespace_fates.push((op.kind, op.path, kept));
            if !kept {
                report.namespace_undone += 1;
                continue;
            }
            report.namespace_kept += 1;
            for (path, id) in op.entries {
                match id {
                    Some(id) => names.insert(path, id),
                    None => names.remove(&path),
                };
            }
        }

        // Each surviving node under its first name (for the report only).
        let mut named: BTreeMap<NodeId, &Path> = BTreeMap::new();
        for (path, id) in &names {
            named.entry(*id).or_insert(path.as_path());
        }
        for (id, node) in std::mem::take(&mut self.nodes) {
            if let Some(path) = named.get(&id) {
                let image = fates.image(&node, path, &mut report);
                let mut survivor = Node::durable_with(image);
                survivor.link = node.link;
                self.nodes.insert(id, survivor);
            }
        }

        self.live = names.clone();
        self.durable = names;
        self.epoch += 1;
        self.fail_at = None;
        report
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

#[derive(Debug)]
struct SimFile {
    state: Arc<Mutex<State>>,
    node: NodeId,
    /// Identifies this handle as an advisory lock holder.
    handle: u64,
    /// The crash epoch this handle was opened in.
    epoch: u64,
    path: PathBuf,
    writable: bool,
    dsync: bool,
}

impl SimFile {
    /// Locks the state, failing if a crash happened since this handle was opened.
    fn lock(&self) -> io::Result<MutexGuard<'_, State>> {
        let st = self.state.lock();
        if st.epoch != self.epoch {
            return Err(io::Error::other("handle from before the simulated crash"));
        }
        Ok(st)
    }

    /// Locks the state for a mutating call on this file.
    fn lock_mut(&self) -> io::Result<MutexGuard<'_, State>> {
        let mut st = self.lock()?;
        if !self.writable {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        st.begin_mutation()?;
        Ok(st)
    }

    fn write(&self, data: Vec<u8>, offset: u64) -> io::Result<usize> {
        let mut st = self.lock_mut()?;
        let len = data.len();
        if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > MAX_FILE_LEN)
        {
            return Err(io::Error::from_raw_os_error(libc::EFBIG));
        }
        if len == 0 {
            return Ok(0);
        }
        let seq = st.take_seq();
        let node = st.node_mut(self.node)?;
        apply_write(&mut node.written, offset, &data);
        node.pending.push(DataOp::Write {
            offset,
            data,
            forced: self.dsync,
            seq,
        });
        Ok(len)
    }

    fn sync(&self) -> io::Result<()> {
        let mut st = self.lock()?;
        st.begin_mutation()?;
        if st.node_mut(self.node)?.pending.iter().any(DataOp::losable) {
            st.record_sync_point(format!("sync of {}", self.path.display()));
        }
        let node = st.node_mut(self.node)?;
        if !node.pending.is_empty() {
            node.durable = node.written.clone();
            node.pending.clear();
        }
        Ok(())
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut st = self.state.lock();
        if st.epoch != self.epoch {
            return;
        }
        if let Some(node) = st.nodes.get_mut(&self.node) {
            if node.lock_holder == Some(self.handle) {
                node.lock_holder = None;
            }
        }
    }
}

impl VfsFile for SimFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut st = self.lock()?;
        let data = &st.node_mut(self.node)?.written;
        let start = (offset.min(data.len() as u64)) as usize;
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.write(buf.to_vec(), offset)
    }

    fn read_vectored_at(&self, bufs: &mut [IoSliceMut<'_>], offset: u64) -> io::Result<usize> {
        let mut st = self.lock()?;
        let data = &st.node_mut(self.node)?.written;
        let mut pos = (offset.min(data.len() as u64)) as usize;
        let mut total = 0;
        for b in bufs.iter_mut() {
            let n = b.len().min(data.len() - pos);
            b[..n].copy_from_slice(&data[pos..pos + n]);
            pos += n;
            total += n;
            if n < b.len() {
                break;
            }
        }
        Ok(total)
    }

    fn write_vectored_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
        let data: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
        self.write(data, offset)
    }

    fn writeback(&self, _offset: u64, _len: u64) -> io::Result<()> {
        self.lock().map(drop)
    }

    fn sync_all(&self) -> io::Result<()> {
        self.sync()
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut st = self.lock_mut()?;
        if len > MAX_FILE_LEN {
            return Err(io::Error::from_raw_os_error(libc::EFBIG));
        }
        let seq = st.take_seq();
        let node = st.node_mut(self.node)?;
        node.written.resize(len as usize, 0);
        node.pending.push(DataOp::SetLen { len, seq });
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        let mut st = self.lock()?;
        Ok(st.node_mut(self.node)?.written.len() as u64)
    }

    fn try_lock_exclusive(&self) -> io::Result<bool> {
        let mut st = self.lock()?;
        let node = st.node_mut(self.node)?;
        match node.lock_holder {
            Some(h) => Ok(h == self.handle),
            None => {
                node.lock_holder = Some(self.handle);
                Ok(true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Crash seeds per statistical test: with 1/5 per outcome, the chance that one outcome
    /// never shows in this many seeds is (4/5)^200, about 4e-20.
    const SEEDS: u64 = 200;

    const DIR: &str = "/d";

    fn p(name: &str) -> PathBuf {
        Path::new(DIR).join(name)
    }

    /// A file system with `/d/f` holding 16 KiB of 0xAA, synced, name included.
    fn synced_file() -> (SimVfs, Arc<dyn VfsFile>) {
        let vfs = SimVfs::new();
        vfs.create_dir_all(Path::new(DIR)).unwrap();
        let f = vfs.open(&p("f"), OpenOptions::create()).unwrap();
        f.write_at(&[0xAA; 16384], 0).unwrap();
        f.sync_all().unwrap();
        vfs.sync_dir(Path::new(DIR)).unwrap();
        (vfs, f)
    }

    #[test]
    fn synced_data_survives_and_unsynced_writes_take_every_outcome() {
        let mut seen = [0u64; 5];
        for seed in 0..SEEDS {
            let (vfs, f) = synced_file();
            // One un-synced 12 KiB write with tear points at 8 and 12 KiB.
            f.write_at(&[0xBB; 12288], 4096).unwrap();
            let report = vfs.crash(seed);
            let data = vfs.contents(&p("f")).unwrap();
            assert_eq!(data.len(), 16384, "seed {seed}");
            assert!(data[..4096].iter().all(|&b| b == 0xAA), "seed {seed}");
            let region = &data[4096..];
            let counts = [
                report.dropped,
                report.kept,
                report.torn,
                report.sector_torn,
                report.garbaged,
            ];
            assert_eq!(counts.iter().sum::<u64>(), 1, "seed {seed}: {report:?}");
            let fate = report.write_fates[0].1;
            assert_eq!(report.write_fates, vec![(p("f"), fate)], "seed {seed}");
            assert_eq!(report.writes(fate), 1, "seed {seed}");
            if report.dropped == 1 {
                assert!(region.iter().all(|&b| b == 0xAA), "seed {seed}");
                seen[0] += 1;
            } else if report.kept == 1 {
                assert!(region.iter().all(|&b| b == 0xBB), "seed {seed}");
                seen[1] += 1;
            } else if report.torn == 1 {
                let cut = region.iter().position(|&b| b != 0xBB).unwrap() + 4096;
                assert!(cut == 8192 || cut == 12288, "seed {seed}: cut at {cut}");
                assert!(data[cut..].iter().all(|&b| b == 0xAA), "seed {seed}");
                seen[2] += 1;
            } else if report.sector_torn == 1 {
                let cut = region.iter().position(|&b| b != 0xBB).unwrap() + 4096;
                assert!(
                    cut > 4096 && cut < 16384 && cut % 512 == 0,
                    "seed {seed}: cut at {cut}"
                );
                assert!(data[cut..].iter().all(|&b| b == 0xAA), "seed {seed}");
                seen[3] += 1;
            } else {
                for sector in region.chunks(SECTOR as usize) {
                    assert!(
                        sector.iter().any(|&b| b != 0xAA && b != 0xBB),
                        "seed {seed}"
                    );
                }
                seen[4] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n > 0), "outcomes seen: {seen:?}");
    }

    /// A one-page write (4 KiB, aligned) has no 4 KiB tear point but seven sector
    /// boundaries inside: a power cut can keep any whole number of its first sectors.
    #[test]
    fn a_single_page_write_can_be_torn_at_every_sector_boundary() {
        let mut cuts = BTreeSet::new();
        for seed in 0..SEEDS * 2 {
            let (vfs, f) = synced_file();
            f.write_at(&[0xBB; 4096], 8192).unwrap();
            let report = vfs.crash(seed);
            assert_eq!(report.torn, 0, "no 4 KiB point inside: seed {seed}");
            let data = vfs.contents(&p("f")).unwrap();
            let page = &data[8192..12288];
            assert!(data[..8192].iter().all(|&b| b == 0xAA), "seed {seed}");
            assert!(data[12288..].iter().all(|&b| b == 0xAA), "seed {seed}");
            if report.sector_torn == 1 {
                let cut = page.iter().position(|&b| b != 0xBB).unwrap();
                assert!(cut % 512 == 0 && cut > 0, "seed {seed}: cut at {cut}");
                assert!(page[cut..].iter().all(|&b| b == 0xAA), "seed {seed}");
                cuts.insert(cut);
            }
        }
        assert_eq!(cuts, (1..8).map(|i| i * 512).collect::<BTreeSet<_>>());
    }

    #[test]
    fn a_write_smaller_than_a_sector_is_never_torn() {
        for seed in 0..SEEDS {
            let (vfs, f) = synced_file();
            f.write_at(&[0xBB; 300], 1100).unwrap(); // inside sector 1024..1536
            let report = vfs.crash(seed);
            assert_eq!(report.torn + report.sector_torn, 0, "seed {seed}");
        }
    }

    /// The report names the file of every write and the path of every namespace change.
    #[test]
    fn the_report_names_files_and_namespace_changes() {
        let mut undone = 0;
        for seed in 0..SEEDS {
            let (vfs, f) = synced_file();
            vfs.create_dir_all(Path::new("/d/x")).unwrap();
            let g = vfs
                .open(Path::new("/d/x/g"), OpenOptions::create())
                .unwrap();
            g.write_at(&[1; 1024], 0).unwrap();
            f.write_at(&[2; 1024], 0).unwrap();
            drop(f);
            vfs.unlink(&p("f")).unwrap();
            let report = vfs.crash(seed);
            let g_created = report.namespace_changes("create", |q| q.ends_with("x/g"), true);
            let f_back = report.namespace_changes("unlink", |q| q == p("f"), false);
            assert_eq!(report.namespace_fates.len(), 2, "seed {seed}");
            assert_eq!(
                g_created,
                u64::from(vfs.exists(Path::new("/d/x/g")).unwrap())
            );
            assert_eq!(f_back, u64::from(vfs.exists(&p("f")).unwrap()));
            undone += report.namespace_undone;
            // Only writes of files that still have a name are replayed, under that name.
            let files: Vec<&Path> = report
                .write_fates
                .iter()
                .map(|(q, _)| q.as_path())
                .collect();
            let mut want = Vec::new();
            if f_back == 1 {
                want.push(p("f"));
            }
            if g_created == 1 {
                want.push(PathBuf::from("/d/x/g"));
            }
            assert_eq!(files, want.iter().map(|q| q.as_path()).collect::<Vec<_>>());
            let all: u64 = CrashChoice::ALL
                .iter()
                .map(|&c| report.writes_to(|_| true, c))
                .sum();
            assert_eq!(all, want.len() as u64, "seed {seed}");
        }
        assert!(undone > 0);
    }

    /// A duplicate crashes like the original would, and the two share nothing.
    #[test]
    fn a_duplicate_crashes_like_the_original_and_is_independent() {
        for seed in 0..20 {
            let (vfs, f) = synced_file();
            assert!(f.try_lock_exclusive().unwrap());
            f.write_at(&[0xBB; 9000], 3000).unwrap();
            vfs.open(&p("new"), OpenOptions::create()).unwrap();
            let copy = vfs.duplicate();
            let g = copy.open(&p("f"), OpenOptions::read_write()).unwrap();
            assert!(g.try_lock_exclusive().unwrap(), "locks start free");
            g.write_at(&[0xCC; 10], 0).unwrap();
            assert_eq!(
                vfs.contents(&p("f")).unwrap()[0],
                0xAA,
                "the original is untouched"
            );
            drop(g);
            let other = vfs.duplicate();
            let (a, b) = (vfs.crash(seed), other.crash(seed));
            assert_eq!(a, b, "seed {seed}");
            assert_eq!(vfs.contents(&p("f")), other.contents(&p("f")));
            assert_eq!(
                vfs.exists(&p("new")).unwrap(),
                other.exists(&p("new")).unwrap()
            );
        }
    }

    #[test]
    fn synced_data_survives_every_seed_whatever_else_is_pending() {
        for seed in 0..SEEDS {
            let (vfs, f) = synced_file();
            let g = vfs.open(&p("g"), OpenOptions::create()).unwrap();
            g.write_at(&[1; 8192], 0).unwrap();
            f.write_at(&[0xCC; 100], 20000).unwrap(); // beyond the synced length
            vfs.rename(&p("g"), &p("h")).unwrap();
            vfs.crash(seed);
            let data = vfs.contents(&p("f")).unwrap();
            assert!(data[..16384].iter().all(|&b| b == 0xAA), "seed {seed}");
        }
    }

    #[test]
    fn unsynced_length_changes_can_be_kept_or_reverted() {
        let (mut grew, mut shrank, mut truncated, mut untruncated) = (false, false, false, false);
        for seed in 0..SEEDS {
            let (vfs, f) = synced_file();
            // Extension by a write with no 4 KiB tear point inside: dropped means shrunk
            // back; a sector tear keeps whole sectors of it.
            f.write_at(&[0xBB; 4096], 16384).unwrap();
            let report = vfs.crash(seed);
            let len = vfs.contents(&p("f")).unwrap().len();
            match len {
                16384 => {
                    assert_eq!(report.dropped, 1, "seed {seed}");
                    shrank = true;
                }
                20480 => grew = true,
                16385..20480 if len % 512 == 0 => assert_eq!(report.sector_torn, 1),
                _ => panic!("seed {seed}: length {len}"),
            }

            let (vfs, f) = synced_file();
            f.set_len(4096).unwrap();
            let report = vfs.crash(seed);
            let data = vfs.contents(&p("f")).unwrap();
            assert!(data.iter().all(|&b| b == 0xAA), "seed {seed}");
            match data.len() {
                4096 => truncated |= report.len_changes_kept == 1,
                16384 => untruncated |= report.len_changes_reverted == 1,
                len => panic!("seed {seed}: length {len}"),
            }
        }
        assert!(grew && shrank && truncated && untruncated);
    }

    #[test]
    fn later_writes_overlay_earlier_ones_and_dsync_writes_survive() {
        for seed in 0..SEEDS {
            let (vfs, _f) = synced_file();
            let d = vfs
                .open(
                    &p("f"),
                    OpenOptions {
                        dsync: true,
                        ..OpenOptions::read_write()
                    },
                )
                .unwrap();
            let f = vfs.open(&p("f"), OpenOptions::read_write()).unwrap();
            f.write_at(&[1; 4096], 0).unwrap();
            d.write_at(&[2; 4096], 0).unwrap();
            vfs.crash(seed);
            let data = vfs.contents(&p("f")).unwrap();
            assert!(data[..4096].iter().all(|&b| b == 2), "seed {seed}");
        }
    }

    #[test]
    fn a_create_without_sync_dir_can_vanish_and_with_it_never_does() {
        let (mut vanished, mut stayed) = (false, false);
        for seed in 0..SEEDS {
            for sync_dir in [false, true] {
                let vfs = SimVfs::new();
                vfs.create_dir_all(Path::new(DIR)).unwrap();
                let f = vfs.open(&p("new"), OpenOptions::create()).unwrap();
                f.write_at(b"hello", 0).unwrap();
                f.sync_all().unwrap();
                if sync_dir {
                    vfs.sync_dir(Path::new(DIR)).unwrap();
                }
                let report = vfs.crash(seed);
                match vfs.contents(&p("new")) {
                    None => {
                        assert!(!sync_dir, "seed {seed}: a synced create vanished");
                        assert_eq!(report.namespace_undone, 1);
                        vanished = true;
                    }
                    Some(data) => {
                        assert_eq!(data, b"hello", "seed {seed}");
                        stayed |= !sync_dir;
                    }
                }
                assert_eq!(
                    vfs.exists(&p("new")).unwrap(),
                    vfs.contents(&p("new")).is_some()
                );
            }
        }
        assert!(vanished && stayed);
    }

    #[test]
    fn a_rename_without_sync_dir_can_be_undone_and_with_it_never_is() {
        let (mut undone, mut kept) = (false, false);
        for seed in 0..SEEDS {
            for sync_dir in [false, true] {
                let vfs = SimVfs::new();
                vfs.create_dir_all(Path::new(DIR)).unwrap();
                vfs.set_contents(&p("target"), b"old".to_vec());
                let f = vfs.open(&p("tmp"), OpenOptions::create()).unwrap();
                f.write_at(b"new", 0).unwrap();
                f.sync_all().unwrap();
                vfs.sync_dir(Path::new(DIR)).unwrap();
                vfs.rename(&p("tmp"), &p("target")).unwrap();
                if sync_dir {
                    vfs.sync_dir(Path::new(DIR)).unwrap();
                }
                vfs.crash(seed);
                let tmp = vfs.contents(&p("tmp"));
                let target = vfs.contents(&p("target")).unwrap();
                if target == b"old" {
                    assert!(!sync_dir, "seed {seed}: a synced rename was undone");
                    assert_eq!(tmp.as_deref(), Some(&b"new"[..]), "seed {seed}");
                    undone = true;
                } else {
                    assert_eq!(target, b"new", "seed {seed}");
                    assert_eq!(tmp, None, "seed {seed}");
                    kept |= !sync_dir;
                }
            }
        }
        assert!(undone && kept);
    }

    /// A symbolic link is a name like a file's: without a `sync_dir` of its parent a
    /// crash can undo it, leaving the target and the file made through it in place but
    /// unreachable by the link; with one it always survives, and so does a file made
    /// through it once the target directory (reached through the link) is synced.
    #[test]
    fn a_symlink_without_sync_dir_can_vanish_and_with_it_never_does() {
        let (mut vanished, mut stayed) = (false, false);
        for seed in 0..SEEDS {
            for sync_dir in [false, true] {
                let vfs = SimVfs::new();
                vfs.create_dir_all(Path::new(DIR)).unwrap();
                vfs.create_dir_all(Path::new("/ts")).unwrap();
                vfs.symlink(Path::new("/ts"), &p("link")).unwrap();
                if sync_dir {
                    vfs.sync_dir(Path::new(DIR)).unwrap();
                }
                let f = vfs.open(&p("link/f"), OpenOptions::create()).unwrap();
                f.write_at(b"data", 0).unwrap();
                f.sync_all().unwrap();
                vfs.sync_dir(&p("link")).unwrap();
                assert_eq!(vfs.contents(Path::new("/ts/f")).unwrap(), b"data");
                let report = vfs.crash(seed);
                assert_eq!(
                    vfs.contents(Path::new("/ts/f")).unwrap(),
                    b"data",
                    "seed {seed}: the target was synced"
                );
                match vfs.read_link(&p("link")) {
                    Ok(target) => {
                        assert_eq!(target, Path::new("/ts"));
                        assert_eq!(vfs.contents(&p("link/f")).unwrap(), b"data");
                        stayed |= !sync_dir;
                    }
                    Err(e) => {
                        assert_eq!(e.kind(), io::ErrorKind::NotFound, "seed {seed}");
                        assert!(!sync_dir, "seed {seed}: a synced link vanished");
                        assert_eq!(
                            report.namespace_changes("symlink", |q| q == p("link"), false),
                            1
                        );
                        assert!(vfs.contents(&p("link/f")).is_none());
                        vanished = true;
                    }
                }
                assert_replay_gives_written(&vfs);
            }
        }
        assert!(vanished && stayed);
    }

    #[test]
    fn an_unlink_without_sync_dir_can_be_undone() {
        let (mut back, mut gone) = (false, false);
        for seed in 0..SEEDS {
            let (vfs, f) = synced_file();
            drop(f);
            vfs.unlink(&p("f")).unwrap();
            vfs.crash(seed);
            match vfs.contents(&p("f")) {
                Some(data) => {
                    assert!(data == vec![0xAA; 16384], "seed {seed}");
                    back = true;
                }
                None => gone = true,
            }
        }
        assert!(back && gone);
    }

    #[test]
    fn reads_after_a_crash_see_the_new_state_and_old_handles_fail() {
        let (vfs, f) = synced_file();
        assert!(f.try_lock_exclusive().unwrap());
        f.write_at(&[0xBB; 12288], 4096).unwrap();
        vfs.crash(7);
        let want = vfs.contents(&p("f")).unwrap();

        let g = vfs.open(&p("f"), OpenOptions::read_write()).unwrap();
        assert!(
            g.try_lock_exclusive().unwrap(),
            "the crash released the lock"
        );
        let mut got = vec![0; want.len() + 10];
        assert_eq!(g.read_at(&mut got, 0).unwrap(), want.len());
        assert_eq!(&got[..want.len()], &want[..]);
        assert_eq!(g.len().unwrap(), want.len() as u64);
        // A second crash with nothing pending changes nothing.
        drop(g);
        assert_eq!(vfs.crash(8), CrashReport::default());
        assert_eq!(vfs.contents(&p("f")).unwrap(), want);

        let stale = |r: io::Result<()>| {
            let e = r.unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::Other);
            assert!(e.to_string().contains("before the simulated crash"), "{e}");
        };
        let mut buf = [0u8; 16];
        stale(f.read_at(&mut buf, 0).map(drop));
        stale(
            f.read_vectored_at(&mut [IoSliceMut::new(&mut buf)], 0)
                .map(drop),
        );
        stale(f.write_at(&buf, 0).map(drop));
        stale(f.write_vectored_at(&[IoSlice::new(&buf)], 0).map(drop));
        stale(f.writeback(0, 16));
        stale(f.sync_all());
        stale(f.sync_data());
        stale(f.set_len(0));
        stale(f.len().map(drop));
        stale(f.try_lock_exclusive().map(drop));
    }

    #[test]
    fn crash_after_n_fails_the_next_mutating_call() {
        let vfs = SimVfs::new();
        vfs.create_dir_all(Path::new(DIR)).unwrap();
        vfs.crash_after(3);
        let f = vfs.open(&p("f"), OpenOptions::create()).unwrap(); // 1
        f.write_at(b"abc", 0).unwrap(); // 2
        f.sync_data().unwrap(); // 3
        let e = f.write_at(b"xyz", 0).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        assert_eq!(
            vfs.sync_dir(Path::new(DIR)).unwrap_err().raw_os_error(),
            Some(libc::EIO)
        );
        assert!(vfs.open(&p("g"), OpenOptions::create()).is_err());
        let mut buf = [0u8; 3];
        assert_eq!(f.read_at(&mut buf, 0).unwrap(), 3, "reads still work");
        assert_eq!(&buf, b"abc", "the refused write had no effect");
        assert_eq!(vfs.io_count(), 3);

        vfs.crash(0); // clears the limit
        let f = vfs.open(&p("f"), OpenOptions::create()).unwrap();
        let before = vfs.io_count();
        f.write_at(b"xyz", 0).unwrap();
        assert_eq!(vfs.io_count(), before + 1);
    }

    /// The write-temp, fsync, rename, fsync-directory protocol, crashed after every I/O
    /// and with several seeds each: the target is always the complete old or new content.
    #[test]
    fn crash_after_every_io_of_an_atomic_replace() {
        fn workload(vfs: &SimVfs) -> io::Result<()> {
            let f = vfs.open(&p("meta.tmp"), OpenOptions::create())?;
            f.set_len(0)?;
            f.write_at(&[b'N'; 6000], 0)?;
            f.sync_all()?;
            drop(f);
            vfs.rename(&p("meta.tmp"), &p("meta"))?;
            vfs.sync_dir(Path::new(DIR))
        }
        let setup = || {
            let vfs = SimVfs::new();
            vfs.create_dir_all(Path::new(DIR)).unwrap();
            vfs.set_contents(&p("meta"), vec![b'O'; 5000]);
            vfs
        };
        let vfs = setup();
        workload(&vfs).unwrap();
        let total = vfs.io_count();
        assert_eq!(total, 6);
        for n in 0..=total {
            for seed in 0..16 {
                let vfs = setup();
                vfs.crash_after(n);
                assert_eq!(workload(&vfs).is_ok(), n == total);
                vfs.crash(seed);
                let meta = vfs.contents(&p("meta")).unwrap();
                assert!(
                    meta == vec![b'O'; 5000] || meta == vec![b'N'; 6000],
                    "crash after {n} calls, seed {seed}"
                );
                if n == total {
                    assert_eq!(meta, vec![b'N'; 6000]);
                }
            }
        }
    }

    /// Checks the module invariant: the pending changes, all kept, turn the durable state
    /// into the written one.
    fn assert_replay_gives_written(vfs: &SimVfs) {
        let st = vfs.state.lock();
        let mut names = st.durable.clone();
        for op in &st.pending_ns {
            for (path, id) in &op.entries {
                match id {
                    Some(id) => names.insert(path.clone(), *id),
                    None => names.remove(path),
                };
            }
        }
        assert_eq!(names, st.live);
        for (id, node) in &st.nodes {
            let mut image = node.durable.clone();
            for op in &node.pending {
                match op {
                    DataOp::Write { offset, data, .. } => apply_write(&mut image, *offset, data),
                    DataOp::SetLen { len, .. } => image.resize(*len as usize, 0),
                }
            }
            assert_eq!(image, node.written, "node {id}");
        }
    }

    #[test]
    fn pending_changes_all_kept_give_the_written_state() {
        let (vfs, f) = synced_file();
        vfs.create_dir_all(Path::new("/e")).unwrap();
        f.set_len(100).unwrap();
        f.write_at(&[3; 5000], 9000).unwrap();
        f.write_vectored_at(&[IoSlice::new(&[4; 10]), IoSlice::new(&[5; 7000])], 50)
            .unwrap();
        let g = vfs.open(&p("g"), OpenOptions::create()).unwrap();
        g.write_at(b"g", 0).unwrap();
        vfs.rename(&p("g"), Path::new("/e/g")).unwrap();
        vfs.sync_dir(Path::new("/e")).unwrap(); // half of the rename is durable
        vfs.unlink(&p("f")).unwrap();
        f.write_at(&[6; 10], 0).unwrap(); // an unlinked open file stays writable
        vfs.set_contents(&p("h"), b"h".to_vec());
        assert_replay_gives_written(&vfs);
        assert_eq!(vfs.list_dir(Path::new(DIR)).unwrap(), vec!["h".to_string()]);
        assert_eq!(vfs.contents(Path::new("/e/g")).unwrap(), b"g");
        vfs.crash(3);
        assert_replay_gives_written(&vfs);
        assert_eq!(vfs.contents(&p("h")).unwrap(), b"h");
        assert!(
            vfs.exists(Path::new("/e/g")).unwrap(),
            "its directory was synced"
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_crash() {
        let run = |seed| {
            let (vfs, f) = synced_file();
            for i in 0..8u8 {
                f.write_at(&[i; 5000], u64::from(i) * 3000).unwrap();
            }
            vfs.open(&p("x"), OpenOptions::create()).unwrap();
            let report = vfs.crash(seed);
            (report, vfs.contents(&p("f")), vfs.exists(&p("x")).unwrap())
        };
        for seed in 0..20 {
            assert_eq!(run(seed), run(seed));
        }
    }

    /// Every prefix of the pending changes, in program order across files and the
    /// namespace, is a state `crash_prefix` produces, and nothing else is.
    #[test]
    fn crash_prefix_keeps_exactly_the_first_changes_in_program_order() {
        let setup = || {
            let (vfs, f) = synced_file();
            f.write_at(&[1; 512], 0).unwrap(); // change 1
            let g = vfs.open(&p("g"), OpenOptions::create()).unwrap(); // change 2
            f.set_len(20000).unwrap(); // change 3
            g.write_at(b"gg", 0).unwrap(); // change 4
            let dsync = OpenOptions {
                dsync: true,
                ..OpenOptions::create()
            };
            let d = vfs.open(&p("d"), dsync).unwrap(); // change 5 (its write is O_DSYNC)
            d.write_at(b"d", 0).unwrap();
            vfs
        };
        assert_eq!(setup().losable_changes(), 5);
        for keep in 0..=6u64 {
            let vfs = setup();
            let report = vfs.crash_prefix(keep);
            let f = vfs.contents(&p("f")).unwrap();
            assert_eq!(f[0] == 1, keep >= 1, "keep {keep}");
            assert_eq!(vfs.exists(&p("g")).unwrap(), keep >= 2, "keep {keep}");
            assert_eq!(
                f.len(),
                if keep >= 3 { 20000 } else { 16384 },
                "keep {keep}"
            );
            if keep >= 2 {
                let g = vfs.contents(&p("g")).unwrap();
                assert_eq!(
                    g,
                    if keep >= 4 { b"gg".to_vec() } else { vec![] },
                    "keep {keep}"
                );
            }
            // The O_DSYNC write survives wherever its file's name does.
            assert_eq!(
                vfs.contents(&p("d")).map(|d| d == b"d"),
                (keep >= 5).then_some(true)
            );
            assert_eq!(
                report.namespace_kept,
                u64::from(keep >= 2) + u64::from(keep >= 5)
            );
            assert_replay_gives_written(&vfs);
        }
    }

    /// A sync that makes something durable records the state just before it; a sync with
    /// nothing pending, or before recording starts, records nothing.
    #[test]
    fn sync_points_hold_the_state_before_each_sync() {
        let (vfs, f) = synced_file();
        f.write_at(&[1; 10], 0).unwrap();
        f.sync_data().unwrap(); // not recording yet
        vfs.record_sync_points();
        f.write_at(&[2; 10], 0).unwrap();
        f.write_at(&[3; 10], 4096).unwrap();
        let before = vfs.io_count();
        f.sync_data().unwrap();
        f.sync_data().unwrap(); // nothing pending
        vfs.open(&p("n"), OpenOptions::create()).unwrap();
        vfs.sync_dir(Path::new(DIR)).unwrap();
        let points = vfs.take_sync_points();
        assert_eq!(points.len(), 2, "{points:?}");
        assert_eq!(points[0].io_count, before);
        assert_eq!(points[0].changes, 2);
        assert_eq!(points[1].changes, 1);
        assert!(points[1].what.starts_with("sync_dir"), "{}", points[1].what);
        let mut seen = Vec::new();
        for keep in 0..=points[0].changes {
            let copy = points[0].vfs.duplicate();
            copy.crash_prefix(keep);
            let f = copy.contents(&p("f")).unwrap();
            seen.push((f[0], f[4096]));
        }
        assert_eq!(seen, vec![(1, 0xAA), (2, 0xAA), (2, 3)]);
        assert!(vfs.take_sync_points().is_empty(), "taken");
    }
}
