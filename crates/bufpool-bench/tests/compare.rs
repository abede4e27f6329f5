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
            "-P",
            "1",
            "--json",
        ],
        &[],
    );
    let text = ok(&o, "compare");
    // Each engine's progress lines reach the user as they come, after its name, and
    // stay in its log.
    let stderr = String::from_utf8_lossy(&o.stderr);
    for (engine, log) in [
        ("bufpool", "bufpool-r1/bench.stderr.log"),
        ("sqlite", "sqlite-r1/run.stderr.log"),
    ] {
        assert!(
            stderr.contains(&format!("  {engine} | progress: 1.0 s")),
            "{stderr}"
        );
        let kept = std::fs::read_to_string(cwd.join("bufpool-compare/logs").join(log)).unwrap();
        assert!(kept.contains("progress: 1.0 s"), "{log}: {kept}");
    }
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

/// Proves: `--workload ycsb-a` runs YCSB A on bufpool's and SQLite's usertable (loaded with
/// the same records, each checked after its run) and asks PostgreSQL's script for the same
/// workload and records (a stand-in plays the script here; CI runs the real one), and
/// judges bufpool against SQLite NORMAL by the YCSB target, not TPC-B's.
#[test]
fn ycsb_a_beside_sqlite_and_postgres_with_its_own_target() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let fake = cwd.join("fake-peer.sh");
    std::fs::write(&fake, FAKE_PEER).unwrap();
    let args_file = cwd.join("peer-args.txt");
    let o = bufpool(
        cwd,
        &[
            "compare",
            "--workload",
            "ycsb-a",
            "--records",
            "2000",
            "--engines",
            "bufpool,postgres,sqlite",
            "--postgres-version",
            "18",
            "-c",
            "2",
            "-T",
            "2",
            "--sync",
            "off",
            "--pool",
            "16MB",
            "--json",
        ],
        &[
            ("BUFPOOL_PG_PEER", fake.to_str().unwrap()),
            ("FAKE_ARGS", args_file.to_str().unwrap()),
        ],
    );
    let j: serde_json::Value =
        serde_json::from_str(&ok(&o, "compare --workload ycsb-a")).expect("JSON");
    let engines = j["engines"].as_array().unwrap();
    let names: Vec<&str> = engines
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bufpool", "postgresql-18", "sqlite"]);
    for e in engines {
        assert!(e["transactions"].as_u64().unwrap() > 0, "{e}");
    }
    assert_eq!(engines[2]["extra"]["usertable_rows_checked"], 2000);
    assert_eq!(j["settings"]["workload"], "ycsb-a");
    assert_eq!(j["settings"]["records"], 2000);
    assert_eq!(
        j["skipped"].as_array().unwrap().len(),
        0,
        "{}",
        j["skipped"]
    );
    let peer_args = std::fs::read_to_string(&args_file).unwrap();
    let run = peer_args.lines().find(|l| l.contains("--out")).unwrap();
    assert!(
        run.contains("--workload ycsb-a --records 2000") && run.contains("--sync off"),
        "{peer_args}"
    );
    let targets = j["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 1, "{targets:?}");
    assert_eq!(targets[0]["name"], "ycsb_a_vs_sqlite_normal");
    assert_eq!(targets[0]["target"], 1.5);
    let tps = |e: &serde_json::Value| e["tps"].as_f64().unwrap();
    let v = targets[0]["value"].as_f64().unwrap();
    assert!(
        (v - tps(&engines[0]) / tps(&engines[2])).abs() < 1e-9 * v,
        "{targets:?}"
    );
}

/// Proves: `--workload tpcc` loads TPC-C's nine tables with one warehouse on bufpool and
/// SQLite, runs the mix on each (SQLite's checked against consistency conditions 1 to 4
/// after its run, its counts adding up to its transactions), reports the warehouses, and
/// judges bufpool against SQLite FULL by TPC-C's own target, not TPC-B's.
#[test]
fn tpcc_beside_sqlite_with_its_own_target() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let o = bufpool(
        cwd,
        &[
            "compare",
            "--workload",
            "tpcc",
            "--warehouses",
            "1",
            "--engines",
            "bufpool,sqlite",
            "-c",
            "2",
            "-T",
            "3",
            "--json",
        ],
        &[],
    );
    let j: serde_json::Value =
        serde_json::from_str(&ok(&o, "compare --workload tpcc")).expect("JSON");
    let engines = j["engines"].as_array().unwrap();
    let names: Vec<&str> = engines
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bufpool", "sqlite"]);
    for e in engines {
        assert!(e["tps"].as_f64().unwrap() > 0.0, "{e}");
        let tpcc = &e["extra"]["tpcc"];
        assert_eq!(tpcc["warehouses"], 1, "{e}");
        assert!(
            tpcc["transactions"]["new_order"].as_u64().unwrap() > 0,
            "{e}"
        );
    }
    let sqlite = &engines[1];
    let checked = &sqlite["extra"]["tpcc_checked"];
    assert_eq!(checked["warehouses"], 1, "{sqlite}");
    assert!(
        checked["orders"].as_i64().unwrap() > 30_000,
        "new orders were placed: {sqlite}"
    );
    let done: u64 = sqlite["extra"]["tpcc"]["transactions"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(done, sqlite["transactions"].as_u64().unwrap(), "{sqlite}");
    assert_eq!(j["settings"]["workload"], "tpcc");
    assert_eq!(j["settings"]["warehouses"], 1);
    assert!(j["settings"]["records"].is_null());
    assert!(j["skipped"].as_array().unwrap().is_empty());
    let targets = j["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 1, "{targets:?}");
    assert_eq!(targets[0]["name"], "tpcc_sync_on_vs_sqlite_full");
    assert_eq!(targets[0]["op"], ">=");
    assert_eq!(targets[0]["target"], 2.0);
    let tps = |e: &serde_json::Value| e["tps"].as_f64().unwrap();
    let v = targets[0]["value"].as_f64().unwrap();
    assert!(
        (v - tps(&engines[0]) / tps(&engines[1])).abs() < 1e-9 * v,
        "{targets:?}"
    );
    assert_eq!(targets[0]["pass"], v >= 2.0);
}

/// Proves: `--rate auto` runs one more round with every engine throttled to 60% of the
/// slowest engine's median tps, each a column of its own (`NAME@R`) that ran at that
/// rate; the full-speed targets come from the full-speed runs only; a rate below 1 is
/// refused naming the flag.
#[test]
fn rate_auto_adds_a_throttled_round_at_the_slowest_engines_pace() {
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
            "3",
            "--pool",
            "16MB",
            "--sync",
            "off",
            "--rate",
            "auto",
            "--json",
        ],
        &[],
    );
    let j: serde_json::Value = serde_json::from_str(&ok(&o, "compare --rate auto")).unwrap();
    let engines = j["engines"].as_array().unwrap();
    let tps = |name: &str| {
        engines
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["tps"].as_f64().unwrap())
    };
    let slowest = tps("bufpool").unwrap().min(tps("sqlite").unwrap());
    let rate = (0.6 * slowest).round();
    for name in ["bufpool", "sqlite"] {
        let throttled = tps(&format!("{name}@{rate:.0}"))
            .unwrap_or_else(|| panic!("no {name}@{rate:.0} column: {engines:?}"));
        assert!(
            (throttled / rate - 1.0).abs() < 0.1,
            "{name}: {throttled} tps at a rate of {rate}"
        );
    }
    let names: Vec<&str> = j["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "sync_off_vs_sqlite_normal",
            "maxlat_p50_ms_off",
            "cpu_per_tx_vs_sqlite"
        ],
        "no PostgreSQL, so no equal-rate target"
    );
    let o = bufpool(cwd, &["compare", "--rate", "0.5"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--rate"));
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
    // The default looks for the installed PostgreSQL and for 18: both are skipped, each
    // with its reason.
    assert_eq!(j["skipped"][0]["name"], "postgresql");
    assert_eq!(j["skipped"][0]["reason"], "no PostgreSQL here (test)");
    assert_eq!(j["skipped"][1]["name"], "postgresql-18");
    assert!(text.contains("postgresql-18: skipped: no PostgreSQL here (test)"));
    assert!(j["engines"].as_array().unwrap().is_empty());
}

/// A stand-in for `scripts/postgres-peer.sh` that plays PostgreSQL 15 (the installed
/// one) and 18: its probe answers, and a run writes the files the real script writes,
/// with each version's views (pg_stat_bgwriter's checkpoint columns on 15,
/// pg_stat_checkpointer's on 18) and server log lines.
const FAKE_PEER: &str = r#"#!/bin/bash
set -e
v=15 out= probe= all="$*"
[[ -z $FAKE_ARGS ]] || echo "$all" >> "$FAKE_ARGS"
while (($#)); do
  case $1 in
    --probe) probe=1; shift ;;
    --postgres-version) v=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) shift 2 ;;
  esac
done
if [[ -n $probe ]]; then printf 'version=PostgreSQL %s.6\nbindir=/nowhere\n' "$v"; exit 0; fi
mkdir -p "$out"
echo "PostgreSQL $v.6" > "$out/version.txt"
echo 1.5 > "$out/load_s.txt"
printf 'tps = 2.000000 (without initial connection time)\n' > "$out/pgbench.out"
echo 'cpu_ticks=100 write_bytes=0 clk_tck=100 wchar=0 dev_write_bytes=0' > "$out/proc_before.txt"
echo 'cpu_ticks=300 write_bytes=81920 clk_tck=100 wchar=40960 dev_write_bytes=65536' > "$out/proc_after.txt"
echo '0.5 0.5' > "$out/pgbench_cpu.txt"
echo 50000000 > "$out/peak_pss_bytes.txt"
settings='shared_buffers=16MB checkpoint_timeout=30s data_checksums=off'
before='db_blks_hit=1000 db_blks_read=10 buffers_alloc=5'
after='db_blks_hit=1400 db_blks_read=14 buffers_alloc=9'
if [[ $v == 18 ]]; then
  settings='shared_buffers=16MB checkpoint_timeout=30s data_checksums=on io_method=worker io_workers=3'
  before+=' ckpt_num_timed=0 ckpt_num_requested=0 ckpt_num_done=0 ckpt_buffers_written=0 ckpt_slru_written=0'
  after+=' ckpt_num_timed=1 ckpt_num_requested=1 ckpt_num_done=2 ckpt_buffers_written=70 ckpt_slru_written=3'
  extra=', wrote 3 SLRU buffers'
else
  before+=' checkpoints_timed=0 checkpoints_req=0 buffers_checkpoint=0'
  after+=' checkpoints_timed=1 checkpoints_req=1 buffers_checkpoint=60'
  extra=
fi
echo "$settings" | tr ' ' '\n' > "$out/settings.txt"
echo "$before" > "$out/stats_before.txt"
echo "$after" > "$out/stats_after.txt"
# Four transactions over two seconds from 2026-11-29 09:24:00 UTC.
printf '0 0 1000 0 1795944240 1000\n0 1 1000 0 1795944240 600000\n1 0 2000 0 1795944241 200000\n1 1 2000 0 1795944241 900000\n' > "$out/pgbench_log.42"
{
  echo '2026-11-29 09:24:00.500 UTC [7] LOG:  checkpoint starting: time'
  echo "2026-11-29 09:24:01.500 UTC [7] LOG:  checkpoint complete: wrote 40 buffers (1.0%)$extra; write=0.9 s, sync=0.05 s, total=1.0 s; sync files=4, longest=0.02 s, average=0.01 s"
  echo '2026-11-29 09:24:03.000 UTC [7] LOG:  checkpoint starting: immediate force wait'
  echo "2026-11-29 09:24:03.100 UTC [7] LOG:  checkpoint complete: wrote 30 buffers (0.8%)$extra; write=0.05 s, sync=0.01 s, total=0.1 s; sync files=2, longest=0.01 s, average=0.01 s"
} > "$out/server.log"
"#;

#[test]
fn postgres_15_and_18_are_columns_of_one_table_with_their_views() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let fake = cwd.join("peer.sh");
    std::fs::write(&fake, FAKE_PEER).unwrap();
    let peer = [("BUFPOOL_PG_PEER", fake.to_str().unwrap())];
    // The list, and the default (the installed one, 15 here, and 18 where it can be had).
    for list in [Some("15,18"), None] {
        let mut args = vec!["compare", "--engines", "postgres", "-s", "1", "-T", "2"];
        if let Some(l) = list {
            args.extend(["--postgres-version", l]);
        }
        let text = ok(&bufpool(cwd, &args, &peer), "compare with 15 and 18");
        // One table, a column per version, each version's settings under it.
        let header = text.lines().find(|l| l.contains("postgresql-15")).unwrap();
        assert!(header.contains("postgresql-18"), "{text}");
        assert!(
            text.contains(
                "postgresql-18 (PostgreSQL 18.6): data_checksums=on, io_method=worker, io_workers=3"
            ),
            "{text}"
        );
        assert!(
            text.contains("postgresql-15 (PostgreSQL 15.6): data_checksums=off\n"),
            "{text}"
        );
        let j: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(cwd.join("bufpool-compare/compare.json")).unwrap(),
        )
        .unwrap();
        let engines = j["engines"].as_array().unwrap();
        let names: Vec<&str> = engines
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["postgresql-15", "postgresql-18"], "{list:?}");
        assert!(j["skipped"].as_array().unwrap().is_empty());
        for e in engines {
            assert_eq!(e["engine"], "postgresql");
            assert_eq!(e["transactions"], 4);
            // pg_stat_database's hits and reads over the run, per transaction; the one
            // checkpoint that started within the run (the closing CHECKPOINT is not).
            assert_eq!(e["buffer_hits_per_tx"], 100.0, "{e}");
            assert_eq!(e["buffer_reads_per_tx"], 1.0, "{e}");
            assert_eq!(e["checkpoints"], 1.0, "{e}");
        }
        assert_eq!(engines[1]["settings"]["io_method"], "worker");
        assert!(engines[0]["settings"].get("io_method").is_none());
    }
    // The report has both columns, and each run's logs are kept under its column's name.
    let html = std::fs::read_to_string(cwd.join("bufpool-compare/index.html")).unwrap();
    assert!(html.contains("postgresql-15") && html.contains("postgresql-18"));
    for name in ["postgresql-15", "postgresql-18"] {
        let logs = cwd.join("bufpool-compare/logs").join(format!("{name}-r1"));
        assert!(logs.join("pgbench_agg.log").exists(), "{}", logs.display());
    }
}

#[test]
fn a_postgres_version_list_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (
            vec![
                "compare",
                "--engines",
                "postgres",
                "--postgres-version",
                "15,x8",
            ],
            "'x8' is not a major version",
        ),
        (
            vec!["compare", "--engines", "sqlite", "--postgres-version", "18"],
            "PostgreSQL is not among --engines",
        ),
    ] {
        let o = bufpool(dir.path(), &args, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("--postgres-version") && err.contains(needle),
            "{err}"
        );
    }
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
        (
            vec![
                "compare",
                "--engines",
                "sqlite",
                "--workload",
                "tpcc",
                "--records",
                "10",
            ],
            "--records is YCSB's",
        ),
        (
            vec!["compare", "--engines", "sqlite", "--warehouses", "2"],
            "--warehouses is TPC-C's",
        ),
        (
            vec![
                "compare",
                "--engines",
                "sqlite",
                "--workload",
                "ycsb-a",
                "-w",
                "2",
            ],
            "--warehouses is TPC-C's",
        ),
        (
            vec![
                "compare",
                "--engines",
                "sqlite",
                "--workload",
                "tpcc",
                "-w",
                "0",
            ],
            "--warehouses 0",
        ),
    ] {
        let o = bufpool(dir.path(), &args, &[]);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    }
}
