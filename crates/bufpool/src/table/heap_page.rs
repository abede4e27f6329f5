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
//!                   HEAP_ONLY: made by a same-page update, reached only via its chain)
//!  16 data length u16   18 reserved u16
//! ```
//! Invariants: `PAGE_HEADER_SIZE <= lower <= upper <= special <= page size`; every normal
//! line pointer addresses bytes inside `[upper, special)` that no other one addresses;
//! slot numbers (1-based, as PostgreSQL's OffsetNumber) never move, so tuple ids stay
//! valid across `compact`. Callers hold the buffer's content lock (exclusive to change).

use crate::page::{self, PAGE_HEADER_SIZE};

/// Bytes of a line pointer.
pub const ITEM_ID_SIZE: usize = 4;
/// Bytes of a tuple header.
pub const TUPLE_HEADER_SIZE: usize = 20;
/// Tuples start at 8-byte boundaries (PostgreSQL's MAXALIGN).
const TUPLE_ALIGN: usize = 8;

pub const XMIN_COMMITTED: u16 = 1 << 0;
pub const XMIN_INVALID: u16 = 1 << 1;
pub const XMAX_COMMITTED: u16 = 1 << 2;
pub const XMAX_INVALID: u16 = 1 << 3;
/// The tuple was updated: its ctid points at the newer version.
pub const UPDATED: u16 = 1 << 4;
/// A version made by an update on the same page (PostgreSQL's HEAP_ONLY_TUPLE): only its
/// chain reaches it (through its root's redirect or its predecessor's ctid), so pruning
/// may free its slot once it is dead. Versions without it are chain roots, which indexes
/// and callers hold tuple ids of: pruning turns them into redirects, stubs or dead line
/// pointers, never reusable slots.
pub const HEAP_ONLY: u16 = 1 << 5;

const LP_UNUSED: u8 = 0;
const LP_NORMAL: u8 = 1;
const LP_REDIRECT: u8 = 2;
const LP_DEAD: u8 = 3;

/// A line pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemId {
    Unused,
    Normal { offset: u16, len: u16 },
    Redirect { to: u16 },
    Dead,
}

impl ItemId {
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
    pub xmin: u32,
    pub xmax: u32,
    pub ctid_block: u32,
    pub ctid_slot: u16,
    pub infomask: u16,
}

impl TupleHeader {
    fn read(b: &[u8]) -> TupleHeader {
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4"));
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

fn get_u16(p: &[u8], o: usize) -> usize {
    u16::from_le_bytes([p[o], p[o + 1]]) as usize
}

/// Read access to a heap page.
#[derive(Clone, Copy)]
pub struct HeapPage<'a>(pub &'a [u8]);

impl<'a> HeapPage<'a> {
    fn lower(&self) -> usize {
        page::lower(self.0) as usize
    }
    fn upper(&self) -> usize {
        let u = page::upper(self.0) as usize;
        if u == 0 {
            self.0.len()
        } else {
            u
        }
    }

    /// Number of line pointers (slots 1..=n).
    pub fn slots(&self) -> u16 {
        if page::is_new(self.0) {
            return 0;
        }
        ((self.lower() - PAGE_HEADER_SIZE) / ITEM_ID_SIZE) as u16
    }

    /// The line pointer of `slot` (1-based).
    pub fn item(&self, slot: u16) -> ItemId {
        if slot == 0 || slot > self.slots() {
            return ItemId::Unused;
        }
        let o = PAGE_HEADER_SIZE + (slot as usize - 1) * ITEM_ID_SIZE;
        ItemId::decode(u32::from_le_bytes(self.0[o..o + 4].try_into().expect("4")))
    }

    /// Header and data of the tuple at `slot`, if it holds one.
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

    /// Contiguous free bytes between the line pointers and the tuples.
    pub fn free_space(&self) -> usize {
        if page::is_new(self.0) {
            return self.0.len() - PAGE_HEADER_SIZE;
        }
        self.upper() - self.lower()
    }

    /// The largest tuple data an empty page of this size holds.
    pub fn max_tuple_data(&self) -> usize {
        (self.0.len() - PAGE_HEADER_SIZE - ITEM_ID_SIZE) / TUPLE_ALIGN * TUPLE_ALIGN
            - TUPLE_HEADER_SIZE
    }

    /// Whether a tuple of `data_len` bytes fits now (with a new line pointer if needed).
    pub fn fits(&self, data_len: usize) -> bool {
        self.fits_leaving(data_len, 0)
    }

    /// Whether a tuple of `data_len` bytes fits and leaves at least `reserve` bytes free
    /// (fillfactor: inserts leave room for updates to stay on the page).
    pub fn fits_leaving(&self, data_len: usize, reserve: usize) -> bool {
        let lp = if self.first_unused().is_some() {
            0
        } else {
            ITEM_ID_SIZE
        };
        self.free_space() >= tuple_space(data_len) + lp + reserve
    }

    fn first_unused(&self) -> Option<u16> {
        (1..=self.slots()).find(|&s| self.item(s) == ItemId::Unused)
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

/// Write access to a heap page (the caller holds the exclusive content lock).
pub struct HeapPageMut<'a>(pub &'a mut [u8]);

impl HeapPageMut<'_> {
    pub fn view(&self) -> HeapPage<'_> {
        HeapPage(self.0)
    }

    /// Makes the page an empty heap page if it is new (all zeros).
    pub fn init_if_new(&mut self) {
        if page::is_new(self.0) {
            page::init(self.0, 0);
        }
    }

    fn set_bounds(&mut self, lower: usize, upper: usize) {
        self.0[16..18].copy_from_slice(&(lower as u16).to_le_bytes());
        self.0[18..20].copy_from_slice(&(upper as u16).to_le_bytes());
    }

    fn set_item(&mut self, slot: u16, item: ItemId) {
        let o = PAGE_HEADER_SIZE + (slot as usize - 1) * ITEM_ID_SIZE;
        self.0[o..o + 4].copy_from_slice(&item.encode().to_le_bytes());
    }

    /// Adds a tuple; returns its slot, or None if it does not fit. The tuple's ctid points
    /// at itself (block `block`), as PostgreSQL's does until it is updated.
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
        let t = &mut self.0[upper..upper + size];
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
    /// the slot holds no tuple.
    pub fn set_header(&mut self, slot: u16, h: &TupleHeader) -> bool {
        match self.view().item(slot) {
            ItemId::Normal { offset, .. } => {
                h.write(&mut self.0[offset as usize..]);
                true
            }
            _ => false,
        }
    }

    /// The data bytes of the tuple at `slot`, for in-place changes of fixed-width columns.
    pub fn data_mut(&mut self, slot: u16) -> Option<&mut [u8]> {
        match self.view().item(slot) {
            ItemId::Normal { offset, .. } => {
                let o = offset as usize;
                let n = u16::from_le_bytes([self.0[o + 16], self.0[o + 17]]) as usize;
                Some(&mut self.0[o + TUPLE_HEADER_SIZE..o + TUPLE_HEADER_SIZE + n])
            }
            _ => None,
        }
    }

    /// Cuts the tuple at `slot` down to its header (a stub that only carries its ctid on
    /// to a newer version elsewhere); `compact` reclaims the bytes.
    pub fn shrink_to_header(&mut self, slot: u16) {
        if let ItemId::Normal { offset, .. } = self.view().item(slot) {
            let o = offset as usize;
            self.0[o + 16..o + 18].copy_from_slice(&0u16.to_le_bytes());
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
    pub fn compact(&mut self) -> usize {
        self.init_if_new();
        let v = self.view();
        let n = v.slots();
        let special = self.0.len();
        let mut live: Vec<(u16, Vec<u8>)> = Vec::new();
        for s in 1..=n {
            if let ItemId::Normal { offset, len } = v.item(s) {
                live.push((
                    s,
                    self.0[offset as usize..offset as usize + len as usize].to_vec(),
                ));
            }
        }
        let mut keep = n;
        while keep > 0 && self.view().item(keep) == ItemId::Unused {
            keep -= 1;
        }
        let mut upper = special;
        for (s, bytes) in &live {
            upper -= bytes.len();
            self.0[upper..upper + bytes.len()].copy_from_slice(bytes);
            self.set_item(
                *s,
                ItemId::Normal {
                    offset: upper as u16,
                    len: bytes.len() as u16,
                },
            );
        }
        let lower = PAGE_HEADER_SIZE + keep as usize * ITEM_ID_SIZE;
        self.0[lower..upper].fill(0);
        self.set_bounds(lower, upper);
        upper - lower
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[test]
    fn insert_fetch_update_header_and_compact() {
        let mut buf = vec![0u8; 8192];
        let mut p = HeapPageMut(&mut buf);
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
    fn pages_fill_exactly_and_refuse_more() {
        for size in crate::page::PAGE_SIZES {
            let mut buf = vec![0u8; size];
            let mut p = HeapPageMut(&mut buf);
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

    #[derive(Debug, Clone)]
    enum Op {
        Insert(usize),
        Remove(usize),
        Compact,
    }

    proptest! {
        /// Random inserts, removals and compactions against a model: every live tuple keeps
        /// its slot and bytes, and the layout invariants hold after every step.
        #[test]
        fn heap_page_matches_model(ops in proptest::collection::vec(prop_oneof![
            5 => (0usize..400).prop_map(Op::Insert),
            3 => (0usize..64).prop_map(Op::Remove),
            1 => Just(Op::Compact),
        ], 1..200)) {
            let mut buf = vec![0u8; 8192];
            let mut p = HeapPageMut(&mut buf);
            let mut model: BTreeMap<u16, Vec<u8>> = BTreeMap::new();
            let mut counter = 0u8;
            for op in ops {
                match op {
                    Op::Insert(len) => {
                        counter = counter.wrapping_add(1);
                        let data = vec![counter; len];
                        let fits = p.view().fits(len);
                        match p.insert(1, 3, &data) {
                            Some(slot) => {
                                prop_assert!(fits);
                                prop_assert!(!model.contains_key(&slot), "slot {} reused while live", slot);
                                model.insert(slot, data);
                            }
                            None => prop_assert!(!fits),
                        }
                    }
                    Op::Remove(k) => {
                        if let Some(&slot) = model.keys().nth(k % model.len().max(1)) {
                            p.set_item_state(slot, ItemId::Unused);
                            model.remove(&slot);
                        }
                    }
                    Op::Compact => { p.compact(); }
                }
                if let Err(e) = p.view().check() {
                    prop_assert!(false, "{}", e);
                }
                for (&slot, data) in &model {
                    prop_assert_eq!(p.view().tuple(slot).map(|t| t.1.to_vec()), Some(data.clone()));
                }
            }
        }
    }
}
