//! `bench --json`: the run's summary as one JSON object (tps, latency_ms, per_interval,
//! buffers, checkpoints, config and the rest), with a `scripts` array when several scripts
//! ran. Its field names are a contract (scripts and tests read them).

use crate::report::model::WriteBytes;
use crate::tpcb;
use crate::tpcb::options::RunOutcome;

/// The `--json` summary: the fields (tps, latency_ms, per_interval, buffers,
/// checkpoints, config) and a few more.
pub fn summary_json(o: &RunOutcome, per_command: bool) -> serde_json::Value {
    let r = &o.result;
    let mut j = serde_json::json!({
        "label": r.label,
        "provenance": r.provenance,
        "mode": r.mode,
        "scale": r.scale,
        "clients": r.clients,
        "threads": r.threads,
        "duration_s": r.duration_s,
        "transactions": r.transactions,
        "failed": r.failed,
        "skipped": o.skipped,
        "late": o.late,
        "tps": r.tps,
        "latency_ms": r.latency_ms,
        "per_interval": r.per_interval,
        "buffers": r.buffers,
        "checkpoints": r.checkpoints,
        "backend_write_share": r.backend_write_share(),
        "bgwriter": r.bgwriter,
        "checkpointer": r.checkpointer,
        "wal": r.wal,
        "slru": r.slru,
        "bytes_written": r.bytes_written,
        "bytes_written_per_tx": r.bytes_written.as_ref().map(WriteBytes::per_tx_json),
        "side_script": r.side_script,
        "resizes": r.resizes,
        "autoprewarm": o.prewarm.as_ref().map(|p| serde_json::json!({
            "listed": p.listed,
            "loaded": p.loaded,
            "skipped": p.skipped,
            "invalid": p.invalid,
            "stopped_pool_full": p.stopped_pool_full,
            "load_seconds": p.load_seconds,
            "error": p.last_error,
        })),
        "trace": o.trace.map(|t| serde_json::json!({
            "records": t.records,
            "bytes": t.bytes,
            "dropped": t.dropped,
        })),
        "waits": r.waits.as_ref().map(|w| serde_json::json!({
            "all": w.all,
            "over_5ms": w.over_5ms,
            "over_10ms": w.over_10ms,
            "each_seconds_slowest": w.each_seconds_slowest,
        })),
        "memory": r.memory,
        "config": r.config,
    });
    if let Some(y) = &o.ycsb {
        j["ycsb"] = ycsb_json(y, r.duration_s);
    }
    if let Some(t) = &o.tpcc {
        j["tpcc"] = tpcc_json(t, r.duration_s);
    }
    if o.scripts.len() > 1 {
        j["scripts"] = o
            .scripts
            .iter()
            .map(|s| script_json(s, per_command))
            .collect();
    }
    j
}

/// One script of several in `--json`: pgbench's per-script figures, and with `-r`
/// (`per_command`) its statements when they were timed (not for engine calls).
fn script_json(s: &tpcb::mix::ScriptOutcome, per_command: bool) -> serde_json::Value {
    let mut j = serde_json::json!({
        "name": s.name,
        "description": s.desc,
        "weight": s.weight,
        "transactions": s.transactions,
        "failed": s.failed,
        "skipped": s.skipped,
        "retried": s.retried,
        "tps": s.tps,
        "latency_avg_ms": s.latency_avg_ms,
        "latency_stddev_ms": s.latency_stddev_ms,
    });
    if per_command && s.interpreted {
        j["statements"] = s
            .statements
            .iter()
            .map(|(text, st)| {
                serde_json::json!({
                    "command": text,
                    "count": st.count,
                    "latency_avg_ms": if st.count > 0 { st.sum_us / st.count as f64 / 1000.0 } else { 0.0 },
                    "failures": st.failures,
                })
            })
            .collect();
    }
    j
}

/// A TPC-C run's part of `--json`: its warehouses, its transactions by kind (done: committed,
/// or a New-Order rolled back on its unused item), New-Orders placed per minute (TPC-C's
/// throughput measure, tpmC, without its keying and think times), New-Orders rolled back,
/// orders delivered, and districts a Delivery found with nothing to deliver.
fn tpcc_json(t: &crate::tpcc::outcome::TpccOutcome, seconds: f64) -> serde_json::Value {
    use crate::tpcc::inputs::Kind;
    let done: serde_json::Map<String, serde_json::Value> = Kind::ALL
        .iter()
        .map(|&k| (k.name().to_string(), serde_json::json!(t.counts.of(k))))
        .collect();
    let tpm_c = if seconds > 0.0 {
        t.counts.new_orders_placed() as f64 * 60.0 / seconds
    } else {
        0.0
    };
    serde_json::json!({
        "warehouses": t.warehouses,
        "transactions": done,
        "new_orders_per_minute": tpm_c,
        "new_orders_rolled_back": t.counts.rolled_back,
        "orders_delivered": t.counts.delivered,
        "delivery_districts_empty": t.counts.districts_empty,
        "customers_by_last_name": t.counts.by_last_name,
    })
}

/// A YCSB run's part of `--json`: its records, and its operations by kind (committed
/// ones, and per second), the records its scans read, the reads that found no record.
fn ycsb_json(y: &crate::ycsb::ops::YcsbOutcome, seconds: f64) -> serde_json::Value {
    use crate::ycsb::ops::Op;
    let per_s = |n: u64| {
        if seconds > 0.0 {
            n as f64 / seconds
        } else {
            0.0
        }
    };
    let ops: serde_json::Map<String, serde_json::Value> = Op::ALL
        .iter()
        .map(|&op| (op.name().to_string(), serde_json::json!(y.counts.of(op))))
        .collect();
    let rates: serde_json::Map<String, serde_json::Value> = Op::ALL
        .iter()
        .map(|&op| {
            (
                op.name().to_string(),
                serde_json::json!(per_s(y.counts.of(op))),
            )
        })
        .collect();
    serde_json::json!({
        "records_start": y.records_start,
        "records_end": y.records_end,
        "operations": ops,
        "operations_per_s": rates,
        "scanned_records": y.counts.scanned,
        "not_found": y.counts.not_found,
    })
}
