//! The fuzz targets' bodies: one plain `pub fn NAME(data: &[u8])` per decoder that the engine
//! trusts with bytes from disk or text from users. Each one must return normally on every
//! input; a panic (an assertion of a property below, an index out of bounds, an overflow, a
//! division by zero) is a finding.
//!
//! This file is the only copy: the cargo-fuzz binaries in `fuzz/fuzz_targets/` call these
//! functions under libFuzzer, and `crates/bufpool/tests/fuzz_replay.rs` includes this file
//! with `#[path]` and runs every committed corpus file through them in the normal
//! `cargo test`. It depends on nothing but `bufpool` and `crc32c` (a dependency of
//! `bufpool`, so the integration test can use it too).
//!
//! Input layout: the first byte (or few) of an input choose parameters (page size, mode);
//! the rest is the bytes under test. Where a checksum would stop the fuzzer at the door, a
//! "fix" mode bit stamps a correct checksum first, so that the decoder behind it is explored
//! too; without the bit the bytes are decoded exactly as given.

use std::path::Path;
use std::sync::Arc;

use bufpool::buffer::PoolConfig;
use bufpool::config::{Config, PoolSize, KNOBS};
use bufpool::page::{self, PageProblem, PAGE_HEADER_SIZE, PAGE_SIZES};
use bufpool::slru::{Slru, SlruError, PAGES_PER_SEGMENT, TRAILER_SIZE};
use bufpool::txn::{Clog, ClogError, XidStatus};
use bufpool::wal::control::{self, Control, ControlError};
use bufpool::wal::record::{self, BlockChange, Invalid, RecordBuilder, RecordKind, HEADER_SIZE};
use bufpool::wal::SyncMethod;
use bufpool::{BufferTag, ForkNumber, HugePages, Lsn, MemVfs, RelFileId, Smgr, SmgrOptions, Vfs};

// The bench's own decoders of what clients and users send, included as they are (each is
// standard library only), so the bench's code is what runs here.
#[path = "../../crates/bufpool-bench/src/conf.rs"]
mod conf;
#[path = "../../crates/bufpool-bench/src/requests.rs"]
mod requests;
// pgbench script files (`bench -f`): anyhow and rand besides the standard library.
#[path = "../../crates/bufpool-bench/src/tpcb/script.rs"]
#[allow(dead_code)]
mod script;

/// A target's body.
pub type Target = fn(&[u8]);

/// Every target, by the name of its corpus directory (`fuzz/corpus/NAME`).
pub const TARGETS: &[(&str, Target)] = &[
    ("page", page),
    ("wal_record", wal_record),
    ("control", control),
    ("slru", slru),
    ("config", config),
    ("smgr_meta", smgr_meta),
    ("trace", trace),
    ("prewarm_blocks", prewarm_blocks),
    ("conf_file", conf_file),
    ("http_request", http_request),
    ("socket_request", socket_request),
    ("script_file", script_file),
];

/// Reads parameters off the front of an input; past its end every read is zero.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let n = self.0.len().min(N);
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        out
    }
    fn u8(&mut self) -> u8 {
        self.bytes::<1>()[0]
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.bytes())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.bytes())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.bytes())
    }
    fn tag(&mut self) -> BufferTag {
        let rel = RelFileId::new(self.u32(), self.u32());
        let fork = ForkNumber::from_u8(self.u8() & 3).expect("four forks");
        BufferTag::new(rel, fork, self.u32())
    }
    fn rest(self) -> &'a [u8] {
        self.0
    }
}

fn page_size(sel: u8) -> usize {
    PAGE_SIZES[usize::from(sel & 3)]
}

fn all_zero(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0)
}

// ---------------------------------------------------------------------------------------
// page

/// `bufpool::page`: the header and checksum of a data page.
///
/// Input: `sel` (bits 0-1: page size; bit 2: round-trip mode), the tag (tablespace u32,
/// relation u32, fork u8, block u32), then in raw mode the page image (zero-padded or cut
/// to the page size); in round-trip mode lsn u64, flags u16, special size u16, a damage
/// position u32 and length u8, four damage masks, then the page body.
///
/// Raw mode: the header accessors and `verify` never panic, and `verify`'s verdict is the
/// one the format states (all-zero page, or stored checksum = computed and the layout word
/// of this page size). Round trip: a page built with `init` and stamped with
/// `set_checksum` verifies; the same page under another block number does not; and any
/// damage confined to 4 consecutive bytes (a burst CRC32C always detects) is refused.
pub fn page(data: &[u8]) {
    let mut inp = Input(data);
    let sel = inp.u8();
    let size = page_size(sel);
    let tag = inp.tag();
    let mut img = vec![0u8; size];
    if sel & 4 == 0 {
        let body = inp.rest();
        let n = body.len().min(size);
        img[..n].copy_from_slice(&body[..n]);
        let _ = (
            page::lsn(&img),
            page::flags(&img),
            page::lower(&img),
            page::upper(&img),
            page::special(&img),
            page::is_new(&img),
        );
        let stored = page::stored_checksum(&img);
        let computed = page::compute_checksum(&img, &tag);
        match page::verify(&img, &tag) {
            Ok(()) => assert!(
                all_zero(&img) || stored == computed,
                "a page with a wrong checksum verified"
            ),
            Err(e @ PageProblem::Checksum { expected, found }) => {
                assert_eq!((expected, found), (computed, stored));
                assert!(!all_zero(&img), "an all-zero page was refused");
                assert!(!e.to_string().is_empty());
            }
            Err(e @ PageProblem::Layout { .. }) => {
                assert_eq!(stored, computed, "layout refused before the checksum");
                assert!(!e.to_string().is_empty());
            }
            Err(e @ PageProblem::LsnPastEndOfLog { .. }) => {
                panic!("page::verify knows no log, yet refused a page for its LSN: {e}")
            }
        }
        return;
    }

    let lsn = inp.u64();
    let flags = inp.u16();
    let special = usize::from(inp.u16()) % (size - PAGE_HEADER_SIZE + 1);
    let damage_at = inp.u32() as usize % size;
    let damage_len = usize::from(inp.u8() % 4) + 1;
    let mut masks: [u8; 4] = inp.bytes();
    if masks[..damage_len].iter().all(|&m| m == 0) {
        masks[0] = 1;
    }
    page::init(&mut img, special);
    let body = inp.rest();
    let n = body.len().min(size - PAGE_HEADER_SIZE);
    img[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + n].copy_from_slice(&body[..n]);
    page::set_lsn(&mut img, Lsn(lsn));
    page::set_flags(&mut img, flags);
    page::set_checksum(&mut img, &tag);
    assert_eq!(
        page::verify(&img, &tag),
        Ok(()),
        "a stamped page must verify"
    );
    assert!(!page::is_new(&img));
    assert_eq!(
        (page::lsn(&img), page::flags(&img)),
        (Lsn(lsn), flags),
        "header fields survive stamping"
    );

    // The same bytes read for another block (a misdirected write) are refused: the block
    // number is a 4-byte burst in the checksummed identity.
    let other = BufferTag::new(tag.rel, tag.fork, tag.block ^ (u32::from(masks[0]) | 1));
    assert!(
        matches!(
            page::verify(&img, &other),
            Err(PageProblem::Checksum { .. })
        ),
        "a page verified under another block number"
    );

    // Damage: a burst of up to 4 bytes, either inside the checksum field or outside it
    // (one that straddles it changes the data and the stored sum together, which no CRC
    // promises to catch).
    let mut at = damage_at.min(size - damage_len);
    if at < 12 && at + damage_len > 8 {
        at = 8;
    }
    let mut bad = img.clone();
    for (i, m) in masks[..damage_len].iter().enumerate() {
        bad[at + i] ^= m;
    }
    assert!(
        page::verify(&bad, &tag).is_err(),
        "damage of {damage_len} bytes at {at} (page size {size}) went undetected"
    );
}

// ---------------------------------------------------------------------------------------
// wal_record

/// The CRC a WAL record stores: CRC32C of bytes 0..4 and 8.. (see `wal/record.rs`).
fn record_crc(rec: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&rec[0..4]), &rec[8..])
}

/// `bufpool::wal::record::decode`.
///
/// Input: `sel` (bits 0-1: page size; bit 2: fix mode), then the record bytes. The record
/// is decoded at the position its own `lsn` field names (so the position check is not a
/// wall); fix mode first sets `total_len` to the input's length and stamps the CRC, so the
/// fuzzer reaches the block decoder.
///
/// Properties: decode returns a record or an error, never panics; a decoded record is
/// consistent (length within the input, at least a header, images of one page, ranges
/// inside the page); it does not decode at another position, nor from a prefix one byte
/// short; and, where the builder can express it (no overlapping ranges in one block), the
/// record re-encoded with `RecordBuilder` decodes equal.
pub fn wal_record(data: &[u8]) {
    let mut inp = Input(data);
    let sel = inp.u8();
    let ps = page_size(sel);
    let mut bytes = inp.rest().to_vec();
    if sel & 4 != 0 && bytes.len() >= HEADER_SIZE && bytes.len() <= record::MAX_RECORD_SIZE {
        let len = bytes.len() as u32;
        bytes[0..4].copy_from_slice(&len.to_le_bytes());
        let crc = record_crc(&bytes);
        bytes[4..8].copy_from_slice(&crc.to_le_bytes());
    }
    let lsn = match bytes.get(8..16) {
        Some(b) => Lsn(u64::from_le_bytes(b.try_into().expect("8 bytes"))),
        None => Lsn(0),
    };
    let _ = record::peek_len(&bytes);
    let r = match record::decode(&bytes, lsn, ps) {
        Ok(r) => r,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    assert!(r.len >= HEADER_SIZE && r.len <= bytes.len() && r.len <= record::MAX_RECORD_SIZE);
    assert_eq!(r.lsn, lsn);
    assert_eq!(record::peek_len(&bytes), Ok(r.len));
    if lsn.0 < u64::MAX / 2 {
        let end = r.end();
        assert!(end.0 >= lsn.0 + r.len as u64 && end.0 % record::ALIGN == 0);
    }
    for b in &r.blocks {
        match &b.change {
            BlockChange::Image(p) => assert_eq!(p.len(), ps),
            BlockChange::Ranges(rs) => {
                for (off, d) in rs {
                    assert!(usize::from(*off) + d.len() <= ps, "range outside the page");
                }
            }
            BlockChange::Shifted { shift, ranges } => {
                assert!(
                    shift.from + shift.len <= ps && shift.to + shift.len <= ps,
                    "shift outside the page"
                );
                for (off, d) in ranges {
                    assert!(usize::from(*off) + d.len() <= ps, "range outside the page");
                }
            }
            other => panic!("a block change the harness does not know: {other:?}"),
        }
    }
    let elsewhere = Lsn(lsn.0 ^ record::ALIGN);
    assert!(
        matches!(
            record::decode(&bytes, elsewhere, ps),
            Err(Invalid::WrongLsn { .. })
        ),
        "a record decoded at a position it does not claim"
    );
    assert!(
        matches!(
            record::decode(&bytes[..r.len - 1], lsn, ps),
            Err(Invalid::Truncated { .. })
        ),
        "a record decoded from a prefix"
    );

    // Re-encode through the builder, where it can say the same thing.
    let mut builder = match (&r.kind, &r.multi) {
        (RecordKind::XactTree, _) => RecordBuilder::xact_tree(r.xid, r.flags, &r.subxids),
        (RecordKind::MultiCreate, Some(m)) if r.flags == 0 => RecordBuilder::multi_create(r.xid, m),
        (RecordKind::MultiCreate, _) => return, // flags the builder never writes
        _ => RecordBuilder::new(r.kind, r.xid, r.flags, r.extra),
    };
    let mut scratch = vec![0u8; ps];
    for b in &r.blocks {
        match &b.change {
            BlockChange::Image(p) => builder.image(&b.tag, p),
            BlockChange::Ranges(rs) => {
                let Some(ranges) = place(rs, &mut scratch) else {
                    return;
                };
                builder.ranges(&b.tag, &scratch, &ranges);
            }
            BlockChange::Shifted { shift, ranges: rs } => {
                let Some(ranges) = place(rs, &mut scratch) else {
                    return;
                };
                builder.shifted_ranges(&b.tag, &scratch, Some(*shift), &ranges);
            }
            other => panic!("a block change the harness does not know: {other:?}"),
        }
    }
    let re = builder.finish(r.lsn, r.flushed, r.incarnation).to_vec();
    assert_eq!(re.len(), r.len, "re-encoded length differs");
    let again = record::decode(&re, r.lsn, ps).expect("a re-encoded record decodes");
    // This writer marks its padding (CRC layout 2), whichever layout the input had.
    let r = record::Record {
        marks_padding: true,
        ..r
    };
    assert_eq!(again, r, "a re-encoded record decodes differently");
}

// ---------------------------------------------------------------------------------------
// control

/// The control file's checksum line for `body` (see `wal/control.rs`).
fn with_crc_line(body: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    out.extend_from_slice(format!("crc32c={:08x}\n", crc32c::crc32c(body)).as_bytes());
    out
}

/// `bufpool::wal::control::read`, the control file parser.
///
/// Input: `sel` (bit 0: fix mode), four fields for a round trip (checkpoint u64, redo u64,
/// incarnation u32, next_xid u32, next_multi u32, next_member u32, oldest_multi u32, up to 3
/// relation bounds), then the file's bytes; fix mode appends a correct
/// `crc32c=` line to them, so the field parser behind the checksum is explored.
///
/// Properties: read returns a control or an error naming the file, never panics; a control
/// it returns is written back and read again unchanged; and any control round-trips through
/// `write` and `read`.
pub fn control(data: &[u8]) {
    let mut inp = Input(data);
    let sel = inp.u8();
    // A control file the engine writes has its redo point at or before its checkpoint
    // record (reading one that does not is corruption).
    let (a, b) = (inp.u64(), inp.u64());
    let given = Control {
        checkpoint: Lsn(a.max(b)),
        redo: Lsn(a.min(b)),
        incarnation: inp.u32(),
        next_xid: inp.u32(),
        next_multi: inp.u32(),
        next_member: inp.u32(),
        oldest_multi: inp.u32(),
        multi_rels: (0..inp.u8() % 4)
            .map(|_| (bufpool::RelFileId::new(inp.u32(), inp.u32()), inp.u32()))
            .collect(),
    };
    let file = if sel & 1 != 0 {
        with_crc_line(inp.rest())
    } else {
        inp.rest().to_vec()
    };
    let vfs = MemVfs::new();
    vfs.create_dir_all(Path::new("/d")).expect("mkdir");
    let path = Path::new("/d/bufpool.control");
    vfs.set_contents(path, file);
    match control::read(&vfs, path) {
        Ok(c) => {
            let back = Path::new("/d/back.control");
            control::write(&vfs, back, &c).expect("write to memory");
            assert_eq!(control::read(&vfs, back).expect("read back"), c);
        }
        Err(e @ ControlError::Corrupt { .. }) => {
            assert!(e.to_string().contains("bufpool.control"), "{e}");
        }
        Err(e) => panic!("a present control file gave {e}"),
    }
    let p = Path::new("/d/given.control");
    control::write(&vfs, p, &given).expect("write to memory");
    assert_eq!(control::read(&vfs, p).expect("read back"), given);
}

// ---------------------------------------------------------------------------------------
// slru

/// The checksum an SLRU page stores in its trailer (see `slru/mod.rs`).
fn slru_crc(name: &str, pageno: u64, page: &[u8]) -> u32 {
    let crc = crc32c::crc32c(name.as_bytes());
    let crc = crc32c::crc32c_append(crc, &pageno.to_le_bytes());
    crc32c::crc32c_append(crc, &page[..page.len() - TRAILER_SIZE])
}

/// An SLRU page read from disk, through the public API: the input becomes a segment file in
/// a `MemVfs`, and a page of it is read through `Slru` (or through the commit log, `Clog`,
/// whose SLRU is called `xact`).
///
/// Input: `sel` (bits 0-1: page size; bit 2: fix mode; bit 3: through the commit log),
/// segment number u8 (0..4), page within the segment u8, then the segment file's bytes;
/// fix mode stamps a correct trailer checksum on every whole page of it.
///
/// Properties: the read gives exactly what the format says: zeros past the end of the file,
/// a short-transfer error for a partial page, the page's usable bytes if its trailer
/// checksum is right or it is all zeros, a checksum error naming page and file otherwise.
/// A page read fine is then changed, flushed, and read back changed by a new instance; the
/// commit log reports the two status bits of the page for a transaction on it.
pub fn slru(data: &[u8]) {
    let mut inp = Input(data);
    let sel = inp.u8();
    let ps = page_size(sel);
    let clog = sel & 8 != 0;
    let name = if clog { "xact" } else { "fuzz" };
    let segno = u64::from(inp.u8() % 4);
    let within = u64::from(inp.u8()) % PAGES_PER_SEGMENT;
    let pageno = segno * PAGES_PER_SEGMENT + within;
    let mut file = inp.rest().to_vec();
    if sel & 4 != 0 {
        for (i, p) in file.chunks_exact_mut(ps).enumerate() {
            let crc = slru_crc(name, segno * PAGES_PER_SEGMENT + i as u64, p);
            p[ps - TRAILER_SIZE..ps - TRAILER_SIZE + 4].copy_from_slice(&crc.to_le_bytes());
        }
    }

    // What the format says the read must give: Ok(usable bytes), or Err(true) for a short
    // transfer, Err(false) for a checksum mismatch.
    let off = (within as usize) * ps;
    let expected: Result<Vec<u8>, bool> = if off >= file.len() {
        Ok(vec![0u8; ps - TRAILER_SIZE])
    } else if off + ps > file.len() {
        Err(true)
    } else {
        let p = &file[off..off + ps];
        let stored = u32::from_le_bytes(
            p[ps - TRAILER_SIZE..ps - TRAILER_SIZE + 4]
                .try_into()
                .expect("4 bytes"),
        );
        if stored == slru_crc(name, pageno, p) || all_zero(p) {
            Ok(p[..ps - TRAILER_SIZE].to_vec())
        } else {
            Err(false)
        }
    };

    let vfs = MemVfs::new();
    let dir = Path::new("/db");
    vfs.create_dir_all(&dir.join(name)).expect("mkdir");
    let seg_path = dir.join(name).join(format!("{segno:04X}"));
    vfs.set_contents(&seg_path, file);
    let shared: Arc<dyn Vfs> = Arc::new(vfs.clone());

    if clog {
        let log = Clog::open(shared.clone(), dir, 2, ps).expect("open the commit log");
        let per_page = log.xids_per_page();
        let Ok(xid) = u32::try_from(pageno * per_page + u64::from(sel >> 4) * 4 + 1) else {
            return;
        };
        let status = log.get(xid);
        match (&status, &expected) {
            (Ok(s), Ok(page)) => {
                let i = (xid as u64 % per_page) as usize;
                let bits = (page[i / 4] >> ((i % 4) * 2)) & 3;
                assert_eq!(*s as u8, bits, "status bits of xid {xid}");
            }
            (Err(ClogError::Slru(SlruError::Short { .. })), Err(true))
            | (Err(ClogError::Slru(SlruError::Corrupt { .. })), Err(false)) => return,
            (got, want) => panic!("commit log read {got:?}, the format says {want:?}"),
        }
        let before = status.expect("checked above");
        match log.set(xid, XidStatus::Committed) {
            Ok(()) => {}
            Err(ClogError::BadTransition { .. }) => {
                assert_eq!(before, XidStatus::Aborted, "only an abort is final");
                return;
            }
            Err(e) => panic!("setting a status of a readable page: {e}"),
        }
        log.flush().expect("flush to memory");
        drop(log);
        let log = Clog::open(shared, dir, 2, ps).expect("reopen the commit log");
        assert_eq!(log.get(xid).expect("read back"), XidStatus::Committed);
        return;
    }

    let s = Slru::open(shared.clone(), dir, name, 2, ps).expect("open the SLRU");
    assert_eq!(s.usable(), ps - TRAILER_SIZE);
    let got = s.read(pageno, |b| b.to_vec());
    match (&got, &expected) {
        (Ok(g), Ok(e)) => assert!(g == e, "page {pageno} read differs from the file"),
        (Err(e @ SlruError::Short { .. }), Err(true))
        | (Err(e @ SlruError::Corrupt { .. }), Err(false)) => {
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("page {pageno}"))
                    && msg.contains(&*seg_path.to_string_lossy()),
                "{msg}"
            );
            return;
        }
        (got, want) => panic!(
            "page {pageno} read {:?}, the format says {:?}",
            got.as_ref().map(|_| "a page"),
            want.as_ref().map(|_| "a page")
        ),
    }
    // Change it, flush, and read it back through a new instance.
    s.write(pageno, |b| b[0] ^= 0xA5)
        .expect("write a cached page");
    s.flush().expect("flush to memory");
    drop(s);
    let s = Slru::open(shared, dir, name, 2, ps).expect("reopen the SLRU");
    let back = s.read(pageno, |b| b.to_vec()).expect("read back");
    let mut want = got.expect("checked above");
    want[0] ^= 0xA5;
    assert!(
        back == want,
        "page {pageno} changed on its way to disk and back"
    );
}

// ---------------------------------------------------------------------------------------
// config

/// `Config::set`, `Config::get` and `Config::validate`.
///
/// Input: `sel` (bit 0: fields mode). Text mode: the rest is lines of `name=value`, applied
/// with `Config::set` in order (a name that is a number picks `KNOBS[n % len]`); fields
/// mode: the rest fills every public field of a `Config` directly (as an embedder may),
/// which is then validated.
///
/// Properties: `set` never panics, and its errors name the knob; a value `set` accepted
/// reads back with `get` as text that `set` accepts again without changing anything; a
/// config that passes `validate` yields its derived sizes and the layers' options, and is a
/// fixed point of get→set for every knob.
pub fn config(data: &[u8]) {
    let mut inp = Input(data);
    let sel = inp.u8();
    let mut c = Config::default();
    if sel & 1 == 0 {
        let text = String::from_utf8_lossy(inp.rest());
        for line in text.lines().take(64) {
            let (name, value) = line.split_once('=').unwrap_or((line, ""));
            let name = match name.trim().parse::<usize>() {
                Ok(i) => KNOBS[i % KNOBS.len()].name,
                Err(_) => name,
            };
            match c.set(name, value) {
                Ok(()) => {
                    let text = c.get(name).expect("a knob that set accepted exists");
                    let mut again = c.clone();
                    again.set(name, &text).unwrap_or_else(|e| {
                        panic!("{name}: set accepted {value:?}, get gave {text:?}, set refused it: {e}")
                    });
                    assert_eq!(again, c, "{name}: get→set of {text:?} changed the config");
                    assert!(Config::allowed(name).is_some());
                }
                Err(e) => {
                    assert!(e.knob == name || e.knob == "(name)", "{e}");
                    assert!(!e.to_string().is_empty());
                }
            }
        }
    } else {
        let sb = inp.u64();
        c.shared_buffers = if sb & 1 == 0 {
            PoolSize::Bytes(sb >> 1)
        } else {
            PoolSize::Buffers(sb >> 1)
        };
        c.block_size = inp.u32() as usize;
        c.segment_size = inp.u64();
        c.buffer_mapping_partitions = inp.u32() as usize;
        let flags = inp.u8();
        c.huge_pages = [HugePages::Try, HugePages::On, HugePages::Off][usize::from(flags % 3)];
        c.io_direct = flags & 4 != 0;
        c.synchronous_commit = flags & 8 != 0;
        c.full_page_writes = flags & 16 != 0;
        c.wal_sync_method = [
            SyncMethod::Fdatasync,
            SyncMethod::Fsync,
            SyncMethod::OpenDatasync,
        ][usize::from((flags >> 5) % 3)];
        c.wal_segment_size = inp.u64();
        let wb = inp.u64();
        c.wal_buffers = (wb & 1 != 0).then_some(wb >> 1);
        c.wal_writer_delay_ms = inp.u64();
        c.checkpoint_timeout_ms = inp.u64();
    }
    match c.validate() {
        Ok(()) => {
            let _ = (c.nbuffers(), c.segment_blocks(), c.wal_options());
            assert_eq!(c.wal_buffers_bytes() % 4096, 0);
            let pool = c
                .pool_options(c.block_size)
                .expect("a valid config builds a pool");
            assert_eq!(pool.nbuffers, c.nbuffers());
            let smgr = c.smgr_options(false).expect("a valid config opens storage");
            assert_eq!(smgr.block_size, c.block_size);
            for k in KNOBS {
                let text = c.get(k.name).expect("every knob reads");
                let mut again = c.clone();
                again
                    .set(k.name, &text)
                    .unwrap_or_else(|e| panic!("valid config: {}={text:?} refused: {e}", k.name));
                assert_eq!(again, c, "valid config: {}={text:?} changed it", k.name);
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

// ---------------------------------------------------------------------------------------
// smgr_meta

/// `bufpool.meta`, the data directory's metadata file, read by `Smgr::open`.
///
/// Input: `sel` (bits 0-1: the configured page size; bits 2-3: the configured segment
/// size; bit 4: fix mode, appending a correct `crc32c=` line), then the file's bytes.
///
/// Properties: opening never panics; it succeeds only with the configured layout, and
/// otherwise names the directory.
pub fn smgr_meta(data: &[u8]) {
    let mut inp = Input(data);
    let sel = inp.u8();
    let block_size = page_size(sel);
    let segment_size =
        [1u64 << 30, block_size as u64, 1 << 16, 64 << 30][usize::from((sel >> 2) & 3)];
    let file = if sel & 16 != 0 {
        with_crc_line(inp.rest())
    } else {
        inp.rest().to_vec()
    };
    let vfs = MemVfs::new();
    let dir = Path::new("/d");
    vfs.create_dir_all(&dir.join("base")).expect("mkdir");
    vfs.set_contents(&dir.join("bufpool.meta"), file);
    let opts = SmgrOptions {
        wal_segment_size: None,
        block_size,
        segment_size,
        create: sel & 32 != 0,
        direct: false,
        dsync: false,
    };
    match Smgr::open(Arc::new(vfs), dir, opts) {
        Ok(s) => {
            assert_eq!(s.block_size(), block_size);
            assert_eq!(
                u64::from(s.segment_blocks()),
                segment_size / block_size as u64
            );
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("/d"), "{msg}");
        }
    }
}

/// A buffer-request trace (`bufpool trace replay`): the whole input is the file. One that
/// reads is replayed through the clock policy and the optimum at the pool size its header
/// names, bounded as the replay command bounds it (at most the trace's distinct pages):
/// the header's fields must never make the replay panic or allocate what the input sizes.
pub fn trace(data: &[u8]) {
    use bufpool::buffer::replay;
    use bufpool::buffer::trace::read_trace;
    let Ok((header, records)) = read_trace(data, 1 << 20) else {
        return;
    };
    assert!(header.nbuffers >= 1, "a pool of no buffers was accepted");
    let distinct = usize::try_from(replay::distinct_pages(&records)).unwrap_or(usize::MAX);
    let n = usize::try_from(header.nbuffers)
        .unwrap_or(usize::MAX)
        .min(distinct.max(1));
    let clock = replay::replay(&records, bufpool::buffer::ReplacementPolicy::Clock, n);
    let opt = replay::optimal(&records, n);
    assert_eq!(
        clock.hits + clock.misses,
        opt.hits + opt.misses,
        "both replays see every request"
    );
}

// ---------------------------------------------------------------------------------------
// prewarm_blocks

/// Autoprewarm's saved block list (`autoprewarm.blocks`, read at every open with
/// autoprewarm on).
///
/// Input: `sel` (bit 0: fix mode, the rest is the body and a header with its true count
/// and checksum is put before it, so the line parser behind the checks is explored), then
/// the file's bytes.
///
/// Properties: decoding never panics; a list it accepts has no more blocks than the input
/// has lines (nothing is sized by the header), and encodes and decodes back to the same
/// blocks.
pub fn prewarm_blocks(data: &[u8]) {
    use bufpool::engine::prewarm;
    let mut inp = Input(data);
    let sel = inp.u8();
    let body = inp.rest();
    let file = if sel & 1 != 0 {
        let lines = body
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        let mut f = format!(
            "bufpool autoprewarm 1 blocks={lines} saved_at=0 crc32c={:08x}\n",
            crc32c::crc32c(body)
        )
        .into_bytes();
        f.extend_from_slice(body);
        f
    } else {
        body.to_vec()
    };
    let path = Path::new("/d/autoprewarm.blocks");
    match prewarm::decode(&file, path) {
        Ok(saved) => {
            let lines = file.iter().filter(|&&b| b == b'\n').count() + 1;
            assert!(saved.blocks.len() <= lines, "more blocks than lines");
            let mut blocks = saved.blocks.clone();
            let again = prewarm::decode(&prewarm::encode(&mut blocks, saved.saved_at_unix), path)
                .expect("an encoded list decodes");
            let mut want = saved.blocks.clone();
            want.sort_unstable();
            assert_eq!(again.blocks, want, "encode and decode lose nothing");
        }
        Err(e) => assert!(e.to_string().contains("/d/autoprewarm.blocks"), "{e}"),
    }
}

// ---------------------------------------------------------------------------------------
// conf_file

/// The configuration file, `bufpool.conf` (postgresql.conf syntax; the bench's `conf.rs`),
/// and what loading it does with each setting (`Config::set_deferred`, then `validate`).
///
/// Input: the file's bytes (not UTF-8: the loader refuses it, as here).
///
/// Properties: parsing never panics; an error names a line of the input; every setting
/// and include comes from a line of the input, a setting's value no longer than the
/// input, and writing it back as a line (`conf::line`) parses to the same name and value; applying the settings
/// to a `Config` never panics, and its errors name the knob.
pub fn conf_file(data: &[u8]) {
    // The loader reads no more than this, nor anything that is not UTF-8.
    if data.len() > conf::CONF_BYTES_MAX {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count();
    match conf::items(text) {
        Ok(items) => {
            let mut c = Config::default();
            let settings = items.iter().filter_map(|i| match i {
                conf::Item::Setting(s) => Some(s),
                conf::Item::Include { line, path, .. } => {
                    assert!(*line >= 1 && *line <= lines && !path.is_empty());
                    None
                }
            });
            for s in settings {
                assert!(s.line >= 1 && s.line <= lines, "line {} of {lines}", s.line);
                assert!(s.value.len() <= text.len());
                let back =
                    conf::items(&conf::line(&s.name, &s.value)).expect("a written line parses");
                match back.as_slice() {
                    [conf::Item::Setting(b)] => assert_eq!(
                        (b.name.as_str(), b.value.as_str()),
                        (s.name.as_str(), s.value.as_str())
                    ),
                    // A setting named "include" reads back as an include.
                    [conf::Item::Include { .. }] => {
                        assert!(s.name == "include" || s.name == "include_if_exists")
                    }
                    other => panic!("a written line read back as {other:?}"),
                }
                if let Err(e) = c.set_deferred(&s.name, &s.value) {
                    assert!(e.knob == s.name || e.knob == "(name)", "{e}");
                }
            }
            if let Err(e) = c.validate() {
                assert!(!e.to_string().is_empty());
            }
        }
        Err(e) => assert!(e.line >= 1 && e.line <= lines.max(1), "{e}"),
    }
}

// ---------------------------------------------------------------------------------------
// http_request, socket_request

/// Feeds `data` to a framer in chunks of `chunk` bytes, as a client's writes arrive;
/// returns the request if one was framed, and checks the framing's bounds.
fn frame(data: &[u8], chunk: usize, end: &'static [u8]) -> Option<Vec<u8>> {
    use requests::{Framed, Framer, REQUEST_BYTES_MAX};
    let mut f = Framer::new(end);
    for piece in data.chunks(chunk.max(1)) {
        match f.push(piece) {
            Framed::More => {}
            Framed::Done => {
                let request = f.into_request();
                assert!(request.ends_with(end), "a request ends at its marker");
                let first = request.windows(end.len()).position(|w| w == end);
                assert_eq!(
                    first,
                    Some(request.len() - end.len()),
                    "at its first marker"
                );
                assert!(request.len() <= REQUEST_BYTES_MAX + chunk + end.len());
                return Some(request);
            }
            Framed::TooLong => {
                assert!(data.len() > REQUEST_BYTES_MAX);
                return None;
            }
        }
    }
    // The client closed its side: what came is the request.
    Some(f.into_request())
}

/// The metrics endpoint's request (`GET /metrics HTTP/1.1` and headers up to a blank
/// line). Input: `sel` (the size of the client's writes, 1 to 256), then the bytes.
///
/// Properties: framing and routing never panic; a request is cut at its first blank
/// line and never exceeds the limit by more than one read; only a first line whose first
/// two words are `GET` and `/metrics` reaches the metrics.
pub fn http_request(data: &[u8]) {
    let mut inp = Input(data);
    let chunk = usize::from(inp.u8()) + 1;
    let bytes = inp.rest();
    if let Some(request) = frame(bytes, chunk, b"\r\n\r\n") {
        let route = requests::http_route(&request);
        let line = request.split(|&b| b == b'\n').next().unwrap_or_default();
        let mut words = line
            .split(|b| b.is_ascii_whitespace())
            .filter(|w| !w.is_empty());
        let metrics = words.next() == Some(b"GET") && words.next() == Some(b"/metrics");
        assert_eq!(route == requests::Route::Metrics, metrics, "{route:?}");
    }
}

/// The buffer-cache socket's request: one line naming a view. Input: `sel` (the size of
/// the client's writes, 1 to 256), then the bytes.
///
/// Properties: framing and parsing never panic; a view is named only by a line that is
/// exactly its name, give or take white space.
pub fn socket_request(data: &[u8]) {
    let mut inp = Input(data);
    let chunk = usize::from(inp.u8()) + 1;
    if let Some(line) = frame(inp.rest(), chunk, b"\n") {
        if let Some(name) = requests::view_name(&line) {
            assert_eq!(line.trim_ascii(), name.as_bytes());
            assert!(requests::VIEW_NAMES.contains(&name));
        }
    }
}

// ---------------------------------------------------------------------------------------
// script_file

/// A pgbench script file as `bench -f` reads it (`tpcb/script.rs`), then each `\set` of a
/// parsed script evaluated once.
///
/// Input: the file's bytes (not UTF-8: the reader refuses it, as here).
///
/// Properties: parsing never panics and never recurses without bound (expressions are
/// bounded in tokens and depth); an error names the file and a line of the input; a parsed
/// script's commands come from lines of the input, in order; evaluating its `\set`s never
/// panics (errors, such as a division by zero or an unset variable, are values).
pub fn script_file(data: &[u8]) {
    // `bench -f` reads no more than 1 MiB.
    if data.len() > 1 << 20 {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count();
    match script::Script::parse("f.sql", text) {
        Ok(s) => {
            let mut last = 0;
            for c in &s.commands {
                assert!(
                    c.line > last && c.line <= lines,
                    "line {} of {lines}",
                    c.line
                );
                last = c.line;
            }
            use rand::SeedableRng as _;
            let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
            let mut st = script::ScriptState::new(&s, 1, 0, 1);
            for c in &s.commands {
                if let script::Op::Set(_, e) = &c.op {
                    let _ = st.eval(e, &mut rng);
                }
            }
        }
        Err(e) => {
            let e = e.to_string();
            assert!(e.starts_with("f.sql"), "{e}");
        }
    }
}

/// Writes `rs`' bytes into `scratch` and returns their ranges, sorted as the record had them;
/// None if two overlap (one page cannot hold both contents).
fn place(rs: &[(u16, Vec<u8>)], scratch: &mut [u8]) -> Option<Vec<std::ops::Range<usize>>> {
    let mut spans: Vec<(usize, usize)> = rs
        .iter()
        .map(|(o, d)| (usize::from(*o), usize::from(*o) + d.len()))
        .collect();
    spans.sort_unstable();
    if spans.windows(2).any(|w| w[1].0 < w[0].1) {
        return None;
    }
    let mut ranges = Vec::with_capacity(rs.len());
    for (o, d) in rs {
        let o = usize::from(*o);
        scratch[o..o + d.len()].copy_from_slice(d);
        ranges.push(o..o + d.len());
    }
    Some(ranges)
}
