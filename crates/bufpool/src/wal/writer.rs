//! The log's side of the WAL writer thread (the thread itself runs in `crate::engine`):
//! segment preparation ahead of the flush leader, and the requests inserts and the leader
//! leave for the thread.
//!
//! Segments: the flush leader writes only into segments prepared ahead of it (zero-filled
//! or recycled, file and name durable): [`Wal::prepare_ahead`] makes the current segment
//! and the next `prepare_segments`, called at open, after each checkpoint's release of old
//! segments, and by the engine's WAL writer, which the leader wakes whenever it
//! starts writing into a new segment. If the WAL writer fell behind, the leader makes the
//! segment itself and counts it (`WalStats::segments_created_inline`; waiting for a
//! creation in progress counts as `segment_waits_inline`).

use super::{segment, Wal, WalError};
use crate::sync::{AtomicU64, Condvar, Mutex, Ordering};

/// What inserts and the flush leader asked of the WAL writer (under `WalWriter::requests`).
#[derive(Default)]
struct Requests {
    /// The leader entered a new segment: prepare the next ones now.
    kicked: bool,
    /// An insert left `flush_after` bytes unwritten: write and sync the log now.
    flush: bool,
    stop: bool,
}

/// The WAL writer's mailbox: the requests left for the thread, its condition variable, and
/// the pacing of the inserts' flush requests (one per `flush_after` bytes inserted).
pub(super) struct WalWriter {
    requests: Mutex<Requests>,
    cv: Condvar,
    /// Unwritten bytes at which an insert asks for a flush (0: never).
    flush_after: u64,
    /// The insert position past which the next flush request may be made (one per
    /// `flush_after` bytes, not one per insert while the thread works).
    next_request: AtomicU64,
}

impl WalWriter {
    pub(super) fn new(flush_after: u64) -> Self {
        WalWriter {
            requests: Mutex::new(Requests::default()),
            cv: Condvar::new(),
            flush_after,
            next_request: AtomicU64::new(0),
        }
    }

    /// After an insert ending at `end` with the log written up to `written`: asks for a
    /// flush if `flush_after` bytes are unwritten, at most once per `flush_after` bytes
    /// inserted. Returns whether it asked.
    #[inline]
    fn request_flush(&self, end: u64, written: u64) -> bool {
        if self.flush_after == 0 {
            return false;
        }
        let next = self.next_request.load(Ordering::Relaxed);
        if end < next || end.saturating_sub(written) < self.flush_after {
            return false;
        }
        if self
            .next_request
            .compare_exchange(
                next,
                end + self.flush_after,
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return false; // another insert asked for this stretch
        }
        self.requests.lock().flush = true;
        self.cv.notify_all();
        true
    }

    /// Asks for segment preparation (the leader entered a new segment).
    fn request_segments(&self) {
        self.requests.lock().kicked = true;
        self.cv.notify_all();
    }

    fn wait(&self, timeout: std::time::Duration) -> WalWriterWake {
        let mut r = self.requests.lock();
        if !r.kicked && !r.flush && !r.stop {
            r = self.cv.wait_for(r, timeout).0;
        }
        if r.stop {
            WalWriterWake::Stop
        } else if std::mem::take(&mut r.flush) {
            // A segment request stays set: the next wait returns at once to serve it.
            WalWriterWake::Flush
        } else if std::mem::take(&mut r.kicked) {
            WalWriterWake::Kicked
        } else {
            WalWriterWake::Timeout
        }
    }

    fn stop(&self) {
        self.requests.lock().stop = true;
        self.cv.notify_all();
    }
}

/// Why [`Wal::wait_for_wal_writer_work`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalWriterWake {
    /// The flush leader started a new segment.
    Kicked,
    /// Inserts left `writer_flush_after` bytes of log unwritten: write and sync it.
    Flush,
    /// The timeout passed.
    Timeout,
    /// [`Wal::stop_wal_writer`] was called: the thread should end.
    Stop,
}

impl Wal {
    /// Makes sure the segment of the insert position and the next `prepare_segments` exist
    /// (recycled from released ones where possible, else created zero-filled), with file
    /// and name durable, and open: PostgreSQL's PreallocXlogFiles. Called at open, after a
    /// checkpoint released segments, and by the engine's WAL writer; never by the
    /// flush leader. Returns how many segments it made.
    ///
    /// A failure is returned, and latches the log only if it failed an fsync of the
    /// directory after a rename (see `segment.rs`); otherwise the leader retries inline.
    ///
    /// A zero-fill it does is paced (`segment.rs`, `Segments::fill`) while the segment is
    /// not needed soon; at open (`prepare_now`) it is not.
    pub fn prepare_ahead(&self) -> Result<usize, WalError> {
        self.prepare(true)
    }

    /// [`Self::prepare_ahead`] without pacing: nothing else is running yet.
    pub(super) fn prepare_now(&self) -> Result<usize, WalError> {
        self.prepare(false)
    }

    pub(super) fn prepare(&self, paced: bool) -> Result<usize, WalError> {
        let first = self.pos.load(Ordering::Relaxed) / self.segments.size;
        let mut made = 0;
        for segno in first..=first + self.prepare_segments {
            // Needed soon: the insert position is in the segment before it (or past).
            let urgent = || self.pos.load(Ordering::Relaxed) / self.segments.size + 1 >= segno;
            match self.segments.file_paced(
                segno,
                segment::Make::Ahead,
                paced.then_some(&urgent as _),
            ) {
                Ok(Some((_, segment::Found::Made))) => made += 1,
                Ok(_) => {}
                Err(e) if e.after_rename => return Err(self.fail(e.error)),
                Err(e) => return Err(e.error),
            }
        }
        Ok(made)
    }

    /// After an insert ending at `end`: wakes the WAL writer to write the log if
    /// `wal_writer_flush_after` bytes are unwritten (see [`WalWriter::request_flush`]).
    #[inline]
    pub(super) fn maybe_kick_writer(&self, end: u64) {
        let written = self.progress.written.load(Ordering::Relaxed);
        if self.wal_writer.request_flush(end, written) {
            self.counters.writer_kicks.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Wakes the WAL writer to prepare segments (the leader entered a new one).
    pub(super) fn kick_wal_writer(&self) {
        self.wal_writer.request_segments();
    }

    /// The WAL writer's wait: returns when the flush leader entered a new segment
    /// (prepare more), when inserts left `wal_writer_flush_after` bytes unwritten, when
    /// `timeout` passed, or when [`Wal::stop_wal_writer`] was called.
    pub fn wait_for_wal_writer_work(&self, timeout: std::time::Duration) -> WalWriterWake {
        self.wal_writer.wait(timeout)
    }

    /// Tells the WAL writer to end (its next wait returns `Stop`).
    pub fn stop_wal_writer(&self) {
        self.wal_writer.stop();
    }
}
