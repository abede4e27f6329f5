//! [`IoError`]: the one error type for a failed file operation, used by every layer.
//!
//! Owns: the operation ("reading", "fsync of", ...), the path, where in the file (block or
//! byte offset) when there is a place, and the OS error with its errno. Layers above wrap
//! it in their own enums (`#[error(transparent)]`), so a message reads the same wherever it
//! surfaces and `raw_os_error` finds the errno. Locks: none.

use std::io;
use std::path::{Path, PathBuf};

use crate::types::BlockNumber;

/// Where in a file an operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoAt {
    /// The whole file (open, create, fsync, rename, ...).
    File,
    /// One block of a relation segment.
    Block(BlockNumber),
    /// A byte offset (log segments, SLRU files).
    Offset(u64),
}

/// A failed file operation: what, on which file, where, and the OS error.
#[derive(Debug, thiserror::Error)]
#[error("{op} {}{}: {source}", path.display(), at_text(*at))]
pub struct IoError {
    /// The operation, as the message words it ("reading", "fsync of", ...).
    pub op: &'static str,
    /// The file's path.
    pub path: PathBuf,
    /// Where in the file it failed.
    pub at: IoAt,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

fn at_text(at: IoAt) -> String {
    match at {
        IoAt::File => String::new(),
        IoAt::Block(b) => format!(" block {b}"),
        IoAt::Offset(o) => format!(" at offset {o}"),
    }
}

impl IoError {
    /// A failure of a whole-file operation.
    pub fn new(op: &'static str, path: &Path, source: io::Error) -> Self {
        Self {
            op,
            path: path.to_path_buf(),
            at: IoAt::File,
            source,
        }
    }

    /// A failure at byte `offset` of the file.
    pub fn at_offset(op: &'static str, path: &Path, offset: u64, source: io::Error) -> Self {
        Self {
            at: IoAt::Offset(offset),
            ..Self::new(op, path, source)
        }
    }

    /// A transfer that moved fewer bytes than asked (a short write or read); the OS error
    /// is `WriteZero` or `UnexpectedEof` with the counts.
    pub fn short(op: &'static str, path: &Path, at: IoAt, done: usize, want: usize) -> Self {
        let kind = if op.starts_with("read") {
            io::ErrorKind::UnexpectedEof
        } else {
            io::ErrorKind::WriteZero
        };
        Self {
            at,
            ..Self::new(
                op,
                path,
                io::Error::new(kind, format!("transferred {done} of {want} bytes")),
            )
        }
    }

    /// A closure for `map_err`: `file.sync_data().map_err(IoError::with("fsync of", path))`.
    pub fn with<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> Self + 'a {
        move |source| Self::new(op, path, source)
    }

    /// A copy, for an error that is latched and reported again (`io::Error` is not
    /// `Clone`: the copy keeps the errno, or the kind and message).
    pub fn duplicate(&self) -> Self {
        let source = match self.source.raw_os_error() {
            Some(errno) => io::Error::from_raw_os_error(errno),
            None => io::Error::new(self.source.kind(), self.source.to_string()),
        };
        Self {
            op: self.op,
            path: self.path.clone(),
            at: self.at,
            source,
        }
    }

    /// The OS error number, if the OS gave one.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.source.raw_os_error()
    }
}

/// The OS error number somewhere in `e`'s source chain (a layer's error that reaches
/// another only as `dyn Error`, such as the log's behind the pool's WAL hook or an SLRU's
/// write barrier), if there is one.
pub fn os_error_in(e: &(dyn std::error::Error + 'static)) -> Option<i32> {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return io.raw_os_error();
        }
        cause = c.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_operation_path_place_and_os_error() {
        let e = IoError::new(
            "fsync of",
            Path::new("/d/f"),
            io::Error::from_raw_os_error(5),
        );
        let m = e.to_string();
        assert!(m.starts_with("fsync of /d/f: "), "{m}");
        assert_eq!(e.raw_os_error(), Some(5));
        let e = IoError::at_offset(
            "writing",
            Path::new("/w"),
            8192,
            io::Error::from_raw_os_error(28),
        );
        assert!(
            e.to_string().starts_with("writing /w at offset 8192: "),
            "{e}"
        );
        let e = IoError::short("writing", Path::new("/w"), IoAt::Block(3), 10, 20);
        assert!(
            e.to_string().contains("block 3") && e.to_string().contains("10 of 20"),
            "{e}"
        );
    }
}
