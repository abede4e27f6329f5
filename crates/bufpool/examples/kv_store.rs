//! A small key-value store on bufpool: values in a heap, a unique B-tree from key to row,
//! every put a transaction; closed, reopened, and every committed value still there.
//!
//! Run: `cargo run -p pgbufpool --example kv_store [DIR]` (a temporary directory without
//! DIR). Keys are integers: the B-tree maps `i64` keys to row ids; a text key can be
//! stored through an order-keeping encoding of your own, or its hash where order does not
//! matter.

use std::path::Path;

use bufpool::index::BTree;
use bufpool::table::{Heap, Tid};
use bufpool::{Engine, RelFileId};

const VALUES: RelFileId = RelFileId::new(0, 16384);
const KEYS: RelFileId = RelFileId::new(0, 16385);

/// The store: both relations, opened on one engine.
struct Store<'e> {
    engine: &'e Engine,
    values: Heap<'e>,
    keys: BTree<'e>,
}

impl<'e> Store<'e> {
    /// Opens the store's relations, creating them in a new database.
    fn open(engine: &'e Engine) -> Result<Self, bufpool::Error> {
        let exists = engine
            .pool()
            .smgr()
            .exists(VALUES, bufpool::ForkNumber::Main)?;
        let (values, keys) = if exists {
            (Heap::open(engine, VALUES), BTree::open(engine, KEYS)?)
        } else {
            (
                Heap::create(engine, VALUES)?,
                BTree::create(engine, KEYS, true)?,
            )
        };
        Ok(Store {
            engine,
            values,
            keys,
        })
    }

    /// Sets `key` to `value` in one transaction: a new row and its key, or a new version
    /// of the key's row (the B-tree keeps pointing at the row's root).
    fn put(&self, key: i64, value: &[u8]) -> Result<(), bufpool::Error> {
        let x = self.engine.begin()?;
        match self.keys.get(key)? {
            Some(root) => {
                self.values
                    .update(x.xid()?, Tid::from_u64(root), |_| value.to_vec())?;
            }
            None => {
                let tid = self.values.insert(x.xid()?, value)?;
                self.keys.insert(x.xid()?, key, tid.to_u64())?;
            }
        }
        x.commit()?; // durable when this returns (synchronous_commit = on)
        Ok(())
    }

    /// The value of `key` as of now (a read-only transaction: no id, no log record).
    fn get(&self, key: i64) -> Result<Option<Vec<u8>>, bufpool::Error> {
        let r = self.engine.begin()?;
        let value = match self.keys.get(key)? {
            Some(root) => self.values.fetch(&r.snapshot(), Tid::from_u64(root))?,
            None => None,
        };
        r.commit()?;
        Ok(value)
    }
}

fn run(dir: &Path) -> Result<(), bufpool::Error> {
    {
        let engine = Engine::builder(dir).shared_buffers(16 << 20).open()?;
        let store = Store::open(&engine)?;
        for (key, value) in [(1, "alpha"), (2, "beta"), (3, "gamma")] {
            store.put(key, value.as_bytes())?;
        }
        store.put(2, b"beta, second version")?;
        engine.shutdown()?;
    }
    // Reopened: what committed is there.
    let engine = Engine::open(dir)?;
    let store = Store::open(&engine)?;
    for key in 1..=4 {
        let value = store.get(key)?;
        println!(
            "{key} -> {}",
            value
                .as_deref()
                .map_or("(none)".into(), String::from_utf8_lossy)
        );
    }
    assert_eq!(store.get(2)?.as_deref(), Some(&b"beta, second version"[..]));
    assert_eq!(store.get(4)?, None);
    engine.shutdown()?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    match std::env::args_os().nth(1) {
        Some(dir) => run(Path::new(&dir))?,
        None => run(tempfile::tempdir()?.path())?,
    }
    Ok(())
}
