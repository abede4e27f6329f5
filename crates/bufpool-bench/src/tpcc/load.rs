//! `bufpool init --workload tpcc -w W`: TPC-C's nine tables and their eleven indexes,
//! populated as clause 4.3.3.1 says (100,000 items; per warehouse 100,000 stock rows, 10
//! districts, 30,000 customers with a history row each, 30,000 orders with 5 to 15 lines,
//! the last 900 of each district undelivered with a new-order row).
//!
//! Each table is written by one bulk load of frozen rows (COPY FREEZE: a table created by
//! the same load, which nobody else sees yet), its indexes built bottom-up from the sorted
//! keys; one checkpoint ends the load. The load's draws come from fixed seeds, so its
//! NURand constants ([`load_constants`]) are known to every run without being stored.

use std::path::Path;
use std::time::Instant;

use anyhow::{ensure, Result};
use bufpool::index::btree::BTree;
use bufpool::table::{Catalog, Heap, IndexDef, Schema, TableDef};
use bufpool::txn::Xid;
use bufpool::{Engine, Vfs};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::inputs::{self, a_string, data_original, n_string, zip, Constants};
use super::inputs::{CUSTOMERS, DISTRICTS, FIRST_NEW_ORDER, ITEMS, ORDERS};
use super::schema::{keys, Table};

/// Warehouses `init --workload tpcc` loads without `-w` (about 100 MB each).
pub const DEFAULT_WAREHOUSES: u32 = 1;
/// The most warehouses a key holds (see `schema::keys`).
pub const MAX_WAREHOUSES: u32 = 1 << 20;
/// First relation number (PostgreSQL's FirstNormalObjectId).
const FIRST_REL: u32 = 16384;
/// The seed of the load's rows.
const ROW_SEED: u64 = 0x7c_c0de;
/// The seed of the load's NURand constants.
const CONSTANT_SEED: u64 = 0x7c_c001;

/// The load's NURand constants.
pub fn load_constants() -> Constants {
    Constants::for_load(&mut SmallRng::seed_from_u64(CONSTANT_SEED))
}

/// A value of a row being built, in column order.
enum V {
    I(i64),
    S(String),
}

/// The row of `s` holding `values` in column order.
fn row(s: &Schema, values: Vec<V>) -> Vec<u8> {
    debug_assert_eq!(values.len(), s.columns.len());
    let mut r = s.blank_row();
    for (c, v) in values.into_iter().enumerate() {
        match v {
            V::I(i) => s.set_int(&mut r, c, i),
            V::S(t) => super::schema::set_text(s, &mut r, c, t.as_bytes()),
        }
    }
    r
}

fn address(rng: &mut SmallRng) -> [V; 5] {
    [
        V::S(a_string(rng, 10, 20)),
        V::S(a_string(rng, 10, 20)),
        V::S(a_string(rng, 10, 20)),
        V::S(a_string(rng, 2, 2)),
        V::S(zip(rng)),
    ]
}

/// What the load did.
#[derive(Debug, Clone)]
pub struct InitReport {
    pub warehouses: u32,
    /// Rows over all tables.
    pub rows: u64,
    pub load_s: f64,
    pub checkpoint_s: f64,
    pub total_s: f64,
}

/// One table's load: its heap, and its indexes' entries as the rows are placed.
struct Loader<'a> {
    engine: &'a Engine,
    catalog: &'a mut Catalog,
    xid: Xid,
    done: u64,
    total: u64,
}

impl Loader<'_> {
    /// Creates table `t` and its indexes, loads `rows`, builds the indexes.
    fn table(
        &mut self,
        t: Table,
        rows: impl Iterator<Item = Vec<u8>>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<()> {
        let s = t.schema();
        let rel = self.catalog.next_rel(FIRST_REL);
        self.catalog.add_table(TableDef {
            name: t.name().into(),
            rel,
            fillfactor: 100,
            schema: s.clone(),
        })?;
        let mut indexes = Vec::new();
        for (name, column) in t.pkey().into_iter().chain(t.second_index()) {
            let irel = self.catalog.next_rel(FIRST_REL);
            self.catalog.add_index(IndexDef {
                name: name.into(),
                rel: irel,
                table: t.name().into(),
                column: column.into(),
                unique: t.unique() && Some(column) == t.pkey().map(|p| p.1),
            })?;
            let c = s.column(column).expect("the index's column");
            let unique = t.unique() && Some(column) == t.pkey().map(|p| p.1);
            indexes.push((irel, c, unique));
        }
        let heap = Heap::create(self.engine, rel)?;
        let mut keys: Vec<Vec<i64>> = vec![Vec::new(); indexes.len()];
        let mut tids = Vec::new();
        let base = self.done;
        let total = self.total;
        heap.bulk_load(
            self.xid,
            true,
            rows.inspect(|r| {
                for (k, ix) in keys.iter_mut().zip(&indexes) {
                    k.push(s.get_int(r, ix.1));
                }
            }),
            |tid| tids.push(tid.to_u64()),
            &mut |n| progress(base + n, total),
        )?;
        self.done += tids.len() as u64;
        for ((irel, _, unique), k) in indexes.into_iter().zip(keys) {
            ensure!(
                k.len() == tids.len(),
                "{}: {} rows placed for {} made",
                t.name(),
                tids.len(),
                k.len()
            );
            let mut entries: Vec<(i64, u64)> = k.into_iter().zip(tids.iter().copied()).collect();
            entries.sort_unstable();
            BTree::bulk_build(
                self.engine,
                irel,
                unique,
                entries.into_iter(),
                90,
                &mut |_| {},
            )?;
        }
        Ok(())
    }
}

/// `bufpool init --workload tpcc`: creates TPC-C's tables in an engine whose catalog has
/// none and loads `warehouses` warehouses, ending with a checkpoint. `progress(done,
/// total)` counts rows.
pub fn init(
    engine: &Engine,
    vfs: &dyn Vfs,
    dir: &Path,
    warehouses: u32,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<InitReport> {
    ensure!(
        (1..=MAX_WAREHOUSES).contains(&warehouses),
        "-w must be 1 to {MAX_WAREHOUSES}"
    );
    let start = Instant::now();
    let mut catalog = Catalog::load(vfs, dir)?;
    for t in Table::ALL {
        ensure!(
            catalog.table(t.name()).is_none(),
            "{} already holds a table {}",
            dir.display(),
            t.name()
        );
    }
    let total: u64 = Table::ALL.iter().map(|t| t.rows(warehouses)).sum();
    let x = engine.begin_xid()?;
    let mut l = Loader {
        engine,
        catalog: &mut catalog,
        xid: x,
        done: 0,
        total,
    };
    let k = load_constants();
    let now = inputs::now_micros();
    let mut rng = SmallRng::seed_from_u64(ROW_SEED);
    progress(0, total);
    let s = Table::Item.schema();
    l.table(Table::Item, items(&s, &mut rng), progress)?;
    let mut r2 = SmallRng::seed_from_u64(ROW_SEED ^ 1);
    let s = Table::Warehouse.schema();
    l.table(
        Table::Warehouse,
        warehouse_rows(&s, warehouses, &mut r2),
        progress,
    )?;
    let s = Table::Stock.schema();
    l.table(Table::Stock, stock(&s, warehouses, &mut rng), progress)?;
    let s = Table::District.schema();
    l.table(
        Table::District,
        district_rows(&s, warehouses, &mut r2),
        progress,
    )?;
    let s = Table::Customer.schema();
    l.table(
        Table::Customer,
        customers(&s, warehouses, &k, now, &mut rng),
        progress,
    )?;
    let s = Table::History.schema();
    l.table(
        Table::History,
        history_rows(&s, warehouses, now, &mut r2),
        progress,
    )?;
    let plan = plan_orders(warehouses, &mut rng);
    let s = Table::Orders.schema();
    l.table(Table::Orders, order_rows(&s, &plan, now), progress)?;
    let s = Table::OrderLine.schema();
    l.table(
        Table::OrderLine,
        order_lines(&s, &plan, now, &mut rng),
        progress,
    )?;
    let s = Table::NewOrder.schema();
    l.table(Table::NewOrder, new_order_rows(&s, warehouses), progress)?;
    let rows = l.done;
    engine.commit_transaction(x)?;
    catalog.save(vfs, dir)?;
    let load_s = start.elapsed().as_secs_f64();
    let t_ck = Instant::now();
    engine.checkpoint()?;
    Ok(InitReport {
        warehouses,
        rows,
        load_s,
        checkpoint_s: t_ck.elapsed().as_secs_f64(),
        total_s: start.elapsed().as_secs_f64(),
    })
}

/// A district's orders as the load makes them.
struct District {
    w: u32,
    d: u32,
    /// Order `o` at `o - 1`.
    orders: Vec<OrderPlan>,
}

#[derive(Clone, Copy)]
struct OrderPlan {
    /// Its customer (from a random permutation of the district's).
    c: u32,
    lines: u32,
    /// Its carrier, 0 (NULL) for the undelivered.
    carrier: u32,
}

fn warehouse_rows<'a>(
    s: &'a Schema,
    warehouses: u32,
    rng: &'a mut SmallRng,
) -> impl Iterator<Item = Vec<u8>> + 'a {
    (1..=warehouses).map(move |w| {
        let mut v = vec![
            V::I(keys::warehouse(w)),
            V::I(w.into()),
            V::S(a_string(rng, 6, 10)),
        ];
        v.extend(address(rng));
        v.extend([V::I(rng.random_range(0..=2000)), V::I(30_000_000)]);
        row(s, v)
    })
}

fn district_rows<'a>(
    s: &'a Schema,
    warehouses: u32,
    rng: &'a mut SmallRng,
) -> impl Iterator<Item = Vec<u8>> + 'a {
    districts(warehouses).map(move |(w, d)| {
        let mut v = vec![
            V::I(keys::district(w, d)),
            V::I(d.into()),
            V::I(w.into()),
            V::S(a_string(rng, 6, 10)),
        ];
        v.extend(address(rng));
        v.extend([
            V::I(rng.random_range(0..=2000)),
            V::I(3_000_000),
            V::I((ORDERS + 1).into()),
        ]);
        row(s, v)
    })
}

fn history_rows<'a>(
    s: &'a Schema,
    warehouses: u32,
    now: i64,
    rng: &'a mut SmallRng,
) -> impl Iterator<Item = Vec<u8>> + 'a {
    districts(warehouses)
        .flat_map(|(w, d)| (1..=CUSTOMERS).map(move |c| (w, d, c)))
        .map(move |(w, d, c)| {
            let mut v = Vec::from([c, d, w, d, w].map(|i| V::I(i.into())));
            v.extend([V::I(now), V::I(1000), V::S(a_string(rng, 12, 24))]);
            row(s, v)
        })
}

/// Each district's orders: customers from a random permutation of the district's, 5 to
/// 15 lines, a carrier for the delivered ones.
fn plan_orders(warehouses: u32, rng: &mut SmallRng) -> Vec<District> {
    let mut plan = Vec::new();
    for (w, d) in districts(warehouses) {
        let mut perm: Vec<u32> = (1..=CUSTOMERS).collect();
        perm.shuffle(rng);
        let orders = (1..=ORDERS)
            .map(|o| OrderPlan {
                c: perm[o as usize - 1],
                lines: rng.random_range(5..=15),
                carrier: if o < FIRST_NEW_ORDER {
                    rng.random_range(1..=10)
                } else {
                    0
                },
            })
            .collect();
        plan.push(District { w, d, orders });
    }
    plan
}

fn order_rows<'a>(
    s: &'a Schema,
    plan: &'a [District],
    now: i64,
) -> impl Iterator<Item = Vec<u8>> + 'a {
    plan.iter().flat_map(move |p| {
        (1..=ORDERS).map(move |o| {
            let OrderPlan { c, lines, carrier } = p.orders[o as usize - 1];
            let (w, d) = (p.w, p.d);
            let v = vec![
                V::I(keys::order(w, d, o)),
                V::I(keys::order_of_customer(w, d, c, o)),
                V::I(o.into()),
                V::I(d.into()),
                V::I(w.into()),
                V::I(c.into()),
                V::I(now),
                V::I(carrier.into()),
                V::I(lines.into()),
                V::I(1),
            ];
            row(s, v)
        })
    })
}

fn new_order_rows(s: &Schema, warehouses: u32) -> impl Iterator<Item = Vec<u8>> + '_ {
    districts(warehouses)
        .flat_map(|(w, d)| (FIRST_NEW_ORDER..=ORDERS).map(move |o| (w, d, o)))
        .map(move |(w, d, o)| {
            let v = [keys::order(w, d, o), o.into(), d.into(), w.into()];
            row(s, v.into_iter().map(V::I).collect())
        })
}

/// Every district, warehouse by warehouse.
fn districts(warehouses: u32) -> impl Iterator<Item = (u32, u32)> {
    (1..=warehouses).flat_map(|w| (1..=DISTRICTS).map(move |d| (w, d)))
}

fn items<'a>(s: &'a Schema, rng: &'a mut SmallRng) -> impl Iterator<Item = Vec<u8>> + 'a {
    (1..=ITEMS).map(move |i| {
        let v = vec![
            V::I(keys::item(i)),
            V::I(i.into()),
            V::I(rng.random_range(1..=10_000)),
            V::S(a_string(rng, 14, 24)),
            V::I(rng.random_range(100..=10_000)),
            V::S(data_original(rng)),
        ];
        row(s, v)
    })
}

fn stock<'a>(
    s: &'a Schema,
    warehouses: u32,
    rng: &'a mut SmallRng,
) -> impl Iterator<Item = Vec<u8>> + 'a {
    (1..=warehouses)
        .flat_map(|w| (1..=ITEMS).map(move |i| (w, i)))
        .map(move |(w, i)| {
            let mut v = vec![
                V::I(keys::stock(w, i)),
                V::I(i.into()),
                V::I(w.into()),
                V::I(rng.random_range(10..=100)),
            ];
            v.extend((0..10).map(|_| V::S(a_string(rng, 24, 24))));
            v.extend([V::I(0), V::I(0), V::I(0), V::S(data_original(rng))]);
            row(s, v)
        })
}

fn customers<'a>(
    s: &'a Schema,
    warehouses: u32,
    k: &'a Constants,
    now: i64,
    rng: &'a mut SmallRng,
) -> impl Iterator<Item = Vec<u8>> + 'a {
    districts(warehouses)
        .flat_map(|(w, d)| (1..=CUSTOMERS).map(move |c| (w, d, c)))
        .map(move |(w, d, c)| {
            let last = if c <= 1000 {
                c - 1
            } else {
                inputs::last_name_number(rng, k)
            };
            let mut v = vec![
                V::I(keys::customer(w, d, c)),
                V::I(keys::customer_last(w, d, last)),
                V::I(c.into()),
                V::I(d.into()),
                V::I(w.into()),
                V::S(a_string(rng, 8, 16)),
                V::S("OE".into()),
                V::S(inputs::last_name(last)),
            ];
            v.extend(address(rng));
            let credit = if rng.random_range(0..10) == 0 {
                "BC"
            } else {
                "GC"
            };
            v.extend([
                V::S(n_string(rng, 16, 16)),
                V::I(now),
                V::S(credit.into()),
                V::I(5_000_000),
                V::I(rng.random_range(0..=5000)),
                V::I(-1000),
                V::I(1000),
                V::I(1),
                V::I(0),
                V::S(a_string(rng, 300, 500)),
            ]);
            row(s, v)
        })
}

fn order_lines<'a>(
    s: &'a Schema,
    plan: &'a [District],
    now: i64,
    rng: &'a mut SmallRng,
) -> impl Iterator<Item = Vec<u8>> + 'a {
    plan.iter()
        .flat_map(|p| {
            (1..=ORDERS).flat_map(move |o| {
                (1..=p.orders[o as usize - 1].lines).map(move |n| (p.w, p.d, o, n))
            })
        })
        .map(move |(w, d, o, n)| {
            let delivered = o < FIRST_NEW_ORDER;
            let v = vec![
                V::I(keys::order_line(w, d, o, n)),
                V::I(o.into()),
                V::I(d.into()),
                V::I(w.into()),
                V::I(n.into()),
                V::I(rng.random_range(1..=ITEMS).into()),
                V::I(w.into()),
                V::I(if delivered { now } else { 0 }),
                V::I(5),
                V::I(if delivered {
                    0
                } else {
                    rng.random_range(1..=999_999)
                }),
                V::S(a_string(rng, 24, 24)),
            ];
            row(s, v)
        })
}
