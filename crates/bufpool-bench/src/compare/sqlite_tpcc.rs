//! TPC-C on SQLite, for `bufpool compare --workload tpcc`: the nine tables of clause 1.3
//! in SQL, loaded with the cardinalities and random-data rules of `init --workload tpcc`
//! (`crate::tpcc::load`), the five transactions as the specification's SQL with prepared
//! (cached) statements, and the consistency conditions 1 to 4 checked after the run;
//! with the settings of `sqlite.rs` (WAL, FULL or NORMAL, the pool as each connection's
//! cache, the counting busy handler).
//!
//! Tables: rowid tables whose PRIMARY KEYs are the specification's composite keys (SQLite
//! keeps each in an index beside the table, as bufpool keeps its keys beside the heap;
//! `warehouse` and `item`, keyed by one integer, are clustered on it), and the two
//! secondary indexes the transactions need: customers by (w, d, last, first) and orders by
//! (w, d, customer, order). Money is in cents, rates in 1/10,000 and dates in microseconds
//! since the Unix epoch, as `crate::tpcc::inputs` draws them; an undelivered order's
//! carrier and its lines' delivery date are SQL's NULL.
//!
//! The run: each client is a terminal with home warehouse `client % W + 1` that draws the
//! mix with [`Kind::pick`] and each transaction's input with [`Terminal`], under the run's
//! NURand constants (drawn from the run's seed beside the load's). New-Order, Payment and
//! Delivery run in `BEGIN IMMEDIATE` .. `COMMIT` (SQLite has one writer: they queue for the
//! lock at the start); Order-Status and Stock-Level only read, in a deferred `BEGIN`. A
//! New-Order that asks for the unused item finds no such item, ends with `ROLLBACK`, and
//! counts as done (TPC-C's business outcome), as bufpool's does. Each transaction does the
//! work of its engine-call twin in `crate::tpcc::txns`.
//!
//! Locks: SQLite's own, one writer at a time (the write lock held from `BEGIN IMMEDIATE`
//! to `COMMIT` or `ROLLBACK`) and readers on their WAL snapshot; a transaction whose busy
//! handler gives up is rolled back and counted failed, as in `sqlite.rs`. Invariant: after
//! the load and after every run, conditions 1 to 4 of clause 3.3.2 hold ([`check`], which
//! `compare` runs after SQLite's run and fails on).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rusqlite::{params, Connection, OptionalExtension, Params, Transaction};
use serde::Serialize;
use serde_json::json;

use super::sqlite::{configure, open_file, remove_db_files, run_clients};
use super::sqlite::{ClientOut, Running, Schedule, SqliteOptions, SqliteRun};
use crate::tpcc::inputs::{a_string, data_original, last_name, n_string, now_micros, zip};
use crate::tpcc::inputs::{Constants, CustomerBy, Kind, Line, Terminal};
use crate::tpcc::inputs::{DeliveryIn, NewOrderIn, OrderStatusIn, PaymentIn, StockLevelIn};
use crate::tpcc::inputs::{CUSTOMERS, DISTRICTS, FIRST_NEW_ORDER, ITEMS, ORDERS};
use crate::tpcc::load::{load_constants, MAX_WAREHOUSES};
use crate::tpcc::outcome::TpccCounts;

/// The database file in the run's directory.
pub const DB_FILE: &str = "tpcc.sqlite";

/// The seed of the load's rows (the load's NURand constants are `load_constants()`, the
/// same as bufpool's).
const ROW_SEED: u64 = 0x7c_5a1e;
/// Mixed into the run's seed for the run's NURand constants.
const RUN_CONSTANT_SEED: u64 = 0x7cc;
/// Prepared statements each connection keeps: the five transactions use about 45
/// (New-Order's stock query is one per district's `s_dist_NN`); rusqlite's default of 16
/// would re-prepare them in turn.
const STATEMENT_CACHE: usize = 64;
/// `c_data`'s width (clause 1.3: varchar(500)); Payment's bad-credit history is cut to it.
const C_DATA_LEN: usize = 500;

/// The nine tables (clause 1.3), each with its primary key.
const TABLES: &str = "
CREATE TABLE warehouse (
  w_id INTEGER NOT NULL, w_name VARCHAR(10), w_street_1 VARCHAR(20), w_street_2 VARCHAR(20),
  w_city VARCHAR(20), w_state CHAR(2), w_zip CHAR(9), w_tax INTEGER, w_ytd INTEGER,
  PRIMARY KEY (w_id));
CREATE TABLE district (
  d_id INTEGER NOT NULL, d_w_id INTEGER NOT NULL, d_name VARCHAR(10), d_street_1 VARCHAR(20),
  d_street_2 VARCHAR(20), d_city VARCHAR(20), d_state CHAR(2), d_zip CHAR(9), d_tax INTEGER,
  d_ytd INTEGER, d_next_o_id INTEGER,
  PRIMARY KEY (d_w_id, d_id));
CREATE TABLE customer (
  c_id INTEGER NOT NULL, c_d_id INTEGER NOT NULL, c_w_id INTEGER NOT NULL,
  c_first VARCHAR(16), c_middle CHAR(2), c_last VARCHAR(16), c_street_1 VARCHAR(20),
  c_street_2 VARCHAR(20), c_city VARCHAR(20), c_state CHAR(2), c_zip CHAR(9),
  c_phone CHAR(16), c_since INTEGER, c_credit CHAR(2), c_credit_lim INTEGER,
  c_discount INTEGER, c_balance INTEGER, c_ytd_payment INTEGER, c_payment_cnt INTEGER,
  c_delivery_cnt INTEGER, c_data VARCHAR(500),
  PRIMARY KEY (c_w_id, c_d_id, c_id));
CREATE TABLE history (
  h_c_id INTEGER, h_c_d_id INTEGER, h_c_w_id INTEGER, h_d_id INTEGER, h_w_id INTEGER,
  h_date INTEGER, h_amount INTEGER, h_data VARCHAR(24));
CREATE TABLE new_order (
  no_o_id INTEGER NOT NULL, no_d_id INTEGER NOT NULL, no_w_id INTEGER NOT NULL,
  PRIMARY KEY (no_w_id, no_d_id, no_o_id));
CREATE TABLE orders (
  o_id INTEGER NOT NULL, o_d_id INTEGER NOT NULL, o_w_id INTEGER NOT NULL, o_c_id INTEGER,
  o_entry_d INTEGER, o_carrier_id INTEGER, o_ol_cnt INTEGER, o_all_local INTEGER,
  PRIMARY KEY (o_w_id, o_d_id, o_id));
CREATE TABLE order_line (
  ol_o_id INTEGER NOT NULL, ol_d_id INTEGER NOT NULL, ol_w_id INTEGER NOT NULL,
  ol_number INTEGER NOT NULL, ol_i_id INTEGER, ol_supply_w_id INTEGER,
  ol_delivery_d INTEGER, ol_quantity INTEGER, ol_amount INTEGER, ol_dist_info CHAR(24),
  PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number));
CREATE TABLE item (
  i_id INTEGER NOT NULL, i_im_id INTEGER, i_name VARCHAR(24), i_price INTEGER,
  i_data VARCHAR(50),
  PRIMARY KEY (i_id));
CREATE TABLE stock (
  s_i_id INTEGER NOT NULL, s_w_id INTEGER NOT NULL, s_quantity INTEGER,
  s_dist_01 CHAR(24), s_dist_02 CHAR(24), s_dist_03 CHAR(24), s_dist_04 CHAR(24),
  s_dist_05 CHAR(24), s_dist_06 CHAR(24), s_dist_07 CHAR(24), s_dist_08 CHAR(24),
  s_dist_09 CHAR(24), s_dist_10 CHAR(24), s_ytd INTEGER, s_order_cnt INTEGER,
  s_remote_cnt INTEGER, s_data VARCHAR(50),
  PRIMARY KEY (s_w_id, s_i_id));
";

/// The secondary indexes, built after the rows are in.
const INDEXES: &str = "
CREATE INDEX customer_last ON customer (c_w_id, c_d_id, c_last, c_first);
CREATE INDEX orders_customer ON orders (o_w_id, o_d_id, o_c_id, o_id);
";

/// Runs the cached statement `sql` with `p`: the rows it changed.
fn exec(db: &Connection, sql: &str, p: impl Params) -> rusqlite::Result<usize> {
    db.prepare_cached(sql)?.execute(p)
}

/// Creates TPC-C's tables with `warehouses` warehouses as clause 4.3.3.1 says (see
/// `crate::tpcc::load`) in one transaction, builds the secondary indexes, then a WAL
/// checkpoint. Replaces any database already in `dir`.
pub fn load(dir: &Path, warehouses: u32) -> Result<()> {
    ensure!(
        (1..=MAX_WAREHOUSES).contains(&warehouses),
        "--warehouses must be 1 to {MAX_WAREHOUSES}"
    );
    remove_db_files(dir, DB_FILE)?;
    let mut db = open_file(dir, DB_FILE)?;
    db.pragma_update(None, "journal_mode", "WAL")?;
    db.pragma_update(None, "synchronous", "NORMAL")?;
    db.execute_batch(TABLES)?;
    let k = load_constants();
    let now = now_micros();
    let mut rng = SmallRng::seed_from_u64(ROW_SEED);
    let tx = db.transaction()?;
    load_items(&tx, &mut rng)?;
    for w in 1..=warehouses {
        load_warehouse(&tx, w, &mut rng)?;
        for d in 1..=DISTRICTS {
            load_customers(&tx, (w, d), &k, now, &mut rng)?;
            load_orders(&tx, (w, d), now, &mut rng)?;
        }
    }
    tx.commit()?;
    db.execute_batch(INDEXES)?;
    db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
    db.close().map_err(|(_, e)| e)?;
    Ok(())
}

/// An address's five columns: street 1 and 2, city, state, zip (clause 4.3.3.1).
fn address(rng: &mut SmallRng) -> [String; 5] {
    [
        a_string(rng, 10, 20),
        a_string(rng, 10, 20),
        a_string(rng, 10, 20),
        a_string(rng, 2, 2),
        zip(rng),
    ]
}

/// The 100,000 items.
fn load_items(tx: &Transaction<'_>, rng: &mut SmallRng) -> rusqlite::Result<()> {
    let mut ins = tx.prepare_cached("INSERT INTO item VALUES (?1, ?2, ?3, ?4, ?5)")?;
    for i in 1..=ITEMS {
        let im = rng.random_range(1..=10_000);
        let name = a_string(rng, 14, 24);
        let price: i64 = rng.random_range(100..=10_000);
        ins.execute(params![i, im, name, price, data_original(rng)])?;
    }
    Ok(())
}

/// Warehouse `w`: its row, its 100,000 stock rows and its ten districts.
fn load_warehouse(tx: &Transaction<'_>, w: u32, rng: &mut SmallRng) -> rusqlite::Result<()> {
    let [s1, s2, city, state, zip] = address(rng);
    let tax: i64 = rng.random_range(0..=2000);
    tx.prepare_cached("INSERT INTO warehouse VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")?
        .execute(params![
            w,
            a_string(rng, 6, 10),
            s1,
            s2,
            city,
            state,
            zip,
            tax,
            30_000_000i64
        ])?;
    let mut stock = tx.prepare_cached(
        "INSERT INTO stock VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, \
         0, 0, 0, ?14)",
    )?;
    for i in 1..=ITEMS {
        let q: i64 = rng.random_range(10..=100);
        let dist: [String; 10] = std::array::from_fn(|_| a_string(rng, 24, 24));
        let [d1, d2, d3, d4, d5, d6, d7, d8, d9, d10] = &dist;
        stock.execute(params![
            i,
            w,
            q,
            d1,
            d2,
            d3,
            d4,
            d5,
            d6,
            d7,
            d8,
            d9,
            d10,
            data_original(rng)
        ])?;
    }
    let mut district = tx.prepare_cached(
        "INSERT INTO district VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 3000000, ?10)",
    )?;
    for d in 1..=DISTRICTS {
        let name = a_string(rng, 6, 10);
        let [s1, s2, city, state, zip] = address(rng);
        let tax: i64 = rng.random_range(0..=2000);
        district.execute(params![
            d,
            w,
            name,
            s1,
            s2,
            city,
            state,
            zip,
            tax,
            ORDERS + 1
        ])?;
    }
    Ok(())
}

/// District (`w`, `d`)'s 3,000 customers (the first 1,000 with last names 0 to 999 in
/// turn, the others by NURand under the load's constants `k`), each with a history row.
fn load_customers(
    tx: &Transaction<'_>,
    (w, d): (u32, u32),
    k: &Constants,
    now: i64,
    rng: &mut SmallRng,
) -> rusqlite::Result<()> {
    let mut customer = tx.prepare_cached(
        "INSERT INTO customer VALUES (?1, ?2, ?3, ?4, 'OE', ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, \
         ?13, 5000000, ?14, -1000, 1000, 1, 0, ?15)",
    )?;
    let mut history =
        tx.prepare_cached("INSERT INTO history VALUES (?1, ?2, ?3, ?2, ?3, ?4, 1000, ?5)")?;
    for c in 1..=CUSTOMERS {
        let last = if c <= 1000 {
            c - 1
        } else {
            crate::tpcc::inputs::last_name_number(rng, k)
        };
        let first = a_string(rng, 8, 16);
        let [s1, s2, city, state, zip] = address(rng);
        let credit = if rng.random_range(0..10) == 0 {
            "BC"
        } else {
            "GC"
        };
        let phone = n_string(rng, 16, 16);
        let discount: i64 = rng.random_range(0..=5000);
        let data = a_string(rng, 300, 500);
        customer.execute(params![
            c,
            d,
            w,
            first,
            last_name(last),
            s1,
            s2,
            city,
            state,
            zip,
            phone,
            now,
            credit,
            discount,
            data
        ])?;
        history.execute(params![c, d, w, now, a_string(rng, 12, 24)])?;
    }
    Ok(())
}

/// District (`w`, `d`)'s 3,000 orders (customers in a random permutation, 5 to 15 lines
/// each), the last 900 undelivered with a new-order row.
fn load_orders(
    tx: &Transaction<'_>,
    (w, d): (u32, u32),
    now: i64,
    rng: &mut SmallRng,
) -> rusqlite::Result<()> {
    use rand::seq::SliceRandom;
    let mut customers: Vec<u32> = (1..=CUSTOMERS).collect();
    customers.shuffle(rng);
    let mut order =
        tx.prepare_cached("INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1)")?;
    let mut line =
        tx.prepare_cached("INSERT INTO order_line VALUES (?1, ?2, ?3, ?4, ?5, ?3, ?6, 5, ?7, ?8)")?;
    let mut new_order = tx.prepare_cached("INSERT INTO new_order VALUES (?1, ?2, ?3)")?;
    for o in 1..=ORDERS {
        let delivered = o < FIRST_NEW_ORDER;
        let carrier: Option<u32> = delivered.then(|| rng.random_range(1..=10));
        let lines: u32 = rng.random_range(5..=15);
        let c = customers[o as usize - 1];
        order.execute(params![o, d, w, c, now, carrier, lines])?;
        for n in 1..=lines {
            let item = rng.random_range(1..=ITEMS);
            let (date, amount): (Option<i64>, i64) = if delivered {
                (Some(now), 0)
            } else {
                (None, rng.random_range(1..=999_999))
            };
            line.execute(params![
                o,
                d,
                w,
                n,
                item,
                date,
                amount,
                a_string(rng, 24, 24)
            ])?;
        }
        if !delivered {
            new_order.execute(params![o, d, w])?;
        }
    }
    Ok(())
}

/// A TPC-C run on SQLite: the common figures and what its transactions did.
pub struct TpccRun {
    pub run: SqliteRun,
    pub warehouses: u32,
    pub counts: TpccCounts,
}

impl TpccRun {
    /// The run as `sqlite-tpcb run` writes it: SQLite's run (as TPC-B's and YCSB's) with
    /// a `tpcc` object beside it ([`counts_json`]).
    pub fn to_json(&self) -> Result<serde_json::Value> {
        let mut v = serde_json::to_value(&self.run)?;
        v["tpcc"] = counts_json(self.warehouses, &self.counts, self.run.result.duration_s);
        Ok(v)
    }
}

/// A TPC-C run's own figures, in the shape of `bufpool bench --json`'s `tpcc` object: its
/// warehouses, transactions done by kind (committed, or a New-Order rolled back on its
/// unused item), New-Orders placed per minute (tpmC, without keying and think times),
/// New-Orders rolled back, orders delivered, districts a Delivery found with nothing to
/// deliver, and Payments and Order-Statuses by last name.
pub fn counts_json(warehouses: u32, c: &TpccCounts, seconds: f64) -> serde_json::Value {
    let done: serde_json::Map<String, serde_json::Value> = Kind::ALL
        .iter()
        .map(|&k| (k.name().to_string(), json!(c.of(k))))
        .collect();
    let per_minute = if seconds > 0.0 {
        c.new_orders_placed() as f64 * 60.0 / seconds
    } else {
        0.0
    };
    json!({
        "warehouses": warehouses,
        "transactions": done,
        "new_orders_per_minute": per_minute,
        "new_orders_rolled_back": c.rolled_back,
        "orders_delivered": c.delivered,
        "delivery_districts_empty": c.districts_empty,
        "customers_by_last_name": c.by_last_name,
    })
}

/// The mix as a run's mode, as `bufpool bench` names it: each transaction's built-in
/// script with its weight (`tpcc-new-order@45 tpcc-payment@43 ..`).
pub fn mix_label() -> String {
    Kind::ALL
        .iter()
        .map(|&k| format!("{}@{}", crate::tpcc::run::mode_of(k).name(), k.percent()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs TPC-C's mix on the loaded database.
pub fn run(o: &SqliteOptions, stop: &AtomicBool) -> Result<TpccRun> {
    let warehouses: i64 = {
        let db = open_file(&o.dir, DB_FILE)?;
        db.query_row("SELECT count(*) FROM warehouse", [], |r| r.get(0))
            .context("counting warehouses (was the SQLite database loaded with TPC-C's tables?)")?
    };
    ensure!(
        warehouses >= 1,
        "the SQLite TPC-C database has no warehouses: load it first"
    );
    let warehouses = warehouses as u32;
    let k = Constants::for_run(
        &load_constants(),
        &mut SmallRng::seed_from_u64(o.seed ^ RUN_CONSTANT_SEED),
    );
    let totals = Mutex::new(TpccCounts::default());
    let mode = mix_label();
    let mut run = run_clients(
        o,
        DB_FILE,
        (mode.as_str(), warehouses),
        |id, start, running| {
            let terminal = Terminal {
                home: id % warehouses + 1,
                warehouses,
                k,
            };
            let (out, counts) = client(o, terminal, id, (start, stop), running)?;
            totals.lock().expect("counts lock").merge(&counts);
            Ok(out)
        },
    )?;
    run.result
        .config
        .insert("warehouses".into(), warehouses.to_string());
    let counts = *totals.lock().expect("counts lock");
    Ok(TpccRun {
        run,
        warehouses,
        counts,
    })
}

/// One client, terminal `t`: its own connection, TPC-C's mix back to back until the run's
/// time is up or `stop` is set.
fn client(
    o: &SqliteOptions,
    t: Terminal,
    id: u32,
    (start, stop): (Instant, &AtomicBool),
    running: &Running,
) -> Result<(ClientOut, TpccCounts)> {
    let db = open_file(&o.dir, DB_FILE)?;
    configure(&db, o)?;
    db.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    let mut rng = SmallRng::seed_from_u64(o.seed ^ (u64::from(id) << 32));
    let mut out = ClientOut::new();
    let mut counts = TpccCounts::default();
    let mut schedule = Schedule::new(o, start);
    while start.elapsed() < o.duration && !stop.load(Ordering::Relaxed) {
        let kind = Kind::pick(rng.random_range(0..100));
        let t0 = schedule.wait(&mut rng);
        let r = transaction(&db, &t, kind, &mut rng, &mut counts);
        out.book(&db, (start, t0), r, running)
            .with_context(|| format!("SQLite TPC-C {}", kind.name()))?;
    }
    out.take_busy();
    Ok((out, counts))
}

/// One transaction of `kind`, its input drawn by terminal `t`; what it did goes to `c`
/// once it has ended (committed, or a New-Order rolled back on its unused item).
fn transaction(
    db: &Connection,
    t: &Terminal,
    kind: Kind,
    rng: &mut SmallRng,
    c: &mut TpccCounts,
) -> rusqlite::Result<()> {
    let now = now_micros();
    let by_last = |b: CustomerBy| u64::from(matches!(b, CustomerBy::Last(_)));
    match kind {
        Kind::NewOrder => {
            let i = t.new_order(rng);
            let placed = new_order(db, &i, now)?;
            debug_assert_eq!(placed, !i.rolls_back(), "{i:?}");
            c.rolled_back += u64::from(!placed);
        }
        Kind::Payment => {
            let i = t.payment(rng);
            payment(db, &i, now)?;
            c.by_last_name += by_last(i.customer);
        }
        Kind::OrderStatus => {
            let i = t.order_status(rng);
            order_status(db, &i)?;
            c.by_last_name += by_last(i.customer);
        }
        Kind::Delivery => {
            let delivered = delivery(db, &t.delivery(rng), now)?;
            c.delivered += u64::from(delivered);
            c.districts_empty += u64::from(DISTRICTS - delivered);
        }
        Kind::StockLevel => {
            stock_level(db, &t.stock_level(rng))?;
        }
    }
    c.done[kind.index()] += 1;
    Ok(())
}

/// New-Order (clause 2.4.2): whether it placed the order (false: an item was not there,
/// and the transaction rolled back).
fn new_order(db: &Connection, i: &NewOrderIn, now: i64) -> rusqlite::Result<bool> {
    exec(db, "BEGIN IMMEDIATE", [])?;
    let w_tax: i64 = db
        .prepare_cached("SELECT w_tax FROM warehouse WHERE w_id = ?1")?
        .query_row(params![i.w], |r| r.get(0))?;
    let (discount, _last, _credit): (i64, String, String) = db
        .prepare_cached(
            "SELECT c_discount, c_last, c_credit FROM customer \
             WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
        )?
        .query_row(params![i.w, i.d, i.c], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    let (o_id, d_tax): (i64, i64) = db
        .prepare_cached("SELECT d_next_o_id, d_tax FROM district WHERE d_w_id = ?1 AND d_id = ?2")?
        .query_row(params![i.w, i.d], |r| Ok((r.get(0)?, r.get(1)?)))?;
    exec(
        db,
        "UPDATE district SET d_next_o_id = ?1 WHERE d_w_id = ?2 AND d_id = ?3",
        params![o_id + 1, i.w, i.d],
    )?;
    exec(
        db,
        "INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, \
         o_all_local) VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6, ?7)",
        params![
            o_id,
            i.d,
            i.w,
            i.c,
            now,
            i.lines.len() as i64,
            i.all_local()
        ],
    )?;
    exec(
        db,
        "INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES (?1, ?2, ?3)",
        params![o_id, i.d, i.w],
    )?;
    let mut sum = 0i64;
    for (n, line) in i.lines.iter().enumerate() {
        let Some(amount) = order_line(db, i, o_id, n as u32 + 1, line)? else {
            exec(db, "ROLLBACK", [])?;
            return Ok(false);
        };
        sum += amount;
    }
    exec(db, "COMMIT", [])?;
    // sum * (1 - discount) * (1 + w_tax + d_tax), rates in 1/10,000: what the terminal
    // would show.
    let _total_cents =
        i128::from(sum) * i128::from(10_000 - discount) * i128::from(10_000 + w_tax + d_tax)
            / 100_000_000;
    Ok(true)
}

/// One line of New-Order: the item, the stock's update, the line's insert. The line's
/// amount, or None if the item is not there.
fn order_line(
    db: &Connection,
    i: &NewOrderIn,
    o_id: i64,
    number: u32,
    line: &Line,
) -> rusqlite::Result<Option<i64>> {
    let item: Option<(i64, String, String)> = db
        .prepare_cached("SELECT i_price, i_name, i_data FROM item WHERE i_id = ?1")?
        .query_row(params![line.item], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    let Some((price, _name, i_data)) = item else {
        return Ok(None);
    };
    let (have, dist_info, s_data): (i64, String, String) = db
        .prepare_cached(&format!(
            "SELECT s_quantity, s_dist_{:02}, s_data FROM stock WHERE s_w_id = ?1 AND s_i_id = ?2",
            i.d
        ))?
        .query_row(params![line.supply_w, line.item], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    let q = i64::from(line.quantity);
    let left = if have >= q + 10 {
        have - q
    } else {
        have - q + 91
    };
    exec(
        db,
        "UPDATE stock SET s_quantity = ?1, s_ytd = s_ytd + ?2, s_order_cnt = s_order_cnt + 1, \
         s_remote_cnt = s_remote_cnt + ?3 WHERE s_w_id = ?4 AND s_i_id = ?5",
        params![left, q, line.supply_w != i.w, line.supply_w, line.item],
    )?;
    // The brand-generic flag the terminal would show (clause 2.4.2.2).
    let _brand = if i_data.contains("ORIGINAL") && s_data.contains("ORIGINAL") {
        'B'
    } else {
        'G'
    };
    let amount = q * price;
    exec(
        db,
        "INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, \
         ol_delivery_d, ol_quantity, ol_amount, ol_dist_info) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7, ?8, ?9)",
        params![
            o_id,
            i.d,
            i.w,
            number,
            line.item,
            line.supply_w,
            q,
            amount,
            dist_info
        ],
    )?;
    Ok(Some(amount))
}

/// The id of the customer `by` names in district (`w`, `d`): by last name, the one at
/// position n/2 rounded up of those with it ordered by first name (clause 2.5.2.2);
/// `QueryReturnedNoRows` if nobody has it.
fn customer_id(db: &Connection, w: u32, d: u32, by: CustomerBy) -> rusqlite::Result<u32> {
    let n = match by {
        CustomerBy::Id(c) => return Ok(c),
        CustomerBy::Last(n) => n,
    };
    let ids: Vec<u32> = db
        .prepare_cached(
            "SELECT c_id FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_last = ?3 \
             ORDER BY c_first",
        )?
        .query_map(params![w, d, last_name(n)], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    match ids.len() {
        0 => Err(rusqlite::Error::QueryReturnedNoRows),
        len => Ok(ids[len.div_ceil(2) - 1]),
    }
}

/// Payment (clause 2.5.2).
fn payment(db: &Connection, i: &PaymentIn, now: i64) -> rusqlite::Result<()> {
    let a = i.amount_cents;
    exec(db, "BEGIN IMMEDIATE", [])?;
    exec(
        db,
        "UPDATE warehouse SET w_ytd = w_ytd + ?1 WHERE w_id = ?2",
        params![a, i.w],
    )?;
    let w_name: String = db
        .prepare_cached(
            "SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip FROM warehouse \
             WHERE w_id = ?1",
        )?
        .query_row(params![i.w], |r| r.get(0))?;
    exec(
        db,
        "UPDATE district SET d_ytd = d_ytd + ?1 WHERE d_w_id = ?2 AND d_id = ?3",
        params![a, i.w, i.d],
    )?;
    let d_name: String = db
        .prepare_cached(
            "SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip FROM district \
             WHERE d_w_id = ?1 AND d_id = ?2",
        )?
        .query_row(params![i.w, i.d], |r| r.get(0))?;
    let c = customer_id(db, i.c_w, i.c_d, i.customer)?;
    let key = params![i.c_w, i.c_d, c];
    let credit: String = db
        .prepare_cached(
            "SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, \
             c_phone, c_since, c_credit, c_credit_lim, c_discount, c_balance FROM customer \
             WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
        )?
        .query_row(key, |r| r.get(10))?;
    exec(
        db,
        "UPDATE customer SET c_balance = c_balance - ?1, c_ytd_payment = c_ytd_payment + ?1, \
         c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = ?2 AND c_d_id = ?3 AND c_id = ?4",
        params![a, i.c_w, i.c_d, c],
    )?;
    if credit == "BC" {
        let old: String = db
            .prepare_cached(
                "SELECT c_data FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
            )?
            .query_row(key, |r| r.get(0))?;
        let data: String = (i.bad_credit_note(c) + &old)
            .chars()
            .take(C_DATA_LEN)
            .collect();
        exec(
            db,
            "UPDATE customer SET c_data = ?1 WHERE c_w_id = ?2 AND c_d_id = ?3 AND c_id = ?4",
            params![data, i.c_w, i.c_d, c],
        )?;
    }
    exec(
        db,
        "INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, \
         h_data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            c,
            i.c_d,
            i.c_w,
            i.d,
            i.w,
            now,
            a,
            format!("{w_name}    {d_name}")
        ],
    )?;
    exec(db, "COMMIT", [])?;
    Ok(())
}

/// Order-Status (clause 2.6.2): reads only. The lines of the customer's newest order.
fn order_status(db: &Connection, i: &OrderStatusIn) -> rusqlite::Result<u32> {
    exec(db, "BEGIN", [])?;
    let c = customer_id(db, i.w, i.d, i.customer)?;
    let _balance: i64 = db
        .prepare_cached(
            "SELECT c_balance, c_first, c_middle, c_last FROM customer \
             WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
        )?
        .query_row(params![i.w, i.d, c], |r| r.get(0))?;
    let o_id: i64 = db
        .prepare_cached(
            "SELECT o_id, o_entry_d, o_carrier_id FROM orders \
             WHERE o_w_id = ?1 AND o_d_id = ?2 AND o_c_id = ?3 ORDER BY o_id DESC LIMIT 1",
        )?
        .query_row(params![i.w, i.d, c], |r| r.get(0))?;
    let mut stmt = db.prepare_cached(
        "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line \
         WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id = ?3",
    )?;
    let mut rows = stmt.query(params![i.w, i.d, o_id])?;
    let mut lines = 0;
    while let Some(r) = rows.next()? {
        let _amount: i64 = r.get(3)?;
        lines += 1;
    }
    drop(rows);
    exec(db, "COMMIT", [])?;
    Ok(lines)
}

/// Delivery (clause 2.7.4): for each district, the oldest undelivered order is delivered
/// (its new-order row deleted, its carrier set, its lines dated, its customer credited).
/// The orders delivered.
fn delivery(db: &Connection, i: &DeliveryIn, now: i64) -> rusqlite::Result<u32> {
    exec(db, "BEGIN IMMEDIATE", [])?;
    let mut delivered = 0;
    for d in 1..=DISTRICTS {
        let oldest: Option<i64> = db
            .prepare_cached(
                "SELECT no_o_id FROM new_order WHERE no_w_id = ?1 AND no_d_id = ?2 \
                 ORDER BY no_o_id LIMIT 1",
            )?
            .query_row(params![i.w, d], |r| r.get(0))
            .optional()?;
        let Some(o) = oldest else {
            continue;
        };
        let order = params![i.w, d, o];
        exec(
            db,
            "DELETE FROM new_order WHERE no_w_id = ?1 AND no_d_id = ?2 AND no_o_id = ?3",
            order,
        )?;
        let c: i64 = db
            .prepare_cached(
                "SELECT o_c_id FROM orders WHERE o_w_id = ?1 AND o_d_id = ?2 AND o_id = ?3",
            )?
            .query_row(order, |r| r.get(0))?;
        exec(
            db,
            "UPDATE orders SET o_carrier_id = ?1 WHERE o_w_id = ?2 AND o_d_id = ?3 AND o_id = ?4",
            params![i.carrier, i.w, d, o],
        )?;
        exec(
            db,
            "UPDATE order_line SET ol_delivery_d = ?1 \
             WHERE ol_w_id = ?2 AND ol_d_id = ?3 AND ol_o_id = ?4",
            params![now, i.w, d, o],
        )?;
        let sum: i64 = db
            .prepare_cached(
                "SELECT coalesce(sum(ol_amount), 0) FROM order_line \
                 WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id = ?3",
            )?
            .query_row(order, |r| r.get(0))?;
        exec(
            db,
            "UPDATE customer SET c_balance = c_balance + ?1, c_delivery_cnt = c_delivery_cnt + 1 \
             WHERE c_w_id = ?2 AND c_d_id = ?3 AND c_id = ?4",
            params![sum, i.w, d, c],
        )?;
        delivered += 1;
    }
    exec(db, "COMMIT", [])?;
    Ok(delivered)
}

/// Stock-Level (clause 2.8.2): reads only. Distinct items of the district's last 20
/// orders whose stock is below the threshold.
fn stock_level(db: &Connection, i: &StockLevelIn) -> rusqlite::Result<u32> {
    exec(db, "BEGIN", [])?;
    let next: i64 = db
        .prepare_cached("SELECT d_next_o_id FROM district WHERE d_w_id = ?1 AND d_id = ?2")?
        .query_row(params![i.w, i.d], |r| r.get(0))?;
    let low: u32 = db
        .prepare_cached(
            "SELECT count(DISTINCT s_i_id) FROM order_line, stock \
             WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id < ?3 AND ol_o_id >= ?4 \
             AND s_w_id = ?1 AND s_i_id = ol_i_id AND s_quantity < ?5",
        )?
        .query_row(params![i.w, i.d, next, next - 20, i.threshold], |r| {
            r.get(0)
        })?;
    exec(db, "COMMIT", [])?;
    Ok(low)
}

/// What the check counted in a consistent database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Checked {
    pub warehouses: i64,
    pub orders: i64,
    pub new_orders: i64,
    pub order_lines: i64,
}

/// Checks the loaded-and-run database as `bufpool check` checks bufpool's TPC-C: the
/// consistency conditions 1 to 4 of clause 3.3.2; an error listing each broken one.
pub fn check(dir: &Path) -> Result<Checked> {
    let db = open_file(dir, DB_FILE)?;
    let problems = problems(&db)?;
    ensure!(
        problems.is_empty(),
        "SQLite TPC-C database breaks {} consistency condition(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
    let count = |table: &str| -> Result<i64> {
        Ok(db.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?)
    };
    Ok(Checked {
        warehouses: count("warehouse")?,
        orders: count("orders")?,
        new_orders: count("new_order")?,
        order_lines: count("order_line")?,
    })
}

/// The consistency conditions broken in `db`, per warehouse or district:
/// 1. `w_ytd` = sum(`d_ytd`) over the warehouse's districts;
/// 2. `d_next_o_id` - 1 = max(`o_id`) = max(`no_o_id`) (the last where new-order rows are);
/// 3. max(`no_o_id`) - min(`no_o_id`) + 1 = the district's new-order rows;
/// 4. sum(`o_ol_cnt`) = the district's order-line rows.
fn problems(db: &Connection) -> Result<Vec<String>> {
    let mut p = Vec::new();
    let mut stmt = db.prepare(
        "SELECT w_id, w_ytd, (SELECT coalesce(sum(d_ytd), 0) FROM district WHERE d_w_id = w_id) \
         FROM warehouse ORDER BY w_id",
    )?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let (w, ytd, sum): (i64, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?);
        if ytd != sum {
            p.push(format!(
                "condition 1, warehouse {w}: w_ytd {ytd} != sum(d_ytd) {sum}"
            ));
        }
    }
    let mut stmt = db.prepare(
        "SELECT d_w_id, d_id, d_next_o_id - 1,
           (SELECT coalesce(max(o_id), 0) FROM orders WHERE o_w_id = d_w_id AND o_d_id = d_id),
           (SELECT max(no_o_id) FROM new_order WHERE no_w_id = d_w_id AND no_d_id = d_id),
           (SELECT min(no_o_id) FROM new_order WHERE no_w_id = d_w_id AND no_d_id = d_id),
           (SELECT count(*) FROM new_order WHERE no_w_id = d_w_id AND no_d_id = d_id),
           (SELECT coalesce(sum(o_ol_cnt), 0) FROM orders WHERE o_w_id = d_w_id AND o_d_id = d_id),
           (SELECT count(*) FROM order_line WHERE ol_w_id = d_w_id AND ol_d_id = d_id)
         FROM district ORDER BY d_w_id, d_id",
    )?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let (w, d): (i64, i64) = (r.get(0)?, r.get(1)?);
        let (next_less_1, max_o): (i64, i64) = (r.get(2)?, r.get(3)?);
        let (no_max, no_min, no_count): (Option<i64>, Option<i64>, i64) =
            (r.get(4)?, r.get(5)?, r.get(6)?);
        let (ol_cnt, lines): (i64, i64) = (r.get(7)?, r.get(8)?);
        let at = format!("district ({w}, {d})");
        if next_less_1 != max_o || no_max.is_some_and(|m| m != max_o) {
            let no_max = no_max.map_or("none".to_string(), |m| m.to_string());
            p.push(format!(
                "condition 2, {at}: d_next_o_id - 1 = {next_less_1}, max(o_id) = {max_o}, \
                 max(no_o_id) = {no_max}"
            ));
        }
        if let (Some(hi), Some(lo)) = (no_max, no_min) {
            if hi - lo + 1 != no_count {
                p.push(format!(
                    "condition 3, {at}: max(no_o_id) - min(no_o_id) + 1 = {}, {no_count} \
                     new-order rows",
                    hi - lo + 1
                ));
            }
        }
        if ol_cnt != lines {
            p.push(format!(
                "condition 4, {at}: sum(o_ol_cnt) = {ol_cnt}, {lines} order-line rows"
            ));
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::OnceLock;

    /// A database loaded with one warehouse, once for every test (the load takes a few
    /// seconds in a debug build); each test works on its own copy.
    fn loaded_copy() -> tempfile::TempDir {
        static LOADED: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
        let (_, file) = LOADED.get_or_init(|| {
            let d = tempfile::tempdir().unwrap();
            load(d.path(), 1).unwrap();
            let file = d.path().join(DB_FILE);
            (d, file)
        });
        let copy = tempfile::tempdir().unwrap();
        std::fs::copy(file, copy.path().join(DB_FILE)).unwrap();
        copy
    }

    fn count(db: &Connection, sql: &str) -> i64 {
        db.query_row(sql, [], |r| r.get(0)).unwrap()
    }

    /// Proves: the load makes clause 4.3.3.1's cardinalities (order lines as the orders'
    /// counts say), the first 1,000 customers of a district have the 1,000 last names in
    /// turn, one item in ten or so carries ORIGINAL, and the conditions hold as loaded.
    #[test]
    fn the_load_has_the_specs_cardinalities_and_is_consistent() {
        let d = loaded_copy();
        let db = open_file(d.path(), DB_FILE).unwrap();
        for (table, rows) in [
            ("warehouse", 1),
            ("district", 10),
            ("customer", 30_000),
            ("history", 30_000),
            ("orders", 30_000),
            ("new_order", 9_000),
            ("item", 100_000),
            ("stock", 100_000),
        ] {
            assert_eq!(
                count(&db, &format!("SELECT count(*) FROM {table}")),
                rows,
                "{table}"
            );
        }
        let lines = count(&db, "SELECT count(*) FROM order_line");
        assert_eq!(lines, count(&db, "SELECT sum(o_ol_cnt) FROM orders"));
        assert!((150_000..=450_000).contains(&lines), "{lines}");
        assert_eq!(
            count(
                &db,
                "SELECT count(DISTINCT c_last) FROM customer WHERE c_d_id = 3 AND c_id <= 1000"
            ),
            1000
        );
        let name: String = db
            .query_row(
                "SELECT c_last FROM customer WHERE c_w_id = 1 AND c_d_id = 1 AND c_id = 372",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(name, "PRICALLYOUGHT");
        let original = count(
            &db,
            "SELECT count(*) FROM item WHERE i_data LIKE '%ORIGINAL%'",
        );
        assert!((8_000..=12_000).contains(&original), "{original}");
        assert_eq!(
            count(
                &db,
                "SELECT count(*) FROM orders WHERE o_carrier_id IS NULL"
            ),
            9_000
        );
        let c = check(d.path()).unwrap();
        assert_eq!((c.warehouses, c.orders, c.new_orders), (1, 30_000, 9_000));
    }

    /// Proves: each transaction does its work (a New-Order asking for the unused item
    /// leaves no trace, a placed one adds its order, new-order row and lines; a Delivery
    /// takes the oldest new-order row of each district; a Payment moves the year-to-date
    /// figures and adds a history row; the read-only two find what the load made), and
    /// conditions 1 to 4 hold after every kind has run many times with the mix's draws.
    #[test]
    fn transactions_do_their_work_and_keep_the_conditions() {
        let d = loaded_copy();
        let db = open_file(d.path(), DB_FILE).unwrap();
        db.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let mut rng = SmallRng::seed_from_u64(11);
        let t = Terminal {
            home: 1,
            warehouses: 1,
            k: Constants::for_run(&load_constants(), &mut rng),
        };
        let orders = |db: &Connection| count(db, "SELECT count(*) FROM orders");
        let mut i = t.new_order(&mut rng);
        i.lines.last_mut().unwrap().item = crate::tpcc::inputs::UNUSED_ITEM;
        assert!(i.rolls_back());
        assert!(!new_order(&db, &i, 1).unwrap());
        assert_eq!(orders(&db), 30_000);
        let mut i = t.new_order(&mut rng);
        i.lines
            .retain(|l| l.item != crate::tpcc::inputs::UNUSED_ITEM);
        assert!(new_order(&db, &i, 1).unwrap());
        assert_eq!(orders(&db), 30_001);
        let lines = count(
            &db,
            &format!(
                "SELECT count(*) FROM order_line WHERE ol_w_id = 1 AND ol_d_id = {} \
                 AND ol_o_id = 3001",
                i.d
            ),
        );
        assert_eq!(lines, i.lines.len() as i64);
        assert_eq!(delivery(&db, &t.delivery(&mut rng), 1).unwrap(), 10);
        assert_eq!(count(&db, "SELECT count(*) FROM new_order"), 9_000 + 1 - 10);
        assert_eq!(count(&db, "SELECT min(no_o_id) FROM new_order"), 2102);
        let p = t.payment(&mut rng);
        payment(&db, &p, 1).unwrap();
        assert_eq!(
            count(&db, "SELECT w_ytd FROM warehouse"),
            30_000_000 + p.amount_cents
        );
        assert_eq!(count(&db, "SELECT count(*) FROM history"), 30_001);
        let lines = order_status(&db, &t.order_status(&mut rng)).unwrap();
        assert!((5..=15).contains(&lines), "{lines}");
        assert!(stock_level(&db, &t.stock_level(&mut rng)).unwrap() <= 300);

        let mut c = TpccCounts::default();
        for _ in 0..400 {
            let kind = Kind::pick(rng.random_range(0..100));
            transaction(&db, &t, kind, &mut rng, &mut c).unwrap();
        }
        assert_eq!(c.done.iter().sum::<u64>(), 400);
        assert!(c.done.iter().all(|&n| n > 0), "{c:?}");
        assert!(c.delivered > 0 && c.by_last_name > 0, "{c:?}");
        let checked = check(d.path()).unwrap();
        assert_eq!(
            checked.orders,
            30_001 + i64::try_from(c.new_orders_placed()).unwrap()
        );
    }

    /// Proves: the check reports each broken condition with its warehouse or district: a
    /// district's year-to-date moved alone (1), a district's next order number moved (2),
    /// a new-order row gone from the middle (3), an order line gone (4).
    #[test]
    fn the_check_reports_each_broken_condition() {
        let d = loaded_copy();
        let db = open_file(d.path(), DB_FILE).unwrap();
        db.execute_batch(
            "UPDATE district SET d_ytd = d_ytd + 100 WHERE d_w_id = 1 AND d_id = 3;
             UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = 1 AND d_id = 6;
             DELETE FROM new_order WHERE no_w_id = 1 AND no_d_id = 5 AND no_o_id = 2500;
             DELETE FROM order_line WHERE ol_w_id = 1 AND ol_d_id = 4 AND ol_o_id = 7
               AND ol_number = 1;",
        )
        .unwrap();
        let e = format!("{:#}", check(d.path()).unwrap_err());
        for needle in [
            "breaks 4 consistency condition(s)",
            "condition 1, warehouse 1",
            "condition 2, district (1, 6)",
            "condition 3, district (1, 5)",
            "condition 4, district (1, 4)",
        ] {
            assert!(e.contains(needle), "{needle}: {e}");
        }
    }

    /// Proves: the run's mode names the mix as `bufpool bench` does, with its weights.
    #[test]
    fn the_mix_label_names_each_script_with_its_weight() {
        assert_eq!(
            mix_label(),
            "tpcc-new-order@45 tpcc-payment@43 tpcc-order-status@4 tpcc-delivery@4 \
             tpcc-stock-level@4"
        );
    }
}
