//! TPC-C's nine tables (clause 1.3) as bufpool schemas, their column positions, and the
//! packed integer keys their indexes key on ([`keys`]).
//!
//! Every column of the specification is here, at its largest size (`char(N)` for
//! `varchar(N)`: rows are fixed-width). Money is in cents (`int8`), tax and discount in
//! 1/10,000 (`int4`), dates in microseconds since the Unix epoch (`int8`), and NULL (an
//! undelivered order's carrier, its lines' delivery date) is 0. Each table with a key
//! starts with it: `*_key`, the packed primary key.

use bufpool::table::{ColumnType, Schema};

use ColumnType::{Char, Int4, Int8};

/// The tables, in the order [`super::TpccDb`] keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Warehouse,
    District,
    Customer,
    History,
    NewOrder,
    Orders,
    OrderLine,
    Item,
    Stock,
}

/// Column positions of each table (checked against the schemas by a test).
pub mod col {
    pub mod warehouse {
        pub const NAME: usize = 2;
        pub const TAX: usize = 8;
        pub const YTD: usize = 9;
    }
    pub mod district {
        pub const NAME: usize = 3;
        pub const TAX: usize = 9;
        pub const YTD: usize = 10;
        pub const NEXT_O_ID: usize = 11;
    }
    pub mod customer {
        pub const LAST_KEY: usize = 1;
        pub const ID: usize = 2;
        pub const FIRST: usize = 5;
        pub const MIDDLE: usize = 6;
        pub const LAST: usize = 7;
        pub const CREDIT: usize = 15;
        pub const DISCOUNT: usize = 17;
        pub const BALANCE: usize = 18;
        pub const YTD_PAYMENT: usize = 19;
        pub const PAYMENT_CNT: usize = 20;
        pub const DELIVERY_CNT: usize = 21;
        pub const DATA: usize = 22;
    }
    pub mod history {
        pub const AMOUNT: usize = 6;
    }
    pub mod new_order {
        pub const KEY: usize = 0;
        pub const O_ID: usize = 1;
    }
    pub mod orders {
        pub const KEY: usize = 0;
        pub const C_KEY: usize = 1;
        pub const ID: usize = 2;
        pub const C_ID: usize = 5;
        pub const ENTRY_D: usize = 6;
        pub const CARRIER_ID: usize = 7;
        pub const OL_CNT: usize = 8;
    }
    pub mod order_line {
        pub const KEY: usize = 0;
        pub const O_ID: usize = 1;
        pub const I_ID: usize = 5;
        pub const SUPPLY_W_ID: usize = 6;
        pub const DELIVERY_D: usize = 7;
        pub const QUANTITY: usize = 8;
        pub const AMOUNT: usize = 9;
    }
    pub mod item {
        pub const PRICE: usize = 4;
        pub const NAME: usize = 3;
        pub const DATA: usize = 5;
    }
    pub mod stock {
        pub const QUANTITY: usize = 3;
        /// `s_dist_01`; district `d`'s is at `DIST_01 + d - 1`.
        pub const DIST_01: usize = 4;
        pub const YTD: usize = 14;
        pub const ORDER_CNT: usize = 15;
        pub const REMOTE_CNT: usize = 16;
        pub const DATA: usize = 17;
    }
}

const ADDRESS: [ColumnType; 5] = [Char(20), Char(20), Char(20), Char(2), Char(9)];

impl Table {
    /// Every table.
    pub const ALL: [Table; 9] = [
        Table::Warehouse,
        Table::District,
        Table::Customer,
        Table::History,
        Table::NewOrder,
        Table::Orders,
        Table::OrderLine,
        Table::Item,
        Table::Stock,
    ];

    /// Its name (the specification's).
    pub fn name(self) -> &'static str {
        match self {
            Table::Warehouse => "warehouse",
            Table::District => "district",
            Table::Customer => "customer",
            Table::History => "history",
            Table::NewOrder => "new_order",
            Table::Orders => "orders",
            Table::OrderLine => "order_line",
            Table::Item => "item",
            Table::Stock => "stock",
        }
    }

    /// Its primary key's name and column (None: history has none).
    pub fn pkey(self) -> Option<(&'static str, &'static str)> {
        Some(match self {
            Table::Warehouse => ("warehouse_pkey", "w_key"),
            Table::District => ("district_pkey", "d_key"),
            Table::Customer => ("customer_pkey", "c_key"),
            Table::History => return None,
            Table::NewOrder => ("new_order_pkey", "no_key"),
            Table::Orders => ("orders_pkey", "o_key"),
            Table::OrderLine => ("order_line_pkey", "ol_key"),
            Table::Item => ("item_pkey", "i_key"),
            Table::Stock => ("stock_pkey", "s_key"),
        })
    }

    /// Its primary key's name.
    pub fn pkey_name(self) -> Option<&'static str> {
        self.pkey().map(|p| p.0)
    }

    /// Its second index's name and column: customers by district and last name, orders
    /// by customer (then order number).
    pub fn second_index(self) -> Option<(&'static str, &'static str)> {
        match self {
            Table::Customer => Some(("customer_last", "c_last_key")),
            Table::Orders => Some(("orders_customer", "o_c_key")),
            _ => None,
        }
    }

    /// Whether its indexes are unique: the tables New-Order inserts into are not (a
    /// rolled-back order's number is taken again; see the module doc of `tpcc`), nor is
    /// the last-name index.
    pub fn unique(self) -> bool {
        !matches!(
            self,
            Table::NewOrder | Table::Orders | Table::OrderLine | Table::History
        )
    }

    /// Its rows after the load of `w` warehouses (clause 4.3.3.1's cardinalities; order
    /// lines on average).
    pub fn rows(self, w: u32) -> u64 {
        let w = u64::from(w);
        match self {
            Table::Warehouse => w,
            Table::District => 10 * w,
            Table::Customer | Table::History | Table::Orders => 30_000 * w,
            Table::NewOrder => 9_000 * w,
            Table::OrderLine => 300_000 * w,
            Table::Item => 100_000,
            Table::Stock => 100_000 * w,
        }
    }

    /// Its row layout.
    pub fn schema(self) -> Schema {
        let cols = self.columns();
        let refs: Vec<(&str, ColumnType)> = cols.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        Schema::new(&refs)
    }

    /// Its columns, in row order.
    fn columns(self) -> Vec<(String, ColumnType)> {
        let mut cols: Vec<(String, ColumnType)> = Vec::new();
        let add = |cols: &mut Vec<(String, ColumnType)>, list: &[(&str, ColumnType)]| {
            cols.extend(list.iter().map(|(n, t)| (n.to_string(), *t)));
        };
        match self {
            Table::Warehouse => {
                add(
                    &mut cols,
                    &[("w_key", Int8), ("w_id", Int4), ("w_name", Char(10))],
                );
                cols.extend(address("w"));
                add(&mut cols, &[("w_tax", Int4), ("w_ytd", Int8)]);
            }
            Table::District => {
                add(
                    &mut cols,
                    &[
                        ("d_key", Int8),
                        ("d_id", Int4),
                        ("d_w_id", Int4),
                        ("d_name", Char(10)),
                    ],
                );
                cols.extend(address("d"));
                add(
                    &mut cols,
                    &[("d_tax", Int4), ("d_ytd", Int8), ("d_next_o_id", Int4)],
                );
            }
            Table::Customer => return customer_columns(),
            Table::Stock => {
                add(
                    &mut cols,
                    &[
                        ("s_key", Int8),
                        ("s_i_id", Int4),
                        ("s_w_id", Int4),
                        ("s_quantity", Int4),
                    ],
                );
                cols.extend((1..=10).map(|d| (format!("s_dist_{d:02}"), Char(24))));
                add(
                    &mut cols,
                    &[
                        ("s_ytd", Int8),
                        ("s_order_cnt", Int4),
                        ("s_remote_cnt", Int4),
                        ("s_data", Char(50)),
                    ],
                );
            }
            t => add(&mut cols, t.flat_columns()),
        }
        cols
    }

    /// The columns of the tables without an address or a run of like columns.
    fn flat_columns(self) -> &'static [(&'static str, ColumnType)] {
        match self {
            Table::History => &[
                ("h_c_id", Int4),
                ("h_c_d_id", Int4),
                ("h_c_w_id", Int4),
                ("h_d_id", Int4),
                ("h_w_id", Int4),
                ("h_date", Int8),
                ("h_amount", Int8),
                ("h_data", Char(24)),
            ],
            Table::NewOrder => &[
                ("no_key", Int8),
                ("no_o_id", Int4),
                ("no_d_id", Int4),
                ("no_w_id", Int4),
            ],
            Table::Orders => &[
                ("o_key", Int8),
                ("o_c_key", Int8),
                ("o_id", Int4),
                ("o_d_id", Int4),
                ("o_w_id", Int4),
                ("o_c_id", Int4),
                ("o_entry_d", Int8),
                ("o_carrier_id", Int4),
                ("o_ol_cnt", Int4),
                ("o_all_local", Int4),
            ],
            Table::OrderLine => &[
                ("ol_key", Int8),
                ("ol_o_id", Int4),
                ("ol_d_id", Int4),
                ("ol_w_id", Int4),
                ("ol_number", Int4),
                ("ol_i_id", Int4),
                ("ol_supply_w_id", Int4),
                ("ol_delivery_d", Int8),
                ("ol_quantity", Int4),
                ("ol_amount", Int8),
                ("ol_dist_info", Char(24)),
            ],
            Table::Item => &[
                ("i_key", Int8),
                ("i_id", Int4),
                ("i_im_id", Int4),
                ("i_name", Char(24)),
                ("i_price", Int8),
                ("i_data", Char(50)),
            ],
            _ => &[],
        }
    }
}

/// An address's five columns, prefixed `p_`.
fn address(p: &str) -> Vec<(String, ColumnType)> {
    ["street_1", "street_2", "city", "state", "zip"]
        .iter()
        .zip(ADDRESS)
        .map(|(n, t)| (format!("{p}_{n}"), t))
        .collect()
}

/// The customer table's columns.
fn customer_columns() -> Vec<(String, ColumnType)> {
    let head = [
        ("c_key", Int8),
        ("c_last_key", Int8),
        ("c_id", Int4),
        ("c_d_id", Int4),
        ("c_w_id", Int4),
        ("c_first", Char(16)),
        ("c_middle", Char(2)),
        ("c_last", Char(16)),
    ];
    let tail = [
        ("c_phone", Char(16)),
        ("c_since", Int8),
        ("c_credit", Char(2)),
        ("c_credit_lim", Int8),
        ("c_discount", Int4),
        ("c_balance", Int8),
        ("c_ytd_payment", Int8),
        ("c_payment_cnt", Int4),
        ("c_delivery_cnt", Int4),
        ("c_data", Char(500)),
    ];
    let named = |l: &[(&str, ColumnType)]| -> Vec<(String, ColumnType)> {
        l.iter().map(|(n, t)| (n.to_string(), *t)).collect()
    };
    let mut cols = named(&head);
    cols.extend(address("c"));
    cols.extend(named(&tail));
    cols
}

/// The text in column `c` of `row`, without its padding.
pub fn text<'r>(s: &Schema, row: &'r [u8], c: usize) -> &'r [u8] {
    let o = s.offset(c);
    let v = &row[o..o + s.columns[c].ty.width()];
    let end = v
        .iter()
        .rposition(|&b| b != b' ' && b != 0)
        .map_or(0, |i| i + 1);
    &v[..end]
}

/// Adds `delta` to the integer in column `c` of `row`.
pub fn add_int(s: &Schema, row: &mut [u8], c: usize, delta: i64) {
    let v = s.get_int(row, c);
    s.set_int(row, c, v + delta);
}

/// Sets the text in column `c` of `row`: `v`, cut to the column's width, space-padded.
pub fn set_text(s: &Schema, row: &mut [u8], c: usize, v: &[u8]) {
    let o = s.offset(c);
    let w = s.columns[c].ty.width();
    let n = v.len().min(w);
    row[o..o + n].copy_from_slice(&v[..n]);
    row[o + n..o + w].fill(b' ');
}

/// The packed keys: each a non-negative `i64` whose order is the composite key's. A
/// district is at most 10 and fits 4 bits, a customer 3,000 in 12, an order number in 24
/// (16.7 million orders per district), a line number (at most 15) in 4, an item 100,000
/// in 17; the warehouse takes the bits left (more than 2^20 warehouses).
pub mod keys {
    /// Bits of an order number.
    pub const ORDER_BITS: u32 = 24;
    /// The largest order number a key holds.
    pub const MAX_ORDER: u32 = (1 << ORDER_BITS) - 1;

    /// Warehouse `w`.
    pub fn warehouse(w: u32) -> i64 {
        i64::from(w)
    }

    /// District `d` of warehouse `w`.
    pub fn district(w: u32, d: u32) -> i64 {
        i64::from(w) << 4 | i64::from(d)
    }

    /// Customer `c` of district (`w`, `d`).
    pub fn customer(w: u32, d: u32, c: u32) -> i64 {
        district(w, d) << 12 | i64::from(c)
    }

    /// Customers of district (`w`, `d`) with last name number `last` (0..=999).
    pub fn customer_last(w: u32, d: u32, last: u32) -> i64 {
        district(w, d) << 10 | i64::from(last)
    }

    /// Order `o` of district (`w`, `d`) (also its new-order row's key).
    pub fn order(w: u32, d: u32, o: u32) -> i64 {
        district(w, d) << ORDER_BITS | i64::from(o)
    }

    /// Order `o` of customer `c` of district (`w`, `d`).
    pub fn order_of_customer(w: u32, d: u32, c: u32, o: u32) -> i64 {
        customer(w, d, c) << ORDER_BITS | i64::from(o)
    }

    /// Line `n` of order `o` of district (`w`, `d`).
    pub fn order_line(w: u32, d: u32, o: u32, n: u32) -> i64 {
        order(w, d, o) << 4 | i64::from(n)
    }

    /// Item `i`.
    pub fn item(i: u32) -> i64 {
        i64::from(i)
    }

    /// Warehouse `w`'s stock of item `i`.
    pub fn stock(w: u32, i: u32) -> i64 {
        i64::from(w) << 17 | i64::from(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: each column constant names the column the schema has at that place.
    #[test]
    fn column_constants_match_the_schemas() {
        let at = |t: Table, name: &str| t.schema().column(name).unwrap();
        use col::*;
        assert_eq!(at(Table::Warehouse, "w_name"), warehouse::NAME);
        assert_eq!(at(Table::Warehouse, "w_tax"), warehouse::TAX);
        assert_eq!(at(Table::Warehouse, "w_ytd"), warehouse::YTD);
        assert_eq!(at(Table::District, "d_name"), district::NAME);
        assert_eq!(at(Table::District, "d_tax"), district::TAX);
        assert_eq!(at(Table::District, "d_ytd"), district::YTD);
        assert_eq!(at(Table::District, "d_next_o_id"), district::NEXT_O_ID);
        for (n, c) in [
            ("c_last_key", customer::LAST_KEY),
            ("c_id", customer::ID),
            ("c_first", customer::FIRST),
            ("c_middle", customer::MIDDLE),
            ("c_last", customer::LAST),
            ("c_credit", customer::CREDIT),
            ("c_discount", customer::DISCOUNT),
            ("c_balance", customer::BALANCE),
            ("c_ytd_payment", customer::YTD_PAYMENT),
            ("c_payment_cnt", customer::PAYMENT_CNT),
            ("c_delivery_cnt", customer::DELIVERY_CNT),
            ("c_data", customer::DATA),
        ] {
            assert_eq!(at(Table::Customer, n), c, "{n}");
        }
        assert_eq!(at(Table::History, "h_amount"), history::AMOUNT);
        assert_eq!(at(Table::NewOrder, "no_o_id"), new_order::O_ID);
        for (n, c) in [
            ("o_c_key", orders::C_KEY),
            ("o_id", orders::ID),
            ("o_c_id", orders::C_ID),
            ("o_entry_d", orders::ENTRY_D),
            ("o_carrier_id", orders::CARRIER_ID),
            ("o_ol_cnt", orders::OL_CNT),
        ] {
            assert_eq!(at(Table::Orders, n), c, "{n}");
        }
        for (n, c) in [
            ("ol_o_id", order_line::O_ID),
            ("ol_i_id", order_line::I_ID),
            ("ol_supply_w_id", order_line::SUPPLY_W_ID),
            ("ol_delivery_d", order_line::DELIVERY_D),
            ("ol_quantity", order_line::QUANTITY),
            ("ol_amount", order_line::AMOUNT),
        ] {
            assert_eq!(at(Table::OrderLine, n), c, "{n}");
        }
        assert_eq!(at(Table::Item, "i_name"), item::NAME);
        assert_eq!(at(Table::Item, "i_price"), item::PRICE);
        assert_eq!(at(Table::Item, "i_data"), item::DATA);
        for (n, c) in [
            ("s_quantity", stock::QUANTITY),
            ("s_dist_01", stock::DIST_01),
            ("s_dist_10", stock::DIST_01 + 9),
            ("s_ytd", stock::YTD),
            ("s_order_cnt", stock::ORDER_CNT),
            ("s_remote_cnt", stock::REMOTE_CNT),
            ("s_data", stock::DATA),
        ] {
            assert_eq!(at(Table::Stock, n), c, "{n}");
        }
        for t in Table::ALL {
            if let Some((_, column)) = t.pkey() {
                assert_eq!(t.schema().column(column), Some(0), "{t:?}");
            }
        }
    }

    /// Proves: packed keys keep the composite keys' order and do not collide across
    /// their parts' ranges.
    #[test]
    fn packed_keys_keep_order() {
        use keys::*;
        assert!(order(1, 10, keys::MAX_ORDER) < order(2, 1, 1));
        assert!(order_line(1, 2, 7, 15) < order_line(1, 2, 8, 1));
        assert!(customer(1, 10, 3000) < customer(2, 1, 1));
        assert!(customer_last(3, 10, 999) < customer_last(4, 1, 0));
        assert!(stock(1, 100_000) < stock(2, 1));
        assert!(order_of_customer(1, 1, 3000, keys::MAX_ORDER) < order_of_customer(1, 2, 1, 0));
        assert!(order_line(1 << 20, 10, keys::MAX_ORDER, 15) > 0);
    }
}
