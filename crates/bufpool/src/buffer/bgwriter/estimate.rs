//! Steps 1 and 2 of a round: the estimate of upcoming allocations and of the density
//! (hand advance per allocation), and the round state that carries them (the cursor and
//! its lead over the hand) from round to round.

use super::*;

/// The cursor and the estimator: owned by whoever runs a round.
#[derive(Debug)]
pub(super) struct RoundState {
    /// Whether `prev_hand` holds a previous round's reading (PostgreSQL's
    /// saved_info_valid): only then is the hand's movement a density sample.
    pub(super) saved: bool,
    pub(super) prev_hand: u64,
    pub(super) prev_allocations: u64,
    /// The next clock position to examine, on the hand's monotonic scale.
    pub(super) next_to_clean: u64,
    pub(super) smoothed_allocations: f64,
    pub(super) smoothed_density: f64,
    pub(super) round_number: u64,
    /// The mini-checkpoint's own cursor (buffer index).
    pub(super) all_scan_next: u64,
    pub(super) writeback: WritebackContext,
    /// The blocks hinted since the data files' last sync (`bgwriter_flush_once`; None when
    /// off or when there are no hints).
    pub(super) hinted: Option<HintedOnce>,
    /// The pace of the round's writes (`bgwriter_device_share`).
    pub(super) pace: super::pace::Pace,
    /// The hand's speed, buffers per ms (smoothed; 0 until measured), and when `prev_hand`
    /// was read.
    pub(super) hand_speed: f64,
    pub(super) prev_hand_at: Option<Instant>,
    /// How long writing one batch takes, ms (smoothed; 0 until measured).
    pub(super) batch_ms: f64,
    /// The io_uring batches are written through (`bgwriter_io_method = io_uring`), set up
    /// at the first batch.
    pub(super) uring: UringSetup,
}

impl RoundState {
    pub(super) fn new(writeback_pages: usize) -> Self {
        Self {
            saved: false,
            prev_hand: 0,
            prev_allocations: 0,
            next_to_clean: 0,
            smoothed_allocations: 0.0,
            smoothed_density: INITIAL_DENSITY,
            round_number: 0,
            all_scan_next: 0,
            writeback: WritebackContext::new(writeback_pages),
            hinted: None,
            pace: super::pace::Pace::default(),
            hand_speed: 0.0,
            prev_hand_at: None,
            batch_ms: 0.0,
            uring: UringSetup::Untried,
        }
    }

    /// Checks the round state between rounds: the cursor never laps the hand (it is at
    /// most `nbuffers` ahead of `hand`, read after the round: the hand only moves
    /// forward), the published cursor is not ahead of the cursor, and the estimator's
    /// averages are finite and not negative.
    pub(super) fn check_invariants(
        &self,
        hand: u64,
        nbuffers: u64,
        published: u64,
    ) -> Result<(), crate::invariants::Violations> {
        let mut v = crate::invariants::Violations::default();
        v.check(self.next_to_clean <= hand + nbuffers, || {
            format!(
                "the bgwriter's cursor {} laps the hand {hand} ({nbuffers} buffers)",
                self.next_to_clean
            )
        });
        v.check(published <= self.next_to_clean, || {
            format!(
                "the published cursor {published} is ahead of the cursor {}",
                self.next_to_clean
            )
        });
        for (name, x) in [
            ("smoothed_allocations", self.smoothed_allocations),
            ("smoothed_density", self.smoothed_density),
            ("hand_speed", self.hand_speed),
            ("batch_ms", self.batch_ms),
        ] {
            v.check(x.is_finite() && x >= 0.0, || {
                format!("the bgwriter's {name} is {x}")
            });
        }
        v.into_result()
    }

    /// The least lead over the hand worth cleaning at: the buffers the hand passes while
    /// one batch is written. A buffer closer to the hand than this is reached before the
    /// bgwriter's write of it ends: the sweep skips it while pinned (and takes a dirty one
    /// beyond), so the write buys no victim in this lap. Capped at a quarter of the pool.
    pub(super) fn min_lead(&self, nbuffers: u64) -> u64 {
        ((self.hand_speed * self.batch_ms).ceil() as u64).min(nbuffers / 4)
    }

    /// Moves the cursor to at least `hand + min_lead` (the buffers it skips are left to
    /// the backends: they get there first). Returns how many it skipped.
    pub(super) fn keep_lead(&mut self, hand: u64, nbuffers: u64) -> u64 {
        let target = hand + self.min_lead(nbuffers);
        let skipped = target.saturating_sub(self.next_to_clean.max(hand));
        self.next_to_clean = self.next_to_clean.max(target);
        skipped
    }
}

/// Weight of a new sample (one per round) in the hand's smoothed speed: 1/4, so a change
/// of pace is followed within a few rounds.
pub(super) const HAND_SPEED_SAMPLES: f64 = 4.0;

impl<'a> Round<'a> {
    /// Step 1 of a round: reads the hand and the allocation count, updates the smoothed
    /// allocation rate and density, and returns (recent allocations, upcoming estimate
    /// before the minimum-progress floor).
    pub(super) fn estimate(&mut self) -> (u64, f64) {
        let hand = self.pool.repl.hand();
        let allocations = self.pool.repl.allocations();
        self.report.allocations_seen = allocations;
        // Counted from the pool's creation for the first round (allocations made during
        // recovery are demand too), from the previous round after that.
        let recent = allocations.wrapping_sub(self.state.prev_allocations);
        let now = Instant::now();
        if self.state.saved {
            let hand_moved = hand.wrapping_sub(self.state.prev_hand);
            if recent > 0 && hand_moved > 0 {
                let sample = hand_moved as f64 / recent as f64;
                self.state.smoothed_density +=
                    (sample - self.state.smoothed_density) / SMOOTHING_SAMPLES;
            }
            if let Some(at) = self.state.prev_hand_at {
                let ms = now.duration_since(at).as_secs_f64() * 1e3;
                if ms > 0.0 {
                    // A short average both ways: a lead too short wastes writes (the hand
                    // passes them pinned), one too long leaves buffers to the backends.
                    let sample = hand_moved as f64 / ms;
                    self.state.hand_speed += (sample - self.state.hand_speed) / HAND_SPEED_SAMPLES;
                }
            }
        }
        self.state.prev_hand_at = Some(now);
        self.state.prev_hand = hand;
        self.state.prev_allocations = allocations;
        self.state.saved = true;
        let recent_f = recent as f64;
        if recent_f > self.state.smoothed_allocations {
            self.state.smoothed_allocations = recent_f; // fast attack
        } else {
            self.state.smoothed_allocations +=
                (recent_f - self.state.smoothed_allocations) / SMOOTHING_SAMPLES;
            // slow decay
        }
        self.report.recent_allocations = recent;
        (
            hand,
            self.state.smoothed_allocations * self.pool.bgwriter.options.lru_multiplier(),
        )
    }
}
