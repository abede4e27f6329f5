//! Kill test: a child process runs concurrent transfers and reports each acknowledged
//! commit on stdout; the parent kills it with SIGKILL at a random moment, recovers, and
//! checks every acknowledged transfer is there, none is half applied, money is conserved.
//!
//! 20 kills by default; set BUFPOOL_KILL_LOOPS for a longer soak. No sleeps: the parent
//! waits for a random number of acknowledgements (read from the child's stdout), then kills.

mod bank;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
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
    Engine::open(Arc::new(RealVfs::new()), dir, &config(), true).unwrap()
}

/// Child half: open (recovering), then transfer forever, printing "ack <t> <k>".
#[test]
#[ignore = "run as a child process by kill_nine_loop"]
fn child_transfers_until_killed() {
    let dir = std::env::var("BUFPOOL_KILL_DIR").expect("run by kill_nine_loop only");
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
    let loops: u32 = std::env::var("BUFPOOL_KILL_LOOPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut acked = vec![0u64; bank::MAX_THREADS as usize];
    let mut rng = 0x9e37_79b9_u64;
    let mut total_acks = 0u64;
    for round in 0..loops {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let wait_for = 1 + rng % 40;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "child_transfers_until_killed",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("BUFPOOL_KILL_DIR", dir.path())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let mut seen = 0;
        while seen < wait_for {
            line.clear();
            if out.read_line(&mut line).unwrap() == 0 {
                panic!("round {round}: child exited early: {:?}", child.wait());
            }
            if let Some(rest) = line.trim().strip_prefix("ack ") {
                let mut it = rest.split(' ').map(|x| x.parse::<u64>().unwrap());
                let (t, k) = (it.next().unwrap() as usize, it.next().unwrap());
                acked[t] = acked[t].max(k);
                seen += 1;
            }
        }
        child.kill().unwrap(); // SIGKILL
                               // Acks printed before the kill but not yet read still count: they were acknowledged.
        for line in out.lines() {
            let line = line.unwrap();
            if let Some(rest) = line.trim().strip_prefix("ack ") {
                let mut it = rest.split(' ').map(|x| x.parse::<u64>().unwrap());
                let (t, k) = (it.next().unwrap() as usize, it.next().unwrap());
                acked[t] = acked[t].max(k);
                seen += 1;
            }
        }
        child.wait().unwrap();
        total_acks += seen;
        let e = open(dir.path());
        let report = e.recovery_report().expect("recovered").clone();
        bank::verify(&e, &acked);
        assert!(
            report.records > 0 || round == 0,
            "round {round}: nothing replayed: {report:?}"
        );
    }
    eprintln!("kill_nine_loop: {loops} kills, {total_acks} acknowledged transfers, all present after recovery");
    assert!(
        total_acks >= u64::from(loops),
        "only {total_acks} acknowledged transfers"
    );
}
