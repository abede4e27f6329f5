//! Indexes on the buffer pool: a B-link tree (Lehman and Yao's B+tree with right links and
//! high keys) on 64-bit integer keys. See `btree/mod.rs` for its invariants and locks
//! and `btree/page.rs` for the page layout; [`key`] for byte and unsigned keys, and why
//! the tree keys on `i64`.

pub mod btree;
/// The B-tree page layout (`btree/page.rs`), under the name it has always had.
pub use btree::page as btree_page;
mod error;
pub mod key;

pub use btree::{BTree, BTreeStats};
pub use error::IndexError;
pub use key::{byte_key, u64_key};
