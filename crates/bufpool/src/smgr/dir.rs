//! The data directory's lock file and its metadata file.
//!
//! Lock: `bufpool.lock` holds an advisory exclusive lock (flock) for as long as the directory
//! is open, and the holder's pid as text, so a second opener can name who holds it. A stale
//! file left by a killed process is harmless: the kernel released its flock.
//! Metadata: `bufpool.meta`, written once at creation (temp file, fsync, rename, fsync of the
//! directory), fixes the page size, the relation segment size and the WAL segment size:
//! ```text
//! bufpool data directory
//! format=1
//! block_size=8192
//! segment_size=1073741824
//! wal_segment_size=16777216   (absent in directories made before it was recorded)
//! crc32c=1a2b3c4d          (CRC32C of the lines above, newline included)
//! ```

use std::path::Path;
use std::sync::Arc;

use super::error::{file_err, SmgrError, SmgrResult};
use crate::vfs::{OpenOptions, Vfs, VfsFile};

pub(super) const LOCK_FILE: &str = "bufpool.lock";
pub(super) const META_FILE: &str = "bufpool.meta";
const META_FORMAT: u32 = 1;

/// Takes the directory lock, or reports who holds it.
pub(super) fn lock_directory(vfs: &dyn Vfs, dir: &Path) -> SmgrResult<Arc<dyn VfsFile>> {
    let path = dir.join(LOCK_FILE);
    let file = vfs
        .open(&path, OpenOptions::create())
        .map_err(file_err("opening lock file", &path))?;
    if !file
        .try_lock_exclusive()
        .map_err(file_err("locking", &path))?
    {
        let mut buf = [0u8; 32];
        let n = file.read_at(&mut buf, 0).unwrap_or(0);
        let pid = String::from_utf8_lossy(&buf[..n]).trim().to_string();
        let pid = if pid.is_empty() {
            "(unknown)".to_string()
        } else {
            pid
        };
        return Err(SmgrError::DirectoryLocked {
            dir: dir.to_path_buf(),
            lock: path,
            pid,
        });
    }
    let pid = format!("{}\n", std::process::id());
    file.set_len(0).map_err(file_err("truncating", &path))?;
    file.write_at(pid.as_bytes(), 0)
        .map_err(file_err("writing", &path))?;
    Ok(file)
}

/// Refuses a data directory that users other than its owner may write to (group or
/// others have the write bit): anyone who can write there can replace the engine's files
/// (PostgreSQL refuses such a directory too). File systems without modes pass.
pub(super) fn check_mode(vfs: &dyn Vfs, dir: &Path) -> SmgrResult<()> {
    let Some(mode) = vfs.mode(dir).map_err(file_err("looking at", dir))? else {
        return Ok(());
    };
    if mode & 0o022 != 0 {
        return Err(SmgrError::Directory {
            dir: dir.to_path_buf(),
            problem: format!(
                "has mode {mode:04o}: group or others may write to it; make it the owner's \
                 only (chmod 0700)"
            ),
        });
    }
    Ok(())
}

/// The layout fixed at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Meta {
    pub block_size: usize,
    pub segment_size: u64,
    /// None in a directory made before the WAL segment size was recorded (or by a storage
    /// manager opened without a log).
    pub wal_segment_size: Option<u64>,
}

fn render(meta: &Meta) -> String {
    let mut body = format!(
        "bufpool data directory\nformat={META_FORMAT}\nblock_size={}\nsegment_size={}\n",
        meta.block_size, meta.segment_size
    );
    if let Some(w) = meta.wal_segment_size {
        body.push_str(&format!("wal_segment_size={w}\n"));
    }
    let crc = crc32c::crc32c(body.as_bytes());
    format!("{body}crc32c={crc:08x}\n")
}

pub(super) fn write_meta(vfs: &dyn Vfs, dir: &Path, meta: &Meta) -> SmgrResult<()> {
    // Fixed for the directory's life: only a layout of whole pages per segment is written.
    debug_assert!(
        meta.block_size.is_power_of_two() && meta.segment_size % meta.block_size as u64 == 0,
        "layout block_size={} segment_size={} is not whole power-of-two pages per segment",
        meta.block_size,
        meta.segment_size
    );
    crate::vfs::write_atomic(vfs, &dir.join(META_FILE), render(meta).as_bytes())
        .map_err(SmgrError::Io)
}

pub(super) fn read_meta(vfs: &dyn Vfs, dir: &Path) -> SmgrResult<Meta> {
    let path = dir.join(META_FILE);
    let f = vfs
        .open(&path, OpenOptions::read_only())
        .map_err(file_err("opening", &path))?;
    let len = f.len().map_err(file_err("reading size of", &path))? as usize;
    let bad = |problem: String| SmgrError::Directory {
        dir: dir.to_path_buf(),
        problem: format!("{}: {problem}", path.display()),
    };
    if len > 4096 {
        return Err(bad(format!("{len} bytes is too large for a metadata file")));
    }
    let mut buf = vec![0u8; len];
    let n = f.read_at(&mut buf, 0).map_err(file_err("reading", &path))?;
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    let Some(crc_at) = text.rfind("crc32c=") else {
        return Err(bad(
            "no checksum line (truncated or not a bufpool metadata file)".into(),
        ));
    };
    let (body, crc_line) = text.split_at(crc_at);
    let stored = u32::from_str_radix(crc_line.trim_start_matches("crc32c=").trim(), 16)
        .map_err(|_| bad("unreadable checksum line".into()))?;
    let computed = crc32c::crc32c(body.as_bytes());
    if stored != computed {
        return Err(bad(format!(
            "checksum mismatch (stored {stored:08x}, computed {computed:08x})"
        )));
    }
    let field = |key: &str| -> SmgrResult<u64> {
        body.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
            .ok_or_else(|| bad(format!("missing {key}")))?
            .parse()
            .map_err(|_| bad(format!("unreadable {key}")))
    };
    let format = field("format")?;
    if format != u64::from(META_FORMAT) {
        return Err(bad(format!(
            "format {format} is not supported (this build reads {META_FORMAT})"
        )));
    }
    let wal_segment_size = match field("wal_segment_size") {
        Ok(w) => Some(w),
        Err(_) if !body.lines().any(|l| l.starts_with("wal_segment_size=")) => None,
        Err(e) => return Err(e),
    };
    Ok(Meta {
        block_size: field("block_size")? as usize,
        segment_size: field("segment_size")?,
        wal_segment_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::MemVfs;

    #[test]
    fn meta_round_trips_and_damage_is_named() {
        let vfs = MemVfs::new();
        let dir = Path::new("/db");
        vfs.create_dir_all(dir).unwrap();
        let meta = Meta {
            wal_segment_size: Some(16 << 20),
            block_size: 16384,
            segment_size: 1 << 30,
        };
        write_meta(&vfs, dir, &meta).unwrap();
        assert_eq!(read_meta(&vfs, dir).unwrap(), meta);
        let path = dir.join(META_FILE);
        let mut bytes = vfs.contents(&path).unwrap();
        bytes[40] ^= 1;
        vfs.set_contents(&path, bytes);
        let err = read_meta(&vfs, dir).unwrap_err().to_string();
        assert!(
            err.contains("bufpool.meta") && err.contains("checksum"),
            "{err}"
        );
        vfs.set_contents(&path, b"garbage".to_vec());
        let err = read_meta(&vfs, dir).unwrap_err().to_string();
        assert!(err.contains("no checksum"), "{err}");
    }
}
