//! libFuzzer entry for the `page` target; its body is `bufpool_fuzz::page` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bufpool_fuzz::page(data));
