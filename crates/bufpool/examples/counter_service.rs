//! A transactional counter shared by threads: each increment is a transaction that
//! updates one row; a second updater waits for the first's row lock, so no increment is
//! lost. After a restart the count is exact.
//!
//! Run: `cargo run -p pgbufpool --example counter_service`.

use std::path::Path;

use bufpool::table::Heap;
use bufpool::{Engine, RelFileId};

const COUNTERS: RelFileId = RelFileId::new(0, 16384);
const THREADS: u64 = 4;
const INCREMENTS: u64 = 250;

fn value(row: &[u8]) -> u64 {
    u64::from_le_bytes(row[..8].try_into().expect("an 8-byte counter"))
}

fn run(dir: &Path) -> Result<(), bufpool::Error> {
    let root = {
        // Asynchronous commit: increments are acknowledged before their log is synced
        // (a crash may lose the last few, never half of one); the shutdown syncs all.
        let engine = Engine::builder(dir).synchronous_commit(false).open()?;
        let heap = Heap::create(&engine, COUNTERS)?;
        let x = engine.begin()?;
        let root = heap.insert(x.xid()?, &0u64.to_le_bytes())?;
        x.commit()?;
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| -> Result<(), bufpool::Error> {
                    for _ in 0..INCREMENTS {
                        let x = engine.begin()?;
                        heap.update(x.xid()?, root, |old| (value(old) + 1).to_le_bytes().into())?;
                        x.commit()?;
                    }
                    Ok(())
                });
            }
        });
        engine.shutdown()?;
        root
    };
    let engine = Engine::open(dir)?;
    let heap = Heap::open(&engine, COUNTERS);
    let r = engine.begin()?;
    let count = value(&heap.fetch(&r.snapshot(), root)?.expect("the counter row"));
    println!("{THREADS} threads x {INCREMENTS} increments: the counter reads {count}");
    assert_eq!(count, THREADS * INCREMENTS);
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    run(tempfile::tempdir()?.path())?;
    Ok(())
}
