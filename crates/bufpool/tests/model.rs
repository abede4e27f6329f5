//! Model test of the buffer state machine with shuttle.
//!
//! Run with `RUSTFLAGS="--cfg shuttle" cargo test -p pgbufpool --target-dir target/shuttle --test model` (CI does). Under the
//! feature every atomic, lock and condition variable of the pool comes from shuttle, which
//! runs the real pool code under thousands of random and PCT schedules.
//! Proves: pin/unpin/evict/read-in races never evict a pinned buffer (a pinned page's
//! contents never change under its reader), never lose a dirty flag (after the run and a
//! flush, storage holds every update), and never read a page twice (concurrent misses of
//! one page cost one read). How: a 16-buffer pool (the minimum) with 13 buffers pinned by
//! the test for the whole run, so 3 buffers are fought over by the modeled threads.
//! Read runs (the multi-block miss, `buffer/read_run.rs`): a run's claim, its read on a
//! modeled I/O worker thread and its completion race a plain reader of the same pages, with
//! and without the run being dropped half-taken: every page is read once, every reader sees
//! its page's contents, and every pin is released; and with one read failing (EIO from the
//! FaultVfs): whoever's read fails gets the error, the other waits and gets its page or
//! the error, nobody hangs, and nothing stays pinned or in progress.
//! The first two also run under the list policies (`buffer_replacement = sieve`, `s3fifo`,
//! `car`, `2q`, `cooling`; the last four share `policy/queues.rs`, so `car` runs the full
//! set and the other two the random schedules), and those policies' lists are modelled
//! against a relation drop (`lists_survive_a_drop`).
//! Online resize (`buffer/resize.rs`): the two updaters run while a third thread grows the
//! pool past its 16 buffers and shrinks it back (retiring buffers the updaters hold or
//! dirtied): no update is lost, no pinned page moves, and the invariants hold after
//! (`resize_races_updaters`, under the clock and ARC).
//! Optimistic reads (`buffer/optimistic.rs`): a read with no pin and no lock that
//! validates saw one page whole, though writers change it word by word and evictions
//! reuse its buffer meanwhile (`optimistic_reads_see_whole_pages`).
#![cfg(shuttle)]

mod shuttle_check;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bufpool::{
    BufferPool, BufferTag, Config, ForkNumber, IoContext, IoMethod, IoOp, MemVfs, RelFileId, Vfs,
};

const BODY: usize = bufpool::page::PAGE_HEADER_SIZE;
const FILLER: RelFileId = RelFileId::new(0, 1);
const DATA: RelFileId = RelFileId::new(0, 2);

fn get(page: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(page[off..off + 8].try_into().unwrap())
}

fn put(page: &mut [u8], off: usize, v: u64) {
    page[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

fn config(policy: &str) -> Config {
    let mut c = Config::default();
    c.set("buffer_replacement", policy).unwrap();
    c.set("shared_buffers", "16").unwrap();
    c.set("block_size", "4kB").unwrap();
    c.set("buffer_mapping_partitions", "4").unwrap();
    c.set("io_method", "worker").unwrap();
    c.set("io_workers", "1").unwrap();
    c
}

fn tag(rel: RelFileId, block: u32) -> BufferTag {
    BufferTag::new(rel, ForkNumber::Main, block)
}

/// Creates `rel` with `n` pages, page b stamped with b.
fn fill(pool: &BufferPool, rel: RelFileId, n: u32) {
    pool.create_relation(rel, ForkNumber::Main).unwrap();
    for b in 0..n {
        let buf = pool.extend(rel, ForkNumber::Main).unwrap();
        let mut g = buf.write();
        bufpool::page::init(&mut g, 0);
        put(&mut g, BODY, u64::from(b));
    }
    pool.flush_all().unwrap();
    pool.drop_buffers(rel, None, 0).unwrap();
}

fn new_pool(vfs: &MemVfs, policy: &str) -> Arc<BufferPool> {
    new_pool_with(vfs, config(policy))
}

fn new_pool_with(vfs: &MemVfs, c: Config) -> Arc<BufferPool> {
    Arc::new(
        BufferPool::open(
            Arc::new(vfs.clone()) as Arc<dyn Vfs>,
            Path::new("/db"),
            &c,
            true,
        )
        .unwrap(),
    )
}

/// Three threads miss on the same three pages at once: each page is read exactly once.
fn no_duplicate_reads(policy: &str) {
    let vfs = MemVfs::new();
    let pool = new_pool(&vfs, policy);
    fill(&pool, DATA, 3);
    let before = pool.stats().total(IoOp::Read);
    let threads: Vec<_> = [[0u32, 1, 2], [2, 1, 0], [1, 2, 0]]
        .into_iter()
        .map(|order| {
            let pool = pool.clone();
            shuttle::thread::spawn(move || {
                for b in order {
                    let buf = pool.read(tag(DATA, b)).unwrap();
                    assert_eq!(get(&buf.read(), BODY), u64::from(b));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        pool.stats().total(IoOp::Read) - before,
        3,
        "a page was read twice"
    );
    pool.check_invariants().unwrap();
}

type Bumps = Arc<Vec<AtomicU64>>;

/// A modelled thread that increments pages `order` of DATA in turn, counting each in
/// `bumps`; between its change and its re-read it yields with the page still pinned, and
/// the page must still be the one it pinned.
fn updater(
    pool: &Arc<BufferPool>,
    bumps: &Bumps,
    order: Vec<u32>,
) -> shuttle::thread::JoinHandle<()> {
    let (pool, bumps) = (pool.clone(), bumps.clone());
    shuttle::thread::spawn(move || {
        for b in order {
            let buf = pool.read(tag(DATA, b)).unwrap();
            {
                let mut g = buf.write();
                assert_eq!(get(&g, BODY), u64::from(b));
                let v = get(&g, BODY + 8);
                put(&mut g, BODY + 8, v + 1);
                bumps[b as usize].fetch_add(1, Ordering::Relaxed);
            }
            // Still pinned: let others run, then the page must still be ours.
            shuttle::thread::yield_now();
            assert_eq!(
                get(&buf.read(), BODY),
                u64::from(b),
                "pinned buffer was evicted"
            );
            assert_eq!(buf.tag(), tag(DATA, b));
        }
    })
}

/// A fresh pool over `vfs` finds every update `bumps` counted on DATA's 5 pages.
fn assert_every_bump_stored(vfs: &MemVfs, policy: &str, bumps: &Bumps) {
    let pool = new_pool(vfs, policy);
    for b in 0..5u32 {
        let buf = pool.read(tag(DATA, b)).unwrap();
        assert_eq!(
            get(&buf.read(), BODY + 8),
            bumps[b as usize].load(Ordering::Relaxed),
            "lost update on page {b}"
        );
    }
}

/// Two updaters and a flusher on 5 pages competing for 3 free buffers.
fn pins_hold_and_dirty_is_never_lost(policy: &str) {
    let vfs = MemVfs::new();
    let bumps: Bumps = Arc::new((0..5).map(|_| AtomicU64::new(0)).collect());
    {
        let pool = new_pool(&vfs, policy);
        fill(&pool, FILLER, 13);
        fill(&pool, DATA, 5);
        let held: Vec<_> = (0..13)
            .map(|b| pool.read(tag(FILLER, b)).unwrap())
            .collect();
        let mut threads: Vec<_> = [vec![0u32, 1, 2, 3], vec![4, 3, 1, 0]]
            .into_iter()
            .map(|order| updater(&pool, &bumps, order))
            .collect();
        {
            let pool = pool.clone();
            threads.push(shuttle::thread::spawn(move || {
                pool.flush_relation(DATA).unwrap();
            }));
        }
        for t in threads {
            t.join().unwrap();
        }
        drop(held);
        pool.flush_all().unwrap();
        pool.check_invariants().unwrap();
    }
    // A fresh pool over the same storage sees every update.
    assert_every_bump_stored(&vfs, policy, &bumps);
}

/// Page b of DATA for the optimistic model: its number, then two copies of a counter
/// tagged with the number in its high half (a writer changes them one at a time).
fn fill_pairs(pool: &BufferPool) {
    pool.create_relation(DATA, ForkNumber::Main).unwrap();
    for b in 0..5u32 {
        let buf = pool.extend(DATA, ForkNumber::Main).unwrap();
        let mut g = buf.write();
        bufpool::page::init(&mut g, 0);
        put(&mut g, BODY, u64::from(b));
        put(&mut g, BODY + 8, u64::from(b) << 32);
        put(&mut g, BODY + 16, u64::from(b) << 32);
    }
    pool.flush_all().unwrap();
    pool.drop_buffers(DATA, None, 0).unwrap();
}

/// Optimistic reads (`optimistic_reads = on`, `buffer/optimistic.rs`): a writer changes
/// DATA's pages 0-3 (one copy of the counter, a yield, then the other) and a plain reader
/// reads all 5, through 3 free buffers, so pages are evicted and others read into their
/// buffers while a third thread reads optimistically, yielding between its three words on
/// the first pass over the pages and not on the second. Whatever the schedule, a read
/// that validates saw one page, whole: its own number, and two equal copies tagged with
/// it. `validated` counts the reads that validated over all schedules (so the assertions
/// are not vacuous).
fn optimistic_reads_see_whole_pages(
    policy: &str,
    validated: &'static std::sync::atomic::AtomicU64,
) {
    let vfs = MemVfs::new();
    let mut c = config(policy);
    c.set("optimistic_reads", "on").unwrap();
    let pool = new_pool_with(&vfs, c);
    fill(&pool, FILLER, 13);
    fill_pairs(&pool);
    let held: Vec<_> = (0..13)
        .map(|b| pool.read(tag(FILLER, b)).unwrap())
        .collect();
    let writer = {
        let pool = pool.clone();
        shuttle::thread::spawn(move || {
            for b in [0u32, 1, 2, 3] {
                let buf = pool.read(tag(DATA, b)).unwrap();
                let mut g = buf.write();
                let v = get(&g, BODY + 8) + 1;
                put(&mut g, BODY + 8, v);
                shuttle::thread::yield_now();
                put(&mut g, BODY + 16, v);
            }
        })
    };
    let evictor = {
        let pool = pool.clone();
        shuttle::thread::spawn(move || {
            for b in [4u32, 3, 2, 1, 0] {
                drop(pool.read(tag(DATA, b)).unwrap());
            }
        })
    };
    let reader = {
        let pool = pool.clone();
        shuttle::thread::spawn(move || {
            for (i, b) in [0u32, 1, 2, 3, 4, 0, 1, 2, 3, 4].into_iter().enumerate() {
                let pause = || {
                    if i < 5 {
                        shuttle::thread::yield_now();
                    }
                };
                let seen = pool.read_optimistic(tag(DATA, b), IoContext::Normal, |pg| {
                    let id = pg.u64_at(BODY);
                    pause();
                    let x = pg.u64_at(BODY + 8);
                    pause();
                    (id, x, pg.u64_at(BODY + 16))
                });
                if let Some((id, x, y)) = seen {
                    validated.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    assert_eq!(id, u64::from(b), "a validated read saw another page");
                    assert_eq!(x >> 32, u64::from(b), "a validated read mixed two pages");
                    assert_eq!(x, y, "a validated read saw a change half made");
                }
            }
        })
    };
    let threads = [writer, evictor, reader];
    for t in threads {
        t.join().unwrap();
    }
    drop(held);
    pool.check_invariants().unwrap();
}

/// Two updaters on 5 pages while a third thread resizes the pool 16 -> 20 -> 16 -> 18
/// buffers (13 of them pinned by the test throughout).
fn resize_races_updaters(policy: &str) {
    let vfs = MemVfs::new();
    let bumps: Bumps = Arc::new((0..5).map(|_| AtomicU64::new(0)).collect());
    {
        let mut c = config(policy);
        c.set("max_shared_buffers", "20").unwrap();
        let pool = new_pool_with(&vfs, c);
        fill(&pool, FILLER, 13);
        fill(&pool, DATA, 5);
        let held: Vec<_> = (0..13)
            .map(|b| pool.read(tag(FILLER, b)).unwrap())
            .collect();
        let mut threads: Vec<_> = [vec![0u32, 1, 2, 3, 4], vec![4, 3, 1, 0, 2]]
            .into_iter()
            .map(|order| updater(&pool, &bumps, order))
            .collect();
        {
            let pool = pool.clone();
            threads.push(shuttle::thread::spawn(move || {
                for n in [20, 16, 18] {
                    let r = pool
                        .resize(n, std::time::Duration::from_secs(3600))
                        .unwrap();
                    assert_eq!(r.to_buffers, n);
                }
            }));
        }
        for t in threads {
            t.join().unwrap();
        }
        drop(held);
        assert_eq!(pool.nbuffers(), 18);
        pool.check_invariants().unwrap();
        pool.flush_all().unwrap();
    }
    assert_every_bump_stored(&vfs, policy, &bumps);
}

#[test]
fn model_resize_races_updaters_random() {
    shuttle_check::check_random(|| resize_races_updaters("clock"), 2000);
}

#[test]
fn model_resize_races_updaters_pct() {
    shuttle_check::check_pct(|| resize_races_updaters("clock"), 2000, 3);
}

#[test]
fn model_car_resize_races_updaters_random() {
    shuttle_check::check_random(|| resize_races_updaters("car"), 1000);
}

/// A read run over pages 0..4 (its read on the modeled I/O worker) and a reader of pages 2
/// and 1: each page is read once, both see the right contents; with `drop_early` the run
/// is dropped after its first page, with its read perhaps still in flight.
fn read_run_races_a_reader(drop_early: bool) {
    let vfs = MemVfs::new();
    let pool = new_pool(&vfs, "clock");
    fill(&pool, DATA, 4);
    let before = pool.stats().total(IoOp::Read);
    let runner = {
        let pool = pool.clone();
        shuttle::thread::spawn(move || {
            let mut run = pool
                .start_read_run(DATA, ForkNumber::Main, 0, 4, None, IoMethod::Worker)
                .unwrap();
            while let Some(r) = run.next() {
                let b = r.unwrap();
                assert_eq!(get(&b.read(), BODY), u64::from(b.tag().block));
                if drop_early {
                    break;
                }
            }
        })
    };
    let reader = {
        let pool = pool.clone();
        shuttle::thread::spawn(move || {
            for b in [2u32, 1] {
                let buf = pool.read(tag(DATA, b)).unwrap();
                assert_eq!(get(&buf.read(), BODY), u64::from(b));
            }
        })
    };
    runner.join().unwrap();
    reader.join().unwrap();
    assert_eq!(
        pool.stats().total(IoOp::Read) - before,
        4,
        "a page was read twice (or not at all)"
    );
    assert_eq!(pool.usage_summary().pins, 0, "a pin was leaked");
    pool.check_invariants().unwrap();
}

/// Like `read_run_races_a_reader`, with the first read of DATA failing with EIO (the run's
/// vectored read or the reader's single read, whichever comes first).
fn failed_read_run_wakes_a_reader() {
    use bufpool::testing::{FaultKind, FaultOp, FaultRule, FaultVfs};
    let vfs = MemVfs::new();
    let fault = FaultVfs::new(Arc::new(vfs.clone()));
    let pool = Arc::new(
        BufferPool::open(
            Arc::new(fault.clone()) as Arc<dyn Vfs>,
            Path::new("/db"),
            &config("clock"),
            true,
        )
        .unwrap(),
    );
    fill(&pool, DATA, 3);
    fault.add_rule(FaultRule::nth("base/0/2", FaultOp::Read, 1, FaultKind::Eio));
    let eio = |e: &bufpool::BufferError| e.raw_os_error() == Some(libc::EIO);
    let runner = {
        let pool = pool.clone();
        shuttle::thread::spawn(move || {
            let mut run = pool
                .start_read_run(DATA, ForkNumber::Main, 0, 3, None, IoMethod::Worker)
                .unwrap();
            while let Some(r) = run.next() {
                match r {
                    Ok(b) => assert_eq!(get(&b.read(), BODY), u64::from(b.tag().block)),
                    Err(e) => assert!(eio(&e), "{e}"),
                }
            }
        })
    };
    let reader = {
        let pool = pool.clone();
        shuttle::thread::spawn(move || match pool.read(tag(DATA, 1)) {
            Ok(b) => assert_eq!(get(&b.read(), BODY), 1),
            Err(e) => assert!(eio(&e), "{e}"),
        })
    };
    runner.join().unwrap();
    reader.join().unwrap();
    assert_eq!(fault.injected(), 1);
    assert_eq!(pool.usage_summary().pins, 0, "a pin was leaked");
    pool.check_invariants().unwrap();
    for b in 0..3u32 {
        assert_eq!(
            get(&pool.read(tag(DATA, b)).unwrap().read(), BODY),
            u64::from(b)
        );
    }
}

#[test]
fn model_failed_read_run_wakes_a_reader_random() {
    shuttle_check::check_random(failed_read_run_wakes_a_reader, 1000);
}

#[test]
fn model_failed_read_run_wakes_a_reader_pct() {
    shuttle_check::check_pct(failed_read_run_wakes_a_reader, 1000, 3);
}

#[test]
fn model_read_run_races_a_reader_random() {
    shuttle_check::check_random(|| read_run_races_a_reader(false), 1000);
}

#[test]
fn model_read_run_races_a_reader_pct() {
    shuttle_check::check_pct(|| read_run_races_a_reader(false), 1000, 3);
}

#[test]
fn model_read_run_dropped_early_random() {
    shuttle_check::check_random(|| read_run_races_a_reader(true), 1000);
}

/// A list policy's lists against a relation drop: two threads miss on DATA's pages
/// (taking victims from the lists, admitting at a head) while a third drops OTHER's
/// buffers (off the lists, onto the free list), which a victim search may meet at any
/// point: afterwards the lists hold exactly the buffers that hold a page, each once
/// (`check_invariants`).
fn lists_survive_a_drop(policy: &str) {
    const OTHER: RelFileId = RelFileId::new(0, 3);
    let vfs = MemVfs::new();
    let pool = new_pool(&vfs, policy);
    fill(&pool, FILLER, 12);
    fill(&pool, DATA, 4);
    fill(&pool, OTHER, 3);
    let held: Vec<_> = (0..12)
        .map(|b| pool.read(tag(FILLER, b)).unwrap())
        .collect();
    for b in 0..3 {
        drop(pool.read(tag(OTHER, b)).unwrap());
    }
    let mut threads = Vec::new();
    for order in [[0u32, 1, 2, 3], [3, 2, 1, 0]] {
        let pool = pool.clone();
        threads.push(shuttle::thread::spawn(move || {
            for b in order {
                let buf = pool.read(tag(DATA, b)).unwrap();
                assert_eq!(get(&buf.read(), BODY), u64::from(b));
            }
        }));
    }
    {
        let pool = pool.clone();
        threads.push(shuttle::thread::spawn(move || {
            pool.drop_buffers(OTHER, None, 0).unwrap();
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    drop(held);
    pool.check_invariants().unwrap();
}

#[test]
fn model_optimistic_reads_see_whole_pages_random() {
    static VALIDATED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    shuttle_check::check_random(
        || optimistic_reads_see_whole_pages("clock", &VALIDATED),
        2000,
    );
    assert!(VALIDATED.load(std::sync::atomic::Ordering::Relaxed) > 0);
}

#[test]
fn model_optimistic_reads_see_whole_pages_pct() {
    static VALIDATED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    shuttle_check::check_pct(
        || optimistic_reads_see_whole_pages("clock", &VALIDATED),
        2000,
        3,
    );
    assert!(VALIDATED.load(std::sync::atomic::Ordering::Relaxed) > 0);
}

#[test]
fn model_no_duplicate_reads_random() {
    shuttle_check::check_random(|| no_duplicate_reads("clock"), 2000);
}

#[test]
fn model_no_duplicate_reads_pct() {
    shuttle_check::check_pct(|| no_duplicate_reads("clock"), 2000, 3);
}

#[test]
fn model_pins_and_dirty_flags_random() {
    shuttle_check::check_random(|| pins_hold_and_dirty_is_never_lost("clock"), 2000);
}

#[test]
fn model_pins_and_dirty_flags_pct() {
    shuttle_check::check_pct(|| pins_hold_and_dirty_is_never_lost("clock"), 2000, 3);
}

#[test]
fn model_sieve_no_duplicate_reads_pct() {
    shuttle_check::check_pct(|| no_duplicate_reads("sieve"), 1000, 3);
}

#[test]
fn model_sieve_pins_and_dirty_flags_random() {
    shuttle_check::check_random(|| pins_hold_and_dirty_is_never_lost("sieve"), 1000);
}

#[test]
fn model_sieve_list_survives_a_drop_random() {
    shuttle_check::check_random(|| lists_survive_a_drop("sieve"), 1000);
}

#[test]
fn model_sieve_list_survives_a_drop_pct() {
    shuttle_check::check_pct(|| lists_survive_a_drop("sieve"), 1000, 3);
}

#[test]
fn model_s3fifo_no_duplicate_reads_pct() {
    shuttle_check::check_pct(|| no_duplicate_reads("s3fifo"), 1000, 3);
}

#[test]
fn model_s3fifo_pins_and_dirty_flags_random() {
    shuttle_check::check_random(|| pins_hold_and_dirty_is_never_lost("s3fifo"), 1000);
}

#[test]
fn model_s3fifo_lists_survive_a_drop_random() {
    shuttle_check::check_random(|| lists_survive_a_drop("s3fifo"), 1000);
}

#[test]
fn model_s3fifo_lists_survive_a_drop_pct() {
    shuttle_check::check_pct(|| lists_survive_a_drop("s3fifo"), 1000, 3);
}

#[test]
fn model_car_no_duplicate_reads_pct() {
    shuttle_check::check_pct(|| no_duplicate_reads("car"), 1000, 3);
}

#[test]
fn model_car_pins_and_dirty_flags_random() {
    shuttle_check::check_random(|| pins_hold_and_dirty_is_never_lost("car"), 1000);
}

#[test]
fn model_car_lists_survive_a_drop_random() {
    shuttle_check::check_random(|| lists_survive_a_drop("car"), 1000);
}

#[test]
fn model_car_lists_survive_a_drop_pct() {
    shuttle_check::check_pct(|| lists_survive_a_drop("car"), 1000, 3);
}

#[test]
fn model_2q_pins_and_dirty_flags_random() {
    shuttle_check::check_random(|| pins_hold_and_dirty_is_never_lost("2q"), 1000);
}

#[test]
fn model_2q_lists_survive_a_drop_random() {
    shuttle_check::check_random(|| lists_survive_a_drop("2q"), 1000);
}

#[test]
fn model_cooling_pins_and_dirty_flags_random() {
    shuttle_check::check_random(|| pins_hold_and_dirty_is_never_lost("cooling"), 1000);
}

#[test]
fn model_cooling_lists_survive_a_drop_random() {
    shuttle_check::check_random(|| lists_survive_a_drop("cooling"), 1000);
}
