//! A fork's life and size: create, exists, the cached size (`nblocks`), extension
//! (buffered, zeroed, a leftover segment past the end emptied first), truncation and
//! unlink (every segment, segment 0 last once the others' removal is durable). Locks: the
//! fork's `extend_lock` before its `segments` lock, as the module above says.

use std::time::Instant;

use super::error::file_err;
use super::*;
use crate::stats::{IoContext, IoOp};
use crate::sync::Ordering;
use crate::types::{BlockNumber, BufferTag, ForkNumber, RelFileId, MAX_BLOCK_NUMBER};
use crate::vfs::{IoError, OpenOptions};

impl Smgr {
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

    pub(super) fn nblocks_locked(
        &self,
        f: &Fork,
        rel: RelFileId,
        fork: ForkNumber,
    ) -> SmgrResult<u32> {
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
    pub(super) fn end_extension(
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
}
