//! The bgwriter's rounds, strategies and write paths, on a pool in memory.

use super::*;

use crate::config::Config;
use crate::types::{ForkNumber, Lsn, RelFileId};
use crate::vfs::{MemVfs, Vfs};
use crate::WalFlush;
use std::path::Path;

const REL: RelFileId = RelFileId::new(0, 7);

fn pool_with(config: &Config, wal: Arc<dyn WalFlush>) -> (MemVfs, BufferPool) {
    let vfs = MemVfs::new();
    let smgr = crate::smgr::Smgr::open(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        crate::buffer::PoolConfig::smgr_options(config, true).unwrap(),
    )
    .unwrap();
    let pool = BufferPool::new(Arc::new(smgr), config, wal).unwrap();
    (vfs, pool)
}

fn config(buffers: u64, strategy: &str) -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", &buffers.to_string()).unwrap();
    c.set("block_size", "4kB").unwrap();
    c.set("bgwriter_strategy", strategy).unwrap();
    c
}

/// Fills the whole pool with dirty pages of REL, page b with LSN b + 1, and makes every
/// buffer unpinned with usage 0.
fn dirty_pool(pool: &BufferPool) {
    pool.create_relation(REL, ForkNumber::Main).unwrap();
    for b in 0..pool.nbuffers() as u64 {
        let buf = pool.extend(REL, ForkNumber::Main).unwrap();
        let mut g = buf.write();
        crate::page::init(&mut g, 0);
        g.set_lsn(Lsn(b + 1));
    }
    for d in pool.descs.iter() {
        set_usage(d, 0);
    }
}

fn set_usage(d: &crate::buffer::descriptor::BufferDesc, u: u64) {
    let s = d.lock_header();
    d.unlock_header((s & !USAGE_MASK) | (u << USAGE_SHIFT));
}

fn dirty(pool: &BufferPool, id: usize) -> bool {
    pool.descs[id].load_state() & DIRTY != 0
}

/// Proves: the nap is `bgwriter_delay` when the hand stands still, and shortens (but
/// not below `MIN_NAP_MS`) when the hand, at its measured speed, would reach the
/// bgwriter's cursor sooner. How: the cursor set a known distance ahead of the hand,
/// the previous reading of the hand placed in the past.
#[test]
fn the_nap_shortens_when_the_hand_would_overtake_the_cursor() {
    let (_vfs, pool) = pool_with(&config(64, "lru"), Arc::new(crate::NoWal));
    dirty_pool(&pool);
    // Allocations move the hand past 1,000.
    for _ in 0..1100 {
        drop(pool.extend(REL, ForkNumber::Main).unwrap());
    }
    let hand = pool.repl.hand();
    assert!(hand >= 1000, "{hand}");
    // Hand still: the full delay (200 ms).
    let mut last = (hand, Instant::now() - Duration::from_millis(100));
    assert_eq!(pool.bgwriter_nap_ms(&mut last), 200);
    // The hand moved 1,000 buffers in (at least) 100 ms, the cursor is 100 ahead: the
    // lead lasts at most ~10 ms, so the nap is the 10 ms floor.
    pool.bgwriter.round.lock().next_to_clean = hand + 100;
    let mut last = (
        hand.wrapping_sub(1000),
        Instant::now() - Duration::from_millis(100),
    );
    assert_eq!(pool.bgwriter_nap_ms(&mut last), MIN_NAP_MS);
    // 1,000 buffers in 1 s with the cursor 400 ahead: the lead lasts ~400 ms, beyond
    // twice the delay, so the full delay again.
    pool.bgwriter.round.lock().next_to_clean = hand + 400;
    let mut last = (
        hand.wrapping_sub(1000),
        Instant::now() - Duration::from_secs(1),
    );
    assert_eq!(pool.bgwriter_nap_ms(&mut last), 200);
    // 1,000 buffers in 1 s with the cursor 200 ahead: the lead lasts ~200 ms; half of
    // it, ~100 ms (a little less, as the test's own time passes).
    pool.bgwriter.round.lock().next_to_clean = hand + 200;
    let mut last = (
        hand.wrapping_sub(1000),
        Instant::now() - Duration::from_secs(1),
    );
    let nap = pool.bgwriter_nap_ms(&mut last);
    assert!((80..=100).contains(&nap), "{nap}");
}

/// Proves: with `bgwriter_adaptive_nap = off` the nap is always `bgwriter_delay`, where
/// the adaptive nap would be its floor. How: the set-up above that gave `MIN_NAP_MS`.
#[test]
fn a_fixed_nap_is_always_the_delay() {
    let mut c = config(64, "lru");
    c.set("bgwriter_adaptive_nap", "off").unwrap();
    let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
    dirty_pool(&pool);
    for _ in 0..1100 {
        drop(pool.extend(REL, ForkNumber::Main).unwrap());
    }
    let hand = pool.repl.hand();
    pool.bgwriter.round.lock().next_to_clean = hand + 100;
    let mut last = (
        hand.wrapping_sub(1000),
        Instant::now() - Duration::from_millis(100),
    );
    assert_eq!(pool.bgwriter_nap_ms(&mut last), 200);
}

/// Proves: `bgwriter_lru_percent` (PostgreSQL 8.1's window) scans that share of the pool
/// from the hand in every round, writing each dirty reusable buffer in it, and starts
/// again at the hand the next round (the estimator would go on from its cursor); with
/// the lead on, the buffers the hand would reach during a write are skipped first, and
/// with `bgwriter_lead = off` none are. How: a dirty pool of 200 buffers, a 10% window,
/// one write at a time, and a lead of 5 buffers set in the round state.
#[test]
fn the_percent_window_scans_its_share_from_the_hand_each_round() {
    let window = |lead: &str| {
        let mut c = config(200, "lru");
        c.set("bgwriter_lru_percent", "10").unwrap();
        c.set("bgwriter_writers", "1").unwrap();
        c.set("bgwriter_lead", lead).unwrap();
        let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
        dirty_pool(&pool);
        {
            let mut st = pool.bgwriter.round.lock();
            st.hand_speed = 1.0;
            st.batch_ms = 5.0;
        }
        let hand = pool.repl.hand();
        let r1 = pool.bgwriter_round();
        let first = (hand..hand + 30)
            .filter(|b| !dirty(&pool, (b % 200) as usize))
            .count();
        let r2 = pool.bgwriter_round();
        (r1, r2, first, pool.usage_summary().dirty)
    };
    let (r1, r2, cleaned, dirty_left) = window("off");
    assert_eq!(r1.buffers_scanned, 20, "{r1:?}");
    assert_eq!(r1.buffers_written, 20, "{r1:?}");
    assert_eq!(r1.buffers_skipped, 0, "{r1:?}");
    assert_eq!(cleaned, 20);
    // The same window again: clean now, nothing to write, nothing new reached.
    assert_eq!(r2.buffers_scanned, 20, "{r2:?}");
    assert_eq!(r2.buffers_written, 0, "{r2:?}");
    assert_eq!(dirty_left, 180);
    let (r1, _, _, _) = window("on");
    assert_eq!(r1.buffers_skipped, 5, "{r1:?}");
    assert_eq!(r1.buffers_scanned, 15, "{r1:?}");
    assert_eq!(r1.buffers_written, 15, "{r1:?}");
}

/// Proves: under a list policy the round cleans in the order the policy's search will
/// take buffers (PostgreSQL 8.0's bgwriter walked ARC's T1 and T2 from their LRU ends),
/// and `bgwriter_frequent_only` leaves the list of new pages alone. How: ARC over a dirty
/// pool whose pages were all loaded once (all on T1, oldest buffer 0), a window of a
/// quarter of the pool per round: the oldest quarter is written; with the option on,
/// nothing (T2 is empty).
#[test]
fn a_list_policy_is_cleaned_from_its_lists_tails() {
    let round = |frequent_only: &str| {
        let mut c = config(64, "lru");
        c.set("buffer_replacement", "car").unwrap();
        c.set("bgwriter_frequent_only", frequent_only).unwrap();
        c.set("bgwriter_lru_percent", "25").unwrap();
        c.set("bgwriter_writers", "1").unwrap();
        c.set("bgwriter_lead", "off").unwrap();
        let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
        dirty_pool(&pool);
        let r = pool.bgwriter_round();
        let cleaned: Vec<usize> = (0..64).filter(|&id| !dirty(&pool, id)).collect();
        (r, cleaned)
    };
    let (r, cleaned) = round("off");
    assert_eq!(r.buffers_written, 16, "{r:?}");
    assert_eq!(cleaned, (0..16).collect::<Vec<_>>());
    let (r, cleaned) = round("on");
    assert_eq!((r.buffers_scanned, r.buffers_written), (0, 0), "{r:?}");
    assert!(cleaned.is_empty());
}

/// Proves: the LRU round cleans what the policy will evict where it stands: 2Q evicts
/// A1in's tail whatever its uses there, so used pages on A1in are written; ARC evicts
/// only unreferenced pages, so used ones are not. How: every page of a dirty pool used
/// twice (usage 2), a window of a quarter of the pool.
#[test]
fn the_round_cleans_what_the_policy_evicts_where_it_stands() {
    let written = |policy: &str| {
        let mut c = config(64, "lru");
        c.set("buffer_replacement", policy).unwrap();
        c.set("bgwriter_lru_percent", "25").unwrap();
        c.set("bgwriter_writers", "1").unwrap();
        c.set("bgwriter_lead", "off").unwrap();
        let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
        dirty_pool(&pool);
        for d in pool.descs.iter() {
            set_usage(d, 2);
        }
        pool.bgwriter_round().buffers_written
    };
    assert_eq!(written("2q"), 16);
    assert_eq!(written("car"), 0);
    assert_eq!(written("clock"), 0);
}

/// Proves: the LRU round writes only unpinned usage-0 buffers, and counts each write
/// as the bgwriter's. How: a dirty pool where some buffers are pinned by the test and
/// some have usage credit; one round with a target beyond the pool.
#[test]
fn never_writes_a_pinned_or_recently_used_buffer() {
    // One writer, and several (`bgwriter_writers`: the LRU scan streaming its writes
    // through the io_uring path, dirty-chain batches written through it, or both on
    // threads), whose writes must still count as the bgwriter's. (MemVfs files have no
    // descriptor: the io_uring path's logic runs, its writes are blocking.)
    for (writers, strategy, io) in [
        ("1", "lru", "io_uring"),
        ("4", "lru", "io_uring"),
        ("4", "lru", "threads"),
        ("3", "dirty-chain", "io_uring"),
        ("3", "dirty-chain", "threads"),
    ] {
        spares_pinned_and_recent(writers, strategy, io);
    }
}

fn spares_pinned_and_recent(writers: &str, strategy: &str, io: &str) {
    let mut c = config(1024, strategy);
    c.set("bgwriter_writers", writers).unwrap();
    c.set("bgwriter_io_method", io).unwrap();
    let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
    dirty_pool(&pool);
    let pinned: Vec<_> = (0..4)
        .map(|b| {
            pool.read(crate::BufferTag::new(REL, ForkNumber::Main, b))
                .unwrap()
        })
        .collect();
    let pinned_ids: Vec<u32> = pinned.iter().map(|b| b.buffer_id()).collect();
    for d in pool.descs.iter() {
        if !pinned_ids.contains(&d.id) {
            set_usage(d, 0);
        }
    }
    let used: Vec<usize> = (10..16).chain(500..540).collect();
    for &id in &used {
        set_usage(&pool.descs[id], 2);
    }
    // Rounds until the pool is clean but for what must be spared.
    let mut written = 0;
    for _ in 0..64 {
        let r = pool.bgwriter_round();
        written += r.buffers_written;
        if r.buffers_written == 0 {
            break;
        }
    }
    let n = pool.nbuffers();
    for id in 0..n {
        let spared = pinned_ids.contains(&(id as u32)) || used.contains(&id);
        assert_eq!(dirty(&pool, id), spared, "buffer {id}, {writers} writers");
    }
    let want = (n - 4 - used.len()) as u64;
    assert_eq!(written, want, "{writers} writers, {io}");
    let ring = io == "io_uring" && UringWriter::new().is_uring();
    let want_io = match (writers, ring) {
        ("1", _) => "single",
        (_, true) => "io_uring",
        (_, false) => "threads",
    };
    assert_eq!(
        pool.bgwriter_io_in_effect(),
        want_io,
        "{writers} writers, {io}"
    );
    let io = pool.stats();
    assert_eq!(io.by_writer(IoWriter::Bgwriter, IoOp::Write), want);
    assert_eq!(io.by_writer(IoWriter::Backend, IoOp::Write), 0);
    assert_eq!(pool.bgwriter_stats().buffers_clean, want);
    // Dirtying a page the bgwriter cleaned counts one wasted write; a second change
    // before the next write does not count again.
    let some = pool
        .descs
        .iter()
        .find(|d| !dirty(&pool, d.id as usize))
        .unwrap();
    let b = pool.read(some.tag()).unwrap();
    b.write().mark_dirty();
    b.write().mark_dirty();
    assert_eq!(pool.bgwriter_stats().buffers_redirtied, 1);
}

/// Proves: the write waits for the WAL. How: a WAL hook that is durable only up to LSN
/// 10 and fails beyond: pages with LSN <= 10 are written, the others stay dirty with
/// storage untouched, and every write was preceded by a flush request covering it.
#[test]
fn never_writes_a_page_before_its_wal() {
    struct Wal {
        durable: Lsn,
        asked: crate::sync::Mutex<Vec<Lsn>>,
    }
    impl WalFlush for Wal {
        fn flush(&self, lsn: Lsn) -> Result<(), crate::buffer::WalFlushError> {
            self.asked.lock().push(lsn);
            if lsn <= self.durable {
                Ok(())
            } else {
                Err(format!("log not durable past {}", self.durable).into())
            }
        }
    }
    let wal = Arc::new(Wal {
        durable: Lsn(10),
        asked: Default::default(),
    });
    let (_vfs, pool) = pool_with(&config(32, "lru"), wal.clone());
    dirty_pool(&pool);
    let r = pool.bgwriter_round();
    assert_eq!(r.buffers_written, 10, "{r:?}");
    assert_eq!(r.write_errors, 22);
    for d in pool.descs.iter() {
        // SAFETY: no other thread uses the pool, and the slice lives for this line.
        let lsn = crate::page::lsn(unsafe { pool.page_slice(d.id) });
        assert_eq!(d.load_state() & DIRTY != 0, lsn > Lsn(10), "{d:?} at {lsn}");
    }
    // Every page reached storage only with its LSN covered: nblocks on storage were
    // extended with zero pages, and only the written ones carry a header now.
    let mut page = vec![0u8; 4096];
    for b in 0..32u32 {
        let tag = crate::BufferTag::new(REL, ForkNumber::Main, b);
        pool.smgr.read(&tag, &mut page, IoContext::Normal).unwrap();
        let on_disk = crate::page::lsn(&page);
        assert!(on_disk <= Lsn(10), "block {b} reached storage at {on_disk}");
    }
    let asked = wal.asked.lock();
    assert_eq!(
        asked.len(),
        32,
        "one flush request per page written or tried"
    );
}

/// Proves: the bgwriter holds a page's content lock only while it copies the page: a
/// backend can lock it exclusively while the write is under way (here, inside the WAL
/// flush that precedes it), and the change it makes then is not lost: the page stays
/// dirty after the write, which put the image from before the change on storage, and
/// the next flush writes the change.
#[test]
fn a_page_changed_during_its_write_stays_dirty() {
    type Hook = Box<dyn FnOnce(Lsn) + Send>;
    struct Wal {
        hook: crate::sync::Mutex<Option<Hook>>,
    }
    impl WalFlush for Wal {
        fn flush(&self, lsn: Lsn) -> Result<(), crate::buffer::WalFlushError> {
            let hook = self.hook.lock().take();
            if let Some(h) = hook {
                h(lsn);
            }
            Ok(())
        }
    }
    const MARK_AT: usize = 2000;
    let wal = Arc::new(Wal {
        hook: crate::sync::Mutex::new(None),
    });
    let (_vfs, pool) = pool_with(&config(32, "lru"), wal.clone());
    let pool = Arc::new(pool);
    dirty_pool(&pool);
    let changed = Arc::new(crate::sync::Mutex::new(None));
    {
        let (pool, changed) = (pool.clone(), changed.clone());
        // Block b carries LSN b + 1 (dirty_pool): the first page whose write asks the
        // WAL to flush is changed by "a backend" at that moment.
        *wal.hook.lock() = Some(Box::new(move |lsn: Lsn| {
            let block = (lsn.0 - 1) as u32;
            let buf = pool
                .read(crate::BufferTag::new(REL, ForkNumber::Main, block))
                .unwrap();
            let mut g = buf
                .try_write()
                .expect("the content lock is free once the page is copied");
            g[MARK_AT] = 0xAB;
            g.mark_dirty();
            *changed.lock() = Some((buf.buffer_id(), block));
        }));
    }
    let r = pool.bgwriter_round();
    assert!(r.buffers_written >= 1, "{r:?}");
    let (id, block) = changed.lock().expect("the hook ran");
    assert!(
        dirty(&pool, id as usize),
        "the change made during the write is kept"
    );
    let tag = crate::BufferTag::new(REL, ForkNumber::Main, block);
    let mut page = vec![0u8; 4096];
    pool.smgr.read(&tag, &mut page, IoContext::Normal).unwrap();
    assert_eq!(
        page[MARK_AT], 0,
        "the write put the copy from before the change"
    );
    assert!(
        crate::page::lsn(&page) > Lsn(0),
        "and that copy was written"
    );
    pool.flush_all().unwrap();
    pool.smgr.read(&tag, &mut page, IoContext::Normal).unwrap();
    assert_eq!(page[MARK_AT], 0xAB, "the next flush writes the change");
    assert!(!dirty(&pool, id as usize));
}

/// Proves: a failed write leaves the page dirty, is counted and reaches the hook, and
/// the round goes on with the next buffers.
#[test]
fn a_failed_write_leaves_the_page_dirty_and_is_reported() {
    use crate::testing::{FaultKind, FaultOp, FaultRule, FaultVfs};
    let mem = MemVfs::new();
    let fault = FaultVfs::new(Arc::new(mem) as Arc<dyn Vfs>);
    let c = config(32, "lru");
    let smgr = crate::smgr::Smgr::open(
        Arc::new(fault.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        crate::buffer::PoolConfig::smgr_options(&c, true).unwrap(),
    )
    .unwrap();
    let pool = BufferPool::new(Arc::new(smgr), &c, Arc::new(crate::NoWal)).unwrap();
    dirty_pool(&pool);
    let seen = Arc::new(crate::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    pool.set_bgwriter_error_hook(Some(Arc::new(move |e: &BufferError| {
        s2.lock().push(e.raw_os_error());
    })));
    fault.add_rule(FaultRule::nth("base", FaultOp::Write, 3, FaultKind::Eio));
    let r = pool.bgwriter_round();
    assert_eq!(r.write_errors, 1, "{r:?}");
    assert_eq!(r.buffers_written, 31);
    assert_eq!(pool.usage_summary().dirty, 1);
    assert_eq!(pool.bgwriter_stats().write_errors, 1);
    assert_eq!(*seen.lock(), vec![Some(libc::EIO)]);
    // The page still holds its change: the next write of it succeeds.
    assert_eq!(pool.flush_all().unwrap(), 1);
    assert_eq!(pool.usage_summary().dirty, 0);
}

/// Proves: a round writes at most lru_maxpages pages and counts maxwritten_clean.
#[test]
fn a_round_writes_at_most_maxpages() {
    let mut c = config(64, "lru");
    c.set("bgwriter_lru_maxpages", "5").unwrap();
    let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
    dirty_pool(&pool);
    let r = pool.bgwriter_round();
    assert_eq!(r.buffers_written, 5, "{r:?}");
    assert!(r.hit_maxpages);
    assert_eq!(pool.bgwriter_stats().maxwritten_clean, 1);
    // The next round goes on from its cursor, not from the hand again.
    let r2 = pool.bgwriter_round();
    assert_eq!(r2.buffers_written, 5, "{r2:?}");
    assert_eq!(pool.usage_summary().dirty, 64 - 10);
    c.set("bgwriter_lru_maxpages", "0").unwrap();
    let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
    dirty_pool(&pool);
    assert_eq!(pool.bgwriter_round().buffers_written, 0);
}

/// Proves: the cursor never re-scans buffers it passed in this lap. How: a clean,
/// reusable pool and an allocation estimate of 20 buffers: the first round scans 20
/// from the hand, the second (no new allocations, so a lower target) finds them ahead
/// already and scans fewer, never past one lap.
/// Proves: the cursor keeps a lead of hand speed × batch time over the hand (capped at
/// a quarter of the pool), jumping forward when behind or too close and never back.
#[test]
fn the_cursor_keeps_a_lead_worth_a_batch() {
    let mut st = RoundState::new(0);
    // Unmeasured: no lead asked.
    st.next_to_clean = 90;
    assert_eq!(st.keep_lead(100, 1000), 0);
    assert_eq!(st.next_to_clean, 100);
    st.hand_speed = 2.0; // buffers per ms
    st.batch_ms = 10.0;
    assert_eq!(st.min_lead(1000), 20);
    // Too close: jumps to hand + 20, skipping what it had not examined.
    st.next_to_clean = 105;
    assert_eq!(st.keep_lead(100, 1000), 15);
    assert_eq!(st.next_to_clean, 120);
    // Lapped: hand + 20, the 20 buffers after the hand skipped.
    st.next_to_clean = 50;
    assert_eq!(st.keep_lead(100, 1000), 20);
    assert_eq!(st.next_to_clean, 120);
    // Far enough ahead: unchanged.
    st.next_to_clean = 500;
    assert_eq!(st.keep_lead(100, 1000), 0);
    assert_eq!(st.next_to_clean, 500);
    // A quarter of the pool at most.
    st.batch_ms = 1e6;
    assert_eq!(st.min_lead(1000), 250);
}

#[test]
fn the_cursor_stays_ahead_and_does_not_rescan() {
    let (_vfs, pool) = pool_with(&config(64, "lru"), Arc::new(crate::NoWal));
    pool.create_relation(REL, ForkNumber::Main).unwrap();
    for _ in 0..10 {
        drop(pool.extend(REL, ForkNumber::Main).unwrap());
    }
    pool.flush_all().unwrap();
    for d in pool.descs.iter() {
        set_usage(d, 0);
    }
    // 10 allocations x multiplier 2.0 = 20 upcoming.
    let r1 = pool.bgwriter_round();
    assert_eq!(r1.upcoming_estimate, 20, "{r1:?}");
    assert_eq!(r1.buffers_scanned, 20);
    let mut total = r1.buffers_scanned;
    for _ in 0..20 {
        total += pool.bgwriter_round().buffers_scanned;
    }
    assert!(
        total <= 64,
        "scanned {total} buffers of 64 without the hand moving"
    );
}

/// Proves: the dirty-chain round writes the same buffers the LRU round would, while
/// examining only dirty ones; and the dirty map tracks cleaning.
#[test]
fn dirty_chain_visits_only_dirty_buffers() {
    let (_vfs, pool) = pool_with(&config(64, "dirty-chain"), Arc::new(crate::NoWal));
    dirty_pool(&pool);
    let map = pool.bgwriter.dirty_map.as_ref().unwrap();
    assert_eq!(map.count(), 64);
    // Clean all but 8 spread buffers.
    pool.flush_all().unwrap();
    assert_eq!(map.count(), 0, "a write clears the bit");
    for b in (0..64).step_by(8) {
        let buf = pool
            .read(crate::BufferTag::new(REL, ForkNumber::Main, b))
            .unwrap();
        buf.write().mark_dirty();
    }
    for d in pool.descs.iter() {
        set_usage(d, 0);
    }
    assert_eq!(map.count(), 8);
    let r = pool.bgwriter_round();
    assert_eq!(r.buffers_written, 8, "{r:?}");
    assert_eq!(r.buffers_scanned, 8);
    assert_eq!(map.count(), 0);
    assert_eq!(pool.usage_summary().dirty, 0);
}

/// Proves: the mini-checkpoint writes dirty buffers with usage credit, which the LRU
/// scan leaves alone, and never a pinned one.
#[test]
fn mini_checkpoint_writes_hot_dirty_buffers_but_not_pinned_ones() {
    let mut c = config(120, "mini-checkpoint");
    c.set("bgwriter_lru_maxpages", "400").unwrap();
    let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
    dirty_pool(&pool);
    // Block 1 sits in buffer 1 (the free list hands out buffer 0 first), which the
    // first all-scan of 120 / 60 = 2 buffers reaches.
    let held = pool
        .read(crate::BufferTag::new(REL, ForkNumber::Main, 1))
        .unwrap();
    assert_eq!(held.buffer_id(), 1);
    for d in pool.descs.iter() {
        set_usage(d, 3);
    }
    let r = pool.bgwriter_round();
    assert_eq!(r.buffers_written, 0, "all hot: no LRU writes");
    assert_eq!(r.mini_checkpoint_written, 1, "{r:?}");
    assert!(!dirty(&pool, 0));
    assert!(dirty(&pool, 1), "pinned: not written");
    assert_eq!(pool.bgwriter_stats().buffers_mini_checkpoint, 1);
    // The next all-scan is MINI_CHECKPOINT_EVERY_ROUNDS rounds later.
    for _ in 1..MINI_CHECKPOINT_EVERY_ROUNDS {
        assert_eq!(pool.bgwriter_round().mini_checkpoint_written, 0);
    }
    assert_eq!(pool.bgwriter_round().mini_checkpoint_written, 2);
}

/// Proves: the victim queue hands out only buffers that are unpinned, usage 0 and
/// clean at the moment they are taken; stale entries are skipped; under the clock and
/// under list policies (whose search steps fill the queue the same way).
#[test]
fn victim_queue_never_hands_out_a_pinned_or_dirty_buffer() {
    for policy in ["clock", "sieve", "s3fifo", "car", "2q", "cooling"] {
        victim_queue_hands_out_clean_unpinned(policy);
    }
}

fn victim_queue_hands_out_clean_unpinned(policy: &str) {
    let mut c = config(32, "victim-queue");
    c.set("buffer_replacement", policy).unwrap();
    let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
    dirty_pool(&pool);
    let r = pool.bgwriter_round();
    assert!(r.victims_queued >= 8, "{r:?}");
    assert_eq!(r.buffers_written, r.victims_queued);
    let queue = pool.bgwriter.victim_queue().unwrap();
    assert_eq!(queue.len() as u64, r.victims_queued);
    // Spoil some queued entries: pin one, dirty one, give one usage credit.
    let ids: Vec<u32> = (0..queue.len()).map(|_| queue.pop().unwrap()).collect();
    for &id in &ids {
        assert!(queue.push(id));
    }
    let tag_of = |id: u32| pool.descs[id as usize].tag();
    let held = pool.read(tag_of(ids[0])).unwrap();
    set_usage(&pool.descs[ids[0] as usize], 0);
    {
        let b = pool.read(tag_of(ids[1])).unwrap();
        b.write().mark_dirty();
    }
    set_usage(&pool.descs[ids[1] as usize], 0);
    set_usage(&pool.descs[ids[2] as usize], 1);
    let spoiled = [ids[0], ids[1], ids[2]];
    for n in 1..=ids.len() as u64 - 3 {
        let (id, s) = pool.take_victim().unwrap();
        assert_eq!(
            pool.bgwriter_stats().victims_popped,
            n,
            "served by the queue"
        );
        assert!(!spoiled.contains(&id), "stale entry {id} handed out");
        assert_eq!(refcount(s), 1, "only the taker's pin");
        assert_eq!(usage(s), 0);
        assert_eq!(s & DIRTY, 0, "a queued victim is clean");
        assert_eq!(pool.descs[id as usize].load_state(), s);
        pool.descs[id as usize].unpin();
    }
    assert!(queue.is_empty(), "the stale entries were dropped");
    drop(held);
    pool.repl.check_invariants(&*pool.descs).unwrap();
}

/// Proves: a stop request ends a round at its next buffer (with several writers, at
/// each writer's next buffer: only the writes in flight finish). How: a WAL hook that
/// parks the round inside its first write until the test has asked it to stop.
#[test]
fn a_stop_request_ends_the_round_mid_way() {
    stop_mid_way("1", "io_uring");
    stop_mid_way("4", "io_uring");
    // The bgwriter thread's persistent helper threads.
    stop_mid_way("4", "threads");
}

fn stop_mid_way(writers: &str, io: &str) {
    use std::sync::mpsc;
    struct Gate {
        entered: Mutex<Option<mpsc::Sender<()>>>,
        open: Mutex<Option<mpsc::Receiver<()>>>,
    }
    impl WalFlush for Gate {
        fn flush(&self, _lsn: Lsn) -> Result<(), crate::buffer::WalFlushError> {
            if let Some(tx) = self.entered.lock().take() {
                tx.send(()).unwrap();
                let rx = self.open.lock().take().unwrap();
                rx.recv().unwrap();
            }
            Ok(())
        }
    }
    let (entered_tx, entered_rx) = mpsc::channel();
    let (open_tx, open_rx) = mpsc::channel();
    let gate = Arc::new(Gate {
        entered: Mutex::new(None),
        open: Mutex::new(Some(open_rx)),
    });
    let mut c = config(64, "lru");
    c.set("bgwriter_writers", writers).unwrap();
    c.set("bgwriter_io_method", io).unwrap();
    let (_vfs, pool) = pool_with(&c, gate.clone());
    dirty_pool(&pool);
    *gate.entered.lock() = Some(entered_tx);
    let pool = Arc::new(pool);
    let handle = pool.start_bgwriter().unwrap().unwrap();
    assert!(
        pool.start_bgwriter().unwrap().is_none(),
        "one thread per pool"
    );
    entered_rx.recv().unwrap(); // the first round is inside its first write
    handle.request_stop();
    open_tx.send(()).unwrap();
    handle.stop();
    let s = pool.bgwriter_stats();
    assert_eq!(s.rounds, 1);
    // Stopped after the writes in progress: one per writer at most (a batch of this
    // 64-buffer pool is 4 buffers).
    let most: u64 = writers.parse().unwrap();
    assert!(
        (1..=most).contains(&s.buffers_clean),
        "{writers} writers ({io}): {} written",
        s.buffers_clean
    );
    assert_eq!(pool.usage_summary().dirty as u64, 64 - s.buffers_clean);
    // A stopped pool still runs rounds on demand.
    assert!(pool.bgwriter_round().buffers_written > 0);
}

/// Proves: an idle bgwriter hibernates after two idle rounds and an allocation wakes
/// it. How: the real thread; the test waits on the pool's state, polling with a
/// yield (no sleep stands in for a happens-before).
#[test]
fn hibernates_when_idle_and_an_allocation_wakes_it() {
    let mut c = config(32, "lru");
    c.set("bgwriter_delay", "10ms").unwrap();
    let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
    let pool = Arc::new(pool);
    pool.create_relation(REL, ForkNumber::Main).unwrap();
    let handle = pool.start_bgwriter().unwrap().unwrap();
    let wait_until = |what: &str, f: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            std::thread::yield_now();
        }
    };
    wait_until("it hibernates", &|| pool.bgwriter_hibernating());
    let rounds = pool.bgwriter_stats().rounds;
    drop(pool.extend(REL, ForkNumber::Main).unwrap());
    wait_until("the allocation wakes it", &|| {
        pool.bgwriter_stats().rounds > rounds
    });
    assert!(pool.bgwriter_stats().hibernations >= 1);
    handle.stop();
}

/// Dirties every page of REL the pool holds again (after a round cleaned them) and makes
/// every buffer's usage 0, so the next round writes them all.
fn redirty(pool: &BufferPool) {
    for b in 0..pool.nbuffers() as u32 {
        let buf = pool
            .read(crate::BufferTag::new(REL, ForkNumber::Main, b))
            .unwrap();
        buf.write()[100] ^= 1;
    }
    for d in pool.descs.iter() {
        set_usage(d, 0);
    }
}

/// Proves (`bgwriter_flush_once`): a block the bgwriter writes again before the data files
/// are synced is not hinted again (the page cache absorbs the rewrite), and after a sync
/// it is, and after a slow sync every write is; with the knob off, every write is hinted.
/// How: a 4 kB `bgwriter_flush_after`
/// (one hint per page), the whole pool dirtied, cleaned, dirtied and cleaned again, then
/// the files synced and the same once more; hints counted by the pool's I/O statistics.
#[test]
fn a_block_is_hinted_once_until_the_files_are_synced() {
    let hints = |pool: &BufferPool| pool.stats().by_writer(IoWriter::Bgwriter, IoOp::Writeback);
    for once in [true, false] {
        let mut c = config(32, "lru");
        c.set("bgwriter_flush_after", "4kB").unwrap();
        // Each round searches the whole pool from the hand (no cursor kept between rounds).
        c.set("bgwriter_lru_percent", "100").unwrap();
        c.set("bgwriter_flush_once", if once { "on" } else { "off" })
            .unwrap();
        let (_vfs, pool) = pool_with(&c, Arc::new(crate::NoWal));
        dirty_pool(&pool);
        let r = pool.bgwriter_round();
        assert_eq!(
            (r.buffers_written, r.hints_repeated_skipped),
            (32, 0),
            "{r:?}"
        );
        assert_eq!(hints(&pool), 32);
        redirty(&pool);
        let r = pool.bgwriter_round();
        assert_eq!(r.buffers_written, 32, "{r:?}");
        let expect = if once { (32, 32) } else { (0, 64) };
        assert_eq!(
            (r.hints_repeated_skipped, hints(&pool)),
            expect,
            "once={once}"
        );
        pool.smgr.sync_each(&mut |_| {}).unwrap();
        redirty(&pool);
        let r = pool.bgwriter_round();
        let expect = if once { (0, 64) } else { (0, 96) };
        assert_eq!(
            (r.hints_repeated_skipped, hints(&pool)),
            expect,
            "once={once}"
        );
        assert_eq!(
            pool.bgwriter_stats().hints_repeated_skipped,
            if once { 32 } else { 0 }
        );
        // A checkpoint's fsync of a file in REL's tablespace was slow: from then on every
        // write there is hinted again.
        pool.smgr.note_slow_sync(REL.tablespace);
        redirty(&pool);
        let r = pool.bgwriter_round();
        let expect = if once { (0, 96) } else { (0, 128) };
        assert_eq!(
            (r.hints_repeated_skipped, hints(&pool)),
            expect,
            "once={once}"
        );
    }
}

/// Proves (`bgwriter_flush_once` per device): the device under a tablespace is probed at
/// the round after its first write; a slow device (the probe's fdatasync held 250 ms: 64
/// pages in 250 ms is 256 pages a second) or a failed probe keeps every write hinted, a
/// fast one hints each block once; the first round, before any probe, hints every write.
/// How: the pool dirtied and cleaned twice, hints counted by the pool's I/O statistics.
#[test]
fn a_slow_or_unprobed_device_is_hinted_every_write() {
    enum Probe {
        Fast,
        Slow,
        Fails,
    }
    for probe in [Probe::Fast, Probe::Slow, Probe::Fails] {
        let mut c = config(32, "lru");
        c.set("bgwriter_flush_after", "4kB").unwrap();
        c.set("bgwriter_lru_percent", "100").unwrap();
        c.set("bgwriter_flush_once", "on").unwrap();
        c.set("bgwriter_device_share", "0").unwrap(); // every dirty page written
        let slow = matches!(probe, Probe::Slow);
        let fails = matches!(probe, Probe::Fails);
        let hook: crate::vfs::CallHook = Arc::new(move |call: &crate::vfs::Call<'_>| {
            let probing = call.path.ends_with(crate::smgr::PROBE_FILE);
            if probing && call.op == crate::vfs::FaultOp::Fsync {
                if fails {
                    return Some(std::io::Error::from_raw_os_error(libc::EIO));
                }
                if slow {
                    // The device: a 250 ms fdatasync (not a synchronisation wait).
                    std::thread::sleep(std::time::Duration::from_millis(250));
                }
            }
            None
        });
        let vfs = crate::vfs::HookVfs::new(Arc::new(MemVfs::new()), hook);
        let smgr = crate::smgr::Smgr::open(
            Arc::new(vfs) as Arc<dyn Vfs>,
            Path::new("/db"),
            crate::buffer::PoolConfig::smgr_options(&c, true).unwrap(),
        )
        .unwrap();
        let pool = BufferPool::new(Arc::new(smgr), &c, Arc::new(crate::NoWal)).unwrap();
        let hints = || pool.stats().by_writer(IoWriter::Bgwriter, IoOp::Writeback);
        dirty_pool(&pool);
        let r = pool.bgwriter_round();
        assert_eq!((r.buffers_written, hints()), (32, 32), "unprobed: {r:?}");
        redirty(&pool);
        let r = pool.bgwriter_round();
        assert_eq!(r.buffers_written, 32, "{r:?}");
        let expect = match probe {
            Probe::Fast => (32, 32),
            Probe::Slow | Probe::Fails => (0, 64),
        };
        assert_eq!((r.hints_repeated_skipped, hints()), expect);
    }
}

/// Proves (`bgwriter_device_share`): once a probe has found the device fast, a round
/// writes at most the share of its rate that one `bgwriter_delay` holds, and says it
/// stopped at its pace; before the probe, on a device judged slow (every write hinted,
/// none left to the page cache), with the share 0, or with O_DIRECT, the round writes what
/// it finds. How: devices whose probe's fdatasync takes 150 ms (64 pages: at most 427 a
/// second, fast; half of that for 200 ms is at most 42 pages, all of it 85) or 250 ms
/// (256 a second, slow), a pool of 256 dirty pages cleaned twice.
#[test]
fn a_round_writes_at_its_device_pace() {
    for (sync_ms, share, direct, paced) in [
        (150, "0.5", false, true),
        (150, "1.0", false, true),
        (150, "0", false, false),
        (150, "0.5", true, false),
        (250, "0.5", false, false),
        (0, "0.5", false, false),
    ] {
        let mut c = config(256, "lru");
        c.set("bgwriter_flush_after", "4kB").unwrap();
        c.set("bgwriter_lru_percent", "100").unwrap();
        c.set("bgwriter_delay", "200ms").unwrap();
        c.set("bgwriter_lru_maxpages", "256").unwrap();
        c.set("bgwriter_device_share", share).unwrap();
        let hook: crate::vfs::CallHook = Arc::new(move |call: &crate::vfs::Call<'_>| {
            let probing = call.path.ends_with(crate::smgr::PROBE_FILE);
            if probing && call.op == crate::vfs::FaultOp::Fsync {
                // The device: a slow fdatasync (not a synchronisation wait).
                std::thread::sleep(std::time::Duration::from_millis(sync_ms));
            }
            None
        });
        let vfs = crate::vfs::HookVfs::new(Arc::new(MemVfs::new()), hook);
        let mut opts = crate::buffer::PoolConfig::smgr_options(&c, true).unwrap();
        opts.direct = direct;
        let smgr =
            crate::smgr::Smgr::open(Arc::new(vfs) as Arc<dyn Vfs>, Path::new("/db"), opts).unwrap();
        let pool = BufferPool::new(Arc::new(smgr), &c, Arc::new(crate::NoWal)).unwrap();
        dirty_pool(&pool);
        let r = pool.bgwriter_round();
        assert_eq!(
            (r.buffers_written, r.paced),
            (256, false),
            "unprobed: {r:?}"
        );
        redirty(&pool);
        let r = pool.bgwriter_round();
        let case = format!("fdatasync {sync_ms} ms, share {share}, direct {direct}: {r:?}");
        if paced {
            let most = if share == "0.5" { 42 } else { 85 };
            assert!(
                (1..=most).contains(&r.buffers_written) && r.paced && !r.hit_maxpages,
                "{case}"
            );
            assert_eq!(pool.bgwriter_stats().rounds_paced, 1);
        } else {
            assert_eq!((r.buffers_written, r.paced), (256, false), "{case}");
            assert_eq!(pool.bgwriter_stats().rounds_paced, 0);
        }
    }
}
