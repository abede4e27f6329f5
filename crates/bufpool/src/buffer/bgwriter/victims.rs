//! The `victim-queue` strategy: the bgwriter runs the clock sweep for the upcoming
//! allocations and queues clean victims.

use super::*;

impl BufferPool {
    /// The victim-queue round: sweep for the upcoming allocations not already queued,
    /// write dirty victims, queue clean ones.
    pub(super) fn victim_queue_round(&self, state: &mut RoundState) -> RoundReport {
        let mut report = RoundReport::default();
        let nbuffers = self.descs.len() as u64;
        let (_, upcoming_raw) = self.bgwriter_estimate(state, &mut report);
        let queue = self.bgwriter.victim_queue.as_ref().expect("victim queue");
        if self.bgwriter.maxpages == 0 {
            return report;
        }
        let room = (queue.capacity() - queue.len().min(queue.capacity())) as u64;
        let want = (upcoming_raw.ceil() as u64)
            .saturating_sub(queue.len() as u64)
            .min(room);
        report.upcoming_estimate = want;
        // At most one lap of the hand per round: bounds a round on a pool that is all hot.
        let mut budget = nbuffers;
        while report.victims_queued < want && budget > 0 {
            if self.bgwriter.stop.load(Ordering::Relaxed) {
                report.stopped = true;
                break;
            }
            budget -= 1;
            report.buffers_scanned += 1;
            let (id, visit) = self.clock.sweep_step(&self.descs);
            let crate::buffer::descriptor::Visit::Pinned(s) = visit else {
                continue;
            };
            // We hold the sweep's pin on an unpinned usage-0 buffer.
            let d = &self.descs[id as usize];
            let pinned = BufferRef { pool: self, id };
            if s & DIRTY != 0 {
                if report.buffers_written >= self.bgwriter.maxpages {
                    report.hit_maxpages = true;
                    break;
                }
                if !d.content_lock.try_lock_shared() {
                    continue;
                }
                let result = self.flush_locked(id, IoContext::Normal);
                // SAFETY: taken by the successful try_lock_shared above.
                unsafe { d.content_lock.unlock_shared() };
                match result {
                    Ok(true) => {
                        report.buffers_written += 1;
                        self.mark_cleaned(id);
                        let _ = state
                            .writeback
                            .add(&self.smgr, pinned.tag(), IoContext::Normal);
                    }
                    Ok(false) => {}
                    Err(e) => {
                        report.write_errors += 1;
                        let hook = self.bgwriter.error_hook.lock().clone();
                        if let Some(h) = hook {
                            h(&e);
                        }
                        continue;
                    }
                }
            }
            drop(pinned);
            if queue.push(id) {
                report.victims_queued += 1;
                report.reusable_found += 1;
            } else {
                break;
            }
        }
        debug_assert!(
            report.victims_queued <= want && report.buffers_written <= self.bgwriter.maxpages,
            "round queued {} of {want} victims and wrote {} pages (cap {})",
            report.victims_queued,
            report.buffers_written,
            self.bgwriter.maxpages
        );
        report
    }

    /// Takes a victim for an allocation, pinned, with its state: the free list first, then
    /// (victim-queue strategy) a queued buffer that is still unpinned, usage 0, clean and
    /// idle, else the clock sweep. Wakes a hibernating bgwriter.
    pub(in crate::buffer) fn take_victim(
        &self,
    ) -> Result<(u32, u64), crate::buffer::clock::AllPinned> {
        if let Some(queue) = self.bgwriter.victim_queue() {
            if !self.clock.has_free() {
                for _ in 0..VICTIM_QUEUE_POPS_MAX {
                    let Some(id) = queue.pop() else { break };
                    let d = &self.descs[id as usize];
                    let s = d.lock_header();
                    if refcount(s) == 0 && usage(s) == 0 && s & (DIRTY | IO_IN_PROGRESS) == 0 {
                        let pinned = (s + REFCOUNT_ONE) & !LOCKED;
                        d.unlock_header(pinned);
                        self.clock.count_allocation();
                        self.bgwriter.count_victim_popped();
                        self.bgwriter.note_allocation();
                        return Ok((id, pinned));
                    }
                    d.unlock_header(s);
                }
            }
        }
        let r = self.clock.victim(&self.descs);
        debug_assert!(
            r.is_err()
                || r.is_ok_and(|(id, s)| {
                    (id as usize) < self.descs.len() && refcount(s) >= 1 && s & LOCKED == 0
                }),
            "the sweep's victim {r:?} is not a pinned, unlocked buffer of the pool"
        );
        self.bgwriter.note_allocation();
        if let Ok((_, s)) = r {
            if s & DIRTY != 0 {
                self.bgwriter.note_dirty_victim(self.clock.hand());
            }
        }
        r
    }
}
