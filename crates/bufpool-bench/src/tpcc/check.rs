//! `bufpool check` on a TPC-C database: the consistency conditions 1 to 4 of clause
//! 3.3.2, every row's packed key against its columns and its entry in each index, each
//! index's own check, and every page's checksum on disk.
//!
//! The conditions, per district (`w`, `d`):
//! 1. `w_ytd` = sum(`d_ytd`) over the warehouse's districts;
//! 2. `d_next_o_id` - 1 = max(`o_id`) = max(`no_o_id`);
//! 3. max(`no_o_id`) - min(`no_o_id`) + 1 = the district's new-order rows;
//! 4. sum(`o_ol_cnt`) = the district's order-line rows.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Result;
use bufpool::index::btree::BTree;
use bufpool::table::Tid;
use bufpool::txn::{Snapshot, INVALID_XID};
use bufpool::Vfs;

use super::schema::col::{customer as cc, warehouse as wc};
use super::schema::col::{district as dc, new_order as nc, order_line as lc, orders as oc};
use super::schema::{keys, Table};
use super::{Rel, TpccDb};

/// What the check found.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    pub warehouses: u32,
    /// Visible rows over all tables.
    pub rows: u64,
    /// Orders and order lines.
    pub orders: u64,
    pub order_lines: u64,
    /// New-order rows (orders not delivered yet).
    pub new_orders: u64,
    pub pages_verified: u64,
    pub problems: Vec<String>,
}

/// A district's figures for conditions 2 to 4.
#[derive(Debug, Default, Clone, Copy)]
struct Agg {
    next_o_id: i64,
    max_o: i64,
    ol_cnt: i64,
    lines: i64,
    no_count: i64,
    no_min: i64,
    no_max: i64,
}

/// The most problems listed.
const MAX_PROBLEMS: usize = 100;

/// Checks `db` (see the module doc).
pub fn check(db: &TpccDb<'_>, vfs: &dyn Vfs, dir: &Path) -> Result<CheckReport> {
    let snap = db.engine.txns().snapshot(INVALID_XID);
    let mut r = CheckReport {
        warehouses: db.warehouses,
        ..Default::default()
    };
    let mut p: Vec<String> = Vec::new();
    let mut w_ytd: HashMap<i64, (i64, i64)> = HashMap::new();
    let mut dist: HashMap<(i64, i64), Agg> = HashMap::new();
    let wd =
        |rel: &Rel<'_>, row: &[u8], d_col: usize| (rel.int(row, d_col + 1), rel.int(row, d_col));
    for t in Table::ALL {
        let rel = db.rel(t);
        let mut rows: Vec<(Tid, i64, Option<i64>)> = Vec::new();
        rel.heap.scan(&snap, |tid, row| {
            match t {
                Table::Warehouse => {
                    w_ytd.entry(rel.int(row, 1)).or_default().0 = rel.int(row, wc::YTD)
                }
                Table::District => {
                    let (w, d) = (rel.int(row, 2), rel.int(row, 1));
                    w_ytd.entry(w).or_default().1 += rel.int(row, dc::YTD);
                    dist.entry((w, d)).or_default().next_o_id = rel.int(row, dc::NEXT_O_ID);
                }
                Table::Orders => {
                    let a = dist.entry(wd(rel, row, oc::ID + 1)).or_default();
                    a.max_o = a.max_o.max(rel.int(row, oc::ID));
                    a.ol_cnt += rel.int(row, oc::OL_CNT);
                }
                Table::NewOrder => {
                    let a = dist.entry(wd(rel, row, nc::O_ID + 1)).or_default();
                    let o = rel.int(row, nc::O_ID);
                    a.no_min = if a.no_count == 0 { o } else { a.no_min.min(o) };
                    a.no_max = a.no_max.max(o);
                    a.no_count += 1;
                }
                Table::OrderLine => dist.entry(wd(rel, row, lc::O_ID + 1)).or_default().lines += 1,
                _ => {}
            }
            if let Some(expected) = packed_key(t, rel, row) {
                let key = rel.int(row, 0);
                if key != expected && p.len() < MAX_PROBLEMS {
                    p.push(format!(
                        "{} row {tid:?}: key {key}, its columns make {expected}",
                        t.name()
                    ));
                }
            }
            let second = t.second_index().map(|_| match t {
                Table::Customer => rel.int(row, cc::LAST_KEY),
                _ => rel.int(row, oc::C_KEY),
            });
            rows.push((tid, rel.int(row, 0), second));
        })?;
        r.rows += rows.len() as u64;
        match t {
            Table::Orders => r.orders = rows.len() as u64,
            Table::OrderLine => r.order_lines = rows.len() as u64,
            Table::NewOrder => r.new_orders = rows.len() as u64,
            _ => {}
        }
        check_indexes(t, rel, &snap, &rows, &mut p)?;
    }
    for (w, (ytd, sum)) in &w_ytd {
        if ytd != sum {
            p.push(format!(
                "condition 1, warehouse {w}: w_ytd {ytd} != sum(d_ytd) {sum}"
            ));
        }
    }
    let mut ds: Vec<_> = dist.into_iter().collect();
    ds.sort_by_key(|e| e.0);
    for ((w, d), a) in ds {
        if p.len() >= MAX_PROBLEMS {
            break;
        }
        let at = format!("district ({w}, {d})");
        if a.next_o_id - 1 != a.max_o || (a.no_count > 0 && a.no_max != a.max_o) {
            p.push(format!(
                "condition 2, {at}: d_next_o_id - 1 = {}, max(o_id) = {}, max(no_o_id) = {}",
                a.next_o_id - 1,
                a.max_o,
                a.no_max
            ));
        }
        if a.no_count > 0 && a.no_max - a.no_min + 1 != a.no_count {
            p.push(format!(
                "condition 3, {at}: max(no_o_id) - min(no_o_id) + 1 = {}, {} new-order rows",
                a.no_max - a.no_min + 1,
                a.no_count
            ));
        }
        if a.ol_cnt != a.lines {
            p.push(format!(
                "condition 4, {at}: sum(o_ol_cnt) = {}, {} order-line rows",
                a.ol_cnt, a.lines
            ));
        }
    }
    r.pages_verified = crate::tpcb::verify_pages(db.engine, vfs, dir, &mut p)?;
    r.problems = p;
    Ok(r)
}

/// Each visible row of `t` is found through each of its indexes under its key; each
/// index passes its own check.
fn check_indexes(
    t: Table,
    rel: &Rel<'_>,
    snap: &Snapshot,
    rows: &[(Tid, i64, Option<i64>)],
    p: &mut Vec<String>,
) -> Result<()> {
    let indexes = [
        (t.pkey_name(), rel.pkey.as_ref(), false),
        (t.second_index().map(|s| s.0), rel.second.as_ref(), true),
    ];
    for (name, ix, second) in indexes {
        let (Some(name), Some(ix)) = (name, ix) else {
            continue;
        };
        if let Err(e) = ix.check() {
            p.push(format!("{name}: {e}"));
        }
        let mut entries: Vec<(i64, u64)> = Vec::with_capacity(rows.len());
        ix.range(i64::MIN, i64::MAX, |k, v| {
            entries.push((k, v));
            true
        })?;
        entries.sort_unstable();
        let mut missing = 0u64;
        for &(tid, key, second_key) in rows {
            let k = if second {
                second_key.unwrap_or(key)
            } else {
                key
            };
            // A row's scan gives its newest version; entries name its root (the same
            // unless the row was updated): then look for it under its key.
            if entries.binary_search(&(k, tid.to_u64())).is_ok() || reaches(rel, ix, snap, k, key)?
            {
                continue;
            }
            missing += 1;
            if p.len() < MAX_PROBLEMS {
                p.push(format!(
                    "{} row {tid:?} (key {k}) is not in {name}",
                    t.name()
                ));
            }
        }
        if missing > 0 {
            p.push(format!(
                "{name}: {missing} rows of {} not found through it",
                t.name()
            ));
        }
    }
    Ok(())
}

/// Whether an entry under `key` in `ix` leads to a row `snap` sees whose primary key is
/// `pkey`.
fn reaches(rel: &Rel<'_>, ix: &BTree<'_>, snap: &Snapshot, key: i64, pkey: i64) -> Result<bool> {
    let mut roots = Vec::new();
    ix.lookup(key, |v| roots.push(Tid::from_u64(v)))?;
    for root in roots {
        if rel.heap.fetch_with(snap, root, |_, d| rel.int(d, 0))? == Some(pkey) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The packed key `row` of `t` should hold in its first column, from its own columns
/// (None: history, which has no key).
fn packed_key(t: Table, rel: &Rel<'_>, row: &[u8]) -> Option<i64> {
    let i = |c: usize| rel.int(row, c) as u32;
    Some(match t {
        Table::Warehouse => keys::warehouse(i(1)),
        Table::District => keys::district(i(2), i(1)),
        Table::Customer => keys::customer(i(4), i(3), i(2)),
        Table::History => return None,
        Table::NewOrder => keys::order(i(3), i(2), i(1)),
        Table::Orders => keys::order(i(4), i(3), i(2)),
        Table::OrderLine => keys::order_line(i(3), i(2), i(1), i(4)),
        Table::Item => keys::item(i(1)),
        Table::Stock => keys::stock(i(2), i(1)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tpcc::schema::add_int;
    use bufpool::{Config, RealVfs};

    /// Proves: the check finds the loaded database consistent, then reports a district
    /// whose year-to-date moved without its warehouse's (condition 1), an order that lost
    /// a line (condition 4), and a row missing from its key.
    #[test]
    fn check_reports_broken_conditions_and_keys() {
        let d = tempfile::tempdir().unwrap();
        let c = Config::default();
        let engine = crate::cmd::open_engine(d.path(), &c, true).unwrap();
        let vfs = RealVfs::new();
        super::super::load::init(&engine, &vfs, d.path(), 1, &mut |_, _| {}).unwrap();
        let db = TpccDb::open(&engine, &vfs, d.path()).unwrap();
        let r = check(&db, &vfs, d.path()).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!((r.orders, r.new_orders), (30_000, 9_000));

        let t = engine.begin().unwrap();
        let x = t.xid().unwrap();
        let snap = t.snapshot();
        let dist = db.rel(Table::District);
        let (root, ()) = dist
            .find(&snap, keys::district(1, 3), |_| ())
            .unwrap()
            .unwrap();
        dist.heap
            .update(x, root, |r| {
                let mut r = r.to_vec();
                add_int(&dist.schema, &mut r, dc::YTD, 100);
                r
            })
            .unwrap();
        let ol = db.rel(Table::OrderLine);
        let (line, ()) = ol
            .find(&snap, keys::order_line(1, 4, 7, 1), |_| ())
            .unwrap()
            .unwrap();
        ol.heap.delete(x, line).unwrap();
        t.commit().unwrap();
        let stock = db.rel(Table::Stock);
        let (s, ()) = stock
            .find(&snap, keys::stock(1, 42), |_| ())
            .unwrap()
            .unwrap();
        stock
            .key()
            .delete(0, keys::stock(1, 42), s.to_u64())
            .unwrap();

        let r = check(&db, &vfs, d.path()).unwrap();
        let all = r.problems.join("\n");
        assert!(all.contains("condition 1, warehouse 1"), "{all}");
        assert!(all.contains("condition 4, district (1, 4)"), "{all}");
        assert!(all.contains("is not in stock_pkey"), "{all}");
        assert_eq!(r.problems.len(), 4, "{all}");
    }
}
