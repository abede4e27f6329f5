//! PostgreSQL 15's pgbench documentation, run: the command lines of the pgbench reference
//! page (its synopsis, its options, "Custom Scripts", "Per-Statement Report", "Logging")
//! that apply to an embedded engine, each written as the page prints it with `pgbench -i`
//! replaced by `bufpool init`, `pgbench` by `bufpool bench` and the database name by the
//! data directory (`-D db`, added by [`run`]), with smaller counts (`-t`, `-T`,
//! `--aggregate-interval`) so that a case takes a second or two on a scale-1 database.
//! Where the page documents an option without an example line, the line is the option's
//! documented synopsis. Each case checks the exit status and the summary's key lines in
//! pgbench's wording.
//!
//! The lines are PostgreSQL 15's documented examples and option synopses, written from the
//! reference page (not copied from it). What does not apply, and why:
//! - the connection options `-h`, `-p`, `-U`, a connection string or `dbname`, and the
//!   `PGHOST`-style environment: the engine is embedded, the database is a directory;
//! - `-D varname=value` (a script variable): `-D` names the data directory here, as it
//!   does for `initdb` and `postgres`;
//! - `pgbench -i --partitions=N --partition-method=range|hash`: the engine has no
//!   partitioned tables (init accepts the flags with a note and makes one accounts table);
//!   `--unlogged-tables` and `--foreign-keys` are noted likewise; `--tablespace` and
//!   `--index-tablespace` name server tablespaces (`bufpool init --tablespaces DIR...`
//!   deals the tables out over directories instead); `-I` with `G` generates the data
//!   client-side as `g` does;
//! - `-C` (a connection per transaction) runs with a note that there are none; `-d`
//!   (debug output), `--verbose-errors` and `-s` when benchmarking are not taken;
//! - the meta-commands `\gset`, `\aset`, `\if`, `\setshell`, `\shell`,
//!   `\startpipeline`, and `\set` expressions beyond the subset of `tpcb/script.rs` (the
//!   page's `CASE` and line-continued `\set aid (1021 * random(...)) % \` examples):
//!   refused before the run, naming the line; so is SQL other than the built-in scripts'
//!   statements (the engine parses no SQL);
//! - serialization failures: there is no REPEATABLE READ or SERIALIZABLE, so
//!   `--max-tries` retries deadlocks only (the serialization line reads 0).

use std::path::Path;

mod common;

/// The page's "Custom Scripts" example: the full definition of the built-in TPC-B-like
/// transaction.
const TPCB_SCRIPT: &str = "\\set aid random(1, 100000 * :scale)
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
";

/// Runs a documented command line (`bufpool ...`, split at spaces) against the data
/// directory `db` in `cwd`; it must succeed. Returns its standard output and error.
fn run(cwd: &Path, line: &str) -> (String, String) {
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[0], "bufpool", "{line}");
    let mut args = words[1..].to_vec();
    args.extend(["-D", "db"]);
    let o = common::bufpool(cwd, &args);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(o.status.success(), "{line}: {:?}\n{out}\n{err}", o.status);
    (out, err)
}

/// The page's first step: `pgbench -i -s 1` makes the scale-1 database the cases run on.
fn doc_db() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    // pgbench -i -s 1: initialize at scale factor 1 (100,000 accounts).
    let (_, err) = run(dir.path(), "bufpool init -s 1");
    for step in [
        "creating tables...",
        "generating data (client-side)...",
        "done in ",
    ] {
        assert!(err.contains(step), "{step}: {err}");
    }
    assert!(err.contains("100000 of 100000 tuples (100%) done"), "{err}");
    dir
}

/// The text after `key` on the summary line that starts with it.
fn line<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no line {key:?} in:\n{out}"))
}

/// The number a line starts with after `key` (pgbench's `10/10` read as 10).
fn count(out: &str, key: &str) -> u64 {
    let text = line(out, key);
    let n = text.split(|c: char| !c.is_ascii_digit()).next().unwrap();
    n.parse().unwrap_or_else(|_| panic!("{key}{text}"))
}

/// The number after `key` on its line, up to the next space (`latency average = 1.2 ms`).
fn number(out: &str, key: &str) -> f64 {
    let text = line(out, key);
    let n = text.split(' ').next().unwrap();
    n.parse().unwrap_or_else(|_| panic!("{key}{text}"))
}

/// pgbench's summary: its key lines, in its wording, with `ttype` as the transaction
/// type, `clients` and `threads`, and `processed` transactions (None: a timed run, some).
fn assert_summary(out: &str, ttype: &str, clients: u32, threads: u32, processed: Option<u64>) {
    assert_eq!(line(out, "transaction type: "), ttype, "{out}");
    assert_eq!(line(out, "scaling factor: "), "1", "{out}");
    assert!(line(out, "query mode: ").starts_with("embedded"), "{out}");
    assert_eq!(count(out, "number of clients: "), u64::from(clients));
    assert_eq!(count(out, "number of threads: "), u64::from(threads));
    assert_eq!(line(out, "maximum number of tries: "), "1", "{out}");
    let n = count(out, "number of transactions actually processed: ");
    match processed {
        Some(p) => assert_eq!(n, p, "{out}"),
        None => assert!(n > 0, "{out}"),
    }
    assert_eq!(
        line(out, "number of failed transactions: "),
        "0 (0.000%)",
        "{out}"
    );
    assert!(number(out, "latency average = ") > 0.0, "{out}");
    assert!(number(out, "latency stddev = ") >= 0.0, "{out}");
    assert!(
        line(out, "initial connection time = ").ends_with(" ms"),
        "{out}"
    );
    assert!(number(out, "tps = ") > 0.0, "{out}");
    assert!(line(out, "tps = ").ends_with(" (without initial connection time)"));
}

/// pgbench's "SQL script N" blocks: (description, weight, transactions) each.
fn script_blocks(out: &str) -> Vec<(String, u64, u64)> {
    let lines: Vec<&str> = out.lines().collect();
    let mut blocks = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(rest) = l.strip_prefix("SQL script ") else {
            continue;
        };
        let desc = rest.split_once(": ").expect(l).1.to_string();
        let weight = count(lines[i + 1], " - weight: ");
        let n = count(lines[i + 2], " - ");
        assert!(
            lines[i + 2].contains("% of total, tps = "),
            "{}",
            lines[i + 2]
        );
        blocks.push((desc, weight, n));
    }
    blocks
}

/// The `-r` block after `header`: (average latency ms, failures, command) per line.
fn statement_lines(out: &str, header: &str) -> Vec<(f64, u64, String)> {
    out.lines()
        .skip_while(|l| *l != header)
        .skip(1)
        .map_while(|l| {
            let mut w = l.split_whitespace();
            let ms = w.next()?.parse::<f64>().ok()?;
            let failures = w.next()?.parse::<u64>().ok()?;
            Some((ms, failures, w.collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

/// The synopsis and the page's sample run: `pgbench` alone (1 client, 10 transactions),
/// and `-c 10 -j 2 -t N` (clients, threads, transactions per client); after both the
/// balances agree (`bufpool check`).
#[test]
fn the_synopsis_and_the_sample_run() {
    let dir = doc_db();
    let cwd = dir.path();
    // pgbench [option...] [dbname]: the default TPC-B (sort of), 1 client, 10 transactions.
    let (out, err) = run(cwd, "bufpool bench");
    assert!(err.contains("starting vacuum..."), "{err}");
    assert_summary(&out, "<builtin: TPC-B (sort of)>", 1, 1, Some(10));
    assert_eq!(count(&out, "number of transactions per client: "), 10);
    // pgbench -c 10 -j 2 -t 1000 (here -t 10): 10 clients on 2 threads.
    let (out, _) = run(cwd, "bufpool bench -c 10 -j 2 -t 10");
    assert_summary(&out, "<builtin: TPC-B (sort of)>", 10, 2, Some(100));
    assert!(run(cwd, "bufpool check").0.contains("check: OK"));
}

/// `-b scriptname`, `-S`, `-N`, `-b list` and `--show-script`: the built-in scripts by
/// name and by shorthand, their list, and the TPC-B script's text, which is the page's
/// "Custom Scripts" example line for line.
#[test]
fn built_in_scripts_by_name_and_shorthand() {
    let dir = doc_db();
    let cwd = dir.path();
    // pgbench -b simple-update: the built-in without the tellers' and branches' updates.
    let (out, _) = run(cwd, "bufpool bench -b simple-update -t 50");
    assert_summary(&out, "<builtin: simple update>", 1, 1, Some(50));
    // pgbench -S: shorthand for -b select-only.
    let (out, _) = run(cwd, "bufpool bench -S -t 50");
    assert_summary(&out, "<builtin: select only>", 1, 1, Some(50));
    // pgbench -N: shorthand for -b simple-update.
    let (out, _) = run(cwd, "bufpool bench -N -t 50");
    assert_summary(&out, "<builtin: simple update>", 1, 1, Some(50));
    // pgbench -b list: the built-in scripts' names, and an ordinary exit.
    let (out, _) = run(cwd, "bufpool bench -b list");
    assert!(out.starts_with("Available builtin scripts:"), "{out}");
    for name in ["tpcb-like", "simple-update", "select-only"] {
        assert!(out.lines().any(|l| l.trim() == name), "{name}: {out}");
    }
    // pgbench --show-script=tpcb-like: the script's text, which the page shows in full.
    let (out, _) = run(cwd, "bufpool bench --show-script=tpcb-like");
    let shown: Vec<&str> = out.lines().filter(|l| !l.starts_with("--")).collect();
    assert_eq!(shown, TPCB_SCRIPT.lines().collect::<Vec<_>>(), "{out}");
}

/// `-b scriptname[@weight]` repeated: `-b tpcb-like@9 -b select-only@1` runs both, each
/// transaction one of them, about 9 in 10 the TPC-B one; pgbench's per-script blocks
/// follow the totals.
#[test]
fn weighted_built_in_scripts_share_the_transactions() {
    let dir = doc_db();
    let cwd = dir.path();
    // pgbench -b tpcb-like@9 -b select-only@1: 90% TPC-B, 10% select-only.
    let (out, _) = run(
        cwd,
        "bufpool bench -b tpcb-like@9 -b select-only@1 -c 2 -t 300",
    );
    assert_summary(&out, "multiple scripts", 2, 1, Some(600));
    let blocks = script_blocks(&out);
    let descs: Vec<(&str, u64)> = blocks.iter().map(|b| (b.0.as_str(), b.1)).collect();
    assert_eq!(
        descs,
        [
            ("<builtin: TPC-B (sort of)>", 9),
            ("<builtin: select only>", 1)
        ]
    );
    assert!(
        out.contains(" - weight: 9 (targets 90.0% of total)\n"),
        "{out}"
    );
    assert!(
        out.contains(" - weight: 1 (targets 10.0% of total)\n"),
        "{out}"
    );
    let (tpcb, select) = (blocks[0].2, blocks[1].2);
    assert_eq!(tpcb + select, 600, "{out}");
    assert!(select > 0, "both ran: {out}");
    let share = 100.0 * tpcb as f64 / 600.0;
    assert!((share - 90.0).abs() <= 7.0, "{share}% TPC-B: {out}");
    assert_eq!(out.matches(" - latency average = ").count(), 2, "{out}");
    assert_eq!(out.matches(" - latency stddev = ").count(), 2, "{out}");
    assert_eq!(
        out.matches(" - number of failed transactions: 0 (0.000%)\n")
            .count(),
        2,
        "{out}"
    );
}

/// `-f filename`: the page's custom-script example (the TPC-B transaction in pgbench's
/// script language) run from a file keeps the balances, as the built-in does.
#[test]
fn the_custom_script_example_runs_from_a_file() {
    let dir = doc_db();
    let cwd = dir.path();
    std::fs::write(cwd.join("tpcb.sql"), TPCB_SCRIPT).unwrap();
    // pgbench -f tpcb.sql: the example script, 2 clients.
    let (out, _) = run(cwd, "bufpool bench -f tpcb.sql -c 2 -t 50");
    assert_summary(&out, "tpcb.sql", 2, 1, Some(100));
    assert!(run(cwd, "bufpool check").0.contains("check: OK"));
}

/// "Per-Statement Report": `-r` prints each command's average latency and failures
/// under pgbench's header, for the default script the page's eleven commands in order;
/// with `-L 50`, the latency-limit line.
#[test]
fn the_per_statement_report() {
    let dir = doc_db();
    let cwd = dir.path();
    // pgbench -c 10 -t 1000 -r -L 50 (here -t 20): per-command latencies, a latency limit.
    let (out, _) = run(cwd, "bufpool bench -c 10 -t 20 -r -L 50");
    assert_summary(&out, "<builtin: TPC-B (sort of)>", 10, 1, Some(200));
    let late = line(
        &out,
        "number of transactions above the 50.0 ms latency limit: ",
    );
    assert!(late.contains("/200 ("), "{late}");
    let lines = statement_lines(&out, "statement latencies in milliseconds and failures:");
    let commands: Vec<&str> = lines.iter().map(|l| l.2.as_str()).collect();
    assert_eq!(commands, TPCB_SCRIPT.lines().collect::<Vec<_>>(), "{out}");
    assert!(lines.iter().all(|l| l.0 >= 0.0 && l.1 == 0), "{lines:?}");
    assert!(lines[5].0 > 0.0, "the accounts update took time: {lines:?}");
}

/// `-P sec`: a progress line each second on standard error, in pgbench's wording.
#[test]
fn progress_reports_every_second() {
    let dir = doc_db();
    let cwd = dir.path();
    // pgbench -P 1 -T 2: progress every second, for two seconds.
    let (out, err) = run(cwd, "bufpool bench -P 1 -T 2");
    assert_summary(&out, "<builtin: TPC-B (sort of)>", 1, 1, None);
    assert_eq!(line(&out, "duration: "), "2 s", "{out}");
    let first = line(&err, "progress: 1.0 s, ");
    let tps: f64 = first.split(' ').next().unwrap().parse().unwrap();
    assert!(tps > 0.0, "{first}");
    assert!(
        first.contains(" tps, lat ") && first.contains(" ms stddev ") && first.ends_with(" failed"),
        "{first}"
    );
}

/// "Logging", the aggregated log: the page's example line (`--aggregate-interval=10
/// --time=20`, here 1 and 2) writes one line of pgbench's 15 fields per interval to
/// `pgbench_log.<pid>`; its transactions and skipped ones add up to the summary's.
#[test]
fn the_aggregate_log_example() {
    let dir = doc_db();
    let cwd = dir.path();
    // pgbench --aggregate-interval=10 --time=20 --client=10 --log --rate=1000
    // --latency-limit=10 --failures-detailed --max-tries=10 (here 1 s intervals for 2 s).
    let (out, _) = run(
        cwd,
        "bufpool bench --aggregate-interval=1 --time=2 --client=10 --log --rate=1000 \
         --latency-limit=10 --failures-detailed --max-tries=10",
    );
    assert_eq!(line(&out, "maximum number of tries: "), "10", "{out}");
    for key in [
        "number of serialization failures: ",
        "number of deadlock failures: ",
        "number of transactions retried: ",
        "total number of retries: ",
        "rate limit schedule lag: avg ",
    ] {
        line(&out, key);
    }
    let processed = count(&out, "number of transactions actually processed: ");
    let skipped = count(&out, "number of transactions skipped: ");
    let (mut n, mut s, mut starts) = (0, 0, Vec::new());
    for text in log_files(cwd, "pgbench_log.") {
        for l in text.lines() {
            let f: Vec<u64> = l.split(' ').map(|w| w.parse().expect(l)).collect();
            assert_eq!(f.len(), 15, "{l}");
            (n, s) = (n + f[1], s + f[10]);
            starts.push(f[0]);
        }
    }
    assert_eq!((n, s), (processed, skipped), "{out}");
    assert!(starts.windows(2).all(|w| w[1] == w[0] + 1), "{starts:?}");
}

/// The texts of the files in `cwd` whose names start with `prefix`.
fn log_files(cwd: &Path, prefix: &str) -> Vec<String> {
    let files: Vec<String> = std::fs::read_dir(cwd)
        .unwrap()
        .map(Result::unwrap)
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert!(!files.is_empty(), "no {prefix}* file");
    files
}

/// `--sampling-rate=rate` with `-l`: the per-transaction log keeps about that share of the
/// transactions (0.05: about 40 of 800), each line in pgbench's format.
#[test]
fn the_sampling_rate_thins_the_transaction_log() {
    let dir = doc_db();
    let cwd = dir.path();
    // pgbench -l --sampling-rate=0.05: log 5% of the transactions.
    let (out, _) = run(
        cwd,
        "bufpool bench -c 2 -t 400 -l --sampling-rate=0.05 --log-prefix=sampled",
    );
    assert_summary(&out, "<builtin: TPC-B (sort of)>", 2, 1, Some(800));
    let logged: Vec<String> = log_files(cwd, "sampled.")
        .iter()
        .flat_map(|t| t.lines().map(str::to_string).collect::<Vec<_>>())
        .collect();
    assert!(
        (10..=100).contains(&logged.len()),
        "{} of 800",
        logged.len()
    );
    for l in &logged {
        // client_id transaction_no time script_no time_epoch time_us
        let f: Vec<&str> = l.split(' ').collect();
        assert_eq!(f.len(), 6, "{l}");
        assert!(f.iter().all(|w| w.parse::<u64>().is_ok()), "{l}");
        assert_eq!(f[3], "0", "one script: {l}");
    }
}

/// `-M querymode`: `-M prepared` runs, and the query-mode line names it.
#[test]
fn query_mode_prepared_runs() {
    let dir = doc_db();
    let cwd = dir.path();
    // pgbench -M prepared: the extended protocol with prepared statements.
    let (out, _) = run(cwd, "bufpool bench -M prepared -t 20");
    assert_summary(&out, "<builtin: TPC-B (sort of)>", 1, 1, Some(20));
    assert!(line(&out, "query mode: ").contains("-M prepared"), "{out}");
}
