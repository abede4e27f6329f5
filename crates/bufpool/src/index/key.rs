//! Keys for the integer B-tree from other types: order-keeping encodings to `i64`.
//!
//! Why the tree keys on `i64`: its entries are fixed 16-byte (key, value) pairs, so a
//! page is a sorted array searched by bisection, a split cuts it at a count, a separator
//! is one pair, and every change logs a fixed byte range. Variable-length keys would need
//! a line-pointer page, prefix-aware separators and larger log records: a second tree.
//! Byte keys are served instead by an order-keeping prefix ([`byte_key`]) and a recheck
//! against the row, which keeps range scans in byte order: the approach of an index on an
//! expression whose result is lossy, rechecked against the heap tuple.
//!
//! Invariant of every encoding here: `a <= b` implies `encode(a) <= encode(b)`, so a range
//! `[lo, hi]` of the original type is inside `[encode(lo), encode(hi)]` of keys.

/// An order-keeping key for a byte string: its first eight bytes (zero-padded), big-endian,
/// with the sign bit flipped so that `i64` order is byte order. Strings that agree on their
/// first eight bytes, or differ only by trailing zero bytes within them, get the same key:
/// index it non-unique and compare the row's own key on every hit.
///
/// ```
/// use bufpool::index::byte_key;
/// assert!(byte_key(b"apple") < byte_key(b"banana"));
/// assert!(byte_key(b"user1") < byte_key(b"user2"));
/// assert!(byte_key(b"") < byte_key(b"\x01"));
/// assert_eq!(byte_key(b"user0000001"), byte_key(b"user0000002")); // recheck the row
/// ```
pub fn byte_key(bytes: &[u8]) -> i64 {
    let mut prefix = [0u8; 8];
    let n = bytes.len().min(8);
    prefix[..n].copy_from_slice(&bytes[..n]);
    (u64::from_be_bytes(prefix) ^ (1 << 63)) as i64
}

/// The order-keeping key of an unsigned integer: `u64` order is `i64` order of the result.
pub fn u64_key(v: u64) -> i64 {
    (v ^ (1 << 63)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn byte_keys_keep_byte_order() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut strings: Vec<Vec<u8>> = (0..2000)
            .map(|_| {
                let len = rng.random_range(0..12);
                (0..len).map(|_| rng.random_range(0..4u8) * 85).collect()
            })
            .collect();
        strings.sort();
        for w in strings.windows(2) {
            assert!(byte_key(&w[0]) <= byte_key(&w[1]), "{:?} {:?}", w[0], w[1]);
        }
        assert!(byte_key(&[0xff; 8]) > byte_key(&[0x7f, 0xff]));
    }

    #[test]
    fn u64_keys_keep_order() {
        let vs = [0, 1, (1 << 63) - 1, 1 << 63, u64::MAX];
        for w in vs.windows(2) {
            assert!(u64_key(w[0]) < u64_key(w[1]));
        }
    }
}
