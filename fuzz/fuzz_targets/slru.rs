//! libFuzzer entry for the `slru` target; its body is `bufpool_fuzz::slru` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bufpool_fuzz::slru(data));
