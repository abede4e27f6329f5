//! Model test of a bank's slot state machine with shuttle.
//!
//! Run with `RUSTFLAGS="--cfg shuttle" cargo test -p pgbufpool --target-dir target/shuttle --test slru_model` (CI does). Under
//! the feature the bank locks, the slots' I/O locks and the atomics come from shuttle, which
//! runs the real SLRU code under random and PCT schedules.
//! Proves: concurrent misses on the same pages cost one read each (a second thread finds
//! the slot ReadInProgress and waits instead of reading again); eviction racing readers,
//! writers and a flush never hands a reader another page's image nor loses a change (after
//! the run and a flush, a reopened SLRU holds every increment); a flush racing the
//! eviction of a dirty page returns only once that page is on disk (it waits for the
//! eviction's write in progress). How: one bank (4 slots, or
//! 2 so every miss evicts), pages stamped with their number, in each `slru_design`.
#![cfg(shuttle)]

mod shuttle_check;

use std::path::Path;
use std::sync::Arc;

use bufpool::slru::{Slru, SlruDesign, SlruOptions};
use bufpool::{MemVfs, Vfs};

const PAGE: usize = 4096;

fn open(vfs: &MemVfs, buffers: usize, design: SlruDesign) -> Slru {
    Slru::open_with(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        "m",
        PAGE,
        SlruOptions { buffers, design },
    )
    .unwrap()
}

fn word(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap())
}

/// Pages 0..n on disk, page p stamped with p.
fn prepared(n: u64) -> MemVfs {
    let vfs = MemVfs::new();
    let s = open(&vfs, 2, SlruDesign::BanksLocksLru);
    for p in 0..n {
        s.zero_page(p).unwrap();
        s.write(p, |b| b[..8].copy_from_slice(&p.to_le_bytes()))
            .unwrap();
    }
    s.flush().unwrap();
    vfs
}

/// Three threads miss on the same three pages at once: each page is read exactly once.
fn one_read_per_page(design: SlruDesign) {
    let vfs = prepared(3);
    let s = Arc::new(open(&vfs, 4, design));
    let threads: Vec<_> = [[0u64, 1, 2], [2, 1, 0], [1, 2, 0]]
        .into_iter()
        .map(|order| {
            let s = s.clone();
            shuttle::thread::spawn(move || {
                for p in order {
                    assert_eq!(s.read(p, |b| word(b, 0)).unwrap(), p);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(s.stats().reads, 3, "a page was read twice");
    assert_eq!(s.stats().hits, 6);
}

/// Two slots, four pages: a reader, a writer of other pages (every miss evicts, dirty
/// victims are written out without the bank lock) and a flusher race.
fn eviction_races_readers(design: SlruDesign) {
    let vfs = prepared(4);
    {
        let s = Arc::new(open(&vfs, 2, design));
        let reader = {
            let s = s.clone();
            shuttle::thread::spawn(move || {
                for p in [0u64, 1, 0] {
                    assert_eq!(
                        s.read(p, |b| word(b, 0)).unwrap(),
                        p,
                        "another page's image"
                    );
                }
            })
        };
        let writer = {
            let s = s.clone();
            shuttle::thread::spawn(move || {
                for p in [2u64, 3, 1] {
                    s.write(p, |b| {
                        assert_eq!(word(b, 0), p);
                        let v = word(b, 1);
                        b[8..16].copy_from_slice(&(v + 1).to_le_bytes());
                    })
                    .unwrap();
                }
            })
        };
        let flusher = {
            let s = s.clone();
            shuttle::thread::spawn(move || {
                s.flush().unwrap();
            })
        };
        for t in [reader, writer, flusher] {
            t.join().unwrap();
        }
        s.flush().unwrap();
        assert_eq!(s.resident_per_bank().iter().sum::<usize>(), 2);
    }
    let s = open(&vfs, 2, design);
    for (p, bumps) in [(0u64, 0u64), (1, 1), (2, 1), (3, 1)] {
        assert_eq!(s.read(p, |b| (word(b, 0), word(b, 1))).unwrap(), (p, bumps));
    }
}

/// A flush racing the eviction of a dirty page: when `flush` returns, the page's change
/// is on disk, whether the flush wrote it or waited for the eviction's write in progress.
fn flush_waits_for_a_write_in_progress(design: SlruDesign) {
    let vfs = prepared(3);
    let s = Arc::new(open(&vfs, 2, design));
    s.write(0, |b| b[100] = 7).unwrap();
    let evictor = {
        let s = s.clone();
        shuttle::thread::spawn(move || {
            for p in [1u64, 2] {
                assert_eq!(s.read(p, |b| word(b, 0)).unwrap(), p);
            }
        })
    };
    let flusher = {
        let (s, vfs) = (s.clone(), vfs.clone());
        shuttle::thread::spawn(move || {
            s.flush().unwrap();
            let seg = vfs.contents(&s.segment_path(0)).unwrap();
            assert_eq!(seg[100], 7, "flush returned before page 0 was durable");
        })
    };
    evictor.join().unwrap();
    flusher.join().unwrap();
}

#[test]
fn flush_racing_an_eviction_returns_only_when_the_page_is_durable() {
    for design in SlruDesign::ALL {
        shuttle_check::check_random(move || flush_waits_for_a_write_in_progress(design), 300);
        shuttle_check::check_pct(move || flush_waits_for_a_write_in_progress(design), 300, 3);
    }
}

#[test]
fn concurrent_read_in_of_one_page_reads_it_once() {
    for design in SlruDesign::ALL {
        shuttle_check::check_random(move || one_read_per_page(design), 300);
        shuttle_check::check_pct(move || one_read_per_page(design), 300, 3);
    }
}

#[test]
fn eviction_racing_a_reader_keeps_pages_and_changes() {
    for design in SlruDesign::ALL {
        shuttle_check::check_random(move || eviction_races_readers(design), 300);
        shuttle_check::check_pct(move || eviction_races_readers(design), 300, 3);
    }
}
