//! Ctrl-C as every run takes it (`bench`, the main job, `compare`, SQLite's side of it):
//! the first asks the run to stop (a flag its clients look at after each transaction, so
//! what was measured is still written), the second quits at once (exit status 130). A
//! leaf.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Installs the handler; the flag it sets on the first Ctrl-C.
pub(crate) fn install_ctrl_c() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    // A second handler install (main job after init) fails harmlessly.
    let _ = ctrlc::set_handler(move || {
        if s.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("stopping: finishing the transactions in flight (Ctrl-C again to quit now)");
    });
    stop
}
