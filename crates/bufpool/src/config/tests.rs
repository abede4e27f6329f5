//! The knob table, `Config` and its builder, against their contracts.

use super::*;

#[test]
fn the_knob_table_sets_every_field() {
    // Two configs whose every field starts different: equal once the table's defaults are
    // stored, so no field keeps a placeholder (every field has a row).
    let a = Config::from_table(Config::blank(true));
    let b = Config::from_table(Config::blank(false));
    assert_eq!(
        a, b,
        "a field of Config has no knob row setting its default"
    );
    assert_eq!(a, Config::default());
}

#[test]
fn shared_buffers_in_bytes_or_buffers() {
    let mut c = Config::default();
    c.set("shared_buffers", "64MB").unwrap();
    assert_eq!(c.nbuffers(), 8192);
    c.set("shared_buffers", "1000").unwrap();
    assert_eq!(c.nbuffers(), 1000);
    c.set("block_size", "16kB").unwrap();
    c.set("shared_buffers", "64MB").unwrap();
    assert_eq!(c.nbuffers(), 4096);
    c.validate().unwrap();
}

/// Proves: the checkpoint knobs reach the write options: pages from bytes at the
/// page size, the context scope, the O_DSYNC switch.
#[test]
fn checkpoint_knobs_build_the_write_options() {
    let mut c = Config::default();
    let o = c.checkpoint_write_options();
    assert_eq!(
        (o.combine_pages, o.flush_after_pages, o.writers),
        (16, 32, 1)
    );
    assert!(o.sort && !o.durable && o.writeback == WritebackScope::PerTablespace);
    for (k, v) in [
        ("block_size", "4kB"),
        ("io_combine_limit", "8kB"),
        ("checkpoint_flush_after", "0B"),
        ("checkpoint_writeback_context", "shared"),
        ("checkpoint_sync_method", "open_datasync"),
        ("checkpoint_sort", "off"),
        ("checkpoint_writers", "4"),
        ("checkpoint_completion_target", "0.5"),
    ] {
        c.set(k, v).unwrap();
        assert_eq!(c.get(k).unwrap(), v, "{k}");
    }
    let o = c.checkpoint_write_options();
    assert_eq!((o.combine_pages, o.flush_after_pages, o.writers), (2, 0, 4));
    assert!(!o.sort && o.durable && o.writeback == WritebackScope::Shared);
    assert_eq!(c.checkpoint_completion_target(), 0.5);
    c.set("io_combine_limit", "1MB").unwrap();
    assert_eq!(
        c.checkpoint_write_options().combine_pages,
        MAX_COMBINE_PAGES
    );
}

/// Proves: the read-stream knobs reach the stream's and the pool's options, and the
/// I/O worker count is checked by the pool's own validation too.
#[test]
fn read_stream_knobs_build_the_stream_and_pool_options() {
    let mut c = Config::default();
    let o = c.read_stream_options();
    assert_eq!(o.io_method, Some(IoMethod::Worker));
    assert_eq!(
        (o.io_combine_limit_bytes, o.io_concurrency),
        (128 << 10, 16)
    );
    assert_eq!(o.max_pins, None);
    for (k, v) in [
        ("io_method", "io_uring"),
        ("io_workers", "5"),
        ("effective_io_concurrency", "0"),
        ("io_combine_limit", "1MB"),
    ] {
        c.set(k, v).unwrap();
        assert_eq!(c.get(k).unwrap(), v, "{k}");
    }
    let o = c.read_stream_options();
    assert_eq!(o.io_method, Some(IoMethod::IoUring));
    assert_eq!((o.io_combine_limit_bytes, o.io_concurrency), (1 << 20, 0));
    let p = c.pool_options(8192).unwrap();
    assert_eq!(
        p.aio,
        AioOptions {
            method: IoMethod::IoUring,
            workers: 5
        }
    );
    c.set("io_method", "sync").unwrap();
    assert_eq!(c.pool_options(8192).unwrap().aio.method, IoMethod::Sync);
    let bad = PoolOptions {
        aio: AioOptions {
            workers: 0,
            ..p.aio
        },
        ..p
    };
    assert_eq!(bad.validate(8192).unwrap_err().knob, "io_workers");
}

/// Proves: knobs related by a rule can be applied in any order with `set_deferred`, and
/// `validate` still names the knob that breaks a rule.
#[test]
fn deferred_sets_check_relations_only_at_validate() {
    let mut c = Config::default();
    assert!(
        c.set("max_wal_size", "4MB").is_err(),
        "below min_wal_size (80MB)"
    );
    for (k, v) in [
        ("max_wal_size", "4MB"),
        ("min_wal_size", "2MB"),
        ("wal_segment_size", "1MB"),
    ] {
        c.set_deferred(k, v).unwrap();
    }
    c.validate().unwrap();
    assert!(c.set_deferred("max_wal_size", "lots").is_err());
    c.set_deferred("min_wal_size", "8MB").unwrap();
    let err = c.validate().unwrap_err();
    assert!(
        err.knob == "max_wal_size" || err.knob == "min_wal_size",
        "{err}"
    );
}

#[test]
fn every_knob_rejects_out_of_range_values_naming_itself() {
    let cases = [
        ("shared_buffers", "15"),
        ("shared_buffers", "64kB"),
        ("shared_buffers", "lots"),
        ("block_size", "3kB"),
        ("block_size", "65536"),
        ("segment_size", "1000"),
        ("segment_size", "0"),
        ("segment_size", "128GB"),
        ("buffer_mapping_partitions", "0"),
        ("buffer_mapping_partitions", "100"),
        ("buffer_mapping_partitions", "131072"),
        ("huge_pages", "maybe"),
        ("io_direct", "sometimes"),
        ("synchronous_commit", "maybe"),
        ("early_lock_release", "sometimes"),
        ("full_page_writes", "2"),
        ("wal_compression", "zstd"),
        ("wal_segment_size", "1000kB"),
        ("wal_segment_size", "32kB"),
        ("wal_segment_size", "2GB"),
        ("wal_buffers", "4kB"),
        ("wal_sync_method", "osync"),
        ("wal_writer_delay", "0"),
        ("wal_writer_delay", "11s"),
        ("wal_writer_delay", "5h"),
        ("commit_delay", "100001"),
        ("commit_delay", "-1"),
        ("commit_siblings", "1001"),
        ("commit_siblings", "many"),
        ("wal_syncs_in_flight", "0"),
        ("wal_syncs_in_flight", "9"),
        ("wal_writer_flush_after", "2GB"),
        ("wal_writer_flush_after", "-1"),
        ("checkpoint_timeout", "29s"),
        ("checkpoint_timeout", "2d"),
        ("bgwriter", "sometimes"),
        ("bgwriter_strategy", "fifo"),
        ("bgwriter_delay", "5ms"),
        ("bgwriter_delay", "11s"),
        ("bgwriter_lru_maxpages", "1073741824"),
        ("bgwriter_lru_maxpages", "-2"),
        ("transaction_buffers", "1"),
        ("transaction_buffers", "131073"),
        ("transaction_buffers", "15"),
        ("transaction_buffers", "100"),
        ("subtransaction_buffers", "8"),
        ("subtransaction_buffers", "40"),
        ("subtransaction_buffers", "131088"),
        ("multixact_offset_buffers", "0"),
        ("multixact_offset_buffers", "17"),
        ("multixact_offset_buffers", "lots"),
        ("multixact_member_buffers", "1"),
        ("multixact_member_buffers", "48.5"),
        ("multixact_member_buffers", "262144"),
        ("slru_design", "mutex"),
        ("slru_design", "bank"),
        ("bgwriter_lru_multiplier", "10.5"),
        ("bgwriter_lru_multiplier", "-1"),
        ("bgwriter_lru_multiplier", "1.2345"),
        ("bgwriter_lru_multiplier", "two"),
        ("bgwriter_flush_after", "3MB"),
        ("synchronize_seqscans", "sometimes"),
        ("seqscan_strategy", "half"),
        ("seqscan_sync_threshold", "-0.1"),
        ("seqscan_sync_threshold", "1000.001"),
        ("seqscan_ring_threshold", "five"),
        ("seqscan_cache_trail", "2"),
        ("checkpointer", "maybe"),
        ("checkpoint_completion_target", "1.1"),
        ("checkpoint_completion_target", "-0.5"),
        ("max_wal_size", "64kB"),
        ("max_wal_size", "2TB"),
        ("max_wal_size", "16MB"), // less than min_wal_size (80MB)
        ("min_wal_size", "16MB"), // one 16MB WAL segment
        ("min_wal_size", "2GB"),  // more than max_wal_size (1GB)
        ("checkpoint_sort", "2"),
        ("checkpoint_flush_after", "4MB"),
        ("checkpoint_writeback_context", "device"),
        ("io_combine_limit", "2kB"),
        ("io_combine_limit", "2MB"),
        ("io_method", "posix_aio"),
        ("io_method", "uring"),
        ("io_workers", "0"),
        ("io_workers", "33"),
        ("effective_io_concurrency", "1001"),
        ("effective_io_concurrency", "-1"),
        ("checkpoint_writers", "0"),
        ("checkpoint_writers", "65"),
        ("bgwriter_writers", "0"),
        ("bgwriter_writers", "33"),
        ("bgwriter_io_method", "aio"),
        ("checkpoint_sync_method", "osync"),
        ("log_checkpoints", "loud"),
        ("bulkread_ring_size", "64kB"),
        ("bulkread_ring_size", "32GB"),
        ("bulkread_ring_size", "lots"),
        ("bulkwrite_ring_size", "1"),
        ("bulkwrite_ring_size", "17GB"),
        ("vacuum_buffer_usage_limit", "127kB"),
        ("vacuum_buffer_usage_limit", "-1"),
        ("ring_growth", "sometimes"),
        // The default policy, the clock, has no list of frequent pages to clean alone.
        ("bgwriter_frequent_only", "on"),
        ("buffer_replacement", "lru"),
    ];
    for (knob, value) in cases {
        let before = Config::default();
        let mut c = before.clone();
        let err = c.set(knob, value).unwrap_err();
        assert_eq!(err.knob, knob, "{knob}={value}");
        let msg = err.to_string();
        assert!(msg.contains(knob) && msg.contains(value), "{msg}");
        assert!(msg.contains("allowed"), "{msg}");
        assert_eq!(c, before, "a rejected {knob} changed the config");
    }
    let err = Config::default().set("shared_bufers", "1").unwrap_err();
    assert!(err.to_string().contains("shared_buffers"), "{err}");
    let mut c = Config::default();
    c.set("buffer_replacement", "car").unwrap();
    c.set("bgwriter_frequent_only", "on").unwrap();
    // Changing the policy afterwards is caught where the knobs are checked together.
    c.set("buffer_replacement", "sieve").unwrap();
    let err = c.validate().unwrap_err();
    assert_eq!(err.knob, "bgwriter_frequent_only");
    assert!(err.to_string().contains("frequent list"), "{err}");
}

/// Proves: SLRU sizes are whole banks (set by hand: validated; automatic: rounded
/// down), and `slru_set` carries every size and the design.
#[test]
fn slru_sizes_are_whole_banks() {
    let mut c = Config::default();
    let s = c.slru_set(100_000); // 100000/512 = 195 -> 192
    assert_eq!(
        s,
        SlruSet {
            design: SlruDesign::BanksLocksLru,
            transaction_buffers: 192,
            subtransaction_buffers: 192,
            multixact_offset_buffers: 16,
            multixact_member_buffers: 32,
        }
    );
    let small = c.slru_set(1000);
    assert_eq!(
        (small.transaction_buffers, small.subtransaction_buffers),
        (128, 16)
    );
    for (k, v) in [
        ("transaction_buffers", "48"),
        ("subtransaction_buffers", "32"),
        ("multixact_offset_buffers", "64"),
        ("multixact_member_buffers", "128"),
        ("slru_design", "central"),
    ] {
        c.set(k, v).unwrap();
        assert_eq!(c.get(k).unwrap(), v);
    }
    let s = c.slru_set(100_000);
    assert_eq!(
        s.transaction(),
        crate::slru::SlruOptions {
            buffers: 48,
            design: SlruDesign::Central
        }
    );
    assert_eq!(
        (
            s.subtransaction().buffers,
            s.multixact_offset().buffers,
            s.multixact_member().buffers
        ),
        (32, 64, 128)
    );
    let err = c
        .set("multixact_member_buffers", "40")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("multiple of 16") && err.contains("16 to 131072"),
        "{err}"
    );
    c.set("slru_design", "banks").unwrap();
    assert_eq!(
        Config::builder()
            .slru_design(SlruDesign::Banks)
            .build()
            .unwrap()
            .slru_design,
        SlruDesign::Banks
    );
}

#[test]
fn validate_catches_relations_between_knobs() {
    let c = Config {
        segment_size: 8192 * 3,
        block_size: 16384,
        ..Config::default()
    };
    assert_eq!(c.validate().unwrap_err().knob, "segment_size");
    let c = Config {
        shared_buffers: PoolSize::Bytes(100 << 10),
        ..Config::default()
    };
    assert_eq!(c.validate().unwrap_err().knob, "shared_buffers");
}

#[test]
fn get_round_trips_through_set() {
    let mut c = Config::default();
    for k in KNOBS {
        let v = c.get(k.name).unwrap();
        c.set(k.name, &v)
            .unwrap_or_else(|e| panic!("{}={v}: {e}", k.name));
    }
    assert_eq!(c, Config::default());
}

#[test]
fn every_row_is_complete_and_its_default_is_valid() {
    let d = Config::default();
    d.validate().unwrap();
    for k in KNOBS {
        assert!(!k.description.is_empty(), "{}", k.name);
        assert!(k.min <= k.max, "{}", k.name);
        assert!(!k.allowed(DEFAULT_PAGE_SIZE).is_empty(), "{}", k.name);
        let mut c = d.clone();
        c.set(k.name, k.default)
            .unwrap_or_else(|e| panic!("default of {}: {e}", k.name));
        assert_eq!(c, d, "{}'s default text is not the default", k.name);
        assert_eq!(k.unit == Unit::Enum, !k.words.is_empty(), "{}", k.name);
    }
    let names: std::collections::HashSet<_> = KNOBS.iter().map(|k| k.name).collect();
    assert_eq!(names.len(), KNOBS.len(), "a knob name is repeated");
}

#[test]
fn allowed_texts_state_the_ranges() {
    assert_eq!(
        Config::allowed("checkpoint_timeout").unwrap(),
        "30s to 1d (units ms, s, min, h, d; a bare number is seconds)"
    );
    assert_eq!(
        Config::allowed("wal_sync_method").unwrap(),
        "fdatasync, fsync or open_datasync"
    );
    assert_eq!(
        Config::allowed("buffer_mapping_partitions").unwrap(),
        "a power of two from 1 to 65536"
    );
    assert!(Config::allowed("shared_buffers").unwrap().contains("16 to"));
    assert!(Config::allowed("wal_buffers")
        .unwrap()
        .starts_with("auto, or"));
    assert_eq!(Config::allowed("nope"), None);
}

#[test]
fn units_follow_postgresql() {
    let mut c = Config::default();
    c.set("checkpoint_timeout", "60").unwrap(); // bare = seconds
    assert_eq!(c.checkpoint_timeout_ms, 60_000);
    c.set("checkpoint_timeout", "2min").unwrap();
    assert_eq!(c.get("checkpoint_timeout").unwrap(), "120s");
    c.set("wal_writer_delay", "50").unwrap(); // bare = ms
    assert_eq!(c.wal_writer_delay_ms, 50);
    c.set("commit_delay", "10").unwrap(); // microseconds, as in PostgreSQL
    c.set("commit_siblings", "3").unwrap();
    assert_eq!((c.commit_delay_us, c.commit_siblings), (10, 3));
    assert_eq!(
        Config::default().wal_writer_flush_after,
        1 << 20,
        "wal_writer_flush_after defaults to PostgreSQL's 1MB"
    );
    c.set("wal_writer_flush_after", "256kB").unwrap();
    assert_eq!(
        c.wal_options().writer_flush_after,
        0,
        "commits flush the log themselves"
    );
    c.set("synchronous_commit", "off").unwrap();
    assert_eq!(c.wal_options().writer_flush_after, 256 << 10);
    c.set("wal_writer_flush_after", "0").unwrap();
    assert_eq!(c.get("wal_writer_flush_after").unwrap(), "0B");
    assert!(Config::default().early_lock_release, "on by default");
    assert_eq!(Config::default().wal_options().syncs_in_flight, 1);
    c.set("wal_syncs_in_flight", "2").unwrap();
    assert_eq!(c.wal_options().syncs_in_flight, 2);
    assert_eq!(c.get("wal_syncs_in_flight").unwrap(), "2");
    c.set("early_lock_release", "off").unwrap();
    assert!(!c.early_lock_release);
    assert_eq!(c.get("early_lock_release").unwrap(), "off");
    assert_eq!(
        (
            c.wal_options().commit_delay_us,
            c.wal_options().commit_siblings
        ),
        (10, 3)
    );
    assert_eq!(
        Config::builder()
            .commit_delay(Duration::from_micros(250))
            .build()
            .unwrap()
            .commit_delay_us,
        250
    );
    c.set("wal_buffers", "-1").unwrap();
    assert_eq!(c.wal_buffers, None);
    c.set("wal_buffers", "1MB").unwrap();
    assert_eq!(c.get("wal_buffers").unwrap(), "1MB");
}

#[test]
fn builder_matches_the_text_form_and_validates() {
    let built = Config::builder()
        .shared_buffers(64 << 20)
        .synchronous_commit(false)
        .wal_sync_method(SyncMethod::Fsync)
        .checkpoint_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut text = Config::default();
    text.set("shared_buffers", "64MB").unwrap();
    text.set("synchronous_commit", "off").unwrap();
    text.set("wal_sync_method", "fsync").unwrap();
    text.set("checkpoint_timeout", "30s").unwrap();
    assert_eq!(built, text);
    let err = Config::builder()
        .buffer_mapping_partitions(3)
        .build()
        .unwrap_err();
    assert_eq!(err.knob, "buffer_mapping_partitions");
}

#[test]
fn scan_knobs_reach_the_scan_options() {
    let d = Config::default().scan_options();
    assert_eq!(
        d,
        ScanOptions::default(),
        "table defaults = ScanOptions defaults"
    );
    let mut c = Config::default();
    c.set("seqscan_strategy", "seed003").unwrap();
    c.set("seqscan_sync_threshold", "0.25").unwrap();
    c.set("seqscan_ring_threshold", "12.5").unwrap();
    c.set("seqscan_cache_trail", "on").unwrap();
    c.set("synchronize_seqscans", "off").unwrap();
    let o = c.scan_options();
    assert_eq!(o.strategy, SeqscanStrategy::Seed003);
    assert_eq!(o.sync_threshold_thousandths, 250);
    assert_eq!(o.ring_threshold_thousandths, 12_500);
    assert!(o.cache_trail && !o.synchronize);
    assert_eq!(c.get("seqscan_strategy").unwrap(), "seed003");
    assert_eq!(c.get("seqscan_ring_threshold").unwrap(), "12.5");
    let built = Config::builder()
        .seqscan_strategy(SeqscanStrategy::Seed003)
        .seqscan_ring_threshold(12.5)
        .seqscan_sync_threshold(0.25)
        .seqscan_cache_trail(true)
        .synchronize_seqscans(false)
        .build()
        .unwrap();
    assert_eq!(built.scan_options(), o);
}

#[test]
fn bgwriter_knobs_parse_and_reach_the_pool_options() {
    let mut c = Config::default();
    assert!(c.bgwriter);
    assert_eq!(c.get("bgwriter_lru_multiplier").unwrap(), "2.0");
    assert_eq!(c.get("bgwriter_lru_maxpages").unwrap(), "auto");
    assert_eq!(c.get("bgwriter_flush_after").unwrap(), "512kB");
    c.set("bgwriter", "off").unwrap();
    c.set("bgwriter_strategy", "victim-queue").unwrap();
    c.set("bgwriter_delay", "10").unwrap(); // bare = ms, PostgreSQL's unit
    c.set("bgwriter_lru_maxpages", "0").unwrap();
    c.set("bgwriter_lru_multiplier", "1.25").unwrap();
    c.set("bgwriter_flush_after", "0").unwrap();
    assert_eq!(c.get("bgwriter_flush_once").unwrap(), "on");
    c.set("bgwriter_flush_once", "off").unwrap();
    assert_eq!(c.get("bgwriter_device_share").unwrap(), "1.0");
    c.set("bgwriter_device_share", "0.25").unwrap();
    assert!(c.set("bgwriter_device_share", "1.5").is_err(), "past 1.0");
    assert_eq!(c.get("bgwriter_io_method").unwrap(), "io_uring");
    c.set("bgwriter_writers", "4").unwrap();
    c.set("bgwriter_io_method", "threads").unwrap();
    c.set("bgwriter_adaptive_nap", "off").unwrap();
    c.set("bgwriter_lead", "off").unwrap();
    c.set("bgwriter_lru_percent", "2").unwrap();
    assert_eq!(c.get("bgwriter_lru_multiplier").unwrap(), "1.25");
    let o = c.pool_options(8192).unwrap().bgwriter;
    assert_eq!(
        o,
        BgwriterOptions {
            enabled: false,
            strategy: BgwriterStrategy::VictimQueue,
            delay_ms: 10,
            lru_maxpages: Some(0),
            lru_multiplier_thousandths: 1250,
            flush_after_bytes: 0,
            flush_once: false,
            device_share_thousandths: 250,
            writers: 4,
            io: BgwriterIo::Threads,
            adaptive_nap: false,
            lead: false,
            lru_percent_thousandths: 2000,
            frequent_only: false,
        }
    );
    assert_eq!(
        Config::allowed("bgwriter_lru_multiplier").unwrap(),
        "0.0 to 10.0"
    );
    assert_eq!(
        Config::allowed("bgwriter_device_share").unwrap(),
        "0.0 to 1.0"
    );
    assert_eq!(
        Config::allowed("bgwriter_lru_maxpages").unwrap(),
        "auto, or 0 to 1073741823"
    );
    assert_eq!(
        Config::allowed("bgwriter_delay").unwrap(),
        "10ms to 10s (units ms, s, min, h, d; a bare number is ms)"
    );
    // Automatic maxpages follows the pool: 64 MiB of 8 KiB pages, half per round.
    let c = Config::builder().shared_buffers(64 << 20).build().unwrap();
    assert_eq!(
        c.pool_options(8192)
            .unwrap()
            .bgwriter
            .lru_maxpages_for(8192),
        4096
    );
    let built = Config::builder()
        .bgwriter_lru_multiplier(3.5)
        .bgwriter_strategy(BgwriterStrategy::DirtyChain)
        .bgwriter_delay(Duration::from_millis(50))
        .build()
        .unwrap();
    let mut text = Config::default();
    text.set("bgwriter_lru_multiplier", "3.5").unwrap();
    text.set("bgwriter_strategy", "dirty-chain").unwrap();
    text.set("bgwriter_delay", "50ms").unwrap();
    assert_eq!(built, text);
    assert_eq!(
        Config::builder()
            .bgwriter_lru_multiplier(11.0)
            .build()
            .unwrap_err()
            .knob,
        "bgwriter_lru_multiplier"
    );
}

/// Proves: the ring knobs parse, keep their defaults, accept 0 (no ring), name
/// themselves and their range when refused, and reach the pool's options.
#[test]
fn ring_knobs_parse_and_reach_the_pool_options() {
    let mut c = Config::default();
    assert_eq!(c.ring_options(), RingOptions::default());
    assert_eq!(c.get("bulkread_ring_size").unwrap(), "256kB");
    assert_eq!(c.get("bulkwrite_ring_size").unwrap(), "16MB");
    assert_eq!(c.get("vacuum_buffer_usage_limit").unwrap(), "2MB");
    assert_eq!(c.get("ring_growth").unwrap(), "on");
    c.set("bulkread_ring_size", "0").unwrap();
    c.set("bulkwrite_ring_size", "2MB").unwrap();
    c.set("vacuum_buffer_usage_limit", "128kB").unwrap();
    c.set("ring_growth", "off").unwrap();
    assert_eq!(
        c.pool_options(8192).unwrap().rings,
        RingOptions {
            bulkread_bytes: 0,
            bulkwrite_bytes: 2 << 20,
            vacuum_bytes: 128 << 10,
            growth: false,
        }
    );
    let err = c.set("vacuum_buffer_usage_limit", "64kB").unwrap_err();
    assert_eq!(err.knob, "vacuum_buffer_usage_limit");
    assert!(
        err.to_string().contains("0 (no ring) or at least 128kB"),
        "{err}"
    );
    assert_eq!(
        Config::allowed("bulkread_ring_size").unwrap(),
        "0B to 16GB, 0 (no ring) or at least 128kB"
    );
    let built = Config::builder()
        .bulkwrite_ring_size(256 << 10)
        .ring_growth(false)
        .build()
        .unwrap();
    let mut text = Config::default();
    text.set("bulkwrite_ring_size", "256kB").unwrap();
    text.set("ring_growth", "off").unwrap();
    assert_eq!(built, text);
    assert_eq!(
        Config::builder()
            .bulkread_ring_size(1000)
            .build()
            .unwrap_err()
            .knob,
        "bulkread_ring_size"
    );
}

#[test]
fn pool_options_use_the_directory_page_size() {
    let c = Config::builder().shared_buffers(64 << 20).build().unwrap();
    assert_eq!(c.pool_options(16384).unwrap().nbuffers, 4096);
    assert_eq!(c.pool_options(8192).unwrap().nbuffers, 8192);
}
