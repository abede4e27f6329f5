//! The checkpoint's write phase: mark, snapshot, sort, balance,
//! combine, hint writeback.
//!
//! Owns: the preallocated snapshot array (one entry per buffer, allocated with the pool, so
//! a checkpoint never fails for memory), the write scheduler shared by the checkpoint's
//! writers, and one writeback context per tablespace (or one shared).
//!
//! Steps of [`BufferPool::checkpoint_write`]:
//! 1. **Mark and snapshot.** Every buffer that is dirty now gets CHECKPOINT_NEEDED under its
//!    header lock and its (tag, buffer id) is copied into the array. Only these are
//!    written: a page dirtied later belongs to the next checkpoint. The caller chose the
//!    redo point before calling, so every change before it is in a marked buffer.
//! 2. **Sort** the snapshot by (tablespace, relation, fork, block) (`sort`; off keeps
//!    buffer order, the 2007 behaviour).
//! 3. **Balance.** One slice of the array per tablespace; a min-heap keyed on each slice's
//!    progress (fraction written) hands out the next run from the tablespace that is
//!    furthest behind, so every device stays busy and all finish together.
//! 4. **Combine.** A run is up to `combine_pages` entries of one fork with consecutive
//!    blocks. The writer pins each buffer that still holds its page with
//!    CHECKPOINT_NEEDED, takes its content lock shared (blocking for the first buffer of a
//!    run, try-lock for the rest, so holding several locks can never deadlock) and claims
//!    its write I/O (waiting only for the first). Then one WAL flush to the run's highest
//!    page LSN, a per-page checksum into a multi-page scratch, one vectored write, and the
//!    I/O ended per page. If the combined write fails, the pages are written one by one,
//!    so each gets its own outcome. A buffer written meanwhile by the bgwriter or a
//!    backend no longer has CHECKPOINT_NEEDED and counts as done.
//! 5. **Writeback hints.** Each written page joins its tablespace's writeback context (or
//!    the shared one), which asks the OS to start writeback every `flush_after_pages`.
//! 6. **Pacing.** After each run the [`CheckpointPacer`] is told the progress and may sleep
//!    (the engine spreads the checkpoint over `checkpoint_completion_target`).
//!
//! `writers` threads share the scheduler (several checkpoint writers); the caller's
//! thread is one of them. The fsync phase is the engine's (`Smgr::sync`).
//!
//! Locks: the snapshot mutex for the whole write phase (one checkpoint at a time); the
//! scheduler's mutex only to hand out a run; a writeback context's mutex only to add or
//! issue. Buffer locks in the pool's order (header → content), content locks of a run in
//! block order with try-lock after the first.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::state::*;
use super::{BufferPool, BufferResult, Io};
use crate::buffer::BufferError;
use crate::page;
use crate::smgr::WritebackContext;
use crate::stats::IoContext;
use crate::sync::{AtomicBool, AtomicU64, Mutex, Ordering};
use crate::types::{BufferTag, Lsn};
use crate::vfs::AlignedBuf;

/// Largest run one vectored write may carry, in pages (bounds the scratch).
pub(crate) const MAX_COMBINE_PAGES: usize = 128;

/// Which writeback contexts a checkpoint uses: one per device or one shared (whether a
/// device's hints should be kept apart was left open when PostgreSQL 9.6 sorted them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WritebackScope {
    /// One context per tablespace: each device's hints are sorted and merged on their own.
    #[default]
    PerTablespace,
    /// One context for the whole checkpoint (PostgreSQL's choice).
    Shared,
}

/// How a checkpoint writes its pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointWriteOptions {
    /// Sort the snapshot by tag (off: buffer order).
    pub sort: bool,
    /// Most pages per vectored write (1: one page per write).
    pub combine_pages: usize,
    /// Pages between writeback hints (0: no hints).
    pub flush_after_pages: usize,
    /// Which writeback contexts the hints go through.
    pub writeback: WritebackScope,
    /// Threads writing (the caller's included).
    pub writers: usize,
    /// Write through O_DSYNC handles (`checkpoint_sync_method = open_datasync`): durable on
    /// return, no fsync request, no writeback hint.
    pub durable: bool,
}

impl Default for CheckpointWriteOptions {
    fn default() -> Self {
        CheckpointWriteOptions {
            sort: true,
            combine_pages: 16,
            flush_after_pages: 32,
            writeback: WritebackScope::PerTablespace,
            writers: 1,
            durable: false,
        }
    }
}

/// Told the progress after each run; may sleep to spread the writes. Must be callable from
/// several writer threads at once.
pub trait CheckpointPacer: Sync {
    /// `done` of `total` snapshot entries are handled (written or found clean).
    fn pace(&self, done: usize, total: usize);
    /// Whether writers should stop early (the checkpoint is being abandoned).
    fn cancelled(&self) -> bool {
        false
    }
}

/// A pacer that never sleeps: an immediate checkpoint.
#[derive(Debug, Default, Clone, Copy)]
pub struct Immediate;

impl CheckpointPacer for Immediate {
    fn pace(&self, _done: usize, _total: usize) {}
}

/// What a checkpoint's write phase did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckpointWriteReport {
    /// Buffers dirty at the start (marked CHECKPOINT_NEEDED).
    pub marked: u64,
    /// Of those, written by this checkpoint.
    pub written: u64,
    /// Of those, found clean or rewritten by someone else by the time their turn came.
    pub skipped: u64,
    /// Write calls (a combined run is one).
    pub write_calls: u64,
    /// Writeback hint calls (merged ranges).
    pub writeback_calls: u64,
    /// Tablespaces among the marked buffers.
    pub tablespaces: u64,
    /// Pool size when marked (for "x% of buffers").
    pub nbuffers: u64,
}

/// One snapshot entry: a marked buffer and the page it held when marked.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct CkptEntry {
    tag: BufferTag,
    id: u32,
}

/// The snapshot array, preallocated for every buffer.
///
/// Invariant: the array never grows past what it was made with (a checkpoint marks each
/// buffer at most once), so its size is known without its lock, which a checkpoint holds
/// for the whole of its write phase.
#[derive(Debug)]
pub(super) struct CkptArray {
    entries: Mutex<Vec<CkptEntry>>,
    /// The allocation's size, in bytes, recorded when it was made.
    reserved: usize,
}

impl CkptArray {
    /// The array's allocation, in bytes (reserved for every buffer; the pages it spans are
    /// touched, and count in the resident size, once a checkpoint fills them). Takes no
    /// lock: it answers while a checkpoint runs.
    pub(super) fn heap_bytes(&self) -> usize {
        self.reserved
    }
}

impl CkptArray {
    pub(super) fn new(nbuffers: usize) -> Self {
        let entries = Vec::with_capacity(nbuffers);
        let reserved = entries.capacity() * std::mem::size_of::<CkptEntry>();
        CkptArray {
            entries: Mutex::new(entries),
            reserved,
        }
    }
}

/// A tablespace's slice of the sorted array and how far its writing has got.
#[derive(Debug)]
struct Slice {
    next: usize,
    end: usize,
    total: usize,
}

impl Slice {
    /// Progress as a fixed-point fraction (the heap's key).
    fn progress(&self, start: usize) -> u64 {
        debug_assert!(
            start <= self.next && self.next <= self.end && self.end - start == self.total,
            "slice [{start}, {}) of {} entries has its cursor at {}",
            self.end,
            self.total,
            self.next
        );
        (((self.next - start) as u64) << 32) / self.total.max(1) as u64
    }
}

/// Hands out runs: the tablespace furthest behind first.
struct Scheduler {
    slices: Vec<(usize, Slice)>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
}

impl Scheduler {
    fn new(entries: &[CkptEntry], by_tablespace: bool) -> Scheduler {
        let mut slices = Vec::new();
        let mut start = 0;
        while start < entries.len() {
            let ts = entries[start].tag.rel.tablespace;
            let mut end = start + 1;
            if by_tablespace {
                while end < entries.len() && entries[end].tag.rel.tablespace == ts {
                    end += 1;
                }
            } else {
                end = entries.len();
            }
            slices.push((
                start,
                Slice {
                    next: start,
                    end,
                    total: end - start,
                },
            ));
            start = end;
        }
        debug_assert_eq!(
            slices.iter().map(|(_, s)| s.total).sum::<usize>(),
            entries.len(),
            "the tablespace slices do not cover the snapshot exactly"
        );
        let heap = (0..slices.len()).map(|i| Reverse((0, i))).collect();
        Scheduler { slices, heap }
    }

    /// The next run: entries `[a, b)` of one fork with consecutive blocks, at most `max`.
    fn next_run(&mut self, entries: &[CkptEntry], max: usize) -> Option<(usize, usize)> {
        let Reverse((_, i)) = self.heap.pop()?;
        let (start, s) = &mut self.slices[i];
        let a = s.next;
        let mut b = a + 1;
        while b < s.end && b - a < max {
            let (p, q) = (&entries[b - 1].tag, &entries[b].tag);
            if q.rel != p.rel || q.fork != p.fork || q.block != p.block.wrapping_add(1) {
                break;
            }
            b += 1;
        }
        debug_assert!(
            a < b && b <= s.end && b - a <= max,
            "run [{a}, {b}) is empty, longer than {max} or past its slice's end {}",
            s.end
        );
        s.next = b;
        if s.next < s.end {
            let key = s.progress(*start);
            self.heap.push(Reverse((key, i)));
        }
        Some((a, b))
    }
}

/// The state the writers share.
struct Shared<'a> {
    entries: &'a [CkptEntry],
    scheduler: Mutex<Scheduler>,
    /// Writeback contexts by tablespace slice (one entry when shared).
    contexts: Vec<(u32, Mutex<WritebackContext>)>,
    done: AtomicU64,
    written: AtomicU64,
    skipped: AtomicU64,
    write_calls: AtomicU64,
    writeback_calls: AtomicU64,
    failed: AtomicBool,
    first_error: Mutex<Option<BufferError>>,
}

/// A claimed buffer of the run being built.
#[derive(Clone, Copy)]
struct Claimed {
    id: u32,
    tag: BufferTag,
}

impl BufferPool {
    /// The checkpoint's write phase (see the module doc): marks every dirty buffer, then
    /// writes those, sorted, balanced, combined and hinted, pacing with `pacer`. The caller
    /// has set the redo point and flushed the WAL; it fsyncs afterwards. Fails with the
    /// first write error (the other writers stop at their next run; unwritten buffers stay
    /// dirty).
    pub fn checkpoint_write(
        &self,
        opts: &CheckpointWriteOptions,
        pacer: &dyn CheckpointPacer,
    ) -> BufferResult<CheckpointWriteReport> {
        let mut entries = self.ckpt.entries.lock();
        self.mark_for_checkpoint(&mut entries);
        debug_assert_eq!(
            entries.capacity() * std::mem::size_of::<CkptEntry>(),
            self.ckpt.reserved,
            "the checkpoint's snapshot array grew"
        );
        if opts.sort {
            entries.sort_unstable_by_key(|e| (e.tag, e.id));
            debug_assert!(
                entries
                    .windows(2)
                    .all(|w| (w[0].tag, w[0].id) < (w[1].tag, w[1].id)),
                "the checkpoint's snapshot is not sorted by (tag, buffer)"
            );
        }
        let entries: &[CkptEntry] = &entries;
        let scheduler = Scheduler::new(entries, opts.sort);
        let mut tablespaces: Vec<u32> = entries.iter().map(|e| e.tag.rel.tablespace).collect();
        tablespaces.sort_unstable();
        tablespaces.dedup();
        let limit = if opts.durable {
            0
        } else {
            opts.flush_after_pages
        };
        let contexts = match opts.writeback {
            WritebackScope::PerTablespace => tablespaces
                .iter()
                .map(|&ts| (ts, Mutex::new(WritebackContext::new(limit))))
                .collect(),
            WritebackScope::Shared => vec![(u32::MAX, Mutex::new(WritebackContext::new(limit)))],
        };
        let shared = Shared {
            entries,
            scheduler: Mutex::new(scheduler),
            contexts,
            done: AtomicU64::new(0),
            written: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            write_calls: AtomicU64::new(0),
            writeback_calls: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            first_error: Mutex::new(None),
        };
        let combine = opts.combine_pages.clamp(1, MAX_COMBINE_PAGES);
        let writers = opts.writers.max(1).min(entries.len().max(1));
        if writers == 1 {
            self.checkpoint_writer(&shared, opts, combine, pacer);
        } else {
            let writer = crate::stats::thread_writer();
            std::thread::scope(|scope| {
                for _ in 1..writers {
                    let shared = &shared;
                    scope.spawn(move || {
                        crate::stats::set_thread_writer(writer);
                        self.checkpoint_writer(shared, opts, combine, pacer);
                    });
                }
                self.checkpoint_writer(&shared, opts, combine, pacer);
            });
        }
        // The hints still pending.
        for (_, ctx) in &shared.contexts {
            match ctx.lock().issue(&self.smgr, IoContext::Normal) {
                Ok(n) => {
                    shared
                        .writeback_calls
                        .fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) => shared.fail(e.into()),
            }
        }
        if let Some(e) = shared.first_error.lock().take() {
            return Err(e);
        }
        // Each marked entry was written, found done (skipped), or left by a cancelled run.
        debug_assert!(
            shared.written.load(Ordering::Relaxed) + shared.skipped.load(Ordering::Relaxed)
                <= entries.len() as u64,
            "written {} + skipped {} exceed the {} marked buffers",
            shared.written.load(Ordering::Relaxed),
            shared.skipped.load(Ordering::Relaxed),
            entries.len()
        );
        Ok(CheckpointWriteReport {
            marked: entries.len() as u64,
            written: shared.written.load(Ordering::Relaxed),
            skipped: shared.skipped.load(Ordering::Relaxed),
            write_calls: shared.write_calls.load(Ordering::Relaxed),
            writeback_calls: shared.writeback_calls.load(Ordering::Relaxed),
            tablespaces: tablespaces.len() as u64,
            nbuffers: self.descs.len() as u64,
        })
    }

    /// The snapshot: every dirty, valid, mapped buffer marked CHECKPOINT_NEEDED and
    /// listed in `entries` (cleared first).
    fn mark_for_checkpoint(&self, entries: &mut Vec<CkptEntry>) {
        entries.clear();
        let capacity = entries.capacity();
        for d in self.descs.iter() {
            // Only a write clears DIRTY, and a write started after the caller's redo point
            // put every earlier change on storage: skipping a clean buffer without its
            // header lock is safe.
            if d.load_state() & DIRTY == 0 {
                continue;
            }
            let s = d.lock_header();
            if s & (DIRTY | VALID | TAG_VALID) == DIRTY | VALID | TAG_VALID {
                entries.push(CkptEntry {
                    tag: d.tag(),
                    id: d.id,
                });
                d.unlock_header(s | CHECKPOINT_NEEDED);
            } else {
                d.unlock_header(s);
            }
        }
        // Preallocated for every buffer, each marked at most once: the snapshot never
        // allocates, so a checkpoint never fails for memory.
        debug_assert!(
            entries.len() <= self.descs.len() && entries.capacity() == capacity,
            "the snapshot of {} entries outgrew its {capacity} preallocated ones",
            entries.len()
        );
    }

    /// One writer: takes runs until none is left, the checkpoint failed or was cancelled.
    fn checkpoint_writer(
        &self,
        shared: &Shared<'_>,
        opts: &CheckpointWriteOptions,
        combine: usize,
        pacer: &dyn CheckpointPacer,
    ) {
        let mut scratch = AlignedBuf::zeroed(combine * self.page_size);
        let mut run: Vec<Claimed> = Vec::with_capacity(combine);
        let total = shared.entries.len();
        loop {
            if shared.failed.load(Ordering::Relaxed) || pacer.cancelled() {
                return;
            }
            let Some((a, b)) = shared.scheduler.lock().next_run(shared.entries, combine) else {
                return;
            };
            for e in &shared.entries[a..b] {
                self.claim_for_checkpoint(shared, opts, e, &mut run, &mut scratch);
            }
            self.write_run(shared, opts, &mut run, &mut scratch);
            let done = shared.done.fetch_add((b - a) as u64, Ordering::Relaxed) + (b - a) as u64;
            pacer.pace(done as usize, total);
        }
    }

    /// Adds entry `e` to `run` if its buffer still needs this checkpoint's write; writes
    /// out the run first when `e` cannot join it.
    fn claim_for_checkpoint(
        &self,
        shared: &Shared<'_>,
        opts: &CheckpointWriteOptions,
        e: &CkptEntry,
        run: &mut Vec<Claimed>,
        scratch: &mut AlignedBuf,
    ) {
        let needed = |t: &BufferTag, s: u64| *t == e.tag && s & CHECKPOINT_NEEDED != 0;
        // The pin is the run's until `end_checkpoint_io` releases it.
        if !self.pin_if_raw(e.id, needed) {
            shared.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let d = &self.descs[e.id as usize];
        let adjacent = run.last().is_some_and(|last| {
            last.tag.rel == e.tag.rel
                && last.tag.fork == e.tag.fork
                && last.tag.block.wrapping_add(1) == e.tag.block
        });
        if !run.is_empty() {
            if adjacent && d.content_lock.try_lock_shared() {
                match self.try_start_write(d) {
                    Some(true) => {
                        run.push(Claimed {
                            id: e.id,
                            tag: e.tag,
                        });
                        return;
                    }
                    Some(false) => {
                        // SAFETY: taken by the successful try_lock_shared above.
                        unsafe { d.content_lock.unlock_shared() };
                        d.unpin();
                        shared.skipped.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    None => {
                        // SAFETY: as above.
                        unsafe { d.content_lock.unlock_shared() };
                    }
                }
            }
            // Cannot join: write what we have, then start a new run with this buffer
            // (holding nothing else, so blocking is safe).
            self.write_run(shared, opts, run, scratch);
        }
        d.content_lock.lock_shared();
        if self.start_io(d, Io::Write) {
            run.push(Claimed {
                id: e.id,
                tag: e.tag,
            });
        } else {
            // SAFETY: taken just above.
            unsafe { d.content_lock.unlock_shared() };
            d.unpin();
            shared.skipped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// [`BufferPool::start_io`] for a write that never waits: `Some(true)` claimed,
    /// `Some(false)` no write needed, `None` another I/O is in progress.
    fn try_start_write(&self, d: &super::descriptor::BufferDesc) -> Option<bool> {
        let s = d.lock_header();
        if s & (DIRTY | VALID) != DIRTY | VALID {
            d.unlock_header(s);
            return Some(false);
        }
        if s & IO_IN_PROGRESS != 0 {
            d.unlock_header(s);
            return None;
        }
        // As in start_io: the claimer's pin keeps the buffer's page under its write.
        debug_assert!(
            refcount(s) >= 1 && s & TAG_VALID != 0,
            "checkpoint write claimed on an unpinned or untagged buffer {}: {}",
            d.id,
            describe(s)
        );
        d.unlock_header((s | IO_IN_PROGRESS) & !JUST_DIRTIED);
        Some(true)
    }

    /// Writes the claimed run with one vectored write (pages one by one if that fails),
    /// ends each buffer's I/O, releases its lock and pin, and feeds the writeback context.
    fn write_run(
        &self,
        shared: &Shared<'_>,
        opts: &CheckpointWriteOptions,
        run: &mut Vec<Claimed>,
        scratch: &mut AlignedBuf,
    ) {
        if run.is_empty() {
            return;
        }
        let ps = self.page_size;
        let n = run.len();
        // One vectored write puts page i at block first + i: a gap or another fork in the
        // run would write pages over the wrong blocks.
        assert!(
            n <= MAX_COMBINE_PAGES
                && n * ps <= scratch.as_slice().len()
                && run.windows(2).all(|w| {
                    w[1].tag.rel == w[0].tag.rel
                        && w[1].tag.fork == w[0].tag.fork
                        && w[1].tag.block == w[0].tag.block.wrapping_add(1)
                }),
            "checkpoint run of {n} pages from {} is not consecutive blocks of one fork",
            run[0].tag
        );
        let mut max_lsn = Lsn(0);
        for (i, c) in run.iter().enumerate() {
            debug_assert!(
                {
                    let d = &self.descs[c.id as usize];
                    let s = d.load_state();
                    s & (IO_IN_PROGRESS | VALID) == (IO_IN_PROGRESS | VALID) && d.tag_is(&c.tag)
                },
                "run member buffer {} ({}) is not a claimed write of that page: {:?}",
                c.id,
                c.tag,
                self.descs[c.id as usize]
            );
            let copy = &mut scratch.as_mut_slice()[i * ps..(i + 1) * ps];
            // SAFETY: pinned and content-locked shared by this run; the frame does not
            // change while the shared slice lives (only for this copy).
            copy.copy_from_slice(unsafe { self.page_slice(c.id) });
            max_lsn = max_lsn.max(page::lsn(copy));
            page::set_checksum(copy, &c.tag);
        }
        let first = run[0].tag;
        // WAL before data (ARCHITECTURE's rule 1), once for the whole run.
        let result: BufferResult<()> = self
            .wal
            .flush(max_lsn)
            .map_err(|source| BufferError::WalFlush {
                tag: first,
                lsn: max_lsn,
                source,
            })
            .and_then(|()| {
                let bufs: Vec<&[u8]> = scratch.as_slice()[..n * ps].chunks(ps).collect();
                shared.write_calls.fetch_add(1, Ordering::Relaxed);
                self.write_pages(first, &bufs, opts.durable)
            });
        let ok = result.is_ok();
        let mut error = result.err();
        if let (true, Some(BufferError::Storage(_))) = (n > 1, &error) {
            // Per-page outcomes: retry each page alone; each buffer ends with its own.
            error = None;
            for (i, c) in run.iter().enumerate() {
                let page = &scratch.as_slice()[i * ps..(i + 1) * ps];
                shared.write_calls.fetch_add(1, Ordering::Relaxed);
                let r = self.write_pages(c.tag, &[page], opts.durable);
                self.end_checkpoint_io(shared, opts, c, r.is_ok());
                if let Err(e) = r {
                    error.get_or_insert(e);
                }
            }
            if let Some(e) = error.take() {
                shared.fail(e);
            }
            run.clear();
            return;
        }
        for c in run.iter() {
            self.end_checkpoint_io(shared, opts, c, ok);
        }
        if let Some(e) = error {
            shared.fail(e);
        }
        run.clear();
    }

    /// Writes consecutive pages from `first` (through O_DSYNC handles when `durable`).
    fn write_pages(&self, first: BufferTag, bufs: &[&[u8]], durable: bool) -> BufferResult<()> {
        let r = if durable {
            self.smgr
                .writev_durable(first.rel, first.fork, first.block, bufs, IoContext::Normal)
        } else {
            self.smgr
                .writev(first.rel, first.fork, first.block, bufs, IoContext::Normal)
        };
        r.map_err(BufferError::from)
    }

    /// Ends one buffer's write I/O, releases its content lock and pin, and adds the page to
    /// its writeback context.
    fn end_checkpoint_io(
        &self,
        shared: &Shared<'_>,
        opts: &CheckpointWriteOptions,
        c: &Claimed,
        ok: bool,
    ) {
        let d = &self.descs[c.id as usize];
        self.terminate_io(d, Io::Write, ok);
        // SAFETY: the run took this content lock shared when it claimed the buffer.
        unsafe { d.content_lock.unlock_shared() };
        d.unpin();
        if !ok {
            return;
        }
        shared.written.fetch_add(1, Ordering::Relaxed);
        if opts.durable {
            return;
        }
        let ctx = match opts.writeback {
            WritebackScope::Shared => &shared.contexts[0].1,
            WritebackScope::PerTablespace => {
                let ts = c.tag.rel.tablespace;
                match shared.contexts.iter().find(|(t, _)| *t == ts) {
                    Some((_, ctx)) => ctx,
                    None => return,
                }
            }
        };
        match ctx.lock().add(&self.smgr, c.tag, IoContext::Normal) {
            Ok(n) => {
                shared
                    .writeback_calls
                    .fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) => shared.fail(e.into()),
        }
    }
}

impl Shared<'_> {
    fn fail(&self, e: BufferError) {
        self.failed.store(true, Ordering::Relaxed);
        self.first_error.lock().get_or_insert(e);
    }
}

#[cfg(test)]
pub(in crate::buffer) mod tests {
    use super::*;
    use crate::config::Config;
    use crate::sync::Arc;
    use crate::types::{ForkNumber, RelFileId};
    use crate::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs, MemVfs, Vfs};
    use std::path::Path;

    pub(in crate::buffer) const PS: usize = 4096;

    /// A pool of `buffers` 4 kB buffers over `vfs`, with no WAL.
    pub(in crate::buffer) fn pool(vfs: Arc<dyn Vfs>, buffers: u64) -> BufferPool {
        let mut c = Config::default();
        c.set("shared_buffers", &buffers.to_string()).unwrap();
        c.set("block_size", "4kB").unwrap();
        let smgr = crate::smgr::Smgr::open(
            vfs,
            Path::new("/db"),
            crate::buffer::PoolConfig::smgr_options(&c, true).unwrap(),
        )
        .unwrap();
        BufferPool::new(Arc::new(smgr), &c, Arc::new(crate::NoWal)).unwrap()
    }

    /// Adds `n` pages to `rel`, each initialized and stamped with `fill` at byte 100, and
    /// leaves them dirty in the pool.
    fn dirty_pages(pool: &BufferPool, rel: RelFileId, n: u32, fill: u8) {
        if !pool.smgr.exists(rel, ForkNumber::Main).unwrap() {
            pool.create_relation(rel, ForkNumber::Main).unwrap();
        }
        for _ in 0..n {
            let b = pool.extend(rel, ForkNumber::Main).unwrap();
            let mut g = b.write();
            crate::page::init(&mut g, 0);
            g[100] = fill;
        }
    }

    pub(in crate::buffer) fn is_dirty(pool: &BufferPool, tag: BufferTag) -> bool {
        let b = pool.read(tag).unwrap();
        pool.descs[b.id as usize].load_state() & DIRTY != 0
    }

    /// Reads block `block` of `rel` from storage and checks its checksum.
    pub(in crate::buffer) fn stored(pool: &BufferPool, rel: RelFileId, block: u32) -> Vec<u8> {
        let tag = BufferTag::new(rel, ForkNumber::Main, block);
        let mut buf = vec![0u8; PS];
        pool.smgr.read(&tag, &mut buf, IoContext::Normal).unwrap();
        crate::page::verify(&buf, &tag).unwrap();
        buf
    }

    /// Runs a closure at the first pace call only.
    struct AtFirstPace<F: Fn() + Sync>(F, AtomicBool);
    impl<F: Fn() + Sync> CheckpointPacer for AtFirstPace<F> {
        fn pace(&self, _done: usize, _total: usize) {
            if !self.1.swap(true, Ordering::SeqCst) {
                (self.0)();
            }
        }
    }

    const REL: RelFileId = RelFileId::new(0, 10);

    /// Proves: adjacent dirty pages go out in one vectored write per `combine_pages`, every
    /// page with its own valid checksum, and all are clean afterwards.
    #[test]
    fn adjacent_pages_are_combined_and_checksummed_per_page() {
        let p = pool(Arc::new(MemVfs::new()), 64);
        dirty_pages(&p, REL, 40, 7);
        let opts = CheckpointWriteOptions {
            combine_pages: 16,
            flush_after_pages: 8,
            ..Default::default()
        };
        let r = p.checkpoint_write(&opts, &Immediate).unwrap();
        assert_eq!((r.marked, r.written, r.skipped), (40, 40, 0));
        assert_eq!(r.write_calls, 3, "40 pages in runs of 16: {r:?}");
        assert!(r.writeback_calls >= 1, "{r:?}");
        for b in 0..40 {
            assert_eq!(stored(&p, REL, b)[100], 7);
            assert!(!is_dirty(&p, BufferTag::new(REL, ForkNumber::Main, b)));
        }
        // One page per write without combining.
        dirty_pages(&p, REL, 5, 8);
        let one = CheckpointWriteOptions {
            combine_pages: 1,
            ..Default::default()
        };
        let r = p.checkpoint_write(&one, &Immediate).unwrap();
        assert_eq!((r.written, r.write_calls), (5, 5));
    }

    /// Proves: a page first dirtied after the snapshot is not written by this checkpoint;
    /// a page redirtied after the checkpoint wrote it stays dirty (not lost); a page
    /// written meanwhile by someone else counts as done, not written twice.
    #[test]
    fn only_pages_dirty_at_the_start_are_written_and_redirtied_pages_stay_dirty() {
        let p = pool(Arc::new(MemVfs::new()), 64);
        dirty_pages(&p, REL, 10, 1);
        let other = RelFileId::new(0, 11);
        p.create_relation(other, ForkNumber::Main).unwrap();
        let late = || {
            // After the first page (block 0) was written: change it again, add a new page
            // elsewhere, and write block 9 ourselves (as a backend would).
            let b = p.read(BufferTag::new(REL, ForkNumber::Main, 0)).unwrap();
            b.write()[100] = 2;
            dirty_pages(&p, other, 1, 3);
            let b9 = p.read(BufferTag::new(REL, ForkNumber::Main, 9)).unwrap();
            assert!(b9.flush().unwrap());
        };
        let opts = CheckpointWriteOptions {
            combine_pages: 1,
            ..Default::default()
        };
        let r = p
            .checkpoint_write(&opts, &AtFirstPace(late, AtomicBool::new(false)))
            .unwrap();
        assert_eq!((r.marked, r.written, r.skipped), (10, 9, 1), "{r:?}");
        assert!(is_dirty(&p, BufferTag::new(REL, ForkNumber::Main, 0)));
        assert_eq!(
            stored(&p, REL, 0)[100],
            1,
            "the checkpoint wrote the old image"
        );
        assert!(is_dirty(&p, BufferTag::new(other, ForkNumber::Main, 0)));
        // The next checkpoint takes both.
        let r = p.checkpoint_write(&opts, &Immediate).unwrap();
        assert_eq!(r.written, 2);
        assert_eq!(stored(&p, REL, 0)[100], 2);
    }

    /// Proves: the scheduler hands out runs so that no tablespace's progress runs ahead of
    /// another's by more than one run's share.
    #[test]
    fn the_scheduler_balances_progress_across_tablespaces() {
        let mut entries = Vec::new();
        for (ts, n) in [(1u32, 10u32), (2, 40), (3, 20)] {
            for b in 0..n {
                entries.push(CkptEntry {
                    tag: BufferTag::new(RelFileId::new(ts, 5), ForkNumber::Main, b * 2),
                    id: 0,
                });
            }
        }
        let mut s = Scheduler::new(&entries, true);
        let totals = [10.0, 40.0, 20.0];
        let mut done = [0.0f64; 3];
        let mut runs = 0;
        while let Some((a, b)) = s.next_run(&entries, 16) {
            assert_eq!(b - a, 1, "blocks are not adjacent: one page per run");
            let ts = entries[a].tag.rel.tablespace as usize - 1;
            done[ts] += 1.0;
            runs += 1;
            let f: Vec<f64> = (0..3).map(|i| done[i] / totals[i]).collect();
            let spread =
                f.iter().cloned().fold(0.0, f64::max) - f.iter().cloned().fold(1.0, f64::min);
            assert!(spread <= 0.1 + 1e-9, "after {runs} runs: {f:?}");
        }
        assert_eq!(runs, 70);
    }

    /// Proves: several writers share the work: every marked page is written once, and the
    /// pool is consistent afterwards.
    #[test]
    fn several_writers_write_every_page_once() {
        let p = pool(Arc::new(MemVfs::new()), 256);
        for rel in 0..4 {
            dirty_pages(&p, RelFileId::new(rel % 2, 20 + rel), 50, rel as u8);
        }
        let opts = CheckpointWriteOptions {
            writers: 3,
            combine_pages: 4,
            ..Default::default()
        };
        let r = p.checkpoint_write(&opts, &Immediate).unwrap();
        assert_eq!((r.marked, r.written, r.skipped), (200, 200, 0));
        assert_eq!(r.tablespaces, 2);
        assert_eq!(p.usage_summary().dirty, 0);
        p.check_invariants().unwrap();
        for rel in 0..4u32 {
            assert_eq!(
                stored(&p, RelFileId::new(rel % 2, 20 + rel), 49)[100],
                rel as u8
            );
        }
    }

    /// Proves: when a combined write fails, each page is retried alone and ends with its
    /// own outcome: a transient failure costs nothing; a page whose own write fails stays
    /// dirty and the checkpoint reports the error.
    #[test]
    fn a_failed_combined_write_gives_each_page_its_own_outcome() {
        let fault = FaultVfs::new(Arc::new(MemVfs::new()));
        let p = pool(Arc::new(fault.clone()), 64);
        dirty_pages(&p, REL, 8, 4);
        let opts = CheckpointWriteOptions {
            combine_pages: 8,
            ..Default::default()
        };
        fault.add_rule(FaultRule::nth(
            "base/0/10",
            FaultOp::Write,
            1,
            FaultKind::Short,
        ));
        let r = p.checkpoint_write(&opts, &Immediate).unwrap();
        assert_eq!((r.written, r.write_calls), (8, 9), "{r:?}");
        assert_eq!(p.usage_summary().dirty, 0);
        // Now the combined write and the first single-page write fail.
        fault.clear_rules();
        dirty_pages(&p, REL, 8, 5);
        fault.add_rule(FaultRule {
            times: 2,
            ..FaultRule::nth("base/0/10", FaultOp::Write, 1, FaultKind::Eio)
        });
        let e = p.checkpoint_write(&opts, &Immediate).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
        assert!(is_dirty(&p, BufferTag::new(REL, ForkNumber::Main, 8)));
        assert_eq!(p.usage_summary().dirty, 1);
        assert_eq!(stored(&p, REL, 9)[100], 5);
    }
}
