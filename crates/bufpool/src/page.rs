//! Page format: the header every page carries and its CRC32C checksum.
//!
//! Owns: the on-disk layout of the first [`PAGE_HEADER_SIZE`] bytes of every page, the
//! checksum, and the rule for what counts as a valid page read from storage.
//!
//! ```text
//! offset size field
//!      0    8 lsn            u64 LE: LSN of the last WAL record that changed the page
//!      8    4 checksum       u32 LE: CRC32C (Castagnoli), see below
//!     12    2 flags          u16 LE: page flags (owned by the access methods)
//!     14    2 layout         u16 LE: (format version << 8) | log2(page size)
//!     16    2 lower          u16 LE: start of free space (slotted pages)
//!     18    2 upper          u16 LE: end of free space (slotted pages)
//!     20    2 special        u16 LE: start of the access method's special area
//!     22    2 reserved       zero
//!     24    - contents
//! ```
//!
//! Checksum: CRC32C over the page's identity (tablespace, relation, fork, block: 13 bytes,
//! little-endian) followed by the page with the checksum field left out. The identity is
//! not stored, so a page written to the wrong block or file fails verification.
//! Invariants: every page this library writes has a non-zero `layout` and a valid checksum;
//! an all-zero page (extended, never written) is valid and reads as a new, empty page.
//! Locks: none; callers hold the buffer's content lock (or own a private copy).

use crate::types::{BufferTag, Lsn};

/// Bytes of the page header.
pub const PAGE_HEADER_SIZE: usize = 24;
/// Format version stored in every written page's `layout` field.
pub const PAGE_FORMAT_VERSION: u16 = 1;
/// Allowed page sizes: PostgreSQL's `--with-blocksize` choices that an 8 KiB-native
/// engine sensibly supports (4, 8, 16, 32 KiB).
pub const PAGE_SIZES: [usize; 4] = [4096, 8192, 16384, 32768];
/// Default page size (PostgreSQL's BLCKSZ).
pub const DEFAULT_PAGE_SIZE: usize = 8192;
/// Largest page size; bounds scratch buffers.
pub const MAX_PAGE_SIZE: usize = 32768;

const OFF_LSN: usize = 0;
const OFF_CHECKSUM: usize = 8;
const OFF_FLAGS: usize = 12;
const OFF_LAYOUT: usize = 14;
const OFF_LOWER: usize = 16;
const OFF_UPPER: usize = 18;
const OFF_SPECIAL: usize = 20;

const _: () = assert!(OFF_SPECIAL + 4 == PAGE_HEADER_SIZE);
const _: () = assert!(PAGE_SIZES[PAGE_SIZES.len() - 1] == MAX_PAGE_SIZE);
// lower/upper/special are u16 offsets: the end of the largest page must be representable.
const _: () = assert!(MAX_PAGE_SIZE <= u16::MAX as usize);

/// Whether `size` is an allowed page size.
pub fn is_valid_page_size(size: usize) -> bool {
    PAGE_SIZES.contains(&size)
}

#[inline(always)]
fn get_u16(page: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([page[off], page[off + 1]])
}

#[inline]
fn put_u16(page: &mut [u8], off: usize, v: u16) {
    page[off..off + 2].copy_from_slice(&v.to_le_bytes());
}

/// The page LSN.
#[inline]
pub fn lsn(page: &[u8]) -> Lsn {
    Lsn(u64::from_le_bytes(
        page[OFF_LSN..OFF_LSN + 8].try_into().expect("8 bytes"),
    ))
}

/// Sets the page LSN (the caller holds the exclusive content lock).
#[inline]
pub fn set_lsn(page: &mut [u8], lsn: Lsn) {
    page[OFF_LSN..OFF_LSN + 8].copy_from_slice(&lsn.0.to_le_bytes());
}

/// The page flags (owned by the access methods).
pub fn flags(page: &[u8]) -> u16 {
    get_u16(page, OFF_FLAGS)
}

/// Sets the page flags.
pub fn set_flags(page: &mut [u8], flags: u16) {
    put_u16(page, OFF_FLAGS, flags);
}

/// Start of free space (slotted pages): an offset in the page, in bytes.
#[inline(always)]
pub fn lower(page: &[u8]) -> u16 {
    get_u16(page, OFF_LOWER)
}

/// End of free space (slotted pages): an offset in the page, in bytes.
#[inline(always)]
pub fn upper(page: &[u8]) -> u16 {
    get_u16(page, OFF_UPPER)
}

/// Start of the access method's special area: an offset in the page, in bytes.
pub fn special(page: &[u8]) -> u16 {
    get_u16(page, OFF_SPECIAL)
}

/// Whether the page has never been initialized (its layout field is zero).
#[inline(always)]
pub fn is_new(page: &[u8]) -> bool {
    get_u16(page, OFF_LAYOUT) == 0
}

/// Clears what no log record decides on any page: the checksum (stamped at write) and the
/// free space between `lower` and `upper` (a compaction leaves old bytes there, which no
/// record carries). For comparing a page rebuilt by recovery with the live run's image at
/// the same LSN (PostgreSQL's `mask_page_lsn_and_checksum` and `mask_unused_space`); an
/// access method masks its own unlogged bits on top (the heap's hint bits).
pub fn mask_unlogged(page: &mut [u8]) {
    page[OFF_CHECKSUM..OFF_CHECKSUM + 4].fill(0);
    if is_new(page) {
        return;
    }
    let (lower, upper) = (lower(page) as usize, upper(page) as usize);
    if PAGE_HEADER_SIZE <= lower && lower <= upper && upper <= page.len() {
        page[lower..upper].fill(0);
    }
}

/// Initializes an empty page: header with free space spanning the page up to a special
/// area of `special_size` bytes at its end.
pub fn init(page: &mut [u8], special_size: usize) {
    let size = page.len();
    debug_assert!(is_valid_page_size(size));
    assert!(
        special_size <= size - PAGE_HEADER_SIZE,
        "special area larger than the page"
    );
    page.fill(0);
    put_u16(page, OFF_LAYOUT, layout_word(size));
    put_u16(page, OFF_LOWER, PAGE_HEADER_SIZE as u16);
    let special = (size - special_size) as u16;
    put_u16(page, OFF_UPPER, special);
    put_u16(page, OFF_SPECIAL, special);
}

fn layout_word(size: usize) -> u16 {
    (PAGE_FORMAT_VERSION << 8) | size.trailing_zeros() as u16
}

/// Computes the checksum of `page` as it would be stored for `tag`.
#[inline]
pub fn compute_checksum(page: &[u8], tag: &BufferTag) -> u32 {
    let crc = crc32c::crc32c(&tag.identity_bytes());
    let crc = crc32c::crc32c_append(crc, &page[..OFF_CHECKSUM]);
    crc32c::crc32c_append(crc, &page[OFF_CHECKSUM + 4..])
}

/// Stamps the checksum into a page about to be written (a private copy: nobody else may be
/// changing it). A page that was never initialized gets its layout word set first, so that a
/// written page is never mistaken for an all-zero one.
pub fn set_checksum(page: &mut [u8], tag: &BufferTag) {
    if is_new(page) {
        put_u16(page, OFF_LAYOUT, layout_word(page.len()));
    }
    let c = compute_checksum(page, tag);
    page[OFF_CHECKSUM..OFF_CHECKSUM + 4].copy_from_slice(&c.to_le_bytes());
}

/// The stored checksum field.
pub fn stored_checksum(page: &[u8]) -> u32 {
    u32::from_le_bytes(
        page[OFF_CHECKSUM..OFF_CHECKSUM + 4]
            .try_into()
            .expect("4 bytes"),
    )
}

/// Why a page read from storage was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageProblem {
    /// The stored checksum does not match the contents and identity.
    Checksum {
        /// The checksum computed from the page as read and its identity.
        expected: u32,
        /// The checksum stored in the page.
        found: u32,
    },
    /// The layout word names another page size or an unknown format version.
    Layout {
        /// The layout word stored in the page.
        found: u16,
    },
    /// The page's LSN lies past the end of the log: the page was written after log
    /// records the log no longer has (a corrupt record in its last durable stretch read
    /// as the end of the log), so what the page holds cannot be trusted.
    LsnPastEndOfLog {
        /// The page's LSN.
        lsn: u64,
        /// Where the log ends: its end now, or where recovery ended it when the LSN falls
        /// in the records it lost.
        end: u64,
    },
}

impl std::fmt::Display for PageProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PageProblem::Checksum { expected, found } => write!(
                f,
                "checksum mismatch: stored {found:#010x}, computed {expected:#010x}"
            ),
            PageProblem::Layout { found } => write!(f, "unknown page layout word {found:#06x}"),
            PageProblem::LsnPastEndOfLog { lsn, end } => write!(
                f,
                "page LSN {lsn} is past the end of the log at {end}: the log lost records \
                 this page was written after"
            ),
        }
    }
}

/// Verifies a page just read from storage for `tag`. An all-zero page is valid.
#[inline]
pub fn verify(page: &[u8], tag: &BufferTag) -> Result<(), PageProblem> {
    let found = stored_checksum(page);
    let expected = compute_checksum(page, tag);
    if found == expected {
        let layout = get_u16(page, OFF_LAYOUT);
        if layout != layout_word(page.len()) {
            return Err(PageProblem::Layout { found: layout });
        }
        return Ok(());
    }
    // Only the slow path checks for the all-zero page, so a normal read costs one CRC.
    if page.iter().all(|&b| b == 0) {
        return Ok(());
    }
    Err(PageProblem::Checksum { expected, found })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ForkNumber, RelFileId};

    fn tag(block: u32) -> BufferTag {
        BufferTag::new(RelFileId::new(0, 16384), ForkNumber::Main, block)
    }

    #[test]
    fn written_page_verifies_and_bit_flips_do_not() {
        for &size in &PAGE_SIZES {
            let mut p = vec![0u8; size];
            init(&mut p, 16);
            p[100] = 7;
            set_lsn(&mut p, Lsn(99));
            set_checksum(&mut p, &tag(3));
            assert_eq!(verify(&p, &tag(3)), Ok(()));
            assert_eq!(lsn(&p), Lsn(99));
            for pos in [0, 9, 13, 100, size - 1] {
                let mut q = p.clone();
                q[pos] ^= 0x10;
                assert!(
                    verify(&q, &tag(3)).is_err(),
                    "flip at {pos} undetected (size {size})"
                );
            }
        }
    }

    #[test]
    fn page_at_wrong_block_is_detected() {
        let mut p = vec![0u8; 8192];
        init(&mut p, 0);
        set_checksum(&mut p, &tag(5));
        assert!(matches!(
            verify(&p, &tag(6)),
            Err(PageProblem::Checksum { .. })
        ));
        let other_rel = BufferTag::new(RelFileId::new(0, 16385), ForkNumber::Main, 5);
        assert!(verify(&p, &other_rel).is_err());
    }

    #[test]
    fn all_zero_page_is_valid_and_new() {
        let p = vec![0u8; 8192];
        assert_eq!(verify(&p, &tag(0)), Ok(()));
        assert!(is_new(&p));
    }

    #[test]
    fn page_of_other_size_is_refused() {
        let mut p = vec![0u8; 8192];
        init(&mut p, 0);
        // Pretend it was a 4 KiB page: rewrite the layout word, re-checksum.
        put_u16(&mut p, OFF_LAYOUT, layout_word(4096));
        set_checksum(&mut p, &tag(0));
        assert!(matches!(
            verify(&p, &tag(0)),
            Err(PageProblem::Layout { .. })
        ));
    }

    #[test]
    fn init_sets_free_space_bounds() {
        let mut p = vec![0u8; 8192];
        init(&mut p, 16);
        assert_eq!(lower(&p) as usize, PAGE_HEADER_SIZE);
        assert_eq!(upper(&p), 8192 - 16);
        assert_eq!(special(&p), 8192 - 16);
        assert!(!is_new(&p));
    }
}
