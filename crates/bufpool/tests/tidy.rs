//! Length as a habit: no library function over 100 lines, no bench function over 150,
//! and none of an experiment (`bufpool-bench/src/experiments/`) over 70, where a function
//! is one step (a phase, one configuration's measurement, a table) and the experiment
//! reads as their list (tests excluded). The functions that were longer when this check came in are listed
//! with their length: each may shrink but not grow, and one that drops under the limit
//! must leave the list (the check says so), so the list only ever gets shorter.
//!
//! How functions are found: a line that starts a `fn` item (any indentation, any
//! visibility) opens a body ending at the first line holding only `}` at the same
//! indentation, which is how `cargo fmt` lays items out; a `#[cfg(test)]` line ends the
//! scan of a file (test modules sit at the end).

use std::path::{Path, PathBuf};

const LIB_LIMIT: usize = 100;
const BENCH_LIMIT: usize = 150;
const EXPERIMENT_LIMIT: usize = 70;
/// The folder whose functions are held to [`EXPERIMENT_LIMIT`].
const EXPERIMENTS: &str = "bufpool-bench/src/experiments/";

/// (file under `crates/`, function, its length in lines when listed).
const LONGER_THAN_THE_LIMIT: &[(&str, &str, usize)] = &[];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("tests.rs") {
            // A `tests.rs` is a unit-test module in a file of its own (`#[cfg(test)] mod
            // tests;`): test functions are not held to the length rule.
            out.push(p);
        }
    }
}

/// The name of the function a line starts, if it starts one.
fn fn_name(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    if let Some(r) = rest.strip_prefix("pub") {
        rest = match r.strip_prefix('(') {
            Some(r) => r.split_once(')')?.1,
            None => r,
        }
        .trim_start();
    }
    for kw in ["const ", "unsafe ", "async ", "extern \"C\" "] {
        rest = rest.strip_prefix(kw).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(&name[..end])
}

/// Every function of `text` outside its test module: (name, length in lines).
fn functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim_start().starts_with("#[cfg(test)]")
            || line.trim_start().starts_with("#[cfg(all(test")
        {
            break;
        }
        let Some(name) = fn_name(line) else {
            i += 1;
            continue;
        };
        let indent = &line[..line.len() - line.trim_start().len()];
        // The signature ends with `{` (a body), `;` (a declaration in a trait) or `}` (a
        // body on the same line: nothing to count).
        let mut j = i;
        let ends = |l: &str| l.ends_with('{') || l.ends_with(';') || l.ends_with('}');
        while j < lines.len() && !ends(lines[j]) {
            j += 1;
        }
        if j == lines.len() || !lines[j].ends_with('{') {
            i = j + 1;
            continue;
        }
        let close = format!("{indent}}}");
        let mut k = j + 1;
        while k < lines.len() && lines[k] != close {
            k += 1;
        }
        out.push((name.to_string(), k - i + 1));
        i = k + 1;
    }
    out
}

#[test]
fn no_function_grows_past_its_limit() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut problems = Vec::new();
    let mut listed_seen = vec![false; LONGER_THAN_THE_LIMIT.len()];
    for (krate, limit) in [("bufpool", LIB_LIMIT), ("bufpool-bench", BENCH_LIMIT)] {
        let mut files = Vec::new();
        rust_files(&crates.join(krate).join("src"), &mut files);
        for f in files {
            let rel = f
                .strip_prefix(&crates)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&f).unwrap();
            let limit = if rel.starts_with(EXPERIMENTS) {
                EXPERIMENT_LIMIT
            } else {
                limit
            };
            // Several functions of one name in a file (methods of different types) count
            // as their longest.
            let mut longest: std::collections::BTreeMap<String, usize> = Default::default();
            for (name, len) in functions(&text) {
                let l = longest.entry(name).or_default();
                *l = (*l).max(len);
            }
            for (name, len) in longest {
                let listed = LONGER_THAN_THE_LIMIT
                    .iter()
                    .position(|&(p, n, _)| p == rel && n == name);
                match listed {
                    Some(i) => {
                        listed_seen[i] = true;
                        let was = LONGER_THAN_THE_LIMIT[i].2;
                        if len > was {
                            problems.push(format!(
                                "{rel} {name}: {len} lines, grew from {was} (limit {limit})"
                            ));
                        } else if len <= limit {
                            problems.push(format!(
                                "{rel} {name}: {len} lines, now within the limit of {limit}: \
                                 take it off LONGER_THAN_THE_LIMIT"
                            ));
                        }
                    }
                    None if len > limit => {
                        problems.push(format!("{rel} {name}: {len} lines (limit {limit})"))
                    }
                    None => {}
                }
            }
        }
    }
    for (i, seen) in listed_seen.iter().enumerate() {
        if !seen {
            let (p, n, _) = LONGER_THAN_THE_LIMIT[i];
            problems.push(format!(
                "{p} {n}: listed but not found: take it off the list"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The scanner finds functions of every shape `cargo fmt` leaves, and stops at tests.
#[test]
fn the_scanner_finds_functions_and_their_lengths() {
    let text = "pub fn a() {\n    x();\n}\nimpl T {\n    pub(crate) fn b(\n        y: u8,\n    ) -> u8 {\n        y\n    }\n    fn c(&self);\n}\nconst fn d() {}\n#[cfg(test)]\nfn e() {\n}\n";
    assert_eq!(
        functions(text),
        vec![("a".to_string(), 3), ("b".to_string(), 5)],
        "a one-line `fn d() {{}}` has no body to count; e is in tests"
    );
}
