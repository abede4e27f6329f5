//! Helpers shared by the integration tests (each test file includes this with `mod common`).
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use bufpool::{BufferPool, BufferTag, Config, Engine, ForkNumber, MemVfs, RelFileId, Vfs};

pub const REL: RelFileId = RelFileId::new(0, 16384);

pub fn tag(block: u32) -> BufferTag {
    BufferTag::new(REL, ForkNumber::Main, block)
}

pub fn config(shared_buffers: &str) -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", shared_buffers).unwrap();
    c
}

pub fn open(vfs: Arc<dyn Vfs>, dir: &Path, c: &Config) -> BufferPool {
    BufferPool::open(vfs, dir, c, true).unwrap()
}

/// Offset where test payloads start (after the page header).
pub const BODY: usize = bufpool::page::PAGE_HEADER_SIZE;

pub fn get_u64(page: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(page[off..off + 8].try_into().unwrap())
}

pub fn put_u64(page: &mut [u8], off: usize, v: u64) {
    page[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// Creates `REL` with `n` pages, page `b` holding `b` at BODY; flushed and fsynced.
pub fn fill(pool: &BufferPool, n: u32) {
    pool.create_relation(REL, ForkNumber::Main).unwrap();
    for b in 0..n {
        let buf = pool.extend(REL, ForkNumber::Main).unwrap();
        assert_eq!(buf.tag().block, b);
        let mut g = buf.write();
        bufpool::page::init(&mut g, 0);
        put_u64(&mut g, BODY, u64::from(b));
    }
    pool.flush_all().unwrap();
    pool.sync().unwrap();
}

/// A small engine (32 buffers, 1 MB WAL segments) on `vfs` at `/db`, created if absent:
/// what the transaction and row-lock tests open, again after each simulated crash.
pub fn small_engine(vfs: &MemVfs) -> Engine {
    let mut c = config("32");
    c.set("wal_segment_size", "1MB").unwrap();
    Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &c,
        true,
    )
    .unwrap()
}
