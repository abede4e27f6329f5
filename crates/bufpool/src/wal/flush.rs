//! Flush and group commit: the write role, the sync pipeline, in-order publication, and
//! the padding of every flush to a block boundary.
//!
//! Flush and group commit (`flush(lsn)`): return at once if the log is durable to `lsn`.
//! Otherwise, in the flush queue: if nobody holds the *write role*, take it and lead;
//! else register `(lsn, own condition variable)` and sleep. The leader takes everything
//! inserted so far (optionally after `commit_delay`), pads it, writes it, then takes a
//! *place in the sync pipeline* (`wal_syncs_in_flight` places, default 1; it waits while
//! all are taken), writes what was inserted while it waited (a *top-up*, so its sync
//! covers those commits too) and only then gives up the write role, so a new leader can
//! write the next batch while this one syncs. With one place, syncs run one after another
//! (a leader's sync starts when the previous one ends). With two, the next leader's
//! fdatasync starts while the previous one still runs (on Linux it also waits for the
//! earlier pages' writeback, and the device sees the second flush queued behind the
//! first instead of after a wake-up and a write). On this machine's disk that made
//! commits slower (`bufpool experiment wal`: `sync_overlap_gain_16` 0.85, smaller groups,
//! longer syncs), hence the default; `scripts/raw-fsync-overlap.py` measures a device's
//! answer. A sync's return says nothing of an earlier batch in another
//! segment, so each leader *publishes* (`flushed = its end`) only once the batch before
//! its own is published: `flushed` only grows, in write order, and a failed earlier sync
//! (latched) means no later batch is ever published. Two unsynced writes back to back
//! are therefore common; a power cut that loses the first one's last sectors and keeps
//! the second is read as the end of the log, thanks to pad markers (see `record.rs`).
//! Handing over the write role wakes one waiter whose LSN is past this batch, to lead the
//! next; after publishing, the leader wakes exactly the waiters at or below its end, and
//! (if the write role is free and waiters remain) one more to lead. A woken waiter whose
//! LSN is durable returns without touching the queue lock. Why no wakeup is lost: see
//! [`Wal::flush`].
//!
//! The last partial block: a flush pads the log with zeros to the next 4 KiB boundary and
//! the next record starts there, so a 4 KiB block that holds fsynced (acknowledged) bytes
//! is never written again. The torn-write argument: rewriting the partial block in place
//! (PostgreSQL does: it rewrites the last page and relies on each record's CRC) means a
//! crash during the rewrite can leave that block torn. If the device tears at 512-byte
//! sectors but writes each sector atomically, the acknowledged prefix of the block is
//! rewritten with the same bytes and survives. If a sector caught mid-write can come back
//! as garbage (our power-loss simulator, `vfs/sim/`, models this; so do drives without
//! power-loss protection), the acknowledged records in that sector are destroyed, and
//! recovery then sees corruption before records it was told were durable. Padding makes
//! that impossible on any device, at the cost of at most 4 KiB of log per flush (and more
//! frequent segment switches, which is why segments are prepared ahead). We keep padding
//! and offer no rewrite-in-place mode: it would be safe only on devices with atomic sector
//! writes, which we cannot detect. The padding starts with a pad marker (a zero length and
//! a CRC of its position and incarnation, `record::pad_marker`): to the reader, a marker
//! means "padding: skip to the next 4 KiB", and bare zeros mid-block mean log that never
//! reached the disk (a lost sector: stop there, see `engine/recovery.rs`).

use super::{record, round_up, segment, SyncMethod, Wal, WalError, WAL_BLOCK};
use crate::sync::{Arc, AtomicU64, Condvar, Mutex, Ordering};
use crate::types::Lsn;
use crate::vfs::{IoAt, IoError, VfsFile};

/// One sleeping `flush` caller: the LSN it needs and its own wake-up, so a leader wakes
/// exactly the callers its sync covered.
pub(super) struct Waiter {
    pub(super) lsn: u64,
    /// Set (under this mutex) by whoever wakes the waiter.
    pub(super) woken: Mutex<bool>,
    pub(super) cv: Condvar,
}

impl Waiter {
    fn wake(&self) {
        *self.woken.lock() = true;
        // One thread ever waits on `cv`.
        self.cv.notify_all();
    }
}

/// The flush queue (under `Wal::queue`).
#[derive(Default)]
pub(super) struct FlushQueue {
    /// Someone holds the write role (is or will be writing the next batch).
    pub(super) writing: bool,
    /// Sleeping `flush` callers, in arrival order.
    pub(super) waiters: Vec<Arc<Waiter>>,
}

impl FlushQueue {
    /// Wakes every waiter whose LSN is at or below `flushed`.
    pub(super) fn wake_covered(&mut self, flushed: u64) {
        self.waiters.retain(|w| {
            if w.lsn <= flushed {
                w.wake();
                false
            } else {
                true
            }
        });
    }

    /// Wakes one waiter whose LSN is past `beyond` (the longest-waiting one), to lead.
    pub(super) fn wake_one_beyond(&mut self, beyond: u64) {
        if let Some(i) = self.waiters.iter().position(|w| w.lsn > beyond) {
            self.waiters.remove(i).wake();
        }
    }

    pub(super) fn wake_all(&mut self) {
        for w in self.waiters.drain(..) {
            w.wake();
        }
    }
}

/// Leaders between taking a sync place and publishing their batch (under `Wal::syncs`).
#[derive(Default)]
pub(super) struct SyncPipe {
    pub(super) in_flight: usize,
}

/// A leader's place in the sync pipeline: given back (and the waiters for a place or for
/// the in-order publication told) on drop, on every path including failures.
pub(super) struct SyncPlace<'a>(&'a Wal);

impl Drop for SyncPlace<'_> {
    fn drop(&mut self) {
        let mut pipe = self.0.syncs.lock();
        debug_assert!(pipe.in_flight > 0, "giving back a sync place nobody held");
        pipe.in_flight -= 1;
        drop(pipe);
        self.0.syncs_cv.notify_all();
    }
}

/// Decrements the flusher count when a slow-path `flush` returns.
pub(super) struct FlusherGuard<'a>(&'a AtomicU64);

impl Drop for FlusherGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Wal {
    /// Makes the log durable at least up to `lsn`; shares the sync with every thread that
    /// waits meanwhile (group commit).
    ///
    /// The protocol (state under `queue`: `writing`, the waiters with their LSNs):
    /// 1. `flushed >= lsn`: return (no lock).
    /// 2. Under `queue`: if `!writing`, set it and lead (`lead_flush`); else register as a
    ///    waiter and sleep on the own condition variable until woken; then go to 1.
    /// 3. A leader, after writing its batch `[F, U)` and taking a place in the sync
    ///    pipeline, clears `writing` and wakes one waiter with LSN > U (to lead the next
    ///    batch); after its sync and once `flushed` = F (the batch before is published) it
    ///    stores `flushed = U`, then wakes every waiter with LSN <= U and, if `writing` is
    ///    clear and waiters remain, one more. A failure wakes all (and a leader whose
    ///    earlier batch failed returns the failure instead of publishing).
    /// 4. A leader with an empty batch (F = U: the batch before, still syncing, wrote its
    ///    record) clears `writing`, waking one waiter with LSN > F, takes no place and
    ///    returns once `flushed` >= F. It publishes nothing, so the next batch (also from
    ///    F) may be published before it wakes; its waiters with LSN <= F are woken by the
    ///    batch before, which stores `flushed` before it wakes them.
    ///
    /// No lost wakeup: a waiter W with LSN L registered while some leader X held the
    /// write role. If X's batch covers L, X's sync ends by waking W (or a failure wakes
    /// everyone). If not, L > U_X and X, on giving up the role, wakes some waiter whose
    /// LSN is past U_X (W qualifies, so one exists). Every leader after X took the role after W
    /// registered, hence after W's record was inserted, so its batch covers L. The woken
    /// one either leads (a leader after X), finds another thread leading (likewise), or
    /// finds its own LSN durable (a leader after X finished, and that leader's sync woke
    /// W). Waking happens under W's own mutex after W registered under `queue`, so a wake
    /// that comes before W sleeps is seen by W's check. `flushed` is stored before the
    /// leader takes `queue` to wake, and W checks it after its wake-up.
    ///
    /// A failed log refuses even a flush that has nothing to do: the pool calls this
    /// before every page write, and after a failure (or an unlogged change, see
    /// [`Wal::latch_unlogged`]) no page may be written.
    pub fn flush(&self, lsn: Lsn) -> Result<(), WalError> {
        self.check_failed()?;
        if self.progress.flushed.load(Ordering::Acquire) >= lsn.0 {
            self.counters.flush_free.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        crate::waits::timed(crate::waits::Wait::WalFlush, || self.flush_slow(lsn))
    }

    /// [`Wal::flush`] when the log is not yet durable at `lsn`: join or lead a group.
    pub(super) fn flush_slow(&self, lsn: Lsn) -> Result<(), WalError> {
        let inserted = self.insert_position();
        if lsn > inserted {
            return Err(WalError::NotInserted { lsn, inserted });
        }
        self.counters.flushers.fetch_add(1, Ordering::Relaxed);
        let _flusher = FlusherGuard(&self.counters.flushers);
        loop {
            let me = {
                let mut q = self.queue.lock();
                self.check_failed()?;
                if self.progress.flushed.load(Ordering::Acquire) >= lsn.0 {
                    self.counters.flush_free.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                if !q.writing {
                    q.writing = true;
                    break;
                }
                let me = Arc::new(Waiter {
                    lsn: lsn.0,
                    woken: Mutex::new(false),
                    cv: Condvar::new(),
                });
                q.waiters.push(me.clone());
                me
            };
            let mut woken = me.woken.lock();
            while !*woken {
                woken = me.cv.wait(woken);
            }
            drop(woken);
            self.check_failed()?;
            if self.progress.flushed.load(Ordering::Acquire) >= lsn.0 {
                self.counters.flush_free.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            // Woken to lead (or the leader found others leading): try again.
        }
        let led = self.lead_flush();
        // The leader's batch took everything inserted, which includes `lsn`.
        debug_assert!(
            led.is_err() || self.progress.flushed.load(Ordering::Acquire) >= lsn.0,
            "a flush to {lsn} returned with the log durable only to {}",
            self.flushed()
        );
        led
    }

    /// Gives up the write role after a batch ending at `upto`, handing it to one waiter
    /// beyond the batch.
    pub(super) fn release_write_role(&self, upto: u64) {
        let mut q = self.queue.lock();
        debug_assert!(q.writing, "releasing a write role nobody holds");
        q.writing = false;
        q.wake_one_beyond(upto);
    }

    /// The leader's work (the caller holds the write role): optionally wait
    /// `commit_delay`, pad, write everything inserted so far, take a place in the sync
    /// pipeline, hand the write role on, sync, and publish the batch after the one before
    /// it.
    pub(super) fn lead_flush(&self) -> Result<(), WalError> {
        if !self.commit_delay.is_zero()
            && self.counters.flushers.load(Ordering::Relaxed) > self.commit_siblings
        {
            // PostgreSQL's commit_delay: let more commits join this batch.
            self.counters.commit_delays.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(self.commit_delay);
        }
        let from = self.progress.written.load(Ordering::Relaxed);
        debug_assert_eq!(
            from % WAL_BLOCK,
            0,
            "the log was written up to mid-block {from}"
        );
        let mut upto = self.pad_insertions();
        if let Err(e) = self.write_out(upto) {
            self.abandon_write_role();
            return Err(e);
        }
        if upto == from {
            return self.await_earlier_batch(from);
        }
        // A place in the sync pipeline, taken while holding the write role: places are
        // taken in write order. With one place (`syncs_in_flight` 1) this waits for the
        // previous leader's sync to end; with more, only when that many are running.
        let sync_wait_start = self.epoch.elapsed().as_nanos() as u64;
        let overlapping = {
            let mut pipe = self.syncs.lock();
            while pipe.in_flight >= self.syncs_in_flight {
                pipe = self.syncs_cv.wait(pipe);
            }
            pipe.in_flight += 1;
            debug_assert!(
                pipe.in_flight <= self.syncs_in_flight,
                "{} leaders in the sync pipeline of {} places",
                pipe.in_flight,
                self.syncs_in_flight
            );
            pipe.in_flight > 1
        };
        let _place = SyncPlace(self);
        // While this leader waited for a place, more commits arrived: write them too, so
        // this sync covers them (PostgreSQL's leader, which waits for the previous write
        // and sync before taking its batch, gets them the same way). Else they would wait
        // for the next leader's write, which waits for a place: one more sync of latency
        // each, and smaller groups.
        if self.pos.load(Ordering::Acquire) > upto {
            let more = self.pad_insertions();
            if let Err(e) = self.write_out(more) {
                self.abandon_write_role();
                return Err(e);
            }
            self.counters.top_ups.fetch_add(1, Ordering::Relaxed);
            upto = more;
        }
        self.release_write_role(upto);
        self.check_failed()?;
        if upto > from {
            // Without the pipeline's lock: syncs of several leaders may run at once. A
            // sync's return says nothing about an earlier batch still being synced (it
            // may sit in another segment), hence the in-order publication below.
            self.timed_sync(from, upto, sync_wait_start, overlapping)?;
        }
        // Publish in write order: the batch before this one ends at `from`; its leader
        // took its place before this one and publishes, or fails (latched) and gives its
        // place back, which wakes this wait.
        {
            let mut pipe = self.syncs.lock();
            loop {
                self.check_failed()?;
                let flushed = self.progress.flushed.load(Ordering::Acquire);
                if flushed >= from {
                    debug_assert_eq!(flushed, from, "batches are published in write order");
                    break;
                }
                pipe = self.syncs_cv.wait(pipe);
            }
            if upto > from {
                self.progress.flushed.store(upto, Ordering::Release);
            }
        }
        drop(_place);
        {
            let mut q = self.queue.lock();
            q.wake_covered(upto);
            if !q.writing {
                q.wake_one_beyond(upto);
            }
        }
        crate::invariants::debug_check(|| self.check_invariants());
        Ok(())
    }

    /// A leader with nothing to write (everything inserted was written by an earlier
    /// batch, still syncing: the caller's record is in it) hands the write role on and
    /// waits for that batch's publication. It takes no sync place and publishes nothing: a
    /// place held for an empty batch would hold back the next batch's sync, and a later
    /// batch, starting at the same `from`, may be published before this wait wakes.
    fn await_earlier_batch(&self, from: u64) -> Result<(), WalError> {
        self.release_write_role(from);
        let mut pipe = self.syncs.lock();
        while self.progress.flushed.load(Ordering::Acquire) < from {
            self.check_failed()?;
            pipe = self.syncs_cv.wait(pipe);
        }
        drop(pipe);
        self.check_failed()?;
        self.counters.empty_batches.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Syncs the batch `[from, upto)` and counts it: its time, and the gap since the
    /// previous sync ended if this leader was already queued for its place then (queued
    /// since `queued_at`; its write came first): the pipeline's handoff.
    fn timed_sync(
        &self,
        from: u64,
        upto: u64,
        queued_at: u64,
        overlapping: bool,
    ) -> Result<(), WalError> {
        let c = &self.counters;
        let start = self.epoch.elapsed().as_nanos() as u64;
        let last = c.last_sync_end.load(Ordering::Relaxed);
        if last >= queued_at && start >= last {
            c.sync_gap_ns.fetch_add(start - last, Ordering::Relaxed);
            c.sync_gaps.fetch_add(1, Ordering::Relaxed);
        }
        if overlapping {
            c.overlapped_syncs.fetch_add(1, Ordering::Relaxed);
        }
        self.sync_range(from, upto)?;
        let end = self.epoch.elapsed().as_nanos() as u64;
        c.sync_ns.fetch_add(end - start, Ordering::Relaxed);
        c.last_sync_end.fetch_max(end, Ordering::Relaxed);
        c.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Everything inserted so far, padded to a block boundary (the caller holds the write
    /// role): returns the padded end. Acquire: see the ordering argument in
    /// `insert_built`.
    pub(super) fn pad_insertions(&self) -> u64 {
        let upto = loop {
            let end = self.pos.load(Ordering::Acquire);
            let padded = round_up(end, WAL_BLOCK);
            if padded == end {
                break end;
            }
            if self
                .pos
                .compare_exchange(end, padded, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // The pad marker, then zeros (records are 8-byte aligned, so the padding
                // has room for the marker): bare zeros mid-block mean lost log to the
                // reader (see `record.rs`).
                let mut pad = [0u8; WAL_BLOCK as usize];
                pad[..record::PAD_MARKER_LEN]
                    .copy_from_slice(&record::pad_marker(end, self.incarnation));
                // SAFETY: the CAS made [end, padded) ours (no inserter can reserve it), and
                // the reservation margin of one block keeps the ring lap ahead of it.
                unsafe { self.buffer.put(end, &pad[..(padded - end) as usize]) };
                self.counters
                    .pad_bytes
                    .fetch_add(padded - end, Ordering::Relaxed);
                break padded;
            }
        };
        debug_assert_eq!(upto % WAL_BLOCK, 0, "a flush ends on a block boundary");
        upto
    }

    /// After a failed write (latched: every failure here latches, and `fail` woke the
    /// waiters): frees the write role for the next caller, who will see the failure.
    pub(super) fn abandon_write_role(&self) {
        let mut q = self.queue.lock();
        q.writing = false;
        q.wake_all();
    }

    /// Writes ring bytes `[written, upto)` to the segments, straight from the ring.
    /// Caller holds the write role. Wakes the WAL writer when the write enters a
    /// new segment, so it prepares the next ones.
    pub(super) fn write_out(&self, upto: u64) -> Result<(), WalError> {
        self.wait_insertions(upto);
        let mut pos = self.progress.written.load(Ordering::Relaxed);
        debug_assert!(
            pos <= upto && upto <= self.pos.load(Ordering::Relaxed),
            "write_out: written {pos} <= upto {upto} <= reserved must hold"
        );
        let from = pos;
        while pos < upto {
            let segno = pos / self.segments.size;
            let seg_end = (segno + 1) * self.segments.size;
            // SAFETY: bytes below `upto` were completely inserted (wait_insertions), and
            // the ring cannot lap them until `written` moves past them, which only the
            // write role's holder (this thread) does, after this write.
            let chunk = unsafe { self.buffer.contiguous(pos, upto.min(seg_end) - pos) };
            let n = chunk.len();
            let file = self.segment(segno)?;
            let started = std::time::Instant::now();
            let w = file
                .write_at(chunk, pos % self.segments.size)
                .map_err(|source| {
                    self.fail(WalError::Io(IoError::at_offset(
                        "writing",
                        &self.segments.path(segno),
                        pos % self.segments.size,
                        source,
                    )))
                })?;
            if w != n {
                return Err(self.fail(WalError::Io(IoError::short(
                    "writing",
                    &self.segments.path(segno),
                    IoAt::Offset(pos % self.segments.size),
                    w,
                    n,
                ))));
            }
            self.segments.io.count(
                crate::stats::WalIoContext::Normal,
                crate::stats::IoOp::Write,
                1,
                n as u64,
                started.elapsed(),
            );
            pos += n as u64;
            // Release: the write above (the leader's reads of the ring) happens-before an
            // inserter's Acquire load that lets it overwrite these ring bytes.
            self.progress.written.store(pos, Ordering::Release);
        }
        self.counters
            .write_bytes
            .fetch_add(upto - from, Ordering::Relaxed);
        // Entered a new segment (the last byte written before was in an earlier one):
        // the WAL writer prepares the next ones now.
        if upto > from
            && (upto - 1) / self.segments.size != from.max(1).saturating_sub(1) / self.segments.size
        {
            self.kick_wal_writer();
        }
        debug_assert_eq!(
            self.progress.written.load(Ordering::Relaxed),
            upto,
            "write_out stopped short of {upto}"
        );
        Ok(())
    }

    /// The open file of a segment the leader writes or syncs: prepared ahead normally;
    /// made here (counted) if the WAL writer fell behind. Any failure latches.
    pub(super) fn segment(&self, segno: u64) -> Result<Arc<dyn VfsFile>, WalError> {
        if let Some(f) = self.segments.open_file(segno) {
            return Ok(f);
        }
        match self.segments.file(segno, segment::Make::Inline) {
            Ok(Some((f, found))) => {
                let counter = match found {
                    segment::Found::Made => Some(&self.counters.segments_created_inline),
                    segment::Found::Waited => Some(&self.counters.segment_waits_inline),
                    segment::Found::Open | segment::Found::OnDisk => None,
                };
                if let Some(c) = counter {
                    c.fetch_add(1, Ordering::Relaxed);
                }
                Ok(f)
            }
            Ok(None) => unreachable!("made on demand"),
            Err(e) => Err(self.fail(e.error)),
        }
    }

    /// Syncs the segments that log bytes `[from, upto)` went to. The caller holds a place
    /// in the sync pipeline (not its lock: other leaders may sync meanwhile).
    pub(super) fn sync_range(&self, from: u64, upto: u64) -> Result<(), WalError> {
        debug_assert!(
            from < upto && upto <= self.progress.written.load(Ordering::Acquire),
            "syncing [{from}, {upto}), which is empty or not all written"
        );
        if self.sync_method == SyncMethod::OpenDatasync {
            return Ok(()); // every write was durable when it returned
        }
        for segno in from / self.segments.size..=(upto - 1) / self.segments.size {
            let file = self.segment(segno)?;
            let started = std::time::Instant::now();
            let r = match self.sync_method {
                SyncMethod::Fsync => file.sync_all(),
                _ => file.sync_data(),
            };
            self.segments.io.count(
                crate::stats::WalIoContext::Normal,
                crate::stats::IoOp::Fsync,
                1,
                0,
                started.elapsed(),
            );
            r.map_err(|source| {
                self.fail(WalError::Io(IoError::new(
                    "fsync of",
                    &self.segments.path(segno),
                    source,
                )))
            })?;
        }
        Ok(())
    }

    /// The buffer pool's WAL-before-data hook: flushes to `lsn`, counting the flushes a
    /// page write forced.
    pub fn flush_for_page(&self, lsn: Lsn) -> Result<(), WalError> {
        if self.progress.flushed.load(Ordering::Acquire) < lsn.0 {
            self.counters
                .forced_by_pages
                .fetch_add(1, Ordering::Relaxed);
        }
        self.flush(lsn)
    }
}
