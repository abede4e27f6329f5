//! The proc array: transaction ids, the set of running transactions, snapshots,
//! and MVCC visibility (PostgreSQL's varsup.c, procarray.c and heapam_visibility.c, reduced).
//!
//! Owns: the next transaction id and the active set (PostgreSQL's proc array); the commit
//! log answers for transactions that ended.
//! Invariants: ids are handed out in increasing order; an id is in the active set from
//! `begin` until `end`; the commit log records an outcome before the id leaves the active
//! set (so a snapshot taken later never sees it as running and undecided); an id below
//! `next_xid` that is neither running nor decided in the commit log belonged to a
//! transaction that a crash cut off, and counts as aborted.
//! Locks: `state` (short: assignment, snapshot copy, end), then the commit log's own.

use std::collections::BTreeSet;

use super::clog::{Clog, ClogError, XidStatus};
use super::{Xid, FIRST_NORMAL_XID, FROZEN_XID, INVALID_XID};
use crate::sync::{Condvar, Mutex};

/// What a transaction may see: everything committed before it started, nothing of the
/// transactions running then or started later (PostgreSQL's SnapshotData, reduced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Every id below this had ended when the snapshot was taken, or is in `running`.
    pub xmin: Xid,
    /// Ids at or above this had not started.
    pub xmax: Xid,
    /// Ids that were running (sorted).
    pub running: Vec<Xid>,
    /// The transaction that owns the snapshot (its own changes are visible to it).
    pub own: Xid,
}

impl Snapshot {
    /// Whether `xid` counts as still running for this snapshot.
    pub fn in_progress(&self, xid: Xid) -> bool {
        xid >= self.xmax || (xid >= self.xmin && self.running.binary_search(&xid).is_ok())
    }
}

#[derive(Debug)]
struct State {
    next_xid: Xid,
    active: BTreeSet<Xid>,
    /// For each running transaction, the oldest id that was running (or about to start)
    /// when it began: a lower bound of every snapshot xmin it takes.
    begin_xmin: std::collections::BTreeMap<Xid, Xid>,
    /// Wait-for edges of row-lock waits: waiter -> holder (each waits for one at a time).
    waiting: std::collections::HashMap<Xid, Xid>,
}

/// A row-lock wait that would never end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("deadlock: transaction {waiter} waits for {holder}, which waits (through {chain:?}) for {waiter}; abort {waiter} and retry")]
pub struct Deadlock {
    pub waiter: Xid,
    pub holder: Xid,
    pub chain: Vec<Xid>,
}

/// Transaction ids and their fate.
#[derive(Debug)]
pub struct TxnManager {
    clog: Clog,
    state: Mutex<State>,
    /// Notified whenever a transaction ends (row-lock waiters re-check).
    ended: Condvar,
}

impl TxnManager {
    /// A manager over `clog`, handing out ids from `next_xid` (at least FIRST_NORMAL_XID).
    pub fn new(clog: Clog, next_xid: Xid) -> Self {
        let next_xid = next_xid.max(FIRST_NORMAL_XID);
        TxnManager {
            clog,
            state: Mutex::new(State {
                next_xid,
                active: BTreeSet::new(),
                begin_xmin: std::collections::BTreeMap::new(),
                waiting: std::collections::HashMap::new(),
            }),
            ended: Condvar::new(),
        }
    }

    pub fn clog(&self) -> &Clog {
        &self.clog
    }

    /// The id the next transaction will get.
    pub fn next_xid(&self) -> Xid {
        self.state.lock().next_xid
    }

    /// Starts a transaction: a new id, registered as running.
    pub fn begin(&self) -> Result<Xid, ClogError> {
        let mut st = self.state.lock();
        let xid = st.next_xid;
        self.clog.extend(xid)?;
        st.next_xid = xid
            .checked_add(1)
            .expect("transaction ids exhausted (wraparound is not handled yet)");
        let xmin = st.active.iter().next().copied().unwrap_or(xid);
        st.begin_xmin.insert(xid, xmin);
        st.active.insert(xid);
        Ok(xid)
    }

    /// A snapshot for `own` (INVALID_XID for a read-only observer).
    pub fn snapshot(&self, own: Xid) -> Snapshot {
        let st = self.state.lock();
        let running: Vec<Xid> = st.active.iter().copied().filter(|&x| x != own).collect();
        Snapshot {
            xmin: running.first().copied().unwrap_or(st.next_xid),
            xmax: st.next_xid,
            running,
            own,
        }
    }

    /// Ends a transaction: records its outcome in the commit log, then removes it from the
    /// running set. (A committing caller makes its commit record durable first.)
    pub fn end(&self, xid: Xid, committed: bool) -> Result<(), ClogError> {
        let status = if committed {
            XidStatus::Committed
        } else {
            XidStatus::Aborted
        };
        self.clog.set(xid, status)?;
        {
            let mut st = self.state.lock();
            st.active.remove(&xid);
            st.begin_xmin.remove(&xid);
        }
        self.ended.notify_all();
        Ok(())
    }

    /// The pruning horizon: a version deleted by a transaction that committed below it is
    /// invisible to every snapshot a running transaction holds or will take. (Snapshots
    /// taken with `own = INVALID_XID` by observers outside any transaction are not
    /// registered: use them right away, not across a VACUUM.)
    pub fn oldest_xmin(&self) -> Xid {
        let st = self.state.lock();
        st.begin_xmin.values().copied().min().unwrap_or(st.next_xid)
    }

    /// Whether `xid` is running now.
    pub fn is_running(&self, xid: Xid) -> bool {
        self.state.lock().active.contains(&xid)
    }

    /// Blocks transaction `me` until `holder` is no longer running (a row lock it holds is
    /// released). Refuses with [`Deadlock`] when `holder` (through the transactions it
    /// waits for) waits for `me`: the check and the registration of this wait happen under
    /// one lock, so of the transactions forming a cycle exactly the last to arrive gets the
    /// error, and none waits forever.
    pub fn wait_for(&self, me: Xid, holder: Xid) -> Result<(), Deadlock> {
        let mut st = self.state.lock();
        let mut chain = Vec::new();
        let mut x = holder;
        while let Some(&next) = st.waiting.get(&x) {
            if next == me || chain.len() > st.active.len() {
                return Err(Deadlock {
                    waiter: me,
                    holder,
                    chain,
                });
            }
            chain.push(next);
            x = next;
        }
        if holder == me {
            return Ok(());
        }
        st.waiting.insert(me, holder);
        while st.active.contains(&holder) {
            st = self.ended.wait(st);
        }
        st.waiting.remove(&me);
        Ok(())
    }

    /// The fate of `xid` as of now: Committed, Aborted (explicitly, or cut off by a crash),
    /// or InProgress (running).
    pub fn status(&self, xid: Xid) -> Result<XidStatus, ClogError> {
        if xid == FROZEN_XID {
            return Ok(XidStatus::Committed);
        }
        if xid == INVALID_XID {
            return Ok(XidStatus::Aborted);
        }
        let s = self.clog.get(xid)?;
        if s != XidStatus::InProgress {
            return Ok(s);
        }
        let next_xid = {
            let st = self.state.lock();
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
        let s = self.clog.get(xid)?;
        if s != XidStatus::InProgress {
            return Ok(s);
        }
        Ok(if xid < next_xid {
            XidStatus::Aborted
        } else {
            XidStatus::InProgress
        })
    }

    /// Whether a tuple version created by `xmin` and deleted (or replaced) by `xmax`
    /// (INVALID_XID if never) is visible to `snap` (PostgreSQL's
    /// HeapTupleSatisfiesMVCC, without command ids: a transaction sees its own changes).
    pub fn visible(&self, snap: &Snapshot, xmin: Xid, xmax: Xid) -> Result<bool, ClogError> {
        let created = if xmin == snap.own {
            true
        } else if snap.in_progress(xmin) {
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
        let deleted = if xmax == snap.own {
            true
        } else if snap.in_progress(xmax) {
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

    fn manager() -> TxnManager {
        let clog = Clog::open(Arc::new(MemVfs::new()), Path::new("/db"), 4, 4096).unwrap();
        TxnManager::new(clog, FIRST_NORMAL_XID)
    }

    #[test]
    fn snapshot_rules_by_hand() {
        let m = manager();
        let a = m.begin().unwrap();
        let b = m.begin().unwrap();
        let sa = m.snapshot(a);
        assert!(sa.in_progress(b) && !sa.in_progress(a - 1));
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
        let clog = Clog::open(Arc::new(MemVfs::new()), Path::new("/db"), 4, 4096).unwrap();
        // As after a crash: ids below 10 were handed out, 7 never decided.
        let m = TxnManager::new(clog, 10);
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
}
