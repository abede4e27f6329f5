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

mod dir;
mod error;
mod fsync;
mod probe;
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
use std::io::{IoSlice, IoSliceMut};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::stats::{IoContext, IoOp, IoStats};
use crate::sync::{Arc, AtomicU32, AtomicU64, Mutex, Ordering, RwLock};
use crate::types::{BlockNumber, BufferTag, ForkNumber, RelFileId, MAX_BLOCK_NUMBER};
use crate::vfs::{IoError, OpenOptions, Vfs, VfsFile};

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

    /// Creates a relation fork (an empty segment 0). Fails if it exists.
    pub fn create(&self, rel: RelFileId, fork: ForkNumber) -> SmgrResult<()> {
        let ts = self.tablespace_dir(rel.tablespace);
        let new_ts = !self.vfs.exists(&ts).map_err(file_err("checking", &ts))?;
        if new_ts {
            self.vfs
                .create_dir_all(&ts)
                .map_err(file_err("creating tablespace directory", &ts))?;
            self.sync_dir(&self.dir.join("base"))?;
        }
        let path = self.segment_path(rel, fork, 0);
        let opts = OpenOptions {
            create_new: true,
            create: true,
            ..self.open_options()
        };
        let file = self
            .vfs
            .open(&path, opts)
            .map_err(file_err("creating", &path))?;
        self.sync_dir(&ts)?;
        let f = self.fork(rel, fork);
        let mut segs = f.segments.write();
        segs.clear();
        segs.push(SegmentFiles::new(file));
        f.nblocks.store(0, Ordering::Release);
        Ok(())
    }

    /// Whether a relation fork exists on disk.
    pub fn exists(&self, rel: RelFileId, fork: ForkNumber) -> SmgrResult<bool> {
        let path = self.segment_path(rel, fork, 0);
        self.vfs.exists(&path).map_err(file_err("checking", &path))
    }

    /// Number of blocks in a relation fork.
    pub fn nblocks(&self, rel: RelFileId, fork: ForkNumber) -> SmgrResult<BlockNumber> {
        let f = self.fork(rel, fork);
        let cached = f.nblocks.load(Ordering::Acquire);
        if cached != NBLOCKS_UNKNOWN {
            return Ok(cached);
        }
        let _ext = f.extend_lock.lock();
        self.nblocks_locked(&f, rel, fork)
    }

    fn nblocks_locked(&self, f: &Fork, rel: RelFileId, fork: ForkNumber) -> SmgrResult<u32> {
        let cached = f.nblocks.load(Ordering::Acquire);
        if cached != NBLOCKS_UNKNOWN {
            return Ok(cached);
        }
        let mut segno = 0u32;
        let total = loop {
            if segno > 0 {
                let path = self.segment_path(rel, fork, segno);
                if !self
                    .vfs
                    .exists(&path)
                    .map_err(file_err("checking", &path))?
                {
                    break segno as u64 * u64::from(self.segment_blocks);
                }
            }
            let file = self.segment(f, rel, fork, segno, false)?;
            let len = file
                .len()
                .map_err(file_err("reading size of", file.path()))?;
            let blocks = len / self.block_size as u64;
            if blocks < u64::from(self.segment_blocks) {
                break segno as u64 * u64::from(self.segment_blocks) + blocks;
            }
            segno += 1;
        };
        let total = u32::try_from(total)
            .unwrap_or(MAX_BLOCK_NUMBER)
            .min(MAX_BLOCK_NUMBER);
        // Counting opened every segment up to the last one with pages: extension relies
        // on it to tell a leftover segment past the end (`open_segments`).
        debug_assert!(
            f.segments.read().len() as u64 >= u64::from(total.div_ceil(self.segment_blocks)),
            "{rel} {fork:?} counted {total} blocks with only {} segments open",
            f.segments.read().len()
        );
        f.nblocks.store(total, Ordering::Release);
        Ok(total)
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

    /// Reads one page.
    pub fn read(&self, tag: &BufferTag, buf: &mut [u8], context: IoContext) -> SmgrResult<()> {
        debug_assert_eq!(
            buf.len(),
            self.block_size,
            "reading {tag} into a buffer that is not one page"
        );
        let f = self.fork(tag.rel, tag.fork);
        let (segno, off) = self.locate(tag.block);
        let file = self
            .segment(&f, tag.rel, tag.fork, segno, false)
            .map_err(|e| match e {
                SmgrError::Io(IoError { path, source, .. }) => SmgrError::Read {
                    tag: *tag,
                    path,
                    source,
                },
                e => e,
            })?;
        let start = Instant::now();
        let got = file.read_at(buf, off).map_err(|source| SmgrError::Read {
            tag: *tag,
            path: file.path().to_path_buf(),
            source,
        })?;
        self.stats
            .count_timed(context, IoOp::Read, 1, start.elapsed());
        if got != buf.len() {
            return Err(SmgrError::ShortRead {
                tag: *tag,
                path: file.path().to_path_buf(),
                got,
                want: buf.len(),
            });
        }
        Ok(())
    }

    /// Where block `block` of a fork lives, for a read issued elsewhere (an asynchronous
    /// read through `vfs::aio`): the segment's file, the block's byte offset in it, and how
    /// many blocks from `block` on the segment holds at most (a read must not cross it).
    /// Opening a missing segment fails with [`SmgrError::Read`] naming the block.
    pub fn read_target(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        block: BlockNumber,
    ) -> SmgrResult<(Arc<dyn VfsFile>, u64, u32)> {
        let f = self.fork(rel, fork);
        let (segno, off) = self.locate(block);
        let file = self
            .segment(&f, rel, fork, segno, false)
            .map_err(|e| match e {
                SmgrError::Io(IoError { path, source, .. }) => SmgrError::Read {
                    tag: BufferTag::new(rel, fork, block),
                    path,
                    source,
                },
                e => e,
            })?;
        Ok((file, off, self.segment_blocks - block % self.segment_blocks))
    }

    /// Reads consecutive pages starting at `first` into `bufs` (one page each), with one
    /// vectored read per segment touched.
    pub fn readv(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        first: BlockNumber,
        bufs: &mut [&mut [u8]],
        context: IoContext,
    ) -> SmgrResult<()> {
        debug_assert!(
            bufs.iter().all(|b| b.len() == self.block_size)
                && u64::from(first) + bufs.len() as u64 <= u64::from(MAX_BLOCK_NUMBER) + 1,
            "reading {} pages from block {first}: a buffer is not one page, or the run passes \
             the largest block number",
            bufs.len()
        );
        let f = self.fork(rel, fork);
        let mut done = 0usize;
        while done < bufs.len() {
            let block = first + done as u32;
            let (segno, off) = self.locate(block);
            let room = (self.segment_blocks - block % self.segment_blocks) as usize;
            let n = room.min(bufs.len() - done);
            let tag = BufferTag::new(rel, fork, block);
            let file = self.segment(&f, rel, fork, segno, false)?;
            let mut iov: Vec<IoSliceMut<'_>> = bufs[done..done + n]
                .iter_mut()
                .map(|b| IoSliceMut::new(b))
                .collect();
            let want = n * self.block_size;
            let start = Instant::now();
            let got = file
                .read_vectored_at(&mut iov, off)
                .map_err(|source| SmgrError::Read {
                    tag,
                    path: file.path().to_path_buf(),
                    source,
                })?;
            self.stats
                .count_timed(context, IoOp::Read, n as u64, start.elapsed());
            if got != want {
                let tag = BufferTag::new(rel, fork, block + (got / self.block_size) as u32);
                return Err(SmgrError::ShortRead {
                    tag,
                    path: file.path().to_path_buf(),
                    got: got % self.block_size,
                    want: self.block_size,
                });
            }
            done += n;
        }
        Ok(())
    }

    /// Writes one page over an existing block (or at the end; see `extend`).
    pub fn write(&self, tag: &BufferTag, buf: &[u8], context: IoContext) -> SmgrResult<()> {
        self.writev(tag.rel, tag.fork, tag.block, &[buf], context)
    }

    /// Writes consecutive pages starting at `first`, one vectored write per segment.
    pub fn writev(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        first: BlockNumber,
        bufs: &[&[u8]],
        context: IoContext,
    ) -> SmgrResult<()> {
        self.writev_op(rel, fork, first, bufs, context, WriteKind::Overwrite)
    }

    /// Writes one page durably; see `writev_durable`.
    pub fn write_durable(&self, tag: &BufferTag, buf: &[u8], context: IoContext) -> SmgrResult<()> {
        self.writev_durable(tag.rel, tag.fork, tag.block, &[buf], context)
    }

    /// Writes consecutive pages starting at `first` like `writev` (one vectored write per
    /// segment, counted as `IoOp::Write`), but through an O_DSYNC handle of each segment:
    /// the pages are durable when this returns, and no fsync request is registered for
    /// them (PostgreSQL's open_datasync, seed 001's O_SYNC checkpoint writes). Requests
    /// that buffered writes to the same segments registered stay pending. The segments
    /// must exist: this path never creates one, and a block in a segment truncated or
    /// unlinked away fails with the OS error. The name of a segment created by extension
    /// is still durable only after `sync` fsyncs its directory.
    ///
    /// A failed durable write needs no latch: the caller still holds the page and writes
    /// it again, so a later success is real. (Linux reports each writeback error once per
    /// open file, so a failure this write reports that belonged to another writer's
    /// buffered pages is still reported to the normal handle's fsync at `sync`.)
    pub fn writev_durable(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        first: BlockNumber,
        bufs: &[&[u8]],
        context: IoContext,
    ) -> SmgrResult<()> {
        self.writev_op(rel, fork, first, bufs, context, WriteKind::Durable)
    }

    fn writev_op(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        first: BlockNumber,
        bufs: &[&[u8]],
        context: IoContext,
        kind: WriteKind,
    ) -> SmgrResult<()> {
        // Page i goes to block first + i at a computed offset: a buffer of another length
        // would shift every later page onto the wrong block.
        assert!(
            bufs.iter().all(|b| b.len() == self.block_size),
            "writing {} pages from block {first} of {rel}: not every buffer is one {}-byte page",
            bufs.len(),
            self.block_size
        );
        debug_assert!(
            u64::from(first) + bufs.len() as u64 <= u64::from(MAX_BLOCK_NUMBER) + 1,
            "writing {} pages from block {first} passes the largest block number",
            bufs.len()
        );
        let f = self.fork(rel, fork);
        // An extension writes at the fork's end, which its extend lock keeps still.
        debug_assert!(
            kind != WriteKind::Extend || f.nblocks.load(Ordering::Acquire) == first,
            "extending {rel} {fork:?} at block {first}, not at its end {}",
            f.nblocks.load(Ordering::Acquire)
        );
        let mut done = 0usize;
        while done < bufs.len() {
            let block = first + done as u32;
            let (segno, off) = self.locate(block);
            let room = (self.segment_blocks - block % self.segment_blocks) as usize;
            let n = room.min(bufs.len() - done);
            let tag = BufferTag::new(rel, fork, block);
            let file = match kind {
                WriteKind::Overwrite => self.segment(&f, rel, fork, segno, false),
                WriteKind::Extend => self.segment(&f, rel, fork, segno, true),
                WriteKind::Durable => self.durable_segment(&f, rel, fork, segno),
            }
            .map_err(|e| match e {
                SmgrError::Io(IoError { path, source, .. }) => {
                    SmgrError::Write { tag, path, source }
                }
                e => e,
            })?;
            let want = n * self.block_size;
            let start = Instant::now();
            let got = if n == 1 {
                file.write_at(bufs[done], off)
            } else {
                let iov: Vec<IoSlice<'_>> = bufs[done..done + n]
                    .iter()
                    .map(|b| IoSlice::new(b))
                    .collect();
                file.write_vectored_at(&iov, off)
            }
            .map_err(|source| SmgrError::Write {
                tag,
                path: file.path().to_path_buf(),
                source,
            })?;
            self.stats
                .count_timed(context, kind.op(), n as u64, start.elapsed());
            if kind != WriteKind::Durable && !self.dsync {
                self.sync_queue.register(SegmentId { rel, fork, segno });
            }
            if got != want {
                let tag = BufferTag::new(rel, fork, block + (got / self.block_size) as u32);
                return Err(SmgrError::ShortWrite {
                    tag,
                    path: file.path().to_path_buf(),
                    got: got % self.block_size,
                    want: self.block_size,
                });
            }
            done += n;
        }
        Ok(())
    }

    /// Where page `tag` is overwritten: its segment file (found as [`Smgr::write`] finds
    /// it; never created) and the offset in it. For writes issued outside the smgr (the
    /// bgwriter's io_uring pipeline), which then report back through
    /// [`Smgr::page_written`] or [`Smgr::page_write_failed`].
    pub fn page_target(&self, tag: &BufferTag) -> SmgrResult<PageTarget> {
        let f = self.fork(tag.rel, tag.fork);
        let (segno, offset) = self.locate(tag.block);
        let file = self
            .segment(&f, tag.rel, tag.fork, segno, false)
            .map_err(|e| match e {
                SmgrError::Io(IoError { path, source, .. }) => SmgrError::Write {
                    tag: *tag,
                    path,
                    source,
                },
                e => e,
            })?;
        Ok(PageTarget {
            file,
            offset,
            tag: *tag,
            segno,
        })
    }

    /// Counts a whole page written to `target` outside the smgr (one `IoOp::Write` taking
    /// `took`) and registers its segment for the next `sync`, as [`Smgr::write`] does.
    pub fn page_written(&self, target: &PageTarget, context: IoContext, took: Duration) {
        self.stats.count_timed(context, IoOp::Write, 1, took);
        if !self.dsync {
            self.sync_queue.register(SegmentId {
                rel: target.tag.rel,
                fork: target.tag.fork,
                segno: target.segno,
            });
        }
    }

    /// The error of a failed write to `target` (its page, file and OS error).
    pub fn page_write_failed(&self, target: &PageTarget, source: std::io::Error) -> SmgrError {
        SmgrError::Write {
            tag: target.tag,
            path: target.file.path().to_path_buf(),
            source,
        }
    }

    /// Adds pages at the end of a fork: writes `bufs` at blocks `nblocks..`, creating new
    /// segment files as needed. Returns the first new block. On failure (ENOSPC, say) the
    /// fork is cut back to its old size, best effort, and its size stays as before.
    pub fn extend(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        bufs: &[&[u8]],
        context: IoContext,
    ) -> SmgrResult<BlockNumber> {
        let f = self.fork(rel, fork);
        let _ext = f.extend_lock.lock();
        let first = self.nblocks_locked(&f, rel, fork)?;
        let last = u64::from(first) + bufs.len() as u64;
        if last > u64::from(MAX_BLOCK_NUMBER) {
            return Err(SmgrError::BlockOutOfRange {
                block: MAX_BLOCK_NUMBER,
            });
        }
        let grown = self.writev_op(rel, fork, first, bufs, context, WriteKind::Extend);
        self.end_extension(&f, rel, fork, first, last, grown)
    }

    /// Adds `n` zeroed pages at the end of a fork by allocating them in its segment files
    /// (posix_fallocate, which also reports a full disk now, as PostgreSQL's write of zeros
    /// does; new segment files created as needed), writing no data. Returns the first new
    /// block. On failure (ENOSPC, say) the fork is cut back to its old size, best effort,
    /// and its size stays as before.
    ///
    /// Why no write of zeros: a page's bytes then reach the file only when the pool writes
    /// the page, after the log records that made it (the first one an image of the whole
    /// page) are durable, so any tear or garbage a power cut leaves in it is repaired by
    /// replay. A write of zeros at extension is covered by no record: torn or garbaged, it
    /// left a page no replay touches and no read accepts, and its table unreadable for
    /// good. A length change can only be kept (zeros, a valid new page) or lost.
    pub fn extend_zeroed(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        n: u32,
        context: IoContext,
    ) -> SmgrResult<BlockNumber> {
        let f = self.fork(rel, fork);
        let _ext = f.extend_lock.lock();
        let first = self.nblocks_locked(&f, rel, fork)?;
        let last = u64::from(first) + u64::from(n);
        if last > u64::from(MAX_BLOCK_NUMBER) {
            return Err(SmgrError::BlockOutOfRange {
                block: MAX_BLOCK_NUMBER,
            });
        }
        let grow = || -> SmgrResult<()> {
            let mut block = first;
            while u64::from(block) < last {
                let (segno, off) = self.locate(block);
                let room = self.segment_blocks - block % self.segment_blocks;
                let k = room.min((last - u64::from(block)) as u32);
                let tag = BufferTag::new(rel, fork, block);
                let file = self
                    .segment(&f, rel, fork, segno, true)
                    .map_err(|e| match e {
                        SmgrError::Io(IoError { path, source, .. }) => {
                            SmgrError::Write { tag, path, source }
                        }
                        e => e,
                    })?;
                let start = Instant::now();
                let len = u64::from(k) * self.block_size as u64;
                file.allocate(off, len).map_err(|source| SmgrError::Write {
                    tag,
                    path: file.path().to_path_buf(),
                    source,
                })?;
                self.stats
                    .count_timed(context, IoOp::Extend, u64::from(k), start.elapsed());
                // The new length is made durable by the next sync of the segment (every
                // handle, O_DSYNC or not: an allocation is no write).
                self.sync_queue.register(SegmentId { rel, fork, segno });
                block += k;
            }
            Ok(())
        };
        self.end_extension(&f, rel, fork, first, last, grow())
    }

    /// Ends an extension of a fork from `first` to `last` (its extend lock held): on
    /// success the fork's size becomes `last`; on failure the fork is cut back to `first`,
    /// best effort, and its size stays.
    fn end_extension(
        &self,
        f: &Fork,
        rel: RelFileId,
        fork: ForkNumber,
        first: BlockNumber,
        last: u64,
        grown: SmgrResult<()>,
    ) -> SmgrResult<BlockNumber> {
        debug_assert!(
            u64::from(first) <= last && last <= u64::from(MAX_BLOCK_NUMBER),
            "extension from block {first} to {last} is backwards or past the largest block"
        );
        // The extend lock, held since the size was read, kept anyone else from changing it.
        debug_assert_eq!(
            f.nblocks.load(Ordering::Acquire),
            first,
            "the size of {rel} {fork:?} changed under its extend lock"
        );
        match grown {
            Ok(()) => {
                f.nblocks.store(last as u32, Ordering::Release);
                Ok(first)
            }
            Err(e) => {
                let (segno, off) = self.locate(first);
                if let Ok(file) = self.segment(f, rel, fork, segno, false) {
                    let _ = file.set_len(off);
                }
                Err(e)
            }
        }
    }

    /// Hints the OS to start writing back `n` pages from `first` (sync_file_range).
    pub fn writeback(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        first: BlockNumber,
        n: u32,
        context: IoContext,
    ) -> SmgrResult<()> {
        debug_assert!(
            u64::from(first) + u64::from(n) <= u64::from(MAX_BLOCK_NUMBER) + 1,
            "writeback of {n} pages from block {first} passes the largest block number"
        );
        let f = self.fork(rel, fork);
        let mut done = 0u32;
        while done < n {
            let block = first + done;
            let (segno, off) = self.locate(block);
            let k = (self.segment_blocks - block % self.segment_blocks).min(n - done);
            let file = self.segment(&f, rel, fork, segno, false)?;
            let start = Instant::now();
            file.writeback(off, u64::from(k) * self.block_size as u64)
                .map_err(file_err("writeback of", file.path()))?;
            self.stats
                .count_timed(context, IoOp::Writeback, u64::from(k), start.elapsed());
            done += k;
        }
        Ok(())
    }

    /// Cuts a fork to `nblocks` pages; whole segments past the end are emptied (segment 0
    /// stays, later ones are unlinked).
    pub fn truncate(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        nblocks: BlockNumber,
    ) -> SmgrResult<()> {
        let f = self.fork(rel, fork);
        let _ext = f.extend_lock.lock();
        let old = self.nblocks_locked(&f, rel, fork)?;
        if nblocks >= old {
            return Ok(());
        }
        let last_old_seg = old.saturating_sub(1) / self.segment_blocks;
        let keep_seg = nblocks / self.segment_blocks;
        let keep_blocks = u64::from(nblocks % self.segment_blocks);
        // Open every segment first so the handle list is complete before trimming it.
        self.segment(&f, rel, fork, last_old_seg, false)?;
        let mut segs = f.segments.write();
        for segno in (keep_seg..=last_old_seg).rev() {
            if segno > keep_seg || (keep_blocks == 0 && segno > 0) {
                // A segment left with no pages is removed; only segment 0 stays, empty.
                // The removal is durable at the next `sync` (the checkpoint that must
                // follow an unlogged truncation), before replay stops covering it.
                let path = self.segment_path(rel, fork, segno);
                self.vfs
                    .unlink(&path)
                    .map_err(file_err("unlinking", &path))?;
                self.sync_queue
                    .register_dir(self.tablespace_dir(rel.tablespace));
                segs.truncate(segno as usize);
            } else {
                let file = &segs[segno as usize].file;
                file.set_len(keep_blocks * self.block_size as u64)
                    .map_err(file_err("truncating", file.path()))?;
            }
        }
        // Left: at least the segments up to the one holding the new last page (segment 0
        // always). More only if a failed extension left a handle past the old end.
        debug_assert!(
            segs.len() as u32
                >= if keep_blocks == 0 {
                    keep_seg.max(1)
                } else {
                    keep_seg + 1
                },
            "truncating {rel} {fork:?} to {nblocks} blocks dropped a segment it keeps"
        );
        self.sync_queue.forget(rel, fork, segs.len() as u32);
        for segno in 0..segs.len() as u32 {
            // Even with O_DSYNC: a length change is not a write, only fsync makes it durable.
            self.sync_queue.register(SegmentId { rel, fork, segno });
        }
        f.nblocks.store(nblocks, Ordering::Release);
        Ok(())
    }

    /// Removes every segment file of a fork (durably: the directory is fsynced before this
    /// returns) and forgets its pending fsyncs. Segment 0 goes last, after the removal of
    /// the others is durable, so a crash never leaves later segments without segment 0
    /// (which a fork created again under the same number would grow into).
    pub fn unlink(&self, rel: RelFileId, fork: ForkNumber) -> SmgrResult<()> {
        let f = self.fork(rel, fork);
        let _ext = f.extend_lock.lock();
        self.sync_queue.forget(rel, fork, 0);
        f.segments.write().clear();
        f.nblocks.store(NBLOCKS_UNKNOWN, Ordering::Release);
        let ts = self.tablespace_dir(rel.tablespace);
        let remove = |segno: u32| {
            let path = self.segment_path(rel, fork, segno);
            match self.vfs.unlink(&path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(SmgrError::from(IoError::new("unlinking", &path, e))),
            }
        };
        let segnos = self.segment_files(rel, fork)?;
        let later: Vec<u32> = segnos.iter().copied().filter(|&n| n > 0).collect();
        for &segno in &later {
            remove(segno)?;
        }
        if !later.is_empty() {
            self.sync_dir(&ts)?;
        }
        remove(0)?;
        self.sync_dir(&ts)?;
        self.forks.write().remove(&(rel, fork));
        Ok(())
    }

    /// Number of segments with writes not yet fsynced.
    pub fn pending_syncs(&self) -> usize {
        self.sync_queue.pending_len()
    }

    /// Number of directories with entries (created or unlinked segments) not yet fsynced.
    pub fn pending_dir_syncs(&self) -> usize {
        self.sync_queue.pending_dirs_len()
    }

    /// fsyncs every segment written since its last fsync, then every directory in which a
    /// segment was created or unlinked since. Returns the segments fsynced. A failure is
    /// latched: this and every later call report it.
    pub fn sync(&self) -> SmgrResult<usize> {
        Ok(self.sync_each(&mut |_| {})?.files)
    }

    /// [`Smgr::sync`], calling `after_each` with the duration of each file's fsync (the
    /// checkpointer paces its sync phase with it) and reporting the count and times.
    pub fn sync_each(&self, after_each: &mut dyn FnMut(Duration)) -> SmgrResult<SyncReport> {
        let mut report = SyncReport::default();
        if let Some((path, first)) = self.sync_queue.latched() {
            return Err(SmgrError::FsyncLatched { path, first });
        }
        let segs = self.sync_queue.drain();
        for (i, seg) in segs.iter().enumerate() {
            let f = self.fork(seg.rel, seg.fork);
            let file = match self.segment(&f, seg.rel, seg.fork, seg.segno, false) {
                Ok(file) => file,
                Err(e) => {
                    self.sync_queue.requeue(&segs[i..]);
                    return Err(e);
                }
            };
            let start = Instant::now();
            if let Err(source) = file.sync_data() {
                let path = file.path().to_path_buf();
                self.sync_queue.latch(path.clone(), source.to_string());
                return Err(SmgrError::Fsync { path, source });
            }
            let took = start.elapsed();
            self.stats
                .count_timed(IoContext::Normal, IoOp::Fsync, 1, took);
            report.files += 1;
            report.total += took;
            report.longest = report.longest.max(took);
            if took >= SLOW_SYNC {
                self.note_slow_tablespace(seg.rel.tablespace);
            }
            after_each(took);
        }
        for dir in self.sync_queue.drain_dirs() {
            self.sync_dir(&dir)?;
        }
        self.syncs_done.fetch_add(1, Ordering::Release);
        Ok(report)
    }

    /// Whether a file on `tablespace`'s device has taken `SLOW_SYNC` or more to fsync
    /// since the directory was opened: the device did not absorb what the page cache held
    /// for it. A file of another tablespace on the same device ([`Self::device_of`])
    /// counts: the two share the device's bandwidth. Stats the tablespace's directory
    /// once a slow fsync is known (call per batch of writes, not per write).
    pub fn slow_sync_in(&self, tablespace: u32) -> bool {
        {
            let slow = self.slow_tablespaces.lock();
            if slow.is_empty() {
                return false;
            }
            if slow.iter().any(|&(ts, _)| ts == tablespace) {
                return true;
            }
        }
        let Some(dev) = self.device_of(tablespace) else {
            return false;
        };
        let slow = self.slow_tablespaces.lock();
        slow.iter().any(|&(_, d)| d == Some(dev))
    }

    /// The device under `tablespace`'s directory ([`crate::vfs::Vfs::device_id`]): None if
    /// the file system cannot tell or the directory cannot be read.
    pub fn device_of(&self, tablespace: u32) -> Option<u64> {
        self.vfs
            .device_id(&self.tablespace_dir(tablespace))
            .ok()
            .flatten()
    }

    fn note_slow_tablespace(&self, tablespace: u32) {
        if self
            .slow_tablespaces
            .lock()
            .iter()
            .any(|&(ts, _)| ts == tablespace)
        {
            return;
        }
        let dev = self.device_of(tablespace);
        let mut slow = self.slow_tablespaces.lock();
        if !slow.iter().any(|&(ts, _)| ts == tablespace) {
            slow.push((tablespace, dev));
        }
    }

    /// Counts a slow sync of a file of `tablespace` as if one had happened (tests of what
    /// reacts to one).
    #[cfg(test)]
    pub(crate) fn note_slow_sync(&self, tablespace: u32) {
        self.note_slow_tablespace(tablespace);
    }

    /// How many `sync_each` calls have completed: every write before the start of the
    /// last one counted is on the device.
    pub fn syncs_done(&self) -> u64 {
        self.syncs_done.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::MemVfs;

    const REL: RelFileId = RelFileId::new(3, 77);

    /// A directory with 4-page segments of 4 KiB pages, on an in-memory file system.
    fn smgr() -> (MemVfs, Smgr) {
        let vfs = MemVfs::new();
        let opts = SmgrOptions {
            wal_segment_size: None,
            block_size: 4096,
            segment_size: 4 * 4096,
            create: true,
            direct: false,
            dsync: false,
        };
        let s = Smgr::open(Arc::new(vfs.clone()), Path::new("/db"), opts).unwrap();
        (vfs, s)
    }

    fn page(v: u8) -> Vec<u8> {
        vec![v; 4096]
    }

    #[test]
    fn vectored_io_splits_at_segment_boundaries() {
        let (vfs, s) = smgr();
        s.create(REL, ForkNumber::Main).unwrap();
        let pages: Vec<Vec<u8>> = (0..10).map(page).collect();
        let refs: Vec<&[u8]> = pages.iter().map(|p| p.as_slice()).collect();
        assert_eq!(
            s.extend(REL, ForkNumber::Main, &refs, IoContext::Normal)
                .unwrap(),
            0
        );
        assert_eq!(s.nblocks(REL, ForkNumber::Main).unwrap(), 10);
        for (segno, len) in [(0, 4), (1, 4), (2, 2)] {
            let data = vfs
                .contents(&s.segment_path(REL, ForkNumber::Main, segno))
                .unwrap();
            assert_eq!(data.len(), len * 4096, "segment {segno}");
        }
        assert!(s
            .segment_path(REL, ForkNumber::Main, 1)
            .ends_with("base/3/77.1"));
        // Read blocks 2..9 (three segments) with one call.
        let mut bufs: Vec<Vec<u8>> = (0..7).map(|_| vec![0u8; 4096]).collect();
        let mut refs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
        s.readv(REL, ForkNumber::Main, 2, &mut refs, IoContext::Normal)
            .unwrap();
        for (i, b) in bufs.iter().enumerate() {
            assert!(b.iter().all(|&x| x == 2 + i as u8), "block {}", 2 + i);
        }
        // Overwrite blocks 3..5 across the first boundary.
        let new: Vec<Vec<u8>> = (0..3).map(|_| page(99)).collect();
        let refs: Vec<&[u8]> = new.iter().map(|p| p.as_slice()).collect();
        s.writev(REL, ForkNumber::Main, 3, &refs, IoContext::Normal)
            .unwrap();
        let mut one = vec![0u8; 4096];
        for b in 3..6 {
            s.read(
                &BufferTag::new(REL, ForkNumber::Main, b),
                &mut one,
                IoContext::Normal,
            )
            .unwrap();
            assert_eq!(one[0], 99);
        }
        s.writeback(REL, ForkNumber::Main, 0, 10, IoContext::Normal)
            .unwrap();
    }

    #[test]
    fn fsync_requests_are_deduplicated_per_segment_and_forgotten_on_unlink() {
        let (_vfs, s) = smgr();
        s.create(REL, ForkNumber::Main).unwrap();
        let p = page(1);
        for _ in 0..6 {
            s.extend(REL, ForkNumber::Main, &[&p], IoContext::Normal)
                .unwrap();
        }
        for _ in 0..5 {
            s.write(
                &BufferTag::new(REL, ForkNumber::Main, 0),
                &p,
                IoContext::Normal,
            )
            .unwrap();
        }
        assert_eq!(
            s.pending_syncs(),
            2,
            "6 pages in 2 segments, many writes: 2 requests"
        );
        assert_eq!(s.sync().unwrap(), 2);
        assert_eq!(s.pending_syncs(), 0);
        assert_eq!(s.stats().snapshot().total(IoOp::Fsync), 2);
        s.write(
            &BufferTag::new(REL, ForkNumber::Main, 5),
            &p,
            IoContext::Normal,
        )
        .unwrap();
        assert_eq!(s.pending_syncs(), 1);
        s.unlink(REL, ForkNumber::Main).unwrap();
        assert_eq!(s.pending_syncs(), 0);
        assert!(!s.exists(REL, ForkNumber::Main).unwrap());
    }

    /// A segment created by extension, and one unlinked by truncation, register their
    /// directory; `sync` fsyncs it once. How: the queue's directory count.
    #[test]
    fn new_and_unlinked_segments_register_their_directory() {
        let (_vfs, s) = smgr();
        s.create(REL, ForkNumber::Main).unwrap();
        let p = page(1);
        s.extend(REL, ForkNumber::Main, &[p.as_slice(); 3], IoContext::Normal)
            .unwrap();
        assert_eq!(
            s.pending_dir_syncs(),
            0,
            "segment 0's creation fsynced at once"
        );
        s.extend(REL, ForkNumber::Main, &[p.as_slice(); 3], IoContext::Normal)
            .unwrap();
        assert_eq!(s.pending_dir_syncs(), 1, "segment 1 created");
        assert_eq!(s.sync().unwrap(), 2);
        assert_eq!(s.pending_dir_syncs(), 0);
        s.truncate(REL, ForkNumber::Main, 2).unwrap();
        assert_eq!(s.pending_dir_syncs(), 1, "segment 1 unlinked");
        s.sync().unwrap();
        assert_eq!(s.pending_dir_syncs(), 0);
    }

    /// A failed directory fsync is latched: the `sync` that met it names the directory and
    /// the OS error, and every later one fails. How: `FaultVfs` fails the first SyncDir of
    /// the tablespace directory after setup.
    #[test]
    fn a_failed_directory_fsync_is_latched() {
        use crate::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs};
        let fault = FaultVfs::new(Arc::new(MemVfs::new()));
        let opts = SmgrOptions {
            wal_segment_size: None,
            block_size: 4096,
            segment_size: 4 * 4096,
            create: true,
            direct: false,
            dsync: false,
        };
        let s = Smgr::open(Arc::new(fault.clone()), Path::new("/db"), opts).unwrap();
        s.create(REL, ForkNumber::Main).unwrap();
        let p = page(1);
        s.extend(REL, ForkNumber::Main, &[p.as_slice(); 5], IoContext::Normal)
            .unwrap();
        fault.add_rule(FaultRule::nth(
            "base/3",
            FaultOp::SyncDir,
            1,
            FaultKind::Eio,
        ));
        let err = s.sync().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO));
        assert!(err.to_string().contains("/db/base/3"), "{err}");
        let again = s.sync().unwrap_err();
        assert!(matches!(again, SmgrError::FsyncLatched { .. }), "{again}");
    }

    /// `unlink` removes every segment file of the fork, also those past a gap (a crash can
    /// undo a segment's creation and keep a later one's), and no other relation's files.
    #[test]
    fn unlink_removes_segments_past_a_gap() {
        let (vfs, s) = smgr();
        s.create(REL, ForkNumber::Main).unwrap();
        let other = RelFileId::new(3, 770);
        s.create(other, ForkNumber::Main).unwrap();
        let p = page(1);
        s.extend(
            REL,
            ForkNumber::Main,
            &[p.as_slice(); 13],
            IoContext::Normal,
        )
        .unwrap();
        s.extend(
            other,
            ForkNumber::Main,
            &[p.as_slice(); 5],
            IoContext::Normal,
        )
        .unwrap();
        vfs.unlink(&s.segment_path(REL, ForkNumber::Main, 1))
            .unwrap();
        s.unlink(REL, ForkNumber::Main).unwrap();
        for segno in 0..4 {
            assert!(vfs
                .contents(&s.segment_path(REL, ForkNumber::Main, segno))
                .is_none());
        }
        assert!(vfs
            .contents(&s.segment_path(other, ForkNumber::Main, 1))
            .is_some());
        assert_eq!(s.nblocks(other, ForkNumber::Main).unwrap(), 5);
    }

    /// A segment file found past the fork's end when extension reaches it is emptied
    /// first: its old pages never count as the fork's, even after a restart.
    #[test]
    fn extension_empties_a_leftover_segment_file() {
        let (vfs, s) = smgr();
        s.create(REL, ForkNumber::Main).unwrap();
        let leftover = s.segment_path(REL, ForkNumber::Main, 2);
        vfs.set_contents(&leftover, page(9).repeat(4));
        let p = page(1);
        s.extend(REL, ForkNumber::Main, &[p.as_slice(); 9], IoContext::Normal)
            .unwrap();
        assert_eq!(vfs.contents(&leftover).unwrap().len(), 4096);
        drop(s);
        let opts = SmgrOptions {
            wal_segment_size: None,
            block_size: 4096,
            segment_size: 4 * 4096,
            create: false,
            direct: false,
            dsync: false,
        };
        let s = Smgr::open(Arc::new(vfs), Path::new("/db"), opts).unwrap();
        assert_eq!(s.nblocks(REL, ForkNumber::Main).unwrap(), 9);
    }

    #[test]
    fn truncate_across_segments_removes_emptied_ones() {
        let (vfs, s) = smgr();
        s.create(REL, ForkNumber::Main).unwrap();
        let p = page(5);
        let refs: Vec<&[u8]> = (0..11).map(|_| p.as_slice()).collect();
        s.extend(REL, ForkNumber::Main, &refs, IoContext::Normal)
            .unwrap();
        s.truncate(REL, ForkNumber::Main, 4).unwrap();
        assert_eq!(s.nblocks(REL, ForkNumber::Main).unwrap(), 4);
        assert!(vfs
            .contents(&s.segment_path(REL, ForkNumber::Main, 1))
            .is_none());
        assert!(vfs
            .contents(&s.segment_path(REL, ForkNumber::Main, 2))
            .is_none());
        s.truncate(REL, ForkNumber::Main, 1).unwrap();
        assert_eq!(
            vfs.contents(&s.segment_path(REL, ForkNumber::Main, 0))
                .unwrap()
                .len(),
            4096
        );
        // Growing again after a truncate recreates segments.
        let refs: Vec<&[u8]> = (0..5).map(|_| p.as_slice()).collect();
        assert_eq!(
            s.extend(REL, ForkNumber::Main, &refs, IoContext::Normal)
                .unwrap(),
            1
        );
        assert_eq!(s.nblocks(REL, ForkNumber::Main).unwrap(), 6);
    }

    #[test]
    fn fork_size_survives_reopen_and_forks_are_separate_files() {
        let (vfs, s) = smgr();
        s.create(REL, ForkNumber::Main).unwrap();
        s.create(REL, ForkNumber::FreeSpace).unwrap();
        let p = page(1);
        let refs: Vec<&[u8]> = (0..9).map(|_| p.as_slice()).collect();
        s.extend(REL, ForkNumber::Main, &refs, IoContext::Normal)
            .unwrap();
        s.extend(REL, ForkNumber::FreeSpace, &refs[..1], IoContext::Normal)
            .unwrap();
        assert!(
            s.create(REL, ForkNumber::Main).is_err(),
            "creating twice must fail"
        );
        drop(s);
        let opts = SmgrOptions {
            wal_segment_size: None,
            block_size: 4096,
            segment_size: 16384,
            create: false,
            direct: false,
            dsync: false,
        };
        let s = Smgr::open(Arc::new(vfs), Path::new("/db"), opts).unwrap();
        assert_eq!(s.nblocks(REL, ForkNumber::Main).unwrap(), 9);
        assert_eq!(s.nblocks(REL, ForkNumber::FreeSpace).unwrap(), 1);
        assert!(s
            .segment_path(REL, ForkNumber::FreeSpace, 0)
            .ends_with("base/3/77_fsm"));
    }

    /// Options for a directory with 4-page segments of 4 KiB pages.
    fn options(create: bool, dsync: bool) -> SmgrOptions {
        SmgrOptions {
            wal_segment_size: None,
            block_size: 4096,
            segment_size: 4 * 4096,
            create,
            direct: false,
            dsync,
        }
    }

    /// How many O_DSYNC handles a fork has cached (0 when the fork is not open).
    fn durable_handles(s: &Smgr, rel: RelFileId, fork: ForkNumber) -> usize {
        let forks = s.forks.read();
        forks.get(&(rel, fork)).map_or(0, |f| {
            f.segments
                .read()
                .iter()
                .filter(|seg| seg.durable.is_some())
                .count()
        })
    }

    fn tag(block: BlockNumber) -> BufferTag {
        BufferTag::new(REL, ForkNumber::Main, block)
    }

    /// Durable writes are durable on return: after a simulated power cut with no `sync`
    /// since, under many seeds, every block written durably (one vectored write across a
    /// segment boundary, one single page) reads back, while they registered no fsync
    /// request and a buffered write still does. Reads before the cut, through the normal
    /// handles, see the durable writes (two handles of one file share its contents). How:
    /// `SimVfs` keeps an O_DSYNC handle's writes whatever the seed; it would drop, tear or
    /// garbage them if the handle were not opened O_DSYNC.
    #[test]
    fn durable_writes_survive_a_power_cut_without_sync_and_register_no_fsync() {
        use crate::vfs::SimVfs;
        let vfs = SimVfs::new();
        let s = Smgr::open(
            Arc::new(vfs.clone()),
            Path::new("/db"),
            options(true, false),
        )
        .unwrap();
        s.create(REL, ForkNumber::Main).unwrap();
        s.extend(
            REL,
            ForkNumber::Main,
            &[page(1).as_slice(); 8],
            IoContext::Normal,
        )
        .unwrap();
        s.sync().unwrap();
        assert_eq!(s.pending_syncs(), 0);
        let writes_before = s.stats().snapshot().total(IoOp::Write);

        // Blocks 2..6 straddle the boundary between segments 0 and 1.
        let new: Vec<Vec<u8>> = (2..6).map(|b| page(10 + b)).collect();
        let refs: Vec<&[u8]> = new.iter().map(|p| p.as_slice()).collect();
        s.writev_durable(REL, ForkNumber::Main, 2, &refs, IoContext::Normal)
            .unwrap();
        s.write_durable(&tag(7), &page(17), IoContext::Normal)
            .unwrap();
        assert_eq!(s.pending_syncs(), 0, "durable writes register no fsync");
        assert_eq!(durable_handles(&s, REL, ForkNumber::Main), 2);
        assert_eq!(
            s.stats().snapshot().total(IoOp::Write),
            writes_before + 5,
            "counted as writes, one per page"
        );
        let want = [1u8, 1, 12, 13, 14, 15, 1, 17];
        let read_all = |s: &Smgr| {
            let mut bufs: Vec<Vec<u8>> = (0..8).map(|_| vec![0u8; 4096]).collect();
            let mut refs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
            s.readv(REL, ForkNumber::Main, 0, &mut refs, IoContext::Normal)
                .unwrap();
            bufs
        };
        for (b, got) in read_all(&s).iter().enumerate() {
            assert!(
                got.iter().all(|&x| x == want[b]),
                "block {b} before the cut"
            );
        }
        s.write(&tag(0), &page(20), IoContext::Normal).unwrap();
        assert_eq!(s.pending_syncs(), 1, "a buffered write still registers");

        for seed in 0..32 {
            let copy = vfs.duplicate();
            copy.crash(seed);
            let s = Smgr::open(Arc::new(copy), Path::new("/db"), options(false, false)).unwrap();
            assert_eq!(s.nblocks(REL, ForkNumber::Main).unwrap(), 8, "seed {seed}");
            // Block 0's buffered write may be dropped or torn; the others were durable.
            for (b, got) in read_all(&s).iter().enumerate().skip(1) {
                assert!(
                    got.iter().all(|&x| x == want[b]),
                    "seed {seed}: block {b} after the cut"
                );
            }
        }
    }

    /// A durable write never creates a segment, and no O_DSYNC handle outlives its segment:
    /// after a truncate, a durable write into a segment truncated away fails (naming the
    /// file) and makes no file; once extension recreates that segment, a durable write lands
    /// in the new file (a stale handle would write into the unlinked one, unseen); unlink
    /// drops every handle, and a fork created again under the same number is written
    /// afresh. How: MemVfs keeps an unlinked file's node alive for open handles, like a
    /// POSIX file system, so a write through a stale handle would vanish from reads.
    #[test]
    fn durable_writes_create_nothing_and_truncate_and_unlink_drop_their_handles() {
        let (vfs, s) = smgr();
        s.create(REL, ForkNumber::Main).unwrap();
        s.extend(
            REL,
            ForkNumber::Main,
            &[page(1).as_slice(); 10],
            IoContext::Normal,
        )
        .unwrap();
        s.writev_durable(
            REL,
            ForkNumber::Main,
            0,
            &[page(2).as_slice(); 10],
            IoContext::Normal,
        )
        .unwrap();
        assert_eq!(durable_handles(&s, REL, ForkNumber::Main), 3);

        s.truncate(REL, ForkNumber::Main, 4).unwrap();
        assert_eq!(
            durable_handles(&s, REL, ForkNumber::Main),
            1,
            "segments 1 and 2 were unlinked; segment 0 stays"
        );
        let seg1 = s.segment_path(REL, ForkNumber::Main, 1);
        let err = s
            .write_durable(&tag(5), &page(3), IoContext::Normal)
            .unwrap_err();
        match &err {
            SmgrError::Write {
                tag: t,
                path,
                source,
            } => {
                assert_eq!(*t, tag(5));
                assert_eq!(path, &seg1);
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            e => panic!("want a write error naming the segment, got {e}"),
        }
        assert!(vfs.contents(&seg1).is_none(), "no segment was created");
        assert_eq!(durable_handles(&s, REL, ForkNumber::Main), 1);
        // Segment 0 keeps its handle, still the live file.
        s.write_durable(&tag(3), &page(4), IoContext::Normal)
            .unwrap();
        let mut one = vec![0u8; 4096];
        s.read(&tag(3), &mut one, IoContext::Normal).unwrap();
        assert_eq!(one, page(4));

        assert_eq!(
            s.extend(
                REL,
                ForkNumber::Main,
                &[page(5).as_slice(); 2],
                IoContext::Normal
            )
            .unwrap(),
            4
        );
        s.write_durable(&tag(5), &page(6), IoContext::Normal)
            .unwrap();
        s.read(&tag(5), &mut one, IoContext::Normal).unwrap();
        assert_eq!(one, page(6), "the durable write reached the new segment 1");
        assert_eq!(vfs.contents(&seg1).unwrap()[4096..], page(6)[..]);
        assert_eq!(durable_handles(&s, REL, ForkNumber::Main), 2);

        s.unlink(REL, ForkNumber::Main).unwrap();
        assert_eq!(durable_handles(&s, REL, ForkNumber::Main), 0);
        assert!(s
            .write_durable(&tag(0), &page(7), IoContext::Normal)
            .is_err());
        assert!(
            !s.exists(REL, ForkNumber::Main).unwrap(),
            "nothing recreated"
        );
        s.create(REL, ForkNumber::Main).unwrap();
        s.extend(
            REL,
            ForkNumber::Main,
            &[page(8).as_slice()],
            IoContext::Normal,
        )
        .unwrap();
        s.write_durable(&tag(0), &page(9), IoContext::Normal)
            .unwrap();
        s.read(&tag(0), &mut one, IoContext::Normal).unwrap();
        assert_eq!(one, page(9));
        assert_eq!(s.pending_syncs(), 1, "only the extension's request");
    }

    /// A durable write's failures are typed like `writev`'s: EIO keeps the errno, the block
    /// and the path; a short transfer is a `ShortWrite` naming the first block not written.
    /// Neither registers an fsync request. With `SmgrOptions::dsync` the normal handles are
    /// already O_DSYNC and no second one is opened. How: `FaultVfs` fails chosen writes.
    #[test]
    fn durable_write_failures_are_typed_and_dsync_files_need_no_second_handle() {
        use crate::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs};
        let fault = FaultVfs::new(Arc::new(MemVfs::new()));
        let s = Smgr::open(
            Arc::new(fault.clone()),
            Path::new("/db"),
            options(true, false),
        )
        .unwrap();
        s.create(REL, ForkNumber::Main).unwrap();
        s.extend(
            REL,
            ForkNumber::Main,
            &[page(1).as_slice(); 4],
            IoContext::Normal,
        )
        .unwrap();
        s.sync().unwrap();

        fault.add_rule(FaultRule::nth(
            "base/3/77",
            FaultOp::Write,
            1,
            FaultKind::Eio,
        ));
        let err = s
            .write_durable(&tag(2), &page(2), IoContext::Normal)
            .unwrap_err();
        assert!(matches!(err, SmgrError::Write { .. }), "{err}");
        assert_eq!(err.raw_os_error(), Some(libc::EIO));
        assert!(err.to_string().contains("/db/base/3/77"), "{err}");

        fault.add_rule(FaultRule::nth(
            "base/3/77",
            FaultOp::Write,
            1,
            FaultKind::Short,
        ));
        let err = s
            .writev_durable(
                REL,
                ForkNumber::Main,
                0,
                &[page(3).as_slice(); 2],
                IoContext::Normal,
            )
            .unwrap_err();
        match err {
            SmgrError::ShortWrite {
                tag: t, got, want, ..
            } => {
                assert_eq!(
                    (t, got, want),
                    (tag(1), 0, 4096),
                    "half of two pages written"
                );
            }
            e => panic!("want a short write, got {e}"),
        }
        assert_eq!(s.pending_syncs(), 0);
        drop(s);

        let s = Smgr::open(Arc::new(fault), Path::new("/db"), options(false, true)).unwrap();
        s.write_durable(&tag(0), &page(4), IoContext::Normal)
            .unwrap();
        assert_eq!(durable_handles(&s, REL, ForkNumber::Main), 0);
        assert_eq!(s.pending_syncs(), 0);
        let mut one = vec![0u8; 4096];
        s.read(&tag(0), &mut one, IoContext::Normal).unwrap();
        assert_eq!(one, page(4));
    }
}
