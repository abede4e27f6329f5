//! TPC-C (revision 5.11, clauses 1, 2, 3.3.2 and 4.3) on the embedded engine: the nine
//! tables, their keys, the load (`bufpool init --workload tpcc -w W`), the five
//! transactions as heap and index calls (`bufpool bench` on a TPC-C database), and the
//! consistency check (`bufpool check`). No terminals, keying or think times: each client
//! runs transactions back to back, as the field's in-memory figures do.
//!
//! Owns: the schema (`schema.rs`: every column of clause 1.3, money in cents, rates in
//! 1/10,000, dates in microseconds, NULL as 0) and the mapping from the transactions'
//! SQL to engine calls. The B-tree keys on `i64`, so each table keeps its composite
//! primary key packed into one integer column (`*_key`, see [`keys`]), as an index on an
//! expression stored beside the row; two more such columns key the secondary indexes
//! (customers by last name, orders by customer).
//!
//! Invariants: every row of a table with a key is found through it, and keys never
//! change (an update keeps the row's root tuple id, which the entries name, see
//! `bufpool::table::heap`); indexes of the tables that New-Order inserts into are
//! non-unique (a rolled-back New-Order's order number is taken again, beside the entry its
//! rolled-back row left, which the transaction removes after its abort); Order-Status and
//! Stock-Level only read, so take no transaction id and write nothing to the log.
//!
//! The folder: inputs and random data (`inputs.rs`, shared with SQLite's peer), tables
//! and keys (`schema.rs`), the load (`load.rs`), the transactions (`txns.rs`), the mix as
//! the driver runs it (`workload.rs`), the run (`run.rs`), the check (`check.rs`).

pub mod check;
pub mod inputs;
pub mod load;
pub mod outcome;
pub mod run;
pub mod schema;
pub mod txns;
pub mod workload;

use std::collections::HashMap;
use std::path::Path;

use anyhow::{ensure, Context, Result};
use bufpool::index::btree::BTree;
use bufpool::table::{Catalog, Heap, Schema, Tid};
use bufpool::txn::Snapshot;
use bufpool::{Engine, RelFileId, Vfs};

pub use schema::Table;

/// One table with its key: the heap, its primary key (None for history) and, for
/// customer and orders, the second index.
pub struct Rel<'e> {
    pub heap: Heap<'e>,
    pub pkey: Option<BTree<'e>>,
    pub second: Option<BTree<'e>>,
    pub schema: Schema,
}

impl Rel<'_> {
    /// The primary key (every table but history has one).
    pub fn key(&self) -> &BTree<'_> {
        self.pkey.as_ref().expect("a table with a primary key")
    }

    /// The integer in column `c` of `row`.
    pub fn int(&self, row: &[u8], c: usize) -> i64 {
        self.schema.get_int(row, c)
    }

    /// The text in column `c` of `row`, without its padding.
    pub fn text<'r>(&self, row: &'r [u8], c: usize) -> &'r [u8] {
        schema::text(&self.schema, row, c)
    }

    /// The root tuple id and `f` of the row under `key` in `index` that `snap` sees
    /// (entries of rows it does not see, such as a rolled-back insert's, are passed
    /// over).
    pub fn find_in<R>(
        &self,
        index: &BTree<'_>,
        snap: &Snapshot,
        key: i64,
        mut f: impl FnMut(&[u8]) -> R,
    ) -> Result<Option<(Tid, R)>, bufpool::Error> {
        let mut hits = [0u64; 4];
        let mut n = 0usize;
        let mut more = Vec::new();
        index.lookup(key, |v| {
            if n < hits.len() {
                hits[n] = v;
            } else {
                more.push(v);
            }
            n += 1;
        })?;
        for v in hits[..n.min(hits.len())].iter().chain(&more) {
            let root = Tid::from_u64(*v);
            if let Some(r) = self.heap.fetch_with(snap, root, |_, d| f(d))? {
                return Ok(Some((root, r)));
            }
        }
        Ok(None)
    }

    /// [`Rel::find_in`] on the primary key.
    pub fn find<R>(
        &self,
        snap: &Snapshot,
        key: i64,
        f: impl FnMut(&[u8]) -> R,
    ) -> Result<Option<(Tid, R)>, bufpool::Error> {
        self.find_in(self.key(), snap, key, f)
    }

    /// The (key, root tuple id) entries of `index` in `lo..=hi`, in key order.
    pub fn entries(
        index: &BTree<'_>,
        lo: i64,
        hi: i64,
        out: &mut Vec<(i64, Tid)>,
    ) -> Result<(), bufpool::Error> {
        out.clear();
        index.range(lo, hi, |k, v| {
            out.push((k, Tid::from_u64(v)));
            true
        })?;
        Ok(())
    }
}

/// Whether `dir`'s catalog holds TPC-C's tables.
pub fn is_initialized(vfs: &dyn Vfs, dir: &Path) -> Result<bool> {
    Ok(Catalog::load(vfs, dir)?
        .table(Table::Warehouse.name())
        .is_some())
}

/// An open TPC-C database.
pub struct TpccDb<'e> {
    pub engine: &'e Engine,
    /// The tables, in [`Table::ALL`]'s order.
    pub rels: Vec<Rel<'e>>,
    /// Warehouses (the number the load made).
    pub warehouses: u32,
    /// The load's NURand constants (the load draws them from a fixed seed, so a run
    /// knows them without storing them: [`load::load_constants`]).
    pub load_constants: inputs::Constants,
}

impl<'e> TpccDb<'e> {
    /// Opens TPC-C's tables and indexes in `engine`.
    pub fn open(engine: &'e Engine, vfs: &dyn Vfs, dir: &Path) -> Result<TpccDb<'e>> {
        let c = Catalog::load(vfs, dir)?;
        let mut rels = Vec::with_capacity(Table::ALL.len());
        for t in Table::ALL {
            let def = c.table(t.name()).with_context(|| {
                format!(
                    "no table {}: run `bufpool init --workload tpcc` on this data directory",
                    t.name()
                )
            })?;
            let heap = Heap::open(engine, def.rel).with_fillfactor(def.fillfactor)?;
            let open_index = |name: Option<&str>| -> Result<Option<BTree<'e>>> {
                let Some(name) = name else { return Ok(None) };
                let i = c.index(name).with_context(|| {
                    format!("no index {name}: run `bufpool init --workload tpcc` again")
                })?;
                Ok(Some(
                    BTree::open(engine, i.rel).with_context(|| format!("opening index {name}"))?,
                ))
            };
            rels.push(Rel {
                heap,
                pkey: open_index(t.pkey_name())?,
                second: open_index(t.second_index().map(|s| s.0))?,
                schema: t.schema(),
            });
        }
        let mut warehouses = 0u32;
        rels[Table::Warehouse as usize]
            .key()
            .range(i64::MIN, i64::MAX, |_, _| {
                warehouses += 1;
                true
            })?;
        ensure!(
            warehouses >= 1,
            "the database has no warehouses: run `bufpool init --workload tpcc` again"
        );
        let db = TpccDb {
            engine,
            rels,
            warehouses,
            load_constants: load::load_constants(),
        };
        // The row estimates pruning and autovacuum start from.
        for t in Table::ALL {
            db.rel(t).heap.seed_live_estimate(t.rows(warehouses));
        }
        Ok(db)
    }

    /// Table `t`.
    pub fn rel(&self, t: Table) -> &Rel<'e> {
        &self.rels[t as usize]
    }

    /// The run's relations by name: the pool heatmap's rows.
    pub fn relation_names(&self) -> HashMap<RelFileId, String> {
        let mut m = HashMap::new();
        for t in Table::ALL {
            let r = self.rel(t);
            m.insert(r.heap.rel(), t.name().to_string());
            if let (Some(i), Some(n)) = (&r.pkey, t.pkey_name()) {
                m.insert(i.rel(), n.to_string());
            }
            if let (Some(i), Some((n, _))) = (&r.second, t.second_index()) {
                m.insert(i.rel(), n.to_string());
            }
        }
        m
    }
}
