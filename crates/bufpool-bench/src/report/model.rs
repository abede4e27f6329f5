//! The result of one benchmark run, as the benchmark writes it (JSON) and the report reads it.
//!
//! This is a contract between the code that runs the benchmark and the report: field names
//! are the JSON keys. Times are seconds from the start of the measured run, latencies are
//! milliseconds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `unix_s` (seconds since 1970) as RFC 3339 (ISO 8601) in UTC, e.g.
/// "2026-11-29T03:26:01Z".
pub fn rfc3339_utc(unix_s: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix_s);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// A run's start as the report shows it: "unix SECONDS" (older results) as RFC 3339.
pub fn started_at_shown(started_at: &str) -> String {
    match started_at
        .strip_prefix("unix ")
        .and_then(|s| s.trim().parse::<u64>().ok())
    {
        Some(s) => rfc3339_utc(s),
        None => started_at.to_string(),
    }
}

/// One run of the benchmark: its settings, its totals and its per-second log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Names the run in legends and table headers, e.g. "c4 sync".
    pub label: String,
    /// When the run started: RFC 3339 in UTC ([`rfc3339_utc`]); results written before
    /// 2026-11-29 say "unix SECONDS", which the report shows as RFC 3339 too.
    pub started_at: String,
    /// "tpcb-like" | "simple-update" | "select-only".
    pub mode: String,
    pub scale: u32,
    pub clients: u32,
    pub threads: u32,
    pub duration_s: f64,
    pub transactions: u64,
    pub failed: u64,
    pub tps: f64,
    pub latency_ms: LatencySummary,
    pub per_interval: PerInterval,
    pub buffers: BufferCounts,
    pub checkpoints: Vec<CheckpointSpan>,
    /// Every knob in effect, by name.
    pub config: BTreeMap<String, String>,
    /// The binary's version and commit and the machine (empty in results written
    /// before 2026-12-06).
    #[serde(default)]
    pub provenance: crate::provenance::Provenance,
    /// One entry per elapsed second.
    pub series: Vec<Second>,
    /// (bucket upper bound in ms, count), ascending: the transaction-latency distribution.
    pub latency_histogram: Vec<(f64, u64)>,
    /// The background writer's counters over the run (bufpool runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bgwriter: Option<BgwriterCounts>,
    /// The checkpointer's counters over the run (bufpool's; PostgreSQL's from
    /// pg_stat_checkpointer or pg_stat_bgwriter, with the CHECKPOINT after its run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpointer: Option<CheckpointerCounts>,
    /// The log's counters over the run (bufpool runs only; pg_stat_wal's kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wal: Option<WalCounts>,
    /// Each SLRU's counters over the run (pg_stat_slru's names; bufpool runs only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slru: Vec<SlruCounts>,
    /// The side script run beside the clients (`--side-script`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_script: Option<SideCounts>,
    /// What the clients' transactions waited for (bufpool runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits: Option<WaitProfile>,
    /// The process's resident memory over the run against its budget (bufpool runs on
    /// Linux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryUse>,
    /// Per-table row counters at the end and what autovacuum did (bufpool runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tables: Option<TableCounts>,
    /// What the run wrote, in bytes, by source and as the devices saw it (bufpool runs
    /// only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_written: Option<WriteBytes>,
    /// The pool's resizes during the run (`bench --resize-at`), in time order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resizes: Vec<PoolResizeRecord>,
    /// pg_stat_io over the run, PostgreSQL 18's rows (bufpool runs only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stat_io: Vec<StatIo>,
}

/// One resize of the pool during a run (`bench --resize-at`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolResizeRecord {
    /// When it began, seconds since the clients started.
    pub at_s: f64,
    /// The pool before and after, bytes (after: the size reached, if it failed).
    pub from_bytes: u64,
    pub to_bytes: u64,
    /// How long it took, ms.
    pub took_ms: f64,
    /// Dirty pages a shrink wrote, and valid pages it dropped from memory.
    pub pages_written: u64,
    pub pages_evicted: u64,
    /// Why it failed (a buffer stayed pinned, a write failed), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// pg_stat_user_tables for the run's tables, and the autovacuum launcher's counters
/// (`autovacuum` is absent when the knob was off).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TableCounts {
    /// One row per table, by its name.
    pub tables: Vec<TableRow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autovacuum: Option<AutovacuumCounts>,
}

/// One table's row in pg_stat_user_tables (as of the run's end; counted since the
/// directory was opened), with its size.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TableRow {
    pub relname: String,
    pub n_tup_ins: u64,
    pub n_tup_upd: u64,
    pub n_tup_del: u64,
    pub n_live_tup: u64,
    pub n_dead_tup: u64,
    pub vacuum_count: u64,
    pub autovacuum_count: u64,
    /// Pages in the main fork at the run's start and end.
    pub pages_start: u64,
    pub pages_end: u64,
}

/// What the autovacuum launcher did during the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AutovacuumCounts {
    pub rounds: u64,
    /// VACUUMs finished, and those the end of the run interrupted.
    pub vacuums: u64,
    #[serde(default)]
    pub interrupted: u64,
    pub pages: u64,
    pub removed: u64,
    pub cost_naps: u64,
    pub cost_nap_s: f64,
    /// Time spent vacuuming, naps included.
    pub vacuum_s: f64,
    /// When each finished VACUUM started and ended, seconds from the run's start, and its
    /// table.
    pub spans: Vec<(f64, f64, String)>,
}

/// What the clients' committed transactions waited for: all of them, those that took over
/// 5 ms (the per-second latency target's threshold) and over 10 ms (bufpool's per-thread
/// wait totals and the kernel's schedstat).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitProfile {
    pub all: WaitBucket,
    /// Absent in runs recorded before it existed.
    #[serde(default)]
    pub over_5ms: WaitBucket,
    pub over_10ms: WaitBucket,
    /// Each second's slowest committed transaction together (one per second that
    /// committed any): what the per-second maximum latency is made of. Absent in runs
    /// recorded before it existed.
    #[serde(default)]
    pub each_seconds_slowest: WaitBucket,
    /// The per-second trace: second i's slowest committed transaction (by the second it
    /// ended in) and what it waited for; `transactions` is 0 for a second that committed
    /// nothing.
    #[serde(default)]
    pub slowest_per_second: Vec<WaitBucket>,
}

/// Sums over a set of transactions, ms. `waits_ms` (by kind: row_lock, content_lock,
/// mapping_lock, proc_lock, buffer_io, data_read, data_write, wal_flush) do not overlap
/// each other. `on_cpu_ms` is time on a CPU; `runqueue_ms` time runnable without one;
/// both overlap the waits (a read's system call runs on a CPU, a woken waiter queues for
/// one inside its wait). Both are absent without the kernel's schedstats.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitBucket {
    pub transactions: u64,
    pub wall_ms: f64,
    pub waits_ms: BTreeMap<String, f64>,
    pub wait_counts: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_cpu_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runqueue_ms: Option<f64>,
    /// The `slru_lock` and `slru_io` waits split per SLRU (xact, subtrans,
    /// multixact_offsets, multixact_members, other), as PostgreSQL's per-SLRU wait events;
    /// only the SLRUs waited for.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub slru: BTreeMap<String, SlruWait>,
}

/// One SLRU's waits in a [`WaitBucket`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SlruWait {
    /// Time waiting for its bank (or central) lock, ms.
    pub lock_ms: f64,
    /// Those waits.
    pub lock_count: u64,
    /// Time in its page I/O (own or another thread's), ms.
    pub io_ms: f64,
    /// Those waits.
    pub io_count: u64,
}

/// What a side script (`bench --side-script`) did over a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SideCounts {
    /// "savepoint-overflow" | "long-running".
    pub script: String,
    pub transactions: u64,
    /// Savepoints (subtransactions) its transactions used.
    pub subtransactions: u64,
    /// Its pause before each commit, ms.
    pub pause_ms: f64,
    /// Its longest transaction, ms.
    pub longest_ms: f64,
}

/// The write-ahead log over a run: how well commits shared their syncs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WalCounts {
    pub records: u64,
    pub bytes: u64,
    /// Flushes that wrote and synced (pg_stat_wal's wal_sync).
    pub syncs: u64,
    /// Flush calls another thread's sync had already covered.
    pub flush_free: u64,
    /// Syncs forced by the pool writing a page whose record was not yet durable.
    pub forced_by_pages: u64,
    /// Segments a flush leader had to create itself (0 when preparation keeps up).
    pub segments_created_inline: u64,
    /// Flush leaders that slept `commit_delay`.
    pub commit_delays: u64,
    /// Inserts that found the WAL ring full and wrote the log themselves (pg_stat_wal's
    /// wal_buffers_full; 0 in runs saved before).
    #[serde(default)]
    pub buffers_full: u64,
    /// Times an insert woke the WAL writer (wal_writer_flush_after).
    #[serde(default)]
    pub writer_kicks: u64,
    /// Flush leaders that wrote the commits that arrived during the previous sync before
    /// their own sync.
    #[serde(default)]
    pub top_ups: u64,
    /// Syncs started while another leader's sync still ran (`wal_syncs_in_flight` > 1).
    #[serde(default)]
    pub overlapped_syncs: u64,
    /// Full-page images logged (pg_stat_wal's wal_fpi) and the log bytes they took
    /// (compressed with `wal_compression = lz4`); 0 in runs saved before.
    #[serde(default)]
    pub fpi: u64,
    #[serde(default)]
    pub fpi_bytes: u64,
    /// Bytes written to log segments, and the padding that ended flushes on a block
    /// (0 in runs saved before).
    #[serde(default)]
    pub write_bytes: u64,
    #[serde(default)]
    pub pad_bytes: u64,
    /// Transactions of the run per sync: 1 means no group commit at all.
    pub commits_per_sync: f64,
    /// Mean time of one WAL sync (fdatasync), µs; 0 in runs saved before.
    #[serde(default)]
    pub sync_us: f64,
    /// Mean handoff between one sync's end and the next one's start when the next leader
    /// was already queued (the sync pipeline's gap), µs; 0 in runs saved before.
    #[serde(default)]
    pub sync_gap_us: f64,
}

/// What a run wrote, in bytes, by source (PostgreSQL 18's pg_stat_io counts bytes): what
/// each writer passed to the OS, and what the block devices under the database wrote.
/// The sources can add up to more than the devices wrote (the OS cache absorbed a second
/// write of a page before writing it back) or less (file system metadata, other writers
/// on the same devices, the OS writing back what was written before the run).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WriteBytes {
    pub transactions: u64,
    /// Log segment writes (pg_stat_io's WAL `write_bytes`): records, of which full-page
    /// images, and the padding that ends each flush on a block.
    pub wal: u64,
    pub wal_fpi: u64,
    pub wal_padding: u64,
    /// Pool pages written by the checkpointer, the background writer and backends
    /// (evicting dirty victims), and pages added to relations (extensions).
    pub checkpointer: u64,
    pub bgwriter: u64,
    pub backend: u64,
    pub extend: u64,
    /// SLRU pages (commit log, subtransactions, multixacts).
    pub slru: u64,
    /// Of the pool's page writes, those whose writer then asked the kernel to write them
    /// back at once (writeback hints): not left in the OS cache, where a later write of
    /// the same page would replace them before they reach the device.
    pub writeback_hinted: u64,
    /// Sectors the block devices under the data directory, its log and its tablespaces
    /// wrote between a syncfs before the first transaction and one after the last (each
    /// device once; other writers to them count too; what the pool still holds dirty at
    /// the end does not). None where /sys does not say.
    pub device: Option<u64>,
    /// Write requests the same devices completed over the same span (field 5 of their
    /// stat files: after the block layer merged adjacent writes). None where /sys does
    /// not say, and in runs saved before 2026-12-07.
    #[serde(default)]
    pub device_write_ios: Option<u64>,
    /// The devices counted ("major:minor").
    pub devices: Vec<String>,
}

impl WriteBytes {
    /// Everything the engine passed to the OS.
    pub fn engine_total(&self) -> u64 {
        self.wal + self.checkpointer + self.bgwriter + self.backend + self.extend + self.slru
    }

    /// `bytes` per transaction of the run.
    pub fn per_tx(&self, bytes: u64) -> f64 {
        bytes as f64 / self.transactions.max(1) as f64
    }

    /// Each source's bytes per transaction, by name, in the order the tables print them.
    pub fn per_tx_rows(&self) -> Vec<(&'static str, f64)> {
        let mut rows = vec![
            ("wal", self.per_tx(self.wal)),
            ("  of which full-page images", self.per_tx(self.wal_fpi)),
            ("  of which padding", self.per_tx(self.wal_padding)),
            ("checkpointer", self.per_tx(self.checkpointer)),
            ("bgwriter", self.per_tx(self.bgwriter)),
            ("backends", self.per_tx(self.backend)),
            ("extensions", self.per_tx(self.extend)),
            ("slru", self.per_tx(self.slru)),
            ("engine total", self.per_tx(self.engine_total())),
            (
                "  of which writeback-hinted",
                self.per_tx(self.writeback_hinted),
            ),
        ];
        if let Some(d) = self.device {
            rows.push(("device", self.per_tx(d)));
        }
        rows
    }

    /// [`WriteBytes::per_tx_rows`] as a JSON object, keyed by the rows' names in snake
    /// case ("of_which_full-page_images"), with the devices' write requests per
    /// transaction (`device_write_ios`) where known.
    pub fn per_tx_json(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut map: serde_json::Map<_, _> = self
            .per_tx_rows()
            .into_iter()
            .map(|(k, v)| (k.trim().replace(' ', "_"), serde_json::json!(v)))
            .collect();
        if let Some(ios) = self.device_write_ios {
            map.insert(
                "device_write_ios".into(),
                serde_json::json!(self.per_tx(ios)),
            );
        }
        map
    }
}

/// One SLRU over a run: pg_stat_slru's counters, plus the doublewrite rounds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlruCounts {
    /// "xact" (the commit log).
    pub name: String,
    pub blks_zeroed: u64,
    pub blks_hit: u64,
    pub blks_read: u64,
    pub blks_written: u64,
    pub blks_exists: u64,
    pub flushes: u64,
    pub truncates: u64,
    /// Doublewrite rounds (each: copy, fsync, pages in place, fsync).
    #[serde(default)]
    pub rounds: u64,
    /// The commit log's group update (`clog_group_update`): groups led, and transaction
    /// ends recorded by another thread, their leader ("xact" only).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub group_leaders: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub group_members: u64,
}

impl SlruCounts {
    /// The counters of `name` between `before` and `after`.
    pub fn between(
        name: &str,
        before: &bufpool::slru::SlruStats,
        after: &bufpool::slru::SlruStats,
    ) -> SlruCounts {
        SlruCounts {
            name: name.to_string(),
            blks_zeroed: after.zeroed - before.zeroed,
            blks_hit: after.hits - before.hits,
            blks_read: after.reads - before.reads,
            blks_written: after.writes - before.writes,
            blks_exists: after.exists - before.exists,
            flushes: after.flushes - before.flushes,
            truncates: after.truncates - before.truncates,
            rounds: after.rounds - before.rounds,
            group_leaders: 0,
            group_members: 0,
        }
    }

    /// The commit log's counters between `before` and `after`, its group update's too.
    pub fn clog_between(
        before: &bufpool::txn::clog::ClogStats,
        after: &bufpool::txn::clog::ClogStats,
    ) -> SlruCounts {
        SlruCounts {
            group_leaders: after.group_leaders - before.group_leaders,
            group_members: after.group_members - before.group_members,
            ..SlruCounts::between("xact", &before.slru, &after.slru)
        }
    }
}

/// The background writer over a run (pg_stat_bgwriter's names where they exist).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BgwriterCounts {
    /// Buffers handed out by replacement.
    pub buffers_alloc: u64,
    /// Pages the bgwriter wrote.
    pub buffers_clean: u64,
    /// Rounds that stopped at bgwriter_lru_maxpages.
    pub maxwritten_clean: u64,
    /// Pages backends wrote themselves.
    pub buffers_backend: u64,
    pub rounds: u64,
    pub hibernations: u64,
    /// Pages the bgwriter wrote that were dirty again by its next round.
    #[serde(default)]
    pub wasted_writes: u64,
    /// Dirty victims allocations met (each cost a backend write) where the bgwriter had
    /// not looked yet in this lap (`unreached`) or had looked and left them (`passed`);
    /// rounds that found themselves lapped by the clock hand.
    #[serde(default)]
    pub dirty_victims_unreached: u64,
    #[serde(default)]
    pub dirty_victims_passed: u64,
    #[serde(default)]
    pub rounds_lapped: u64,
    /// Buffers rounds jumped over to keep their lead over the hand.
    #[serde(default)]
    pub buffers_skipped: u64,
    /// Bgwriter writes left unhinted because their block was hinted since the data files'
    /// last sync (`bgwriter_flush_once`).
    #[serde(default)]
    pub hints_repeated_skipped: u64,
    /// Rounds that stopped at the bgwriter's device pace (`bgwriter_device_share`).
    #[serde(default)]
    pub rounds_paced: u64,
    /// Mean and longest round, µs.
    pub round_us_mean: f64,
    pub round_us_max: f64,
    /// The strategy and the write cap in effect.
    pub strategy: String,
    pub lru_maxpages: u64,
    /// How its writes were kept in flight: io_uring, threads (or undecided: no round).
    #[serde(default)]
    pub io_method: String,
}

impl RunResult {
    /// Buffer writes by backends ÷ all buffer writes (None without writes).
    pub fn backend_write_share(&self) -> Option<f64> {
        let b = &self.buffers;
        let all = b.written_by_backend + b.written_by_bgwriter + b.written_by_checkpointer;
        (all > 0).then(|| b.written_by_backend as f64 / all as f64)
    }
}

/// Transaction latency over the whole run, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub avg: f64,
    pub stddev: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    /// The 99.9th percentile, and how many transactions took longer than 10, 50 and 100
    /// ms: the tail as counts, where one maximum is one stall (0 in runs saved before).
    #[serde(default)]
    pub p999: f64,
    #[serde(default)]
    pub over_10ms: u64,
    #[serde(default)]
    pub over_50ms: u64,
    #[serde(default)]
    pub over_100ms: u64,
}

/// Figures over the per-second intervals (pgbench's `--aggregate-interval=1` log).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerInterval {
    pub tps_min: f64,
    pub tps_p5: f64,
    pub tps_p50: f64,
    /// Median over the seconds of each second's maximum latency (ms): the typical
    /// second's slowest transaction.
    #[serde(default)]
    pub max_latency_p50: f64,
    /// 99th percentile over the seconds of each second's maximum latency (ms).
    pub max_latency_p99: f64,
}

/// Buffer pool counters over the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferCounts {
    pub hits: u64,
    pub reads: u64,
    pub written_by_backend: u64,
    pub written_by_bgwriter: u64,
    pub written_by_checkpointer: u64,
    pub allocated: u64,
}

/// A checkpoint that ran during the measured interval (seconds from the start).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointSpan {
    pub start_s: f64,
    pub end_s: f64,
    pub buffers_written: u64,
    /// Why it ran: "time", "wal", "force", "shutdown" (PostgreSQL's words).
    #[serde(default)]
    pub reason: String,
    /// Its write and sync phases, s; the longest single fsync, s; files fsynced; write
    /// calls (a combined run is one).
    #[serde(default)]
    pub write_s: f64,
    #[serde(default)]
    pub sync_s: f64,
    #[serde(default)]
    pub longest_sync_s: f64,
    #[serde(default)]
    pub sync_files: u64,
    #[serde(default)]
    pub write_calls: u64,
}

/// The checkpointer over a run (pg_stat_checkpointer's names).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointerCounts {
    pub num_timed: u64,
    pub num_requested: u64,
    pub num_done: u64,
    pub write_time_ms: u64,
    pub sync_time_ms: u64,
    pub buffers_written: u64,
    /// SLRU pages the checkpoints wrote (PostgreSQL 18's column).
    #[serde(default)]
    pub slru_written: u64,
}

/// One row of pg_stat_io as PostgreSQL 18 has it, over the run (bufpool runs only; see
/// the library's `stats::StatIoRow`: relation reads, writes and extends are blocks).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatIo {
    pub backend_type: String,
    pub object: String,
    pub context: String,
    pub reads: u64,
    pub read_bytes: u64,
    pub read_time_ms: f64,
    pub writes: u64,
    pub write_bytes: u64,
    pub write_time_ms: f64,
    pub writebacks: u64,
    pub writeback_time_ms: f64,
    pub extends: u64,
    pub extend_bytes: u64,
    pub extend_time_ms: f64,
    pub hits: u64,
    pub evictions: u64,
    pub reuses: u64,
    pub fsyncs: u64,
    pub fsync_time_ms: f64,
}

impl From<&bufpool::stats::StatIoRow> for StatIo {
    fn from(r: &bufpool::stats::StatIoRow) -> Self {
        StatIo {
            backend_type: r.backend_type.into(),
            object: r.object.into(),
            context: r.context.into(),
            reads: r.reads,
            read_bytes: r.read_bytes,
            read_time_ms: r.read_time_ms,
            writes: r.writes,
            write_bytes: r.write_bytes,
            write_time_ms: r.write_time_ms,
            writebacks: r.writebacks,
            writeback_time_ms: r.writeback_time_ms,
            extends: r.extends,
            extend_bytes: r.extend_bytes,
            extend_time_ms: r.extend_time_ms,
            hits: r.hits,
            evictions: r.evictions,
            reuses: r.reuses,
            fsyncs: r.fsyncs,
            fsync_time_ms: r.fsync_time_ms,
        }
    }
}

/// One elapsed second of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Second {
    /// Second index from 0.
    pub t: u32,
    pub transactions: u64,
    pub tps: f64,
    pub lat_avg_ms: f64,
    pub lat_max_ms: f64,
    pub lat_stddev_ms: f64,
    /// The second's largest schedule lag (`-R`: how late a transaction started against
    /// its schedule) and its longest execution (latency less lag), ms; 0 in runs saved
    /// before 2026-12-07. Without `-R` the lag is 0 and the execution the latency.
    #[serde(default)]
    pub lag_max_ms: f64,
    #[serde(default)]
    pub exec_max_ms: f64,
    pub written_backend: u64,
    pub written_bgwriter: u64,
    pub written_checkpointer: u64,
    /// The target rate of this second (`-R` or `--rate-profile`), if the run had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_tps: Option<f64>,
    /// Rows updated by `--batch-every` batches that committed in this second.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub batch_rows: u64,
    /// The process's resident memory at the end of this second, bytes (bufpool runs on
    /// Linux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// What the pool held at the end of this second (bufpool runs; the report's pool
    /// heatmap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolSecond>,
}

/// The pool at the end of one second, in buffers (pg_buffercache's view of it, summed).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PoolSecond {
    pub nbuffers: u32,
    /// Used buffers by usage count, 0 to 5.
    pub usage: Vec<u32>,
    pub unused: u32,
    pub dirty: u32,
    /// Buffers whose page a ring loaded: bulkread, bulkwrite, vacuum.
    pub ring: Vec<u32>,
    /// Buffers per relation: the run's tables and indexes by name, "other" for the rest
    /// (none of them named), only those holding a buffer.
    pub relations: BTreeMap<String, u32>,
}

#[cfg(test)]
impl PoolSecond {
    /// A 1,000-buffer pool filling over the first 20 seconds, hot pages climbing in usage,
    /// a scan through a ring at seconds 30 to 39, dirty pages drained by checkpoints.
    pub fn example(t: u32, checkpoint: bool) -> PoolSecond {
        let used = (50 * (t + 1)).min(1000);
        let scan = if (30..40).contains(&t) { 120 } else { 0 };
        let hot = (used - scan) * t.min(20) / 40;
        let mut usage = vec![scan, used - scan - hot, 0, 0, 0, hot];
        usage[2] = usage[1] / 3;
        usage[1] -= usage[2];
        let relations = [
            ("pgbench_accounts".to_string(), used * 7 / 10),
            ("pgbench_accounts_pkey".to_string(), used * 2 / 10),
            ("pgbench_history".to_string(), used - used * 9 / 10),
        ]
        .into_iter()
        .collect();
        PoolSecond {
            nbuffers: 1000,
            usage,
            unused: 1000 - used,
            dirty: if checkpoint { used / 10 } else { used / 3 },
            ring: vec![scan, 0, 0],
            relations,
        }
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[cfg(test)]
impl RunResult {
    /// A plausible 60-second tpcb-like run with two checkpoints (seconds 10..25 and 40..55)
    /// and noisy TPS that sags while a checkpoint writes. Deterministic for a given seed.
    pub fn example(label: &str, seed: u64) -> RunResult {
        let mut rng = SplitMix(seed ^ 0x5eed_0000_b0f0_0001);
        let base_tps = 900.0 + 400.0 * rng.unit();
        let checkpoints = vec![
            CheckpointSpan {
                start_s: 10.0,
                end_s: 25.0,
                buffers_written: 12_000 + rng.below(3_000),
                ..Default::default()
            },
            CheckpointSpan {
                start_s: 40.0,
                end_s: 55.0,
                buffers_written: 11_000 + rng.below(3_000),
                ..Default::default()
            },
        ];
        let in_checkpoint = |t: f64| checkpoints.iter().any(|c| t >= c.start_s && t < c.end_s);
        let mut series = Vec::with_capacity(60);
        for t in 0..60u32 {
            let busy = in_checkpoint(f64::from(t));
            let sag = if busy { 0.55 + 0.3 * rng.unit() } else { 1.0 };
            let tps = (base_tps * sag * (0.9 + 0.2 * rng.unit())).round();
            let lat_avg_ms = 4.0 * base_tps / tps.max(1.0) * (0.9 + 0.2 * rng.unit());
            let spike = if busy {
                20.0 + 200.0 * rng.unit()
            } else {
                2.0 + 6.0 * rng.unit()
            };
            series.push(Second {
                t,
                transactions: tps as u64,
                tps,
                lat_avg_ms,
                lat_max_ms: lat_avg_ms + spike,
                lat_stddev_ms: lat_avg_ms * (0.2 + if busy { 2.0 } else { 0.3 } * rng.unit()),
                lag_max_ms: 0.0,
                exec_max_ms: lat_avg_ms + spike,
                written_backend: if busy { rng.below(40) } else { rng.below(200) },
                written_bgwriter: 50 + rng.below(150),
                written_checkpointer: if busy { 700 + rng.below(200) } else { 0 },
                target_tps: None,
                batch_rows: 0,
                rss_bytes: None,
                pool: Some(PoolSecond::example(t, busy)),
            });
        }
        let transactions: u64 = series.iter().map(|s| s.transactions).sum();
        let mut latency_histogram = Vec::new();
        let mut bound = 0.25;
        // Roughly log-normal around 2^(centre - 2) ms with a long tail.
        let centre = 3.0 + 0.7 * (seed % 4) as f64 + 0.3 * rng.unit();
        for i in 0..16 {
            let weight = (-((f64::from(i) - centre).powi(2)) / 4.0).exp() + 0.002 * f64::from(i);
            latency_histogram.push((bound, (weight * transactions as f64 / 3.6) as u64));
            bound *= 2.0;
        }
        let counted: u64 = latency_histogram.iter().map(|b| b.1).sum();
        let quantile = |q: f64| {
            let mut seen = 0;
            for &(bound, count) in &latency_histogram {
                seen += count;
                if seen as f64 >= q * counted as f64 {
                    return bound;
                }
            }
            bound
        };
        let mut tps_sorted: Vec<f64> = series.iter().map(|s| s.tps).collect();
        tps_sorted.sort_by(f64::total_cmp);
        let mut max_sorted: Vec<f64> = series.iter().map(|s| s.lat_max_ms).collect();
        max_sorted.sort_by(f64::total_cmp);
        let written = |f: fn(&Second) -> u64| series.iter().map(f).sum::<u64>();
        let mut config = BTreeMap::new();
        for (k, v) in [
            ("shared_buffers", "128MB"),
            ("bgwriter_delay", "200ms"),
            ("bgwriter_lru_maxpages", "100"),
            ("checkpoint_timeout", "15s"),
            ("checkpoint_completion_target", "0.9"),
            (
                "synchronous_commit",
                if seed.is_multiple_of(2) { "on" } else { "off" },
            ),
            ("wal_buffers", "16MB"),
        ] {
            config.insert(k.to_string(), v.to_string());
        }
        RunResult {
            provenance: crate::provenance::Provenance::here(),
            label: label.to_string(),
            started_at: "2026-01-02T03:04:05Z".to_string(),
            mode: "tpcb-like".to_string(),
            scale: 10,
            clients: 4,
            threads: 2,
            duration_s: 60.0,
            transactions,
            failed: rng.below(3),
            tps: transactions as f64 / 60.0,
            latency_ms: LatencySummary {
                avg: series
                    .iter()
                    .map(|s| s.lat_avg_ms * s.transactions as f64)
                    .sum::<f64>()
                    / transactions as f64,
                stddev: 2.0 + 3.0 * rng.unit(),
                p50: quantile(0.50),
                p95: quantile(0.95),
                p99: quantile(0.99),
                max: max_sorted[59],
                p999: quantile(0.999),
                over_10ms: 0,
                over_50ms: 0,
                over_100ms: 0,
            },
            per_interval: PerInterval {
                tps_min: tps_sorted[0],
                tps_p5: tps_sorted[3],
                tps_p50: tps_sorted[30],
                max_latency_p50: max_sorted[30],
                max_latency_p99: max_sorted[59],
            },
            buffers: BufferCounts {
                hits: transactions * 40,
                reads: transactions / 3,
                written_by_backend: written(|s| s.written_backend),
                written_by_bgwriter: written(|s| s.written_bgwriter),
                written_by_checkpointer: written(|s| s.written_checkpointer),
                allocated: transactions / 3 + 100,
            },
            checkpoints,
            config,
            series,
            latency_histogram,
            bgwriter: None,
            checkpointer: None,
            wal: None,
            slru: Vec::new(),
            side_script: None,
            tables: None,
            bytes_written: None,
            waits: None,
            memory: None,
            resizes: Vec::new(),
            stat_io: Vec::new(),
        }
    }
}

/// splitmix64: enough randomness for synthetic test data, with no dependency.
#[cfg(test)]
struct SplitMix(u64);

#[cfg(test)]
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A run's resident memory against its budget: what the pool and the log are configured
/// to hold, the pool's own bookkeeping, and a fixed allowance for the rest of the process
/// (`memory_budget`). The memory-limit target is `peak_rss_bytes / budget_bytes` <= 1.05.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryUse {
    /// The most resident memory of the per-second samples, bytes.
    pub peak_rss_bytes: u64,
    /// `shared_buffers`, bytes.
    pub shared_buffers_bytes: u64,
    /// `wal_buffers` (resolved), bytes.
    pub wal_buffers_bytes: u64,
    /// The pool's bookkeeping beside its frames (descriptors, mapping, free list, policy,
    /// checkpoint and bgwriter state): `BufferPool::memory().overhead()`.
    pub pool_overhead_bytes: u64,
    /// The fixed allowance for everything else: code, thread stacks, the allocator, the
    /// bench's own per-second series.
    pub fixed_bytes: u64,
    /// The sum of the four.
    pub budget_bytes: u64,
    /// `peak_rss_bytes / budget_bytes`.
    pub rss_over_budget: f64,
}
