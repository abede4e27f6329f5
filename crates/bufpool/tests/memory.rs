//! What a pool holds in memory (`BufferPool::memory`), by part.
//!
//! Proves: the frames are the pool's size; each per-buffer part is what its layout says
//! (a 64-byte descriptor, two or more 4-byte bucket heads, a 4-byte free-list slot, the
//! checkpoint's array entry); the policies that keep ghost lists say so and the others hold
//! nothing beyond the descriptors; the overhead per buffer stays a small share of a frame
//! (the clock's under 2%, ARC's two ghost lists the most). How: a 1,024-buffer pool per
//! policy and bgwriter strategy on an in-memory file system.

use std::sync::Arc;

use bufpool::buffer::PoolMemory;
use bufpool::{BufferPool, Config, MemVfs};

fn memory(settings: &[(&str, &str)]) -> PoolMemory {
    let mut c = Config::default();
    c.set("shared_buffers", "8MB").unwrap();
    for (k, v) in settings {
        c.set(k, v).unwrap();
    }
    let pool = BufferPool::open(Arc::new(MemVfs::new()), "/db".as_ref(), &c, true).unwrap();
    pool.memory()
}

#[test]
fn each_part_is_what_its_layout_says() {
    let m = memory(&[("buffer_replacement", "clock")]);
    assert_eq!(m.buffers, 1024);
    assert_eq!(m.frames, 8 << 20, "{m:?}");
    assert_eq!(m.descriptors, 1024 * 64, "{m:?}");
    // 2,048 bucket heads of 4 bytes, plus the partition locks on their own cache lines.
    assert!(
        m.mapping >= 2048 * 4 && m.mapping <= 2048 * 4 + 128 * 64,
        "{m:?}"
    );
    assert_eq!(m.free_list, 1024 * 4, "{m:?}");
    assert!(
        m.checkpoint >= 1024 * 16,
        "a tag and an id per buffer: {m:?}"
    );
    assert_eq!(
        m.policy, 0,
        "the clock keeps its state in the descriptors: {m:?}"
    );
    assert_eq!(m.total(), m.frames + m.overhead());
    let per = m.overhead_per_buffer();
    assert!(
        per > 64.0 && per < 0.02 * 8192.0,
        "{per} bytes per buffer: {m:?}"
    );
}

#[test]
fn ghost_lists_count_and_listless_policies_hold_nothing_more() {
    for policy in ["clock", "sieve", "cooling"] {
        let m = memory(&[("buffer_replacement", policy)]);
        assert_eq!(m.policy, 0, "{policy}: {m:?}");
    }
    let mut ghosts = Vec::new();
    for policy in ["s3fifo", "2q", "car"] {
        let m = memory(&[("buffer_replacement", policy)]);
        assert!(m.policy > 0, "{policy} keeps ghost lists: {m:?}");
        assert!(m.overhead_per_buffer() < 0.05 * 8192.0, "{policy}: {m:?}");
        ghosts.push(m.policy);
    }
    // ARC (CAR) keeps two ghost lists of up to a pool each: the most.
    assert!(ghosts[2] > ghosts[0] && ghosts[2] > ghosts[1], "{ghosts:?}");
}

#[test]
fn the_dirty_chain_adds_its_map() {
    let lru = memory(&[("bgwriter_strategy", "lru")]);
    let chain = memory(&[("bgwriter_strategy", "dirty-chain")]);
    // One bit per buffer: 1,024 bits.
    assert_eq!(chain.bgwriter - lru.bgwriter, 1024 / 8, "{lru:?} {chain:?}");
}

/// A pacer that holds the checkpoint in its first pace (after its first write) until `go`
/// says so, or until a minute has passed (a bound, so a regression fails instead of
/// hanging); records which.
struct Held {
    entered: std::sync::mpsc::SyncSender<()>,
    go: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    timed_out: std::sync::atomic::AtomicBool,
    paced: std::sync::atomic::AtomicBool,
}

impl bufpool::buffer::CheckpointPacer for Held {
    fn pace(&self, _done: usize, _total: usize) {
        if self.paced.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return; // not the first pace
        }
        let _ = self.entered.send(());
        let go = self.go.lock().unwrap();
        if go.recv_timeout(std::time::Duration::from_secs(60)).is_err() {
            self.timed_out
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// Proves: asking what the pool holds does not wait for a checkpoint in progress (it
/// once took the checkpoint's snapshot lock, held for the whole spread checkpoint: a
/// `bench` run waited 27 s for it after its clients finished). How: a checkpoint held in
/// its first pace; `memory()` must return while it is held (the pacer is released only
/// after it does, or by its one-minute bound, which fails the test).
#[test]
fn memory_does_not_wait_for_a_checkpoint_in_progress() {
    use bufpool::buffer::CheckpointWriteOptions;
    let mut c = Config::default();
    c.set("shared_buffers", "1MB").unwrap();
    let pool = BufferPool::open(Arc::new(MemVfs::new()), "/db".as_ref(), &c, true).unwrap();
    let rel = bufpool::RelFileId::new(0, 16384);
    pool.create_relation(rel, bufpool::ForkNumber::Main)
        .unwrap();
    for _ in 0..4 {
        let b = pool.extend(rel, bufpool::ForkNumber::Main).unwrap();
        bufpool::page::init(&mut b.write(), 0);
    }
    let (entered_tx, entered) = std::sync::mpsc::sync_channel(1);
    let (go, go_rx) = std::sync::mpsc::channel();
    let held = Held {
        entered: entered_tx,
        go: std::sync::Mutex::new(go_rx),
        timed_out: std::sync::atomic::AtomicBool::new(false),
        paced: std::sync::atomic::AtomicBool::new(false),
    };
    std::thread::scope(|s| {
        let ck = s.spawn(|| pool.checkpoint_write(&CheckpointWriteOptions::default(), &held));
        entered
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the checkpoint paced its first write");
        let m = pool.memory();
        go.send(()).unwrap();
        assert!(m.checkpoint >= 128 * 16, "{m:?}");
        ck.join().unwrap().unwrap();
    });
    assert!(
        !held.timed_out.load(std::sync::atomic::Ordering::SeqCst),
        "memory() waited for the checkpoint to finish"
    );
}
