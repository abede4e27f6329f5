//! The kill-test harness shared by `crash_kill*.rs`: run a child (this same test binary,
//! one `#[ignore]`d test) that prints `ack <thread> <seq>` after each durable
//! acknowledgement, SIGKILL it after a random number of acks, read every ack it printed
//! before dying, check it died of our signal (a child's own panic must fail the test, not
//! look like a kill), then let the caller verify the recovered state.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

/// Loops from `BUFPOOL_KILL_LOOPS`, else `default`.
pub fn loops(default: u32) -> u32 {
    std::env::var("BUFPOOL_KILL_LOOPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A 64-bit mixer (splitmix64's finalizer) for reproducible pseudo-random choices.
#[allow(dead_code)] // not every kill test draws its workload from it
pub fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Makes the calling (child) process abort on any panic, so that a failing client thread
/// ends the child at once instead of leaving the others running until the kill.
pub fn abort_on_panic() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        std::process::abort();
    }));
}

/// The child: which `#[ignore]`d test of this binary to run, the environment variable
/// that gives it its data directory, and how many threads print acks.
pub struct Child<'a> {
    pub test: &'a str,
    pub dir_var: &'a str,
    pub dir: &'a Path,
    pub threads: usize,
}

/// Runs `rounds` kill rounds of `child`. `acked[t]` is the highest sequence number thread
/// `t` acknowledged so far (over all rounds); `verify(round, acked)` runs after each
/// kill. Waits for between 1 and `max_wait` acks per round. Returns the total number of
/// acks.
pub fn kill_loop(
    child: &Child<'_>,
    rounds: u32,
    max_wait: u64,
    seed: u64,
    mut verify: impl FnMut(u32, &[u64]),
) -> u64 {
    let (child_test, dir_var, dir, threads) = (child.test, child.dir_var, child.dir, child.threads);
    let mut acked = vec![0u64; threads];
    let mut rng = seed;
    let mut total = 0u64;
    let record = |line: &str, acked: &mut Vec<u64>| -> bool {
        let Some(rest) = line.trim().strip_prefix("ack ") else {
            return false;
        };
        let mut it = rest.split(' ').map(|x| x.parse::<u64>().unwrap());
        let (t, k) = (it.next().unwrap() as usize, it.next().unwrap());
        acked[t] = acked[t].max(k);
        true
    };
    for round in 0..rounds {
        rng = mix(rng.wrapping_add(1));
        let wait_for = 1 + rng % max_wait;
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                child_test,
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(dir_var, dir)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut seen = 0;
        while seen < wait_for {
            let line = lines
                .next()
                .unwrap_or_else(|| panic!("round {round}: child exited: {:?}", child.wait()));
            if record(&line.unwrap(), &mut acked) {
                seen += 1;
            }
        }
        child.kill().unwrap(); // SIGKILL
                               // Acks printed before the kill but not read yet still count: they were given.
        for line in lines {
            if record(&line.unwrap(), &mut acked) {
                seen += 1;
            }
        }
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL),
            "round {round}: the child ended by itself: {status:?}"
        );
        total += seen;
        verify(round, &acked);
    }
    total
}
