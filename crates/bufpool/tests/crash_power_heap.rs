//! Power-loss tests on a heap table: crash after every I/O of an accounts workload whose
//! transfers are real transactions (begin, update two account rows and the thread's
//! sequence row, commit), so row visibility after recovery depends on the commit log (an
//! SLRU under `<dir>/xact/`), and let the simulator decide the fate of every unsynced write
//! (commit-log pages included) and namespace change.
//!
//! Proves: after recovery a fresh snapshot sees every acknowledged transfer, no half-applied
//! one, and the total conserved. How: as in `crash_power.rs` (`power/mod.rs`): for every
//! crash point the workload runs with `crash_after(n)` until its threads hit the failure,
//! copies of the file system are crashed under several seeds, reopened and checked with
//! `accounts::check_balances`. Each test prints how many crash states it verified; the
//! environment variables of `crash_power.rs` (BUFPOOL_POWER_SEEDS, _KEEP_GOING, _POINT)
//! apply.

#[allow(dead_code)] // its config and open are the kill tests' (real files); these use SimVfs
mod accounts;
#[allow(dead_code)] // the accounts helpers use `mix`; the kill loop is not used here
mod kill;
mod power;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use std::collections::BTreeMap;

use accounts::{check_balances, decode, encode, rows, transfer, ACCOUNTS, INITIAL};
use bufpool::table::{Heap, RowLockMode, Tid};
use bufpool::testing::{CrashChoice, SimVfs};
use bufpool::txn::INVALID_XID;
use bufpool::{Config, Engine, ForkNumber, Lsn, RelFileId, Vfs};

const REL: RelFileId = RelFileId::new(0, 960);
/// Threads that transfer (the table has `accounts::THREADS` sequence rows; the others stay 0).
const THREADS: u64 = 2;
const TRANSFERS_PER_THREAD: u64 = 6;

fn config(synchronous_commit: bool) -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "16").unwrap();
    c.set("block_size", "4kB").unwrap();
    c.set("wal_segment_size", "64kB").unwrap();
    c.set(
        "synchronous_commit",
        if synchronous_commit { "on" } else { "off" },
    )
    .unwrap();
    c
}

fn open(vfs: &SimVfs, c: &Config) -> Result<Engine, bufpool::EngineError> {
    Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        c,
        true,
    )
}

/// A new file system with the accounts table (40 accounts, a sequence row per possible
/// thread), committed and checkpointed; its engine closed without a checkpoint.
fn new_table(c: &Config) -> SimVfs {
    let vfs = SimVfs::new();
    let e = open(&vfs, c).unwrap();
    let heap = Heap::create(&e, REL).unwrap();
    let x = e.begin_xid().unwrap();
    for id in 0..ACCOUNTS {
        heap.insert(x, &encode(id, INITIAL)).unwrap();
    }
    for t in 0..accounts::THREADS {
        heap.insert(x, &encode(100 + t, 0)).unwrap();
    }
    e.commit_transaction(x).unwrap();
    e.checkpoint().unwrap();
    vfs
}

/// How the workload runs.
#[derive(Clone, Copy)]
struct Plan {
    synchronous_commit: bool,
    /// Thread 0 checkpoints after each of these of its transfers.
    checkpoints: &'static [u64],
    /// Each thread reads back the rows it changed after each commit, and scans the whole
    /// table every other transfer, and one more thread scans it over and over while they
    /// run, setting hint bits (`Engine::log_hint`).
    read_back: bool,
    /// Each account update runs in its own savepoint (nested), and a decoy update inside
    /// a further savepoint is rolled back: transaction tree records (commits listing
    /// subtransactions, rollbacks to a savepoint) and the subtransaction log's files go
    /// through the power cuts.
    savepoints: bool,
    /// Each transfer first locks its two account rows FOR UPDATE and a row nobody updates
    /// (the last sequence row) FOR SHARE: with `savepoints`, the savepoint's update of a
    /// row its transaction locked makes its xmax a multixact (creation records, the
    /// multixact SLRUs' files), and the two threads' share locks make lock-only ones.
    locks: bool,
}

/// The row both threads share-lock (a sequence row of a thread that does not run).
const SHARED_ROW: u64 = 100 + accounts::THREADS - 1;

/// Runs `f` as transaction `x`: commits it if `f` succeeded and returns the commit
/// record's end, else aborts it (or, if the log refuses even the abort record, ends it
/// in the transaction manager so no other thread waits on its row locks forever).
fn transaction(e: &Engine, f: impl FnOnce(u32) -> Result<(), bufpool::Error>) -> Option<Lsn> {
    let x = e.begin_xid().ok()?;
    if f(x).is_ok() {
        match e.commit_transaction(x) {
            Ok(end) => return Some(end),
            // The commit record may be in the log, but it was not acknowledged.
            Err(_) => {
                let _ = e.txns().end(x, false);
                return None;
            }
        }
    }
    if e.abort_transaction(x).is_err() {
        let _ = e.txns().end(x, false);
    }
    None
}

/// Reads every row with a fresh snapshot (setting hint bits on every page it visits).
fn scan_all(e: &Engine, heap: &Heap<'_>) -> Result<(), bufpool::Error> {
    heap.scan(&e.txns().snapshot(INVALID_XID), |_, _| {})?;
    Ok(())
}

/// One writer of [`workload`]: transfers, each a transaction; after each commit, with
/// `plan.read_back`, reads back the rows it changed (and scans the table every other
/// transfer); thread 0 checkpoints after the transfers `plan.checkpoints` lists. Stops at
/// the first failure.
fn writer(
    e: &Engine,
    heap: &Heap<'_>,
    start: &BTreeMap<u64, (Tid, i64)>,
    out: &Outcome<'_>,
    plan: Plan,
    t: u64,
) {
    // Tids go stale as rows move; updates follow the chain from any old tid.
    let tid_of = |id: u64| -> Tid { start[&id].0 };
    for k in 1..=TRANSFERS_PER_THREAD {
        let (from, to, amount) = transfer(t, k);
        let (first, second) = if from < to { (from, to) } else { (to, from) };
        let end = transaction(e, |x| {
            // Rows in id order: no two transfers wait on each other in a cycle.
            if plan.locks {
                heap.lock_row(x, tid_of(SHARED_ROW), RowLockMode::Share)?
                    .expect("sequence rows are never deleted");
                for id in [first, second] {
                    heap.lock_row(x, tid_of(id), RowLockMode::Exclusive)?
                        .expect("account rows are never deleted");
                }
            }
            let mut cur = x;
            for id in [first, second] {
                let delta = if id == from { -amount } else { amount };
                if plan.savepoints {
                    cur = e.begin_subtransaction(cur)?;
                }
                heap.update(cur, tid_of(id), |d| {
                    let (i, v) = decode(d);
                    encode(i, v + delta)
                })?
                .expect("account rows are never deleted");
            }
            if plan.savepoints {
                // A decoy: money from nowhere, rolled back. Replayed as committed, it
                // would break the balances.
                let decoy = e.begin_subtransaction(cur)?;
                heap.update(decoy, tid_of(from), |d| {
                    let (i, v) = decode(d);
                    encode(i, v + 1_000_000)
                })?;
                e.rollback_subtransactions(&[decoy])?;
            }
            heap.update(cur, tid_of(100 + t), |_| encode(100 + t, k as i64))?
                .expect("sequence rows are never deleted");
            Ok(())
        });
        let Some(end) = end else { return };
        out.commits.lock().unwrap().push((t, k, end));
        let io_count = out.vfs.io_count();
        out.acks.lock().unwrap().push(power::Ack {
            thread: t as u32,
            seq: k,
            io_count,
        });
        if plan.read_back {
            // After the commit: the readers see it committed in the commit
            // log and set hint bits on the new and the old versions.
            let snap = e.txns().snapshot(INVALID_XID);
            for id in [from, to, 100 + t] {
                if heap.fetch(&snap, tid_of(id)).is_err() {
                    return;
                }
            }
            if k % 2 == 0 && scan_all(e, heap).is_err() {
                return;
            }
        }
        if t == 0 && plan.checkpoints.contains(&k) && e.checkpoint().is_err() {
            return;
        }
    }
}

/// Runs the transfers with the I/O budget `n`; returns what was acknowledged per thread:
/// with synchronous commit, each transfer whose commit returned; with asynchronous
/// commit, each transfer whose commit record ends at or before the log's durable end
/// (`Wal::flushed`, advanced only by a flush that completed, here or by the WAL writer or
/// by a checkpoint) when the threads stopped.
fn workload(vfs: &SimVfs, n: u64, plan: Plan) -> Acked {
    let e = open(vfs, &config(plan.synchronous_commit)).unwrap();
    vfs.crash_after(n);
    let (commits, _) = run_writers(&e, vfs, plan, THREADS);
    let durable = e.wal().flushed();
    let mut seqs = vec![0u64; accounts::THREADS as usize];
    for &(t, k, end) in &commits {
        if plan.synchronous_commit || end <= durable {
            seqs[t as usize] = seqs[t as usize].max(k);
        }
    }
    Acked {
        seqs,
        commits,
        durable,
    }
}

/// `threads` writers (and, with `plan.read_back`, a scanning reader) on `e` until they are
/// done or the I/O fails: every commit that returned, (thread, transfer, end of its commit
/// record), and each acknowledgement with the I/O count after it.
fn run_writers(
    e: &Engine,
    vfs: &SimVfs,
    plan: Plan,
    threads: u64,
) -> (Vec<(u64, u64, Lsn)>, Vec<power::Ack>) {
    let heap = Heap::open(e, REL);
    let start = rows(e, &heap);
    let out = Outcome {
        commits: Mutex::new(Vec::new()),
        acks: Mutex::new(Vec::new()),
        vfs,
    };
    let writers_done = AtomicU64::new(0);
    std::thread::scope(|s| {
        if plan.read_back {
            // A reader scanning the table over and over while the writers run, so hint
            // bits are set (and logged) while checkpoints run. It stops when the writers
            // are done or the I/O fails.
            let (heap, done) = (&heap, &writers_done);
            s.spawn(
                move || {
                    while done.load(Ordering::Acquire) < threads && scan_all(e, heap).is_ok() {}
                },
            );
        }
        for t in 0..threads {
            let (heap, start, out) = (&heap, &start, &out);
            let done = &writers_done;
            s.spawn(move || {
                writer(e, heap, start, out, plan, t);
                done.fetch_add(1, Ordering::Release);
            });
        }
    });
    (
        out.commits.into_inner().unwrap(),
        out.acks.into_inner().unwrap(),
    )
}

/// What the writers record as they go, and the file system whose I/O count dates each
/// acknowledgement.
struct Outcome<'a> {
    commits: Mutex<Vec<(u64, u64, Lsn)>>,
    acks: Mutex<Vec<power::Ack>>,
    vfs: &'a SimVfs,
}

/// What a workload run acknowledged.
struct Acked {
    /// Per thread, the last acknowledged transfer.
    seqs: Vec<u64>,
    /// Every commit that returned: (thread, transfer, end of its commit record).
    commits: Vec<(u64, u64, Lsn)>,
    /// The log's durable end when the threads stopped.
    durable: Lsn,
}

/// The table as the workload found it: each row's root tuple id (stable: rows are never
/// deleted and roots never freed).
struct Table {
    roots: BTreeMap<u64, Tid>,
}

impl Table {
    fn of(base: &SimVfs, c: &Config) -> Table {
        let vfs = base.duplicate();
        let e = open(&vfs, c).unwrap();
        let heap = Heap::open(&e, REL);
        Table {
            roots: rows(&e, &heap)
                .into_iter()
                .map(|(id, (tid, _))| (id, tid))
                .collect(),
        }
    }
}

/// Reopens a crashed copy and checks it. Every row, fetched from its root (as an index
/// lookup would) with a fresh snapshot: every acknowledged transfer visible, balances
/// exactly those of the committed transfers (none half applied), the total conserved.
/// Then a full scan must show the same rows, each once (every page readable: a page added
/// during the run whose records never became durable reads as a new, empty page, see
/// `a_power_cut_after_an_extension_leaves_the_table_readable`).
fn verify(test: &str, vfs: &SimVfs, c: &Config, table: &Table, acked: &Acked, point: u64) {
    let e = open(vfs, c).unwrap_or_else(|err| panic!("{test}: reopen failed: {err}"));
    let heap = Heap::open(&e, REL);
    let snap = e.txns().snapshot(INVALID_XID);
    let mut now = BTreeMap::new();
    for (&id, &root) in &table.roots {
        let row = heap
            .fetch_with(&snap, root, |tid, d| (tid, decode(d)))
            .unwrap_or_else(|err| panic!("{test}: fetching row {id} from {root:?}: {err}"))
            .unwrap_or_else(|| panic!("{test}: row {id} is not visible from its root {root:?}"));
        let (_, (got, v)) = row;
        assert_eq!(got, id, "{test}: the row rooted at {root:?}");
        now.insert(id, (root, v));
    }
    for (t, &a) in acked.seqs.iter().enumerate() {
        let seq = now[&(100 + t as u64)].1 as u64;
        assert!(
            seq >= a,
            "{test}: thread {t}: transfer {a} was acknowledged but recovery shows only {seq}; \
             commits (thread, transfer, end of commit record): {:?}; durable end of log at the \
             crash {}; recovery: {:?}",
            acked.commits,
            acked.durable,
            e.recovery_report()
        );
    }
    check_balances(point as u32, &now, &acked.seqs, |_, _, _| {});
    let mut scanned = BTreeMap::new();
    let scan = heap.scan(&snap, |_, d| {
        let (id, v) = decode(d);
        assert!(
            scanned.insert(id, v).is_none(),
            "{test}: row {id} visible twice"
        );
    });
    if let Err(err) = scan {
        panic!("{test}: scanning the table: {err}");
    }
    let fetched: BTreeMap<u64, i64> = now.iter().map(|(&id, &(_, v))| (id, v)).collect();
    assert_eq!(scanned, fetched, "{test}: a scan and fetches disagree");
}

/// The I/O count of a full, failure-free run: it bounds the crash points worth trying.
fn total_ios(base: &SimVfs, plan: Plan) -> u64 {
    let vfs = base.duplicate();
    let before = vfs.io_count();
    workload(&vfs, u64::MAX, plan);
    vfs.io_count() - before
}

/// One variant of the power-loss test on the heap: a workload plan, how many seeds per
/// crash point, whose writes to count at the cuts, what must have happened for the run
/// to have tested anything, and an optional extra check of each recovered state.
struct Variant {
    test: &'static str,
    plan: Plan,
    /// Seeds per crash point (`BUFPOOL_POWER_SEEDS` overrides).
    seeds: u64,
    /// The files whose unsynced writes at the cuts are counted, by fate.
    watch: fn(&Path) -> bool,
    /// What the run must have seen; `Err` names what it missed.
    expect: fn(&Seen) -> Result<(), String>,
    /// Run on each recovered state after [`verify`].
    after: Option<fn(&str, &SimVfs, &Config, &Table)>,
}

/// What a variant's run saw over all its crash states.
#[derive(Debug, Default)]
struct Seen {
    /// Writes to the watched files at the cuts, by fate (in `CrashChoice::ALL` order).
    watched: [u64; 5],
    /// Crash states with at least one acknowledged transfer, and their transfers.
    states_with_acks: u64,
    acked_transfers: u64,
}

/// Runs one variant: crash after every I/O of its workload under its seeds, verify every
/// recovered state (and its extra check), count what it saw, and check its expectation.
fn run(v: &Variant) {
    let c = config(v.plan.synchronous_commit);
    let base = new_table(&c);
    let table = Table::of(&base, &c);
    let total = total_ios(&base, v.plan);
    let mut seen = Seen::default();
    let tally = power::explore(
        v.test,
        0..=total,
        1,
        power::seeds(v.seeds),
        &base,
        |vfs, n| workload(vfs, n, v.plan),
        |vfs, acked, report, ctx| {
            for (i, ch) in CrashChoice::ALL.into_iter().enumerate() {
                seen.watched[i] += report.writes_to(v.watch, ch);
            }
            let sum: u64 = acked.seqs.iter().sum();
            seen.acked_transfers += sum;
            seen.states_with_acks += u64::from(sum > 0);
            verify(v.test, vfs, &c, &table, acked, ctx.point);
            if let Some(after) = v.after {
                after(v.test, vfs, &c, &table);
            }
        },
    );
    tally.print(
        v.test,
        &format!(
            "; {} states had acknowledged transfers ({} transfers checked); watched writes at \
             the cuts (drop, keep, 4 KiB tear, 512 B tear, garbage) {:?}",
            seen.states_with_acks, seen.acked_transfers, seen.watched
        ),
    );
    if let Err(missed) = (v.expect)(&seen) {
        panic!("{}: {missed}: {seen:?}", v.test);
    }
}

fn is_clog(p: &Path) -> bool {
    p.starts_with("/db/xact")
}

fn is_subtrans(p: &Path) -> bool {
    p.starts_with("/db/subtrans")
}

fn is_multixact(p: &Path) -> bool {
    p.starts_with("/db/multixact_offsets") || p.starts_with("/db/multixact_members")
}

/// Commits were acknowledged and some watched write was in flight at a cut.
fn acked_and_watched(s: &Seen) -> Result<(), String> {
    if s.states_with_acks == 0 {
        return Err("nothing was ever acknowledged".into());
    }
    if s.watched.iter().sum::<u64>() == 0 {
        return Err("no watched write was ever in flight at a cut".into());
    }
    Ok(())
}

/// After recovery nobody holds anything: one transaction locks and changes every row.
fn every_row_can_be_locked(test: &str, vfs: &SimVfs, c: &Config, table: &Table) {
    let e = open(vfs, c).unwrap();
    let heap = Heap::open(&e, REL);
    let x = e.begin_xid().unwrap();
    for &root in table.roots.values() {
        heap.lock_row(x, root, RowLockMode::Exclusive)
            .unwrap_or_else(|err| panic!("{test}: locking {root:?}: {err}"))
            .expect("rows are never deleted");
        heap.update(x, root, |d| d.to_vec())
            .unwrap_or_else(|err| panic!("{test}: updating {root:?}: {err}"));
    }
    e.abort_transaction(x).unwrap();
}

/// Proves that commit-log (SLRU) pages get no special treatment from a power cut and need
/// none: a commit-log page write can be dropped, torn at any 512-byte sector boundary or
/// garbaged like any other, and recovery still shows every acknowledged transfer (a
/// committed row invisible because its commit-log entry was lost would break the
/// balances) and opens at all. How: synchronous commits with a checkpoint after each
/// transfer of thread 0 (each checkpoint writes and fsyncs the commit-log page, while
/// thread 1 keeps committing), crashed after every I/O under several seeds; asserts that
/// commit-log writes were among the dropped, sector-torn and garbaged ones.
const SLRU_TEARS: Variant = Variant {
    test: "power_loss_with_slru_tears",
    plan: Plan {
        synchronous_commit: true,
        checkpoints: &[1, 2, 3, 4, 5, 6],
        read_back: false,
        savepoints: false,
        locks: false,
    },
    seeds: 12,
    watch: is_clog,
    expect: |s| match s.watched {
        [dropped, _, _, sector, garbage] if dropped > 0 && sector > 0 && garbage > 0 => Ok(()),
        _ => Err("commit-log writes should be dropped, torn and garbaged".into()),
    },
    after: None,
};

/// Proves that with asynchronous commit every transfer whose commit record was durable
/// survives a power cut, none is half applied and money is conserved, while readers set
/// hint bits on pages (logged through `Engine::log_hint`: a full-page image for the first
/// change after a checkpoint, otherwise the page LSN raised so the commit record goes to
/// disk first) and checkpoints run midway. How: `synchronous_commit = off`, two threads
/// transferring, each reading back the rows it changed after every commit and scanning
/// the table every other transfer, a third thread scanning all along, thread 0
/// checkpointing after its second and fourth transfers (so pages hinted around the first
/// checkpoint are written again, and can be torn, by the second); crashed after every I/O
/// under several seeds. A transfer counts as acknowledged only if its commit record ends
/// at or before the log's durable end when the threads stopped.
const ASYNC_COMMIT_HINTS: Variant = Variant {
    test: "power_loss_heap_async_commit_hints",
    plan: Plan {
        synchronous_commit: false,
        checkpoints: &[2, 4],
        read_back: true,
        savepoints: false,
        locks: false,
    },
    seeds: 12,
    watch: is_clog,
    expect: |s| match s.states_with_acks {
        0 => Err("no transfer ever became durable: the test checks nothing".into()),
        _ => Ok(()),
    },
    after: None,
};

/// Proves that savepoints survive a power cut as their transactions do: a transfer whose
/// account updates ran in nested savepoints (rows written under subtransaction ids) is
/// visible after recovery exactly when its top-level commit was acknowledged, and a
/// rolled-back savepoint's update (a decoy adding money) never is, whichever commit-log
/// and subtransaction-log writes the cut dropped, tore or garbaged. How: synchronous
/// commits, each transfer's two account updates in two nested savepoints and a decoy in a
/// third that is rolled back (so the log holds transaction tree records: commits listing
/// subtransactions, and rollbacks), thread 0 checkpointing after its second and fourth
/// transfers (writing the commit log and the subtransaction log); crashed after every I/O
/// under several seeds and checked as the other tests here (balances conserved, every
/// acknowledged transfer visible); asserts subtransaction-log writes were at the cuts.
const SAVEPOINTS: Variant = Variant {
    test: "power_loss_with_savepoints",
    plan: Plan {
        synchronous_commit: true,
        checkpoints: &[2, 4],
        read_back: false,
        savepoints: true,
        locks: false,
    },
    seeds: 8,
    watch: is_subtrans,
    expect: acked_and_watched,
    after: None,
};

/// Proves that row locks and the multixacts they make survive a power cut: every tuple
/// whose xmax names a multixact can still have it read after recovery (its creation
/// record precedes the tuple change, and multixact pages go out only after the WAL), the
/// balances and every acknowledged transfer hold as without locks, and the locks of
/// transactions the cut ended hold nothing (recovery's checks update nothing, but a
/// leftover lock would make the next test's writers wait forever). How: the savepoint
/// workload, each transfer first locking its account rows FOR UPDATE and a common row FOR
/// SHARE (so the savepoints' updates make multixacts with an updater, and the two
/// threads' share locks lock-only ones); after each cut, recovery, the checks of the other
/// tests (which read every version through its multixact), then one transaction that
/// locks and updates every row; asserts multixact SLRU writes were at the cuts.
const ROW_LOCKS: Variant = Variant {
    test: "power_loss_with_row_locks",
    plan: Plan {
        synchronous_commit: true,
        checkpoints: &[2, 4],
        read_back: false,
        savepoints: true,
        locks: true,
    },
    seeds: 4,
    watch: is_multixact,
    expect: acked_and_watched,
    after: Some(every_row_can_be_locked),
};

#[test]
fn power_loss_with_slru_tears() {
    run(&SLRU_TEARS);
}

#[test]
fn power_loss_heap_async_commit_hints() {
    run(&ASYNC_COMMIT_HINTS);
}

#[test]
fn power_loss_with_savepoints() {
    run(&SAVEPOINTS);
}

#[test]
fn power_loss_with_row_locks() {
    run(&ROW_LOCKS);
}

/// Proves that a power cut at any fdatasync, fsync or directory fsync of a transactional
/// run loses no acknowledged transfer and half-applies none, whatever prefix of the
/// pending writes (log blocks, data pages, commit-log, subtransaction and multixact
/// pages, segment creates) reached the device. How: three writers with savepoints, row
/// locks (multixacts) and read-back (hint bits), a scanning reader, checkpoints by thread
/// 0 after its second and fourth transfers, on a file system recording its syncs; every
/// prefix at every recorded sync is recovered and verified against the transfers
/// acknowledged before that sync began (CrashMonkey's method; the random fates of the
/// other tests add tears and garbage).
#[test]
fn power_loss_every_prefix_at_every_sync_heap() {
    const TEST: &str = "power_loss_every_prefix_at_every_sync_heap";
    const WRITERS: u64 = 3; // the fourth sequence row is the shared locked one
    let plan = Plan {
        synchronous_commit: true,
        checkpoints: &[2, 4],
        read_back: true,
        savepoints: true,
        locks: true,
    };
    let c = config(true);
    let base = new_table(&c);
    let table = Table::of(&base, &c);
    let vfs = base.duplicate();
    let e = open(&vfs, &c).unwrap();
    vfs.record_sync_points();
    let (commits, acks) = run_writers(&e, &vfs, plan, WRITERS);
    drop(e);
    assert_eq!(
        commits.len() as u64,
        WRITERS * TRANSFERS_PER_THREAD,
        "a failure-free run"
    );
    let points = vfs.take_sync_points();
    let slru = |p: &Path| is_clog(p) || is_subtrans(p) || is_multixact(p);
    let mut slru_dropped = 0;
    let tally = power::explore_prefixes(TEST, &points, |vfs, point, report, ctx| {
        let mut seqs = power::acked_before(&acks, point, accounts::THREADS as usize);
        seqs.truncate(accounts::THREADS as usize);
        let acked = Acked {
            seqs,
            commits: commits.clone(),
            durable: Lsn::default(),
        };
        verify(TEST, vfs, &c, &table, &acked, ctx.point);
        slru_dropped += report.writes_to(slru, CrashChoice::Drop);
    });
    tally.print(
        TEST,
        &format!(
            "; {} sync points; commit-log, subtransaction and multixact writes lost \
             {slru_dropped}",
            points.len()
        ),
    );
    assert!(
        tally.states > 100 && slru_dropped > 0,
        "states {}, SLRU writes lost {slru_dropped}",
        tally.states
    );
}

/// Found by the simulator (`tests/sim.rs`): a table that grew by a page whose first record
/// never became durable was unreadable after a power cut. Extension wrote a page of zeros,
/// covered by no log record; a cut that garbaged or tore that write left a page no replay
/// touches and every read refuses (a checksum failure naming it), so every later scan of
/// the table failed, with nothing committed lost. Now extension only grows the file (a
/// length change is kept, as zeros, or lost; never garbage), and a page's bytes reach the
/// file only after the records that made it. How: insert until the table adds a page,
/// commit asynchronously (nothing flushed), cut the power under many seeds; every
/// recovered table must scan.
#[test]
fn a_power_cut_after_an_extension_leaves_the_table_readable() {
    let c = config(false);
    let base = new_table(&c);
    for seed in 0..48 {
        let vfs = base.duplicate();
        {
            let e = open(&vfs, &c).unwrap();
            let heap = Heap::open(&e, REL);
            let blocks = e.pool().nblocks(REL, ForkNumber::Main).unwrap();
            let x = e.begin_xid().unwrap();
            while e.pool().nblocks(REL, ForkNumber::Main).unwrap() == blocks {
                heap.insert(x, &encode(500, 0)).unwrap();
            }
            e.commit_transaction(x).unwrap();
            vfs.crash_after(0);
        }
        vfs.crash(seed);
        let e = open(&vfs, &c).unwrap();
        let heap = Heap::open(&e, REL);
        let snap = e.txns().snapshot(INVALID_XID);
        let mut accounts = 0;
        heap.scan(&snap, |_, d| accounts += u64::from(decode(d).0 < ACCOUNTS))
            .unwrap_or_else(|err| panic!("seed {seed}: the table does not scan: {err}"));
        assert_eq!(accounts, ACCOUNTS, "seed {seed}");
    }
}
