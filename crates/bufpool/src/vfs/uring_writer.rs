//! Many page writes in flight from one thread: the bgwriter's batches go to the kernel
//! through an io_uring of its own, so a batch keeps `bgwriter_writers` writes in flight
//! without a thread per write (issue 12: on 2 cores, 16 writer threads woken
//! one per completed write delayed the clients' threads by up to 10-20 ms; the CPU time of
//! the writes themselves is the same either way).
//!
//! Owns: [`UringWriter`], an io_uring owned by one thread (`&mut self`: no lock), or nothing
//! when io_uring is unavailable (built without the `io-uring` feature, or the kernel
//! refuses the ring; [`UringWriter::fallback_reason`] says which). Without a ring, or for a
//! file without a descriptor (in-memory, fault-injecting, simulated), a write runs as a
//! blocking [`VfsFile::write_at`] on the calling thread, so injected faults still happen.
//!
//! A write's transfer is whole: after a short count the rest is written with blocking
//! calls; only an error (or a call that moves 0 bytes, reported as `WriteZero`) ends it
//! early. Each write reports its own result and how long it took from submission to its
//! completion.
//!
//! Pipeline: the ring owns one page slot per write in flight; [`UringWriter::pipeline`] asks
//! its [`WriteSource`] for the next page only when a slot is free (so the caller claims and
//! copies each page just before its write), queues it, and hands each completion back.
//!
//! Invariants: [`UringWriter::pipeline`] returns only once every entry it queued has
//! completed, so no slot is in the kernel after it returns; at most `in_flight` writes are
//! in the kernel at once; each page returned by the source gets exactly one `done`.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{AlignedBuf, VfsFile};

/// What one write came to: the whole page written, or the OS error; and its time from
/// submission to completion.
pub type PageWriteResult = (io::Result<()>, Duration);

/// Where the pages of a [`UringWriter::pipeline`] come from and where their results go.
pub trait WriteSource {
    /// Fills `buf` (one page) with the next page to write and returns its file and offset,
    /// or None when there is none left. Pages are numbered from 0 in the order returned.
    fn next(&mut self, buf: &mut [u8]) -> Option<(Arc<dyn VfsFile>, u64)>;
    /// Page `n` has been written (or failed).
    fn done(&mut self, n: usize, result: PageWriteResult);
}

/// Writes pages, several in flight, from the thread that owns it.
pub struct UringWriter {
    #[cfg(feature = "io-uring")]
    ring: Option<io_uring::IoUring>,
    fallback_reason: Option<String>,
    /// Page slots: one per write in flight (allocated at the first pipeline).
    slots: Option<AlignedBuf>,
    slots_len: usize,
}

impl std::fmt::Debug for UringWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringWriter")
            .field("uring", &self.is_uring())
            .field("fallback_reason", &self.fallback_reason)
            .finish()
    }
}

/// Entries of the ring's submission queue: the most writes in flight.
pub(crate) const WRITE_RING_ENTRIES: u32 = 64;

impl UringWriter {
    /// A ring if the build and the kernel allow one; otherwise blocking writes (and
    /// [`Self::fallback_reason`] says why).
    pub fn new() -> Self {
        #[cfg(feature = "io-uring")]
        {
            match io_uring::IoUring::new(WRITE_RING_ENTRIES) {
                Ok(ring) => Self::with(Some(ring), None),
                Err(e) => Self::with(None, Some(format!("io_uring_setup: {e}"))),
            }
        }
        #[cfg(not(feature = "io-uring"))]
        Self::with(Some("built without the io-uring feature".to_string()))
    }

    /// Blocking writes only (no ring), as when io_uring is unavailable.
    pub fn blocking() -> Self {
        #[cfg(feature = "io-uring")]
        return Self::with(None, Some("blocking writes asked for".to_string()));
        #[cfg(not(feature = "io-uring"))]
        Self::with(Some("blocking writes asked for".to_string()))
    }

    #[cfg(feature = "io-uring")]
    fn with(ring: Option<io_uring::IoUring>, fallback_reason: Option<String>) -> Self {
        Self {
            ring,
            fallback_reason,
            slots: None,
            slots_len: 0,
        }
    }

    #[cfg(not(feature = "io-uring"))]
    fn with(fallback_reason: Option<String>) -> Self {
        Self {
            fallback_reason,
            slots: None,
            slots_len: 0,
        }
    }

    /// Whether writes go through io_uring.
    pub fn is_uring(&self) -> bool {
        #[cfg(feature = "io-uring")]
        return self.ring.is_some();
        #[cfg(not(feature = "io-uring"))]
        false
    }

    /// Why there is no ring (None: there is one).
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback_reason.as_deref()
    }

    /// Writes the pages `src` gives, each `page_size` bytes, keeping up to `in_flight` (at
    /// least 1, at most `WRITE_RING_ENTRIES`) in the kernel: a page is asked for only
    /// when a slot is free, so it is prepared just before its write. Returns when `src`
    /// has no more pages and every write has completed (and been reported to `src`).
    pub fn pipeline(&mut self, in_flight: usize, page_size: usize, src: &mut dyn WriteSource) {
        let in_flight = in_flight.clamp(1, WRITE_RING_ENTRIES as usize);
        if self.slots.is_none() || self.slots_len < in_flight * page_size {
            self.slots = Some(AlignedBuf::zeroed(in_flight * page_size));
            self.slots_len = in_flight * page_size;
        }
        let slots = self.slots.as_mut().expect("allocated above");
        #[cfg(feature = "io-uring")]
        if let Some(ring) = self.ring.as_mut() {
            return uring::pipeline(ring, slots, in_flight, page_size, src);
        }
        let buf = &mut slots.as_mut_slice()[..page_size];
        let mut n = 0;
        while let Some((file, offset)) = src.next(buf) {
            let start = Instant::now();
            let r = write_rest(&*file, buf, offset, 0);
            src.done(n, (r, start.elapsed()));
            n += 1;
        }
    }
}

impl Default for UringWriter {
    fn default() -> Self {
        Self::new()
    }
}

/// Writes `buf[from..]` at `offset + from` with blocking calls until all of it is written.
fn write_rest(file: &dyn VfsFile, buf: &[u8], offset: u64, from: usize) -> io::Result<()> {
    let mut done = from;
    while done < buf.len() {
        let n = file.write_at(&buf[done..], offset + done as u64)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "the write moved no bytes",
            ));
        }
        done += n;
    }
    Ok(())
}

#[cfg(feature = "io-uring")]
mod uring {
    use std::io;
    use std::sync::Arc;
    use std::time::Instant;

    use io_uring::{opcode, types, IoUring};

    use super::{write_rest, WriteSource};
    use crate::vfs::{AlignedBuf, VfsFile};

    /// One slot's write in the kernel.
    struct InFlight {
        n: usize,
        file: Arc<dyn VfsFile>,
        offset: u64,
        started: Instant,
    }

    /// Whether a failed `submit_and_wait` is worth retrying at once (interrupted, or the
    /// kernel's queues briefly full).
    fn transient(e: &io::Error) -> bool {
        matches!(
            e.raw_os_error(),
            Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
        )
    }

    /// The ring of a pipeline and how many of its writes are in the kernel. Dropped with
    /// writes still there only by a panic (a normal return waits for every one): it waits
    /// for them, so the unwinding caller frees or reuses no slot the kernel still reads
    /// from. If the ring cannot be waited on, aborting is the only safe way out.
    struct Drain<'r> {
        ring: &'r mut IoUring,
        in_kernel: usize,
    }

    impl Drop for Drain<'_> {
        fn drop(&mut self) {
            while self.in_kernel > 0 {
                match self.ring.submit_and_wait(1) {
                    Ok(_) => {}
                    Err(e) if transient(&e) => {}
                    Err(e) => {
                        tracing::error!(
                            target: "bufpool::aio",
                            "cannot wait for {} writes in the kernel after a panic: {e}",
                            self.in_kernel
                        );
                        std::process::abort();
                    }
                }
                let reaped = self.ring.completion().count();
                self.in_kernel = self.in_kernel.saturating_sub(reaped);
            }
        }
    }

    /// Queues a write of `buf` at `offset` of descriptor `fd`, tagged with slot `i`:
    /// false if the submission queue stays full (the caller writes the page itself). The
    /// queue has room as the pipeline counts (entries queued or in flight never exceed its
    /// capacity); should the kernel say otherwise, what is queued is submitted and the
    /// push tried once more.
    ///
    /// # Safety
    /// `buf` must stay untouched, and `fd` open, until this write's completion is reaped.
    unsafe fn queue_write(ring: &mut IoUring, fd: i32, buf: &[u8], offset: u64, i: usize) -> bool {
        let entry = opcode::Write::new(types::Fd(fd), buf.as_ptr(), buf.len() as u32)
            .offset(offset)
            .build()
            .user_data(i as u64);
        // SAFETY: the caller keeps `buf` and `fd` valid until the completion is reaped.
        if unsafe { ring.submission().push(&entry) }.is_ok() {
            return true;
        }
        let _ = ring.submit();
        // SAFETY: as above.
        unsafe { ring.submission().push(&entry) }.is_ok()
    }

    /// The outcome of write `w` from its completion's result `res`: the error, a write
    /// that moved nothing, or success (after a short count, once the rest is written
    /// here, blocking, from `buf`).
    fn completed(res: i32, w: &InFlight, buf: &[u8]) -> io::Result<()> {
        if res < 0 {
            Err(io::Error::from_raw_os_error(-res))
        } else if res == 0 {
            Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "the write moved no bytes",
            ))
        } else {
            write_rest(&*w.file, buf, w.offset, res as usize)
        }
    }

    pub(super) fn pipeline(
        ring: &mut IoUring,
        slots: &mut AlignedBuf,
        in_flight: usize,
        page_size: usize,
        src: &mut dyn WriteSource,
    ) {
        let cap = (ring.params().sq_entries() as usize).min(in_flight);
        // A write the kernel cannot start without blocking (a device without nowait
        // support, the loop device among them) goes to the ring's io-wq workers, by
        // default at most 4 per CPU: allow one per write in flight. Best effort: an old
        // kernel refuses, and fewer writes overlap.
        let _ = ring
            .submitter()
            .register_iowq_max_workers(&mut [cap as u32, 0]);
        let base = slots.as_mut_slice().as_mut_ptr();
        let slot = |i: usize| {
            debug_assert!(i < cap);
            // SAFETY: slot i is bytes [i × page_size, (i+1) × page_size) of `slots`, which
            // holds at least `in_flight` ≥ `cap` pages (`UringWriter::pipeline` sized it)
            // and is borrowed for this whole call; a slot is either free (only this
            // thread touches it, through one slice at a time) or in the kernel (nobody in
            // Rust touches it until its completion is reaped), never both.
            unsafe { std::slice::from_raw_parts_mut(base.add(i * page_size), page_size) }
        };
        let mut free: Vec<usize> = (0..cap).rev().collect();
        let mut busy: Vec<Option<InFlight>> = (0..cap).map(|_| None).collect();
        // The ring and the count of writes in the kernel, which a panic below must wait
        // out before the slots they read from can be freed or reused (`Drain`).
        let mut d = Drain { ring, in_kernel: 0 };
        let mut next_n = 0usize;
        let mut ended = false;
        loop {
            // Fill free slots and queue their writes.
            while !ended {
                let Some(i) = free.pop() else { break };
                let buf = slot(i);
                let Some((file, offset)) = src.next(buf) else {
                    free.push(i);
                    ended = true;
                    break;
                };
                let n = next_n;
                next_n += 1;
                // SAFETY: the slot stays untouched until this entry's completion is reaped
                // (see above), the descriptor stays open while `busy[i]` holds its file,
                // and this call returns (or unwinds, `Drain`) only when nothing is in the
                // kernel.
                let queued = file
                    .raw_fd()
                    .is_some_and(|fd| unsafe { queue_write(d.ring, fd, buf, offset, i) });
                if !queued {
                    // No descriptor (in-memory, fault-injecting) or the queue stayed full:
                    // write it here.
                    let start = Instant::now();
                    let r = write_rest(&*file, buf, offset, 0);
                    src.done(n, (r, start.elapsed()));
                    free.push(i);
                    continue;
                }
                busy[i] = Some(InFlight {
                    n,
                    file,
                    offset,
                    started: Instant::now(),
                });
                d.in_kernel += 1;
            }
            if d.in_kernel == 0 {
                if ended {
                    return;
                }
                continue;
            }
            // Submit what was queued and wait for at least one completion.
            match d.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if transient(&e) => {}
                Err(e) => {
                    // The entries stay queued; the next call submits them again. Yield so
                    // a persistent failure does not spin hot.
                    tracing::error!(target: "bufpool::aio", "io_uring write submit failed: {e}");
                    std::thread::yield_now();
                }
            }
            let done: Vec<(u64, i32)> = d
                .ring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (key, res) in done {
                let i = key as usize;
                let Some(w) = busy[i].take() else { continue };
                d.in_kernel -= 1;
                let r = completed(res, &w, slot(i));
                src.done(w.n, (r, w.started.elapsed()));
                free.push(i);
            }
        }
    }
}

#[cfg(all(test, not(shuttle)))]
mod tests {
    use super::*;
    use crate::vfs::{FaultKind, FaultOp, FaultRule, FaultVfs, MemVfs, OpenOptions, RealVfs, Vfs};

    fn open(vfs: &dyn Vfs, path: &std::path::Path) -> Arc<dyn VfsFile> {
        vfs.open(path, OpenOptions::create()).unwrap()
    }

    fn read_page(f: &Arc<dyn VfsFile>, offset: u64) -> Vec<u8> {
        let mut back = vec![0u8; 4096];
        assert_eq!(f.read_at(&mut back, offset).unwrap(), 4096);
        back
    }

    /// Writes page k (filled with k + 1) at `offsets[k]` of `files[k]`, and records each
    /// page's result and how many were in the source's hands at once.
    struct Pages {
        writes: Vec<(Arc<dyn VfsFile>, u64)>,
        next: usize,
        results: Vec<Option<io::Result<()>>>,
        outstanding: usize,
        most_outstanding: usize,
    }

    impl Pages {
        fn new(writes: Vec<(Arc<dyn VfsFile>, u64)>) -> Self {
            let n = writes.len();
            Self {
                writes,
                next: 0,
                results: (0..n).map(|_| None).collect(),
                outstanding: 0,
                most_outstanding: 0,
            }
        }
    }

    impl WriteSource for Pages {
        fn next(&mut self, buf: &mut [u8]) -> Option<(Arc<dyn VfsFile>, u64)> {
            let k = self.next;
            let w = self.writes.get(k)?.clone();
            self.next += 1;
            buf.fill(k as u8 + 1);
            self.outstanding += 1;
            self.most_outstanding = self.most_outstanding.max(self.outstanding);
            Some(w)
        }
        fn done(&mut self, n: usize, result: PageWriteResult) {
            assert!(self.results[n].is_none(), "page {n} reported twice");
            self.outstanding -= 1;
            self.results[n] = Some(result.0);
        }
    }

    /// Proves: every page of a pipeline reaches its offset with its own bytes, whatever
    /// the in-flight cap, on a real file (through io_uring where the build and kernel
    /// allow; said on stderr otherwise) and on an in-memory one; every page is reported
    /// once; no more than the cap are ever outstanding.
    #[test]
    fn every_page_lands_at_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let real = RealVfs::new();
        let mem = MemVfs::new();
        mem.create_dir_all(std::path::Path::new("/d")).unwrap();
        let files = [
            open(&real, &dir.path().join("f")),
            open(&mem, std::path::Path::new("/d/g")),
        ];
        for mut ring in [UringWriter::new(), UringWriter::blocking()] {
            if let Some(why) = ring.fallback_reason() {
                eprintln!("write ring: blocking writes ({why})");
            }
            for in_flight in [1, 3, 64] {
                for f in &files {
                    // Reverse order, so a page's place comes from its offset alone.
                    let writes = (0..40u64).rev().map(|i| (f.clone(), i * 4096)).collect();
                    let mut pages = Pages::new(writes);
                    ring.pipeline(in_flight, 4096, &mut pages);
                    assert!(pages.results.iter().all(|r| matches!(r, Some(Ok(())))));
                    assert!(pages.most_outstanding <= in_flight);
                    for k in 0..40u64 {
                        let want = vec![k as u8 + 1; 4096];
                        assert_eq!(
                            read_page(f, (39 - k) * 4096),
                            want,
                            "page {k}, {in_flight} in flight"
                        );
                    }
                }
            }
        }
    }

    /// Proves: a failed write reports its OS error for its own page and the other pages
    /// still land (a real file through the ring: a read-only descriptor fails with EBADF;
    /// a fault-injecting file: the injected EIO); a short write is completed.
    #[test]
    fn a_failed_write_keeps_its_error_and_the_rest_land() {
        let dir = tempfile::tempdir().unwrap();
        let real = RealVfs::new();
        let good = open(&real, &dir.path().join("good"));
        std::fs::write(dir.path().join("ro"), vec![0u8; 4096]).unwrap();
        let ro = real
            .open(&dir.path().join("ro"), OpenOptions::read_only())
            .unwrap();
        let mut ring = UringWriter::new();
        let mut pages = Pages::new(vec![(good.clone(), 0), (ro, 0), (good.clone(), 4096)]);
        ring.pipeline(8, 4096, &mut pages);
        assert!(matches!(pages.results[0], Some(Ok(()))));
        assert!(matches!(pages.results[2], Some(Ok(()))));
        let e = pages.results[1].as_ref().unwrap().as_ref().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF), "{e}");
        assert_eq!(read_page(&good, 4096), vec![3u8; 4096]);

        let faulty = FaultVfs::new(Arc::new(MemVfs::new()));
        faulty.create_dir_all(std::path::Path::new("/d")).unwrap();
        let f = open(&faulty, std::path::Path::new("/d/f"));
        faulty.add_rule(FaultRule::nth("/d/f", FaultOp::Write, 2, FaultKind::Eio));
        let mut pages = Pages::new((0..3).map(|i| (f.clone(), i * 4096)).collect());
        ring.pipeline(4, 4096, &mut pages);
        assert!(matches!(pages.results[0], Some(Ok(()))));
        assert!(matches!(pages.results[2], Some(Ok(()))));
        let e = pages.results[1].as_ref().unwrap().as_ref().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        // A short count is completed: the fault's half write, then the rest.
        faulty.add_rule(FaultRule::nth("/d/f", FaultOp::Write, 1, FaultKind::Short));
        let mut pages = Pages::new(vec![(f.clone(), 0)]);
        ring.pipeline(4, 4096, &mut pages);
        assert!(matches!(pages.results[0], Some(Ok(()))));
        assert_eq!(read_page(&f, 0), vec![1u8; 4096]);
    }
}
