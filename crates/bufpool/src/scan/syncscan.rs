//! Synchronized scans (PostgreSQL's syncscan.c, since 8.3): a small shared table of
//! where recent large sequential scans are, or ended, per relation fork. A new large scan
//! starts at the reported block instead of block 0 and wraps around, so two scans of one
//! table that overlap in time read its pages once between them instead of twice: the
//! second rides just behind the first, finding the pages the first one just read.
//!
//! Owns: [`ScanPositions`], a most-recently-used list of at most
//! `SYNC_SCAN_ENTRIES` `(relation fork, block)` pairs.
//!
//! Invariants: at most one entry per relation fork; the list never grows beyond its
//! capacity (the least recently used entry is dropped); nothing is allocated after
//! [`ScanPositions::new`]. A start position is only a hint: a scan started at `s` reads
//! `s..n` then `0..s`, so it returns the same set of tuples as a scan from 0, in a different
//! order. A reported block beyond the relation's current end starts the scan at 0.
//!
//! Locks: one mutex around the list, never held across I/O. [`ScanPositions::start`]
//! waits for it (once per scan); [`ScanPositions::report`] only tries it: a scan that
//! finds it busy skips this report (the next one comes `REPORT_INTERVAL_BYTES` later),
//! so scans never queue behind each other here.
//!
//! **Groups** (`seqscan_sync_pacing`, on by default; PostgreSQL has none): scans of one table
//! that read through rings share its pages only while they stay within a ring of each
//! other; once the first runs further ahead, the others find its pages gone and read them
//! again. A paced scan joins its table's group ([`ScanPositions::join`], at most
//! `GROUP_MEMBERS` scans per table, `SYNC_SCAN_ENTRIES` tables) and tells it where it
//! is every few pages ([`GroupMember::advance`]). The group's front scan (no other member
//! is ahead of it by less than half the table) that is more than `max_lead` pages ahead
//! of its last member waits, holding no page lock, until that gap is at most half of
//! `max_lead`, that member leaves, or `GROUP_WAIT_MAX` passes. Only the front waits, and
//! only for members that are not fronts, so scans never wait for each other in a cycle;
//! a member that advances or leaves wakes the waiters. A member that did not move during a
//! whole wait (its consumer stalls, or waits for the front's own thread, as a scan inside
//! another scan's callback would) is left out of the lead until it advances again, so it
//! costs the front one wait, not one per check. The groups have their own mutex and
//! condition variable, taken once per check, never with the list's.

use std::time::{Duration, Instant};

use crate::sync::{Condvar, Mutex};
use crate::types::{BlockNumber, ForkNumber, RelFileId};

/// Positions kept (PostgreSQL's SYNC_SCAN_NELEM: enough for the large scans one system
/// runs at once; a relation not scanned recently falls off the end).
pub(crate) const SYNC_SCAN_ENTRIES: usize = 20;

/// A scan reports its position once per this many bytes of pages (PostgreSQL's
/// SYNC_SCAN_REPORT_INTERVAL, 128 kB): often enough that a follower starts within a few
/// pages of the leader (the OS's readahead window), rarely enough that the lock is cold.
pub(crate) const REPORT_INTERVAL_BYTES: usize = 128 * 1024;

/// Most scans of one relation fork in a group; more run unpaced.
pub(crate) const GROUP_MEMBERS: usize = 8;

/// Longest a front scan waits at one check for its group's last member.
pub(crate) const GROUP_WAIT_MAX: Duration = Duration::from_millis(50);

/// Which relation fork an entry is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    rel: RelFileId,
    fork: ForkNumber,
}

/// The paced scans of one relation fork: where each member is (None: a free slot).
#[derive(Debug, Clone, Copy)]
struct Group {
    key: Key,
    /// The largest relation size a member started with (positions wrap here).
    nblocks: BlockNumber,
    members: [Option<BlockNumber>; GROUP_MEMBERS],
    /// Members a front waited for in vain (they did not move during a whole wait: their
    /// consumer stalls, or waits for the front itself): left out of the lead until they
    /// advance again.
    ignored: [bool; GROUP_MEMBERS],
    /// Members waiting for another to advance.
    waiting: u32,
}

impl Group {
    fn is_empty(&self) -> bool {
        self.members.iter().all(Option::is_none)
    }
}

/// The shared table of scan positions (see the module doc).
#[derive(Debug)]
pub struct ScanPositions {
    /// Most recently used first; `len() <= capacity` always.
    list: Mutex<Vec<(Key, BlockNumber)>>,
    capacity: usize,
    /// The groups of paced scans: a fixed array (None: free), allocated once.
    groups: Mutex<Vec<Option<Group>>>,
    /// Signalled when a group member advances or leaves while another waits.
    moved: Condvar,
}

impl Default for ScanPositions {
    fn default() -> Self {
        Self::new(SYNC_SCAN_ENTRIES)
    }
}

impl ScanPositions {
    /// A table of at most `capacity` (at least 1) positions.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        ScanPositions {
            list: Mutex::new(Vec::with_capacity(capacity)),
            capacity,
            groups: Mutex::new(vec![None; capacity]),
            moved: Condvar::new(),
        }
    }

    /// Joins the group of paced scans of `rel`'s `fork` (made if new), at `block` of a
    /// relation of `nblocks` (at least 1). None when the group has `GROUP_MEMBERS`
    /// members or every group slot is taken: the scan then runs unpaced.
    pub fn join(
        &self,
        rel: RelFileId,
        fork: ForkNumber,
        nblocks: BlockNumber,
        block: BlockNumber,
    ) -> Option<GroupMember<'_>> {
        let key = Key { rel, fork };
        let mut groups = self.groups.lock();
        let g = match groups.iter().position(|g| g.is_some_and(|g| g.key == key)) {
            Some(g) => g,
            None => {
                let free = groups.iter().position(Option::is_none)?;
                groups[free] = Some(Group {
                    key,
                    nblocks: nblocks.max(1),
                    members: [None; GROUP_MEMBERS],
                    ignored: [false; GROUP_MEMBERS],
                    waiting: 0,
                });
                free
            }
        };
        let group = groups[g].as_mut().expect("found or made above");
        let slot = group.members.iter().position(Option::is_none)?;
        // A table that grew since the group began: its blocks wrap at the larger size.
        group.nblocks = group.nblocks.max(nblocks);
        group.members[slot] = Some(block % group.nblocks);
        group.ignored[slot] = false;
        Some(GroupMember {
            positions: self,
            group: g,
            slot,
        })
    }

    /// Members of the group of `rel`'s `fork` now (for tests and reports).
    pub fn group_members(&self, rel: RelFileId, fork: ForkNumber) -> usize {
        let key = Key { rel, fork };
        let groups = self.groups.lock();
        groups
            .iter()
            .flatten()
            .find(|g| g.key == key)
            .map_or(0, |g| g.members.iter().flatten().count())
    }

    /// Where a large scan of `rel`'s `fork`, now `nblocks` long, should start: the last
    /// reported block if it is inside the relation, else 0. Marks the fork as most
    /// recently used (a first scan registers it at 0, as PostgreSQL does).
    pub fn start(&self, rel: RelFileId, fork: ForkNumber, nblocks: BlockNumber) -> BlockNumber {
        let mut list = self.list.lock();
        let block = Self::touch(&mut list, self.capacity, Key { rel, fork }, None);
        if block < nblocks {
            block
        } else {
            0
        }
    }

    /// Records that a scan of `rel`'s `fork` is at `block` (about to read it, or ended
    /// there). Skipped when another scan holds the lock; returns whether it was recorded.
    pub fn report(&self, rel: RelFileId, fork: ForkNumber, block: BlockNumber) -> bool {
        match self.list.try_lock() {
            Some(mut list) => {
                Self::touch(&mut list, self.capacity, Key { rel, fork }, Some(block));
                true
            }
            None => false,
        }
    }

    /// The recorded position of `rel`'s `fork`, if any (for tests and reports).
    pub fn position(&self, rel: RelFileId, fork: ForkNumber) -> Option<BlockNumber> {
        let key = Key { rel, fork };
        self.list.lock().iter().find(|e| e.0 == key).map(|e| e.1)
    }

    /// Moves `key` to the front, setting its block to `set` (or keeping it; 0 for a new
    /// entry), and returns the block now recorded. Allocation-free: the vector never grows
    /// beyond the capacity reserved in `new`.
    fn touch(
        list: &mut Vec<(Key, BlockNumber)>,
        capacity: usize,
        key: Key,
        set: Option<BlockNumber>,
    ) -> BlockNumber {
        let at = match list.iter().position(|e| e.0 == key) {
            Some(i) => i,
            None => {
                if list.len() == capacity {
                    list.pop();
                }
                list.push((key, 0));
                list.len() - 1
            }
        };
        list[..=at].rotate_right(1);
        if let Some(b) = set {
            list[0].1 = b;
        }
        debug_assert!(list.len() <= capacity);
        list[0].1
    }

    /// Blocks between reports for pages of `page_size` bytes (at least 1).
    pub fn report_interval(page_size: usize) -> BlockNumber {
        (REPORT_INTERVAL_BYTES / page_size.max(1)).max(1) as BlockNumber
    }
}

/// A scan's place in its table's group (see the module doc); leaves it when dropped.
#[derive(Debug)]
pub struct GroupMember<'a> {
    positions: &'a ScanPositions,
    group: usize,
    slot: usize,
}

impl GroupMember<'_> {
    /// Records that this scan is at `block`; if it is its group's front and more than
    /// `max_lead` pages ahead of the last member, waits (at most `max_wait`; scans use
    /// `GROUP_WAIT_MAX`) until that gap is at most `max_lead / 2` or that member leaves.
    /// Call it holding no page lock. Returns how long it waited.
    pub fn advance(
        &self,
        block: BlockNumber,
        max_lead: BlockNumber,
        max_wait: Duration,
    ) -> Duration {
        let p = self.positions;
        let mut groups = p.groups.lock();
        let g = groups[self.group]
            .as_mut()
            .expect("a member's group exists");
        g.members[self.slot] = Some(block % g.nblocks);
        g.ignored[self.slot] = false;
        if g.waiting > 0 {
            p.moved.notify_all();
        }
        let mut lead = front_lead(g, self.slot);
        if lead.is_none_or(|l| l <= max_lead) {
            return Duration::ZERO;
        }
        let before = g.members;
        let start = Instant::now();
        let deadline = start + max_wait;
        while lead.is_some_and(|l| l > max_lead / 2) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                // Waited in vain: leave out whoever did not move, until they do.
                let g = groups[self.group].as_mut().expect("still a member");
                let unmoved = g
                    .members
                    .iter()
                    .zip(&before)
                    .map(|(m, b)| m.is_some() && m == b);
                for (i, (ignored, unmoved)) in g.ignored.iter_mut().zip(unmoved).enumerate() {
                    *ignored |= unmoved && i != self.slot;
                }
                break;
            }
            groups[self.group].as_mut().expect("still a member").waiting += 1;
            groups = p.moved.wait_for(groups, left).0;
            let g = groups[self.group].as_mut().expect("still a member");
            g.waiting -= 1;
            lead = front_lead(g, self.slot);
        }
        start.elapsed()
    }
}

impl Drop for GroupMember<'_> {
    fn drop(&mut self) {
        let p = self.positions;
        let mut groups = p.groups.lock();
        let entry = &mut groups[self.group];
        let g = entry.as_mut().expect("a member's group exists");
        g.members[self.slot] = None;
        g.ignored[self.slot] = false;
        let waiting = g.waiting > 0;
        if g.is_empty() {
            *entry = None;
        }
        if waiting {
            p.moved.notify_all();
        }
    }
}

/// How far member `me` of `g` is ahead of the group's last member (0 alone), if it is the
/// front: no other member is ahead of it by less than half the table (positions wrap at
/// the relation's end, as the scans do). Every group has at most one front unless members
/// share a block, and a front only waits for members that do not wait.
fn front_lead(g: &Group, me: usize) -> Option<BlockNumber> {
    let n = g.nblocks;
    let at = g.members[me].expect("a member has a position");
    let mut lead = 0;
    for (i, other) in g.members.iter().enumerate() {
        let Some(o) = *other else { continue };
        if i == me || g.ignored[i] {
            continue;
        }
        // How far `o` is behind `me` along the wrapping order (no overflow near u32::MAX).
        let behind = if at >= o { at - o } else { at + (n - o) };
        // `o` is ahead of `me` by less than half the table; exactly half apart, the lower
        // slot counts as ahead, so two such scans never both wait for each other.
        if behind > n / 2 || (2 * behind == n && i < me) {
            return None;
        }
        lead = lead.max(behind);
    }
    Some(lead)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: RelFileId = RelFileId::new(0, 1);
    const B: RelFileId = RelFileId::new(0, 2);
    const MAIN: ForkNumber = ForkNumber::Main;

    #[test]
    fn a_first_scan_starts_at_zero_and_a_second_where_the_first_is() {
        let p = ScanPositions::default();
        assert_eq!(p.start(A, MAIN, 1000), 0);
        assert_eq!(p.position(A, MAIN), Some(0));
        assert!(p.report(A, MAIN, 480));
        assert_eq!(p.start(A, MAIN, 1000), 480);
        assert_eq!(p.start(B, MAIN, 1000), 0, "positions are per relation");
    }

    #[test]
    fn a_position_past_the_end_starts_at_zero() {
        let p = ScanPositions::default();
        p.report(A, MAIN, 900);
        assert_eq!(p.start(A, MAIN, 500), 0, "the table was truncated since");
        assert_eq!(p.start(A, MAIN, 901), 900);
    }

    #[test]
    fn the_least_recently_used_entry_falls_off() {
        let p = ScanPositions::new(3);
        for i in 1..=3 {
            p.report(RelFileId::new(0, i), MAIN, i * 10);
        }
        // Touch relation 1 so relation 2 becomes the oldest.
        assert_eq!(p.start(RelFileId::new(0, 1), MAIN, 100), 10);
        p.report(RelFileId::new(0, 4), MAIN, 40);
        assert_eq!(p.position(RelFileId::new(0, 2), MAIN), None);
        for (i, b) in [(1, 10), (3, 30), (4, 40)] {
            assert_eq!(p.position(RelFileId::new(0, i), MAIN), Some(b));
        }
        assert!(p.list.lock().len() <= 3);
        assert!(p.list.lock().capacity() <= 3, "never reallocated");
    }

    #[test]
    fn a_report_never_waits_for_the_lock() {
        let p = ScanPositions::default();
        let held = p.list.lock();
        assert!(!p.report(A, MAIN, 7), "skipped while the lock is held");
        drop(held);
        assert!(p.report(A, MAIN, 7));
        assert_eq!(p.position(A, MAIN), Some(7));
    }

    #[test]
    fn only_the_front_of_a_group_has_a_lead() {
        let p = ScanPositions::default();
        let a = p.join(A, MAIN, 1000, 100).unwrap();
        let b = p.join(A, MAIN, 1000, 40).unwrap();
        let c = p.join(A, MAIN, 1000, 70).unwrap();
        assert_eq!(p.group_members(A, MAIN), 3);
        let lead = |m: &GroupMember<'_>| {
            let groups = p.groups.lock();
            front_lead(groups[m.group].as_ref().unwrap(), m.slot)
        };
        assert_eq!(lead(&a), Some(60), "a is the front, 60 pages ahead of b");
        assert_eq!((lead(&b), lead(&c)), (None, None));
        // Past the end a wraps to block 5: b (40) and c (70) are now ahead of it, and c is
        // the front, 65 pages ahead of a.
        assert_eq!(a.advance(1005, 2000, GROUP_WAIT_MAX), Duration::ZERO);
        assert_eq!((lead(&a), lead(&b)), (None, None));
        assert_eq!(lead(&c), Some(65));
        drop((a, b, c));
        assert_eq!(p.group_members(A, MAIN), 0);
        assert!(
            p.groups.lock().iter().all(Option::is_none),
            "an empty group is freed"
        );
    }

    #[test]
    fn a_group_wraps_at_the_largest_size_and_near_the_block_limit() {
        let p = ScanPositions::default();
        let a = p.join(A, MAIN, 100, 90).unwrap();
        let b = p.join(A, MAIN, 150, 120).unwrap();
        let lead = |m: &GroupMember<'_>| {
            let groups = p.groups.lock();
            front_lead(groups[m.group].as_ref().unwrap(), m.slot)
        };
        assert_eq!(
            lead(&b),
            Some(30),
            "120 is a block of the grown table, not 20"
        );
        drop((a, b));
        let n = u32::MAX - 1;
        let a = p.join(B, MAIN, n, n - 1).unwrap();
        let b = p.join(B, MAIN, n, n - 11).unwrap();
        assert_eq!((lead(&a), lead(&b)), (Some(10), None));
        a.advance(3, 1_000, GROUP_WAIT_MAX); // past the end, back at block 3
        assert_eq!(lead(&a), Some(14), "3 is 14 past n - 11 around the end");
    }

    #[test]
    fn groups_are_bounded_and_per_relation() {
        let p = ScanPositions::new(1);
        let members: Vec<_> = (0..GROUP_MEMBERS)
            .map(|i| p.join(A, MAIN, 100, i as u32).unwrap())
            .collect();
        assert!(p.join(A, MAIN, 100, 0).is_none(), "the group is full");
        assert!(p.join(B, MAIN, 100, 0).is_none(), "no group slot left");
        drop(members);
        assert!(p.join(B, MAIN, 100, 0).is_some());
        assert_eq!(p.groups.lock().capacity(), 1, "never reallocated");
    }

    /// The front waits for the last member and goes on when it catches up; a member's
    /// leaving releases it too. The waits here may last a minute, so a lost wake-up shows
    /// as a wait that long, not as a hang.
    #[test]
    fn the_front_waits_until_the_last_member_catches_up() {
        let long = Duration::from_secs(60);
        let p = ScanPositions::default();
        let front = p.join(A, MAIN, 1000, 100).unwrap();
        let last = p.join(A, MAIN, 1000, 10).unwrap();
        assert_eq!(
            front.advance(100, 200, long),
            Duration::ZERO,
            "within its lead"
        );
        let waiting = || p.groups.lock().iter().flatten().any(|g| g.waiting > 0);
        std::thread::scope(|s| {
            let h = s.spawn(|| front.advance(120, 50, long));
            // Once the front waits, the last member catches up in two steps: 60 pages
            // behind (still more than half the lead), then 20.
            while !waiting() {
                std::thread::yield_now();
            }
            assert_eq!(last.advance(60, 50, long), Duration::ZERO, "not the front");
            assert!(waiting(), "60 behind: the front still waits");
            last.advance(100, 50, long);
            assert!(h.join().unwrap() < long, "woken when the gap closed");
        });
        // The last member falls back; the front would wait, but the member leaves.
        last.advance(0, 50, long);
        std::thread::scope(|s| {
            let h = s.spawn(|| front.advance(200, 50, long));
            while !waiting() {
                std::thread::yield_now();
            }
            drop(last);
            assert!(h.join().unwrap() < long, "woken when the member left");
        });
        // Alone in its group, a scan never waits; a timed-out wait returns.
        assert_eq!(front.advance(900, 1, long), Duration::ZERO);
        let other = p.join(A, MAIN, 1000, 900).unwrap();
        let waited = front.advance(950, 10, Duration::from_millis(1));
        assert!(waited >= Duration::from_millis(1), "{waited:?}");
        // `other` did not move during that wait: left out until it does (a scan inside
        // the front's own callback would never move), so the front goes on.
        assert_eq!(front.advance(960, 10, long), Duration::ZERO);
        other.advance(905, 10, long);
        let waited = front.advance(970, 10, Duration::from_millis(1));
        assert!(
            waited >= Duration::from_millis(1),
            "counted again once it moved"
        );
        drop(other);
    }

    #[test]
    fn the_report_interval_is_128_kb_of_pages() {
        assert_eq!(ScanPositions::report_interval(8192), 16);
        assert_eq!(ScanPositions::report_interval(4096), 32);
        assert_eq!(ScanPositions::report_interval(1 << 20), 1);
    }
}
