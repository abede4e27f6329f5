//! The bgwriter's helper threads: they write a round's batches beside the round's own
//! thread, and wait between batches instead of being started for each one.
//!
//! Owns: [`WriterCrew`], a job (the buffer ids of one batch, a cursor into them and the
//! results) behind one mutex, and two condition variables: `work` (helpers wait for a job
//! or the end) and `done` (the caller waits for the helpers to finish a job).
//!
//! Why: a thread started per batch cost the bgwriter about a quarter of its CPU (clone,
//! mmap and munmap of the stack, and the TLB shootdown IPIs that munmap sends to the CPU a
//! client runs on); on 2 cores that time came out of the clients' (issue 12).
//!
//! Protocol: [`WriterCrew::run`] publishes a job under the mutex (a new generation, and how
//! many helpers may join it: `want`), wakes that many helpers and takes items itself; each
//! item is taken under the mutex and processed without it. A helper joins a generation at
//! most once and only while `joined < want`; the caller, once it has run out of items,
//! waits until no helper is `busy`, and then sets `want = 0` in the same critical section,
//! so no helper can join a finished job. A stop flag ends a job at each thread's next item.
//! Invariants: `busy` counts threads inside a job (the caller included); an item is taken
//! once; every taken item's result is in `results` before its taker leaves the job.
//! Locks: the crew's mutex only, never held while an item is processed.
//! The `sync` facade's primitives, so a shuttle model explores the protocol
//! (`model_tests` below); the bgwriter uses a crew only outside shuttle builds.

use crate::sync::{AtomicBool, Condvar, Mutex, MutexGuard, Ordering};

/// Helper threads that run a closure over a job's items beside the caller.
pub(super) struct WriterCrew<T> {
    helpers: usize,
    state: Mutex<Job<T>>,
    work: Condvar,
    done: Condvar,
}

struct Job<T> {
    items: Vec<u32>,
    next: usize,
    results: Vec<T>,
    generation: u64,
    want: usize,
    joined: usize,
    busy: usize,
    shutdown: bool,
}

impl<T: Send> WriterCrew<T> {
    /// A crew for `helpers` threads (started by the caller, each running [`Self::serve`]).
    pub(super) fn new(helpers: usize) -> Self {
        Self {
            helpers,
            state: Mutex::new(Job {
                items: Vec::new(),
                next: 0,
                results: Vec::new(),
                generation: 0,
                want: 0,
                joined: 0,
                busy: 0,
                shutdown: false,
            }),
            work: Condvar::new(),
            done: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Job<T>> {
        self.state.lock()
    }

    /// A helper thread's body: joins jobs until [`Self::shutdown`].
    pub(super) fn serve(&self, f: impl Fn(u32) -> T, stop: &AtomicBool) {
        let mut seen = 0;
        let mut g = self.lock();
        loop {
            while !(g.shutdown || g.generation != seen && g.joined < g.want) {
                g = self.work.wait(g);
            }
            if g.shutdown {
                return;
            }
            seen = g.generation;
            g.joined += 1;
            g.busy += 1;
            debug_assert!(
                g.joined <= g.want && g.busy <= self.helpers + 1,
                "helper joined as {} of {} allowed, {} busy with {} helpers",
                g.joined,
                g.want,
                g.busy,
                self.helpers
            );
            g = self.drain(g, &f, stop);
            g.busy -= 1;
            if g.busy == 0 {
                self.done.notify_all();
            }
        }
    }

    /// Takes items and runs `f` on them until none is left or `stop` is raised.
    fn drain<'g>(
        &'g self,
        mut g: MutexGuard<'g, Job<T>>,
        f: &impl Fn(u32) -> T,
        stop: &AtomicBool,
    ) -> MutexGuard<'g, Job<T>> {
        while !stop.load(Ordering::Relaxed) && g.next < g.items.len() {
            let id = g.items[g.next];
            g.next += 1;
            drop(g);
            let r = f(id);
            g = self.lock();
            g.results.push(r);
        }
        g
    }

    /// Runs `f` on every item, on the calling thread and at most `helpers` of the crew's,
    /// and returns the results (in completion order). Fewer results than items: `stop` was
    /// raised and the rest were not taken. One job at a time (the caller's `&mut` on the
    /// round state serializes them; a second caller would wait for the first's helpers).
    pub(super) fn run(
        &self,
        items: &[u32],
        helpers: usize,
        f: impl Fn(u32) -> T,
        stop: &AtomicBool,
    ) -> Vec<T> {
        let mut g = self.lock();
        while g.busy > 0 {
            g = self.done.wait(g);
        }
        g.items.clear();
        g.items.extend_from_slice(items);
        g.next = 0;
        g.results.clear();
        g.generation += 1;
        g.want = helpers.min(self.helpers).min(items.len().saturating_sub(1));
        g.joined = 0;
        g.busy = 1;
        for _ in 0..g.want {
            self.work.notify_one();
        }
        g = self.drain(g, &f, stop);
        g.busy -= 1;
        while g.busy > 0 {
            g = self.done.wait(g);
        }
        g.want = 0;
        // No thread is inside the job: every item taken has its result in.
        debug_assert!(
            g.results.len() == g.next && g.next <= g.items.len(),
            "{} results for {} items taken of {}",
            g.results.len(),
            g.next,
            g.items.len()
        );
        std::mem::take(&mut g.results)
    }

    /// Ends every helper's [`Self::serve`] (after the job it is in, if any).
    pub(super) fn shutdown(&self) {
        self.lock().shutdown = true;
        self.work.notify_all();
    }
}

#[cfg(all(test, not(shuttle)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Proves: every item of every job is processed exactly once, by the caller and the
    /// helpers together, across many jobs of varying size and helper counts. How: 3
    /// helper threads, 500 jobs; each item bumps its own counter.
    #[test]
    fn every_item_once_across_jobs() {
        let crew = WriterCrew::<(u32, bool)>::new(3);
        let stop = AtomicBool::new(false);
        let counts: Vec<AtomicUsize> = (0..64).map(|_| AtomicUsize::new(0)).collect();
        std::thread::scope(|s| {
            let f = |id: u32| {
                counts[id as usize].fetch_add(1, Ordering::Relaxed);
                // A little work, so helpers get a chance to join.
                std::hint::black_box((0..200).sum::<u32>());
                (id, true)
            };
            let (crew, stop) = (&crew, &stop);
            for _ in 0..3 {
                s.spawn(move || crew.serve(f, stop));
            }
            for job in 0..500u32 {
                let n = job % 64;
                let items: Vec<u32> = (0..n).collect();
                let mut got = crew.run(&items, (job % 4) as usize, f, stop);
                got.sort_unstable();
                let ids: Vec<u32> = got.iter().map(|r| r.0).collect();
                assert_eq!(ids, items, "job {job}");
            }
            crew.shutdown();
        });
        let total: usize = counts.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        assert_eq!(total, (0..500u32).map(|j| (j % 64) as usize).sum::<usize>());
    }

    /// Proves: a helper allowed into a job does take part (the job's writes overlap).
    /// How: two items, one helper; the caller's item waits until the helper's item has
    /// run (a timeout fails the test instead of hanging it).
    #[test]
    fn a_helper_takes_part() {
        let crew = WriterCrew::<u32>::new(1);
        let stop = AtomicBool::new(false);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let tx = std::sync::Mutex::new(tx);
        let rx = std::sync::Mutex::new(rx);
        let caller = std::thread::current().id();
        let f = |id: u32| {
            if std::thread::current().id() == caller {
                rx.lock()
                    .unwrap()
                    .recv_timeout(std::time::Duration::from_secs(30))
                    .expect("the helper never ran an item");
            } else {
                tx.lock().unwrap().send(()).unwrap();
            }
            id
        };
        std::thread::scope(|s| {
            let (crew, stop) = (&crew, &stop);
            s.spawn(move || crew.serve(f, stop));
            let mut got = crew.run(&[1, 2], 1, f, stop);
            got.sort_unstable();
            assert_eq!(got, vec![1, 2]);
            crew.shutdown();
        });
    }

    /// Proves: with no helper allowed, the caller processes the whole job alone (a job
    /// never waits for a helper that may not join).
    #[test]
    fn zero_helpers_runs_on_the_caller() {
        let crew = WriterCrew::<u32>::new(2);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| crew.serve(|id| id, &stop));
            }
            let me = std::thread::current().id();
            let got = crew.run(
                &[1, 2, 3],
                0,
                |id| {
                    assert_eq!(std::thread::current().id(), me);
                    id
                },
                &stop,
            );
            assert_eq!(got, vec![1, 2, 3]);
            crew.shutdown();
        });
    }

    /// Proves: a raised stop flag ends a job: items not yet taken are not processed.
    #[test]
    fn a_stop_ends_the_job_early() {
        let crew = WriterCrew::<u32>::new(1);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| crew.serve(|id| id, &stop));
            let items: Vec<u32> = (0..100).collect();
            let got = crew.run(
                &items,
                0,
                |id| {
                    if id == 9 {
                        stop.store(true, Ordering::Relaxed);
                    }
                    id
                },
                &stop,
            );
            assert_eq!(got, (0..10).collect::<Vec<_>>());
            crew.shutdown();
        });
    }
}

/// Run with `RUSTFLAGS="--cfg shuttle" cargo test -p pgbufpool --target-dir target/shuttle --lib writer_crew`.
#[cfg(all(test, shuttle))]
mod model_tests {
    use super::*;
    use crate::sync::{Arc, AtomicUsize};

    /// Proves: under random and PCT schedules, jobs run back to back never lose or repeat
    /// an item, never return before a helper that joined has finished (its result is in),
    /// never let a helper join a finished job (its item count would show it), and the
    /// crew shuts down (no thread left waiting: shuttle reports a deadlock otherwise).
    /// How: 2 helpers; the caller runs jobs of 0 to 3 items allowing 0 to 2 helpers;
    /// each item bumps its counter; results are checked against the items.
    fn jobs_back_to_back() {
        let crew = Arc::new(WriterCrew::<u32>::new(2));
        let stop = Arc::new(AtomicBool::new(false));
        let counts: Arc<Vec<AtomicUsize>> = Arc::new((0..3).map(|_| AtomicUsize::new(0)).collect());
        let helpers: Vec<_> = (0..2)
            .map(|_| {
                let (crew, stop, counts) = (crew.clone(), stop.clone(), counts.clone());
                shuttle::thread::spawn(move || {
                    crew.serve(
                        |id| {
                            counts[id as usize].fetch_add(1, Ordering::SeqCst);
                            id
                        },
                        &stop,
                    )
                })
            })
            .collect();
        let mut expected = [0usize; 3];
        for (n, want) in [(3u32, 2usize), (0, 2), (2, 1), (3, 0), (1, 2)] {
            let items: Vec<u32> = (0..n).collect();
            let mut got = crew.run(
                &items,
                want,
                |id| {
                    counts[id as usize].fetch_add(1, Ordering::SeqCst);
                    id
                },
                &stop,
            );
            got.sort_unstable();
            assert_eq!(got, items);
            for e in expected.iter_mut().take(n as usize) {
                *e += 1;
            }
            for (i, e) in expected.iter().enumerate() {
                assert_eq!(
                    counts[i].load(Ordering::SeqCst),
                    *e,
                    "item {i} after a job of {n}"
                );
            }
        }
        crew.shutdown();
        for h in helpers {
            h.join().unwrap();
        }
    }

    #[test]
    fn model_crew_random() {
        shuttle::check_random(jobs_back_to_back, 2000);
    }

    #[test]
    fn model_crew_pct() {
        shuttle::check_pct(jobs_back_to_back, 2000, 3);
    }
}
