//! libFuzzer entry for the `socket_request` target; its body is `bufpool_fuzz::socket_request` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bufpool_fuzz::socket_request(data));
