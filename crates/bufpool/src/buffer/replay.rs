//! Trace replay: a recorded request sequence (`trace.rs`) run through a replacement
//! policy's own code on simulated frames, and through Belady's optimum, for miss ratios at
//! any pool size.
//!
//! Owns: [`replay`] and [`optimal`]. A replay drives the library's `Replacement` over
//! frames that are bare state words: a hit pins and unpins with the hit path's own
//! functions (`state::pinned`, `state::ring_pinned`), a miss takes the policy's victim and
//! stores the usage it admits with, so the policy code is the pool's, not a copy. A ring's
//! request (RING) goes through one ring of `REPLAY_RING_BUFFERS` buffers, reused as
//! `ring.rs` reuses a member (unpinned, usage at most 1, still holding the ring's page;
//! else a victim from the policy joins the ring); every ring request of a trace shares it.
//! Not modelled: overlapping pins (one request at a time, so the policy never meets a
//! pinned buffer), dirtiness and the bgwriter. A lookup that never loads (a probe) counts
//! only when it finds its page.
//! Invariants: hits + misses = the requests counted; OPT's misses never exceed a policy's at
//! the same size. Locks: none (single-threaded).

use std::collections::{BinaryHeap, HashMap, VecDeque};

use super::policy::{Frames, Replacement, ReplacementPolicy};
use super::state::{pinned, refcount, ring_pinned, usage, REFCOUNT_ONE, TAG_VALID, VALID};
use super::trace::{TraceRecord, HIT, PROBE, RING};
use crate::sync::{AtomicU64, Ordering};

/// Buffers of the one ring a replay's ring requests share: the bulk-read ring's default
/// (256 kB) in 8 kB pages.
pub(crate) const REPLAY_RING_BUFFERS: usize = 32;

/// Miss counts of one replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplayCounts {
    /// Pool size replayed, in buffers.
    pub nbuffers: usize,
    /// Requests that found their page in the pool (probes included).
    pub hits: u64,
    /// Requests that had to load their page.
    pub misses: u64,
    /// Probes that found nothing (not requests: they admit nothing).
    pub probes_missed: u64,
}

impl ReplayCounts {
    /// Requests counted: hits plus misses.
    pub fn requests(&self) -> u64 {
        self.hits + self.misses
    }
    /// Misses over requests (0 when there were none).
    pub fn miss_ratio(&self) -> f64 {
        self.misses as f64 / self.requests().max(1) as f64
    }

    /// Counts one request that found its page (`resident`) or not; true if it must load
    /// one (a miss that is not a probe).
    fn count(&mut self, resident: bool, flags: u8) -> bool {
        if resident {
            self.hits += 1;
        } else if flags & PROBE != 0 {
            self.probes_missed += 1;
        } else {
            self.misses += 1;
            return true;
        }
        false
    }
}

/// The pool's own answers in a trace: its hits and misses, as recorded.
pub fn recorded(records: &[TraceRecord], nbuffers: usize) -> ReplayCounts {
    let mut c = ReplayCounts {
        nbuffers,
        ..Default::default()
    };
    for r in records {
        c.count(r.flags & HIT != 0, r.flags);
    }
    c
}

/// Distinct pages requested: every policy's misses at an unbounded pool (the compulsory
/// misses).
pub fn distinct_pages(records: &[TraceRecord]) -> u64 {
    let mut seen = std::collections::HashSet::new();
    for r in records.iter().filter(|r| r.flags & PROBE == 0) {
        seen.insert(key(r));
    }
    seen.len() as u64
}

/// A replay's frames: state and policy words only.
struct SimFrames {
    state: Vec<AtomicU64>,
    link: Vec<AtomicU64>,
}

impl Frames for SimFrames {
    #[inline]
    fn state(&self, id: u32) -> &AtomicU64 {
        &self.state[id as usize]
    }
    #[inline]
    fn link(&self, id: u32) -> &AtomicU64 {
        &self.link[id as usize]
    }
    fn len(&self) -> usize {
        self.state.len()
    }
}

/// The tag hash (`BufferTag::hash64`) of a page key.
#[inline]
fn hash_of(k: u128) -> u64 {
    crate::types::BufferTag::from_words((k >> 64) as u64, k as u64).hash64()
}

#[inline]
fn key(r: &TraceRecord) -> u128 {
    (u128::from(r.tag.word0()) << 64) | u128::from(r.tag.word1())
}

/// Replays `records` through `policy` over `nbuffers` frames.
pub fn replay(records: &[TraceRecord], policy: ReplacementPolicy, nbuffers: usize) -> ReplayCounts {
    let words = || (0..nbuffers).map(|_| AtomicU64::new(0)).collect();
    let frames = SimFrames {
        state: words(),
        link: words(),
    };
    let repl = Replacement::new(policy, nbuffers);
    let mut map: HashMap<u128, u32> = HashMap::with_capacity(nbuffers);
    let mut tags: Vec<Option<u128>> = vec![None; nbuffers];
    // The ring: (buffer, the page it was given for), oldest first.
    let mut ring: VecDeque<(u32, u128)> = VecDeque::new();
    let mut c = ReplayCounts {
        nbuffers,
        ..Default::default()
    };
    for r in records {
        let k = key(r);
        let found = map.get(&k).copied();
        if let Some(id) = found {
            let w = frames.state(id);
            let s = w.load(Ordering::Relaxed);
            let s = if r.flags & RING != 0 {
                ring_pinned(s)
            } else {
                pinned(s)
            };
            w.store(s - REFCOUNT_ONE, Ordering::Relaxed);
        }
        if !c.count(found.is_some(), r.flags) {
            continue;
        }
        let reuse = if r.flags & RING != 0 && ring.len() >= REPLAY_RING_BUFFERS.min(nbuffers / 8) {
            ring.pop_front().filter(|&(id, page)| {
                let s = frames.state(id).load(Ordering::Relaxed);
                tags[id as usize] == Some(page) && refcount(s) == 0 && usage(s) <= 1
            })
        } else {
            None
        };
        let id = match reuse {
            Some((id, _)) => id,
            None => {
                repl.victim(&frames)
                    .expect("a replay holds no pins, so some buffer is always free to take")
                    .0
            }
        };
        if r.flags & RING != 0 {
            ring.push_back((id, k));
        }
        let old = tags[id as usize].replace(k);
        if let Some(old) = old {
            map.remove(&old);
        }
        map.insert(k, id);
        frames
            .state(id)
            .store(repl.admit_usage() | TAG_VALID | VALID, Ordering::Relaxed);
        repl.retagged(&frames, id, old.map(hash_of), hash_of(k));
    }
    debug_assert_eq!(repl.check_invariants(&frames), Ok(()));
    c
}

/// Belady's optimum with demand paging: on a miss in a full pool, evict the page whose
/// next request is furthest away (or never comes). O(n log n) in the requests.
pub fn optimal(records: &[TraceRecord], nbuffers: usize) -> ReplayCounts {
    const NEVER: u64 = u64::MAX;
    let mut next = vec![NEVER; records.len()];
    let mut last: HashMap<u128, u64> = HashMap::new();
    for (i, r) in records.iter().enumerate().rev() {
        if let Some(&j) = last.get(&key(r)) {
            next[i] = j;
        }
        last.insert(key(r), i as u64);
    }
    drop(last);
    let mut resident: HashMap<u128, u64> = HashMap::with_capacity(nbuffers);
    // (next use, page); entries whose next use is stale are skipped when popped.
    let mut heap: BinaryHeap<(u64, u128)> = BinaryHeap::new();
    let mut c = ReplayCounts {
        nbuffers,
        ..Default::default()
    };
    for (i, r) in records.iter().enumerate() {
        let k = key(r);
        let found = resident.get_mut(&k).map(|n| *n = next[i]).is_some();
        if found {
            heap.push((next[i], k));
        }
        if !c.count(found, r.flags) {
            continue;
        }
        if resident.len() == nbuffers {
            while let Some((n, victim)) = heap.pop() {
                if resident.get(&victim) == Some(&n) {
                    resident.remove(&victim);
                    break;
                }
            }
        }
        resident.insert(k, next[i]);
        heap.push((next[i], k));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{BufferTag, ForkNumber, RelFileId};

    fn trace(blocks: &[u32]) -> Vec<TraceRecord> {
        blocks
            .iter()
            .enumerate()
            .map(|(i, &b)| TraceRecord {
                tag: BufferTag::new(
                    RelFileId {
                        tablespace: 0,
                        relation: 1,
                    },
                    ForkNumber::Main,
                    b,
                ),
                flags: 0,
                time_ns: i as u64,
            })
            .collect()
    }

    #[test]
    fn optimum_matches_the_textbook_sequence() {
        // The reference string of the usual OPT example, 3 frames: 9 faults.
        let t = trace(&[7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1]);
        let o = optimal(&t, 3);
        assert_eq!((o.misses, o.hits), (9, 11));
        assert_eq!(optimal(&t, 100).misses, distinct_pages(&t));
    }

    #[test]
    fn clock_replay_counts_what_the_sweep_does() {
        // 16 frames, a loop over 17 pages: the clock (like LRU) misses every time, OPT
        // keeps 15 of them.
        let blocks: Vec<u32> = (0..10).flat_map(|_| 0..17).collect();
        let t = trace(&blocks);
        let c = replay(&t, ReplacementPolicy::Clock, 16);
        assert_eq!((c.misses, c.hits), (170, 0));
        let o = optimal(&t, 16);
        assert!(o.misses < 40, "{o:?}");
        // A hot page requested between every cold one stays resident.
        let blocks: Vec<u32> = (100..400).flat_map(|b| [0, b]).collect();
        let c = replay(&trace(&blocks), ReplacementPolicy::Clock, 16);
        assert_eq!(
            c.misses,
            1 + 300,
            "only the first request of the hot page misses"
        );
    }

    /// SIEVE as its paper states it, on a vector (index 0 the tail): the reference the
    /// pool's SIEVE must match exactly in a replay.
    fn sieve_reference(blocks: &[u32], cap: usize) -> u64 {
        let mut q: Vec<(u32, bool)> = Vec::new();
        let mut hand: Option<usize> = None;
        let mut misses = 0;
        for &b in blocks {
            if let Some(e) = q.iter_mut().find(|e| e.0 == b) {
                e.1 = true;
                continue;
            }
            misses += 1;
            if q.len() == cap {
                let mut h = hand.unwrap_or(0);
                while q[h].1 {
                    q[h].1 = false;
                    h = (h + 1) % q.len();
                }
                q.remove(h);
                hand = (h < q.len()).then_some(h);
            }
            q.push((b, false));
        }
        misses
    }

    /// Checks `policy`'s replay against `reference` on 20 skewed random traces of 3,000
    /// requests (squaring a uniform draw favours low blocks), at each of `caps` frames;
    /// and that no policy beats the optimum.
    fn matches_reference(
        policy: ReplacementPolicy,
        reference: fn(&[u32], usize) -> u64,
        seed: u64,
        caps: [usize; 3],
    ) {
        use rand::{rngs::SmallRng, Rng, SeedableRng};
        let mut rng = SmallRng::seed_from_u64(seed);
        for round in 0..20 {
            let span = 20 + round * 10;
            let blocks: Vec<u32> = (0..3_000)
                .map(|_| {
                    let u: f64 = rng.random();
                    (u * u * f64::from(span)) as u32
                })
                .collect();
            for cap in caps {
                let c = replay(&trace(&blocks), policy, cap);
                assert_eq!(
                    c.misses,
                    reference(&blocks, cap),
                    "span {span}, {cap} frames"
                );
                assert!(c.misses >= optimal(&trace(&blocks), cap).misses);
            }
        }
    }

    #[test]
    fn sieve_replay_matches_the_papers_algorithm() {
        matches_reference(ReplacementPolicy::Sieve, sieve_reference, 7, [4, 16, 37]);
    }

    /// S3-FIFO as `policy/s3fifo.rs` states it for fixed frames (one eviction per miss),
    /// on plain queues (the back the head): the reference its replay must match.
    fn s3fifo_reference(blocks: &[u32], cap: usize) -> u64 {
        use std::collections::VecDeque;
        let small_target = (cap * 10 / 100).max(1);
        let (mut s, mut m) = (VecDeque::<(u32, u64)>::new(), VecDeque::<(u32, u64)>::new());
        // The ghost queue ages by insertions: a taken entry keeps its slot until it
        // would have left (as the paper's fingerprint-and-insertion-time table).
        let mut ghost: VecDeque<(u32, bool)> = VecDeque::new();
        let mut misses = 0;
        for &b in blocks {
            if let Some(e) = s.iter_mut().chain(m.iter_mut()).find(|e| e.0 == b) {
                e.1 = (e.1 + 1).min(5);
                continue;
            }
            misses += 1;
            if s.len() + m.len() == cap {
                loop {
                    if !s.is_empty() && (s.len() >= small_target || m.is_empty()) {
                        let (p, f) = s.pop_front().unwrap();
                        if f >= 2 {
                            m.push_back((p, f));
                            continue;
                        }
                        if ghost.len() == cap - small_target {
                            ghost.pop_front();
                        }
                        ghost.push_back((p, true));
                        break;
                    }
                    let (p, f) = m.pop_front().unwrap();
                    if f > 0 {
                        m.push_back((p, f.min(3) - 1));
                        continue;
                    }
                    break;
                }
            }
            match ghost.iter_mut().find(|g| **g == (b, true)) {
                Some(g) => {
                    g.1 = false;
                    m.push_back((b, 0));
                }
                None => s.push_back((b, 0)),
            }
        }
        misses
    }

    #[test]
    fn s3fifo_replay_matches_its_stated_algorithm() {
        matches_reference(
            ReplacementPolicy::S3Fifo,
            s3fifo_reference,
            11,
            [10, 16, 37],
        );
    }

    /// CAR as its paper states it (Bansal and Modha, FAST 2004, Figure 2), on queues (the
    /// front the clock's head, where the hand is): the reference `car` must match.
    fn car_reference(blocks: &[u32], c: usize) -> u64 {
        use std::collections::VecDeque;
        let (mut t1, mut t2) = (VecDeque::<(u32, bool)>::new(), VecDeque::new());
        let (mut b1, mut b2) = (VecDeque::<u32>::new(), VecDeque::<u32>::new());
        let (mut p, mut misses) = (0usize, 0);
        for &x in blocks {
            if let Some(e) = t1.iter_mut().chain(t2.iter_mut()).find(|e| e.0 == x) {
                e.1 = true;
                continue;
            }
            misses += 1;
            let (in_b1, in_b2) = (b1.contains(&x), b2.contains(&x));
            if t1.len() + t2.len() == c {
                loop {
                    if t1.len() >= p.max(1) {
                        let (q, r) = t1.pop_front().unwrap();
                        if !r {
                            b1.push_back(q);
                            break;
                        }
                        t2.push_back((q, false));
                    } else {
                        let (q, r) = t2.pop_front().unwrap();
                        if !r {
                            b2.push_back(q);
                            break;
                        }
                        t2.push_back((q, false));
                    }
                }
                if !in_b1 && !in_b2 {
                    if t1.len() + b1.len() == c {
                        b1.pop_front();
                    } else if t1.len() + t2.len() + b1.len() + b2.len() == 2 * c {
                        b2.pop_front();
                    }
                }
            }
            if in_b1 {
                p = (p + (b2.len() / b1.len()).max(1)).min(c);
                b1.retain(|&q| q != x);
                t2.push_back((x, false));
            } else if in_b2 {
                p = p.saturating_sub((b1.len() / b2.len()).max(1));
                b2.retain(|&q| q != x);
                t2.push_back((x, false));
            } else {
                t1.push_back((x, false));
            }
        }
        misses
    }

    #[test]
    fn arc_replay_matches_car() {
        matches_reference(ReplacementPolicy::Car, car_reference, 13, [4, 16, 37]);
    }

    /// Full 2Q (Johnson and Shasha, VLDB 1994) with Am a clock, as `policy/twoq.rs`
    /// states it, on queues (front oldest): the reference `2q` must match.
    fn two_q_reference(blocks: &[u32], c: usize) -> u64 {
        use std::collections::VecDeque;
        let (kin, kout) = ((c * 25 / 100).max(1), c * 50 / 100);
        let (mut a1in, mut am) = (VecDeque::<u32>::new(), VecDeque::<(u32, bool)>::new());
        let mut a1out = VecDeque::<u32>::new();
        let mut misses = 0;
        for &x in blocks {
            if a1in.contains(&x) {
                continue;
            }
            if let Some(e) = am.iter_mut().find(|e| e.0 == x) {
                e.1 = true;
                continue;
            }
            misses += 1;
            if a1in.len() + am.len() == c {
                loop {
                    if a1in.len() > kin || am.is_empty() {
                        a1out.push_back(a1in.pop_front().unwrap());
                        if a1out.len() > kout {
                            a1out.pop_front();
                        }
                        break;
                    }
                    let (q, r) = am.pop_front().unwrap();
                    if !r {
                        break;
                    }
                    am.push_back((q, false));
                }
            }
            if let Some(i) = a1out.iter().position(|&q| q == x) {
                a1out.remove(i);
                am.push_back((x, false));
            } else {
                a1in.push_back(x);
            }
        }
        misses
    }

    #[test]
    fn two_q_replay_matches_the_papers_algorithm_with_a_clock_for_am() {
        matches_reference(ReplacementPolicy::TwoQ, two_q_reference, 17, [4, 16, 37]);
    }

    /// The cooling stage as `policy/cooling.rs` states it, on queues (front oldest): the
    /// reference `cooling` must match.
    fn cooling_reference(blocks: &[u32], c: usize) -> u64 {
        use std::collections::VecDeque;
        let target = (c * 10 / 100).max(1);
        let (mut cool, mut hot) = (VecDeque::<(u32, u64)>::new(), VecDeque::new());
        let mut misses = 0;
        for &x in blocks {
            if let Some(e) = cool.iter_mut().chain(hot.iter_mut()).find(|e| e.0 == x) {
                e.1 = (e.1 + 1).min(5);
                continue;
            }
            misses += 1;
            if cool.len() + hot.len() == c {
                loop {
                    if (cool.len() < target && !hot.is_empty()) || cool.is_empty() {
                        let (q, _) = hot.pop_front().unwrap();
                        cool.push_back((q, 0));
                        continue;
                    }
                    let (q, u) = cool.pop_front().unwrap();
                    if u == 0 {
                        break;
                    }
                    hot.push_back((q, u));
                }
            }
            cool.push_back((x, 0));
        }
        misses
    }

    #[test]
    fn cooling_replay_matches_its_stated_algorithm() {
        matches_reference(
            ReplacementPolicy::Cooling,
            cooling_reference,
            19,
            [4, 16, 37],
        );
    }

    #[test]
    fn a_ring_keeps_a_scan_from_wiping_the_hot_set() {
        // 64 frames: 40 hot pages, then a scan of 1,000 pages through the ring, then the hot
        // pages again: with the ring they all hit; without, the scan evicted them.
        let hot: Vec<u32> = (0..40).collect();
        let blocks: Vec<u32> = [hot.clone(), hot.clone(), (1000..2000).collect(), hot].concat();
        let mut t = trace(&blocks);
        let plain = replay(&t, ReplacementPolicy::Clock, 64);
        for r in &mut t[80..1080] {
            r.flags = RING;
        }
        let ringed = replay(&t, ReplacementPolicy::Clock, 64);
        assert_eq!(ringed.misses, 40 + 1000, "{ringed:?}");
        assert!(plain.misses >= 40 + 1000 + 30, "{plain:?}");
    }

    #[test]
    fn probes_count_only_when_they_find_their_page() {
        let mut t = trace(&[1, 2, 1, 3]);
        t[2].flags = PROBE;
        t[3].flags = PROBE;
        for c in [replay(&t, ReplacementPolicy::Clock, 4), optimal(&t, 4)] {
            assert_eq!((c.hits, c.misses, c.probes_missed), (1, 2, 1));
        }
        t[0].flags = HIT;
        let rec = recorded(&t, 4);
        assert_eq!((rec.hits, rec.misses, rec.probes_missed), (1, 1, 2));
    }
}
