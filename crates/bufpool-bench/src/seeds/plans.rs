//! Each seed's plan: the experiments that rerun the thread's set-up here (as `bufpool
//! experiment` command lines, run in this process), and which of their figures answer
//! which of the thread's. Where our run cannot answer (its experiment did not run, or a
//! figure it needs is missing), the row says why instead of standing in another figure.

use std::path::Path;

use anyhow::Result;
use serde_json::{json, Value};

use super::{cite, scratch, Row, Seed};

/// What runs for a seed and how its rows are read.
pub struct Plan {
    /// `bufpool experiment ...` command lines, in order; `Ours` points into their reports.
    pub runs: Vec<Vec<String>>,
    pub compares: Vec<Compare>,
    /// Our set-up in one line (the device, clients, scale and what differs from the
    /// thread's).
    pub setup: String,
}

/// One row: the thread's change (`after` over `before`, figure keys) and ours.
pub struct Compare {
    pub question: &'static str,
    pub after: &'static str,
    pub before: &'static str,
    pub ours: Ours,
}

/// Where our two figures come from (report index into the plan's runs).
pub enum Ours {
    /// `experiment checkpoint`'s `runs`: `field` of config `after` over config `before`
    /// (median over repeats), throttled or not.
    Ckpt {
        report: usize,
        after: &'static str,
        before: &'static str,
        throttled: bool,
        field: &'static str,
    },
    /// `experiment checkpoint`'s `bulk` rows: `field` seconds of one config over another.
    Bulk {
        report: usize,
        after: &'static str,
        before: &'static str,
        field: &'static str,
    },
    /// `experiment scans`'s `ring_sweep`: seconds per scan (`field`: with the default
    /// read streams or one block at a time) with ring `after` over ring `before` (None: no
    /// ring).
    Ring {
        report: usize,
        after: Option<u64>,
        before: Option<u64>,
        field: &'static str,
    },
    /// `experiment slru`'s `exp1`/`exp2` rows: TPS of design `after` over `before` at the
    /// top client count.
    Slru {
        report: usize,
        exp: &'static str,
        after: &'static str,
        before: &'static str,
    },
    /// `experiment bgwriter`'s `runs`: `field` of `after` over `before` in `workload`.
    Bgw {
        report: usize,
        workload: &'static str,
        after: &'static str,
        before: &'static str,
        field: &'static str,
    },
}

impl Compare {
    #[cfg(test)]
    pub fn seed_keys(&self) -> [&'static str; 2] {
        [self.after, self.before]
    }

    pub fn row(&self, seed: &Seed, reports: &[Value], plan: &Plan) -> Result<Row> {
        let (a, b) = (seed.figure(self.after)?, seed.figure(self.before)?);
        let thread_setup = seed
            .message(&a.message)
            .map(|m| m.setup.clone())
            .unwrap_or_default();
        let (ours, skipped) = match self.ours.measure(reports) {
            Ok(pair) => (Some(pair), None),
            Err(why) => (None, Some(why)),
        };
        Ok(Row {
            seed: seed.id.clone(),
            question: self.question.to_string(),
            setup: format!("thread: {thread_setup} | ours: {}", plan.setup),
            seed_figure: a.value / b.value,
            seed_detail: cite(seed, &[self.after, self.before])?,
            our_figure: ours.map(|(x, y)| x / y),
            our_detail: ours.map_or(
                Value::Null,
                |(x, y)| json!({"after": x, "before": y, "source": self.ours.source(reports)}),
            ),
            skipped,
        })
    }
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

impl Ours {
    fn report<'a>(&self, reports: &'a [Value]) -> Option<&'a Value> {
        let i = match self {
            Ours::Ckpt { report, .. }
            | Ours::Bulk { report, .. }
            | Ours::Ring { report, .. }
            | Ours::Slru { report, .. }
            | Ours::Bgw { report, .. } => *report,
        };
        reports.get(i)
    }

    fn source(&self, reports: &[Value]) -> Value {
        self.report(reports)
            .map_or(Value::Null, |r| r["command"].clone())
    }

    /// Our (after, before), or why there is none.
    fn measure(&self, reports: &[Value]) -> std::result::Result<(f64, f64), String> {
        let r = self.report(reports).ok_or("its experiment did not run")?;
        let pick = |rows: &Value, f: &dyn Fn(&Value) -> bool, field: &str| {
            let mut v: Vec<f64> = rows
                .as_array()
                .into_iter()
                .flatten()
                .filter(|x| f(x))
                .filter_map(|x| pointer(x, field))
                .collect();
            median(&mut v)
        };
        let pair = match self {
            Ours::Ckpt {
                after,
                before,
                throttled,
                field,
                ..
            } => {
                let of = |l: &str, field: &str| {
                    pick(
                        &r["runs"],
                        &|x| x["config"] == l && x["throttled"] == *throttled,
                        field,
                    )
                };
                // The threads asked what checkpoints do: runs without one cannot answer.
                for l in [after, before] {
                    if of(l, "checkpoints").unwrap_or(0.0) < 1.0 {
                        return Err(format!(
                            "no checkpoint ran inside ({l})'s measured run: it cannot show \
                             what a checkpoint does"
                        ));
                    }
                }
                (of(after, field), of(before, field))
            }
            Ours::Bulk {
                after,
                before,
                field,
                ..
            } => {
                let of = |l: &str| {
                    let prefix = format!("({l})");
                    pick(
                        &r["bulk"],
                        &|x| x["config"].as_str().is_some_and(|c| c.starts_with(&prefix)),
                        field,
                    )
                };
                (of(after), of(before))
            }
            Ours::Ring {
                after,
                before,
                field,
                ..
            } => {
                let of = |k: Option<u64>| {
                    pick(
                        &r["ring_sweep"],
                        &|x| x["ring_buffers"].as_u64() == k,
                        field,
                    )
                };
                let largest = r["ring_sweep"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|x| x["ring_buffers"].as_u64())
                    .max()
                    .unwrap_or(0);
                if let Some(k) = [*after, *before]
                    .into_iter()
                    .flatten()
                    .find(|&k| k > largest)
                {
                    return Err(format!(
                        "the sweep's largest ring is {largest} buffers (an eighth of its pool), \
                         not {k}"
                    ));
                }
                (of(*after), of(*before))
            }
            Ours::Slru {
                exp, after, before, ..
            } => {
                let rows = &r[*exp];
                let top = rows
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|x| x["clients"].as_u64())
                    .max();
                let of = |d: &str| {
                    pick(
                        rows,
                        &|x| x["design"] == d && x["clients"].as_u64() == top,
                        "tps/median",
                    )
                };
                (of(after), of(before))
            }
            Ours::Bgw {
                workload,
                after,
                before,
                field,
                ..
            } => {
                let of = |c: &str| {
                    pick(
                        &r["runs"],
                        &|x| x["config"] == c && x["workload"] == *workload,
                        field,
                    )
                };
                (of(after), of(before))
            }
        };
        match pair {
            (Some(a), Some(b)) if b > 0.0 => Ok((a, b)),
            _ => Err("the experiment's output lacks one of the two figures".into()),
        }
    }
}

/// A number at a `/`-separated path inside `v`.
fn pointer(v: &Value, path: &str) -> Option<f64> {
    v.pointer(&format!("/{path}")).and_then(Value::as_f64)
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// The plan of seed `id`.
pub fn plan(id: &str, quick: bool, device: &str, out: &Path) -> Result<Plan> {
    let dir = scratch(out);
    let mut common = argv(&["bufpool", "experiment", "--json", "--dir", &dir]);
    if quick {
        common.push("--quick".into());
    }
    let with = |rest: &[&str]| -> Vec<String> {
        let mut v = common.clone();
        v.extend(argv(rest));
        v
    };
    Ok(match id {
        "000" => seed000(with, quick, device),
        "001" => seed001(with, quick, device),
        "002" => seed002(with),
        "003" => seed003(with),
        "004" => seed004(with, quick, device),
        other => anyhow::bail!("no plan for seed {other}"),
    })
}

fn seed000(with: impl Fn(&[&str]) -> Vec<String>, quick: bool, device: &str) -> Plan {
    let seconds = if quick { "10" } else { "120" };
    let sweep = |clients: u32, after, before, workload| Compare {
        question: match clients {
            1 => {
                "pgbench tps, 1 client, 8.0.0RC1 with the 2% window over 7.4.6 (no bgwriter); \
                  ours: max-rate TPC-B, seed000-bg2 over off"
            }
            2 => "pgbench tps, 2 clients, the same",
            4 => "pgbench tps, 4 clients, the same",
            _ => "pgbench tps, 8 clients, the same",
        },
        after,
        before,
        ours: Ours::Bgw {
            report: 0,
            workload,
            after: "seed000-bg2",
            before: "off",
            field: "tps",
        },
    };
    Plan {
        runs: vec![with(&[
            "bgwriter",
            "--device",
            device,
            "--bgw-configs",
            "default,seed000-bg2,pg15-faithful",
            "--checkpoint-timeout",
            "30s",
            "--seconds",
            seconds,
            "--round-pools",
            "64MB",
            "--sweep-clients",
            "1,2,4,8",
            "--sweep-configs",
            "seed000-bg2",
        ])],
        compares: vec![
            Compare {
                question:
                    "DBT-2 max New Order response with the bounded bgwriter (bg3.patch over \
                           baseline); ours: bursty TPC-B max latency, seed000-bg2 over bgwriter off",
                after: "dbt2_new_order_max_rt_after",
                before: "dbt2_new_order_max_rt_before",
                ours: Ours::Bgw {
                    report: 0,
                    workload: "bursty",
                    after: "seed000-bg2",
                    before: "off",
                    field: "latency_max_ms",
                },
            },
            sweep(1, "pg800rc1_patched_tps_c1", "pg746_tps_c1", "max-c1"),
            sweep(2, "pg800rc1_patched_tps_c2", "pg746_tps_c2", "max-c2"),
            sweep(4, "pg800rc1_patched_tps_c4", "pg746_tps_c4", "max-c4"),
            sweep(8, "pg800rc1_patched_tps_c8", "pg746_tps_c8", "max-c8"),
        ],
        setup: format!(
            "TPC-B scale {}, 8 clients, pool a quarter of the data, synchronous_commit off, \
             checkpoint_timeout 30 s, device {device}; bgwriter off, default, PostgreSQL 15's \
             behaviour and bg2.patch's 2% window; the max-rate rows again at 1, 2, 4 and 8 \
             clients (off and bg2.patch's window)",
            if quick { 5 } else { 10 }
        ),
    }
}

fn seed001(with: impl Fn(&[&str]) -> Vec<String>, quick: bool, device: &str) -> Plan {
    // Quick runs still last past one 30 s checkpoint: the thread's question is about it.
    // At full length 32 clients dirty the pool faster than 100 IOPS can write it, so an
    // unspread checkpoint of it takes minutes: their runs last until a few complete.
    let (scale, seconds, seconds_32) = if quick {
        ("2", "40", "40")
    } else {
        ("50", "100", "400")
    };
    let run = |clients: &str, bulk: &str| {
        let seconds = if clients == "32" { seconds_32 } else { seconds };
        with(&[
            "checkpoint",
            "--configs",
            "g,h,k",
            "--pool",
            "whole",
            "--clients",
            clients,
            "--scale",
            scale,
            "--seconds",
            seconds,
            "--throttled",
            "off",
            "--tablespaces",
            "off",
            "--bulk",
            bulk,
            "--device",
            device,
            "--wal-device",
            device,
        ])
    };
    let ck = |report, field| Ours::Ckpt {
        report,
        after: "h",
        before: "g",
        throttled: false,
        field,
    };
    let bulk = |field| Ours::Bulk {
        report: 0,
        after: "h",
        before: "g",
        field,
    };
    let sorted_bulk = |field| Ours::Bulk {
        report: 0,
        after: "k",
        before: "g",
        field,
    };
    Plan {
        runs: vec![run("1", "on"), run("32", "off")],
        compares: vec![
            Compare {
                question: "worst response, 1 client: O_SYNC over fsync",
                after: "o_sync_c1_worst_ms",
                before: "fsync_c1_worst_ms",
                ours: ck(0, "latency_worst_ms"),
            },
            Compare {
                question: "10th-worst response, 1 client: O_SYNC over fsync",
                after: "o_sync_c1_10th_worst_ms",
                before: "fsync_c1_10th_worst_ms",
                ours: ck(0, "latency_10th_worst_ms"),
            },
            Compare {
                question: "tps, 1 client: O_SYNC over fsync",
                after: "o_sync_c1_tps",
                before: "fsync_c1_tps",
                ours: ck(0, "tps"),
            },
            Compare {
                question: "worst response, 32 clients: O_SYNC over fsync",
                after: "o_sync_c32_worst_ms",
                before: "fsync_c32_worst_ms",
                ours: ck(1, "latency_worst_ms"),
            },
            Compare {
                question: "10th-worst response, 32 clients: O_SYNC over fsync",
                after: "o_sync_c32_10th_worst_ms",
                before: "fsync_c32_10th_worst_ms",
                ours: ck(1, "latency_10th_worst_ms"),
            },
            Compare {
                question: "tps, 32 clients: O_SYNC over fsync",
                after: "o_sync_c32_tps",
                before: "fsync_c32_tps",
                ours: ck(1, "tps"),
            },
            Compare {
                question: "bulk: COPY + CHECKPOINT seconds, O_SYNC over fsync (ours: init)",
                after: "bulk_copy_checkpoint_o_sync_s",
                before: "bulk_copy_checkpoint_fsync_s",
                ours: bulk("load_s"),
            },
            Compare {
                question: "bulk: UPDATE of every row, O_SYNC over fsync",
                after: "bulk_update_o_sync_s",
                before: "bulk_update_fsync_s",
                ours: bulk("update_s"),
            },
            Compare {
                question: "bulk: the CHECKPOINT after it, O_SYNC over fsync",
                after: "bulk_checkpoint_o_sync_s",
                before: "bulk_checkpoint_fsync_s",
                ours: bulk("checkpoint_s"),
            },
            Compare {
                question: "bulk: COPY + CHECKPOINT seconds, sorted O_SYNC over fsync (ours: \
                           init)",
                after: "bulk_copy_checkpoint_o_sync_sorted_s",
                before: "bulk_copy_checkpoint_fsync_s",
                ours: sorted_bulk("load_s"),
            },
            Compare {
                question: "bulk: UPDATE of every row, sorted O_SYNC over fsync",
                after: "bulk_update_o_sync_sorted_s",
                before: "bulk_update_fsync_s",
                ours: sorted_bulk("update_s"),
            },
            Compare {
                question: "bulk: the CHECKPOINT after it, sorted O_SYNC over fsync",
                after: "bulk_checkpoint_o_sync_sorted_s",
                before: "bulk_checkpoint_fsync_s",
                ours: sorted_bulk("checkpoint_s"),
            },
        ],
        setup: format!(
            "TPC-B scale {scale}, {seconds} s per run ({seconds_32} s with 32 clients), (g) \
             8.2.1 (unspread, unsorted, page by page, fsync at the end) against (h) the \
             same with O_DSYNC data files and (k) (h) sorted with adjacent pages written \
             together; data and WAL each on its own {device} device; the pool twice the \
             data, the thread's regime (its 2 GB held its 750 MB)"
        ),
    }
}

fn seed002(with: impl Fn(&[&str]) -> Vec<String>) -> Plan {
    let slru = |exp, after, before| Ours::Slru {
        report: 0,
        exp,
        after,
        before,
    };
    Plan {
        runs: vec![with(&["slru"])],
        compares: vec![
            Compare {
                question: "exp 1 (savepoint overflow), top clients: banks with bank locks and \
                           LRU counters over one central lock",
                after: "exp1_bankwise_c128",
                before: "exp1_head_c128",
                ours: slru("exp1", "banks_locks_lru", "central"),
            },
            Compare {
                question: "exp 2 (multixacts), top clients: banks with bank locks over one \
                           central lock",
                after: "exp2_bankwise_c128",
                before: "exp2_head_c128",
                ours: slru("exp2", "banks_locks_lru", "central"),
            },
            Compare {
                question: "exp 2 (multixacts), top clients: banks alone (one lock) over central",
                after: "exp2_slrubank_c128",
                before: "exp2_head_c128",
                ours: slru("exp2", "banks", "central"),
            },
        ],
        setup: "the slru experiment's exp 1 and exp 2 on 2 cores (the thread: 64 cores, 1 to \
                128 clients); the top client count here is the experiment's own"
            .into(),
    }
}

fn seed003(with: impl Fn(&[&str]) -> Vec<String>) -> Plan {
    // The thread's server read one block at a time (8.3 had no read streams).
    let ring = |after, before| Ours::Ring {
        report: 0,
        after,
        before,
        field: "seconds_one_block/median",
    };
    Plan {
        // A 64 MiB pool in every mode, so the sweep reaches 1,024 buffers (an eighth).
        runs: vec![with(&[
            "scans",
            "--device",
            "local",
            "--scan-pool-mb",
            "64",
        ])],
        compares: vec![
            Compare {
                question: "ring-size sweep: 1 buffer over 16 buffers",
                after: "ring_1_run1_s",
                before: "ring_16_s",
                ours: ring(Some(1), Some(16)),
            },
            Compare {
                question: "ring-size sweep: 256 buffers over 16",
                after: "ring_256_s",
                before: "ring_16_s",
                ours: ring(Some(256), Some(16)),
            },
            Compare {
                question: "ring-size sweep: 1,024 buffers over 16",
                after: "ring_1024_s",
                before: "ring_16_s",
                ours: ring(Some(1024), Some(16)),
            },
            Compare {
                question: "count(*) of a large table: a small ring (ours 32 buffers, 256 kB) \
                           over none",
                after: "tpch_count_patched_ms",
                before: "tpch_count_head_ms",
                ours: ring(Some(32), None),
            },
        ],
        setup: "the scans experiment's ring-size sweep: count-style scans of a table of 10 \
                pools (64 MiB pool, 8 KiB pages), OS cache warm, buffered, local disk, read \
                one block at a time with no look-ahead as PostgreSQL 8.3 read \
                (effective_io_concurrency 0, io_combine_limit 8kB; the experiment's table \
                also has the default read streams)"
            .into(),
    }
}

fn seed004(with: impl Fn(&[&str]) -> Vec<String>, quick: bool, device: &str) -> Plan {
    let clients = if quick { "8" } else { "32" };
    let seconds = if quick { "40" } else { "300" };
    let ck = |throttled, field| Ours::Ckpt {
        report: 0,
        after: "j",
        before: "i",
        throttled,
        field,
    };
    Plan {
        runs: vec![with(&[
            "checkpoint",
            "--configs",
            "i,j",
            "--clients",
            clients,
            "--seconds",
            seconds,
            "--bulk",
            "off",
            "--device",
            device,
            "--wal-device",
            device,
        ])],
        compares: vec![
            Compare {
                question: "unthrottled tps: sorted writes with flushing over master",
                after: "unthrottled_tps_patched",
                before: "unthrottled_tps_master",
                ours: ck(false, "tps"),
            },
            Compare {
                question: "throttled at 60%: the slow 10% of seconds (p10 tps), patched over \
                           master",
                after: "throttled_p10_tps_patched",
                before: "throttled_p10_tps_master",
                ours: ck(true, "tps_p10"),
            },
        ],
        setup: format!(
            "TPC-B, {clients} clients, 30 s checkpoints, (i) 9.5's checkpointer (spread over \
             0.5, unsorted, page by page, no hints) against (j) the patch (sorted, hints \
             every 256 kB per tablespace, the bgwriter's every 512 kB), both with 9.5's \
             bgwriter at the thread's 10 ms and 1,000 pages; unthrottled and at 60% of (j)'s \
             TPS; data and WAL each on its own {device} device; minutes, not the thread's \
             24 hours"
        ),
    }
}
