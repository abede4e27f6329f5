//! Sequential access over the buffer pool's public API: read streams (look-ahead, I/O
//! combining into vectored reads, reads run ahead of use) and synchronized-scan positions
//! (seed 003). The multi-block miss itself (several pool buffers filled by one read) lives
//! in `buffer/`; this module decides which blocks to ask for and when.

pub mod read_stream;

pub use read_stream::{BlockSource, ReadStream, ReadStreamOptions, ReadStreamStats};
