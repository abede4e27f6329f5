//! Mapping table: which buffer holds which `BufferTag`.
//!
//! Owns: an array of bucket heads (buffer ids) and the partition locks. Chains are linked
//! through each descriptor's `hash_next`, so the table never allocates after creation and
//! can never be full: a buffer is on at most one chain, the one of its own tag.
//! Invariants: a tag is on at most one chain entry; a buffer on a chain has TAG_VALID set
//! and its tag hashes to that chain's bucket. Bucket `b` belongs to partition
//! `b & (partitions - 1)`.
//! Locks: changing a chain takes its partition's lock exclusively. Readers may walk a chain
//! with no lock (`lookup_optimistic`): every field they read is atomic, the walk is bounded,
//! and the caller verifies a candidate by pinning it and re-checking its tag (a pinned
//! buffer cannot be retagged). A lock-free walk may miss an entry that is being moved; the
//! caller then falls back to `lookup_locked` under the shared partition lock.
//! Order: partition locks in ascending index when two are needed; then buffer headers.

use super::descriptor::{BufferDesc, NIL};
use crate::sync::{AtomicU32, Ordering, RwLock, RwLockReadGuard, RwLockWriteGuard};
use crate::types::BufferTag;
use crate::waits::Wait;

/// Bound on a lock-free chain walk; past it the caller takes the partition lock. With
/// buckets >= 2 x buffers, chains average below one entry; 64 is only reached when walking
/// into chains that are being rebuilt under us.
const OPTIMISTIC_WALK_MAX: usize = 64;

#[repr(align(64))]
#[derive(Debug)]
struct Partition(RwLock<()>);

#[derive(Debug)]
pub struct Mapping {
    buckets: Box<[AtomicU32]>,
    bucket_mask: u64,
    partitions: Box<[Partition]>,
    partition_mask: u64,
}

impl Mapping {
    /// The bucket heads and the partition locks, in bytes.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.buckets) + std::mem::size_of_val(&*self.partitions)
    }

    /// A table for `nbuffers` buffers with `partitions` (a power of two) lock partitions.
    pub fn new(nbuffers: usize, partitions: usize) -> Self {
        assert!(
            partitions.is_power_of_two(),
            "{partitions} mapping partitions is not a power of two"
        );
        // Buffer ids are u32 with NIL as the chain's end: no buffer may be numbered NIL.
        assert!(
            nbuffers < NIL as usize,
            "{nbuffers} buffers leave no id for the end of a chain"
        );
        let nbuckets = (2 * nbuffers).next_power_of_two().max(partitions);
        Self {
            buckets: (0..nbuckets).map(|_| AtomicU32::new(NIL)).collect(),
            bucket_mask: nbuckets as u64 - 1,
            partitions: (0..partitions)
                .map(|_| Partition(RwLock::new(())))
                .collect(),
            partition_mask: partitions as u64 - 1,
        }
    }

    #[inline]
    fn bucket(&self, hash: u64) -> usize {
        (hash & self.bucket_mask) as usize
    }

    /// The partition that guards `hash`'s bucket.
    #[inline]
    pub fn partition_of(&self, hash: u64) -> usize {
        (hash & self.bucket_mask & self.partition_mask) as usize
    }

    #[inline]
    pub fn lock_shared(&self, partition: usize) -> RwLockReadGuard<'_, ()> {
        let l = &self.partitions[partition].0;
        crate::waits::lock_timed(Wait::MappingLock, || l.try_read(), || l.read())
    }

    #[inline]
    pub fn lock_exclusive(&self, partition: usize) -> RwLockWriteGuard<'_, ()> {
        let l = &self.partitions[partition].0;
        crate::waits::lock_timed(Wait::MappingLock, || l.try_write(), || l.write())
    }

    /// A lock-free guess: the buffer that seemed to hold `tag`, or None (which may be a
    /// false miss). The caller must pin the candidate and re-check its tag.
    #[inline]
    pub fn lookup_optimistic(
        &self,
        descs: &[BufferDesc],
        tag: &BufferTag,
        hash: u64,
    ) -> Option<u32> {
        let mut id = self.buckets[self.bucket(hash)].load(Ordering::Acquire);
        for _ in 0..OPTIMISTIC_WALK_MAX {
            if id == NIL {
                return None;
            }
            let d = descs.get(id as usize)?;
            if d.tag_is(tag) {
                return Some(id);
            }
            id = d.hash_next.load(Ordering::Acquire);
        }
        None
    }

    /// The buffer holding `tag`; the caller holds `tag`'s partition lock (either mode).
    pub fn lookup_locked(&self, descs: &[BufferDesc], tag: &BufferTag, hash: u64) -> Option<u32> {
        let mut id = self.buckets[self.bucket(hash)].load(Ordering::Acquire);
        while id != NIL {
            let d = &descs[id as usize];
            if d.tag_is(tag) {
                // Under the partition lock a chained buffer is mapped (its retag or drop
                // finishes before the lock is released).
                debug_assert!(
                    d.load_state() & super::state::TAG_VALID != 0,
                    "buffer {id} is on the chain of {tag} without TAG_VALID: {d:?}"
                );
                return Some(id);
            }
            id = d.hash_next.load(Ordering::Acquire);
        }
        None
    }

    /// Links buffer `id` (already tagged) into its chain; the caller holds the partition
    /// lock exclusively and has checked the tag is absent.
    pub fn insert_locked(&self, descs: &[BufferDesc], id: u32, hash: u64) {
        #[cfg(debug_assertions)]
        {
            let tag = descs[id as usize].tag();
            debug_assert_eq!(
                self.bucket(tag.hash64()),
                self.bucket(hash),
                "buffer {id} ({tag}) linked into another tag's chain"
            );
            debug_assert!(
                self.lookup_locked(descs, &tag, hash).is_none(),
                "{tag} would be mapped twice (buffer {id} and {:?})",
                self.lookup_locked(descs, &tag, hash)
            );
        }
        let head = &self.buckets[self.bucket(hash)];
        descs[id as usize]
            .hash_next
            .store(head.load(Ordering::Relaxed), Ordering::Release);
        head.store(id, Ordering::Release);
    }

    /// Unlinks buffer `id` from the chain of `hash`; the caller holds the partition lock
    /// exclusively. Returns false if it was not there (a bug in the caller).
    pub fn remove_locked(&self, descs: &[BufferDesc], id: u32, hash: u64) -> bool {
        debug_assert_eq!(
            self.bucket(descs[id as usize].tag().hash64()),
            self.bucket(hash),
            "unlinking buffer {id} from a chain its tag does not hash to"
        );
        let head = &self.buckets[self.bucket(hash)];
        let next = descs[id as usize].hash_next.load(Ordering::Relaxed);
        if head.load(Ordering::Relaxed) == id {
            head.store(next, Ordering::Release);
            return true;
        }
        let mut prev = head.load(Ordering::Relaxed);
        while prev != NIL {
            let p = &descs[prev as usize];
            let n = p.hash_next.load(Ordering::Relaxed);
            if n == id {
                p.hash_next.store(next, Ordering::Release);
                return true;
            }
            prev = n;
        }
        false
    }

    /// Every (bucket, buffer) pair on the chains; for invariant checks only (not atomic
    /// with respect to concurrent changes).
    pub fn entries(&self, descs: &[BufferDesc]) -> Vec<(usize, u32)> {
        let mut out = Vec::new();
        for (b, head) in self.buckets.iter().enumerate() {
            let mut id = head.load(Ordering::Acquire);
            let mut steps = 0;
            while id != NIL && steps <= descs.len() {
                out.push((b, id));
                id = descs[id as usize].hash_next.load(Ordering::Acquire);
                steps += 1;
            }
        }
        out
    }

    pub fn bucket_of(&self, hash: u64) -> usize {
        self.bucket(hash)
    }
}
