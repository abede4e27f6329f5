//! `bench --resize-at T:SIZE`: the pool resized while the clients run
//! (`Engine::resize_pool`), each resize at its second, what each did kept for the run's
//! JSON, summary and report (its second in the per-second series shows the dip).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bufpool::options::{format_size, parse_ms, parse_size};
use bufpool::Engine;

use crate::report::model::PoolResizeRecord;

/// One `--resize-at`: at `at` after the clients start, resize the pool to `bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResizeAt {
    pub at: Duration,
    pub bytes: u64,
}

impl ResizeAt {
    /// `T:SIZE`: T in seconds (a bare number) or with a unit (500ms, 10s, 1min), SIZE with
    /// a unit (256MB) as `shared_buffers` takes it.
    pub fn parse(text: &str) -> Result<ResizeAt, String> {
        let bad = |why: &str| {
            format!("--resize-at {text}: {why} (expected TIME:SIZE, such as 10s:256MB)")
        };
        let (t, size) = text.split_once(':').ok_or_else(|| bad("no ':'"))?;
        let t = t.trim();
        let ms = if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            t.parse::<u64>().ok().and_then(|s| s.checked_mul(1000))
        } else {
            parse_ms(t)
        }
        .ok_or_else(|| bad("the time is not a number of seconds or a duration"))?;
        let bytes = parse_size(size.trim()).map_err(|e| bad(&e))?;
        if bytes == 0 {
            return Err(bad("the size is 0"));
        }
        Ok(ResizeAt {
            at: Duration::from_millis(ms),
            bytes,
        })
    }
}

/// Runs `plan` (in time order) on `engine` from `start` until `done`: each resize at its
/// time, logged as it ends; a resize that fails is logged and recorded, and the run goes
/// on at the size the pool reached.
pub fn run(
    engine: &Engine,
    plan: &[ResizeAt],
    start: Instant,
    done: &AtomicBool,
) -> Vec<PoolResizeRecord> {
    let page = engine.pool().page_size() as u64;
    let mut out = Vec::new();
    for step in plan {
        loop {
            if done.load(Ordering::Relaxed) {
                return out;
            }
            let left = (start + step.at).saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(10)));
        }
        let from = engine.pool().nbuffers() as u64 * page;
        let began = start.elapsed().as_secs_f64();
        let r = engine.resize_pool(step.bytes);
        let to = engine.pool().nbuffers() as u64 * page;
        let record = match r {
            Ok(r) => PoolResizeRecord {
                at_s: began,
                from_bytes: from,
                to_bytes: to,
                took_ms: r.took.as_secs_f64() * 1e3,
                pages_written: r.written as u64,
                pages_evicted: r.evicted as u64,
                error: None,
            },
            Err(e) => PoolResizeRecord {
                at_s: began,
                from_bytes: from,
                to_bytes: to,
                took_ms: (start.elapsed().as_secs_f64() - began) * 1e3,
                pages_written: 0,
                pages_evicted: 0,
                error: Some(e.to_string()),
            },
        };
        match &record.error {
            None => eprintln!(
                "LOG:  shared_buffers resized from {} to {} at {:.1} s in {:.1} ms ({} pages \
                 written, {} evicted)",
                format_size(from),
                format_size(to),
                record.at_s,
                record.took_ms,
                record.pages_written,
                record.pages_evicted
            ),
            Some(e) => eprintln!(
                "WARNING:  resizing shared_buffers to {} at {:.1} s failed, now {}: {e}",
                format_size(step.bytes),
                record.at_s,
                format_size(to)
            ),
        }
        out.push(record);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_time_and_size_and_names_what_is_wrong() {
        let r = ResizeAt::parse("10s:256MB").unwrap();
        assert_eq!((r.at, r.bytes), (Duration::from_secs(10), 256 << 20));
        let r = ResizeAt::parse("12:1GB").unwrap();
        assert_eq!((r.at, r.bytes), (Duration::from_secs(12), 1 << 30));
        assert_eq!(
            ResizeAt::parse("500ms:64MB").unwrap().at,
            Duration::from_millis(500)
        );
        for bad in ["10s", "x:64MB", "10s:lots", "10s:0", ":64MB"] {
            let e = ResizeAt::parse(bad).unwrap_err();
            assert!(e.contains("--resize-at") && e.contains("TIME:SIZE"), "{e}");
        }
    }
}
