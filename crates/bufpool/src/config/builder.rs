//! The typed builder of [`Config`], for embedders.

use super::*;

pub(super) fn millis(d: Duration) -> u64 {
    d.as_millis().min(u128::from(u64::MAX)) as u64
}

/// Builds a [`Config`] with typed setters; [`ConfigBuilder::build`] validates it.
#[derive(Debug, Clone)]
pub struct ConfigBuilder(pub(super) Config);

/// Typed setters, one per field: `name(value)`.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty => |$c:ident, $v:ident| $set:expr;)*) => {
        $( $(#[$doc])* pub fn $name(mut self, $v: $ty) -> Self {
            let $c = &mut self.0;
            $set;
            self
        } )*
    };
}

/// Hands the list of typed setters (doc, name, type, how it sets the field) to macro
/// `$with`: one list for two builders, this one's [`setters`] and the engine builder's
/// forwarders (`engine/builder.rs`), so a knob added here reaches both.
macro_rules! with_config_setters {
    ($with:ident) => { $with! {
        /// Pool size in bytes.
        shared_buffers: u64 => |c, v| c.shared_buffers = PoolSize::Bytes(v);
        /// Pool size as a number of buffers.
        shared_buffers_count: u64 => |c, v| c.shared_buffers = PoolSize::Buffers(v);
        /// Most bytes the pool may be resized to while open (`Engine::resize_pool`).
        max_shared_buffers: u64 => |c, v| c.max_shared_buffers = Some(PoolSize::Bytes(v));
        /// Page size in bytes (fixed when a data directory is created).
        block_size: usize => |c, v| c.block_size = v;
        /// Size of one relation segment file in bytes (fixed at creation).
        segment_size: u64 => |c, v| c.segment_size = v;
        /// Lock partitions of the buffer mapping table.
        buffer_mapping_partitions: usize => |c, v| c.buffer_mapping_partitions = v;
        /// Which buffer a miss evicts.
        buffer_replacement: ReplacementPolicy => |c, v| c.buffer_replacement = v;
        /// Whether page memory uses huge pages.
        huge_pages: HugePages => |c, v| c.huge_pages = v;
        /// Whether data files are opened with O_DIRECT.
        io_direct: bool => |c, v| c.io_direct = v;
        /// Whether a commit waits until its WAL is durable.
        synchronous_commit: bool => |c, v| c.synchronous_commit = v;
        /// B-tree descents read inner pages optimistically (`optimistic_reads`).
        optimistic_reads: bool => |c, v| c.optimistic_reads = v;
        /// With synchronous commit: end a transaction at its commit record, before its flush.
        early_lock_release: bool => |c, v| c.early_lock_release = v;
        /// Whether a page's first change after a checkpoint logs a full-page image.
        full_page_writes: bool => |c, v| c.full_page_writes = v;
        /// `wal_compression`: true logs full-page images LZ4-compressed.
        wal_compression: bool => |c, v| c.wal_compression = v;
        /// Size of one WAL segment file in bytes.
        wal_segment_size: u64 => |c, v| c.wal_segment_size = v;
        /// WAL ring size in bytes; `None` is automatic.
        wal_buffers: Option<u64> => |c, v| c.wal_buffers = v;
        /// How the WAL is made durable.
        wal_sync_method: SyncMethod => |c, v| c.wal_sync_method = v;
        /// How often the WAL writer flushes when synchronous commit is off; rounded down to
        /// milliseconds.
        wal_writer_delay: Duration => |c, v| c.wal_writer_delay_ms = millis(v);
        /// Whether the engine runs the WAL writer thread.
        wal_writer: bool => |c, v| c.wal_writer = v;
        /// PostgreSQL's commit_delay (0 to 100 ms; whole microseconds).
        commit_delay: Duration => |c, v| c.commit_delay_us = v.as_micros().min(u128::from(u64::MAX)) as u64;
        /// PostgreSQL's commit_siblings.
        commit_siblings: u64 => |c, v| c.commit_siblings = v;
        /// WAL flush leaders that may sync at once (1 to 8; 1: serial).
        wal_syncs_in_flight: u64 => |c, v| c.wal_syncs_in_flight = v;
        /// Whether the log's durable end is kept (and synced) before commits are acknowledged.
        wal_durable_end: bool => |c, v| c.wal_durable_end = v;
        /// Bytes; 0: only wal_writer_delay wakes the WAL writer.
        wal_writer_flush_after: u64 => |c, v| c.wal_writer_flush_after = v;
        /// Time between automatic checkpoints; rounded down to milliseconds.
        checkpoint_timeout: Duration => |c, v| c.checkpoint_timeout_ms = millis(v);
        /// Whether the engine runs the checkpointer thread.
        checkpointer: bool => |c, v| c.checkpointer = v;
        /// Rounded to thousandths, within 0.0..=1.0.
        checkpoint_completion_target: f64 => |c, v| {
            c.checkpoint_completion_target_thousandths = (v * 1000.0).round().clamp(0.0, 1000.0) as u32
        };
        /// Bytes of WAL since the last redo point that trigger a checkpoint.
        max_wal_size: u64 => |c, v| c.max_wal_size = v;
        /// Bytes of released WAL kept for recycling.
        min_wal_size: u64 => |c, v| c.min_wal_size = v;
        /// Whether checkpoint pages are written sorted by file and block.
        checkpoint_sort: bool => |c, v| c.checkpoint_sort = v;
        /// Bytes; 0 disables the checkpoint's writeback hints.
        checkpoint_flush_after: u64 => |c, v| c.checkpoint_flush_after = v;
        /// One shared writeback context instead of one per tablespace.
        checkpoint_writeback_shared: bool => |c, v| c.checkpoint_writeback_shared = v;
        /// Bytes: the longest run of adjacent pages one read or write carries.
        io_combine_limit: u64 => |c, v| c.io_combine_limit = v;
        /// How read streams run reads ahead of use.
        io_method: IoMethod => |c, v| c.io_method = v;
        /// Threads of `io_method = worker`.
        io_workers: usize => |c, v| c.io_workers = v;
        /// Combined reads a read stream keeps in flight.
        effective_io_concurrency: u64 => |c, v| c.effective_io_concurrency = v;
        /// Threads writing a checkpoint's pages.
        checkpoint_writers: usize => |c, v| c.checkpoint_writers = v;
        /// checkpoint_sync_method = open_datasync.
        checkpoint_open_datasync: bool => |c, v| c.checkpoint_open_datasync = v;
        /// Whether each checkpoint logs a line.
        log_checkpoints: bool => |c, v| c.log_checkpoints = v;
        /// Whether the engine runs the background writer thread.
        bgwriter: bool => |c, v| c.bgwriter = v;
        /// What a bgwriter round does.
        bgwriter_strategy: BgwriterStrategy => |c, v| c.bgwriter_strategy = v;
        /// Sleep between background writer rounds; rounded down to milliseconds.
        bgwriter_delay: Duration => |c, v| c.bgwriter_delay_ms = millis(v);
        /// Most pages per round; `None` is automatic.
        bgwriter_lru_maxpages: Option<u64> => |c, v| c.bgwriter_lru_maxpages = v;
        /// Commit-log pages; `None` is automatic.
        transaction_buffers: Option<u64> => |c, v| c.transaction_buffers = v;
        /// Subtransaction SLRU pages; `None` is automatic.
        subtransaction_buffers: Option<u64> => |c, v| c.subtransaction_buffers = v;
        /// Multixact offset SLRU pages.
        multixact_offset_buffers: u64 => |c, v| c.multixact_offset_buffers = v;
        /// Multixact member SLRU pages.
        multixact_member_buffers: u64 => |c, v| c.multixact_member_buffers = v;
        /// How every SLRU is searched and locked.
        slru_design: SlruDesign => |c, v| c.slru_design = v;
        /// Whether transaction ends record their commit-log status through a group leader
        /// when the page's bank lock is busy.
        clog_group_update: bool => |c, v| c.clog_group_update = v;
        /// Rounded to thousandths; negative or NaN becomes 0 (and 10.0 is the maximum).
        bgwriter_lru_multiplier: f64 => |c, v| {
            c.bgwriter_lru_multiplier_thousandths = (v * 1000.0).round().clamp(0.0, u32::MAX as f64) as u32
        };
        /// Bytes; 0 disables the writeback hints.
        bgwriter_flush_after: u64 => |c, v| c.bgwriter_flush_after = v;
        /// Whether each block is hinted at most once per checkpoint cycle, on tablespaces
        /// whose device a probe finds fast.
        bgwriter_flush_once: bool => |c, v| c.bgwriter_flush_once = v;
        /// Rounded to thousandths; negative or NaN becomes 0 (and 1.0 is the maximum).
        bgwriter_device_share: f64 => |c, v| {
            c.bgwriter_device_share_thousandths = (v * 1000.0).round().clamp(0.0, u32::MAX as f64) as u32
        };
        /// Writes a bgwriter round keeps in flight.
        bgwriter_writers: usize => |c, v| c.bgwriter_writers = v;
        /// How the bgwriter keeps its writes in flight.
        bgwriter_io_method: BgwriterIo => |c, v| c.bgwriter_io_method = v;
        /// Whether a large sequential scan starts where another scan of the table is or ended.
        synchronize_seqscans: bool => |c, v| c.synchronize_seqscans = v;
        /// When a scan uses a ring and a synchronized start.
        seqscan_strategy: SeqscanStrategy => |c, v| c.seqscan_strategy = v;
        /// In pools, rounded to thousandths.
        seqscan_sync_threshold: f64 => |c, v| {
            c.seqscan_sync_threshold_thousandths = (v * 1000.0).round().clamp(0.0, u64::MAX as f64) as u64
        };
        /// In pools, rounded to thousandths.
        seqscan_ring_threshold: f64 => |c, v| {
            c.seqscan_ring_threshold_thousandths = (v * 1000.0).round().clamp(0.0, u64::MAX as f64) as u64
        };
        /// Whether a synchronized scan that keeps its pages first reads backwards over the
        /// pages still cached.
        seqscan_cache_trail: bool => |c, v| c.seqscan_cache_trail = v;
        /// Synchronized ring scans of one table wait for each other.
        seqscan_sync_pacing: bool => |c, v| c.seqscan_sync_pacing = v;
        /// Bytes of a bulk-read ring; 0 is no ring.
        bulkread_ring_size: u64 => |c, v| c.bulkread_ring_size = v;
        /// Bytes of a bulk-write ring (its cap when growing); 0 is no ring.
        bulkwrite_ring_size: u64 => |c, v| c.bulkwrite_ring_size = v;
        /// Bytes of a vacuum ring (its cap when growing); 0 is no ring.
        vacuum_buffer_usage_limit: u64 => |c, v| c.vacuum_buffer_usage_limit = v;
        /// Whether vacuum and bulk-write rings grow and shrink.
        ring_growth: bool => |c, v| c.ring_growth = v;
        /// Whether `bufpool bench` runs the autovacuum launcher.
        autovacuum: bool => |c, v| c.autovacuum = v;
        /// Time between the launcher's looks at the tables.
        autovacuum_naptime: Duration => |c, v| c.autovacuum_naptime_ms = millis(v);
        /// Dead versions that, beyond the scale factor's share, make a table due for
        /// autovacuum.
        autovacuum_vacuum_threshold: u64 => |c, v| c.autovacuum_vacuum_threshold = v;
        /// A share of the live rows, rounded to thousandths.
        autovacuum_vacuum_scale_factor: f64 => |c, v| {
            c.autovacuum_vacuum_scale_factor_thousandths = (v * 1000.0).round().clamp(0.0, u64::MAX as f64) as u64
        };
        /// Cost an autovacuum spends before it naps.
        autovacuum_vacuum_cost_limit: u64 => |c, v| c.autovacuum_vacuum_cost_limit = v;
        /// Rounded down to milliseconds.
        autovacuum_vacuum_cost_delay: Duration => |c, v| c.autovacuum_vacuum_cost_delay_ms = millis(v);
        /// pg_prewarm's autoprewarm: the block list saved and reloaded after open.
        autoprewarm: bool => |c, v| c.autoprewarm = v;
        /// Rounded down to milliseconds; zero saves only at shutdown.
        autoprewarm_interval: Duration => |c, v| c.autoprewarm_interval_ms = millis(v);
    } };
}
pub(crate) use with_config_setters;

impl ConfigBuilder {
    with_config_setters!(setters);

    /// Sets knob `name` from its text, as in `bufpool.conf` (`"64MB"`, `"on"`, `"30s"`);
    /// the rules between knobs are checked by [`ConfigBuilder::build`], once all are in.
    pub fn set(mut self, name: &str, value: &str) -> Result<Self, ConfigError> {
        self.0.set_deferred(name, value)?;
        Ok(self)
    }

    /// The config, if every knob is valid; else the first bad one.
    pub fn build(self) -> Result<Config, ConfigError> {
        self.0.validate()?;
        Ok(self.0)
    }
}
