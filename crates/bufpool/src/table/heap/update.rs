//! Row changes: [`Heap::update`], [`Heap::delete`] and [`Heap::lock_row`], the row-lock
//! walk that finds the version to change or lock, placing a new version on another page,
//! and chain compression.
//!
//! **Explicit row locks** (`FOR SHARE`, `FOR UPDATE`) set xmax with `XMAX_LOCK_ONLY`.
//! Several holders at once (share lockers of different trees; a tree's lock beside its
//! savepoint's change) make xmax a multixact (`XMAX_IS_MULTI`). The walk reads the
//! holders, gives each a [`Fate`] and lets [`decide`] apply the conflict table: only two
//! share locks go together, the own tree never conflicts, an updater decides first.
//!
//! **Row locks**, the PostgreSQL way: the tuple's xmax. A second writer that finds xmax
//! set by a running transaction waits for it to end (no page lock held while waiting),
//! then: aborted → the row is free again; committed and UPDATED → follow ctid to the newer
//! version and re-apply the change there (READ COMMITTED, like PostgreSQL's EvalPlanQual:
//! the caller's closure recomputes from the newest data); committed delete → the row is
//! gone. An uncommitted insert of the row by another transaction is waited out the same
//! way; a rolled-back one means there is no row.
//!
//! **Where the new version goes.** On the same page when it fits, pruning the page first
//! if it does not (PostgreSQL's HOT update: the new version is `HEAP_ONLY`, reached from
//! the row's root through ctid). Otherwise on another page, where it is a root of its own
//! (pruning keeps it while the old page's chain leads there; chain compression, once the
//! versions are dead to all, points that link past it and frees it).
//!
//! Invariants: the walk checks that each version's xmin is its predecessor's xmax (a
//! mismatch is a deleted row's slot, freed by VACUUM and reused: no row); after a wait it
//! re-reads the very version it waited at (a resolved redirect is not followed again).
//! A version's xmax is set only under its page's write lock, after the walk found it free.
//! Chain compression only skips versions dead to every snapshot, and keeps the xmin check
//! valid across the shortened link.
//!
//! Locks, in order: the write lock of the page holding the version being examined, one
//! page at a time while walking (a wait for a row-lock holder happens with no lock held,
//! through `TxnManager::wait_for`, which fails with a deadlock error instead of closing a
//! cycle of waiters). A row moving to another page keeps its old page locked and takes the
//! target only with a try-lock (skipping busy pages), or a newly extended page (nobody else
//! can hold the lock of a page that did not exist a moment ago), so this cannot deadlock;
//! free-space-map pages come after heap pages. Pruning a full page happens under the lock
//! the walk already holds. Chain compression takes one page lock at a time, none held (the
//! page whose link it shortens, then each page whose chain the link now skips, to free
//! it). A walk that follows a link to another page holds no lock between the two pages:
//! if a root was freed meanwhile (`Heap::roots_freed`), it starts over from its first tid.

use super::page::{
    tuple_space, HeapPage, TupleHeader, HEAP_ONLY, ITEM_ID_SIZE, UPDATED, XMAX_COMMITTED,
    XMAX_EXCL_LOCK, XMAX_INVALID, XMAX_IS_MULTI, XMAX_LOCK_ONLY, XMIN_COMMITTED, XMIN_INVALID,
};
use super::prune::Orphan;
use super::{is_chain_root, resolve, Heap, Hints, Tid};
use crate::buffer::PageWriteGuard;
use crate::engine::HookPoint;
use crate::sync::Ordering;
use crate::table::HeapError;
use crate::txn::{ClogError, Member, MemberMode, Xid, XidStatus, FROZEN_XID, INVALID_XID};
use crate::types::ForkNumber;

/// A row lock's strength (PostgreSQL's `FOR SHARE` and `FOR UPDATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowLockMode {
    /// Other transactions may share-lock the row too; nobody else may change it.
    Share,
    /// Nobody else may lock or change the row.
    Exclusive,
}

/// What the row-lock walk is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Lock(RowLockMode),
    Update,
    Delete,
}

impl Want {
    fn mode(self) -> MemberMode {
        match self {
            Want::Lock(RowLockMode::Share) => MemberMode::Share,
            Want::Lock(RowLockMode::Exclusive) => MemberMode::Exclusive,
            Want::Update => MemberMode::Update,
            Want::Delete => MemberMode::Delete,
        }
    }
}

/// Whether a lock `held` by another transaction tree keeps `want` waiting: only two share
/// locks go together.
fn conflicts(held: MemberMode, want: Want) -> bool {
    !(held == MemberMode::Share && want == Want::Lock(RowLockMode::Share))
}

/// The holder of a plain (not multixact) xmax, with its mode.
fn plain_holder(h: &TupleHeader) -> Member {
    let m = h.infomask;
    let mode = if m & XMAX_LOCK_ONLY != 0 {
        if m & XMAX_EXCL_LOCK != 0 {
            MemberMode::Exclusive
        } else {
            MemberMode::Share
        }
    } else if m & UPDATED != 0 {
        MemberMode::Update
    } else {
        MemberMode::Delete
    };
    (h.xmax, mode)
}

/// Where a holder of the row stands, for a transaction that wants it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// The wanting transaction itself.
    Me,
    /// A running member of the wanting transaction's tree (its top-level part or another
    /// live savepoint).
    Tree,
    /// Running, in another tree.
    Running,
    Committed,
    Aborted,
}

/// What the holders of a version mean to `want` (the pure part of the row-lock walk).
/// `is_top` says whether a holder is the wanting transaction's top-level id (whose lock
/// outlives any savepoint).
fn decide(want: Want, holders: &[(Xid, MemberMode, Fate)], is_top: impl Fn(Xid) -> bool) -> Xmax {
    // The updater or deleter first: a committed one (or our own tree's) means the version
    // is not the newest; a running one elsewhere is waited for; an aborted one is gone.
    for &(x, mode, fate) in holders {
        if !mode.is_update() {
            continue;
        }
        match fate {
            Fate::Aborted => {}
            Fate::Running => return Xmax::Running(x),
            Fate::Me | Fate::Tree | Fate::Committed => {
                return if mode == MemberMode::Update {
                    Xmax::Replaced(x)
                } else {
                    Xmax::Deleted
                };
            }
        }
    }
    let mut keep = Vec::new();
    for &(x, mode, fate) in holders {
        if mode.is_update() {
            continue;
        }
        match fate {
            Fate::Committed | Fate::Aborted => {} // a lock ends with its transaction
            Fate::Running => {
                if conflicts(mode, want) {
                    return Xmax::Running(x);
                }
                keep.push((x, mode));
            }
            Fate::Me | Fate::Tree => {
                if let Want::Lock(_) = want {
                    // Held already, at least as strongly, by this transaction or by its
                    // top-level part (which holds it as long as this one could).
                    if mode >= want.mode() && (fate == Fate::Me || is_top(x)) {
                        return Xmax::Held;
                    }
                }
                if fate == Fate::Tree {
                    // Another part of the tree may be rolled back alone: its lock stays.
                    keep.push((x, mode));
                }
                // This transaction's own weaker lock is replaced by the new entry.
            }
        }
    }
    Xmax::Free(keep)
}

/// A stretch of a row's chain that `modify` walked through versions dead to all.
#[derive(Default)]
struct Span {
    /// The first dead version whose ctid leaves its page: its tid, xmax and target.
    start: Option<(Tid, Xid, Tid)>,
    /// The cross-page links of the stretch after `start`'s, in chain order: each one's
    /// xmax and target (the last one is where compression points `start`).
    next: Vec<(Xid, Tid)>,
    /// A version that is not dead to all came after `start`: stop extending.
    broken: bool,
    horizon: Option<Xid>,
}

/// What a version's xmax means to a transaction that wants to change or lock the row.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Xmax {
    /// Nobody holds the row against the wanting transaction; these lockers (running,
    /// compatible, or of its own tree) keep their locks beside its entry.
    Free(Vec<Member>),
    /// A lock request the transaction (or its top-level part) already holds.
    Held,
    /// Held by this running transaction: wait for it to end.
    Running(Xid),
    /// Replaced by a committed update (or by the writer itself), by this xid: follow ctid.
    Replaced(Xid),
    /// Deleted by a committed transaction (or by the writer itself): the row is gone.
    Deleted,
}

/// What one step of the row-lock walk found at the version it was pointed at.
enum Step {
    /// The row's newest version, free for the writer to change, and the lockers to keep.
    Newest(TupleHeader, Vec<Member>),
    /// The row's newest version, already locked as asked.
    Held,
    /// The version was replaced: the walk's tid now names its successor. `dead_data`: the
    /// successor is on another page and the replaced version still holds its data (this
    /// page has not been pruned since), a reason to prune the page on leaving it.
    Next { same_page: bool, dead_data: bool },
    /// Someone running holds the row or is inserting it: wait for them with no lock held,
    /// then look at the same version again.
    WaitFor(Xid),
    /// There is no row to change (deleted, never committed, or its slot was reused).
    NoRow,
}

impl Heap<'_> {
    /// Updates the row at `tid` for `xid`: `f` computes the new data from the newest
    /// committed version (re-run if a concurrent update wins first). Returns the new
    /// version's tid, or None if the row was deleted meanwhile. The row keeps its root
    /// tid: pass the root to later calls (a later version's tid is valid only while a
    /// snapshot may still see that version: once it is dead to all, chain compression may
    /// free its slot).
    pub fn update(
        &self,
        xid: Xid,
        tid: Tid,
        f: impl FnMut(&[u8]) -> Vec<u8>,
    ) -> Result<Option<Tid>, HeapError> {
        self.modify(xid, tid, Want::Update, Some(f))
    }

    /// Deletes the row at `tid` for `xid`. Returns false if it was already deleted.
    pub fn delete(&self, xid: Xid, tid: Tid) -> Result<bool, HeapError> {
        Ok(self
            .modify(xid, tid, Want::Delete, None::<fn(&[u8]) -> Vec<u8>>)?
            .is_some())
    }

    /// Locks the row at `tid` for `xid` in `mode` (PostgreSQL's `SELECT ... FOR SHARE` /
    /// `FOR UPDATE`) until `xid` ends: waits for whoever holds it against that mode (a
    /// writer, or any locker for an exclusive lock), follows committed updates to the
    /// newest version, and locks that. Returns the locked version's tid, or None if the
    /// row was deleted. A share lock beside other running lockers, or a lock kept beside a
    /// savepoint's change, makes the row's xmax a multixact.
    pub fn lock_row(
        &self,
        xid: Xid,
        tid: Tid,
        mode: RowLockMode,
    ) -> Result<Option<Tid>, HeapError> {
        self.modify(xid, tid, Want::Lock(mode), None::<fn(&[u8]) -> Vec<u8>>)
    }

    /// [`Heap::lock_row`] without waiting (PostgreSQL's `FOR UPDATE NOWAIT`): if someone
    /// holds the row against `mode` (or is inserting it), fails with
    /// [`HeapError::WouldBlock`] naming them, having changed nothing.
    pub fn try_lock_row(
        &self,
        xid: Xid,
        tid: Tid,
        mode: RowLockMode,
    ) -> Result<Option<Tid>, HeapError> {
        let mut span = Span::default();
        self.modify_walk(
            xid,
            tid,
            Want::Lock(mode),
            true,
            None::<fn(&[u8]) -> Vec<u8>>,
            &mut span,
        )
    }

    fn modify(
        &self,
        xid: Xid,
        tid: Tid,
        want: Want,
        f: Option<impl FnMut(&[u8]) -> Vec<u8>>,
    ) -> Result<Option<Tid>, HeapError> {
        let mut span = Span::default();
        let r = self.modify_walk(xid, tid, want, false, f, &mut span)?;
        if r.is_some() {
            match want {
                Want::Update => self.counters.count_update(),
                Want::Delete => self.counters.count_delete(),
                Want::Lock(_) => {}
            }
            self.compress(&span)?;
        }
        Ok(r)
    }

    /// Shortens a row's chain after `modify` walked it across several pages through
    /// versions dead to everyone: the first such cross-page link is pointed straight at
    /// the last one's target, so the next walk from the row's root skips the dead middle
    /// (a hot row that moved page after page under contention otherwise costs one page
    /// visit per move, forever). Safe because no snapshot can see the skipped versions,
    /// and the link keeps the xmin check: its xmax becomes the last link's, which is the
    /// target's xmin. Then the skipped chains, which no link reaches now, are freed, root
    /// and all (`free_orphans`): each move of a hot row left a root, a redirect and a
    /// stub behind on the page it left, forever, and under asynchronous commit those
    /// filled the hot tables' pages until nearly every update moved (pgbench_branches grew
    /// to 156 pages of 10 rows in 40 s, issue 14). Takes one page lock at a time, none
    /// held.
    fn compress(&self, span: &Span) -> Result<(), HeapError> {
        let (Some((src, x1, t1)), Some(&(xn, tn))) = (span.start, span.next.last()) else {
            return Ok(());
        };
        let buf = self.engine.pool().read(self.tag(src.block))?;
        let mut g = buf.write();
        let Some((mut h, _)) = HeapPage(&g).tuple(src.slot) else {
            return Ok(());
        };
        let unchanged = h.xmax == x1
            && h.infomask & UPDATED != 0
            && h.infomask & XMAX_INVALID == 0
            && h.ctid_block == t1.block
            && h.ctid_slot == t1.slot;
        if !unchanged {
            return Ok(());
        }
        h.xmax = xn;
        h.ctid_block = tn.block;
        h.ctid_slot = tn.slot;
        h.infomask |= XMAX_COMMITTED;
        self.change_logged(FROZEN_XID, &mut g, |p| p.set_header(src.slot, &h))?;
        drop(g);
        // The chains the link now skips, run by run of one page: link i led to chain i,
        // which leaves its page by link i + 1. Pruning those pages frees them in chain
        // order, a page visited again if the chain comes back to it: a chain is freed
        // only once no link leads to it any more but the ones already freed. A walk
        // already inside the skipped chains is protected by `roots_freed`, read when it
        // takes each page's lock and carried to the next page: any free while it is on a
        // page, or on its way to the next, makes it start over there (see `modify_walk`).
        // The order is a second line: freed out of order (by block number, or a page's
        // chains all with the first of them), chain i + 1 could go while a walk holds
        // chain i's page, and a walk that read the count when it left, not when it
        // arrived, met the freed slot and reported the row gone (the vanished row of
        // `tests/heap.rs::a_walk_inside_compressed_chains_never_meets_a_freed_slot` and
        // `..._a_chain_that_returns_to_a_page_never_meets_a_freed_slot`).
        let links = std::iter::once((x1, t1)).chain(span.next.iter().copied());
        let mut pages: Vec<(u32, Vec<Orphan>)> = Vec::new();
        for ((xmin, at), (out_xmax, out)) in links.clone().zip(links.skip(1)) {
            let orphan = Orphan {
                root: at.slot,
                xmin,
                out_xmax,
                out: (out.block, out.slot),
            };
            // Only a run of chains on one page goes together: a chain that comes back to
            // a page after another page is freed in its turn, not with the page's first.
            match pages.last_mut() {
                Some((block, here)) if *block == at.block => here.push(orphan),
                _ => pages.push((at.block, vec![orphan])),
            }
        }
        for (block, here) in pages {
            self.engine
                .run_hook_at(HookPoint::HeapFreeOrphans, u64::from(block));
            self.free_orphans(block, &here)?;
        }
        Ok(())
    }

    /// The row-lock walk (see the module doc): from `tid`, finds the row's newest version,
    /// waiting out whoever holds it, then has `f` compute the new data from it (None
    /// deletes) and writes the change, all under that version's page lock. Returns the
    /// new version's tid (the version's own for a delete), or None if there is no row.
    /// Dead stretches of the chain it passes are recorded in `span`.
    fn modify_walk(
        &self,
        xid: Xid,
        mut tid: Tid,
        want: Want,
        nowait: bool,
        mut f: Option<impl FnMut(&[u8]) -> Vec<u8>>,
        span: &mut Span,
    ) -> Result<Option<Tid>, HeapError> {
        let origin = tid;
        let mut prev_xmax = INVALID_XID;
        // When the walk follows a link to another page: the count of freed roots, read
        // when the walk took the lock of the page the link is on (see `Heap::roots_freed`):
        // read when it arrived, not when it leaves, so a chain freed while the walk was on
        // that page (one it is about to enter among them) is noticed at the next page.
        let mut hop: Option<u64> = None;
        // What the commit log tells the walk is set as hint bits on the page the change is
        // made to (its record then covers them at no extra cost). Hints about pages the
        // walk only passes through are dropped: setting them would dirty (and, first
        // after a checkpoint, image) a page that is otherwise only read, to save one
        // lookup on a page that a row's later walks visit again only if it is hot.
        let mut hints = Hints::new();
        'page: loop {
            if hop.is_some() {
                self.engine
                    .run_hook_at(HookPoint::HeapHop, u64::from(tid.block));
            }
            let Some(buf) = self.read_walk_page(tid.block, tid == origin)? else {
                return Ok(None);
            };
            let mut g = buf.write();
            // A root freed since the link here was read: its slot may hold another row now
            // (a redirect there would even pass the xmin check). Walk again from the start.
            let here = self.roots_freed();
            if hop.take().is_some_and(|seen| seen != here) {
                (tid, prev_xmax) = (origin, INVALID_XID);
                *span = Span::default();
                hints.clear();
                continue 'page;
            }
            // Find the row's newest version, following same-page links under this lock
            // (pruning cannot cut the chain meanwhile); a link to another page, or a wait,
            // starts over there.
            let (h, keep) = loop {
                let step = self.chain_step(
                    xid,
                    want,
                    &mut tid,
                    &mut prev_xmax,
                    HeapPage(&g),
                    span,
                    &mut hints,
                )?;
                match step {
                    Step::Newest(h, keep) => break (h, keep),
                    Step::Held => {
                        self.set_hints_locked(&mut g, &mut hints)?;
                        return Ok(Some(tid));
                    }
                    Step::Next {
                        same_page: true, ..
                    } => {}
                    Step::Next {
                        same_page: false,
                        dead_data,
                    } => {
                        hints.clear();
                        if dead_data {
                            self.prune_if_full(&mut g)?;
                        }
                        self.engine
                            .run_hook_at(HookPoint::HeapLink, u64::from(g.tag().block));
                        hop = Some(here);
                        continue 'page;
                    }
                    Step::WaitFor(other) if nowait => {
                        return Err(HeapError::WouldBlock { holder: other });
                    }
                    Step::WaitFor(other) => {
                        hints.clear();
                        drop(g);
                        drop(buf);
                        self.engine.txns().wait_for(xid, other)?;
                        continue 'page;
                    }
                    Step::NoRow => return Ok(None),
                }
            };
            // Made safe to write by themselves (an image only if this is the page's first
            // change since the checkpoint, which the change below would log anyway; else
            // at most an LSN raise), so a failure before the change is logged leaves no
            // unprotected hint behind.
            self.set_hints_locked(&mut g, &mut hints)?;
            let data = HeapPage(&g).tuple(tid.slot).expect("resolved above").1;
            let new_data = f.as_mut().map(|f| f(data));
            return self
                .write_change(xid, tid, h, g, want, keep, new_data)
                .map(Some);
        }
    }

    /// One step of the row-lock walk, under the write lock of the page `page` shows: looks
    /// at the version `tid` names (resolving a redirect, after which `tid` names the
    /// version itself) and decides what to do about it. `prev_xmax` carries the xmin the
    /// version must have (0 at the start), and is updated for the next step.
    #[allow(clippy::too_many_arguments)]
    fn chain_step(
        &self,
        xid: Xid,
        want: Want,
        tid: &mut Tid,
        prev_xmax: &mut Xid,
        page: HeapPage<'_>,
        span: &mut Span,
        hints: &mut Hints,
    ) -> Result<Step, HeapError> {
        let Some((slot, h, data, redirected)) = resolve(page, tid.slot) else {
            return Ok(Step::NoRow);
        };
        if *prev_xmax != INVALID_XID && !redirected && h.xmin != *prev_xmax {
            return Ok(Step::NoRow); // a deleted row's slot, freed by VACUUM and reused
        }
        // From here `tid` names this very version (a redirect resolved), so a re-read
        // after a wait must find the same xmin there.
        tid.slot = slot;
        *prev_xmax = h.xmin;
        let keep = match self.xmax_meaning(xid, want, slot, &h, hints)? {
            Xmax::Running(holder) => return Ok(Step::WaitFor(holder)),
            Xmax::Held => return Ok(Step::Held),
            Xmax::Deleted => return Ok(Step::NoRow),
            Xmax::Replaced(holder) => {
                *prev_xmax = holder;
                let target = Tid {
                    block: h.ctid_block,
                    slot: h.ctid_slot,
                };
                let same_page = target.block == tid.block;
                // A link between chains: to another page, or to a root on this one (where
                // compression pointed a link at a chain the row moved back to).
                let between = !same_page || is_chain_root(page, target.slot);
                self.track_dead_span(span, *tid, &h, target, between)?;
                *tid = target;
                return Ok(Step::Next {
                    same_page,
                    dead_data: !same_page && !data.is_empty(),
                });
            }
            Xmax::Free(keep) => keep,
        };
        if h.infomask & XMIN_INVALID != 0 {
            return Ok(Step::NoRow); // its insert was rolled back: there is no row
        }
        // The creator's fate, unless a hint bit already says it committed: wait out an
        // uncommitted insert of the row by someone else; a rolled-back one means no row.
        if h.xmin != xid && h.infomask & XMIN_COMMITTED == 0 {
            let txns = self.engine.txns();
            if txns.is_running(h.xmin) {
                if txns.same_tree(xid, h.xmin) {
                    // Inserted by this transaction's tree (a savepoint): ours to change.
                    return Ok(Step::Newest(h, keep));
                }
                return Ok(Step::WaitFor(h.xmin));
            }
            match txns.status(h.xmin)? {
                XidStatus::Aborted => {
                    hints.push((slot, h.xmin, XMIN_INVALID));
                    return Ok(Step::NoRow);
                }
                XidStatus::Committed => hints.push((slot, h.xmin, XMIN_COMMITTED)),
                XidStatus::InProgress | XidStatus::SubCommitted => {}
            }
        }
        Ok(Step::Newest(h, keep))
    }

    /// Who holds the row at version `h` (in `slot`), for `xid` wanting it (`want`): the
    /// holders (a plain xmax, or a multixact's members read under the page lock: heap
    /// page, then the multixact SLRU's bank lock, never the other way), each given its
    /// fate, then [`decide`]. What the commit log tells about a plain xmax goes to `hints`.
    fn xmax_meaning(
        &self,
        xid: Xid,
        want: Want,
        slot: u16,
        h: &TupleHeader,
        hints: &mut Hints,
    ) -> Result<Xmax, HeapError> {
        let m = h.infomask;
        if m & XMAX_INVALID != 0 {
            return Ok(Xmax::Free(Vec::new()));
        }
        let txns = self.engine.txns();
        let multi = m & XMAX_IS_MULTI != 0;
        let mut fates: [(Xid, MemberMode, Fate); 1];
        let mut many;
        let holders: &[(Xid, MemberMode, Fate)] = if multi {
            many = Vec::new();
            for (x, mode) in txns.multis().members(h.xmax).map_err(ClogError::from)? {
                many.push((x, mode, self.fate(xid, x)?));
            }
            &many
        } else {
            let (x, mode) = plain_holder(h);
            let fate = if m & XMAX_COMMITTED != 0 {
                Fate::Committed
            } else {
                let fate = self.fate(xid, x)?;
                // Hints: an updater's outcome; a locker's end (its lock is over either way).
                match (fate, m & XMAX_LOCK_ONLY != 0) {
                    (Fate::Committed, false) => hints.push((slot, x, XMAX_COMMITTED)),
                    (Fate::Aborted, _) | (Fate::Committed, true) => {
                        hints.push((slot, x, XMAX_INVALID))
                    }
                    _ => {}
                }
                fate
            };
            fates = [(x, mode, fate)];
            &mut fates
        };
        Ok(decide(want, holders, |x| x == txns.top_of(xid)))
    }

    /// Where holder `x` stands for `xid`.
    fn fate(&self, xid: Xid, x: Xid) -> Result<Fate, HeapError> {
        if x == xid {
            return Ok(Fate::Me);
        }
        let txns = self.engine.txns();
        Ok(match txns.status(x)? {
            XidStatus::InProgress | XidStatus::SubCommitted => {
                if txns.same_tree(xid, x) {
                    Fate::Tree
                } else {
                    Fate::Running
                }
            }
            XidStatus::Committed => Fate::Committed,
            XidStatus::Aborted => Fate::Aborted,
        })
    }

    /// Tracks, in `span`, a stretch of versions dead to all between links from one chain to
    /// another (`between`: to another page, or to a root), as the walk follows the link of
    /// version `h` at `at` to `target` (for [`Heap::compress`]).
    fn track_dead_span(
        &self,
        span: &mut Span,
        at: Tid,
        h: &TupleHeader,
        target: Tid,
        between: bool,
    ) -> Result<(), HeapError> {
        if !between && span.start.is_none() {
            return Ok(());
        }
        if h.infomask & XMAX_IS_MULTI != 0 {
            // Its link's xid is a multixact member's: compression keeps plain links only.
            span.broken |= span.start.is_some();
            return Ok(());
        }
        let horizon = *span
            .horizon
            .get_or_insert_with(|| self.engine.txns().oldest_xmin());
        let dead = self.dead_to_all(at.slot, h, horizon, &mut Hints::new())?;
        if !dead {
            span.broken |= span.start.is_some();
        } else if between && !span.broken {
            match span.start {
                None => span.start = Some((at, h.xmax, target)),
                Some(_) => span.next.push((h.xmax, target)),
            }
        }
        Ok(())
    }

    /// The free-space map after a same-page update leaving `free` bytes: only a prune
    /// can have given the page more room than the map records. Without one the room only
    /// shrank, and an entry promising too much is a hint an inserter corrects when it
    /// finds the page full (PostgreSQL leaves the map alone on an update too): two or
    /// three map lookups per TPC-B transaction saved.
    fn note_room_after_update(
        &self,
        pruned: bool,
        block: u32,
        free: usize,
    ) -> Result<(), HeapError> {
        if pruned {
            self.fsm.set(self.engine.pool(), block, free)?;
        }
        Ok(())
    }

    /// Writes `xid`'s change to the row's newest version `h` at `tid`, under its page's
    /// write lock `g`: sets xmax (a delete, `new_data` None), or also places the new
    /// version: on this page when it fits, pruning the page first if needed, else on
    /// another page. Returns the new version's tid (`tid` for a delete).
    #[allow(clippy::too_many_arguments)]
    fn write_change(
        &self,
        xid: Xid,
        tid: Tid,
        h: TupleHeader,
        mut g: PageWriteGuard<'_>,
        want: Want,
        keep: Vec<Member>,
        new_data: Option<Vec<u8>>,
    ) -> Result<Tid, HeapError> {
        let mut old = h;
        old.infomask &= !(XMAX_INVALID
            | XMAX_COMMITTED
            | XMAX_LOCK_ONLY
            | XMAX_EXCL_LOCK
            | XMAX_IS_MULTI
            | UPDATED);
        if keep.is_empty() {
            old.xmax = xid;
            match want {
                Want::Lock(RowLockMode::Exclusive) => {
                    old.infomask |= XMAX_LOCK_ONLY | XMAX_EXCL_LOCK
                }
                Want::Lock(RowLockMode::Share) => old.infomask |= XMAX_LOCK_ONLY,
                Want::Update | Want::Delete => {}
            }
        } else {
            // Others keep holding the row beside `xid`: a multixact of all of them (made
            // and logged before the change that names it).
            let mut members = keep;
            members.push((xid, want.mode()));
            old.xmax = self.engine.create_multi(xid, self.rel, &members)?;
            old.infomask |= XMAX_IS_MULTI;
            if let Want::Lock(_) = want {
                old.infomask |= XMAX_LOCK_ONLY;
            }
        }
        let Some(new_data) = new_data else {
            self.change_logged(xid, &mut g, |p| p.set_header(tid.slot, &old))?;
            return Ok(tid);
        };
        old.infomask |= UPDATED;
        let block = tid.block;
        // Same page when the new version fits, pruning dead versions first if needed
        // (PostgreSQL's HOT update; this version is live, so pruning keeps its slot). The
        // prune and the update are logged as one record: TPC-B prunes an accounts page
        // before nearly every update of it (fillfactor 100: the last update's dead version
        // holds the room), and a record of its own cost a record and block header more.
        // If the prune does not make room, the record holds the prune alone (under `xid`,
        // which redo does not look at for a page change).
        let fits = HeapPage(&g).fits(new_data.len());
        let prune = if fits {
            None
        } else {
            let horizon = self.engine.txns().oldest_xmin();
            self.plan_prune_for_update(&mut g, horizon)?
        };
        if fits || prune.is_some() {
            if let Some(plan) = &prune {
                self.note_freed_roots(plan);
            }
            let placed = self.change_logged(xid, &mut g, |p| {
                if let Some(plan) = &prune {
                    plan.apply(p);
                    if !p.view().fits(new_data.len()) {
                        return None;
                    }
                }
                let slot = p.insert(block, xid, &new_data).expect("fits");
                let (mut nh, _) = p.view().tuple(slot).expect("just inserted");
                nh.infomask |= HEAP_ONLY;
                p.set_header(slot, &nh);
                old.ctid_block = block;
                old.ctid_slot = slot;
                p.set_header(tid.slot, &old);
                Some(Tid { block, slot })
            })?;
            (self.counters).count_removed(prune.as_ref().map_or(0, |p| p.removed()));
            let free = HeapPage(&g).free_space();
            if let Some(new_tid) = placed {
                drop(g);
                self.note_room_after_update(prune.is_some(), block, free)?;
                return Ok(new_tid);
            }
            self.fsm.set(self.engine.pool(), block, free)?;
        }
        // Otherwise another page with room, from the free-space map, taking each
        // candidate's lock only if it is free (we hold this page's lock: waiting could
        // close a cycle); else a new page at the end (nobody else can hold its lock).
        // The new version is a root on its page (kept while this page's chain leads
        // there; see `compress`). Logged as two records, the new version then the old
        // one's header. The pair needs no atomicity of its own: the commit record
        // comes after both; without it, xmax belongs to a transaction that never
        // committed and the row stays free.
        let new_tid = self.place_elsewhere(xid, block, &new_data)?;
        old.ctid_block = new_tid.block;
        old.ctid_slot = new_tid.slot;
        self.change_logged(xid, &mut g, |p| p.set_header(tid.slot, &old))?;
        Ok(new_tid)
    }

    /// Inserts the new version of a row moving off page `from` (whose lock the caller
    /// holds), never waiting for another page's lock.
    fn place_elsewhere(&self, xid: Xid, from: u32, data: &[u8]) -> Result<Tid, HeapError> {
        let pool = self.engine.pool();
        let need = tuple_space(data.len()) + ITEM_ID_SIZE;
        let n = pool.nblocks(self.rel, ForkNumber::Main)?;
        let mut start = self.hint.load(Ordering::Relaxed);
        // A few map candidates, then give up and extend.
        for _ in 0..8 {
            let Some(candidate) = self.fsm.search(pool, need, start, n)? else {
                break;
            };
            start = candidate + 1;
            if candidate == from {
                continue;
            }
            let cbuf = pool.read(self.tag(candidate))?;
            let Some(mut cg) = cbuf.try_write() else {
                continue;
            };
            if !HeapPage(&cg).fits(data.len()) {
                let free = HeapPage(&cg).free_space();
                drop(cg);
                self.fsm.set(pool, candidate, free)?;
                continue;
            }
            let slot = self
                .change_logged(xid, &mut cg, |p| p.insert(candidate, xid, data))?
                .expect("checked that it fits");
            let free = HeapPage(&cg).free_space();
            drop(cg);
            self.fsm.set(pool, candidate, free)?;
            // The next search starts where there was room (PostgreSQL's target block).
            self.hint.store(candidate, Ordering::Relaxed);
            return Ok(Tid {
                block: candidate,
                slot,
            });
        }
        let nbuf = pool.extend(self.rel, ForkNumber::Main)?;
        let nblock = nbuf.tag().block;
        let mut ng = nbuf.write();
        let slot = self
            .change_logged(xid, &mut ng, |p| p.insert(nblock, xid, data))?
            .expect("an empty page holds any tuple");
        let free = HeapPage(&ng).free_space();
        drop(ng);
        self.fsm.set(pool, nblock, free)?;
        self.hint.store(nblock, Ordering::Relaxed);
        Ok(Tid {
            block: nblock,
            slot,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use MemberMode::{Delete, Exclusive, Share, Update};

    const ME: Xid = 10;
    const TOP: Xid = 5;

    fn d(want: Want, holders: &[(Xid, MemberMode, Fate)]) -> Xmax {
        decide(want, holders, |x| x == TOP)
    }

    const SHARE: Want = Want::Lock(RowLockMode::Share);
    const EXCL: Want = Want::Lock(RowLockMode::Exclusive);

    #[test]
    fn updaters_decide_first() {
        for want in [SHARE, EXCL, Want::Update, Want::Delete] {
            for fate in [Fate::Me, Fate::Tree, Fate::Committed] {
                assert_eq!(d(want, &[(7, Update, fate)]), Xmax::Replaced(7));
                assert_eq!(d(want, &[(7, Delete, fate)]), Xmax::Deleted);
                // Lockers beside a decided updater do not matter.
                assert_eq!(
                    d(want, &[(3, Exclusive, Fate::Running), (7, Update, fate)]),
                    Xmax::Replaced(7)
                );
            }
            assert_eq!(d(want, &[(7, Update, Fate::Running)]), Xmax::Running(7));
            assert_eq!(d(want, &[(7, Delete, Fate::Aborted)]), Xmax::Free(vec![]));
        }
    }

    #[test]
    fn the_conflict_table_holds_for_other_trees() {
        let running = |m| [(7, m, Fate::Running)];
        assert_eq!(d(SHARE, &running(Share)), Xmax::Free(vec![(7, Share)]));
        for (held, want) in [
            (Share, EXCL),
            (Share, Want::Update),
            (Share, Want::Delete),
            (Exclusive, SHARE),
            (Exclusive, EXCL),
            (Exclusive, Want::Update),
        ] {
            assert_eq!(
                d(want, &running(held)),
                Xmax::Running(7),
                "{held:?} {want:?}"
            );
        }
        // Ended lockers hold nothing.
        for fate in [Fate::Committed, Fate::Aborted] {
            assert_eq!(d(Want::Update, &[(7, Exclusive, fate)]), Xmax::Free(vec![]));
        }
        // The first conflicting member is waited for; compatible ones are kept.
        assert_eq!(
            d(
                EXCL,
                &[
                    (6, Share, Fate::Committed),
                    (7, Share, Fate::Running),
                    (8, Share, Fate::Running)
                ]
            ),
            Xmax::Running(7)
        );
    }

    #[test]
    fn the_own_tree_never_conflicts() {
        // Held already by itself or its top-level part, at least as strongly.
        assert_eq!(d(SHARE, &[(ME, Exclusive, Fate::Me)]), Xmax::Held);
        assert_eq!(d(EXCL, &[(TOP, Exclusive, Fate::Tree)]), Xmax::Held);
        // A weaker own lock is replaced by the new entry; the top's is kept.
        assert_eq!(d(EXCL, &[(ME, Share, Fate::Me)]), Xmax::Free(vec![]));
        assert_eq!(
            d(EXCL, &[(TOP, Share, Fate::Tree)]),
            Xmax::Free(vec![(TOP, Share)])
        );
        // FOR UPDATE, then a savepoint's update: the top's lock stays beside the update.
        assert_eq!(
            d(Want::Update, &[(TOP, Exclusive, Fate::Tree)]),
            Xmax::Free(vec![(TOP, Exclusive)])
        );
        // A sibling savepoint's lock, even a strong one, is kept (it may roll back alone).
        assert_eq!(
            d(SHARE, &[(9, Exclusive, Fate::Tree)]),
            Xmax::Free(vec![(9, Exclusive)])
        );
        // The own update of a row it locked replaces the lock.
        assert_eq!(
            d(Want::Update, &[(ME, Exclusive, Fate::Me)]),
            Xmax::Free(vec![])
        );
    }
}
