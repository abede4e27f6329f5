//! Read streams and the multi-block miss, end to end over real files (so io_uring really
//! reads) and over fault-injecting ones.
//!
//! Proves: a stream returns every block of its source exactly once, in order, for each
//! io_method (io_uring is counted as skipped, saying why, only when the build lacks the
//! feature or the kernel refuses the ring); a combined read with a bad page in the middle
//! fails that page alone, naming its block; a failed read run ahead of use wakes a thread
//! waiting for one of its buffers (which gets the error or reads the page itself); dropping
//! a stream mid-way releases every pin; the distance grows after reads and decays on hits;
//! the pin budget holds. How: small pools over a temporary directory, pages stamped with
//! their block number; a gate inside the I/O layer instead of sleeps where a read must be
//! held in flight.

mod common;

use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};

use bufpool::buffer::{Ring, RingKind};
use bufpool::page::PageProblem;
use bufpool::testing::{Call, CallHook, FaultKind, FaultOp, FaultRule, FaultVfs, HookVfs};
use bufpool::{
    BlockSource, BufferError, BufferPool, ForkNumber, IoMethod, OpenOptions, ReadStream,
    ReadStreamOptions, RealVfs, SmgrError, Vfs,
};
use common::{config, fill, get_u64, open, tag, BODY, REL};

const MAIN: ForkNumber = ForkNumber::Main;

fn opts(method: IoMethod, combine_kb: usize, ios: usize, max_pins: usize) -> ReadStreamOptions {
    ReadStreamOptions {
        io_method: Some(method),
        io_combine_limit_bytes: combine_kb << 10,
        io_concurrency: ios,
        max_pins: Some(max_pins),
    }
}

/// A pool over real files in a fresh directory, with `n` stamped pages of REL, none cached.
fn real_pool(dir: &Path, buffers: &str, n: u32) -> BufferPool {
    let pool = open(Arc::new(RealVfs::new()), dir, &config(buffers));
    fill(&pool, n);
    pool.drop_buffers(REL, None, 0).unwrap();
    pool
}

/// Whether `method` is in effect for `pool`; prints why not (a counted skip).
fn in_effect(pool: &BufferPool, method: IoMethod) -> bool {
    let aio = pool.aio(method);
    if aio.method() == method {
        return true;
    }
    println!(
        "SKIPPED io_method={}: {} (ran on {} instead)",
        method.name(),
        aio.fallback_reason().unwrap_or("?"),
        aio.method().name()
    );
    false
}

/// Proves: every block of a range comes out once, in order, with its own contents, for
/// each io_method, some of them hits (every 5th block cached beforehand) and the misses
/// combined into reads of several pages.
#[test]
fn a_stream_returns_every_block_once_in_order_for_each_io_method() {
    let mut exercised = 0;
    let mut skipped = 0;
    for method in IoMethod::ALL {
        let dir = tempfile::tempdir().unwrap();
        let pool = real_pool(dir.path(), "256", 150);
        if !in_effect(&pool, method) {
            assert_eq!(method, IoMethod::IoUring, "only io_uring may fall back");
            skipped += 1;
        } else {
            exercised += 1;
        }
        for b in (0..150).step_by(5) {
            drop(pool.read(tag(b)).unwrap());
        }
        let mut stream =
            ReadStream::range(&pool, REL, MAIN, 0..150, None, &opts(method, 64, 4, 32));
        assert_eq!(stream.io_method(), method);
        let mut next = 0u32;
        while let Some(r) = stream.next() {
            let buf = r.unwrap();
            assert_eq!(buf.tag(), tag(next), "{method:?}: out of order");
            assert_eq!(get_u64(&buf.read(), BODY), u64::from(next));
            next += 1;
        }
        assert_eq!(next, 150, "{method:?}: blocks missing");
        assert!(
            stream.next().is_none(),
            "an exhausted stream stays exhausted"
        );
        let s = stream.stats().clone();
        assert_eq!(s.blocks_returned, 150);
        assert_eq!(
            s.blocks_hit + s.blocks_read + s.blocks_elsewhere,
            150,
            "{s:?}"
        );
        assert_eq!(s.blocks_hit, 30, "{s:?}");
        assert!(s.reads < s.blocks_read, "misses were combined: {s:?}");
        assert!(s.read_sizes.iter().skip(2).any(|&n| n > 0), "{s:?}");
        assert!(s.pins_max <= 32, "{s:?}");
        drop(stream);
        assert_eq!(pool.usage_summary().pins, 0);
        pool.check_invariants().unwrap();
    }
    println!("io methods exercised: {exercised}, skipped: {skipped}");
    assert!(exercised >= 2, "sync and worker always run");
    #[cfg(feature = "io-uring")]
    if skipped > 0 {
        println!("SKIPPED io_uring with the io-uring feature built: the kernel refused the ring");
    }
}

/// Proves: a callback source's blocks come out in its order (gaps, repeats and going
/// backwards included), and a stream with a bulk-read ring works through it.
#[test]
fn a_callback_source_is_followed_in_its_order() {
    let dir = tempfile::tempdir().unwrap();
    let pool = real_pool(dir.path(), "256", 64);
    let order = [5u32, 6, 7, 8, 1, 2, 40, 41, 42, 7, 0, 63];
    let mut it = order.into_iter();
    let mut ring = Ring::new(RingKind::BulkRead, 256 << 10, &pool);
    let mut stream = ReadStream::new(
        &pool,
        REL,
        MAIN,
        BlockSource::Callback(Box::new(move || it.next())),
        ring.as_mut(),
        &opts(IoMethod::Worker, 128, 2, 16),
    );
    let got: Vec<u32> = std::iter::from_fn(|| stream.next())
        .map(|r| {
            let b = r.unwrap();
            assert_eq!(get_u64(&b.read(), BODY), u64::from(b.tag().block));
            b.tag().block
        })
        .collect();
    assert_eq!(got, order);
    drop(stream);
    assert_eq!(pool.usage_summary().pins, 0);
}

/// Proves: one combined read whose middle page fails its checksum reports that page's
/// block (and file) and leaves the other pages of the same read valid and usable; the bad
/// page is not left in the pool as valid. How: garbage written into block 5 behind the
/// pool's back; a stream over 3..8 reads them with one 5-page read.
#[test]
fn a_bad_page_in_a_combined_read_fails_alone() {
    for method in IoMethod::ALL {
        let dir = tempfile::tempdir().unwrap();
        let pool = real_pool(dir.path(), "64", 10);
        in_effect(&pool, method);
        let path = pool.smgr().segment_path(REL, MAIN, 0);
        {
            let f = RealVfs::new()
                .open(&path, OpenOptions::read_write())
                .unwrap();
            let bs = pool.page_size() as u64;
            f.write_at(&[0xAB; 64], 5 * bs + 200).unwrap();
        }
        let mut run = pool.start_read_run(REL, MAIN, 3, 5, None, method).unwrap();
        assert_eq!(run.len(), 5);
        assert_eq!(
            run.read_sizes().collect::<Vec<_>>(),
            [5],
            "one combined read"
        );
        let mut seen = Vec::new();
        while let Some(r) = run.next() {
            match r {
                Ok(b) => {
                    assert_eq!(get_u64(&b.read(), BODY), u64::from(b.tag().block));
                    seen.push(Ok(b.tag().block));
                }
                Err(BufferError::Corrupt {
                    tag: t,
                    path: p,
                    problem,
                }) => {
                    assert_eq!(p, path);
                    assert!(matches!(problem, PageProblem::Checksum { .. }), "{problem}");
                    seen.push(Err(t.block));
                }
                Err(e) => panic!("{method:?}: unexpected {e}"),
            }
        }
        assert_eq!(seen, [Ok(3), Ok(4), Err(5), Ok(6), Ok(7)], "{method:?}");
        let st = run.stats();
        assert_eq!((st.reads, st.blocks_read, st.hits), (1, 5, 0), "{st:?}");
        drop(run);
        // A stream over the same blocks: the bad page is reported in its place again.
        let blocks: Vec<Result<u32, u32>> =
            ReadStream::range(&pool, REL, MAIN, 0..10, None, &opts(method, 128, 4, 16))
                .enumerate()
                .map(|(i, r)| r.map(|b| b.tag().block).map_err(|_| i as u32))
                .collect();
        let want: Vec<Result<u32, u32>> = (0..10)
            .map(|b| if b == 5 { Err(5) } else { Ok(b) })
            .collect();
        assert_eq!(blocks, want);
        // The good pages stay cached and valid; the bad one fails again when read.
        let before = pool.stats().total(bufpool::IoOp::Read);
        for b in [3, 4, 6, 7] {
            drop(pool.read(tag(b)).unwrap());
        }
        assert_eq!(pool.stats().total(bufpool::IoOp::Read), before, "hits");
        assert!(matches!(
            pool.read(tag(5)),
            Err(BufferError::Corrupt { tag: t, .. }) if t.block == 5
        ));
        assert_eq!(pool.usage_summary().pins, 0);
        pool.check_invariants().unwrap();
    }
}

/// Where the first multi-page read of the relation's file waits until the test opens it.
#[derive(Debug)]
struct Gate {
    /// Taken by the first gated read: tells the test it is in, waits for the release.
    first: Mutex<Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>>,
}

/// A file system that holds the first read of more than one page of the relation's file
/// at `gate` until the test opens it, then passes it on (to a FaultVfs, which fails it).
fn gated(inner: Arc<dyn Vfs>, gate: Arc<Gate>) -> HookVfs {
    let hook: CallHook = Arc::new(move |c: &Call<'_>| {
        let many = c.op == FaultOp::Read && c.len > 8192;
        if many && c.path.to_string_lossy().contains("16384") {
            if let Some((entered, release)) = gate.first.lock().unwrap().take() {
                entered.send(()).unwrap();
                release.recv().unwrap();
            }
        }
        None
    });
    HookVfs::new(inner, hook)
}

/// Proves: a read run ahead of use that fails (EIO injected by the FaultVfs) reports the
/// error, with its block and errno, for every page it covered, and a thread that meanwhile
/// pinned one of those buffers and waits for it is woken: it gets the error or reads the
/// page itself (here the retry succeeds, the fault being one-shot); nothing hangs; the pool
/// is clean afterwards. How: the worker's read is held at a gate until the other thread
/// has pinned the buffer (seen in the pool's pin count), then released into the fault.
#[test]
fn a_failed_async_read_wakes_its_waiters() {
    let dir = tempfile::tempdir().unwrap();
    let fault = FaultVfs::new(Arc::new(RealVfs::new()));
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let gate = Arc::new(Gate {
        first: Mutex::new(None),
    });
    let vfs = gated(Arc::new(fault.clone()), gate.clone());
    let pool = Arc::new(open(Arc::new(vfs), dir.path(), &config("64")));
    fill(&pool, 8);
    pool.drop_buffers(REL, None, 0).unwrap();
    fault.add_rule(FaultRule::nth("16384", FaultOp::Read, 1, FaultKind::Eio));
    *gate.first.lock().unwrap() = Some((entered_tx, release_rx));

    // Four blocks claimed and submitted as one read, which waits at the gate.
    let mut run = pool
        .start_read_run(REL, MAIN, 0, 4, None, IoMethod::Worker)
        .unwrap();
    assert_eq!(run.read_sizes().collect::<Vec<_>>(), [4]);
    entered_rx.recv().unwrap();
    let waiter = std::thread::scope(|s| {
        let pins = pool.usage_summary().pins;
        let waiter = s.spawn(|| pool.read(tag(2)).map(|b| get_u64(&b.read(), BODY)));
        // The waiter has pinned block 2's buffer (claimed by the read at the gate) once the
        // pin count rises; from then on it waits for that read, or retries after it.
        while pool.usage_summary().pins == pins && !waiter.is_finished() {
            std::thread::yield_now();
        }
        release_tx.send(()).unwrap();
        waiter.join().unwrap()
    });
    for i in 0..4u32 {
        let e = run.next().unwrap().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
        match e {
            BufferError::Storage(SmgrError::Read { tag: t, .. }) => assert_eq!(t.block, i),
            other => panic!("{other}"),
        }
    }
    assert!(run.next().is_none());
    drop(run);
    match waiter {
        Ok(v) => assert_eq!(v, 2, "the waiter read the page itself"),
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}"),
    }
    assert_eq!(pool.usage_summary().pins, 0);
    pool.check_invariants().unwrap();
    // Through a stream: the next read fails too; its block's error comes out in its place
    // and the stream goes on with the others.
    fault.add_rule(FaultRule::nth("16384", FaultOp::Read, 1, FaultKind::Eio));
    let blocks: Vec<Result<u32, i32>> = ReadStream::range(
        &pool,
        REL,
        MAIN,
        0..8,
        None,
        &opts(IoMethod::Worker, 128, 4, 16),
    )
    .map(|r| {
        r.map(|b| b.tag().block)
            .map_err(|e| e.raw_os_error().unwrap())
    })
    .collect();
    assert_eq!(blocks[0], Err(libc::EIO), "{blocks:?}");
    assert_eq!(
        blocks[1..],
        (1..8).map(Ok).collect::<Vec<_>>()[..],
        "{blocks:?}"
    );
    assert_eq!(pool.usage_summary().pins, 0);
    pool.check_invariants().unwrap();
    // The faults were one-shot: a new stream reads every page.
    let blocks: Vec<u32> = ReadStream::range(
        &pool,
        REL,
        MAIN,
        0..8,
        None,
        &opts(IoMethod::Worker, 128, 4, 16),
    )
    .map(|r| r.unwrap().tag().block)
    .collect();
    assert_eq!(blocks, (0..8).collect::<Vec<_>>());
}

/// Proves: dropping a stream mid-way, with reads in flight and buffers queued, waits for
/// those reads and releases every pin: every refcount back to 0, the pool's invariants
/// clean, the pages it had read valid and cached.
#[test]
fn dropping_a_stream_mid_way_releases_every_pin() {
    for method in IoMethod::ALL {
        let dir = tempfile::tempdir().unwrap();
        let pool = real_pool(dir.path(), "128", 100);
        in_effect(&pool, method);
        let mut stream =
            ReadStream::range(&pool, REL, MAIN, 0..100, None, &opts(method, 32, 8, 24));
        let held: Vec<_> = (0..5).map(|_| stream.next().unwrap().unwrap()).collect();
        assert!(stream.pinned() > 0, "reads were queued ahead");
        drop(stream);
        assert_eq!(pool.usage_summary().pins, held.len() as u64);
        drop(held);
        let u = pool.usage_summary();
        assert_eq!((u.pins, u.pinned), (0, 0), "{method:?}");
        pool.check_invariants().unwrap();
        for b in 0..5 {
            assert_eq!(
                get_u64(&pool.read(tag(b)).unwrap().read(), BODY),
                u64::from(b)
            );
        }
    }
}

/// Proves: the distance doubles after runs that needed reads (up to its maximum), decays
/// by one per hit, never drops below 1; the stream's pins and the pool's pins stay within
/// the budget at every step. How: blocks 0..48 not cached, 48..96 cached; io_method sync
/// so the sequence of hits and misses is deterministic.
#[test]
fn the_distance_grows_on_misses_and_decays_on_hits_within_the_pin_budget() {
    let dir = tempfile::tempdir().unwrap();
    let pool = real_pool(dir.path(), "256", 96);
    for b in 48..96 {
        drop(pool.read(tag(b)).unwrap());
    }
    let budget = 24;
    let mut stream = ReadStream::range(
        &pool,
        REL,
        MAIN,
        0..96,
        None,
        &opts(IoMethod::Sync, 64, 4, budget),
    );
    assert_eq!(stream.max_distance(), budget, "min(4 x 8 pages, 24)");
    assert_eq!(stream.distance(), 1);
    let mut distances = Vec::new();
    while let Some(r) = stream.next() {
        let b = r.unwrap();
        distances.push((b.tag().block, stream.distance()));
        assert!(stream.pinned() <= budget);
        assert!(
            pool.usage_summary().pins <= budget as u64 + 1,
            "queued + the one held"
        );
    }
    let during_misses = distances.iter().filter(|(b, _)| *b < 40).map(|d| d.1).max();
    assert_eq!(
        during_misses,
        Some(budget),
        "grew to the maximum: {distances:?}"
    );
    let first_grows: Vec<usize> = distances.iter().take(4).map(|d| d.1).collect();
    assert!(
        first_grows.windows(2).all(|w| w[1] >= w[0]),
        "{first_grows:?}"
    );
    assert_eq!(distances[0].1, 2, "one read doubled it: {distances:?}");
    let hits: Vec<usize> = distances
        .iter()
        .filter(|(b, _)| *b >= 72)
        .map(|d| d.1)
        .collect();
    assert!(
        hits.windows(2).all(|w| w[1] <= w[0]),
        "only decays on hits: {hits:?}"
    );
    assert_eq!(
        distances.last().unwrap().1,
        1,
        "decayed to 1: {distances:?}"
    );
    assert!(stream.stats().pins_max <= budget);
    assert_eq!(stream.stats().distance_max, budget);
}

/// Proves: many streams open at once on a small pool never pin it all: each stays within
/// its share (nbuffers / 16) and all together within the pool-wide look-ahead account
/// (half the pool), while every stream still makes progress, block by block, in order.
/// How: 40 streams of 4 pins each (160) on a 64-buffer pool, taken round robin.
#[test]
fn many_streams_share_a_small_pool() {
    let dir = tempfile::tempdir().unwrap();
    let pool = real_pool(dir.path(), "64", 800);
    let (_, limit) = pool.lookahead_pins();
    assert_eq!(limit, 32, "64 buffers / 2");
    let o = ReadStreamOptions {
        io_method: Some(IoMethod::Worker),
        ..ReadStreamOptions::default()
    };
    let mut streams: Vec<_> = (0..40u32)
        .map(|i| ReadStream::range(&pool, REL, MAIN, i * 20..i * 20 + 20, None, &o))
        .collect();
    for s in &streams {
        assert_eq!(s.max_distance(), 4, "64 buffers / 16");
    }
    let mut most = 0;
    for step in 0..20u32 {
        for (i, s) in streams.iter_mut().enumerate() {
            let b = s.next().unwrap().unwrap();
            assert_eq!(b.tag().block, i as u32 * 20 + step);
            assert_eq!(get_u64(&b.read(), BODY), u64::from(b.tag().block));
            let pins = pool.usage_summary().pins;
            most = most.max(pins);
            assert!(
                pins <= limit as u64 + 1,
                "{pins} pins: the account's {limit} + the one held"
            );
            assert!(pool.lookahead_pins().0 <= limit);
        }
    }
    println!("most pins at once: {most} of 64 buffers");
    assert!(streams.iter_mut().all(|s| s.next().is_none()));
    drop(streams);
    assert_eq!(pool.usage_summary().pins, 0);
    assert_eq!(pool.lookahead_pins().0, 0, "every reservation given back");
}

/// Proves: a dropped stream gives its look-ahead pins back to the pool's account.
#[test]
fn a_dropped_stream_gives_its_lookahead_pins_back() {
    let dir = tempfile::tempdir().unwrap();
    let pool = real_pool(dir.path(), "128", 64);
    let mut s = ReadStream::range(
        &pool,
        REL,
        MAIN,
        0..64,
        None,
        &opts(IoMethod::Worker, 64, 4, 32),
    );
    let first = s.next().unwrap().unwrap();
    let _second = s.next().unwrap().unwrap();
    assert!(pool.lookahead_pins().0 > 0 && pool.lookahead_pins().0 == s.pinned());
    drop(s);
    assert_eq!(pool.lookahead_pins().0, 0);
    drop(first);
}

/// Proves: reads ahead of use work with O_DIRECT (frames are aligned), for each method.
/// Skipped, saying so, where the file system refuses O_DIRECT (tmpfs).
#[test]
fn o_direct_reads_ahead() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut c = config("128");
    c.set("io_direct", "on").unwrap();
    let pool = match BufferPool::open(Arc::new(RealVfs::new()), dir.path(), &c, true) {
        Ok(p) => p,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            println!("SKIPPED o_direct_reads_ahead: the file system refuses O_DIRECT ({e})");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    fill(&pool, 40);
    for method in IoMethod::ALL {
        pool.drop_buffers(REL, None, 0).unwrap();
        in_effect(&pool, method);
        let n = ReadStream::range(&pool, REL, MAIN, 0..40, None, &opts(method, 128, 4, 32))
            .enumerate()
            .map(|(i, r)| {
                let b = r.unwrap_or_else(|e| panic!("{method:?}: {e}"));
                assert_eq!(get_u64(&b.read(), BODY), i as u64);
            })
            .count();
        assert_eq!(n, 40);
    }
}

/// Proves: a run's reads are split at cached blocks and at segment boundaries (one
/// vectored read never crosses a segment file), and its counters say so.
#[test]
fn a_run_reads_each_stretch_of_misses_within_a_segment_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = config("128");
    c.set("segment_size", "64kB").unwrap(); // 8 pages of 8 kB
    let pool = open(Arc::new(RealVfs::new()), dir.path(), &c);
    fill(&pool, 20);
    pool.drop_buffers(REL, None, 0).unwrap();
    drop(pool.read(tag(3)).unwrap());
    let mut run = pool
        .start_read_run(REL, MAIN, 0, 16, None, IoMethod::Worker)
        .unwrap();
    assert_eq!(run.read_sizes().collect::<Vec<_>>(), [3, 4, 8]);
    let st = run.stats();
    assert_eq!(
        (st.blocks, st.hits, st.blocks_read, st.reads),
        (16, 1, 15, 3)
    );
    for b in 0..16u32 {
        assert_eq!(run.next_block(), b);
        let buf = run.next().unwrap().unwrap();
        assert_eq!(get_u64(&buf.read(), BODY), u64::from(b));
    }
    assert!(run.next().is_none());
    drop(run);
    assert_eq!(pool.usage_summary().pins, 0);
    pool.check_invariants().unwrap();
}
