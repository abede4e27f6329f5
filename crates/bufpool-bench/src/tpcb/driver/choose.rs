//! Which script a client's next transaction runs, as pgbench's chooseScript picks it: a
//! uniform draw in [0, total weight) walked over the weights, from a random stream of the
//! client's own, seeded from `--random-seed` and the client. A leaf.
//!
//! Invariants: with one script there is no draw, so a run of one script is what it was
//! before several could be given; a script of weight 0 is never picked.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A client's stream for its script draws (pgbench's per-thread `ts_choose_rs`): apart
/// from the transactions' own, and repeatable from `--random-seed` and the client's id.
pub(super) fn chooser(seed: u64, client: u32) -> SmallRng {
    SmallRng::seed_from_u64(seed.rotate_left(32) ^ 0x243f_6a88_85a3_08d3 ^ u64::from(client))
}

/// pgbench's chooseScript: the index of the script to run next, drawn with probability
/// weight / `total` (`total` the sum of `weights`, above 0). One script: 0, no draw.
pub(super) fn choose(weights: &[u32], total: u64, rng: &mut SmallRng) -> usize {
    if weights.len() <= 1 {
        return 0;
    }
    let mut w = rng.random_range(0..total) as i64;
    for (i, &weight) in weights.iter().enumerate() {
        w -= i64::from(weight);
        if w < 0 {
            return i;
        }
    }
    weights.len() - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: the draw follows the weights (9:1 within a point over 100,000 draws), a
    /// weight of 0 is never picked wherever it stands, one script takes no draw (the
    /// stream is untouched), and the same seed and client draw the same sequence.
    #[test]
    fn scripts_are_drawn_by_weight_and_repeat_with_the_seed() {
        let mut rng = chooser(7, 1);
        let mut counts = [0u64; 3];
        for _ in 0..100_000 {
            counts[choose(&[9, 0, 1], 10, &mut rng)] += 1;
        }
        assert_eq!(counts[1], 0, "{counts:?}");
        assert!((89_000..=91_000).contains(&counts[0]), "{counts:?}");
        let mut r = chooser(7, 1);
        assert!((0..1_000).all(|_| choose(&[0, 3], 3, &mut r) == 1));
        assert!((0..1_000).all(|_| choose(&[3, 0], 3, &mut r) == 0));
        let (mut a, mut b) = (chooser(7, 1), chooser(7, 1));
        assert_eq!(choose(&[5], 5, &mut a), 0);
        let draw = |r: &mut SmallRng| (0..64).map(|_| choose(&[1, 1], 2, r)).collect::<Vec<_>>();
        assert_eq!(draw(&mut a), draw(&mut b), "one script took no draw");
        assert_ne!(draw(&mut chooser(7, 2)), draw(&mut chooser(7, 1)));
    }
}
