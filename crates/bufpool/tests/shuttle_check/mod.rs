//! `shuttle::check_random` and `shuttle::check_pct` with a roomy stack for every modelled
//! thread, shared by the shuttle models (`tests/*_model.rs`, `tests/model.rs`).
//!
//! Shuttle's default stack for a modelled thread is 60 KiB. Opening a pool in a debug
//! build takes about 50 KiB of it (its frames hold the whole pool while it is built,
//! measured with gdb), so a model that opens a pool from a modelled thread sits near the
//! edge: a few more bytes of frames and the coroutine overflows into its guard page, and
//! the test dies of SIGSEGV, which hides which test and schedule it was.

// Each model uses one or both of the two.
#![allow(dead_code)]

/// Each modelled thread's stack.
pub const MODEL_STACK: usize = 1 << 20;

fn runner_config() -> shuttle::Config {
    let mut c = shuttle::Config::new();
    c.stack_size = MODEL_STACK;
    c
}

/// `shuttle::check_random` with [`MODEL_STACK`].
pub fn check_random(f: impl Fn() + Send + Sync + 'static, iterations: usize) {
    let scheduler = shuttle::scheduler::RandomScheduler::new(iterations);
    shuttle::Runner::new(scheduler, runner_config()).run(f);
}

/// `shuttle::check_pct` with [`MODEL_STACK`].
pub fn check_pct(f: impl Fn() + Send + Sync + 'static, iterations: usize, depth: usize) {
    let scheduler = shuttle::scheduler::PctScheduler::new(depth, iterations);
    shuttle::Runner::new(scheduler, runner_config()).run(f);
}
