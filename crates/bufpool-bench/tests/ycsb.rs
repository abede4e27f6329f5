//! YCSB through the real binary: `init --workload ycsb`, each core workload's run and its
//! JSON, `check` after them, and the flags that belong to the other workload refused.

mod common;

use common::{bufpool, ok};

/// A folder holding `db`, a YCSB database of `records` records with a 16 MB pool.
fn ycsb_db(records: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary folder");
    ok(
        dir.path(),
        &[
            "init",
            "--workload",
            "ycsb",
            "--records",
            &records.to_string(),
            "-D",
            "db",
            "--set",
            "shared_buffers=16MB",
        ],
    );
    dir
}

fn bench_json(dir: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["bench", "-D", "db", "-c", "2", "-j", "2", "--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(dir, &all)).expect("bench --json prints JSON")
}

/// Proves: each of YCSB A to F runs on usertable with its operations in its proportions,
/// reads find every record (none not found), inserts grow the table by what they did,
/// the read-only workload writes no log and syncs nothing, and `check` finds the table and its key sound
/// after them all (the table larger than the 16 MB pool: 20,000 records, about 21 MB).
#[test]
fn every_core_workload_runs_and_the_table_checks() {
    let d = ycsb_db(20_000);
    let mut records = 20_000u64;
    // C first: on the freshly loaded (frozen) table a read sets no hint, so nothing at all
    // is logged (after updates, the first read of a changed page sets hint bits, and the
    // first hint on a page after a checkpoint logs its image, as PostgreSQL does with
    // checksums on).
    for (w, ops) in [
        ("c", &[("read", 1.0)][..]),
        ("a", &[("read", 0.5), ("update", 0.5)]),
        ("b", &[("read", 0.95), ("update", 0.05)]),
        ("d", &[("read", 0.95), ("insert", 0.05)]),
        ("e", &[("scan", 0.95), ("insert", 0.05)]),
        ("f", &[("read", 0.5), ("read_modify_write", 0.5)]),
    ] {
        let j = bench_json(d.path(), &["-b", &format!("ycsb-{w}"), "-t", "1000"]);
        assert_eq!(j["mode"], format!("ycsb-{w}"));
        let y = &j["ycsb"];
        assert_eq!(y["records_start"], records, "{w}: {y}");
        assert_eq!(y["not_found"], 0, "{w}: {y}");
        let txns = j["transactions"].as_u64().unwrap();
        assert_eq!(txns, 2000, "{w}");
        let mut sum = 0;
        for (op, share) in ops {
            let n = y["operations"][op].as_u64().unwrap();
            sum += n;
            let got = n as f64 / txns as f64;
            assert!(
                (got - share).abs() < 0.05,
                "ycsb-{w} {op}: {got} of {share}: {y}"
            );
        }
        assert_eq!(sum, txns, "ycsb-{w}: every operation counted once: {y}");
        // Resident memory against its budget: the pool, the log's buffers, the pool's
        // bookkeeping and the fixed allowance.
        let m = &j["memory"];
        let b = |k: &str| m[k].as_u64().unwrap_or_else(|| panic!("memory.{k}: {m}"));
        assert_eq!(b("shared_buffers_bytes"), 16 << 20, "{m}");
        assert_eq!(
            b("budget_bytes"),
            b("shared_buffers_bytes")
                + b("wal_buffers_bytes")
                + b("pool_overhead_bytes")
                + b("fixed_bytes"),
            "{m}"
        );
        assert!(
            b("peak_rss_bytes") > 16 << 20,
            "the pool's pages were touched: {m}"
        );
        let over = m["rss_over_budget"].as_f64().unwrap();
        assert!((over - b("peak_rss_bytes") as f64 / b("budget_bytes") as f64).abs() < 1e-9);
        let inserted = y["operations"]["insert"].as_u64().unwrap();
        assert_eq!(y["records_end"], records + inserted, "{w}: {y}");
        records += inserted;
        if w == "e" {
            let scans = y["operations"]["scan"].as_u64().unwrap();
            let read = y["scanned_records"].as_u64().unwrap();
            // 1 to 100 records each, 50.5 on average.
            assert!(read > scans * 30 && read <= scans * 100, "{y}");
        }
        if w == "c" {
            assert_eq!(
                j["wal"]["bytes"], 0,
                "a read-only workload writes no log: {}",
                j["wal"]
            );
            assert_eq!(j["wal"]["syncs"], 0, "{}", j["wal"]);
        } else {
            assert!(j["wal"]["bytes"].as_u64().unwrap() > 0, "{w}: {}", j["wal"]);
        }
    }
    let out = ok(d.path(), &["check", "-D", "db"]);
    assert!(out.contains("check: OK"), "{out}");
    assert!(
        out.contains(&format!("{records} visible rows in usertable")),
        "{out}"
    );
    // The run with no script named runs YCSB A on this database.
    let j = bench_json(d.path(), &["-t", "10"]);
    assert_eq!(j["mode"], "ycsb-a");
}

/// Proves: each workload's scripts are refused on the other's database, naming the fix,
/// and so are TPC-B's side flags on a YCSB database and YCSB's size on a TPC-B init.
#[test]
fn scripts_and_flags_of_the_other_workload_are_refused() {
    let d = ycsb_db(1_000);
    for (args, says) in [
        (&["-b", "tpcb-like"][..], "holds YCSB's usertable"),
        (&["-S"], "holds YCSB's usertable"),
        (&["-b", "ycsb-c", "--vacuum-every", "1"], "--vacuum-every"),
        (&["-b", "ycsb-c", "--ack-log", "a.log"], "--ack-log"),
    ] {
        let mut all = vec!["bench", "-D", "db", "-t", "1"];
        all.extend_from_slice(args);
        let o = bufpool(d.path(), &all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let o = bufpool(d.path(), &["check", "-D", "db", "--accounts-only"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    ok(d.path(), &["init", "-s", "1", "-D", "tpcb"]);
    let o = bufpool(
        d.path(),
        &["bench", "-D", "tpcb", "-b", "ycsb-a", "-t", "1"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("init --workload ycsb"), "{err}");
    for args in [
        &["init", "-D", "x", "--records", "10"][..],
        &["init", "-D", "x", "--workload", "ycsb", "-s", "2"],
        &["init", "-D", "x", "--workload", "ycsb", "--records", "0"],
    ] {
        let o = bufpool(d.path(), args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!d.path().join("x").exists(), "{args:?} wrote nothing");
    }
}

/// Proves: `experiment outgrow` with sizes that leave a target without samples (here one
/// small size: no 0.9x and 1.25x pair, no 10x) reports the targets it has and leaves the
/// others out (it panicked on "no samples to summarize"); each size's run is a child
/// `bench`, whose figures and memory reach the JSON; `--peers sqlite` runs SQLite at the
/// same size through compare, and `--report` charts both.
#[test]
fn outgrow_with_one_size_reports_the_targets_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let o = bufpool(
        dir.path(),
        &[
            "experiment",
            "outgrow",
            "--ratios",
            "0.05",
            "--seconds",
            "1",
            "--no-tpcc",
            "--pool",
            "64MB",
            "--peers",
            "sqlite",
            "--report",
            "charts",
            "--dir",
            "exp",
            "--json",
        ],
    );
    assert!(
        o.status.success(),
        "experiment outgrow failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = j["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["rss_over_budget"], "{}", j["targets"]);
    let s = &j["sizes"][0];
    assert!(s["tps"].as_f64().unwrap() > 0.0, "{s}");
    assert!(s["peak_rss_bytes"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(s["pool"], "64MB");
    assert_eq!(s["engines"]["bufpool"], s["tps"]);
    assert!(s["engines"]["sqlite"].as_f64().unwrap() > 0.0, "{s}");
    assert!(
        s["engines"]["bufpool-buffered"].as_f64().unwrap() > 0.0,
        "{s}"
    );
    assert_eq!(j["tpcc_sizes"].as_array().map(Vec::len), Some(0));
    let svg = std::fs::read_to_string(dir.path().join("charts/outgrow-ycsb-c-64MB.svg")).unwrap();
    assert!(svg.contains("sqlite") && svg.contains("bufpool (O_DIRECT)"));
    assert!(
        std::fs::read_to_string(dir.path().join("charts/index.html"))
            .unwrap()
            .contains("outgrow-ycsb-c-64MB.svg")
    );
}
