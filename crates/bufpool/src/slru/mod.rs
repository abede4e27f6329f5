//! SLRU: a small cache of the pages of a flat, append-mostly file, such as the commit log
//! (2 bits of status per transaction id), divided into banks (PostgreSQL 17's banked SLRU).
//!
//! Owns: the banks (`bank.rs`: slots of at most [`BANK_SIZE`] pages, a lock, an LRU
//! counter and page states each), the files (`segment.rs`: segment files
//! `<dir>/<name>/<segno as 4+ hex digits>` of `PAGES_PER_SEGMENT` pages each, the
//! doublewrite file `<dir>/<name>/doublewrite`, the latched failure), the latest-page
//! marker (an atomic), the write barrier, and in the designs that keep them the central
//! lock and the global LRU counter.
//!
//! Banks: page `p` lives in bank `p % nbanks` (a modulo, not a mask: PostgreSQL 17.0 masked
//! with `nbanks - 1` and left banks unused unless their count was a power of two); lookup
//! and victim search stay inside the bank. [`SlruDesign`] switches, on the same code path,
//! between the full design (a lock and an LRU counter per bank), the first banked
//! proposal's "SlruBank" (banks searched alone, but one central lock taken before the bank's and one global LRU
//! counter) and the 2023 design (one bank holding every slot: one lock, one counter, a
//! linear search over all slots).
//!
//! Checksums: every page ends with an 8-byte trailer: CRC32C of the page body, the SLRU's
//! name and the page number (a page written to the wrong place fails too), verified on
//! every read; an all-zero page (never written) is valid. A page that is not on disk reads
//! as zeros (the caller extends first; recovery may set statuses on pages a crash did not
//! let reach disk).
//!
//! Torn pages: pages are rewritten in place and a power cut can tear a write (old and new
//! sectors mixed) or leave sectors of garbage, destroying statuses the WAL can no longer
//! give back (those decided before the last checkpoint's redo point). So pages leave
//! memory in *rounds*, InnoDB's doublewrite: (1) the owner's write barrier (the WAL is
//! durable past every status in the pages); (2) every page of the round, with a header
//! listing their numbers and checksums, is written to the doublewrite file, which is
//! fsynced; (3) the pages are written in place and their segments fsynced; (4) the header
//! is marked done. `open` repairs: a doublewrite file holding a valid round not marked done
//! (a crash or a failure struck between (2) and (4)) is written in place again and synced
//! before anything is read. A torn in-place page therefore always has an intact copy, and
//! a torn doublewrite copy means the in-place pages were not touched yet. See
//! docs/ARCHITECTURE.md (SLRU) for why per-sector checksums or zeroing from the WAL would
//! not be enough.
//! One SLRU is exempt: the subtransaction log's pages matter only while the engine runs
//! (its owner drops them when it opens it), so [`Slru::not_durable`] writes its pages in
//! place only, with no copy and no fsync (PostgreSQL never fsyncs pg_subtrans either).
//!
//! Invariants: a page number is in at most one slot, of its bank; a dirty page is written
//! before its slot is reused; replacement takes the least recently used slot of the bank
//! that is not in I/O and does not hold the latest page; no page is written before the
//! owner's write barrier (if set) returned Ok; no page of a durable SLRU is written in
//! place unless its current image is durable in the doublewrite file, and the doublewrite file is not
//! overwritten before the previous round's pages are durable in place; `flush` returns
//! only once every page dirty at its start is durable (it waits for writes other threads
//! have in progress). A failed fsync (of a segment, the doublewrite file or the directory)
//! or a failed in-place write is latched: every later write and flush reports it until the
//! SLRU is reopened (which repairs from the doublewrite copy), so the owner's checkpoint
//! cannot complete and release the WAL that would rebuild the pages.
//!
//! Locks, in order: the central lock (design `banks` only), a bank's lock, a slot's I/O
//! lock, then the file layer's locks (`segment.rs`: round, files, latched). No bank lock is
//! held across page I/O, the write barrier or the file layer: a slot in I/O is marked
//! (`ReadInProgress`, `WriteInProgress`) and its I/O lock held instead, so other pages of
//! the bank stay usable. What the one mutex of the first SLRU also protected now has its
//! own place: the write barrier and the doublewrite file (the round lock), the open
//! segments (the files lock), the latched failure (its own lock), the latest page (an
//! atomic), the counters (atomics per bank and in the file layer).

mod bank;
mod segment;

use std::path::{Path, PathBuf};

use crate::sync::{
    Arc, AtomicU64, MutexGuard, Ordering, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
use crate::vfs::{IoError, Vfs};
use crate::waits::{lock_timed_slru, timed_slru, SlruKind, Wait::SlruIo};

use bank::{Bank, BankInner, Victim};
pub use bank::{PageState, BANK_SIZE};
pub use segment::DOUBLEWRITE_FILE;
use segment::{Segments, DW_ENTRY, DW_FIXED};

/// Pages per segment file: PostgreSQL's SLRU_PAGES_PER_SEGMENT.
pub const PAGES_PER_SEGMENT: u64 = 32;
/// Bytes at the end of each page that hold its checksum (4) and reserved zeros (4).
pub const TRAILER_SIZE: usize = 8;

/// An SLRU error; each names the page and the file or directory where there is one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SlruError {
    /// An OS error from a file operation (opening, reading, creating, removing, ...).
    #[error(transparent)]
    Io(#[from] IoError),
    /// A page read from disk whose checksum does not match its contents.
    #[error("page {pageno} of {path}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    Corrupt {
        /// The page number.
        pageno: u64,
        /// The segment file's path.
        path: PathBuf,
        /// The checksum stored in the page's trailer.
        stored: u32,
        /// The checksum computed from the page as read.
        computed: u32,
    },
    /// The owner's write barrier failed, so the pages were not written.
    #[error("page {pageno} of {path}: the write barrier failed: {source}")]
    Barrier {
        /// The first of the pages about to be written.
        pageno: u64,
        /// The SLRU's directory.
        path: PathBuf,
        /// The owner's error.
        source: BarrierError,
    },
    /// A read returned part of a page.
    #[error("page {pageno} of {path}: short transfer ({got} of {want} bytes)")]
    Short {
        /// The page number.
        pageno: u64,
        /// The segment file's path.
        path: PathBuf,
        /// Bytes read.
        got: usize,
        /// Bytes wanted: the page size.
        want: usize,
    },
    /// A failed fsync, or a failed write in place: latched, so this and every later write
    /// and flush fail (the kernel may have dropped the written pages and marked them clean;
    /// a retry's success would be a lie).
    #[error("{0}; latched: every later flush fails until the data directory is reopened and recovery replays the statuses from the WAL")]
    Fsync(IoError),
    /// A write or flush after a latched failure.
    #[error("an earlier failure is latched ({0}); durability can no longer be promised: reopen the data directory to recover")]
    Latched(IoError),
}

impl SlruError {
    /// The OS error number behind this error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            SlruError::Io(e) | SlruError::Fsync(e) | SlruError::Latched(e) => e.raw_os_error(),
            // The owner's error is opaque here: the OS error is in its source chain.
            SlruError::Barrier { source, .. } => crate::vfs::os_error_in(&**source),
            _ => None,
        }
    }
}

/// Counters of one SLRU, PostgreSQL's pg_stat_slru plus the doublewrite's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlruStats {
    /// Pages made all-zero by `zero_page` (pg_stat_slru's blks_zeroed).
    pub zeroed: u64,
    /// Lookups that found their page in memory (blks_hit).
    pub hits: u64,
    /// Pages read from a segment file (blks_read).
    pub reads: u64,
    /// Pages written in place (blks_written).
    pub writes: u64,
    /// Pages checked for existence on disk (blks_exists).
    pub exists: u64,
    /// Calls of `flush` (flushes).
    pub flushes: u64,
    /// Calls of `truncate` (truncates).
    pub truncates: u64,
    /// Doublewrite rounds (each: copy, fsync, pages in place, fsync).
    pub rounds: u64,
    /// Pages rewritten from the doublewrite copy when the SLRU was opened.
    pub repaired: u64,
}

/// How the SLRU's slots are searched and locked (knob `slru_design`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SlruDesign {
    /// The 2023 design: one lock, one LRU counter, linear search over every slot.
    Central,
    /// Slots searched per bank, but one central lock and one global LRU counter (the
    /// first step of the banked SLRU's patch series, before its per-bank locks).
    Banks,
    /// A lock and an LRU counter per bank (PostgreSQL 17).
    #[default]
    BanksLocksLru,
}

impl SlruDesign {
    /// Every design.
    pub const ALL: [SlruDesign; 3] = [
        SlruDesign::Central,
        SlruDesign::Banks,
        SlruDesign::BanksLocksLru,
    ];

    /// The knob's word for this design.
    pub fn name(self) -> &'static str {
        match self {
            SlruDesign::Central => "central",
            SlruDesign::Banks => "banks",
            SlruDesign::BanksLocksLru => "banks_locks_lru",
        }
    }
}

/// The shape of one SLRU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlruOptions {
    /// Page slots (at least 2). Split into `buffers.div_ceil(BANK_SIZE)` banks as evenly
    /// as possible; the configuration keeps it a multiple of [`BANK_SIZE`].
    pub buffers: usize,
    /// How the slots are searched and locked.
    pub design: SlruDesign,
}

/// The sizes and design of every SLRU, as the configuration builds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlruSet {
    /// The design of every SLRU (`slru_design`).
    pub design: SlruDesign,
    /// Page slots of the commit log (`transaction_buffers`).
    pub transaction_buffers: usize,
    /// Page slots of the subtransaction log (`subtransaction_buffers`).
    pub subtransaction_buffers: usize,
    /// Page slots of the multixact offsets SLRU (`multixact_offset_buffers`).
    pub multixact_offset_buffers: usize,
    /// Page slots of the multixact members SLRU (`multixact_member_buffers`).
    pub multixact_member_buffers: usize,
}

impl SlruSet {
    /// The commit log's options.
    pub fn transaction(&self) -> SlruOptions {
        self.options(self.transaction_buffers)
    }
    /// The subtransaction log's options.
    pub fn subtransaction(&self) -> SlruOptions {
        self.options(self.subtransaction_buffers)
    }
    /// The multixact offsets SLRU's options.
    pub fn multixact_offset(&self) -> SlruOptions {
        self.options(self.multixact_offset_buffers)
    }
    /// The multixact members SLRU's options.
    pub fn multixact_member(&self) -> SlruOptions {
        self.options(self.multixact_member_buffers)
    }
    fn options(&self, buffers: usize) -> SlruOptions {
        SlruOptions {
            buffers,
            design: self.design,
        }
    }
}

/// Called before any page is written: the owner makes sure whatever the page records is
/// backed by durable WAL (the commit log flushes the WAL to its insert position).
pub type WriteBarrier = Box<dyn Fn() -> Result<(), BarrierError> + Send + Sync>;

/// The error a [`WriteBarrier`] returns: the owner's typed error (the log's), boxed.
pub type BarrierError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A bank's lock held shared, with the central lock in design `banks`. Fields drop in
/// order: central first.
struct Shared<'a> {
    _central: Option<RwLockReadGuard<'a, ()>>,
    bank: RwLockReadGuard<'a, BankInner>,
}

/// A bank's lock held exclusively, with the central lock in design `banks`.
struct Excl<'a> {
    _central: Option<RwLockWriteGuard<'a, ()>>,
    bank: RwLockWriteGuard<'a, BankInner>,
}

/// Cache-line padding for the global LRU counter.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded(AtomicU64);

/// A banked SLRU over files in one directory.
pub struct Slru {
    barrier: std::sync::OnceLock<WriteBarrier>,
    /// Test hooks (`HookPoint::SlruRound`).
    probe: crate::hooks::Probe,
    files: Segments,
    page_size: usize,
    /// Which SLRU this is, for the waits booked to it (by its name).
    kind: SlruKind,
    design: SlruDesign,
    banks: Vec<Bank>,
    /// Design `banks`: taken before a bank's lock, in the same mode.
    central: RwLock<()>,
    /// Designs `central` and `banks`: the one LRU counter.
    global_lru: Padded,
    /// The newest page made by `zero_page`: never evicted (PostgreSQL's
    /// latest_page_number, an atomic since 17).
    latest: Padded,
    flushes: AtomicU64,
}

impl std::fmt::Debug for Slru {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slru")
            .field("dir", &self.files.dir())
            .field("page_size", &self.page_size)
            .field("design", &self.design)
            .field("banks", &self.banks.len())
            .finish_non_exhaustive()
    }
}

impl Slru {
    /// Opens (creating the directory) the SLRU `name` under `parent` with `nslots` slots in
    /// the default design; see [`Slru::open_with`].
    pub fn open(
        vfs: Arc<dyn Vfs>,
        parent: &Path,
        name: &str,
        nslots: usize,
        page_size: usize,
    ) -> Result<Slru, SlruError> {
        let opts = SlruOptions {
            buffers: nslots,
            design: SlruDesign::default(),
        };
        Slru::open_with(vfs, parent, name, page_size, opts)
    }

    /// Opens (creating the directory) the SLRU `name` under `parent`, first repairing the
    /// pages of a doublewrite round that a crash or a failure interrupted.
    pub fn open_with(
        vfs: Arc<dyn Vfs>,
        parent: &Path,
        name: &str,
        page_size: usize,
        opts: SlruOptions,
    ) -> Result<Slru, SlruError> {
        let nslots = opts.buffers;
        assert!(nslots >= 2, "an SLRU needs at least two slots");
        assert!(
            page_size >= DW_FIXED + DW_ENTRY + 4,
            "an SLRU page must hold a doublewrite header"
        );
        let nbanks = match opts.design {
            SlruDesign::Central => 1,
            _ => nslots.div_ceil(BANK_SIZE).min(nslots / 2),
        };
        // As even as possible: the first `nslots % nbanks` banks get one slot more.
        let banks = (0..nbanks)
            .map(|b| {
                Bank::new(
                    nslots / nbanks + usize::from(b < nslots % nbanks),
                    page_size,
                )
            })
            .collect();
        let files = Segments::new(vfs, parent.join(name), name, page_size)?;
        files.repair()?;
        Ok(Slru {
            barrier: std::sync::OnceLock::new(),
            probe: Default::default(),
            files,
            page_size,
            kind: SlruKind::of_name(name),
            design: opts.design,
            banks,
            central: RwLock::new(()),
            global_lru: Padded::default(),
            latest: Padded(AtomicU64::new(u64::MAX)),
            flushes: AtomicU64::new(0),
        })
    }

    /// Installs the engine's test-hook forwarder (see `hooks.rs`).
    pub(crate) fn install_probe(&self, forward: crate::hooks::Forward) {
        self.probe.install(forward);
    }

    /// Installs the write barrier (once).
    pub fn set_write_barrier(&self, barrier: WriteBarrier) {
        let _ = self.barrier.set(barrier);
    }

    /// Bytes of each page available to the caller (the rest is the trailer).
    pub fn usable(&self) -> usize {
        self.page_size - TRAILER_SIZE
    }

    /// Banks (1 in design `central`).
    pub fn nbanks(&self) -> usize {
        self.banks.len()
    }

    /// Page slots in all banks.
    pub fn nslots(&self) -> usize {
        self.banks.iter().map(Bank::nslots).sum()
    }

    /// The design the SLRU was opened with.
    pub fn design(&self) -> SlruDesign {
        self.design
    }

    /// The bank page `pageno` lives in.
    pub fn bank_of(&self, pageno: u64) -> usize {
        (pageno % self.banks.len() as u64) as usize
    }

    /// Pages resident (in any state but empty) per bank: the proof that every bank is used.
    pub fn resident_per_bank(&self) -> Vec<usize> {
        (0..self.banks.len())
            .map(|b| {
                let g = self.shared(b);
                crate::invariants::debug_check(|| g.bank.check_invariants());
                g.bank
                    .slots
                    .iter()
                    .filter(|s| s.state != PageState::Empty)
                    .count()
            })
            .collect()
    }

    /// The SLRU's counters: the banks' summed, plus the file layer's.
    pub fn stats(&self) -> SlruStats {
        let c = &self.files.counters;
        let sum = |f: fn(&Bank) -> &AtomicU64| {
            self.banks
                .iter()
                .map(|b| f(b).load(Ordering::Relaxed))
                .sum()
        };
        SlruStats {
            zeroed: sum(|b| &b.zeroed),
            hits: sum(|b| &b.hits),
            reads: sum(|b| &b.reads),
            writes: c.writes.load(Ordering::Relaxed),
            exists: c.exists.load(Ordering::Relaxed),
            flushes: self.flushes.load(Ordering::Relaxed),
            truncates: c.truncates.load(Ordering::Relaxed),
            rounds: c.rounds.load(Ordering::Relaxed),
            repaired: c.repaired.load(Ordering::Relaxed),
        }
    }

    /// Path of segment file `segno`.
    pub fn segment_path(&self, segno: u64) -> PathBuf {
        self.files.segment_path(segno)
    }

    /// Makes this SLRU write its pages in place only, without the doublewrite copy or any
    /// fsync, at evictions and flushes alike: for an owner that discards the pages when it
    /// opens the SLRU (the subtransaction log: PostgreSQL's pg_subtrans is never fsynced
    /// either). Call before sharing the SLRU.
    pub fn not_durable(mut self) -> Slru {
        self.files.not_durable();
        self
    }

    /// Path of the doublewrite file.
    pub fn doublewrite_path(&self) -> PathBuf {
        self.files.doublewrite_path()
    }

    #[cfg(test)]
    fn max_round(&self) -> usize {
        self.files.max_round()
    }

    /// The LRU counter in force for bank `b`.
    fn counter(&self, b: usize) -> &AtomicU64 {
        match self.design {
            SlruDesign::BanksLocksLru => &self.banks[b].counter,
            SlruDesign::Central | SlruDesign::Banks => &self.global_lru.0,
        }
    }

    /// The bank's lock held shared (and the central lock, in its design); a lock another
    /// thread holds is waited for as [`Wait::SlruLock`](crate::waits::Wait::SlruLock),
    /// booked to this SLRU's kind.
    fn shared(&self, b: usize) -> Shared<'_> {
        let central = (self.design == SlruDesign::Banks).then(|| {
            lock_timed_slru(
                self.kind,
                || self.central.try_read(),
                || self.central.read(),
            )
        });
        let l = &self.banks[b].lock;
        Shared {
            _central: central,
            bank: lock_timed_slru(self.kind, || l.try_read(), || l.read()),
        }
    }

    /// As [`Self::shared`], exclusively.
    fn exclusive(&self, b: usize) -> Excl<'_> {
        let central = (self.design == SlruDesign::Banks).then(|| {
            lock_timed_slru(
                self.kind,
                || self.central.try_write(),
                || self.central.write(),
            )
        });
        let l = &self.banks[b].lock;
        Excl {
            _central: central,
            bank: lock_timed_slru(self.kind, || l.try_write(), || l.write()),
        }
    }

    /// Waits for the I/O on slot `s` of bank `b` to end (PostgreSQL's SimpleLruWaitIO).
    /// Bank lock held exclusively at entry and exit; let go in between.
    fn wait_io<'a>(&'a self, b: usize, s: usize, g: Excl<'a>) -> Excl<'a> {
        drop(g);
        timed_slru(SlruIo, self.kind, || drop(self.banks[b].io[s].lock()));
        self.exclusive(b)
    }

    /// Runs the write barrier, then writes `pages` in doublewrite rounds. No lock held.
    fn write_out(&self, pages: &mut [(u64, Vec<u8>)]) -> Result<(), SlruError> {
        self.files.check_latched()?;
        if let Some(first) = pages.first() {
            self.probe.fire(crate::hooks::HookPoint::SlruRound, first.0);
        }
        if let (Some(barrier), Some(first)) = (self.barrier.get(), pages.first()) {
            barrier().map_err(|source| SlruError::Barrier {
                pageno: first.0,
                path: self.files.dir().to_path_buf(),
                source,
            })?;
        }
        self.files.write_pages(pages)
    }

    /// Writes the dirty page of slot `s` (Valid) of bank `b`: WriteInProgress, a copy, the
    /// I/O without the bank lock, Valid again (dirty again on failure). Bank lock held
    /// exclusively at entry and (on success) at exit.
    fn write_slot<'a>(
        &'a self,
        b: usize,
        s: usize,
        mut g: Excl<'a>,
    ) -> Result<Excl<'a>, SlruError> {
        let ps = self.page_size;
        let slot = &mut g.bank.slots[s];
        debug_assert!(slot.state == PageState::Valid && slot.dirty);
        slot.state = PageState::WriteInProgress;
        slot.dirty = false;
        let pageno = slot.pageno;
        let mut pages = [(pageno, g.bank.page(s, ps).to_vec())];
        let io = self.banks[b].io[s].lock();
        drop(g);
        let r = timed_slru(SlruIo, self.kind, || self.write_out(&mut pages));
        let mut g = self.exclusive(b);
        g.bank.slots[s].state = PageState::Valid;
        if r.is_err() {
            g.bank.slots[s].dirty = true;
        }
        drop(io);
        r.map(|()| g)
    }

    /// The slot of bank `b` holding `pageno` (Valid or WriteInProgress), reading it in or,
    /// with `zero`, making it all zeros (dirty). Bank lock held exclusively at entry and (on
    /// success) at exit; let go during I/O.
    fn slot_for<'a>(
        &'a self,
        b: usize,
        mut g: Excl<'a>,
        pageno: u64,
        zero: bool,
    ) -> Result<(Excl<'a>, usize), SlruError> {
        let bank = &self.banks[b];
        let ps = self.page_size;
        loop {
            let hint = bank.last_hit.load(Ordering::Relaxed);
            if let Some(s) = g.bank.lookup(pageno, hint) {
                if g.bank.slots[s].state == PageState::ReadInProgress {
                    g = self.wait_io(b, s, g);
                    continue;
                }
                bank.used(s, self.counter(b));
                if zero {
                    g.bank.page_mut(s, ps).fill(0);
                    g.bank.slots[s].dirty = true;
                    bank.zeroed.fetch_add(1, Ordering::Relaxed);
                } else {
                    bank.hits.fetch_add(1, Ordering::Relaxed);
                }
                return Ok((g, s));
            }
            let s = match bank.victim(&g.bank, self.latest.0.load(Ordering::Relaxed)) {
                Victim::Free(s) => s,
                Victim::Dirty(s) => {
                    g = self.write_slot(b, s, g)?;
                    continue;
                }
                Victim::Busy(s) => {
                    g = self.wait_io(b, s, g);
                    continue;
                }
            };
            if zero {
                g.bank.slots[s] = bank::SlotMeta {
                    pageno,
                    state: PageState::Valid,
                    dirty: true,
                };
                g.bank.page_mut(s, ps).fill(0);
                bank.used(s, self.counter(b));
                bank.zeroed.fetch_add(1, Ordering::Relaxed);
                return Ok((g, s));
            }
            g.bank.slots[s] = bank::SlotMeta {
                pageno,
                state: PageState::ReadInProgress,
                dirty: false,
            };
            let io = bank.io[s].lock();
            drop(g);
            let mut page = vec![0u8; ps];
            let r = timed_slru(SlruIo, self.kind, || {
                self.files.read_page(pageno, &mut page)
            });
            let mut g = self.exclusive(b);
            match r {
                Ok(read) => {
                    g.bank.page_mut(s, ps).copy_from_slice(&page);
                    g.bank.slots[s].state = PageState::Valid;
                    drop(io);
                    if read {
                        bank.reads.fetch_add(1, Ordering::Relaxed);
                    }
                    bank.used(s, self.counter(b));
                    return Ok((g, s));
                }
                Err(e) => {
                    g.bank.slots[s].state = PageState::Empty;
                    drop(io);
                    return Err(e);
                }
            }
        }
    }

    /// Runs `f` on the usable bytes of page `pageno`. A resident page is read under its
    /// bank's lock held shared (PostgreSQL's SimpleLruReadPage_ReadOnly).
    pub fn read<R>(&self, pageno: u64, f: impl FnOnce(&[u8]) -> R) -> Result<R, SlruError> {
        let b = self.bank_of(pageno);
        let bank = &self.banks[b];
        let ps = self.page_size;
        {
            let g = self.shared(b);
            if let Some(s) = g.bank.lookup(pageno, bank.last_hit.load(Ordering::Relaxed)) {
                if g.bank.slots[s].state != PageState::ReadInProgress {
                    bank.used(s, self.counter(b));
                    bank.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(f(&g.bank.page(s, ps)[..ps - TRAILER_SIZE]));
                }
            }
        }
        let (g, s) = self.slot_for(b, self.exclusive(b), pageno, false)?;
        Ok(f(&g.bank.page(s, ps)[..ps - TRAILER_SIZE]))
    }

    /// Runs `f` on the usable bytes of page `pageno`, mutably; the page becomes dirty.
    pub fn write<R>(&self, pageno: u64, f: impl FnOnce(&mut [u8]) -> R) -> Result<R, SlruError> {
        let b = self.bank_of(pageno);
        let ps = self.page_size;
        let (mut g, s) = self.slot_for(b, self.exclusive(b), pageno, false)?;
        g.bank.slots[s].dirty = true;
        Ok(f(&mut g.bank.page_mut(s, ps)[..ps - TRAILER_SIZE]))
    }

    /// [`Self::write`] if the page's bank lock (and the central lock of `banks`) is free
    /// now; None, without waiting, if another thread holds it.
    pub fn try_write<R>(
        &self,
        pageno: u64,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>, SlruError> {
        let b = self.bank_of(pageno);
        let central = match self.design {
            SlruDesign::Banks => match self.central.try_write() {
                Some(c) => Some(c),
                None => return Ok(None),
            },
            SlruDesign::Central | SlruDesign::BanksLocksLru => None,
        };
        let Some(bank) = self.banks[b].lock.try_write() else {
            return Ok(None);
        };
        let g = Excl {
            _central: central,
            bank,
        };
        let ps = self.page_size;
        let (mut g, s) = self.slot_for(b, g, pageno, false)?;
        g.bank.slots[s].dirty = true;
        Ok(Some(f(&mut g.bank.page_mut(s, ps)[..ps - TRAILER_SIZE])))
    }

    /// Makes page `pageno` an all-zero page (dirty), without reading it, and the latest
    /// page (never evicted until a newer one is made).
    pub fn zero_page(&self, pageno: u64) -> Result<(), SlruError> {
        let b = self.bank_of(pageno);
        self.latest.0.store(pageno, Ordering::Relaxed);
        self.slot_for(b, self.exclusive(b), pageno, true)?;
        Ok(())
    }

    /// Whether page `pageno` is on disk (PostgreSQL's SimpleLruDoesPhysicalPageExist;
    /// counted as `exists`). A page only in memory is not.
    pub fn page_exists(&self, pageno: u64) -> Result<bool, SlruError> {
        self.files.page_exists(pageno)
    }

    /// Writes every dirty page, durably (doublewrite rounds, each ending with the fsync of
    /// the segments it wrote), and waits for writes other threads have in progress. Returns
    /// pages written. A failed fsync is latched: this call and every later one fail, until
    /// the SLRU is reopened (and recovery replays what the lost writes held).
    pub fn flush(&self) -> Result<usize, SlruError> {
        self.files.check_latched()?;
        let ps = self.page_size;
        let mut total = 0;
        loop {
            let mut pages = Vec::new();
            let mut mine: Vec<(usize, usize, MutexGuard<'_, ()>)> = Vec::new();
            let mut others = Vec::new();
            for b in 0..self.banks.len() {
                let mut g = self.exclusive(b);
                for s in 0..g.bank.slots.len() {
                    let slot = g.bank.slots[s];
                    match slot.state {
                        PageState::Valid if slot.dirty => {
                            g.bank.slots[s].state = PageState::WriteInProgress;
                            g.bank.slots[s].dirty = false;
                            pages.push((slot.pageno, g.bank.page(s, ps).to_vec()));
                            mine.push((b, s, self.banks[b].io[s].lock()));
                        }
                        PageState::WriteInProgress => others.push((b, s)),
                        _ => {}
                    }
                }
            }
            let r = timed_slru(SlruIo, self.kind, || self.write_out(&mut pages));
            for (b, s, io) in mine {
                let mut g = self.exclusive(b);
                g.bank.slots[s].state = PageState::Valid;
                if r.is_err() {
                    g.bank.slots[s].dirty = true;
                }
                drop(io);
            }
            r?;
            total += pages.len();
            if others.is_empty() {
                break;
            }
            // Another thread's write (an eviction) was in progress: wait for it, then look
            // again (it may have failed and left its page dirty).
            for (b, s) in others {
                drop(self.wait_io(b, s, self.exclusive(b)));
            }
        }
        self.flushes.fetch_add(1, Ordering::Relaxed);
        Ok(total)
    }

    /// Removes every whole segment before the one holding `pageno` (and forgets their
    /// cached pages, waiting for any I/O on them). Returns segments removed. The caller
    /// does not truncate concurrently (PostgreSQL's SimpleLruTruncate rule).
    pub fn truncate(&self, pageno: u64) -> Result<usize, SlruError> {
        let keep = pageno / PAGES_PER_SEGMENT;
        for b in 0..self.banks.len() {
            let mut g = self.exclusive(b);
            loop {
                let old = |m: &bank::SlotMeta| {
                    m.state != PageState::Empty && m.pageno / PAGES_PER_SEGMENT < keep
                };
                let busy = (0..g.bank.slots.len()).find(|&s| {
                    old(&g.bank.slots[s])
                        && matches!(
                            g.bank.slots[s].state,
                            PageState::ReadInProgress | PageState::WriteInProgress
                        )
                });
                if let Some(s) = busy {
                    g = self.wait_io(b, s, g);
                    continue;
                }
                for m in g.bank.slots.iter_mut().filter(|m| old(m)) {
                    m.state = PageState::Empty;
                    m.dirty = false;
                }
                break;
            }
        }
        self.files.remove_before(keep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::MemVfs;

    fn slru(vfs: &MemVfs, nslots: usize) -> Slru {
        Slru::open(
            Arc::new(vfs.clone()),
            Path::new("/db"),
            "test",
            nslots,
            4096,
        )
        .unwrap()
    }

    #[test]
    fn pages_survive_eviction_flush_and_reopen() {
        let vfs = MemVfs::new();
        let s = slru(&vfs, 3);
        for p in 0..70u64 {
            s.zero_page(p).unwrap();
            s.write(p, |b| b[..8].copy_from_slice(&p.to_le_bytes()))
                .unwrap();
        }
        // 70 pages through 3 slots: most were written on eviction.
        assert!(s.stats().writes >= 67);
        for p in (0..70u64).rev() {
            assert_eq!(
                s.read(p, |b| u64::from_le_bytes(b[..8].try_into().unwrap()))
                    .unwrap(),
                p
            );
        }
        s.flush().unwrap();
        drop(s);
        let s = slru(&vfs, 3);
        assert_eq!(s.read(69, |b| b[0]).unwrap(), 69);
        assert!(
            s.read(1000, |b| b.iter().all(|&x| x == 0)).unwrap(),
            "missing pages read as zeros"
        );
        assert_eq!(s.segment_path(2), Path::new("/db/test/0002"));
        assert!(
            vfs.contents(&s.segment_path(2)).is_some(),
            "70 pages span 3 segments"
        );
    }

    /// Proves: an SLRU page read from storage, and the write of a dirty victim, are booked
    /// as `slru_io` waits of the thread that did them; a resident page costs no wait.
    /// How: this thread's wait totals before and after each step.
    #[test]
    fn slru_io_is_booked_to_the_reading_thread() {
        use crate::waits::{current, Wait};
        let vfs = MemVfs::new();
        let s = slru(&vfs, 3);
        for p in 0..6u64 {
            s.zero_page(p).unwrap();
        }
        s.flush().unwrap();
        let before = current();
        s.read(5, |b| b[0]).unwrap();
        let hit = current().since(&before);
        assert_eq!(hit.count[Wait::SlruIo as usize], 0, "{hit:?}");
        assert_eq!(hit.count[Wait::SlruLock as usize], 0, "{hit:?}");
        // Page 0 was evicted: reading it back is a read from storage.
        let before = current();
        s.read(0, |b| b[0]).unwrap();
        let miss = current().since(&before);
        assert!(miss.count[Wait::SlruIo as usize] >= 1, "{miss:?}");
        // Dirty victims: each eviction writes one out.
        let before = current();
        for p in 6..12u64 {
            s.zero_page(p).unwrap();
        }
        let writes = current().since(&before);
        assert!(writes.count[Wait::SlruIo as usize] >= 3, "{writes:?}");
        assert_eq!(Wait::SlruIo.name(), "slru_io");
        assert_eq!(Wait::SlruLock.name(), "slru_lock");
    }

    /// Proves: SLRU waits are booked to the SLRU they were for (PostgreSQL's per-SLRU wait
    /// events), and the per-SLRU shares add up to the `slru_io` totals (lock waits:
    /// `waits.rs`'s test). How: misses in a `subtrans` SLRU and a `multixact_members` one,
    /// this thread's totals before and after.
    #[test]
    fn slru_waits_are_booked_to_their_slru() {
        use crate::waits::{current, SlruKind, Wait};
        let vfs = MemVfs::new();
        let open = |name| Slru::open(Arc::new(vfs.clone()), Path::new("/db"), name, 3, 4096);
        let (sub, mem) = (
            open("subtrans").unwrap(),
            open("multixact_members").unwrap(),
        );
        for s in [&sub, &mem] {
            for p in 0..6u64 {
                s.zero_page(p).unwrap();
            }
            s.flush().unwrap();
        }
        let before = current();
        sub.read(0, |b| b[0]).unwrap();
        sub.read(1, |b| b[0]).unwrap();
        mem.read(0, |b| b[0]).unwrap();
        let d = current().since(&before);
        let (s, m) = (
            d.slru[SlruKind::Subtrans as usize],
            d.slru[SlruKind::MultixactMembers as usize],
        );
        assert!(s.io_count >= 2 && m.io_count >= 1, "{d:?}");
        assert!(
            s.io_count > m.io_count,
            "subtrans read twice as many: {d:?}"
        );
        assert_eq!(d.slru[SlruKind::Xact as usize], Default::default(), "{d:?}");
        let io: u64 = d.slru.iter().map(|k| k.io_count).sum();
        assert_eq!(io, d.count[Wait::SlruIo as usize], "{d:?}");
        let io_ns: u64 = d.slru.iter().map(|k| k.io_ns).sum();
        assert_eq!(io_ns, d.ns_of(Wait::SlruIo), "{d:?}");

        assert_eq!(SlruKind::of_name("xact"), SlruKind::Xact);
        assert_eq!(SlruKind::of_name("notify"), SlruKind::Other);
        assert_eq!(SlruKind::MultixactOffsets.name(), "multixact_offsets");
    }

    /// A write barrier's failure reaches the writer typed: its OS error survives
    /// (`raw_os_error`), and no page is written past it. Before, the barrier returned
    /// text and the errno of a failed WAL flush was lost.
    #[test]
    fn a_failed_write_barrier_keeps_its_errno() {
        let vfs = MemVfs::new();
        let s = slru(&vfs, 3);
        s.set_write_barrier(Box::new(|| {
            Err(Box::new(std::io::Error::from_raw_os_error(libc::EIO)))
        }));
        s.zero_page(0).unwrap();
        let err = s.flush().unwrap_err();
        assert!(matches!(err, SlruError::Barrier { pageno: 0, .. }), "{err}");
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
        assert!(
            vfs.contents(&s.segment_path(0)).is_none(),
            "written past the barrier"
        );
    }

    #[test]
    fn damaged_page_is_reported_with_file_and_page() {
        let vfs = MemVfs::new();
        let s = slru(&vfs, 2);
        s.zero_page(5).unwrap();
        s.write(5, |b| b[10] = 1).unwrap();
        s.flush().unwrap();
        drop(s);
        let path = Path::new("/db/test/0000");
        let mut bytes = vfs.contents(path).unwrap();
        bytes[5 * 4096 + 100] ^= 0x20;
        vfs.set_contents(path, bytes);
        let s = slru(&vfs, 2);
        let err = s.read(5, |_| ()).unwrap_err().to_string();
        assert!(
            err.contains("page 5") && err.contains("/db/test/0000") && err.contains("checksum"),
            "{err}"
        );
    }

    /// A round whose in-place fsync failed is latched (later flushes and evictions fail),
    /// and reopening rewrites its pages from the doublewrite copy even when the pages in
    /// place were torn: old and new sectors mixed, one sector garbage. How: `FaultVfs`
    /// fails the segment's fsync; the test tears the page in the `MemVfs` and reopens.
    #[test]
    fn interrupted_round_is_latched_and_repaired_on_open() {
        use crate::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs};
        let vfs = MemVfs::new();
        let fault = FaultVfs::new(Arc::new(vfs.clone()));
        let s = Slru::open(Arc::new(fault.clone()), Path::new("/db"), "test", 2, 4096).unwrap();
        s.zero_page(0).unwrap();
        s.write(0, |b| b[..4000].fill(1)).unwrap();
        s.flush().unwrap();
        let seg = s.segment_path(0);
        let old = vfs.contents(&seg).unwrap();
        s.write(0, |b| b[..4000].fill(2)).unwrap();
        fault.add_rule(FaultRule::nth(
            "test/0000",
            FaultOp::Fsync,
            1,
            FaultKind::Eio,
        ));
        let err = s.flush().unwrap_err();
        assert!(matches!(err, SlruError::Fsync(_)), "{err}");
        assert_eq!(err.raw_os_error(), Some(libc::EIO));
        let again = s.flush().unwrap_err();
        assert!(matches!(again, SlruError::Latched(_)), "{again}");
        s.zero_page(1).unwrap(); // into the free slot
        let evict = s.zero_page(2).unwrap_err(); // the dirty victim cannot be written
        assert!(matches!(evict, SlruError::Latched(_)), "{evict}");
        drop(s);
        let new = vfs.contents(&seg).unwrap();
        assert_ne!(old, new);
        let mut torn = new.clone();
        torn[..512].copy_from_slice(&old[..512]); // old first sector, new others...
        torn[1024..1536].fill(0x5A); // ...and one sector of garbage
        vfs.set_contents(&seg, torn);
        let s = slru(&vfs, 2);
        assert_eq!(s.stats().repaired, 1);
        assert!(s.read(0, |b| b[..4000].iter().all(|&x| x == 2)).unwrap());
        assert_eq!(vfs.contents(&seg).unwrap(), new);
        drop(s);
        // The round is marked done: a second open repairs nothing.
        assert_eq!(slru(&vfs, 2).stats().repaired, 0);
    }

    /// A torn doublewrite copy means its round never reached the pages in place: reopening
    /// leaves them as they were (the last durable images). How: the copy's fsync fails
    /// (latched; nothing written in place), then one byte of the copy is damaged.
    #[test]
    fn torn_doublewrite_copy_leaves_the_pages_in_place_alone() {
        use crate::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs};
        let vfs = MemVfs::new();
        let fault = FaultVfs::new(Arc::new(vfs.clone()));
        let s = Slru::open(Arc::new(fault.clone()), Path::new("/db"), "test", 2, 4096).unwrap();
        s.zero_page(0).unwrap();
        s.write(0, |b| b[0] = 1).unwrap();
        s.flush().unwrap();
        let seg = s.segment_path(0);
        let old = vfs.contents(&seg).unwrap();
        s.write(0, |b| b[0] = 2).unwrap();
        fault.add_rule(FaultRule::nth(
            "doublewrite",
            FaultOp::Fsync,
            1,
            FaultKind::Eio,
        ));
        assert!(matches!(s.flush().unwrap_err(), SlruError::Fsync(_)));
        assert!(matches!(s.flush().unwrap_err(), SlruError::Latched(_)));
        assert_eq!(vfs.contents(&seg).unwrap(), old, "nothing written in place");
        let dw = s.doublewrite_path();
        drop(s);
        let mut copy = vfs.contents(&dw).unwrap();
        copy[4096 + 7] ^= 1;
        vfs.set_contents(&dw, copy);
        let s = slru(&vfs, 2);
        assert_eq!(s.stats().repaired, 0);
        assert_eq!(s.read(0, |b| b[0]).unwrap(), 1);
    }

    /// More dirty pages than one doublewrite header lists are written in several rounds.
    #[test]
    fn a_large_flush_takes_several_rounds() {
        let vfs = MemVfs::new();
        let s = slru(&vfs, 600);
        for p in 0..600u64 {
            s.zero_page(p).unwrap();
            s.write(p, |b| b[..8].copy_from_slice(&p.to_le_bytes()))
                .unwrap();
        }
        assert_eq!(s.flush().unwrap(), 600);
        let st = s.stats();
        assert_eq!(st.writes, 600);
        assert_eq!(st.rounds, 600u64.div_ceil(s.max_round() as u64));
        drop(s);
        let s = slru(&vfs, 3);
        for p in [0u64, 253, 254, 599] {
            assert_eq!(
                s.read(p, |b| u64::from_le_bytes(b[..8].try_into().unwrap()))
                    .unwrap(),
                p
            );
        }
    }

    /// A failed read-in puts its slot back to empty (no half-read page is ever served),
    /// reports the file and OS error, and a later read of the page reads it again.
    #[test]
    fn failed_read_in_leaves_the_slot_empty_and_can_be_retried() {
        use crate::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs};
        let vfs = MemVfs::new();
        let s = slru(&vfs, 2);
        for p in 0..3u64 {
            s.zero_page(p).unwrap();
            s.write(p, |b| b[0] = p as u8 + 1).unwrap();
        }
        s.flush().unwrap();
        drop(s);
        let fault = FaultVfs::new(Arc::new(vfs.clone()));
        let s = Slru::open(Arc::new(fault.clone()), Path::new("/db"), "test", 2, 4096).unwrap();
        fault.add_rule(FaultRule::nth(
            "test/0000",
            FaultOp::Read,
            1,
            FaultKind::Eio,
        ));
        let err = s.read(1, |b| b[0]).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO));
        assert!(err.to_string().contains("/db/test/0000"), "{err}");
        assert_eq!(s.resident_per_bank(), vec![0]);
        assert_eq!(s.read(1, |b| b[0]).unwrap(), 2);
        assert_eq!(s.read(2, |b| b[0]).unwrap(), 3);
        assert_eq!(s.stats().reads, 2);
    }

    #[test]
    fn truncate_removes_whole_old_segments() {
        let vfs = MemVfs::new();
        let s = slru(&vfs, 4);
        for p in 0..100u64 {
            s.zero_page(p).unwrap();
        }
        s.flush().unwrap();
        assert_eq!(s.truncate(70).unwrap(), 2); // segments 0 and 1 (pages 0..64)
        assert!(vfs.contents(&s.segment_path(1)).is_none());
        assert!(vfs.contents(&s.segment_path(2)).is_some());
        assert!(
            vfs.contents(&s.doublewrite_path()).is_some(),
            "the doublewrite file is not a segment"
        );
        // A file whose name only parses as hex ("+001" reads as 1) is not a segment.
        let stranger = s.segment_path(0).with_file_name("+001");
        let f = vfs
            .open(&stranger, crate::vfs::OpenOptions::create())
            .unwrap();
        f.write_at(b"not ours", 0).unwrap();
        drop(f);
        s.truncate(90).unwrap();
        assert!(vfs.contents(&stranger).is_some(), "truncate removed +001");
    }
}
