//! B-tree page layout: fixed-width entries in a sorted array, and the meta page.
//!
//! Tree pages (every block but 0):
//!
//! ```text
//! [page header 24 B][entry 0][entry 1] ... [entry n-1] → free space ← [special 24 B]
//!                    ^ 24                             ^ lower       ^ upper = special
//!                                                                     = page size - 24
//! leaf entry (16 B):     0 key i64 LE   8 value u64 LE (the caller's opaque heap pointer)
//! internal entry (24 B): 0 separator key i64 LE   8 separator value u64 LE
//!                        16 child block u32 LE     20 reserved u32 (zero)
//! special (24 B): 0 level u16 (0 = leaf)   2 flags u16   4 right link u32 (u32::MAX: none)
//!                 8 high key i64   16 high value u64   (meaningless when RIGHTMOST)
//! flags: ROOT             the root (exactly the page the meta page names)
//!        RIGHTMOST        last page of its level: no right link, no high key
//!        INCOMPLETE_SPLIT the right sibling has no downlink in the parent level yet
//! ```
//!
//! Keys are ordered as (key, value) pairs ([`Pair`]), so entries are unique and duplicates
//! of a key need no special case. Separators and high keys are pairs too, which is why an
//! internal entry needs 24 bytes (a 16-byte separator and the child) where a leaf entry
//! needs 16. The entries of a page are strictly ascending; binary search finds a position.
//! A page covers the key range [low key, high key): its low key is its left sibling's high
//! key (minus infinity for the leftmost page of a level), and every entry lies in that
//! range. On internal pages entry i = (separator, child): the child covers [separator i,
//! separator i+1); entry 0's separator is stored as the page's low key ([`MIN_PAIR`] on the
//! leftmost page, never a real separator) but searches treat it as minus infinity.
//! Capacities: 4 KiB page 253 leaf / 168 internal entries, 8 KiB 509 / 339, 16 KiB
//! 1021 / 680, 32 KiB 2045 / 1363.
//!
//! Meta page (block 0, `page::init` with no special area):
//!
//! ```text
//! 24 magic u32 "BTRE"   28 version u32   32 flags u32 (bit 0: unique)
//! 36 root block u32     40 root level u32   44 reserved u32   (lower = 48)
//! ```
//!
//! Invariants: `24 <= lower = 24 + entry size × n <= page size - 24`; `special` = page
//! size - 24; a page's level never changes once initialized. Readers never panic on a damaged page
//! (counts are clamped to the capacity): [`BtPage::validate`] reports what is wrong.
//! Locks: none; callers hold the buffer's content lock (exclusive to change).

use std::ops::Range;

use crate::page::{self, PAGE_HEADER_SIZE};
use crate::page_delta::PageDelta;

/// A key as stored and compared: (key, value).
pub type Pair = (i64, u64);

/// The smallest pair: the stored separator of the leftmost internal page's first entry.
pub const MIN_PAIR: Pair = (i64::MIN, 0);
/// Bytes of a leaf entry.
pub const LEAF_ENTRY_SIZE: usize = 16;
/// Bytes of an internal entry.
pub const INTERNAL_ENTRY_SIZE: usize = 24;
/// Bytes of the special area of a tree page.
pub const SPECIAL_SIZE: usize = 24;
/// "No block" in a right link.
pub const NO_BLOCK: u32 = u32::MAX;

/// The root page.
pub const ROOT: u16 = 1 << 0;
/// The last page of its level (no right link, no high key).
pub const RIGHTMOST: u16 = 1 << 1;
/// The right sibling's downlink has not been inserted into the parent level yet.
pub const INCOMPLETE_SPLIT: u16 = 1 << 2;
const KNOWN_FLAGS: u16 = ROOT | RIGHTMOST | INCOMPLETE_SPLIT;

/// Meta page magic ("BTRE" read as a big-endian word).
pub const META_MAGIC: u32 = 0x4254_5245;
/// Meta page format version.
pub const META_VERSION: u32 = 1;
/// Meta flag: the index is unique on the key.
pub const META_UNIQUE: u32 = 1;

const OFF_LOWER: usize = 16; // page header field `lower` (see page.rs)
const SP_LEVEL: usize = 0;
const SP_FLAGS: usize = 2;
const SP_RIGHT: usize = 4;
const SP_HIGH: usize = 8;

const META_OFF_MAGIC: usize = 24;
const META_OFF_VERSION: usize = 28;
const META_OFF_FLAGS: usize = 32;
const META_OFF_ROOT: usize = 36;
const META_OFF_LEVEL: usize = 40;
const META_END: usize = 48;

#[inline]
fn get_u16(p: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([p[o], p[o + 1]])
}

#[inline]
fn get_u32(p: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(p[o..o + 4].try_into().expect("4 bytes"))
}

#[inline]
fn get_pair(p: &[u8], o: usize) -> Pair {
    (
        i64::from_le_bytes(p[o..o + 8].try_into().expect("8 bytes")),
        u64::from_le_bytes(p[o + 8..o + 16].try_into().expect("8 bytes")),
    )
}

#[inline]
fn put_u16(p: &mut [u8], o: usize, v: u16) {
    p[o..o + 2].copy_from_slice(&v.to_le_bytes());
}

#[inline]
fn put_u32(p: &mut [u8], o: usize, v: u32) {
    p[o..o + 4].copy_from_slice(&v.to_le_bytes());
}

#[inline]
fn pair_bytes(v: Pair) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..8].copy_from_slice(&v.0.to_le_bytes());
    b[8..16].copy_from_slice(&v.1.to_le_bytes());
    b
}

/// Bytes of one entry on a page of `level`.
#[inline]
pub const fn entry_size(level: u16) -> usize {
    if level == 0 {
        LEAF_ENTRY_SIZE
    } else {
        INTERNAL_ENTRY_SIZE
    }
}

/// Byte offset of entry `i` on a page of `level`.
#[inline]
pub const fn entry_offset(level: u16, i: usize) -> usize {
    PAGE_HEADER_SIZE + i * entry_size(level)
}

/// Entries a tree page of `page_size` bytes at `level` holds.
pub const fn capacity_for(page_size: usize, level: u16) -> usize {
    (page_size - PAGE_HEADER_SIZE - SPECIAL_SIZE) / entry_size(level)
}

/// The separator between two adjacent leaf entries `left < right`: the smallest pair
/// above `left` that is at most `right`, with the value truncated to 0 when the keys
/// differ (PostgreSQL's suffix truncation). In a unique index every separator therefore
/// has value 0, so all entries of one key lie on one page.
#[inline]
pub fn leaf_separator(left: Pair, right: Pair) -> Pair {
    debug_assert!(left < right);
    if left.0 < right.0 {
        (right.0, 0)
    } else {
        right
    }
}

/// Read access to a tree page.
#[derive(Clone, Copy)]
pub struct BtPage<'a>(pub &'a [u8]);

impl<'a> BtPage<'a> {
    #[inline]
    fn special(&self) -> usize {
        self.0.len() - SPECIAL_SIZE
    }

    #[inline]
    fn esize(&self) -> usize {
        entry_size(self.level())
    }

    /// Entries the page can hold.
    #[inline]
    pub fn capacity(&self) -> usize {
        capacity_for(self.0.len(), self.level())
    }

    /// Number of entries (clamped to the capacity, so a damaged `lower` cannot send a
    /// reader out of bounds).
    #[inline]
    pub fn len(&self) -> usize {
        let lower = get_u16(self.0, OFF_LOWER) as usize;
        (lower.saturating_sub(PAGE_HEADER_SIZE) / self.esize()).min(self.capacity())
    }

    /// Whether the page holds no entry.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the page holds as many entries as it can.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len() >= self.capacity()
    }

    /// Whether the page was never initialized (all zeros).
    #[inline]
    pub fn is_new(&self) -> bool {
        page::is_new(self.0)
    }

    /// The page's level (0: a leaf).
    #[inline]
    pub fn level(&self) -> u16 {
        get_u16(self.0, self.special() + SP_LEVEL)
    }

    /// Whether the page is a leaf (level 0).
    #[inline]
    pub fn is_leaf(&self) -> bool {
        self.level() == 0
    }

    /// The flags of the special area ([`ROOT`], [`RIGHTMOST`], [`INCOMPLETE_SPLIT`]).
    #[inline]
    pub fn flags(&self) -> u16 {
        get_u16(self.0, self.special() + SP_FLAGS)
    }

    /// Whether the page is the root.
    #[inline]
    pub fn is_root(&self) -> bool {
        self.flags() & ROOT != 0
    }

    /// Whether the page is the last of its level (no right link, no high key).
    #[inline]
    pub fn is_rightmost(&self) -> bool {
        self.flags() & RIGHTMOST != 0
    }

    /// The right sibling (NO_BLOCK for the rightmost page).
    #[inline]
    pub fn right(&self) -> u32 {
        get_u32(self.0, self.special() + SP_RIGHT)
    }

    /// The high key: every entry is below it. None on the rightmost page (plus infinity).
    #[inline]
    pub fn high_key(&self) -> Option<Pair> {
        if self.is_rightmost() {
            None
        } else {
            Some(get_pair(self.0, self.special() + SP_HIGH))
        }
    }

    /// Whether `key` is at or above the high key: it belongs to a page further right.
    #[inline]
    pub fn beyond_high(&self, key: Pair) -> bool {
        !self.is_rightmost() && key >= get_pair(self.0, self.special() + SP_HIGH)
    }

    /// Entry `i`'s key (i < len): a leaf's (key, value), an internal page's separator.
    #[inline]
    pub fn entry(&self, i: usize) -> Pair {
        get_pair(self.0, PAGE_HEADER_SIZE + i * self.esize())
    }

    /// Child block of internal entry `i`.
    #[inline]
    pub fn child(&self, i: usize) -> u32 {
        get_u32(self.0, entry_offset(1, i) + 16)
    }

    /// First position whose entry is >= `key` (len if none).
    #[inline]
    pub fn lower_bound(&self, key: Pair) -> usize {
        self.partition_point(0, self.len(), key, false)
    }

    /// Internal page: the entry whose child covers `key`: the last entry whose separator
    /// is <= `key`, entry 0 counting as minus infinity (0 on an empty page).
    #[inline]
    pub fn child_index(&self, key: Pair) -> usize {
        // Entries from 1 on with separator <= key, i.e. the first one above key, minus 1.
        self.partition_point(1, self.len().max(1), key, true) - 1
    }

    /// The first position in `start..end` whose entry is not below `key` (with
    /// `or_equal`: not at or below), `end` if none. Binary search with branches while the
    /// range spans many cache lines (a predicted branch lets the CPU start the next probe's
    /// load early, which beats a branch-free chain of dependent cache misses), then a
    /// short linear scan over the last few entries (one or two cache lines).
    #[inline]
    fn partition_point(&self, start: usize, end: usize, key: Pair, or_equal: bool) -> usize {
        let (p, es) = (self.0, self.esize());
        partition_point(start, end, key, or_equal, |i| {
            get_pair(p, PAGE_HEADER_SIZE + i * es)
        })
    }

    /// Checks the layout of a tree page (not its keys against other pages); returns what
    /// is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.is_new() {
            return Err("page is not initialized (all zeros)".into());
        }
        let special = page::special(self.0) as usize;
        if special != self.special() {
            return Err(format!(
                "special area at {special}, expected {} for a B-tree page",
                self.special()
            ));
        }
        let lower = page::lower(self.0) as usize;
        if lower < PAGE_HEADER_SIZE
            || lower > self.special()
            || (lower - PAGE_HEADER_SIZE) % self.esize() != 0
        {
            return Err(format!(
                "lower {lower} is not the end of an array of {}-byte entries within [{PAGE_HEADER_SIZE}, {}]",
                self.esize(),
                self.special()
            ));
        }
        let flags = self.flags();
        if flags & !KNOWN_FLAGS != 0 {
            return Err(format!("unknown flags {flags:#06x}"));
        }
        if (flags & RIGHTMOST != 0) != (self.right() == NO_BLOCK) {
            return Err(format!(
                "flags {flags:#06x} disagree with right link {}",
                self.right()
            ));
        }
        if flags & RIGHTMOST != 0 && flags & INCOMPLETE_SPLIT != 0 {
            return Err("rightmost page marked INCOMPLETE_SPLIT".into());
        }
        Ok(())
    }
}

/// The search of [`BtPage::partition_point`] over entries `entry(i)`: the first position
/// in `start..end` whose entry is not below `key` (with `or_equal`: not at or below).
/// Binary search with branches while the range spans many cache lines (a predicted branch
/// lets the CPU start the next probe's load early, which beats a branch-free chain of
/// dependent cache misses), then a short linear scan over the last few entries. Visits at
/// most `end - start` entries whatever `entry` returns (so a torn optimistic read cannot
/// make it loop).
#[inline]
fn partition_point(
    start: usize,
    end: usize,
    key: Pair,
    or_equal: bool,
    entry: impl Fn(usize) -> Pair,
) -> usize {
    const LINEAR: usize = 8;
    let below = |i: usize| {
        let (k, v) = entry(i);
        k < key.0 || (k == key.0 && (v < key.1 || (or_equal && v == key.1)))
    };
    let (mut lo, mut hi) = (start, end.max(start));
    while hi - lo > LINEAR {
        let mid = lo + (hi - lo) / 2;
        if below(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    while lo < hi && below(lo) {
        lo += 1;
    }
    lo
}

/// Where a descent goes from an internal page read optimistically
/// ([`OptimisticBtPage::step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Down to this child, at this level (one below the page's).
    Down(u32, u16),
    /// Right to this sibling, at this level (the page's; the key is at or above the high
    /// key).
    Right(u32, u16),
}

/// An internal tree page read with no pin and no lock (`BufferPool::read_optimistic`):
/// every value may be torn, so each is read once and checked before use, and anything
/// unexpected answers "take the locked path" (which reports damage as the locked
/// descent always has). Offsets are all multiples of 8: the special area, entries of 24
/// bytes from 24, and `lower` in the header's third word.
pub(super) struct OptimisticBtPage<'a>(pub crate::buffer::OptimisticPage<'a>);

impl OptimisticBtPage<'_> {
    fn pair(&self, off: usize) -> Pair {
        (self.0.u64_at(off) as i64, self.0.u64_at(off + 8))
    }

    /// The next step for `key` from this page, if it is an initialized internal page at
    /// `level` (any level above 0 when None) that is the root when `root` asks so, and
    /// its layout holds together; None otherwise.
    pub(super) fn step(&self, key: Pair, level: Option<u16>, root: bool) -> Option<Step> {
        let size = self.0.len();
        let special = size.checked_sub(SPECIAL_SIZE)?;
        // level u16 | flags u16 | right link u32, little-endian.
        let word = self.0.u64_at(special);
        let (lvl, flags, right) = (word as u16, (word >> 16) as u16, (word >> 32) as u32);
        // lower u16 | upper u16 | special u16 | reserved, little-endian: read once.
        let header = self.0.u64_at(OFF_LOWER);
        let header_special = (header >> 32) as u16 as usize;
        if lvl == 0
            || level.is_some_and(|l| l != lvl)
            || flags & !KNOWN_FLAGS != 0
            || (root && flags & ROOT == 0)
            || header_special != special
        {
            return None;
        }
        if flags & RIGHTMOST == 0 {
            if right == NO_BLOCK || right == 0 {
                return None;
            }
            if key >= self.pair(special + SP_HIGH) {
                return Some(Step::Right(right, lvl));
            }
        }
        let lower = header as u16 as usize;
        let n = (lower.saturating_sub(PAGE_HEADER_SIZE) / INTERNAL_ENTRY_SIZE)
            .min(capacity_for(size, 1));
        if n == 0 {
            return None;
        }
        let at = |i: usize| PAGE_HEADER_SIZE + i * INTERNAL_ENTRY_SIZE;
        let i = partition_point(1, n, key, true, |i| self.pair(at(i))) - 1;
        let child = self.0.u64_at(at(i) + 16) as u32;
        (child != 0 && child != NO_BLOCK).then_some(Step::Down(child, lvl - 1))
    }
}

/// Write access to a tree page (the caller holds the exclusive content lock). Every write
/// goes through its private `put` or `touched`, which declare the bytes in
/// the page's [`PageDelta`]; [`BtPageMut::into_delta`] hands the declaration to the logging
/// code (`split.rs`), which logs exactly those ranges.
pub struct BtPageMut<'a> {
    page: &'a mut [u8],
    delta: PageDelta,
}

impl<'a> BtPageMut<'a> {
    /// Write access to `page`, nothing declared yet.
    pub fn new(page: &'a mut [u8]) -> BtPageMut<'a> {
        let delta = PageDelta::new(page.len());
        BtPageMut { page, delta }
    }

    /// The page, for reading.
    pub fn view(&self) -> BtPage<'_> {
        BtPage(self.page)
    }

    /// The byte ranges written so far.
    pub fn delta(&self) -> &PageDelta {
        &self.delta
    }

    /// Ends the change: the byte ranges it wrote.
    pub fn into_delta(self) -> PageDelta {
        self.delta
    }

    /// The whole page for writing `r` (a shift with `copy_within`), with `r` declared.
    #[inline]
    fn touched(&mut self, r: Range<usize>) -> &mut [u8] {
        self.delta.touch(r);
        self.page
    }

    /// Writes `bytes` at `at`, declaring them only if they differ from what is there (so
    /// rewriting an unchanged entry, flag or link logs nothing for it).
    #[inline]
    fn put(&mut self, at: usize, bytes: &[u8]) {
        let r = at..at + bytes.len();
        if self.page[r.clone()] != *bytes {
            self.touched(r.clone())[r].copy_from_slice(bytes);
        }
    }

    #[inline]
    fn special(&self) -> usize {
        self.page.len() - SPECIAL_SIZE
    }

    /// Makes the page an empty, rightmost tree page at `level` with `flags`. Declares the
    /// header and special area if the page was zeros (a fresh page), else the whole page.
    pub fn init(&mut self, level: u16, flags: u16) {
        let zeros = self.page.iter().all(|&b| b == 0);
        page::init(self.page, SPECIAL_SIZE);
        if zeros {
            self.delta.touch(0..PAGE_HEADER_SIZE);
        } else {
            self.delta.touch_whole();
        }
        let sp = self.special();
        self.put(sp + SP_LEVEL, &level.to_le_bytes());
        self.put(sp + SP_FLAGS, &(flags | RIGHTMOST).to_le_bytes());
        self.put(sp + SP_RIGHT, &NO_BLOCK.to_le_bytes());
    }

    /// Replaces the flags of the special area with `flags`.
    pub fn set_flags(&mut self, flags: u16) {
        let sp = self.special();
        self.put(sp + SP_FLAGS, &flags.to_le_bytes());
    }

    /// Sets the right link and high key (None: rightmost; sets or clears RIGHTMOST).
    pub fn set_right(&mut self, right: Option<(u32, Pair)>) {
        let sp = self.special();
        let flags = self.view().flags();
        let (block, high, flags) = match right {
            Some((block, high)) => (block, high, flags & !RIGHTMOST),
            None => (NO_BLOCK, (0, 0), flags | RIGHTMOST),
        };
        self.put(sp + SP_RIGHT, &block.to_le_bytes());
        self.put(sp + SP_HIGH, &pair_bytes(high));
        self.set_flags(flags);
    }

    fn set_len(&mut self, n: usize) {
        let level = self.view().level();
        self.put(OFF_LOWER, &(entry_offset(level, n) as u16).to_le_bytes());
    }

    /// Writes entry `i`: `key`, and on an internal page the `child` (ignored on a leaf).
    /// One `put` for the whole entry, so a run of rewritten entries is declared as one
    /// range even where some of their fields did not change.
    pub fn set_entry(&mut self, i: usize, key: Pair, child: u32) {
        let level = self.view().level();
        let mut e = [0u8; INTERNAL_ENTRY_SIZE];
        e[0..16].copy_from_slice(&pair_bytes(key));
        e[16..20].copy_from_slice(&child.to_le_bytes());
        self.put(entry_offset(level, i), &e[..entry_size(level)]);
    }

    /// Appends an entry (the caller keeps the order); false if the page is full.
    pub fn push(&mut self, key: Pair, child: u32) -> bool {
        let n = self.view().len();
        if n >= self.view().capacity() {
            return false;
        }
        self.set_entry(n, key, child);
        self.set_len(n + 1);
        true
    }

    /// Inserts an entry at `pos`, shifting the entries from `pos` on; false if the page is
    /// full. Declares the shift of the entries from `pos` on (a range of them if something
    /// was declared before it: see `page_delta`), the new entry and the `lower` field
    /// (16..18).
    pub fn insert(&mut self, pos: usize, key: Pair, child: u32) -> bool {
        let v = self.view();
        let (n, level) = (v.len(), v.level());
        if n >= v.capacity() || pos > n {
            return false;
        }
        let from = entry_offset(level, pos);
        self.delta.shift_within(
            self.page,
            from..entry_offset(level, n),
            entry_offset(level, pos + 1),
        );
        self.set_entry(pos, key, child);
        self.set_len(n + 1);
        true
    }

    /// Removes entry `pos`, shifting the rest down and zeroing the freed slot. Declares the
    /// shift of the entries after `pos` (as for `insert`), the freed slot and the `lower`
    /// field.
    pub fn remove(&mut self, pos: usize) {
        let v = self.view();
        let (n, level) = (v.len(), v.level());
        assert!(pos < n, "remove of entry {pos} of {n}");
        let (from, to) = (entry_offset(level, pos), entry_offset(level, n));
        self.delta
            .shift_within(self.page, entry_offset(level, pos + 1)..to, from);
        self.touched(entry_offset(level, n - 1)..to)[entry_offset(level, n - 1)..to].fill(0);
        self.set_len(n - 1);
    }

    /// Splits this full page while inserting the entry (`key`, `child`) at `pos`: the
    /// upper part moves to `right` (a new page, `right_block`), which takes over this
    /// page's right link, high key and RIGHTMOST / INCOMPLETE_SPLIT flags; this page keeps
    /// the lower part, gets high key = the separator and right link = `right_block`, loses
    /// ROOT, and gets INCOMPLETE_SPLIT if `incomplete` (the caller inserts the downlink
    /// later). Returns the separator: the new page's low key, to be inserted into the
    /// parent as the downlink (separator, right_block). On an internal page the separator
    /// is the first moved entry's (it stays stored there as the new page's entry 0).
    ///
    /// Split point: the middle, except when appending at the end of the rightmost page
    /// (ascending inserts), where this page keeps 90% (PostgreSQL's rightmost fillfactor).
    ///
    /// Declares: on this page the entries from `pos` on (the ones below stay as they
    /// were), `lower` and the special area; on `right` its header, entries and special
    /// area (or the whole page if it was not zeros).
    pub fn split_insert(
        &mut self,
        right: &mut BtPageMut<'_>,
        right_block: u32,
        pos: usize,
        (key, child): (Pair, u32),
        incomplete: bool,
    ) -> Pair {
        let v = self.view();
        let n = v.len();
        let level = v.level();
        let flags = v.flags();
        let old_right = v.high_key().map(|h| (v.right(), h));
        let mut items: Vec<(Pair, u32)> = (0..n)
            .map(|i| (v.entry(i), if level > 0 { v.child(i) } else { 0 }))
            .collect();
        items.insert(pos, (key, child));
        let total = items.len();
        assert!(total >= 2, "split of a page with {n} entries");
        let at = if flags & RIGHTMOST != 0 && pos == n {
            (total * 9 / 10).clamp(1, total - 1)
        } else {
            total / 2
        };
        let sep = if level == 0 {
            leaf_separator(items[at - 1].0, items[at].0)
        } else {
            items[at].0
        };
        right.init(level, flags & INCOMPLETE_SPLIT);
        for (i, &(k, c)) in items[at..].iter().enumerate() {
            right.set_entry(i, k, c);
        }
        right.set_len(total - at);
        right.set_right(old_right);
        // This page: the lower part (entries below `pos` are rewritten unchanged, so
        // `put` declares nothing for them), zeros after it.
        for (i, &(k, c)) in items[..at].iter().enumerate().skip(pos.min(at)) {
            self.set_entry(i, k, c);
        }
        let zero = entry_offset(level, at)..entry_offset(level, n.max(at));
        self.touched(zero.clone())[zero].fill(0);
        self.set_len(at);
        let mut f = flags & !(ROOT | RIGHTMOST | INCOMPLETE_SPLIT);
        if incomplete {
            f |= INCOMPLETE_SPLIT;
        }
        self.set_flags(f);
        self.set_right(Some((right_block, sep)));
        sep
    }
}

/// The meta page's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Whether the index is unique on the key.
    pub unique: bool,
    /// The root page's block.
    pub root: u32,
    /// The root page's level.
    pub root_level: u32,
}

impl Meta {
    /// Reads a meta page; an error says what is wrong.
    pub fn read(p: &[u8]) -> Result<Meta, String> {
        if page::is_new(p) {
            return Err("meta page is not initialized (all zeros)".into());
        }
        let magic = get_u32(p, META_OFF_MAGIC);
        if magic != META_MAGIC {
            return Err(format!(
                "bad meta page magic {magic:#010x} (expected {META_MAGIC:#010x}): not a B-tree"
            ));
        }
        let version = get_u32(p, META_OFF_VERSION);
        if version != META_VERSION {
            return Err(format!(
                "meta page version {version}, this code reads version {META_VERSION}"
            ));
        }
        Ok(Meta {
            unique: get_u32(p, META_OFF_FLAGS) & META_UNIQUE != 0,
            root: get_u32(p, META_OFF_ROOT),
            root_level: get_u32(p, META_OFF_LEVEL),
        })
    }

    /// Initializes `p` as a meta page holding `self`.
    pub fn init(&self, p: &mut [u8]) {
        page::init(p, 0);
        put_u16(p, OFF_LOWER, META_END as u16);
        put_u32(p, META_OFF_MAGIC, META_MAGIC);
        put_u32(p, META_OFF_VERSION, META_VERSION);
        self.write(p);
    }

    /// Updates the fields of an initialized meta page. Returns the bytes it wrote (for
    /// the change's [`PageDelta`]).
    pub fn write(&self, p: &mut [u8]) -> Range<usize> {
        put_u32(p, META_OFF_FLAGS, if self.unique { META_UNIQUE } else { 0 });
        put_u32(p, META_OFF_ROOT, self.root);
        put_u32(p, META_OFF_LEVEL, self.root_level);
        META_OFF_FLAGS..META_OFF_LEVEL + 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::PAGE_SIZES;
    use std::collections::BTreeSet;

    fn new_page(size: usize, level: u16) -> Vec<u8> {
        let mut p = vec![0u8; size];
        BtPageMut::new(&mut p).init(level, 0);
        p
    }

    fn entries(p: &[u8]) -> Vec<(Pair, u32)> {
        let v = BtPage(p);
        (0..v.len())
            .map(|i| (v.entry(i), if v.is_leaf() { 0 } else { v.child(i) }))
            .collect()
    }

    /// A small xorshift generator: deterministic pseudo-random numbers.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn empty_page_layout() {
        for size in PAGE_SIZES {
            for level in [0u16, 1] {
                let p = new_page(size, level);
                let v = BtPage(&p);
                v.validate().unwrap();
                assert_eq!(
                    (v.len(), v.level(), v.right(), v.high_key()),
                    (0, level, NO_BLOCK, None)
                );
                assert!(v.is_rightmost() && !v.is_root() && !v.is_full());
                assert_eq!(v.capacity(), (size - 48) / entry_size(level));
                assert_eq!(v.lower_bound((5, 5)), 0);
                assert_eq!(v.child_index((5, 5)), 0);
                assert!(!v.beyond_high((i64::MAX, u64::MAX)));
            }
        }
    }

    #[test]
    fn insert_search_remove_fill_every_page_size() {
        for size in PAGE_SIZES {
            for level in [0u16, 1] {
                let mut p = new_page(size, level);
                let cap = BtPage(&p).capacity();
                let mut model = BTreeSet::new();
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ size as u64);
                // Distinct pairs, many sharing a key with other values.
                while model.len() < cap {
                    let x = rng.next();
                    let e = ((x % 5000) as i64 - 2500, x % 3);
                    if model.contains(&e) {
                        continue;
                    }
                    let child = (x >> 40) as u32;
                    let mut m = BtPageMut::new(&mut p);
                    let pos = m.view().lower_bound(e);
                    assert!(m.insert(pos, e, child));
                    model.insert(e);
                }
                let v = BtPage(&p);
                assert!(v.is_full(), "size {size}");
                assert!(
                    !BtPageMut::new(&mut p.clone()).insert(0, (0, 99), 1),
                    "full page"
                );
                let got: Vec<Pair> = entries(&p).iter().map(|e| e.0).collect();
                assert_eq!(got, model.iter().copied().collect::<Vec<_>>());
                BtPage(&p).validate().unwrap();
                for (i, &e) in model.iter().enumerate() {
                    assert_eq!(BtPage(&p).lower_bound(e), i);
                    assert_eq!(BtPage(&p).lower_bound((e.0, e.1 + 1)), i + 1);
                }
                // Remove every other entry; children move with their separators.
                let before = entries(&p);
                for (e, _) in before.iter().step_by(2) {
                    let pos = BtPage(&p).lower_bound(*e);
                    assert_eq!(BtPage(&p).entry(pos), *e);
                    BtPageMut::new(&mut p).remove(pos);
                }
                let kept: Vec<(Pair, u32)> = before.iter().skip(1).step_by(2).copied().collect();
                assert_eq!(entries(&p), kept);
                let n = BtPage(&p).len();
                assert!(
                    p[entry_offset(level, n)..size - SPECIAL_SIZE]
                        .iter()
                        .all(|&b| b == 0),
                    "freed slots are zeroed"
                );
                BtPage(&p).validate().unwrap();
            }
        }
    }

    #[test]
    fn child_index_treats_entry_zero_as_minus_infinity() {
        let mut p = new_page(4096, 1);
        let mut m = BtPageMut::new(&mut p);
        // Entry 0's stored separator is the page's low key: searches ignore it.
        for (i, sep) in [(5, 0), (10, 0), (20, 5), (30, 0)].into_iter().enumerate() {
            assert!(m.push(sep, 100 + i as u32));
        }
        let v = BtPage(&p);
        assert_eq!(v.child_index((i64::MIN, 0)), 0);
        assert_eq!(
            v.child_index((1, 0)),
            0,
            "below the stored low key: still entry 0"
        );
        assert_eq!(v.child_index((9, u64::MAX)), 0);
        assert_eq!(v.child_index((10, 0)), 1);
        assert_eq!(v.child_index((20, 4)), 1);
        assert_eq!(v.child_index((20, 5)), 2);
        assert_eq!(v.child_index((30, 0)), 3);
        assert_eq!(v.child_index((i64::MAX, u64::MAX)), 3);
        assert_eq!(v.child(v.child_index((25, 0))), 102);
    }

    #[test]
    fn split_moves_upper_part_and_links_pages() {
        for size in PAGE_SIZES {
            for level in [0u16, 2] {
                for (pos_kind, rightmost) in
                    [(0, false), (1, true), (2, true), (1, false), (2, false)]
                {
                    let mut left = new_page(size, level);
                    let cap = BtPage(&left).capacity();
                    // Keys 0, 2, 4, ... so that odd keys slot in between.
                    for i in 0..cap {
                        assert!(BtPageMut::new(&mut left).push(((2 * i) as i64, 7), i as u32));
                    }
                    let old_high = ((2 * cap) as i64, 0);
                    let mut flags = ROOT;
                    if !rightmost {
                        BtPageMut::new(&mut left).set_right(Some((42, old_high)));
                        flags |= INCOMPLETE_SPLIT;
                    } else {
                        flags |= RIGHTMOST;
                    }
                    BtPageMut::new(&mut left).set_flags(flags);
                    let (pos, item) = match pos_kind {
                        0 => (0, ((-1, 0), 5000)),
                        1 => (cap / 3 + 1, (((2 * (cap / 3)) as i64 + 1, 0), 5001)),
                        _ => (cap, (((2 * cap) as i64 - 1, 0), 5002)),
                    };
                    let before = entries(&left);
                    let mut right = vec![0u8; size];
                    let sep = BtPageMut::new(&mut left).split_insert(
                        &mut BtPageMut::new(&mut right),
                        9,
                        pos,
                        item,
                        true,
                    );
                    let (l, r) = (BtPage(&left), BtPage(&right));
                    l.validate().unwrap();
                    r.validate().unwrap();
                    let mut all = before.clone();
                    all.insert(pos, if level == 0 { (item.0, 0) } else { item });
                    let mut got = entries(&left);
                    got.extend(entries(&right));
                    assert_eq!(got, all, "size {size} level {level} pos {pos}");
                    if pos_kind == 2 && rightmost {
                        assert_eq!(l.len(), (cap + 1) * 9 / 10, "rightmost append keeps 90%");
                    } else {
                        assert_eq!(l.len(), cap.div_ceil(2), "the middle of cap + 1 entries");
                    }
                    // Links, high keys, flags.
                    assert_eq!((l.right(), l.high_key()), (9, Some(sep)));
                    assert_eq!(l.flags(), INCOMPLETE_SPLIT);
                    assert_eq!(r.level(), level);
                    assert_eq!(r.flags() & ROOT, 0);
                    if rightmost {
                        assert!(r.is_rightmost());
                        assert_eq!(r.flags() & INCOMPLETE_SPLIT, 0);
                    } else {
                        assert_eq!((r.right(), r.high_key()), (42, Some(old_high)));
                        assert_ne!(r.flags() & INCOMPLETE_SPLIT, 0, "inherited");
                    }
                    // Separator: above every left entry, at most the first right entry.
                    assert!(entries(&left).iter().all(|e| e.0 < sep));
                    assert!(sep <= r.entry(0));
                    if level == 0 {
                        assert_eq!(sep, (r.entry(0).0, 0), "keys differ: value truncated");
                    } else {
                        assert_eq!(sep, r.entry(0));
                    }
                    assert!(left[entry_offset(level, l.len())..size - SPECIAL_SIZE]
                        .iter()
                        .all(|&b| b == 0));
                }
            }
        }
    }

    /// Runs `change` on a copy-checked page and returns what it declared, after checking
    /// that it declared every byte that changed.
    fn declared(buf: &mut [u8], change: impl FnOnce(&mut BtPageMut<'_>)) -> PageDelta {
        let before = buf.to_vec();
        let mut p = BtPageMut::new(buf);
        change(&mut p);
        let delta = p.into_delta();
        crate::page_delta::assert_delta_covers(&before, buf, &delta);
        delta
    }

    #[test]
    fn each_mutator_declares_what_it_writes_and_little_more() {
        for level in [0u16, 1] {
            let es = entry_size(level);
            let mut p = vec![0u8; 8192];
            // A zeroed page: the header and the special area, not the whole page.
            let d = declared(&mut p, |m| m.init(level, 0));
            assert!(!d.is_whole() && d.bytes() <= PAGE_HEADER_SIZE + 8, "{d:?}");
            for i in 0..100 {
                let d = declared(&mut p, |m| assert!(m.push((2 * i, 0), 7)));
                assert!(d.bytes() <= es + 2 + 8, "push: {d:?}");
            }
            // Insert at position 40 of 100: the tail shifted (logged as a shift, not its
            // bytes), the new entry and `lower`.
            let d = declared(&mut p, |m| assert!(m.insert(40, (79, 0), 8)));
            assert!(d.bytes() <= es + 2 + 8, "insert: {d:?}");
            assert_eq!(d.shift().map(|s| s.len), Some(60 * es), "insert: {d:?}");
            let d = declared(&mut p, |m| m.remove(40));
            assert!(d.bytes() <= es + 2 + 8, "remove: {d:?}");
            assert_eq!(d.shift().map(|s| s.len), Some(60 * es), "remove: {d:?}");
            let d = declared(&mut p, |m| m.set_flags(ROOT | RIGHTMOST));
            assert_eq!(d.bytes(), 2);
            assert!(declared(&mut p, |m| m.set_flags(ROOT | RIGHTMOST)).is_empty());
            let d = declared(&mut p, |m| m.set_right(Some((5, (300, 0)))));
            assert!(d.bytes() <= SPECIAL_SIZE, "set_right: {d:?}");
            // Fill up, then split inserting in the middle: the left page declares the
            // entries from the insert position on, the right page its entries.
            let cap = BtPage(&p).capacity();
            for i in 100..cap {
                assert!(BtPageMut::new(&mut p).push((2 * i as i64, 0), 7));
            }
            let mut r = vec![0u8; 8192];
            let (before_l, before_r) = (p.clone(), r.clone());
            let pos = cap / 3;
            let (mut lm, mut rm) = (BtPageMut::new(&mut p), BtPageMut::new(&mut r));
            lm.split_insert(&mut rm, 9, pos, ((2 * pos as i64 - 1, 0), 3), true);
            let (dl, dr) = (lm.into_delta(), rm.into_delta());
            crate::page_delta::assert_delta_covers(&before_l, &p, &dl);
            crate::page_delta::assert_delta_covers(&before_r, &r, &dr);
            let at = BtPage(&p).len();
            assert!(
                dl.bytes() <= (cap - pos) * es + 2 + SPECIAL_SIZE + 8,
                "left: {dl:?} (pos {pos}, at {at})"
            );
            assert!(
                dr.bytes() <= PAGE_HEADER_SIZE + (cap + 1 - at) * es + SPECIAL_SIZE + 8,
                "right: {dr:?}"
            );
            assert!(!dl.is_whole() && !dr.is_whole());
        }
        // A reused page that is not zeros: init declares it whole.
        let mut junk = vec![9u8; 4096];
        assert!(declared(&mut junk, |m| m.init(0, 0)).is_whole());
    }

    #[test]
    fn leaf_separator_truncates_only_between_keys() {
        assert_eq!(leaf_separator((1, 9), (2, 7)), (2, 0));
        assert_eq!(leaf_separator((2, 3), (2, 7)), (2, 7));
        assert_eq!(leaf_separator((i64::MIN, 0), (i64::MIN, 1)), (i64::MIN, 1));
    }

    #[test]
    fn meta_round_trip_and_bad_magic() {
        for size in PAGE_SIZES {
            let mut p = vec![0u8; size];
            assert!(Meta::read(&p).is_err());
            let m = Meta {
                unique: true,
                root: 77,
                root_level: 3,
            };
            m.init(&mut p);
            assert_eq!(Meta::read(&p), Ok(m));
            p[24] ^= 1;
            assert!(Meta::read(&p).unwrap_err().contains("magic"));
        }
    }

    #[test]
    fn validate_reports_damage() {
        let mut p = new_page(8192, 0);
        BtPageMut::new(&mut p).push((1, 1), 0);
        p[16] = 27; // lower not on an entry boundary
        assert!(BtPage(&p).validate().unwrap_err().contains("lower"));
        let mut q = new_page(8192, 0);
        q[16] = 0xFF;
        q[17] = 0xFF; // lower far beyond the page: len() is clamped
        assert_eq!(BtPage(&q).len(), BtPage(&q).capacity());
        assert!(BtPage(&q).validate().is_err());
        let mut r = new_page(8192, 0);
        BtPageMut::new(&mut r).set_flags(0); // not rightmost, but no right link
        assert!(BtPage(&r).validate().unwrap_err().contains("right link"));
        assert!(BtPage(&[0u8; 4096]).validate().is_err());
    }
}
