//! The fsync request queue: which segment files have writes not yet made durable, and
//! which directories have entries (segments created or unlinked) not yet made durable.
//!
//! Owns: a deduplicated set of segment ids, a set of directories, and the latched first
//! fsync failure.
//! Invariants: a segment is in the set from the first write after its last successful fsync
//! until the next one succeeds; a directory is in its set from just after a segment file in
//! it was created or unlinked until the next fsync of it that starts after that. After a
//! failed fsync (of a file or a directory), every later `sync` reports that first failure
//! (the kernel may have dropped the dirty pages and marked them clean; a retry's success
//! would be a lie), until the directory is reopened and recovery replays the WAL.
//! Locks: each set's mutex, held only to insert, remove or drain; never during an fsync.

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;

use crate::sync::Mutex;
use crate::types::{ForkNumber, RelFileId};

/// One segment file of one fork of a relation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SegmentId {
    /// The relation.
    pub rel: RelFileId,
    /// The fork of the relation.
    pub fork: ForkNumber,
    /// The segment number (0: the first segment, whose file name has no number).
    pub segno: u32,
}

#[derive(Debug, Default)]
pub(super) struct SyncQueue {
    pending: Mutex<HashSet<SegmentId>>,
    dirs: Mutex<BTreeSet<PathBuf>>,
    latched: Mutex<Option<(PathBuf, String)>>,
}

impl SyncQueue {
    pub fn register(&self, seg: SegmentId) {
        self.pending.lock().insert(seg);
    }

    /// Drops requests for a relation fork being unlinked (segments from `from_segno` on).
    pub fn forget(&self, rel: RelFileId, fork: ForkNumber, from_segno: u32) {
        self.pending
            .lock()
            .retain(|s| !(s.rel == rel && s.fork == fork && s.segno >= from_segno));
    }

    /// Takes every pending request, in tag order (so fsyncs walk files in order).
    pub fn drain(&self) -> Vec<SegmentId> {
        let mut v: Vec<SegmentId> = self.pending.lock().drain().collect();
        v.sort_unstable();
        v
    }

    /// Puts requests back (the ones an interrupted sync did not reach).
    pub fn requeue(&self, segs: &[SegmentId]) {
        self.pending.lock().extend(segs.iter().copied());
    }

    /// Asks for an fsync of `dir` (called after creating or unlinking a file in it).
    pub fn register_dir(&self, dir: PathBuf) {
        self.dirs.lock().insert(dir);
    }

    /// Takes every directory waiting for an fsync.
    pub fn drain_dirs(&self) -> Vec<PathBuf> {
        std::mem::take(&mut *self.dirs.lock()).into_iter().collect()
    }

    pub fn pending_dirs_len(&self) -> usize {
        self.dirs.lock().len()
    }

    pub fn pending_len(&self) -> usize {
        self.pending.lock().len()
    }

    pub fn latch(&self, path: PathBuf, error: String) {
        let mut l = self.latched.lock();
        if l.is_none() {
            *l = Some((path, error));
        }
    }

    pub fn latched(&self) -> Option<(PathBuf, String)> {
        self.latched.lock().clone()
    }
}
