//! Identities shared by every layer: relations, forks, blocks, buffer tags and LSNs.
//!
//! Owns: plain value types and their hashing. Invariants: a `BufferTag` sorts by
//! (tablespace, relation, fork, block), the order in which checkpoints write.
//! Locks: none.

use std::fmt;

/// Block number within one fork of a relation (PostgreSQL's `BlockNumber`).
pub type BlockNumber = u32;

/// Largest block number a fork may hold; `u32::MAX` is reserved as "invalid" as in PostgreSQL.
pub const MAX_BLOCK_NUMBER: BlockNumber = u32::MAX - 1;

/// A relation's file identity: the tablespace (a directory) and the relation number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct RelFileId {
    /// The tablespace's id (0: the default tablespace, in the data directory).
    pub tablespace: u32,
    /// The relation number, which names its files.
    pub relation: u32,
}

impl RelFileId {
    /// The identity of relation `relation` in tablespace `tablespace`.
    pub const fn new(tablespace: u32, relation: u32) -> Self {
        Self {
            tablespace,
            relation,
        }
    }
}

impl fmt::Display for RelFileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.tablespace, self.relation)
    }
}

/// Which file of a relation (PostgreSQL's `ForkNumber`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
#[repr(u8)]
pub enum ForkNumber {
    /// The main fork: the relation's pages.
    #[default]
    Main = 0,
    /// The free-space map (`_fsm`).
    FreeSpace = 1,
    /// The visibility map (`_vm`).
    Visibility = 2,
    /// The init fork (`_init`), PostgreSQL's fork for unlogged relations.
    Init = 3,
}

impl ForkNumber {
    /// Every fork, in the order of their numbers.
    pub const ALL: [ForkNumber; 4] = [
        ForkNumber::Main,
        ForkNumber::FreeSpace,
        ForkNumber::Visibility,
        ForkNumber::Init,
    ];

    /// File-name suffix, as PostgreSQL names its forks.
    pub fn suffix(self) -> &'static str {
        match self {
            ForkNumber::Main => "",
            ForkNumber::FreeSpace => "_fsm",
            ForkNumber::Visibility => "_vm",
            ForkNumber::Init => "_init",
        }
    }

    /// The fork numbered `v`, if there is one.
    pub fn from_u8(v: u8) -> Option<Self> {
        Self::ALL.get(v as usize).copied()
    }
}

/// The name of one page: the buffer-mapping key and the checkpoint sort key.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct BufferTag {
    /// The relation.
    pub rel: RelFileId,
    /// The fork of the relation.
    pub fork: ForkNumber,
    /// The block number within the fork.
    pub block: BlockNumber,
}

impl BufferTag {
    /// The tag of block `block` of fork `fork` of `rel`.
    pub const fn new(rel: RelFileId, fork: ForkNumber, block: BlockNumber) -> Self {
        Self { rel, fork, block }
    }

    /// First packed word: tablespace and relation.
    #[inline]
    pub(crate) fn word0(&self) -> u64 {
        (u64::from(self.rel.tablespace) << 32) | u64::from(self.rel.relation)
    }

    /// Second packed word: fork and block.
    #[inline]
    pub(crate) fn word1(&self) -> u64 {
        (u64::from(self.fork as u8) << 32) | u64::from(self.block)
    }

    #[inline]
    pub(crate) fn from_words(w0: u64, w1: u64) -> Self {
        Self {
            rel: RelFileId {
                tablespace: (w0 >> 32) as u32,
                relation: w0 as u32,
            },
            fork: ForkNumber::from_u8((w1 >> 32) as u8).unwrap_or(ForkNumber::Main),
            block: w1 as u32,
        }
    }

    /// A well-mixed 64-bit hash (murmur3's finalizer over both words): cheap enough for the
    /// hit path, and spreads consecutive blocks across mapping buckets and partitions.
    #[inline]
    pub fn hash64(&self) -> u64 {
        fmix64(self.word0() ^ fmix64(self.word1().wrapping_add(0x9e37_79b9_7f4a_7c15)))
    }

    /// The 13 bytes of identity that page checksums cover (little-endian).
    pub(crate) fn identity_bytes(&self) -> [u8; 13] {
        let mut b = [0u8; 13];
        b[0..4].copy_from_slice(&self.rel.tablespace.to_le_bytes());
        b[4..8].copy_from_slice(&self.rel.relation.to_le_bytes());
        b[8] = self.fork as u8;
        b[9..13].copy_from_slice(&self.block.to_le_bytes());
        b
    }
}

impl fmt::Display for BufferTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rel {}{} block {}",
            self.rel,
            self.fork.suffix(),
            self.block
        )
    }
}

#[inline]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// Log sequence number: a byte position in the WAL.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct Lsn(pub u64);

impl Lsn {
    /// LSN 0, the start of the log; a new (all-zero) page carries it.
    pub const ZERO: Lsn = Lsn(0);
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // PostgreSQL's X/X notation.
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_words_round_trip_and_sort_by_checkpoint_order() {
        let a = BufferTag::new(RelFileId::new(1, 7), ForkNumber::Visibility, 42);
        assert_eq!(BufferTag::from_words(a.word0(), a.word1()), a);
        let b = BufferTag::new(RelFileId::new(1, 7), ForkNumber::Main, 43);
        let c = BufferTag::new(RelFileId::new(2, 0), ForkNumber::Main, 0);
        let mut v = vec![c, a, b];
        v.sort();
        assert_eq!(v, vec![b, a, c]);
    }

    #[test]
    fn consecutive_blocks_hash_apart() {
        let rel = RelFileId::new(0, 1);
        let mut low_bits = std::collections::HashSet::new();
        for block in 0..1024 {
            low_bits.insert(BufferTag::new(rel, ForkNumber::Main, block).hash64() & 127);
        }
        // 1024 consecutive blocks should touch (nearly) all 128 partitions.
        assert!(
            low_bits.len() > 120,
            "only {} partitions used",
            low_bits.len()
        );
    }

    #[test]
    fn lsn_prints_like_postgres() {
        assert_eq!(Lsn(0x1_0000_00A0).to_string(), "1/A0");
    }
}
