//! The buffer pool alone, as a page cache of your own: no log, no transactions, on a file
//! system other than the real one (here the in-memory one; any `Vfs` implementation
//! works, for instance one that encrypts or counts). Pages are read through the pool,
//! changed under an exclusive guard, evicted when the pool is full, written back and
//! synced on demand.
//!
//! Run: `cargo run -p pgbufpool --example page_cache`.

use std::path::Path;
use std::sync::Arc;

use bufpool::{BufferPool, BufferTag, Config, ForkNumber, IoOp, MemVfs, RelFileId, Vfs};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let vfs = MemVfs::new();
    // A pool of 16 buffers: the 64 pages below cannot all stay.
    let config = Config::builder().shared_buffers_count(16).build()?;
    let pool = BufferPool::open(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/cache"),
        &config,
        true,
    )?;
    let rel = RelFileId::new(0, 1);
    pool.create_relation(rel, ForkNumber::Main)?;
    for i in 0..64u8 {
        let page = pool.extend(rel, ForkNumber::Main)?; // pinned, zeroed, at the end
        page.write()[100] = i; // exclusive guard: the page is dirty
    }
    // Every page reads back what was written, most of them from the file system after
    // an eviction wrote them out.
    for i in 0..64u32 {
        let page = pool.read(BufferTag::new(rel, ForkNumber::Main, i))?;
        assert_eq!(page.read()[100], i as u8);
    }
    pool.flush_all()?; // write what is still dirty
    pool.sync()?; // and fsync it
    let summary = pool.buffercache_summary();
    println!("{summary:?}");
    let stats = pool.stats(); // pg_stat_io's counters
    let (reads, writes) = (stats.total(IoOp::Read), stats.total(IoOp::Write));
    println!("pages read from the file system {reads}, written {writes}");
    assert!(
        reads > 0 && writes >= 64,
        "a 16-buffer pool evicted and read back"
    );
    assert!(vfs
        .contents(&pool.smgr().segment_path(rel, ForkNumber::Main, 0))
        .is_some());
    Ok(())
}
