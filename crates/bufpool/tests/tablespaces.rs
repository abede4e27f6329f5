//! Tablespaces under the whole engine, across a power cut.
//!
//! Proves: a table and its index placed in a created tablespace (a link from
//! `<dir>/base/<id>` to another directory) keep every committed row through a power cut,
//! whether the rows reached the tablespace's files by a checkpoint or only the WAL (redo
//! writes through the link); the catalog finds them in their tablespace after the
//! restart; their files are in the tablespace's location, not under the data directory.
//! How: `SimVfs` (whose links are durable only once their directory is fsynced, like any
//! name), 4 KiB pages in 32 KiB segments; rows committed before and after a checkpoint;
//! `crash(seed)` for many seeds; reopen, load the catalog, scan the heap and look each
//! row up in the index.

use std::path::Path;
use std::sync::Arc;

use bufpool::index::BTree;
use bufpool::table::{Catalog, ColumnType, Heap, IndexDef, Schema, TableDef, Tid};
use bufpool::txn::INVALID_XID;
use bufpool::vfs::{SimVfs, Vfs};
use bufpool::{Config, Engine};

/// Crash seeds: each keeps or undoes every unsynced name and write its own way.
const SEEDS: u64 = 12;
/// Rows of 1,000 bytes, three to a page: 60 rows fill 20 pages, three segments.
const ROWS: u32 = 60;
const ROW_LEN: usize = 1000;
const DIR: &str = "/db";
const LOCATION: &str = "/dev1/ts";

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "64").unwrap();
    c.set("block_size", "4kB").unwrap();
    c.set("segment_size", "32kB").unwrap();
    c.set("wal_segment_size", "64kB").unwrap();
    c
}

fn open(vfs: &SimVfs) -> Engine {
    Engine::open_vfs(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new(DIR),
        &config(),
        true,
    )
    .unwrap()
}

fn schema() -> Schema {
    Schema::new(&[
        ("id", ColumnType::Int4),
        ("pad", ColumnType::Char(ROW_LEN as u16 - 4)),
    ])
}

/// Row `i`: its id, then a pad that differs from row to row.
fn row(i: u32) -> Vec<u8> {
    let s = schema();
    let mut r = s.blank_row();
    s.set_int(&mut r, 0, i64::from(i));
    r[4..].fill((i % 251) as u8);
    r
}

/// Inserts rows `ids` in one committed transaction, heap and index.
fn insert(e: &Engine, heap: &Heap<'_>, pkey: &BTree<'_>, ids: std::ops::Range<u32>) {
    let x = e.begin_xid().unwrap();
    for i in ids {
        let tid = heap.insert(x, &row(i)).unwrap();
        pkey.insert(x, i64::from(i), tid.to_u64()).unwrap();
    }
    e.commit_transaction(x).unwrap();
}

#[test]
fn a_table_in_a_tablespace_keeps_its_committed_rows_through_a_power_cut() {
    for seed in 0..SEEDS {
        let vfs = SimVfs::new();
        {
            let e = open(&vfs);
            e.pool()
                .smgr()
                .create_tablespace(1, Path::new(LOCATION))
                .unwrap();
            let mut c = Catalog::default();
            c.add_table(TableDef {
                name: "t".into(),
                rel: c.next_rel_in(16384, 1),
                fillfactor: 100,
                schema: schema(),
            })
            .unwrap();
            c.add_index(IndexDef {
                name: "t_pkey".into(),
                rel: c.next_rel_in(16384, 1),
                table: "t".into(),
                column: "id".into(),
                unique: true,
            })
            .unwrap();
            let heap = Heap::create(&e, c.table("t").unwrap().rel).unwrap();
            let pkey = BTree::create(&e, c.index("t_pkey").unwrap().rel, true).unwrap();
            c.save(&vfs, Path::new(DIR)).unwrap();
            insert(&e, &heap, &pkey, 0..ROWS / 2);
            e.checkpoint().unwrap();
            insert(&e, &heap, &pkey, ROWS / 2..ROWS);
            assert!(
                vfs.contents(&Path::new(LOCATION).join("16384.2")).is_some(),
                "the heap's third segment is in the location"
            );
            assert!(
                !vfs.exists(Path::new("/db/base/0/16384")).unwrap(),
                "nothing of it in the default tablespace"
            );
        }
        vfs.crash(seed);
        let e = open(&vfs);
        let c = Catalog::load(&vfs, Path::new(DIR)).unwrap();
        assert_eq!(c.tablespaces(), [1]);
        assert_eq!(
            e.pool().smgr().tablespaces().unwrap(),
            [(1, Path::new(LOCATION).to_path_buf())],
            "seed {seed}"
        );
        let heap = Heap::open(&e, c.table("t").unwrap().rel);
        let pkey = BTree::open(&e, c.index("t_pkey").unwrap().rel).unwrap();
        let snap = e.txns().snapshot(INVALID_XID);
        let mut seen = Vec::new();
        heap.scan(&snap, |_, data| {
            let i = schema().get_int(data, 0) as u32;
            assert_eq!(data, row(i).as_slice(), "seed {seed}: row {i} damaged");
            seen.push(i);
        })
        .unwrap();
        seen.sort_unstable();
        assert_eq!(seen, (0..ROWS).collect::<Vec<_>>(), "seed {seed}");
        for i in 0..ROWS {
            let tid = Tid::from_u64(pkey.get(i64::from(i)).unwrap().expect("key in index"));
            let got = heap.fetch(&snap, tid).unwrap().expect("row visible");
            assert_eq!(got, row(i), "seed {seed}: key {i}");
        }
        e.shutdown().unwrap();
    }
}
