//! Model test of paced synchronized scans (`seqscan_sync_pacing`) with shuttle.
//!
//! Run with `RUSTFLAGS="--cfg shuttle" cargo test -p pgbufpool --target-dir target/shuttle --test syncscan_model`. Under the
//! feature the groups' mutex and condition variable come from shuttle, whose timed waits
//! never time out: a front scan that waits for a wake-up nobody sends is reported as a
//! deadlock instead of ending after a timeout.
//! Proves: three scans of one table, started at different blocks and each walking the
//! whole table page by page with a small allowed lead, all finish, under random and PCT
//! schedules: the front is woken by every advance and every departure of the others, no
//! two members wait for each other (not even exactly half a table apart), and a group's
//! slot is freed when its last member leaves.
#![cfg(shuttle)]

mod shuttle_check;

use std::sync::Arc;
use std::time::Duration;

use bufpool::scan::ScanPositions;
use bufpool::{ForkNumber, RelFileId};

const REL: RelFileId = RelFileId::new(0, 7);
const PAGES: u32 = 12;

fn scans(starts: &'static [u32], max_lead: u32) {
    let p = Arc::new(ScanPositions::default());
    let handles: Vec<_> = starts
        .iter()
        .map(|&start| {
            let p = p.clone();
            shuttle::thread::spawn(move || {
                let m = p.join(REL, ForkNumber::Main, PAGES, start).expect("room");
                for k in 0..PAGES {
                    // A wait that never times out: only a wake-up ends it.
                    m.advance(start + k, max_lead, Duration::from_secs(3600));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(p.group_members(REL, ForkNumber::Main), 0);
}

#[test]
fn paced_scans_all_finish_random() {
    shuttle_check::check_random(|| scans(&[0, 3, 7], 2), 2_000);
}

#[test]
fn paced_scans_all_finish_pct() {
    shuttle_check::check_pct(|| scans(&[0, 3, 7], 2), 2_000, 3);
}

#[test]
fn scans_half_a_table_apart_do_not_wait_for_each_other() {
    shuttle_check::check_random(|| scans(&[0, PAGES / 2], 1), 2_000);
    shuttle_check::check_pct(|| scans(&[0, PAGES / 2, PAGES / 2], 1), 1_000, 3);
}
