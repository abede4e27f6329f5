//! The layering check: no module of the library imports a module of a higher layer, and
//! peers on one layer do not import each other.
//!
//! Proves: the layer list in docs/ARCHITECTURE.md (the source; this test reads it) is true
//! of the code. How: every `crate::NAME` path in each module's non-test, non-comment code
//! (`#[cfg(test)]` at the start of a line ends a file's checked part, by the convention
//! that test modules sit at the bottom) names the module it reaches; that module must sit
//! on a lower line of the list. `crate::{a, b::c}` groups count each name. A module that
//! the list does not mention fails the test too, so a new module must be placed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Module name → layer index (0 = top), read from ARCHITECTURE.md's "## Layers" block.
fn layers(doc: &str) -> HashMap<String, usize> {
    let start = doc
        .find("## Layers")
        .expect("ARCHITECTURE.md has a Layers section");
    let block = &doc[start..];
    let open = block
        .find("```\n")
        .expect("the Layers section has a code block")
        + 4;
    let close = open + block[open..].find("```").expect("the code block ends");
    let mut out = HashMap::new();
    let mut level = 0;
    let mut in_library = false;
    for line in block[open..close].lines() {
        if line.contains("crate boundary") {
            in_library = true;
            continue;
        }
        // A line that starts with a space continues the previous line's description.
        if !in_library || line.trim().is_empty() || line.starts_with(' ') {
            continue;
        }
        // "name, name   description": names before the first run of two spaces.
        let names = line.split("  ").next().unwrap_or("");
        for name in names.split(',') {
            out.insert(name.trim().to_string(), level);
        }
        level += 1;
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("tests.rs") {
            // A `tests.rs` is a unit-test module in a file of its own: tests may reach
            // any layer, as the `#[cfg(test)]` part of a file may.
            out.push(p);
        }
    }
}

/// The first path segment of every `crate::` path in `code`.
fn crate_refs(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            let (mut d, mut item) = (0, String::new());
            for c in group[..end].chars().chain([',']) {
                match c {
                    '{' => d += 1,
                    '}' => d -= 1,
                    ',' if d == 0 => {
                        out.push(head(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
        } else {
            out.push(head(rest));
        }
    }
    out.retain(|s| !s.is_empty() && s != "self");
    out
}

fn head(path: &str) -> String {
    path.trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

#[test]
fn no_module_imports_a_higher_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../../docs/ARCHITECTURE.md")).unwrap();
    let layer = layers(&doc);
    assert!(
        layer.len() > 10,
        "too few layers parsed from ARCHITECTURE.md: {layer:?}"
    );
    let src = root.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut problems = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let module = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if module == "lib" {
            continue; // the crate root re-exports every layer
        }
        let Some(&own) = layer.get(&module) else {
            problems.push(format!(
                "{}: module `{module}` is not in ARCHITECTURE.md's layer list",
                rel.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.starts_with("#[cfg(test)]") {
                break;
            }
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for target in crate_refs(code) {
                if target == module {
                    continue;
                }
                match layer.get(&target) {
                    Some(&t) if t > own => {}
                    Some(&t) => problems.push(format!(
                        "{}:{}: `{module}` (layer {own}) reaches `{target}` (layer {t}): {}",
                        rel.display(),
                        n + 1,
                        if t == own { "a peer" } else { "a higher layer" }
                    )),
                    None => problems.push(format!(
                        "{}:{}: `crate::{target}` is not in ARCHITECTURE.md's layer list",
                        rel.display(),
                        n + 1
                    )),
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "layering violations:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_sees_grouped_and_nested_paths() {
    assert_eq!(
        crate_refs("use crate::{buffer::{A, B}, wal, self};"),
        vec!["buffer", "wal"]
    );
    assert_eq!(
        crate_refs("let x = crate::config::Config::default(); crate::vfs::X"),
        vec!["config", "vfs"]
    );
    let doc = "## Layers\n\n```\nbench  x\n──── crate boundary ────\na, b   top\n       more\nc      bottom\n```\n";
    let l = layers(doc);
    assert_eq!((l["a"], l["b"], l["c"]), (0, 0, 1));
    assert!(!l.contains_key("bench"));
}
