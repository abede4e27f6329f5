//! `bufpool init` (like `pgbench -i`): a new data directory with pgbench's four tables
//! filled and keyed, optionally with its log (`--waldir`) and its tables (`--tablespaces`)
//! on other devices, its knobs written into `bufpool.conf`, pgbench's progress lines.
//!
//! Owns: the flags and their checks (every bad one is a knob error before anything is
//! written), clearing what an earlier database left (its relation files in the old
//! tablespaces, its segments in the old WAL directory, nothing else), and the directory's
//! lock from before anything is removed until the new engine opens. The tables and their
//! loading are `tpcb`'s.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use bufpool::{Config, RealVfs};

use super::{open_engine, DirArgs};
use crate::knobs::{knob_error, write_config_file, KnobError};
use crate::tpcb;

/// The workloads `init` loads (`--workload`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkloadName {
    /// pgbench's TPC-B-like tables (`-s` sets their size).
    Tpcb,
    /// YCSB's usertable (`--records` sets its size).
    Ycsb,
    /// TPC-C's nine tables (`-w` sets the warehouses).
    Tpcc,
}

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The database to make: pgbench's TPC-B tables, YCSB's usertable (for `bench -b
    /// ycsb-a` .. `ycsb-f`), or TPC-C's tables (for `bench`, which runs TPC-C's mix on
    /// them).
    #[arg(long, value_enum, default_value = "tpcb")]
    pub workload: WorkloadName,
    /// Scale factor: 100,000 accounts, 10 tellers and 1 branch per unit (TPC-B).
    #[arg(short = 's', long = "scale", default_value_t = 1)]
    pub scale: u32,
    /// Records of YCSB's usertable (YCSB's recordcount; each about 1 KiB; default
    /// 100,000, about 110 MB). YCSB only.
    #[arg(long, value_name = "N")]
    pub records: Option<u64>,
    /// Warehouses of TPC-C's tables (each about 100 MB loaded; default 1). TPC-C only.
    #[arg(short = 'w', long = "warehouses", value_name = "W")]
    pub warehouses: Option<u32>,
    /// Fill factor of the tables, percent (10 to 100).
    #[arg(short = 'F', long = "fillfactor", default_value_t = 100)]
    pub fillfactor: u8,
    /// Places the tables on other directories (devices), like PostgreSQL's tablespaces:
    /// DIR1 becomes tablespace 1, DIR2 tablespace 2, ... (each empty or new, outside the
    /// data directory, linked from <pgdata>/base/<id>). Tables are dealt out round-robin,
    /// largest first, each primary key with its table: pgbench_accounts, pgbench_history,
    /// pgbench_tellers, pgbench_branches (with two directories: accounts and tellers on
    /// DIR1, history and branches on DIR2). Without it, everything is in the data
    /// directory. Re-running init empties the old tablespaces of their relation files.
    #[arg(long, value_name = "DIR1,DIR2,...", value_delimiter = ',')]
    pub tablespaces: Vec<PathBuf>,
    /// Puts the write-ahead log in DIR (another device) instead of <pgdata>/wal, like
    /// initdb --waldir: DIR must be empty or new and outside the data directory;
    /// <pgdata>/wal becomes a link to it. Re-running init empties the old WAL directory
    /// of its segment files.
    #[arg(long, value_name = "DIR")]
    pub waldir: Option<PathBuf>,
    /// pgbench's -q (quiet logging): accepted; init prints one line when done anyway.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    /// pgbench's init steps (default dtgvp): d drop, t create tables, g or G generate
    /// data, v vacuum, p primary keys, f foreign keys. t, g and p are always done (the
    /// bench needs them); v and f are accepted with a note.
    #[arg(short = 'I', long = "init-steps", value_name = "STEPS", value_parser = parse_init_steps)]
    pub init_steps: Option<String>,
    /// pgbench's --unlogged-tables: accepted with a note (every relation is logged here).
    #[arg(long = "unlogged-tables")]
    pub unlogged_tables: bool,
    /// pgbench's --foreign-keys: accepted with a note (keys are not enforced).
    #[arg(long = "foreign-keys")]
    pub foreign_keys: bool,
    /// pgbench's --partitions: accepted with a note (pgbench_accounts is one table).
    #[arg(long = "partitions", value_name = "N")]
    pub partitions: Option<u32>,
    /// pgbench's --partition-method (range or hash): accepted with --partitions.
    #[arg(
        long = "partition-method",
        value_name = "NAME",
        requires = "partitions"
    )]
    pub partition_method: Option<String>,
    #[command(flatten)]
    pub dir: DirArgs,
}

impl InitArgs {
    /// One line per pgbench flag given that cannot apply here, for stderr.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if let Some(steps) = &self.init_steps {
            if steps.contains('v') {
                notes.push("init step v: nothing to vacuum in freshly loaded tables".into());
            }
            if steps.contains('f') || self.foreign_keys {
                notes.push("foreign keys: not created (the engine has no constraints)".into());
            }
        } else if self.foreign_keys {
            notes.push("foreign keys: not created (the engine has no constraints)".into());
        }
        if self.unlogged_tables {
            notes.push(
                "--unlogged-tables: the tables are logged (the engine has no unlogged relations)"
                    .into(),
            );
        }
        if let Some(n) = self.partitions {
            notes.push(format!(
                "--partitions {n}{}: pgbench_accounts stays one table (no partitioning)",
                self.partition_method
                    .as_deref()
                    .map(|m| format!(" --partition-method {m}"))
                    .unwrap_or_default()
            ));
        }
        notes
    }
}

/// `bufpool init` as `a` asks: a note on stderr for each pgbench flag that cannot apply,
/// then [`init`].
pub fn run(a: &InitArgs) -> Result<()> {
    for note in a.notes() {
        eprintln!("note: {note}");
    }
    let _ = a.quiet;
    let load = match a.workload {
        WorkloadName::Tpcb => {
            if a.records.is_some() || a.warehouses.is_some() {
                return Err(KnobError(
                    "--records is YCSB's (with --workload ycsb) and -w TPC-C's (with --workload tpcc); TPC-B's size is -s".into(),
                )
                .into());
            }
            Load::Tpcb {
                scale: a.scale,
                fillfactor: a.fillfactor,
            }
        }
        WorkloadName::Ycsb => {
            if a.scale != 1
                || a.fillfactor != 100
                || !a.tablespaces.is_empty()
                || a.warehouses.is_some()
            {
                return Err(KnobError(
                    "-s, -F, -w and --tablespaces are not YCSB's: YCSB's size is --records".into(),
                )
                .into());
            }
            Load::Ycsb {
                records: a.records.unwrap_or(crate::ycsb::DEFAULT_RECORDS),
            }
        }
        WorkloadName::Tpcc => {
            if a.scale != 1
                || a.fillfactor != 100
                || !a.tablespaces.is_empty()
                || a.records.is_some()
            {
                return Err(KnobError(
                    "-s, -F, --records and --tablespaces are not TPC-C's: TPC-C's size is -w (warehouses)".into(),
                )
                .into());
            }
            Load::Tpcc {
                warehouses: a
                    .warehouses
                    .unwrap_or(crate::tpcc::load::DEFAULT_WAREHOUSES),
            }
        }
    };
    init_load(
        &a.dir.dir,
        load,
        &a.tablespaces,
        a.waldir.as_deref(),
        &a.dir.sets,
    )
}

/// What `init` loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// pgbench's tables at `scale`, the tables filled to `fillfactor` percent.
    Tpcb { scale: u32, fillfactor: u8 },
    /// YCSB's usertable with `records` records.
    Ycsb { records: u64 },
    /// TPC-C's tables with `warehouses` warehouses.
    Tpcc { warehouses: u32 },
}

/// pgbench's init steps (`-I`): letters of `dtgGvpf`, each once; t, g (or G) and p must
/// be there, since the bench needs its tables filled and keyed.
pub fn parse_init_steps(text: &str) -> std::result::Result<String, String> {
    if let Some(c) = text.chars().find(|c| !"dtgGvpf".contains(*c)) {
        return Err(format!(
            "unrecognized initialization step {c:?} (allowed: d drop, t tables, g or G data, \
             v vacuum, p primary keys, f foreign keys)"
        ));
    }
    let has = |set: &str| text.chars().any(|c| set.contains(c));
    for (step, what) in [
        ("t", "creates the tables"),
        ("gG", "fills them"),
        ("p", "keys them"),
    ] {
        if !has(step) {
            return Err(format!(
                "init steps {text:?} lack {}: bufpool init always {what} (the bench needs them)",
                &step[..1]
            ));
        }
    }
    Ok(text.to_string())
}

/// `bufpool init` of pgbench's tables ([`init_load`] with [`Load::Tpcb`]).
pub fn init(
    dir: &Path,
    scale: u32,
    fillfactor: u8,
    tablespaces: &[PathBuf],
    waldir: Option<&Path>,
    sets: &[(String, String)],
) -> Result<()> {
    init_load(
        dir,
        Load::Tpcb { scale, fillfactor },
        tablespaces,
        waldir,
        sets,
    )
}

/// `bufpool init`: a new database in `dir` loaded with `load`. With `tablespaces`
/// (directories, on other devices; TPC-B only), creates tablespaces 1..=N there and deals
/// pgbench's tables out over them ([`tpcb::placement`]).
pub fn init_load(
    dir: &Path,
    load: Load,
    tablespaces: &[PathBuf],
    waldir: Option<&Path>,
    sets: &[(String, String)],
) -> Result<()> {
    check_load(load, tablespaces)?;
    // Knobs first (defaults and --set; a new database starts a new file): a bad one
    // writes nothing.
    let mut c = Config::default();
    for (k, v) in sets {
        c.set(k, v).map_err(knob_error)?;
    }
    c.validate().map_err(knob_error)?;
    let locations = tablespace_locations(dir, tablespaces)?;
    let waldir = waldir
        .map(|w| outside_data_dir(dir, w, "--waldir"))
        .transpose()?;
    if let Some(w) = &waldir {
        check_waldir_is_free(dir, w)?;
    }
    // The directory's lock, held from before anything is removed until the new engine
    // opens: a process that has the old database open holds it, and init refuses
    // (naming its pid) instead of deleting the files under it.
    let held = crate::dirlock::hold(dir)?;
    if dir.join("bufpool.meta").exists() {
        eprintln!("dropping old tables...");
        empty_old_tablespaces(dir)?;
        empty_old_wal_directory(dir)?;
        remove_all_but_the_lock(dir)
            .with_context(|| format!("removing the old database in {}", dir.display()))?;
    } else if dir.exists()
        && std::fs::read_dir(dir)?
            .any(|e| e.map_or(true, |e| e.file_name() != crate::dirlock::LOCK_FILE))
    {
        bail!(
            "{} exists, is not empty and is not a bufpool data directory: refusing to touch it",
            dir.display()
        );
    }
    // The owner's only (`bufpool::vfs::DIR_MODE`), missing parents too, as initdb makes it.
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    if let Some(w) = &waldir {
        let data = std::path::absolute(dir)?;
        bufpool::create_wal_directory(&RealVfs::new(), &data, w)?;
        eprintln!("WAL directory: {}", w.display());
    }
    write_config_file(dir, &c)?;
    // Let go just before the engine takes the lock itself (two handles of one process
    // conflict too). A process that takes it in between makes the open below fail with
    // the directory named as locked; nothing of the old database is left to lose then.
    drop(held);
    let engine = open_engine(dir, &c, true)?;
    let mut ids = Vec::new();
    if !locations.is_empty() {
        eprintln!("creating tablespaces...");
    }
    for (id, location) in (1u32..).zip(&locations) {
        engine.pool().smgr().create_tablespace(id, location)?;
        eprintln!("tablespace {id}: {}", location.display());
        ids.push(id);
    }
    eprintln!("creating tables...");
    if !ids.is_empty() {
        for (relation, id) in tpcb::placement(&ids) {
            let location = &locations[id as usize - 1];
            eprintln!("{relation} in tablespace {id} ({})", location.display());
        }
    }
    eprintln!("generating data (client-side)...");
    let vfs = RealVfs::new();
    let start = std::time::Instant::now();
    let mut last = 0u64;
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut progress = |done: u64, total: u64| {
        if done == total || done >= last + 100_000 || done == 0 {
            let el = start.elapsed().as_secs_f64();
            let rem = if done > 0 {
                el * (total - done) as f64 / done as f64
            } else {
                0.0
            };
            let pct = done * 100 / total.max(1);
            if tty {
                // A bar redrawn in place on a terminal ...
                let filled = (pct / 5) as usize;
                eprint!(
                    "\r[{}{}] {pct:>3}% {done} of {total} tuples (elapsed {el:.2} s, remaining {rem:.2} s) ",
                    "#".repeat(filled),
                    " ".repeat(20 - filled)
                );
                if done == total {
                    eprintln!();
                }
            } else {
                // ... and pgbench's lines in a log.
                eprintln!(
                    "{done} of {total} tuples ({pct}%) done (elapsed {el:.2} s, remaining {rem:.2} s)"
                );
            }
            last = done;
        }
    };
    let line = match load {
        Load::Tpcb { scale, fillfactor } => {
            let report = tpcb::init(&engine, &vfs, dir, scale, fillfactor, &ids, &mut progress)?;
            format!(
                "done in {:.2} s (load {:.2} s, primary keys {:.2} s, checkpoint {:.2} s): scale {}, {} accounts.",
                report.total_s, report.load_s, report.index_s, report.checkpoint_s, report.scale, report.accounts
            )
        }
        Load::Ycsb { records } => {
            let report = crate::ycsb::init(&engine, &vfs, dir, records, &mut progress)?;
            format!(
                "done in {:.2} s (load {:.2} s, primary key {:.2} s, checkpoint {:.2} s): {} records in {}.",
                report.total_s, report.load_s, report.index_s, report.checkpoint_s, report.records, crate::ycsb::TABLE
            )
        }
        Load::Tpcc { warehouses } => {
            let report = crate::tpcc::load::init(&engine, &vfs, dir, warehouses, &mut progress)?;
            format!(
                "done in {:.2} s (load and keys {:.2} s, checkpoint {:.2} s): {} warehouses, {} rows in TPC-C's nine tables.",
                report.total_s, report.load_s, report.checkpoint_s, report.warehouses, report.rows
            )
        }
    };
    eprintln!("creating primary keys...");
    engine.shutdown()?;
    eprintln!("{line}");
    Ok(())
}

/// `init`'s size flags checked (each a knob error): a fillfactor of 10 to 100 and a scale
/// of at least 1 for TPC-B, at least one record and no tablespaces for YCSB.
fn check_load(load: Load, tablespaces: &[PathBuf]) -> Result<()> {
    match load {
        Load::Tpcb { scale, fillfactor } => {
            if !(10..=100).contains(&fillfactor) {
                return Err(KnobError(format!(
                    "invalid value for fillfactor: {fillfactor} (allowed: 10 to 100)"
                ))
                .into());
            }
            if scale == 0 {
                return Err(
                    KnobError("invalid value for scale: 0 (allowed: 1 or more)".into()).into(),
                );
            }
        }
        Load::Ycsb { records } => {
            if records == 0 || !tablespaces.is_empty() {
                return Err(KnobError(format!(
                    "invalid value for --records: {records} (allowed: 1 or more; YCSB's table has no --tablespaces)"
                ))
                .into());
            }
        }
        Load::Tpcc { warehouses } => {
            let max = crate::tpcc::load::MAX_WAREHOUSES;
            if !(1..=max).contains(&warehouses) || !tablespaces.is_empty() {
                return Err(KnobError(format!(
                    "invalid value for -w: {warehouses} (allowed: 1 to {max}; TPC-C's tables have no --tablespaces)"
                ))
                .into());
            }
        }
    }
    Ok(())
}

/// `init --waldir W`, before anything is removed or made (the library checks again): W
/// must be empty, or hold only the old log of this same directory (which re-init empties;
/// its location counts as the same however it is spelled). Anything else in it is refused
/// now, not after the old database was removed, when the new log could not go there.
fn check_waldir_is_free(dir: &Path, w: &Path) -> Result<()> {
    let vfs = RealVfs::new();
    let real = |p: &Path| bufpool::vfs::resolve_path(&vfs, p).ok();
    let old = bufpool::wal_directory(&vfs, dir).ok().flatten();
    let reused = old.is_some() && old.as_deref().and_then(real) == real(w);
    let names: Vec<String> = std::fs::read_dir(w)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let foreign: Vec<&String> = names
        .iter()
        .filter(|n| !(reused && is_log_file(n)))
        .collect();
    if let Some(first) = foreign.first() {
        return Err(KnobError(format!(
            "invalid value for --waldir: {} is not empty (it holds {first}{})",
            w.display(),
            if foreign.len() > 1 {
                format!(" and {} more", foreign.len() - 1)
            } else {
                String::new()
            }
        ))
        .into());
    }
    Ok(())
}

/// `init --tablespaces`: each directory made absolute (the links must not depend on the
/// working directory), none twice and none inside the data directory; a bad one is a flag
/// error (exit status 2) before anything is written. The storage manager checks the rest
/// (a directory, empty or new) when it creates each.
fn tablespace_locations(dir: &Path, tablespaces: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let bad = |problem: String| KnobError(format!("invalid value for --tablespaces: {problem}"));
    let mut out: Vec<PathBuf> = Vec::new();
    for t in tablespaces {
        let location = outside_data_dir(dir, t, "--tablespaces")?;
        if out.contains(&location) {
            return Err(bad(format!("{} is given twice", location.display())).into());
        }
        out.push(location);
    }
    Ok(out)
}

/// `location` made absolute, refused (naming `flag`) when it lies inside the data
/// directory `dir`.
fn outside_data_dir(dir: &Path, location: &Path, flag: &str) -> Result<PathBuf> {
    let bad = |problem: String| KnobError(format!("invalid value for {flag}: {problem}"));
    let data = std::path::absolute(dir).with_context(|| format!("resolving {}", dir.display()))?;
    let location =
        std::path::absolute(location).map_err(|e| bad(format!("{}: {e}", location.display())))?;
    // Where both really lead (links followed, `..` applied), not how they are spelled:
    // `other/../db/x` and `link/x` with `link` → `db` are inside `db`.
    let vfs = RealVfs::new();
    let real_data = bufpool::vfs::resolve_path(&vfs, &data)
        .with_context(|| format!("resolving {}", data.display()))?;
    let real = bufpool::vfs::resolve_path(&vfs, &location)
        .map_err(|e| bad(format!("{}: {e}", location.display())))?;
    if real.starts_with(&real_data) {
        return Err(bad(format!(
            "{} is inside the data directory {}{}",
            location.display(),
            data.display(),
            if real != location {
                format!(" (it leads to {})", real.display())
            } else {
                String::new()
            }
        ))
        .into());
    }
    Ok(location)
}

/// Removes everything in `dir` but its lock file (which `init` holds locked meanwhile).
fn remove_all_but_the_lock(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_name() == crate::dirlock::LOCK_FILE {
            continue;
        }
        if e.file_type()?.is_dir() {
            std::fs::remove_dir_all(e.path())?;
        } else {
            std::fs::remove_file(e.path())?;
        }
    }
    Ok(())
}

/// Re-running init where the old database had its WAL elsewhere: removes the old log's
/// segment files (16 hex digits) from that directory, which removing the data directory
/// leaves behind (it removes the link, not what it leads to), so the new log can go there.
fn empty_old_wal_directory(dir: &Path) -> Result<()> {
    let Some(location) = bufpool::wal_directory(&RealVfs::new(), dir)? else {
        return Ok(());
    };
    let files = match std::fs::read_dir(&location) {
        Ok(files) => files,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", location.display())),
    };
    eprintln!("emptying the old WAL directory {}...", location.display());
    for f in files {
        let f = f.with_context(|| format!("listing {}", location.display()))?;
        let name = f.file_name().to_string_lossy().into_owned();
        if f.file_type()?.is_file() && is_log_file(&name) {
            std::fs::remove_file(f.path())
                .with_context(|| format!("removing {}", f.path().display()))?;
        }
    }
    Ok(())
}

/// Whether `name` is a log file's: a segment (16 hex digits), a segment being made
/// (`<segment>.tmp`, left by a crash while a new segment was filled before its rename),
/// or the log's stamped durable end.
fn is_log_file(name: &str) -> bool {
    if name == bufpool::wal::durable_end::FILE {
        return true;
    }
    let stem = name.strip_suffix(".tmp").unwrap_or(name);
    stem.len() == 16 && stem.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `name` is a relation file's: `<number>[_fsm|_vm|_init][.<segment>]`.
fn is_relation_file(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (stem, segment) = match name.split_once('.') {
        Some((stem, n)) => (stem, Some(n)),
        None => (name, None),
    };
    let number = ["_fsm", "_vm", "_init"]
        .iter()
        .find_map(|fork| stem.strip_suffix(fork))
        .unwrap_or(stem);
    digits(number) && segment.is_none_or(digits)
}

/// Before `init` replaces a data directory: removes the relation files from the locations
/// of its tablespaces (the links in `<dir>/base`), which removing the directory leaves
/// behind (it removes a link, not what it points at), so the same directories can be
/// given again, and a device probe file a crash left there. Other files stay: a location
/// that also holds something else is never emptied blindly (and creating a tablespace
/// there then fails: not empty).
fn empty_old_tablespaces(dir: &Path) -> Result<()> {
    let base = dir.join("base");
    let Ok(entries) = std::fs::read_dir(&base) else {
        return Ok(());
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", base.display()))?;
        if !entry.file_type()?.is_symlink() {
            continue;
        }
        let link = entry.path();
        let location = base.join(
            std::fs::read_link(&link).with_context(|| format!("reading {}", link.display()))?,
        );
        let files = match std::fs::read_dir(&location) {
            Ok(files) => files,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(e).with_context(|| format!("listing {}", location.display()));
            }
        };
        eprintln!(
            "emptying old tablespace {} ({})...",
            entry.file_name().to_string_lossy(),
            location.display()
        );
        for f in files {
            let f = f.with_context(|| format!("listing {}", location.display()))?;
            let name = f.file_name().to_string_lossy().into_owned();
            // The bgwriter's device probe file, if a crash left it (`bufpool::smgr`).
            let probe = name == bufpool::smgr::PROBE_FILE;
            if f.file_type()?.is_file() && (probe || is_relation_file(&name)) {
                std::fs::remove_file(f.path())
                    .with_context(|| format!("removing {}", f.path().display()))?;
            }
        }
    }
    Ok(())
}
