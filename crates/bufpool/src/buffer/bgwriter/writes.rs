//! How a round writes: one buffer through the pool's write path, a batch on helper
//! threads, or a stream of pages through the bgwriter's io_uring (`UringSetup`,
//! `UringBatch`); and how each outcome is counted.

use super::*;

/// What a write of a pinned buffer did.
pub(super) enum WriteDone {
    Written(BufferTag),
    /// Clean by the time the write looked (someone else wrote it).
    Clean,
    /// Held exclusively: not written, not reusable now.
    Busy,
    Failed(BufferError),
}

/// Pinned candidates per writer thread before a round writes them (`bgwriter_writers` >
/// 1): enough to keep each thread busy for a few device latencies per spawn.
pub(super) const BATCH_PER_WRITER: usize = 16;

/// How the bgwriter keeps its writes in flight (`Bgwriter::io_in_effect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub(super) enum IoInEffect {
    /// No round has decided yet.
    Undecided = 0,
    /// Through its io_uring (`bgwriter_io_method = io_uring`).
    Uring = 1,
    /// On writer threads (`bgwriter_io_method = threads`, or io_uring unavailable).
    Threads = 2,
    /// One write at a time (`bgwriter_writers = 1`, or the victim queue).
    Single = 3,
}

impl IoInEffect {
    pub(super) fn from_u64(v: u64) -> IoInEffect {
        match v {
            1 => IoInEffect::Uring,
            2 => IoInEffect::Threads,
            3 => IoInEffect::Single,
            _ => IoInEffect::Undecided,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            IoInEffect::Uring => "io_uring",
            IoInEffect::Threads => "threads",
            IoInEffect::Single => "single",
            IoInEffect::Undecided => "undecided",
        }
    }
}

/// Weight of one write's time in the streaming scan's smoothed write time (one sample
/// per page, so a longer average than the batches' one per batch).
pub(super) const WRITE_MS_SAMPLES: f64 = 64.0;

/// The bgwriter's io_uring, once tried.
pub(super) enum UringSetup {
    Untried,
    Ready(Box<UringWriter>),
    /// io_uring is unavailable (or not asked for): batches go to threads.
    Unavailable,
}

impl std::fmt::Debug for UringSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UringSetup::Untried => "Untried",
            UringSetup::Ready(_) => "Ready",
            UringSetup::Unavailable => "Unavailable",
        })
    }
}

/// One batch going through the bgwriter's io_uring: the [`WriteSource`] that claims,
/// copies, WAL-flushes and checksums each page as the ring asks for it (the same steps as
/// `write_locked_then`, content lock held for the copy only), and ends each page's I/O as
/// its write completes.
pub(super) struct UringBatch<'a> {
    pub(super) pool: &'a BufferPool,
    pub(super) ids: &'a [u32],
    pub(super) next: usize,
    /// The pages handed to the ring, by their number in it: buffer, target, and whether
    /// its write was reported done.
    pub(super) in_kernel: Vec<(u32, PageTarget, bool)>,
    pub(super) out: Vec<WriteDone>,
}

impl Drop for UringBatch<'_> {
    /// After a panic in the pipeline (which first waited for the kernel's writes, see
    /// `uring_writer`), ends the write I/O of every page handed to the ring and not reported
    /// done as failed, so nobody waits on those buffers forever; they stay dirty.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for (id, _, done) in &self.in_kernel {
            if !done {
                self.pool
                    .terminate_io(&self.pool.descs[*id as usize], Io::Write, false);
            }
        }
    }
}

impl WriteSource for UringBatch<'_> {
    fn next(&mut self, buf: &mut [u8]) -> Option<(Arc<dyn VfsFile>, u64)> {
        loop {
            if self.pool.bgwriter.stop.load(Ordering::Relaxed) {
                return None;
            }
            let &id = self.ids.get(self.next)?;
            self.next += 1;
            match self.pool.claim_copy_for_ring(id, buf) {
                Ok(target) => {
                    let at = (target.file.clone(), target.offset);
                    self.in_kernel.push((id, target, false));
                    return Some(at);
                }
                Err(done) => self.out.push(done),
            }
        }
    }

    fn done(&mut self, n: usize, (result, took): PageWriteResult) {
        let (id, target, done) = &mut self.in_kernel[n];
        debug_assert!(
            !*done,
            "page {n} (buffer {id}) of the ring reported done twice"
        );
        *done = true;
        self.out
            .push(self.pool.finish_ring_write(*id, target, result, took));
    }
}

impl BufferPool {
    /// Sets up the bgwriter's io_uring if `bgwriter_io_method = io_uring` asks for one and
    /// none was tried yet; returns whether batches go through it. Where io_uring is
    /// unavailable, says why once and leaves batches to threads.
    pub(super) fn bgwriter_uring_ready(&self, state: &mut RoundState) -> bool {
        if matches!(state.uring, UringSetup::Untried) {
            let o = &self.bgwriter.options;
            let single = o.writers <= 1 || o.strategy == BgwriterStrategy::VictimQueue;
            state.uring = if single || o.io != BgwriterIo::IoUring || cfg!(shuttle) {
                UringSetup::Unavailable
            } else {
                let ring = UringWriter::new();
                match ring.fallback_reason() {
                    None => UringSetup::Ready(Box::new(ring)),
                    Some(why) => {
                        tracing::warn!(
                            target: "bufpool::bgwriter",
                            "bgwriter_io_method = io_uring unavailable ({why}); using threads"
                        );
                        UringSetup::Unavailable
                    }
                }
            };
            let io = match state.uring {
                UringSetup::Ready(_) => IoInEffect::Uring,
                _ if single => IoInEffect::Single,
                _ => IoInEffect::Threads,
            };
            self.bgwriter
                .io_in_effect
                .store(io as u64, Ordering::Relaxed);
        }
        matches!(state.uring, UringSetup::Ready(_))
    }

    /// How the bgwriter keeps its writes in flight, as decided at its first round (or
    /// thread start): "io_uring", "threads" (`bgwriter_io_method = threads`, or io_uring
    /// unavailable), "single" (`bgwriter_writers = 1` or the victim queue: one write at a
    /// time), or "undecided" before that.
    pub fn bgwriter_io_in_effect(&self) -> &'static str {
        IoInEffect::from_u64(self.bgwriter.io_in_effect.load(Ordering::Relaxed)).name()
    }

    /// The most dirty candidates a round pins before writing them as one batch.
    pub(super) fn batch_cap(&self) -> usize {
        // Never pin more than a sliver of a small pool.
        (self.bgwriter.options.writers * BATCH_PER_WRITER).min((self.descs.len() / 16).max(1))
    }

    /// The first half of [`Round::sync_one`]: whether buffer `id` is reusable, and
    /// if it is dirty, the buffer pinned (without usage credit) for a write.
    pub(super) fn pin_for_write(&self, id: u32, lru: bool) -> Result<BufferRef<'_>, Visited> {
        let d = &self.descs[id as usize];
        // Reusable: what the policy evicts where the buffer stands (usage 0 for the clock).
        let max_usage = if lru {
            self.repl.evicts_up_to(&*self.descs, id)
        } else {
            u64::MAX
        };
        let wanted = |s: u64| refcount(s) == 0 && usage(s) <= max_usage;
        let hint = d.load_state();
        if !wanted(hint) {
            return Err(Visited::NotReusable);
        }
        if hint & (DIRTY | VALID) != (DIRTY | VALID) && self.bgwriter.dirty_map.is_none() {
            return Err(Visited::Reusable);
        }
        // Pin without usage credit, re-checking under the header lock.
        let s = d.lock_header();
        if !wanted(s) {
            d.unlock_header(s);
            return Err(Visited::NotReusable);
        }
        if s & (DIRTY | VALID) != (DIRTY | VALID) {
            // Clean after all; a dirty-map bit left on it is stale (see dirty_map.rs).
            self.bgwriter.note_clean(id);
            d.unlock_header(s);
            return Err(Visited::Reusable);
        }
        d.unlock_header(s + REFCOUNT_ONE);
        Ok(BufferRef { pool: self, id })
    }

    /// The second half: writes the pinned buffer if it is still dirty and nobody holds it
    /// exclusively. Any thread may run it (a round's writers do) while the round holds
    /// the pin; the round drops it afterwards.
    pub(super) fn write_pinned(&self, id: u32) -> WriteDone {
        let d = &self.descs[id as usize];
        debug_assert!(
            refcount(d.load_state()) >= 1,
            "the bgwriter writes buffer {id} without the round's pin: {d:?}"
        );
        if !d.content_lock.try_lock_shared() {
            // Someone holds it exclusively right now: in use, not reusable.
            return WriteDone::Busy;
        }
        // The content lock is released once the page is copied: a backend that wants to
        // change the page waits for an 8 KiB copy, not for the WAL flush and the write.
        let result = self.write_locked_then(id, IoContext::Normal, || {
            // SAFETY: taken by the successful try_lock_shared above; released once.
            unsafe { d.content_lock.unlock_shared() }
        });
        match result.map(|w| w.is_some()) {
            Ok(true) => {
                self.mark_cleaned(id);
                WriteDone::Written(d.tag())
            }
            Ok(false) => WriteDone::Clean,
            Err(e) => WriteDone::Failed(e),
        }
    }

    /// The first half of a write through the bgwriter's io_uring, for a buffer the caller
    /// pins: the steps of `write_locked_then` up to the write itself. Claims the write
    /// (content lock shared, held for the copy only), copies the page into `buf`, makes
    /// the log durable to its LSN (ARCHITECTURE's rule 1, WAL before data), checksums the copy and finds where it
    /// goes. Err: not written, and why (busy, clean already, or failed with the page left
    /// dirty and its I/O ended).
    pub(super) fn claim_copy_for_ring(
        &self,
        id: u32,
        buf: &mut [u8],
    ) -> Result<PageTarget, WriteDone> {
        let d = &self.descs[id as usize];
        if !d.content_lock.try_lock_shared() {
            // Someone holds it exclusively right now: in use, not reusable.
            return Err(WriteDone::Busy);
        }
        // SAFETY: taken by the successful try_lock_shared above; released once, either
        // here or by `copy_for_write` right after its copy.
        let unlock = || unsafe { d.content_lock.unlock_shared() };
        if !self.start_io(d, Io::Write) {
            unlock();
            return Err(WriteDone::Clean);
        }
        // Ends the write as failed on an error, or on a panic below (see `IoClaim`); a
        // page handed to the ring is ended by its completion (or `UringBatch`'s drop).
        let claim = crate::buffer::IoClaim {
            pool: self,
            id,
            io: Io::Write,
        };
        let forced = self
            .copy_for_write(id, buf, unlock)
            .map_err(WriteDone::Failed)?;
        if forced {
            self.rings.count_forced_wal_flush(IoContext::Normal);
        }
        let target = self
            .smgr
            .page_target(&d.tag())
            .map_err(|e| WriteDone::Failed(BufferError::from(e)))?;
        // The ring writes one page at this offset: a misaligned one would tear two blocks.
        assert!(
            target.offset % self.page_size as u64 == 0,
            "page target of {} at offset {} is not aligned to the page size {}",
            d.tag(),
            target.offset,
            self.page_size
        );
        std::mem::forget(claim);
        Ok(target)
    }

    /// The second half: counts the write and registers its segment for the next sync
    /// (before the I/O ends, as `Smgr::write` does before `terminate_io`, so a checkpoint
    /// that waits for this I/O sees the registration), then ends the I/O.
    pub(super) fn finish_ring_write(
        &self,
        id: u32,
        target: &PageTarget,
        result: std::io::Result<()>,
        took: Duration,
    ) -> WriteDone {
        let d = &self.descs[id as usize];
        let result = match result {
            Ok(()) => {
                self.smgr.page_written(target, IoContext::Normal, took);
                Ok(())
            }
            Err(source) => Err(self.smgr.page_write_failed(target, source)),
        };
        self.terminate_io(d, Io::Write, result.is_ok());
        match result {
            Ok(()) => {
                self.mark_cleaned(id);
                WriteDone::Written(d.tag())
            }
            Err(e) => WriteDone::Failed(BufferError::from(e)),
        }
    }

    /// Writes the pinned buffers `ids` through the bgwriter's io_uring, up to `in_flight`
    /// at a time: each page is claimed and copied only when a slot is free (see
    /// [`UringBatch`]). A stop request ends the batch at its next page (fewer results than
    /// ids).
    pub(super) fn write_on_ring(
        &self,
        ids: &[u32],
        ring: &mut UringWriter,
        in_flight: usize,
    ) -> Vec<WriteDone> {
        let mut batch = UringBatch {
            pool: self,
            ids,
            next: 0,
            in_kernel: Vec::with_capacity(in_flight),
            out: Vec::with_capacity(ids.len()),
        };
        ring.pipeline(in_flight, self.page_size, &mut batch);
        std::mem::take(&mut batch.out)
    }

    /// Writes `batch` on `writers` threads started for it (the calling one included):
    /// rounds run outside the bgwriter thread (tests, experiments) have no crew.
    pub(super) fn write_on_scoped_threads(
        &self,
        batch: &[BufferRef<'_>],
        writers: usize,
    ) -> Vec<WriteDone> {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let stop = &self.bgwriter.stop;
        let work = |out: &mut Vec<WriteDone>| {
            let previous = set_thread_writer(IoWriter::Bgwriter);
            // A stop request ends the batch at each thread's next buffer: the writes in
            // flight finish, the rest stay dirty (and unpinned with the batch).
            while !stop.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(p) = batch.get(i) else { break };
                out.push(self.write_pinned(p.id));
            }
            set_thread_writer(previous);
        };
        let mut results = Vec::with_capacity(batch.len());
        // std, not the `sync` facade: these are plain std threads (scoped), outside any
        // shuttle execution.
        std::thread::scope(|scope| {
            let helpers: Vec<_> = (1..writers)
                .map(|_| {
                    scope.spawn(|| {
                        let mut out = Vec::new();
                        work(&mut out);
                        out
                    })
                })
                .collect();
            work(&mut results);
            for h in helpers {
                results.extend(h.join().expect("a bgwriter writer panicked"));
            }
        });
        results
    }

    /// Marks a buffer this bgwriter just wrote (and still pins) BGWRITER_CLEANED if it is
    /// still clean, so a dirtying before its reuse counts as a wasted write.
    pub(super) fn mark_cleaned(&self, id: u32) {
        let d = &self.descs[id as usize];
        let s = d.lock_header();
        debug_assert!(
            refcount(s) >= 1,
            "marking buffer {id} cleaned without the writer's pin: {}",
            describe(s)
        );
        let s = if s & DIRTY == 0 {
            s | BGWRITER_CLEANED
        } else {
            s
        };
        d.unlock_header(s);
    }
}

impl<'a> Round<'a> {
    /// Whether batches go through the bgwriter's io_uring (set up at the first ask; see
    /// [`BufferPool::bgwriter_uring_ready`]).
    pub(super) fn uring_ready(&mut self) -> bool {
        self.pool.bgwriter_uring_ready(self.state)
    }

    /// Counts a write's outcome in the round (writeback hint, errors and their hook).
    pub(super) fn account(&mut self, done: WriteDone) -> Visited {
        match done {
            WriteDone::Written(tag) => {
                let state = &mut *self.state;
                if state.hinted.as_mut().is_none_or(|h| h.first(&tag)) {
                    let _ = state.writeback.add(&self.pool.smgr, tag, IoContext::Normal);
                } else {
                    self.report.hints_repeated_skipped += 1;
                }
                Visited::Written
            }
            WriteDone::Clean => Visited::Reusable,
            WriteDone::Busy => Visited::NotReusable,
            WriteDone::Failed(e) => {
                self.report.write_errors += 1;
                let hook = self.pool.bgwriter.error_hook.lock().clone();
                if let Some(h) = hook {
                    h(&e);
                }
                Visited::Failed
            }
        }
    }

    /// Writes the pinned buffers of `batch` on `bgwriter_writers` threads at once (so the
    /// round keeps that many writes in flight), then counts what happened: buffers that
    /// turned out clean, busy or failed were counted as written by [`Self::visit`]
    /// and are taken off `buffers_written` again. Empties `batch`, dropping the pins.
    pub(super) fn write_batch(&mut self, batch: &mut Vec<BufferRef<'a>>) {
        self.pool
            .bgwriter
            .cursor
            .store(self.state.next_to_clean, Ordering::Relaxed);
        if batch.is_empty() {
            return;
        }
        let writers = self.pool.bgwriter.options.writers.min(batch.len());
        let stop = &self.pool.bgwriter.stop;
        let started = Instant::now();
        // O_DSYNC writes (`set_bgwriter_durable_writes`) take the one-page path.
        let durable = self.pool.bgwriter_durable.load(Ordering::Relaxed);
        let results = if !durable && self.uring_ready() {
            let UringSetup::Ready(ring) = &mut self.state.uring else {
                unreachable!("the ring is ready")
            };
            let ids: Vec<u32> = batch.iter().map(|b| b.id).collect();
            self.pool.write_on_ring(&ids, ring, writers)
        } else {
            match self.crew {
                Some(crew) => {
                    let ids: Vec<u32> = batch.iter().map(|b| b.id).collect();
                    let pool = self.pool;
                    crew.run(&ids, writers - 1, |id| pool.write_pinned(id), stop)
                }
                None => self.pool.write_on_scoped_threads(batch, writers),
            }
        };
        let ms = started.elapsed().as_secs_f64() * 1e3;
        if self.state.batch_ms == 0.0 {
            self.state.batch_ms = ms;
        } else {
            self.state.batch_ms += (ms - self.state.batch_ms) / SMOOTHING_SAMPLES;
        }
        debug_assert!(
            results.len() <= batch.len(),
            "{} write outcomes for a batch of {}",
            results.len(),
            batch.len()
        );
        let skipped = batch.len() - results.len();
        self.report.buffers_written = self.report.buffers_written.saturating_sub(skipped as u64);
        if skipped > 0 {
            self.report.stopped = true;
        }
        batch.clear();
        for done in results {
            if !matches!(self.account(done), Visited::Written) {
                self.report.buffers_written = self.report.buffers_written.saturating_sub(1);
            }
        }
    }
}
