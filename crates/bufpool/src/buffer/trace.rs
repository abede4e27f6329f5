//! Access traces: every buffer request of a run, recorded compactly for replay through the
//! replacement policies (`policy/sim.rs`) and Belady's optimum.
//!
//! Owns: [`Tracer`] (in the pool: an on/off flag and the recording under way), the file
//! format and its reader. The library opens no file: the caller hands `start` a sink (the
//! bench, a file) and `read_trace` a reader. A request is recorded where the pool answers it: the lock-free hit
//! paths (`read_via`, `read_resident`, a read run's optimistic lookup) and `claim`, the
//! funnel of every miss (a hit found under the partition lock, or a victim retagged).
//! Recording costs one relaxed load and a never-taken branch when off; on, each thread
//! appends to a buffer of its own (an uncontended lock) and writes whole chunks to the file.
//!
//! File: a 32-byte header (`BUFPTRC1`, format version, record size, the pool's buffers and
//! page size, all little-endian) and 24-byte records: the tag's two packed words, then
//! `time_ns << 8 | flags`, time from the recording's start. Chunks of different threads
//! interleave; [`read_trace`] orders records by time.
//! Invariants: a record is whole or absent; a recording stopped while a thread records
//! drops that thread's late records rather than tearing one.
//! Locks: a thread's own buffer lock, then (chunk full) the file lock; `stop` takes each
//! buffer lock after closing the recording. None is taken when tracing is off.

use std::cell::RefCell;
use std::io::{BufWriter, Read, Write};
use std::time::Instant;

use crate::sync::{Arc, AtomicBool, AtomicU64, Mutex, Ordering};
use crate::types::BufferTag;

/// The request was answered from the pool (no victim taken).
pub const HIT: u8 = 1;
/// A lookup that never loads (`read_resident`): without HIT it found nothing and admitted
/// nothing.
pub const PROBE: u8 = 2;
/// The request went through a ring (an access strategy's pin).
pub const RING: u8 = 4;

const MAGIC: &[u8; 8] = b"BUFPTRC1";
const VERSION: u32 = 1;
/// Size of a trace file's header, in bytes.
pub const HEADER_BYTES: usize = 32;
/// Size of one record in a trace file, in bytes.
pub const RECORD_BYTES: usize = 24;
/// A thread's buffer is written out when it holds this many bytes.
const CHUNK_BYTES: usize = 64 * 1024;

/// One buffer request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRecord {
    /// The page requested.
    pub tag: BufferTag,
    /// [`HIT`], [`PROBE`], [`RING`].
    pub flags: u8,
    /// Nanoseconds since the recording started.
    pub time_ns: u64,
}

impl TraceRecord {
    /// The record as a trace file stores it.
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        b[0..8].copy_from_slice(&self.tag.word0().to_le_bytes());
        b[8..16].copy_from_slice(&self.tag.word1().to_le_bytes());
        b[16..24].copy_from_slice(&((self.time_ns << 8) | u64::from(self.flags)).to_le_bytes());
        b
    }

    /// A record from the form a trace file stores it in.
    pub fn decode(b: &[u8; RECORD_BYTES]) -> Self {
        let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let meta = word(16);
        Self {
            tag: BufferTag::from_words(word(0), word(8)),
            flags: meta as u8,
            time_ns: meta >> 8,
        }
    }
}

/// What a trace file says about the pool that recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceHeader {
    /// Buffers in the pool that recorded the trace.
    pub nbuffers: u64,
    /// That pool's page size, in bytes.
    pub page_size: u32,
}

/// A recording's totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TraceSummary {
    /// Records written.
    pub records: u64,
    /// Bytes written to the sink, header included.
    pub bytes: u64,
    /// Records dropped because the recording was stopping while they were made.
    pub dropped: u64,
}

/// An error of recording or reading a trace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// Writing to the sink or reading the trace failed.
    #[error("writing or reading the trace: {0}")]
    Io(#[from] std::io::Error),
    /// What was read is not a trace this build can read (what is wrong with it).
    #[error("not a bufpool trace: {0}")]
    Format(String),
    /// A recording was started while another was under way.
    #[error("a trace is already being recorded; stop it first")]
    Busy,
    /// A recording was stopped while none was under way.
    #[error("no trace is being recorded")]
    NotRecording,
}

/// Where a recording goes.
pub type TraceSink = Box<dyn Write + Send>;

/// Recording ids, unique in the process, so a thread's buffer is never reused across
/// recordings (or pools).
static NEXT_RECORDING: AtomicU64 = AtomicU64::new(1);

struct Recording {
    id: u64,
    start: Instant,
    file: Mutex<Result<BufWriter<TraceSink>, Option<std::io::Error>>>,
    /// Every thread's buffer, so `stop` can drain those of threads still alive.
    buffers: Mutex<Vec<ThreadBuffer>>,
    closed: AtomicBool,
    bytes: AtomicU64,
    dropped: AtomicU64,
}

impl Recording {
    fn write(&self, chunk: &[u8]) {
        let mut f = self.file.lock();
        let failed = match &mut *f {
            Ok(w) => w.write_all(chunk).err(),
            Err(_) => return,
        };
        match failed {
            Some(e) => *f = Err(Some(e)),
            None => {
                self.bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
        }
    }
}

/// A thread's buffer of records, shared with the recording so `stop` can drain it.
type ThreadBuffer = Arc<Mutex<Vec<u8>>>;

thread_local! {
    /// This thread's recording and its buffer in it.
    static LOCAL: RefCell<Option<(Arc<Recording>, ThreadBuffer)>> = const { RefCell::new(None) };
}

/// The pool's tracer: off unless a recording is under way.
#[derive(Default)]
pub struct Tracer {
    on: AtomicBool,
    /// The recording under way's id (0: none), so a thread that has its buffer in it
    /// records without taking `current`'s lock.
    current_id: AtomicU64,
    current: Mutex<Option<Arc<Recording>>>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tracer(on: {})", self.on.load(Ordering::Relaxed))
    }
}

impl Tracer {
    /// Whether requests are being recorded; the hit paths' one check.
    #[inline(always)]
    pub fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Starts recording to `sink`: the header now, records from here on.
    pub fn start(
        &self,
        sink: TraceSink,
        nbuffers: usize,
        page_size: usize,
    ) -> Result<(), TraceError> {
        let mut cur = self.current.lock();
        if cur.is_some() {
            return Err(TraceError::Busy);
        }
        let mut w = BufWriter::with_capacity(CHUNK_BYTES, sink);
        let mut h = [0u8; HEADER_BYTES];
        h[0..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&(RECORD_BYTES as u32).to_le_bytes());
        h[16..24].copy_from_slice(&(nbuffers as u64).to_le_bytes());
        h[24..28].copy_from_slice(&(page_size as u32).to_le_bytes());
        w.write_all(&h)?;
        let id = NEXT_RECORDING.fetch_add(1, Ordering::Relaxed);
        *cur = Some(Arc::new(Recording {
            id,
            start: Instant::now(),
            file: Mutex::new(Ok(w)),
            buffers: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            bytes: AtomicU64::new(HEADER_BYTES as u64),
            dropped: AtomicU64::new(0),
        }));
        self.current_id.store(id, Ordering::Release);
        self.on.store(true, Ordering::Release);
        Ok(())
    }

    /// Records one request of this thread.
    #[cold]
    #[inline(never)]
    pub fn record(&self, tag: &BufferTag, flags: u8) {
        LOCAL.with(|local| {
            let mut local = local.borrow_mut();
            let id = self.current_id.load(Ordering::Acquire);
            if local.as_ref().is_none_or(|(r, _)| r.id != id) {
                let current = self.current.lock().clone();
                let Some(rec) = current else { return };
                let buf = Arc::new(Mutex::new(Vec::with_capacity(CHUNK_BYTES)));
                rec.buffers.lock().push(buf.clone());
                *local = Some((rec, buf));
            }
            let (rec, buf) = local.as_ref().expect("set above");
            let r = TraceRecord {
                tag: *tag,
                flags,
                time_ns: rec.start.elapsed().as_nanos() as u64,
            };
            let mut b = buf.lock();
            if rec.closed.load(Ordering::Acquire) {
                rec.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            b.extend_from_slice(&r.encode());
            if b.len() >= CHUNK_BYTES {
                rec.write(&b);
                b.clear();
            }
        });
    }

    /// Stops recording: drains every thread's buffer, flushes and drops the sink.
    pub fn stop(&self) -> Result<TraceSummary, TraceError> {
        let rec = self.current.lock().take().ok_or(TraceError::NotRecording)?;
        self.on.store(false, Ordering::Release);
        self.current_id.store(0, Ordering::Release);
        rec.closed.store(true, Ordering::Release);
        for buf in rec.buffers.lock().iter() {
            let mut b = buf.lock();
            rec.write(&b);
            b.clear();
        }
        let mut f = rec.file.lock();
        match std::mem::replace(&mut *f, Err(None)) {
            Ok(w) => {
                let mut sink = w.into_inner().map_err(|e| e.into_error())?;
                sink.flush()?;
            }
            Err(Some(e)) => return Err(e.into()),
            Err(None) => unreachable!("a recording is stopped once"),
        }
        let bytes = rec.bytes.load(Ordering::Relaxed);
        Ok(TraceSummary {
            records: (bytes - HEADER_BYTES as u64) / RECORD_BYTES as u64,
            bytes,
            dropped: rec.dropped.load(Ordering::Relaxed),
        })
    }
}

/// Most bytes [`read_trace`] reads by default: 4 GiB, about 179 million requests (a
/// replay holds every record in memory, about 24 bytes each).
pub const TRACE_BYTES_MAX: u64 = 4 << 30;

/// Reads a trace of at most `max_bytes` (a larger one is refused before it is all read,
/// so a reader that never ends costs at most that): its header and its records ordered by
/// time (a thread's own records keep their order). Every field of the header is checked:
/// a trace is input, and a replay sizes its pools from it.
pub fn read_trace(
    from: impl Read,
    max_bytes: u64,
) -> Result<(TraceHeader, Vec<TraceRecord>), TraceError> {
    let bad = TraceError::Format;
    let mut bytes = Vec::new();
    from.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(bad(format!(
            "more than {max_bytes} bytes (the most a replay reads)"
        )));
    }
    if bytes.len() < HEADER_BYTES || &bytes[0..8] != MAGIC {
        return Err(bad("no BUFPTRC1 header".into()));
    }
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
    let (version, size) = (u32_at(8), u32_at(12));
    if version != VERSION || size as usize != RECORD_BYTES {
        return Err(bad(format!(
            "format version {version} with {size}-byte records (this build reads version \
             {VERSION}, {RECORD_BYTES}-byte records)"
        )));
    }
    let body = &bytes[HEADER_BYTES..];
    if body.len() % RECORD_BYTES != 0 {
        return Err(bad(format!(
            "{} bytes of records is not a whole number of {RECORD_BYTES}-byte records \
             (a torn write?)",
            body.len()
        )));
    }
    let header = TraceHeader {
        nbuffers: u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes")),
        page_size: u32_at(24),
    };
    if !(1..=super::options::MAX_BUFFERS).contains(&header.nbuffers) {
        return Err(bad(format!(
            "a pool of {} buffers (a pool has 1 to {})",
            header.nbuffers,
            super::options::MAX_BUFFERS
        )));
    }
    if !crate::page::PAGE_SIZES.contains(&(header.page_size as usize)) {
        return Err(bad(format!(
            "a page size of {} bytes (one of {:?})",
            header.page_size,
            crate::page::PAGE_SIZES
        )));
    }
    let mut records: Vec<TraceRecord> = body
        .chunks_exact(RECORD_BYTES)
        .map(|c| TraceRecord::decode(c.try_into().expect("a whole record")))
        .collect();
    records.sort_by_key(|r| r.time_ns);
    Ok((header, records))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ForkNumber, RelFileId};

    fn sink(path: &std::path::Path) -> TraceSink {
        Box::new(std::fs::File::create(path).unwrap())
    }

    fn tag(block: u32) -> BufferTag {
        BufferTag::new(
            RelFileId {
                tablespace: 1,
                relation: 7,
            },
            ForkNumber::Visibility,
            block,
        )
    }

    #[test]
    fn records_round_trip_and_threads_merge_by_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let t = Arc::new(Tracer::default());
        assert!(!t.on());
        t.start(sink(&path), 64, 8192).unwrap();
        assert!(matches!(
            t.start(sink(&path), 64, 8192),
            Err(TraceError::Busy)
        ));
        let n = 5_000u32; // more than a chunk per thread
        let threads: Vec<_> = (0..2)
            .map(|k| {
                let t = t.clone();
                std::thread::spawn(move || {
                    for b in 0..n {
                        t.record(&tag(b * 2 + k), if k == 0 { HIT } else { RING });
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        t.record(&tag(u32::MAX - 1), PROBE);
        let s = t.stop().unwrap();
        assert!(!t.on());
        assert_eq!(s.records, u64::from(2 * n + 1));
        assert_eq!(s.bytes, std::fs::metadata(&path).unwrap().len());
        let (h, recs) = read_trace(std::fs::File::open(&path).unwrap(), TRACE_BYTES_MAX).unwrap();
        assert_eq!(
            h,
            TraceHeader {
                nbuffers: 64,
                page_size: 8192
            }
        );
        assert_eq!(recs.len() as u64, s.records);
        assert!(recs.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
        for k in 0..2u32 {
            let blocks: Vec<u32> = recs
                .iter()
                .filter(|r| r.flags != PROBE && r.tag.block % 2 == k)
                .map(|r| r.tag.block)
                .collect();
            assert_eq!(blocks, (0..n).map(|b| b * 2 + k).collect::<Vec<_>>());
        }
        assert_eq!(recs.last().unwrap().tag, tag(u32::MAX - 1));
        assert_eq!(recs.last().unwrap().tag.fork, ForkNumber::Visibility);
        assert!(matches!(t.stop(), Err(TraceError::NotRecording)));
    }

    /// The bytes of a recording of one request (16 buffers of 4 kB).
    fn one_request_trace() -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let t = Tracer::default();
        t.start(sink(&path), 16, 4096).unwrap();
        t.record(&tag(3), HIT);
        t.stop().unwrap();
        std::fs::read(&path).unwrap()
    }

    #[test]
    fn a_torn_or_foreign_file_is_refused() {
        let mut bytes = one_request_trace();
        bytes.pop();
        let e = read_trace(&bytes[..], TRACE_BYTES_MAX)
            .unwrap_err()
            .to_string();
        assert!(e.contains("torn"), "{e}");
        let e = read_trace(
            &b"not a trace at all, but long enough to be one"[..],
            TRACE_BYTES_MAX,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("BUFPTRC1"), "{e}");
    }

    /// The header's fields are input: a pool of 0 buffers (which once made a replay
    /// panic), of more than a pool can hold (which once made it allocate gigabytes, or
    /// abort), a page size no pool has, and a file larger than the reader allows are each
    /// refused with what is wrong.
    #[test]
    fn a_hostile_header_or_length_is_refused() {
        let good = one_request_trace();
        let with = |at: usize, field: &[u8]| {
            let mut b = good.clone();
            b[at..at + field.len()].copy_from_slice(field);
            read_trace(&b[..], TRACE_BYTES_MAX).unwrap_err().to_string()
        };
        for n in [0u64, 1 << 31, 1 << 40, u64::MAX] {
            let e = with(16, &n.to_le_bytes());
            assert!(e.contains(&format!("a pool of {n} buffers")), "{e}");
        }
        let e = with(24, &1000u32.to_le_bytes());
        assert!(e.contains("page size of 1000"), "{e}");
        let e = read_trace(&good[..], good.len() as u64 - 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than"), "{e}");
        let endless = std::io::repeat(0);
        let e = read_trace(endless, 1 << 20).unwrap_err().to_string();
        assert!(e.contains("more than 1048576 bytes"), "{e}");
        assert!(read_trace(&good[..], good.len() as u64).is_ok());
    }
}
