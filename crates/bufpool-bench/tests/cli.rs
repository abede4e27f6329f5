//! The pgbench-like commands end to end, through the real binary: `init`, `bench` (with
//! its `--json` summary and pgbench's aggregate log), `check` (after concurrent runs, an
//! abort storm, and a SIGKILL mid-run followed by recovery), `report`, and the one-line
//! errors for bad flags and knobs (exit status 2).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

mod common;
use common::{bufpool, ok};

fn init(cwd: &Path) {
    ok(
        cwd,
        &[
            "init",
            "-s",
            "1",
            "-D",
            "db",
            "--set",
            "shared_buffers=16MB",
        ],
    );
}

fn check_passes(cwd: &Path) -> String {
    let out = ok(cwd, &["check", "-D", "db"]);
    assert!(out.contains("check: OK"), "{out}");
    out
}

#[test]
fn init_bench_json_aggregate_log_check_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    init(cwd);
    let out = ok(
        cwd,
        &[
            "bench",
            "-D",
            "db",
            "-c",
            "4",
            "-j",
            "2",
            "-T",
            "2",
            "--json",
            "-l",
            "--aggregate-interval",
            "1",
            "--log-prefix",
            "agg",
            "--out",
            "run.json",
        ],
    );
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    // Every field the issue names.
    for f in [
        "tps",
        "latency_ms",
        "per_interval",
        "buffers",
        "checkpoints",
        "config",
    ] {
        assert!(j.get(f).is_some(), "--json lacks {f}: {j}");
    }
    for f in ["avg", "p50", "p95", "p99", "max"] {
        assert!(j["latency_ms"][f].is_number(), "latency_ms.{f}");
    }
    // The log's counters, and commits per sync derived from them.
    let wal = &j["wal"];
    let syncs = wal["syncs"].as_u64().unwrap();
    assert!(syncs > 0 && wal["records"].as_u64().unwrap() > 0, "{wal}");
    let per_sync = wal["commits_per_sync"].as_f64().unwrap();
    let txns = j["transactions"].as_u64().unwrap() as f64;
    assert!((per_sync - txns / syncs as f64).abs() < 1e-9, "{wal}");
    // Mean sync time (synchronous commit is on: every commit waits for one) and handoff.
    let sync_us = wal["sync_us"].as_f64().unwrap();
    assert!(sync_us > 0.0 && sync_us < 1e6, "{wal}");
    assert!(wal["sync_gap_us"].as_f64().unwrap() >= 0.0, "{wal}");
    for f in ["tps_min", "tps_p5", "tps_p50", "max_latency_p99"] {
        assert!(j["per_interval"][f].is_number(), "per_interval.{f}");
    }
    for f in [
        "hits",
        "reads",
        "written_by_backend",
        "written_by_bgwriter",
        "written_by_checkpointer",
        "allocated",
    ] {
        assert!(j["buffers"][f].is_u64(), "buffers.{f}");
    }
    assert!(j["checkpoints"].is_array());
    assert_eq!(j["config"]["shared_buffers"], "16MB", "knobs in effect");
    // Bytes written by source: the log's are whole blocks (records plus the padding that
    // ends each flush), the pool's are its page writes by writer, and the per-transaction
    // rows divide them by the run's transactions.
    let w = &j["bytes_written"];
    let b = |k: &str| {
        w[k].as_u64()
            .unwrap_or_else(|| panic!("bytes_written.{k}: {w}"))
    };
    assert_eq!(b("transactions"), j["transactions"].as_u64().unwrap());
    assert!(b("wal") > 0 && b("wal") % 4096 == 0, "{w}");
    assert!(
        b("wal") >= b("wal_fpi") + b("wal_padding") && b("wal_padding") > 0,
        "{w}"
    );
    assert!(b("wal") >= wal["bytes"].as_u64().unwrap(), "{w} {wal}");
    for (k, pages) in [
        ("checkpointer", "written_by_checkpointer"),
        ("bgwriter", "written_by_bgwriter"),
        ("backend", "written_by_backend"),
    ] {
        assert_eq!(
            b(k),
            j["buffers"][pages].as_u64().unwrap() * 8192,
            "{k}: {w}"
        );
    }
    assert!(w["devices"].is_array() && w.get("device").is_some(), "{w}");
    let per_tx = &j["bytes_written_per_tx"];
    let total = [
        "wal",
        "checkpointer",
        "bgwriter",
        "backend",
        "extend",
        "slru",
    ]
    .iter()
    .map(|k| b(k))
    .sum::<u64>();
    let per = per_tx["engine_total"].as_f64().unwrap();
    assert!(
        (per - total as f64 / b("transactions") as f64).abs() < 1e-6,
        "{per_tx}"
    );
    assert!(per_tx["of_which_padding"].is_number(), "{per_tx}");
    let n = j["transactions"].as_u64().unwrap();
    assert!(n > 0 && j["tps"].as_f64().unwrap() > 0.0);

    // pgbench's aggregate log: one file per thread (agg.<pid>, agg.<pid>.1), 15 fields a
    // line, integers, latencies in microseconds; the counts add up to the summary's.
    let mut logs: Vec<_> = std::fs::read_dir(cwd)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("agg."))
        .collect();
    logs.sort();
    assert_eq!(logs.len(), 2, "{logs:?}");
    assert!(
        logs[1].ends_with(".1") && logs[1].starts_with(&logs[0]),
        "{logs:?}"
    );
    let mut total = 0u64;
    for name in &logs {
        let text = std::fs::read_to_string(cwd.join(name)).unwrap();
        let mut prev_start = 0u64;
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            assert_eq!(f.len(), 15, "15 fields: {line:?}");
            let v: Vec<u64> = f.iter().map(|x| x.parse::<u64>().expect(line)).collect();
            let (start, count, sum, sum2, min, max) = (v[0], v[1], v[2], v[3], v[4], v[5]);
            assert!(
                start > 1_700_000_000 && start >= prev_start,
                "interval_start {start}"
            );
            prev_start = start;
            if count > 0 {
                assert!(
                    min <= max && min * count <= sum && sum <= max * count,
                    "{line}"
                );
                assert!(sum2 >= sum * sum / count / 2, "{line}");
            }
            assert_eq!(
                &v[11..14],
                &[0, 0, 0],
                "retried, retries, serialization failures"
            );
            total += count;
        }
    }
    assert_eq!(total, n, "log lines add up to the summary");

    check_passes(cwd);
    let out = ok(cwd, &["report", "run.json", "-o", "rep"]);
    assert!(out.contains("index.html"));
    let html = std::fs::read_to_string(cwd.join("rep/index.html")).unwrap();
    assert!(html.contains("tps.svg"));
}

#[test]
fn text_summary_reads_like_pgbench() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    init(cwd);
    let out = ok(
        cwd,
        &[
            "bench",
            "-D",
            "db",
            "-c",
            "2",
            "-t",
            "50",
            "-b",
            "simple-update",
            "-L",
            "50",
        ],
    );
    for l in [
        "transaction type: <builtin: simple update>",
        "scaling factor: 1",
        "number of clients: 2",
        "number of transactions per client: 50",
        "number of transactions actually processed: 100",
        "number of failed transactions: 0 (0.000%)",
        "latency average = ",
        "latency stddev = ",
        "above the 50.0 ms latency limit",
        "tps = ",
    ] {
        assert!(out.contains(l), "missing {l:?} in:\n{out}");
    }
    // select-only with a target rate: throttled, lag reported.
    let out = ok(
        cwd,
        &[
            "bench",
            "-D",
            "db",
            "-c",
            "2",
            "-T",
            "1",
            "-R",
            "200",
            "-b",
            "select-only",
        ],
    );
    assert!(out.contains("rate limit schedule lag"), "{out}");
    let tps: f64 = out
        .lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(tps < 400.0, "throttled to about 200 tps, got {tps}");
    // No check here: simple-update leaves tellers and branches alone, so the TPC-B
    // balance invariant does not hold after it (as with pgbench).
}

/// `init --tablespaces DIR1,DIR2` links tablespaces 1 and 2 from `db/base` to the two
/// directories (given relative: the links hold them absolute) and deals the tables out
/// largest first: accounts (and its key) and tellers on DIR1, history and branches on
/// DIR2, as init's output says; a bench writes history's rows in DIR2, `check` passes,
/// and a second init empties the old tablespaces so the same directories can be reused.
#[test]
fn init_with_tablespaces_places_tables_and_bench_and_check_run() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let devices = tempfile::tempdir().unwrap();
    let (dir1, dir2) = (devices.path().join("dev1"), devices.path().join("dev2"));
    std::fs::create_dir(&dir1).unwrap();
    let spaces = format!("{},{}", dir1.display(), dir2.display());
    let args = [
        "init",
        "-s",
        "1",
        "-D",
        "db",
        "--set",
        "shared_buffers=16MB",
        "--tablespaces",
        &spaces,
    ];
    let o = bufpool(cwd, &args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    for (relation, id, location) in [
        ("pgbench_accounts", 1, &dir1),
        ("pgbench_accounts_pkey", 1, &dir1),
        ("pgbench_history", 2, &dir2),
        ("pgbench_tellers", 1, &dir1),
        ("pgbench_branches", 2, &dir2),
    ] {
        let line = format!("{relation} in tablespace {id} ({})", location.display());
        assert!(
            err.contains(&line),
            "init names where {relation} went: {err}"
        );
    }
    for (id, location) in [("1", &dir1), ("2", &dir2)] {
        assert_eq!(
            std::fs::read_link(cwd.join("db/base").join(id)).unwrap(),
            *location
        );
    }
    // Each relation's files, by the number the catalog gives it as <tablespace>/<number>.
    let catalog = std::fs::read_to_string(cwd.join("db/bufpool.catalog")).unwrap();
    let file_of = |relation: &str| -> std::path::PathBuf {
        let line = catalog
            .lines()
            .find(|l| l.split(' ').nth(1) == Some(relation))
            .unwrap_or_else(|| panic!("{relation} in the catalog: {catalog}"));
        let (ts, number) = line.split(' ').nth(2).unwrap().split_once('/').unwrap();
        let location = if ts == "1" { &dir1 } else { &dir2 };
        location.join(number)
    };
    for relation in [
        "pgbench_accounts",
        "pgbench_accounts_pkey",
        "pgbench_tellers",
    ] {
        assert!(file_of(relation).starts_with(&dir1), "{relation}");
        assert!(file_of(relation).is_file(), "{relation}");
    }
    for relation in [
        "pgbench_history",
        "pgbench_branches",
        "pgbench_branches_pkey",
    ] {
        assert!(file_of(relation).starts_with(&dir2), "{relation}");
        assert!(file_of(relation).is_file(), "{relation}");
    }
    let accounts_bytes = std::fs::metadata(file_of("pgbench_accounts"))
        .unwrap()
        .len();
    assert!(
        accounts_bytes > 10 << 20,
        "100,000 accounts: {accounts_bytes} bytes"
    );
    assert!(
        !cwd.join("db/base/0").exists(),
        "nothing left in the default tablespace"
    );
    assert_eq!(
        std::fs::metadata(file_of("pgbench_history")).unwrap().len(),
        0
    );
    let out = ok(cwd, &["bench", "-D", "db", "-c", "2", "-T", "2", "--json"]);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(j["transactions"].as_u64().unwrap() > 0, "{j}");
    check_passes(cwd);
    assert!(
        std::fs::metadata(file_of("pgbench_history")).unwrap().len() > 0,
        "history's rows were written in DIR2"
    );
    // Again, on the same directories: the old relation files are removed first.
    let o = bufpool(cwd, &args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    check_passes(cwd);
}

/// `init --waldir DIR` links `db/wal` to DIR and the log's segments are made there; a bench and `check` run; a second init
/// onto the same DIR empties the old log first; a DIR holding other files is refused
/// before anything is made.
#[test]
fn init_with_waldir_puts_the_log_there_and_reinit_reuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let devices = tempfile::tempdir().unwrap();
    let waldir = devices.path().join("pg_wal");
    let w = waldir.display().to_string();
    let args = [
        "init",
        "-s",
        "1",
        "-D",
        "db",
        "--set",
        "shared_buffers=16MB",
        "--waldir",
        &w,
    ];
    let segments = || {
        std::fs::read_dir(&waldir)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().len() == 16)
            .count()
    };
    ok(cwd, &args);
    assert_eq!(std::fs::read_link(cwd.join("db/wal")).unwrap(), waldir);
    assert!(segments() > 0);
    let out = ok(cwd, &["bench", "-D", "db", "-c", "2", "-T", "2", "--json"]);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(j["transactions"].as_u64().unwrap() > 0, "{j}");
    check_passes(cwd);
    let o = bufpool(cwd, &args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("emptying the old WAL directory"), "{err}");
    check_passes(cwd);
    let other = devices.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), b"x").unwrap();
    let o2 = other.display().to_string();
    let o = bufpool(cwd, &["init", "-s", "1", "-D", "db2", "--waldir", &o2]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--waldir") && err.contains("not empty"),
        "{err}"
    );
    assert!(!cwd.join("db2").exists());
}

#[test]
fn abort_storm_leaves_the_database_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    init(cwd);
    let out = ok(
        cwd,
        &[
            "bench",
            "-D",
            "db",
            "-c",
            "4",
            "-T",
            "2",
            "--abort-fraction",
            "0.5",
            "--json",
        ],
    );
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(j["failed"].as_u64().unwrap() > 0, "aborts happened: {j}");
    assert!(j["transactions"].as_u64().unwrap() > 0);
    let out = check_passes(cwd);
    // The history table holds only committed transactions.
    let rows: u64 = out
        .split(" over ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(rows, j["transactions"].as_u64().unwrap(), "{out}");
}

#[test]
fn kill_nine_mid_run_then_recovery_and_check() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    init(cwd);
    for round in 0..3 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bufpool"))
            .args(["bench", "-D", "db", "-c", "4", "-T", "60", "-P", "1"])
            .current_dir(cwd)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // Wait for the first progress line: transactions are committing.
        let err = BufReader::new(child.stderr.take().unwrap());
        for line in err.lines() {
            if line.unwrap().starts_with("progress:") {
                break;
            }
        }
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "round {round}: {status:?}"
        );
        check_passes(cwd);
    }
    // `bufpool checkpoint` on the recovered directory: one line in PostgreSQL's form.
    let out = ok(cwd, &["checkpoint", "-D", "db"]);
    assert!(
        out.starts_with("checkpoint complete: wrote ") && out.contains("redo lsn="),
        "{out}"
    );
    check_passes(cwd);
}

#[test]
fn check_reports_a_damaged_page_and_exits_nonzero() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    init(cwd);
    // Flip a byte in the middle of pgbench_accounts' first segment.
    let seg = cwd.join("db/base/0/16384");
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.len() / 2 + 100;
    bytes[at] ^= 0xFF;
    std::fs::write(&seg, &bytes).unwrap();
    let o = bufpool(cwd, &["check", "-D", "db"]);
    let out = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{out}");
    assert!(out.contains("checksum") && out.contains("16384"), "{out}");
}

#[test]
fn bad_flags_and_knobs_are_one_line_errors_with_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    for (args, needle) in [
        (
            vec!["init", "-D", "db", "--set", "shared_buffers=1"],
            "shared_buffers",
        ),
        (vec!["init", "-D", "db", "-F", "5"], "fillfactor"),
        (
            vec!["init", "-D", "db", "--set", "no_such_knob=1"],
            "no_such_knob",
        ),
        (
            vec!["init", "-D", "db", "--set", "checkpoint_timeout=5s"],
            "checkpoint_timeout",
        ),
        (
            vec!["bench", "-D", "db", "-c", "3", "-j", "2"],
            "multiple of threads",
        ),
        (vec!["bench", "-D", "db", "-T", "1", "-t", "5"], "either -T"),
        (
            vec!["init", "-D", "db", "--tablespaces", "db/ts"],
            "is inside the data directory",
        ),
        (
            vec!["init", "-D", "db", "--tablespaces", "ts,./ts"],
            "is given twice",
        ),
    ] {
        let o = bufpool(cwd, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!cwd.join("db").exists(), "{args:?} wrote nothing");
    }
    // clap's own errors for malformed flags also exit with 2.
    let o = bufpool(cwd, &["bench", "-c", "many"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn ctrl_c_stops_the_bench_cleanly_and_keeps_what_was_measured() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    init(cwd);
    let mut child = Command::new(env!("CARGO_BIN_EXE_bufpool"))
        .args([
            "bench", "-D", "db", "-c", "2", "-T", "600", "-P", "1", "--out", "run.json",
        ])
        .current_dir(cwd)
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while err.read_line(&mut line).unwrap() > 0 && !line.starts_with("progress:") {
        line.clear();
    }
    common::drain(err);
    // SAFETY: sending SIGINT to our own child process, whose pid we hold.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("tps = "), "summary printed: {text}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cwd.join("run.json")).unwrap()).unwrap();
    assert!(run["transactions"].as_u64().unwrap() > 0);
    assert!(run["duration_s"].as_f64().unwrap() < 600.0);
    check_passes(cwd);
}

#[test]
fn config_lists_every_knob_with_default_source_and_range() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    init(cwd);
    let out = ok(
        cwd,
        &["config", "-D", "db", "--set", "synchronous_commit=off"],
    );
    for knob in [
        "shared_buffers",
        "synchronous_commit",
        "full_page_writes",
        "checkpoint_timeout",
    ] {
        assert!(out.contains(knob), "{knob} in:\n{out}");
    }
    let line = |k: &str| out.lines().find(|l| l.starts_with(k)).unwrap().to_string();
    assert!(line("synchronous_commit").contains("command line"));
    assert!(
        line("shared_buffers").contains("16MB")
            && line("shared_buffers").contains("configuration file")
    );
    assert!(out.contains("allowed: 30s to 1d"), "{out}");
}

/// `bench --ack-log` writes one line per committed transaction, and `check --acked`
/// finds each in pgbench_history; a line with no matching row (an acknowledged commit
/// that is gone) fails the check, naming it.
#[test]
fn ack_log_lines_are_found_and_a_missing_one_fails_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    init(d);
    ok(
        d,
        &[
            "bench",
            "-D",
            "db",
            "-c",
            "2",
            "-t",
            "25",
            "--ack-log",
            "ack.txt",
        ],
    );
    let lines = std::fs::read_to_string(d.join("ack.txt")).unwrap();
    assert_eq!(lines.lines().count(), 50, "{lines}");
    let out = ok(d, &["check", "-D", "db", "--acked", "ack.txt"]);
    assert!(
        out.contains("acked: 50 acknowledged, 50 found in pgbench_history, 0 lost"),
        "{out}"
    );
    // The same line twice: only one history row matches it.
    let first = lines.lines().next().unwrap();
    std::fs::write(d.join("ack2.txt"), format!("{first}\n")).unwrap();
    let o = bufpool(d, &["check", "-D", "db", "--acked", "ack.txt", "ack2.txt"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("1 lost") && out.contains("ack2.txt line 1"),
        "{out}"
    );
}

/// pgbench fidelity (issue 17, part 8): `-M prepared` is accepted and the summary says it
/// has no effect; without `-R` the aggregate log's lag fields are 0 (pgbench prints 0,
/// not timer noise); failures that are not deadlocks (here the abort storm) stay out of
/// the deadlock_failures column while the summary counts them as failed.
#[test]
fn query_mode_lag_and_failure_columns_match_pgbench() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    init(d);
    let out = ok(
        d,
        &[
            "bench",
            "-D",
            "db",
            "-c",
            "2",
            "-t",
            "40",
            "-M",
            "prepared",
            "-l",
            "--aggregate-interval",
            "1",
            "--log-prefix",
            "fid",
            "--abort-fraction",
            "0.5",
        ],
    );
    assert!(
        out.contains("query mode: embedded (-M prepared has no effect"),
        "{out}"
    );
    let failed_line = out
        .lines()
        .find(|l| l.starts_with("number of failed transactions"))
        .unwrap_or_else(|| panic!("no failed line: {out}"));
    let failed: u64 = failed_line
        .split(':')
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{failed_line}"));
    assert!(failed > 0, "the abort storm failed none: {out}");
    let mut lines = 0;
    for e in std::fs::read_dir(d).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if !name.starts_with("fid.") {
            continue;
        }
        for line in std::fs::read_to_string(d.join(&name)).unwrap().lines() {
            let f: Vec<u64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
            assert_eq!(&f[6..10], &[0, 0, 0, 0], "lag without -R: {line}");
            assert_eq!(
                f[14], 0,
                "deadlock_failures holds abort-storm failures: {line}"
            );
            lines += 1;
        }
    }
    assert!(lines > 0, "no aggregate log lines");
}

/// pgbench fidelity (issue 17, part 8): `-l` without `--aggregate-interval` writes
/// pgbench's per-transaction log, one file per `-j` thread: `client_id transaction_no time
/// script_no time_epoch time_us`, plus `schedule_lag` with `-R`; every transaction of
/// every client once, numbered from 0, latencies in µs, end times in the run.
#[test]
fn log_without_aggregate_interval_is_pgbenchs_per_transaction_log() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    init(d);
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    for (prefix, rate) in [("tx", None), ("txr", Some("400"))] {
        let t0 = now();
        let mut args = vec![
            "bench",
            "-D",
            "db",
            "-c",
            "4",
            "-j",
            "2",
            "-t",
            "12",
            "-l",
            "--log-prefix",
            prefix,
        ];
        if let Some(r) = rate {
            args.extend(["-R", r]);
        }
        ok(d, &args);
        let t1 = now();
        let files: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with(&format!("{prefix}.")))
            .collect();
        assert_eq!(files.len(), 2, "one file per -j thread: {files:?}");
        let mut seen: Vec<Vec<u64>> = vec![Vec::new(); 4];
        for name in &files {
            for line in std::fs::read_to_string(d.join(name)).unwrap().lines() {
                let f: Vec<u64> = line.split(' ').map(|x| x.parse().expect(line)).collect();
                assert_eq!(f.len(), if rate.is_some() { 7 } else { 6 }, "{line}");
                let (client, no, us, script, epoch, frac) = (f[0], f[1], f[2], f[3], f[4], f[5]);
                assert!(
                    client < 4 && script == 0 && us > 0 && frac < 1_000_000,
                    "{line}"
                );
                assert!((t0..=t1).contains(&epoch), "{line}: ended outside the run");
                seen[client as usize].push(no);
            }
        }
        for (c, mut nos) in seen.into_iter().enumerate() {
            nos.sort_unstable();
            assert_eq!(
                nos,
                (0..12).collect::<Vec<u64>>(),
                "client {c}'s transactions"
            );
        }
    }
}

#[test]
fn rate_profile_and_batches_show_in_the_series_and_keep_the_balances() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    init(cwd);
    let out = ok(
        cwd,
        &[
            "bench",
            "-D",
            "db",
            "-c",
            "2",
            "-T",
            "4",
            "--rate-profile",
            "period=4s,low=20,high=200,spike=0",
            "--batch-every",
            "1",
            "--batch-rows",
            "300",
            "--out",
            "run.json",
        ],
    );
    assert!(out.contains("rate profile: period=4s"), "{out}");
    assert!(out.contains("batches: "), "{out}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cwd.join("run.json")).unwrap()).unwrap();
    let series = run["series"].as_array().unwrap();
    assert!(series.len() >= 3, "{run}");
    // Every second carries the profile's target at its middle: 20 + 180 (1 - cos(2π t/4)) / 2.
    for s in series {
        let t = s["t"].as_f64().unwrap() + 0.5;
        let want = 20.0 + 180.0 * (1.0 - (t / 4.0 * std::f64::consts::TAU).cos()) / 2.0;
        assert!(
            (s["target_tps"].as_f64().unwrap() - want).abs() < 1e-6,
            "{s}"
        );
    }
    // The batches committed (at least two in 4 s) and their rows are in the series.
    let rows: u64 = series
        .iter()
        .map(|s| s["batch_rows"].as_u64().unwrap_or(0))
        .sum();
    assert!(rows >= 2 * 290, "batch rows {rows}");
    // The rate is the profile's, not the engine's maximum: the wave averages 110/s.
    let tps = run["tps"].as_f64().unwrap();
    assert!(tps < 400.0, "tps {tps}");
    check_passes(cwd);

    for (args, needle) in [
        (
            vec!["-R", "100", "--rate-profile", "period=2,low=1,high=2"],
            "not both",
        ),
        (
            vec!["--rate-profile", "period=2,low=5,high=2"],
            "low <= high",
        ),
        (vec!["--batch-every", "2"], "go together"),
    ] {
        let mut all = vec!["bench", "-D", "db", "-T", "1"];
        all.extend(args.iter().copied());
        let o = bufpool(cwd, &all);
        assert_eq!(o.status.code(), Some(2), "{all:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{all:?}: {err}");
    }
}

#[test]
fn experiment_checkpoint_quick_json_has_every_run_and_target() {
    // The bulk table is left out (`--bulk off`): in a debug build the update of every
    // account takes about a minute per configuration. The release smoke run covers it.
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let o = Command::new(env!("CARGO_BIN_EXE_bufpool"))
        .args([
            "experiment",
            "checkpoint",
            "--quick",
            "--device",
            "local",
            "--seconds",
            "3",
            "--bulk",
            "off",
            "--dir",
            "exp",
            "--json",
        ])
        .current_dir(cwd)
        .env("RUST_LOG", "off")
        .output()
        .expect("run bufpool");
    assert!(
        o.status.success(),
        "experiment checkpoint failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["experiment"], "checkpoint");
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 12, "six configurations, twice");
    for (i, letter) in ["a", "b", "c", "d", "e", "f"].iter().enumerate() {
        assert_eq!(runs[i]["config"], *letter);
        assert_eq!(runs[i]["throttled"], false);
        assert_eq!(runs[i + 6]["config"], *letter);
        assert_eq!(runs[i + 6]["throttled"], true);
        assert!(runs[i]["tps"].as_f64().unwrap() > 0.0, "{}", runs[i]);
        assert!(
            runs[i]["latency_worst_ms"].as_f64().unwrap()
                >= runs[i]["latency_best_ms"].as_f64().unwrap()
        );
    }
    let rate = j["throttled_rate"].as_f64().unwrap();
    assert!((rate - 0.6 * runs[2]["tps"].as_f64().unwrap()).abs() < 1.0);
    let targets = j["targets"].as_array().unwrap();
    let named: Vec<(&str, &str, f64)> = targets
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap(),
                t["op"].as_str().unwrap(),
                t["target"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        named,
        [
            ("throttled_tps_p5_vs_rate", ">=", 0.9),
            ("throttled_maxlat_p99_vs_2007", "<=", 0.5),
            ("tps_vs_2007", ">=", 1.0),
        ]
    );
    assert!(j["machine"]["cores"].as_u64().unwrap() >= 1);
    assert_eq!(
        j["device"]["io"], "buffered",
        "the checkpoint experiment's default"
    );
    assert!(j["device"]["profile"].as_str().unwrap().contains("local"));
    // Every run's RunResult is there for `bufpool report`, which renders them together.
    let files: Vec<_> = std::fs::read_dir(cwd.join("exp/checkpoint"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 12);
    let mut args = vec!["report".to_string(), "-o".into(), "rep".into()];
    args.extend(files.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(cwd, &args);
    assert!(cwd.join("rep/index.html").exists() && cwd.join("rep/tps-cdf.svg").exists());
    assert!(j["report_command"]
        .as_str()
        .unwrap()
        .starts_with("bufpool report "));
}

#[test]
fn scan_and_vacuum_count_rows_and_report_their_io_and_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    init(cwd);
    // 100,000 accounts (~1,540 pages) in a 4 MB pool (512 buffers): more than a quarter
    // of the pool, so the default rule reads through a ring from the synchronized position.
    let out = ok(
        cwd,
        &[
            "scan",
            "-D",
            "db",
            "--repeat",
            "2",
            "--json",
            "--set",
            "shared_buffers=4MB",
        ],
    );
    let runs: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&out)
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(runs.len(), 2, "{out}");
    for r in &runs {
        assert_eq!(r["rows"], 100_000, "{r}");
        assert_eq!(r["ring"], true, "{r}");
        assert_eq!(r["synchronized"], true, "{r}");
        let pages = r["pages"].as_u64().unwrap();
        assert!(pages > 1000, "{r}");
        assert_eq!(
            r["hits"].as_u64().unwrap() + r["reads"].as_u64().unwrap(),
            pages,
            "every page once: {r}"
        );
    }
    assert_eq!(runs[0]["start_block"], 0);
    assert_eq!(
        runs[1]["start_block"].as_u64().unwrap(),
        runs[0]["pages"].as_u64().unwrap() - 1,
        "the second starts where the first ended"
    );
    let text = ok(cwd, &["scan", "-D", "db", "tellers"]);
    assert!(text.contains("scan pgbench_tellers: 10 rows"), "{text}");
    assert!(
        text.contains("start at block 0 (block 0), shared clock"),
        "{text}"
    );
    let v = ok(cwd, &["vacuum", "-D", "db", "pgbench_accounts"]);
    assert!(
        v.contains("vacuum pgbench_accounts: 0 dead versions removed"),
        "{v}"
    );
    let bad = bufpool(cwd, &["scan", "-D", "db", "nope"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("no table \"pgbench_nope\": the tables are"),
        "{err}"
    );
    check_passes(cwd);
}

/// Seed 002's second pgbench instance: `--side-script savepoint-overflow` runs beside the
/// TPC-B clients (its transactions reported apart, the subtransaction SLRU in `slru`),
/// `-b savepoint-overflow` runs the script as the clients' own, and the balances stay
/// consistent (the script writes only `pgbench_test`).
#[test]
fn side_script_and_savepoint_overflow_builtin_run_and_keep_the_balances() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    init(cwd);
    let out = ok(
        cwd,
        &[
            "bench",
            "-D",
            "db",
            "-c",
            "2",
            "-T",
            "2",
            "--side-script",
            "savepoint-overflow",
            "--side-pause-ms",
            "200",
            "--json",
        ],
    );
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let side = &j["side_script"];
    assert_eq!(side["script"], "savepoint-overflow", "{j}");
    let n = side["transactions"].as_u64().unwrap();
    assert!(n >= 2, "{side}");
    assert_eq!(side["subtransactions"].as_u64().unwrap(), 70 * n, "{side}");
    let names: Vec<&str> = j["slru"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "xact",
            "subtransaction",
            "multixact_offset",
            "multixact_member"
        ],
        "{j}"
    );
    assert!(j["transactions"].as_u64().unwrap() > 0);
    let out = ok(
        cwd,
        &[
            "bench",
            "-D",
            "db",
            "-c",
            "1",
            "-t",
            "1",
            "-b",
            "savepoint-overflow",
        ],
    );
    assert!(out.contains("savepoint overflow"), "{out}");
    check_passes(cwd);
    let o = bufpool(
        cwd,
        &["bench", "-D", "db", "-T", "1", "--side-script", "nonsense"],
    );
    assert_eq!(o.status.code(), Some(2));
}

/// Seed 002's experiment 2: `-b multixact` (lock FOR UPDATE, savepoint, update, read,
/// history insert) beside `--side-script long-running` makes a multixact per transaction
/// and reads them back (the multixact SLRUs' counters in `slru`), and every committed
/// delta is in both the account balances and the history (tellers and branches are not
/// touched, as with simple-update, so `check` reports only that).
#[test]
fn multixact_builtin_runs_beside_the_long_running_side_script() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    init(cwd);
    let out = ok(
        cwd,
        &[
            "bench",
            "-D",
            "db",
            "-c",
            "2",
            // A count, not -T: 3,000 transactions create enough multixacts to zero new
            // SLRU pages however slowly a loaded machine runs them.
            "-t",
            "1500",
            "-b",
            "multixact",
            "--side-script",
            "long-running",
            "--side-pause-ms",
            "300",
            "--json",
        ],
    );
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    let txns = j["transactions"].as_u64().unwrap();
    assert!(txns > 0, "{j}");
    assert!(
        j["side_script"]["transactions"].as_u64().unwrap() >= 1,
        "{j}"
    );
    let slru = |name: &str| {
        j["slru"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {j}"))
            .clone()
    };
    // Each transaction's walk reads its row's earlier multixacts: hits on both SLRUs.
    for name in ["multixact_offset", "multixact_member"] {
        let s = slru(name);
        assert!(s["blks_hit"].as_u64().unwrap() >= txns, "{name}: {s}");
        assert!(s["blks_zeroed"].as_u64().unwrap() >= 1, "{name}: {s}");
    }
    let o = bufpool(cwd, &["check", "-D", "db"]);
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    let num = |key: &str| -> i64 {
        let at = text
            .find(key)
            .unwrap_or_else(|| panic!("no {key} in {text}"))
            + key.len();
        text[at..]
            .trim_start()
            .split(|c: char| !(c == '-' || c.is_ascii_digit()))
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(
        num("sum(abalance) ="),
        num("sum(history.delta) ="),
        "{text}"
    );
    assert!(
        !text.contains("pages verified") || text.contains("1 problem(s)"),
        "{text}"
    );
}

/// Proves: `autovacuum = on` runs the launcher beside the clients (with threshold and
/// scale factor 0, a table with any dead version is due; pruning may have removed them all
/// from a hot table at one look, but not from the accounts, whose pages are rarely
/// revisited; the balances still check), its counters and each VACUUM's span reach
/// `--out`, and every run reports pg_stat_user_tables' rows for the four tables.
#[test]
fn autovacuum_runs_beside_the_clients_and_reports_its_tables() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    init(cwd);
    let out = ok(
        cwd,
        &[
            "bench",
            "-D",
            "db",
            "-c",
            "2",
            "-T",
            "4",
            "--set",
            "autovacuum=on",
            "--set",
            "autovacuum_naptime=1s",
            "--set",
            "autovacuum_vacuum_threshold=0",
            "--set",
            "autovacuum_vacuum_scale_factor=0",
            "--out",
            "run.json",
        ],
    );
    assert!(out.contains("autovacuum: "), "{out}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cwd.join("run.json")).unwrap()).unwrap();
    let t = &run["tables"];
    let av = &t["autovacuum"];
    let vacuums = av["vacuums"].as_u64().unwrap();
    assert!(vacuums >= 1 && av["rounds"].as_u64().unwrap() >= 2, "{av}");
    let rows = t["tables"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["relname"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "pgbench_branches",
            "pgbench_tellers",
            "pgbench_accounts",
            "pgbench_history"
        ]
    );
    let counted: u64 = rows
        .iter()
        .map(|r| r["autovacuum_count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, vacuums, "{t}");
    assert!(
        rows[2]["autovacuum_count"].as_u64().unwrap() >= 1,
        "accounts: {t}"
    );
    let spans = av["spans"].as_array().unwrap();
    assert_eq!(spans.len() as u64, vacuums);
    let duration = run["duration_s"].as_f64().unwrap();
    for s in spans {
        let (a, b) = (s[0].as_f64().unwrap(), s[1].as_f64().unwrap());
        assert!(0.9 <= a && a <= b && b <= duration + 1.0, "{s}");
    }
    let txns = run["transactions"].as_u64().unwrap();
    assert!(rows[2]["n_tup_upd"].as_u64().unwrap() >= txns, "{t}");
    assert!(rows[3]["n_tup_ins"].as_u64().unwrap() >= txns, "{t}");
    // VACUUM's count, taken while the clients move rows (an estimate, as PostgreSQL's:
    // rows whose update commits while the pass is between their two pages are missed).
    let live = rows[2]["n_live_tup"].as_u64().unwrap();
    assert!(
        (99_000..=101_000).contains(&live),
        "scale 1's accounts: {live}"
    );
    check_passes(cwd);

    // Off (the default): the tables' rows, no launcher.
    ok(
        cwd,
        &[
            "bench", "-D", "db", "-c", "1", "-T", "1", "--out", "off.json",
        ],
    );
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cwd.join("off.json")).unwrap()).unwrap();
    assert!(run["tables"]["autovacuum"].is_null(), "{}", run["tables"]);
    assert_eq!(run["tables"]["tables"].as_array().unwrap().len(), 4);
}

/// `bufpool seeds` without root: a seed whose thread measured a disk (004 here) needs
/// scripts/slow-device.sh's throttled device, which only root can make, so its rows are
/// left unmeasured, each saying why, and nothing runs (rather than measuring on another
/// device than the set-up names). Run as user nobody when the test runs as root.
#[test]
fn seeds_without_root_skip_the_slow_device_rows_and_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let root = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0");
    let bin = env!("CARGO_BIN_EXE_bufpool");
    let args = [
        "seeds",
        "004",
        "--quick",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ];
    let mut cmd = if root {
        use std::os::unix::fs::PermissionsExt;
        for d in [dir.path(), out.as_path()] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", bin]);
        c
    } else {
        Command::new(bin)
    };
    let started = std::time::Instant::now();
    let o = cmd.args(args).current_dir(dir.path()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        started.elapsed().as_secs() < 60,
        "no experiment should have run"
    );
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = doc["seeds"][0]["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    for r in rows {
        assert!(r["our_figure"].is_null(), "{r}");
        let why = r["skipped"].as_str().unwrap_or_default();
        assert!(why.contains("needs root") && why.contains("slow10"), "{r}");
    }
    assert_eq!(doc["seeds"][0]["measured"], 0);
}

/// A 4-second c2 bench of `db` with `extra` flags, `-P 1`, stderr read line by line.
fn short_bench(
    cwd: &Path,
    extra: &[&str],
) -> (
    std::process::Child,
    std::io::Lines<BufReader<std::process::ChildStderr>>,
) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bufpool"))
        .args(["bench", "-D", "db", "-c", "2", "-T", "4", "-P", "1"])
        .args(extra)
        .current_dir(cwd)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let err = BufReader::new(child.stderr.take().unwrap()).lines();
    (child, err)
}

/// `bufpool buffercache` against a running bench (through its socket) and a stopped
/// directory (autoprewarm's saved list, or an error saying nothing was saved).
#[test]
fn buffercache_reads_a_running_pool_and_a_stopped_directorys_saved_list() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    init(cwd);
    let o = bufpool(cwd, &["buffercache", "-D", "db"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("not running") && err.contains("autoprewarm"),
        "{err}"
    );

    let (mut child, mut err) = short_bench(cwd, &["--set", "autoprewarm=on"]);
    for line in err.by_ref() {
        if line.unwrap().starts_with("progress:") {
            break;
        }
    }
    let summary: serde_json::Value = serde_json::from_str(&ok(
        cwd,
        &["buffercache", "--summary", "--json", "-D", "db"],
    ))
    .unwrap();
    let s = &summary["summary"];
    let (used, unused) = (
        s["buffers_used"].as_u64().unwrap(),
        s["buffers_unused"].as_u64().unwrap(),
    );
    assert_eq!(used + unused, 2048, "16MB of 8 kB buffers: {summary}");
    assert!(used > 0, "{summary}");
    let rels = ok(cwd, &["buffercache", "--relations", "-D", "db"]);
    assert!(rels.starts_with("relfilenode | reltablespace"), "{rels}");
    assert!(
        rels.lines().count() >= 5,
        "the four tables and their keys: {rels}"
    );
    let rows = ok(cwd, &["buffercache", "-D", "db"]);
    assert!(rows.contains("(2048 rows)"), "{rows}");
    for line in err {
        line.unwrap();
    }
    assert!(child.wait().unwrap().success());
    assert!(
        !cwd.join("db/bufpool.sock").exists(),
        "the socket went with the run"
    );

    let saved = ok(cwd, &["buffercache", "-D", "db"]);
    let first = saved.lines().next().unwrap();
    assert!(
        first.starts_with("not running: the block list autoprewarm saved at 20"),
        "{first}"
    );
    let n: usize = first
        .split('(')
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(n > 0 && n <= 2048, "{first}");
    assert_eq!(saved.lines().count(), n + 2, "a line per saved block");
}

/// `bench --metrics-addr 127.0.0.1:0` serves the counters as OpenMetrics text while the run
/// goes (scraped here over TCP), and refuses an address that is not loopback.
#[test]
fn bench_serves_its_metrics_for_a_scrape_on_loopback_only() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    init(cwd);
    let o = bufpool(
        cwd,
        &[
            "bench",
            "-D",
            "db",
            "-T",
            "1",
            "--metrics-addr",
            "0.0.0.0:9187",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("loopback"),
        "{o:?}"
    );

    let (mut child, mut err) = short_bench(cwd, &["--metrics-addr", "127.0.0.1:0"]);
    let mut addr = None;
    for line in err.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("metrics: serving http://") {
            addr = Some(rest.split('/').next().unwrap().to_string());
        }
        if line.starts_with("progress:") {
            break;
        }
    }
    let addr = addr.expect("the address it serves on");
    let scrape = |path: &str| {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text
    };
    let first = scrape("/metrics");
    assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
    assert!(first.contains("application/openmetrics-text"), "{first}");
    assert!(first.ends_with("# EOF\n"), "{first}");
    let hits = |text: &str| -> f64 {
        let key = "bufpool_io_hits_total{backend_type=\"client backend\",object=\"relation\",context=\"normal\"} ";
        let line = text
            .lines()
            .find(|l| l.starts_with(key))
            .expect("the hits row");
        line[key.len()..].parse().unwrap()
    };
    let h1 = hits(&first);
    assert!(h1 > 0.0);
    assert!(scrape("/").starts_with("HTTP/1.1 404"));
    // Another second of the run: the counters move.
    for line in err.by_ref() {
        if line.unwrap().starts_with("progress:") {
            break;
        }
    }
    assert!(hits(&scrape("/metrics")) > h1);
    for line in err {
        line.unwrap();
    }
    assert!(child.wait().unwrap().success());
}
