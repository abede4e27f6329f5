//! Sequential scans of a heap ([`Heap::scan`], [`Heap::scan_with`]): every tuple visible to
//! a snapshot, each under its row's stable tuple id (the root of its same-page chain).
//!
//! A scan first makes its plan ([`crate::scan::plan`] from the engine's knobs, or the
//! caller's): whether it starts at block 0 or at the synchronized position,
//! whether it reads through a bulk-read ring or the shared clock, and whether it
//! first walks the cache trail backwards. Block order, with `s` the start and `t`
//! the lowest block the trail reached (`t = s` without a trail):
//! `s-1, s-2, …, t` (only pages already in the pool), then `s, …, n-1`, then `0, …, t-1`.
//! Every block below `n` (the relation's size when the scan began) is visited exactly once,
//! so the set of tuples is the same as a scan from 0; only the order differs.
//!
//! A synchronized scan reports its position every 128 kB of pages (a try-lock: a busy
//! table skips the report) and, at the end, the last block it read, so the next scan of the
//! table starts where this one left the cache warmest. With `seqscan_sync_pacing`, one
//! through a ring also joins its table's group and, every eighth of its ring, tells it
//! where it is after releasing the page's lock (its pin and the look-ahead's stay),
//! waiting there if it is the group's front and
//! more than half a ring ahead (see `scan/syncscan.rs`).
//!
//! Locks: one page's shared lock at a time (hint bits are set afterwards with a try-lock).

use super::page::{HeapPage, HEAP_ONLY};
use super::visibility::{Hints, Vis};
use super::{chain_roots, Heap, Tid};
use crate::buffer::{BufferRef, Ring, RingKind};
use crate::scan::{self, BlockSource, ReadStream, ScanPlan, ScanPositions, GROUP_WAIT_MAX};
use crate::stats::IoContext;
use crate::table::HeapError;
use crate::txn::Snapshot;
use crate::types::{BlockNumber, ForkNumber};

/// How one scan runs; the default follows the engine's knobs.
#[derive(Debug, Clone, Copy, Default)]
pub struct SeqScanOptions {
    /// The plan; `None`: [`crate::scan::plan`] with the engine's scan knobs.
    pub plan: Option<ScanPlan>,
    /// Bytes of the bulk-read ring when the plan uses one; `None`: the
    /// `bulkread_ring_size` knob. `Some(0)`: no ring even if the plan asks for one.
    pub ring_bytes: Option<usize>,
}

/// What one scan did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanReport {
    /// The plan the scan followed.
    pub plan: ScanPlan,
    /// Whether a ring was used (the plan asked and its size was not 0).
    pub ring: bool,
    /// The relation's size in pages when the scan began: the pages it visited.
    pub pages: BlockNumber,
    /// The first block of the forward pass.
    pub start: BlockNumber,
    /// Pages visited by the backward cache-trail walk (all in the pool).
    pub trail_pages: BlockNumber,
    /// Visible tuples passed to the callback.
    pub tuples: u64,
    /// Whether the scan joined its table's group of paced scans (`seqscan_sync_pacing`),
    /// and how long it waited for the group's last member.
    pub paced: bool,
    /// How long it waited for the group's last member.
    pub group_wait: std::time::Duration,
}

impl Heap<'_> {
    /// Every tuple visible to `snap`, each with its row's stable tuple id on its page,
    /// which later fetches, updates and deletes accept. The order is physical from the
    /// scan's start (see the module doc: a synchronized scan may start mid-table).
    pub fn scan(&self, snap: &Snapshot, f: impl FnMut(Tid, &[u8])) -> Result<(), HeapError> {
        self.scan_with(snap, &SeqScanOptions::default(), f)
            .map(|_| ())
    }

    /// [`Heap::scan`] with explicit options; returns what the scan did.
    pub fn scan_with(
        &self,
        snap: &Snapshot,
        opts: &SeqScanOptions,
        mut f: impl FnMut(Tid, &[u8]),
    ) -> Result<ScanReport, HeapError> {
        let pool = self.engine.pool();
        let n = pool.nblocks(self.rel, ForkNumber::Main)?;
        let plan = opts
            .plan
            .unwrap_or_else(|| scan::plan(n, pool.nbuffers(), self.engine.scan_options()));
        let mut ring = match (plan.ring, opts.ring_bytes) {
            (false, _) => None,
            (true, None) => pool.ring(RingKind::BulkRead),
            (true, Some(bytes)) => Ring::new(RingKind::BulkRead, bytes, pool),
        };
        let context = ring
            .as_ref()
            .map_or(IoContext::Normal, |r| r.kind().context());
        let positions = self.engine.scan_positions();
        let start = if plan.synchronized && n > 0 {
            positions.start(self.rel, ForkNumber::Main, n)
        } else {
            0
        };
        let mut report = ScanReport {
            plan,
            ring: ring.is_some(),
            pages: n,
            start,
            trail_pages: 0,
            tuples: 0,
            paced: false,
            group_wait: std::time::Duration::ZERO,
        };
        let mut page = PageScan {
            heap: self,
            snap,
            hints: Hints::new(),
            roots: Vec::new(),
            tuples: 0,
        };
        // The cache trail: back over the pages a previous scan left in the pool.
        let mut trail_end = start;
        if plan.trail {
            while trail_end > 0 {
                let Some(buf) = pool.read_resident(self.tag(trail_end - 1), context) else {
                    break;
                };
                page.scan(&buf, trail_end - 1, &mut f)?;
                trail_end -= 1;
                report.trail_pages += 1;
            }
        }
        let interval = ScanPositions::report_interval(pool.page_size());
        // Forward from the start, then from 0 to where the trail stopped, through a read
        // stream that pins no more than the ring holds (its look-ahead must not push its
        // own ring members out).
        let mut stream_opts = *self.engine.read_stream_options();
        if let Some(r) = ring.as_ref() {
            stream_opts.max_pins = Some(r.capacity().saturating_sub(1).max(1));
        }
        // Paced: the group's front keeps within half a ring of its last member, checked
        // every eighth of a ring (at most every report interval).
        let pace = ring.as_ref().filter(|_| plan.synchronized && n > 0);
        let pace = pace.filter(|_| self.engine.scan_options().sync_pacing);
        let max_lead = pace.map_or(0, |r| (r.capacity() / 2).max(1) as BlockNumber);
        let check = (max_lead / 4).clamp(1, interval);
        let group = pace.and_then(|_| positions.join(self.rel, ForkNumber::Main, n, start));
        report.paced = group.is_some();
        let mut blocks = (start..n).chain(0..trail_end);
        let stream = ReadStream::new(
            pool,
            self.rel,
            ForkNumber::Main,
            BlockSource::Callback(Box::new(move || blocks.next())),
            ring.as_mut(),
            &stream_opts,
        );
        for buf in stream {
            let buf = buf?;
            let block = buf.tag().block;
            if plan.synchronized && block % interval == 0 {
                positions.report(self.rel, ForkNumber::Main, block);
            }
            page.scan(&buf, block, &mut f)?;
            if let Some(g) = group.as_ref().filter(|_| block % check == 0) {
                report.group_wait += g.advance(block, max_lead, GROUP_WAIT_MAX);
            }
        }
        drop(group);
        if plan.synchronized && n > 0 {
            let last = if trail_end > 0 { trail_end - 1 } else { n - 1 };
            positions.report(self.rel, ForkNumber::Main, last);
        }
        report.tuples = page.tuples;
        Ok(report)
    }
}

/// The per-page part of a scan, with the buffers it reuses from page to page.
struct PageScan<'h, 'e, 's> {
    heap: &'h Heap<'e>,
    snap: &'s Snapshot,
    hints: Hints,
    roots: Vec<u16>,
    tuples: u64,
}

impl PageScan<'_, '_, '_> {
    /// Passes the visible tuples of the pinned page `block` to `f`, then sets the hint
    /// bits it learned.
    fn scan(
        &mut self,
        buf: &BufferRef<'_>,
        block: BlockNumber,
        f: &mut impl FnMut(Tid, &[u8]),
    ) -> Result<(), HeapError> {
        let g = buf.read();
        let page = HeapPage(&g);
        self.roots.clear();
        for slot in 1..=page.slots() {
            if let Some((h, data)) = page.tuple(slot) {
                if self.heap.vis(self.snap, slot, &h, &mut self.hints)? == Vis::Visible {
                    let mut id = slot;
                    if h.infomask & HEAP_ONLY != 0 {
                        if self.roots.is_empty() {
                            chain_roots(page, block, &mut self.roots);
                        }
                        id = self.roots[slot as usize];
                    }
                    f(Tid { block, slot: id }, data);
                    self.tuples += 1;
                }
            }
        }
        drop(g);
        self.heap.set_hints(buf, &mut self.hints)
    }
}
