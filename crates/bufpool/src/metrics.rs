//! The engine's counters as metrics an embedder can scrape or forward: one list of samples
//! ([`samples`]), rendered as OpenMetrics text ([`render_openmetrics`], what `bufpool bench
//! --metrics-addr` serves) or, with the cargo feature `metrics`, published through the
//! `metrics` facade (`publish`) to whatever recorder the embedder installed.
//!
//! Owns: the metric names, kinds, help texts and labels. Counters are the engine's own
//! totals since open (pg_stat_io's rows with their `backend_type`, `object` and `context`
//! labels; pg_stat_bgwriter's, pg_stat_checkpointer's and pg_stat_wal's columns); gauges
//! are the pool now (pg_buffercache_summary). Nothing here is on a hot path: a call reads
//! the engine's snapshots (the pool's counter stripes, a pass over the buffer states) and
//! builds the list; the facade is fed absolute values, so the pool's counters stay the one
//! source and are never incremented twice.

use crate::engine::Engine;

/// A metric's kind (OpenMetrics' `counter` or `gauge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A total since the engine opened, rendered with `_total`.
    Counter,
    /// A value now, which may go up or down.
    Gauge,
}

/// One metric value with its labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The family name (a counter's without `_total`).
    pub name: &'static str,
    /// The help text (`# HELP`).
    pub help: &'static str,
    /// Counter or gauge (`# TYPE`).
    pub kind: Kind,
    /// Label names and values (e.g. `backend_type`, `object`, `context`).
    pub labels: Vec<(&'static str, String)>,
    /// The value.
    pub value: f64,
}

fn sample(name: &'static str, help: &'static str, kind: Kind, value: f64) -> Sample {
    Sample {
        name,
        help,
        kind,
        labels: Vec::new(),
        value,
    }
}

/// Every metric of `engine` now.
pub fn samples(engine: &Engine) -> Vec<Sample> {
    let mut out = Vec::with_capacity(256);
    io_samples(engine, &mut out);
    let g = Kind::Gauge;
    let s = engine.pool().buffercache_summary();
    for (state, v) in [
        ("used", s.buffers_used),
        ("unused", s.buffers_unused),
        ("dirty", s.buffers_dirty),
        ("pinned", s.buffers_pinned),
    ] {
        let mut x = sample(
            "bufpool_buffers",
            "Buffers of the pool by state (pg_buffercache_summary).",
            g,
            v as f64,
        );
        x.labels.push(("state", state.to_string()));
        out.push(x);
    }
    out.push(sample(
        "bufpool_buffers_usagecount_avg",
        "Mean usage count of the used buffers.",
        g,
        s.usagecount_avg,
    ));
    writer_samples(engine, &mut out);
    out
}

/// pg_stat_bgwriter's, pg_stat_checkpointer's and pg_stat_wal's counters.
fn writer_samples(engine: &Engine, out: &mut Vec<Sample>) {
    let c = Kind::Counter;
    let b = engine.bgwriter_stats();
    out.push(sample(
        "bufpool_bgwriter_buffers_clean",
        "Pages the background writer wrote (pg_stat_bgwriter).",
        c,
        b.buffers_clean as f64,
    ));
    out.push(sample(
        "bufpool_bgwriter_maxwritten_clean",
        "Background-writer rounds stopped at bgwriter_lru_maxpages.",
        c,
        b.maxwritten_clean as f64,
    ));
    out.push(sample(
        "bufpool_bgwriter_rounds_paced",
        "Background-writer rounds stopped at their device pace (bgwriter_device_share).",
        c,
        b.rounds_paced as f64,
    ));
    out.push(sample(
        "bufpool_bgwriter_buffers_alloc",
        "Buffers handed out by replacement.",
        c,
        b.buffers_alloc as f64,
    ));
    let k = engine.checkpointer_stats();
    for (name, help, v) in [
        (
            "bufpool_checkpointer_num_timed",
            "Checkpoints due to checkpoint_timeout (pg_stat_checkpointer).",
            k.num_timed,
        ),
        (
            "bufpool_checkpointer_num_requested",
            "Checkpoints requested.",
            k.num_requested,
        ),
        (
            "bufpool_checkpointer_num_done",
            "Checkpoints completed.",
            k.num_done,
        ),
        (
            "bufpool_checkpointer_buffers_written",
            "Buffers the checkpoints wrote.",
            k.buffers_written,
        ),
        (
            "bufpool_checkpointer_slru_written",
            "SLRU pages the checkpoints wrote.",
            k.slru_written,
        ),
    ] {
        out.push(sample(name, help, c, v as f64));
    }
    out.push(sample(
        "bufpool_checkpointer_write_time_seconds",
        "Time checkpoints spent writing.",
        c,
        k.write_time_ms as f64 / 1e3,
    ));
    out.push(sample(
        "bufpool_checkpointer_sync_time_seconds",
        "Time checkpoints spent in fsync.",
        c,
        k.sync_time_ms as f64 / 1e3,
    ));
    let w = engine.wal().stats();
    for (name, help, v) in [
        (
            "bufpool_wal_records",
            "WAL records inserted (pg_stat_wal).",
            w.records,
        ),
        ("bufpool_wal_bytes", "WAL bytes inserted.", w.bytes),
        ("bufpool_wal_fpi", "Full-page images logged.", w.images),
        (
            "bufpool_wal_buffers_full",
            "Inserts that found wal_buffers full.",
            w.buffers_full,
        ),
        (
            "bufpool_wal_syncs",
            "Flushes that wrote and synced the log.",
            w.syncs,
        ),
    ] {
        out.push(sample(name, help, c, v as f64));
    }
}

/// pg_stat_io's rows as counters labelled by backend type, object and context.
fn io_samples(engine: &Engine, out: &mut Vec<Sample>) {
    type Col = (
        &'static str,
        &'static str,
        fn(&crate::stats::StatIoRow) -> f64,
    );
    const COLS: [Col; 14] = [
        (
            "bufpool_io_reads",
            "Blocks (relation) or reads (wal) read (pg_stat_io).",
            |r| r.reads as f64,
        ),
        ("bufpool_io_read_bytes", "Bytes read.", |r| {
            r.read_bytes as f64
        }),
        ("bufpool_io_read_time_seconds", "Time spent reading.", |r| {
            r.read_time_ms / 1e3
        }),
        (
            "bufpool_io_writes",
            "Blocks (relation) or writes (wal) written.",
            |r| r.writes as f64,
        ),
        ("bufpool_io_write_bytes", "Bytes written.", |r| {
            r.write_bytes as f64
        }),
        (
            "bufpool_io_write_time_seconds",
            "Time spent writing.",
            |r| r.write_time_ms / 1e3,
        ),
        (
            "bufpool_io_writebacks",
            "Blocks handed to the kernel's writeback.",
            |r| r.writebacks as f64,
        ),
        ("bufpool_io_extends", "Blocks added to relations.", |r| {
            r.extends as f64
        }),
        (
            "bufpool_io_extend_bytes",
            "Bytes added to relations.",
            |r| r.extend_bytes as f64,
        ),
        ("bufpool_io_hits", "Buffer hits.", |r| r.hits as f64),
        (
            "bufpool_io_evictions",
            "Buffers evicted to load another page.",
            |r| r.evictions as f64,
        ),
        ("bufpool_io_reuses", "Ring buffers reused.", |r| {
            r.reuses as f64
        }),
        ("bufpool_io_fsyncs", "fsync calls.", |r| r.fsyncs as f64),
        (
            "bufpool_io_fsync_time_seconds",
            "Time spent in fsync.",
            |r| r.fsync_time_ms / 1e3,
        ),
    ];
    let rows = engine.stat_io();
    for (name, help, get) in COLS {
        for r in &rows {
            out.push(Sample {
                name,
                help,
                kind: Kind::Counter,
                labels: vec![
                    ("backend_type", r.backend_type.to_string()),
                    ("object", r.object.to_string()),
                    ("context", r.context.to_string()),
                ],
                value: get(r),
            });
        }
    }
}

/// `samples` as OpenMetrics text (one `# TYPE` and `# HELP` per family, counters with
/// `_total`, label values escaped, `# EOF` last).
pub fn render_openmetrics(samples: &[Sample]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(samples.len() * 96);
    let mut last: Option<&str> = None;
    for s in samples {
        if last != Some(s.name) {
            let kind = match s.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
            };
            let _ = writeln!(out, "# TYPE {} {kind}", s.name);
            let _ = writeln!(out, "# HELP {} {}", s.name, s.help);
            last = Some(s.name);
        }
        out.push_str(s.name);
        if s.kind == Kind::Counter {
            out.push_str("_total");
        }
        if !s.labels.is_empty() {
            out.push('{');
            for (i, (k, v)) in s.labels.iter().enumerate() {
                let v = v
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                let _ = write!(out, "{}{k}=\"{v}\"", if i > 0 { "," } else { "" });
            }
            out.push('}');
        }
        let _ = writeln!(out, " {}", s.value);
    }
    out.push_str("# EOF\n");
    out
}

/// Publishes [`samples`] through the `metrics` facade to the installed recorder: counters
/// as absolute values, gauges set, each family described once per call. The facade's
/// counters are integers, so the time totals (`*_seconds`) go out as gauges holding the
/// running total. Call it as often as the embedder's exporter reads.
#[cfg(feature = "metrics")]
pub fn publish(engine: &Engine) {
    let mut last = "";
    for s in samples(engine) {
        let seconds = s.name.ends_with("_seconds");
        if s.name != last {
            if s.kind == Kind::Counter && !seconds {
                ::metrics::describe_counter!(s.name, s.help);
            } else {
                ::metrics::describe_gauge!(s.name, s.help);
            }
            last = s.name;
        }
        let labels: Vec<::metrics::Label> = s
            .labels
            .iter()
            .map(|(k, v)| ::metrics::Label::new(*k, v.clone()))
            .collect();
        if s.kind == Kind::Counter && !seconds {
            ::metrics::counter!(s.name, labels).absolute(s.value as u64);
        } else {
            ::metrics::gauge!(s.name, labels).set(s.value);
        }
    }
}
