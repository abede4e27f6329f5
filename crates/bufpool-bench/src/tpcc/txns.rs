//! TPC-C's five transactions (clauses 2.4 to 2.8) as heap and index calls, each inside a
//! caller's [`Transaction`], which the caller commits (or, after a New-Order that asked
//! for the unused item, aborts: [`NewOrderOut::RolledBack`]).
//!
//! SQL to engine calls: a `SELECT` by key is an index lookup and a fetch under the
//! transaction's snapshot; an `UPDATE` is [`Heap::update`](bufpool::table::Heap), whose
//! function computes the new row from the newest committed version (re-run after a
//! concurrent writer commits first, as PostgreSQL's READ COMMITTED re-evaluates), so
//! counters (`d_next_o_id`, `s_quantity`, `w_ytd`, balances) never lose an increment; an
//! `INSERT` is a heap insert and one entry per index. Stock rows are updated in item order
//! (the input's lines are sorted), so two New-Orders never wait on each other in a cycle
//! through them; a deadlock that still happens is reported as one (the driver retries).
//!
//! Two index clean-ups keep the non-unique keys short ([`Cleanup`], [`TpccDb::after`]):
//! the entries of the rows a transaction inserted, when it is to abort (run before the
//! abort, while the rows are still its own, so their slots cannot have been reused by a
//! later insert under the same key: a rolled-back New-Order's number is taken again); and
//! a Delivery's new-order entries after it commits (deleted rows, whose only readers are
//! other Deliveries, which would find them deleted; their keys are never inserted again).
//! A crash before a clean-up leaves entries that every reader passes over (their rows are
//! not visible).

use bufpool::engine::Transaction;
use bufpool::table::Tid;
use bufpool::txn::Snapshot;

use super::inputs::{CustomerBy, DeliveryIn, NewOrderIn, OrderStatusIn, PaymentIn, StockLevelIn};
use super::inputs::{DISTRICTS, UNUSED_ITEM};
use super::schema::col::{customer as cc, district as dc, item as ic, new_order as nc};
use super::schema::col::{order_line as lc, orders as oc, stock as sc, warehouse as wc};
use super::schema::{add_int, keys, set_text, Table};
use super::{Rel, TpccDb};

type R<T> = anyhow::Result<T>;

/// An index entry to remove: its table, primary key, second index's key (if the table
/// has one) and root tuple id.
pub type Entry = (Table, i64, Option<i64>, Tid);

/// Index entries to remove ([`TpccDb::after`]): those of the rows the transaction
/// inserted if it is to abort, those of the rows it deleted once it has committed.
#[derive(Debug, Default)]
pub struct Cleanup {
    pub on_abort: Vec<Entry>,
    pub on_commit: Vec<Entry>,
}

/// What New-Order did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewOrderOut {
    /// The order's number and its total in cents (after discount and taxes).
    Placed { o_id: u32, total_cents: i64 },
    /// An item was not there: clean up (`after(.., false)`), then abort.
    RolledBack,
}

/// What Delivery did: orders delivered, of its ten districts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeliveryOut {
    pub delivered: u32,
}

/// A customer as Payment and Order-Status find it.
#[derive(Debug, Clone, Copy)]
struct Found {
    root: Tid,
    c: u32,
}

impl<'e> TpccDb<'e> {
    /// The customer `by` names in district (`w`, `d`): by id, or by last name the one at
    /// position n/2 rounded up of those with it ordered by first name (clause 2.5.2.2).
    fn customer(&self, snap: &Snapshot, w: u32, d: u32, by: CustomerBy) -> R<Option<Found>> {
        let t = self.rel(Table::Customer);
        match by {
            CustomerBy::Id(c) => Ok(t
                .find(snap, keys::customer(w, d, c), |_| ())?
                .map(|(root, ())| Found { root, c })),
            CustomerBy::Last(n) => {
                let ix = t.second.as_ref().expect("customer_last");
                let mut roots = Vec::new();
                ix.lookup(keys::customer_last(w, d, n), |v| {
                    roots.push(Tid::from_u64(v))
                })?;
                let mut found: Vec<(Vec<u8>, u32, Tid)> = Vec::with_capacity(roots.len());
                for root in roots {
                    if let Some(f) = t.heap.fetch_with(snap, root, |_, r| {
                        (t.text(r, cc::FIRST).to_vec(), t.int(r, cc::ID) as u32)
                    })? {
                        found.push((f.0, f.1, root));
                    }
                }
                if found.is_empty() {
                    return Ok(None);
                }
                found.sort();
                let (_, c, root) = found[found.len().div_ceil(2) - 1];
                Ok(Some(Found { root, c }))
            }
        }
    }

    /// New-Order (clause 2.4.2).
    pub fn new_order(
        &self,
        t: &Transaction<'_>,
        i: &NewOrderIn,
        now: i64,
        cleanup: &mut Cleanup,
    ) -> R<NewOrderOut> {
        let x = t.xid()?;
        let snap = t.snapshot();
        let (w, d) = (i.w, i.d);
        let wh = self.rel(Table::Warehouse);
        let w_tax = wh
            .find(&snap, keys::warehouse(w), |r| wh.int(r, wc::TAX))?
            .map(|f| f.1);
        let dist = self.rel(Table::District);
        let cust = self.rel(Table::Customer);
        let c = cust.find(&snap, keys::customer(w, d, i.c), |r| {
            cust.int(r, cc::DISCOUNT)
        })?;
        let (Some(w_tax), Some((_, discount))) = (w_tax, c) else {
            return Err(missing("warehouse or customer of a New-Order"));
        };
        let Some((droot, ())) = dist.find(&snap, keys::district(w, d), |_| ())? else {
            return Err(missing("district of a New-Order"));
        };
        let (mut o_id, mut d_tax) = (0u32, 0i64);
        dist.heap.update(x, droot, |r| {
            let mut r = r.to_vec();
            o_id = dist.int(&r, dc::NEXT_O_ID) as u32;
            d_tax = dist.int(&r, dc::TAX);
            dist.schema
                .set_int(&mut r, dc::NEXT_O_ID, i64::from(o_id) + 1);
            r
        })?;
        let orders = self.rel(Table::Orders);
        let mut o = orders.schema.blank_row();
        let s = &orders.schema;
        let okey = keys::order(w, d, o_id);
        let ockey = keys::order_of_customer(w, d, i.c, o_id);
        for (col, v) in [
            (oc::KEY, okey),
            (oc::C_KEY, ockey),
            (oc::ID, o_id.into()),
            (oc::ID + 1, d.into()),
            (oc::ID + 2, w.into()),
            (oc::C_ID, i.c.into()),
            (oc::ENTRY_D, now),
            (oc::CARRIER_ID, 0),
            (oc::OL_CNT, i.lines.len() as i64),
            (oc::OL_CNT + 1, i64::from(i.all_local())),
        ] {
            s.set_int(&mut o, col, v);
        }
        insert(orders, x, &o, okey, Some(ockey), Table::Orders, cleanup)?;
        let no = self.rel(Table::NewOrder);
        let mut r = no.schema.blank_row();
        for (col, v) in [
            (nc::KEY, okey),
            (nc::O_ID, o_id.into()),
            (nc::O_ID + 1, d.into()),
            (nc::O_ID + 2, w.into()),
        ] {
            no.schema.set_int(&mut r, col, v);
        }
        insert(no, x, &r, okey, None, Table::NewOrder, cleanup)?;
        let mut sum = 0i64;
        for (n, line) in i.lines.iter().enumerate() {
            let Some(amount) = self.order_line(t, &snap, i, o_id, n as u32 + 1, line, cleanup)?
            else {
                return Ok(NewOrderOut::RolledBack);
            };
            sum += amount;
        }
        // sum * (1 - discount) * (1 + w_tax + d_tax), rates in 1/10,000.
        let total =
            i128::from(sum) * i128::from(10_000 - discount) * i128::from(10_000 + w_tax + d_tax)
                / 100_000_000;
        Ok(NewOrderOut::Placed {
            o_id,
            total_cents: total as i64,
        })
    }

    /// One line of New-Order: the item, the stock's update, the line's insert. The line's
    /// amount, or None if the item is not there.
    #[allow(clippy::too_many_arguments)]
    fn order_line(
        &self,
        t: &Transaction<'_>,
        snap: &Snapshot,
        i: &NewOrderIn,
        o_id: u32,
        number: u32,
        line: &super::inputs::Line,
        cleanup: &mut Cleanup,
    ) -> R<Option<i64>> {
        let x = t.xid()?;
        let item = self.rel(Table::Item);
        let found = if line.item == UNUSED_ITEM {
            None
        } else {
            item.find(snap, keys::item(line.item), |r| {
                let original = contains_original(item.text(r, ic::DATA));
                (
                    item.int(r, ic::PRICE),
                    item.text(r, ic::NAME).len(),
                    original,
                )
            })?
            .map(|f| f.1)
        };
        let Some((price, _name_len, item_original)) = found else {
            return Ok(None);
        };
        let st = self.rel(Table::Stock);
        let Some((sroot, ())) = st.find(snap, keys::stock(line.supply_w, line.item), |_| ())?
        else {
            return Err(missing("stock row of an item"));
        };
        let q = i64::from(line.quantity);
        let remote = i64::from(line.supply_w != i.w);
        let mut dist_info = [b' '; 24];
        let mut stock_original = false;
        st.heap.update(x, sroot, |r| {
            let mut r = r.to_vec();
            let have = st.int(&r, sc::QUANTITY);
            let left = if have >= q + 10 {
                have - q
            } else {
                have - q + 91
            };
            st.schema.set_int(&mut r, sc::QUANTITY, left);
            add_int(&st.schema, &mut r, sc::YTD, q);
            add_int(&st.schema, &mut r, sc::ORDER_CNT, 1);
            add_int(&st.schema, &mut r, sc::REMOTE_CNT, remote);
            let di = st.text(&r, sc::DIST_01 + i.d as usize - 1);
            dist_info[..di.len()].copy_from_slice(di);
            stock_original = contains_original(st.text(&r, sc::DATA));
            r
        })?;
        // The brand-generic flag the terminal would show (clause 2.4.2.2).
        let _brand = if item_original && stock_original {
            b'B'
        } else {
            b'G'
        };
        let amount = q * price;
        let ol = self.rel(Table::OrderLine);
        let s = &ol.schema;
        let mut r = s.blank_row();
        let key = keys::order_line(i.w, i.d, o_id, number);
        for (col, v) in [
            (lc::KEY, key),
            (lc::O_ID, o_id.into()),
            (lc::O_ID + 1, i.d.into()),
            (lc::O_ID + 2, i.w.into()),
            (lc::O_ID + 3, number.into()),
            (lc::I_ID, line.item.into()),
            (lc::SUPPLY_W_ID, line.supply_w.into()),
            (lc::DELIVERY_D, 0),
            (lc::QUANTITY, q),
            (lc::AMOUNT, amount),
        ] {
            s.set_int(&mut r, col, v);
        }
        set_text(s, &mut r, lc::AMOUNT + 1, &dist_info);
        insert(ol, x, &r, key, None, Table::OrderLine, cleanup)?;
        Ok(Some(amount))
    }

    /// Payment (clause 2.5.2). Whether the customer was found.
    pub fn payment(&self, t: &Transaction<'_>, i: &PaymentIn, now: i64) -> R<bool> {
        let x = t.xid()?;
        let snap = t.snapshot();
        let a = i.amount_cents;
        let wh = self.rel(Table::Warehouse);
        let Some((wroot, ())) = wh.find(&snap, keys::warehouse(i.w), |_| ())? else {
            return Err(missing("warehouse of a Payment"));
        };
        let mut w_name = Vec::new();
        wh.heap.update(x, wroot, |r| {
            let mut r = r.to_vec();
            add_int(&wh.schema, &mut r, wc::YTD, a);
            w_name = wh.text(&r, wc::NAME).to_vec();
            r
        })?;
        let dist = self.rel(Table::District);
        let Some((droot, ())) = dist.find(&snap, keys::district(i.w, i.d), |_| ())? else {
            return Err(missing("district of a Payment"));
        };
        let mut d_name = Vec::new();
        dist.heap.update(x, droot, |r| {
            let mut r = r.to_vec();
            add_int(&dist.schema, &mut r, dc::YTD, a);
            d_name = dist.text(&r, dc::NAME).to_vec();
            r
        })?;
        let Some(f) = self.customer(&snap, i.c_w, i.c_d, i.customer)? else {
            return Ok(false);
        };
        let cust = self.rel(Table::Customer);
        let s = &cust.schema;
        cust.heap.update(x, f.root, |r| {
            let mut r = r.to_vec();
            add_int(s, &mut r, cc::BALANCE, -a);
            add_int(s, &mut r, cc::YTD_PAYMENT, a);
            add_int(s, &mut r, cc::PAYMENT_CNT, 1);
            if cust.text(&r, cc::CREDIT) == b"BC" {
                let mut data = i.bad_credit_note(f.c).into_bytes();
                data.extend_from_slice(cust.text(&r, cc::DATA));
                set_text(s, &mut r, cc::DATA, &data);
            }
            r
        })?;
        let h = self.rel(Table::History);
        let mut r = h.schema.blank_row();
        for (col, v) in [
            (0, i64::from(f.c)),
            (1, i.c_d.into()),
            (2, i.c_w.into()),
            (3, i.d.into()),
            (4, i.w.into()),
            (5, now),
            (super::schema::col::history::AMOUNT, a),
        ] {
            h.schema.set_int(&mut r, col, v);
        }
        let mut data = w_name;
        data.extend_from_slice(b"    ");
        data.extend_from_slice(&d_name);
        set_text(&h.schema, &mut r, 7, &data);
        h.heap.insert(x, &r)?;
        Ok(true)
    }

    /// Order-Status (clause 2.6.2): reads only. The lines of the customer's newest
    /// order, or None if the customer or their order was not found.
    pub fn order_status(&self, t: &Transaction<'_>, i: &OrderStatusIn) -> R<Option<u32>> {
        let snap = t.snapshot();
        let Some(f) = self.customer(&snap, i.w, i.d, i.customer)? else {
            return Ok(None);
        };
        let cust = self.rel(Table::Customer);
        cust.heap.fetch_with(&snap, f.root, |_, r| {
            let names = [cc::FIRST, cc::MIDDLE, cc::LAST].map(|c| cust.text(r, c).len());
            (cust.int(r, cc::BALANCE), names)
        })?;
        let orders = self.rel(Table::Orders);
        let ix = orders.second.as_ref().expect("orders_customer");
        let mut entries = Vec::new();
        Rel::entries(
            ix,
            keys::order_of_customer(i.w, i.d, f.c, 0),
            keys::order_of_customer(i.w, i.d, f.c, keys::MAX_ORDER),
            &mut entries,
        )?;
        let mut newest = None;
        for &(_, root) in entries.iter().rev() {
            newest = orders.heap.fetch_with(&snap, root, |_, r| {
                (orders.int(r, oc::ID) as u32, orders.int(r, oc::CARRIER_ID))
            })?;
            if newest.is_some() {
                break;
            }
        }
        let Some((o_id, _carrier)) = newest else {
            return Ok(None);
        };
        let ol = self.rel(Table::OrderLine);
        Rel::entries(
            ol.key(),
            keys::order_line(i.w, i.d, o_id, 0),
            keys::order_line(i.w, i.d, o_id, 15),
            &mut entries,
        )?;
        let mut lines = 0;
        for &(_, root) in &entries {
            let got = ol.heap.fetch_with(&snap, root, |_, r| {
                (
                    ol.int(r, lc::I_ID),
                    ol.int(r, lc::AMOUNT),
                    ol.int(r, lc::DELIVERY_D),
                )
            })?;
            lines += u32::from(got.is_some());
        }
        Ok(Some(lines))
    }

    /// Delivery (clause 2.7.4): for each district, the oldest undelivered order is
    /// delivered. Its new-order entries go to `cleanup`.
    pub fn delivery(
        &self,
        t: &Transaction<'_>,
        i: &DeliveryIn,
        now: i64,
        cleanup: &mut Cleanup,
    ) -> R<DeliveryOut> {
        let x = t.xid()?;
        let snap = t.snapshot();
        let mut out = DeliveryOut::default();
        let no = self.rel(Table::NewOrder);
        let mut entries = Vec::new();
        for d in 1..=DISTRICTS {
            // The oldest new-order row this transaction sees and deletes first.
            let mut from = keys::order(i.w, d, 0);
            let hi = keys::order(i.w, d, keys::MAX_ORDER);
            let mut taken = None;
            'scan: loop {
                entries.clear();
                no.key().range(from, hi, |k, v| {
                    entries.push((k, Tid::from_u64(v)));
                    entries.len() < 16
                })?;
                for &(k, root) in &entries {
                    let o = no
                        .heap
                        .fetch_with(&snap, root, |_, r| no.int(r, nc::O_ID))?;
                    if let Some(o) = o {
                        if no.heap.delete(x, root)? {
                            taken = Some((k, root, o as u32));
                            break 'scan;
                        }
                    }
                }
                match entries.last() {
                    Some(&(k, _)) if entries.len() == 16 => from = k,
                    _ => break,
                }
            }
            let Some((k, root, o_id)) = taken else {
                continue;
            };
            cleanup.on_commit.push((Table::NewOrder, k, None, root));
            self.deliver(x, &snap, i, d, o_id, now)?;
            out.delivered += 1;
        }
        Ok(out)
    }

    /// Delivers order `o_id` of district (`i.w`, `d`): its carrier, its lines' date, the
    /// customer's balance and count.
    fn deliver(
        &self,
        x: bufpool::txn::Xid,
        snap: &Snapshot,
        i: &DeliveryIn,
        d: u32,
        o_id: u32,
        now: i64,
    ) -> R<()> {
        let orders = self.rel(Table::Orders);
        let Some((oroot, ())) = orders.find(snap, keys::order(i.w, d, o_id), |_| ())? else {
            return Err(missing("order of a new-order row"));
        };
        let mut c = 0u32;
        orders.heap.update(x, oroot, |r| {
            let mut r = r.to_vec();
            c = orders.int(&r, oc::C_ID) as u32;
            orders
                .schema
                .set_int(&mut r, oc::CARRIER_ID, i.carrier.into());
            r
        })?;
        let ol = self.rel(Table::OrderLine);
        let mut entries = Vec::new();
        Rel::entries(
            ol.key(),
            keys::order_line(i.w, d, o_id, 0),
            keys::order_line(i.w, d, o_id, 15),
            &mut entries,
        )?;
        let mut sum = 0i64;
        for &(_, root) in &entries {
            if ol.heap.fetch_with(snap, root, |_, _| ())?.is_none() {
                continue;
            }
            let mut amount = 0;
            ol.heap.update(x, root, |r| {
                let mut r = r.to_vec();
                amount = ol.int(&r, lc::AMOUNT);
                ol.schema.set_int(&mut r, lc::DELIVERY_D, now);
                r
            })?;
            sum += amount;
        }
        let cust = self.rel(Table::Customer);
        let Some((croot, ())) = cust.find(snap, keys::customer(i.w, d, c), |_| ())? else {
            return Err(missing("customer of an order"));
        };
        cust.heap.update(x, croot, |r| {
            let mut r = r.to_vec();
            let s = &cust.schema;
            add_int(s, &mut r, cc::BALANCE, sum);
            add_int(s, &mut r, cc::DELIVERY_CNT, 1);
            r
        })?;
        Ok(())
    }

    /// Stock-Level (clause 2.8.2): reads only. Distinct items of the district's last 20
    /// orders whose stock is below the threshold.
    pub fn stock_level(&self, t: &Transaction<'_>, i: &StockLevelIn) -> R<u32> {
        let snap = t.snapshot();
        let dist = self.rel(Table::District);
        let Some((_, next)) = dist.find(&snap, keys::district(i.w, i.d), |r| {
            dist.int(r, dc::NEXT_O_ID) as u32
        })?
        else {
            return Err(missing("district of a Stock-Level"));
        };
        let ol = self.rel(Table::OrderLine);
        let mut entries = Vec::new();
        Rel::entries(
            ol.key(),
            keys::order_line(i.w, i.d, next.saturating_sub(20), 0),
            keys::order_line(i.w, i.d, next.saturating_sub(1), 15),
            &mut entries,
        )?;
        let mut items = Vec::with_capacity(entries.len());
        for &(_, root) in &entries {
            if let Some(item) = ol
                .heap
                .fetch_with(&snap, root, |_, r| ol.int(r, lc::I_ID))?
            {
                items.push(item as u32);
            }
        }
        items.sort_unstable();
        items.dedup();
        let st = self.rel(Table::Stock);
        let mut low = 0;
        for item in items {
            let q = st.find(&snap, keys::stock(i.w, item), |r| st.int(r, sc::QUANTITY))?;
            low += u32::from(q.is_some_and(|(_, q)| q < i64::from(i.threshold)));
        }
        Ok(low)
    }

    /// Removes the entries of `cleanup` no snapshot can need, and empties it: once the
    /// transaction that filled it has `committed`, or (`false`) while it is still open
    /// and about to abort.
    pub fn after(&self, cleanup: &mut Cleanup, committed: bool) -> R<()> {
        let (stale, keep) = if committed {
            (&mut cleanup.on_commit, &mut cleanup.on_abort)
        } else {
            (&mut cleanup.on_abort, &mut cleanup.on_commit)
        };
        keep.clear();
        for (t, key, second, root) in stale.drain(..) {
            let r = self.rel(t);
            r.key().delete(0, key, root.to_u64())?;
            if let (Some(ix), Some(k)) = (&r.second, second) {
                ix.delete(0, k, root.to_u64())?;
            }
        }
        Ok(())
    }
}

/// Inserts `row` into table `t` (`rel`) and its entries, recording them in `cleanup` in
/// case the transaction rolls back.
fn insert(
    rel: &Rel<'_>,
    x: bufpool::txn::Xid,
    row: &[u8],
    key: i64,
    second: Option<i64>,
    t: Table,
    cleanup: &mut Cleanup,
) -> R<()> {
    let tid = rel.heap.insert(x, row)?;
    cleanup.on_abort.push((t, key, second, tid));
    rel.key().insert(x, key, tid.to_u64())?;
    if let (Some(ix), Some(k)) = (&rel.second, second) {
        ix.insert(x, k, tid.to_u64())?;
    }
    Ok(())
}

/// Whether item or stock data holds `ORIGINAL`.
fn contains_original(data: &[u8]) -> bool {
    data.windows(8).any(|w| w == b"ORIGINAL")
}

/// A row the load made that a transaction did not find: the database is not TPC-C's as
/// loaded (the check says more).
fn missing(what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "TPC-C: no {what}: the database is not as the load made it (run `bufpool check`)"
    )
}
