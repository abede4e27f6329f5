//! The `victim-queue` strategy: the bgwriter runs the clock sweep for the upcoming
//! allocations and queues clean victims.

use super::*;

impl BufferPool {
    /// Takes a victim for an allocation, pinned, with its state: the free list first, then
    /// (victim-queue strategy) a queued buffer that is still unpinned, usage 0, clean and
    /// idle, else the clock sweep. Wakes a hibernating bgwriter.
    pub(in crate::buffer) fn take_victim(
        &self,
    ) -> Result<(u32, u64), crate::buffer::policy::AllPinned> {
        if let Some(queue) = self.bgwriter.victim_queue() {
            if !self.repl.has_free() {
                for _ in 0..VICTIM_QUEUE_POPS_MAX {
                    let Some(id) = queue.pop() else { break };
                    let d = &self.descs[id as usize];
                    let s = d.lock_header();
                    if refcount(s) == 0 && usage(s) == 0 && s & (DIRTY | IO_IN_PROGRESS) == 0 {
                        let pinned = (s + REFCOUNT_ONE) & !LOCKED;
                        d.unlock_header(pinned);
                        self.repl.count_allocation();
                        self.bgwriter.count_victim_popped();
                        self.bgwriter.note_allocation();
                        return Ok((id, pinned));
                    }
                    d.unlock_header(s);
                }
            }
        }
        let r = self.repl.victim(&*self.descs);
        debug_assert!(
            r.is_err()
                || r.is_ok_and(|(id, s)| {
                    (id as usize) < self.descs.len() && refcount(s) >= 1 && s & LOCKED == 0
                }),
            "the sweep's victim {r:?} is not a pinned, unlocked buffer of the pool"
        );
        self.bgwriter.note_allocation();
        if let Ok((id, s)) = r {
            self.arena.handing_out(id, self.repl.active());
            if s & DIRTY != 0 {
                self.bgwriter.note_dirty_victim(self.repl.hand());
            }
        }
        r
    }
}

impl<'a> Round<'a> {
    /// The victim-queue round: sweep for the upcoming allocations not already queued,
    /// write dirty victims, queue clean ones.
    pub(super) fn victim_queue(&mut self) {
        let nbuffers = self.pool.descs.len() as u64;
        let (_, upcoming_raw) = self.estimate();
        let queue = self
            .pool
            .bgwriter
            .victim_queue
            .as_ref()
            .expect("victim queue");
        if self.pool.bgwriter.maxpages == 0 {
            return;
        }
        let room = (queue.capacity() - queue.len().min(queue.capacity())) as u64;
        let want = (upcoming_raw.ceil() as u64)
            .saturating_sub(queue.len() as u64)
            .min(room);
        self.report.upcoming_estimate = want;
        // At most one lap of the hand per round: bounds a round on a pool that is all hot.
        let mut budget = nbuffers;
        while self.report.victims_queued < want && budget > 0 {
            if self.pool.bgwriter.stop.load(Ordering::Relaxed) {
                self.report.stopped = true;
                break;
            }
            budget -= 1;
            self.report.buffers_scanned += 1;
            let Some((id, s)) = self.pool.repl.sweep_step(&*self.pool.descs) else {
                continue;
            };
            // We hold the sweep's pin on an unpinned usage-0 buffer.
            let d = &self.pool.descs[id as usize];
            let pinned = BufferRef {
                pool: self.pool,
                id,
            };
            if s & DIRTY != 0 {
                if self.report.buffers_written >= self.limit {
                    self.report.hit_maxpages = true;
                    break;
                }
                if !d.content_lock.try_lock_shared() {
                    continue;
                }
                let result = self.pool.flush_locked(id, IoContext::Normal);
                // SAFETY: taken by the successful try_lock_shared above.
                unsafe { d.content_lock.unlock_shared() };
                match result {
                    Ok(true) => {
                        self.report.buffers_written += 1;
                        self.pool.mark_cleaned(id);
                        self.account(WriteDone::Written(pinned.tag()));
                    }
                    Ok(false) => {}
                    Err(e) => {
                        self.account(WriteDone::Failed(e));
                        continue;
                    }
                }
            }
            drop(pinned);
            if queue.push(id) {
                self.report.victims_queued += 1;
                self.report.reusable_found += 1;
            } else {
                break;
            }
        }
        debug_assert!(
            self.report.victims_queued <= want && self.report.buffers_written <= self.limit,
            "round queued {} of {want} victims and wrote {} pages (cap {})",
            self.report.victims_queued,
            self.report.buffers_written,
            self.limit
        );
    }
}
