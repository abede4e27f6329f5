//! Model test of the bgwriter's hibernation handshake with shuttle.
//!
//! Run with `RUSTFLAGS="--cfg shuttle" cargo test -p pgbufpool --target-dir target/shuttle --test bgwriter_model` (CI runs the
//! shuttle tests). Under `--cfg shuttle` the pool's atomics, mutexes and condition variables
//! come from shuttle, a nap between rounds is a yield, and a hibernating bgwriter's wait
//! never times out (shuttle has no time), so a lost wake-up leaves it asleep for good.
//! Proves: an allocation always reaches the bgwriter: after each allocation, some later
//! round reads an allocation count that includes it (the bgwriter either never went to
//! sleep or was woken). How: the real loop (`BufferPool::bgwriter_run`) on one modeled
//! thread and a backend on another that allocates (extends a relation), then waits, by
//! yielding, until `buffers_alloc_seen` covers its allocation; a lost wake-up makes that
//! wait endless and shuttle fails the schedule at its step bound. Thousands of random and
//! PCT schedules interleave the allocation with every step of round, nap and hibernation.
//! Checked once by hand: without the bgwriter's re-read of the allocation count after it
//! raises its flag, both tests fail at shuttle's step bound.
#![cfg(shuttle)]

mod shuttle_check;

use std::path::Path;
use std::sync::Arc;

use bufpool::{BufferPool, Config, ForkNumber, MemVfs, RelFileId, Vfs};

const REL: RelFileId = RelFileId::new(0, 1);

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "16").unwrap();
    c.set("block_size", "4kB").unwrap();
    c.set("buffer_mapping_partitions", "4").unwrap();
    c
}

fn hibernation_never_loses_a_wake_up() {
    let vfs = MemVfs::new();
    let pool = Arc::new(
        BufferPool::open(
            Arc::new(vfs) as Arc<dyn Vfs>,
            Path::new("/db"),
            &config(),
            true,
        )
        .unwrap(),
    );
    pool.create_relation(REL, ForkNumber::Main).unwrap();
    let bgwriter = {
        let pool = pool.clone();
        shuttle::thread::spawn(move || pool.bgwriter_run())
    };
    for _ in 0..3 {
        drop(pool.extend(REL, ForkNumber::Main).unwrap());
        let allocated = pool.bgwriter_stats().buffers_alloc;
        while pool.bgwriter_stats().buffers_alloc_seen < allocated {
            shuttle::thread::yield_now();
        }
    }
    pool.bgwriter_request_stop();
    bgwriter.join().unwrap();
    assert!(!pool.bgwriter_hibernating());
}

#[test]
fn model_hibernation_wake_up_random() {
    shuttle_check::check_random(hibernation_never_loses_a_wake_up, 1000);
}

#[test]
fn model_hibernation_wake_up_pct() {
    shuttle_check::check_pct(hibernation_never_loses_a_wake_up, 1000, 3);
}
