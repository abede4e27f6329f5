//! Which account a transaction reads or changes: uniform over the table, as pgbench's
//! built-in scripts, or Zipfian, as YCSB's core workloads (`bench --zipf-theta`, and the
//! `zipf-read-update` / `zipf-select` scripts).
//!
//! A Zipfian draw gives a popularity rank (1 the most requested); as YCSB's scrambled
//! generator does, the rank is hashed (FNV-1a) onto the key space, so the popular accounts
//! are spread over the table's pages rather than packed on its first ones. Two ranks may
//! hash to one account, as in YCSB.

use anyhow::{ensure, Result};
use rand::rngs::SmallRng;
use rand::Rng;
use rand_distr::{Distribution, Zipf};

/// YCSB's default Zipfian constant (its `zipfian` request distribution).
pub const YCSB_THETA: f64 = 0.99;

/// The account chooser of one client.
#[derive(Debug, Clone)]
pub struct Keys {
    accounts: i64,
    zipf: Option<Zipf<f64>>,
}

impl Keys {
    /// Accounts 1..=`accounts`, uniform, or Zipfian with exponent `theta`.
    pub fn new(accounts: i64, theta: Option<f64>) -> Result<Keys> {
        ensure!(accounts >= 1, "no accounts to choose from");
        let zipf = match theta {
            None => None,
            Some(t) => {
                ensure!(
                    t.is_finite() && t > 0.0,
                    "--zipf-theta {t}: must be a number above 0 (YCSB uses {YCSB_THETA})"
                );
                Some(
                    Zipf::new(accounts as f64, t)
                        .map_err(|e| anyhow::anyhow!("--zipf-theta {t}: {e}"))?,
                )
            }
        };
        Ok(Keys { accounts, zipf })
    }

    /// The next account id.
    pub fn next(&self, rng: &mut SmallRng) -> i64 {
        match &self.zipf {
            None => rng.random_range(1..=self.accounts),
            Some(z) => {
                let rank = z.sample(rng) as u64;
                1 + (fnv1a(rank) % self.accounts as u64) as i64
            }
        }
    }
}

/// FNV-1a over the eight bytes of `v` (YCSB's `fnvhash64` scrambles ranks with it).
fn fnv1a(v: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in v.to_le_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn zipfian_keys_are_skewed_in_range_and_spread() {
        let n = 100_000;
        let mut rng = SmallRng::seed_from_u64(1);
        let count = |k: &Keys, rng: &mut SmallRng| {
            let mut seen = std::collections::HashMap::<i64, u32>::new();
            for _ in 0..100_000 {
                let a = k.next(rng);
                assert!((1..=n).contains(&a), "{a}");
                *seen.entry(a).or_default() += 1;
            }
            let mut c: Vec<u32> = seen.into_values().collect();
            c.sort_unstable_by(|a, b| b.cmp(a));
            c
        };
        let zipf = count(&Keys::new(n, Some(YCSB_THETA)).unwrap(), &mut rng);
        let uniform = count(&Keys::new(n, None).unwrap(), &mut rng);
        // The hottest account: about 1/H(n, 0.99) ~ 8% of requests under YCSB's constant;
        // a handful under uniform keys.
        assert!(zipf[0] > 5_000, "{:?}", &zipf[..5]);
        assert!(uniform[0] < 20, "{:?}", &uniform[..5]);
        // Scrambled: the hottest accounts are not the first ids.
        let k = Keys::new(n, Some(YCSB_THETA)).unwrap();
        let low = (0..10_000).filter(|_| k.next(&mut rng) <= 100).count();
        assert!(low < 2_000, "{low} of 10,000 draws in accounts 1..=100");
        assert!(Keys::new(n, Some(0.0)).is_err());
    }
}
