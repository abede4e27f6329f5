//! The storage manager's unit tests: segments, vectored I/O, the fsync queue, durable
//! writes, truncation and unlink on an in-memory or simulated file system.

use super::*;
use crate::stats::IoContext;
use crate::vfs::MemVfs;

const REL: RelFileId = RelFileId::new(3, 77);

/// A directory with 4-page segments of 4 KiB pages, on an in-memory file system.
fn smgr() -> (MemVfs, Smgr) {
    let vfs = MemVfs::new();
    let opts = SmgrOptions {
        wal_segment_size: None,
        block_size: 4096,
        segment_size: 4 * 4096,
        create: true,
        direct: false,
        dsync: false,
    };
    let s = Smgr::open(Arc::new(vfs.clone()), Path::new("/db"), opts).unwrap();
    (vfs, s)
}

fn page(v: u8) -> Vec<u8> {
    vec![v; 4096]
}

#[test]
fn vectored_io_splits_at_segment_boundaries() {
    let (vfs, s) = smgr();
    s.create(REL, ForkNumber::Main).unwrap();
    let pages: Vec<Vec<u8>> = (0..10).map(page).collect();
    let refs: Vec<&[u8]> = pages.iter().map(|p| p.as_slice()).collect();
    assert_eq!(
        s.extend(REL, ForkNumber::Main, &refs, IoContext::Normal)
            .unwrap(),
        0
    );
    assert_eq!(s.nblocks(REL, ForkNumber::Main).unwrap(), 10);
    for (segno, len) in [(0, 4), (1, 4), (2, 2)] {
        let data = vfs
            .contents(&s.segment_path(REL, ForkNumber::Main, segno))
            .unwrap();
        assert_eq!(data.len(), len * 4096, "segment {segno}");
    }
    assert!(s
        .segment_path(REL, ForkNumber::Main, 1)
        .ends_with("base/3/77.1"));
    // Read blocks 2..9 (three segments) with one call.
    let mut bufs: Vec<Vec<u8>> = (0..7).map(|_| vec![0u8; 4096]).collect();
    let mut refs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
    s.readv(REL, ForkNumber::Main, 2, &mut refs, IoContext::Normal)
        .unwrap();
    for (i, b) in bufs.iter().enumerate() {
        assert!(b.iter().all(|&x| x == 2 + i as u8), "block {}", 2 + i);
    }
    // Overwrite blocks 3..5 across the first boundary.
    let new: Vec<Vec<u8>> = (0..3).map(|_| page(99)).collect();
    let refs: Vec<&[u8]> = new.iter().map(|p| p.as_slice()).collect();
    s.writev(REL, ForkNumber::Main, 3, &refs, IoContext::Normal)
        .unwrap();
    let mut one = vec![0u8; 4096];
    for b in 3..6 {
        s.read(
            &BufferTag::new(REL, ForkNumber::Main, b),
            &mut one,
            IoContext::Normal,
        )
        .unwrap();
        assert_eq!(one[0], 99);
    }
    s.writeback(REL, ForkNumber::Main, 0, 10, IoContext::Normal)
        .unwrap();
}

#[test]
fn fsync_requests_are_deduplicated_per_segment_and_forgotten_on_unlink() {
    let (_vfs, s) = smgr();
    s.create(REL, ForkNumber::Main).unwrap();
    let p = page(1);
    for _ in 0..6 {
        s.extend(REL, ForkNumber::Main, &[&p], IoContext::Normal)
            .unwrap();
    }
    for _ in 0..5 {
        s.write(
            &BufferTag::new(REL, ForkNumber::Main, 0),
            &p,
            IoContext::Normal,
        )
        .unwrap();
    }
    assert_eq!(
        s.pending_syncs(),
        2,
        "6 pages in 2 segments, many writes: 2 requests"
    );
    assert_eq!(s.sync().unwrap(), 2);
    assert_eq!(s.pending_syncs(), 0);
    assert_eq!(s.stats().snapshot().total(IoOp::Fsync), 2);
    s.write(
        &BufferTag::new(REL, ForkNumber::Main, 5),
        &p,
        IoContext::Normal,
    )
    .unwrap();
    assert_eq!(s.pending_syncs(), 1);
    s.unlink(REL, ForkNumber::Main).unwrap();
    assert_eq!(s.pending_syncs(), 0);
    assert!(!s.exists(REL, ForkNumber::Main).unwrap());
}

/// A segment created by extension, and one unlinked by truncation, register their
/// directory; `sync` fsyncs it once. How: the queue's directory count.
#[test]
fn new_and_unlinked_segments_register_their_directory() {
    let (_vfs, s) = smgr();
    s.create(REL, ForkNumber::Main).unwrap();
    let p = page(1);
    s.extend(REL, ForkNumber::Main, &[p.as_slice(); 3], IoContext::Normal)
        .unwrap();
    assert_eq!(
        s.pending_dir_syncs(),
        0,
        "segment 0's creation fsynced at once"
    );
    s.extend(REL, ForkNumber::Main, &[p.as_slice(); 3], IoContext::Normal)
        .unwrap();
    assert_eq!(s.pending_dir_syncs(), 1, "segment 1 created");
    assert_eq!(s.sync().unwrap(), 2);
    assert_eq!(s.pending_dir_syncs(), 0);
    s.truncate(REL, ForkNumber::Main, 2).unwrap();
    assert_eq!(s.pending_dir_syncs(), 1, "segment 1 unlinked");
    s.sync().unwrap();
    assert_eq!(s.pending_dir_syncs(), 0);
}

/// A failed directory fsync is latched: the `sync` that met it names the directory and
/// the OS error, and every later one fails. How: `FaultVfs` fails the first SyncDir of
/// the tablespace directory after setup.
#[test]
fn a_failed_directory_fsync_is_latched() {
    use crate::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs};
    let fault = FaultVfs::new(Arc::new(MemVfs::new()));
    let opts = SmgrOptions {
        wal_segment_size: None,
        block_size: 4096,
        segment_size: 4 * 4096,
        create: true,
        direct: false,
        dsync: false,
    };
    let s = Smgr::open(Arc::new(fault.clone()), Path::new("/db"), opts).unwrap();
    s.create(REL, ForkNumber::Main).unwrap();
    let p = page(1);
    s.extend(REL, ForkNumber::Main, &[p.as_slice(); 5], IoContext::Normal)
        .unwrap();
    fault.add_rule(FaultRule::nth(
        "base/3",
        FaultOp::SyncDir,
        1,
        FaultKind::Eio,
    ));
    let err = s.sync().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    assert!(err.to_string().contains("/db/base/3"), "{err}");
    let again = s.sync().unwrap_err();
    assert!(matches!(again, SmgrError::FsyncLatched { .. }), "{again}");
}

/// `unlink` removes every segment file of the fork, also those past a gap (a crash can
/// undo a segment's creation and keep a later one's), and no other relation's files.
#[test]
fn unlink_removes_segments_past_a_gap() {
    let (vfs, s) = smgr();
    s.create(REL, ForkNumber::Main).unwrap();
    let other = RelFileId::new(3, 770);
    s.create(other, ForkNumber::Main).unwrap();
    let p = page(1);
    s.extend(
        REL,
        ForkNumber::Main,
        &[p.as_slice(); 13],
        IoContext::Normal,
    )
    .unwrap();
    s.extend(
        other,
        ForkNumber::Main,
        &[p.as_slice(); 5],
        IoContext::Normal,
    )
    .unwrap();
    vfs.unlink(&s.segment_path(REL, ForkNumber::Main, 1))
        .unwrap();
    s.unlink(REL, ForkNumber::Main).unwrap();
    for segno in 0..4 {
        assert!(vfs
            .contents(&s.segment_path(REL, ForkNumber::Main, segno))
            .is_none());
    }
    assert!(vfs
        .contents(&s.segment_path(other, ForkNumber::Main, 1))
        .is_some());
    assert_eq!(s.nblocks(other, ForkNumber::Main).unwrap(), 5);
}

/// A segment file found past the fork's end when extension reaches it is emptied
/// first: its old pages never count as the fork's, even after a restart.
#[test]
fn extension_empties_a_leftover_segment_file() {
    let (vfs, s) = smgr();
    s.create(REL, ForkNumber::Main).unwrap();
    let leftover = s.segment_path(REL, ForkNumber::Main, 2);
    vfs.set_contents(&leftover, page(9).repeat(4));
    let p = page(1);
    s.extend(REL, ForkNumber::Main, &[p.as_slice(); 9], IoContext::Normal)
        .unwrap();
    assert_eq!(vfs.contents(&leftover).unwrap().len(), 4096);
    drop(s);
    let opts = SmgrOptions {
        wal_segment_size: None,
        block_size: 4096,
        segment_size: 4 * 4096,
        create: false,
        direct: false,
        dsync: false,
    };
    let s = Smgr::open(Arc::new(vfs), Path::new("/db"), opts).unwrap();
    assert_eq!(s.nblocks(REL, ForkNumber::Main).unwrap(), 9);
}

#[test]
fn truncate_across_segments_removes_emptied_ones() {
    let (vfs, s) = smgr();
    s.create(REL, ForkNumber::Main).unwrap();
    let p = page(5);
    let refs: Vec<&[u8]> = (0..11).map(|_| p.as_slice()).collect();
    s.extend(REL, ForkNumber::Main, &refs, IoContext::Normal)
        .unwrap();
    s.truncate(REL, ForkNumber::Main, 4).unwrap();
    assert_eq!(s.nblocks(REL, ForkNumber::Main).unwrap(), 4);
    assert!(vfs
        .contents(&s.segment_path(REL, ForkNumber::Main, 1))
        .is_none());
    assert!(vfs
        .contents(&s.segment_path(REL, ForkNumber::Main, 2))
        .is_none());
    s.truncate(REL, ForkNumber::Main, 1).unwrap();
    assert_eq!(
        vfs.contents(&s.segment_path(REL, ForkNumber::Main, 0))
            .unwrap()
            .len(),
        4096
    );
    // Growing again after a truncate recreates segments.
    let refs: Vec<&[u8]> = (0..5).map(|_| p.as_slice()).collect();
    assert_eq!(
        s.extend(REL, ForkNumber::Main, &refs, IoContext::Normal)
            .unwrap(),
        1
    );
    assert_eq!(s.nblocks(REL, ForkNumber::Main).unwrap(), 6);
}

#[test]
fn fork_size_survives_reopen_and_forks_are_separate_files() {
    let (vfs, s) = smgr();
    s.create(REL, ForkNumber::Main).unwrap();
    s.create(REL, ForkNumber::FreeSpace).unwrap();
    let p = page(1);
    let refs: Vec<&[u8]> = (0..9).map(|_| p.as_slice()).collect();
    s.extend(REL, ForkNumber::Main, &refs, IoContext::Normal)
        .unwrap();
    s.extend(REL, ForkNumber::FreeSpace, &refs[..1], IoContext::Normal)
        .unwrap();
    assert!(
        s.create(REL, ForkNumber::Main).is_err(),
        "creating twice must fail"
    );
    drop(s);
    let opts = SmgrOptions {
        wal_segment_size: None,
        block_size: 4096,
        segment_size: 16384,
        create: false,
        direct: false,
        dsync: false,
    };
    let s = Smgr::open(Arc::new(vfs), Path::new("/db"), opts).unwrap();
    assert_eq!(s.nblocks(REL, ForkNumber::Main).unwrap(), 9);
    assert_eq!(s.nblocks(REL, ForkNumber::FreeSpace).unwrap(), 1);
    assert!(s
        .segment_path(REL, ForkNumber::FreeSpace, 0)
        .ends_with("base/3/77_fsm"));
}

/// Options for a directory with 4-page segments of 4 KiB pages.
fn options(create: bool, dsync: bool) -> SmgrOptions {
    SmgrOptions {
        wal_segment_size: None,
        block_size: 4096,
        segment_size: 4 * 4096,
        create,
        direct: false,
        dsync,
    }
}

/// How many O_DSYNC handles a fork has cached (0 when the fork is not open).
fn durable_handles(s: &Smgr, rel: RelFileId, fork: ForkNumber) -> usize {
    let forks = s.forks.read();
    forks.get(&(rel, fork)).map_or(0, |f| {
        f.segments
            .read()
            .iter()
            .filter(|seg| seg.durable.is_some())
            .count()
    })
}

fn tag(block: BlockNumber) -> BufferTag {
    BufferTag::new(REL, ForkNumber::Main, block)
}

/// Durable writes are durable on return: after a simulated power cut with no `sync`
/// since, under many seeds, every block written durably (one vectored write across a
/// segment boundary, one single page) reads back, while they registered no fsync
/// request and a buffered write still does. Reads before the cut, through the normal
/// handles, see the durable writes (two handles of one file share its contents). How:
/// `SimVfs` keeps an O_DSYNC handle's writes whatever the seed; it would drop, tear or
/// garbage them if the handle were not opened O_DSYNC.
#[test]
fn durable_writes_survive_a_power_cut_without_sync_and_register_no_fsync() {
    use crate::vfs::SimVfs;
    let vfs = SimVfs::new();
    let s = Smgr::open(
        Arc::new(vfs.clone()),
        Path::new("/db"),
        options(true, false),
    )
    .unwrap();
    s.create(REL, ForkNumber::Main).unwrap();
    s.extend(
        REL,
        ForkNumber::Main,
        &[page(1).as_slice(); 8],
        IoContext::Normal,
    )
    .unwrap();
    s.sync().unwrap();
    assert_eq!(s.pending_syncs(), 0);
    let writes_before = s.stats().snapshot().total(IoOp::Write);

    // Blocks 2..6 straddle the boundary between segments 0 and 1.
    let new: Vec<Vec<u8>> = (2..6).map(|b| page(10 + b)).collect();
    let refs: Vec<&[u8]> = new.iter().map(|p| p.as_slice()).collect();
    s.writev_durable(REL, ForkNumber::Main, 2, &refs, IoContext::Normal)
        .unwrap();
    s.write_durable(&tag(7), &page(17), IoContext::Normal)
        .unwrap();
    assert_eq!(s.pending_syncs(), 0, "durable writes register no fsync");
    assert_eq!(durable_handles(&s, REL, ForkNumber::Main), 2);
    assert_eq!(
        s.stats().snapshot().total(IoOp::Write),
        writes_before + 5,
        "counted as writes, one per page"
    );
    let want = [1u8, 1, 12, 13, 14, 15, 1, 17];
    let read_all = |s: &Smgr| {
        let mut bufs: Vec<Vec<u8>> = (0..8).map(|_| vec![0u8; 4096]).collect();
        let mut refs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
        s.readv(REL, ForkNumber::Main, 0, &mut refs, IoContext::Normal)
            .unwrap();
        bufs
    };
    for (b, got) in read_all(&s).iter().enumerate() {
        assert!(
            got.iter().all(|&x| x == want[b]),
            "block {b} before the cut"
        );
    }
    s.write(&tag(0), &page(20), IoContext::Normal).unwrap();
    assert_eq!(s.pending_syncs(), 1, "a buffered write still registers");

    for seed in 0..32 {
        let copy = vfs.duplicate();
        copy.crash(seed);
        let s = Smgr::open(Arc::new(copy), Path::new("/db"), options(false, false)).unwrap();
        assert_eq!(s.nblocks(REL, ForkNumber::Main).unwrap(), 8, "seed {seed}");
        // Block 0's buffered write may be dropped or torn; the others were durable.
        for (b, got) in read_all(&s).iter().enumerate().skip(1) {
            assert!(
                got.iter().all(|&x| x == want[b]),
                "seed {seed}: block {b} after the cut"
            );
        }
    }
}

/// A durable write never creates a segment, and no O_DSYNC handle outlives its segment:
/// after a truncate, a durable write into a segment truncated away fails (naming the
/// file) and makes no file; once extension recreates that segment, a durable write lands
/// in the new file (a stale handle would write into the unlinked one, unseen); unlink
/// drops every handle, and a fork created again under the same number is written
/// afresh. How: MemVfs keeps an unlinked file's node alive for open handles, like a
/// POSIX file system, so a write through a stale handle would vanish from reads.
#[test]
fn durable_writes_create_nothing_and_truncate_and_unlink_drop_their_handles() {
    let (vfs, s) = smgr();
    s.create(REL, ForkNumber::Main).unwrap();
    s.extend(
        REL,
        ForkNumber::Main,
        &[page(1).as_slice(); 10],
        IoContext::Normal,
    )
    .unwrap();
    s.writev_durable(
        REL,
        ForkNumber::Main,
        0,
        &[page(2).as_slice(); 10],
        IoContext::Normal,
    )
    .unwrap();
    assert_eq!(durable_handles(&s, REL, ForkNumber::Main), 3);

    s.truncate(REL, ForkNumber::Main, 4).unwrap();
    assert_eq!(
        durable_handles(&s, REL, ForkNumber::Main),
        1,
        "segments 1 and 2 were unlinked; segment 0 stays"
    );
    let seg1 = s.segment_path(REL, ForkNumber::Main, 1);
    let err = s
        .write_durable(&tag(5), &page(3), IoContext::Normal)
        .unwrap_err();
    match &err {
        SmgrError::Write {
            tag: t,
            path,
            source,
        } => {
            assert_eq!(*t, tag(5));
            assert_eq!(path, &seg1);
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        e => panic!("want a write error naming the segment, got {e}"),
    }
    assert!(vfs.contents(&seg1).is_none(), "no segment was created");
    assert_eq!(durable_handles(&s, REL, ForkNumber::Main), 1);
    // Segment 0 keeps its handle, still the live file.
    s.write_durable(&tag(3), &page(4), IoContext::Normal)
        .unwrap();
    let mut one = vec![0u8; 4096];
    s.read(&tag(3), &mut one, IoContext::Normal).unwrap();
    assert_eq!(one, page(4));

    assert_eq!(
        s.extend(
            REL,
            ForkNumber::Main,
            &[page(5).as_slice(); 2],
            IoContext::Normal
        )
        .unwrap(),
        4
    );
    s.write_durable(&tag(5), &page(6), IoContext::Normal)
        .unwrap();
    s.read(&tag(5), &mut one, IoContext::Normal).unwrap();
    assert_eq!(one, page(6), "the durable write reached the new segment 1");
    assert_eq!(vfs.contents(&seg1).unwrap()[4096..], page(6)[..]);
    assert_eq!(durable_handles(&s, REL, ForkNumber::Main), 2);

    s.unlink(REL, ForkNumber::Main).unwrap();
    assert_eq!(durable_handles(&s, REL, ForkNumber::Main), 0);
    assert!(s
        .write_durable(&tag(0), &page(7), IoContext::Normal)
        .is_err());
    assert!(
        !s.exists(REL, ForkNumber::Main).unwrap(),
        "nothing recreated"
    );
    s.create(REL, ForkNumber::Main).unwrap();
    s.extend(
        REL,
        ForkNumber::Main,
        &[page(8).as_slice()],
        IoContext::Normal,
    )
    .unwrap();
    s.write_durable(&tag(0), &page(9), IoContext::Normal)
        .unwrap();
    s.read(&tag(0), &mut one, IoContext::Normal).unwrap();
    assert_eq!(one, page(9));
    assert_eq!(s.pending_syncs(), 1, "only the extension's request");
}

/// A durable write's failures are typed like `writev`'s: EIO keeps the errno, the block
/// and the path; a short transfer is a `ShortWrite` naming the first block not written.
/// Neither registers an fsync request. With `SmgrOptions::dsync` the normal handles are
/// already O_DSYNC and no second one is opened. How: `FaultVfs` fails chosen writes.
#[test]
fn durable_write_failures_are_typed_and_dsync_files_need_no_second_handle() {
    use crate::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs};
    let fault = FaultVfs::new(Arc::new(MemVfs::new()));
    let s = Smgr::open(
        Arc::new(fault.clone()),
        Path::new("/db"),
        options(true, false),
    )
    .unwrap();
    s.create(REL, ForkNumber::Main).unwrap();
    s.extend(
        REL,
        ForkNumber::Main,
        &[page(1).as_slice(); 4],
        IoContext::Normal,
    )
    .unwrap();
    s.sync().unwrap();

    fault.add_rule(FaultRule::nth(
        "base/3/77",
        FaultOp::Write,
        1,
        FaultKind::Eio,
    ));
    let err = s
        .write_durable(&tag(2), &page(2), IoContext::Normal)
        .unwrap_err();
    assert!(matches!(err, SmgrError::Write { .. }), "{err}");
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    assert!(err.to_string().contains("/db/base/3/77"), "{err}");

    fault.add_rule(FaultRule::nth(
        "base/3/77",
        FaultOp::Write,
        1,
        FaultKind::Short,
    ));
    let err = s
        .writev_durable(
            REL,
            ForkNumber::Main,
            0,
            &[page(3).as_slice(); 2],
            IoContext::Normal,
        )
        .unwrap_err();
    match err {
        SmgrError::ShortWrite {
            tag: t, got, want, ..
        } => {
            assert_eq!(
                (t, got, want),
                (tag(1), 0, 4096),
                "half of two pages written"
            );
        }
        e => panic!("want a short write, got {e}"),
    }
    assert_eq!(s.pending_syncs(), 0);
    drop(s);

    let s = Smgr::open(Arc::new(fault), Path::new("/db"), options(false, true)).unwrap();
    s.write_durable(&tag(0), &page(4), IoContext::Normal)
        .unwrap();
    assert_eq!(durable_handles(&s, REL, ForkNumber::Main), 0);
    assert_eq!(s.pending_syncs(), 0);
    let mut one = vec![0u8; 4096];
    s.read(&tag(0), &mut one, IoContext::Normal).unwrap();
    assert_eq!(one, page(4));
}
