//! Steps 3 and 4 of an `lru` or `dirty-chain` round: the scan from the cursor, one buffer
//! at a time, on the thread path and as the io_uring asks for pages.

use super::*;

/// The LRU scan re-checks its lead over the hand every this many buffers (between batches).
pub(super) const LEAD_CHECK_EVERY: u64 = 64;

pub(super) enum Visited {
    /// Pinned, used recently, or busy: not reusable now.
    NotReusable,
    /// Unpinned, usage 0, clean.
    Reusable,
    /// Unpinned, usage 0, was dirty and is now written.
    Written,
    /// The write failed; the page stays dirty.
    Failed,
}

/// Where an LRU scan stands in its round: how far it may still go, and how many reusable
/// buffers it has ahead of the hand against how many the round wants.
pub(super) struct LruScan {
    /// Buffers left before the cursor would lap the hand.
    pub(super) to_scan: u64,
    /// Reusable buffers ahead of the hand so far (those already examined in this lap
    /// included).
    pub(super) reusable: u64,
    /// Reusable buffers the round aims for (the estimate, at least the minimum progress).
    pub(super) upcoming: u64,
    pub(super) nbuffers: u64,
}

/// An LRU scan whose writes go through the bgwriter's io_uring (`bgwriter_io_method =
/// io_uring`): the ring asks for a page whenever a write slot is free, and [`LruStream::
/// next`] takes scan steps ([`BufferPool::lru_step`]) to the next dirty reusable buffer,
/// pins it, claims its write and copies it (as [`UringBatch`] does). So a buffer is
/// pinned only while its own write is in flight, not for a whole batch, and the lead over
/// the hand (`min_lead`) is the hand's speed × one write's time.
pub(super) struct LruStream<'a> {
    pool: &'a BufferPool,
    state: &'a mut RoundState,
    report: &'a mut RoundReport,
    scan: LruScan,
    /// The pages handed to the ring, by their number in it: pin and target (taken when
    /// the write completes: the pin is dropped then).
    in_kernel: Vec<Option<(BufferRef<'a>, PageTarget)>>,
}

impl WriteSource for LruStream<'_> {
    fn next(&mut self, buf: &mut [u8]) -> Option<(Arc<dyn VfsFile>, u64)> {
        let pool = self.pool;
        while let Some(id) = pool.lru_step(self.state, self.report, &mut self.scan, true) {
            let pinned = match pool.pin_for_write(id, true) {
                Err(Visited::Reusable) => {
                    self.scan.reusable += 1;
                    continue;
                }
                Err(_) => continue,
                Ok(p) => p,
            };
            match pool.claim_copy_for_ring(id, buf) {
                Ok(target) => {
                    // Counted as written now (so the round's caps see it), corrected in
                    // `done` if the write fails.
                    self.scan.reusable += 1;
                    self.report.buffers_written += 1;
                    let at = (target.file.clone(), target.offset);
                    self.in_kernel.push(Some((pinned, target)));
                    return Some(at);
                }
                Err(done) => {
                    drop(pinned);
                    match pool.account_write(self.state, self.report, done) {
                        Visited::Reusable => self.scan.reusable += 1,
                        Visited::Written | Visited::NotReusable | Visited::Failed => {}
                    }
                }
            }
        }
        None
    }

    fn done(&mut self, n: usize, (result, took): PageWriteResult) {
        let pool = self.pool;
        let (pinned, target) = self.in_kernel[n].take().expect("each page completes once");
        let done = pool.finish_ring_write(pinned.id, &target, result, took);
        // Clean (or failed) now: the buffer may be reused.
        drop(pinned);
        let state = &mut *self.state;
        // How long a picked buffer stays pinned: one write's time (the lead's factor).
        let ms = took.as_secs_f64() * 1e3;
        if state.batch_ms == 0.0 {
            state.batch_ms = ms;
        } else {
            state.batch_ms += (ms - state.batch_ms) / WRITE_MS_SAMPLES;
        }
        if !matches!(
            pool.account_write(state, self.report, done),
            Visited::Written
        ) {
            self.report.buffers_written = self.report.buffers_written.saturating_sub(1);
        }
    }
}

impl BufferPool {
    /// The LRU round (and, with `dirty_only`, the dirty-chain round).
    pub(super) fn lru_round(
        &self,
        state: &mut RoundState,
        dirty_only: bool,
        crew: Option<&Crew>,
    ) -> RoundReport {
        let mut report = RoundReport::default();
        let nbuffers = self.descs.len() as u64;
        let (hand, upcoming_raw) = self.bgwriter_estimate(state, &mut report);
        if self.bgwriter.maxpages == 0 {
            // Cleaning disabled: nothing to scan, and the next round re-reads the hand.
            state.saved = false;
            return report;
        }
        // Step 2: the cursor. Behind (or level with) the hand: restart there.
        // Buffers between the hand and the cursor were examined in this lap.
        let examined = if state.next_to_clean > hand {
            (state.next_to_clean - hand).min(nbuffers)
        } else {
            if state.next_to_clean < hand && state.round_number > 0 {
                self.bgwriter
                    .counters
                    .rounds_lapped
                    .fetch_add(1, Ordering::Relaxed);
            }
            state.next_to_clean = hand;
            0
        };
        // Too close to the hand to be cleaned in time: start further on.
        let skipped = state.keep_lead(hand, nbuffers);
        report.buffers_skipped += skipped;
        let density = state.smoothed_density.max(1.0);
        let reusable_ahead = (examined as f64 / density) as u64;
        // Step 3: minimum progress.
        let min_scan = (nbuffers * self.bgwriter.options.delay_ms).div_ceil(SCAN_WHOLE_POOL_MS);
        let upcoming = (upcoming_raw as u64).max(min_scan + reusable_ahead);
        report.upcoming_estimate = upcoming;
        let scan = LruScan {
            to_scan: nbuffers.saturating_sub(examined + skipped),
            reusable: reusable_ahead,
            upcoming,
            nbuffers,
        };
        if dirty_only {
            self.dirty_chain_scan(state, &mut report, scan, density, crew);
            return report;
        }
        // Step 4: the scan.
        let reusable = if self.bgwriter.options.writers > 1
            && !self.bgwriter_durable.load(Ordering::Relaxed)
            && self.bgwriter_uring_ready(state)
        {
            self.lru_scan_on_uring(state, &mut report, scan)
        } else {
            self.lru_scan_on_threads(state, &mut report, scan, crew)
        };
        debug_assert!(
            report.buffers_written <= self.bgwriter.maxpages,
            "a round wrote {} pages, past lru_maxpages {}",
            report.buffers_written,
            self.bgwriter.maxpages
        );
        debug_assert!(
            report.buffers_scanned <= nbuffers,
            "a round scanned past a lap"
        );
        self.finish_lru_scan(state, report, reusable, reusable_ahead)
    }

    /// One step of an LRU scan, the same for every write path: the next buffer to visit
    /// (the cursor moves past it), or None where the scan stops: `lru_maxpages` pages
    /// written, the lap done, enough reusable buffers ahead, or a stop asked for. With
    /// `check_lead` (no pinned batch pending), every [`LEAD_CHECK_EVERY`] buffers the
    /// cursor is moved to keep its lead over the hand, which may have come close during a
    /// long round, and the cursor is published.
    pub(super) fn lru_step(
        &self,
        state: &mut RoundState,
        report: &mut RoundReport,
        scan: &mut LruScan,
        check_lead: bool,
    ) -> Option<u32> {
        if report.buffers_written >= self.bgwriter.maxpages {
            report.hit_maxpages = true;
            return None;
        }
        if scan.to_scan == 0 || scan.reusable >= scan.upcoming {
            return None;
        }
        if self.bgwriter.stop.load(Ordering::Relaxed) {
            report.stopped = true;
            return None;
        }
        if check_lead && report.buffers_scanned % LEAD_CHECK_EVERY == 0 {
            let skipped = state.keep_lead(self.clock.hand(), scan.nbuffers);
            report.buffers_skipped += skipped;
            scan.to_scan = scan.to_scan.saturating_sub(skipped);
            self.bgwriter
                .cursor
                .store(state.next_to_clean, Ordering::Relaxed);
            if scan.to_scan == 0 {
                return None;
            }
        }
        let id = (state.next_to_clean % scan.nbuffers) as u32;
        state.next_to_clean += 1;
        scan.to_scan -= 1;
        report.buffers_scanned += 1;
        Some(id)
    }

    /// Step 4 on the thread path: each dirty reusable buffer written by this thread, or
    /// pinned into a batch for the writers. Returns the reusable buffers ahead.
    fn lru_scan_on_threads(
        &self,
        state: &mut RoundState,
        report: &mut RoundReport,
        mut scan: LruScan,
        crew: Option<&Crew>,
    ) -> u64 {
        // Dirty candidates pinned for the writers (`bgwriter_writers` > 1).
        let mut batch = Vec::new();
        while let Some(id) = self.lru_step(state, report, &mut scan, batch.is_empty()) {
            match self.visit_lru(state, id, &mut batch, report, crew) {
                Visited::Written => {
                    scan.reusable += 1;
                    report.buffers_written += 1;
                }
                Visited::Reusable => scan.reusable += 1,
                Visited::NotReusable | Visited::Failed => {}
            }
        }
        self.write_batch(state, &mut batch, report, crew);
        scan.reusable
    }

    /// Step 4 through the bgwriter's io_uring: the scan runs as the ring asks for pages
    /// (see [`LruStream`]). Returns the reusable buffers ahead.
    fn lru_scan_on_uring(
        &self,
        state: &mut RoundState,
        report: &mut RoundReport,
        scan: LruScan,
    ) -> u64 {
        let UringSetup::Ready(mut ring) = std::mem::replace(&mut state.uring, UringSetup::Untried)
        else {
            unreachable!("the ring is ready")
        };
        let mut stream = LruStream {
            pool: self,
            state,
            report,
            scan,
            in_kernel: Vec::new(),
        };
        ring.pipeline(self.bgwriter.options.writers, self.page_size, &mut stream);
        let reusable = stream.scan.reusable;
        debug_assert!(
            stream.in_kernel.iter().all(Option::is_none),
            "every page handed to the ring completed"
        );
        drop(stream);
        state.uring = UringSetup::Ready(ring);
        self.bgwriter
            .cursor
            .store(state.next_to_clean, Ordering::Relaxed);
        reusable
    }

    /// The dirty-chain round's scan: the horizon in buffers that the estimate asks for,
    /// visiting only dirty-map hits in it.
    fn dirty_chain_scan(
        &self,
        state: &mut RoundState,
        report: &mut RoundReport,
        scan: LruScan,
        density: f64,
        crew: Option<&Crew>,
    ) {
        let want = scan.upcoming.saturating_sub(scan.reusable);
        let horizon = ((want as f64 * density).ceil() as u64).min(scan.to_scan);
        let map = self
            .bgwriter
            .dirty_map
            .as_ref()
            .expect("dirty-chain has a map");
        let mut batch = Vec::new();
        let end = state.next_to_clean + horizon;
        let mut pos = state.next_to_clean;
        while pos < end {
            if self.bgwriter.stop.load(Ordering::Relaxed) {
                report.stopped = true;
                break;
            }
            let (found, _) = map.next_set(pos, end);
            let Some(at) = found else {
                pos = end;
                break;
            };
            pos = at + 1;
            report.buffers_scanned += 1;
            let id = (at % scan.nbuffers) as u32;
            match self.visit_lru(state, id, &mut batch, report, crew) {
                Visited::Written => {
                    report.buffers_written += 1;
                    report.reusable_found += 1;
                    if report.buffers_written >= self.bgwriter.maxpages {
                        report.hit_maxpages = true;
                        break;
                    }
                }
                Visited::Reusable => report.reusable_found += 1,
                Visited::NotReusable | Visited::Failed => {}
            }
        }
        self.write_batch(state, &mut batch, report, crew);
        state.next_to_clean = pos;
    }

    /// The end of an LRU scan: what it found, and its density sample.
    pub(super) fn finish_lru_scan(
        &self,
        state: &mut RoundState,
        mut report: RoundReport,
        reusable: u64,
        reusable_ahead: u64,
    ) -> RoundReport {
        report.reusable_found = reusable.saturating_sub(reusable_ahead);
        // This scan is a density sample too: buffers passed per reusable one found.
        let scanned = report.buffers_scanned;
        if scanned > 0 && report.reusable_found > 0 {
            let sample = scanned as f64 / report.reusable_found as f64;
            state.smoothed_density += (sample - state.smoothed_density) / SMOOTHING_SAMPLES;
        }
        report
    }

    /// Visits buffer `id` for an LRU scan: with one writer, as [`Self::sync_one_buffer`];
    /// with several, a dirty candidate is pinned and queued in `batch` (counted as
    /// written now, corrected by [`Self::write_batch`]), and a full batch is written.
    pub(super) fn visit_lru<'p>(
        &'p self,
        state: &mut RoundState,
        id: u32,
        batch: &mut Vec<BufferRef<'p>>,
        report: &mut RoundReport,
        crew: Option<&Crew>,
    ) -> Visited {
        let writers = self.bgwriter.options.writers;
        if writers <= 1 {
            return self.sync_one_buffer(state, id, true, report);
        }
        match self.pin_for_write(id, true) {
            Err(v) => v,
            Ok(pinned) => {
                batch.push(pinned);
                if batch.len() >= self.batch_cap() {
                    self.write_batch(state, batch, report, crew);
                }
                Visited::Written
            }
        }
    }

    /// Examines buffer `id` (PostgreSQL's SyncOneBuffer): with `lru`, only an unpinned
    /// usage-0 buffer counts and is written if dirty; without (the all-scan), any unpinned
    /// dirty buffer is written. Holds this buffer's locks only; writes through
    /// `flush_locked`.
    pub(super) fn sync_one_buffer(
        &self,
        state: &mut RoundState,
        id: u32,
        lru: bool,
        report: &mut RoundReport,
    ) -> Visited {
        match self.pin_for_write(id, lru) {
            Err(v) => v,
            Ok(pinned) => {
                let done = self.write_pinned(pinned.id);
                drop(pinned);
                self.account_write(state, report, done)
            }
        }
    }
}
