//! The `mini-checkpoint` strategy's all-scan (PostgreSQL 8.1's bgwriter_all_percent).

use super::*;

impl<'a> Round<'a> {
    /// Simon Riggs' second activity: a bounded all-scan that writes unpinned dirty buffers
    /// at any usage count.
    pub(super) fn mini_checkpoint(&mut self) {
        let nbuffers = self.pool.descs.len() as u64;
        let to_scan = nbuffers.div_ceil(MINI_CHECKPOINT_SCAN_DIVISOR);
        let max_writes = (self.pool.bgwriter.maxpages / 4).max(1);
        for _ in 0..to_scan {
            if self.pool.bgwriter.stop.load(Ordering::Relaxed) {
                self.report.stopped = true;
                return;
            }
            let id = (self.state.all_scan_next % nbuffers) as u32;
            self.state.all_scan_next += 1;
            self.report.buffers_scanned += 1;
            if let Visited::Written = self.sync_one(id, false) {
                self.report.mini_checkpoint_written += 1;
                if self.report.mini_checkpoint_written >= max_writes {
                    return;
                }
            }
        }
    }
}
