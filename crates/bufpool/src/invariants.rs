//! One shape for every invariant checker: `check_invariants(&self) -> Result<(),
//! Violations>` (the pool, its rings, the log, an SLRU bank), and `check_consistency`, the
//! pool's check that is safe while other threads use it. A checker collects every
//! violation it finds, each in words naming what broke; callers decide whether to panic
//! (debug builds, tests, the `verify` feature) or report.

use std::fmt;

/// What an invariant checker found broken: one description per violation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Violations(pub Vec<String>);

impl Violations {
    /// Records `what()` as a violation unless `holds`.
    pub fn check(&mut self, holds: bool, what: impl FnOnce() -> String) {
        if !holds {
            self.0.push(what());
        }
    }

    /// Adds every violation of another checker's result.
    pub fn merge(&mut self, other: Result<(), Violations>) {
        if let Err(v) = other {
            self.0.extend(v.0);
        }
    }

    /// Ok if nothing was recorded.
    pub fn into_result(self) -> Result<(), Violations> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} invariant(s) broken: {}",
            self.0.len(),
            self.0.join("; ")
        )
    }
}

impl std::error::Error for Violations {}

/// In debug builds, panics with the violations if `check` found any; compiled out of
/// release builds (the checker is not even run).
#[track_caller]
pub(crate) fn debug_check(check: impl FnOnce() -> Result<(), Violations>) {
    if cfg!(debug_assertions) {
        if let Err(v) = check() {
            panic!("{v}");
        }
    }
}
