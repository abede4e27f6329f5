//! YCSB's keys: a record's number (`keynum`, 0 up) becomes its key `user<hash>` (the
//! decimal FNV-1a hash of the number, as YCSB's `buildKeyName` with hashed inserts), the
//! key an order-keeping `i64` for the integer B-tree ([`index_key`]), and the request
//! distributions that pick a record number: scrambled Zipfian ([`Chooser::Zipfian`]) and
//! latest ([`Chooser::Latest`]), YCSB's two for the core workloads.
//!
//! Invariant: `a <= b` in byte order implies `index_key(a) <= index_key(b)` (so a range
//! scan over the index is a range in key order), and two keys get the same index key only
//! when they agree on their first [`INDEX_DIGITS`] digits after `user` (a row's own key is
//! compared on every hit).

use anyhow::{ensure, Result};
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Zipf};

/// The prefix every key starts with (YCSB's).
pub const PREFIX: &str = "user";

/// Digits after [`PREFIX`] that [`index_key`] keeps: 11^18 states fit in an `i64`.
pub const INDEX_DIGITS: usize = 18;

/// YCSB's `fnvhash64`: FNV-1a over the eight bytes of `v`, low byte first, made
/// non-negative.
pub fn fnv64(v: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in v.to_le_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h as i64).unsigned_abs()
}

/// Record `keynum`'s key: `user` and the decimal hash of the number.
pub fn key_name(keynum: u64) -> String {
    format!("{PREFIX}{}", fnv64(keynum))
}

/// A key as [`key_name`] spells it, held on the stack (the read path's: no allocation).
pub struct KeyBytes {
    buf: [u8; PREFIX.len() + 20],
    len: usize,
}

impl KeyBytes {
    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// [`key_name`] without the allocation.
pub fn key_bytes(keynum: u64) -> KeyBytes {
    let mut k = KeyBytes {
        buf: [0; PREFIX.len() + 20],
        len: PREFIX.len(),
    };
    k.buf[..PREFIX.len()].copy_from_slice(PREFIX.as_bytes());
    // A u64 has at most 20 decimal digits: written backwards, then moved up.
    let mut digits = [0u8; 20];
    let (mut v, mut n) = (fnv64(keynum), 0);
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for (i, d) in digits[..n].iter().rev().enumerate() {
        k.buf[PREFIX.len() + i] = *d;
    }
    k.len += n;
    k
}

/// The order-keeping index key of `key`: the digits after [`PREFIX`] read as a base-11
/// number of [`INDEX_DIGITS`] places, a digit `d` as `d + 1` and a place past the key's
/// end as 0 (so `user12` < `user123` < `user13`, as in byte order). Every key shares the
/// prefix, so the order is the keys' byte order. Anything but digits after the prefix
/// (not a key this workload makes) maps to the key of its digits before it.
pub fn index_key(key: &[u8]) -> i64 {
    let digits = key.strip_prefix(PREFIX.as_bytes()).unwrap_or(key);
    let mut v: i64 = 0;
    let mut ended = false;
    for i in 0..INDEX_DIGITS {
        let place = match digits.get(i) {
            Some(d) if !ended && d.is_ascii_digit() => i64::from(d - b'0') + 1,
            _ => {
                ended = true;
                0
            }
        };
        v = v * 11 + place;
    }
    v
}

/// YCSB's default Zipfian constant.
pub const THETA: f64 = 0.99;

/// A request distribution over record numbers.
#[derive(Debug, Clone)]
pub enum Chooser {
    /// YCSB's `zipfian` (its scrambled generator): a Zipfian rank over the records,
    /// hashed onto them, so the popular records are spread over the table.
    Zipfian(Zipf<f64>),
    /// YCSB's `latest` (workload D): a Zipfian distance back from the newest record.
    Latest(Zipf<f64>),
}

impl Chooser {
    /// Zipfian over `records` records with constant `theta`.
    pub fn zipfian(records: u64, theta: f64) -> Result<Chooser> {
        Ok(Chooser::Zipfian(zipf(records, theta)?))
    }

    /// Latest over `records` records (distances up to `records`) with constant `theta`.
    pub fn latest(records: u64, theta: f64) -> Result<Chooser> {
        Ok(Chooser::Latest(zipf(records, theta)?))
    }

    /// A record number below `count` (the records that exist now; at least 1).
    pub fn next(&self, count: u64, rng: &mut SmallRng) -> u64 {
        let count = count.max(1);
        match self {
            Chooser::Zipfian(z) => fnv64(z.sample(rng) as u64) % count,
            Chooser::Latest(z) => {
                let back = (z.sample(rng) as u64).saturating_sub(1);
                count - 1 - back.min(count - 1)
            }
        }
    }
}

fn zipf(records: u64, theta: f64) -> Result<Zipf<f64>> {
    ensure!(records >= 1, "no records to choose from");
    ensure!(
        theta.is_finite() && theta > 0.0,
        "--zipf-theta {theta}: must be a number above 0 (YCSB uses {THETA})"
    );
    Zipf::new(records as f64, theta).map_err(|e| anyhow::anyhow!("--zipf-theta {theta}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// Proves: index keys keep the keys' byte order, and only keys agreeing on 18 digits
    /// share one.
    #[test]
    fn index_keys_keep_byte_order() {
        let mut keys: Vec<String> = (0..20_000).map(key_name).collect();
        keys.extend(["user1", "user12", "user123", "user13", "user", "user0"].map(String::from));
        keys.sort();
        for w in keys.windows(2) {
            let (a, b) = (index_key(w[0].as_bytes()), index_key(w[1].as_bytes()));
            assert!(a <= b, "{} {}", w[0], w[1]);
            if w[0][4..].len().min(w[1][4..].len()) < INDEX_DIGITS {
                assert!(a < b, "{} {} share a key", w[0], w[1]);
            }
        }
        assert_eq!(
            index_key(b"user1234567890123456780"),
            index_key(b"user1234567890123456789")
        );
        assert!(index_key(b"user99999999999999999999") < i64::MAX);
    }

    /// Proves: YCSB's key names (FNV-1a of the number), Zipfian draws in range and skewed,
    /// latest draws near the newest record.
    #[test]
    fn choosers_draw_in_range_with_their_skew() {
        assert_eq!(key_name(0), format!("user{}", fnv64(0)));
        for n in [0, 1, 9, 10, 12_345, u64::MAX / 3, u64::MAX] {
            assert_eq!(
                key_bytes(n).as_bytes(),
                key_name(n).as_bytes(),
                "record {n}"
            );
        }
        assert_ne!(key_name(1), key_name(2));
        let mut rng = SmallRng::seed_from_u64(3);
        let z = Chooser::zipfian(10_000, THETA).unwrap();
        let mut seen = std::collections::HashMap::<u64, u32>::new();
        for _ in 0..50_000 {
            let k = z.next(10_000, &mut rng);
            assert!(k < 10_000);
            *seen.entry(k).or_default() += 1;
        }
        assert!(seen.values().max().unwrap() > &2_000, "skewed");
        let l = Chooser::latest(10_000, THETA).unwrap();
        let recent = (0..10_000)
            .filter(|_| l.next(10_000, &mut rng) >= 9_900)
            .count();
        assert!(recent > 5_000, "{recent} of 10,000 among the newest 100");
        assert!((0..1000).all(|_| l.next(1, &mut rng) == 0));
        assert!(Chooser::zipfian(10, 0.0).is_err());
    }
}
