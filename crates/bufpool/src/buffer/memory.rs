//! What a buffer pool holds in memory, by part ([`PoolMemory`], from
//! [`BufferPool::memory`](super::BufferPool::memory)): the page frames, and the overhead
//! each buffer adds beside its frame.
//!
//! Owns: nothing but the figures. Every figure is an allocation's size (a capacity, not a
//! length), so memory reserved and not yet touched counts (the checkpoint's array, a ghost
//! list's slots): the budget a limit must allow for, not the resident size of the moment.
//! Not counted: per-thread and per-operation state (rings, read streams, a checkpoint's
//! sort runs, the I/O threads' buffers), which does not grow with the pool.

/// A pool's memory by part, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolMemory {
    /// Buffers in use (the descriptors, mapping and policy state are for
    /// `max_shared_buffers` of them).
    pub buffers: u64,
    /// The page frames as mapped (buffers × page size, rounded up to the mapping's
    /// granule: a huge page with explicit huge pages). With `max_shared_buffers` above
    /// the size in use, buffers × page size: the rest is reserved address space, never
    /// touched or given back (`buffer/resize.rs`).
    pub frames: u64,
    /// The buffer descriptors (one cache line each: state word, tag, policy word, links).
    pub descriptors: u64,
    /// The mapping table: bucket heads (two or more per buffer, a power of two) and the
    /// partition locks.
    pub mapping: u64,
    /// The free list's stack (an id per buffer).
    pub free_list: u64,
    /// The replacement policy's own state beyond the descriptors: its ghost lists
    /// (S3-FIFO, ARC, 2Q; none for the clock and SIEVE).
    pub policy: u64,
    /// The checkpoint's snapshot array (a tag and an id per buffer, reserved at start).
    pub checkpoint: u64,
    /// The bgwriter's per-buffer structures: the dirty map (a bit per buffer) and the
    /// victim queue, when its strategy keeps them.
    pub bgwriter: u64,
}

impl PoolMemory {
    /// Everything but the frames: what the pool adds beside `shared_buffers`.
    pub fn overhead(&self) -> u64 {
        self.descriptors
            + self.mapping
            + self.free_list
            + self.policy
            + self.checkpoint
            + self.bgwriter
    }

    /// The overhead per buffer, in bytes.
    pub fn overhead_per_buffer(&self) -> f64 {
        self.overhead() as f64 / self.buffers.max(1) as f64
    }

    /// Frames and overhead together.
    pub fn total(&self) -> u64 {
        self.frames + self.overhead()
    }
}
