//! Insertion: many threads copy records into the log buffer at once.
//!
//! Insertion (many threads at once, PostgreSQL's WAL insertion locks): a thread seals its
//! record first (the body's CRC, `record.rs`), then takes one of `INSERT_SLOTS` slot locks
//! (by thread), publishes its candidate start in the slot and reserves `align8(len)` bytes
//! with one CAS on `pos`, stamps the position fields (a 20-byte CRC fold), copies the
//! record into the ring holding only its slot, and clears the slot. A writer that wants
//! bytes up to X waits until no slot holds a start below X. The redo point changes only
//! while a checkpoint holds every slot lock, so an inserter's full-page-image decision
//! cannot go stale. `pos` sits alone on its cache line: it is the one word every inserter
//! writes; `written`/`flushed` (written by the flush leader, read by inserters and
//! committers) and the counters each have their own.

use super::{record, RecordBuilder, Wal, WalError, WAL_BLOCK};
use crate::sync::{AtomicU64, Mutex, Ordering};
use crate::types::Lsn;

/// Insertion slots (PostgreSQL's NUM_XLOGINSERT_LOCKS).
pub(super) const INSERT_SLOTS: usize = 8;

pub(super) const SLOT_IDLE: u64 = u64::MAX;

#[repr(align(128))]
pub(super) struct Slot {
    pub(super) lock: Mutex<()>,
    pub(super) at: AtomicU64,
    /// Records and bytes inserted through this slot, and the full-page images among them
    /// and the bytes those take (written under its lock).
    pub(super) records: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) images: AtomicU64,
    pub(super) image_bytes: AtomicU64,
}

impl Slot {
    pub(super) fn new() -> Self {
        Slot {
            lock: Mutex::new(()),
            at: AtomicU64::new(SLOT_IDLE),
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            images: AtomicU64::new(0),
            image_bytes: AtomicU64::new(0),
        }
    }

    /// Counts one record of `alen` bytes holding `images` full-page images of
    /// `image_bytes`. The caller holds the slot's lock: the only writer, so plain loads
    /// and stores suffice.
    fn count(&self, alen: u64, (images, image_bytes): (u32, u64)) {
        let add = |c: &AtomicU64, n: u64| c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        add(&self.records, 1);
        add(&self.bytes, alen);
        if images > 0 {
            add(&self.images, u64::from(images));
            add(&self.image_bytes, image_bytes);
        }
    }
}

thread_local! {
    static SLOT_HINT: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

static NEXT_SLOT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

pub(super) fn my_slot() -> usize {
    SLOT_HINT.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT_SLOT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % INSERT_SLOTS);
        }
        s.get()
    })
}

impl Wal {
    /// Inserts a record built by `build(redo)`, where `redo` is the redo point the builder
    /// must use to decide on full-page images; rebuilt if a checkpoint moves the redo
    /// point meanwhile. Returns (start, end) of the record.
    pub fn insert_with(
        &self,
        mut build: impl FnMut(Lsn) -> RecordBuilder,
    ) -> Result<(Lsn, Lsn), WalError> {
        loop {
            let redo = self.redo_hint.load(Ordering::Acquire);
            let mut rec = build(Lsn(redo));
            if let Some(range) = self.insert_built(&mut rec, Some(redo))? {
                return Ok(range);
            }
            // A checkpoint moved the redo point: decide on page images again.
        }
    }

    /// Inserts a ready record (one that holds no page images, or whose images do not
    /// depend on the redo point).
    pub fn insert(&self, mut rec: RecordBuilder) -> Result<(Lsn, Lsn), WalError> {
        Ok(self
            .insert_built(&mut rec, None)?
            .expect("no redo point to go stale"))
    }

    /// Reserves room for `rec` and copies it into the log buffer, retrying (with the same
    /// record) while the buffer is full. With `redo = Some(r)`, returns None if the redo
    /// point is no longer `r` (the caller rebuilds: its page-image decisions may be stale).
    pub(super) fn insert_built(
        &self,
        rec: &mut RecordBuilder,
        redo: Option<u64>,
    ) -> Result<Option<(Lsn, Lsn)>, WalError> {
        self.check_failed()?;
        let alen = record::align(rec.len() as u64);
        if alen + 2 * WAL_BLOCK > self.buffer.len() {
            return Err(WalError::TooLarge {
                len: rec.len(),
                ring: self.buffer.len(),
            });
        }
        // The body's CRC, before any reservation: the window between reserving and
        // clearing the slot (which a flush leader may wait on) is a stamp and a copy.
        rec.seal(self.incarnation);
        loop {
            let slot = &self.slots[my_slot()];
            let slot_guard = slot.lock.lock();
            if redo.is_some_and(|r| self.redo_hint.load(Ordering::Acquire) != r) {
                return Ok(None);
            }
            let start = match self.reserve(slot, alen) {
                Ok(start) => start,
                Err(full_at) => {
                    slot.at.store(SLOT_IDLE, Ordering::Release);
                    drop(slot_guard);
                    self.counters.buffers_full.fetch_add(1, Ordering::Relaxed);
                    // Buffer full: write and sync what is there (rare with a buffer of a
                    // segment's size; a plain write would leave a partial block to
                    // rewrite), then retry with the same record.
                    self.flush(Lsn(full_at + alen + WAL_BLOCK - self.buffer.len()))?;
                    continue;
                }
            };
            let flushed = Lsn(self.progress.flushed.load(Ordering::Acquire));
            debug_assert!(
                flushed.0 <= start,
                "reserved {} below the durable end {flushed}",
                Lsn(start)
            );
            let bytes = rec.stamp(Lsn(start), flushed);
            // The reservation was made for the sealed length: the stamped record must fill
            // it but for the alignment padding, or it overruns the next record.
            debug_assert!(
                bytes.len() as u64 <= alen && alen - (bytes.len() as u64) < record::ALIGN,
                "record of {} bytes in a reservation of {alen}",
                bytes.len()
            );
            let pad = [0u8; record::ALIGN as usize];
            // SAFETY: [start, start + alen) was reserved by this thread (`reserve`), which
            // kept it at least one lap ahead of unwritten buffer bytes.
            unsafe {
                self.buffer.put(start, bytes);
                self.buffer.put(
                    start + bytes.len() as u64,
                    &pad[..(alen as usize - bytes.len())],
                );
            }
            // Release: the copy above happens-before a leader's Acquire load that sees
            // the slot idle.
            slot.at.store(SLOT_IDLE, Ordering::Release);
            slot.count(alen, rec.images());
            drop(slot_guard);
            self.maybe_kick_writer(start + alen);
            return Ok(Some((Lsn(start), Lsn(start + alen))));
        }
    }

    /// Reserves `alen` bytes of log for the caller, which holds `slot`'s lock: returns the
    /// start, or `Err(position)` if the log buffer has no room (the slot then still holds
    /// a stale candidate, which the caller clears).
    ///
    /// Ordering argument (the leader's side is `lead_flush` and `wait_insertions`): the
    /// candidate start is stored in the slot (Relaxed) before the CAS, which is Release; a
    /// leader loads `pos` with Acquire. If that load sees this reservation (reads this CAS
    /// or any later read-modify-write of `pos`, all in this CAS's release sequence), the
    /// slot store happens-before the leader's scan, which therefore sees this start (or the
    /// IDLE stored after the copy, or a later candidate) and waits. If it does not see the
    /// reservation, the record lies beyond the leader's batch. `at` only ever under-states
    /// the real start (a failed CAS leaves an older candidate until the next store), which
    /// only makes a leader wait longer. No SeqCst is needed: nothing here is a
    /// store-then-load on two different words by both sides.
    fn reserve(&self, slot: &Slot, alen: u64) -> Result<u64, u64> {
        let mut p = self.pos.load(Ordering::Relaxed);
        loop {
            // One block of margin: the flush leader's padding never laps unwritten bytes.
            if p + alen + WAL_BLOCK
                > self.progress.written.load(Ordering::Acquire) + self.buffer.len()
            {
                return Err(p);
            }
            slot.at.store(p, Ordering::Relaxed);
            match self
                .pos
                .compare_exchange_weak(p, p + alen, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => p = now,
            }
        }
        debug_assert_eq!(p % 8, 0, "records start 8-byte aligned");
        debug_assert!(
            p + alen <= self.progress.written.load(Ordering::Acquire) + self.buffer.len(),
            "a reservation laps unwritten log buffer bytes"
        );
        Ok(p)
    }

    /// Waits until every insertion that started below `upto` has finished copying. The
    /// caller loaded `pos` (Acquire) at or past `upto` before calling (see
    /// `insert_built` for why that makes every such insertion visible in its slot).
    pub(super) fn wait_insertions(&self, upto: u64) {
        for slot in self.slots.iter() {
            let mut spin = crate::sync::SpinWait::new();
            loop {
                let at = slot.at.load(Ordering::Acquire);
                if at == SLOT_IDLE || at >= upto {
                    break;
                }
                spin.spin();
            }
        }
    }
}
