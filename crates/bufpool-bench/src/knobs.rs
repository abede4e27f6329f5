//! Knobs as the commands take them: `--set NAME=VALUE`, the data directory's configuration
//! file (`bufpool.conf`: postgresql.conf syntax through `conf.rs`, with `include` and
//! `include_if_exists`; written by `init`), the configuration in effect with each knob's
//! source, and [`KnobError`], the error of a bad knob or flag.
//!
//! Invariants: the precedence is default < file < `--set`; rules between knobs are checked
//! once all are in; a knob error is one line and exit status 2 (`main`), and a command
//! that meets one has written nothing. A leaf: it imports no other module of the bench
//! but `conf.rs`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use bufpool::config::KNOBS;
use bufpool::{Config, ConfigError};

pub const CONFIG_FILE: &str = "bufpool.conf";

/// A knob error: printed as one line, exit status 2.
#[derive(Debug)]
pub struct KnobError(pub String);

impl std::fmt::Display for KnobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KnobError {}

pub(crate) fn knob_error(e: ConfigError) -> anyhow::Error {
    KnobError(e.to_string()).into()
}

/// Where each knob's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Default,
    File,
    CommandLine,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::File => "configuration file",
            Source::CommandLine => "command line",
        }
    }
}

/// Parses `name=value`.
pub fn parse_set(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected name=value, got {s:?}"))?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

/// The configuration in effect: defaults, then `<dir>/bufpool.conf`, then `sets`.
pub fn load_config(
    dir: &Path,
    sets: &[(String, String)],
) -> Result<(Config, BTreeMap<String, Source>)> {
    let mut c = Config::default();
    let mut sources: BTreeMap<String, Source> = KNOBS
        .iter()
        .map(|k| (k.name.to_string(), Source::Default))
        .collect();
    apply_config_file(&dir.join(CONFIG_FILE), false, 0, &mut c, &mut sources)?;
    for (k, v) in sets {
        c.set_deferred(k, v).map_err(knob_error)?;
        sources.insert(k.clone(), Source::CommandLine);
    }
    c.validate().map_err(knob_error)?;
    Ok((c, sources))
}

/// How deep `include` may nest in the configuration file (PostgreSQL's limit too): a file
/// that includes itself ends there with an error instead of recursing.
const INCLUDE_DEPTH_MAX: usize = 10;

/// Applies the configuration file `path` to `c` (rules between knobs are checked once all
/// are in), reading each `include` in its place, relative to the including file's
/// directory, at most [`INCLUDE_DEPTH_MAX`] deep. A missing file is nothing to apply
/// for the top file and `include_if_exists`, an error for `include`.
fn apply_config_file(
    path: &Path,
    required: bool,
    depth: usize,
    c: &mut Config,
    sources: &mut BTreeMap<String, Source>,
) -> Result<()> {
    let Some(text) = read_config_file(path)? else {
        if required {
            return Err(KnobError(format!("{}: no such file", path.display())).into());
        }
        return Ok(());
    };
    let items =
        crate::conf::items(&text).map_err(|e| KnobError(format!("{}: {e}", path.display())))?;
    for item in items {
        match item {
            crate::conf::Item::Setting(s) => {
                c.set_deferred(&s.name, &s.value).map_err(|e| {
                    KnobError(format!("{} ({}, line {})", e, path.display(), s.line))
                })?;
                sources.insert(s.name, Source::File);
            }
            crate::conf::Item::Include {
                path: name,
                if_exists,
                line,
            } => {
                if depth + 1 >= INCLUDE_DEPTH_MAX {
                    return Err(KnobError(format!(
                        "{}, line {line}: include nested more than {} deep (a file that \
                         includes itself?)",
                        path.display(),
                        INCLUDE_DEPTH_MAX
                    ))
                    .into());
                }
                let base = path.parent().unwrap_or(Path::new("."));
                apply_config_file(&base.join(name), !if_exists, depth + 1, c, sources)?;
            }
        }
    }
    Ok(())
}

/// Every knob's value in effect.
pub fn knob_values(c: &Config) -> BTreeMap<String, String> {
    KNOBS
        .iter()
        .map(|k| (k.name.to_string(), k.get(c)))
        .collect()
}

/// The configuration file's text, if there is one: a regular file (a FIFO or a device
/// would block or never end) of at most `conf::CONF_BYTES_MAX` bytes, in UTF-8.
fn read_config_file(path: &Path) -> Result<Option<String>> {
    use std::io::Read as _;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    if !meta.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| {
            f.take(crate::conf::CONF_BYTES_MAX as u64 + 1)
                .read_to_end(&mut bytes)
        })
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() > crate::conf::CONF_BYTES_MAX {
        bail!(
            "{} is larger than {} bytes: not a configuration file",
            path.display(),
            crate::conf::CONF_BYTES_MAX
        );
    }
    let text = String::from_utf8(bytes)
        .map_err(|e| anyhow::anyhow!("{} is not UTF-8 text: {e}", path.display()))?;
    Ok(Some(text))
}

/// Writes `<dir>/bufpool.conf`: the knobs whose values differ from the defaults as
/// settings, every other knob as a comment showing its default (postgresql.conf's habit),
/// so that `bufpool config` tells what the file sets from what is a default.
pub fn write_config_file(dir: &Path, c: &Config) -> Result<()> {
    let mut text = String::from(
        "# bufpool configuration: PostgreSQL's names, units and postgresql.conf syntax;\n\
         # `bufpool config` lists every knob. Lines starting with # show defaults.\n",
    );
    let defaults = knob_values(&Config::default());
    for (k, v) in knob_values(c) {
        if defaults.get(&k) == Some(&v) {
            text.push('#');
        }
        text.push_str(&crate::conf::line(&k, &v));
        text.push('\n');
    }
    let path = dir.join(CONFIG_FILE);
    // The owner's only, as the engine's own files (`bufpool::vfs::FILE_MODE`).
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .with_context(|| format!("writing {}", path.display()))
}
