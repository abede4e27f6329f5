//! The control file: where recovery starts.
//!
//! Owns: `<dir>/bufpool.control`, text with a CRC32C line:
//! ```text
//! bufpool control file
//! format=2
//! checkpoint=<LSN of the latest checkpoint record, decimal>
//! redo=<its redo point, decimal>
//! incarnation=<the log's incarnation, decimal: bumped by every recovery>
//! next_xid=<the next transaction id to hand out, decimal>
//! next_multi=<the next multixact id, decimal>
//! next_member=<the next multixact member's index, decimal>
//! oldest_multi=<multixacts below it were truncated, decimal>
//! multi_rels=<per relation, the oldest multixact its tuples may name:
//!             tablespace/relation:multixact, comma-separated, possibly empty>
//! crc32c=<8 hex digits: CRC32C of the lines above>
//! ```
//! Format 1 (no multixact lines) still reads, as no multixacts yet.
//! Invariants: written atomically (temp file, fsync, rename, fsync of the directory), so
//! after a crash it holds either the previous or the new checkpoint, never a mix. A
//! missing or damaged file is an error naming it, never a guess.

use std::path::{Path, PathBuf};

use crate::types::{Lsn, RelFileId};
use crate::vfs::{IoError, OpenOptions, Vfs};

/// The control file's name in the data directory.
pub const CONTROL_FILE: &str = "bufpool.control";
const FORMAT: u32 = 2;

/// The control file's contents: where recovery starts, and the counters it restores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    /// The LSN of the latest checkpoint record.
    pub checkpoint: Lsn,
    /// That checkpoint's redo point: where recovery starts replaying.
    pub redo: Lsn,
    /// The log's incarnation (bumped by every recovery).
    pub incarnation: u32,
    /// The next transaction id to hand out.
    pub next_xid: u32,
    /// Where the next multixact and its members go (at the redo point or later: replay
    /// raises them past every multixact it replays).
    pub next_multi: u32,
    /// The index of the next multixact member.
    pub next_member: u32,
    /// The oldest multixact kept: those below it were truncated.
    pub oldest_multi: u32,
    /// Per relation, the oldest multixact its tuples may name (`txn::MultiXact`'s bounds).
    pub multi_rels: Vec<(RelFileId, u32)>,
}

/// Why the control file cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControlError {
    /// The control file does not exist.
    #[error("control file {path} is missing: this data directory has no log yet, or the file was removed (recovery cannot know where to start)")]
    Missing {
        /// The control file's path.
        path: PathBuf,
    },
    /// The control file is damaged or unreadable; `problem` says how.
    #[error("control file {path}: {problem}")]
    Corrupt {
        /// The control file's path.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// Reading or writing the control file failed.
    #[error("{} control file {}: {}", .0.op, .0.path.display(), .0.source)]
    Io(#[source] IoError),
}

fn render(c: &Control) -> String {
    let body = format!(
        "bufpool control file\nformat={FORMAT}\ncheckpoint={}\nredo={}\nincarnation={}\nnext_xid={}\nnext_multi={}\nnext_member={}\noldest_multi={}\nmulti_rels={}\n",
        c.checkpoint.0,
        c.redo.0,
        c.incarnation,
        c.next_xid,
        c.next_multi,
        c.next_member,
        c.oldest_multi,
        c.multi_rels
            .iter()
            .map(|(r, m)| format!("{}/{}:{m}", r.tablespace, r.relation))
            .collect::<Vec<_>>()
            .join(",")
    );
    let crc = crc32c::crc32c(body.as_bytes());
    format!("{body}crc32c={crc:08x}\n")
}

/// Writes `c` to the control file at `path` atomically (temp file, fsync, rename, fsync of
/// the directory).
pub fn write(vfs: &dyn Vfs, path: &Path, c: &Control) -> Result<(), ControlError> {
    debug_assert!(
        c.redo <= c.checkpoint,
        "control file with redo point {} after its checkpoint record {}",
        c.redo,
        c.checkpoint
    );
    crate::vfs::write_atomic(vfs, path, render(c).as_bytes()).map_err(ControlError::Io)
}

/// Reads the control file at `path` and checks its checksum and fields.
pub fn read(vfs: &dyn Vfs, path: &Path) -> Result<Control, ControlError> {
    if !vfs
        .exists(path)
        .map_err(|source| ControlError::Io(IoError::new("checking", path, source)))?
    {
        return Err(ControlError::Missing {
            path: path.to_path_buf(),
        });
    }
    let bad = |problem: String| ControlError::Corrupt {
        path: path.to_path_buf(),
        problem,
    };
    let io = |source| ControlError::Io(IoError::new("reading", path, source));
    let f = vfs.open(path, OpenOptions::read_only()).map_err(io)?;
    let len = f.len().map_err(io)? as usize;
    if len > 4096 {
        return Err(bad(format!("{len} bytes is too large for a control file")));
    }
    let mut buf = vec![0u8; len];
    let n = f.read_at(&mut buf, 0).map_err(io)?;
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    let at = text
        .rfind("crc32c=")
        .ok_or_else(|| bad("no checksum line (truncated or damaged)".into()))?;
    let (body, crc) = text.split_at(at);
    let stored = u32::from_str_radix(crc.trim_start_matches("crc32c=").trim(), 16)
        .map_err(|_| bad("unreadable checksum line".into()))?;
    let computed = crc32c::crc32c(body.as_bytes());
    if stored != computed {
        return Err(bad(format!(
            "checksum mismatch (stored {stored:08x}, computed {computed:08x})"
        )));
    }
    let field = |k: &str| -> Result<u64, ControlError> {
        body.lines()
            .find_map(|l| l.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
            .ok_or_else(|| bad(format!("missing {k}")))?
            .parse()
            .map_err(|_| bad(format!("unreadable {k}")))
    };
    let format = field("format")?;
    if format != 1 && format != u64::from(FORMAT) {
        return Err(bad("unsupported format".into()));
    }
    let u32_field = |k: &str, default: u32| -> Result<u32, ControlError> {
        if format == 1 {
            return Ok(default);
        }
        u32::try_from(field(k)?).map_err(|_| bad(format!("{k} out of range")))
    };
    let incarnation =
        u32::try_from(field("incarnation")?).map_err(|_| bad("incarnation out of range".into()))?;
    let (checkpoint, redo) = (Lsn(field("checkpoint")?), Lsn(field("redo")?));
    if redo > checkpoint {
        // A checkpoint record is logged after its redo point is taken: never before it.
        return Err(bad(format!(
            "redo point {redo} after the checkpoint record {checkpoint}"
        )));
    }
    Ok(Control {
        checkpoint,
        redo,
        incarnation,
        next_xid: u32::try_from(field("next_xid")?)
            .map_err(|_| bad("next_xid out of range".into()))?,
        next_multi: u32_field("next_multi", 1)?,
        next_member: u32_field("next_member", 0)?,
        oldest_multi: u32_field("oldest_multi", 1)?,
        multi_rels: if format == 1 {
            Vec::new()
        } else {
            parse_rels(body).ok_or_else(|| bad("unreadable multi_rels".into()))?
        },
    })
}

/// The `multi_rels=` line: `ts/rel:multi` items, comma-separated.
fn parse_rels(body: &str) -> Option<Vec<(RelFileId, u32)>> {
    let v = body.lines().find_map(|l| l.strip_prefix("multi_rels="))?;
    if v.is_empty() {
        return Some(Vec::new());
    }
    v.split(',')
        .map(|item| {
            let (rel, m) = item.split_once(':')?;
            let (ts, r) = rel.split_once('/')?;
            Some((
                RelFileId::new(ts.parse().ok()?, r.parse().ok()?),
                m.parse().ok()?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::MemVfs;

    #[test]
    fn round_trip_missing_and_damaged() {
        let vfs = MemVfs::new();
        vfs.create_dir_all(Path::new("/d")).unwrap();
        let p = Path::new("/d/bufpool.control");
        assert!(matches!(read(&vfs, p), Err(ControlError::Missing { .. })));
        let c = Control {
            checkpoint: Lsn(8192),
            redo: Lsn(4096),
            incarnation: 2,
            next_xid: 77,
            next_multi: 5,
            next_member: 12,
            oldest_multi: 3,
            multi_rels: vec![(RelFileId::new(0, 7), 3), (RelFileId::new(2, 9), 4)],
        };
        write(&vfs, p, &c).unwrap();
        assert_eq!(read(&vfs, p).unwrap(), c);
        // Format 1, written by an older bufpool, still reads (no multixacts yet).
        let old = "bufpool control file\nformat=1\ncheckpoint=8192\nredo=4096\nincarnation=2\nnext_xid=77\n";
        let text = format!("{old}crc32c={:08x}\n", crc32c::crc32c(old.as_bytes()));
        vfs.set_contents(p, text.into_bytes());
        let one = read(&vfs, p).unwrap();
        assert_eq!((one.next_xid, one.next_multi, one.next_member), (77, 1, 0));
        assert!(one.multi_rels.is_empty());
        write(&vfs, p, &c).unwrap();
        let mut bytes = vfs.contents(p).unwrap();
        bytes[30] ^= 1;
        vfs.set_contents(p, bytes);
        let e = read(&vfs, p).unwrap_err().to_string();
        assert!(
            e.contains("bufpool.control") && e.contains("checksum"),
            "{e}"
        );
    }

    /// A control file whose checksum holds but whose redo point lies after its checkpoint
    /// record is corrupt (no checkpoint logs its record before its redo point): reported,
    /// never used (found by the fuzz corpus once writing such a file became a debug-build
    /// assertion).
    #[test]
    fn a_redo_point_after_its_checkpoint_is_corrupt() {
        let vfs = MemVfs::new();
        vfs.create_dir_all(Path::new("/d")).unwrap();
        let p = Path::new("/d/bufpool.control");
        let body = "bufpool control file\nformat=1\ncheckpoint=4096\nredo=8192\nincarnation=2\nnext_xid=77\n";
        let text = format!("{body}crc32c={:08x}\n", crc32c::crc32c(body.as_bytes()));
        vfs.set_contents(p, text.into_bytes());
        let e = read(&vfs, p).unwrap_err().to_string();
        assert!(
            e.contains("redo point") && e.contains("after the checkpoint"),
            "{e}"
        );
    }
}
