//! libFuzzer entry for the `control` target; its body is `bufpool_fuzz::control` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bufpool_fuzz::control(data));
