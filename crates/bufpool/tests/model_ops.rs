//! Random operation sequences against a plain model (proptest).
//!
//! Proves: whatever the order of reads, updates, extensions, flushes, evictions (dropping
//! a relation's buffers after a flush), truncations and reopen, every page reads back as
//! the model says, the pool's invariants hold after each step, and nothing written before
//! a flush is lost across a reopen. The model is a `Vec<u64>` per relation: the value
//! stored in each page. Runs on the in-memory file system with 4-page segments.

mod common;

use std::path::Path;
use std::sync::Arc;

use bufpool::{BufferPool, BufferTag, Config, ForkNumber, MemVfs, RelFileId, Vfs};
use common::{get_u64, put_u64, BODY};
use proptest::prelude::*;

const RELS: [RelFileId; 2] = [RelFileId::new(0, 10), RelFileId::new(1, 11)];

#[derive(Debug, Clone)]
enum Op {
    Read { rel: usize, block: u32 },
    Update { rel: usize, block: u32, value: u64 },
    Extend { rel: usize },
    FlushAll,
    FlushRelation { rel: usize },
    DropBuffers { rel: usize },
    Truncate { rel: usize, keep: u32 },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2usize, 0..64u32).prop_map(|(rel, block)| Op::Read { rel, block }),
        4 => (0..2usize, 0..64u32, any::<u64>()).prop_map(|(rel, block, value)| Op::Update { rel, block, value }),
        3 => (0..2usize).prop_map(|rel| Op::Extend { rel }),
        1 => Just(Op::FlushAll),
        1 => (0..2usize).prop_map(|rel| Op::FlushRelation { rel }),
        1 => (0..2usize).prop_map(|rel| Op::DropBuffers { rel }),
        1 => (0..2usize, 0..64u32).prop_map(|(rel, keep)| Op::Truncate { rel, keep }),
        1 => Just(Op::Reopen),
    ]
}

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "16").unwrap();
    c.set("block_size", "4kB").unwrap();
    c.set("segment_size", "16kB").unwrap();
    c
}

fn open(vfs: &MemVfs, create: bool) -> BufferPool {
    BufferPool::open(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        &config(),
        create,
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn pool_matches_model(ops in proptest::collection::vec(op(), 1..120)) {
        let vfs = MemVfs::new();
        let mut pool = open(&vfs, true);
        let mut model: Vec<Vec<u64>> = vec![Vec::new(), Vec::new()];
        for rel in RELS {
            pool.create_relation(rel, ForkNumber::Main).unwrap();
        }
        for op in ops {
            match op {
                Op::Read { rel, block } => {
                    let n = model[rel].len() as u32;
                    if n == 0 { continue; }
                    let block = block % n;
                    let b = pool.read(BufferTag::new(RELS[rel], ForkNumber::Main, block)).unwrap();
                    prop_assert_eq!(get_u64(&b.read(), BODY), model[rel][block as usize]);
                }
                Op::Update { rel, block, value } => {
                    let n = model[rel].len() as u32;
                    if n == 0 { continue; }
                    let block = block % n;
                    let b = pool.read(BufferTag::new(RELS[rel], ForkNumber::Main, block)).unwrap();
                    put_u64(&mut b.write(), BODY, value);
                    model[rel][block as usize] = value;
                }
                Op::Extend { rel } => {
                    let b = pool.extend(RELS[rel], ForkNumber::Main).unwrap();
                    prop_assert_eq!(b.tag().block as usize, model[rel].len());
                    let mut g = b.write();
                    bufpool::page::init(&mut g, 0);
                    model[rel].push(0);
                }
                Op::FlushAll => { pool.flush_all().unwrap(); }
                Op::FlushRelation { rel } => { pool.flush_relation(RELS[rel]).unwrap(); }
                Op::DropBuffers { rel } => {
                    // Eviction of everything, dirty pages written first.
                    pool.flush_relation(RELS[rel]).unwrap();
                    pool.drop_buffers(RELS[rel], None, 0).unwrap();
                }
                Op::Truncate { rel, keep } => {
                    let keep = keep.min(model[rel].len() as u32);
                    pool.truncate_relation(RELS[rel], ForkNumber::Main, keep).unwrap();
                    model[rel].truncate(keep as usize);
                }
                Op::Reopen => {
                    pool.flush_all().unwrap();
                    pool.sync().unwrap();
                    drop(pool);
                    pool = open(&vfs, false);
                }
            }
            if let Err(problems) = pool.check_invariants() {
                prop_assert!(false, "invariants broken: {:?}", problems);
            }
        }
        pool.flush_all().unwrap();
        drop(pool);
        let pool = open(&vfs, false);
        for (rel, pages) in model.iter().enumerate() {
            prop_assert_eq!(pool.nblocks(RELS[rel], ForkNumber::Main).unwrap() as usize, pages.len());
            for (block, &v) in pages.iter().enumerate() {
                let b = pool.read(BufferTag::new(RELS[rel], ForkNumber::Main, block as u32)).unwrap();
                prop_assert_eq!(get_u64(&b.read(), BODY), v, "rel {} block {}", rel, block);
            }
        }
    }
}
