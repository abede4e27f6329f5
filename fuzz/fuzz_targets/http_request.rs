//! libFuzzer entry for the `http_request` target; its body is `bufpool_fuzz::http_request` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bufpool_fuzz::http_request(data));
