//! The `mini-checkpoint` strategy's all-scan (PostgreSQL 8.1's bgwriter_all_percent).

use super::*;

impl BufferPool {
    /// Simon Riggs' second activity: a bounded all-scan that writes unpinned dirty buffers
    /// at any usage count.
    pub(super) fn mini_checkpoint(&self, state: &mut RoundState, report: &mut RoundReport) {
        let nbuffers = self.descs.len() as u64;
        let to_scan = nbuffers.div_ceil(MINI_CHECKPOINT_SCAN_DIVISOR);
        let max_writes = (self.bgwriter.maxpages / 4).max(1);
        for _ in 0..to_scan {
            if self.bgwriter.stop.load(Ordering::Relaxed) {
                report.stopped = true;
                return;
            }
            let id = (state.all_scan_next % nbuffers) as u32;
            state.all_scan_next += 1;
            report.buffers_scanned += 1;
            if let Visited::Written = self.sync_one_buffer(state, id, false, report) {
                report.mini_checkpoint_written += 1;
                if report.mini_checkpoint_written >= max_writes {
                    return;
                }
            }
        }
    }
}
