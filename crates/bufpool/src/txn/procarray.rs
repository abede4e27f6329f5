//! The proc array: transaction ids, the set of running transactions and their
//! subtransactions, snapshots, and MVCC visibility (PostgreSQL's varsup.c, procarray.c,
//! subtrans.c and heapam_visibility.c, reduced).
//!
//! Owns: the next transaction id and the active set (PostgreSQL's proc array); the commit
//! log answers for transactions that ended, the subtransaction log for the parents of
//! running subtransactions.
//!
//! **Subtransactions.** A savepoint's subtransaction gets its own id, newer than its
//! parent's, with the parent recorded in the subtransaction log before the id is handed
//! out. It is running from then until it is rolled back (`end_subs`: aborted at once, with
//! its descendants) or its top-level transaction ends (`end`: the whole tree commits or
//! aborts together). Each top-level transaction keeps up to [`MAX_CACHED_SUBXIDS`] of its
//! subtransaction ids in a cache that snapshots copy (PostgreSQL's PGPROC subxids); past
//! that it is marked overflowed, and a snapshot taken while any running transaction is
//! overflowed is `suboverflowed`: deciding whether an id in `[xmin, xmax)` was running then
//! needs its topmost parent from the subtransaction log (the subtransaction-overflow hot path).
//! The full set of running ids (`active`) stays exact regardless: row-lock waits use it.
//!
//! Invariants: ids are handed out in increasing order; an id is in the active set from
//! `begin`/`begin_sub` until `end`/`end_subs`; the commit log records an outcome before the
//! id leaves the active set (so a snapshot taken later never sees it as running and
//! undecided); an id below `next_xid` that is neither running nor decided in the commit
//! log belonged to a transaction that a crash cut off, and counts as aborted. A
//! subtransaction id's cache entry and tree entry leave with it; a rolled-back one is
//! never part of its tree's commit.
//! Locks: `state` (short: assignment, snapshot copy, end), then the commit log's or the
//! subtransaction log's own, or an observer shard's. An [`OwnTree`]'s lock is taken
//! alone. A read-only transaction's snapshot, while no transaction has ended since its
//! thread's last one, is that one again (`Observers::reuse`): its shard's lock only.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::clog::{Clog, ClogError, XidStatus};
use super::multixact::MultiXact;
use super::subtrans::Subtrans;
use super::{Xid, FIRST_NORMAL_XID, FROZEN_XID, INVALID_XID};
use crate::sync::{
    Arc, AtomicU32, AtomicU64, AtomicUsize, Condvar, Mutex, MutexGuard, Ordering, RwLock,
};

/// Subtransaction ids a transaction's snapshot entry holds before it overflows
/// (PostgreSQL's PGPROC_MAX_CACHED_SUBXIDS).
pub const MAX_CACHED_SUBXIDS: usize = 64;

/// The live (not rolled back) subtransaction ids of a running top-level transaction,
/// shared with its snapshots so that they see the owner's changes made in savepoints
/// begun after the snapshot was taken (PostgreSQL's TransactionIdIsCurrentTransactionId).
///
/// It also carries the top-level id once one is assigned: a transaction that takes its
/// snapshot before its first write (and so before it has an id; see
/// [`crate::engine::Transaction`]) still sees the rows it writes after that.
#[derive(Debug, Default)]
pub struct OwnTree {
    /// The top-level transaction's id, INVALID_XID until it is assigned.
    top: AtomicU32,
    /// `xids.len()`, read without the lock (most transactions have no savepoint).
    n: AtomicUsize,
    /// Ascending (ids are handed out in increasing order).
    xids: RwLock<Vec<Xid>>,
}

impl OwnTree {
    /// Whether `xid` is the tree's top-level id or one of its live subtransactions.
    fn contains(&self, xid: Xid) -> bool {
        xid == self.top.load(Ordering::Acquire)
            || (self.n.load(Ordering::Acquire) > 0 && self.xids.read().binary_search(&xid).is_ok())
    }

    fn push(&self, xid: Xid) {
        let mut v = self.xids.write();
        v.push(xid);
        self.n.store(v.len(), Ordering::Release);
    }

    fn remove(&self, gone: &[Xid]) {
        let mut v = self.xids.write();
        v.retain(|x| !gone.contains(x));
        self.n.store(v.len(), Ordering::Release);
    }

    fn list(&self) -> Vec<Xid> {
        self.xids.read().clone()
    }
}

/// What a transaction may see: everything committed before it started, nothing of the
/// transactions running then or started later (PostgreSQL's SnapshotData, reduced), and
/// its own changes (those of its live savepoints included).
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Every id below this had ended when the snapshot was taken, or is in `running`.
    pub xmin: Xid,
    /// Ids at or above this had not started.
    pub xmax: Xid,
    /// Top-level ids that were running (sorted).
    pub running: Vec<Xid>,
    /// Subtransaction ids of those, from their caches (sorted); complete only when
    /// `suboverflowed` is false.
    pub subxip: Vec<Xid>,
    /// Some running transaction had more subtransactions than its cache holds: an id in
    /// `[xmin, xmax)` is looked up in the subtransaction log (see the module doc).
    pub suboverflowed: bool,
    /// The top-level transaction that owns the snapshot (its own changes are visible to
    /// it), or INVALID_XID.
    pub own: Xid,
    own_tree: Option<Arc<OwnTree>>,
    /// An observer's snapshot (no running transaction of its own) registers its xmin here,
    /// so the pruning horizon stays at or below it until the last clone is dropped.
    _observer: Option<Arc<ObserverReg>>,
}

/// The registered xmin of an observer's snapshot; dropping the last clone of the snapshot
/// unregisters it from the shard it was registered in.
#[derive(Debug)]
struct ObserverReg {
    xmin: Xid,
    shard: Arc<ObserverShard>,
}

impl Drop for ObserverReg {
    fn drop(&mut self) {
        self.shard.unregister(self.xmin);
    }
}

/// Shards of the observers' registry at most: a thread registers in one of them
/// ([`Observers`]), so on up to this many threads no two share a lock or a line.
const MAX_OBSERVER_SHARDS: usize = 16;

/// One shard of [`Observers`]: the xmins registered in it, with how many snapshots share
/// each (a handful: each thread's snapshot or two), and the last observer's snapshot of
/// the shard's threads for the next one to reuse. Two cache lines of its own, so the
/// threads of other shards never touch them.
#[derive(Debug, Default)]
#[repr(align(128))]
struct ObserverShard(Mutex<ShardState>);

#[derive(Debug, Default)]
struct ShardState {
    regs: Vec<(Xid, usize)>,
    reusable: Option<Reusable>,
}

/// An observer's snapshot kept for reuse while no transaction ends (PostgreSQL 14's
/// snapshot reuse, by its completion count): a transaction that begins or writes later
/// has an id at or above `xmax`, which every snapshot counts as running, so only an
/// ending one makes it stale.
#[derive(Debug)]
struct Reusable {
    /// [`TxnManager::completions`] when it was taken.
    completions: u64,
    xmin: Xid,
    xmax: Xid,
    running: Vec<Xid>,
    subxip: Vec<Xid>,
    suboverflowed: bool,
}

impl ShardState {
    fn register(&mut self, xmin: Xid) {
        match self.regs.iter_mut().find(|e| e.0 == xmin) {
            Some(e) => e.1 += 1,
            None => self.regs.push((xmin, 1)),
        }
    }

    fn unregister(&mut self, xmin: Xid) {
        if let Some(k) = self.regs.iter().position(|e| e.0 == xmin) {
            self.regs[k].1 -= 1;
            if self.regs[k].1 == 0 {
                self.regs.swap_remove(k);
            }
        }
    }
}

impl ObserverShard {
    fn unregister(&self, xmin: Xid) {
        self.0.lock().unregister(xmin);
    }

    fn oldest(&self) -> Option<Xid> {
        self.0.lock().regs.iter().map(|e| e.0).min()
    }
}

/// The xmins of observers' snapshots alive (PostgreSQL keeps a backend's in its PGPROC),
/// sharded by thread: each read-only transaction registers its snapshot's xmin and
/// unregisters it when the snapshot goes, and with one shared map the two locks of every
/// read-only transaction bounced between the cores (11% of YCSB C's CPU with the snapshot
/// itself, 2026-12-07). A thread keeps to one shard, numbered in the order threads first
/// register (`THREAD_SHARD`), so up to [`MAX_OBSERVER_SHARDS`] threads register without
/// meeting; the horizon ([`TxnManager::oldest_xmin`]) reads every shard. The shard count
/// is the machine's parallelism rounded up to a power of two, capped: a pruning horizon
/// reads them all, a few times per TPC-C transaction.
#[derive(Debug)]
struct Observers {
    shards: Box<[Arc<ObserverShard>]>,
    /// Snapshots [`Observers::reuse`] handed out (for the tests).
    #[cfg(test)]
    reused: std::sync::atomic::AtomicUsize,
}

/// Shard numbers handed to threads as they first register an observer.
static NEXT_THREAD_SHARD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

std::thread_local! {
    /// The calling thread's shard number (taken modulo each registry's shard count).
    static THREAD_SHARD: usize =
        NEXT_THREAD_SHARD.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

impl Observers {
    fn new() -> Self {
        let n = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .next_power_of_two()
            .min(MAX_OBSERVER_SHARDS);
        Observers {
            shards: (0..n).map(|_| Arc::new(ObserverShard::default())).collect(),
            #[cfg(test)]
            reused: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The calling thread's shard.
    fn shard(&self) -> &Arc<ObserverShard> {
        &self.shards[THREAD_SHARD.with(|i| *i) % self.shards.len()]
    }

    /// Registers `xmin` in the calling thread's shard, and keeps `reusable` there for the
    /// shard's next observer; the returned registration unregisters it when dropped.
    fn register(&self, xmin: Xid, reusable: Option<Reusable>) -> ObserverReg {
        let shard = self.shard().clone();
        let mut g = shard.0.lock();
        g.register(xmin);
        if reusable.is_some() {
            g.reusable = reusable;
        }
        drop(g);
        ObserverReg { xmin, shard }
    }

    /// The calling thread's shard's reusable snapshot, registered, if no transaction has
    /// ended since it was taken ([`TxnManager::completions`]); `None` otherwise.
    ///
    /// Why a horizon cannot pass it: the count is read after the registration, in the
    /// shard's lock. A horizon that did not see the registration read this shard before
    /// that lock was taken; a transaction that ended before that horizon (and so could
    /// let it pass the snapshot's xmin) counted its end under `state` before the horizon
    /// took `state`, so the count read here shows it and the snapshot is not reused.
    fn reuse(&self, completions: &AtomicU64, tree: Option<&Arc<OwnTree>>) -> Option<Snapshot> {
        let shard = self.shard();
        let mut g = shard.0.lock();
        let r = g.reusable.as_ref()?;
        let (xmin, taken) = (r.xmin, r.completions);
        if completions.load(Ordering::Acquire) != taken {
            g.reusable = None;
            return None;
        }
        g.register(xmin);
        if completions.load(Ordering::Acquire) != taken {
            g.unregister(xmin);
            g.reusable = None;
            return None;
        }
        let r = g.reusable.as_ref().expect("checked above");
        let snap = Snapshot {
            xmin,
            xmax: r.xmax,
            running: r.running.clone(),
            subxip: r.subxip.clone(),
            suboverflowed: r.suboverflowed,
            own: INVALID_XID,
            own_tree: tree.cloned(),
            _observer: Some(Arc::new(ObserverReg {
                xmin,
                shard: shard.clone(),
            })),
        };
        #[cfg(test)]
        self.reused.fetch_add(1, Ordering::Relaxed);
        Some(snap)
    }

    /// The oldest xmin registered, if any.
    fn oldest(&self) -> Option<Xid> {
        self.shards.iter().filter_map(|s| s.oldest()).min()
    }
}

impl Snapshot {
    /// Whether `xid` is the owner's: its top-level id or one of its live subtransactions.
    pub fn is_own(&self, xid: Xid) -> bool {
        // A subtransaction is newer than its top: older ids need no look at the tree. A
        // snapshot taken before its transaction had an id (`own` INVALID_XID) finds the id
        // assigned later in the tree.
        xid == self.own
            || (xid > self.own
                && xid != INVALID_XID
                && self.own_tree.as_ref().is_some_and(|t| t.contains(xid)))
    }
}

/// A running top-level transaction.
#[derive(Debug)]
struct Top {
    /// The oldest id that was running (or about to start) when it began: a lower bound of
    /// every snapshot xmin it takes.
    begin_xmin: Xid,
    /// Up to MAX_CACHED_SUBXIDS of its running subtransaction ids (what snapshots copy).
    cached: Vec<Xid>,
    /// It had more subtransactions than `cached` holds (stays set until it ends).
    overflowed: bool,
    tree: Arc<OwnTree>,
}

#[derive(Debug)]
struct State {
    next_xid: Xid,
    /// Every running id, top-level and subtransaction.
    active: BTreeSet<Xid>,
    tops: BTreeMap<Xid, Top>,
    /// Running subtransaction -> its top-level transaction.
    top_of: HashMap<Xid, Xid>,
    /// Wait-for edges of row-lock waits: waiter's top-level id -> holder (each waits for
    /// one at a time).
    waiting: HashMap<Xid, Xid>,
    /// Running transactions whose cache overflowed (snapshots check for > 0).
    overflowed: usize,
}

impl State {
    fn top(&self, xid: Xid) -> Xid {
        self.top_of.get(&xid).copied().unwrap_or(xid)
    }
}

/// A row-lock wait that would never end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("deadlock: transaction {waiter} waits for {holder}, which waits (through {chain:?}) for {waiter}; abort {waiter} and retry")]
pub struct Deadlock {
    /// The transaction that asked to wait.
    pub waiter: Xid,
    /// The transaction holding the row lock it would wait for.
    pub holder: Xid,
    /// The transactions in between, in order: `holder` waits for the first, each for the next,
    /// the last for `waiter`'s tree (empty: `holder` waits for it directly).
    pub chain: Vec<Xid>,
}

/// Transaction ids and their fate.
#[derive(Debug)]
pub struct TxnManager {
    clog: Clog,
    subtrans: Subtrans,
    multis: MultiXact,
    state: Mutex<State>,
    /// Running subtransactions (`State::top_of`'s size), changed under `state`: while it
    /// is 0, ending a transaction needs no look at its tree (the TPC-B path). A
    /// transaction's subtransactions are begun before it ends, by its own thread or with a
    /// happens-before edge to its end, so the ender sees its own tree's increments.
    running_subs: AtomicUsize,
    /// Notified whenever a transaction ends (row-lock waiters re-check).
    ended: Condvar,
    /// Xmins of observers' snapshots alive (registered under `state`, which
    /// `oldest_xmin` holds while it reads them: state -> an observer shard; or registered
    /// without `state` by [`Observers::reuse`], which says why that is safe).
    observers: Observers,
    /// Top-level transactions ended and savepoints rolled back, counted under `state`
    /// (PostgreSQL 14's xactCompletionCount): an observer's snapshot taken at one count is
    /// still exact at the same count ([`Reusable`]). On lines of its own: every observer
    /// reads it, every commit writes it.
    completions: Padded,
}

/// An atomic counter alone on its cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded(AtomicU64);

impl TxnManager {
    /// The state, its lock's contended waits timed (PostgreSQL's ProcArrayLock).
    #[inline]
    fn st(&self) -> MutexGuard<'_, State> {
        crate::waits::lock_timed(
            crate::waits::Wait::ProcLock,
            || self.state.try_lock(),
            || self.state.lock(),
        )
    }

    /// A manager over `clog`, `subtrans` and `multis`, handing out ids from `next_xid` (at
    /// least FIRST_NORMAL_XID). `subtrans` must have been opened with the same `next_xid`.
    pub fn new(clog: Clog, subtrans: Subtrans, multis: MultiXact, next_xid: Xid) -> Self {
        let next_xid = next_xid.max(FIRST_NORMAL_XID);
        TxnManager {
            clog,
            subtrans,
            multis,
            state: Mutex::new(State {
                next_xid,
                active: BTreeSet::new(),
                tops: BTreeMap::new(),
                top_of: HashMap::new(),
                waiting: HashMap::new(),
                overflowed: 0,
            }),
            running_subs: AtomicUsize::new(0),
            ended: Condvar::new(),
            observers: Observers::new(),
            completions: Padded::default(),
        }
    }

    /// Installs the engine's test-hook forwarder in every SLRU (see `hooks.rs`).
    pub(crate) fn install_probe(&self, forward: crate::hooks::Forward) {
        self.clog.install_probe(forward.clone());
        self.subtrans.install_probe(forward.clone());
        self.multis.install_probe(forward);
    }

    /// The commit log.
    pub fn clog(&self) -> &Clog {
        &self.clog
    }

    /// The subtransaction log.
    pub fn subtrans(&self) -> &Subtrans {
        &self.subtrans
    }

    /// The multixact SLRUs.
    pub fn multis(&self) -> &MultiXact {
        &self.multis
    }

    /// The id the next transaction will get.
    pub fn next_xid(&self) -> Xid {
        self.st().next_xid
    }

    /// Takes the next id (its commit-log and subtransaction-log pages ready).
    fn assign(&self, st: &mut State) -> Result<Xid, ClogError> {
        let xid = st.next_xid;
        if !super::id_allowed(xid, "transaction") {
            return Err(ClogError::XidsExhausted {
                next: xid,
                margin: super::XID_STOP_MARGIN,
            });
        }
        self.clog.extend(xid)?;
        self.subtrans.extend(xid)?;
        st.next_xid = xid + 1;
        Ok(xid)
    }

    /// Starts a transaction: a new id, registered as running.
    pub fn begin(&self) -> Result<Xid, ClogError> {
        self.begin_with(Arc::new(OwnTree::default()))
    }

    /// Starts a transaction whose own tree is `tree` (a fresh one, or the one a transaction
    /// without an id shares with the snapshots it took before its first write): a new id,
    /// registered as running and recorded in the tree.
    pub fn begin_with(&self, tree: Arc<OwnTree>) -> Result<Xid, ClogError> {
        debug_assert_eq!(
            tree.top.load(Ordering::Relaxed),
            INVALID_XID,
            "a tree belongs to one transaction"
        );
        let mut st = self.st();
        let xid = self.assign(&mut st)?;
        tree.top.store(xid, Ordering::Release);
        let begin_xmin = st.active.iter().next().copied().unwrap_or(xid);
        st.tops.insert(
            xid,
            Top {
                begin_xmin,
                cached: Vec::new(),
                overflowed: false,
                tree,
            },
        );
        st.active.insert(xid);
        Ok(xid)
    }

    /// Starts a subtransaction of running `parent` (a top-level transaction or one of its
    /// subtransactions): a new id, its parent recorded in the subtransaction log, running
    /// until it is rolled back ([`TxnManager::end_subs`]) or its tree ends.
    pub fn begin_sub(&self, parent: Xid) -> Result<Xid, ClogError> {
        let mut st = self.st();
        if !st.active.contains(&parent) {
            return Err(ClogError::NotRunning { xid: parent });
        }
        let top = st.top(parent);
        // The parent goes to the log before the id is handed out: only the page just
        // zeroed (or resident, the newest) is written, so this waits for no I/O.
        let xid = self.assign(&mut st)?;
        // On failure the id is spent but never handed out: it counts as aborted (below
        // next_xid, never running, never decided).
        self.subtrans.set_parent(xid, parent)?;
        st.active.insert(xid);
        st.top_of.insert(xid, top);
        self.running_subs.fetch_add(1, Ordering::Release);
        let t = st
            .tops
            .get_mut(&top)
            .expect("a running subtransaction's top runs");
        if t.cached.len() < MAX_CACHED_SUBXIDS {
            t.cached.push(xid);
        } else if !t.overflowed {
            t.overflowed = true;
            st.overflowed += 1;
        }
        let tree = st.tops[&top].tree.clone();
        drop(st);
        tree.push(xid);
        Ok(xid)
    }

    /// The live subtransaction ids of top-level transaction `top` (ascending; empty if it
    /// has none or is not running): what its commit or abort record lists. Refuses a
    /// running subtransaction id (it ends by rollback, or with its tree).
    pub fn tree_of_top(&self, top: Xid) -> Result<Vec<Xid>, ClogError> {
        if self.running_subs.load(Ordering::Acquire) == 0 {
            return Ok(Vec::new());
        }
        let st = self.st();
        if st.top_of.contains_key(&top) {
            return Err(ClogError::NotTopLevel { xid: top });
        }
        Ok(st.tops.get(&top).map(|t| t.tree.list()).unwrap_or_default())
    }

    /// Checks that every id of `xids` is a running subtransaction, and all of one tree
    /// (what [`TxnManager::end_subs`] accepts).
    pub fn check_subs(&self, xids: &[Xid]) -> Result<(), ClogError> {
        let st = self.st();
        let top = xids.first().map(|x| st.top(*x));
        match xids
            .iter()
            .find(|x| !st.top_of.contains_key(x) || Some(st.top(**x)) != top)
        {
            Some(&xid) => Err(ClogError::NotRunning { xid }),
            None => Ok(()),
        }
    }

    /// The top-level transaction of running `xid` (`xid` itself if it is top-level or not
    /// running).
    pub fn top_of(&self, xid: Xid) -> Xid {
        self.st().top(xid)
    }

    /// Whether `a` and `b` belong to the same running transaction tree (a row one of them
    /// holds is the other's too: no waiting for it).
    pub fn same_tree(&self, a: Xid, b: Xid) -> bool {
        a == b || {
            let st = self.st();
            st.top(a) == st.top(b)
        }
    }

    /// A snapshot for the transaction tree of `own` (INVALID_XID for a read-only observer).
    pub fn snapshot(&self, own: Xid) -> Snapshot {
        self.snapshot_of(own, None)
    }

    /// A snapshot for a transaction that has no id yet (it has only read): an observer's
    /// (its xmin holds the pruning horizon back while it lives) that also sees the rows
    /// written under the id `tree` receives if the transaction writes later.
    pub fn snapshot_unassigned(&self, tree: &Arc<OwnTree>) -> Snapshot {
        self.snapshot_of(INVALID_XID, Some(tree))
    }

    fn snapshot_of(&self, own: Xid, unassigned: Option<&Arc<OwnTree>>) -> Snapshot {
        if own == INVALID_XID {
            if let Some(snap) = self.observers.reuse(&self.completions.0, unassigned) {
                return snap;
            }
        }
        let st = self.st();
        let own = st.top(own);
        let running: Vec<Xid> = st.tops.keys().copied().filter(|&x| x != own).collect();
        let suboverflowed =
            st.overflowed > 0 && st.tops.iter().any(|(&x, t)| t.overflowed && x != own);
        let mut subxip = Vec::new();
        if !suboverflowed {
            for (_, t) in st.tops.iter().filter(|(&x, _)| x != own) {
                subxip.extend_from_slice(&t.cached);
            }
            subxip.sort_unstable();
        }
        let xmin = running.first().copied().unwrap_or(st.next_xid);
        let registered = st.tops.get(&own).map(|t| t.tree.clone());
        let observing = registered.is_none();
        let own_tree = registered.or_else(|| unassigned.cloned());
        // An observer: nothing of its own holds the horizon back, so its xmin does,
        // registered before `state` is released (a horizon computed after this sees it; one
        // computed before is at most this xmin, since every transaction running then began
        // at or above it).
        // An observer's snapshot is kept for the thread's next one (`state` held: the
        // count is the one this copy is exact at).
        let observer = observing.then(|| {
            let reusable = (own == INVALID_XID).then(|| Reusable {
                completions: self.completions.0.load(Ordering::Relaxed),
                xmin,
                xmax: st.next_xid,
                running: running.clone(),
                subxip: subxip.clone(),
                suboverflowed,
            });
            Arc::new(self.observers.register(xmin, reusable))
        });
        Snapshot {
            xmin,
            xmax: st.next_xid,
            running,
            subxip,
            suboverflowed,
            own,
            own_tree,
            _observer: observer,
        }
    }

    /// Whether `xid` counts as running for `snap` (PostgreSQL's XidInMVCCSnapshot): from
    /// the snapshot's lists, or, when it overflowed, by looking the id's topmost parent up
    /// in the subtransaction log.
    pub fn xid_in_snapshot(&self, snap: &Snapshot, xid: Xid) -> Result<bool, ClogError> {
        if xid < snap.xmin {
            return Ok(false);
        }
        if xid >= snap.xmax {
            return Ok(true);
        }
        let xid = if snap.suboverflowed {
            let top = self.subtrans.topmost(xid, snap.xmin)?;
            if top < snap.xmin {
                return Ok(false);
            }
            top
        } else if snap.subxip.binary_search(&xid).is_ok() {
            return Ok(true);
        } else {
            xid
        };
        Ok(snap.running.binary_search(&xid).is_ok())
    }

    /// Ends a top-level transaction and its live subtransactions: records the outcome in
    /// the commit log (the tree's sub-committed, then committed states; see
    /// [`Clog::set_tree`]), then removes them from the running set. (A committing caller
    /// makes its commit record durable first.)
    pub fn end(&self, xid: Xid, committed: bool) -> Result<(), ClogError> {
        let status = if committed {
            XidStatus::Committed
        } else {
            XidStatus::Aborted
        };
        let tree = if self.running_subs.load(Ordering::Acquire) == 0 {
            None
        } else {
            let st = self.st();
            match st.tops.get(&xid) {
                None if st.top_of.contains_key(&xid) => {
                    return Err(ClogError::NotTopLevel { xid });
                }
                Some(t) => Some(t.tree.clone()),
                // Not running (redo-like callers, tests): only its own status is set.
                None => None,
            }
        };
        let subs = tree.map(|t| t.list()).unwrap_or_default();
        self.clog.set_tree(xid, &subs, status)?;
        {
            let mut st = self.st();
            st.active.remove(&xid);
            for s in &subs {
                st.active.remove(s);
                st.top_of.remove(s);
            }
            self.running_subs.fetch_sub(subs.len(), Ordering::Release);
            if let Some(t) = st.tops.remove(&xid) {
                if t.overflowed {
                    st.overflowed -= 1;
                }
            }
            self.completions.0.fetch_add(1, Ordering::Release);
        }
        self.ended.notify_all();
        Ok(())
    }

    /// Rolls back subtransactions `xids` (a savepoint's and those begun inside it): each
    /// is marked aborted in the commit log, then leaves the running set, its tree and its
    /// transaction's cache.
    pub fn end_subs(&self, xids: &[Xid]) -> Result<(), ClogError> {
        if xids.is_empty() {
            return Ok(());
        }
        self.check_subs(xids)?;
        let mut sorted = xids.to_vec();
        sorted.sort_unstable();
        self.clog
            .set_tree(sorted[0], &sorted[1..], XidStatus::Aborted)?;
        let tree = {
            let mut st = self.st();
            let top = st.top(sorted[0]);
            for x in &sorted {
                st.active.remove(x);
                st.top_of.remove(x);
            }
            self.running_subs.fetch_sub(sorted.len(), Ordering::Release);
            let t = st
                .tops
                .get_mut(&top)
                .expect("a running subtransaction's top runs");
            t.cached.retain(|x| sorted.binary_search(x).is_err());
            self.completions.0.fetch_add(1, Ordering::Release);
            t.tree.clone()
        };
        tree.remove(&sorted);
        self.ended.notify_all();
        Ok(())
    }

    /// The pruning horizon: a version deleted by a transaction that committed below it is
    /// invisible to every snapshot a running transaction holds or will take, and to every
    /// observer's snapshot (`own = INVALID_XID`) still alive, whose xmins are registered.
    pub fn oldest_xmin(&self) -> Xid {
        let st = self.st();
        let tops = st.tops.values().map(|t| t.begin_xmin).min();
        let observers = self.observers.oldest();
        tops.into_iter()
            .chain(observers)
            .min()
            .unwrap_or(st.next_xid)
    }

    /// Whether `xid` is running now.
    pub fn is_running(&self, xid: Xid) -> bool {
        self.st().active.contains(&xid)
    }

    /// The transaction that `xid`'s tree is waiting for in [`TxnManager::wait_for`], if
    /// any (for tests and monitoring: PostgreSQL's pg_locks `granted = false`).
    pub fn waiting_for(&self, xid: Xid) -> Option<Xid> {
        let st = self.st();
        st.waiting.get(&st.top(xid)).copied()
    }

    /// Blocks transaction `me` until `holder` is no longer running (a row lock it holds is
    /// released). Refuses with [`Deadlock`] when `holder` (through the transactions it
    /// waits for) waits for `me`: the check and the registration of this wait happen under
    /// one lock, so of the transactions forming a cycle exactly the last to arrive gets the
    /// error, and none waits forever. Waits are per transaction tree: a subtransaction
    /// waits for its whole tree, and never for its own tree (that returns at once).
    pub fn wait_for(&self, me: Xid, holder: Xid) -> Result<(), Deadlock> {
        let mut st = self.st();
        let my_top = st.top(me);
        if st.top(holder) == my_top {
            return Ok(());
        }
        let mut chain = Vec::new();
        let mut x = st.top(holder);
        while let Some(&next) = st.waiting.get(&x) {
            if st.top(next) == my_top || chain.len() > st.active.len() {
                return Err(Deadlock {
                    waiter: me,
                    holder,
                    chain,
                });
            }
            chain.push(next);
            x = st.top(next);
        }
        st.waiting.insert(my_top, holder);
        if st.active.contains(&holder) {
            st = crate::waits::timed(crate::waits::Wait::RowLock, move || {
                while st.active.contains(&holder) {
                    st = self.ended.wait(st);
                }
                st
            });
        }
        st.waiting.remove(&my_top);
        Ok(())
    }

    /// The fate of `xid` as of now: Committed, Aborted (explicitly, or cut off by a crash),
    /// or InProgress (running; a subtransaction of a tree that is committing right now
    /// counts as running until its tree's commit is complete).
    pub fn status(&self, xid: Xid) -> Result<XidStatus, ClogError> {
        if xid == FROZEN_XID {
            return Ok(XidStatus::Committed);
        }
        if xid == INVALID_XID {
            return Ok(XidStatus::Aborted);
        }
        let s = self.clog.get(xid)?;
        if matches!(s, XidStatus::Committed | XidStatus::Aborted) {
            return Ok(s);
        }
        let next_xid = {
            let st = self.st();
            if st.active.contains(&xid) {
                return Ok(XidStatus::InProgress);
            }
            st.next_xid
        };
        // Not running. Either it ended after the commit-log read above (`end` records the
        // outcome before leaving the running set, under the lock just taken, so a second
        // read sees it), or it never decided: its transaction died with a crash. Reading
        // once and then checking the running set would call a transaction that committed
        // in between aborted, and hand its row locks to others.
        match self.clog.get(xid)? {
            s @ (XidStatus::Committed | XidStatus::Aborted) => Ok(s),
            // Sub-committed and not running: its tree's commit never completed. The page
            // goes out only after the WAL behind it, so replay would have finished a
            // durable commit; this one was not (PostgreSQL treats it as aborted too).
            XidStatus::SubCommitted => Ok(XidStatus::Aborted),
            XidStatus::InProgress if xid < next_xid => Ok(XidStatus::Aborted),
            XidStatus::InProgress => Ok(XidStatus::InProgress),
        }
    }

    /// Whether a tuple version created by `xmin` and deleted (or replaced) by `xmax`
    /// (INVALID_XID if never) is visible to `snap` (PostgreSQL's
    /// HeapTupleSatisfiesMVCC, without command ids: a transaction sees its own changes,
    /// those of its live savepoints included).
    pub fn visible(&self, snap: &Snapshot, xmin: Xid, xmax: Xid) -> Result<bool, ClogError> {
        let created = if snap.is_own(xmin) {
            true
        } else if self.xid_in_snapshot(snap, xmin)? {
            false
        } else {
            self.status(xmin)? == XidStatus::Committed
        };
        if !created {
            return Ok(false);
        }
        if xmax == INVALID_XID {
            return Ok(true);
        }
        let deleted = if snap.is_own(xmax) {
            true
        } else if self.xid_in_snapshot(snap, xmax)? {
            false
        } else {
            self.status(xmax)? == XidStatus::Committed
        };
        Ok(!deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::Arc;
    use crate::vfs::MemVfs;
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;
    use std::path::Path;

    fn manager_at(next: Xid) -> TxnManager {
        let vfs = Arc::new(MemVfs::new());
        let clog = Clog::open(vfs.clone(), Path::new("/db"), 4, 4096).unwrap();
        let opts = crate::slru::SlruOptions {
            buffers: 4,
            design: crate::slru::SlruDesign::default(),
        };
        let sub = Subtrans::open(vfs.clone(), Path::new("/db"), 4096, opts, next).unwrap();
        let multis = crate::txn::MultiXact::open(
            vfs,
            Path::new("/db"),
            4096,
            opts,
            opts,
            Default::default(),
        )
        .unwrap();
        TxnManager::new(clog, sub, multis, next)
    }

    pub(super) fn manager() -> TxnManager {
        manager_at(FIRST_NORMAL_XID)
    }

    /// Proves (F8): the last transaction ids are refused with a named error, not a panic,
    /// leaving a margin (PostgreSQL's stop limit); the refusal changes nothing, so the
    /// running ones still end, and ids below the margin still work.
    #[test]
    fn ids_near_exhaustion_are_refused_with_an_error() {
        let last_ok = Xid::MAX - crate::txn::XID_STOP_MARGIN - 1;
        let m = manager_at(last_ok);
        let a = m.begin().unwrap();
        assert_eq!(a, last_ok);
        let err = m.begin().unwrap_err().to_string();
        assert!(
            err.contains("wraparound") && err.contains(&crate::txn::XID_STOP_MARGIN.to_string()),
            "{err}"
        );
        assert!(m.begin().is_err(), "still refused");
        m.end(a, true).unwrap();
    }

    /// Proves (S3): an observer's snapshot (taken outside any transaction) holds the
    /// pruning horizon back for as long as it, or a clone, lives; it held nothing back, so
    /// pruning and subtransaction-log truncation could remove what it still needed.
    #[test]
    fn an_observer_snapshot_holds_the_horizon_while_it_lives() {
        let m = manager();
        let t = m.begin().unwrap();
        let snap = m.snapshot(INVALID_XID);
        assert!(snap.xmin <= t);
        m.end(t, true).unwrap();
        assert!(
            m.oldest_xmin() <= t,
            "the observer may still need what {t} replaced: horizon {}",
            m.oldest_xmin()
        );
        let copy = snap.clone();
        drop(snap);
        assert!(m.oldest_xmin() <= t, "a clone keeps it");
        drop(copy);
        assert!(m.oldest_xmin() > t, "released with the last clone");
    }

    /// Proves: observers' snapshots taken on different threads (registered in different
    /// shards) each hold the horizon back; the oldest xmin decides, and an xmin registered
    /// twice leaves with the second, whichever thread drops it. How: six pairs of
    /// snapshots, each pair on a new thread while one transaction runs (so the pairs'
    /// xmins differ), the transactions then ended; dropped oldest first, the horizon rises
    /// to the next pair's xmin each time.
    fn reused(m: &TxnManager) -> usize {
        m.observers.reused.load(Ordering::Relaxed)
    }

    #[test]
    fn an_observer_reuses_its_snapshot_until_a_transaction_ends() {
        let m = manager();
        let w = m.begin().unwrap();
        let first = m.snapshot(INVALID_XID);
        let again = m.snapshot(INVALID_XID);
        assert_eq!(reused(&m), 1, "nothing ended: the same snapshot again");
        assert_eq!(
            (again.xmin, again.xmax, &again.running),
            (w, w + 1, &vec![w])
        );
        assert!(m.xid_in_snapshot(&again, w).unwrap());
        // A transaction that begins or starts a savepoint later has an id the snapshot
        // counts as running anyway.
        let w2 = m.begin().unwrap();
        let sub = m.begin_sub(w2).unwrap();
        let later = m.snapshot(INVALID_XID);
        assert_eq!(reused(&m), 2);
        assert!(m.xid_in_snapshot(&later, w2).unwrap() && m.xid_in_snapshot(&later, sub).unwrap());
        // An end makes it stale: the next observer sees the commit.
        m.end(w, true).unwrap();
        let after = m.snapshot(INVALID_XID);
        assert_eq!(reused(&m), 2, "taken afresh after a commit");
        assert!(!m.xid_in_snapshot(&after, w).unwrap(), "the commit is seen");
        assert_eq!(after.xmin, w2);
        // So does a savepoint's rollback.
        m.end_subs(&[sub]).unwrap();
        let rolled = m.snapshot(INVALID_XID);
        assert_eq!(reused(&m), 2, "taken afresh after a rollback");
        assert!(rolled.subxip.is_empty());
        drop((first, again, later, after, rolled));
        m.end(w2, true).unwrap();
    }

    #[test]
    fn a_reused_snapshot_holds_the_horizon() {
        let m = manager();
        let w = m.begin().unwrap();
        drop(m.snapshot(INVALID_XID));
        let held = m.snapshot(INVALID_XID);
        assert_eq!(reused(&m), 1);
        m.end(w, true).unwrap();
        assert_eq!(m.oldest_xmin(), w, "held by the reused snapshot");
        drop(held);
        assert!(m.oldest_xmin() > w, "released with it");
    }

    #[test]
    fn observers_on_many_threads_hold_the_horizon_until_each_goes() {
        let m = manager();
        let mut snaps = Vec::new();
        for _ in 0..6 {
            let t = m.begin().unwrap();
            // Two registrations of one xmin in the thread's shard.
            let (snap, twin) = std::thread::scope(|s| {
                s.spawn(|| (m.snapshot(INVALID_XID), m.snapshot(INVALID_XID)))
                    .join()
                    .expect("snapshot thread")
            });
            assert_eq!((snap.xmin, twin.xmin), (t, t));
            m.end(t, true).unwrap();
            snaps.push((snap, twin));
        }
        let xmins: Vec<Xid> = snaps.iter().map(|(s, _)| s.xmin).collect();
        for (i, (snap, twin)) in snaps.into_iter().enumerate() {
            assert_eq!(m.oldest_xmin(), xmins[i], "held by snapshot {i}");
            drop(snap.clone());
            drop(snap);
            assert_eq!(m.oldest_xmin(), xmins[i], "its twin still holds it");
            std::thread::scope(|s| {
                s.spawn(move || drop(twin));
            });
        }
        assert!(m.oldest_xmin() > xmins[5], "released with the last one");
    }

    #[test]
    fn snapshot_rules_by_hand() {
        let m = manager();
        let a = m.begin().unwrap();
        let b = m.begin().unwrap();
        let sa = m.snapshot(a);
        assert!(m.xid_in_snapshot(&sa, b).unwrap() && !m.xid_in_snapshot(&sa, a - 1).unwrap());
        assert!(m.visible(&sa, a, INVALID_XID).unwrap(), "own insert");
        assert!(
            !m.visible(&sa, b, INVALID_XID).unwrap(),
            "concurrent insert"
        );
        m.end(b, true).unwrap();
        assert!(
            !m.visible(&sa, b, INVALID_XID).unwrap(),
            "committed after the snapshot"
        );
        assert!(
            m.visible(&m.snapshot(a), b, INVALID_XID).unwrap(),
            "a new snapshot sees it"
        );
        assert!(!m.visible(&sa, FROZEN_XID, a).unwrap(), "own delete");
        let c = m.begin().unwrap();
        m.end(c, false).unwrap();
        assert!(
            !m.visible(&m.snapshot(INVALID_XID), c, INVALID_XID).unwrap(),
            "aborted insert"
        );
        assert!(
            m.visible(&m.snapshot(INVALID_XID), FROZEN_XID, c).unwrap(),
            "aborted delete"
        );
    }

    #[test]
    fn undecided_id_that_is_not_running_counts_as_aborted() {
        // As after a crash: ids below 10 were handed out, 7 never decided.
        let m = manager_at(10);
        m.clog().extend(0).unwrap();
        m.clog().set(6, XidStatus::Committed).unwrap();
        assert_eq!(m.status(6).unwrap(), XidStatus::Committed);
        assert_eq!(m.status(7).unwrap(), XidStatus::Aborted);
        assert!(!m.visible(&m.snapshot(INVALID_XID), 7, INVALID_XID).unwrap());
    }

    /// Visibility against a model: random interleavings of begin, insert, delete, commit,
    /// abort and snapshot; each snapshot must see exactly the versions whose creator
    /// committed before the snapshot and whose deleter had not (or its own changes).
    #[test]
    fn visibility_matches_a_model_of_random_transactions() {
        for seed in 0..200u64 {
            let m = manager();
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            // version id -> (xmin, xmax)
            let mut versions: HashMap<u32, (Xid, Xid)> = HashMap::new();
            // model: commit order; a snapshot sees xid's effects iff committed before it
            let mut committed_at: HashMap<Xid, u64> = HashMap::new();
            let mut aborted: BTreeSet<Xid> = BTreeSet::new();
            let mut running: Vec<Xid> = Vec::new();
            let mut clock = 0u64;
            let mut next_version = 0u32;
            // Snapshots kept for later checks: (snapshot, clock when taken).
            let mut kept: Vec<(Snapshot, u64)> = Vec::new();
            for _ in 0..300 {
                clock += 1;
                match rng.random_range(0..10) {
                    0 | 1 => running.push(m.begin().unwrap()),
                    2 | 3 if !running.is_empty() => {
                        let x = running[rng.random_range(0..running.len())];
                        versions.insert(next_version, (x, INVALID_XID));
                        next_version += 1;
                    }
                    4 if !running.is_empty() && !versions.is_empty() => {
                        let x = running[rng.random_range(0..running.len())];
                        let v = rng.random_range(0..next_version);
                        if let Some(e) = versions.get_mut(&v) {
                            if e.1 == INVALID_XID {
                                e.1 = x;
                            }
                        }
                    }
                    5 | 6 if !running.is_empty() => {
                        let i = rng.random_range(0..running.len());
                        let x = running.swap_remove(i);
                        let commit = rng.random_bool(0.7);
                        m.end(x, commit).unwrap();
                        if commit {
                            committed_at.insert(x, clock);
                        } else {
                            aborted.insert(x);
                        }
                    }
                    _ => {
                        let own = if running.is_empty() || rng.random_bool(0.3) {
                            INVALID_XID
                        } else {
                            running[rng.random_range(0..running.len())]
                        };
                        if kept.len() < 6 {
                            kept.push((m.snapshot(own), clock));
                        }
                        // Check a fresh snapshot and one taken earlier (whose owner, if any,
                        // is still running): commits after an old snapshot stay invisible.
                        let pick = rng.random_range(0..kept.len());
                        let checks = [(m.snapshot(own), clock), kept[pick].clone()];
                        for (snap, taken) in checks {
                            let own = snap.own;
                            if own != INVALID_XID && !running.contains(&own) {
                                continue;
                            }
                            let done_before = |x: Xid| {
                                x == own || committed_at.get(&x).is_some_and(|&t| t < taken)
                            };
                            for (&v, &(xmin, xmax)) in &versions {
                                let want = done_before(xmin)
                                    && !(xmax != INVALID_XID && done_before(xmax));
                                let got = m.visible(&snap, xmin, xmax).unwrap();
                                assert_eq!(
                                    got, want,
                                    "seed {seed}: version {v} ({xmin},{xmax}) for {own}"
                                );
                            }
                        }
                    }
                }
            }
            // Nothing aborted is ever visible to a fresh snapshot.
            let snap = m.snapshot(INVALID_XID);
            for &(xmin, xmax) in versions.values() {
                if aborted.contains(&xmin) {
                    assert!(!m.visible(&snap, xmin, xmax).unwrap());
                }
            }
        }
    }

    #[test]
    fn savepoints_by_hand() {
        let m = manager();
        let a = m.begin().unwrap();
        let s1 = m.begin_sub(a).unwrap();
        let s2 = m.begin_sub(s1).unwrap();
        assert_eq!((m.top_of(s2), m.subtrans().parent(s2).unwrap()), (a, s1));
        assert!(m.same_tree(s2, a) && m.is_running(s2));
        let b = m.begin().unwrap();
        let sb = m.snapshot(b);
        assert!(!sb.suboverflowed && sb.subxip == vec![s1, s2], "{sb:?}");
        assert!(m.xid_in_snapshot(&sb, s2).unwrap());
        // The owner sees its savepoints' rows, even those of a savepoint begun after the
        // snapshot; a rolled-back one's rows it does not.
        let sa = m.snapshot(s1);
        assert_eq!(sa.own, a);
        let s3 = m.begin_sub(s2).unwrap();
        assert!(m.visible(&sa, s3, INVALID_XID).unwrap());
        m.end_subs(&[s2, s3]).unwrap();
        assert!(!m.is_running(s2) && !m.visible(&sa, s3, INVALID_XID).unwrap());
        assert!(m.visible(&sa, s1, INVALID_XID).unwrap());
        assert_eq!(m.tree_of_top(a).unwrap(), vec![s1]);
        assert!(matches!(
            m.end(s1, true),
            Err(ClogError::NotTopLevel { .. })
        ));
        assert!(matches!(m.begin_sub(s2), Err(ClogError::NotRunning { .. })));
        m.end(a, true).unwrap();
        let now = m.snapshot(b);
        assert!(
            m.visible(&now, s1, INVALID_XID).unwrap(),
            "committed with its tree"
        );
        assert!(!m.visible(&now, s2, INVALID_XID).unwrap(), "rolled back");
        assert_eq!(m.status(s1).unwrap(), XidStatus::Committed);
        assert_eq!(m.status(s3).unwrap(), XidStatus::Aborted);
        assert!(!m.visible(&sb, s1, INVALID_XID).unwrap(), "old snapshot");
    }

    #[test]
    fn overflowed_snapshots_ask_the_subtransaction_log() {
        let m = manager();
        let a = m.begin().unwrap();
        let mut cur = a;
        let mut subs = Vec::new();
        for _ in 0..MAX_CACHED_SUBXIDS + 6 {
            cur = m.begin_sub(cur).unwrap();
            subs.push(cur);
        }
        let b = m.begin().unwrap();
        let before = m.subtrans().stats().hits;
        let sb = m.snapshot(b);
        assert!(sb.suboverflowed && sb.subxip.is_empty());
        for &s in &subs {
            assert!(m.xid_in_snapshot(&sb, s).unwrap(), "{s}");
            assert!(!m.visible(&sb, s, INVALID_XID).unwrap());
        }
        assert!(m.subtrans().stats().hits > before, "looked up");
        // The owner's own snapshot is not overflowed by its own cache.
        assert!(!m.snapshot(a).suboverflowed);
        m.end(a, true).unwrap();
        assert!(!m.snapshot(b).suboverflowed);
        let fresh = m.snapshot(b);
        assert!(subs
            .iter()
            .all(|&s| m.visible(&fresh, s, INVALID_XID).unwrap()));
        assert!(subs
            .iter()
            .all(|&s| !m.visible(&sb, s, INVALID_XID).unwrap()));
    }

    #[test]
    fn deadlock_between_trees_is_found_through_subtransactions() {
        let m = Arc::new(manager());
        let a = m.begin().unwrap();
        let sa = m.begin_sub(a).unwrap();
        let b = m.begin().unwrap();
        let sb = m.begin_sub(b).unwrap();
        assert!(m.wait_for(sa, a).is_ok(), "never waits for its own tree");
        let m2 = m.clone();
        let t = std::thread::spawn(move || m2.wait_for(sb, sa));
        while !m.state.lock().waiting.contains_key(&b) {
            std::thread::yield_now();
        }
        let err = m.wait_for(a, sb).unwrap_err();
        assert_eq!(err.waiter, a);
        m.end(a, false).unwrap();
        assert!(t.join().unwrap().is_ok());
    }

    /// Visibility against a model, with savepoints: random transactions that nest
    /// savepoints (in bursts that overflow the cache), release and roll them back, write
    /// versions from their current subtransaction, and commit or abort; every snapshot
    /// sees exactly the versions written by trees that committed before it (minus rolled
    /// back savepoints), plus its owner's live ones.
    #[test]
    fn visibility_with_savepoints_matches_a_model() {
        let mut overflowed_seeds = 0;
        for seed in 0..60u64 {
            let m = manager();
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            // Running transactions: stack of levels, each the xids it holds (level 0: top).
            let mut txs: Vec<Vec<Vec<Xid>>> = Vec::new();
            let mut versions: Vec<(Xid, Xid)> = Vec::new();
            let mut committed_at: HashMap<Xid, u64> = HashMap::new();
            let mut kept: Vec<(Snapshot, u64)> = Vec::new();
            let mut overflowed_seen = false;
            let mut clock = 0u64;
            for _ in 0..250 {
                clock += 1;
                let pick = |rng: &mut rand::rngs::SmallRng, n: usize| rng.random_range(0..n);
                match rng.random_range(0..13) {
                    0 | 1 => txs.push(vec![vec![m.begin().unwrap()]]),
                    2 | 3 if !txs.is_empty() => {
                        // A burst of nested savepoints, each writing a version.
                        let i = pick(&mut rng, txs.len());
                        for _ in 0..rng.random_range(1..40) {
                            let cur = txs[i].last().unwrap()[0];
                            let x = m.begin_sub(cur).unwrap();
                            txs[i].push(vec![x]);
                            versions.push((x, INVALID_XID));
                        }
                    }
                    4 if !txs.is_empty() => {
                        let i = pick(&mut rng, txs.len());
                        if txs[i].len() > 1 {
                            let l = txs[i].pop().unwrap();
                            if rng.random_bool(0.5) {
                                txs[i].last_mut().unwrap().extend(l);
                            } else {
                                m.end_subs(&l).unwrap();
                            }
                        }
                    }
                    5 | 6 if !txs.is_empty() => {
                        let i = pick(&mut rng, txs.len());
                        let cur = txs[i].last().unwrap()[0];
                        if rng.random_bool(0.6) || versions.is_empty() {
                            versions.push((cur, INVALID_XID));
                        } else {
                            let v = pick(&mut rng, versions.len());
                            if versions[v].1 == INVALID_XID {
                                versions[v].1 = cur;
                            }
                        }
                    }
                    7 if !txs.is_empty() => {
                        let i = pick(&mut rng, txs.len());
                        let t = txs.swap_remove(i);
                        let commit = rng.random_bool(0.7);
                        m.end(t[0][0], commit).unwrap();
                        if commit {
                            for x in t.iter().flatten() {
                                committed_at.insert(*x, clock);
                            }
                        }
                    }
                    _ => {
                        let own_tx = (!txs.is_empty() && rng.random_bool(0.7))
                            .then(|| pick(&mut rng, txs.len()));
                        let own = own_tx.map_or(INVALID_XID, |i| txs[i].last().unwrap()[0]);
                        let snap = m.snapshot(own);
                        overflowed_seen |= snap.suboverflowed;
                        if kept.len() < 6 {
                            kept.push((snap.clone(), clock));
                        }
                        let k = pick(&mut rng, kept.len());
                        for (snap, taken) in [(snap, clock), kept[k].clone()] {
                            let own_live: Vec<Xid> = if snap.own == INVALID_XID {
                                Vec::new()
                            } else {
                                match txs.iter().find(|t| t[0][0] == snap.own) {
                                    Some(t) => t.iter().flatten().copied().collect(),
                                    None => continue, // its owner ended
                                }
                            };
                            let seen = |x: Xid| {
                                own_live.contains(&x)
                                    || committed_at.get(&x).is_some_and(|&t| t < taken)
                            };
                            let step = versions.len() / 100 + 1;
                            let first = pick(&mut rng, step);
                            for &(xmin, xmax) in versions.iter().skip(first).step_by(step) {
                                let want = seen(xmin) && !(xmax != INVALID_XID && seen(xmax));
                                assert_eq!(
                                    m.visible(&snap, xmin, xmax).unwrap(),
                                    want,
                                    "seed {seed}: ({xmin},{xmax}) for {} overflowed {}",
                                    snap.own,
                                    snap.suboverflowed
                                );
                            }
                        }
                    }
                }
            }
            overflowed_seeds += usize::from(overflowed_seen);
        }
        assert!(
            overflowed_seeds >= 10,
            "only {overflowed_seeds} of 60 runs overflowed a snapshot"
        );
    }
}

/// A model test of observer snapshot reuse under shuttle: run with
/// `RUSTFLAGS="--cfg shuttle" cargo test -p pgbufpool --target-dir target/shuttle --lib
/// txn::procarray::model`.
#[cfg(all(test, shuttle))]
mod model {
    use super::*;

    /// Proves: a snapshot an observer reuses (registered without `state`) is never one a
    /// pruning horizon has passed. How: a writer begins and commits two transactions, a
    /// vacuum computes the horizon twice, an observer takes a snapshot (kept for reuse)
    /// and drops it, then takes two more (reused while no transaction ends) and keeps them; after
    /// every schedule, no snapshot counts as running a transaction that ended below any
    /// horizon computed (a prune at that horizon may have removed what it needs). Fails if
    /// the reuse reads the count before registering, or an end does not count.
    fn reuse_beside_a_horizon() {
        let m = Arc::new(super::tests::manager());
        let ended = Arc::new(Mutex::new(Vec::new()));
        let writer = {
            let (m, ended) = (m.clone(), ended.clone());
            shuttle::thread::spawn(move || {
                for _ in 0..2 {
                    let x = m.begin().unwrap();
                    m.end(x, true).unwrap();
                    ended.lock().push(x);
                }
            })
        };
        let vacuum = {
            let m = m.clone();
            shuttle::thread::spawn(move || (0..2).map(|_| m.oldest_xmin()).collect::<Vec<_>>())
        };
        let observer = {
            let m = m.clone();
            shuttle::thread::spawn(move || {
                // The first is kept for reuse and dropped: only the reused ones' own
                // registrations hold the horizon.
                drop(m.snapshot(INVALID_XID));
                (0..2).map(|_| m.snapshot(INVALID_XID)).collect::<Vec<_>>()
            })
        };
        writer.join().unwrap();
        let horizons = vacuum.join().unwrap();
        let snaps = observer.join().unwrap();
        for s in &snaps {
            for &h in &horizons {
                for &d in ended.lock().iter().filter(|&&d| d < h) {
                    assert!(
                        !m.xid_in_snapshot(s, d).unwrap(),
                        "snapshot (xmin {}) counts {d} as running below horizon {h}",
                        s.xmin
                    );
                }
            }
        }
    }

    /// Shuttle's runner with a roomy stack per modelled thread: opening the commit and
    /// subtransaction logs in a debug build overflows shuttle's default 60 KiB.
    fn runner(
        scheduler: impl shuttle::scheduler::Scheduler + 'static,
    ) -> shuttle::Runner<impl shuttle::scheduler::Scheduler> {
        let mut c = shuttle::Config::new();
        c.stack_size = 1 << 20;
        shuttle::Runner::new(scheduler, c)
    }

    #[test]
    fn observer_reuse_random() {
        runner(shuttle::scheduler::RandomScheduler::new(3000)).run(reuse_beside_a_horizon);
    }

    #[test]
    fn observer_reuse_pct() {
        runner(shuttle::scheduler::PctScheduler::new(3, 3000)).run(reuse_beside_a_horizon);
    }
}
