//! Waiting for a buffer's I/O to finish.
//!
//! Owns: a fixed set of (mutex, condition variable) stripes; buffer `i` uses stripe
//! `i % STRIPES`. Invariants: a waiter checks IO_IN_PROGRESS while holding its stripe's
//! mutex and sleeps atomically with releasing it; a completer clears the flag first, then
//! takes the mutex and notifies, so no wakeup is lost. Spurious wakeups (another buffer on
//! the same stripe) just re-check. Locks: one stripe mutex, never held across anything but
//! the flag check and the wait.

use super::descriptor::BufferDesc;
use super::state::IO_IN_PROGRESS;
use crate::sync::{Condvar, Mutex};

/// Stripes: enough that unrelated waits rarely share one; each is a few dozen bytes.
const STRIPES: usize = 256;

#[derive(Debug)]
pub struct IoWait {
    stripes: Box<[(Mutex<()>, Condvar)]>,
}

impl IoWait {
    pub fn new() -> Self {
        Self {
            stripes: (0..STRIPES)
                .map(|_| (Mutex::new(()), Condvar::new()))
                .collect(),
        }
    }

    /// Blocks until `desc` has no I/O in progress.
    pub fn wait(&self, desc: &BufferDesc) {
        // A waiter pins the buffer first, so the I/O it waits for is on its own page.
        debug_assert!(
            super::state::refcount(desc.load_state()) >= 1,
            "waiting for I/O on unpinned {desc:?}"
        );
        let (m, cv) = &self.stripes[desc.id as usize % STRIPES];
        let mut g = m.lock();
        while desc.load_state() & IO_IN_PROGRESS != 0 {
            g = cv.wait(g);
        }
    }

    /// Wakes the waiters of `desc`; call after clearing IO_IN_PROGRESS.
    pub fn wake(&self, desc: &BufferDesc) {
        let (m, cv) = &self.stripes[desc.id as usize % STRIPES];
        drop(m.lock());
        cv.notify_all();
    }
}
