//! index.html: one self-contained page (inline CSS, no scripts, no fonts, no network) that
//! opens with each run's headline figures and where it comes from, then the per-second TPS
//! and maximum-latency charts (images next to it), then the summary table, the other
//! charts, pg_stat_io and the knobs of every run. Every table sits in a box that scrolls
//! sideways by itself, so the page never does.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::charts::{run_colour, Chart};
use super::model::{RunResult, StatIo, WriteBytes};
use crate::provenance::Provenance;

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
margin:0 auto;padding:1.5em 2em 3em;max-width:1040px;color:#222;background:#fff;line-height:1.45;\
overflow-wrap:break-word}\
h1{margin:.2em 0 .4em;font-size:1.7em}h2{margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:.2em}\
.headline{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,17em),1fr));\
gap:.8em;margin:.6em 0 1em}\
.headline .run{min-width:0;border:1px solid #e4e4e4;border-radius:4px;padding:.55em .9em;\
overflow-wrap:anywhere}.run .muted{font-size:.9em}.nowrap{white-space:nowrap}\
.nums{display:flex;flex-wrap:wrap;gap:.1em 1.3em;margin:.3em 0}\
.num b{font-size:1.45em;font-variant-numeric:tabular-nums}\
.swatch{display:inline-block;width:1.6em;height:.8em;border-radius:2px;margin-right:.5em;vertical-align:middle}\
.muted{color:#666}nav a{margin-right:1.2em}\
.scroll{overflow-x:auto;max-width:100%;margin:.6em 0}\
table{border-collapse:collapse;margin:0;font-size:.92em}\
caption{text-align:left;color:#444;padding:.2em 0}\
th,td{border:1px solid #d8d8d8;padding:.28em .7em;text-align:right;vertical-align:top}\
th:first-child,td:first-child{text-align:left}thead th{background:#f3f3f3}\
tr.group th{background:#fafafa;text-align:left;font-weight:600;color:#444}\
tr.differs td,tr.differs th{background:#fff6dd;font-weight:600}\
td.knob{font-family:ui-monospace,'DejaVu Sans Mono',monospace}\
figure{margin:1.6em 0;padding:0}\
figure img{max-width:100%;height:auto;border:1px solid #e4e4e4;display:block}\
figcaption{margin-top:.4em;color:#333;max-width:60em}\
footer{margin-top:3em;color:#888;font-size:.85em}";

/// Opens a table inside its horizontally scrolling box: a table wider than the page (many
/// runs, many columns, long knob values) scrolls by itself, never the page.
fn open_table(out: &mut String, class: &str) {
    let _ = writeln!(out, "<div class=\"scroll\"><table class=\"{class}\">");
}

fn close_table(out: &mut String) {
    out.push_str("</table></div>\n");
}

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

/// One column of the pg_stat_io tables: its heading and its cell of a row.
type IoColumn = (&'static str, fn(&StatIo) -> String);

fn mb(bytes: u64) -> String {
    fixed(bytes as f64 / 1e6, 1)
}

/// pg_stat_io's counters in two tables of a few columns each (each row's backend type,
/// object and context repeated), so that neither is wider than the page.
const STAT_IO_TABLES: [(&str, &[IoColumn]); 2] = [
    (
        "Reads, writes and writebacks",
        &[
            ("reads", |s| group(s.reads)),
            ("read MB", |s| mb(s.read_bytes)),
            ("read ms", |s| fixed(s.read_time_ms, 1)),
            ("writes", |s| group(s.writes)),
            ("write MB", |s| mb(s.write_bytes)),
            ("write ms", |s| fixed(s.write_time_ms, 1)),
            ("writebacks", |s| group(s.writebacks)),
        ],
    ),
    (
        "Extends, hits, evictions, reuses and fsyncs",
        &[
            ("extends", |s| group(s.extends)),
            ("extend MB", |s| mb(s.extend_bytes)),
            ("hits", |s| group(s.hits)),
            ("evictions", |s| group(s.evictions)),
            ("reuses", |s| group(s.reuses)),
            ("fsyncs", |s| group(s.fsyncs)),
            ("fsync ms", |s| fixed(s.fsync_time_ms, 1)),
        ],
    ),
];

/// pg_stat_io as PostgreSQL 18 has it, per run that recorded it (bufpool runs): every
/// row with I/O, bytes in MB, times in ms.
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
    for r in with {
        let _ = writeln!(out, "<h3>{}</h3>", escape(&r.label));
        for (caption, columns) in STAT_IO_TABLES {
            open_table(out, "summary");
            let _ = write!(
                out,
                "<caption>{caption}</caption><thead><tr><th>backend_type</th><th>object</th>\
                 <th>context</th>"
            );
            for (name, _) in columns {
                let _ = write!(out, "<th>{name}</th>");
            }
            out.push_str("</tr></thead><tbody>\n");
            for s in &r.stat_io {
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td>{}</td><td>{}</td>",
                    escape(&s.backend_type),
                    escape(&s.object),
                    escape(&s.context)
                );
                for (_, cell) in columns {
                    let _ = write!(out, "<td>{}</td>", cell(s));
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</tbody>");
            close_table(out);
        }
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

/// Where a run comes from, in one line: the binary's version and commit and the machine,
/// each part only when the run recorded it.
fn provenance_line(p: &Provenance) -> String {
    let mut build = Vec::new();
    if !p.version.is_empty() {
        build.push(format!("bufpool {}", escape(&p.version)));
    }
    if !p.commit.is_empty() {
        build.push(format!("commit {}", escape(&p.commit)));
    }
    let mut machine = Vec::new();
    if p.cores > 0 {
        machine.push(format!("{} cores", p.cores));
    }
    if !p.cpu.is_empty() {
        machine.push(escape(&p.cpu));
    }
    if !p.kernel.is_empty() {
        machine.push(format!("kernel {}", escape(&p.kernel)));
    }
    let parts: Vec<String> = [build.join(", "), machine.join(", ")]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
    if parts.is_empty() {
        "version, commit and machine not recorded".to_string()
    } else {
        parts.join(" · ")
    }
}

/// The first screen: per run its label in its colour, its headline figures (TPS, latency
/// average, p99 and maximum), its set-up and start, and where it comes from.
fn headline(out: &mut String, runs: &[RunResult]) {
    out.push_str("<section id=\"headline\" class=\"headline\">\n");
    for (i, r) in runs.iter().enumerate() {
        let _ = write!(
            out,
            "<div class=\"run\">\n<div><span class=\"swatch\" style=\"background:{}\"></span>\
             <strong>{}</strong></div>\n<div class=\"nums\">",
            hex(i),
            escape(&r.label)
        );
        let l = &r.latency_ms;
        for (value, what) in [
            (fixed(r.tps, 1), "TPS"),
            (ms(l.avg), "ms average"),
            (ms(l.p99), "ms p99"),
            (ms(l.max), "ms max"),
        ] {
            let _ = write!(out, "<span class=\"num\"><b>{value}</b> {what}</span>");
        }
        let _ = write!(
            out,
            "</div>\n<div class=\"muted\">{}, scale {}, {} clients, {} threads, {} s, \
             started <span class=\"nowrap\">{}</span></div>\n<div class=\"muted\">{}</div>\n</div>\n",
            escape(&r.mode),
            r.scale,
            r.clients,
            r.threads,
            fixed(r.duration_s, 0),
            escape(&super::model::started_at_shown(&r.started_at)),
            provenance_line(&r.provenance)
        );
    }
    out.push_str("</section>\n");
}

/// The charts a reader looks at first, right under the headline figures.
const FIRST_CHARTS: [&str; 2] = ["tps.svg", "max-latency.svg"];

fn figures(out: &mut String, charts: &[&Chart]) {
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
}

/// The summary table: one column per run, the rows of [`summary_rows`] by group.
fn summary_table(out: &mut String, runs: &[RunResult]) {
    out.push_str("<h2 id=\"summary\">Summary</h2>\n");
    open_table(out, "summary");
    header_row(out, "", runs);
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
    out.push_str("</tbody>\n");
    close_table(out);
}

/// Every knob of every run, one column per run, rows that differ highlighted.
fn config_section(out: &mut String, runs: &[RunResult]) {
    out.push_str("<h2 id=\"config\">Configuration</h2>\n");
    let keys: BTreeSet<&String> = runs.iter().flat_map(|r| r.config.keys()).collect();
    if keys.is_empty() {
        out.push_str("<p class=\"muted\">No knobs recorded.</p>\n");
        return;
    }
    if runs.len() > 1 {
        out.push_str(
            "<p class=\"muted\">Highlighted rows differ between runs; – means not set.</p>\n",
        );
    }
    open_table(out, "config");
    header_row(out, "knob", runs);
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
    out.push_str("</tbody>\n");
    close_table(out);
}

/// The whole page, in the order a reader looks: each run's headline figures, the
/// per-second TPS and maximum-latency charts, the summary table, the other charts,
/// pg_stat_io and the knobs. Chart images are referenced by file name, relative to
/// index.html.
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
    headline(&mut out, runs);
    let (first, more): (Vec<&Chart>, Vec<&Chart>) = charts
        .iter()
        .partition(|c| FIRST_CHARTS.contains(&c.file_name));
    let link = |on: bool, id: &str, name: &str| {
        if on {
            format!("<a href=\"#{id}\">{name}</a>")
        } else {
            String::new()
        }
    };
    let _ =
        writeln!(
        out,
        "<nav>{}<a href=\"#summary\">Summary</a>{}{}<a href=\"#config\">Configuration</a></nav>",
        link(!first.is_empty(), "charts", "Charts"),
        link(!more.is_empty(), "more-charts", "More charts"),
        link(runs.iter().any(|r| !r.stat_io.is_empty()), "stat-io", "pg_stat_io"),
    );
    if !first.is_empty() {
        out.push_str("<h2 id=\"charts\">Throughput and latency per second</h2>\n");
        if runs.len() > 1 {
            out.push_str(
                "<p class=\"muted\">Runs are overlaid, one colour per run as above.</p>\n",
            );
        }
        figures(&mut out, &first);
    }
    summary_table(&mut out, runs);
    if !more.is_empty() {
        out.push_str("<h2 id=\"more-charts\">More charts</h2>\n");
        figures(&mut out, &more);
    }
    stat_io_section(&mut out, runs);
    config_section(&mut out, runs);
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

    /// A run with pg_stat_io rows gets its tables (and the page its link); runs without
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
