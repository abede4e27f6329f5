//! The one door to atomics, locks and condition variables.
//!
//! Owns: nothing but type aliases and thin wrappers. Normal builds use `std` atomics and
//! `parking_lot` locks; under `--cfg shuttle` every primitive comes from `shuttle`, so the
//! model test (`tests/model.rs`) can explore interleavings of the real buffer-pool code.
//! Invariants: no module outside this one names `std::sync::atomic`, `parking_lot` or
//! `shuttle` directly for state that other threads share.
//! Locks: none of its own.

#[cfg(not(shuttle))]
pub use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

#[cfg(shuttle)]
pub use shuttle::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

pub use std::sync::Arc;

/// Mutual exclusion lock with parking_lot's panic-free API (`lock()` returns the guard).
#[derive(Debug, Default)]
pub struct Mutex<T>(
    #[cfg(not(shuttle))] parking_lot::Mutex<T>,
    #[cfg(shuttle)] shuttle::sync::Mutex<T>,
);

#[cfg(not(shuttle))]
pub type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;
#[cfg(shuttle)]
pub type MutexGuard<'a, T> = shuttle::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub fn new(value: T) -> Self {
        #[cfg(not(shuttle))]
        return Self(parking_lot::Mutex::new(value));
        #[cfg(shuttle)]
        return Self(shuttle::sync::Mutex::new(value));
    }

    pub fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(not(shuttle))]
        return self.0.lock();
        #[cfg(shuttle)]
        return self.0.lock().unwrap_or_else(|e| e.into_inner());
    }

    /// The lock if it is free now; never waits.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        #[cfg(not(shuttle))]
        return self.0.try_lock();
        #[cfg(shuttle)]
        return granted(self.0.try_lock());
    }
}

/// A shuttle try-lock's outcome as parking_lot's: the guard (poisoning ignored, as the
/// blocking calls do), or None if the lock is taken.
#[cfg(shuttle)]
fn granted<G>(r: std::sync::TryLockResult<G>) -> Option<G> {
    match r {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// Reader-writer lock with parking_lot's panic-free API.
#[derive(Debug, Default)]
pub struct RwLock<T>(
    #[cfg(not(shuttle))] parking_lot::RwLock<T>,
    #[cfg(shuttle)] shuttle::sync::RwLock<T>,
);

#[cfg(not(shuttle))]
pub type RwLockReadGuard<'a, T> = parking_lot::RwLockReadGuard<'a, T>;
#[cfg(not(shuttle))]
pub type RwLockWriteGuard<'a, T> = parking_lot::RwLockWriteGuard<'a, T>;
#[cfg(shuttle)]
pub type RwLockReadGuard<'a, T> = shuttle::sync::RwLockReadGuard<'a, T>;
#[cfg(shuttle)]
pub type RwLockWriteGuard<'a, T> = shuttle::sync::RwLockWriteGuard<'a, T>;

impl<T> RwLock<T> {
    pub fn new(value: T) -> Self {
        #[cfg(not(shuttle))]
        return Self(parking_lot::RwLock::new(value));
        #[cfg(shuttle)]
        return Self(shuttle::sync::RwLock::new(value));
    }

    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        #[cfg(not(shuttle))]
        return self.0.read();
        #[cfg(shuttle)]
        return self.0.read().unwrap_or_else(|e| e.into_inner());
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        #[cfg(not(shuttle))]
        return self.0.write();
        #[cfg(shuttle)]
        return self.0.write().unwrap_or_else(|e| e.into_inner());
    }

    /// The lock shared if that is possible now; never waits.
    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
        #[cfg(not(shuttle))]
        return self.0.try_read();
        #[cfg(shuttle)]
        return granted(self.0.try_read());
    }

    /// The lock exclusively if it is free now; never waits.
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        #[cfg(not(shuttle))]
        return self.0.try_write();
        #[cfg(shuttle)]
        return granted(self.0.try_write());
    }
}

/// Condition variable paired with [`Mutex`].
#[derive(Debug, Default)]
pub struct Condvar(
    #[cfg(not(shuttle))] parking_lot::Condvar,
    #[cfg(shuttle)] shuttle::sync::Condvar,
);

impl Condvar {
    pub fn new() -> Self {
        #[cfg(not(shuttle))]
        return Self(parking_lot::Condvar::new());
        #[cfg(shuttle)]
        return Self(shuttle::sync::Condvar::new());
    }

    /// Blocks until notified; the caller re-checks its condition in a loop.
    pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        #[cfg(not(shuttle))]
        {
            let mut guard = guard;
            self.0.wait(&mut guard);
            guard
        }
        #[cfg(shuttle)]
        return self.0.wait(guard).unwrap_or_else(|e| e.into_inner());
    }

    /// Blocks until notified or until `timeout` has passed; returns the guard and whether
    /// it timed out. Under shuttle it never times out (shuttle models no time), so a model
    /// test sees a missed notification as a deadlock rather than a late wake-up.
    pub fn wait_for<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: std::time::Duration,
    ) -> (MutexGuard<'a, T>, bool) {
        #[cfg(not(shuttle))]
        {
            let mut guard = guard;
            let r = self.0.wait_for(&mut guard, timeout);
            (guard, r.timed_out())
        }
        #[cfg(shuttle)]
        {
            let (guard, r) = self
                .0
                .wait_timeout(guard, timeout)
                .unwrap_or_else(|e| e.into_inner());
            (guard, r.timed_out())
        }
    }

    pub fn notify_all(&self) {
        self.0.notify_all();
    }

    pub fn notify_one(&self) {
        self.0.notify_one();
    }
}

/// Gives up the CPU to another thread (under shuttle: to another modeled thread).
pub fn yield_now() {
    #[cfg(not(shuttle))]
    std::thread::yield_now();
    #[cfg(shuttle)]
    shuttle::thread::yield_now();
}

/// Sleeps `d` (under shuttle, which models no time: yields instead). For waits on another
/// thread's pin that has lasted past a few yields, never for synchronization.
pub fn sleep(d: std::time::Duration) {
    #[cfg(not(shuttle))]
    std::thread::sleep(d);
    #[cfg(shuttle)]
    {
        let _ = d;
        shuttle::thread::yield_now();
    }
}

/// A joinable thread of the library's own (I/O workers): a named `std` thread normally, a
/// modeled thread under shuttle (which ignores the name).
pub type JoinHandle<T> = ThreadHandle<T>;

#[cfg(not(shuttle))]
type ThreadHandle<T> = std::thread::JoinHandle<T>;
#[cfg(shuttle)]
type ThreadHandle<T> = shuttle::thread::JoinHandle<T>;

/// Starts a thread named `name` running `f`.
pub fn spawn<T: Send + 'static>(
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<JoinHandle<T>> {
    #[cfg(not(shuttle))]
    return std::thread::Builder::new().name(name).spawn(f);
    #[cfg(shuttle)]
    {
        let _ = name;
        Ok(shuttle::thread::spawn(f))
    }
}

/// Spins politely while another thread holds a short critical section (a buffer header
/// lock). After a few rounds of CPU spin hints it yields the core, so that a holder that was
/// descheduled on this 2-core machine can run. Under shuttle every call yields to the
/// scheduler, so spin loops cannot starve the other modeled threads.
#[derive(Debug, Default)]
pub struct SpinWait {
    #[cfg_attr(shuttle, allow(dead_code))]
    rounds: u32,
}

impl SpinWait {
    /// Rounds of busy spinning before each spin turns into a yield.
    #[cfg_attr(shuttle, allow(dead_code))]
    const SPIN_ROUNDS: u32 = 6;

    pub fn new() -> Self {
        Self { rounds: 0 }
    }

    pub fn spin(&mut self) {
        #[cfg(not(shuttle))]
        {
            if self.rounds < Self::SPIN_ROUNDS {
                for _ in 0..(1u32 << self.rounds) {
                    std::hint::spin_loop();
                }
                self.rounds += 1;
            } else {
                std::thread::yield_now();
            }
        }
        #[cfg(shuttle)]
        shuttle::thread::yield_now();
    }
}

/// The content lock of one buffer: a raw reader-writer lock whose guards live in
/// `buffer::guard`, so that a guard can hold both a pin and the lock without borrowing a
/// lock object. Normal builds use parking_lot's word-sized lock.
pub struct RawContentLock {
    #[cfg(not(shuttle))]
    raw: parking_lot::RawRwLock,
    /// Under shuttle: (readers, the writer's thread) behind a modeled mutex and condition
    /// variable. The writer is recorded so that a release by another thread, which the
    /// lock's contract forbids, fails the model.
    #[cfg(shuttle)]
    state: shuttle::sync::Mutex<(u32, Option<shuttle::thread::ThreadId>)>,
    #[cfg(shuttle)]
    cond: shuttle::sync::Condvar,
}

#[cfg(not(shuttle))]
use parking_lot::lock_api::RawRwLock as _;

impl Default for RawContentLock {
    fn default() -> Self {
        Self::new()
    }
}

impl RawContentLock {
    pub fn new() -> Self {
        #[cfg(not(shuttle))]
        return Self {
            raw: parking_lot::RawRwLock::INIT,
        };
        #[cfg(shuttle)]
        return Self {
            state: shuttle::sync::Mutex::new((0, None)),
            cond: shuttle::sync::Condvar::new(),
        };
    }

    #[inline]
    pub fn lock_shared(&self) {
        #[cfg(not(shuttle))]
        self.raw.lock_shared();
        #[cfg(shuttle)]
        {
            let mut s = self.state.lock().unwrap();
            while s.1.is_some() {
                s = self.cond.wait(s).unwrap();
            }
            s.0 += 1;
        }
    }

    #[inline]
    pub fn try_lock_shared(&self) -> bool {
        #[cfg(not(shuttle))]
        return self.raw.try_lock_shared();
        #[cfg(shuttle)]
        {
            let mut s = self.state.lock().unwrap();
            if s.1.is_some() {
                return false;
            }
            s.0 += 1;
            true
        }
    }

    #[inline]
    pub fn try_lock_exclusive(&self) -> bool {
        #[cfg(not(shuttle))]
        return self.raw.try_lock_exclusive();
        #[cfg(shuttle)]
        {
            let mut s = self.state.lock().unwrap();
            if s.1.is_some() || s.0 > 0 {
                return false;
            }
            s.1 = Some(shuttle::thread::current().id());
            true
        }
    }

    #[inline]
    pub fn lock_exclusive(&self) {
        #[cfg(not(shuttle))]
        self.raw.lock_exclusive();
        #[cfg(shuttle)]
        {
            let mut s = self.state.lock().unwrap();
            while s.1.is_some() || s.0 > 0 {
                s = self.cond.wait(s).unwrap();
            }
            s.1 = Some(shuttle::thread::current().id());
        }
    }

    /// Releases a shared hold.
    ///
    /// # Safety
    /// The calling context must hold the lock shared (acquired by `lock_shared` or a
    /// successful `try_lock_shared`) and give that hold up with this call.
    #[inline]
    pub unsafe fn unlock_shared(&self) {
        #[cfg(not(shuttle))]
        // SAFETY: forwarded from this function's contract: the lock is held shared.
        unsafe {
            self.raw.unlock_shared()
        };
        #[cfg(shuttle)]
        {
            let mut s = self.state.lock().unwrap();
            assert!(
                s.0 > 0 && s.1.is_none(),
                "unlock_shared without a shared hold"
            );
            s.0 -= 1;
            self.cond.notify_all();
        }
    }

    /// Releases an exclusive hold.
    ///
    /// # Safety
    /// The calling context must hold the lock exclusively and give that hold up.
    #[inline]
    pub unsafe fn unlock_exclusive(&self) {
        #[cfg(not(shuttle))]
        // SAFETY: forwarded from this function's contract: the lock is held exclusively.
        unsafe {
            self.raw.unlock_exclusive()
        };
        #[cfg(shuttle)]
        {
            let mut s = self.state.lock().unwrap();
            assert!(s.1.is_some(), "unlock_exclusive without an exclusive hold");
            assert_eq!(
                s.1,
                Some(shuttle::thread::current().id()),
                "unlock_exclusive by a thread that does not hold the lock"
            );
            s.1 = None;
            self.cond.notify_all();
        }
    }
}

impl std::fmt::Debug for RawContentLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RawContentLock")
    }
}
