//! What a power cut keeps: each un-synced write kept, dropped, torn or garbaged and each
//! namespace change kept or undone, chosen at random from a seed ([`Rng`]) or as a prefix in
//! program order ([`Prefix`]); the report of what was chosen ([`CrashReport`]). The rules
//! are the module above's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;

/// Granule of a page tear: the page size the kernel writes back, so a power cut in the
/// middle of a large write often leaves it split at a 4 KiB file offset.
pub(super) const TEAR_UNIT: u64 = 4096;

/// The smallest unit a device writes: a power cut can split a write at any sector boundary
/// (a 4 KiB page included), and a write interrupted mid-sector can leave the whole sector
/// unreadable or random, even the bytes of it the write did not cover.
pub(super) const SECTOR: u64 = 512;

/// What became of one un-synced write at a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrashChoice {
    /// The bytes revert to what they were before the write.
    Drop,
    /// The bytes survive.
    Keep,
    /// The bytes up to a 4 KiB file offset inside the write survive; the rest revert.
    Tear,
    /// The bytes up to a 512-byte file offset inside the write survive; the rest revert.
    SectorTear,
    /// Every 512-byte sector the write touched holds pseudo-random bytes.
    Garbage,
}

impl CrashChoice {
    /// Every choice, in the order [`CrashReport`] counts them.
    pub const ALL: [CrashChoice; 5] = [
        CrashChoice::Drop,
        CrashChoice::Keep,
        CrashChoice::Tear,
        CrashChoice::SectorTear,
        CrashChoice::Garbage,
    ];
}

/// What a [`SimVfs::crash`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Un-synced writes dropped.
    pub dropped: u64,
    /// Un-synced writes kept (O_DSYNC writes count here too).
    pub kept: u64,
    /// Un-synced writes torn at a 4 KiB boundary.
    pub torn: u64,
    /// Un-synced writes torn at a 512-byte boundary.
    pub sector_torn: u64,
    /// Un-synced writes whose sectors were filled with garbage.
    pub garbaged: u64,
    /// Un-synced `set_len` calls kept.
    pub len_changes_kept: u64,
    /// Un-synced `set_len` calls reverted.
    pub len_changes_reverted: u64,
    /// Un-synced creates, renames, unlinks and symlinks kept.
    pub namespace_kept: u64,
    /// Un-synced creates, renames, unlinks and symlinks undone.
    pub namespace_undone: u64,
    /// Every un-synced write of a file that has a name after the crash, in the order
    /// replayed: the file's path (after the crash) and what became of the write. O_DSYNC
    /// writes show as kept.
    pub write_fates: Vec<(PathBuf, CrashChoice)>,
    /// Every un-synced namespace change, in program order: `"create"`, `"rename"`,
    /// `"unlink"` or `"symlink"`, the path it created, renamed to, removed or linked, and
    /// whether it was kept.
    pub namespace_fates: Vec<(&'static str, PathBuf, bool)>,
}

impl CrashReport {
    /// How many writes met `choice`.
    pub fn writes(&self, choice: CrashChoice) -> u64 {
        match choice {
            CrashChoice::Drop => self.dropped,
            CrashChoice::Keep => self.kept,
            CrashChoice::Tear => self.torn,
            CrashChoice::SectorTear => self.sector_torn,
            CrashChoice::Garbage => self.garbaged,
        }
    }

    /// How many writes to files whose path satisfies `file` met `choice`.
    pub fn writes_to(&self, file: impl Fn(&Path) -> bool, choice: CrashChoice) -> u64 {
        let n = self.write_fates.iter();
        n.filter(|(p, c)| *c == choice && file(p)).count() as u64
    }

    /// How many namespace changes of `kind` (`"create"`, `"rename"`, `"unlink"`) on paths
    /// satisfying `path` were kept (`kept`) or undone (`!kept`).
    pub fn namespace_changes(&self, kind: &str, path: impl Fn(&Path) -> bool, kept: bool) -> u64 {
        let n = self.namespace_fates.iter();
        n.filter(|(k, p, x)| *k == kind && *x == kept && path(p))
            .count() as u64
    }
}

/// splitmix64: tiny, fast, and good enough to pick crash outcomes reproducibly per seed.
#[derive(Debug)]
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (the modulo bias is negligible for the small `n` used here).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub(super) fn coin(&mut self) -> bool {
        self.next() >> 63 == 1
    }

    pub(super) fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let bytes = self.next().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

/// The file offsets that are multiples of `unit` strictly inside `offset..end`, as
/// (first, count); count 0 when there is none.
pub(super) fn tear_points(offset: u64, end: u64, unit: u64) -> (u64, u64) {
    let first = (offset / unit + 1) * unit;
    let last = (end - 1) / unit * unit;
    if last < first {
        (first, 0)
    } else {
        (first, (last - first) / unit + 1)
    }
}

/// Applies one un-synced write to `image` as the PRNG chooses, counts the choice and
/// returns it.
pub(super) fn crash_write(
    image: &mut Vec<u8>,
    offset: u64,
    data: &[u8],
    rng: &mut Rng,
    report: &mut CrashReport,
) -> CrashChoice {
    let end = offset + data.len() as u64;
    let mut choice = CrashChoice::ALL[rng.below(CrashChoice::ALL.len() as u64) as usize];
    // A tear needs a tear point strictly inside the write; without one it becomes a drop
    // or a keep.
    let unit = match choice {
        CrashChoice::Tear => TEAR_UNIT,
        _ => SECTOR,
    };
    let (first, points) = tear_points(offset, end, unit);
    if matches!(choice, CrashChoice::Tear | CrashChoice::SectorTear) && points == 0 {
        choice = if rng.coin() {
            CrashChoice::Keep
        } else {
            CrashChoice::Drop
        };
    }
    match choice {
        CrashChoice::Drop => report.dropped += 1,
        CrashChoice::Keep => {
            apply_write(image, offset, data);
            report.kept += 1;
        }
        CrashChoice::Tear | CrashChoice::SectorTear => {
            let cut = first + rng.below(points) * unit;
            apply_write(image, offset, &data[..(cut - offset) as usize]);
            if choice == CrashChoice::Tear {
                report.torn += 1;
            } else {
                report.sector_torn += 1;
            }
        }
        CrashChoice::Garbage => {
            if (image.len() as u64) < end {
                image.resize(end as usize, 0);
            }
            let from = (offset / SECTOR * SECTOR) as usize;
            let to = (end.div_ceil(SECTOR) * SECTOR).min(image.len() as u64) as usize;
            rng.fill(&mut image[from..to]);
            report.garbaged += 1;
        }
    }
    choice
}

/// Decides what a power cut keeps: at random ([`Rng`], [`SimVfs::crash`]) or a prefix in
/// program order ([`Prefix`], [`SimVfs::crash_prefix`]).
pub(super) trait Fates {
    /// Whether the pending namespace change `op` survives.
    fn keep_ns(&mut self, op: &NsOp) -> bool;
    /// What a restart finds in `node` (named `path` after the crash), counted in `report`.
    fn image(&mut self, node: &Node, path: &Path, report: &mut CrashReport) -> Vec<u8>;
}

impl Fates for Rng {
    fn keep_ns(&mut self, _: &NsOp) -> bool {
        !self.coin()
    }

    fn image(&mut self, node: &Node, path: &Path, report: &mut CrashReport) -> Vec<u8> {
        node.crash_image(path, self, report)
    }
}

/// Keeps, whole, the changes numbered below its bound; loses the rest.
pub(super) struct Prefix(pub(super) u64);

impl Fates for Prefix {
    fn keep_ns(&mut self, op: &NsOp) -> bool {
        op.seq < self.0
    }

    fn image(&mut self, node: &Node, path: &Path, report: &mut CrashReport) -> Vec<u8> {
        let mut image = node.durable.clone();
        for op in &node.pending {
            let kept = !op.losable() || op.seq() < self.0;
            match op {
                DataOp::SetLen { len, .. } if kept => {
                    image.resize(*len as usize, 0);
                    report.len_changes_kept += 1;
                }
                DataOp::SetLen { .. } => report.len_changes_reverted += 1,
                DataOp::Write { offset, data, .. } => {
                    let fate = if kept {
                        apply_write(&mut image, *offset, data);
                        report.kept += 1;
                        CrashChoice::Keep
                    } else {
                        report.dropped += 1;
                        CrashChoice::Drop
                    };
                    report.write_fates.push((path.to_path_buf(), fate));
                }
            }
        }
        image
    }
}

impl State {
    /// The power cut and restart of [`SimVfs::crash`], with `fates` deciding what survives.
    pub(super) fn power_cut(&mut self, fates: &mut dyn Fates) -> CrashReport {
        let mut report = CrashReport::default();
        let mut names = self.durable.clone();
        for op in std::mem::take(&mut self.pending_ns) {
            let kept = fates.keep_ns(&op);
            report.namespace_fates.push((op.kind, op.path, kept));
            if !kept {
                report.namespace_undone += 1;
                continue;
            }
            report.namespace_kept += 1;
            for (path, id) in op.entries {
                match id {
                    Some(id) => names.insert(path, id),
                    None => names.remove(&path),
                };
            }
        }

        // Each surviving node under its first name (for the report only).
        let mut named: BTreeMap<NodeId, &Path> = BTreeMap::new();
        for (path, id) in &names {
            named.entry(*id).or_insert(path.as_path());
        }
        for (id, node) in std::mem::take(&mut self.nodes) {
            if let Some(path) = named.get(&id) {
                let image = fates.image(&node, path, &mut report);
                let mut survivor = Node::durable_with(image);
                survivor.link = node.link;
                self.nodes.insert(id, survivor);
            }
        }

        self.live = names.clone();
        self.durable = names;
        self.epoch += 1;
        self.fail_at = None;
        report
    }
}
