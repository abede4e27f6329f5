//! The vocabulary every layer's options share: PostgreSQL-style sizes (`kB`, `MB`, `GB`,
//! `TB` are powers of 1024) and durations, booleans, and [`ConfigError`], the error for a
//! bad option value.
//!
//! Owns: parsing and formatting only. It sits at the bottom of the layers so that each
//! layer can validate its own options struct (`PoolOptions`, `SmgrOptions`, `WalOptions`)
//! with the same error the knob table in [`crate::config`] gives. Locks: none.

use std::fmt;

/// A bad configuration value: which knob, what was given, what is allowed. A name that is
/// no knob has `knob` [`UNKNOWN_KNOB`], the name in `value` and a suggestion in
/// `allowed`, and reads as PostgreSQL's `unrecognized configuration parameter`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct ConfigError {
    /// The knob's name ([`UNKNOWN_KNOB`] for a name that is no knob).
    pub knob: &'static str,
    /// The value given (for a name that is no knob, the name).
    pub value: String,
    /// What the knob allows (for a name that is no knob, a suggestion).
    pub allowed: String,
}

/// [`ConfigError::knob`] of a name that is no knob.
pub const UNKNOWN_KNOB: &str = "(name)";

impl ConfigError {
    fn message(&self) -> String {
        if self.knob == UNKNOWN_KNOB {
            format!(
                "unrecognized configuration parameter \"{}\" ({})",
                self.value, self.allowed
            )
        } else {
            format!(
                "invalid value for {}: \"{}\" (allowed: {})",
                self.knob, self.value, self.allowed
            )
        }
    }

    pub(crate) fn new(
        knob: &'static str,
        value: impl fmt::Display,
        allowed: impl Into<String>,
    ) -> Self {
        Self {
            knob,
            value: value.to_string(),
            allowed: allowed.into(),
        }
    }
}

/// Parses a duration in milliseconds: `200ms`, `2s`, `1min`, or a bare number of ms.
pub fn parse_ms(v: &str) -> Option<u64> {
    let v = v.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().ok()?;
    match unit.trim() {
        "" | "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "min" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        _ => None,
    }
}

/// Parses a boolean the way PostgreSQL does (on/off, true/false, yes/no, 1/0).
pub fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Some(true),
        "off" | "false" | "no" | "0" => Some(false),
        _ => None,
    }
}

/// Parses a size with PostgreSQL's units: `B`, `kB`, `MB`, `GB`, `TB`, each a power of 1024
/// (units are accepted in any case). A bare number means bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if num.is_empty() {
        return Err(format!("\"{s}\" does not start with a number"));
    }
    let n: u64 = num.parse().map_err(|_| format!("\"{num}\" is too large"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "kb" => 10,
        "mb" => 20,
        "gb" => 30,
        "tb" => 40,
        other => return Err(format!("unknown unit \"{other}\": use B, kB, MB, GB or TB")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("\"{s}\" is too large"))
}

/// Formats a byte count with the largest PostgreSQL unit that divides it exactly.
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "TB"), (30, "GB"), (20, "MB"), (10, "kB")] {
        if bytes != 0 && bytes % (1u64 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_powers_of_1024() {
        assert_eq!(parse_size("128MB"), Ok(128 << 20));
        assert_eq!(parse_size("8kB"), Ok(8192));
        assert_eq!(parse_size("1 GB"), Ok(1 << 30));
        assert_eq!(parse_size("2tb"), Ok(2 << 40));
        assert_eq!(parse_size("512"), Ok(512));
        assert!(parse_size("MB").is_err());
        assert!(parse_size("12XB").unwrap_err().contains("unknown unit"));
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("17179869184TB").is_err());
        assert_eq!(format_size(128 << 20), "128MB");
        assert_eq!(format_size(1536), "1536B");
        assert_eq!(format_size(3 << 10), "3kB");
    }
}
