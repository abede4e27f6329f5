//! The banked SLRU through its public interface (PostgreSQL's test_slru, in spirit).
//!
//! Proves, for each `slru_design`: pages written survive eviction under pressure, a flush
//! and a reopen; truncation drops whole old segments and their cached pages; odd bank
//! counts (3 and 5) use every bank (PostgreSQL 17.0 masked page numbers with
//! `nbanks - 1`, leaving banks unused unless their count was a power of two); many
//! threads reading and writing random pages end with the contents a model predicts, and
//! readers never see a page go backwards. How: `MemVfs`, small SLRUs (16 to 80 slots)
//! over 10x more pages; each writer thread owns one 8-byte counter per page, so the
//! model is the per-thread count of increments.
//! Durability (checksums, doublewrite, latched fsync) is `tests/slru_durability.rs`'s and
//! the unit tests' business.

use std::path::Path;
use std::sync::Arc;

use bufpool::slru::{Slru, SlruDesign, SlruOptions, PAGES_PER_SEGMENT};
use bufpool::{MemVfs, Vfs};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const PAGE: usize = 4096;

fn open(vfs: &MemVfs, buffers: usize, design: SlruDesign) -> Slru {
    Slru::open_with(
        Arc::new(vfs.clone()) as Arc<dyn Vfs>,
        Path::new("/db"),
        "t",
        PAGE,
        SlruOptions { buffers, design },
    )
    .unwrap()
}

fn word(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap())
}

#[test]
fn pages_survive_eviction_flush_and_reopen_in_every_design() {
    for design in SlruDesign::ALL {
        let vfs = MemVfs::new();
        let s = open(&vfs, 32, design);
        assert_eq!(
            s.nbanks(),
            if design == SlruDesign::Central { 1 } else { 2 }
        );
        assert_eq!(s.nslots(), 32);
        for p in 0..320u64 {
            s.zero_page(p).unwrap();
            s.write(p, |b| b[..8].copy_from_slice(&(p * 7).to_le_bytes()))
                .unwrap();
        }
        for p in (0..320u64).rev() {
            assert_eq!(
                s.read(p, |b| word(b, 0)).unwrap(),
                p * 7,
                "{design:?} page {p}"
            );
        }
        let st = s.stats();
        assert_eq!(st.zeroed, 320);
        assert!(st.writes >= 288 && st.reads >= 288, "{design:?}: {st:?}");
        s.flush().unwrap();
        assert_eq!(s.stats().flushes, 1);
        assert!(s.page_exists(319).unwrap() && !s.page_exists(320).unwrap());
        assert_eq!(s.stats().exists, 2);
        drop(s);
        let s = open(&vfs, 16, design);
        for p in (0..320u64).step_by(3) {
            assert_eq!(
                s.read(p, |b| word(b, 0)).unwrap(),
                p * 7,
                "{design:?} reopened"
            );
        }
    }
}

#[test]
fn truncate_forgets_old_segments_in_every_design() {
    for design in SlruDesign::ALL {
        let vfs = MemVfs::new();
        let s = open(&vfs, 48, design);
        for p in 0..4 * PAGES_PER_SEGMENT {
            s.zero_page(p).unwrap();
            s.write(p, |b| b[0] = 1).unwrap();
        }
        s.flush().unwrap();
        assert_eq!(s.truncate(2 * PAGES_PER_SEGMENT + 5).unwrap(), 2);
        assert_eq!(s.stats().truncates, 1);
        assert!(vfs.contents(&s.segment_path(1)).is_none());
        assert!(!s.page_exists(0).unwrap());
        // A truncated page is gone from memory too: it reads as zeros.
        assert_eq!(s.read(3, |b| b[0]).unwrap(), 0, "{design:?}");
        assert_eq!(s.read(2 * PAGES_PER_SEGMENT, |b| b[0]).unwrap(), 1);
    }
}

#[test]
fn odd_bank_counts_use_every_bank() {
    for (buffers, nbanks) in [(48, 3), (80, 5)] {
        for design in [SlruDesign::Banks, SlruDesign::BanksLocksLru] {
            let vfs = MemVfs::new();
            let s = open(&vfs, buffers, design);
            assert_eq!(s.nbanks(), nbanks);
            for p in 0..buffers as u64 {
                assert_eq!(s.bank_of(p), p as usize % nbanks);
                s.zero_page(p).unwrap();
            }
            let resident = s.resident_per_bank();
            assert_eq!(resident, vec![16; nbanks], "{design:?}: every bank full");
            assert_eq!(s.stats().writes, 0, "{buffers} pages fit {buffers} slots");
        }
    }
    let s = open(&MemVfs::new(), 80, SlruDesign::Central);
    assert_eq!(s.nbanks(), 1);
}

/// Readers and writers of random pages on 4 threads, 10x more pages than slots: the final
/// contents equal the model, and a reader never sees a counter go backwards.
#[test]
fn concurrent_readers_and_writers_match_a_model() {
    const THREADS: usize = 4;
    const PAGES: u64 = 320;
    const OPS: usize = 3000;
    for design in SlruDesign::ALL {
        let vfs = MemVfs::new();
        let s = open(&vfs, 32, design);
        for p in 0..PAGES {
            s.zero_page(p).unwrap();
        }
        let models: Vec<Vec<u64>> = std::thread::scope(|sc| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let s = &s;
                    sc.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(t as u64 + 1);
                        let mut model = vec![0u64; PAGES as usize];
                        for i in 0..OPS {
                            let p = rng.random_range(0..PAGES);
                            if rng.random_bool(0.5) {
                                s.write(p, |b| {
                                    let v = word(b, t);
                                    b[t * 8..t * 8 + 8].copy_from_slice(&(v + 1).to_le_bytes());
                                })
                                .unwrap();
                                model[p as usize] += 1;
                            } else {
                                let seen = s.read(p, |b| word(b, t)).unwrap();
                                assert_eq!(seen, model[p as usize], "own counter of page {p}");
                            }
                            if t == 0 && i % 1000 == 999 {
                                s.flush().unwrap();
                            }
                        }
                        model
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        s.flush().unwrap();
        drop(s);
        let s = open(&vfs, 16, design);
        for p in 0..PAGES {
            let got: Vec<u64> = s
                .read(p, |b| (0..THREADS).map(|t| word(b, t)).collect())
                .unwrap();
            let want: Vec<u64> = models.iter().map(|m| m[p as usize]).collect();
            assert_eq!(got, want, "{design:?} page {p}");
        }
    }
}
