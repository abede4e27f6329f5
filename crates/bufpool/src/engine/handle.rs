//! How a table or index handle holds its engine.
//!
//! Owns: nothing but the reference. A handle built from `&Engine` borrows it for a scope
//! (`Heap<'e>`); one built from an `Arc<Engine>` shares it (`Heap<'static>`), so it can be
//! kept in a long-lived struct or moved to another thread, and the engine lives as long
//! as the last handle. Both deref to the engine; the choice costs one branch per use.
//! Locks: none.

use std::ops::Deref;

use crate::sync::Arc;

use super::Engine;

/// The engine a [`Heap`](crate::table::Heap) or [`BTree`](crate::index::BTree) handle
/// works on: borrowed or shared. Built by `From`: `&engine` borrows, `engine.clone()` of
/// an `Arc<Engine>` shares.
///
/// ```no_run
/// use std::sync::Arc;
/// use bufpool::table::Heap;
/// use bufpool::{Engine, RelFileId};
///
/// # fn main() -> Result<(), bufpool::Error> {
/// let engine = Arc::new(Engine::open("db")?);
/// // Owned: no borrow of `engine`, so it can move into the thread.
/// let heap: Heap<'static> = Heap::create(engine.clone(), RelFileId::new(0, 16384))?;
/// std::thread::spawn(move || -> Result<(), bufpool::Error> {
///     let x = heap.engine().begin()?;
///     heap.insert(x.xid()?, b"row")?;
///     x.commit()?;
///     Ok(())
/// })
/// .join()
/// .expect("no panic")?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub enum EngineRef<'e> {
    /// Borrowed for the handle's lifetime `'e`.
    Borrowed(&'e Engine),
    /// Shared: the handle keeps the engine alive.
    Shared(Arc<Engine>),
}

impl Deref for EngineRef<'_> {
    type Target = Engine;

    #[inline]
    fn deref(&self) -> &Engine {
        match self {
            EngineRef::Borrowed(e) => e,
            EngineRef::Shared(e) => e,
        }
    }
}

impl<'e> From<&'e Engine> for EngineRef<'e> {
    fn from(e: &'e Engine) -> Self {
        EngineRef::Borrowed(e)
    }
}

impl<'e> From<&'e Arc<Engine>> for EngineRef<'e> {
    /// Borrows what the `Arc` points at (clone the `Arc` to share it instead).
    fn from(e: &'e Arc<Engine>) -> Self {
        EngineRef::Borrowed(e)
    }
}

impl From<Arc<Engine>> for EngineRef<'static> {
    fn from(e: Arc<Engine>) -> Self {
        EngineRef::Shared(e)
    }
}
