//! Reads run ahead of use: a vectored read handed to an I/O engine, finished later on
//! another thread, which then calls the submitter's completion.
//!
//! Owns: [`Aio`], one engine per `io_method` ([`IoMethod`]): `sync` runs the read inline at
//! submission (the fallback everything else falls back to); `worker` hands it to a small
//! pool of I/O threads (`bufpool-io-N`); `io_uring` (cargo feature `io-uring`) submits it to
//! a kernel ring and a reaper thread (`bufpool-uring`) finishes it. Every read goes through
//! a [`VfsFile`]: io_uring needs the file's descriptor ([`VfsFile::raw_fd`]); a file
//! without one (in-memory, fault-injecting, simulated) is read through
//! [`VfsFile::read_vectored_at`] on the engine's thread as `worker` would (inline if there
//! is no worker), so injected faults still happen.
//!
//! A request's transfer is whole: after a short count the engine reads the rest with
//! further calls, as PostgreSQL does; only end of file (a call that moves 0 bytes) or an
//! error ends it early. The completion gets the bytes moved or the OS error.
//!
//! Invariants: a submitted request's completion runs exactly once, on the engine's thread
//! (or inline for `sync`); dropping an [`Aio`] first finishes every request submitted to it
//! (workers drain their queue, the reaper waits for the ring to empty), so memory a request
//! points at may be released once the engine is gone. If io_uring cannot be set up (built
//! without the feature, or the kernel refuses the ring) the engine is `worker` instead, and
//! one warning says why ([`Aio::fallback_reason`]).
//! Locks: the worker queue's mutex (held to push or pop); for io_uring the submission
//! mutex (held to push an entry and enter the kernel) and the pending table's mutex (held to
//! insert or take a request). Completions run with no engine lock held.

use std::collections::VecDeque;
use std::io::{self, IoSliceMut};
use std::sync::Arc;

use super::panic_text;
use super::VfsFile;
use crate::sync::{Condvar, JoinHandle, Mutex};

/// How reads run ahead of use (PostgreSQL 18's `io_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoMethod {
    /// The read runs inline, when it is started: combining and look-ahead still apply,
    /// but nothing overlaps the caller's work.
    Sync,
    /// A small pool of I/O threads runs the reads (PostgreSQL 18's default).
    Worker,
    /// The kernel's io_uring (cargo feature `io-uring`; `worker` where it is unavailable).
    IoUring,
}

impl IoMethod {
    /// Every method, in the knob's word order.
    pub const ALL: [IoMethod; 3] = [IoMethod::Sync, IoMethod::Worker, IoMethod::IoUring];

    /// The knob's word for it.
    pub fn name(self) -> &'static str {
        match self {
            IoMethod::Sync => "sync",
            IoMethod::Worker => "worker",
            IoMethod::IoUring => "io_uring",
        }
    }
}

/// Default I/O worker threads: PostgreSQL 18's `io_workers` default (3), enough to keep a
/// few combined reads of one or two scans in flight on this 2-core machine.
pub const DEFAULT_IO_WORKERS: usize = 3;
/// Most I/O worker threads (PostgreSQL's limit is 32).
pub const MAX_IO_WORKERS: usize = 32;
/// Entries of the io_uring submission queue. In-flight reads are bounded by the streams'
/// pin budgets long before this; a full queue is submitted and retried, never dropped.
#[cfg(feature = "io-uring")]
pub(crate) const URING_ENTRIES: u32 = 256;

/// What an engine is built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AioOptions {
    /// How reads run ahead of use.
    pub method: IoMethod,
    /// Threads of the `worker` method (also of the fallback from io_uring).
    pub workers: usize,
}

impl Default for AioOptions {
    fn default() -> Self {
        Self {
            method: IoMethod::Worker,
            workers: DEFAULT_IO_WORKERS,
        }
    }
}

/// Called once with the request's outcome: bytes moved (less than asked only at end of
/// file) or the OS error.
pub type ReadDone = Box<dyn FnOnce(io::Result<usize>) + Send>;

/// One vectored read: consecutive bytes of `file` from `offset` into separate buffers.
pub struct ReadvRequest {
    file: Arc<dyn VfsFile>,
    offset: u64,
    /// Heap-allocated so its address stays put while the kernel reads it (io_uring).
    iov: Box<[libc::iovec]>,
    done: ReadDone,
}

impl std::fmt::Debug for ReadvRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadvRequest")
            .field("path", &self.file.path())
            .field("offset", &self.offset)
            .field("buffers", &self.iov.len())
            .finish()
    }
}

// SAFETY: the only non-Send fields are the iovecs' raw pointers. By `ReadvRequest::new`'s
// contract the memory they point at is reserved for this request until `done` has run, on
// whichever thread runs it; moving the request moves only the pointers.
unsafe impl Send for ReadvRequest {}

impl ReadvRequest {
    /// A read of `bufs` (pointer, length each) from `offset` of `file`.
    ///
    /// # Safety
    /// Each buffer is valid for writes of its length, and nothing else reads, writes or
    /// frees it from now until `done` has been called (the engine's thread writes it).
    /// With O_DIRECT files, buffers and offset are suitably aligned.
    pub unsafe fn new(
        file: Arc<dyn VfsFile>,
        offset: u64,
        bufs: &[(*mut u8, usize)],
        done: ReadDone,
    ) -> Self {
        let iov = bufs
            .iter()
            .map(|&(ptr, len)| libc::iovec {
                iov_base: ptr.cast(),
                iov_len: len,
            })
            .collect();
        Self {
            file,
            offset,
            iov,
            done,
        }
    }

    /// Bytes asked for.
    pub fn len(&self) -> usize {
        self.iov.iter().map(|v| v.iov_len).sum()
    }

    /// Whether the request asks for no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads from byte `start` of the request to its end (or end of file) with blocking
    /// calls; returns the total moved, `start` included.
    fn read_from(&self, start: usize) -> io::Result<usize> {
        let want = self.len();
        let mut moved = start;
        while moved < want {
            let mut skip = moved;
            let mut slices: Vec<IoSliceMut<'_>> = Vec::with_capacity(self.iov.len());
            for v in self.iov.iter() {
                if skip >= v.iov_len {
                    skip -= v.iov_len;
                    continue;
                }
                // SAFETY: the buffer is reserved for this request (contract of `new`) and
                // this is the only slice made of it at a time; `skip < iov_len` keeps the
                // slice inside it.
                let s = unsafe {
                    std::slice::from_raw_parts_mut(
                        v.iov_base.cast::<u8>().add(skip),
                        v.iov_len - skip,
                    )
                };
                slices.push(IoSliceMut::new(s));
                skip = 0;
            }
            let n = self
                .file
                .read_vectored_at(&mut slices, self.offset + moved as u64)?;
            if n == 0 {
                break;
            }
            moved += n;
        }
        Ok(moved)
    }

    /// Runs the whole read on this thread and calls the completion.
    fn run_blocking(self) {
        let r = self.read_caught(0);
        (self.done)(r);
    }

    /// [`Self::read_from`], a panic below it (an embedder's file system, say) becoming the
    /// read's error: the read call has returned, by unwinding, so nothing writes the
    /// buffers any more, and the completion runs as for any failed read.
    fn read_caught(&self, start: usize) -> io::Result<usize> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.read_from(start)))
            .unwrap_or_else(|p| {
                Err(io::Error::other(format!(
                    "the read panicked: {}",
                    panic_text(&p)
                )))
            })
    }

    /// Finishes a read of which the kernel moved `moved` bytes: the rest (if any) blocking.
    #[cfg_attr(not(feature = "io-uring"), allow(dead_code))]
    fn finish_after(self, moved: usize) {
        let r = if moved == 0 || moved >= self.len() {
            Ok(moved)
        } else {
            self.read_caught(moved)
        };
        (self.done)(r);
    }
}

/// Runs a request on an engine thread that must outlive it: a panic in its completion
/// (which has already failed the read's pages, see `buffer::read_run`) is logged and the
/// thread goes on serving the others.
fn run_surviving(what: &str, f: impl FnOnce()) {
    if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        tracing::error!(target: "bufpool::aio", "{what}: a read's completion panicked: {}", panic_text(&*p));
    }
}

/// An I/O engine: where submitted reads run. See the module doc.
pub struct Aio {
    requested: IoMethod,
    fallback: Option<String>,
    engine: Engine,
}

enum Engine {
    Sync,
    Worker(Workers),
    #[cfg(feature = "io-uring")]
    Uring(uring::Uring),
}

impl std::fmt::Debug for Aio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aio")
            .field("requested", &self.requested)
            .field("method", &self.method())
            .field("fallback", &self.fallback)
            .finish()
    }
}

impl Aio {
    /// Builds the engine `opts` asks for, falling back to `worker` (with one warning) if
    /// io_uring cannot be had, and to `sync` if no worker thread can be started.
    pub fn new(opts: AioOptions) -> Aio {
        let workers = opts.workers.clamp(1, MAX_IO_WORKERS);
        let mut fallback = None;
        let engine = match opts.method {
            IoMethod::Sync => Engine::Sync,
            IoMethod::Worker => Engine::Worker(Workers::start(workers)),
            IoMethod::IoUring => match Self::uring() {
                Ok(e) => e,
                Err(why) => {
                    tracing::warn!(
                        target: "bufpool::aio",
                        "io_method = io_uring unavailable ({why}); using worker ({workers} threads)"
                    );
                    fallback = Some(why);
                    Engine::Worker(Workers::start(workers))
                }
            },
        };
        let engine = match engine {
            Engine::Worker(w) if w.threads.is_empty() => {
                let why = "no I/O worker thread could be started".to_string();
                tracing::warn!(target: "bufpool::aio", "{why}; reads run inline (sync)");
                fallback = Some(why);
                Engine::Sync
            }
            e => e,
        };
        Aio {
            requested: opts.method,
            fallback,
            engine,
        }
    }

    #[cfg(feature = "io-uring")]
    fn uring() -> Result<Engine, String> {
        uring::Uring::start().map(Engine::Uring)
    }

    #[cfg(not(feature = "io-uring"))]
    fn uring() -> Result<Engine, String> {
        Err("built without the io-uring cargo feature".to_string())
    }

    /// The method asked for.
    pub fn requested(&self) -> IoMethod {
        self.requested
    }

    /// The method in effect.
    pub fn method(&self) -> IoMethod {
        match self.engine {
            Engine::Sync => IoMethod::Sync,
            Engine::Worker(_) => IoMethod::Worker,
            #[cfg(feature = "io-uring")]
            Engine::Uring(_) => IoMethod::IoUring,
        }
    }

    /// Why the method in effect is not the one asked for (None when it is).
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Starts `req`; its completion runs later on an engine thread (`sync`: before this
    /// returns).
    pub fn submit(&self, req: ReadvRequest) {
        match &self.engine {
            Engine::Sync => req.run_blocking(),
            Engine::Worker(w) => w.push(req),
            #[cfg(feature = "io-uring")]
            Engine::Uring(u) => u.submit(req),
        }
    }
}

/// The `worker` engine: threads popping requests off one queue.
struct Workers {
    shared: Arc<WorkQueue>,
    threads: Vec<JoinHandle<()>>,
}

struct WorkQueue {
    /// Requests not yet taken, and whether the engine is shutting down.
    queue: Mutex<(VecDeque<ReadvRequest>, bool)>,
    ready: Condvar,
}

impl Workers {
    fn start(n: usize) -> Workers {
        let shared = Arc::new(WorkQueue {
            queue: Mutex::new((VecDeque::new(), false)),
            ready: Condvar::new(),
        });
        let threads = (0..n)
            .filter_map(|i| {
                let q = shared.clone();
                crate::sync::spawn(format!("bufpool-io-{i}"), move || q.run()).ok()
            })
            .collect();
        Workers { shared, threads }
    }

    fn push(&self, req: ReadvRequest) {
        self.shared.queue.lock().0.push_back(req);
        self.shared.ready.notify_all();
    }
}

impl WorkQueue {
    /// A worker's loop: run requests until shut down with an empty queue.
    fn run(&self) {
        loop {
            let req = {
                let mut q = self.queue.lock();
                loop {
                    if let Some(r) = q.0.pop_front() {
                        break r;
                    }
                    if q.1 {
                        return;
                    }
                    q = self.ready.wait(q);
                }
            };
            run_surviving("I/O worker", || req.run_blocking());
        }
    }
}

impl Drop for Workers {
    /// Drains the queue (each worker exits once it is empty) and joins the threads.
    fn drop(&mut self) {
        self.shared.queue.lock().1 = true;
        self.shared.ready.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(feature = "io-uring")]
mod uring {
    //! The io_uring engine: callers push READV entries under the submission mutex; one
    //! reaper thread waits for completions and finishes them. The pending table owns each
    //! request (its file, so the descriptor stays open, and its iovec array, whose heap
    //! address the kernel holds) until its completion is reaped.

    use std::io;
    use std::sync::Arc;

    use io_uring::{opcode, types, IoUring};

    use super::ReadvRequest;
    use crate::sync::{AtomicBool, JoinHandle, Mutex, Ordering};

    /// user_data of the no-op that wakes the reaper at shutdown.
    const WAKE: u64 = u64::MAX;

    struct Shared {
        ring: IoUring,
        /// Held while pushing entries and entering the kernel to submit them.
        submit: Mutex<()>,
        /// Requests in the kernel, by user_data (index); `free` lists unused indexes.
        pending: Mutex<(Vec<Option<ReadvRequest>>, Vec<usize>)>,
        stop: AtomicBool,
    }

    pub(super) struct Uring {
        shared: Arc<Shared>,
        reaper: Option<JoinHandle<()>>,
    }

    impl Uring {
        pub(super) fn start() -> Result<Uring, String> {
            let ring =
                IoUring::new(super::URING_ENTRIES).map_err(|e| format!("io_uring_setup: {e}"))?;
            let shared = Arc::new(Shared {
                ring,
                submit: Mutex::new(()),
                pending: Mutex::new((Vec::new(), Vec::new())),
                stop: AtomicBool::new(false),
            });
            let s = shared.clone();
            let reaper = crate::sync::spawn("bufpool-uring".to_string(), move || s.reap())
                .map_err(|e| format!("starting the reaper thread: {e}"))?;
            Ok(Uring {
                shared,
                reaper: Some(reaper),
            })
        }

        pub(super) fn submit(&self, req: ReadvRequest) {
            let Some(fd) = req.file.raw_fd() else {
                // No descriptor (an in-memory or fault-injecting file): read it here.
                req.run_blocking();
                return;
            };
            let iov_ptr = req.iov.as_ptr();
            let iov_len = req.iov.len() as u32;
            let offset = req.offset;
            let key = {
                let mut p = self.shared.pending.lock();
                match p.1.pop() {
                    Some(k) => {
                        p.0[k] = Some(req);
                        k
                    }
                    None => {
                        p.0.push(Some(req));
                        p.0.len() - 1
                    }
                }
            };
            let entry = opcode::Readv::new(types::Fd(fd), iov_ptr, iov_len)
                .offset(offset)
                .build()
                .user_data(key as u64);
            self.shared.push(&entry);
        }
    }

    impl Shared {
        /// Pushes one entry and submits it; retries while the queue is full. Once pushed,
        /// an entry is never failed here: the kernel will read into its buffers whenever it
        /// takes it, so only its completion may end its request. Transient refusals
        /// (EINTR, EAGAIN, EBUSY while the reaper drains the completions) are retried until
        /// the kernel has taken the queue; anything else is logged and left to the reaper's
        /// next `submit_and_wait`, which submits what is queued.
        fn push(&self, entry: &io_uring::squeue::Entry) {
            let _g = self.submit.lock();
            loop {
                // SAFETY: the submission mutex is held, so no other SubmissionQueue of this
                // ring exists (the reaper only submits through `submit_and_wait`, which
                // reads the published tail and never borrows the queue).
                let mut sq = unsafe { self.ring.submission_shared() };
                // SAFETY: the entry's iovec array and buffers stay valid until its
                // completion is reaped: the array is owned by the pending table's request,
                // the buffers by `ReadvRequest::new`'s contract, the descriptor by the
                // request's file handle.
                let pushed = unsafe { sq.push(entry) }.is_ok();
                drop(sq);
                loop {
                    match self.ring.submit() {
                        Ok(_) => break,
                        Err(e)
                            if matches!(
                                e.raw_os_error(),
                                Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                            ) =>
                        {
                            crate::sync::yield_now()
                        }
                        Err(e) => {
                            tracing::error!(target: "bufpool::aio", "io_uring submit failed: {e}");
                            break;
                        }
                    }
                }
                if pushed {
                    return;
                }
                crate::sync::yield_now();
            }
        }

        fn take(&self, key: usize) -> Option<ReadvRequest> {
            let mut p = self.pending.lock();
            let r = p.0.get_mut(key).and_then(Option::take);
            if r.is_some() {
                p.1.push(key);
            }
            r
        }

        fn idle(&self) -> bool {
            let p = self.pending.lock();
            p.0.len() == p.1.len()
        }

        /// The reaper's loop: wait for completions, finish their requests; at shutdown,
        /// keep going until no request is pending.
        fn reap(&self) {
            let mut done: Vec<(u64, i32)> = Vec::new();
            loop {
                if self.stop.load(Ordering::Acquire) && self.idle() {
                    return;
                }
                match self.ring.submit_and_wait(1) {
                    Ok(_) => {}
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EBUSY)) => {
                    }
                    Err(e) => {
                        tracing::error!(target: "bufpool::aio", "io_uring wait failed: {e}");
                        crate::sync::yield_now();
                    }
                }
                {
                    // SAFETY: the reaper is the only thread that reads the completion
                    // queue, so no other CompletionQueue of this ring exists.
                    let cq = unsafe { self.ring.completion_shared() };
                    done.extend(cq.map(|c| (c.user_data(), c.result())));
                }
                for (key, res) in done.drain(..) {
                    if key == WAKE {
                        continue;
                    }
                    let Some(req) = self.take(key as usize) else {
                        continue;
                    };
                    super::run_surviving("io_uring reaper", || {
                        if res < 0 {
                            (req.done)(Err(io::Error::from_raw_os_error(-res)));
                        } else {
                            req.finish_after(res as usize);
                        }
                    });
                }
            }
        }
    }

    impl Drop for Uring {
        /// Finishes every pending request, then stops the reaper.
        fn drop(&mut self) {
            self.shared.stop.store(true, Ordering::Release);
            let nop = opcode::Nop::new().build().user_data(WAKE);
            self.shared.push(&nop);
            if let Some(t) = self.reaper.take() {
                let _ = t.join();
            }
        }
    }
}

// No `Drop for Aio`: dropping the engine field drops `Workers` or `Uring`, whose own drops
// finish every submitted request before they return.

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Aio>();
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::{AlignedBuf, MemVfs, OpenOptions, RealVfs, Vfs};
    use std::sync::mpsc;

    fn file_with(vfs: &dyn Vfs, path: &std::path::Path, pages: usize) -> Arc<dyn VfsFile> {
        let f = vfs.open(path, OpenOptions::create()).unwrap();
        for p in 0..pages {
            let page = vec![p as u8 + 1; 4096];
            f.write_at(&page, (p * 4096) as u64).unwrap();
        }
        f
    }

    /// Reads pages 1 and 2 of a 3-page file into two separate buffers through `aio`.
    fn two_pages(aio: &Aio, f: Arc<dyn VfsFile>) -> io::Result<usize> {
        let mut a = AlignedBuf::zeroed(4096);
        let mut b = AlignedBuf::zeroed(4096);
        let (tx, rx) = mpsc::channel();
        let bufs = [
            (a.as_mut_slice().as_mut_ptr(), 4096),
            (b.as_mut_slice().as_mut_ptr(), 4096),
        ];
        // SAFETY: `a` and `b` are not touched until the completion has been received.
        let req =
            unsafe { ReadvRequest::new(f, 4096, &bufs, Box::new(move |r| tx.send(r).unwrap())) };
        aio.submit(req);
        let r = rx.recv().unwrap();
        if let Ok(n) = r {
            assert!(a.as_slice().iter().all(|&x| x == 2));
            if n == 8192 {
                assert!(b.as_slice().iter().all(|&x| x == 3));
            }
        }
        r
    }

    /// Proves: every method moves the bytes of a vectored read into its buffers and
    /// reports the count; io_uring is either in effect or says why not.
    #[test]
    fn every_method_reads_into_separate_buffers() {
        let dir = tempfile::tempdir().unwrap();
        let real = RealVfs::new();
        let f = file_with(&real, &dir.path().join("f"), 3);
        let mem = MemVfs::new();
        mem.create_dir_all(std::path::Path::new("/d")).unwrap();
        let g = file_with(&mem, std::path::Path::new("/d/g"), 3);
        for method in IoMethod::ALL {
            let aio = Aio::new(AioOptions { method, workers: 2 });
            assert_eq!(aio.requested(), method);
            if aio.method() != method {
                assert_eq!(method, IoMethod::IoUring);
                let why = aio.fallback_reason().unwrap();
                eprintln!(
                    "io_uring not in effect ({why}): its case ran on {:?}",
                    aio.method()
                );
            }
            assert_eq!(two_pages(&aio, f.clone()).unwrap(), 8192, "{method:?}");
            assert_eq!(
                two_pages(&aio, g.clone()).unwrap(),
                8192,
                "{method:?} in memory"
            );
        }
    }

    /// Proves: a read past the end of the file reports the bytes that exist, and a failed
    /// read keeps its errno, with every method (io_uring's completion path included where
    /// it is in effect).
    #[test]
    fn end_of_file_is_a_short_count_and_errors_keep_their_errno() {
        let dir = tempfile::tempdir().unwrap();
        let real = RealVfs::new();
        let f = file_with(&real, &dir.path().join("f"), 2);
        // Reading a directory's descriptor fails with EISDIR.
        let d = real.open(dir.path(), OpenOptions::read_only()).unwrap();
        let mem = MemVfs::new();
        mem.create_dir_all(std::path::Path::new("/d")).unwrap();
        let g = file_with(&mem, std::path::Path::new("/d/g"), 2);
        for method in IoMethod::ALL {
            let aio = Aio::new(AioOptions { method, workers: 1 });
            assert_eq!(two_pages(&aio, f.clone()).unwrap(), 4096, "{method:?}");
            assert_eq!(two_pages(&aio, g.clone()).unwrap(), 4096, "{method:?}");
            let e = two_pages(&aio, d.clone()).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EISDIR), "{method:?}: {e}");
        }
    }
}
