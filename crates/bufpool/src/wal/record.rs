//! WAL record format: encoding, decoding and validation.
//!
//! ```text
//! offset size field
//!      0    4 total_len   header + body bytes (the next record starts at align8(lsn + total_len))
//!      4    4 crc32c      layout 1: CRC32C of bytes 24..total_len, then 0..4, then 8..24;
//!                         layout 0 (logs written before it existed): of 0..4 and 8..total_len
//!      8    8 lsn         the record's own start position: stale bytes in a recycled
//!                         segment, or a record read at the wrong place, fail this check
//!     16    8 flushed     the log's durable end when the record was inserted: every byte
//!                         before it had been fsynced, which lets recovery tell a torn tail
//!                         (cut it) from corruption of durable log (refuse to open)
//!     24    4 xid
//!     28    1 kind        1 update, 2 checkpoint, 3 end of recovery, 4 no-op,
//!                         5 transaction tree
//!     29    1 flags       bit 0: COMMIT, bit 1: ABORT (the record ends its transaction)
//!     30    2 nblocks     block references that follow
//!     32    8 extra       kind-specific (checkpoint: redo LSN; end of recovery: where the
//!                         log it recovered ended; transaction tree: how many subtransaction
//!                         ids follow the blocks)
//!     40    4 incarnation bumped by every recovery (EndOfRecovery records carry the new
//!                         one): records left beyond the end of the log by an earlier life
//!                         of the log fail this check, even where their LSN and CRC are right
//!     44    1 crc layout  2 (1 or 0 in logs written before; see below)
//!     45    3 reserved    zero
//!     48      blocks      per block: tablespace u32, relation u32, fork u8, bflags u8
//!                         (bit 0: full-page image; bit 1: the image is LZ4-compressed),
//!                         nranges u16, block u32 (16 bytes); then either the page image
//!                         (compressed: `nranges` bytes of one LZ4 block that decompresses
//!                         to exactly one page), or nranges x (offset u16, len u16) followed
//!                         by the ranges' bytes
//!         then            transaction tree only: `extra` subtransaction ids, u32 each
//! ```
//! A transaction tree record ends transaction `xid` (COMMIT or ABORT) together with the
//! subtransactions it lists: a top-level commit or abort with live savepoints, or a
//! rollback to a savepoint (`xid` the savepoint's subtransaction, the list those begun
//! inside it). It carries no blocks.
//! CRC layout: layout 1 checksums the body (bytes 24..) first and the position-dependent
//! header fields (length, lsn, flushed) last, so an inserter computes the expensive part
//! before it reserves log space and only folds 20 header bytes in afterwards (the window a
//! flush leader may wait on stays a copy). Layout 0 covered the same bytes with the header
//! first; the reader accepts both, so logs written before layout 1 still replay. The layout
//! byte is itself covered by the CRC: a damaged one fails the check either way.
//! Layout 2 checksums exactly as layout 1 and adds a promise: the writer marks its flush
//! padding. A flush pads the log to the next 4 KiB boundary (see `wal/mod.rs`); a layout 2
//! writer starts the padding with an 8-byte *pad marker*: a zero `total_len` then a
//! CRC32C of the position and the incarnation ([`pad_marker`]). Bare zeros mid-block after
//! a layout 2 record are therefore not padding but log that never reached the disk (a lost
//! sector of a torn write), and the reader stops there instead of skipping to the next
//! block, where a later unsynced batch may have survived: skipping would replay that batch
//! over the hole and apply half a transaction. Writers of layouts 0 and 1 padded with bare
//! zeros, which the reader still skips after their records.
//! Invariants: a record that decodes is exactly what was encoded (CRC), at the position it
//! claims (lsn). Decoding never panics on any input (fuzzed by proptest in the tests).

use std::ops::Range;

use crate::page_delta::Shift;
use crate::types::{BufferTag, ForkNumber, Lsn, RelFileId};

/// Bytes of a record's header, before its block references.
pub const HEADER_SIZE: usize = 48;
const BLOCK_HEADER_SIZE: usize = 16;
/// Bytes of a range's offset and length in a block's range table.
const RANGE_HEADER_SIZE: usize = 4;
/// Ranges that take at least this many bytes (with their range headers) are tried
/// compressed ([`RecordBuilder::ranges_lz4`]). Below it the compression is not tried: a
/// usual heap change takes 150-250 bytes of ranges.
pub(crate) const RANGES_TRY_LZ4_BYTES: usize = 1024;
/// Records are 8-byte aligned so a scan for valid records after a damaged one can step by 8.
pub const ALIGN: u64 = 8;
/// Largest record: bounds a corrupt length field before anything is allocated. A record
/// holds at most a few full-page images; 4 MiB leaves room for 128 pages of 32 KiB.
pub const MAX_RECORD_SIZE: usize = 4 << 20;

/// The record ends its transaction with a commit.
pub const FLAG_COMMIT: u8 = 1;
/// The record ends its transaction with an abort.
pub const FLAG_ABORT: u8 = 2;
const BLOCK_FLAG_IMAGE: u8 = 1;
/// With [`BLOCK_FLAG_IMAGE`]: the image is one LZ4 block of `nranges` bytes
/// (`wal_compression = lz4`). Without it: the block's ranges, their table as usual, then a
/// 16-bit length and the ranges' bytes, concatenated, as one LZ4 block of that length
/// ([`RecordBuilder::ranges_lz4`]).
const BLOCK_FLAG_LZ4: u8 = 2;
/// Without [`BLOCK_FLAG_IMAGE`]: right after the block header, a shift (`from`, `to`,
/// `len`, three u16) that redo does before it writes the ranges: bytes moved within the
/// page, logged instead of the bytes (`page_delta::Shift`: a B-tree entry array opening a
/// slot or closing one).
const BLOCK_FLAG_SHIFT: u8 = 4;
/// Bytes of a shift.
const SHIFT_SIZE: usize = 6;
/// Byte 44: which bytes the CRC covers in which order (see the module doc).
const CRC_LAYOUT_AT: usize = 44;
/// CRC of 0..4 then 8..len (the format before layout 1).
const CRC_LAYOUT_HEADER_FIRST: u8 = 0;
/// CRC of 24..len, then 0..4, then 8..24.
const CRC_LAYOUT_BODY_FIRST: u8 = 1;
/// Layout 1's CRC, written by a writer that marks its padding: what this writer produces.
const CRC_LAYOUT_MARKED_PADDING: u8 = 2;
/// Bytes of a pad marker (see the module doc).
pub(crate) const PAD_MARKER_LEN: usize = 8;

/// The pad marker a layout 2 writer puts where its flush padding starts, at log position
/// `pos`, in the life of the log `incarnation`: a zero length (so it reads as "no record")
/// then a CRC32C of both, never zero (so it never reads as bare zeros).
pub fn pad_marker(pos: u64, incarnation: u32) -> [u8; PAD_MARKER_LEN] {
    let crc = crc32c::crc32c_append(
        crc32c::crc32c(&pos.to_le_bytes()),
        &incarnation.to_le_bytes(),
    );
    let mut m = [0u8; PAD_MARKER_LEN];
    m[4..].copy_from_slice(&crc.max(1).to_le_bytes());
    m
}

/// Whether `bytes` start with the pad marker for `pos` in life `incarnation`.
pub fn is_pad_marker(bytes: &[u8], pos: u64, incarnation: u32) -> bool {
    bytes.len() >= PAD_MARKER_LEN && bytes[..PAD_MARKER_LEN] == pad_marker(pos, incarnation)
}
/// Bytes 24.. are fixed before reservation; 0..24 (length, crc, lsn, flushed) after.
const POSITION_FIELDS_END: usize = 24;

/// What a record does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// Changes to pages (and possibly a commit).
    Update = 1,
    /// A checkpoint; `extra` is its redo point.
    Checkpoint = 2,
    /// Recovery finished here.
    EndOfRecovery = 3,
    /// Nothing (a commit of a transaction that changed no page).
    Noop = 4,
    /// The outcome of a transaction and the subtransactions listed after it.
    XactTree = 5,
    /// A multixact was created: `extra` is its id; the body holds where its members start
    /// and the members (see [`MultiCreate`]).
    MultiCreate = 6,
    /// A relation was dropped: `extra` is its identity ([`drop_relation_extra`]). Logged
    /// and flushed before any of its files is unlinked; replay removes whatever the
    /// records before it recreated, so a dropped relation never comes back.
    DropRelation = 7,
}

/// The `extra` field of a [`RecordKind::DropRelation`] record naming `rel`.
pub fn drop_relation_extra(rel: crate::types::RelFileId) -> u64 {
    (u64::from(rel.tablespace) << 32) | u64::from(rel.relation)
}

/// The relation a [`RecordKind::DropRelation`] record's `extra` names.
pub fn dropped_relation(extra: u64) -> crate::types::RelFileId {
    crate::types::RelFileId::new((extra >> 32) as u32, extra as u32)
}

impl RecordKind {
    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => RecordKind::Update,
            2 => RecordKind::Checkpoint,
            3 => RecordKind::EndOfRecovery,
            4 => RecordKind::Noop,
            5 => RecordKind::XactTree,
            6 => RecordKind::MultiCreate,
            7 => RecordKind::DropRelation,
            _ => return None,
        })
    }
}

/// The change a record makes to one page.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlockChange {
    /// The whole page after the change (first change after a checkpoint's redo point).
    Image(Vec<u8>),
    /// Byte ranges of the page and their new contents.
    Ranges(Vec<(u16, Vec<u8>)>),
    /// Bytes moved within the page, then byte ranges and their new contents (redo moves
    /// first, then writes the ranges).
    Shifted {
        /// The move, done first.
        shift: Shift,
        /// Byte ranges and their new contents, written after it.
        ranges: Vec<(u16, Vec<u8>)>,
    },
}

/// One page a record changes, and the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockRef {
    /// The page.
    pub tag: BufferTag,
    /// What the record does to it.
    pub change: BlockChange,
}

/// A decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Where the record starts in the log.
    pub lsn: Lsn,
    /// The log's durable end when the record was inserted: every byte before it had been
    /// fsynced.
    pub flushed: Lsn,
    /// The life of the log the record was written in (bumped by every recovery).
    pub incarnation: u32,
    /// The transaction the record belongs to (0 for checkpoint and end-of-recovery records).
    pub xid: u32,
    /// What the record does.
    pub kind: RecordKind,
    /// [`FLAG_COMMIT`] or [`FLAG_ABORT`] if the record ends its transaction, else 0.
    pub flags: u8,
    /// Kind-specific value (checkpoint: its redo point; see [`RecordKind`] for the others).
    pub extra: u64,
    /// The pages the record changes.
    pub blocks: Vec<BlockRef>,
    /// Transaction tree records: the subtransactions that share the outcome.
    pub subxids: Vec<u32>,
    /// Multixact creation records: the multi.
    pub multi: Option<MultiCreate>,
    /// Encoded length (before alignment).
    pub len: usize,
    /// Its writer marked flush padding (CRC layout 2): bare zeros after it are lost log.
    pub marks_padding: bool,
}

impl Record {
    /// Position just after this record, where the next one starts.
    pub fn end(&self) -> Lsn {
        Lsn(align(self.lsn.0 + self.len as u64))
    }
}

/// Rounds `x` up to the record alignment ([`ALIGN`]).
pub fn align(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

/// A multixact's creation: its id, the index of its first member, the relation whose
/// tuple will name it, and its members as (transaction id, mode byte 1..=4; see
/// `txn::MemberMode`). Body layout: start u32, count u16, reserved u16, tablespace u32,
/// relation u32, then `count` times (xid u32, mode u8, 3 zero bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiCreate {
    /// The multixact's id.
    pub multi: u32,
    /// The index of its first member.
    pub start: u32,
    /// The relation whose tuple will name it.
    pub rel: RelFileId,
    /// Its members: (transaction id, mode byte 1..=4).
    pub members: Vec<(u32, u8)>,
}

/// Bytes of a multixact creation body before its members, and per member.
const MULTI_HEAD: usize = 16;
const MULTI_MEMBER: usize = 8;

/// Bytes a [`RecordBuilder`] reserves when it is made.
const INITIAL_CAPACITY: usize = 256;

/// Builds the body of a record; the header's lsn, flushed and crc are stamped at insert:
/// [`RecordBuilder::seal`] (before reserving log space: the body's CRC) then
/// [`RecordBuilder::stamp`] (after: position fields and the cheap rest of the CRC).
#[derive(Debug, Clone)]
pub struct RecordBuilder {
    buf: Vec<u8>,
    nblocks: u16,
    /// CRC32C of bytes 24.. once sealed (None: changed since, or never sealed).
    body_crc: Option<u32>,
    /// Full-page images added, and the bytes they take in the record.
    images: u32,
    image_bytes: u64,
}

impl RecordBuilder {
    /// A record of `kind` by transaction `xid` with `flags` and the kind-specific `extra`, no
    /// blocks yet.
    pub fn new(kind: RecordKind, xid: u32, flags: u8, extra: u64) -> Self {
        // Room for a typical change record (a block header and a few ranges) from the
        // start: growing from the header's size cost two or three reallocations each.
        let mut buf = Vec::with_capacity(INITIAL_CAPACITY);
        buf.resize(HEADER_SIZE, 0);
        buf[24..28].copy_from_slice(&xid.to_le_bytes());
        buf[28] = kind as u8;
        buf[29] = flags;
        buf[32..40].copy_from_slice(&extra.to_le_bytes());
        Self {
            buf,
            nblocks: 0,
            body_crc: None,
            images: 0,
            image_bytes: 0,
        }
    }

    fn block_header(&mut self, tag: &BufferTag, bflags: u8, nranges: u16) {
        self.buf
            .extend_from_slice(&tag.rel.tablespace.to_le_bytes());
        self.buf.extend_from_slice(&tag.rel.relation.to_le_bytes());
        self.buf.push(tag.fork as u8);
        self.buf.push(bflags);
        self.buf.extend_from_slice(&nranges.to_le_bytes());
        self.buf.extend_from_slice(&tag.block.to_le_bytes());
        self.nblocks += 1;
        self.body_crc = None;
    }

    /// Adds a full-page image.
    pub fn image(&mut self, tag: &BufferTag, page: &[u8]) {
        self.block_header(tag, BLOCK_FLAG_IMAGE, 0);
        self.buf.extend_from_slice(page);
        self.images += 1;
        self.image_bytes += page.len() as u64;
    }

    /// Adds a full-page image compressed as one LZ4 block (PostgreSQL's
    /// `wal_compression = lz4`), or as it is when that would not be smaller. The record's
    /// CRC covers the compressed bytes, so damage is caught before decompression.
    pub fn image_lz4(&mut self, tag: &BufferTag, page: &[u8]) {
        let n = match self.push_lz4_image(tag, page, page.len()) {
            Some(n) => n,
            // Incompressible (or too large for the length field): the page as it is.
            None => {
                self.block_header(tag, BLOCK_FLAG_IMAGE, 0);
                self.buf.extend_from_slice(page);
                page.len()
            }
        };
        self.images += 1;
        self.image_bytes += n as u64;
    }

    /// Adds byte ranges of `page` like [`Self::ranges`], their bytes compressed as one
    /// LZ4 block if they take at least `RANGES_TRY_LZ4_BYTES` and that is smaller. A
    /// prune that moves kilobytes of tuples, or a change past the page delta's range limit
    /// (declared as the whole page), costs about 1 kB of a TPC-B page instead of 3-8 kB.
    /// Redo decompresses only the ranges and applies them like any (an earlier version logged the
    /// whole page compressed instead: as small, but redo then decompressed 8 kB for every
    /// such change, and replay of 1 kB changes fell from 1,000 to 18 MB/s of log).
    pub fn ranges_lz4(&mut self, tag: &BufferTag, page: &[u8], ranges: &[Range<usize>]) {
        self.shifted_ranges_lz4(tag, page, None, ranges);
    }

    /// [`Self::ranges_lz4`] after `shift` (see [`BlockChange::Shifted`]).
    pub fn shifted_ranges_lz4(
        &mut self,
        tag: &BufferTag,
        page: &[u8],
        shift: Option<Shift>,
        ranges: &[Range<usize>],
    ) {
        let data: usize = ranges.iter().map(|r| r.len()).sum();
        if data + RANGE_HEADER_SIZE * ranges.len() < RANGES_TRY_LZ4_BYTES
            || !self.push_lz4_ranges(tag, page, shift, ranges, data)
        {
            self.shifted_ranges(tag, page, shift, ranges);
        }
    }

    /// The block header of a block of `nranges` ranges (compressed with `lz4`) and, if
    /// there is one, its shift.
    fn ranges_header(&mut self, tag: &BufferTag, lz4: bool, shift: Option<Shift>, nranges: usize) {
        assert!(nranges <= u16::MAX as usize, "too many ranges in one block");
        let flags = if lz4 { BLOCK_FLAG_LZ4 } else { 0 }
            | if shift.is_some() { BLOCK_FLAG_SHIFT } else { 0 };
        self.block_header(tag, flags, nranges as u16);
        if let Some(sh) = shift {
            for v in [sh.from, sh.to, sh.len] {
                let v = u16::try_from(v).expect("a shift within a page of at most 32 KiB");
                self.buf.extend_from_slice(&v.to_le_bytes());
            }
        }
    }

    /// Appends `ranges` of `page` (`data` bytes in all) as a block of compressed ranges if
    /// the compressed bytes and their length field take fewer than `data` bytes (and fit
    /// the 16-bit length field); returns whether it did. Else leaves the record as it was.
    fn push_lz4_ranges(
        &mut self,
        tag: &BufferTag,
        page: &[u8],
        shift: Option<Shift>,
        ranges: &[Range<usize>],
        data: usize,
    ) -> bool {
        let header_at = self.buf.len();
        let nblocks = self.nblocks;
        debug_assert!(disjoint(ranges), "ranges of one page overlap: {ranges:?}");
        self.ranges_header(tag, true, shift, ranges.len());
        let mut raw = Vec::with_capacity(data);
        for r in ranges {
            assert!(r.end <= page.len() && r.end <= u16::MAX as usize + 1 && r.start <= r.end);
            self.buf.extend_from_slice(&(r.start as u16).to_le_bytes());
            self.buf
                .extend_from_slice(&((r.end - r.start) as u16).to_le_bytes());
            raw.extend_from_slice(&page[r.clone()]);
        }
        let len_at = self.buf.len();
        let start = len_at + 2;
        self.buf.resize(
            start + lz4_flex::block::get_maximum_output_size(raw.len()),
            0,
        );
        match lz4_flex::block::compress_into(&raw, &mut self.buf[start..]) {
            Ok(n) if n + 2 < data && n <= usize::from(u16::MAX) => {
                self.buf.truncate(start + n);
                self.buf[len_at..start].copy_from_slice(&(n as u16).to_le_bytes());
                true
            }
            _ => {
                self.buf.truncate(header_at);
                self.nblocks = nblocks;
                false
            }
        }
    }

    /// Appends `page` as an image block compressed as one LZ4 block if that takes fewer
    /// than `limit` bytes (and fits the 16-bit length field); returns its length. Else
    /// leaves the record as it was and returns None.
    fn push_lz4_image(&mut self, tag: &BufferTag, page: &[u8], limit: usize) -> Option<usize> {
        let header_at = self.buf.len();
        let nblocks = self.nblocks;
        self.block_header(tag, BLOCK_FLAG_IMAGE | BLOCK_FLAG_LZ4, 0);
        let start = self.buf.len();
        self.buf.resize(
            start + lz4_flex::block::get_maximum_output_size(page.len()),
            0,
        );
        match lz4_flex::block::compress_into(page, &mut self.buf[start..]) {
            Ok(n) if n < limit && n <= usize::from(u16::MAX) => {
                self.buf.truncate(start + n);
                self.buf[header_at + 10..header_at + 12].copy_from_slice(&(n as u16).to_le_bytes());
                Some(n)
            }
            _ => {
                self.buf.truncate(header_at);
                self.nblocks = nblocks;
                None
            }
        }
    }

    /// Adds byte ranges of `page` (their current contents).
    pub fn ranges(&mut self, tag: &BufferTag, page: &[u8], ranges: &[Range<usize>]) {
        self.shifted_ranges(tag, page, None, ranges);
    }

    /// [`Self::ranges`] after `shift` (see [`BlockChange::Shifted`]).
    pub fn shifted_ranges(
        &mut self,
        tag: &BufferTag,
        page: &[u8],
        shift: Option<Shift>,
        ranges: &[Range<usize>],
    ) {
        debug_assert!(disjoint(ranges), "ranges of one page overlap: {ranges:?}");
        self.ranges_header(tag, false, shift, ranges.len());
        for r in ranges {
            assert!(r.end <= page.len() && r.end <= u16::MAX as usize + 1 && r.start <= r.end);
            self.buf.extend_from_slice(&(r.start as u16).to_le_bytes());
            self.buf
                .extend_from_slice(&((r.end - r.start) as u16).to_le_bytes());
        }
        for r in ranges {
            self.buf.extend_from_slice(&page[r.clone()]);
        }
    }

    /// A transaction tree record: `xid`'s outcome (`flags`: FLAG_COMMIT or FLAG_ABORT),
    /// shared by the subtransactions `subxids`.
    pub fn xact_tree(xid: u32, flags: u8, subxids: &[u32]) -> Self {
        let mut b = RecordBuilder::new(RecordKind::XactTree, xid, flags, subxids.len() as u64);
        b.buf.reserve(subxids.len() * 4);
        for x in subxids {
            b.buf.extend_from_slice(&x.to_le_bytes());
        }
        b
    }

    /// A multixact creation record, by transaction `xid` (see [`MultiCreate`]).
    pub fn multi_create(xid: u32, m: &MultiCreate) -> Self {
        assert!(
            (2..=usize::from(u16::MAX)).contains(&m.members.len()),
            "a multixact has 2..=65535 members"
        );
        let mut b = RecordBuilder::new(RecordKind::MultiCreate, xid, 0, u64::from(m.multi));
        b.buf.reserve(MULTI_HEAD + m.members.len() * MULTI_MEMBER);
        b.buf.extend_from_slice(&m.start.to_le_bytes());
        b.buf
            .extend_from_slice(&(m.members.len() as u16).to_le_bytes());
        b.buf.extend_from_slice(&[0, 0]);
        b.buf.extend_from_slice(&m.rel.tablespace.to_le_bytes());
        b.buf.extend_from_slice(&m.rel.relation.to_le_bytes());
        for &(x, mode) in &m.members {
            b.buf.extend_from_slice(&x.to_le_bytes());
            b.buf.extend_from_slice(&[mode, 0, 0, 0]);
        }
        b
    }

    /// Full-page images in the record, and the bytes they take (compressed or not).
    pub fn images(&self) -> (u32, u64) {
        (self.images, self.image_bytes)
    }

    /// Encoded length so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether no block has been added.
    pub fn is_empty(&self) -> bool {
        self.nblocks == 0
    }

    /// Fixes everything but the position fields (incarnation, block count, length, CRC
    /// layout) and computes the CRC of the body: the expensive part of [`Self::stamp`],
    /// done before the inserter reserves log space. Adding a block afterwards unseals.
    pub fn seal(&mut self, incarnation: u32) {
        let len = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&len.to_le_bytes());
        self.buf[30..32].copy_from_slice(&self.nblocks.to_le_bytes());
        self.buf[40..44].copy_from_slice(&incarnation.to_le_bytes());
        self.buf[CRC_LAYOUT_AT] = CRC_LAYOUT_MARKED_PADDING;
        self.body_crc = Some(crc32c::crc32c(&self.buf[POSITION_FIELDS_END..]));
    }

    /// Stamps lsn and flushed into a sealed record and completes its CRC (20 header bytes
    /// folded into the body's CRC); returns the bytes to copy into the log.
    pub fn stamp(&mut self, lsn: Lsn, flushed: Lsn) -> &[u8] {
        let body = self.body_crc.expect("RecordBuilder::stamp after seal");
        self.buf[8..16].copy_from_slice(&lsn.0.to_le_bytes());
        self.buf[16..24].copy_from_slice(&flushed.0.to_le_bytes());
        let crc = fold_position_fields(body, &self.buf);
        self.buf[4..8].copy_from_slice(&crc.to_le_bytes());
        &self.buf
    }

    /// [`Self::seal`] and [`Self::stamp`] in one go.
    pub fn finish(&mut self, lsn: Lsn, flushed: Lsn, incarnation: u32) -> &[u8] {
        self.seal(incarnation);
        self.stamp(lsn, flushed)
    }
}

/// Whether `ranges` overlap nowhere (so their bytes never exceed the page; the decoder
/// relies on it).
fn disjoint(ranges: &[Range<usize>]) -> bool {
    let mut sorted: Vec<&Range<usize>> = ranges.iter().filter(|r| !r.is_empty()).collect();
    sorted.sort_by_key(|r| r.start);
    sorted.windows(2).all(|w| w[0].end <= w[1].start)
}

/// Rewrites an encoded record into an older CRC layout (0 or 1), as a writer before
/// layout 2 would have produced it: for tests of reading old logs.
#[cfg(test)]
pub(crate) fn rewrite_as_layout(rec: &mut [u8], layout: u8) {
    rec[CRC_LAYOUT_AT] = layout;
    let crc = match layout {
        CRC_LAYOUT_HEADER_FIRST => checksum_header_first(rec),
        CRC_LAYOUT_BODY_FIRST => {
            fold_position_fields(crc32c::crc32c(&rec[POSITION_FIELDS_END..]), rec)
        }
        _ => panic!("layout {layout} is not an older layout"),
    };
    rec[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// Layout 1's CRC: the body's CRC with bytes 0..4 and 8..24 appended.
fn fold_position_fields(body_crc: u32, rec: &[u8]) -> u32 {
    let crc = crc32c::crc32c_append(body_crc, &rec[0..4]);
    crc32c::crc32c_append(crc, &rec[8..POSITION_FIELDS_END])
}

/// The CRC a record of either layout should carry (None: unknown layout).
fn checksum(rec: &[u8]) -> Option<u32> {
    match rec[CRC_LAYOUT_AT] {
        CRC_LAYOUT_BODY_FIRST | CRC_LAYOUT_MARKED_PADDING => Some(fold_position_fields(
            crc32c::crc32c(&rec[POSITION_FIELDS_END..]),
            rec,
        )),
        CRC_LAYOUT_HEADER_FIRST => Some(checksum_header_first(rec)),
        _ => None,
    }
}

/// Layout 0's CRC: bytes 0..4 then 8..len.
fn checksum_header_first(rec: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&rec[0..4]), &rec[8..])
}

/// Why bytes at a position are not a valid record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    /// Zero length: padding, or never-written (zeroed) log.
    Zero,
    /// Fewer bytes available than the header or the record needs.
    Truncated {
        /// Bytes the header or the record needs.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// Length field out of range.
    Length(u32),
    /// The record says it belongs elsewhere (stale data from a recycled segment).
    WrongLsn {
        /// The position the record claims.
        found: u64,
    },
    /// The stored CRC does not match the record's bytes.
    Checksum {
        /// The CRC in the record.
        stored: u32,
        /// The CRC of the record's bytes.
        computed: u32,
    },
    /// Structurally wrong body (unknown kind, block overruns the record).
    Malformed(&'static str),
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Invalid::Zero => write!(f, "zero length (end of log or padding)"),
            Invalid::Truncated { need, have } => {
                write!(f, "record needs {need} bytes, only {have} present")
            }
            Invalid::Length(l) => write!(f, "record length {l} out of range"),
            Invalid::WrongLsn { found } => write!(f, "record claims position {}", Lsn(*found)),
            Invalid::Checksum { stored, computed } => {
                write!(
                    f,
                    "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
                )
            }
            Invalid::Malformed(why) => write!(f, "malformed record: {why}"),
        }
    }
}

/// The length a record at the start of `bytes` claims, if plausible.
pub fn peek_len(bytes: &[u8]) -> Result<usize, Invalid> {
    if bytes.len() < 4 {
        return Err(Invalid::Truncated {
            need: 4,
            have: bytes.len(),
        });
    }
    let len = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes"));
    if len == 0 {
        return Err(Invalid::Zero);
    }
    if (len as usize) < HEADER_SIZE || len as usize > MAX_RECORD_SIZE {
        return Err(Invalid::Length(len));
    }
    Ok(len as usize)
}

/// Decompresses one LZ4 block that must yield exactly `len` bytes; else `Malformed(what)`.
fn decompress_exact(src: &[u8], len: usize, what: &'static str) -> Result<Vec<u8>, Invalid> {
    let mut out = vec![0u8; len];
    match lz4_flex::block::decompress_into(src, &mut out) {
        Ok(got) if got == len => Ok(out),
        _ => Err(Invalid::Malformed(what)),
    }
}

/// Decodes the record that should start at `lsn` from `bytes` (which start there).
pub fn decode(bytes: &[u8], lsn: Lsn, page_size: usize) -> Result<Record, Invalid> {
    let len = peek_len(bytes)?;
    if bytes.len() < len {
        return Err(Invalid::Truncated {
            need: len,
            have: bytes.len(),
        });
    }
    let rec = &bytes[..len];
    let found = u64::from_le_bytes(rec[8..16].try_into().expect("8 bytes"));
    if found != lsn.0 {
        return Err(Invalid::WrongLsn { found });
    }
    let stored = u32::from_le_bytes(rec[4..8].try_into().expect("4 bytes"));
    let computed = checksum(rec).ok_or(Invalid::Malformed("unknown CRC layout"))?;
    if stored != computed {
        return Err(Invalid::Checksum { stored, computed });
    }
    let u16_at = |o: usize| u16::from_le_bytes([rec[o], rec[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes(rec[o..o + 4].try_into().expect("4 bytes"));
    let kind = RecordKind::from_u8(rec[28]).ok_or(Invalid::Malformed("unknown kind"))?;
    let nblocks = u16_at(30) as usize;
    let mut blocks = Vec::with_capacity(nblocks.min(64));
    let mut at = HEADER_SIZE;
    for _ in 0..nblocks {
        if at + BLOCK_HEADER_SIZE > len {
            return Err(Invalid::Malformed("block header overruns the record"));
        }
        let fork = ForkNumber::from_u8(rec[at + 8]).ok_or(Invalid::Malformed("unknown fork"))?;
        let tag = BufferTag::new(
            RelFileId::new(u32_at(at), u32_at(at + 4)),
            fork,
            u32_at(at + 12),
        );
        let bflags = rec[at + 9];
        let nranges = u16_at(at + 10) as usize;
        at += BLOCK_HEADER_SIZE;
        let shift = if bflags & BLOCK_FLAG_SHIFT != 0 {
            if bflags & BLOCK_FLAG_IMAGE != 0 {
                return Err(Invalid::Malformed("a page image with a shift"));
            }
            if at + SHIFT_SIZE > len {
                return Err(Invalid::Malformed("shift overruns the record"));
            }
            let sh = Shift {
                from: u16_at(at) as usize,
                to: u16_at(at + 2) as usize,
                len: u16_at(at + 4) as usize,
            };
            if sh.from + sh.len > page_size || sh.to + sh.len > page_size {
                return Err(Invalid::Malformed("shift overruns the page"));
            }
            at += SHIFT_SIZE;
            Some(sh)
        } else {
            None
        };
        if bflags & !(BLOCK_FLAG_IMAGE | BLOCK_FLAG_LZ4 | BLOCK_FLAG_SHIFT) != 0 {
            return Err(Invalid::Malformed("unknown block flags"));
        }
        let change = if bflags & BLOCK_FLAG_IMAGE != 0 && bflags & BLOCK_FLAG_LZ4 != 0 {
            let n = nranges;
            if at + n > len {
                return Err(Invalid::Malformed(
                    "compressed page image overruns the record",
                ));
            }
            let page = decompress_exact(
                &rec[at..at + n],
                page_size,
                "compressed page image does not decompress to one page",
            )?;
            at += n;
            BlockChange::Image(page)
        } else if bflags & BLOCK_FLAG_IMAGE != 0 {
            if at + page_size > len {
                return Err(Invalid::Malformed("page image overruns the record"));
            }
            at += page_size;
            BlockChange::Image(rec[at - page_size..at].to_vec())
        } else {
            // Ranges: their table, then their bytes, as they are or (`BLOCK_FLAG_LZ4`) as a
            // 16-bit length and one LZ4 block.
            let compressed = bflags & BLOCK_FLAG_LZ4 != 0;
            let table_end = at + RANGE_HEADER_SIZE * nranges;
            if table_end + if compressed { 2 } else { 0 } > len {
                return Err(Invalid::Malformed("range table overruns the record"));
            }
            let table: Vec<(u16, usize)> = (0..nranges)
                .map(|i| (u16_at(at + 4 * i), u16_at(at + 4 * i + 2) as usize))
                .collect();
            if table.iter().any(|&(off, n)| off as usize + n > page_size) {
                return Err(Invalid::Malformed("range overruns the page"));
            }
            let total: usize = table.iter().map(|&(_, n)| n).sum();
            // Ranges of one page are disjoint (the writer asserts it): more bytes than the
            // page is damage, refused before anything that size is allocated.
            if total > page_size {
                return Err(Invalid::Malformed(
                    "ranges of one page hold more bytes than the page",
                ));
            }
            let (data, end) = if compressed {
                let n = u16_at(table_end) as usize;
                let data_at = table_end + 2;
                if data_at + n > len {
                    return Err(Invalid::Malformed("compressed ranges overrun the record"));
                }
                let raw = decompress_exact(
                    &rec[data_at..data_at + n],
                    total,
                    "compressed ranges do not decompress to their lengths",
                )?;
                (std::borrow::Cow::Owned(raw), data_at + n)
            } else {
                if table_end + total > len {
                    return Err(Invalid::Malformed("range overruns the record"));
                }
                let data = &rec[table_end..table_end + total];
                (std::borrow::Cow::Borrowed(data), table_end + total)
            };
            let mut from = 0;
            let ranges = table
                .iter()
                .map(|&(off, n)| {
                    from += n;
                    (off, data[from - n..from].to_vec())
                })
                .collect();
            at = end;
            match shift {
                Some(shift) => BlockChange::Shifted { shift, ranges },
                None => BlockChange::Ranges(ranges),
            }
        };
        blocks.push(BlockRef { tag, change });
    }
    let extra = u64::from_le_bytes(rec[32..40].try_into().expect("8 bytes"));
    let mut subxids = Vec::new();
    if kind == RecordKind::XactTree {
        if nblocks != 0 || extra > ((len - at) / 4) as u64 || at + extra as usize * 4 != len {
            return Err(Invalid::Malformed(
                "transaction tree list does not fill the record",
            ));
        }
        subxids = rec[at..len]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        at = len;
    }
    let mut multi = None;
    if kind == RecordKind::MultiCreate {
        multi = Some(decode_multi(&rec[at..len], nblocks, extra)?);
        at = len;
    }
    if at != len {
        return Err(Invalid::Malformed("trailing bytes after the last block"));
    }
    Ok(Record {
        lsn,
        flushed: Lsn(u64::from_le_bytes(rec[16..24].try_into().expect("8 bytes"))),
        incarnation: u32_at(40),
        xid: u32_at(24),
        kind,
        flags: rec[29],
        extra,
        blocks,
        subxids,
        multi,
        len,
        marks_padding: rec[CRC_LAYOUT_AT] >= CRC_LAYOUT_MARKED_PADDING,
    })
}

/// The body of a multixact creation record (after no blocks), checked whole: an id in
/// range, 2 or more members filling the body exactly, modes 1..=4, at most one updater.
fn decode_multi(body: &[u8], nblocks: usize, extra: u64) -> Result<MultiCreate, Invalid> {
    let bad = Invalid::Malformed;
    if nblocks != 0 || body.len() < MULTI_HEAD {
        return Err(bad("multixact record without its member list"));
    }
    let multi = u32::try_from(extra)
        .ok()
        .filter(|&m| m != 0)
        .ok_or(bad("multixact id out of range"))?;
    let start = u32::from_le_bytes(body[0..4].try_into().expect("4 bytes"));
    let rel = RelFileId::new(
        u32::from_le_bytes(body[8..12].try_into().expect("4 bytes")),
        u32::from_le_bytes(body[12..16].try_into().expect("4 bytes")),
    );
    let count = usize::from(u16::from_le_bytes([body[4], body[5]]));
    if count < 2 || body.len() != MULTI_HEAD + count * MULTI_MEMBER || body[6..8] != [0, 0] {
        return Err(bad("multixact member list does not fill the record"));
    }
    let members: Vec<(u32, u8)> = body[MULTI_HEAD..]
        .chunks_exact(MULTI_MEMBER)
        .map(|c| {
            (
                u32::from_le_bytes(c[0..4].try_into().expect("4 bytes")),
                c[4],
            )
        })
        .collect();
    if body[MULTI_HEAD..]
        .chunks_exact(MULTI_MEMBER)
        .any(|c| !(1..=4).contains(&c[4]) || c[5..8] != [0, 0, 0])
    {
        return Err(bad("multixact member with an unknown mode"));
    }
    if members.iter().filter(|&&(_, mode)| mode >= 3).count() > 1 {
        return Err(bad("multixact with more than one updater"));
    }
    Ok(MultiCreate {
        multi,
        start,
        rel,
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tag(b: u32) -> BufferTag {
        BufferTag::new(RelFileId::new(1, 2), ForkNumber::Main, b)
    }

    /// A page shaped like a heap page: a header, a hole of zeros, tuples of a few
    /// repeated fields and blank-padded text (pgbench's accounts).
    fn heap_like_page(len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[..24].copy_from_slice(&[7; 24]);
        for (i, t) in p[len / 2..].chunks_mut(128).enumerate() {
            t[..4].copy_from_slice(&(i as u32).to_le_bytes());
            t[4..12].copy_from_slice(&[1, 0, 0, 0, 9, 0, 0, 0]);
            t[12..].fill(b' ');
        }
        p
    }

    /// Proves: [`RecordBuilder::ranges_lz4`] logs ranges of at least
    /// `RANGES_TRY_LZ4_BYTES` compressed when that is smaller, and they decode to exactly
    /// the ranges; smaller ranges, and large ranges of an incompressible page, stay plain;
    /// none of it counts as a full-page image; a record mixing them decodes; compressed
    /// bytes that pass the CRC yet do not decompress to the ranges' lengths are refused.
    #[test]
    fn compressed_ranges_larger_than_a_page_are_refused_before_any_allocation() {
        // Proves (F6): the decoder allocated the ranges' declared total (up to 65,535
        // ranges of a page each) before decompressing; a crafted or unlucky record with a
        // valid (unkeyed) CRC made it ask for half a gigabyte here, and more with larger
        // pages. Ranges of one page are disjoint, so their bytes never exceed the page.
        let mut b = RecordBuilder::new(RecordKind::Update, 1, 0, 0);
        b.block_header(&tag(1), BLOCK_FLAG_LZ4, u16::MAX);
        for _ in 0..u16::MAX {
            b.buf.extend_from_slice(&0u16.to_le_bytes());
            b.buf.extend_from_slice(&8192u16.to_le_bytes());
        }
        b.buf.extend_from_slice(&16u16.to_le_bytes());
        b.buf.extend_from_slice(&[0xAB; 16]);
        let bytes = b.finish(Lsn(4096), Lsn(0), 1).to_vec();
        assert_eq!(
            decode(&bytes, Lsn(4096), 8192).unwrap_err(),
            Invalid::Malformed("ranges of one page hold more bytes than the page")
        );
    }

    /// Proves: a shifted block (plain and compressed) decodes to its shift and ranges, and
    /// applying them in redo's order rebuilds the page; a shift that leaves the page, one
    /// on a page image, a truncated one and unknown block flags are refused.
    #[test]
    fn shifted_ranges_round_trip_and_bad_shifts_are_refused() {
        let before = heap_like_page(8192);
        let mut after = before.clone();
        let shift = Shift {
            from: 1000,
            to: 1016,
            len: 3000,
        };
        shift.apply(&mut after);
        after[1000..1016].fill(0x5A);
        after[16..18].copy_from_slice(&[1, 2]);
        let ranges = [16..18, 1000..1016];
        for lz4 in [false, true] {
            let mut b = RecordBuilder::new(RecordKind::Update, 1, 0, 0);
            if lz4 {
                b.shifted_ranges_lz4(&tag(1), &after, Some(shift), &ranges);
            } else {
                b.shifted_ranges(&tag(1), &after, Some(shift), &ranges);
            }
            assert!(
                b.len() < HEADER_SIZE + 100,
                "the moved bytes are not in the record"
            );
            let bytes = b.finish(Lsn(4096), Lsn(0), 1).to_vec();
            let r = decode(&bytes, Lsn(4096), 8192).unwrap();
            let BlockChange::Shifted {
                shift: got,
                ranges: rs,
            } = &r.blocks[0].change
            else {
                panic!("{:?}", r.blocks[0].change);
            };
            assert_eq!(*got, shift);
            let mut redo = before.clone();
            got.apply(&mut redo);
            for (off, d) in rs {
                redo[*off as usize..*off as usize + d.len()].copy_from_slice(d);
            }
            assert_eq!(redo, after);
        }
        // Damage, each with a valid CRC: the decoder must refuse it.
        let build = |bflags: u8, shift: [u16; 3], truncate: bool| {
            let mut b = RecordBuilder::new(RecordKind::Update, 1, 0, 0);
            b.block_header(&tag(1), bflags, 0);
            if truncate {
                b.buf.extend_from_slice(&shift[0].to_le_bytes());
            } else {
                for v in shift {
                    b.buf.extend_from_slice(&v.to_le_bytes());
                }
            }
            let bytes = b.finish(Lsn(4096), Lsn(0), 1).to_vec();
            decode(&bytes, Lsn(4096), 8192).unwrap_err()
        };
        let m = Invalid::Malformed;
        assert_eq!(
            build(BLOCK_FLAG_SHIFT, [8000, 0, 500], false),
            m("shift overruns the page")
        );
        assert_eq!(
            build(BLOCK_FLAG_SHIFT, [0, 8000, 500], false),
            m("shift overruns the page")
        );
        assert_eq!(
            build(BLOCK_FLAG_SHIFT | BLOCK_FLAG_IMAGE, [0, 8, 8], false),
            m("a page image with a shift")
        );
        assert_eq!(
            build(BLOCK_FLAG_SHIFT, [0, 8, 8], true),
            m("shift overruns the record")
        );
        assert_eq!(build(8, [0, 8, 8], false), m("unknown block flags"));
    }

    #[test]
    fn large_ranges_are_compressed_when_smaller() {
        let page = heap_like_page(8192);
        let big = 2048..2048 + 5000;
        let small = 100..300;
        let mut b = RecordBuilder::new(RecordKind::Update, 1, 0, 0);
        let two = [big.clone(), 7500..7600];
        b.ranges_lz4(&tag(1), &page, &two);
        let after_first = b.len();
        b.ranges_lz4(&tag(2), &page, std::slice::from_ref(&small));
        // xorshift64: no pattern LZ4 can use.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let noise: Vec<u8> = (0..8192)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        b.ranges_lz4(&tag(3), &noise, std::slice::from_ref(&big));
        assert_eq!(b.images(), (0, 0), "not full-page writes");
        assert!(
            after_first < HEADER_SIZE + BLOCK_HEADER_SIZE + 8192 / 4,
            "5,100 bytes of ranges compressed to {} bytes",
            after_first - HEADER_SIZE - BLOCK_HEADER_SIZE
        );
        assert_eq!(b.buf[HEADER_SIZE + 9], BLOCK_FLAG_LZ4, "compressed ranges");
        let mut bad = b.clone();
        let bytes = b.finish(Lsn(8192), Lsn(0), 1).to_vec();
        let r = decode(&bytes, Lsn(8192), 8192).unwrap();
        assert_eq!(r.blocks.len(), 3);
        assert!(
            r.blocks[0].change
                == BlockChange::Ranges(vec![
                    (2048, page[big.clone()].to_vec()),
                    (7500, page[7500..7600].to_vec())
                ])
        );
        assert!(r.blocks[1].change == BlockChange::Ranges(vec![(100, page[small].to_vec())]));
        assert!(
            r.blocks[2].change == BlockChange::Ranges(vec![(2048, noise[big].to_vec())]),
            "an incompressible page keeps its ranges"
        );
        // Damage: the second range's length grown by one, then a CRC recomputed over it.
        let len_at = HEADER_SIZE + BLOCK_HEADER_SIZE + 4 + 2;
        bad.buf[len_at..len_at + 2].copy_from_slice(&101u16.to_le_bytes());
        let bytes = bad.finish(Lsn(8192), Lsn(0), 1).to_vec();
        assert!(matches!(
            decode(&bytes, Lsn(8192), 8192),
            Err(Invalid::Malformed(_))
        ));
    }

    /// Proves: `wal_compression = lz4` logs a compressible page in fewer bytes and it
    /// decodes to exactly the page; an incompressible page is logged as it is; the image
    /// counters count both; and compressed bytes that pass the CRC yet do not decompress
    /// to one page are refused as malformed, never returned.
    #[test]
    fn compressed_images_round_trip_and_bad_ones_are_refused() {
        let page = heap_like_page(8192);
        let mut plain = RecordBuilder::new(RecordKind::Update, 1, 0, 0);
        plain.image(&tag(1), &page);
        let mut b = RecordBuilder::new(RecordKind::Update, 1, 0, 0);
        b.image_lz4(&tag(1), &page);
        let noise: Vec<u8> = (0..8192u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        b.image_lz4(&tag(2), &noise);
        let (n, image_bytes) = b.images();
        assert_eq!(n, 2);
        assert!(
            image_bytes < 8192 + 8192 / 4,
            "the heap-like page compressed to {} bytes",
            image_bytes - 8192
        );
        assert_eq!(plain.images(), (1, 8192));
        let bytes = b.finish(Lsn(8192), Lsn(0), 1).to_vec();
        let r = decode(&bytes, Lsn(8192), 8192).unwrap();
        assert_eq!(r.blocks[0].change, BlockChange::Image(page.clone()));
        assert_eq!(r.blocks[1].change, BlockChange::Image(noise.clone()));
        assert_eq!(
            bytes[HEADER_SIZE + 9],
            BLOCK_FLAG_IMAGE | BLOCK_FLAG_LZ4,
            "first image compressed"
        );
        // Damage inside the compressed bytes, then a CRC recomputed over the damage, as a
        // bug in a writer would produce: the decoder must not return a wrong page.
        let clen = u16::from_le_bytes([bytes[HEADER_SIZE + 10], bytes[HEADER_SIZE + 11]]);
        let mut refused = 0;
        for cut in [1usize, 2, 5, usize::from(clen) / 2] {
            let mut d = b.clone();
            let at = HEADER_SIZE + BLOCK_HEADER_SIZE;
            // A shorter stream that claims to be one page.
            let short = usize::from(clen) - cut;
            d.buf[HEADER_SIZE + 10..HEADER_SIZE + 12]
                .copy_from_slice(&(short as u16).to_le_bytes());
            d.buf.drain(at + short..at + usize::from(clen));
            let bad = d.finish(Lsn(8192), Lsn(0), 1).to_vec();
            match decode(&bad, Lsn(8192), 8192) {
                Err(Invalid::Malformed(_)) => refused += 1,
                Ok(r) => assert_ne!(
                    r.blocks[0].change,
                    BlockChange::Image(page.clone()),
                    "a cut stream decoded to the page"
                ),
                Err(e) => panic!("unexpected {e}"),
            }
        }
        assert!(refused >= 3, "only {refused} of 4 cut streams refused");
    }

    #[test]
    fn round_trip_and_every_damage_is_caught() {
        let page: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
        let mut b = RecordBuilder::new(RecordKind::Update, 7, FLAG_COMMIT, 0);
        b.image(&tag(1), &page);
        b.ranges(&tag(2), &page, &[10..20, 100..101]);
        let bytes = b.finish(Lsn(4096), Lsn(1024), 3).to_vec();
        let r = decode(&bytes, Lsn(4096), 4096).unwrap();
        assert_eq!(
            (r.xid, r.kind, r.flags, r.flushed),
            (7, RecordKind::Update, FLAG_COMMIT, Lsn(1024))
        );
        assert_eq!(r.blocks[0].change, BlockChange::Image(page.clone()));
        assert_eq!(
            r.blocks[1].change,
            BlockChange::Ranges(vec![(10, page[10..20].to_vec()), (100, vec![page[100]])])
        );
        assert_eq!(r.end(), Lsn(align(4096 + bytes.len() as u64)));
        assert_eq!(
            decode(&bytes, Lsn(8192), 4096).unwrap_err(),
            Invalid::WrongLsn { found: 4096 }
        );
        assert!(matches!(
            decode(&bytes[..100], Lsn(4096), 4096),
            Err(Invalid::Truncated { .. })
        ));
        for pos in (0..bytes.len()).step_by(97) {
            let mut d = bytes.clone();
            d[pos] ^= 0x40;
            assert!(
                decode(&d, Lsn(4096), 4096).is_err(),
                "flip at {pos} undetected"
            );
        }
        assert_eq!(decode(&[0u8; 64], Lsn(0), 4096).unwrap_err(), Invalid::Zero);
    }

    /// A transaction tree record carries its subtransaction list through a round trip; a
    /// list that does not fill the record exactly is refused, never misread.
    #[test]
    fn transaction_tree_records_round_trip() {
        let subs: Vec<u32> = (100..170).collect();
        let mut b = RecordBuilder::xact_tree(99, FLAG_COMMIT, &subs);
        let bytes = b.finish(Lsn(64), Lsn(0), 1).to_vec();
        let r = decode(&bytes, Lsn(64), 4096).unwrap();
        assert_eq!(
            (r.xid, r.kind, r.flags, r.subxids.clone(), r.blocks.len()),
            (99, RecordKind::XactTree, FLAG_COMMIT, subs, 0)
        );
        let mut bad = RecordBuilder::xact_tree(99, FLAG_ABORT, &[5, 6]);
        bad.buf[32] = 3; // claims three ids, holds two
        let bytes = bad.finish(Lsn(64), Lsn(0), 1).to_vec();
        assert!(matches!(
            decode(&bytes, Lsn(64), 4096),
            Err(Invalid::Malformed(_))
        ));
        let empty = RecordBuilder::xact_tree(7, FLAG_ABORT, &[])
            .finish(Lsn(0), Lsn(0), 1)
            .to_vec();
        assert!(decode(&empty, Lsn(0), 4096).unwrap().subxids.is_empty());
    }

    /// A multixact creation record carries its members through a round trip; a body that
    /// lies about its count, an unknown mode or two updaters are refused.
    #[test]
    fn multixact_records_round_trip_and_bad_bodies_are_refused() {
        let m = MultiCreate {
            multi: 42,
            start: 1000,
            rel: RelFileId::new(3, 77),
            members: vec![(7, 2), (9, 3), (11, 1)],
        };
        let mut b = RecordBuilder::multi_create(9, &m);
        let bytes = b.finish(Lsn(64), Lsn(0), 1).to_vec();
        let r = decode(&bytes, Lsn(64), 4096).unwrap();
        assert_eq!((r.xid, r.kind, r.extra), (9, RecordKind::MultiCreate, 42));
        assert_eq!(r.multi, Some(m.clone()));
        let corrupt = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut b = RecordBuilder::multi_create(9, &m);
            f(&mut b.buf);
            let bytes = b.finish(Lsn(64), Lsn(0), 1).to_vec();
            decode(&bytes, Lsn(64), 4096)
        };
        let at = HEADER_SIZE;
        for f in [
            &(|b: &mut Vec<u8>| b[at + 4] = 4) as &dyn Fn(&mut Vec<u8>), // claims 4 members
            &|b: &mut Vec<u8>| b[at + 16 + 4] = 0,                       // mode 0
            &|b: &mut Vec<u8>| b[at + 16 + 4] = 4,                       // two updaters
            &|b: &mut Vec<u8>| b[32..40].copy_from_slice(&0u64.to_le_bytes()), // id 0
            &|b: &mut Vec<u8>| b.truncate(b.len() - 8),                  // a member short
        ] {
            assert!(matches!(corrupt(f), Err(Invalid::Malformed(_))));
        }
    }

    /// Logs written before CRC layout 2 (layout 1: same CRC, bare-zero padding) and before
    /// layout 1 (header first, byte 44 zero) still decode, saying their padding is not
    /// marked; a record's layout byte is protected like any other byte. How: a layout-2
    /// record is rewritten into the older layouts by hand (byte 44 set, the CRC restored).
    #[test]
    fn records_of_the_old_crc_layouts_still_decode() {
        let page = vec![9u8; 4096];
        let mut b = RecordBuilder::new(RecordKind::Update, 5, FLAG_COMMIT, 0);
        b.ranges(&tag(3), &page, std::slice::from_ref(&(0..40)));
        let mut bytes = b.finish(Lsn(8192), Lsn(4096), 2).to_vec();
        assert_eq!(bytes[CRC_LAYOUT_AT], CRC_LAYOUT_MARKED_PADDING);
        let new = decode(&bytes, Lsn(8192), 4096).unwrap();
        assert!(new.marks_padding);
        let unmarked = Record {
            marks_padding: false,
            ..new.clone()
        };
        bytes[CRC_LAYOUT_AT] = CRC_LAYOUT_BODY_FIRST;
        let crc = fold_position_fields(crc32c::crc32c(&bytes[POSITION_FIELDS_END..]), &bytes);
        bytes[4..8].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(&bytes, Lsn(8192), 4096).unwrap(), unmarked);
        bytes[CRC_LAYOUT_AT] = CRC_LAYOUT_HEADER_FIRST;
        let old_crc = checksum_header_first(&bytes);
        bytes[4..8].copy_from_slice(&old_crc.to_le_bytes());
        assert_eq!(decode(&bytes, Lsn(8192), 4096).unwrap(), unmarked);
        bytes[CRC_LAYOUT_AT] = 7;
        assert_eq!(
            decode(&bytes, Lsn(8192), 4096).unwrap_err(),
            Invalid::Malformed("unknown CRC layout")
        );
        for layout in [CRC_LAYOUT_BODY_FIRST, CRC_LAYOUT_MARKED_PADDING] {
            bytes[CRC_LAYOUT_AT] = layout;
            assert!(matches!(
                decode(&bytes, Lsn(8192), 4096),
                Err(Invalid::Checksum { .. })
            ));
        }
    }

    /// A pad marker reads as "no record" (zero length), is never bare zeros, and names
    /// its position and life: the same bytes elsewhere or in another life are not one.
    #[test]
    fn pad_markers_name_their_position_and_life() {
        let m = pad_marker(4096 + 200, 3);
        assert_eq!(peek_len(&m), Err(Invalid::Zero));
        assert_ne!(m, [0u8; PAD_MARKER_LEN]);
        assert!(is_pad_marker(&m, 4096 + 200, 3));
        assert!(!is_pad_marker(&m, 4096 + 208, 3));
        assert!(!is_pad_marker(&m, 4096 + 200, 4));
        assert!(!is_pad_marker(&m[..7], 4096 + 200, 3));
        assert!(!is_pad_marker(&[0u8; PAD_MARKER_LEN], 4096 + 200, 3));
    }

    /// Sealing before reservation and stamping after gives the same bytes as finishing in
    /// one go, at any position; a block added after sealing unseals the record.
    #[test]
    fn seal_then_stamp_equals_finish() {
        let page = vec![1u8; 4096];
        let mut a = RecordBuilder::new(RecordKind::Update, 1, 0, 0);
        a.ranges(&tag(1), &page, std::slice::from_ref(&(8..16)));
        let mut b = a.clone();
        b.seal(4);
        for lsn in [0u64, 8, 1 << 40] {
            let x = a.finish(Lsn(lsn), Lsn(lsn / 2), 4).to_vec();
            let y = b.stamp(Lsn(lsn), Lsn(lsn / 2)).to_vec();
            assert_eq!(x, y);
            assert!(decode(&y, Lsn(lsn), 4096).is_ok());
        }
        b.ranges(&tag(2), &page, std::slice::from_ref(&(0..1)));
        assert!(b.body_crc.is_none(), "a later block unseals");
    }

    proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600), lsn in 0u64..4) {
            let _ = decode(&bytes, Lsn(lsn), 4096);
        }

        #[test]
        fn decoding_damaged_records_never_panics(flip in 0usize..200, bit in 0u8..8, len_hack in any::<u32>()) {
            let page = vec![3u8; 4096];
            let mut b = RecordBuilder::new(RecordKind::Update, 1, 0, 0);
            b.ranges(&tag(0), &page, &[0..50, 60..70]);
            let mut bytes = b.finish(Lsn(0), Lsn(0), 0).to_vec();
            let i = flip % bytes.len();
            bytes[i] ^= 1 << bit;
            let _ = decode(&bytes, Lsn(0), 4096);
            bytes[0..4].copy_from_slice(&len_hack.to_le_bytes());
            let _ = decode(&bytes, Lsn(0), 4096);
        }

        /// Arbitrary damage to a compressed image under a valid CRC (what only a writer's
        /// bug could produce): decoding returns an error or a page, never panics.
        #[test]
        fn decoding_damaged_compressed_images_never_panics(flips in proptest::collection::vec((0usize..4096, any::<u8>()), 1..8)) {
            let page = heap_like_page(4096);
            let mut b = RecordBuilder::new(RecordKind::Update, 1, 0, 0);
            b.image_lz4(&tag(0), &page);
            let at = HEADER_SIZE + BLOCK_HEADER_SIZE;
            let n = b.buf.len() - at;
            for (i, x) in flips {
                b.buf[at + i % n] ^= x;
            }
            let bytes = b.finish(Lsn(0), Lsn(0), 0).to_vec();
            if let Ok(r) = decode(&bytes, Lsn(0), 4096) {
                prop_assert!(matches!(&r.blocks[0].change, BlockChange::Image(p) if p.len() == 4096));
            }
        }
    }
}
