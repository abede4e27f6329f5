//! Indexes on the buffer pool: a B-link tree (Lehman and Yao's B+tree with right links and
//! high keys) on 64-bit integer keys. See `btree.rs` for its invariants and locks.
