//! Ghost lists: identities (tag hashes) of pages recently evicted, oldest first, for the
//! policies that remember what they evicted (S3-FIFO's G, ARC's B1 and B2, 2Q's A1out).
//!
//! Owns: [`Ghosts`], a FIFO of (hash, sequence) slots with a map from each hash to its
//! latest slot. Taking a hash (a re-admission) leaves its slot behind as a dead one, so a
//! list can age by insertions (S3-FIFO: the dead slot still counts until it would have
//! left) or by its live entries (ARC, 2Q: [`Ghosts::len`], [`Ghosts::pop_oldest_live`]).
//! Invariants: `live` maps each hash to the newest slot holding it; every live hash has a
//! slot. Locks: none; its policy's mutex guards it.

use std::collections::{HashMap, VecDeque};

#[derive(Debug)]
pub struct Ghosts {
    fifo: VecDeque<(u64, u64)>,
    /// Hash → sequence number of its latest slot in `fifo`.
    live: HashMap<u64, u64>,
    next: u64,
    /// Ages by live entries: dead slots may be dropped early.
    by_live: bool,
}

impl super::HeapBytes for Ghosts {
    /// The FIFO's slots and the map's table as allocated (capacity, not length): std's
    /// map keeps its buckets at most 7/8 full and holds a (key, value) pair and one control
    /// byte per bucket.
    fn heap_bytes(&self) -> usize {
        let buckets = (self.live.capacity() * 8).div_ceil(7);
        self.fifo.capacity() * std::mem::size_of::<(u64, u64)>()
            + buckets * (std::mem::size_of::<(u64, u64)>() + 1)
    }
}

impl Ghosts {
    /// A list that ages by insertions: a dead slot counts until it leaves (S3-FIFO).
    pub fn by_slots(cap: usize) -> Self {
        Self {
            fifo: VecDeque::with_capacity(cap),
            live: HashMap::with_capacity(cap),
            next: 0,
            by_live: false,
        }
    }

    /// A list bounded by its live entries (ARC, 2Q): dead slots are dropped when they
    /// pile up.
    pub fn by_live(cap: usize) -> Self {
        Self {
            by_live: true,
            ..Self::by_slots(cap)
        }
    }

    /// Live entries (hashes not taken and not aged out).
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Slots, dead ones included.
    pub fn slots(&self) -> usize {
        self.fifo.len()
    }

    /// Remembers `hash` as the newest entry.
    pub fn push(&mut self, hash: u64) {
        self.fifo.push_back((hash, self.next));
        self.live.insert(hash, self.next);
        self.next += 1;
    }

    /// Whether `hash` was remembered (it is forgotten now; its slot stays, dead).
    pub fn take(&mut self, hash: u64) -> bool {
        let found = self.live.remove(&hash).is_some();
        if found && self.by_live && self.fifo.len() > 2 * self.live.len() + 64 {
            let live = &self.live;
            self.fifo.retain(|(h, seq)| live.get(h) == Some(seq));
        }
        found
    }

    /// Drops the oldest slot, live or dead.
    pub fn pop_oldest_slot(&mut self) {
        if let Some((h, seq)) = self.fifo.pop_front() {
            if self.live.get(&h) == Some(&seq) {
                self.live.remove(&h);
            }
        }
    }

    /// Drops the oldest live entry (and the dead slots before it).
    pub fn pop_oldest_live(&mut self) {
        while let Some((h, seq)) = self.fifo.pop_front() {
            if self.live.get(&h) == Some(&seq) {
                self.live.remove(&h);
                return;
            }
        }
    }

    /// The bound every policy keeps: no more live entries than slots.
    pub fn check(&self, name: &str, cap: usize) -> Result<(), String> {
        if self.live.len() > self.fifo.len() || self.live.len() > cap {
            return Err(format!(
                "ghost list {name}: {} live in {} slots, over its {cap}",
                self.live.len(),
                self.fifo.len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ghosts_age_by_slots_or_by_live_entries() {
        let mut g = Ghosts::by_live(4);
        g.push(1);
        g.push(2);
        g.push(1); // 1 again: its newer slot is live
        assert_eq!((g.len(), g.slots()), (2, 3));
        g.pop_oldest_slot(); // the old slot of 1: dead already
        assert_eq!((g.len(), g.slots()), (2, 2));
        assert!(g.take(2));
        assert!(!g.take(2), "taken once");
        g.push(3);
        // By live entries: the dead slot of 2 goes with the oldest live entry, 1.
        g.pop_oldest_live();
        assert_eq!((g.len(), g.slots()), (1, 1));
        assert!(!g.take(1));
        assert!(g.take(3));
    }
}
