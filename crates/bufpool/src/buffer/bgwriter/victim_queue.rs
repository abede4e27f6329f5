//! The victim queue (`bgwriter_strategy = victim-queue`): a bounded, lock-free
//! multi-producer multi-consumer queue of buffer ids that the bgwriter found clean with
//! usage 0, so an allocation pops a buffer instead of running the clock sweep.
//!
//! Owns: a ring of cells, each a sequence number and a buffer id (Dmitry Vyukov's bounded
//! MPMC queue, written over plain atomics: no unsafe code, nothing allocated after
//! creation). Invariants: cell `i` is writable by the producer that claimed position `p`
//! (`p % capacity == i`) when its sequence equals `p`, and readable by the consumer that
//! claimed `p` when it equals `p + 1`; after the read it becomes `p + capacity`. An id in
//! the queue is only a hint: the buffer may have been pinned, used or dirtied since it was
//! pushed, so the consumer re-checks it under its header lock (`BufferPool::take_victim`).
//! Locks: none.

use crate::sync::{AtomicU32, AtomicU64, Ordering};

#[derive(Debug)]
struct Cell {
    sequence: AtomicU64,
    id: AtomicU32,
}

#[repr(align(64))]
#[derive(Debug)]
struct Position(AtomicU64);

/// A bounded lock-free queue of buffer ids.
#[derive(Debug)]
pub struct VictimQueue {
    cells: Box<[Cell]>,
    mask: u64,
    head: Position,
    tail: Position,
}

impl VictimQueue {
    /// The queue's cells, in bytes.
    pub fn heap_bytes(&self) -> usize {
        self.cells.len() * std::mem::size_of::<Cell>()
    }

    /// A queue holding up to `capacity` ids, rounded up to a power of two.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(2).next_power_of_two();
        Self {
            cells: (0..capacity as u64)
                .map(|i| Cell {
                    sequence: AtomicU64::new(i),
                    id: AtomicU32::new(u32::MAX),
                })
                .collect(),
            mask: capacity as u64 - 1,
            head: Position(AtomicU64::new(0)),
            tail: Position(AtomicU64::new(0)),
        }
    }

    pub fn capacity(&self) -> usize {
        self.cells.len()
    }

    /// Ids in the queue (approximate while others push or pop).
    pub fn len(&self) -> usize {
        let tail = self.tail.0.load(Ordering::Acquire);
        let head = self.head.0.load(Ordering::Acquire);
        tail.saturating_sub(head) as usize
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `id`; false if the queue is full.
    pub fn push(&self, id: u32) -> bool {
        let mut pos = self.tail.0.load(Ordering::Relaxed);
        loop {
            let cell = &self.cells[(pos & self.mask) as usize];
            let seq = cell.sequence.load(Ordering::Acquire);
            if seq == pos {
                match self.tail.0.compare_exchange_weak(
                    pos,
                    pos + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        cell.id.store(id, Ordering::Relaxed);
                        // Publishes the id to the consumer that waits for pos + 1.
                        cell.sequence.store(pos + 1, Ordering::Release);
                        return true;
                    }
                    Err(now) => pos = now,
                }
            } else if seq < pos {
                // The cell still holds the id of the previous lap: full.
                return false;
            } else {
                pos = self.tail.0.load(Ordering::Relaxed);
            }
        }
    }

    /// Takes the oldest id; None if the queue is empty.
    pub fn pop(&self) -> Option<u32> {
        let mut pos = self.head.0.load(Ordering::Relaxed);
        loop {
            let cell = &self.cells[(pos & self.mask) as usize];
            let seq = cell.sequence.load(Ordering::Acquire);
            if seq == pos + 1 {
                match self.head.0.compare_exchange_weak(
                    pos,
                    pos + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        let id = cell.id.load(Ordering::Relaxed);
                        // Hands the cell to the producer of the next lap.
                        cell.sequence.store(pos + self.mask + 1, Ordering::Release);
                        return Some(id);
                    }
                    Err(now) => pos = now,
                }
            } else if seq < pos + 1 {
                return None;
            } else {
                pos = self.head.0.load(Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn fifo_bounded_and_reusable_across_laps() {
        let q = VictimQueue::new(3);
        assert_eq!(q.capacity(), 4);
        assert_eq!(q.pop(), None);
        for lap in 0..3 {
            for i in 0..4 {
                assert!(q.push(lap * 10 + i));
            }
            assert!(!q.push(99), "full");
            assert_eq!(q.len(), 4);
            for i in 0..4 {
                assert_eq!(q.pop(), Some(lap * 10 + i));
            }
            assert!(q.is_empty());
        }
    }

    #[test]
    fn every_id_pushed_is_popped_once_across_threads() {
        let q = Arc::new(VictimQueue::new(64));
        let producers: Vec<_> = (0..2u32)
            .map(|p| {
                let q = q.clone();
                std::thread::spawn(move || {
                    for i in 0..5000 {
                        while !q.push(p * 100_000 + i) {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let q = q.clone();
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    while got.len() < 5000 {
                        match q.pop() {
                            Some(id) => got.push(id),
                            None => std::thread::yield_now(),
                        }
                    }
                    got
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        let mut all: Vec<u32> = consumers
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect();
        all.sort_unstable();
        let mut want: Vec<u32> = (0..2u32)
            .flat_map(|p| (0..5000).map(move |i| p * 100_000 + i))
            .collect();
        want.sort_unstable();
        assert_eq!(all, want);
    }
}
