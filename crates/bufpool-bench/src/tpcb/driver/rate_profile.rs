//! Seed 000's bursty target rate (Josh Berkus: real workloads are not a steady pgbench):
//! a rate that follows a sine wave with random spikes (`bench --rate-profile`), instead of
//! `-R`'s constant. A leaf.
//!
//! The profile is `period=60s,low=500,high=3000,spike=0.05,spike-factor=3`: the rate
//! (transactions per second over all clients) swings from `low` to `high` and back once
//! per `period`; each second is, with probability `spike`, a spike at `spike-factor` times
//! the wave's rate. Which seconds spike depends only on the seed and the second, so every
//! client agrees. Transactions arrive as a Poisson process at that rate, as with `-R`
//! (`pace.rs`).

use anyhow::{bail, Result};

/// A sine-wave target rate with random spikes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateProfile {
    pub period_s: f64,
    pub low: f64,
    pub high: f64,
    /// Probability that a given second is a spike.
    pub spike: f64,
    pub spike_factor: f64,
    pub seed: u64,
}

impl RateProfile {
    /// Parses `period=60s,low=500,high=3000,spike=0.05[,spike-factor=3]` (keys in any
    /// order; period in s, or with an `s` or `ms` unit).
    pub fn parse(text: &str, seed: u64) -> Result<RateProfile> {
        let mut p = RateProfile {
            period_s: f64::NAN,
            low: f64::NAN,
            high: f64::NAN,
            spike: 0.0,
            spike_factor: 3.0,
            seed,
        };
        for part in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((k, v)) = part.split_once('=') else {
                bail!("--rate-profile: {part:?} is not key=value (keys: period, low, high, spike, spike-factor)");
            };
            let num = |v: &str| -> Result<f64> {
                v.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| anyhow::anyhow!("--rate-profile: {k}={v} is not a number >= 0"))
            };
            match k.trim() {
                "period" => {
                    p.period_s = if let Some(ms) = v.strip_suffix("ms") {
                        num(ms)? / 1000.0
                    } else {
                        num(v.strip_suffix('s').unwrap_or(v))?
                    }
                }
                "low" => p.low = num(v)?,
                "high" => p.high = num(v)?,
                "spike" => p.spike = num(v)?,
                "spike-factor" | "spike_factor" => p.spike_factor = num(v)?,
                other => bail!(
                    "--rate-profile: unknown key {other:?} (keys: period, low, high, spike, spike-factor)"
                ),
            }
        }
        if p.period_s.is_nan() || p.low.is_nan() || p.high.is_nan() {
            bail!("--rate-profile needs period, low and high, e.g. period=60s,low=500,high=3000,spike=0.05");
        }
        if p.period_s < 1.0
            || p.high < p.low
            || p.high <= 0.0
            || p.spike > 1.0
            || p.spike_factor < 1.0
        {
            bail!(
                "--rate-profile: need period >= 1 s, 0 <= low <= high, high > 0, spike in [0, 1], spike-factor >= 1 (got {text:?})"
            );
        }
        Ok(p)
    }

    /// The wave's rate at `t` seconds, without spikes.
    pub fn wave(&self, t: f64) -> f64 {
        let phase = (t / self.period_s) * std::f64::consts::TAU;
        // Starts at `low`, peaks at `high` half a period later.
        self.low + (self.high - self.low) * (1.0 - phase.cos()) / 2.0
    }

    /// Whether second `sec` is a spike.
    pub fn spikes(&self, sec: u64) -> bool {
        let mut z = self.seed ^ sec.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 11) as f64 / (1u64 << 53) as f64) < self.spike
    }

    /// The target rate at `t` seconds (over all clients).
    pub fn rate_at(&self, t: f64) -> f64 {
        let r = self.wave(t);
        if self.spikes(t.max(0.0) as u64) {
            r * self.spike_factor
        } else {
            r
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_follows_the_wave() {
        let p = RateProfile::parse("period=60s,low=100,high=300,spike=0", 1).unwrap();
        assert_eq!(p.rate_at(0.0), 100.0);
        assert!((p.rate_at(30.0) - 300.0).abs() < 1e-9);
        assert!((p.rate_at(15.0) - 200.0).abs() < 1e-9);
        assert!((p.rate_at(60.0) - 100.0).abs() < 1e-9);
        let q = RateProfile::parse("high=10, low=10, period=500ms", 1);
        assert!(q.is_err(), "a period under a second is refused");
    }

    #[test]
    fn spikes_come_at_their_probability_and_agree_for_a_seed() {
        let p =
            RateProfile::parse("period=10,low=100,high=100,spike=0.1,spike-factor=4", 7).unwrap();
        let n = (0..10_000).filter(|&s| p.spikes(s)).count();
        assert!((800..1200).contains(&n), "{n} spikes in 10,000 seconds");
        let s = (0..10_000).find(|&s| p.spikes(s)).unwrap();
        assert_eq!(p.rate_at(s as f64 + 0.5), 400.0);
        let again =
            RateProfile::parse("period=10,low=100,high=100,spike=0.1,spike-factor=4", 7).unwrap();
        assert!((0..1000).all(|s| p.spikes(s) == again.spikes(s)));
    }

    #[test]
    fn bad_profiles_say_what_is_wrong() {
        for (text, needle) in [
            ("period=60", "needs period, low and high"),
            ("period=60,low=5,high=1", "low <= high"),
            ("period=60,low=1,high=5,spike=2", "spike in [0, 1]"),
            ("period=60,low=1,high=5,burst=1", "unknown key"),
            ("period=60,low=x,high=5", "not a number"),
            ("period", "not key=value"),
        ] {
            let e = RateProfile::parse(text, 0).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
