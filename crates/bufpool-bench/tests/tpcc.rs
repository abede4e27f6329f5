//! TPC-C through the real binary: `init --workload tpcc`, the mix's run and its JSON,
//! `check`'s consistency conditions after it, read-only transactions writing nothing, and
//! the other workloads' scripts and flags refused.

mod common;

use common::{bufpool, ok};

/// A folder holding `db`, a TPC-C database of one warehouse with a 32 MB pool (the load is
/// about 110 MB, so runs read and evict).
fn tpcc_db() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary folder");
    ok(
        dir.path(),
        &[
            "init",
            "--workload",
            "tpcc",
            "-w",
            "1",
            "-D",
            "db",
            "--set",
            "shared_buffers=32MB",
        ],
    );
    dir
}

fn bench_json(dir: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["bench", "-D", "db", "-c", "2", "-j", "2", "--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(dir, &all)).expect("bench --json prints JSON")
}

/// The number after `label` in `text` (`check`'s line).
fn number_before(text: &str, label: &str) -> u64 {
    let at = text
        .find(label)
        .unwrap_or_else(|| panic!("{label:?} in {text}"));
    text[..at]
        .split_whitespace()
        .last()
        .and_then(|w| w.trim_start_matches('(').parse().ok())
        .unwrap_or_else(|| panic!("a number before {label:?} in {text}"))
}

/// Proves: the two read-only transactions write no log on the loaded database; the mix
/// (run with no script named) draws the five transactions in their shares, rolls back
/// about 1% of New-Orders, delivers ten orders per Delivery; and afterwards `check`
/// finds consistency conditions 1-4 and every key sound, with exactly the orders the
/// placed (not rolled-back) New-Orders made.
#[test]
fn the_mix_runs_and_the_database_stays_consistent() {
    let d = tpcc_db();
    let out = ok(d.path(), &["check", "-D", "db"]);
    assert!(out.contains("check: OK"), "{out}");
    assert_eq!(number_before(&out, "orders,"), 30_000, "{out}");
    assert_eq!(number_before(&out, "new orders)"), 9_000, "{out}");

    let j = bench_json(
        d.path(),
        &[
            "-b",
            "tpcc-order-status",
            "-b",
            "tpcc-stock-level",
            "-t",
            "200",
        ],
    );
    assert_eq!(j["transactions"], 400);
    assert_eq!(j["wal"]["bytes"], 0, "reads only: {}", j["wal"]);
    assert_eq!(j["wal"]["syncs"], 0, "{}", j["wal"]);

    // A deadlock is a failure TPC-C retries. Two New-Orders took their stock rows in the
    // input's random order until 2026-12-07 and deadlocked now and then (2,999 of 3,000
    // once here); they are sorted now, and any other deadlock is retried: none lost.
    let j = bench_json(d.path(), &["-t", "1500", "--max-tries", "0"]);
    let t = &j["tpcc"];
    assert_eq!(t["warehouses"], 1, "{t}");
    let total = j["transactions"].as_u64().unwrap();
    assert_eq!((total, j["failed"].as_u64()), (3000, Some(0)), "{t}");
    let mut sum = 0;
    for (k, share) in [
        ("new_order", 0.45),
        ("payment", 0.43),
        ("order_status", 0.04),
        ("delivery", 0.04),
        ("stock_level", 0.04),
    ] {
        let n = t["transactions"][k].as_u64().unwrap();
        sum += n;
        let got = n as f64 / total as f64;
        assert!((got - share).abs() < 0.03, "{k}: {got} of {share}: {t}");
    }
    assert_eq!(sum, total, "each transaction counted once: {t}");
    assert_eq!(
        j["scripts"].as_array().map(Vec::len),
        Some(5),
        "five scripts"
    );
    let new_orders = t["transactions"]["new_order"].as_u64().unwrap();
    let rolled_back = t["new_orders_rolled_back"].as_u64().unwrap();
    assert!(
        rolled_back >= 1 && rolled_back * 100 < new_orders * 4,
        "about 1% of {new_orders} roll back: {t}"
    );
    let deliveries = t["transactions"]["delivery"].as_u64().unwrap();
    assert_eq!(
        t["orders_delivered"].as_u64().unwrap(),
        deliveries * 10,
        "{t}"
    );
    assert!(t["new_orders_per_minute"].as_f64().unwrap() > 0.0, "{t}");

    let out = ok(d.path(), &["check", "-D", "db"]);
    assert!(out.contains("check: OK"), "{out}");
    assert!(out.contains("consistency conditions 1-4"), "{out}");
    assert_eq!(
        number_before(&out, "orders,"),
        30_000 + new_orders - rolled_back,
        "every placed order is there, no rolled-back one: {out}"
    );
    assert_eq!(
        number_before(&out, "new orders)"),
        9_000 + new_orders - rolled_back - deliveries * 10,
        "{out}"
    );
}

/// Proves: TPC-B's and YCSB's scripts are refused on a TPC-C database and TPC-C's on a
/// TPC-B one, naming the fix, as are TPC-B's side flags and `check`'s TPC-B flags, and
/// `init`'s flags of other workloads.
#[test]
fn other_workloads_scripts_and_flags_are_refused() {
    let d = tpcc_db();
    for (args, says) in [
        (&["-b", "tpcb-like"][..], "holds TPC-C's tables"),
        (&["-b", "ycsb-c"], "init --workload ycsb"),
        (&["-S"], "holds TPC-C's tables"),
        (&["--vacuum-every", "1"], "--vacuum-every"),
        (&["-b", "tpcc", "--ack-log", "a.log"], "--ack-log"),
    ] {
        let mut all = vec!["bench", "-D", "db", "-t", "1"];
        all.extend_from_slice(args);
        let o = bufpool(d.path(), &all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let o = bufpool(d.path(), &["check", "-D", "db", "--accounts-only"]);
    assert_eq!(o.status.code(), Some(2));
    ok(d.path(), &["init", "-s", "1", "-D", "tpcb"]);
    let o = bufpool(d.path(), &["bench", "-D", "tpcb", "-b", "tpcc", "-t", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("init --workload tpcc"), "{err}");
    for (args, says) in [
        (&["init", "-D", "x", "-w", "2"][..], "-w TPC-C's"),
        (
            &["init", "-D", "x", "--workload", "tpcc", "-s", "2"],
            "-w (warehouses)",
        ),
        (
            &["init", "-D", "x", "--workload", "tpcc", "-w", "0"],
            "invalid value for -w: 0",
        ),
        (
            &["init", "-D", "x", "--workload", "ycsb", "-w", "2"],
            "not YCSB's",
        ),
    ] {
        let o = bufpool(d.path(), args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
