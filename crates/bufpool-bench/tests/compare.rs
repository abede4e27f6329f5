//! `bufpool compare` end to end through the real binary: bufpool and SQLite at scale 1
//! for two seconds each (the SQLite path whole: load, run, balance check, aggregate log),
//! the JSON's fields, the report, and PostgreSQL's skip path with its printed reason. The
//! PostgreSQL run itself is in `.ci/run`, which installs PostgreSQL.

use std::path::Path;
use std::process::{Command, Output};

fn bufpool(cwd: &Path, args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bufpool"));
    c.args(args).current_dir(cwd).env_remove("RUST_BACKTRACE");
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().expect("run bufpool")
}

fn ok(o: &Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn bufpool_and_sqlite_side_by_side_json_report_and_logs() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let o = bufpool(
        cwd,
        &[
            "compare",
            "--engines",
            "bufpool,sqlite",
            "-s",
            "1",
            "-c",
            "2",
            "-T",
            "2",
            "--pool",
            "16MB",
            "--json",
        ],
        &[],
    );
    let text = ok(&o, "compare");
    let j: serde_json::Value = serde_json::from_str(&text).expect("compare --json is JSON");
    let engines = j["engines"].as_array().unwrap();
    let names: Vec<&str> = engines
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bufpool", "sqlite"]);
    for e in engines {
        let name = e["name"].as_str().unwrap();
        assert!(e["tps"].as_f64().unwrap() > 0.0, "{name}: {e}");
        assert!(e["transactions"].as_u64().unwrap() > 0, "{name}: {e}");
        for k in ["avg", "p50", "p99", "max"] {
            assert!(
                e["latency_ms"][k].as_f64().unwrap() > 0.0,
                "{name} latency {k}: {e}"
            );
        }
        for k in ["tps_p5", "tps_p50", "max_latency_p50", "max_latency_p99"] {
            assert!(e["per_interval"][k].as_f64().is_some(), "{name} {k}: {e}");
        }
        for k in ["cpu_us_per_tx", "write_bytes_per_tx", "peak_rss_bytes"] {
            assert!(e[k].as_f64().unwrap() > 0.0, "{name} {k}: {e}");
        }
        assert!(e["load_s"].as_f64().unwrap() > 0.0, "{name}: {e}");
        assert!(e["version"].as_str().unwrap().len() > 3, "{name}: {e}");
        assert!(e.get("backend_write_share").is_some(), "{name}: {e}");
    }
    let sqlite = &engines[1];
    assert_eq!(sqlite["kind"], "embedded");
    assert!(sqlite["version"].as_str().unwrap().starts_with("SQLite 3."));
    // The balance check ran after the run and matched every history row.
    assert_eq!(
        sqlite["extra"]["history_rows_checked"].as_u64().unwrap(),
        sqlite["transactions"].as_u64().unwrap()
    );
    assert!(sqlite["vs_bufpool"]["tps"].as_f64().unwrap() > 0.0);
    let sync = j["fdatasync_per_s"].as_array().unwrap();
    assert_eq!(sync.len(), 2);
    assert!(sync.iter().all(|v| v.as_f64().unwrap() > 0.0));
    assert_eq!(j["settings"]["synchronous_commit"], "on");
    assert_eq!(j["settings"]["sqlite"]["synchronous"], "FULL");
    assert!(j["machine"]["cores"].as_u64().unwrap() >= 1);
    assert!(j["skipped"].as_array().unwrap().is_empty());
    // Targets from the engines that ran: with synchronous commit on, tps against SQLite
    // FULL and bufpool's typical second's max latency; PostgreSQL's bytes target is left
    // out (it did not run), and so is the CPU target (it is judged with commit off).
    let targets = j["targets"].as_array().unwrap();
    let names: Vec<&str> = targets
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["sync_on_vs_sqlite_full", "maxlat_p50_ms_on"]);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    let tps = |e: &serde_json::Value| e["tps"].as_f64().unwrap();
    assert!(close(
        targets[0]["value"].as_f64().unwrap(),
        tps(&engines[0]) / tps(&engines[1])
    ));
    assert_eq!(
        (&targets[0]["op"], &targets[0]["target"]),
        (&">=".into(), &2.0.into())
    );
    assert!(close(
        targets[1]["value"].as_f64().unwrap(),
        engines[0]["per_interval"]["max_latency_p50"]
            .as_f64()
            .unwrap()
    ));
    for t in targets {
        let (v, goal) = (t["value"].as_f64().unwrap(), t["target"].as_f64().unwrap());
        let pass = if t["op"] == ">=" {
            v >= goal
        } else {
            v <= goal
        };
        assert_eq!(t["pass"].as_bool(), Some(pass), "{t}");
    }

    // The report overlays both runs under the engines' names.
    let html = std::fs::read_to_string(cwd.join("bufpool-compare/index.html")).unwrap();
    assert!(html.contains("bufpool") && html.contains("sqlite"));
    assert!(cwd.join("bufpool-compare/compare.json").exists());
    // SQLite's per-second log is in pgbench's aggregate format: 15 fields a line, the
    // transactions adding up to the run's.
    let logs = cwd.join("bufpool-compare/logs/sqlite-r1");
    let mut logged = 0;
    for f in std::fs::read_dir(&logs).unwrap() {
        let f = f.unwrap();
        if !f.file_name().to_string_lossy().starts_with("sqlite_log.") {
            continue;
        }
        for line in std::fs::read_to_string(f.path()).unwrap().lines() {
            let fields: Vec<u64> = line.split(' ').map(|v| v.parse().unwrap()).collect();
            assert_eq!(fields.len(), 15, "{line}");
            logged += fields[1];
        }
    }
    assert_eq!(logged, sqlite["transactions"].as_u64().unwrap());
    // The databases are gone; only the logs stay.
    assert!(std::fs::read_dir(cwd.join("bufpool-data/compare"))
        .unwrap()
        .next()
        .is_none());
}

#[test]
fn postgres_that_cannot_run_is_skipped_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let fake = cwd.join("peer.sh");
    std::fs::write(
        &fake,
        "#!/bin/bash\necho 'skip: no PostgreSQL here (test)' >&2\nexit 3\n",
    )
    .unwrap();
    let o = bufpool(
        cwd,
        &["compare", "--engines", "postgres", "-s", "1", "-T", "1"],
        &[("BUFPOOL_PG_PEER", fake.to_str().unwrap())],
    );
    let text = ok(&o, "compare with PostgreSQL unavailable");
    assert!(
        text.contains("postgresql: skipped: no PostgreSQL here (test)"),
        "{text}"
    );
    let j: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(cwd.join("bufpool-compare/compare.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(j["skipped"][0]["name"], "postgresql");
    assert_eq!(j["skipped"][0]["reason"], "no PostgreSQL here (test)");
    assert!(j["engines"].as_array().unwrap().is_empty());
}

#[test]
fn bad_compare_flags_name_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (
            vec!["compare", "--engines", "sqlite", "--pool", "lots"],
            "--pool",
        ),
        (
            vec!["compare", "--engines", "sqlite", "-c", "3", "-j", "2"],
            "-j 2",
        ),
        (vec!["compare", "--engines", "oracle"], "oracle"),
    ] {
        let o = bufpool(dir.path(), &args, &[]);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    }
}
