//! Model test of the commit log's group update with shuttle.
//!
//! Run with `RUSTFLAGS="--cfg shuttle" cargo test -p pgbufpool --target-dir target/shuttle --test clog_group_model` (CI does).
//! Under `--cfg shuttle` the bank locks, the group's queue lock, the members' outcome locks
//! and condition variables come from shuttle, which runs the real commit-log code under
//! random and PCT schedules.
//! Proves: however the ends interleave (each trying the bank lock, queueing, leading, or
//! arriving after a leader took its group and so starting the next), every end returns
//! (no member sleeps forever: shuttle fails a schedule where all threads block), each
//! allowed outcome is recorded exactly as asked, a refused transition is reported to the
//! thread that asked for it and changes nothing, ends on a second page are recorded by the
//! leader under that page's lock too, and a reader running beside them never sees a status
//! move backwards. How: a commit log of two 4 KiB pages in one bank, three or four ending
//! threads and a reader, in each `slru_design`.
#![cfg(shuttle)]

mod shuttle_check;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bufpool::slru::{SlruDesign, SlruOptions};
use bufpool::txn::{Clog, XidStatus};
use bufpool::{MemVfs, Vfs};

const PAGE: usize = 4096;

/// Schedules in which some end was recorded by a leader other than itself: the model
/// must reach the group path, not only the free-lock one.
static GROUPED_SCHEDULES: AtomicU64 = AtomicU64::new(0);

fn open(design: SlruDesign) -> Clog {
    let c = Clog::open_with(
        Arc::new(MemVfs::new()) as Arc<dyn Vfs>,
        Path::new("/db"),
        PAGE,
        SlruOptions { buffers: 4, design },
    )
    .unwrap();
    c.extend(0).unwrap();
    c.extend(c.xids_per_page() as u32).unwrap();
    c
}

/// Ends on two pages, one refused (xid 9 is aborted first), and a reader of xid 3.
fn ends_race(design: SlruDesign) {
    let c = Arc::new(open(design));
    c.set(9, XidStatus::Aborted).unwrap();
    let second = c.xids_per_page() as u32 + 1;
    let ends = [
        (3, XidStatus::Committed),
        (4, XidStatus::Aborted),
        (second, XidStatus::Committed),
        (9, XidStatus::Committed),
    ];
    let threads: Vec<_> = ends
        .into_iter()
        .map(|(x, st)| {
            let c = c.clone();
            shuttle::thread::spawn(move || (x, st, c.set_tree(x, &[], st)))
        })
        .collect();
    let reader = {
        let c = c.clone();
        shuttle::thread::spawn(move || {
            let mut seen = XidStatus::InProgress;
            for _ in 0..3 {
                let now = c.get(3).unwrap();
                assert!(
                    now == seen || seen == XidStatus::InProgress,
                    "xid 3 went from {seen:?} to {now:?}"
                );
                seen = now;
            }
        })
    };
    for t in threads {
        let (x, st, r) = t.join().unwrap();
        if x == 9 {
            assert!(r.is_err(), "the refused transition of 9 was reported");
            assert_eq!(c.get(9).unwrap(), XidStatus::Aborted);
        } else {
            r.unwrap();
            assert_eq!(c.get(x).unwrap(), st, "xid {x}");
        }
    }
    reader.join().unwrap();
    let s = c.clog_stats();
    if s.group_members > 0 {
        GROUPED_SCHEDULES.fetch_add(1, Ordering::Relaxed);
    }
    assert!(
        s.group_members <= 3 && s.group_leaders <= 4,
        "{} leaders, {} members for 4 ends",
        s.group_leaders,
        s.group_members
    );
}

#[test]
fn every_end_is_recorded_once_whoever_leads() {
    for design in SlruDesign::ALL {
        shuttle_check::check_random(move || ends_race(design), 500);
        shuttle_check::check_pct(move || ends_race(design), 500, 3);
    }
    let grouped = GROUPED_SCHEDULES.load(Ordering::Relaxed);
    assert!(grouped > 0, "no schedule formed a group");
    eprintln!("{grouped} of 3,000 schedules recorded an end through a leader");
}

/// Groups form in a sequence: ends keep arriving while a leader works, so later ones
/// lead groups of their own; two rounds of two ends per thread.
fn groups_in_sequence(design: SlruDesign) {
    let c = Arc::new(open(design));
    let threads: Vec<_> = (0..3u32)
        .map(|t| {
            let c = c.clone();
            shuttle::thread::spawn(move || {
                for round in 0..2u32 {
                    let x = 10 + t * 2 + round;
                    c.set_tree(x, &[], XidStatus::Committed).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for x in 10..16 {
        assert_eq!(c.get(x).unwrap(), XidStatus::Committed, "xid {x}");
    }
}

#[test]
fn successive_groups_lose_no_end() {
    for design in SlruDesign::ALL {
        shuttle_check::check_random(move || groups_in_sequence(design), 300);
        shuttle_check::check_pct(move || groups_in_sequence(design), 300, 3);
    }
}
