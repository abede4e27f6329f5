//! `bench`'s script flags as pgbench takes them: `-b NAME[@W]` (a built-in script by its
//! name or a unique prefix, `list` for the names), `-f FILE[@W]`, and the shorthands `-S`
//! and `-N`; each repeatable, mixed in command-line order, each with its weight; and the
//! scripts they name, read and parsed before the run.
//!
//! Invariants: the scripts keep the command line's order across the four flags (each
//! value parser stamps a counter, since clap keeps one list per flag); a weight is a whole
//! number from 0 to 2^31-1 (pgbench's checks and wording); none given is tpcb-like; a file
//! is read up to 1 MiB and refused whole, naming its line, if anything in it is not a
//! statement the engine runs.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::knobs::KnobError;
use crate::tpcb;
use crate::tpcb::builtins::{builtin_script_text, Mode};
use crate::tpcb::mix::WeightedScript;
use crate::tpcb::script::Script;

/// pgbench's script flags, each repeatable and in any mix: each transaction runs one of
/// the scripts given, picked with probability weight / (the weights' sum) as pgbench picks
/// it; none given: tpcb-like. [`ScriptFlags::in_order`] gives them in command-line order.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ScriptFlags {
    /// Built-in script, as pgbench takes it: its name or a unique prefix of it (`tpcb`),
    /// with an optional weight (`@W`, 0 to 2147483647, default 1), `list` for the names.
    /// Repeatable, and with -f, -S, -N: each transaction runs one of the scripts given,
    /// picked with probability weight / (the weights' sum). None given: tpcb-like.
    #[arg(
        short = 'b',
        long = "builtin",
        value_name = "BUILTIN[@W]",
        value_parser = parse_builtin_arg
    )]
    pub builtins: Vec<ScriptArg>,
    /// pgbench's -S: the select-only built-in script (`-b select-only`).
    #[arg(short = 'S', long = "select-only", num_args = 0, action = clap::ArgAction::Append,
          default_missing_value = "select-only", value_parser = parse_builtin_arg)]
    pub select_only: Vec<ScriptArg>,
    /// pgbench's -N: skip the updates of tellers and branches, the simple-update built-in
    /// script (`-b simple-update`).
    #[arg(short = 'N', long = "skip-some-updates", num_args = 0, action = clap::ArgAction::Append,
          default_missing_value = "simple-update", value_parser = parse_builtin_arg)]
    pub skip_some_updates: Vec<ScriptArg>,
    /// pgbench's -f: runs the script in FILENAME, with an optional weight (`@W`, as -b's);
    /// repeatable, and with -b, -S, -N. Its statements must be ones the engine runs:
    /// `\\set` (with random, random_zipfian, random_exponential, random_gaussian),
    /// `\\sleep`, BEGIN, END, ROLLBACK and the built-in scripts' statements; anything else
    /// is refused before the run, naming its line.
    #[arg(short = 'f', long = "file", value_name = "FILENAME[@W]", value_parser = parse_file_arg)]
    pub files: Vec<ScriptArg>,
}

/// One script of the command line (`-b`, `-f`, `-S`, `-N`): what it names, its weight,
/// and its place among the others (pgbench numbers the scripts in command-line order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptArg {
    /// When clap parsed it ([`SCRIPT_ARG_SEQ`]): the order of the command line across the
    /// four flags, which clap keeps in four lists.
    pub seq: u64,
    pub source: ScriptSource,
    pub weight: u32,
}

/// What a [`ScriptArg`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptSource {
    Builtin(Mode),
    File(String),
}

/// Counts the script flags parsed: clap parses a command line from left to right, calling
/// the value parser at each flag, so the numbers give the flags' order.
static SCRIPT_ARG_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn next_script_seq() -> u64 {
    SCRIPT_ARG_SEQ.fetch_add(1, Ordering::Relaxed)
}

/// `NAME[@WEIGHT]` split as pgbench's parseScriptWeight splits it: at the last `@`; the
/// weight a whole number from 0 to 2147483647 (1 without `@`). `flag` names the option
/// in errors.
fn split_weight<'t>(text: &'t str, flag: &str) -> std::result::Result<(&'t str, u32), String> {
    let Some((name, w)) = text.rsplit_once('@') else {
        return Ok((text, 1));
    };
    let range = format!("0 .. {}", tpcb::mix::WEIGHT_MAX);
    let digits = w.strip_prefix(['+', '-']).unwrap_or(w);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{flag} {text}: invalid weight specification: @{w} (a whole number, {range})"
        ));
    }
    match w.parse::<i64>() {
        Ok(n) if (0..=i64::from(tpcb::mix::WEIGHT_MAX)).contains(&n) => Ok((name, n as u32)),
        _ => Err(format!(
            "{flag} {text}: weight specification out of range ({range}): {w}"
        )),
    }
}

/// `-b NAME[@WEIGHT]` (and `-S`, `-N`): a built-in script and its weight.
fn parse_builtin_arg(text: &str) -> std::result::Result<ScriptArg, String> {
    let (name, weight) = split_weight(text, "-b")?;
    Ok(ScriptArg {
        seq: next_script_seq(),
        source: ScriptSource::Builtin(parse_builtin(name)?),
        weight,
    })
}

/// `-f FILENAME[@WEIGHT]`: a script file and its weight (the file is read before the run).
fn parse_file_arg(text: &str) -> std::result::Result<ScriptArg, String> {
    let (path, weight) = split_weight(text, "-f")?;
    if path.is_empty() {
        return Err(format!("-f {text}: no file name"));
    }
    Ok(ScriptArg {
        seq: next_script_seq(),
        source: ScriptSource::File(path.to_string()),
        weight,
    })
}

/// A built-in script by its name or a unique prefix (pgbench's rule); an `@WEIGHT` after
/// it is ignored (`--show-script`).
pub(super) fn parse_builtin(text: &str) -> std::result::Result<Mode, String> {
    use clap::ValueEnum as _;
    let name = text.split_once('@').map_or(text, |(n, _)| n);
    let names: Vec<&str> = Mode::value_variants().iter().map(|m| m.name()).collect();
    let list = format!("available built-in scripts: {}", names.join(", "));
    if name == "list" {
        return Err(list);
    }
    let hits: Vec<Mode> = Mode::value_variants()
        .iter()
        .copied()
        .filter(|m| m.name() == name)
        .chain(
            Mode::value_variants()
                .iter()
                .copied()
                .filter(|m| m.name() != name && m.name().starts_with(name)),
        )
        .collect();
    match hits.as_slice() {
        [m, ..] if m.name() == name => Ok(*m),
        [m] if !name.is_empty() => Ok(*m),
        [] | [_] => Err(format!("no built-in script {name:?}; {list}")),
        _ => Err(format!(
            "ambiguous built-in script {name:?}: {}",
            hits.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
        )),
    }
}

impl ScriptFlags {
    /// Whether no script flag was given (the run's default script then depends on the
    /// database: tpcb-like, or ycsb-a on a YCSB database).
    pub fn none_given(&self) -> bool {
        self.builtins.is_empty()
            && self.select_only.is_empty()
            && self.skip_some_updates.is_empty()
            && self.files.is_empty()
    }

    /// The scripts of the command line in its order (`-b`, `-f`, and pgbench's shorthands
    /// `-S` and `-N` for `-b select-only` and `-b simple-update`); none: tpcb-like.
    pub fn in_order(&self) -> Vec<ScriptArg> {
        let mut all: Vec<ScriptArg> = [
            &self.builtins,
            &self.files,
            &self.select_only,
            &self.skip_some_updates,
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
        all.sort_by_key(|s| s.seq);
        if all.is_empty() {
            all.push(ScriptArg {
                seq: 0,
                source: ScriptSource::Builtin(Mode::TpcbLike),
                weight: 1,
            });
        }
        all
    }
}

/// pgbench's `bench -b list` (or `--builtin list`, `--builtin=list`, `-blist`) in
/// `args`: the built-in scripts' names, one per line, as pgbench lists them.
pub fn builtin_list(args: impl Iterator<Item = String>) -> Option<String> {
    use clap::ValueEnum as _;
    let args: Vec<String> = args.collect();
    if args.get(1).map(String::as_str) != Some("bench") {
        return None;
    }
    let asks = args
        .windows(2)
        .any(|w| matches!(w[0].as_str(), "-b" | "--builtin") && w[1] == "list")
        || args.iter().any(|a| a == "--builtin=list" || a == "-blist");
    asks.then(|| {
        let mut out = String::from("Available builtin scripts:");
        for m in Mode::value_variants() {
            out.push_str("\n  ");
            out.push_str(m.name());
        }
        out
    })
}

/// The scripts the clients run, in the command line's order, each with its weight: a
/// file (`-f`, parsed), or a built-in (engine calls; for `-r`, tpcb-like, simple-update
/// and select-only are run from their text so their statements are timed one by one).
/// `per_command` is `-r`. Errors: a file that cannot be read or parsed, total weight 0
/// (exit status 2).
pub(super) fn bench_scripts(flags: &ScriptFlags, per_command: bool) -> Result<Vec<WeightedScript>> {
    let mut out = Vec::new();
    for arg in flags.in_order() {
        out.push(match arg.source {
            ScriptSource::File(path) => WeightedScript::file(read_script_file(&path)?, arg.weight),
            ScriptSource::Builtin(Mode::Tpcc) => {
                out.extend(tpcc_mix(arg.weight));
                continue;
            }
            ScriptSource::Builtin(mode) => {
                let interpreted = per_command
                    && matches!(mode, Mode::TpcbLike | Mode::SimpleUpdate | Mode::SelectOnly);
                let script = interpreted
                    .then(|| Script::parse(mode.name(), builtin_script_text(mode)))
                    .transpose()?
                    .map(Arc::new);
                WeightedScript::builtin(mode, arg.weight, script)
            }
        });
    }
    if out.iter().all(|s| s.weight == 0) {
        return Err(KnobError("total script weight must not be zero".into()).into());
    }
    Ok(out)
}

/// TPC-C's mix (`-b tpcc`) as its five scripts, each weighted by its share times
/// `weight`.
pub(crate) fn tpcc_mix(weight: u32) -> Vec<WeightedScript> {
    crate::tpcc::inputs::Kind::ALL
        .iter()
        .map(|&k| {
            WeightedScript::builtin(
                crate::tpcc::run::mode_of(k),
                k.percent().saturating_mul(weight),
                None,
            )
        })
        .collect()
}

/// A pgbench script file, read (at most 1 MiB) and parsed; a problem names the file and
/// line (exit status 2).
fn read_script_file(path: &str) -> Result<Script> {
    /// Longest script file read (a bound, whatever the file holds).
    const SCRIPT_MAX: u64 = 1 << 20;
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(
            std::fs::File::open(path).with_context(|| format!("opening script {path}"))?,
            SCRIPT_MAX + 1,
        ),
        &mut text,
    )
    .with_context(|| format!("reading script {path} (text, UTF-8)"))?;
    if text.len() as u64 > SCRIPT_MAX {
        return Err(KnobError(format!("script {path} is over {SCRIPT_MAX} bytes")).into());
    }
    Ok(Script::parse(path, &text).map_err(|e| KnobError(e.to_string()))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: `-b`, `-f`, `-S` and `-N` keep the command line's order across the four
    /// flags (pgbench numbers its scripts so), each with its weight (1 without `@`, the
    /// last `@` splitting a file's name as pgbench splits it); none given is tpcb-like; a
    /// weight that is empty, not a number or outside 0..=2^31-1 is refused, naming the
    /// flag and the range.
    #[test]
    fn script_flags_keep_their_order_and_weights() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            scripts: ScriptFlags,
        }
        let parse = |args: &[&str]| {
            let words = std::iter::once("bench").chain(args.iter().copied());
            <Cli as clap::Parser>::try_parse_from(words).map(|c| c.scripts.in_order())
        };
        let got = parse(&["-N", "-f", "x@y.sql@2", "-b", "sel@0", "-S", "-b", "tpcb"]).unwrap();
        let got: Vec<(ScriptSource, u32)> = got.into_iter().map(|s| (s.source, s.weight)).collect();
        use ScriptSource::{Builtin, File};
        assert_eq!(
            got,
            [
                (Builtin(Mode::SimpleUpdate), 1),
                (File("x@y.sql".into()), 2),
                (Builtin(Mode::SelectOnly), 0),
                (Builtin(Mode::SelectOnly), 1),
                (Builtin(Mode::TpcbLike), 1),
            ]
        );
        let none = parse(&[]).unwrap();
        assert_eq!(
            (&none[0].source, none[0].weight),
            (&Builtin(Mode::TpcbLike), 1)
        );
        assert_eq!(
            parse(&["-b", "tpcb@2147483647"]).unwrap()[0].weight,
            i32::MAX as u32
        );
        for (flag, value, says) in [
            (
                "-b",
                "tpcb@",
                "-b tpcb@: invalid weight specification: @ (a whole number, 0 .. 2147483647)",
            ),
            ("-b", "tpcb@1x", "invalid weight specification: @1x"),
            ("-f", "a.sql@", "-f a.sql@: invalid weight specification"),
            (
                "-b",
                "tpcb@2147483648",
                "out of range (0 .. 2147483647): 2147483648",
            ),
            (
                "-f",
                "a.sql@-1",
                "-f a.sql@-1: weight specification out of range",
            ),
        ] {
            let e = parse(&[flag, value]).expect_err(value).to_string();
            assert!(e.contains(says), "{value}: {e}");
        }
    }
}
