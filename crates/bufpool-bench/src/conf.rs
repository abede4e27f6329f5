//! The configuration file's syntax (`<dir>/bufpool.conf`): PostgreSQL's postgresql.conf
//! lines, decoded by a pure function over text (standard library only), so that the
//! `conf_file` fuzz target (fuzz/src/lib.rs includes this file) runs exactly this code.
//!
//! The rules (as postgresql.conf's): one setting per line, `name = value` or `name value`;
//! `#` starts a comment anywhere outside a quoted value; blank lines are ignored; a name
//! is letters, digits, `_` and `.`, case-insensitive (kept in lower case); a value is one
//! unquoted word (letters, digits and `_ . - + :` and `/`, as in `16MB`, `0.9`, `-1`,
//! `on`), or quoted in single quotes, where `''` or `\'` is a quote and `\\` a backslash;
//! a later line for the same name wins. `include 'file'` and `include_if_exists 'file'`
//! name another file, read in their place (the caller resolves them: relative to the
//! including file's directory, at most 10 deep: `knobs::apply_config_file`). Also taken, since
//! earlier releases wrote the file as TOML: a value in double quotes with `\"` and `\\`.
//! Not taken (an error naming the line): `include_dir`, anything after the value but a
//! comment, an unterminated quote, a line without a value.
//! Bounds: the caller reads at most [`CONF_BYTES_MAX`]; nothing here allocates more than
//! the text's own size.

/// Most bytes the configuration file may hold (PostgreSQL's are a few tens of kB).
pub const CONF_BYTES_MAX: usize = 1 << 20;

/// One line that says something: a setting, or another file to read in its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Setting(Setting),
    Include {
        path: String,
        /// `include_if_exists`: a missing file is skipped.
        if_exists: bool,
        line: usize,
    },
}

/// One setting: its name (lower case), its value as text, and its line (from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub name: String,
    pub value: String,
    pub line: usize,
}

/// What is wrong with a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfError {
    pub line: usize,
    pub problem: String,
}

impl std::fmt::Display for ConfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.problem)
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.-+:/".contains(c)
}

/// The settings and includes of `text`, in file order (a name may come more than once:
/// the last one wins when they are applied in order).
pub fn items(text: &str) -> Result<Vec<Item>, ConfError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let bad = |problem: String| ConfError { line, problem };
        let rest = raw.trim_start();
        if rest.is_empty() || rest.starts_with('#') {
            continue;
        }
        let name_len = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
        if name_len == 0 {
            let c = rest.chars().next().unwrap_or(' ');
            return Err(bad(format!("expected a setting's name, found {c:?}")));
        }
        let name = rest[..name_len].to_ascii_lowercase();
        if name == "include_dir" {
            return Err(bad(format!("{name} directives are not supported")));
        }
        let mut rest = rest[name_len..].trim_start();
        if let Some(r) = rest.strip_prefix('=') {
            rest = r.trim_start();
        }
        let (value, after) = value(rest).map_err(|p| bad(format!("{name}: {p}")))?;
        let after = after.trim_start();
        if !(after.is_empty() || after.starts_with('#')) {
            return Err(bad(format!(
                "{name}: unexpected {:?} after the value (quote a value with spaces)",
                after.chars().next().unwrap_or(' ')
            )));
        }
        if name == "include" || name == "include_if_exists" {
            if value.is_empty() {
                return Err(bad(format!("{name}: no file named")));
            }
            out.push(Item::Include {
                path: value,
                if_exists: name == "include_if_exists",
                line,
            });
        } else {
            out.push(Item::Setting(Setting { name, value, line }));
        }
    }
    Ok(out)
}

/// A value at the start of `s` and what follows it.
fn value(s: &str) -> Result<(String, &str), String> {
    let mut chars = s.char_indices();
    match chars.next() {
        None => Err("no value".into()),
        Some((_, q @ ('\'' | '"'))) => {
            let mut v = String::new();
            let mut it = s[1..].char_indices().peekable();
            while let Some((j, c)) = it.next() {
                match c {
                    '\\' => match it.next() {
                        Some((_, e @ ('\\' | '\'' | '"'))) => v.push(e),
                        Some((_, 'n')) => v.push('\n'),
                        Some((_, 'r')) => v.push('\r'),
                        Some((_, 't')) => v.push('\t'),
                        Some((_, e)) => {
                            v.push('\\');
                            v.push(e);
                        }
                        None => return Err("unterminated quoted value".into()),
                    },
                    c if c == q => {
                        // postgresql.conf's doubled quote inside single quotes.
                        if q == '\'' && it.peek().is_some_and(|&(_, n)| n == '\'') {
                            it.next();
                            v.push('\'');
                        } else {
                            return Ok((v, &s[1 + j + 1..]));
                        }
                    }
                    c => v.push(c),
                }
            }
            Err("unterminated quoted value".into())
        }
        Some((_, '#')) => Err("no value".into()),
        Some(_) => {
            let end = s.find(|c: char| !is_word_char(c)).unwrap_or(s.len());
            if end == 0 {
                let c = s.chars().next().unwrap_or(' ');
                return Err(format!(
                    "unexpected {c:?} (quote a value with other characters)"
                ));
            }
            Ok((s[..end].to_string(), &s[end..]))
        }
    }
}

/// A setting as a line of the file: `name = 'value'`, quoted and escaped so that
/// [`parse`] gives the value back whatever it holds (a line end in it too).
pub fn line(name: &str, value: &str) -> String {
    let mut out = format!("{name} = '");
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("''"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings of a text without includes.
    fn parse(text: &str) -> Result<Vec<Setting>, ConfError> {
        items(text)?
            .into_iter()
            .map(|i| match i {
                Item::Setting(s) => Ok(s),
                Item::Include { line, .. } => Err(ConfError {
                    line,
                    problem: "an include".into(),
                }),
            })
            .collect()
    }

    fn one(text: &str) -> (String, String) {
        let s = parse(text).unwrap();
        assert_eq!(s.len(), 1, "{s:?}");
        (s[0].name.clone(), s[0].value.clone())
    }

    #[test]
    fn postgresql_conf_lines_and_the_old_toml_lines_parse() {
        let v = |n: &str, v: &str| (n.to_string(), v.to_string());
        assert_eq!(one("shared_buffers = 128MB"), v("shared_buffers", "128MB"));
        assert_eq!(
            one("  Shared_Buffers 128MB  # the pool"),
            v("shared_buffers", "128MB")
        );
        assert_eq!(
            one("checkpoint_completion_target=0.9"),
            v("checkpoint_completion_target", "0.9")
        );
        assert_eq!(one("x = 'it''s a \\'b\\\\' # c"), v("x", "it's a 'b\\"));
        assert_eq!(
            one("wal_sync_method = \"fdatasync\""),
            v("wal_sync_method", "fdatasync")
        );
        assert_eq!(one("a = '#not a comment'"), v("a", "#not a comment"));
        assert!(parse("# only a comment\n\n   \n").unwrap().is_empty());
        let s = parse("a = 1\nb = 2\na = 3").unwrap();
        assert_eq!(
            (s[2].name.as_str(), s[2].value.as_str(), s[2].line),
            ("a", "3", 3)
        );
    }

    #[test]
    fn bad_lines_are_named() {
        for (text, line, says) in [
            ("a = 1\nb =", 2, "no value"),
            ("x = 'open", 1, "unterminated"),
            ("x = 1 2", 1, "after the value"),
            ("= 5", 1, "name"),
            ("include_dir 'conf.d'", 1, "not supported"),
            ("include ''", 1, "no file named"),
            ("x = a b", 1, "after the value"),
            ("x = ;", 1, "unexpected"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.to_string().contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn includes_are_items() {
        let i = items("a = 1\ninclude 'more.conf'\ninclude_if_exists \"/etc/x.conf\"").unwrap();
        assert_eq!(i.len(), 3);
        assert_eq!(
            i[1],
            Item::Include {
                path: "more.conf".into(),
                if_exists: false,
                line: 2
            }
        );
        assert!(matches!(
            &i[2],
            Item::Include {
                if_exists: true,
                ..
            }
        ));
    }

    #[test]
    fn a_written_line_reads_back() {
        for value in [
            "on",
            "it's",
            "a\\b",
            "x'\\'y",
            "with space",
            "",
            "a\nb\r\tc",
        ] {
            assert_eq!(one(&line("k", value)), ("k".to_string(), value.to_string()));
        }
    }
}
