//! The batch of seed 000's bursty load (`--batch-every SECS --batch-rows N`): a large
//! write every few seconds that updates N accounts spread over the table in one
//! transaction. Its pacing, the rate profile, is `driver/pace.rs`'s.

/// `--batch-every SECS --batch-rows N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    pub every_s: u64,
    pub rows: u64,
}
