//! Test hooks: named points where a test or the simulator runs code of its own, to force
//! an interleaving (a checkpoint between two steps of a commit) or to cut the power
//! exactly there (inside a checkpoint, a log segment switch, a control-file replacement,
//! an SLRU write round, a B-tree split, VACUUM's truncation).
//!
//! Owns: [`HookPoint`] (the points) and [`Probe`], what the modules below the engine (the
//! log, the SLRUs, the checkpointer) call at their points. The engine keeps the hooks
//! themselves (`Engine::set_test_hook`) and installs into each module a forwarder to
//! them; the engine's own points call them directly with the engine at hand.
//! A leaf module: it knows no other module, so the log and the SLRUs can fire points
//! without depending on the engine.
//! Invariants: a point that no hook is set for costs one atomic load (the engine's
//! `has_hooks`), or nothing at all where no forwarder is installed (a log or an SLRU
//! opened on its own); points sit off the hot paths (pin, unpin, lookup, the sweep).

use std::sync::{Arc, OnceLock};

/// Where a test hook runs. The `u64` argument a hook gets is given per point.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookPoint {
    /// In `Engine::log_hint`, after deciding whether an image is needed, before the LSN
    /// raise.
    HintBeforeLsn = 0,
    /// In `Engine::commit_transaction`, after the commit record is in the log (durable
    /// unless early lock release is in effect), before the commit log records the outcome.
    CommitBeforeStatus = 1,
    /// In `Engine::commit_transaction` with early lock release: after the transaction
    /// ended (outcome visible, row locks free), before its commit record is flushed.
    CommitBeforeFlush = 2,
    /// In a heap row walk (fetch, update, delete, row lock) that follows a link to another
    /// page: after the link's page lock is released, before the target page is read.
    /// Argument: the target's block.
    HeapHop = 3,
    /// In a heap row walk, under the lock of the page it is on (the argument), right after
    /// it read a link to another page and before it reads `Heap::roots_freed` for the hop.
    HeapLink = 4,
    /// In chain compression, before it locks a page (the argument) to free the chains the
    /// shortened link skips there.
    HeapFreeOrphans = 5,
    /// In VACUUM's truncation, after the buffers past the new end (the argument, in
    /// blocks) are dropped and before the file is cut.
    VacuumTruncate = 6,
    /// In a checkpoint, after its buffer writes and their syncs, before the SLRUs are
    /// written, the checkpoint record logged and the control file replaced. Argument: the
    /// checkpoint's redo point.
    CheckpointAfterWrites = 7,
    /// In the log, before a segment file is made (a released segment renamed, or a new one
    /// created and zero-filled). Argument: the segment's number.
    SegmentSwitch = 8,
    /// Before the control file is replaced (temporary file written and synced, renamed,
    /// directory synced). Argument: the new checkpoint record's position.
    ControlReplace = 9,
    /// In an SLRU, before a doublewrite round (copy written and synced, pages written in
    /// place and synced, round marked done). Argument: the round's first page number.
    SlruRound = 10,
    /// In a B-tree split of a page other than the root, after the record of the two halves
    /// is logged and before the downlink is inserted in the parent. Argument: the new
    /// right page's block.
    BtreeSplit = 11,
}

/// How many [`HookPoint`]s there are.
pub(crate) const HOOK_POINTS: usize = 12;

/// The forwarder a module below the engine calls at its points.
pub(crate) type Forward = Arc<dyn Fn(HookPoint, u64) + Send + Sync>;

/// A module's line to the engine's hooks: empty until the engine installs its forwarder
/// (once), so a module opened on its own fires into nothing.
#[derive(Default)]
pub(crate) struct Probe(OnceLock<Forward>);

impl Probe {
    /// Installs the forwarder (the first one wins).
    pub(crate) fn install(&self, forward: Forward) {
        let _ = self.0.set(forward);
    }

    /// Runs the hook set for `point`, if any.
    #[inline]
    pub(crate) fn fire(&self, point: HookPoint, arg: u64) {
        if let Some(f) = self.0.get() {
            f(point, arg);
        }
    }
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "Probe(installed)"
        } else {
            "Probe(empty)"
        })
    }
}
