//! `bench`'s summary as pgbench prints it (the head, the totals, failures and retries,
//! latencies, tps, per-script blocks with several scripts, `-r`'s statement latencies),
//! and bufpool's lines beside pgbench's: the latency tail, what transactions waited for,
//! autoprewarm, the rate profile, batches, the vacuum side thread, autovacuum, bytes
//! written per transaction, the side script.

use super::args::BenchArgs;
use crate::tpcb::options::RunOutcome;

/// The autovacuum line and the tables' dead versions and sizes, when autovacuum ran.
fn print_autovacuum(t: &crate::report::model::TableCounts) {
    let Some(av) = &t.autovacuum else {
        return;
    };
    println!(
        "autovacuum: {} rounds, {} vacuums ({} pages, {} dead versions removed, {:.1} s \
         vacuuming of which {:.1} s in {} cost naps)",
        av.rounds, av.vacuums, av.pages, av.removed, av.vacuum_s, av.cost_nap_s, av.cost_naps
    );
    for r in &t.tables {
        println!(
            "  {}: {} autovacuums, n_live_tup {}, n_dead_tup {}, {} -> {} pages",
            r.relname, r.autovacuum_count, r.n_live_tup, r.n_dead_tup, r.pages_start, r.pages_end
        );
    }
}

/// pgbench's summary head: what ran, how, with how many clients, threads and tries.
fn print_summary_head(a: &BenchArgs, o: &RunOutcome) {
    let r = &o.result;
    match o.scripts.as_slice() {
        [one] => println!("transaction type: {}", one.desc),
        _ => println!("transaction type: multiple scripts"),
    }
    match (&o.ycsb, &o.tpcc) {
        (None, Some(t)) => {
            use crate::tpcc::inputs::Kind;
            println!("warehouses: {} (TPC-C)", t.warehouses);
            let done: Vec<String> = Kind::ALL
                .iter()
                .map(|&k| format!("{} {}", k.name(), t.counts.of(k)))
                .collect();
            println!(
                "transactions: {} ({} New-Orders rolled back on the unused item, {} orders delivered)",
                done.join(", "),
                t.counts.rolled_back,
                t.counts.delivered
            );
        }
        (None, None) => println!("scaling factor: {}", r.scale),
        (Some(y), _) => {
            use crate::ycsb::ops::Op;
            println!(
                "records: {} at the start, {} at the end (usertable)",
                y.records_start, y.records_end
            );
            let ops: Vec<String> = Op::ALL
                .iter()
                .filter(|&&op| y.counts.of(op) > 0)
                .map(|&op| format!("{} {}", op.name(), y.counts.of(op)))
                .collect();
            println!(
                "operations: {} (scans read {} records; {} not found)",
                ops.join(", "),
                y.counts.scanned,
                y.counts.not_found
            );
        }
    }
    println!(
        "query mode: embedded (-M {} has no effect: transactions call the engine directly, no SQL is parsed)",
        a.protocol.name()
    );
    if a.connect {
        println!("connection mode: embedded (-C has no effect: there are no connections to open)");
    }
    println!("number of clients: {}", r.clients);
    println!("number of threads: {}", r.threads);
    match a.max_tries {
        0 => println!("maximum number of tries: unlimited"),
        n => println!("maximum number of tries: {n}"),
    }
    match (a.time, a.transactions) {
        (Some(t), _) => println!("duration: {t} s"),
        _ => println!(
            "number of transactions per client: {}",
            a.transactions.unwrap_or(10)
        ),
    }
}

/// Failed, deadlocked, retried transactions and retries beyond the first try: the
/// figures of pgbench's failure lines.
struct Failures {
    failed: u64,
    deadlocks: u64,
    retried: u64,
    retries: u64,
}

/// pgbench's failure and retry lines (`--failures-detailed`, `--max-tries`), each after
/// `prefix` (" - " in a script's block), as shares of `all` transactions.
fn print_failures(prefix: &str, a: &BenchArgs, f: &Failures, all: u64) {
    let share = |n: u64| 100.0 * n as f64 / all as f64;
    println!(
        "{prefix}number of failed transactions: {} ({:.3}%)",
        f.failed,
        share(f.failed)
    );
    if a.failures_detailed {
        println!("{prefix}number of serialization failures: 0 (0.000%)");
        println!(
            "{prefix}number of deadlock failures: {} ({:.3}%)",
            f.deadlocks,
            share(f.deadlocks)
        );
    }
    if a.max_tries != 1 {
        println!(
            "{prefix}number of transactions retried: {} ({:.3}%)",
            f.retried,
            share(f.retried)
        );
        println!("{prefix}total number of retries: {}", f.retries);
    }
}

/// pgbench's per-script blocks (several scripts), after the totals: each script's
/// weight, share, failures and latency, and with `-r` its statements.
fn print_scripts(a: &BenchArgs, o: &RunOutcome) {
    let total_weight: u64 = o.scripts.iter().map(|s| u64::from(s.weight)).sum();
    let total = o.result.transactions.max(1) as f64;
    for (i, s) in o.scripts.iter().enumerate() {
        println!("SQL script {}: {}", i + 1, s.desc);
        println!(
            " - weight: {} (targets {:.1}% of total)",
            s.weight,
            100.0 * f64::from(s.weight) / total_weight.max(1) as f64
        );
        println!(
            " - {} transactions ({:.1}% of total, tps = {:.6})",
            s.transactions,
            100.0 * s.transactions as f64 / total,
            s.tps
        );
        let all = (s.transactions + s.failed).max(1);
        let f = Failures {
            failed: s.failed,
            deadlocks: s.deadlocks,
            retried: s.retried,
            retries: s.retries,
        };
        print_failures(" - ", a, &f, all);
        if a.rate.is_some() && a.latency_limit.is_some() {
            println!(
                " - number of transactions skipped: {} ({:.3}%)",
                s.skipped,
                100.0 * s.skipped as f64 / (all + s.skipped) as f64
            );
        }
        // pgbench's printSimpleStats: only for a script that ran.
        if s.transactions > 0 {
            println!(" - latency average = {:.3} ms", s.latency_avg_ms);
            println!(" - latency stddev = {:.3} ms", s.latency_stddev_ms);
        }
        if a.report_per_command && s.interpreted {
            print_statement_latencies(" - ", &s.statements);
        } else if a.report_per_command {
            println!(
                " - statement latencies: not reported (-r): the {} script runs as engine calls",
                s.name
            );
        }
    }
}

/// pgbench's `-r` block: one line per command of a script, its header after `prefix`.
fn print_statement_latencies(
    prefix: &str,
    statements: &[(String, crate::tpcb::script::StatementStat)],
) {
    println!("{prefix}statement latencies in milliseconds and failures:");
    for (text, st) in statements {
        let ms = if st.count > 0 {
            st.sum_us / st.count as f64 / 1000.0
        } else {
            0.0
        };
        println!("{ms:>14.3}{:>12}  {text}", st.failures);
    }
}

/// pgbench's summary of run `o` made with flags `a`, and bufpool's lines beside it.
pub(crate) fn print_summary(a: &BenchArgs, o: &RunOutcome) {
    let r = &o.result;
    print_summary_head(a, o);
    println!(
        "number of transactions actually processed: {}",
        r.transactions
    );
    let all = (r.transactions + r.failed).max(1);
    let failures = Failures {
        failed: r.failed,
        deadlocks: o.deadlocks,
        retried: o.retried,
        retries: o.retries,
    };
    print_failures("", a, &failures, all);
    let several = o.scripts.len() > 1;
    if a.rate.is_some() && a.latency_limit.is_some() {
        println!(
            "number of transactions skipped: {} ({:.3}%)",
            o.skipped,
            100.0 * o.skipped as f64 / (all + o.skipped) as f64
        );
    }
    if a.report_per_command && o.statements.is_empty() && !several {
        println!(
            "statement latencies: not reported (-r): the {} script runs as engine calls, not \
             statement by statement; the latency lines below are per transaction",
            r.mode
        );
    }
    if let Some(l) = a.latency_limit {
        println!(
            "number of transactions above the {l:.1} ms latency limit: {}/{} ({:.3}%)",
            o.late,
            r.transactions,
            100.0 * o.late as f64 / r.transactions.max(1) as f64
        );
    }
    println!("latency average = {:.3} ms", r.latency_ms.avg);
    println!("latency stddev = {:.3} ms", r.latency_ms.stddev);
    let l = &r.latency_ms;
    println!(
        "latency tail: p99 {:.3} ms, p99.9 {:.3} ms, max {:.3} ms; over 10 / 50 / 100 ms: {} / {} / {}",
        l.p99, l.p999, l.max, l.over_10ms, l.over_50ms, l.over_100ms
    );
    if let Some(w) = &r.waits {
        println!(
            "waits, all: {}",
            crate::tpcb::driver::waits::describe(&w.all)
        );
        println!(
            "waits, over 5 ms: {}",
            crate::tpcb::driver::waits::describe(&w.over_5ms)
        );
        println!(
            "waits, over 10 ms: {}",
            crate::tpcb::driver::waits::describe(&w.over_10ms)
        );
        println!(
            "waits, each second's slowest: {}",
            crate::tpcb::driver::waits::describe(&w.each_seconds_slowest)
        );
    }
    if let Some(p) = &o.prewarm {
        println!(
            "autoprewarm: reloaded {} of {} saved blocks ({} skipped{}{}) in {:.2} s{}",
            p.loaded,
            p.listed,
            p.skipped,
            if p.invalid > 0 {
                format!(", {} torn free-space map pages left to the map", p.invalid)
            } else {
                String::new()
            },
            if p.stopped_pool_full {
                ", stopped: no free buffer"
            } else {
                ""
            },
            p.load_seconds,
            p.last_error
                .as_ref()
                .map_or(String::new(), |e| format!("; {e}"))
        );
    }
    if let Some(p) = &a.rate_profile {
        println!("rate profile: {p}");
    }
    if a.batch_every.is_some() {
        let b = &o.batches;
        let mut d = b.durations_ms.clone();
        d.sort_by(f64::total_cmp);
        println!(
            "batches: {} committed, {} deadlocked; duration median {:.1} ms, max {:.1} ms",
            b.committed,
            b.deadlocks,
            d.get(d.len().saturating_sub(1) / 2).copied().unwrap_or(0.0),
            d.last().copied().unwrap_or(0.0)
        );
    }
    if a.vacuum_every.is_some() {
        println!(
            "vacuum side thread: {} passes, {} dead versions removed",
            o.vacuums.passes, o.vacuums.removed
        );
    }
    if let Some(t) = &r.tables {
        print_autovacuum(t);
    }
    if a.rate.is_some() || a.rate_profile.is_some() {
        println!(
            "rate limit schedule lag: avg {:.3} (max {:.3}) ms",
            o.lag_avg_ms, o.lag_max_ms
        );
    }
    println!(
        "latency percentiles: p50 = {:.3} ms, p95 = {:.3} ms, p99 = {:.3} ms, max = {:.3} ms",
        r.latency_ms.p50, r.latency_ms.p95, r.latency_ms.p99, r.latency_ms.max
    );
    println!("initial connection time = 0.000 ms");
    println!("tps = {:.6} (without initial connection time)", r.tps);
    if several {
        print_scripts(a, o);
    } else if a.report_per_command && !o.statements.is_empty() {
        print_statement_latencies("", &o.statements);
    }
    if let Some(w) = &r.bytes_written {
        println!("bytes written per transaction: {}", describe_written(w));
    }
    if let Some(side) = &r.side_script {
        println!(
            "side script {}: {} transactions, {} savepoints, pause {:.0} ms, longest {:.1} ms",
            side.script, side.transactions, side.subtransactions, side.pause_ms, side.longest_ms
        );
    }
    print_resizes(r);
}

/// One line: each source's bytes per transaction, the devices' after them.
pub fn describe_written(w: &crate::report::model::WriteBytes) -> String {
    let b = |v: u64| format!("{:.0}", w.per_tx(v));
    let device = match w.device {
        Some(d) => format!("; devices {} ({})", b(d), w.devices.join(", ")),
        None => "; devices: not known".into(),
    };
    format!(
        "wal {} (full-page images {}, padding {}), checkpointer {}, bgwriter {}, backends {}, \
         extensions {}, slru {}: engine {} (writeback-hinted {}){device}",
        b(w.wal),
        b(w.wal_fpi),
        b(w.wal_padding),
        b(w.checkpointer),
        b(w.bgwriter),
        b(w.backend),
        b(w.extend),
        b(w.slru),
        b(w.engine_total()),
        b(w.writeback_hinted),
    )
}

/// One line per `--resize-at`: what it did and the tps of its second.
fn print_resizes(r: &crate::report::model::RunResult) {
    for z in &r.resizes {
        let second = r.series.get(z.at_s as usize).map_or(0.0, |s| s.tps);
        println!(
            "pool resized at {:.1} s: {} -> {} in {:.1} ms, {} pages written, {} evicted; \
             tps that second {:.0}{}",
            z.at_s,
            bufpool::options::format_size(z.from_bytes),
            bufpool::options::format_size(z.to_bytes),
            z.took_ms,
            z.pages_written,
            z.pages_evicted,
            second,
            z.error
                .as_ref()
                .map_or(String::new(), |e| format!(" (failed: {e})"))
        );
    }
}
