//! Tables on the buffer pool: heap pages so far (the heap relation, the free-space map,
//! VACUUM and the B+tree come next; see issue 5).

pub mod heap;
pub mod heap_page;

pub use heap::{changed_ranges, Heap, Tid, VacuumReport};
pub use heap_page::{HeapPage, HeapPageMut, ItemId, TupleHeader};
