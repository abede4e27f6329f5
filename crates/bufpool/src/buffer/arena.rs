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

use std::io;
use std::ptr::NonNull;

/// Size of a huge page on x86_64 and aarch64 with 4 KiB base pages.
const HUGE_PAGE_SIZE: usize = 2 << 20;

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
            return Ok(Self {
                base,
                map_len: rounded,
                page_size,
                nbuffers,
                huge,
            });
        }
        let base = mmap_anon(rounded, 0).ok_or_else(io::Error::last_os_error)?;
        Ok(Self {
            base,
            map_len: rounded,
            page_size,
            nbuffers,
            huge: HugePageUse::None,
        })
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
        // SAFETY: unmaps exactly the range mapped in `new`; no frame pointer outlives the
        // arena because the pool owns it and drops it last.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.map_len);
        }
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
}
