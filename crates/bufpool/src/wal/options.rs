//! The log's settings, its counters, and the segment counts it reports.

/// How the log is made durable (PostgreSQL's `wal_sync_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMethod {
    /// Segments synced with fdatasync (the default).
    #[default]
    Fdatasync,
    /// Segments synced with fsync.
    Fsync,
    /// Segments opened with O_DSYNC: every write is durable when it returns.
    OpenDatasync,
}

impl SyncMethod {
    /// The setting's value as PostgreSQL's `wal_sync_method` spells it.
    pub fn name(self) -> &'static str {
        match self {
            SyncMethod::Fdatasync => "fdatasync",
            SyncMethod::Fsync => "fsync",
            SyncMethod::OpenDatasync => "open_datasync",
        }
    }
}

/// Default of [`WalOptions::recycle_segments`]: PostgreSQL's `min_wal_size` (80 MB) over
/// its `wal_segment_size` (16 MB). The engine derives the real value from its own
/// `min_wal_size` and segment size; more kept segments trade disk space for fewer
/// zero-filled creations after a checkpoint.
pub const DEFAULT_RECYCLE_SEGMENTS: usize = 5;

/// Log settings (validated by `Config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalOptions {
    /// Size of each segment file, in bytes (PostgreSQL's `wal_segment_size`).
    pub segment_size: u64,
    /// Size of the in-memory log ring that records are copied into before they are written, in
    /// bytes (PostgreSQL's `wal_buffers`).
    pub buffers: u64,
    /// How the log is made durable.
    pub sync_method: SyncMethod,
    /// How many segments released by checkpoints are kept to be renamed into new ones
    /// (instead of creating and zero-filling a file); the rest are unlinked. 0 keeps none.
    pub recycle_segments: usize,
    /// Segments past the current one that [`Wal::prepare_ahead`](super::Wal::prepare_ahead) keeps ready.
    pub prepare_segments: u64,
    /// PostgreSQL's commit_delay, in microseconds: a flush leader waits this long before
    /// taking its batch when at least `commit_siblings` other threads are flushing. 0: off.
    pub commit_delay_us: u64,
    /// PostgreSQL's commit_siblings, counted as other threads inside [`Wal::flush`](super::Wal::flush).
    pub commit_siblings: u64,
    /// PostgreSQL's wal_writer_flush_after, bytes: an insert that leaves this much log
    /// unwritten (or a quarter of the ring, if less) wakes the WAL writer to write
    /// and sync it, so the ring is drained before it fills and inserters never have to.
    /// 0: only the thread's own delay (and the segment switches) wake it.
    pub writer_flush_after: u64,
    /// How many leaders may sync at once (at least 1): with 1, a leader's sync waits for
    /// the previous one to end; with more, the next leader syncs its batch while the
    /// previous sync is still running. Either way `flushed` moves in write order.
    pub syncs_in_flight: usize,
    /// Keep the durable end in `durable_end` ([`super::Wal::flush_acknowledged`]).
    pub durable_end: bool,
}

/// Default of [`WalOptions::prepare_segments`]: four segments ahead. PostgreSQL prepares
/// one (PreallocXlogFiles, at checkpoints, once the current one is 75% full); we prepare
/// continuously from a thread woken at each segment switch. Padding every flush to 4 KiB
/// makes small commits fill a 16 MiB segment in under half a second at 10k syncs/s, and
/// `bufpool experiment wal` on a busy disk (300 fsyncs/s) saw the thread miss with 2 ahead
/// (a zero-fill took longer than a segment lasted); 4 leave three segments of slack for
/// 64 MiB of extra disk, within the default min_wal_size (80 MB).
pub const DEFAULT_PREPARE_SEGMENTS: u64 = 4;

/// Segment files the log added (created and zero-filled), recycled (renamed from a segment
/// a checkpoint released) and removed (unlinked), since it was opened: PostgreSQL's "WAL
/// file(s) added, removed, recycled" of `log_checkpoints`; the checkpointer reports the
/// difference across a checkpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentCounts {
    /// Segment files created and zero-filled.
    pub added: u64,
    /// Segment files renamed from a segment a checkpoint released.
    pub recycled: u64,
    /// Segment files unlinked.
    pub removed: u64,
}

/// Counters of the log (all since open).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Records inserted.
    pub records: u64,
    /// Bytes of log the records took, each rounded up to [`super::record::ALIGN`].
    pub bytes: u64,
    /// Full-page images logged (pg_stat_wal's wal_fpi), and the bytes they took in the
    /// log (compressed, with `wal_compression = lz4`).
    pub images: u64,
    /// Bytes those full-page images took in the log.
    pub image_bytes: u64,
    /// Flushes that wrote and synced.
    pub syncs: u64,
    /// `flush` calls that found the log already durable (someone else's sync covered them).
    pub flush_free: u64,
    /// Flushes forced by the buffer pool writing a page whose record was not yet durable.
    pub forced_by_pages: u64,
    /// Segments the flush leader had to make itself, every committer waiting, because
    /// none was prepared ahead (the WAL writer fell behind). 0 when it keeps up.
    pub segments_created_inline: u64,
    /// Times the flush leader found its next segment not yet prepared and waited for a
    /// preparation in progress to finish it.
    pub segment_waits_inline: u64,
    /// Flush leaders that slept `commit_delay` before taking their batch.
    pub commit_delays: u64,
    /// Inserts that found the ring full and had to write (and sync) the log themselves
    /// before they could copy their record (pg_stat_wal's wal_buffers_full).
    pub buffers_full: u64,
    /// Times an insert woke the WAL writer to write the log
    /// (`writer_flush_after`).
    pub writer_kicks: u64,
    /// Flush leaders that, on getting their turn to sync, wrote the commits that had
    /// arrived while they waited for the previous sync, so their sync covered them too.
    pub top_ups: u64,
    /// Flush leaders with nothing to write (their record was in the batch before, still
    /// syncing): they waited for that batch's publication without a sync place.
    pub empty_batches: u64,
    /// Time spent in the flush leader's fsyncs (pg_stat_wal's wal_sync_time), ns.
    pub sync_ns: u64,
    /// Time from a leader's end of sync to the next leader's start of sync, summed over
    /// back-to-back syncs (the next was waiting for a place in the pipeline): the handoff
    /// gap of the sync pipeline, ns.
    pub sync_gap_ns: u64,
    /// Syncs whose gap is in `sync_gap_ns` (the next leader was already waiting).
    pub sync_gaps: u64,
    /// Syncs started while another leader held a place in the pipeline (its sync running,
    /// or its batch not yet published); only with `syncs_in_flight` above 1.
    pub overlapped_syncs: u64,
    /// Bytes written to segment files (PostgreSQL 18's pg_stat_io WAL `write_bytes`):
    /// the records, the padding below, and nothing twice (a flush writes from where the
    /// last one ended).
    pub write_bytes: u64,
    /// Padding a flush put after the last record to end on a [`super::WAL_BLOCK`]
    /// boundary (PostgreSQL instead rewrites the partial page on the next flush): at
    /// high commit rates with few commits per flush, a large share of `write_bytes`.
    pub pad_bytes: u64,
    /// Writes and syncs of the durable end (`wal_durable_end`): at most one per group of
    /// acknowledged commits.
    pub durable_end_syncs: u64,
    /// Vouching records [`super::Wal::flush_vouched`] inserted and flushed, one per
    /// commit-log or multixact write round that found new log to vouch for.
    pub vouches: u64,
}
