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
    /// Under a list policy, the buffers in the order its search will reach them, read at
    /// the start of the round (the cursor counts from the hand then); None: the clock's
    /// order, the ids from its hand.
    pub(super) order: Option<(u64, Vec<u32>)>,
}

/// An LRU scan whose writes go through the bgwriter's io_uring (`bgwriter_io_method =
/// io_uring`): the ring asks for a page whenever a write slot is free, and [`LruStream::
/// next`] takes scan steps ([`Round::step`]) to the next dirty reusable buffer, pins it,
/// claims its write and copies it (as [`UringBatch`] does). So a buffer is pinned only
/// while its own write is in flight, not for a whole batch, and the lead over the hand
/// (`min_lead`) is the hand's speed × one write's time.
pub(super) struct LruStream<'r, 'a> {
    round: &'r mut Round<'a>,
    scan: LruScan,
    /// The pages handed to the ring, by their number in it: pin and target (taken when
    /// the write completes: the pin is dropped then).
    in_kernel: Vec<Option<(BufferRef<'a>, PageTarget)>>,
}

impl WriteSource for LruStream<'_, '_> {
    fn next(&mut self, buf: &mut [u8]) -> Option<(Arc<dyn VfsFile>, u64)> {
        let pool = self.round.pool;
        while let Some(id) = self.round.step(&mut self.scan, true) {
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
                    self.round.report.buffers_written += 1;
                    let at = (target.file.clone(), target.offset);
                    self.in_kernel.push(Some((pinned, target)));
                    return Some(at);
                }
                Err(done) => {
                    drop(pinned);
                    match self.round.account(done) {
                        Visited::Reusable => self.scan.reusable += 1,
                        Visited::Written | Visited::NotReusable | Visited::Failed => {}
                    }
                }
            }
        }
        None
    }

    fn done(&mut self, n: usize, (result, took): PageWriteResult) {
        let round = &mut *self.round;
        let (pinned, target) = self.in_kernel[n].take().expect("each page completes once");
        let done = round
            .pool
            .finish_ring_write(pinned.id, &target, result, took);
        // Clean (or failed) now: the buffer may be reused.
        drop(pinned);
        // How long a picked buffer stays pinned: one write's time (the lead's factor).
        let ms = took.as_secs_f64() * 1e3;
        let state = &mut *round.state;
        if state.batch_ms == 0.0 {
            state.batch_ms = ms;
        } else {
            state.batch_ms += (ms - state.batch_ms) / WRITE_MS_SAMPLES;
        }
        if !matches!(round.account(done), Visited::Written) {
            round.report.buffers_written = round.report.buffers_written.saturating_sub(1);
        }
    }
}

impl<'a> Round<'a> {
    /// The LRU round (and, with `dirty_only`, the dirty-chain round).
    pub(super) fn lru(&mut self, dirty_only: bool) {
        let nbuffers = self.pool.descs.len() as u64;
        let (hand, upcoming_raw) = self.estimate();
        if self.pool.bgwriter.maxpages == 0 {
            // Cleaning disabled: nothing to scan, and the next round re-reads the hand.
            self.state.saved = false;
            return;
        }
        // A list policy's order is read afresh each round: nothing carries over.
        let order = self.pool.repl.lru_order(
            &*self.pool.descs,
            self.pool.bgwriter.options.frequent_only,
            nbuffers as usize,
        );
        if order.is_some() {
            self.state.next_to_clean = hand;
        }
        let mut scan = if self.pool.bgwriter.options.lru_percent_thousandths > 0 {
            self.window(hand, nbuffers)
        } else {
            self.horizon(hand, nbuffers, upcoming_raw)
        };
        scan.order = order.map(|o| (hand, o));
        let reusable_ahead = scan.reusable;
        let density = self.state.smoothed_density.max(1.0);
        if dirty_only {
            self.dirty_chain(scan, density);
            return;
        }
        // Step 4: the scan.
        let reusable = if self.pool.bgwriter.options.writers > 1
            && !self.pool.bgwriter_durable.load(Ordering::Relaxed)
            && self.uring_ready()
        {
            self.scan_on_uring(scan)
        } else {
            self.scan_on_threads(scan)
        };
        debug_assert!(
            self.report.buffers_written <= self.limit,
            "a round wrote {} pages, past its limit {}",
            self.report.buffers_written,
            self.limit
        );
        debug_assert!(
            self.report.buffers_scanned <= nbuffers,
            "a round scanned past a lap"
        );
        self.finish_scan(reusable, reusable_ahead);
    }

    /// Steps 2 and 3 with the estimator: from the cursor (restarted at the hand when
    /// behind it), until the buffers reusable ahead of the hand reach the upcoming demand
    /// or the minimum progress, whichever is more.
    fn horizon(&mut self, hand: u64, nbuffers: u64, upcoming_raw: f64) -> LruScan {
        // Step 2: the cursor. Behind (or level with) the hand: restart there.
        // Buffers between the hand and the cursor were examined in this lap.
        let examined = if self.state.next_to_clean > hand {
            (self.state.next_to_clean - hand).min(nbuffers)
        } else {
            if self.state.next_to_clean < hand && self.state.round_number > 0 {
                self.pool
                    .bgwriter
                    .counters
                    .rounds_lapped
                    .fetch_add(1, Ordering::Relaxed);
            }
            self.state.next_to_clean = hand;
            0
        };
        // Too close to the hand to be cleaned in time: start further on.
        let skipped = self.keep_lead(hand, nbuffers);
        let density = self.state.smoothed_density.max(1.0);
        let reusable_ahead = (examined as f64 / density) as u64;
        // Step 3: minimum progress.
        let min_scan =
            (nbuffers * self.pool.bgwriter.options.delay_ms).div_ceil(SCAN_WHOLE_POOL_MS);
        let upcoming = (upcoming_raw as u64).max(min_scan + reusable_ahead);
        self.report.upcoming_estimate = upcoming;
        LruScan {
            to_scan: nbuffers.saturating_sub(examined + skipped),
            reusable: reusable_ahead,
            upcoming,
            nbuffers,
            order: None,
        }
    }

    /// Steps 2 and 3 with `bgwriter_lru_percent` (PostgreSQL 8.1's bgwriter, its
    /// bg2 patch): a window of that share of the pool from the clock hand, every round,
    /// whatever the demand; nothing is carried from the last round.
    fn window(&mut self, hand: u64, nbuffers: u64) -> LruScan {
        self.state.next_to_clean = hand;
        let skipped = self.keep_lead(hand, nbuffers);
        let percent = self.pool.bgwriter.options.lru_percent_thousandths;
        let window = (nbuffers * percent).div_ceil(100_000).clamp(1, nbuffers);
        self.report.upcoming_estimate = window;
        LruScan {
            to_scan: window.saturating_sub(skipped),
            reusable: 0,
            upcoming: u64::MAX,
            nbuffers,
            order: None,
        }
    }

    /// [`RoundState::keep_lead`] where `bgwriter_lead` is on (counted as skipped);
    /// nothing where it is off.
    fn keep_lead(&mut self, hand: u64, nbuffers: u64) -> u64 {
        if !self.pool.bgwriter.options.lead {
            return 0;
        }
        let skipped = self.state.keep_lead(hand, nbuffers);
        self.report.buffers_skipped += skipped;
        skipped
    }

    /// One step of an LRU scan, the same for every write path: the next buffer to visit
    /// (the cursor moves past it), or None where the scan stops: `lru_maxpages` pages
    /// written, the lap done, enough reusable buffers ahead, or a stop asked for. With
    /// `check_lead` (no pinned batch pending), every [`LEAD_CHECK_EVERY`] buffers the
    /// cursor is moved to keep its lead over the hand, which may have come close during a
    /// long round, and the cursor is published.
    fn step(&mut self, scan: &mut LruScan, check_lead: bool) -> Option<u32> {
        if self.report.buffers_written >= self.limit {
            self.report.hit_maxpages = true;
            return None;
        }
        if scan.to_scan == 0 || scan.reusable >= scan.upcoming {
            return None;
        }
        if self.pool.bgwriter.stop.load(Ordering::Relaxed) {
            self.report.stopped = true;
            return None;
        }
        if check_lead && self.report.buffers_scanned % LEAD_CHECK_EVERY == 0 {
            let skipped = self.keep_lead(self.pool.repl.hand(), scan.nbuffers);
            scan.to_scan = scan.to_scan.saturating_sub(skipped);
            self.pool
                .bgwriter
                .cursor
                .store(self.state.next_to_clean, Ordering::Relaxed);
            if scan.to_scan == 0 {
                return None;
            }
        }
        let id = match &scan.order {
            None => (self.state.next_to_clean % scan.nbuffers) as u32,
            Some((start, order)) => {
                let at = self.state.next_to_clean.saturating_sub(*start) as usize;
                *order.get(at)?
            }
        };
        self.state.next_to_clean += 1;
        scan.to_scan -= 1;
        self.report.buffers_scanned += 1;
        Some(id)
    }

    /// Step 4 on the thread path: each dirty reusable buffer written by this thread, or
    /// pinned into a batch for the writers. Returns the reusable buffers ahead.
    fn scan_on_threads(&mut self, mut scan: LruScan) -> u64 {
        // Dirty candidates pinned for the writers (`bgwriter_writers` > 1).
        let mut batch = Vec::new();
        while let Some(id) = self.step(&mut scan, batch.is_empty()) {
            match self.visit(id, &mut batch) {
                Visited::Written => {
                    scan.reusable += 1;
                    self.report.buffers_written += 1;
                }
                Visited::Reusable => scan.reusable += 1,
                Visited::NotReusable | Visited::Failed => {}
            }
        }
        self.write_batch(&mut batch);
        scan.reusable
    }

    /// Step 4 through the bgwriter's io_uring: the scan runs as the ring asks for pages
    /// (see [`LruStream`]). Returns the reusable buffers ahead.
    fn scan_on_uring(&mut self, scan: LruScan) -> u64 {
        let UringSetup::Ready(mut ring) =
            std::mem::replace(&mut self.state.uring, UringSetup::Untried)
        else {
            unreachable!("the ring is ready")
        };
        let (writers, page_size) = (self.pool.bgwriter.options.writers, self.pool.page_size);
        let mut stream = LruStream {
            round: self,
            scan,
            in_kernel: Vec::new(),
        };
        ring.pipeline(writers, page_size, &mut stream);
        let reusable = stream.scan.reusable;
        debug_assert!(
            stream.in_kernel.iter().all(Option::is_none),
            "every page handed to the ring completed"
        );
        drop(stream);
        self.state.uring = UringSetup::Ready(ring);
        self.pool
            .bgwriter
            .cursor
            .store(self.state.next_to_clean, Ordering::Relaxed);
        reusable
    }

    /// The dirty-chain round's scan: the horizon in buffers that the estimate asks for,
    /// visiting only dirty-map hits in it.
    fn dirty_chain(&mut self, scan: LruScan, density: f64) {
        let want = scan.upcoming.saturating_sub(scan.reusable);
        let horizon = ((want as f64 * density).ceil() as u64).min(scan.to_scan);
        let map = self
            .pool
            .bgwriter
            .dirty_map
            .as_ref()
            .expect("dirty-chain has a map");
        let mut batch = Vec::new();
        let end = self.state.next_to_clean + horizon;
        let mut pos = self.state.next_to_clean;
        while pos < end {
            if self.pool.bgwriter.stop.load(Ordering::Relaxed) {
                self.report.stopped = true;
                break;
            }
            let (found, _) = map.next_set(pos, end);
            let Some(at) = found else {
                pos = end;
                break;
            };
            pos = at + 1;
            self.report.buffers_scanned += 1;
            let id = (at % scan.nbuffers) as u32;
            match self.visit(id, &mut batch) {
                Visited::Written => {
                    self.report.buffers_written += 1;
                    self.report.reusable_found += 1;
                    if self.report.buffers_written >= self.limit {
                        self.report.hit_maxpages = true;
                        break;
                    }
                }
                Visited::Reusable => self.report.reusable_found += 1,
                Visited::NotReusable | Visited::Failed => {}
            }
        }
        self.write_batch(&mut batch);
        self.state.next_to_clean = pos;
    }

    /// The end of an LRU scan: what it found, and its density sample.
    fn finish_scan(&mut self, reusable: u64, reusable_ahead: u64) {
        self.report.reusable_found = reusable.saturating_sub(reusable_ahead);
        // This scan is a density sample too: buffers passed per reusable one found.
        let scanned = self.report.buffers_scanned;
        if scanned > 0 && self.report.reusable_found > 0 {
            let sample = scanned as f64 / self.report.reusable_found as f64;
            self.state.smoothed_density +=
                (sample - self.state.smoothed_density) / SMOOTHING_SAMPLES;
        }
    }

    /// Visits buffer `id` for an LRU scan: with one writer, as [`Self::sync_one`];
    /// with several, a dirty candidate is pinned and queued in `batch` (counted as
    /// written now, corrected by [`Self::write_batch`]), and a full batch is written.
    fn visit(&mut self, id: u32, batch: &mut Vec<BufferRef<'a>>) -> Visited {
        let writers = self.pool.bgwriter.options.writers;
        if writers <= 1 {
            return self.sync_one(id, true);
        }
        match self.pool.pin_for_write(id, true) {
            Err(v) => v,
            Ok(pinned) => {
                batch.push(pinned);
                if batch.len() >= self.pool.batch_cap() {
                    self.write_batch(batch);
                }
                Visited::Written
            }
        }
    }

    /// Examines buffer `id` (PostgreSQL's SyncOneBuffer): with `lru`, only an unpinned
    /// usage-0 buffer counts and is written if dirty; without (the all-scan), any unpinned
    /// dirty buffer is written. Holds this buffer's locks only; writes through
    /// `flush_locked`.
    pub(super) fn sync_one(&mut self, id: u32, lru: bool) -> Visited {
        match self.pool.pin_for_write(id, lru) {
            Err(v) => v,
            Ok(pinned) => {
                let done = self.pool.write_pinned(pinned.id);
                drop(pinned);
                self.account(done)
            }
        }
    }
}
