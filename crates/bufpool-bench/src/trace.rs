//! `bufpool trace replay`: a trace recorded by `bench --trace` run through each replacement
//! policy's own code and Belady's optimum, at several pool sizes.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use bufpool::buffer::replay::{self, ReplayCounts};
use bufpool::buffer::trace::{read_trace, TraceHeader, TraceRecord, TraceSummary, TRACE_BYTES_MAX};
use bufpool::buffer::ReplacementPolicy;

use crate::knobs::KnobError;

#[derive(Debug, clap::Args)]
pub struct TraceCli {
    #[command(subcommand)]
    command: TraceCommand,
}

#[derive(Debug, clap::Subcommand)]
enum TraceCommand {
    /// Replays a trace through replacement policies and prints each one's miss ratio beside
    /// the optimum's (Belady) and the compulsory misses.
    Replay(ReplayArgs),
}

#[derive(Debug, clap::Args)]
struct ReplayArgs {
    /// The trace (`bufpool bench --trace FILE`).
    file: PathBuf,
    /// Policies (`buffer_replacement`'s words) and `opt`, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    policies: Vec<String>,
    /// Pool sizes, comma-separated: buffers (1024), bytes (16MB, at the trace's page
    /// size) or a share of the distinct pages requested (25%). Default: the recording
    /// pool's.
    #[arg(long = "pool-sizes", value_delimiter = ',')]
    pool_sizes: Vec<String>,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
}

/// Starts recording `pool`'s buffer requests to a new file at `path`.
pub fn start(pool: &bufpool::BufferPool, path: &Path) -> Result<()> {
    let file = std::fs::File::create(path)
        .with_context(|| format!("creating the trace {}", path.display()))?;
    pool.start_trace(Box::new(file))
        .with_context(|| format!("starting the trace {}", path.display()))
}

/// Stops the recording `start` began and says what it wrote (on stderr).
pub fn stop(pool: &bufpool::BufferPool, path: &Path) -> Result<TraceSummary> {
    let t = pool
        .stop_trace()
        .with_context(|| format!("writing the trace {}", path.display()))?;
    eprintln!(
        "trace: {} requests, {:.1} MB, to {} ({} dropped at the stop)",
        t.records,
        t.bytes as f64 / 1e6,
        path.display(),
        t.dropped
    );
    Ok(t)
}

/// A trace file's header and records (ordered by time).
/// Only a regular file is read (a FIFO or a device could feed it without end), of at most
/// `TRACE_BYTES_MAX` bytes.
pub fn read_trace_file(path: &Path) -> Result<(TraceHeader, Vec<TraceRecord>)> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let meta = f
        .metadata()
        .with_context(|| format!("looking at {}", path.display()))?;
    anyhow::ensure!(
        meta.is_file(),
        "{} is not a regular file (a trace is one)",
        path.display()
    );
    read_trace(std::io::BufReader::new(f), TRACE_BYTES_MAX)
        .with_context(|| format!("reading {}", path.display()))
}

pub fn run(cli: TraceCli) -> Result<()> {
    match cli.command {
        TraceCommand::Replay(a) => replay_cmd(&a),
    }
}

/// One policy (or `None`: the optimum).
type Choice = Option<ReplacementPolicy>;

fn parse_policies(words: &[String]) -> Result<Vec<Choice>> {
    let mut out = Vec::new();
    for w in words {
        match w.as_str() {
            "all" => {
                out.extend(ReplacementPolicy::ALL.map(Some));
                out.push(None);
            }
            "opt" => out.push(None),
            w => out.push(Some(
                ReplacementPolicy::ALL
                    .into_iter()
                    .find(|p| p.name() == w)
                    .ok_or_else(|| {
                        let names: Vec<_> = ReplacementPolicy::ALL.map(|p| p.name()).into();
                        KnobError(format!(
                            "--policies: no policy {w:?} (one of {}, opt, all)",
                            names.join(", ")
                        ))
                    })?,
            )),
        }
    }
    // Each once, in the order given, the optimum last.
    let mut unique: Vec<Choice> = Vec::new();
    for c in out {
        if !unique.contains(&c) {
            unique.push(c);
        }
    }
    unique.sort_by_key(|c| c.is_none());
    Ok(unique)
}

fn parse_pool_size(s: &str, page_size: u64, distinct: u64) -> Result<usize> {
    let bad = |why: String| KnobError(format!("--pool-sizes: {s:?}: {why}"));
    let n = if let Some(pct) = s.strip_suffix('%') {
        let p: f64 = pct.parse().map_err(|_| bad("not a percentage".into()))?;
        if !(p > 0.0 && p <= 100.0) {
            return Err(bad("a share must be over 0% and at most 100%".into()).into());
        }
        (distinct as f64 * p / 100.0).round() as u64
    } else if s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().map_err(|_| bad("too large".into()))?
    } else {
        bufpool::options::parse_size(s).map_err(bad)? / page_size.max(1)
    };
    if n == 0 {
        return Err(bad("comes to 0 buffers".into()).into());
    }
    Ok(n as usize)
}

#[derive(Debug, serde::Serialize)]
struct Row {
    nbuffers: usize,
    policy: &'static str,
    hits: u64,
    misses: u64,
    miss_ratio: f64,
    /// This policy's misses over the optimum's at the same size.
    misses_vs_opt: f64,
}

fn replay_cmd(a: &ReplayArgs) -> Result<()> {
    let (header, records) = read_trace_file(&a.file)?;
    let policies = parse_policies(&a.policies)?;
    let distinct = replay::distinct_pages(&records);
    let sizes = if a.pool_sizes.is_empty() {
        vec![header.nbuffers as usize]
    } else {
        a.pool_sizes
            .iter()
            .map(|s| parse_pool_size(s, u64::from(header.page_size), distinct))
            .collect::<Result<Vec<_>>>()?
    };
    let recorded = replay::recorded(&records, header.nbuffers as usize);
    let rows = replay_rows(&records, &policies, &sizes);
    if a.json {
        let j = serde_json::json!({
            "trace": a.file,
            "recorded": counts_json(&recorded),
            "page_size": header.page_size,
            "distinct_pages": distinct,
            "compulsory_miss_ratio": distinct as f64 / recorded.requests().max(1) as f64,
            "rows": rows,
        });
        println!("{}", serde_json::to_string_pretty(&j)?);
        return Ok(());
    }
    print_table(&a.file, &recorded, distinct, &rows);
    Ok(())
}

/// Replays `records` at each of `sizes`. A pool of more buffers than the trace has
/// distinct pages evicts nothing, whatever the policy, so it is replayed at that many
/// (the same hits and misses; the row keeps the size asked for): the memory a replay
/// takes is bounded by the trace, not by a size in its header or on the command line.
fn replay_rows(records: &[TraceRecord], policies: &[Choice], sizes: &[usize]) -> Vec<Row> {
    let mut rows = Vec::new();
    let distinct = replay::distinct_pages(records).max(1);
    for &n in sizes {
        let at = n.min(usize::try_from(distinct).unwrap_or(usize::MAX));
        let opt = replay::optimal(records, at);
        for &p in policies {
            let c = match p {
                Some(p) => replay::replay(records, p, at),
                None => opt,
            };
            rows.push(Row {
                nbuffers: n,
                policy: p.map_or("opt", |p| p.name()),
                hits: c.hits,
                misses: c.misses,
                miss_ratio: c.miss_ratio(),
                misses_vs_opt: c.misses as f64 / opt.misses.max(1) as f64,
            });
        }
    }
    rows
}

fn counts_json(c: &ReplayCounts) -> serde_json::Value {
    serde_json::json!({
        "nbuffers": c.nbuffers,
        "hits": c.hits,
        "misses": c.misses,
        "probes_missed": c.probes_missed,
        "miss_ratio": c.miss_ratio(),
    })
}

fn print_table(file: &Path, recorded: &ReplayCounts, distinct: u64, rows: &[Row]) {
    println!(
        "trace {}: {} requests, {} distinct pages (compulsory miss ratio {:.4}); \
         recorded by a pool of {} buffers: miss ratio {:.4}",
        file.display(),
        recorded.requests(),
        distinct,
        distinct as f64 / recorded.requests().max(1) as f64,
        recorded.nbuffers,
        recorded.miss_ratio()
    );
    println!(
        "{:>10}  {:<8} {:>12} {:>12} {:>10} {:>8}",
        "buffers", "policy", "hits", "misses", "miss ratio", "vs opt"
    );
    for r in rows {
        println!(
            "{:>10}  {:<8} {:>12} {:>12} {:>10.4} {:>8.3}",
            r.nbuffers, r.policy, r.hits, r.misses, r.miss_ratio, r.misses_vs_opt
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_sizes_in_buffers_bytes_and_shares() {
        assert_eq!(parse_pool_size("1024", 8192, 0).unwrap(), 1024);
        assert_eq!(parse_pool_size("16MB", 8192, 0).unwrap(), 2048);
        assert_eq!(parse_pool_size("25%", 8192, 1000).unwrap(), 250);
        for bad in ["0", "0%", "150%", "x%", "12parsecs"] {
            assert!(parse_pool_size(bad, 8192, 1000).is_err(), "{bad}");
        }
        let all = parse_policies(&["all".into(), "clock".into()]).unwrap();
        assert_eq!(all.last(), Some(&None), "the optimum comes last");
        let e = parse_policies(&["lru".into()]).unwrap_err().to_string();
        assert!(e.contains("clock") && e.contains("opt"), "{e}");
    }

    /// A size beyond the trace's distinct pages replays as that many (nothing is evicted
    /// either way): the same counts, and no pool of the size asked for is allocated.
    #[test]
    fn a_pool_larger_than_the_trace_replays_at_its_distinct_pages() {
        let records: Vec<TraceRecord> = (0..1000u32)
            .map(|i| TraceRecord {
                tag: bufpool::BufferTag::new(
                    bufpool::RelFileId::new(0, 16384),
                    bufpool::ForkNumber::Main,
                    i % 37,
                ),
                flags: 0,
                time_ns: u64::from(i),
            })
            .collect();
        let policies = parse_policies(&["all".into()]).unwrap();
        let at_distinct = replay_rows(&records, &policies, &[37]);
        let huge = replay_rows(&records, &policies, &[1 << 40]);
        for (a, b) in at_distinct.iter().zip(&huge) {
            assert_eq!((a.policy, a.hits, a.misses), (b.policy, b.hits, b.misses));
            assert_eq!(b.nbuffers, 1 << 40, "the row keeps the size asked for");
            assert_eq!(b.misses, 37, "compulsory misses only");
        }
    }
}
