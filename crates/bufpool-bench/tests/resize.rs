//! `bench --resize-at` through the real binary: the pool grown and shrunk while TPC-B
//! runs, each resize in the JSON and the summary, the tables sound after it, and a bad
//! `--resize-at` refused naming the flag.

mod common;

use common::{bufpool, ok};

/// Proves: two resizes (grow past `shared_buffers`, then shrink below it) happen at their
/// seconds during the run with `max_shared_buffers` left at auto (the bench makes room),
/// each is in the JSON with its sizes, and `check` finds every balance and history row
/// consistent afterwards.
#[test]
fn resize_at_grows_then_shrinks_the_pool_and_nothing_is_lost() {
    let dir = common::small_db();
    let d = dir.path();
    let out = ok(
        d,
        &[
            "bench",
            "-D",
            "db",
            "-c",
            "2",
            "-j",
            "2",
            "-T",
            "4",
            "--json",
            "--resize-at",
            "1s:64MB,2s:1MB",
            "--set",
            "resize_duty_cycle=1",
        ],
    );
    let j: serde_json::Value = serde_json::from_str(&out).expect("bench --json prints JSON");
    let r = j["resizes"].as_array().expect("resizes in the JSON");
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(
        (r[0]["from_bytes"].as_u64(), r[0]["to_bytes"].as_u64()),
        (Some(16 << 20), Some(64 << 20)),
        "{r:?}"
    );
    assert_eq!(r[1]["to_bytes"].as_u64(), Some(1 << 20), "{r:?}");
    assert!(r.iter().all(|x| x["error"].is_null()), "{r:?}");
    let at = |i: usize| r[i]["at_s"].as_f64().unwrap();
    assert!((0.9..2.0).contains(&at(0)) && at(1) >= 1.9, "{r:?}");
    assert!(j["transactions"].as_u64().unwrap() > 0);
    ok(d, &["check", "-D", "db"]);
}

#[test]
fn a_bad_resize_at_is_refused_naming_the_flag() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let out = bufpool(
        dir.path(),
        &["bench", "-D", "db", "-T", "1", "--resize-at", "10s"],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--resize-at 10s") && err.contains("TIME:SIZE"),
        "{err}"
    );
}
