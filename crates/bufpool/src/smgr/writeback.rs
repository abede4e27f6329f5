//! Writeback context: collects the blocks a writer has just written, and every `limit`
//! blocks asks the OS to start writing them back (sync_file_range(SYNC_FILE_RANGE_WRITE)
//! through [`Smgr::writeback`]), sorted and with adjacent blocks merged into one range, so
//! that the later fsync finds little left to do and the kernel's dirty pages do not pile
//! up into a write storm (PostgreSQL's WritebackContext, `*_flush_after`).
//!
//! Owns: a bounded list of pending tags, allocated once at creation (the writer's hot
//! loop does not allocate). Invariants: `pending.len() < limit` between calls; a limit of
//! 0 disables the context (nothing is collected). Locks: none; one writer owns a context.

use super::{Smgr, SmgrResult};
use crate::stats::IoContext;
use crate::types::BufferTag;

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
