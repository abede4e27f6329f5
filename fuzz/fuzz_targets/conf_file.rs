//! libFuzzer entry for the `conf_file` target; its body is `bufpool_fuzz::conf_file` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bufpool_fuzz::conf_file(data));
