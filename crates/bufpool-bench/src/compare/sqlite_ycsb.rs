//! YCSB's core workloads on SQLite, for `bufpool compare --workload ycsb-a` ..
//! `ycsb-f`: YCSB's usertable as its JDBC binding makes it (`ycsb_key TEXT PRIMARY KEY`
//! and ten TEXT fields; SQLite keeps the key in an index beside the rowid table, as
//! bufpool keeps its key beside the heap), the same keys (`user<hash>`), field values,
//! request distributions, operation mix and acknowledged inserts as `bufpool bench -b
//! ycsb-X` (`crate::ycsb`), with the settings of `sqlite.rs` (WAL, FULL or NORMAL, the
//! pool as each connection's cache, the counting busy handler).
//!
//! Each operation is one transaction: a read, a scan, an insert and an update as one
//! statement in autocommit; a read-modify-write as `BEGIN IMMEDIATE`, the read, the
//! update, `COMMIT`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rusqlite::{params, Connection, OptionalExtension};

use super::sqlite::{configure, open_file, remove_db_files, run_clients};
use super::sqlite::{ClientOut, Running, Schedule, SqliteOptions, SqliteRun};
use crate::ycsb::keys::{key_name, Chooser, THETA};
use crate::ycsb::ops::Op;
use crate::ycsb::workload::{Core, Inserts, MAX_SCAN};
use crate::ycsb::{FIELDS, FIELD_LEN};

/// The database file in the run's directory.
pub const DB_FILE: &str = "ycsb.sqlite";

const SELECT: &str = "SELECT field0, field1, field2, field3, field4, field5, field6, field7, \
                      field8, field9 FROM usertable";

/// Creates YCSB's usertable with `records` records (keys and fields as `init --workload
/// ycsb` makes them) in one transaction, then a WAL checkpoint. Replaces any database
/// already in `dir`.
pub fn load(dir: &Path, records: u64) -> Result<()> {
    anyhow::ensure!(records >= 1, "--records must be at least 1");
    remove_db_files(dir, DB_FILE)?;
    let mut db = open_file(dir, DB_FILE)?;
    db.pragma_update(None, "journal_mode", "WAL")?;
    db.pragma_update(None, "synchronous", "NORMAL")?;
    let fields: Vec<String> = (0..FIELDS).map(|i| format!("field{i} TEXT")).collect();
    db.execute_batch(&format!(
        "CREATE TABLE usertable (ycsb_key TEXT PRIMARY KEY, {});",
        fields.join(", ")
    ))?;
    let tx = db.transaction()?;
    {
        let mut ins = tx.prepare(&insert_sql())?;
        let mut rng = SmallRng::seed_from_u64(0x7c5b);
        for k in 0..records {
            insert(&mut ins, k, &mut rng)?;
        }
    }
    tx.commit()?;
    db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
    db.close().map_err(|(_, e)| e)?;
    Ok(())
}

fn insert_sql() -> String {
    let marks: Vec<String> = (1..=FIELDS + 1).map(|i| format!("?{i}")).collect();
    format!("INSERT INTO usertable VALUES ({})", marks.join(", "))
}

/// Inserts record `keynum` with fields drawn from `rng`.
fn insert(
    stmt: &mut rusqlite::Statement<'_>,
    keynum: u64,
    rng: &mut SmallRng,
) -> rusqlite::Result<()> {
    let mut values: Vec<String> = Vec::with_capacity(FIELDS + 1);
    values.push(key_name(keynum));
    for _ in 0..FIELDS {
        values.push(letters(rng));
    }
    stmt.execute(rusqlite::params_from_iter(values.iter()))?;
    Ok(())
}

/// A field's value: random lowercase letters, as bufpool's.
fn letters(rng: &mut SmallRng) -> String {
    let mut b = vec![0u8; FIELD_LEN];
    crate::ycsb::fill_letters(&mut b, rng);
    String::from_utf8(b).expect("letters")
}

/// Runs YCSB workload `core` on the loaded database.
pub fn run(o: &SqliteOptions, core: Core, stop: &AtomicBool) -> Result<SqliteRun> {
    let records: i64 = {
        let db = open_file(&o.dir, DB_FILE)?;
        db.query_row("SELECT count(*) FROM usertable", [], |r| r.get(0))
            .context("counting usertable (was the SQLite database loaded with YCSB's table?)")?
    };
    anyhow::ensure!(records > 0, "the SQLite usertable is empty: load it first");
    let records = records as u64;
    let zipfian = Chooser::zipfian(records, THETA)?;
    let latest = Chooser::latest(records, THETA)?;
    let inserts = Inserts::new(records);
    let chooser = if core.latest() { &latest } else { &zipfian };
    let mode = crate::ycsb::run::mode_of(core).name();
    let mut out = run_clients(o, DB_FILE, (mode, 0), |id, start, running| {
        client(o, (core, chooser, &inserts), id, (start, stop), running)
    })?;
    out.result
        .config
        .insert("records".into(), records.to_string());
    Ok(out)
}

/// One client: its own connection, one operation per transaction until the run's time is
/// up or `stop` is set.
fn client(
    o: &SqliteOptions,
    (core, chooser, inserts): (Core, &Chooser, &Inserts),
    id: u32,
    (start, stop): (Instant, &AtomicBool),
    running: &Running,
) -> Result<ClientOut> {
    let db = open_file(&o.dir, DB_FILE)?;
    configure(&db, o)?;
    let mut rng = SmallRng::seed_from_u64(o.seed ^ (u64::from(id) << 32));
    let mut out = ClientOut::new();
    let mut schedule = Schedule::new(o, start);
    while start.elapsed() < o.duration && !stop.load(Ordering::Relaxed) {
        let op = core.pick(rng.random::<f64>());
        let t0 = schedule.wait(&mut rng);
        let r = operation(&db, op, chooser, inserts, &mut rng);
        out.book(&db, (start, t0), r, running)
            .with_context(|| format!("SQLite YCSB {}", op.name()))?;
    }
    out.take_busy();
    Ok(out)
}

/// One operation `op` as its own transaction.
fn operation(
    db: &Connection,
    op: Op,
    chooser: &Chooser,
    inserts: &Inserts,
    rng: &mut SmallRng,
) -> rusqlite::Result<()> {
    let read = |db: &Connection, key: &str| -> rusqlite::Result<bool> {
        let row = db
            .prepare_cached(&format!("{SELECT} WHERE ycsb_key = ?1"))?
            .query_row(params![key], |r| {
                let mut n = 0;
                for i in 0..FIELDS {
                    n += r.get_ref(i)?.as_str().map_or(0, str::len);
                }
                Ok(n)
            })
            .optional()?;
        Ok(row.is_some())
    };
    let update = |db: &Connection, key: &str, rng: &mut SmallRng| -> rusqlite::Result<()> {
        let field = rng.random_range(0..FIELDS);
        db.prepare_cached(&format!(
            "UPDATE usertable SET field{field} = ?1 WHERE ycsb_key = ?2"
        ))?
        .execute(params![letters(rng), key])?;
        Ok(())
    };
    match op {
        Op::Read => {
            read(db, &key_name(chooser.next(inserts.count(), rng)))?;
        }
        Op::Update => update(db, &key_name(chooser.next(inserts.count(), rng)), rng)?,
        Op::ReadModifyWrite => {
            let key = key_name(chooser.next(inserts.count(), rng));
            db.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
            read(db, &key)?;
            update(db, &key, rng)?;
            db.prepare_cached("COMMIT")?.execute([])?;
        }
        Op::Scan => {
            let key = key_name(chooser.next(inserts.count(), rng));
            let n = rng.random_range(1..=MAX_SCAN) as i64;
            let mut stmt = db.prepare_cached(&format!(
                "{SELECT} WHERE ycsb_key >= ?1 ORDER BY ycsb_key LIMIT ?2"
            ))?;
            let mut rows = stmt.query(params![key, n])?;
            while let Some(r) = rows.next()? {
                let _ = r.get_ref(0)?;
            }
        }
        Op::Insert => {
            let k = inserts.take();
            let mut stmt = db.prepare_cached(&insert_sql())?;
            let r = insert(&mut stmt, k, rng);
            inserts.done(k);
            r?;
        }
    }
    Ok(())
}

/// Checks the loaded-and-run database: as many rows as distinct keys, and returns the
/// rows.
pub fn check(dir: &Path) -> Result<i64> {
    let db = open_file(dir, DB_FILE)?;
    let rows: i64 = db.query_row("SELECT count(*) FROM usertable", [], |r| r.get(0))?;
    let keys: i64 = db.query_row("SELECT count(DISTINCT ycsb_key) FROM usertable", [], |r| {
        r.get(0)
    })?;
    anyhow::ensure!(
        rows == keys,
        "SQLite usertable: {rows} rows for {keys} keys"
    );
    Ok(rows)
}
