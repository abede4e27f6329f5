//! A handle on a simulated file: reads see the written bytes, writes are pending until an
//! fsync (or go straight to the durable bytes through an `O_DSYNC` handle), and every call
//! fails once a crash happened after the handle was opened.

use std::io::{self, IoSlice, IoSliceMut};
use std::path::PathBuf;

use super::*;

/// Largest file length accepted. An in-memory file beyond this is surely an offset computed
/// from garbage in the caller; failing with EFBIG is kinder than aborting on allocation.
pub(super) const MAX_FILE_LEN: u64 = 1 << 32;

#[derive(Debug)]
pub(super) struct SimFile {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) node: NodeId,
    /// Identifies this handle as an advisory lock holder.
    pub(super) handle: u64,
    /// The crash epoch this handle was opened in.
    pub(super) epoch: u64,
    pub(super) path: PathBuf,
    pub(super) writable: bool,
    pub(super) dsync: bool,
}

impl SimFile {
    /// Locks the state, failing if a crash happened since this handle was opened.
    fn lock(&self) -> io::Result<MutexGuard<'_, State>> {
        let st = self.state.lock();
        if st.epoch != self.epoch {
            return Err(io::Error::other("handle from before the simulated crash"));
        }
        Ok(st)
    }

    /// Locks the state for a mutating call on this file.
    fn lock_mut(&self) -> io::Result<MutexGuard<'_, State>> {
        let mut st = self.lock()?;
        if !self.writable {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        st.begin_mutation()?;
        Ok(st)
    }

    fn write(&self, data: Vec<u8>, offset: u64) -> io::Result<usize> {
        let mut st = self.lock_mut()?;
        let len = data.len();
        if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > MAX_FILE_LEN)
        {
            return Err(io::Error::from_raw_os_error(libc::EFBIG));
        }
        if len == 0 {
            return Ok(0);
        }
        let seq = st.take_seq();
        let node = st.node_mut(self.node)?;
        apply_write(&mut node.written, offset, &data);
        node.pending.push(DataOp::Write {
            offset,
            data,
            forced: self.dsync,
            seq,
        });
        Ok(len)
    }

    fn sync(&self) -> io::Result<()> {
        let mut st = self.lock()?;
        st.begin_mutation()?;
        if st.node_mut(self.node)?.pending.iter().any(DataOp::losable) {
            st.record_sync_point(format!("sync of {}", self.path.display()));
        }
        let node = st.node_mut(self.node)?;
        if !node.pending.is_empty() {
            node.durable = node.written.clone();
            node.pending.clear();
        }
        Ok(())
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut st = self.state.lock();
        if st.epoch != self.epoch {
            return;
        }
        if let Some(node) = st.nodes.get_mut(&self.node) {
            if node.lock_holder == Some(self.handle) {
                node.lock_holder = None;
            }
        }
    }
}

impl VfsFile for SimFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut st = self.lock()?;
        let data = &st.node_mut(self.node)?.written;
        let start = (offset.min(data.len() as u64)) as usize;
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.write(buf.to_vec(), offset)
    }

    fn read_vectored_at(&self, bufs: &mut [IoSliceMut<'_>], offset: u64) -> io::Result<usize> {
        let mut st = self.lock()?;
        let data = &st.node_mut(self.node)?.written;
        let mut pos = (offset.min(data.len() as u64)) as usize;
        let mut total = 0;
        for b in bufs.iter_mut() {
            let n = b.len().min(data.len() - pos);
            b[..n].copy_from_slice(&data[pos..pos + n]);
            pos += n;
            total += n;
            if n < b.len() {
                break;
            }
        }
        Ok(total)
    }

    fn write_vectored_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
        let data: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
        self.write(data, offset)
    }

    fn writeback(&self, _offset: u64, _len: u64) -> io::Result<()> {
        self.lock().map(drop)
    }

    fn sync_all(&self) -> io::Result<()> {
        self.sync()
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut st = self.lock_mut()?;
        if len > MAX_FILE_LEN {
            return Err(io::Error::from_raw_os_error(libc::EFBIG));
        }
        let seq = st.take_seq();
        let node = st.node_mut(self.node)?;
        node.written.resize(len as usize, 0);
        node.pending.push(DataOp::SetLen { len, seq });
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        let mut st = self.lock()?;
        Ok(st.node_mut(self.node)?.written.len() as u64)
    }

    fn try_lock_exclusive(&self) -> io::Result<bool> {
        let mut st = self.lock()?;
        let node = st.node_mut(self.node)?;
        match node.lock_holder {
            Some(h) => Ok(h == self.handle),
            None => {
                node.lock_holder = Some(self.handle);
                Ok(true)
            }
        }
    }
}
