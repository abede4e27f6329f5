//! Power-loss test of autoprewarm's block list: two saves on demand and the one at
//! shutdown, each of a different pool, crashed after every I/O and each crash resolved
//! under several seeds by the simulator (unsynced writes kept, dropped, torn or garbaged).
//!
//! Proves: after the power cut the list is never corrupt (the next open's reload reports
//! no error); it is absent only if no save returned, and otherwise is exactly one of the
//! lists saved, never older than the last save that returned; and the reload puts that
//! list's pages in the pool. How: `power/mod.rs`'s `explore`, as the other power tests.

mod power;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bufpool::engine::prewarm;
use bufpool::testing::SimVfs;
use bufpool::{BufferTag, Config, Engine, EngineError, ForkNumber, RelFileId, Vfs};

const REL: RelFileId = RelFileId::new(0, 980);

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "64").unwrap();
    c.set("block_size", "4kB").unwrap();
    c.set("wal_segment_size", "1MB").unwrap();
    c.set("autoprewarm", "on").unwrap();
    c.set("autoprewarm_interval", "0").unwrap();
    c
}

fn open(vfs: &SimVfs) -> Result<Engine, EngineError> {
    Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &config(),
        true,
    )
}

fn tag(block: u32) -> BufferTag {
    BufferTag::new(REL, ForkNumber::Main, block)
}

/// The three pools the saves see: blocks 0..10, 10..30, 30..40.
const SETS: [std::ops::Range<u32>; 3] = [0..10, 10..30, 30..40];

fn new_relation() -> SimVfs {
    let vfs = SimVfs::new();
    let e = open(&vfs).unwrap();
    e.pool().create_relation(REL, ForkNumber::Main).unwrap();
    for _ in 0..40 {
        let b = e.pool().extend(REL, ForkNumber::Main).unwrap();
        bufpool::page::init(&mut b.write(), 0);
    }
    e.pool().flush_all().unwrap();
    e.checkpoint().unwrap();
    // A clean shutdown would save a list; the base has none.
    drop(e);
    vfs
}

/// How many saves returned (the third is the shutdown's).
fn workload(vfs: &SimVfs, n: u64) -> usize {
    let Ok(e) = open(vfs) else { return 0 };
    e.autoprewarm_wait(Duration::from_secs(30));
    vfs.crash_after(n);
    let mut returned = 0;
    for (i, set) in SETS.iter().enumerate() {
        if e.pool().evict_all().is_err() {
            return returned;
        }
        for b in set.clone() {
            match e.pool().read(tag(b)) {
                Ok(buf) => drop(buf),
                Err(_) => return returned,
            }
        }
        if i < 2 {
            if e.autoprewarm_dump_now().is_err() {
                return returned;
            }
            returned += 1;
        }
    }
    // The shutdown saves first; its checkpoint may fail after the save returned, so the
    // third save counts as returned only if the file says so (checked by the verifier).
    let _ = e.shutdown();
    returned
}

#[test]
fn power_loss_during_autoprewarm_saves() {
    let base = new_relation();
    let total = {
        let vfs = base.duplicate();
        let before = vfs.io_count();
        assert_eq!(
            workload(&vfs, u64::MAX),
            2,
            "the run without a crash failed"
        );
        let saved = prewarm::read_saved(&vfs, Path::new("/db"), 1 << 20)
            .unwrap()
            .unwrap();
        assert_eq!(saved.blocks, SETS[2].clone().map(tag).collect::<Vec<_>>());
        vfs.io_count() - before
    };
    let lists: Vec<Vec<BufferTag>> = SETS.iter().map(|s| s.clone().map(tag).collect()).collect();
    let step = (total / 40).max(1);
    let tally = power::explore(
        "power_loss_during_autoprewarm_saves",
        (0..=total).step_by(step as usize),
        1,
        power::seeds(4),
        &base,
        workload,
        |vfs, returned, _report, _ctx| {
            let saved = prewarm::read_saved(vfs, Path::new("/db"), 1 << 20)
                .unwrap_or_else(|e| panic!("the list after the crash: {e}"));
            let which = match &saved {
                None => {
                    assert_eq!(*returned, 0, "a save returned, yet no list survived");
                    None
                }
                Some(s) => {
                    let i = lists.iter().position(|l| *l == s.blocks);
                    let i = i.unwrap_or_else(|| panic!("a list no save wrote: {:?}", s.blocks));
                    assert!(
                        i + 1 >= *returned,
                        "list {i} survived after save {returned} returned"
                    );
                    Some(i)
                }
            };
            let e = open(vfs).unwrap_or_else(|err| panic!("reopen failed: {err}"));
            let st = e.autoprewarm_wait(Duration::from_secs(30)).unwrap();
            assert!(st.load_done && st.last_error.is_none(), "{st:?}");
            if let Some(i) = which {
                assert_eq!(st.loaded, lists[i].len() as u64, "{st:?}");
            }
            drop(e);
        },
    );
    tally.print("power_loss_during_autoprewarm_saves", "");
    assert!(tally.states > 40, "{} states", tally.states);
    assert!(
        tally.namespace_undone > 0,
        "no crash undid a save's rename: the list's atomic replacement went untested"
    );
}
