//! Storage manager: relation files in segments under tablespace directories.
//!
//! Owns: the data directory (its lock and metadata files), open segment files (one handle
//! each, plus an O_DSYNC one opened by the first durable write to the segment), the cached
//! size of each relation fork, the fsync request queue, and writeback contexts
//! (`writeback.rs`: sorted, merged sync_file_range hints for a writer's recent writes).
//! Layout: `<dir>/base/<tablespace>/<relation><fork suffix>[.<segno>]`, PostgreSQL's naming
//! (a created tablespace's directory is a link to its location: `tablespace.rs`);
//! fork suffixes `_fsm`, `_vm`, `_init`; segment 0 has no number. The bgwriter's device
//! probe writes a scratch file for a moment (`probe.rs`: `<dir>/bufpool_device_probe.tmp`,
//! or in a created tablespace's location). Each segment holds
//! `segment_blocks` pages; a fork's size is the full segments plus the last one's pages.
//! Invariants: this process is the only one with the directory open (flock on
//! `bufpool.lock`), so the cached fork sizes are exact; every write registers an fsync
//! request for its segment unless it went through an O_DSYNC handle (`writev_durable`, for
//! the checkpointer and bgwriter; or any write with `SmgrOptions::dsync`), which makes it
//! durable on return; every error names the path, the block and the OS error.
//! A segment's O_DSYNC handle lives in the same entry of its fork's handle list as the
//! normal one, so truncate, unlink and create, which trim or clear that list, drop both: no
//! handle to a segment truncated or unlinked away stays cached. Durable writes never create
//! a segment (extension is buffered and registers its fsync as always).
//! Directory entries: a file's creation or removal is durable only once its directory is
//! fsynced. `create` (segment 0) and `unlink` fsync the directory before returning; a
//! segment created by extension or unlinked by `truncate` registers its directory in the
//! fsync queue, and `sync` (at every checkpoint, before the checkpoint record) fsyncs it,
//! so a checkpoint never relies on a name a power cut can still take back. `unlink`
//! removes every segment file of the fork (listing the directory, so a gap left by a
//! crash cannot hide later ones), segment 0 last and only after the others' removal is
//! durable: no crash leaves later segments of a fork whose segment 0 is gone. A segment
//! file found past the fork's end when extension reaches it (a leftover no crash-free
//! history produces) is emptied before use, so its old pages can never count as the
//! fork's. A failed directory fsync is latched like a failed file fsync.
//! Locks: `forks` (RwLock, map of open forks) → one fork's `segments` (RwLock) → its
//! `extend_lock` is taken only by extend/truncate/unlink, before `segments`. No lock is held
//! across a read or write system call except a fork's extend lock during extension; a
//! segment's handles are opened under its fork's `segments` write lock (once per handle).
//!
//! Files: `mod.rs` (this one): the [`Smgr`], opening the directory, the open-fork map and
//! segment handles; `io.rs`: page reads and writes (plain, vectored, durable); `size.rs`:
//! create, size, extend, truncate, unlink; `durability.rs`: the fsync queue drained,
//! writeback hints, slow-device notes; `fsync.rs`: the queue itself; `dir.rs`: the
//! directory's lock and metadata; `tablespace.rs`, `writeback.rs`, `probe.rs`, `error.rs`.

mod dir;
mod durability;
mod error;
mod fsync;
mod io;
mod probe;
mod size;
mod tablespace;
mod writeback;

use error::file_err;
pub use error::TablespaceError;
pub use error::{SmgrError, SmgrResult};
pub use fsync::SegmentId;
pub use probe::{DeviceProbe, PROBE_FILE};
pub(crate) use probe::{FAST_PAGES_PER_SEC, PROBE_ROUNDS};
pub use tablespace::DEFAULT_TABLESPACE;
pub use writeback::{Device, HintedOnce, WritebackContext};

/// An fsync of one segment at a checkpoint that takes this long or longer says the device
/// is not keeping up with the dirty pages the page cache holds for it: the bgwriter then
/// hints every write to that file's tablespace again (`bgwriter_flush_once`). On slow10
/// (10 MB/s) with TPC-B at scale 20, hinting once per cycle made the longest fsync
/// 0.9-1.4 s (every write: 0.1-0.4 s); on a fast local disk it stays in milliseconds.
pub(crate) const SLOW_SYNC: std::time::Duration = std::time::Duration::from_millis(500);

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::stats::{IoOp, IoStats};
use crate::sync::{Arc, AtomicU32, AtomicU64, Mutex, RwLock};
use crate::types::{BlockNumber, BufferTag, ForkNumber, RelFileId, MAX_BLOCK_NUMBER};
use crate::vfs::{OpenOptions, Vfs, VfsFile};

/// Hasher for the open-fork map: the key is a few integers chosen by us, not by an
/// adversary, so a multiply-xorshift mix replaces SipHash (which showed in miss profiles).
#[derive(Default, Clone, Copy)]
struct ForkHasher(u64);

impl std::hash::Hasher for ForkHasher {
    fn finish(&self) -> u64 {
        let mut k = self.0;
        k ^= k >> 33;
        k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
        k ^ (k >> 33)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u8(b);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(23) ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

type ForkMap =
    HashMap<(RelFileId, ForkNumber), Arc<Fork>, std::hash::BuildHasherDefault<ForkHasher>>;

/// Where one page is overwritten: see [`Smgr::page_target`].
#[derive(Debug, Clone)]
pub struct PageTarget {
    /// The segment file holding the page.
    pub file: Arc<dyn VfsFile>,
    /// The page's offset in that file, in bytes.
    pub offset: u64,
    tag: BufferTag,
    segno: u32,
}

/// Marks a fork size as not yet known.
const NBLOCKS_UNKNOWN: u32 = u32::MAX;

/// What one [`Smgr::sync_each`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Segment files fsynced.
    pub files: usize,
    /// Their fsyncs' total and longest time.
    pub total: Duration,
    /// The longest single fsync.
    pub longest: Duration,
}

/// How to open a data directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmgrOptions {
    /// Page size for a new directory; an existing one must match what it was created with.
    pub block_size: usize,
    /// Segment size for a new directory; an existing one must match.
    pub segment_size: u64,
    /// The WAL's segment size, recorded in a new directory's metadata; an existing one
    /// that recorded it must match. None: not recorded or checked (no log above).
    pub wal_segment_size: Option<u64>,
    /// Create the directory if it has no metadata file yet.
    pub create: bool,
    /// Open data files with O_DIRECT.
    pub direct: bool,
    /// Open data files with O_DSYNC (every write durable; no fsync requests). For durable
    /// writes by some writers only, keep this off and use `Smgr::writev_durable`.
    pub dsync: bool,
}

/// The open handles of one segment file.
#[derive(Debug)]
struct SegmentFiles {
    /// Reads, buffered writes, extension, writeback hints and fsync go through this one.
    file: Arc<dyn VfsFile>,
    /// A second handle of the same file opened O_DSYNC, for `writev_durable`; opened on
    /// its first use. It sits in the same entry as `file`, so whatever drops a segment's
    /// handle (truncate, unlink, create) drops this one with it.
    durable: Option<Arc<dyn VfsFile>>,
}

impl SegmentFiles {
    fn new(file: Arc<dyn VfsFile>) -> Self {
        Self {
            file,
            durable: None,
        }
    }

    /// The handle a durable write goes through, if it is open: `file` itself when every
    /// data file is O_DSYNC (`all_dsync`), else the O_DSYNC twin.
    fn durable_handle(&self, all_dsync: bool) -> Option<Arc<dyn VfsFile>> {
        if all_dsync {
            Some(self.file.clone())
        } else {
            self.durable.clone()
        }
    }
}

/// How `writev_op` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteKind {
    /// Over existing blocks, through the buffered handle; registers an fsync request.
    Overwrite,
    /// At the fork's end, creating segments as needed; registers an fsync request.
    Extend,
    /// Over existing blocks, through the O_DSYNC handle: durable on return, no request.
    Durable,
}

impl WriteKind {
    fn op(self) -> IoOp {
        match self {
            WriteKind::Extend => IoOp::Extend,
            WriteKind::Overwrite | WriteKind::Durable => IoOp::Write,
        }
    }
}

#[derive(Debug)]
struct Fork {
    /// Segment `n`'s handles at index `n`; segments are opened in order, so the vector is
    /// a prefix of the fork's segments.
    segments: RwLock<Vec<SegmentFiles>>,
    nblocks: AtomicU32,
    extend_lock: Mutex<()>,
}

/// The storage manager of one open data directory.
#[derive(Debug)]
pub struct Smgr {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    block_size: usize,
    segment_blocks: u32,
    direct: bool,
    dsync: bool,
    forks: RwLock<ForkMap>,
    sync_queue: fsync::SyncQueue,
    /// Completed `sync_each` calls (every pending file fsynced): writers that remember
    /// what they hinted since the last one ([`HintedOnce`]) read it.
    syncs_done: AtomicU64,
    /// The tablespaces one of whose files took `SLOW_SYNC` or more to fsync, with the
    /// device each is on (None if the file system cannot tell).
    slow_tablespaces: Mutex<Vec<(u32, Option<u64>)>>,
    /// The device probes taken so far, one per device: (device, the tablespace it was
    /// taken for, what it measured).
    probes: Mutex<Vec<(u64, u32, DeviceProbe)>>,
    stats: Arc<IoStats>,
    _lock: Arc<dyn VfsFile>,
}

impl Smgr {
    /// Opens (or with `opts.create`, creates) a data directory. Every call to `vfs` goes
    /// through the panic fence ([`crate::vfs::fenced`]).
    pub fn open(vfs: Arc<dyn Vfs>, dir: &Path, opts: SmgrOptions) -> SmgrResult<Smgr> {
        let vfs = crate::vfs::fenced(vfs);
        let exists = vfs
            .exists(&dir.join(dir::META_FILE))
            .map_err(file_err("checking", dir))?;
        if !exists {
            if !opts.create {
                return Err(SmgrError::Directory {
                    dir: dir.to_path_buf(),
                    problem: "is not a bufpool data directory (no bufpool.meta); create it first"
                        .into(),
                });
            }
            vfs.create_dir_all(&dir.join("base"))
                .map_err(file_err("creating", dir))?;
        }
        let lock = dir::lock_directory(&*vfs, dir)?;
        dir::check_mode(&*vfs, dir)?;
        let meta = if exists {
            let meta = dir::read_meta(&*vfs, dir)?;
            if meta.block_size != opts.block_size || meta.segment_size != opts.segment_size {
                return Err(SmgrError::Directory {
                    dir: dir.to_path_buf(),
                    problem: format!(
                        "was created with block_size={} and segment_size={}, but the \
                         configuration asks for block_size={} and segment_size={}; these are \
                         fixed at creation",
                        meta.block_size, meta.segment_size, opts.block_size, opts.segment_size
                    ),
                });
            }
            if let (Some(was), Some(asked)) = (meta.wal_segment_size, opts.wal_segment_size) {
                if was != asked {
                    return Err(SmgrError::Directory {
                        dir: dir.to_path_buf(),
                        problem: format!(
                            "was created with wal_segment_size={was}, but the configuration \
                             asks for wal_segment_size={asked}; it is fixed at creation (the \
                             log cannot be read with another segment size)"
                        ),
                    });
                }
            }
            meta
        } else {
            let meta = dir::Meta {
                block_size: opts.block_size,
                segment_size: opts.segment_size,
                wal_segment_size: opts.wal_segment_size,
            };
            dir::write_meta(&*vfs, dir, &meta)?;
            vfs.sync_dir(dir)
                .map_err(file_err("fsync of directory", dir))?;
            meta
        };
        // The layout every offset computation relies on: whole pages per segment.
        debug_assert!(
            meta.block_size > 0
                && meta.segment_size % meta.block_size as u64 == 0
                && meta.segment_size / meta.block_size as u64 >= 1
                && meta.segment_size / meta.block_size as u64 <= u64::from(u32::MAX),
            "segment size {} is not a whole number (1 to 2^32 - 1) of {}-byte pages",
            meta.segment_size,
            meta.block_size
        );
        let smgr = Smgr {
            vfs,
            dir: dir.to_path_buf(),
            block_size: meta.block_size,
            segment_blocks: (meta.segment_size / meta.block_size as u64) as u32,
            direct: opts.direct,
            dsync: opts.dsync,
            forks: RwLock::new(ForkMap::default()),
            sync_queue: fsync::SyncQueue::default(),
            syncs_done: AtomicU64::new(0),
            slow_tablespaces: Mutex::new(Vec::new()),
            probes: Mutex::new(Vec::new()),
            stats: Arc::new(IoStats::new()),
            _lock: lock,
        };
        smgr.remove_probe_leftovers()?;
        Ok(smgr)
    }

    /// The data directory's path.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// The page size, in bytes.
    pub fn block_size(&self) -> usize {
        self.block_size
    }
    /// Whether the data files are opened O_DIRECT (`io_direct`): a write reaches the device
    /// before it returns, and writeback hints have nothing to do.
    pub fn direct_io(&self) -> bool {
        self.direct
    }
    /// Pages per segment file.
    pub fn segment_blocks(&self) -> u32 {
        self.segment_blocks
    }
    /// The file system the data files are reached through.
    pub fn vfs(&self) -> &Arc<dyn Vfs> {
        &self.vfs
    }
    /// The I/O counters this storage manager (and the pool above it) record into.
    pub fn stats(&self) -> &Arc<IoStats> {
        &self.stats
    }

    /// Directory of a tablespace.
    pub fn tablespace_dir(&self, tablespace: u32) -> PathBuf {
        self.dir.join("base").join(tablespace.to_string())
    }

    /// Path of one segment file.
    pub fn segment_path(&self, rel: RelFileId, fork: ForkNumber, segno: u32) -> PathBuf {
        let mut name = format!("{}{}", rel.relation, fork.suffix());
        if segno > 0 {
            name.push_str(&format!(".{segno}"));
        }
        self.tablespace_dir(rel.tablespace).join(name)
    }

    fn open_options(&self) -> OpenOptions {
        OpenOptions {
            direct: self.direct,
            dsync: self.dsync,
            ..OpenOptions::read_write()
        }
    }

    fn fork(&self, rel: RelFileId, fork: ForkNumber) -> Arc<Fork> {
        if let Some(f) = self.forks.read().get(&(rel, fork)) {
            return f.clone();
        }
        self.forks
            .write()
            .entry((rel, fork))
            .or_insert_with(|| {
                Arc::new(Fork {
                    segments: RwLock::new(Vec::new()),
                    nblocks: AtomicU32::new(NBLOCKS_UNKNOWN),
                    extend_lock: Mutex::new(()),
                })
            })
            .clone()
    }

    /// The open segment `segno`, opening it (and those before it) if needed. With `create`,
    /// missing segments are created (extension); otherwise a missing file is an error.
    fn segment(
        &self,
        f: &Fork,
        rel: RelFileId,
        fork: ForkNumber,
        segno: u32,
        create: bool,
    ) -> SmgrResult<Arc<dyn VfsFile>> {
        if let Some(s) = f.segments.read().get(segno as usize) {
            return Ok(s.file.clone());
        }
        let mut segs = f.segments.write();
        self.open_segments(&mut segs, rel, fork, segno, create)?;
        Ok(segs[segno as usize].file.clone())
    }

    /// The O_DSYNC handle of segment `segno` (opening the segment, and those before it,
    /// first if needed; a missing file is an error: this path never creates a segment).
    /// With `SmgrOptions::dsync` every handle is O_DSYNC and the normal one is returned.
    fn durable_segment(
        &self,
        f: &Fork,
        rel: RelFileId,
        fork: ForkNumber,
        segno: u32,
    ) -> SmgrResult<Arc<dyn VfsFile>> {
        if let Some(s) = f.segments.read().get(segno as usize) {
            if let Some(d) = s.durable_handle(self.dsync) {
                return Ok(d);
            }
        }
        // Opened under the write lock: a truncate or unlink (which trims the vector under
        // it) either comes before, and the file opened here is the live one, or after, and
        // drops the handle cached here.
        let mut segs = f.segments.write();
        self.open_segments(&mut segs, rel, fork, segno, false)?;
        let seg = &mut segs[segno as usize];
        if let Some(d) = seg.durable_handle(self.dsync) {
            return Ok(d);
        }
        let path = self.segment_path(rel, fork, segno);
        let opts = OpenOptions {
            dsync: true,
            ..self.open_options()
        };
        debug_assert!(!opts.create && !opts.create_new);
        let durable = self
            .vfs
            .open(&path, opts)
            .map_err(file_err("opening (O_DSYNC)", &path))?;
        seg.durable = Some(durable.clone());
        Ok(durable)
    }

    /// Opens segments `segs.len()..=segno` into `segs`, the fork's write-locked segment
    /// list. With `create`, missing segments are created (extension); otherwise a missing
    /// file is an error.
    fn open_segments(
        &self,
        segs: &mut Vec<SegmentFiles>,
        rel: RelFileId,
        fork: ForkNumber,
        segno: u32,
        create: bool,
    ) -> SmgrResult<()> {
        while segs.len() <= segno as usize {
            let n = segs.len() as u32;
            let path = self.segment_path(rel, fork, n);
            let mut opts = self.open_options();
            opts.create = create;
            // With `create` (extension), a segment not open yet lies past the fork's end:
            // segments up to the last counted one were opened when the size was counted.
            let existed = create
                && self
                    .vfs
                    .exists(&path)
                    .map_err(file_err("checking", &path))?;
            let file = self
                .vfs
                .open(&path, opts)
                .map_err(file_err("opening", &path))?;
            if create {
                if existed && file.len().map_err(file_err("reading size of", &path))? > 0 {
                    // A leftover past the fork's end: its pages are not the fork's.
                    file.set_len(0)
                        .map_err(file_err("emptying leftover", &path))?;
                    self.sync_queue.register(SegmentId {
                        rel,
                        fork,
                        segno: n,
                    });
                }
                self.sync_queue
                    .register_dir(self.tablespace_dir(rel.tablespace));
            }
            segs.push(SegmentFiles::new(file));
        }
        Ok(())
    }

    /// fsyncs a directory now; a failure is latched (every later `sync` reports it).
    fn sync_dir(&self, dir: &Path) -> SmgrResult<()> {
        self.vfs.sync_dir(dir).map_err(|source| {
            self.sync_queue.latch(dir.to_path_buf(), source.to_string());
            SmgrError::Fsync {
                path: dir.to_path_buf(),
                source,
            }
        })
    }

    /// Segment numbers of the files of a fork present on disk, gaps included (from a
    /// listing of its tablespace directory), highest first.
    fn segment_files(&self, rel: RelFileId, fork: ForkNumber) -> SmgrResult<Vec<u32>> {
        let ts = self.tablespace_dir(rel.tablespace);
        let base = format!("{}{}", rel.relation, fork.suffix());
        let mut segnos: Vec<u32> = self
            .vfs
            .list_dir(&ts)
            .map_err(file_err("listing", &ts))?
            .iter()
            .filter_map(|name| {
                let rest = name.strip_prefix(&base)?;
                if rest.is_empty() {
                    return Some(0);
                }
                rest.strip_prefix('.')?
                    .parse()
                    .ok()
                    .filter(|&n: &u32| n > 0)
            })
            .collect();
        segnos.sort_unstable_by(|a, b| b.cmp(a));
        Ok(segnos)
    }

    fn locate(&self, block: BlockNumber) -> (u32, u64) {
        debug_assert!(
            block <= MAX_BLOCK_NUMBER,
            "block {block} is not a valid block number"
        );
        let segno = block / self.segment_blocks;
        let off = u64::from(block % self.segment_blocks) * self.block_size as u64;
        (segno, off)
    }
}

#[cfg(test)]
mod tests;
