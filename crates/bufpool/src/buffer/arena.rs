//! Page memory: one allocation for all buffers, aligned for O_DIRECT, on huge pages where
//! the kernel allows.
//!
//! Owns: the mapping of `nbuffers * page_size` bytes. Invariants: frame `i` is the
//! `page_size` bytes at `base + i * page_size`, aligned to at least 4096; the memory lives
//! as long as the arena. The arena hands out raw pointers only; who may read or write a
//! frame is the buffer protocol's business (content lock held, or the buffer's exclusive
//! I/O, see `buffer/mod.rs`).
//! Locks: none.
//!
//! Huge pages follow PostgreSQL's `huge_pages`: `try` asks for explicit huge pages
//! (MAP_HUGETLB, needs pages reserved in vm.nr_hugepages), then for transparent huge pages
//! (madvise MADV_HUGEPAGE on a 2 MiB-aligned range), then settles for normal pages; `on`
//! fails unless explicit huge pages are granted; `off` uses normal pages. Which one was used
//! is reported by [`PageArena::huge_pages`]. Reading the THP mode from sysfs is the one
//! file access that does not go through `vfs`: it is a kernel setting, not data.
//!
//! With transparent huge pages, the first write into each 2 MiB of the arena makes the
//! kernel allocate and clear a huge page (and, with `defrag = madvise`, compact memory for
//! it) inside the faulting access: a read into a never-used frame stalled its transaction
//! for 3-4 ms per huge page in the first seconds after open (BENCHMARKS, `compare --rate`).
//! A prefault thread ([`Prefault`]) takes those faults instead, a little ahead of use:
//! the pool tells the arena which frame an allocation hands out ([`PageArena::handing_out`],
//! one relaxed load when nothing is to do), and the thread populates up to
//! [`PREFAULT_AHEAD`] bytes past it with `MADV_POPULATE_WRITE` (page tables and zeroed
//! pages, no write to the memory itself, so it never races with a frame's bytes). The
//! resident memory grows with use as before, at most [`PREFAULT_AHEAD`] ahead. The thread
//! is joined before the mapping goes (Drop); kernels before 5.14 refuse the advice and the
//! thread then stops.

use std::io;
use std::ptr::NonNull;

/// Size of a huge page on x86_64 and aarch64 with 4 KiB base pages.
const HUGE_PAGE_SIZE: usize = 2 << 20;

/// How far past the frame an allocation hands out the prefault thread populates: eight
/// huge pages, 16 MiB.
pub(crate) const PREFAULT_AHEAD: usize = 8 * HUGE_PAGE_SIZE;

/// How the pool's page memory asks for huge pages (PostgreSQL's `huge_pages`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HugePages {
    /// Explicit huge pages (MAP_HUGETLB) if reserved, else transparent huge pages, else none.
    #[default]
    Try,
    /// Explicit huge pages or fail.
    On,
    /// Normal pages only.
    Off,
}

impl HugePages {
    /// The knob's word for the setting (`try`, `on`, `off`).
    pub fn name(self) -> &'static str {
        match self {
            HugePages::Try => "try",
            HugePages::On => "on",
            HugePages::Off => "off",
        }
    }
}

/// Which kind of pages back the arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HugePageUse {
    /// Explicit huge pages (MAP_HUGETLB).
    Explicit,
    /// Transparent huge pages requested with madvise (the kernel may still split them).
    Transparent,
    /// Normal 4 KiB pages.
    None,
}

impl HugePageUse {
    /// How reports name this kind of pages.
    pub fn name(self) -> &'static str {
        match self {
            HugePageUse::Explicit => "explicit (MAP_HUGETLB)",
            HugePageUse::Transparent => "transparent (madvise)",
            HugePageUse::None => "none",
        }
    }
}

/// The page memory of all buffers: one mapping, one frame of `page_size` bytes per buffer.
pub struct PageArena {
    base: NonNull<u8>,
    map_len: usize,
    page_size: usize,
    nbuffers: usize,
    huge: HugePageUse,
    /// With transparent huge pages (and not under shuttle): the thread that takes their
    /// first-touch faults ahead of use.
    prefault: Option<Prefault>,
}

// SAFETY: the arena is plain memory owned by this struct; it is freed only in Drop. Access
// to the bytes is synchronized by the buffer protocol (content locks, I/O ownership), not by
// the arena, which only computes addresses.
unsafe impl Send for PageArena {}
// SAFETY: as above; `&PageArena` exposes only address arithmetic and metadata.
unsafe impl Sync for PageArena {}

impl std::fmt::Debug for PageArena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PageArena({} x {} bytes, huge pages: {})",
            self.nbuffers,
            self.page_size,
            self.huge.name()
        )
    }
}

/// `mmap`'s flag for explicit huge pages: Linux's `MAP_HUGETLB`; none elsewhere (there
/// `huge_pages = on` is refused and `try` maps normal pages).
#[cfg(target_os = "linux")]
const MAP_HUGE: Option<libc::c_int> = Some(libc::MAP_HUGETLB);
#[cfg(not(target_os = "linux"))]
const MAP_HUGE: Option<libc::c_int> = None;

/// Asks for transparent huge pages over a mapped range (Linux's `MADV_HUGEPAGE`); false
/// where the kernel refused or has no such advice.
fn advise_huge(addr: usize, len: usize) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: [addr, addr + len) is mapped by the caller; madvise only sets a hint.
        unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_HUGEPAGE) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (addr, len);
        false
    }
}

fn thp_enabled() -> bool {
    match std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled") {
        Ok(s) => !s.contains("[never]"),
        Err(_) => false,
    }
}

fn mmap_anon(len: usize, extra_flags: libc::c_int) -> Option<NonNull<u8>> {
    // SAFETY: an anonymous private mapping with no address hint; the kernel chooses the
    // address and the result is checked for MAP_FAILED before use.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra_flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        None
    } else {
        NonNull::new(p.cast())
    }
}

impl PageArena {
    /// Maps `nbuffers` frames of `page_size` bytes with huge pages as `huge` asks. Fails if
    /// the size overflows, if `On` gets no explicit huge pages, or if the mapping fails.
    pub fn new(nbuffers: usize, page_size: usize, huge: HugePages) -> io::Result<Self> {
        let len = nbuffers
            .checked_mul(page_size)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "pool size overflows"))?;
        let rounded = len.div_ceil(HUGE_PAGE_SIZE) * HUGE_PAGE_SIZE;
        if huge != HugePages::Off {
            if let Some(base) = MAP_HUGE.and_then(|flag| mmap_anon(rounded, flag)) {
                return Ok(Self {
                    base,
                    map_len: rounded,
                    page_size,
                    nbuffers,
                    huge: HugePageUse::Explicit,
                    prefault: None,
                });
            }
            if huge == HugePages::On {
                return Err(io::Error::new(
                    io::ErrorKind::OutOfMemory,
                    format!(
                        "huge_pages=on but {} of explicit huge pages could not be mapped \
                         (reserve them in vm.nr_hugepages, or set huge_pages=try)",
                        crate::options::format_size(rounded as u64)
                    ),
                ));
            }
        }
        if huge == HugePages::Try && thp_enabled() {
            // Over-map by one huge page so the used range can start on a 2 MiB boundary,
            // which is what lets the kernel back it with transparent huge pages.
            let map_len = rounded + HUGE_PAGE_SIZE;
            let raw = mmap_anon(map_len, 0).ok_or_else(io::Error::last_os_error)?;
            let addr = raw.as_ptr() as usize;
            let aligned = addr.next_multiple_of(HUGE_PAGE_SIZE);
            let head = aligned - addr;
            // SAFETY: [raw, raw + map_len) is our mapping; trimming the unaligned head and
            // the unused tail returns parts of it to the kernel, and nothing points there.
            unsafe {
                if head > 0 {
                    libc::munmap(raw.as_ptr().cast(), head);
                }
                let tail = map_len - head - rounded;
                if tail > 0 {
                    libc::munmap((aligned + rounded) as *mut libc::c_void, tail);
                }
            }
            let advised = advise_huge(aligned, rounded);
            let base = NonNull::new(aligned as *mut u8).expect("mapped address is non-null");
            let huge = if advised {
                HugePageUse::Transparent
            } else {
                HugePageUse::None
            };
            let prefault = if huge == HugePageUse::Transparent {
                Prefault::start(aligned, rounded)
            } else {
                None
            };
            return Ok(Self {
                base,
                map_len: rounded,
                page_size,
                nbuffers,
                huge,
                prefault,
            });
        }
        let base = mmap_anon(rounded, 0).ok_or_else(io::Error::last_os_error)?;
        Ok(Self {
            base,
            map_len: rounded,
            page_size,
            nbuffers,
            huge: HugePageUse::None,
            prefault: None,
        })
    }

    /// Notes that an allocation hands out frame `id` of the first `active` frames (the
    /// pool's size in use): the prefault thread (with transparent huge pages) is asked to
    /// populate up to 16 MiB past it, never past the active frames (a pool that may grow
    /// keeps the rest untouched). One relaxed load when it is already that far.
    #[inline]
    pub fn handing_out(&self, id: u32, active: usize) {
        if let Some(p) = &self.prefault {
            let ahead = (id as usize + 1) * self.page_size + PREFAULT_AHEAD;
            p.want(ahead.min(active.min(self.nbuffers) * self.page_size));
        }
    }

    /// Bytes from the start the prefault thread has populated (None without one: no
    /// transparent huge pages).
    pub fn prefaulted_bytes(&self) -> Option<usize> {
        self.prefault.as_ref().map(Prefault::done)
    }

    /// The bytes mapped for the frames (the pages rounded up, plus alignment slack with
    /// explicit huge pages).
    pub fn mapped_bytes(&self) -> usize {
        self.map_len
    }

    /// Which kind of pages back the arena.
    pub fn huge_pages(&self) -> HugePageUse {
        self.huge
    }

    /// The size of one frame (the page size), in bytes.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Start of frame `id`. Panics if there is no such frame (computing a pointer past
    /// the mapping is undefined behaviour even before it is used).
    #[inline]
    pub fn frame(&self, id: u32) -> *mut u8 {
        assert!(
            (id as usize) < self.nbuffers,
            "frame {id} of an arena of {} frames",
            self.nbuffers
        );
        // SAFETY: id < nbuffers, checked above.
        unsafe { self.frame_unchecked(id) }
    }

    /// [`Self::frame`] without the bounds check, for the pool's page access (every buffer
    /// id it holds is below the number of frames it made the arena with).
    ///
    /// # Safety
    /// `id` is below the arena's number of frames.
    #[inline]
    pub(crate) unsafe fn frame_unchecked(&self, id: u32) -> *mut u8 {
        debug_assert!((id as usize) < self.nbuffers);
        // SAFETY: id < nbuffers (the caller's contract), so the offset stays inside the
        // mapping.
        unsafe { self.base.as_ptr().add(id as usize * self.page_size) }
    }

    /// Gives the memory of frames `from..to` back to the kernel (a shrinking pool's
    /// retired buffers, `resize.rs`); the range reads as zeros if touched again. Only whole
    /// pages of the backing kind are released (2 MiB ones with explicit huge pages); a
    /// failure leaves the memory in place, which costs memory, not correctness, so it is
    /// not reported.
    pub fn release(&self, from: u32, to: u32) {
        let to = (to as usize).min(self.nbuffers);
        let from = (from as usize).min(to);
        let grain = match self.huge {
            HugePageUse::Explicit => HUGE_PAGE_SIZE,
            _ => 4096,
        };
        let start = (from * self.page_size).next_multiple_of(grain);
        let end = (to * self.page_size) / grain * grain;
        if end <= start {
            return;
        }
        // SAFETY: [start, end) lies inside the mapping (to <= nbuffers); the caller owns
        // the frames (retired buffers nobody reads or writes), and MADV_DONTNEED on a
        // private anonymous mapping only drops their contents.
        unsafe {
            libc::madvise(
                self.base.as_ptr().add(start).cast(),
                end - start,
                libc::MADV_DONTNEED,
            );
        }
    }

    /// Start of the whole arena (for the raw-memory baseline of `experiment pool`).
    pub fn base(&self) -> *const u8 {
        self.base.as_ptr()
    }
}

impl Drop for PageArena {
    fn drop(&mut self) {
        // The prefault thread works on the mapping: stop and join it first.
        drop(self.prefault.take());
        // SAFETY: unmaps exactly the range mapped in `new`; no frame pointer outlives the
        // arena because the pool owns it and drops it last.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.map_len);
        }
    }
}

/// The prefault thread's handle: what it is asked for, what it has done, and a stop.
struct Prefault {
    shared: std::sync::Arc<PrefaultShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct PrefaultShared {
    /// Bytes from the arena's start the thread is asked to populate.
    wanted: std::sync::atomic::AtomicUsize,
    /// Bytes it has populated (whole huge pages, or the arena's end).
    done: std::sync::atomic::AtomicUsize,
    stop: std::sync::atomic::AtomicBool,
}

impl Prefault {
    /// Starts the thread over the `len` bytes at `addr` (mapped, advised huge); None where
    /// no thread can be spawned, under shuttle, or off Linux.
    fn start(addr: usize, len: usize) -> Option<Prefault> {
        if cfg!(any(shuttle, not(target_os = "linux"))) {
            return None;
        }
        let shared = std::sync::Arc::new(PrefaultShared {
            wanted: std::sync::atomic::AtomicUsize::new(0),
            done: std::sync::atomic::AtomicUsize::new(0),
            stop: std::sync::atomic::AtomicBool::new(false),
        });
        let s = std::sync::Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("bufpool-prefault".into())
            .spawn(move || prefault_loop(&s, addr, len))
            .ok()?;
        Some(Prefault {
            shared,
            thread: Some(thread),
        })
    }

    /// Asks for the first `bytes` populated; wakes the thread if it is behind.
    #[inline]
    fn want(&self, bytes: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        if bytes <= self.shared.wanted.load(Relaxed) {
            return;
        }
        self.shared.wanted.fetch_max(bytes, Relaxed);
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }

    fn done(&self) -> usize {
        self.shared.done.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl Drop for Prefault {
    fn drop(&mut self) {
        self.shared
            .stop
            .store(true, std::sync::atomic::Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// The prefault thread: populates `[done, wanted)` of the `len` bytes at `addr` a huge
/// page at a time, then parks until asked for more; returns at the end of the arena, on a
/// stop, or when the kernel refuses the advice.
fn prefault_loop(s: &PrefaultShared, addr: usize, len: usize) {
    use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
    loop {
        if s.stop.load(Acquire) {
            return;
        }
        let done = s.done.load(Relaxed);
        if done >= len {
            return;
        }
        if done >= s.wanted.load(Relaxed).min(len) {
            // Parked until `want` or Drop unparks it (an unpark that comes first leaves
            // its token, so none is missed; a spurious wake-up only loops).
            std::thread::park();
            continue;
        }
        let step = HUGE_PAGE_SIZE.min(len - done);
        if !populate_write(addr + done, step) {
            return;
        }
        s.done.store(done + step, Release);
    }
}

/// Faults `[addr, addr + len)` in writable without writing to it (Linux 5.14's
/// `MADV_POPULATE_WRITE`); false where the kernel refuses.
fn populate_write(addr: usize, len: usize) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: the range lies inside the arena's mapping, which outlives this thread
        // (the arena joins it before unmapping); the advice only populates page tables and
        // allocates zeroed pages where none are, it never changes bytes already there.
        unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (addr, len);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::IO_ALIGN;

    /// Proves: released frames give their memory back and read as zeros afterwards, and
    /// the frames beside them keep their bytes.
    #[test]
    fn released_frames_read_as_zeros() {
        let a = PageArena::new(8, 8192, HugePages::Off).unwrap();
        for id in 0..8u32 {
            // SAFETY: frames of this test's own arena, no other reference to them.
            unsafe { std::ptr::write_bytes(a.frame(id), 0xAB, 8192) };
        }
        a.release(4, 8);
        // SAFETY: as above.
        let (kept, dropped) = unsafe { (*a.frame(3).add(8191), *a.frame(4)) };
        assert_eq!((kept, dropped), (0xAB, 0));
    }

    #[test]
    fn frames_are_aligned_and_disjoint() {
        for huge in [HugePages::Try, HugePages::Off] {
            let a = PageArena::new(64, 8192, huge).unwrap();
            assert_eq!(a.frame(0) as usize % IO_ALIGN, 0);
            assert_eq!(a.frame(1) as usize - a.frame(0) as usize, 8192);
            if huge == HugePages::Off {
                assert_eq!(a.huge_pages(), HugePageUse::None);
            }
        }
    }

    /// Proves: asking for a frame past the arena panics, in release builds too (it was a
    /// debug assertion in front of a pointer computation that is undefined behaviour out
    /// of bounds, reachable from safe code).
    #[test]
    #[should_panic(expected = "frame 64 of an arena of 64 frames")]
    fn a_frame_past_the_arena_is_refused() {
        let a = PageArena::new(64, 8192, HugePages::Off).unwrap();
        let _ = a.frame(64);
    }

    /// Proves: with transparent huge pages the prefault thread populates ahead of the
    /// frames handed out, never past what was asked nor past the active frames; frames
    /// it populated keep what was written into them; dropping the arena joins the thread.
    #[test]
    fn the_prefault_thread_runs_ahead_of_use_and_no_further() {
        let frames = 4096; // 32 MiB of 8 kB frames
        let a = PageArena::new(frames, 8192, HugePages::Try).unwrap();
        let Some(_) = a.prefaulted_bytes() else {
            // No transparent huge pages here (or explicit ones were granted): nothing to
            // prefault, and the arena says so.
            assert_ne!(a.huge_pages(), HugePageUse::Transparent);
            return;
        };
        let settle = || std::thread::sleep(std::time::Duration::from_millis(50));
        let wait_for = |bytes: usize| {
            let t = std::time::Instant::now();
            while a.prefaulted_bytes().unwrap() < bytes {
                assert!(
                    t.elapsed().as_secs() < 20,
                    "stuck at {:?}",
                    a.prefaulted_bytes()
                );
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        };
        settle();
        assert_eq!(
            a.prefaulted_bytes(),
            Some(0),
            "nothing handed out, nothing populated"
        );
        // A pool using 1,024 of the frames (8 MiB): the thread stops at its end.
        a.handing_out(0, 1024);
        wait_for(8 << 20);
        settle();
        assert_eq!(
            a.prefaulted_bytes(),
            Some(8 << 20),
            "ran past the active frames"
        );
        // SAFETY: frame 0 of this test's own arena, no other reference to it.
        unsafe { std::ptr::write_bytes(a.frame(0), 0xCD, 8192) };
        // Grown to all 4,096: frame 0 handed out again asks for 16 MiB and a page.
        a.handing_out(0, frames);
        wait_for(18 << 20);
        settle();
        assert_eq!(
            a.prefaulted_bytes(),
            Some(18 << 20),
            "ran past what was asked"
        );
        a.handing_out(2047, frames); // the end of the first 16 MiB: the rest is wanted
        wait_for(32 << 20);
        // SAFETY: as above.
        assert_eq!(unsafe { *a.frame(0).add(8191) }, 0xCD);
        drop(a);
    }
}
