//! Tables and indexes by name ([`Database`]) and handles that own their engine.
//!
//! Proves: names survive a restart and open the same relations with their rows; unknown
//! names are `is_not_found`; a creation never reuses the number of a relation whose files
//! exist but that the catalog does not name (a hand-made relation, or a crash's leftover),
//! so their rows stay; two threads creating at once both get their names; an index on a
//! table that already holds rows is refused; `Heap<'static>` and `BTree<'static>` move to
//! spawned threads and keep the engine alive after every other handle is gone; shutdown
//! is refused while handles still share the engine.

use std::sync::Arc;

use bufpool::index::{byte_key, BTree};
use bufpool::table::{ColumnType, Heap, Schema, Tid};
use bufpool::{Database, Engine, EngineError, Error, RelFileId};

fn schema() -> Schema {
    Schema::new(&[("id", ColumnType::Int8), ("name", ColumnType::Char(8))])
}

fn all_rows(heap: &Heap<'_>) -> Vec<Vec<u8>> {
    let r = heap.engine().begin().unwrap();
    let mut seen = Vec::new();
    heap.scan(&r.snapshot(), |_, d| seen.push(d.to_vec()))
        .unwrap();
    seen.sort();
    seen
}

#[test]
fn names_survive_a_restart_and_open_the_same_relations() {
    let dir = tempfile::tempdir().unwrap();
    let (users_rel, pkey_rel);
    {
        let db = Database::open(dir.path()).unwrap();
        let users = db.create_table("users", schema()).unwrap();
        let pkey = db.create_index("users_pkey", "users", "id", true).unwrap();
        (users_rel, pkey_rel) = (users.rel(), pkey.rel());
        assert_ne!(users_rel, pkey_rel);
        let x = db.begin().unwrap();
        let tid = users.insert(x.xid().unwrap(), b"row one").unwrap();
        pkey.insert(x.xid().unwrap(), 1, tid.to_u64()).unwrap();
        x.commit().unwrap();
        drop((users, pkey));
        db.shutdown().unwrap();
    }
    let db = Database::open(dir.path()).unwrap();
    let users = db.table("users").unwrap();
    let pkey = db.index("users_pkey").unwrap();
    assert_eq!((users.rel(), pkey.rel()), (users_rel, pkey_rel));
    assert!(pkey.is_unique());
    let tid = Tid::from_u64(pkey.get(1).unwrap().expect("the committed key"));
    let r = db.begin().unwrap();
    assert_eq!(
        users.fetch(&r.snapshot(), tid).unwrap().as_deref(),
        Some(&b"row one"[..])
    );
    let catalog = db.catalog().unwrap();
    assert_eq!(catalog.table("users").unwrap().schema, schema());
    assert_eq!(catalog.index("users_pkey").unwrap().column, "id");

    for err in [
        db.table("nobody").unwrap_err(),
        db.index("nothing").unwrap_err(),
    ] {
        assert!(err.is_not_found(), "{err}");
        assert!(err.to_string().contains("does not exist"), "{err}");
    }
    let dup = db.create_table("users", schema()).unwrap_err();
    assert!(dup.to_string().contains("already exists"), "{dup}");
}

#[test]
fn a_creation_skips_the_number_of_files_the_catalog_does_not_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    // A relation made by hand at the first number names would take.
    let by_hand = Heap::create(db.engine(), RelFileId::new(0, 16384)).unwrap();
    let x = db.begin().unwrap();
    by_hand.insert(x.xid().unwrap(), b"made by hand").unwrap();
    x.commit().unwrap();
    // A leftover free-space map alone (a crash's debris) also holds its number.
    db.pool()
        .create_relation(RelFileId::new(0, 16385), bufpool::ForkNumber::FreeSpace)
        .unwrap();

    let t = db.create_table("named", schema()).unwrap();
    assert_eq!(t.rel(), RelFileId::new(0, 16386));
    assert_eq!(all_rows(&by_hand), vec![b"made by hand".to_vec()]);
    assert!(all_rows(&t).is_empty());
}

#[test]
fn two_threads_creating_at_once_both_keep_their_names() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    let rels: Vec<RelFileId> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let db = db.clone();
                s.spawn(move || db.create_table(&format!("t{i}"), schema()).unwrap().rel())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut unique = rels.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 4, "{rels:?}");
    let catalog = db.catalog().unwrap();
    for (i, rel) in rels.iter().enumerate() {
        assert_eq!(catalog.table(&format!("t{i}")).unwrap().rel, *rel);
    }
}

#[test]
fn an_index_on_a_table_that_holds_rows_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    let t = db.create_table("full", schema()).unwrap();
    let x = db.begin().unwrap();
    t.insert(x.xid().unwrap(), b"already here").unwrap();
    x.commit().unwrap();
    let err = db.create_index("full_id", "full", "id", false).unwrap_err();
    assert!(
        err.to_string().contains("table full already holds"),
        "{err}"
    );
    assert!(db.index("full_id").unwrap_err().is_not_found());
    let err = db.create_index("x", "missing", "id", false).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
}

#[test]
fn owned_handles_move_to_threads_and_keep_the_engine_alive() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Heap<'static>>();
    send_sync::<BTree<'static>>();
    send_sync::<Database>();

    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(Engine::open(dir.path()).unwrap());
    const ROWS: RelFileId = RelFileId::new(0, 16384);
    const KEYS: RelFileId = RelFileId::new(0, 16385);
    let tree = BTree::create(engine.clone(), KEYS, false).unwrap();
    drop(Heap::create(engine.clone(), ROWS).unwrap());
    let workers: Vec<_> = [b"alpha".as_slice(), b"beta".as_slice()]
        .into_iter()
        .map(|word| {
            let heap: Heap<'static> = Heap::open(engine.clone(), ROWS);
            let tree: BTree<'static> = BTree::open(engine.clone(), KEYS).unwrap();
            std::thread::spawn(move || -> Result<(), Error> {
                let x = heap.engine().begin()?;
                let tid = heap.insert(x.xid()?, word)?;
                tree.insert(x.xid()?, byte_key(word), tid.to_u64())?;
                x.commit()?;
                Ok(())
            })
        })
        .collect();
    drop(engine); // only the handles hold it now
    for w in workers {
        w.join().unwrap().unwrap();
    }
    let mut found = Vec::new();
    tree.range(byte_key(b"a"), byte_key(b"c"), |k, _| {
        found.push(k);
        true
    })
    .unwrap();
    assert_eq!(found, vec![byte_key(b"alpha"), byte_key(b"beta")]);
    let heap = Heap::open(tree.engine(), ROWS);
    assert_eq!(all_rows(&heap), vec![b"alpha".to_vec(), b"beta".to_vec()]);
}

#[test]
fn shutdown_is_refused_while_handles_share_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    let t = db.create_table("t", schema()).unwrap();
    let err = db.clone().shutdown().unwrap_err();
    assert!(
        matches!(err, Error::Engine(EngineError::StillShared { others: 2 })),
        "{err}"
    );
    drop(t);
    db.shutdown().unwrap();
}
