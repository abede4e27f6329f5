//! The bgwriter thread: its loop of rounds, its naps, hibernation and the helpers that
//! keep a round's writes in flight.

use super::*;

// A shortened nap is never zero (a busy pool must not spin the bgwriter) and never
// longer than the shortest `bgwriter_delay`, which would make it no shortening.
const _: () = assert!(
    MIN_NAP_MS > 0 && MIN_NAP_MS <= crate::buffer::MIN_BGWRITER_DELAY_MS,
    "MIN_NAP_MS must lie in 1..=MIN_BGWRITER_DELAY_MS"
);

/// The bgwriter thread's helpers, as the rounds see them.
pub(super) type Crew = WriterCrew<WriteDone>;

impl BufferPool {
    /// The bgwriter thread's body: rounds, naps and hibernation until a stop request.
    /// [`BufferPool::start_bgwriter`] runs it on its own thread; a model test runs it on a
    /// modeled one. I/O is counted as the bgwriter's.
    #[doc(hidden)]
    pub fn bgwriter_run(&self) {
        let helpers = self.bgwriter_helpers();
        if helpers == 0 {
            return self.bgwriter_loop(None);
        }
        // The writers that help the rounds' batches live as long as this loop (a thread
        // per batch cost a quarter of the bgwriter's CPU: see `writer_crew.rs`).
        let crew = WriterCrew::new(helpers);
        let stop = &self.bgwriter.stop;
        std::thread::scope(|scope| {
            for n in 1..=helpers {
                let crew = &crew;
                // A helper that cannot start only means fewer writes in flight: `run`
                // never waits for a helper that does not join.
                let _ = std::thread::Builder::new()
                    .name(format!("bufpool-bgw-{n}"))
                    .spawn_scoped(scope, move || {
                        set_thread_writer(IoWriter::Bgwriter);
                        crew.serve(|id| self.write_pinned(id), stop);
                    });
            }
            self.bgwriter_loop(Some(&crew));
            crew.shutdown();
        });
    }

    /// Helper threads the bgwriter thread keeps for its rounds' batches: one fewer than
    /// the writes a batch can have in flight (the round's own thread is the last writer),
    /// none with one writer, a pool too small for batches, or under shuttle (whose model
    /// threads cannot be served by plain ones).
    pub(super) fn bgwriter_helpers(&self) -> usize {
        if cfg!(shuttle)
            || self.bgwriter.options.strategy == BgwriterStrategy::VictimQueue
            || self.bgwriter_uring_ready(&mut self.bgwriter.round.lock())
        {
            return 0;
        }
        self.bgwriter
            .options
            .writers
            .min(self.batch_cap())
            .saturating_sub(1)
    }

    pub(super) fn bgwriter_loop(&self, crew: Option<&Crew>) {
        let previous = set_thread_writer(IoWriter::Bgwriter);
        let mut idle_rounds = 0;
        let mut last = (self.repl.hand(), Instant::now());
        while !self.bgwriter.stop.load(Ordering::SeqCst) {
            let report = self.bgwriter_round_with(crew);
            if report.stopped {
                break;
            }
            if report.write_errors > 0 && self.bgwriter.error_hook.lock().is_none() {
                eprintln!(
                    "bufpool bgwriter: {} page write(s) failed this round; the pages stay dirty",
                    report.write_errors
                );
            }
            idle_rounds = if report.idle { idle_rounds + 1 } else { 0 };
            if idle_rounds >= HIBERNATE_AFTER_IDLE_ROUNDS {
                self.bgwriter_hibernate(report.allocations_seen);
                idle_rounds = 0;
            } else {
                let nap = self.bgwriter_nap_ms(&mut last);
                self.bgwriter_nap(nap);
            }
        }
        set_thread_writer(previous);
    }

    /// How long to nap after a round: `bgwriter_delay`, unless the clock hand, at the
    /// speed it moved since the last nap (`last`: the hand and when it was read), would
    /// reach the end of what the bgwriter has looked at (its cursor) sooner; then half the
    /// time the lead lasts, at least `MIN_NAP_MS`. So a busy pool gets rounds as often
    /// as its hand needs them, each still bounded by `bgwriter_lru_maxpages`, and a quiet
    /// one the full delay; `bgwriter_delay` is the longest nap, not a fixed one. With
    /// `bgwriter_adaptive_nap = off`, always `bgwriter_delay` (PostgreSQL's fixed nap).
    pub(super) fn bgwriter_nap_ms(&self, last: &mut (u64, Instant)) -> u64 {
        let delay = self.bgwriter.options.delay_ms;
        let hand = self.repl.hand();
        let now = Instant::now();
        let moved = hand.saturating_sub(last.0) as f64;
        let ms = now.duration_since(last.1).as_secs_f64() * 1e3;
        *last = (hand, now);
        if !self.bgwriter.options.adaptive_nap || moved <= 0.0 || ms <= 0.0 {
            return delay;
        }
        let cursor = self.bgwriter.round.lock().next_to_clean;
        let lead = cursor.saturating_sub(hand) as f64;
        let lasts_ms = lead / (moved / ms);
        ((lasts_ms / 2.0) as u64).clamp(MIN_NAP_MS.min(delay), delay)
    }

    /// Sleeps `ms` or until a stop request. Under shuttle, time does not pass:
    /// a nap is a yield, so the model explores rounds racing allocations.
    pub(super) fn bgwriter_nap(&self, ms: u64) {
        #[cfg(shuttle)]
        {
            let _ = ms;
            crate::sync::yield_now();
        }
        #[cfg(not(shuttle))]
        {
            let b = &self.bgwriter;
            let latch = b.latch.lock();
            if !b.stop.load(Ordering::SeqCst) {
                let delay = Duration::from_millis(ms);
                drop(b.latch_cond.wait_for(latch, delay));
            }
        }
    }

    /// Hibernates until an allocation after `allocations_seen` wakes it, a stop request,
    /// or the long timeout (see the module doc, "Hibernation").
    pub(super) fn bgwriter_hibernate(&self, allocations_seen: u64) {
        let b = &self.bgwriter;
        let mut woken = b.latch.lock();
        *woken = false;
        b.hibernating.store(true, Ordering::SeqCst);
        if self.repl.allocations() != allocations_seen || b.stop.load(Ordering::SeqCst) {
            b.hibernating.store(false, Ordering::SeqCst);
            return;
        }
        b.counters.hibernations.fetch_add(1, Ordering::Relaxed);
        let long = Duration::from_millis(b.options.delay_ms * HIBERNATE_DELAY_FACTOR);
        while !*woken && !b.stop.load(Ordering::SeqCst) {
            let (latch, timed_out) = b.latch_cond.wait_for(woken, long);
            woken = latch;
            if timed_out {
                break;
            }
        }
        *woken = false;
        b.hibernating.store(false, Ordering::SeqCst);
    }
}
