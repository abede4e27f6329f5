//! Writeback context: collects the blocks a writer has just written, and every `limit`
//! blocks asks the OS to start writing them back (sync_file_range(SYNC_FILE_RANGE_WRITE)
//! through [`Smgr::writeback`]), sorted and with adjacent blocks merged into one range, so
//! that the later fsync finds little left to do and the kernel's dirty pages do not pile
//! up into a write storm (PostgreSQL's WritebackContext, `*_flush_after`).
//!
//! Owns: a bounded list of pending tags, allocated once at creation (the writer's hot
//! loop does not allocate). Invariants: `pending.len() < limit` between calls; a limit of
//! 0 disables the context (nothing is collected). Locks: none; one writer owns a context.

use std::time::{Duration, Instant};

use super::{Smgr, SmgrResult};
use crate::stats::IoContext;
use crate::types::BufferTag;

/// The longest a [`HintedOnce`] remembers a block without a complete sync: the kernel's
/// default dirty expiry (`vm.dirty_expire_centisecs`, 30 s), after which it writes a dirty
/// page back by itself anyway.
pub(crate) const HINTED_ONCE_MAX_AGE: Duration = Duration::from_secs(30);

/// Which blocks a writer has already hinted since the data files' last complete fsync
/// ([`Smgr::syncs_done`]), so that it hints each block at most once per checkpoint cycle
/// (`bgwriter_flush_once`). A hint makes the OS write the page now; a block written again
/// after its hint is left dirty in the page cache, which absorbs every later write of it
/// until the checkpoint's fsync writes it once. The first hint already bounded how much
/// of that block can be pending at the fsync; repeating it for a hot block only writes the
/// same page to the device again and again.
///
/// Only on a fast device: each tablespace's device is judged ([`Device`]); tablespaces on
/// one device share its probe and its slow fsyncs ([`Smgr::probe_device_once`],
/// [`Smgr::slow_sync_in`]). Until its device is probed (at the next
/// [`Self::refresh_devices`]), and for good once it is found slow or a file on it took
/// `SLOW_SYNC` or more to fsync, every write to that tablespace is hinted
/// (PostgreSQL's behaviour): a slow device would turn the rewrites left pending into a
/// long fsync.
///
/// A bitmap indexed by the tag's hash: a collision makes a block look hinted when it was
/// not, and it then waits for the fsync or the kernel like an unhinted write (advice
/// lost, nothing else). Owns its bitmap and its table of devices, both allocated once.
/// Locks: none; one writer owns it.
#[derive(Debug)]
pub struct HintedOnce {
    bits: Vec<u64>,
    mask: u64,
    /// `Smgr::syncs_done` when the bitmap was last cleared, and when.
    epoch: u64,
    since: Option<Instant>,
    /// Each tablespace written to so far and what its device is (at most
    /// `MAX_DEVICES`; beyond that a tablespace is hinted every write).
    devices: Vec<(u32, Device)>,
    /// The write-back rate its probe measured, pages a second, per entry of `devices`
    /// (None: not probed, or the probe failed).
    rates: Vec<Option<f64>>,
}

/// Tablespaces a [`HintedOnce`] judges apart.
pub(crate) const MAX_DEVICES: usize = 32;

/// What a [`HintedOnce`] knows of the device under a tablespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// Written to, not yet probed: every write is hinted.
    Unprobed,
    /// Probed fast and no slow fsync since: each block is hinted once per sync.
    Fast,
    /// Probed slow, or a file of it was slow to fsync, or the probe failed: every write.
    Slow,
}

impl HintedOnce {
    /// A filter of at least `nbits` bits (a power of two, at least 64).
    pub fn new(nbits: usize) -> Self {
        let nbits = nbits.max(64).next_power_of_two();
        Self {
            bits: vec![0; nbits / 64],
            mask: nbits as u64 - 1,
            epoch: 0,
            since: None,
            devices: Vec::with_capacity(MAX_DEVICES),
            rates: Vec::with_capacity(MAX_DEVICES),
        }
    }

    /// Forgets every block if the files were synced since the last call (`epoch`, from
    /// [`Smgr::syncs_done`]) or `HINTED_ONCE_MAX_AGE` has passed since the last clearing.
    /// Call once per batch of writes (a bgwriter round), not per write.
    pub fn start(&mut self, epoch: u64, now: Instant) {
        let stale = self
            .since
            .is_none_or(|t| now.duration_since(t) >= HINTED_ONCE_MAX_AGE);
        if epoch != self.epoch || stale {
            self.bits.fill(0);
            self.epoch = epoch;
            self.since = Some(now);
        }
    }

    /// Whether `tag` is to be hinted: on a fast device, true the first time it is asked
    /// since the last clearing, false after; elsewhere always true. The block is
    /// remembered either way (a device found fast later knows what was hinted).
    pub fn first(&mut self, tag: &BufferTag) -> bool {
        let h = tag.hash64() & self.mask;
        let (word, bit) = ((h / 64) as usize, 1u64 << (h % 64));
        let seen = self.bits[word] & bit != 0;
        self.bits[word] |= bit;
        // Asked first: a tablespace is recorded (for its probe) at its first write.
        let fast = self.device(tag.rel.tablespace) == Device::Fast;
        !seen || !fast
    }

    /// What is known of `tablespace`'s device; a tablespace seen for the first time is
    /// recorded as [`Device::Unprobed`] (while there is room: no allocation).
    pub fn device(&mut self, tablespace: u32) -> Device {
        if let Some(&(_, d)) = self.devices.iter().find(|(t, _)| *t == tablespace) {
            return d;
        }
        if self.devices.len() < MAX_DEVICES {
            self.devices.push((tablespace, Device::Unprobed));
            self.rates.push(None);
        }
        Device::Unprobed
    }

    /// The lowest write-back rate, pages a second, that a probe measured among the fast
    /// devices under the tablespaces written to so far (None: none probed fast, or every
    /// one turned slow). The bgwriter paces its writes by it (`bgwriter_device_share`):
    /// what a paced round leaves, backends write to the page cache unhinted, which only a
    /// fast device drains before the checkpoint's fsync; a slow one keeps every write
    /// hinted and unpaced.
    pub fn slowest_rate(&self) -> Option<f64> {
        self.devices
            .iter()
            .zip(&self.rates)
            .filter(|((_, d), _)| *d == Device::Fast)
            .filter_map(|(_, r)| *r)
            .reduce(f64::min)
    }

    /// Probes one tablespace written to but not yet probed (`probe`: the pages a second
    /// its device writes back, or None if the probe failed; one per call, so a batch
    /// waits for at most one probe) and marks slow each one `slow_sync` names. A device
    /// is fast at `FAST_PAGES_PER_SEC` or more. Call at the start of a batch of
    /// writes (a bgwriter round), not per write. Returns the tablespaces whose verdict
    /// changed, with the new one.
    pub fn refresh_devices(
        &mut self,
        mut probe: impl FnMut(u32) -> Option<f64>,
        slow_sync: impl Fn(u32) -> bool,
    ) -> impl Iterator<Item = (u32, Device)> + '_ {
        let mut changed = 0u64;
        let mut probed = false;
        for (i, (ts, d)) in self.devices.iter_mut().enumerate() {
            let new = match *d {
                Device::Unprobed if !probed => {
                    probed = true;
                    let rate = probe(*ts);
                    self.rates[i] = rate;
                    match rate {
                        Some(r) if r >= super::FAST_PAGES_PER_SEC => Device::Fast,
                        _ => Device::Slow,
                    }
                }
                other => other,
            };
            let new = if new == Device::Fast && slow_sync(*ts) {
                Device::Slow
            } else {
                new
            };
            if new != *d {
                *d = new;
                changed |= 1 << i;
            }
        }
        self.devices
            .iter()
            .enumerate()
            .filter(move |(i, _)| changed & (1 << i) != 0)
            .map(|(_, &e)| e)
    }
}

/// Pending writes of one writer, issued as writeback hints every `limit` blocks.
#[derive(Debug)]
pub struct WritebackContext {
    pending: Vec<BufferTag>,
    limit: usize,
}

impl WritebackContext {
    /// A context that issues hints every `limit` blocks (0: never).
    pub fn new(limit: usize) -> Self {
        Self {
            pending: Vec::with_capacity(limit),
            limit,
        }
    }

    /// Blocks collected and not yet hinted.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Records that `tag` was written; issues the hints once `limit` are pending. Returns
    /// the number of ranges hinted (0 if none were issued).
    pub fn add(&mut self, smgr: &Smgr, tag: BufferTag, context: IoContext) -> SmgrResult<usize> {
        if self.limit == 0 {
            return Ok(0);
        }
        // Issued at `limit`, so the list preallocated for `limit` tags never grows.
        debug_assert!(
            self.pending.len() < self.limit && self.pending.capacity() >= self.limit,
            "writeback context holds {} of {} tags (capacity {})",
            self.pending.len(),
            self.limit,
            self.pending.capacity()
        );
        self.pending.push(tag);
        if self.pending.len() >= self.limit {
            return self.issue(smgr, context);
        }
        Ok(0)
    }

    /// Hints every pending block now: sorted by tag, runs of consecutive blocks of one
    /// fork merged into one call. Returns the number of ranges hinted. The list is emptied
    /// even if a hint fails (a hint is advice; the checkpoint's fsync reports real
    /// failures).
    pub fn issue(&mut self, smgr: &Smgr, context: IoContext) -> SmgrResult<usize> {
        self.pending.sort_unstable();
        let mut ranges = 0;
        let mut result = Ok(());
        for (first, n) in merge_runs(&self.pending) {
            ranges += 1;
            if let Err(e) = smgr.writeback(first.rel, first.fork, first.block, n, context) {
                result = result.and(Err(e));
            }
        }
        self.pending.clear();
        result.map(|()| ranges)
    }
}

/// Runs of consecutive blocks of one fork in sorted `tags` (duplicates fold into their
/// run): (first tag, block count).
fn merge_runs(tags: &[BufferTag]) -> impl Iterator<Item = (BufferTag, u32)> + '_ {
    debug_assert!(
        tags.windows(2).all(|w| w[0] <= w[1]),
        "merging writeback runs of unsorted tags"
    );
    let mut i = 0;
    std::iter::from_fn(move || {
        let first = *tags.get(i)?;
        let mut last = first.block;
        i += 1;
        while let Some(t) = tags.get(i) {
            let same_fork = t.rel == first.rel && t.fork == first.fork;
            if !same_fork || t.block > last.saturating_add(1) {
                break;
            }
            last = t.block;
            i += 1;
        }
        Some((first, last - first.block + 1))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ForkNumber, RelFileId};

    /// A block is hinted once until the files are synced (a new epoch) or the age limit
    /// passes; other blocks are not affected.
    #[test]
    fn a_block_is_hinted_once_per_sync_epoch() {
        let rel = RelFileId::new(0, 1);
        let t = |block| BufferTag::new(rel, ForkNumber::Main, block);
        let mut f = HintedOnce::new(1 << 16);
        assert_eq!(f.device(rel.tablespace), Device::Unprobed);
        assert_eq!(f.refresh_devices(|_| Some(1e6), |_| false).count(), 1);
        let t0 = Instant::now();
        f.start(0, t0);
        assert!(f.first(&t(1)));
        assert!(
            !f.first(&t(1)),
            "a second write of block 1 in the same epoch"
        );
        assert!(f.first(&t(2)));
        f.start(0, t0 + Duration::from_secs(1));
        assert!(!f.first(&t(1)), "same epoch, young: still remembered");
        f.start(1, t0 + Duration::from_secs(2));
        assert!(f.first(&t(1)), "the files were synced: hint again");
        assert!(!f.first(&t(1)));
        f.start(1, t0 + Duration::from_secs(2) + HINTED_ONCE_MAX_AGE);
        assert!(f.first(&t(1)), "the kernel's expiry passed: hint again");
        // Distinct blocks are told apart (4,096 blocks in 65,536 bits: a few collisions).
        f.start(2, t0 + Duration::from_secs(100));
        let first = (0..4096).filter(|&b| f.first(&t(b))).count();
        assert!(first > 3900, "{first} of 4096 blocks hinted");
    }

    /// Each tablespace's device is judged apart: unprobed and slow ones are hinted every
    /// write, a fast one once; a slow fsync turns a fast device slow for good; a failed
    /// probe counts as slow; tablespaces beyond `MAX_DEVICES` are hinted every write.
    #[test]
    fn devices_are_judged_per_tablespace() {
        let t = |ts, block| BufferTag::new(RelFileId::new(ts, 1), ForkNumber::Main, block);
        let mut f = HintedOnce::new(1 << 16);
        f.start(0, Instant::now());
        assert_eq!(f.slowest_rate(), None, "nothing probed");
        for ts in [1, 2, 3] {
            assert!(f.first(&t(ts, 5)) && f.first(&t(ts, 5)), "unprobed: always");
        }
        let mut probed = Vec::new();
        let mut changed: Vec<(u32, Device)> = Vec::new();
        for _ in 0..3 {
            let before = probed.len();
            changed.extend(f.refresh_devices(
                |ts| {
                    probed.push(ts);
                    [Some(1e6), Some(100.0), None][ts as usize - 1]
                },
                |_| false,
            ));
            assert_eq!(probed.len(), before + 1, "one probe per call");
        }
        assert_eq!(probed, [1, 2, 3]);
        let (fast, slow) = (Device::Fast, Device::Slow);
        assert_eq!(changed, [(1, fast), (2, slow), (3, slow)]);
        assert_eq!(
            f.slowest_rate(),
            Some(1e6),
            "the slowest fast device's rate"
        );
        assert!(
            !f.first(&t(1, 5)),
            "fast: block 5 was hinted before the probe"
        );
        assert!(f.first(&t(2, 5)) && f.first(&t(3, 5)), "slow: every write");
        // Nothing new to probe; a slow fsync in tablespace 1 turns it slow.
        let changed: Vec<_> = f
            .refresh_devices(|_| panic!("probed twice"), |ts| ts == 1)
            .collect();
        assert_eq!(changed, [(1, slow)]);
        assert_eq!(f.slowest_rate(), None, "no fast device left");
        assert!(f.first(&t(1, 5)));
        assert_eq!(f.refresh_devices(|_| Some(1e6), |_| false).count(), 0);
        assert_eq!(f.device(1), slow, "slow for good");
        // A full table: later tablespaces are not remembered, always hinted.
        for ts in 4..(MAX_DEVICES as u32 + 10) {
            f.device(ts);
        }
        assert_eq!(f.devices.len(), MAX_DEVICES);
        for _ in 0..MAX_DEVICES {
            f.refresh_devices(|_| Some(1e6), |_| false).count();
        }
        let beyond = MAX_DEVICES as u32 + 5;
        assert!(f.first(&t(beyond, 9)) && f.first(&t(beyond, 9)));
    }

    #[test]
    fn runs_are_sorted_and_merged_per_fork() {
        let a = RelFileId::new(0, 1);
        let b = RelFileId::new(0, 2);
        let t = |rel, fork, block| BufferTag::new(rel, fork, block);
        let mut tags = vec![
            t(b, ForkNumber::Main, 7),
            t(a, ForkNumber::Main, 2),
            t(a, ForkNumber::Main, 1),
            t(a, ForkNumber::Main, 3),
            t(a, ForkNumber::Main, 3),
            t(a, ForkNumber::FreeSpace, 4),
            t(a, ForkNumber::Main, 9),
            t(b, ForkNumber::Main, 8),
        ];
        tags.sort_unstable();
        let runs: Vec<(BufferTag, u32)> = merge_runs(&tags).collect();
        assert_eq!(
            runs,
            vec![
                (t(a, ForkNumber::Main, 1), 3),
                (t(a, ForkNumber::Main, 9), 1),
                (t(a, ForkNumber::FreeSpace, 4), 1),
                (t(b, ForkNumber::Main, 7), 2),
            ]
        );
    }
}
