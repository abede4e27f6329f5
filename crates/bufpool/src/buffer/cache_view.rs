//! Buffer-cache views: what the pool holds, as PostgreSQL's pg_buffercache shows it, and
//! the evict and mark-dirty functions PostgreSQL 18 and 19 added to it for tests.
//!
//! Owns: [`BufferCacheRow`] (pg_buffercache's columns, one buffer), [`BufferCacheSummary`]
//! (pg_buffercache_summary), [`UsageCountRow`] (pg_buffercache_usage_counts),
//! [`PoolShape`] (the report's per-second heatmap sample), and the evict / mark-dirty
//! outcomes.
//!
//! Consistency: as in PostgreSQL, each row is consistent for its buffer (read under that
//! buffer's header lock, held for a few loads) and the view is not consistent across
//! buffers: the world does not stop, and a buffer read early may change before the last is
//! read. The summaries read each state word once without the lock (PostgreSQL's summary
//! functions do the same), so a buffer being retagged may count as used or unused. No view
//! takes a mapping lock or a content lock; pins and victim searches go on around them.
//!
//! Eviction (`evict_buffer`): pin the buffer if it holds a valid page, write it if dirty
//! (the one write path: WAL first, checksum, counted in pg_stat_io), then, under the tag's
//! mapping partition and the header lock, unmap it if ours is still the only pin and it is
//! still clean, and put it on the free list. A buffer pinned by someone else, or dirtied
//! again after the write, is left alone (not evicted), as in PostgreSQL.
//!
//! Mark dirty (`mark_dirty_buffer`): pin, take the content lock exclusively, set DIRTY
//! without changing a byte (so a torn write of it still holds the same bytes, and no WAL
//! record is needed), as PostgreSQL 19's pg_buffercache_mark_dirty.

use super::ring::RingKind;
use super::state::*;
use super::{BufferPool, BufferRef, BufferResult};
use crate::types::{BufferTag, RelFileId};

/// One buffer as pg_buffercache shows it. `tag` is `None` for an unused buffer (the
/// view's NULL columns). `buffer` is the pool's buffer id (0-based; PostgreSQL's
/// `bufferid` is this plus one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferCacheRow {
    /// The buffer id (0-based).
    pub buffer: u32,
    /// relfilenode, relforknumber, relblocknumber (and the tablespace).
    pub tag: Option<BufferTag>,
    /// Whether the page is dirty.
    pub isdirty: bool,
    /// The buffer's usage count.
    pub usagecount: u8,
    /// Pins on the buffer.
    pub pinning_backends: u32,
    /// The kind of ring that loaded the page, if one did (bufpool's addition: a ring
    /// holds buffer ids, not marks, so this is the loader, not a live membership).
    pub ring: Option<RingKind>,
}

/// pg_buffercache_summary's row.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BufferCacheSummary {
    /// Buffers holding a page.
    pub buffers_used: u64,
    /// Buffers holding none.
    pub buffers_unused: u64,
    /// Used buffers that are dirty.
    pub buffers_dirty: u64,
    /// Used buffers that are pinned.
    pub buffers_pinned: u64,
    /// Mean usage count over the used buffers (0 if none).
    pub usagecount_avg: f64,
}

/// One row of pg_buffercache_usage_counts: the buffers with one usage count (unused
/// buffers count under 0, as in PostgreSQL).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageCountRow {
    /// The usage count (unused buffers under 0).
    pub usage_count: u8,
    /// Buffers with this usage count.
    pub buffers: u64,
    /// Of those, the dirty ones.
    pub dirty: u64,
    /// Of those, the pinned ones.
    pub pinned: u64,
}

/// One sample of the pool for the report's heatmap: buffers by usage count (used buffers
/// only), unused, dirty, loaded through each kind of ring. One pass over the state words,
/// no locks, no allocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolShape {
    /// Used buffers by usage count (index: the usage count).
    pub by_usage: [u64; USAGE_COUNT_MAX as usize + 1],
    /// Buffers holding no page.
    pub unused: u64,
    /// Used buffers that are dirty.
    pub dirty: u64,
    /// Used buffers that are pinned.
    pub pinned: u64,
    /// Indexed like [`RingKind::ALL`].
    pub by_ring: [u64; 3],
}

/// pg_buffercache_evict's outcome for one buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvictOutcome {
    /// Whether the buffer was unmapped and put on the free list.
    pub buffer_evicted: bool,
    /// The page was dirty and this call wrote it.
    pub buffer_flushed: bool,
}

/// pg_buffercache_evict_relation's / _evict_all's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvictCounts {
    /// Buffers unmapped and put on the free list.
    pub buffers_evicted: u64,
    /// Dirty buffers this call wrote, evicted or not.
    pub buffers_flushed: u64,
    /// Buffers of the relation (or all used buffers) left in place: pinned or dirtied by
    /// someone else meanwhile.
    pub buffers_skipped: u64,
}

/// pg_buffercache_mark_dirty's outcome for one buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MarkDirtyOutcome {
    /// Whether this call marked the page dirty.
    pub buffer_dirtied: bool,
    /// Whether the page was dirty already (left as it was).
    pub buffer_already_dirty: bool,
}

/// pg_buffercache_mark_dirty_relation's / _all's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MarkDirtyCounts {
    /// Buffers this call marked dirty.
    pub buffers_dirtied: u64,
    /// Buffers that were dirty already.
    pub buffers_already_dirty: u64,
    /// Used buffers that could not be pinned (being loaded or evicted meanwhile).
    pub buffers_skipped: u64,
}

impl BufferPool {
    /// pg_buffercache: one row per buffer, each read under its header lock.
    pub fn buffercache(&self) -> Vec<BufferCacheRow> {
        let mut rows = Vec::with_capacity(self.nbuffers());
        self.buffercache_into(&mut rows);
        rows
    }

    /// [`BufferPool::buffercache`] into `rows` (cleared first), for callers that sample
    /// repeatedly and keep the vector.
    pub fn buffercache_into(&self, rows: &mut Vec<BufferCacheRow>) {
        rows.clear();
        for d in self.descs.iter() {
            let s = d.lock_header();
            let tag = d.tag();
            d.unlock_header(s);
            if s & RETIRED != 0 {
                // Past the pool's size (`resize.rs`): not a buffer of the pool now.
                continue;
            }
            let used = s & TAG_VALID != 0;
            rows.push(BufferCacheRow {
                buffer: d.id,
                tag: used.then_some(tag),
                isdirty: s & DIRTY != 0,
                usagecount: usage(s) as u8,
                pinning_backends: refcount(s) as u32,
                ring: if used { RingKind::from_state(s) } else { None },
            });
        }
    }

    /// pg_buffercache_summary (no locks: each state word read once).
    pub fn buffercache_summary(&self) -> BufferCacheSummary {
        let shape = self.pool_shape();
        let used: u64 = shape.by_usage.iter().sum();
        let usage_sum: u64 = (0u64..).zip(shape.by_usage).map(|(u, n)| u * n).sum();
        BufferCacheSummary {
            buffers_used: used,
            buffers_unused: shape.unused,
            buffers_dirty: shape.dirty,
            buffers_pinned: shape.pinned,
            usagecount_avg: if used == 0 {
                0.0
            } else {
                usage_sum as f64 / used as f64
            },
        }
    }

    /// pg_buffercache_usage_counts: one row per usage count 0..=5, unused buffers under 0.
    pub fn buffercache_usage_counts(&self) -> [UsageCountRow; USAGE_COUNT_MAX as usize + 1] {
        let mut rows = [UsageCountRow::default(); USAGE_COUNT_MAX as usize + 1];
        for (u, row) in rows.iter_mut().enumerate() {
            row.usage_count = u as u8;
        }
        for d in self.descs.iter() {
            let s = d.load_state();
            let u = if s & TAG_VALID != 0 {
                (usage(s) as usize).min(USAGE_COUNT_MAX as usize)
            } else {
                0
            };
            let row = &mut rows[u];
            row.buffers += 1;
            row.dirty += u64::from(s & DIRTY != 0);
            row.pinned += u64::from(refcount(s) > 0);
        }
        rows
    }

    /// One lock-free pass over the state words: the report's heatmap sample.
    pub fn pool_shape(&self) -> PoolShape {
        let mut shape = PoolShape::default();
        for d in self.descs.iter() {
            let s = d.load_state();
            if s & TAG_VALID == 0 {
                shape.unused += 1;
                continue;
            }
            shape.by_usage[(usage(s) as usize).min(USAGE_COUNT_MAX as usize)] += 1;
            shape.dirty += u64::from(s & DIRTY != 0);
            shape.pinned += u64::from(refcount(s) > 0);
            if let Some(kind) = RingKind::from_state(s) {
                shape.by_ring[kind as usize] += 1;
            }
        }
        shape
    }

    /// pg_buffercache_evict: writes the buffer's page if dirty and unmaps it, unless
    /// someone else pins it (or dirties it again) meanwhile. `buffer` is a buffer id; an id
    /// past the pool is an error.
    pub fn evict_buffer(&self, buffer: u32) -> BufferResult<EvictOutcome> {
        self.check_buffer_id(buffer)?;
        self.evict_if(buffer, |_| true)
            .map(|o| o.unwrap_or_default())
    }

    /// pg_buffercache_evict_relation: every buffer of `rel` (all forks).
    pub fn evict_relation(&self, rel: RelFileId) -> BufferResult<EvictCounts> {
        self.evict_matching(|t| t.rel == rel)
    }

    /// pg_buffercache_evict_all: every used buffer.
    pub fn evict_all(&self) -> BufferResult<EvictCounts> {
        self.evict_matching(|_| true)
    }

    /// pg_buffercache_mark_dirty: marks the buffer's page dirty without changing it.
    pub fn mark_dirty_buffer(&self, buffer: u32) -> BufferResult<MarkDirtyOutcome> {
        self.check_buffer_id(buffer)?;
        Ok(self.mark_dirty_if(buffer, |_| true).unwrap_or_default())
    }

    /// pg_buffercache_mark_dirty_relation: every buffer of `rel` (all forks).
    pub fn mark_dirty_relation(&self, rel: RelFileId) -> MarkDirtyCounts {
        self.mark_dirty_matching(|t| t.rel == rel)
    }

    /// pg_buffercache_mark_dirty_all: every used buffer.
    pub fn mark_dirty_all(&self) -> MarkDirtyCounts {
        self.mark_dirty_matching(|_| true)
    }

    fn check_buffer_id(&self, buffer: u32) -> BufferResult<()> {
        if (buffer as usize) < self.nbuffers() {
            Ok(())
        } else {
            Err(super::BufferError::NoSuchBuffer {
                buffer,
                nbuffers: self.nbuffers(),
            })
        }
    }

    fn evict_matching(
        &self,
        want: impl Fn(&BufferTag) -> bool + Copy,
    ) -> BufferResult<EvictCounts> {
        let mut counts = EvictCounts::default();
        for id in 0..self.descs.len() as u32 {
            if let Some(o) = self.evict_if(id, want)? {
                counts.buffers_evicted += u64::from(o.buffer_evicted);
                counts.buffers_flushed += u64::from(o.buffer_flushed);
                counts.buffers_skipped += u64::from(!o.buffer_evicted);
            }
        }
        Ok(counts)
    }

    /// Evicts buffer `id` if it holds a page `want` accepts; `None` if it holds none (or
    /// one being loaded, which cannot be pinned as a page yet).
    fn evict_if(
        &self,
        id: u32,
        want: impl Fn(&BufferTag) -> bool,
    ) -> BufferResult<Option<EvictOutcome>> {
        let Some(b) = self.pin_if(id, |t, s| s & VALID != 0 && want(t)) else {
            return Ok(None);
        };
        let tag = b.tag();
        let buffer_flushed = if b.pool.descs[id as usize].load_state() & DIRTY != 0 {
            b.flush()?
        } else {
            false
        };
        // The pin moves into the unmapping: on success the buffer leaves the pool with it.
        std::mem::forget(b);
        let buffer_evicted = self.unmap_pinned(id, &tag);
        Ok(Some(EvictOutcome {
            buffer_evicted,
            buffer_flushed,
        }))
    }

    /// Unmaps buffer `id`, which holds `tag` under our pin, if ours is the only pin and the
    /// page is clean; releases our pin either way. Returns whether it was unmapped.
    fn unmap_pinned(&self, id: u32, tag: &BufferTag) -> bool {
        // The state 0 drops our pin with everything else.
        if self.unmap_only_pin(id, tag, 0) {
            self.repl.push_free(id);
            true
        } else {
            self.descs[id as usize].unpin();
            false
        }
    }

    fn mark_dirty_matching(&self, want: impl Fn(&BufferTag) -> bool + Copy) -> MarkDirtyCounts {
        let mut counts = MarkDirtyCounts::default();
        for id in 0..self.descs.len() as u32 {
            let d = &self.descs[id as usize];
            let s = d.load_state();
            if s & TAG_VALID == 0 || !want(&d.tag()) {
                continue;
            }
            match self.mark_dirty_if(id, want) {
                Some(o) => {
                    counts.buffers_dirtied += u64::from(o.buffer_dirtied);
                    counts.buffers_already_dirty += u64::from(o.buffer_already_dirty);
                }
                None => counts.buffers_skipped += 1,
            }
        }
        counts
    }

    fn mark_dirty_if(
        &self,
        id: u32,
        want: impl Fn(&BufferTag) -> bool,
    ) -> Option<MarkDirtyOutcome> {
        let b: BufferRef<'_> = self.pin_if(id, |t, s| s & VALID != 0 && want(t))?;
        let mut g = b.write();
        if self.descs[id as usize].load_state() & DIRTY != 0 {
            return Some(MarkDirtyOutcome {
                buffer_dirtied: false,
                buffer_already_dirty: true,
            });
        }
        g.mark_dirty();
        Some(MarkDirtyOutcome {
            buffer_dirtied: true,
            buffer_already_dirty: false,
        })
    }
}

/// Per-relation rows (`bufpool buffercache --relations`): buffers, dirty and pinned
/// buffers and the mean usage count per relation and fork, from a [`BufferPool::buffercache`]
/// snapshot, largest first.
pub fn relations(rows: &[BufferCacheRow]) -> Vec<RelationRow> {
    let mut by: std::collections::BTreeMap<(RelFileId, crate::types::ForkNumber), RelationRow> =
        std::collections::BTreeMap::new();
    for r in rows {
        let Some(tag) = r.tag else { continue };
        let e = by.entry((tag.rel, tag.fork)).or_insert(RelationRow {
            rel: tag.rel,
            fork: tag.fork,
            ..RelationRow::default()
        });
        e.buffers += 1;
        e.dirty += u64::from(r.isdirty);
        e.pinned += u64::from(r.pinning_backends > 0);
        e.usage_sum += u64::from(r.usagecount);
    }
    let mut out: Vec<RelationRow> = by.into_values().collect();
    out.sort_by(|a, b| b.buffers.cmp(&a.buffers).then(a.rel.cmp(&b.rel)));
    out
}

/// One relation fork's buffers (see [`relations`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelationRow {
    /// The relation.
    pub rel: RelFileId,
    /// The fork.
    pub fork: crate::types::ForkNumber,
    /// Buffers holding a page of the fork.
    pub buffers: u64,
    /// Of those, the dirty ones.
    pub dirty: u64,
    /// Of those, the pinned ones.
    pub pinned: u64,
    /// Sum of the usage counts (mean = usage_sum / buffers).
    pub usage_sum: u64,
}
