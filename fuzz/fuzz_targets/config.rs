//! libFuzzer entry for the `config` target; its body is `bufpool_fuzz::config` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bufpool_fuzz::config(data));
