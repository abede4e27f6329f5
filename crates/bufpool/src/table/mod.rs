//! Tables on the buffer pool: heap pages, heap relations with MVCC, row locks, pruning and
//! VACUUM, and each heap's free-space map. Indexes live in [`crate::index`].

pub mod autovacuum;
pub mod catalog;
mod error;
pub mod fsm;
pub mod heap;
/// The heap page layout (`heap/page.rs`), under the name it has always had.
pub use heap::page as heap_page;

pub use autovacuum::{
    Autovacuum, AutovacuumError, AutovacuumOptions, AutovacuumRun, AutovacuumStats,
};
pub use catalog::{Catalog, CatalogError, Column, ColumnType, IndexDef, Schema, TableDef};
pub use error::HeapError;
pub use heap::{
    Heap, RowLockMode, ScanReport, SeqScanOptions, Tid, VacuumCost, VacuumOptions, VacuumReport,
    VACUUM_COST_PAGE_DIRTY, VACUUM_COST_PAGE_HIT, VACUUM_COST_PAGE_MISS,
};
pub use heap_page::{HeapPage, HeapPageMut, ItemId, TupleHeader};
