//! Heap page layout: slotted pages of tuples with MVCC headers (PostgreSQL's bufpage.c and
//! htup_details.h, reduced).
//!
//! ```text
//! [page header 24 B][line pointers 4 B each → ... free space ... ← tuples][special]
//!  lower = end of the line pointer array       upper = start of the tuple area
//! line pointer (u32 LE): offset 15 bits | flags 2 bits | length 15 bits
//!   flags: 0 unused, 1 normal, 2 redirect (offset = target slot), 3 dead
//! tuple: header 20 B, then the data
//!   0 xmin u32   4 xmax u32   8 ctid block u32   12 ctid slot u16
//!  14 infomask u16 (hint bits: XMIN_COMMITTED, XMIN_INVALID, XMAX_COMMITTED,
//!                   XMAX_INVALID; UPDATED: ctid points at the newer version;
//!                   HEAP_ONLY: made by a same-page update, reached only via its chain;
//!                   XMAX_LOCK_ONLY, XMAX_EXCL_LOCK: xmax only locks the row;
//!                   XMAX_IS_MULTI: xmax is a multixact id)
//!  16 data length u16   18 reserved u16
//! ```
//! Invariants: `PAGE_HEADER_SIZE <= lower <= upper <= special <= page size`; every normal
//! line pointer addresses bytes inside `[upper, special)` that no other one addresses;
//! slot numbers (1-based, as PostgreSQL's OffsetNumber) never move, so tuple ids stay
//! valid across `compact`. Callers hold the buffer's content lock (exclusive to change).

use std::ops::Range;

use crate::page::{self, PAGE_HEADER_SIZE};
use crate::page_delta::{PageDelta, PAGE_DELTA_RANGES_MAX};

/// Byte offset of the page header's `lower` field, followed by `upper` (see page.rs).
const OFF_LOWER: usize = 16;

/// Bytes of a line pointer.
pub const ITEM_ID_SIZE: usize = 4;
/// Bytes of a tuple header.
pub const TUPLE_HEADER_SIZE: usize = 20;
/// Tuples start at 8-byte boundaries (PostgreSQL's MAXALIGN).
const TUPLE_ALIGN: usize = 8;

/// Hint bit: xmin is known committed.
pub const XMIN_COMMITTED: u16 = 1 << 0;
/// Hint bit: xmin is known aborted.
pub const XMIN_INVALID: u16 = 1 << 1;
/// Hint bit: xmax is known committed.
pub const XMAX_COMMITTED: u16 = 1 << 2;
/// Hint bit: xmax is known aborted, or there is none (set on insert).
pub const XMAX_INVALID: u16 = 1 << 3;
/// The tuple was updated: its ctid points at the newer version.
pub const UPDATED: u16 = 1 << 4;
/// A version made by an update on the same page (PostgreSQL's HEAP_ONLY_TUPLE): only its
/// chain reaches it (through its root's redirect or its predecessor's ctid), so pruning
/// may free its slot once it is dead. Versions without it are chain roots, which indexes
/// and callers hold tuple ids of: pruning turns them into redirects, stubs or dead line
/// pointers, never reusable slots.
pub const HEAP_ONLY: u16 = 1 << 5;
/// xmax (a transaction or a multixact) only locks the row: nobody updated or deleted this
/// version. Never set with UPDATED or XMAX_COMMITTED.
pub const XMAX_LOCK_ONLY: u16 = 1 << 6;
/// With XMAX_LOCK_ONLY and a plain transaction id: the lock is exclusive (`FOR UPDATE`);
/// clear, it is shared (`FOR SHARE`). Meaningless for a multixact (its members carry
/// their modes).
pub const XMAX_EXCL_LOCK: u16 = 1 << 7;
/// xmax is a multixact id (`txn::MultiId`), not a transaction id: several transactions
/// hold the row (lockers, and at most one updater or deleter). Never set with
/// XMAX_COMMITTED.
pub const XMAX_IS_MULTI: u16 = 1 << 8;

const LP_UNUSED: u8 = 0;
const LP_NORMAL: u8 = 1;
const LP_REDIRECT: u8 = 2;
const LP_DEAD: u8 = 3;

/// A line pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemId {
    /// Free: no tuple, the slot reusable.
    Unused,
    /// A tuple.
    Normal {
        /// Where the tuple starts in the page, in bytes.
        offset: u16,
        /// The space the tuple takes (header and data, aligned to 8), in bytes.
        len: u16,
    },
    /// A chain root after pruning: leads to another slot of this page.
    Redirect {
        /// The slot it leads to.
        to: u16,
    },
    /// A deleted row's root after pruning: no tuple, the slot kept until VACUUM makes it unused.
    Dead,
}

impl ItemId {
    #[inline(always)]
    fn decode(w: u32) -> ItemId {
        let offset = (w & 0x7FFF) as u16;
        let flags = ((w >> 15) & 3) as u8;
        let len = (w >> 17) as u16;
        match flags {
            LP_NORMAL => ItemId::Normal { offset, len },
            LP_REDIRECT => ItemId::Redirect { to: offset },
            LP_DEAD => ItemId::Dead,
            _ => ItemId::Unused,
        }
    }

    fn encode(self) -> u32 {
        let (offset, flags, len) = match self {
            ItemId::Unused => (0, LP_UNUSED, 0),
            ItemId::Normal { offset, len } => (offset, LP_NORMAL, len),
            ItemId::Redirect { to } => (to, LP_REDIRECT, 0),
            ItemId::Dead => (0, LP_DEAD, 0),
        };
        u32::from(offset) & 0x7FFF | (u32::from(flags) << 15) | (u32::from(len) << 17)
    }
}

// 15-bit offsets and lengths address up to 32 KiB - 1: the largest page's tuples fit.
const _: () = assert!(crate::page::MAX_PAGE_SIZE - 1 <= 0x7FFF + 1);

/// The MVCC header of a tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TupleHeader {
    /// The transaction that inserted this version.
    pub xmin: u32,
    /// The transaction (with [`XMAX_IS_MULTI`], the multixact) that deleted, updated or locked
    /// it; 0 if none.
    pub xmax: u32,
    /// The block of the newer version (the tuple's own block until it is updated).
    pub ctid_block: u32,
    /// The slot of the newer version (the tuple's own slot until it is updated).
    pub ctid_slot: u16,
    /// Hint and state bits ([`XMIN_COMMITTED`] and the flags after it).
    pub infomask: u16,
}

impl TupleHeader {
    #[inline(always)]
    fn read(b: &[u8]) -> TupleHeader {
        // One bounds check for the whole header; the fields' indices are then constant.
        let b: &[u8; 16] = b[..16].try_into().expect("16");
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        TupleHeader {
            xmin: u32_at(0),
            xmax: u32_at(4),
            ctid_block: u32_at(8),
            ctid_slot: u16::from_le_bytes([b[12], b[13]]),
            infomask: u16::from_le_bytes([b[14], b[15]]),
        }
    }

    fn write(&self, b: &mut [u8]) {
        b[0..4].copy_from_slice(&self.xmin.to_le_bytes());
        b[4..8].copy_from_slice(&self.xmax.to_le_bytes());
        b[8..12].copy_from_slice(&self.ctid_block.to_le_bytes());
        b[12..14].copy_from_slice(&self.ctid_slot.to_le_bytes());
        b[14..16].copy_from_slice(&self.infomask.to_le_bytes());
    }
}

/// Bytes a tuple of `data_len` bytes takes in the tuple area (header included, aligned).
pub fn tuple_space(data_len: usize) -> usize {
    (TUPLE_HEADER_SIZE + data_len).next_multiple_of(TUPLE_ALIGN)
}

#[inline]
fn get_u16(p: &[u8], o: usize) -> usize {
    u16::from_le_bytes([p[o], p[o + 1]]) as usize
}

/// Read access to a heap page.
#[derive(Clone, Copy)]
pub struct HeapPage<'a>(pub &'a [u8]);

impl<'a> HeapPage<'a> {
    #[inline]
    fn lower(&self) -> usize {
        page::lower(self.0) as usize
    }
    #[inline]
    fn upper(&self) -> usize {
        let u = page::upper(self.0) as usize;
        if u == 0 {
            self.0.len()
        } else {
            u
        }
    }

    /// Number of line pointers (slots 1..=n).
    #[inline(always)]
    pub fn slots(&self) -> u16 {
        if page::is_new(self.0) {
            return 0;
        }
        ((self.lower() - PAGE_HEADER_SIZE) / ITEM_ID_SIZE) as u16
    }

    /// The line pointer of `slot` (1-based).
    #[inline(always)]
    pub fn item(&self, slot: u16) -> ItemId {
        if slot == 0 || slot > self.slots() {
            return ItemId::Unused;
        }
        let o = PAGE_HEADER_SIZE + (slot as usize - 1) * ITEM_ID_SIZE;
        ItemId::decode(u32::from_le_bytes(self.0[o..o + 4].try_into().expect("4")))
    }

    /// Header and data of the tuple at `slot`, if it holds one.
    #[inline(always)]
    pub fn tuple(&self, slot: u16) -> Option<(TupleHeader, &'a [u8])> {
        match self.item(slot) {
            ItemId::Normal { offset, len } => {
                let t = &self.0[offset as usize..offset as usize + len as usize];
                let h = TupleHeader::read(t);
                let n = u16::from_le_bytes([t[16], t[17]]) as usize;
                Some((h, &t[TUPLE_HEADER_SIZE..TUPLE_HEADER_SIZE + n]))
            }
            _ => None,
        }
    }

    /// The infomask of the tuple at `slot` alone (None unless it is a normal line
    /// pointer): for scans that look at every slot's flags, such as pruning's.
    #[inline(always)]
    pub fn infomask(&self, slot: u16) -> Option<u16> {
        match self.item(slot) {
            ItemId::Normal { offset, .. } => {
                let o = offset as usize + 14;
                Some(u16::from_le_bytes([self.0[o], self.0[o + 1]]))
            }
            _ => None,
        }
    }

    /// Contiguous free bytes between the line pointers and the tuples.
    pub fn free_space(&self) -> usize {
        if page::is_new(self.0) {
            return self.0.len() - PAGE_HEADER_SIZE;
        }
        self.upper() - self.lower()
    }

    /// The largest tuple data an empty page of this size holds.
    pub fn max_tuple_data(&self) -> usize {
        Self::max_tuple_data_in(self.0.len())
    }

    /// The largest tuple data an empty page of `page_size` bytes holds.
    pub fn max_tuple_data_in(page_size: usize) -> usize {
        (page_size - PAGE_HEADER_SIZE - ITEM_ID_SIZE) / TUPLE_ALIGN * TUPLE_ALIGN
            - TUPLE_HEADER_SIZE
    }

    /// Whether a tuple of `data_len` bytes fits now (with a new line pointer if needed).
    pub fn fits(&self, data_len: usize) -> bool {
        self.fits_leaving(data_len, 0)
    }

    /// Whether a tuple of `data_len` bytes fits and leaves at least `reserve` bytes free
    /// (fillfactor: inserts leave room for updates to stay on the page).
    pub fn fits_leaving(&self, data_len: usize, reserve: usize) -> bool {
        let (free, need) = (self.free_space(), tuple_space(data_len) + reserve);
        // The line pointer array is searched only when its answer decides: a page with
        // room for a new line pointer too, or without room for the tuple alone, needs no
        // search (updates of full pages ask this before and after every prune).
        if free >= need + ITEM_ID_SIZE {
            return true;
        }
        free >= need && self.first_unused().is_some()
    }

    /// The first unused line pointer: one pass over the raw array, flags only.
    fn first_unused(&self) -> Option<u16> {
        if page::is_new(self.0) {
            return None;
        }
        self.0[PAGE_HEADER_SIZE..self.lower()]
            .chunks_exact(ITEM_ID_SIZE)
            .position(|w| (w[1] >> 7) | ((w[2] & 1) << 1) == LP_UNUSED)
            .map(|i| i as u16 + 1)
    }

    /// Checks the layout invariants; returns what is wrong.
    pub fn check(&self) -> Result<(), String> {
        if page::is_new(self.0) {
            return Ok(());
        }
        let (lower, upper, special) = (self.lower(), self.upper(), get_u16(self.0, 20));
        let special = if special == 0 { self.0.len() } else { special };
        if !(PAGE_HEADER_SIZE <= lower
            && lower <= upper
            && upper <= special
            && special <= self.0.len())
        {
            return Err(format!(
                "bounds out of order: lower {lower} upper {upper} special {special}"
            ));
        }
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for s in 1..=self.slots() {
            match self.item(s) {
                ItemId::Normal { offset, len } => {
                    let (a, b) = (offset as usize, offset as usize + len as usize);
                    if a < upper || b > special || (len as usize) < TUPLE_HEADER_SIZE {
                        return Err(format!(
                            "slot {s}: tuple [{a}, {b}) outside [{upper}, {special})"
                        ));
                    }
                    spans.push((a, b));
                    let m = self.tuple(s).expect("normal").0.infomask;
                    if m & XMAX_LOCK_ONLY != 0 && m & (UPDATED | XMAX_COMMITTED) != 0 {
                        return Err(format!(
                            "slot {s}: a lock-only xmax marked updated or committed"
                        ));
                    }
                    if m & XMAX_IS_MULTI != 0 && m & XMAX_COMMITTED != 0 {
                        return Err(format!("slot {s}: a multixact xmax hinted committed"));
                    }
                }
                ItemId::Redirect { to } if to == 0 || to > self.slots() => {
                    return Err(format!("slot {s}: redirect to missing slot {to}"));
                }
                _ => {}
            }
        }
        spans.sort_unstable();
        for w in spans.windows(2) {
            if w[0].1 > w[1].0 {
                return Err(format!("tuples overlap: {:?} and {:?}", w[0], w[1]));
            }
        }
        Ok(())
    }
}

/// Write access to a heap page (the caller holds the exclusive content lock). Every write
/// goes through its private `put` or `bytes_mut`, which declare the bytes
/// in the page's [`PageDelta`]; [`HeapPageMut::into_delta`] hands the declaration to the
/// logging code (`Heap::change_logged`), which logs exactly those ranges.
pub struct HeapPageMut<'a> {
    page: &'a mut [u8],
    delta: PageDelta,
}

impl<'a> HeapPageMut<'a> {
    /// Write access to `page`, nothing declared yet.
    pub fn new(page: &'a mut [u8]) -> HeapPageMut<'a> {
        let delta = PageDelta::new(page.len());
        HeapPageMut { page, delta }
    }

    /// The page, for reading.
    pub fn view(&self) -> HeapPage<'_> {
        HeapPage(self.page)
    }

    /// The byte ranges written so far.
    pub fn delta(&self) -> &PageDelta {
        &self.delta
    }

    /// Ends the change: the byte ranges it wrote.
    pub fn into_delta(self) -> PageDelta {
        self.delta
    }

    /// Bytes `r` of the page for writing, declared as written.
    #[inline]
    fn bytes_mut(&mut self, r: Range<usize>) -> &mut [u8] {
        self.delta.touch(r.clone());
        &mut self.page[r]
    }

    /// Writes `bytes` at `at`, declaring them only if they differ from what is there (so a
    /// change that restates a field logs nothing for it).
    #[inline]
    fn put(&mut self, at: usize, bytes: &[u8]) {
        let r = at..at + bytes.len();
        if self.page[r.clone()] != *bytes {
            self.bytes_mut(r).copy_from_slice(bytes);
        }
    }

    /// Makes the page an empty heap page if it is new (its layout field is zero). Declares
    /// the header if the rest of the page was zeros already (a freshly extended page),
    /// else the whole page.
    pub fn init_if_new(&mut self) {
        if page::is_new(self.page) {
            let zeros = self.page[PAGE_HEADER_SIZE..].iter().all(|&b| b == 0);
            page::init(self.page, 0);
            if zeros {
                self.delta.touch(0..PAGE_HEADER_SIZE);
            } else {
                self.delta.touch_whole();
            }
        }
    }

    fn set_bounds(&mut self, lower: usize, upper: usize) {
        let mut b = [0u8; 4];
        b[0..2].copy_from_slice(&(lower as u16).to_le_bytes());
        b[2..4].copy_from_slice(&(upper as u16).to_le_bytes());
        self.put(OFF_LOWER, &b);
    }

    fn set_item(&mut self, slot: u16, item: ItemId) {
        self.put(item_offset(slot), &item.encode().to_le_bytes());
    }

    /// Adds a tuple; returns its slot, or None if it does not fit. The tuple's ctid points
    /// at itself (block `block`), as PostgreSQL's does until it is updated. Declares the
    /// tuple's bytes, its line pointer and the header's lower and upper fields.
    pub fn insert(&mut self, block: u32, xmin: u32, data: &[u8]) -> Option<u16> {
        self.init_if_new();
        let v = self.view();
        if !v.fits(data.len()) {
            return None;
        }
        let size = (TUPLE_HEADER_SIZE + data.len()).next_multiple_of(TUPLE_ALIGN);
        let (mut lower, upper) = (v.lower(), v.upper());
        let slot = match v.first_unused() {
            Some(s) => s,
            None => {
                lower += ITEM_ID_SIZE;
                v.slots() + 1
            }
        };
        let upper = upper - size;
        let t = self.bytes_mut(upper..upper + size);
        t.fill(0);
        let h = TupleHeader {
            xmin,
            xmax: 0,
            ctid_block: block,
            ctid_slot: slot,
            infomask: XMAX_INVALID,
        };
        h.write(t);
        t[16..18].copy_from_slice(&(data.len() as u16).to_le_bytes());
        t[TUPLE_HEADER_SIZE..TUPLE_HEADER_SIZE + data.len()].copy_from_slice(data);
        self.set_bounds(lower, upper);
        self.set_item(
            slot,
            ItemId::Normal {
                offset: upper as u16,
                len: size as u16,
            },
        );
        Some(slot)
    }

    /// Changes the header of the tuple at `slot` (xmax, ctid, hint bits). Returns false if
    /// the slot holds no tuple. Declares the header's bytes if they change.
    pub fn set_header(&mut self, slot: u16, h: &TupleHeader) -> bool {
        match self.view().item(slot) {
            ItemId::Normal { offset, .. } => {
                let mut b = [0u8; 16];
                h.write(&mut b);
                self.put(offset as usize, &b);
                true
            }
            _ => false,
        }
    }

    /// The data bytes of the tuple at `slot`, for in-place changes of fixed-width columns
    /// (declared as written, all of them).
    pub fn data_mut(&mut self, slot: u16) -> Option<&mut [u8]> {
        match self.view().item(slot) {
            ItemId::Normal { offset, .. } => {
                let o = offset as usize;
                let n = get_u16(self.page, o + 16);
                Some(self.bytes_mut(o + TUPLE_HEADER_SIZE..o + TUPLE_HEADER_SIZE + n))
            }
            _ => None,
        }
    }

    /// Cuts the tuple at `slot` down to its header (a stub that only carries its ctid on
    /// to a newer version elsewhere); `compact` reclaims the bytes.
    pub fn shrink_to_header(&mut self, slot: u16) {
        if let ItemId::Normal { offset, .. } = self.view().item(slot) {
            let o = offset as usize;
            self.put(o + 16, &0u16.to_le_bytes());
            self.set_item(
                slot,
                ItemId::Normal {
                    offset,
                    len: tuple_space(0) as u16,
                },
            );
        }
    }

    /// Sets the line pointer of `slot` to dead (its tuple is gone for everyone), a
    /// redirect (the chain continues at another slot of this page), or unused (nothing
    /// can reach it any more); `compact` reclaims the tuple bytes.
    pub fn set_item_state(&mut self, slot: u16, item: ItemId) {
        debug_assert!(
            !matches!(item, ItemId::Normal { .. }),
            "use insert for tuples"
        );
        self.set_item(slot, item);
    }

    /// Moves the remaining tuples together at the end of the page (slot numbers stay) and
    /// drops trailing unused line pointers. Returns the free space afterwards.
    ///
    /// What a move costs in the log depends on the layout, so this chooses the cheaper of
    /// two (the free space ends up contiguous either way; the bytes left below the new
    /// upper are not cleared, as nothing reads free space, so they cost no log):
    /// - fill holes: tuples lying below the new upper move into the holes that dead ones
    ///   left above it, first fit (an update's dead version is one hole, filled by one
    ///   tuple of the same size); each move is a range of its own plus its line pointer;
    /// - shift: tuples move up highest offset first (PostgreSQL's
    ///   PageRepairFragmentation), each by the space freed above it, so the ones packed at
    ///   the end stay put and the moved ones form runs, one per hole above them. The
    ///   largest run is the delta's shift (three numbers, replayed as a `memmove`) when no
    ///   declared range overlaps it; the others are the bytes they wrote; the span of the
    ///   moved tuples' line pointers is declared too. One hole (a prune of one dead
    ///   version, as most updates of a full page do) then logs a few bytes per moved
    ///   tuple however large the tuples are.
    pub fn compact(&mut self) -> usize {
        self.init_if_new();
        let v = self.view();
        let n = v.slots();
        // Sorted by offset as packed integers (offset, length, slot): a primitive sort
        // moves a third of the bytes a sort of `Tuple`s would and needs no key closure.
        let mut packed: Vec<u64> = (1..=n)
            .filter_map(|slot| match v.item(slot) {
                ItemId::Normal { offset, len } => {
                    Some(u64::from(offset) << 32 | u64::from(len) << 16 | u64::from(slot))
                }
                _ => None,
            })
            .collect();
        packed.sort_unstable();
        let live: Vec<Tuple> = packed
            .iter()
            .rev()
            .map(|&k| Tuple {
                slot: k as u16,
                from: (k >> 32) as usize,
                len: (k >> 16) as u16 as usize,
            })
            .collect();
        let mut keep = n;
        while keep > 0 && v.item(keep) == ItemId::Unused {
            keep -= 1;
        }
        let upper = self.page.len() - live.iter().map(|t| t.len).sum::<usize>();
        let (shift_cost, largest) = self.shift_cost(&live);
        match fill_plan(&live, upper, self.page.len()) {
            Some(plan) if fill_cost(&plan, self.page.len()) < shift_cost => {
                for (t, to) in plan {
                    // The source lies below `upper`, every destination in a hole above
                    // it: no move overwrites a tuple.
                    self.delta.touch(to..to + t.len);
                    self.page.copy_within(t.from..t.from + t.len, to);
                    self.set_item(
                        t.slot,
                        ItemId::Normal {
                            offset: to as u16,
                            len: t.len as u16,
                        },
                    );
                }
            }
            _ => self.shift_up(&live, largest),
        }
        let lower = PAGE_HEADER_SIZE + keep as usize * ITEM_ID_SIZE;
        self.set_bounds(lower, upper);
        upper - lower
    }

    /// Bytes (with range headers) the shift layout of `live` (highest offset first)
    /// would log: the moved bytes but the largest run's, which goes as the delta's shift
    /// (three numbers) when the delta can take it, and the span of the moved tuples' line
    /// pointers. Returns it with the largest run's source (empty if nothing moves).
    fn shift_cost(&self, live: &[Tuple]) -> (usize, Range<usize>) {
        let (mut moved, mut largest) = (0, 0..0);
        shift_runs(live, self.page.len(), |src, _| {
            moved += src.len();
            if src.len() > largest.len() {
                largest = src;
            }
        });
        if moved == 0 {
            return (0, largest);
        }
        if self.delta.can_shift(&largest) {
            moved = moved - largest.len() + SHIFT_BYTES;
        }
        let (slot_min, slot_max) = moved_slots(live, self.page.len());
        let cost = moved + item_offset(slot_max) + ITEM_ID_SIZE - item_offset(slot_min)
            + 2 * RANGE_HEADER_BYTES;
        (cost, largest)
    }

    /// The shift layout (see [`HeapPageMut::compact`]); `live` is highest offset first.
    /// The largest run (`largest`, from [`Self::shift_cost`]) moves as the delta's shift if
    /// it can; the others are declared as the bytes they wrote.
    fn shift_up(&mut self, live: &[Tuple], largest: Range<usize>) {
        let page_len = self.page.len();
        if largest.is_empty() {
            return;
        }
        // Highest run first: each run's destination ends where the one above it now
        // starts, over bytes that run has left.
        let (page, delta) = (&mut *self.page, &mut self.delta);
        shift_runs(live, page_len, |src, to| {
            let len = src.len();
            if src == largest {
                delta.shift_within(page, src, to);
            } else {
                page.copy_within(src, to);
                delta.touch(to..to + len);
            }
        });
        let mut upper = page_len;
        let (mut slot_min, mut slot_max) = (u16::MAX, 0);
        for t in live {
            upper -= t.len;
            if t.from != upper {
                slot_min = slot_min.min(t.slot);
                slot_max = slot_max.max(t.slot);
                let lp = item_offset(t.slot);
                self.page[lp..lp + ITEM_ID_SIZE].copy_from_slice(
                    &ItemId::Normal {
                        offset: upper as u16,
                        len: t.len as u16,
                    }
                    .encode()
                    .to_le_bytes(),
                );
            }
        }
        self.delta
            .touch(item_offset(slot_min)..item_offset(slot_max) + ITEM_ID_SIZE);
    }
}

/// Calls `f(src, to)` for each run the shift layout of `live` (highest offset first, on a
/// page of `page_len` bytes) moves, highest first: a longest sequence of adjacent tuples
/// that all move up by one distance, from `src` to start at `to`. Tuples packed at the
/// end stay put; below the first hole every tuple moves, and each further hole starts a
/// new run (the distance grows by the hole).
fn shift_runs(live: &[Tuple], page_len: usize, mut f: impl FnMut(Range<usize>, usize)) {
    let mut upper = page_len;
    let mut run: Option<(Range<usize>, usize)> = None;
    for t in live {
        upper -= t.len;
        if t.from == upper {
            continue;
        }
        debug_assert!(t.from < upper, "packing only moves tuples up");
        match &mut run {
            Some((src, to)) if t.from + t.len == src.start => {
                src.start = t.from;
                *to = upper;
            }
            _ => {
                if let Some((src, to)) = run.take() {
                    f(src, to);
                }
                run = Some((t.from..t.from + t.len, upper));
            }
        }
    }
    if let Some((src, to)) = run {
        f(src, to);
    }
}

/// The lowest and highest slot whose tuple the shift layout of `live` moves
/// (`(u16::MAX, 0)` if none moves).
fn moved_slots(live: &[Tuple], page_len: usize) -> (u16, u16) {
    let mut upper = page_len;
    let (mut slot_min, mut slot_max) = (u16::MAX, 0);
    for t in live {
        upper -= t.len;
        if t.from != upper {
            slot_min = slot_min.min(t.slot);
            slot_max = slot_max.max(t.slot);
        }
    }
    (slot_min, slot_max)
}

/// Bytes a record spends on a block's shift (from, to and length, u16 each:
/// `RecordBuilder::shifted_ranges`).
const SHIFT_BYTES: usize = 6;

/// A live tuple as compaction sees it.
#[derive(Debug, Clone, Copy)]
struct Tuple {
    slot: u16,
    from: usize,
    len: usize,
}

/// Bytes a record spends on each range besides its data (offset and length, u16 each:
/// `RecordBuilder::ranges`).
const RANGE_HEADER_BYTES: usize = 4;

/// The fill-holes layout of `live` (highest offset first) for a tuple area that will
/// start at `upper`: each tuple below `upper` with the offset it moves to, first fit into
/// the holes among the tuples at or above `upper`. None if a tuple straddles `upper` (its
/// own old bytes would be a hole) or a tuple fits no hole.
fn fill_plan(live: &[Tuple], upper: usize, page_len: usize) -> Option<Vec<(Tuple, usize)>> {
    let mut holes: Vec<Range<usize>> = Vec::new();
    let mut top = page_len;
    let mut movers = Vec::new();
    for &t in live {
        if t.from >= upper {
            if t.from + t.len < top {
                holes.push(t.from + t.len..top);
            }
            top = top.min(t.from);
        } else if t.from + t.len > upper {
            return None;
        } else {
            movers.push(t);
        }
    }
    if top > upper {
        holes.push(upper..top);
    }
    let mut plan = Vec::with_capacity(movers.len());
    for t in movers {
        let h = holes.iter_mut().find(|h| h.len() >= t.len)?;
        plan.push((t, h.start));
        h.start += t.len;
    }
    Some(plan)
}

/// Bytes (with range headers) the fill-holes `plan` would log: each moved tuple and its
/// line pointer, or the whole page if that many ranges would overflow the delta.
fn fill_cost(plan: &[(Tuple, usize)], page_len: usize) -> usize {
    if plan.is_empty() {
        return 0;
    }
    if 2 * plan.len() + 1 > PAGE_DELTA_RANGES_MAX {
        return page_len;
    }
    plan.iter()
        .map(|(t, _)| t.len + ITEM_ID_SIZE + 2 * RANGE_HEADER_BYTES)
        .sum()
}

/// Byte offset of the line pointer of `slot` (1-based).
fn item_offset(slot: u16) -> usize {
    PAGE_HEADER_SIZE + (slot as usize - 1) * ITEM_ID_SIZE
}

/// The hint bits every tuple of `page` may carry without a log record
/// (`XMIN_COMMITTED`, `XMIN_INVALID`, `XMAX_COMMITTED`, `XMAX_INVALID`).
pub const HINT_BITS: u16 = XMIN_COMMITTED | XMIN_INVALID | XMAX_COMMITTED | XMAX_INVALID;

/// Clears what a heap page may hold that its log records do not decide: every tuple's
/// hint bits ([`HINT_BITS`], set by readers without a record), the free space and the
/// checksum ([`page::mask_unlogged`]). Two images of one page at one LSN, one from the
/// live run and one rebuilt by recovery, are equal once both are masked (PostgreSQL's
/// `heap_mask`, for `wal_consistency_checking`). A page that is not a well-formed heap
/// page is left alone but for the checksum.
pub fn mask_unlogged(page: &mut [u8]) {
    page::mask_unlogged(page);
    if page::is_new(page) || page::lower(page) as usize > page.len() {
        return;
    }
    let slots = HeapPage(page).slots();
    for slot in 1..=slots {
        if let ItemId::Normal { offset, len } = HeapPage(page).item(slot) {
            let o = offset as usize + 14;
            if (len as usize) < TUPLE_HEADER_SIZE || o + 2 > page.len() {
                continue;
            }
            let m = u16::from_le_bytes([page[o], page[o + 1]]) & !HINT_BITS;
            page[o..o + 2].copy_from_slice(&m.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Masking makes two images that differ only in hint bits and the checksum equal,
    /// and leaves every other difference standing.
    #[test]
    fn masking_hides_hint_bits_and_the_checksum_only() {
        let mut a = vec![0u8; 8192];
        let mut p = HeapPageMut::new(&mut a);
        let s = p.insert(0, 10, b"row").unwrap();
        let mut b = a.clone();
        let mut h = HeapPage(&b).tuple(s).unwrap().0;
        h.infomask |= XMIN_COMMITTED;
        assert!(HeapPageMut::new(&mut b).set_header(s, &h));
        b[9] = 0x5a; // a checksum
        assert_ne!(a, b);
        let (mut ma, mut mb) = (a.clone(), b.clone());
        mask_unlogged(&mut ma);
        mask_unlogged(&mut mb);
        assert_eq!(ma, mb);
        // A logged field (xmax) differing stays a difference.
        h.xmax = 11;
        assert!(HeapPageMut::new(&mut b).set_header(s, &h));
        let mut mb = b.clone();
        mask_unlogged(&mut mb);
        assert_ne!(ma, mb);
        // Bytes in the free space (left by a compaction) are not compared.
        let (mut c, mut d) = (a.clone(), a.clone());
        let free = page::lower(&c) as usize + 10;
        c[free] = 1;
        d[free] = 2;
        mask_unlogged(&mut c);
        mask_unlogged(&mut d);
        assert_eq!(c, d);
        // A page that is not a heap page: only the checksum is cleared.
        let mut junk = vec![0xffu8; 8192];
        mask_unlogged(&mut junk);
        assert!(junk[8..12].iter().all(|&x| x == 0) && junk[12..].iter().all(|&x| x == 0xff));
    }

    #[test]
    fn insert_fetch_update_header_and_compact() {
        let mut buf = vec![0u8; 8192];
        let mut p = HeapPageMut::new(&mut buf);
        let a = p.insert(7, 10, b"alpha").unwrap();
        let b = p.insert(7, 11, &[9u8; 300]).unwrap();
        assert_eq!((a, b), (1, 2));
        let (h, d) = p.view().tuple(a).unwrap();
        assert_eq!(
            (h.xmin, h.xmax, h.ctid_block, h.ctid_slot, d),
            (10, 0, 7, 1, &b"alpha"[..])
        );
        assert!(h.infomask & XMAX_INVALID != 0);
        let mut h2 = h;
        h2.xmax = 12;
        h2.infomask = XMIN_COMMITTED;
        assert!(p.set_header(a, &h2));
        assert_eq!(p.view().tuple(a).unwrap().0, h2);
        p.data_mut(b).unwrap()[0] = 1;
        let before = p.view().free_space();
        p.set_item_state(b, ItemId::Unused);
        let after = p.compact();
        assert!(after >= before + 300, "{before} -> {after}");
        assert_eq!(p.view().tuple(a).unwrap().1, b"alpha", "slot numbers stay");
        p.view().check().unwrap();
    }

    #[test]
    fn first_unused_reads_only_the_flags() {
        let mut buf = vec![0u8; 8192];
        let mut p = HeapPageMut::new(&mut buf);
        for _ in 0..6 {
            p.insert(0, 3, &[7u8; 40]).unwrap();
        }
        p.set_item_state(2, ItemId::Dead);
        p.set_item_state(3, ItemId::Redirect { to: 5 });
        assert_eq!(p.view().first_unused(), None);
        p.set_item_state(4, ItemId::Unused);
        assert_eq!(p.view().first_unused(), Some(4));
        // A full page still fits a tuple into the unused slot's line pointer.
        let free = p.view().free_space();
        assert_eq!(free % TUPLE_ALIGN, 0);
        let len = free - TUPLE_HEADER_SIZE;
        assert!(p.view().fits(len) && tuple_space(len) + ITEM_ID_SIZE > free);
        assert_eq!(p.insert(0, 3, &vec![1u8; len]), Some(4));
        assert!(HeapPage(&[0u8; 8192]).first_unused().is_none());
    }

    #[test]
    fn pages_fill_exactly_and_refuse_more() {
        for size in crate::page::PAGE_SIZES {
            let mut buf = vec![0u8; size];
            let mut p = HeapPageMut::new(&mut buf);
            let mut n = 0;
            while p.insert(0, 3, &[1u8; 100]).is_some() {
                n += 1;
            }
            // 100 B data + 20 B header = 120 B (aligned), plus a 4 B line pointer.
            assert_eq!(n, (size - PAGE_HEADER_SIZE) / 124, "page size {size}");
            assert!(!p.view().fits(100));
            p.view().check().unwrap();
        }
    }

    /// Runs `change` on `buf` through a fresh mutator and returns what it declared, after
    /// checking that it declared every byte that changed.
    fn declared(buf: &mut [u8], change: impl FnOnce(&mut HeapPageMut<'_>)) -> PageDelta {
        let before = buf.to_vec();
        let mut p = HeapPageMut::new(buf);
        change(&mut p);
        let delta = p.into_delta();
        crate::page_delta::assert_delta_covers(&before, buf, &delta);
        delta
    }

    /// An 8 kB page filled with tuples of `len` bytes, the middle one then made unused
    /// (an update's dead version pruned); returns it and its slot count.
    fn full_page_with_a_hole(len: usize) -> (Vec<u8>, u16) {
        let mut page = vec![0u8; 8192];
        let mut p = HeapPageMut::new(&mut page);
        while p.insert(3, 10, &vec![4u8; len]).is_some() {}
        let slots = p.view().slots();
        p.set_item_state(slots / 2, ItemId::Unused);
        (page, slots)
    }

    #[test]
    fn each_mutator_declares_what_it_writes_and_little_more() {
        let mut buf = vec![0u8; 8192];
        // The first insert initializes a zeroed page: the header, not the whole page.
        let d = declared(&mut buf, |p| {
            p.insert(3, 10, b"first").unwrap();
        });
        assert!(!d.is_whole());
        assert!(
            d.bytes() <= PAGE_HEADER_SIZE + ITEM_ID_SIZE + tuple_space(5) + 8,
            "{d:?}"
        );
        for len in [0, 1, 50, 300, 2000] {
            let data = vec![7u8; len];
            let d = declared(&mut buf, |p| {
                p.insert(3, 11, &data).unwrap();
            });
            // The tuple, its line pointer and lower/upper, with at most two merge gaps.
            assert!(
                d.bytes() <= tuple_space(len) + ITEM_ID_SIZE + 4 + 8,
                "{len}: {d:?}"
            );
            assert!(d.ranges().len() <= 3, "{d:?}");
        }
        let (mut h, _) = HeapPage(&buf).tuple(2).unwrap();
        h.xmax = 99;
        h.infomask |= XMIN_COMMITTED;
        let d = declared(&mut buf, |p| assert!(p.set_header(2, &h)));
        assert!(d.bytes() <= 16, "{d:?}");
        // Restating a header writes nothing, so nothing is logged.
        assert!(declared(&mut buf, |p| assert!(p.set_header(2, &h))).is_empty());
        // Slots: 1 "first", then 0, 1, 50, 300 and 2000 bytes of data.
        let d = declared(&mut buf, |p| p.data_mut(4).unwrap()[0] = 1);
        assert_eq!(d.bytes(), 50);
        let d = declared(&mut buf, |p| p.shrink_to_header(5));
        assert!(d.bytes() <= 2 + 4 + 4 && d.ranges().len() == 2, "{d:?}");
        let d = declared(&mut buf, |p| p.set_item_state(6, ItemId::Dead));
        assert_eq!(
            d.ranges(),
            std::slice::from_ref(&(item_offset(6)..item_offset(6) + 4))
        );
        assert!(declared(&mut buf, |p| p.set_item_state(6, ItemId::Dead)).is_empty());
        // Compaction: slot 6 was the lowest tuple, so only the stub at slot 5 moves up
        // into the 296 bytes it freed (slots 1-4 stay put).
        let d = declared(&mut buf, |p| {
            p.compact();
        });
        assert!(d.bytes() <= tuple_space(0) + ITEM_ID_SIZE + 4 + 8, "{d:?}");
        // Compacting a compact page writes nothing.
        assert!(declared(&mut buf, |p| {
            p.compact();
        })
        .is_empty());
        HeapPage(&buf).check().unwrap();
        // An update's dead version in the middle of a full page: fill-holes moves one
        // tuple of the same size into its hole, not the half page below it.
        let (mut full, _) = full_page_with_a_hole(100);
        let d = declared(&mut full, |p| {
            p.compact();
        });
        assert!(
            d.bytes() <= tuple_space(100) + ITEM_ID_SIZE + 4 + 8,
            "{d:?}"
        );
        HeapPage(&full).check().unwrap();
        // Large tuples with one dead in the middle: the ones below it shift up as the
        // delta's shift, and only their line pointers are logged, not a tuple's bytes.
        let (mut wide, slots) = full_page_with_a_hole(700);
        let d = declared(&mut wide, |p| {
            p.compact();
        });
        let moved = tuple_space(700) * (slots as usize - slots as usize / 2);
        assert_eq!(
            d.shift().map(|s| (s.len, s.to - s.from)),
            Some((moved, tuple_space(700))),
            "{d:?}"
        );
        assert!(d.bytes() <= slots as usize * ITEM_ID_SIZE + 8, "{d:?}");
        HeapPage(&wide).check().unwrap();
        // Every other tuple dead: too many holes to fill one by one, so the live ones
        // shift up in runs, the largest as the shift.
        let mut half = vec![0u8; 8192];
        let mut p = HeapPageMut::new(&mut half);
        while p.insert(3, 10, &[4u8; 100]).is_some() {}
        for s in (1..=p.view().slots()).step_by(2) {
            p.set_item_state(s, ItemId::Dead);
        }
        let (n, live) = (p.view().slots() as usize, p.view().slots() as usize / 2);
        let d = declared(&mut half, |p| {
            p.compact();
        });
        assert!(!d.is_whole(), "{d:?}");
        assert!(d.bytes() <= live * tuple_space(100) + n * ITEM_ID_SIZE + 8);
        HeapPage(&half).check().unwrap();
        // A page that is not new but not zeros either: init declares the whole page.
        let mut junk = vec![5u8; 4096];
        junk[14..16].fill(0); // layout 0: "new"
        let d = declared(&mut junk, |p| p.init_if_new());
        assert!(d.is_whole());
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(usize),
        Remove(usize),
        SetXmax(usize, u32),
        Compact,
    }

    proptest! {
        /// Random inserts, header changes, removals and compactions against a model: every
        /// live tuple keeps its slot and bytes, the layout invariants hold after every step,
        /// and every step (each through its own mutator, as `Heap::change_logged` does)
        /// declared every byte it changed.
        #[test]
        fn heap_page_matches_model(ops in proptest::collection::vec(prop_oneof![
            5 => (0usize..400).prop_map(Op::Insert),
            3 => (0usize..64).prop_map(Op::Remove),
            2 => (0usize..64, 0u32..4).prop_map(|(k, x)| Op::SetXmax(k, x)),
            1 => Just(Op::Compact),
        ], 1..200)) {
            let mut buf = vec![0u8; 8192];
            let mut model: BTreeMap<u16, Vec<u8>> = BTreeMap::new();
            let mut counter = 0u8;
            for op in ops {
                let before = buf.clone();
                let mut p = HeapPageMut::new(&mut buf);
                let nth = |k: usize, model: &BTreeMap<u16, Vec<u8>>| {
                    model.keys().nth(k % model.len().max(1)).copied()
                };
                match op {
                    Op::Insert(len) => {
                        counter = counter.wrapping_add(1);
                        let data = vec![counter; len];
                        let fits = p.view().fits(len);
                        match p.insert(1, 3, &data) {
                            Some(slot) => {
                                prop_assert!(fits);
                                prop_assert!(!model.contains_key(&slot), "slot {} reused while live", slot);
                                prop_assert!(p.delta().bytes() <= tuple_space(len) + 8 + 8 + PAGE_HEADER_SIZE);
                                model.insert(slot, data);
                            }
                            None => prop_assert!(!fits),
                        }
                    }
                    Op::Remove(k) => {
                        if let Some(slot) = nth(k, &model) {
                            p.set_item_state(slot, ItemId::Unused);
                            model.remove(&slot);
                        }
                    }
                    Op::SetXmax(k, xmax) => {
                        if let Some(slot) = nth(k, &model) {
                            let (mut h, _) = p.view().tuple(slot).expect("live");
                            h.xmax = xmax;
                            prop_assert!(p.set_header(slot, &h));
                            prop_assert!(p.delta().bytes() <= 16);
                        }
                    }
                    Op::Compact => { p.compact(); }
                }
                let delta = p.into_delta();
                crate::page_delta::assert_delta_covers(&before, &buf, &delta);
                // The raw search and the fast path of `fits` agree with the line pointers.
                let v = HeapPage(&buf);
                let unused = (1..=v.slots()).find(|&s| v.item(s) == ItemId::Unused);
                prop_assert_eq!(v.first_unused(), unused);
                for len in [0, 100, 1000, 8000] {
                    let lp = if unused.is_some() { 0 } else { ITEM_ID_SIZE };
                    prop_assert_eq!(v.fits(len), v.free_space() >= tuple_space(len) + lp);
                }
                if let Err(e) = HeapPage(&buf).check() {
                    prop_assert!(false, "{}", e);
                }
                for (&slot, data) in &model {
                    prop_assert_eq!(HeapPage(&buf).tuple(slot).map(|t| t.1.to_vec()), Some(data.clone()));
                }
            }
        }
    }
}
