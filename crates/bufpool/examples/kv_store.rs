//! A small key-value store on bufpool: text keys, values in a heap, a B-tree on an
//! order-keeping prefix of the key, every put a transaction; tables created and opened by
//! name; closed, reopened, and every committed value still there, keys listed in order.
//!
//! Run: `cargo run -p pgbufpool --example kv_store [DIR]` (a temporary directory without
//! DIR). The B-tree keys on `i64`: [`byte_key`] maps a key to its first eight bytes in
//! byte order, so the index is non-unique and every hit is checked against the key stored
//! in the row (see `bufpool::index::key` for why the tree keys on integers).

use std::path::Path;

use bufpool::index::{byte_key, BTree};
use bufpool::table::{ColumnType, Heap, Schema, Tid};
use bufpool::{Database, Engine};

/// The store: its table and index, handles that own the engine they work on.
struct Store {
    db: Database,
    rows: Heap<'static>,
    keys: BTree<'static>,
}

/// A row: the key's prefix (the indexed column, 8 bytes), the key's length (2 bytes), the
/// key, the value.
fn encode(key: &str, value: &[u8]) -> Vec<u8> {
    let mut row = byte_key(key.as_bytes()).to_le_bytes().to_vec();
    row.extend_from_slice(&(key.len() as u16).to_le_bytes());
    row.extend_from_slice(key.as_bytes());
    row.extend_from_slice(value);
    row
}

/// The key and value of a row.
fn decode(row: &[u8]) -> (&[u8], &[u8]) {
    let len = u16::from_le_bytes([row[8], row[9]]) as usize;
    (&row[10..10 + len], &row[10 + len..])
}

impl Store {
    /// Opens the store's table and index by name, creating them in a new database.
    fn open(db: Database) -> Result<Self, bufpool::Error> {
        let (rows, keys) = match db.table("kv") {
            Ok(rows) => (rows, db.index("kv_key")?),
            Err(e) if e.is_not_found() => {
                let schema = Schema::new(&[("key_prefix", ColumnType::Int8)]);
                let rows = db.create_table("kv", schema)?;
                (rows, db.create_index("kv_key", "kv", "key_prefix", false)?)
            }
            Err(e) => return Err(e),
        };
        Ok(Store { db, rows, keys })
    }

    /// The row id of `key`'s row visible to `snap`, checking each index hit's own key.
    fn find(
        &self,
        snap: &bufpool::txn::Snapshot,
        key: &str,
    ) -> Result<Option<(Tid, Vec<u8>)>, bufpool::Error> {
        let mut hits = Vec::new();
        self.keys
            .lookup(byte_key(key.as_bytes()), |v| hits.push(Tid::from_u64(v)))?;
        for tid in hits {
            if let Some(row) = self.rows.fetch(snap, tid)? {
                if decode(&row).0 == key.as_bytes() {
                    return Ok(Some((tid, row)));
                }
            }
        }
        Ok(None)
    }

    /// Sets `key` to `value` in one transaction: a new row and its index entry, or a new
    /// version of the key's row (the index keeps pointing at the row's root).
    fn put(&self, key: &str, value: &[u8]) -> Result<(), bufpool::Error> {
        let x = self.db.begin()?;
        let row = encode(key, value);
        match self.find(&x.snapshot(), key)? {
            Some((root, _)) => {
                self.rows.update(x.xid()?, root, |_| row.clone())?;
            }
            None => {
                let tid = self.rows.insert(x.xid()?, &row)?;
                self.keys
                    .insert(x.xid()?, byte_key(key.as_bytes()), tid.to_u64())?;
            }
        }
        x.commit()?; // durable when this returns (synchronous_commit = on)
        Ok(())
    }

    /// The value of `key` as of now (a read-only transaction: no id, no log record).
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, bufpool::Error> {
        let r = self.db.begin()?;
        let value = self
            .find(&r.snapshot(), key)?
            .map(|(_, row)| decode(&row).1.to_vec());
        r.commit()?;
        Ok(value)
    }

    /// Every key starting with `prefix`, in byte order: a range scan of the index over the
    /// keys the prefix can have (its first eight bytes, then the lowest or highest bytes),
    /// rechecked against each row.
    fn keys_with_prefix(&self, prefix: &str) -> Result<Vec<String>, bufpool::Error> {
        let n = prefix.len().min(8);
        let mut highest = [0xffu8; 8];
        highest[..n].copy_from_slice(&prefix.as_bytes()[..n]);
        let r = self.db.begin()?;
        let mut hits = Vec::new();
        let (lo, hi) = (byte_key(prefix.as_bytes()), byte_key(&highest));
        self.keys.range(lo, hi, |_, v| {
            hits.push(Tid::from_u64(v));
            true
        })?;
        let mut found = Vec::new();
        for tid in hits {
            if let Some(row) = self.rows.fetch(&r.snapshot(), tid)? {
                let key = decode(&row).0;
                if key.starts_with(prefix.as_bytes()) {
                    found.push(String::from_utf8_lossy(key).into_owned());
                }
            }
        }
        r.commit()?;
        found.sort(); // keys sharing their first eight bytes come in row order
        Ok(found)
    }

    /// Closes the store cleanly (a last checkpoint).
    fn close(self) -> Result<(), bufpool::Error> {
        let Store { db, rows, keys } = self;
        drop((rows, keys)); // the handles share the engine; shutdown needs the last one
        db.shutdown()?;
        Ok(())
    }
}

fn run(dir: &Path) -> Result<(), bufpool::Error> {
    {
        let engine = Engine::builder(dir).shared_buffers(16 << 20).open()?;
        let store = Store::open(Database::new(engine.into()))?;
        for (key, value) in [
            ("user:ada", "Lovelace"),
            ("user:alan", "Turing"),
            ("user:grace", "Hopper"),
            ("host:db1", "10.0.0.1"),
        ] {
            store.put(key, value.as_bytes())?;
        }
        store.put("user:alan", b"Turing, second version")?;
        store.close()?;
    }
    // Reopened: what committed is there.
    let store = Store::open(Database::open(dir)?)?;
    for key in ["user:ada", "user:alan", "host:db1", "user:nobody"] {
        let value = store.get(key)?;
        println!(
            "{key} -> {}",
            value
                .as_deref()
                .map_or("(none)".into(), String::from_utf8_lossy)
        );
    }
    assert_eq!(
        store.get("user:alan")?.as_deref(),
        Some(&b"Turing, second version"[..])
    );
    assert_eq!(store.get("user:nobody")?, None);
    let users = store.keys_with_prefix("user:")?;
    println!("keys from \"user:\": {}", users.join(", "));
    assert_eq!(users, ["user:ada", "user:alan", "user:grace"]);
    store.close()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    match std::env::args_os().nth(1) {
        Some(dir) => run(Path::new(&dir))?,
        None => run(tempfile::tempdir()?.path())?,
    }
    Ok(())
}
