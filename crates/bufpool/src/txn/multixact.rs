//! Multixacts: one id standing for several transactions that hold a row at once
//! (PostgreSQL's multixact.c, reduced: no wraparound, two lock modes and the updater).
//!
//! Owns: two SLRUs under the data directory, `multixact_offsets` (per multi: where its
//! members start and how many there are) and `multixact_members` (per member: its
//! transaction id and mode).
//!
//! ```text
//! offsets entry, 8 B:  start u32 (index of the first member) | count u16 | reserved u16
//! member, 8 B:         xid u32 | mode u8 (1 share, 2 exclusive, 3 update, 4 delete) | 3 zero
//! ```
//! A multi's members never straddle a page: a multi that would is started on the next
//! page (so a lookup is one offsets read and one members read, each a shared bank lock on
//! a hit). `count == 0` is never a created multi: reading one is an error, not "no
//! members".
//!
//! Read by: the heap, when a tuple's xmax carries `XMAX_IS_MULTI` (row locks held by
//! several transactions, or a lock kept beside a savepoint's update: the hot path
//! of a FOR UPDATE followed by a savepoint's update). Written by [`crate::engine::Engine::create_multi`] after its
//! WAL record, and by recovery replaying those records.
//!
//! Invariants: a multi is immutable (adding a member makes a new one); ids and member
//! positions are handed out in order under `state`; the first entry on an offsets or
//! members page zeroes that page first, under the same mutex, so no later multi is written
//! into a page before it is zeroed. Both SLRUs have the commit log's write barrier: no
//! page reaches disk ahead of the WAL records that created its entries, so after a crash
//! ids past the durable log are handed out again with nothing on disk naming them.
//!
//! **Truncation** (PostgreSQL's relminmxid, reduced). A multi's members ending does not
//! remove its id from tuples, so the cut must stay below the oldest multi any page can
//! still name. Each relation has a bound ([`MultiXact::rel_bounds`]): no tuple of it names
//! a multi below it. Writing a multi into a relation lowers its bound to that id (if it
//! had none); VACUUM, which replaces every finished multi in the relation's tuples, raises
//! it to what it left (or to the next id when it started). A checkpoint cuts both SLRUs
//! below the smallest bound ([`MultiXact::oldest_needed`]), after writing it to the
//! control file with the bounds; recovery restores them and lowers them again for every
//! multi it replays. A relation never vacuumed keeps every multi since its first.
//!
//! Locks: `state` (taken alone, around id assignment and page zeroing), then the SLRUs';
//! `rels` alone.

use std::collections::BTreeMap;
use std::path::Path;

use super::Xid;
use crate::slru::{Slru, SlruError, SlruOptions, SlruStats, WriteBarrier};
use crate::sync::{Arc, AtomicU32, Mutex, Ordering};
use crate::types::RelFileId;
use crate::vfs::Vfs;

/// A multixact id. 0 is invalid; ids start at 1. Its own space: a tuple's xmax is a
/// multi only when its infomask says so.
pub type MultiId = u32;
/// The invalid multixact id: no multixact.
pub const INVALID_MULTI: MultiId = 0;
/// The first multixact id handed out.
pub const FIRST_MULTI: MultiId = 1;

/// Bytes per offsets entry and per member.
const ENTRY: usize = 8;

/// How a member holds the row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemberMode {
    /// `FOR SHARE`: other share lockers may join.
    Share = 1,
    /// `FOR UPDATE`: no other transaction tree may lock or change the row.
    Exclusive = 2,
    /// The member updated the row (the tuple's ctid leads to its new version).
    Update = 3,
    /// The member deleted the row.
    Delete = 4,
}

impl MemberMode {
    /// The mode stored as byte `v` (1 share, 2 exclusive, 3 update, 4 delete); None for any
    /// other byte.
    pub fn from_u8(v: u8) -> Option<MemberMode> {
        Some(match v {
            1 => MemberMode::Share,
            2 => MemberMode::Exclusive,
            3 => MemberMode::Update,
            4 => MemberMode::Delete,
            _ => return None,
        })
    }

    /// Whether the member changed the row (rather than only locking it).
    pub fn is_update(self) -> bool {
        matches!(self, MemberMode::Update | MemberMode::Delete)
    }
}

/// One holder of a row.
pub type Member = (Xid, MemberMode);

/// An error of the multixact SLRUs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MultiXactError {
    /// A page of `multixact_offsets` or `multixact_members` could not be read or written.
    #[error(transparent)]
    Slru(#[from] SlruError),
    /// A multixact was asked for that was never created, or whose creation was lost.
    #[error("multixact {multi} does not exist (next is {next}): a tuple names a multixact that was never created or whose creation was lost")]
    Missing {
        /// The multixact's id.
        multi: MultiId,
        /// The next multixact id to be handed out.
        next: MultiId,
    },
    /// A multixact's entry or members are inconsistent.
    #[error("multixact {multi}: {problem}")]
    Corrupt {
        /// The multixact's id.
        multi: MultiId,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A multixact of fewer than 2 members, or more than fit one members page.
    #[error("a multixact needs 2 to {max} members, not {count}")]
    BadCount {
        /// The number of members asked for.
        count: usize,
        /// The most members one multixact may have.
        max: usize,
    },
    /// Creating a multixact was refused: the multixact id space is nearly used up.
    #[error(
        "database is not accepting commands that create multixacts, to avoid wraparound \
         data loss: the next multixact id would be {next}, within {margin} of the end of the \
         32-bit id space"
    )]
    IdsExhausted {
        /// The id that would have been assigned next.
        next: MultiId,
        /// How many ids before the end of the id space assigning stops.
        margin: u32,
    },
    /// The 32-bit member space has no room left for a multixact's members.
    #[error("multixact members exhausted: {count} members do not fit after position {next_member} of the 32-bit member space")]
    MembersExhausted {
        /// The index of the next member.
        next_member: u32,
        /// The number of members asked for.
        count: usize,
    },
    /// A multixact below the oldest kept was asked for: it was truncated.
    #[error("multixact {multi} was truncated (the oldest kept is {oldest}): a tuple names a multixact older than its relation's bound")]
    Truncated {
        /// The multixact's id.
        multi: MultiId,
        /// The oldest multixact kept.
        oldest: MultiId,
    },
}

impl MultiXactError {
    /// The OS error number behind this error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            MultiXactError::Slru(e) => e.raw_os_error(),
            _ => None,
        }
    }
}

/// Where the next multi and member go, and the oldest multi kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultiPositions {
    /// The next multixact id to hand out.
    pub next_multi: MultiId,
    /// The index of the next member.
    pub next_member: u32,
    /// Multis below it were truncated away.
    pub oldest_multi: MultiId,
}

impl Default for MultiPositions {
    fn default() -> Self {
        MultiPositions {
            next_multi: FIRST_MULTI,
            next_member: 0,
            oldest_multi: FIRST_MULTI,
        }
    }
}

/// The two multixact SLRUs and the next positions.
#[derive(Debug)]
pub struct MultiXact {
    offsets: Slru,
    members: Slru,
    state: Mutex<MultiPositions>,
    /// `state`'s next_multi and oldest_multi, for lookups without its lock (stored under
    /// it, after the change).
    next_seen: AtomicU32,
    oldest_seen: AtomicU32,
    /// Per relation, the oldest multi its tuples may name (see the module doc).
    rels: Mutex<BTreeMap<RelFileId, MultiId>>,
    per_page: u64,
    members_per_page: u64,
}

impl MultiXact {
    /// Opens `<dir>/multixact_offsets` and `<dir>/multixact_members` with the shapes
    /// `offsets` and `members` (`multixact_offset_buffers`, `multixact_member_buffers`),
    /// handing out positions from `next`.
    pub fn open(
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        page_size: usize,
        offsets: SlruOptions,
        members: SlruOptions,
        next: MultiPositions,
    ) -> Result<MultiXact, SlruError> {
        let offsets = Slru::open_with(vfs.clone(), dir, "multixact_offsets", page_size, offsets)?;
        let members = Slru::open_with(vfs, dir, "multixact_members", page_size, members)?;
        let per_page = (offsets.usable() / ENTRY) as u64;
        let members_per_page = (members.usable() / ENTRY) as u64;
        Ok(MultiXact {
            offsets,
            members,
            state: Mutex::new(next),
            next_seen: AtomicU32::new(next.next_multi),
            oldest_seen: AtomicU32::new(next.oldest_multi),
            rels: Mutex::new(BTreeMap::new()),
            per_page,
            members_per_page,
        })
    }

    /// Both SLRUs write pages only after `barrier` (the WAL flushed to its insert
    /// position).
    pub fn set_write_barriers(&self, offsets: WriteBarrier, members: WriteBarrier) {
        self.offsets.set_write_barrier(offsets);
        self.members.set_write_barrier(members);
    }

    /// Installs the engine's test-hook forwarder in both SLRUs (see `hooks.rs`).
    pub(crate) fn install_probe(&self, forward: crate::hooks::Forward) {
        self.offsets.install_probe(forward.clone());
        self.members.install_probe(forward);
    }

    /// The most members one multi may have (a members page).
    pub fn max_members(&self) -> usize {
        self.members_per_page as usize
    }

    fn entry_at(&self, m: MultiId) -> (u64, usize) {
        let m = u64::from(m);
        (m / self.per_page, ((m % self.per_page) as usize) * ENTRY)
    }

    fn member_at(&self, i: u32) -> (u64, usize) {
        let i = u64::from(i);
        (
            i / self.members_per_page,
            ((i % self.members_per_page) as usize) * ENTRY,
        )
    }

    /// Where the next multi and its members go.
    pub fn positions(&self) -> MultiPositions {
        *self.state.lock()
    }

    /// Hands out the next id, for a tuple of relation `rel`, and the place of its `count`
    /// members (never straddling a page), zeroing the offsets and members pages they start.
    /// The entry is written by [`MultiXact::write`] (after the WAL record naming it). The
    /// relation's bound is lowered to the id under the same lock that publishes it, so
    /// [`MultiXact::oldest_needed`] never sees the id without the bound (a checkpoint in
    /// between would truncate it).
    pub fn reserve(&self, rel: RelFileId, count: usize) -> Result<(MultiId, u32), MultiXactError> {
        self.check_count(count)?;
        let mut st = self.state.lock();
        let m = st.next_multi;
        if !super::id_allowed(m, "multixact") {
            return Err(MultiXactError::IdsExhausted {
                next: m,
                margin: super::XID_STOP_MARGIN,
            });
        }
        let mpp = self.members_per_page;
        let exhausted = || MultiXactError::MembersExhausted {
            next_member: st.next_member,
            count,
        };
        let mut start = st.next_member;
        if u64::from(start) % mpp + count as u64 > mpp {
            start = u32::try_from((u64::from(start) / mpp + 1) * mpp).map_err(|_| exhausted())?;
        }
        let end = start.checked_add(count as u32).ok_or_else(exhausted)?;
        let (opage, oat) = self.entry_at(m);
        if oat == 0 {
            self.offsets.zero_page(opage)?;
        }
        let first = self.member_at(start).0;
        let last = self.member_at(end - 1).0;
        debug_assert_eq!(first, last, "no straddling");
        // The members page is new if the run starts it, or skipped to it.
        if self.member_at(start).1 == 0 {
            self.members.zero_page(first)?;
        }
        self.note_rel(rel, m); // positions -> rels, the one order
        st.next_multi = m + 1;
        st.next_member = end;
        self.next_seen.store(st.next_multi, Ordering::Release);
        Ok((m, start))
    }

    fn check_count(&self, count: usize) -> Result<(), MultiXactError> {
        if count < 2 || count > self.max_members() || count > usize::from(u16::MAX) {
            return Err(MultiXactError::BadCount {
                count,
                max: self.max_members(),
            });
        }
        Ok(())
    }

    /// Writes multi `m`'s entry and members (`start` from [`MultiXact::reserve`] or a
    /// replayed record). Idempotent: replay writes the same bytes again.
    pub fn write(&self, m: MultiId, start: u32, members: &[Member]) -> Result<(), MultiXactError> {
        self.check_count(members.len())?;
        let (mpage, mat) = self.member_at(start);
        if mat + members.len() * ENTRY > self.members.usable() {
            return Err(MultiXactError::Corrupt {
                multi: m,
                problem: "its members would straddle a page",
            });
        }
        self.members.write(mpage, |b| {
            for (k, &(xid, mode)) in members.iter().enumerate() {
                let at = mat + k * ENTRY;
                b[at..at + 4].copy_from_slice(&xid.to_le_bytes());
                b[at + 4] = mode as u8;
                b[at + 5..at + 8].fill(0);
            }
        })?;
        let (opage, oat) = self.entry_at(m);
        self.offsets.write(opage, |b| {
            b[oat..oat + 4].copy_from_slice(&start.to_le_bytes());
            b[oat + 4..oat + 6].copy_from_slice(&(members.len() as u16).to_le_bytes());
            b[oat + 6..oat + 8].fill(0);
        })?;
        Ok(())
    }

    /// Raises the next positions past a multi recovery replayed.
    pub fn observe(&self, m: MultiId, start: u32, count: usize) {
        let mut st = self.state.lock();
        st.next_multi = st.next_multi.max(m.saturating_add(1));
        st.next_member = st.next_member.max(start.saturating_add(count as u32));
        self.next_seen.store(st.next_multi, Ordering::Release);
    }

    /// Restores what a checkpoint's control file recorded (before replay).
    pub fn restore(&self, pos: MultiPositions, rels: &[(RelFileId, MultiId)]) {
        {
            let mut st = self.state.lock();
            st.next_multi = st.next_multi.max(pos.next_multi);
            st.next_member = st.next_member.max(pos.next_member);
            st.oldest_multi = pos.oldest_multi.max(FIRST_MULTI);
            self.next_seen.store(st.next_multi, Ordering::Release);
            self.oldest_seen.store(st.oldest_multi, Ordering::Release);
        }
        let mut r = self.rels.lock();
        for &(rel, m) in rels {
            let e = r.entry(rel).or_insert(m);
            *e = (*e).min(m);
        }
    }

    /// Multi `m` is being written into a tuple of `rel`: the relation's bound goes no
    /// higher than `m`.
    pub fn note_rel(&self, rel: RelFileId, m: MultiId) {
        let mut r = self.rels.lock();
        let e = r.entry(rel).or_insert(m);
        *e = (*e).min(m);
    }

    /// VACUUM of `rel` is over: its tuples name no multi below `bound` (the next id when
    /// the pass started, or the oldest multi it had to keep).
    pub fn set_rel_bound(&self, rel: RelFileId, bound: MultiId) {
        self.rels.lock().insert(rel, bound);
    }

    /// Every relation's bound.
    pub fn rel_bounds(&self) -> Vec<(RelFileId, MultiId)> {
        self.rels.lock().iter().map(|(&r, &m)| (r, m)).collect()
    }

    /// The oldest multi a tuple may still name: the smallest bound, or the next id. Reads
    /// both under the positions' lock (positions -> rels), which `reserve` holds while it
    /// publishes an id and its relation's bound together.
    pub fn oldest_needed(&self) -> MultiId {
        let st = self.state.lock();
        let next = st.next_multi;
        let low = self.rels.lock().values().copied().min();
        low.unwrap_or(next).min(next)
    }

    /// Removes the segments of both SLRUs that hold only multis below `oldest` (and their
    /// members), and refuses lookups below it from now on. The caller (the checkpoint)
    /// wrote `oldest` to the control file first and does not truncate concurrently.
    /// Returns segments removed.
    pub fn truncate(&self, oldest: MultiId) -> Result<usize, MultiXactError> {
        let (next, next_member, current) = {
            let st = self.state.lock();
            (st.next_multi, st.next_member, st.oldest_multi)
        };
        if oldest <= current {
            return Ok(0);
        }
        debug_assert!(oldest <= next);
        // The members of `oldest` start at its entry's `start`; a multi reserved but never
        // written (its record failed) has none: take the first written one after it.
        let mut member_cut = next_member;
        for m in oldest..next {
            let (opage, oat) = self.entry_at(m);
            let (start, count) = self.offsets.read(opage, |b| {
                (
                    u32::from_le_bytes(b[oat..oat + 4].try_into().expect("4")),
                    u16::from_le_bytes([b[oat + 4], b[oat + 5]]),
                )
            })?;
            if count != 0 {
                member_cut = start;
                break;
            }
        }
        {
            let mut st = self.state.lock();
            st.oldest_multi = st.oldest_multi.max(oldest);
            self.oldest_seen.store(st.oldest_multi, Ordering::Release);
        }
        let mut removed = self.offsets.truncate(self.entry_at(oldest).0)?;
        removed += self.members.truncate(self.member_at(member_cut).0)?;
        Ok(removed)
    }

    /// The members of multi `m`, in the order they were written.
    pub fn members(&self, m: MultiId) -> Result<Vec<Member>, MultiXactError> {
        // No lock: a multi named by a tuple was reserved before the tuple was written.
        let next = self.next_seen.load(Ordering::Acquire);
        let oldest = self.oldest_seen.load(Ordering::Acquire);
        if m == INVALID_MULTI || m >= next {
            return Err(MultiXactError::Missing { multi: m, next });
        }
        if m < oldest {
            return Err(MultiXactError::Truncated { multi: m, oldest });
        }
        let (opage, oat) = self.entry_at(m);
        let (start, count) = self.offsets.read(opage, |b| {
            (
                u32::from_le_bytes(b[oat..oat + 4].try_into().expect("4")),
                usize::from(u16::from_le_bytes([b[oat + 4], b[oat + 5]])),
            )
        })?;
        if count == 0 {
            return Err(MultiXactError::Missing { multi: m, next });
        }
        let (mpage, mat) = self.member_at(start);
        if mat + count * ENTRY > self.members.usable() {
            return Err(MultiXactError::Corrupt {
                multi: m,
                problem: "its members straddle a page",
            });
        }
        let out = self.members.read(mpage, |b| {
            (0..count)
                .map(|k| {
                    let at = mat + k * ENTRY;
                    let xid = u32::from_le_bytes(b[at..at + 4].try_into().expect("4"));
                    MemberMode::from_u8(b[at + 4]).map(|mode| (xid, mode))
                })
                .collect::<Option<Vec<Member>>>()
        })?;
        out.ok_or(MultiXactError::Corrupt {
            multi: m,
            problem: "a member has no mode (its entry points at unwritten members)",
        })
    }

    /// Writes every changed page of both SLRUs, durably (at checkpoints). Returns pages
    /// written.
    pub fn flush(&self) -> Result<usize, SlruError> {
        Ok(self.offsets.flush()? + self.members.flush()?)
    }

    /// The offsets SLRU's counters.
    pub fn offset_stats(&self) -> SlruStats {
        self.offsets.stats()
    }

    /// The members SLRU's counters.
    pub fn member_stats(&self) -> SlruStats {
        self.members.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slru::SlruDesign;
    use crate::vfs::MemVfs;

    fn open(vfs: &MemVfs, slots: usize, next: MultiPositions) -> MultiXact {
        let opts = SlruOptions {
            buffers: slots,
            design: SlruDesign::default(),
        };
        MultiXact::open(
            Arc::new(vfs.clone()),
            Path::new("/db"),
            4096,
            opts,
            opts,
            next,
        )
        .unwrap()
    }

    /// The relation the tests' multixacts are for.
    const REL_T: RelFileId = RelFileId::new(0, 70);

    fn members_of(k: u32, n: usize) -> Vec<Member> {
        (0..n as u32)
            .map(|i| {
                let mode = match (k + i) % 4 {
                    0 => MemberMode::Share,
                    1 => MemberMode::Exclusive,
                    2 => MemberMode::Update,
                    _ => MemberMode::Delete,
                };
                (100 + k * 10 + i, mode)
            })
            .collect()
    }

    /// Proves (F8): the last multixact ids, and the last member positions, are refused with
    /// a named error, not a panic.
    #[test]
    fn ids_and_members_near_exhaustion_are_refused_with_an_error() {
        let near = |next_multi, next_member| {
            let at = MultiPositions {
                next_multi,
                next_member,
                oldest_multi: 1,
            };
            open(&MemVfs::new(), 4, at).reserve(REL_T, 2)
        };
        let stop = MultiId::MAX - crate::txn::XID_STOP_MARGIN;
        assert!(near(stop - 1, 0).is_ok());
        let err = near(stop, 0).unwrap_err().to_string();
        assert!(
            err.contains("multixact id") && err.contains("wraparound"),
            "{err}"
        );
        let err = near(2, u32::MAX - 1).unwrap_err().to_string();
        assert!(err.contains("multixact members"), "{err}");
    }

    #[test]
    fn write_read_many_pages_with_eviction_and_reopen() {
        let vfs = MemVfs::new();
        let mx = open(&vfs, 2, MultiPositions::default());
        let mpp = mx.max_members();
        let mut made = Vec::new();
        for k in 0..3000u32 {
            let n = 2 + (k as usize * 7) % 9;
            let (m, start) = mx.reserve(REL_T, n).unwrap();
            assert_eq!(m, k + 1);
            // Never straddles a page.
            assert_eq!(start as usize / mpp, (start as usize + n - 1) / mpp);
            let ms = members_of(k, n);
            mx.write(m, start, &ms).unwrap();
            made.push((m, ms));
        }
        for (m, ms) in &made {
            assert_eq!(&mx.members(*m).unwrap(), ms);
        }
        let pos = mx.positions();
        mx.flush().unwrap();
        drop(mx);
        let again = open(&vfs, 48, pos); // 3 banks
        for (m, ms) in made.iter().rev() {
            assert_eq!(&again.members(*m).unwrap(), ms);
        }
        assert!(again.offset_stats().reads > 0);
    }

    /// Proves (F4): a checkpoint can never cut below a multixact that has been handed out:
    /// the id and its relation's bound are published together, under the positions' lock
    /// that `oldest_needed` reads. Before, `reserve` raised the next id and the engine noted
    /// the relation afterwards, under another lock; a checkpoint in between computed the
    /// new next id as the oldest needed and truncated the multixact a tuple was about to
    /// name.
    #[test]
    fn a_multixact_handed_out_is_never_below_the_oldest_needed() {
        let mx = open(&MemVfs::new(), 16, MultiPositions::default());
        let rel = RelFileId::new(0, 77);
        // The relation holds no multixact yet, so nothing but the id's own note keeps the
        // cut at or below it (with the note made after `reserve` returned, a checkpoint
        // at this point cut at m + 1).
        let (m, _) = mx.reserve(rel, 2).unwrap();
        assert!(mx.oldest_needed() <= m, "{} > {m}", mx.oldest_needed());
    }

    #[test]
    fn missing_bad_counts_and_unwritten_entries_are_errors() {
        let vfs = MemVfs::new();
        let mx = open(&vfs, 16, MultiPositions::default());
        assert!(matches!(
            mx.members(INVALID_MULTI),
            Err(MultiXactError::Missing { .. })
        ));
        assert!(matches!(
            mx.members(1),
            Err(MultiXactError::Missing { next: 1, .. })
        ));
        assert!(matches!(
            mx.reserve(REL_T, 1),
            Err(MultiXactError::BadCount { count: 1, .. })
        ));
        assert!(matches!(
            mx.reserve(REL_T, mx.max_members() + 1),
            Err(MultiXactError::BadCount { .. })
        ));
        // Reserved but not written (its record never made it): missing, not empty.
        let (m, _) = mx.reserve(REL_T, 2).unwrap();
        assert!(matches!(mx.members(m), Err(MultiXactError::Missing { .. })));
    }

    #[test]
    fn replay_writes_idempotently_and_raises_positions() {
        let vfs = MemVfs::new();
        let mx = open(&vfs, 16, MultiPositions::default());
        let ms = members_of(1, 3);
        // As recovery would: an entry far ahead on pages never zeroed in this life.
        mx.write(5000, 90_000, &ms).unwrap();
        mx.write(5000, 90_000, &ms).unwrap();
        mx.observe(5000, 90_000, 3);
        assert_eq!(
            mx.positions(),
            MultiPositions {
                next_multi: 5001,
                next_member: 90_003,
                oldest_multi: FIRST_MULTI,
            }
        );
        assert_eq!(mx.members(5000).unwrap(), ms);
    }

    #[test]
    fn a_run_that_would_straddle_starts_the_next_page() {
        let vfs = MemVfs::new();
        let mpp = {
            let mx = open(&vfs, 16, MultiPositions::default());
            mx.max_members() as u32
        };
        let mx = open(
            &vfs,
            16,
            MultiPositions {
                next_multi: 10,
                next_member: mpp - 1,
                oldest_multi: FIRST_MULTI,
            },
        );
        let (m, start) = mx.reserve(REL_T, 3).unwrap();
        assert_eq!((m, start), (10, mpp));
        mx.write(m, start, &members_of(0, 3)).unwrap();
        assert_eq!(mx.members(m).unwrap(), members_of(0, 3));
        assert_eq!(mx.positions().next_member, mpp + 3);
    }

    #[test]
    fn bounds_decide_the_cut_and_truncation_removes_whole_segments() {
        let vfs = MemVfs::new();
        let mx = open(&vfs, 16, MultiPositions::default());
        let (a, b) = (RelFileId::new(0, 1), RelFileId::new(0, 2));
        assert_eq!(mx.oldest_needed(), FIRST_MULTI);
        // Enough multis for several offsets segments.
        let per_segment = mx.per_page as u32 * 32;
        let total = per_segment * 3 + 10;
        for k in 0..total {
            let (m, start) = mx.reserve(if k % 2 == 0 { a } else { b }, 2).unwrap();
            mx.write(m, start, &members_of(k, 2)).unwrap();
        }
        assert_eq!(
            mx.oldest_needed(),
            1,
            "both relations hold their first multis"
        );
        // VACUUM of `a` leaves nothing; `b` keeps one near the end.
        let next = mx.positions().next_multi;
        mx.set_rel_bound(a, next);
        mx.set_rel_bound(b, total - 5);
        assert_eq!(mx.oldest_needed(), total - 5);
        mx.flush().unwrap();
        let removed = mx.truncate(mx.oldest_needed()).unwrap();
        assert!(removed >= 3, "removed {removed} segments");
        assert!(matches!(
            mx.members(3),
            Err(MultiXactError::Truncated { multi: 3, .. })
        ));
        for m in total - 5..next {
            assert_eq!(mx.members(m).unwrap(), members_of(m - 1, 2));
        }
        // A second cut at the same place does nothing.
        assert_eq!(mx.truncate(total - 5).unwrap(), 0);
        // Reopened from what a control file would hold.
        let pos = mx.positions();
        let bounds = mx.rel_bounds();
        drop(mx);
        let again = open(&vfs, 16, MultiPositions::default());
        again.restore(pos, &bounds);
        assert_eq!(again.oldest_needed(), total - 5);
        assert_eq!(again.members(total).unwrap(), members_of(total - 1, 2));
        assert!(matches!(
            again.members(1),
            Err(MultiXactError::Truncated { .. })
        ));
    }
}
