//! Doubly linked lists of buffers through their policy words, for the list policies
//! (`sieve.rs`, `s3fifo.rs`).
//!
//! Owns: [`DList`] (head, tail, length) and the policy word's layout: the newer and older
//! neighbour (31 bits each: ids stay below 2^31 - 1, see `options::MAX_BUFFERS`), a linked
//! bit and which of up to two lists the buffer is on. Invariants: a buffer is on at most one
//! list; its word is zero when on none. Locks: none of its own; callers hold their policy's
//! mutex for every change.

use super::Frames;
use crate::sync::{Mutex, MutexGuard, Ordering};
use crate::waits::{timed, Wait};

/// A list policy's mutex, its wait counted (`replacement_lock`) when another thread holds
/// it.
pub fn lock_counted<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.try_lock() {
        Some(g) => g,
        None => timed(Wait::ReplacementLock, || m.lock()),
    }
}

/// "No buffer" in a link.
pub const NIL: u32 = 0x7FFF_FFFF;
const LINKED: u64 = 1 << 63;
const SECOND: u64 = 1 << 31;

#[inline]
fn pack(newer: u32, older: u32, list: u8) -> u64 {
    let second = if list == 1 { SECOND } else { 0 };
    LINKED | second | (u64::from(newer) << 32) | u64::from(older)
}

#[inline]
pub fn newer(w: u64) -> u32 {
    ((w >> 32) as u32) & NIL
}

#[inline]
fn older(w: u64) -> u32 {
    w as u32 & NIL
}

/// Which list (0 or 1) the word says its buffer is on, if any.
#[inline]
pub fn list_of(w: u64) -> Option<u8> {
    (w & LINKED != 0).then_some(u8::from(w & SECOND != 0))
}

/// One list, newest at the head.
#[derive(Debug)]
pub struct DList {
    pub head: u32,
    pub tail: u32,
    pub len: u64,
    /// This list's number in the link words (0 or 1).
    which: u8,
}

impl DList {
    pub const fn new(which: u8) -> Self {
        Self {
            head: NIL,
            tail: NIL,
            len: 0,
            which,
        }
    }

    /// Links `id` (on no list) at the head.
    pub fn push_head<F: Frames + ?Sized>(&mut self, f: &F, id: u32) {
        debug_assert!(list_of(f.link(id).load(Ordering::Relaxed)).is_none());
        f.link(id)
            .store(pack(NIL, self.head, self.which), Ordering::Relaxed);
        if self.head != NIL {
            let h = f.link(self.head).load(Ordering::Relaxed);
            f.link(self.head)
                .store(pack(id, older(h), self.which), Ordering::Relaxed);
        } else {
            self.tail = id;
        }
        self.head = id;
        self.len += 1;
    }

    /// Unlinks `id`, which is on this list.
    pub fn unlink<F: Frames + ?Sized>(&mut self, f: &F, id: u32) {
        let w = f.link(id).load(Ordering::Relaxed);
        debug_assert_eq!(
            list_of(w),
            Some(self.which),
            "buffer {id} is not on this list"
        );
        let (n, o) = (newer(w), older(w));
        if n != NIL {
            let nw = f.link(n).load(Ordering::Relaxed);
            f.link(n)
                .store(pack(newer(nw), o, self.which), Ordering::Relaxed);
        } else {
            self.head = o;
        }
        if o != NIL {
            let ow = f.link(o).load(Ordering::Relaxed);
            f.link(o)
                .store(pack(n, older(ow), self.which), Ordering::Relaxed);
        } else {
            self.tail = n;
        }
        f.link(id).store(0, Ordering::Relaxed);
        self.len -= 1;
    }

    /// Walks the list from the tail, checking links both ways and the length; marks each
    /// buffer in `seen` (an error if already marked).
    pub fn check<F: Frames + ?Sized>(&self, f: &F, seen: &mut [bool]) -> Result<(), String> {
        let (mut at, mut prev, mut n) = (self.tail, NIL, 0u64);
        while at != NIL {
            if std::mem::replace(&mut seen[at as usize], true) {
                return Err(format!("buffer {at} is on a list twice"));
            }
            let w = f.link(at).load(Ordering::Relaxed);
            if list_of(w) != Some(self.which) || older(w) != prev {
                return Err(format!(
                    "buffer {at}'s links {w:#x} do not point back to {prev} on list {}",
                    self.which
                ));
            }
            (prev, at, n) = (at, newer(w), n + 1);
        }
        if prev != self.head || n != self.len {
            return Err(format!(
                "walked {n} buffers to {prev} on list {}; it says {} ending at {}",
                self.which, self.len, self.head
            ));
        }
        Ok(())
    }
}

/// The check every list policy ends with: the buffers on its lists (`seen`) are exactly
/// those that hold a page.
pub fn check_membership<F: Frames + ?Sized>(f: &F, seen: &[bool]) -> Result<(), String> {
    use crate::buffer::state::TAG_VALID;
    for id in 0..f.len() as u32 {
        let linked = list_of(f.link(id).load(Ordering::Relaxed)).is_some();
        if linked != seen[id as usize] {
            return Err(format!("buffer {id} is marked linked but is not on a list"));
        }
        let holds_page = f.state(id).load(Ordering::Relaxed) & TAG_VALID != 0;
        if holds_page != seen[id as usize] {
            return Err(format!(
                "buffer {id} {} a page but is {}on a list",
                if holds_page { "holds" } else { "holds no" },
                if seen[id as usize] { "" } else { "not " }
            ));
        }
    }
    Ok(())
}
