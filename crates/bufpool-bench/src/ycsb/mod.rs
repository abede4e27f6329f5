//! YCSB's core workloads (A to F) on a `usertable` of YCSB's shape, on the embedded
//! engine: the table (a key `user<hash>` and ten 100-byte fields, plus the 8-byte integer
//! the B-tree keys on), its primary key, the load (`bufpool init --workload ycsb`), the
//! operations (read, update, insert, scan, read-modify-write) as heap and index calls, and
//! the check.
//!
//! Owns: the schema and the mapping from YCSB's operations to engine calls. Keys are byte
//! strings; the B-tree keys on `i64`, so the index holds an order-keeping code of the key
//! (`keys::index_key`: exact for keys of up to 18 digits, YCSB's are 19 or 20), is
//! non-unique, and every hit is checked against the key stored in the row. The index's
//! entries name each row's root tuple id (see `bufpool::table::heap`).
//!
//! Invariants: a record `keynum` below [`YcsbDb::records`] has exactly one visible row,
//! under key `keys::key_name(keynum)`, found through the index; a transaction that only
//! reads takes no transaction id and writes nothing to the log.
//!
//! The folder: the keys and request distributions (`keys.rs`), the operations and their
//! counts (`ops.rs`), the workloads as the driver runs them (`workload.rs`), the run
//! (`run.rs`).

pub mod keys;
pub mod ops;
pub mod run;
pub mod workload;

use std::path::Path;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use bufpool::index::btree::BTree;
use bufpool::table::{Catalog, ColumnType, Heap, IndexDef, Schema, TableDef, Tid};
use bufpool::txn::{Snapshot, Xid, INVALID_XID};
use bufpool::{Engine, RelFileId, Vfs};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// The table's name (YCSB's).
pub const TABLE: &str = "usertable";
/// Its primary key's name.
pub const INDEX: &str = "usertable_pkey";
/// Fields per record (YCSB's `fieldcount`).
pub const FIELDS: usize = 10;
/// Bytes per field (YCSB's `fieldlength`).
pub const FIELD_LEN: usize = 100;
/// Bytes of the key column: `user` and up to 20 digits.
pub const KEY_LEN: usize = 24;
/// Records `init --workload ycsb` loads without `--records` (YCSB's workload files say
/// 1,000; this is about 110 MB, the order of a small TPC-B database).
pub const DEFAULT_RECORDS: u64 = 100_000;
/// First relation number (PostgreSQL's FirstNormalObjectId).
const FIRST_REL: u32 = 16384;

/// Column positions.
pub mod col {
    /// The index's code of the key.
    pub const KEY_INDEX: usize = 0;
    /// `ycsb_key`.
    pub const KEY: usize = 1;
    /// `field0`; field `i` is at `FIELD0 + i`.
    pub const FIELD0: usize = 2;
}

/// `usertable`: `key_index int8` (the B-tree's code of the key), `ycsb_key char(24)`,
/// `field0` .. `field9 char(100)`.
pub fn schema() -> Schema {
    let names: Vec<String> = (0..FIELDS).map(|i| format!("field{i}")).collect();
    let mut cols = vec![
        ("key_index", ColumnType::Int8),
        ("ycsb_key", ColumnType::Char(KEY_LEN as u16)),
    ];
    cols.extend(
        names
            .iter()
            .map(|n| (n.as_str(), ColumnType::Char(FIELD_LEN as u16))),
    );
    Schema::new(&cols)
}

/// Whether `dir`'s catalog holds YCSB's table.
pub fn is_initialized(vfs: &dyn Vfs, dir: &Path) -> Result<bool> {
    Ok(Catalog::load(vfs, dir)?.table(TABLE).is_some())
}

/// A record's row: its key and fields of random lowercase letters drawn from `rng`.
pub fn new_row(schema: &Schema, keynum: u64, rng: &mut SmallRng) -> Vec<u8> {
    let mut r = schema.blank_row();
    let key = keys::key_name(keynum);
    schema.set_int(&mut r, col::KEY_INDEX, keys::index_key(key.as_bytes()));
    let o = schema.offset(col::KEY);
    r[o..o + key.len()].copy_from_slice(key.as_bytes());
    let f = schema.offset(col::FIELD0);
    fill_letters(&mut r[f..f + FIELDS * FIELD_LEN], rng);
    r
}

/// Fills `buf` with random lowercase letters (YCSB's values are random printable text).
pub(crate) fn fill_letters(buf: &mut [u8], rng: &mut SmallRng) {
    rng.fill(buf);
    for b in buf {
        *b = b'a' + *b % 26;
    }
}

/// The key stored in `row`, without its padding.
fn row_key<'r>(schema: &Schema, row: &'r [u8]) -> &'r [u8] {
    let o = schema.offset(col::KEY);
    let k = &row[o..o + KEY_LEN];
    let end = k
        .iter()
        .rposition(|&b| b != b' ' && b != 0)
        .map_or(0, |i| i + 1);
    &k[..end]
}

/// What the load did.
#[derive(Debug, Clone)]
pub struct InitReport {
    pub records: u64,
    pub load_s: f64,
    pub index_s: f64,
    pub checkpoint_s: f64,
    pub total_s: f64,
}

/// `bufpool init --workload ycsb`: creates `usertable` and its key in an engine whose
/// catalog has neither, loads `records` records (frozen, as COPY FREEZE), builds the key
/// bottom-up from the sorted codes and ends with a checkpoint. `progress(done, total)`
/// counts records.
pub fn init(
    engine: &Engine,
    vfs: &dyn Vfs,
    dir: &Path,
    records: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<InitReport> {
    ensure!(records >= 1, "--records must be at least 1");
    let start = Instant::now();
    let mut c = Catalog::load(vfs, dir)?;
    ensure!(
        c.table(TABLE).is_none(),
        "{} already holds {TABLE}",
        dir.display()
    );
    let rel = c.next_rel(FIRST_REL);
    c.add_table(TableDef {
        name: TABLE.into(),
        rel,
        fillfactor: 100,
        schema: schema(),
    })?;
    let irel = c.next_rel(FIRST_REL);
    c.add_index(IndexDef {
        name: INDEX.into(),
        rel: irel,
        table: TABLE.into(),
        column: "key_index".into(),
        unique: false,
    })?;
    let heap = Heap::create(engine, rel)?;
    let s = schema();
    let x = engine.begin_xid()?;
    let mut rng = SmallRng::seed_from_u64(0x7c5b);
    let mut entries: Vec<(i64, u64)> = Vec::with_capacity(records as usize);
    let mut codes = Vec::with_capacity(records as usize);
    progress(0, records);
    heap.bulk_load(
        x,
        true,
        (0..records).map(|k| {
            let r = new_row(&s, k, &mut rng);
            codes.push(s.get_int(&r, col::KEY_INDEX));
            r
        }),
        |t| entries.push((0, t.to_u64())),
        &mut |n| progress(n, records),
    )?;
    ensure!(
        codes.len() == entries.len(),
        "the load placed {} rows for {} records",
        entries.len(),
        codes.len()
    );
    for (e, code) in entries.iter_mut().zip(codes) {
        e.0 = code;
    }
    let load_s = start.elapsed().as_secs_f64();
    let t_index = Instant::now();
    entries.sort_unstable();
    BTree::bulk_build(engine, irel, false, entries.into_iter(), 90, &mut |_| {})?;
    let index_s = t_index.elapsed().as_secs_f64();
    engine.commit_transaction(x)?;
    c.save(vfs, dir)?;
    let t_ck = Instant::now();
    engine.checkpoint()?;
    Ok(InitReport {
        records,
        load_s,
        index_s,
        checkpoint_s: t_ck.elapsed().as_secs_f64(),
        total_s: start.elapsed().as_secs_f64(),
    })
}

/// An open YCSB database.
pub struct YcsbDb<'e> {
    pub engine: &'e Engine,
    pub table: Heap<'e>,
    pub pkey: BTree<'e>,
    pub schema: Schema,
    /// Records when it was opened: the index's entries (the load's and earlier runs'
    /// inserts).
    pub records: u64,
}

impl<'e> YcsbDb<'e> {
    /// Opens `usertable` and its key in `engine`.
    pub fn open(engine: &'e Engine, vfs: &dyn Vfs, dir: &Path) -> Result<YcsbDb<'e>> {
        let c = Catalog::load(vfs, dir)?;
        let t = c.table(TABLE).with_context(|| {
            format!("no table {TABLE}: run `bufpool init --workload ycsb` on this data directory")
        })?;
        let i = c.index(INDEX).with_context(|| {
            format!("no index {INDEX}: run `bufpool init --workload ycsb` again")
        })?;
        let table = Heap::open(engine, t.rel).with_fillfactor(t.fillfactor)?;
        let pkey = BTree::open(engine, i.rel).with_context(|| format!("opening index {INDEX}"))?;
        let mut records = 0u64;
        pkey.range(i64::MIN, i64::MAX, |_, _| {
            records += 1;
            true
        })?;
        ensure!(
            records > 0,
            "{TABLE} is empty: run `bufpool init --workload ycsb` again"
        );
        table.seed_live_estimate(records);
        Ok(YcsbDb {
            engine,
            table,
            pkey,
            schema: schema(),
            records,
        })
    }

    /// The run's relations by name: the pool heatmap's rows.
    pub fn relation_names(&self) -> std::collections::HashMap<RelFileId, String> {
        [(self.table.rel(), TABLE), (self.pkey.rel(), INDEX)]
            .into_iter()
            .map(|(r, n)| (r, n.to_string()))
            .collect()
    }

    /// The root tuple id of the row with key `key` that `snap` sees, if any: every index
    /// entry of its code, each checked against the key in the row; `on_row` sees the
    /// row's bytes (under the same heap visit as the check).
    fn find(
        &self,
        snap: &Snapshot,
        key: &[u8],
        mut on_row: impl FnMut(&[u8]),
    ) -> Result<Option<Tid>, bufpool::Error> {
        let mut hits = [0u64; 4];
        let mut n = 0usize;
        let mut more = Vec::new();
        self.pkey.lookup(keys::index_key(key), |v| {
            if n < hits.len() {
                hits[n] = v;
            } else {
                more.push(v);
            }
            n += 1;
        })?;
        for v in hits[..n.min(hits.len())].iter().chain(&more) {
            let root = Tid::from_u64(*v);
            let same = self.table.fetch_with(snap, root, |_, d| {
                let same = row_key(&self.schema, d) == key;
                if same {
                    on_row(d);
                }
                same
            })?;
            if same == Some(true) {
                return Ok(Some(root));
            }
        }
        Ok(None)
    }

    /// YCSB's read: all fields of record `keynum` as `snap` sees it, copied out to `out`
    /// (cleared first). Whether the record was found.
    pub fn read(
        &self,
        snap: &Snapshot,
        keynum: u64,
        out: &mut Vec<u8>,
    ) -> Result<bool, bufpool::Error> {
        let key = keys::key_bytes(keynum);
        out.clear();
        let f = self.schema.offset(col::FIELD0);
        // One heap visit: the row's key checked and its fields copied under one lock.
        let found = self.find(snap, key.as_bytes(), |d| {
            out.extend_from_slice(&d[f..f + FIELDS * FIELD_LEN]);
        })?;
        Ok(found.is_some())
    }

    /// YCSB's update (`writeallfields=false`): field `field` of record `keynum` set to
    /// `value` by transaction `x`, whose snapshot is `snap`. Whether the record was found.
    pub fn update(
        &self,
        x: Xid,
        snap: &Snapshot,
        keynum: u64,
        field: usize,
        value: &[u8],
    ) -> Result<bool, bufpool::Error> {
        let key = keys::key_bytes(keynum);
        let Some(root) = self.find(snap, key.as_bytes(), |_| {})? else {
            return Ok(false);
        };
        let o = self.schema.offset(col::FIELD0 + field);
        let done = self.table.update(x, root, |d| {
            let mut r = d.to_vec();
            r[o..o + FIELD_LEN].copy_from_slice(value);
            r
        })?;
        Ok(done.is_some())
    }

    /// YCSB's insert: record `keynum` with random fields, by transaction `x`.
    pub fn insert(&self, x: Xid, keynum: u64, rng: &mut SmallRng) -> Result<(), bufpool::Error> {
        let row = new_row(&self.schema, keynum, rng);
        let tid = self.table.insert(x, &row)?;
        let code = self.schema.get_int(&row, col::KEY_INDEX);
        self.pkey.insert(x, code, tid.to_u64())?;
        Ok(())
    }

    /// YCSB's scan: up to `count` records in key order from record `keynum`'s key, each
    /// read whole as `snap` sees it. The records read.
    pub fn scan(
        &self,
        snap: &Snapshot,
        keynum: u64,
        count: usize,
        out: &mut Vec<u8>,
    ) -> Result<usize, bufpool::Error> {
        let key = keys::key_name(keynum);
        let lo = keys::index_key(key.as_bytes());
        let mut roots = Vec::with_capacity(count);
        // Entries in key order; a few more than asked, for rows this snapshot does not see.
        let want = count + count / 4 + 1;
        self.pkey.range(lo, i64::MAX, |_, v| {
            roots.push(Tid::from_u64(v));
            roots.len() < want
        })?;
        let f = self.schema.offset(col::FIELD0);
        let mut read = 0;
        for root in roots {
            if read == count {
                break;
            }
            out.clear();
            let got = self.table.fetch_with(snap, root, |_, d| {
                out.extend_from_slice(&d[f..f + FIELDS * FIELD_LEN]);
            })?;
            read += usize::from(got.is_some());
        }
        Ok(read)
    }
}

/// What `bufpool check` found in a YCSB database.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// Visible rows.
    pub rows: u64,
    /// Index entries.
    pub entries: u64,
    pub pages_verified: u64,
    pub problems: Vec<String>,
}

/// Checks a YCSB database: each visible row's key is unique, its code is the one its key
/// gives, and the index leads to it; the index has no entry for a key no row has (an
/// insert rolled back leaves one whose row no snapshot sees: allowed), and passes its own
/// check; every page's checksum on disk.
pub fn check(db: &YcsbDb<'_>, vfs: &dyn Vfs, dir: &Path) -> Result<CheckReport> {
    let snap = db.engine.txns().snapshot(INVALID_XID);
    let mut r = CheckReport::default();
    let mut rows: Vec<(Vec<u8>, Tid)> = Vec::new();
    let s = &db.schema;
    db.table.scan(&snap, |tid, d| {
        rows.push((row_key(s, d).to_vec(), tid));
        let code = s.get_int(d, col::KEY_INDEX);
        if code != keys::index_key(row_key(s, d)) && r.problems.len() < 100 {
            r.problems.push(format!(
                "row {tid:?}: key_index {code} is not the code of its key {}",
                String::from_utf8_lossy(row_key(s, d))
            ));
        }
    })?;
    r.rows = rows.len() as u64;
    rows.sort();
    for w in rows.windows(2) {
        if w[0].0 == w[1].0 && r.problems.len() < 100 {
            r.problems.push(format!(
                "key {} has two visible rows",
                String::from_utf8_lossy(&w[0].0)
            ));
        }
    }
    if let Err(e) = db.pkey.check() {
        r.problems.push(format!("{INDEX}: {e}"));
    }
    let mut entries = 0u64;
    db.pkey.range(i64::MIN, i64::MAX, |_, _| {
        entries += 1;
        true
    })?;
    r.entries = entries;
    // Heap to index: every row is found under its key.
    for (key, _) in &rows {
        if db.find(&snap, key, |_| {})?.is_none() {
            r.problems.push(format!(
                "row {} is not found through {INDEX}",
                String::from_utf8_lossy(key)
            ));
        }
        if r.problems.len() > 100 {
            break;
        }
    }
    if entries < r.rows {
        r.problems.push(format!(
            "{INDEX}: {entries} entries for {} visible rows",
            r.rows
        ));
    }
    r.pages_verified = crate::tpcb::verify_pages(db.engine, vfs, dir, &mut r.problems)?;
    Ok(r)
}
