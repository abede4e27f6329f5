//! TPC-C's inputs (revision 5.11, clauses 2.1 to 2.8 and 4.3.2): the non-uniform random
//! numbers (NURand and its constants C), customer last names from their syllables, the
//! random strings of the load, the mix of the five transactions, and each transaction's
//! input data as a terminal draws it. A leaf: bufpool's transactions (`txns.rs`) and
//! SQLite's (`compare::sqlite_tpcc`) run the same inputs from the same draws.
//!
//! Money is in cents (`i64`); tax and discount rates in units of 1/10,000 (`i64`, so 0.1234
//! is 1234); dates in microseconds since the Unix epoch, 0 standing for SQL's NULL (an
//! undelivered order's carrier and delivery date).

use rand::rngs::SmallRng;
use rand::Rng;

/// Districts per warehouse (clause 1.2).
pub const DISTRICTS: u32 = 10;
/// Customers per district.
pub const CUSTOMERS: u32 = 3000;
/// Items (one catalogue for every warehouse).
pub const ITEMS: u32 = 100_000;
/// Orders per district the load makes.
pub const ORDERS: u32 = 3000;
/// The first order of a district the load leaves undelivered (with a new-order row).
pub const FIRST_NEW_ORDER: u32 = 2101;
/// An item number no item has: New-Order's rolled-back 1% asks for it (clause 2.4.1.4).
pub const UNUSED_ITEM: u32 = ITEMS + 1;

/// Syllables of customer last names (clause 4.3.2.3).
const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// Customer last name number `n` (0..=999): its three digits' syllables.
pub fn last_name(n: u32) -> String {
    let n = n % 1000;
    let mut s = String::with_capacity(16);
    for d in [n / 100, n / 10 % 10, n % 10] {
        s.push_str(SYLLABLES[d as usize]);
    }
    s
}

/// The constants C of NURand for customer last names, customer ids and item ids (clause
/// 2.1.6): the load draws one set; a run draws its own, its last-name constant a
/// permitted distance from the load's (clause 2.1.6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Constants {
    pub c_last: u32,
    pub c_id: u32,
    pub ol_i_id: u32,
}

impl Constants {
    /// The load's constants.
    pub fn for_load(rng: &mut SmallRng) -> Constants {
        Constants {
            c_last: rng.random_range(0..=255),
            c_id: rng.random_range(0..=1023),
            ol_i_id: rng.random_range(0..=8191),
        }
    }

    /// A run's constants beside the load's `load`: the last-name constant differs from
    /// the load's by 65 to 119, but not 96 or 112.
    pub fn for_run(load: &Constants, rng: &mut SmallRng) -> Constants {
        let c_last = loop {
            let c = rng.random_range(0..=255u32);
            let delta = c.abs_diff(load.c_last);
            if (65..=119).contains(&delta) && delta != 96 && delta != 112 {
                break c;
            }
        };
        Constants {
            c_last,
            c_id: rng.random_range(0..=1023),
            ol_i_id: rng.random_range(0..=8191),
        }
    }
}

/// NURand(A, x, y) with constant `c` (clause 2.1.6).
pub fn nurand(rng: &mut SmallRng, a: u32, x: u32, y: u32, c: u32) -> u32 {
    (((rng.random_range(0..=a) | rng.random_range(x..=y)) + c) % (y - x + 1)) + x
}

/// A customer id drawn by NURand(1023, 1, 3000).
pub fn customer_id(rng: &mut SmallRng, k: &Constants) -> u32 {
    nurand(rng, 1023, 1, CUSTOMERS, k.c_id)
}

/// A last-name number drawn by NURand(255, 0, 999).
pub fn last_name_number(rng: &mut SmallRng, k: &Constants) -> u32 {
    nurand(rng, 255, 0, 999, k.c_last)
}

/// A random a-string of `min..=max` letters and digits (clause 4.3.2.2).
pub fn a_string(rng: &mut SmallRng, min: usize, max: usize) -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let n = rng.random_range(min..=max);
    (0..n)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}

/// A random n-string of `min..=max` digits.
pub fn n_string(rng: &mut SmallRng, min: usize, max: usize) -> String {
    let n = rng.random_range(min..=max);
    (0..n)
        .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
        .collect()
}

/// A zip code: four random digits and `11111` (clause 4.3.2.7).
pub fn zip(rng: &mut SmallRng) -> String {
    format!("{}11111", n_string(rng, 4, 4))
}

/// Item or stock data: an a-string of 26 to 50, one in ten with `ORIGINAL` at a random
/// place (clause 4.3.3.1).
pub fn data_original(rng: &mut SmallRng) -> String {
    let mut s = a_string(rng, 26, 50);
    if rng.random_range(0..10) == 0 {
        let at = rng.random_range(0..=s.len() - 8);
        s.replace_range(at..at + 8, "ORIGINAL");
    }
    s
}

/// The five transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl Kind {
    /// Every kind, in the order of counts and reports.
    pub const ALL: [Kind; 5] = [
        Kind::NewOrder,
        Kind::Payment,
        Kind::OrderStatus,
        Kind::Delivery,
        Kind::StockLevel,
    ];

    /// Its name in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Kind::NewOrder => "new_order",
            Kind::Payment => "payment",
            Kind::OrderStatus => "order_status",
            Kind::Delivery => "delivery",
            Kind::StockLevel => "stock_level",
        }
    }

    /// Its share of the mix, in percent: 45/43/4/4/4 (clause 5.2.3's minimums for the
    /// four, New-Order the rest).
    pub fn percent(self) -> u32 {
        match self {
            Kind::NewOrder => 45,
            Kind::Payment => 43,
            Kind::OrderStatus | Kind::Delivery | Kind::StockLevel => 4,
        }
    }

    /// The kind a draw `u` in 0..100 picks (for a client that draws the mix itself).
    pub fn pick(u: u32) -> Kind {
        let mut acc = 0;
        for k in Kind::ALL {
            acc += k.percent();
            if u < acc {
                return k;
            }
        }
        Kind::StockLevel
    }

    /// Its position in [`Kind::ALL`].
    pub fn index(self) -> usize {
        Kind::ALL.iter().position(|&k| k == self).expect("in ALL")
    }
}

/// How a transaction picks its customer: by id, or 60% of the time by last name (the
/// middle one, by first name, of those with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CustomerBy {
    Id(u32),
    /// A last-name number (see [`last_name`]).
    Last(u32),
}

impl CustomerBy {
    fn draw(rng: &mut SmallRng, k: &Constants) -> CustomerBy {
        if rng.random_range(1..=100) <= 60 {
            CustomerBy::Last(last_name_number(rng, k))
        } else {
            CustomerBy::Id(customer_id(rng, k))
        }
    }
}

/// One order line of a New-Order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line {
    pub item: u32,
    pub supply_w: u32,
    pub quantity: u32,
}

/// New-Order's input (clause 2.4.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOrderIn {
    pub w: u32,
    pub d: u32,
    pub c: u32,
    pub lines: Vec<Line>,
}

impl NewOrderIn {
    /// Whether every line is supplied by the home warehouse.
    pub fn all_local(&self) -> bool {
        self.lines.iter().all(|l| l.supply_w == self.w)
    }

    /// Whether it asks for the unused item, so rolls back.
    pub fn rolls_back(&self) -> bool {
        self.lines.iter().any(|l| l.item == UNUSED_ITEM)
    }
}

/// Payment's input (clause 2.5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaymentIn {
    pub w: u32,
    pub d: u32,
    pub c_w: u32,
    pub c_d: u32,
    pub customer: CustomerBy,
    pub amount_cents: i64,
}

impl PaymentIn {
    /// What a Payment to a customer with bad credit (`c_credit = 'BC'`) puts before the
    /// customer's `c_data` (clause 2.5.2.2): the customer's id `c`, its district and
    /// warehouse, the paying district and warehouse, and the amount, then a space.
    pub fn bad_credit_note(&self, c: u32) -> String {
        let a = self.amount_cents;
        format!(
            "{c} {} {} {} {} {}.{:02} ",
            self.c_d,
            self.c_w,
            self.d,
            self.w,
            a / 100,
            a % 100
        )
    }
}

/// Order-Status's input (clause 2.6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderStatusIn {
    pub w: u32,
    pub d: u32,
    pub customer: CustomerBy,
}

/// Delivery's input (clause 2.7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryIn {
    pub w: u32,
    pub carrier: u32,
}

/// Stock-Level's input (clause 2.8.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StockLevelIn {
    pub w: u32,
    pub d: u32,
    pub threshold: u32,
}

/// A warehouse other than `home` among `warehouses` (`home` itself when it is the only
/// one).
fn other_warehouse(rng: &mut SmallRng, home: u32, warehouses: u32) -> u32 {
    if warehouses <= 1 {
        return home;
    }
    let w = rng.random_range(1..warehouses);
    if w >= home {
        w + 1
    } else {
        w
    }
}

/// A terminal's draws: its home warehouse, the database's warehouses and the run's
/// constants.
#[derive(Debug, Clone, Copy)]
pub struct Terminal {
    pub home: u32,
    pub warehouses: u32,
    pub k: Constants,
}

impl Terminal {
    /// New-Order's input: 5 to 15 lines, items by NURand(8191, 1, 100000), 1% of
    /// supplies from another warehouse, and 1% of orders ending in the unused item. The
    /// lines are sorted by item and supplying warehouse, the order in which New-Order takes
    /// their stock rows, so two New-Orders never wait on each other in a cycle (the unused
    /// item, numbered past every item, stays last).
    pub fn new_order(&self, rng: &mut SmallRng) -> NewOrderIn {
        let d = rng.random_range(1..=DISTRICTS);
        let c = customer_id(rng, &self.k);
        let n = rng.random_range(5..=15usize);
        let rollback = rng.random_range(1..=100) == 1;
        let mut lines: Vec<Line> = (0..n)
            .map(|i| Line {
                item: if rollback && i == n - 1 {
                    UNUSED_ITEM
                } else {
                    nurand(rng, 8191, 1, ITEMS, self.k.ol_i_id)
                },
                supply_w: if rng.random_range(1..=100) == 1 {
                    other_warehouse(rng, self.home, self.warehouses)
                } else {
                    self.home
                },
                quantity: rng.random_range(1..=10),
            })
            .collect();
        lines.sort_by_key(|l| (l.item, l.supply_w));
        NewOrderIn {
            w: self.home,
            d,
            c,
            lines,
        }
    }

    /// Payment's input: 85% of customers of the home warehouse's district, 15% of a
    /// random district of another warehouse; an amount of 1.00 to 5,000.00.
    pub fn payment(&self, rng: &mut SmallRng) -> PaymentIn {
        let d = rng.random_range(1..=DISTRICTS);
        let (c_w, c_d) = if rng.random_range(1..=100) <= 85 {
            (self.home, d)
        } else {
            (
                other_warehouse(rng, self.home, self.warehouses),
                rng.random_range(1..=DISTRICTS),
            )
        };
        PaymentIn {
            w: self.home,
            d,
            c_w,
            c_d,
            customer: CustomerBy::draw(rng, &self.k),
            amount_cents: rng.random_range(100..=500_000),
        }
    }

    /// Order-Status's input.
    pub fn order_status(&self, rng: &mut SmallRng) -> OrderStatusIn {
        OrderStatusIn {
            w: self.home,
            d: rng.random_range(1..=DISTRICTS),
            customer: CustomerBy::draw(rng, &self.k),
        }
    }

    /// Delivery's input.
    pub fn delivery(&self, rng: &mut SmallRng) -> DeliveryIn {
        DeliveryIn {
            w: self.home,
            carrier: rng.random_range(1..=10),
        }
    }

    /// Stock-Level's input (the district drawn per transaction: one terminal serves
    /// every district here).
    pub fn stock_level(&self, rng: &mut SmallRng) -> StockLevelIn {
        StockLevelIn {
            w: self.home,
            d: rng.random_range(1..=DISTRICTS),
            threshold: rng.random_range(10..=20),
        }
    }
}

/// Microseconds since the Unix epoch now (an order's entry date, a delivery's date).
pub fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_micros() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// Proves: the mix is 45/43/4/4/4 over the draws 0..100.
    #[test]
    fn the_mix_follows_its_percentages() {
        let mut n = [0u32; 5];
        for u in 0..100 {
            n[Kind::pick(u).index()] += 1;
        }
        assert_eq!(n, [45, 43, 4, 4, 4]);
    }

    /// Proves: last names are built from the syllables of their digits (the spec's
    /// example: 371 is PRICALLYOUGHT).
    #[test]
    fn last_names_are_their_digits_syllables() {
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(999), "EINGEINGEING");
    }

    /// Proves: NURand stays in its range, and a run's last-name constant is a permitted
    /// distance from the load's.
    #[test]
    fn nurand_stays_in_range_and_run_constants_keep_their_distance() {
        let mut rng = SmallRng::seed_from_u64(3);
        let load = Constants::for_load(&mut rng);
        for _ in 0..200 {
            let run = Constants::for_run(&load, &mut rng);
            let delta = run.c_last.abs_diff(load.c_last);
            assert!((65..=119).contains(&delta) && delta != 96 && delta != 112);
        }
        for _ in 0..10_000 {
            let v = nurand(&mut rng, 8191, 1, ITEMS, load.ol_i_id);
            assert!((1..=ITEMS).contains(&v));
            let l = last_name_number(&mut rng, &load);
            assert!(l <= 999);
        }
    }

    /// Proves: about 1% of New-Orders roll back, only their last line asks for the
    /// unused item, remote lines name another warehouse, and with one warehouse every
    /// order is local.
    #[test]
    fn new_orders_roll_back_about_one_percent_and_remote_lines_are_remote() {
        let mut rng = SmallRng::seed_from_u64(9);
        let k = Constants::for_load(&mut rng);
        let t = Terminal {
            home: 2,
            warehouses: 3,
            k,
        };
        let (mut rb, mut remote) = (0, 0);
        for _ in 0..20_000 {
            let o = t.new_order(&mut rng);
            assert!((5..=15).contains(&o.lines.len()));
            if o.rolls_back() {
                rb += 1;
                assert_eq!(o.lines.last().unwrap().item, UNUSED_ITEM);
            }
            // The stock rows are taken in this order: one order for every New-Order, so
            // two never wait on each other in a cycle.
            let keys: Vec<_> = o.lines.iter().map(|l| (l.item, l.supply_w)).collect();
            assert!(keys.is_sorted(), "lines out of order: {keys:?}");
            for l in &o.lines {
                assert!((1..=3).contains(&l.supply_w));
                remote += usize::from(l.supply_w != 2);
            }
        }
        assert!((120..=280).contains(&rb), "{rb} rolled back of 20,000");
        assert!(remote > 0);
        let one = Terminal {
            home: 1,
            warehouses: 1,
            k,
        };
        assert!((0..2000).all(|_| one.new_order(&mut rng).all_local()));
    }

    /// Proves: a bad-credit payment's note names the customer, both districts and
    /// warehouses and the amount in currency units.
    #[test]
    fn the_bad_credit_note_names_the_payment() {
        let p = PaymentIn {
            w: 1,
            d: 2,
            c_w: 3,
            c_d: 4,
            customer: CustomerBy::Id(7),
            amount_cents: 123_405,
        };
        assert_eq!(p.bad_credit_note(7), "7 4 3 2 1 1234.05 ");
    }

    /// Proves: stock and item data carry ORIGINAL about one time in ten, and strings
    /// keep their lengths.
    #[test]
    fn random_strings_keep_their_lengths() {
        let mut rng = SmallRng::seed_from_u64(5);
        let with = (0..5000)
            .filter(|_| {
                let s = data_original(&mut rng);
                assert!((26..=50).contains(&s.len()));
                s.contains("ORIGINAL")
            })
            .count();
        assert!((350..=650).contains(&with), "{with}");
        assert_eq!(zip(&mut rng).len(), 9);
    }
}
