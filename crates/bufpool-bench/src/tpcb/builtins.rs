//! The built-in scripts (`bench -b NAME`): pgbench's three (tpcb-like, simple-update,
//! select-only), seed 002's two (savepoint-overflow, multixact) and YCSB's B and C; each
//! one's name, pgbench's description of it, its key distribution, and its text as
//! `--show-script` prints it (the SQL whose effect the engine calls reproduce; for `-r`
//! the tpcb-like, simple-update and select-only texts run through the interpreter). A
//! leaf: their engine calls are `transactions.rs`'s.

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
    /// YCSB's workload B on the accounts: 95% reads of one account's balance, 5% updates
    /// of one account (a new row version, the balance unchanged), Zipfian keys
    /// (`--zipf-theta`, default YCSB's 0.99).
    #[value(name = "ycsb-b")]
    YcsbB,
    /// YCSB's workload C: reads only, Zipfian keys.
    #[value(name = "ycsb-c")]
    YcsbC,
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
            Mode::YcsbB => "ycsb-b",
            Mode::YcsbC => "ycsb-c",
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
            Mode::YcsbB => "<builtin: YCSB B (95% reads, 5% updates)>",
            Mode::YcsbC => "<builtin: YCSB C (reads only)>",
            Mode::Script => "<script>",
        }
    }

    /// The Zipfian constant its keys follow when `--zipf-theta` is not given (None:
    /// uniform, as pgbench).
    pub fn default_theta(self) -> Option<f64> {
        matches!(self, Mode::YcsbB | Mode::YcsbC).then_some(super::keys::YCSB_THETA)
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
        Mode::YcsbB => "-- ycsb-b (bufpool's): 95% reads, 5% updates, Zipfian keys
\\set aid random_zipfian(1, 100000 * :scale, 0.99)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;      -- 95%
UPDATE pgbench_accounts SET abalance = abalance WHERE aid = :aid;  -- 5%
",
        Mode::YcsbC => "-- ycsb-c (bufpool's): reads only, Zipfian keys
\\set aid random_zipfian(1, 100000 * :scale, 0.99)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
",
        Mode::Script => "-- a script file (-f)\n",
    }
}
