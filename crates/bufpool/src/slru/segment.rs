//! The SLRU's files: segment files of `PAGES_PER_SEGMENT` pages, the doublewrite file and
//! the latched failure. No page cache here: `bank.rs` and `mod.rs` hand in page images.
//!
//! Owns: the open segment files (`<dir>/<segno as 4+ hex digits>`), the doublewrite file
//! `<dir>/doublewrite`, the first latched failure, and the counters of what reaches disk
//! (pages written, rounds, pages repaired).
//! Invariants: no page is written in place unless its image is durable in the doublewrite
//! file (files made `not_durable` write in place only, and never fsync), and the doublewrite file is not overwritten before the previous round's pages are
//! durable in place (rounds are serialized by the round lock); once a failure is latched,
//! every later round fails with it.
//! Locks, in order: `round` (one doublewrite round at a time; held across its I/O), then
//! `files` (the map of open segments; never held across I/O), then `latched`. None of them
//! is taken while a bank lock is held: banks copy their pages out first.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{SlruError, PAGES_PER_SEGMENT, TRAILER_SIZE};
use crate::sync::{Arc, AtomicU64, Mutex, Ordering};
use crate::vfs::{IoAt, IoError, OpenOptions, Vfs, VfsFile};

/// The doublewrite file, in the SLRU's directory (not a hexadecimal segment name).
pub const DOUBLEWRITE_FILE: &str = "doublewrite";

/// Doublewrite header (one page): magic, page count, done flag, then per page its number
/// (u64) and the CRC32C of its image (u32, then 4 zero bytes); the last 4 bytes are the
/// CRC32C of the SLRU's name and everything before them. The images follow, one per page.
const DW_MAGIC: &[u8; 8] = b"BPSLRUDW";
pub(super) const DW_FIXED: usize = 16;
pub(super) const DW_ENTRY: usize = 16;

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> SlruError + 'a {
    move |source| SlruError::Io(IoError::new(op, path, source))
}

/// Counters of the file layer (summed into `SlruStats`).
#[derive(Debug, Default)]
pub(super) struct FileCounters {
    pub writes: AtomicU64,
    pub rounds: AtomicU64,
    pub repaired: AtomicU64,
    pub exists: AtomicU64,
    pub truncates: AtomicU64,
}

/// The files of one SLRU.
pub(super) struct Segments {
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    name: String,
    page_size: usize,
    /// Held across one doublewrite round; holds the doublewrite file once opened.
    round: Mutex<Option<Arc<dyn VfsFile>>>,
    files: Mutex<BTreeMap<u64, Arc<dyn VfsFile>>>,
    /// The first failed fsync or in-place write; once set, every round and flush reports it.
    latched: Mutex<Option<IoError>>,
    /// Pages are written through doublewrite rounds and fsynced (true), or in place only,
    /// without a copy or an fsync (false: an SLRU whose pages the owner discards at open,
    /// the subtransaction log).
    durable: bool,
    pub counters: FileCounters,
}

impl Segments {
    /// The files of SLRU `name` in `dir` (created); nothing is read yet.
    pub fn new(
        vfs: Arc<dyn Vfs>,
        dir: PathBuf,
        name: &str,
        page_size: usize,
    ) -> Result<Segments, SlruError> {
        vfs.create_dir_all(&dir).map_err(io("creating", &dir))?;
        Ok(Segments {
            vfs,
            dir,
            name: name.to_string(),
            page_size,
            round: Mutex::new(None),
            files: Mutex::new(BTreeMap::new()),
            latched: Mutex::new(None),
            durable: true,
            counters: FileCounters::default(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn segment_path(&self, segno: u64) -> PathBuf {
        self.dir.join(format!("{segno:04X}"))
    }

    pub fn doublewrite_path(&self) -> PathBuf {
        self.dir.join(DOUBLEWRITE_FILE)
    }

    /// The checksum stored in a page's trailer: CRC32C of the SLRU's name, the page
    /// number and the page body.
    pub fn checksum(&self, pageno: u64, page: &[u8]) -> u32 {
        let crc = crc32c::crc32c(self.name.as_bytes());
        let crc = crc32c::crc32c_append(crc, &pageno.to_le_bytes());
        crc32c::crc32c_append(crc, &page[..self.page_size - TRAILER_SIZE])
    }

    /// Pages one doublewrite round can hold (one header page lists them).
    pub fn max_round(&self) -> usize {
        (self.page_size - DW_FIXED - 4) / DW_ENTRY
    }

    /// The latched failure as the error to report now, if there is one.
    pub fn check_latched(&self) -> Result<(), SlruError> {
        match &*self.latched.lock() {
            Some(first) => Err(SlruError::Latched(first.duplicate())),
            None => Ok(()),
        }
    }

    /// Latches a failure and returns the error to report now.
    fn latch(&self, err: IoError) -> SlruError {
        let mut l = self.latched.lock();
        if l.is_none() {
            *l = Some(err.duplicate());
        }
        SlruError::Fsync(err)
    }

    fn dw_header(&self, entries: &[(u64, u32)], done: bool) -> Vec<u8> {
        let ps = self.page_size;
        let mut h = vec![0u8; ps];
        h[..8].copy_from_slice(DW_MAGIC);
        h[8..12].copy_from_slice(&(entries.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&u32::from(done).to_le_bytes());
        for (i, (pageno, crc)) in entries.iter().enumerate() {
            let at = DW_FIXED + i * DW_ENTRY;
            h[at..at + 8].copy_from_slice(&pageno.to_le_bytes());
            h[at + 8..at + 12].copy_from_slice(&crc.to_le_bytes());
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(self.name.as_bytes()), &h[..ps - 4]);
        h[ps - 4..].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// The entries of a valid header of a round not marked done; None otherwise.
    fn dw_parse(&self, h: &[u8]) -> Option<Vec<(u64, u32)>> {
        let ps = self.page_size;
        let u32_at = |at: usize| u32::from_le_bytes(h[at..at + 4].try_into().expect("4"));
        let crc = crc32c::crc32c_append(crc32c::crc32c(self.name.as_bytes()), &h[..ps - 4]);
        if &h[..8] != DW_MAGIC || u32_at(ps - 4) != crc || u32_at(12) != 0 {
            return None;
        }
        let count = u32_at(8) as usize;
        if count > self.max_round() {
            return None;
        }
        Some(
            (0..count)
                .map(|i| {
                    let at = DW_FIXED + i * DW_ENTRY;
                    let pageno = u64::from_le_bytes(h[at..at + 8].try_into().expect("8"));
                    (pageno, u32_at(at + 8))
                })
                .collect(),
        )
    }

    /// The open segment `segno`; with `create`, a missing one is created and the
    /// directory fsynced (before anything is written to it). Takes `files` briefly (not
    /// across the existence check or the open: two threads may open the same file; the
    /// first one in the map wins).
    fn file(&self, segno: u64, create: bool) -> Result<Option<Arc<dyn VfsFile>>, IoError> {
        if let Some(f) = self.files.lock().get(&segno) {
            return Ok(Some(f.clone()));
        }
        let path = self.segment_path(segno);
        let exists = self
            .vfs
            .exists(&path)
            .map_err(IoError::with("checking", &path))?;
        let f = if !exists {
            if !create {
                return Ok(None);
            }
            let f = self
                .vfs
                .open(&path, OpenOptions::create())
                .map_err(IoError::with("creating", &path))?;
            self.vfs
                .sync_dir(&self.dir)
                .map_err(IoError::with("fsync of directory", &self.dir))?;
            f
        } else {
            self.vfs
                .open(&path, OpenOptions::read_write())
                .map_err(IoError::with("opening", &path))?
        };
        Ok(Some(self.files.lock().entry(segno).or_insert(f).clone()))
    }

    /// Whether page `pageno` is on disk (PostgreSQL's SimpleLruDoesPhysicalPageExist).
    pub fn page_exists(&self, pageno: u64) -> Result<bool, SlruError> {
        self.counters.exists.fetch_add(1, Ordering::Relaxed);
        let Some(f) = self.file(pageno / PAGES_PER_SEGMENT, false)? else {
            return Ok(false);
        };
        let len = f.len().map_err(io("measuring", f.path()))?;
        Ok(len >= (pageno % PAGES_PER_SEGMENT + 1) * self.page_size as u64)
    }

    /// Reads page `pageno` into `page` (all zeros if it is not on disk) and verifies its
    /// checksum. Returns whether a read reached a file. Takes no lock across the read.
    pub fn read_page(&self, pageno: u64, page: &mut [u8]) -> Result<bool, SlruError> {
        let ps = self.page_size;
        page.fill(0);
        let Some(f) = self.file(pageno / PAGES_PER_SEGMENT, false)? else {
            return Ok(false);
        };
        let off = (pageno % PAGES_PER_SEGMENT) * ps as u64;
        let n = f.read_at(page, off).map_err(io("reading", f.path()))?;
        if n != 0 && n != ps {
            return Err(SlruError::Short {
                pageno,
                path: f.path().to_path_buf(),
                got: n,
                want: ps,
            });
        }
        let stored = u32::from_le_bytes(
            page[ps - TRAILER_SIZE..ps - TRAILER_SIZE + 4]
                .try_into()
                .expect("4"),
        );
        let computed = self.checksum(pageno, page);
        if stored != computed && page.iter().any(|&b| b != 0) {
            return Err(SlruError::Corrupt {
                pageno,
                path: f.path().to_path_buf(),
                stored,
                computed,
            });
        }
        Ok(true)
    }

    /// Makes every later write go in place only: no doublewrite copy, no fsync, nothing
    /// latched (for an SLRU whose owner discards its pages when it opens it).
    pub fn not_durable(&mut self) {
        self.durable = false;
    }

    /// Writes `pages` (page number, image with room for the trailer) durably in
    /// doublewrite rounds (see the module doc of `slru`), or in place only if the files
    /// are not durable. The caller ran the write barrier. Takes `round` for each round.
    pub fn write_pages(&self, pages: &mut [(u64, Vec<u8>)]) -> Result<(), SlruError> {
        self.check_latched()?;
        if !self.durable {
            return self.write_scratch(pages);
        }
        for round in pages.chunks_mut(self.max_round()) {
            self.write_round(round)?;
        }
        Ok(())
    }

    /// Seals `pages` with their checksums and writes them in place, without a copy or an
    /// fsync. A failure is reported, not latched: the caller keeps the pages dirty, and
    /// nothing durable depends on them.
    fn write_scratch(&self, pages: &mut [(u64, Vec<u8>)]) -> Result<(), SlruError> {
        for (pageno, page) in pages.iter_mut() {
            self.seal(*pageno, page);
            self.write_in_place(&[*pageno], page, false)?;
        }
        self.counters
            .writes
            .fetch_add(pages.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Stores the checksum of `page` in its trailer (the rest of the trailer zero).
    fn seal(&self, pageno: u64, page: &mut [u8]) {
        let ps = self.page_size;
        let crc = self.checksum(pageno, page);
        page[ps - TRAILER_SIZE..ps - TRAILER_SIZE + 4].copy_from_slice(&crc.to_le_bytes());
        page[ps - 4..].fill(0);
    }

    /// One doublewrite round. Takes and releases `round`.
    fn write_round(&self, pages: &mut [(u64, Vec<u8>)]) -> Result<(), SlruError> {
        let ps = self.page_size;
        let mut dwf = self.round.lock();
        self.check_latched()?;
        // Seal every page with its checksum, and copy the round into one buffer.
        let mut buf = vec![0u8; (pages.len() + 1) * ps];
        let mut entries = Vec::with_capacity(pages.len());
        for (i, (pageno, page)) in pages.iter_mut().enumerate() {
            self.seal(*pageno, page);
            buf[(i + 1) * ps..(i + 2) * ps].copy_from_slice(page);
            entries.push((*pageno, crc32c::crc32c(page)));
        }
        buf[..ps].copy_from_slice(&self.dw_header(&entries, false));
        // (2) The doublewrite copy. A failed write leaves the pages in place untouched (and
        // dirty in their banks): not latched. A failed fsync is.
        let dw = match &*dwf {
            Some(f) => f.clone(),
            None => {
                let f = self.open_doublewrite()?;
                *dwf = Some(f.clone());
                f
            }
        };
        let n = dw
            .write_at(&buf, 0)
            .map_err(|e| IoError::at_offset("writing", dw.path(), 0, e))?;
        if n != buf.len() {
            return Err(IoError::short("writing", dw.path(), IoAt::Offset(0), n, buf.len()).into());
        }
        if let Err(e) = dw.sync_data() {
            return Err(self.latch(IoError::new("fsync of", dw.path(), e)));
        }
        // (3) In place. From here on a failure is latched: the pages may be half written,
        // and only a reopen (repairing from the copy) may write them again.
        let pagenos: Vec<u64> = pages.iter().map(|p| p.0).collect();
        if let Err(e) = self.write_in_place(&pagenos, &buf[ps..], true) {
            return Err(self.latch(e));
        }
        self.counters
            .writes
            .fetch_add(pages.len() as u64, Ordering::Relaxed);
        self.counters.rounds.fetch_add(1, Ordering::Relaxed);
        // (4) Done: the pages are durable in place, the copy is no longer needed. If this
        // write is lost, a reopen rewrites the same images: harmless.
        let header = self.dw_header(&entries, true);
        let n = dw
            .write_at(&header, 0)
            .map_err(|e| IoError::at_offset("writing", dw.path(), 0, e))?;
        if n != ps {
            return Err(IoError::short("writing", dw.path(), IoAt::Offset(0), n, ps).into());
        }
        Ok(())
    }

    /// The doublewrite file, created (and the directory fsynced: a failure is latched).
    /// Called with `round` held.
    fn open_doublewrite(&self) -> Result<Arc<dyn VfsFile>, SlruError> {
        let path = self.doublewrite_path();
        let existed = self.vfs.exists(&path).map_err(io("checking", &path))?;
        let f = self
            .vfs
            .open(&path, OpenOptions::create())
            .map_err(io("creating", &path))?;
        if !existed {
            if let Err(e) = self.vfs.sync_dir(&self.dir) {
                return Err(self.latch(IoError::new("fsync of directory", &self.dir, e)));
            }
        }
        Ok(f)
    }

    /// Writes `images` (one page each) in place as pages `pagenos` and, with `sync`,
    /// fsyncs their segments.
    fn write_in_place(&self, pagenos: &[u64], images: &[u8], sync: bool) -> Result<(), IoError> {
        let ps = self.page_size;
        let mut segments = BTreeSet::new();
        for (&pageno, image) in pagenos.iter().zip(images.chunks(ps)) {
            let segno = pageno / PAGES_PER_SEGMENT;
            let f = self.file(segno, true)?.expect("created");
            let off = (pageno % PAGES_PER_SEGMENT) * ps as u64;
            let n = f
                .write_at(image, off)
                .map_err(|e| IoError::at_offset("writing", f.path(), off, e))?;
            if n != ps {
                return Err(IoError::short(
                    "writing",
                    f.path(),
                    IoAt::Offset(off),
                    n,
                    ps,
                ));
            }
            segments.insert(segno);
        }
        for segno in segments.into_iter().filter(|_| sync) {
            let f = self.file(segno, false)?.expect("written above");
            f.sync_data().map_err(IoError::with("fsync of", f.path()))?;
        }
        Ok(())
    }

    /// Rewrites in place the pages of an interrupted doublewrite round (valid, complete,
    /// not marked done), fsyncs them and marks the round done. Returns pages repaired.
    /// Called once, by `open`, before any page is read.
    pub fn repair(&self) -> Result<usize, SlruError> {
        let path = self.doublewrite_path();
        if !self.vfs.exists(&path).map_err(io("checking", &path))? {
            return Ok(0);
        }
        let ps = self.page_size;
        let mut dwf = self.round.lock();
        let dw = self
            .vfs
            .open(&path, OpenOptions::read_write())
            .map_err(io("opening", &path))?;
        *dwf = Some(dw.clone());
        let mut header = vec![0u8; ps];
        let n = dw.read_at(&mut header, 0).map_err(io("reading", &path))?;
        let Some(entries) = (n == ps).then(|| self.dw_parse(&header)).flatten() else {
            return Ok(0);
        };
        let mut images = vec![0u8; entries.len() * ps];
        let n = dw
            .read_at(&mut images, ps as u64)
            .map_err(io("reading", &path))?;
        let complete = n == images.len()
            && entries
                .iter()
                .zip(images.chunks(ps))
                .all(|(&(_, crc), image)| crc32c::crc32c(image) == crc);
        if !complete {
            // The copy was torn: its round never reached the pages in place.
            return Ok(0);
        }
        let pagenos: Vec<u64> = entries.iter().map(|e| e.0).collect();
        self.write_in_place(&pagenos, &images, true)?;
        let header = self.dw_header(&entries, true);
        let n = dw
            .write_at(&header, 0)
            .map_err(|e| IoError::at_offset("writing", &path, 0, e))?;
        if n != ps {
            return Err(IoError::short("writing", &path, IoAt::Offset(0), n, ps).into());
        }
        self.counters
            .repaired
            .fetch_add(entries.len() as u64, Ordering::Relaxed);
        Ok(entries.len())
    }

    /// Removes every segment file before `keep` (the banks dropped their pages first).
    /// Returns segments removed. A failed directory fsync is latched.
    pub fn remove_before(&self, keep: u64) -> Result<usize, SlruError> {
        self.counters.truncates.fetch_add(1, Ordering::Relaxed);
        let names = self
            .vfs
            .list_dir(&self.dir)
            .map_err(io("listing", &self.dir))?;
        let mut removed = 0;
        for n in names {
            // Only names the SLRU writes (4 or more hex digits): from_str_radix alone would
            // also take "+1" for segment 1 and delete a stranger's file.
            let ours = n.len() >= 4 && n.bytes().all(|b| b.is_ascii_hexdigit());
            if let Some(segno) = ours.then(|| u64::from_str_radix(&n, 16).ok()).flatten() {
                if segno < keep {
                    self.files.lock().remove(&segno);
                    let p = self.dir.join(&n);
                    self.vfs.unlink(&p).map_err(io("removing", &p))?;
                    removed += 1;
                }
            }
        }
        if removed > 0 {
            if let Err(e) = self.vfs.sync_dir(&self.dir) {
                return Err(self.latch(IoError::new("fsync of directory", &self.dir, e)));
            }
        }
        Ok(removed)
    }
}
