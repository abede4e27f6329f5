//! The built-in scripts (`bench -b NAME`): pgbench's three (tpcb-like, simple-update,
//! select-only), seed 002's two (savepoint-overflow, multixact), two Zipfian ones on the
//! accounts (zipf-read-update, zipf-select) and YCSB's six core workloads (ycsb-a ..
//! ycsb-f, which run on YCSB's usertable, `crate::ycsb`); each one's name, pgbench's
//! description of it, its key distribution, and its text as `--show-script` prints it (the
//! SQL whose effect the engine calls reproduce; for `-r` the tpcb-like, simple-update and
//! select-only texts run through the interpreter). A leaf: their engine calls are
//! `transactions.rs`'s and `crate::ycsb`'s.

/// pgbench's built-in scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    #[value(name = "tpcb-like")]
    TpcbLike,
    #[value(name = "simple-update")]
    SimpleUpdate,
    #[value(name = "select-only")]
    SelectOnly,
    /// Seed 002 experiment 1's savepoint.sql: 70 nested savepoints with an insert each, a
    /// pause, a commit (see `side.rs`).
    #[value(name = "savepoint-overflow")]
    SavepointOverflow,
    /// Seed 002 experiment 2's multixact.sql: lock an account FOR UPDATE, SAVEPOINT,
    /// update it, read it, insert history, commit (accounts only, as simple-update).
    #[value(name = "multixact")]
    Multixact,
    /// YCSB B's mix on pgbench's accounts: 95% reads of one account's balance, 5% updates
    /// of one account (a new row version, the balance unchanged), Zipfian keys
    /// (`--zipf-theta`, default YCSB's 0.99). Not YCSB B itself (`ycsb-b`, on usertable).
    #[value(name = "zipf-read-update")]
    ZipfReadUpdate,
    /// select-only with Zipfian keys (YCSB C's distribution on pgbench's accounts; YCSB C
    /// itself is `ycsb-c`, on usertable).
    #[value(name = "zipf-select")]
    ZipfSelect,
    /// YCSB's workload A on its usertable (`init --workload ycsb`): 50% reads, 50% updates.
    #[value(name = "ycsb-a")]
    YcsbA,
    /// YCSB B: 95% reads, 5% updates.
    #[value(name = "ycsb-b")]
    YcsbB,
    /// YCSB C: reads only.
    #[value(name = "ycsb-c")]
    YcsbC,
    /// YCSB D: 95% reads of the latest records, 5% inserts.
    #[value(name = "ycsb-d")]
    YcsbD,
    /// YCSB E: 95% short scans, 5% inserts.
    #[value(name = "ycsb-e")]
    YcsbE,
    /// YCSB F: 50% reads, 50% read-modify-writes.
    #[value(name = "ycsb-f")]
    YcsbF,
    /// TPC-C's mix on its tables (`init --workload tpcc`): the five transactions below at
    /// weights 45/43/4/4/4, each its own script in the summary (what `bench` runs on a
    /// TPC-C database when no script is named).
    #[value(name = "tpcc")]
    Tpcc,
    /// TPC-C's New-Order alone.
    #[value(name = "tpcc-new-order")]
    TpccNewOrder,
    /// TPC-C's Payment.
    #[value(name = "tpcc-payment")]
    TpccPayment,
    /// TPC-C's Order-Status (reads only).
    #[value(name = "tpcc-order-status")]
    TpccOrderStatus,
    /// TPC-C's Delivery (ten districts' oldest orders).
    #[value(name = "tpcc-delivery")]
    TpccDelivery,
    /// TPC-C's Stock-Level (reads only).
    #[value(name = "tpcc-stock-level")]
    TpccStockLevel,
    /// A script (`-f FILE`, or a built-in script run statement by statement for `-r`):
    /// `BenchOptions::script`. Not a `-b` name.
    #[value(skip)]
    Script,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::TpcbLike => "tpcb-like",
            Mode::SimpleUpdate => "simple-update",
            Mode::SelectOnly => "select-only",
            Mode::SavepointOverflow => "savepoint-overflow",
            Mode::Multixact => "multixact",
            Mode::ZipfReadUpdate => "zipf-read-update",
            Mode::ZipfSelect => "zipf-select",
            Mode::YcsbA => "ycsb-a",
            Mode::YcsbB => "ycsb-b",
            Mode::YcsbC => "ycsb-c",
            Mode::YcsbD => "ycsb-d",
            Mode::YcsbE => "ycsb-e",
            Mode::YcsbF => "ycsb-f",
            Mode::Tpcc => "tpcc",
            Mode::TpccNewOrder => "tpcc-new-order",
            Mode::TpccPayment => "tpcc-payment",
            Mode::TpccOrderStatus => "tpcc-order-status",
            Mode::TpccDelivery => "tpcc-delivery",
            Mode::TpccStockLevel => "tpcc-stock-level",
            Mode::Script => "script",
        }
    }

    /// pgbench's description of it (the summary's "transaction type", "SQL script N").
    pub fn desc(self) -> &'static str {
        match self {
            Mode::TpcbLike => "<builtin: TPC-B (sort of)>",
            Mode::SimpleUpdate => "<builtin: simple update>",
            Mode::SelectOnly => "<builtin: select only>",
            Mode::SavepointOverflow => "<builtin: savepoint overflow (seed 002)>",
            Mode::Multixact => "<builtin: multixact (seed 002)>",
            Mode::ZipfReadUpdate => "<builtin: Zipfian 95% reads, 5% updates of accounts>",
            Mode::ZipfSelect => "<builtin: select only, Zipfian keys>",
            Mode::YcsbA => "<builtin: YCSB A (50% reads, 50% updates)>",
            Mode::YcsbB => "<builtin: YCSB B (95% reads, 5% updates)>",
            Mode::YcsbC => "<builtin: YCSB C (reads only)>",
            Mode::YcsbD => "<builtin: YCSB D (95% reads of the latest, 5% inserts)>",
            Mode::YcsbE => "<builtin: YCSB E (95% short scans, 5% inserts)>",
            Mode::YcsbF => "<builtin: YCSB F (50% reads, 50% read-modify-writes)>",
            Mode::Tpcc => "<builtin: TPC-C (45/43/4/4/4)>",
            Mode::TpccNewOrder => "<builtin: TPC-C New-Order>",
            Mode::TpccPayment => "<builtin: TPC-C Payment>",
            Mode::TpccOrderStatus => "<builtin: TPC-C Order-Status>",
            Mode::TpccDelivery => "<builtin: TPC-C Delivery>",
            Mode::TpccStockLevel => "<builtin: TPC-C Stock-Level>",
            Mode::Script => "<script>",
        }
    }

    /// The Zipfian constant its keys follow when `--zipf-theta` is not given (None:
    /// uniform, as pgbench).
    pub fn default_theta(self) -> Option<f64> {
        matches!(self, Mode::ZipfReadUpdate | Mode::ZipfSelect).then_some(super::keys::YCSB_THETA)
    }

    /// Whether it is one of YCSB's core workloads (run on usertable, not pgbench's tables).
    pub fn is_ycsb(self) -> bool {
        matches!(
            self,
            Mode::YcsbA | Mode::YcsbB | Mode::YcsbC | Mode::YcsbD | Mode::YcsbE | Mode::YcsbF
        )
    }

    /// Whether it is TPC-C's (run on TPC-C's tables).
    pub fn is_tpcc(self) -> bool {
        matches!(
            self,
            Mode::Tpcc
                | Mode::TpccNewOrder
                | Mode::TpccPayment
                | Mode::TpccOrderStatus
                | Mode::TpccDelivery
                | Mode::TpccStockLevel
        )
    }
}

/// The text of built-in script `mode`, as pgbench's `--show-script` prints it: the SQL
/// whose effect the engine calls reproduce (the bench runs no SQL).
pub fn builtin_script_text(mode: Mode) -> &'static str {
    match mode {
        Mode::TpcbLike => "-- tpcb-like: <builtin: TPC-B (sort of)>
\\set aid random(1, 100000 * :scale)
\\set bid random(1, 1 * :scale)
\\set tid random(1, 10 * :scale)
\\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
",
        Mode::SimpleUpdate => "-- simple-update: <builtin: simple update>
\\set aid random(1, 100000 * :scale)
\\set bid random(1, 1 * :scale)
\\set tid random(1, 10 * :scale)
\\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
",
        Mode::SelectOnly => "-- select-only: <builtin: select only>
\\set aid random(1, 100000 * :scale)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
",
        Mode::SavepointOverflow => "-- savepoint-overflow (bufpool's, seed 002's savepoint.sql)
BEGIN;
-- 70 times: SAVEPOINT sN; INSERT INTO pgbench_test VALUES (...);
SELECT pg_sleep(1);
COMMIT;
",
        Mode::Multixact => "-- multixact (bufpool's, seed 002's multixact.sql)
\\set aid random(1, 100000 * :scale)
BEGIN;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid FOR UPDATE;
SAVEPOINT s1;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
COMMIT;
",
        Mode::ZipfReadUpdate => "-- zipf-read-update (bufpool's): 95% reads, 5% updates, Zipfian keys
\\set aid random_zipfian(1, 100000 * :scale, 0.99)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;      -- 95%
UPDATE pgbench_accounts SET abalance = abalance WHERE aid = :aid;  -- 5%
",
        Mode::ZipfSelect => "-- zipf-select (bufpool's): reads only, Zipfian keys
\\set aid random_zipfian(1, 100000 * :scale, 0.99)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
",
        Mode::YcsbA => "-- ycsb-a: YCSB workload A on usertable (init --workload ycsb); key: Zipfian 0.99, hashed
SELECT * FROM usertable WHERE ycsb_key = :key;                 -- 50%
UPDATE usertable SET field:n = :value WHERE ycsb_key = :key;   -- 50%
",
        Mode::YcsbB => "-- ycsb-b: YCSB workload B on usertable (init --workload ycsb); key: Zipfian 0.99, hashed
SELECT * FROM usertable WHERE ycsb_key = :key;                 -- 95%
UPDATE usertable SET field:n = :value WHERE ycsb_key = :key;   -- 5%
",
        Mode::YcsbC => "-- ycsb-c: YCSB workload C on usertable (init --workload ycsb); key: Zipfian 0.99, hashed
SELECT * FROM usertable WHERE ycsb_key = :key;
",
        Mode::YcsbD => "-- ycsb-d: YCSB workload D on usertable (init --workload ycsb); key: latest (Zipfian 0.99 back from the newest)
SELECT * FROM usertable WHERE ycsb_key = :key;                 -- 95%
INSERT INTO usertable VALUES (:next_key, :field0, ..., :field9); -- 5%
",
        Mode::YcsbE => "-- ycsb-e: YCSB workload E on usertable (init --workload ycsb); key: Zipfian 0.99, hashed; :len uniform 1..100
SELECT * FROM usertable WHERE ycsb_key >= :key ORDER BY ycsb_key LIMIT :len;  -- 95%
INSERT INTO usertable VALUES (:next_key, :field0, ..., :field9);            -- 5%
",
        Mode::YcsbF => "-- ycsb-f: YCSB workload F on usertable (init --workload ycsb); key: Zipfian 0.99, hashed
SELECT * FROM usertable WHERE ycsb_key = :key;                 -- 50%
BEGIN; SELECT * FROM usertable WHERE ycsb_key = :key;
UPDATE usertable SET field:n = :value WHERE ycsb_key = :key; COMMIT;  -- 50%: read-modify-write
",
        Mode::Tpcc => "-- tpcc: TPC-C's five transactions (init --workload tpcc), weights 45/43/4/4/4:
-- tpcc-new-order@45 tpcc-payment@43 tpcc-order-status@4 tpcc-delivery@4 tpcc-stock-level@4
-- (--show-script tpcc-new-order and so on print each)
",
        Mode::TpccNewOrder => "-- tpcc-new-order: TPC-C 2.4; :w home, :d random(1,10), :c NURand(1023,1,3000), 5..15 lines
SELECT w_tax FROM warehouse WHERE w_id = :w;
UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = :w AND d_id = :d RETURNING d_tax, d_next_o_id - 1;
SELECT c_discount, c_last, c_credit FROM customer WHERE c_w_id = :w AND c_d_id = :d AND c_id = :c;
INSERT INTO orders VALUES (:o_id, :d, :w, :c, now(), NULL, :ol_cnt, :all_local);
INSERT INTO new_order VALUES (:o_id, :d, :w);
-- per line (items NURand(8191,1,100000), 1% remote; 1% of orders end in an unused item: ROLLBACK)
SELECT i_price, i_name, i_data FROM item WHERE i_id = :i;
UPDATE stock SET s_quantity = (s_quantity - :q, +91 below 10 left), s_ytd = s_ytd + :q,
  s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + :remote WHERE s_w_id = :sw AND s_i_id = :i;
INSERT INTO order_line VALUES (:o_id, :d, :w, :n, :i, :sw, NULL, :q, :q * i_price, s_dist_:d);
COMMIT;
",
        Mode::TpccPayment => "-- tpcc-payment: TPC-C 2.5; 85% home district, 15% another warehouse's; 60% by last name
UPDATE warehouse SET w_ytd = w_ytd + :h_amount WHERE w_id = :w RETURNING w_name;
UPDATE district SET d_ytd = d_ytd + :h_amount WHERE d_w_id = :w AND d_id = :d RETURNING d_name;
SELECT c_id FROM customer WHERE c_w_id = :c_w AND c_d_id = :c_d AND c_last = :last ORDER BY c_first;  -- the middle one
UPDATE customer SET c_balance = c_balance - :h_amount, c_ytd_payment = c_ytd_payment + :h_amount,
  c_payment_cnt = c_payment_cnt + 1, c_data = (for BC credit) :ids || c_data WHERE ...;
INSERT INTO history VALUES (:c, :c_d, :c_w, :d, :w, now(), :h_amount, w_name || '    ' || d_name);
COMMIT;
",
        Mode::TpccOrderStatus => "-- tpcc-order-status: TPC-C 2.6 (reads only); 60% by last name
SELECT c_balance, c_first, c_middle, c_last FROM customer WHERE ...;
SELECT o_id, o_entry_d, o_carrier_id FROM orders WHERE o_w_id = :w AND o_d_id = :d AND o_c_id = :c ORDER BY o_id DESC LIMIT 1;
SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line WHERE ... AND ol_o_id = :o_id;
",
        Mode::TpccDelivery => "-- tpcc-delivery: TPC-C 2.7; for each of the 10 districts:
SELECT no_o_id FROM new_order WHERE no_w_id = :w AND no_d_id = :d ORDER BY no_o_id LIMIT 1;
DELETE FROM new_order WHERE ... AND no_o_id = :o_id;
UPDATE orders SET o_carrier_id = :carrier WHERE ... RETURNING o_c_id;
UPDATE order_line SET ol_delivery_d = now() WHERE ... AND ol_o_id = :o_id;  -- sum(ol_amount)
UPDATE customer SET c_balance = c_balance + :sum, c_delivery_cnt = c_delivery_cnt + 1 WHERE ...;
COMMIT;
",
        Mode::TpccStockLevel => "-- tpcc-stock-level: TPC-C 2.8 (reads only); :threshold random(10,20)
SELECT d_next_o_id FROM district WHERE d_w_id = :w AND d_id = :d;
SELECT count(DISTINCT s_i_id) FROM order_line, stock WHERE ol_w_id = :w AND ol_d_id = :d
  AND ol_o_id BETWEEN :next - 20 AND :next - 1 AND s_w_id = :w AND s_i_id = ol_i_id AND s_quantity < :threshold;
",
        Mode::Script => "-- a script file (-f)\n",
    }
}
