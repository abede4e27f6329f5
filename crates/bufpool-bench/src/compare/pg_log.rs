//! PostgreSQL's checkpoints, read back from its server log: `postgres-peer.sh` runs the
//! server with `log_checkpoints = on`, `log_line_prefix = '%m [%p] '` and
//! `log_timezone = 'UTC'`, so each checkpoint leaves two lines,
//!
//! ```text
//! 2026-11-29 09:24:11.326 UTC [19440] LOG:  checkpoint starting: time
//! 2026-11-29 09:24:38.348 UTC [19440] LOG:  checkpoint complete: wrote 2155 buffers (26.3%), ...;
//!     write=26.9 s, sync=0.003 s, total=27.02 s; sync files=56, longest=0.001 s, ...
//! ```
//!
//! (PostgreSQL 18 adds "wrote N SLRU buffers" after the buffers; earlier versions do not).
//! The pairs become the report's [`CheckpointSpan`]s, the same record bufpool's own
//! checkpoints fill.

use crate::report::model::CheckpointSpan;

/// A log line's time, µs since the epoch: the `%m` prefix "2026-11-29 09:24:11.326 UTC".
fn line_time_us(line: &str) -> Option<u64> {
    let mut it = line.splitn(4, ' ');
    let (date, time, zone) = (it.next()?, it.next()?, it.next()?);
    if zone != "UTC" {
        return None;
    }
    let t = humantime::parse_rfc3339_weak(&format!("{date} {time}")).ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(d.as_micros() as u64)
}

/// The number right before `unit` after `key` in `text` ("write=26.9 s" with key
/// "write=").
fn field(text: &str, key: &str) -> Option<f64> {
    let at = text.find(key)? + key.len();
    let rest = &text[at..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// PostgreSQL's words for why a checkpoint ran ("time", "wal", "immediate force wait",
/// "shutdown immediate", "end-of-recovery immediate wait") as bufpool's reasons.
fn reason(flags: &str) -> &'static str {
    let has = |w: &str| flags.split_whitespace().any(|f| f == w);
    if has("shutdown") {
        "shutdown"
    } else if has("end-of-recovery") {
        "end-of-recovery"
    } else if has("wal") {
        "wal"
    } else if has("force") || has("immediate") {
        "force"
    } else {
        "time"
    }
}

/// Checkpoints in `log`, as spans in seconds from `start_us` (µs since the epoch).
/// Returns those that started within `[0, elapsed_s)` of the run, and the number of
/// checkpoints completed from the run's start on (the run's and any after it, such as
/// the CHECKPOINT that closes the measurement) other than the shutdown checkpoint, which
/// comes after the counters were read. A starting line without its complete line (a
/// checkpoint still running) is left out.
pub fn checkpoints(log: &str, start_us: u64, elapsed_s: f64) -> (Vec<CheckpointSpan>, u64) {
    let since = |us: u64| (us as f64 - start_us as f64) / 1e6;
    let mut open: Option<(f64, &'static str)> = None;
    let mut spans = Vec::new();
    let mut done = 0;
    for line in log.lines() {
        let Some(msg) = line.split_once("LOG:  ").map(|(_, m)| m) else {
            continue;
        };
        if let Some(flags) = msg.strip_prefix("checkpoint starting: ") {
            if let Some(us) = line_time_us(line) {
                open = Some((since(us), reason(flags)));
            }
        } else if let Some(stats) = msg.strip_prefix("checkpoint complete: ") {
            let (Some((start_s, why)), Some(us)) = (open.take(), line_time_us(line)) else {
                continue;
            };
            if start_s < 0.0 || why == "shutdown" {
                continue;
            }
            done += 1;
            if start_s >= elapsed_s {
                continue;
            }
            spans.push(CheckpointSpan {
                start_s,
                end_s: since(us),
                buffers_written: field(stats, "wrote ").unwrap_or(0.0) as u64,
                reason: why.to_string(),
                write_s: field(stats, "write=").unwrap_or(0.0),
                sync_s: field(stats, "sync=").unwrap_or(0.0),
                longest_sync_s: field(stats, "longest=").unwrap_or(0.0),
                sync_files: field(stats, "sync files=").unwrap_or(0.0) as u64,
                write_calls: 0,
            });
        }
    }
    (spans, done)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-29 09:24:00 UTC.
    const START_US: u64 = 1_795_944_240_000_000;

    #[test]
    fn pairs_become_spans_in_run_seconds_in_both_formats() {
        let log = "\
2026-11-29 09:23:59.000 UTC [7] LOG:  checkpoint starting: time
2026-11-29 09:23:59.500 UTC [7] LOG:  checkpoint complete: wrote 1 buffers (0.0%); 0 WAL file(s) added, 0 removed, 0 recycled; write=0.400 s, sync=0.001 s, total=0.500 s; sync files=1, longest=0.001 s, average=0.001 s; distance=1 kB, estimate=1 kB
2026-11-29 09:24:10.250 UTC [7] LOG:  checkpoint starting: time
2026-11-29 09:24:10.300 UTC [9] LOG:  statement: SELECT 1
2026-11-29 09:24:37.250 UTC [7] LOG:  checkpoint complete: wrote 2155 buffers (26.3%); 0 WAL file(s) added, 0 removed, 1 recycled; write=26.900 s, sync=0.012 s, total=27.000 s; sync files=56, longest=0.004 s, average=0.001 s; distance=23031 kB, estimate=23031 kB
2026-11-29 09:24:40.000 UTC [7] LOG:  checkpoint starting: wal
2026-11-29 09:24:50.000 UTC [7] LOG:  checkpoint complete: wrote 700 buffers (8.5%), wrote 14 SLRU buffers; 0 WAL file(s) added, 0 removed, 1 recycled; write=9.5 s, sync=0.3 s, total=10.0 s; sync files=12, longest=0.2 s, average=0.01 s; distance=1 kB, estimate=1 kB; lsn=0/2D6D1C8, redo lsn=0/2D6D170
2026-11-29 09:25:00.100 UTC [7] LOG:  checkpoint starting: immediate force wait
2026-11-29 09:25:00.200 UTC [7] LOG:  checkpoint complete: wrote 5 buffers (0.1%), wrote 0 SLRU buffers; write=0.01 s, sync=0.01 s, total=0.1 s; sync files=2, longest=0.0 s, average=0.0 s
2026-11-29 09:25:01.000 UTC [7] LOG:  checkpoint starting: shutdown immediate
2026-11-29 09:25:01.010 UTC [7] LOG:  checkpoint complete: wrote 0 buffers (0.0%); write=0.001 s, sync=0.001 s, total=0.002 s; sync files=0, longest=0.000 s, average=0.000 s
2026-11-29 09:25:02.000 UTC [7] LOG:  checkpoint starting: time
";
        let (spans, done) = checkpoints(log, START_US, 60.0);
        // The one before the run is not counted; the forced one after it is counted but
        // not drawn; the shutdown one comes after the counters were read; the last one
        // never completed.
        assert_eq!(done, 3);
        assert_eq!(spans.len(), 2, "{spans:?}");
        let a = &spans[0];
        assert!((a.start_s - 10.25).abs() < 1e-6 && (a.end_s - 37.25).abs() < 1e-6);
        assert_eq!((a.buffers_written, a.sync_files), (2155, 56));
        assert_eq!(a.reason, "time");
        assert!((a.write_s - 26.9).abs() < 1e-9 && (a.longest_sync_s - 0.004).abs() < 1e-9);
        let b = &spans[1];
        assert_eq!((b.buffers_written, b.reason.as_str()), (700, "wal"));
        assert!((b.sync_s - 0.3).abs() < 1e-9);
    }

    #[test]
    fn reasons_and_foreign_lines() {
        assert_eq!(reason("immediate force wait"), "force");
        assert_eq!(reason("shutdown immediate"), "shutdown");
        assert_eq!(reason("end-of-recovery immediate wait"), "end-of-recovery");
        assert_eq!(reason("wal"), "wal");
        assert_eq!(reason("time"), "time");
        // A log without the UTC prefix (another log_line_prefix) yields nothing rather
        // than wrong times.
        let (spans, done) = checkpoints(
            "LOG:  checkpoint starting: time\nLOG:  checkpoint complete: wrote 1 buffers\n",
            START_US,
            60.0,
        );
        assert!(spans.is_empty() && done == 0);
    }
}
