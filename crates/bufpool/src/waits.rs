//! Where a thread's time goes while it waits: wall-clock time spent blocked, summed per
//! kind of wait and per thread (PostgreSQL's wait events, summed instead of sampled).
//!
//! Owns: two thread-locals, the running totals ([`WaitTimes`]) and the "inside a timed
//! wait" flag. A caller snapshots [`current`] before and after a piece of work (a
//! transaction) and subtracts: the difference is what that work waited for, by kind.
//! Invariants: only slow paths are timed (a lock that was free, a page that was resident,
//! a WAL flush that had nothing to do cost nothing here); waits do not nest: a wait inside
//! a timed wait (the WAL flush a victim write forces, the mapping lock a read takes) counts
//! only in the outer one, so the kinds of one interval never add up to more than its wall
//! time. Locks: none; thread-locals only.

use std::cell::Cell;
use std::time::Instant;

/// A kind of wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wait {
    /// A row lock: waiting for the transaction holding the row to end (Lock/transactionid).
    RowLock = 0,
    /// A buffer's content lock held by another thread (LWLock/BufferContent).
    ContentLock = 1,
    /// A buffer-mapping partition lock (LWLock/BufferMapping).
    MappingLock = 2,
    /// The transaction table's lock (LWLock/ProcArray): begin, snapshot, commit.
    ProcLock = 3,
    /// Another thread's read or write of the buffer this thread wants (IPC/BufferIO).
    BufferIo = 4,
    /// This thread reading a page from storage (IO/DataFileRead).
    DataRead = 5,
    /// This thread writing a dirty victim to get a buffer, WAL flush included
    /// (IO/DataFileWrite).
    DataWrite = 6,
    /// Waiting for the WAL to be written and synced: a synchronous commit, or a full WAL
    /// ring (IO/WALSync).
    WalFlush = 7,
    /// An SLRU bank's lock (or the central lock of `slru_design = banks`) held by another
    /// thread (LWLock/XactSLRU, SubtransSLRU, MultiXactOffsetSLRU, ...).
    SlruLock = 8,
    /// An SLRU page's I/O: this thread reading or writing one, or waiting for another
    /// thread's read or write of the slot it wants (IO/SLRURead, IO/SLRUWrite and
    /// LWLock/XactBuffer, MultiXactOffsetBuffer, ...).
    SlruIo = 9,
    /// A replacement policy's miss-path lock held by another thread (`sieve`'s list);
    /// PostgreSQL's clock sweep has none (8.0's ARC and 2Q waited on BufFreelistLock).
    ReplacementLock = 10,
}

/// How many kinds there are.
pub(crate) const KINDS: usize = 11;

impl Wait {
    /// Every kind, in the order of their numbers.
    pub const ALL: [Wait; KINDS] = [
        Wait::RowLock,
        Wait::ContentLock,
        Wait::MappingLock,
        Wait::ProcLock,
        Wait::BufferIo,
        Wait::DataRead,
        Wait::DataWrite,
        Wait::WalFlush,
        Wait::SlruLock,
        Wait::SlruIo,
        Wait::ReplacementLock,
    ];

    /// Its name in reports and JSON.
    pub fn name(self) -> &'static str {
        [
            "row_lock",
            "content_lock",
            "mapping_lock",
            "proc_lock",
            "buffer_io",
            "data_read",
            "data_write",
            "wal_flush",
            "slru_lock",
            "slru_io",
            "replacement_lock",
        ][self as usize]
    }
}

/// Which SLRU an SLRU wait was for: PostgreSQL's wait events name each one
/// (LWLock/XactSLRU, SubtransSLRU, MultiXactOffsetSLRU, MultiXactMemberSLRU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SlruKind {
    /// The commit log (`xact`, pg_xact).
    Xact = 0,
    /// The subtransaction log (`subtrans`, pg_subtrans).
    Subtrans = 1,
    /// Multixact offsets (`multixact_offsets`).
    MultixactOffsets = 2,
    /// Multixact members (`multixact_members`).
    MultixactMembers = 3,
    /// Any other SLRU (one opened by an embedder under another name).
    Other = 4,
}

/// How many SLRU kinds there are.
pub const SLRU_KINDS: usize = 5;

impl SlruKind {
    /// Every kind, in the order of their numbers.
    pub const ALL: [SlruKind; SLRU_KINDS] = [
        SlruKind::Xact,
        SlruKind::Subtrans,
        SlruKind::MultixactOffsets,
        SlruKind::MultixactMembers,
        SlruKind::Other,
    ];

    /// The kind of the SLRU whose directory is named `name`.
    pub fn of_name(name: &str) -> SlruKind {
        match name {
            "xact" => SlruKind::Xact,
            "subtrans" => SlruKind::Subtrans,
            "multixact_offsets" => SlruKind::MultixactOffsets,
            "multixact_members" => SlruKind::MultixactMembers,
            _ => SlruKind::Other,
        }
    }

    /// Its name in reports and JSON (the SLRU's directory name; `other`).
    pub fn name(self) -> &'static str {
        [
            "xact",
            "subtrans",
            "multixact_offsets",
            "multixact_members",
            "other",
        ][self as usize]
    }
}

/// The SLRU waits of one SLRU kind: [`Wait::SlruLock`] and [`Wait::SlruIo`] apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlruWaits {
    /// Time waiting for a bank's (or the central) lock, in nanoseconds.
    pub lock_ns: u64,
    /// Those waits.
    pub lock_count: u64,
    /// Time in a page's I/O (own or another thread's), in nanoseconds.
    pub io_ns: u64,
    /// Those waits.
    pub io_count: u64,
}

/// One thread's waits: nanoseconds and count per kind, and the SLRU kinds split per SLRU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitTimes {
    /// Time spent waiting per kind (index: the kind's number), in nanoseconds.
    pub ns: [u64; KINDS],
    /// Waits per kind (index: the kind's number).
    pub count: [u64; KINDS],
    /// The [`Wait::SlruLock`] and [`Wait::SlruIo`] waits per SLRU (index: the
    /// [`SlruKind`]'s number); they add up to those two kinds' totals.
    pub slru: [SlruWaits; SLRU_KINDS],
}

impl WaitTimes {
    /// What happened between `earlier` and `self` (both from the same thread).
    pub fn since(&self, earlier: &WaitTimes) -> WaitTimes {
        let mut d = WaitTimes::default();
        for i in 0..KINDS {
            d.ns[i] = self.ns[i].wrapping_sub(earlier.ns[i]);
            d.count[i] = self.count[i].wrapping_sub(earlier.count[i]);
        }
        for (k, (now, then)) in self.slru.iter().zip(&earlier.slru).enumerate() {
            d.slru[k] = SlruWaits {
                lock_ns: now.lock_ns.wrapping_sub(then.lock_ns),
                lock_count: now.lock_count.wrapping_sub(then.lock_count),
                io_ns: now.io_ns.wrapping_sub(then.io_ns),
                io_count: now.io_count.wrapping_sub(then.io_count),
            };
        }
        d
    }

    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &WaitTimes) {
        for i in 0..KINDS {
            self.ns[i] += other.ns[i];
            self.count[i] += other.count[i];
        }
        for (mine, theirs) in self.slru.iter_mut().zip(&other.slru) {
            mine.lock_ns += theirs.lock_ns;
            mine.lock_count += theirs.lock_count;
            mine.io_ns += theirs.io_ns;
            mine.io_count += theirs.io_count;
        }
    }

    /// All kinds together, ns.
    pub fn total_ns(&self) -> u64 {
        self.ns.iter().sum()
    }

    /// Time spent in waits of kind `w`, in nanoseconds.
    pub fn ns_of(&self, w: Wait) -> u64 {
        self.ns[w as usize]
    }
}

thread_local! {
    static TIMES: Cell<WaitTimes> = const {
        Cell::new(WaitTimes {
            ns: [0; KINDS],
            count: [0; KINDS],
            slru: [SlruWaits { lock_ns: 0, lock_count: 0, io_ns: 0, io_count: 0 }; SLRU_KINDS],
        })
    };
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// This thread's totals so far.
pub fn current() -> WaitTimes {
    TIMES.with(|t| t.get())
}

/// Runs `f`, a wait of kind `w`, and adds its wall time to this thread's totals, unless
/// the thread is already inside a timed wait (then the outer one gets the time).
#[inline]
pub fn timed<R>(w: Wait, f: impl FnOnce() -> R) -> R {
    timed_in(w, None, f)
}

/// [`timed`] for an SLRU wait ([`Wait::SlruLock`] or [`Wait::SlruIo`]): booked to the
/// kind and to `slru`'s share of it.
#[inline]
pub fn timed_slru<R>(w: Wait, slru: SlruKind, f: impl FnOnce() -> R) -> R {
    debug_assert!(
        matches!(w, Wait::SlruLock | Wait::SlruIo),
        "{w:?} is no SLRU wait"
    );
    timed_in(w, Some(slru), f)
}

fn timed_in<R>(w: Wait, slru: Option<SlruKind>, f: impl FnOnce() -> R) -> R {
    if INSIDE.with(|i| i.replace(true)) {
        return f();
    }
    /// Clears the flag and books the time even if `f` unwinds.
    struct Booking(Wait, Option<SlruKind>, Instant);
    impl Drop for Booking {
        fn drop(&mut self) {
            let ns = self.2.elapsed().as_nanos() as u64;
            TIMES.with(|t| {
                let mut v = t.get();
                v.ns[self.0 as usize] += ns;
                v.count[self.0 as usize] += 1;
                if let Some(k) = self.1 {
                    let s = &mut v.slru[k as usize];
                    if self.0 == Wait::SlruLock {
                        s.lock_ns += ns;
                        s.lock_count += 1;
                    } else {
                        s.io_ns += ns;
                        s.io_count += 1;
                    }
                }
                t.set(v);
            });
            INSIDE.with(|i| i.set(false));
        }
    }
    let _b = Booking(w, slru, Instant::now());
    f()
}

/// Takes a lock through `try_lock` first and, only if that fails, through `lock` timed as
/// a wait of kind `w`: a free lock costs one attempt and no clock read.
#[inline]
pub fn lock_timed<G>(w: Wait, try_lock: impl FnOnce() -> Option<G>, lock: impl FnOnce() -> G) -> G {
    match try_lock() {
        Some(g) => g,
        None => timed(w, lock),
    }
}

/// [`lock_timed`] for an SLRU's lock: a contended one is booked to [`Wait::SlruLock`] and
/// to `slru`'s share of it.
#[inline]
pub fn lock_timed_slru<G>(
    slru: SlruKind,
    try_lock: impl FnOnce() -> Option<G>,
    lock: impl FnOnce() -> G,
) -> G {
    match try_lock() {
        Some(g) => g,
        None => timed_slru(Wait::SlruLock, slru, lock),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier, Mutex};

    #[test]
    fn a_wait_is_booked_to_its_kind_and_nested_waits_count_once() {
        let before = current();
        timed(Wait::DataWrite, || {
            // A nested wait: its time belongs to the outer one.
            timed(Wait::WalFlush, std::thread::yield_now);
        });
        timed(Wait::DataRead, || {});
        let d = current().since(&before);
        assert_eq!(d.count[Wait::DataWrite as usize], 1);
        assert_eq!(d.count[Wait::WalFlush as usize], 0);
        assert_eq!(d.ns_of(Wait::WalFlush), 0);
        assert_eq!(d.count[Wait::DataRead as usize], 1);
        // After the nest ends, a wait of the inner kind counts again.
        timed(Wait::WalFlush, || {});
        assert_eq!(current().since(&before).count[Wait::WalFlush as usize], 1);
    }

    #[test]
    fn a_contended_lock_is_timed_and_a_free_one_is_not() {
        let m = Arc::new(Mutex::new(()));
        let before = current();
        drop(lock_timed(
            Wait::ProcLock,
            || m.try_lock().ok(),
            || m.lock().unwrap(),
        ));
        assert_eq!(current().since(&before), WaitTimes::default());

        // Another thread holds the lock until this one has tried it.
        let held = Arc::new(Barrier::new(2));
        let tried = Arc::new(Barrier::new(2));
        let h = {
            let (m, held, tried) = (m.clone(), held.clone(), tried.clone());
            std::thread::spawn(move || {
                let g = m.lock().unwrap();
                held.wait();
                tried.wait();
                drop(g);
            })
        };
        held.wait();
        let g = lock_timed(
            Wait::ProcLock,
            || {
                let r = m.try_lock().ok();
                tried.wait();
                r
            },
            || m.lock().unwrap(),
        );
        drop(g);
        h.join().unwrap();
        let d = current().since(&before);
        // The attempt failed (the holder let go only after `tried`), so the wait counted.
        assert_eq!(d.count[Wait::ProcLock as usize], 1, "{d:?}");
        assert!(d.ns_of(Wait::ProcLock) > 0, "{d:?}");
    }

    #[test]
    fn an_slru_lock_wait_is_booked_to_its_slru_and_to_the_kind() {
        let m = Arc::new(Mutex::new(()));
        let held = Arc::new(Barrier::new(2));
        let tried = Arc::new(Barrier::new(2));
        let h = {
            let (m, held, tried) = (m.clone(), held.clone(), tried.clone());
            std::thread::spawn(move || {
                let g = m.lock().unwrap();
                held.wait();
                tried.wait();
                drop(g);
            })
        };
        held.wait();
        let before = current();
        let g = lock_timed_slru(
            SlruKind::MultixactOffsets,
            || {
                let r = m.try_lock().ok();
                tried.wait();
                r
            },
            || m.lock().unwrap(),
        );
        drop(g);
        h.join().unwrap();
        let d = current().since(&before);
        let share = d.slru[SlruKind::MultixactOffsets as usize];
        assert_eq!((share.lock_count, share.io_count), (1, 0), "{d:?}");
        assert_eq!(share.lock_ns, d.ns_of(Wait::SlruLock), "{d:?}");
        assert_eq!(d.count[Wait::SlruLock as usize], 1, "{d:?}");
        let others: u64 = d.slru.iter().map(|k| k.lock_count).sum::<u64>() - 1;
        assert_eq!(others, 0, "{d:?}");
        // Waits add up when merged, and `since` subtracts them back out.
        let mut sum = d;
        sum.add(&d);
        assert_eq!(sum.slru[SlruKind::MultixactOffsets as usize].lock_count, 2);
        assert_eq!(sum.since(&d), d);
    }

    #[test]
    fn a_panicking_wait_still_clears_the_nest() {
        let r = std::panic::catch_unwind(|| timed(Wait::RowLock, || panic!("boom")));
        assert!(r.is_err());
        let before = current();
        timed(Wait::BufferIo, || {});
        assert_eq!(current().since(&before).count[Wait::BufferIo as usize], 1);
    }
}
