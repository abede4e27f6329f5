//! WAL segment files: naming, creation (zero-filled, so that fdatasync of a segment never
//! has to journal a size change), recycling, removal, and preparation ahead of need.
//!
//! Owns: the open segment files, the list of files that can be recycled, and cumulative
//! counts of segment files added (created and zero-filled), recycled (renamed from a
//! released one) and removed (unlinked): PostgreSQL's "WAL file(s) added, removed,
//! recycled" of `log_checkpoints`.
//! Layout: `<dir>/wal/<segno as 16 hex digits>`; segment `n` holds log bytes
//! `[n * segment_size, (n + 1) * segment_size)`.
//! Preparation: [`Segments::file`] with [`Make::Ahead`] is how the WAL's WAL writer
//! (and open, and checkpoints) make the next segments before the flush leader needs them
//! (PostgreSQL's PreallocXlogFiles); the leader asks with [`Make::Inline`] and only makes
//! a file itself when none was prepared, which the log counts.
//! Invariants: a segment file, once created by this module, has its full size and that
//! size and its name are durable (file and directory fsynced) before it enters `open`, and
//! only files in `open` receive log bytes. At most `recycle_segments` released segments
//! wait for recycling after `remove_before`; the others are unlinked. Each counter only
//! grows, by one per file operation that succeeded.
//! Locks: `make` (held across a creation, a recycling rename or a release: the slow,
//! file-system-changing work, one at a time) → `open` (held only to look up or insert a
//! handle, never across I/O, so the flush leader's lookup of a prepared segment never
//! waits on a creation) → `recyclable`. The counters are atomics, read without a lock (a
//! reader may see one counter of a concurrent operation updated and not yet another's).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{SegmentCounts, WalError};
use crate::stats::{IoOp, WalIoContext};
use crate::sync::{Arc, AtomicU64, AtomicUsize, Mutex, Ordering};
use crate::vfs::{IoAt, IoError, OpenOptions, Vfs, VfsFile};

/// Zero-fill chunk when creating a segment; each chunk is made durable before the next
/// is written (see [`Segments::fill`]).
const FILL_CHUNK: usize = 256 << 10;

/// Longest pause after one chunk of a paced zero-fill (see [`Segments::fill`]).
const FILL_PAUSE_MAX: Duration = Duration::from_millis(50);

/// Whether and for whom [`Segments::file`] makes a missing segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Make {
    /// Only open an existing file.
    No,
    /// The flush leader needs it now: make it if missing (the log counts this).
    Inline,
    /// Preparation ahead of need (WAL writer, open, checkpoint).
    Ahead,
}

/// An open segment and how [`Segments::file`] found it.
pub(super) type SegmentFile = (Arc<dyn VfsFile>, Found);

/// How [`Segments::file`] found the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// Already open (prepared, or in use).
    Open,
    /// Existed on disk (from before this open) and was opened now.
    OnDisk,
    /// Being made by another thread: this one waited for it.
    Waited,
    /// Made by this call.
    Made,
}

/// A failed creation, and whether the failure left a renamed file whose name may not be
/// durable (a failed fsync of the directory after the rename): the log must then latch,
/// as for any failed fsync (PostgreSQL PANICs), since a later write into that file could
/// be acknowledged while its name is lost at a crash.
#[derive(Debug)]
pub(super) struct MakeError {
    pub error: WalError,
    pub after_rename: bool,
}

impl From<WalError> for MakeError {
    fn from(error: WalError) -> Self {
        MakeError {
            error,
            after_rename: false,
        }
    }
}

#[derive(Debug)]
pub(super) struct Segments {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    pub size: u64,
    dsync: bool,
    /// Serializes the file-system-changing work (see the module doc).
    make: Mutex<()>,
    open: Mutex<BTreeMap<u64, Arc<dyn VfsFile>>>,
    /// Segments released by a checkpoint (wholly before its redo point), oldest first:
    /// the only ones that may be renamed into new segments.
    recyclable: Mutex<Vec<u64>>,
    /// Fewest released segments a release keeps (`WalOptions::recycle_segments`, from
    /// min_wal_size).
    recycle_min: usize,
    /// Most released segments kept in `recyclable`: `recycle_min`, or more when the
    /// checkpointer's distance estimate asks for more ([`Segments::set_recycle_target`]).
    recycle_max: AtomicUsize,
    /// Segment files created and zero-filled.
    added: AtomicU64,
    /// Segment files made by renaming a released one.
    recycled: AtomicU64,
    /// Released segment files unlinked.
    removed: AtomicU64,
    /// Pauses a paced zero-fill took between chunks.
    fill_pauses: AtomicU64,
    /// pg_stat_io's WAL rows: the zero-fills here (`init`), the log's writes and fsyncs
    /// (`normal`, counted by the flush path).
    pub(super) io: crate::stats::WalIoStats,
    /// Test hooks (`HookPoint::SegmentSwitch`).
    pub(super) probe: crate::hooks::Probe,
}

/// Whether a segment being made ahead of need is needed soon: a paced zero-fill stops
/// pausing once this says yes.
pub(super) type Urgent<'a> = &'a dyn Fn() -> bool;

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> WalError + 'a {
    move |source| WalError::Io(IoError::new(op, path, source))
}

impl Segments {
    /// Segment files under `dir` of `size` bytes, opened O_DSYNC with `dsync`, keeping up
    /// to `recycle_max` released ones for recycling.
    pub fn new(
        vfs: Arc<dyn Vfs>,
        dir: PathBuf,
        size: u64,
        dsync: bool,
        recycle_max: usize,
    ) -> Result<Self, WalError> {
        // Flushes pad to whole blocks and a write never crosses a segment: a segment holds
        // whole blocks.
        debug_assert!(
            size > 0 && size % super::WAL_BLOCK == 0,
            "WAL segment size {size} is not a whole number of {}-byte blocks",
            super::WAL_BLOCK
        );
        vfs.create_dir_all(&dir).map_err(io("creating", &dir))?;
        Ok(Self {
            vfs,
            dir,
            size,
            dsync,
            make: Mutex::new(()),
            open: Mutex::new(BTreeMap::new()),
            recyclable: Mutex::new(Vec::new()),
            recycle_min: recycle_max,
            recycle_max: AtomicUsize::new(recycle_max),
            added: AtomicU64::new(0),
            recycled: AtomicU64::new(0),
            removed: AtomicU64::new(0),
            fill_pauses: AtomicU64::new(0),
            io: Default::default(),
            probe: Default::default(),
        })
    }

    /// Pauses paced zero-fills took between chunks since open.
    #[cfg(test)]
    pub fn fill_pauses(&self) -> u64 {
        self.fill_pauses.load(Ordering::Relaxed)
    }

    /// Segment files added, recycled and removed since open.
    pub fn counts(&self) -> SegmentCounts {
        SegmentCounts {
            added: self.added.load(Ordering::Relaxed),
            recycled: self.recycled.load(Ordering::Relaxed),
            removed: self.removed.load(Ordering::Relaxed),
        }
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

    /// The open handle of `segno`, if it is open (prepared or in use): a map lookup.
    pub fn open_file(&self, segno: u64) -> Option<Arc<dyn VfsFile>> {
        self.open.lock().get(&segno).cloned()
    }

    /// The file of segment `segno`, opened if it exists; made if not, per `make`. Returns
    /// None only with [`Make::No`] for a missing file.
    pub fn file(&self, segno: u64, make: Make) -> Result<Option<SegmentFile>, MakeError> {
        self.file_paced(segno, make, None)
    }

    /// [`Self::file`]; a zero-fill it does pauses between chunks while `urgent` says no
    /// (see [`Self::fill`]). The flush leader never passes one.
    pub fn file_paced(
        &self,
        segno: u64,
        make: Make,
        urgent: Option<Urgent<'_>>,
    ) -> Result<Option<SegmentFile>, MakeError> {
        if let Some(f) = self.open_file(segno) {
            return Ok(Some((f, Found::Open)));
        }
        // Slow path: one maker at a time. Whoever held `make` before us may have made it.
        let _making = self.make.lock();
        if let Some(f) = self.open_file(segno) {
            return Ok(Some((f, Found::Waited)));
        }
        let path = self.path(segno);
        let exists = self.vfs.exists(&path).map_err(io("checking", &path))?;
        let found = if exists {
            Found::OnDisk
        } else if make == Make::No {
            return Ok(None);
        } else {
            self.make(segno, &path, urgent)?;
            Found::Made
        };
        let opts = OpenOptions {
            dsync: self.dsync,
            ..OpenOptions::read_write()
        };
        let f = self.vfs.open(&path, opts).map_err(io("opening", &path))?;
        self.open.lock().insert(segno, f.clone());
        Ok(Some((f, found)))
    }

    /// Creates segment `segno`: renames a segment a checkpoint released if one is waiting
    /// (its stale records fail the LSN check), else creates and zero-fills a new file.
    /// Holds `make`.
    fn make(&self, segno: u64, path: &Path, urgent: Option<Urgent<'_>>) -> Result<(), MakeError> {
        self.probe
            .fire(crate::hooks::HookPoint::SegmentSwitch, segno);
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
            if let Err(e) = self.vfs.rename(&from, path) {
                // Not renamed: it can still be recycled later.
                self.recyclable.lock().insert(0, old);
                return Err(io("recycling", &from)(e).into());
            }
            self.recycled.fetch_add(1, Ordering::Relaxed);
        } else {
            let tmp = self.dir.join(format!("{segno:016X}.tmp"));
            if let Err(e) = self.fill(&tmp, urgent) {
                // Never renamed, so never used; a leftover is overwritten by the next try.
                let _ = self.vfs.unlink(&tmp);
                return Err(e.into());
            }
            self.vfs.rename(&tmp, path).map_err(io("renaming", &tmp))?;
            self.added.fetch_add(1, Ordering::Relaxed);
        }
        self.vfs.sync_dir(&self.dir).map_err(|e| MakeError {
            error: io("fsync of directory", &self.dir)(e),
            after_rename: true,
        })?;
        Ok(())
    }

    /// Writes a zero-filled, fsynced file of the segment size at `tmp`, a chunk at a time,
    /// each chunk synced before the next is written. One sync of the whole file at the end
    /// hands the device 16 MiB at once, and every commit's fdatasync queues behind it:
    /// measured with one TPC-B client, synchronous commit, no checkpoint, a segment made
    /// about once a second, the per-second maximum latency was 27-40 ms with 16 MiB
    /// segments and 10-12 ms with 4 MiB ones (the device's own fdatasync: 3 ms). Chunked,
    /// a commit waits behind at most one chunk.
    ///
    /// Paced (`urgent` given: preparation ahead of need), each chunk is followed by a pause
    /// as long as the chunk took (at most [`FILL_PAUSE_MAX`]) until `urgent` says the
    /// segment is needed soon: back to back, the chunks keep a slow device busy for the
    /// whole fill, and every commit's fdatasync queues behind one. Measured on a 10 MB/s
    /// throttled device (TPC-B, 8 clients at 300 tps): each 16 MiB fill was a 1-2 s stall
    /// of every commit; paced, the log gets about half the device while a fill runs.
    fn fill(&self, tmp: &Path, urgent: Option<Urgent<'_>>) -> Result<(), WalError> {
        let f = self
            .vfs
            .open(tmp, OpenOptions::create())
            .map_err(io("creating", tmp))?;
        let zeros = vec![0u8; FILL_CHUNK.min(self.size as usize)];
        let mut off = 0u64;
        while off < self.size {
            let chunk = Instant::now();
            let n = zeros.len().min((self.size - off) as usize);
            let w = f
                .write_at(&zeros[..n], off)
                .map_err(io("zero-filling", tmp))?;
            self.io.count(
                WalIoContext::Init,
                IoOp::Write,
                1,
                w as u64,
                chunk.elapsed(),
            );
            if w != n {
                return Err(WalError::Io(IoError::short(
                    "zero-filling",
                    tmp,
                    IoAt::Offset(off),
                    w,
                    n,
                )));
            }
            off += n as u64;
            if off < self.size {
                let synced = Instant::now();
                f.sync_data().map_err(io("fsync of", tmp))?;
                self.io
                    .count(WalIoContext::Init, IoOp::Fsync, 1, 0, synced.elapsed());
                if let Some(urgent) = urgent {
                    if !urgent() {
                        self.fill_pauses.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(chunk.elapsed().min(FILL_PAUSE_MAX));
                    }
                }
            }
        }
        let synced = Instant::now();
        f.sync_all().map_err(io("fsync of", tmp))?;
        self.io
            .count(WalIoContext::Init, IoOp::Fsync, 1, 0, synced.elapsed());
        Ok(())
    }

    /// Keeps up to `target` released segments from now on (never fewer than the floor
    /// given at open): PostgreSQL's XLOGfileslop, sized from the checkpoint distance.
    pub fn set_recycle_target(&self, target: usize) {
        self.recycle_max
            .store(target.max(self.recycle_min), Ordering::Relaxed);
    }

    /// Drops segments wholly before `segno` (the redo point's segment): keeps up to
    /// `recycle_max` of them (the newest) for recycling, unlinks the rest. Returns how many
    /// it unlinked.
    pub fn remove_before(&self, segno: u64) -> Result<usize, WalError> {
        let _making = self.make.lock();
        let old: Vec<u64> = self.list()?.into_iter().filter(|&s| s < segno).collect();
        {
            let mut open = self.open.lock();
            for s in &old {
                open.remove(s);
            }
        }
        let mut unlink = Vec::new();
        {
            let mut recyclable = self.recyclable.lock();
            for s in &old {
                if !recyclable.contains(s) {
                    recyclable.push(*s);
                }
            }
            recyclable.sort_unstable();
            let keep = self.recycle_max.load(Ordering::Relaxed);
            while recyclable.len() > keep {
                unlink.push(recyclable.remove(0));
            }
        }
        // Unlinking is forever: only segments released before this redo point may go.
        assert!(
            unlink.iter().all(|&s| s < segno),
            "unlinking WAL segments {unlink:?}, not all before the redo segment {segno:016X}"
        );
        let mut removed = 0;
        for s in unlink {
            let p = self.path(s);
            self.vfs.unlink(&p).map_err(io("removing", &p))?;
            self.removed.fetch_add(1, Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::MemVfs;

    const SIZE: u64 = 8192;

    fn segments(vfs: &MemVfs, recycle_max: usize) -> Segments {
        let dir = PathBuf::from("/db/wal");
        Segments::new(Arc::new(vfs.clone()), dir, SIZE, false, recycle_max).unwrap()
    }

    fn counts(added: u64, recycled: u64, removed: u64) -> SegmentCounts {
        SegmentCounts {
            added,
            recycled,
            removed,
        }
    }

    /// New segments are added (zero-filled) until a release leaves some to recycle; a
    /// release keeps the newest `recycle_max` released segments and unlinks the others; new
    /// segments take the kept ones oldest first, then are added again. The counts follow
    /// each file operation. How: segment files on MemVfs, released by `remove_before`.
    #[test]
    fn releases_keep_at_most_recycle_max_and_every_file_operation_is_counted() {
        let vfs = MemVfs::new();
        let s = segments(&vfs, 2);
        for segno in 0..6 {
            s.file(segno, Make::Ahead).unwrap().unwrap();
        }
        assert_eq!(s.counts(), counts(6, 0, 0));
        assert!(
            vfs.contents(&s.path(5)).unwrap().iter().all(|&b| b == 0),
            "an added segment is zero-filled"
        );
        assert_eq!(vfs.contents(&s.path(5)).unwrap().len(), SIZE as usize);

        assert_eq!(s.remove_before(5).unwrap(), 3, "5 released, 2 kept");
        assert_eq!(s.counts(), counts(6, 0, 3));
        assert_eq!(
            s.list().unwrap(),
            vec![3, 4, 5],
            "the newest released are kept"
        );

        vfs.set_contents(&s.path(3), vec![7; SIZE as usize]);
        s.file(6, Make::Ahead).unwrap().unwrap();
        assert_eq!(s.counts(), counts(6, 1, 3));
        assert_eq!(
            vfs.contents(&s.path(6)).unwrap(),
            vec![7; SIZE as usize],
            "segment 6 is segment 3 renamed"
        );
        s.file(7, Make::Ahead).unwrap().unwrap();
        s.file(8, Make::Ahead).unwrap().unwrap();
        assert_eq!(s.counts(), counts(7, 2, 3), "one recycled, then one added");
        assert_eq!(s.list().unwrap(), vec![5, 6, 7, 8]);
        // Opening an existing segment counts nothing; nor does a release that keeps all.
        s.file(5, Make::Ahead).unwrap().unwrap();
        assert_eq!(s.remove_before(7).unwrap(), 0);
        assert_eq!(s.counts(), counts(7, 2, 3));
        assert_eq!(s.remove_before(9).unwrap(), 2);
        assert_eq!(s.counts(), counts(7, 2, 5));
        assert_eq!(s.list().unwrap(), vec![7, 8]);
    }

    /// A recycle target above the floor keeps that many released segments; one below it
    /// keeps the floor.
    #[test]
    fn a_recycle_target_keeps_more_but_never_less_than_the_floor() {
        let vfs = MemVfs::new();
        let s = segments(&vfs, 1);
        for segno in 0..8 {
            s.file(segno, Make::Ahead).unwrap().unwrap();
        }
        s.set_recycle_target(4);
        assert_eq!(s.remove_before(6).unwrap(), 2, "6 released, 4 kept");
        assert_eq!(s.list().unwrap(), vec![2, 3, 4, 5, 6, 7]);
        s.set_recycle_target(0);
        assert_eq!(
            s.remove_before(7).unwrap(),
            4,
            "7 released, the floor of 1 kept"
        );
        assert_eq!(s.list().unwrap(), vec![6, 7]);
    }

    /// With `recycle_max` 0 every released segment is unlinked and nothing is recycled.
    /// Proves: a paced zero-fill pauses after every chunk but the last while the segment
    /// is not needed soon, stops pausing once `urgent` says it is, and an unpaced one
    /// (the flush leader's, open's) never pauses; every fill still yields a whole segment.
    #[test]
    fn a_paced_fill_pauses_between_chunks_until_the_segment_is_urgent() {
        let vfs = Arc::new(MemVfs::new());
        let size = 4 * FILL_CHUNK as u64;
        let s = Segments::new(vfs.clone(), PathBuf::from("/w"), size, false, 0).unwrap();
        let never = || false;
        s.file_paced(0, Make::Ahead, Some(&never)).unwrap().unwrap();
        assert_eq!(
            s.fill_pauses(),
            3,
            "a pause after each of the first three chunks"
        );
        let calls = std::cell::Cell::new(0);
        let soon = || {
            calls.set(calls.get() + 1);
            calls.get() > 1
        };
        s.file_paced(1, Make::Ahead, Some(&soon)).unwrap().unwrap();
        assert_eq!(s.fill_pauses(), 4, "one pause, then urgent");
        s.file(2, Make::Ahead).unwrap().unwrap();
        s.file(3, Make::Inline).unwrap().unwrap();
        assert_eq!(s.fill_pauses(), 4, "unpaced fills never pause");
        for segno in 0..4 {
            let f = vfs.open(&s.path(segno), OpenOptions::read_write()).unwrap();
            assert_eq!(f.len().unwrap(), size, "segment {segno} has its full size");
        }
    }

    #[test]
    fn recycle_max_zero_removes_every_released_segment() {
        let vfs = MemVfs::new();
        let s = segments(&vfs, 0);
        for segno in 0..3 {
            s.file(segno, Make::Ahead).unwrap().unwrap();
        }
        assert_eq!(s.remove_before(2).unwrap(), 2);
        s.file(3, Make::Ahead).unwrap().unwrap();
        assert_eq!(s.counts(), counts(4, 0, 2));
        assert_eq!(s.list().unwrap(), vec![2, 3]);
    }
}
