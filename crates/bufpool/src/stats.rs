//! I/O counters per (writer, context, operation), like PostgreSQL's pg_stat_io.
//!
//! Owns: [`IoStats`], a set of counter stripes, and the thread-local writer role.
//! Invariants: stripe `i < EXCLUSIVE_STRIPES` is written only by the one live thread whose
//! process-wide slot index is `i`, so its counters are bumped with a plain load and store (no
//! locked instruction, no shared cache line on the hit path); threads beyond that share an
//! overflow stripe updated with `fetch_add`. A snapshot sums all stripes with relaxed loads:
//! it is exact for counts that stopped changing and may lag by in-flight increments.
//! These counters are statistics, not synchronization, so they use `std` atomics directly
//! rather than the `crate::sync` facade (model tests do not assert on them).
//! Locks: a global mutex guards slot assignment, taken once per thread lifetime.
//!
//! Also here: per-relation row counters ([`RelCounters`], pg_stat_user_tables' `n_tup_*`,
//! `n_live_tup`, `n_dead_tup` and vacuum columns) in a [`RelStats`] table the engine owns.
//! A heap handle keeps its relation's counters (an `Arc`) from open, so counting a change is
//! one relaxed atomic add; the table's mutex is taken only to open a handle or list them.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

/// Who performed an I/O (pg_stat_io's `backend_type`): the calling thread's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IoWriter {
    /// A client backend: any thread not given another role (the default).
    #[default]
    Backend = 0,
    /// The background writer thread.
    Bgwriter = 1,
    /// The checkpointer thread.
    Checkpointer = 2,
    /// The engine's WAL writer thread.
    WalWriter = 3,
    /// An autovacuum (the bench's launcher thread, or an embedder's that sets the role).
    Autovacuum = 4,
    /// Recovery at open (PostgreSQL's startup process).
    Startup = 5,
    /// The engine's other background work: autoprewarm's reload and saves.
    BackgroundWorker = 6,
}

/// Why the buffer was used (pg_stat_io's `context`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IoContext {
    /// Ordinary use of the pool, without a ring (the default).
    #[default]
    Normal = 0,
    /// Through a bulk-read ring (a large sequential scan).
    BulkRead = 1,
    /// Through a bulk-write ring (a bulk load).
    BulkWrite = 2,
    /// Through a vacuum ring (VACUUM).
    Vacuum = 3,
}

/// What happened (pg_stat_io's columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoOp {
    /// A page found already in a buffer, with no read.
    Hit = 0,
    /// Reads from storage: blocks for relations, read operations for the WAL.
    Read = 1,
    /// Writes to storage: blocks for relations, write operations for the WAL.
    Write = 2,
    /// Blocks whose writeback the OS was asked to start (sync_file_range).
    Writeback = 3,
    /// Blocks added at the end of a relation fork.
    Extend = 4,
    /// A buffer holding a valid page taken from the clock for another page.
    Eviction = 5,
    /// A ring's buffer holding a valid page reused for another page.
    Reuse = 6,
    /// fsync calls.
    Fsync = 7,
}

impl IoWriter {
    /// Every role, in the order of their numbers.
    pub const ALL: [IoWriter; NWRITERS] = [
        IoWriter::Backend,
        IoWriter::Bgwriter,
        IoWriter::Checkpointer,
        IoWriter::WalWriter,
        IoWriter::Autovacuum,
        IoWriter::Startup,
        IoWriter::BackgroundWorker,
    ];
    /// The role's short name (`backend`, `bgwriter`, `checkpointer`, ...).
    pub fn name(self) -> &'static str {
        [
            "backend",
            "bgwriter",
            "checkpointer",
            "walwriter",
            "autovacuum",
            "startup",
            "background_worker",
        ][self as usize]
    }

    /// pg_stat_io's `backend_type` words.
    pub fn backend_type(self) -> &'static str {
        [
            "client backend",
            "background writer",
            "checkpointer",
            "walwriter",
            "autovacuum worker",
            "startup",
            "background worker",
        ][self as usize]
    }
}

impl IoContext {
    /// Every context, in the order of their numbers.
    pub const ALL: [IoContext; 4] = [
        IoContext::Normal,
        IoContext::BulkRead,
        IoContext::BulkWrite,
        IoContext::Vacuum,
    ];
    /// pg_stat_io's `context` word (`normal`, `bulkread`, `bulkwrite`, `vacuum`).
    pub fn name(self) -> &'static str {
        ["normal", "bulkread", "bulkwrite", "vacuum"][self as usize]
    }
}

impl IoOp {
    /// Every operation, in the order of their numbers.
    pub const ALL: [IoOp; 8] = [
        IoOp::Hit,
        IoOp::Read,
        IoOp::Write,
        IoOp::Writeback,
        IoOp::Extend,
        IoOp::Eviction,
        IoOp::Reuse,
        IoOp::Fsync,
    ];
    /// pg_stat_io's column name for the operation (`hits`, `reads`, `writes`, ...).
    pub fn name(self) -> &'static str {
        [
            "hits",
            "reads",
            "writes",
            "writebacks",
            "extends",
            "evictions",
            "reuses",
            "fsyncs",
        ][self as usize]
    }
}

const NWRITERS: usize = 7;
const NCONTEXTS: usize = 4;
const NOPS: usize = 8;
/// Per op: one count slot and one time slot (nanoseconds; used by timed ops only).
const NSLOTS: usize = 2 * NOPS;
/// Threads with their own stripe; the rest share one. Sized above any sane client count on
/// one machine; raising it costs 1.5 KiB per stripe per pool.
const EXCLUSIVE_STRIPES: usize = 128;

#[repr(align(128))] // two cache lines: keeps adjacent-line prefetch from pairing stripes
struct Stripe {
    c: [[[AtomicU64; NSLOTS]; NCONTEXTS]; NWRITERS],
}

impl Stripe {
    /// `n` zeroed stripes, made in place on the heap. Built as values, each stripe (3.5 KiB
    /// with seven writers) passed through several stack copies in debug builds, and the
    /// shuttle model tests' 60 KiB thread stacks overflowed creating a pool.
    fn zeroed(n: usize) -> Box<[Stripe]> {
        let layout = std::alloc::Layout::array::<Stripe>(n).expect("stripe array size");
        assert!(layout.size() > 0, "at least one stripe");
        // SAFETY: `layout` has a non-zero size (checked). A `Stripe` is only `AtomicU64`s
        // (and alignment padding), for which all-zero bytes are a valid value (0), so the
        // zeroed allocation holds `n` valid stripes; the box takes ownership of exactly the
        // allocation made here with this layout (a slice of `n` stripes).
        unsafe {
            let ptr = std::alloc::alloc_zeroed(layout).cast::<Stripe>();
            if ptr.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, n))
        }
    }
}

/// Process-wide slot indices of live threads.
static SLOTS: Mutex<Vec<bool>> = Mutex::new(Vec::new());

struct ThreadSlot {
    index: usize,
    writer: Cell<IoWriter>,
}

impl ThreadSlot {
    fn acquire() -> Self {
        let mut slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
        let index = match slots.iter().position(|used| !used) {
            Some(i) => i,
            None => {
                slots.push(false);
                slots.len() - 1
            }
        };
        slots[index] = true;
        Self {
            index,
            writer: Cell::new(IoWriter::Backend),
        }
    }
}

impl Drop for ThreadSlot {
    fn drop(&mut self) {
        // Release ordering comes from the mutex: this thread's last relaxed stores to its
        // stripe happen-before the next owner's first ones.
        let mut slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
        slots[self.index] = false;
    }
}

thread_local! {
    static SLOT: ThreadSlot = ThreadSlot::acquire();
}

/// Sets who the calling thread's I/O is counted as (the bgwriter and checkpointer threads
/// call this once at start). Returns the previous role.
pub fn set_thread_writer(writer: IoWriter) -> IoWriter {
    SLOT.with(|s| s.writer.replace(writer))
}

/// The calling thread's role set to `writer` until the returned guard is dropped (then the
/// previous one again), however the work in between ends.
pub fn as_writer(writer: IoWriter) -> WriterRole {
    WriterRole(set_thread_writer(writer))
}

/// Restores the thread's previous writer role when dropped ([`as_writer`]).
#[must_use = "the role lasts only while the guard lives"]
pub struct WriterRole(IoWriter);

impl Drop for WriterRole {
    fn drop(&mut self) {
        set_thread_writer(self.0);
    }
}

/// The calling thread's writer role.
pub fn thread_writer() -> IoWriter {
    SLOT.with(|s| s.writer.get())
}

/// The counters of one pool (shared by its storage manager).
pub struct IoStats {
    stripes: Box<[Stripe]>,
}

impl Default for IoStats {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for IoStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IoStats").finish_non_exhaustive()
    }
}

impl IoStats {
    /// Zeroed counters.
    pub fn new() -> Self {
        Self {
            stripes: Stripe::zeroed(EXCLUSIVE_STRIPES + 1),
        }
    }

    #[inline]
    fn add_slot(&self, context: IoContext, slot: usize, n: u64) {
        SLOT.with(|s| self.add_slot_as(s, s.writer.get(), context, slot, n))
    }

    #[inline]
    fn add_slot_as(
        &self,
        s: &ThreadSlot,
        writer: IoWriter,
        context: IoContext,
        slot: usize,
        n: u64,
    ) {
        {
            let writer = writer as usize;
            if s.index < EXCLUSIVE_STRIPES {
                let c = &self.stripes[s.index].c[writer][context as usize][slot];
                // Single writer (see module invariants): a plain load and store suffice.
                c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
            } else {
                self.stripes[EXCLUSIVE_STRIPES].c[writer][context as usize][slot]
                    .fetch_add(n, Relaxed);
            }
        }
    }

    /// Counts `n` operations.
    #[inline]
    pub fn count(&self, context: IoContext, op: IoOp, n: u64) {
        self.add_slot(context, op as usize, n);
    }

    /// [`IoStats::count_timed`] under `writer`'s role instead of the calling thread's: an
    /// I/O a thread completes for another (an I/O worker, the io_uring reaper) is the
    /// submitter's in pg_stat_io, as in PostgreSQL 18. Still in the calling thread's stripe.
    pub fn count_timed_as(
        &self,
        writer: IoWriter,
        context: IoContext,
        op: IoOp,
        n: u64,
        elapsed: Duration,
    ) {
        SLOT.with(|s| {
            self.add_slot_as(s, writer, context, op as usize, n);
            self.add_slot_as(
                s,
                writer,
                context,
                NOPS + op as usize,
                elapsed.as_nanos() as u64,
            );
        })
    }

    /// Counts one operation that took `elapsed`.
    #[inline]
    pub fn count_timed(&self, context: IoContext, op: IoOp, n: u64, elapsed: Duration) {
        self.add_slot(context, op as usize, n);
        self.add_slot(context, NOPS + op as usize, elapsed.as_nanos() as u64);
    }

    /// Sums every stripe.
    pub fn snapshot(&self) -> IoStatsSnapshot {
        let mut s = IoStatsSnapshot::default();
        for stripe in self.stripes.iter() {
            for w in 0..NWRITERS {
                for c in 0..NCONTEXTS {
                    for k in 0..NSLOTS {
                        s.c[w][c][k] = s.c[w][c][k].wrapping_add(stripe.c[w][c][k].load(Relaxed));
                    }
                }
            }
        }
        s
    }
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoStatsSnapshot {
    c: [[[u64; NSLOTS]; NCONTEXTS]; NWRITERS],
}

impl IoStatsSnapshot {
    /// How many of `op` `writer` did under `context`.
    pub fn get(&self, writer: IoWriter, context: IoContext, op: IoOp) -> u64 {
        self.c[writer as usize][context as usize][op as usize]
    }

    /// Time spent in `op` (reads, writes, writebacks, extends, fsyncs).
    pub fn time(&self, writer: IoWriter, context: IoContext, op: IoOp) -> Duration {
        Duration::from_nanos(self.c[writer as usize][context as usize][NOPS + op as usize])
    }

    /// `op` summed over all writers and contexts.
    pub fn total(&self, op: IoOp) -> u64 {
        self.c
            .iter()
            .flat_map(|w| w.iter())
            .map(|c| c[op as usize])
            .sum()
    }

    /// `op` by one writer, over all contexts.
    pub fn by_writer(&self, writer: IoWriter, op: IoOp) -> u64 {
        self.c[writer as usize].iter().map(|c| c[op as usize]).sum()
    }

    /// Counts since an earlier snapshot.
    pub fn since(&self, earlier: &IoStatsSnapshot) -> IoStatsSnapshot {
        let mut d = *self;
        for w in 0..NWRITERS {
            for c in 0..NCONTEXTS {
                for k in 0..NSLOTS {
                    d.c[w][c][k] = self.c[w][c][k].wrapping_sub(earlier.c[w][c][k]);
                }
            }
        }
        d
    }
}

/// One relation's row counters (pg_stat_user_tables). Counted when a change is made,
/// not at commit: an update leaves one dead version whether it commits (the old one) or
/// aborts (the new one); each aborted insert or delete is miscounted by one row until the
/// next VACUUM, which sets both estimates from what it found.
#[derive(Debug, Default)]
pub struct RelCounters {
    /// Rows inserted, updated and deleted (`n_tup_ins`, `n_tup_upd`, `n_tup_del`).
    pub inserted: AtomicU64,
    /// Rows updated (`n_tup_upd`).
    pub updated: AtomicU64,
    /// Rows deleted (`n_tup_del`).
    pub deleted: AtomicU64,
    /// Estimated live rows (`n_live_tup`): set by VACUUM's count, moved by inserts and
    /// deletes since. 0 until the first VACUUM of this process (counters are not kept
    /// across restarts).
    pub live: AtomicU64,
    /// Estimated dead versions (`n_dead_tup`): set by VACUUM to the dead versions it had
    /// to keep, then one per update or delete, less what pruning removed.
    pub dead: AtomicU64,
    /// VACUUMs and autovacuums finished (`vacuum_count`, `autovacuum_count`).
    pub vacuums: AtomicU64,
    /// Autovacuums finished (`autovacuum_count`).
    pub autovacuums: AtomicU64,
    /// When the last VACUUM and autovacuum finished, milliseconds since the Unix epoch (0:
    /// never).
    pub last_vacuum_ms: AtomicU64,
    /// When the last autovacuum finished (0: never), in milliseconds since the Unix epoch.
    pub last_autovacuum_ms: AtomicU64,
    /// The relation's free-space map bounds, shared here so that every heap handle of the
    /// relation uses the same ones (`table::fsm`).
    pub fsm_bounds: std::sync::Arc<FsmBounds>,
}

/// Per page of a relation's free-space map, an upper bound of its entries, in memory only
/// (kept and explained by `table::fsm`; here so that one relation's handles share it).
#[derive(Debug, Default)]
pub struct FsmBounds(pub crate::sync::RwLock<Vec<crate::sync::AtomicU32>>);

impl RelCounters {
    /// Counts an insert.
    pub fn count_insert(&self) {
        self.inserted.fetch_add(1, Relaxed);
        self.live.fetch_add(1, Relaxed);
    }

    /// Counts an update (one version more, dead or soon dead).
    pub fn count_update(&self) {
        self.updated.fetch_add(1, Relaxed);
        self.dead.fetch_add(1, Relaxed);
    }

    /// Counts a delete.
    pub fn count_delete(&self) {
        self.deleted.fetch_add(1, Relaxed);
        self.dead.fetch_add(1, Relaxed);
        sub_saturating(&self.live, 1);
    }

    /// Counts dead versions that pruning or VACUUM removed.
    pub fn count_removed(&self, n: u64) {
        if n > 0 {
            sub_saturating(&self.dead, n);
        }
    }

    /// Records a finished VACUUM that found `live` rows and had to keep `dead` versions
    /// (`auto`: run by autovacuum): both estimates start again from its counts, as
    /// PostgreSQL's do, so errors from aborted changes do not pile up.
    pub fn count_vacuum(&self, live: u64, dead: u64, auto: bool) {
        self.live.store(live, Relaxed);
        self.dead.store(dead, Relaxed);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        if auto {
            self.autovacuums.fetch_add(1, Relaxed);
            self.last_autovacuum_ms.store(now, Relaxed);
        } else {
            self.vacuums.fetch_add(1, Relaxed);
            self.last_vacuum_ms.store(now, Relaxed);
        }
    }

    /// A copy of the counters.
    pub fn snapshot(&self) -> RelCountersSnapshot {
        RelCountersSnapshot {
            inserted: self.inserted.load(Relaxed),
            updated: self.updated.load(Relaxed),
            deleted: self.deleted.load(Relaxed),
            live: self.live.load(Relaxed),
            dead: self.dead.load(Relaxed),
            vacuums: self.vacuums.load(Relaxed),
            autovacuums: self.autovacuums.load(Relaxed),
            last_vacuum_ms: self.last_vacuum_ms.load(Relaxed),
            last_autovacuum_ms: self.last_autovacuum_ms.load(Relaxed),
        }
    }
}

/// `a -= n`, stopping at 0 (estimates may be low after a restart).
fn sub_saturating(a: &AtomicU64, n: u64) {
    let _ = a.fetch_update(Relaxed, Relaxed, |v| Some(v.saturating_sub(n)));
}

/// A copy of one relation's [`RelCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelCountersSnapshot {
    /// Rows inserted (`n_tup_ins`).
    pub inserted: u64,
    /// Rows updated (`n_tup_upd`).
    pub updated: u64,
    /// Rows deleted (`n_tup_del`).
    pub deleted: u64,
    /// Estimated live rows (`n_live_tup`).
    pub live: u64,
    /// Estimated dead row versions (`n_dead_tup`).
    pub dead: u64,
    /// VACUUMs finished (`vacuum_count`).
    pub vacuums: u64,
    /// Autovacuums finished (`autovacuum_count`).
    pub autovacuums: u64,
    /// When the last VACUUM finished (0: never), in milliseconds since the Unix epoch.
    pub last_vacuum_ms: u64,
    /// When the last autovacuum finished (0: never), in milliseconds since the Unix epoch.
    pub last_autovacuum_ms: u64,
}

/// Every relation's [`RelCounters`], by relation (created on first use).
#[derive(Debug, Default)]
pub struct RelStats {
    rels: Mutex<std::collections::HashMap<crate::types::RelFileId, std::sync::Arc<RelCounters>>>,
}

impl RelStats {
    /// The counters of `rel` (new ones on first use).
    pub fn of(&self, rel: crate::types::RelFileId) -> std::sync::Arc<RelCounters> {
        let mut rels = self.rels.lock().unwrap_or_else(|e| e.into_inner());
        rels.entry(rel).or_default().clone()
    }

    /// A copy of every relation's counters.
    pub fn snapshot(&self) -> Vec<(crate::types::RelFileId, RelCountersSnapshot)> {
        let rels = self.rels.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = rels.iter().map(|(r, c)| (*r, c.snapshot())).collect();
        v.sort_by_key(|(r, _)| *r);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn counts_from_many_threads_add_up() {
        let stats = Arc::new(IoStats::new());
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let stats = stats.clone();
                std::thread::spawn(move || {
                    if i % 2 == 1 {
                        set_thread_writer(IoWriter::Bgwriter);
                    }
                    for _ in 0..10_000 {
                        stats.count(IoContext::Normal, IoOp::Hit, 1);
                    }
                    stats.count_timed(IoContext::Vacuum, IoOp::Read, 2, Duration::from_micros(5));
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = stats.snapshot();
        assert_eq!(s.total(IoOp::Hit), 80_000);
        assert_eq!(
            s.get(IoWriter::Bgwriter, IoContext::Normal, IoOp::Hit),
            40_000
        );
        assert_eq!(s.by_writer(IoWriter::Backend, IoOp::Read), 8);
        assert_eq!(
            s.time(IoWriter::Backend, IoContext::Vacuum, IoOp::Read),
            Duration::from_micros(20)
        );
        assert_eq!(s.since(&s).total(IoOp::Hit), 0);
    }

    #[test]
    fn more_threads_than_stripes_still_count_exactly() {
        let stats = Arc::new(IoStats::new());
        let barrier = Arc::new(std::sync::Barrier::new(EXCLUSIVE_STRIPES + 8));
        let threads: Vec<_> = (0..EXCLUSIVE_STRIPES + 8)
            .map(|_| {
                let (stats, barrier) = (stats.clone(), barrier.clone());
                std::thread::spawn(move || {
                    // All alive at once, so some land on the shared overflow stripe.
                    barrier.wait();
                    for _ in 0..100 {
                        stats.count(IoContext::Normal, IoOp::Write, 1);
                    }
                    barrier.wait();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            stats.snapshot().total(IoOp::Write),
            100 * (EXCLUSIVE_STRIPES as u64 + 8)
        );
    }

    #[test]
    fn relation_counters_estimate_live_and_dead_rows() {
        let t = RelStats::default();
        let rel = crate::types::RelFileId::new(0, 7);
        let c = t.of(rel);
        for _ in 0..10 {
            c.count_insert();
        }
        c.count_update();
        c.count_update();
        c.count_delete();
        let s = t.of(rel).snapshot();
        assert_eq!((s.inserted, s.updated, s.deleted), (10, 2, 1));
        assert_eq!((s.live, s.dead), (9, 3));
        c.count_removed(5);
        assert_eq!(c.snapshot().dead, 0, "removal stops at zero");
        c.count_update();
        c.count_vacuum(42, 3, true);
        let s = c.snapshot();
        assert_eq!((s.live, s.dead, s.autovacuums, s.vacuums), (42, 3, 1, 0));
        assert!(s.last_autovacuum_ms > 0 && s.last_vacuum_ms == 0);
        assert_eq!(t.snapshot(), vec![(rel, s)]);
    }
}

/// The log's side of pg_stat_io (PostgreSQL 18's `object = wal` rows): I/O on segment
/// files by the calling thread's role and context (`normal`: the log's writes and fsyncs;
/// `init`: zero-filling a new segment), each with its count, bytes and time. One set of
/// atomics, not striped: the log does a few of these per group of commits, never per page.
/// Flat on the heap (writer, context, then count, bytes and time per op), so that making
/// one puts no large array on the stack (the shuttle models' threads have small stacks).
pub struct WalIoStats {
    c: Box<[AtomicU64]>,
}

const WAL_IO_SLOTS: usize = 3 * NOPS;

impl Default for WalIoStats {
    fn default() -> Self {
        Self {
            c: (0..NWRITERS * 2 * WAL_IO_SLOTS)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }
}

/// The contexts of the log's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WalIoContext {
    /// The log's writes and fsyncs of segment files, and recovery's reads of them.
    Normal = 0,
    /// Zero-filling a new segment file (its writes and fsyncs).
    Init = 1,
}

impl WalIoContext {
    /// Both contexts, in the order of their numbers.
    pub const ALL: [WalIoContext; 2] = [WalIoContext::Normal, WalIoContext::Init];
    /// pg_stat_io's `context` word (`normal`, `init`).
    pub fn name(self) -> &'static str {
        ["normal", "init"][self as usize]
    }
}

impl std::fmt::Debug for WalIoStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalIoStats").finish_non_exhaustive()
    }
}

impl WalIoStats {
    /// Counts `n` operations of `bytes` in all that took `elapsed`, for the calling
    /// thread's role.
    pub fn count(&self, context: WalIoContext, op: IoOp, n: u64, bytes: u64, elapsed: Duration) {
        let base = (thread_writer() as usize * 2 + context as usize) * WAL_IO_SLOTS;
        let c = &self.c[base..base + WAL_IO_SLOTS];
        let k = op as usize;
        c[k].fetch_add(n, Relaxed);
        c[NOPS + k].fetch_add(bytes, Relaxed);
        c[2 * NOPS + k].fetch_add(elapsed.as_nanos() as u64, Relaxed);
    }

    /// A copy of the counters at one moment.
    pub fn snapshot(&self) -> WalIoSnapshot {
        let mut s = WalIoSnapshot::default();
        for (i, v) in self.c.iter().enumerate() {
            let (w, rest) = (i / (2 * WAL_IO_SLOTS), i % (2 * WAL_IO_SLOTS));
            s.c[w][rest / WAL_IO_SLOTS][rest % WAL_IO_SLOTS] = v.load(Relaxed);
        }
        s
    }
}

/// A copy of [`WalIoStats`] at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalIoSnapshot {
    c: [[[u64; 3 * NOPS]; 2]; NWRITERS],
}

impl Default for WalIoSnapshot {
    fn default() -> Self {
        Self {
            c: [[[0; 3 * NOPS]; 2]; NWRITERS],
        }
    }
}

impl WalIoSnapshot {
    /// (operations, bytes, time) of `op`.
    pub fn get(&self, writer: IoWriter, context: WalIoContext, op: IoOp) -> (u64, u64, Duration) {
        let c = &self.c[writer as usize][context as usize];
        let k = op as usize;
        (c[k], c[NOPS + k], Duration::from_nanos(c[2 * NOPS + k]))
    }

    /// Counts since an earlier snapshot.
    pub fn since(&self, earlier: &WalIoSnapshot) -> WalIoSnapshot {
        let mut d = *self;
        for w in 0..NWRITERS {
            for c in 0..2 {
                for k in 0..3 * NOPS {
                    d.c[w][c][k] = self.c[w][c][k].wrapping_sub(earlier.c[w][c][k]);
                }
            }
        }
        d
    }

    /// Adds `n` reads of `bytes` taking `elapsed` (recovery's reads, counted before the
    /// log's own counters exist) under `writer`.
    pub fn add_reads(&mut self, writer: IoWriter, n: u64, bytes: u64, elapsed: Duration) {
        let c = &mut self.c[writer as usize][WalIoContext::Normal as usize];
        let k = IoOp::Read as usize;
        c[k] += n;
        c[NOPS + k] += bytes;
        c[2 * NOPS + k] += elapsed.as_nanos() as u64;
    }
}

/// One row of pg_stat_io as PostgreSQL 18 has it: counts, bytes and times (ms) per
/// backend type, object (`relation` or `wal`) and context. Relation I/O is counted in
/// blocks, so `reads`, `writes` and `extends` are blocks here where PostgreSQL 18 counts
/// I/O operations (a combined read of 16 blocks is one there); the bytes agree.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatIoRow {
    /// pg_stat_io's `backend_type` ([`IoWriter::backend_type`]).
    pub backend_type: &'static str,
    /// The kind of I/O: `relation` or `wal`.
    pub object: &'static str,
    /// pg_stat_io's `context`: `normal`, `bulkread`, `bulkwrite` or `vacuum` (`relation`),
    /// `normal` or `init` (`wal`).
    pub context: &'static str,
    /// Reads: blocks for `relation`, read operations for `wal`.
    pub reads: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Time spent reading, in milliseconds.
    pub read_time_ms: f64,
    /// Writes: blocks for `relation`, write operations for `wal`.
    pub writes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Time spent writing, in milliseconds.
    pub write_time_ms: f64,
    /// Blocks whose writeback the OS was asked to start (`relation` only).
    pub writebacks: u64,
    /// Time spent asking for writeback, in milliseconds.
    pub writeback_time_ms: f64,
    /// Blocks added by extending relation forks (`relation` only).
    pub extends: u64,
    /// Bytes added by extending relation forks.
    pub extend_bytes: u64,
    /// Time spent extending, in milliseconds.
    pub extend_time_ms: f64,
    /// Pages found already in a buffer (`relation` only).
    pub hits: u64,
    /// Valid pages evicted from buffers the clock chose (`relation` only).
    pub evictions: u64,
    /// Ring buffers holding a valid page reused for another page (`relation` only).
    pub reuses: u64,
    /// fsync calls.
    pub fsyncs: u64,
    /// Time spent in fsync, in milliseconds.
    pub fsync_time_ms: f64,
}

impl StatIoRow {
    fn is_empty(&self) -> bool {
        self.reads
            + self.writes
            + self.writebacks
            + self.extends
            + self.hits
            + self.evictions
            + self.reuses
            + self.fsyncs
            == 0
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// pg_stat_io's rows from the pool's counters (`relation`, blocks of `block_size` bytes)
/// and the log's (`wal`): every row with something counted, and always client backends'
/// `relation`/`normal` and `wal`/`normal` rows.
pub fn stat_io_rows(
    pool: &IoStatsSnapshot,
    wal: &WalIoSnapshot,
    block_size: u64,
) -> Vec<StatIoRow> {
    let mut rows = Vec::new();
    for w in IoWriter::ALL {
        for c in IoContext::ALL {
            let n = |op| pool.get(w, c, op);
            let t = |op| ms(pool.time(w, c, op));
            let row = StatIoRow {
                backend_type: w.backend_type(),
                object: "relation",
                context: c.name(),
                reads: n(IoOp::Read),
                read_bytes: n(IoOp::Read) * block_size,
                read_time_ms: t(IoOp::Read),
                writes: n(IoOp::Write),
                write_bytes: n(IoOp::Write) * block_size,
                write_time_ms: t(IoOp::Write),
                writebacks: n(IoOp::Writeback),
                writeback_time_ms: t(IoOp::Writeback),
                extends: n(IoOp::Extend),
                extend_bytes: n(IoOp::Extend) * block_size,
                extend_time_ms: t(IoOp::Extend),
                hits: n(IoOp::Hit),
                evictions: n(IoOp::Eviction),
                reuses: n(IoOp::Reuse),
                fsyncs: n(IoOp::Fsync),
                fsync_time_ms: t(IoOp::Fsync),
            };
            if !row.is_empty() || (w == IoWriter::Backend && c == IoContext::Normal) {
                rows.push(row);
            }
        }
        for c in WalIoContext::ALL {
            let (reads, read_bytes, read_time) = wal.get(w, c, IoOp::Read);
            let (writes, write_bytes, write_time) = wal.get(w, c, IoOp::Write);
            let (fsyncs, _, fsync_time) = wal.get(w, c, IoOp::Fsync);
            let row = StatIoRow {
                backend_type: w.backend_type(),
                object: "wal",
                context: c.name(),
                reads,
                read_bytes,
                read_time_ms: ms(read_time),
                writes,
                write_bytes,
                write_time_ms: ms(write_time),
                fsyncs,
                fsync_time_ms: ms(fsync_time),
                ..StatIoRow::default()
            };
            if !row.is_empty() || (w == IoWriter::Backend && c == WalIoContext::Normal) {
                rows.push(row);
            }
        }
    }
    rows
}
