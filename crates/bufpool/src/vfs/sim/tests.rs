//! The simulated file system's tests: what a crash can and cannot produce, handles fenced
//! after a crash, links, and the prefix crash.

use std::io::{IoSlice, IoSliceMut};

use super::crash::SECTOR;
use super::*;

/// Crash seeds per statistical test: with 1/5 per outcome, the chance that one outcome
/// never shows in this many seeds is (4/5)^200, about 4e-20.
const SEEDS: u64 = 200;

const DIR: &str = "/d";

fn p(name: &str) -> PathBuf {
    Path::new(DIR).join(name)
}

/// A file system with `/d/f` holding 16 KiB of 0xAA, synced, name included.
fn synced_file() -> (SimVfs, Arc<dyn VfsFile>) {
    let vfs = SimVfs::new();
    vfs.create_dir_all(Path::new(DIR)).unwrap();
    let f = vfs.open(&p("f"), OpenOptions::create()).unwrap();
    f.write_at(&[0xAA; 16384], 0).unwrap();
    f.sync_all().unwrap();
    vfs.sync_dir(Path::new(DIR)).unwrap();
    (vfs, f)
}

#[test]
fn synced_data_survives_and_unsynced_writes_take_every_outcome() {
    let mut seen = [0u64; 5];
    for seed in 0..SEEDS {
        let (vfs, f) = synced_file();
        // One un-synced 12 KiB write with tear points at 8 and 12 KiB.
        f.write_at(&[0xBB; 12288], 4096).unwrap();
        let report = vfs.crash(seed);
        let data = vfs.contents(&p("f")).unwrap();
        assert_eq!(data.len(), 16384, "seed {seed}");
        assert!(data[..4096].iter().all(|&b| b == 0xAA), "seed {seed}");
        let region = &data[4096..];
        let counts = [
            report.dropped,
            report.kept,
            report.torn,
            report.sector_torn,
            report.garbaged,
        ];
        assert_eq!(counts.iter().sum::<u64>(), 1, "seed {seed}: {report:?}");
        let fate = report.write_fates[0].1;
        assert_eq!(report.write_fates, vec![(p("f"), fate)], "seed {seed}");
        assert_eq!(report.writes(fate), 1, "seed {seed}");
        if report.dropped == 1 {
            assert!(region.iter().all(|&b| b == 0xAA), "seed {seed}");
            seen[0] += 1;
        } else if report.kept == 1 {
            assert!(region.iter().all(|&b| b == 0xBB), "seed {seed}");
            seen[1] += 1;
        } else if report.torn == 1 {
            let cut = region.iter().position(|&b| b != 0xBB).unwrap() + 4096;
            assert!(cut == 8192 || cut == 12288, "seed {seed}: cut at {cut}");
            assert!(data[cut..].iter().all(|&b| b == 0xAA), "seed {seed}");
            seen[2] += 1;
        } else if report.sector_torn == 1 {
            let cut = region.iter().position(|&b| b != 0xBB).unwrap() + 4096;
            assert!(
                cut > 4096 && cut < 16384 && cut % 512 == 0,
                "seed {seed}: cut at {cut}"
            );
            assert!(data[cut..].iter().all(|&b| b == 0xAA), "seed {seed}");
            seen[3] += 1;
        } else {
            for sector in region.chunks(SECTOR as usize) {
                assert!(
                    sector.iter().any(|&b| b != 0xAA && b != 0xBB),
                    "seed {seed}"
                );
            }
            seen[4] += 1;
        }
    }
    assert!(seen.iter().all(|&n| n > 0), "outcomes seen: {seen:?}");
}

/// A one-page write (4 KiB, aligned) has no 4 KiB tear point but seven sector
/// boundaries inside: a power cut can keep any whole number of its first sectors.
#[test]
fn a_single_page_write_can_be_torn_at_every_sector_boundary() {
    let mut cuts = BTreeSet::new();
    for seed in 0..SEEDS * 2 {
        let (vfs, f) = synced_file();
        f.write_at(&[0xBB; 4096], 8192).unwrap();
        let report = vfs.crash(seed);
        assert_eq!(report.torn, 0, "no 4 KiB point inside: seed {seed}");
        let data = vfs.contents(&p("f")).unwrap();
        let page = &data[8192..12288];
        assert!(data[..8192].iter().all(|&b| b == 0xAA), "seed {seed}");
        assert!(data[12288..].iter().all(|&b| b == 0xAA), "seed {seed}");
        if report.sector_torn == 1 {
            let cut = page.iter().position(|&b| b != 0xBB).unwrap();
            assert!(cut % 512 == 0 && cut > 0, "seed {seed}: cut at {cut}");
            assert!(page[cut..].iter().all(|&b| b == 0xAA), "seed {seed}");
            cuts.insert(cut);
        }
    }
    assert_eq!(cuts, (1..8).map(|i| i * 512).collect::<BTreeSet<_>>());
}

#[test]
fn a_write_smaller_than_a_sector_is_never_torn() {
    for seed in 0..SEEDS {
        let (vfs, f) = synced_file();
        f.write_at(&[0xBB; 300], 1100).unwrap(); // inside sector 1024..1536
        let report = vfs.crash(seed);
        assert_eq!(report.torn + report.sector_torn, 0, "seed {seed}");
    }
}

/// The report names the file of every write and the path of every namespace change.
#[test]
fn the_report_names_files_and_namespace_changes() {
    let mut undone = 0;
    for seed in 0..SEEDS {
        let (vfs, f) = synced_file();
        vfs.create_dir_all(Path::new("/d/x")).unwrap();
        let g = vfs
            .open(Path::new("/d/x/g"), OpenOptions::create())
            .unwrap();
        g.write_at(&[1; 1024], 0).unwrap();
        f.write_at(&[2; 1024], 0).unwrap();
        drop(f);
        vfs.unlink(&p("f")).unwrap();
        let report = vfs.crash(seed);
        let g_created = report.namespace_changes("create", |q| q.ends_with("x/g"), true);
        let f_back = report.namespace_changes("unlink", |q| q == p("f"), false);
        assert_eq!(report.namespace_fates.len(), 2, "seed {seed}");
        assert_eq!(
            g_created,
            u64::from(vfs.exists(Path::new("/d/x/g")).unwrap())
        );
        assert_eq!(f_back, u64::from(vfs.exists(&p("f")).unwrap()));
        undone += report.namespace_undone;
        // Only writes of files that still have a name are replayed, under that name.
        let files: Vec<&Path> = report
            .write_fates
            .iter()
            .map(|(q, _)| q.as_path())
            .collect();
        let mut want = Vec::new();
        if f_back == 1 {
            want.push(p("f"));
        }
        if g_created == 1 {
            want.push(PathBuf::from("/d/x/g"));
        }
        assert_eq!(files, want.iter().map(|q| q.as_path()).collect::<Vec<_>>());
        let all: u64 = CrashChoice::ALL
            .iter()
            .map(|&c| report.writes_to(|_| true, c))
            .sum();
        assert_eq!(all, want.len() as u64, "seed {seed}");
    }
    assert!(undone > 0);
}

/// A duplicate crashes like the original would, and the two share nothing.
#[test]
fn a_duplicate_crashes_like_the_original_and_is_independent() {
    for seed in 0..20 {
        let (vfs, f) = synced_file();
        assert!(f.try_lock_exclusive().unwrap());
        f.write_at(&[0xBB; 9000], 3000).unwrap();
        vfs.open(&p("new"), OpenOptions::create()).unwrap();
        let copy = vfs.duplicate();
        let g = copy.open(&p("f"), OpenOptions::read_write()).unwrap();
        assert!(g.try_lock_exclusive().unwrap(), "locks start free");
        g.write_at(&[0xCC; 10], 0).unwrap();
        assert_eq!(
            vfs.contents(&p("f")).unwrap()[0],
            0xAA,
            "the original is untouched"
        );
        drop(g);
        let other = vfs.duplicate();
        let (a, b) = (vfs.crash(seed), other.crash(seed));
        assert_eq!(a, b, "seed {seed}");
        assert_eq!(vfs.contents(&p("f")), other.contents(&p("f")));
        assert_eq!(
            vfs.exists(&p("new")).unwrap(),
            other.exists(&p("new")).unwrap()
        );
    }
}

#[test]
fn synced_data_survives_every_seed_whatever_else_is_pending() {
    for seed in 0..SEEDS {
        let (vfs, f) = synced_file();
        let g = vfs.open(&p("g"), OpenOptions::create()).unwrap();
        g.write_at(&[1; 8192], 0).unwrap();
        f.write_at(&[0xCC; 100], 20000).unwrap(); // beyond the synced length
        vfs.rename(&p("g"), &p("h")).unwrap();
        vfs.crash(seed);
        let data = vfs.contents(&p("f")).unwrap();
        assert!(data[..16384].iter().all(|&b| b == 0xAA), "seed {seed}");
    }
}

#[test]
fn unsynced_length_changes_can_be_kept_or_reverted() {
    let (mut grew, mut shrank, mut truncated, mut untruncated) = (false, false, false, false);
    for seed in 0..SEEDS {
        let (vfs, f) = synced_file();
        // Extension by a write with no 4 KiB tear point inside: dropped means shrunk
        // back; a sector tear keeps whole sectors of it.
        f.write_at(&[0xBB; 4096], 16384).unwrap();
        let report = vfs.crash(seed);
        let len = vfs.contents(&p("f")).unwrap().len();
        match len {
            16384 => {
                assert_eq!(report.dropped, 1, "seed {seed}");
                shrank = true;
            }
            20480 => grew = true,
            16385..20480 if len % 512 == 0 => assert_eq!(report.sector_torn, 1),
            _ => panic!("seed {seed}: length {len}"),
        }

        let (vfs, f) = synced_file();
        f.set_len(4096).unwrap();
        let report = vfs.crash(seed);
        let data = vfs.contents(&p("f")).unwrap();
        assert!(data.iter().all(|&b| b == 0xAA), "seed {seed}");
        match data.len() {
            4096 => truncated |= report.len_changes_kept == 1,
            16384 => untruncated |= report.len_changes_reverted == 1,
            len => panic!("seed {seed}: length {len}"),
        }
    }
    assert!(grew && shrank && truncated && untruncated);
}

#[test]
fn later_writes_overlay_earlier_ones_and_dsync_writes_survive() {
    for seed in 0..SEEDS {
        let (vfs, _f) = synced_file();
        let d = vfs
            .open(
                &p("f"),
                OpenOptions {
                    dsync: true,
                    ..OpenOptions::read_write()
                },
            )
            .unwrap();
        let f = vfs.open(&p("f"), OpenOptions::read_write()).unwrap();
        f.write_at(&[1; 4096], 0).unwrap();
        d.write_at(&[2; 4096], 0).unwrap();
        vfs.crash(seed);
        let data = vfs.contents(&p("f")).unwrap();
        assert!(data[..4096].iter().all(|&b| b == 2), "seed {seed}");
    }
}

#[test]
fn a_create_without_sync_dir_can_vanish_and_with_it_never_does() {
    let (mut vanished, mut stayed) = (false, false);
    for seed in 0..SEEDS {
        for sync_dir in [false, true] {
            let vfs = SimVfs::new();
            vfs.create_dir_all(Path::new(DIR)).unwrap();
            let f = vfs.open(&p("new"), OpenOptions::create()).unwrap();
            f.write_at(b"hello", 0).unwrap();
            f.sync_all().unwrap();
            if sync_dir {
                vfs.sync_dir(Path::new(DIR)).unwrap();
            }
            let report = vfs.crash(seed);
            match vfs.contents(&p("new")) {
                None => {
                    assert!(!sync_dir, "seed {seed}: a synced create vanished");
                    assert_eq!(report.namespace_undone, 1);
                    vanished = true;
                }
                Some(data) => {
                    assert_eq!(data, b"hello", "seed {seed}");
                    stayed |= !sync_dir;
                }
            }
            assert_eq!(
                vfs.exists(&p("new")).unwrap(),
                vfs.contents(&p("new")).is_some()
            );
        }
    }
    assert!(vanished && stayed);
}

#[test]
fn a_rename_without_sync_dir_can_be_undone_and_with_it_never_is() {
    let (mut undone, mut kept) = (false, false);
    for seed in 0..SEEDS {
        for sync_dir in [false, true] {
            let vfs = SimVfs::new();
            vfs.create_dir_all(Path::new(DIR)).unwrap();
            vfs.set_contents(&p("target"), b"old".to_vec());
            let f = vfs.open(&p("tmp"), OpenOptions::create()).unwrap();
            f.write_at(b"new", 0).unwrap();
            f.sync_all().unwrap();
            vfs.sync_dir(Path::new(DIR)).unwrap();
            vfs.rename(&p("tmp"), &p("target")).unwrap();
            if sync_dir {
                vfs.sync_dir(Path::new(DIR)).unwrap();
            }
            vfs.crash(seed);
            let tmp = vfs.contents(&p("tmp"));
            let target = vfs.contents(&p("target")).unwrap();
            if target == b"old" {
                assert!(!sync_dir, "seed {seed}: a synced rename was undone");
                assert_eq!(tmp.as_deref(), Some(&b"new"[..]), "seed {seed}");
                undone = true;
            } else {
                assert_eq!(target, b"new", "seed {seed}");
                assert_eq!(tmp, None, "seed {seed}");
                kept |= !sync_dir;
            }
        }
    }
    assert!(undone && kept);
}

/// A symbolic link is a name like a file's: without a `sync_dir` of its parent a
/// crash can undo it, leaving the target and the file made through it in place but
/// unreachable by the link; with one it always survives, and so does a file made
/// through it once the target directory (reached through the link) is synced.
#[test]
fn a_symlink_without_sync_dir_can_vanish_and_with_it_never_does() {
    let (mut vanished, mut stayed) = (false, false);
    for seed in 0..SEEDS {
        for sync_dir in [false, true] {
            let vfs = SimVfs::new();
            vfs.create_dir_all(Path::new(DIR)).unwrap();
            vfs.create_dir_all(Path::new("/ts")).unwrap();
            vfs.symlink(Path::new("/ts"), &p("link")).unwrap();
            if sync_dir {
                vfs.sync_dir(Path::new(DIR)).unwrap();
            }
            let f = vfs.open(&p("link/f"), OpenOptions::create()).unwrap();
            f.write_at(b"data", 0).unwrap();
            f.sync_all().unwrap();
            vfs.sync_dir(&p("link")).unwrap();
            assert_eq!(vfs.contents(Path::new("/ts/f")).unwrap(), b"data");
            let report = vfs.crash(seed);
            assert_eq!(
                vfs.contents(Path::new("/ts/f")).unwrap(),
                b"data",
                "seed {seed}: the target was synced"
            );
            match vfs.read_link(&p("link")) {
                Ok(target) => {
                    assert_eq!(target, Path::new("/ts"));
                    assert_eq!(vfs.contents(&p("link/f")).unwrap(), b"data");
                    stayed |= !sync_dir;
                }
                Err(e) => {
                    assert_eq!(e.kind(), io::ErrorKind::NotFound, "seed {seed}");
                    assert!(!sync_dir, "seed {seed}: a synced link vanished");
                    assert_eq!(
                        report.namespace_changes("symlink", |q| q == p("link"), false),
                        1
                    );
                    assert!(vfs.contents(&p("link/f")).is_none());
                    vanished = true;
                }
            }
            assert_replay_gives_written(&vfs);
        }
    }
    assert!(vanished && stayed);
}

#[test]
fn an_unlink_without_sync_dir_can_be_undone() {
    let (mut back, mut gone) = (false, false);
    for seed in 0..SEEDS {
        let (vfs, f) = synced_file();
        drop(f);
        vfs.unlink(&p("f")).unwrap();
        vfs.crash(seed);
        match vfs.contents(&p("f")) {
            Some(data) => {
                assert!(data == vec![0xAA; 16384], "seed {seed}");
                back = true;
            }
            None => gone = true,
        }
    }
    assert!(back && gone);
}

#[test]
fn reads_after_a_crash_see_the_new_state_and_old_handles_fail() {
    let (vfs, f) = synced_file();
    assert!(f.try_lock_exclusive().unwrap());
    f.write_at(&[0xBB; 12288], 4096).unwrap();
    vfs.crash(7);
    let want = vfs.contents(&p("f")).unwrap();

    let g = vfs.open(&p("f"), OpenOptions::read_write()).unwrap();
    assert!(
        g.try_lock_exclusive().unwrap(),
        "the crash released the lock"
    );
    let mut got = vec![0; want.len() + 10];
    assert_eq!(g.read_at(&mut got, 0).unwrap(), want.len());
    assert_eq!(&got[..want.len()], &want[..]);
    assert_eq!(g.len().unwrap(), want.len() as u64);
    // A second crash with nothing pending changes nothing.
    drop(g);
    assert_eq!(vfs.crash(8), CrashReport::default());
    assert_eq!(vfs.contents(&p("f")).unwrap(), want);

    let stale = |r: io::Result<()>| {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Other);
        assert!(e.to_string().contains("before the simulated crash"), "{e}");
    };
    let mut buf = [0u8; 16];
    stale(f.read_at(&mut buf, 0).map(drop));
    stale(
        f.read_vectored_at(&mut [IoSliceMut::new(&mut buf)], 0)
            .map(drop),
    );
    stale(f.write_at(&buf, 0).map(drop));
    stale(f.write_vectored_at(&[IoSlice::new(&buf)], 0).map(drop));
    stale(f.writeback(0, 16));
    stale(f.sync_all());
    stale(f.sync_data());
    stale(f.set_len(0));
    stale(f.len().map(drop));
    stale(f.try_lock_exclusive().map(drop));
}

#[test]
fn crash_after_n_fails_the_next_mutating_call() {
    let vfs = SimVfs::new();
    vfs.create_dir_all(Path::new(DIR)).unwrap();
    vfs.crash_after(3);
    let f = vfs.open(&p("f"), OpenOptions::create()).unwrap(); // 1
    f.write_at(b"abc", 0).unwrap(); // 2
    f.sync_data().unwrap(); // 3
    let e = f.write_at(b"xyz", 0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO));
    assert_eq!(
        vfs.sync_dir(Path::new(DIR)).unwrap_err().raw_os_error(),
        Some(libc::EIO)
    );
    assert!(vfs.open(&p("g"), OpenOptions::create()).is_err());
    let mut buf = [0u8; 3];
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), 3, "reads still work");
    assert_eq!(&buf, b"abc", "the refused write had no effect");
    assert_eq!(vfs.io_count(), 3);

    vfs.crash(0); // clears the limit
    let f = vfs.open(&p("f"), OpenOptions::create()).unwrap();
    let before = vfs.io_count();
    f.write_at(b"xyz", 0).unwrap();
    assert_eq!(vfs.io_count(), before + 1);
}

/// The write-temp, fsync, rename, fsync-directory protocol, crashed after every I/O
/// and with several seeds each: the target is always the complete old or new content.
#[test]
fn crash_after_every_io_of_an_atomic_replace() {
    fn workload(vfs: &SimVfs) -> io::Result<()> {
        let f = vfs.open(&p("meta.tmp"), OpenOptions::create())?;
        f.set_len(0)?;
        f.write_at(&[b'N'; 6000], 0)?;
        f.sync_all()?;
        drop(f);
        vfs.rename(&p("meta.tmp"), &p("meta"))?;
        vfs.sync_dir(Path::new(DIR))
    }
    let setup = || {
        let vfs = SimVfs::new();
        vfs.create_dir_all(Path::new(DIR)).unwrap();
        vfs.set_contents(&p("meta"), vec![b'O'; 5000]);
        vfs
    };
    let vfs = setup();
    workload(&vfs).unwrap();
    let total = vfs.io_count();
    assert_eq!(total, 6);
    for n in 0..=total {
        for seed in 0..16 {
            let vfs = setup();
            vfs.crash_after(n);
            assert_eq!(workload(&vfs).is_ok(), n == total);
            vfs.crash(seed);
            let meta = vfs.contents(&p("meta")).unwrap();
            assert!(
                meta == vec![b'O'; 5000] || meta == vec![b'N'; 6000],
                "crash after {n} calls, seed {seed}"
            );
            if n == total {
                assert_eq!(meta, vec![b'N'; 6000]);
            }
        }
    }
}

/// Checks the module invariant: the pending changes, all kept, turn the durable state
/// into the written one.
fn assert_replay_gives_written(vfs: &SimVfs) {
    let st = vfs.state.lock();
    let mut names = st.durable.clone();
    for op in &st.pending_ns {
        for (path, id) in &op.entries {
            match id {
                Some(id) => names.insert(path.clone(), *id),
                None => names.remove(path),
            };
        }
    }
    assert_eq!(names, st.live);
    for (id, node) in &st.nodes {
        let mut image = node.durable.clone();
        for op in &node.pending {
            match op {
                DataOp::Write { offset, data, .. } => apply_write(&mut image, *offset, data),
                DataOp::SetLen { len, .. } => image.resize(*len as usize, 0),
            }
        }
        assert_eq!(image, node.written, "node {id}");
    }
}

#[test]
fn pending_changes_all_kept_give_the_written_state() {
    let (vfs, f) = synced_file();
    vfs.create_dir_all(Path::new("/e")).unwrap();
    f.set_len(100).unwrap();
    f.write_at(&[3; 5000], 9000).unwrap();
    f.write_vectored_at(&[IoSlice::new(&[4; 10]), IoSlice::new(&[5; 7000])], 50)
        .unwrap();
    let g = vfs.open(&p("g"), OpenOptions::create()).unwrap();
    g.write_at(b"g", 0).unwrap();
    vfs.rename(&p("g"), Path::new("/e/g")).unwrap();
    vfs.sync_dir(Path::new("/e")).unwrap(); // half of the rename is durable
    vfs.unlink(&p("f")).unwrap();
    f.write_at(&[6; 10], 0).unwrap(); // an unlinked open file stays writable
    vfs.set_contents(&p("h"), b"h".to_vec());
    assert_replay_gives_written(&vfs);
    assert_eq!(vfs.list_dir(Path::new(DIR)).unwrap(), vec!["h".to_string()]);
    assert_eq!(vfs.contents(Path::new("/e/g")).unwrap(), b"g");
    vfs.crash(3);
    assert_replay_gives_written(&vfs);
    assert_eq!(vfs.contents(&p("h")).unwrap(), b"h");
    assert!(
        vfs.exists(Path::new("/e/g")).unwrap(),
        "its directory was synced"
    );
}

#[test]
fn the_same_seed_gives_the_same_crash() {
    let run = |seed| {
        let (vfs, f) = synced_file();
        for i in 0..8u8 {
            f.write_at(&[i; 5000], u64::from(i) * 3000).unwrap();
        }
        vfs.open(&p("x"), OpenOptions::create()).unwrap();
        let report = vfs.crash(seed);
        (report, vfs.contents(&p("f")), vfs.exists(&p("x")).unwrap())
    };
    for seed in 0..20 {
        assert_eq!(run(seed), run(seed));
    }
}

/// Every prefix of the pending changes, in program order across files and the
/// namespace, is a state `crash_prefix` produces, and nothing else is.
#[test]
fn crash_prefix_keeps_exactly_the_first_changes_in_program_order() {
    let setup = || {
        let (vfs, f) = synced_file();
        f.write_at(&[1; 512], 0).unwrap(); // change 1
        let g = vfs.open(&p("g"), OpenOptions::create()).unwrap(); // change 2
        f.set_len(20000).unwrap(); // change 3
        g.write_at(b"gg", 0).unwrap(); // change 4
        let dsync = OpenOptions {
            dsync: true,
            ..OpenOptions::create()
        };
        let d = vfs.open(&p("d"), dsync).unwrap(); // change 5 (its write is O_DSYNC)
        d.write_at(b"d", 0).unwrap();
        vfs
    };
    assert_eq!(setup().losable_changes(), 5);
    for keep in 0..=6u64 {
        let vfs = setup();
        let report = vfs.crash_prefix(keep);
        let f = vfs.contents(&p("f")).unwrap();
        assert_eq!(f[0] == 1, keep >= 1, "keep {keep}");
        assert_eq!(vfs.exists(&p("g")).unwrap(), keep >= 2, "keep {keep}");
        assert_eq!(
            f.len(),
            if keep >= 3 { 20000 } else { 16384 },
            "keep {keep}"
        );
        if keep >= 2 {
            let g = vfs.contents(&p("g")).unwrap();
            assert_eq!(
                g,
                if keep >= 4 { b"gg".to_vec() } else { vec![] },
                "keep {keep}"
            );
        }
        // The O_DSYNC write survives wherever its file's name does.
        assert_eq!(
            vfs.contents(&p("d")).map(|d| d == b"d"),
            (keep >= 5).then_some(true)
        );
        assert_eq!(
            report.namespace_kept,
            u64::from(keep >= 2) + u64::from(keep >= 5)
        );
        assert_replay_gives_written(&vfs);
    }
}

/// A sync that makes something durable records the state just before it; a sync with
/// nothing pending, or before recording starts, records nothing.
#[test]
fn sync_points_hold_the_state_before_each_sync() {
    let (vfs, f) = synced_file();
    f.write_at(&[1; 10], 0).unwrap();
    f.sync_data().unwrap(); // not recording yet
    vfs.record_sync_points();
    f.write_at(&[2; 10], 0).unwrap();
    f.write_at(&[3; 10], 4096).unwrap();
    let before = vfs.io_count();
    f.sync_data().unwrap();
    f.sync_data().unwrap(); // nothing pending
    vfs.open(&p("n"), OpenOptions::create()).unwrap();
    vfs.sync_dir(Path::new(DIR)).unwrap();
    let points = vfs.take_sync_points();
    assert_eq!(points.len(), 2, "{points:?}");
    assert_eq!(points[0].io_count, before);
    assert_eq!(points[0].changes, 2);
    assert_eq!(points[1].changes, 1);
    assert!(points[1].what.starts_with("sync_dir"), "{}", points[1].what);
    let mut seen = Vec::new();
    for keep in 0..=points[0].changes {
        let copy = points[0].vfs.duplicate();
        copy.crash_prefix(keep);
        let f = copy.contents(&p("f")).unwrap();
        seen.push((f[0], f[4096]));
    }
    assert_eq!(seen, vec![(1, 0xAA), (2, 0xAA), (2, 3)]);
    assert!(vfs.take_sync_points().is_empty(), "taken");
}
