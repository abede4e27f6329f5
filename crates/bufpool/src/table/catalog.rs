//! The catalog: which tables and indexes a data directory holds, their relation ids and
//! their fixed-width column schemas, in `<dir>/bufpool.catalog`.
//!
//! ```text
//! bufpool catalog
//! format=1
//! table <name> <relation> fillfactor=<10..100> <column>:<type>,<column>:<type>,...
//! index <name> <relation> <table> <column> unique|nonunique
//! crc32c=<8 hex digits: CRC32C of the lines above>
//! ```
//! Types: `int4` (4 bytes), `int8` (8 bytes), `char(N)` (N bytes, space padded), each
//! little-endian and fixed-width, so a row is a fixed-size byte string and a column is a
//! fixed byte range of it (PostgreSQL's attribute offsets without alignment or nulls).
//! Invariants: written atomically (temp file, fsync, rename, fsync of the directory), so
//! a crash leaves the old or the new catalog. DDL is not transactional: the caller creates
//! relations, then saves the catalog, then takes a checkpoint (relation creation is not
//! WAL-logged). Names are unique among tables and among indexes.
//! Locks: none; a catalog is a value the caller owns.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::types::RelFileId;
use crate::vfs::{IoError, OpenOptions, Vfs};

pub const CATALOG_FILE: &str = "bufpool.catalog";
const FORMAT: u32 = 1;

/// A column type: fixed width, little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Int4,
    Int8,
    Char(u16),
}

impl ColumnType {
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub ty: ColumnType,
}

/// A row layout: columns in order, each at a fixed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    pub columns: Vec<Column>,
}

impl Schema {
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDef {
    pub name: String,
    pub rel: RelFileId,
    pub fillfactor: u8,
    pub schema: Schema,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDef {
    pub name: String,
    pub rel: RelFileId,
    pub table: String,
    pub column: String,
    pub unique: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("catalog {path}: {problem}")]
    Corrupt { path: PathBuf, problem: String },
    #[error("{} catalog {}: {}", .0.op, .0.path.display(), .0.source)]
    Io(#[source] IoError),
    #[error("catalog: {0}")]
    Invalid(String),
}

/// Tables and indexes of a data directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    pub tables: Vec<TableDef>,
    pub indexes: Vec<IndexDef>,
}

impl Catalog {
    pub fn table(&self, name: &str) -> Option<&TableDef> {
        self.tables.iter().find(|t| t.name == name)
    }

    pub fn index(&self, name: &str) -> Option<&IndexDef> {
        self.indexes.iter().find(|i| i.name == name)
    }

    /// The next free relation number at or above `first` (in tablespace 0).
    pub fn next_rel(&self, first: u32) -> RelFileId {
        let used = self
            .tables
            .iter()
            .map(|t| t.rel)
            .chain(self.indexes.iter().map(|i| i.rel));
        let n = used
            .map(|r| r.relation + 1)
            .max()
            .unwrap_or(first)
            .max(first);
        RelFileId::new(0, n)
    }

    /// Adds a table; its name must be new.
    pub fn add_table(&mut self, t: TableDef) -> Result<(), CatalogError> {
        if self.table(&t.name).is_some() {
            return Err(CatalogError::Invalid(format!(
                "table {} already exists",
                t.name
            )));
        }
        if t.name.contains(char::is_whitespace) || t.schema.columns.is_empty() {
            return Err(CatalogError::Invalid(format!(
                "table name {:?} must be one word with at least one column",
                t.name
            )));
        }
        self.tables.push(t);
        Ok(())
    }

    /// Adds an index on an integer column of an existing table.
    pub fn add_index(&mut self, i: IndexDef) -> Result<(), CatalogError> {
        if self.index(&i.name).is_some() {
            return Err(CatalogError::Invalid(format!(
                "index {} already exists",
                i.name
            )));
        }
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
        let mut body = format!("bufpool catalog\nformat={FORMAT}\n");
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
                t.rel.relation,
                t.fillfactor,
                cols.join(",")
            );
        }
        for i in &self.indexes {
            let _ = writeln!(
                body,
                "index {} {} {} {} {}",
                i.name,
                i.rel.relation,
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
        if lines.next() != Some("bufpool catalog") || lines.next() != Some("format=1") {
            return Err(bad("not a format-1 bufpool catalog".into()));
        }
        let mut c = Catalog::default();
        for (n, line) in lines.enumerate() {
            let line_no = n + 3;
            let w: Vec<&str> = line.split(' ').collect();
            let rel = |s: &str| {
                s.parse::<u32>()
                    .map(|r| RelFileId::new(0, r))
                    .map_err(|_| bad(format!("line {line_no}: bad relation number {s:?}")))
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
}
