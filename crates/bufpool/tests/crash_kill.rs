//! Kill test: a child process runs concurrent transfers and reports each acknowledged
//! commit on stdout; the parent kills it with SIGKILL at a random moment, recovers, and
//! checks every acknowledged transfer is there, none is half applied, money is conserved.
//!
//! 20 kills by default; set BUFPOOL_KILL_LOOPS for a longer soak. No sleeps: the parent
//! waits for a random number of acknowledgements (read from the child's stdout), then kills.

mod bank;
mod kill;

use std::path::Path;
use std::sync::Arc;

use bufpool::{Config, Engine, RealVfs};

const THREADS: u32 = 4;

fn config() -> Config {
    let mut c = Config::default();
    c.set("shared_buffers", "16").unwrap(); // 9 bank pages + headroom: pages do get evicted
    c.set("wal_segment_size", "1MB").unwrap();
    c
}

fn open(dir: &Path) -> Engine {
    Engine::open_vfs(Arc::new(RealVfs::new()), dir, &config(), true).unwrap()
}

/// Child half: open (recovering), then transfer forever, printing "ack <t> <k>".
#[test]
#[ignore = "run as a child process by kill_nine_loop"]
fn child_transfers_until_killed() {
    let dir = std::env::var("BUFPOOL_KILL_DIR").expect("run by kill_nine_loop only");
    kill::abort_on_panic();
    let e = open(dir.as_ref());
    if bank::seq(&e, 0).is_err()
        || e.pool()
            .nblocks(bank::REL, bufpool::ForkNumber::Main)
            .unwrap_or(0)
            == 0
    {
        bank::init(&e).unwrap();
    }
    println!("ready");
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let e = &e;
            s.spawn(move || {
                let mut k = bank::seq(e, t).unwrap();
                loop {
                    k += 1;
                    bank::run_transfer(e, t, k).unwrap();
                    println!("ack {t} {k}");
                }
            });
        }
    });
}

#[test]
fn kill_nine_loop() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let rounds = kill::loops(20);
    let child = kill::Child {
        test: "child_transfers_until_killed",
        dir_var: "BUFPOOL_KILL_DIR",
        dir: dir.path(),
        threads: bank::MAX_THREADS as usize,
    };
    let total = kill::kill_loop(&child, rounds, 40, 0x9e37_79b9, |round, acked| {
        let e = open(dir.path());
        let report = e.recovery_report().expect("recovered").clone();
        bank::verify(&e, acked);
        assert!(
            report.records > 0 || round == 0,
            "round {round}: nothing replayed: {report:?}"
        );
    });
    eprintln!(
        "kill_nine_loop: {rounds} kills, {total} acknowledged transfers, all present after recovery"
    );
    assert!(
        total >= u64::from(rounds),
        "only {total} acknowledged transfers"
    );
}
