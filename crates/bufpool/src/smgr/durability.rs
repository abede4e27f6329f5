//! Making writes durable: the fsync queue drained at a checkpoint (`sync`, `sync_each`:
//! segments, then the directories whose entries changed), writeback hints for a writer's
//! recent writes, and the slow-device notes a long fsync leaves (`slow_sync_in`). Locks:
//! the queue's own (`fsync.rs`), never during an fsync.

use std::time::{Duration, Instant};

use super::error::file_err;
use super::*;
use crate::stats::{IoContext, IoOp};
use crate::sync::Ordering;
use crate::types::{BlockNumber, ForkNumber, RelFileId, MAX_BLOCK_NUMBER};

impl Smgr {
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

    pub(super) fn note_slow_tablespace(&self, tablespace: u32) {
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
