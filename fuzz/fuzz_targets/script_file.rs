//! libFuzzer entry for the `script_file` target; its body is `bufpool_fuzz::script_file` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bufpool_fuzz::script_file(data));
