//! pgbench's TPC-B-like database on the embedded engine: its four tables (same columns and
//! row widths as pgbench's), primary keys as B+trees, the initialization (`pgbench -i`),
//! the three built-in transactions, and the consistency check.
//!
//! Owns: the schema and the mapping from pgbench's SQL to heap and index calls. Rows are
//! named by the root tuple ids the primary keys store (see `bufpool::table::heap`).
//! Invariants kept by every transaction: sum(abalance) = sum(bbalance) = sum(tbalance) =
//! sum(history.delta); `check` verifies them, every page's checksum, and that each primary
//! key and its heap agree.
//! Tablespaces (`init --tablespaces`): the tables are dealt out round-robin over the
//! tablespaces given, largest first ([`BY_SIZE`]), each primary key with its table.
//!
//! The folder is the TPC-B workload over the client driver (`driver/`, which knows no
//! table): the built-in scripts (`builtins.rs`) and their engine calls
//! (`transactions.rs`), script files (`script.rs`, `script_run.rs`), several scripts
//! (`mix.rs`), the accounts' keys (`keys.rs`), the threads beside the clients (`side.rs`,
//! `vacuum.rs`, `autovacuum.rs`), TPC-B as the driver's workload (`workload.rs`) and the
//! run (`options.rs`, `run.rs`).

mod autovacuum;
pub mod builtins;
pub mod driver;
pub mod keys;
pub mod mix;
pub mod options;
pub mod run;
pub mod script;
mod script_run;
pub mod side;
mod transactions;
pub mod vacuum;
mod workload;
pub mod workload_run;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use bufpool::index::btree::BTree;
use bufpool::index::IndexError;
use bufpool::table::{Catalog, ColumnType, Heap, IndexDef, RowLockMode, Schema, TableDef, Tid};
use bufpool::txn::{Snapshot, Xid, INVALID_XID};
use bufpool::RelFileId;
use bufpool::{BufferTag, Engine, ForkNumber, Vfs};

/// Accounts per unit of scale (pgbench's naccounts).
pub const ACCOUNTS_PER_SCALE: u64 = 100_000;
/// Tellers per unit of scale (pgbench's ntellers).
pub const TELLERS_PER_SCALE: u64 = 10;
/// First relation number given to pgbench's tables (PostgreSQL's FirstNormalObjectId).
const FIRST_REL: u32 = 16384;

/// Column positions, as in pgbench's CREATE TABLE statements.
pub mod col {
    pub const AID: usize = 0;
    pub const A_BID: usize = 1;
    pub const ABALANCE: usize = 2;
    pub const BID: usize = 0;
    pub const BBALANCE: usize = 1;
    pub const TID: usize = 0;
    pub const T_BID: usize = 1;
    pub const TBALANCE: usize = 2;
    pub const H_TID: usize = 0;
    pub const H_BID: usize = 1;
    pub const H_AID: usize = 2;
    pub const H_DELTA: usize = 3;
    pub const H_MTIME: usize = 4;
}

pub fn accounts_schema() -> Schema {
    Schema::new(&[
        ("aid", ColumnType::Int4),
        ("bid", ColumnType::Int4),
        ("abalance", ColumnType::Int4),
        ("filler", ColumnType::Char(84)),
    ])
}

pub fn branches_schema() -> Schema {
    Schema::new(&[
        ("bid", ColumnType::Int4),
        ("bbalance", ColumnType::Int4),
        ("filler", ColumnType::Char(88)),
    ])
}

pub fn tellers_schema() -> Schema {
    Schema::new(&[
        ("tid", ColumnType::Int4),
        ("bid", ColumnType::Int4),
        ("tbalance", ColumnType::Int4),
        ("filler", ColumnType::Char(84)),
    ])
}

pub fn history_schema() -> Schema {
    Schema::new(&[
        ("tid", ColumnType::Int4),
        ("bid", ColumnType::Int4),
        ("aid", ColumnType::Int4),
        ("delta", ColumnType::Int4),
        ("mtime", ColumnType::Int8),
        ("filler", ColumnType::Char(22)),
    ])
}

/// An open pgbench database.
/// `pgbench_test`: the seed 002 scripts' `test` table (one int4 column), written by the
/// savepoint-overflow and long-running scripts only.
pub fn test_schema() -> Schema {
    Schema::new(&[("v", ColumnType::Int4)])
}

/// The side scripts' table's name.
pub const TEST_TABLE: &str = "pgbench_test";

/// Creates `pgbench_test` in an initialized database that lacks it (databases made before
/// it existed), in pgbench_history's tablespace; a no-op otherwise.
pub fn ensure_test_table(engine: &Engine, vfs: &dyn Vfs, dir: &Path) -> Result<()> {
    let mut c = Catalog::load(vfs, dir)?;
    if c.table(TEST_TABLE).is_some() {
        return Ok(());
    }
    // Beside pgbench_history (the other insert-only table): with `init --tablespaces`
    // nothing goes to the default tablespace.
    let tablespace = c.table("pgbench_history").map_or(0, |t| t.rel.tablespace);
    let rel = c.next_rel_in(FIRST_REL, tablespace);
    c.add_table(TableDef {
        name: TEST_TABLE.into(),
        rel,
        fillfactor: 100,
        schema: test_schema(),
    })?;
    Heap::create(engine, rel)?;
    engine.checkpoint()?;
    c.save(vfs, dir)?;
    Ok(())
}

pub struct Db<'e> {
    pub engine: &'e Engine,
    pub scale: u32,
    pub accounts: Heap<'e>,
    pub branches: Heap<'e>,
    pub tellers: Heap<'e>,
    pub history: Heap<'e>,
    /// `pgbench_test`, if the database has it (see [`ensure_test_table`]).
    pub test: Option<Heap<'e>>,
    pub accounts_pkey: BTree<'e>,
    pub branches_pkey: BTree<'e>,
    pub tellers_pkey: BTree<'e>,
    pub sa: Schema,
    pub sb: Schema,
    pub st: Schema,
    pub sh: Schema,
}

const TABLES: [&str; 4] = [
    "pgbench_accounts",
    "pgbench_branches",
    "pgbench_tellers",
    "pgbench_history",
];

/// pgbench's tables from the largest to the smallest in a run (accounts: 100,000 rows of
/// 100 bytes per unit of scale; history: a row per transaction; tellers: 10 rows per
/// unit; branches: one), each with its primary key if it has one: the order in which
/// [`placement`] deals them out over tablespaces.
pub const BY_SIZE: [(&str, Option<&str>); 4] = [
    ("pgbench_accounts", Some("pgbench_accounts_pkey")),
    ("pgbench_history", None),
    ("pgbench_tellers", Some("pgbench_tellers_pkey")),
    ("pgbench_branches", Some("pgbench_branches_pkey")),
];

/// Where each relation of [`BY_SIZE`] goes: round-robin over `tablespaces`, largest
/// table first, an index in its table's tablespace; tablespace 0 (the data directory's
/// own) for every relation when `tablespaces` is empty. Pairs (relation, tablespace), in
/// [`BY_SIZE`]'s order, tables before their indexes.
pub fn placement(tablespaces: &[u32]) -> Vec<(&'static str, u32)> {
    let mut out = Vec::new();
    for (i, (table, pkey)) in BY_SIZE.iter().enumerate() {
        let ts = match tablespaces {
            [] => 0,
            _ => tablespaces[i % tablespaces.len()],
        };
        out.push((*table, ts));
        if let Some(pkey) = pkey {
            out.push((*pkey, ts));
        }
    }
    out
}

fn table<'c>(c: &'c Catalog, name: &str) -> Result<&'c TableDef> {
    c.table(name).with_context(|| {
        format!("no table {name} in the catalog: run `bufpool init` on this data directory")
    })
}

fn index<'c>(c: &'c Catalog, name: &str) -> Result<&'c IndexDef> {
    c.index(name).with_context(|| {
        format!("no index {name} in the catalog: run `bufpool init` on this data directory")
    })
}

/// Whether `dir`'s catalog has pgbench's tables.
pub fn is_initialized(vfs: &dyn Vfs, dir: &Path) -> Result<bool> {
    let c = Catalog::load(vfs, dir)?;
    Ok(TABLES.iter().all(|t| c.table(t).is_some()))
}

/// What the initialization did.
#[derive(Debug, Clone)]
pub struct InitReport {
    pub scale: u32,
    pub accounts: u64,
    pub load_s: f64,
    pub index_s: f64,
    pub checkpoint_s: f64,
    pub total_s: f64,
}

/// `pgbench -i`: creates the four tables and their primary keys in an engine whose
/// catalog has none of them, loads `scale` units (accounts frozen, as COPY FREEZE does),
/// builds the keys bottom-up and ends with a checkpoint. The relations are placed on
/// `tablespaces` (created beforehand) as [`placement`] says. `progress(done, total)` counts
/// account rows.
pub fn init(
    engine: &Engine,
    vfs: &dyn Vfs,
    dir: &Path,
    scale: u32,
    fillfactor: u8,
    tablespaces: &[u32],
    progress: &mut dyn FnMut(u64, u64),
) -> Result<InitReport> {
    ensure!(scale >= 1, "scale must be at least 1");
    let start = Instant::now();
    let mut c = Catalog::load(vfs, dir)?;
    ensure!(
        TABLES.iter().all(|t| c.table(t).is_none()),
        "{} already holds pgbench tables",
        dir.display()
    );
    let placement = placement(tablespaces);
    let tablespace_of = |name: &str| {
        let found = placement.iter().find(|(n, _)| *n == name);
        found.map_or(0, |&(_, ts)| ts)
    };
    let defs = [
        ("pgbench_accounts", accounts_schema(), fillfactor),
        ("pgbench_branches", branches_schema(), fillfactor),
        ("pgbench_tellers", tellers_schema(), fillfactor),
        ("pgbench_history", history_schema(), 100),
    ];
    for (name, schema, ff) in defs {
        let rel = c.next_rel_in(FIRST_REL, tablespace_of(name));
        c.add_table(TableDef {
            name: name.into(),
            rel,
            fillfactor: ff,
            schema,
        })?;
    }
    for (t, col) in [
        ("pgbench_accounts", "aid"),
        ("pgbench_branches", "bid"),
        ("pgbench_tellers", "tid"),
    ] {
        let name = format!("{t}_pkey");
        let rel = c.next_rel_in(FIRST_REL, tablespace_of(&name));
        c.add_index(IndexDef {
            name,
            rel,
            table: t.into(),
            column: col.into(),
            unique: true,
        })?;
    }
    let heap = |name: &str| -> Result<Heap<'_>> {
        let d = table(&c, name)?;
        Ok(Heap::create(engine, d.rel)?.with_fillfactor(d.fillfactor)?)
    };
    let accounts = heap("pgbench_accounts")?;
    let branches = heap("pgbench_branches")?;
    let tellers = heap("pgbench_tellers")?;
    let _history = heap("pgbench_history")?;
    let x = engine.begin_xid()?;
    let s = scale as u64;
    let (sa, sb, st) = (accounts_schema(), branches_schema(), tellers_schema());
    let mut btids = Vec::new();
    branches.bulk_load(
        x,
        true,
        (1..=s).map(|bid| {
            let mut r = sb.blank_row();
            sb.set_int(&mut r, col::BID, bid as i64);
            r
        }),
        |t| btids.push(t),
        &mut |_| {},
    )?;
    let mut ttids = Vec::new();
    tellers.bulk_load(
        x,
        true,
        (1..=s * TELLERS_PER_SCALE).map(|tid| {
            let mut r = st.blank_row();
            st.set_int(&mut r, col::TID, tid as i64);
            st.set_int(
                &mut r,
                col::T_BID,
                ((tid - 1) / TELLERS_PER_SCALE + 1) as i64,
            );
            r
        }),
        |t| ttids.push(t),
        &mut |_| {},
    )?;
    let naccounts = s * ACCOUNTS_PER_SCALE;
    let mut atids = Vec::with_capacity(naccounts as usize);
    progress(0, naccounts);
    accounts.bulk_load(
        x,
        true,
        (1..=naccounts).map(|aid| {
            let mut r = sa.blank_row();
            sa.set_int(&mut r, col::AID, aid as i64);
            sa.set_int(
                &mut r,
                col::A_BID,
                ((aid - 1) / ACCOUNTS_PER_SCALE + 1) as i64,
            );
            r
        }),
        |t| atids.push(t),
        &mut |n| progress(n, naccounts),
    )?;
    let load_s = start.elapsed().as_secs_f64();
    let t_index = Instant::now();
    for (name, tids) in [
        ("pgbench_accounts_pkey", &atids),
        ("pgbench_branches_pkey", &btids),
        ("pgbench_tellers_pkey", &ttids),
    ] {
        let d = index(&c, name)?;
        BTree::bulk_build(
            engine,
            d.rel,
            true,
            tids.iter()
                .enumerate()
                .map(|(i, t)| (i as i64 + 1, t.to_u64())),
            90,
            &mut |_| {},
        )?;
    }
    let index_s = t_index.elapsed().as_secs_f64();
    engine.commit_transaction(x)?;
    c.save(vfs, dir)?;
    ensure_test_table(engine, vfs, dir)?;
    let t_ck = Instant::now();
    engine.checkpoint()?;
    Ok(InitReport {
        scale,
        accounts: naccounts,
        load_s,
        index_s,
        checkpoint_s: t_ck.elapsed().as_secs_f64(),
        total_s: start.elapsed().as_secs_f64(),
    })
}

impl<'e> Db<'e> {
    /// The heap of a TPC-B table by name (`pgbench_accounts` or just `accounts`).
    pub fn heap(&self, name: &str) -> Result<&Heap<'e>> {
        match name.strip_prefix("pgbench_").unwrap_or(name) {
            "accounts" => Ok(&self.accounts),
            "branches" => Ok(&self.branches),
            "tellers" => Ok(&self.tellers),
            "history" => Ok(&self.history),
            _ => anyhow::bail!("no table {name:?}: the tables are {}", TABLES.join(", ")),
        }
    }

    /// `pgbench_test` (an error naming the fix if this database has none).
    pub fn test(&self) -> Result<&Heap<'e>> {
        self.test.as_ref().with_context(|| {
            format!("this database has no {TEST_TABLE} table (the side scripts' table)")
        })
    }

    /// Opens the pgbench tables of an initialized engine.
    pub fn open(engine: &'e Engine, vfs: &dyn Vfs, dir: &Path) -> Result<Db<'e>> {
        let c = Catalog::load(vfs, dir)?;
        let heap = |name: &str| -> Result<Heap<'e>> {
            let d = table(&c, name)?;
            Ok(Heap::open(engine, d.rel).with_fillfactor(d.fillfactor)?)
        };
        let tree = |name: &str| -> Result<BTree<'e>> {
            let d = index(&c, name)?;
            BTree::open(engine, d.rel).with_context(|| format!("opening index {name}"))
        };
        let branches_pkey = tree("pgbench_branches_pkey")?;
        let mut scale = 0u32;
        branches_pkey.range(i64::MIN, i64::MAX, |_, _| {
            scale += 1;
            true
        })?;
        ensure!(
            scale > 0,
            "pgbench_branches is empty: run `bufpool init` again"
        );
        // pgbench's table sizes are known from the scale: autovacuum's threshold starts
        // from them (PostgreSQL's catalog would remember them).
        let sized = |name: &str, rows: u64| -> Result<Heap<'e>> {
            let h = heap(name)?;
            h.seed_live_estimate(rows);
            Ok(h)
        };
        let s = u64::from(scale);
        Ok(Db {
            engine,
            scale,
            accounts: sized("pgbench_accounts", s * ACCOUNTS_PER_SCALE)?,
            branches: sized("pgbench_branches", s)?,
            tellers: sized("pgbench_tellers", s * TELLERS_PER_SCALE)?,
            history: heap("pgbench_history")?,
            test: match c.table(TEST_TABLE) {
                Some(_) => Some(heap(TEST_TABLE)?),
                None => None,
            },
            accounts_pkey: tree("pgbench_accounts_pkey")?,
            branches_pkey,
            tellers_pkey: tree("pgbench_tellers_pkey")?,
            sa: accounts_schema(),
            sb: branches_schema(),
            st: tellers_schema(),
            sh: history_schema(),
        })
    }

    fn root(tree: &BTree<'_>, key: i64, what: &str) -> Result<Tid, bufpool::Error> {
        match tree.get(key)? {
            Some(v) => Ok(Tid::from_u64(v)),
            None => Err(bufpool::Error::Index(IndexError::Corrupt {
                index: what.into(),
                reason: format!("key {key} missing"),
            })),
        }
    }

    /// `UPDATE <table> SET <col> = <col> + delta WHERE <key> = key`, as PostgreSQL runs it
    /// at READ COMMITTED: the statement takes a snapshot, its index scan walks the row's
    /// chain from the root to the version that snapshot sees (a visibility check per
    /// version, PostgreSQL's heap_hot_search_buffer: with an overflowed snapshot each
    /// recent xid costs a subtransaction-log lookup, seed 002's experiment 1), and the
    /// update then changes the newest version (EvalPlanQual's answer when a concurrent
    /// update committed after the snapshot). Rows are never deleted here, so a snapshot
    /// that sees no version is an error.
    #[allow(clippy::too_many_arguments)]
    fn add(
        &self,
        x: Xid,
        heap: &Heap<'_>,
        tree: &BTree<'_>,
        schema: &Schema,
        column: usize,
        key: i64,
        delta: i64,
    ) -> Result<(), bufpool::Error> {
        let root = Self::root(tree, key, "primary key")?;
        let statement = self.engine.txns().snapshot(x);
        let vanished = || {
            bufpool::Error::Index(IndexError::Corrupt {
                index: "primary key".into(),
                reason: format!("row {key} vanished"),
            })
        };
        if heap.fetch_with(&statement, root, |_, _| ())?.is_none() {
            return Err(vanished());
        }
        drop(statement);
        let done = heap.update(x, root, |d| {
            let mut r = d.to_vec();
            let v = schema.get_int(d, column);
            schema.set_int(&mut r, column, v + delta);
            r
        })?;
        if done.is_none() {
            return Err(vanished());
        }
        Ok(())
    }

    /// `SELECT abalance FROM pgbench_accounts WHERE aid = aid` for `snap`.
    pub fn abalance(&self, snap: &Snapshot, aid: i64) -> Result<Option<i64>, bufpool::Error> {
        let root = Self::root(&self.accounts_pkey, aid, "pgbench_accounts_pkey")?;
        Ok(self
            .accounts
            .fetch_with(snap, root, |_, d| self.sa.get_int(d, col::ABALANCE))?)
    }

    /// The batch of `bench --batch-rows`: `UPDATE pgbench_accounts SET abalance = abalance
    /// + 0` for each of `aids` (ascending, so that two batches never deadlock), in
    /// transaction `x`: a new version of every row, so every page they are on is dirtied,
    /// and the balances (and `check`) stay as they were.
    pub fn touch_accounts(&self, x: Xid, aids: &[i64]) -> Result<(), bufpool::Error> {
        for &aid in aids {
            self.add(
                x,
                &self.accounts,
                &self.accounts_pkey,
                &self.sa,
                col::ABALANCE,
                aid,
                0,
            )?;
        }
        Ok(())
    }

    /// The TPC-B-like transaction (pgbench's built-in script), or simple-update (no
    /// tellers or branches) with `full = false`, in transaction `x`.
    #[allow(clippy::too_many_arguments)]
    pub fn tpcb(
        &self,
        x: Xid,
        full: bool,
        aid: i64,
        bid: i64,
        tid: i64,
        delta: i64,
        mtime: i64,
    ) -> Result<(), bufpool::Error> {
        self.add(
            x,
            &self.accounts,
            &self.accounts_pkey,
            &self.sa,
            col::ABALANCE,
            aid,
            delta,
        )?;
        let snap = self.engine.txns().snapshot(x);
        self.abalance(&snap, aid)?;
        if full {
            self.add(
                x,
                &self.tellers,
                &self.tellers_pkey,
                &self.st,
                col::TBALANCE,
                tid,
                delta,
            )?;
            self.add(
                x,
                &self.branches,
                &self.branches_pkey,
                &self.sb,
                col::BBALANCE,
                bid,
                delta,
            )?;
        }
        self.insert_history(x, [tid, bid, aid, delta, mtime])
    }
}

impl Db<'_> {
    /// The run's relations by name (pgbench's tables, their keys, the test table): the
    /// pool heatmap's rows.
    pub fn relation_names(&self) -> std::collections::HashMap<RelFileId, String> {
        let mut names: std::collections::HashMap<RelFileId, String> = [
            (self.accounts.rel(), "pgbench_accounts"),
            (self.branches.rel(), "pgbench_branches"),
            (self.tellers.rel(), "pgbench_tellers"),
            (self.history.rel(), "pgbench_history"),
            (self.accounts_pkey.rel(), "pgbench_accounts_pkey"),
            (self.branches_pkey.rel(), "pgbench_branches_pkey"),
            (self.tellers_pkey.rel(), "pgbench_tellers_pkey"),
        ]
        .into_iter()
        .map(|(r, n)| (r, n.to_string()))
        .collect();
        if let Some(t) = &self.test {
            names.insert(t.rel(), TEST_TABLE.to_string());
        }
        names
    }
}

impl Db<'_> {
    /// `INSERT INTO pgbench_history (tid, bid, aid, delta, mtime)` as `x`.
    fn insert_history(&self, x: Xid, row: [i64; 5]) -> Result<(), bufpool::Error> {
        let mut h = self.sh.blank_row();
        for (c, v) in [
            col::H_TID,
            col::H_BID,
            col::H_AID,
            col::H_DELTA,
            col::H_MTIME,
        ]
        .into_iter()
        .zip(row)
        {
            self.sh.set_int(&mut h, c, v);
        }
        self.history.insert(x, &h)?;
        Ok(())
    }

    /// Seed 002 experiment 2's multixact.sql in transaction `x`: `SELECT FROM
    /// pgbench_accounts WHERE aid = :aid FOR UPDATE; SAVEPOINT S1; UPDATE pgbench_accounts
    /// SET abalance = abalance + :delta WHERE aid = :aid; SELECT abalance ...; INSERT INTO
    /// pgbench_history ...` (the caller commits). The savepoint's update of the row its
    /// top-level transaction locked makes the row's xmax a multixact of both, and every
    /// later walk over that version reads its members: the multixact SLRUs' load.
    #[allow(clippy::too_many_arguments)]
    pub fn multixact(
        &self,
        x: Xid,
        aid: i64,
        bid: i64,
        tid: i64,
        delta: i64,
        mtime: i64,
    ) -> Result<(), bufpool::Error> {
        let root = Self::root(&self.accounts_pkey, aid, "pgbench_accounts_pkey")?;
        if self
            .accounts
            .lock_row(x, root, RowLockMode::Exclusive)?
            .is_none()
        {
            return Err(bufpool::Error::Index(IndexError::Corrupt {
                index: "pgbench_accounts_pkey".into(),
                reason: format!("row {aid} vanished"),
            }));
        }
        let s = self.engine.begin_subtransaction(x)?;
        self.add(
            s,
            &self.accounts,
            &self.accounts_pkey,
            &self.sa,
            col::ABALANCE,
            aid,
            delta,
        )?;
        let snap = self.engine.txns().snapshot(s);
        self.abalance(&snap, aid)?;
        self.insert_history(s, [tid, bid, aid, delta, mtime])
    }
}

/// What `check` found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CheckReport {
    pub scale: u32,
    pub sum_abalance: i64,
    pub sum_bbalance: i64,
    pub sum_tbalance: i64,
    pub sum_delta: i64,
    pub history_rows: u64,
    pub pages_verified: u64,
    pub problems: Vec<String>,
}

/// What `check --acked` found: acknowledged transactions (lines of the ack logs) and how
/// many of them pgbench_history holds.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct AckReport {
    pub acknowledged: u64,
    pub found: u64,
    pub lost: u64,
    /// One lost line, to look for.
    pub example: Option<String>,
}

/// Compares the ack logs written by `bench --ack-log` with pgbench_history: each line
/// (tid bid aid delta mtime) must match a history row of its own (a row is matched at
/// most once, so duplicates count).
pub fn check_acked(db: &Db<'_>, logs: &[PathBuf]) -> Result<AckReport> {
    let snap = db.engine.txns().snapshot(INVALID_XID);
    let mut rows: std::collections::HashMap<[i64; 5], u64> = std::collections::HashMap::new();
    db.history.scan(&snap, |_, d| {
        let f = |c| db.sh.get_int(d, c);
        let k = [
            f(col::H_TID),
            f(col::H_BID),
            f(col::H_AID),
            f(col::H_DELTA),
            f(col::H_MTIME),
        ];
        *rows.entry(k).or_default() += 1;
    })?;
    let mut r = AckReport::default();
    for log in logs {
        let text = std::fs::read_to_string(log)
            .with_context(|| format!("reading the ack log {}", log.display()))?;
        for (n, line) in text.lines().enumerate() {
            let fields: Vec<i64> = line
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()
                .filter(|f: &Vec<i64>| f.len() == 5)
                .with_context(|| {
                    format!("{} line {}: not 5 integers: {line:?}", log.display(), n + 1)
                })?;
            let k: [i64; 5] = fields.try_into().expect("length checked");
            r.acknowledged += 1;
            match rows.get_mut(&k) {
                Some(c) if *c > 0 => {
                    *c -= 1;
                    r.found += 1;
                }
                _ => {
                    r.lost += 1;
                    r.example
                        .get_or_insert_with(|| format!("{} line {}: {line}", log.display(), n + 1));
                }
            }
        }
    }
    Ok(r)
}

/// `bufpool check`: the TPC-B invariants, every page's checksum (read from disk, not the
/// pool), and that each primary key and its heap agree both ways. With `accounts_only`
/// (the database also ran scripts that change accounts alone), the balances must agree
/// pairwise: accounts with history, branches with tellers.
pub fn check(db: &Db<'_>, vfs: &dyn Vfs, dir: &Path, accounts_only: bool) -> Result<CheckReport> {
    let e = db.engine;
    let snap = e.txns().snapshot(INVALID_XID);
    let mut r = CheckReport {
        scale: db.scale,
        ..CheckReport::default()
    };
    // Sums, and each key's rows as the heap sees them.
    let sum =
        |heap: &Heap<'_>, s: &Schema, key: usize, val: usize| -> Result<(i64, Vec<(i64, Tid)>)> {
            let mut total = 0i64;
            let mut keys = Vec::new();
            heap.scan(&snap, |tid, d| {
                total += s.get_int(d, val);
                keys.push((s.get_int(d, key), tid));
            })?;
            Ok((total, keys))
        };
    let (sa, akeys) = sum(&db.accounts, &db.sa, col::AID, col::ABALANCE)?;
    let (sb, bkeys) = sum(&db.branches, &db.sb, col::BID, col::BBALANCE)?;
    let (st, tkeys) = sum(&db.tellers, &db.st, col::TID, col::TBALANCE)?;
    let (sh, hrows) = sum(&db.history, &db.sh, col::H_TID, col::H_DELTA)?;
    r.sum_abalance = sa;
    r.sum_bbalance = sb;
    r.sum_tbalance = st;
    r.sum_delta = sh;
    r.history_rows = hrows.len() as u64;
    let agree = if accounts_only {
        sa == sh && sb == st
    } else {
        sa == sb && sb == st && st == sh
    };
    if !agree {
        r.problems.push(format!(
            "balances disagree: sum(abalance) = {sa}, sum(bbalance) = {sb}, sum(tbalance) = {st}, sum(history.delta) = {sh}"
        ));
    }
    let s = db.scale as i64;
    for (name, keys, tree, want) in [
        (
            "pgbench_accounts",
            &akeys,
            &db.accounts_pkey,
            s * ACCOUNTS_PER_SCALE as i64,
        ),
        ("pgbench_branches", &bkeys, &db.branches_pkey, s),
        (
            "pgbench_tellers",
            &tkeys,
            &db.tellers_pkey,
            s * TELLERS_PER_SCALE as i64,
        ),
    ] {
        if keys.len() as i64 != want {
            r.problems.push(format!(
                "{name}: {} visible rows, expected {want}",
                keys.len()
            ));
        }
        if let Err(err) = tree.check() {
            r.problems.push(format!("{name}_pkey: {err}"));
        }
        // Heap to index: each visible row is found under its key, at a tuple id that
        // leads to the same version.
        for &(key, _) in keys.iter() {
            match tree.get(key)? {
                None => r
                    .problems
                    .push(format!("{name}: row {key} is not in {name}_pkey")),
                Some(v) => {
                    let got = db
                        .heap_of(name)
                        .fetch_with(&snap, Tid::from_u64(v), |_, d| d.to_vec())?;
                    let ok = got
                        .as_deref()
                        .is_some_and(|d| db.schema_of(name).get_int(d, 0) == key);
                    if !ok {
                        r.problems.push(format!(
                            "{name}_pkey: key {key} leads to {:?}, not to its row",
                            Tid::from_u64(v)
                        ));
                    }
                }
            }
            if r.problems.len() > 100 {
                break;
            }
        }
        // Index to heap: as many entries as rows, keys 1..=want.
        let mut n = 0i64;
        let mut expect = 1i64;
        let mut order_ok = true;
        tree.range(i64::MIN, i64::MAX, |k, _| {
            n += 1;
            order_ok &= k == expect;
            expect += 1;
            true
        })?;
        if n != want || !order_ok {
            r.problems.push(format!(
                "{name}_pkey: {n} entries{}, expected keys 1..={want}",
                if order_ok { "" } else { " out of sequence" }
            ));
        }
    }
    r.pages_verified = verify_pages(e, vfs, dir, &mut r.problems)?;
    Ok(r)
}

/// Every page on disk of every relation of `dir`'s catalog, after a checkpoint (so the
/// files are current): its checksum and identity, each bad one a line of `problems`. The
/// pages verified.
pub fn verify_pages(
    e: &Engine,
    vfs: &dyn Vfs,
    dir: &Path,
    problems: &mut Vec<String>,
) -> Result<u64> {
    e.checkpoint()?;
    let c = Catalog::load(vfs, dir)?;
    let rels = c
        .tables
        .iter()
        .map(|t| (t.name.clone(), t.rel))
        .chain(c.indexes.iter().map(|i| (i.name.clone(), i.rel)));
    let smgr = e.pool().smgr();
    let mut page = vec![0u8; e.pool().page_size()];
    let mut verified = 0u64;
    for (name, rel) in rels {
        let n = smgr.nblocks(rel, ForkNumber::Main)?;
        for block in 0..n {
            let tag = BufferTag::new(rel, ForkNumber::Main, block);
            smgr.read(&tag, &mut page, bufpool::IoContext::Normal)?;
            if let Err(p) = bufpool::page::verify(&page, &tag) {
                problems.push(format!("{name} block {block}: {p}"));
            }
            verified += 1;
        }
    }
    Ok(verified)
}

impl Db<'_> {
    fn heap_of(&self, name: &str) -> &Heap<'_> {
        match name {
            "pgbench_branches" => &self.branches,
            "pgbench_tellers" => &self.tellers,
            _ => &self.accounts,
        }
    }

    fn schema_of(&self, name: &str) -> &Schema {
        match name {
            "pgbench_branches" => &self.sb,
            "pgbench_tellers" => &self.st,
            _ => &self.sa,
        }
    }
}

/// Refuses a data directory without pgbench tables with a clear message.
pub fn require_initialized(vfs: &dyn Vfs, dir: &Path) -> Result<()> {
    if !is_initialized(vfs, dir)? {
        bail!(
            "{} holds no pgbench database: run `bufpool init -D {}` first",
            dir.display(),
            dir.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round-robin, largest first, each key with its table; every relation `init` makes
    /// is placed, and without tablespaces all stay in tablespace 0.
    #[test]
    fn placement_deals_tables_out_largest_first() {
        let two = placement(&[1, 2]);
        assert_eq!(
            two,
            [
                ("pgbench_accounts", 1),
                ("pgbench_accounts_pkey", 1),
                ("pgbench_history", 2),
                ("pgbench_tellers", 1),
                ("pgbench_tellers_pkey", 1),
                ("pgbench_branches", 2),
                ("pgbench_branches_pkey", 2),
            ]
        );
        let mut names: Vec<&str> = two.iter().map(|&(n, _)| n).collect();
        names.sort_unstable();
        let mut want: Vec<String> = TABLES.iter().map(|t| t.to_string()).collect();
        want.extend(["accounts", "branches", "tellers"].map(|t| format!("pgbench_{t}_pkey")));
        want.sort_unstable();
        assert_eq!(names, want);
        assert!(placement(&[]).iter().all(|&(_, ts)| ts == 0));
        let one_each: Vec<u32> = placement(&[1, 2, 3, 4, 5])
            .iter()
            .filter(|(n, _)| !n.ends_with("_pkey"))
            .map(|&(_, ts)| ts)
            .collect();
        assert_eq!(one_each, [1, 2, 3, 4]);
    }
}
