//! README's "tables and indexes" example, kept compiling and true.

use bufpool::index::BTree;
use bufpool::table::{Heap, Tid};
use bufpool::{Engine, RelFileId};

#[test]
fn readme_tables_and_indexes_example() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let engine = Engine::open(dir.path())?;
    let heap = Heap::create(&engine, RelFileId::new(0, 16384))?.with_fillfactor(90)?;
    let pkey = BTree::create(&engine, RelFileId::new(0, 16385), true)?;
    let x = engine.begin()?;
    let tid = heap.insert(x.xid()?, b"row bytes")?;
    pkey.insert(x.xid()?, 42, tid.to_u64())?;
    assert!(
        x.commit()?.is_some(),
        "a transaction that wrote commits a record"
    );

    let y = engine.begin()?;
    let root = Tid::from_u64(pkey.get(42)?.unwrap());
    heap.update(y.xid()?, root, |old| [old, b"!"].concat())?;
    let snap = y.snapshot();
    assert_eq!(heap.fetch(&snap, root)?.unwrap(), b"row bytes!");
    y.commit()?;

    // A transaction that only reads gets no id and writes nothing to the log.
    let r = engine.begin()?;
    assert_eq!(heap.fetch(&r.snapshot(), root)?.unwrap(), b"row bytes!");
    assert_eq!(r.commit()?, None);
    heap.vacuum(false)?;
    Ok(())
}
