//! Page reads and writes of the storage manager: one page or a vectored run (split at
//! segment boundaries), buffered (each write registers its segment's fsync) or durable
//! through the segment's O_DSYNC handle (nothing to fsync later), and the page targets
//! the io_uring writer submits itself. Locks: a fork's `segments` lock only to find (or
//! open) a segment's handle, never across the system call (see the module above).

use std::io::{IoSlice, IoSliceMut};
use std::time::{Duration, Instant};

use super::*;
use crate::stats::{IoContext, IoOp};
use crate::sync::{Arc, Ordering};
use crate::types::{BlockNumber, BufferTag, ForkNumber, RelFileId, MAX_BLOCK_NUMBER};
use crate::vfs::{IoError, VfsFile};

impl Smgr {
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
    /// them (PostgreSQL's open_datasync: checkpoint writes through O_SYNC). Requests
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

    pub(super) fn writev_op(
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
}
