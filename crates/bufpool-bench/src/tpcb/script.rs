//! pgbench script files (`bench -f FILE`) and the built-in scripts run statement by
//! statement (`-r`): a parser for pgbench's script language and an interpreter over the
//! engine.
//!
//! Owns: [`Script`] (the parsed commands, each with its line and text), the `\set`
//! expression language (integers, decimals, `:variables`, `+ - * / %`, parentheses,
//! `random`, `random_zipfian`, `random_exponential`, `random_gaussian`, `abs`, `least`,
//! `greatest`), `\sleep`, and the SQL statements that map to the engine: `BEGIN`, `END` /
//! `COMMIT`, `ROLLBACK`, and the built-in scripts' five statements (the accounts,
//! tellers and branches updates, the balance select, the history insert) with `:variable`
//! or literal arguments. Anything else is refused when the file is read, naming its line.
//! [`ScriptState`]: one client's variables, Zipfian generators and per-statement
//! latencies (`-r`). Running a script on the engine is `script_run.rs`'s; this file knows
//! no engine, so the fuzz target includes it as it is (`fuzz/src/lib.rs`, `script_file`).
//! Invariants: a script is checked whole before the run starts; a transaction still open
//! at the script's end is committed (as pgbench ends the session's work); a statement
//! outside `BEGIN` runs in a transaction of its own.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{bail, Result};
use rand::rngs::SmallRng;
use rand::Rng;
use rand_distr::{Distribution, Zipf};

/// A parsed script.
#[derive(Debug, Clone)]
pub struct Script {
    /// The file name (or the built-in script's), for the summary.
    pub name: String,
    pub commands: Vec<Command>,
}

/// One command of a script, with its line number and its text as written.
#[derive(Debug, Clone)]
pub struct Command {
    pub line: usize,
    pub text: String,
    pub op: Op,
}

#[derive(Debug, Clone)]
pub enum Op {
    Set(String, Expr),
    Sleep(Expr, Duration),
    Begin,
    Commit,
    Rollback,
    UpdateAccounts {
        delta: Arg,
        aid: Arg,
    },
    SelectBalance {
        aid: Arg,
    },
    UpdateTellers {
        delta: Arg,
        tid: Arg,
    },
    UpdateBranches {
        delta: Arg,
        bid: Arg,
    },
    InsertHistory {
        tid: Arg,
        bid: Arg,
        aid: Arg,
        delta: Arg,
    },
}

/// A statement's argument: a variable or a literal integer, or its negation (`abalance
/// - :delta`).
#[derive(Debug, Clone)]
pub enum Arg {
    Var(String),
    Int(i64),
    Neg(Box<Arg>),
}

/// A `\set` expression.
#[derive(Debug, Clone)]
pub enum Expr {
    Int(i64),
    Num(f64),
    Var(String),
    Neg(Box<Expr>),
    Bin(char, Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Int(i64),
    Num(f64),
}

impl Value {
    pub fn int(self) -> Result<i64> {
        match self {
            Value::Int(i) => Ok(i),
            Value::Num(f) if f.is_finite() => Ok(f as i64),
            Value::Num(f) => bail!("{f} is not a number that fits an integer"),
        }
    }

    fn num(self) -> f64 {
        match self {
            Value::Int(i) => i as f64,
            Value::Num(f) => f,
        }
    }
}

/// The SQL the engine runs, normalized (lowercase words, spaces around punctuation),
/// with `{}` where an argument goes. An update's `+` also matches `-` (the delta negated).
const STATEMENTS: [&str; 5] = [
    "update pgbench_accounts set abalance = abalance + {} where aid = {}",
    "select abalance from pgbench_accounts where aid = {}",
    "update pgbench_tellers set tbalance = tbalance + {} where tid = {}",
    "update pgbench_branches set bbalance = bbalance + {} where bid = {}",
    "insert into pgbench_history ( tid , bid , aid , delta , mtime ) values ( {} , {} , {} , {} , current_timestamp )",
];

impl Script {
    /// Parses `text` (the file `name`); the first problem is an error naming its line.
    pub fn parse(name: &str, text: &str) -> Result<Script> {
        let mut commands = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let code = strip_comment(raw).trim();
            if code.is_empty() {
                continue;
            }
            let op = parse_command(code)
                .map_err(|e| anyhow::anyhow!("{name}, line {line}: {e}: {}", raw.trim()))?;
            commands.push(Command {
                line,
                text: code.to_string(),
                op,
            });
        }
        if commands.is_empty() {
            bail!("{name}: no commands");
        }
        Ok(Script {
            name: name.to_string(),
            commands,
        })
    }
}

fn strip_comment(line: &str) -> &str {
    match line.find("--") {
        Some(i) => &line[..i],
        None => line,
    }
}

fn parse_command(code: &str) -> Result<Op, String> {
    if let Some(rest) = code.strip_prefix('\\') {
        let (word, rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        return match word {
            "set" => {
                let (var, expr) = rest
                    .trim()
                    .split_once(char::is_whitespace)
                    .ok_or("\\set needs a variable and an expression")?;
                if !is_name(var) {
                    return Err(format!("invalid variable name {var:?}"));
                }
                Ok(Op::Set(var.to_string(), parse_expr(expr)?))
            }
            "sleep" => {
                let mut parts = rest.split_whitespace();
                let amount = parts.next().ok_or("\\sleep needs an amount")?;
                let unit = match parts.next().unwrap_or("s") {
                    "s" => Duration::from_secs(1),
                    "ms" => Duration::from_millis(1),
                    "us" => Duration::from_micros(1),
                    u => return Err(format!("\\sleep unit {u:?} (s, ms or us)")),
                };
                Ok(Op::Sleep(parse_expr(amount)?, unit))
            }
            w => Err(format!(
                "meta-command \\{w} is not supported (\\set, \\sleep)"
            )),
        };
    }
    let norm = normalize(code.trim_end_matches(';'));
    match norm.as_str() {
        "begin" | "begin transaction" | "start transaction" => return Ok(Op::Begin),
        "end" | "commit" | "end transaction" | "commit transaction" => return Ok(Op::Commit),
        "rollback" | "abort" => return Ok(Op::Rollback),
        _ => {}
    }
    for (i, template) in STATEMENTS.iter().enumerate() {
        if let Some((args, minus)) = match_template(template, &norm)? {
            let a = |k: usize| args[k].clone();
            // `abalance - :d`: the delta (the update's first argument) negated.
            let delta = if minus {
                Arg::Neg(Box::new(a(0)))
            } else {
                a(0)
            };
            return Ok(match i {
                0 => Op::UpdateAccounts { delta, aid: a(1) },
                1 => Op::SelectBalance { aid: a(0) },
                2 => Op::UpdateTellers { delta, tid: a(1) },
                3 => Op::UpdateBranches { delta, bid: a(1) },
                _ => Op::InsertHistory {
                    tid: a(0),
                    bid: a(1),
                    aid: a(2),
                    delta: a(3),
                },
            });
        }
    }
    Err("statement not supported (the built-in scripts' statements, BEGIN, END, ROLLBACK)".into())
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// Lowercase outside `:variables`, spaces around `( ) , = +`, single spaces.
fn normalize(sql: &str) -> String {
    let mut out = String::new();
    let mut in_var = false;
    for c in sql.chars() {
        if c == ':' {
            in_var = true;
            out.push(c);
            continue;
        }
        if in_var && !(c.is_ascii_alphanumeric() || c == '_') {
            in_var = false;
        }
        if "(),=+".contains(c) {
            out.push(' ');
            out.push(c);
            out.push(' ');
        } else if in_var {
            out.push(c);
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `norm` against `template`: the arguments where it has `{}`, and whether a `+` of the
/// template was a `-` of the statement; None if it differs.
fn match_template(template: &str, norm: &str) -> Result<Option<(Vec<Arg>, bool)>, String> {
    let (t, n): (Vec<&str>, Vec<&str>) = (template.split(' ').collect(), norm.split(' ').collect());
    if t.len() != n.len() {
        return Ok(None);
    }
    let mut args = Vec::new();
    let mut minus = false;
    for (tw, nw) in t.iter().zip(&n) {
        if *tw == "+" && *nw == "-" {
            minus = true;
            continue;
        }
        if *tw == "{}" {
            args.push(if let Some(v) = nw.strip_prefix(':') {
                if !is_name(v) {
                    return Err(format!("invalid variable {nw:?}"));
                }
                Arg::Var(v.to_string())
            } else if let Ok(i) = nw.parse::<i64>() {
                Arg::Int(i)
            } else {
                return Ok(None);
            });
        } else if tw != nw {
            return Ok(None);
        }
    }
    Ok(Some((args, minus)))
}

/// Most tokens in one expression, and most nested parentheses or calls: bounds on the
/// parser's and the evaluator's recursion, whatever a file holds.
const EXPR_TOKENS_MAX: usize = 1000;
const EXPR_DEPTH_MAX: usize = 64;

/// A `\set` expression: precedence climbing over `+ -` and `* / %`.
pub fn parse_expr(text: &str) -> Result<Expr, String> {
    let tokens = tokenize(text)?;
    if tokens.len() > EXPR_TOKENS_MAX {
        return Err(format!(
            "an expression of more than {EXPR_TOKENS_MAX} tokens"
        ));
    }
    let mut p = Parser {
        tokens,
        at: 0,
        depth: 0,
    };
    let e = p.sum()?;
    if p.at != p.tokens.len() {
        return Err(format!("unexpected {:?} in the expression", p.tokens[p.at]));
    }
    Ok(e)
}

fn tokenize(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let cs: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
        } else if "+-*/%(),".contains(c) {
            out.push(c.to_string());
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == ':' || c == '_' || c == '.' {
            let start = i;
            i += 1;
            while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '_' || cs[i] == '.') {
                i += 1;
            }
            out.push(cs[start..i].iter().collect());
        } else {
            return Err(format!("unexpected character {c:?} in the expression"));
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<String>,
    at: usize,
    /// Parentheses and calls open now.
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }

    fn next(&mut self) -> Result<String, String> {
        let t = self
            .tokens
            .get(self.at)
            .cloned()
            .ok_or("the expression ends early")?;
        self.at += 1;
        Ok(t)
    }

    fn sum(&mut self) -> Result<Expr, String> {
        let mut e = self.product()?;
        while let Some(op @ ("+" | "-")) = self.peek() {
            let op = op.chars().next().expect("one char");
            self.at += 1;
            e = Expr::Bin(op, Box::new(e), Box::new(self.product()?));
        }
        Ok(e)
    }

    fn product(&mut self) -> Result<Expr, String> {
        let mut e = self.unary()?;
        while let Some(op @ ("*" | "/" | "%")) = self.peek() {
            let op = op.chars().next().expect("one char");
            self.at += 1;
            e = Expr::Bin(op, Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        self.depth += 1;
        let e = self.unary_inner();
        self.depth -= 1;
        e
    }

    fn unary_inner(&mut self) -> Result<Expr, String> {
        if self.depth > EXPR_DEPTH_MAX {
            return Err(format!(
                "an expression nested more than {EXPR_DEPTH_MAX} deep"
            ));
        }
        if self.peek() == Some("-") {
            self.at += 1;
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        let t = self.next()?;
        if t == "(" {
            let e = self.sum()?;
            return match self.next()?.as_str() {
                ")" => Ok(e),
                other => Err(format!("expected ')', found {other:?}")),
            };
        }
        if let Some(v) = t.strip_prefix(':') {
            return if is_name(v) {
                Ok(Expr::Var(v.to_string()))
            } else {
                Err(format!("invalid variable {t:?}"))
            };
        }
        if let Ok(i) = t.parse::<i64>() {
            return Ok(Expr::Int(i));
        }
        if let Ok(f) = t.parse::<f64>() {
            return Ok(Expr::Num(f));
        }
        if is_name(&t) && self.peek() == Some("(") {
            self.at += 1;
            let mut args = Vec::new();
            if self.peek() != Some(")") {
                loop {
                    args.push(self.sum()?);
                    match self.next()?.as_str() {
                        "," => continue,
                        ")" => break,
                        other => return Err(format!("expected ',' or ')', found {other:?}")),
                    }
                }
            } else {
                self.at += 1;
            }
            let arity = match t.as_str() {
                "random" | "random_uniform" => 2..=2,
                "random_zipfian" | "random_exponential" | "random_gaussian" => 3..=3,
                "abs" => 1..=1,
                "least" | "greatest" => 1..=usize::MAX,
                f => return Err(format!("function {f}() is not supported")),
            };
            if !arity.contains(&args.len()) {
                return Err(format!(
                    "{t}() takes {arity:?} arguments, not {}",
                    args.len()
                ));
            }
            return Ok(Expr::Call(t, args));
        }
        Err(format!("unexpected {t:?} in the expression"))
    }
}

/// One statement's figures for `-r`.
#[derive(Debug, Clone, Copy, Default)]
pub struct StatementStat {
    pub count: u64,
    pub sum_us: f64,
    pub failures: u64,
}

/// One client's interpreter state: variables (kept across transactions, as pgbench's),
/// Zipfian generators by range and exponent, per-statement figures.
pub struct ScriptState {
    pub(crate) vars: HashMap<String, Value>,
    zipf: HashMap<(i64, u64), Zipf<f64>>,
    pub stats: Vec<StatementStat>,
}

impl ScriptState {
    pub fn new(script: &Script, scale: u32, client: u32, seed: u64) -> ScriptState {
        let vars = [
            ("scale", Value::Int(i64::from(scale))),
            ("client_id", Value::Int(i64::from(client))),
            ("random_seed", Value::Int(seed as i64)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        ScriptState {
            vars,
            zipf: HashMap::new(),
            stats: vec![StatementStat::default(); script.commands.len()],
        }
    }

    /// Evaluates `e` with this client's variables; errors name what went wrong.
    pub fn eval(&mut self, e: &Expr, rng: &mut SmallRng) -> Result<Value> {
        Ok(match e {
            Expr::Int(i) => Value::Int(*i),
            Expr::Num(f) => Value::Num(*f),
            Expr::Var(v) => *self
                .vars
                .get(v)
                .ok_or_else(|| anyhow::anyhow!("variable :{v} is not set"))?,
            Expr::Neg(a) => match self.eval(a, rng)? {
                Value::Int(i) => {
                    Value::Int(i.checked_neg().ok_or_else(|| anyhow::anyhow!("overflow"))?)
                }
                Value::Num(f) => Value::Num(-f),
            },
            Expr::Bin(op, a, b) => {
                let (a, b) = (self.eval(a, rng)?, self.eval(b, rng)?);
                match (a, b) {
                    (Value::Int(x), Value::Int(y)) => Value::Int(
                        match op {
                            '+' => x.checked_add(y),
                            '-' => x.checked_sub(y),
                            '*' => x.checked_mul(y),
                            '/' if y == 0 => bail!("division by zero"),
                            '/' => x.checked_div(y),
                            '%' if y == 0 => bail!("division by zero"),
                            _ => x.checked_rem(y),
                        }
                        .ok_or_else(|| anyhow::anyhow!("integer overflow in {x} {op} {y}"))?,
                    ),
                    (x, y) => {
                        let (x, y) = (x.num(), y.num());
                        Value::Num(match op {
                            '+' => x + y,
                            '-' => x - y,
                            '*' => x * y,
                            '/' => x / y,
                            _ => x % y,
                        })
                    }
                }
            }
            Expr::Call(f, args) => {
                let mut v = Vec::with_capacity(args.len());
                for a in args {
                    v.push(self.eval(a, rng)?);
                }
                self.call(f, &v, rng)?
            }
        })
    }

    fn call(&mut self, f: &str, v: &[Value], rng: &mut SmallRng) -> Result<Value> {
        Ok(match f {
            "abs" => match v[0] {
                Value::Int(i) => Value::Int(i.abs()),
                Value::Num(x) => Value::Num(x.abs()),
            },
            "least" | "greatest" => {
                let pick = |a: f64, b: f64| if f == "least" { a.min(b) } else { a.max(b) };
                if v.iter().all(|x| matches!(x, Value::Int(_))) {
                    let ints = v.iter().map(|x| x.int()).collect::<Result<Vec<_>>>()?;
                    let r = if f == "least" {
                        ints.iter().min()
                    } else {
                        ints.iter().max()
                    };
                    Value::Int(*r.expect("at least one argument"))
                } else {
                    Value::Num(v.iter().map(|x| x.num()).fold(v[0].num(), pick))
                }
            }
            _ => {
                let (lo, hi) = (v[0].int()?, v[1].int()?);
                if lo > hi {
                    bail!("{f}({lo}, {hi}): the range is empty");
                }
                let n = (hi - lo) as u64 + 1;
                let offset = match f {
                    "random" | "random_uniform" => rng.random_range(0..n),
                    "random_zipfian" => {
                        let s = v[2].num();
                        if !(s > 0.0 && s.is_finite()) || s == 1.0 {
                            bail!("random_zipfian: parameter {s} (above 0, not 1)");
                        }
                        let z = match self.zipf.entry((lo, s.to_bits() ^ n)) {
                            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                            std::collections::hash_map::Entry::Vacant(e) => e.insert(
                                Zipf::new(n as f64, s).map_err(|e| anyhow::anyhow!("{e}"))?,
                            ),
                        };
                        (z.sample(rng) as u64).clamp(1, n) - 1
                    }
                    "random_exponential" => {
                        let p = v[2].num();
                        if p <= 0.0 {
                            bail!("random_exponential: parameter {p} (above 0)");
                        }
                        // Inverse transform of an exponential cut at the range's end.
                        let cut = (-p).exp();
                        let u: f64 = 1.0 - rng.random::<f64>();
                        let r = -(cut + (1.0 - cut) * u).ln() / p;
                        ((n as f64 * r) as u64).min(n - 1)
                    }
                    _ => {
                        // random_gaussian: a normal cut at +-p standard deviations.
                        let p = v[2].num();
                        if p < 2.0 {
                            bail!("random_gaussian: parameter {p} (at least 2)");
                        }
                        let z = loop {
                            let (a, b): (f64, f64) = (rng.random(), rng.random());
                            let z =
                                (-2.0 * (1.0 - a).ln()).sqrt() * (std::f64::consts::TAU * b).cos();
                            if z.abs() < p {
                                break z;
                            }
                        };
                        ((n as f64 * (z + p) / (2.0 * p)) as u64).min(n - 1)
                    }
                };
                Value::Int(lo + offset as i64)
            }
        })
    }

    /// A statement's argument's value.
    pub fn arg(&self, a: &Arg) -> Result<i64> {
        match a {
            Arg::Int(i) => Ok(*i),
            Arg::Neg(a) => self
                .arg(a)?
                .checked_neg()
                .ok_or_else(|| anyhow::anyhow!("overflow negating an argument")),
            Arg::Var(v) => self
                .vars
                .get(v)
                .ok_or_else(|| anyhow::anyhow!("variable :{v} is not set"))?
                .int(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_builtin_scripts_parse_and_others_are_refused_by_line() {
        // The built-in scripts' texts parse (`builtins::builtin_script_text`, tested
        // through `-r` in `edges.rs`); this file is also included by the fuzz crate, so
        // its tests name nothing outside it.
        let tpcb =
            "\\set aid random(1, 100000 * :scale)\n\\set delta random(-5000, 5000)\nBEGIN;\n\
                    UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;\n\
                    INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, \
                    :aid, :delta, CURRENT_TIMESTAMP);\nEND;\n";
        assert_eq!(Script::parse("tpcb", tpcb).unwrap().commands.len(), 6);
        let s = Script::parse(
            "f",
            "\\set aid random(1, 100000 * :scale)\nselect   ABALANCE from pgbench_accounts where aid=:aid;\n",
        )
        .unwrap();
        assert!(matches!(s.commands[1].op, Op::SelectBalance { .. }));
        let s = Script::parse(
            "f",
            "UPDATE pgbench_tellers SET tbalance = tbalance - 5 WHERE tid = :t;",
        )
        .unwrap();
        assert!(matches!(
            &s.commands[0].op,
            Op::UpdateTellers { delta: Arg::Neg(d), .. } if matches!(**d, Arg::Int(5))
        ));
        for (text, says) in [
            ("\\set x foo(1)", "line 1: function foo() is not supported"),
            (
                "BEGIN;\nDELETE FROM pgbench_accounts;",
                "line 2: statement not supported",
            ),
            ("\\shell ls", "line 1: meta-command \\shell"),
            ("\\set x random(1)", "line 1: random() takes"),
            ("", "no commands"),
            (
                &format!("\\set x {}1{}", "(".repeat(100), ")".repeat(100)),
                "nested more than",
            ),
            (
                &format!("\\set x 1{}", " + 1".repeat(600)),
                "more than 1000 tokens",
            ),
        ] {
            let e = Script::parse("f", text).unwrap_err().to_string();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn expressions_evaluate_as_pgbenchs() {
        let s = Script::parse("f", "\\set a 1").unwrap();
        let mut st = ScriptState::new(&s, 10, 3, 7);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut eval = |t: &str| st.eval(&parse_expr(t).unwrap(), &mut rng).unwrap();
        assert_eq!(eval("1 + 2 * 3 - -4"), Value::Int(11));
        assert_eq!(eval("(1 + 2) * :scale % 7"), Value::Int(2));
        assert_eq!(eval("100000 * :scale"), Value::Int(1_000_000));
        assert_eq!(
            eval("abs(-5) + least(3, 1, 2) + greatest(1, 9)"),
            Value::Int(15)
        );
        assert_eq!(eval(":client_id"), Value::Int(3));
        for f in [
            "random(1, 10)",
            "random_zipfian(1, 10, 1.5)",
            "random_exponential(1, 10, 2.0)",
            "random_gaussian(1, 10, 2.5)",
        ] {
            for _ in 0..200 {
                let v = eval(f);
                assert!(
                    matches!(v, Value::Int(i) if (1..=10).contains(&i)),
                    "{f}: {v:?}"
                );
            }
        }
        let e = st.eval(
            &parse_expr("1 / 0").unwrap(),
            &mut SmallRng::seed_from_u64(1),
        );
        assert!(e.is_err());
    }
}
