//! The log's durable end, kept durably (`wal_durable_end`): how far the log was synced
//! before commits were acknowledged, so recovery can tell a torn tail (written, never
//! synced, never acknowledged: the normal end of the log) from damage to log that was
//! synced and acknowledged (refused).
//!
//! Why a file of its own: every record carries the durable end from when it was inserted
//! (`Record::flushed`), so damage is detected wherever a later record vouches for it; but
//! the records of the last flush before a crash have no later record, and a record that
//! fails its check there reads exactly like a torn write. One write cannot tell the two
//! apart (a torn write can persist any of its sectors, the vouching one too), so the claim
//! "synced up to E" must be written after the sync of E has returned, and be durable
//! before the commits up to E are acknowledged: one small write and one sync more per
//! group of acknowledged commits ([`Stamp::stamp`], after [`super::Wal::flush`]).
//!
//! Owns: the file `durable_end` in the log's directory. Layout: two 512-byte slots (at 0
//! and 512, each within one sector), written alternately; a slot is `magic` (8 bytes),
//! `seq` (u64 LE), `end` (u64 LE), CRC32C of those 24 bytes (u32 LE), zeros. The valid
//! slot with the larger `seq` holds the durable end; a torn write damages only the slot
//! being written, so the other still holds the previous end (which is no larger).
//! Reading takes at most 1 KiB whatever the file's size; a file with no valid slot gives
//! no end (recovery then checks only what the records vouch for).
//! Invariants: a stamped end was durable log when it was written (it is the flushed
//! position after a returned sync); a log's position never goes below an end stamped in
//! its life or an earlier one (recovery starts the next life at or past its end), so an
//! end read from the file is a lower bound of the durable log; a new log (its first open)
//! removes the file first, so an old database's stamp never speaks for a new log.
//! Locks: `Stamp::state` serializes the writes; taken after the log's flush returned, never
//! while holding any of the log's locks.

use std::io;
use std::path::{Path, PathBuf};

use crate::sync::{Arc, AtomicU64, Mutex, Ordering};
use crate::types::Lsn;
use crate::vfs::{IoError, OpenOptions, Vfs, VfsFile};

/// The file's name in the log's directory.
pub const FILE: &str = "durable_end";
const MAGIC: &[u8; 8] = b"BPDURE01";
const SLOT: u64 = 512;
const BODY: usize = 24;

fn encode(seq: u64, end: u64) -> [u8; SLOT as usize] {
    let mut b = [0u8; SLOT as usize];
    b[..8].copy_from_slice(MAGIC);
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    b[16..24].copy_from_slice(&end.to_le_bytes());
    let crc = crc32c::crc32c(&b[..BODY]);
    b[BODY..BODY + 4].copy_from_slice(&crc.to_le_bytes());
    b
}

/// A slot's `(seq, end)` if it is whole and checks out.
fn decode(b: &[u8]) -> Option<(u64, u64)> {
    if b.len() < BODY + 4 || &b[..8] != MAGIC {
        return None;
    }
    let crc = u32::from_le_bytes(b[BODY..BODY + 4].try_into().ok()?);
    if crc32c::crc32c(&b[..BODY]) != crc {
        return None;
    }
    let seq = u64::from_le_bytes(b[8..16].try_into().ok()?);
    let end = u64::from_le_bytes(b[16..24].try_into().ok()?);
    Some((seq, end))
}

/// The newest valid slot of `bytes` (the file's first 1 KiB): `(seq, end)`.
pub fn parse(bytes: &[u8]) -> Option<(u64, u64)> {
    let slot = |i: u64| {
        let from = (i * SLOT) as usize;
        bytes
            .get(from..(from + SLOT as usize).min(bytes.len()))
            .and_then(decode)
    };
    match (slot(0), slot(1)) {
        (Some(a), Some(b)) => Some(if a.0 >= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

fn path_in(wal_dir: &Path) -> PathBuf {
    wal_dir.join(FILE)
}

/// Reads the file's first 1 KiB (missing: empty).
fn read_slots(vfs: &dyn Vfs, path: &Path) -> Result<Vec<u8>, IoError> {
    if !vfs.exists(path).map_err(IoError::with("checking", path))? {
        return Ok(Vec::new());
    }
    let f = vfs
        .open(path, OpenOptions::read_only())
        .map_err(IoError::with("opening", path))?;
    let mut buf = vec![0u8; 2 * SLOT as usize];
    let mut got = 0;
    while got < buf.len() {
        match f.read_at(&mut buf[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(IoError::at_offset("reading", path, got as u64, e)),
        }
    }
    buf.truncate(got);
    Ok(buf)
}

/// The durable end stamped in the log directory `wal_dir`, if any (no file, or no valid
/// slot: None), with the file's path.
pub fn read(vfs: &dyn Vfs, wal_dir: &Path) -> Result<(Option<Lsn>, PathBuf), IoError> {
    let path = path_in(wal_dir);
    let bytes = read_slots(vfs, &path)?;
    Ok((parse(&bytes).map(|(_, end)| Lsn(end)), path))
}

/// Removes the file of an old log from `wal_dir` (a new log's first open).
pub fn remove(vfs: &dyn Vfs, wal_dir: &Path) -> Result<(), IoError> {
    let path = path_in(wal_dir);
    if vfs
        .exists(&path)
        .map_err(IoError::with("checking", &path))?
    {
        vfs.unlink(&path)
            .map_err(IoError::with("removing", &path))?;
        vfs.sync_dir(wal_dir)
            .map_err(IoError::with("fsync of directory", wal_dir))?;
    }
    Ok(())
}

/// The open file and what was last stamped in it.
pub struct Stamp {
    file: Arc<dyn VfsFile>,
    /// The next slot's sequence number.
    state: Mutex<u64>,
    /// The largest end stamped durably (a committer whose flush is at or below it has
    /// nothing to do).
    stamped: AtomicU64,
}

impl Stamp {
    /// Opens (creating it, durably) the file in `wal_dir`, continuing its sequence.
    pub fn open(vfs: &dyn Vfs, wal_dir: &Path) -> Result<Stamp, IoError> {
        let path = path_in(wal_dir);
        let existed = vfs
            .exists(&path)
            .map_err(IoError::with("checking", &path))?;
        let (seq, end) = parse(&read_slots(vfs, &path)?).unwrap_or((0, 0));
        let file = vfs
            .open(&path, OpenOptions::create())
            .map_err(IoError::with("opening", &path))?;
        if !existed {
            vfs.sync_dir(wal_dir)
                .map_err(IoError::with("fsync of directory", wal_dir))?;
        }
        Ok(Stamp {
            file,
            state: Mutex::new(seq + 1),
            stamped: AtomicU64::new(end),
        })
    }

    /// The largest durable end stamped.
    pub fn end(&self) -> Lsn {
        Lsn(self.stamped.load(Ordering::Acquire))
    }

    /// Whether the durable end stamped covers `lsn`.
    pub fn covers(&self, lsn: Lsn) -> bool {
        self.stamped.load(Ordering::Acquire) >= lsn.0
    }

    /// Makes "the log is durable up to `flushed`" durable, unless a stamp already covers
    /// `lsn` (`lsn <= flushed`, the caller's flush having returned). One write and one
    /// sync; committers arriving meanwhile are covered by the next one (group stamping).
    pub fn stamp(&self, lsn: Lsn, flushed: impl Fn() -> Lsn) -> Result<(), IoError> {
        if self.covers(lsn) {
            return Ok(());
        }
        let mut seq = self.state.lock();
        if self.covers(lsn) {
            return Ok(());
        }
        // Read under the lock: everything flushed by now was synced before this write.
        let end = flushed().0;
        debug_assert!(end >= lsn.0, "stamping {lsn} before its flush returned");
        let bytes = encode(*seq, end);
        let at = (*seq % 2) * SLOT;
        let path = self.file.path().to_path_buf();
        let mut done = 0;
        while done < bytes.len() {
            match self.file.write_at(&bytes[done..], at + done as u64) {
                Ok(0) => {
                    return Err(IoError::short(
                        "writing",
                        &path,
                        crate::vfs::IoAt::Offset(at),
                        done,
                        bytes.len(),
                    ))
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(IoError::at_offset("writing", &path, at, e)),
            }
        }
        self.file
            .sync_data()
            .map_err(IoError::with("fdatasync", &path))?;
        *seq += 1;
        self.stamped.store(end, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newer_valid_slot_wins_and_damage_falls_back() {
        let mut f = vec![0u8; 1024];
        f[..512].copy_from_slice(&encode(4, 8192));
        f[512..].copy_from_slice(&encode(5, 16384));
        assert_eq!(parse(&f), Some((5, 16384)));
        f[520] ^= 1;
        assert_eq!(parse(&f), Some((4, 8192)));
        f[3] ^= 1;
        assert_eq!(parse(&f), None);
        assert_eq!(parse(&[]), None);
        assert_eq!(parse(&encode(1, 4096)[..100]), Some((1, 4096)));
        assert_eq!(parse(&encode(1, 4096)[..20]), None);
    }
}
