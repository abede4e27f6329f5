//! libFuzzer entry for the `trace` target; its body is `bufpool_fuzz::trace` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bufpool_fuzz::trace(data));
