//! Autoprewarm (pg_prewarm's autoprewarm worker): the pool's block list is saved every
//! `autoprewarm_interval` and at shutdown, and read back in the background after the
//! next open, so a restarted engine does not start from a cold pool.
//!
//! Owns: the block-list file `autoprewarm.blocks` in the data directory (its format,
//! [`encode`] / [`decode`]), [`dump`] (autoprewarm_dump_now), [`load`] (the reload), the
//! worker thread ([`Worker`]) and its counters ([`PrewarmStats`]).
//!
//! The file: a header line `bufpool autoprewarm 1 blocks=N saved_at=UNIX crc32c=X`, then
//! one line `tablespace,relation,fork,block` per block, sorted. The checksum covers every
//! line after the header; a file whose checksum, count or lines do not match is reported
//! corrupt and not used (the pool simply starts cold). It is replaced atomically (written
//! beside, fsynced, renamed, directory fsynced), so a crash during a save leaves the old
//! list or the new one.
//!
//! The reload, as PostgreSQL 18's: blocks sorted by relation, fork and block, read per fork
//! through a read stream (adjacent blocks combined into one vectored read, reads kept in
//! flight ahead); blocks of a fork that no longer exists, or past its end now, are
//! skipped, and so are blocks whose fork a truncation or a drop is changing at that moment
//! (the pool's sizes hold, [`BufferPool::try_hold_sizes`], taken per 1,024 blocks: a page
//! read between the drop of a fork's buffers and the cut of its file would stay in the
//! pool past the new end); a free-space map page that fails verification is left out and counted (a crash
//! can tear one, the map is not WAL-logged, and the map reads it back as zeros itself),
//! while a failing page of any other fork stops the reload with its error; it stops when
//! the pool has no free buffer left (it never evicts a page someone
//! loaded since the open), or when the engine shuts down. A reload cut short by a shutdown
//! does not save at that shutdown, so the next open still has the whole list.
//!
//! Threads and locks: one worker thread per engine; it shares only a stop flag and
//! counters (mutex + condvar for the nap) with the engine. Reads go through the pool's
//! ordinary paths, beside the clients.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::EngineError;
use crate::buffer::{BufferError, BufferPool};
use crate::scan::read_stream::{BlockSource, ReadStream, ReadStreamOptions};
use crate::types::{BufferTag, ForkNumber, RelFileId};
use crate::vfs::{OpenOptions, Vfs};

/// The block list's file name in the data directory.
pub const BLOCKS_FILE: &str = "autoprewarm.blocks";
const MAGIC: &str = "bufpool autoprewarm 1";

/// A saved block list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedBlocks {
    /// When it was saved, seconds since the Unix epoch.
    pub saved_at_unix: u64,
    /// Sorted by relation, fork and block.
    pub blocks: Vec<BufferTag>,
}

/// What the worker has done (`Engine::autoprewarm_stats`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PrewarmStats {
    /// Blocks in the list read at open (0: none saved).
    pub listed: u64,
    /// Blocks the reload put in the pool (or found there).
    pub loaded: u64,
    /// Blocks skipped: their fork is gone or shorter now.
    pub skipped: u64,
    /// Free-space map blocks that failed verification, left out: the map is not
    /// WAL-logged, so a crash can leave a page of it torn, and the map reads such a page
    /// back as zeros itself when it next needs it. (A torn block of any other fork is
    /// corruption: the reload stops with its error.)
    pub invalid: u64,
    /// The reload stopped because the pool had no free buffer left.
    pub stopped_pool_full: bool,
    /// The reload has ended (finished, stopped, or failed).
    pub load_done: bool,
    /// Time from the worker's start to the reload's end, in seconds.
    pub load_seconds: f64,
    /// Saves so far, and the blocks in the last one.
    pub dumps: u64,
    /// Blocks in the last save.
    pub last_dump_blocks: u64,
    /// The last failure (a corrupt list, an I/O error), as text.
    pub last_error: Option<String>,
}

/// The file's text for `blocks` (sorted here).
pub fn encode(blocks: &mut [BufferTag], saved_at_unix: u64) -> Vec<u8> {
    blocks.sort_unstable();
    let mut body = String::with_capacity(blocks.len() * 24);
    for t in blocks.iter() {
        use std::fmt::Write;
        let _ = writeln!(
            body,
            "{},{},{},{}",
            t.rel.tablespace, t.rel.relation, t.fork as u8, t.block
        );
    }
    let head = format!(
        "{MAGIC} blocks={} saved_at={saved_at_unix} crc32c={:08x}\n",
        blocks.len(),
        crc32c::crc32c(body.as_bytes())
    );
    let mut out = head.into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// Parses a block list, checking its header, checksum, count and every line.
pub fn decode(bytes: &[u8], path: &Path) -> Result<SavedBlocks, EngineError> {
    let corrupt = |problem: String| EngineError::PrewarmCorrupt {
        path: path.to_path_buf(),
        problem,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| corrupt(format!("not text: {e}")))?;
    let (head, body) = text
        .split_once('\n')
        .ok_or_else(|| corrupt("no header line".into()))?;
    let field = |name: &str| -> Result<u64, EngineError> {
        let rest = head
            .strip_prefix(MAGIC)
            .ok_or_else(|| corrupt(format!("header {head:?} is not {MAGIC:?}")))?;
        rest.split_whitespace()
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| {
                if name == "crc32c" {
                    u64::from_str_radix(v, 16).ok()
                } else {
                    v.parse().ok()
                }
            })
            .ok_or_else(|| corrupt(format!("header {head:?} has no valid {name}")))
    };
    let (count, saved_at_unix, crc) = (field("blocks")?, field("saved_at")?, field("crc32c")?);
    let actual = u64::from(crc32c::crc32c(body.as_bytes()));
    if actual != crc {
        return Err(corrupt(format!(
            "checksum {actual:08x}, header says {crc:08x}"
        )));
    }
    let blocks = body
        .lines()
        .enumerate()
        .map(|(i, line)| {
            parse_line(line).ok_or_else(|| corrupt(format!("line {}: {line:?}", i + 2)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if blocks.len() as u64 != count {
        return Err(corrupt(format!(
            "{} blocks, header says {count}",
            blocks.len()
        )));
    }
    Ok(SavedBlocks {
        saved_at_unix,
        blocks,
    })
}

fn parse_line(line: &str) -> Option<BufferTag> {
    let mut f = line.split(',').map(|v| v.parse::<u32>().ok());
    let (ts, rel, fork, block) = (f.next()??, f.next()??, f.next()??, f.next()??);
    if f.next().is_some() {
        return None;
    }
    let fork = ForkNumber::ALL.into_iter().find(|k| *k as u32 == fork)?;
    Some(BufferTag::new(RelFileId::new(ts, rel), fork, block))
}

/// The longest line of a block list (four numbers of at most 10 digits, three commas and
/// a newline) and room for the header: a list of `n` blocks takes at most
/// `n * LINE_BYTES_MAX + HEADER_BYTES_MAX` bytes.
const LINE_BYTES_MAX: u64 = 44;
const HEADER_BYTES_MAX: u64 = 256;

/// Reads `dir`'s saved block list; `Ok(None)` if none was saved. A file longer than a list
/// of `max_blocks` can be (the pool's buffers: a list never holds more) is reported
/// corrupt without being read: its length is input, not a size to allocate.
pub fn read_saved(
    vfs: &dyn Vfs,
    dir: &Path,
    max_blocks: u64,
) -> Result<Option<SavedBlocks>, EngineError> {
    let path = dir.join(BLOCKS_FILE);
    if !vfs
        .exists(&path)
        .map_err(|e| EngineError::io("looking for", &path, e))?
    {
        return Ok(None);
    }
    let f = vfs
        .open(&path, OpenOptions::read_only())
        .map_err(|e| EngineError::io("opening", &path, e))?;
    let len = f
        .len()
        .map_err(|e| EngineError::io("reading the size of", &path, e))?;
    let most = max_blocks
        .saturating_mul(LINE_BYTES_MAX)
        .saturating_add(HEADER_BYTES_MAX);
    if len > most {
        return Err(EngineError::PrewarmCorrupt {
            path,
            problem: format!(
                "{len} bytes, more than a list of {max_blocks} blocks (the pool's buffers) \
                 can take ({most})"
            ),
        });
    }
    let mut bytes = vec![0u8; len as usize];
    let mut done = 0;
    while done < bytes.len() {
        match f.read_at(&mut bytes[done..], done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) => return Err(EngineError::io("reading", &path, e)),
        }
    }
    bytes.truncate(done);
    decode(&bytes, &path).map(Some)
}

/// Saves the pool's block list now (autoprewarm_dump_now); returns the blocks saved.
pub fn dump(pool: &BufferPool, vfs: &dyn Vfs, dir: &Path) -> Result<u64, EngineError> {
    let mut blocks: Vec<BufferTag> = pool.buffercache().iter().filter_map(|r| r.tag).collect();
    let n = blocks.len() as u64;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    crate::vfs::write_atomic(vfs, &dir.join(BLOCKS_FILE), &encode(&mut blocks, now))?;
    Ok(n)
}

/// Reads `saved` back into the pool (see the module doc), handing its counters to
/// `progress` after every block. Returns the counters and whether `stop` cut it short.
pub fn load(
    pool: &BufferPool,
    saved: &SavedBlocks,
    opts: &ReadStreamOptions,
    stop: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(&PrewarmStats),
) -> Result<(PrewarmStats, bool), EngineError> {
    let mut blocks = saved.blocks.clone();
    blocks.sort_unstable();
    let mut st = PrewarmStats {
        listed: blocks.len() as u64,
        ..PrewarmStats::default()
    };
    let smgr = pool.smgr();
    let forks = blocks.chunk_by(|a, b| (a.rel, a.fork) == (b.rel, b.fork));
    for group in forks.flat_map(|g| g.chunks(HOLD_BLOCKS)) {
        let (rel, fork) = (group[0].rel, group[0].fork);
        // The fork's size cannot shrink while these blocks are read (a truncation or a
        // drop waits); one running now makes the reload skip them instead of reading
        // pages it is about to cut off (they would stay in the pool past the new end).
        let Some(_sizes) = pool.try_hold_sizes() else {
            st.skipped += group.len() as u64;
            continue;
        };
        let nblocks = if smgr.exists(rel, fork)? {
            pool.nblocks(rel, fork)?
        } else {
            0
        };
        let wanted: Vec<u32> = group
            .iter()
            .map(|t| t.block)
            .filter(|b| *b < nblocks)
            .collect();
        st.skipped += (group.len() - wanted.len()) as u64;
        let mut next = wanted.into_iter();
        let full = std::sync::atomic::AtomicBool::new(false);
        let source = BlockSource::Callback(Box::new(|| {
            if !pool.has_free_buffer() {
                full.store(true, std::sync::atomic::Ordering::Relaxed);
                return None;
            }
            next.next()
        }));
        let mut stream = ReadStream::new(pool, rel, fork, source, None, opts);
        while let Some(b) = stream.next() {
            match b {
                Ok(b) => {
                    drop(b);
                    st.loaded += 1;
                }
                Err(e @ BufferError::Corrupt { .. }) if fork == ForkNumber::FreeSpace => {
                    tracing::warn!("autoprewarm: {e}; left for the free-space map to zero");
                    st.invalid += 1;
                }
                Err(e) => return Err(e.into()),
            }
            progress(&st);
            if stop() {
                return Ok((st, true));
            }
        }
        drop(stream);
        if full.load(std::sync::atomic::Ordering::Relaxed) {
            st.stopped_pool_full = true;
            return Ok((st, false));
        }
    }
    Ok((st, false))
}

/// How many blocks of a fork the reload reads under one hold of the pool's sizes
/// ([`BufferPool::try_hold_sizes`]): a truncation or drop waits at most for these.
const HOLD_BLOCKS: usize = 1024;

/// The reload's read streams: the engine's, with one combined read in flight. A background
/// load must not queue the clients' reads behind megabytes of its own: with the default 16
/// reads of 128 kB in flight on a bandwidth-capped device, each client miss can wait behind
/// about 2 MB, and TPC-B fell to 0-10k tps for the two seconds a 37,000-block reload took
/// (`experiment prewarm`, ssd-sata, 2026-11-29, 120ec54); one in flight still reads
/// sequentially, in whole combined reads.
fn reload_options(engine: ReadStreamOptions) -> ReadStreamOptions {
    ReadStreamOptions {
        io_concurrency: engine.io_concurrency.min(1),
        ..engine
    }
}

/// The autoprewarm worker of one engine: reloads the saved list, then saves every
/// interval; stopped (and, unless its reload was cut short, saving once more) by
/// [`Worker::stop`].
pub struct Worker {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    pool: Arc<BufferPool>,
    vfs: Arc<dyn Vfs>,
    dir: PathBuf,
    interval: Option<Duration>,
    stop: Mutex<bool>,
    wake: Condvar,
    stats: Mutex<PrewarmStats>,
    /// Signalled (under `stats`) when the reload ends.
    load_ended: Condvar,
    /// The reload was cut short: the shutdown must not overwrite the full list.
    cut_short: std::sync::atomic::AtomicBool,
}

impl Worker {
    /// Starts the worker for `pool` in `dir` (`interval` 0: save only at shutdown).
    pub fn start(
        pool: Arc<BufferPool>,
        vfs: Arc<dyn Vfs>,
        dir: &Path,
        interval: Duration,
        opts: ReadStreamOptions,
    ) -> std::io::Result<Worker> {
        let shared = Arc::new(Shared {
            pool,
            vfs,
            dir: dir.to_path_buf(),
            interval: (!interval.is_zero()).then_some(interval),
            stop: Mutex::new(false),
            wake: Condvar::new(),
            stats: Mutex::new(PrewarmStats::default()),
            load_ended: Condvar::new(),
            cut_short: std::sync::atomic::AtomicBool::new(false),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("bufpool-autoprewarm".into())
            .spawn(move || s.run(&reload_options(opts)))?;
        Ok(Worker {
            shared,
            thread: Some(thread),
        })
    }

    /// The worker's counters so far.
    pub fn stats(&self) -> PrewarmStats {
        self.shared.stats.lock().clone()
    }

    /// Waits up to `timeout` for the reload to end; returns the counters then (check
    /// `load_done`).
    pub fn wait_loaded(&self, timeout: Duration) -> PrewarmStats {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.stats.lock();
        while !st.load_done {
            if self
                .shared
                .load_ended
                .wait_until(&mut st, deadline)
                .timed_out()
            {
                break;
            }
        }
        st.clone()
    }

    /// Stops the worker and saves the block list one last time (unless the reload was cut
    /// short). Returns the blocks saved, `None` if it did not save.
    pub fn stop(mut self) -> Result<Option<u64>, EngineError> {
        self.halt();
        if self
            .shared
            .cut_short
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Ok(None);
        }
        self.shared.save().map(Some)
    }

    fn halt(&mut self) {
        *self.shared.stop.lock() = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Worker {
    /// Without `stop` (a crash-like drop): the thread ends, nothing is saved.
    fn drop(&mut self) {
        self.halt();
    }
}

impl Shared {
    fn run(&self, opts: &ReadStreamOptions) {
        // The worker's I/O is a background worker's in pg_stat_io (pg_prewarm's is too).
        crate::stats::set_thread_writer(crate::stats::IoWriter::BackgroundWorker);
        let started = Instant::now();
        let stopping = || *self.stop.lock();
        let buffers = self.pool.nbuffers() as u64;
        let r = read_saved(&*self.vfs, &self.dir, buffers).and_then(|saved| match saved {
            Some(saved) => load(&self.pool, &saved, opts, &stopping, &mut |p| {
                let mut st = self.stats.lock();
                (st.listed, st.loaded, st.skipped) = (p.listed, p.loaded, p.skipped);
                st.invalid = p.invalid;
            }),
            None => Ok((PrewarmStats::default(), false)),
        });
        {
            let mut st = self.stats.lock();
            st.load_done = true;
            st.load_seconds = started.elapsed().as_secs_f64();
            match r {
                Ok((done, cut)) => {
                    (st.listed, st.loaded, st.skipped) = (done.listed, done.loaded, done.skipped);
                    st.invalid = done.invalid;
                    st.stopped_pool_full = done.stopped_pool_full;
                    self.cut_short
                        .store(cut, std::sync::atomic::Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::warn!("autoprewarm: {e}; the pool starts cold");
                    st.last_error = Some(e.to_string());
                }
            }
            self.load_ended.notify_all();
        }
        let Some(interval) = self.interval else {
            return;
        };
        loop {
            {
                let mut stop = self.stop.lock();
                if !*stop {
                    self.wake.wait_for(&mut stop, interval);
                }
                if *stop {
                    return;
                }
            }
            if let Err(e) = self.save() {
                tracing::warn!("autoprewarm: saving the block list: {e}");
                self.stats.lock().last_error = Some(e.to_string());
            }
        }
    }

    fn save(&self) -> Result<u64, EngineError> {
        let n = dump(&self.pool, &*self.vfs, &self.dir)?;
        let mut st = self.stats.lock();
        st.dumps += 1;
        st.last_dump_blocks = n;
        Ok(n)
    }
}
