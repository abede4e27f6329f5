//! Tables and indexes by name: an [`Engine`] shared behind an `Arc`, with the data
//! directory's catalog (`bufpool.catalog`, [`Catalog`]) choosing relation numbers and
//! remembering names, so an embedder never picks a [`RelFileId`] by hand.
//!
//! Owns: the shared engine. Handles it returns (`Heap<'static>`, `BTree<'static>`) share it
//! too, so they can be kept in structs and moved to other threads.
//!
//! Invariants: a name in the catalog names a relation whose files exist and, for an index,
//! whose meta page is durable. Creation keeps it so, in this order: the relation's files
//! (their directory entry synced), an immediate checkpoint (the index's first pages on
//! disk), then the catalog, written atomically. A crash before the catalog is written
//! leaves unnamed files and no name; the next creation skips their relation number (a
//! number is taken only if no file of it exists), so nothing of them is overwritten.
//! Relation numbers start at 16384, as user relations do in PostgreSQL.
//!
//! Locks: the engine's catalog lock, held across one creation's load, create, checkpoint
//! and save, so two threads creating at once get different numbers and both names stay.
//! Opening by name reads the catalog without it (the file is replaced atomically).
//!
//! DDL is not transactional: a creation is durable when it returns, whether or not a
//! transaction around it commits.

use std::ops::Deref;
use std::path::Path;

use crate::engine::Engine;
use crate::error::Error;
use crate::index::BTree;
use crate::sync::Arc;
use crate::table::{Catalog, CatalogError, Heap, IndexDef, Schema, TableDef};
use crate::types::{ForkNumber, RelFileId};

/// The first relation number handed out, as PostgreSQL's first normal object id.
pub const FIRST_USER_RELATION: u32 = 16384;

/// An engine with its tables and indexes opened and created by name.
///
/// ```no_run
/// use bufpool::table::{ColumnType, Schema};
/// use bufpool::Database;
///
/// # fn main() -> Result<(), bufpool::Error> {
/// let db = Database::open("db")?;
/// let users = match db.table("users") {
///     Ok(t) => t,
///     Err(e) if e.is_not_found() => {
///         db.create_table("users", Schema::new(&[("id", ColumnType::Int8)]))?
///     }
///     Err(e) => return Err(e),
/// };
/// let x = db.begin()?; // the engine's methods, through `Deref`
/// users.insert(x.xid()?, &7i64.to_le_bytes())?;
/// x.commit()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Database {
    engine: Arc<Engine>,
}

impl Database {
    /// Opens (creating if needed) the data directory at `path` with the default knobs;
    /// [`Engine::builder`] then [`Database::new`] for others.
    pub fn open(path: impl AsRef<Path>) -> Result<Database, Error> {
        Ok(Database::new(Arc::new(Engine::open(path)?)))
    }

    /// Names tables on an engine opened elsewhere.
    pub fn new(engine: Arc<Engine>) -> Database {
        Database { engine }
    }

    /// The shared engine.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Shuts the engine down cleanly ([`Engine::shutdown`]: a last checkpoint, so the next
    /// open replays nothing). Refused while other handles share it (tables, indexes,
    /// clones): drop them first; dropping all of them instead is a stop without the last
    /// checkpoint, which loses nothing committed (the next open recovers).
    pub fn shutdown(self) -> Result<crate::types::Lsn, Error> {
        match Arc::try_unwrap(self.engine) {
            Ok(engine) => Ok(engine.shutdown()?),
            Err(shared) => Err(crate::engine::EngineError::StillShared {
                others: Arc::strong_count(&shared) - 1,
            }
            .into()),
        }
    }

    /// The catalog as it is on disk now.
    pub fn catalog(&self) -> Result<Catalog, Error> {
        let smgr = self.engine.pool().smgr();
        Ok(Catalog::load(smgr.vfs().as_ref(), smgr.dir())?)
    }

    /// Opens the table `name`, with the fillfactor it was created with.
    pub fn table(&self, name: &str) -> Result<Heap<'static>, Error> {
        let catalog = self.catalog()?;
        let def = catalog.table(name).ok_or_else(|| no_such("table", name))?;
        Ok(Heap::open(self.engine.clone(), def.rel).with_fillfactor(def.fillfactor)?)
    }

    /// Opens the index `name`.
    pub fn index(&self, name: &str) -> Result<BTree<'static>, Error> {
        let catalog = self.catalog()?;
        let def = catalog.index(name).ok_or_else(|| no_such("index", name))?;
        Ok(BTree::open(self.engine.clone(), def.rel)?)
    }

    /// Creates the table `name` with fillfactor 100. `schema` describes the rows for
    /// readers of the catalog (its integer columns are what an index can key on); the
    /// heap itself stores whatever bytes are inserted.
    pub fn create_table(&self, name: &str, schema: Schema) -> Result<Heap<'static>, Error> {
        self.create_table_with(name, schema, 100)
    }

    /// [`Database::create_table`] with a fillfactor (percent, 10..=100).
    pub fn create_table_with(
        &self,
        name: &str,
        schema: Schema,
        fillfactor: u8,
    ) -> Result<Heap<'static>, Error> {
        let _ddl = self.engine.catalog_lock();
        let mut catalog = self.catalog()?;
        let rel = self.free_rel(&catalog)?;
        catalog.add_table(TableDef {
            name: name.into(),
            rel,
            fillfactor,
            schema,
        })?;
        let heap = Heap::create(self.engine.clone(), rel)?.with_fillfactor(fillfactor)?;
        self.publish(&catalog)?;
        Ok(heap)
    }

    /// Creates the index `name` on `table`'s integer column `column`, `unique` or not.
    /// The table must be empty: entries of rows already there are not built (refused,
    /// naming the table, rather than an index that misses rows).
    pub fn create_index(
        &self,
        name: &str,
        table: &str,
        column: &str,
        unique: bool,
    ) -> Result<BTree<'static>, Error> {
        let _ddl = self.engine.catalog_lock();
        let mut catalog = self.catalog()?;
        let rel = self.free_rel(&catalog)?;
        catalog.add_index(IndexDef {
            name: name.into(),
            rel,
            table: table.into(),
            column: column.into(),
            unique,
        })?;
        let table_rel = catalog.table(table).map(|t| t.rel);
        if let Some(table_rel) = table_rel {
            let blocks = self.engine.pool().nblocks(table_rel, ForkNumber::Main)?;
            if blocks > 0 {
                return Err(CatalogError::Invalid(format!(
                    "index {name}: table {table} already holds {blocks} pages; create its \
                     indexes before loading it (building an index over existing rows is \
                     not supported)"
                ))
                .into());
            }
        }
        let tree = BTree::create(self.engine.clone(), rel, unique)?;
        self.publish(&catalog)?;
        Ok(tree)
    }

    /// The lowest relation number above every one in `catalog` with no file on disk
    /// (a crash may have left the files of a creation whose name was never written).
    fn free_rel(&self, catalog: &Catalog) -> Result<RelFileId, Error> {
        let smgr = self.engine.pool().smgr();
        let mut rel = catalog.next_rel(FIRST_USER_RELATION);
        let taken = |rel: RelFileId| -> Result<bool, Error> {
            for fork in [ForkNumber::Main, ForkNumber::FreeSpace] {
                if smgr.exists(rel, fork)? {
                    return Ok(true);
                }
            }
            Ok(false)
        };
        while taken(rel)? {
            rel = RelFileId::new(
                rel.tablespace,
                rel.relation
                    .checked_add(1)
                    .ok_or_else(|| CatalogError::Invalid("no relation number left".into()))?,
            );
        }
        Ok(rel)
    }

    /// Makes a creation's pages durable, then writes the catalog that names them.
    fn publish(&self, catalog: &Catalog) -> Result<(), Error> {
        self.engine.checkpoint()?;
        let smgr = self.engine.pool().smgr();
        catalog.save(smgr.vfs().as_ref(), smgr.dir())?;
        Ok(())
    }
}

impl Deref for Database {
    type Target = Engine;

    fn deref(&self) -> &Engine {
        &self.engine
    }
}

fn no_such(what: &'static str, name: &str) -> Error {
    CatalogError::NotFound {
        what,
        name: name.into(),
    }
    .into()
}
