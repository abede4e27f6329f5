//! Page deltas: the byte ranges of a page that a change wrote, declared by the code that
//! writes them, so a WAL record carries exactly those bytes without diffing the page.
//!
//! Owns: [`PageDelta`], the recorder every page mutator (`HeapPageMut`, `BtPageMut`) writes
//! its declarations into; [`BeforeImage`], the debug-build check that a change declared
//! every byte it changed; [`changed_ranges`], the byte-by-byte diff that check uses.
//!
//! Why declared rather than diffed: a diff needs a copy of the page before the change
//! (malloc and an 8 KiB memcpy) and a compare of every byte after it; in TPC-B that diff
//! alone took 23% of all CPU (issue 14). The mutator knows what it wrote. Redo stays the
//! same physical byte copy (`RecordBuilder::ranges`), so recovery needs nothing heap- or
//! index-specific.
//!
//! A delta may also hold one *shift* ([`Shift`]): bytes moved within the page (a sorted
//! array's entries making room for an insert or closing the gap of a removal, or a heap
//! page's tuples closing the hole a pruned version left), logged as three numbers instead
//! of the moved bytes and replayed as a `memmove` before the ranges. Without it a B-tree
//! leaf insert logs every entry after its slot: half a page on average, 20 kB of the 28 kB
//! a TPC-C New-Order logged. Redo moves the bytes of the page as it was before the change,
//! then writes the ranges' final bytes over it, so a move is recorded as the shift only if
//! no shift is recorded yet and its source overlaps no range declared before it (those
//! bytes may already differ from the page before the change; every other byte of the
//! source is still as it was then). Whatever a move overwrites that was declared earlier
//! is rewritten from the final page by its range. Any other move is declared as the range
//! it wrote.
//!
//! Invariants: the ranges are ascending, disjoint, non-empty, at least
//! `RANGE_MERGE_GAP_BYTES` + 1 bytes apart, and inside the page; every byte a change wrote
//! lies in one of them (a byte written but not declared would be lost at redo: debug builds
//! check this with [`BeforeImage::assert_declared`] wherever a change is logged). A declared
//! byte need not have changed: the record then carries it unchanged, which is harmless.
//! Overflow: past `PAGE_DELTA_RANGES_MAX` ranges the delta becomes the whole page (still
//! correct, only larger); no heap allocation on the hot path.
//! Locks: none; the mutator's caller holds the page's exclusive content lock.

use std::ops::Range;

/// Ranges a delta holds before it gives up and declares the whole page. A heap insert
/// declares 2-3 ranges (header bounds with the line pointer, the tuple), a same-page update
/// 4-5, a prune or a B-tree split a handful; 16 leaves room and keeps the recorder at
/// 256 bytes on the stack.
pub(crate) const PAGE_DELTA_RANGES_MAX: usize = 16;

/// Ranges closer than this are declared as one: the record spends 4 bytes (offset and
/// length, `RecordBuilder::ranges`) on each range, so a gap of up to 4 unchanged bytes
/// costs no more logged as data than as a second range header.
pub(crate) const RANGE_MERGE_GAP_BYTES: usize = 4;

/// Bytes moved within a page: `len` bytes from offset `from` to offset `to` (the ranges
/// may overlap, as `memmove`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shift {
    /// Where the moved bytes were.
    pub from: usize,
    /// Where they go.
    pub to: usize,
    /// How many.
    pub len: usize,
}

impl Shift {
    /// Moves the bytes in `page` (whose bounds the caller checked).
    pub fn apply(&self, page: &mut [u8]) {
        page.copy_within(self.from..self.from + self.len, self.to);
    }
}

/// The byte ranges of one page that a change wrote, and a shift done before them (see
/// the module doc).
#[derive(Clone)]
pub struct PageDelta {
    ranges: [Range<usize>; PAGE_DELTA_RANGES_MAX],
    len: usize,
    page_len: usize,
    whole: bool,
    shift: Option<Shift>,
}

impl std::fmt::Debug for PageDelta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageDelta")
            .field("ranges", &self.ranges())
            .field("whole", &self.whole)
            .field("shift", &self.shift)
            .finish()
    }
}

impl PageDelta {
    /// An empty delta for a page of `page_len` bytes.
    pub const fn new(page_len: usize) -> PageDelta {
        PageDelta {
            ranges: [const { 0..0 }; PAGE_DELTA_RANGES_MAX],
            len: 0,
            page_len,
            whole: false,
            shift: None,
        }
    }

    /// Moves `src` of `page` to start at `dst` (`memmove`), declaring it as the shift when
    /// [`Self::can_shift`] allows, else as the range it wrote.
    #[inline]
    pub fn shift_within(&mut self, page: &mut [u8], src: Range<usize>, dst: usize) {
        let len = src.len();
        debug_assert!(src.end <= self.page_len && dst + len <= self.page_len);
        page.copy_within(src.clone(), dst);
        if len == 0 {
            return;
        }
        if self.can_shift(&src) {
            self.shift = Some(Shift {
                from: src.start,
                to: dst,
                len,
            });
        } else {
            self.touch(dst..dst + len);
        }
    }

    /// Whether a move of the bytes `src` now would be recorded as the shift: none is
    /// recorded yet, the delta is not the whole page, and no declared range overlaps `src`
    /// (see the module doc).
    #[inline]
    pub fn can_shift(&self, src: &Range<usize>) -> bool {
        self.shift.is_none()
            && !self.whole
            && self
                .ranges()
                .iter()
                .all(|r| r.end <= src.start || src.end <= r.start)
    }

    /// The shift redo does before writing the ranges (None: none, or the delta is the
    /// whole page, whose bytes redo writes anyway).
    #[inline]
    pub fn shift(&self) -> Option<Shift> {
        self.shift.filter(|_| !self.whole)
    }

    /// Declares that bytes `r` were (or are about to be) written. Merges it with every
    /// declared range it overlaps or comes within `RANGE_MERGE_GAP_BYTES` of; past
    /// `PAGE_DELTA_RANGES_MAX` ranges, declares the whole page.
    #[inline]
    pub fn touch(&mut self, r: Range<usize>) {
        debug_assert!(
            r.start <= r.end && r.end <= self.page_len,
            "range {r:?} outside a page of {} bytes",
            self.page_len
        );
        if self.whole || r.is_empty() {
            return;
        }
        let live = &self.ranges[..self.len];
        // First declared range that ends at or after r.start - gap: the first one r can
        // merge with or must precede. Deltas are short; a linear scan beats a search.
        let first = live
            .iter()
            .position(|d| d.end + RANGE_MERGE_GAP_BYTES >= r.start)
            .unwrap_or(self.len);
        // One past the last declared range that starts at or before r.end + gap.
        let mut last = first;
        while last < self.len && self.ranges[last].start <= r.end + RANGE_MERGE_GAP_BYTES {
            last += 1;
        }
        if first == last {
            // Merges with nothing: insert at `first`.
            if self.len == PAGE_DELTA_RANGES_MAX {
                self.touch_whole();
                return;
            }
            self.ranges[first..=self.len].rotate_right(1);
            self.ranges[first] = r;
            self.len += 1;
            return;
        }
        let merged = self.ranges[first].start.min(r.start)..self.ranges[last - 1].end.max(r.end);
        self.ranges[first] = merged;
        // Close the hole left by ranges first + 1 .. last, now inside `merged`.
        let removed = last - first - 1;
        if removed > 0 {
            self.ranges[first + 1..self.len].rotate_left(removed);
            self.len -= removed;
        }
    }

    /// Declares the whole page.
    pub fn touch_whole(&mut self) {
        self.ranges[0] = 0..self.page_len;
        self.len = 1;
        self.whole = true;
    }

    /// The declared ranges, ascending and disjoint.
    #[inline]
    pub fn ranges(&self) -> &[Range<usize>] {
        &self.ranges[..self.len]
    }

    /// Whether nothing was declared (nothing to log).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0 && self.shift.is_none()
    }

    /// Whether the delta is the whole page (declared so, or overflowed).
    pub fn is_whole(&self) -> bool {
        self.whole
    }

    /// Bytes declared in all.
    pub fn bytes(&self) -> usize {
        self.ranges().iter().map(|r| r.len()).sum()
    }
}

/// The exact runs of bytes where `after` differs from `before` (pages of one length). Only
/// for checks and tests: the logging path uses declared [`PageDelta`]s.
pub fn changed_ranges(before: &[u8], after: &[u8]) -> Vec<Range<usize>> {
    assert_eq!(before.len(), after.len(), "pages of different sizes");
    let mut out = Vec::new();
    let mut i = 0;
    while i < after.len() {
        if before[i] == after[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < after.len() && before[i] != after[i] {
            i += 1;
        }
        out.push(start..i);
    }
    out
}

/// Panics unless every byte where `after` differs from `before` lies inside `declared`
/// (ascending and disjoint), naming the first changed run that does not.
pub fn assert_covered(before: &[u8], after: &[u8], declared: &[Range<usize>]) {
    let mut d = declared.iter().peekable();
    for run in changed_ranges(before, after) {
        while d.peek().is_some_and(|r| r.end <= run.start) {
            d.next();
        }
        let covered = d
            .peek()
            .is_some_and(|r| r.start <= run.start && run.end <= r.end);
        assert!(
            covered,
            "bytes {run:?} changed but were not declared (declared: {declared:?}); redo would lose them"
        );
    }
}

/// Panics unless redo of `delta` (its shift on `before`, then its ranges) explains every
/// byte where `after` differs from `before`.
pub fn assert_delta_covers(before: &[u8], after: &[u8], delta: &PageDelta) {
    match delta.shift() {
        None => assert_covered(before, after, delta.ranges()),
        Some(s) => {
            let mut moved = before.to_vec();
            s.apply(&mut moved);
            assert_covered(&moved, after, delta.ranges());
        }
    }
}

/// A page's bytes before a change, kept in debug builds only: after the change,
/// [`BeforeImage::assert_declared`] checks that its delta declared every byte it changed. In
/// release builds it is empty and the check does nothing, so logging copies no page.
pub struct BeforeImage {
    #[cfg(debug_assertions)]
    bytes: Vec<u8>,
}

impl BeforeImage {
    /// Remembers `page` as it is before the change (debug builds only).
    #[inline]
    pub fn take(page: &[u8]) -> BeforeImage {
        #[cfg(not(debug_assertions))]
        let _ = page;
        BeforeImage {
            #[cfg(debug_assertions)]
            bytes: page.to_vec(),
        }
    }

    /// Debug builds: panics if `after` differs from the remembered page anywhere outside
    /// `delta`'s ranges (a write the mutator did not declare, which redo would lose).
    #[inline]
    pub fn assert_declared(&self, after: &[u8], delta: &PageDelta) {
        #[cfg(debug_assertions)]
        assert_delta_covers(&self.bytes, after, delta);
        #[cfg(not(debug_assertions))]
        let _ = (after, delta);
    }
}

#[cfg(test)]
// The expected values are slices of ranges, some of one range.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn touches_merge_when_overlapping_or_close_and_stay_sorted() {
        let mut d = PageDelta::new(8192);
        assert!(d.is_empty());
        d.touch(100..110);
        d.touch(10..20);
        d.touch(0..0); // empty: nothing
        assert_eq!(d.ranges(), &[10..20, 100..110]);
        d.touch(22..30); // 2 bytes from 10..20: merged
        assert_eq!(d.ranges(), &[10..30, 100..110]);
        d.touch(40..50);
        d.touch(60..70);
        d.touch(25..96); // spans 40..50 and 60..70, 4 bytes from 100..110
        assert_eq!(d.ranges(), &[10..110]);
        d.touch(115..120); // 5 bytes away: a range of its own
        assert_eq!(d.ranges(), &[10..110, 115..120]);
        d.touch(50..60); // inside: no change
        assert_eq!(d.ranges(), &[10..110, 115..120]);
        assert_eq!(d.bytes(), 105);
        assert!(!d.is_whole());
    }

    /// Proves: a move as the first declaration is a shift (redo's memmove then the ranges
    /// rebuild the page), a later one a range, and the debug check accepts both; a move
    /// after other declarations is the shift unless its source overlaps one of them.
    #[test]
    fn a_first_move_is_a_shift_and_a_later_one_a_range() {
        let before: Vec<u8> = (0..64u8).collect();
        let mut page = before.clone();
        let mut d = PageDelta::new(64);
        d.shift_within(&mut page, 8..40, 12);
        page[8..12].copy_from_slice(&[9, 9, 9, 9]);
        d.touch(8..12);
        assert_eq!(
            d.shift(),
            Some(Shift {
                from: 8,
                to: 12,
                len: 32
            })
        );
        assert_eq!(d.ranges(), &[8..12]);
        assert!(!d.is_empty());
        BeforeImage::take(&before).assert_declared(&page, &d);
        let mut redo = before.clone();
        d.shift().unwrap().apply(&mut redo);
        for r in d.ranges() {
            redo[r.clone()].copy_from_slice(&page[r.clone()]);
        }
        assert_eq!(redo, page);
        // A second move is declared as what it wrote.
        d.shift_within(&mut page, 50..54, 56);
        assert_eq!(d.ranges(), &[8..12, 56..60]);
        // After a range the source does not overlap: still the shift.
        let before = page.clone();
        let mut e = PageDelta::new(64);
        page[0..2].copy_from_slice(&[7, 7]);
        e.touch(0..2);
        e.shift_within(&mut page, 10..20, 11);
        assert_eq!(
            (e.shift(), e.ranges()),
            (
                Some(Shift {
                    from: 10,
                    to: 11,
                    len: 10
                }),
                &[0..2][..]
            )
        );
        BeforeImage::take(&before).assert_declared(&page, &e);
        e.touch_whole();
        assert_eq!(e.shift(), None);
        // After a range the source overlaps: the range it wrote (the moved bytes are no
        // longer the page's before the change).
        let mut f = PageDelta::new(64);
        page[14] = 1;
        f.touch(14..15);
        f.shift_within(&mut page, 10..20, 11);
        assert_eq!((f.shift(), f.ranges()), (None, &[11..21][..]));
    }

    #[test]
    fn overflow_declares_the_whole_page() {
        let mut d = PageDelta::new(4096);
        for i in 0..PAGE_DELTA_RANGES_MAX {
            d.touch(i * 100..i * 100 + 2);
        }
        assert_eq!(d.ranges().len(), PAGE_DELTA_RANGES_MAX);
        assert!(!d.is_whole());
        d.touch(3000..3001);
        assert!(d.is_whole());
        assert_eq!(d.ranges(), &[0..4096]);
        d.touch(5..6); // later touches change nothing
        assert_eq!(d.ranges(), &[0..4096]);
        let mut w = PageDelta::new(8192);
        w.touch_whole();
        assert_eq!((w.ranges(), w.bytes()), (&[0..8192][..], 8192));
    }

    #[test]
    fn changed_ranges_are_exact_runs() {
        let a = vec![0u8; 100];
        let mut b = a.clone();
        b[10..21].fill(1);
        b[30] = 2;
        b[99] = 3;
        assert_eq!(changed_ranges(&a, &b), vec![10..21, 30..31, 99..100]);
        assert!(changed_ranges(&a, &a).is_empty());
        assert_covered(&a, &b, &[5..31, 99..100]);
    }

    #[test]
    #[should_panic(expected = "not declared")]
    fn an_undeclared_write_is_caught() {
        let a = vec![0u8; 64];
        let mut b = a.clone();
        b[10] = 1;
        b[40] = 1;
        assert_covered(&a, &b, &[8..12]);
    }

    /// One step of [`delta_replays_any_mix_of_writes_and_moves`]: write `len` bytes of
    /// `fill` at `at`, or move `len` bytes from `at` to `to`.
    #[derive(Debug, Clone)]
    enum Step {
        Write { at: usize, len: usize, fill: u8 },
        Move { at: usize, len: usize, to: usize },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0usize..256, 1usize..24, any::<u8>()).prop_map(|(at, len, fill)| Step::Write {
                at,
                len,
                fill
            }),
            (0usize..256, 1usize..96, 0usize..256).prop_map(|(at, len, to)| Step::Move {
                at,
                len,
                to
            }),
        ]
    }

    proptest! {
        /// Writes (declared) and moves (`shift_within`) in any order: redo of the delta
        /// (its shift on the page before, then its ranges' final bytes) rebuilds the page
        /// exactly, whichever move became the shift.
        #[test]
        fn delta_replays_any_mix_of_writes_and_moves(
            steps in proptest::collection::vec(step(), 1..12)
        ) {
            const LEN: usize = 256;
            let before: Vec<u8> = (0..LEN).map(|i| (i * 7 + 3) as u8).collect();
            let mut page = before.clone();
            let mut d = PageDelta::new(LEN);
            for s in steps {
                match s {
                    Step::Write { at, len, fill } => {
                        let r = at..(at + len).min(LEN);
                        page[r.clone()].fill(fill);
                        d.touch(r);
                    }
                    Step::Move { at, len, to } => {
                        let len = len.min(LEN - at).min(LEN - to);
                        d.shift_within(&mut page, at..at + len, to);
                    }
                }
            }
            let mut redo = before.clone();
            if let Some(sh) = d.shift() {
                sh.apply(&mut redo);
            }
            for r in d.ranges() {
                redo[r.clone()].copy_from_slice(&page[r.clone()]);
            }
            prop_assert_eq!(redo, page);
        }

        /// Random touches against a model (a bitmap of touched bytes): the delta covers
        /// every touched byte, its ranges stay sorted, disjoint and more than the merge gap
        /// apart, and it covers untouched bytes only inside merge gaps (or when whole).
        #[test]
        fn delta_covers_exactly_what_was_touched(
            touches in proptest::collection::vec((0usize..1024, 0usize..40), 1..40)
        ) {
            const LEN: usize = 1024;
            let mut d = PageDelta::new(LEN);
            let mut model = vec![false; LEN];
            for (start, len) in touches {
                let r = start..(start + len).min(LEN);
                model[r.clone()].iter_mut().for_each(|b| *b = true);
                d.touch(r);
            }
            let rs = d.ranges();
            for w in rs.windows(2) {
                prop_assert!(w[0].end + RANGE_MERGE_GAP_BYTES < w[1].start, "{:?}", rs);
            }
            let mut declared = vec![false; LEN];
            for r in rs {
                prop_assert!(!r.is_empty());
                declared[r.clone()].iter_mut().for_each(|b| *b = true);
            }
            for i in 0..LEN {
                prop_assert!(!model[i] || declared[i], "byte {} touched, not declared", i);
            }
            if !d.is_whole() {
                // Every declared byte is touched or within a gap of a touched one.
                for i in 0..LEN {
                    if declared[i] && !model[i] {
                        let near = model[i.saturating_sub(RANGE_MERGE_GAP_BYTES)..(i + RANGE_MERGE_GAP_BYTES + 1).min(LEN)]
                            .iter()
                            .any(|&b| b);
                        prop_assert!(near, "byte {} declared far from any touch", i);
                    }
                }
            }
        }
    }
}
