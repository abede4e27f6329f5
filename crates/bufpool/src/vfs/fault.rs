//! The fault-injecting I/O layer: wraps another [`Vfs`] and fails chosen calls (a
//! [`HookVfs`] whose hook is the rule set; the short transfers are `HookVfs`'s).
//!
//! Owns: a list of [`FaultRule`]s, each with a counter of the calls it matched. A rule
//! matches a call when the file's path contains `path_contains` and the operation is `op`
//! (or `op` is `Any`); matched calls number `nth`, `nth + 1`, ... `nth + times - 1` (1-based)
//! fail with the rule's fault. Invariants: a call that does not fail is passed through
//! unchanged; a short transfer really moves the bytes it reports (half the request, rounded
//! down to 512) and no more. Locks: the rule list's mutex, held only to count and decide.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::hook::{Call, HookVfs, Verdict};
use super::{OpenOptions, Vfs, VfsFile};
use crate::sync::{AtomicU64, Mutex, Ordering};

/// Which calls a rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp {
    /// open.
    Open,
    /// read_at and read_vectored_at.
    Read,
    /// write_at and write_vectored_at.
    Write,
    /// writeback (sync_file_range).
    Writeback,
    /// sync_all and sync_data.
    Fsync,
    /// set_len (ftruncate).
    Truncate,
    /// allocate (posix_fallocate: how relation files grow).
    Allocate,
    /// unlink.
    Unlink,
    /// rename (matched on the old name).
    Rename,
    /// sync_dir (fsync of a directory).
    SyncDir,
    /// symlink (matched on the link's path).
    Symlink,
    /// Every operation.
    Any,
}

/// What a failing call does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Fails with EIO.
    Eio,
    /// Fails with ENOSPC.
    Enospc,
    /// Transfers half the bytes (rounded down to 512) and reports that count; for calls
    /// that move no data it behaves like `Eio`.
    Short,
    /// Panics inside the call (an embedder's file system with a bug): the engine must
    /// turn it into an error for that I/O, never a hang.
    Panic,
    /// Sleeps this many microseconds, then lets the call through: a slow device or a
    /// stalled request, which moves the interleavings of the threads around it.
    Delay {
        /// How long to sleep, in microseconds.
        micros: u32,
    },
}

/// One fault to inject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRule {
    /// Matches calls on paths that contain this string.
    pub path_contains: String,
    /// The operation matched.
    pub op: FaultOp,
    /// 1-based number of the first matching call that fails.
    pub nth: u64,
    /// How many consecutive matching calls fail.
    pub times: u64,
    /// What the failing calls do.
    pub kind: FaultKind,
}

impl FaultRule {
    /// Fails only the `nth` call of `op` on paths containing `path_contains`.
    pub fn nth(path_contains: &str, op: FaultOp, nth: u64, kind: FaultKind) -> Self {
        Self {
            path_contains: path_contains.to_string(),
            op,
            nth,
            times: 1,
            kind,
        }
    }
}

#[derive(Debug)]
struct RuleState {
    rule: FaultRule,
    seen: u64,
}

/// Called with the file's path at the start of every `sync_data` and `sync_all` (before
/// any fault rule): a test can hold a sync there to order it against other threads.
pub type SyncHook = Arc<dyn Fn(&Path) + Send + Sync>;

#[derive(Default)]
struct HookSlot(Mutex<Option<SyncHook>>);

impl std::fmt::Debug for HookSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.lock().is_some() {
            "Some(SyncHook)"
        } else {
            "None"
        })
    }
}

#[derive(Debug, Default)]
struct Faults {
    rules: Mutex<Vec<RuleState>>,
    injected: AtomicU64,
    sync_hook: HookSlot,
}

impl Faults {
    fn check(&self, path: &Path, op: FaultOp) -> Option<FaultKind> {
        let mut rules = self.rules.lock();
        let path = path.to_string_lossy();
        let mut fault = None;
        for r in rules.iter_mut() {
            if (r.rule.op == op || r.rule.op == FaultOp::Any)
                && path.contains(&r.rule.path_contains)
            {
                r.seen += 1;
                if fault.is_none()
                    && r.seen >= r.rule.nth
                    && r.seen < r.rule.nth.saturating_add(r.rule.times)
                {
                    fault = Some(r.rule.kind);
                }
            }
        }
        if fault.is_some() {
            self.injected.fetch_add(1, Ordering::Relaxed);
        }
        fault
    }
}

fn error_of(kind: FaultKind) -> io::Error {
    match kind {
        FaultKind::Enospc => io::Error::from_raw_os_error(libc::ENOSPC),
        FaultKind::Eio | FaultKind::Short | FaultKind::Panic | FaultKind::Delay { .. } => {
            io::Error::from_raw_os_error(libc::EIO)
        }
    }
}

impl Faults {
    /// The verdict for one call: the sync hook first (for a file's sync), then the rules.
    /// A panic rule panics in a file's calls only (a name change fails with EIO).
    fn verdict(&self, call: &Call<'_>) -> Verdict {
        if call.op == FaultOp::Fsync {
            // Outside the hook's lock: it may block.
            let hook = self.sync_hook.0.lock().clone();
            if let Some(hook) = hook {
                hook(call.path);
            }
        }
        let file_op = !matches!(
            call.op,
            FaultOp::Open | FaultOp::Unlink | FaultOp::Rename | FaultOp::SyncDir | FaultOp::Symlink
        );
        match self.check(call.path, call.op) {
            None => Verdict::Pass,
            Some(FaultKind::Panic) if file_op => {
                panic!("injected panic in {:?} of {}", call.op, call.path.display())
            }
            Some(FaultKind::Short) if file_op => Verdict::Short,
            Some(FaultKind::Delay { micros }) => {
                std::thread::sleep(std::time::Duration::from_micros(u64::from(micros)));
                Verdict::Pass
            }
            Some(kind) => Verdict::Fail(error_of(kind)),
        }
    }
}

/// Wraps a [`Vfs`] and fails the calls its rules select: a [`HookVfs`] whose hook is the
/// rule set.
#[derive(Debug, Clone)]
pub struct FaultVfs {
    hooked: HookVfs,
    faults: Arc<Faults>,
}

impl FaultVfs {
    /// Wraps `inner`, with no rules yet.
    pub fn new(inner: Arc<dyn Vfs>) -> Self {
        let faults: Arc<Faults> = Arc::default();
        let f = faults.clone();
        Self {
            hooked: HookVfs::with_verdicts(inner, Arc::new(move |c: &Call<'_>| f.verdict(c))),
            faults,
        }
    }

    /// Adds a rule; calls before this one are not counted by it.
    pub fn add_rule(&self, rule: FaultRule) {
        self.faults.rules.lock().push(RuleState { rule, seen: 0 });
    }

    /// Removes every rule.
    pub fn clear_rules(&self) {
        self.faults.rules.lock().clear();
    }

    /// Installs (or, with None, removes) the hook every sync calls first.
    pub fn set_sync_hook(&self, hook: Option<SyncHook>) {
        *self.faults.sync_hook.0.lock() = hook;
    }

    /// How many calls have failed by injection so far.
    pub fn injected(&self) -> u64 {
        self.faults.injected.load(Ordering::Relaxed)
    }
}

impl Vfs for FaultVfs {
    fn open(&self, path: &Path, opts: OpenOptions) -> io::Result<Arc<dyn VfsFile>> {
        self.hooked.open(path, opts)
    }

    fn unlink(&self, path: &Path) -> io::Result<()> {
        self.hooked.unlink(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.hooked.rename(from, to)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.hooked.sync_dir(path)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.hooked.create_dir_all(path)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        self.hooked.exists(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.hooked.list_dir(path)
    }

    fn symlink(&self, target: &Path, link: &Path) -> io::Result<()> {
        self.hooked.symlink(target, link)
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        self.hooked.read_link(path)
    }

    fn device_id(&self, path: &Path) -> io::Result<Option<u64>> {
        self.hooked.device_id(path)
    }

    fn mode(&self, path: &Path) -> io::Result<Option<u32>> {
        self.hooked.mode(path)
    }

    fn file_kind(&self, path: &Path) -> io::Result<super::FileKind> {
        self.hooked.file_kind(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::MemVfs;

    #[test]
    fn fails_exactly_the_chosen_calls() {
        let mem = MemVfs::new();
        mem.create_dir_all(Path::new("/d")).unwrap();
        let vfs = FaultVfs::new(Arc::new(mem));
        vfs.add_rule(FaultRule {
            times: 2,
            ..FaultRule::nth("rel1", FaultOp::Write, 2, FaultKind::Enospc)
        });
        let a = vfs
            .open(Path::new("/d/rel1"), OpenOptions::create())
            .unwrap();
        let b = vfs
            .open(Path::new("/d/rel2"), OpenOptions::create())
            .unwrap();
        let buf = [7u8; 4096];
        assert_eq!(a.write_at(&buf, 0).unwrap(), 4096); // 1st: passes
        assert_eq!(b.write_at(&buf, 0).unwrap(), 4096); // other path: not counted
        let e = a.write_at(&buf, 0).unwrap_err(); // 2nd: fails
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert!(a.write_at(&buf, 0).is_err()); // 3rd: fails (times = 2)
        assert_eq!(a.write_at(&buf, 0).unwrap(), 4096); // 4th: passes
        assert_eq!(vfs.injected(), 2);
    }

    #[test]
    fn short_transfers_move_what_they_report() {
        let mem = MemVfs::new();
        mem.create_dir_all(Path::new("/d")).unwrap();
        let vfs = FaultVfs::new(Arc::new(mem.clone()));
        let f = vfs.open(Path::new("/d/x"), OpenOptions::create()).unwrap();
        vfs.add_rule(FaultRule::nth("x", FaultOp::Write, 1, FaultKind::Short));
        assert_eq!(f.write_at(&[1u8; 8192], 0).unwrap(), 4096);
        assert_eq!(mem.contents(Path::new("/d/x")).unwrap().len(), 4096);
        vfs.add_rule(FaultRule::nth("x", FaultOp::Read, 1, FaultKind::Short));
        let mut buf = [0u8; 4096];
        assert_eq!(f.read_at(&mut buf, 0).unwrap(), 2048);
        vfs.add_rule(FaultRule::nth("x", FaultOp::Fsync, 1, FaultKind::Eio));
        assert_eq!(f.sync_data().unwrap_err().raw_os_error(), Some(libc::EIO));
        assert!(f.sync_data().is_ok());
    }

    /// A delay lets the call through, after it: the data is written, and the call took at
    /// least the delay (a lower bound only: the machine may add to it, never remove).
    #[test]
    fn a_delay_passes_the_call_after_it() {
        let mem = MemVfs::new();
        mem.create_dir_all(Path::new("/d")).unwrap();
        let vfs = FaultVfs::new(Arc::new(mem.clone()));
        let f = vfs.open(Path::new("/d/x"), OpenOptions::create()).unwrap();
        let delay = FaultKind::Delay { micros: 20_000 };
        vfs.add_rule(FaultRule::nth("x", FaultOp::Write, 1, delay));
        let t = std::time::Instant::now();
        assert_eq!(f.write_at(&[7u8; 512], 0).unwrap(), 512);
        assert!(t.elapsed() >= std::time::Duration::from_millis(20));
        assert_eq!(mem.contents(Path::new("/d/x")).unwrap(), vec![7u8; 512]);
        assert_eq!(vfs.injected(), 1);
    }
}
