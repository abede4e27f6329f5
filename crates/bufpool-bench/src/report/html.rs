//! index.html: one self-contained page (inline CSS, no scripts, no fonts, no network) that
//! shows the charts as images next to it, a summary table and the knobs of every run.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::charts::{run_colour, Chart};
use super::model::{RunResult, WriteBytes};

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// 1234567 → "1,234,567".
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn fixed(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        "–".to_string()
    }
}

fn ms(v: f64) -> String {
    fixed(v, 3)
}

fn hex(i: usize) -> String {
    let c = run_colour(i);
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;\
margin:0 auto;padding:1.5em 2em 3em;max-width:1040px;color:#222;background:#fff;line-height:1.45}\
h1{margin:.2em 0 .4em;font-size:1.7em}h2{margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:.2em}\
ul.runs{list-style:none;padding:0}ul.runs li{margin:.25em 0}\
.swatch{display:inline-block;width:1.6em;height:.8em;border-radius:2px;margin-right:.5em;vertical-align:middle}\
.muted{color:#666}nav a{margin-right:1.2em}\
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}\
th,td{border:1px solid #d8d8d8;padding:.28em .7em;text-align:right;vertical-align:top}\
th:first-child,td:first-child{text-align:left}thead th{background:#f3f3f3}\
tr.group th{background:#fafafa;text-align:left;font-weight:600;color:#444}\
tr.differs td,tr.differs th{background:#fff6dd;font-weight:600}\
td.knob{font-family:ui-monospace,'DejaVu Sans Mono',monospace}\
figure{margin:1.6em 0;padding:0}\
figure img{max-width:100%;height:auto;border:1px solid #e4e4e4;display:block}\
figcaption{margin-top:.4em;color:#333;max-width:60em}\
footer{margin-top:3em;color:#888;font-size:.85em}";

type Row = (&'static str, fn(&RunResult) -> String);

/// One SLRU's pg_stat_slru counters of a run: "hit / read / zeroed / written".
fn slru_cell(r: &RunResult, name: &str) -> String {
    match r.slru.iter().find(|s| s.name == name) {
        Some(s) => format!(
            "{} / {} / {} / {}",
            group(s.blks_hit),
            group(s.blks_read),
            group(s.blks_zeroed),
            group(s.blks_written)
        ),
        None => "–".to_string(),
    }
}

/// A run's bytes written per transaction by one source (`pick`), or "–" for runs
/// without the counts (other engines, runs saved before).
fn written(r: &RunResult, pick: fn(&WriteBytes) -> Option<u64>) -> String {
    match r
        .bytes_written
        .as_ref()
        .and_then(|w| pick(w).map(|v| w.per_tx(v)))
    {
        Some(v) => group(v.round() as u64),
        None => "–".to_string(),
    }
}

/// The summary table's group of bytes written per transaction by source.
fn written_rows() -> (&'static str, Vec<Row>) {
    (
        "Bytes written per transaction",
        vec![
            ("WAL", |r| written(r, |w| Some(w.wal))),
            ("  of which full-page images", |r| {
                written(r, |w| Some(w.wal_fpi))
            }),
            ("  of which padding", |r| {
                written(r, |w| Some(w.wal_padding))
            }),
            ("checkpointer", |r| written(r, |w| Some(w.checkpointer))),
            ("bgwriter", |r| written(r, |w| Some(w.bgwriter))),
            ("backends", |r| written(r, |w| Some(w.backend))),
            ("extensions", |r| written(r, |w| Some(w.extend))),
            ("SLRUs", |r| written(r, |w| Some(w.slru))),
            ("engine total", |r| written(r, |w| Some(w.engine_total()))),
            ("  of which writeback-hinted", |r| {
                written(r, |w| Some(w.writeback_hinted))
            }),
            ("the devices (sectors written)", |r| {
                written(r, |w| w.device)
            }),
        ],
    )
}

/// A buffer counter's cell: "–" for a run whose engine keeps no buffer counters (every
/// one zero: SQLite's), rather than a zero that reads as measured.
fn buffer_count(r: &RunResult, n: u64) -> String {
    let b = &r.buffers;
    let none = [
        b.hits,
        b.reads,
        b.written_by_backend,
        b.written_by_bgwriter,
        b.written_by_checkpointer,
        b.allocated,
    ]
    .iter()
    .all(|&v| v == 0);
    if none {
        "–".to_string()
    } else {
        group(n)
    }
}

/// The summary table's row groups.
fn summary_rows() -> Vec<(&'static str, Vec<Row>)> {
    vec![
        (
            "Run",
            vec![
                ("mode", |r| escape(&r.mode)),
                ("started at", |r| {
                    escape(&super::model::started_at_shown(&r.started_at))
                }),
                ("scale", |r| group(u64::from(r.scale))),
                ("clients", |r| group(u64::from(r.clients))),
                ("threads", |r| group(u64::from(r.threads))),
                ("duration (s)", |r| fixed(r.duration_s, 1)),
            ],
        ),
        (
            "Throughput",
            vec![
                ("TPS", |r| fixed(r.tps, 1)),
                ("transactions", |r| group(r.transactions)),
                ("failed", |r| group(r.failed)),
            ],
        ),
        (
            "Transaction latency (ms)",
            vec![
                ("average", |r| ms(r.latency_ms.avg)),
                ("stddev", |r| ms(r.latency_ms.stddev)),
                ("p50", |r| ms(r.latency_ms.p50)),
                ("p95", |r| ms(r.latency_ms.p95)),
                ("p99", |r| ms(r.latency_ms.p99)),
                ("max", |r| ms(r.latency_ms.max)),
            ],
        ),
        (
            "Per-second intervals",
            vec![
                ("min TPS", |r| fixed(r.per_interval.tps_min, 1)),
                ("5th percentile TPS", |r| fixed(r.per_interval.tps_p5, 1)),
                ("median TPS", |r| fixed(r.per_interval.tps_p50, 1)),
                ("p99 of max latency (ms)", |r| {
                    ms(r.per_interval.max_latency_p99)
                }),
            ],
        ),
        (
            "Buffers",
            vec![
                ("hits", |r| buffer_count(r, r.buffers.hits)),
                ("reads", |r| buffer_count(r, r.buffers.reads)),
                ("hit ratio", |r| {
                    let total = r.buffers.hits as f64 + r.buffers.reads as f64;
                    if total > 0.0 {
                        format!("{:.2} %", 100.0 * r.buffers.hits as f64 / total)
                    } else {
                        "–".to_string()
                    }
                }),
                ("written by backends", |r| {
                    buffer_count(r, r.buffers.written_by_backend)
                }),
                ("written by bgwriter", |r| {
                    buffer_count(r, r.buffers.written_by_bgwriter)
                }),
                ("written by checkpointer", |r| {
                    buffer_count(r, r.buffers.written_by_checkpointer)
                }),
                ("allocated", |r| buffer_count(r, r.buffers.allocated)),
                ("share written by backends", |r| {
                    match r.backend_write_share() {
                        Some(v) => format!("{:.1} %", 100.0 * v),
                        None => "–".to_string(),
                    }
                }),
            ],
        ),
        (
            "Background writer",
            vec![
                ("strategy, lru_maxpages", |r| match &r.bgwriter {
                    Some(b) => escape(&format!("{}, {}", b.strategy, b.lru_maxpages)),
                    None => "–".to_string(),
                }),
                ("rounds (hibernations)", |r| match &r.bgwriter {
                    Some(b) => format!("{} ({})", group(b.rounds), group(b.hibernations)),
                    None => "–".to_string(),
                }),
                ("rounds stopped at maxpages", |r| match &r.bgwriter {
                    Some(b) => group(b.maxwritten_clean),
                    None => "–".to_string(),
                }),
                ("wasted writes", |r| match &r.bgwriter {
                    Some(b) => group(b.wasted_writes),
                    None => "–".to_string(),
                }),
                ("round mean / max (µs)", |r| match &r.bgwriter {
                    Some(b) => format!(
                        "{} / {}",
                        fixed(b.round_us_mean, 0),
                        fixed(b.round_us_max, 0)
                    ),
                    None => "–".to_string(),
                }),
            ],
        ),
        written_rows(),
        (
            "SLRUs (pg_stat_slru): hit / read / zeroed / written",
            vec![
                ("xact (commit log)", |r| slru_cell(r, "xact")),
                ("subtransaction", |r| slru_cell(r, "subtransaction")),
                ("multixact_offset", |r| slru_cell(r, "multixact_offset")),
                ("multixact_member", |r| slru_cell(r, "multixact_member")),
                ("xact: exists / flushes / truncates (rounds)", |r| {
                    match r.slru.iter().find(|s| s.name == "xact") {
                        Some(s) => format!(
                            "{} / {} / {} ({})",
                            group(s.blks_exists),
                            group(s.flushes),
                            group(s.truncates),
                            group(s.rounds)
                        ),
                        None => "–".to_string(),
                    }
                }),
            ],
        ),
        checkpoint_rows(),
    ]
}

/// The summary's checkpoint rows: from the run's spans, and pg_stat_checkpointer's.
fn checkpoint_rows() -> (&'static str, Vec<Row>) {
    (
        "Checkpoints",
        vec![
            ("count", |r| {
                if r.checkpoints.is_empty() && r.checkpointer.is_none() {
                    "–".to_string()
                } else {
                    group(r.checkpoints.len() as u64)
                }
            }),
            ("buffers written", |r| {
                group(r.checkpoints.iter().map(|c| c.buffers_written).sum())
            }),
            ("mean duration (s)", |r| {
                if r.checkpoints.is_empty() {
                    "–".to_string()
                } else {
                    let total: f64 = r.checkpoints.iter().map(|c| c.end_s - c.start_s).sum();
                    fixed(total / r.checkpoints.len() as f64, 1)
                }
            }),
            (
                "pg_stat_checkpointer: num_done, slru_written",
                |r| match &r.checkpointer {
                    Some(c) => format!("{}, {}", group(c.num_done), group(c.slru_written)),
                    None => "–".to_string(),
                },
            ),
        ],
    )
}

/// pg_stat_io as PostgreSQL 18 has it, one table per run that recorded it (bufpool
/// runs): every row with I/O, bytes in MB, times in ms.
fn stat_io_section(out: &mut String, runs: &[RunResult]) {
    let with: Vec<&RunResult> = runs.iter().filter(|r| !r.stat_io.is_empty()).collect();
    if with.is_empty() {
        return;
    }
    out.push_str(
        "<h2 id=\"stat-io\">pg_stat_io</h2>\n<p class=\"muted\">PostgreSQL 18's rows over \
         the run. Relation reads, writes and extends count blocks (PostgreSQL 18 counts \
         I/O operations: a combined read of 16 blocks is one there); the bytes agree.</p>\n",
    );
    let mb = |b: u64| fixed(b as f64 / 1e6, 1);
    for r in with {
        let _ = writeln!(
            out,
            "<h3>{}</h3>\n<table class=\"summary\"><thead><tr><th>backend_type</th>\
             <th>object</th><th>context</th><th>reads</th><th>read MB</th><th>read ms</th>\
             <th>writes</th><th>write MB</th><th>write ms</th><th>writebacks</th>\
             <th>extends</th><th>extend MB</th><th>hits</th><th>evictions</th>\
             <th>reuses</th><th>fsyncs</th><th>fsync ms</th></tr></thead><tbody>",
            escape(&r.label)
        );
        for s in &r.stat_io {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&s.backend_type),
                escape(&s.object),
                escape(&s.context),
                group(s.reads),
                mb(s.read_bytes),
                fixed(s.read_time_ms, 1),
                group(s.writes),
                mb(s.write_bytes),
                fixed(s.write_time_ms, 1),
                group(s.writebacks),
                group(s.extends),
                mb(s.extend_bytes),
                group(s.hits),
                group(s.evictions),
                group(s.reuses),
                group(s.fsyncs),
                fixed(s.fsync_time_ms, 1),
            );
        }
        out.push_str("</tbody></table>\n");
    }
}

fn header_row(out: &mut String, first: &str, runs: &[RunResult]) {
    let _ = write!(out, "<thead><tr><th>{}</th>", escape(first));
    for (i, r) in runs.iter().enumerate() {
        let _ = write!(
            out,
            "<th><span class=\"swatch\" style=\"background:{}\"></span>{}</th>",
            hex(i),
            escape(&r.label)
        );
    }
    out.push_str("</tr></thead>\n");
}

/// The whole page. Chart images are referenced by file name, relative to index.html.
pub fn render_index(runs: &[RunResult], charts: &[Chart]) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let labels: Vec<String> = runs.iter().map(|r| escape(&r.label)).collect();
    let title = format!("bufpool benchmark report: {}", labels.join(", "));
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<link rel=\"icon\" href=\"data:,\">\n<style>{STYLE}</style>\n\
         </head>\n<body>\n<h1>bufpool benchmark report</h1>\n"
    );

    out.push_str("<ul class=\"runs\">\n");
    for (i, r) in runs.iter().enumerate() {
        let _ = writeln!(
            out,
            "<li><span class=\"swatch\" style=\"background:{}\"></span><strong>{}</strong> \
             <span class=\"muted\">{}, scale {}, {} clients, {} threads, {} s, {} TPS, started {}</span></li>",
            hex(i),
            labels[i],
            escape(&r.mode),
            r.scale,
            r.clients,
            r.threads,
            fixed(r.duration_s, 0),
            fixed(r.tps, 1),
            escape(&super::model::started_at_shown(&r.started_at))
        );
    }
    let stat_io_link = if runs.iter().any(|r| !r.stat_io.is_empty()) {
        "<a href=\"#stat-io\">pg_stat_io</a>"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "</ul>\n<nav><a href=\"#summary\">Summary</a>{stat_io_link}<a href=\"#charts\">Charts</a>\
         <a href=\"#config\">Configuration</a></nav>"
    );

    out.push_str("<h2 id=\"summary\">Summary</h2>\n<table class=\"summary\">\n");
    header_row(&mut out, "", runs);
    out.push_str("<tbody>\n");
    for (group_name, rows) in summary_rows() {
        let _ = writeln!(
            out,
            "<tr class=\"group\"><th colspan=\"{}\">{}</th></tr>",
            runs.len() + 1,
            escape(group_name)
        );
        for (name, cell) in rows {
            let _ = write!(out, "<tr><td>{}</td>", escape(name));
            for r in runs {
                let _ = write!(out, "<td>{}</td>", cell(r));
            }
            out.push_str("</tr>\n");
        }
    }
    out.push_str("</tbody>\n</table>\n");
    stat_io_section(&mut out, runs);

    out.push_str("<h2 id=\"charts\">Charts</h2>\n");
    if runs.len() > 1 {
        out.push_str(
            "<p class=\"muted\">Runs are overlaid, one colour per run as in the list above.</p>\n",
        );
    }
    for c in charts {
        let _ = writeln!(
            out,
            "<figure id=\"{id}\">\n<img src=\"{src}\" alt=\"{alt}\">\n\
             <figcaption><strong>{title}.</strong> {caption}</figcaption>\n</figure>",
            id = escape(c.file_name.trim_end_matches(".svg")),
            src = escape(c.file_name),
            alt = escape(&c.alt),
            title = escape(&c.title),
            caption = escape(c.caption)
        );
    }

    out.push_str("<h2 id=\"config\">Configuration</h2>\n");
    let keys: BTreeSet<&String> = runs.iter().flat_map(|r| r.config.keys()).collect();
    if keys.is_empty() {
        out.push_str("<p class=\"muted\">No knobs recorded.</p>\n");
    } else {
        if runs.len() > 1 {
            out.push_str(
                "<p class=\"muted\">Highlighted rows differ between runs; – means not set.</p>\n",
            );
        }
        out.push_str("<table class=\"config\">\n");
        header_row(&mut out, "knob", runs);
        out.push_str("<tbody>\n");
        for key in keys {
            let values: Vec<Option<&String>> = runs.iter().map(|r| r.config.get(key)).collect();
            let differs = values.windows(2).any(|w| w[0] != w[1]);
            let _ = write!(
                out,
                "<tr{}><td class=\"knob\">{}</td>",
                if differs { " class=\"differs\"" } else { "" },
                escape(key)
            );
            for v in values {
                let _ = write!(
                    out,
                    "<td>{}</td>",
                    v.map_or_else(|| "–".to_string(), |v| escape(v))
                );
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table>\n");
    }
    let _ = write!(
        out,
        "<footer>Generated by <code>bufpool report</code> from {} run{}.</footer>\n</body>\n</html>\n",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::SlruCounts;

    #[test]
    fn escapes_and_groups() {
        assert_eq!(
            escape(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(1_234_567), "1,234,567");
    }

    /// A run with pg_stat_io rows gets its table (and the page its link); runs without
    /// (PostgreSQL's, SQLite's) get none.
    #[test]
    fn stat_io_rows_get_a_table_per_run() {
        let mut a = RunResult::example("bufpool run", 1);
        a.stat_io = vec![crate::report::model::StatIo {
            backend_type: "walwriter".into(),
            object: "wal".into(),
            context: "normal".into(),
            writes: 1234,
            write_bytes: 5_054_464,
            fsyncs: 1234,
            ..Default::default()
        }];
        let b = RunResult::example("postgres run", 2);
        let html = render_index(&[a, b.clone()], &[]);
        assert!(html.contains("<h2 id=\"stat-io\">") && html.contains("href=\"#stat-io\""));
        assert!(html.contains("<h3>bufpool run</h3>") && !html.contains("<h3>postgres run</h3>"));
        let row = html
            .lines()
            .find(|l| l.contains("<td>walwriter</td>"))
            .expect("the row");
        assert!(
            row.contains("<td>1,234</td>") && row.contains("<td>5.1</td>"),
            "{row}"
        );
        let without = render_index(&[b], &[]);
        assert!(!without.contains("stat-io"));
    }

    /// An engine without buffer or checkpoint counters (SQLite) shows "–", not a zero
    /// that reads as measured; one with them (PostgreSQL from its views) shows them.
    #[test]
    fn counters_an_engine_does_not_keep_are_dashes() {
        let mut sqlite = RunResult::example("sqlite", 1);
        sqlite.buffers = Default::default();
        sqlite.checkpoints.clear();
        sqlite.checkpointer = None;
        let mut pg = RunResult::example("pg", 2);
        pg.buffers = Default::default();
        pg.buffers.hits = 467_412;
        pg.checkpoints.clear();
        pg.checkpointer = Some(Default::default());
        let cells = |r: &RunResult| {
            let rows = summary_rows();
            let find = |group: &str, label: &str| {
                let g = rows.iter().find(|g| g.0 == group).unwrap();
                (g.1.iter().find(|row| row.0 == label).unwrap().1)(r)
            };
            let ck = checkpoint_rows();
            let count = (ck.1.iter().find(|row| row.0 == "count").unwrap().1)(r);
            (find("Buffers", "hits"), find("Buffers", "reads"), count)
        };
        assert_eq!(cells(&sqlite), ("–".into(), "–".into(), "–".into()));
        assert_eq!(cells(&pg), ("467,412".into(), "0".into(), "0".into()));
    }

    #[test]
    fn config_rows_that_differ_are_marked() {
        let a = RunResult::example("a", 1);
        let b = RunResult::example("b", 2);
        let html = render_index(&[a, b], &[]);
        let row = html
            .lines()
            .find(|l| l.contains(">synchronous_commit<"))
            .expect("knob row");
        assert!(row.contains("class=\"differs\""), "{row}");
        let same = html
            .lines()
            .find(|l| l.contains(">shared_buffers<"))
            .expect("knob row");
        assert!(!same.contains("differs"), "{same}");
    }

    /// Bytes written are shown per transaction by source; the devices' row says "–"
    /// where they were not known, and a run without the counts shows dashes.
    #[test]
    fn bytes_written_rows_are_per_transaction() {
        let mut r = RunResult::example("a", 1);
        r.bytes_written = Some(WriteBytes {
            transactions: 1000,
            wal: 1_228_800,
            wal_padding: 4_096_000 / 100,
            bgwriter: 5_120_000,
            device: None,
            ..WriteBytes::default()
        });
        let html = render_index(&[r, RunResult::example("b", 2)], &[]);
        let row = |label: &str| {
            html.lines()
                .find(|l| l.contains(&format!(">{label}<")))
                .unwrap_or_else(|| panic!("no row for {label}"))
                .to_string()
        };
        assert!(
            row("WAL").contains("<td>1,229</td><td>–</td>"),
            "{}",
            row("WAL")
        );
        assert!(row("  of which padding").contains("<td>41</td>"));
        assert!(row("bgwriter").contains("<td>5,120</td>"));
        assert!(row("engine total").contains("<td>6,349</td>"));
        assert!(row("the devices (sectors written)").contains("<td>–</td><td>–</td>"));
    }

    #[test]
    fn every_slru_gets_a_row_with_its_own_counters() {
        let mut r = RunResult::example("a", 1);
        r.slru = [
            "xact",
            "subtransaction",
            "multixact_offset",
            "multixact_member",
        ]
        .iter()
        .enumerate()
        .map(|(i, name)| SlruCounts {
            name: name.to_string(),
            blks_hit: 1000 + i as u64,
            blks_read: 10 + i as u64,
            blks_zeroed: 3,
            blks_written: 7,
            ..SlruCounts::default()
        })
        .collect();
        let html = render_index(&[r], &[]);
        for (label, hit, read) in [
            ("xact (commit log)", "1,000", "10"),
            ("subtransaction", "1,001", "11"),
            ("multixact_offset", "1,002", "12"),
            ("multixact_member", "1,003", "13"),
        ] {
            let row = html
                .lines()
                .find(|l| l.contains(&format!(">{label}<")))
                .unwrap_or_else(|| panic!("no row for {label}"));
            assert!(row.contains(&format!("{hit} / {read} / 3 / 7")), "{row}");
        }
        // A run without an SLRU's counters (an older result file) shows a dash.
        let html = render_index(&[RunResult::example("b", 1)], &[]);
        let row = html
            .lines()
            .find(|l| l.contains(">multixact_member<"))
            .expect("row");
        assert!(row.contains("–"), "{row}");
    }
}
