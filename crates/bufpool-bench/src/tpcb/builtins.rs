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
        Mode::Script => "-- a script file (-f)\n",
    }
}
