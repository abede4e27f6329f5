//! The translation of a [`Config`] into each lower layer's own options (the layers below
//! never read the knob table).

use super::*;

impl Config {
    /// The WAL ring size in effect (bytes, a multiple of 4 KiB).
    pub fn wal_buffers_bytes(&self) -> u64 {
        // At least 2 x WAL_BUFFERS_MIN_PAGES pages: a record holds full-page images of
        // every page it changes and must fit the ring with room to spare.
        let floor = MIN_WAL_BUFFERS.max(2 * WAL_BUFFERS_MIN_PAGES * self.block_size as u64);
        let auto = (self.nbuffers() as u64 * self.block_size as u64 / 32)
            .clamp(floor, floor.max(16 << 20));
        let b = self.wal_buffers.unwrap_or(auto);
        b.div_ceil(4096) * 4096
    }

    /// Number of buffers in the pool (after validation).
    pub fn nbuffers(&self) -> usize {
        self.nbuffers_checked().expect("validated config") as usize
    }

    /// Blocks per relation segment (after validation).
    pub fn segment_blocks(&self) -> u32 {
        (self.segment_size / self.block_size as u64) as u32
    }

    pub(super) fn nbuffers_checked(&self) -> Result<u64, ConfigError> {
        let n = match self.shared_buffers {
            PoolSize::Buffers(n) => n,
            // A block_size of 0 (set through the public field) is refused, not divided by.
            PoolSize::Bytes(b) => b.checked_div(self.block_size as u64).unwrap_or(0),
        };
        if (MIN_BUFFERS..=MAX_BUFFERS).contains(&n) {
            Ok(n)
        } else {
            let v = self.get("shared_buffers").unwrap_or_default();
            Err(shared_buffers_error(v, self.block_size))
        }
    }

    /// Most buffers a resize may reach (after validation of `shared_buffers`); 0 for
    /// `auto` (the same as `shared_buffers`).
    pub(super) fn max_nbuffers_checked(&self) -> Result<u64, ConfigError> {
        let Some(size) = self.max_shared_buffers else {
            return Ok(0);
        };
        let n = match size {
            PoolSize::Buffers(n) => n,
            PoolSize::Bytes(b) => b.checked_div(self.block_size as u64).unwrap_or(0),
        };
        let shared = self.nbuffers_checked()?;
        if (shared..=MAX_BUFFERS).contains(&n) {
            Ok(n)
        } else {
            let v = self.get("max_shared_buffers").unwrap_or_default();
            Err(max_shared_buffers_error(v, Some(shared), self.block_size))
        }
    }

    /// The background writer's options.
    pub fn bgwriter_options(&self) -> BgwriterOptions {
        BgwriterOptions {
            enabled: self.bgwriter,
            strategy: self.bgwriter_strategy,
            delay_ms: self.bgwriter_delay_ms,
            lru_maxpages: self.bgwriter_lru_maxpages,
            lru_multiplier_thousandths: self.bgwriter_lru_multiplier_thousandths,
            flush_after_bytes: self.bgwriter_flush_after,
            flush_once: self.bgwriter_flush_once,
            device_share_thousandths: self.bgwriter_device_share_thousandths,
            writers: self.bgwriter_writers,
            io: self.bgwriter_io_method,
            adaptive_nap: self.bgwriter_adaptive_nap,
            lead: self.bgwriter_lead,
            lru_percent_thousandths: self.bgwriter_lru_percent_thousandths,
            frequent_only: self.bgwriter_frequent_only,
        }
    }

    /// The access-strategy rings' options.
    pub fn ring_options(&self) -> RingOptions {
        RingOptions {
            bulkread_bytes: self.bulkread_ring_size,
            bulkwrite_bytes: self.bulkwrite_ring_size,
            vacuum_bytes: self.vacuum_buffer_usage_limit,
            growth: self.ring_growth,
        }
    }

    /// How a checkpoint writes its pages.
    pub fn checkpoint_write_options(&self) -> CheckpointWriteOptions {
        let page = self.block_size as u64;
        CheckpointWriteOptions {
            sort: self.checkpoint_sort,
            combine_pages: ((self.io_combine_limit / page).max(1) as usize).min(MAX_COMBINE_PAGES),
            flush_after_pages: (self.checkpoint_flush_after / page) as usize,
            writeback: if self.checkpoint_writeback_shared {
                WritebackScope::Shared
            } else {
                WritebackScope::PerTablespace
            },
            writers: self.checkpoint_writers,
            durable: self.checkpoint_open_datasync,
        }
    }

    /// How read streams read ahead (`io_method`, `io_combine_limit`,
    /// `effective_io_concurrency`; the pin budget is the pool's share).
    pub fn read_stream_options(&self) -> ReadStreamOptions {
        ReadStreamOptions {
            io_method: Some(self.io_method),
            io_combine_limit_bytes: self.io_combine_limit as usize,
            io_concurrency: self.effective_io_concurrency as usize,
            max_pins: None,
        }
    }

    /// checkpoint_completion_target as a number.
    pub fn checkpoint_completion_target(&self) -> f64 {
        f64::from(self.checkpoint_completion_target_thousandths) / 1000.0
    }

    /// bgwriter_lru_multiplier as a number.
    pub fn bgwriter_lru_multiplier(&self) -> f64 {
        f64::from(self.bgwriter_lru_multiplier_thousandths) / 1000.0
    }

    /// The sequential-scan knobs (see [`crate::scan::plan`]).
    pub fn scan_options(&self) -> ScanOptions {
        ScanOptions {
            strategy: self.seqscan_strategy,
            synchronize: self.synchronize_seqscans,
            sync_threshold_thousandths: self.seqscan_sync_threshold_thousandths,
            ring_threshold_thousandths: self.seqscan_ring_threshold_thousandths,
            cache_trail: self.seqscan_cache_trail,
            sync_pacing: self.seqscan_sync_pacing,
        }
    }

    /// Commit-log pages for a pool of `nbuffers` buffers: the knob, or automatically
    /// shared_buffers / 512 within [`AUTO_TRANSACTION_BUFFERS`]. PostgreSQL 17's automatic
    /// value has a floor of 16 pages; ours is 128 (1 MiB of 8 KiB pages, four million
    /// transactions), because what the cache must hold is not a share of the pool but the
    /// statuses a workload looks up: a row revisited a minute after its last update needs
    /// the status of a transaction a minute old, which at 17,000 commits/s is a million
    /// transactions (32 pages) back. Below that, every such lookup is a read.
    /// The automatic value is rounded down to whole banks (of [`SLRU_BANK_SIZE`]), as
    /// PostgreSQL 17 does; a value set by hand must already be a multiple of it.
    pub fn transaction_buffers_for(&self, nbuffers: usize) -> usize {
        match self.transaction_buffers {
            Some(n) => n as usize,
            None => auto_slru_buffers(nbuffers, AUTO_TRANSACTION_BUFFERS),
        }
    }

    /// The size and design of every SLRU for a pool of `nbuffers` buffers. Sizes set by
    /// hand are whole banks (validated, as PostgreSQL 17's check_slru_buffers does);
    /// automatic ones are rounded down to whole banks (its SimpleLruAutotuneBuffers).
    pub fn slru_set(&self, nbuffers: usize) -> SlruSet {
        SlruSet {
            design: self.slru_design,
            transaction_buffers: self.transaction_buffers_for(nbuffers),
            subtransaction_buffers: match self.subtransaction_buffers {
                Some(n) => n as usize,
                None => auto_slru_buffers(nbuffers, AUTO_SUBTRANSACTION_BUFFERS),
            },
            multixact_offset_buffers: self.multixact_offset_buffers as usize,
            multixact_member_buffers: self.multixact_member_buffers as usize,
        }
    }

    /// The log's options.
    pub fn wal_options(&self) -> WalOptions {
        WalOptions {
            segment_size: self.wal_segment_size,
            buffers: self.wal_buffers_bytes(),
            sync_method: self.wal_sync_method,
            recycle_segments: (self.min_wal_size / self.wal_segment_size).max(1) as usize,
            prepare_segments: DEFAULT_PREPARE_SEGMENTS,
            commit_delay_us: self.commit_delay_us,
            commit_siblings: self.commit_siblings,
            syncs_in_flight: self.wal_syncs_in_flight as usize,
            durable_end: self.wal_durable_end,
            // With synchronous commits every commit flushes the log itself; the WAL writer
            // is woken by volume only when it is the one that flushes.
            writer_flush_after: if self.synchronous_commit {
                0
            } else {
                self.wal_writer_flush_after
            },
        }
    }
}

/// shared_buffers / 512 pages within `bounds`, rounded down to whole banks.
pub(super) fn auto_slru_buffers(nbuffers: usize, bounds: std::ops::RangeInclusive<u64>) -> usize {
    let n = (nbuffers as u64 / 512).clamp(*bounds.start(), *bounds.end());
    (n - n % SLRU_BANK_SIZE).max(SLRU_BANK_SIZE) as usize
}

impl PoolConfig for Config {
    /// Validates every knob, then builds the pool's options at the directory's page size
    /// (which wins over `block_size` for an existing directory).
    fn pool_options(&self, page_size: usize) -> Result<PoolOptions, ConfigError> {
        self.validate()?;
        let c = Config {
            block_size: page_size,
            ..self.clone()
        };
        Ok(PoolOptions {
            nbuffers: c.nbuffers_checked()? as usize,
            max_nbuffers: c.max_nbuffers_checked()? as usize,
            resize_duty_thousandths: self.resize_duty_cycle_thousandths,
            huge_pages: self.huge_pages,
            mapping_partitions: self.buffer_mapping_partitions,
            replacement: self.buffer_replacement,
            bgwriter: self.bgwriter_options(),
            rings: self.ring_options(),
            aio: AioOptions {
                method: self.io_method,
                workers: self.io_workers,
            },
        })
    }

    fn optimistic_reads(&self) -> bool {
        self.optimistic_reads
    }

    fn smgr_options(&self, create: bool) -> Result<SmgrOptions, ConfigError> {
        self.validate()?;
        Ok(SmgrOptions {
            block_size: self.block_size,
            segment_size: self.segment_size,
            wal_segment_size: Some(self.wal_segment_size),
            create,
            direct: self.io_direct,
            dsync: false,
        })
    }
}
