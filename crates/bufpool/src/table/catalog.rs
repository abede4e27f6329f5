//! The catalog: which tables and indexes a data directory holds, their relation ids and
//! their fixed-width column schemas, in `<dir>/bufpool.catalog`.
//!
//! ```text
//! bufpool catalog
//! format=1|2
//! table <name> <relation> fillfactor=<10..100> <column>:<type>,<column>:<type>,...
//! index <name> <relation> <table> <column> unique|nonunique
//! crc32c=<8 hex digits: CRC32C of the lines above>
//! ```
//! `<relation>` is the relation number for a relation in the default tablespace (0), and
//! `<tablespace>/<number>` for one elsewhere. Format 2 is written only when some relation
//! is outside tablespace 0, so a catalog without tablespaces stays format 1, byte for byte
//! what earlier builds wrote and read; this build reads both (a build that predates
//! tablespaces refuses format 2 as "not a format-1 bufpool catalog").
//! Types: `int4` (4 bytes), `int8` (8 bytes), `char(N)` (N bytes, space padded), each
//! little-endian and fixed-width, so a row is a fixed-size byte string and a column is a
//! fixed byte range of it (PostgreSQL's attribute offsets without alignment or nulls).
//! Invariants: written atomically (temp file, fsync, rename, fsync of the directory), so
//! a crash leaves the old or the new catalog. DDL is not transactional: the caller creates
//! relations, then saves the catalog, then takes a checkpoint (relation creation is not
//! WAL-logged). Names are unique among tables and among indexes; relation numbers are
//! unique across all tablespaces (so a number alone names a relation, as in file names
//! and messages).
//! Locks: none; a catalog is a value the caller owns.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::types::RelFileId;
use crate::vfs::{IoError, OpenOptions, Vfs};

/// The catalog's file name, in the data directory.
pub const CATALOG_FILE: &str = "bufpool.catalog";
/// The format of a catalog whose relations are all in tablespace 0 (relation numbers
/// alone).
const FORMAT_DEFAULT_TABLESPACE: u32 = 1;
/// The format that names a relation outside tablespace 0 as `<tablespace>/<number>`.
const FORMAT_TABLESPACES: u32 = 2;

/// A column type: fixed width, little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    /// A 4-byte signed integer (`int4`).
    Int4,
    /// An 8-byte signed integer (`int8`).
    Int8,
    /// A fixed-width, space-padded string of this many bytes (`char(N)`).
    Char(u16),
}

impl ColumnType {
    /// The column's width, in bytes.
    pub fn width(self) -> usize {
        match self {
            ColumnType::Int4 => 4,
            ColumnType::Int8 => 8,
            ColumnType::Char(n) => n as usize,
        }
    }

    fn parse(s: &str) -> Option<ColumnType> {
        match s {
            "int4" => Some(ColumnType::Int4),
            "int8" => Some(ColumnType::Int8),
            _ => {
                let n = s.strip_prefix("char(")?.strip_suffix(')')?.parse().ok()?;
                (n > 0).then_some(ColumnType::Char(n))
            }
        }
    }

    fn render(self) -> String {
        match self {
            ColumnType::Int4 => "int4".into(),
            ColumnType::Int8 => "int8".into(),
            ColumnType::Char(n) => format!("char({n})"),
        }
    }
}

/// A named column of a [`Schema`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The column's name.
    pub name: String,
    /// Its type (and so its width).
    pub ty: ColumnType,
}

/// A row layout: columns in order, each at a fixed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// The columns, in row order.
    pub columns: Vec<Column>,
}

impl Schema {
    /// A schema of these (name, type) columns, in this order.
    pub fn new(columns: &[(&str, ColumnType)]) -> Schema {
        Schema {
            columns: columns
                .iter()
                .map(|(n, t)| Column {
                    name: n.to_string(),
                    ty: *t,
                })
                .collect(),
        }
    }

    /// Bytes of a row.
    pub fn row_size(&self) -> usize {
        self.columns.iter().map(|c| c.ty.width()).sum()
    }

    /// The index of the column named `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// Byte offset of column `i`.
    pub fn offset(&self, i: usize) -> usize {
        self.columns[..i].iter().map(|c| c.ty.width()).sum()
    }

    /// An empty row: zero integers, space-filled chars.
    pub fn blank_row(&self) -> Vec<u8> {
        let mut row = Vec::with_capacity(self.row_size());
        for c in &self.columns {
            match c.ty {
                ColumnType::Char(n) => row.extend(std::iter::repeat_n(b' ', n as usize)),
                t => row.extend(std::iter::repeat_n(0u8, t.width())),
            }
        }
        row
    }

    /// The integer in column `i` of `row`.
    pub fn get_int(&self, row: &[u8], i: usize) -> i64 {
        let o = self.offset(i);
        match self.columns[i].ty {
            ColumnType::Int4 => i64::from(i32::from_le_bytes(
                row[o..o + 4].try_into().expect("4 bytes"),
            )),
            ColumnType::Int8 => i64::from_le_bytes(row[o..o + 8].try_into().expect("8 bytes")),
            ColumnType::Char(_) => panic!("column {} is not an integer", self.columns[i].name),
        }
    }

    /// Sets the integer in column `i` of `row` (an int4 keeps the low 32 bits).
    pub fn set_int(&self, row: &mut [u8], i: usize, v: i64) {
        let o = self.offset(i);
        match self.columns[i].ty {
            ColumnType::Int4 => row[o..o + 4].copy_from_slice(&(v as i32).to_le_bytes()),
            ColumnType::Int8 => row[o..o + 8].copy_from_slice(&v.to_le_bytes()),
            ColumnType::Char(_) => panic!("column {} is not an integer", self.columns[i].name),
        }
    }
}

/// A table of the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDef {
    /// The table's name (one word, unique among tables).
    pub name: String,
    /// Its relation.
    pub rel: RelFileId,
    /// Its fillfactor, in percent (10..=100).
    pub fillfactor: u8,
    /// Its row layout.
    pub schema: Schema,
}

/// An index of the catalog: a B-tree on one integer column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDef {
    /// The index's name (unique among indexes).
    pub name: String,
    /// Its relation.
    pub rel: RelFileId,
    /// The name of the table it indexes.
    pub table: String,
    /// The integer column it keys on.
    pub column: String,
    /// Whether it refuses a second entry of one key.
    pub unique: bool,
}

/// What reading, writing or changing the catalog can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// The catalog file fails its checks (format, checksum, a line that does not parse).
    #[error("catalog {path}: {problem}")]
    Corrupt {
        /// The catalog file.
        path: PathBuf,
        /// What is wrong, with the line.
        problem: String,
    },
    /// Reading or writing the catalog file failed.
    #[error("{} catalog {}: {}", .0.op, .0.path.display(), .0.source)]
    Io(#[source] IoError),
    /// A change the catalog refuses (a name or relation number taken, a bad name or
    /// column).
    #[error("catalog: {0}")]
    Invalid(String),
    /// No table or index of that name.
    #[error("catalog: {what} {name:?} does not exist")]
    NotFound {
        /// "table" or "index".
        what: &'static str,
        /// The name asked for.
        name: String,
    },
}

/// Tables and indexes of a data directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    /// The tables, in creation order.
    pub tables: Vec<TableDef>,
    /// The indexes, in creation order.
    pub indexes: Vec<IndexDef>,
}

impl Catalog {
    /// The table named `name`.
    pub fn table(&self, name: &str) -> Option<&TableDef> {
        self.tables.iter().find(|t| t.name == name)
    }

    /// The index named `name`.
    pub fn index(&self, name: &str) -> Option<&IndexDef> {
        self.indexes.iter().find(|i| i.name == name)
    }

    /// Every relation of the catalog, tables then indexes.
    fn rels(&self) -> impl Iterator<Item = RelFileId> + '_ {
        let tables = self.tables.iter().map(|t| t.rel);
        tables.chain(self.indexes.iter().map(|i| i.rel))
    }

    /// The next free relation number at or above `first`, in tablespace 0.
    pub fn next_rel(&self, first: u32) -> RelFileId {
        self.next_rel_in(first, 0)
    }

    /// The next free relation number at or above `first`, in `tablespace`: above every
    /// number used in any tablespace, so numbers stay unique across them.
    pub fn next_rel_in(&self, first: u32, tablespace: u32) -> RelFileId {
        let n = self
            .rels()
            .map(|r| r.relation + 1)
            .max()
            .unwrap_or(first)
            .max(first);
        RelFileId::new(tablespace, n)
    }

    /// The tablespaces the catalog's relations are in, ascending, each once.
    pub fn tablespaces(&self) -> Vec<u32> {
        let set: std::collections::BTreeSet<u32> = self.rels().map(|r| r.tablespace).collect();
        set.into_iter().collect()
    }

    /// Refuses a relation number already used by another relation, in any tablespace.
    fn check_rel_free(&self, what: &str, rel: RelFileId) -> Result<(), CatalogError> {
        match self.rels().find(|r| r.relation == rel.relation) {
            Some(used) => Err(CatalogError::Invalid(format!(
                "{what}: relation number {} is already used (by relation {used})",
                rel.relation
            ))),
            None => Ok(()),
        }
    }

    /// Adds a table; its name and relation number must be new.
    pub fn add_table(&mut self, t: TableDef) -> Result<(), CatalogError> {
        if self.table(&t.name).is_some() {
            return Err(CatalogError::Invalid(format!(
                "table {} already exists",
                t.name
            )));
        }
        self.check_rel_free(&format!("table {}", t.name), t.rel)?;
        if t.name.contains(char::is_whitespace) || t.schema.columns.is_empty() {
            return Err(CatalogError::Invalid(format!(
                "table name {:?} must be one word with at least one column",
                t.name
            )));
        }
        self.tables.push(t);
        Ok(())
    }

    /// Adds an index on an integer column of an existing table; its name and relation
    /// number must be new.
    pub fn add_index(&mut self, i: IndexDef) -> Result<(), CatalogError> {
        if self.index(&i.name).is_some() {
            return Err(CatalogError::Invalid(format!(
                "index {} already exists",
                i.name
            )));
        }
        self.check_rel_free(&format!("index {}", i.name), i.rel)?;
        let t = self.table(&i.table).ok_or_else(|| {
            CatalogError::Invalid(format!("index {}: no table {}", i.name, i.table))
        })?;
        let c = t.schema.column(&i.column).ok_or_else(|| {
            CatalogError::Invalid(format!(
                "index {}: table {} has no column {}",
                i.name, i.table, i.column
            ))
        })?;
        if matches!(t.schema.columns[c].ty, ColumnType::Char(_)) {
            return Err(CatalogError::Invalid(format!(
                "index {}: column {} is not an integer",
                i.name, i.column
            )));
        }
        self.indexes.push(i);
        Ok(())
    }

    fn render(&self) -> String {
        let format = if self.rels().all(|r| r.tablespace == 0) {
            FORMAT_DEFAULT_TABLESPACE
        } else {
            FORMAT_TABLESPACES
        };
        let rel = |r: RelFileId| {
            if r.tablespace == 0 {
                r.relation.to_string()
            } else {
                format!("{}/{}", r.tablespace, r.relation)
            }
        };
        let mut body = format!("bufpool catalog\nformat={format}\n");
        for t in &self.tables {
            let cols: Vec<String> = t
                .schema
                .columns
                .iter()
                .map(|c| format!("{}:{}", c.name, c.ty.render()))
                .collect();
            let _ = writeln!(
                body,
                "table {} {} fillfactor={} {}",
                t.name,
                rel(t.rel),
                t.fillfactor,
                cols.join(",")
            );
        }
        for i in &self.indexes {
            let _ = writeln!(
                body,
                "index {} {} {} {} {}",
                i.name,
                rel(i.rel),
                i.table,
                i.column,
                if i.unique { "unique" } else { "nonunique" }
            );
        }
        let crc = crc32c::crc32c(body.as_bytes());
        format!("{body}crc32c={crc:08x}\n")
    }

    fn parse(text: &str, path: &Path) -> Result<Catalog, CatalogError> {
        let bad = |problem: String| CatalogError::Corrupt {
            path: path.to_path_buf(),
            problem,
        };
        let at = text
            .rfind("crc32c=")
            .ok_or_else(|| bad("no crc32c line (truncated?)".into()))?;
        let (body, tail) = text.split_at(at);
        let want = u32::from_str_radix(tail.trim_start_matches("crc32c=").trim(), 16)
            .map_err(|_| bad("unreadable crc32c line".into()))?;
        let got = crc32c::crc32c(body.as_bytes());
        if want != got {
            return Err(bad(format!(
                "checksum mismatch (stored {want:08x}, computed {got:08x})"
            )));
        }
        let mut lines = body.lines();
        if lines.next() != Some("bufpool catalog") {
            return Err(bad("not a bufpool catalog".into()));
        }
        let format = match lines.next().and_then(|l| l.strip_prefix("format=")) {
            Some("1") => FORMAT_DEFAULT_TABLESPACE,
            Some("2") => FORMAT_TABLESPACES,
            other => {
                return Err(bad(format!(
                    "format {} is not supported (this build reads formats \
                     {FORMAT_DEFAULT_TABLESPACE} and {FORMAT_TABLESPACES})",
                    other.unwrap_or("(missing)")
                )))
            }
        };
        let mut c = Catalog::default();
        for (n, line) in lines.enumerate() {
            let line_no = n + 3;
            let w: Vec<&str> = line.split(' ').collect();
            let rel = |s: &str| {
                let (tablespace, number) = match s.split_once('/') {
                    Some((ts, r)) if format >= FORMAT_TABLESPACES => (ts.parse::<u32>().ok(), r),
                    Some(_) => (None, s),
                    None => (Some(0), s),
                };
                match (tablespace, number.parse::<u32>()) {
                    (Some(ts), Ok(r)) => Ok(RelFileId::new(ts, r)),
                    _ => Err(bad(format!("line {line_no}: bad relation {s:?}"))),
                }
            };
            match w.as_slice() {
                ["table", name, r, ff, cols] => {
                    let fillfactor = ff
                        .strip_prefix("fillfactor=")
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| bad(format!("line {line_no}: bad fillfactor {ff:?}")))?;
                    let mut columns = Vec::new();
                    for col in cols.split(',') {
                        let (cn, ct) = col
                            .split_once(':')
                            .ok_or_else(|| bad(format!("line {line_no}: bad column {col:?}")))?;
                        let ty = ColumnType::parse(ct)
                            .ok_or_else(|| bad(format!("line {line_no}: bad type {ct:?}")))?;
                        columns.push(Column {
                            name: cn.to_string(),
                            ty,
                        });
                    }
                    c.add_table(TableDef {
                        name: name.to_string(),
                        rel: rel(r)?,
                        fillfactor,
                        schema: Schema { columns },
                    })
                    .map_err(|e| bad(format!("line {line_no}: {e}")))?;
                }
                ["index", name, r, table, column, u] => {
                    let unique = match *u {
                        "unique" => true,
                        "nonunique" => false,
                        _ => return Err(bad(format!("line {line_no}: bad uniqueness {u:?}"))),
                    };
                    c.add_index(IndexDef {
                        name: name.to_string(),
                        rel: rel(r)?,
                        table: table.to_string(),
                        column: column.to_string(),
                        unique,
                    })
                    .map_err(|e| bad(format!("line {line_no}: {e}")))?;
                }
                _ => return Err(bad(format!("line {line_no}: unreadable: {line:?}"))),
            }
        }
        Ok(c)
    }

    /// Reads `<dir>/bufpool.catalog`; a missing file is an empty catalog.
    pub fn load(vfs: &dyn Vfs, dir: &Path) -> Result<Catalog, CatalogError> {
        let path = dir.join(CATALOG_FILE);
        let io = |op: &'static str| {
            let p = path.clone();
            move |source| CatalogError::Io(IoError::new(op, &p, source))
        };
        if !vfs.exists(&path).map_err(io("checking"))? {
            return Ok(Catalog::default());
        }
        let f = vfs
            .open(&path, OpenOptions::read_only())
            .map_err(io("opening"))?;
        let len = f.len().map_err(io("reading"))? as usize;
        let mut buf = vec![0u8; len];
        let n = f.read_at(&mut buf, 0).map_err(io("reading"))?;
        let text = String::from_utf8(buf[..n].to_vec()).map_err(|_| CatalogError::Corrupt {
            path: path.clone(),
            problem: "not UTF-8".into(),
        })?;
        Self::parse(&text, &path)
    }

    /// Writes `<dir>/bufpool.catalog` atomically.
    pub fn save(&self, vfs: &dyn Vfs, dir: &Path) -> Result<(), CatalogError> {
        crate::vfs::write_atomic(vfs, &dir.join(CATALOG_FILE), self.render().as_bytes())
            .map_err(CatalogError::Io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::MemVfs;

    fn accounts() -> TableDef {
        TableDef {
            name: "pgbench_accounts".into(),
            rel: RelFileId::new(0, 16400),
            fillfactor: 100,
            schema: Schema::new(&[
                ("aid", ColumnType::Int4),
                ("bid", ColumnType::Int4),
                ("abalance", ColumnType::Int4),
                ("filler", ColumnType::Char(84)),
            ]),
        }
    }

    #[test]
    fn schema_offsets_and_values() {
        let s = accounts().schema;
        assert_eq!(s.row_size(), 96);
        assert_eq!(s.offset(2), 8);
        let mut row = s.blank_row();
        assert_eq!(&row[12..16], b"    ");
        s.set_int(&mut row, 2, -42);
        assert_eq!(s.get_int(&row, 2), -42);
        assert_eq!(s.column("filler"), Some(3));
    }

    #[test]
    fn round_trips_and_detects_damage() {
        let vfs = MemVfs::new();
        let dir = Path::new("/db");
        vfs.create_dir_all(dir).unwrap();
        assert_eq!(Catalog::load(&vfs, dir).unwrap(), Catalog::default());
        let mut c = Catalog::default();
        c.add_table(accounts()).unwrap();
        c.add_index(IndexDef {
            name: "pgbench_accounts_pkey".into(),
            rel: c.next_rel(16384),
            table: "pgbench_accounts".into(),
            column: "aid".into(),
            unique: true,
        })
        .unwrap();
        assert_eq!(
            c.index("pgbench_accounts_pkey").unwrap().rel.relation,
            16401
        );
        c.save(&vfs, dir).unwrap();
        assert_eq!(Catalog::load(&vfs, dir).unwrap(), c);
        // Bad definitions are refused with their reason.
        let dup = c.add_table(accounts()).unwrap_err().to_string();
        assert!(dup.contains("already exists"), "{dup}");
        let e = c
            .add_index(IndexDef {
                name: "x".into(),
                rel: RelFileId::new(0, 1),
                table: "pgbench_accounts".into(),
                column: "filler".into(),
                unique: false,
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("not an integer"), "{e}");
        // A flipped byte is caught by the checksum, naming the file.
        let path = dir.join(CATALOG_FILE);
        let f = vfs.open(&path, OpenOptions::create()).unwrap();
        let mut b = [0u8; 1];
        f.read_at(&mut b, 30).unwrap();
        f.write_at(&[b[0] ^ 1], 30).unwrap();
        let e = Catalog::load(&vfs, dir).unwrap_err().to_string();
        assert!(
            e.contains("checksum") && e.contains("bufpool.catalog"),
            "{e}"
        );
    }

    /// Relations in other tablespaces round-trip as `<tablespace>/<number>` in a format-2
    /// catalog; numbers stay unique across tablespaces; a catalog without them is still
    /// written as format 1, and one written by an earlier build (format 1) still loads.
    #[test]
    fn tablespaces_round_trip_and_old_catalogs_still_load() {
        let vfs = MemVfs::new();
        let dir = Path::new("/db");
        vfs.create_dir_all(dir).unwrap();
        let text = |vfs: &MemVfs| {
            String::from_utf8(vfs.contents(&dir.join(CATALOG_FILE)).unwrap()).unwrap()
        };
        let mut c = Catalog::default();
        c.add_table(TableDef {
            rel: c.next_rel(16384),
            ..accounts()
        })
        .unwrap();
        c.save(&vfs, dir).unwrap();
        assert!(
            text(&vfs).contains("format=1\ntable pgbench_accounts 16384 "),
            "{}",
            text(&vfs)
        );
        assert_eq!(c.tablespaces(), [0]);

        let rel = c.next_rel_in(16384, 2);
        assert_eq!(
            rel,
            RelFileId::new(2, 16385),
            "above every number of every tablespace"
        );
        c.add_index(IndexDef {
            name: "pgbench_accounts_pkey".into(),
            rel,
            table: "pgbench_accounts".into(),
            column: "aid".into(),
            unique: true,
        })
        .unwrap();
        assert_eq!(c.next_rel(16384), RelFileId::new(0, 16386));
        c.save(&vfs, dir).unwrap();
        let saved = text(&vfs);
        assert!(
            saved.contains("format=2\n") && saved.contains("index pgbench_accounts_pkey 2/16385 "),
            "{saved}"
        );
        let loaded = Catalog::load(&vfs, dir).unwrap();
        assert_eq!(loaded, c);
        assert_eq!(
            loaded.index("pgbench_accounts_pkey").unwrap().rel,
            RelFileId::new(2, 16385)
        );
        assert_eq!(loaded.tablespaces(), [0, 2]);

        // A relation number used in one tablespace is refused in another.
        let e = c
            .add_table(TableDef {
                name: "other".into(),
                rel: RelFileId::new(1, 16385),
                ..accounts()
            })
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("relation number 16385 is already used (by relation 2/16385)"),
            "{e}"
        );

        // An earlier build's catalog (format 1, numbers alone), byte for byte.
        let old = "bufpool catalog\nformat=1\ntable t 16384 fillfactor=90 a:int4\nindex t_pkey 16385 t a unique\n";
        let write = |body: &str| {
            let crc = crc32c::crc32c(body.as_bytes());
            vfs.set_contents(
                &dir.join(CATALOG_FILE),
                format!("{body}crc32c={crc:08x}\n").into_bytes(),
            );
        };
        write(old);
        let c = Catalog::load(&vfs, dir).unwrap();
        assert_eq!(c.table("t").unwrap().rel, RelFileId::new(0, 16384));
        assert_eq!(c.index("t_pkey").unwrap().rel, RelFileId::new(0, 16385));
        c.save(&vfs, dir).unwrap();
        assert!(
            text(&vfs).starts_with(old),
            "rewritten unchanged: {}",
            text(&vfs)
        );
        // A tablespace in a format-1 catalog, and an unknown format, are refused by name.
        write("bufpool catalog\nformat=1\ntable t 1/16384 fillfactor=90 a:int4\n");
        let e = Catalog::load(&vfs, dir).unwrap_err().to_string();
        assert!(e.contains("line 3: bad relation \"1/16384\""), "{e}");
        write("bufpool catalog\nformat=3\n");
        let e = Catalog::load(&vfs, dir).unwrap_err().to_string();
        assert!(
            e.contains("format 3 is not supported (this build reads formats 1 and 2)"),
            "{e}"
        );
    }
}
